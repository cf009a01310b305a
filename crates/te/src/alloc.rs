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

use crate::topology::{LinkId, NodeId, NodeKind, Topology};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap, HashSet};

/// Identifier of an allocated tunnel (unique for the allocator's lifetime).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TunnelId(pub u64);

impl std::fmt::Display for TunnelId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "tunnel {}", self.0)
    }
}

/// Allocator parameters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TeConfig {
    /// Largest packet (bytes): the maximum `σ`, and the non-preemptable
    /// best-effort packet of the delay model. Default 1500.
    pub mtu_bytes: u32,
    /// Number of express sub-lanes (0 is the highest priority). Default 2.
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
}

impl Tunnel {
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

/// Transmission time of `bytes` at `bps`, ns, rounded up.
pub fn tx_ns(bytes: u32, bps: u64) -> u64 {
    let num = bytes as u128 * 8 * 1_000_000_000;
    let bps = bps.max(1) as u128;
    u64::try_from(num.div_ceil(bps)).unwrap_or(u64::MAX)
}

/// Bit rate of `bytes` every `period_ns`, bit/s, rounded up.
pub fn rate_bps(bytes: u32, period_ns: u64) -> u64 {
    let num = bytes as u128 * 8 * 1_000_000_000;
    u64::try_from(num.div_ceil(period_ns.max(1) as u128)).unwrap_or(u64::MAX)
}

/// What the model needs of a tunnel.
#[derive(Debug, Clone)]
struct Shape {
    sender: NodeId,
    receivers: Vec<NodeId>,
    links: Vec<LinkId>,
    load: u32,
    period: u64,
    lane: u8,
}

#[derive(Debug, Clone, Default)]
struct LinkLoad {
    count: Vec<u32>,
    tx_sum: Vec<u64>,
    bps: Vec<u64>,
}

/// One tree's walk: (tunnel range, per-receiver ranges, drain-condition
/// period).
type Walk = (LatencyRange, Vec<(NodeId, LatencyRange)>, u64);

/// Result of the adjustment phase over a set of shapes.
struct Eval {
    loads: Vec<LinkLoad>,
    /// Per shape: (tunnel range, per-receiver ranges, drain-condition period).
    per: Vec<Walk>,
}

struct Model<'a> {
    topo: &'a Topology,
    cfg: &'a TeConfig,
}

