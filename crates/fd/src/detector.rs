//! The sans-IO failure detector core.
//!
//! A [`Detector`] keeps a fixed table of peers (their heartbeat source
//! address and tunnel), a [`SuspicionModel`] per peer, and a bounded queue of
//! [`Event`]s. Time is always an argument.
//!
//! ## Call order (one thread)
//!
//! ```text
//! loop {
//!     for each datagram:  rx = stamp();  det.on_lane_datagram(rx, src, bytes)
//!                                         (or on_plain_datagram / on_heartbeat)
//!     now = clock();
//!     for ev in det.poll(now) { publish(ev) }
//!     sleep until min(det.next_deadline(), next send slot, next datagram)
//! }
//! ```
//!
//! ## Rules
//!
//! * A heartbeat from an address not in the table is counted
//!   ([`DetectorStats::unknown_sender`]) and ignored; so is one on another
//!   tunnel than the peer's ([`DetectorStats::unknown_tunnel`]), one whose
//!   `(incarnation, seq)` is not newer than the last accepted one
//!   ([`DetectorStats::replay`]), and anything that does not parse
//!   ([`DetectorStats::malformed`]).
//! * **Silence**: a heard peer is suspected ([`Reason::Silent`]) at the first
//!   instant its model's level exceeds the threshold (for X-FD: no heartbeat
//!   for `T + Λ`). The check runs in [`Detector::poll`] and also at every
//!   heartbeat of that peer before it is accepted, so the outcome depends on
//!   the arrival times only, not on how often `poll` is called.
//! * **Stall**: with `stall_periods = Some(k)`, a peer whose heartbeats carry an
//!   application counter is suspected ([`Reason::Stalled`]) when a heartbeat
//!   shows the same counter as the heartbeat `k` sequence numbers (periods)
//!   earlier or more: the host is alive, the application is stuck.
//! * A suspected peer **recovers** with the next heartbeat that is not stalled.
//! * A larger incarnation means the peer restarted: [`EventKind::Restarted`],
//!   and its model and counter history start over.
//! * A peer never heard stays [`Status::Unknown`] unless
//!   [`DetectorConfig::join_deadline`] is set: then it is suspected silent at
//!   that instant.
//!
//! ## Hot path
//!
//! `on_heartbeat`, `on_lane_datagram`, `on_plain_datagram` never allocate:
//! an O(log n) lookup, at most 55 chunk checks, O(1) model work (phi: a bounded
//! bisection for its deadline). `poll` and `next_deadline` are O(n) in the
//! peers. Memory is allocated in [`Detector::new`] only.

use crate::model::{Anchor, Arrival, FixedTimeout, ModelKind, PhiAccrual, SuspicionModel};
use crate::payload::{DecodeError, HeartbeatPayload, PlainHeartbeat, FD_PRODUCER};
use crate::Nanos;
use std::net::SocketAddrV4;
use xlane_wire::{ChunkError, Frame, FrameError};

/// Most peers one detector tracks.
pub const MAX_PEERS: usize = 4096;

/// One peer to track: where its heartbeats come from and on which tunnel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PeerSpec {
    /// Heartbeat source address and port.
    pub addr: SocketAddrV4,
    /// Tunnel of its heartbeats.
    pub tunnel: u32,
}

/// Why a peer specification did not parse.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PeerParseError {
    /// Not `ADDR:PORT`.
    #[error("bad peer address {0:?}: expected IPv4:PORT[/TUNNEL]")]
    Addr(String),
    /// The tunnel after `/` is not a u32.
    #[error("bad tunnel in peer {0:?}")]
    Tunnel(String),
}

impl PeerSpec {
    /// Parses `ADDR:PORT[/TUNNEL]`, the tunnel defaulting to `default_tunnel`.
    pub fn parse(s: &str, default_tunnel: u32) -> Result<Self, PeerParseError> {
        let (a, t) = match s.split_once('/') {
            Some((a, t)) => (
                a,
                t.trim()
                    .parse::<u32>()
                    .map_err(|_| PeerParseError::Tunnel(s.to_string()))?,
            ),
            None => (s, default_tunnel),
        };
        let addr = a
            .trim()
            .parse::<SocketAddrV4>()
            .map_err(|_| PeerParseError::Addr(s.to_string()))?;
        Ok(PeerSpec { addr, tunnel: t })
    }
}

