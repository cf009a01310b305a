//! `xlane bench kv --workload redis-benchmark`: the default tests of the
//! real `redis-benchmark` against xlane kv and real Redis, requests/s side
//! by side in one run.
//!
//! **Systems** (real processes on loopback, [`servers`]): `redis` (one
//! redis-server, AOF with `appendfsync everysec`), `redis-wait` (a primary
//! and 2 replicas), `xlane-1` (one xlane kv node) and `xlane-3` (three
//! members; clients on the leader).
//!
//! **Clients.** redis-benchmark itself (`-P 16 -q -n N -c 50 --csv`, the
//! default test list) against `redis`, `xlane-1` and `xlane-3`; and
//! [`driver`], a replay of the same tests that sends `WAIT 2 0` after every
//! pipelined batch of a write test, against `redis-wait`, and — without
//! WAIT: xlane kv answers a write once a majority committed it — against
//! `xlane-3` and `redis`, so that the three-member comparison uses one
//! client. Which tests write: [`suite`].
//!
//! **Rounds.** Every system starts first and runs side by side. A round
//! empties every system (`FLUSHALL`), then runs the tests in redis-benchmark's
//! order, one [`SEGMENTS`] entry at a time, and every (client, system) pair
//! runs that entry before the next starts, the pairs' order alternating from
//! entry to entry and round to round (`--rounds`): the two figures of a ratio
//! are measured seconds apart, not the length of a whole suite apart, as this
//! machine's speed drifts within half a minute. The two clients of one
//! system share its data within a round (each test's keys are the same; the
//! list holds both clients' pushes). A test's figure is its median over the
//! rounds; a ratio is the median over the rounds of each round's ratio of
//! the two figures, shown with the least and the most round (a round's two
//! figures are seconds apart, so the drift between rounds cancels out of
//! each, where a ratio of two medians would mix rounds). Any error reply, or an
//! error redis-benchmark printed, marks the test (and the system's row)
//! as failed: a test with errors is not a result.
//!
//! **Conditions.** The floor probes of `bench kv` run on every core for
//! the whole run. The client shares the 2 vCPUs with the servers: each
//! pair's report gives the client's CPU (share of one core) and the
//! machine's busy share while it ran.
//!
//! **Fewer systems** (`--systems redis,xlane-1`): only the pairs of the
//! chosen systems run, and only the ratios of which both systems ran are
//! reported. With `redis` and `xlane-1` alone, a ratio's two figures are
//! measured one after the other, a fraction of a second apart.

pub mod driver;
pub mod plot;
pub mod report;
pub mod servers;
pub mod suite;

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::Serialize;
use xlane_host::budget::CpuTimes;

use super::{interrupted, KvBenchError};
use crate::interference::{Cores, FloorSet};
use driver::{DriverConfig, TestRun};
use report::{RbPair, RbReport, RbSystemInfo};
use servers::Servers;
use suite::{Test, DEFAULT_TESTS};

/// A system of the redis-benchmark workload.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum RbSystem {
    /// One redis-server.
    Redis,
    /// A redis-server primary with 2 replicas (`--replicaof`).
    RedisWait,
    /// One xlane kv node.
    Xlane1,
    /// Three xlane kv members (X-Raft over UDP on loopback).
    Xlane3,
}

impl RbSystem {
    /// All, in report order.
    pub const ALL: [RbSystem; 4] = [
        RbSystem::Redis,
        RbSystem::RedisWait,
        RbSystem::Xlane1,
        RbSystem::Xlane3,
    ];

    /// The system of `name` (as [`RbSystem::name`] gives it).
    pub fn from_name(name: &str) -> Option<RbSystem> {
        RbSystem::ALL.into_iter().find(|s| s.name() == name)
    }

    /// The name in reports.
    pub fn name(self) -> &'static str {
        match self {
            RbSystem::Redis => "redis",
            RbSystem::RedisWait => "redis-wait",
            RbSystem::Xlane1 => "xlane-1",
            RbSystem::Xlane3 => "xlane-3",
        }
    }

    /// Its durability setting, as the report states it.
    pub fn durability(self) -> &'static str {
        match self {
            RbSystem::Redis | RbSystem::RedisWait => {
                "appendonly yes, appendfsync everysec, save ''"
            }
            RbSystem::Xlane1 => "one-member raft group, raft log in --work-dir, --fsync everysec",
            RbSystem::Xlane3 => "raft log in --work-dir, --fsync everysec",
        }
    }
}

