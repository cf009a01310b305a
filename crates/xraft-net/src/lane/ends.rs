//! The lane link's ends as [`xlane_host::lane_loop::LaneLoop`] drives them
//! (sans-IO: what they do with a slot or a datagram, never a socket):
//!
//! - [`LinkFill`]: the fill of each tree. The X-FD tree puts its
//!   heartbeat chunk in every slot; the replication tree is event-driven
//!   (a frame leaves as soon as its window is free) and goes only to the
//!   members its queued datagrams are for.
//! - [`LinkSink`]: the sink of each socket. The replication sink checks a
//!   frame per peer (tunnel, sequence, MAC) and reassembles raft's
//!   datagrams; the X-FD sink feeds the detector and takes the commit
//!   notices its heartbeats carry. Both leave what is for this member in an
//!   [`Inbox`] the link hands to raft after the loop's turn.

use super::control::{LaneStats, TreeIds, MAX_DATAGRAM, NOTICE_PRODUCER, RAFT_PRODUCER};
use crate::chunk_stream::StreamReassembler;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::Arc;
use xlane_auth::{Opener, ANY_RECEIVER};
use xlane_fd::{HeartbeatPayload, XFd, FD_PRODUCER};
use xlane_host::lane_loop::{FrameSink, SlotFill};
use xlane_host::runtime::{Sample, SendReport};
use xlane_host::socket::RxStamps;
use xlane_lane::{Delivery, Destinations, PeriodicReceiver, PeriodicSender};
use xlane_wire::{Frame, MAX_FRAME_LEN};

/// Opens `bytes` with `o` (when sealed) as a frame of member `from`
/// (`None`: any member, checked by the caller): the payload, or `None`
/// when it must be dropped.
fn open_frame<'a>(o: Option<&mut Opener>, bytes: &'a [u8]) -> Option<(&'a [u8], Option<u64>)> {
    match o {
        None => Some((bytes, None)),
        Some(o) => o
            .open(bytes, ANY_RECEIVER)
            .ok()
            .map(|x| (x.payload, Some(u64::from(x.sender)))),
    }
}

/// What raft datagrams one turn can complete for this member, bytes: the
/// chunks of a full turn's frames of one socket, and a datagram begun
/// earlier for each of a few peers. More is dropped and counted (Raft
/// retransmits).
pub const INBOX_BYTES: usize =
    xlane_host::lane_loop::RECV_BUDGET * MAX_FRAME_LEN + 4 * MAX_DATAGRAM;
/// Datagrams one turn can complete for this member.
pub const INBOX_DATAGRAMS: usize = 4096;

/// Raft datagrams a sink took in one turn, for the link to hand to raft
/// after it: the bytes of each, back to back, and who sent it. Sized when
/// made, never grown.
pub struct Inbox {
    bytes: Vec<u8>,
    items: Vec<(u64, usize, usize)>,
}

impl Inbox {
    /// An empty inbox of [`INBOX_BYTES`] and [`INBOX_DATAGRAMS`].
    pub fn new() -> Inbox {
        Inbox {
            bytes: Vec::with_capacity(INBOX_BYTES),
            items: Vec::with_capacity(INBOX_DATAGRAMS),
        }
    }

    /// Keeps `bytes` from member `from`; false (nothing kept) when full.
    pub fn push(&mut self, from: u64, bytes: &[u8]) -> bool {
        let start = self.bytes.len();
        if start + bytes.len() > self.bytes.capacity() || self.items.len() == self.items.capacity()
        {
            return false;
        }
        self.bytes.extend_from_slice(bytes);
        self.items.push((from, start, start + bytes.len()));
        true
    }

    /// Hands every datagram to `f` in the order they came, and empties.
    pub fn drain(&mut self, f: &mut dyn FnMut(u64, &[u8])) {
        for &(from, a, b) in &self.items {
            f(from, &self.bytes[a..b]);
        }
        self.items.clear();
        self.bytes.clear();
    }
}

impl Default for Inbox {
    fn default() -> Self {
        Inbox::new()
    }
}

/// The fill of one of the link's trees.
pub enum LinkFill {
    /// The replication tree: raft's datagrams are queued by the link as
    /// they come; a frame leaves when the tree's window is free.
    Repl {
        /// The peers (by index) that datagrams queued since the queue
        /// was last empty are for: a frame goes to them only, so a member
        /// is not woken by frames that carry nothing for it. One that
        /// misses a frame sees a gap in the tree's sequence, which costs it
        /// nothing (its stream had no datagram in progress: that would have
        /// kept it in the set).
        to: Destinations,
        /// Counters.
        stats: Arc<LaneStats>,
        /// Copies refused so far (to count the new ones).
        errors: u64,
    },
    /// The X-FD tree: the heartbeat chunk every slot, and the commit
    /// notices the link queued.
    Fd {
        /// This member's incarnation, in every heartbeat.
        incarnation: u64,
        /// Counters.
        stats: Arc<LaneStats>,
        /// Copies refused so far.
        errors: u64,
    },
}

