//! The sans-IO R2P2 router: where REQ0 goes.
//!
//! Clients send a request's first packet (REQ0) to the router; the router
//! picks a server by its [`Policy`] and forwards the packet there unchanged,
//! naming the client it came from ([`Forward::origin`]) so that the server
//! answers the client directly, as the C implementation's router does by
//! rewriting only the destination. Everything after REQ0 (REQRDY, REQn, the
//! reply) flows between client and server; the server tells the router a
//! request is finished with a FEEDBACK, which frees its place in that
//! server's count of outstanding requests.
//!
//! * `random` and `round-robin` ignore the counts;
//! * `jsq` sends to a server with the fewest outstanding requests;
//! * `jbsq:N` does too, but never gives a server more than `N`: when every
//!   server has `N`, requests wait at the router (FIFO, bounded) and go out
//!   as FEEDBACKs free places (the C router's `fc` policy).
//!
//! A retransmitted REQ0 (same ⟨ip, port, rid⟩) goes to the server that took
//! the first, which answers it from its duplicate cache (at most once holds
//! per server); one still waiting at the router is not queued twice. The
//! router's memory is bounded: `max_tracked` identities (a new REQ0 beyond
//! them gets a DROP) and `max_queued` waiting requests (likewise). A
//! request whose FEEDBACK does not come within `feedback_timeout_ns` (a
//! server that died or dropped it, a FEEDBACK lost) stops counting against
//! its server, so a lost FEEDBACK cannot shrink a server's share for ever.
//! Ties between equally loaded servers are broken by a seeded generator.

use crate::admission::{Controller, ControllerKind, Histogram, Slo};
use crate::wire::{self, Feedback, Header, MsgType, Packet, PacketError, MAX_PACKET_LEN};
use crate::{Identity, Nanos};
use std::collections::{HashMap, VecDeque};
use std::net::SocketAddrV4;

/// How the router picks a server for a new request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    /// Uniformly at random (seeded).
    Random,
    /// In turn.
    RoundRobin,
    /// Join the shortest queue: fewest outstanding requests.
    Jsq,
    /// Join the bounded shortest queue: fewest outstanding, at most this
    /// many per server; the rest wait at the router.
    Jbsq(u32),
}

/// A policy name that is not one of `random`, `round-robin`, `jsq`,
/// `jbsq:N` (N ≥ 1).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown policy {0:?}: expected random, round-robin, jsq or jbsq:N with N >= 1")]
pub struct PolicyError(pub String);

impl std::str::FromStr for Policy {
    type Err = PolicyError;
    fn from_str(s: &str) -> Result<Self, PolicyError> {
        match s {
            "random" => Ok(Policy::Random),
            "round-robin" | "rr" => Ok(Policy::RoundRobin),
            "jsq" => Ok(Policy::Jsq),
            _ => match s.strip_prefix("jbsq:").map(str::parse::<u32>) {
                Some(Ok(n)) if n >= 1 => Ok(Policy::Jbsq(n)),
                _ => Err(PolicyError(s.to_string())),
            },
        }
    }
}

impl std::fmt::Display for Policy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Policy::Random => write!(f, "random"),
            Policy::RoundRobin => write!(f, "round-robin"),
            Policy::Jsq => write!(f, "jsq"),
            Policy::Jbsq(n) => write!(f, "jbsq:{n}"),
        }
    }
}

/// Settings of a [`Router`].
#[derive(Clone, Debug, PartialEq)]
pub struct RouterConfig {
    /// The servers, in the order round-robin visits them.
    pub servers: Vec<SocketAddrV4>,
    /// How a server is picked.
    pub policy: Policy,
    /// Seed of the random picks and tie breaks.
    pub seed: u64,
    /// Identities tracked at most (forwarded and waiting for FEEDBACK, kept
    /// for stickiness, or waiting at the router).
    pub max_tracked: usize,
    /// Requests waiting at the router at most (`jbsq:N` only).
    pub max_queued: usize,
    /// A forwarded request stops counting against its server after this
    /// long without FEEDBACK. Keep it a few times the longest service time
    /// plus queueing at a server: shorter, a slow request stops counting
    /// while it runs (the `jbsq` bound is exceeded); longer, a lost
    /// FEEDBACK takes a place from its server for that long.
    pub feedback_timeout_ns: Nanos,
    /// After its FEEDBACK, a request's server is remembered this long, for
    /// retransmissions of its REQ0. Keep it at least the clients'
    /// request timeout.
    pub sticky_ns: Nanos,
    /// SLO-aware admission control (SVEN), if any: new REQ0s the
    /// controller turns away get DROP before the policy runs.
    pub admission: Option<AdmissionConfig>,
}

