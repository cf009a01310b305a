//! `xlane bench apps`: unmodified applications on a QJump level (`xlane
//! run`), QJump's own experiment (§ "application utility") with today's
//! programs: real etcd, real Redis with replicas, and `sockperf`.
//!
//! **Setup.** Three testbed hosts under one switch, ports at
//! `link_rate_bps`; every member in its own host (as `bench kv`,
//! whose pieces this reuses: [`crate::kv_bench::systems`] starts the
//! clusters, [`crate::kv_bench::observe`] writes and observes).
//! * etcd, 3 members; `xlane run --level L --ports 2380` puts the peer
//!   (replication) traffic on the level; etcd is a Go binary, so this
//!   takes the classifier path. The writer writes on the leader's host to
//!   its own address, so only replication crosses the switch; a write
//!   counts when every member's watch saw it.
//! * Redis, a primary and 2 replicas, `SET` then `WAIT 2 0`;
//!   `--ports 6380` puts replication on the level (preload path).
//! * `sockperf ping-pong` (UDP, `--mps` messages per second, full round
//!   trips) from host 0 to a `sockperf server` in host 1, both on the
//!   level (preload path).
//!
//! **Modes.** Each application runs twice under interference (`both`, as
//! `bench kv`: every switch port towards a host saturated by best-effort
//! UDP cross traffic, a spinning thread on every regular core), once as
//! users run it (`default`) and once under `xlane run` (`level`);
//! sockperf also runs without interference (`idle`), which gives QJump's
//! comparison: interference-free, interfered, interfered on a level.
//! Each cluster comes up calm; the interference runs for its measurement.
//! `xlane run` is given the testbed's n (3 hosts) and R (the link rate),
//! and paces the level on each host's interface.
//!
//! **Floor.** Floor probes run on every core through the whole bench; the
//! report gives what the machine took (the lane core's stolen fraction,
//! the longest gap).

pub mod plot;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::interference::{BenchError, Floor, FloorSet, Interference, Stage};
use crate::kv_bench::observe::{Clock, Observers, Run};
use crate::kv_bench::systems::{spawn_in, which, Cluster, Host, Start};
use crate::kv_bench::{KvBenchConfig, System};
use crate::stats::LatencySummary;
use crate::table::fmt_ns;

/// A latency of a run, or `–` when the run has no sample (every write
/// failed): a run with nothing measured shows no time.
fn fmt_sample_ns(samples: u64, ns: u64) -> String {
    if samples == 0 {
        "–".into()
    } else {
        fmt_ns(ns)
    }
}

/// An application of the comparison.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum App {
    /// Real etcd, 3 members.
    Etcd,
    /// Real Redis, a primary and 2 replicas, `WAIT` for both.
    Redis,
    /// `sockperf ping-pong` between two hosts.
    Sockperf,
}

impl App {
    /// Every application, in report order.
    pub const ALL: [App; 3] = [App::Etcd, App::Redis, App::Sockperf];

    /// The name in reports and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            App::Etcd => "etcd",
            App::Redis => "redis",
            App::Sockperf => "sockperf",
        }
    }

    /// Parses a command-line name.
    pub fn from_name(s: &str) -> Option<App> {
        App::ALL.into_iter().find(|a| a.name() == s)
    }

    /// The ports `xlane run` puts on the level.
    pub fn ports(self) -> u16 {
        match self {
            App::Etcd => crate::kv_bench::systems::ETCD_PEER_PORT,
            App::Redis => crate::kv_bench::systems::RESP_PORT,
            App::Sockperf => SOCKPERF_PORT,
        }
    }

    fn what(self) -> &'static str {
        match self {
            App::Etcd => "write until visible on all 3 members",
            App::Redis => "SET + WAIT 2 until visible on all 3 members",
            App::Sockperf => "UDP round trip",
        }
    }
}

/// sockperf's server port.
pub const SOCKPERF_PORT: u16 = 11111;

/// What to run.
#[derive(Clone, Debug)]
pub struct AppsBenchConfig {
    /// Applications, in order.
    pub apps: Vec<App>,
    /// The QJump level of the `level` runs (1 or 2).
    pub level: u8,
    /// Timed writes of each etcd and Redis run.
    pub writes: usize,
    /// Longest write phase of a run (fewer writes if slower).
    pub latency_cap: Duration,
    /// Seconds of each sockperf run.
    pub sockperf_seconds: u32,
    /// sockperf's messages per second.
    pub sockperf_mps: u32,
    /// The xlane binary (`xlane run`; libxlane_preload.so beside it).
    pub xlane_bin: PathBuf,
    /// Directory for the clusters' data (a RAM disk).
    pub work_dir: PathBuf,
    /// Write the plot here (PNG and SVG).
    pub plot_dir: Option<PathBuf>,
    /// How long a cluster may take to come up, and a write to become
    /// visible.
    pub timeout: Duration,
    /// Link rate of every testbed port, bits/s.
    pub link_rate_bps: u64,
    /// Best-effort queue of every port, packets.
    pub best_effort_queue_pkts: u32,
    /// The lane core (kept free of the bench, as in `bench kv`).
    pub lane_core: usize,
    /// Seed of the values written.
    pub seed: u64,
    /// In the `level` runs, also put the application on the lane core at
    /// nice -10 (`xlane run --cpus <lane> --nice -10`), and the bench's
    /// writer and observers there (as `bench kv` places the lane's
    /// members): the endhost side of the level. `false`: the network
    /// level only.
    pub level_on_lane_core: bool,
}

