//! From a request to an [`Action`]: a write ([`WriteOp`], to replicate), a
//! read ([`ReadCmd`], answered from the store after a read barrier), a
//! membership request ([`MemberCmd`], for a cluster member), or a reply that
//! needs no store (PING, COMMAND, errors, ...).
//!
//! Argument checking happens here, at the node the client talks to, so
//! only well-formed ops are replicated. Error texts are Redis 7's.

use crate::members::{parse_addrs, parse_id, Peer};
use crate::op::{SetCond, SetTtl, WriteCmd, WriteOp};
use crate::pubsub::{glob_match, NotifyFlags};
use crate::resp::{parse_i64_strict, Command, Reply};
use crate::store::{Store, ERR_NOT_INTEGER};
use crate::value::{wrongtype, Value};

/// `ERR syntax error`.
pub const ERR_SYNTAX: &str = "ERR syntax error";

/// The reply to a transaction command where no connection keeps its state
/// ([`execute_local`]).
pub const ERR_TXN_CONN: &str = "ERR transactions are served on a connection";

/// What to do with a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Answer at once; the store is not involved.
    Reply(Reply),
    /// Replicate and apply; the reply comes from [`Store::apply`].
    Write(WriteOp),
    /// Answer from the store (after a read barrier when
    /// [`ReadCmd::needs_barrier`]).
    Read(ReadCmd),
    /// `QUIT`: reply `+OK` and close the connection.
    Quit,
    /// A membership request (answered by a cluster member).
    Member(MemberCmd),
    /// A pub/sub command, answered by the member's subscription registry
    /// ([`crate::pubsub::Registry`]).
    PubSub(PubSubCmd),
    /// A command on this member's own settings (not replicated).
    Setting(SettingCmd),
}

/// A request about the cluster's members (the commands RedisRaft users
/// know).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MemberCmd {
    /// `RAFT.NODE ADD <id> <raft-ip:port>/<client-ip:port>`: add a voter.
    Add {
        /// The new member's raft id.
        id: u64,
        /// Its addresses.
        peer: Peer,
    },
    /// `RAFT.NODE REMOVE <id>`: remove a member.
    Remove {
        /// The member's raft id.
        id: u64,
    },
    /// `RAFT.NODES`: every member and its addresses.
    List,
    /// `RAFT.TRANSFER_LEADER <id>`: the leader hands leadership to member
    /// `id` (for maintenance: restart the leader last).
    Transfer {
        /// The member to lead.
        id: u64,
    },
    /// `CLUSTER SLOTS/SHARDS/NODES/INFO/MYID`: the group as one Redis
    /// Cluster shard ([`crate::cluster`]).
    Cluster(crate::cluster::ClusterCmd),
}

/// The reply to a membership request outside a cluster.
pub const ERR_NOT_CLUSTER: &str =
    "ERR this server is not a cluster member (start it with --id and --peer)";

/// A pub/sub command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PubSubCmd {
    /// `SUBSCRIBE channel [channel ...]`.
    Subscribe(Vec<Vec<u8>>),
    /// `PSUBSCRIBE pattern [pattern ...]`.
    PSubscribe(Vec<Vec<u8>>),
    /// `UNSUBSCRIBE [channel ...]` (none: all).
    Unsubscribe(Vec<Vec<u8>>),
    /// `PUNSUBSCRIBE [pattern ...]` (none: all).
    PUnsubscribe(Vec<Vec<u8>>),
    /// `PUBLISH channel message`: to this member's subscribers only.
    Publish {
        /// The channel.
        channel: Vec<u8>,
        /// The message.
        message: Vec<u8>,
    },
}

/// A command on the member's own settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SettingCmd {
    /// `CONFIG GET pattern [pattern ...]` (glob patterns, any case).
    ConfigGet(Vec<Vec<u8>>),
    /// `CONFIG SET notify-keyspace-events <flags>`.
    SetNotify(NotifyFlags),
}

/// The reply of a pub/sub command or `CONFIG SET notify-keyspace-events`
/// where no member serves them (the single-node server).
pub const ERR_NEEDS_MEMBER: &str =
    "ERR pub/sub and keyspace notifications are served by cluster members only \
     (xlane kv serve --id N --peer ...)";

