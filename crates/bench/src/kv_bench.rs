//! `xlane bench kv`: replicated key-value writes side by side (X-Lane §6.5,
//! Fig. 8) — xlane kv (Raft), real etcd and real Redis with `WAIT`, each
//! with the same number of replicas, started as real processes on
//! 127.0.0.1 of this machine.
//!
//! **Workload.** Every write puts a new key (`kvbench:<client>:<seq>`, so a
//! read is never ambiguous) with a value whose size is drawn from a normal
//! distribution (default mean 25.6 B, σ 10 B) truncated to [1 B, 10 MB] as
//! in the paper (rejection sampling, rounded to whole bytes; the observed
//! mean and σ are reported). Values are random lower-case letters from a
//! seeded generator.
//!
//! **Visible on every replica.** A write counts as visible on every replica
//! when the system acknowledged it *and* a read of the key on every member
//! returns the new value. The same rule holds for all three systems:
//! * etcd: `PUT` (linearizable, quorum commit) on the leader, then a
//!   serializable range read on each member, repeated until it returns the
//!   value (a serializable read answers from the member's own state);
//! * Redis: `SET` + `WAIT <N−1> 0` on the primary (acknowledged once all
//!   replicas confirmed the offset), then `GET` on each replica;
//! * xlane kv: `SET` on the leader (quorum commit), then `GET` on each
//!   member until it returns the value, on connections that said
//!   `READONLY` (as Redis Cluster clients do for replica reads): each
//!   member answers from its own applied state, like etcd's serializable
//!   read, without the ReadIndex round trip xlane's reads make by default.
//!
//! The reads go to all members at once, each on its own connection, and
//! are repeated for the members that did not return the value yet.
//!
//! **Latency phase.** One client, sequential writes; each is timed from the
//! send of the write until the read on the last member returned the value.
//! **Throughput phase.** K closed-loop clients write for D seconds; then
//! the last key of every client is read on every member until visible
//! (the replication logs are ordered, so that implies every earlier write).
//! ops/s = writes ÷ (time from the start until everything was visible).
//!
//! **Durability (equal for all).** Everything lives on a RAM disk and no
//! write waits for stable storage: etcd's data directory (it always fsyncs
//! its WAL) is on /dev/shm, where fsync is a no-op; Redis runs with
//! `appendonly no` and `save ""`; xlane kv keeps its raft log in a
//! directory on /dev/shm with `--fsync never`.
//!
//! Every process is killed by its PID when its run ends, also on failure,
//! and its temporary directory is removed.

use std::fmt::Write as _;
use std::fs::File;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::stats::LatencySummary;
use crate::table::{fmt_ns, Table};

/// One of the systems compared.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum System {
    /// `xlane kv serve` in its replicated (Raft) mode, express traffic on
    /// plain UDP.
    Xlane,
    /// The same with `--transport lane`: X-Raft over the lane (replication
    /// sub-lane, commit notices on X-FD heartbeats).
    XlaneLane,
    /// Real etcd (Debian `etcd-server`).
    Etcd,
    /// Real Redis (Debian `redis-server`), one primary, `WAIT` for all
    /// replicas after every write.
    Redis,
}

impl System {
    /// All systems, in report order.
    pub const ALL: [System; 4] = [
        System::Xlane,
        System::XlaneLane,
        System::Etcd,
        System::Redis,
    ];

    /// The name used in reports and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            System::Xlane => "xlane",
            System::XlaneLane => "xlane-lane",
            System::Etcd => "etcd",
            System::Redis => "redis",
        }
    }

    /// Parse a command-line name (`xlane`, `xlane-lane`, `etcd`, `redis`).
    pub fn from_name(s: &str) -> Option<System> {
        System::ALL.into_iter().find(|x| x.name() == s)
    }

    fn label(self) -> &'static str {
        match self {
            System::Xlane => "xlane kv (Raft, UDP)",
            System::XlaneLane => "xlane kv (X-Raft, lane)",
            System::Etcd => "etcd",
            System::Redis => "redis+WAIT",
        }
    }

    fn durability(self) -> &'static str {
        match self {
            System::Xlane | System::XlaneLane => "raft log on /dev/shm, --fsync never",
            System::Etcd => "data dir on /dev/shm (WAL fsync is a no-op there)",
            System::Redis => "appendonly no, save \"\" (memory only)",
        }
    }
}

/// What to run.
#[derive(Clone, Debug)]
pub struct KvBenchConfig {
    /// Systems to compare.
    pub systems: Vec<System>,
    /// Replica counts (members per cluster), each ≥ 1.
    pub replicas: Vec<usize>,
    /// Writes of the latency phase (one client, sequential).
    pub writes: usize,
    /// Length of the throughput phase.
    pub throughput_duration: Duration,
    /// Concurrent clients of the throughput phase.
    pub clients: usize,
    /// Seed of the value sizes and contents.
    pub seed: u64,
    /// Mean of the value-size distribution, bytes.
    pub mean_size: f64,
    /// Standard deviation of the value-size distribution, bytes.
    pub sd_size: f64,
    /// The xlane binary (`xlane kv serve`); `None` leaves xlane out with a
    /// reason in the report.
    pub xlane_bin: Option<PathBuf>,
    /// Directory for the temporary data of every cluster (a RAM disk).
    pub work_dir: PathBuf,
    /// Write the Fig. 8 plots (PNG and SVG) into this directory.
    pub plot_dir: Option<PathBuf>,
    /// How long a cluster may take to come up, and a write to become
    /// visible, before the run of that system fails.
    pub timeout: Duration,
}

impl Default for KvBenchConfig {
    fn default() -> Self {
        KvBenchConfig {
            systems: System::ALL.to_vec(),
            replicas: vec![3, 5],
            writes: 2000,
            throughput_duration: Duration::from_secs(5),
            clients: 8,
            seed: 1,
            mean_size: 25.6,
            sd_size: 10.0,
            xlane_bin: None,
            work_dir: PathBuf::from("/dev/shm"),
            plot_dir: None,
            timeout: Duration::from_secs(20),
        }
    }
}

/// Result of one system with one replica count.
#[derive(Clone, Debug, Serialize)]
pub struct SystemReport {
    /// `xlane`, `etcd` or `redis`.
    pub name: String,
    /// Members of the cluster.
    pub replicas: usize,
    /// Whether the system ran; if not, `reason` says why and the numbers
    /// are 0.
    pub available: bool,
    /// Why the system did not run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Version string of the server binary.
    pub version: String,
    /// Durability setting.
    pub durability: String,
    /// Mean time until a write is visible on every replica.
    pub mean_ns: u64,
    /// Median of that time.
    pub p50_ns: u64,
    /// 99th percentile of that time.
    pub p99_ns: u64,
    /// Smallest.
    pub min_ns: u64,
    /// Largest.
    pub max_ns: u64,
    /// Mean time until the system acknowledged a write (etcd, xlane:
    /// committed by a quorum; redis: `WAIT` returned), before the reads.
    pub ack_mean_ns: u64,
    /// Median of that time.
    pub ack_p50_ns: u64,
    /// Writes timed in the latency phase.
    pub latency_writes: u64,
    /// Writes per second of the throughput phase, visible on every replica.
    pub ops_per_s: f64,
    /// Writes of the throughput phase.
    pub throughput_writes: u64,
    /// Time from the start of the throughput phase until all its writes
    /// were visible on every replica.
    pub throughput_ns: u64,
}

