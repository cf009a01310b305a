//! The path search of the optimization phase (see the parent module's
//! docs): Dijkstra over an adjacency that keeps, per out-link and
//! sub-lane, what a search reads of the link's load (its weight without
//! the request's own transmission time, free queue slots, free share), laid
//! out node after node so that a search reads memory in sequence. The
//! allocator refreshes a link's entry whenever a tunnel comes or goes on
//! it; a search computes nothing per link but one addition.

use super::model::{LinkLoad, Model, Shape};
use super::{rate_bps, tx_ns};
use crate::topology::{LinkId, NodeId, NodeKind, Topology};
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// Every node's out-links with what a search needs of them, kept up to
/// date with the link loads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Adjacency {
    /// Node `u`'s out-links are entries `at[u]..at[u + 1]`.
    at: Vec<usize>,
    /// Per entry: the link.
    link: Vec<u32>,
    /// Per entry: the link's end.
    to: Vec<u32>,
    /// Per entry: the link's rate, as an index into `rates`.
    class: Vec<u32>,
    /// The distinct link rates, bit/s.
    rates: Vec<u64>,
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
    /// Per node: a host.
    host: Vec<bool>,
}

impl Adjacency {
    /// The adjacency of `m`'s topology under `loads`.
    pub(super) fn new(m: &Model<'_>, loads: &[LinkLoad]) -> Adjacency {
        let topo = m.topo;
        let n = topo.nodes().len();
        let lanes = m.cfg.sublanes as usize;
        let links = topo.links().len();
        let mut a = Adjacency {
            at: Vec::with_capacity(n + 1),
            link: Vec::with_capacity(links),
            to: Vec::with_capacity(links),
            class: Vec::with_capacity(links),
            rates: Vec::new(),
            entry: vec![0; links],
            base: vec![vec![0; links]; lanes],
            slots: vec![vec![0; links]; lanes],
            headroom: vec![vec![0; links]; lanes],
            host: topo
                .nodes()
                .iter()
                .map(|x| x.kind == NodeKind::Host)
                .collect(),
        };
        a.at.push(0);
        for u in 0..n {
            for &l in topo.out_links(NodeId(u)) {
                let link = topo.link(l);
                let class = match a.rates.iter().position(|&r| r == link.bandwidth_bps) {
                    Some(c) => c,
                    None => {
                        a.rates.push(link.bandwidth_bps);
                        a.rates.len() - 1
                    }
                };
                a.entry[l.0] = a.link.len() as u32;
                a.link.push(l.0 as u32);
                a.to.push(link.to.0 as u32);
                a.class.push(class as u32);
            }
            a.at.push(a.link.len());
        }
        for (l, ld) in loads.iter().enumerate() {
            a.refresh(m, LinkId(l), ld);
        }
        a
    }

    /// Re-read link `l`'s load.
    pub(super) fn refresh(&mut self, m: &Model<'_>, l: LinkId, ld: &LinkLoad) {
        let link = m.topo.link(l);
        let e = self.entry[l.0] as usize;
        for k in 0..self.base.len() {
            self.base[k][e] = link
                .min_latency_ns
                .saturating_add(link.max_jitter_ns)
                .saturating_add(m.queueing(ld, l, k, 0));
            self.slots[k][e] = link.express_queue_pkts.saturating_sub(ld.count[k]);
            self.headroom[k][e] = m.capacity_bps(l).saturating_sub(ld.bps[k]);
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

    /// Shortest paths from `src` (Dijkstra), through switches only, never
    /// entering a node marked in `blocked`; stops once every node of
    /// `targets` is settled (their paths are final then). A link weighs
    /// `tx + λmin + δmax` plus its queueing bound for the request's
    /// sub-lane. With `filter`, links whose queue is full or whose share
    /// cannot take the request's least rate are left out.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn run(
        &mut self,
        adj: &Adjacency,
        src: NodeId,
        blocked: &[bool],
        targets: &[NodeId],
        new: &Shape,
        least_period_ns: u64,
        filter: bool,
    ) {
        self.reset(targets);
        let lane = new.lane as usize;
        let least_rate = rate_bps(new.load, least_period_ns);
        let (base, slots, headroom) = (&adj.base[lane], &adj.slots[lane], &adj.headroom[lane]);
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
            }
            if u != src.0 && adj.host[u] {
                continue;
            }
            for e in adj.at[u]..adj.at[u + 1] {
                let v = adj.to[e] as usize;
                // A host is a leaf: only the receivers sought are worth a
                // heap entry (on a fat-tree most links lead to hosts).
                if blocked[v] || (adj.host[v] && !self.target[v]) {
                    continue;
                }
                if filter && (slots[e] == 0 || headroom[e] < least_rate) {
                    continue;
                }
                let w = base[e].saturating_add(self.tx[adj.class[e] as usize]);
                let nd = d.saturating_add(w);
                if nd < self.dist[v] {
                    if self.dist[v] == u64::MAX {
                        self.touched.push(v);
                    }
                    self.dist[v] = nd;
                    self.pred[v] = Some(LinkId(adj.link[e] as usize));
                    self.heap.push(Reverse((nd, v)));
                }
            }
        }
    }

    /// The links of the path the last search found from `src` to `dst`,
    /// if any.
    pub(super) fn path_to(&self, topo: &Topology, src: NodeId, dst: NodeId) -> Option<Vec<LinkId>> {
        let mut path = Vec::new();
        let mut v = dst;
        while v != src {
            let l = self.pred[v.0]?;
            path.push(l);
            v = topo.link(l).from;
        }
        path.reverse();
        Some(path)
    }
}
