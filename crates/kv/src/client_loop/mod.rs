//! RESP clients served on the raft driver's own thread (an X-Raft
//! [`Frontend`]): one event loop per member, as in Redis.
//!
//! The listener and every connection are non-blocking and registered in one
//! epoll set, whose descriptor the driver waits on beside its own. A request
//! is parsed, proposed (or its read barrier started) and, once the node
//! reports the outcome, answered, all on the driver thread: a write crosses
//! no thread between the client's socket and the raft log. Requests that
//! arrive together join the same Ready (one log append, one message to each
//! follower).
//!
//! Per connection the replies keep the order of the requests:
//! * writes are pipelined: each is proposed at once and its reply waits in
//!   the connection's queue until every earlier reply is ready;
//! * reads go in groups: a group starts only when nothing earlier is
//!   pending, and nothing that is not a read starts while its read barrier
//!   waits, so a read sees every earlier write of the same connection and
//!   none of its later ones. The reads that follow in the pipeline and
//!   were already received when the barrier started join its group (their
//!   read index is taken after they arrived): one barrier for a pipeline of
//!   reads. The barriers of one turn share one read index; on a leader that
//!   is its group's only voter (a single node) reads need none and are
//!   answered at once;
//! * a write the leader's store shows would change nothing
//!   ([`crate::store::Store::unchanged_reply`]: `SADD` of a member already
//!   there, a pop from an absent key...) is answered like a read, without
//!   a log entry, as Redis neither propagates such a write nor wakes a
//!   `WATCH` with it: it joins a read group and is checked again when the
//!   group's barrier is through; if it would change something by then, it
//!   is proposed there and the requests behind it wait for it.
//!
//! A single node (`xlane kv serve` without `--peer`) is a group of one
//! member and is served by this same loop.
//!
//! Membership requests (`RAFT.NODE ADD/REMOVE`, [`MemberCmd`]) are proposed
//! as Raft membership changes carrying the new member's addresses, and
//! answered `+OK` once applied on this member (the leader; a follower
//! answers `-MOVED` as for writes). `RAFT.NODES` lists the member table.
//! Pub/sub ([`crate::pubsub`]): a connection that subscribed takes only
//! `(P)SUBSCRIBE`, `(P)UNSUBSCRIBE`, `PING` and `QUIT`, as in Redis. At the
//! end of every turn the loop takes the keyspace events of the writes the
//! turn applied from the store (leader and followers alike) and hands them
//! to the subscribers under this member's `notify-keyspace-events`; the
//! store queues events only while someone subscribes and the setting has
//! `K` or `E`. A subscriber whose unsent messages pass [`PUBSUB_OUT_LIMIT`]
//! is disconnected (Redis' hard limit for pub/sub clients).
//!
//! Work per turn is bounded: at most [`MAX_EVENTS`] ready descriptors,
//! [`TURN_COMMANDS`] commands and [`READ_BUDGET`] input bytes per
//! connection, and [`ANSWER_BUDGET`] reply bytes of read groups. A
//! connection with [`MAX_QUEUED`] unanswered requests or
//! [`OUT_HIGH`] unsent reply bytes is not read until it drains.

mod conn;
mod reads;
use conn::{Ask, Conn, Pending, Query, Shape, Slot};
use reads::{each, quiet_ask, Answer};

use crate::client_list::{command_name, list_reply, ClientFacts, ListFilter};
use crate::commands::{classify, config_get, Action, MemberCmd, PubSubCmd, SettingCmd};
use crate::members::{encode_member, Members, Peer};
use crate::pubsub::{subscribed_pong, NotifyFlags, Registry};
use crate::raft::{replica_error, READ_RETRIES};
use crate::replicator::{ReplicaError, SharedStore};
use crate::resp::{Command, Limits, Parser, Reply};
use crate::session::{now_ms, replica_error_reply, session_command, Session, Stats};
use crate::txn::Step;
use std::collections::VecDeque;
use std::io::{ErrorKind, Read, Write};
use std::net::TcpListener;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;
use xlane_xraft::driver::{Frontend, Outcome, ReplicateError, Submit};
use xlane_xraft::ConfChangeType;

/// Bytes of a command's name kept for `CLIENT LIST`.
const MAX_CMD_NAME: usize = 32;

