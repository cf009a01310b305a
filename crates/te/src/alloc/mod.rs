//! Tunnel-tree allocation (X-Lane §3): the optimization and adjustment
//! phases, release and change.
//!
//! # Tunnels
//!
//! A tunnel `T` is a directed tree in the topology from one sender host to
//! one or more receiver hosts (unicast or multicast), carrying packets of at
//! most `σ(T)` bytes, released by the sender's rate limiter exactly once
//! every period `π(T)`, on an express sub-lane `s(T)` (0 = highest priority).
//! Only switches forward (see [`crate::topology`]), so inner tree nodes are
//! switches.
//!
//! # Delay model (adjustment phase)
//!
//! For a hop over link `e = (u, v)` with bandwidth `bw(e)`, write
//! `tx_X(e) = ⌈8·σ(X)·10⁹ / bw(e)⌉` ns for the transmission time of a packet of
//! tunnel `X`. Each link's egress has, per X-Lane §4.2, a **strict-priority,
//! non-preemptive** scheduler: one FIFO queue per express sub-lane (length
//! `qlen(e)` packets each), served before lower sub-lanes and before best
//! effort. The queueing delay a packet of `T` can suffer at `e` is bounded by
//!
//! ```text
//! Q_T(e) = NP(e)                                   non-preemption
//!        + Σ_{X ≠ T on e, s(X) = s(T)}  tx_X(e)     same sub-lane: one packet each
//!        + Σ_{X on e,     s(X) < s(T)}  2·tx_X(e)   higher sub-lanes: two packets each
//! ```
//!
//! where `NP(e) = ⌈8·MTU·10⁹ / bw(e)⌉` (one best-effort or lower-sub-lane
//! packet of at most one MTU already in transmission; [`TeConfig::non_preemption`]
//! turns it off). Lower sub-lanes never appear in `Q_T`: adding a tunnel on a
//! lower sub-lane never changes a higher one's range, while a higher one
//! raises the lower ones' (X-Lane §3.3 "sub-lanes").
//!
//! Per hop, a packet takes between `tx_T(e) + λmin(e)` (`λmin(e)` alone on a
//! token-bucket–emulated link, see [`crate::topology`]) and
//! `tx_T(e) + λmin(e) + δmax(e) + Q_T(e)`. For a receiver `r` the path
//! sender → `r` in the tree (found by a depth-first walk) gives
//! `[Σ min, Σ max]`. **One range per tunnel** (as in the paper's
//! `resources`): `λmin(T) = min_r Σ min`, `λmin(T) + δmax(T) = max_r Σ max`;
//! the per-receiver ranges are also kept in [`Tunnel::per_receiver`].
//!
//! ## Assumptions, and the period condition that makes them hold
//!
//! 1. Senders release packets exactly every `π`; all other variation is
//!    the links' `δmax` and queueing.
//! 2. **At most one packet per tunnel is in a given egress queue at any
//!    instant.** The arrival times of a tunnel's consecutive packets at `e`
//!    differ by at least `π(T) − J_T(e)`, where `J_T(e) = Σ (δmax + Q_T)` over
//!    the hops before `e` (upstream jitter), and a packet stays at most
//!    `D(e) = max_X (Q_X(e) + tx_X(e))` at `e`. So the allocator requires
//!    `π(T) ≥ J_T(e) + D(e)` for every link `e` of `T` (the "drain
//!    condition"); a request's period is raised to meet it.
//! 3. Same sub-lane queues are FIFO: packets arriving after ours are served
//!    after it. A higher sub-lane tunnel `H` may have one packet queued when
//!    ours arrives and, because `π(H) − J_H(e) ≥ D(e)` ≥ our wait, at most one
//!    more arriving while we wait: hence the factor 2.
//! 4. `λmin(e)`, `δmax(e)` include switching/processing and propagation
//!    (X-Lane §3.1); switches never drop express packets while queues do not
//!    overflow (checked below).
//!
//! ## Admission
//!
//! A tunnel set is **valid** when on every link `e` and sub-lane `s`:
//! - the number of tunnels of sub-lane `s` on `e` (= packets that can be
//!   queued at once, by assumption 2) is ≤ `qlen(e)`, else
//!   [`Refusal::QueueOverflow`];
//! - `Σ ⌈8·σ·10⁹/π⌉` over those tunnels (bits/s) is ≤
//!   `bw(e)·express_share_permille/1000` (the express class's guaranteed
//!   rate, per sub-lane like the testbed's HTB classes), else
//!   [`Refusal::Bandwidth`];
//! - every tunnel meets its drain condition.
//!
//! A new tunnel's period is the smallest `π ≥` requested that meets its
//! bandwidth share and drain condition ([`Grant::period_raised`] says if it
//! was raised); existing tunnels' periods are never changed by someone
//! else's request: if the new tunnel would break an existing tunnel's drain
//! condition the request is refused ([`Refusal::WouldInvalidate`]).
//!
//! # Optimization phase
//!
//! Receivers are attached one by one. At each step, for every receiver not
//! yet attached and every node `u` of the current tree that may forward (the
//! sender or a switch), the shortest path from `u` to the receiver that
//! avoids the tree's other nodes and crosses only switches is a candidate.
//! The Dijkstra weight of a link is `tx + λmin + δmax` plus its current
//! queueing bound for the request's sub-lane. The candidate that gives the
//! least objective `Σ_T (λmin(T) + δmax(T))` over all tunnels is attached
//! (ties: fewest links, then receiver order). Links whose queue is full or
//! whose bandwidth share is exhausted are skipped; when that leaves no path
//! the unfiltered path is used so that the refusal names the full link.
//!
//! A step's candidates come from one search per tree node that may forward
//! (to every receiver), or from one backward search per receiver (from
//! every such tree node), whichever takes fewer searches: a multicast tree
//! to four receivers takes about seven searches rather than one per tree
//! node and step. Ties between candidates of equal score and length go to
//! the receiver listed first, then the tree node attached first, either
//! way.
//!
//! # Incremental allocation
//!
//! Nothing is recomputed from scratch on an operation. The allocator keeps
//! every link's express load (per sub-lane: tunnels, the sum of their
//! transmission times, the sum of their rates) and, per link, the tunnels
//! whose trees cross it. A tunnel's range and drain condition depend only
//! on the loads of its own links, so a tunnel on links `L` can change only
//! the tunnels that cross `L`:
//!
//! - a request runs Dijkstra (goal-directed by a lower bound, see the
//!   `search` module) over an adjacency that keeps, per link and
//!   sub-lane, the link's weight but for the request's own transmission
//!   time, its free queue slots and its free share, laid out node after
//!   node and refreshed for the links a tunnel comes or goes on (stopping
//!   once the nodes sought are settled). A candidate is scored by the
//!   candidate tree's own maximum latency plus the rise of the maxima of
//!   the tunnels on the new path's links, over the tree so far: every
//!   candidate of a step differs from the objective by the same constant
//!   (the current objective and what the tree so far adds), so the trees
//!   chosen are the ones a full evaluation would choose; a unicast request
//!   has one candidate and is not scored. Nothing is walked to score: a
//!   hop's maximum is linear in its link's load and depends on nothing
//!   upstream, so a tunnel's rise is what the path adds to the links it
//!   shares with each receiver's tree path (a multicast tunnel: the rise of
//!   its greatest receiver, from its stored per-receiver maxima, or one
//!   walk per step while ranges are deferred);
//! - admission checks the new tree's links and re-walks the same tunnels;
//! - release and change take the tunnel's load away (and put the new one
//!   back) and re-walk the tunnels that shared its links.
//!
//! So an operation costs its Dijkstra runs (over the switches each has to
//! explore), for a multicast request, per candidate, a sum over the
//! receivers' tree paths of each tunnel on the candidate path's links, and
//! the walks at admission of the tunnels on its tree's links: at most
//! `qlen(e)` tunnels per sub-lane and link, whatever the number of
//! tunnels elsewhere.
//! [`Allocator::request_on_tree`] skips the searches (journal replay).
//! [`Allocator::verify`] recomputes loads, index, the search's adjacency
//! and every range from scratch and compares.

