//! The X-FD runner: one thread, one UDP socket, sending and receiving,
//! driven by the lane loop ([`LaneLoop`], the one lane driver).
//!
//! The runner's thread runs a [`LaneLoop`] holding one sender and one
//! receiver, both on the heartbeat socket (bounded work per turn, no
//! allocation once started):
//!
//! 1. the sender is a lane sender of the loop: at each slot the heartbeat
//!    fill reads the application's liveness counter once and puts it in a
//!    heartbeat chunk, the loop builds the frame of this period, stamps its
//!    send time right before the system call and sends it to the group (or
//!    to every peer, with one `sendmmsg`: sender replication);
//! 2. the receiver's sink is the detector: each datagram comes with its
//!    kernel receive stamp, taken when the packet entered the stack, before
//!    this thread saw it, and with its source address (the detector keeps
//!    one receive state per peer); the peer's table entry is republished
//!    and its events published;
//! 3. the detector's deadlines are the sink's deadlines: they are checked
//!    at the time taken just before the turn's reads, and only when the
//!    reads emptied the socket (so a heartbeat already in the socket is
//!    never overtaken by its own deadline); the table's counters and
//!    update time are published at least every [`TOUCH_NS`];
//! 4. the loop sleeps until the next slot, the next deadline or a datagram
//!    (`epoll`), or spins ([`WaitMode::BusyPoll`]).
//!
//! The socket is bound once; the heartbeat source address (address and
//! port) is what peers know this host by. With a multicast group the socket
//! is bound to `0.0.0.0:port`, joins the group on the interface address and
//! sends through it (loopback of own multicast off); without one, it is bound
//! to `address:port` and sends to every peer's address. So one peer list can
//! be given to every host: each runner drops its own address from it.
//!
//! The baseline transport ([`Transport::Plain`]) sends [`PlainHeartbeat`]s on
//! a best-effort socket (DSCP 0) every period, at the sink's deadline in the
//! same loop (they are not lane frames: no slot clock, no send stamp).
//!
//! With [`RunConfig::auth`], every heartbeat carries a MAC
//! ([`xlane_auth`]: key id, sender, sequence number, SipHash-2-4 tag) and
//! every datagram is checked before any decoding: a forged, replayed or
//! unkeyed one, or one sealed by another sender than its source address,
//! is counted ([`RunReport::auth`]) and dropped, so it cannot keep a dead
//! peer alive.

use crate::detector::{Event, PeerSpec, XFd};
use crate::model::{Anchor, FixedTimeout};
use crate::payload::{HeartbeatPayload, PlainHeartbeat, FD_PRODUCER};
use crate::shm::{LivenessCounter, ShmError, TableConfig, TableStats, TableWriter};
use crate::{Detector, DetectorConfig, DetectorStats};
use std::io;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use xlane_auth::{seal_if_keyed, KeyRing, Opener, Sealer, ANY_RECEIVER, TRAILER_LEN};
use xlane_host::lane_loop::{
    FrameSink, LaneLoop, ReceiverId, ReceiverSpec, SenderId, SenderSpec, SlotFill,
};
use xlane_host::runtime::{
    lock_memory, place_current_thread, wait_until, Placement, RuntimeError, Sample, SendReport,
    WaitMode,
};
use xlane_host::socket::{realtime_ns, LaneSocket, RxStamps, SocketConfig, SocketError};
use xlane_lane::{
    first_slot_after, Delivery, ParamsError, PeriodicReceiver, PeriodicSender, TunnelParams,
    MAX_RECEIVERS,
};
use xlane_wire::{Schema, HEADER_LEN, MAX_FRAME_LEN};

/// Longest time between two publications of the table's counters and
/// update time.
pub const TOUCH_NS: u64 = 50_000_000;

/// How heartbeats travel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    /// Lane frames from the periodic multicast sender on an express socket (X-FD).
    Lane,
    /// Plain UDP heartbeats on a best-effort socket (the baselines).
    Plain,
}