/// Settings of the router's admission control ([`crate::admission`]).
///
/// Each request class (the REQ0's policy value, [`wire::policy`]) has its
/// own latency histogram and controller, all aiming at the same SLO; a
/// class in `never_drop` is always admitted (its requests still count as
/// load for the others).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AdmissionConfig {
    /// The objective.
    pub slo: Slo,
    /// The control loop.
    pub controller: ControllerKind,
    /// Control period (SVEN: 20 ms).
    pub period_ns: Nanos,
    /// Bit `c` set: class `c` is never dropped.
    pub never_drop: u16,
}

impl AdmissionConfig {
    /// `slo` with `controller`, a 20 ms period, every class droppable.
    pub fn new(slo: Slo, controller: ControllerKind) -> Self {
        AdmissionConfig {
            slo,
            controller,
            period_ns: 20_000_000,
            never_drop: 0,
        }
    }
}

impl RouterConfig {
    /// Defaults for `servers` under `policy`: 65 536 identities, 4 096
    /// waiting, FEEDBACK expected within 100 ms, identities remembered 1 s
    /// after it (a client's default request timeout is 500 ms).
    pub fn new(servers: Vec<SocketAddrV4>, policy: Policy) -> Self {
        RouterConfig {
            servers,
            policy,
            seed: 1,
            max_tracked: 65_536,
            max_queued: 4_096,
            feedback_timeout_ns: 100_000_000,
            sticky_ns: 1_000_000_000,
            admission: None,
        }
    }
}

/// One packet the router built into the caller's buffer
/// ([`Router::poll_transmit`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Forward {
    /// Where to send it: a server (a forwarded REQ0) or a client (a DROP).
    pub dst: SocketAddrV4,
    /// The client the packet is about: a server must take a forwarded REQ0
    /// as sent by this address.
    pub origin: SocketAddrV4,
    /// True for a client's REQ0 forwarded to a server (to be sent as from
    /// `origin`), false for the router's own packet (a DROP to `dst`).
    pub forwarded: bool,
    /// Send `buf[..len]`.
    pub len: usize,
}

/// Why the router refused a datagram (each is counted in [`RouterStats`]).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RouterRecvError {
    /// Not an R2P2 packet.
    #[error(transparent)]
    Packet(#[from] PacketError),
    /// A FEEDBACK whose payload is not 8 bytes.
    #[error(transparent)]
    Feedback(#[from] wire::FeedbackError),
    /// A FEEDBACK from an address that is not one of the servers.
    #[error("FEEDBACK from {0}, which is not a server")]
    NotAServer(SocketAddrV4),
    /// A FEEDBACK for a request the router does not hold at that server
    /// (late, duplicated, or forwarded before a restart).
    #[error("FEEDBACK from {server} for {id:?}, not outstanding there")]
    UnknownFeedback {
        /// The server.
        server: SocketAddrV4,
        /// The request it named.
        id: Identity,
    },
    /// A packet the router does not route: a later request packet, a
    /// reply, REQRDY or DROP (those flow between client and server).
    #[error("{0:?} packet at the router (only REQ0 and FEEDBACK come here)")]
    NotRouted(MsgType),
    /// A REQ0 whose routing policy is not load-balanced (FIXED_ROUTE means
    /// the client chose the server itself).
    #[error("REQ0 with routing policy {0}, not load-balanced")]
    Policy(u8),
}

/// What the router counted.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RouterStats {
    /// New requests forwarded to a server.
    pub forwarded: u64,
    /// Retransmitted REQ0s forwarded to the server that took the first.
    pub retransmits: u64,
    /// Retransmitted REQ0s of a request still waiting at the router.
    pub duplicate_waiting: u64,
    /// New requests that waited at the router (`jbsq:N`) before going out.
    pub queued: u64,
    /// New requests answered with DROP: too many tracked or waiting.
    pub dropped: u64,
    /// FEEDBACKs that closed an outstanding request.
    pub feedbacks: u64,
    /// Outstanding requests released after `feedback_timeout_ns`.
    pub feedback_timeouts: u64,
    /// Datagrams refused ([`RouterRecvError`]).
    pub refused: u64,
    /// New requests the admission controller turned away (answered with
    /// DROP; not in `dropped`).
    pub admission_drops: u64,
    /// The same, per request class.
    pub admission_drops_by_class: [u64; wire::policy::COUNT],
    /// New requests per class that reached admission control.
    pub requests_by_class: [u64; wire::policy::COUNT],
    /// Per server (in configuration order): requests forwarded.
    pub per_server: Vec<u64>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Waiting at the router.
    Waiting,
    /// Forwarded, counted against its server until FEEDBACK or the timeout.
    Outstanding,
    /// Finished (FEEDBACK or timeout); remembered for stickiness.
    Done,
}

