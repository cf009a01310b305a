//! `xlane kv txn-proxy`: the RESP front of a sharded deployment.
//!
//! One thread serves every client connection and the 1Pipe endpoint, as
//! Redis serves its clients from one event loop: the clients' sockets are
//! non-blocking in one epoll set, polled at each turn of the endpoint's
//! loop. At most [`ProxyConfig::max_clients`] are served at once; one more
//! is answered Redis's `-ERR max number of clients reached` and closed.
//! Each connection's RESP is parsed, its `MULTI` queue kept, and each
//! request split by shard ([`Plan`]) and sent as one reliable 1Pipe
//! scattering, whose shards' replies are gathered. A connection has one
//! request in flight: the commands it pipelined behind wait in its parser
//! (and its socket is not read past [`OUT_HIGH`] unsent bytes or a
//! request in flight), so replies keep the requests' order. A request
//! whose every shard does not answer within the reply timeout gets, from
//! each silent shard, `TRYAGAIN outcome unknown` (its part may still run,
//! atomically with the others); one that 1Pipe aborts (a shard's applier
//! failed before acknowledging) gets an error and runs nowhere.

use super::msg::{ShardReply, SubTxn};
use super::plan::Plan;
use crate::epoll::{after_read, read_within, write_within, Epoll};
use crate::resp::{Command, Limits, Parser, Reply};
use std::collections::{BTreeMap, HashMap};
use std::io::{self, Write};
use std::net::{SocketAddrV4, TcpListener, TcpStream, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use xlane_auth::KeyRing;
use xlane_pipe::seal::{self, PipeSeal};
use xlane_pipe::udp::{Clock, UdpEndpoint};
use xlane_pipe::wire::MAX_PAYLOAD;
use xlane_pipe::{ReceiverConfig, SendEvent, SenderConfig};

/// Settings of a proxy.
#[derive(Debug, Clone)]
pub struct ProxyConfig {
    /// Its 1Pipe id (above the number of shards).
    pub id: u32,
    /// How many shards.
    pub shards: u32,
    /// The 1Pipe endpoint's address.
    pub pipe: SocketAddrV4,
    /// Where shards send replies.
    pub replies: SocketAddrV4,
    /// The hop it sends through.
    pub hop: SocketAddrV4,
    /// The 1Pipe beacon interval.
    pub beacon: Duration,
    /// How long a request waits for its shards.
    pub reply_timeout: Duration,
    /// The 1Pipe recovery coordinators it obeys.
    pub coordinators: Vec<SocketAddrV4>,
    /// The clock it stamps with (the appliers' too).
    pub clock: Clock,
    /// The group key (ring, key id): 1Pipe datagrams sealed, shards'
    /// replies opened, what does not open dropped ([`xlane_pipe::seal`]).
    pub key: Option<(KeyRing, u32)>,
    /// Client connections served at once (Redis's `maxclients`).
    pub max_clients: usize,
}

/// What the proxy counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProxyStats {
    /// Requests sent as scatterings.
    pub requests: u64,
    /// Requests answered with every shard's reply.
    pub answered: u64,
    /// Requests with a shard silent past the reply timeout.
    pub unknown: u64,
    /// Requests aborted by 1Pipe.
    pub aborted: u64,
    /// Reply datagrams refused (malformed, or for no pending request).
    pub stray_replies: u64,
    /// 1Pipe datagrams and replies refused by the MAC check (with a key).
    pub unauthenticated: u64,
    /// Client connections refused past `max_clients`.
    pub rejected: u64,
}

/// The epoll key of the listener (clients count from 1).
const LISTENER: u64 = 0;
/// Ready descriptors handled per turn.
const MAX_EVENTS: usize = 64;
/// Input bytes read from one client per turn.
const READ_BUDGET: usize = 64 << 10;
/// Unsent reply bytes of a client before its input is left unread.
pub const OUT_HIGH: usize = 1 << 20;

/// One client connection.
struct Client {
    stream: TcpStream,
    parser: Parser,
    /// Its `MULTI` queue, while one is open.
    multi: Option<Vec<Command>>,
    /// A command was refused while queuing: `EXEC` aborts, as in Redis.
    multi_dirty: bool,
    /// Reply bytes not yet written.
    out: Vec<u8>,
    /// Its request in flight: nothing later is taken until it is answered.
    waiting: bool,
    /// `QUIT` or a protocol error: closed once `out` is written.
    quit: bool,
    /// The client closed its side: closed once everything is answered.
    eof: bool,
    /// Commands may wait in its parser: taking them stopped on a stall.
    more: bool,
    /// The epoll events registered now.
    interest: u32,
}

