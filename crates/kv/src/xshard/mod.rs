//! Transactions across shards, ordered by 1Pipe.
//!
//! A sharded deployment is several Raft groups (`xlane kv serve`), each
//! owning the keys whose hash slot falls to it ([`shard_of`]). A request
//! whose keys live on several shards — `MSET a 1 b 2`, or a
//! `MULTI`/`EXEC` — must run on each at the same place in one order, or
//! two transactions could be seen in opposite orders on two shards.
//! 1Pipe gives that order without a sequencer:
//!
//! - the **proxy** ([`proxy`], `xlane kv txn-proxy`) speaks RESP to
//!   clients, splits each request into one part per shard ([`plan`]), and
//!   sends the parts as one *reliable* scattering: one timestamp, and
//!   either every shard delivers its part or none does;
//! - each shard's **applier** ([`shard`], `xlane kv txn-shard`) is the
//!   1Pipe receiver for its shard. It runs the parts in delivery order
//!   (timestamp order, the same at every shard) on its Raft group, each as
//!   one `MULTI`/`EXEC`, exactly once across leader changes
//!   ([`applier`]), and sends the replies straight back to the proxy
//!   ([`msg`]).
//!
//! Why that is serializable: every shard applies the transactions it is
//! part of in timestamp order, so a cycle in the order of conflicting
//! transactions would need two of them in opposite orders on two shards.
//! The shards are ordered by the appliers alone (they are the only
//! writers through this path); a `MULTI`/`EXEC` has no reads that feed
//! writes on another shard, so each part runs alone on its shard.
//! Process ids in 1Pipe: shard `s`'s applier is `s + 1`; proxies take ids
//! above the number of shards.

pub mod applier;
pub mod msg;
pub mod plan;
pub mod proxy;
pub mod shard;

use crate::session::hash_slot;

/// The shard of `key` among `shards`: its Redis Cluster hash slot modulo
/// the number of shards (so `{tag}` keys stay together).
pub fn shard_of(key: &[u8], shards: u32) -> u32 {
    hash_slot(key) as u32 % shards.max(1)
}

/// The 1Pipe process id of shard `shard`'s applier.
pub fn applier_id(shard: u32) -> u32 {
    shard + 1
}
