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
//! 5. **Lane**: beacons on express-lane tunnels the controller allocated
//!    ([`lane`]), in a testbed of its own with slower links (100 Mbit/s
//!    by default: the flows this machine can generate fill them, and a
//!    best-effort queue of 12 ms as the main testbed's). The hop runs on
//!    a testbed host of its own (the controller allocates between
//!    hosts); the processes of the first
//!    host scatter, those of the other hosts only receive, and saturating
//!    flows run between those other hosts: their beacons queue behind the
//!    flows on their uplinks (they run on the regular cores, as the flows:
//!    the testbed gives the lane core a transmit queue of its own), and
//!    the hop's barrier, the minimum over every input, waits for them. The same point runs with the beacons on the
//!    regular path, with the processes' beacons on their tunnels
//!    (`lane-in`), and with the hop's beacons on its multicast tunnel too
//!    (`lane`); the wait for the barrier (delivery − arrival) tells them
//!    apart.
//!
//! Every point counts ordering violations at every receiver and, in
//! reliable mode, atomicity violations (a scattering delivered to some
//! correct receivers and not others). In reliable mode the hop holds and
//! fences a silent link and reports it to a recovery coordinator
//! (`xlane_pipe::Coordinator`, one replica in the switch namespace that
//! decides failure timestamps itself): it has every process discard and
//! abort (`proc_fail`), and once all confirmed, the hop remove the link.

mod check;
pub mod lane;
mod plot;
mod point;
mod report;
pub mod rig;
pub mod roster;

pub use check::{atomicity, ordering_violations, resumed_after, Atomicity, Sent};
pub use plot::plot;
pub use report::render;
use report::targets;

use std::path::PathBuf;

use serde::Serialize;
use xlane_testbed::probe::quantile;

use crate::interference::Cores;

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
    /// Run the lane phase (needs 4 hosts or more: one for the hop).
    pub lane: bool,
    /// Link rate of the lane phase's testbed, bits/s.
    pub lane_link_rate_bps: u64,
    /// Period of the beacon tunnels asked of the controller, µs.
    pub lane_period_us: u64,
    /// W of the lane beacons' cap, µs.
    pub lane_window_us: u64,
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
            lane: true,
            lane_link_rate_bps: 100_000_000,
            lane_period_us: 1_000,
            lane_window_us: 2_000,
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
    /// Saturating flows between the hosts whose processes only receive
    /// (the lane phase).
    BackgroundQuietHosts,
}

impl Condition {
    /// `idle`, `background-regular`, `background-express`.
    pub fn name(self) -> &'static str {
        match self {
            Condition::Idle => "idle",
            Condition::BackgroundRegular => "background-regular",
            Condition::BackgroundExpress => "background-express",
            Condition::BackgroundQuietHosts => "background-quiet-hosts",
        }
    }
}

/// How beacons travel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Beacons {
    /// On the regular path, as 1Pipe packets (every phase but the lane's).
    Regular,
    /// The processes' beacons on their lane tunnels to the hop; the hop's
    /// on the regular path.
    LaneIn,
    /// Both ways on lane tunnels (the hop's on its multicast tunnel).
    Lane,
}

