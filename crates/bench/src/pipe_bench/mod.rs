//! `xlane bench pipe`: 1Pipe's evaluation (its Figs. 9a, 10, 12 and 13)
//! scaled to this machine, in the emulated datacenter.
//!
//! The hop is the real daemon, `xlane pipe switchd`, in the switch's
//! namespace (1Pipe's host representative of a switch), on an address of
//! the switch's bridge. Each process is a thread in its host's namespace
//! driving a [`xlane_pipe::udp::UdpEndpoint`]: it sends Poisson scatterings
//! to `fanout` random other processes, and records every delivery with the
//! time its message arrived and the time it was delivered. All processes
//! share one clock (one machine), so a message's timestamp is its send
//! time, arrival − timestamp is the latency of the same message unordered,
//! and delivery − arrival is the wait for the barrier: the unordered
//! baseline comes from the very messages that were ordered.
//!
//! Phases:
//! 1. **Latency** (Figs. 9a, 12): best effort and reliable, 2–16
//!    processes, idle; with saturating background flows between the hosts
//!    on the regular lane, once with 1Pipe's packets in the best-effort
//!    class beside them and once in the testbed's express class.
//! 2. **Beacons** (Fig. 13): light traffic, the beacon interval swept; the
//!    hop's and the processes' CPU, the beacons' bandwidth, the ordering
//!    delay.
//! 3. **Failures** (Fig. 10): a process killed, then a host's link cut,
//!    in both modes: detection, recovery and the deliveries over time.
//! 4. **Volume**: reliable scatterings with kills and a cut until at least
//!    `messages` messages were delivered.
//!
//! Every point counts ordering violations at every receiver and, in
//! reliable mode, atomicity violations (a scattering delivered to some
//! correct receivers and not others). In reliable mode the hop holds and
//! fences a silent link and reports it to a recovery coordinator
//! (`xlane_pipe::Coordinator`, one replica in the switch namespace that
//! decides failure timestamps itself): it has every process discard and
//! abort (`proc_fail`), and once all confirmed, the hop remove the link.

mod check;
mod plot;
pub mod rig;

pub use check::{atomicity, ordering_violations, resumed_after, Atomicity, Sent};
pub use plot::plot;

use std::collections::HashMap;
use std::net::SocketAddrV4;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::time::Duration;

use serde::Serialize;
use xlane_pipe::udp::now_ns;
use xlane_testbed::probe::quantile;
use xlane_testbed::testbed::host_addr;
use xlane_testbed::Testbed;

use crate::interference::{Cores, FloorSet, Interference};
use rig::{BenchCoordinator, Proc, ProcOut, ProcSpec, Rec, Switchd, SwitchdSpec, DEAD, QUIET};

/// Why the bench could not run.
#[derive(Debug, thiserror::Error)]
pub enum PipeBenchError {
    /// Bad settings.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// The testbed.
    #[error("testbed: {0}")]
    Testbed(#[from] xlane_testbed::TestbedError),
    /// A part could not start or failed.
    #[error("{0}")]
    Run(String),
}

/// Settings of a run.
#[derive(Clone, Debug, Serialize)]
pub struct PipeBenchConfig {
    /// The xlane binary (for `xlane pipe switchd`).
    pub exe: PathBuf,
    /// Hosts of the testbed; process `p` runs on host `p mod hosts`.
    pub hosts: usize,
    /// Process counts of the latency phase.
    pub procs: Vec<usize>,
    /// Receivers per scattering.
    pub fanout: usize,
    /// Scatterings per second of each process (Poisson).
    pub rate: f64,
    /// Seconds per latency point.
    pub seconds: f64,
    /// Beacon interval of the latency, failure and volume phases, µs.
    pub beacon_us: u64,
    /// Silent beacon intervals before a link is reported.
    pub dead_after: u32,
    /// Beacon intervals of the beacon phase, µs (empty: skip).
    pub beacon_sweep_us: Vec<u64>,
    /// Scatterings per second per process in the beacon phase.
    pub sweep_rate: f64,
    /// Processes of the beacon, failure and volume phases.
    pub procs_failures: usize,
    /// Seconds of a failure point (a kill at a third, a cut at two
    /// thirds); 0 skips the phase.
    pub failure_seconds: f64,
    /// Messages the volume phase delivers at least (0: skip).
    pub messages: u64,
    /// Scatterings per second per process in the volume phase.
    pub volume_rate: f64,
    /// Payload bytes per message.
    pub payload: usize,
    /// Run the latency phase with background flows too.
    pub background: bool,
    /// `SCHED_FIFO` priority of the processes and the hop (0: none).
    pub fifo: i32,
    /// The core the floor reports as the lane's.
    pub lane_core: usize,
    /// Seed of picks and gaps.
    pub seed: u64,
}

impl Default for PipeBenchConfig {
    /// 4 hosts; 2, 4, 8 and 16 processes; fan-out 3; 300 scatterings/s
    /// per process, 2 s a point; beacons every 1 ms, links silent after
    /// 30 (1Pipe's 10 would be 10 ms, and this machine's floor shows host
    /// gaps past that: every one would fence a correct process); the sweep 50 µs–1 ms at 50/s; failures and volume with 8
    /// processes; 10⁶ messages at 500/s per process; 64-byte messages.
    fn default() -> Self {
        PipeBenchConfig {
            exe: PathBuf::from("xlane"),
            hosts: 4,
            procs: vec![2, 4, 8, 16],
            fanout: 3,
            rate: 300.0,
            seconds: 2.0,
            beacon_us: 1000,
            dead_after: 30,
            beacon_sweep_us: vec![50, 100, 200, 500, 1000],
            sweep_rate: 50.0,
            procs_failures: 8,
            failure_seconds: 3.0,
            messages: 1_000_000,
            volume_rate: 500.0,
            payload: 64,
            background: true,
            fifo: crate::flows::LANE_PRIORITY - 1,
            lane_core: 0,
            seed: 1,
        }
    }
}

/// Best effort or reliable.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// Best effort.
    BestEffort,
    /// Reliable (two-phase).
    Reliable,
}

