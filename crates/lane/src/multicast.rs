//! The periodic multicast sender: one frame per period for a whole receiver set.

use crate::sender::{EnqueueError, PeriodicSender, SenderStats, Transmit, TransmitError};
use crate::{Nanos, ParamsError, TunnelParams};

/// Most receivers a sender-replicated tunnel addresses.
pub const MAX_RECEIVERS: usize = 64;

/// Who copies a frame to the receivers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Replication {
    /// The network replicates (IP multicast group, switch replication): each frame
    /// is sent once, to destination index 0 (the group address).
    Network,
    /// The sender replicates (networks without multicast): each frame is sent, as
    /// the same bytes, to every active destination index `0..receivers`. All copies
    /// belong to the same slot; the I/O layer sends them back to back.
    Sender {
        /// Size of the receiver set (≤ [`MAX_RECEIVERS`]).
        receivers: usize,
    },
}

/// A fixed set of destination indices (a bitmap of up to [`MAX_RECEIVERS`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Destinations(u64);

impl Destinations {
    /// Number of destinations.
    pub fn len(&self) -> usize {
        self.0.count_ones() as usize
    }

    /// `true` if there is no destination.
    pub fn is_empty(&self) -> bool {
        self.0 == 0
    }

    /// `true` if index `i` is in the set.
    pub fn contains(&self, i: usize) -> bool {
        i < MAX_RECEIVERS && self.0 & (1 << i) != 0
    }

    /// The indices, ascending.
    pub fn iter(&self) -> impl Iterator<Item = usize> {
        let mut m = self.0;
        core::iter::from_fn(move || {
            if m == 0 {
                return None;
            }
            let i = m.trailing_zeros() as usize;
            m &= m - 1;
            Some(i)
        })
    }
}

/// One frame and where to send it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MulticastTransmit {
    /// The frame (in the caller's buffer).
    pub transmit: Transmit,
    /// Destination indices that get `buf[..transmit.len]`.
    pub destinations: Destinations,
}

/// A receiver index outside the receiver set.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("receiver index {index} outside 0..{receivers}")]
pub struct ReceiverIndexError {
    /// Index given.
    pub index: usize,
    /// Size of the receiver set.
    pub receivers: usize,
}

/// Periodic multicast sender (paper §2.1): the slot rules, queue and packing of
/// [`PeriodicSender`] (which it wraps), plus the destination set of each frame.
pub struct PeriodicMulticastSender {
    sender: PeriodicSender,
    mode: Replication,
    active: Destinations,
}

impl PeriodicMulticastSender {
    /// A multicast sender whose slot 0 starts at `first_slot`. In
    /// [`Replication::Sender`] mode all receivers start active.
    pub fn new(
        params: TunnelParams,
        first_slot: Nanos,
        mode: Replication,
    ) -> Result<Self, ParamsError> {
        Self::with_capacity(
            params,
            first_slot,
            mode,
            PeriodicSender::DEFAULT_QUEUE_CAPACITY,
        )
    }

    /// As [`Self::new`] with a queue of `capacity` chunks (1..=65535).
    pub fn with_capacity(
        params: TunnelParams,
        first_slot: Nanos,
        mode: Replication,
        capacity: usize,
    ) -> Result<Self, ParamsError> {
        let active = match mode {
            Replication::Network => Destinations(1),
            Replication::Sender { receivers } if receivers > MAX_RECEIVERS => {
                return Err(ParamsError::TooManyReceivers(receivers))
            }
            Replication::Sender { receivers: 64 } => Destinations(u64::MAX),
            Replication::Sender { receivers } => Destinations((1u64 << receivers) - 1),
        };
        Ok(PeriodicMulticastSender {
            sender: PeriodicSender::with_capacity(params, first_slot, capacity)?,
            mode,
            active,
        })
    }

    /// The replication mode.
    pub fn mode(&self) -> Replication {
        self.mode
    }

