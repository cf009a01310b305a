//! `xlane kv txn-proxy`: the RESP front of a sharded deployment.
//!
//! Each client connection has a thread (at most
//! [`ProxyConfig::max_clients`] at once: one more is answered Redis's `-ERR
//! max number of clients reached` and closed): it parses RESP, keeps the
//! connection's `MULTI` queue, splits each request by shard
//! ([`Plan`]) and hands it to the 1Pipe thread, which sends the parts as
//! one reliable scattering and gathers the shards' replies. A request
//! whose every shard does not answer within the reply timeout gets, from
//! each silent shard, `TRYAGAIN outcome unknown` (its part may still run,
//! atomically with the others); one that 1Pipe aborts (a shard's applier
//! failed before acknowledging) gets an error and runs nowhere.

use super::msg::{ShardReply, SubTxn};
use super::plan::Plan;
use crate::resp::{Command, Limits, Parser, Reply};
use std::collections::{BTreeMap, HashMap};
use std::io::{self, Read, Write};
use std::net::{SocketAddrV4, TcpListener, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
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

/// The stack of a client connection's thread: what it parses and holds is
/// on the heap.
const CLIENT_STACK: usize = 512 << 10;

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

struct Request {
    plan: Plan,
    done: mpsc::Sender<Reply>,
}

struct Pending {
    plan: Plan,
    done: mpsc::Sender<Reply>,
    got: BTreeMap<u32, Reply>,
    deadline: Instant,
    ts: u64,
}

/// Serves RESP on `listener` until `stop` (the process's termination
/// flag); `ready` is called once every
/// socket is bound.
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
    let (tx, rx) = mpsc::channel::<Request>();
    let (shards, max_clients) = (cfg.shards, cfg.max_clients);
    let acceptor = std::thread::Builder::new()
        .name("txn-accept".into())
        .spawn(move || accept_loop(listener, shards, max_clients, tx, stop))?;
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
    let mut refused_replies = 0u64;
    let mut stats = ProxyStats::default();
    let mut pending: HashMap<u64, Pending> = HashMap::new();
    let mut by_ts: HashMap<u64, u64> = HashMap::new();
    let mut next_id = 0u64;
    let mut buf = vec![0u8; 1 << 16];
    while !stop.load(Ordering::Relaxed) {
        ep.wait(Duration::from_micros(200))?;
        // New requests.
        while let Ok(req) = rx.try_recv() {
            next_id += 1;
            match scatter(&mut ep, &req.plan, next_id, reply_to) {
                Ok(ts) => {
                    stats.requests += 1;
                    by_ts.insert(ts, next_id);
                    pending.insert(
                        next_id,
                        Pending {
                            plan: req.plan,
                            done: req.done,
                            got: BTreeMap::new(),
                            deadline: Instant::now() + cfg.reply_timeout,
                            ts,
                        },
                    );
                }
                Err(e) => {
                    let _ = req.done.send(e);
                }
            }
        }
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
                stats.stray_replies += 1;
                continue;
            };
            match pending.get_mut(&r.id) {
                Some(p) if p.plan.shards.contains_key(&r.shard) => {
                    p.got.insert(r.shard, r.reply);
                }
                _ => stats.stray_replies += 1,
            }
        }
        // proc_fail: a shard's applier failed (its parts are aborted, and
        // reported below), or this proxy was declared failed: then the
        // others discard what it sends, and it must stop.
        while let Some((p, t)) = ep.poll_proc_fail() {
            if p == cfg.id {
                return Err(io::Error::other(format!(
                    "declared failed by the recovery coordinator at {t}: restart under a new --id"
                )));
            }
        }
        // 1Pipe aborts (reliable: nothing of it is delivered anywhere).
        while let Some(SendEvent::Failed { ts, reason, .. }) = ep.poll_event() {
            if let Some(p) = by_ts.remove(&ts).and_then(|id| pending.remove(&id)) {
                stats.aborted += 1;
                let _ = p.done.send(Reply::err(format!(
                    "ABORTED the transaction was not delivered ({reason:?}); it ran on no shard"
                )));
            }
        }
        // Complete and timed-out requests.
        let now = Instant::now();
        let finished: Vec<u64> = pending
            .iter()
            .filter(|(_, p)| p.got.len() == p.plan.shards.len() || now >= p.deadline)
            .map(|(&id, _)| id)
            .collect();
        for id in finished {
            let Some(p) = pending.remove(&id) else {
                continue;
            };
            by_ts.remove(&p.ts);
            if p.got.len() == p.plan.shards.len() {
                stats.answered += 1;
            } else {
                stats.unknown += 1;
            }
            let missing = Reply::err("TRYAGAIN outcome unknown: a shard did not answer in time");
            let _ = p.done.send(p.plan.assemble(&p.got, &missing));
        }
    }
    stats.rejected = acceptor.join().unwrap_or(0);
    stats.unauthenticated = ep.stats().unauthenticated + refused_replies;
    Ok(stats)
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

