//! What a lane loop is made of: the two hooks an end gives it ([`SlotFill`]
//! for a sender, [`FrameSink`] for a receiver), the ends as they are added
//! ([`SenderSpec`], [`ReceiverSpec`]) and as the loop keeps them
//! ([`SenderEnd`], [`ReceiverEnd`]), and their handles.

use crate::runtime::{RecvReport, Sample, SendReport};
use crate::socket::{LaneSocket, RxStamps, TxStamp};
use crate::xdp::frame::FrameAddrs;
use std::net::SocketAddrV4;
use xlane_auth::{Opener, Sealer};
use xlane_lane::{Delivery, Destinations, PeriodicReceiver, PeriodicSender};

/// What a sender does at its slot, before the frame is built: enqueue the
/// chunks that should go out now. Closures `FnMut(&mut PeriodicSender, u64)`
/// are fills.
pub trait SlotFill: Send {
    /// Called once per due slot (`slot_ns`), right before the frame is built.
    fn fill(&mut self, core: &mut PeriodicSender, slot_ns: u64);
    /// Called after each frame left, with what the sender did so far (for
    /// an end that publishes its counters while it runs).
    fn sent(&mut self, _report: &SendReport) {}
    /// A transmit stamp of an earlier frame, read from the sender's socket
    /// (only a socket with [`LaneSocket::enable_tx_timestamps`]): the loop
    /// drains the error queue when the sender is next due, before its
    /// frame is built, so the reads never delay a receive.
    fn tx_stamp(&mut self, _stamp: TxStamp) {}
    /// Whether the sender is event-driven: instead of at its slots, it
    /// sends as soon as chunks wait and its window is free (at most one
    /// frame per window, [`PeriodicSender::transmit_now`]); an embedding
    /// loop that has just queued chunks calls [`LaneLoop::send_due`](super::LaneLoop::send_due) to let
    /// them go at once. X-Raft's replication tree sends so.
    fn send_when_free(&self) -> bool {
        false
    }
    /// The destinations the next frame goes to: indices into the sender's
    /// `dsts` ([`Destinations::ALL`] by default). X-Raft's replication tree
    /// leaves out the members its queued datagrams are not for.
    fn to(&self) -> Destinations {
        Destinations::ALL
    }
}

impl<F: FnMut(&mut PeriodicSender, u64) + Send> SlotFill for F {
    fn fill(&mut self, core: &mut PeriodicSender, slot_ns: u64) {
        self(core, slot_ns)
    }
}

/// Where a receiver's frames go, and its own deadlines.
pub trait FrameSink: Send {
    /// Every chunk of an accepted frame, in frame order (before `on_frame`).
    fn on_chunk(&mut self, d: Delivery<'_>);
    /// Every accepted frame, with its stamps.
    fn on_frame(&mut self, s: Sample);
    /// One datagram as it came (its MAC, if the receiver checks one,
    /// already opened), with its receive stamps and source; returns whether
    /// it was accepted (a refusal is counted in [`RecvReport::refused`]).
    ///
    /// By default the receiver's core checks it, and the chunks and stamps
    /// of an accepted frame go to [`Self::on_chunk`] and [`Self::on_frame`].
    /// A sink that tells several senders apart on one socket by their
    /// source address (X-FD's detector keeps one receive state per peer)
    /// takes the datagram itself instead and leaves `core` alone.
    fn on_datagram(&mut self, core: &mut PeriodicReceiver, st: &RxStamps, bytes: &[u8]) -> bool {
        let got = st.received;
        match core.handle_datagram(got.rx_ns, bytes, &mut |d| self.on_chunk(d)) {
            Ok(frame) => {
                self.on_frame(Sample {
                    seq: frame.seq,
                    send_ns: frame.send_time,
                    kernel_rx_ns: got.rx_ns,
                    user_rx_ns: got.user_ns,
                });
                true
            }
            Err(_) => false,
        }
    }
    /// The sink's own next deadline (`CLOCK_REALTIME` ns), if it has one:
    /// the loop wakes for it as for a sender's slot.
    fn poll_timeout(&self) -> Option<u64> {
        None
    }
    /// Called in the first turn at or after [`Self::poll_timeout`], after
    /// the turn read its sockets. `checked_ns` is the time taken before the
    /// reads; `drained` says that every ready socket was read empty, so no
    /// datagram stamped before `checked_ns` still waits unread (a deadline
    /// that arrivals can meet should be judged at `checked_ns`, and only
    /// when `drained`).
    fn on_timeout(&mut self, _checked_ns: u64, _drained: bool) {}
}

/// A sender to add.
pub struct SenderSpec<F> {
    /// Its socket (any namespace; never read by the loop).
    pub sock: LaneSocket,
    /// The protocol core (its first slot set).
    pub core: PeriodicSender,
    /// Where each frame goes (one address, or several: sender replication).
    pub dsts: Vec<SocketAddrV4>,
    /// No slot at or after this time is sent (`u64::MAX`: no end).
    pub until_ns: u64,
    /// What enqueues its chunks.
    pub fill: F,
    /// Seal every frame (for every receiver of its group).
    pub seal: Option<Sealer>,
    /// Send through an AF_XDP path's transmit ring instead of `sock`.
    pub xdp: Option<XdpSend>,
}

/// A sender's frames through the transmit ring of an AF_XDP path on its
/// interface ([`XdpRings::send`](crate::xdp::XdpRings::send)): written whole by the loop, one per
/// destination, with the addresses resolved when the sender was set up.
#[derive(Clone, Debug)]
pub struct XdpSend {
    /// The path.
    pub path: XdpId,
    /// One per destination, in the order of the sender's `dsts`
    /// ([`XdpRings::frame_addrs`](crate::xdp::XdpRings::frame_addrs)).
    pub addrs: Vec<FrameAddrs>,
}

/// A receiver to add.
pub struct ReceiverSpec<S> {
    /// Its socket (any namespace); the loop makes it non-blocking.
    pub sock: LaneSocket,
    /// The protocol core.
    pub core: PeriodicReceiver,
    /// Where its frames go.
    pub sink: S,
    /// Check every datagram's MAC first.
    pub open: Option<Opener>,
    /// The lane's own receive ring on the socket's interface
    /// ([`LaneLoop::add_xdp`](super::LaneLoop::add_xdp)): the socket's port joins the ring's ports,
    /// and frames come from its AF_XDP sockets as well as from `sock`
    /// (which keeps the multicast membership and gets whatever the program
    /// passes to the stack).
    pub xdp: Option<XdpId>,
}

/// A sender in the loop: the end as it was added, and what it did.
pub struct SenderEnd<F> {
    /// The sender as it was added (its fill and core as they are now).
    pub spec: SenderSpec<F>,
    /// Frames sent, refused copies, lateness.
    pub report: SendReport,
}

/// A receiver in the loop: the end as it was added, and what it saw.
pub struct ReceiverEnd<S> {
    /// The receiver as it was added (its sink and core as they are now).
    pub spec: ReceiverSpec<S>,
    /// Datagrams, refusals, stamps.
    pub report: RecvReport,
}

/// Handle of a sender in a loop.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SenderId(pub usize);
/// Handle of a receiver in a loop.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ReceiverId(pub usize);
/// Handle of an AF_XDP path in a loop.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct XdpId(pub usize);