impl AppsBenchConfig {
    /// The defaults, with the xlane binary to use.
    pub fn new(xlane_bin: PathBuf) -> Self {
        let kv = KvBenchConfig::default();
        AppsBenchConfig {
            apps: App::ALL.to_vec(),
            level: 2,
            writes: 300,
            latency_cap: Duration::from_secs(30),
            sockperf_seconds: 5,
            sockperf_mps: 1000,
            xlane_bin,
            work_dir: kv.work_dir,
            plot_dir: None,
            timeout: kv.timeout,
            link_rate_bps: kv.link_rate_bps,
            best_effort_queue_pkts: kv.best_effort_queue_pkts,
            lane_core: kv.lane_core,
            seed: 1,
            level_on_lane_core: true,
        }
    }
}

/// One run of one application.
#[derive(Clone, Debug, Serialize)]
pub struct AppRun {
    /// `etcd`, `redis` or `sockperf`.
    pub name: String,
    /// `default` (as users run it) or `level` (under `xlane run`).
    pub mode: String,
    /// `idle` or `both`.
    pub scenario: String,
    /// What is timed.
    pub what: String,
    /// The path `xlane run` took (its `path:` line), empty by default.
    pub path: String,
    /// Whether the run produced numbers; if not, `reason` says why.
    pub available: bool,
    /// Why not, or the first failure.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Samples.
    pub samples: u64,
    /// Smallest, ns.
    pub min_ns: u64,
    /// Median, ns.
    pub p50_ns: u64,
    /// 99th percentile, ns.
    pub p99_ns: u64,
    /// Largest, ns.
    pub max_ns: u64,
    /// Failed writes (not visible in time, refused) or lost messages.
    pub errors: u64,
    /// Leader changes during the run (etcd: terms begun; Redis: members
    /// whose role changed; sockperf: 0).
    pub leader_changes: u64,
}

/// One figure of the report over another.
#[derive(Clone, Debug, Serialize)]
pub struct AppRatio {
    /// The application.
    pub name: String,
    /// What is divided.
    pub metric: String,
    /// The quotient; `None` when a run it needs has no figure (no sample,
    /// and for the numerator no failure to bound it by).
    pub ratio: Option<f64>,
    /// What the issue asks of it.
    pub target: String,
    /// Whether it holds (never without a `ratio`).
    pub met: bool,
    /// The numerator is a lower bound: more than 1 % of its writes failed
    /// (not visible within the timeout), so its p99 is at least the
    /// timeout.
    pub lower_bound: bool,
}

/// A run's p99 for a ratio: when more than 1 % of its operations failed
/// (each took longer than `timeout_ns`), at least the timeout; and whether
/// that lower bound applies.
pub fn p99_for_ratio(r: &AppRun, timeout_ns: u64) -> (u64, bool) {
    let total = r.samples + r.errors;
    if total > 0 && r.errors * 100 > total {
        (r.p99_ns.max(timeout_ns), true)
    } else {
        (r.p99_ns, false)
    }
}

/// The level as `xlane run` announced it.
#[derive(Clone, Debug, Serialize)]
pub struct LevelInfo {
    /// The level.
    pub level: u8,
    /// n.
    pub hosts: u32,
    /// R, bits/s.
    pub link_rate_bps: u64,
    /// Its per-host rate, bits/s.
    pub rate_bps: u64,
    /// The network epoch 2nP/R (the bound), ns.
    pub bound_ns: u64,
}

/// The whole report.
#[derive(Clone, Debug, Serialize)]
pub struct AppsReport {
    /// Every run.
    pub apps: Vec<AppRun>,
    /// The ratios the issue asks about.
    pub ratios: Vec<AppRatio>,
    /// The level.
    pub level: LevelInfo,
    /// The floor through the whole bench.
    pub floor: Floor,
    /// Cross traffic achieved, bits/s per flow, every interfered run.
    pub cross_traffic_bps: Vec<u64>,
    /// Where the `level` runs ran.
    pub placement: String,
    /// Plot files written.
    pub plots: Vec<String>,
}