/// A read-only command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadCmd {
    /// `GET key`.
    Get(Vec<u8>),
    /// `MGET key [key ...]`.
    MGet(Vec<Vec<u8>>),
    /// `EXISTS key [key ...]` (a key named twice counts twice).
    Exists(Vec<Vec<u8>>),
    /// `STRLEN key`.
    StrLen(Vec<u8>),
    /// `TTL key` (seconds) or `PTTL key` (`millis`).
    Ttl {
        /// The key.
        key: Vec<u8>,
        /// PTTL.
        millis: bool,
    },
    /// `DBSIZE`.
    DbSize,
    /// `INFO [section ...]`: the sections named (lower case; none,
    /// `default`, `all` or `everything`: every section).
    Info(Vec<Vec<u8>>),
    /// A read on a hash, list, set or sorted set, or a keyspace read
    /// (`TYPE`, `SCAN`, ...): its words, checked by
    /// [`crate::types::check`], answered by [`crate::types::read`].
    Data {
        /// The command words.
        args: Vec<Vec<u8>>,
        /// Seed of its random picks (`SRANDMEMBER`, `RANDOMKEY`).
        seed: u64,
    },
}

/// Static description of a command, as `COMMAND INFO` reports it.
#[derive(Debug, Clone, Copy)]
pub struct CommandSpec {
    /// Lower-case name.
    pub name: &'static str,
    /// Redis arity: `n` exactly n words (name included), `-n` at least n.
    pub arity: i64,
    /// Flags (`write`, `readonly`, `fast`, ...).
    pub flags: &'static [&'static str],
    /// First key position (0: none).
    pub first_key: i64,
    /// Last key position (-1: the last argument).
    pub last_key: i64,
    /// Step between keys.
    pub step: i64,
}

pub(crate) const W: &[&str] = &["write", "denyoom"];
pub(crate) const WF: &[&str] = &["write", "denyoom", "fast"];
pub(crate) const R: &[&str] = &["readonly", "fast"];
const A: &[&str] = &["fast"];
const PS: &[&str] = &["pubsub", "noscript", "loading", "stale"];

pub(crate) const fn spec(
    name: &'static str,
    arity: i64,
    flags: &'static [&'static str],
    first_key: i64,
    last_key: i64,
    step: i64,
) -> CommandSpec {
    CommandSpec {
        name,
        arity,
        flags,
        first_key,
        last_key,
        step,
    }
}

/// Every command this server knows.
pub const COMMANDS: &[CommandSpec] = &[
    spec("get", 2, R, 1, 1, 1),
    spec("set", -3, W, 1, 1, 1),
    spec("del", -2, &["write"], 1, -1, 1),
    spec("unlink", -2, &["write", "fast"], 1, -1, 1),
    spec("time", 1, &["loading", "stale", "fast"], 0, 0, 0),
    spec("exists", -2, R, 1, -1, 1),
    spec("incr", 2, WF, 1, 1, 1),
    spec("decr", 2, WF, 1, 1, 1),
    spec("incrby", 3, WF, 1, 1, 1),
    spec("decrby", 3, WF, 1, 1, 1),
    spec("mget", -2, R, 1, -1, 1),
    spec("mset", -3, W, 1, -1, 2),
    spec("append", 3, WF, 1, 1, 1),
    spec("strlen", 2, R, 1, 1, 1),
    spec("expire", -3, &["write", "fast"], 1, 1, 1),
    spec("pexpire", -3, &["write", "fast"], 1, 1, 1),
    spec("expireat", -3, &["write", "fast"], 1, 1, 1),
    spec("pexpireat", -3, &["write", "fast"], 1, 1, 1),
    spec("persist", 2, &["write", "fast"], 1, 1, 1),
    spec("ttl", 2, R, 1, 1, 1),
    spec("pttl", 2, R, 1, 1, 1),
    spec("ping", -1, A, 0, 0, 0),
    spec("echo", 2, A, 0, 0, 0),
    spec("info", -1, &["loading", "stale"], 0, 0, 0),
    spec("dbsize", 1, R, 0, 0, 0),
    spec("flushdb", -1, &["write"], 0, 0, 0),
    spec("flushall", -1, &["write"], 0, 0, 0),
    spec("command", -1, &["loading", "stale"], 0, 0, 0),
    spec(
        "config",
        -2,
        &["admin", "noscript", "loading", "stale"],
        0,
        0,
        0,
    ),
    spec("select", 2, &["loading", "stale", "fast"], 0, 0, 0),
    spec(
        "hello",
        -1,
        &["noscript", "loading", "stale", "fast"],
        0,
        0,
        0,
    ),
    spec("client", -2, &["noscript", "loading", "stale"], 0, 0, 0),
    spec(
        "multi",
        1,
        &["noscript", "loading", "stale", "fast"],
        0,
        0,
        0,
    ),
    spec("exec", 1, &["noscript", "loading", "stale"], 0, 0, 0),
    spec(
        "discard",
        1,
        &["noscript", "loading", "stale", "fast"],
        0,
        0,
        0,
    ),
    spec(
        "watch",
        -2,
        &["noscript", "loading", "stale", "fast"],
        1,
        -1,
        1,
    ),
    spec(
        "unwatch",
        1,
        &["noscript", "loading", "stale", "fast"],
        0,
        0,
        0,
    ),
    spec("subscribe", -2, PS, 0, 0, 0),
    spec("psubscribe", -2, PS, 0, 0, 0),
    spec("unsubscribe", -1, PS, 0, 0, 0),
    spec("punsubscribe", -1, PS, 0, 0, 0),
    spec(
        "publish",
        3,
        &["pubsub", "loading", "stale", "fast"],
        0,
        0,
        0,
    ),
    spec(
        "quit",
        -1,
        &["noscript", "loading", "stale", "fast"],
        0,
        0,
        0,
    ),
    spec("raft.node", -2, &["admin"], 0, 0, 0),
    spec("raft.nodes", 1, &["admin", "loading", "stale"], 0, 0, 0),
    spec("cluster", -2, &["loading", "stale"], 0, 0, 0),
    spec("raft.transfer_leader", 2, &["admin"], 0, 0, 0),
];

