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
//! Pub/sub ([`crate::pubsub`]): a RESP2 connection that subscribed takes
//! only `(P|S)SUBSCRIBE`, `(P|S)UNSUBSCRIBE`, `PING`, `QUIT` and `RESET`,
//! as in Redis (RESP3 has no such context: messages are pushes). At the
//! end of every turn the loop takes the keyspace events of the writes the
//! turn applied from the store (leader and followers alike) and hands them
//! to the subscribers under this member's `notify-keyspace-events`; the
//! store queues events only while someone subscribes and the setting has
//! `K` or `E`. A client whose unsent replies pass its
//! `client-output-buffer-limit` is disconnected ([`crate::limits`]).
//!
//! Work per turn is bounded: at most [`MAX_EVENTS`] ready descriptors,
//! [`TURN_COMMANDS`] commands and [`READ_BUDGET`] input bytes per
//! connection, and [`ANSWER_BUDGET`] reply bytes of read groups. A
//! connection with [`MAX_QUEUED`] unanswered requests or
//! [`OUT_HIGH`] unsent reply bytes is not read until it drains.

mod admin;
mod auth;
mod blocking;
mod conn;
mod link;
mod monitor;
mod reads;
mod replicas;
mod tracking;
use crate::epoll::{after_read, read_within, write_within, Epoll};
use blocking::Waiters;
use conn::{Conn, Query, Shape, Slot};
use link::Link;
use reads::{each, Answer};

use crate::dispatch::{classify, config_get, Action, MemberCmd, PubSubCmd, SettingCmd};
use crate::exec::Apply;
use crate::limits::{ClientLimits, OutputWatch, ERR_MAX_CLIENTS};
use crate::members::{encode_member, Members, Peer};
use crate::notify::NotifyFlags;
use crate::op::{WriteCmd, WriteOp};
use crate::pubsub::{subscribed_pong, Kind, Registry};
use crate::replicator::{replica_error, ReplicaError, SharedStore, READ_RETRIES, READ_UNCONFIRMED};
use crate::resp::{Limits, Parser, Reply};
use crate::session::{now_ms, replica_error_reply, session_command, Stats};
use crate::store::DataConfig;
use crate::txn::Step;
use std::collections::VecDeque;
use std::io::Write;
use std::net::TcpListener;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;
use xlane_xraft::driver::{Frontend, Outcome, ReplicateError, Submit};
use xlane_xraft::ConfChangeType;

/// Bytes of a command's name kept for `CLIENT LIST`.
const MAX_CMD_NAME: usize = 32;

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

/// The epoll keys of the listener and the TLS listener (connections
/// count from 2).
const LISTENER: u64 = 0;
const TLS_LISTENER: u64 = 1;

/// A request that starts once every earlier one of its connection is
/// answered.
enum Deferred {
    /// A group of reads (one barrier, then the store).
    Reads(Vec<Query>),
    /// `WATCH`: the keys' versions, read once this connection's earlier
    /// writes have applied (see crate::txn: a version read behind other
    /// connections' writes can only make EXEC abort).
    Watch(Vec<Vec<u8>>),
    /// `WAIT` ([`replicas`]): counted once this connection's earlier
    /// writes have applied.
    Wait {
        /// Members asked for.
        needed: i64,
        /// Milliseconds at most (0: no limit).
        timeout_ms: u64,
    },
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
            facts: &$loop.facts,
            me: $loop.me,
            id: $id,
            budget: &mut $loop.budget,
        }
    };
}

mod pump;

/// Whether this member's network can reach a member about to be added (its
/// id and addresses); the reason if not.
pub type PeerCheck = Box<dyn Fn(u64, &Peer) -> Result<(), String> + Send>;