/// The client that loads a system.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Client {
    /// The real `redis-benchmark`.
    RedisBenchmark,
    /// [`driver`], with `WAIT` for `redis-wait`.
    Driver,
}

impl Client {
    /// The name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Client::RedisBenchmark => "redis-benchmark",
            Client::Driver => "driver",
        }
    }
}

/// The (client, system) pairs measured, in report order.
pub const PAIRS: [(Client, RbSystem); 6] = [
    (Client::RedisBenchmark, RbSystem::Redis),
    (Client::RedisBenchmark, RbSystem::Xlane1),
    (Client::RedisBenchmark, RbSystem::Xlane3),
    (Client::Driver, RbSystem::Redis),
    (Client::Driver, RbSystem::RedisWait),
    (Client::Driver, RbSystem::Xlane3),
];

/// What to run.
#[derive(Clone, Debug)]
pub struct RbConfig {
    /// Requests per test (`-n`).
    pub requests: u64,
    /// Connections (`-c`).
    pub connections: usize,
    /// Pipelined requests (`-P`).
    pub pipeline: usize,
    /// Rounds; in each, every pair runs a test before the next test starts.
    pub rounds: usize,
    /// The systems started and measured (the pairs of the others do not
    /// run).
    pub systems: Vec<RbSystem>,
    /// The xlane binary; `None` leaves the xlane systems out with a reason.
    pub xlane_bin: Option<PathBuf>,
    /// Directory for the servers' data.
    pub work_dir: PathBuf,
    /// How long a system may take to start, and a test without any reply.
    pub timeout: Duration,
    /// Write the ratio figure (`kv-redis-benchmark.png` and `.svg`) here.
    pub plot_dir: Option<PathBuf>,
}

impl Default for RbConfig {
    fn default() -> Self {
        RbConfig {
            requests: 100_000,
            connections: 50,
            pipeline: 16,
            rounds: 4,
            systems: RbSystem::ALL.to_vec(),
            xlane_bin: None,
            work_dir: PathBuf::from("/dev/shm"),
            timeout: Duration::from_secs(20),
            plot_dir: None,
        }
    }
}

/// The default tests as redis-benchmark's `-t` selects them, in its
/// order: (selector, number of [`DEFAULT_TESTS`] it runs). The LRANGE tests
/// go together: any of them makes redis-benchmark run its "LPUSH (needed to
/// benchmark LRANGE)" first, once.
pub const SEGMENTS: [(&str, usize); 16] = [
    ("ping_inline", 1),
    ("ping_mbulk", 1),
    ("set", 1),
    ("get", 1),
    ("incr", 1),
    ("lpush", 1),
    ("rpush", 1),
    ("lpop", 1),
    ("rpop", 1),
    ("sadd", 1),
    ("hset", 1),
    ("spop", 1),
    ("zadd", 1),
    ("zpopmin", 1),
    ("lrange_100,lrange_300,lrange_500,lrange_600", 5),
    ("mset", 1),
];

/// Segment `seg` of [`SEGMENTS`]: its `-t` selector and its tests (the
/// segments before it take the tests before them).
pub fn segment(seg: usize) -> (&'static str, &'static [Test]) {
    let first: usize = SEGMENTS[..seg].iter().map(|s| s.1).sum();
    let (selector, count) = SEGMENTS[seg];
    (selector, &DEFAULT_TESTS[first..first + count])
}

/// The redis-benchmark command line for `port` (without the program),
/// running the tests `tests` selects (`-t`).
pub fn redis_benchmark_args(cfg: &RbConfig, port: u16, tests: &str) -> Vec<String> {
    vec![
        "-t".into(),
        tests.into(),
        "-h".into(),
        "127.0.0.1".into(),
        "-p".into(),
        port.to_string(),
        "-P".into(),
        cfg.pipeline.to_string(),
        "-q".into(),
        "-n".into(),
        cfg.requests.to_string(),
        "-c".into(),
        cfg.connections.to_string(),
        "--csv".into(),
    ]
}

/// One run of one pair: per default test, requests/s and errors.
#[derive(Clone, Debug, Default)]
pub struct PairRun {
    /// Per test of [`DEFAULT_TESTS`] (same order): requests/s, or `None`
    /// when the test gave no result; error count; first error.
    pub tests: Vec<(Option<f64>, u64, Option<String>)>,
    /// Client CPU time, ns.
    pub client_cpu_ns: u64,
    /// Wall time, ns.
    pub wall_ns: u64,
    /// Busy jiffies and total jiffies of all CPUs during the run.
    pub busy: (u64, u64),
}