/// `ERR wrong number of arguments for '<name>' command`.
pub fn arity_error(name: &str) -> Reply {
    Reply::err(format!(
        "ERR wrong number of arguments for '{name}' command"
    ))
}

/// Redis' unknown-command error: the name and the first arguments, each
/// quoted and followed by a space, up to 128 bytes of arguments.
pub fn unknown_command(args: &Command) -> Reply {
    let name = String::from_utf8_lossy(&args[0][..args[0].len().min(128)]).into_owned();
    let mut rest = Vec::<u8>::new();
    for a in &args[1..] {
        if rest.len() >= 128 {
            break;
        }
        let room = 128 - rest.len();
        rest.push(b'\'');
        rest.extend_from_slice(&a[..a.len().min(room)]);
        rest.extend_from_slice(b"' ");
    }
    Reply::err(format!(
        "ERR unknown command '{name}', with args beginning with: {}",
        String::from_utf8_lossy(&rest)
    ))
}

fn unknown_subcommand(args: &Command) -> Reply {
    let sub = String::from_utf8_lossy(&args[1][..args[1].len().min(128)]).into_owned();
    let cmd = String::from_utf8_lossy(&args[0]).to_uppercase();
    Reply::err(format!("ERR unknown subcommand '{sub}'. Try {cmd} HELP."))
}

fn int(b: &[u8]) -> Result<i64, Reply> {
    parse_i64_strict(b).ok_or_else(|| Reply::err(ERR_NOT_INTEGER))
}

fn eq(a: &[u8], b: &str) -> bool {
    a.eq_ignore_ascii_case(b.as_bytes())
}

fn invalid_expire(cmd: &str) -> Reply {
    Reply::err(format!("ERR invalid expire time in '{cmd}' command"))
}

/// A command name of at most 23 bytes, in any case, as a fixed-size key:
/// its first 16 bytes lower-cased, then the next 7 and its length. `None`
/// for a longer name (no command has one). The command tables are looked
/// up several times per request: two integers hash and compare faster than
/// a copied byte string.
pub(crate) fn name_key(name: &[u8]) -> Option<(u128, u64)> {
    if name.len() > 23 {
        return None;
    }
    let (mut head, mut tail) = (0u128, (name.len() as u64) << 56);
    for (i, b) in name.iter().enumerate() {
        let b = b.to_ascii_lowercase();
        match i {
            0..16 => head |= u128::from(b) << (8 * i),
            _ => tail |= u64::from(b) << (8 * (i - 16)),
        }
    }
    Some((head, tail))
}

/// The spec in [`COMMANDS`] of command `name` (any case): one hash lookup.
fn spec_of(name: &[u8]) -> Option<&'static CommandSpec> {
    static TABLE: std::sync::OnceLock<fxhash::FxHashMap<(u128, u64), &'static CommandSpec>> =
        std::sync::OnceLock::new();
    let table = TABLE.get_or_init(|| {
        COMMANDS
            .iter()
            .filter_map(|c| Some((name_key(c.name.as_bytes())?, c)))
            .collect()
    });
    table.get(&name_key(name)?).copied()
}

