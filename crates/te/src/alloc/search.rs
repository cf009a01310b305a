//! The path search of the optimization phase (see the parent module's
//! docs): Dijkstra, forwards or backwards, over an adjacency that keeps,
//! per link and sub-lane, what a search reads of the link's load (its weight without
//! the request's own transmission time, and its free share if its queue has
//! a free slot), laid
//! out node after node so that a search reads memory in sequence. The
//! allocator refreshes a link's entry whenever a tunnel comes or goes on
//! it; a search computes nothing per link but one addition.
//!
//! The search is goal-directed (A*): a node's heap key is its distance
//! plus a lower bound on what is left to the nearest node sought, the
//! fewest switch-to-switch links from there (kept for every pair of
//! switches) times the least weight a link can have for the request (its
//! transmission time, fixed latency and jitter and the non-preemption
//! term, least over the links of each rate). The bound never
//! overestimates and drops by at most one link's weight per link, so
//! every node settled has its shortest distance, as in plain Dijkstra; a
//! search only settles fewer nodes (on a fat-tree, the pods on the way
//! rather than all of them). Between paths of exactly equal weight it may
//! choose another than plain Dijkstra would.
//!
//! Because the bound drops by at most a link's weight, the keys taken out
//! of the queue never decrease, and the queue is a radix heap
//! ([`super::radix`]): a push is an append, rather than a binary heap's
//! sifting on every push and pop (on fat-tree:32 a search pushes about
//! 1 200 entries to settle 300 nodes).

use super::model::{LinkLoad, Model, Shape};
use super::radix::RadixHeap;
use super::{rate_bps, tx_ns};
use crate::topology::{LinkId, NodeId, NodeKind, Topology};
use std::collections::VecDeque;
use std::sync::Arc;

/// The most switches for which [`Hops`] keeps every pair (twice 16 MiB);
/// a larger fabric is searched without a bound (plain Dijkstra).
const MAX_BOUNDED_SWITCHES: usize = 4096;

/// A `Hops` entry for "no path through switches".
const FAR: u8 = u8::MAX;

/// The most links a `Hops` entry counts (farther switches count as this
/// far): an anchor's offset of one link still stays below [`FAR`].
const MOST_HOPS: u8 = FAR - 2;

/// The fewest switch-to-switch links between every pair of switches, the
/// lower bound of a goal-directed search.
#[derive(Debug, PartialEq, Eq)]
struct Hops {
    /// Per node: its index among the switches, or `u32::MAX` for a host.
    ord: Vec<u32>,
    /// The switches.
    n: usize,
    /// `n × n`: from switch `a` to switch `b` at `a * n + b` (at most
    /// [`MOST_HOPS`]: a bound may only be lower; [`FAR`] if there is no
    /// path).
    hops: Vec<u8>,
    /// `hops` transposed: to switch `b` from switch `a` at `b * n + a`.
    to: Vec<u8>,
}

impl Hops {
    /// Breadth-first from every switch over `fwd`'s switch-to-switch
    /// links; `None` for a fabric of more than [`MAX_BOUNDED_SWITCHES`].
    fn new(fwd: &Csr, host: &[bool]) -> Option<Hops> {
        let mut ord = vec![u32::MAX; host.len()];
        let mut n = 0usize;
        for (u, &h) in host.iter().enumerate() {
            if !h {
                ord[u] = n as u32;
                n += 1;
            }
        }
        if n > MAX_BOUNDED_SWITCHES {
            return None;
        }
        // The switch graph alone, by switch index.
        let mut at = Vec::with_capacity(n + 1);
        let mut next = Vec::new();
        at.push(0);
        for (u, &h) in host.iter().enumerate() {
            if h {
                continue;
            }
            for e in fwd.at[u]..fwd.at[u + 1] {
                let v = fwd.other(e);
                if !host[v] {
                    next.push(ord[v]);
                }
            }
            at.push(next.len());
        }
        let mut hops = vec![FAR; n * n];
        let mut queue = VecDeque::new();
        for a in 0..n {
            let row = &mut hops[a * n..(a + 1) * n];
            row[a] = 0;
            queue.push_back(a);
            while let Some(u) = queue.pop_front() {
                let d = row[u];
                for &v in &next[at[u]..at[u + 1]] {
                    if row[v as usize] == FAR {
                        row[v as usize] = (d + 1).min(MOST_HOPS);
                        queue.push_back(v as usize);
                    }
                }
            }
        }
        let mut to = vec![FAR; n * n];
        for a in 0..n {
            for b in 0..n {
                to[b * n + a] = hops[a * n + b];
            }
        }
        Some(Hops { ord, n, hops, to })
    }