impl SlotFill for LinkFill {
    fn fill(&mut self, core: &mut PeriodicSender, _slot_ns: u64) {
        if let LinkFill::Fd { incarnation, .. } = self {
            if core.pending_for(FD_PRODUCER) == 0 {
                let p = HeartbeatPayload {
                    incarnation: *incarnation,
                    counter: None,
                };
                // One 20-byte chunk; the queue keeps room for it (notices
                // are refused before the last slot).
                let _ = core.enqueue(FD_PRODUCER, &p.encode());
            }
        }
    }

    fn sent(&mut self, report: &SendReport) {
        let (stats, errors) = match self {
            LinkFill::Repl { stats, errors, .. } => {
                LaneStats::add(&stats.repl_frames_sent, 1);
                (stats, errors)
            }
            LinkFill::Fd { stats, errors, .. } => {
                LaneStats::add(&stats.fd_frames_sent, 1);
                (stats, errors)
            }
        };
        LaneStats::add(&stats.send_errors, report.send_errors - *errors);
        *errors = report.send_errors;
    }

    fn send_when_free(&self) -> bool {
        matches!(self, LinkFill::Repl { .. })
    }

    fn to(&self) -> Destinations {
        match self {
            LinkFill::Repl { to, .. } => *to,
            LinkFill::Fd { .. } => Destinations::ALL,
        }
    }
}

/// A peer as the replication sink knows it.
pub struct ReplPeer {
    /// Its node id.
    pub id: u64,
    /// Its raft address: where its frames come from.
    pub addr: SocketAddrV4,
    /// Its trees' ids.
    pub trees: TreeIds,
    /// Its tree, as received.
    pub rx: PeriodicReceiver,
    /// Its datagrams, as they are cut into chunks.
    pub stream: StreamReassembler,
}

/// The replication socket's sink.
pub struct ReplSink {
    /// This member.
    pub me: u64,
    /// In the detector's order.
    pub peers: Vec<ReplPeer>,
    /// Opens every frame first, when frames are sealed.
    pub open: Option<Opener>,
    /// The datagrams for this member.
    pub inbox: Inbox,
    /// Counters.
    pub stats: Arc<LaneStats>,
}

impl ReplSink {
    fn on_datagram(&mut self, st: &RxStamps, bytes: &[u8]) -> bool {
        let (me, stats, inbox) = (self.me, &self.stats, &mut self.inbox);
        let got = st.received;
        let Some(p) = self.peers.iter_mut().find(|p| p.addr == got.src) else {
            LaneStats::add(&stats.refused_frames, 1);
            return false;
        };
        if got.truncated {
            LaneStats::add(&stats.refused_frames, 1);
            return false;
        }
        // The MAC before anything reads the frame.
        let bytes = match open_frame(self.open.as_mut(), bytes) {
            Some((b, None)) => b,
            Some((b, Some(sender))) if sender == p.id => b,
            _ => {
                LaneStats::add(&stats.unauthenticated, 1);
                return false;
            }
        };
        // A frame with a chunk that failed its check is lost to the stream
        // as a whole (the gap in sequence drops the datagram in progress):
        // a chunk missing from the middle of a datagram would splice its
        // neighbours into one that raft would take as sent.
        if !chunks_intact(bytes) {
            LaneStats::add(&stats.refused_frames, 1);
            return false;
        }
        let ReplPeer { id, rx, stream, .. } = p;
        let res = rx.handle_datagram(got.rx_ns, bytes, &mut |c| {
            stream.frame(c.seq);
            if c.producer != RAFT_PRODUCER {
                return;
            }
            if let Ok(Some(dg)) = stream.push(c.data) {
                // to:u16 LE | raft datagram; the frame goes to every peer,
                // each keeps its own.
                if dg.len() > 2 && u16::from_le_bytes([dg[0], dg[1]]) as u64 == me {
                    take(inbox, stats, *id, &dg[2..]);
                }
            }
        });
        match res {
            Ok(_) => LaneStats::add(&stats.repl_frames_received, 1),
            Err(_) => LaneStats::add(&stats.refused_frames, 1),
        }
        res.is_ok()
    }
}

/// Whether every chunk of the frame in `bytes` passes its check (false
/// for a frame that does not parse: the receiver refuses it anyway).
fn chunks_intact(bytes: &[u8]) -> bool {
    Frame::new_checked(bytes).is_ok_and(|f| f.chunks().all(|c| c.is_ok()))
}

