//! Allocation tests with hand-computed bounds.
//!
//! All links: 1 Gbit/s, λmin = 1000 ns, δmax = 500 ns. With σ = 1000 B the
//! transmission time is tx = 8000 ns; the non-preemption term (MTU 1500 B)
//! is NP = 12000 ns. One hop alone: min = tx + λ = 9000, max = 9000 + δ + NP
//! = 21500.

mod common;

use common::{star, two_switch};
use xlane_te::alloc::{Allocator, ChangeError, Refusal, Request, TeConfig, TunnelId};
use xlane_te::topology::{LinkSpec, NodeKind, Topology};

fn req(from: &str, to: &[&str], load: u32, period: u64, lane: u8) -> Request {
    Request {
        sender: from.into(),
        receivers: to.iter().map(|s| s.to_string()).collect(),
        load_bytes: load,
        period_ns: period,
        sublane: lane,
    }
}

/// (min, jitter) of a tunnel.
fn range(a: &Allocator, id: TunnelId) -> (u64, u64) {
    let r = a.tunnel(id).expect("tunnel").range;
    (r.min_latency_ns, r.max_jitter_ns)
}

fn alloc(topo: Topology) -> Allocator {
    Allocator::new(topo, TeConfig::default())
}

const MS: u64 = 1_000_000;

/// One step of a scenario: a request and the expected (min, jitter) of every
/// tunnel so far after it, by tunnel number (1-based).
struct Step {
    req: Request,
    after: &'static [(u64, (u64, u64))],
    changed: &'static [u64],
}

fn run(name: &str, topo: Topology, steps: Vec<Step>) -> Allocator {
    let mut a = alloc(topo);
    for (i, s) in steps.into_iter().enumerate() {
        let g = a
            .request(&s.req)
            .unwrap_or_else(|e| panic!("{name} step {i}: {e}"));
        let mut ch: Vec<u64> = g.changed.iter().map(|c| c.tunnel.0).collect();
        ch.sort();
        assert_eq!(ch, s.changed, "{name} step {i}: changed");
        for &(t, want) in s.after {
            assert_eq!(range(&a, TunnelId(t)), want, "{name} step {i}: tunnel {t}");
        }
        a.verify()
            .unwrap_or_else(|e| panic!("{name} step {i}: {e}"));
    }
    a
}