#[derive(Clone, Copy, Debug)]
struct Tracked {
    server: usize,
    phase: Phase,
    /// When its REQ0 came (its latency runs to the FEEDBACK).
    arrived: Nanos,
    /// Its class (the REQ0's policy value).
    class: u8,
    /// Bumped at every phase change: older expiry entries are stale.
    epoch: u32,
}

/// A REQ0 waiting at the router (the packet, at most one full packet).
struct Waiting {
    id: Identity,
    class: u8,
    origin: SocketAddrV4,
    len: usize,
    bytes: Box<[u8; MAX_PACKET_LEN]>,
}

/// The R2P2 router core (see the module docs).
pub struct Router {
    cfg: RouterConfig,
    outstanding: Vec<u32>,
    tracked: HashMap<Identity, Tracked>,
    /// (deadline, identity, epoch) per phase; deadlines grow in each queue.
    feedback_due: VecDeque<(Nanos, Identity, u32)>,
    forget_due: VecDeque<(Nanos, Identity, u32)>,
    waiting: VecDeque<Waiting>,
    /// Spare packet buffers, reused: a buffer moves between `waiting`,
    /// `tx` and here as one pointer, not 1 472 bytes.
    #[allow(clippy::vec_box)]
    spare: Vec<Box<[u8; MAX_PACKET_LEN]>>,
    /// Packets to send: a forwarded REQ0 (from `waiting`' buffers or the
    /// caller's datagram, copied) or a DROP.
    tx: VecDeque<Out>,
    rr: usize,
    rng: xlane_stats::SplitMix64,
    stats: RouterStats,
    admission: Option<Admission>,
}

/// The admission controllers' state.
struct Admission {
    /// One per policy value (the `FIXED_ROUTE` entry stays unused).
    classes: Vec<ClassAdmission>,
    never_drop: u16,
    next_update: Nanos,
    period: Nanos,
}

/// One class's controller.
struct ClassAdmission {
    ctl: Controller,
    /// Latencies closed since the last control period.
    window: Histogram,
}

enum Out {
    Forward {
        server: usize,
        origin: SocketAddrV4,
        len: usize,
        bytes: Box<[u8; MAX_PACKET_LEN]>,
    },
    Drop {
        to: SocketAddrV4,
        req_id: u16,
    },
}

impl Router {
    /// A router over `cfg.servers` (at least one).
    pub fn new(cfg: RouterConfig) -> Self {
        let n = cfg.servers.len();
        Router {
            outstanding: vec![0; n],
            tracked: HashMap::new(),
            feedback_due: VecDeque::new(),
            forget_due: VecDeque::new(),
            waiting: VecDeque::new(),
            spare: Vec::new(),
            tx: VecDeque::new(),
            rr: 0,
            rng: xlane_stats::SplitMix64::new(cfg.seed ^ 0x9E37_79B9_7F4A_7C15),
            stats: RouterStats {
                per_server: vec![0; n],
                ..RouterStats::default()
            },
            admission: cfg.admission.map(|a| Admission {
                classes: (0..wire::policy::COUNT)
                    .map(|_| ClassAdmission {
                        ctl: Controller::new(a.controller, a.slo),
                        window: Histogram::default(),
                    })
                    .collect(),
                never_drop: a.never_drop,
                next_update: a.period_ns.max(1),
                period: a.period_ns.max(1),
            }),
            cfg,
        }
    }