/// The member's RESP clients as an X-Raft [`Frontend`].
pub struct ClientLoop {
    epoll: Epoll,
    listener: TcpListener,
    /// The TLS port's listener and configuration ([`ClientLoop::with_tls`]).
    tls: Option<(TcpListener, Arc<rustls::ServerConfig>)>,
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
    /// This member's configuration (`CONFIG GET/SET`).
    config: crate::config::Config,
    /// `maxmemory` in bytes (0: none), read from `config` when a `CONFIG
    /// SET` changes it, not on every command.
    maxmemory: u64,
    /// `maxclients`, `timeout` and `client-output-buffer-limit` as set now.
    client_limits: ClientLimits,
    /// When idle clients were last looked for (once a second).
    idle_checked: Instant,
    /// Its `notify-keyspace-events`, parsed.
    notify: NotifyFlags,
    /// The event classes the store queues now.
    store_classes: NotifyFlags,
    /// Whether the store was last told someone subscribes.
    store_subscribed: bool,
    /// Messages for subscribers, handed out at the end of the turn.
    outbox: Vec<(u64, Vec<u8>)>,
    /// The leader's active expiry ([`crate::expiry`]).
    expiry: crate::expiry::ExpiryCycle,
    /// What is left of this turn's [`ANSWER_BUDGET`].
    budget: usize,
    /// Connections blocked on keys or timers ([`blocking`]).
    waiters: Waiters,
    /// The leader's active expiry runs (`DEBUG SET-ACTIVE-EXPIRE`).
    active_expire: bool,
    /// A `CLIENT PAUSE` in force.
    pause: Option<admin::Pause>,
    /// What `INFO` tells beside the store, and when it was taken (at most
    /// every [`FACTS_EVERY`]: it walks the connections).
    facts: crate::info::Facts,
    facts_at: Option<Instant>,
    /// Client-side caching (`CLIENT TRACKING`).
    tracking: tracking::Tracking,
    /// Ops of `NOLOOP` tracking connections in flight.
    own_ops: tracking::OwnOps,
    /// Invalidations to send at the end of the turn.
    invalidations: Vec<tracking::Invalidation>,
    /// Access control: the ACL log, the ACL file ([`auth`]).
    access: auth::Access,
    /// Connections after `MONITOR` ([`monitor`]).
    monitors: Vec<u64>,
}