impl Beacons {
    /// `regular`, `lane-in`, `lane`.
    pub fn name(self) -> &'static str {
        match self {
            Beacons::Regular => "regular",
            Beacons::LaneIn => "lane-in",
            Beacons::Lane => "lane",
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
    /// The hop on this host instead of the switch namespace; the
    /// processes on the hosts before it, those of host 0 sending, the
    /// others only receiving (the lane phase).
    hop_host: Option<usize>,
    beacons: Beacons,
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

impl FailureOut {
    /// A link of this failure was removed at `at` (monotonic ns; the point
    /// started at `start`): the recovery lasts until the last one.
    fn note_recovery(&mut self, start: u64, at: u64) {
        let took = at.saturating_sub(start + self.at_ns);
        let r = self.recovered_ns.get_or_insert(0);
        *r = (*r).max(took);
    }
}

/// A link the hop reported silent.
#[derive(Clone, Debug, Serialize)]
pub struct Suspicion {
    /// The process.
    pub proc: u32,
    /// Since the point's start, ns; negative: before it started.
    pub at_ns: i64,
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
    /// How beacons travelled.
    pub beacons: Beacons,
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
    /// Median wait for the barrier (delivery − arrival of each message),
    /// ns.
    pub wait_p50_ns: u64,
    /// Its 99th percentile, ns.
    pub wait_p99_ns: u64,
    /// Beacon frames on lane tunnels: sent by the processes and the hop.
    pub lane_sent: u64,
    /// Taken (by the hop and the processes).
    pub lane_received: u64,
    /// Missing by sequence number.
    pub lane_lost: u64,
    /// Refused (unknown tunnel, bad frame, wrong sender).
    pub lane_refused: u64,
    /// Sent with barriers the cap held back.
    pub lane_capped: u64,
    /// The hop's CPU, share of one core.
    pub hop_cpu: f64,
    /// The processes' CPU together, share of one core.
    pub procs_cpu: f64,
    /// Beacons per second (hop and processes, regular and lane).
    pub beacons_per_s: f64,
    /// Their bandwidth on the wire (82 bytes a regular beacon, 110 a lane
    /// beacon frame, with UDP, IP and Ethernet headers), bits/s.
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
    /// Sending stopped before the point's start (every process but one
    /// out already): nothing was measured.
    pub ended_before_start: bool,
    /// Every process out of the point, who took it out, and when.
    pub removed: Vec<roster::Removal>,
}

impl PointOut {
    /// Why it stopped early, in one line (`None` if it did not).
    pub fn early_end(&self) -> Option<String> {
        roster::describe_early_end(self.ended_early, self.ended_before_start, &self.removed)
    }
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
    /// The lane phase's testbed's prefix.
    pub lane_testbed: Option<String>,
    /// The lane phase's beacon tunnels, as granted.
    pub lane_tunnels: Vec<lane::TunnelOut>,
    /// Upcalls the lane phase's hosts got from the controller.
    pub lane_upcalls: Vec<String>,
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
    if cfg.lane && cfg.hosts < 4 {
        return bad(format!(
            "the lane phase needs at least 4 hosts (one for the hop), not {} (or --no-lane)",
            cfg.hosts
        ));
    }
    if cfg.lane && (cfg.lane_period_us < 10 || cfg.lane_window_us == 0) {
        return bad("--lane-period-us must be at least 10 and --lane-window-us at least 1".into());
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
        hop_host: None,
        beacons: Beacons::Regular,
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
    if cfg.lane {
        for m in [Mode::BestEffort, Mode::Reliable] {
            for b in [Beacons::Regular, Beacons::LaneIn, Beacons::Lane] {
                v.push(Point {
                    hop_host: Some(cfg.hosts - 1),
                    beacons: b,
                    ..base("lane", n, m, Condition::BackgroundQuietHosts)
                });
            }
        }
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
    let mut grants: Option<lane::LaneGrants> = None;
    let testbed = tb.prefix().to_string();
    let mut tb = tb;
    let mut lane_testbed = None;
    for (i, p) in pts.iter().enumerate() {
        if let (Some(h), None) = (p.hop_host, &grants) {
            // The lane phase's own testbed, with links that the flows of
            // this machine can fill (see `lane`).
            drop(std::mem::replace(
                &mut tb,
                crate::interference::bring_up(
                    cfg.hosts,
                    cfg.lane_link_rate_bps,
                    None,
                    lane::LANE_QUEUE_PKTS,
                    cfg.lane_core,
                    progress,
                )?,
            ));
            rig::give_switch_an_address(&tb).map_err(PipeBenchError::Run)?;
            tb.measure(200)?;
            lane_testbed = Some(tb.prefix().to_string());
            progress("lane phase: asking the controller for the beacon tunnels");
            let hosts: Vec<usize> = (0..p.procs).map(|q| q % h).collect();
            grants = Some(lane::LaneGrants::start(
                &tb,
                &hosts,
                h,
                cfg.lane_period_us * 1_000,
                cfg.lane_window_us,
                progress,
            )?);
        }
        progress(&format!(
            "[{}/{}] {}: {} processes, {}, {}, beacons every {} µs{}, {:.0} s",
            i + 1,
            pts.len(),
            p.phase,
            p.procs,
            p.mode.name(),
            p.condition.name(),
            p.beacon_us,
            match p.beacons {
                Beacons::Regular => String::new(),
                b => format!(" ({} on lane tunnels)", b.name()),
            },
            p.seconds
        ));
        let o = point::run_point(cfg, &tb, &cores, p, grants.as_ref())?;
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
        if let Some(why) = o.early_end() {
            progress(&format!("    {why}"));
        }
        out.push(o);
    }
    // The tunnels released while their testbed still stands.
    let (lane_tunnels, lane_upcalls) = match grants {
        Some(mut g) => {
            g.drain_upcalls();
            let t = (g.tunnels.clone(), g.upcalls.clone());
            g.stop()?;
            t
        }
        None => (Vec::new(), Vec::new()),
    };
    drop(tb);
    let messages = out.iter().map(|p| p.messages).sum();
    let ordering_violations = out.iter().map(|p| p.ordering_violations).sum();
    let atomicity_violations = out.iter().map(|p| p.atomicity_violations).sum();
    let targets = targets(cfg, &out, floor_hop_p50_ns, messages);
    Ok(PipeReport {
        config: cfg.clone(),
        testbed,
        floor_hop_p50_ns,
        points: out,
        messages,
        ordering_violations,
        atomicity_violations,
        targets,
        lane_testbed,
        lane_tunnels,
        lane_upcalls,
    })
}