/// Turns a request into an [`Action`]. `now_ms` is this node's clock (ms
/// since the epoch); it stamps writes and makes relative expiries absolute.
pub fn classify(args: Command, now_ms: u64) -> Action {
    match classify_inner(args, now_ms) {
        Ok(a) => a,
        Err(r) => Action::Reply(r),
    }
}

fn classify_inner(args: Command, now: u64) -> Result<Action, Reply> {
    let Some(first) = args.first() else {
        return Err(Reply::err("ERR empty command"));
    };
    let Some(spec) = spec_of(first) else {
        // A data-type command, or unknown (the error comes from there).
        let is_write = crate::types::check(&args)?;
        let seed = next_seed(now);
        return match is_write {
            true => Ok(Action::Write(WriteOp::new(
                now,
                WriteCmd::Data { args, seed },
            ))),
            false => Ok(Action::Read(ReadCmd::Data { args, seed })),
        };
    };
    let args = &args;
    let n = args.len() as i64;
    if (spec.arity > 0 && n != spec.arity) || (spec.arity < 0 && n < -spec.arity) {
        return Err(arity_error(spec.name));
    }
    let write = |cmd| Ok(Action::Write(WriteOp::new(now, cmd)));
    let read = |cmd| Ok(Action::Read(cmd));
    let key = || args[1].clone();
    match spec.name {
        "get" => read(ReadCmd::Get(key())),
        "mget" => read(ReadCmd::MGet(args[1..].to_vec())),
        "exists" => read(ReadCmd::Exists(args[1..].to_vec())),
        "strlen" => read(ReadCmd::StrLen(key())),
        "ttl" | "pttl" => read(ReadCmd::Ttl {
            key: key(),
            millis: spec.name == "pttl",
        }),
        "dbsize" => read(ReadCmd::DbSize),
        "info" => read(ReadCmd::Info(
            args[1..].iter().map(|a| a.to_ascii_lowercase()).collect(),
        )),
        "set" => write(parse_set(args, now)?),
        "mset" => {
            if n % 2 == 0 {
                return Err(arity_error("mset"));
            }
            let pairs = args[1..]
                .chunks_exact(2)
                .map(|p| (p[0].clone(), p[1].clone()))
                .collect();
            write(WriteCmd::MSet { pairs })
        }
        "time" => Err(Reply::Array(Some(vec![
            Reply::bulk((now / 1000).to_string()),
            Reply::bulk(((now % 1000) * 1000).to_string()),
        ]))),
        "del" | "unlink" => write(WriteCmd::Del {
            keys: args[1..].to_vec(),
        }),
        "incr" | "decr" => write(WriteCmd::IncrBy {
            key: key(),
            delta: if spec.name == "incr" { 1 } else { -1 },
        }),
        "incrby" => write(WriteCmd::IncrBy {
            key: key(),
            delta: int(&args[2])?,
        }),
        "decrby" => {
            let d = int(&args[2])?;
            let delta = d
                .checked_neg()
                .ok_or_else(|| Reply::err("ERR decrement would overflow"))?;
            write(WriteCmd::IncrBy { key: key(), delta })
        }
        "append" => write(WriteCmd::Append {
            key: key(),
            value: args[2].clone(),
        }),
        "expire" | "pexpire" | "expireat" | "pexpireat" => {
            if let Some(opt) = args.get(3) {
                return Err(Reply::err(format!(
                    "ERR Unsupported option {}",
                    String::from_utf8_lossy(opt)
                )));
            }
            let v = int(&args[2])?;
            let unit: i64 = if spec.name.starts_with('p') { 1 } else { 1000 };
            let base = if spec.name.ends_with("at") {
                0
            } else {
                now as i64
            };
            let at = v
                .checked_mul(unit)
                .and_then(|ms| ms.checked_add(base))
                .ok_or_else(|| invalid_expire(spec.name))?;
            write(WriteCmd::ExpireAt {
                key: key(),
                at_ms: at.max(0) as u64,
            })
        }
        "persist" => write(WriteCmd::Persist { key: key() }),
        "flushdb" | "flushall" => {
            if let Some(m) = args.get(1) {
                if args.len() > 2 || !(eq(m, "async") || eq(m, "sync")) {
                    return Err(Reply::err(ERR_SYNTAX));
                }
            }
            write(WriteCmd::FlushDb)
        }
        "ping" => match args.len() {
            1 => Err(Reply::Simple("PONG".into())),
            2 => Err(Reply::bulk(args[1].clone())),
            _ => Err(arity_error("ping")),
        },
        "echo" => Err(Reply::bulk(args[1].clone())),
        "select" => match int(&args[1])? {
            0 => Err(Reply::ok()),
            _ => Err(Reply::err("ERR DB index is out of range")),
        },
        "quit" => Ok(Action::Quit),
        "command" => Err(command_cmd(args)),
        "config" => config_cmd(args),
        "subscribe" => Ok(Action::PubSub(PubSubCmd::Subscribe(args[1..].to_vec()))),
        "psubscribe" => Ok(Action::PubSub(PubSubCmd::PSubscribe(args[1..].to_vec()))),
        "unsubscribe" => Ok(Action::PubSub(PubSubCmd::Unsubscribe(args[1..].to_vec()))),
        "punsubscribe" => Ok(Action::PubSub(PubSubCmd::PUnsubscribe(args[1..].to_vec()))),
        "publish" => Ok(Action::PubSub(PubSubCmd::Publish {
            channel: args[1].clone(),
            message: args[2].clone(),
        })),
        "hello" => Err(hello_cmd(args)),
        // Inside MULTI, UNWATCH is queued and does nothing at EXEC (the
        // watch was already taken); the others are the connection's
        // (crate::txn), never classified.
        "unwatch" => Err(Reply::ok()),
        "multi" | "exec" | "discard" | "watch" => Err(Reply::err(ERR_TXN_CONN)),
        "client" => Err(client_cmd(args)),
        "raft.node" => Ok(Action::Member(raft_node(args)?)),
        "raft.nodes" => Ok(Action::Member(MemberCmd::List)),
        "raft.transfer_leader" => Ok(Action::Member(MemberCmd::Transfer {
            id: node_id_arg(&args[1])?,
        })),
        "cluster" => Ok(Action::Member(MemberCmd::Cluster(crate::cluster::parse(
            args,
        )?))),
        _ => Err(unknown_command(args)),
    }
}