use crate::topology::{LinkId, NodeId, NodeKind, Topology};
use std::collections::HashMap;

mod index;
mod model;
mod radix;
mod search;
mod tree;

use index::OnLink;
use model::{LinkConst, LinkLoad, Model, Shape, ShapeRef, TreeIndex, Walk};
use search::{Adjacency, Search};
use tree::Scoring;

/// An admitted tunnel: its shape (period as granted), the walks of the
/// tunnels it affects, its own walk.
type Admitted = (Shape, Vec<(TunnelId, Walk)>, Walk);

/// Identifier of an allocated tunnel (unique for the allocator's lifetime).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TunnelId(pub u64);

impl std::fmt::Display for TunnelId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "tunnel {}", self.0)
    }
}

/// Hashes a tunnel id by one multiplication (ids are the allocator's
/// own, not chosen by a peer): the allocator's tunnels and the step's
/// table of multicast tunnels are read once per tunnel on every candidate
/// path or re-walk.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct IdHasher(u64);

impl std::hash::Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ b as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }

    fn write_u64(&mut self, x: u64) {
        self.0 = (self.0 ^ x).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

/// Builds [`IdHasher`]s.
pub(super) type BuildIdHasher = std::hash::BuildHasherDefault<IdHasher>;

/// The most express sub-lanes the allocator models.
pub const MAX_SUBLANES: usize = 4;

/// Allocator parameters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TeConfig {
    /// Largest packet (bytes): the maximum `σ`, and the non-preemptable
    /// best-effort packet of the delay model. Default 1500.
    pub mtu_bytes: u32,
    /// Number of express sub-lanes (0 is the highest priority), 1 to
    /// [`MAX_SUBLANES`]. Default 2.
    pub sublanes: u8,
    /// Share of each link's bandwidth that each sub-lane may use, in ‰.
    /// Default 100 (the testbed's `express_rate_percent = 10`).
    pub express_share_permille: u32,
    /// Whether to add the non-preemption term `NP(e)`. Default true.
    pub non_preemption: bool,
    /// Smallest period a rate limiter can enforce, ns. Default 1 µs.
    pub min_period_ns: u64,
    /// Largest period the allocator will grant, ns. Default 1 s.
    pub max_period_ns: u64,
}