impl Model<'_> {
    fn np(&self, l: LinkId) -> u64 {
        if self.cfg.non_preemption {
            tx_ns(self.cfg.mtu_bytes, self.topo.link(l).bandwidth_bps)
        } else {
            0
        }
    }

    fn capacity_bps(&self, l: LinkId) -> u64 {
        let bw = self.topo.link(l).bandwidth_bps as u128;
        u64::try_from(bw * self.cfg.express_share_permille as u128 / 1000).unwrap_or(u64::MAX)
    }

    fn loads(&self, shapes: &[Shape]) -> Vec<LinkLoad> {
        let lanes = self.cfg.sublanes as usize;
        let mut loads = vec![
            LinkLoad {
                count: vec![0; lanes],
                tx_sum: vec![0; lanes],
                bps: vec![0; lanes],
            };
            self.topo.links().len()
        ];
        for s in shapes {
            let k = s.lane as usize;
            for &l in &s.links {
                let ld = &mut loads[l.0];
                ld.count[k] += 1;
                ld.tx_sum[k] += tx_ns(s.load, self.topo.link(l).bandwidth_bps);
                ld.bps[k] = ld.bps[k].saturating_add(rate_bps(s.load, s.period));
            }
        }
        loads
    }

    /// Queueing delay of a packet of `lane` with transmission time `own_tx`
    /// at `l` (own packet subtracted when `own_tx > 0`, see module docs).
    fn queueing(&self, ld: &LinkLoad, l: LinkId, lane: usize, own_tx: u64) -> u64 {
        let higher: u64 = ld.tx_sum[..lane].iter().sum();
        self.np(l) + ld.tx_sum[lane].saturating_sub(own_tx) + 2 * higher
    }

    /// `D(e)`: longest stay of any packet at `l`.
    fn drain(&self, ld: &LinkLoad, l: LinkId) -> u64 {
        (0..ld.count.len())
            .filter(|&k| ld.count[k] > 0)
            .map(|k| self.queueing(ld, l, k, 0))
            .max()
            .unwrap_or(0)
    }

    fn evaluate(&self, shapes: &[Shape]) -> Eval {
        let loads = self.loads(shapes);
        let drains: Vec<u64> = (0..loads.len())
            .map(|i| self.drain(&loads[i], LinkId(i)))
            .collect();
        let per = shapes
            .iter()
            .map(|s| self.walk(s, &loads, &drains))
            .collect();
        Eval { loads, per }
    }

    /// Depth-first walk of one tree.
    fn walk(&self, s: &Shape, loads: &[LinkLoad], drains: &[u64]) -> Walk {
        let mut children: HashMap<NodeId, Vec<LinkId>> = HashMap::new();
        for &l in &s.links {
            children.entry(self.topo.link(l).from).or_default().push(l);
        }
        let mut at: HashMap<NodeId, (u64, u64)> = HashMap::new();
        let mut need_period = 0u64;
        // (node, min, max, upstream jitter)
        let mut stack = vec![(s.sender, 0u64, 0u64, 0u64)];
        let mut visited = HashSet::new();
        while let Some((u, mn, mx, jup)) = stack.pop() {
            if !visited.insert(u) {
                continue;
            }
            at.insert(u, (mn, mx));
            for &l in children.get(&u).map(Vec::as_slice).unwrap_or(&[]) {
                let link = self.topo.link(l);
                let tx = tx_ns(s.load, link.bandwidth_bps);
                let q = self.queueing(&loads[l.0], l, s.lane as usize, tx);
                need_period = need_period.max(jup.saturating_add(drains[l.0]));
                let tx_min = if link.min_includes_tx { tx } else { 0 };
                stack.push((
                    link.to,
                    mn + tx_min + link.min_latency_ns,
                    mx + tx + link.min_latency_ns + link.max_jitter_ns + q,
                    jup + link.max_jitter_ns + q,
                ));
            }
        }
        let per: Vec<(NodeId, LatencyRange)> = s
            .receivers
            .iter()
            .filter_map(|r| {
                at.get(r).map(|&(mn, mx)| {
                    (
                        *r,
                        LatencyRange {
                            min_latency_ns: mn,
                            max_jitter_ns: mx - mn,
                        },
                    )
                })
            })
            .collect();
        let lo = per.iter().map(|(_, r)| r.min_latency_ns).min().unwrap_or(0);
        let hi = per
            .iter()
            .map(|(_, r)| r.max_latency_ns())
            .max()
            .unwrap_or(0);
        (
            LatencyRange {
                min_latency_ns: lo,
                max_jitter_ns: hi - lo,
            },
            per,
            need_period,
        )
    }

    fn objective(&self, shapes: &[Shape]) -> u64 {
        self.evaluate(shapes)
            .per
            .iter()
            .map(|(r, _, _)| r.max_latency_ns())
            .sum()
    }

    /// Shortest paths from `src` (Dijkstra), through switches only, never
    /// entering `blocked`. Returns predecessor links.
    fn shortest_from(
        &self,
        src: NodeId,
        blocked: &HashSet<NodeId>,
        loads: &[LinkLoad],
        new: &Shape,
        filter: bool,
    ) -> Vec<Option<LinkId>> {
        let n = self.topo.nodes().len();
        let mut dist = vec![u64::MAX; n];
        let mut pred = vec![None; n];
        let mut heap = BinaryHeap::new();
        dist[src.0] = 0;
        heap.push(Reverse((0u64, src.0)));
        let lane = new.lane as usize;
        while let Some(Reverse((d, u))) = heap.pop() {
            if d > dist[u] {
                continue;
            }
            if u != src.0 && self.topo.node(NodeId(u)).kind == NodeKind::Host {
                continue;
            }
            for &l in self.topo.out_links(NodeId(u)) {
                let link = self.topo.link(l);
                let v = link.to;
                if blocked.contains(&v) {
                    continue;
                }
                let ld = &loads[l.0];
                if filter
                    && (ld.count[lane] >= link.express_queue_pkts
                        || ld.bps[lane].saturating_add(rate_bps(new.load, self.cfg.max_period_ns))
                            > self.capacity_bps(l))
                {
                    continue;
                }
                let w = tx_ns(new.load, link.bandwidth_bps)
                    + link.min_latency_ns
                    + link.max_jitter_ns
                    + self.queueing(ld, l, lane, 0);
                let nd = d.saturating_add(w);
                if nd < dist[v.0] {
                    dist[v.0] = nd;
                    pred[v.0] = Some(l);
                    heap.push(Reverse((nd, v.0)));
                }
            }
        }
        pred
    }

    fn path_to(&self, pred: &[Option<LinkId>], src: NodeId, dst: NodeId) -> Option<Vec<LinkId>> {
        let mut path = Vec::new();
        let mut v = dst;
        while v != src {
            let l = pred[v.0]?;
            path.push(l);
            v = self.topo.link(l).from;
        }
        path.reverse();
        Some(path)
    }

    /// Optimization phase: the greedy tree for `new` (its `links` and
    /// `receivers` are ignored and filled in).
    fn build_tree(&self, others: &[Shape], new: &Shape) -> Result<Vec<LinkId>, Refusal> {
        let loads = self.loads(others);
        let mut tree_nodes = vec![new.sender];
        let mut links: Vec<LinkId> = Vec::new();
        let mut attached: Vec<NodeId> = Vec::new();
        let mut remaining = new.receivers.clone();
        let mut shapes = others.to_vec();
        shapes.push(new.clone());
        let last = shapes.len() - 1;
        while !remaining.is_empty() {
            let mut best: Option<(u64, usize, usize, Vec<LinkId>)> = None;
            for filter in [true, false] {
                let blocked: HashSet<NodeId> = tree_nodes.iter().copied().collect();
                for &u in &tree_nodes {
                    if u != new.sender && self.topo.node(u).kind == NodeKind::Host {
                        continue;
                    }
                    let mut blk = blocked.clone();
                    blk.remove(&u);
                    let pred = self.shortest_from(u, &blk, &loads, new, filter);
                    for (ri, &r) in remaining.iter().enumerate() {
                        let Some(path) = self.path_to(&pred, u, r) else {
                            continue;
                        };
                        let mut cand = links.clone();
                        cand.extend_from_slice(&path);
                        let mut recv = attached.clone();
                        recv.push(r);
                        shapes[last].links = cand;
                        shapes[last].receivers = recv;
                        let obj = self.objective(&shapes);
                        let key = (obj, path.len(), ri);
                        let better = match &best {
                            None => true,
                            Some(b) => key < (b.0, b.1, b.2),
                        };
                        if better {
                            best = Some((obj, path.len(), ri, path));
                        }
                    }
                }
                if best.is_some() {
                    break;
                }
            }
            let Some((_, _, ri, path)) = best else {
                return Err(Refusal::NoPath {
                    from: self.topo.node(new.sender).name.clone(),
                    to: self.topo.node(remaining[0]).name.clone(),
                });
            };
            for &l in &path {
                tree_nodes.push(self.topo.link(l).to);
            }
            links.extend_from_slice(&path);
            attached.push(remaining.remove(ri));
        }
        Ok(links)
    }

    /// Adjustment phase + admission: evaluates `others` plus `new`, raises
    /// `new.period` as needed, and checks validity. `others_periods` are never
    /// changed.
    fn admit(
        &self,
        others: &[(TunnelId, Shape)],
        mut new: Shape,
    ) -> Result<(Shape, Eval), Refusal> {
        let mut shapes: Vec<Shape> = others.iter().map(|(_, s)| s.clone()).collect();
        let lane = new.lane as usize;
        // Queues and bandwidth, from the other tunnels' loads.
        let base = self.loads(&shapes);
        for &l in &new.links {
            let link = self.topo.link(l);
            let ld = &base[l.0];
            if ld.count[lane] + 1 > link.express_queue_pkts {
                return Err(Refusal::QueueOverflow {
                    link: self.topo.describe_link(l),
                    sublane: new.lane,
                    packets: ld.count[lane] + 1,
                    capacity: link.express_queue_pkts,
                });
            }
            let cap = self.capacity_bps(l);
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
        shapes.push(new.clone());
        let eval = self.evaluate(&shapes);
        let last = shapes.len() - 1;
        for (i, (id, s)) in others.iter().enumerate() {
            let need = eval.per[i].2;
            if s.period < need {
                return Err(Refusal::WouldInvalidate {
                    tunnel: *id,
                    period_ns: s.period,
                    required_ns: need,
                });
            }
        }
        let need = eval.per[last].2;
        if need > self.cfg.max_period_ns {
            return Err(Refusal::PeriodUnattainable {
                required_ns: need,
                max_ns: self.cfg.max_period_ns,
            });
        }
        new.period = new.period.max(need);
        // The raised period only lowers the new tunnel's rate: recompute the
        // loads so bandwidth bookkeeping uses the granted period.
        shapes[last].period = new.period;
        let eval = self.evaluate(&shapes);
        Ok((new, eval))
    }
}