    /// The settings.
    pub fn config(&self) -> &RouterConfig {
        &self.cfg
    }

    /// The counters.
    pub fn stats(&self) -> &RouterStats {
        &self.stats
    }

    /// Requests outstanding at each server (configuration order).
    pub fn outstanding(&self) -> &[u32] {
        &self.outstanding
    }

    /// Requests waiting at the router.
    pub fn waiting(&self) -> usize {
        self.waiting.len()
    }

    /// The admission controller of request class `class` (a policy
    /// value other than `FIXED_ROUTE`), if configured: its drop rate or
    /// bound.
    pub fn admission(&self, class: u8) -> Option<&Controller> {
        let a = self.admission.as_ref()?;
        if !wire::policy::is_load_balanced(class) {
            return None;
        }
        a.classes.get(usize::from(class)).map(|c| &c.ctl)
    }

    /// Runs the admission controller's periods that ended by `now`.
    fn control(&mut self, now: Nanos) {
        let Some(a) = self.admission.as_mut() else {
            return;
        };
        if now < a.next_update {
            return;
        }
        // A class without finished requests in the period keeps its state
        // (an empty window changes nothing), at the cost of a look at it.
        for c in &mut a.classes {
            if !c.window.is_empty() {
                c.ctl.update(&c.window);
                c.window.clear();
            }
        }
        // Periods missed while idle are not replayed: one update, then on.
        a.next_update = now.saturating_add(a.period);
    }

    /// Takes one datagram from `from`: a client's REQ0 or a server's
    /// FEEDBACK. Bounded work: one header check, one table look-up, one
    /// packet copy, and for a FEEDBACK at most one waiting request sent on.
    pub fn handle_datagram(
        &mut self,
        now: Nanos,
        from: SocketAddrV4,
        bytes: &[u8],
    ) -> Result<(), RouterRecvError> {
        self.control(now);
        let r = self.datagram(now, from, bytes);
        if r.is_err() {
            self.stats.refused += 1;
        }
        r
    }

    fn datagram(
        &mut self,
        now: Nanos,
        from: SocketAddrV4,
        bytes: &[u8],
    ) -> Result<(), RouterRecvError> {
        let p = Packet::new_checked(bytes)?;
        match p.msg_type() {
            MsgType::Feedback => self.feedback(now, from, &p),
            MsgType::Request if p.is_first() => self.request(now, from, &p),
            t => Err(RouterRecvError::NotRouted(t)),
        }
    }

    fn request(
        &mut self,
        now: Nanos,
        from: SocketAddrV4,
        p: &Packet<'_>,
    ) -> Result<(), RouterRecvError> {
        let class = p.policy();
        if !wire::policy::is_load_balanced(class) {
            return Err(RouterRecvError::Policy(class));
        }
        let id = Identity::of(from, p.req_id());
        if let Some(t) = self.tracked.get(&id) {
            if t.phase == Phase::Waiting {
                self.stats.duplicate_waiting += 1;
            } else {
                self.stats.retransmits += 1;
                let server = t.server;
                self.push_forward(server, from, p.as_bytes());
            }
            return Ok(());
        }
        if self.tracked.len() >= self.cfg.max_tracked {
            self.refuse(from, id.req_id);
            return Ok(());
        }
        if self.admission.is_some() {
            let ci = usize::from(class);
            self.stats.requests_by_class[ci] += 1;
            let in_system =
                self.outstanding.iter().map(|&n| n as usize).sum::<usize>() + self.waiting.len();
            let coin = (self.next_random() >> 11) as f64 / (1u64 << 53) as f64;
            let admits = self.admission.as_mut().is_some_and(|a| {
                a.never_drop & (1 << ci) != 0 || a.classes[ci].ctl.admits(in_system, coin)
            });
            if !admits {
                self.stats.admission_drops += 1;
                self.stats.admission_drops_by_class[ci] += 1;
                self.tx.push_back(Out::Drop {
                    to: from,
                    req_id: id.req_id,
                });
                return Ok(());
            }
        }
        match self.pick() {
            Some(server) => {
                self.start(now, id, server, class);
                self.push_forward(server, from, p.as_bytes());
            }
            None if self.waiting.len() < self.cfg.max_queued => {
                let raw = p.as_bytes();
                let bytes = self.copy_of(raw);
                self.waiting.push_back(Waiting {
                    id,
                    class,
                    origin: from,
                    len: raw.len(),
                    bytes,
                });
                self.tracked.insert(
                    id,
                    Tracked {
                        server: 0,
                        phase: Phase::Waiting,
                        arrived: now,
                        class,
                        epoch: 0,
                    },
                );
                self.stats.queued += 1;
            }
            None => self.refuse(from, id.req_id),
        }
        Ok(())
    }