impl Mode {
    /// `best-effort` or `reliable`.
    pub fn name(self) -> &'static str {
        match self {
            Mode::BestEffort => "best-effort",
            Mode::Reliable => "reliable",
        }
    }
}

/// What runs beside a point.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Condition {
    /// Nothing else.
    Idle,
    /// Saturating flows between the hosts; 1Pipe's packets share their
    /// best-effort class.
    BackgroundRegular,
    /// Saturating flows; 1Pipe's packets in the express class.
    BackgroundExpress,
}

impl Condition {
    /// `idle`, `background-regular`, `background-express`.
    pub fn name(self) -> &'static str {
        match self {
            Condition::Idle => "idle",
            Condition::BackgroundRegular => "background-regular",
            Condition::BackgroundExpress => "background-express",
        }
    }
}

/// A failure the bench causes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Failure {
    /// The process stops dead (its socket closes).
    Kill(u32),
    /// The host's link to the switch goes down (every process on it).
    Cut(usize),
}

/// A point to run.
#[derive(Clone, Debug)]
struct Point {
    phase: &'static str,
    procs: usize,
    mode: Mode,
    condition: Condition,
    rate: f64,
    seconds: f64,
    beacon_us: u64,
    failures: Vec<(f64, Failure)>,
    timeline: bool,
    /// Stop sending once this many messages were delivered (or at three
    /// times `seconds`, whichever comes first).
    until_messages: Option<u64>,
}

/// A failure as it went.
#[derive(Clone, Debug, Serialize)]
pub struct FailureOut {
    /// What failed.
    pub failure: Failure,
    /// When, since the point's start, ns.
    pub at_ns: u64,
    /// From the failure to the hop's report of each silent link, ns.
    pub detected_ns: Vec<u64>,
    /// From the failure to the last link removed (reliable: the
    /// coordinator done), ns.
    pub recovered_ns: Option<u64>,
    /// From the failure to delivery resumed at every correct receiver
    /// (its first delivery stamped after the failure), ns.
    pub resumed_ns: Option<u64>,
}

/// A link the hop reported silent.
#[derive(Clone, Debug, Serialize)]
pub struct Suspicion {
    /// The process.
    pub proc: u32,
    /// Since the point's start, ns.
    pub at_ns: u64,
    /// The process had been killed or cut; false: the machine held it
    /// back past the deadline (then, in reliable mode, it was fenced).
    pub real: bool,
}

/// The result of a point.
#[derive(Clone, Debug, Serialize)]
pub struct PointOut {
    /// latency, beacons, failures or volume.
    pub phase: &'static str,
    /// Processes.
    pub procs: usize,
    /// Best effort or reliable.
    pub mode: Mode,
    /// What ran beside it.
    pub condition: Condition,
    /// Beacon interval, µs.
    pub beacon_us: u64,
    /// Scatterings per second per process.
    pub rate: f64,
    /// Seconds of sending.
    pub seconds: f64,
    /// Scatterings sent.
    pub scatterings: u64,
    /// Messages delivered, at every receiver.
    pub messages: u64,
    /// Deliveries out of ⟨timestamp, sender⟩ order (must be 0).
    pub ordering_violations: u64,
    /// Reliable: scatterings delivered to some correct receivers only
    /// (must be 0).
    pub atomicity_violations: u64,
    /// Reliable: scatterings of correct senders, never reported failed,
    /// delivered to none of their correct receivers.
    pub lost: u64,
    /// Messages reported failed to their senders (`send_fail`).
    pub send_failed: u64,
    /// Best-effort messages refused at the receiver as late.
    pub late: u64,
    /// Reliable retransmissions.
    pub retransmits: u64,
    /// Median latency of the messages unordered (arrival − send), ns.
    pub unordered_p50_ns: u64,
    /// Its 99th percentile, ns.
    pub unordered_p99_ns: u64,
    /// Median delivery latency (delivery − send), ns.
    pub delivered_p50_ns: u64,
    /// Its 99th percentile, ns.
    pub delivered_p99_ns: u64,
    /// Median ordered − median unordered, ns.
    pub overhead_p50_ns: u64,
    /// The hop's CPU, share of one core.
    pub hop_cpu: f64,
    /// The processes' CPU together, share of one core.
    pub procs_cpu: f64,
    /// Beacons per second (hop and processes).
    pub beacons_per_s: f64,
    /// Their bandwidth on the wire (82 bytes each with UDP, IP and
    /// Ethernet headers), bits/s.
    pub beacon_bps: f64,
    /// Latest a process sent after its schedule, ns (a process that could
    /// not keep up shows here).
    pub max_send_lag_ns: u64,
    /// Scatterings the processes skipped after falling more than 5 ms
    /// behind their schedule (the machine held them back).
    pub skipped: u64,
    /// Links reported silent.
    pub suspicions: Vec<Suspicion>,
    /// Of those, processes the machine held back (not killed or cut).
    pub false_suspicions: u64,
    /// The failures caused.
    pub failures: Vec<FailureOut>,
    /// Deliveries per millisecond at the correct receivers (failure
    /// points).
    pub timeline_per_ms: Vec<u32>,
    /// Share of the point the busiest CPU's floor probe was held back.
    pub floor_stolen: f64,
    /// Longest floor gap of any CPU, ns.
    pub floor_max_gap_ns: u64,
    /// Background flows' received rate together, bits/s (0: none ran).
    pub background_bps: u64,
    /// Sending stopped early: fewer than two correct processes were left.
    pub ended_early: bool,
}

