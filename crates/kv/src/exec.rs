//! Applying a replicated op to the store: the state machine's one step.
//!
//! [`Apply::apply`] runs a [`WriteOp`] on a [`Store`] and returns its
//! reply. It depends only on the store and the op — the op's time
//! (`ts_ms`) and seed, never a member's clock or random source — so every
//! member that applies the same ops in the same order holds the same state
//! and gives the same replies. The typed string ops run here on the
//! store's primitives; a data command ([`WriteCmd::Data`]) runs through
//! the command layer ([`crate::cmd::apply`]), as does a transaction's
//! query ([`WriteCmd::Query`]). An op whose words do not parse applies as
//! that error reply on every member and changes nothing.

use crate::dispatch;
use crate::notify::NotifyFlags;
use crate::op::{ScriptCall, ScriptCode, SetCond, SetTtl, WriteCmd, WriteOp, MAX_OP_BYTES};
use crate::resp::{parse_i64_strict, Reply};
use crate::store::Store;
use crate::value::{wrongtype, SplitMix, Value};
use crate::value::{ERR_NOT_INTEGER, ERR_OVERFLOW, ERR_TOO_BIG};

/// Applying ops to a store.
pub trait Apply {
    /// Applies one write and returns its reply.
    fn apply(&mut self, op: &WriteOp) -> Reply;

    /// The reply `op` would get from [`Apply::apply`] now if applying it
    /// changes nothing in the store — no value, expiry, version or event
    /// (a member already in its set, a pop from an absent key: see
    /// [`crate::cmd::unchanged_reply`]; `DEL` of absent keys). Such a write
    /// can be answered like a linearizable read, without a log entry, as
    /// Redis neither propagates it nor touches a `WATCH`. `None` when it
    /// might change something, and whenever some key is due to expire at
    /// the op's time (applying would remove it first).
    fn unchanged_reply(&self, op: &WriteOp) -> Option<Reply>;
}

impl Apply for Store {
    fn apply(&mut self, op: &WriteOp) -> Reply {
        if let WriteCmd::DelExpired { keys } = &op.cmd {
            self.begin_bounded_op();
            return Reply::Integer(self.del_expired(keys, op.ts_ms));
        }
        let now = self.begin_op(op.ts_ms);
        run(self, &op.cmd, now)
    }

    fn unchanged_reply(&self, op: &WriteOp) -> Option<Reply> {
        if self.some_due(self.clock_ms().max(op.ts_ms)) {
            return None;
        }
        match &op.cmd {
            WriteCmd::Data { args, .. } => crate::cmd::unchanged_reply(self, args),
            WriteCmd::Del { keys } => keys
                .iter()
                .all(|k| !self.contains(k))
                .then_some(Reply::Integer(0)),
            _ => None,
        }
    }
}

