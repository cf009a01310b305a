//! `xlane bench kv`: replicated key-value writes side by side (X-Lane §6.5,
//! Fig. 8), asking which store still commits in microseconds when the
//! datacenter is saturated — xlane kv over the lane (X-Raft), xlane kv over
//! plain UDP, real etcd and real Redis with `WAIT`, each with the same
//! number of members, every member in its own host of the emulated
//! datacenter (the testbed).
//!
//! **Scenarios** (as `bench jitter`'s): `idle` (nothing else runs), `both`
//! (every switch port towards a member saturated by unpaced best-effort
//! cross traffic, and one spinning thread on every regular core), and
//! `cross` and `cpu` alone. For each replica count every system's cluster
//! starts, elects and syncs in a calm datacenter (under interference Raft
//! over UDP, etcd and Redis did not come up within 20 s), all side by side
//! in the same hosts on ports of their own; the scenario's interference
//! then runs while the systems take turns, round by round (`--rounds`,
//! order alternating), at the latency phase's writes and then at the
//! throughput phase's time. On a shared machine whose speed drifts by tens
//! of percent from minute to minute, this puts every system into the same
//! minutes: a ratio compares two systems under the same conditions, not one
//! system's good minute with another's bad one. The per-core floor probes
//! run through all of a scenario's systems and replica counts.
//!
//! **Placement.** The members of xlane kv over the lane run on the lane
//! core (`taskset -c <lane core> nice -n -10`; see [`systems`] for why not
//! SCHED_FIFO), and so do
//! that system's latency-phase writer and its observers (at the default
//! policy, below the members): the coordinating application sits in the
//! group. The throughput phase's bulk clients are regular work and run on
//! the regular cores for every system. Every other system runs as users run it: default
//! priority, default network settings (best-effort DSCP), off the lane
//! core (the bench keeps itself and all it starts on the regular cores).
//! Only the lane's traffic is marked express; everything else queues with
//! the cross traffic.
//!
//! **Visibility** ([`observe`]): the writer writes from the leader's
//! (Redis primary's) host over that host's own address, so only
//! replication crosses the congested switch; an observer in every member's
//! host learns of the write through its member (keyspace notifications for
//! Redis and xlane kv, a watch for etcd) and stamps it with the clock the
//! emulated hosts share. Write-visible latency = the last member's stamp −
//! the writer's send stamp.
//!
//! **Workload.** Every write puts a new key (`kvbench:<phase>:...`) with a
//! value whose size is drawn from a normal distribution (default mean
//! 25.6 B, σ 10 B) truncated to [1 B, 10 MB] as in the paper; values are
//! random lower-case letters from a seeded generator. Latency phase: one
//! client, sequential writes (after an untimed warm-up). Throughput phase:
//! closed-loop clients from the leader's host for D seconds; writes/s =
//! acknowledged writes ÷ the time until the last was visible on every
//! member. A write refused or not visible everywhere within the timeout is
//! a failed write, counted, and the run goes on.
//!
//! **Durability (equal for all).** Everything lives on a RAM disk and no
//! write waits for stable storage: etcd's data directory is on /dev/shm
//! (fsync is a no-op there); Redis runs with `appendonly no` and `save ""`;
//! xlane kv keeps its raft log there with `--fsync never`.
//!
//! Files: [`systems`] starts the processes, [`observe`] writes and
//! observes, [`wire`] speaks RESP and etcd's HTTP gateway, [`report`]
//! renders, [`plot`] draws Fig. 8.

pub mod observe;
pub mod plot;
pub mod redis_benchmark;
pub mod report;
pub mod systems;
pub mod wire;

use std::path::PathBuf;
use std::time::Duration;

use serde::Serialize;
use xlane_host::budget::{CpuShares, CpuTimes};

use crate::budget::SATURATION_HEADROOM;
use crate::interference::{switch_drops, BenchError, Floor, FloorSet, Interference, Stage};
pub use crate::jitter::Scenario;
use crate::stats::LatencySummary;
use crate::table::fmt_ns;

use observe::{Clock, Measured, Observers, Run};
use systems::{Cluster, Host, LeaderState, Start};