/// One decoded heartbeat, as [`Detector::on_heartbeat`] takes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Heartbeat {
    /// Source address and port.
    pub peer: SocketAddrV4,
    /// Tunnel it came on.
    pub tunnel: u32,
    /// Sequence number (the lane frame's, or the plain heartbeat's).
    pub seq: u64,
    /// The sender's run.
    pub incarnation: u64,
    /// The application's liveness counter, if attached.
    pub counter: Option<u64>,
    /// Send time written by the sender, if any.
    pub send_ns: Option<Nanos>,
}

/// Why a peer is suspected.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Reason {
    /// No heartbeat in time (host, network or X-FD down).
    Silent,
    /// Heartbeats arrive but the application counter stopped (application stuck).
    Stalled,
}

/// What the detector currently thinks of a peer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase", tag = "state", content = "reason")]
pub enum Status {
    /// Never heard.
    Unknown,
    /// Trusted.
    Alive,
    /// Suspected of having failed.
    Suspected(Reason),
}

/// A change in what the detector thinks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase", tag = "kind", content = "reason")]
pub enum EventKind {
    /// First heartbeat of a peer.
    Joined,
    /// The peer is now suspected (also when the reason changes).
    Suspected(Reason),
    /// A suspected peer is trusted again.
    Recovered,
    /// The peer restarted (new incarnation).
    Restarted,
}

/// One event.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Event {
    /// Detector-wide event number, from 0, without gaps.
    pub number: u64,
    /// Peer index (as in the table).
    pub peer: usize,
    /// Peer address.
    pub addr: SocketAddrV4,
    /// When the detector noticed (the `now` of `poll`, or the arrival time).
    pub at_ns: Nanos,
    /// What happened.
    pub kind: EventKind,
}

/// Detector settings.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DetectorConfig {
    /// Heartbeat period T.
    pub period_ns: Nanos,
    /// Suspicion threshold in the model's unit (X-FD: Λ in ns).
    pub threshold: f64,
    /// Suspect a peer whose counter did not advance for this many periods.
    pub stall_periods: Option<u32>,
    /// Suspect peers never heard at this instant (`None`: never).
    pub join_deadline: Option<Nanos>,
}

/// Why a detector could not be built.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ConfigError {
    /// More than [`MAX_PEERS`] peers.
    #[error("{0} peers, at most {MAX_PEERS}")]
    TooManyPeers(usize),
    /// The same address twice.
    #[error("peer {0} listed twice")]
    DuplicatePeer(SocketAddrV4),
    /// Period 0.
    #[error("period must be > 0")]
    ZeroPeriod,
    /// Threshold NaN.
    #[error("threshold must be a number")]
    NanThreshold,
    /// `stall_periods = Some(0)`.
    #[error("stall periods must be ≥ 1")]
    ZeroStall,
    /// Bad phi parameters.
    #[error("{0}")]
    Phi(#[from] crate::model::PhiParamsError),
}