impl Default for TeConfig {
    fn default() -> Self {
        TeConfig {
            mtu_bytes: 1500,
            sublanes: 2,
            express_share_permille: 100,
            non_preemption: true,
            min_period_ns: 1_000,
            max_period_ns: 1_000_000_000,
        }
    }
}

/// A service's request (`requestBandwidth` of X-Lane List. 1), by host name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// Sending host.
    pub sender: String,
    /// Receiving hosts: one for unicast, several for multicast.
    pub receivers: Vec<String>,
    /// `σ`: maximum packet size, bytes (`loadsize`).
    pub load_bytes: u32,
    /// Requested period, ns (the granted one may be larger).
    pub period_ns: u64,
    /// Express sub-lane, 0 = highest priority.
    pub sublane: u8,
}

/// A latency range `[min_latency_ns, min_latency_ns + max_jitter_ns]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LatencyRange {
    /// `λmin`, ns.
    pub min_latency_ns: u64,
    /// `δmax`, ns.
    pub max_jitter_ns: u64,
}

impl LatencyRange {
    /// `λmin + δmax`, ns.
    pub fn max_latency_ns(&self) -> u64 {
        self.min_latency_ns + self.max_jitter_ns
    }
}

/// The approved parameters of a tunnel (`struct resources` of List. 1, in ns).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Resources {
    /// `σ`, bytes.
    pub load_bytes: u32,
    /// Granted period `π`, ns.
    pub period_ns: u64,
    /// `λmin(T)`, ns.
    pub min_latency_ns: u64,
    /// `δmax(T)`, ns.
    pub max_jitter_ns: u64,
}

impl Resources {
    /// `λmin + δmax`, ns (saturating: a demoted tunnel's `δmax` is unbounded).
    pub fn max_latency_ns(&self) -> u64 {
        self.min_latency_ns.saturating_add(self.max_jitter_ns)
    }
}

/// An allocated tunnel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tunnel {
    /// Its id.
    pub id: TunnelId,
    /// Sending host.
    pub sender: NodeId,
    /// Receiving hosts, in request order.
    pub receivers: Vec<NodeId>,
    /// `σ`, bytes.
    pub load_bytes: u32,
    /// The period asked for, ns.
    pub requested_period_ns: u64,
    /// The granted period, ns (≥ requested).
    pub period_ns: u64,
    /// Express sub-lane.
    pub sublane: u8,
    /// The tree's links, in the order they were attached.
    pub links: Vec<LinkId>,
    /// The tunnel's range (min over receivers, max over receivers).
    pub range: LatencyRange,
    /// Each receiver's own range, in [`Tunnel::receivers`] order.
    pub per_receiver: Vec<(NodeId, LatencyRange)>,
    /// Its tree's index, for walks and scoring (kept from the grant).
    index: TreeIndex,
}

impl Tunnel {
    /// Its walk under `loads`, by its index (debug builds check it
    /// against the plain walk).
    fn walk(&self, model: &Model<'_>, loads: &[LinkLoad]) -> Walk {
        let w = model.walk_indexed(self.shape_ref(), &self.index, loads);
        debug_assert_eq!(w, model.walk(self.shape_ref(), loads), "{}", self.id);
        w
    }

    fn shape_ref(&self) -> ShapeRef<'_> {
        ShapeRef {
            sender: self.sender,
            receivers: &self.receivers,
            links: &self.links,
            load: self.load_bytes,
            lane: self.sublane,
        }
    }

    /// The tunnel's parameters as returned to the service.
    pub fn resources(&self) -> Resources {
        Resources {
            load_bytes: self.load_bytes,
            period_ns: self.period_ns,
            min_latency_ns: self.range.min_latency_ns,
            max_jitter_ns: self.range.max_jitter_ns,
        }
    }
}

/// Another tunnel whose resources an operation changed (the controller sends
/// it `bandwidthChanged(new, TE)`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Changed {
    /// The tunnel.
    pub tunnel: TunnelId,
    /// Its resources before.
    pub old: Resources,
    /// Its resources now.
    pub new: Resources,
}

/// The answer to an accepted request or change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    /// The tunnel.
    pub tunnel: TunnelId,
    /// Its approved resources.
    pub resources: Resources,
    /// Whether the granted period is larger than the requested one.
    pub period_raised: bool,
    /// Other tunnels whose resources changed, by id.
    pub changed: Vec<Changed>,
}

