//! The command table: one spec per command of Redis 7.0 (and xlane's own
//! `RAFT.*` commands) — its arity, flags, key positions, ACL categories,
//! group and the version that brought it — from which `COMMAND`, ACL
//! rules and cluster routing are derived. Arities, flags, key positions
//! and categories are Redis 7.0.15's, so that clients that read them see
//! what they expect. A command is served only where a layer implements it
//! ([`crate::dispatch::implemented`]); the table describes it either way.

/// A command's group, as `COMMAND DOCS` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Group {
    /// Keys of any type.
    Generic,
    /// Strings.
    String,
    /// Lists.
    List,
    /// Sets.
    Set,
    /// Sorted sets.
    SortedSet,
    /// Hashes.
    Hash,
    /// Publish/subscribe.
    PubSub,
    /// `MULTI`/`EXEC`/`WATCH`.
    Transactions,
    /// The connection.
    Connection,
    /// The server.
    Server,
    /// Lua scripts and functions.
    Scripting,
    /// HyperLogLog.
    HyperLogLog,
    /// Cluster (and xlane's `RAFT.*`).
    Cluster,
    /// Geospatial indexes.
    Geo,
    /// Streams.
    Stream,
    /// Bitmaps and bit fields.
    Bitmap,
}

impl Group {
    /// The name `COMMAND DOCS` gives it.
    pub fn name(self) -> &'static str {
        match self {
            Group::Generic => "generic",
            Group::String => "string",
            Group::List => "list",
            Group::Set => "set",
            Group::SortedSet => "sorted-set",
            Group::Hash => "hash",
            Group::PubSub => "pubsub",
            Group::Transactions => "transactions",
            Group::Connection => "connection",
            Group::Server => "server",
            Group::Scripting => "scripting",
            Group::HyperLogLog => "hyperloglog",
            Group::Cluster => "cluster",
            Group::Geo => "geo",
            Group::Stream => "stream",
            Group::Bitmap => "bitmap",
        }
    }
}

/// One command (or subcommand, named `parent|sub`).
#[derive(Debug, Clone, Copy)]
pub struct CommandSpec {
    /// Lower-case name.
    pub name: &'static str,
    /// Redis arity: `n` exactly n words (name included), `-n` at least n.
    pub arity: i64,
    /// Flags (`write`, `readonly`, `fast`, ...), in Redis's order.
    pub flags: &'static [&'static str],
    /// First key, last key (-1: the last word, -2: the one before...),
    /// step; (0, 0, 0) without keys at fixed positions.
    pub keys: (i64, i64, i64),
    /// ACL categories, without the `@`.
    pub acl: &'static [&'static str],
    /// Its group.
    pub group: Group,
    /// The Redis version that brought it.
    pub since: &'static str,
    /// Its subcommands (`CONFIG GET`, ...).
    pub subcommands: &'static [CommandSpec],
}

impl CommandSpec {
    /// First key position (0: none).
    pub fn first_key(&self) -> i64 {
        self.keys.0
    }

    /// Whether it has flag `f`.
    pub fn has(&self, f: &str) -> bool {
        self.flags.contains(&f)
    }

    /// Whether `n` words (the name included) fit its arity.
    pub fn arity_ok(&self, n: usize) -> bool {
        let n = n as i64;
        (self.arity > 0 && n == self.arity) || (self.arity < 0 && n >= -self.arity)
    }

    const fn with_subcommands(mut self, subs: &'static [CommandSpec]) -> CommandSpec {
        self.subcommands = subs;
        self
    }

    /// The subcommand `sub` (any case).
    pub fn subcommand(&self, sub: &[u8]) -> Option<&'static CommandSpec> {
        let lower = sub.to_ascii_lowercase();
        self.subcommands.iter().find(|s| {
            s.name
                .split_once('|')
                .is_some_and(|(_, n)| n.as_bytes() == lower.as_slice())
        })
    }
}

use Group::*;

#[allow(clippy::too_many_arguments)]
const fn s(
    name: &'static str,
    arity: i64,
    flags: &'static [&'static str],
    keys: (i64, i64, i64),
    acl: &'static [&'static str],
    group: Group,
    since: &'static str,
) -> CommandSpec {
    CommandSpec {
        name,
        arity,
        flags,
        keys,
        acl,
        group,
        since,
        subcommands: &[],
    }
}