/// Why bytes were not a heartbeat at all.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MalformedError {
    /// Not a lane frame.
    #[error("not a lane frame: {0}")]
    Frame(#[from] FrameError),
    /// A lane frame without a heartbeat chunk.
    #[error("lane frame without a heartbeat chunk")]
    NoHeartbeat,
    /// The heartbeat chunk (or every chunk) was corrupt.
    #[error("corrupt chunk: {0}")]
    Chunk(#[from] ChunkError),
    /// The heartbeat bytes did not decode.
    #[error("bad heartbeat: {0}")]
    Payload(#[from] DecodeError),
    /// The datagram was cut by the receive buffer.
    #[error("truncated datagram")]
    Truncated,
}

/// Why a heartbeat was ignored (each is also counted in [`DetectorStats`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum HeartbeatError {
    /// Did not parse.
    #[error("malformed heartbeat: {0}")]
    Malformed(#[from] MalformedError),
    /// From an address not in the table.
    #[error("heartbeat from unknown sender {0}")]
    UnknownSender(SocketAddrV4),
    /// From a known peer, on another tunnel than its own.
    #[error("heartbeat of peer {peer} on tunnel {got}, expected {want}")]
    UnknownTunnel {
        /// Peer index.
        peer: usize,
        /// Tunnel in the heartbeat.
        got: u32,
        /// The peer's tunnel.
        want: u32,
    },
    /// Not newer than the last accepted heartbeat of this peer.
    #[error("replayed heartbeat of peer {peer}: ({incarnation}, {seq}) not after ({last_incarnation}, {last_seq})")]
    Replay {
        /// Peer index.
        peer: usize,
        /// Incarnation in the heartbeat.
        incarnation: u64,
        /// Sequence number in the heartbeat.
        seq: u64,
        /// Last accepted incarnation.
        last_incarnation: u64,
        /// Last accepted sequence number.
        last_seq: u64,
    },
}

/// Counters of a detector.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct DetectorStats {
    /// Heartbeats accepted.
    pub accepted: u64,
    /// Ignored: unknown sender address.
    pub unknown_sender: u64,
    /// Ignored: known sender, wrong tunnel.
    pub unknown_tunnel: u64,
    /// Ignored: sequence (incarnation, seq) not newer.
    pub replay: u64,
    /// Ignored: did not parse.
    pub malformed: u64,
    /// Suspected events emitted.
    pub suspicions: u64,
    /// Recovered events emitted.
    pub recoveries: u64,
    /// Events lost because the queue was full (poll more often).
    pub events_dropped: u64,
}

/// A read-only view of one peer.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct PeerView {
    /// Index in the table.
    pub index: usize,
    /// Heartbeat source.
    pub addr: SocketAddrV4,
    /// Its tunnel.
    pub tunnel: u32,
    /// Current status.
    pub status: Status,
    /// Heartbeats accepted.
    pub heartbeats: u64,
    /// Arrival time of the last accepted heartbeat.
    pub last_rx_ns: Option<Nanos>,
    /// Send time of the last accepted heartbeat.
    pub last_send_ns: Option<Nanos>,
    /// Its sequence number.
    pub last_seq: Option<u64>,
    /// The peer's current incarnation.
    pub incarnation: Option<u64>,
    /// Last application counter (None: no application attached).
    pub counter: Option<u64>,
    /// Arrival time of the heartbeat where the counter last changed.
    pub counter_changed_ns: Option<Nanos>,
    /// When the peer will be suspected silent if nothing arrives.
    pub deadline_ns: Option<Nanos>,
    /// The highest level reached just before an arrival (the longest
    /// silence, in the model's unit): the smallest threshold that would not
    /// have suspected this peer so far.
    pub max_level: Option<f64>,
    /// Times this peer was suspected.
    pub suspicions: u64,
}

#[derive(Clone, Debug)]
struct PeerState<M> {
    spec: PeerSpec,
    model: M,
    status: Status,
    heartbeats: u64,
    last: Option<(u64, u64)>,
    last_rx_ns: Option<Nanos>,
    last_send_ns: Option<Nanos>,
    counter: Option<u64>,
    counter_seq: u64,
    counter_changed_ns: Option<Nanos>,
    deadline_ns: Option<Nanos>,
    max_level: Option<f64>,
    suspicions: u64,
}

impl<M: SuspicionModel> PeerState<M> {
    /// A peer not heard from yet.
    fn fresh(spec: PeerSpec, mut model: M) -> Self {
        model.reset();
        PeerState {
            spec,
            model,
            status: Status::Unknown,
            heartbeats: 0,
            last: None,
            last_rx_ns: None,
            last_send_ns: None,
            counter: None,
            counter_seq: 0,
            counter_changed_ns: None,
            deadline_ns: None,
            max_level: None,
            suspicions: 0,
        }
    }
}

/// The (address key, index) table of `peers`, sorted by key.
fn index_of<M>(peers: &[PeerState<M>]) -> Box<[(u64, usize)]> {
    let mut index: Vec<(u64, usize)> = peers
        .iter()
        .enumerate()
        .map(|(i, p)| (key(p.spec.addr), i))
        .collect();
    index.sort_unstable();
    index.into_boxed_slice()
}

/// Fixed-capacity FIFO of events.
#[derive(Debug)]
struct EventQueue {
    buf: Box<[Option<Event>]>,
    head: usize,
    len: usize,
}

impl EventQueue {
    fn new(cap: usize) -> Self {
        EventQueue {
            buf: vec![None; cap].into_boxed_slice(),
            head: 0,
            len: 0,
        }
    }
    fn push(&mut self, e: Event) -> bool {
        if self.len == self.buf.len() {
            return false;
        }
        let i = (self.head + self.len) % self.buf.len();
        self.buf[i] = Some(e);
        self.len += 1;
        true
    }
    fn pop(&mut self) -> Option<Event> {
        if self.len == 0 {
            return None;
        }
        let e = self.buf[self.head].take();
        self.head = (self.head + 1) % self.buf.len();
        self.len -= 1;
        e
    }
    /// The same events, in order, each passed through `f` (`None` drops it), in a
    /// queue of capacity `cap` (at least the events kept).
    fn rebuilt(&mut self, cap: usize, mut f: impl FnMut(Event) -> Option<Event>) -> EventQueue {
        let kept: Vec<Event> = std::iter::from_fn(|| self.pop())
            .filter_map(&mut f)
            .collect();
        let mut q = EventQueue::new(cap.max(kept.len()));
        for e in kept {
            q.push(e);
        }
        q
    }
}

