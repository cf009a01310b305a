//! Redis 7.0's stream type: entries by ID, trimming, consumer groups with
//! their pending entries lists (PEL) and consumers, and every operation the
//! `X*` commands need, as pure deterministic functions of the stream, the
//! command's words and the `now_ms` the op carries (the leader's clock):
//! nothing here reads a clock or draws at random.
//!
//! # Layout
//!
//! * [`StreamId`]: an entry ID, Redis's parsing of it (full, ms-only,
//!   `-`/`+`, `(` exclusive bounds, `*` and `ms-*` for `XADD`) and its
//!   error texts.
//! * [`Stream`]: the value. Entries live in a persistent
//!   `imbl::OrdMap` (O(1) clone); beside them the stream keeps a model of
//!   Redis's radix tree of listpack nodes (each node's master ID, live and
//!   deleted counts, master fields and exact listpack byte size), so that
//!   approximate trimming (`MAXLEN ~`, `MINID ~`, which removes whole nodes
//!   only), `XINFO STREAM`'s `radix-tree-keys` and `radix-tree-nodes`
//!   come out as Redis's for the same sequence of commands
//!   ([`StreamConfig`] holds `stream-node-max-entries` and
//!   `stream-node-max-bytes`).
//! * [`Group`], [`Consumer`], [`Nack`]: consumer groups (last delivered
//!   ID, `entries_read`, lag by 7.0's rules), the group PEL and each
//!   consumer's PEL and seen-time (7.0 has no active-time).
//! * Reply types (plain Rust data) with a `to_reply` that builds the RESP
//!   reply Redis 7.0 sends (maps as [`Reply::Map`](crate::resp::Reply::Map), which RESP2 writes as
//!   a flat array, as Redis does).
//! * Command layer: for each command a parsed form (`Xadd::parse`, ...)
//!   holding what Redis checks before it looks the key up, and a function
//!   (`xadd`, ...) that takes the key's state ([`Key`] for reads,
//!   [`KeyMut`] for writes) and does the rest in Redis's order, so every
//!   error, including the ones that depend on the key, is Redis's and comes
//!   in Redis's order. Writes report the keyspace events Redis fires
//!   ([`Outcome::events`]) and whether Redis signals the key modified
//!   ([`Outcome::touched`]).
//! * DUMP / RESTORE support: [`Stream::nodes`] lists each listpack node
//!   as Redis lays it out (deleted entries included, as they stay in the
//!   listpack), [`Stream::restore_node`], [`Stream::restore_meta`] and
//!   [`Stream::restore_group`] rebuild a stream from a payload.
//!
//! The files, from the bottom up: `error` (errors and word helpers), `id`,
//! `entry`, `listpack` (the node model), `group` (groups, PELs and the
//! option and result types of group operations), `log` (the [`Stream`]
//! and its entry operations), `consume` (group operations), `dump`,
//! `command` (key state, outcomes, `HELP`), then one file per command
//! family: `write`, `read`, `xgroup`, `pending`, `info`.
//!
//! # Determinism
//!
//! Every timestamp (delivery times, seen-times, `*` IDs, idle times) comes
//! from the `now_ms` argument. Orders are those of ordered containers:
//! groups and consumers by name bytes (Redis's rax order), PELs by ID.

mod command;
mod consume;
mod dump;
mod entry;
mod error;
mod group;
mod id;
mod info;
mod listpack;
mod log;
mod pending;
mod read;
mod write;
mod xgroup;

pub use self::command::*;
pub use self::dump::*;
pub use self::entry::*;
pub use self::error::*;
pub use self::group::*;
pub use self::id::*;
pub use self::info::*;
pub use self::log::*;
pub use self::pending::*;
pub use self::read::*;
pub use self::write::*;
pub use self::xgroup::*;

#[cfg(test)]
mod tests;
