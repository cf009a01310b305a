//! `xlane-kv`: a Redis-compatible (RESP2) store — strings, hashes, lists,
//! sets, sorted sets, transactions — whose writes go through a replication
//! seam.
//!
//! * [`resp`]: the incremental sans-IO RESP2 parser and the reply encoder.
//! * [`op`]: [`op::WriteOp`], the versioned binary form of a write, with
//!   absolute times: what is logged and replicated.
//! * [`store`]: [`store::Store`], the deterministic state machine.
//! * [`value`]: what a key holds ([`value::Value`]: string, hash, list,
//!   set, sorted set) and the pieces the type commands share.
//! * [`types`]: the commands on hashes, lists, sets, sorted sets and the
//!   keyspace, one module per type, replicated as command ops.
//! * [`txn`]: a connection's `MULTI`/`EXEC`/`WATCH` state, sans I/O.
//! * [`commands`]: request → write op / read / immediate reply, with Redis'
//!   error texts.
//! * [`replicator`]: the [`replicator::Replicator`] trait (propose, read
//!   barrier) and [`replicator::LocalReplicator`] (single node, optional
//!   append-only file).
//! * [`raft`]: [`raft::RaftReplicator`], replication over X-Raft; the
//!   network between members (UDP/TCP, or the lane) is `xlane-xraft-net`.
//! * [`state_machine`]: [`state_machine::KvStateMachine`], what X-Raft
//!   replicates: the store and the member table, and their snapshot.
//! * [`members`]: the member table ([`members::Members`]) and the binary
//!   form of member addresses carried by membership changes.
//! * [`server`]: the TCP server of a single node, thread per connection.
//! * [`client_loop`]: a cluster member's RESP clients, served on its raft
//!   driver's thread (one event loop per member), pub/sub included.
//! * [`pubsub`]: channels, patterns and keyspace notifications (Redis'
//!   `notify-keyspace-events`), fired on every member as writes apply.
#![warn(missing_docs)]

pub mod client_loop;
pub mod commands;
pub mod expiry;
pub mod members;
pub mod op;
pub mod pubsub;
pub mod raft;
pub mod replicator;
pub mod resp;
pub mod server;
pub mod state_machine;
pub mod store;
pub mod txn;
pub mod types;
pub mod value;

pub use commands::{classify, Action, MemberCmd, PubSubCmd, ReadCmd};
pub use op::{OpDecodeError, SetCond, SetTtl, WriteCmd, WriteOp};
pub use raft::{Peer, RaftConfig, RaftReplicator, RaftStartError};
pub use replicator::{FsyncPolicy, LocalReplicator, ReplicaError, Replicator, SharedStore};
pub use resp::{Limits, Parser, Reply, RespError};
pub use server::{Server, ServerHandle};
pub use store::Store;
