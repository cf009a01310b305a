//! The writer and the observers: when a write is visible on every member.
//!
//! **Observers.** Every member's host has one observer, a thread of the
//! bench that made its connection inside that host's network namespace
//! (a socket stays in the namespace it was made in; see
//! `xlane_testbed::netns`) to the member's own address, so what it reads
//! never crosses the switch. It learns of each write through a
//! notification of its member, the same kind for the two Redis-speaking
//! systems:
//! * Redis and xlane kv: keyspace notifications (`CONFIG SET
//!   notify-keyspace-events K$`, `PSUBSCRIBE __keyspace@0__:kvbench:*`),
//!   which a Redis replica and an xlane kv follower send when they apply
//!   the replicated write;
//! * etcd: a watch on the prefix `kvbench:` (`POST /v3/watch` on the v3
//!   JSON gateway, whose response streams one JSON event per line).
//!
//! The observer stamps each notification as soon as it has read it with
//! the bench's monotonic clock (`CLOCK_MONOTONIC`), which every emulated
//! host shares: they are namespaces of one machine.
//!
//! **Writer.** The writer and the throughput clients connect in the
//! leader's (primary's) host to its own address: only replication crosses
//! the switch. A write is visible when the last member's observer stamped
//! it; its latency is that stamp minus the writer's stamp taken before the
//! write was sent. A write that is refused, or that some member does not
//! report within the timeout, is a failed write: it is counted and the run
//! goes on.
//!
//! Threads instead of processes: one clock without conversion, no process
//! start per run, and an observer costs one blocked thread. For xlane kv
//! over the lane the writer, the clients and the observers pin themselves
//! to the lane core (at the default policy: they block on sockets, below
//! the members' real-time priority); for the other systems they stay on
//! the regular cores, where the bench keeps everything it starts.

use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use xlane_kv::resp::Reply;

use super::systems::{in_host, Cluster, Host};
use super::wire::{base64, base64_decode, Http, Resp};
use super::{KvBenchConfig, Rng, System, MAX_SIZE};

/// Prefix of every key the benchmark writes.
pub const KEY_PREFIX: &str = "kvbench:";
/// Prefix of the throughput phase's keys.
const TPUT_PREFIX: &str = "kvbench:t:";
/// The keyspace channel pattern the Redis-speaking observers subscribe to.
pub const KEYSPACE_PATTERN: &str = "__keyspace@0__:kvbench:*";

/// The clock every stamp is read from: ns since the run's start.
#[derive(Clone, Copy, Debug)]
pub struct Clock(Instant);

impl Clock {
    /// A clock starting now.
    pub fn new() -> Clock {
        Clock(Instant::now())
    }

    /// Now, ns since the start.
    pub fn now(&self) -> u64 {
        self.0.elapsed().as_nanos() as u64
    }
}

impl Default for Clock {
    fn default() -> Self {
        Clock::new()
    }
}

/// A write an observer saw.
struct Seen {
    member: usize,
    key: String,
    at_ns: u64,
}

/// What one member's observer counted of the throughput phase.
#[derive(Default)]
struct TputCount {
    writes: AtomicU64,
    last_ns: AtomicU64,
}

/// Keeps the calling thread on the lane core while alive (for the lane's
/// system), else leaves it where it is.
fn place(lane_core: Option<usize>) -> Result<Option<xlane_host::runtime::AffinityGuard>, String> {
    lane_core
        .map(|c| xlane_host::runtime::AffinityGuard::pin(&[c]).map_err(|e| e.to_string()))
        .transpose()
}

/// The observers of one cluster.
pub struct Observers {
    threads: Vec<JoinHandle<Result<(), String>>>,
    sockets: Vec<TcpStream>,
    stop: Arc<AtomicBool>,
    rx: Receiver<Seen>,
    tput: Arc<Vec<TputCount>>,
}

/// One observer's subscription, before its thread runs.
enum Feed {
    Resp(Resp),
    Etcd(Http),
}