fn all_cpus_busy() -> Option<(u64, u64)> {
    let mut busy = 0;
    let mut total = 0;
    for c in 0..Cores::online() {
        let t = CpuTimes::read(c)?;
        total += t.total();
        busy += t.total().saturating_sub(t.idle + t.steal);
    }
    Some((busy, total))
}

fn children_cpu_ns() -> u64 {
    // SAFETY: getrusage writes into the zeroed struct it is given.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: a valid pointer to an rusage struct.
    unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1000;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// Runs segment `seg` of [`SEGMENTS`] with the real redis-benchmark against
/// `port`: a [`PairRun`] of that segment's tests. Its standard output and
/// error go, line-buffered (`stdbuf -oL`), to one file, so that an error
/// line lands before the CSV line of the test it happened in.
fn run_redis_benchmark(
    cfg: &RbConfig,
    port: u16,
    out_file: &PathBuf,
    seg: usize,
) -> Result<PairRun, String> {
    let (selector, tests) = segment(seg);
    let bin = servers_which("redis-benchmark")?;
    let out =
        std::fs::File::create(out_file).map_err(|e| format!("{}: {e}", out_file.display()))?;
    let err = out.try_clone().map_err(|e| e.to_string())?;
    let mut cmd = match servers_which("stdbuf") {
        Ok(stdbuf) => {
            let mut c = Command::new(stdbuf);
            c.args(["-oL", "-eL"]).arg(&bin);
            c
        }
        Err(_) => Command::new(&bin),
    };
    let cpu0 = children_cpu_ns();
    let start = Instant::now();
    let mut child = cmd
        .args(redis_benchmark_args(cfg, port, selector))
        .stdin(Stdio::null())
        .stdout(Stdio::from(out))
        .stderr(Stdio::from(err))
        .spawn()
        .map_err(|e| format!("cannot start redis-benchmark: {e}"))?;
    let status = loop {
        match child.try_wait() {
            Ok(Some(st)) => break st,
            Ok(None) => {}
            Err(e) => return Err(e.to_string()),
        }
        if interrupted() {
            let _ = child.kill();
            let _ = child.wait();
            return Err("interrupted".into());
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let wall_ns = start.elapsed().as_nanos() as u64;
    let cpu = children_cpu_ns().saturating_sub(cpu0);
    let text = std::fs::read_to_string(out_file).map_err(|e| e.to_string())?;
    let parsed = suite::parse_output(&text);
    let mut run = PairRun {
        client_cpu_ns: cpu,
        wall_ns,
        ..PairRun::default()
    };
    for t in tests {
        let found = parsed.rows.iter().find(|(r, _)| r.test == t.name);
        run.tests.push(match found {
            Some((r, errs)) if r.rps.is_none() => (
                None,
                errs.len() as u64 + 1,
                Some("redis-benchmark timed it at 0 ms (rps inf): use more --requests".into()),
            ),
            Some((r, errs)) if errs.is_empty() => (r.rps, 0, None),
            Some((r, errs)) => (r.rps, errs.len() as u64, errs.first().cloned()),
            None => (None, 1, Some("redis-benchmark printed no result".into())),
        });
    }
    // Errors after the last result, or a failed exit: the last test's.
    let mut late = parsed.trailing.clone();
    if !status.success() {
        late.push(format!("redis-benchmark exited with {status}"));
    }
    if let (Some(last), false) = (run.tests.last_mut(), late.is_empty()) {
        last.1 += late.len() as u64;
        last.2.get_or_insert(late[0].clone());
    }
    Ok(run)
}

fn servers_which(bin: &'static str) -> Result<PathBuf, String> {
    super::systems::which(bin).ok_or_else(|| format!("{bin} not found"))
}

/// Runs segment `seg` of [`SEGMENTS`] with the driver against `sys`.
fn run_driver(cfg: &RbConfig, sys: &Servers, seg: usize) -> Result<PairRun, String> {
    let (_, tests) = segment(seg);
    let dcfg = DriverConfig {
        connections: cfg.connections,
        pipeline: cfg.pipeline,
        requests: cfg.requests,
        wait_replicas: (sys.system == RbSystem::RedisWait).then_some(2),
        stall: cfg.timeout,
    };
    let start = Instant::now();
    let runs: Vec<TestRun> =
        driver::run_suite(sys.client, tests, &dcfg, &interrupted).map_err(|e| e.to_string())?;
    let mut run = PairRun {
        wall_ns: start.elapsed().as_nanos() as u64,
        ..PairRun::default()
    };
    for r in runs {
        run.client_cpu_ns += r.cpu_ns;
        let rps = (r.requests > 0).then(|| r.rps());
        run.tests.push((rps, r.errors, r.first_error));
    }
    Ok(run)
}

/// Runs the redis-benchmark workload (see the module docs). `log` gets
/// progress lines. A system that cannot start, or a pair whose run breaks,
/// is reported with the reason; the others go on.
pub fn run(cfg: &RbConfig, log: &mut dyn FnMut(&str)) -> Result<RbReport, KvBenchError> {
    if cfg.requests == 0 || cfg.connections == 0 || cfg.pipeline == 0 || cfg.rounds == 0 {
        return Err(KvBenchError::Config(
            "requests, connections, pipeline and rounds must be at least 1".into(),
        ));
    }
    // In report order, each once.
    let chosen: Vec<RbSystem> = RbSystem::ALL
        .into_iter()
        .filter(|s| cfg.systems.contains(s))
        .collect();
    let pairs_run: Vec<(Client, RbSystem)> = PAIRS
        .into_iter()
        .filter(|(_, s)| chosen.contains(s))
        .collect();
    if pairs_run.is_empty() {
        return Err(KvBenchError::Config("no system chosen".into()));
    }
    for (bin, hint) in [
        ("redis-server", "apt-get install -y redis-server"),
        ("redis-benchmark", "apt-get install -y redis-tools"),
    ] {
        if super::systems::which(bin).is_none() {
            return Err(KvBenchError::Missing { binary: bin, hint });
        }
    }
    xlane_host::tuning::install_termination_flag();
    let tag = format!("rbench-{}", std::process::id());
    let mut up: Vec<Result<Servers, String>> = Vec::new();
    for &s in &chosen {
        if interrupted() {
            return Err(KvBenchError::Interrupted);
        }
        log(&format!("starting {} ...", s.name()));
        let dir = cfg.work_dir.join(format!("{tag}-{}", s.name()));
        let r = Servers::start(s, dir, cfg.xlane_bin.as_deref(), cfg.timeout);
        if let Err(e) = &r {
            log(&format!("  {} not available: {e}", s.name()));
        }
        up.push(r);
    }
    let ncpu = Cores::online();
    // The floor probes of bench kv, one per core for the whole run; the
    // "lane" core is only a name here (no lane runs).
    // online() is at least 1.
    let cores = Cores::new(ncpu, ncpu - 1).map_err(KvBenchError::Config)?;
    let run_ns = (cfg.rounds as u64).saturating_mul(pairs_run.len() as u64 * 600 * 1_000_000_000);
    let (probes, floor_error) = match FloorSet::start(&cores, run_ns) {
        Ok(p) => (Some(p), None),
        Err(e) => {
            log(&format!("no floor probes: {e}"));
            (None, Some(e.to_string()))
        }
    };
    let started = Instant::now();
    let mut runs: Vec<Vec<PairRun>> = vec![Vec::new(); pairs_run.len()];
    let mut broken: Vec<Option<String>> = pairs_run
        .iter()
        .map(|(_, s)| {
            up[chosen.iter().position(|x| x == s).unwrap_or(0)]
                .as_ref()
                .err()
                .cloned()
        })
        .collect();
    let out_file = cfg.work_dir.join(format!("{tag}-redis-benchmark.out"));
    'rounds: for r in 0..cfg.rounds {
        // Every system once, emptied, whichever pairs use it.
        for (si, sys) in up.iter_mut().enumerate() {
            let Ok(sys) = sys.as_mut() else {
                continue;
            };
            if let Err(e) = sys.flush() {
                let e = format!("{e}{}", sys.logs_tail());
                log(&format!("  {} broke: {e}", chosen[si].name()));
                for (i, (_, s)) in pairs_run.iter().enumerate() {
                    if *s == chosen[si] {
                        broken[i].get_or_insert(e.clone());
                    }
                }
            }
        }
        let mut round: Vec<PairRun> = vec![PairRun::default(); pairs_run.len()];
        for seg in 0..SEGMENTS.len() {
            let order: Vec<usize> = if (r + seg) % 2 == 0 {
                (0..pairs_run.len()).collect()
            } else {
                (0..pairs_run.len()).rev().collect()
            };
            for i in order {
                if interrupted() {
                    break 'rounds;
                }
                if broken[i].is_some() {
                    continue;
                }
                let (client, system) = pairs_run[i];
                let si = chosen.iter().position(|&x| x == system).unwrap_or(0);
                let Ok(sys) = up[si].as_mut() else {
                    continue;
                };
                let cpu0 = all_cpus_busy();
                let res = match client {
                    Client::RedisBenchmark => {
                        run_redis_benchmark(cfg, sys.client.port(), &out_file, seg)
                    }
                    Client::Driver => run_driver(cfg, sys, seg),
                };
                match res.and_then(|run| sys.check_alive().map(|()| run)) {
                    Ok(run) => {
                        let acc = &mut round[i];
                        if let (Some(a), Some(b)) = (cpu0, all_cpus_busy()) {
                            // The kernel's idle counters may step back
                            // a tick (NO_HZ accounting): none, not a wrap.
                            acc.busy.0 += b.0.saturating_sub(a.0);
                            acc.busy.1 += b.1.saturating_sub(a.1);
                        }
                        acc.tests.extend(run.tests);
                        acc.client_cpu_ns += run.client_cpu_ns;
                        acc.wall_ns += run.wall_ns;
                    }
                    Err(e) => {
                        let e = format!("{e}{}", sys.logs_tail());
                        log(&format!(
                            "  {} on {} broke: {e}",
                            client.name(),
                            system.name()
                        ));
                        broken[i] = Some(e);
                    }
                }
            }
        }
        for (i, run) in round.into_iter().enumerate() {
            if broken[i].is_some() || run.tests.len() != DEFAULT_TESTS.len() {
                continue;
            }
            let (client, system) = pairs_run[i];
            log(&format!(
                "  round {}: {} on {}: {:.1} s",
                r + 1,
                client.name(),
                system.name(),
                run.wall_ns as f64 / 1e9
            ));
            runs[i].push(run);
        }
    }
    let _ = std::fs::remove_file(&out_file);
    let seconds = started.elapsed().as_secs_f64();
    let floor = probes.map(|p| p.stop().0);
    let systems: Vec<RbSystemInfo> = chosen
        .iter()
        .zip(&up)
        .map(|(s, u)| RbSystemInfo {
            name: s.name().into(),
            available: u.is_ok(),
            reason: u.as_ref().err().cloned(),
            version: u.as_ref().map(|x| x.version.clone()).unwrap_or_default(),
            durability: s.durability().into(),
            command_lines: u
                .as_ref()
                .map(|x| x.command_lines.clone())
                .unwrap_or_default(),
        })
        .collect();
    drop(up);
    if interrupted() {
        return Err(KvBenchError::Interrupted);
    }
    let versions = version_lines(cfg);
    let pairs: Vec<RbPair> = pairs_run
        .iter()
        .zip(runs.iter().zip(broken))
        .map(|(&(c, s), (r, b))| RbPair::from_runs(c, s, r, b))
        .collect();
    let mut report = RbReport::new(cfg, pairs, systems, floor, floor_error, seconds, versions);
    if let Some(dir) = &cfg.plot_dir {
        let stem = dir.join("kv-redis-benchmark");
        let files = plot::plot(&report, &stem).map_err(|e| KvBenchError::Plot {
            path: stem.display().to_string(),
            message: e.to_string(),
        })?;
        report.plots = files.iter().map(|p| p.display().to_string()).collect();
    }
    Ok(report)
}

fn version_lines(cfg: &RbConfig) -> Vec<String> {
    let mut v = Vec::new();
    for bin in ["redis-server", "redis-benchmark"] {
        if let Some(p) = super::systems::which(bin) {
            if let Ok(o) = Command::new(p).arg("--version").output() {
                v.push(String::from_utf8_lossy(&o.stdout).trim().to_string());
            }
        }
    }
    if cfg.xlane_bin.is_some() {
        v.push(format!("xlane {}", env!("CARGO_PKG_VERSION")));
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The segments run every default test once, in order, and each
    /// selector names its own tests (the LRANGE one starts with the LPUSH
    /// redis-benchmark runs before them).
    #[test]
    fn segments_tile_the_default_tests() {
        let all: Vec<&str> = (0..SEGMENTS.len())
            .flat_map(|s| segment(s).1.iter().map(|t| t.name))
            .collect();
        let want: Vec<&str> = DEFAULT_TESTS.iter().map(|t| t.name).collect();
        assert_eq!(all, want);
        for seg in 0..SEGMENTS.len() {
            let (selector, tests) = segment(seg);
            for t in tests.iter().filter(|t| !t.name.starts_with("LPUSH (")) {
                let short = t.name.split(' ').next().unwrap_or("").to_lowercase();
                assert!(
                    selector.split(',').any(|s| s == short),
                    "{selector}: {}",
                    t.name
                );
            }
        }
    }
}
