//! Access control on the member's connections (Redis 7.0's): `AUTH`,
//! `HELLO ... AUTH`, the `-NOAUTH` refusal of a connection not
//! authenticated, each command checked against its user's permissions
//! ([`crate::acl::User::check`], `-NOPERM`, logged in the member's
//! [`AclLog`]), the `ACL` command, and the connections dropped when their
//! user is deleted or the users reloaded.
//!
//! The users are replicated state ([`crate::store::Store::users`]): every
//! change is one [`WriteCmd::Acl`] op the leader proposes after checking
//! it on a copy of the table, applied by every member alike. What belongs
//! to a connection (its user, whether it authenticated) is its
//! [`crate::session::Session`]'s; the ACL log and `ACL SAVE`'s file are
//! the member's.

use super::conn::Shape;
use super::ClientLoop;
use crate::acl::{
    AclCommand, AclLog, Changed, LogContext, LogEntry, LogRequest, ReadContext,
    GENPASS_RANDOM_BYTES,
};
use crate::client_list::command_name;
use crate::dispatch::Action;
use crate::op::{WriteCmd, WriteOp};
use crate::resp::{Command, Reply};
use crate::session::{auth_required, hello_as, now_ms, Session, ERR_NOAUTH};
use std::time::Instant;

/// What the access check decided about a command.
pub(super) enum Gate {
    /// It runs as usual.
    Pass,
    /// It is answered with this and does not run.
    Reply(Reply),
    /// It runs as this action (a change of the users, to replicate).
    Action(Action),
}

/// The member's part of access control.
#[derive(Default)]
pub(super) struct Access {
    /// The settings the member started with (the ACL file's path).
    pub(super) start: crate::session::AclStart,
    /// Its ACL log (`ACL LOG`).
    pub(super) log: AclLog,
}

fn is(a: &[u8], b: &str) -> bool {
    a.eq_ignore_ascii_case(b.as_bytes())
}

impl ClientLoop {
    /// A new connection's session: the `default` user, authenticated when
    /// it needs no password.
    pub(super) fn fresh_session(&self) -> Session {
        let mut s = Session::new();
        match self.store.read() {
            Ok(st) => s.default_auth(st.users()),
            Err(_) => s.authenticated = false,
        }
        s
    }

