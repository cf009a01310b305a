//! One connection's commands, run in order until it stalls: access
//! control, `CLIENT PAUSE`, the read groups a pipeline joins, and the
//! dispatch of each command to a write, a read group, a blocked waiter,
//! a membership change, pub/sub, a setting or a `DEBUG` subcommand (see
//! the parent module for the ordering rules this keeps).

use super::blocking::Waiter;
use super::conn::{Ask, Pending, Query, Slot};
use super::reads::quiet_ask;
use super::*;

impl ClientLoop {
    /// Runs the connection's parsed commands until it stalls, runs out of
    /// input or uses up the turn's budget.
    pub(super) fn pump(&mut self, id: u64, sub: &mut dyn Submit) {
        let Some(mut c) = self.conns.get_mut(&id) else {
            return;
        };
        let mut budget = TURN_COMMANDS;
        let leader = sub.leader() == self.me;
        // One clock read for the commands of this pass (at most
        // TURN_COMMANDS, all received before it started): their time of
        // arrival to the millisecond. Read when the first one needs it:
        // most passes (one per completed write) run no command.
        let mut clock = None;
        loop {
            // The rest of a read group whose barrier is through, as the
            // turn's budget allows.
            if let Some(Pending {
                slot: Slot::Read { ready: true, .. },
                ..
            }) = c.queue.back()
            {
                let left = self.budget == 0 || {
                    let mut ctx = answer_ctx!(self, id);
                    let at = c.queue.len() - 1;
                    let left = ctx.answer(c, at, sub);
                    c.release();
                    left
                };
                if left {
                    if !self.again.contains(&id) {
                        self.again.push(id);
                    }
                    c.more = true;
                    break;
                }
                continue;
            }
            if c.queue.is_empty() {
                match c.deferred.take() {
                    Some(Deferred::Reads(group)) => {
                        let mut ctx = answer_ctx!(self, id);
                        if ctx.start(c, group, sub) && !self.again.contains(&id) {
                            self.again.push(id);
                        }
                        c.release_pushes();
                        continue;
                    }
                    Some(Deferred::Watch(keys)) => {
                        let reply = match self.store.read() {
                            Ok(s) => {
                                let now = *clock.get_or_insert_with(now_ms);
                                let v = keys.into_iter().map(|k| {
                                    let v = s.version(&k, now);
                                    (k, v)
                                });
                                c.txn.watch(v.collect());
                                Reply::ok()
                            }
                            Err(_) => Reply::err("ERR store lock poisoned"),
                        };
                        c.emit(&reply);
                        c.release_pushes();
                        continue;
                    }
                    Some(Deferred::Wait { needed, timeout_ms }) => {
                        self.wait_start(id, needed, timeout_ms, sub);
                        let Some(again) = self.conns.get_mut(&id) else {
                            return;
                        };
                        c = again;
                        continue;
                    }
                    None => {}
                }
            }
            let joining = c.joining() && !c.quit && c.out.len() < OUT_HIGH;
            if (c.stalled() && !joining) || (joining && c.held.is_some()) {
                c.more = true;
                break;
            }
            if budget == 0 {
                c.more = true;
                self.again.push(id);
                break;
            }
            budget -= 1;
            let (args, fresh) = match c.held.take() {
                Some(a) => (a, false),
                None => {
                    let args = match c.parser.next_command() {
                        Ok(Some(a)) => a,
                        Ok(None) => {
                            c.more = false;
                            break;
                        }
                        Err(e) => {
                            self.stats.protocol_errors.fetch_add(1, Ordering::Relaxed);
                            c.emit(&Reply::err(format!("ERR {e}")));
                            c.quit = true;
                            break;
                        }
                    };
                    self.stats.commands.fetch_add(1, Ordering::Relaxed);
                    c.last_cmd.clear();
                    c.last_cmd
                        .extend_from_slice(&args[0][..args[0].len().min(MAX_CMD_NAME)]);
                    (args, true)
                }
            };
            // The command's table entry, looked up once for the counters
            // and the access check.
            let spec = args.first().and_then(|n| crate::cmd::table::spec(n));
            if let (Some(spec), true) = (spec, fresh) {
                self.stats.count_call(spec);
            }
            c.shape = c.session.resp3.then(|| Shape::of(&args, None));
            // Access control first (auth::Gate): NOAUTH, NOPERM, AUTH,
            // HELLO, ACL.
            let gated = self.acl_gate(id, &args, spec);
            let Some(again) = self.conns.get_mut(&id) else {
                return;
            };
            c = again;
            let gated = match gated {
                auth::Gate::Pass => None,
                auth::Gate::Reply(r) => {
                    // AUTH and HELLO run here (never refused by the gate).
                    let name = &args[0];
                    if name.eq_ignore_ascii_case(b"auth") || name.eq_ignore_ascii_case(b"hello") {
                        monitor::feed(&self.monitors, &mut self.outbox, &args, c.link.tcp());
                    }
                    c.emit(&r);
                    continue;
                }
                auth::Gate::Action(a) => Some(a),
            };
            // `maxmemory`: a command that may grow memory is refused while
            // this process uses more (crate::txn::Txn::oom_gate); a script
            // carries the answer in its op (stamped below). Read once per
            // command: it reads /proc.
            let over_memory = self.maxmemory > 0 && crate::info::used_memory() > self.maxmemory;
            if let Some(r) = c.txn.oom_gate(&args, over_memory) {
                c.emit(&r);
                continue;
            }
            if let Some(p) = self.pause {
                let unpause = args.len() == 2
                    && args[0].eq_ignore_ascii_case(b"client")
                    && args[1].eq_ignore_ascii_case(b"unpause");
                let held = Instant::now() < p.until
                    && !unpause
                    && (p.all || spec.is_some_and(|s| s.has("write")));
                if held {
                    // Runs when the pause ends (`turn` wakes every
                    // connection then).
                    c.held = Some(args);
                    c.more = true;
                    break;
                }
            }
            if joining {
                let subscribed = self.subs.subscribed(id);
                let now = *clock.get_or_insert_with(now_ms);
                let q =
                    quiet_ask(&args, c, subscribed, &self.store, leader, now).map(|ask| Query {
                        ask,
                        shape: c.shape.clone(),
                        silent: false,
                    });
                let q = q.map(|mut q| {
                    q.silent = !c.take_reply();
                    q
                });
                match q.map(|q| c.join(q)) {
                    Some(true) => {
                        monitor::feed(&self.monitors, &mut self.outbox, &args, c.link.tcp());
                        continue;
                    }
                    _ => {
                        // Runs once the group ahead of it is answered.
                        c.held = Some(args);
                        c.more = true;
                        break;
                    }
                }
            }
            monitor::feed(&self.monitors, &mut self.outbox, &args, c.link.tcp());
            if !c.txn.in_multi() {
                let reply = self.client_admin(id, &args);
                let Some(again) = self.conns.get_mut(&id) else {
                    return;
                };
                c = again;
                if let Some(reply) = reply {
                    c.emit(&reply);
                    continue;
                }
            }
            // RESP3 has no subscribed context (messages are pushes).
            if self.subs.subscribed(id) && !c.session.resp3 {
                if let Some(bytes) = subscribed_only(&args) {
                    c.emit_bytes(bytes);
                    continue;
                }
            }
            if let Some(r) = session_command(&mut c.session, &args, c.txn.in_multi()) {
                // HELLO answers in the protocol it switched to.
                c.shape = c.session.resp3.then(|| Shape::of(&args, None));
                c.emit(&r);
                continue;
            }
            if self.tracking.active() {
                let in_multi = c.txn.in_multi();
                self.track_command(id, &args, in_multi);
                let Some(again) = self.conns.get_mut(&id) else {
                    return;
                };
                c = again;
            }
            let now = *clock.get_or_insert_with(now_ms);
            let step = match gated {
                Some(a) => Err(a),
                None => Ok(c.txn.step(&args, now)),
            };
            let action = match step {
                Err(a) => a,
                Ok(Step::Pass) => classify(args, now),
                Ok(Step::Reply(r)) => Action::Reply(r),
                Ok(Step::Exec(op)) => {
                    if c.session.resp3 {
                        c.shape = Some(Shape::of(&args, Some(&Step::Exec(op.clone()))));
                    }
                    Action::Write(op)
                }
                Ok(Step::Watch(keys)) => {
                    c.deferred = Some(Deferred::Watch(keys));
                    continue;
                }
            };
            let action = match action {
                Action::Write(mut op) => {
                    // A script's commands are checked against its caller.
                    op.cmd
                        .stamp_script_caller(c.session.user_name(), c.session.resp3, over_memory);
                    Action::Write(op)
                }
                Action::Setting(SettingCmd::ConfigSet(pairs)) => {
                    let a = config_set(&mut self.config, &mut self.notify, &pairs, now);
                    auth::acl_config(&self.config, &mut self.access);
                    self.maxmemory = self.config.number("maxmemory");
                    self.client_limits = self.config.client_limits();
                    a
                }
                a => a,
            };
            match action {
                Action::Reply(r) => c.emit(&r),
                Action::Quit => {
                    c.emit(&Reply::ok());
                    c.quit = true;
                }
                Action::Write(mut op)
                    if leader && !c.txn.in_multi() && block_info(&op).is_some() =>
                {
                    // `$` of a blocking XREAD: the last ID as of now.
                    if let (WriteCmd::Data { args, .. }, Ok(s)) = (&mut op.cmd, self.store.read()) {
                        crate::cmd::pin_block_ids(&s, args);
                    }
                    let Some(b) = block_info(&op) else {
                        continue;
                    };
                    let quiet = self.store.read().ok().and_then(|s| s.unchanged_reply(&op));
                    let WriteCmd::Data { args, .. } = op.cmd else {
                        continue;
                    };
                    let mut w = Waiter {
                        args,
                        keys: b.keys,
                        deadline: b.timeout.map(|t| Instant::now() + t),
                        timeout_reply: b.nothing.clone(),
                        in_flight: None,
                        replicas: None,
                    };
                    match quiet {
                        // Nothing to take: it blocks.
                        Some(r) if r == b.nothing => {
                            c.wait(0, Slot::Blocked);
                            c.blocked = true;
                            self.waiters.block(id, w);
                        }
                        // An error (WRONGTYPE) or what it would take now.
                        Some(r) => c.emit(&r),
                        None => {
                            let token = self.tokens.issue(id);
                            let op = WriteOp::new(
                                op.ts_ms,
                                WriteCmd::Data {
                                    args: w.args.clone(),
                                    seed: next_seed_of(token),
                                },
                            );
                            let bytes = op.encode();
                            if self.tracking.clients.get(&id).is_some_and(|t| t.noloop) {
                                self.own_ops.proposed(id, token, &bytes);
                            }
                            match sub.propose(bytes, token) {
                                Ok(()) => {
                                    c.wait(token, Slot::Write);
                                    c.blocked = true;
                                    w.in_flight = Some(token);
                                    self.waiters.block(id, w);
                                }
                                Err(e) => {
                                    self.tokens.take(token);
                                    let e =
                                        replica_error(e, |h| self.members.client_of(self.me, h));
                                    c.emit(&replica_error_reply(&e, None));
                                }
                            }
                        }
                    }
                }
                Action::Write(op) => {
                    // A write that would change nothing, with nothing of
                    // this connection pending: answered like a read — at
                    // once where reads need no barrier (nothing is applied
                    // between the check and the reply), else if it still
                    // would after its barrier.
                    let quiet = match leader && c.queue.is_empty() {
                        true => self.store.read().ok().and_then(|s| s.unchanged_reply(&op)),
                        false => None,
                    };
                    if let Some(r) = quiet {
                        if sub.reads_local() {
                            c.emit(&r);
                        } else {
                            let shape = c.shape.clone();
                            let ask = Ask::Write(op);
                            let silent = !c.take_reply();
                            c.deferred = Some(Deferred::Reads(vec![Query { ask, shape, silent }]));
                        }
                        continue;
                    }
                    let token = self.tokens.issue(id);
                    let slot = match &op.cmd {
                        WriteCmd::Publish { channel, .. } => {
                            Slot::Publish(channel.clone(), Kind::Channel)
                        }
                        WriteCmd::SPublish { channel, .. } => {
                            Slot::Publish(channel.clone(), Kind::Shard)
                        }
                        _ => Slot::Write,
                    };
                    let bytes = op.encode();
                    if self.tracking.clients.get(&id).is_some_and(|t| t.noloop) {
                        self.own_ops.proposed(id, token, &bytes);
                    }
                    if matches!(op.cmd, WriteCmd::Exec { .. }) {
                        self.track_exec(id, token, &bytes);
                        let Some(again) = self.conns.get_mut(&id) else {
                            return;
                        };
                        c = again;
                    }
                    match sub.propose(bytes, token) {
                        Ok(()) => c.wait(token, slot),
                        Err(e) => {
                            self.tokens.take(token);
                            self.tracking.forget_exec(token);
                            let e = replica_error(e, |h| self.members.client_of(self.me, h));
                            c.emit(&replica_error_reply(&e, op.cmd.first_key()));
                        }
                    }
                }
                Action::Member(MemberCmd::List) => c.emit(&nodes_reply(&self.members)),
                Action::Member(MemberCmd::Transfer { id: to }) => {
                    c.emit(&if self.members.get(to).is_none() {
                        Reply::err(format!("ERR node {to} is not a member"))
                    } else if to == self.me && sub.leader() == self.me {
                        Reply::ok()
                    } else {
                        match sub.transfer_leader(to) {
                            Ok(()) => Reply::ok(),
                            Err(e) => {
                                let e = replica_error(e, |h| self.members.client_of(self.me, h));
                                replica_error_reply(&e, None)
                            }
                        }
                    })
                }
                Action::Member(MemberCmd::Cluster(q)) => c.emit(&crate::cluster::reply(
                    q,
                    &self.members,
                    self.me,
                    sub.leader(),
                )),
                Action::Member(cmd) => {
                    let change = member_change(&self.members, &self.check, cmd);
                    let (change, node, context) = match change {
                        Ok(x) => x,
                        Err(r) => {
                            c.emit(&r);
                            continue;
                        }
                    };
                    let token = self.tokens.issue(id);
                    match sub.propose_conf_change(change, node, context, token) {
                        Ok(()) => c.wait(token, Slot::Member),
                        Err(e) => {
                            self.tokens.take(token);
                            let e = replica_error(e, |h| self.members.client_of(self.me, h));
                            c.emit(&replica_error_reply(&e, None));
                        }
                    }
                }
                // Started at the top of the loop once nothing earlier is
                // pending (at once if nothing is).
                Action::Read(cmd) => {
                    if matches!(cmd, crate::dispatch::ReadCmd::Info(_)) {
                        // Facts as of now, not of the last refresh.
                        self.facts_at = None;
                        self.update_facts(sub);
                        let Some(again) = self.conns.get_mut(&id) else {
                            return;
                        };
                        c = again;
                    }
                    // Keys it reads that are due by this member's clock go
                    // first, through the log (lazy expiry, as Redis expires
                    // a key a command meets): the read waits for that op.
                    let due = match (leader, self.store.read()) {
                        (true, Ok(s)) => lazy_due(&s, &cmd, now),
                        _ => Vec::new(),
                    };
                    if !due.is_empty() {
                        let token = self.tokens.issue(id);
                        let op = WriteOp::new(now, WriteCmd::DelExpired { keys: due });
                        match sub.propose(op.encode(), token) {
                            Ok(()) => c.queue.push_back(Pending {
                                token,
                                slot: Slot::Write,
                                silent: true,
                                shape: None,
                            }),
                            Err(_) => {
                                self.tokens.take(token);
                            }
                        }
                    }
                    let shape = c.shape.clone();
                    let ask = Ask::Read(cmd);
                    let silent = !c.take_reply();
                    c.deferred = Some(Deferred::Reads(vec![Query { ask, shape, silent }]));
                }
                Action::PubSub(cmd) => {
                    let bytes = match cmd {
                        PubSubCmd::Subscribe(n, kind) => self.subs.subscribe(id, &n, kind),
                        PubSubCmd::Unsubscribe(n, kind) => self.subs.unsubscribe(id, &n, kind),
                    };
                    c.emit_bytes(bytes);
                }
                Action::Setting(SettingCmd::ConfigGet(p)) => {
                    if let Ok(s) = self.store.read() {
                        let data = s.data_config();
                        for name in DataConfig::NAMES {
                            let v = data.get(name).unwrap_or(0).to_string();
                            let _ = self.config.set_at_start(name, &v);
                        }
                        let pass = String::from_utf8_lossy(s.requirepass()).into_owned();
                        let _ = self.config.set_at_start("requirepass", &pass);
                    }
                    c.emit(&config_get(&self.config, &p))
                }
                // Checked and changed at once here; the settings that shape
                // replicated values go through the log (a write).
                Action::Setting(SettingCmd::ConfigSet(_)) => {}
                Action::Wait {
                    replicas,
                    timeout_ms,
                } => {
                    if leader || self.members.count() <= 1 {
                        c.deferred = Some(Deferred::Wait {
                            needed: replicas,
                            timeout_ms,
                        });
                    } else {
                        c.emit(&Reply::err(replicas::ERR_WAIT_REPLICA));
                    }
                }
                Action::Role => {
                    let r = self.role_reply(sub);
                    let Some(again) = self.conns.get_mut(&id) else {
                        return;
                    };
                    c = again;
                    c.emit(&r);
                }
                Action::Monitor => {
                    if !c.monitor {
                        c.monitor = true;
                        self.monitors.push(id);
                    }
                    c.emit(&Reply::ok());
                }
                Action::Debug(crate::debug::DebugCmd::ActiveExpire(on)) => {
                    self.active_expire = on;
                    c.emit(&Reply::ok());
                }
                Action::Debug(crate::debug::DebugCmd::Sleep(d)) => {
                    c.wait(0, Slot::Blocked);
                    c.blocked = true;
                    self.waiters.block(
                        id,
                        Waiter {
                            args: Vec::new(),
                            keys: Vec::new(),
                            deadline: Some(Instant::now() + d),
                            timeout_reply: Reply::ok(),
                            in_flight: None,
                            replicas: None,
                        },
                    );
                }
                Action::Debug(crate::debug::DebugCmd::Reload { clash }) => {
                    let now = *clock.get_or_insert_with(now_ms);
                    let r = match self.store.write() {
                        Ok(mut s) => crate::debug::reload(&mut s, clash, now),
                        Err(_) => Reply::err("ERR store lock poisoned"),
                    };
                    c.emit(&r);
                }
                Action::Debug(cmd) => {
                    let now = *clock.get_or_insert_with(now_ms);
                    let r = match self.store.read() {
                        Ok(s) => crate::debug::read(&cmd, &s, now).unwrap_or_else(Reply::ok),
                        Err(_) => Reply::err("ERR store lock poisoned"),
                    };
                    c.emit(&r);
                }
            }
        }
        // Requests that arrive from now on take the next barrier.
        c.joinable = false;
        self.mark(id);
    }
}