/// Why a request (or change) was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// `σ = 0`.
    #[error("load size is 0")]
    ZeroLoad,
    /// `σ` larger than the MTU.
    #[error("load size {load_bytes} B exceeds the MTU of {mtu_bytes} B")]
    LoadTooLarge {
        /// Requested `σ`.
        load_bytes: u32,
        /// The MTU.
        mtu_bytes: u32,
    },
    /// No such sub-lane.
    #[error("sub-lane {sublane} does not exist (there are {sublanes})")]
    UnknownSublane {
        /// Requested sub-lane.
        sublane: u8,
        /// Number of sub-lanes.
        sublanes: u8,
    },
    /// Period below what a rate limiter can enforce.
    #[error("period {requested_ns} ns is below the minimum {min_ns} ns")]
    PeriodTooSmall {
        /// Requested period.
        requested_ns: u64,
        /// The minimum.
        min_ns: u64,
    },
    /// Period above the maximum grantable one.
    #[error("period {requested_ns} ns is above the maximum {max_ns} ns")]
    PeriodTooLarge {
        /// Requested period.
        requested_ns: u64,
        /// The maximum.
        max_ns: u64,
    },
    /// A name that is not a node.
    #[error("unknown host `{0}`")]
    UnknownHost(String),
    /// A name that is a switch.
    #[error("`{0}` is a switch, not a host")]
    NotAHost(String),
    /// Empty receiver list.
    #[error("no receivers")]
    NoReceivers,
    /// A receiver listed twice.
    #[error("receiver `{0}` listed twice")]
    DuplicateReceiver(String),
    /// The sender listed as a receiver.
    #[error("receiver `{0}` is the sender")]
    ReceiverIsSender(String),
    /// No path (cannot happen on a validated topology; kept for safety).
    #[error("no path from `{from}` to `{to}`")]
    NoPath {
        /// Sender.
        from: String,
        /// Receiver.
        to: String,
    },
    /// A given tree (journal replay) that is not a tree for the request.
    #[error("the given links are not a tree for this request: {0}")]
    NotATree(String),
    /// More packets could be queued than the express queue holds.
    #[error("express queue of sub-lane {sublane} on {link} would overflow: {packets} packets > {capacity}")]
    QueueOverflow {
        /// The link, `"a -> b"`.
        link: String,
        /// Sub-lane.
        sublane: u8,
        /// Packets that could be queued.
        packets: u32,
        /// Queue length.
        capacity: u32,
    },
    /// The sub-lane's bandwidth share on a link is exhausted.
    #[error("sub-lane {sublane} bandwidth on {link} exhausted: {used_bps} of {capacity_bps} bit/s used by others")]
    Bandwidth {
        /// The link.
        link: String,
        /// Sub-lane.
        sublane: u8,
        /// Used by other tunnels, bit/s.
        used_bps: u64,
        /// The share, bit/s.
        capacity_bps: u64,
    },
    /// Meeting the drain condition or bandwidth would need a period above the
    /// maximum.
    #[error("the tunnel would need a period of {required_ns} ns, above the maximum {max_ns} ns")]
    PeriodUnattainable {
        /// Needed period.
        required_ns: u64,
        /// The maximum.
        max_ns: u64,
    },
    /// The tunnel would break an existing tunnel's drain condition.
    #[error("{tunnel} would need a period of {required_ns} ns but has {period_ns} ns")]
    WouldInvalidate {
        /// The existing tunnel.
        tunnel: TunnelId,
        /// Its period.
        period_ns: u64,
        /// The period it would need.
        required_ns: u64,
    },
}

/// Why a change was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChangeError {
    /// No such tunnel.
    #[error("{0} does not exist")]
    UnknownTunnel(TunnelId),
    /// The new parameters cannot be served; the tunnel is unchanged.
    #[error(transparent)]
    Refused(#[from] Refusal),
}

/// Why a release failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReleaseError {
    /// No such tunnel.
    #[error("{0} does not exist")]
    UnknownTunnel(TunnelId),
}

/// An allocation invariant that does not hold (see [`Allocator::verify`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invariant violated: {0}")]
pub struct InvariantViolation(pub String);

/// `⌈bytes · 8·10⁹ / per⌉` (in 64 bits when it fits: it runs once per
/// link in every path search).
fn bits_over(bytes: u32, per: u64) -> u64 {
    let per = per.max(1);
    // 8·10⁹ · 2³¹ < 2⁶⁴.
    if bytes < 1 << 31 {
        (bytes as u64 * 8_000_000_000).div_ceil(per)
    } else {
        let num = bytes as u128 * 8 * 1_000_000_000;
        u64::try_from(num.div_ceil(per as u128)).unwrap_or(u64::MAX)
    }
}

/// Transmission time of `bytes` at `bps`, ns, rounded up.
pub fn tx_ns(bytes: u32, bps: u64) -> u64 {
    bits_over(bytes, bps)
}

/// Bit rate of `bytes` every `period_ns`, bit/s, rounded up.
pub fn rate_bps(bytes: u32, period_ns: u64) -> u64 {
    bits_over(bytes, period_ns)
}

/// The allocator: the topology, the set `𝒯` of tunnels, and the operations of
/// the controller API (request, release, change). Pure: no I/O, no clock.
#[derive(Debug, Clone)]
pub struct Allocator {
    topo: Topology,
    cfg: TeConfig,
    /// By id, hashed: a request looks up hundreds of them (the ones it
    /// re-walks and scores), which a tree of 10⁵ took cache misses at
    /// every level for.
    tunnels: HashMap<TunnelId, Tunnel, BuildIdHasher>,
    next_id: u64,
    /// Every link's express load under all tunnels, kept as they come and
    /// go.
    loads: Vec<LinkLoad>,
    /// Per link, the tunnels whose trees cross it.
    on_link: Vec<OnLink>,
    /// Per link, what the model computes once.
    consts: Vec<LinkConst>,
    /// What the path search reads of every link's load, kept with
    /// `loads`.
    adj: Adjacency,
    /// Scratch space of the path searches.
    search: Search,
    /// Scratch space of the scoring of a tree's candidates.
    scoring: Scoring,
    /// Other tunnels are not re-walked (see [`Allocator::defer_others`]).
    deferred: bool,
}