#[test]
fn scenarios() {
    // One tunnel on a star: two hops of [9000, 21500] → [18000, 43000],
    // jitter 25000.
    run(
        "one tunnel",
        star(4, 64),
        vec![Step {
            req: req("h0", &["h1"], 1000, MS, 0),
            after: &[(1, (18000, 25000))],
            changed: &[],
        }],
    );
    // Two tunnels into h2 share sw -> h2: there each waits for the other's
    // packet (+8000): max = 21500 + 29500 = 51000, jitter 33000.
    run(
        "two sharing",
        star(4, 64),
        vec![
            Step {
                req: req("h0", &["h2"], 1000, MS, 0),
                after: &[(1, (18000, 25000))],
                changed: &[],
            },
            Step {
                req: req("h1", &["h2"], 1000, MS, 0),
                after: &[(1, (18000, 33000)), (2, (18000, 33000))],
                changed: &[1],
            },
        ],
    );
    // Different destinations do not interact on a star.
    run(
        "disjoint",
        star(4, 64),
        vec![
            Step {
                req: req("h0", &["h1"], 1000, MS, 0),
                after: &[],
                changed: &[],
            },
            Step {
                req: req("h2", &["h3"], 1000, MS, 0),
                after: &[(1, (18000, 25000)), (2, (18000, 25000))],
                changed: &[],
            },
        ],
    );
    // Multicast to three: every receiver two hops alone → [18000, 43000].
    // Then a unicast h1 -> h3 shares sw -> h3 only: receiver h3 of tunnel 1
    // gets +8000 → tunnel range [18000, 51000].
    run(
        "multicast",
        star(4, 64),
        vec![
            Step {
                req: req("h0", &["h1", "h2", "h3"], 1000, MS, 0),
                after: &[(1, (18000, 25000))],
                changed: &[],
            },
            Step {
                req: req("h1", &["h3"], 1000, MS, 0),
                after: &[(1, (18000, 33000)), (2, (18000, 33000))],
                changed: &[1],
            },
        ],
    );
    // Sub-lane isolation: a sub-lane-1 tunnel does not change sub-lane 0.
    // Tunnel 2 (lane 1) on sw -> h1 waits NP + 2·8000 (higher lane counted
    // twice) = 28000: max = 21500 + 9000 + 500 + 28000 = 59000, jitter 41000.
    run(
        "lane 1 after lane 0",
        star(4, 64),
        vec![
            Step {
                req: req("h0", &["h1"], 1000, MS, 0),
                after: &[(1, (18000, 25000))],
                changed: &[],
            },
            Step {
                req: req("h2", &["h1"], 1000, MS, 1),
                after: &[(1, (18000, 25000)), (2, (18000, 41000))],
                changed: &[],
            },
        ],
    );
    // ... the reverse does.
    run(
        "lane 0 after lane 1",
        star(4, 64),
        vec![
            Step {
                req: req("h2", &["h1"], 1000, MS, 1),
                after: &[(1, (18000, 25000))],
                changed: &[],
            },
            Step {
                req: req("h0", &["h1"], 1000, MS, 0),
                after: &[(1, (18000, 41000)), (2, (18000, 25000))],
                changed: &[1],
            },
        ],
    );
    // Two switches, multicast h0 -> {h1, h2, h3}: h1 two hops [18000,
    // 43000]; h2, h3 three hops (via the direct s0 -> s1) [27000, 64500].
    // Tunnel range [18000, 64500], jitter 46500.
    let a = run(
        "two-switch multicast",
        two_switch(64),
        vec![Step {
            req: req("h0", &["h1", "h2", "h3"], 1000, MS, 0),
            after: &[(1, (18000, 46500))],
            changed: &[],
        }],
    );
    let t = a.tunnel(TunnelId(1)).expect("t");
    let names: Vec<String> = t
        .links
        .iter()
        .map(|&l| a.topology().describe_link(l))
        .collect();
    assert_eq!(names.len(), 5, "{names:?}");
    assert!(names.contains(&"s0 -> s1".to_string()), "{names:?}");
    let per: Vec<(u64, u64)> = t
        .per_receiver
        .iter()
        .map(|(_, r)| (r.min_latency_ns, r.max_latency_ns()))
        .collect();
    assert_eq!(per, vec![(18000, 43000), (27000, 64500), (27000, 64500)]);
}

#[test]
fn reroutes_around_a_full_queue() {
    // s0 -> s1 holds one express packet: the second tunnel goes via s2
    // (4 hops: [36000, 86000]).
    let mut a = alloc(two_switch(1));
    let t1 = a
        .request(&req("h0", &["h2"], 1000, MS, 0))
        .expect("t1")
        .tunnel;
    let t2 = a
        .request(&req("h1", &["h3"], 1000, MS, 0))
        .expect("t2")
        .tunnel;
    let names: Vec<String> = a
        .tunnel(t2)
        .expect("t2")
        .links
        .iter()
        .map(|&l| a.topology().describe_link(l))
        .collect();
    assert_eq!(names, vec!["h1 -> s0", "s0 -> s2", "s2 -> s1", "s1 -> h3"]);
    assert_eq!(range(&a, t1), (27000, 37500));
    assert_eq!(range(&a, t2), (36000, 50000));
    a.verify().expect("valid");
}

#[test]
fn queue_overflow_refused() {
    // Express queues of 2 packets: a third lane-0 tunnel into h3 is refused;
    // a lane-1 tunnel has its own queue.
    let mut a = alloc(star(4, 2));
    a.request(&req("h0", &["h3"], 100, MS, 0)).expect("1");
    a.request(&req("h1", &["h3"], 100, MS, 0)).expect("2");
    let e = a.request(&req("h2", &["h3"], 100, MS, 0)).unwrap_err();
    assert_eq!(
        e,
        Refusal::QueueOverflow {
            link: "sw -> h3".into(),
            sublane: 0,
            packets: 3,
            capacity: 2
        }
    );
    assert_eq!(a.tunnels().count(), 2);
    a.request(&req("h2", &["h3"], 100, MS, 1)).expect("lane 1");
    a.verify().expect("valid");
}