/// Runs `cmd` at the logical instant `now` (keys due at it are gone).
fn run(st: &mut Store, cmd: &WriteCmd, now: u64) -> Reply {
    match cmd {
        WriteCmd::Set {
            key,
            value,
            cond,
            ttl,
            get,
        } => set(st, key, value, *cond, *ttl, *get, now),
        WriteCmd::MSet { pairs } => {
            for (k, v) in pairs {
                st.put_value(k, Value::Str(v.clone()), None);
                st.emit(NotifyFlags::STRING, "set", k);
            }
            Reply::ok()
        }
        WriteCmd::Del { keys } => {
            Reply::Integer(keys.iter().filter(|k| st.delete_with_event(k)).count() as i64)
        }
        WriteCmd::IncrBy { key, delta } => {
            let (cur, exp) = match st.cur_entry(key) {
                None => (0, None),
                Some((Value::Str(v), exp)) => match parse_i64_strict(v) {
                    Some(v) => (v, exp),
                    None => return Reply::err(ERR_NOT_INTEGER),
                },
                Some(_) => return wrongtype(),
            };
            let Some(new) = cur.checked_add(*delta) else {
                return Reply::err(ERR_OVERFLOW);
            };
            st.put_value(key, Value::Str(new.to_string().into_bytes()), exp);
            st.emit(NotifyFlags::STRING, "incrby", key);
            Reply::Integer(new)
        }
        WriteCmd::Append { key, value } => {
            let len = match st.cur_mut(key) {
                Some(Value::Str(v)) => {
                    if v.len() + value.len() > MAX_OP_BYTES {
                        return Reply::err(ERR_TOO_BIG);
                    }
                    v.extend_from_slice(value);
                    v.len()
                }
                Some(_) => return wrongtype(),
                None => {
                    st.put_value(key, Value::Str(value.clone()), None);
                    value.len()
                }
            };
            st.notify(NotifyFlags::STRING, "append", key);
            Reply::Integer(len as i64)
        }
        WriteCmd::ExpireAt { key, at_ms } => {
            if !st.contains(key) {
                return Reply::Integer(0);
            }
            if *at_ms <= now {
                st.delete_with_event(key);
            } else {
                st.set_expire(key, Some(*at_ms));
                st.emit(NotifyFlags::GENERIC, "expire", key);
            }
            Reply::Integer(1)
        }
        WriteCmd::Persist { key } => match st.cur_entry(key) {
            Some((_, Some(_))) => {
                st.set_expire(key, None);
                st.emit(NotifyFlags::GENERIC, "persist", key);
                Reply::Integer(1)
            }
            _ => Reply::Integer(0),
        },
        WriteCmd::FlushDb => {
            st.clear();
            Reply::ok()
        }
        // The number of receivers is the answering member's to count.
        WriteCmd::Publish { channel, message } => {
            st.publish(channel, message, false);
            Reply::Integer(0)
        }
        WriteCmd::SPublish { channel, message } => {
            st.publish(channel, message, true);
            Reply::Integer(0)
        }
        WriteCmd::SetConfig { pairs } => {
            for (name, v) in pairs {
                if name.as_slice() == b"requirepass" {
                    acl(st, &[b"REQUIREPASS".to_vec(), v.clone()]);
                    continue;
                }
                let name = String::from_utf8_lossy(name);
                // Checked by the leader; a value that does not parse is
                // skipped alike on every member.
                if let Some(v) = std::str::from_utf8(v).ok().and_then(|v| v.parse().ok()) {
                    st.set_data_config(&name, v);
                }
            }
            Reply::ok()
        }
        WriteCmd::Acl { args } => acl(st, args),
        WriteCmd::Eval { code, call } => eval(st, code, call, now),
        WriteCmd::ScriptAdmin { args } => {
            let budget = crate::script::DEFAULT_BUDGET;
            crate::script::admin::apply(st.scripts_mut(), args, budget)
        }
        WriteCmd::Data { args, seed } => crate::cmd::apply(st, args, *seed, now),
        WriteCmd::Query { args, seed } => match args.first() {
            // SCRIPT EXISTS, FUNCTION LIST|DUMP|STATS inside a transaction.
            Some(n) if n.eq_ignore_ascii_case(b"script") || n.eq_ignore_ascii_case(b"function") => {
                crate::script::read(st.scripts(), args)
            }
            _ => crate::cmd::query(st, args, *seed, now),
        },
        WriteCmd::Answer { reply } => match crate::resp::decode_reply(reply) {
            Ok(Some((r, used))) if used == reply.len() => r,
            _ => Reply::err("ERR internal: a queued reply does not decode"),
        },
        // Only at the top (`apply`); a decoded op never has it here.
        WriteCmd::DelExpired { keys } => Reply::Integer(st.del_expired(keys, now)),
        WriteCmd::Exec { watched, cmds } => {
            if watched.iter().any(|(k, v)| st.version(k, now) != *v) {
                return Reply::Array(None);
            }
            Reply::Array(Some(cmds.iter().map(|c| run(st, c, now)).collect()))
        }
    }
}