/// Everything a runner needs.
#[derive(Clone, Debug)]
pub struct RunConfig {
    /// This host's heartbeat address (interface address and port, port ≠ 0).
    pub addr: SocketAddrV4,
    /// Multicast group to send to and receive from (`None`: unicast to peers).
    pub group: Option<SocketAddrV4>,
    /// The hosts to watch (this host's own address may be in the list).
    pub peers: Vec<PeerSpec>,
    /// Tunnel of this host's heartbeats.
    pub tunnel: u32,
    /// Heartbeat period T, ns.
    pub period_ns: u64,
    /// Λ, ns: a peer is suspected after `T + Λ` of silence.
    pub lambda_ns: u64,
    /// Suspect a peer whose counter did not advance for this many periods.
    pub stall_periods: Option<u32>,
    /// Suspect peers never heard this long after start (`None`: never).
    pub join_grace_ns: Option<u64>,
    /// Count silence from the last arrival or from the last send time.
    pub anchor: Anchor,
    /// Lane or plain UDP.
    pub transport: Transport,
    /// The application's liveness counter (created if absent); `None`: heartbeats carry no counter.
    pub counter: Option<PathBuf>,
    /// The alive table to publish.
    pub table: PathBuf,
    /// Event slots of the table's ring.
    pub event_capacity: usize,
    /// Core and `SCHED_FIFO` priority of the runner thread.
    pub placement: Placement,
    /// Sleep or spin.
    pub mode: WaitMode,
    /// Lock memory (`mlockall`); a failure is only a warning in the report.
    pub lock_memory: bool,
    /// Stop at this `CLOCK_REALTIME` instant (`u64::MAX`: never).
    pub until_ns: u64,
    /// Authenticated heartbeats: seal what is sent, refuse what does not
    /// open (`None`: source addresses only).
    pub auth: Option<FdAuth>,
}

impl RunConfig {
    /// A runner at `addr` sending heartbeats on `tunnel` every `period_ns`
    /// to each of `peers` (unicast) and suspecting one after
    /// `period_ns + lambda_ns` of silence, publishing into `table`; the
    /// rest as a plain start: no counter, no stall rule, arrival anchor,
    /// lane transport, the calling thread where it is, sleeping between
    /// turns, no memory lock, no end, no MACs. Change fields to taste.
    pub fn new(
        addr: SocketAddrV4,
        tunnel: u32,
        peers: Vec<PeerSpec>,
        period_ns: u64,
        lambda_ns: u64,
        table: PathBuf,
    ) -> RunConfig {
        RunConfig {
            addr,
            group: None,
            peers,
            tunnel,
            period_ns,
            lambda_ns,
            stall_periods: None,
            join_grace_ns: None,
            anchor: Anchor::Arrival,
            transport: Transport::Lane,
            counter: None,
            table,
            event_capacity: 1024,
            placement: Placement {
                core: None,
                fifo: None,
            },
            mode: WaitMode::Interrupt,
            lock_memory: false,
            until_ns: u64::MAX,
            auth: None,
        }
    }
}

/// The keys of authenticated heartbeats.
#[derive(Clone, Debug)]
pub struct FdAuth {
    /// The keys accepted (every peer's group key).
    pub ring: KeyRing,
    /// The key this host seals with (in `ring`).
    pub key_id: u32,
}

/// What the MAC check did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct AuthCounts {
    /// Datagrams that opened.
    pub accepted: u64,
    /// Refused: too short to carry a MAC (an unauthenticated sender).
    pub unsealed: u64,
    /// Refused: an unknown key.
    pub unkeyed: u64,
    /// Refused: a bad tag.
    pub forged: u64,
    /// Refused: seen before or too old.
    pub replayed: u64,
    /// Refused: sealed by another sender than the source address, or a
    /// sender table full.
    pub wrong_sender: u64,
}