#[test]
fn period_raised_for_bandwidth_then_bandwidth_refused() {
    // Share 100 ‰ of 1 Gbit/s = 100 Mbit/s; 1000 B every 10 µs = 800 Mbit/s:
    // raised to 8000 bits / 100 Mbit/s = 80 µs, which uses the whole share.
    let mut a = alloc(star(4, 64));
    let g = a
        .request(&req("h0", &["h1"], 1000, 10_000, 0))
        .expect("raised");
    assert!(g.period_raised);
    assert_eq!(g.resources.period_ns, 80_000);
    let t = a.tunnel(g.tunnel).expect("t");
    assert_eq!(t.requested_period_ns, 10_000);
    // h0's uplink share is used up.
    let e = a.request(&req("h0", &["h2"], 1000, MS, 0)).unwrap_err();
    assert!(
        matches!(&e, Refusal::Bandwidth { link, sublane: 0, used_bps: 100_000_000, capacity_bps: 100_000_000 } if link == "h0 -> sw"),
        "{e}"
    );
    // Not raised when it fits.
    let g = a.request(&req("h2", &["h3"], 1000, MS, 0)).expect("fits");
    assert!(!g.period_raised);
    assert_eq!(g.resources.period_ns, MS);
}

#[test]
fn period_raised_for_drain_condition_and_would_invalidate() {
    // Full share: bandwidth allows 8 µs. Drain condition of a lone tunnel:
    // second hop, upstream jitter 500 + 12000, plus D = 12000 + 8000 →
    // 32500 ns.
    let cfg = TeConfig {
        express_share_permille: 1000,
        ..TeConfig::default()
    };
    let mut a = Allocator::new(star(4, 64), cfg);
    let g = a.request(&req("h0", &["h1"], 1000, 20_000, 0)).expect("t1");
    assert!(g.period_raised);
    assert_eq!(g.resources.period_ns, 32_500);
    // A second tunnel into h1 raises D(sw -> h1) to 28000: tunnel 1 would
    // need 12500 + 28000 = 40500 > 32500.
    let e = a.request(&req("h2", &["h1"], 1000, MS, 0)).unwrap_err();
    assert_eq!(
        e,
        Refusal::WouldInvalidate {
            tunnel: g.tunnel,
            period_ns: 32_500,
            required_ns: 40_500
        }
    );
    a.verify().expect("unchanged");
}

#[test]
fn release_restores_ranges() {
    let mut a = alloc(star(4, 64));
    let t1 = a
        .request(&req("h0", &["h2"], 1000, MS, 0))
        .expect("1")
        .tunnel;
    let before = a.tunnel(t1).expect("t1").resources();
    let t2 = a
        .request(&req("h1", &["h2"], 1000, MS, 0))
        .expect("2")
        .tunnel;
    assert_eq!(range(&a, t1), (18000, 33000));
    let ch = a.release(t2).expect("release");
    assert_eq!(ch.len(), 1);
    assert_eq!(ch[0].tunnel, t1);
    assert_eq!(ch[0].new, before);
    assert_eq!(a.tunnel(t1).expect("t1").resources(), before);
    assert!(a.release(t2).is_err());
    a.release(t1).expect("release");
    assert!(a.is_empty());
    assert_eq!(a.objective_ns(), 0);
}

#[test]
fn change_reports_others() {
    let mut a = alloc(star(4, 64));
    let t1 = a
        .request(&req("h0", &["h2"], 1000, MS, 0))
        .expect("1")
        .tunnel;
    let t2 = a
        .request(&req("h1", &["h2"], 1000, MS, 0))
        .expect("2")
        .tunnel;
    // σ(t2) = 500 B → tx 4000: t1 waits 4000 less on sw -> h2 (jitter 29000);
    // t2 min = 2·(4000 + 1000) = 10000, max = (4000+1000+500+12000)
    // + (5000 + 500 + 12000 + 8000) = 17500 + 25500 = 43000, jitter 33000.
    let g = a.change(t2, 500, MS).expect("change");
    assert_eq!(g.changed.len(), 1);
    assert_eq!(g.changed[0].tunnel, t1);
    assert_eq!(range(&a, t1), (18000, 29000));
    assert_eq!(range(&a, t2), (10000, 33000));
    assert_eq!(g.resources.load_bytes, 500);
    a.verify().expect("valid");
    // Refused change leaves the tunnel as it was.
    let e = a.change(t2, 2000, MS).unwrap_err();
    assert!(
        matches!(e, ChangeError::Refused(Refusal::LoadTooLarge { .. })),
        "{e}"
    );
    assert_eq!(a.tunnel(t2).expect("t2").load_bytes, 500);
    assert!(matches!(
        a.change(TunnelId(99), 1, MS),
        Err(ChangeError::UnknownTunnel(_))
    ));
}