/// A member id argument: positive, and an integer a RESP reply can carry
/// (RAFT.NODES).
fn node_id_arg(b: &[u8]) -> Result<u64, Reply> {
    let text = String::from_utf8_lossy(b);
    match parse_id(&text) {
        Ok(id) if i64::try_from(id).is_ok() => Ok(id),
        _ => Err(Reply::err(format!("ERR invalid node id '{text}'"))),
    }
}

/// `RAFT.NODE ADD <id> <raft>/<client>` or `RAFT.NODE REMOVE <id>`.
fn raft_node(args: &Command) -> Result<MemberCmd, Reply> {
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    let id = node_id_arg;
    let sub = &args[1];
    if eq(sub, "add") {
        if args.len() != 4 {
            return Err(arity_error("raft.node|add"));
        }
        let id = id(&args[2])?;
        let peer = parse_addrs(&text(&args[3])).map_err(|_| {
            Reply::err(format!(
                "ERR invalid address '{}' (RAFT_IP:PORT/CLIENT_IP:PORT)",
                text(&args[3])
            ))
        })?;
        Ok(MemberCmd::Add { id, peer })
    } else if eq(sub, "remove") {
        if args.len() != 3 {
            return Err(arity_error("raft.node|remove"));
        }
        Ok(MemberCmd::Remove { id: id(&args[2])? })
    } else {
        Err(unknown_subcommand(args))
    }
}

fn parse_set(args: &Command, now: u64) -> Result<WriteCmd, Reply> {
    let mut cond = SetCond::Always;
    let mut ttl = SetTtl::Persist;
    let mut ttl_given = false;
    let mut get = false;
    let mut i = 3;
    while i < args.len() {
        let a = &args[i];
        let next = args.get(i + 1);
        if eq(a, "nx") && cond == SetCond::Always {
            cond = SetCond::IfAbsent;
        } else if eq(a, "xx") && cond == SetCond::Always {
            cond = SetCond::IfPresent;
        } else if eq(a, "get") {
            get = true;
        } else if eq(a, "keepttl") && !ttl_given {
            ttl = SetTtl::Keep;
            ttl_given = true;
        } else if (eq(a, "ex") || eq(a, "px") || eq(a, "exat") || eq(a, "pxat"))
            && !ttl_given
            && next.is_some()
        {
            let v = int(next.map_or(&[][..], |v| v.as_slice()))?;
            if v <= 0 {
                return Err(invalid_expire("set"));
            }
            let unit: i64 = if eq(a, "ex") || eq(a, "exat") {
                1000
            } else {
                1
            };
            let base = if eq(a, "ex") || eq(a, "px") {
                now as i64
            } else {
                0
            };
            let at = v
                .checked_mul(unit)
                .and_then(|ms| ms.checked_add(base))
                .ok_or_else(|| invalid_expire("set"))?;
            ttl = SetTtl::At(at as u64);
            ttl_given = true;
            i += 1;
        } else {
            return Err(Reply::err(ERR_SYNTAX));
        }
        i += 1;
    }
    Ok(WriteCmd::Set {
        key: args[1].clone(),
        value: args[2].clone(),
        cond,
        ttl,
        get,
    })
}