    /// Includes or excludes a receiver (sender replication; in network mode the set
    /// is always `{0}` and this only checks the index).
    pub fn set_receiver(&mut self, index: usize, active: bool) -> Result<(), ReceiverIndexError> {
        let receivers = match self.mode {
            Replication::Network => 1,
            Replication::Sender { receivers } => receivers,
        };
        if index >= receivers {
            return Err(ReceiverIndexError { index, receivers });
        }
        if let Replication::Sender { .. } = self.mode {
            if active {
                self.active.0 |= 1 << index;
            } else {
                self.active.0 &= !(1 << index);
            }
        }
        Ok(())
    }

    /// The current destination set.
    pub fn destinations(&self) -> Destinations {
        self.active
    }

    /// See [`PeriodicSender::enqueue`]. No allocation.
    pub fn enqueue(&mut self, producer: u8, data: &[u8]) -> Result<(), EnqueueError> {
        self.sender.enqueue(producer, data)
    }

    /// See [`PeriodicSender::poll_timeout`].
    pub fn poll_timeout(&self) -> Nanos {
        self.sender.poll_timeout()
    }

    /// See [`PeriodicSender::poll_transmit`]; the frame is built once and goes to
    /// every index of `destinations`. No allocation.
    pub fn poll_transmit(
        &mut self,
        now: Nanos,
        buf: &mut [u8],
    ) -> Result<Option<MulticastTransmit>, TransmitError> {
        let dst = self.active;
        Ok(self
            .sender
            .poll_transmit(now, buf)?
            .map(|transmit| MulticastTransmit {
                transmit,
                destinations: dst,
            }))
    }

    /// See [`PeriodicSender::transmit_now`]. No allocation.
    pub fn transmit_now(
        &mut self,
        now: Nanos,
        buf: &mut [u8],
    ) -> Result<MulticastTransmit, TransmitError> {
        let transmit = self.sender.transmit_now(now, buf)?;
        Ok(MulticastTransmit {
            transmit,
            destinations: self.active,
        })
    }

    /// The wrapped sender (pending counts, heartbeat mode, slot grid).
    pub fn sender(&self) -> &PeriodicSender {
        &self.sender
    }

    /// The wrapped sender, mutable.
    pub fn sender_mut(&mut self) -> &mut PeriodicSender {
        &mut self.sender
    }

    /// Counters (one frame counts once, whatever the number of copies).
    pub fn stats(&self) -> SenderStats {
        self.sender.stats()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use xlane_wire::{Schema, MAX_FRAME_LEN};

    fn params() -> TunnelParams {
        TunnelParams {
            tunnel: 1,
            period_ns: 100,
            max_packet: MAX_FRAME_LEN,
            schema: Schema::Chunk36,
        }
    }

    #[test]
    fn network_mode_sends_once_to_the_group() {
        let mut m = PeriodicMulticastSender::new(params(), 0, Replication::Network).unwrap();
        let mut buf = [0u8; MAX_FRAME_LEN];
        m.enqueue(0, b"hb").unwrap();
        let tx = m.poll_transmit(0, &mut buf).unwrap().unwrap();
        assert_eq!(tx.destinations.iter().collect::<Vec<_>>(), [0]);
        assert_eq!(
            m.set_receiver(1, true),
            Err(ReceiverIndexError {
                index: 1,
                receivers: 1
            })
        );
        assert_eq!(m.poll_transmit(50, &mut buf), Ok(None));
    }

    #[test]
    fn sender_mode_lists_active_receivers() {
        let mode = Replication::Sender { receivers: 5 };
        let mut m = PeriodicMulticastSender::new(params(), 0, mode).unwrap();
        m.set_receiver(2, false).unwrap();
        let mut buf = [0u8; MAX_FRAME_LEN];
        let tx = m.transmit_now(10, &mut buf).unwrap();
        assert_eq!(tx.destinations.iter().collect::<Vec<_>>(), [0, 1, 3, 4]);
        assert_eq!(tx.destinations.len(), 4);
        assert_eq!(
            m.transmit_now(20, &mut buf),
            Err(TransmitError::TooEarly { next_slot: 100 })
        );
        let all = PeriodicMulticastSender::new(params(), 0, Replication::Sender { receivers: 64 })
            .unwrap();
        assert_eq!(all.destinations().len(), 64);
        assert_eq!(
            PeriodicMulticastSender::new(params(), 0, Replication::Sender { receivers: 65 }).err(),
            Some(ParamsError::TooManyReceivers(65))
        );
    }
}
