//! The commands about the member's connections, answered from its
//! connection table: `CLIENT LIST|INFO|KILL|PAUSE|UNPAUSE|UNBLOCK|REPLY|
//! NO-EVICT|GETREDIR|TRACKINGINFO|CACHING|HELP`, `RESET`, and
//! `PUBSUB CHANNELS|NUMSUB|NUMPAT|SHARDCHANNELS|SHARDNUMSUB`.
//! (`CLIENT SETNAME/GETNAME/ID`, `HELLO`, `READONLY` are the session's
//! own, [`crate::session`].)

use super::conn::{Conn, ReplyMode};
use super::ClientLoop;
use crate::client_list::{command_name, list_reply, ClientFacts, ListFilter};
use crate::cmd::args::eq;
use crate::notify::glob_match;
use crate::pubsub::Kind;
use crate::resp::{parse_i64_strict, Command, Reply};
use std::time::{Duration, Instant};

/// A pause of the member's clients (`CLIENT PAUSE`).
#[derive(Clone, Copy, Debug)]
pub(super) struct Pause {
    /// When it ends.
    pub(super) until: Instant,
    /// Every command (`ALL`), or only writes (`WRITE`).
    pub(super) all: bool,
}

fn arity(sub: &str) -> Reply {
    crate::cmd::args::arity_error(&format!("client|{sub}"))
}

impl ClientLoop {
    /// The reply of an admin command of connection `id`, or `None` if
    /// `args` is none of them.
    /// `SHUTDOWN [NOSAVE|SAVE] [NOW] [FORCE] [ABORT]`: this member stops
    /// as on SIGTERM (its raft log written and fsynced; nothing else to
    /// save: the log is the data), and the connection closes without a
    /// reply, as Redis's does. `ABORT`: no shutdown is ever in progress.
    fn shutdown(&mut self, id: u64, opts: &[Vec<u8>]) -> Option<Reply> {
        let (mut save, mut nosave, mut abort) = (false, false, false);
        for o in opts {
            if eq(o, "save") {
                save = true;
            } else if eq(o, "nosave") {
                nosave = true;
            } else if eq(o, "abort") {
                abort = true;
            } else if !(eq(o, "now") || eq(o, "force")) {
                return Some(Reply::err(crate::cmd::args::ERR_SYNTAX));
            }
        }
        if (save && nosave) || (abort && opts.len() > 1) {
            return Some(Reply::err(crate::cmd::args::ERR_SYNTAX));
        }
        if abort {
            return Some(Reply::err("ERR No shutdown in progress."));
        }
        // SAFETY: kill(2) on this process with a signal its handler takes.
        unsafe {
            libc::kill(libc::getpid(), libc::SIGTERM);
        }
        let c = self.conns.get_mut(&id)?;
        c.quit = true;
        // Closed without a reply.
        c.replies = super::conn::ReplyMode::Off;
        Some(Reply::ok())
    }