/// Draining iterator over the queued events (see [`Detector::poll`]).
pub struct Events<'a> {
    q: &'a mut EventQueue,
}

impl Iterator for Events<'_> {
    type Item = Event;
    fn next(&mut self) -> Option<Event> {
        self.q.pop()
    }
}

/// The failure detector core (see the module docs). `M` is the per-peer
/// suspicion model: [`XFd`] and the fixed-timeout baseline use
/// [`FixedTimeout`], [`PhiFd`] uses [`PhiAccrual`].
pub struct Detector<M> {
    cfg: DetectorConfig,
    peers: Box<[PeerState<M>]>,
    /// (address key, index), sorted by key.
    index: Box<[(u64, usize)]>,
    events: EventQueue,
    next_event: u64,
    stats: DetectorStats,
}

/// X-FD: fixed timeout `T + Λ` on lane heartbeats, with counter stalls.
pub type XFd = Detector<FixedTimeout>;
/// The phi-accrual baseline.
pub type PhiFd = Detector<PhiAccrual>;

fn key(a: SocketAddrV4) -> u64 {
    ((u32::from(*a.ip()) as u64) << 16) | a.port() as u64
}

impl XFd {
    /// X-FD with period T, threshold Λ (ns) after T, stall detection after `k`
    /// periods; silence counted from the last arrival.
    pub fn x_fd(
        period_ns: Nanos,
        lambda_ns: Nanos,
        stall_periods: Option<u32>,
        peers: &[PeerSpec],
    ) -> Result<Self, ConfigError> {
        Detector::new(
            DetectorConfig {
                period_ns,
                threshold: lambda_ns as f64,
                stall_periods,
                join_deadline: None,
            },
            FixedTimeout::new(period_ns, Anchor::Arrival),
            peers,
        )
    }

    /// The fixed-timeout baseline: suspected after `T + timeout_ns` of silence,
    /// no stall detection (feed it with [`Detector::on_plain_datagram`]).
    pub fn fixed_timeout(
        period_ns: Nanos,
        timeout_ns: Nanos,
        peers: &[PeerSpec],
    ) -> Result<Self, ConfigError> {
        Self::x_fd(period_ns, timeout_ns, None, peers)
    }
}

impl PhiFd {
    /// The phi-accrual baseline: suspected once φ > `phi`.
    pub fn phi(
        params: crate::model::PhiParams,
        phi: f64,
        peers: &[PeerSpec],
    ) -> Result<Self, ConfigError> {
        Detector::new(
            DetectorConfig {
                period_ns: params.period_ns,
                threshold: phi,
                stall_periods: None,
                join_deadline: None,
            },
            PhiAccrual::new(params)?,
            peers,
        )
    }
}

impl<M: SuspicionModel + Clone> Detector<M> {
    /// A detector for `peers` (each gets a clone of `model`). Allocates here only.
    pub fn new(cfg: DetectorConfig, model: M, peers: &[PeerSpec]) -> Result<Self, ConfigError> {
        if cfg.period_ns == 0 {
            return Err(ConfigError::ZeroPeriod);
        }
        if cfg.threshold.is_nan() {
            return Err(ConfigError::NanThreshold);
        }
        if cfg.stall_periods == Some(0) {
            return Err(ConfigError::ZeroStall);
        }
        if peers.len() > MAX_PEERS {
            return Err(ConfigError::TooManyPeers(peers.len()));
        }
        let mut index: Vec<(u64, usize)> = peers
            .iter()
            .enumerate()
            .map(|(i, p)| (key(p.addr), i))
            .collect();
        index.sort_unstable();
        if let Some(w) = index.windows(2).find(|w| w[0].0 == w[1].0) {
            return Err(ConfigError::DuplicatePeer(peers[w[1].1].addr));
        }
        let states = peers
            .iter()
            .map(|&spec| PeerState::fresh(spec, model.clone()))
            .collect();
        Ok(Detector {
            cfg,
            peers: states,
            index: index.into_boxed_slice(),
            events: EventQueue::new(64 + 4 * peers.len()),
            next_event: 0,
            stats: DetectorStats::default(),
        })
    }