/// The error of `*_RO` on a script that may write.
/// The longest a script's `DEBUG SLEEP`s wait in all.
const SCRIPT_SLEEP: std::time::Duration = std::time::Duration::from_secs(1);

const ERR_RO_WRITE_FLAG: &str = "ERR Can not execute a script with write flag using *_ro command.";

/// Runs a script op on every member alike (see [`crate::script`]): finds
/// its code, runs it with its commands applied here at `now`, and undoes
/// its writes when it ran past its budget.
fn eval(st: &mut Store, code: &ScriptCode, call: &ScriptCall, now: u64) -> Reply {
    let ScriptCall {
        ref keys,
        ref args,
        seed,
        read_only,
        ref user,
        oom,
        ..
    } = *call;
    use crate::script::engine::{self, Outcome, Run};
    use crate::script::state::{sha1_hex, Flags};
    let run = Run {
        keys,
        args,
        seed,
        budget: crate::script::DEFAULT_BUDGET,
    };
    // What runs, and whether its own flags forbid writes.
    enum Target {
        Script(crate::script::state::Sha, std::sync::Arc<Vec<u8>>),
        Function(std::sync::Arc<crate::script::Library>, Vec<u8>),
    }
    let (target, flags) = match code {
        ScriptCode::Body(_) | ScriptCode::Sha(_) => {
            let (sha, body) = match code {
                ScriptCode::Body(b) => (sha1_hex(b), std::sync::Arc::new(b.clone())),
                _ => match crate::script::state::parse_sha(code_bytes(code))
                    .and_then(|sha| st.scripts().body(&sha).map(|b| (sha, b.clone())))
                {
                    Some(found) => found,
                    None => return Reply::err(crate::script::admin::ERR_NOSCRIPT),
                },
            };
            let flags = match engine::script_flags(&body) {
                Ok(f) => f,
                Err(r) => return r,
            };
            if let Err(r) = engine::check_script(&sha, &body) {
                return r;
            }
            if matches!(code, ScriptCode::Body(_)) {
                st.scripts_mut().cache(sha, &body);
            }
            if read_only && flags.has(Flags::DECLARED) && !flags.has(Flags::NO_WRITES) {
                return Reply::err(ERR_RO_WRITE_FLAG);
            }
            (Target::Script(sha, body), flags)
        }
        ScriptCode::Function(name) => {
            let Some((lib, meta)) = st.scripts().function(name) else {
                return Reply::err("ERR Function not found");
            };
            // A function's flags are always declared.
            let flags = meta.flags.with(Flags::DECLARED);
            if read_only && !flags.has(Flags::NO_WRITES) {
                return Reply::err(ERR_RO_WRITE_FLAG);
            }
            (Target::Function(lib.clone(), meta.name.clone()), flags)
        }
    };
    let no_writes = flags.has(Flags::NO_WRITES);
    // Over `maxmemory` where it arrived: a script that declares its flags
    // runs only when it may not write or allows it; one without flags is
    // refused each command that may grow memory (Redis 7.0's rules).
    if oom && flags.has(Flags::DECLARED) && !no_writes && !flags.has(Flags::ALLOW_OOM) {
        return Reply::err(crate::txn::ERR_OOM);
    }
    let cp = st.checkpoint();
    let mut rng = SplitMix::new(seed ^ 0x5c1e_7a11_0000_0001);
    let mut host = ScriptHost {
        st,
        now,
        rng: &mut rng,
        read_only: read_only || no_writes,
        deny_oom: oom && !flags.has(Flags::DECLARED),
        slept: std::time::Duration::ZERO,
        user,
    };
    let outcome = match &target {
        Target::Script(sha, body) => engine::run_script(sha, body, run, &mut host),
        Target::Function(lib, name) => engine::run_function(lib, name, run, &mut host),
    };
    match outcome {
        Outcome::Done(r) => r,
        Outcome::OverBudget(r) => {
            st.rollback(cp);
            r
        }
    }
}

