//! The optimization phase (see the parent module's docs): growing a
//! request's tree receiver by receiver, scoring each step's candidates
//! against the tree so far, and checking a given tree (journal replay).

use super::model::{Model, Shape, ShapeRef};
use super::search::{Dir, Search};
use super::{tx_ns, Allocator, Refusal};
use crate::topology::{LinkId, NodeId, NodeKind};

impl Allocator {
    /// Start scoring one attachment step's candidates: the tree so far
    /// (`links`) is booked, and the walks it leaves the other tunnels
    /// with are taken as they are needed.
    fn score_begin(&mut self, links: &[LinkId], new: &Shape) {
        let model = Model {
            topo: &self.topo,
            cfg: &self.cfg,
            consts: &self.consts,
        };
        model.apply(&mut self.loads, links, new.load, new.period, new.lane, true);
        self.step_walks.clear();
    }

    /// End the step [`Allocator::score_begin`] started.
    fn score_end(&mut self, links: &[LinkId], new: &Shape) {
        let model = Model {
            topo: &self.topo,
            cfg: &self.cfg,
            consts: &self.consts,
        };
        model.apply(
            &mut self.loads,
            links,
            new.load,
            new.period,
            new.lane,
            false,
        );
    }

    /// A candidate's score: the tree so far (`links`, booked) grown by
    /// `path` to `r`. The score is the candidate tree's own maximum
    /// latency plus how much `path` raises the maxima of the tunnels on
    /// its links, over the tree so far. What the tree so far adds to the
    /// other tunnels' maxima is the same for every candidate of the step,
    /// so scores differ from the rise of the objective `Σ_T (λmin(T) +
    /// δmax(T))` by one constant per step: candidates compare as by the
    /// objective.
    fn score(
        &mut self,
        links: &[LinkId],
        path: &[LinkId],
        attached: &[NodeId],
        r: NodeId,
        new: &Shape,
    ) -> i128 {
        let model = Model {
            topo: &self.topo,
            cfg: &self.cfg,
            consts: &self.consts,
        };
        let ids = self.affected(path, None);
        let mut d: i128 = 0;
        // Debug builds check the unicast rises against walks.
        #[cfg(debug_assertions)]
        let mut unicast_check: Vec<(super::TunnelId, i128)> = Vec::new();
        // A unicast tunnel's maximum is the sum of its hops' maxima, each
        // linear in the link's load: the path raises it by what it adds to
        // the queueing bound of the links they share (one packet on the
        // same sub-lane, two on a lower one). Multicast tunnels are
        // walked, before and after the path is booked.
        let mut multi = Vec::new();
        for &id in &ids {
            let t = &self.tunnels[&id];
            if t.receivers.len() > 1 {
                multi.push(id);
                continue;
            }
            let factor = match new.lane.cmp(&t.sublane) {
                std::cmp::Ordering::Equal => 1,
                std::cmp::Ordering::Less => 2,
                std::cmp::Ordering::Greater => 0,
            };
            let mut rise: i128 = 0;
            for l in &t.links {
                if path.contains(l) {
                    rise += factor * tx_ns(new.load, self.topo.link(*l).bandwidth_bps) as i128;
                }
            }
            d += rise;
            #[cfg(debug_assertions)]
            unicast_check.push((id, rise));
        }
        // The multicast maxima under the tree so far, before the path.
        for &id in &multi {
            if !self.step_walks.contains_key(&id) {
                let t = &self.tunnels[&id];
                let m = model.walk(t.shape_ref(), &self.loads).0.max_latency_ns();
                self.step_walks.insert(id, m);
            }
        }
        #[cfg(debug_assertions)]
        let before: Vec<u64> = unicast_check
            .iter()
            .map(|(id, _)| {
                let t = &self.tunnels[id];
                model.walk(t.shape_ref(), &self.loads).0.max_latency_ns()
            })
            .collect();
        model.apply(&mut self.loads, path, new.load, new.period, new.lane, true);
        #[cfg(debug_assertions)]
        for ((id, rise), b) in unicast_check.iter().zip(before) {
            let t = &self.tunnels[id];
            let a = model.walk(t.shape_ref(), &self.loads).0.max_latency_ns();
            debug_assert_eq!(a as i128 - b as i128, *rise, "{id}: unicast rise");
        }
        for &id in &multi {
            let t = &self.tunnels[&id];
            let w = model.walk(t.shape_ref(), &self.loads);
            d += w.0.max_latency_ns() as i128 - self.step_walks[&id] as i128;
        }
        let mut cand = links.to_vec();
        cand.extend_from_slice(path);
        let mut recv = attached.to_vec();
        recv.push(r);
        let own = ShapeRef {
            sender: new.sender,
            receivers: &recv,
            links: &cand,
            load: new.load,
            lane: new.lane,
        };
        d += model.walk(own, &self.loads).0.max_latency_ns() as i128;
        model.apply(&mut self.loads, path, new.load, new.period, new.lane, false);
        d
    }