/// A target of the issue, checked on the run.
#[derive(Clone, Debug, Serialize)]
pub struct Target {
    /// What.
    pub name: String,
    /// Measured.
    pub value: f64,
    /// Bound.
    pub bound: f64,
    /// Met.
    pub met: bool,
}

/// The whole run.
#[derive(Clone, Debug, Serialize)]
pub struct PipeReport {
    /// Settings.
    pub config: PipeBenchConfig,
    /// The testbed's prefix.
    pub testbed: String,
    /// Median one-way hop of the idle testbed (half a host-to-host path's
    /// median), ns.
    pub floor_hop_p50_ns: u64,
    /// Every point.
    pub points: Vec<PointOut>,
    /// Messages delivered over the run.
    pub messages: u64,
    /// Ordering violations over the run.
    pub ordering_violations: u64,
    /// Atomicity violations over the run (reliable points).
    pub atomicity_violations: u64,
    /// The targets.
    pub targets: Vec<Target>,
}

fn validate(cfg: &PipeBenchConfig) -> Result<(), PipeBenchError> {
    let bad = |m: String| Err(PipeBenchError::Config(m));
    let max = cfg
        .procs
        .iter()
        .copied()
        .chain([cfg.procs_failures])
        .max()
        .unwrap_or(0);
    if !(2..=16).contains(&cfg.hosts) {
        return bad(format!("--hosts {}: between 2 and 16", cfg.hosts));
    }
    if cfg.procs.iter().any(|&p| p < 2) || cfg.procs_failures < 2 {
        return bad("a point needs at least 2 processes".into());
    }
    if max > rig::MAX_PROCS {
        return bad(format!("at most {} processes", rig::MAX_PROCS));
    }
    if cfg.fanout == 0 {
        return bad("--fanout must be at least 1".into());
    }
    if !(cfg.rate > 0.0 && cfg.volume_rate > 0.0 && cfg.sweep_rate > 0.0) {
        return bad("rates must be above 0".into());
    }
    if cfg.seconds.is_nan() || cfg.seconds <= 0.0 || cfg.failure_seconds < 0.0 {
        return bad("--seconds must be above 0".into());
    }
    if cfg.beacon_us == 0 || cfg.beacon_sweep_us.contains(&0) || cfg.dead_after == 0 {
        return bad("beacon intervals and --dead-after must be at least 1".into());
    }
    if cfg.payload > xlane_pipe::wire::MAX_PAYLOAD {
        return bad(format!(
            "--payload {}: at most {} bytes",
            cfg.payload,
            xlane_pipe::wire::MAX_PAYLOAD
        ));
    }
    if cfg.failure_seconds > 0.0 && cfg.procs_failures < cfg.hosts + 2 {
        return bad(format!(
            "the failure phase kills one process and cuts a host: it needs at least hosts + 2 = {} processes",
            cfg.hosts + 2
        ));
    }
    if !cfg.exe.is_file() {
        return bad(format!("no xlane binary at {}", cfg.exe.display()));
    }
    Ok(())
}