    /// Per switch, the fewest links to (`Forward`) or from (`Backward`)
    /// the nearest of `anchors`, into `near` ([`FAR`]: none). Row by row,
    /// once per search, rather than per node reached.
    fn nearest(&self, dir: Dir, anchors: &[Anchor], near: &mut Vec<u8>) {
        near.clear();
        near.resize(self.n, FAR);
        let rows = match dir {
            Dir::Forward => &self.to,
            Dir::Backward => &self.hops,
        };
        for a in anchors {
            let row = &rows[a.ord as usize * self.n..(a.ord as usize + 1) * self.n];
            // Past the sought switch by `off` (at most one) links: at
            // most MOST_HOPS + 1 < FAR, and FAR stays FAR. No branch, so
            // that the loop runs a vector of switches at a time.
            for (x, &h) in near.iter_mut().zip(row) {
                *x = (*x).min(h.saturating_add(a.off));
            }
        }
    }
}

/// Which way a search runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Dir {
    /// From a tree node along links: paths to the receivers.
    Forward,
    /// From a receiver against links: paths from the tree's nodes.
    Backward,
}

/// One direction's links, node after node, with what a search reads of
/// them.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Csr {
    /// Node `u`'s links are entries `at[u]..at[u + 1]`.
    at: Vec<usize>,
    /// Per entry: the link.
    link: Vec<u32>,
    /// Per link: its entry.
    entry: Vec<u32>,
    /// Per sub-lane and entry: everything the search reads of it, in one
    /// place.
    cost: Vec<Vec<Entry>>,
}

/// What a search reads of a link, for one sub-lane.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Entry {
    /// `λmin + δmax` plus the queueing bound of a packet of the sub-lane
    /// (the weight but for the packet's own transmission time).
    base: u64,
    /// The sub-lane's share not yet used, bit/s (0 if its express queue
    /// has no free slot).
    headroom: u64,
    /// The node at the link's other end.
    other: u32,
    /// The link's rate, as an index into the rates.
    class: u32,
}

/// A node sought, for the bound: a switch, `off` links from it.
#[derive(Debug, Clone, Copy)]
struct Anchor {
    ord: u32,
    off: u8,
}

impl Csr {
    /// Node by node, each node's out-links (`forward`) or in-links.
    fn new(topo: &Topology, lanes: usize, forward: bool, rates: &mut Vec<u64>) -> Csr {
        let n = topo.nodes().len();
        let links = topo.links().len();
        let mut by_node: Vec<Vec<LinkId>> = vec![Vec::new(); n];
        for (i, link) in topo.links().iter().enumerate() {
            let u = if forward { link.from } else { link.to };
            by_node[u.0].push(LinkId(i));
        }
        let mut c = Csr {
            at: Vec::with_capacity(n + 1),
            link: Vec::with_capacity(links),
            entry: vec![0; links],
            cost: vec![Vec::with_capacity(links); lanes],
        };
        c.at.push(0);
        for ls in &by_node {
            for &l in ls {
                let link = topo.link(l);
                let class = match rates.iter().position(|&r| r == link.bandwidth_bps) {
                    Some(k) => k,
                    None => {
                        rates.push(link.bandwidth_bps);
                        rates.len() - 1
                    }
                };
                c.entry[l.0] = c.link.len() as u32;
                c.link.push(l.0 as u32);
                let other = if forward { link.to.0 } else { link.from.0 } as u32;
                for lane in &mut c.cost {
                    lane.push(Entry {
                        other,
                        class: class as u32,
                        ..Entry::default()
                    });
                }
            }
            c.at.push(c.link.len());
        }
        c
    }