/// The observed value sizes.
#[derive(Clone, Debug, Serialize)]
pub struct Workload {
    /// Requested mean, bytes.
    pub mean_size: f64,
    /// Requested σ, bytes.
    pub sd_size: f64,
    /// Truncation, bytes.
    pub min_size: usize,
    /// Truncation, bytes.
    pub max_size: usize,
    /// Observed mean of the sizes written in the latency phases.
    pub observed_mean: f64,
    /// Observed σ of those sizes.
    pub observed_sd: f64,
    /// Seed.
    pub seed: u64,
    /// Latency-phase writes per run.
    pub writes: usize,
    /// Throughput-phase clients.
    pub clients: usize,
    /// Throughput-phase length, seconds.
    pub seconds: f64,
    /// The visibility rule.
    pub visibility: String,
}

/// xlane's mean latency and throughput relative to another system at one
/// replica count.
#[derive(Clone, Debug, Serialize)]
pub struct Ratio {
    /// The xlane variant (`xlane` or `xlane-lane`).
    pub system: String,
    /// The other system.
    pub versus: String,
    /// Replica count.
    pub replicas: usize,
    /// other mean latency ÷ xlane mean latency (> 1: xlane is faster).
    pub latency_speedup: f64,
    /// xlane ops/s ÷ other ops/s (> 1: xlane writes more).
    pub throughput_ratio: f64,
}

/// What any replicated store needs on this machine, measured in the same
/// run: the cost of one round trip between two threads over loopback UDP.
#[derive(Clone, Debug, Serialize)]
pub struct MachineFloor {
    /// Round trips timed (half before the systems' runs, half after).
    pub samples: u64,
    /// Median round trip.
    pub rtt_p50_ns: u64,
    /// Mean round trip.
    pub rtt_mean_ns: u64,
    /// [`VISIBLE_ROUND_TRIPS`] × the median: the least time in which a
    /// write can be acknowledged after reaching the other replicas and then
    /// be read back from every member, on this machine.
    pub visible_floor_ns: u64,
}

/// Round trips a write needs before it is known visible on every replica:
/// client → leader (or primary) and back, leader → the other replicas and
/// back (at least one of them for a quorum, all of them for `WAIT`), and
/// the reads that find it on every member.
pub const VISIBLE_ROUND_TRIPS: u64 = 3;

/// Round trips timed by each [`machine_round_trips`] call.
const FLOOR_ROUND_TRIPS: usize = 5000;

/// Times `n` round trips of a 32-byte datagram between this thread and an
/// echo thread, after an untimed warm-up.
fn machine_round_trips(n: usize) -> Result<Vec<u64>, String> {
    let io = |e: std::io::Error| format!("floor probe: {e}");
    let echo = UdpSocket::bind("127.0.0.1:0").map_err(io)?;
    let me = UdpSocket::bind("127.0.0.1:0").map_err(io)?;
    let echo_addr = echo.local_addr().map_err(io)?;
    echo.set_read_timeout(Some(Duration::from_secs(2)))
        .map_err(io)?;
    me.set_read_timeout(Some(Duration::from_secs(2)))
        .map_err(io)?;
    let total = n + n / 10;
    let t = std::thread::spawn(move || {
        let mut buf = [0u8; 64];
        for _ in 0..total {
            match echo.recv_from(&mut buf) {
                Ok((k, from)) => {
                    let _ = echo.send_to(&buf[..k], from);
                }
                Err(_) => return,
            }
        }
    });
    let msg = [7u8; 32];
    let mut buf = [0u8; 64];
    let mut out = Vec::with_capacity(n);
    for i in 0..total {
        let t0 = Instant::now();
        me.send_to(&msg, echo_addr).map_err(io)?;
        me.recv(&mut buf).map_err(io)?;
        if i >= total - n {
            out.push(t0.elapsed().as_nanos() as u64);
        }
    }
    let _ = t.join();
    Ok(out)
}

/// The whole report.
#[derive(Clone, Debug, Serialize)]
pub struct KvBenchReport {
    /// One entry per system and replica count.
    pub systems: Vec<SystemReport>,
    /// The machine's floor from the same run.
    pub floor: MachineFloor,
    /// xlane against each other system.
    pub ratios: Vec<Ratio>,
    /// The workload.
    pub workload: Workload,
    /// Plot files written.
    pub plots: Vec<String>,
}

/// Why the benchmark could not run at all (a single system failing is
/// reported in its [`SystemReport`] instead).
#[derive(Debug, thiserror::Error)]
pub enum KvBenchError {
    /// The configuration is unusable.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// A server binary the run needs is not installed.
    #[error("{binary} not found ({hint})")]
    Missing {
        /// Binary looked for.
        binary: &'static str,
        /// How to install it.
        hint: &'static str,
    },
    /// A system failed to run.
    #[error("{system} with {replicas} replicas: {message}")]
    Run {
        /// System.
        system: &'static str,
        /// Replica count.
        replicas: usize,
        /// What went wrong.
        message: String,
    },
    /// The plots could not be written.
    #[error("plot {path}: {message}")]
    Plot {
        /// File.
        path: String,
        /// What went wrong.
        message: String,
    },
}

/// Largest value size of the truncation, bytes (as the paper).
pub const MAX_SIZE: usize = 10_000_000;

// ---------------------------------------------------------------- workload