/// `CLIENT LIST ...` or `CLIENT INFO`: answered from every connection.
fn is_client_listing(args: &Command) -> bool {
    args.len() >= 2
        && args[0].eq_ignore_ascii_case(b"client")
        && (args[1].eq_ignore_ascii_case(b"list")
            || (args[1].eq_ignore_ascii_case(b"info") && args.len() == 2))
}

/// Ready descriptors handled per turn.
pub const MAX_EVENTS: usize = 64;
/// Commands taken from one connection per turn.
pub const TURN_COMMANDS: usize = 512;
/// Input bytes read from one connection per turn.
pub const READ_BUDGET: usize = 256 << 10;
/// Unanswered requests per connection before its input is left unread.
pub const MAX_QUEUED: usize = 4096;
/// Unsent reply bytes per connection before its input is left unread.
pub const OUT_HIGH: usize = 1 << 20;

/// Reply bytes answered from the store for read groups per driver turn:
/// a turn whose barriers release many large reads (`LRANGE` of hundreds of
/// elements, pipelined on every connection) answers the rest in the next
/// turns, so that no turn delays the raft messages and heartbeats behind
/// it for long.
pub const ANSWER_BUDGET: usize = 512 << 10;

/// Unsent bytes of a subscriber before it is disconnected.
pub const PUBSUB_OUT_LIMIT: usize = 32 << 20;

/// The epoll key of the listener (connections count from 1).
const LISTENER: u64 = 0;

/// An epoll set (level-triggered).
struct Epoll(OwnedFd);