/// One of the systems compared.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum System {
    /// `xlane kv serve` in its replicated (Raft) mode over plain UDP.
    Xlane,
    /// The same with `--transport lane`: X-Raft over the lane, members on
    /// the lane core.
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

    /// The label in tables and plots.
    pub fn label(self) -> &'static str {
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

    fn on_lane_core(self) -> bool {
        self == System::XlaneLane
    }
}

/// What to run.
#[derive(Clone, Debug)]
pub struct KvBenchConfig {
    /// Scenarios, in order.
    pub scenarios: Vec<Scenario>,
    /// Systems to compare.
    pub systems: Vec<System>,
    /// Replica counts (members per cluster), each 2..=16 (one host each).
    pub replicas: Vec<usize>,
    /// Writes of the latency phase (one client, sequential).
    pub writes: usize,
    /// Longest latency phase: a system slower than `writes` in this time
    /// gets fewer timed writes (the report gives how many).
    pub latency_cap: Duration,
    /// Length of the throughput phase.
    pub throughput_duration: Duration,
    /// Concurrent clients of the throughput phase.
    pub clients: usize,
    /// Rounds each phase is split into: the systems take turns round by
    /// round (1: each system's whole phase at once).
    pub rounds: usize,
    /// Seed of the value sizes and contents.
    pub seed: u64,
    /// Mean of the value-size distribution, bytes.
    pub mean_size: f64,
    /// Standard deviation of the value-size distribution, bytes.
    pub sd_size: f64,
    /// The xlane binary (`xlane kv serve`); `None` leaves xlane kv out
    /// with a reason in the report.
    pub xlane_bin: Option<PathBuf>,
    /// Directory for the clusters' data (a RAM disk).
    pub work_dir: PathBuf,
    /// Write the Fig. 8 plots (PNG and SVG) into this directory.
    pub plot_dir: Option<PathBuf>,
    /// How long a cluster may take to come up, and a write to become
    /// visible on every member before it counts as failed.
    pub timeout: Duration,
    /// Link rate of every testbed port, bits/s.
    pub link_rate_bps: u64,
    /// Best-effort queue of every port, packets.
    pub best_effort_queue_pkts: u32,
    /// The lane core.
    pub lane_core: usize,
}

impl Default for KvBenchConfig {
    fn default() -> Self {
        let jitter = crate::jitter::JitterConfig::default();
        KvBenchConfig {
            scenarios: vec![Scenario::Idle, Scenario::Both],
            systems: System::ALL.to_vec(),
            replicas: vec![3, 5],
            writes: 2000,
            latency_cap: Duration::from_secs(60),
            throughput_duration: Duration::from_secs(5),
            clients: 8,
            rounds: 4,
            seed: 1,
            mean_size: 25.6,
            sd_size: 10.0,
            xlane_bin: None,
            work_dir: PathBuf::from("/dev/shm"),
            plot_dir: None,
            timeout: Duration::from_secs(10),
            // Cross traffic this machine can generate beside the CPU load
            // (about 35 Mbit/s per flow on 2 vCPUs) oversubscribes 40 Mbit/s
            // ports; 400 packets hold 120 ms there, as bench jitter's 1000
            // at 100 Mbit/s.
            link_rate_bps: 40_000_000,
            best_effort_queue_pkts: 400,
            lane_core: jitter.lane_core,
        }
    }
}

