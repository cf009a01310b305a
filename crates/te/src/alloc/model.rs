//! The delay model of the adjustment phase (see the parent module's
//! docs), over per-link loads that the allocator keeps up to date as
//! tunnels come and go.

use super::{rate_bps, tx_ns, LatencyRange, TeConfig, MAX_SUBLANES};
use crate::topology::{LinkId, NodeId, Topology};
use std::collections::{HashMap, HashSet};

/// What the model needs of a tunnel.
#[derive(Debug, Clone)]
pub(super) struct Shape {
    pub(super) sender: NodeId,
    pub(super) receivers: Vec<NodeId>,
    pub(super) links: Vec<LinkId>,
    pub(super) load: u32,
    pub(super) period: u64,
    pub(super) lane: u8,
}

impl Shape {
    pub(super) fn as_ref(&self) -> ShapeRef<'_> {
        ShapeRef {
            sender: self.sender,
            receivers: &self.receivers,
            links: &self.links,
            load: self.load,
            lane: self.lane,
        }
    }
}

/// A tree as the delay model walks it (a tunnel's ranges do not depend
/// on its period).
#[derive(Debug, Clone, Copy)]
pub(super) struct ShapeRef<'a> {
    pub(super) sender: NodeId,
    pub(super) receivers: &'a [NodeId],
    pub(super) links: &'a [LinkId],
    pub(super) load: u32,
    pub(super) lane: u8,
}

/// The express load of one link, per sub-lane: tunnels, the sum of their
/// transmission times, the sum of their rates. Kept inline (sub-lanes the
/// configuration does not have stay empty): a walk reads the loads of
/// every link of every tunnel it re-walks, one place in memory each.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct LinkLoad {
    pub(super) count: [u32; MAX_SUBLANES],
    pub(super) tx_sum: [u64; MAX_SUBLANES],
    pub(super) bps: [u64; MAX_SUBLANES],
}

/// One tree's walk: (tunnel range, per-receiver ranges, drain-condition
/// period).
pub(super) type Walk = (LatencyRange, Vec<(NodeId, LatencyRange)>, u64);

/// Where a stored tree's walk finds what it needs without searching
/// ([`Model::walk_indexed`]): per link, in the order attached, the link
/// that reaches its start ([`TreeIndex::SENDER`] for one leaving the
/// sender); per receiver, the link that reaches it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct TreeIndex {
    up: Vec<u32>,
    entering: Vec<u32>,
}

impl TreeIndex {
    /// No link: the sender (or, for a receiver, not reached).
    const SENDER: u32 = u32::MAX;

    /// The index of tree `s`, its links in the order attached (each
    /// leaves the sender or a node an earlier one reached).
    pub(super) fn new(topo: &Topology, s: ShapeRef<'_>) -> TreeIndex {
        let reaching = |upto: usize, node: NodeId| {
            s.links[..upto]
                .iter()
                .rposition(|&k| topo.link(k).to == node)
                .map_or(Self::SENDER, |j| j as u32)
        };
        let up = s
            .links
            .iter()
            .enumerate()
            .map(|(j, &l)| {
                let from = topo.link(l).from;
                if from == s.sender {
                    Self::SENDER
                } else {
                    reaching(j, from)
                }
            })
            .collect();
        let entering = s
            .receivers
            .iter()
            .map(|&r| reaching(s.links.len(), r))
            .collect();
        TreeIndex { up, entering }
    }

    /// The links of receiver `i`'s path (their indexes in the tree), from
    /// the receiver up to the sender.
    pub(super) fn path_up(&self, i: usize) -> impl Iterator<Item = usize> + '_ {
        let first = self.entering[i];
        std::iter::successors((first != Self::SENDER).then_some(first), |&j| {
            let up = self.up[j as usize];
            (up != Self::SENDER).then_some(up)
        })
        .map(|j| j as usize)
    }
}