/// A datagram for this member into `inbox` (counted as delivered, or as
/// dropped when the inbox is full).
fn take(inbox: &mut Inbox, stats: &LaneStats, from: u64, bytes: &[u8]) {
    if inbox.push(from, bytes) {
        LaneStats::add(&stats.delivered, 1);
    } else {
        LaneStats::add(&stats.dropped, 1);
    }
}

/// A peer as the X-FD sink knows it.
pub struct FdPeer {
    /// Its node id.
    pub id: u64,
    /// Its address (its heartbeats come from its X-FD port there).
    pub ip: Ipv4Addr,
    /// Its commit notices, as they are cut into chunks.
    pub notices: StreamReassembler,
}

/// The X-FD socket's sink.
pub struct FdSink {
    /// This member.
    pub me: u64,
    /// The detector: one receive state per peer, in the peers' order.
    pub detector: XFd,
    /// In the detector's order.
    pub peers: Vec<FdPeer>,
    /// Opens every frame first, when frames are sealed.
    pub open: Option<Opener>,
    /// The notices for this member.
    pub inbox: Inbox,
    /// Counters.
    pub stats: Arc<LaneStats>,
}

impl FdSink {
    fn on_datagram(&mut self, st: &RxStamps, bytes: &[u8]) -> bool {
        let (me, stats, detector) = (self.me, &self.stats, &mut self.detector);
        let got = st.received;
        if got.truncated {
            detector.note_malformed();
            LaneStats::add(&stats.refused_frames, 1);
            return false;
        }
        // The MAC before anything reads the frame: the detector sees only
        // frames a member sealed from its own address.
        let peers = &mut self.peers;
        let bytes = match open_frame(self.open.as_mut(), bytes) {
            Some((b, None)) => b,
            Some((b, Some(sender)))
                if peers
                    .iter()
                    .any(|p| p.id == sender && p.ip == *got.src.ip()) =>
            {
                b
            }
            _ => {
                LaneStats::add(&stats.unauthenticated, 1);
                return false;
            }
        };
        // Validated once. The heartbeat first (arrival stamped before
        // anything else is done), then the notices of an accepted frame
        // only: replays and strangers are refused by the detector.
        let Ok(frame) = Frame::new_checked(bytes) else {
            // The detector counts it as it counts any bad heartbeat.
            let _ = detector.on_lane_datagram(got.rx_ns, got.src, bytes);
            LaneStats::add(&stats.refused_frames, 1);
            return false;
        };
        let Ok(i) = detector.on_lane_frame(got.rx_ns, got.src, &frame) else {
            LaneStats::add(&stats.refused_frames, 1);
            return false;
        };
        let Some(p) = peers.get_mut(i) else {
            return true;
        };
        // A notice that lost a chunk would be spliced: a damaged frame's
        // notices are dropped, with the one in progress.
        if frame.chunks().any(|c| c.is_err()) {
            p.notices.restart();
            return true;
        }
        p.notices.frame(frame.header().seq);
        for c in frame.chunks().flatten() {
            if c.producer != NOTICE_PRODUCER {
                continue;
            }
            let Ok(Some(n)) = p.notices.push(c.data) else {
                continue;
            };
            // Notice = to:u16 LE | raft datagram.
            if n.len() > 2 && u16::from_le_bytes([n[0], n[1]]) as u64 == me {
                LaneStats::add(&stats.notices_received, 1);
                take(&mut self.inbox, stats, p.id, &n[2..]);
            }
        }
        true
    }
}

/// The sink of one of the link's sockets.
pub enum LinkSink {
    /// The replication socket.
    Repl(ReplSink),
    /// The X-FD socket.
    Fd(Box<FdSink>),
}

impl FrameSink for LinkSink {
    // Both sinks take whole datagrams (they tell peers apart by source).
    fn on_chunk(&mut self, _d: Delivery<'_>) {}
    fn on_frame(&mut self, _s: Sample) {}

    fn on_datagram(&mut self, _core: &mut PeriodicReceiver, st: &RxStamps, bytes: &[u8]) -> bool {
        match self {
            LinkSink::Repl(r) => r.on_datagram(st, bytes),
            LinkSink::Fd(f) => f.on_datagram(st, bytes),
        }
    }

    fn poll_timeout(&self) -> Option<u64> {
        match self {
            LinkSink::Repl(_) => None,
            LinkSink::Fd(f) => f.detector.next_deadline(),
        }
    }

    fn on_timeout(&mut self, checked_ns: u64, drained: bool) {
        // Deadlines are judged only with every heartbeat that arrived by
        // `checked_ns` read: a full socket is no silence.
        if let (LinkSink::Fd(f), true) = (self, drained) {
            f.detector.check_deadlines(checked_ns);
        }
    }
}