    fn refuse(&mut self, to: SocketAddrV4, req_id: u16) {
        self.stats.dropped += 1;
        self.tx.push_back(Out::Drop { to, req_id });
    }

    fn feedback(
        &mut self,
        now: Nanos,
        from: SocketAddrV4,
        p: &Packet<'_>,
    ) -> Result<(), RouterRecvError> {
        let id = Identity::from(Feedback::parse(p.payload())?);
        let server = self
            .cfg
            .servers
            .iter()
            .position(|s| *s == from)
            .ok_or(RouterRecvError::NotAServer(from))?;
        let (arrived, class) = match self.tracked.get(&id) {
            Some(t) if t.server == server && t.phase == Phase::Outstanding => (t.arrived, t.class),
            _ => return Err(RouterRecvError::UnknownFeedback { server: from, id }),
        };
        if let Some(c) = self
            .admission
            .as_mut()
            .and_then(|a| a.classes.get_mut(usize::from(class)))
        {
            c.window.record(now.saturating_sub(arrived));
        }
        self.stats.feedbacks += 1;
        self.finish(now, id);
        self.release_waiting(now);
        Ok(())
    }

    /// `id` (outstanding) no longer counts against its server; its server
    /// is remembered for `sticky_ns`.
    fn finish(&mut self, now: Nanos, id: Identity) {
        let Some(t) = self.tracked.get_mut(&id) else {
            return;
        };
        self.outstanding[t.server] -= 1;
        t.phase = Phase::Done;
        t.epoch = t.epoch.wrapping_add(1);
        self.forget_due
            .push_back((now.saturating_add(self.cfg.sticky_ns), id, t.epoch));
    }

    /// Sends waiting requests on while a server has room.
    fn release_waiting(&mut self, now: Nanos) {
        while !self.waiting.is_empty() {
            let Some(server) = self.pick() else {
                return;
            };
            let Some(w) = self.waiting.pop_front() else {
                return;
            };
            self.start(now, w.id, server, w.class);
            self.tx.push_back(Out::Forward {
                server,
                origin: w.origin,
                len: w.len,
                bytes: w.bytes,
            });
        }
    }

    /// Counts `id` against `server` from `now`.
    fn start(&mut self, now: Nanos, id: Identity, server: usize, class: u8) {
        self.outstanding[server] += 1;
        self.stats.forwarded += 1;
        self.stats.per_server[server] += 1;
        let t = self.tracked.entry(id).or_insert(Tracked {
            server,
            phase: Phase::Outstanding,
            arrived: now,
            class,
            epoch: 0,
        });
        t.server = server;
        t.phase = Phase::Outstanding;
        t.epoch = t.epoch.wrapping_add(1);
        let epoch = t.epoch;
        self.feedback_due
            .push_back((now.saturating_add(self.cfg.feedback_timeout_ns), id, epoch));
    }

    /// `raw` (one packet) in a spare buffer.
    fn copy_of(&mut self, raw: &[u8]) -> Box<[u8; MAX_PACKET_LEN]> {
        let mut bytes = self
            .spare
            .pop()
            .unwrap_or_else(|| Box::new([0; MAX_PACKET_LEN]));
        bytes[..raw.len()].copy_from_slice(raw);
        bytes
    }