/// Why the runner could not start or stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// A setting is unusable.
    #[error("{0}")]
    Usage(String),
    /// The detector refused its configuration.
    #[error("detector: {0}")]
    Detector(#[from] crate::ConfigError),
    /// The lane sender refused its parameters.
    #[error("lane parameters: {0}")]
    Params(#[from] ParamsError),
    /// The socket could not be set up.
    #[error("socket: {0}")]
    Socket(#[from] SocketError),
    /// A shared file could not be set up.
    #[error("shared memory: {0}")]
    Shm(#[from] ShmError),
    /// Placing the thread failed.
    #[error("runtime: {0}")]
    Runtime(#[from] RuntimeError),
    /// The lane loop could not be set up, or failed while it ran
    /// (receiving, waiting).
    #[error("lane loop: {0}")]
    Loop(io::Error),
}

/// What a run did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct RunReport {
    /// Detector counters.
    pub detector: DetectorStats,
    /// Heartbeats sent (frames; each to every destination).
    pub heartbeats_sent: u64,
    /// `sendto` failures.
    pub send_errors: u64,
    /// Periods skipped because the runner was late.
    pub late_slots: u64,
    /// Worst lateness of a heartbeat after its slot, ns.
    pub max_lateness_ns: u64,
    /// Datagrams received.
    pub datagrams: u64,
    /// Datagrams cut by the buffer (counted malformed too).
    pub truncated: u64,
    /// Datagrams without a kernel stamp (user-space time used).
    pub user_stamps: u64,
    /// Events published.
    pub events: u64,
    /// `mlockall` failed (pages may fault in).
    pub memory_unlocked: bool,
    /// The MAC check (zeros without [`RunConfig::auth`]).
    pub auth: AuthCounts,
}

/// How this host's heartbeats will be sent.
enum Sender {
    /// A lane sender of the loop.
    Lane(Box<PeriodicSender>),
    /// Plain heartbeats from the sink's deadline, the first at `first_slot`.
    Plain { first_slot: u64 },
}

/// A started runner: socket bound, table created, nothing sent yet.
pub struct Service {
    cfg: RunConfig,
    sock: LaneSocket,
    detector: XFd,
    table: TableWriter,
    counter: Option<LivenessCounter>,
    sender: Sender,
    dsts: Vec<SocketAddrV4>,
    incarnation: u64,
    auth: Option<(Sealer, Opener)>,
}

/// The sender id a host seals with: its heartbeat address's IPv4 address.
fn sender_id(addr: SocketAddrV4) -> u32 {
    u32::from(*addr.ip())
}

/// The tunnel of this host's heartbeats: one 20-byte chunk per frame.
fn tunnel_params(cfg: &RunConfig) -> TunnelParams {
    TunnelParams {
        tunnel: cfg.tunnel,
        period_ns: cfg.period_ns,
        max_packet: HEADER_LEN + Schema::Chunk26.chunk_len(),
        schema: Schema::Chunk26,
    }
}

impl Service {
    /// Binds the socket, builds the detector, creates the table (and the
    /// counter file if absent). Does not place the thread.
    pub fn start(cfg: RunConfig) -> Result<Self, RunError> {
        if cfg.addr.port() == 0 || cfg.addr.ip().is_unspecified() {
            return Err(RunError::Usage(format!(
                "heartbeat address {} needs a specific address and a port",
                cfg.addr
            )));
        }
        if cfg.period_ns == 0 {
            return Err(RunError::Usage("period must be > 0".into()));
        }
        let auth = match &cfg.auth {
            Some(a) => {
                let key = a.ring.get(a.key_id).ok_or_else(|| {
                    RunError::Usage(format!("key {} is not in the key file", a.key_id))
                })?;
                Some((
                    Sealer::new(a.key_id, key.clone(), sender_id(cfg.addr)),
                    Opener::new(a.ring.clone()),
                ))
            }
            None => None,
        };
        let peers: Vec<PeerSpec> = cfg
            .peers
            .iter()
            .copied()
            .filter(|p| p.addr != cfg.addr)
            .collect();
        let now = realtime_ns();
        let detector = Detector::new(
            DetectorConfig {
                period_ns: cfg.period_ns,
                threshold: cfg.lambda_ns as f64,
                stall_periods: cfg.stall_periods,
                join_deadline: cfg.join_grace_ns.map(|g| now.saturating_add(g)),
            },
            FixedTimeout::new(cfg.period_ns, cfg.anchor),
            &peers,
        )?;
        let mut sc = match cfg.transport {
            Transport::Lane => SocketConfig::express(cfg.addr),
            Transport::Plain => SocketConfig::plain(cfg.addr),
        };
        sc.nonblocking = true;
        sc.rx_timestamps = true;
        sc.rcvbuf = 1 << 20;
        if let Some(g) = cfg.group {
            if !g.ip().is_multicast() {
                return Err(RunError::Usage(format!("{g} is not a multicast group")));
            }
            if g.port() != cfg.addr.port() {
                return Err(RunError::Usage(format!(
                    "the group port {} must be the heartbeat port {} (one socket sends and receives)",
                    g.port(),
                    cfg.addr.port()
                )));
            }
            sc.bind = SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, cfg.addr.port());
            sc.join = Some((*g.ip(), *cfg.addr.ip()));
            sc.multicast_if = Some(*cfg.addr.ip());
        }
        let sock = LaneSocket::open(&sc)?;
        let dsts: Vec<SocketAddrV4> = match cfg.group {
            Some(g) => vec![g],
            None => peers.iter().map(|p| p.addr).collect(),
        };
        let first_slot = first_slot_after(now, cfg.period_ns);
        let sender = match cfg.transport {
            Transport::Lane => {
                if cfg.group.is_none() && dsts.len() > MAX_RECEIVERS {
                    return Err(RunError::Usage(format!(
                        "{} unicast peers; at most {MAX_RECEIVERS} without a multicast group",
                        dsts.len()
                    )));
                }
                Sender::Lane(Box::new(PeriodicSender::new(
                    tunnel_params(&cfg),
                    first_slot,
                )?))
            }
            Transport::Plain => Sender::Plain { first_slot },
        };
        let counter = match &cfg.counter {
            Some(p) => Some(LivenessCounter::open_or_create(p)?),
            None => None,
        };
        let mut table = TableWriter::create(
            &cfg.table,
            &TableConfig {
                capacity: peers.len(),
                event_capacity: cfg.event_capacity.max(1),
                period_ns: cfg.period_ns,
                threshold: cfg.lambda_ns as f64,
                stall_periods: cfg.stall_periods,
                model: detector.kind(),
                self_addr: Some(cfg.addr),
                created_ns: now,
            },
        )?;
        for v in detector.peers() {
            table.set_peer(&v);
        }
        table.touch(now);
        Ok(Service {
            cfg,
            sock,
            detector,
            table,
            counter,
            sender,
            dsts,
            incarnation: now,
            auth,
        })
    }

    /// This host's heartbeat address.
    pub fn addr(&self) -> SocketAddrV4 {
        self.cfg.addr
    }

    /// The table file.
    pub fn table_path(&self) -> &std::path::Path {
        self.table.path()
    }

    /// The detector (for its peer list).
    pub fn detector(&self) -> &XFd {
        &self.detector
    }

    /// Locks memory and places the thread as configured, then runs the
    /// loop ([`Self::into_loop`]) on this thread until `stop` is set or
    /// `until_ns` passes. `on_event` sees every event after it is
    /// published in the table (it runs on the loop thread: keep it short).
    pub fn run(
        self,
        stop: &AtomicBool,
        on_event: &mut (dyn FnMut(&Event) + Send),
    ) -> Result<RunReport, RunError> {
        // Lock memory before turning real-time: faulting in every page at
        // SCHED_FIFO on a shared lane core would starve the other lane
        // threads there for as long as it takes.
        let unlocked = self.cfg.lock_memory && lock_memory().is_err();
        place_current_thread(self.cfg.placement)?;
        let mut l = self.into_loop(on_event)?;
        l.run(stop)?;
        let mut report = l.finish();
        report.memory_unlocked = unlocked;
        Ok(report)
    }

    /// The runner's lane loop, set up and not yet turning: its sender (the
    /// lane transport) and its receiver on the heartbeat socket. Everything
    /// the loop needs is allocated here.
    pub fn into_loop(
        self,
        on_event: &mut (dyn FnMut(&Event) + Send),
    ) -> Result<FdLoop<'_>, RunError> {
        let cfg = self.cfg;
        let (sealer, opener) = match self.auth {
            Some((s, o)) => (Some(s), Some(o)),
            None => (None, None),
        };
        let sent = Arc::new(SentCounts::default());
        let mut lane = LaneLoop::new().map_err(RunError::Loop)?;
        let (lane_sender, plain) = match self.sender {
            Sender::Lane(core) => {
                let spec = SenderSpec {
                    sock: self.sock.try_clone().map_err(RunError::Loop)?,
                    core: *core,
                    dsts: self.dsts,
                    until_ns: u64::MAX,
                    fill: HeartbeatFill {
                        counter: self.counter,
                        incarnation: self.incarnation,
                        sent: sent.clone(),
                    },
                    seal: sealer,
                    xdp: None,
                };
                (Some(lane.add_sender(spec)), None)
            }
            Sender::Plain { first_slot } => {
                let plain = PlainSender {
                    sock: self.sock.try_clone().map_err(RunError::Loop)?,
                    dsts: self.dsts,
                    next: first_slot,
                    period_ns: cfg.period_ns,
                    tunnel: cfg.tunnel,
                    seq: 0,
                    incarnation: self.incarnation,
                    counter: self.counter,
                    sealer,
                    buf: Box::new([0; MAX_FRAME_LEN + TRAILER_LEN]),
                    late_slots: 0,
                    max_lateness_ns: 0,
                };
                (None, Some(plain))
            }
        };
        let watch = Watch {
            transport: cfg.transport,
            detector: self.detector,
            table: self.table,
            opener,
            plain,
            sent,
            touch_due: 0,
            counts: RunReport::default(),
            on_event,
        };
        let receiver = lane
            .add_receiver(ReceiverSpec {
                sock: self.sock,
                core: PeriodicReceiver::new(tunnel_params(&cfg)),
                sink: watch,
                open: None,
                xdp: None,
            })
            .map_err(RunError::Loop)?;
        Ok(FdLoop {
            lane,
            sender: lane_sender,
            receiver,
            mode: cfg.mode,
            until_ns: cfg.until_ns,
        })
    }
}

/// A runner's lane loop ([`Service::into_loop`]): run it, then take its
/// report.
pub struct FdLoop<'a> {
    lane: LaneLoop<HeartbeatFill, Watch<'a>>,
    sender: Option<SenderId>,
    receiver: ReceiverId,
    mode: WaitMode,
    until_ns: u64,
}