    /// Store link `l`'s (base, headroom) of sub-lane `k`.
    fn set(&mut self, l: LinkId, k: usize, (base, headroom): (u64, u64)) {
        let e = &mut self.cost[k][self.entry[l.0] as usize];
        e.base = base;
        e.headroom = headroom;
    }

    /// The node at the other end of entry `e`'s link.
    fn other(&self, e: usize) -> usize {
        self.cost[0][e].other as usize
    }
}

/// Every node's out-links and in-links with what a search needs of
/// them, kept up to date with the link loads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Adjacency {
    fwd: Csr,
    back: Csr,
    /// The distinct link rates, bit/s.
    rates: Vec<u64>,
    /// Per node: a host.
    host: Vec<bool>,
    /// Per rate class: the least `λmin + δmax + NP` of its links (their
    /// [`Model::hop_base`] with no load: all of a link's weight but
    /// queueing and transmission).
    fixed_min: Vec<u64>,
    /// The fewest links between switches (shared by clones: it depends
    /// on the topology only).
    hops: Option<Arc<Hops>>,
}

impl Adjacency {
    /// The adjacency of `m`'s topology under `loads`.
    pub(super) fn new(m: &Model<'_>, loads: &[LinkLoad]) -> Adjacency {
        let lanes = m.cfg.sublanes as usize;
        let mut rates = Vec::new();
        let fwd = Csr::new(m.topo, lanes, true, &mut rates);
        let back = Csr::new(m.topo, lanes, false, &mut rates);
        let host: Vec<bool> = m
            .topo
            .nodes()
            .iter()
            .map(|x| x.kind == NodeKind::Host)
            .collect();
        // Every link is one forward entry, classed by its rate.
        let mut fixed_min = vec![u64::MAX; rates.len()];
        for (&l, e) in fwd.link.iter().zip(&fwd.cost[0]) {
            let c = e.class as usize;
            let least = m.hop_base(&LinkLoad::default(), LinkId(l as usize), 0);
            fixed_min[c] = fixed_min[c].min(least);
        }
        let hops = Hops::new(&fwd, &host).map(Arc::new);
        let mut a = Adjacency {
            fwd,
            back,
            rates,
            host,
            fixed_min,
            hops,
        };
        for (l, ld) in loads.iter().enumerate() {
            a.refresh(m, LinkId(l), ld);
        }
        a
    }

    /// Re-read link `l`'s load.
    pub(super) fn refresh(&mut self, m: &Model<'_>, l: LinkId, ld: &LinkLoad) {
        let link = m.topo.link(l);
        for k in 0..self.fwd.cost.len() {
            let headroom = if ld.count[k] >= link.express_queue_pkts {
                0
            } else {
                m.capacity_bps(l).saturating_sub(ld.bps[k])
            };
            let v = (m.hop_base(ld, l, k), headroom);
            self.fwd.set(l, k, v);
            self.back.set(l, k, v);
        }
    }

    /// Re-read the loads of `links`.
    pub(super) fn refresh_all(&mut self, m: &Model<'_>, links: &[LinkId], loads: &[LinkLoad]) {
        for &l in links {
            self.refresh(m, l, &loads[l.0]);
        }
    }
}

/// A node's distance between searches: 0 for a host (entered only as
/// a node sought), none yet for a switch.
fn rest(host: bool) -> u64 {
    if host {
        0
    } else {
        u64::MAX
    }
}

/// Scratch space of the path searches, sized once and kept from request
/// to request.
#[derive(Debug, Clone, Default)]
pub(super) struct Search {
    dist: Vec<u64>,
    pred: Vec<Option<LinkId>>,
    /// Nodes whose `dist`/`pred` the last search set.
    touched: Vec<usize>,
    heap: RadixHeap,
    target: Vec<bool>,
    /// The nodes marked in `target`.
    marked: Vec<usize>,
    /// The request's transmission time per rate class.
    tx: Vec<u64>,
    /// Per node touched by the last search: its bound.
    bound: Vec<u64>,
    /// The least weight a link can have for the request.
    least_weight: u64,
    /// The nodes sought by the search under way, for the bound.
    anchors: Vec<Anchor>,
    /// Per switch, the fewest links to or from the nearest of `anchors`.
    near: Vec<u8>,
    /// The nodes blocked or sought by the last search, whose `dist` it
    /// set apart from its distances.
    held: Vec<usize>,
    /// Search without a bound (plain Dijkstra), for tests.
    plain: bool,
}