fn code_bytes(code: &ScriptCode) -> &[u8] {
    match code {
        ScriptCode::Body(b) | ScriptCode::Sha(b) | ScriptCode::Function(b) => b,
    }
}

/// A script's commands, run on the member's store at the op's time; random
/// picks draw from the op's seed.
struct ScriptHost<'a> {
    st: &'a mut Store,
    now: u64,
    rng: &'a mut SplitMix,
    read_only: bool,
    /// Commands that may grow memory are refused (a script without flags
    /// taken over `maxmemory`).
    deny_oom: bool,
    /// What its `DEBUG SLEEP`s waited so far (at most [`SCRIPT_SLEEP`]).
    slept: std::time::Duration,
    /// The caller (empty: `default`).
    user: &'a [u8],
}

impl ScriptHost<'_> {
    /// Whether the script's user may run `args` (the spec that rules
    /// them: a container's subcommand's).
    fn allowed(
        &self,
        spec: &crate::cmd::table::CommandSpec,
        args: &[Vec<u8>],
    ) -> Result<(), crate::acl::Denied> {
        let name = if self.user.is_empty() {
            b"default"
        } else {
            self.user
        };
        match self.st.users().user(name) {
            Some(u) => u.check_command(spec, args),
            None => Err(crate::acl::Denied {
                reason: crate::acl::DenyReason::Command,
                pos: 0,
                object: spec.name.as_bytes().to_vec(),
            }),
        }
    }
}

impl crate::script::engine::Host for ScriptHost<'_> {
    fn acl_check(&mut self, args: &[Vec<u8>]) -> Result<bool, Reply> {
        let spec = match crate::acl::resolve(args) {
            Some(s) if dispatch::implemented(&args[0]) => s,
            _ => {
                return Err(Reply::err(
                    "ERR Invalid command passed to redis.acl_check_cmd()",
                ))
            }
        };
        Ok(self.allowed(spec, args).is_ok())
    }

    fn call(&mut self, args: &[Vec<u8>]) -> Reply {
        let spec = match crate::acl::resolve(args) {
            Some(s) if dispatch::implemented(&args[0]) => s,
            _ => return Reply::err("ERR Unknown Redis command called from script"),
        };
        // DEBUG PROTOCOL only builds a reply, and DEBUG SLEEP in a script
        // leaves the script's time at its op's: scripts may call both
        // (Redis's tests do, with its deny-scripts switch off).
        let debug_in_script = args[0].eq_ignore_ascii_case(b"debug")
            && args.get(1).is_some_and(|a| {
                a.eq_ignore_ascii_case(b"protocol") || a.eq_ignore_ascii_case(b"sleep")
            });
        if spec.has("noscript") && !debug_in_script {
            return Reply::err("ERR This Redis command is not allowed from script");
        }
        let top = crate::cmd::table::spec(&args[0]).unwrap_or(spec);
        if !top.arity_ok(args.len()) {
            return Reply::err("ERR Wrong number of args calling Redis command from script");
        }
        // A container's flags or its subcommand's.
        let flagged = |f: &str| spec.has(f) || top.has(f);
        if self.read_only && flagged("write") {
            return Reply::err("ERR Write commands are not allowed from read-only scripts.");
        }
        if self.deny_oom && flagged("denyoom") {
            return Reply::err(crate::txn::ERR_OOM);
        }
        if let Err(d) = self.allowed(spec, args) {
            return Reply::err(match d.reason {
                crate::acl::DenyReason::Command => {
                    "ERR The user executing the script can't run this command or subcommand"
                }
                crate::acl::DenyReason::Key => {
                    "ERR The user executing the script can't access at least one of the keys mentioned in the command"
                }
                crate::acl::DenyReason::Channel => {
                    "ERR The user executing the script can't publish to the channel mentioned in the command"
                }
            });
        }
        let name = top.name;
        if (name == "xread" || name == "xreadgroup")
            && args.iter().any(|a| a.eq_ignore_ascii_case(b"block"))
        {
            return Reply::err(format!(
                "ERR {name} command is not allowed with BLOCK option from scripts"
            ));
        }
        match dispatch::classify(args.to_vec(), self.now) {
            dispatch::Action::Reply(r) => r,
            dispatch::Action::Write(op) => {
                let cmd = match op.cmd {
                    WriteCmd::Data { args, .. } => WriteCmd::Data {
                        args,
                        seed: self.rng.next_u64(),
                    },
                    other => other,
                };
                run(self.st, &cmd, self.now)
            }
            dispatch::Action::Read(dispatch::ReadCmd::Data { args, known, .. }) => {
                crate::cmd::read(self.st, known, &args, self.rng.next_u64(), self.now)
            }
            dispatch::Action::Read(r) => {
                r.execute(self.st, self.now, &crate::info::Facts::default())
            }
            // It sleeps (as Redis's does, the member waits), but the
            // script's clock stays at its op's time; a script's sleeps
            // add up to at most SCRIPT_SLEEP, whatever it loops over.
            dispatch::Action::Debug(crate::debug::DebugCmd::Sleep(d)) => {
                let d = d.min(SCRIPT_SLEEP.saturating_sub(self.slept));
                self.slept += d;
                std::thread::sleep(d);
                Reply::ok()
            }
            _ => Reply::err("ERR This Redis command is not allowed from script"),
        }
    }
}