/// Result of one system with one replica count in one scenario.
#[derive(Clone, Debug, Serialize)]
pub struct SystemReport {
    /// `idle`, `both`, ...
    pub scenario: String,
    /// `xlane`, `xlane-lane`, `etcd` or `redis`.
    pub name: String,
    /// Members of the cluster.
    pub replicas: usize,
    /// Whether the system ran; if not, `reason` says why and the numbers
    /// are 0.
    pub available: bool,
    /// Why the system did not run, or its first failed write.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Version string of the server binary.
    pub version: String,
    /// Durability setting.
    pub durability: String,
    /// Mean write-visible latency (last member's observer − send).
    pub mean_ns: u64,
    /// Median of that time.
    pub p50_ns: u64,
    /// 99th percentile.
    pub p99_ns: u64,
    /// 99.9th percentile.
    pub p999_ns: u64,
    /// Smallest.
    pub min_ns: u64,
    /// Largest.
    pub max_ns: u64,
    /// Mean time until the system acknowledged a write (etcd, xlane:
    /// committed by a quorum; redis: `WAIT` returned).
    pub ack_mean_ns: u64,
    /// Median of that time.
    pub ack_p50_ns: u64,
    /// Writes timed in the latency phase (failed ones not included).
    pub latency_writes: u64,
    /// Writes per second of the throughput phase, visible on every member
    /// (0 when no throughput phase ran: `throughput_ns` is then 0 too).
    pub ops_per_s: f64,
    /// Acknowledged writes of the throughput phase.
    pub throughput_writes: u64,
    /// From the throughput phase's start until its last write was visible
    /// on every member.
    pub throughput_ns: u64,
    /// Failed writes of both phases: refused, or not visible on every
    /// member within the timeout.
    pub errors: u64,
    /// Leader changes during the run (etcd, xlane kv: raft terms begun;
    /// Redis: members whose role changed).
    pub leader_changes: u64,
    /// Busy fraction of the lane core during this system's rounds
    /// (`/proc/stat`: all but idle and steal); `None` when `/proc/stat`
    /// could not be read or no tick passed.
    pub lane_core_busy: Option<f64>,
}

/// The lane core during a scenario, from `/proc/stat` and its floor probe.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct KvLaneCore {
    /// The core.
    pub core: usize,
    /// Share of its time not idle (members, probes, softirq, ...).
    pub busy_fraction: f64,
    /// What the machine took from a real-time thread there (floor probe).
    pub machine_fraction: f64,
    /// Its idle share.
    pub headroom: f64,
    /// Headroom below [`SATURATION_HEADROOM`].
    pub saturated: bool,
    /// Its time by kind; all 0 when `/proc/stat` could not be read (then
    /// every fraction above is 0 and `saturated` false: not measured).
    pub cpu: CpuShares,
}

/// One scenario's conditions.
#[derive(Clone, Debug, Serialize)]
pub struct ScenarioConditions {
    /// Scenario name.
    pub scenario: String,
    /// The floor of every core during the scenario.
    pub floor: Floor,
    /// The lane core.
    pub lane_core: KvLaneCore,
    /// Cross traffic achieved, bits/s per flow.
    pub cross_traffic_bps: Vec<u64>,
    /// Best-effort drops at the switch during the scenario.
    pub switch_best_effort_drops: u64,
    /// Link rate, bits/s.
    pub link_rate_bps: u64,
    /// Plot files written.
    pub plots: Vec<String>,
}

/// The observed value sizes and the workload.
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
    /// Rounds each phase was split into (the systems took turns).
    pub rounds: usize,
    /// Throughput-phase length, seconds.
    pub seconds: f64,
    /// Per-write timeout, seconds.
    pub timeout_s: f64,
    /// The visibility rule.
    pub visibility: String,
    /// Where everything runs.
    pub placement: String,
}

/// One system's figure over another's, same scenario and replica count.
#[derive(Clone, Debug, Serialize)]
pub struct Ratio {
    /// Scenario.
    pub scenario: String,
    /// Replica count.
    pub replicas: usize,
    /// `mean`, `p99` or `writes/s`.
    pub metric: String,
    /// The numerator's system.
    pub system: String,
    /// The denominator's system.
    pub versus: String,
    /// system's figure ÷ versus's figure.
    pub ratio: f64,
    /// The ratio is a lower bound: `system` had writes that failed (not
    /// visible within the timeout), counted at the timeout.
    pub lower_bound: bool,
}

