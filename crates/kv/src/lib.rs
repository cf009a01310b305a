//! `xlane-kv`: a Redis 7.0-compatible store (RESP2 and RESP3) whose every
//! write is one op decided at the leader of a Raft group and applied alike
//! by every member.
//!
//! The crate is layered; a module imports only from the layers below it.
//!
//! 1. **Front end** — [`client_loop`]: the RESP server, one event loop per
//!    member on its raft driver's thread (connections, pipelining, blocked
//!    clients, pub/sub, client-side caching, access control per
//!    connection); [`session`], [`client_list`], [`txn`] (a connection's
//!    `MULTI`/`EXEC`/`WATCH`, sans I/O); [`tls`]: the TLS port's
//!    configuration; [`client`]: a blocking client of
//!    a group that follows the leader; [`xshard`]: transactions across
//!    shards ordered by 1Pipe.
//! 2. **Protocol** — [`resp`]: the incremental sans-IO parser and the
//!    reply encoder; [`resp3`]: each reply's RESP3 shape.
//! 3. **Dispatch** — [`dispatch`]: a request becomes a write op, a read or
//!    an immediate reply; [`config`], [`info`], [`debug`], [`cluster`]
//!    (the group as one Redis Cluster shard), [`acl`] (users, rules,
//!    `AUTH`, `ACL`; a pure library).
//! 4. **Command table and commands** — [`cmd`]: one spec per Redis 7.0
//!    command ([`cmd::table`]: arity, flags, key positions, ACL
//!    categories, from which `COMMAND`, ACL and routing are derived) and
//!    the commands on the store, one module per group.
//! 5. **Replicated ops** — [`op`]: [`op::WriteOp`], the versioned binary
//!    form of a write with absolute times and seeds; [`exec`]: an op
//!    applied to the store; [`state_machine`]: what X-Raft replicates (the
//!    store, the member table, their snapshot); [`replicator`], [`raft`]
//!    (replication over X-Raft; a single node is a group of one member),
//!    [`members`], [`expiry`] (expiry decided by the leader's clock).
//! 6. **Store and data types** — [`store`]: [`store::Store`], the
//!    deterministic state; [`value`]: what a key holds; [`data`]: the
//!    types with their own algorithms (streams, HyperLogLog, bitmaps,
//!    geo, Redis's RDB serialization for `DUMP`/`RESTORE`); [`notify`]
//!    and [`pubsub`]: keyspace events and channels.
//!
//! How each command is replicated: `docs/kv-commands.md`.
#![warn(missing_docs)]

pub mod acl;
pub mod client;
pub mod client_list;
pub mod client_loop;
pub mod cluster;
pub mod cmd;
pub mod config;
pub mod data;
pub mod debug;
pub mod dispatch;
mod epoll;
pub mod exec;
pub mod expiry;
pub mod info;
pub mod keyhash;
pub mod limits;
pub mod members;
pub mod notify;
pub mod op;
pub mod pubsub;
pub mod raft;
pub mod replicator;
pub mod resp;
pub mod resp3;
pub mod script;
pub mod session;
pub mod state_machine;
pub mod store;
pub mod tls;
pub mod txn;
pub mod value;
pub mod xshard;

pub use dispatch::{classify, Action, MemberCmd, PubSubCmd, ReadCmd};
pub use op::{OpDecodeError, SetCond, SetTtl, WriteCmd, WriteOp};
pub use raft::{Peer, RaftConfig, RaftReplicator, RaftStartError};
pub use replicator::{ReplicaError, Replicator, SharedStore};
pub use resp::{Limits, Parser, Reply, RespError};
pub use session::{Session, Stats};
pub use store::Store;