/// `SET key value [NX|XX] [GET] [expiry]`.
fn set(
    st: &mut Store,
    key: &[u8],
    value: &[u8],
    cond: SetCond,
    ttl: SetTtl,
    get: bool,
    now: u64,
) -> Reply {
    // A plain SET needs nothing of the old entry: `put` is then the only
    // walk of the map.
    let plain = matches!(cond, SetCond::Always) && !get && !matches!(ttl, SetTtl::Keep);
    let (exists, old_expiry, old_value) = match plain {
        true => (false, None, None),
        false => match st.cur_entry(key) {
            Some((v, exp)) => {
                let old = match (v, get) {
                    (Value::Str(v), true) => Some(v.clone()),
                    (_, true) => return wrongtype(),
                    _ => None,
                };
                (true, exp, old)
            }
            None => (false, None, None),
        },
    };
    let proceed = match cond {
        SetCond::Always => true,
        SetCond::IfAbsent => !exists,
        SetCond::IfPresent => exists,
    };
    let reply = if get {
        Reply::Bulk(old_value)
    } else if proceed {
        Reply::ok()
    } else {
        Reply::nil()
    };
    if proceed {
        let expire_at = match ttl {
            SetTtl::Persist => None,
            SetTtl::Keep => old_expiry,
            SetTtl::At(t) => Some(t),
        };
        if expire_at.is_some_and(|t| t <= now) {
            st.delete_with_event(key);
        } else {
            st.put_value(key, Value::Str(value.to_vec()), expire_at);
            st.emit(NotifyFlags::STRING, "set", key);
            if matches!(ttl, SetTtl::At(_)) {
                st.emit(NotifyFlags::GENERIC, "expire", key);
            }
        }
    }
    reply
}