impl Observers {
    /// Subscribes on every member and starts the observer threads.
    pub fn start(cl: &Cluster, clock: Clock, lane_core: Option<usize>) -> Result<Self, String> {
        let n = cl.clients.len();
        let (tx, rx) = mpsc::channel();
        let stop = Arc::new(AtomicBool::new(false));
        let tput: Arc<Vec<TputCount>> = Arc::new((0..n).map(|_| TputCount::default()).collect());
        let mut obs = Observers {
            threads: Vec::new(),
            sockets: Vec::new(),
            stop: stop.clone(),
            rx,
            tput: tput.clone(),
        };
        for i in 0..n {
            let feed = subscribe(cl, i)?;
            obs.sockets.push(match &feed {
                Feed::Resp(c) => c.handle()?,
                Feed::Etcd(h) => h.handle()?,
            });
            let (tx, stop, tput) = (tx.clone(), stop.clone(), tput.clone());
            let t = std::thread::Builder::new()
                .name(format!("kv-observer-{i}"))
                .spawn(move || {
                    let _placed = place(lane_core)?;
                    let mut on_key = |key: String| {
                        let at_ns = clock.now();
                        if key.starts_with(TPUT_PREFIX) {
                            tput[i].writes.fetch_add(1, Ordering::Relaxed);
                            tput[i].last_ns.fetch_max(at_ns, Ordering::Relaxed);
                        } else {
                            let _ = tx.send(Seen {
                                member: i,
                                key,
                                at_ns,
                            });
                        }
                    };
                    let r = match feed {
                        Feed::Resp(c) => observe_resp(c, &mut on_key),
                        Feed::Etcd(h) => observe_etcd(h, &mut on_key),
                    };
                    // Ending because we shut the socket is no error.
                    if stop.load(Ordering::Relaxed) {
                        Ok(())
                    } else {
                        r.map_err(|e| format!("observer of member {}: {e}", i + 1))
                    }
                })
                .map_err(|e| e.to_string())?;
            obs.threads.push(t);
        }
        Ok(obs)
    }

    /// Waits until every member reported `key`, until `deadline_ns`: the
    /// last member's stamp, or `None` if some member did not report it.
    fn await_key(&self, clock: Clock, key: &str, members: usize, deadline_ns: u64) -> Option<u64> {
        let mut seen: Vec<Option<u64>> = vec![None; members];
        while seen.iter().any(Option::is_none) {
            let left = deadline_ns.saturating_sub(clock.now());
            match self.rx.recv_timeout(Duration::from_nanos(left)) {
                Ok(s) if s.key == key && s.member < members => {
                    seen[s.member].get_or_insert(s.at_ns);
                }
                Ok(_) => {} // an earlier write's late report, or the probe
                Err(RecvTimeoutError::Timeout) | Err(RecvTimeoutError::Disconnected) => {
                    return None
                }
            }
        }
        seen.into_iter().flatten().max()
    }

    /// Stops the observers: the first error one of them met, if any.
    pub fn stop(self) -> Result<(), String> {
        self.stop.store(true, Ordering::Relaxed);
        for s in &self.sockets {
            let _ = s.shutdown(Shutdown::Both);
        }
        let mut first = Ok(());
        for t in self.threads {
            let r = t
                .join()
                .unwrap_or_else(|_| Err("an observer panicked".into()));
            if first.is_ok() {
                first = r;
            }
        }
        first
    }
}