/// A command on a subscribed RESP2 connection: `None` for the
/// (un)subscriptions and `QUIT`, which run as usual (`RESET` ran before);
/// the reply of `PING`; Redis's error for every other command.
fn subscribed_only(args: &crate::resp::Command) -> Option<Vec<u8>> {
    let name = args.first()?.to_ascii_lowercase();
    match name.as_slice() {
        b"subscribe" | b"psubscribe" | b"ssubscribe" | b"unsubscribe" | b"punsubscribe"
        | b"sunsubscribe" | b"quit" => None,
        b"ping" if args.len() <= 2 => Some(subscribed_pong(args.get(1).map(|v| v.as_slice()))),
        _ => Some(
            Reply::err(format!(
                "ERR Can't execute '{}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET \
                 are allowed in this context",
                String::from_utf8_lossy(&name)
            ))
            .to_bytes(),
        ),
    }
}

/// The keys read `cmd` meets that are due to expire at `now` by this
/// member's clock (for `KEYS`, `SCAN` and `RANDOMKEY`, a batch of every
/// due key).
fn lazy_due(s: &crate::store::Store, cmd: &crate::dispatch::ReadCmd, now: u64) -> Vec<Vec<u8>> {
    let crate::dispatch::ReadCmd::Data { args, .. } = cmd else {
        return Vec::new();
    };
    if !s.some_due(now) {
        return Vec::new();
    }
    let whole = ["keys", "scan", "randomkey"]
        .iter()
        .any(|n| args[0].eq_ignore_ascii_case(n.as_bytes()));
    if whole {
        return s.due(now, crate::expiry::BATCH_KEYS);
    }
    crate::cmd::keys_of(args)
        .unwrap_or_default()
        .into_iter()
        .map(|i| &args[i])
        .filter(|k| matches!(s.expiry(k, now), Some(Some(t)) if t <= now))
        .cloned()
        .collect()
}