#[test]
fn request_refusals() {
    let mut a = alloc(star(3, 64));
    let cases: Vec<(Request, Refusal)> = vec![
        (req("h0", &["h1"], 0, MS, 0), Refusal::ZeroLoad),
        (
            req("h0", &["h1"], 1501, MS, 0),
            Refusal::LoadTooLarge {
                load_bytes: 1501,
                mtu_bytes: 1500,
            },
        ),
        (
            req("h0", &["h1"], 100, MS, 2),
            Refusal::UnknownSublane {
                sublane: 2,
                sublanes: 2,
            },
        ),
        (
            req("h0", &["h1"], 100, 999, 0),
            Refusal::PeriodTooSmall {
                requested_ns: 999,
                min_ns: 1000,
            },
        ),
        (
            req("h0", &["h1"], 100, 2_000_000_000, 0),
            Refusal::PeriodTooLarge {
                requested_ns: 2_000_000_000,
                max_ns: 1_000_000_000,
            },
        ),
        (
            req("hx", &["h1"], 100, MS, 0),
            Refusal::UnknownHost("hx".into()),
        ),
        (
            req("h0", &["hy"], 100, MS, 0),
            Refusal::UnknownHost("hy".into()),
        ),
        (
            req("sw", &["h1"], 100, MS, 0),
            Refusal::NotAHost("sw".into()),
        ),
        (req("h0", &[], 100, MS, 0), Refusal::NoReceivers),
        (
            req("h0", &["h1", "h1"], 100, MS, 0),
            Refusal::DuplicateReceiver("h1".into()),
        ),
        (
            req("h0", &["h0"], 100, MS, 0),
            Refusal::ReceiverIsSender("h0".into()),
        ),
    ];
    for (r, want) in cases {
        assert_eq!(a.request(&r), Err(want.clone()), "{r:?}");
    }
    assert!(a.is_empty());
}

#[test]
fn works_on_real_testbed_fixture() {
    let topo = Topology::from_toml(include_str!("data/testbed_star4.toml")).expect("fixture");
    let mut a = alloc(topo);
    // h0 -> sw (λ 2339, δ 8581) then sw -> h1 (λ 2339, δ 8581):
    // min = 2·(8000) + 4678 = 20678; max = min + 2·(8581 + 12000) = 61840.
    let g = a.request(&req("h0", &["h1"], 1000, MS, 0)).expect("grant");
    assert_eq!(g.resources.min_latency_ns, 20678);
    assert_eq!(g.resources.max_jitter_ns, 41162);
}

/// On token-bucket–emulated links (`min_includes_tx = false`) the minimum
/// drops the transmission times while the maximum keeps them.
#[test]
fn token_bucket_links_leave_tx_out_of_the_minimum() {
    let star2 = |min_includes_tx: bool| {
        let mut nodes = vec![common::node("sw", NodeKind::Switch)];
        let mut links = Vec::new();
        for h in ["h0", "h1"] {
            nodes.push(common::node(h, NodeKind::Host));
            for (a, b) in [(h, "sw"), ("sw", h)] {
                links.push(LinkSpec {
                    min_includes_tx,
                    ..common::spec(a, b, 8)
                });
            }
        }
        Topology::new(nodes, links).expect("star")
    };
    // 1000 B at 1 Gbit/s: 8 µs per hop, 2 hops; λmin 1 µs per hop.
    let (mut w, mut e) = (alloc(star2(true)), alloc(star2(false)));
    let r = req("h0", &["h1"], 1000, 10 * MS, 0);
    let (gw, ge) = (w.request(&r).unwrap(), e.request(&r).unwrap());
    assert_eq!(gw.resources.min_latency_ns, 2 * (8_000 + 1_000));
    assert_eq!(ge.resources.min_latency_ns, 2 * 1_000);
    assert_eq!(
        gw.resources.min_latency_ns + gw.resources.max_jitter_ns,
        ge.resources.min_latency_ns + ge.resources.max_jitter_ns
    );
}