impl Search {
    /// A search without a bound (plain Dijkstra), for tests.
    #[cfg(test)]
    pub(super) fn plain() -> Search {
        Search {
            plain: true,
            ..Search::default()
        }
    }

    /// Ready for a request `new` over `adj`.
    pub(super) fn begin(&mut self, adj: &Adjacency, new: &Shape) {
        let n = adj.host.len();
        if self.dist.len() != n {
            *self = Search {
                dist: adj.host.iter().map(|&h| rest(h)).collect(),
                pred: vec![None; n],
                target: vec![false; n],
                bound: vec![0; n],
                plain: self.plain,
                ..Search::default()
            };
        }
        self.tx.clear();
        self.tx
            .extend(adj.rates.iter().map(|&bps| tx_ns(new.load, bps)));
        self.least_weight = self
            .tx
            .iter()
            .zip(&adj.fixed_min)
            .map(|(&tx, &fixed)| tx.saturating_add(fixed))
            .min()
            .unwrap_or(0);
    }

    /// The nodes sought (`targets`) as switches for the bound of a
    /// search in direction `dir`: a switch itself, a host by the switches
    /// one link before it (`Forward`) or after it (`Backward`).
    fn anchor(&mut self, adj: &Adjacency, hops: &Hops, dir: Dir, targets: &[NodeId]) {
        self.anchors.clear();
        // A host sought is entered from (forward) or left to (backward)
        // its neighbours: its in-links, or its out-links.
        let g = match dir {
            Dir::Forward => &adj.back,
            Dir::Backward => &adj.fwd,
        };
        for t in targets {
            let o = hops.ord[t.0];
            if o != u32::MAX {
                self.anchors.push(Anchor { ord: o, off: 0 });
                continue;
            }
            for e in g.at[t.0]..g.at[t.0 + 1] {
                let o = hops.ord[g.other(e)];
                if o != u32::MAX {
                    self.anchors.push(Anchor { ord: o, off: 1 });
                }
            }
        }
    }

    /// The bound at switch `v` of the search under way: the least
    /// weight from `v` to the nearest node sought (`Forward`) or from it
    /// to `v` (`Backward`); `None` if none can be reached.
    fn bound_at(&self, hops: &Hops, v: usize) -> Option<u64> {
        let h = self.near[hops.ord[v] as usize];
        (h != FAR).then(|| self.least_weight.saturating_mul(h as u64))
    }

    /// Forget the last search; mark `targets`.
    fn reset(&mut self, adj: &Adjacency, blocked: &[NodeId], targets: &[NodeId]) {
        for &u in self.touched.iter().chain(&self.held) {
            self.dist[u] = rest(adj.host[u]);
            self.pred[u] = None;
        }
        self.touched.clear();
        self.held.clear();
        self.heap.clear();
        for &u in &self.marked {
            self.target[u] = false;
        }
        self.marked.clear();
        // Blocked: never improved on. Sought: open, even if blocked or a
        // host.
        for b in blocked {
            self.dist[b.0] = 0;
            self.held.push(b.0);
        }
        for t in targets {
            self.target[t.0] = true;
            self.marked.push(t.0);
            self.dist[t.0] = u64::MAX;
            self.held.push(t.0);
        }
    }