    pub(super) fn client_admin(&mut self, id: u64, args: &Command) -> Option<Reply> {
        let name = args.first()?;
        if eq(name, "reset") && args.len() == 1 {
            return Some(self.reset(id));
        }
        if eq(name, "pubsub") && args.len() >= 2 {
            return Some(self.pubsub_info(args));
        }
        if eq(name, "shutdown") {
            return self.shutdown(id, &args[1..]);
        }
        if !eq(name, "client") || args.len() < 2 {
            return None;
        }
        let sub = args[1].to_ascii_lowercase();
        Some(match sub.as_slice() {
            b"list" => self.client_listing(id, args),
            b"info" if args.len() == 2 => self.client_listing(id, args),
            b"info" => arity("info"),
            b"kill" => self.client_kill(id, &args[2..]),
            b"pause" => self.client_pause(&args[2..]),
            b"unpause" if args.len() == 2 => {
                self.pause = None;
                self.wake_all();
                Reply::ok()
            }
            b"unpause" => arity("unpause"),
            b"unblock" => self.client_unblock(&args[2..]),
            b"reply" => {
                let c = self.conns.get_mut(&id)?;
                match args.get(2).map(|m| m.to_ascii_lowercase()).as_deref() {
                    Some(b"on") if args.len() == 3 => {
                        c.replies = ReplyMode::On;
                        Reply::ok()
                    }
                    // No reply to this one either (the caller's emit is
                    // suppressed by the new mode).
                    Some(b"off") if args.len() == 3 => {
                        c.replies = ReplyMode::Off;
                        Reply::ok()
                    }
                    // This one's and the next one's replies are skipped.
                    Some(b"skip") if args.len() == 3 => {
                        c.replies = ReplyMode::Skip(2);
                        Reply::ok()
                    }
                    _ if args.len() != 3 => arity("reply"),
                    _ => Reply::err(crate::cmd::args::ERR_SYNTAX),
                }
            }
            b"no-evict" => match args.get(2) {
                Some(m) if args.len() == 3 && (eq(m, "on") || eq(m, "off")) => Reply::ok(),
                _ if args.len() != 3 => arity("no-evict"),
                _ => Reply::err(crate::cmd::args::ERR_SYNTAX),
            },
            b"tracking" if args.len() >= 3 => self.client_tracking(id, args),
            b"tracking" => arity("tracking"),
            b"caching" if args.len() == 3 => self.client_caching(id, &args[2]),
            b"caching" => arity("caching"),
            b"getredir" if args.len() == 2 => match self.tracking.clients.get(&id) {
                Some(t) => Reply::Integer(t.redirect.map_or(0, |(cid, _)| cid as i64)),
                None => Reply::Integer(-1),
            },
            b"getredir" => arity("getredir"),
            b"trackinginfo" if args.len() == 2 => {
                let t = self.tracking.clients.get(&id);
                let flags = t.map_or(vec!["off"], |t| t.flags());
                let redirect = t.map_or(-1, |t| t.redirect.map_or(0, |(cid, _)| cid as i64));
                let prefixes = t.map_or(&[][..], |t| &t.prefixes[..]);
                Reply::Map(vec![
                    (
                        Reply::bulk("flags"),
                        Reply::Set(flags.into_iter().map(Reply::bulk).collect()),
                    ),
                    (Reply::bulk("redirect"), Reply::Integer(redirect)),
                    (
                        Reply::bulk("prefixes"),
                        Reply::Array(Some(prefixes.iter().map(|p| Reply::Bulk(Some(p.clone()))).collect())),
                    ),
                ])
            }
            b"trackinginfo" => arity("trackinginfo"),
            b"help" => Reply::Array(Some(
                [
                    "CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                    "GETNAME",
                    "ID",
                    "INFO",
                    "KILL <ip:port> | <option> <value> [<option> <value> ...]",
                    "LIST [TYPE normal|master|replica|pubsub] [ID <id> ...]",
                    "NO-EVICT (ON|OFF)",
                    "PAUSE <timeout> [WRITE|ALL]",
                    "REPLY (ON|OFF|SKIP)",
                    "SETNAME <name>",
                    "TRACKING (ON|OFF) [REDIRECT <id>] [BCAST] [PREFIX <prefix> [...]] [OPTIN] [OPTOUT] [NOLOOP]",
                    "CACHING (YES|NO)",
                    "GETREDIR",
                    "TRACKINGINFO",
                    "UNBLOCK <clientid> [TIMEOUT|ERROR]",
                    "UNPAUSE",
                    "HELP",
                ]
                .iter()
                .map(|l| Reply::Simple((*l).into()))
                .collect(),
            )),
            _ => return None,
        })
    }

