//! From a request to an [`Action`]: a write ([`WriteOp`], to replicate), a
//! read ([`ReadCmd`], answered from the store after a read barrier), a
//! membership request ([`MemberCmd`], for a cluster member), or a reply that
//! needs no store (PING, COMMAND, errors, ...).
//!
//! Argument checking happens here, at the node the client talks to, so
//! only well-formed ops are replicated. Error texts are Redis 7's. The
//! command table is [`crate::cmd::table`]; the commands on the store run in
//! [`crate::cmd`]; this layer decides which is which, builds the ops, and
//! answers what needs no store.

use crate::cmd::args::{arity_error, eq, int, unknown_command, unknown_subcommand, ERR_SYNTAX};
use crate::cmd::table::{self, CommandSpec};
use crate::cmd::time_reply;
use crate::config::Config;
use crate::members::{parse_addrs, parse_id, Peer};
use crate::op::{SetCond, SetTtl, WriteCmd, WriteOp};
use crate::pubsub::Kind;
use crate::resp::{parse_i64_strict, Command, Reply};
use crate::store::Store;

/// The reply to a transaction command where no connection keeps its state
/// ([`crate::exec::execute_local`]).
pub const ERR_TXN_CONN: &str = "ERR transactions are served on a connection";

/// The reply to `ACL` and `AUTH` where no connection keeps a user
/// (inside `MULTI`, [`crate::exec::execute_local`]).
pub const ERR_ACL_CONN: &str = "ERR ACL and AUTH are served on a connection, outside MULTI";

/// What to do with a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Answer at once; the store is not involved.
    Reply(Reply),
    /// Replicate and apply; the reply comes from [`crate::exec::Apply::apply`].
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
    /// A `DEBUG` subcommand for the member ([`crate::debug`]).
    Debug(crate::debug::DebugCmd),
    /// `WAIT numreplicas timeout`: once this connection's earlier writes
    /// are applied, how many other members hold them (waiting up to
    /// `timeout_ms` for `replicas`; 0: no limit).
    Wait {
        /// Members asked for.
        replicas: i64,
        /// Milliseconds to wait at most (0: no limit).
        timeout_ms: u64,
    },
    /// `ROLE`: the member's place in the group, in Redis's shape.
    Role,
    /// `MONITOR`: the connection is sent every command the member runs.
    Monitor,
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
    /// `SUBSCRIBE channel [channel ...]`, `PSUBSCRIBE pattern [...]`,
    /// `SSUBSCRIBE shardchannel [...]`.
    Subscribe(Vec<Vec<u8>>, Kind),
    /// `UNSUBSCRIBE`, `PUNSUBSCRIBE`, `SUNSUBSCRIBE` `[name ...]` (none:
    /// all of that kind).
    Unsubscribe(Vec<Vec<u8>>, Kind),
}

/// A command on the member's own settings ([`Config`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SettingCmd {
    /// `CONFIG GET pattern [pattern ...]` (glob patterns, any case).
    ConfigGet(Vec<Vec<u8>>),
    /// `CONFIG SET name value [name value ...]`.
    ConfigSet(Vec<Vec<u8>>),
}

/// The reply of a pub/sub command or `CONFIG SET notify-keyspace-events`
/// where no member serves them (the single-node server).
pub const ERR_NEEDS_MEMBER: &str =
    "ERR pub/sub and keyspace notifications are served by cluster members only \
     (xlane kv serve --id N --peer ...)";

/// A read-only command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadCmd {
    /// `INFO [section ...]`: the sections named (lower case; none,
    /// `default`, `all` or `everything`: every section).
    Info(Vec<Vec<u8>>),
    /// A read of the command layer (`GET`, `HGET`, `SCAN`, ...): its
    /// words, checked by [`crate::cmd::check`], answered by
    /// [`crate::cmd::read`].
    Data {
        /// The command words.
        args: Vec<Vec<u8>>,
        /// Seed of its random picks (`SRANDMEMBER`, `RANDOMKEY`).
        seed: u64,
        /// The command, as [`crate::cmd::check`] found it.
        known: crate::cmd::Known,
    },
    /// `SCRIPT EXISTS`, `FUNCTION LIST|DUMP|STATS`: their words, answered
    /// from the replicated scripts ([`crate::script::read`]).
    Script(Vec<Vec<u8>>),
}