/// The points of a run, in order.
fn points(cfg: &PipeBenchConfig) -> Vec<Point> {
    let mut v = Vec::new();
    let mut conditions = vec![Condition::Idle];
    if cfg.background {
        conditions.extend([Condition::BackgroundRegular, Condition::BackgroundExpress]);
    }
    let base = |phase, procs, mode, condition| Point {
        phase,
        procs,
        mode,
        condition,
        rate: cfg.rate,
        seconds: cfg.seconds,
        beacon_us: cfg.beacon_us,
        failures: Vec::new(),
        timeline: false,
        until_messages: None,
    };
    for &c in &conditions {
        for &n in &cfg.procs {
            for m in [Mode::BestEffort, Mode::Reliable] {
                v.push(base("latency", n, m, c));
            }
        }
    }
    for &b in &cfg.beacon_sweep_us {
        v.push(Point {
            rate: cfg.sweep_rate,
            beacon_us: b,
            ..base(
                "beacons",
                cfg.procs_failures,
                Mode::BestEffort,
                Condition::Idle,
            )
        });
    }
    let n = cfg.procs_failures;
    if cfg.failure_seconds > 0.0 {
        let t = cfg.failure_seconds;
        for m in [Mode::BestEffort, Mode::Reliable] {
            v.push(Point {
                seconds: t,
                failures: vec![
                    (t / 3.0, Failure::Kill(1)),
                    (2.0 * t / 3.0, Failure::Cut(cfg.hosts - 1)),
                ],
                timeline: true,
                ..base("failures", n, m, Condition::Idle)
            });
        }
    }
    if cfg.messages > 0 {
        let per_s = n as f64 * cfg.volume_rate * cfg.fanout.min(n - 1) as f64;
        // Failures take processes away: a fifth more time.
        let t = (cfg.messages as f64 / per_s * 1.25).ceil().max(2.0);
        v.push(Point {
            rate: cfg.volume_rate,
            seconds: t,
            failures: vec![
                (t / 4.0, Failure::Kill(1)),
                (t / 2.0, Failure::Cut(cfg.hosts - 1)),
                (3.0 * t / 4.0, Failure::Kill(2)),
            ],
            until_messages: Some(cfg.messages),
            ..base("volume", n, Mode::Reliable, Condition::Idle)
        });
    }
    v
}

/// Runs the bench; `progress` gets a line per step.
pub fn run(
    cfg: &PipeBenchConfig,
    progress: &mut dyn FnMut(&str),
) -> Result<PipeReport, PipeBenchError> {
    validate(cfg)?;
    let cores = Cores::new(Cores::online(), cfg.lane_core).map_err(PipeBenchError::Config)?;
    let tb = crate::interference::bring_up(
        cfg.hosts,
        1_000_000_000,
        None,
        1000,
        cfg.lane_core,
        progress,
    )?;
    rig::give_switch_an_address(&tb).map_err(PipeBenchError::Run)?;
    let m = tb.measure(200)?;
    let mut hops: Vec<u64> = m.paths.iter().map(|p| p.p50_ns / 2).collect();
    hops.sort_unstable();
    let floor_hop_p50_ns = quantile(&hops, 0.5).unwrap_or(0);
    progress(&format!(
        "idle testbed: median hop {:.1} µs",
        floor_hop_p50_ns as f64 / 1e3
    ));
    let pts = points(cfg);
    let mut out = Vec::new();
    for (i, p) in pts.iter().enumerate() {
        progress(&format!(
            "[{}/{}] {}: {} processes, {}, {}, beacons every {} µs, {:.0} s",
            i + 1,
            pts.len(),
            p.phase,
            p.procs,
            p.mode.name(),
            p.condition.name(),
            p.beacon_us,
            p.seconds
        ));
        let o = run_point(cfg, &tb, &cores, p)?;
        progress(&format!(
            "    {} messages, median {} unordered / {} delivered, {} ordering and {} atomicity violations, {} silent links ({} false)",
            o.messages,
            crate::table::fmt_ns(o.unordered_p50_ns),
            crate::table::fmt_ns(o.delivered_p50_ns),
            o.ordering_violations,
            o.atomicity_violations,
            o.suspicions.len(),
            o.false_suspicions
        ));
        if o.ended_early {
            progress("    ended early: fewer than two correct processes were left");
        }
        out.push(o);
    }
    let messages = out.iter().map(|p| p.messages).sum();
    let ordering_violations = out.iter().map(|p| p.ordering_violations).sum();
    let atomicity_violations = out.iter().map(|p| p.atomicity_violations).sum();
    let targets = targets(cfg, &out, floor_hop_p50_ns, messages);
    Ok(PipeReport {
        config: cfg.clone(),
        testbed: tb.prefix().to_string(),
        floor_hop_p50_ns,
        points: out,
        messages,
        ordering_violations,
        atomicity_violations,
        targets,
    })
}

/// Brings a cut host's link back up when dropped, whatever happened.
struct Cuts<'a> {
    tb: &'a Testbed,
    hosts: Vec<usize>,
}

impl Cuts<'_> {
    fn set(&self, host: usize, up: bool) -> Result<(), String> {
        let port = self
            .tb
            .switch_port(host)
            .ok_or_else(|| format!("no switch port for host {host}"))?;
        let state = if up { "up" } else { "down" };
        xlane_testbed::exec::run(
            "ip",
            &["-n", self.tb.switch_netns(), "link", "set", port, state],
        )
        .map(|_| ())
        .map_err(|e| format!("link {port} {state}: {e}"))
    }
}

impl Drop for Cuts<'_> {
    fn drop(&mut self) {
        for &h in &self.hosts {
            let _ = self.set(h, true);
        }
    }
}