/// The allocator: the topology, the set `𝒯` of tunnels, and the operations of
/// the controller API (request, release, change). Pure: no I/O, no clock.
#[derive(Debug, Clone)]
pub struct Allocator {
    topo: Topology,
    cfg: TeConfig,
    tunnels: BTreeMap<TunnelId, Tunnel>,
    next_id: u64,
}

impl Allocator {
    /// An empty allocation over `topo`.
    pub fn new(topo: Topology, cfg: TeConfig) -> Allocator {
        Allocator {
            topo,
            cfg,
            tunnels: BTreeMap::new(),
            next_id: 1,
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
        self.tunnels.values()
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

    fn model(&self) -> Model<'_> {
        Model {
            topo: &self.topo,
            cfg: &self.cfg,
        }
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

    fn others(&self, except: Option<TunnelId>) -> Vec<(TunnelId, Shape)> {
        self.tunnels
            .values()
            .filter(|t| Some(t.id) != except)
            .map(|t| (t.id, Self::shape(t)))
            .collect()
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

    /// `requestBandwidth`: allocate a new tunnel (optimization, then
    /// adjustment phase). On refusal nothing changes.
    pub fn request(&mut self, req: &Request) -> Result<Grant, Refusal> {
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
        let others = self.others(None);
        let mut new = Shape {
            sender,
            receivers,
            links: Vec::new(),
            load: req.load_bytes,
            period: req.period_ns,
            lane: req.sublane,
        };
        let model = self.model();
        let other_shapes: Vec<Shape> = others.iter().map(|(_, s)| s.clone()).collect();
        new.links = model.build_tree(&other_shapes, &new)?;
        let (new, eval) = model.admit(&others, new)?;
        let id = TunnelId(self.next_id);
        self.next_id += 1;
        let changed = self.commit(&others, &eval, id, &new, req.period_ns);
        let t = &self.tunnels[&id];
        Ok(Grant {
            tunnel: id,
            resources: t.resources(),
            period_raised: t.period_ns > t.requested_period_ns,
            changed,
        })
    }

    /// Store the evaluation: update the other tunnels' ranges, insert/replace
    /// `id`, and list the other tunnels whose resources changed.
    fn commit(
        &mut self,
        others: &[(TunnelId, Shape)],
        eval: &Eval,
        id: TunnelId,
        new: &Shape,
        requested: u64,
    ) -> Vec<Changed> {
        let mut changed = Vec::new();
        for (i, (oid, _)) in others.iter().enumerate() {
            if let Some(t) = self.tunnels.get_mut(oid) {
                let old = t.resources();
                t.range = eval.per[i].0;
                t.per_receiver = eval.per[i].1.clone();
                let now = t.resources();
                if now != old {
                    changed.push(Changed {
                        tunnel: *oid,
                        old,
                        new: now,
                    });
                }
            }
        }
        let last = others.len();
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
                range: eval.per[last].0,
                per_receiver: eval.per[last].1.clone(),
            },
        );
        changed
    }

    /// `releaseBandwidth`: remove a tunnel and re-adjust the others; returns
    /// those whose resources changed (their ranges can only shrink).
    pub fn release(&mut self, id: TunnelId) -> Result<Vec<Changed>, ReleaseError> {
        if self.tunnels.remove(&id).is_none() {
            return Err(ReleaseError::UnknownTunnel(id));
        }
        let others = self.others(None);
        let shapes: Vec<Shape> = others.iter().map(|(_, s)| s.clone()).collect();
        let eval = self.model().evaluate(&shapes);
        let mut changed = Vec::new();
        for (i, (oid, _)) in others.iter().enumerate() {
            if let Some(t) = self.tunnels.get_mut(oid) {
                let old = t.resources();
                t.range = eval.per[i].0;
                t.per_receiver = eval.per[i].1.clone();
                let now = t.resources();
                if now != old {
                    changed.push(Changed {
                        tunnel: *oid,
                        old,
                        new: now,
                    });
                }
            }
        }
        Ok(changed)
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
        let mut new = Self::shape(t);
        new.load = load_bytes;
        new.period = period_ns;
        let others = self.others(Some(id));
        let (new, eval) = self.model().admit(&others, new)?;
        let changed = self.commit(&others, &eval, id, &new, period_ns);
        let t = &self.tunnels[&id];
        Ok(Grant {
            tunnel: id,
            resources: t.resources(),
            period_raised: t.period_ns > t.requested_period_ns,
            changed,
        })
    }

    /// Check every invariant of the current allocation: stored ranges equal a
    /// fresh adjustment, `λmin(T)` ≥ the sum of link `λmin` to each receiver,
    /// each tree reaches all its receivers from its sender, no express queue
    /// can overflow, sub-lane bandwidth shares hold, and every period is ≥
    /// the requested one and meets its drain condition.
    pub fn verify(&self) -> Result<(), InvariantViolation> {
        let others = self.others(None);
        let shapes: Vec<Shape> = others.iter().map(|(_, s)| s.clone()).collect();
        let model = self.model();
        let eval = model.evaluate(&shapes);
        let bad = |m: String| Err(InvariantViolation(m));
        for (i, (id, s)) in others.iter().enumerate() {
            let t = &self.tunnels[id];
            let (range, per, need) = &eval.per[i];
            if *range != t.range || *per != t.per_receiver {
                return bad(format!("{id}: stored range is stale"));
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
        for (i, ld) in eval.loads.iter().enumerate() {
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