    /// The settings.
    pub fn config(&self) -> DetectorConfig {
        self.cfg
    }

    /// The model kind.
    pub fn kind(&self) -> ModelKind {
        match self.peers.first() {
            Some(p) => p.model.kind(),
            None => ModelKind::TimeoutArrival,
        }
    }

    /// Number of peers.
    pub fn len(&self) -> usize {
        self.peers.len()
    }

    /// `true` with no peers.
    pub fn is_empty(&self) -> bool {
        self.peers.is_empty()
    }

    /// Index of the peer with this heartbeat source. O(log n).
    pub fn find(&self, addr: SocketAddrV4) -> Option<usize> {
        let k = key(addr);
        self.index
            .binary_search_by_key(&k, |e| e.0)
            .ok()
            .map(|i| self.index[i].1)
    }

    /// The index of peer `addr`, or [`HeartbeatError::UnknownSender`]
    /// (counted): the first check of every received heartbeat.
    fn known_sender(&mut self, addr: SocketAddrV4) -> Result<usize, HeartbeatError> {
        self.find(addr).ok_or_else(|| {
            self.stats.unknown_sender += 1;
            HeartbeatError::UnknownSender(addr)
        })
    }

    /// Changes the suspicion threshold (X-FD: Λ, when the tunnel's announced
    /// bound changes). The deadline of every peer heard so far moves with
    /// it; statuses stay until the next check or heartbeat.
    pub fn set_threshold(&mut self, threshold: f64) -> Result<(), ConfigError> {
        if threshold.is_nan() {
            return Err(ConfigError::NanThreshold);
        }
        self.cfg.threshold = threshold;
        for p in &mut self.peers {
            if p.heartbeats > 0 {
                p.deadline_ns = p.model.suspect_at(threshold);
            }
        }
        Ok(())
    }

    /// Peer `i`'s heartbeats come on `tunnel` from now on (e.g. the peer
    /// restarted and the controller granted it a new tree). The sequence
    /// history is kept: the new tunnel's first frame from a new incarnation
    /// is a restart as usual. False if there is no peer `i`.
    pub fn set_peer_tunnel(&mut self, i: usize, tunnel: u32) -> bool {
        match self.peers.get_mut(i) {
            Some(p) => {
                p.spec.tunnel = tunnel;
                true
            }
            None => false,
        }
    }

    /// The suspicion threshold in use.
    pub fn threshold(&self) -> f64 {
        self.cfg.threshold
    }

    /// Counters.
    pub fn stats(&self) -> DetectorStats {
        self.stats
    }

    /// A view of peer `i`.
    pub fn peer(&self, i: usize) -> Option<PeerView> {
        let p = self.peers.get(i)?;
        Some(PeerView {
            index: i,
            addr: p.spec.addr,
            tunnel: p.spec.tunnel,
            status: p.status,
            heartbeats: p.heartbeats,
            last_rx_ns: p.last_rx_ns,
            last_send_ns: p.last_send_ns,
            last_seq: p.last.map(|l| l.1),
            incarnation: p.last.map(|l| l.0),
            counter: p.counter,
            counter_changed_ns: p.counter_changed_ns,
            deadline_ns: p.deadline_ns,
            max_level: p.max_level,
            suspicions: p.suspicions,
        })
    }

