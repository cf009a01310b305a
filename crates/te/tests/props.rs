//! Property tests: random topologies and operation sequences.

use proptest::prelude::*;
use xlane_te::alloc::{Allocator, Request, TeConfig, TunnelId};
use xlane_te::topology::{LinkSpec, Node, NodeKind, Topology};

#[derive(Debug, Clone)]
enum Op {
    Req {
        from: usize,
        to: Vec<usize>,
        load: u32,
        period: u64,
        lane: u8,
    },
    Release(usize),
    Change {
        which: usize,
        load: u32,
        period: u64,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0usize..8, prop::collection::vec(0usize..8, 0..4), 0u32..1700, 0u64..2_000_000, 0u8..3)
            .prop_map(|(from, to, load, period, lane)| Op::Req { from, to, load, period, lane }),
        1 => (0usize..10).prop_map(Op::Release),
        1 => (0usize..10, 0u32..1700, 0u64..2_000_000)
            .prop_map(|(which, load, period)| Op::Change { which, load, period }),
    ]
}

/// `hosts` hosts spread over `switches` switches in a line (plus random
/// extra switch links), random link parameters.
fn topo() -> impl Strategy<Value = (Vec<Node>, Vec<LinkSpec>)> {
    (
        1usize..4,
        2usize..6,
        prop::collection::vec(
            (1u64..10_000_000_000, 0u32..5, 0u64..20_000, 0u64..20_000),
            40,
        ),
        prop::collection::vec((0usize..4, 0usize..4), 0..3),
    )
        .prop_map(|(switches, hosts, params, extra)| {
            let mut nodes = Vec::new();
            let mut links = Vec::new();
            let mut k = 0;
            let mut spec = |a: String, b: String| {
                let (bw, q, lat, jit) = params[k % params.len()];
                k += 1;
                LinkSpec {
                    from: a,
                    to: b,
                    bandwidth_bps: bw,
                    express_queue_pkts: q,
                    best_effort_queue_pkts: 100,
                    min_latency_ns: lat,
                    max_jitter_ns: jit,
                    min_includes_tx: true,
                }
            };
            for s in 0..switches {
                nodes.push(Node {
                    name: format!("s{s}"),
                    kind: NodeKind::Switch,
                });
                if s > 0 {
                    links.push(spec(format!("s{}", s - 1), format!("s{s}")));
                    links.push(spec(format!("s{s}"), format!("s{}", s - 1)));
                }
            }
            // A pair drawn twice is one link (a duplicate is invalid input).
            let mut seen = std::collections::BTreeSet::new();
            for (a, b) in extra {
                if a < switches && b < switches && a + 1 < b && seen.insert((a, b)) {
                    links.push(spec(format!("s{a}"), format!("s{b}")));
                }
            }
            for h in 0..hosts {
                nodes.push(Node {
                    name: format!("h{h}"),
                    kind: NodeKind::Host,
                });
                let s = format!("s{}", h % switches);
                links.push(spec(format!("h{h}"), s.clone()));
                links.push(spec(s, format!("h{h}")));
            }
            (nodes, links)
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn random_operations_keep_invariants((nodes, links) in topo(), ops in prop::collection::vec(op(), 1..12)) {
        let topo = Topology::new(nodes, links).expect("generated topology is connected");
        let mut a = Allocator::new(topo, TeConfig::default());
        let mut ids: Vec<TunnelId> = Vec::new();
        for o in ops {
            apply(&mut a, &mut ids, o)?;
            if let Err(e) = a.verify() {
                prop_assert!(false, "{}", e);
            }
        }
        for id in ids {
            prop_assert!(a.release(id).is_ok());
            prop_assert!(a.verify().is_ok());
        }
        prop_assert!(a.is_empty());
        prop_assert_eq!(a.objective_ns(), 0);
    }

    #[test]
    fn arbitrary_graphs_never_panic(
        n in 1usize..6,
        kinds in prop::collection::vec(any::<bool>(), 6),
        edges in prop::collection::vec((0usize..7, 0usize..7, 0u64..3), 0..14),
        reqs in prop::collection::vec((0usize..6, 0usize..6, 1u32..1500), 0..5),
    ) {
        let nodes: Vec<Node> = (0..n)
            .map(|i| Node { name: format!("n{i}"), kind: if kinds[i] { NodeKind::Host } else { NodeKind::Switch } })
            .collect();
        let links: Vec<LinkSpec> = edges
            .iter()
            .map(|&(a, b, bw)| LinkSpec {
                from: format!("n{a}"),
                to: format!("n{b}"),
                bandwidth_bps: bw * 1_000_000_000,
                express_queue_pkts: 4,
                best_effort_queue_pkts: 4,
                min_latency_ns: 10,
                max_jitter_ns: 10,
                min_includes_tx: true,
            })
            .collect();
        if let Ok(topo) = Topology::new(nodes, links) {
            let mut a = Allocator::new(topo, TeConfig::default());
            for (s, r, load) in reqs {
                let _ = a.request(&Request {
                    sender: format!("n{s}"),
                    receivers: vec![format!("n{r}")],
                    load_bytes: load,
                    period_ns: 1_000_000,
                    sublane: 0,
                });
                prop_assert!(a.verify().is_ok());
            }
        }
    }

    #[test]
    fn arbitrary_toml_never_panics(s in "\\PC{0,200}") {
        let _ = Topology::from_toml(&s);
    }
}

proptest! {
    // Seeded: the same sequences every run; a failure prints its inputs
    // (and proptest keeps them in tests/props.proptest-regressions).
    #![proptest_config(ProptestConfig {
        cases: 48,
        rng_seed: proptest::test_runner::RngSeed::Fixed(0x7e_11),
        ..ProptestConfig::default()
    })]

    /// The allocator keeps loads, its link index and every range up to
    /// date as tunnels come and go; after every step they equal a
    /// recomputation of the whole allocation from scratch
    /// (`Allocator::verify`), over longer sequences than above.
    #[test]
    fn incremental_state_equals_a_recomputation((nodes, links) in topo(), ops in prop::collection::vec(op(), 10..40)) {
        let topo = Topology::new(nodes, links).expect("generated topology is connected");
        let mut a = Allocator::new(topo, TeConfig::default());
        let mut ids: Vec<TunnelId> = Vec::new();
        for (step, o) in ops.into_iter().enumerate() {
            apply(&mut a, &mut ids, o)?;
            if let Err(e) = a.verify() {
                prop_assert!(false, "step {}: {}", step, e);
            }
        }
    }
}