/// Subscribes to member `i`'s notifications of the benchmark's keys.
fn subscribe(cl: &Cluster, i: usize) -> Result<Feed, String> {
    let t = Duration::from_secs(5);
    match cl.system {
        System::Etcd => {
            let mut h = cl.http(i, t)?;
            let body = format!(
                "{{\"create_request\":{{\"key\":\"{}\",\"range_end\":\"{}\"}}}}",
                base64(KEY_PREFIX.as_bytes()),
                base64(b"kvbench;")
            );
            h.send("/v3/watch", &body)?;
            if !h.head()? {
                return Err("etcd watch: response not streamed".into());
            }
            // The first message says the watch was created.
            let first = h.chunk()?.ok_or("etcd watch ended at once")?;
            let v: serde_json::Value = serde_json::from_slice(first.trim_ascii())
                .map_err(|e| format!("etcd watch: {e}"))?;
            if v["result"]["created"].as_bool() != Some(true) {
                return Err(format!("etcd watch not created: {v}"));
            }
            h.set_timeout(None)?;
            Ok(Feed::Etcd(h))
        }
        System::Redis | System::Xlane | System::XlaneLane => {
            let mut c = cl.resp(i, t)?;
            let r = c.cmd(&[b"CONFIG", b"SET", b"notify-keyspace-events", b"K$"])?;
            if r != Reply::ok() {
                return Err(format!("CONFIG SET notify-keyspace-events: {r:?}"));
            }
            match c.cmd(&[b"PSUBSCRIBE", KEYSPACE_PATTERN.as_bytes()])? {
                Reply::Array(Some(v)) if v.first() == Some(&Reply::bulk("psubscribe")) => {}
                r => return Err(format!("PSUBSCRIBE: {r:?}")),
            }
            c.set_timeout(None)?;
            Ok(Feed::Resp(c))
        }
    }
}

/// Reads keyspace messages until the connection ends; each `set` of a key
/// goes to `on_key`.
fn observe_resp(mut c: Resp, on_key: &mut dyn FnMut(String)) -> Result<(), String> {
    let prefix = "__keyspace@0__:";
    loop {
        let r = c.reply()?;
        let Reply::Array(Some(v)) = r else {
            return Err(format!("unexpected message {r:?}"));
        };
        if let [Reply::Bulk(Some(kind)), _, Reply::Bulk(Some(ch)), Reply::Bulk(Some(ev))] = &v[..] {
            if kind == b"pmessage" && ev == b"set" {
                let ch = String::from_utf8_lossy(ch);
                if let Some(key) = ch.strip_prefix(prefix) {
                    on_key(key.to_string());
                }
            }
        }
    }
}

/// Reads an etcd watch stream until it ends; each put key goes to
/// `on_key`. Messages are JSON lines, which chunks may split or join.
fn observe_etcd(mut h: Http, on_key: &mut dyn FnMut(String)) -> Result<(), String> {
    let mut pending: Vec<u8> = Vec::new();
    while let Some(chunk) = h.chunk()? {
        pending.extend_from_slice(&chunk);
        while let Some(end) = pending.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = pending.drain(..=end).collect();
            for key in etcd_watch_keys(&line)? {
                on_key(key);
            }
        }
    }
    Err("etcd watch stream ended".into())
}