impl FdLoop<'_> {
    /// Turns on this thread until `stop` is set or the run's end passes.
    pub fn run(&mut self, stop: &AtomicBool) -> Result<(), RunError> {
        self.lane
            .run(stop, self.until_ns, self.mode)
            .map_err(RunError::Loop)
    }

    /// What the run did.
    pub fn finish(mut self) -> RunReport {
        let sender = self.sender.and_then(|id| self.lane.remove_sender(id));
        let Some(end) = self.lane.remove_receiver(self.receiver) else {
            return RunReport::default();
        };
        let w = end.spec.sink;
        let mut report = w.counts;
        report.detector = w.detector.stats();
        if let Some(o) = &w.opener {
            let s = o.stats();
            // Those that opened but came from another sender's address
            // were refused after all.
            report.auth.accepted = s.accepted.saturating_sub(report.auth.wrong_sender);
            report.auth.unsealed = s.unsealed;
            report.auth.unkeyed = s.unkeyed;
            report.auth.forged = s.forged;
            report.auth.replayed = s.replayed;
            report.auth.wrong_sender += s.too_many_senders;
        }
        if let Some(s) = sender {
            let c = s.spec.core.stats();
            report.heartbeats_sent = s.report.frames;
            report.send_errors = s.report.send_errors;
            report.late_slots = c.late_slots;
            report.max_lateness_ns = c.max_lateness_ns;
        }
        if let Some(p) = &w.plain {
            report.heartbeats_sent = w.sent.heartbeats.load(Ordering::Relaxed);
            report.send_errors = w.sent.errors.load(Ordering::Relaxed);
            report.late_slots = p.late_slots;
            report.max_lateness_ns = p.max_lateness_ns;
        }
        report
    }
}