/// Every command, by name: one line each, as `s(name, arity, flags, (first
/// key, last key, step), ACL categories, group, since)`.
#[rustfmt::skip]
pub static TABLE: &[CommandSpec] = &[
    s("acl", -2, &[], (0, 0, 0), &["slow"], Server, "6.0.0").with_subcommands(ACL_SUBCOMMANDS),
    s("append", 3, &["write", "denyoom", "fast"], (1, 1, 1), &["write", "string", "fast"], String, "2.0.0"),
    s("asking", 1, &["fast"], (0, 0, 0), &["fast", "connection"], Cluster, "3.0.0"),
    s("auth", -2, &["noscript", "loading", "stale", "fast", "no_auth", "allow_busy"], (0, 0, 0), &["fast", "connection"], Connection, "1.0.0"),
    s("bgrewriteaof", 1, &["admin", "noscript", "no_async_loading"], (0, 0, 0), &["admin", "slow", "dangerous"], Server, "1.0.0"),
    s("bgsave", -1, &["admin", "noscript", "no_async_loading"], (0, 0, 0), &["admin", "slow", "dangerous"], Server, "1.0.0"),
    s("bitcount", -2, &["readonly"], (1, 1, 1), &["read", "bitmap", "slow"], Bitmap, "2.6.0"),
    s("bitfield", -2, &["write", "denyoom"], (1, 1, 1), &["write", "bitmap", "slow"], Bitmap, "3.2.0"),
    s("bitfield_ro", -2, &["readonly", "fast"], (1, 1, 1), &["read", "bitmap", "fast"], Bitmap, "6.0.0"),
    s("bitop", -4, &["write", "denyoom"], (2, -1, 1), &["write", "bitmap", "slow"], Bitmap, "2.6.0"),
    s("bitpos", -3, &["readonly"], (1, 1, 1), &["read", "bitmap", "slow"], Bitmap, "2.8.7"),
    s("blmove", 6, &["write", "denyoom", "noscript", "blocking"], (1, 2, 1), &["write", "list", "slow", "blocking"], List, "6.2.0"),
    s("blmpop", -5, &["write", "blocking", "movablekeys"], (0, 0, 0), &["write", "list", "slow", "blocking"], List, "7.0.0"),
    s("blpop", -3, &["write", "noscript", "blocking"], (1, -2, 1), &["write", "list", "slow", "blocking"], List, "2.0.0"),
    s("brpop", -3, &["write", "noscript", "blocking"], (1, -2, 1), &["write", "list", "slow", "blocking"], List, "2.0.0"),
    s("brpoplpush", 4, &["write", "denyoom", "noscript", "blocking"], (1, 2, 1), &["write", "list", "slow", "blocking"], List, "2.2.0"),
    s("bzmpop", -5, &["write", "blocking", "movablekeys"], (0, 0, 0), &["write", "sortedset", "slow", "blocking"], SortedSet, "7.0.0"),
    s("bzpopmax", -3, &["write", "noscript", "blocking", "fast"], (1, -2, 1), &["write", "sortedset", "fast", "blocking"], SortedSet, "5.0.0"),
    s("bzpopmin", -3, &["write", "noscript", "blocking", "fast"], (1, -2, 1), &["write", "sortedset", "fast", "blocking"], SortedSet, "5.0.0"),
    s("client", -2, &[], (0, 0, 0), &["slow"], Connection, "2.4.0") .with_subcommands(CLIENT_SUBCOMMANDS),
    s("cluster", -2, &[], (0, 0, 0), &["slow"], Cluster, "3.0.0") .with_subcommands(CLUSTER_SUBCOMMANDS),
    s("command", -1, &["loading", "stale"], (0, 0, 0), &["slow", "connection"], Server, "2.8.13") .with_subcommands(COMMAND_SUBCOMMANDS),
    s("config", -2, &[], (0, 0, 0), &["slow"], Server, "2.0.0") .with_subcommands(CONFIG_SUBCOMMANDS),
    s("copy", -3, &["write", "denyoom"], (1, 2, 1), &["keyspace", "write", "slow"], Generic, "6.2.0"),
    s("dbsize", 1, &["readonly", "fast"], (0, 0, 0), &["keyspace", "read", "fast"], Server, "1.0.0"),
    s("debug", -2, &["admin", "noscript", "loading", "stale"], (0, 0, 0), &["admin", "slow", "dangerous"], Server, "1.0.0"),
    s("decr", 2, &["write", "denyoom", "fast"], (1, 1, 1), &["write", "string", "fast"], String, "1.0.0"),
    s("decrby", 3, &["write", "denyoom", "fast"], (1, 1, 1), &["write", "string", "fast"], String, "1.0.0"),
    s("del", -2, &["write"], (1, -1, 1), &["keyspace", "write", "slow"], Generic, "1.0.0"),
    s("discard", 1, &["noscript", "loading", "stale", "fast", "allow_busy"], (0, 0, 0), &["fast", "transaction"], Transactions, "2.0.0"),
    s("dump", 2, &["readonly"], (1, 1, 1), &["keyspace", "read", "slow"], Generic, "2.6.0"),
    s("echo", 2, &["loading", "stale", "fast"], (0, 0, 0), &["fast", "connection"], Connection, "1.0.0"),
    s("eval", -3, &["noscript", "stale", "skip_monitor", "no_mandatory_keys", "movablekeys"], (0, 0, 0), &["slow", "scripting"], Scripting, "2.6.0"),
    s("eval_ro", -3, &["readonly", "noscript", "stale", "skip_monitor", "no_mandatory_keys", "movablekeys"], (0, 0, 0), &["slow", "scripting"], Scripting, "7.0.0"),
    s("evalsha", -3, &["noscript", "stale", "skip_monitor", "no_mandatory_keys", "movablekeys"], (0, 0, 0), &["slow", "scripting"], Scripting, "2.6.0"),
    s("evalsha_ro", -3, &["readonly", "noscript", "stale", "skip_monitor", "no_mandatory_keys", "movablekeys"], (0, 0, 0), &["slow", "scripting"], Scripting, "7.0.0"),
    s("exec", 1, &["noscript", "loading", "stale", "skip_slowlog"], (0, 0, 0), &["slow", "transaction"], Transactions, "1.2.0"),
    s("exists", -2, &["readonly", "fast"], (1, -1, 1), &["keyspace", "read", "fast"], Generic, "1.0.0"),
    s("expire", -3, &["write", "fast"], (1, 1, 1), &["keyspace", "write", "fast"], Generic, "1.0.0"),
    s("expireat", -3, &["write", "fast"], (1, 1, 1), &["keyspace", "write", "fast"], Generic, "1.2.0"),
    s("expiretime", 2, &["readonly", "fast"], (1, 1, 1), &["keyspace", "read", "fast"], Generic, "7.0.0"),
    s("failover", -1, &["admin", "noscript", "stale"], (0, 0, 0), &["admin", "slow", "dangerous"], Server, "6.2.0"),
    s("fcall", -3, &["noscript", "stale", "skip_monitor", "no_mandatory_keys", "movablekeys"], (0, 0, 0), &["slow", "scripting"], Scripting, "7.0.0"),
    s("fcall_ro", -3, &["readonly", "noscript", "stale", "skip_monitor", "no_mandatory_keys", "movablekeys"], (0, 0, 0), &["slow", "scripting"], Scripting, "7.0.0"),
    s("flushall", -1, &["write"], (0, 0, 0), &["keyspace", "write", "slow", "dangerous"], Server, "1.0.0"),
    s("flushdb", -1, &["write"], (0, 0, 0), &["keyspace", "write", "slow", "dangerous"], Server, "1.0.0"),
    s("function", -2, &[], (0, 0, 0), &["slow"], Scripting, "7.0.0") .with_subcommands(FUNCTION_SUBCOMMANDS),
    s("geoadd", -5, &["write", "denyoom"], (1, 1, 1), &["write", "geo", "slow"], Geo, "3.2.0"),
    s("geodist", -4, &["readonly"], (1, 1, 1), &["read", "geo", "slow"], Geo, "3.2.0"),
    s("geohash", -2, &["readonly"], (1, 1, 1), &["read", "geo", "slow"], Geo, "3.2.0"),
    s("geopos", -2, &["readonly"], (1, 1, 1), &["read", "geo", "slow"], Geo, "3.2.0"),
    s("georadius", -6, &["write", "denyoom", "movablekeys"], (1, 1, 1), &["write", "geo", "slow"], Geo, "3.2.0"),
    s("georadius_ro", -6, &["readonly"], (1, 1, 1), &["read", "geo", "slow"], Geo, "3.2.10"),
    s("georadiusbymember", -5, &["write", "denyoom", "movablekeys"], (1, 1, 1), &["write", "geo", "slow"], Geo, "3.2.0"),
    s("georadiusbymember_ro", -5, &["readonly"], (1, 1, 1), &["read", "geo", "slow"], Geo, "3.2.10"),
    s("geosearch", -7, &["readonly"], (1, 1, 1), &["read", "geo", "slow"], Geo, "6.2.0"),
    s("geosearchstore", -8, &["write", "denyoom"], (1, 2, 1), &["write", "geo", "slow"], Geo, "6.2.0"),
    s("get", 2, &["readonly", "fast"], (1, 1, 1), &["read", "string", "fast"], String, "1.0.0"),
    s("getbit", 3, &["readonly", "fast"], (1, 1, 1), &["read", "bitmap", "fast"], Bitmap, "2.2.0"),
    s("getdel", 2, &["write", "fast"], (1, 1, 1), &["write", "string", "fast"], String, "6.2.0"),
    s("getex", -2, &["write", "fast"], (1, 1, 1), &["write", "string", "fast"], String, "6.2.0"),
    s("getrange", 4, &["readonly"], (1, 1, 1), &["read", "string", "slow"], String, "2.4.0"),
    s("getset", 3, &["write", "denyoom", "fast"], (1, 1, 1), &["write", "string", "fast"], String, "1.0.0"),
    s("hdel", -3, &["write", "fast"], (1, 1, 1), &["write", "hash", "fast"], Hash, "2.0.0"),
    s("hello", -1, &["noscript", "loading", "stale", "fast", "no_auth", "allow_busy"], (0, 0, 0), &["fast", "connection"], Connection, "6.0.0"),
    s("hexists", 3, &["readonly", "fast"], (1, 1, 1), &["read", "hash", "fast"], Hash, "2.0.0"),
    s("hget", 3, &["readonly", "fast"], (1, 1, 1), &["read", "hash", "fast"], Hash, "2.0.0"),
    s("hgetall", 2, &["readonly"], (1, 1, 1), &["read", "hash", "slow"], Hash, "2.0.0"),
    s("hincrby", 4, &["write", "denyoom", "fast"], (1, 1, 1), &["write", "hash", "fast"], Hash, "2.0.0"),
    s("hincrbyfloat", 4, &["write", "denyoom", "fast"], (1, 1, 1), &["write", "hash", "fast"], Hash, "2.6.0"),
    s("hkeys", 2, &["readonly"], (1, 1, 1), &["read", "hash", "slow"], Hash, "2.0.0"),
    s("hlen", 2, &["readonly", "fast"], (1, 1, 1), &["read", "hash", "fast"], Hash, "2.0.0"),
    s("hmget", -3, &["readonly", "fast"], (1, 1, 1), &["read", "hash", "fast"], Hash, "2.0.0"),
    s("hmset", -4, &["write", "denyoom", "fast"], (1, 1, 1), &["write", "hash", "fast"], Hash, "2.0.0"),
    s("hrandfield", -2, &["readonly"], (1, 1, 1), &["read", "hash", "slow"], Hash, "6.2.0"),
    s("hscan", -3, &["readonly"], (1, 1, 1), &["read", "hash", "slow"], Hash, "2.8.0"),
    s("hset", -4, &["write", "denyoom", "fast"], (1, 1, 1), &["write", "hash", "fast"], Hash, "2.0.0"),
    s("hsetnx", 4, &["write", "denyoom", "fast"], (1, 1, 1), &["write", "hash", "fast"], Hash, "2.0.0"),
    s("hstrlen", 3, &["readonly", "fast"], (1, 1, 1), &["read", "hash", "fast"], Hash, "3.2.0"),
    s("hvals", 2, &["readonly"], (1, 1, 1), &["read", "hash", "slow"], Hash, "2.0.0"),
    s("incr", 2, &["write", "denyoom", "fast"], (1, 1, 1), &["write", "string", "fast"], String, "1.0.0"),
    s("incrby", 3, &["write", "denyoom", "fast"], (1, 1, 1), &["write", "string", "fast"], String, "1.0.0"),
    s("incrbyfloat", 3, &["write", "denyoom", "fast"], (1, 1, 1), &["write", "string", "fast"], String, "2.6.0"),
    s("info", -1, &["loading", "stale"], (0, 0, 0), &["slow", "dangerous"], Server, "1.0.0"),
    s("keys", 2, &["readonly"], (0, 0, 0), &["keyspace", "read", "slow", "dangerous"], Generic, "1.0.0"),
    s("lastsave", 1, &["loading", "stale", "fast"], (0, 0, 0), &["admin", "fast", "dangerous"], Server, "1.0.0"),
    s("latency", -2, &[], (0, 0, 0), &["slow"], Server, "2.8.13") .with_subcommands(LATENCY_SUBCOMMANDS),
    s("lcs", -3, &["readonly"], (1, 2, 1), &["read", "string", "slow"], String, "7.0.0"),
    s("lindex", 3, &["readonly"], (1, 1, 1), &["read", "list", "slow"], List, "1.0.0"),
    s("linsert", 5, &["write", "denyoom"], (1, 1, 1), &["write", "list", "slow"], List, "2.2.0"),
    s("llen", 2, &["readonly", "fast"], (1, 1, 1), &["read", "list", "fast"], List, "1.0.0"),
    s("lmove", 5, &["write", "denyoom"], (1, 2, 1), &["write", "list", "slow"], List, "6.2.0"),
    s("lmpop", -4, &["write", "movablekeys"], (0, 0, 0), &["write", "list", "slow"], List, "7.0.0"),
    s("lolwut", -1, &["readonly", "fast"], (0, 0, 0), &["read", "fast"], Server, "5.0.0"),
    s("lpop", -2, &["write", "fast"], (1, 1, 1), &["write", "list", "fast"], List, "1.0.0"),
    s("lpos", -3, &["readonly"], (1, 1, 1), &["read", "list", "slow"], List, "6.0.6"),
    s("lpush", -3, &["write", "denyoom", "fast"], (1, 1, 1), &["write", "list", "fast"], List, "1.0.0"),
    s("lpushx", -3, &["write", "denyoom", "fast"], (1, 1, 1), &["write", "list", "fast"], List, "2.2.0"),
    s("lrange", 4, &["readonly"], (1, 1, 1), &["read", "list", "slow"], List, "1.0.0"),
    s("lrem", 4, &["write"], (1, 1, 1), &["write", "list", "slow"], List, "1.0.0"),
    s("lset", 4, &["write", "denyoom"], (1, 1, 1), &["write", "list", "slow"], List, "1.0.0"),
    s("ltrim", 4, &["write"], (1, 1, 1), &["write", "list", "slow"], List, "1.0.0"),
    s("memory", -2, &[], (0, 0, 0), &["slow"], Server, "4.0.0") .with_subcommands(MEMORY_SUBCOMMANDS),
    s("mget", -2, &["readonly", "fast"], (1, -1, 1), &["read", "string", "fast"], String, "1.0.0"),
    s("migrate", -6, &["write", "movablekeys"], (3, 3, 1), &["keyspace", "write", "slow", "dangerous"], Generic, "2.6.0"),
    s("module", -2, &[], (0, 0, 0), &["slow"], Server, "4.0.0") .with_subcommands(MODULE_SUBCOMMANDS),
    s("monitor", 1, &["admin", "noscript", "loading", "stale"], (0, 0, 0), &["admin", "slow", "dangerous"], Server, "1.0.0"),
    s("move", 3, &["write", "fast"], (1, 1, 1), &["keyspace", "write", "fast"], Generic, "1.0.0"),
    s("mset", -3, &["write", "denyoom"], (1, -1, 2), &["write", "string", "slow"], String, "1.0.1"),
    s("msetnx", -3, &["write", "denyoom"], (1, -1, 2), &["write", "string", "slow"], String, "1.0.1"),
    s("multi", 1, &["noscript", "loading", "stale", "fast", "allow_busy"], (0, 0, 0), &["fast", "transaction"], Transactions, "1.2.0"),
    s("object", -2, &[], (0, 0, 0), &["slow"], Generic, "2.2.3") .with_subcommands(OBJECT_SUBCOMMANDS),
    s("persist", 2, &["write", "fast"], (1, 1, 1), &["keyspace", "write", "fast"], Generic, "2.2.0"),
    s("pexpire", -3, &["write", "fast"], (1, 1, 1), &["keyspace", "write", "fast"], Generic, "2.6.0"),
    s("pexpireat", -3, &["write", "fast"], (1, 1, 1), &["keyspace", "write", "fast"], Generic, "2.6.0"),
    s("pexpiretime", 2, &["readonly", "fast"], (1, 1, 1), &["keyspace", "read", "fast"], Generic, "7.0.0"),
    s("pfadd", -2, &["write", "denyoom", "fast"], (1, 1, 1), &["write", "hyperloglog", "fast"], HyperLogLog, "2.8.9"),
    s("pfcount", -2, &["readonly"], (1, -1, 1), &["read", "hyperloglog", "slow"], HyperLogLog, "2.8.9"),
    s("pfdebug", 3, &["write", "denyoom", "admin"], (2, 2, 1), &["write", "hyperloglog", "admin", "slow", "dangerous"], HyperLogLog, "2.8.9"),
    s("pfmerge", -2, &["write", "denyoom"], (1, -1, 1), &["write", "hyperloglog", "slow"], HyperLogLog, "2.8.9"),
    s("pfselftest", 1, &["admin"], (0, 0, 0), &["hyperloglog", "admin", "slow", "dangerous"], HyperLogLog, "2.8.9"),
    s("ping", -1, &["fast"], (0, 0, 0), &["fast", "connection"], Connection, "1.0.0"),
    s("psetex", 4, &["write", "denyoom"], (1, 1, 1), &["write", "string", "slow"], String, "2.6.0"),
    s("psubscribe", -2, &["pubsub", "noscript", "loading", "stale"], (0, 0, 0), &["pubsub", "slow"], PubSub, "2.0.0"),
    s("psync", -3, &["admin", "noscript", "no_async_loading", "no_multi"], (0, 0, 0), &["admin", "slow", "dangerous"], Server, "2.8.0"),
    s("pttl", 2, &["readonly", "fast"], (1, 1, 1), &["keyspace", "read", "fast"], Generic, "2.6.0"),
    s("publish", 3, &["pubsub", "loading", "stale", "fast"], (0, 0, 0), &["pubsub", "fast"], PubSub, "2.0.0"),
    s("pubsub", -2, &[], (0, 0, 0), &["slow"], PubSub, "2.8.0") .with_subcommands(PUBSUB_SUBCOMMANDS),
    s("punsubscribe", -1, &["pubsub", "noscript", "loading", "stale"], (0, 0, 0), &["pubsub", "slow"], PubSub, "2.0.0"),
    s("quit", -1, &["noscript", "loading", "stale", "fast", "no_auth", "allow_busy"], (0, 0, 0), &["fast", "connection"], Connection, "1.0.0"),
    s("randomkey", 1, &["readonly"], (0, 0, 0), &["keyspace", "read", "slow"], Generic, "1.0.0"),
    s("readonly", 1, &["loading", "stale", "fast"], (0, 0, 0), &["fast", "connection"], Cluster, "3.0.0"),
    s("readwrite", 1, &["loading", "stale", "fast"], (0, 0, 0), &["fast", "connection"], Cluster, "3.0.0"),
    s("rename", 3, &["write"], (1, 2, 1), &["keyspace", "write", "slow"], Generic, "1.0.0"),
    s("renamenx", 3, &["write", "fast"], (1, 2, 1), &["keyspace", "write", "fast"], Generic, "1.0.0"),
    s("replconf", -1, &["admin", "noscript", "loading", "stale", "allow_busy"], (0, 0, 0), &["admin", "slow", "dangerous"], Server, "3.0.0"),
    s("replicaof", 3, &["admin", "noscript", "stale", "no_async_loading"], (0, 0, 0), &["admin", "slow", "dangerous"], Server, "5.0.0"),
    s("reset", 1, &["noscript", "loading", "stale", "fast", "no_auth", "allow_busy"], (0, 0, 0), &["fast", "connection"], Connection, "6.2.0"),
    s("restore", -4, &["write", "denyoom"], (1, 1, 1), &["keyspace", "write", "slow", "dangerous"], Generic, "2.6.0"),
    s("restore-asking", -4, &["write", "denyoom", "asking"], (1, 1, 1), &["keyspace", "write", "slow", "dangerous"], Server, "3.0.0"),
    s("role", 1, &["noscript", "loading", "stale", "fast"], (0, 0, 0), &["admin", "fast", "dangerous"], Server, "2.8.12"),
    s("rpop", -2, &["write", "fast"], (1, 1, 1), &["write", "list", "fast"], List, "1.0.0"),
    s("rpoplpush", 3, &["write", "denyoom"], (1, 2, 1), &["write", "list", "slow"], List, "1.2.0"),
    s("rpush", -3, &["write", "denyoom", "fast"], (1, 1, 1), &["write", "list", "fast"], List, "1.0.0"),
    s("rpushx", -3, &["write", "denyoom", "fast"], (1, 1, 1), &["write", "list", "fast"], List, "2.2.0"),
    s("sadd", -3, &["write", "denyoom", "fast"], (1, 1, 1), &["write", "set", "fast"], Set, "1.0.0"),
    s("save", 1, &["admin", "noscript", "no_async_loading", "no_multi"], (0, 0, 0), &["admin", "slow", "dangerous"], Server, "1.0.0"),
    s("scan", -2, &["readonly"], (0, 0, 0), &["keyspace", "read", "slow"], Generic, "2.8.0"),
    s("scard", 2, &["readonly", "fast"], (1, 1, 1), &["read", "set", "fast"], Set, "1.0.0"),
    s("script", -2, &[], (0, 0, 0), &["slow"], Scripting, "2.6.0") .with_subcommands(SCRIPT_SUBCOMMANDS),
    s("sdiff", -2, &["readonly"], (1, -1, 1), &["read", "set", "slow"], Set, "1.0.0"),
    s("sdiffstore", -3, &["write", "denyoom"], (1, -1, 1), &["write", "set", "slow"], Set, "1.0.0"),
    s("select", 2, &["loading", "stale", "fast"], (0, 0, 0), &["fast", "connection"], Connection, "1.0.0"),
    s("set", -3, &["write", "denyoom"], (1, 1, 1), &["write", "string", "slow"], String, "1.0.0"),
    s("setbit", 4, &["write", "denyoom"], (1, 1, 1), &["write", "bitmap", "slow"], Bitmap, "2.2.0"),
    s("setex", 4, &["write", "denyoom"], (1, 1, 1), &["write", "string", "slow"], String, "2.0.0"),
    s("setnx", 3, &["write", "denyoom", "fast"], (1, 1, 1), &["write", "string", "fast"], String, "1.0.0"),
    s("setrange", 4, &["write", "denyoom"], (1, 1, 1), &["write", "string", "slow"], String, "2.2.0"),
    s("shutdown", -1, &["admin", "noscript", "loading", "stale", "no_multi", "allow_busy"], (0, 0, 0), &["admin", "slow", "dangerous"], Server, "1.0.0"),
    s("sinter", -2, &["readonly"], (1, -1, 1), &["read", "set", "slow"], Set, "1.0.0"),
    s("sintercard", -3, &["readonly", "movablekeys"], (0, 0, 0), &["read", "set", "slow"], Set, "7.0.0"),
    s("sinterstore", -3, &["write", "denyoom"], (1, -1, 1), &["write", "set", "slow"], Set, "1.0.0"),
    s("sismember", 3, &["readonly", "fast"], (1, 1, 1), &["read", "set", "fast"], Set, "1.0.0"),
    s("slaveof", 3, &["admin", "noscript", "stale", "no_async_loading"], (0, 0, 0), &["admin", "slow", "dangerous"], Server, "1.0.0"),
    s("slowlog", -2, &[], (0, 0, 0), &["slow"], Server, "2.2.12") .with_subcommands(SLOWLOG_SUBCOMMANDS),
    s("smembers", 2, &["readonly"], (1, 1, 1), &["read", "set", "slow"], Set, "1.0.0"),
    s("smismember", -3, &["readonly", "fast"], (1, 1, 1), &["read", "set", "fast"], Set, "6.2.0"),
    s("smove", 4, &["write", "fast"], (1, 2, 1), &["write", "set", "fast"], Set, "1.0.0"),
    s("sort", -2, &["write", "denyoom", "movablekeys"], (1, 1, 1), &["write", "set", "sortedset", "list", "slow", "dangerous"], Generic, "1.0.0"),
    s("sort_ro", -2, &["readonly", "movablekeys"], (1, 1, 1), &["read", "set", "sortedset", "list", "slow", "dangerous"], Generic, "7.0.0"),
    s("spop", -2, &["write", "fast"], (1, 1, 1), &["write", "set", "fast"], Set, "1.0.0"),
    s("spublish", 3, &["pubsub", "loading", "stale", "fast"], (1, 1, 1), &["pubsub", "fast"], PubSub, "7.0.0"),
    s("srandmember", -2, &["readonly"], (1, 1, 1), &["read", "set", "slow"], Set, "1.0.0"),
    s("srem", -3, &["write", "fast"], (1, 1, 1), &["write", "set", "fast"], Set, "1.0.0"),
    s("sscan", -3, &["readonly"], (1, 1, 1), &["read", "set", "slow"], Set, "2.8.0"),
    s("ssubscribe", -2, &["pubsub", "noscript", "loading", "stale"], (1, -1, 1), &["pubsub", "slow"], PubSub, "7.0.0"),
    s("strlen", 2, &["readonly", "fast"], (1, 1, 1), &["read", "string", "fast"], String, "2.2.0"),
    s("subscribe", -2, &["pubsub", "noscript", "loading", "stale"], (0, 0, 0), &["pubsub", "slow"], PubSub, "2.0.0"),
    s("substr", 4, &["readonly"], (1, 1, 1), &["read", "string", "slow"], String, "1.0.0"),
    s("sunion", -2, &["readonly"], (1, -1, 1), &["read", "set", "slow"], Set, "1.0.0"),
    s("sunionstore", -3, &["write", "denyoom"], (1, -1, 1), &["write", "set", "slow"], Set, "1.0.0"),
    s("sunsubscribe", -1, &["pubsub", "noscript", "loading", "stale"], (1, -1, 1), &["pubsub", "slow"], PubSub, "7.0.0"),
    s("swapdb", 3, &["write", "fast"], (0, 0, 0), &["keyspace", "write", "fast", "dangerous"], Server, "4.0.0"),
    s("sync", 1, &["admin", "noscript", "no_async_loading", "no_multi"], (0, 0, 0), &["admin", "slow", "dangerous"], Server, "1.0.0"),
    s("time", 1, &["loading", "stale", "fast"], (0, 0, 0), &["fast"], Server, "2.6.0"),
    s("touch", -2, &["readonly", "fast"], (1, -1, 1), &["keyspace", "read", "fast"], Generic, "3.2.1"),
    s("ttl", 2, &["readonly", "fast"], (1, 1, 1), &["keyspace", "read", "fast"], Generic, "1.0.0"),
    s("type", 2, &["readonly", "fast"], (1, 1, 1), &["keyspace", "read", "fast"], Generic, "1.0.0"),
    s("unlink", -2, &["write", "fast"], (1, -1, 1), &["keyspace", "write", "fast"], Generic, "4.0.0"),
    s("unsubscribe", -1, &["pubsub", "noscript", "loading", "stale"], (0, 0, 0), &["pubsub", "slow"], PubSub, "2.0.0"),
    s("unwatch", 1, &["noscript", "loading", "stale", "fast", "allow_busy"], (0, 0, 0), &["fast", "transaction"], Transactions, "2.2.0"),
    s("wait", 3, &["noscript"], (0, 0, 0), &["slow", "connection"], Generic, "3.0.0"),
    s("watch", -2, &["noscript", "loading", "stale", "fast", "allow_busy"], (1, -1, 1), &["fast", "transaction"], Transactions, "2.2.0"),
    s("xack", -4, &["write", "fast"], (1, 1, 1), &["write", "stream", "fast"], Stream, "5.0.0"),
    s("xadd", -5, &["write", "denyoom", "fast"], (1, 1, 1), &["write", "stream", "fast"], Stream, "5.0.0"),
    s("xautoclaim", -6, &["write", "fast"], (1, 1, 1), &["write", "stream", "fast"], Stream, "6.2.0"),
    s("xclaim", -6, &["write", "fast"], (1, 1, 1), &["write", "stream", "fast"], Stream, "5.0.0"),
    s("xdel", -3, &["write", "fast"], (1, 1, 1), &["write", "stream", "fast"], Stream, "5.0.0"),
    s("xgroup", -2, &[], (0, 0, 0), &["slow"], Stream, "5.0.0") .with_subcommands(XGROUP_SUBCOMMANDS),
    s("xinfo", -2, &[], (0, 0, 0), &["slow"], Stream, "5.0.0").with_subcommands(XINFO_SUBCOMMANDS),
    s("xlen", 2, &["readonly", "fast"], (1, 1, 1), &["read", "stream", "fast"], Stream, "5.0.0"),
    s("xpending", -3, &["readonly"], (1, 1, 1), &["read", "stream", "slow"], Stream, "5.0.0"),
    s("xrange", -4, &["readonly"], (1, 1, 1), &["read", "stream", "slow"], Stream, "5.0.0"),
    s("xread", -4, &["readonly", "blocking", "movablekeys"], (0, 0, 0), &["read", "stream", "slow", "blocking"], Stream, "5.0.0"),
    s("xreadgroup", -7, &["write", "blocking", "movablekeys"], (0, 0, 0), &["write", "stream", "slow", "blocking"], Stream, "5.0.0"),
    s("xrevrange", -4, &["readonly"], (1, 1, 1), &["read", "stream", "slow"], Stream, "5.0.0"),
    s("xsetid", -3, &["write", "denyoom", "fast"], (1, 1, 1), &["write", "stream", "fast"], Stream, "5.0.0"),
    s("xtrim", -4, &["write"], (1, 1, 1), &["write", "stream", "slow"], Stream, "5.0.0"),
    s("zadd", -4, &["write", "denyoom", "fast"], (1, 1, 1), &["write", "sortedset", "fast"], SortedSet, "1.2.0"),
    s("zcard", 2, &["readonly", "fast"], (1, 1, 1), &["read", "sortedset", "fast"], SortedSet, "1.2.0"),
    s("zcount", 4, &["readonly", "fast"], (1, 1, 1), &["read", "sortedset", "fast"], SortedSet, "2.0.0"),
    s("zdiff", -3, &["readonly", "movablekeys"], (0, 0, 0), &["read", "sortedset", "slow"], SortedSet, "6.2.0"),
    s("zdiffstore", -4, &["write", "denyoom", "movablekeys"], (1, 1, 1), &["write", "sortedset", "slow"], SortedSet, "6.2.0"),
    s("zincrby", 4, &["write", "denyoom", "fast"], (1, 1, 1), &["write", "sortedset", "fast"], SortedSet, "1.2.0"),
    s("zinter", -3, &["readonly", "movablekeys"], (0, 0, 0), &["read", "sortedset", "slow"], SortedSet, "6.2.0"),
    s("zintercard", -3, &["readonly", "movablekeys"], (0, 0, 0), &["read", "sortedset", "slow"], SortedSet, "7.0.0"),
    s("zinterstore", -4, &["write", "denyoom", "movablekeys"], (1, 1, 1), &["write", "sortedset", "slow"], SortedSet, "2.0.0"),
    s("zlexcount", 4, &["readonly", "fast"], (1, 1, 1), &["read", "sortedset", "fast"], SortedSet, "2.8.9"),
    s("zmpop", -4, &["write", "movablekeys"], (0, 0, 0), &["write", "sortedset", "slow"], SortedSet, "7.0.0"),
    s("zmscore", -3, &["readonly", "fast"], (1, 1, 1), &["read", "sortedset", "fast"], SortedSet, "6.2.0"),
    s("zpopmax", -2, &["write", "fast"], (1, 1, 1), &["write", "sortedset", "fast"], SortedSet, "5.0.0"),
    s("zpopmin", -2, &["write", "fast"], (1, 1, 1), &["write", "sortedset", "fast"], SortedSet, "5.0.0"),
    s("zrandmember", -2, &["readonly"], (1, 1, 1), &["read", "sortedset", "slow"], SortedSet, "6.2.0"),
    s("zrange", -4, &["readonly"], (1, 1, 1), &["read", "sortedset", "slow"], SortedSet, "1.2.0"),
    s("zrangebylex", -4, &["readonly"], (1, 1, 1), &["read", "sortedset", "slow"], SortedSet, "2.8.9"),
    s("zrangebyscore", -4, &["readonly"], (1, 1, 1), &["read", "sortedset", "slow"], SortedSet, "1.0.5"),
    s("zrangestore", -5, &["write", "denyoom"], (1, 2, 1), &["write", "sortedset", "slow"], SortedSet, "6.2.0"),
    s("zrank", 3, &["readonly", "fast"], (1, 1, 1), &["read", "sortedset", "fast"], SortedSet, "2.0.0"),
    s("zrem", -3, &["write", "fast"], (1, 1, 1), &["write", "sortedset", "fast"], SortedSet, "1.2.0"),
    s("zremrangebylex", 4, &["write"], (1, 1, 1), &["write", "sortedset", "slow"], SortedSet, "2.8.9"),
    s("zremrangebyrank", 4, &["write"], (1, 1, 1), &["write", "sortedset", "slow"], SortedSet, "2.0.0"),
    s("zremrangebyscore", 4, &["write"], (1, 1, 1), &["write", "sortedset", "slow"], SortedSet, "1.2.0"),
    s("zrevrange", -4, &["readonly"], (1, 1, 1), &["read", "sortedset", "slow"], SortedSet, "1.2.0"),
    s("zrevrangebylex", -4, &["readonly"], (1, 1, 1), &["read", "sortedset", "slow"], SortedSet, "2.8.9"),
    s("zrevrangebyscore", -4, &["readonly"], (1, 1, 1), &["read", "sortedset", "slow"], SortedSet, "2.2.0"),
    s("zrevrank", 3, &["readonly", "fast"], (1, 1, 1), &["read", "sortedset", "fast"], SortedSet, "2.0.0"),
    s("zscan", -3, &["readonly"], (1, 1, 1), &["read", "sortedset", "slow"], SortedSet, "2.8.0"),
    s("zscore", 3, &["readonly", "fast"], (1, 1, 1), &["read", "sortedset", "fast"], SortedSet, "1.2.0"),
    s("zunion", -3, &["readonly", "movablekeys"], (0, 0, 0), &["read", "sortedset", "slow"], SortedSet, "6.2.0"),
    s("zunionstore", -4, &["write", "denyoom", "movablekeys"], (1, 1, 1), &["write", "sortedset", "slow"], SortedSet, "2.0.0"),
    // xlane's own: membership of the Raft group (RedisRaft's names).
    s("raft.node", -2, &["admin"], (0, 0, 0), &["admin", "slow", "dangerous"], Cluster, "xlane"),
    s("raft.nodes", 1, &["admin", "loading", "stale"], (0, 0, 0), &["admin", "slow", "dangerous"], Cluster, "xlane"),
    s("raft.transfer_leader", 2, &["admin"], (0, 0, 0), &["admin", "slow", "dangerous"], Cluster, "xlane"),
];

