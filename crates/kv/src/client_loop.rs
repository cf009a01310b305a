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
//! * a read starts only when nothing earlier is pending, and nothing later
//!   starts while its read barrier waits, so a read sees every earlier write
//!   of the same connection and none of its later ones. The read barriers
//!   of one turn share one read index; on a leader that is its group's only
//!   voter (a single node) reads need none and are answered at once.
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
//! connection. A connection with [`MAX_QUEUED`] unanswered requests or
//! [`OUT_HIGH`] unsent reply bytes is not read until it drains.

use crate::commands::{classify, config_get, Action, MemberCmd, PubSubCmd, ReadCmd, SettingCmd};
use crate::members::{encode_member, Members, Peer};
use crate::pubsub::{subscribed_pong, NotifyFlags, Registry};
use crate::raft::{replica_error, READ_RETRIES};
use crate::replicator::{ReplicaError, SharedStore};
use crate::resp::{Limits, Parser, Reply};
use crate::session::{now_ms, replica_error_reply, session_command, Session, Stats};
use crate::txn::Step;
use std::collections::{HashMap, VecDeque};
use std::io::{ErrorKind, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use xlane_xraft::driver::{Frontend, Outcome, ReplicateError, Submit};
use xlane_xraft::ConfChangeType;

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
    /// A read (its barrier, then the store).
    Read(ReadCmd),
    /// `WATCH`: the keys' versions, read once this connection's earlier
    /// writes have applied (see crate::txn: a version read behind other
    /// connections' writes can only make EXEC abort).
    Watch(Vec<Vec<u8>>),
}

/// What an unanswered request waits for.
enum Slot {
    /// Its write to be applied.
    Write,
    /// Its read barrier (attempt `tries` of [`READ_RETRIES`]).
    Read { cmd: ReadCmd, tries: usize },
    /// Its membership change to be applied.
    Member,
    /// Nothing: the reply is ready, behind an earlier one that is not.
    Done(Vec<u8>),
}

struct Pending {
    token: u64,
    slot: Slot,
}

struct Conn {
    stream: TcpStream,
    parser: Parser,
    session: Session,
    /// Reply bytes not yet written.
    out: Vec<u8>,
    /// Unanswered requests, oldest first.
    queue: VecDeque<Pending>,
    /// A read barrier waits in `queue`: nothing later starts.
    read_waiting: bool,
    /// A read not started yet: it waits for the earlier replies.
    deferred: Option<Deferred>,
    /// `QUIT` or a protocol error: close once `out` is written.
    quit: bool,
    /// The client closed its side: close once everything is answered.
    eof: bool,
    /// Commands may wait in the parser: the last pump stopped on a stall or
    /// the turn's budget, not on an empty parser.
    more: bool,
    /// The epoll events registered now.
    interest: u32,
    /// Listed in `ClientLoop::dirty`.
    dirty: bool,
}

impl Conn {
    fn stalled(&self) -> bool {
        self.quit
            || self.read_waiting
            || self.deferred.is_some()
            || self.queue.len() >= MAX_QUEUED
            || self.out.len() >= OUT_HIGH
    }

    /// Queues a reply behind the pending ones (or straight out).
    fn emit(&mut self, reply: &Reply) {
        if self.queue.is_empty() {
            reply.encode(&mut self.out);
        } else {
            self.queue.push_back(Pending {
                token: 0,
                slot: Slot::Done(reply.to_bytes()),
            });
        }
    }

    /// Queues encoded bytes (a pub/sub reply or message) the same way.
    fn emit_bytes(&mut self, bytes: Vec<u8>) {
        if self.queue.is_empty() {
            self.out.extend_from_slice(&bytes);
        } else {
            self.queue.push_back(Pending {
                token: 0,
                slot: Slot::Done(bytes),
            });
        }
    }

    /// Moves the ready replies at the head of the queue out.
    fn release(&mut self) {
        while let Some(Pending {
            slot: Slot::Done(_),
            ..
        }) = self.queue.front()
        {
            if let Some(Pending {
                slot: Slot::Done(b),
                ..
            }) = self.queue.pop_front()
            {
                self.out.extend_from_slice(&b);
            }
        }
    }
}