    fn push_forward(&mut self, server: usize, origin: SocketAddrV4, raw: &[u8]) {
        let bytes = self.copy_of(raw);
        self.tx.push_back(Out::Forward {
            server,
            origin,
            len: raw.len(),
            bytes,
        });
    }

    fn next_random(&mut self) -> u64 {
        self.rng.next_u64()
    }

    /// The server for a new request now, or `None` when every server is at
    /// the `jbsq` bound. O(servers).
    fn pick(&mut self) -> Option<usize> {
        let n = self.cfg.servers.len();
        if n == 0 {
            return None;
        }
        match self.cfg.policy {
            Policy::Random => Some((self.next_random() % n as u64) as usize),
            Policy::RoundRobin => {
                let s = self.rr % n;
                self.rr = (s + 1) % n;
                Some(s)
            }
            Policy::Jsq | Policy::Jbsq(_) => {
                let least = *self.outstanding.iter().min()?;
                if let Policy::Jbsq(bound) = self.cfg.policy {
                    if least >= bound {
                        return None;
                    }
                }
                // A seeded pick among the least loaded.
                let ties = self.outstanding.iter().filter(|&&o| o == least).count();
                let k = (self.next_random() % ties as u64) as usize;
                self.outstanding
                    .iter()
                    .enumerate()
                    .filter(|(_, &o)| o == least)
                    .nth(k)
                    .map(|(i, _)| i)
            }
        }
    }

    /// The earliest time [`handle_timeout`](Self::handle_timeout) has work.
    pub fn poll_timeout(&self) -> Option<Nanos> {
        let a = self.feedback_due.front().map(|e| e.0);
        let b = self.forget_due.front().map(|e| e.0);
        let c = self.admission.as_ref().map(|a| a.next_update);
        [a, b, c].into_iter().flatten().min()
    }

    /// Releases requests whose FEEDBACK is overdue (sending waiting ones
    /// on) and forgets identities past their stickiness. O(1) amortised.
    pub fn handle_timeout(&mut self, now: Nanos) {
        self.control(now);
        while let Some(&(at, id, epoch)) = self.feedback_due.front() {
            if at > now {
                break;
            }
            self.feedback_due.pop_front();
            let live = self
                .tracked
                .get(&id)
                .is_some_and(|t| t.epoch == epoch && t.phase == Phase::Outstanding);
            if live {
                self.stats.feedback_timeouts += 1;
                self.finish(now, id);
            }
        }
        while let Some(&(at, id, epoch)) = self.forget_due.front() {
            if at > now {
                break;
            }
            self.forget_due.pop_front();
            if self
                .tracked
                .get(&id)
                .is_some_and(|t| t.epoch == epoch && t.phase == Phase::Done)
            {
                self.tracked.remove(&id);
            }
        }
        self.release_waiting(now);
    }

    /// The next packet to send, built into `buf` (at least
    /// [`MAX_PACKET_LEN`] bytes), or `None`.
    pub fn poll_transmit(&mut self, buf: &mut [u8]) -> Option<Forward> {
        while let Some(out) = self.tx.pop_front() {
            match out {
                Out::Forward {
                    server,
                    origin,
                    len,
                    bytes,
                } => {
                    let dst = self.cfg.servers[server];
                    let Some(to) = buf.get_mut(..len) else {
                        self.spare.push(bytes);
                        continue;
                    };
                    to.copy_from_slice(&bytes[..len]);
                    self.spare.push(bytes);
                    return Some(Forward {
                        dst,
                        origin,
                        len,
                        forwarded: true,
                    });
                }
                Out::Drop { to, req_id } => {
                    let h =
                        Header::for_packet(MsgType::Drop, wire::policy::FIXED_ROUTE, req_id, 0, 1);
                    if let Ok(len) = h.emit(wire::DROP_PAYLOAD, buf) {
                        return Some(Forward {
                            dst: to,
                            origin: to,
                            len,
                            forwarded: false,
                        });
                    }
                }
            }
        }
        None
    }
}