    /// Optimization phase: the greedy tree for `new` (its `links` and
    /// `receivers` are ignored).
    pub(super) fn build_tree(&mut self, new: &Shape) -> Result<Vec<LinkId>, Refusal> {
        let mut search = std::mem::take(&mut self.search);
        search.begin(&self.adj, new);
        let tree = self.grow_tree(new, &mut search);
        self.search = search;
        tree
    }

    /// [`Allocator::build_tree`] with `search` ready.
    fn grow_tree(&mut self, new: &Shape, search: &mut Search) -> Result<Vec<LinkId>, Refusal> {
        let mut tree_nodes = vec![new.sender];
        let mut links: Vec<LinkId> = Vec::new();
        let mut attached: Vec<NodeId> = Vec::new();
        let mut remaining = new.receivers.clone();
        // The tree's nodes, by node index: a path leaves one, enters none.
        let mut in_tree = vec![false; self.topo.nodes().len()];
        in_tree[new.sender.0] = true;
        while !remaining.is_empty() {
            // Tree nodes a path may leave from: the sender and switches
            // with a link out of the tree.
            let sources: Vec<NodeId> = tree_nodes
                .iter()
                .copied()
                .filter(|&u| {
                    (u == new.sender || self.topo.node(u).kind != NodeKind::Host)
                        && self
                            .topo
                            .out_links(u)
                            .iter()
                            .any(|&l| !in_tree[self.topo.link(l).to.0])
                })
                .collect();
            // (u, r) candidates: one search per source to every receiver,
            // or one backwards per receiver from every source, whichever
            // takes fewer searches.
            let forward = sources.len() <= remaining.len();
            let multicast = new.receivers.len() > 1;
            if multicast {
                self.score_begin(&links, new);
            }
            let mut best: Option<(i128, usize, usize, usize, Vec<LinkId>)> = None;
            for filter in [true, false] {
                let outer = if forward {
                    sources.len()
                } else {
                    remaining.len()
                };
                for i in 0..outer {
                    if forward {
                        let u = sources[i];
                        in_tree[u.0] = false;
                        search.run(
                            &self.adj,
                            Dir::Forward,
                            u,
                            &in_tree,
                            &remaining,
                            new,
                            self.cfg.max_period_ns,
                            filter,
                        );
                        in_tree[u.0] = true;
                    } else {
                        search.run(
                            &self.adj,
                            Dir::Backward,
                            remaining[i],
                            &in_tree,
                            &sources,
                            new,
                            self.cfg.max_period_ns,
                            filter,
                        );
                    }
                    let inner = if forward {
                        remaining.len()
                    } else {
                        sources.len()
                    };
                    for j in 0..inner {
                        let (ui, ri) = if forward { (i, j) } else { (j, i) };
                        let (u, r) = (sources[ui], remaining[ri]);
                        let path = if forward {
                            search.path_to(&self.topo, u, r)
                        } else {
                            search.path_from(&self.topo, u, r)
                        };
                        let Some(path) = path else {
                            continue;
                        };
                        // A unicast request has one candidate: nothing
                        // to compare it with.
                        let delta = if multicast {
                            self.score(&links, &path, &attached, r, new)
                        } else {
                            0
                        };
                        let key = (delta, path.len(), ri, ui);
                        if best.as_ref().map_or(true, |b| key < (b.0, b.1, b.2, b.3)) {
                            best = Some((delta, path.len(), ri, ui, path));
                        }
                    }
                }
                if best.is_some() {
                    break;
                }
            }
            if multicast {
                self.score_end(&links, new);
            }
            let Some((_, _, ri, _, path)) = best else {
                return Err(Refusal::NoPath {
                    from: self.topo.node(new.sender).name.clone(),
                    to: self.topo.node(remaining[0]).name.clone(),
                });
            };
            for &l in &path {
                let to = self.topo.link(l).to;
                tree_nodes.push(to);
                in_tree[to.0] = true;
            }
            links.extend_from_slice(&path);
            attached.push(remaining.remove(ri));
        }
        Ok(links)
    }