/// The keys of the PUT events in one watch message (JSON).
pub fn etcd_watch_keys(line: &[u8]) -> Result<Vec<String>, String> {
    let line = line.trim_ascii();
    if line.is_empty() {
        return Ok(Vec::new());
    }
    let v: serde_json::Value =
        serde_json::from_slice(line).map_err(|e| format!("etcd watch: {e}"))?;
    if let Some(e) = v.get("error") {
        return Err(format!("etcd watch: {e}"));
    }
    let events = v["result"]["events"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    Ok(events
        .iter()
        // A PUT has no "type" (the default, 0), a DELETE says "DELETE".
        .filter(|e| e.get("type").map_or(true, |t| t == "PUT"))
        .filter_map(|e| e["kv"]["key"].as_str())
        .filter_map(base64_decode)
        .map(|k| String::from_utf8_lossy(&k).into_owned())
        .collect())
}

/// A connection that writes to the leader (primary).
pub struct Writer {
    conn: WriterConn,
    /// Every member's client address and host: where a `-MOVED` points.
    members: Vec<(SocketAddr, Host)>,
    timeout: Duration,
}

enum WriterConn {
    /// Redis (`SET` then `WAIT n−1 0`) or xlane kv (`SET`).
    Resp {
        c: Resp,
        /// `WAIT`'s replica count (Redis with replicas).
        wait: Option<i64>,
    },
    /// etcd (`PUT`, linearizable: acknowledged once a quorum committed).
    Etcd(Http),
}

impl Writer {
    /// A writer on the cluster's leader, connected in its host.
    pub fn connect(cl: &Cluster, timeout: Duration) -> Result<Writer, String> {
        let members: Vec<(SocketAddr, Host)> = cl
            .clients
            .iter()
            .copied()
            .zip(cl.hosts.iter().cloned())
            .collect();
        let mut w = Writer {
            conn: WriterConn::Etcd(cl.http(cl.leader, timeout)?),
            members,
            timeout,
        };
        if cl.system != System::Etcd {
            let wait = (cl.system == System::Redis && cl.clients.len() > 1)
                .then(|| cl.clients.len() as i64 - 1);
            w.conn = WriterConn::Resp {
                c: cl.resp(cl.leader, timeout)?,
                wait,
            };
        }
        Ok(w)
    }

    /// Connects anew to the member at `to`, in its host.
    fn reconnect(&mut self, to: SocketAddr) -> Result<(), String> {
        let (addr, host) = self
            .members
            .iter()
            .find(|(a, _)| *a == to)
            .cloned()
            .ok_or_else(|| format!("{to} is no member"))?;
        let t = self.timeout;
        self.conn = match &self.conn {
            WriterConn::Etcd(_) => WriterConn::Etcd(in_host(&host, || Http::connect(addr, t))?),
            WriterConn::Resp { wait, .. } => WriterConn::Resp {
                c: in_host(&host, || Resp::connect(addr, t))?,
                wait: *wait,
            },
        };
        Ok(())
    }

    /// Connects anew to the member written to last (after a broken
    /// connection).
    pub fn reconnect_same(&mut self) -> Result<(), String> {
        let to = match &self.conn {
            WriterConn::Etcd(h) => h.peer()?,
            WriterConn::Resp { c, .. } => c.peer()?,
        };
        self.reconnect(to)
    }

    /// One write, until the system acknowledged it. A `-MOVED` (xlane kv's
    /// leader changed) is followed once, from the new leader's host, as a
    /// cluster client does.
    pub fn write(&mut self, key: &[u8], value: &[u8]) -> Result<(), String> {
        match self.write_once(key, value) {
            Err(Redirect::Moved(to)) => {
                self.reconnect(to)?;
                self.write_once(key, value).map_err(|e| e.to_string())
            }
            r => r.map_err(|e| e.to_string()),
        }
    }

    fn write_once(&mut self, key: &[u8], value: &[u8]) -> Result<(), Redirect> {
        match &mut self.conn {
            WriterConn::Resp { c, wait } => {
                c.push(&[b"SET", key, value]);
                if let Some(n) = wait {
                    c.push(&[b"WAIT", n.to_string().as_bytes(), b"0"]);
                }
                c.flush()?;
                let set = c.reply()?;
                let waited = match wait {
                    Some(_) => Some(c.reply()?),
                    None => None,
                };
                if let Reply::Error(e) = &set {
                    if let Some(to) = moved_to(e) {
                        return Err(Redirect::Moved(to));
                    }
                }
                match (set, waited, *wait) {
                    (s, None, None) if s == Reply::ok() => Ok(()),
                    (s, Some(Reply::Integer(k)), Some(n)) if s == Reply::ok() && k == n => Ok(()),
                    (s, w, _) => Err(Redirect::Failed(format!("SET: {s:?}, WAIT: {w:?}"))),
                }
            }
            WriterConn::Etcd(h) => {
                let body = format!(
                    "{{\"key\":\"{}\",\"value\":\"{}\"}}",
                    base64(key),
                    base64(value)
                );
                h.post("/v3/kv/put", &body)
                    .map(|_| ())
                    .map_err(Redirect::Failed)
            }
        }
    }
}

/// Why a write did not go through.
enum Redirect {
    /// `-MOVED`: the leader is at this address.
    Moved(SocketAddr),
    /// Anything else.
    Failed(String),
}

impl From<String> for Redirect {
    fn from(e: String) -> Self {
        Redirect::Failed(e)
    }
}

impl std::fmt::Display for Redirect {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Redirect::Moved(a) => write!(f, "MOVED to {a}"),
            Redirect::Failed(e) => f.write_str(e),
        }
    }
}