/// The [`crate::cmd::BlockInfo`] of a blocking command's op.
fn block_info(op: &WriteOp) -> Option<crate::cmd::BlockInfo> {
    match &op.cmd {
        WriteCmd::Data { args, .. } => crate::cmd::block_info(args),
        _ => None,
    }
}

/// `CONFIG SET pairs` on a member's `config` (and its parsed
/// `notify-keyspace-events`): the reply, or, when it sets a
/// [`DataConfig`] parameter, the write that makes every member take it.
fn config_set(
    config: &mut crate::config::Config,
    notify: &mut NotifyFlags,
    pairs: &[Vec<u8>],
    now: u64,
) -> Action {
    match config.set(pairs) {
        Err(e) => Action::Reply(Reply::err(e.to_string())),
        Ok(names) => {
            let flags = config.get("notify-keyspace-events").unwrap_or("");
            *notify = NotifyFlags::parse(flags.as_bytes()).unwrap_or_default();
            let data: Vec<(Vec<u8>, Vec<u8>)> = names
                .iter()
                .filter(|n| DataConfig::NAMES.contains(n))
                .map(|n| {
                    (
                        n.as_bytes().to_vec(),
                        config.number(n).to_string().into_bytes(),
                    )
                })
                .collect();
            // `requirepass` changes the replicated users.
            let pairs_in = pairs;
            let acl = auth::sets_requirepass(pairs).map(|p| WriteCmd::Acl {
                args: vec![b"REQUIREPASS".to_vec(), p],
            });
            match (data.is_empty(), acl) {
                (true, None) => Action::Reply(Reply::ok()),
                (false, None) => {
                    Action::Write(WriteOp::new(now, WriteCmd::SetConfig { pairs: data }))
                }
                (true, Some(a)) => Action::Write(WriteOp::new(now, a)),
                // One entry for both (exec.rs applies `requirepass` in a
                // SetConfig as the Acl op does).
                (false, Some(_)) => {
                    let mut pairs = data;
                    if let Some(p) = auth::sets_requirepass(pairs_in) {
                        pairs.push((b"requirepass".to_vec(), p));
                    }
                    Action::Write(WriteOp::new(now, WriteCmd::SetConfig { pairs }))
                }
            }
        }
    }
}