fn run_point(
    cfg: &PipeBenchConfig,
    tb: &Testbed,
    cores: &Cores,
    p: &Point,
) -> Result<PointOut, PipeBenchError> {
    let err = PipeBenchError::Run;
    let n = p.procs;
    let host_of = |q: usize| q % cfg.hosts;
    let addrs: Vec<SocketAddrV4> = (0..n)
        .map(|q| SocketAddrV4::new(host_addr(host_of(q)), rig::PROC_PORT + q as u16))
        .collect();
    let dscp = match p.condition {
        Condition::BackgroundExpress => tb.config().express_dscp,
        _ => 0,
    };
    let fifo = (cfg.fifo > 0).then_some(cfg.fifo);
    let reliable = p.mode == Mode::Reliable;
    let drain_ns = 300_000_000u64.max(40 * p.beacon_us * 1_000);
    let run_ns = (p.seconds * 1e9) as u64;
    // The processes first: they bind and beacon, so that the hop hears
    // every input from its start; they send once `start` is set.
    let start_at = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(u64::MAX));
    let delivered = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let coordinator = reliable.then_some(rig::COORD_ADDR);
    let procs: Vec<Proc> = (0..n)
        .map(|q| {
            Proc::start(ProcSpec {
                id: q as u32,
                netns: tb.hosts()[host_of(q)].netns.clone(),
                addrs: addrs.clone(),
                rate: p.rate,
                fanout: cfg.fanout.min(n - 1),
                reliable,
                beacon_ns: p.beacon_us * 1_000,
                payload: cfg.payload,
                seed: cfg.seed,
                start_ns: start_at.clone(),
                delivered: delivered.clone(),
                fifo,
                dscp,
                coordinator,
            })
        })
        .collect();
    let stop_all = |procs: Vec<Proc>| {
        for q in procs {
            q.join();
        }
    };
    let mut hop = match Switchd::start(&SwitchdSpec {
        exe: &cfg.exe,
        netns: tb.switch_netns(),
        procs: &addrs,
        beacon_us: p.beacon_us,
        dead_after: cfg.dead_after,
        coordinator,
        fifo: fifo.map(|p| p + 1),
        dscp,
    }) {
        Ok(h) => h,
        Err(e) => {
            stop_all(procs);
            return Err(err(e));
        }
    };
    let bg = match p.condition {
        Condition::Idle => None,
        _ => match Interference::start_all_ports(tb, cores, true, false) {
            Ok(b) => Some(b),
            Err(e) => {
                stop_all(procs);
                return Err(e.into());
            }
        },
    };
    let longest = if p.until_messages.is_some() {
        3 * run_ns
    } else {
        run_ns
    };
    let probes = FloorSet::start(cores, longest + drain_ns + 1_000_000_000).ok();
    let hop_cpu0 = hop.cpu_ns();
    let start = now_ns() + 50_000_000;
    start_at.store(start, Ordering::SeqCst);
    let mut cuts = Cuts {
        tb,
        hosts: Vec::new(),
    };
    // The failure schedule and the hop's reports must not wait behind the
    // processes.
    let rt = rig::RealTime::raise(fifo.map(|p| p + 1));
    // Reliable: the recovery coordinator, one priority above the
    // processes, as the hop.
    let coord =
        reliable.then(|| BenchCoordinator::start(tb.switch_netns(), &addrs, fifo.map(|p| p + 1)));
    // Processes reported silent, the failure each went down in (if real),
    // and when reported.
    let mut recovering: HashMap<usize, (Option<usize>, u64)> = HashMap::new();
    let mut end = match p.until_messages {
        Some(_) => start + 3 * run_ns,
        None => start + run_ns,
    };
    let mut failed_at: Vec<Option<u64>> = vec![None; n];
    let mut fenced = vec![false; n];
    let mut suspicions = Vec::new();
    let mut failures: Vec<FailureOut> = Vec::new();
    let mut next_failure = 0;
    let mut quiet = false;
    let mut ended_early = false;
    let mut problem = None;
    loop {
        let now = now_ns();
        if now >= end + drain_ns {
            break;
        }
        let enough = p
            .until_messages
            .is_some_and(|m| delivered.load(Ordering::Relaxed) >= m);
        // Nobody left to scatter to: the point ends (and says why).
        let alive = (0..n)
            .filter(|&q| failed_at[q].is_none() && !fenced[q])
            .count();
        if !quiet && alive < 2 {
            ended_early = true;
        }
        let enough = enough || ended_early;
        if !quiet && (now >= end || enough) {
            end = end.min(now);
            for q in &procs {
                let _ =
                    q.state
                        .compare_exchange(rig::RUN, QUIET, Ordering::SeqCst, Ordering::SeqCst);
            }
            quiet = true;
        }
        if let Some(&(at, f)) = p.failures.get(next_failure) {
            if now >= start + (at * 1e9) as u64 {
                next_failure += 1;
                let mut t = now_ns();
                match f {
                    Failure::Kill(q) => {
                        procs[q as usize].state.store(DEAD, Ordering::SeqCst);
                        failed_at[q as usize] = Some(t);
                    }
                    Failure::Cut(h) => {
                        cuts.hosts.push(h);
                        if let Err(e) = cuts.set(h, false) {
                            problem = Some(e);
                            break;
                        }
                        // The link is down once `ip` returned.
                        t = now_ns();
                        for q in (0..n).filter(|&q| host_of(q) == h) {
                            failed_at[q].get_or_insert(t);
                        }
                    }
                }
                failures.push(FailureOut {
                    failure: f,
                    at_ns: t - start,
                    detected_ns: Vec::new(),
                    recovered_ns: None,
                    resumed_ns: None,
                });
            }
        }
        // Recoveries the coordinator finished.
        while let Some(Ok((q, at))) = coord.as_ref().map(|c| c.recovered.try_recv()) {
            if let Some((Some(w), _)) = recovering.remove(&(q as usize)) {
                let t0 = start + failures[w].at_ns;
                let r = failures[w].recovered_ns.get_or_insert(0);
                *r = (*r).max(at.saturating_sub(t0));
            }
        }
        let Some((t, ev)) = hop.next_event(Duration::from_millis(1)) else {
            continue;
        };
        if ev["event"] != "link_silent" {
            continue;
        }
        let Some(addr) = ev["input"]
            .as_str()
            .and_then(|a| a.parse::<SocketAddrV4>().ok())
        else {
            continue;
        };
        let Some(q) = addrs.iter().position(|a| *a == addr) else {
            continue;
        };
        let real = failed_at[q].is_some();
        suspicions.push(Suspicion {
            proc: q as u32,
            at_ns: t.saturating_sub(start),
            real,
        });
        // The failure this process went down in.
        let which = failures.iter().rposition(|f| match f.failure {
            Failure::Kill(k) => k as usize == q,
            Failure::Cut(h) => host_of(q) == h,
        });
        if let (true, Some(w)) = (real, which) {
            let at = start + failures[w].at_ns;
            failures[w].detected_ns.push(t.saturating_sub(at));
        }
        if reliable {
            // Held and fenced at the hop; the coordinator recovers it. The
            // process stops too: cut off, it would never hear that it was
            // declared failed, and would retransmit into the dead link
            // until the end of the point.
            procs[q].state.store(DEAD, Ordering::SeqCst);
            fenced[q] = true;
            recovering.insert(q, (which.filter(|_| real), t));
        } else if let (true, Some(w)) = (real, which) {
            // Best effort: the hop removed the link itself.
            let at = start + failures[w].at_ns;
            failures[w].recovered_ns = Some(t.saturating_sub(at));
        }
    }
    drop(rt);
    // A recovery still open 5 s after its report never completed.
    if let Some((q, _)) = recovering
        .iter()
        .find(|(_, (_, t))| now_ns().saturating_sub(*t) > 5_000_000_000)
    {
        problem.get_or_insert(format!("the recovery of process {q} never completed"));
    }
    if let Some(c) = coord {
        if let Err(e) = c.stop() {
            problem.get_or_insert(e);
        }
    }
    let outs: Vec<ProcOut> = procs.into_iter().map(Proc::join).collect();
    drop(cuts);
    let hop_cpu = hop.cpu_ns().saturating_sub(hop_cpu0);
    let hop_end = hop.stop();
    let background_bps: u64 = bg.map_or(0, |b| b.stop().iter().sum());
    let floor = probes.map(|f| f.stop().0);
    if let Some(e) = problem {
        return Err(err(e));
    }
    if let Some(e) = outs.iter().find_map(|o| o.error.clone()) {
        return Err(err(e));
    }
    let correct: Vec<bool> = (0..n)
        .map(|q| failed_at[q].is_none() && !fenced[q])
        .collect();
    let mut o = analyze(p, &outs, &correct, start, end, &mut failures);
    o.seconds = (end - start) as f64 / 1e9;
    o.ended_early = ended_early;
    o.background_bps = background_bps;
    o.suspicions = suspicions;
    o.false_suspicions = o.suspicions.iter().filter(|s| !s.real).count() as u64;
    o.failures = failures;
    let secs = (end - start + drain_ns) as f64 / 1e9;
    o.hop_cpu = hop_cpu as f64 / 1e9 / secs;
    o.procs_cpu = outs.iter().map(|x| x.cpu_ns).sum::<u64>() as f64 / 1e9 / secs;
    let hop_beacons = hop_end
        .as_ref()
        .and_then(|v| v["beacons"].as_u64())
        .unwrap_or(0);
    let beacons = hop_beacons + outs.iter().map(|x| x.driver.beacons).sum::<u64>();
    o.beacons_per_s = beacons as f64 / secs;
    o.beacon_bps = o.beacons_per_s * 82.0 * 8.0;
    if let Some(f) = floor {
        o.floor_stolen = f
            .cores
            .iter()
            .map(|c| c.stolen_fraction)
            .fold(0.0, f64::max);
        o.floor_max_gap_ns = f.cores.iter().map(|c| c.max_gap_ns).max().unwrap_or(0);
    }
    Ok(o)
}