    /// The access check of `args` on connection `id`, before anything else
    /// runs it (Redis' `processCommand`: an unknown command or a wrong
    /// number of arguments is answered first, by the usual path; then
    /// `-NOAUTH`; then the user's permissions). Runs `AUTH`, `HELLO` and
    /// `ACL` itself. `spec` is the table entry of `args[0]`, if any.
    pub(super) fn acl_gate(
        &mut self,
        id: u64,
        args: &Command,
        spec: Option<&'static crate::cmd::table::CommandSpec>,
    ) -> Gate {
        let Some(spec) = spec else {
            return Gate::Pass;
        };
        if !spec.arity_ok(args.len()) {
            return Gate::Pass;
        }
        let Ok(store) = self.store.read() else {
            return Gate::Reply(Reply::err("ERR store lock poisoned"));
        };
        let users = store.users();
        let Some(c) = self.conns.get_mut(&id) else {
            return Gate::Pass;
        };
        // The common case, checked first: an authenticated user that may
        // run everything, with a command the gate does not run itself.
        if c.session.authenticated
            && !matches!(spec.name, "auth" | "hello" | "acl")
            && users
                .user(c.session.user_name())
                .is_some_and(|u| u.allows_everything())
        {
            return Gate::Pass;
        }
        if !crate::dispatch::implemented(spec.name.as_bytes()) {
            return Gate::Pass;
        }
        let Some(sub) = crate::acl::resolve(args) else {
            return Gate::Pass;
        };
        let in_multi = c.txn.in_multi();
        if !in_multi && spec.name == "auth" {
            let reply = match users.auth_command(args) {
                crate::acl::AuthOutcome::Ok { user } => {
                    c.session.user = (user.as_slice() != b"default").then_some(user);
                    c.session.authenticated = true;
                    Reply::ok()
                }
                crate::acl::AuthOutcome::Error(r) => r,
                crate::acl::AuthOutcome::Failed { user } => {
                    let info = self.client_line(id, args);
                    let e = LogEntry::auth(&user, &args[0], LogContext::Toplevel, now_ms(), info);
                    self.access.log.add(e);
                    crate::acl::AuthError.reply()
                }
            };
            return Gate::Reply(reply);
        }
        if !in_multi && spec.name == "hello" {
            let (reply, failed) = hello_as(&mut c.session, args, users);
            c.shape = c.session.resp3.then(|| Shape::of(args, None));
            if let Some(user) = failed {
                let info = self.client_line(id, args);
                let e = LogEntry::auth(&user, &args[0], LogContext::Toplevel, now_ms(), info);
                self.access.log.add(e);
            }
            return Gate::Reply(reply);
        }
        if auth_required(users) && !c.session.authenticated && !spec.has("no_auth") {
            c.txn.flag_refused();
            return Gate::Reply(Reply::err(ERR_NOAUTH));
        }
        let name = c.session.user_name().to_vec();
        let denied = match users.user(&name) {
            Some(u) => u.check_command(sub, args).err(),
            // Deleted: the connection is being closed.
            None => Some(crate::acl::Denied {
                reason: crate::acl::DenyReason::Command,
                pos: 0,
                object: sub.name.as_bytes().to_vec(),
            }),
        };
        if let Some(d) = denied {
            let context = if in_multi {
                LogContext::Multi
            } else {
                LogContext::Toplevel
            };
            let exec = spec.name == "exec";
            if exec {
                c.txn.step(&vec![b"discard".to_vec()], 0);
            } else {
                c.txn.flag_refused();
            }
            let info = self.client_line(id, args);
            self.access
                .log
                .add(LogEntry::denied(&d, &name, context, now_ms(), info));
            return Gate::Reply(match exec {
                true => Reply::err(format!(
                    "EXECABORT Transaction discarded because of: {}",
                    d.error_text()
                )),
                false => d.reply(),
            });
        }
        if in_multi || spec.name != "acl" {
            return Gate::Pass;
        }
        let cmd = match AclCommand::parse(args) {
            Ok(cmd) => cmd,
            Err(r) => return Gate::Reply(r),
        };
        let now = now_ms();
        let write = |words: Vec<Vec<u8>>| {
            Gate::Action(Action::Write(WriteOp::new(
                now,
                WriteCmd::Acl { args: words },
            )))
        };
        let file = self.access.start.aclfile.clone();
        let file_name = self.access.start.file_name().unwrap_or_default();
        match cmd {
            AclCommand::SetUser { name, rules } => {
                // Checked on a copy: an error is answered here, not logged.
                match users.clone().apply_setuser(name, rules) {
                    Err(e) => Gate::Reply(e.reply()),
                    Ok(_) => {
                        let mut w = vec![b"SETUSER".to_vec(), name.to_vec()];
                        w.extend(rules.iter().cloned());
                        write(w)
                    }
                }
            }
            AclCommand::DelUser(names) => {
                if !names.iter().any(|n| users.user(n).is_some()) {
                    return Gate::Reply(Reply::Integer(0));
                }
                let mut w = vec![b"DELUSER".to_vec()];
                w.extend(names.iter().cloned());
                write(w)
            }
            AclCommand::Load => {
                let Some(path) = file else {
                    return Gate::Reply(Reply::err(crate::acl::ERR_NO_ACL_FILE));
                };
                let text = match std::fs::read(&path) {
                    Ok(t) => t,
                    Err(e) => {
                        return Gate::Reply(Reply::err(format!(
                            "ERR Error loading ACLs, opening file '{file_name}': {e}"
                        )))
                    }
                };
                match users.load_text(&text, &file_name) {
                    Err(e) => Gate::Reply(e.reply()),
                    Ok(_) => write(vec![b"LOAD".to_vec(), file_name.into_bytes(), text]),
                }
            }
            AclCommand::Save => {
                let Some(path) = file else {
                    return Gate::Reply(Reply::err(crate::acl::ERR_NO_ACL_FILE));
                };
                Gate::Reply(match save_file(&path, &users.save_text()) {
                    Ok(()) => Reply::ok(),
                    Err(_) => Reply::err(crate::acl::ERR_SAVE_FAILED),
                })
            }
            AclCommand::Log(LogRequest::Reset) => {
                self.access.log.reset();
                Gate::Reply(Reply::ok())
            }
            cmd => {
                let mut random = [0u8; GENPASS_RANDOM_BYTES];
                if matches!(cmd, AclCommand::GenPass { .. }) {
                    fill_random(&mut random);
                }
                let ctx = ReadContext {
                    whoami: Some(&name),
                    log: &self.access.log,
                    now_ms: now,
                    random: &random,
                };
                Gate::Reply(
                    users
                        .read(&cmd, &ctx)
                        .unwrap_or_else(|| Reply::err("ERR internal: an ACL write read")),
                )
            }
        }
    }