/// The membership change `cmd` asks for (`RAFT.NODE ADD/REMOVE`), or the
/// error reply for one the member table refuses: addresses that another
/// member uses, that `check` says the network cannot reach, or that cannot
/// be encoded. (Whether the id may be added or
/// removed is checked by the node against the configuration.)
fn member_change(
    members: &Members,
    check: &PeerCheck,
    cmd: MemberCmd,
) -> Result<(ConfChangeType, u64, Vec<u8>), Reply> {
    match cmd {
        MemberCmd::Add { id, peer } => {
            if let Some((other, addr)) = members.address_taken(id, &peer) {
                return Err(Reply::err(format!(
                    "ERR address {addr} is already used by node {other}"
                )));
            }
            check(id, &peer).map_err(|e| Reply::err(format!("ERR node {id}: {e}")))?;
            let ctx = encode_member(&peer).map_err(|e| Reply::err(format!("ERR {e}")))?;
            Ok((ConfChangeType::AddNode, id, ctx))
        }
        MemberCmd::Remove { id } => Ok((ConfChangeType::RemoveNode, id, Vec::new())),
        MemberCmd::List | MemberCmd::Cluster(_) | MemberCmd::Transfer { .. } => {
            Err(Reply::err("ERR internal: not a membership change"))
        }
    }
}

/// `RAFT.NODES`: one entry per member, by id: `[id, raft address, client
/// address]`.
fn nodes_reply(members: &Members) -> Reply {
    Reply::Array(Some(
        members
            .table()
            .into_iter()
            .map(|(id, p)| {
                Reply::Array(Some(vec![
                    Reply::Integer(id as i64),
                    Reply::bulk(p.raft.to_string()),
                    Reply::bulk(p.client),
                ]))
            })
            .collect(),
    ))
}