/// What the model needs of a link, in one cache line: its rate, fixed
/// latency and jitter, and what it computes once: the non-preemption term
/// and each sub-lane's bandwidth share. (A walk reads this and the link's
/// load per hop, and nothing else of the link.)
#[derive(Debug, Clone, Copy)]
#[repr(align(64))]
pub(super) struct LinkConst {
    np_ns: u64,
    capacity_bps: u64,
    bandwidth_bps: u64,
    min_latency_ns: u64,
    max_jitter_ns: u64,
    min_includes_tx: bool,
}

impl LinkConst {
    /// Every link's constants under `cfg`.
    pub(super) fn all(topo: &Topology, cfg: &TeConfig) -> Vec<LinkConst> {
        topo.links()
            .iter()
            .map(|link| LinkConst {
                np_ns: if cfg.non_preemption {
                    tx_ns(cfg.mtu_bytes, link.bandwidth_bps)
                } else {
                    0
                },
                capacity_bps: u64::try_from(
                    link.bandwidth_bps as u128 * cfg.express_share_permille as u128 / 1000,
                )
                .unwrap_or(u64::MAX),
                bandwidth_bps: link.bandwidth_bps,
                min_latency_ns: link.min_latency_ns,
                max_jitter_ns: link.max_jitter_ns,
                min_includes_tx: link.min_includes_tx,
            })
            .collect()
    }
}

pub(super) struct Model<'a> {
    pub(super) topo: &'a Topology,
    pub(super) cfg: &'a TeConfig,
    pub(super) consts: &'a [LinkConst],
}