/// What the deliveries of a point show.
fn analyze(
    p: &Point,
    outs: &[ProcOut],
    correct: &[bool],
    start: u64,
    end: u64,
    failures: &mut [FailureOut],
) -> PointOut {
    let recs: Vec<&[Rec]> = outs.iter().map(|o| o.recs.as_slice()).collect();
    let ordering = recs.iter().map(|r| ordering_violations(r)).sum();
    let atom = if p.mode == Mode::Reliable {
        let senders: Vec<Sent> = outs
            .iter()
            .map(|o| Sent {
                id: o.id,
                sent: &o.sent,
                failed: &o.failed,
            })
            .collect();
        atomicity(&senders, &recs, correct)
    } else {
        Atomicity::default()
    };
    let ok: Vec<&[Rec]> = recs
        .iter()
        .zip(correct)
        .filter(|(_, c)| **c)
        .map(|(r, _)| *r)
        .collect();
    for f in failures.iter_mut() {
        f.resumed_ns = resumed_after(&ok, start + f.at_ns);
    }
    // Latencies of messages sent after a warm-up of a tenth of the point.
    let from = start + (end - start) / 10;
    let (mut un, mut de): (Vec<u64>, Vec<u64>) = ok
        .iter()
        .flat_map(|r| r.iter())
        .filter(|d| d.ts >= from && d.ts < end)
        .map(|d| {
            (
                d.arrived.saturating_sub(d.ts),
                d.delivered.saturating_sub(d.ts),
            )
        })
        .unzip();
    un.sort_unstable();
    de.sort_unstable();
    let q = |v: &[u64], x| quantile(v, x).unwrap_or(0);
    let mut timeline = Vec::new();
    if p.timeline {
        let ms = ((end - start) / 1_000_000 + 1) as usize;
        timeline = vec![0u32; ms];
        for d in ok.iter().flat_map(|r| r.iter()) {
            if let Some(b) = d
                .delivered
                .checked_sub(start)
                .and_then(|t| timeline.get_mut((t / 1_000_000) as usize))
            {
                *b += 1;
            }
        }
    }
    PointOut {
        phase: p.phase,
        procs: p.procs,
        mode: p.mode,
        condition: p.condition,
        beacon_us: p.beacon_us,
        rate: p.rate,
        seconds: p.seconds,
        scatterings: outs.iter().map(|o| o.sent.len() as u64).sum(),
        messages: recs.iter().map(|r| r.len() as u64).sum(),
        ordering_violations: ordering,
        atomicity_violations: atom.violations,
        lost: atom.lost,
        send_failed: outs.iter().map(|o| o.failed.len() as u64).sum(),
        late: outs.iter().map(|o| o.late).sum(),
        retransmits: outs.iter().map(|o| o.retransmits).sum(),
        unordered_p50_ns: q(&un, 0.5),
        unordered_p99_ns: q(&un, 0.99),
        delivered_p50_ns: q(&de, 0.5),
        delivered_p99_ns: q(&de, 0.99),
        overhead_p50_ns: q(&de, 0.5).saturating_sub(q(&un, 0.5)),
        hop_cpu: 0.0,
        procs_cpu: 0.0,
        beacons_per_s: 0.0,
        beacon_bps: 0.0,
        max_send_lag_ns: outs.iter().map(|o| o.max_send_lag_ns).max().unwrap_or(0),
        skipped: outs.iter().map(|o| o.skipped).sum(),
        suspicions: Vec::new(),
        false_suspicions: 0,
        failures: Vec::new(),
        timeline_per_ms: timeline,
        floor_stolen: 0.0,
        floor_max_gap_ns: 0,
        background_bps: 0,
        ended_early: false,
    }
}