impl Epoll {
    fn new() -> std::io::Result<Epoll> {
        // SAFETY: no pointers; the returned descriptor is checked.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: `fd` is a fresh descriptor owned by nobody else.
        Ok(Epoll(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    fn ctl(&self, op: libc::c_int, fd: RawFd, events: u32, key: u64) -> std::io::Result<()> {
        let mut ev = libc::epoll_event { events, u64: key };
        // SAFETY: a valid epoll descriptor and event struct.
        if unsafe { libc::epoll_ctl(self.0.as_raw_fd(), op, fd, &mut ev) } < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    }

    /// The ready descriptors, without waiting.
    fn poll(&self, out: &mut [libc::epoll_event]) -> usize {
        // SAFETY: `out` has room for `out.len()` events.
        let n = unsafe {
            libc::epoll_wait(
                self.0.as_raw_fd(),
                out.as_mut_ptr(),
                out.len() as libc::c_int,
                0,
            )
        };
        n.max(0) as usize
    }
}

/// A request that starts once every earlier one of its connection is
/// answered.
enum Deferred {
    /// A group of reads (one barrier, then the store).
    Reads(Vec<Query>),
    /// `WATCH`: the keys' versions, read once this connection's earlier
    /// writes have applied (see crate::txn: a version read behind other
    /// connections' writes can only make EXEC abort).
    Watch(Vec<Vec<u8>>),
}

/// Submission tokens and the connection each belongs to.
#[derive(Default)]
struct Tokens {
    next: u64,
    /// Two lookups per request: a hash that costs one multiplication.
    owner: fxhash::FxHashMap<u64, u64>,
}

impl Tokens {
    /// A fresh token for a submission of connection `conn`.
    fn issue(&mut self, conn: u64) -> u64 {
        self.next += 1;
        self.owner.insert(self.next, conn);
        self.next
    }

    /// The connection of `token`, which is used up.
    fn take(&mut self, token: u64) -> Option<u64> {
        self.owner.remove(&token)
    }
}

/// The [`Answer`] of connection `id` from the loop's fields (a macro, so
/// that the connection itself can stay borrowed from `conns`).
macro_rules! answer_ctx {
    ($loop:ident, $id:expr) => {
        Answer {
            store: &$loop.store,
            tokens: &mut $loop.tokens,
            members: &$loop.members,
            me: $loop.me,
            id: $id,
            budget: &mut $loop.budget,
        }
    };
}

/// Whether this member's network can reach a member about to be added (its
/// id and addresses); the reason if not.
pub type PeerCheck = Box<dyn Fn(u64, &Peer) -> Result<(), String> + Send>;

/// The member's RESP clients as an X-Raft [`Frontend`].
pub struct ClientLoop {
    epoll: Epoll,
    listener: TcpListener,
    limits: Limits,
    store: SharedStore,
    members: Members,
    check: PeerCheck,
    me: u64,
    stats: Arc<Stats>,
    conns: fxhash::FxHashMap<u64, Conn>,
    next_conn: u64,
    tokens: Tokens,
    /// Connections with bytes to write or a state to settle this turn.
    dirty: Vec<u64>,
    /// Connections with commands left over from a turn's budget.
    again: Vec<u64>,
    events: Vec<libc::epoll_event>,
    chunk: Vec<u8>,
    /// Subscriptions of the connections.
    subs: Registry,
    /// This member's `notify-keyspace-events`.
    notify: NotifyFlags,
    /// The event classes the store queues now.
    store_classes: NotifyFlags,
    /// Messages for subscribers, handed out at the end of the turn.
    outbox: Vec<(u64, Vec<u8>)>,
    /// The leader's active expiry ([`crate::expiry`]).
    expiry: crate::expiry::ExpiryCycle,
    /// What is left of this turn's [`ANSWER_BUDGET`].
    budget: usize,
}

impl ClientLoop {
    /// Serves `listener` for member `me` of `members`, reading from `store`.
    pub fn new(
        listener: TcpListener,
        limits: Limits,
        store: SharedStore,
        members: Members,
        me: u64,
        stats: Arc<Stats>,
    ) -> std::io::Result<ClientLoop> {
        listener.set_nonblocking(true)?;
        let epoll = Epoll::new()?;
        epoll.ctl(
            libc::EPOLL_CTL_ADD,
            listener.as_raw_fd(),
            libc::EPOLLIN as u32,
            LISTENER,
        )?;
        Ok(ClientLoop {
            epoll,
            listener,
            limits,
            store,
            members,
            check: Box::new(|_, _| Ok(())),
            me,
            stats,
            conns: Default::default(),
            next_conn: LISTENER + 1,
            tokens: Tokens::default(),
            dirty: Vec::new(),
            again: Vec::new(),
            events: vec![libc::epoll_event { events: 0, u64: 0 }; MAX_EVENTS],
            chunk: vec![0; 64 << 10],
            subs: Registry::new(),
            notify: NotifyFlags::NONE,
            store_classes: NotifyFlags::NONE,
            outbox: Vec::new(),
            expiry: Default::default(),
            budget: ANSWER_BUDGET,
        })
    }

    /// Refuses `RAFT.NODE ADD` of a member `check` says the network cannot
    /// reach (e.g. an id or address the lane cannot serve), before anything
    /// is proposed: a member added that no one can reach would only count
    /// against the quorum.
    pub fn check_peers_with(mut self, check: PeerCheck) -> ClientLoop {
        self.check = check;
        self
    }

    fn accept(&mut self) {
        for _ in 0..MAX_EVENTS {
            let stream = match self.listener.accept() {
                Ok((s, _)) => s,
                Err(_) => return, // WouldBlock, or a connection that died queued
            };
            let id = self.next_conn;
            self.next_conn += 1;
            let interest = libc::EPOLLIN as u32;
            if stream.set_nonblocking(true).is_err()
                || self
                    .epoll
                    .ctl(libc::EPOLL_CTL_ADD, stream.as_raw_fd(), interest, id)
                    .is_err()
            {
                continue; // dropping the stream closes it
            }
            let _ = stream.set_nodelay(true);
            self.stats.connections.fetch_add(1, Ordering::Relaxed);
            self.conns.insert(
                id,
                Conn {
                    stream,
                    parser: Parser::new(self.limits),
                    session: Session::new(),
                    out: Vec::new(),
                    queue: VecDeque::new(),
                    read_waiting: false,
                    joinable: false,
                    deferred: None,
                    held: None,
                    quit: false,
                    eof: false,
                    more: false,
                    interest,
                    dirty: false,
                    shape: None,
                    since: Instant::now(),
                    last_input: Instant::now(),
                    last_cmd: Vec::new(),
                },
            );
        }
    }

    fn mark(&mut self, id: u64) {
        if let Some(c) = self.conns.get_mut(&id) {
            if !c.dirty {
                c.dirty = true;
                self.dirty.push(id);
            }
        }
    }

    /// Reads what the client sent (within the turn's budget).
    fn read_input(&mut self, id: u64) {
        let Some(c) = self.conns.get_mut(&id) else {
            return;
        };
        let mut got = 0;
        while got < READ_BUDGET && !c.eof && !c.stalled() {
            match c.stream.read(&mut self.chunk) {
                Ok(0) => c.eof = true,
                Ok(n) => {
                    c.last_input = Instant::now();
                    c.parser.feed(&self.chunk[..n]);
                    got += n;
                    if n < self.chunk.len() {
                        // All there was (level-triggered: more is reported
                        // by the next wait), without a read that finds none.
                        break;
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => {
                    // Reset by the peer: nothing more can be answered.
                    c.eof = true;
                    c.quit = true;
                    c.out.clear();
                }
            }
        }
    }

    /// Runs the connection's parsed commands until it stalls, runs out of
    /// input or uses up the turn's budget.
    fn pump(&mut self, id: u64, sub: &mut dyn Submit) {
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
                                c.session.txn.watch(v.collect());
                                Reply::ok()
                            }
                            Err(_) => Reply::err("ERR store lock poisoned"),
                        };
                        c.emit(&reply);
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
            let args = match c.held.take() {
                Some(a) => a,
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
                    args
                }
            };
            c.shape = c.session.resp3.then(|| Shape::of(&args, None));
            if joining {
                let subscribed = self.subs.count(id) > 0;
                let now = *clock.get_or_insert_with(now_ms);
                let q =
                    quiet_ask(&args, c, subscribed, &self.store, leader, now).map(|ask| Query {
                        ask,
                        shape: c.shape.clone(),
                    });
                match q.map(|q| c.join(q)) {
                    Some(Ok(())) => continue,
                    _ => {
                        // Runs once the group ahead of it is answered.
                        c.held = Some(args);
                        c.more = true;
                        break;
                    }
                }
            }
            if is_client_listing(&args) && !c.session.txn.in_multi() {
                let reply = self.client_listing(id, &args);
                let Some(again) = self.conns.get_mut(&id) else {
                    return;
                };
                c = again;
                c.emit(&reply);
                continue;
            }
            if self.subs.count(id) > 0 {
                if let Some(bytes) = subscribed_only(&args) {
                    c.emit_bytes(bytes);
                    continue;
                }
            }
            if let Some(r) = session_command(&mut c.session, &args) {
                // HELLO answers in the protocol it switched to.
                c.shape = c.session.resp3.then(|| Shape::of(&args, None));
                c.emit(&r);
                continue;
            }
            let now = *clock.get_or_insert_with(now_ms);
            let action = match c.session.txn.step(&args, now) {
                Step::Pass => classify(args, now),
                Step::Reply(r) => Action::Reply(r),
                Step::Exec(op) => {
                    if c.session.resp3 {
                        c.shape = Some(Shape::of(&args, Some(&Step::Exec(op.clone()))));
                    }
                    Action::Write(op)
                }
                Step::Watch(keys) => {
                    c.deferred = Some(Deferred::Watch(keys));
                    continue;
                }
            };
            match action {
                Action::Reply(r) => c.emit(&r),
                Action::Quit => {
                    c.emit(&Reply::ok());
                    c.quit = true;
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
                            c.deferred = Some(Deferred::Reads(vec![Query { ask, shape }]));
                        }
                        continue;
                    }
                    let token = self.tokens.issue(id);
                    match sub.propose(op.encode(), token) {
                        Ok(()) => c.wait(token, Slot::Write),
                        Err(e) => {
                            self.tokens.take(token);
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
                    let shape = c.shape.clone();
                    let ask = Ask::Read(cmd);
                    c.deferred = Some(Deferred::Reads(vec![Query { ask, shape }]));
                }
                Action::PubSub(cmd) => {
                    let bytes = match cmd {
                        PubSubCmd::Subscribe(n) => self.subs.subscribe(id, &n, false),
                        PubSubCmd::PSubscribe(n) => self.subs.subscribe(id, &n, true),
                        PubSubCmd::Unsubscribe(n) => self.subs.unsubscribe(id, &n, false),
                        PubSubCmd::PUnsubscribe(n) => self.subs.unsubscribe(id, &n, true),
                        PubSubCmd::Publish { channel, message } => {
                            let outbox = &mut self.outbox;
                            let n = self
                                .subs
                                .publish(&channel, &message, &mut |to, b| outbox.push((to, b)));
                            Reply::Integer(n as i64).to_bytes()
                        }
                    };
                    c.emit_bytes(bytes);
                }
                Action::Setting(SettingCmd::ConfigGet(p)) => c.emit(&config_get(&p, self.notify)),
                Action::Setting(SettingCmd::SetNotify(f)) => {
                    self.notify = f;
                    c.emit(&Reply::ok());
                }
            }
        }
        // Requests that arrive from now on take the next barrier.
        c.joinable = false;
        self.mark(id);
    }

    /// Writes the connection's pending bytes; closes it when it is done.
    fn settle(&mut self, id: u64) {
        let Some(c) = self.conns.get_mut(&id) else {
            return;
        };
        c.dirty = false;
        let mut written = 0;
        let mut broken = false;
        while written < c.out.len() {
            match c.stream.write(&c.out[written..]) {
                Ok(0) => {
                    broken = true;
                    break;
                }
                Ok(n) => written += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => {
                    broken = true;
                    break;
                }
            }
        }
        c.out.drain(..written);
        let answered = c.queue.is_empty() && c.deferred.is_none() && c.held.is_none() && !c.more;
        let done = c.out.is_empty() && (c.quit || (c.eof && answered));
        if broken || done {
            self.close(id);
            return;
        }
        // Commands left in the parser by a stall that has cleared.
        if c.more && !c.stalled() && !self.again.contains(&id) {
            self.again.push(id);
        }
        // Level-triggered: no EPOLLIN while the input cannot be taken (it
        // would wake the loop for nothing); end of input shows as readable.
        let mut want = 0;
        if !c.eof && !c.stalled() {
            want |= libc::EPOLLIN as u32;
        }
        if !c.out.is_empty() {
            want |= libc::EPOLLOUT as u32;
        }
        if want != c.interest {
            let fd = c.stream.as_raw_fd();
            if self.epoll.ctl(libc::EPOLL_CTL_MOD, fd, want, id).is_err() {
                self.close(id);
                return;
            }
            if let Some(c) = self.conns.get_mut(&id) {
                c.interest = want;
            }
        }
    }

    fn close(&mut self, id: u64) {
        self.subs.drop_conn(id);
        if let Some(c) = self.conns.remove(&id) {
            let _ = self
                .epoll
                .ctl(libc::EPOLL_CTL_DEL, c.stream.as_raw_fd(), 0, id);
            // Outcomes still to come for it find no connection and are dropped.
        }
    }

    /// Open connections (for tests and tools).
    pub fn connections(&self) -> usize {
        self.conns.len()
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

    /// Takes the keyspace events of the writes applied so far from the
    /// store and queues them, with the messages `PUBLISH` left, for their
    /// subscribers; tells the store which classes to queue from now on.
    fn deliver_messages(&mut self) {
        let classes = if self.subs.is_empty() {
            NotifyFlags::NONE
        } else {
            self.notify.classes()
        };
        if classes != self.store_classes || !classes.is_empty() {
            let events: Vec<_> = match self.store.write() {
                Ok(mut s) => {
                    let ev = s.drain_events().collect();
                    s.set_notifications(classes);
                    ev
                }
                Err(_) => Vec::new(),
            };
            self.store_classes = classes;
            let outbox = &mut self.outbox;
            for ev in &events {
                self.subs
                    .notify(self.notify, ev, &mut |to, b| outbox.push((to, b)));
            }
        }
        let mut over = Vec::new();
        for (to, bytes) in std::mem::take(&mut self.outbox) {
            if let Some(c) = self.conns.get_mut(&to) {
                c.emit_bytes(bytes);
                if c.out.len() > PUBSUB_OUT_LIMIT {
                    over.push(to);
                }
                self.mark(to);
            }
        }
        for id in over {
            self.close(id);
        }
    }
}

/// A command on a subscribed connection: `None` for the (un)subscriptions
/// and `QUIT`, which run as usual; the reply of `PING`; an error for every
/// other command.
fn subscribed_only(args: &crate::resp::Command) -> Option<Vec<u8>> {
    let name = args.first()?.to_ascii_lowercase();
    match name.as_slice() {
        b"subscribe" | b"psubscribe" | b"unsubscribe" | b"punsubscribe" | b"quit" => None,
        b"ping" if args.len() <= 2 => Some(subscribed_pong(args.get(1).map(|v| v.as_slice()))),
        _ => Some(
            Reply::err(format!(
                "ERR Can't execute '{}': only (P)SUBSCRIBE / (P)UNSUBSCRIBE / PING / QUIT \
                 are allowed in this context",
                String::from_utf8_lossy(&name)
            ))
            .to_bytes(),
        ),
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

impl Frontend for ClientLoop {
    fn fd(&self) -> RawFd {
        self.epoll.0.as_raw_fd()
    }

    fn turn(&mut self, sub: &mut dyn Submit, readable: bool) -> bool {
        // Expiry as the leader decides it: one bounded batch a turn, token 0
        // (never issued: its outcome is dropped); a follower's is refused.
        let op = match self.store.read() {
            Ok(s) => self.expiry.poll(&s, now_ms()),
            Err(_) => None,
        };
        if let Some(op) = op {
            let _ = sub.propose(op.encode(), 0);
        }
        for id in std::mem::take(&mut self.again) {
            self.pump(id, sub);
        }
        // Nothing new unless the epoll set was readable (level-triggered:
        // what is left unread now is reported again).
        let n = if readable {
            self.epoll.poll(&mut self.events)
        } else {
            0
        };
        for i in 0..n {
            let (key, ev) = (self.events[i].u64, self.events[i].events);
            if key == LISTENER {
                self.accept();
                continue;
            }
            if ev & (libc::EPOLLHUP | libc::EPOLLERR) as u32 != 0 {
                // Reset or gone both ways: nothing can be answered any more
                // (reported whatever the interest, so it must not linger).
                self.close(key);
                continue;
            }
            if ev & libc::EPOLLIN as u32 != 0 {
                self.read_input(key);
                self.pump(key, sub);
            }
            self.mark(key);
        }
        !self.again.is_empty() || n == MAX_EVENTS
    }

    fn complete(&mut self, token: u64, outcome: Outcome, sub: &mut dyn Submit) {
        let Some(id) = self.tokens.take(token) else {
            return;
        };
        let Some(c) = self.conns.get_mut(&id) else {
            return;
        };
        let Some(at) = c.queue.iter().position(|p| p.token == token) else {
            return;
        };
        let failed = |e: ReplicateError| {
            let e = replica_error(e, |h| self.members.client_of(self.me, h));
            replica_error_reply(&e, None).to_bytes()
        };
        let p = &mut c.queue[at];
        match (&mut p.slot, outcome) {
            (Slot::Write, Outcome::Applied(bytes)) => p.slot = Slot::Done(bytes),
            (Slot::Write, Outcome::Failed(e)) => p.slot = Slot::Done(failed(e)),
            (Slot::Member, Outcome::Applied(_)) => p.slot = Slot::Done(Reply::ok().to_bytes()),
            (Slot::Member, Outcome::Failed(ReplicateError::Dropped { indeterminate })) => {
                let r = Reply::err(if indeterminate {
                    "ERR leadership changed; the membership change may or may not have been applied (see RAFT.NODES)"
                } else {
                    "ERR leadership changed; the membership change was not applied"
                });
                p.slot = Slot::Done(r.to_bytes());
            }
            (Slot::Member, Outcome::Failed(e)) => p.slot = Slot::Done(failed(e)),
            (Slot::Read { .. }, Outcome::ReadReady) => {
                let mut ctx = answer_ctx!(self, id);
                // What the budget leaves is answered by the pump below or
                // in a later turn.
                ctx.answer(c, at, sub);
            }
            (Slot::Read { tries, .. }, Outcome::Failed(ReplicateError::ReadFailed))
                if *tries < READ_RETRIES =>
            {
                *tries += 1;
                p.token = self.tokens.issue(id);
                sub.read_barrier(p.token);
                return;
            }
            (Slot::Read { .. }, Outcome::Failed(ReplicateError::ReadFailed)) => {
                let e = ReplicaError::Unavailable(crate::raft::READ_UNCONFIRMED.into());
                p.slot = Slot::Done(each(&p.slot, replica_error_reply(&e, None).to_bytes()));
                c.read_waiting = false;
            }
            (Slot::Read { .. }, Outcome::Failed(e)) => {
                p.slot = Slot::Done(each(&p.slot, failed(e)));
                c.read_waiting = false;
            }
            // An outcome of the wrong kind for its request: a driver bug;
            // answer it as an error rather than hang the connection.
            (_, _) => {
                let r = Reply::err("ERR internal: mismatched outcome").to_bytes();
                p.slot = Slot::Done(each(&p.slot, r));
                c.read_waiting = false;
            }
        }
        let p = &mut c.queue[at];
        if let (Some(s), Slot::Done(b)) = (&p.shape, &mut p.slot) {
            *b = s.convert(std::mem::take(b));
        }
        c.release();
        self.pump(id, sub);
    }

    fn flush(&mut self) -> bool {
        self.budget = ANSWER_BUDGET;
        self.deliver_messages();
        for id in std::mem::take(&mut self.dirty) {
            self.settle(id);
        }
        !self.again.is_empty()
    }
}

#[cfg(test)]
mod tests;
