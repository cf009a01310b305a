//! The X-FD runner: one thread, one UDP socket, sending and receiving.
//!
//! Per loop turn (bounded work, no allocation once started):
//!
//! 1. drain the socket (≤ [`RX_BURST`] datagrams): each carries its kernel
//!    receive stamp, taken when the packet entered the stack, before this
//!    thread saw it; the detector gets it with the source address, and the
//!    peer's table entry is republished;
//! 2. if the send slot is due: read the application's liveness counter once,
//!    put it in a heartbeat chunk, let the periodic multicast sender build the
//!    frame of this period, re-stamp its send time, send it to the group (or
//!    to each peer: sender replication);
//! 3. check the detector's deadlines at the time taken just before the
//!    drain (so a heartbeat already in the socket is never overtaken by its
//!    own deadline); publish events and changed entries;
//! 4. sleep until the next slot, the next detector deadline or a datagram
//!    (`ppoll`), or spin ([`WaitMode::BusyPoll`]).
//!
//! The socket is bound once; the heartbeat source address (address and
//! port) is what peers know this host by. With a multicast group the socket
//! is bound to `0.0.0.0:port`, joins the group on the interface address and
//! sends through it (loopback of own multicast off); without one, it is bound
//! to `address:port` and sends to every peer's address. So one peer list can
//! be given to every host: each runner drops its own address from it.
//!
//! The baseline transport ([`Transport::Plain`]) sends [`PlainHeartbeat`]s on
//! a best-effort socket (DSCP 0) every period from the same loop.
//!
//! With [`RunConfig::auth`], every heartbeat carries a MAC
//! ([`xlane_auth`]: key id, sender, sequence number, SipHash-2-4 tag) and
//! every datagram is checked before any decoding: a forged, replayed or
//! unkeyed one, or one sealed by another sender than its source address,
//! is counted ([`RunReport::auth`]) and dropped, so it cannot keep a dead
//! peer alive.

use crate::detector::{Event, PeerSpec, XFd};
use crate::model::{Anchor, FixedTimeout};
use crate::payload::{HeartbeatPayload, PlainHeartbeat, FD_PRODUCER, PAYLOAD_LEN};
use crate::shm::{LivenessCounter, ShmError, TableConfig, TableStats, TableWriter};
use crate::{Detector, DetectorConfig, DetectorStats};
use std::io;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use xlane_auth::{seal_if_keyed, KeyRing, Opener, Sealer, ANY_RECEIVER, TRAILER_LEN};
use xlane_host::runtime::{
    lock_memory, place_current_thread, wait_readable, wait_until, Placement, RuntimeError, WaitMode,
};
use xlane_host::socket::{realtime_ns, LaneSocket, SocketConfig, SocketError};
use xlane_lane::{ParamsError, PeriodicMulticastSender, Replication, TunnelParams, MAX_RECEIVERS};
use xlane_wire::{Schema, HEADER_LEN, MAX_FRAME_LEN};

/// Datagrams handled per loop turn before the sender gets a look.
pub const RX_BURST: usize = 256;
/// Longest sleep of the loop (the table's update time advances at least this often).
pub const MAX_SLEEP_NS: u64 = 50_000_000;

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
    /// Receiving failed.
    #[error("receive: {0}")]
    Recv(io::Error),
    /// Waiting failed.
    #[error("ppoll: {0}")]
    Poll(io::Error),
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

enum Sender {
    Lane {
        core: Box<PeriodicMulticastSender>,
        dsts: Vec<SocketAddrV4>,
    },
    Plain {
        next: u64,
        seq: u64,
        dsts: Vec<SocketAddrV4>,
    },
}

/// A started runner: socket bound, table created, nothing sent yet.
pub struct Service {
    cfg: RunConfig,
    sock: LaneSocket,
    detector: XFd,
    table: TableWriter,
    counter: Option<LivenessCounter>,
    sender: Sender,
    incarnation: u64,
    report: RunReport,
    auth: Option<(Sealer, Opener)>,
}