#[rustfmt::skip]
const ACL_SUBCOMMANDS: &[CommandSpec] = &[
    s("acl|cat", -2, &["noscript", "loading", "stale"], (0, 0, 0), &["slow"], Server, "6.0.0"),
    s("acl|deluser", -3, &["admin", "noscript", "loading", "stale"], (0, 0, 0), &["admin", "slow", "dangerous"], Server, "6.0.0"),
    s("acl|dryrun", -4, &["admin", "noscript", "loading", "stale"], (0, 0, 0), &["admin", "slow", "dangerous"], Server, "6.0.0"),
    s("acl|genpass", -2, &["noscript", "loading", "stale"], (0, 0, 0), &["slow"], Server, "6.0.0"),
    s("acl|getuser", 3, &["admin", "noscript", "loading", "stale"], (0, 0, 0), &["admin", "slow", "dangerous"], Server, "6.0.0"),
    s("acl|help", 2, &["loading", "stale"], (0, 0, 0), &["slow"], Server, "6.0.0"),
    s("acl|list", 2, &["admin", "noscript", "loading", "stale"], (0, 0, 0), &["admin", "slow", "dangerous"], Server, "6.0.0"),
    s("acl|load", 2, &["admin", "noscript", "loading", "stale"], (0, 0, 0), &["admin", "slow", "dangerous"], Server, "6.0.0"),
    s("acl|log", -2, &["admin", "noscript", "loading", "stale"], (0, 0, 0), &["admin", "slow", "dangerous"], Server, "6.0.0"),
    s("acl|save", 2, &["admin", "noscript", "loading", "stale"], (0, 0, 0), &["admin", "slow", "dangerous"], Server, "6.0.0"),
    s("acl|setuser", -3, &["admin", "noscript", "loading", "stale"], (0, 0, 0), &["admin", "slow", "dangerous"], Server, "6.0.0"),
    s("acl|users", 2, &["admin", "noscript", "loading", "stale"], (0, 0, 0), &["admin", "slow", "dangerous"], Server, "6.0.0"),
    s("acl|whoami", 2, &["noscript", "loading", "stale"], (0, 0, 0), &["slow"], Server, "6.0.0"),
];