    /// Views of all peers.
    pub fn peers(&self) -> impl Iterator<Item = PeerView> + '_ {
        (0..self.peers.len()).filter_map(|i| self.peer(i))
    }

    /// Peer `i`'s suspicion level at `now` (model unit).
    pub fn level(&self, i: usize, now: Nanos) -> Option<f64> {
        self.peers.get(i)?.model.level(now)
    }

    /// Starts watching one more peer (e.g. a member that joined) with its own
    /// `model` (reset here); it gets the next index and stays
    /// [`Status::Unknown`] until its first heartbeat. The other peers keep
    /// their state. Allocates (not for the hot path).
    pub fn add_peer(&mut self, spec: PeerSpec, model: M) -> Result<usize, ConfigError> {
        let n = self.peers.len();
        if n >= MAX_PEERS {
            return Err(ConfigError::TooManyPeers(n + 1));
        }
        if self.find(spec.addr).is_some() {
            return Err(ConfigError::DuplicatePeer(spec.addr));
        }
        let mut peers = std::mem::take(&mut self.peers).into_vec();
        peers.push(PeerState::fresh(spec, model));
        self.peers = peers.into_boxed_slice();
        self.index = index_of(&self.peers);
        self.events = self.events.rebuilt(64 + 4 * (n + 1), Some);
        Ok(n)
    }

    /// Stops watching peer `i` (e.g. a member that left) and returns its
    /// spec (`None`: no such peer). The peers after it move down one index,
    /// in the events still queued too; the removed peer's queued events are
    /// dropped. The other peers keep their state. Allocates.
    pub fn remove_peer(&mut self, i: usize) -> Option<PeerSpec> {
        if i >= self.peers.len() {
            return None;
        }
        let mut peers = std::mem::take(&mut self.peers).into_vec();
        let gone = peers.remove(i);
        self.peers = peers.into_boxed_slice();
        self.index = index_of(&self.peers);
        let cap = 64 + 4 * self.peers.len();
        self.events = self.events.rebuilt(cap, |mut e| match e.peer.cmp(&i) {
            std::cmp::Ordering::Less => Some(e),
            std::cmp::Ordering::Equal => None,
            std::cmp::Ordering::Greater => {
                e.peer -= 1;
                Some(e)
            }
        });
        Some(gone.spec)
    }

    /// Counts a datagram the I/O layer refused before parsing (e.g. cut by
    /// the receive buffer).
    pub fn note_malformed(&mut self) {
        self.stats.malformed += 1;
    }

    fn emit(&mut self, peer: usize, at_ns: Nanos, kind: EventKind) {
        match kind {
            EventKind::Suspected(_) => self.stats.suspicions += 1,
            EventKind::Recovered => self.stats.recoveries += 1,
            _ => {}
        }
        let e = Event {
            number: self.next_event,
            peer,
            addr: self.peers[peer].spec.addr,
            at_ns,
            kind,
        };
        if self.events.push(e) {
            self.next_event += 1;
        } else {
            self.stats.events_dropped += 1;
        }
    }

    fn set_status(&mut self, i: usize, now: Nanos, new: Status) {
        let old = self.peers[i].status;
        if old == new {
            return;
        }
        self.peers[i].status = new;
        match new {
            Status::Suspected(r) => {
                self.peers[i].suspicions += 1;
                self.emit(i, now, EventKind::Suspected(r));
            }
            Status::Alive => {
                if matches!(old, Status::Suspected(_)) {
                    self.emit(i, now, EventKind::Recovered);
                }
            }
            Status::Unknown => {}
        }
    }

    /// Suspects peer `i` silent if its deadline is at or before `now`.
    fn check_silence(&mut self, i: usize, now: Nanos) {
        let p = &self.peers[i];
        let due = match p.status {
            Status::Alive | Status::Suspected(Reason::Stalled) => {
                p.deadline_ns.is_some_and(|d| now >= d)
            }
            Status::Unknown => self.cfg.join_deadline.is_some_and(|d| now >= d),
            Status::Suspected(Reason::Silent) => false,
        };
        if due {
            self.set_status(i, now, Status::Suspected(Reason::Silent));
        }
    }

    /// Handles one decoded heartbeat that arrived at `rx_ns` (stamp first).
    /// Returns the peer index, or why it was ignored (and counted).
    ///
    /// No allocation; O(log n) plus O(1) model work.
    pub fn on_heartbeat(&mut self, rx_ns: Nanos, hb: &Heartbeat) -> Result<usize, HeartbeatError> {
        let i = self.known_sender(hb.peer)?;
        self.accept(i, rx_ns, hb)
    }

    fn accept(&mut self, i: usize, rx_ns: Nanos, hb: &Heartbeat) -> Result<usize, HeartbeatError> {
        let want = self.peers[i].spec.tunnel;
        if hb.tunnel != want {
            self.stats.unknown_tunnel += 1;
            return Err(HeartbeatError::UnknownTunnel {
                peer: i,
                got: hb.tunnel,
                want,
            });
        }
        if let Some((inc, seq)) = self.peers[i].last {
            if (hb.incarnation, hb.seq) <= (inc, seq) {
                self.stats.replay += 1;
                return Err(HeartbeatError::Replay {
                    peer: i,
                    incarnation: hb.incarnation,
                    seq: hb.seq,
                    last_incarnation: inc,
                    last_seq: seq,
                });
            }
        }
        self.stats.accepted += 1;
        // Was the peer already overdue when this heartbeat came?
        self.check_silence(i, rx_ns);
        let restarted = self.peers[i]
            .last
            .is_some_and(|(inc, _)| hb.incarnation > inc);
        let first = self.peers[i].heartbeats == 0;
        if restarted {
            self.emit(i, rx_ns, EventKind::Restarted);
        }
        let threshold = self.cfg.threshold;
        let k = self.cfg.stall_periods;
        let p = &mut self.peers[i];
        if restarted {
            p.model.reset();
            p.counter = None;
        }
        let before = p.model.on_arrival(Arrival {
            rx_ns,
            send_ns: hb.send_ns,
        });
        if let Some(l) = before {
            p.max_level = Some(p.max_level.map_or(l, |m| m.max(l)));
        }
        let stalled = match hb.counter {
            Some(c) => {
                if p.counter != Some(c) {
                    p.counter = Some(c);
                    p.counter_seq = hb.seq;
                    p.counter_changed_ns = Some(rx_ns);
                }
                k.is_some_and(|k| hb.seq.saturating_sub(p.counter_seq) >= k as u64)
            }
            None => {
                p.counter = None;
                false
            }
        };
        p.last = Some((hb.incarnation, hb.seq));
        p.last_rx_ns = Some(rx_ns);
        p.last_send_ns = hb.send_ns;
        p.heartbeats += 1;
        p.deadline_ns = p.model.suspect_at(threshold);
        if first {
            self.emit(i, rx_ns, EventKind::Joined);
        }
        let new = if stalled {
            Status::Suspected(Reason::Stalled)
        } else {
            Status::Alive
        };
        self.set_status(i, rx_ns, new);
        Ok(i)
    }

    /// Handles one lane datagram from `src` that arrived at `rx_ns`: the frame
    /// is validated, the first good chunk of producer [`FD_PRODUCER`] decoded
    /// as a [`HeartbeatPayload`]; tunnel, sequence and send time come from the
    /// frame header. Checks, in order: sender, frame, tunnel, chunk, payload,
    /// replay.
    ///
    /// No allocation; bounded work (≤ 55 chunk checks).
    pub fn on_lane_datagram(
        &mut self,
        rx_ns: Nanos,
        src: SocketAddrV4,
        bytes: &[u8],
    ) -> Result<usize, HeartbeatError> {
        let i = self.known_sender(src)?;
        let frame = match Frame::new_checked(bytes) {
            Ok(f) => f,
            Err(e) => return Err(self.malformed(e.into())),
        };
        self.accept_frame(i, rx_ns, src, &frame)
    }

    /// As [`Self::on_lane_datagram`] for a frame the caller has already
    /// validated (a caller that reads other chunks of the same frame
    /// validates it once). Checks, in order: sender, tunnel, chunk, payload,
    /// replay.
    pub fn on_lane_frame(
        &mut self,
        rx_ns: Nanos,
        src: SocketAddrV4,
        frame: &Frame<'_>,
    ) -> Result<usize, HeartbeatError> {
        let i = self.known_sender(src)?;
        self.accept_frame(i, rx_ns, src, frame)
    }

    fn accept_frame(
        &mut self,
        i: usize,
        rx_ns: Nanos,
        src: SocketAddrV4,
        frame: &Frame<'_>,
    ) -> Result<usize, HeartbeatError> {
        let h = frame.header();
        let want = self.peers[i].spec.tunnel;
        if h.tunnel != want {
            self.stats.unknown_tunnel += 1;
            return Err(HeartbeatError::UnknownTunnel {
                peer: i,
                got: h.tunnel,
                want,
            });
        }
        let mut first_err = None;
        let mut found = None;
        for c in frame.chunks() {
            match c {
                Ok(c) if c.producer == FD_PRODUCER => {
                    found = Some(HeartbeatPayload::decode(c.data));
                    break;
                }
                Ok(_) => {}
                Err(e) => {
                    first_err.get_or_insert(e);
                }
            }
        }
        let payload = match (found, first_err) {
            (Some(Ok(p)), _) => p,
            (Some(Err(e)), _) => return Err(self.malformed(e.into())),
            (None, Some(e)) => return Err(self.malformed(e.into())),
            (None, None) => return Err(self.malformed(MalformedError::NoHeartbeat)),
        };
        let hb = Heartbeat {
            peer: src,
            tunnel: h.tunnel,
            seq: h.seq,
            incarnation: payload.incarnation,
            counter: payload.counter,
            send_ns: Some(h.send_time_ns),
        };
        self.accept(i, rx_ns, &hb)
    }

    /// Handles one plain UDP heartbeat datagram ([`PlainHeartbeat`]), for the
    /// baselines. No allocation.
    pub fn on_plain_datagram(
        &mut self,
        rx_ns: Nanos,
        src: SocketAddrV4,
        bytes: &[u8],
    ) -> Result<usize, HeartbeatError> {
        let i = self.known_sender(src)?;
        let p = match PlainHeartbeat::decode(bytes) {
            Ok(p) => p,
            Err(e) => return Err(self.malformed(e.into())),
        };
        let hb = Heartbeat {
            peer: src,
            tunnel: p.tunnel,
            seq: p.seq,
            incarnation: p.incarnation,
            counter: p.counter,
            send_ns: None,
        };
        self.accept(i, rx_ns, &hb)
    }

    fn malformed(&mut self, e: MalformedError) -> HeartbeatError {
        self.stats.malformed += 1;
        HeartbeatError::Malformed(e)
    }

    /// Checks every peer's deadline at `now` and returns the queued events
    /// (those of earlier heartbeats first), draining the queue. O(n).
    ///
    /// The queue holds `64 + 4·peers` events; call `poll` after every batch
    /// of datagrams so it never overflows ([`DetectorStats::events_dropped`]).
    pub fn poll(&mut self, now: Nanos) -> Events<'_> {
        self.check_deadlines(now);
        Events {
            q: &mut self.events,
        }
    }

    /// The first half of [`Self::poll`]: checks every deadline at `now` and
    /// queues the resulting events. O(n).
    pub fn check_deadlines(&mut self, now: Nanos) {
        for i in 0..self.peers.len() {
            self.check_silence(i, now);
        }
    }

    /// The second half of [`Self::poll`]: takes the oldest queued event
    /// (for a caller that needs the detector between events). O(1).
    pub fn next_event(&mut self) -> Option<Event> {
        self.events.pop()
    }

    /// The next instant at which [`Self::poll`] may suspect someone: the
    /// earliest deadline of a trusted or stalled peer (or the join deadline
    /// while a peer is unknown). O(n).
    pub fn next_deadline(&self) -> Option<Nanos> {
        self.peers
            .iter()
            .filter_map(|p| match p.status {
                Status::Alive | Status::Suspected(Reason::Stalled) => p.deadline_ns,
                Status::Unknown => self.cfg.join_deadline,
                Status::Suspected(Reason::Silent) => None,
            })
            .min()
    }
}

