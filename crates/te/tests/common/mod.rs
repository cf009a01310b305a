//! Shared test topologies (included with `mod common;`).
#![allow(dead_code)]

use xlane_te::topology::{LinkSpec, Node, NodeKind, Topology};

/// 1 Gbit/s, λmin = 1000 ns, δmax = 500 ns, express queue `q`.
pub fn spec(from: &str, to: &str, q: u32) -> LinkSpec {
    LinkSpec {
        from: from.into(),
        to: to.into(),
        bandwidth_bps: 1_000_000_000,
        express_queue_pkts: q,
        best_effort_queue_pkts: 1000,
        min_latency_ns: 1000,
        max_jitter_ns: 500,
        min_includes_tx: true,
    }
}

pub fn node(name: &str, kind: NodeKind) -> Node {
    Node {
        name: name.into(),
        kind,
    }
}

/// Hosts h0..h(n-1) around one switch `sw`, both directions.
pub fn star(n: usize, q: u32) -> Topology {
    let mut nodes = vec![node("sw", NodeKind::Switch)];
    let mut links = Vec::new();
    for i in 0..n {
        let h = format!("h{i}");
        nodes.push(node(&h, NodeKind::Host));
        links.push(spec(&h, "sw", q));
        links.push(spec("sw", &h, q));
    }
    Topology::new(nodes, links).expect("star")
}

/// h0, h1 on s0; h2, h3 on s1; s0 <-> s1 directly (queue `q_direct`) and
/// via s2 (queue 64).
pub fn two_switch(q_direct: u32) -> Topology {
    let mut nodes = vec![
        node("s0", NodeKind::Switch),
        node("s1", NodeKind::Switch),
        node("s2", NodeKind::Switch),
    ];
    let mut links = Vec::new();
    for (h, s) in [("h0", "s0"), ("h1", "s0"), ("h2", "s1"), ("h3", "s1")] {
        nodes.push(node(h, NodeKind::Host));
        links.push(spec(h, s, 64));
        links.push(spec(s, h, 64));
    }
    links.push(spec("s0", "s1", q_direct));
    links.push(spec("s1", "s0", q_direct));
    for (a, b) in [("s0", "s2"), ("s2", "s0"), ("s1", "s2"), ("s2", "s1")] {
        links.push(spec(a, b, 64));
    }
    Topology::new(nodes, links).expect("two-switch")
}