/// `request_on_tree`: a tree given as hops is admitted as it is (the
/// longer way round through s2 too), and what is not a tree for the
/// request is refused with the reason, leaving the allocation as it was.
#[test]
fn given_trees() {
    let hops = |a: &Allocator, h: &[(&str, &str)]| -> Vec<xlane_te::topology::LinkId> {
        h.iter()
            .map(|(f, t)| a.topology().link_between(f, t).expect("link"))
            .collect()
    };
    type Case = (
        &'static str,
        Request,
        &'static [(&'static str, &'static str)],
        Option<&'static str>,
    );
    let cases: Vec<Case> = vec![
        (
            "direct",
            req("h0", &["h2"], 1000, MS, 0),
            &[("h0", "s0"), ("s0", "s1"), ("s1", "h2")],
            None,
        ),
        (
            "round about",
            req("h0", &["h2"], 1000, MS, 0),
            &[("h0", "s0"), ("s0", "s2"), ("s2", "s1"), ("s1", "h2")],
            None,
        ),
        (
            "multicast",
            req("h0", &["h2", "h1"], 1000, MS, 0),
            &[("h0", "s0"), ("s0", "s1"), ("s1", "h2"), ("s0", "h1")],
            None,
        ),
        (
            "misses a receiver",
            req("h0", &["h2", "h3"], 1000, MS, 0),
            &[("h0", "s0"), ("s0", "s1"), ("s1", "h2")],
            Some("does not reach `h3`"),
        ),
        (
            "out of order",
            req("h0", &["h2"], 1000, MS, 0),
            &[("s0", "s1"), ("h0", "s0"), ("s1", "h2")],
            Some("has not reached"),
        ),
        (
            "node twice",
            req("h0", &["h2"], 1000, MS, 0),
            &[
                ("h0", "s0"),
                ("s0", "s1"),
                ("s0", "s2"),
                ("s2", "s1"),
                ("s1", "h2"),
            ],
            Some("reaches a node twice"),
        ),
        (
            "dangling branch",
            req("h0", &["h1"], 1000, MS, 0),
            &[("h0", "s0"), ("s0", "h1"), ("s0", "s2")],
            Some("a branch ends at `s2`"),
        ),
        (
            "through a host",
            req("h0", &["h2"], 1000, MS, 0),
            &[("h0", "s0"), ("s0", "h1"), ("h1", "s0")],
            Some("leaves a host that is not the sender"),
        ),
        (
            "empty",
            req("h0", &["h1"], 1000, MS, 0),
            &[],
            Some("does not reach `h1`"),
        ),
    ];
    for (name, r, h, want) in cases {
        let mut a = alloc(two_switch(64));
        let links = hops(&a, h);
        match (a.request_on_tree(&r, &links), want) {
            (Ok(g), None) => {
                assert_eq!(a.tunnel(g.tunnel).expect("tunnel").links, links, "{name}");
                a.verify().unwrap_or_else(|e| panic!("{name}: {e}"));
            }
            (Err(Refusal::NotATree(why)), Some(w)) => {
                assert!(why.contains(w), "{name}: {why}");
                assert!(a.is_empty(), "{name}: refused but allocated");
            }
            (got, _) => panic!("{name}: {got:?}"),
        }
    }
}

/// Re-admitting every tunnel on the tree the search gave it, in the same
/// order, reproduces every range and period (what journal replay relies
/// on).
#[test]
fn given_trees_reproduce_searched_ones() {
    let reqs = [
        req("h0", &["h2", "h3", "h1"], 1000, MS, 0),
        req("h1", &["h2"], 500, MS, 1),
        req("h2", &["h0"], 1500, 100_000, 0),
        req("h3", &["h1", "h0"], 200, MS, 1),
    ];
    let mut searched = alloc(two_switch(2));
    let mut given = alloc(two_switch(2));
    for r in &reqs {
        let g = searched.request(r).expect("grant");
        let links = searched.tunnel(g.tunnel).expect("tunnel").links.clone();
        let h = given.request_on_tree(r, &links).expect("same grant");
        assert_eq!(h.resources, g.resources);
        assert_eq!(h.changed, g.changed);
    }
    given.verify().expect("valid");
}