/// One operation of a sequence: what the property tests check of its
/// answer, on `ids` (the tunnels granted so far).
fn apply(a: &mut Allocator, ids: &mut Vec<TunnelId>, o: Op) -> Result<(), TestCaseError> {
    match o {
        Op::Req {
            from,
            to,
            load,
            period,
            lane,
        } => {
            let r = Request {
                sender: format!("h{from}"),
                receivers: to.iter().map(|t| format!("h{t}")).collect(),
                load_bytes: load,
                period_ns: period,
                sublane: lane,
            };
            if let Ok(g) = a.request(&r) {
                prop_assert!(g.resources.period_ns >= period);
                prop_assert_eq!(g.period_raised, g.resources.period_ns > period);
                ids.push(g.tunnel);
            }
        }
        Op::Release(i) => {
            if !ids.is_empty() {
                let id = ids.remove(i % ids.len());
                prop_assert!(a.release(id).is_ok());
            }
        }
        Op::Change {
            which,
            load,
            period,
        } => {
            if !ids.is_empty() {
                let id = ids[which % ids.len()];
                let before = a.tunnel(id).cloned();
                if a.change(id, load, period).is_err() {
                    prop_assert_eq!(a.tunnel(id).cloned(), before);
                }
            }
        }
    }
    Ok(())
}