impl Model<'_> {
    fn np(&self, l: LinkId) -> u64 {
        self.consts[l.0].np_ns
    }

    pub(super) fn capacity_bps(&self, l: LinkId) -> u64 {
        self.consts[l.0].capacity_bps
    }

    /// Adds (`add`) or takes away one tunnel's load on `links`: exactly
    /// what adding it put there, so a tunnel's load comes and goes without
    /// touching the others'.
    pub(super) fn apply(
        &self,
        loads: &mut [LinkLoad],
        links: &[LinkId],
        load: u32,
        period: u64,
        lane: u8,
        add: bool,
    ) {
        let k = lane as usize;
        let bps = rate_bps(load, period);
        for &l in links {
            let ld = &mut loads[l.0];
            let tx = tx_ns(load, self.consts[l.0].bandwidth_bps);
            if add {
                ld.count[k] += 1;
                ld.tx_sum[k] += tx;
                ld.bps[k] = ld.bps[k].saturating_add(bps);
            } else {
                ld.count[k] -= 1;
                ld.tx_sum[k] -= tx;
                ld.bps[k] = ld.bps[k].saturating_sub(bps);
            }
        }
    }

    /// Every link's load under `shapes`, from nothing.
    pub(super) fn loads(&self, shapes: &[Shape]) -> Vec<LinkLoad> {
        let mut loads = vec![LinkLoad::default(); self.topo.links().len()];
        for s in shapes {
            self.apply(&mut loads, &s.links, s.load, s.period, s.lane, true);
        }
        loads
    }

    /// A hop's maximum over link `l` under `ld` for a packet of `lane`
    /// but for the packet's own transmission time: `λmin + δmax` plus the
    /// queueing bound (the path search's weight of the link before the
    /// request's transmission time; with no load, `λmin + δmax + NP`, the
    /// least it can be).
    pub(super) fn hop_base(&self, ld: &LinkLoad, l: LinkId, lane: usize) -> u64 {
        let c = &self.consts[l.0];
        c.min_latency_ns
            .saturating_add(c.max_jitter_ns)
            .saturating_add(self.queueing(ld, l, lane, 0))
    }

    /// Queueing delay of a packet of `lane` with transmission time `own_tx`
    /// at `l` (own packet subtracted when `own_tx > 0`, see module docs).
    pub(super) fn queueing(&self, ld: &LinkLoad, l: LinkId, lane: usize, own_tx: u64) -> u64 {
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

    /// One tree's walk under `loads`. A tree's links come in the order
    /// they were attached, each from a node reached before it: one pass
    /// over them, no map. Links in another order take the general walk.
    pub(super) fn walk(&self, s: ShapeRef<'_>, loads: &[LinkLoad]) -> Walk {
        // (node, min, max, upstream jitter), in the order reached.
        let mut at: Vec<(NodeId, u64, u64, u64)> = Vec::with_capacity(s.links.len() + 1);
        at.push((s.sender, 0, 0, 0));
        let mut need_period = 0u64;
        for &l in s.links {
            let link = self.topo.link(l);
            let Some(&(_, mn, mx, jup)) = at.iter().find(|a| a.0 == link.from) else {
                return self.walk_any_order(s, loads);
            };
            if at.iter().any(|a| a.0 == link.to) {
                return self.walk_any_order(s, loads);
            }
            let hop = self.hop(s, l, loads, jup, &mut need_period);
            at.push((link.to, mn + hop.0, mx + hop.1, jup + hop.2));
        }
        Self::ranges(
            s,
            need_period,
            s.receivers
                .iter()
                .map(|&r| (r, at.iter().find(|a| a.0 == r).map(|a| (a.1, a.2)))),
        )
    }

    /// [`Model::walk`] of a stored tree, by its index: one pass over its
    /// links, nothing searched.
    pub(super) fn walk_indexed(&self, s: ShapeRef<'_>, ix: &TreeIndex, loads: &[LinkLoad]) -> Walk {
        // Per link: (min, max, upstream jitter) at its end.
        let mut at: Vec<(u64, u64, u64)> = Vec::with_capacity(s.links.len());
        let mut need_period = 0u64;
        for (&l, &up) in s.links.iter().zip(&ix.up) {
            let (mn, mx, jup) = if up == TreeIndex::SENDER {
                (0, 0, 0)
            } else {
                at[up as usize]
            };
            let hop = self.hop(s, l, loads, jup, &mut need_period);
            at.push((mn + hop.0, mx + hop.1, jup + hop.2));
        }
        Self::ranges(
            s,
            need_period,
            s.receivers.iter().zip(&ix.entering).map(|(&r, &j)| {
                let reached =
                    (j != TreeIndex::SENDER).then(|| (at[j as usize].0, at[j as usize].1));
                (r, reached)
            }),
        )
    }

    /// What crossing link `l` adds for tree `s`: (to the minimum, to the
    /// maximum, to the upstream jitter); raises `need_period` by the
    /// link's drain condition.
    fn hop(
        &self,
        s: ShapeRef<'_>,
        l: LinkId,
        loads: &[LinkLoad],
        jup: u64,
        need_period: &mut u64,
    ) -> (u64, u64, u64) {
        let c = &self.consts[l.0];
        let ld = &loads[l.0];
        let tx = tx_ns(s.load, c.bandwidth_bps);
        let q = self.queueing(ld, l, s.lane as usize, tx);
        *need_period = (*need_period).max(jup.saturating_add(self.drain(ld, l)));
        let tx_min = if c.min_includes_tx { tx } else { 0 };
        (
            tx_min + c.min_latency_ns,
            tx + c.min_latency_ns + c.max_jitter_ns + q,
            c.max_jitter_ns + q,
        )
    }

    /// The hop's maximum of [`Model::hop`] alone: the most a packet of
    /// `load` bytes on `lane` can take over `l`. The same whether that
    /// packet's own tunnel is in `loads` on `l` (`booked`) or not, as its
    /// queueing bound leaves its own packet out; it depends on nothing
    /// upstream.
    pub(super) fn hop_max(
        &self,
        load: u32,
        lane: u8,
        l: LinkId,
        loads: &[LinkLoad],
        booked: bool,
    ) -> u64 {
        let c = &self.consts[l.0];
        let tx = tx_ns(load, c.bandwidth_bps);
        let own = if booked { tx } else { 0 };
        let q = self.queueing(&loads[l.0], l, lane as usize, own);
        tx + c.min_latency_ns + c.max_jitter_ns + q
    }

    /// The walk's result from each receiver's (min, max).
    fn ranges(
        s: ShapeRef<'_>,
        need_period: u64,
        reached: impl Iterator<Item = (NodeId, Option<(u64, u64)>)>,
    ) -> Walk {
        let mut per: Vec<(NodeId, LatencyRange)> = Vec::with_capacity(s.receivers.len());
        per.extend(reached.filter_map(|(r, at)| {
            at.map(|(mn, mx)| {
                (
                    r,
                    LatencyRange {
                        min_latency_ns: mn,
                        max_jitter_ns: mx - mn,
                    },
                )
            })
        }));
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

    /// Depth-first walk of links in any order (a node reached twice is
    /// taken once; `Allocator::verify` refuses such a "tree").
    fn walk_any_order(&self, s: ShapeRef<'_>, loads: &[LinkLoad]) -> Walk {
        let mut children: HashMap<NodeId, Vec<LinkId>> = HashMap::new();
        for &l in s.links {
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
                let hop = self.hop(s, l, loads, jup, &mut need_period);
                stack.push((self.topo.link(l).to, mn + hop.0, mx + hop.1, jup + hop.2));
            }
        }
        Self::ranges(
            s,
            need_period,
            s.receivers.iter().map(|&r| (r, at.get(&r).copied())),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::{LinkSpec, Node, NodeKind};

    /// The one-pass walk and the depth-first one agree on a tree, whatever
    /// order its links come in (the second takes any).
    #[test]
    fn both_walks_agree() {
        let names = ["h0", "s0", "s1", "h1", "h2", "h3"];
        let nodes = names
            .iter()
            .map(|n| Node {
                name: n.to_string(),
                kind: if n.starts_with('h') {
                    NodeKind::Host
                } else {
                    NodeKind::Switch
                },
            })
            .collect();
        let pairs = [
            ("h0", "s0"),
            ("s0", "s1"),
            ("s0", "h1"),
            ("s1", "h2"),
            ("s1", "h3"),
        ];
        let mut links = Vec::new();
        for (i, (a, b)) in pairs.iter().enumerate() {
            for (from, to) in [(a, b), (b, a)] {
                links.push(LinkSpec {
                    from: from.to_string(),
                    to: to.to_string(),
                    bandwidth_bps: 1_000_000_000 * (i as u64 + 1),
                    express_queue_pkts: 8,
                    best_effort_queue_pkts: 8,
                    min_latency_ns: 100 * i as u64,
                    max_jitter_ns: 7 * i as u64,
                    min_includes_tx: i % 2 == 0,
                });
            }
        }
        let topo = Topology::new(nodes, links).unwrap();
        let cfg = TeConfig::default();
        let consts = LinkConst::all(&topo, &cfg);
        let m = Model {
            topo: &topo,
            cfg: &cfg,
            consts: &consts,
        };
        let id = |n: &str| topo.node_id(n).unwrap();
        let l = |a: &str, b: &str| topo.link_between(a, b).unwrap();
        let tree = vec![
            l("h0", "s0"),
            l("s0", "h1"),
            l("s0", "s1"),
            l("s1", "h3"),
            l("s1", "h2"),
        ];
        let receivers = [id("h1"), id("h2"), id("h3")];
        let other = Shape {
            sender: id("h1"),
            receivers: vec![id("h3")],
            links: vec![l("h1", "s0"), l("s0", "s1"), l("s1", "h3")],
            load: 700,
            period: 1_000_000,
            lane: 0,
        };
        let loads = m.loads(&[other]);
        let mut reversed = tree.clone();
        reversed.reverse();
        for lane in [0u8, 1] {
            let s = ShapeRef {
                sender: id("h0"),
                receivers: &receivers,
                links: &tree,
                load: 300,
                lane,
            };
            let one = m.walk(s, &loads);
            assert_eq!(one, m.walk_any_order(s, &loads), "lane {lane}");
            let back = ShapeRef {
                links: &reversed,
                ..s
            };
            assert_eq!(one, m.walk(back, &loads), "lane {lane}, links reversed");
            assert_eq!(one.1.len(), 3);
            assert!(one.2 > 0, "a drain condition");
        }
    }
}