/// Heartbeats sent and refused copies, published in the table while the
/// loop runs.
#[derive(Default)]
struct SentCounts {
    heartbeats: AtomicU64,
    errors: AtomicU64,
}

/// The lane sender's slot: this period's heartbeat chunk.
struct HeartbeatFill {
    counter: Option<LivenessCounter>,
    incarnation: u64,
    sent: Arc<SentCounts>,
}

impl SlotFill for HeartbeatFill {
    fn fill(&mut self, core: &mut PeriodicSender, _slot_ns: u64) {
        if core.pending() == 0 {
            // The application's counter, read once per period.
            let p = HeartbeatPayload {
                incarnation: self.incarnation,
                counter: self.counter.as_ref().map(|c| c.read()),
            };
            // Cannot fail: one 20-byte chunk in an empty queue.
            let _ = core.enqueue(FD_PRODUCER, &p.encode());
        }
    }

    fn sent(&mut self, report: &SendReport) {
        self.sent.heartbeats.store(report.frames, Ordering::Relaxed);
        self.sent
            .errors
            .store(report.send_errors, Ordering::Relaxed);
    }
}

/// The baseline's heartbeats: one [`PlainHeartbeat`] per period to every
/// destination, sent at the sink's deadline.
struct PlainSender {
    sock: LaneSocket,
    dsts: Vec<SocketAddrV4>,
    next: u64,
    period_ns: u64,
    tunnel: u32,
    seq: u64,
    incarnation: u64,
    counter: Option<LivenessCounter>,
    sealer: Option<Sealer>,
    buf: Box<[u8; MAX_FRAME_LEN + TRAILER_LEN]>,
    late_slots: u64,
    max_lateness_ns: u64,
}

