//! [`Txn`]: a connection's transaction state — `MULTI`, `EXEC`,
//! `DISCARD`, `WATCH`, `UNWATCH` — sans I/O, shared by the single-node
//! server and a cluster member's client loop.
//!
//! Between `MULTI` and `EXEC` every command is checked as it arrives
//! (Redis' errors before `EXEC`: an unknown command or a wrong argument
//! count — answered at once, and `EXEC` then answers `EXECABORT`) and
//! queued (`+QUEUED`); a command's own errors (syntax, a bad number) come
//! in `EXEC`'s reply, as Redis gives them. `EXEC` becomes one op,
//! [`WriteCmd::Exec`], replicated as one log entry and applied at once on
//! every member: writes as their ops, reads (and `TIME`) as
//! [`WriteCmd::Query`] so they answer at their place in the transaction,
//! and commands whose reply depends on neither (`PING`, `SELECT 0`, a
//! syntax error) as their reply, [`WriteCmd::Answer`].
//! Errors while it runs (WRONGTYPE, ...) are per command, in the reply
//! array, as in Redis.
//!
//! `WATCH` records each key's version ([`crate::store::Store::version`]:
//! the applied count of its last change, or of its last removal when it is
//! absent) from the member's state; `EXEC` carries them and applies
//! nothing (nil reply) when one moved. As in Redis, any touch of a watched
//! key aborts — also one that leaves it as it was (created and deleted
//! again, deleted and recreated, set to the same value, expired) — and a
//! command that changes nothing (`SADD` of a member already there) does
//! not. A version read on a member that lags can only make `EXEC` abort,
//! never let a write between `WATCH` and `EXEC` through.

use crate::cmd::args::arity_error;
use crate::dispatch::{classify, precheck, Action, ReadCmd};
use crate::op::{WriteCmd, WriteOp};
use crate::resp::{Command, Reply};

/// `EXECABORT Transaction discarded because of previous errors.`
pub const ERR_EXECABORT: &str = "EXECABORT Transaction discarded because of previous errors.";

/// What the connection does with a command, per its transaction state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Not a transaction matter: run the command as usual.
    Pass,
    /// Answer this (QUEUED, OK, an error).
    Reply(Reply),
    /// `WATCH keys`: read each key's version from the store, hand them to
    /// [`Txn::watch`], answer `+OK`.
    Watch(Vec<Vec<u8>>),
    /// `EXEC`: replicate this op; its reply is `EXEC`'s.
    Exec(WriteOp),
}

/// A connection's transaction state. See the module docs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Txn {
    /// The queued commands, `Some` between MULTI and EXEC/DISCARD.
    queue: Option<Vec<WriteCmd>>,
    /// A command was refused while queuing: EXEC aborts.
    failed: bool,
    watched: Vec<(Vec<u8>, u64)>,
}

/// A command that may grow memory above `maxmemory`.
pub const ERR_OOM: &str = "OOM command not allowed when used memory > 'maxmemory'.";

/// Refused inside MULTI (pub/sub, membership, settings, QUIT).
const ERR_NOT_IN_MULTI: &str = "ERR Command not allowed inside a transaction";

impl Txn {
    /// True between `MULTI` and `EXEC`/`DISCARD`.
    pub fn in_multi(&self) -> bool {
        self.queue.is_some()
    }

    /// Inside `MULTI`: how many commands are queued.
    pub fn queued(&self) -> Option<usize> {
        self.queue.as_ref().map(Vec::len)
    }

    /// Redis's refusal of a command that may grow memory while used memory
    /// is above `maxmemory` (`over`: it is): the command (flagged
    /// `denyoom` in the table) gets `-OOM`, and inside `MULTI` the
    /// transaction is flagged to fail at `EXEC`; an `EXEC` whose queue holds
    /// such a command is refused and the transaction discarded. `None`:
    /// the command goes on.
    pub fn oom_gate(&mut self, args: &Command, over: bool) -> Option<Reply> {
        if !over {
            return None;
        }
        // A container's subcommand carries the flag (FUNCTION LOAD).
        let denyoom = |c: &Command| crate::acl::resolve(c).is_some_and(|s| s.has("denyoom"));
        let name = args.first()?;
        if name.eq_ignore_ascii_case(b"exec") && args.len() == 1 {
            let queued = self.queue.as_ref()?;
            let grows = |w: &WriteCmd| match w {
                WriteCmd::Data { args, .. } => denyoom(args),
                WriteCmd::Set { .. }
                | WriteCmd::MSet { .. }
                | WriteCmd::IncrBy { .. }
                | WriteCmd::Append { .. } => true,
                _ => false,
            };
            if !queued.iter().any(grows) {
                return None;
            }
            *self = Txn::default();
            return Some(Reply::err(format!(
                "EXECABORT Transaction discarded because of: {ERR_OOM}"
            )));
        }
        if !denyoom(args) {
            return None;
        }
        if self.in_multi() {
            self.failed = true;
        }
        Some(Reply::err(ERR_OOM.to_string()))
    }

    /// Records the versions `WATCH` read (key, version).
    pub fn watch(&mut self, versions: Vec<(Vec<u8>, u64)>) {
        for (k, v) in versions {
            if !self.watched.iter().any(|(w, _)| *w == k) {
                self.watched.push((k, v));
            }
        }
    }