    /// `CLIENT TRACKING on|off [REDIRECT id] [BCAST] [PREFIX p]... [OPTIN]
    /// [OPTOUT] [NOLOOP]` on connection `id`, with Redis's checks.
    fn client_tracking(&mut self, id: u64, args: &Command) -> Reply {
        let mut t = super::tracking::Tracker::default();
        let mut i = 3;
        while i < args.len() {
            let more = i + 1 < args.len();
            let w = &args[i];
            if eq(w, "redirect") && more {
                i += 1;
                if t.redirect.is_some() {
                    return Reply::err("ERR A client can only redirect to a single other client");
                }
                let Some(cid) = parse_i64_strict(&args[i]) else {
                    return Reply::err("ERR value is not an integer or out of range");
                };
                let key = self
                    .conns
                    .iter()
                    .find(|(_, c)| c.session.id as i64 == cid)
                    .map(|(&k, _)| k);
                match key {
                    Some(k) => t.redirect = Some((cid as u64, k)),
                    None => {
                        return Reply::err("ERR The client ID you want redirect to does not exist")
                    }
                }
            } else if eq(w, "bcast") {
                t.bcast = true;
            } else if eq(w, "optin") {
                t.optin = true;
            } else if eq(w, "optout") {
                t.optout = true;
            } else if eq(w, "noloop") {
                t.noloop = true;
            } else if eq(w, "prefix") && more {
                i += 1;
                t.prefixes.push(args[i].clone());
            } else {
                return Reply::err(crate::cmd::args::ERR_SYNTAX);
            }
            i += 1;
        }
        if eq(&args[2], "off") {
            self.tracking.off(id);
            return Reply::ok();
        }
        if !eq(&args[2], "on") {
            return Reply::err(crate::cmd::args::ERR_SYNTAX);
        }
        if !t.bcast && !t.prefixes.is_empty() {
            return Reply::err("ERR PREFIX option requires BCAST mode to be enabled");
        }
        let old = self.tracking.clients.get(&id).cloned();
        if old.as_ref().is_some_and(|o| o.bcast != t.bcast) {
            return Reply::err(
                "ERR You can't switch BCAST mode on/off before disabling tracking for this \
                 client, and then re-enabling it with a different mode.",
            );
        }
        if t.bcast && (t.optin || t.optout) {
            return Reply::err("ERR OPTIN and OPTOUT are not compatible with BCAST");
        }
        if t.optin && t.optout {
            return Reply::err("ERR You can't specify both OPTIN mode and OPTOUT mode");
        }
        if old
            .as_ref()
            .is_some_and(|o| (t.optin && o.optout) || (t.optout && o.optin))
        {
            return Reply::err(
                "ERR You can't switch OPTIN/OPTOUT mode before disabling tracking for this \
                 client, and then re-enabling it with a different mode.",
            );
        }
        if t.bcast {
            if let Some(e) = self.tracking.prefix_collision(id, &t.prefixes) {
                return Reply::err(e);
            }
        }
        // Turning it on again adds prefixes and keeps the keys remembered.
        if let Some(o) = old {
            let mut prefixes = o.prefixes;
            prefixes.append(&mut t.prefixes);
            t.prefixes = prefixes;
        }
        if t.bcast && t.prefixes.is_empty() {
            // No prefix: every key (the empty prefix, as Redis lists it).
            t.prefixes.push(Vec::new());
        }
        t.prefixes.dedup();
        self.tracking.on(id, t);
        Reply::ok()
    }

    /// `CLIENT CACHING yes|no` on connection `id`.
    fn client_caching(&mut self, id: u64, opt: &[u8]) -> Reply {
        let Some(t) = self.tracking.clients.get_mut(&id) else {
            return Reply::err(
                "ERR CLIENT CACHING can be called only when the client is in tracking mode \
                 with OPTIN or OPTOUT mode enabled",
            );
        };
        if eq(opt, "yes") {
            if !t.optin {
                return Reply::err(
                    "ERR CLIENT CACHING YES is only valid when tracking is enabled in OPTIN mode.",
                );
            }
            t.caching = Some(true);
        } else if eq(opt, "no") {
            if !t.optout {
                return Reply::err(
                    "ERR CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode.",
                );
            }
            t.caching = Some(false);
        } else {
            return Reply::err(crate::cmd::args::ERR_SYNTAX);
        }
        Reply::ok()
    }

    /// `CLIENT LIST [TYPE t] [ID id ...]` or `CLIENT INFO` on connection
    /// `id`.
    fn client_listing(&self, id: u64, args: &Command) -> Reply {
        let now = Instant::now();
        let with_cmd = |cid: u64, c: &Conn| {
            let mut f = c.facts(cid, &self.subs, now);
            if cid == id {
                f.cmd = command_name(args);
            }
            f
        };
        if args[1].eq_ignore_ascii_case(b"info") {
            return match self.conns.get(&id) {
                Some(c) => Reply::bulk(with_cmd(id, c).line()),
                None => Reply::nil(),
            };
        }
        match ListFilter::parse(&args[2..]) {
            Ok(filter) => {
                let mut all: Vec<(u64, ClientFacts)> = self
                    .conns
                    .iter()
                    .map(|(&cid, c)| (c.session.id, with_cmd(cid, c)))
                    .collect();
                all.sort_by_key(|(sid, _)| *sid);
                list_reply(&filter, all.iter().map(|(_, f)| f))
            }
            Err(r) => r,
        }
    }