/// `WAIT`'s timeout in milliseconds, with Redis's errors.
fn wait_timeout(b: &[u8]) -> Result<u64, Reply> {
    use crate::data::stream::msg;
    let t = parse_i64_strict(b).ok_or_else(|| Reply::err(msg::TIMEOUT_NOT_INTEGER))?;
    u64::try_from(t).map_err(|_| Reply::err(msg::TIMEOUT_NEGATIVE))
}

/// What a (un)subscription command names.
fn pubsub_kind(name: &str) -> Kind {
    match name {
        "psubscribe" | "punsubscribe" => Kind::Pattern,
        "ssubscribe" | "sunsubscribe" => Kind::Shard,
        _ => Kind::Channel,
    }
}

fn invalid_expire(cmd: &str) -> Reply {
    Reply::err(format!("ERR invalid expire time in '{cmd}' command"))
}

/// Turns a request into an [`Action`]. `now_ms` is this node's clock (ms
/// since the epoch); it stamps writes and makes relative expiries absolute.
pub fn classify(args: Command, now_ms: u64) -> Action {
    match classify_inner(args, now_ms) {
        Ok(a) => a,
        Err(r) => Action::Reply(r),
    }
}

/// The commands this layer answers itself or builds a typed op for (every
/// other command the table knows runs in [`crate::cmd`], or is not served).
const HERE: &[&str] = &[
    "set",
    "mset",
    "del",
    "unlink",
    "incr",
    "decr",
    "incrby",
    "decrby",
    "append",
    "flushdb",
    "flushall",
    "time",
    "ping",
    "echo",
    "info",
    "select",
    "quit",
    "command",
    "config",
    "hello",
    "client",
    "multi",
    "exec",
    "discard",
    "watch",
    "unwatch",
    "subscribe",
    "psubscribe",
    "unsubscribe",
    "punsubscribe",
    "publish",
    "ssubscribe",
    "sunsubscribe",
    "spublish",
    "wait",
    "role",
    "monitor",
    "raft.node",
    "raft.nodes",
    "raft.transfer_leader",
    "cluster",
    "readonly",
    "readwrite",
    "function",
    "script",
    "eval",
    "evalsha",
    "eval_ro",
    "evalsha_ro",
    "fcall",
    "fcall_ro",
    "debug",
    "lastsave",
    "save",
    "bgsave",
    "bgrewriteaof",
    "swapdb",
    "move",
    "replicaof",
    "slaveof",
    "sync",
    "psync",
    "failover",
    "module",
    "replconf",
    "lolwut",
    "asking",
    "slowlog",
    "latency",
    "reset",
    "pubsub",
    "shutdown",
    "acl",
    "auth",
];

/// Whether xlane kv serves command `name` (any case): what `COMMAND`
/// lists. One hash lookup (it is asked on every request).
pub fn implemented(name: &[u8]) -> bool {
    type Served = fxhash::FxHashSet<(u128, u64)>;
    static SERVED: std::sync::OnceLock<Served> = std::sync::OnceLock::new();
    let served = SERVED.get_or_init(|| {
        table::TABLE
            .iter()
            .map(|c| c.name)
            .filter(|n| crate::cmd::runs(n.as_bytes()) || HERE.contains(n))
            .filter_map(|n| table::name_key(n.as_bytes()))
            .collect()
    });
    table::name_key(name).is_some_and(|k| served.contains(&k))
}

/// Every command served, as the table describes it.
pub fn all_commands() -> impl Iterator<Item = &'static CommandSpec> {
    table::TABLE
        .iter()
        .filter(|c| implemented(c.name.as_bytes()))
}