/// How stale `INFO`'s member facts may be.
const FACTS_EVERY: std::time::Duration = std::time::Duration::from_millis(20);

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
        let mut config = crate::config::Config::default();
        let (fit, warning) = crate::limits::fit_maxclients(config.number("maxclients"));
        if let Some(w) = warning {
            tracing::warn!("{w}");
            let _ = config.set_at_start("maxclients", &fit.to_string());
        }
        Ok(ClientLoop {
            epoll,
            listener,
            tls: None,
            limits,
            store,
            members,
            check: Box::new(|_, _| Ok(())),
            me,
            stats,
            conns: Default::default(),
            next_conn: TLS_LISTENER + 1,
            tokens: Tokens::default(),
            dirty: Vec::new(),
            again: Vec::new(),
            events: vec![libc::epoll_event { events: 0, u64: 0 }; MAX_EVENTS],
            chunk: vec![0; 64 << 10],
            subs: Registry::new(),
            client_limits: config.client_limits(),
            idle_checked: Instant::now(),
            config,
            maxmemory: 0,
            notify: NotifyFlags::NONE,
            store_classes: NotifyFlags::NONE,
            store_subscribed: false,
            outbox: Vec::new(),
            expiry: Default::default(),
            budget: ANSWER_BUDGET,
            waiters: Waiters::default(),
            active_expire: true,
            pause: None,
            facts: crate::info::Facts::default(),
            facts_at: None,
            tracking: Default::default(),
            own_ops: Default::default(),
            invalidations: Vec::new(),
            access: Default::default(),
            monitors: Vec::new(),
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

    /// The users' start settings (`--requirepass`, `--aclfile`: the file
    /// `ACL LOAD` reads and `ACL SAVE` writes), shown by `CONFIG GET`.
    pub fn with_acl(mut self, start: crate::session::AclStart) -> ClientLoop {
        if let Some(f) = start.file_name() {
            let _ = self.config.set_at_start("aclfile", &f);
        }
        self.access.start = start;
        self
    }

    /// Serves TLS clients on `port` as well ([`crate::tls`]), as
    /// `redis-server --tls-port` beside its plain port.
    pub fn with_tls(mut self, port: &crate::tls::TlsPort) -> std::io::Result<ClientLoop> {
        let listener = port.listener.try_clone()?;
        listener.set_nonblocking(true)?;
        self.epoll.ctl(
            libc::EPOLL_CTL_ADD,
            listener.as_raw_fd(),
            libc::EPOLLIN as u32,
            TLS_LISTENER,
        )?;
        self.tls = Some((listener, port.config.clone()));
        let f = &port.files;
        let port_no = port.listener.local_addr()?.port().to_string();
        let ca = f.ca.as_ref().map(|p| p.display().to_string());
        for (name, value) in [
            ("tls-port", port_no),
            ("tls-cert-file", f.cert.display().to_string()),
            ("tls-key-file", f.key.display().to_string()),
            ("tls-ca-cert-file", ca.unwrap_or_default()),
            ("tls-auth-clients", f.auth_clients.name().to_string()),
        ] {
            let _ = self.config.set_at_start(name, &value);
        }
        Ok(self)
    }

    /// Accepts the connections waiting on the listener of epoll key `key`.
    fn accept(&mut self, key: u64) {
        for _ in 0..MAX_EVENTS {
            let (accepted, tls) = match (key, &self.tls) {
                (TLS_LISTENER, Some((l, config))) => (l.accept(), Some(config)),
                _ => (self.listener.accept(), None),
            };
            let stream = match accepted {
                Ok((s, _)) => s,
                Err(_) => return, // WouldBlock, or a connection that died queued
            };
            if self.conns.len() >= self.client_limits.maxclients {
                // As Redis: the error, best effort, and the connection
                // closed (a TLS client only sees it closed: the error
                // would have to wait for its handshake).
                let mut s = stream;
                let _ = s.set_nonblocking(true);
                if tls.is_none() {
                    let _ = s.write(format!("-{ERR_MAX_CLIENTS}\r\n").as_bytes());
                }
                self.stats.rejected.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            let link = match tls {
                None => Link::Plain(stream),
                Some(config) => match Link::tls(stream, config.clone()) {
                    Ok(l) => l,
                    Err(e) => {
                        tracing::warn!("TLS connection not started: {e}");
                        continue;
                    }
                },
            };
            let id = self.next_conn;
            self.next_conn += 1;
            let interest = libc::EPOLLIN as u32;
            if link.tcp().set_nonblocking(true).is_err()
                || self
                    .epoll
                    .ctl(libc::EPOLL_CTL_ADD, link.as_raw_fd(), interest, id)
                    .is_err()
            {
                continue; // dropping the stream closes it
            }
            let _ = link.tcp().set_nodelay(true);
            self.stats.connections.fetch_add(1, Ordering::Relaxed);
            let session = self.fresh_session();
            self.conns.insert(
                id,
                Conn {
                    link,
                    parser: Parser::new(self.limits),
                    session,
                    txn: Default::default(),
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
                    blocked: false,
                    monitor: false,
                    replies: Default::default(),
                    held_pushes: Vec::new(),
                    output_watch: OutputWatch::default(),
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
        if c.eof || c.stalled() {
            return;
        }
        let (parser, last_input) = (&mut c.parser, &mut c.last_input);
        let end = read_within(&mut c.link, &mut self.chunk, READ_BUDGET, |b| {
            *last_input = Instant::now();
            parser.feed(b);
        });
        after_read(end, &mut c.eof, &mut c.quit, &mut c.out);
    }

    /// Writes the connection's pending bytes; closes it when it is done.
    fn settle(&mut self, id: u64) {
        let Some(c) = self.conns.get_mut(&id) else {
            return;
        };
        c.dirty = false;
        // What a TLS link holds goes first (handshake messages, records).
        let (written, broken) = match c.link.flush() {
            Ok(()) => write_within(&mut c.link, &c.out),
            Err(_) => (0, true),
        };
        c.out.drain(..written);
        if self.past_output_limit(id) {
            self.close_past_output_limit(id);
            return;
        }
        let Some(c) = self.conns.get_mut(&id) else {
            return;
        };
        let answered = c.queue.is_empty() && c.deferred.is_none() && c.held.is_none() && !c.more;
        let done = c.out.is_empty() && !c.link.wants_write() && (c.quit || (c.eof && answered));
        if broken || done {
            self.close(id);
            return;
        }
        // Commands left in the parser by a stall that has cleared, or input
        // a TLS link holds that the socket will not report again.
        if (c.more || c.link.pending_input()) && !c.stalled() && !self.again.contains(&id) {
            self.again.push(id);
        }
        // Level-triggered: no EPOLLIN while the input cannot be taken (it
        // would wake the loop for nothing); end of input shows as readable.
        let mut want = 0;
        if !c.eof && !c.stalled() {
            want |= libc::EPOLLIN as u32;
        }
        if !c.out.is_empty() || c.link.wants_write() {
            want |= libc::EPOLLOUT as u32;
        }
        if want != c.interest {
            let fd = c.link.as_raw_fd();
            if self.epoll.ctl(libc::EPOLL_CTL_MOD, fd, want, id).is_err() {
                self.close(id);
                return;
            }
            if let Some(c) = self.conns.get_mut(&id) {
                c.interest = want;
            }
        }
    }

    /// Whether connection `id`'s unsent bytes are past its class's
    /// `client-output-buffer-limit` (hard, or soft for too long).
    fn past_output_limit(&mut self, id: u64) -> bool {
        let limit = if self.subs.subscribed(id) {
            self.client_limits.output.pubsub
        } else {
            self.client_limits.output.normal
        };
        self.conns.get_mut(&id).is_some_and(|c| {
            c.output_watch
                .over(&limit, c.out.len() as u64, Instant::now())
        })
    }

    /// Closes connection `id` past its output buffer limit, as Redis does:
    /// with a log line, counted.
    fn close_past_output_limit(&mut self, id: u64) {
        if let Some(c) = self.conns.get(&id) {
            tracing::warn!(
                "client id={id} addr={} closed for overcoming of output buffer limits ({} bytes unsent)",
                c.link.tcp().peer_addr().map_or_else(|_| "?".into(), |a| a.to_string()),
                c.out.len()
            );
        }
        self.stats
            .output_limit_closed
            .fetch_add(1, Ordering::Relaxed);
        self.close(id);
    }

    /// Closes the clients idle past `timeout` (looked for once a second;
    /// subscribers and blocked clients are exempt, as in Redis), and those
    /// not admitted after [`crate::limits::ADMISSION_TIMEOUT`] (a TLS
    /// handshake or an `AUTH` outstanding), whatever `timeout` is.
    fn close_idle(&mut self) {
        let now = Instant::now();
        if now.duration_since(self.idle_checked) < std::time::Duration::from_secs(1) {
            return;
        }
        self.idle_checked = now;
        let timeout = self.client_limits.timeout;
        let idle: Vec<u64> = self
            .conns
            .iter()
            .filter(|(id, c)| {
                let exempt = c.blocked || c.monitor || self.subs.subscribed(**id);
                let admitted = c.session.authenticated && !c.link.handshaking();
                crate::limits::admission_past(admitted, c.since, now)
                    || crate::limits::idle_past(timeout, c.last_input, now, exempt)
            })
            .map(|(id, _)| *id)
            .collect();
        for id in idle {
            self.stats.idle_closed.fetch_add(1, Ordering::Relaxed);
            self.close(id);
        }
    }

    fn close(&mut self, id: u64) {
        self.subs.drop_conn(id);
        self.monitors.retain(|m| *m != id);
        self.tracking.off(id);
        self.waiters.unblock(id);
        if let Some(c) = self.conns.remove(&id) {
            let _ = self
                .epoll
                .ctl(libc::EPOLL_CTL_DEL, c.link.as_raw_fd(), 0, id);
            // Outcomes still to come for it find no connection and are dropped.
        }
    }

    /// Answers the blocked connection `conn` with `reply` and lets it go
    /// on.
    fn unblock_with(&mut self, conn: u64, reply: &Reply) {
        self.waiters.unblock(conn);
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        c.blocked = false;
        if let Some(p) = c.queue.iter_mut().find(|p| matches!(p.slot, Slot::Blocked)) {
            let bytes = reply.to_bytes();
            p.slot = Slot::Done(match &p.shape {
                Some(s) => s.convert(bytes),
                None => bytes,
            });
        }
        c.release();
        c.more = true;
        if !self.again.contains(&conn) {
            self.again.push(conn);
        }
        self.mark(conn);
    }

    /// The blocked connections' turn (see [`blocking`]): off the leader they
    /// are sent to it, at their deadline they time out, and the first
    /// waiter of each key whose command would now take something is served
    /// by proposing that command.
    fn serve_waiters(&mut self, sub: &mut dyn Submit) {
        if self.waiters.is_empty() {
            return;
        }
        let now = Instant::now();
        let leader = sub.leader() == self.me;
        let mut done: Vec<(u64, Reply)> = Vec::new();
        if !leader {
            let moved = replica_error_reply(
                &replica_error(ReplicateError::NotLeader(sub.leader()), |h| {
                    self.members.client_of(self.me, h)
                }),
                None,
            );
            for conn in self.waiters.idle() {
                if self
                    .waiters
                    .get_mut(conn)
                    .is_some_and(|w| !w.keys.is_empty())
                {
                    done.push((conn, moved.clone()));
                }
            }
        }
        done.extend(self.replica_waits_done(sub, leader));
        for conn in self.waiters.timed_out(now) {
            if done.iter().any(|(c, _)| *c == conn) {
                continue;
            }
            if let Some(w) = self.waiters.get_mut(conn) {
                done.push((conn, w.timeout_reply.clone()));
            }
        }
        for (conn, reply) in done {
            self.unblock_with(conn, &reply);
        }
        if !leader {
            return;
        }
        let ready = match self.store.read() {
            Ok(s) if s.applied() != self.waiters.checked => {
                self.waiters.checked = s.applied();
                self.waiters
                    .ready(&mut |args| !args.is_empty() && crate::cmd::block_ready(&s, args))
            }
            _ => Vec::new(),
        };
        let ts = now_ms();
        for conn in ready {
            let Some(w) = self.waiters.get_mut(conn) else {
                continue;
            };
            let token = self.tokens.issue(conn);
            let op = WriteOp::new(
                ts,
                WriteCmd::Data {
                    args: w.args.clone(),
                    seed: next_seed_of(token),
                },
            );
            if sub.propose(op.encode(), token).is_err() {
                self.tokens.take(token);
                continue;
            }
            w.in_flight = Some(token);
            if let Some(p) = self
                .conns
                .get_mut(&conn)
                .and_then(|c| c.queue.iter_mut().find(|p| matches!(p.slot, Slot::Blocked)))
            {
                p.slot = Slot::Write;
                p.token = token;
            }
        }
    }

    /// What `INFO` reports of the member, as of now.
    fn update_facts(&mut self, sub: &dyn Submit) {
        let now = Instant::now();
        if self
            .facts_at
            .is_some_and(|t| now.duration_since(t) < FACTS_EVERY)
        {
            return;
        }
        self.facts_at = Some(now);
        let leader = sub.leader();
        let f = &mut self.facts;
        f.cluster = self.members.count() > 1;
        f.leader = leader == self.me;
        f.leader_addr = (leader != self.me)
            .then(|| self.members.client_of(self.me, leader))
            .flatten();
        f.members = self.members.count();
        f.tcp_port = self.listener.local_addr().map_or(0, |a| a.port());
        f.connected_clients = self.conns.len();
        f.blocked_clients = self.conns.values().filter(|c| c.blocked).count();
        f.pubsub_channels = self.subs.channels(Kind::Channel).count();
        f.pubsubshard_channels = self.subs.channels(Kind::Shard).count();
        f.pubsub_patterns = self.subs.patterns();
        f.total_connections = self.stats.connections.load(Ordering::Relaxed);
        f.rejected_connections = self.stats.rejected.load(Ordering::Relaxed);
        f.output_limit_closed = self.stats.output_limit_closed.load(Ordering::Relaxed);
        f.maxclients = self.client_limits.maxclients;
        f.total_commands = self.stats.commands.load(Ordering::Relaxed);
        f.calls = self.stats.calls();
        let (clients, keys, items, prefixes) = self.tracking_facts();
        let f = &mut self.facts;
        f.tracking_clients = clients;
        f.tracking_keys = keys;
        f.tracking_items = items;
        f.tracking_prefixes = prefixes;
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
        let subscribed = !self.subs.is_empty();
        // Also when the last subscriber went: the store must stop queueing
        // published messages nobody will take.
        if classes != self.store_classes
            || !classes.is_empty()
            || subscribed
            || subscribed != self.store_subscribed
        {
            let events: Vec<_> = match self.store.write() {
                Ok(mut s) => {
                    let ev = s.drain_events().collect();
                    s.set_notifications(classes);
                    s.set_subscribers(subscribed);
                    ev
                }
                Err(_) => Vec::new(),
            };
            self.store_classes = classes;
            self.store_subscribed = subscribed;
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
                self.mark(to);
                if self.past_output_limit(to) {
                    over.push(to);
                }
            }
        }
        for id in over {
            self.close_past_output_limit(id);
        }
    }
}

/// A seed for the random picks of a write proposed to serve a blocked
/// client (blocking pops make none; mixed from its token all the same).
fn next_seed_of(token: u64) -> u64 {
    crate::value::SplitMix::new(token).next_u64()
}

impl Frontend for ClientLoop {
    fn fd(&self) -> RawFd {
        self.epoll.as_raw_fd()
    }

    fn turn(&mut self, sub: &mut dyn Submit, readable: bool) -> bool {
        // Expiry as the leader decides it: one bounded batch a turn, token 0
        // (never issued: its outcome is dropped); a follower's is refused.
        let op = match self.store.read() {
            Ok(s) if self.active_expire => self.expiry.poll(&s, now_ms()),
            _ => None,
        };
        if let Some(op) = op {
            let _ = sub.propose(op.encode(), 0);
        }
        if self.pause.is_some_and(|p| Instant::now() >= p.until) {
            self.pause = None;
            self.wake_all();
        }
        self.serve_waiters(sub);
        self.update_facts(sub);
        self.close_idle();
        for id in std::mem::take(&mut self.again) {
            if self.conns.get(&id).is_some_and(|c| c.link.pending_input()) {
                self.read_input(id);
                self.mark(id);
            }
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
            if key == LISTENER || key == TLS_LISTENER {
                self.accept(key);
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
        self.own_ops.completed(token);
        self.exec_done(token);
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
        // The write serving a blocked client: taken nothing (another op took
        // it first), it blocks again, still first in its queues.
        if let (Some(w), Slot::Write) = (self.waiters.get_mut(id), &p.slot) {
            if w.in_flight == Some(token) {
                if matches!(&outcome, Outcome::Applied(b) if *b == w.timeout_reply.to_bytes()) {
                    w.in_flight = None;
                    p.slot = Slot::Blocked;
                    p.token = 0;
                    self.waiters.checked = 0;
                    return;
                }
                self.waiters.unblock(id);
                c.blocked = false;
            }
        }
        match (&mut p.slot, outcome) {
            (Slot::Write, Outcome::Applied(bytes)) => p.slot = Slot::Done(bytes),
            // Its receivers on this member (every member hands it to its own).
            (Slot::Publish(ch, kind), Outcome::Applied(_)) => {
                let n = match kind {
                    Kind::Shard => self.subs.subscribers(ch, Kind::Shard),
                    _ => self.subs.receivers(ch),
                };
                p.slot = Slot::Done(Reply::Integer(n as i64).to_bytes());
            }
            (Slot::Publish(..), Outcome::Failed(e)) => p.slot = Slot::Done(failed(e)),
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
                let e = ReplicaError::Unavailable(READ_UNCONFIRMED.into());
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
        self.deliver_invalidations();
        self.acl_sweep();
        for id in std::mem::take(&mut self.dirty) {
            self.settle(id);
        }
        !self.again.is_empty()
    }
}

#[cfg(test)]
mod tests;