/// A seed for a command's random picks: this node's clock and a
/// per-process counter, mixed. Drawn where the command arrives and carried
/// in its op, so replicas never draw their own.
fn next_seed(now: u64) -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    crate::value::SplitMix::new(now ^ n.rotate_left(32)).next_u64()
}

/// Every command: the ones of this module and those of [`crate::types`].
pub fn all_commands() -> impl Iterator<Item = &'static CommandSpec> {
    COMMANDS.iter().chain(crate::types::specs())
}

fn command_info(c: &CommandSpec) -> Reply {
    Reply::Array(Some(vec![
        Reply::bulk(c.name),
        Reply::Integer(c.arity),
        Reply::Array(Some(
            c.flags.iter().map(|f| Reply::Simple((*f).into())).collect(),
        )),
        Reply::Integer(c.first_key),
        Reply::Integer(c.last_key),
        Reply::Integer(c.step),
    ]))
}

fn command_cmd(args: &Command) -> Reply {
    let Some(sub) = args.get(1) else {
        return Reply::Array(Some(all_commands().map(command_info).collect()));
    };
    if eq(sub, "count") && args.len() == 2 {
        Reply::Integer(all_commands().count() as i64)
    } else if eq(sub, "info") {
        Reply::Array(Some(
            args[2..]
                .iter()
                .map(|n| {
                    let n = n.to_ascii_lowercase();
                    all_commands()
                        .find(|c| c.name.as_bytes() == n.as_slice())
                        .map_or(Reply::Array(None), command_info)
                })
                .collect(),
        ))
    } else if eq(sub, "docs") {
        // No documentation: an empty map (RESP2: an empty flat array).
        Reply::Array(Some(Vec::new()))
    } else if eq(sub, "count") {
        arity_error("command|count")
    } else {
        unknown_subcommand(args)
    }
}

/// The answers of `CONFIG GET` that never change (what redis-benchmark
/// asks at start); `notify-keyspace-events` is the member's own.
const CONFIG: &[(&str, &str)] = &[
    ("save", ""),
    ("appendonly", "no"),
    ("databases", "1"),
    ("maxmemory", "0"),
];

/// The one parameter `CONFIG SET` takes.
pub const NOTIFY_PARAM: &str = "notify-keyspace-events";

fn config_cmd(args: &Command) -> Result<Action, Reply> {
    let sub = &args[1];
    if eq(sub, "get") {
        if args.len() < 3 {
            return Err(arity_error("config|get"));
        }
        Ok(Action::Setting(SettingCmd::ConfigGet(args[2..].to_vec())))
    } else if eq(sub, "resetstat") {
        Err(Reply::ok())
    } else if eq(sub, "set") {
        if args.len() < 4 || args.len() % 2 != 0 {
            return Err(arity_error("config|set"));
        }
        if args.len() > 4 || !eq(&args[2], NOTIFY_PARAM) {
            return Err(Reply::err(format!(
                "ERR CONFIG SET of xlane kv takes only '{NOTIFY_PARAM}'"
            )));
        }
        match NotifyFlags::parse(&args[3]) {
            Ok(f) => Ok(Action::Setting(SettingCmd::SetNotify(f))),
            Err(_) => Err(Reply::err(format!(
                "ERR CONFIG SET failed (possibly related to argument '{NOTIFY_PARAM}') - \
                 Invalid event class character. Use 'Ag$lshzxeKEtmdn'."
            ))),
        }
    } else {
        Err(unknown_subcommand(args))
    }
}

/// The reply of `CONFIG GET patterns...` on a member whose
/// `notify-keyspace-events` is `notify`: name and value of every
/// parameter a pattern matches (glob, any case), each once.
pub fn config_get(patterns: &[Vec<u8>], notify: NotifyFlags) -> Reply {
    let notify = notify.to_string();
    let params = CONFIG
        .iter()
        .copied()
        .chain(std::iter::once((NOTIFY_PARAM, notify.as_str())));
    let mut out = Vec::new();
    for (k, v) in params {
        if patterns.iter().any(|p| glob_match(p, k.as_bytes(), true)) {
            out.push(Reply::bulk(k));
            out.push(Reply::bulk(v));
        }
    }
    Reply::Array(Some(out))
}