/// The whole report.
#[derive(Clone, Debug, Serialize)]
pub struct KvBenchReport {
    /// One entry per scenario, system and replica count.
    pub systems: Vec<SystemReport>,
    /// Each scenario's floor, lane core and cross traffic.
    pub scenarios: Vec<ScenarioConditions>,
    /// The ratios the report states.
    pub ratios: Vec<Ratio>,
    /// The workload.
    pub workload: Workload,
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
    /// The testbed, the floor probes or the placement failed.
    #[error("{0}")]
    Bench(#[from] BenchError),
    /// The plots could not be written.
    #[error("plot {path}: {message}")]
    Plot {
        /// File.
        path: String,
        /// What went wrong.
        message: String,
    },
    /// SIGINT or SIGTERM ended the run early; every cluster was stopped
    /// and the testbed torn down.
    #[error("interrupted: every cluster stopped and the testbed torn down")]
    Interrupted,
}

/// Whether SIGINT or SIGTERM asked the run to end (the handlers are
/// installed by [`run`]; a second signal ends the process at once).
pub(crate) fn interrupted() -> bool {
    xlane_host::tuning::install_termination_flag().load(std::sync::atomic::Ordering::Relaxed)
}

impl From<xlane_testbed::TestbedError> for KvBenchError {
    fn from(e: xlane_testbed::TestbedError) -> Self {
        KvBenchError::Bench(BenchError::Testbed(e))
    }
}

impl From<xlane_host::floor::FloorError> for KvBenchError {
    fn from(e: xlane_host::floor::FloorError) -> Self {
        KvBenchError::Bench(BenchError::Floor(e))
    }
}

/// Largest value size of the truncation, bytes (as the paper).
pub const MAX_SIZE: usize = 10_000_000;

/// The placement, as the report states it.
pub const PLACEMENT: &str = "every member in its own testbed host; xlane kv over the lane: \
     members on the lane core at nice -10 (taskset + nice), its latency writer and \
     observers on the lane core at the default policy; xlane kv over UDP, etcd and Redis: \
     default priority and network settings (best effort), on the regular cores; every \
     system's throughput clients on the regular cores";

// ---------------------------------------------------------------- workload

/// The workload's draws, from [`xlane_stats::SplitMix64`].
#[derive(Clone, Debug)]
pub struct Rng(xlane_stats::SplitMix64);

impl Rng {
    /// A generator from a seed (any value, 0 included).
    pub fn new(seed: u64) -> Self {
        Rng(xlane_stats::SplitMix64::new(seed))
    }

    /// Next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
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

fn mean_sd(v: &[usize]) -> (f64, f64) {
    if v.is_empty() {
        return (0.0, 0.0);
    }
    let n = v.len() as f64;
    let m = v.iter().map(|&x| x as f64).sum::<f64>() / n;
    let var = v.iter().map(|&x| (x as f64 - m).powi(2)).sum::<f64>() / n;
    (m, var.sqrt())
}

// -------------------------------------------------------------- running

fn check(cfg: &KvBenchConfig) -> Result<(), KvBenchError> {
    let max_hosts = xlane_testbed::config::MAX_HOSTS;
    if cfg.replicas.is_empty() || cfg.replicas.iter().any(|&n| n < 2 || n > max_hosts) {
        return Err(KvBenchError::Config(format!(
            "replica counts must be 2..={max_hosts} (one testbed host each)"
        )));
    }
    if cfg.writes == 0
        || cfg.clients == 0
        || cfg.rounds == 0
        || cfg.systems.is_empty()
        || cfg.scenarios.is_empty()
    {
        return Err(KvBenchError::Config(
            "writes, clients, rounds, systems and scenarios must not be empty".into(),
        ));
    }
    if !(cfg.mean_size >= 1.0 && cfg.sd_size >= 0.0 && cfg.mean_size.is_finite()) {
        return Err(KvBenchError::Config("bad value-size distribution".into()));
    }
    if cfg.systems.contains(&System::Etcd) && systems::which("etcd").is_none() {
        return Err(KvBenchError::Missing {
            binary: "etcd",
            hint: "apt-get install -y etcd-server etcd-client",
        });
    }
    if cfg.systems.contains(&System::Redis) && systems::which("redis-server").is_none() {
        return Err(KvBenchError::Missing {
            binary: "redis-server",
            hint: "apt-get install -y redis-server redis-tools",
        });
    }
    for bin in ["taskset", "chrt", "ip"] {
        if systems::which(bin).is_none() {
            return Err(KvBenchError::Config(format!("{bin} not found")));
        }
    }
    Ok(())
}

fn busy(cpu: &CpuShares) -> f64 {
    (1.0 - cpu.idle - cpu.steal).clamp(0.0, 1.0)
}

/// Whether `cpu` holds a measurement: the shares of a measured interval
/// sum to 1; all zeros mean `/proc/stat` was unreadable or no tick passed.
pub(crate) fn cpu_measured(cpu: &CpuShares) -> bool {
    cpu.user + cpu.system + cpu.irq + cpu.softirq + cpu.idle + cpu.steal > 0.0
}

/// The lane core's busy and total time over a system's rounds (jiffies).
#[derive(Default, Clone, Copy)]
struct CoreUse {
    busy: u64,
    total: u64,
}

impl CoreUse {
    fn add(&mut self, before: Option<CpuTimes>, after: Option<CpuTimes>) {
        if let (Some(a), Some(b)) = (before, after) {
            let d = b.since(&a);
            self.total += d.total();
            self.busy += d.total().saturating_sub(d.idle + d.steal);
        }
    }