    /// Whether `links` is a tree for `s` (see [`Allocator::request_on_tree`]).
    pub(super) fn check_tree(&self, s: &Shape, links: &[LinkId]) -> Result<(), Refusal> {
        let bad = |why: String| Err(Refusal::NotATree(why));
        let mut reached = vec![s.sender];
        let mut forwards = Vec::new();
        for &l in links {
            let Some(link) = self.topo.links().get(l.0) else {
                return bad(format!("link {} is not in the topology", l.0));
            };
            let what = self.topo.describe_link(l);
            if !reached.contains(&link.from) {
                return bad(format!("{what} leaves a node the tree has not reached"));
            }
            if link.from != s.sender && self.topo.node(link.from).kind == NodeKind::Host {
                return bad(format!("{what} leaves a host that is not the sender"));
            }
            if reached.contains(&link.to) {
                return bad(format!("{what} reaches a node twice"));
            }
            reached.push(link.to);
            forwards.push(link.from);
        }
        for r in &s.receivers {
            if !reached.contains(r) {
                return bad(format!("it does not reach `{}`", self.topo.node(*r).name));
            }
        }
        for v in &reached[1..] {
            if !forwards.contains(v) && !s.receivers.contains(v) {
                return bad(format!("a branch ends at `{}`", self.topo.node(*v).name));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::alloc::{Request, TeConfig, TunnelId};
    use crate::topology::{LinkSpec, Topology};

    /// The optimization phase as the paper states it, with nothing
    /// saved: at each step one forward search from every tree node that
    /// may forward, and every candidate scored by the rise of the whole
    /// objective (every tunnel on the candidate tree walked before and
    /// after). Ties: least score, fewest links, receiver order, tree node
    /// order.
    fn reference_tree(a: &mut Allocator, new: &Shape) -> Result<Vec<LinkId>, Refusal> {
        let mut search = Search::default();
        search.begin(&a.adj, new);
        let mut tree_nodes = vec![new.sender];
        let mut links: Vec<LinkId> = Vec::new();
        let mut attached: Vec<NodeId> = Vec::new();
        let mut remaining = new.receivers.clone();
        while !remaining.is_empty() {
            let mut blocked = vec![false; a.topo.nodes().len()];
            for &u in &tree_nodes {
                blocked[u.0] = true;
            }
            let mut best: Option<(i128, usize, usize, usize, Vec<LinkId>)> = None;
            for filter in [true, false] {
                for (ui, &u) in tree_nodes.iter().enumerate() {
                    if u != new.sender && a.topo.node(u).kind == NodeKind::Host {
                        continue;
                    }
                    blocked[u.0] = false;
                    let max = a.cfg.max_period_ns;
                    search.run(
                        &a.adj,
                        Dir::Forward,
                        u,
                        &blocked,
                        &remaining,
                        new,
                        max,
                        filter,
                    );
                    blocked[u.0] = true;
                    for (ri, &r) in remaining.iter().enumerate() {
                        let Some(path) = search.path_to(&a.topo, u, r) else {
                            continue;
                        };
                        let mut cand = links.clone();
                        cand.extend_from_slice(&path);
                        let mut recv = attached.clone();
                        recv.push(r);
                        let delta = full_delta(a, &cand, &recv, new);
                        let key = (delta, path.len(), ri, ui);
                        if best.as_ref().map_or(true, |b| key < (b.0, b.1, b.2, b.3)) {
                            best = Some((delta, path.len(), ri, ui, path));
                        }
                    }
                }
                if best.is_some() {
                    break;
                }
            }
            let Some((_, _, ri, _, path)) = best else {
                return Err(Refusal::NoReceivers);
            };
            for &l in &path {
                tree_nodes.push(a.topo.link(l).to);
            }
            links.extend_from_slice(&path);
            attached.push(remaining.remove(ri));
        }
        Ok(links)
    }

    /// The rise of the objective if a tunnel like `new` took `links` to
    /// `receivers`.
    fn full_delta(a: &mut Allocator, links: &[LinkId], receivers: &[NodeId], new: &Shape) -> i128 {
        let model = Model {
            topo: &a.topo,
            cfg: &a.cfg,
            consts: &a.consts,
        };
        let ids = a.affected(links, None);
        let before: i128 = ids
            .iter()
            .map(|id| a.tunnels[id].range.max_latency_ns() as i128)
            .sum();
        model.apply(&mut a.loads, links, new.load, new.period, new.lane, true);
        let mut after: i128 = ids
            .iter()
            .map(|id| {
                model
                    .walk(a.tunnels[id].shape_ref(), &a.loads)
                    .0
                    .max_latency_ns() as i128
            })
            .sum();
        let own = ShapeRef {
            sender: new.sender,
            receivers,
            links,
            load: new.load,
            lane: new.lane,
        };
        after += model.walk(own, &a.loads).0.max_latency_ns() as i128;
        model.apply(&mut a.loads, links, new.load, new.period, new.lane, false);
        after - before
    }

    /// A fat-tree whose links' λmin, δmax and rate (1 or 10 Gbit/s) are
    /// drawn from `seed`, so that paths of equal weight (which a forward
    /// and a backward search may break differently) do not occur, and so
    /// that a packet's transmission time weighs as much as a link's λmin
    /// (the rises of other tunnels then decide between candidates).
    fn uneven_fat_tree(k: usize, seed: u64) -> Topology {
        let base = crate::gen::fat_tree(k).expect("fat-tree");
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
            .map(|l| LinkSpec {
                from: base.node(l.from).name.clone(),
                to: base.node(l.to).name.clone(),
                bandwidth_bps: if next() % 2 == 0 {
                    1_000_000_000
                } else {
                    10_000_000_000
                },
                express_queue_pkts: l.express_queue_pkts,
                best_effort_queue_pkts: l.best_effort_queue_pkts,
                min_latency_ns: 500 + next() % 20_000,
                max_jitter_ns: next() % 5_000,
                min_includes_tx: l.min_includes_tx,
            })
            .collect();
        Topology::new(base.nodes().to_vec(), links).expect("same graph")
    }

    /// On seeded fabrics and request sequences (unicast and multicast,
    /// both sub-lanes, some releases), every tree the allocator grows is
    /// the one the plain evaluation grows: the saved searches, the
    /// backward searches, the scoring against the tree so far and the
    /// unicast rises by formula change the cost, not the choice.
    #[test]
    fn trees_equal_the_plain_evaluation() {
        for seed in 1..=12u64 {
            let topo = uneven_fat_tree(4, seed);
            let hosts: Vec<String> = topo.hosts().map(|h| topo.node(h).name.clone()).collect();
            let mut a = Allocator::new(topo, TeConfig::default());
            let mut x = seed;
            let mut rnd = move |n: usize| {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                ((x >> 33) as usize) % n
            };
            let mut granted = Vec::new();
            for step in 0..100 {
                if step % 7 == 6 && !granted.is_empty() {
                    let id: TunnelId = granted.swap_remove(rnd(granted.len()));
                    a.release(id).expect("release");
                    continue;
                }
                let from = rnd(hosts.len());
                let mut to = Vec::new();
                for _ in 0..1 + rnd(4) {
                    let r = rnd(hosts.len());
                    if r != from && !to.contains(&hosts[r]) {
                        to.push(hosts[r].clone());
                    }
                }
                if to.is_empty() {
                    continue;
                }
                let req = Request {
                    sender: hosts[from].clone(),
                    receivers: to,
                    load_bytes: 100 + rnd(1400) as u32,
                    period_ns: 10_000_000 * (1 + rnd(4) as u64),
                    sublane: rnd(2) as u8,
                };
                let shape = a.shape_of(&req).expect("valid request");
                let want = reference_tree(&mut a.clone(), &shape);
                match a.request(&req) {
                    Ok(g) => {
                        let got = &a.tunnel(g.tunnel).expect("granted").links;
                        assert_eq!(Ok(got.clone()), want, "seed {seed} step {step}: {req:?}");
                        granted.push(g.tunnel);
                    }
                    Err(e) => {
                        // Refused at admission: the tree itself is not
                        // visible, but the search must have found one.
                        assert!(want.is_ok(), "seed {seed} step {step}: {e}");
                    }
                }
            }
            a.verify().unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        }
    }
}