impl Client {
    /// Its input is left unread (level-triggered: it would wake the loop
    /// for nothing).
    fn stalled(&self) -> bool {
        self.quit || self.waiting || self.out.len() >= OUT_HIGH
    }
}

/// What a client's command asks of the proxy.
enum Step {
    /// An answer at once.
    Reply(Reply),
    /// A request for the shards.
    Send(Plan),
    /// `QUIT`, or a protocol error: this reply, then the connection closes.
    Close(Reply),
}

/// A request in flight.
struct Pending {
    plan: Plan,
    client: u64,
    got: BTreeMap<u32, Reply>,
    deadline: Instant,
    ts: u64,
}

/// The proxy's one event loop.
struct Proxy<'a> {
    cfg: &'a ProxyConfig,
    ep: UdpEndpoint,
    reply_to: SocketAddrV4,
    epoll: Epoll,
    listener: TcpListener,
    clients: HashMap<u64, Client>,
    next_client: u64,
    pending: HashMap<u64, Pending>,
    by_ts: HashMap<u64, u64>,
    next_id: u64,
    stats: ProxyStats,
    /// Clients with bytes to write or a state to settle this turn.
    touched: Vec<u64>,
    events: Vec<libc::epoll_event>,
    chunk: Vec<u8>,
}

/// Serves RESP on `listener` until `stop` (the process's termination
/// flag); `ready` is called once every socket is bound.
pub fn run(
    cfg: &ProxyConfig,
    listener: TcpListener,
    stop: &'static AtomicBool,
    ready: impl FnOnce(),
) -> io::Result<ProxyStats> {
    let mut ep = UdpEndpoint::bind(
        cfg.pipe,
        cfg.id,
        cfg.hop,
        HashMap::new(),
        cfg.beacon.as_nanos() as u64,
        (SenderConfig::default(), ReceiverConfig::default()),
    )?;
    ep.set_coordinators(cfg.coordinators.clone());
    ep.set_clock(cfg.clock);
    let replies = UdpSocket::bind(cfg.replies)?;
    replies.set_nonblocking(true)?;
    listener.set_nonblocking(true)?;
    let epoll = Epoll::new()?;
    epoll.ctl(
        libc::EPOLL_CTL_ADD,
        listener.as_raw_fd(),
        libc::EPOLLIN as u32,
        LISTENER,
    )?;
    ready();
    let reply_to = replies.local_addr().map(|a| match a {
        std::net::SocketAddr::V4(a) => a,
        std::net::SocketAddr::V6(_) => cfg.replies,
    })?;
    let mut seal = None;
    if let Some((ring, id)) = &cfg.key {
        ep.set_key(ring.clone(), *id).map_err(io::Error::other)?;
        seal = Some(PipeSeal::for_socket(ring.clone(), *id, &replies).map_err(io::Error::other)?);
    }
    let mut p = Proxy {
        cfg,
        ep,
        reply_to,
        epoll,
        listener,
        clients: HashMap::new(),
        next_client: LISTENER + 1,
        pending: HashMap::new(),
        by_ts: HashMap::new(),
        next_id: 0,
        stats: ProxyStats::default(),
        touched: Vec::new(),
        events: vec![libc::epoll_event { events: 0, u64: 0 }; MAX_EVENTS],
        chunk: vec![0; 16 << 10],
    };
    let mut refused_replies = 0u64;
    let mut buf = vec![0u8; 1 << 16];
    while !stop.load(Ordering::Relaxed) {
        p.ep.wait(Duration::from_micros(200))?;
        p.serve_clients();
        // Shards' replies.
        loop {
            let n = match replies.recv(&mut buf) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            let Some(n) = seal::opened(seal.as_mut(), &buf[..n]) else {
                refused_replies += 1;
                continue;
            };
            let Ok(r) = ShardReply::decode(&buf[..n]) else {
                p.stats.stray_replies += 1;
                continue;
            };
            match p.pending.get_mut(&r.id) {
                Some(q) if q.plan.shards.contains_key(&r.shard) => {
                    q.got.insert(r.shard, r.reply);
                }
                _ => p.stats.stray_replies += 1,
            }
        }
        // proc_fail: a shard's applier failed (its parts are aborted, and
        // reported below), or this proxy was declared failed: then the
        // others discard what it sends, and it must stop.
        while let Some((id, t)) = p.ep.poll_proc_fail() {
            if id == cfg.id {
                return Err(io::Error::other(format!(
                    "declared failed by the recovery coordinator at {t}: restart under a new --id"
                )));
            }
        }
        // 1Pipe aborts (reliable: nothing of it is delivered anywhere).
        while let Some(SendEvent::Failed { ts, reason, .. }) = p.ep.poll_event() {
            if let Some(q) = p.by_ts.remove(&ts).and_then(|id| p.pending.remove(&id)) {
                p.stats.aborted += 1;
                p.answer(
                    q.client,
                    Reply::err(format!(
                        "ABORTED the transaction was not delivered ({reason:?}); it ran on no shard"
                    )),
                );
            }
        }
        p.finish_requests();
        for id in std::mem::take(&mut p.touched) {
            p.settle(id);
        }
    }
    p.stats.unauthenticated = p.ep.stats().unauthenticated + refused_replies;
    Ok(p.stats)
}