    /// The busy share, or `None` when nothing was measured (a 0 would
    /// read as an idle core).
    fn fraction(&self) -> Option<f64> {
        (self.total > 0).then(|| self.busy as f64 / self.total as f64)
    }
}

/// The order of the systems in round `r`: forwards in even rounds,
/// backwards in odd ones, so that no system always follows the same one.
fn round_order(systems: usize, r: usize) -> Vec<usize> {
    if r % 2 == 0 {
        (0..systems).collect()
    } else {
        (0..systems).rev().collect()
    }
}

/// The share of `total` that round `r` of `rounds` gets (the first rounds
/// take the remainder).
fn round_share(total: usize, rounds: usize, r: usize) -> usize {
    total / rounds + usize::from(r < total % rounds)
}

/// Runs every system of `reps` (one report each, in `systems`' order) with
/// `n` members on `hosts`, side by side: every cluster starts, elects and
/// syncs in a calm datacenter, as a deployed one did before the datacenter
/// got busy, and warms up; then `interfere` starts the scenario's
/// interference (its flows' rates go to `cross`) and the systems take
/// turns, round by round ([`KvBenchConfig::rounds`]), at the latency
/// phase's writes and then at the throughput phase's time. A machine that
/// slows down for a minute then slows every system's share of that minute,
/// not one system's whole run. A system that cannot start, or whose run
/// breaks, is reported as not available with the reason; the others go on.
#[allow(clippy::too_many_arguments)]
fn run_group(
    reps: &mut [SystemReport],
    systems: &[System],
    hosts: &[Host],
    cfg: &KvBenchConfig,
    tag: &str,
    sizes: &mut Vec<usize>,
    interfere: &mut dyn FnMut() -> Result<Interference, String>,
    cross: &mut Vec<u64>,
    log: &mut dyn FnMut(&str),
) {
    let n = hosts.len();
    let clock = Clock::new();
    let lane_core = |s: System| s.on_lane_core().then_some(cfg.lane_core);
    // Every cluster with its observers, in a calm datacenter.
    let mut up: Vec<Option<(Cluster, Observers, LeaderState)>> = Vec::new();
    for (rep, &s) in reps.iter_mut().zip(systems) {
        log(&format!("  starting {} with {n} members ...", s.label()));
        let start = Start {
            hosts,
            dir: cfg
                .work_dir
                .join(format!("{tag}-{}-{}-{n}", rep.scenario, s.name())),
            lane_core: cfg.lane_core,
            xlane_bin: cfg.xlane_bin.as_deref(),
            timeout: cfg.timeout.max(Duration::from_secs(20)),
            wrap: Vec::new(),
        };
        let r = (|| -> Result<_, String> {
            let cl = Cluster::start(s, &start)?;
            rep.version = cl.version.clone();
            let before = cl.leader_state()?;
            let obs = Observers::start(&cl, clock, lane_core(s))?;
            Ok((cl, obs, before))
        })();
        up.push(match r {
            Ok(x) => Some(x),
            Err(e) => {
                log(&format!("  {} not available: {e}", s.label()));
                rep.reason = Some(e);
                None
            }
        });
    }
    let seed = cfg.seed ^ (n as u64) << 32;
    let mut runs: Vec<Option<Run>> = Vec::new();
    for ((rep, &s), u) in reps.iter_mut().zip(systems).zip(&up) {
        runs.push(u.as_ref().and_then(|(cl, obs, _)| {
            match Run::start(cl, obs, cfg, clock, seed, lane_core(s)) {
                Ok(r) => Some(r),
                Err(e) => {
                    log(&format!("  {} not available: {e}", s.label()));
                    rep.reason = Some(format!("{e}{}", cl.logs_tail()));
                    None
                }
            }
        }));
    }
    let interference = match interfere() {
        Ok(i) => i,
        Err(e) => {
            for rep in reps.iter_mut().filter(|r| r.reason.is_none()) {
                rep.reason = Some(e.clone());
            }
            return;
        }
    };
    let rounds = cfg.rounds.max(1);
    let mut core_use = vec![CoreUse::default(); systems.len()];
    let mut capped = vec![false; systems.len()];
    let mut broken: Vec<Option<String>> = vec![None; systems.len()];
    // The latency phase, then the throughput phase, each in rounds.
    for phase in 0..2 {
        for r in 0..rounds {
            if interrupted() {
                break;
            }
            for i in round_order(systems.len(), r) {
                let Some(run) = runs[i].as_mut().filter(|_| broken[i].is_none()) else {
                    continue;
                };
                let before = CpuTimes::read(cfg.lane_core);
                let res = if phase == 0 {
                    if capped[i] {
                        continue;
                    }
                    let writes = round_share(cfg.writes, rounds, r);
                    run.latency_round(cfg, clock, writes).map(|more| {
                        if !more {
                            capped[i] = true;
                            log(&format!(
                                "  {}: latency phase capped at {:?}: {} of {} writes",
                                systems[i].label(),
                                cfg.latency_cap,
                                run.timed(),
                                cfg.writes
                            ));
                        }
                    })
                } else {
                    let length =
                        cfg.throughput_duration / u32::try_from(rounds).unwrap_or(u32::MAX);
                    run.throughput_round(cfg, clock, length)
                };
                core_use[i].add(before, CpuTimes::read(cfg.lane_core));
                if let Err(e) = res {
                    broken[i] = Some(e);
                }
            }
            let what = if phase == 0 { "latency" } else { "throughput" };
            log(&format!("  {what} round {} of {rounds} done", r + 1));
        }
    }
    cross.extend(interference.stop());
    // What each system measured, and whether it stayed whole.
    let measured: Vec<Option<Measured>> = runs.into_iter().map(|r| r.map(|r| r.m)).collect();
    for (i, (u, m)) in up.into_iter().zip(measured).enumerate() {
        let (rep, s) = (&mut reps[i], systems[i]);
        rep.lane_core_busy = core_use[i].fraction();
        let (Some((mut cl, obs, before)), Some(mut m)) = (u, m) else {
            continue;
        };
        let r = (|| -> Result<u64, String> {
            let stopped = obs.stop();
            if let Some(e) = broken[i].take() {
                return Err(format!("{e}{}", cl.logs_tail()));
            }
            stopped?;
            let after = cl.leader_state()?;
            cl.check_alive()?;
            after.changes_since(&before)
        })();
        let changes = match r {
            Ok(c) => c,
            Err(e) => {
                log(&format!("  {} not available: {e}", s.label()));
                rep.reason = Some(e);
                continue;
            }
        };
        rep.available = true;
        let sum = LatencySummary::from_samples(s.name(), &mut m.latencies, m.errors);
        rep.mean_ns = sum.avg_ns;
        rep.p50_ns = sum.p50_ns;
        rep.p99_ns = sum.p99_ns;
        rep.p999_ns = sum.p999_ns;
        rep.min_ns = sum.min_ns;
        rep.max_ns = sum.max_ns;
        rep.latency_writes = sum.samples;
        let ack = LatencySummary::from_samples(s.name(), &mut m.acks, 0);
        rep.ack_mean_ns = ack.avg_ns;
        rep.ack_p50_ns = ack.p50_ns;
        rep.throughput_writes = m.tput_writes;
        rep.throughput_ns = m.tput_ns;
        rep.ops_per_s = if m.tput_ns == 0 {
            0.0 // no throughput round ran: the render shows "–"
        } else {
            m.tput_writes as f64 * 1e9 / m.tput_ns as f64
        };
        rep.errors = m.errors;
        rep.leader_changes = changes;
        rep.reason = m.first_error.map(|e| format!("first failed write: {e}"));
        sizes.extend(m.sizes);
        log(&format!(
            "  {}: mean {} p99 {} p99.9 {}, {:.0} writes/s, {} failed, {} leader changes",
            s.label(),
            fmt_ns(rep.mean_ns),
            fmt_ns(rep.p99_ns),
            fmt_ns(rep.p999_ns),
            rep.ops_per_s,
            rep.errors,
            rep.leader_changes
        ));
    }
}

fn empty_report(scenario: Scenario, s: System, n: usize) -> SystemReport {
    SystemReport {
        scenario: scenario.name().to_string(),
        name: s.name().to_string(),
        replicas: n,
        available: false,
        reason: None,
        version: String::new(),
        durability: s.durability().to_string(),
        mean_ns: 0,
        p50_ns: 0,
        p99_ns: 0,
        p999_ns: 0,
        min_ns: 0,
        max_ns: 0,
        ack_mean_ns: 0,
        ack_p50_ns: 0,
        latency_writes: 0,
        ops_per_s: 0.0,
        throughput_writes: 0,
        throughput_ns: 0,
        errors: 0,
        leader_changes: 0,
        lane_core_busy: None,
    }
}

/// Run the comparison in a testbed of its own (brought up here, torn down
/// when the run ends, also on failure). `log` gets progress lines. A
/// system that cannot start, or whose run breaks, is reported as not
/// available with the reason.
pub fn run(cfg: &KvBenchConfig, log: &mut dyn FnMut(&str)) -> Result<KvBenchReport, KvBenchError> {
    check(cfg)?;
    // Ctrl-C ends the run between writes: the clusters and the testbed are
    // dropped (stopped, torn down) on the way out.
    xlane_host::tuning::install_termination_flag();
    let hosts_needed = cfg.replicas.iter().copied().max().unwrap_or(2);
    // The hosts' NICs send at twice the link rate, so that the two
    // cross-traffic flows into every switch port offer it twice what it
    // carries: its best-effort queue stays full.
    let stage = Stage::up(
        hosts_needed,
        cfg.link_rate_bps,
        Some(cfg.link_rate_bps.saturating_mul(2)),
        cfg.best_effort_queue_pkts,
        cfg.lane_core,
        log,
    )?;
    let (tb, cores) = (&stage.tb, &stage.cores);
    let hosts: Vec<Host> = tb
        .hosts()
        .iter()
        .map(|h| Host {
            netns: h.netns.clone(),
            addr: h.addr,
        })
        .collect();
    let tag = format!("kvbench-{}-{}", std::process::id(), tb.prefix());
    let mut systems = Vec::new();
    let mut conditions = Vec::new();
    let mut sizes = Vec::new();
    // A generous bound on one scenario's length, for the floor probes'
    // storage: every run's phases and timeouts.
    let runs = (cfg.replicas.len() * cfg.systems.len()) as u64;
    let per_run =
        cfg.latency_cap + cfg.throughput_duration + cfg.timeout * 4 + Duration::from_secs(60);
    let scenario_ns = (per_run.as_nanos() as u64).saturating_mul(runs);
    for &scenario in &cfg.scenarios {
        if interrupted() {
            break;
        }
        log(&format!(
            "scenario {}: {} systems × replicas {:?}",
            scenario.name(),
            cfg.systems.len(),
            cfg.replicas
        ));
        let drops_before = switch_drops(tb);
        let mut cross = Vec::new();
        let mut interfere = || {
            Interference::start_all_ports(tb, cores, scenario.cross(), scenario.cpu())
                .map_err(|e| format!("interference: {e}"))
        };
        let probes = FloorSet::start(cores, scenario_ns)?;
        let cpu0 = CpuTimes::read(cores.lane);
        for &n in &cfg.replicas {
            if interrupted() {
                break;
            }
            let mut reps: Vec<SystemReport> = cfg
                .systems
                .iter()
                .map(|&s| empty_report(scenario, s, n))
                .collect();
            run_group(
                &mut reps,
                &cfg.systems,
                &hosts[..n],
                cfg,
                &tag,
                &mut sizes,
                &mut interfere,
                &mut cross,
                log,
            );
            systems.extend(reps);
        }
        let cpu = match (cpu0, CpuTimes::read(cores.lane)) {
            (Some(a), Some(b)) => b.since(&a).shares(),
            _ => CpuShares::default(),
        };
        let (floor, _) = probes.stop();
        let drops = switch_drops(tb).saturating_sub(drops_before);
        // Unmeasured (all shares 0): neither busy nor saturated; the
        // render says "not measured".
        let measured = cpu_measured(&cpu);
        let headroom = cpu.idle;
        conditions.push(ScenarioConditions {
            scenario: scenario.name().to_string(),
            lane_core: KvLaneCore {
                core: cores.lane,
                busy_fraction: if measured { busy(&cpu) } else { 0.0 },
                machine_fraction: floor.stolen_fraction,
                headroom,
                saturated: measured && headroom < SATURATION_HEADROOM,
                cpu,
            },
            floor,
            cross_traffic_bps: cross,
            switch_best_effort_drops: drops,
            link_rate_bps: cfg.link_rate_bps,
            plots: Vec::new(),
        });
    }
    stage.tear_down(log);
    if interrupted() {
        return Err(KvBenchError::Interrupted);
    }
    let (om, osd) = mean_sd(&sizes);
    let mut report = KvBenchReport {
        ratios: report::ratios(&systems, cfg.timeout.as_nanos() as u64),
        systems,
        scenarios: conditions,
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
            rounds: cfg.rounds,
            seconds: cfg.throughput_duration.as_secs_f64(),
            timeout_s: cfg.timeout.as_secs_f64(),
            visibility: "the last member's observer stamp − the writer's send stamp; observers \
                         learn of writes through their own member (Redis, xlane kv: keyspace \
                         notifications; etcd: a watch)"
                .to_string(),
            placement: PLACEMENT.to_string(),
        },
    };
    if let Some(dir) = &cfg.plot_dir {
        for c in &mut report.scenarios {
            let stem = dir.join(format!("kv-fig8-{}", c.scenario));
            let files = plot::plot(&report.systems, &c.scenario, &stem)?;
            c.plots = files.iter().map(|p| p.display().to_string()).collect();
        }
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn rounds_share_the_phase_and_alternate_the_order() {
        // (total, rounds, each round's share)
        let shares: &[(usize, usize, &[usize])] = &[
            (2000, 4, &[500, 500, 500, 500]),
            (10, 4, &[3, 3, 2, 2]),
            (3, 4, &[1, 1, 1, 0]),
            (7, 1, &[7]),
        ];
        for &(total, rounds, want) in shares {
            let got: Vec<usize> = (0..rounds).map(|r| round_share(total, rounds, r)).collect();
            assert_eq!(got, want, "{total} in {rounds}");
            assert_eq!(got.iter().sum::<usize>(), total);
        }
        let orders: &[(usize, usize, &[usize])] = &[
            (3, 0, &[0, 1, 2]),
            (3, 1, &[2, 1, 0]),
            (3, 2, &[0, 1, 2]),
            (1, 1, &[0]),
        ];
        for &(n, r, want) in orders {
            assert_eq!(round_order(n, r), want, "{n} systems, round {r}");
        }
    }

    #[test]
    fn bad_configurations_are_refused_before_anything_starts() {
        let ok = KvBenchConfig::default();
        let cases: Vec<(&str, KvBenchConfig)> = vec![
            (
                "one replica",
                KvBenchConfig {
                    replicas: vec![1],
                    ..ok.clone()
                },
            ),
            (
                "too many",
                KvBenchConfig {
                    replicas: vec![3, 17],
                    ..ok.clone()
                },
            ),
            (
                "no writes",
                KvBenchConfig {
                    writes: 0,
                    ..ok.clone()
                },
            ),
            (
                "no scenario",
                KvBenchConfig {
                    scenarios: vec![],
                    ..ok.clone()
                },
            ),
            (
                "no rounds",
                KvBenchConfig {
                    rounds: 0,
                    ..ok.clone()
                },
            ),
            (
                "bad sizes",
                KvBenchConfig {
                    mean_size: f64::NAN,
                    ..ok.clone()
                },
            ),
        ];
        for (what, cfg) in cases {
            assert!(
                matches!(check(&cfg), Err(KvBenchError::Config(_))),
                "{what}"
            );
        }
    }
}