    /// Connection `id`'s `CLIENT INFO` line as it runs `args` (the ACL
    /// log's `client-info`).
    fn client_line(&self, id: u64, args: &Command) -> Vec<u8> {
        let Some(c) = self.conns.get(&id) else {
            return Vec::new();
        };
        let mut f = c.facts(id, &self.subs, Instant::now());
        f.cmd = command_name(args);
        let mut line = f.line().into_bytes();
        if line.last() == Some(&b'\n') {
            line.pop();
        }
        line
    }

    /// Closes the connections the users' changes applied since the last
    /// call leave without a user (`ACL DELUSER`, a snapshot), and as Redis
    /// does, on `ACL LOAD` every connection of another user than
    /// `default`, and on `ACL SETUSER` that may revoke channels the
    /// subscribed connections of that user. They close once their pending
    /// replies are written.
    pub(super) fn acl_sweep(&mut self) {
        let (changes, users) = match self.store.write() {
            Ok(mut s) => {
                let ch = s.take_acl_changes();
                if ch.is_empty() {
                    return;
                }
                (ch, s.users().clone())
            }
            Err(_) => return,
        };
        let victims: Vec<u64> = self
            .conns
            .iter()
            .filter(|(&cid, c)| {
                let own = c.session.user.as_deref();
                let name = c.session.user_name();
                let subscribed = self.subs.subscribed(cid);
                (own.is_some() && users.user(name).is_none())
                    || changes.iter().any(|ch| match ch {
                        Changed::Reloaded => own.is_some(),
                        Changed::Deleted(gone) => gone.iter().any(|g| g.as_slice() == name),
                        Changed::User { name: n, outcome } => {
                            outcome.recheck_subscriptions && subscribed && n.as_slice() == name
                        }
                        Changed::Restored | Changed::Nothing => false,
                    })
            })
            .map(|(&cid, _)| cid)
            .collect();
        for v in victims {
            if let Some(c) = self.conns.get_mut(&v) {
                c.quit = true;
            }
            self.waiters.unblock(v);
            self.mark(v);
        }
    }
}

/// `CONFIG SET acllog-max-len` taken by the member's log.
pub(super) fn acl_config(config: &crate::config::Config, access: &mut Access) {
    let n = config.number("acllog-max-len");
    access
        .log
        .set_max_len(usize::try_from(n).unwrap_or(usize::MAX));
}

/// Whether `args` is `CONFIG SET` naming `requirepass`.
pub(super) fn sets_requirepass(pairs: &[Vec<u8>]) -> Option<Vec<u8>> {
    pairs
        .chunks_exact(2)
        .rfind(|p| is(&p[0], "requirepass"))
        .map(|p| p[1].clone())
}

/// Writes the ACL file as Redis does: a temporary file beside it, then
/// renamed over it.
fn save_file(path: &std::path::Path, text: &[u8]) -> std::io::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(format!(".tmp-{}", std::process::id()));
    let tmp = std::path::PathBuf::from(tmp);
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, path)
}

/// Random bytes from the OS (`ACL GENPASS`: a read, not replicated).
fn fill_random(out: &mut [u8]) {
    use std::io::Read;
    if let Ok(mut f) = std::fs::File::open("/dev/urandom") {
        if f.read_exact(out).is_ok() {
            return;
        }
    }
    // No /dev/urandom: the clock and a counter, mixed.
    let mut r = crate::value::SplitMix::new(now_ms() ^ u64::from(std::process::id()));
    for b in out.iter_mut() {
        *b = r.next_u64() as u8;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(w: &[&str]) -> Vec<Vec<u8>> {
        w.iter().map(|a| a.as_bytes().to_vec()).collect()
    }

    #[test]
    fn requirepass_in_config_set() {
        assert_eq!(
            sets_requirepass(&words(&["maxmemory", "1", "REQUIREPASS", "x"])),
            Some(b"x".to_vec())
        );
        assert_eq!(sets_requirepass(&words(&["maxmemory", "1"])), None);
    }

    #[test]
    fn save_then_load_gives_the_same_users() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("users.acl");
        let mut t = crate::acl::UserTable::new();
        t.apply_setuser(b"u", &words(&["on", ">p", "~k*", "+get"]))
            .expect("setuser");
        save_file(&path, &t.save_text()).expect("save");
        let text = std::fs::read(&path).expect("read");
        let back = crate::acl::UserTable::new()
            .load_text(&text, "users.acl")
            .expect("load");
        assert_eq!(back, t);
    }
}