/// Counts a client thread while it lives.
struct Live(Arc<AtomicUsize>);

impl Drop for Live {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Accepts clients until `stop`, each on a thread of its own, at most
/// `max_clients` at once; returns how many were refused past it.
fn accept_loop(
    listener: TcpListener,
    shards: u32,
    max_clients: usize,
    tx: mpsc::Sender<Request>,
    stop: &'static AtomicBool,
) -> u64 {
    let live = Arc::new(AtomicUsize::new(0));
    let mut rejected = 0;
    while !stop.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((mut s, _)) if live.load(Ordering::Acquire) >= max_clients => {
                let _ = s.write_all(format!("-{}\r\n", crate::limits::ERR_MAX_CLIENTS).as_bytes());
                rejected += 1;
            }
            Ok((s, _)) => {
                let tx = tx.clone();
                live.fetch_add(1, Ordering::AcqRel);
                let guard = Live(live.clone());
                let spawned = std::thread::Builder::new()
                    .name("txn-client".into())
                    .stack_size(CLIENT_STACK)
                    .spawn(move || {
                        let _live = guard;
                        let _ = serve(s, shards, &tx, stop);
                    });
                if spawned.is_err() {
                    rejected += 1; // the guard went with the closure: counted down
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(_) => std::thread::sleep(Duration::from_millis(5)),
        }
    }
    rejected
}

/// One client connection.
fn serve(
    mut s: TcpStream,
    shards: u32,
    tx: &mpsc::Sender<Request>,
    stop: &AtomicBool,
) -> io::Result<()> {
    s.set_nonblocking(false)?;
    s.set_nodelay(true)?;
    s.set_read_timeout(Some(Duration::from_millis(200)))?;
    let mut parser = Parser::new(Limits::default());
    let mut queue: Option<Vec<Command>> = None;
    // An error while queuing makes EXEC abort, as in Redis.
    let mut dirty = false;
    let mut chunk = [0u8; 16 << 10];
    let mut out = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        let n = match s.read(&mut chunk) {
            Ok(0) => return Ok(()),
            Ok(n) => n,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                continue
            }
            Err(e) => return Err(e),
        };
        parser.feed(&chunk[..n]);
        loop {
            let cmd = match parser.next_command() {
                Ok(Some(c)) => c,
                Ok(None) => break,
                Err(e) => {
                    Reply::err(format!("ERR Protocol error: {e}")).encode(&mut out);
                    s.write_all(&out)?;
                    return Ok(());
                }
            };
            let name = String::from_utf8_lossy(&cmd[0]).to_ascii_lowercase();
            let reply = match (name.as_str(), &mut queue) {
                ("quit", _) => {
                    Reply::ok().encode(&mut out);
                    s.write_all(&out)?;
                    return Ok(());
                }
                ("ping", None) => Reply::Simple("PONG".into()),
                ("multi", None) => {
                    queue = Some(Vec::new());
                    dirty = false;
                    Reply::ok()
                }
                ("multi", Some(_)) => Reply::err("ERR MULTI calls can not be nested"),
                ("discard", q) if q.is_some() => {
                    *q = None;
                    Reply::ok()
                }
                ("exec", q) if q.is_some() => {
                    let cmds = q.take().unwrap_or_default();
                    match dirty {
                        true => Reply::err(
                            "EXECABORT Transaction discarded because of previous errors.",
                        ),
                        false if cmds.is_empty() => Reply::Array(Some(Vec::new())),
                        false => run_plan(Plan::new(&cmds, shards, true), tx),
                    }
                }
                ("exec", None) => Reply::err("ERR EXEC without MULTI"),
                ("discard", None) => Reply::err("ERR DISCARD without MULTI"),
                (_, Some(q)) => match Plan::check(&cmd) {
                    Ok(()) => {
                        q.push(cmd);
                        Reply::Simple("QUEUED".into())
                    }
                    Err(e) => {
                        dirty = true;
                        Reply::err(e.to_string())
                    }
                },
                (_, None) => run_plan(Plan::new(&[cmd], shards, false), tx),
            };
            reply.encode(&mut out);
        }
        if !out.is_empty() {
            s.write_all(&out)?;
            out.clear();
        }
    }
    Ok(())
}

fn run_plan(plan: Result<Plan, super::plan::PlanError>, tx: &mpsc::Sender<Request>) -> Reply {
    let plan = match plan {
        Ok(p) => p,
        Err(e) => return Reply::err(e.to_string()),
    };
    let (done, wait) = mpsc::channel();
    if tx.send(Request { plan, done }).is_err() {
        return Reply::err("ERR the proxy is stopping");
    }
    wait.recv()
        .unwrap_or_else(|_| Reply::err("ERR the proxy is stopping"))
}