#[rustfmt::skip]
const CLIENT_SUBCOMMANDS: &[CommandSpec] = &[
    s("client|caching", 3, &["noscript", "loading", "stale"], (0, 0, 0), &["slow", "connection"], Connection, "2.4.0"),
    s("client|getname", 2, &["noscript", "loading", "stale"], (0, 0, 0), &["slow", "connection"], Connection, "2.4.0"),
    s("client|getredir", 2, &["noscript", "loading", "stale"], (0, 0, 0), &["slow", "connection"], Connection, "2.4.0"),
    s("client|help", 2, &["loading", "stale"], (0, 0, 0), &["slow", "connection"], Connection, "2.4.0"),
    s("client|id", 2, &["noscript", "loading", "stale"], (0, 0, 0), &["slow", "connection"], Connection, "2.4.0"),
    s("client|info", 2, &["noscript", "loading", "stale"], (0, 0, 0), &["slow", "connection"], Connection, "2.4.0"),
    s("client|kill", -3, &["admin", "noscript", "loading", "stale"], (0, 0, 0), &["admin", "slow", "dangerous", "connection"], Connection, "2.4.0"),
    s("client|list", -2, &["admin", "noscript", "loading", "stale"], (0, 0, 0), &["admin", "slow", "dangerous", "connection"], Connection, "2.4.0"),
    s("client|no-evict", 3, &["admin", "noscript", "loading", "stale"], (0, 0, 0), &["admin", "slow", "dangerous", "connection"], Connection, "2.4.0"),
    s("client|pause", -3, &["admin", "noscript", "loading", "stale"], (0, 0, 0), &["admin", "slow", "dangerous", "connection"], Connection, "2.4.0"),
    s("client|reply", 3, &["noscript", "loading", "stale"], (0, 0, 0), &["slow", "connection"], Connection, "2.4.0"),
    s("client|setname", 3, &["noscript", "loading", "stale"], (0, 0, 0), &["slow", "connection"], Connection, "2.4.0"),
    s("client|tracking", -3, &["noscript", "loading", "stale"], (0, 0, 0), &["slow", "connection"], Connection, "2.4.0"),
    s("client|trackinginfo", 2, &["noscript", "loading", "stale"], (0, 0, 0), &["slow", "connection"], Connection, "2.4.0"),
    s("client|unblock", -3, &["admin", "noscript", "loading", "stale"], (0, 0, 0), &["admin", "slow", "dangerous", "connection"], Connection, "2.4.0"),
    s("client|unpause", 2, &["admin", "noscript", "loading", "stale"], (0, 0, 0), &["admin", "slow", "dangerous", "connection"], Connection, "2.4.0"),
];