/// The address of a `MOVED <slot> <host:port>` error.
fn moved_to(e: &str) -> Option<SocketAddr> {
    let mut w = e.split_whitespace();
    (w.next()? == "MOVED").then_some(())?;
    w.next()?;
    w.next()?.parse().ok()
}

/// What one cluster's run measured.
#[derive(Debug, Default)]
pub struct Measured {
    /// Write-visible latency of each successful write, ns.
    pub latencies: Vec<u64>,
    /// Time until acknowledged, ns.
    pub acks: Vec<u64>,
    /// Value sizes written in the latency phase.
    pub sizes: Vec<usize>,
    /// Failed writes (refused, or not visible on every member in time),
    /// both phases.
    pub errors: u64,
    /// The first failure, for the report.
    pub first_error: Option<String>,
    /// Acknowledged writes of the throughput phase.
    pub tput_writes: u64,
    /// From the throughput phase's start until its last write was visible
    /// on every member, ns.
    pub tput_ns: u64,
}

impl Measured {
    fn fail(&mut self, e: String) {
        self.errors += 1;
        self.first_error.get_or_insert(e);
    }
}

/// One system's measurement, run in rounds: the latency phase's writes
/// and the throughput phase's time are split into rounds, and the bench
/// alternates the systems round by round, so that every system meets the
/// machine's slow minutes alike (see [`super::run`]).
pub struct Run<'a> {
    cl: &'a Cluster,
    obs: &'a Observers,
    lane_core: Option<usize>,
    writer: Writer,
    rng: Rng,
    seed: u64,
    /// Timed writes so far (the latency keys' index).
    timed: usize,
    /// Latency phase time spent so far.
    latency_spent: Duration,
    /// Throughput rounds so far (their keys' index).
    tput_rounds: u64,
    /// What was measured.
    pub m: Measured,
}

