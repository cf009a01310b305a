//! The path search of the optimization phase (see the parent module's
//! docs): Dijkstra, forwards or backwards, over an adjacency that keeps,
//! per link and sub-lane, what a search reads of the link's load (its weight without
//! the request's own transmission time, free queue slots, free share), laid
//! out node after node so that a search reads memory in sequence. The
//! allocator refreshes a link's entry whenever a tunnel comes or goes on
//! it; a search computes nothing per link but one addition.

use super::model::{LinkLoad, Model, Shape};
use super::{rate_bps, tx_ns};
use crate::topology::{LinkId, NodeId, NodeKind, Topology};
use std::cmp::Reverse;
use std::collections::BinaryHeap;

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
    /// Per entry: the node at the link's other end.
    other: Vec<u32>,
    /// Per entry: the link's rate, as an index into the rates.
    class: Vec<u32>,
    /// Per link: its entry.
    entry: Vec<u32>,
    /// Per sub-lane and entry: `λmin + δmax` plus the queueing bound of a
    /// packet of the sub-lane (the weight but for the packet's own
    /// transmission time).
    base: Vec<Vec<u64>>,
    /// Per sub-lane and entry: free express queue slots.
    slots: Vec<Vec<u32>>,
    /// Per sub-lane and entry: the sub-lane's share not yet used, bit/s.
    headroom: Vec<Vec<u64>>,
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
            other: Vec::with_capacity(links),
            class: Vec::with_capacity(links),
            entry: vec![0; links],
            base: vec![vec![0; links]; lanes],
            slots: vec![vec![0; links]; lanes],
            headroom: vec![vec![0; links]; lanes],
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
                c.other
                    .push(if forward { link.to.0 } else { link.from.0 } as u32);
                c.class.push(class as u32);
            }
            c.at.push(c.link.len());
        }
        c
    }

    /// Store link `l`'s (base, slots, headroom) of sub-lane `k`.
    fn set(&mut self, l: LinkId, k: usize, (base, slots, headroom): (u64, u32, u64)) {
        let e = self.entry[l.0] as usize;
        self.base[k][e] = base;
        self.slots[k][e] = slots;
        self.headroom[k][e] = headroom;
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
}

impl Adjacency {
    /// The adjacency of `m`'s topology under `loads`.
    pub(super) fn new(m: &Model<'_>, loads: &[LinkLoad]) -> Adjacency {
        let lanes = m.cfg.sublanes as usize;
        let mut rates = Vec::new();
        let fwd = Csr::new(m.topo, lanes, true, &mut rates);
        let back = Csr::new(m.topo, lanes, false, &mut rates);
        let mut a = Adjacency {
            fwd,
            back,
            rates,
            host: m
                .topo
                .nodes()
                .iter()
                .map(|x| x.kind == NodeKind::Host)
                .collect(),
        };
        for (l, ld) in loads.iter().enumerate() {
            a.refresh(m, LinkId(l), ld);
        }
        a
    }

    /// Re-read link `l`'s load.
    pub(super) fn refresh(&mut self, m: &Model<'_>, l: LinkId, ld: &LinkLoad) {
        let link = m.topo.link(l);
        for k in 0..self.fwd.base.len() {
            let v = (
                link.min_latency_ns
                    .saturating_add(link.max_jitter_ns)
                    .saturating_add(m.queueing(ld, l, k, 0)),
                link.express_queue_pkts.saturating_sub(ld.count[k]),
                m.capacity_bps(l).saturating_sub(ld.bps[k]),
            );
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

/// Scratch space of the path searches, sized once and kept from request
/// to request.
#[derive(Debug, Clone, Default)]
pub(super) struct Search {
    dist: Vec<u64>,
    pred: Vec<Option<LinkId>>,
    /// Nodes whose `dist`/`pred` the last search set.
    touched: Vec<usize>,
    heap: BinaryHeap<Reverse<(u64, usize)>>,
    target: Vec<bool>,
    /// The nodes marked in `target`.
    marked: Vec<usize>,
    /// The request's transmission time per rate class.
    tx: Vec<u64>,
}

impl Search {
    /// Ready for a request `new` over `adj`.
    pub(super) fn begin(&mut self, adj: &Adjacency, new: &Shape) {
        let n = adj.host.len();
        if self.dist.len() != n {
            *self = Search {
                dist: vec![u64::MAX; n],
                pred: vec![None; n],
                target: vec![false; n],
                ..Search::default()
            };
        }
        self.tx.clear();
        self.tx
            .extend(adj.rates.iter().map(|&bps| tx_ns(new.load, bps)));
    }

    /// Forget the last search; mark `targets`.
    fn reset(&mut self, targets: &[NodeId]) {
        for &u in &self.touched {
            self.dist[u] = u64::MAX;
            self.pred[u] = None;
        }
        self.touched.clear();
        self.heap.clear();
        for &u in &self.marked {
            self.target[u] = false;
        }
        self.marked.clear();
        for t in targets {
            self.target[t.0] = true;
            self.marked.push(t.0);
        }
    }

    /// Shortest paths (Dijkstra) from `src` along links (`Forward`) or
    /// to `src` against them (`Backward`), through switches only and
    /// never through a node marked in `blocked`; a node of `targets` ends
    /// a path (even if marked) and the search stops once all are settled
    /// (their paths are final then). A link weighs `tx + λmin + δmax` plus
    /// its queueing bound for the request's sub-lane. With `filter`, links
    /// whose queue is full or whose share cannot take the request's least
    /// rate (`σ` every `least_period_ns`) are left out.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn run(
        &mut self,
        adj: &Adjacency,
        dir: Dir,
        src: NodeId,
        blocked: &[bool],
        targets: &[NodeId],
        new: &Shape,
        least_period_ns: u64,
        filter: bool,
    ) {
        self.reset(targets);
        let g = match dir {
            Dir::Forward => &adj.fwd,
            Dir::Backward => &adj.back,
        };
        let lane = new.lane as usize;
        let least_rate = rate_bps(new.load, least_period_ns);
        let (base, slots, headroom) = (&g.base[lane], &g.slots[lane], &g.headroom[lane]);
        self.dist[src.0] = 0;
        self.touched.push(src.0);
        self.heap.push(Reverse((0u64, src.0)));
        let mut left = targets.len();
        while let Some(Reverse((d, u))) = self.heap.pop() {
            if d > self.dist[u] {
                continue;
            }
            if self.target[u] {
                left -= 1;
                if left == 0 {
                    break;
                }
                continue;
            }
            for e in g.at[u]..g.at[u + 1] {
                let v = g.other[e] as usize;
                // A host is a leaf: only the ends sought are worth a heap
                // entry (on a fat-tree most links lead to hosts).
                if !self.target[v] && (blocked[v] || adj.host[v]) {
                    continue;
                }
                if filter && (slots[e] == 0 || headroom[e] < least_rate) {
                    continue;
                }
                let w = base[e].saturating_add(self.tx[g.class[e] as usize]);
                let nd = d.saturating_add(w);
                if nd < self.dist[v] {
                    if self.dist[v] == u64::MAX {
                        self.touched.push(v);
                    }
                    self.dist[v] = nd;
                    self.pred[v] = Some(LinkId(g.link[e] as usize));
                    self.heap.push(Reverse((nd, v)));
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