#[rustfmt::skip]
const CLUSTER_SUBCOMMANDS: &[CommandSpec] = &[
    s("cluster|addslots", -3, &["admin", "stale", "no_async_loading"], (0, 0, 0), &["admin", "slow", "dangerous"], Cluster, "3.0.0"),
    s("cluster|addslotsrange", -4, &["admin", "stale", "no_async_loading"], (0, 0, 0), &["admin", "slow", "dangerous"], Cluster, "3.0.0"),
    s("cluster|bumpepoch", 2, &["admin", "stale", "no_async_loading"], (0, 0, 0), &["admin", "slow", "dangerous"], Cluster, "3.0.0"),
    s("cluster|count-failure-reports", 3, &["admin", "stale"], (0, 0, 0), &["admin", "slow", "dangerous"], Cluster, "3.0.0"),
    s("cluster|countkeysinslot", 3, &["stale"], (0, 0, 0), &["slow"], Cluster, "3.0.0"),
    s("cluster|delslots", -3, &["admin", "stale", "no_async_loading"], (0, 0, 0), &["admin", "slow", "dangerous"], Cluster, "3.0.0"),
    s("cluster|delslotsrange", -4, &["admin", "stale", "no_async_loading"], (0, 0, 0), &["admin", "slow", "dangerous"], Cluster, "3.0.0"),
    s("cluster|failover", -2, &["admin", "stale", "no_async_loading"], (0, 0, 0), &["admin", "slow", "dangerous"], Cluster, "3.0.0"),
    s("cluster|flushslots", 2, &["admin", "stale", "no_async_loading"], (0, 0, 0), &["admin", "slow", "dangerous"], Cluster, "3.0.0"),
    s("cluster|forget", 3, &["admin", "stale", "no_async_loading"], (0, 0, 0), &["admin", "slow", "dangerous"], Cluster, "3.0.0"),
    s("cluster|getkeysinslot", 4, &["stale"], (0, 0, 0), &["slow"], Cluster, "3.0.0"),
    s("cluster|help", 2, &["loading", "stale"], (0, 0, 0), &["slow"], Cluster, "3.0.0"),
    s("cluster|info", 2, &["stale"], (0, 0, 0), &["slow"], Cluster, "3.0.0"),
    s("cluster|keyslot", 3, &["stale"], (0, 0, 0), &["slow"], Cluster, "3.0.0"),
    s("cluster|links", 2, &["stale"], (0, 0, 0), &["slow"], Cluster, "3.0.0"),
    s("cluster|meet", -4, &["admin", "stale", "no_async_loading"], (0, 0, 0), &["admin", "slow", "dangerous"], Cluster, "3.0.0"),
    s("cluster|myid", 2, &["stale"], (0, 0, 0), &["slow"], Cluster, "3.0.0"),
    s("cluster|nodes", 2, &["stale"], (0, 0, 0), &["slow"], Cluster, "3.0.0"),
    s("cluster|replicas", 3, &["admin", "stale"], (0, 0, 0), &["admin", "slow", "dangerous"], Cluster, "3.0.0"),
    s("cluster|replicate", 3, &["admin", "stale", "no_async_loading"], (0, 0, 0), &["admin", "slow", "dangerous"], Cluster, "3.0.0"),
    s("cluster|reset", -2, &["admin", "noscript", "stale"], (0, 0, 0), &["admin", "slow", "dangerous"], Cluster, "3.0.0"),
    s("cluster|saveconfig", 2, &["admin", "stale", "no_async_loading"], (0, 0, 0), &["admin", "slow", "dangerous"], Cluster, "3.0.0"),
    s("cluster|set-config-epoch", 3, &["admin", "stale", "no_async_loading"], (0, 0, 0), &["admin", "slow", "dangerous"], Cluster, "3.0.0"),
    s("cluster|setslot", -4, &["admin", "stale", "no_async_loading"], (0, 0, 0), &["admin", "slow", "dangerous"], Cluster, "3.0.0"),
    s("cluster|shards", 2, &["stale"], (0, 0, 0), &["slow"], Cluster, "3.0.0"),
    s("cluster|slaves", 3, &["admin", "stale"], (0, 0, 0), &["admin", "slow", "dangerous"], Cluster, "3.0.0"),
    s("cluster|slots", 2, &["stale"], (0, 0, 0), &["slow"], Cluster, "3.0.0"),
];

