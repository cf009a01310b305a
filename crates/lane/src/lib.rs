//! # xlane-lane: periodic lane protocol cores, sans I/O
//!
//! The X-Lane communication model (paper §2.1): a process may send on a tunnel only
//! **once per period π**, and a packet may not exceed **σ bytes**. These cores turn
//! that contract into code without touching a socket or a clock: time comes in as
//! [`Nanos`] arguments, datagrams go out into caller buffers.
//!
//! * [`PeriodicSender`]: a fixed-capacity queue of pending chunks from several
//!   producers, packed round-robin into at most one frame per slot.
//! * [`Destinations`]: the destinations one frame goes to, when the sender
//!   replicates a frame to several receivers itself (with network replication a
//!   frame goes once, to a multicast group).
//! * [`PeriodicReceiver`]: validates frames, delivers chunks, and keeps loss,
//!   reordering, duplicate and rate-violation counters.
//! * [`SlotClock`]: the slot arithmetic the senders share.
//!
//! ## Call order (sender side, one lane thread)
//!
//! ```text
//! loop {
//!     let t = sender.poll_timeout();          // next slot start
//!     sleep/spin until t;  now = clock();
//!     sender.enqueue(..)*;                    // any time, from the bridge
//!     if let Some(tx) = sender.poll_transmit(now, &mut buf)? {
//!         stamp_send_time(&mut buf[..tx.len], clock()); send(&buf[..tx.len]);
//!     }
//! }
//! ```
//!
//! Receiver side: `rx_time = stamp(); receiver.handle_datagram(rx_time, bytes, &mut deliver)`.
//!
//! ## Hot path
//!
//! [`PeriodicSender::enqueue`], [`PeriodicSender::poll_transmit`],
//! [`PeriodicSender::transmit_now`] and [`PeriodicReceiver::handle_datagram`] never
//! allocate, lock or block, and do bounded work (at most one frame of ≤ 55 chunks).
//! All memory is allocated in the constructors.
#![warn(missing_docs)]
#![forbid(unsafe_code)]

mod destinations;
mod queue;
mod receiver;
mod sender;
#[cfg(any(test, feature = "sim"))]
pub mod sim;
mod slots;

pub use destinations::{Destinations, MAX_RECEIVERS};
pub use receiver::{Delivery, PeriodicReceiver, ReceiverStats, RxError, RxFrame};
pub use sender::{EnqueueError, PeriodicSender, SenderStats, Transmit, TransmitError};
pub use slots::{first_slot_after, Claim, SlotClock};

use xlane_wire::{Schema, HEADER_LEN, MAX_FRAME_LEN};

/// Nanoseconds on the caller's clock (the lane uses `CLOCK_REALTIME`/PTP time).
pub type Nanos = u64;

/// The parameters of one tunnel, fixed before the first message (paper §2.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TunnelParams {
    /// Tunnel id, written in every frame header.
    pub tunnel: u32,
    /// Period π in nanoseconds: at most one frame per period.
    pub period_ns: u64,
    /// σ: the largest frame (whole lane frame, header included) in bytes.
    pub max_packet: usize,
    /// Chunk layout of the frames.
    pub schema: Schema,
}

impl TunnelParams {
    /// Checks π > 0 and [`HEADER_LEN`] ≤ σ ≤ [`MAX_FRAME_LEN`].
    pub fn validate(&self) -> Result<(), ParamsError> {
        if self.period_ns == 0 {
            return Err(ParamsError::ZeroPeriod);
        }
        if self.max_packet < HEADER_LEN {
            return Err(ParamsError::PacketTooSmall {
                max_packet: self.max_packet,
                min: HEADER_LEN,
            });
        }
        if self.max_packet > MAX_FRAME_LEN {
            return Err(ParamsError::PacketTooLarge {
                max_packet: self.max_packet,
                max: MAX_FRAME_LEN,
            });
        }
        Ok(())
    }

    /// Chunks one frame of this tunnel can carry (0 if σ leaves no room for one).
    pub const fn chunks_per_frame(&self) -> usize {
        self.schema.chunks_within(self.max_packet)
    }
}

/// Why tunnel or sender parameters are refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ParamsError {
    /// π = 0.
    #[error("period must be > 0")]
    ZeroPeriod,
    /// σ smaller than a frame header.
    #[error("max packet {max_packet} B is below the {min} B header")]
    PacketTooSmall {
        /// σ given.
        max_packet: usize,
        /// Smallest σ.
        min: usize,
    },
    /// σ larger than a lane frame may be.
    #[error("max packet {max_packet} B exceeds {max} B")]
    PacketTooLarge {
        /// σ given.
        max_packet: usize,
        /// Largest σ.
        max: usize,
    },
    /// Queue capacity outside `1..=65535`.
    #[error("queue capacity {0} outside 1..=65535")]
    QueueCapacity(usize),
}