/// Submission tokens and the connection each belongs to.
#[derive(Default)]
struct Tokens {
    next: u64,
    owner: HashMap<u64, u64>,
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
    conns: HashMap<u64, Conn>,
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
            conns: HashMap::new(),
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
                    deferred: None,
                    quit: false,
                    eof: false,
                    more: false,
                    interest,
                    dirty: false,
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
        let Some(c) = self.conns.get_mut(&id) else {
            return;
        };
        let mut budget = TURN_COMMANDS;
        loop {
            if c.queue.is_empty() {
                match c.deferred.take() {
                    Some(Deferred::Read(cmd)) => {
                        start_read(c, cmd, &self.store, &mut self.tokens, id, sub);
                        continue;
                    }
                    Some(Deferred::Watch(keys)) => {
                        let reply = match self.store.read() {
                            Ok(s) => {
                                let now = now_ms();
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
            if c.stalled() {
                c.more = true;
                break;
            }
            if budget == 0 {
                c.more = true;
                self.again.push(id);
                break;
            }
            budget -= 1;
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
            if self.subs.count(id) > 0 {
                if let Some(bytes) = subscribed_only(&args) {
                    c.emit_bytes(bytes);
                    continue;
                }
            }
            if let Some(r) = session_command(&mut c.session, &args) {
                c.emit(&r);
                continue;
            }
            let now = now_ms();
            let action = match c.session.txn.step(&args, now) {
                Step::Pass => classify(&args, now),
                Step::Reply(r) => Action::Reply(r),
                Step::Exec(op) => Action::Write(op),
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
                    let token = self.tokens.issue(id);
                    match sub.propose(op.encode(), token) {
                        Ok(()) => c.queue.push_back(Pending {
                            token,
                            slot: Slot::Write,
                        }),
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
                        Ok(()) => c.queue.push_back(Pending {
                            token,
                            slot: Slot::Member,
                        }),
                        Err(e) => {
                            self.tokens.take(token);
                            let e = replica_error(e, |h| self.members.client_of(self.me, h));
                            c.emit(&replica_error_reply(&e, None));
                        }
                    }
                }
                // Started at the top of the loop once nothing earlier is
                // pending (at once if nothing is).
                Action::Read(cmd) => c.deferred = Some(Deferred::Read(cmd)),
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
        let answered = c.queue.is_empty() && c.deferred.is_none() && !c.more;
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

/// Starts `cmd` on connection `c` (nothing earlier is pending): at once
/// from the store (`READONLY`, or a leader that is its group's only voter:
/// [`Submit::reads_local`]), or after a read barrier.
fn start_read(
    c: &mut Conn,
    cmd: ReadCmd,
    store: &SharedStore,
    tokens: &mut Tokens,
    id: u64,
    sub: &mut dyn Submit,
) {
    if cmd.needs_barrier() && !c.session.readonly && !sub.reads_local() {
        let token = tokens.issue(id);
        sub.read_barrier(token);
        c.queue.push_back(Pending {
            token,
            slot: Slot::Read { cmd, tries: 1 },
        });
        c.read_waiting = true;
    } else {
        c.emit(&read_now(store, &cmd));
    }
}

fn read_now(store: &SharedStore, cmd: &ReadCmd) -> Reply {
    match store.read() {
        Ok(s) => cmd.execute(&s, now_ms()),
        Err(_) => Reply::err("ERR store lock poisoned"),
    }
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
        let Some(p) = c.queue.iter_mut().find(|p| p.token == token) else {
            return;
        };
        let failed = |e: ReplicateError| {
            let e = replica_error(e, |h| self.members.client_of(self.me, h));
            replica_error_reply(&e, None).to_bytes()
        };
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
            (Slot::Read { cmd, .. }, Outcome::ReadReady) => {
                p.slot = Slot::Done(read_now(&self.store, cmd).to_bytes());
                c.read_waiting = false;
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
                p.slot = Slot::Done(replica_error_reply(&e, None).to_bytes());
                c.read_waiting = false;
            }
            (Slot::Read { .. }, Outcome::Failed(e)) => {
                p.slot = Slot::Done(failed(e));
                c.read_waiting = false;
            }
            // An outcome of the wrong kind for its request: a driver bug;
            // answer it as an error rather than hang the connection.
            (_, _) => {
                p.slot = Slot::Done(Reply::err("ERR internal: mismatched outcome").to_bytes());
                c.read_waiting = false;
            }
        }
        c.release();
        self.pump(id, sub);
    }

    fn flush(&mut self) -> bool {
        self.deliver_messages();
        for id in std::mem::take(&mut self.dirty) {
            self.settle(id);
        }
        !self.again.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::members::Peer;
    use crate::raft::tests::free_udp_port;
    use crate::raft::{LogFsync, RaftConfig, RaftReplicator, StorageConfig};
    use crate::resp::{decode_reply, encode_command};
    use std::collections::BTreeMap;
    use std::net::SocketAddr;
    use std::time::{Duration, Instant};

    /// Members `1..=n`, each serving its clients from its driver thread.
    struct Members {
        nodes: Vec<RaftReplicator>,
        clients: Vec<SocketAddr>,
        stats: Vec<Arc<Stats>>,
        _dirs: Vec<tempfile::TempDir>,
    }

    impl Drop for Members {
        fn drop(&mut self) {
            for n in &self.nodes {
                n.shutdown();
            }
        }
    }

    fn start(n: u64) -> Members {
        let listeners: Vec<TcpListener> = (0..n)
            .map(|_| TcpListener::bind("127.0.0.1:0").expect("listen"))
            .collect();
        let clients: Vec<SocketAddr> = listeners
            .iter()
            .map(|l| l.local_addr().expect("addr"))
            .collect();
        let peers: BTreeMap<u64, Peer> = (1..=n)
            .map(|id| {
                let client = clients[id as usize - 1].to_string();
                let raft = free_udp_port();
                (id, Peer { raft, client })
            })
            .collect();
        let dirs: Vec<_> = (0..n).map(|_| tempfile::tempdir().expect("dir")).collect();
        let mut stats = Vec::new();
        let nodes = listeners
            .into_iter()
            .zip(1..=n)
            .map(|(l, id)| {
                let mut st = StorageConfig::new(dirs[id as usize - 1].path());
                st.fsync = LogFsync::Never;
                let cfg =
                    RaftConfig::new(id, peers.clone(), st, 10_000_000, 20_000_000).expect("cfg");
                let s = Arc::new(Stats::default());
                stats.push(s.clone());
                RaftReplicator::start_serving(cfg, l, Limits::default(), s)
                    .expect("start")
                    .0
            })
            .collect();
        Members {
            nodes,
            clients,
            stats,
            _dirs: dirs,
        }
    }

    fn connect(a: SocketAddr) -> TcpStream {
        let s = TcpStream::connect(a).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        s
    }

    fn send(s: &mut TcpStream, cmds: &[&[&str]]) {
        let mut out = Vec::new();
        for c in cmds {
            let args: Vec<Vec<u8>> = c.iter().map(|w| w.as_bytes().to_vec()).collect();
            encode_command(&args, &mut out);
        }
        s.write_all(&out).expect("send");
    }

    /// Reads `n` replies (fewer if the server closes first).
    fn replies(s: &mut TcpStream, n: usize) -> Vec<Reply> {
        let mut buf = Vec::new();
        let mut got = Vec::new();
        let mut chunk = [0u8; 4096];
        while got.len() < n {
            match decode_reply(&buf).expect("well-formed reply") {
                Some((r, used)) => {
                    got.push(r);
                    buf.drain(..used);
                }
                None => match s.read(&mut chunk).expect("read") {
                    0 => break,
                    k => buf.extend_from_slice(&chunk[..k]),
                },
            }
        }
        got
    }

    fn cmd(s: &mut TcpStream, c: &[&str]) -> Reply {
        send(s, &[c]);
        replies(s, 1).pop().expect("a reply")
    }

    /// The member whose client port takes a write (the leader).
    fn leader(m: &Members) -> usize {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            assert!(Instant::now() < deadline, "no leader");
            for (i, &a) in m.clients.iter().enumerate() {
                if cmd(&mut connect(a), &["SET", "probe", "x"]) == Reply::ok() {
                    return i;
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn bulk(s: &str) -> Reply {
        Reply::bulk(s.as_bytes())
    }

    /// One pipelined write of writes and reads: the replies come in request
    /// order and each read sees exactly the writes before it.
    #[test]
    fn pipelined_requests_are_answered_in_order() {
        let m = start(3);
        let l = leader(&m);
        let mut c = connect(m.clients[l]);
        send(
            &mut c,
            &[
                &["SET", "a", "1"],
                &["GET", "a"],
                &["INCR", "n"],
                &["INCR", "n"],
                &["GET", "n"],
                &["SET", "a", "2"],
                &["APPEND", "a", "x"],
                &["PING"],
                &["GET", "a"],
                &["NOSUCH"],
                &["GET", "n"],
            ],
        );
        let r = replies(&mut c, 11);
        assert_eq!(r.len(), 11, "{r:?}");
        assert_eq!(r[0], Reply::ok());
        assert_eq!(r[1], bulk("1"));
        assert_eq!(r[2], Reply::Integer(1));
        assert_eq!(r[3], Reply::Integer(2));
        assert_eq!(r[4], bulk("2"));
        assert_eq!(r[5], Reply::ok());
        assert_eq!(r[6], Reply::Integer(2));
        assert_eq!(r[7], Reply::Simple("PONG".into()));
        assert_eq!(r[8], bulk("2x"));
        assert!(matches!(&r[9], Reply::Error(e) if e.starts_with("ERR unknown command")));
        assert_eq!(r[10], bulk("2"));
    }

    /// Followers redirect writes to the leader's client address and serve
    /// linearizable reads (after a read barrier) and `READONLY` reads.
    #[test]
    fn followers_redirect_writes_and_serve_reads() {
        let m = start(3);
        let l = leader(&m);
        assert_eq!(
            cmd(&mut connect(m.clients[l]), &["SET", "k", "v"]),
            Reply::ok()
        );
        for (i, &a) in m.clients.iter().enumerate() {
            if i == l {
                continue;
            }
            let mut c = connect(a);
            match cmd(&mut c, &["SET", "k", "w"]) {
                Reply::Error(e) => {
                    let want =
                        format!("MOVED {} {}", crate::session::hash_slot(b"k"), m.clients[l]);
                    assert_eq!(e, want);
                }
                r => panic!("follower {i}: {r:?}"),
            }
            assert_eq!(cmd(&mut c, &["GET", "k"]), bulk("v"), "follower {i}");
            assert_eq!(cmd(&mut c, &["READONLY"]), Reply::ok());
            // This member's own state, which already holds `v`.
            assert_eq!(cmd(&mut c, &["GET", "k"]), bulk("v"), "follower {i}");
        }
    }

    /// Membership over RESP: refusals come back as Redis errors, a follower
    /// redirects, and a change is answered once applied, after which every
    /// member lists it.
    #[test]
    fn membership_requests_over_resp() {
        let m = start(3);
        let l = leader(&m);
        let mut c = connect(m.clients[l]);
        let err = |s: String| Reply::Error(s);
        // Node 4 never runs: three of four voters are still a quorum.
        let four = format!("{}/127.0.0.1:1", free_udp_port());
        let taken = format!("{}/127.0.0.1:1", m.nodes[0].raft_addr());
        let rows: Vec<(Vec<&str>, Reply)> = vec![
            (
                vec!["RAFT.NODE", "ADD", "2", &four],
                err("ERR node 2 is already a member".into()),
            ),
            (
                vec!["RAFT.NODE", "ADD", "4", &taken],
                err(format!(
                    "ERR address {} is already used by node 1",
                    m.nodes[0].raft_addr()
                )),
            ),
            (
                vec!["RAFT.NODE", "REMOVE", "9"],
                err("ERR node 9 is not a member".into()),
            ),
            // The members' raft sockets are IPv4: refused before anything is
            // proposed.
            (
                vec!["RAFT.NODE", "ADD", "5", "[::1]:7005/127.0.0.1:2"],
                err(format!(
                    "ERR node 5: raft address [::1]:7005: this member's raft socket is bound to {}",
                    m.nodes[l].raft_addr()
                )),
            ),
            (vec!["RAFT.NODE", "ADD", "4", &four], Reply::ok()),
        ];
        for (req, want) in rows {
            assert_eq!(cmd(&mut c, &req), want, "{req:?}");
        }
        let f = (l + 1) % 3;
        match cmd(&mut connect(m.clients[f]), &["RAFT.NODE", "REMOVE", "4"]) {
            Reply::Error(e) => assert_eq!(e, format!("MOVED 0 {}", m.clients[l])),
            r => panic!("follower: {r:?}"),
        }
        let listed = |i: usize| match cmd(&mut connect(m.clients[i]), &["RAFT.NODES"]) {
            Reply::Array(Some(rows)) => rows.len(),
            r => panic!("RAFT.NODES: {r:?}"),
        };
        for i in 0..3 {
            let deadline = Instant::now() + Duration::from_secs(10);
            while listed(i) != 4 {
                assert!(Instant::now() < deadline, "member {i} does not list node 4");
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        match cmd(&mut c, &["RAFT.NODES"]) {
            Reply::Array(Some(rows)) => assert_eq!(
                rows[3],
                Reply::Array(Some(vec![
                    Reply::Integer(4),
                    bulk(four.split('/').next().expect("raft")),
                    bulk("127.0.0.1:1"),
                ]))
            ),
            r => panic!("RAFT.NODES: {r:?}"),
        }
        assert_eq!(cmd(&mut c, &["RAFT.NODE", "REMOVE", "4"]), Reply::ok());
        assert_eq!(listed(l), 3);
        // Writes go on.
        assert_eq!(cmd(&mut c, &["SET", "after", "1"]), Reply::ok());

        let one = start(1);
        let _ = leader(&one);
        assert_eq!(
            cmd(&mut connect(one.clients[0]), &["RAFT.NODE", "REMOVE", "1"]),
            err("ERR node 1 is the last voter".into())
        );
    }

    /// Many clients at once: every increment is applied once and answered.
    #[test]
    fn concurrent_clients_lose_nothing() {
        let m = start(3);
        let l = leader(&m);
        let addr = m.clients[l];
        let threads: Vec<_> = (0..8)
            .map(|_| {
                std::thread::spawn(move || {
                    let mut c = connect(addr);
                    let mut last = 0;
                    for _ in 0..100 {
                        // Two per round trip: pipelining and concurrency.
                        send(&mut c, &[&["INCR", "ctr"], &["INCR", "ctr"]]);
                        for r in replies(&mut c, 2) {
                            match r {
                                Reply::Integer(v) => {
                                    assert!(v > last, "{v} after {last}");
                                    last = v;
                                }
                                r => panic!("{r:?}"),
                            }
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().expect("client");
        }
        assert_eq!(cmd(&mut connect(addr), &["GET", "ctr"]), bulk("1600"));
    }

    /// Linearizable reads on every member while a writer increments: a read
    /// sent after a write was acknowledged returns that write or a later
    /// one, however many reads share a read index.
    #[test]
    fn reads_see_every_write_acknowledged_before_them() {
        use std::sync::atomic::{AtomicBool, AtomicI64};
        let m = start(3);
        let l = leader(&m);
        let acked = Arc::new(AtomicI64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let writer = {
            let (acked, stop, addr) = (acked.clone(), stop.clone(), m.clients[l]);
            std::thread::spawn(move || {
                let mut c = connect(addr);
                while !stop.load(Ordering::Relaxed) {
                    match cmd(&mut c, &["INCR", "c"]) {
                        Reply::Integer(v) => acked.store(v, Ordering::Release),
                        r => panic!("{r:?}"),
                    }
                }
            })
        };
        let readers: Vec<_> = (0..12)
            .map(|i| {
                let (acked, addr) = (acked.clone(), m.clients[i % 3]);
                std::thread::spawn(move || {
                    let mut c = connect(addr);
                    let mut reads = 0;
                    let mut before = 0;
                    for _ in 0..300 {
                        // Read right after a new acknowledgement, when a
                        // member that served reads without a read index
                        // would most likely not have applied it yet.
                        let deadline = Instant::now() + Duration::from_secs(10);
                        while acked.load(Ordering::Acquire) == before {
                            assert!(Instant::now() < deadline, "writer stalled");
                            std::hint::spin_loop();
                        }
                        before = acked.load(Ordering::Acquire);
                        let v = match cmd(&mut c, &["GET", "c"]) {
                            Reply::Bulk(Some(v)) => String::from_utf8(v)
                                .expect("utf8")
                                .parse::<i64>()
                                .expect("int"),
                            Reply::Bulk(None) => 0,
                            r => panic!("reader {i}: {r:?}"),
                        };
                        assert!(v >= before, "reader {i}: read {v} after {before} was acked");
                        reads += 1;
                    }
                    reads
                })
            })
            .collect();
        let reads: usize = readers.into_iter().map(|r| r.join().expect("reader")).sum();
        stop.store(true, Ordering::Relaxed);
        writer.join().expect("writer");
        assert_eq!(reads, 12 * 300);
        assert!(acked.load(Ordering::Relaxed) > 0, "no write went through");
    }

    /// A client that sends a long pipeline (more than a turn's budget, writes
    /// among it) and then closes its sending side gets every reply, in
    /// order, then the end of the stream.
    #[test]
    fn a_client_that_half_closes_gets_every_reply() {
        let m = start(1);
        let _ = leader(&m);
        let mut c = connect(m.clients[0]);
        // Replies only, so turns end on their budget with nothing pending,
        // and a write last.
        let n = 4 * TURN_COMMANDS;
        let is_write = |i: usize| i == n - 1;
        let cmds: Vec<&[&str]> = (0..n)
            .map(|i| -> &[&str] {
                if is_write(i) {
                    &["INCR", "h"]
                } else {
                    &["PING"]
                }
            })
            .collect();
        send(&mut c, &cmds);
        c.shutdown(std::net::Shutdown::Write).expect("half-close");
        let r = replies(&mut c, n + 1);
        assert_eq!(r.len(), n, "every reply, then the end");
        let mut incr = 0;
        for (i, r) in r.iter().enumerate() {
            if is_write(i) {
                incr += 1;
                assert_eq!(*r, Reply::Integer(incr), "reply {i}");
            } else {
                assert_eq!(*r, Reply::Simple("PONG".into()), "reply {i}");
            }
        }
    }

    /// A protocol error is answered and closes that connection only; a
    /// client that leaves with writes in flight harms nobody; `QUIT`
    /// answers and closes.
    #[test]
    fn bad_and_departing_clients_leave_the_loop_serving() {
        let m = start(1);
        let a = m.clients[0];
        let _ = leader(&m);
        let mut bad = connect(a);
        bad.write_all(b"*1\r\n$-5\r\n").expect("send");
        match replies(&mut bad, 2).as_slice() {
            [Reply::Error(e)] => assert!(e.starts_with("ERR Protocol error"), "{e}"),
            r => panic!("{r:?}"),
        }
        for _ in 0..20 {
            let mut gone = connect(a);
            send(&mut gone, &[&["INCR", "g"], &["INCR", "g"], &["INCR", "g"]]);
            drop(gone);
        }
        let mut q = connect(a);
        send(&mut q, &[&["SET", "q", "1"], &["QUIT"], &["SET", "q", "2"]]);
        assert_eq!(replies(&mut q, 3), vec![Reply::ok(), Reply::ok()]);
        let mut c = connect(a);
        assert_eq!(cmd(&mut c, &["GET", "q"]), bulk("1"));
        match cmd(&mut c, &["GET", "g"]) {
            // Writes of departed clients may or may not have been applied.
            Reply::Bulk(Some(v)) => {
                let v: u64 = String::from_utf8(v).expect("utf8").parse().expect("int");
                assert!(v <= 60, "{v}");
            }
            r => assert_eq!(r, Reply::nil()),
        }
        assert_eq!(m.stats[0].protocol_errors.load(Ordering::Relaxed), 1);
        let deadline = Instant::now() + Duration::from_secs(10);
        while m.stats[0].connections.load(Ordering::Relaxed) < 24 {
            assert!(Instant::now() < deadline, "connections not counted");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn bulks(v: &[&str]) -> Reply {
        Reply::Array(Some(v.iter().map(|w| bulk(w)).collect()))
    }

    /// Keyspace notifications fire on every member when a write applies,
    /// followers included; a subscribed connection takes only pub/sub
    /// commands and PING; INFO carries the leader's term.
    #[test]
    fn every_member_notifies_its_subscribers_of_applied_writes() {
        let m = start(3);
        let l = leader(&m);
        let mut subs: Vec<TcpStream> = m.clients.iter().map(|&a| connect(a)).collect();
        for s in &mut subs {
            assert_eq!(
                cmd(s, &["CONFIG", "SET", "notify-keyspace-events", "K$"]),
                Reply::ok()
            );
            assert_eq!(
                cmd(s, &["CONFIG", "GET", "notify-keyspace-events"]),
                bulks(&["notify-keyspace-events", "$K"])
            );
            assert_eq!(
                cmd(s, &["PSUBSCRIBE", "__keyspace@0__:ks:*"]),
                Reply::Array(Some(vec![
                    bulk("psubscribe"),
                    bulk("__keyspace@0__:ks:*"),
                    Reply::Integer(1)
                ]))
            );
        }
        let mut w = connect(m.clients[l]);
        assert_eq!(cmd(&mut w, &["SET", "ks:1", "v"]), Reply::ok());
        assert_eq!(cmd(&mut w, &["DEL", "ks:1"]), Reply::Integer(1));
        assert_eq!(cmd(&mut w, &["APPEND", "ks:2", "v"]), Reply::Integer(1));
        for (i, s) in subs.iter_mut().enumerate() {
            let got = replies(s, 2);
            assert_eq!(
                got,
                vec![
                    bulks(&[
                        "pmessage",
                        "__keyspace@0__:ks:*",
                        "__keyspace@0__:ks:1",
                        "set"
                    ]),
                    // DEL is generic (g), not asked for: no message.
                    bulks(&[
                        "pmessage",
                        "__keyspace@0__:ks:*",
                        "__keyspace@0__:ks:2",
                        "append"
                    ]),
                ],
                "member {i}"
            );
            assert_eq!(cmd(s, &["PING"]), bulks(&["pong", ""]), "member {i}");
            match cmd(s, &["GET", "ks:2"]) {
                Reply::Error(e) => assert!(e.starts_with("ERR Can't execute 'get'"), "{e}"),
                r => panic!("member {i}: {r:?}"),
            }
            assert_eq!(
                cmd(s, &["PUNSUBSCRIBE"]),
                Reply::Array(Some(vec![
                    bulk("punsubscribe"),
                    bulk("__keyspace@0__:ks:*"),
                    Reply::Integer(0)
                ]))
            );
            // Out of subscribed mode: ordinary commands again.
            assert_eq!(cmd(s, &["PING"]), Reply::Simple("PONG".into()));
        }
        // PUBLISH reaches this member's subscribers only.
        let mut sub = connect(m.clients[l]);
        let _ = cmd(&mut sub, &["SUBSCRIBE", "news"]);
        assert_eq!(cmd(&mut w, &["PUBLISH", "news", "hi"]), Reply::Integer(1));
        assert_eq!(
            replies(&mut sub, 1),
            vec![bulks(&["message", "news", "hi"])]
        );
        match cmd(&mut w, &["INFO"]) {
            Reply::Bulk(Some(v)) => {
                let text = String::from_utf8(v).expect("utf8");
                let term = text
                    .lines()
                    .find_map(|l| l.strip_prefix("xlane_leader_term:"))
                    .and_then(|t| t.trim().parse::<u64>().ok());
                assert!(term.is_some_and(|t| t >= 1), "{text}");
            }
            r => panic!("{r:?}"),
        }
    }
}