/// `HELLO` where no connection keeps a session (inside `MULTI`): protocol
/// 2 only ([`crate::session::hello`] serves connections).
fn hello_cmd(args: &Command) -> Reply {
    let mut s = crate::session::Session::default();
    match crate::session::hello(&mut s, args) {
        r if s.resp3 => {
            let _ = r;
            Reply::err("NOPROTO unsupported protocol version")
        }
        r => r,
    }
}

fn client_cmd(args: &Command) -> Reply {
    let sub = &args[1];
    // SETNAME, GETNAME and ID are the connection's
    // (crate::session::session_command); here only where no connection
    // keeps them (execute_local, inside MULTI).
    if eq(sub, "setname") || eq(sub, "setinfo") {
        Reply::ok()
    } else if eq(sub, "getname") {
        Reply::nil()
    } else if eq(sub, "id") {
        Reply::Integer(0)
    } else {
        unknown_subcommand(args)
    }
}

impl ReadCmd {
    /// False for commands that need no linearizable view (INFO).
    pub fn needs_barrier(&self) -> bool {
        !matches!(self, ReadCmd::Info(_))
    }

    /// The first key named, if any (for redirects).
    pub fn first_key(&self) -> Option<&[u8]> {
        match self {
            ReadCmd::Get(k) | ReadCmd::StrLen(k) | ReadCmd::Ttl { key: k, .. } => Some(k),
            ReadCmd::MGet(ks) | ReadCmd::Exists(ks) => ks.first().map(|k| k.as_slice()),
            ReadCmd::DbSize | ReadCmd::Info(_) => None,
            ReadCmd::Data { args, .. } => crate::types::first_key(args),
        }
    }

    /// Answers from `store` at `now_ms`.
    pub fn execute(&self, store: &Store, now_ms: u64) -> Reply {
        match self {
            ReadCmd::Get(k) => match store.value(k, now_ms) {
                None => Reply::nil(),
                Some(Value::Str(v)) => Reply::bulk(v.clone()),
                Some(_) => wrongtype(),
            },
            ReadCmd::Data { args, seed } => crate::types::read(store, args, *seed, now_ms),
            ReadCmd::MGet(ks) => Reply::Array(Some(
                ks.iter()
                    .map(|k| Reply::Bulk(store.get(k, now_ms).map(<[u8]>::to_vec)))
                    .collect(),
            )),
            ReadCmd::Exists(ks) => Reply::Integer(
                ks.iter()
                    .filter(|k| store.value(k, now_ms).is_some())
                    .count() as i64,
            ),
            ReadCmd::StrLen(k) => match store.value(k, now_ms) {
                None => Reply::Integer(0),
                Some(Value::Str(v)) => Reply::Integer(v.len() as i64),
                Some(_) => wrongtype(),
            },
            ReadCmd::Ttl { key, millis } => match store.expiry(key, now_ms) {
                None => Reply::Integer(-2),
                Some(None) => Reply::Integer(-1),
                Some(Some(at)) => {
                    let left = at.saturating_sub(now_ms.max(store.clock_ms()));
                    let v = if *millis { left } else { (left + 500) / 1000 };
                    Reply::Integer(v as i64)
                }
            },
            ReadCmd::DbSize => Reply::Integer(store.len(now_ms) as i64),
            ReadCmd::Info(names) => Reply::bulk(info_text(store, now_ms, names)),
        }
    }
}

/// `INFO`'s text: the sections `names` asks for, in Redis' order and form
/// (`# Name` then `field:value` lines, a blank line between sections).
fn info_text(store: &Store, now_ms: u64, names: &[Vec<u8>]) -> String {
    let keys = store.len(now_ms);
    let expires = store.expiring(now_ms);
    let sections = [
        (
            "Server",
            format!(
                "redis_version:7.0.0\r\nredis_mode:cluster\r\nxlane_kv:{}\r\n",
                env!("CARGO_PKG_VERSION")
            ),
        ),
        ("Replication", "role:master\r\n".to_string()),
        (
            "Stats",
            format!(
                "xlane_applied_ops:{}\r\nxlane_leader_term:{}\r\nxlane_notify_dropped:{}\r\n",
                store.applied(),
                store.leader_term(),
                store.events_dropped()
            ),
        ),
        // One shard of Redis Cluster (crate::cluster): what cluster-aware
        // clients check before they ask CLUSTER SLOTS.
        ("Cluster", "cluster_enabled:1\r\n".to_string()),
        (
            "Keyspace",
            if keys > 0 {
                format!("db0:keys={keys},expires={expires},avg_ttl=0\r\n")
            } else {
                String::new()
            },
        ),
    ];
    let every = names.is_empty()
        || names
            .iter()
            .any(|n| matches!(n.as_slice(), b"default" | b"all" | b"everything"));
    sections
        .iter()
        .filter(|(name, _)| every || names.iter().any(|n| eq(n, name)))
        .map(|(name, body)| format!("# {name}\r\n{body}"))
        .collect::<Vec<_>>()
        .join("\r\n")
}