/// Why the bench could not run at all (one application failing is
/// reported in its [`AppRun`]).
#[derive(Debug, thiserror::Error)]
pub enum AppsBenchError {
    /// The configuration is unusable.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// A program is missing.
    #[error("{binary} not found ({hint})")]
    Missing {
        /// What.
        binary: String,
        /// How to get it.
        hint: String,
    },
    /// The testbed or the floor failed.
    #[error("{0}")]
    Bench(#[from] BenchError),
    /// The plot could not be written.
    #[error("plot {path}: {message}")]
    Plot {
        /// File.
        path: String,
        /// Why.
        message: String,
    },
    /// SIGINT or SIGTERM ended the run early; every program was stopped
    /// and the testbed torn down.
    #[error("interrupted: every program stopped and the testbed torn down")]
    Interrupted,
}

impl From<xlane_testbed::TestbedError> for AppsBenchError {
    fn from(e: xlane_testbed::TestbedError) -> Self {
        AppsBenchError::Bench(BenchError::Testbed(e))
    }
}

impl From<xlane_host::floor::FloorError> for AppsBenchError {
    fn from(e: xlane_host::floor::FloorError) -> Self {
        AppsBenchError::Bench(BenchError::Floor(e))
    }
}

/// Hosts of the testbed (n of QJump).
pub const HOSTS: usize = 3;

fn check(cfg: &AppsBenchConfig) -> Result<(), AppsBenchError> {
    if cfg.apps.is_empty() || cfg.writes == 0 || cfg.sockperf_seconds == 0 {
        return Err(AppsBenchError::Config(
            "apps, writes and sockperf seconds must not be empty or 0".into(),
        ));
    }
    if !(1..=2).contains(&cfg.level) {
        return Err(AppsBenchError::Config("the level must be 1 or 2".into()));
    }
    if !cfg.xlane_bin.is_file() {
        return Err(AppsBenchError::Missing {
            binary: cfg.xlane_bin.display().to_string(),
            hint: "the xlane binary".into(),
        });
    }
    let lib = cfg
        .xlane_bin
        .parent()
        .map(|d| d.join("libxlane_preload.so"))
        .unwrap_or_default();
    if !lib.is_file() && std::env::var_os("XLANE_PRELOAD_LIB").is_none() {
        return Err(AppsBenchError::Missing {
            binary: lib.display().to_string(),
            hint: "cargo build --release -p xlane -p xlane-preload".into(),
        });
    }
    let need = |a: App, bin: &str, pkg: &str| -> Result<(), AppsBenchError> {
        if cfg.apps.contains(&a) && which(bin).is_none() {
            return Err(AppsBenchError::Missing {
                binary: bin.into(),
                hint: format!("apt-get install -y {pkg}"),
            });
        }
        Ok(())
    };
    need(App::Etcd, "etcd", "etcd-server etcd-client")?;
    need(App::Etcd, "iptables-legacy", "iptables")?;
    need(App::Redis, "redis-server", "redis-server redis-tools")?;
    need(App::Sockperf, "sockperf", "sockperf")?;
    Ok(())
}

/// What one run needs from the bench.
struct Ctx<'a> {
    cfg: &'a AppsBenchConfig,
    hosts: Vec<Host>,
    ifaces: Vec<String>,
    tag: String,
}

impl Ctx<'_> {
    /// `xlane run ... --` for host `i`, or nothing in the default mode.
    fn wrap(&self, app: App, i: usize, level: bool) -> Vec<String> {
        if !level {
            return Vec::new();
        }
        let mut v: Vec<String> = vec![
            self.cfg.xlane_bin.display().to_string(),
            "run".into(),
            "--level".into(),
            self.cfg.level.to_string(),
            "--ports".into(),
            app.ports().to_string(),
            "--dev".into(),
            self.ifaces[i].clone(),
            "--hosts".into(),
            HOSTS.to_string(),
            "--link-rate".into(),
            format!("{}bit", self.cfg.link_rate_bps),
        ];
        if self.cfg.level_on_lane_core {
            v.extend([
                "--cpus".into(),
                self.cfg.lane_core.to_string(),
                "--nice".into(),
                crate::kv_bench::systems::MEMBER_NICE.to_string(),
            ]);
        }
        v.push("--".into());
        v
    }
}

fn empty_run(app: App, level: bool, scenario: &str) -> AppRun {
    AppRun {
        name: app.name().into(),
        mode: if level { "level" } else { "default" }.into(),
        scenario: scenario.into(),
        what: app.what().into(),
        path: String::new(),
        available: false,
        reason: None,
        samples: 0,
        min_ns: 0,
        p50_ns: 0,
        p99_ns: 0,
        max_ns: 0,
        errors: 0,
        leader_changes: 0,
    }
}

/// An empty run, for the plot's tests.
#[cfg(test)]
pub(crate) fn empty_run_for_tests(name: &str, mode: &str, scenario: &str) -> AppRun {
    empty_run(
        App::from_name(name).unwrap_or(App::Etcd),
        mode == "level",
        scenario,
    )
}

/// The `path:` line `xlane run` printed into a member's log.
fn path_of(lines: &[String]) -> String {
    lines
        .first()
        .and_then(|l| l.split("path: ").nth(1))
        .unwrap_or("")
        .to_string()
}