    /// Shortest paths (Dijkstra) from `src` along links (`Forward`) or
    /// to `src` against them (`Backward`), through switches only and
    /// never through a node of `blocked`; a node of `targets` ends
    /// a path (even if blocked) and the search stops once all are settled
    /// (their paths are final then). A link weighs `tx + λmin + δmax` plus
    /// its queueing bound for the request's sub-lane. Nodes are taken in
    /// order of distance plus bound (see the module docs). With `filter`, links
    /// whose queue is full or whose share cannot take the request's least
    /// rate (`σ` every `least_period_ns`) are left out.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn run(
        &mut self,
        adj: &Adjacency,
        dir: Dir,
        src: NodeId,
        blocked: &[NodeId],
        targets: &[NodeId],
        new: &Shape,
        least_period_ns: u64,
        filter: bool,
    ) {
        // A node that may not be entered (blocked, or a host not sought:
        // a host is a leaf, and on a fat-tree most links lead to hosts)
        // has distance 0, which no link improves on: the look-up of the
        // distance is the only one per link.
        self.reset(adj, blocked, targets);
        let g = match dir {
            Dir::Forward => &adj.fwd,
            Dir::Backward => &adj.back,
        };
        let lane = new.lane as usize;
        // At least 1: a full queue (no headroom) is always left out.
        let least_rate = rate_bps(new.load, least_period_ns).max(1);
        let cost = &g.cost[lane];
        let hops = match &adj.hops {
            Some(h) if !self.plain && self.least_weight > 0 => {
                self.anchor(adj, h, dir, targets);
                h.nearest(dir, &self.anchors, &mut self.near);
                Some(&**h)
            }
            _ => None,
        };
        self.dist[src.0] = 0;
        self.bound[src.0] = 0;
        self.touched.push(src.0);
        self.heap.push(0, src.0 as u32);
        let mut left = targets.len();
        while let Some((key, u)) = self.heap.pop() {
            let u = u as usize;
            let d = self.dist[u];
            if key > d.saturating_add(self.bound[u]) {
                continue;
            }
            if self.target[u] {
                left -= 1;
                if left == 0 {
                    break;
                }
                continue;
            }
            let first = g.at[u];
            for (i, c) in cost[first..g.at[u + 1]].iter().enumerate() {
                let v = c.other as usize;
                if filter && c.headroom < least_rate {
                    continue;
                }
                let e = first + i;
                let w = c.base.saturating_add(self.tx[c.class as usize]);
                let nd = d.saturating_add(w);
                if nd < self.dist[v] {
                    if self.dist[v] == u64::MAX {
                        // First reached: its bound, once per search (0
                        // for a node sought; a switch that reaches none
                        // is never taken).
                        self.bound[v] = match hops {
                            Some(h) if !self.target[v] => match self.bound_at(h, v) {
                                Some(b) => b,
                                None => continue,
                            },
                            _ => 0,
                        };
                        self.touched.push(v);
                    }
                    self.dist[v] = nd;
                    self.pred[v] = Some(LinkId(g.link[e] as usize));
                    self.heap.push(nd.saturating_add(self.bound[v]), v as u32);
                }
            }
        }
    }

    /// The links of the path a backward search from `dst` found from
    /// `src`, into `path`; false (and `path` undefined) if there is none.
    pub(super) fn path_from(
        &self,
        topo: &Topology,
        src: NodeId,
        dst: NodeId,
        path: &mut Vec<LinkId>,
    ) -> bool {
        path.clear();
        let mut v = src;
        while v != dst {
            let Some(l) = self.pred[v.0] else {
                return false;
            };
            path.push(l);
            v = topo.link(l).to;
        }
        true
    }

    /// The links of the path a forward search from `src` found to `dst`,
    /// into `path`; false (and `path` undefined) if there is none.
    pub(super) fn path_to(
        &self,
        topo: &Topology,
        src: NodeId,
        dst: NodeId,
        path: &mut Vec<LinkId>,
    ) -> bool {
        path.clear();
        let mut v = dst;
        while v != src {
            let Some(l) = self.pred[v.0] else {
                return false;
            };
            path.push(l);
            v = topo.link(l).from;
        }
        path.reverse();
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::alloc::{Allocator, Request, TeConfig};

    /// `base` with each link's rate, λmin and jitter drawn from `seed`,
    /// from few values, so that many links weigh the least a link can
    /// (where a bound that overestimates would show).
    fn reweighted(base: &Topology, seed: u64) -> Topology {
        crate::alloc::testing::reweighted(base, seed, |next| {
            let rate = [1_000_000_000, 10_000_000_000][(next() % 2) as usize];
            let latency = [1_000, 1_000, 1_200, 3_000][(next() % 4) as usize];
            (rate, latency, [0, 0, 300][(next() % 3) as usize])
        })
    }

    /// On seeded fabrics under seeded loads, a goal-directed search finds
    /// every node sought at the distance plain Dijkstra finds, with a
    /// path of that weight, whatever the direction, the start, the nodes
    /// sought and the nodes blocked.
    #[test]
    fn bounded_search_finds_the_plain_distances() {
        let fabrics = [
            crate::gen::fat_tree(4).unwrap(),
            crate::gen::fat_tree(6).unwrap(),
            crate::gen::leaf_spine(4, 3, 3).unwrap(),
        ];
        for seed in 1..=30u64 {
            let topo = reweighted(&fabrics[seed as usize % fabrics.len()], seed);
            let hosts: Vec<String> = topo.hosts().map(|h| topo.node(h).name.clone()).collect();
            let nodes = topo.nodes().len();
            let mut a = Allocator::new(topo, TeConfig::default());
            let mut rnd = crate::alloc::testing::below(seed);
            let request = |rnd: &mut dyn FnMut(usize) -> usize| Request {
                sender: hosts[rnd(hosts.len())].clone(),
                receivers: vec![hosts[rnd(hosts.len())].clone()],
                load_bytes: 100 + rnd(1400) as u32,
                period_ns: 1_000_000 * (1 + rnd(4) as u64),
                sublane: rnd(2) as u8,
            };
            // Loads, so that queueing adds to some links' weights.
            for _ in 0..40 {
                let r = request(&mut rnd);
                let _ = a.request(&r);
            }
            for q in 0..40 {
                let mut r = request(&mut rnd);
                while r.receivers[0] == r.sender {
                    r = request(&mut rnd);
                }
                let shape = a.shape_of(&r).expect("valid request");
                let src = NodeId(rnd(nodes));
                let mut targets = Vec::new();
                for _ in 0..1 + rnd(5) {
                    let t = NodeId(rnd(nodes));
                    if t != src && !targets.contains(&t) {
                        targets.push(t);
                    }
                }
                let mut blocked = Vec::new();
                for _ in 0..rnd(4) {
                    blocked.push(NodeId(rnd(nodes)));
                }
                // The start may be listed too: it is left from, never
                // entered.
                if rnd(2) == 0 {
                    blocked.push(src);
                }
                let dir = if rnd(2) == 0 {
                    Dir::Forward
                } else {
                    Dir::Backward
                };
                let filter = rnd(2) == 0;
                let mut dist = Vec::new();
                for plain in [true, false] {
                    let mut s = if plain {
                        Search::plain()
                    } else {
                        Search::default()
                    };
                    s.begin(&a.adj, &shape);
                    s.run(
                        &a.adj, dir, src, &blocked, &targets, &shape, 1_000_000, filter,
                    );
                    let got: Vec<(u64, Option<u64>)> = targets
                        .iter()
                        .map(|&t| {
                            let mut path = Vec::new();
                            let found = match dir {
                                Dir::Forward => s.path_to(&a.topo, src, t, &mut path),
                                Dir::Backward => s.path_from(&a.topo, t, src, &mut path),
                            };
                            let weight = found.then(|| {
                                path.iter()
                                    .map(|&l| {
                                        let g = &a.adj.fwd;
                                        let e = g.entry[l.0] as usize;
                                        let c = g.cost[shape.lane as usize][e];
                                        c.base + s.tx[c.class as usize]
                                    })
                                    .sum()
                            });
                            (s.dist[t.0], weight)
                        })
                        .collect();
                    for (d, w) in &got {
                        if let Some(w) = w {
                            assert_eq!(d, w, "seed {seed} query {q}: a path weighs its distance");
                        }
                    }
                    dist.push(got);
                }
                assert_eq!(
                    dist[0],
                    dist[1],
                    "seed {seed} query {q}: {dir:?} from {src:?} to {targets:?}, blocked {blocked:?}"
                );
            }
        }
    }
}