    /// Decides what a command means for the transaction; `now` is this
    /// node's clock (stamps the `EXEC` op).
    pub fn step(&mut self, args: &Command, now: u64) -> Step {
        let Some(first) = args.first() else {
            return Step::Pass;
        };
        let is = |n: &str| first.eq_ignore_ascii_case(n.as_bytes());
        if is("multi") {
            if args.len() != 1 {
                return self.refuse(arity_error("multi"));
            }
            if self.in_multi() {
                return Step::Reply(Reply::err("ERR MULTI calls can not be nested"));
            }
            self.queue = Some(Vec::new());
            self.failed = false;
            return Step::Reply(Reply::ok());
        }
        if is("exec") {
            if args.len() != 1 {
                return self.refuse(arity_error("exec"));
            }
            let Some(cmds) = self.queue.take() else {
                return Step::Reply(Reply::err("ERR EXEC without MULTI"));
            };
            let watched = std::mem::take(&mut self.watched);
            if std::mem::take(&mut self.failed) {
                return Step::Reply(Reply::err(ERR_EXECABORT));
            }
            if cmds.is_empty() && watched.is_empty() {
                return Step::Reply(Reply::Array(Some(Vec::new())));
            }
            return Step::Exec(WriteOp::new(now, WriteCmd::Exec { watched, cmds }));
        }
        if is("discard") {
            if args.len() != 1 {
                return self.refuse(arity_error("discard"));
            }
            if self.queue.take().is_none() {
                return Step::Reply(Reply::err("ERR DISCARD without MULTI"));
            }
            self.failed = false;
            self.watched.clear();
            return Step::Reply(Reply::ok());
        }
        if is("watch") {
            if args.len() < 2 {
                return self.refuse(arity_error("watch"));
            }
            if self.in_multi() {
                return Step::Reply(Reply::err("ERR WATCH inside MULTI is not allowed"));
            }
            return Step::Watch(args[1..].to_vec());
        }
        if is("unwatch") && !self.in_multi() {
            if args.len() != 1 {
                return Step::Reply(arity_error("unwatch"));
            }
            self.watched.clear();
            return Step::Reply(Reply::ok());
        }
        let Some(queue) = self.queue.as_mut() else {
            return Step::Pass;
        };
        if let Err(r) = precheck(args) {
            return self.refuse(r);
        }
        // SAVE, SHUTDOWN, ...: the table flags what Redis refuses here.
        if crate::cmd::table::spec(&args[0]).is_some_and(|s| s.has("no_multi")) {
            return self.refuse(Reply::err(ERR_NOT_IN_MULTI));
        }
        let cmd = match classify(args.clone(), now) {
            Action::Write(op) => op.cmd,
            Action::Read(ReadCmd::Data { args, seed, .. }) => WriteCmd::Query { args, seed },
            // TIME answers with the clock of its place in the transaction.
            Action::Reply(_) if args[0].eq_ignore_ascii_case(b"time") => WriteCmd::Query {
                args: args.clone(),
                seed: 0,
            },
            // The rest is the same whenever it is answered: answered now.
            Action::Reply(r) => WriteCmd::Answer {
                reply: r.to_bytes(),
            },
            Action::Read(ReadCmd::Info(_)) => WriteCmd::Answer {
                reply: Reply::err("ERR INFO is not served inside a transaction").to_bytes(),
            },
            // SCRIPT EXISTS, FUNCTION LIST|DUMP|STATS: read at their place.
            Action::Read(ReadCmd::Script(args)) => WriteCmd::Query { args, seed: 0 },
            Action::Quit => {
                // QUIT discards the transaction and closes.
                *self = Txn::default();
                return Step::Pass;
            }
            // A CONFIG SET that cannot succeed is queued as its error, which
            // EXEC then answers in its place (Redis runs it there and fails);
            // one that can is refused: settings are the member's, not an op.
            Action::Setting(crate::dispatch::SettingCmd::ConfigSet(p)) => {
                match crate::config::Config::default().set(&p) {
                    Err(e) => WriteCmd::Answer {
                        reply: Reply::err(e.to_string()).to_bytes(),
                    },
                    Ok(_) => return self.refuse(Reply::err(ERR_NOT_IN_MULTI)),
                }
            }
            Action::Member(_)
            | Action::PubSub(_)
            | Action::Setting(_)
            | Action::Debug(_)
            | Action::Wait { .. }
            | Action::Role
            | Action::Monitor => {
                return self.refuse(Reply::err(ERR_NOT_IN_MULTI));
            }
        };
        queue.push(cmd);
        Step::Reply(Reply::Simple("QUEUED".into()))
    }

    /// A command refused before it was queued (`NOPERM`, access control):
    /// `EXEC` will abort (when in MULTI).
    pub fn flag_refused(&mut self) {
        if self.in_multi() {
            self.failed = true;
        }
    }

    /// An error before EXEC: answered now, and EXEC will abort (when in
    /// MULTI).
    fn refuse(&mut self, r: Reply) -> Step {
        if self.in_multi() {
            self.failed = true;
        }
        Step::Reply(r)
    }
}

#[cfg(test)]
mod tests;