#[rustfmt::skip]
const COMMAND_SUBCOMMANDS: &[CommandSpec] = &[
    s("command|count", 2, &["loading", "stale"], (0, 0, 0), &["slow", "connection"], Server, "2.8.13"),
    s("command|docs", -2, &["loading", "stale"], (0, 0, 0), &["slow", "connection"], Server, "2.8.13"),
    s("command|getkeys", -4, &["loading", "stale"], (0, 0, 0), &["slow", "connection"], Server, "2.8.13"),
    s("command|getkeysandflags", -4, &["loading", "stale"], (0, 0, 0), &["slow", "connection"], Server, "2.8.13"),
    s("command|help", 2, &["loading", "stale"], (0, 0, 0), &["slow", "connection"], Server, "2.8.13"),
    s("command|info", -2, &["loading", "stale"], (0, 0, 0), &["slow", "connection"], Server, "2.8.13"),
    s("command|list", -2, &["loading", "stale"], (0, 0, 0), &["slow", "connection"], Server, "2.8.13"),
];

#[rustfmt::skip]
const CONFIG_SUBCOMMANDS: &[CommandSpec] = &[
    s("config|get", -3, &["admin", "noscript", "loading", "stale"], (0, 0, 0), &["admin", "slow", "dangerous"], Server, "2.0.0"),
    s("config|help", 2, &["loading", "stale"], (0, 0, 0), &["slow"], Server, "2.0.0"),
    s("config|resetstat", 2, &["admin", "noscript", "loading", "stale"], (0, 0, 0), &["admin", "slow", "dangerous"], Server, "2.0.0"),
    s("config|rewrite", 2, &["admin", "noscript", "loading", "stale"], (0, 0, 0), &["admin", "slow", "dangerous"], Server, "2.0.0"),
    s("config|set", -4, &["admin", "noscript", "loading", "stale"], (0, 0, 0), &["admin", "slow", "dangerous"], Server, "2.0.0"),
];

