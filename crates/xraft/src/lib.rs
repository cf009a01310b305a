//! X-Raft: state machine replication for X-Lane (paper §5.2).
//!
//! Raft itself is the `raft` crate (the Rust port of etcd raft), used unmodified and
//! driven through its Ready loop by [`node::RaftNode`]. This crate adds what X-Raft needs
//! around it:
//! * [`node`] — the sans-IO replication engine: time passed in, batched proposals,
//!   ReadIndex reads, membership changes, snapshots/compaction, timeouts derived from a
//!   tunnel's bounds, and a failure-detector hook that starts elections early;
//! * [`batch`] — proposal batch codec, raft message codec, fragmentation/reassembly for a
//!   small-MTU express lane, and the two-class [`batch::Transport`] trait;
//! * `coalesce` — one append per follower and Ready (a commit notice joins the
//!   append that follows it);
//! * [`log_store`] — what the node needs of its raft log ([`LogStore`]), implemented by
//!   [`storage`] — a durable, CRC-protected segment log — and by [`mem_log`] — an
//!   in-memory log whose durable part survives a simulated crash;
//! * [`driver`] — a thread owning a node, with blocking `propose` / `read_barrier`, that
//!   also polls the transport's sockets (the network itself is `xlane-xraft-net`).
#![warn(missing_docs)]

pub mod batch;
mod coalesce;
pub mod driver;
mod log_state;
pub mod log_store;
pub mod mem_log;
pub mod node;
pub mod storage;

pub use batch::{Input, MessageEndpoint, ProposalId, Readiness, TrafficClass, Transport};
pub use log_store::{LogStore, SnapshotWrite, WriteError};
pub use mem_log::{MemDisk, MemLog, MemOpenReport};
pub use node::{
    check_conf_change, timeouts_from_bounds, ConfChangeError, DropReason, Event, NodeConfig,
    RaftNode, ReadId, ReadyOutput, SnapshotJob, StateMachine,
};
pub use raft;
pub use raft::eraftpb::{ConfChangeType, Message};
pub use storage::{
    DiskStorage, FsyncPolicy, OpenReport, PreparedSnapshot, SnapshotWriter, StorageConfig,
    UnknownFsyncPolicy,
};
