//! `xlane-kv`: a Redis-compatible (RESP2) store — strings, hashes, lists,
//! sets, sorted sets, transactions — whose writes go through a replication
//! seam.
//!
//! * [`resp`]: the incremental sans-IO RESP2 parser and the reply encoder.
//! * [`resp3`]: the shape of each reply for `HELLO 3` connections.
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
//!   barrier).
//! * [`raft`]: [`raft::RaftReplicator`], replication over X-Raft; the
//!   network between members (UDP/TCP, or the lane) is `xlane-xraft-net`.
//!   A single node is a group of one member ([`raft::RaftConfig::single`]),
//!   its raft log the append-only file.
//! * [`state_machine`]: [`state_machine::KvStateMachine`], what X-Raft
//!   replicates: the store and the member table, and their snapshot.
//! * [`client`]: a blocking RESP client of a group that follows the
//!   leader, for daemons that keep state in it.
//! * [`client_list`]: `CLIENT LIST` / `CLIENT INFO` lines.
//! * [`cluster`]: the group as one Redis Cluster shard (`CLUSTER SLOTS`
//!   and friends), for cluster-aware clients that follow `-MOVED`.
//! * [`members`]: the member table ([`members::Members`]) and the binary
//!   form of member addresses carried by membership changes.
//! * [`session`]: a connection's session and the commands about it, the
//!   server's counters, hash slots and redirect replies.
//! * [`client_loop`]: the RESP server: a member's clients, served on its
//!   raft driver's thread (one event loop per member, single node
//!   included), pub/sub included.
//! * [`pubsub`]: channels, patterns and keyspace notifications (Redis'
//!   `notify-keyspace-events`), fired on every member as writes apply.
//! * [`xshard`]: transactions across shards (Raft groups) ordered by
//!   1Pipe: the RESP proxy, the plan by shard, the shard appliers.
#![warn(missing_docs)]

pub mod client;
pub mod client_list;
pub mod client_loop;
pub mod cluster;
pub mod commands;
pub mod expiry;
pub mod members;
pub mod op;
pub mod pubsub;
pub mod raft;
pub mod replicator;
pub mod resp;
pub mod resp3;
pub mod session;
pub mod state_machine;
pub mod store;
pub mod txn;
pub mod types;
pub mod value;
pub mod xshard;

pub use commands::{classify, Action, MemberCmd, PubSubCmd, ReadCmd};
pub use op::{OpDecodeError, SetCond, SetTtl, WriteCmd, WriteOp};
pub use raft::{Peer, RaftConfig, RaftReplicator, RaftStartError};
pub use replicator::{ReplicaError, Replicator, SharedStore};
pub use resp::{Limits, Parser, Reply, RespError};
pub use session::{Session, Stats};
pub use store::Store;
