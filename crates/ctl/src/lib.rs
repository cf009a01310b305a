//! The X-Lane controller (X-Lane §2.2 List. 1, §3): hosts ask it for
//! tunnels (`requestBandwidth`, `releaseBandwidth`, `changeBandwidth`) and
//! are told when their resources change (`bandwidthChanged` with reason
//! `TE`, `BW_EXCEEDED` or `BW_UNUSED`, and a grace period) or end
//! (`bandwidthTerminated`). The allocation itself is [`xlane_te`]'s.
//!
//! | module | what |
//! |---|---|
//! | [`proto`] | framed binary wire protocol, typed decode errors |
//! | [`auth`] | keys file, HMAC-SHA256 challenge–response, per-host authorization rules |
//! | [`store`] | journal (CRC-checked records, fsync policy, torn-tail truncation) and snapshot compaction |
//! | [`core`] | sans-IO state machine: requests, monitoring policy, grace periods, replay |
//! | [`fabric`] | operations for switches/hosts and the [`fabric::Fabric`] trait the daemon drives |
//! | [`replicated`] | the controller as a replicated state machine: log commands, apply, snapshots |
//! | [`server`] | the TCP daemon: a thread per connection, a tick thread, upcall delivery |
//! | [`client`] | a blocking client |
//!
//! ```no_run
//! use xlane_ctl::{auth::Keys, client::Client};
//! let keys = Keys::from_file("keys.toml".as_ref())?;
//! let key = keys.get("h0").ok_or("no key for h0")?;
//! let mut c = Client::connect("127.0.0.1:7070", "h0", key)?;
//! let g = c.request(&["h1".to_string()], 64, 200_000, 0)?;
//! println!("{} [{} ns, +{} ns] every {} ns", g.tunnel, g.resources.min_latency_ns,
//!          g.resources.max_jitter_ns, g.resources.period_ns);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![warn(missing_docs)]

pub mod auth;
pub mod client;
pub mod core;
pub mod fabric;
pub mod proto;
pub mod replicated;
pub mod server;
pub mod store;

pub use crate::core::{Controller, Outcome, Policy, Principal};
pub use fabric::{group_of, Fabric, FabricError, FabricOp, NoFabric, RecordingFabric, SwitchMeter};
pub use proto::{ClientMsg, ServerMsg, TunnelId, Upcall};
/// The allocator crate, re-exported (topology loading, configuration).
pub use xlane_te as te;