/// The sender id a host seals with: its heartbeat address's IPv4 address.
fn sender_id(addr: SocketAddrV4) -> u32 {
    u32::from(*addr.ip())
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
        let first_slot = (now / cfg.period_ns + 1) * cfg.period_ns;
        let sender = match cfg.transport {
            Transport::Lane => {
                let params = TunnelParams {
                    tunnel: cfg.tunnel,
                    period_ns: cfg.period_ns,
                    max_packet: HEADER_LEN + Schema::Chunk26.chunk_len(),
                    schema: Schema::Chunk26,
                };
                let mode = if cfg.group.is_some() {
                    Replication::Network
                } else {
                    if dsts.len() > MAX_RECEIVERS {
                        return Err(RunError::Usage(format!(
                            "{} unicast peers; at most {MAX_RECEIVERS} without a multicast group",
                            dsts.len()
                        )));
                    }
                    Replication::Sender {
                        receivers: dsts.len(),
                    }
                };
                Sender::Lane {
                    core: Box::new(PeriodicMulticastSender::new(params, first_slot, mode)?),
                    dsts,
                }
            }
            Transport::Plain => Sender::Plain {
                next: first_slot,
                seq: 0,
                dsts,
            },
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
            incarnation: now,
            report: RunReport::default(),
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

    /// Runs until `stop` is set or `until_ns` passes. `on_event` sees every
    /// event after it is published in the table (it runs on the loop thread:
    /// keep it short).
    pub fn run(
        mut self,
        stop: &AtomicBool,
        on_event: &mut dyn FnMut(&Event),
    ) -> Result<RunReport, RunError> {
        // Lock memory before turning real-time: faulting in every page at
        // SCHED_FIFO on a shared lane core would starve the other lane
        // threads there for as long as it takes.
        if self.cfg.lock_memory && lock_memory().is_err() {
            self.report.memory_unlocked = true;
        }
        place_current_thread(self.cfg.placement)?;
        let mut buf = Box::new([0u8; MAX_FRAME_LEN + TRAILER_LEN + 1]);
        let fd = self.sock.as_raw_fd();
        loop {
            if stop.load(Ordering::Relaxed) {
                break;
            }
            // Every datagram stamped before `checked` is in the socket by then,
            // so once the drain below empties it, a deadline check at
            // `checked` cannot race a heartbeat that already arrived.
            let checked = realtime_ns();
            let drained = self.receive(&mut buf[..])?;
            let now = realtime_ns();
            if now >= self.cfg.until_ns {
                break;
            }
            self.send_if_due(now, &mut buf[..]);
            if drained {
                self.detector.check_deadlines(checked);
            }
            while let Some(ev) = self.detector.next_event() {
                if let Some(v) = self.detector.peer(ev.peer) {
                    self.table.set_peer(&v);
                }
                self.table.push_event(&ev);
                self.report.events += 1;
                on_event(&ev);
            }
            let stats = TableStats::from_detector(
                &self.detector.stats(),
                self.report.heartbeats_sent,
                self.report.send_errors,
            );
            self.table.set_stats(&stats);
            self.table.touch(now);
            let wake = self
                .next_send()
                .min(self.detector.next_deadline().unwrap_or(u64::MAX))
                .min(now.saturating_add(MAX_SLEEP_NS))
                .min(self.cfg.until_ns);
            match self.cfg.mode {
                WaitMode::BusyPoll => {}
                WaitMode::Interrupt => {
                    wait_readable(&[fd], wake).map_err(RunError::Poll)?;
                }
            }
        }
        self.report.detector = self.detector.stats();
        if let Some((_, o)) = &self.auth {
            let s = o.stats();
            // Those that opened but came from another sender's address
            // were refused after all.
            self.report.auth.accepted = s.accepted.saturating_sub(self.report.auth.wrong_sender);
            self.report.auth.unsealed = s.unsealed;
            self.report.auth.unkeyed = s.unkeyed;
            self.report.auth.forged = s.forged;
            self.report.auth.replayed = s.replayed;
            self.report.auth.wrong_sender += s.too_many_senders;
        }
        if let Sender::Lane { core, .. } = &self.sender {
            let s = core.stats();
            self.report.late_slots = s.late_slots;
            self.report.max_lateness_ns = s.max_lateness_ns;
        }
        Ok(self.report)
    }

    fn next_send(&self) -> u64 {
        match &self.sender {
            Sender::Lane { core, .. } => core.poll_timeout(),
            Sender::Plain { next, .. } => *next,
        }
    }

    /// Reads up to [`RX_BURST`] datagrams; `true` if the socket is empty.
    fn receive(&mut self, buf: &mut [u8]) -> Result<bool, RunError> {
        let transport = self.cfg.transport;
        let (report, detector, table) = (&mut self.report, &mut self.detector, &mut self.table);
        let mut opener = self.auth.as_mut().map(|(_, o)| o);
        self.sock
            .drain(buf, RX_BURST, &mut |d| {
                report.datagrams += 1;
                if !d.kernel_stamped {
                    report.user_stamps += 1;
                }
                let Some(mut bytes) = d.bytes else {
                    report.truncated += 1;
                    detector.note_malformed();
                    return;
                };
                // The MAC first: nothing unauthenticated is decoded.
                if let Some(o) = opener.as_deref_mut() {
                    match o.open(bytes, ANY_RECEIVER) {
                        Ok(x) if x.sender == sender_id(d.src) => bytes = x.payload,
                        Ok(_) => {
                            report.auth.wrong_sender += 1;
                            return;
                        }
                        Err(_) => return,
                    }
                }
                let res = match transport {
                    Transport::Lane => detector.on_lane_datagram(d.rx_ns, d.src, bytes),
                    Transport::Plain => detector.on_plain_datagram(d.rx_ns, d.src, bytes),
                };
                if let Ok(i) = res {
                    if let Some(v) = detector.peer(i) {
                        table.set_peer(&v);
                    }
                }
            })
            .map_err(RunError::Recv)
    }

    fn send_if_due(&mut self, now: u64, buf: &mut [u8]) {
        let counter = &self.counter;
        match &mut self.sender {
            Sender::Lane { core, dsts } => {
                if now < core.poll_timeout() {
                    return;
                }
                if core.sender().pending() == 0 {
                    // The application's counter, read once per period.
                    let p = HeartbeatPayload {
                        incarnation: self.incarnation,
                        counter: counter.as_ref().map(|c| c.read()),
                    };
                    let bytes: [u8; PAYLOAD_LEN] = p.encode();
                    // Cannot fail: one 20-byte chunk in an empty queue.
                    let _ = core.enqueue(FD_PRODUCER, &bytes);
                }
                let Ok(Some(tx)) = core.poll_transmit(now, buf) else {
                    return;
                };
                let len = tx.transmit.len;
                for d in tx.destinations.iter() {
                    let Some(dst) = dsts.get(d) else { continue };
                    let t = realtime_ns();
                    let _ = xlane_wire::stamp_send_time(&mut buf[..len], t);
                    // The buffer has room for the trailer.
                    let sealer = self.auth.as_mut().map(|(s, _)| s);
                    let n = seal_if_keyed(sealer, buf, len, ANY_RECEIVER, t);
                    match self.sock.send_to(&buf[..n], *dst) {
                        Ok(_) => {}
                        Err(_) => self.report.send_errors += 1,
                    }
                }
                self.report.heartbeats_sent += 1;
            }
            Sender::Plain { next, seq, dsts } => {
                if now < *next {
                    return;
                }
                let period = self.cfg.period_ns;
                let missed = (now - *next) / period;
                self.report.late_slots += missed;
                self.report.max_lateness_ns = self.report.max_lateness_ns.max(now - *next);
                *next += (missed + 1) * period;
                let hb = PlainHeartbeat {
                    tunnel: self.cfg.tunnel,
                    seq: *seq,
                    incarnation: self.incarnation,
                    counter: counter.as_ref().map(|c| c.read()),
                };
                *seq += 1;
                let bytes = hb.encode();
                let len = bytes.len();
                buf[..len].copy_from_slice(&bytes);
                for dst in dsts.iter() {
                    let sealer = self.auth.as_mut().map(|(s, _)| s);
                    let n = seal_if_keyed(sealer, buf, len, ANY_RECEIVER, realtime_ns());
                    if self.sock.send_to(&buf[..n], *dst).is_err() {
                        self.report.send_errors += 1;
                    }
                }
                self.report.heartbeats_sent += 1;
            }
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