/// What every detector offers, so a runner or a benchmark can drive X-FD and
/// the baselines alike (object safe).
pub trait FailureDetector {
    /// Which model.
    fn kind(&self) -> ModelKind;
    /// See [`Detector::on_heartbeat`].
    fn on_heartbeat(&mut self, rx_ns: Nanos, hb: &Heartbeat) -> Result<usize, HeartbeatError>;
    /// See [`Detector::poll`]; events go to `sink`.
    fn poll_events(&mut self, now: Nanos, sink: &mut dyn FnMut(&Event));
    /// See [`Detector::next_deadline`].
    fn next_deadline(&self) -> Option<Nanos>;
    /// See [`Detector::peer`].
    fn peer_view(&self, i: usize) -> Option<PeerView>;
    /// Number of peers.
    fn peer_count(&self) -> usize;
    /// Counters.
    fn stats(&self) -> DetectorStats;
}

impl<M: SuspicionModel + Clone> FailureDetector for Detector<M> {
    fn kind(&self) -> ModelKind {
        Detector::kind(self)
    }
    fn on_heartbeat(&mut self, rx_ns: Nanos, hb: &Heartbeat) -> Result<usize, HeartbeatError> {
        Detector::on_heartbeat(self, rx_ns, hb)
    }
    fn poll_events(&mut self, now: Nanos, sink: &mut dyn FnMut(&Event)) {
        for e in self.poll(now) {
            sink(&e);
        }
    }
    fn next_deadline(&self) -> Option<Nanos> {
        Detector::next_deadline(self)
    }
    fn peer_view(&self, i: usize) -> Option<PeerView> {
        self.peer(i)
    }
    fn peer_count(&self) -> usize {
        self.len()
    }
    fn stats(&self) -> DetectorStats {
        Detector::stats(self)
    }
}