impl Proxy<'_> {
    /// Accepts new clients, reads the ready ones and takes their commands.
    fn serve_clients(&mut self) {
        let n = self.epoll.poll(&mut self.events);
        for i in 0..n {
            let (key, ev) = (self.events[i].u64, self.events[i].events);
            if key == LISTENER {
                self.accept();
                continue;
            }
            if ev & (libc::EPOLLHUP | libc::EPOLLERR) as u32 != 0 {
                self.close(key);
                continue;
            }
            if ev & libc::EPOLLIN as u32 != 0 {
                self.read_input(key);
                self.take_commands(key);
            }
            self.touched.push(key);
        }
    }

    fn accept(&mut self) {
        for _ in 0..MAX_EVENTS {
            let Ok((mut stream, _)) = self.listener.accept() else {
                return; // WouldBlock, or a connection that died queued
            };
            if self.clients.len() >= self.cfg.max_clients {
                let _ = stream.set_nonblocking(true);
                let err = format!("-{}\r\n", crate::limits::ERR_MAX_CLIENTS);
                let _ = stream.write(err.as_bytes());
                self.stats.rejected += 1;
                continue;
            }
            let id = self.next_client;
            self.next_client += 1;
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
            self.clients.insert(
                id,
                Client {
                    stream,
                    parser: Parser::new(Limits::default()),
                    multi: None,
                    multi_dirty: false,
                    out: Vec::new(),
                    waiting: false,
                    quit: false,
                    eof: false,
                    more: false,
                    interest,
                },
            );
        }
    }

    /// Reads what client `id` sent, within the turn's budget.
    fn read_input(&mut self, id: u64) {
        let Some(c) = self.clients.get_mut(&id) else {
            return;
        };
        if c.eof || c.stalled() {
            return;
        }
        let parser = &mut c.parser;
        let end = read_within(&mut c.stream, &mut self.chunk, READ_BUDGET, |b| {
            parser.feed(b)
        });
        after_read(end, &mut c.eof, &mut c.quit, &mut c.out);
    }

    /// Runs client `id`'s parsed commands until one waits for the shards.
    fn take_commands(&mut self, id: u64) {
        let shards = self.cfg.shards;
        loop {
            let Some(c) = self.clients.get_mut(&id) else {
                return;
            };
            if c.stalled() {
                c.more = true;
                return;
            }
            let step = match c.parser.next_command() {
                Ok(Some(cmd)) => step(c, cmd, shards),
                Ok(None) => {
                    c.more = false;
                    return;
                }
                Err(e) => Step::Close(Reply::err(format!("ERR Protocol error: {e}"))),
            };
            match step {
                Step::Reply(r) => r.encode(&mut c.out),
                Step::Close(r) => {
                    r.encode(&mut c.out);
                    c.quit = true;
                }
                Step::Send(plan) => {
                    c.waiting = true;
                    self.send(id, plan);
                }
            }
        }
    }

    /// Sends client `id`'s request as one scattering (or answers it with
    /// why it could not be sent).
    fn send(&mut self, client: u64, plan: Plan) {
        self.next_id += 1;
        let id = self.next_id;
        match scatter(&mut self.ep, &plan, id, self.reply_to) {
            Ok(ts) => {
                self.stats.requests += 1;
                self.by_ts.insert(ts, id);
                self.pending.insert(
                    id,
                    Pending {
                        plan,
                        client,
                        got: BTreeMap::new(),
                        deadline: Instant::now() + self.cfg.reply_timeout,
                        ts,
                    },
                );
            }
            Err(e) => self.answer(client, e),
        }
    }

    /// Answers the requests every shard answered, and those past their
    /// deadline.
    fn finish_requests(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        let now = Instant::now();
        let finished: Vec<u64> = self
            .pending
            .iter()
            .filter(|(_, q)| q.got.len() == q.plan.shards.len() || now >= q.deadline)
            .map(|(&id, _)| id)
            .collect();
        for id in finished {
            let Some(q) = self.pending.remove(&id) else {
                continue;
            };
            self.by_ts.remove(&q.ts);
            if q.got.len() == q.plan.shards.len() {
                self.stats.answered += 1;
            } else {
                self.stats.unknown += 1;
            }
            let missing = Reply::err("TRYAGAIN outcome unknown: a shard did not answer in time");
            self.answer(q.client, q.plan.assemble(&q.got, &missing));
        }
    }

    /// Client `id`'s request in flight is answered with `reply`; its next
    /// commands go on.
    fn answer(&mut self, id: u64, reply: Reply) {
        let Some(c) = self.clients.get_mut(&id) else {
            return; // it closed meanwhile
        };
        reply.encode(&mut c.out);
        c.waiting = false;
        self.take_commands(id);
        self.touched.push(id);
    }

    /// Writes client `id`'s replies; closes it when it is done; sets what
    /// epoll reports of it.
    fn settle(&mut self, id: u64) {
        // Commands parsed but not taken while it was stalled.
        self.take_commands(id);
        let Some(c) = self.clients.get_mut(&id) else {
            return;
        };
        let (written, broken) = write_within(&mut c.stream, &c.out);
        c.out.drain(..written);
        let done = c.out.is_empty() && (c.quit || (c.eof && !c.waiting));
        if broken || done {
            self.close(id);
            return;
        }
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
            c.interest = want;
        }
        // Its socket will not report commands its parser holds already.
        if !c.stalled() && c.more {
            self.touched.push(id);
        }
    }

    /// Closes client `id`; a reply still to come for it is dropped.
    fn close(&mut self, id: u64) {
        if let Some(c) = self.clients.remove(&id) {
            let _ = self
                .epoll
                .ctl(libc::EPOLL_CTL_DEL, c.stream.as_raw_fd(), 0, id);
        }
    }
}