impl PlainSender {
    /// Sends this period's heartbeat if it is due at `now`.
    fn send_if_due(&mut self, now: u64, sent: &SentCounts) {
        if now < self.next {
            return;
        }
        let missed = (now - self.next) / self.period_ns;
        self.late_slots += missed;
        self.max_lateness_ns = self.max_lateness_ns.max(now - self.next);
        self.next += (missed + 1) * self.period_ns;
        let hb = PlainHeartbeat {
            tunnel: self.tunnel,
            seq: self.seq,
            incarnation: self.incarnation,
            counter: self.counter.as_ref().map(|c| c.read()),
        };
        self.seq += 1;
        let bytes = hb.encode();
        let len = bytes.len();
        self.buf[..len].copy_from_slice(&bytes);
        for dst in self.dsts.iter() {
            let n = seal_if_keyed(
                self.sealer.as_mut(),
                &mut self.buf[..],
                len,
                ANY_RECEIVER,
                realtime_ns(),
            );
            if self.sock.send_to(&self.buf[..n], *dst).is_err() {
                sent.errors.fetch_add(1, Ordering::Relaxed);
            }
        }
        sent.heartbeats.fetch_add(1, Ordering::Relaxed);
    }
}

/// The receiver's sink: the detector, its table and its events.
struct Watch<'a> {
    transport: Transport,
    detector: XFd,
    table: TableWriter,
    opener: Option<Opener>,
    plain: Option<PlainSender>,
    sent: Arc<SentCounts>,
    /// When the table's counters and update time are next published.
    touch_due: u64,
    /// The receive side's counters (datagrams, stamps, events, refusals).
    counts: RunReport,
    on_event: &'a mut (dyn FnMut(&Event) + Send),
}