/// The targets on this run: no ordering or atomicity violation
/// over at least `messages`; per latency point pair, the ordering
/// overhead of best effort within 3 beacon intervals plus the idle
/// floor's median hop, and reliable's median within 3× best effort's.
fn targets(cfg: &PipeBenchConfig, pts: &[PointOut], hop: u64, messages: u64) -> Vec<Target> {
    let mut t = vec![
        Target {
            name: "messages delivered".into(),
            value: messages as f64,
            bound: cfg.messages as f64,
            met: messages >= cfg.messages,
        },
        Target {
            name: "ordering violations".into(),
            value: pts.iter().map(|p| p.ordering_violations).sum::<u64>() as f64,
            bound: 0.0,
            met: pts.iter().all(|p| p.ordering_violations == 0),
        },
        Target {
            name: "atomicity violations (reliable)".into(),
            value: pts.iter().map(|p| p.atomicity_violations).sum::<u64>() as f64,
            bound: 0.0,
            met: pts.iter().all(|p| p.atomicity_violations == 0),
        },
    ];
    let lat = |m: Mode| {
        pts.iter()
            .filter(move |p| p.phase == "latency" && p.mode == m)
    };
    for be in lat(Mode::BestEffort) {
        let bound = 3.0 * (be.beacon_us * 1_000) as f64 + hop as f64;
        t.push(Target {
            name: format!(
                "ordering overhead, best effort, {} processes, {}",
                be.procs,
                be.condition.name()
            ),
            value: be.overhead_p50_ns as f64,
            bound,
            met: (be.overhead_p50_ns as f64) <= bound,
        });
        if let Some(r) =
            lat(Mode::Reliable).find(|r| r.procs == be.procs && r.condition == be.condition)
        {
            let bound = 3.0 * be.delivered_p50_ns as f64;
            t.push(Target {
                name: format!(
                    "reliable median, {} processes, {}",
                    r.procs,
                    r.condition.name()
                ),
                value: r.delivered_p50_ns as f64,
                bound,
                met: (r.delivered_p50_ns as f64) <= bound,
            });
        }
    }
    t
}