fn run_cluster(
    ctx: &Ctx,
    app: App,
    level: bool,
    interfere: &mut dyn FnMut() -> Result<Interference, String>,
    cross: &mut Vec<u64>,
    log: &mut dyn FnMut(&str),
) -> AppRun {
    let mut rep = empty_run(app, level, "both");
    let system = if app == App::Etcd {
        System::Etcd
    } else {
        System::Redis
    };
    let cfg = ctx.cfg;
    let kv = KvBenchConfig {
        writes: cfg.writes,
        latency_cap: cfg.latency_cap,
        throughput_duration: Duration::ZERO,
        clients: 1,
        seed: cfg.seed,
        timeout: cfg.timeout,
        lane_core: cfg.lane_core,
        ..KvBenchConfig::default()
    };
    let start = Start {
        hosts: &ctx.hosts,
        dir: cfg
            .work_dir
            .join(format!("{}-{}-{}", ctx.tag, app.name(), rep.mode)),
        lane_core: cfg.lane_core,
        xlane_bin: None,
        timeout: cfg.timeout.max(Duration::from_secs(20)),
        wrap: (0..ctx.hosts.len())
            .map(|i| ctx.wrap(app, i, level))
            .collect(),
    };
    let r = (|| -> Result<_, String> {
        let mut cl = Cluster::start(system, &start)?;
        let member = if app == App::Etcd { "etcd0" } else { "redis0" };
        let path = path_of(&cl.log_lines(member, "xlane run: path:"));
        let clock = Clock::new();
        let before = cl.leader_state()?;
        let place = (level && cfg.level_on_lane_core).then_some(cfg.lane_core);
        let obs = Observers::start(&cl, clock, place)?;
        let interference = interfere()?;
        let m = Run::start(&cl, &obs, &kv, clock, cfg.seed, place).and_then(|mut run| {
            if !run.latency_round(&kv, clock, kv.writes)? {
                log(&format!(
                    "  latency phase capped at {:?}: {} of {} writes",
                    kv.latency_cap,
                    run.timed(),
                    kv.writes
                ));
            }
            Ok(run.m)
        });
        cross.extend(interference.stop());
        let stopped = obs.stop();
        let m = m.map_err(|e| format!("{e}{}", cl.logs_tail()))?;
        stopped?;
        let after = cl.leader_state()?;
        cl.check_alive()?;
        Ok((m, after.changes_since(&before)?, path))
    })();
    match r {
        Ok((mut m, changes, path)) => {
            let s = LatencySummary::from_samples(app.name(), &mut m.latencies, m.errors);
            rep.available = true;
            rep.path = path;
            rep.samples = s.samples;
            rep.min_ns = s.min_ns;
            rep.p50_ns = s.p50_ns;
            rep.p99_ns = s.p99_ns;
            rep.max_ns = s.max_ns;
            rep.errors = m.errors;
            rep.leader_changes = changes;
            rep.reason = m.first_error;
        }
        Err(e) => rep.reason = Some(e),
    }
    rep
}

/// Stops a child by its PID: SIGTERM (a wrapper passes it on), then
/// SIGKILL after 3 s.
fn stop_child(c: &mut Child) {
    // SAFETY: kill on a child's PID that we have not waited for.
    unsafe {
        libc::kill(c.id() as libc::pid_t, libc::SIGTERM);
    }
    let deadline = Instant::now() + Duration::from_secs(3);
    while matches!(c.try_wait(), Ok(None)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = c.kill();
    let _ = c.wait();
}

fn run_sockperf(
    ctx: &Ctx,
    level: bool,
    scenario: &str,
    interfere: Option<&mut dyn FnMut() -> Result<Interference, String>>,
    cross: &mut Vec<u64>,
) -> AppRun {
    let mut rep = empty_run(App::Sockperf, level, scenario);
    let cfg = ctx.cfg;
    let dir = cfg
        .work_dir
        .join(format!("{}-sockperf-{scenario}-{}", ctx.tag, rep.mode));
    let r = (|| -> Result<_, String> {
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let server = ctx.hosts[1].addr.to_string();
        let port = SOCKPERF_PORT.to_string();
        let mut srv = spawn_in(
            &ctx.hosts[1],
            &ctx.wrap(App::Sockperf, 1, level),
            Path::new("sockperf"),
            &["server", "-i", &server, "-p", &port].map(String::from),
            &dir.join("server.log"),
        )?;
        std::thread::sleep(Duration::from_millis(1500));
        let interference = match interfere {
            Some(f) => Some(f()?),
            None => None,
        };
        let args: Vec<String> = [
            "ping-pong",
            "-i",
            &server,
            "-p",
            &port,
            "-t",
            &cfg.sockperf_seconds.to_string(),
            "--mps",
            &cfg.sockperf_mps.to_string(),
            "-m",
            "64",
            "--full-rtt",
        ]
        .map(String::from)
        .to_vec();
        let out = Command::new("ip")
            .args(["netns", "exec", &ctx.hosts[0].netns])
            .args(ctx.wrap(App::Sockperf, 0, level))
            .arg("sockperf")
            .args(&args)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("sockperf ping-pong: {e}"));
        if let Some(i) = interference {
            cross.extend(i.stop());
        }
        stop_child(&mut srv);
        let out = out?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        if !out.status.success() {
            return Err(format!("sockperf ping-pong failed: {stderr}"));
        }
        let path = path_of(
            &stderr
                .lines()
                .filter(|l| l.contains("xlane run: path:"))
                .map(str::to_string)
                .collect::<Vec<_>>(),
        );
        let all = format!("{stdout}\n{stderr}");
        if all.contains("No valid observations") {
            // Ping-pong waits for each reply: one lost message stalls it.
            let total = all
                .lines()
                .find(|l| l.contains("[Total Run]"))
                .and_then(|l| l.split("SentMessages=").nth(1))
                .unwrap_or("?")
                .trim()
                .to_string();
            return Err(format!(
                "ping-pong stalled on a lost message (no valid observations; SentMessages={total})"
            ));
        }
        let res = xlane_lancet::sockperf::parse(&all).map_err(|e| {
            let lines: Vec<&str> = all.lines().filter(|l| !l.trim().is_empty()).collect();
            format!(
                "{e}: {}",
                lines[lines.len().saturating_sub(4)..].join(" | ")
            )
        })?;
        Ok((res, path))
    })();
    let _ = std::fs::remove_dir_all(&dir);
    match r {
        Ok((res, path)) => {
            rep.available = true;
            rep.path = path;
            rep.samples = res.observations.unwrap_or(0);
            rep.min_ns = res.min_rtt_ns.unwrap_or(0.0) as u64;
            rep.p50_ns = res.at(50.0).unwrap_or(0.0) as u64;
            rep.p99_ns = res.at(99.0).unwrap_or(0.0) as u64;
            rep.max_ns = res.max_rtt_ns.unwrap_or(0.0) as u64;
            rep.errors = res.dropped.unwrap_or(0);
        }
        Err(e) => rep.reason = Some(e),
    }
    rep
}