impl Watch<'_> {
    /// Publishes the detector's events (and the entries they change).
    fn publish(&mut self) {
        while let Some(ev) = self.detector.next_event() {
            if let Some(v) = self.detector.peer(ev.peer) {
                self.table.set_peer(&v);
            }
            self.table.push_event(&ev);
            self.counts.events += 1;
            (self.on_event)(&ev);
        }
    }
}

impl FrameSink for Watch<'_> {
    // The detector reads every datagram itself (`on_datagram`): the loop's
    // core never accepts a frame for this sink.
    fn on_chunk(&mut self, _d: Delivery<'_>) {}
    fn on_frame(&mut self, _s: Sample) {}

    fn on_datagram(&mut self, _core: &mut PeriodicReceiver, st: &RxStamps, bytes: &[u8]) -> bool {
        self.counts.datagrams += 1;
        // The kernel's software stamp, else the time the read returned (a
        // NIC stamp is on the NIC's clock, so it is not used here).
        let rx_ns = match st.software_ns {
            Some(t) => t,
            None => {
                self.counts.user_stamps += 1;
                st.received.user_ns
            }
        };
        if st.received.truncated {
            self.counts.truncated += 1;
            self.detector.note_malformed();
            return false;
        }
        let src = st.received.src;
        let mut bytes = bytes;
        // The MAC first: nothing unauthenticated is decoded.
        if let Some(o) = self.opener.as_mut() {
            match o.open(bytes, ANY_RECEIVER) {
                Ok(x) if x.sender == sender_id(src) => bytes = x.payload,
                Ok(_) => {
                    self.counts.auth.wrong_sender += 1;
                    return false;
                }
                Err(_) => return false,
            }
        }
        let res = match self.transport {
            Transport::Lane => self.detector.on_lane_datagram(rx_ns, src, bytes),
            Transport::Plain => self.detector.on_plain_datagram(rx_ns, src, bytes),
        };
        let Ok(i) = res else { return false };
        if let Some(v) = self.detector.peer(i) {
            self.table.set_peer(&v);
        }
        self.publish();
        true
    }

    fn poll_timeout(&self) -> Option<u64> {
        let plain = self.plain.as_ref().map_or(u64::MAX, |p| p.next);
        Some(
            self.detector
                .next_deadline()
                .unwrap_or(u64::MAX)
                .min(self.touch_due)
                .min(plain),
        )
    }

    fn on_timeout(&mut self, checked_ns: u64, drained: bool) {
        if let Some(p) = self.plain.as_mut() {
            p.send_if_due(realtime_ns(), &self.sent);
        }
        // Every datagram stamped before `checked_ns` was in the socket by
        // then; once the reads emptied it, a deadline check at `checked_ns`
        // cannot race a heartbeat that already arrived.
        if drained {
            self.detector.check_deadlines(checked_ns);
        }
        self.publish();
        if checked_ns >= self.touch_due {
            let stats = TableStats::from_detector(
                &self.detector.stats(),
                self.sent.heartbeats.load(Ordering::Relaxed),
                self.sent.errors.load(Ordering::Relaxed),
            );
            self.table.set_stats(&stats);
            self.table.touch(checked_ns);
            self.touch_due = checked_ns.saturating_add(TOUCH_NS);
        }
    }
}

/// The application side for demos and tests: bumps the counter every
/// `interval_ns` until `stop` or `until_ns`. Returns the bumps made.
pub fn bump_loop(
    counter: &LivenessCounter,
    interval_ns: u64,
    stop: &AtomicBool,
    until_ns: u64,
) -> u64 {
    let interval = interval_ns.max(1);
    let mut next = realtime_ns();
    let mut n = 0;
    while !stop.load(Ordering::Relaxed) {
        let now = realtime_ns();
        if now >= until_ns {
            break;
        }
        if now >= next {
            counter.bump(now);
            n += 1;
            next = next.saturating_add(interval);
            if next <= now {
                next = now.saturating_add(interval);
            }
        }
        wait_until(next.min(until_ns), WaitMode::Interrupt);
    }
    n
}