fn classify_inner(args: Command, now: u64) -> Result<Action, Reply> {
    let Some(first) = args.first() else {
        return Err(Reply::err("ERR empty command"));
    };
    if let Some(checked) = crate::cmd::check(&args) {
        let (is_write, known) = checked?;
        let seed = next_seed(now);
        return match is_write {
            true => Ok(Action::Write(WriteOp::new(
                now,
                WriteCmd::Data { args, seed },
            ))),
            false => Ok(Action::Read(ReadCmd::Data { args, seed, known })),
        };
    }
    let spec = match table::spec(first) {
        Some(s) if implemented(first) => s,
        _ => return Err(unknown_command(&args)),
    };
    let args = &args;
    if !spec.arity_ok(args.len()) {
        return Err(arity_error(spec.name));
    }
    let n = args.len();
    let write = |cmd| Ok(Action::Write(WriteOp::new(now, cmd)));
    let key = || args[1].clone();
    match spec.name {
        "info" => Ok(Action::Read(ReadCmd::Info(
            args[1..].iter().map(|a| a.to_ascii_lowercase()).collect(),
        ))),
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
        "time" => Err(time_reply(now)),
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
        "flushdb" | "flushall" => {
            if let Some(m) = args.get(1) {
                if n > 2 || !(eq(m, "async") || eq(m, "sync")) {
                    return Err(Reply::err(ERR_SYNTAX));
                }
            }
            write(WriteCmd::FlushDb)
        }
        "ping" => match n {
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
        "subscribe" | "psubscribe" | "ssubscribe" => Ok(Action::PubSub(PubSubCmd::Subscribe(
            args[1..].to_vec(),
            pubsub_kind(spec.name),
        ))),
        "unsubscribe" | "punsubscribe" | "sunsubscribe" => Ok(Action::PubSub(
            PubSubCmd::Unsubscribe(args[1..].to_vec(), pubsub_kind(spec.name)),
        )),
        "publish" => write(WriteCmd::Publish {
            channel: args[1].clone(),
            message: args[2].clone(),
        }),
        "spublish" => write(WriteCmd::SPublish {
            channel: args[1].clone(),
            message: args[2].clone(),
        }),
        "wait" => {
            let replicas = int(&args[1])?;
            let timeout_ms = wait_timeout(&args[2])?;
            Ok(Action::Wait {
                replicas,
                timeout_ms,
            })
        }
        "role" => Ok(Action::Role),
        "monitor" => Ok(Action::Monitor),
        "hello" => Err(hello_cmd(args)),
        "eval" | "evalsha" | "eval_ro" | "evalsha_ro" | "fcall" | "fcall_ro" => {
            write(crate::script::eval_op(spec.name, args, next_seed(now))?)
        }
        "script" | "function" => match crate::script::script_cmd(args) {
            crate::script::ScriptAction::Write(cmd) => write(cmd),
            crate::script::ScriptAction::Read(a) => Ok(Action::Read(ReadCmd::Script(a))),
            crate::script::ScriptAction::Reply(r) => Err(r),
        },
        "debug" => Ok(Action::Debug(crate::debug::parse(args)?)),
        "lastsave" => Err(Reply::Integer(started_s() as i64)),
        "save" => Err(Reply::ok()),
        "bgsave" => Err(Reply::Simple("Background saving started".into())),
        "bgrewriteaof" => Err(Reply::Simple(
            "Background append only file rewriting started".into(),
        )),
        // One database (a Redis with `databases 1`).
        "swapdb" => match (int(&args[1]), int(&args[2])) {
            (Ok(0), Ok(0)) => Err(Reply::ok()),
            (Ok(_), Ok(_)) => Err(Reply::err("ERR DB index is out of range")),
            _ => Err(Reply::err("ERR invalid first DB index")),
        },
        "move" => match int(&args[2])? {
            0 => Err(Reply::err(
                "ERR source and destination objects are the same",
            )),
            _ => Err(Reply::err("ERR DB index is out of range")),
        },
        "replicaof" | "slaveof" | "sync" | "psync" | "failover" | "replconf" => {
            Err(Reply::err(format!(
                "ERR {} is Redis replication; xlane kv replicates through Raft: \
                 add or remove members with RAFT.NODE ADD/REMOVE, move the leader with \
                 RAFT.TRANSFER_LEADER (see docs/kv-commands.md)",
                spec.name.to_uppercase()
            )))
        }
        "module" => Err(Reply::err("ERR xlane kv loads no modules")),
        // The member's (crate::client_loop): it stops the process cleanly.
        "shutdown" => Err(Reply::err(ERR_NEEDS_MEMBER)),
        "lolwut" => Err(Reply::Verbatim(
            "txt".into(),
            format!("xlane kv {}\n", env!("CARGO_PKG_VERSION")),
        )),
        "asking" => Err(Reply::ok()),
        // The connection's (crate::client_loop); here only inside MULTI or
        // where no connection keeps state.
        "reset" => Err(Reply::Simple("RESET".into())),
        "pubsub" => Err(Reply::err(ERR_NEEDS_MEMBER)),
        // The connection's (crate::client_loop's access control); here
        // only inside MULTI or where no connection keeps state.
        "acl" | "auth" => Err(Reply::err(ERR_ACL_CONN)),
        "slowlog" => Err(slowlog_cmd(args)),
        "latency" => Err(latency_cmd(args)),
        // Inside MULTI, UNWATCH is queued and does nothing at EXEC (the
        // watch was already taken); the others are the connection's
        // (crate::txn), never classified.
        "unwatch" => Err(Reply::ok()),
        "multi" | "exec" | "discard" | "watch" => Err(Reply::err(ERR_TXN_CONN)),
        // The connection's (crate::session); here only inside MULTI.
        "readonly" | "readwrite" => Err(Reply::ok()),
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

fn command_info(c: &CommandSpec) -> Reply {
    let words = |v: &[&str], at: bool| {
        Reply::Array(Some(
            v.iter()
                .map(|f| match at {
                    true => Reply::Simple(format!("@{f}")),
                    false => Reply::Simple((*f).into()),
                })
                .collect(),
        ))
    };
    Reply::Array(Some(vec![
        Reply::bulk(c.name),
        Reply::Integer(c.arity),
        words(c.flags, false),
        Reply::Integer(c.keys.0),
        Reply::Integer(c.keys.1),
        Reply::Integer(c.keys.2),
        words(c.acl, true),
        Reply::Array(Some(Vec::new())),
        Reply::Array(Some(Vec::new())),
        Reply::Array(Some(c.subcommands.iter().map(command_info).collect())),
    ]))
}

fn command_docs(c: &CommandSpec) -> Reply {
    let mut m = vec![
        Reply::bulk("summary"),
        Reply::bulk(""),
        Reply::bulk("since"),
        Reply::bulk(c.since),
        Reply::bulk("group"),
        Reply::bulk(c.group.name()),
    ];
    if !c.subcommands.is_empty() {
        m.push(Reply::bulk("subcommands"));
        let mut subs = Vec::new();
        for s in c.subcommands {
            subs.push(Reply::bulk(s.name));
            subs.push(command_docs(s));
        }
        m.push(Reply::Map(pairs(subs)));
    }
    Reply::Map(pairs(m))
}

/// Flat key, value, key, value... as map entries.
fn pairs(flat: Vec<Reply>) -> Vec<(Reply, Reply)> {
    let mut out = Vec::with_capacity(flat.len() / 2);
    let mut it = flat.into_iter();
    while let (Some(k), Some(v)) = (it.next(), it.next()) {
        out.push((k, v));
    }
    out
}

fn command_cmd(args: &Command) -> Reply {
    let Some(sub) = args.get(1) else {
        return Reply::Array(Some(all_commands().map(command_info).collect()));
    };
    let found = |n: &[u8]| table::spec(n).filter(|_| implemented(n));
    if eq(sub, "count") {
        match args.len() {
            2 => Reply::Integer(all_commands().count() as i64),
            _ => arity_error("command|count"),
        }
    } else if eq(sub, "info") {
        Reply::Array(Some(
            args[2..]
                .iter()
                .map(|n| found(n).map_or(Reply::Array(None), command_info))
                .collect(),
        ))
    } else if eq(sub, "docs") {
        let named: Vec<&CommandSpec> = match args.len() {
            2 => all_commands().collect(),
            _ => args[2..].iter().filter_map(|n| found(n)).collect(),
        };
        let mut flat = Vec::new();
        for c in named {
            flat.push(Reply::bulk(c.name));
            flat.push(command_docs(c));
        }
        Reply::Map(pairs(flat))
    } else if eq(sub, "list") {
        command_list(&args[2..])
    } else if eq(sub, "getkeys") {
        if args.len() < 3 {
            return arity_error("command|getkeys");
        }
        command_getkeys(&args[2..])
    } else {
        unknown_subcommand(args)
    }
}

/// `COMMAND LIST [FILTERBY MODULE name | ACLCAT cat | PATTERN glob]`.
fn command_list(opts: &[Vec<u8>]) -> Reply {
    let names = |keep: &dyn Fn(&CommandSpec) -> bool| {
        Reply::Array(Some(
            all_commands()
                .filter(|c| keep(c))
                .map(|c| Reply::bulk(c.name))
                .collect(),
        ))
    };
    match opts {
        [] => names(&|_| true),
        [by, kind, v] if eq(by, "filterby") => {
            if eq(kind, "module") {
                names(&|_| false)
            } else if eq(kind, "aclcat") {
                let cat = v.to_ascii_lowercase();
                names(&|c| c.acl.iter().any(|a| a.as_bytes() == cat.as_slice()))
            } else if eq(kind, "pattern") {
                names(&|c| crate::notify::glob_match(v, c.name.as_bytes(), true))
            } else {
                Reply::err(ERR_SYNTAX)
            }
        }
        _ => Reply::err(ERR_SYNTAX),
    }
}

/// `COMMAND GETKEYS command args...`: the keys the command names.
fn command_getkeys(cmd: &[Vec<u8>]) -> Reply {
    let Some(spec) = table::spec(&cmd[0]).filter(|_| implemented(&cmd[0])) else {
        return Reply::err("ERR Invalid command specified");
    };
    if !spec.arity_ok(cmd.len()) {
        return Reply::err("ERR Invalid number of arguments specified for command");
    }
    match crate::cmd::keys_of(cmd) {
        Some(keys) if !keys.is_empty() => Reply::Array(Some(
            keys.into_iter()
                .map(|i| Reply::bulk(cmd[i].clone()))
                .collect(),
        )),
        _ => Reply::err("ERR The command has no key arguments"),
    }
}

fn config_cmd(args: &Command) -> Result<Action, Reply> {
    let sub = &args[1];
    if eq(sub, "get") {
        if args.len() < 3 {
            return Err(arity_error("config|get"));
        }
        Ok(Action::Setting(SettingCmd::ConfigGet(args[2..].to_vec())))
    } else if eq(sub, "set") {
        if args.len() < 4 || args.len() % 2 != 0 {
            return Err(arity_error("config|set"));
        }
        Ok(Action::Setting(SettingCmd::ConfigSet(args[2..].to_vec())))
    } else if eq(sub, "resetstat") {
        Err(Reply::ok())
    } else if eq(sub, "rewrite") {
        Err(Reply::err(
            "ERR The server is running without a config file",
        ))
    } else {
        Err(unknown_subcommand(args))
    }
}

/// The reply of `CONFIG GET patterns...` from `config`: name and value of
/// every parameter a pattern matches (glob, any case), each once.
pub fn config_get(config: &Config, patterns: &[Vec<u8>]) -> Reply {
    let mut flat = Vec::new();
    for (k, v) in config.matching(patterns) {
        flat.push(Reply::bulk(k));
        flat.push(Reply::bulk(v));
    }
    // A flat array: RESP3 connections get it as a map (crate::resp3).
    Reply::Array(Some(flat))
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

/// When this process started, seconds since the epoch (`LASTSAVE`: a
/// member's state was last written whole — its log opened — then).
fn started_s() -> u64 {
    static START: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *START.get_or_init(|| crate::session::now_ms() / 1000)
}

/// `SLOWLOG`: xlane kv keeps no slow log (its latency lives in the lane's
/// and the benchmarks' own reports), so the log is always empty.
fn slowlog_cmd(args: &Command) -> Reply {
    let sub = &args[1];
    if eq(sub, "get") {
        Reply::Array(Some(Vec::new()))
    } else if eq(sub, "len") {
        Reply::Integer(0)
    } else if eq(sub, "reset") {
        Reply::ok()
    } else if eq(sub, "help") {
        Reply::Array(Some(
            [
                "SLOWLOG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                "GET [<count>]",
                "LEN",
                "RESET",
                "HELP",
            ]
            .iter()
            .map(|l| Reply::Simple((*l).into()))
            .collect(),
        ))
    } else {
        unknown_subcommand(args)
    }
}

/// `LATENCY`: no latency events are sampled (the monitor is off, as with
/// Redis's default `latency-monitor-threshold 0`).
fn latency_cmd(args: &Command) -> Reply {
    let sub = &args[1];
    if eq(sub, "latest") || eq(sub, "history") {
        Reply::Array(Some(Vec::new()))
    } else if eq(sub, "reset") {
        Reply::Integer(0)
    } else if eq(sub, "doctor") {
        Reply::Verbatim(
            "txt".into(),
            "Dave, no latency spike was observed during the lifetime of this instance, \
             nice work.\n"
                .into(),
        )
    } else if eq(sub, "graph") || eq(sub, "histogram") {
        Reply::Array(Some(Vec::new()))
    } else {
        unknown_subcommand(args)
    }
}

/// `FUNCTION`: xlane kv holds no function library yet, so `FLUSH` has
/// nothing to remove and `LIST` nothing to list; the rest says so.
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
            ReadCmd::Info(_) | ReadCmd::Script(_) => None,
            ReadCmd::Data { args, .. } => crate::cmd::first_key(args),
        }
    }

    /// Answers from `store` at `now_ms`; `facts`: what the member knows
    /// beside its store (for `INFO`).
    pub fn execute(&self, store: &Store, now_ms: u64, facts: &crate::info::Facts) -> Reply {
        match self {
            ReadCmd::Data { args, seed, known } => {
                crate::cmd::read(store, *known, args, *seed, now_ms)
            }
            ReadCmd::Info(names) => {
                Reply::Verbatim("txt".into(), crate::info::text(store, now_ms, names, facts))
            }
            ReadCmd::Script(args) => crate::script::read(store.scripts(), args),
        }
    }
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
            WriteCmd::FlushDb
            | WriteCmd::Answer { .. }
            | WriteCmd::SetConfig { .. }
            | WriteCmd::Acl { .. }
            | WriteCmd::Publish { .. }
            | WriteCmd::SPublish { .. } => None,
            WriteCmd::Data { args, .. } => crate::cmd::first_key(args),
            WriteCmd::Exec { cmds, .. } => cmds.iter().find_map(|c| c.first_key()),
            WriteCmd::Query { .. } | WriteCmd::ScriptAdmin { .. } => None,
            WriteCmd::Eval { call, .. } => call.keys.first().map(|k| k.as_slice()),
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
    let spec = match table::spec(first) {
        Some(s) if implemented(first) => s,
        _ => return Err(unknown_command(args)),
    };
    if !spec.arity_ok(args.len()) {
        return Err(arity_error(spec.name));
    }
    Ok(())
}

#[cfg(test)]
#[path = "dispatch_tests.rs"]
mod tests;