impl Allocator {
    /// An empty allocation over `topo`.
    ///
    /// # Panics
    ///
    /// If `cfg.sublanes` is not 1 to [`MAX_SUBLANES`].
    pub fn new(topo: Topology, cfg: TeConfig) -> Allocator {
        let links = topo.links().len();
        assert!(
            (1..=MAX_SUBLANES).contains(&(cfg.sublanes as usize)),
            "TeConfig::sublanes must be 1..={MAX_SUBLANES}"
        );
        let loads = vec![LinkLoad::default(); links];
        let consts = LinkConst::all(&topo, &cfg);
        let adj = Adjacency::new(
            &Model {
                topo: &topo,
                cfg: &cfg,
                consts: &consts,
            },
            &loads,
        );
        Allocator {
            loads,
            on_link: vec![OnLink::default(); links],
            consts,
            adj,
            topo,
            cfg,
            tunnels: HashMap::default(),
            next_id: 1,
            search: Search::default(),
            scoring: Scoring::default(),
            deferred: false,
        }
    }

    /// Bring the search's view of `links` up to date with their loads
    /// (after any operation that changed them).
    fn refresh(&mut self, links: &[LinkId]) {
        let model = Model {
            topo: &self.topo,
            cfg: &self.cfg,
            consts: &self.consts,
        };
        self.adj.refresh_all(&model, links, &self.loads);
    }

    /// Replay mode for a journal of operations that were once admitted:
    /// from now on, admissions (their own ranges and periods are exact)
    /// and releases stop re-walking the tunnels that share their links.
    /// Those tunnels' stored ranges go stale, no [`Changed`] is reported
    /// and their drain conditions are not checked, until
    /// [`Allocator::settle`] recomputes every range (and
    /// [`Allocator::verify`] checks everything). A replay then costs each
    /// grant's own walk rather than the walks of every tunnel it touches.
    pub fn defer_others(&mut self) {
        self.deferred = true;
    }

    /// Recompute every tunnel's ranges from the kept loads and leave the
    /// mode [`Allocator::defer_others`] started.
    pub fn settle(&mut self) {
        self.deferred = false;
        let model = Model {
            topo: &self.topo,
            cfg: &self.cfg,
            consts: &self.consts,
        };
        for t in self.tunnels.values_mut() {
            let (range, per, _) = t.walk(&model, &self.loads);
            t.range = range;
            t.per_receiver = per;
        }
    }

    /// The topology.
    pub fn topology(&self) -> &Topology {
        &self.topo
    }

    /// The configuration.
    pub fn config(&self) -> &TeConfig {
        &self.cfg
    }

    /// A tunnel by id.
    pub fn tunnel(&self, id: TunnelId) -> Option<&Tunnel> {
        self.tunnels.get(&id)
    }

    /// All tunnels, by increasing id.
    pub fn tunnels(&self) -> impl Iterator<Item = &Tunnel> {
        let mut all: Vec<&Tunnel> = self.tunnels.values().collect();
        all.sort_unstable_by_key(|t| t.id);
        all.into_iter()
    }

    /// How many tunnels are allocated.
    pub fn len(&self) -> usize {
        self.tunnels.len()
    }

    /// Whether no tunnel is allocated.
    pub fn is_empty(&self) -> bool {
        self.tunnels.is_empty()
    }

    /// The X-TE objective `Σ_T (λmin(T) + δmax(T))`, ns.
    pub fn objective_ns(&self) -> u64 {
        self.tunnels
            .values()
            .map(|t| t.range.max_latency_ns())
            .sum()
    }

    fn check_params(&self, load: u32, period: u64, lane: u8) -> Result<(), Refusal> {
        if load == 0 {
            return Err(Refusal::ZeroLoad);
        }
        if load > self.cfg.mtu_bytes {
            return Err(Refusal::LoadTooLarge {
                load_bytes: load,
                mtu_bytes: self.cfg.mtu_bytes,
            });
        }
        if lane >= self.cfg.sublanes {
            return Err(Refusal::UnknownSublane {
                sublane: lane,
                sublanes: self.cfg.sublanes,
            });
        }
        if period < self.cfg.min_period_ns.max(1) {
            return Err(Refusal::PeriodTooSmall {
                requested_ns: period,
                min_ns: self.cfg.min_period_ns.max(1),
            });
        }
        if period > self.cfg.max_period_ns {
            return Err(Refusal::PeriodTooLarge {
                requested_ns: period,
                max_ns: self.cfg.max_period_ns,
            });
        }
        Ok(())
    }

    fn host(&self, name: &str) -> Result<NodeId, Refusal> {
        let id = self
            .topo
            .node_id(name)
            .ok_or_else(|| Refusal::UnknownHost(name.to_string()))?;
        if self.topo.node(id).kind != NodeKind::Host {
            return Err(Refusal::NotAHost(name.to_string()));
        }
        Ok(id)
    }