fn find<'a>(runs: &'a [AppRun], app: App, mode: &str, scenario: &str) -> Option<&'a AppRun> {
    runs.iter()
        .find(|r| r.name == app.name() && r.mode == mode && r.scenario == scenario && r.available)
}

/// `num ÷ den`, or `None` when the denominator is no figure (0 ns: no
/// sample).
fn quotient(num: u64, den: u64) -> Option<f64> {
    (den > 0).then(|| num as f64 / den as f64)
}

/// The ratios the issue asks about (`timeout_ns`: a failed write's
/// latency is at least this). A run without samples has no p99: as a
/// denominator it gives no ratio; as a numerator only its failures can
/// bound it (see [`p99_for_ratio`]). Without a ratio a target is not met.
pub fn ratios(runs: &[AppRun], timeout_ns: u64) -> Vec<AppRatio> {
    let mut v = Vec::new();
    // A run's p99 when it has one: 0 otherwise (`quotient` drops it).
    let p99 = |r: &AppRun| if r.samples > 0 { r.p99_ns } else { 0 };
    for app in [App::Etcd, App::Redis] {
        if let (Some(d), Some(l)) = (
            find(runs, app, "default", "both"),
            find(runs, app, "level", "both"),
        ) {
            let (dp99, lower_bound) = p99_for_ratio(d, timeout_ns);
            let dp99 = if d.samples > 0 || lower_bound {
                dp99
            } else {
                0
            };
            let ratio = quotient(dp99, p99(l)).filter(|&x| x > 0.0);
            let target = if app == App::Etcd {
                "≥ 20, no leader change on the level"
            } else {
                "(no target)"
            };
            v.push(AppRatio {
                name: app.name().into(),
                metric: "p99 default ÷ p99 level (both under interference)".into(),
                ratio,
                target: target.into(),
                met: ratio
                    .is_some_and(|x| app != App::Etcd || (x >= 20.0 && l.leader_changes == 0)),
                lower_bound: lower_bound && ratio.is_some(),
            });
        }
    }
    if let Some(idle) = find(runs, App::Sockperf, "default", "idle") {
        for mode in ["level", "default"] {
            if let Some(r) = find(runs, App::Sockperf, mode, "both") {
                let ratio = if r.samples > 0 {
                    quotient(r.p99_ns, p99(idle))
                } else {
                    None
                };
                v.push(AppRatio {
                    name: "sockperf".into(),
                    metric: format!("p99 interfered ({mode}) ÷ p99 interference-free"),
                    ratio,
                    target: if mode == "level" {
                        "≤ 3"
                    } else {
                        "(no target)"
                    }
                    .into(),
                    met: ratio.is_some_and(|x| mode != "level" || x <= 3.0),
                    lower_bound: false,
                });
            }
        }
    }
    v
}