#[rustfmt::skip]
const FUNCTION_SUBCOMMANDS: &[CommandSpec] = &[
    s("function|delete", 3, &["write", "noscript"], (0, 0, 0), &["write", "slow", "scripting"], Scripting, "7.0.0"),
    s("function|dump", 2, &["noscript"], (0, 0, 0), &["slow", "scripting"], Scripting, "7.0.0"),
    s("function|flush", -2, &["write", "noscript"], (0, 0, 0), &["write", "slow", "scripting"], Scripting, "7.0.0"),
    s("function|help", 2, &["loading", "stale"], (0, 0, 0), &["slow", "scripting"], Scripting, "7.0.0"),
    s("function|kill", 2, &["noscript", "allow_busy"], (0, 0, 0), &["slow", "scripting"], Scripting, "7.0.0"),
    s("function|list", -2, &["noscript"], (0, 0, 0), &["slow", "scripting"], Scripting, "7.0.0"),
    s("function|load", -3, &["write", "denyoom", "noscript"], (0, 0, 0), &["write", "slow", "scripting"], Scripting, "7.0.0"),
    s("function|restore", -3, &["write", "denyoom", "noscript"], (0, 0, 0), &["write", "slow", "scripting"], Scripting, "7.0.0"),
    s("function|stats", 2, &["noscript", "allow_busy"], (0, 0, 0), &["slow", "scripting"], Scripting, "7.0.0"),
];

#[rustfmt::skip]
const LATENCY_SUBCOMMANDS: &[CommandSpec] = &[
    s("latency|doctor", 2, &["admin", "noscript", "loading", "stale"], (0, 0, 0), &["admin", "slow", "dangerous"], Server, "2.8.13"),
    s("latency|graph", 3, &["admin", "noscript", "loading", "stale"], (0, 0, 0), &["admin", "slow", "dangerous"], Server, "2.8.13"),
    s("latency|help", 2, &["loading", "stale"], (0, 0, 0), &["slow"], Server, "2.8.13"),
    s("latency|histogram", -2, &["admin", "noscript", "loading", "stale"], (0, 0, 0), &["admin", "slow", "dangerous"], Server, "2.8.13"),
    s("latency|history", 3, &["admin", "noscript", "loading", "stale"], (0, 0, 0), &["admin", "slow", "dangerous"], Server, "2.8.13"),
    s("latency|latest", 2, &["admin", "noscript", "loading", "stale"], (0, 0, 0), &["admin", "slow", "dangerous"], Server, "2.8.13"),
    s("latency|reset", -2, &["admin", "noscript", "loading", "stale"], (0, 0, 0), &["admin", "slow", "dangerous"], Server, "2.8.13"),
];

#[rustfmt::skip]
const MEMORY_SUBCOMMANDS: &[CommandSpec] = &[
    s("memory|doctor", 2, &[], (0, 0, 0), &["slow"], Server, "4.0.0"),
    s("memory|help", 2, &["loading", "stale"], (0, 0, 0), &["slow"], Server, "4.0.0"),
    s("memory|malloc-stats", 2, &[], (0, 0, 0), &["slow"], Server, "4.0.0"),
    s("memory|purge", 2, &[], (0, 0, 0), &["slow"], Server, "4.0.0"),
    s("memory|stats", 2, &[], (0, 0, 0), &["slow"], Server, "4.0.0"),
    s("memory|usage", -3, &["readonly"], (2, 2, 1), &["read", "slow"], Server, "4.0.0"),
];

#[rustfmt::skip]
const MODULE_SUBCOMMANDS: &[CommandSpec] = &[
    s("module|help", 2, &["loading", "stale"], (0, 0, 0), &["slow"], Server, "4.0.0"),
    s("module|list", 2, &["admin", "noscript"], (0, 0, 0), &["admin", "slow", "dangerous"], Server, "4.0.0"),
    s("module|load", -3, &["admin", "noscript", "no_async_loading"], (0, 0, 0), &["admin", "slow", "dangerous"], Server, "4.0.0"),
    s("module|loadex", -3, &["admin", "noscript", "no_async_loading"], (0, 0, 0), &["admin", "slow", "dangerous"], Server, "4.0.0"),
    s("module|unload", 3, &["admin", "noscript", "no_async_loading"], (0, 0, 0), &["admin", "slow", "dangerous"], Server, "4.0.0"),
];

