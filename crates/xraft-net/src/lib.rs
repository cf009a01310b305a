//! `xlane-xraft-net`: X-Raft's network between the members of a cluster.
//!
//! * [`auth`]: [`NetAuth`], the group key of the raft traffic.
//! * [`group`]: [`Group`], one member of an X-Raft group (network, log,
//!   node, driver and controller session), as the kv server and the
//!   controller replicas start it.
//! * [`net`]: [`net::NetTransport`], the [`xlane_xraft::Transport`] a
//!   member's raft driver sends on and polls: raft's express datagrams on
//!   plain UDP or on the lane, its regular traffic (snapshots, large
//!   messages) on TCP.
//! * [`lane`]: [`lane::LaneLink`], X-Raft over the lane (replication
//!   sub-lane, commit notices on X-FD heartbeats, elections started by X-FD
//!   suspicion), polled by the driver's own thread.
//! * [`session`]: a lane member's session with the controller: its trees,
//!   sized by the burst policy and resized with its role, the other
//!   members' tree ids, upcalls followed.
//! * [`tcp_side`]: the regular class on TCP, authenticated with the
//!   group key and bounded per listener.
//! * [`stats`]: the network's counters.
//! * [`chunk_stream`]: raft datagrams as a stream of lane chunks.
#![warn(missing_docs)]

pub mod auth;
pub mod chunk_stream;
pub mod group;
pub mod lane;
pub mod net;
pub mod session;
pub mod stats;
pub mod tcp_side;

pub use auth::NetAuth;
pub use group::{Group, GroupConfig, GroupError, MemberTable};
pub use lane::{
    frame_sizes, FrameSizes, LaneControl, LaneError, LaneKeys, LaneLink, LaneStats, LaneTiming,
    Retune, Tree, TreeIds,
};
pub use net::{NetConfig, NetError, NetTransport, TcpSide, TransportStats};