impl WriteCmd {
    /// The first key named, if any (for redirects).
    pub fn first_key(&self) -> Option<&[u8]> {
        match self {
            WriteCmd::Set { key, .. }
            | WriteCmd::IncrBy { key, .. }
            | WriteCmd::Append { key, .. }
            | WriteCmd::ExpireAt { key, .. }
            | WriteCmd::Persist { key } => Some(key),
            WriteCmd::MSet { pairs } => pairs.first().map(|p| p.0.as_slice()),
            WriteCmd::Del { keys } | WriteCmd::DelExpired { keys } => {
                keys.first().map(|k| k.as_slice())
            }
            WriteCmd::FlushDb => None,
            WriteCmd::Data { args, .. } => crate::types::first_key(args),
            WriteCmd::Exec { cmds, .. } => cmds.iter().find_map(|c| c.first_key()),
            WriteCmd::Query { .. } => None,
        }
    }
}

/// The checks Redis makes before queuing a command in a transaction: the
/// command exists and has an allowed number of words. Every other error
/// (syntax, a bad number) is the command's own, answered at `EXEC`.
pub fn precheck(args: &Command) -> Result<(), Reply> {
    let Some(first) = args.first() else {
        return Err(Reply::err("ERR empty command"));
    };
    let lower = first.to_ascii_lowercase();
    let Some(spec) = all_commands().find(|c| c.name.as_bytes() == lower.as_slice()) else {
        return Err(unknown_command(args));
    };
    let n = args.len() as i64;
    if (spec.arity > 0 && n != spec.arity) || (spec.arity < 0 && n < -spec.arity) {
        return Err(arity_error(spec.name));
    }
    Ok(())
}

/// True when `args` is a command a transaction queues as a
/// [`WriteCmd::Query`]: one that passes [`precheck`] and is no valid
/// write — a read, a command answered without the store (`PING`, `TIME`,
/// ...), or one whose own error (`SET k v NX XX`) `EXEC` reports.
pub fn is_query(args: &[Vec<u8>]) -> bool {
    let args = args.to_vec();
    precheck(&args).is_ok() && matches!(classify(args, 0), Action::Read(_) | Action::Reply(_))
}

/// Answers a [`WriteCmd::Query`] inside a transaction, at the store's
/// logical clock `now`.
pub(crate) fn query(store: &Store, args: &[Vec<u8>], seed: u64, now: u64) -> Reply {
    match classify(args.to_vec(), now) {
        Action::Read(ReadCmd::Data { args, .. }) => crate::types::read(store, &args, seed, now),
        Action::Read(r) => r.execute(store, now),
        Action::Reply(r) => r,
        _ => Reply::err("ERR Command not allowed inside a transaction"),
    }
}

/// Runs a request against a local store directly (no replication): reads
/// at `now_ms`, writes applied with `ts_ms = now_ms`. For tests and
/// single-threaded tools; `QUIT` gives `+OK`.
pub fn execute_local(store: &mut Store, args: &Command, now_ms: u64) -> Reply {
    match classify(args.clone(), now_ms) {
        Action::Reply(r) => r,
        Action::Write(op) => store.apply(&op),
        Action::Read(r) => {
            // As the single node does: expiry first, as the leader decides it.
            while let Some(op) = crate::expiry::due(store, now_ms) {
                store.apply(&op);
            }
            r.execute(store, now_ms)
        }
        Action::Quit => Reply::ok(),
        Action::Member(_) => Reply::err(ERR_NOT_CLUSTER),
        Action::Setting(SettingCmd::ConfigGet(p)) => config_get(&p, NotifyFlags::NONE),
        Action::PubSub(_) | Action::Setting(SettingCmd::SetNotify(_)) => {
            Reply::err(ERR_NEEDS_MEMBER)
        }
    }
}

#[cfg(test)]
#[path = "commands_tests.rs"]
mod tests;