/// The level's rate and bound, as `xlane run` computes them.
fn level_info(cfg: &AppsBenchConfig) -> LevelInfo {
    let q = xlane_te::qjump::QjumpParams {
        hosts: HOSTS as u32,
        max_packet_bytes: 1500,
        rate_bps: cfg.link_rate_bps,
        synchronized: false,
    };
    let f = xlane_level::LevelSpec::get(cfg.level)
        .and_then(|l| l.factor_for(HOSTS as u32))
        .unwrap_or(1);
    LevelInfo {
        level: cfg.level,
        hosts: HOSTS as u32,
        link_rate_bps: cfg.link_rate_bps,
        rate_bps: q.rate_limit_bps(f).unwrap_or(0),
        bound_ns: q.epoch_ns().unwrap_or(0),
    }
}

/// Runs the comparison in a testbed of its own (torn down at the end, also
/// on failure). `log` gets progress lines.
pub fn run(cfg: &AppsBenchConfig, log: &mut dyn FnMut(&str)) -> Result<AppsReport, AppsBenchError> {
    check(cfg)?;
    // Ctrl-C ends the run between runs (and a latency phase between
    // writes): what was started is stopped and the testbed torn down.
    xlane_host::tuning::install_termination_flag();
    let stage = Stage::up(
        HOSTS,
        cfg.link_rate_bps,
        Some(cfg.link_rate_bps.saturating_mul(2)),
        cfg.best_effort_queue_pkts,
        cfg.lane_core,
        log,
    )?;
    let (tb, cores) = (&stage.tb, &stage.cores);
    let ctx = Ctx {
        cfg,
        hosts: tb
            .hosts()
            .iter()
            .map(|h| Host {
                netns: h.netns.clone(),
                addr: h.addr,
            })
            .collect(),
        ifaces: tb.hosts().iter().map(|h| h.iface.clone()).collect(),
        tag: format!("appsbench-{}-{}", std::process::id(), tb.prefix()),
    };
    let per_run = cfg.latency_cap + cfg.timeout * 4 + Duration::from_secs(60);
    let probes = FloorSet::start(cores, (per_run.as_nanos() as u64).saturating_mul(8))?;
    let mut interfere = || {
        Interference::start_all_ports(tb, cores, true, true)
            .map_err(|e| format!("interference: {e}"))
    };
    let mut runs = Vec::new();
    let mut cross = Vec::new();
    for &app in &cfg.apps {
        if app == App::Sockperf {
            log("  sockperf, interference-free, default ...");
            runs.push(run_sockperf(&ctx, false, "idle", None, &mut cross));
        }
        for level in [false, true] {
            if crate::kv_bench::interrupted() {
                break;
            }
            log(&format!(
                "  {}, under interference, {} ...",
                app.name(),
                if level { "under xlane run" } else { "default" }
            ));
            let r = if app == App::Sockperf {
                run_sockperf(&ctx, level, "both", Some(&mut interfere), &mut cross)
            } else {
                run_cluster(&ctx, app, level, &mut interfere, &mut cross, log)
            };
            log(&match &r.reason {
                Some(e) if !r.available => format!("    not available: {e}"),
                _ => format!(
                    "    p50 {} p99 {} max {}, {} samples, {} errors, {} leader changes{}",
                    fmt_sample_ns(r.samples, r.p50_ns),
                    fmt_sample_ns(r.samples, r.p99_ns),
                    fmt_sample_ns(r.samples, r.max_ns),
                    r.samples,
                    r.errors,
                    r.leader_changes,
                    if r.path.is_empty() {
                        String::new()
                    } else {
                        format!("; path: {}", r.path)
                    }
                ),
            });
            runs.push(r);
        }
    }
    let (floor, _) = probes.stop();
    stage.tear_down(log);
    if crate::kv_bench::interrupted() {
        return Err(AppsBenchError::Interrupted);
    }
    let mut report = AppsReport {
        ratios: ratios(&runs, cfg.timeout.as_nanos() as u64),
        apps: runs,
        level: level_info(cfg),
        floor,
        cross_traffic_bps: cross,
        placement: if cfg.level_on_lane_core {
            format!(
                "level runs: the application on the lane core {} at nice {} (xlane run --cpus \
                 --nice), the bench's writer and observers there too; default runs: on the \
                 regular cores with the interference",
                cfg.lane_core,
                crate::kv_bench::systems::MEMBER_NICE
            )
        } else {
            "every run on the regular cores with the interference (network level only)".into()
        },
        plots: Vec::new(),
    };
    if let Some(dir) = &cfg.plot_dir {
        let files = plot::plot(&report, &dir.join("apps-qjump"))?;
        report.plots = files.iter().map(|p| p.display().to_string()).collect();
    }
    Ok(report)
}

