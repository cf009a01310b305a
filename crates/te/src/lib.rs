//! Traffic-engineering core of the X-Lane controller.
//!
//! - [`topology`]: the network graph `G` (hosts, switches, directed links with
//!   bandwidth, express queue length, `λmin`, `δmax`), parsed from the
//!   testbed's TOML export and validated.
//! - [`alloc`]: tunnel trees (X-Lane §3): greedy optimization phase,
//!   worst-case adjustment phase, admission (queues, bandwidth, periods),
//!   release and change, with the other tunnels whose resources changed
//!   reported for `bandwidthChanged(TE)`. The delay model is written out in
//!   that module's docs.
//! - [`qjump`]: QJump levels, network epoch and rate limits, as a baseline
//!   answer to the same requests.
//!
//! Everything is pure (no I/O except [`topology::Topology::from_file`], no
//! clock); times are integer nanoseconds, rounded up where divided.
//!
//! ```
//! use xlane_te::alloc::{Allocator, Request, TeConfig};
//! use xlane_te::topology::Topology;
//! let topo = Topology::from_toml(r#"
//! schema = 1
//! [[node]]
//! name = "h0"
//! kind = "host"
//! [[node]]
//! name = "h1"
//! kind = "host"
//! [[node]]
//! name = "sw"
//! kind = "switch"
//! [[link]]
//! from = "h0"
//! to = "sw"
//! bandwidth_bps = 1000000000
//! express_queue_pkts = 64
//! [[link]]
//! from = "sw"
//! to = "h1"
//! bandwidth_bps = 1000000000
//! express_queue_pkts = 64
//! [[link]]
//! from = "h1"
//! to = "sw"
//! bandwidth_bps = 1000000000
//! express_queue_pkts = 64
//! [[link]]
//! from = "sw"
//! to = "h0"
//! bandwidth_bps = 1000000000
//! express_queue_pkts = 64
//! "#).unwrap();
//! let mut a = Allocator::new(topo, TeConfig::default());
//! let g = a.request(&Request {
//!     sender: "h0".into(), receivers: vec!["h1".into()],
//!     load_bytes: 1000, period_ns: 1_000_000, sublane: 0,
//! }).unwrap();
//! // 2 hops of 8 µs transmission, each + 12 µs non-preemption jitter.
//! assert_eq!(g.resources.min_latency_ns, 16_000);
//! assert_eq!(g.resources.max_jitter_ns, 24_000);
//! ```
#![warn(missing_docs)]

pub mod alloc;
pub mod gen;
pub mod qjump;
pub mod topology;

pub use alloc::{
    Allocator, Changed, Grant, Refusal, Request, Resources, TeConfig, TunnelId, MAX_SUBLANES,
};
pub use topology::{Topology, TopologyError};