/// What client `c`'s command `cmd` asks: `MULTI`/`EXEC`/`DISCARD`, `PING`
/// and `QUIT` are the connection's own; the rest is a request for the
/// shards (or, inside `MULTI`, queued once checked).
fn step(c: &mut Client, cmd: Command, shards: u32) -> Step {
    let name = String::from_utf8_lossy(&cmd[0]).to_ascii_lowercase();
    let plan = |p: Result<Plan, super::plan::PlanError>| match p {
        Ok(p) => Step::Send(p),
        Err(e) => Step::Reply(Reply::err(e.to_string())),
    };
    match (name.as_str(), &mut c.multi) {
        ("quit", _) => Step::Close(Reply::ok()),
        ("ping", None) => Step::Reply(Reply::Simple("PONG".into())),
        ("multi", None) => {
            c.multi = Some(Vec::new());
            c.multi_dirty = false;
            Step::Reply(Reply::ok())
        }
        ("multi", Some(_)) => Step::Reply(Reply::err("ERR MULTI calls can not be nested")),
        ("discard", q) if q.is_some() => {
            *q = None;
            Step::Reply(Reply::ok())
        }
        ("exec", q) if q.is_some() => {
            let cmds = q.take().unwrap_or_default();
            if c.multi_dirty {
                Step::Reply(Reply::err(
                    "EXECABORT Transaction discarded because of previous errors.",
                ))
            } else if cmds.is_empty() {
                Step::Reply(Reply::Array(Some(Vec::new())))
            } else {
                plan(Plan::new(&cmds, shards, true))
            }
        }
        ("exec", None) => Step::Reply(Reply::err("ERR EXEC without MULTI")),
        ("discard", None) => Step::Reply(Reply::err("ERR DISCARD without MULTI")),
        (_, Some(q)) => match Plan::check(&cmd) {
            Ok(()) => {
                q.push(cmd);
                Step::Reply(Reply::Simple("QUEUED".into()))
            }
            Err(e) => {
                c.multi_dirty = true;
                Step::Reply(Reply::err(e.to_string()))
            }
        },
        (_, None) => plan(Plan::new(&[cmd], shards, false)),
    }
}

/// Sends `plan`'s parts as one reliable scattering; its timestamp, or the
/// error reply.
fn scatter(
    ep: &mut UdpEndpoint,
    plan: &Plan,
    id: u64,
    reply_to: SocketAddrV4,
) -> Result<u64, Reply> {
    let mut bodies = Vec::with_capacity(plan.shards.len());
    for (&shard, cmds) in &plan.shards {
        let mut b = Vec::new();
        let part = SubTxn {
            id,
            reply_to,
            cmds: cmds.clone(),
        };
        if part.encode(&mut b).is_err() || b.len() > MAX_PAYLOAD {
            return Err(Reply::err(format!(
                "ERR a shard's part of the request is over {MAX_PAYLOAD} bytes, one 1Pipe message"
            )));
        }
        bodies.push((super::applier_id(shard), b));
    }
    let msgs: Vec<(u32, &[u8])> = bodies.iter().map(|(d, b)| (*d, b.as_slice())).collect();
    ep.scatter(&msgs, true)
        .map_err(|e| Reply::err(format!("TRYAGAIN not sent: {e}")))
}