    /// `CLIENT KILL addr` or `CLIENT KILL [ID id] [TYPE t] [ADDR a] [LADDR a]
    /// [USER u] [SKIPME yes|no]`: the killed connections close once their
    /// pending replies are written.
    fn client_kill(&mut self, me: u64, opts: &[Vec<u8>]) -> Reply {
        let mut id = None;
        let mut addr = None;
        let mut laddr = None;
        let mut kind = None;
        let mut skipme = true;
        let mut user: Option<Vec<u8>> = None;
        let old_style = opts.len() == 1;
        if old_style {
            addr = Some(opts[0].clone());
        } else if opts.is_empty() || opts.len() % 2 != 0 {
            return Reply::err(crate::cmd::args::ERR_SYNTAX);
        } else {
            for p in opts.chunks_exact(2) {
                let v = &p[1];
                if eq(&p[0], "id") {
                    match parse_i64_strict(v).filter(|n| *n > 0) {
                        Some(n) => id = Some(n as u64),
                        None => {
                            return Reply::err("ERR client-id should be greater than 0");
                        }
                    }
                } else if eq(&p[0], "addr") {
                    addr = Some(v.clone());
                } else if eq(&p[0], "laddr") {
                    laddr = Some(v.clone());
                } else if eq(&p[0], "type") {
                    let t = v.to_ascii_lowercase();
                    if !matches!(
                        t.as_slice(),
                        b"normal" | b"master" | b"slave" | b"replica" | b"pubsub"
                    ) {
                        return Reply::err(format!(
                            "ERR Unknown client type '{}'",
                            String::from_utf8_lossy(v)
                        ));
                    }
                    kind = Some(t);
                } else if eq(&p[0], "user") {
                    let known = self.store.read().is_ok_and(|s| s.users().user(v).is_some());
                    if !known {
                        return Reply::err(format!(
                            "ERR No such user '{}'",
                            String::from_utf8_lossy(v)
                        ));
                    }
                    user = Some(v.clone());
                } else if eq(&p[0], "skipme") {
                    if eq(v, "yes") {
                        skipme = true;
                    } else if eq(v, "no") {
                        skipme = false;
                    } else {
                        return Reply::err(crate::cmd::args::ERR_SYNTAX);
                    }
                } else {
                    return Reply::err(crate::cmd::args::ERR_SYNTAX);
                }
            }
        }
        let now = Instant::now();
        let victims: Vec<u64> = self
            .conns
            .iter()
            .filter(|(&cid, c)| {
                let f = c.facts(cid, &self.subs, now);
                let a = |x: Option<std::net::SocketAddr>| x.map(|x| x.to_string().into_bytes());
                (!skipme || old_style || cid != me)
                    && id.map_or(true, |i| c.session.id == i)
                    && user.as_deref().map_or(true, |u| c.session.user_name() == u)
                    && addr
                        .as_ref()
                        .map_or(true, |w| a(f.addr).as_ref() == Some(w))
                    && laddr
                        .as_ref()
                        .map_or(true, |w| a(f.laddr).as_ref() == Some(w))
                    && kind.as_ref().map_or(true, |t| match t.as_slice() {
                        b"pubsub" => f.sub + f.psub > 0,
                        b"normal" => f.sub + f.psub == 0,
                        _ => false,
                    })
            })
            .map(|(&cid, _)| cid)
            .collect();
        for v in &victims {
            if let Some(c) = self.conns.get_mut(v) {
                c.quit = true;
            }
            self.waiters.unblock(*v);
            self.mark(*v);
        }
        match (old_style, victims.len()) {
            (true, 0) => Reply::err("ERR No such client"),
            (true, _) => Reply::ok(),
            (false, n) => Reply::Integer(n as i64),
        }
    }

    /// `CLIENT PAUSE timeout [WRITE|ALL]`.
    fn client_pause(&mut self, opts: &[Vec<u8>]) -> Reply {
        let (ms, all) = match opts {
            [t] => (t, true),
            [t, m] if eq(m, "all") => (t, true),
            [t, m] if eq(m, "write") => (t, false),
            [_, _] => return Reply::err(crate::cmd::args::ERR_SYNTAX),
            _ => return arity("pause"),
        };
        let Some(ms) = parse_i64_strict(ms).filter(|m| *m >= 0) else {
            return Reply::err(crate::data::stream::msg::TIMEOUT_NOT_INTEGER);
        };
        let until = Instant::now() + Duration::from_millis(ms as u64);
        // A longer or stricter pause wins over the one running.
        self.pause = Some(match self.pause {
            Some(p) => Pause {
                until: p.until.max(until),
                all: p.all || all,
            },
            None => Pause { until, all },
        });
        Reply::ok()
    }