/// A small seeded generator (xorshift64*).
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator from a seed (any value, 0 included).
    pub fn new(seed: u64) -> Self {
        let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        Rng((z ^ (z >> 31)) | 1)
    }

    /// Next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in (0, 1).
    pub fn unit(&mut self) -> f64 {
        ((self.next_u64() >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }

    /// A value size: normal(mean, sd) rounded to whole bytes, redrawn
    /// until it lies in [1, max].
    pub fn trunc_normal_size(&mut self, mean: f64, sd: f64, max: usize) -> usize {
        for _ in 0..10_000 {
            let (u1, u2) = (self.unit(), self.unit());
            let z = (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos();
            let x = (mean + sd * z).round();
            if x >= 1.0 && x <= max as f64 {
                return x as usize;
            }
        }
        mean.round().clamp(1.0, max as f64) as usize
    }

    /// `len` random lower-case letters.
    pub fn value(&mut self, len: usize) -> Vec<u8> {
        (0..len)
            .map(|_| b'a' + (self.next_u64() % 26) as u8)
            .collect()
    }
}

// ------------------------------------------------------------ processes

/// Processes of one cluster and its temporary directory; all killed by PID
/// and removed on drop.
struct Cluster {
    children: Vec<Child>,
    dir: PathBuf,
}

impl Cluster {
    fn new(dir: PathBuf) -> Result<Self, String> {
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        Ok(Cluster {
            children: Vec::new(),
            dir,
        })
    }

    fn spawn(&mut self, name: &str, cmd: &mut Command) -> Result<(), String> {
        let log = self.dir.join(format!("{name}.log"));
        let out = File::create(&log).map_err(|e| format!("{}: {e}", log.display()))?;
        let err = out
            .try_clone()
            .map_err(|e| format!("{}: {e}", log.display()))?;
        let child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::from(out))
            .stderr(Stdio::from(err))
            .spawn()
            .map_err(|e| format!("cannot start {:?}: {e}", cmd.get_program()))?;
        self.children.push(child);
        Ok(())
    }

    /// Error text with the tail of every log, for a failed start.
    fn logs_tail(&self) -> String {
        let mut s = String::new();
        if let Ok(rd) = std::fs::read_dir(&self.dir) {
            for e in rd.flatten() {
                let p = e.path();
                if p.extension().is_some_and(|x| x == "log") {
                    let text = std::fs::read_to_string(&p).unwrap_or_default();
                    let tail: String = text
                        .lines()
                        .rev()
                        .take(3)
                        .collect::<Vec<_>>()
                        .into_iter()
                        .rev()
                        .collect::<Vec<_>>()
                        .join(" | ");
                    let _ = write!(s, "; {}: {tail}", p.display());
                }
            }
        }
        s
    }

    fn check_alive(&mut self) -> Result<(), String> {
        for c in &mut self.children {
            if let Ok(Some(st)) = c.try_wait() {
                return Err(format!("process {} exited ({st})", c.id()));
            }
        }
        Ok(())
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `n` free loopback ports `p`, each free for TCP and UDP when checked and
/// with the `extra` ports above it free for UDP too (a lane-mode member
/// also binds its raft port + 1), no two such ranges touching.
fn free_ports(n: usize, extra: u16) -> Result<Vec<u16>, String> {
    let mut held = Vec::new();
    let mut ports: Vec<u16> = Vec::new();
    for _ in 0..100 * n + 100 {
        if ports.len() == n {
            return Ok(ports);
        }
        let l = TcpListener::bind("127.0.0.1:0").map_err(|e| format!("bind: {e}"))?;
        let port = l.local_addr().map_err(|e| e.to_string())?.port();
        if port.checked_add(extra).is_none() || ports.iter().any(|&q| port.abs_diff(q) <= extra) {
            continue;
        }
        let udp: Result<Vec<UdpSocket>, _> = (port..=port + extra)
            .map(|p| UdpSocket::bind(("127.0.0.1", p)))
            .collect();
        if let Ok(u) = udp {
            held.push((l, u));
            ports.push(port);
        }
    }
    if ports.len() == n {
        Ok(ports)
    } else {
        Err("no free ports".into())
    }
}

fn which(bin: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/usr/bin")])
        .map(|d| d.join(bin))
        .find(|p| p.is_file())
}

fn version_of(bin: &Path, arg: &str) -> String {
    Command::new(bin)
        .arg(arg)
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.lines().next().map(|l| l.trim().to_string()))
        .unwrap_or_default()
}

// ----------------------------------------------------------------- RESP

#[derive(Debug, PartialEq)]
enum Reply {
    Simple(String),
    Error(String),
    Int(i64),
    Bulk(Option<Vec<u8>>),
    Array(usize),
}

struct Resp {
    w: TcpStream,
    r: BufReader<TcpStream>,
    buf: Vec<u8>,
}

impl Resp {
    fn connect(addr: SocketAddr, timeout: Duration) -> Result<Resp, String> {
        let s = TcpStream::connect_timeout(&addr, timeout).map_err(|e| format!("{addr}: {e}"))?;
        let _ = s.set_nodelay(true);
        s.set_read_timeout(Some(timeout))
            .map_err(|e| e.to_string())?;
        let r = BufReader::new(s.try_clone().map_err(|e| e.to_string())?);
        Ok(Resp {
            w: s,
            r,
            buf: Vec::with_capacity(256),
        })
    }

    fn push(&mut self, args: &[&[u8]]) {
        let _ = write!(self.buf, "*{}\r\n", args.len());
        for a in args {
            let _ = write!(self.buf, "${}\r\n", a.len());
            self.buf.extend_from_slice(a);
            self.buf.extend_from_slice(b"\r\n");
        }
    }

    fn flush(&mut self) -> Result<(), String> {
        let r = self.w.write_all(&self.buf).map_err(|e| e.to_string());
        self.buf.clear();
        r
    }

    fn reply(&mut self) -> Result<Reply, String> {
        let mut line = Vec::new();
        self.r
            .read_until(b'\n', &mut line)
            .map_err(|e| e.to_string())?;
        if line.len() < 3 || !line.ends_with(b"\r\n") {
            return Err("connection closed or bad reply".into());
        }
        let body = String::from_utf8_lossy(&line[1..line.len() - 2]).into_owned();
        let num = |s: &str| s.parse::<i64>().map_err(|_| format!("bad number {s:?}"));
        match line[0] {
            b'+' => Ok(Reply::Simple(body)),
            b'-' => Ok(Reply::Error(body)),
            b':' => Ok(Reply::Int(num(&body)?)),
            b'*' => Ok(Reply::Array(num(&body)?.max(0) as usize)),
            b'$' => {
                let n = num(&body)?;
                if n < 0 {
                    return Ok(Reply::Bulk(None));
                }
                let mut v = vec![0u8; n as usize + 2];
                self.r.read_exact(&mut v).map_err(|e| e.to_string())?;
                v.truncate(n as usize);
                Ok(Reply::Bulk(Some(v)))
            }
            c => Err(format!("bad reply type {:?}", c as char)),
        }
    }

    fn cmd(&mut self, args: &[&[u8]]) -> Result<Reply, String> {
        self.push(args);
        self.flush()?;
        self.reply()
    }
}

// ----------------------------------------------------------------- HTTP

struct Http {
    addr: SocketAddr,
    w: TcpStream,
    r: BufReader<TcpStream>,
}

impl Http {
    fn connect(addr: SocketAddr, timeout: Duration) -> Result<Http, String> {
        let s = TcpStream::connect_timeout(&addr, timeout).map_err(|e| format!("{addr}: {e}"))?;
        let _ = s.set_nodelay(true);
        s.set_read_timeout(Some(timeout))
            .map_err(|e| e.to_string())?;
        let r = BufReader::new(s.try_clone().map_err(|e| e.to_string())?);
        Ok(Http { addr, w: s, r })
    }

    fn post(&mut self, path: &str, body: &str) -> Result<serde_json::Value, String> {
        self.send(path, body)?;
        self.recv()
    }

    fn send(&mut self, path: &str, body: &str) -> Result<(), String> {
        let req = format!(
            "POST {path} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            self.addr,
            body.len()
        );
        self.w.write_all(req.as_bytes()).map_err(|e| e.to_string())
    }

    fn recv(&mut self) -> Result<serde_json::Value, String> {
        let mut line = String::new();
        self.r.read_line(&mut line).map_err(|e| e.to_string())?;
        let status = line.split_whitespace().nth(1).unwrap_or("").to_string();
        let (mut len, mut chunked) = (None, false);
        loop {
            line.clear();
            let n = self.r.read_line(&mut line).map_err(|e| e.to_string())?;
            if n == 0 {
                return Err("connection closed".into());
            }
            let l = line.trim_end();
            if l.is_empty() {
                break;
            }
            if let Some((k, v)) = l.split_once(':') {
                let (k, v) = (k.trim().to_ascii_lowercase(), v.trim());
                if k == "content-length" {
                    len = v.parse::<usize>().ok();
                } else if k == "transfer-encoding" && v.eq_ignore_ascii_case("chunked") {
                    chunked = true;
                }
            }
        }
        let mut body = Vec::new();
        if chunked {
            loop {
                line.clear();
                self.r.read_line(&mut line).map_err(|e| e.to_string())?;
                let n = usize::from_str_radix(line.trim().split(';').next().unwrap_or(""), 16)
                    .map_err(|_| format!("bad chunk size {line:?}"))?;
                let mut c = vec![0u8; n + 2];
                self.r.read_exact(&mut c).map_err(|e| e.to_string())?;
                if n == 0 {
                    break;
                }
                c.truncate(n);
                body.extend_from_slice(&c);
            }
        } else {
            let n = len.ok_or("response without length")?;
            body.resize(n, 0);
            self.r.read_exact(&mut body).map_err(|e| e.to_string())?;
        }
        if status != "200" {
            return Err(format!(
                "HTTP {status}: {}",
                String::from_utf8_lossy(&body).trim()
            ));
        }
        serde_json::from_slice(&body).map_err(|e| format!("bad JSON: {e}"))
    }
}

/// Standard base64 with padding.
pub fn base64(data: &[u8]) -> String {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for c in data.chunks(3) {
        let b = [c[0], *c.get(1).unwrap_or(&0), *c.get(2).unwrap_or(&0)];
        let n = (b[0] as u32) << 16 | (b[1] as u32) << 8 | b[2] as u32;
        for i in 0..4 {
            if i <= c.len() {
                out.push(T[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

// -------------------------------------------------------------- clients

/// A connection that writes (to the leader / primary).
enum Writer {
    Resp { c: Resp, wait: Option<String> },
    Etcd(Http),
}

/// A connection that reads from one member.
enum Reader {
    Resp(Resp),
    Etcd(Http),
}

impl Writer {
    fn write(&mut self, key: &[u8], value: &[u8]) -> Result<(), String> {
        match self {
            Writer::Resp { c, wait } => {
                c.push(&[b"SET", key, value]);
                if let Some(n) = wait {
                    c.push(&[b"WAIT", n.as_bytes(), b"0"]);
                }
                c.flush()?;
                match c.reply()? {
                    Reply::Simple(s) if s == "OK" => {}
                    r => return Err(format!("SET: {r:?}")),
                }
                if let Some(n) = wait {
                    match c.reply()? {
                        Reply::Int(k) if k.to_string() == *n => {}
                        r => return Err(format!("WAIT {n}: {r:?}")),
                    }
                }
                Ok(())
            }
            Writer::Etcd(h) => {
                let body = format!(
                    "{{\"key\":\"{}\",\"value\":\"{}\"}}",
                    base64(key),
                    base64(value)
                );
                h.post("/v3/kv/put", &body).map(|_| ())
            }
        }
    }
}

impl Reader {
    /// Send a read of `key`; [`Reader::recv`] gets the answer.
    fn send(&mut self, key: &[u8]) -> Result<(), String> {
        match self {
            Reader::Resp(c) => {
                c.push(&[b"GET", key]);
                c.flush()
            }
            Reader::Etcd(h) => {
                let body = format!("{{\"key\":\"{}\",\"serializable\":true}}", base64(key));
                h.send("/v3/kv/range", &body)
            }
        }
    }

    /// Whether the answer of the read sent last is `value`.
    fn recv(&mut self, value: &[u8]) -> Result<bool, String> {
        match self {
            Reader::Resp(c) => match c.reply()? {
                Reply::Bulk(Some(v)) => Ok(v == value),
                Reply::Bulk(None) => Ok(false),
                r => Err(format!("GET: {r:?}")),
            },
            Reader::Etcd(h) => {
                let v = h.recv()?;
                let want = base64(value);
                Ok(v["kvs"]
                    .as_array()
                    .and_then(|a| a.first())
                    .and_then(|kv| kv["value"].as_str())
                    .is_some_and(|s| s == want))
            }
        }
    }
}

/// How to connect to a running cluster.
struct Endpoints {
    system: System,
    /// Client address of every member.
    members: Vec<SocketAddr>,
    /// Index of the leader / primary in `members`.
    leader: usize,
    timeout: Duration,
}

impl Endpoints {
    fn writer(&self) -> Result<Writer, String> {
        let a = self.members[self.leader];
        Ok(match self.system {
            System::Etcd => Writer::Etcd(Http::connect(a, self.timeout)?),
            System::Redis => Writer::Resp {
                c: Resp::connect(a, self.timeout)?,
                wait: (self.members.len() > 1).then(|| (self.members.len() - 1).to_string()),
            },
            System::Xlane | System::XlaneLane => Writer::Resp {
                c: Resp::connect(a, self.timeout)?,
                wait: None,
            },
        })
    }

    fn readers(&self) -> Result<Vec<Reader>, String> {
        self.members
            .iter()
            .map(|&a| {
                Ok(match self.system {
                    System::Etcd => Reader::Etcd(Http::connect(a, self.timeout)?),
                    System::Redis => Reader::Resp(Resp::connect(a, self.timeout)?),
                    // READONLY: reads from each member's own state, like
                    // etcd's serializable range and a Redis replica's GET.
                    System::Xlane | System::XlaneLane => {
                        let mut c = Resp::connect(a, self.timeout)?;
                        c.push(&[b"READONLY"]);
                        c.flush()?;
                        match c.reply()? {
                            Reply::Simple(s) if s == "OK" => {}
                            r => return Err(format!("READONLY: {r:?}")),
                        }
                        Reader::Resp(c)
                    }
                })
            })
            .collect()
    }
}

/// Read `key` on every member until each returns `value`. The reads go
/// to all members still pending at once (then their answers are
/// collected), so the time is that of the slowest member, not the sum.
fn await_visible(
    readers: &mut [Reader],
    key: &[u8],
    value: &[u8],
    deadline: Instant,
) -> Result<(), String> {
    let mut pending: Vec<usize> = (0..readers.len()).collect();
    while !pending.is_empty() {
        for &i in &pending {
            readers[i].send(key)?;
        }
        let mut still = Vec::new();
        for &i in &pending {
            if !readers[i].recv(value)? {
                still.push(i);
            }
        }
        pending = still;
        if let Some(&i) = pending.first() {
            if Instant::now() > deadline {
                return Err(format!(
                    "write {} not visible on member {} in time",
                    String::from_utf8_lossy(key),
                    i + 1
                ));
            }
        }
    }
    Ok(())
}

// ------------------------------------------------------------- starting

fn addr(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

fn start_redis(cl: &mut Cluster, n: usize, timeout: Duration) -> Result<Endpoints, String> {
    let bin = which("redis-server").ok_or("redis-server not found")?;
    let ports = free_ports(n, 0)?;
    for (i, &p) in ports.iter().enumerate() {
        let dir = cl.dir.join(format!("r{i}"));
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        let mut cmd = Command::new(&bin);
        cmd.args(["--port", &p.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no", "--protected-mode", "no"])
            .args(["--daemonize", "no", "--loglevel", "warning"])
            .arg("--dir")
            .arg(&dir);
        if i > 0 {
            cmd.args(["--replicaof", "127.0.0.1", &ports[0].to_string()]);
        }
        cl.spawn(&format!("redis{i}"), &mut cmd)?;
    }
    let deadline = Instant::now() + timeout;
    // Every replica's link is up and the primary counts them all.
    loop {
        cl.check_alive()?;
        let ready = (|| -> Result<bool, String> {
            for (i, &p) in ports.iter().enumerate() {
                let mut c = Resp::connect(addr(p), Duration::from_secs(1))?;
                let info = match c.cmd(&[b"INFO", b"replication"])? {
                    Reply::Bulk(Some(v)) => String::from_utf8_lossy(&v).into_owned(),
                    r => return Err(format!("INFO: {r:?}")),
                };
                let ok = if i == 0 {
                    info.contains(&format!("connected_slaves:{}", n - 1))
                } else {
                    info.contains("master_link_status:up")
                };
                if !ok {
                    return Ok(false);
                }
            }
            Ok(true)
        })();
        if ready == Ok(true) {
            break;
        }
        if Instant::now() > deadline {
            return Err(format!("replication did not come up: {ready:?}"));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(Endpoints {
        system: System::Redis,
        members: ports.into_iter().map(addr).collect(),
        leader: 0,
        timeout,
    })
}

fn start_etcd(cl: &mut Cluster, n: usize, timeout: Duration) -> Result<Endpoints, String> {
    let bin = which("etcd").ok_or("etcd not found")?;
    let ports = free_ports(2 * n, 0)?;
    let (client, peer) = ports.split_at(n);
    let initial: Vec<String> = peer
        .iter()
        .enumerate()
        .map(|(i, p)| format!("n{i}=http://127.0.0.1:{p}"))
        .collect();
    let token = format!("kvbench-{}-{}", std::process::id(), client[0]);
    for i in 0..n {
        let dir = cl.dir.join(format!("e{i}"));
        let c = format!("http://127.0.0.1:{}", client[i]);
        let p = format!("http://127.0.0.1:{}", peer[i]);
        let mut cmd = Command::new(&bin);
        cmd.args(["--name", &format!("n{i}")])
            .arg("--data-dir")
            .arg(&dir)
            .args(["--listen-client-urls", &c, "--advertise-client-urls", &c])
            .args([
                "--listen-peer-urls",
                &p,
                "--initial-advertise-peer-urls",
                &p,
            ])
            .args(["--initial-cluster", &initial.join(",")])
            .args(["--initial-cluster-state", "new"])
            .args(["--initial-cluster-token", &token])
            .args(["--logger", "zap", "--log-level", "error"]);
        cl.spawn(&format!("etcd{i}"), &mut cmd)?;
    }
    let deadline = Instant::now() + timeout;
    // Every member answers maintenance/status and agrees on a leader.
    loop {
        cl.check_alive()?;
        let found = (|| -> Result<Option<usize>, String> {
            let mut leader = None;
            for (i, &p) in client.iter().enumerate() {
                let mut h = Http::connect(addr(p), Duration::from_secs(1))?;
                let v = h.post("/v3/maintenance/status", "{}")?;
                let me = v["header"]["member_id"].as_str().unwrap_or("");
                let l = v["leader"].as_str().unwrap_or("0");
                if l == "0" || l.is_empty() {
                    return Ok(None);
                }
                if me == l {
                    leader = Some(i);
                }
            }
            Ok(leader)
        })();
        if let Ok(Some(leader)) = found {
            let ep = Endpoints {
                system: System::Etcd,
                members: client.iter().map(|&p| addr(p)).collect(),
                leader,
                timeout,
            };
            // One write through, so the cluster is serving.
            if ep
                .writer()
                .and_then(|mut w| w.write(b"kvbench:probe", b"1"))
                .is_ok()
            {
                return Ok(ep);
            }
        }
        if Instant::now() > deadline {
            return Err(format!("cluster did not come up: {found:?}"));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn start_xlane(
    cl: &mut Cluster,
    bin: &Path,
    n: usize,
    timeout: Duration,
    system: System,
) -> Result<Endpoints, String> {
    let lane = system == System::XlaneLane;
    // Lane mode also uses each raft port + 1 (X-FD): take pairs.
    let ports = if lane {
        free_ports(n, 1)?
            .into_iter()
            .chain(free_ports(n, 0)?)
            .collect()
    } else {
        free_ports(2 * n, 0)?
    };
    let (raft, resp) = ports.split_at(n);
    let peers: Vec<String> = (0..n)
        .map(|i| format!("{}=127.0.0.1:{}/127.0.0.1:{}", i + 1, raft[i], resp[i]))
        .collect();
    for i in 0..n {
        let mut cmd = Command::new(bin);
        cmd.args(["kv", "serve", "--id", &(i + 1).to_string()]);
        for p in &peers {
            cmd.args(["--peer", p]);
        }
        cmd.arg("--data")
            .arg(cl.dir.join(format!("x{}", i + 1)))
            .args(["--fsync", "never"]);
        if lane {
            cmd.args(["--transport", "lane"]);
        }
        cl.spawn(&format!("xlane{}", i + 1), &mut cmd)?;
    }
    let members: Vec<SocketAddr> = resp.iter().map(|&p| addr(p)).collect();
    let deadline = Instant::now() + timeout;
    let mut last = String::new();
    loop {
        cl.check_alive()?;
        // Ask every member; a follower points to the leader with -MOVED.
        let mut leader = None;
        for &m in &members {
            let Ok(mut c) = Resp::connect(m, Duration::from_secs(1)) else {
                continue;
            };
            match c.cmd(&[b"SET", b"kvbench:probe", b"1"]) {
                Ok(Reply::Simple(s)) if s == "OK" => {
                    leader = members.iter().position(|&x| x == m);
                    break;
                }
                Ok(r) => last = format!("{r:?}"),
                Err(e) => last = e,
            }
        }
        if let Some(leader) = leader {
            // Every member answers reads.
            let ep = Endpoints {
                system,
                members: members.clone(),
                leader,
                timeout,
            };
            let mut readers = ep.readers()?;
            if await_visible(&mut readers, b"kvbench:probe", b"1", deadline).is_ok() {
                return Ok(ep);
            }
        }
        if Instant::now() > deadline {
            return Err(format!("no leader in time (last answer {last})"));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

// -------------------------------------------------------------- running

/// A key and its value.
type KeyValue = (String, Vec<u8>);

struct Measured {
    latencies: Vec<u64>,
    acks: Vec<u64>,
    sizes: Vec<usize>,
    tput_writes: u64,
    tput_ns: u64,
}

fn measure(ep: &Endpoints, cfg: &KvBenchConfig, run_seed: u64) -> Result<Measured, String> {
    // Latency phase.
    let mut rng = Rng::new(run_seed);
    let mut w = ep.writer()?;
    let mut readers = ep.readers()?;
    let mut latencies = Vec::with_capacity(cfg.writes);
    let mut acks = Vec::with_capacity(cfg.writes);
    let mut sizes = Vec::with_capacity(cfg.writes);
    // Untimed warm-up writes (connections, first replication round trips).
    let warmup = (cfg.writes / 10).clamp(10, 200);
    for i in 0..warmup {
        let len = rng.trunc_normal_size(cfg.mean_size, cfg.sd_size, MAX_SIZE);
        let value = rng.value(len);
        let key = format!("kvbench:w:{i}");
        w.write(key.as_bytes(), &value)?;
        await_visible(
            &mut readers,
            key.as_bytes(),
            &value,
            Instant::now() + cfg.timeout,
        )?;
    }
    for i in 0..cfg.writes {
        let len = rng.trunc_normal_size(cfg.mean_size, cfg.sd_size, MAX_SIZE);
        let value = rng.value(len);
        let key = format!("kvbench:l:{i}");
        let t0 = Instant::now();
        w.write(key.as_bytes(), &value)?;
        acks.push(t0.elapsed().as_nanos() as u64);
        await_visible(&mut readers, key.as_bytes(), &value, t0 + cfg.timeout)?;
        latencies.push(t0.elapsed().as_nanos() as u64);
        sizes.push(len);
    }
    // Throughput phase.
    let stop = Arc::new(AtomicBool::new(false));
    let start = Instant::now();
    let mut handles = Vec::new();
    for c in 0..cfg.clients {
        let mut w = ep.writer()?;
        let stop = stop.clone();
        let (mean, sd) = (cfg.mean_size, cfg.sd_size);
        let mut rng = Rng::new(run_seed ^ (c as u64 + 1).wrapping_mul(0x9E37_79B9));
        handles.push(std::thread::spawn(
            move || -> Result<(u64, Option<KeyValue>), String> {
                let mut n = 0u64;
                let mut last = None;
                while !stop.load(Ordering::Relaxed) {
                    let len = rng.trunc_normal_size(mean, sd, MAX_SIZE);
                    let value = rng.value(len);
                    let key = format!("kvbench:t:{c}:{n}");
                    w.write(key.as_bytes(), &value)?;
                    n += 1;
                    last = Some((key, value));
                }
                Ok((n, last))
            },
        ));
    }
    std::thread::sleep(cfg.throughput_duration);
    stop.store(true, Ordering::Relaxed);
    let mut total = 0;
    let mut lasts = Vec::new();
    let mut err = None;
    for h in handles {
        match h.join() {
            Ok(Ok((n, last))) => {
                total += n;
                lasts.extend(last);
            }
            Ok(Err(e)) => err = Some(e),
            Err(_) => err = Some("a client thread panicked".into()),
        }
    }
    if let Some(e) = err {
        return Err(format!("throughput phase: {e}"));
    }
    let deadline = Instant::now() + cfg.timeout;
    for (k, v) in &lasts {
        await_visible(&mut readers, k.as_bytes(), v, deadline)?;
    }
    Ok(Measured {
        latencies,
        acks,
        sizes,
        tput_writes: total,
        tput_ns: start.elapsed().as_nanos() as u64,
    })
}

fn run_one(
    system: System,
    n: usize,
    cfg: &KvBenchConfig,
    tag: &str,
) -> Result<(Measured, String), String> {
    let dir = cfg.work_dir.join(format!("{tag}-{}-{n}", system.name()));
    let mut cl = Cluster::new(dir)?;
    let (ep, version) = match system {
        System::Redis => {
            let v = which("redis-server")
                .map(|b| version_of(&b, "--version"))
                .unwrap_or_default();
            (start_redis(&mut cl, n, cfg.timeout), v)
        }
        System::Etcd => {
            let v = which("etcd")
                .map(|b| version_of(&b, "--version"))
                .unwrap_or_default();
            (start_etcd(&mut cl, n, cfg.timeout), v)
        }
        System::Xlane | System::XlaneLane => {
            let bin = cfg.xlane_bin.as_deref().ok_or("no xlane binary given")?;
            (
                start_xlane(&mut cl, bin, n, cfg.timeout, system),
                format!("xlane {}", env!("CARGO_PKG_VERSION")),
            )
        }
    };
    let ep = ep.map_err(|e| format!("{e}{}", cl.logs_tail()))?;
    let seed = cfg.seed ^ (n as u64) << 32;
    let m = measure(&ep, cfg, seed).map_err(|e| {
        let alive = cl.check_alive().err().unwrap_or_default();
        format!("{e} {alive}{}", cl.logs_tail())
    })?;
    Ok((m, version))
}

/// Run the comparison. `log` gets progress lines. A system that cannot
/// start (or whose run fails) is reported as not available with the
/// reason; a missing etcd or Redis binary fails the whole run.
pub fn run(cfg: &KvBenchConfig, log: &mut dyn FnMut(&str)) -> Result<KvBenchReport, KvBenchError> {
    if cfg.replicas.is_empty() || cfg.replicas.iter().any(|&n| n == 0 || n > 15) {
        return Err(KvBenchError::Config("replica counts must be 1..=15".into()));
    }
    if cfg.writes == 0 || cfg.clients == 0 || cfg.systems.is_empty() {
        return Err(KvBenchError::Config(
            "writes, clients and systems must not be empty".into(),
        ));
    }
    if !(cfg.mean_size >= 1.0 && cfg.sd_size >= 0.0 && cfg.mean_size.is_finite()) {
        return Err(KvBenchError::Config("bad value-size distribution".into()));
    }
    if cfg.systems.contains(&System::Etcd) && which("etcd").is_none() {
        return Err(KvBenchError::Missing {
            binary: "etcd",
            hint: "apt-get install -y etcd-server etcd-client",
        });
    }
    if cfg.systems.contains(&System::Redis) && which("redis-server").is_none() {
        return Err(KvBenchError::Missing {
            binary: "redis-server",
            hint: "apt-get install -y redis-server redis-tools",
        });
    }
    let tag = format!(
        "kvbench-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis())
            .unwrap_or(0)
    );
    log("machine floor (UDP round trips between two threads) ...");
    let mut rtts = machine_round_trips(FLOOR_ROUND_TRIPS).map_err(KvBenchError::Config)?;
    let mut systems = Vec::new();
    let mut all_sizes = Vec::new();
    for &n in &cfg.replicas {
        for &s in &cfg.systems {
            log(&format!("{} with {n} replicas ...", s.label()));
            let mut rep = SystemReport {
                name: s.name().to_string(),
                replicas: n,
                available: false,
                reason: None,
                version: String::new(),
                durability: s.durability().to_string(),
                mean_ns: 0,
                p50_ns: 0,
                p99_ns: 0,
                min_ns: 0,
                max_ns: 0,
                ack_mean_ns: 0,
                ack_p50_ns: 0,
                latency_writes: 0,
                ops_per_s: 0.0,
                throughput_writes: 0,
                throughput_ns: 0,
            };
            match run_one(s, n, cfg, &tag) {
                Ok((mut m, version)) => {
                    let sum = LatencySummary::from_samples(s.name(), &mut m.latencies, 0);
                    rep.available = true;
                    rep.version = version;
                    rep.mean_ns = sum.avg_ns;
                    rep.p50_ns = sum.p50_ns;
                    rep.p99_ns = sum.p99_ns;
                    rep.min_ns = sum.min_ns;
                    rep.max_ns = sum.max_ns;
                    rep.latency_writes = sum.samples;
                    let ack = LatencySummary::from_samples(s.name(), &mut m.acks, 0);
                    rep.ack_mean_ns = ack.avg_ns;
                    rep.ack_p50_ns = ack.p50_ns;
                    rep.throughput_writes = m.tput_writes;
                    rep.throughput_ns = m.tput_ns;
                    rep.ops_per_s = if m.tput_ns == 0 {
                        0.0
                    } else {
                        m.tput_writes as f64 * 1e9 / m.tput_ns as f64
                    };
                    all_sizes.extend(m.sizes);
                    log(&format!(
                        "  mean {} p50 {} p99 {}, {:.0} writes/s",
                        fmt_ns(rep.mean_ns),
                        fmt_ns(rep.p50_ns),
                        fmt_ns(rep.p99_ns),
                        rep.ops_per_s
                    ));
                }
                Err(e) => {
                    log(&format!("  not available: {e}"));
                    if !matches!(s, System::Xlane | System::XlaneLane) {
                        return Err(KvBenchError::Run {
                            system: s.name(),
                            replicas: n,
                            message: e,
                        });
                    }
                    rep.reason = Some(e);
                }
            }
            systems.push(rep);
        }
    }
    rtts.extend(machine_round_trips(FLOOR_ROUND_TRIPS).map_err(KvBenchError::Config)?);
    let rtt = LatencySummary::from_samples("udp round trip", &mut rtts, 0);
    let floor = MachineFloor {
        samples: rtt.samples,
        rtt_p50_ns: rtt.p50_ns,
        rtt_mean_ns: rtt.avg_ns,
        visible_floor_ns: VISIBLE_ROUND_TRIPS * rtt.p50_ns,
    };
    let ratios = ratios(&systems);
    let (om, osd) = mean_sd(&all_sizes);
    let mut report = KvBenchReport {
        floor,
        systems,
        ratios,
        workload: Workload {
            mean_size: cfg.mean_size,
            sd_size: cfg.sd_size,
            min_size: 1,
            max_size: MAX_SIZE,
            observed_mean: om,
            observed_sd: osd,
            seed: cfg.seed,
            writes: cfg.writes,
            clients: cfg.clients,
            seconds: cfg.throughput_duration.as_secs_f64(),
            visibility: "acknowledged by the system and read back from every member \
                         (etcd: serializable range; redis: GET after SET+WAIT N-1; \
                         xlane: GET after READONLY, local)"
                .to_string(),
        },
        plots: Vec::new(),
    };
    if let Some(dir) = &cfg.plot_dir {
        let stem = dir.join("kv-fig8");
        report.plots = plot(&report, &stem)?
            .iter()
            .map(|p| p.display().to_string())
            .collect();
    }
    Ok(report)
}

fn mean_sd(v: &[usize]) -> (f64, f64) {
    if v.is_empty() {
        return (0.0, 0.0);
    }
    let n = v.len() as f64;
    let m = v.iter().map(|&x| x as f64).sum::<f64>() / n;
    let var = v.iter().map(|&x| (x as f64 - m).powi(2)).sum::<f64>() / n;
    (m, var.sqrt())
}

fn ratios(systems: &[SystemReport]) -> Vec<Ratio> {
    let mut out = Vec::new();
    let is_xlane = |s: &SystemReport| s.name.starts_with("xlane");
    for x in systems.iter().filter(|s| is_xlane(s) && s.available) {
        for o in systems
            .iter()
            .filter(|s| !is_xlane(s) && s.available && s.replicas == x.replicas)
        {
            out.push(Ratio {
                system: x.name.clone(),
                versus: o.name.clone(),
                replicas: x.replicas,
                latency_speedup: if x.mean_ns == 0 {
                    0.0
                } else {
                    o.mean_ns as f64 / x.mean_ns as f64
                },
                throughput_ratio: if o.ops_per_s == 0.0 {
                    0.0
                } else {
                    x.ops_per_s / o.ops_per_s
                },
            });
        }
    }
    out
}

impl KvBenchReport {
    /// The report as text tables.
    pub fn render(&self) -> String {
        let mut t = Table::new(&[
            "system",
            "replicas",
            "mean",
            "p50",
            "p99",
            "max",
            "ack p50",
            "writes/s",
            "mean÷floor",
        ]);
        let floor = self.floor.visible_floor_ns.max(1) as f64;
        let mut notes = Vec::new();
        for s in &self.systems {
            if s.available {
                t.row(vec![
                    label_of(&s.name).to_string(),
                    s.replicas.to_string(),
                    fmt_ns(s.mean_ns),
                    fmt_ns(s.p50_ns),
                    fmt_ns(s.p99_ns),
                    fmt_ns(s.max_ns),
                    fmt_ns(s.ack_p50_ns),
                    format!("{:.0}", s.ops_per_s),
                    format!("{:.1}", s.mean_ns as f64 / floor),
                ]);
            } else {
                t.row(vec![
                    label_of(&s.name).to_string(),
                    s.replicas.to_string(),
                    "n/a".into(),
                ]);
                notes.push(format!(
                    "{} with {} replicas: not available ({})",
                    label_of(&s.name),
                    s.replicas,
                    s.reason.as_deref().unwrap_or("?")
                ));
            }
        }
        let w = &self.workload;
        let mut out = format!(
            "Replicated writes, time until visible on every replica (X-Lane §6.5)\n\
             values: truncated normal mean {} B σ {} B in [{}, {}] B (observed mean {:.1} B σ {:.1} B), seed {}\n\
             latency: {} sequential writes (after an untimed warm-up), each timed until read back on every member; \
             ack = until the system acknowledged; throughput: {} clients for {} s\n\n{}",
            w.mean_size,
            w.sd_size,
            w.min_size,
            w.max_size,
            w.observed_mean,
            w.observed_sd,
            w.seed,
            w.writes,
            w.clients,
            w.seconds,
            t.render()
        );
        for n in notes {
            let _ = writeln!(out, "{n}");
        }
        let f = &self.floor;
        let _ = writeln!(
            out,
            "\nfloor: a UDP round trip between two threads takes {} (p50; mean {}, {} samples \
             before and after the runs); a write known visible on every replica needs at least \
             {VISIBLE_ROUND_TRIPS} (client-leader, leader-replicas, reads): {}",
            fmt_ns(f.rtt_p50_ns),
            fmt_ns(f.rtt_mean_ns),
            f.samples,
            fmt_ns(f.visible_floor_ns)
        );
        if !self.ratios.is_empty() {
            let mut r = Table::new(&["xlane", "vs", "replicas", "latency ×", "throughput ×"]);
            for x in &self.ratios {
                r.row(vec![
                    x.system.clone(),
                    label_of(&x.versus).to_string(),
                    x.replicas.to_string(),
                    format!("{:.2}", x.latency_speedup),
                    format!("{:.2}", x.throughput_ratio),
                ]);
            }
            let _ = write!(
                out,
                "\n(latency ×: other mean ÷ xlane mean; throughput ×: xlane ÷ other)\n{}",
                r.render()
            );
        }
        let mut seen = Vec::new();
        for s in &self.systems {
            if !seen.contains(&s.name) {
                seen.push(s.name.clone());
                let _ = writeln!(
                    out,
                    "{}: {}{}",
                    label_of(&s.name),
                    s.durability,
                    if s.version.is_empty() {
                        String::new()
                    } else {
                        format!(" [{}]", s.version)
                    }
                );
            }
        }
        for p in &self.plots {
            let _ = writeln!(out, "plot: {p}");
        }
        out
    }
}

fn label_of(name: &str) -> &str {
    match System::from_name(name) {
        Some(s) => s.label(),
        None => name,
    }
}

// ----------------------------------------------------------------- plot

fn ensure_font() -> Result<(), String> {
    static DONE: OnceLock<Result<(), String>> = OnceLock::new();
    DONE.get_or_init(|| {
        use plotters::style::{register_font, FontStyle};
        register_font("sans-serif", FontStyle::Normal, dejavu::sans::regular())
            .map_err(|_| "DejaVu Sans is not a valid font".to_string())?;
        register_font("sans-serif", FontStyle::Bold, dejavu::sans::bold())
            .map_err(|_| "DejaVu Sans bold is not a valid font".to_string())
    })
    .clone()
}

/// Fig. 8: mean write latency (min–max bars, log axis) and write
/// throughput against the replica count, one line per system. Writes
/// `<stem>.png` and `<stem>.svg`.
pub fn plot(report: &KvBenchReport, stem: &Path) -> Result<[PathBuf; 2], KvBenchError> {
    let err = |p: &Path, m: String| KvBenchError::Plot {
        path: p.display().to_string(),
        message: m,
    };
    ensure_font().map_err(|m| err(stem, m))?;
    if let Some(d) = stem.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(d).map_err(|e| err(d, e.to_string()))?;
    }
    let png = stem.with_extension("png");
    let svg = stem.with_extension("svg");
    {
        use plotters::prelude::*;
        let root = BitMapBackend::new(&png, (1200, 550)).into_drawing_area();
        draw(report, &root).map_err(|m| err(&png, m))?;
        root.present().map_err(|e| err(&png, e.to_string()))?;
        let root = SVGBackend::new(&svg, (1200, 550)).into_drawing_area();
        draw(report, &root).map_err(|m| err(&svg, m))?;
        root.present().map_err(|e| err(&svg, e.to_string()))?;
    }
    Ok([png, svg])
}

fn draw<DB: plotters::prelude::DrawingBackend>(
    report: &KvBenchReport,
    root: &plotters::prelude::DrawingArea<DB, plotters::coord::Shift>,
) -> Result<(), String> {
    use plotters::prelude::*;
    let e = |x: DrawingAreaErrorKind<DB::ErrorType>| x.to_string();
    root.fill(&WHITE).map_err(e)?;
    let root = root
        .titled(
            "Replicated writes: time until visible on every replica, and throughput",
            ("sans-serif", 22),
        )
        .map_err(e)?;
    let (left, right) = root.split_horizontally(600);
    let ok: Vec<&SystemReport> = report.systems.iter().filter(|s| s.available).collect();
    let xs: Vec<usize> = ok.iter().map(|s| s.replicas).collect();
    let xmin = xs.iter().copied().min().unwrap_or(3) as f64 - 0.7;
    let xmax = xs.iter().copied().max().unwrap_or(3) as f64 + 0.7;
    let floor = report.floor.visible_floor_ns.max(1) as f64;
    let lo = ok
        .iter()
        .map(|s| s.min_ns.max(1))
        .min()
        .unwrap_or(1)
        .min(report.floor.visible_floor_ns.max(1)) as f64
        / 2.0;
    let hi = ok.iter().map(|s| s.max_ns.max(1)).max().unwrap_or(10) as f64 * 40.0;
    let names: Vec<&str> = System::ALL.iter().map(|s| s.name()).collect();
    let colors = [
        RED,
        BLUE,
        RGBColor(0, 140, 0),
        RGBColor(230, 140, 0),
        RGBColor(120, 0, 160),
    ];
    let mut lat = ChartBuilder::on(&left)
        .caption("mean write latency (bars: min–max)", ("sans-serif", 18))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(75)
        .build_cartesian_2d(xmin..xmax, (lo..hi).log_scale())
        .map_err(e)?;
    lat.configure_mesh()
        .x_desc("replicas")
        .y_desc("latency")
        .x_labels(((xmax - xmin) as usize + 1).max(2))
        .x_label_formatter(&|v| format!("{v:.0}"))
        .y_label_formatter(&|v| fmt_ns(*v as u64))
        .draw()
        .map_err(e)?;
    // The machine floor: no system can show a write visible sooner here.
    let gray = RGBColor(110, 110, 110);
    lat.draw_series(LineSeries::new(
        vec![(xmin, floor), (xmax, floor)],
        gray.stroke_width(1),
    ))
    .map_err(e)?
    .label(format!("floor: {VISIBLE_ROUND_TRIPS} UDP round trips"))
    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], gray.stroke_width(1)));
    let tmax = ok.iter().map(|s| s.ops_per_s).fold(1.0, f64::max) * 1.6;
    let mut tp = ChartBuilder::on(&right)
        .caption("write throughput", ("sans-serif", 18))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(75)
        .build_cartesian_2d(xmin..xmax, 0.0..tmax)
        .map_err(e)?;
    tp.configure_mesh()
        .x_desc("replicas")
        .y_desc("writes/s")
        .x_labels(((xmax - xmin) as usize + 1).max(2))
        .x_label_formatter(&|v| format!("{v:.0}"))
        .y_label_formatter(&|v| format!("{v:.0}"))
        .draw()
        .map_err(e)?;
    for (k, name) in names.iter().enumerate() {
        let pts: Vec<&SystemReport> = ok.iter().copied().filter(|s| s.name == *name).collect();
        if pts.is_empty() {
            continue;
        }
        let c = colors[k % colors.len()];
        let off = (k as f64 - 1.0) * 0.08;
        let lp: Vec<(f64, f64)> = pts
            .iter()
            .map(|s| (s.replicas as f64 + off, s.mean_ns.max(1) as f64))
            .collect();
        lat.draw_series(LineSeries::new(lp.clone(), c.stroke_width(2)))
            .map_err(e)?
            .label(label_of(name).to_string())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2)));
        lat.draw_series(lp.iter().map(|&p| Circle::new(p, 4, c.filled())))
            .map_err(e)?;
        lat.draw_series(pts.iter().map(|s| {
            let x = s.replicas as f64 + off;
            PathElement::new(
                vec![(x, s.min_ns.max(1) as f64), (x, s.max_ns.max(1) as f64)],
                c.stroke_width(1),
            )
        }))
        .map_err(e)?;
        let tpts: Vec<(f64, f64)> = pts
            .iter()
            .map(|s| (s.replicas as f64, s.ops_per_s))
            .collect();
        tp.draw_series(LineSeries::new(tpts.clone(), c.stroke_width(2)))
            .map_err(e)?
            .label(label_of(name).to_string())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2)));
        tp.draw_series(tpts.iter().map(|&p| Circle::new(p, 4, c.filled())))
            .map_err(e)?;
    }
    lat.configure_series_labels()
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .label_font(("sans-serif", 14))
        .draw()
        .map_err(e)?;
    tp.configure_series_labels()
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .label_font(("sans-serif", 14))
        .draw()
        .map_err(e)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_known_vectors() {
        let cases: [(&[u8], &str); 5] = [
            (b"", ""),
            (b"f", "Zg=="),
            (b"fo", "Zm8="),
            (b"foo", "Zm9v"),
            (b"foobar", "Zm9vYmFy"),
        ];
        for (i, o) in cases {
            assert_eq!(base64(i), o);
        }
    }

    #[test]
    fn sizes_follow_the_truncated_normal() {
        let seed = 7;
        let mut r = Rng::new(seed);
        let v: Vec<usize> = (0..20_000)
            .map(|_| r.trunc_normal_size(25.6, 10.0, MAX_SIZE))
            .collect();
        assert!(
            v.iter().all(|&x| (1..=MAX_SIZE).contains(&x)),
            "seed {seed}"
        );
        let (m, sd) = mean_sd(&v);
        assert!((m - 25.6).abs() < 0.5, "seed {seed}: mean {m}");
        assert!((sd - 10.0).abs() < 0.5, "seed {seed}: sd {sd}");
        let mut r2 = Rng::new(seed);
        assert_eq!(r2.trunc_normal_size(25.6, 10.0, MAX_SIZE), v[0]);
    }

    #[test]
    fn ratios_pair_same_replica_counts() {
        let mk = |name: &str, n, mean, ops| SystemReport {
            name: name.into(),
            replicas: n,
            available: true,
            reason: None,
            version: String::new(),
            durability: String::new(),
            mean_ns: mean,
            p50_ns: mean,
            p99_ns: mean,
            min_ns: mean,
            max_ns: mean,
            ack_mean_ns: mean,
            ack_p50_ns: mean,
            latency_writes: 1,
            ops_per_s: ops,
            throughput_writes: 1,
            throughput_ns: 1,
        };
        let r = ratios(&[
            mk("xlane", 3, 100, 1000.0),
            mk("etcd", 3, 1000, 500.0),
            mk("etcd", 5, 1000, 500.0),
            mk("xlane-lane", 5, 50, 100.0),
        ]);
        assert_eq!(r.len(), 2);
        assert_eq!(
            (r[1].system.as_str(), r[1].versus.as_str()),
            ("xlane-lane", "etcd")
        );
        assert!((r[1].latency_speedup - 20.0).abs() < 1e-9);
        assert_eq!(r[0].replicas, 3);
        assert!((r[0].latency_speedup - 10.0).abs() < 1e-9);
        assert!((r[0].throughput_ratio - 2.0).abs() < 1e-9);
    }
}