    fn model(&self) -> Model<'_> {
        Model {
            topo: &self.topo,
            cfg: &self.cfg,
            consts: &self.consts,
        }
    }

    /// Adds (`add`) or takes away `s`'s load in the kept link loads.
    fn book(&mut self, s: &Shape, add: bool) {
        let model = Model {
            topo: &self.topo,
            cfg: &self.cfg,
            consts: &self.consts,
        };
        model.apply(&mut self.loads, &s.links, s.load, s.period, s.lane, add);
    }

    fn shape(t: &Tunnel) -> Shape {
        Shape {
            sender: t.sender,
            receivers: t.receivers.clone(),
            links: t.links.clone(),
            load: t.load_bytes,
            period: t.period_ns,
            lane: t.sublane,
        }
    }

    /// The tunnels that cross any of `links` (but `except`), by id: the
    /// only ones whose ranges or drain conditions a tunnel on `links` can
    /// change.
    fn affected(&self, links: &[LinkId], except: Option<TunnelId>) -> Vec<TunnelId> {
        let mut ids = Vec::new();
        for l in links {
            ids.extend(self.on_link[l.0].all());
        }
        ids.sort_unstable();
        ids.dedup();
        if let Some(e) = except {
            ids.retain(|&i| i != e);
        }
        ids
    }

    /// Adjustment phase and admission of `new` (its tree fixed; `except`,
    /// a tunnel whose load the caller took away, is not checked): raises
    /// `new.period` as needed and checks validity. On success `new`'s load
    /// is in `self.loads` and the walks of the tunnels it affects and its
    /// own are returned; on refusal nothing changed. Other tunnels'
    /// periods never change.
    fn admit(&mut self, except: Option<TunnelId>, mut new: Shape) -> Result<Admitted, Refusal> {
        let model = Model {
            topo: &self.topo,
            cfg: &self.cfg,
            consts: &self.consts,
        };
        let lane = new.lane as usize;
        // Queues and bandwidth, from the other tunnels' loads.
        for &l in &new.links {
            let link = self.topo.link(l);
            let ld = &self.loads[l.0];
            if ld.count[lane] + 1 > link.express_queue_pkts {
                return Err(Refusal::QueueOverflow {
                    link: self.topo.describe_link(l),
                    sublane: new.lane,
                    packets: ld.count[lane] + 1,
                    capacity: link.express_queue_pkts,
                });
            }
            let cap = model.capacity_bps(l);
            let avail = cap.saturating_sub(ld.bps[lane]);
            let bw_err = || Refusal::Bandwidth {
                link: self.topo.describe_link(l),
                sublane: new.lane,
                used_bps: ld.bps[lane],
                capacity_bps: cap,
            };
            if avail == 0 {
                return Err(bw_err());
            }
            let bits = new.load as u128 * 8 * 1_000_000_000;
            let need = u64::try_from(bits.div_ceil(avail as u128)).unwrap_or(u64::MAX);
            if need > self.cfg.max_period_ns {
                return Err(bw_err());
            }
            new.period = new.period.max(need);
        }
        let add = |loads: &mut [LinkLoad], s: &Shape, on: bool| {
            model.apply(loads, &s.links, s.load, s.period, s.lane, on)
        };
        add(&mut self.loads, &new, true);
        let affected = if self.deferred {
            Vec::new()
        } else {
            self.affected(&new.links, except)
        };
        let mut walks = Vec::with_capacity(affected.len());
        for id in affected {
            let t = &self.tunnels[&id];
            let w = t.walk(&model, &self.loads);
            if t.period_ns < w.2 {
                let e = Refusal::WouldInvalidate {
                    tunnel: id,
                    period_ns: t.period_ns,
                    required_ns: w.2,
                };
                add(&mut self.loads, &new, false);
                return Err(e);
            }
            walks.push((id, w));
        }
        let own = model.walk(new.as_ref(), &self.loads);
        if own.2 > self.cfg.max_period_ns {
            add(&mut self.loads, &new, false);
            return Err(Refusal::PeriodUnattainable {
                required_ns: own.2,
                max_ns: self.cfg.max_period_ns,
            });
        }
        if own.2 > new.period {
            // The raised period only lowers the new tunnel's rate (ranges
            // do not depend on periods): book it at the granted one.
            add(&mut self.loads, &new, false);
            new.period = own.2;
            add(&mut self.loads, &new, true);
        }
        Ok((new, walks, own))
    }

    /// `requestBandwidth`: allocate a new tunnel (optimization, then
    /// adjustment phase). On refusal nothing changes.
    pub fn request(&mut self, req: &Request) -> Result<Grant, Refusal> {
        let mut new = self.shape_of(req)?;
        new.links = self.build_tree(&new)?;
        self.admit_new(new, req.period_ns)
    }

    /// A request on a given tree (`links` in the order they were
    /// attached, each leaving the sender or a node an earlier link
    /// reached), skipping the optimization phase: how a journal replay
    /// re-admits a tunnel on the tree it was granted. The tree must reach
    /// every receiver, forward only through switches and end only at
    /// receivers ([`Refusal::NotATree`] otherwise); admission is as for
    /// [`Allocator::request`].
    pub fn request_on_tree(&mut self, req: &Request, links: &[LinkId]) -> Result<Grant, Refusal> {
        let mut new = self.shape_of(req)?;
        self.check_tree(&new, links)?;
        new.links = links.to_vec();
        self.admit_new(new, req.period_ns)
    }

    /// Admission of a new tunnel on its tree, and its grant.
    fn admit_new(&mut self, new: Shape, requested: u64) -> Result<Grant, Refusal> {
        let (new, walks, own) = self.admit(None, new)?;
        let id = TunnelId(self.next_id);
        self.next_id += 1;
        let changed = self.commit(walks, id, &new, requested, own);
        Ok(self.grant(id, changed))
    }

    /// A request's shape, parameters and hosts checked (no tree yet).
    fn shape_of(&self, req: &Request) -> Result<Shape, Refusal> {
        self.check_params(req.load_bytes, req.period_ns, req.sublane)?;
        let sender = self.host(&req.sender)?;
        if req.receivers.is_empty() {
            return Err(Refusal::NoReceivers);
        }
        let mut receivers = Vec::with_capacity(req.receivers.len());
        for r in &req.receivers {
            let id = self.host(r)?;
            if id == sender {
                return Err(Refusal::ReceiverIsSender(r.clone()));
            }
            if receivers.contains(&id) {
                return Err(Refusal::DuplicateReceiver(r.clone()));
            }
            receivers.push(id);
        }
        Ok(Shape {
            sender,
            receivers,
            links: Vec::new(),
            load: req.load_bytes,
            period: req.period_ns,
            lane: req.sublane,
        })
    }

    /// Store an admission: the affected tunnels' new ranges, `id` inserted
    /// or replaced and indexed by link; returns the other tunnels whose
    /// resources changed.
    fn commit(
        &mut self,
        walks: Vec<(TunnelId, Walk)>,
        id: TunnelId,
        new: &Shape,
        requested: u64,
        own: Walk,
    ) -> Vec<Changed> {
        let changed = self.store_walks(walks);
        let multicast = new.receivers.len() > 1;
        for l in &new.links {
            self.on_link[l.0].insert(id, multicast, new.lane);
        }
        self.refresh(&new.links);
        let index = TreeIndex::new(&self.topo, new.as_ref());
        self.tunnels.insert(
            id,
            Tunnel {
                id,
                sender: new.sender,
                receivers: new.receivers.clone(),
                load_bytes: new.load,
                requested_period_ns: requested,
                period_ns: new.period,
                sublane: new.lane,
                links: new.links.clone(),
                range: own.0,
                per_receiver: own.1,
                index,
            },
        );
        changed
    }

    /// Store tunnels' new ranges; returns those whose resources changed.
    fn store_walks(&mut self, walks: Vec<(TunnelId, Walk)>) -> Vec<Changed> {
        let mut changed = Vec::new();
        for (oid, (range, per, _)) in walks {
            if let Some(t) = self.tunnels.get_mut(&oid) {
                let old = t.resources();
                t.range = range;
                // Into the tunnel's own vector: the walk's, freed at once,
                // is what the next walk reuses, where replacing the
                // long-lived one spread fresh pages through the heap.
                t.per_receiver.clone_from(&per);
                let now = t.resources();
                if now != old {
                    changed.push(Changed {
                        tunnel: oid,
                        old,
                        new: now,
                    });
                }
            }
        }
        changed
    }

    /// `releaseBandwidth`: remove a tunnel and re-adjust the tunnels that
    /// shared its links; returns those whose resources changed (their
    /// ranges can only shrink).
    pub fn release(&mut self, id: TunnelId) -> Result<Vec<Changed>, ReleaseError> {
        let Some(t) = self.tunnels.remove(&id) else {
            return Err(ReleaseError::UnknownTunnel(id));
        };
        self.book(&Self::shape(&t), false);
        for l in &t.links {
            self.on_link[l.0].remove(id, t.receivers.len() > 1, t.sublane);
        }
        self.refresh(&t.links);
        if self.deferred {
            return Ok(Vec::new());
        }
        let model = self.model();
        let walks: Vec<(TunnelId, Walk)> = self
            .affected(&t.links, None)
            .into_iter()
            .map(|oid| (oid, self.tunnels[&oid].walk(&model, &self.loads)))
            .collect();
        Ok(self.store_walks(walks))
    }

    /// `changeBandwidth`: give a tunnel a new `σ` and requested period,
    /// keeping its tree. Admission is as for a new request; on refusal the
    /// tunnel keeps its old parameters.
    pub fn change(
        &mut self,
        id: TunnelId,
        load_bytes: u32,
        period_ns: u64,
    ) -> Result<Grant, ChangeError> {
        let t = self
            .tunnels
            .get(&id)
            .ok_or(ChangeError::UnknownTunnel(id))?;
        self.check_params(load_bytes, period_ns, t.sublane)?;
        let old = Self::shape(t);
        let mut new = old.clone();
        new.load = load_bytes;
        new.period = period_ns;
        self.book(&old, false);
        let (new, walks, own) = match self.admit(Some(id), new) {
            Ok(x) => x,
            Err(e) => {
                self.book(&old, true);
                return Err(e.into());
            }
        };
        let changed = self.commit(walks, id, &new, period_ns, own);
        Ok(self.grant(id, changed))
    }

    /// The answer for tunnel `id`, just admitted.
    fn grant(&self, id: TunnelId, changed: Vec<Changed>) -> Grant {
        let t = &self.tunnels[&id];
        Grant {
            tunnel: id,
            resources: t.resources(),
            period_raised: t.period_ns > t.requested_period_ns,
            changed,
        }
    }

    /// Check every invariant of the current allocation against a
    /// recomputation from scratch: the kept link loads and link index equal
    /// fresh ones, stored ranges equal a fresh adjustment, `λmin(T)` ≥ the
    /// sum of link `λmin` to each receiver, each tree reaches all its
    /// receivers from its sender, no express queue can overflow, sub-lane
    /// bandwidth shares hold, and every period is ≥ the requested one and
    /// meets its drain condition.
    pub fn verify(&self) -> Result<(), InvariantViolation> {
        let others: Vec<(TunnelId, Shape)> = self
            .tunnels
            .values()
            .map(|t| (t.id, Self::shape(t)))
            .collect();
        let shapes: Vec<Shape> = others.iter().map(|(_, s)| s.clone()).collect();
        let model = self.model();
        let loads = model.loads(&shapes);
        let bad = |m: String| Err(InvariantViolation(m));
        if loads != self.loads {
            return bad("kept link loads differ from a recomputation".into());
        }
        let mut index = vec![OnLink::default(); self.topo.links().len()];
        for (id, s) in &others {
            for l in &s.links {
                index[l.0].insert(*id, s.receivers.len() > 1, s.lane);
            }
        }
        if index != self.on_link {
            return bad("kept link index differs from the tunnels' trees".into());
        }
        if Adjacency::new(&model, &loads) != self.adj {
            return bad("the path search's view of the loads is stale".into());
        }
        for (id, s) in &others {
            let t = &self.tunnels[id];
            let (range, per, need) = &model.walk(s.as_ref(), &loads);
            if *range != t.range || *per != t.per_receiver {
                return bad(format!("{id}: stored range is stale"));
            }
            if TreeIndex::new(&self.topo, s.as_ref()) != t.index {
                return bad(format!("{id}: kept tree index differs from its tree"));
            }
            if per.len() != t.receivers.len() {
                return bad(format!("{id}: tree does not reach every receiver"));
            }
            if t.period_ns < t.requested_period_ns || t.period_ns < *need {
                return bad(format!("{id}: period {} too small", t.period_ns));
            }
            // λmin along each receiver's path.
            let mut parent: HashMap<NodeId, LinkId> = HashMap::new();
            for &l in &s.links {
                if parent.insert(self.topo.link(l).to, l).is_some() {
                    return bad(format!("{id}: not a tree"));
                }
            }
            for &(r, rr) in per {
                let mut sum = 0u64;
                let mut v = r;
                let mut steps = 0;
                while v != s.sender {
                    let Some(&l) = parent.get(&v) else {
                        return bad(format!("{id}: receiver not connected"));
                    };
                    sum += self.topo.link(l).min_latency_ns;
                    v = self.topo.link(l).from;
                    steps += 1;
                    if steps > s.links.len() {
                        return bad(format!("{id}: cycle"));
                    }
                }
                if rr.min_latency_ns < sum || t.range.min_latency_ns > rr.min_latency_ns {
                    return bad(format!("{id}: λmin below the path's link λmin"));
                }
                if t.range.max_latency_ns() < rr.max_latency_ns() {
                    return bad(format!("{id}: range does not cover a receiver"));
                }
            }
        }
        for (i, ld) in loads.iter().enumerate() {
            let l = LinkId(i);
            let link = self.topo.link(l);
            for k in 0..ld.count.len() {
                if ld.count[k] > link.express_queue_pkts {
                    return bad(format!("queue overflow on {}", self.topo.describe_link(l)));
                }
                if ld.bps[k] > model.capacity_bps(l) {
                    return bad(format!("bandwidth over on {}", self.topo.describe_link(l)));
                }
            }
        }
        Ok(())
    }
}