    /// `CLIENT UNBLOCK id [TIMEOUT|ERROR]`: 1 if that client was blocked.
    fn client_unblock(&mut self, opts: &[Vec<u8>]) -> Reply {
        let (id, error) = match opts {
            [id] => (id, false),
            [id, m] if eq(m, "timeout") => (id, false),
            [id, m] if eq(m, "error") => (id, true),
            [_, _] => return Reply::err("ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR"),
            _ => return arity("unblock"),
        };
        let Some(id) = parse_i64_strict(id) else {
            return Reply::err("ERR value is not an integer or out of range");
        };
        let conn = self
            .conns
            .iter()
            .find(|(_, c)| c.session.id as i64 == id && c.blocked)
            .map(|(&k, _)| k);
        let Some(conn) = conn else {
            return Reply::Integer(0);
        };
        let Some(w) = self.waiters.get_mut(conn) else {
            return Reply::Integer(0);
        };
        if w.in_flight.is_some() {
            // Being served now: its write decides.
            return Reply::Integer(0);
        }
        let reply = match error {
            true => Reply::err("UNBLOCKED client unblocked via CLIENT UNBLOCK"),
            false => w.timeout_reply.clone(),
        };
        self.unblock_with(conn, &reply);
        Reply::Integer(1)
    }

    /// `RESET`: the connection as new (protocol 2, no transaction, no watch,
    /// no subscription, no `MONITOR`, no name, replies on), `+RESET`.
    fn reset(&mut self, id: u64) -> Reply {
        self.subs.drop_conn(id);
        self.monitors.retain(|m| *m != id);
        if let Some(c) = self.conns.get_mut(&id) {
            let sid = c.session.id;
            c.session = crate::session::Session {
                id: sid,
                ..Default::default()
            };
            c.txn = Default::default();
            // Back to `default`, authenticated as a new connection is.
            match self.store.read() {
                Ok(s) => c.session.default_auth(s.users()),
                Err(_) => c.session.authenticated = false,
            }
            c.replies = ReplyMode::On;
            c.shape = None;
            c.monitor = false;
        }
        Reply::Simple("RESET".into())
    }

    /// `PUBSUB CHANNELS [pattern] | NUMSUB [channel ...] | NUMPAT |
    /// SHARDCHANNELS [pattern] | SHARDNUMSUB [channel ...] | HELP`.
    fn pubsub_info(&self, args: &Command) -> Reply {
        let sub = args[1].to_ascii_lowercase();
        let kind = match sub.starts_with(b"shard") {
            true => Kind::Shard,
            false => Kind::Channel,
        };
        match sub.as_slice() {
            b"channels" | b"shardchannels" if args.len() <= 3 => Reply::Array(Some(
                self.subs
                    .channels(kind)
                    .filter(|c| args.get(2).map_or(true, |p| glob_match(p, c, false)))
                    .map(|c| Reply::bulk(c.to_vec()))
                    .collect(),
            )),
            b"numsub" | b"shardnumsub" => {
                let mut out = Vec::new();
                for c in &args[2..] {
                    out.push(Reply::bulk(c.clone()));
                    out.push(Reply::Integer(self.subs.subscribers(c, kind) as i64));
                }
                Reply::Map(
                    out.chunks_exact(2)
                        .map(|p| (p[0].clone(), p[1].clone()))
                        .collect(),
                )
            }
            b"numpat" if args.len() == 2 => Reply::Integer(self.subs.patterns() as i64),
            b"help" if args.len() == 2 => Reply::Array(Some(
                [
                    "PUBSUB <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                    "CHANNELS [<pattern>]",
                    "NUMPAT",
                    "NUMSUB [<channel> ...]",
                    "SHARDCHANNELS [<pattern>]",
                    "SHARDNUMSUB [<shardchannel> ...]",
                    "HELP",
                ]
                .iter()
                .map(|l| Reply::Simple((*l).into()))
                .collect(),
            )),
            b"channels" | b"shardchannels" | b"numpat" | b"help" => {
                crate::cmd::args::arity_error(&format!("pubsub|{}", String::from_utf8_lossy(&sub)))
            }
            _ => crate::cmd::args::unknown_subcommand(args),
        }
    }

    /// Every connection with commands waiting is pumped again (after a
    /// pause ends).
    pub(super) fn wake_all(&mut self) {
        let ids: Vec<u64> = self.conns.keys().copied().collect();
        for id in ids {
            if !self.again.contains(&id) {
                self.again.push(id);
            }
        }
    }
}