/// A change of the users ([`WriteCmd::Acl`]): the table's pure functions
/// on every member; the change is recorded for the member's connections
/// ([`Store::take_acl_changes`]). Words that are none of the kinds apply
/// as an error, changing nothing.
fn acl(st: &mut Store, args: &[Vec<u8>]) -> Reply {
    use crate::acl::Changed;
    let kind = args
        .first()
        .map(|k| k.to_ascii_uppercase())
        .unwrap_or_default();
    let (users, requirepass) = st.acl_mut();
    let (reply, changed) = match (kind.as_slice(), args.get(1)) {
        (b"SETUSER", Some(name)) => match users.apply_setuser(name, &args[2..]) {
            Ok(outcome) => (
                Reply::ok(),
                Changed::User {
                    name: name.clone(),
                    outcome,
                },
            ),
            Err(e) => (e.reply(), Changed::Nothing),
        },
        (b"DELUSER", Some(_)) => match users.apply_deluser(&args[1..]) {
            Ok(gone) if gone.is_empty() => (Reply::Integer(0), Changed::Nothing),
            Ok(gone) => (Reply::Integer(gone.len() as i64), Changed::Deleted(gone)),
            Err(e) => (e.reply(), Changed::Nothing),
        },
        (b"LOAD", Some(name)) if args.len() == 3 => {
            let name = String::from_utf8_lossy(name);
            match users.apply_load(&args[2], &name) {
                Ok(()) => (Reply::ok(), Changed::Reloaded),
                Err(e) => (e.reply(), Changed::Nothing),
            }
        }
        // Applied only when the value changes, as Redis applies it.
        (b"REQUIREPASS", Some(pass)) if args.len() == 2 => {
            if pass != requirepass {
                users.set_requirepass(pass);
                *requirepass = pass.clone();
            }
            (Reply::ok(), Changed::Nothing)
        }
        _ => (
            Reply::err("ERR internal: a malformed ACL op"),
            Changed::Nothing,
        ),
    };
    if changed != Changed::Nothing {
        st.acl_changed(changed);
    }
    reply
}

/// Runs a request against a local store directly (no replication): reads
/// at `now_ms`, writes applied with `ts_ms = now_ms`. For tests and
/// single-threaded tools; `QUIT` gives `+OK`.
pub fn execute_local(store: &mut Store, args: &crate::resp::Command, now_ms: u64) -> Reply {
    match dispatch::classify(args.clone(), now_ms) {
        dispatch::Action::Reply(r) => r,
        dispatch::Action::Write(op) => store.apply(&op),
        dispatch::Action::Read(r) => {
            // As the single node does: expiry first, as the leader decides it.
            while let Some(op) = crate::expiry::due(store, now_ms) {
                store.apply(&op);
            }
            r.execute(store, now_ms, &crate::info::Facts::default())
        }
        dispatch::Action::Quit => Reply::ok(),
        dispatch::Action::Member(_) => Reply::err(dispatch::ERR_NOT_CLUSTER),
        dispatch::Action::Setting(dispatch::SettingCmd::ConfigGet(p)) => {
            dispatch::config_get(&crate::config::Config::default(), &p)
        }
        // Checked as a member checks it; nothing keeps the value here.
        dispatch::Action::Setting(dispatch::SettingCmd::ConfigSet(p)) => {
            match crate::config::Config::default().set(&p) {
                Ok(_) => Reply::ok(),
                Err(e) => Reply::err(e.to_string()),
            }
        }
        dispatch::Action::PubSub(_) | dispatch::Action::Monitor => {
            Reply::err(dispatch::ERR_NEEDS_MEMBER)
        }
        // A store alone has no replicas.
        dispatch::Action::Wait { .. } => Reply::Integer(0),
        dispatch::Action::Role => Reply::Array(Some(vec![
            Reply::bulk("master"),
            Reply::Integer(store.applied() as i64),
            Reply::Array(Some(Vec::new())),
        ])),
        dispatch::Action::Debug(cmd) => match cmd {
            crate::debug::DebugCmd::Reload { clash } => crate::debug::reload(store, clash, now_ms),
            c => crate::debug::read(&c, store, now_ms).unwrap_or_else(Reply::ok),
        },
    }
}

#[cfg(test)]
#[path = "script/apply_tests.rs"]
mod script_apply_tests;

#[cfg(test)]
mod acl_tests {
    use super::*;

    fn op(words: &[&[u8]]) -> WriteOp {
        WriteOp::new(
            1,
            WriteCmd::Acl {
                args: words.iter().map(|w| w.to_vec()).collect(),
            },
        )
    }