/// The report as text tables.
pub fn render(r: &AppsReport) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "level {}: {} per host, bound {} (n = {}, P = 1500 B, R = {:.0} Mbit/s)",
        r.level.level,
        format_args!("{:.2} Mbit/s", r.level.rate_bps as f64 / 1e6),
        fmt_ns(r.level.bound_ns),
        r.level.hosts,
        r.level.link_rate_bps as f64 / 1e6
    );
    let _ = writeln!(s, "placement: {}", r.placement);
    let _ = writeln!(
        s,
        "\n{:<9} {:<8} {:<8} {:>9} {:>10} {:>10} {:>10} {:>7} {:>8}  path",
        "app", "scenario", "mode", "samples", "p50", "p99", "max", "errors", "leader∆"
    );
    for a in &r.apps {
        if !a.available {
            let _ = writeln!(
                s,
                "{:<9} {:<8} {:<8} not available: {}",
                a.name,
                a.scenario,
                a.mode,
                a.reason.as_deref().unwrap_or("?")
            );
            continue;
        }
        let _ = writeln!(
            s,
            "{:<9} {:<8} {:<8} {:>9} {:>10} {:>10} {:>10} {:>7} {:>8}  {}",
            a.name,
            a.scenario,
            a.mode,
            a.samples,
            fmt_sample_ns(a.samples, a.p50_ns),
            fmt_sample_ns(a.samples, a.p99_ns),
            fmt_sample_ns(a.samples, a.max_ns),
            a.errors,
            a.leader_changes,
            a.path
        );
    }
    let _ = writeln!(s, "\nQJump's comparison (sockperf round trip): interference-free = idle/default, interfered = both/default, interfered on a level = both/level");
    for q in &r.ratios {
        let verdict = match (q.target.as_str(), q.ratio) {
            ("(no target)", _) => "(no target)".to_string(),
            (t, None) => format!("(target {t}: NOT met, no data)"),
            (t, Some(_)) => format!("(target {t}: {})", if q.met { "met" } else { "NOT met" }),
        };
        let value = match q.ratio {
            Some(x) => format!("{}{x:.2}", if q.lower_bound { "≥ " } else { "" }),
            None => "– (a run without samples)".into(),
        };
        let _ = writeln!(s, "{:<9} {}: {value} {verdict}", q.name, q.metric);
    }
    let _ = writeln!(
        s,
        "\nfloor: the machine took {:.2} % of the lane core, longest gap {}; cross traffic {} flows, mean {:.1} Mbit/s",
        r.floor.stolen_fraction * 100.0,
        fmt_ns(r.floor.max_gap_ns),
        r.cross_traffic_bps.len(),
        // No flow: a mean of 0 over the "0 flows" the line states.
        r.cross_traffic_bps.iter().sum::<u64>() as f64
            / r.cross_traffic_bps.len().max(1) as f64
            / 1e6
    );
    for p in &r.plots {
        let _ = writeln!(s, "plot: {p}");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(name: &str, mode: &str, scenario: &str, p99: u64, changes: u64) -> AppRun {
        let app = App::from_name(name).unwrap();
        let mut r = empty_run(app, mode == "level", scenario);
        r.available = true;
        r.samples = if p99 > 0 { 100 } else { 0 };
        r.p99_ns = p99;
        r.leader_changes = changes;
        r
    }

    #[test]
    fn ratios_follow_the_issue() {
        let runs = vec![
            run("etcd", "default", "both", 100_000_000, 0),
            run("etcd", "level", "both", 2_000_000, 0),
            run("sockperf", "default", "idle", 100_000, 0),
            run("sockperf", "default", "both", 50_000_000, 0),
            run("sockperf", "level", "both", 250_000, 0),
        ];
        let r = ratios(&runs, 10_000_000_000);
        assert_eq!(r.len(), 3);
        assert_eq!(r[0].name, "etcd");
        let near = |x: Option<f64>, want: f64| x.is_some_and(|x| (x - want).abs() < 1e-9);
        assert!(near(r[0].ratio, 50.0) && r[0].met);
        assert!(near(r[1].ratio, 2.5) && r[1].met);
        assert!(!runs.is_empty());
        let with_change = vec![
            run("etcd", "default", "both", 100_000_000, 0),
            run("etcd", "level", "both", 1_000_000, 1),
        ];
        assert!(!ratios(&with_change, 10_000_000_000)[0].met);
        // Every default write failed: its p99 is at least the timeout.
        let mut failed = run("etcd", "default", "both", 0, 0);
        failed.errors = 6;
        let all_failed = vec![failed, run("etcd", "level", "both", 100_000_000, 0)];
        let q = &ratios(&all_failed, 10_000_000_000)[0];
        assert!(q.lower_bound && near(q.ratio, 100.0) && q.met);
    }

    #[test]
    fn a_run_without_samples_shows_no_time() {
        assert_eq!(fmt_sample_ns(0, 0), "–");
        assert_eq!(fmt_sample_ns(0, 7_000), "–");
        assert_eq!(fmt_sample_ns(3, 7_000), fmt_ns(7_000));
    }

    #[test]
    fn bad_configurations_are_refused() {
        let mut c = AppsBenchConfig::new(PathBuf::from("/nonexistent/xlane"));
        assert!(matches!(check(&c), Err(AppsBenchError::Missing { .. })));
        c.level = 0;
        assert!(matches!(check(&c), Err(AppsBenchError::Config(_))));
        c.level = 2;
        c.writes = 0;
        assert!(matches!(check(&c), Err(AppsBenchError::Config(_))));
    }

    #[test]
    fn the_path_line_is_read_from_the_log() {
        let l = vec!["xlane run: path: classifier (etcd is a Go binary; 8 rules)".to_string()];
        assert_eq!(path_of(&l), "classifier (etcd is a Go binary; 8 rules)");
        assert_eq!(path_of(&[]), "");
    }

    /// Degenerate runs go through the ratios, the text and the figure: a
    /// run without samples shows "–", a ratio it cannot give is absent
    /// (`None`) and its target "NOT met, no data".
    #[test]
    fn degenerate_inputs_are_analysed_and_reported() {
        let one = |name: &str, mode: &str, scenario: &str| {
            let mut r = run(name, mode, scenario, 1_000_000, 0);
            (r.samples, r.p50_ns, r.max_ns) = (1, 1_000_000, 1_000_000);
            r
        };
        let empty = |name: &str, mode: &str, scenario: &str, errors: u64| {
            let mut r = run(name, mode, scenario, 0, 0);
            r.errors = errors;
            r
        };
        let off = |name: &str, mode: &str, scenario: &str| {
            let mut r = empty_run(App::from_name(name).unwrap(), mode == "level", scenario);
            r.reason = Some("did not start".into());
            r
        };
        let mut no_max = one("sockperf", "level", "both");
        no_max.max_ns = 0;
        // (case, runs, ratios with a value, ratios met, lower bounds, text
        //  the render must contain)
        type Case = (
            &'static str,
            Vec<AppRun>,
            usize,
            usize,
            usize,
            Vec<&'static str>,
        );
        let cases: Vec<Case> = vec![
            ("no run at all", vec![], 0, 0, 0, vec!["longest gap 0ns"]),
            (
                "every run failed to start",
                vec![
                    off("etcd", "default", "both"),
                    off("etcd", "level", "both"),
                    off("sockperf", "default", "idle"),
                    off("sockperf", "level", "both"),
                ],
                0,
                0,
                0,
                vec!["not available: did not start"],
            ),
            (
                "every default write failed, the level run measured",
                vec![
                    empty("etcd", "default", "both", 6),
                    one("etcd", "level", "both"),
                ],
                1,
                1,
                1,
                vec!["≥ ", "(target ≥ 20, no leader change on the level: met)"],
            ),
            (
                "every level write failed",
                vec![
                    one("etcd", "default", "both"),
                    empty("etcd", "level", "both", 6),
                ],
                0,
                0,
                0,
                vec!["– (a run without samples)", "NOT met, no data", "       –"],
            ),
            (
                "no sample and no failure at default",
                vec![
                    empty("redis", "default", "both", 0),
                    one("redis", "level", "both"),
                ],
                0,
                0,
                0,
                vec!["– (a run without samples)"],
            ),
            (
                "sockperf without samples when interference-free",
                vec![
                    empty("sockperf", "default", "idle", 3),
                    one("sockperf", "level", "both"),
                    one("sockperf", "default", "both"),
                ],
                0,
                0,
                0,
                vec!["(target ≤ 3: NOT met, no data)"],
            ),
            (
                "one sample everywhere, a run without its maximum",
                vec![
                    one("sockperf", "default", "idle"),
                    no_max,
                    one("etcd", "default", "both"),
                    one("etcd", "level", "both"),
                ],
                2,
                1,
                0,
                vec![
                    "(target ≤ 3: met)",
                    "(target ≥ 20, no leader change on the level: NOT met)",
                ],
            ),
        ];
        let dir =
            std::env::temp_dir().join(format!("xlane-apps-degenerate-{}", std::process::id()));
        for (case, apps, valued, met, lower, has) in cases {
            let ratios = ratios(&apps, 10_000_000_000);
            let report = AppsReport {
                apps,
                ratios,
                level: level_info(&AppsBenchConfig::new(PathBuf::new())),
                floor: crate::interference::Floor {
                    stolen_fraction: 0.0,
                    max_gap_ns: 0,
                    cores: Vec::new(),
                },
                cross_traffic_bps: Vec::new(),
                placement: String::new(),
                plots: Vec::new(),
            };
            let r = &report.ratios;
            assert_eq!(
                r.iter().filter(|q| q.ratio.is_some()).count(),
                valued,
                "{case}: {r:?}"
            );
            assert_eq!(r.iter().filter(|q| q.met).count(), met, "{case}: {r:?}");
            assert_eq!(
                r.iter().filter(|q| q.lower_bound).count(),
                lower,
                "{case}: {r:?}"
            );
            assert!(
                r.iter()
                    .flat_map(|q| q.ratio)
                    .all(|x| x.is_finite() && x > 0.0),
                "{case}: {r:?}"
            );
            let text = render(&report);
            for h in has {
                assert!(text.contains(h), "{case}: no {h:?} in\n{text}");
            }
            let files =
                plot::plot(&report, &dir.join("apps")).unwrap_or_else(|e| panic!("{case}: {e}"));
            assert!(files.iter().all(|f| f.is_file()), "{case}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