/// Test fabrics with drawn link parameters.
#[cfg(test)]
mod testing {
    use crate::topology::{LinkSpec, Topology};

    /// A seeded stream of numbers below `n` (a linear congruential
    /// generator).
    pub(super) fn below(seed: u64) -> impl FnMut(usize) -> usize {
        let mut x = seed;
        move |n: usize| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((x >> 33) as usize) % n
        }
    }

    /// `base` with every link's (rate, λmin, δmax) given by `draw`, which
    /// draws from an xorshift stream seeded by `seed`.
    pub(super) fn reweighted(
        base: &Topology,
        seed: u64,
        draw: impl Fn(&mut dyn FnMut() -> u64) -> (u64, u64, u64),
    ) -> Topology {
        let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let links = base
            .links()
            .iter()
            .map(|l| {
                let (bandwidth_bps, min_latency_ns, max_jitter_ns) = draw(&mut next);
                LinkSpec {
                    from: base.node(l.from).name.clone(),
                    to: base.node(l.to).name.clone(),
                    bandwidth_bps,
                    express_queue_pkts: l.express_queue_pkts,
                    best_effort_queue_pkts: l.best_effort_queue_pkts,
                    min_latency_ns,
                    max_jitter_ns,
                    min_includes_tx: l.min_includes_tx,
                }
            })
            .collect();
        Topology::new(base.nodes().to_vec(), links).expect("same graph")
    }
}