/// The report as tables.
pub fn render(r: &PipeReport) -> String {
    use crate::table::{fmt_ns, Table};
    let mut s = format!(
        "xlane bench pipe: testbed {} ({} hosts, hop `xlane pipe switchd` in the switch namespace), idle median hop {}\n\n",
        r.testbed,
        r.config.hosts,
        fmt_ns(r.floor_hop_p50_ns)
    );
    s += "Latency (Figs. 9a, 12): send to arrival (unordered) and to delivery, median / p99\n";
    let mut t = Table::new(&[
        "condition",
        "background",
        "procs",
        "mode",
        "messages",
        "unordered",
        "delivered",
        "overhead p50",
        "late",
        "retx",
        "silent (false)",
        "send lag max",
        "skipped",
        "floor gap",
    ]);
    let phase = |name: &'static str| r.points.iter().filter(move |p| p.phase == name);
    for p in phase("latency") {
        t.row(vec![
            p.condition.name().into(),
            if p.background_bps > 0 {
                format!("{:.0} Mbit/s", p.background_bps as f64 / 1e6)
            } else {
                "-".into()
            },
            p.procs.to_string(),
            p.mode.name().into(),
            p.messages.to_string(),
            format!(
                "{} / {}",
                fmt_ns(p.unordered_p50_ns),
                fmt_ns(p.unordered_p99_ns)
            ),
            format!(
                "{} / {}",
                fmt_ns(p.delivered_p50_ns),
                fmt_ns(p.delivered_p99_ns)
            ),
            fmt_ns(p.overhead_p50_ns),
            p.late.to_string(),
            p.retransmits.to_string(),
            format!("{} ({})", p.suspicions.len(), p.false_suspicions),
            fmt_ns(p.max_send_lag_ns),
            p.skipped.to_string(),
            fmt_ns(p.floor_max_gap_ns),
        ]);
    }
    s += &t.render();
    if phase("beacons").next().is_some() {
        s += "\nBeacons (Fig. 13): light traffic, the beacon interval swept\n";
        let mut t = Table::new(&[
            "interval",
            "beacons/s",
            "bandwidth",
            "hop CPU",
            "procs CPU",
            "overhead p50",
            "silent (false)",
        ]);
        for p in phase("beacons") {
            t.row(vec![
                fmt_ns(p.beacon_us * 1_000),
                format!("{:.0}", p.beacons_per_s),
                format!("{:.2} Mbit/s", p.beacon_bps / 1e6),
                format!("{:.1} %", p.hop_cpu * 100.0),
                format!("{:.1} %", p.procs_cpu * 100.0),
                fmt_ns(p.overhead_p50_ns),
                format!("{} ({})", p.suspicions.len(), p.false_suspicions),
            ]);
        }
        s += &t.render();
    }
    let fails: Vec<&PointOut> = r.points.iter().filter(|p| !p.failures.is_empty()).collect();
    if !fails.is_empty() {
        s += "\nFailures (Fig. 10): from the failure to the silent link reported, to the recovery done, to delivery resumed everywhere\n";
        let mut t = Table::new(&[
            "phase",
            "mode",
            "failure",
            "at",
            "detected",
            "recovered",
            "resumed",
        ]);
        for p in fails {
            for f in &p.failures {
                t.row(vec![
                    p.phase.into(),
                    p.mode.name().into(),
                    match f.failure {
                        Failure::Kill(q) => format!("kill process {q}"),
                        Failure::Cut(h) => format!("cut host {h}"),
                    },
                    fmt_ns(f.at_ns),
                    f.detected_ns
                        .iter()
                        .max()
                        .map_or("-".into(), |&d| fmt_ns(d)),
                    f.recovered_ns.map_or("-".into(), fmt_ns),
                    f.resumed_ns.map_or("never".into(), fmt_ns),
                ]);
            }
        }
        s += &t.render();
    }
    s += &format!(
        "\nOver the run: {} messages, {} ordering violations, {} atomicity violations\n\nTargets:\n",
        r.messages, r.ordering_violations, r.atomicity_violations
    );
    for t in &r.targets {
        s += &format!(
            "  [{}] {}: {:.0} (bound {:.0})\n",
            if t.met { "met" } else { "MISSED" },
            t.name,
            t.value,
            t.bound
        );
    }
    s
}
