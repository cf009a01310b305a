//! Datacenter topologies generated in memory, for simulations at scale
//! (`xlane bench te`): fat-trees and leaf-spine fabrics, by a spec string.
//!
//! - `fat-tree:K` (K even): K pods of K/2 edge and K/2 aggregation
//!   switches, (K/2)² core switches, K/2 hosts per edge switch: K³/4 hosts
//!   (`fat-tree:32`: 8 192 hosts, 1 280 switches).
//! - `leaf-spine:LEAVES,HOSTS,SPINES`: every leaf to every spine, HOSTS
//!   hosts per leaf.
//!
//! Host links run at [`HOST_BPS`], switch-to-switch links at
//! [`FABRIC_BPS`]; every hop has [`HOP_MIN_NS`] of fixed latency and
//! [`HOP_JITTER_NS`] of jitter, and express queues of [`QUEUE_PKTS`].
//! Hosts are `h0`, `h1`, … in rack order.

use crate::topology::{LinkSpec, Node, NodeKind, Topology, TopologyError};

/// Host link rate, bit/s (25 GbE).
pub const HOST_BPS: u64 = 25_000_000_000;
/// Switch-to-switch link rate, bit/s (100 GbE).
pub const FABRIC_BPS: u64 = 100_000_000_000;
/// Fixed latency of a hop (switching and propagation), ns.
pub const HOP_MIN_NS: u64 = 1_000;
/// Jitter of a hop outside queueing, ns.
pub const HOP_JITTER_NS: u64 = 500;
/// Express queue per sub-lane, packets.
pub const QUEUE_PKTS: u32 = 64;

/// Why a spec was refused.
#[derive(Debug, thiserror::Error)]
pub enum SpecError {
    /// Not `fat-tree:K` or `leaf-spine:L,H,S` with numbers in range.
    #[error("topology {0:?}: expected fat-tree:K (K even, 2..=64) or leaf-spine:LEAVES,HOSTS,SPINES (each 1..=1024)")]
    Spec(String),
    /// The generated graph did not validate (a bug).
    #[error(transparent)]
    Topology(#[from] TopologyError),
}

fn both(links: &mut Vec<LinkSpec>, a: &str, b: &str, bps: u64) {
    for (from, to) in [(a, b), (b, a)] {
        links.push(LinkSpec {
            from: from.to_string(),
            to: to.to_string(),
            bandwidth_bps: bps,
            express_queue_pkts: QUEUE_PKTS,
            best_effort_queue_pkts: 1000,
            min_latency_ns: HOP_MIN_NS,
            max_jitter_ns: HOP_JITTER_NS,
            min_includes_tx: true,
        });
    }
}

fn node(nodes: &mut Vec<Node>, name: String, kind: NodeKind) -> String {
    nodes.push(Node {
        name: name.clone(),
        kind,
    });
    name
}

/// A K-ary fat-tree.
pub fn fat_tree(k: usize) -> Result<Topology, SpecError> {
    if k < 2 || k % 2 != 0 || k > 64 {
        return Err(SpecError::Spec(format!("fat-tree:{k}")));
    }
    let half = k / 2;
    let (mut nodes, mut links) = (Vec::new(), Vec::new());
    let cores: Vec<String> = (0..half * half)
        .map(|c| node(&mut nodes, format!("c{c}"), NodeKind::Switch))
        .collect();
    let mut h = 0;
    for p in 0..k {
        let aggs: Vec<String> = (0..half)
            .map(|a| node(&mut nodes, format!("a{p}.{a}"), NodeKind::Switch))
            .collect();
        for (a, agg) in aggs.iter().enumerate() {
            for core in &cores[a * half..(a + 1) * half] {
                both(&mut links, agg, core, FABRIC_BPS);
            }
        }
        for e in 0..half {
            let edge = node(&mut nodes, format!("e{p}.{e}"), NodeKind::Switch);
            for agg in &aggs {
                both(&mut links, &edge, agg, FABRIC_BPS);
            }
            for _ in 0..half {
                let host = node(&mut nodes, format!("h{h}"), NodeKind::Host);
                both(&mut links, &host, &edge, HOST_BPS);
                h += 1;
            }
        }
    }
    Ok(Topology::new(nodes, links)?)
}

/// A leaf-spine fabric.
pub fn leaf_spine(leaves: usize, hosts: usize, spines: usize) -> Result<Topology, SpecError> {
    let ok = |n: usize| (1..=1024).contains(&n);
    if !(ok(leaves) && ok(hosts) && ok(spines)) {
        return Err(SpecError::Spec(format!(
            "leaf-spine:{leaves},{hosts},{spines}"
        )));
    }
    let (mut nodes, mut links) = (Vec::new(), Vec::new());
    let sp: Vec<String> = (0..spines)
        .map(|s| node(&mut nodes, format!("s{s}"), NodeKind::Switch))
        .collect();
    let mut h = 0;
    for l in 0..leaves {
        let leaf = node(&mut nodes, format!("l{l}"), NodeKind::Switch);
        for s in &sp {
            both(&mut links, &leaf, s, FABRIC_BPS);
        }
        for _ in 0..hosts {
            let host = node(&mut nodes, format!("h{h}"), NodeKind::Host);
            both(&mut links, &host, &leaf, HOST_BPS);
            h += 1;
        }
    }
    Ok(Topology::new(nodes, links)?)
}

/// The topology a spec names (`fat-tree:K`, `leaf-spine:L,H,S`).
pub fn from_spec(spec: &str) -> Result<Topology, SpecError> {
    let bad = || SpecError::Spec(spec.to_string());
    let (kind, args) = spec.split_once(':').ok_or_else(bad)?;
    let nums: Vec<usize> = args
        .split(',')
        .map(|n| n.trim().parse().map_err(|_| bad()))
        .collect::<Result<_, _>>()?;
    match (kind, &nums[..]) {
        ("fat-tree", [k]) => fat_tree(*k),
        ("leaf-spine", [l, h, s]) => leaf_spine(*l, *h, *s),
        _ => Err(bad()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        let cases = [
            ("fat-tree:4", 16, 20, 2 * (16 + 16 + 16)),
            ("fat-tree:8", 128, 80, 2 * (128 + 128 + 128)),
            ("leaf-spine:4,8,2", 32, 6, 2 * (32 + 8)),
        ];
        for (spec, hosts, switches, links) in cases {
            let t = from_spec(spec).unwrap();
            assert_eq!(t.hosts().count(), hosts, "{spec}");
            assert_eq!(t.host_count(), hosts, "{spec}");
            assert_eq!(t.nodes().len() - hosts, switches, "{spec}");
            assert_eq!(t.links().len(), links, "{spec}");
        }
        for bad in [
            "fat-tree:3",
            "fat-tree:0",
            "fat-tree",
            "ring:4",
            "leaf-spine:1,2",
            "leaf-spine:0,1,1",
            "fat-tree:x",
        ] {
            assert!(from_spec(bad).is_err(), "{bad}");
        }
    }
}