#[rustfmt::skip]
const OBJECT_SUBCOMMANDS: &[CommandSpec] = &[
    s("object|encoding", 3, &["readonly"], (2, 2, 1), &["keyspace", "read", "slow"], Generic, "2.2.3"),
    s("object|freq", 3, &["readonly"], (2, 2, 1), &["keyspace", "read", "slow"], Generic, "2.2.3"),
    s("object|help", 2, &["loading", "stale"], (0, 0, 0), &["keyspace", "slow"], Generic, "2.2.3"),
    s("object|idletime", 3, &["readonly"], (2, 2, 1), &["keyspace", "read", "slow"], Generic, "2.2.3"),
    s("object|refcount", 3, &["readonly"], (2, 2, 1), &["keyspace", "read", "slow"], Generic, "2.2.3"),
];

#[rustfmt::skip]
const PUBSUB_SUBCOMMANDS: &[CommandSpec] = &[
    s("pubsub|channels", -2, &["pubsub", "loading", "stale"], (0, 0, 0), &["pubsub", "slow"], PubSub, "2.8.0"),
    s("pubsub|help", 2, &["loading", "stale"], (0, 0, 0), &["slow"], PubSub, "2.8.0"),
    s("pubsub|numpat", 2, &["pubsub", "loading", "stale"], (0, 0, 0), &["pubsub", "slow"], PubSub, "2.8.0"),
    s("pubsub|numsub", -2, &["pubsub", "loading", "stale"], (0, 0, 0), &["pubsub", "slow"], PubSub, "2.8.0"),
    s("pubsub|shardchannels", -2, &["pubsub", "loading", "stale"], (0, 0, 0), &["pubsub", "slow"], PubSub, "2.8.0"),
    s("pubsub|shardnumsub", -2, &["pubsub", "loading", "stale"], (0, 0, 0), &["pubsub", "slow"], PubSub, "2.8.0"),
];

#[rustfmt::skip]
const SCRIPT_SUBCOMMANDS: &[CommandSpec] = &[
    s("script|debug", 3, &["noscript"], (0, 0, 0), &["slow", "scripting"], Scripting, "2.6.0"),
    s("script|exists", -3, &["noscript"], (0, 0, 0), &["slow", "scripting"], Scripting, "2.6.0"),
    s("script|flush", -2, &["noscript"], (0, 0, 0), &["slow", "scripting"], Scripting, "2.6.0"),
    s("script|help", 2, &["loading", "stale"], (0, 0, 0), &["slow", "scripting"], Scripting, "2.6.0"),
    s("script|kill", 2, &["noscript", "allow_busy"], (0, 0, 0), &["slow", "scripting"], Scripting, "2.6.0"),
    s("script|load", 3, &["noscript", "stale"], (0, 0, 0), &["slow", "scripting"], Scripting, "2.6.0"),
];

#[rustfmt::skip]
const SLOWLOG_SUBCOMMANDS: &[CommandSpec] = &[
    s("slowlog|get", -2, &["admin", "loading", "stale"], (0, 0, 0), &["admin", "slow", "dangerous"], Server, "2.2.12"),
    s("slowlog|help", 2, &["loading", "stale"], (0, 0, 0), &["slow"], Server, "2.2.12"),
    s("slowlog|len", 2, &["admin", "loading", "stale"], (0, 0, 0), &["admin", "slow", "dangerous"], Server, "2.2.12"),
    s("slowlog|reset", 2, &["admin", "loading", "stale"], (0, 0, 0), &["admin", "slow", "dangerous"], Server, "2.2.12"),
];

#[rustfmt::skip]
const XGROUP_SUBCOMMANDS: &[CommandSpec] = &[
    s("xgroup|create", -5, &["write", "denyoom"], (2, 2, 1), &["write", "stream", "slow"], Stream, "5.0.0"),
    s("xgroup|createconsumer", 5, &["write", "denyoom"], (2, 2, 1), &["write", "stream", "slow"], Stream, "5.0.0"),
    s("xgroup|delconsumer", 5, &["write"], (2, 2, 1), &["write", "stream", "slow"], Stream, "5.0.0"),
    s("xgroup|destroy", 4, &["write"], (2, 2, 1), &["write", "stream", "slow"], Stream, "5.0.0"),
    s("xgroup|help", 2, &["loading", "stale"], (0, 0, 0), &["stream", "slow"], Stream, "5.0.0"),
    s("xgroup|setid", -5, &["write"], (2, 2, 1), &["write", "stream", "slow"], Stream, "5.0.0"),
];

#[rustfmt::skip]
const XINFO_SUBCOMMANDS: &[CommandSpec] = &[
    s("xinfo|consumers", 4, &["readonly"], (2, 2, 1), &["read", "stream", "slow"], Stream, "5.0.0"),
    s("xinfo|groups", 3, &["readonly"], (2, 2, 1), &["read", "stream", "slow"], Stream, "5.0.0"),
    s("xinfo|help", 2, &["loading", "stale"], (0, 0, 0), &["stream", "slow"], Stream, "5.0.0"),
    s("xinfo|stream", -3, &["readonly"], (2, 2, 1), &["read", "stream", "slow"], Stream, "5.0.0"),
];

/// A command name of at most 23 bytes, in any case, as a fixed-size key:
/// its first 16 bytes lower-cased, then the next 7 and its length. `None`
/// for a longer name (no command has one). The table is looked up several
/// times per request: two integers hash and compare faster than a copied
/// byte string.
pub fn name_key(name: &[u8]) -> Option<(u128, u64)> {
    if name.len() > 23 {
        return None;
    }
    // Lower-cased as a whole block (command names are ASCII; any other
    // byte is left as it is and simply matches no name).
    let mut b = [0u8; 24];
    b[..name.len()].copy_from_slice(name);
    b.make_ascii_lowercase();
    let (head, tail) = b.split_at(16);
    let head = u128::from_le_bytes(head.try_into().ok()?);
    let tail = u64::from_le_bytes(tail.try_into().ok()?) | (name.len() as u64) << 56;
    Some((head, tail))
}

/// The spec of command `name` (any case): one hash lookup.
pub fn spec(name: &[u8]) -> Option<&'static CommandSpec> {
    type Index = fxhash::FxHashMap<(u128, u64), &'static CommandSpec>;
    static INDEX: std::sync::OnceLock<Index> = std::sync::OnceLock::new();
    let index = INDEX.get_or_init(|| {
        TABLE
            .iter()
            .filter_map(|c| Some((name_key(c.name.as_bytes())?, c)))
            .collect()
    });
    index.get(&name_key(name)?).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_is_found_once_and_fits_a_key() {
        for c in TABLE {
            assert!(name_key(c.name.as_bytes()).is_some(), "{}", c.name);
            assert!(std::ptr::eq(
                spec(c.name.to_uppercase().as_bytes()).unwrap(),
                c
            ));
            for sub in c.subcommands {
                assert!(
                    sub.name.starts_with(&format!("{}|", c.name)),
                    "{}",
                    sub.name
                );
            }
        }
        assert!(spec(b"nosuch").is_none());
        let config = spec(b"config").unwrap();
        assert_eq!(config.subcommand(b"GET").unwrap().name, "config|get");
        assert!(config.subcommand(b"nope").is_none());
        // Names differing past a byte, by a trailing NUL or by length are
        // different keys.
        for (a, b) in [
            (&b"get"[..], &b"get\0"[..]),
            (b"get", b"ge"),
            (b"zrevrangebyscore", b"zrevrangebyscorE\0"),
            (b"raft.transfer_leader", b"raft.transfer_leadeR"),
        ] {
            let (ka, kb) = (name_key(a), name_key(b));
            assert_eq!(ka == kb, a.eq_ignore_ascii_case(b), "{a:?} {b:?}");
        }
        assert_eq!(name_key(&[b'a'; 24]), None);
    }
}