    /// The ACL ops change the users alike on every store, record what
    /// changed for the member's connections, and survive a snapshot.
    #[test]
    fn acl_ops_apply_identically_and_snapshot() {
        use crate::acl::Changed;
        let ops = [
            (
                op(&[b"SETUSER", b"u", b"on", b">p", b"~k*", b"+get"]),
                Reply::ok(),
            ),
            (
                op(&[b"SETUSER", b"v", b"bad-rule"]),
                Reply::err("ERR Error in ACL SETUSER modifier 'bad-rule': Syntax error"),
            ),
            (op(&[b"REQUIREPASS", b"secret"]), Reply::ok()),
            (op(&[b"DELUSER", b"nobody"]), Reply::Integer(0)),
            (
                op(&[b"DELUSER", b"default"]),
                Reply::err("ERR The 'default' user cannot be removed"),
            ),
            (
                op(&[b"SETUSER", b"w", b"on", b"nopass", b"+@all"]),
                Reply::ok(),
            ),
            (op(&[b"DELUSER", b"w"]), Reply::Integer(1)),
            (
                op(&[b"NOSUCH"]),
                Reply::err("ERR internal: a malformed ACL op"),
            ),
        ];
        let (mut a, mut b) = (Store::new(), Store::new());
        for (o, want) in &ops {
            let decoded = WriteOp::decode(&o.encode()).expect("decodes");
            assert_eq!(a.apply(&decoded), *want, "{o:?}");
            assert_eq!(b.apply(o), *want, "{o:?}");
        }
        assert_eq!(a.users(), b.users());
        assert_eq!(a.requirepass(), b"secret");
        let u = a.users().user(b"u").expect("u");
        assert!(u.password_ok(b"p") && u.enabled());
        assert!(a.users().authenticate(b"default", b"secret").is_ok());
        assert!(a.users().authenticate(b"default", b"").is_err());
        let changes = a.take_acl_changes();
        assert!(matches!(&changes[0], Changed::User { name, .. } if name == b"u"));
        assert_eq!(changes.last(), Some(&Changed::Deleted(vec![b"w".to_vec()])));
        assert!(a.take_acl_changes().is_empty());
        // The users are in the snapshot, byte-identical on both stores.
        let snap = a.snapshot();
        assert_eq!(snap, b.snapshot());
        let r = Store::restore(&snap).expect("restores");
        assert_eq!(r.users(), a.users());
        assert_eq!(r.requirepass(), b"secret");
        // A fresh store's snapshot has no ACL section.
        assert!(!Store::new().snapshot().ends_with(b"ACL1"));
        let mut fresh = Store::new();
        fresh.replace(r);
        assert_eq!(fresh.take_acl_changes(), vec![Changed::Restored]);
        // LOAD replaces the table (a file without default keeps a fresh one).
        let mut c = Store::new();
        let reply = c.apply(&op(&[b"LOAD", b"f.acl", b"user a on >x +@all ~*\n"]));
        assert_eq!(reply, Reply::ok());
        assert!(c.users().user(b"a").is_some());
        assert_eq!(c.take_acl_changes(), vec![Changed::Reloaded]);
        let reply = c.apply(&op(&[b"LOAD", b"f.acl", b"bogus\n"]));
        assert!(matches!(reply, Reply::Error(_)));
        assert!(c.users().user(b"a").is_some());
    }

    /// `CONFIG SET requirepass` with a data setting is one SetConfig op.
    #[test]
    fn requirepass_inside_set_config() {
        let mut s = Store::new();
        let o = WriteOp::new(
            1,
            WriteCmd::SetConfig {
                pairs: vec![
                    (b"hll-sparse-max-bytes".to_vec(), b"100".to_vec()),
                    (b"requirepass".to_vec(), b"pw".to_vec()),
                ],
            },
        );
        assert_eq!(s.apply(&o), Reply::ok());
        assert_eq!(s.data_config().hll_sparse_max_bytes, 100);
        assert!(s.users().authenticate(b"default", b"pw").is_ok());
    }
}