impl<'a> Run<'a> {
    /// Connects the writer in the leader's host and warms the cluster up
    /// with untimed writes (a tenth of `cfg.writes`, 5 to 200, for at most
    /// a tenth of `cfg.latency_cap`).
    pub fn start(
        cl: &'a Cluster,
        obs: &'a Observers,
        cfg: &KvBenchConfig,
        clock: Clock,
        seed: u64,
        lane_core: Option<usize>,
    ) -> Result<Run<'a>, String> {
        let _placed = place(lane_core)?;
        let mut run = Run {
            cl,
            obs,
            lane_core,
            writer: Writer::connect(cl, cfg.timeout)?,
            rng: Rng::new(seed),
            seed,
            timed: 0,
            latency_spent: Duration::ZERO,
            tput_rounds: 0,
            m: Measured::default(),
        };
        let warmup = (cfg.writes / 10).clamp(5, 200);
        let began = Instant::now();
        let timeout_ns = cfg.timeout.as_nanos() as u64;
        for i in 0..warmup {
            if began.elapsed() >= cfg.latency_cap / 10 {
                break;
            }
            let len = run
                .rng
                .trunc_normal_size(cfg.mean_size, cfg.sd_size, MAX_SIZE);
            let value = run.rng.value(len);
            let key = format!("{KEY_PREFIX}w:{i}");
            let t0 = clock.now();
            if run.writer.write(key.as_bytes(), &value).is_err() {
                let _ = run.writer.reconnect_same();
                continue;
            }
            let _ = obs.await_key(clock, &key, cl.clients.len(), t0 + timeout_ns);
        }
        Ok(run)
    }

    /// Timed writes so far.
    pub fn timed(&self) -> usize {
        self.timed
    }

    /// A latency round: up to `writes` sequential writes by one writer,
    /// each until visible on every member, stopping early once the whole
    /// latency phase took `cfg.latency_cap` (a slow system gets fewer
    /// samples, not hours). False once the cap is reached.
    pub fn latency_round(
        &mut self,
        cfg: &KvBenchConfig,
        clock: Clock,
        writes: usize,
    ) -> Result<bool, String> {
        let _placed = place(self.lane_core)?;
        let n = self.cl.clients.len();
        let timeout_ns = cfg.timeout.as_nanos() as u64;
        let began = Instant::now();
        for _ in 0..writes {
            if super::interrupted() {
                break;
            }
            if self.latency_spent + began.elapsed() >= cfg.latency_cap {
                self.latency_spent += began.elapsed();
                return Ok(false);
            }
            let len = self
                .rng
                .trunc_normal_size(cfg.mean_size, cfg.sd_size, MAX_SIZE);
            let value = self.rng.value(len);
            let key = format!("{KEY_PREFIX}l:{}", self.timed);
            self.timed += 1;
            let t0 = clock.now();
            if let Err(e) = self.writer.write(key.as_bytes(), &value) {
                self.m.fail(format!("{key}: {e}"));
                // A broken connection fails every later write: connect anew.
                let _ = self.writer.reconnect_same();
                continue;
            }
            // One monotonic clock, read after t0.
            let ack = clock.now() - t0;
            match self.obs.await_key(clock, &key, n, t0 + timeout_ns) {
                Some(last) => {
                    self.m.latencies.push(last.saturating_sub(t0));
                    self.m.acks.push(ack);
                    self.m.sizes.push(len);
                }
                None => self
                    .m
                    .fail(format!("{key}: not visible on every member in time")),
            }
        }
        self.latency_spent += began.elapsed();
        Ok(true)
    }

    /// A throughput round: `cfg.clients` closed-loop clients for `length`,
    /// then until every acknowledged write is visible on every member (or
    /// the timeout: the missing ones fail).
    pub fn throughput_round(
        &mut self,
        cfg: &KvBenchConfig,
        clock: Clock,
        length: Duration,
    ) -> Result<(), String> {
        let regular =
            crate::interference::Cores::new(crate::interference::Cores::online(), cfg.lane_core)
                .map(|c| c.regular_or_all())
                .map_err(|e| e.to_string())?;
        let timeout_ns = cfg.timeout.as_nanos() as u64;
        let least = || {
            self.obs
                .tput
                .iter()
                .map(|t| t.writes.load(Ordering::Relaxed))
                .min()
                .unwrap_or(0)
        };
        let seen_before = least();
        let round = self.tput_rounds;
        self.tput_rounds += 1;
        let stop = Arc::new(AtomicBool::new(false));
        let start = clock.now();
        let mut clients = Vec::new();
        for c in 0..cfg.clients {
            let mut w = Writer::connect(self.cl, cfg.timeout)?;
            let (stop, regular) = (stop.clone(), regular.clone());
            let (mean, sd) = (cfg.mean_size, cfg.sd_size);
            let mut rng = Rng::new(
                self.seed
                    ^ (c as u64 + 1).wrapping_mul(0x9E37_79B9)
                    ^ round.wrapping_mul(0x85EB_CA6B),
            );
            clients.push(std::thread::spawn(move || -> (u64, u64, Option<String>) {
                // Bulk clients are the application's regular work: off the
                // lane core for every system.
                let _placed = xlane_host::runtime::AffinityGuard::pin(&regular);
                let (mut acked, mut failed, mut first) = (0u64, 0u64, None);
                let mut seq = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let len = rng.trunc_normal_size(mean, sd, MAX_SIZE);
                    let value = rng.value(len);
                    let key = format!("{TPUT_PREFIX}{round}.{c}:{seq}");
                    seq += 1;
                    match w.write(key.as_bytes(), &value) {
                        Ok(()) => acked += 1,
                        Err(e) => {
                            failed += 1;
                            first.get_or_insert(format!("{key}: {e}"));
                            std::thread::sleep(Duration::from_millis(10));
                            // A broken connection: connect anew.
                            let _ = w.reconnect_same();
                        }
                    }
                }
                (acked, failed, first)
            }));
        }
        let until = Instant::now() + length;
        while !super::interrupted() {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            std::thread::sleep(left.min(Duration::from_millis(50)));
        }
        stop.store(true, Ordering::Relaxed);
        let mut acked = 0;
        for h in clients {
            match h.join() {
                Ok((a, f, first)) => {
                    acked += a;
                    self.m.errors += f;
                    if let Some(e) = first {
                        self.m.first_error.get_or_insert(e);
                    }
                }
                Err(_) => self.m.fail("a throughput client panicked".into()),
            }
        }
        // Every acknowledged write must become visible on every member.
        let deadline = clock.now() + timeout_ns;
        let want = seen_before + acked;
        while least() < want && clock.now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        let missing = want.saturating_sub(least());
        if missing > 0 {
            self.m.errors += missing;
            self.m.first_error.get_or_insert(format!(
                "{missing} throughput writes not visible on every member in time"
            ));
        }
        let last = self
            .obs
            .tput
            .iter()
            .map(|t| t.last_ns.load(Ordering::Relaxed))
            .max()
            .unwrap_or(start);
        self.m.tput_writes += acked;
        // Until the last write was visible; when none of this round's was
        // (the stamps are all older than its start), until the bench gave
        // up waiting: a round always took the time it ran, never 0 or 1 ns.
        self.m.tput_ns += match last.checked_sub(start) {
            Some(d) if d > 0 => d,
            _ => clock.now().saturating_sub(start).max(1),
        };
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn moved_errors_name_the_leader() {
        let table: [(&str, Option<&str>); 4] = [
            ("MOVED 1234 198.18.0.2:6380", Some("198.18.0.2:6380")),
            ("MOVED 0 127.0.0.1:7000", Some("127.0.0.1:7000")),
            ("TRYAGAIN no leader known, retry later", None),
            ("MOVED 12", None),
        ];
        for (e, want) in table {
            assert_eq!(moved_to(e), want.map(|a| a.parse().expect("addr")), "{e}");
        }
    }

    #[test]
    fn etcd_watch_messages_give_put_keys() {
        let k1 = base64(b"kvbench:l:1");
        let k2 = base64(b"kvbench:t:0:5");
        let line = format!(
            "{{\"result\":{{\"header\":{{\"revision\":\"9\"}},\"events\":[\
             {{\"kv\":{{\"key\":\"{k1}\",\"value\":\"eA==\"}}}},\
             {{\"type\":\"DELETE\",\"kv\":{{\"key\":\"{k1}\"}}}},\
             {{\"type\":\"PUT\",\"kv\":{{\"key\":\"{k2}\"}}}}]}}}}\n"
        );
        assert_eq!(
            etcd_watch_keys(line.as_bytes()),
            Ok(vec!["kvbench:l:1".to_string(), "kvbench:t:0:5".to_string()])
        );
        assert_eq!(etcd_watch_keys(b"  \n"), Ok(vec![]));
        assert_eq!(
            etcd_watch_keys(b"{\"result\":{\"created\":true}}"),
            Ok(vec![])
        );
        assert!(etcd_watch_keys(b"{\"error\":{\"message\":\"x\"}}").is_err());
        assert!(etcd_watch_keys(b"{not json").is_err());
    }
}
