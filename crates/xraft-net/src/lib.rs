//! `xlane-xraft-net`: X-Raft's network between the members of a cluster.
//!
//! * [`net`]: [`net::NetTransport`], the [`xlane_xraft::Transport`] a
//!   member's raft driver sends on and polls: raft's express datagrams on
//!   plain UDP or on the lane, its regular traffic (snapshots, large
//!   messages) on TCP.
//! * [`lane`]: [`lane::LaneLink`], X-Raft over the lane (replication
//!   sub-lane, commit notices on X-FD heartbeats, elections started by X-FD
//!   suspicion), polled by the driver's own thread.
//! * [`chunk_stream`]: raft datagrams as a stream of lane chunks.
#![warn(missing_docs)]

pub mod chunk_stream;
pub mod lane;
pub mod net;

pub use lane::{LaneControl, LaneError, LaneLink, LaneStats, LaneTiming};
pub use net::{NetConfig, NetError, NetTransport, TcpSide, TransportStats};
