//! `xlane bench fd`: the failure detector experiment of X-Lane §6.4 (Fig. 7)
//! with two baselines on the regular path, and real failures.
//!
//! ## Part 1: accuracy against the threshold
//!
//! The emulated datacenter (4 hosts, 100 Mbit/s ports) runs under saturating
//! best-effort cross traffic into **every** host's switch port and CPU load
//! on the regular cores, with the floor probes on. Every host sends a
//! heartbeat to all other hosts every `T` (1 ms), twice, in the same run:
//!
//! * on the lane ([`Variant::Xlane`]: express class, multicast, lane threads
//!   pinned to the lane core at `SCHED_FIFO`, host measures applied) — the
//!   heartbeat path of X-FD;
//! * on plain UDP ([`Variant::Plain`]: default socket, DSCP 0, ordinary
//!   threads) — the heartbeat path of both baselines.
//!
//! Each receiving thread records every heartbeat (send stamp, kernel receive
//! stamp, the instant the thread holds it). The run lasts until every
//! detector has seen at least `--heartbeats` receptions (hosts × (hosts − 1)
//! per period; the plain path has fewer: its ordinary sender threads miss
//! periods under CPU load and the saturated switch ports drop some, so the
//! run is lengthened in further rounds until it has enough too).
//!
//! Then the arrival sequence of every (receiver, sender) pair and round is
//! replayed through the suspicion models of `xlane-fd` ([`replay`]; each
//! round starts the models afresh, the first heartbeat of a pair in a round
//! only starts its history). They give for every inter-arrival interval the
//! level just before the heartbeat that ended it, so the accuracy at every
//! threshold is exact:
//!
//! | detector | heartbeats | model |
//! |---|---|---|
//! | `x-fd` | lane | [`FixedTimeout`] anchored at the last arrival, as [`xlane_fd::XFd::x_fd`] builds it: suspect after `T + Λ` without a heartbeat |
//! | `plain-timeout` | plain UDP | the same fixed timeout |
//! | `phi-accrual` | plain UDP | [`PhiAccrual`] (Hayashibara et al.; what Cassandra and Akka use), window 1000, σ floor T/10 ([`PhiParams::for_period`]) |
//!
//! The detector's clock is the receiving thread's (`user_rx_ns`): that is
//! when a detector process learns of a heartbeat. The same replay with the
//! kernel's receive stamps is reported beside it (the runner of
//! `xlane fd run` uses those).
//!
//! **Accuracy** follows the paper's Fig. 7: an alive process is wrongly
//! suspected when its heartbeat comes later than the threshold allows, so
//! the accuracy at Λ is the fraction of heartbeats (inter-arrival intervals,
//! each ended by one received heartbeat) during which the detector would not
//! have suspected the sender. Λ excludes T, as in the paper ("we omitted T
//! in the computation of the threshold"). A lost heartbeat makes a longer
//! interval, so the timeout needed to tolerate it grows by T. The paper's
//! own metric — each heartbeat's latency, i.e. the timeout anchored at the
//! sender's send time (the emulated hosts share one clock) — is reported as
//! `send_anchor_min_perfect_threshold_ns`.
//!
//! **Host gaps.** The floor probes of the same run record when the machine
//! took each core away (hypervisor, interrupts). Every emulated host shares
//! this machine's two cores, so one such gap silences several hosts at
//! once. Beside the raw numbers, each detector's smallest perfect Λ is also
//! given outside host gaps, by the strict rule of `bench bounds`
//! ([`crate::fd_gaps`]): at Λ, an interval counts as explained when the gap
//! time recorded inside it, on the cores its path runs on (the lane core
//! for X-FD, the regular cores for plain UDP and phi: the ports are split
//! by CPU), covers its excess over T + Λ; the smallest such Λ keeps whatever part of a silence
//! its gap time does not cover. The intervals above that Λ (each explained)
//! are counted as set aside, and both ratios plain timeout / X-FD, over
//! all intervals and outside host gaps, are reported.
//!
//! **Phi on the same axis.** Phi-accrual's threshold is a φ value, not a
//! time. Its smallest perfect φ* is exact (the highest φ a live peer
//! reached). To place it on the Λ axis, a φ is converted to the timeout it
//! implies under the run's *average* estimates: `Λ(φ) = μ̄ + z(φ)·σ̄ − T`,
//! where `z(φ)` is the standard-normal quantile with `−log10 P(Z > z) = φ`
//! and `μ̄`, `σ̄` are the mean and standard deviation phi estimated, averaged
//! over every interval of the run (over all pairs). This is monotone in φ,
//! so the curve keeps its shape; it is an average, not what phi did at each
//! instant: its timeout moved with its estimates, and the longest timeout it
//! applied at φ* (`max over intervals of μᵢ + z(φ*)·σᵢ − T`) is reported as
//! `timeout_at_min_perfect_max_ns` — that, not the average, bounds its
//! detection time.
//!
//! ## Part 2: real failures
//!
//! Every host runs the real X-FD — `xlane fd run` (the crate's runner, a
//! separate process per host in the host's namespace, on the lane core at
//! `SCHED_FIFO`, multicast heartbeats every T) — with a stand-in application
//! `xlane fd bump` bumping its liveness counter every T/3. Then, `R` times
//! each, on a rotating victim host:
//!
//! * `kill-runner`: `kill -9` of the victim's runner by its PID (then it is
//!   restarted, and the others see it restart);
//! * `link-down`: the victim's link is cut at the switch (its veth peer, the
//!   switch port, is set down, and up again afterwards). Cutting the switch
//!   side keeps the host's routes, as a pulled cable would;
//! * `stop-app`: `SIGSTOP` of the victim's application (its host keeps
//!   sending heartbeats; the counter stops), then `SIGCONT`.
//!
//! The injection instant is taken right before `kill(2)` or the
//! `SIOCSIFFLAGS` request (issued from a thread inside the switch's
//! namespace; the veth pair loses its carrier before the call returns).
//! Each runner publishes its events in the shared alive table; the
//! benchmark follows every table's event ring ([`xlane_fd::AliveTable`]).
//! An injection lasts from that instant until every runner trusts every
//! host again after the failure was undone. The detection time at a host is
//! its first `Suspected` event for the victim during the injection (reason
//! `Silent` for the first two kinds, `Stalled` for the third) minus the
//! injection instant. Every other suspicion counts as a **false
//! suspicion**, except the cut host suspecting its peers while cut (a
//! partition looks the same from both sides; counted apart). The floor
//! probes run in part 2 too, and a false suspicion is put down to a host
//! gap when the lane core (where every runner runs) was away for at least
//! half of the silence `[t − T − Λ, t]` behind it.
//!
//! The runners' Λ is by default `max(2 × X-FD's smallest perfect Λ of part 1
//! (kernel stamps, which the runner uses), 2 × the longest host gap the
//! floor probes saw in part 1, 1 ms)` ([`DEFAULT_FAILURE_LAMBDA_NS`] without
//! part 1): the failure part is meant to show detection without false
//! suspicions, so Λ is set from what this machine showed it needs. The
//! stall threshold is `max(10, ⌈Λ/T⌉ + 2)` periods. Suspicions before every
//! runner first trusts every host are counted apart (start-up).
//!
//! The runners run with `--no-mlock` unless
//! [`FailurePlan::lock_runner_memory`]: `xlane fd run` locks its memory after
//! switching to `SCHED_FIFO` on the lane core, and all emulated hosts share
//! that core, so each (re)start would hold it for tens of ms and every other
//! runner would be suspected.
//!
//! Everything (processes, link state, host measures, namespaces, files) is
//! restored or removed on every path, also on error.

use crate::attribution::GapIndex;
use crate::budget::{LaneCoreBudget, LaneCoreUse};
use crate::fd_gaps::{min_perfect_outside_gaps, OutsideGaps, Shape, Silence};
use crate::flows::{run_flows, FlowPlan, FlowResult, FlowSample, Variant};
use crate::interference::{
    bring_up, switch_drops, BenchError, Cores, Floor, FloorSet, Interference,
};
use crate::table::{fmt_ns, Table};
use serde::Serialize;
use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};
use xlane_fd::model::{phi_of_z, z_for_phi};
use xlane_fd::{
    replay, AliveTable, Anchor, Arrival, Event, EventCursor, EventKind, FixedTimeout, ModelKind,
    PhiAccrual, PhiParams, Reason, ReplaySummary, Status, SuspicionModel,
};
use xlane_host::runtime::{lock_memory, WaitMode};
use xlane_host::socket::realtime_ns;
use xlane_host::tuning::{AppliedTuning, HostTuning, TuningPlan};
use xlane_testbed::{CrossTraffic, HostInfo, Testbed};

/// Detector names in reports.
pub const XFD: &str = "x-fd";
/// The plain-UDP fixed-timeout baseline.
pub const PLAIN_TIMEOUT: &str = "plain-timeout";
/// The plain-UDP phi-accrual baseline.
pub const PHI: &str = "phi-accrual";

/// Heartbeat port of the runners in the failure experiment.
const RUNNER_PORT: u16 = 7400;
/// Their multicast group.
const RUNNER_GROUP: Ipv4Addr = Ipv4Addr::new(239, 77, 3, 1);
/// `SCHED_FIFO` priority of the runners (the lane receivers' level).
const RUNNER_FIFO: i32 = crate::flows::LANE_PRIORITY - 1;
/// `SCHED_FIFO` priority of the stand-in applications: above the CPU load
/// and the cross-traffic generators, below the lane.
const APP_FIFO: i32 = 50;
/// False suspicions listed in the report at most.
pub const MAX_FALSE_LISTED: usize = 50;
/// The runners' Λ in part 2 when part 1 did not run and none was given.
pub const DEFAULT_FAILURE_LAMBDA_NS: u64 = 10_000_000;
/// Event slots in each runner's table.
const RUNNER_EVENTS: usize = 65_536;

/// The lane heartbeat flow of host `h`.
fn lane_group(h: usize) -> SocketAddrV4 {
    SocketAddrV4::new(Ipv4Addr::new(239, 77, 1, (h + 1) as u8), 7200 + h as u16)
}

/// The plain heartbeat flow of host `h`.
fn plain_group(h: usize) -> SocketAddrV4 {
    SocketAddrV4::new(Ipv4Addr::new(239, 77, 2, (h + 1) as u8), 7300 + h as u16)
}

// ------------------------------------------------------------------ config

/// A kind of real failure.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FailureKind {
    /// `kill -9` of the victim's X-FD runner (by PID), restarted afterwards.
    KillRunner,
    /// The victim's link cut at the switch port, then restored.
    LinkDown,
    /// `SIGSTOP` of the victim's application, then `SIGCONT`.
    StopApp,
}

impl FailureKind {
    /// All three, in report order.
    pub const ALL: [FailureKind; 3] = [
        FailureKind::KillRunner,
        FailureKind::LinkDown,
        FailureKind::StopApp,
    ];

    /// Name in reports.
    pub fn name(self) -> &'static str {
        match self {
            FailureKind::KillRunner => "kill-runner",
            FailureKind::LinkDown => "link-down",
            FailureKind::StopApp => "stop-app",
        }
    }

    /// What it does, for the table.
    pub fn describe(self) -> &'static str {
        match self {
            FailureKind::KillRunner => "kill -9 of the X-FD runner",
            FailureKind::LinkDown => "link cut at the switch port",
            FailureKind::StopApp => "SIGSTOP of the application",
        }
    }

    /// The reason the others should suspect the victim for.
    pub fn expected_reason(self) -> Reason {
        match self {
            FailureKind::KillRunner | FailureKind::LinkDown => Reason::Silent,
            FailureKind::StopApp => Reason::Stalled,
        }
    }
}

/// The failure experiment's settings.
#[derive(Clone, Debug)]
pub struct FailurePlan {
    /// The `xlane` binary (runs `xlane fd run` and `xlane fd bump`).
    pub xlane_bin: PathBuf,
    /// Injections per kind.
    pub repetitions: usize,
    /// The runners' Λ, ns (`None`: derived, see the module docs).
    pub lambda_ns: Option<u64>,
    /// Stall threshold in periods (`None`: derived).
    pub stall_periods: Option<u32>,
    /// Which failures.
    pub kinds: Vec<FailureKind>,
    /// Let the runners lock their memory (`mlockall`). Off by default: the
    /// runner locks its memory after it has switched to `SCHED_FIFO` on the
    /// lane core, and locking a whole (debug) binary there holds the core
    /// for tens of ms, which every other runner on it sees as silence.
    pub lock_runner_memory: bool,
}

/// What to run.
#[derive(Clone, Debug)]
pub struct FdBenchConfig {
    /// Emulated hosts (each sends to all others).
    pub hosts: usize,
    /// Link rate of every port, bits/s.
    pub link_rate_bps: u64,
    /// Best-effort queue length per switch port, packets.
    pub best_effort_queue_pkts: u32,
    /// Heartbeat period T, ns.
    pub period_ns: u64,
    /// Heartbeat receptions each detector needs at least (part 1).
    pub heartbeats: u64,
    /// Rounds at most to reach them.
    pub max_rounds: usize,
    /// Saturating best-effort cross traffic.
    pub cross_traffic: bool,
    /// CPU load on every core but the lane core.
    pub cpu_load: bool,
    /// The lane core.
    pub lane_core: usize,
    /// Apply the host measures of the lane core.
    pub tuning: bool,
    /// Run part 1 (accuracy against the threshold).
    pub accuracy: bool,
    /// Run part 2 (real failures) with these settings.
    pub failures: Option<FailurePlan>,
    /// Write the plot here.
    pub plot_dir: Option<PathBuf>,
}

impl Default for FdBenchConfig {
    fn default() -> Self {
        FdBenchConfig {
            hosts: 4,
            link_rate_bps: 100_000_000,
            best_effort_queue_pkts: 1000,
            period_ns: 1_000_000,
            heartbeats: 1_000_000,
            max_rounds: 4,
            cross_traffic: true,
            cpu_load: true,
            lane_core: Cores::online().saturating_sub(1),
            tuning: true,
            accuracy: true,
            failures: None,
            plot_dir: None,
        }
    }
}

// ------------------------------------------------------------------ errors

/// Why `xlane bench fd` failed.
#[derive(Debug, thiserror::Error)]
pub enum FdBenchError {
    /// The testbed, tuning, flows, floor probe or output failed.
    #[error("{0}")]
    Bench(#[from] BenchError),
    /// A process could not be started.
    #[error("cannot start {what}: {source}")]
    Spawn {
        /// What.
        what: String,
        /// Cause.
        source: std::io::Error,
    },
    /// A file of the failure experiment could not be made.
    #[error("{path}: {source}")]
    File {
        /// The file or directory.
        path: PathBuf,
        /// Cause.
        source: std::io::Error,
    },
    /// A runner or application did not come up.
    #[error("host {host}: {detail}")]
    NotReady {
        /// Host index.
        host: usize,
        /// What was seen.
        detail: String,
    },
    /// The detectors did not recover after a failure was undone.
    #[error("{kind} on host {host}: not recovered: {detail}")]
    NotRecovered {
        /// Failure kind.
        kind: &'static str,
        /// Victim.
        host: usize,
        /// What was seen.
        detail: String,
    },
    /// A signal could not be sent.
    #[error("signal {signal} to pid {pid}: {source}")]
    Signal {
        /// Signal name.
        signal: &'static str,
        /// Target.
        pid: u32,
        /// Cause.
        source: std::io::Error,
    },
    /// Setting a link down or up failed.
    #[error("link {port}: {detail}")]
    Link {
        /// The switch port.
        port: String,
        /// What went wrong.
        detail: String,
    },
    /// The plot could not be written.
    #[error("plot: {0}")]
    Plot(String),
}

// ------------------------------------------------------------------ report

/// One detector's result (part 1).
#[derive(Clone, Debug, Serialize)]
pub struct DetectorReport {
    /// `x-fd`, `plain-timeout` or `phi-accrual`.
    pub name: String,
    /// Heartbeat path: `lane` or `plain-udp`.
    pub path: String,
    /// The suspicion model.
    pub model: String,
    /// Unit of the model's own threshold: `ns` or `phi`.
    pub threshold_unit: String,
    /// Heartbeats received (replayed), every pair.
    pub heartbeats: u64,
    /// Heartbeats sent to this detector (frames sent × receivers).
    pub heartbeats_sent: u64,
    /// Inter-arrival intervals judged (heartbeats − pairs × rounds).
    pub intervals: u64,
    /// The smallest Λ (ns, T excluded) with 100 % accuracy; for phi, the
    /// Λ-equivalent of its smallest perfect φ (see the module docs).
    pub min_perfect_threshold_ns: Option<i64>,
    /// Accuracy against Λ: `[threshold_ns, accuracy]`, ascending in Λ,
    /// including `min_perfect_threshold_ns` (accuracy 1.0 there).
    pub accuracy: Vec<(i64, f64)>,
    /// Smallest Λ for an accuracy: `[accuracy, threshold_ns]` for 0.99,
    /// 0.999, 0.9999, 0.99999.
    pub threshold_for_accuracy: Vec<(f64, i64)>,
    /// Its accuracy at X-FD's smallest perfect Λ.
    pub accuracy_at_xfd_threshold: Option<f64>,
    /// `min_perfect_threshold_ns` with the kernel's receive stamps as the
    /// detector's clock.
    pub kernel_min_perfect_threshold_ns: Option<i64>,
    /// Timeouts only: the smallest perfect Λ of the paper's metric (the
    /// timeout counted from the sender's send time: each heartbeat's
    /// latency plus its sender's lateness).
    pub send_anchor_min_perfect_threshold_ns: Option<i64>,
    /// The smallest Λ at which every interval is either within Λ or
    /// explained by host gaps: the gap time the floor probes recorded
    /// inside it (on its path's cores) covers its excess over T + Λ (the
    /// strict rule of [`crate::fd_gaps`], as `bench bounds` applies it to
    /// packets). What the heartbeat path itself needs, apart from the time
    /// the machine took away. Intervals at or below 100 µs (phi: φ 3) are
    /// kept whole, unchecked, so it is never below their highest level.
    pub min_perfect_threshold_outside_host_gaps_ns: Option<i64>,
    /// Intervals set aside for that: above that Λ, each explained by host
    /// gaps (out of `intervals`).
    pub intervals_in_host_gaps: u64,
    /// `intervals_in_host_gaps / intervals`.
    pub intervals_in_host_gaps_fraction: f64,
    /// Phi only: φ details.
    pub phi: Option<PhiDetail>,
}

/// Phi-accrual's own numbers.
#[derive(Clone, Debug, Serialize)]
pub struct PhiDetail {
    /// The smallest perfect φ (exact).
    pub min_perfect_phi: f64,
    /// Accuracy against φ: `[phi, accuracy]`.
    pub accuracy_phi: Vec<(f64, f64)>,
    /// μ̄: the mean inter-arrival time phi estimated, averaged over intervals, ns.
    pub mean_estimate_ns: f64,
    /// σ̄: its standard deviation estimate (floored), averaged, ns.
    pub std_estimate_ns: f64,
    /// The timeout (− T) φ* implied, averaged over intervals: the x position.
    pub timeout_at_min_perfect_mean_ns: f64,
    /// The longest timeout (− T) φ* implied at any interval.
    pub timeout_at_min_perfect_max_ns: f64,
    /// Window of inter-arrival times kept.
    pub window: usize,
    /// σ floor, ns.
    pub min_std_ns: f64,
    /// How φ was put on the Λ axis.
    pub conversion: String,
}

/// One round of part 1.
#[derive(Clone, Debug, Serialize)]
pub struct RoundReport {
    /// Length, ns.
    pub duration_ns: u64,
    /// Lane heartbeats received.
    pub lane_received: u64,
    /// Plain heartbeats received.
    pub plain_received: u64,
    /// Lane heartbeats sent × receivers.
    pub lane_sent: u64,
    /// Plain heartbeats sent × receivers.
    pub plain_sent: u64,
    /// Worst sender lateness on the lane, ns.
    pub lane_sender_late_max_ns: u64,
    /// Worst sender lateness on plain UDP, ns.
    pub plain_sender_late_max_ns: u64,
}

/// One failure kind's result (part 2).
#[derive(Clone, Debug, Serialize)]
pub struct FailureReport {
    /// `kill-runner`, `link-down` or `stop-app`.
    pub kind: FailureKind,
    /// What it does.
    pub description: String,
    /// Failures injected.
    pub injections: usize,
    /// Detections expected: injections × live peers.
    pub expected_detections: usize,
    /// Detections seen.
    pub detected: usize,
    /// Every detection time, ns (ascending).
    pub detection_ns: Vec<u64>,
    /// Shortest detection time, ns.
    pub min_ns: Option<u64>,
    /// Median, ns (nearest rank).
    pub p50_ns: Option<u64>,
    /// Longest, ns.
    pub max_ns: Option<u64>,
    /// Suspicions of live peers during these injections.
    pub false_suspicions: u64,
    /// Link cuts: the cut host's suspicions of its (unreachable) peers.
    pub partition_suspicions: u64,
}

/// One false suspicion (part 2), for diagnosis.
#[derive(Clone, Debug, Serialize)]
pub struct FalseSuspicion {
    /// The suspecting host.
    pub observer: usize,
    /// The suspected host (`None`: an address not in the testbed).
    pub peer: Option<usize>,
    /// Why.
    pub reason: Reason,
    /// The injection it fell into (`None`: between injections).
    pub during: Option<FailureKind>,
    /// The injection's victim.
    pub victim: Option<usize>,
    /// Since the origin (every runner first trusted every host), ns.
    pub at_ns: u64,
    /// The lane core was away for at least half of the silence behind it.
    pub in_host_gap: bool,
}

/// Settings and totals of part 2.
#[derive(Clone, Debug, Serialize)]
pub struct FailureRun {
    /// Heartbeat period, ns.
    pub period_ns: u64,
    /// The runners' Λ, ns.
    pub lambda_ns: u64,
    /// Where Λ came from.
    pub lambda_source: String,
    /// Stall threshold, periods.
    pub stall_periods: u32,
    /// Injections per kind.
    pub repetitions: usize,
    /// Suspicions while no failure was injected (all false).
    pub false_suspicions_between: u64,
    /// Suspicions of live peers, in total.
    pub false_suspicions_total: u64,
    /// False suspicions during which the lane core was away (host gaps)
    /// for at least half of the silence that caused them.
    pub false_suspicions_in_host_gaps: u64,
    /// The machine's floor during part 2.
    pub floor: Floor,
    /// Every injection, in order.
    pub injections: Vec<Window>,
    /// When every runner first trusted every host (the run's origin),
    /// `CLOCK_REALTIME` ns.
    pub origin_ns: u64,
    /// Suspicions while the runners were starting, before every runner
    /// trusted every host (not counted as false suspicions).
    pub startup_suspicions: u64,
    /// The first false suspicions (at most [`MAX_FALSE_LISTED`]).
    pub false_suspicion_samples: Vec<FalseSuspicion>,
    /// Events overwritten before the benchmark read them.
    pub events_missed: u64,
    /// Runner processes started (restarts included).
    pub runners_started: usize,
    /// Length of part 2, ns.
    pub duration_ns: u64,
}

/// Parameters echoed into the report.
#[derive(Clone, Debug, Serialize)]
pub struct FdRunParams {
    /// Hosts.
    pub hosts: usize,
    /// Link rate, bits/s.
    pub link_rate_bps: u64,
    /// Heartbeat period T, ns.
    pub period_ns: u64,
    /// Heartbeats asked for, per detector.
    pub heartbeats_requested: u64,
    /// Lane core.
    pub lane_core: usize,
    /// Cross traffic on.
    pub cross_traffic: bool,
    /// CPU load on.
    pub cpu_load: bool,
}

/// The whole report.
#[derive(Clone, Debug, Serialize)]
pub struct FdBenchReport {
    /// Part 1, one entry per detector (empty without part 1).
    pub detectors: Vec<DetectorReport>,
    /// plain-timeout's smallest perfect Λ / X-FD's.
    pub ratio_plain_over_xfd: Option<f64>,
    /// phi-accrual's (Λ-equivalent) / X-FD's.
    pub ratio_phi_over_xfd: Option<f64>,
    /// plain-timeout / X-FD of `min_perfect_threshold_outside_host_gaps_ns`
    /// (intervals explained by host gaps set aside, [`crate::fd_gaps::RULE`]).
    pub ratio_plain_over_xfd_outside_host_gaps: Option<f64>,
    /// phi-accrual / X-FD of the same.
    pub ratio_phi_over_xfd_outside_host_gaps: Option<f64>,
    /// How intervals were set aside for the `outside_host_gaps` numbers.
    pub host_gap_rule: String,
    /// The rounds of part 1.
    pub rounds: Vec<RoundReport>,
    /// The machine's floor during part 1 (during part 2 without part 1).
    pub floor: Floor,
    /// The lane core's budget during part 1's lane flows (none without part 1).
    pub lane_core: Option<LaneCoreBudget>,
    /// Part 2, one entry per kind (empty without part 2).
    pub failures: Vec<FailureReport>,
    /// Part 2's settings and totals.
    pub failure_run: Option<FailureRun>,
    /// Host measures applied.
    pub host_measures: Vec<String>,
    /// Cross traffic achieved, bits/s per flow.
    pub cross_traffic_bps: Vec<u64>,
    /// Best-effort drops at the switch during the whole run.
    pub switch_best_effort_drops: u64,
    /// Plot files written.
    pub plots: Vec<String>,
    /// Parameters.
    pub params: FdRunParams,
}

// ------------------------------------------------------------------ run

/// Runs the benchmark; `progress` gets one line per step.
pub fn run(
    cfg: &FdBenchConfig,
    progress: &mut dyn FnMut(&str),
) -> Result<FdBenchReport, FdBenchError> {
    if !(2..=64).contains(&cfg.hosts) {
        return Err(BenchError::Config("hosts must be 2..=64".into()).into());
    }
    if cfg.period_ns < 100_000 {
        return Err(BenchError::Config("period below 100 µs".into()).into());
    }
    if !cfg.accuracy && cfg.failures.is_none() {
        return Err(BenchError::Config("nothing to run".into()).into());
    }
    if let Some(f) = &cfg.failures {
        if f.repetitions == 0 || f.kinds.is_empty() {
            return Err(BenchError::Config("failures: no injection asked for".into()).into());
        }
    }
    let cores = Cores::new(Cores::online(), cfg.lane_core).map_err(BenchError::Config)?;
    let _off_lane = cores.keep_off_lane_core()?;
    let tb = bring_up(
        cfg.hosts,
        cfg.link_rate_bps,
        None,
        cfg.best_effort_queue_pkts,
        cores.lane,
        progress,
    )
    .map_err(BenchError::from)?;
    let tuning: Option<AppliedTuning> = if cfg.tuning {
        Some(HostTuning::apply(&TuningPlan::all(cfg.lane_core)).map_err(BenchError::from)?)
    } else {
        None
    };
    let host_measures: Vec<String> = tuning.as_ref().map(|t| t.summary()).unwrap_or_default();
    for m in &host_measures {
        progress(&format!("host measure: {m}"));
    }
    let _ = lock_memory();
    let result = run_parts(cfg, &tb, &cores, host_measures, progress);
    if let Some(t) = tuning {
        let rep = t.restore();
        if rep.is_clean() {
            progress(&format!(
                "host measures restored ({} settings)",
                rep.entries.len()
            ));
        } else {
            progress(&format!("could not restore every host measure: {rep:?}"));
        }
    }
    progress(&format!("tearing down testbed {}", tb.prefix()));
    drop(tb);
    result
}

fn run_parts(
    cfg: &FdBenchConfig,
    tb: &Testbed,
    cores: &Cores,
    host_measures: Vec<String>,
    progress: &mut dyn FnMut(&str),
) -> Result<FdBenchReport, FdBenchError> {
    let drops_before = switch_drops(tb);
    let interference = Interference::start(tb, cores, cfg.cross_traffic, cfg.cpu_load)
        .map_err(BenchError::from)?;
    // Interference floods the ports of hosts 1..n; every host receives
    // heartbeats here, so host 0's port gets a flood too.
    let mut extra = Vec::new();
    if cfg.cross_traffic && cfg.hosts > 1 {
        match tb.start_cross_traffic(CrossTraffic::udp(1, 0).cpus(cores.regular_or_all())) {
            Ok(h) => extra.push(h),
            Err(e) => {
                let _ = interference.stop();
                return Err(BenchError::from(e).into());
            }
        }
    }
    if cfg.cross_traffic {
        progress(&format!(
            "cross traffic: {} saturating best-effort flows, into every host's port",
            interference.flows() + extra.len()
        ));
    }
    if cfg.cpu_load {
        progress(&format!("CPU load on cores {:?}", cores.regular));
    }
    let mut floor = None;
    let mut acc = None;
    let mut result: Result<(), FdBenchError> = Ok(());
    if cfg.accuracy {
        match FloorSet::start(cores, accuracy_run_bound_ns(cfg)) {
            Ok(probes) => match accuracy_part(cfg, tb, cores, probes, progress) {
                Ok(a) => {
                    floor = Some(a.floor.clone());
                    acc = Some(a);
                }
                Err(e) => result = Err(e),
            },
            Err(e) => result = Err(BenchError::from(e).into()),
        }
    }
    let mut failures = None;
    if result.is_ok() {
        if let Some(plan) = &cfg.failures {
            let measured = acc.as_ref().and_then(|a: &AccuracyOutcome| {
                let gap = floor.as_ref().map_or(0, |f: &Floor| {
                    f.cores.iter().map(|c| c.max_gap_ns).max().unwrap_or(0)
                });
                a.xfd_kernel_lambda.map(|l| (l, gap))
            });
            let lambda = failure_lambda(plan, measured);
            let run_ns = failure_seconds_bound(plan, lambda.0, cfg.period_ns) * 1_000_000_000;
            match FloorSet::start(cores, run_ns) {
                Ok(probes) => match failure_part(cfg, plan, tb, cores, probes, lambda, progress) {
                    Ok(f) => failures = Some(f),
                    Err(e) => result = Err(e),
                },
                Err(e) => result = Err(BenchError::from(e).into()),
            }
        }
    }
    let mut cross_bps = interference.stop();
    for h in extra {
        cross_bps.push(h.stop().received_rate_bps as u64);
    }
    let drops = switch_drops(tb).saturating_sub(drops_before);
    result?;
    let floor = match (floor, &failures) {
        (Some(f), _) => f,
        (None, Some((_, run))) => run.floor.clone(),
        (None, None) => return Err(BenchError::Config("no floor measured".into()).into()),
    };
    let (detectors, curves, rounds, lane_use) = match acc {
        Some(a) => (a.detectors, a.curves, a.rounds, Some(a.lane_use)),
        None => (Vec::new(), Vec::new(), Vec::new(), None),
    };
    let lane_core = lane_use.map(|u| u.budget(floor.stolen_fraction));
    let min_of = |name: &str| {
        detectors
            .iter()
            .find(|d| d.name == name)
            .and_then(|d| d.min_perfect_threshold_ns)
    };
    let ratio = |name: &str| match (min_of(name), min_of(XFD)) {
        (Some(b), Some(x)) if x > 0 => Some(b as f64 / x as f64),
        _ => None,
    };
    let outside = |name: &str| {
        detectors
            .iter()
            .find(|d| d.name == name)
            .and_then(|d| d.min_perfect_threshold_outside_host_gaps_ns)
    };
    let ratio_outside = |name: &str| match (outside(name), outside(XFD)) {
        (Some(b), Some(x)) if x > 0 => Some(b as f64 / x as f64),
        _ => None,
    };
    let (failures, failure_run) = match failures {
        Some((f, r)) => (f, Some(r)),
        None => (Vec::new(), None),
    };
    let mut report = FdBenchReport {
        ratio_plain_over_xfd: ratio(PLAIN_TIMEOUT),
        ratio_phi_over_xfd: ratio(PHI),
        ratio_plain_over_xfd_outside_host_gaps: ratio_outside(PLAIN_TIMEOUT),
        ratio_phi_over_xfd_outside_host_gaps: ratio_outside(PHI),
        host_gap_rule: crate::fd_gaps::RULE.into(),
        detectors,
        rounds,
        floor,
        lane_core,
        failures,
        failure_run,
        host_measures,
        cross_traffic_bps: cross_bps,
        switch_best_effort_drops: drops,
        plots: Vec::new(),
        params: FdRunParams {
            hosts: cfg.hosts,
            link_rate_bps: cfg.link_rate_bps,
            period_ns: cfg.period_ns,
            heartbeats_requested: cfg.heartbeats,
            lane_core: cfg.lane_core,
            cross_traffic: cfg.cross_traffic,
            cpu_load: cfg.cpu_load,
        },
    };
    if let Some(dir) = &cfg.plot_dir {
        if !report.detectors.is_empty() {
            std::fs::create_dir_all(dir).map_err(|source| BenchError::Output {
                path: dir.display().to_string(),
                source,
            })?;
            let files = plot::write(&report, &curves, &dir.join("fd-accuracy"))
                .map_err(FdBenchError::Plot)?;
            report.plots = files.iter().map(|p| p.display().to_string()).collect();
        }
    }
    Ok(report)
}

// ------------------------------------------------------------------ part 1

/// Levels of one detector accumulated over pairs and rounds.
#[derive(Default)]
struct Levels {
    levels: Vec<f64>,
    /// Phi only: (μ, σ) before each interval's end.
    moments: Vec<(f64, f64)>,
    arrivals: u64,
    /// Silences to check against host gaps: every interval whose level is
    /// above the tracking threshold.
    tail: Vec<Silence>,
    /// The highest level of the intervals not in `tail` (kept whole).
    rest_max: Option<f64>,
}

/// Timeout levels (ns) above which an interval is checked against host gaps.
const TRACK_TIMEOUT_NS: f64 = 100_000.0;
/// Phi levels above which an interval is checked against host gaps.
const TRACK_PHI: f64 = 3.0;

impl Levels {
    fn track(&mut self, s: Silence, above: f64) {
        if s.level > above {
            self.tail.push(s);
        } else {
            self.rest_max = Some(self.rest_max.map_or(s.level, |m| m.max(s.level)));
        }
    }

    /// The strict host-gap rule over the tracked silences ([`crate::fd_gaps`]).
    fn outside_gaps(&self, gaps: &GapIndex) -> OutsideGaps {
        min_perfect_outside_gaps(self.rest_max, &self.tail, gaps)
    }

    fn add(&mut self, s: ReplaySummary) {
        self.arrivals += s.arrivals;
        self.levels.extend(s.levels);
    }

    fn summary(mut self, kind: ModelKind) -> (ReplaySummary, Vec<(f64, f64)>) {
        self.levels.sort_by(f64::total_cmp);
        (
            ReplaySummary {
                kind,
                arrivals: self.arrivals,
                levels: self.levels,
            },
            self.moments,
        )
    }
}

/// X-FD's timeout through one arrival sequence (ascending), keeping the
/// silences above [`TRACK_TIMEOUT_NS`] for the host-gap view.
fn replay_timeout_tracked(period_ns: u64, arrivals: &[Arrival], into: &mut Levels) {
    let mut m = FixedTimeout::new(period_ns, Anchor::Arrival);
    let mut prev: Option<u64> = None;
    for a in arrivals {
        if let (Some(l), Some(p)) = (m.on_arrival(*a), prev) {
            into.levels.push(l);
            into.track(
                Silence {
                    from_ns: p,
                    to_ns: a.rx_ns,
                    level: l,
                    shape: Shape::Timeout,
                },
                TRACK_TIMEOUT_NS,
            );
        }
        prev = Some(prev.map_or(a.rx_ns, |p| p.max(a.rx_ns)));
    }
    into.arrivals += arrivals.len() as u64;
}

/// Phi through one arrival sequence (ascending), keeping its estimates
/// (and, with `track`, the silences above [`TRACK_PHI`]).
fn replay_phi(
    params: PhiParams,
    arrivals: &[Arrival],
    into: &mut Levels,
    track: bool,
) -> Result<(), BenchError> {
    let mut m = PhiAccrual::new(params).map_err(|e| BenchError::Config(e.to_string()))?;
    let mut prev: Option<u64> = None;
    for a in arrivals {
        let before = m.mean_std();
        if let Some(l) = m.on_arrival(*a) {
            let l = if l.is_nan() { f64::INFINITY } else { l };
            into.levels.push(l);
            into.moments.push(before);
            if let (true, Some(p)) = (track, prev) {
                let shape = Shape::Phi {
                    mean_ns: before.0,
                    std_ns: before.1,
                };
                into.track(
                    Silence {
                        from_ns: p,
                        to_ns: a.rx_ns,
                        level: l,
                        shape,
                    },
                    TRACK_PHI,
                );
            }
        }
        prev = Some(prev.map_or(a.rx_ns, |p| p.max(a.rx_ns)));
    }
    into.arrivals += arrivals.len() as u64;
    Ok(())
}

/// Every detector's levels, user and kernel clocks.
struct Accumulators {
    xfd: Levels,
    xfd_kernel: Levels,
    xfd_send: Levels,
    plain: Levels,
    plain_kernel: Levels,
    plain_send: Levels,
    phi: Levels,
    phi_kernel: Levels,
    lane_sent: u64,
    plain_sent: u64,
}

/// Arrival sequences per (receiver, sender) pair of a set of flows.
fn pairs(flows: &[FlowResult], receivers: &[Vec<usize>]) -> Vec<Vec<FlowSample>> {
    let mut out = Vec::new();
    for (fi, f) in flows.iter().enumerate() {
        let mut by_rx: BTreeMap<usize, Vec<FlowSample>> = BTreeMap::new();
        for s in &f.samples {
            let host = receivers[fi]
                .get(s.receiver as usize)
                .copied()
                .unwrap_or(usize::MAX);
            by_rx.entry(host).or_default().push(*s);
        }
        out.extend(by_rx.into_values());
    }
    out
}

fn arrivals(samples: &mut [FlowSample], kernel: bool) -> Vec<Arrival> {
    if kernel {
        samples.sort_by_key(|s| s.sample.kernel_rx_ns);
    } else {
        samples.sort_by_key(|s| s.sample.user_rx_ns);
    }
    samples
        .iter()
        .map(|s| Arrival {
            rx_ns: if kernel {
                s.sample.kernel_rx_ns
            } else {
                s.sample.user_rx_ns
            },
            send_ns: Some(s.sample.send_ns),
        })
        .collect()
}

impl Accumulators {
    fn new() -> Self {
        Accumulators {
            xfd: Levels::default(),
            xfd_kernel: Levels::default(),
            xfd_send: Levels::default(),
            plain: Levels::default(),
            plain_kernel: Levels::default(),
            plain_send: Levels::default(),
            phi: Levels::default(),
            phi_kernel: Levels::default(),
            lane_sent: 0,
            plain_sent: 0,
        }
    }

    fn add_round(
        &mut self,
        period_ns: u64,
        lane: Vec<Vec<FlowSample>>,
        plain: Vec<Vec<FlowSample>>,
    ) -> Result<(), BenchError> {
        let timeout = |anchor| FixedTimeout::new(period_ns, anchor);
        for mut p in lane {
            let user = arrivals(&mut p, false);
            replay_timeout_tracked(period_ns, &user, &mut self.xfd);
            self.xfd_send
                .add(replay(&mut timeout(Anchor::SendTime), user));
            let kernel = arrivals(&mut p, true);
            self.xfd_kernel
                .add(replay(&mut timeout(Anchor::Arrival), kernel));
        }
        let params = PhiParams::for_period(period_ns);
        for mut p in plain {
            let user = arrivals(&mut p, false);
            replay_timeout_tracked(period_ns, &user, &mut self.plain);
            self.plain_send
                .add(replay(&mut timeout(Anchor::SendTime), user.iter().copied()));
            replay_phi(params, &user, &mut self.phi, true)?;
            let kernel = arrivals(&mut p, true);
            self.plain_kernel.add(replay(
                &mut timeout(Anchor::Arrival),
                kernel.iter().copied(),
            ));
            replay_phi(params, &kernel, &mut self.phi_kernel, false)?;
        }
        Ok(())
    }
}

struct AccuracyOutcome {
    detectors: Vec<DetectorReport>,
    /// The floor during part 1.
    floor: Floor,
    /// Exact accuracy staircases for the plot, in `detectors` order.
    curves: Vec<Vec<(f64, f64)>>,
    rounds: Vec<RoundReport>,
    /// The lane core's use over the rounds.
    lane_use: LaneCoreUse,
    /// X-FD's smallest perfect Λ on kernel stamps (what the runner sees).
    xfd_kernel_lambda: Option<i64>,
}

/// Part 1's expected length, ns: each of its rounds as long as the first
/// (every heartbeat needed at the nominal rate), plus leads. Rounds that
/// run longer (a path that lost many) report gaps they could not keep.
fn accuracy_run_bound_ns(cfg: &FdBenchConfig) -> u64 {
    let first =
        round_seconds(cfg.heartbeats.max(1) as f64 / heartbeat_rate(cfg.hosts, cfg.period_ns));
    ((first + 5.0) * cfg.max_rounds.max(1) as f64 * 1e9) as u64
}

/// Heartbeats per second each detector receives when every one of `hosts`
/// hosts heartbeats to all the others every `period_ns`.
fn heartbeat_rate(hosts: usize, period_ns: u64) -> f64 {
    (hosts * hosts.saturating_sub(1)) as f64 * 1e9 / period_ns.max(1) as f64
}

/// A part-1 round's length for `seconds` of heartbeats at the expected
/// rate: 3 % over, half a second of lead, between 1 s and an hour.
fn round_seconds(seconds: f64) -> f64 {
    (seconds * 1.03 + 0.5).clamp(1.0, 3600.0)
}

fn accuracy_part(
    cfg: &FdBenchConfig,
    tb: &Testbed,
    cores: &Cores,
    probes: FloorSet,
    progress: &mut dyn FnMut(&str),
) -> Result<AccuracyOutcome, FdBenchError> {
    let hosts = tb.hosts();
    let n = hosts.len();
    let nominal_rate = heartbeat_rate(n, cfg.period_ns);
    let need = cfg.heartbeats.max(1);
    progress(&format!(
        "part 1: every host heartbeats to the {} others every {} on the lane and on plain UDP: {} receptions per detector per period, {:.0}/s; {} heartbeats per detector take {:.0} s without loss (the plain path loses some at the saturated ports: further rounds make up for them)",
        n - 1,
        fmt_ns(cfg.period_ns),
        n * (n - 1),
        nominal_rate,
        need,
        need as f64 / nominal_rate
    ));
    let mut acc = Accumulators::new();
    let mut lane_use = LaneCoreUse::default();
    let mut rounds = Vec::new();
    let mut lane_rate = nominal_rate;
    let mut plain_rate = nominal_rate;
    for round in 0..cfg.max_rounds.max(1) {
        let lane_need = need.saturating_sub(acc.xfd.arrivals);
        let plain_need = need.saturating_sub(acc.plain.arrivals);
        if lane_need == 0 && plain_need == 0 {
            break;
        }
        let floor_rate = nominal_rate * 0.02;
        let secs = round_seconds(
            (lane_need as f64 / lane_rate.max(floor_rate))
                .max(plain_need as f64 / plain_rate.max(floor_rate)),
        );
        let duration_ns = (secs * 1e9) as u64;
        progress(&format!(
            "round {}: running {:.1} s (lane needs {} more heartbeats, plain {})",
            round + 1,
            secs,
            lane_need,
            plain_need
        ));
        // The first heartbeat 1 s after the threads start: creating the
        // flows' threads (their stacks populated under `mlockall`) is over
        // before any heartbeat is measured.
        let start_ns = realtime_ns() + ROUND_LEAD_NS;
        let until_ns = start_ns + duration_ns;
        let plan = |variant: Variant, h: usize, offset: u64| {
            let (name, tunnel, group) = match variant {
                Variant::Xlane => (format!("lane-h{h}"), 10 + h as u32, lane_group(h)),
                _ => (format!("plain-h{h}"), 100 + h as u32, plain_group(h)),
            };
            FlowPlan {
                variant,
                name,
                tunnel,
                group,
                dscp: None,
                period_ns: cfg.period_ns,
                message_len: xlane_fd::payload::PAYLOAD_LEN,
                lane_core: cfg.lane_core,
                regular_core: cores.regular.first().copied(),
                lane_mode: WaitMode::Interrupt,
                sender: hosts[h].clone(),
                receivers: hosts.iter().filter(|o| o.index != h).cloned().collect(),
                first_slot_ns: start_ns + offset,
                until_ns,
                grace_ns: 300_000_000,
                qjump: None,
                mac: None,
            }
        };
        let step = cfg.period_ns / n as u64;
        let mut plans = Vec::new();
        for h in 0..n {
            plans.push(plan(Variant::Xlane, h, h as u64 * step));
        }
        for h in 0..n {
            plans.push(plan(Variant::Plain, h, h as u64 * step + step / 2));
        }
        let receivers: Vec<Vec<usize>> = plans
            .iter()
            .map(|p| p.receivers.iter().map(|r| r.index).collect())
            .collect();
        let stop = AtomicBool::new(false);
        let run = run_flows(&plans, &stop).map_err(BenchError::from)?;
        lane_use.add(&LaneCoreUse::of_run(&run, cfg.lane_core));
        let flows = run.flows;
        let (lane, plain) = flows.split_at(n);
        let count = |f: &[FlowResult]| f.iter().map(|x| x.samples.len() as u64).sum::<u64>();
        let sent = |f: &[FlowResult]| f.iter().map(|x| x.sent.frames * x.receivers).sum::<u64>();
        let late = |f: &[FlowResult]| f.iter().map(|x| x.sent.late_max_ns).max().unwrap_or(0);
        let r = RoundReport {
            duration_ns,
            lane_received: count(lane),
            plain_received: count(plain),
            lane_sent: sent(lane),
            plain_sent: sent(plain),
            lane_sender_late_max_ns: late(lane),
            plain_sender_late_max_ns: late(plain),
        };
        progress(&format!(
            "round {}: lane {} of {} heartbeats received, plain {} of {}",
            round + 1,
            r.lane_received,
            r.lane_sent,
            r.plain_received,
            r.plain_sent
        ));
        lane_rate = r.lane_received as f64 / secs;
        plain_rate = r.plain_received as f64 / secs;
        acc.lane_sent += r.lane_sent;
        acc.plain_sent += r.plain_sent;
        rounds.push(r);
        let lane_pairs = pairs(lane, &receivers[..n]);
        let plain_pairs = pairs(plain, &receivers[n..]);
        drop(flows);
        acc.add_round(cfg.period_ns, lane_pairs, plain_pairs)?;
    }
    if acc.xfd.arrivals < need || acc.plain.arrivals < need {
        progress(&format!(
            "warning: after {} rounds the lane has {} and plain UDP {} heartbeats, fewer than the {} asked for",
            rounds.len(),
            acc.xfd.arrivals,
            acc.plain.arrivals,
            need
        ));
    }
    let (floor, raw) = probes.stop();
    // The recorded gap time of the cores each path runs on (the strict
    // rule of `crate::fd_gaps`, as `bench bounds` applies it): the ports
    // are split by CPU, so the lane's heartbeats are sent, forwarded and
    // read on the lane core, plain UDP's on the regular cores. A gap of the
    // other cores explains nothing of a path.
    let gaps_of = |lane: bool| {
        GapIndex::new(
            raw.iter()
                .filter(|f| (f.core == cfg.lane_core) == lane || cores.regular.is_empty())
                .flat_map(|f| f.gaps.iter()),
        )
    };
    let (lane_gaps, regular_gaps) = (gaps_of(true), gaps_of(false));
    progress("replaying the heartbeats through the detectors");
    let (detectors, curves) = evaluate(cfg.period_ns, acc, &lane_gaps, &regular_gaps);
    let xfd_kernel_lambda = detectors
        .iter()
        .find(|d| d.name == XFD)
        .and_then(|d| d.kernel_min_perfect_threshold_ns);
    Ok(AccuracyOutcome {
        detectors,
        floor,
        curves,
        rounds,
        lane_use,
        xfd_kernel_lambda,
    })
}

/// Time from starting a round's threads to its first heartbeat.
const ROUND_LEAD_NS: u64 = 1_000_000_000;

/// Accuracy targets reported as thresholds.
const TARGETS: [f64; 4] = [0.99, 0.999, 0.9999, 0.99999];

/// Maps phi levels to the Λ axis (see the module docs).
#[derive(Clone, Copy, Debug)]
struct PhiAxis {
    mean: f64,
    std: f64,
    period: f64,
}

impl PhiAxis {
    fn from_moments(m: &[(f64, f64)], period_ns: u64) -> Self {
        let n = m.len().max(1) as f64;
        let (s_mu, s_sd) = m
            .iter()
            .fold((0.0, 0.0), |(a, b), (mu, sd)| (a + mu, b + sd));
        let t = period_ns as f64;
        if m.is_empty() {
            return PhiAxis {
                mean: t,
                std: t / 4.0,
                period: t,
            };
        }
        PhiAxis {
            mean: s_mu / n,
            std: s_sd / n,
            period: t,
        }
    }

    /// Λ-equivalent of φ (ns, may be negative); `None` for a φ that has no
    /// finite quantile.
    fn lambda(&self, phi: f64) -> Option<f64> {
        z_for_phi(phi).map(|z| self.mean + z * self.std - self.period)
    }

    /// φ whose Λ-equivalent is `lambda_ns`.
    fn phi(&self, lambda_ns: f64) -> f64 {
        phi_of_z((lambda_ns + self.period - self.mean) / self.std.max(1e-9))
    }
}

/// `part / whole`, 0 for an empty whole.
fn fraction(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 / whole as f64
    }
}

fn ceil_i64(x: f64) -> i64 {
    x.ceil().clamp(-9.0e18, 9.0e18) as i64
}

/// The threshold grid every detector's curve is reported on: 24 points per
/// decade from 1 µs up to twice the largest finite smallest-perfect Λ.
fn grid(hi_ns: f64) -> Vec<i64> {
    let hi = hi_ns.max(10_000.0) * 2.0;
    let mut v = Vec::new();
    let mut k = 0;
    loop {
        let x = 1_000.0 * 10f64.powf(k as f64 / 24.0);
        if x > hi {
            break;
        }
        v.push(x.round() as i64);
        k += 1;
    }
    v
}

/// `lane_gaps`: the gap time of the lane core (X-FD's path);
/// `regular_gaps`: of the regular cores (plain UDP's, phi's).
fn evaluate(
    period_ns: u64,
    acc: Accumulators,
    lane_gaps: &GapIndex,
    regular_gaps: &GapIndex,
) -> (Vec<DetectorReport>, Vec<Vec<(f64, f64)>>) {
    let Accumulators {
        xfd,
        xfd_kernel,
        xfd_send,
        plain,
        plain_kernel,
        plain_send,
        phi,
        phi_kernel,
        lane_sent,
        plain_sent,
    } = acc;
    let max_int = |l: Levels, kind| l.summary(kind).0.max_level().map(ceil_i64);
    let xfd_out = xfd.outside_gaps(lane_gaps);
    let plain_out = plain.outside_gaps(regular_gaps);
    let phi_out = phi.outside_gaps(regular_gaps);
    let (xfd, _) = xfd.summary(ModelKind::TimeoutArrival);
    let (plain, _) = plain.summary(ModelKind::TimeoutArrival);
    let (phi, moments) = phi.summary(ModelKind::Phi);
    let (phi_k, moments_k) = phi_kernel.summary(ModelKind::Phi);
    let axis = PhiAxis::from_moments(&moments, period_ns);
    let axis_k = PhiAxis::from_moments(&moments_k, period_ns);
    let phi_star = phi.max_level().filter(|p| p.is_finite());
    let phi_lambda = phi_star.and_then(|p| axis.lambda(p)).map(ceil_i64);
    let phi_lambda_k = phi_k
        .max_level()
        .filter(|p| p.is_finite())
        .and_then(|p| axis_k.lambda(p))
        .map(ceil_i64);
    let xfd_min = xfd.max_level().filter(|l| l.is_finite()).map(ceil_i64);
    let plain_min = plain.max_level().filter(|l| l.is_finite()).map(ceil_i64);
    let hi = [xfd_min, plain_min, phi_lambda]
        .iter()
        .flatten()
        .map(|&x| x as f64)
        .fold(0.0, f64::max);
    let mut xs = grid(hi);
    xs.extend([xfd_min, plain_min, phi_lambda].iter().flatten());
    xs.sort_unstable();
    xs.dedup();
    let timeout_report = |name: &str,
                          path: &str,
                          s: &ReplaySummary,
                          min: Option<i64>,
                          sent: u64,
                          kernel: Option<i64>,
                          send: Option<i64>,
                          out: OutsideGaps| {
        let intervals = s.levels.len() as u64;
        DetectorReport {
            name: name.into(),
            path: path.into(),
            model: "fixed timeout T + Λ after the last arrival".into(),
            threshold_unit: "ns".into(),
            heartbeats: s.arrivals,
            heartbeats_sent: sent,
            intervals,
            min_perfect_threshold_ns: min,
            accuracy: xs.iter().map(|&x| (x, s.accuracy(x as f64))).collect(),
            threshold_for_accuracy: TARGETS
                .iter()
                .filter_map(|&a| s.threshold_for(a).map(|t| (a, ceil_i64(t))))
                .collect(),
            accuracy_at_xfd_threshold: xfd_min.map(|x| s.accuracy(x as f64)),
            kernel_min_perfect_threshold_ns: kernel,
            send_anchor_min_perfect_threshold_ns: send,
            min_perfect_threshold_outside_host_gaps_ns: out
                .threshold
                .filter(|l| l.is_finite())
                .map(ceil_i64),
            intervals_in_host_gaps: out.set_aside,
            intervals_in_host_gaps_fraction: fraction(out.set_aside, intervals),
            phi: None,
        }
    };
    let xfd_report = timeout_report(
        XFD,
        "lane",
        &xfd,
        xfd_min,
        lane_sent,
        max_int(xfd_kernel, ModelKind::TimeoutArrival),
        max_int(xfd_send, ModelKind::TimeoutSend),
        xfd_out,
    );
    let plain_report = timeout_report(
        PLAIN_TIMEOUT,
        "plain-udp",
        &plain,
        plain_min,
        plain_sent,
        max_int(plain_kernel, ModelKind::TimeoutArrival),
        max_int(plain_send, ModelKind::TimeoutSend),
        plain_out,
    );
    // Phi: accuracy at the φ whose Λ-equivalent is x; never below φ* at or
    // beyond its own perfect point (the bisection's rounding).
    let phi_at = |x: i64| {
        let mut p = axis.phi(x as f64);
        if let (Some(ps), Some(pl)) = (phi_star, phi_lambda) {
            if x >= pl {
                p = p.max(ps);
            }
        }
        p
    };
    let phi_detail = phi_star.map(|ps| {
        let z = z_for_phi(ps).unwrap_or(f64::INFINITY);
        let max_timeout = moments
            .iter()
            .map(|(mu, sd)| mu + z * sd - axis.period)
            .fold(f64::NEG_INFINITY, f64::max);
        let mut accuracy_phi: Vec<(f64, f64)> = [
            0.5, 1.0, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0, 16.0, 24.0, 32.0, 64.0, 128.0, 256.0, 512.0,
            1024.0, 4096.0, 16384.0,
        ]
        .iter()
        .map(|&p| (p, phi.accuracy(p)))
        .collect();
        accuracy_phi.push((ps, phi.accuracy(ps)));
        accuracy_phi.sort_by(|a, b| a.0.total_cmp(&b.0));
        let params = PhiParams::for_period(period_ns);
        PhiDetail {
            min_perfect_phi: ps,
            accuracy_phi,
            mean_estimate_ns: axis.mean,
            std_estimate_ns: axis.std,
            timeout_at_min_perfect_mean_ns: axis.lambda(ps).unwrap_or(f64::INFINITY),
            timeout_at_min_perfect_max_ns: max_timeout,
            window: params.window,
            min_std_ns: params.min_std_ns,
            conversion: "Λ(φ) = μ̄ + z(φ)·σ̄ − T with μ̄, σ̄ phi's estimates averaged over every interval; z(φ) the normal quantile with −log10 P(Z > z) = φ".into(),
        }
    });
    let phi_report = DetectorReport {
        name: PHI.into(),
        path: "plain-udp".into(),
        model: "phi-accrual (normal inter-arrival model, window 1000, σ ≥ T/10)".into(),
        threshold_unit: "phi".into(),
        heartbeats: phi.arrivals,
        heartbeats_sent: plain_sent,
        intervals: phi.levels.len() as u64,
        min_perfect_threshold_ns: phi_lambda,
        accuracy: xs.iter().map(|&x| (x, phi.accuracy(phi_at(x)))).collect(),
        threshold_for_accuracy: TARGETS
            .iter()
            .filter_map(|&a| {
                phi.threshold_for(a)
                    .and_then(|p| axis.lambda(p))
                    .map(|l| (a, ceil_i64(l)))
            })
            .collect(),
        accuracy_at_xfd_threshold: xfd_min.map(|x| phi.accuracy(phi_at(x))),
        kernel_min_perfect_threshold_ns: phi_lambda_k,
        send_anchor_min_perfect_threshold_ns: None,
        min_perfect_threshold_outside_host_gaps_ns: phi_out
            .threshold
            .filter(|p| p.is_finite())
            .and_then(|p| axis.lambda(p))
            .map(ceil_i64),
        intervals_in_host_gaps: phi_out.set_aside,
        intervals_in_host_gaps_fraction: fraction(phi_out.set_aside, phi.levels.len() as u64),
        phi: phi_detail,
    };
    let id = |l: f64| l.is_finite().then_some(l);
    let curves = vec![
        curve_points(&xfd, id),
        curve_points(&plain, id),
        curve_points(&phi, |p| if p.is_finite() { axis.lambda(p) } else { None }),
    ];
    (vec![xfd_report, plain_report, phi_report], curves)
}

/// Indices of the sorted levels a curve is drawn from: 600 evenly spaced,
/// and the last ones on a log scale of their distance to the end (the tail,
/// where the nines are), the last 64 exactly.
fn curve_indices(n: usize) -> Vec<usize> {
    let mut v: Vec<usize> = (0..600).map(|i| i * n / 600).collect();
    let mut k = 0.0f64;
    loop {
        let m = 10f64.powf(k / 40.0).round() as usize;
        if m > n {
            break;
        }
        v.push(n - m);
        k += 1.0;
    }
    v.extend(n.saturating_sub(64)..n);
    v.retain(|&i| i < n);
    v.sort_unstable();
    v.dedup();
    v
}

/// The exact accuracy staircase of a detector at the chosen levels, as
/// (Λ ns, accuracy) points.
fn curve_points(s: &ReplaySummary, to_ns: impl Fn(f64) -> Option<f64>) -> Vec<(f64, f64)> {
    curve_indices(s.levels.len())
        .into_iter()
        .filter_map(|i| {
            let l = s.levels[i];
            to_ns(l).map(|x| (x, s.accuracy(l)))
        })
        .collect()
}

// ------------------------------------------------------------------ part 2

/// One injected failure: from the injection instant until every runner
/// trusted every host again.
#[derive(Clone, Debug, Serialize)]
pub struct Window {
    /// What was injected.
    pub kind: FailureKind,
    /// Into which host.
    pub victim: usize,
    /// The injection instant, `CLOCK_REALTIME` ns.
    pub start_ns: u64,
    /// Every runner trusted every host again, `CLOCK_REALTIME` ns.
    pub end_ns: u64,
}

/// One runner's alive table as the benchmark follows it.
struct Observer {
    table: AliveTable,
    cursor: EventCursor,
}

/// Every process of part 2, stopped and reaped on drop (also on error).
struct Fleet {
    bin: PathBuf,
    dir: PathBuf,
    hosts: Vec<HostInfo>,
    period_ns: u64,
    lambda_ns: u64,
    stall: u32,
    seconds: u64,
    lane_core: usize,
    mlock: bool,
    runners: Vec<Option<Child>>,
    apps: Vec<Option<Child>>,
    stopped: Vec<bool>,
    /// A link that is down: (switch namespace, port).
    cut: Option<(String, String)>,
    started: usize,
}

fn io_file(path: &Path) -> impl FnOnce(std::io::Error) -> FdBenchError + '_ {
    move |source| FdBenchError::File {
        path: path.to_path_buf(),
        source,
    }
}

/// A signal the benchmark sends.
#[derive(Clone, Copy, Debug)]
enum Sig {
    Kill,
    Term,
    Stop,
    Cont,
}

impl Sig {
    fn number(self) -> libc::c_int {
        match self {
            Sig::Kill => libc::SIGKILL,
            Sig::Term => libc::SIGTERM,
            Sig::Stop => libc::SIGSTOP,
            Sig::Cont => libc::SIGCONT,
        }
    }
    fn name(self) -> &'static str {
        match self {
            Sig::Kill => "SIGKILL",
            Sig::Term => "SIGTERM",
            Sig::Stop => "SIGSTOP",
            Sig::Cont => "SIGCONT",
        }
    }
}

/// Sends `sig` to `pid`, a child this process started and has not reaped.
fn signal(pid: u32, sig: Sig) -> Result<(), FdBenchError> {
    let p = libc::pid_t::try_from(pid).map_err(|_| FdBenchError::Signal {
        signal: sig.name(),
        pid,
        source: std::io::Error::from(std::io::ErrorKind::InvalidInput),
    })?;
    // SAFETY: kill(2) has no memory-safety preconditions.
    if unsafe { libc::kill(p, sig.number()) } != 0 {
        return Err(FdBenchError::Signal {
            signal: sig.name(),
            pid,
            source: std::io::Error::last_os_error(),
        });
    }
    Ok(())
}

/// Sets interface `ifname` of namespace `netns` up or down with
/// `SIOCSIFFLAGS`, from a thread that entered the namespace. Returns the
/// `CLOCK_REALTIME` instant just before the request (it takes effect
/// before the call returns: the veth pair loses its carrier at once).
fn set_link(netns: &str, ifname: &str, up: bool) -> Result<u64, FdBenchError> {
    let err = |detail: String| FdBenchError::Link {
        port: ifname.to_string(),
        detail,
    };
    let name = ifname.as_bytes();
    if name.is_empty() || name.len() >= libc::IFNAMSIZ {
        return Err(err("bad interface name".into()));
    }
    std::thread::scope(|s| {
        s.spawn(|| {
            let _ns = xlane_testbed::enter_netns(netns).map_err(|e| err(e.to_string()))?;
            let sock = std::net::UdpSocket::bind("127.0.0.1:0")
                .map_err(|e| err(format!("socket: {e}")))?;
            let fd = std::os::fd::AsRawFd::as_raw_fd(&sock);
            // SAFETY: ifreq is plain old data; all-zero is a valid value.
            let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
            for (d, &b) in req.ifr_name.iter_mut().zip(name) {
                *d = b as libc::c_char;
            }
            // SAFETY: a valid socket and a valid, NUL-terminated ifreq.
            if unsafe { libc::ioctl(fd, libc::SIOCGIFFLAGS, &mut req) } != 0 {
                return Err(err(format!(
                    "SIOCGIFFLAGS: {}",
                    std::io::Error::last_os_error()
                )));
            }
            // SAFETY: SIOCGIFFLAGS filled the flags member of the union.
            let flags = unsafe { req.ifr_ifru.ifru_flags };
            let upf = libc::IFF_UP as libc::c_short;
            req.ifr_ifru.ifru_flags = if up { flags | upf } else { flags & !upf };
            let t0 = realtime_ns();
            // SAFETY: as above.
            if unsafe { libc::ioctl(fd, libc::SIOCSIFFLAGS, &req) } != 0 {
                return Err(err(format!(
                    "SIOCSIFFLAGS: {}",
                    std::io::Error::last_os_error()
                )));
            }
            Ok(t0)
        })
        .join()
        .unwrap_or_else(|_| Err(err("link thread panicked".into())))
    })
}

/// The last lines of a process's stderr file, for error messages.
fn tail(path: &Path) -> String {
    let s = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(5)..].join(" | ")
}

impl Fleet {
    fn counter(&self, h: usize) -> PathBuf {
        self.dir.join(format!("h{h}.counter"))
    }
    fn table(&self, h: usize) -> PathBuf {
        self.dir.join(format!("h{h}.table"))
    }
    fn errfile(&self, h: usize, what: &str) -> PathBuf {
        self.dir.join(format!("h{h}.{what}.stderr"))
    }

    fn stderr_to(&self, path: &Path) -> Result<Stdio, FdBenchError> {
        let f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(io_file(path))?;
        Ok(Stdio::from(f))
    }

    /// Starts host `h`'s stand-in application; returns once its counter exists.
    fn start_app(&mut self, h: usize) -> Result<(), FdBenchError> {
        let err = self.errfile(h, "app");
        let child = Command::new(&self.bin)
            .args(["fd", "bump", "--counter"])
            .arg(self.counter(h))
            .args([
                "--interval",
                &format!("{}ns", (self.period_ns / 3).max(1)),
                "--fifo",
                &APP_FIFO.to_string(),
                "--seconds",
                &self.seconds.to_string(),
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(self.stderr_to(&err)?)
            .spawn()
            .map_err(|source| FdBenchError::Spawn {
                what: format!("{} fd bump", self.bin.display()),
                source,
            })?;
        self.apps[h] = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Ok(c) = xlane_fd::LivenessCounter::open(self.counter(h)) {
                if c.read() > 0 {
                    return Ok(());
                }
            }
            if let Some(Ok(Some(st))) = self.apps[h].as_mut().map(|c| c.try_wait()) {
                return Err(FdBenchError::NotReady {
                    host: h,
                    detail: format!("application exited ({st}): {}", tail(&err)),
                });
            }
            if Instant::now() > deadline {
                return Err(FdBenchError::NotReady {
                    host: h,
                    detail: "application did not bump its counter".into(),
                });
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Starts host `h`'s X-FD runner; returns its table once it is up.
    fn start_runner(&mut self, h: usize) -> Result<AliveTable, FdBenchError> {
        let host = &self.hosts[h];
        let peers: Vec<String> = self
            .hosts
            .iter()
            .map(|o| SocketAddrV4::new(o.addr, RUNNER_PORT).to_string())
            .collect();
        let err = self.errfile(h, "runner");
        let child = Command::new(&self.bin)
            .args(["fd", "run", "--netns", &host.netns, "--bind"])
            .arg(SocketAddrV4::new(host.addr, RUNNER_PORT).to_string())
            .arg("--group")
            .arg(SocketAddrV4::new(RUNNER_GROUP, RUNNER_PORT).to_string())
            .arg("--peer")
            .arg(peers.join(","))
            .args(["--period", &format!("{}ns", self.period_ns)])
            .args(["--lambda", &format!("{}ns", self.lambda_ns)])
            .args(["--stall", &self.stall.to_string()])
            .arg("--counter")
            .arg(self.counter(h))
            .arg("--table")
            .arg(self.table(h))
            .args(["--events", &RUNNER_EVENTS.to_string()])
            .args(["--core", &self.lane_core.to_string()])
            .args(["--fifo", &RUNNER_FIFO.to_string()])
            .args(["--seconds", &self.seconds.to_string(), "--quiet"])
            .args(if self.mlock {
                &[][..]
            } else {
                &["--no-mlock"][..]
            })
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(self.stderr_to(&err)?)
            .spawn()
            .map_err(|source| FdBenchError::Spawn {
                what: format!("{} fd run", self.bin.display()),
                source,
            })?;
        let pid = child.id();
        self.runners[h] = Some(child);
        self.started += 1;
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Ok(t) = AliveTable::open(self.table(h)) {
                if t.info().writer_pid == pid {
                    return Ok(t);
                }
            }
            if let Some(Ok(Some(st))) = self.runners[h].as_mut().map(|c| c.try_wait()) {
                return Err(FdBenchError::NotReady {
                    host: h,
                    detail: format!("runner exited ({st}): {}", tail(&err)),
                });
            }
            if Instant::now() > deadline {
                return Err(FdBenchError::NotReady {
                    host: h,
                    detail: "runner did not publish its table".into(),
                });
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    fn pid(slot: &Option<Child>) -> Option<u32> {
        slot.as_ref().map(|c| c.id())
    }

    /// Cuts host `h`'s link at the switch; returns the instant just before.
    fn cut_link(&mut self, tb: &Testbed, h: usize) -> Result<u64, FdBenchError> {
        let port = tb
            .switch_port(h)
            .ok_or_else(|| FdBenchError::Link {
                port: format!("of host {h}"),
                detail: "no such switch port".into(),
            })?
            .to_string();
        let sw = tb.switch_netns().to_string();
        self.cut = Some((sw.clone(), port.clone()));
        set_link(&sw, &port, false)
    }

    /// Restores the cut link.
    fn restore_link(&mut self) -> Result<(), FdBenchError> {
        match self.cut.take() {
            Some((sw, port)) => set_link(&sw, &port, true).map(|_| ()),
            None => Ok(()),
        }
    }

    fn shutdown(&mut self) {
        let _ = self.restore_link();
        for (h, stopped) in self.stopped.iter_mut().enumerate() {
            if *stopped {
                if let Some(pid) = Fleet::pid(&self.apps[h]) {
                    let _ = signal(pid, Sig::Cont);
                }
                *stopped = false;
            }
        }
        let mut all: Vec<Child> = self
            .runners
            .iter_mut()
            .chain(self.apps.iter_mut())
            .filter_map(Option::take)
            .collect();
        for c in &all {
            let _ = signal(c.id(), Sig::Term);
        }
        let deadline = Instant::now() + Duration::from_secs(2);
        for c in &mut all {
            loop {
                match c.try_wait() {
                    Ok(Some(_)) => break,
                    Ok(None) if Instant::now() < deadline => {
                        std::thread::sleep(Duration::from_millis(10));
                    }
                    _ => {
                        let _ = c.kill();
                        let _ = c.wait();
                        break;
                    }
                }
            }
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// What part 2 records while it runs.
struct Recorder {
    observers: Vec<Observer>,
    events: Vec<(usize, Event)>,
    missed: u64,
}

impl Recorder {
    fn poll(&mut self) {
        for (i, o) in self.observers.iter_mut().enumerate() {
            let events = &mut self.events;
            self.missed += o.cursor.for_each(&o.table, |e| events.push((i, *e)));
        }
    }

    /// Polls for `d`.
    fn poll_for(&mut self, d: Duration) {
        let end = Instant::now() + d;
        loop {
            self.poll();
            if Instant::now() >= end {
                return;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// Replaces host `h`'s table (a restarted runner), reading the old one
    /// to its end first.
    fn replace(&mut self, h: usize, table: AliveTable) {
        self.poll();
        self.observers[h] = Observer {
            cursor: table.subscribe_from(0),
            table,
        };
    }

    /// `true` when every runner trusts every other host.
    fn all_alive(&self) -> bool {
        self.observers.iter().all(|o| {
            let s = o.table.snapshot();
            s.unreadable.is_empty()
                && !s.peers.is_empty()
                && s.peers.iter().all(|p| p.status == Status::Alive)
        })
    }

    /// Waits until every runner trusts every other host.
    fn wait_all_alive(&mut self, timeout: Duration) -> bool {
        let end = Instant::now() + timeout;
        loop {
            self.poll();
            if self.all_alive() {
                return true;
            }
            if Instant::now() >= end {
                return false;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    fn describe_status(&self) -> String {
        let mut out = Vec::new();
        for (i, o) in self.observers.iter().enumerate() {
            let s = o.table.snapshot();
            let st: Vec<String> = s
                .peers
                .iter()
                .map(|p| format!("{}={:?}", p.addr.ip(), p.status))
                .collect();
            out.push(format!("h{i}: [{}]", st.join(", ")));
        }
        out.join("; ")
    }
}

/// Host index of a heartbeat address.
fn host_of(hosts: &[HostInfo], a: SocketAddrV4) -> Option<usize> {
    hosts.iter().position(|h| h.addr == *a.ip())
}

/// Part 2's Λ and where it came from: given, from part 1's measurement
/// (`(smallest perfect Λ, longest host gap)`), or the default.
fn failure_lambda(plan: &FailurePlan, measured: Option<(i64, u64)>) -> (u64, String) {
    match (plan.lambda_ns, measured) {
        (Some(l), _) => (l, "given".to_string()),
        (None, Some((m, gap))) => {
            let m = m.max(0) as u64;
            let l = (2 * m).max(2 * gap).max(1_000_000).div_ceil(100_000) * 100_000;
            (
            l,
            format!(
                "max(2 × X-FD's smallest perfect Λ of part 1 = 2 × {} (kernel stamps), 2 × the longest host gap of part 1 = 2 × {}, 1 ms)",
                fmt_ns(m),
                fmt_ns(gap)
            ),
        )
        }
        (None, None) => (
            DEFAULT_FAILURE_LAMBDA_NS,
            "default without part 1".to_string(),
        ),
    }
}

/// Part 2's stall length in periods.
fn failure_stall_periods(plan: &FailurePlan, lambda_ns: u64, period_ns: u64) -> u32 {
    plan.stall_periods
        .unwrap_or_else(|| (lambda_ns.div_ceil(period_ns) as u32 + 2).max(10))
}

/// An upper bound on part 2's length, seconds: the processes end by
/// themselves after it even if this one is killed.
fn failure_seconds_bound(plan: &FailurePlan, lambda_ns: u64, period_ns: u64) -> u64 {
    let stall = failure_stall_periods(plan, lambda_ns, period_ns) as u64;
    let injections = (plan.kinds.len() * plan.repetitions) as u64;
    120 + injections * (30 + 2 * (lambda_ns + stall * period_ns) / 1_000_000_000)
}

fn failure_part(
    cfg: &FdBenchConfig,
    plan: &FailurePlan,
    tb: &Testbed,
    cores: &Cores,
    probes: FloorSet,
    (lambda_ns, lambda_source): (u64, String),
    progress: &mut dyn FnMut(&str),
) -> Result<(Vec<FailureReport>, FailureRun), FdBenchError> {
    let t = cfg.period_ns;
    let stall = failure_stall_periods(plan, lambda_ns, t);
    let hosts = tb.hosts().to_vec();
    let n = hosts.len();
    let kinds = &plan.kinds;
    let seconds = failure_seconds_bound(plan, lambda_ns, t);
    let dir = PathBuf::from(xlane_fd::shm::RUN_DIR).join(format!(
        "fdbench-{}-{}",
        std::process::id(),
        tb.prefix()
    ));
    std::fs::create_dir_all(&dir).map_err(io_file(&dir))?;
    let mut fleet = Fleet {
        bin: plan.xlane_bin.clone(),
        dir,
        hosts: hosts.clone(),
        period_ns: t,
        lambda_ns,
        stall,
        seconds,
        lane_core: cores.lane,
        mlock: plan.lock_runner_memory,
        runners: (0..n).map(|_| None).collect(),
        apps: (0..n).map(|_| None).collect(),
        stopped: vec![false; n],
        cut: None,
        started: 0,
    };
    progress(&format!(
        "part 2: X-FD runners (`xlane fd run`) on {n} hosts, T = {}, Λ = {} ({lambda_source}), stall after {stall} periods; applications bump every {}",
        fmt_ns(t),
        fmt_ns(lambda_ns),
        fmt_ns(t / 3)
    ));
    let part_start = realtime_ns();
    for h in 0..n {
        fleet.start_app(h)?;
    }
    let mut observers = Vec::new();
    for h in 0..n {
        let table = fleet.start_runner(h)?;
        observers.push(Observer {
            cursor: table.subscribe_from(0),
            table,
        });
    }
    let mut rec = Recorder {
        observers,
        events: Vec::new(),
        missed: 0,
    };
    if !rec.wait_all_alive(Duration::from_secs(15)) {
        return Err(FdBenchError::NotReady {
            host: 0,
            detail: format!(
                "not every runner trusts every host: {}",
                rec.describe_status()
            ),
        });
    }
    progress("every runner trusts every host");
    // The run proper starts here; suspicions before (runners starting one
    // after another) are counted apart.
    let origin_ns = realtime_ns();
    let detect_wait =
        Duration::from_nanos(2 * (t + lambda_ns + (stall as u64 + 2) * t)) + Duration::from_secs(2);
    let mut windows = Vec::new();
    for (ki, &kind) in kinds.iter().enumerate() {
        for rep in 0..plan.repetitions {
            let victim = (rep + ki) % n;
            // Settle, at a phase that moves through the period.
            let phase = ((rep * 7 + ki * 3) as u64 * t / 11) % t;
            rec.poll_for(Duration::from_millis(300) + Duration::from_nanos(phase));
            let start_ns = match kind {
                FailureKind::KillRunner => {
                    let pid = Fleet::pid(&fleet.runners[victim]).ok_or(FdBenchError::NotReady {
                        host: victim,
                        detail: "no runner".into(),
                    })?;
                    let t0 = realtime_ns();
                    signal(pid, Sig::Kill)?;
                    if let Some(mut c) = fleet.runners[victim].take() {
                        let _ = c.wait();
                    }
                    t0
                }
                FailureKind::LinkDown => fleet.cut_link(tb, victim)?,
                FailureKind::StopApp => {
                    let pid = Fleet::pid(&fleet.apps[victim]).ok_or(FdBenchError::NotReady {
                        host: victim,
                        detail: "no application".into(),
                    })?;
                    let t0 = realtime_ns();
                    signal(pid, Sig::Stop)?;
                    fleet.stopped[victim] = true;
                    t0
                }
            };
            // Wait until every other host suspects the victim.
            let end = Instant::now() + detect_wait;
            let want = kind.expected_reason();
            loop {
                rec.poll();
                let seen: std::collections::HashSet<usize> = rec
                    .events
                    .iter()
                    .filter(|(o, e)| {
                        *o != victim
                            && e.at_ns >= start_ns
                            && e.kind == EventKind::Suspected(want)
                            && host_of(&hosts, e.addr) == Some(victim)
                    })
                    .map(|(o, _)| *o)
                    .collect();
                if seen.len() >= n - 1 || Instant::now() >= end {
                    break;
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            // Hold the failure a little (suspicions must not flap), then undo it.
            rec.poll_for(Duration::from_millis(50));
            match kind {
                FailureKind::KillRunner => {
                    let table = fleet.start_runner(victim)?;
                    rec.replace(victim, table);
                }
                FailureKind::LinkDown => fleet.restore_link()?,
                FailureKind::StopApp => {
                    if let Some(pid) = Fleet::pid(&fleet.apps[victim]) {
                        signal(pid, Sig::Cont)?;
                    }
                    fleet.stopped[victim] = false;
                }
            }
            if !rec.wait_all_alive(Duration::from_secs(15)) {
                return Err(FdBenchError::NotRecovered {
                    kind: kind.name(),
                    host: victim,
                    detail: rec.describe_status(),
                });
            }
            let end_ns = realtime_ns();
            windows.push(Window {
                kind,
                victim,
                start_ns,
                end_ns,
            });
            progress(&format!(
                "{} #{} on host {victim}: undone, every runner trusts every host again",
                kind.name(),
                rep + 1
            ));
        }
    }
    rec.poll_for(Duration::from_millis(200));
    let duration_ns = realtime_ns().saturating_sub(part_start);
    let (floor, raw_floor) = probes.stop();
    let lane_gaps = GapIndex::with_lead(
        raw_floor
            .iter()
            .filter(|f| f.core == cores.lane)
            .flat_map(|f| f.gaps.iter()),
        crate::interference::FLOOR_INTERVAL_NS,
    );
    let events = std::mem::take(&mut rec.events);
    let missed = rec.missed;
    let started = fleet.started;
    drop(rec);
    fleet.shutdown();
    let startup = events
        .iter()
        .filter(|(_, e)| e.at_ns < origin_ns && matches!(e.kind, EventKind::Suspected(_)))
        .count() as u64;
    let events: Vec<(usize, Event)> = events
        .into_iter()
        .filter(|(_, e)| e.at_ns >= origin_ns)
        .collect();
    let (reports, between, mut samples) = classify(&hosts, kinds, &windows, &events, origin_ns);
    // A false suspicion is put down to a host gap when the lane core (where
    // every runner sends and receives) was away for at least half of the
    // silence that caused it, [t − T − Λ, t].
    let in_gaps = |at: u64| {
        let away = lane_gaps.overlap(at.saturating_sub(t + lambda_ns), at);
        2 * away >= lambda_ns
    };
    for s in &mut samples {
        s.in_host_gap = in_gaps(s.at_ns + origin_ns);
    }
    let explained = samples.iter().filter(|s| s.in_host_gap).count() as u64;
    samples.truncate(MAX_FALSE_LISTED);
    let total = between + reports.iter().map(|r| r.false_suspicions).sum::<u64>();
    Ok((
        reports,
        FailureRun {
            period_ns: t,
            lambda_ns,
            lambda_source,
            stall_periods: stall,
            repetitions: plan.repetitions,
            false_suspicions_between: between,
            false_suspicions_total: total,
            false_suspicion_samples: samples,
            startup_suspicions: startup,
            injections: windows,
            origin_ns,
            false_suspicions_in_host_gaps: explained,
            floor,
            events_missed: missed,
            runners_started: started,
            duration_ns,
        },
    ))
}

/// Sorts every suspicion into detections, partition suspicions and false
/// suspicions; returns the per-kind reports, the false suspicions outside
/// every injection, and every false suspicion.
fn classify(
    hosts: &[HostInfo],
    kinds: &[FailureKind],
    windows: &[Window],
    events: &[(usize, Event)],
    origin_ns: u64,
) -> (Vec<FailureReport>, u64, Vec<FalseSuspicion>) {
    let mut samples = Vec::new();
    let mut note = |o: usize, peer, reason, w: Option<&Window>, at: u64| {
        samples.push(FalseSuspicion {
            observer: o,
            peer,
            reason,
            during: w.map(|w| w.kind),
            victim: w.map(|w| w.victim),
            at_ns: at.saturating_sub(origin_ns),
            in_host_gap: false,
        });
    };
    let n = hosts.len();
    let mut reports: Vec<FailureReport> = kinds
        .iter()
        .map(|&k| FailureReport {
            kind: k,
            description: k.describe().into(),
            injections: 0,
            expected_detections: 0,
            detected: 0,
            detection_ns: Vec::new(),
            min_ns: None,
            p50_ns: None,
            max_ns: None,
            false_suspicions: 0,
            partition_suspicions: 0,
        })
        .collect();
    let mut between = 0;
    // First suspicion per (window, observer).
    let mut first: BTreeMap<(usize, usize), u64> = BTreeMap::new();
    for (o, e) in events {
        let EventKind::Suspected(reason) = e.kind else {
            continue;
        };
        let peer = host_of(hosts, e.addr);
        let w = windows
            .iter()
            .position(|w| e.at_ns >= w.start_ns && e.at_ns <= w.end_ns);
        let Some(wi) = w else {
            between += 1;
            note(*o, peer, reason, None, e.at_ns);
            continue;
        };
        let win = &windows[wi];
        let Some(r) = reports.iter_mut().find(|r| r.kind == win.kind) else {
            continue;
        };
        if peer == Some(win.victim) && *o != win.victim && reason == win.kind.expected_reason() {
            // In the window: at_ns ≥ start_ns (the `position` above).
            let d = e.at_ns - win.start_ns;
            first
                .entry((wi, *o))
                .and_modify(|x| *x = (*x).min(d))
                .or_insert(d);
        } else if win.kind == FailureKind::LinkDown && *o == win.victim && reason == Reason::Silent
        {
            r.partition_suspicions += 1;
        } else {
            r.false_suspicions += 1;
            note(*o, peer, reason, Some(win), e.at_ns);
        }
    }
    for w in windows {
        if let Some(r) = reports.iter_mut().find(|r| r.kind == w.kind) {
            r.injections += 1;
            r.expected_detections += n - 1;
        }
    }
    for ((wi, _), d) in first {
        if let Some(r) = reports.iter_mut().find(|r| r.kind == windows[wi].kind) {
            r.detection_ns.push(d);
        }
    }
    for r in &mut reports {
        r.detection_ns.sort_unstable();
        r.detected = r.detection_ns.len();
        r.min_ns = r.detection_ns.first().copied();
        r.p50_ns = xlane_stats::percentile(&r.detection_ns, 0.5);
        r.max_ns = r.detection_ns.last().copied();
    }
    (reports, between, samples)
}

// ------------------------------------------------------------------ text

fn fmt_signed(x: i64) -> String {
    if x < 0 {
        format!("-{}", fmt_ns(x.unsigned_abs()))
    } else {
        fmt_ns(x as u64)
    }
}

fn fmt_opt(x: Option<i64>) -> String {
    x.map_or("-".to_string(), fmt_signed)
}

fn fmt_acc(a: f64) -> String {
    if a >= 1.0 {
        "100%".to_string()
    } else {
        format!("{:.4}%", 100.0 * a)
    }
}

impl FdBenchReport {
    /// The tables a person reads.
    pub fn render(&self) -> String {
        let mut out = String::new();
        if !self.detectors.is_empty() {
            out.push_str(&format!(
                "accuracy against Λ (suspect after T + Λ of silence; T = {}, {} hosts, each heartbeating to all others; detector clock: the receiving thread)\n",
                fmt_ns(self.params.period_ns),
                self.params.hosts
            ));
            let mut t = Table::new(&[
                "detector",
                "path",
                "heartbeats",
                "lost",
                "Λ 99%",
                "Λ 99.9%",
                "Λ 99.99%",
                "Λ 100%",
                "acc. at x-fd's Λ",
                "Λ 100% kernel",
                "Λ 100% latency",
                "Λ 100% ¬gap",
                "intervals",
                "set aside ¬gap",
            ]);
            for d in &self.detectors {
                let at = |a: f64| {
                    d.threshold_for_accuracy
                        .iter()
                        .find(|(x, _)| *x == a)
                        .map(|(_, l)| fmt_signed(*l))
                        .unwrap_or_else(|| "-".into())
                };
                let lost = d.heartbeats_sent.saturating_sub(d.heartbeats);
                let loss = if d.heartbeats_sent > 0 {
                    format!("{:.2}%", 100.0 * lost as f64 / d.heartbeats_sent as f64)
                } else {
                    "-".into()
                };
                t.row(vec![
                    d.name.clone(),
                    d.path.clone(),
                    d.heartbeats.to_string(),
                    loss,
                    at(0.99),
                    at(0.999),
                    at(0.9999),
                    fmt_opt(d.min_perfect_threshold_ns),
                    d.accuracy_at_xfd_threshold.map_or("-".into(), fmt_acc),
                    fmt_opt(d.kernel_min_perfect_threshold_ns),
                    fmt_opt(d.send_anchor_min_perfect_threshold_ns),
                    fmt_opt(d.min_perfect_threshold_outside_host_gaps_ns),
                    d.intervals.to_string(),
                    format!(
                        "{} ({:.4}%)",
                        d.intervals_in_host_gaps,
                        100.0 * d.intervals_in_host_gaps_fraction
                    ),
                ]);
            }
            let r = |x: Option<f64>| x.map_or("-".to_string(), |v| format!("{v:.1}×"));
            for (name, raw, outside) in [
                (
                    PLAIN_TIMEOUT,
                    self.ratio_plain_over_xfd,
                    self.ratio_plain_over_xfd_outside_host_gaps,
                ),
                (
                    PHI,
                    self.ratio_phi_over_xfd,
                    self.ratio_phi_over_xfd_outside_host_gaps,
                ),
            ] {
                let mut row = vec![String::new(); 13];
                row[0] = format!("{name} / {XFD}");
                row[7] = r(raw);
                row[11] = r(outside);
                t.row(row);
            }
            out.push_str(&t.render());
            out.push_str("Λ 100%: the smallest Λ without a false suspicion (T not included); kernel: the same with the kernel's receive stamps; latency: counted from the send time (the paper's per-heartbeat latency metric); ¬gap: the smallest Λ at which every interval is within Λ or explained by host gaps, i.e. the gap time the floor probes recorded inside it on the cores of its path covers its excess over T + Λ; set aside ¬gap: the intervals above that Λ, each so explained\n");
            out.push_str(&format!(
                "\nsmallest perfect Λ, plain-timeout / x-fd: {} over all intervals, {} outside host gaps\n",
                r(self.ratio_plain_over_xfd),
                r(self.ratio_plain_over_xfd_outside_host_gaps)
            ));
            out.push_str(&format!(
                "smallest perfect Λ, phi-accrual / x-fd: {} over all intervals, {} outside host gaps\n",
                r(self.ratio_phi_over_xfd),
                r(self.ratio_phi_over_xfd_outside_host_gaps)
            ));
            if let Some(x) = self.detectors.iter().find(|d| d.name == XFD) {
                out.push_str(&format!(
                    "x-fd intervals set aside as explained by host gaps: {} of {} ({:.4}%)\n",
                    x.intervals_in_host_gaps,
                    x.intervals,
                    100.0 * x.intervals_in_host_gaps_fraction
                ));
            }
            if let Some(p) = self.detectors.iter().find_map(|d| d.phi.as_ref()) {
                out.push_str(&format!(
                    "phi-accrual: smallest perfect φ = {:.2}; on the Λ axis as μ̄ + z(φ)·σ̄ − T with its estimates averaged over the run (μ̄ = {}, σ̄ = {}): {}; the longest timeout − T it applied at that φ: {}\n",
                    p.min_perfect_phi,
                    fmt_ns(p.mean_estimate_ns.max(0.0) as u64),
                    fmt_ns(p.std_estimate_ns.max(0.0) as u64),
                    fmt_signed(ceil_i64(p.timeout_at_min_perfect_mean_ns)),
                    fmt_signed(ceil_i64(p.timeout_at_min_perfect_max_ns)),
                ));
            }
            let secs: f64 = self.rounds.iter().map(|r| r.duration_ns as f64 / 1e9).sum();
            let late_lane = self
                .rounds
                .iter()
                .map(|r| r.lane_sender_late_max_ns)
                .max()
                .unwrap_or(0);
            let late_plain = self
                .rounds
                .iter()
                .map(|r| r.plain_sender_late_max_ns)
                .max()
                .unwrap_or(0);
            out.push_str(&format!(
                "{} round(s), {:.1} s of heartbeats; worst sender lateness: lane {}, plain {}\n",
                self.rounds.len(),
                secs,
                fmt_ns(late_lane),
                fmt_ns(late_plain)
            ));
        }
        out.push_str(&self.floor.render(self.params.lane_core));
        if let Some(b) = &self.lane_core {
            out.push_str(&b.render(self.params.lane_core));
        }
        if let Some(x) = self
            .detectors
            .iter()
            .find(|d| d.name == XFD)
            .and_then(|d| d.min_perfect_threshold_ns)
        {
            out.push_str(&format!(
                "x-fd's smallest perfect Λ {} against the lane core's longest host gap {}\n",
                fmt_signed(x),
                fmt_ns(self.floor.max_gap_ns)
            ));
        }
        out.push_str(&crate::interference::render_cross_traffic(
            &self.cross_traffic_bps,
            self.switch_best_effort_drops,
            self.params.link_rate_bps,
        ));
        if let Some(f) = &self.failure_run {
            out.push_str(&format!(
                "\nreal failures: `xlane fd run` on every host, T = {}, Λ = {} ({}), stall after {} periods, {} per kind\n",
                fmt_ns(f.period_ns),
                fmt_ns(f.lambda_ns),
                f.lambda_source,
                f.stall_periods,
                f.repetitions
            ));
            let mut t = Table::new(&[
                "failure",
                "injections",
                "detected",
                "min",
                "p50",
                "max",
                "false suspicions",
            ]);
            for r in &self.failures {
                let o = |x: Option<u64>| x.map_or("-".to_string(), fmt_ns);
                t.row(vec![
                    format!("{} ({})", r.kind.name(), r.description),
                    r.injections.to_string(),
                    format!("{}/{}", r.detected, r.expected_detections),
                    o(r.min_ns),
                    o(r.p50_ns),
                    o(r.max_ns),
                    r.false_suspicions.to_string(),
                ]);
            }
            out.push_str(&t.render());
            out.push_str("detection time: the first suspicion of the victim at each other host − the injection instant\n");
            let part: u64 = self.failures.iter().map(|r| r.partition_suspicions).sum();
            out.push_str(&format!(
                "false suspicions of live peers: {} in total ({} while the lane core was away for at least half the silence; its longest host gap in this part: {}), {} outside injections; the cut host suspected its unreachable peers {} times (not counted); {} suspicions while the runners started (not counted); {} events missed; {} runners started\n",
                f.false_suspicions_total,
                f.false_suspicions_in_host_gaps,
                fmt_ns(f.floor.max_gap_ns),
                f.false_suspicions_between,
                part,
                f.startup_suspicions,
                f.events_missed,
                f.runners_started
            ));
        }
        for p in &self.plots {
            out.push_str(&format!("plot: {p}\n"));
        }
        out
    }
}

// ------------------------------------------------------------------ plot

/// Fig. 7: accuracy against Λ, one curve per detector.
mod plot {
    use super::{FdBenchReport, PHI};
    use crate::plot::{axis_ns, ensure_font};
    use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint, Ranged};
    use plotters::coord::Shift;
    use plotters::prelude::*;
    use plotters::style::text_anchor::{HPos, Pos, VPos};
    use std::ops::Range;
    use std::path::{Path, PathBuf};

    const W: u32 = 1200;
    const H: u32 = 700;
    const LEGEND_W: u32 = 300;
    const FONT: &str = "sans-serif";
    const COLORS: [RGBColor; 3] = [
        RGBColor(31, 119, 180),
        RGBColor(214, 39, 40),
        RGBColor(255, 127, 14),
    ];
    const GRAY: RGBColor = RGBColor(90, 90, 90);

    /// Log axis over ns with ticks at 1, 2, 5 × 10^k (1 × 10^k when wide).
    #[derive(Clone)]
    struct LogNs {
        lo: f64,
        hi: f64,
    }

    impl Ranged for LogNs {
        type FormatOption = DefaultFormatting;
        type ValueType = f64;
        fn map(&self, v: &f64, limit: (i32, i32)) -> i32 {
            let f = (v.max(self.lo * 1e-3).ln() - self.lo.ln()) / (self.hi.ln() - self.lo.ln());
            (limit.0 as f64 + f * (limit.1 - limit.0) as f64)
                .round()
                .clamp(-1e6, 1e6) as i32
        }
        fn key_points<Hint: KeyPointHint>(&self, hint: Hint) -> Vec<f64> {
            let decades = (self.hi / self.lo).log10();
            let mant: &[f64] = if decades <= 4.0 {
                &[1.0, 2.0, 5.0]
            } else {
                &[1.0]
            };
            let mut v = Vec::new();
            let mut d = self.lo.log10().floor() as i32;
            while 10f64.powi(d) <= self.hi {
                for m in mant {
                    let x = m * 10f64.powi(d);
                    if x >= self.lo && x <= self.hi {
                        v.push(x);
                    }
                }
                d += 1;
            }
            v.truncate(hint.max_num_points().max(2));
            v
        }
        fn range(&self) -> Range<f64> {
            self.lo..self.hi
        }
    }

    /// Accuracy as "nines": a ↦ −log10(1 − a), 100 % at `top`.
    #[derive(Clone)]
    struct Nines {
        top: f64,
    }

    impl Nines {
        fn y(&self, a: f64) -> f64 {
            if a >= 1.0 {
                self.top
            } else {
                (-(1.0 - a).log10()).clamp(0.0, self.top - 0.3)
            }
        }
        fn label(&self, y: f64) -> String {
            if y >= self.top - 1e-9 {
                return "100%".into();
            }
            let k = y.round() as i32;
            if k <= 0 {
                return "0%".into();
            }
            let nines = 100.0 * (1.0 - 10f64.powi(-k));
            format!("{nines:.*}%", (k - 2).max(0) as usize)
        }
    }

    impl Ranged for Nines {
        type FormatOption = DefaultFormatting;
        type ValueType = f64;
        fn map(&self, v: &f64, limit: (i32, i32)) -> i32 {
            let f = v / (self.top + 0.25);
            (limit.0 as f64 + f * (limit.1 - limit.0) as f64).round() as i32
        }
        fn key_points<Hint: KeyPointHint>(&self, _hint: Hint) -> Vec<f64> {
            let mut v: Vec<f64> = (0..)
                .map(|k| k as f64)
                .take_while(|k| *k <= self.top - 0.5)
                .collect();
            v.push(self.top);
            v
        }
        fn range(&self) -> Range<f64> {
            0.0..self.top + 0.25
        }
    }

    struct Fig<'a> {
        report: &'a FdBenchReport,
        curves: &'a [Vec<(f64, f64)>],
        x: LogNs,
        y: Nines,
    }

    impl Fig<'_> {
        fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String> {
            let de = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
            root.fill(&WHITE).map_err(de)?;
            let title = format!(
                "X-FD and baselines: accuracy against Λ (T = {}, {} hosts, cross traffic{})",
                axis_ns(self.report.params.period_ns as f64),
                self.report.params.hosts,
                if self.report.params.cpu_load {
                    " + CPU load"
                } else {
                    ""
                }
            );
            let tstyle = TextStyle::from((FONT, 22, FontStyle::Bold).into_font())
                .pos(Pos::new(HPos::Center, VPos::Top));
            root.draw_text(&title, &tstyle, ((W / 2) as i32, 12))
                .map_err(de)?;
            let body = root.margin(48, 0, 0, 0);
            let (plot, legend) = body.split_horizontally(W - LEGEND_W);
            let y = self.y.clone();
            let mut chart = ChartBuilder::on(&plot)
                .margin(10)
                .margin_right(20)
                .x_label_area_size(60)
                .y_label_area_size(90)
                .build_cartesian_2d(self.x.clone(), self.y.clone())
                .map_err(de)?;
            chart
                .configure_mesh()
                .x_labels(12)
                .x_label_formatter(&|v| axis_ns(*v))
                .y_label_formatter(&|v| y.label(*v))
                .x_desc("Λ: suspected after T + Λ without a heartbeat (log scale)")
                .y_desc("accuracy: heartbeats without a false suspicion")
                .label_style((FONT, 15))
                .axis_desc_style((FONT, 17))
                .light_line_style(RGBColor(235, 235, 235))
                .bold_line_style(RGBColor(205, 205, 205))
                .draw()
                .map_err(de)?;
            let mut ly = 20;
            legend
                .draw_text(
                    "detector (heartbeat path)",
                    &TextStyle::from((FONT, 14).into_font()).color(&GRAY),
                    (10, ly),
                )
                .map_err(de)?;
            ly += 26;
            for (i, (d, pts)) in self.report.detectors.iter().zip(self.curves).enumerate() {
                let color = COLORS[i % COLORS.len()];
                // Staircase: the accuracy at Λ holds until the next level.
                let mut steps = Vec::new();
                let mut prev = self.y.y(0.0);
                let first_in = pts
                    .iter()
                    .rev()
                    .find(|(x, _)| *x <= self.x.lo)
                    .map(|(_, a)| *a);
                if let Some(a) = first_in {
                    prev = self.y.y(a);
                }
                steps.push((self.x.lo, prev));
                for &(x, a) in pts.iter().filter(|(x, _)| *x > self.x.lo) {
                    let yv = self.y.y(a);
                    steps.push((x, prev));
                    steps.push((x, yv));
                    prev = yv;
                }
                steps.push((self.x.hi, prev));
                chart
                    .draw_series(LineSeries::new(steps, color.stroke_width(2)))
                    .map_err(de)?;
                if let Some(m) = d.min_perfect_threshold_ns.filter(|m| *m > 0) {
                    let p = (m as f64, self.y.top);
                    chart
                        .draw_series([Circle::new(p, 6, color.filled())])
                        .map_err(de)?;
                    chart
                        .draw_series([Circle::new(p, 6, BLACK.stroke_width(1))])
                        .map_err(de)?;
                }
                legend
                    .draw(&PathElement::new(
                        vec![(10, ly + 9), (42, ly + 9)],
                        color.stroke_width(3),
                    ))
                    .map_err(de)?;
                legend
                    .draw_text(
                        &format!("{} ({})", d.name, d.path),
                        &TextStyle::from((FONT, 16, FontStyle::Bold).into_font()),
                        (50, ly),
                    )
                    .map_err(de)?;
                let mut info = vec![
                    format!("{} heartbeats", d.heartbeats),
                    format!(
                        "100% from Λ = {}",
                        d.min_perfect_threshold_ns
                            .map_or("-".into(), |m| axis_ns(m as f64))
                    ),
                ];
                if d.name == PHI {
                    if let Some(p) = &d.phi {
                        info.push(format!(
                            "φ* = {:.1}; Λ: its mean timeout − T",
                            p.min_perfect_phi
                        ));
                    }
                }
                for (k, s) in info.iter().enumerate() {
                    legend
                        .draw_text(
                            s,
                            &TextStyle::from((FONT, 13).into_font()).color(&GRAY),
                            (50, ly + 21 + 16 * k as i32),
                        )
                        .map_err(de)?;
                }
                ly += 24 + 16 * info.len() as i32 + 12;
            }
            if let Some(r) = self.report.ratio_plain_over_xfd {
                legend
                    .draw_text(
                        &format!("plain-timeout / x-fd: {r:.1}×"),
                        &TextStyle::from((FONT, 14).into_font()),
                        (10, ly + 6),
                    )
                    .map_err(de)?;
            }
            Ok(())
        }
    }

    /// The y tick labels of a nines axis up to `top`.
    #[cfg(test)]
    pub(super) fn nines_labels(top: f64) -> Vec<String> {
        let n = Nines { top };
        n.key_points(20usize).iter().map(|&y| n.label(y)).collect()
    }

    fn with_ext(stem: &Path, ext: &str) -> PathBuf {
        let mut s = stem.as_os_str().to_owned();
        s.push(".");
        s.push(ext);
        PathBuf::from(s)
    }

    /// Writes `<stem>.png` and `<stem>.svg`.
    pub(super) fn write(
        report: &FdBenchReport,
        curves: &[Vec<(f64, f64)>],
        stem: &Path,
    ) -> Result<Vec<PathBuf>, String> {
        ensure_font()?;
        let hi = report
            .detectors
            .iter()
            .filter_map(|d| d.min_perfect_threshold_ns)
            .map(|m| m as f64)
            .fold(10_000.0, f64::max)
            * 2.0;
        let n = report
            .detectors
            .iter()
            .map(|d| d.intervals)
            .max()
            .unwrap_or(1)
            .max(10);
        let fig = Fig {
            report,
            curves,
            x: LogNs { lo: 1_000.0, hi },
            y: Nines {
                top: (n as f64).log10().ceil() + 0.6,
            },
        };
        let png = with_ext(stem, "png");
        let svg = with_ext(stem, "svg");
        {
            let root = BitMapBackend::new(&png, (W, H)).into_drawing_area();
            fig.draw(&root)?;
            root.present()
                .map_err(|e| format!("{}: {e}", png.display()))?;
        }
        {
            let root = SVGBackend::new(&svg, (W, H)).into_drawing_area();
            fig.draw(&root)?;
            root.present()
                .map_err(|e| format!("{}: {e}", svg.display()))?;
        }
        Ok(vec![png, svg])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(i: usize) -> Ipv4Addr {
        Ipv4Addr::new(198, 18, 0, i as u8 + 1)
    }

    fn hosts(n: usize) -> Vec<HostInfo> {
        (0..n)
            .map(|i| HostInfo {
                index: i,
                netns: format!("t-h{i}"),
                iface: format!("t-h{i}"),
                addr: addr(i),
                mac: String::new(),
            })
            .collect()
    }

    fn ev(observer: usize, peer: usize, at_ns: u64, kind: EventKind) -> (usize, Event) {
        (
            observer,
            Event {
                number: 0,
                peer: 0,
                addr: SocketAddrV4::new(addr(peer), RUNNER_PORT),
                at_ns,
                kind,
            },
        )
    }

    #[test]
    fn classify_sorts_suspicions() {
        let h = hosts(3);
        let kinds = [FailureKind::KillRunner, FailureKind::LinkDown];
        let windows = [
            Window {
                kind: FailureKind::KillRunner,
                victim: 1,
                start_ns: 1_100,
                end_ns: 1_200,
            },
            Window {
                kind: FailureKind::LinkDown,
                victim: 2,
                start_ns: 1_300,
                end_ns: 1_400,
            },
        ];
        let silent = EventKind::Suspected(Reason::Silent);
        let stalled = EventKind::Suspected(Reason::Stalled);
        // (event, what it is)
        let events = [
            ev(0, 1, 1_150, silent),               // detection 50
            ev(0, 1, 1_170, silent),               // a later one: not the first
            ev(2, 1, 1_160, silent),               // detection 60
            ev(0, 2, 1_150, stalled),              // false, during the kill
            ev(2, 0, 1_350, silent),               // the cut host: partition
            ev(0, 2, 1_320, silent),               // detection 20
            ev(1, 2, 1_330, silent),               // detection 30
            ev(0, 1, 1_250, silent),               // false, between
            ev(0, 1, 1_260, EventKind::Recovered), // not a suspicion
            ev(1, 0, 1_150, silent),               // false: the victim is 1
        ];
        let (r, between, falses) = classify(&h, &kinds, &windows, &events, 1_000);
        assert_eq!(between, 1);
        assert_eq!(r[0].kind, FailureKind::KillRunner);
        assert_eq!(r[0].injections, 1);
        assert_eq!(r[0].expected_detections, 2);
        assert_eq!(r[0].detection_ns, vec![50, 60]);
        assert_eq!(
            (r[0].min_ns, r[0].p50_ns, r[0].max_ns),
            (Some(50), Some(50), Some(60))
        );
        assert_eq!(r[0].false_suspicions, 2);
        assert_eq!(r[1].detection_ns, vec![20, 30]);
        assert_eq!(r[1].partition_suspicions, 1);
        assert_eq!(r[1].false_suspicions, 0);
        assert_eq!(falses.len(), 3);
        let between_one = falses.iter().find(|f| f.during.is_none()).expect("between");
        assert_eq!(
            (between_one.observer, between_one.peer, between_one.at_ns),
            (0, Some(1), 250)
        );
    }

    #[test]
    fn phi_axis_round_trips_and_is_monotone() {
        let axis = PhiAxis {
            mean: 1.2e6,
            std: 3.0e5,
            period: 1e6,
        };
        let mut last = f64::NEG_INFINITY;
        for x in [-1.0e5, 0.0, 1.0e5, 1.0e6, 5.0e6, 2.0e7] {
            let phi = axis.phi(x);
            assert!(phi > last, "φ not increasing at {x}");
            last = phi;
            let back = axis.lambda(phi).expect("finite");
            assert!((back - x).abs() < 1.0, "{x} → φ {phi} → {back}");
        }
        assert_eq!(axis.lambda(f64::INFINITY), None);
    }

    /// Samples of one pair: arrivals every T (plus `jitter(i)`), send
    /// stamps on the slot, the kernel stamp 2 µs before the thread's.
    fn trace(n: u64, t: u64, skip: &[u64], late: &[(u64, u64)]) -> Vec<FlowSample> {
        (0..n)
            .filter(|i| !skip.contains(i))
            .map(|i| {
                let extra = late.iter().find(|(j, _)| *j == i).map_or(0, |(_, d)| *d);
                let send = 1_000_000_000 + i * t;
                let user = send + 30_000 + (i * 7919 % 13) * 1_000 + extra;
                FlowSample {
                    sample: xlane_host::runtime::Sample {
                        seq: i,
                        send_ns: send,
                        kernel_rx_ns: user - 2_000,
                        user_rx_ns: user,
                    },
                    slot_ns: send,
                    receiver: 0,
                }
            })
            .collect()
    }

    #[test]
    fn evaluate_gives_exact_smallest_perfect_thresholds() {
        let t = 1_000_000;
        let mut acc = Accumulators::new();
        // Lane: one heartbeat 300 µs late, one 900 µs late. Plain: two lost
        // in a row (a gap of 3 T) and the last one 5 ms late (one arriving
        // late but before its successor would only split its gap in two).
        let lane = vec![trace(5000, t, &[], &[(2500, 300_000), (3500, 900_000)])];
        let plain = vec![trace(5000, t, &[100, 101], &[(4999, 5_000_000)])];
        acc.lane_sent = 5000;
        acc.plain_sent = 5000;
        acc.add_round(t, lane, plain).expect("replay");
        // A host gap covering the first late heartbeat's silence, and one
        // covering 800 µs of the second's (none during the plain path's
        // long silences).
        let gap = |after: u64, len_ns| xlane_host::floor::Gap {
            start_realtime_ns: 1_000_000_000 + after * t + 100_000,
            len_ns,
        };
        let gaps = GapIndex::new(&[gap(2499, 400_000), gap(3499, 800_000)]);
        let (d, curves) = evaluate(t, acc, &gaps, &gaps);
        assert_eq!(curves.len(), 3);
        let names: Vec<&str> = d.iter().map(|x| x.name.as_str()).collect();
        assert_eq!(names, [XFD, PLAIN_TIMEOUT, PHI]);
        // Longest gap − T: lane 900 µs + the jitter difference; plain
        // max(3 T − T, 5 ms late): 5 ms + the jitter difference.
        let jit = |i: u64| (i * 7919 % 13) * 1_000;
        let lane_min = 900_000 + jit(3500) as i64 - jit(3499) as i64;
        let plain_min = 5_000_000 + jit(4999) as i64 - jit(4998) as i64;
        assert_eq!(d[0].min_perfect_threshold_ns, Some(lane_min));
        assert_eq!(d[1].min_perfect_threshold_ns, Some(plain_min));
        assert_eq!(d[0].heartbeats, 5000);
        assert_eq!(d[1].heartbeats, 4998);
        assert_eq!(d[1].intervals, 4997);
        // The kernel stamps are a constant shift: the same thresholds.
        assert_eq!(d[0].kernel_min_perfect_threshold_ns, Some(lane_min));
        // Outside host gaps, the first late heartbeat is explained whole;
        // of the second, the 100 µs (and jitter) its gap did not cover
        // stay: what the path needed beyond the gap time. Both are above
        // that Λ, so both are set aside. The plain path had no gap.
        assert_eq!(
            d[0].min_perfect_threshold_outside_host_gaps_ns,
            Some(lane_min - 800_000)
        );
        assert_eq!(d[0].intervals_in_host_gaps, 2);
        assert_eq!(d[0].intervals, 4999);
        assert_eq!(d[0].intervals_in_host_gaps_fraction, 2.0 / 4999.0);
        assert_eq!(d[1].intervals_in_host_gaps, 0);
        assert_eq!(d[1].intervals_in_host_gaps_fraction, 0.0);
        assert_eq!(
            d[1].min_perfect_threshold_outside_host_gaps_ns,
            Some(plain_min)
        );
        for x in &d {
            let min = x.min_perfect_threshold_ns.expect("perfect");
            assert!(x
                .accuracy
                .windows(2)
                .all(|w| w[0].0 < w[1].0 && w[0].1 <= w[1].1));
            assert_eq!(
                x.accuracy.iter().find(|p| p.0 == min).map(|p| p.1),
                Some(1.0)
            );
            assert!(x.accuracy.iter().filter(|p| p.0 < min).all(|p| p.1 < 1.0));
        }
        let p = d[2].phi.as_ref().expect("phi detail");
        assert!(p.min_perfect_phi > 0.0);
        assert!(p.timeout_at_min_perfect_max_ns >= p.timeout_at_min_perfect_mean_ns - 1.0);
    }

    /// Runs with nothing to evaluate: no round, one heartbeat per path
    /// (no interval), every plain heartbeat lost, injections nobody
    /// detected, a window that ended before it started. Each is evaluated,
    /// classified, rendered and plotted; no threshold or ratio is given
    /// where no interval was seen.
    #[test]
    fn degenerate_runs_are_evaluated_classified_rendered_and_plotted() {
        let t = 1_000_000;
        let none = GapIndex::new(&[]);
        // (lane trace, plain trace, want a lane threshold, a plain one)
        type Case = (Option<(u64, u64)>, bool, bool);
        let cases: &[Case] = &[
            (None, false, false),
            (Some((1, 1)), false, false),
            (Some((50, 0)), true, false),
        ];
        let dir = std::env::temp_dir().join(format!("xlane-fd-degenerate-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for &(traces, lane_has, plain_has) in cases {
            let mut acc = Accumulators::new();
            if let Some((lane, plain)) = traces {
                acc.lane_sent = lane;
                acc.plain_sent = lane;
                acc.add_round(
                    t,
                    vec![trace(lane, t, &[], &[])],
                    vec![trace(plain, t, &[], &[])],
                )
                .expect("replay");
            }
            let (d, curves) = evaluate(t, acc, &none, &none);
            assert_eq!(d.len(), 3);
            assert_eq!(
                d[0].min_perfect_threshold_ns.is_some(),
                lane_has,
                "{traces:?} {d:?}"
            );
            assert_eq!(
                d[1].min_perfect_threshold_ns.is_some(),
                plain_has,
                "{traces:?}"
            );
            let kinds = [FailureKind::KillRunner];
            let windows = [
                Window {
                    kind: FailureKind::KillRunner,
                    victim: 1,
                    start_ns: 2_000,
                    end_ns: 3_000,
                },
                // Ended before it started: no event falls in it.
                Window {
                    kind: FailureKind::KillRunner,
                    victim: 2,
                    start_ns: 5_000,
                    end_ns: 4_000,
                },
            ];
            // A suspicion stamped before the run's origin.
            let events = [ev(0, 2, 500, EventKind::Suspected(Reason::Silent))];
            let (f, between, falses) = classify(&hosts(3), &kinds, &windows, &events, 1_000);
            assert_eq!((f[0].injections, f[0].detected, f[0].min_ns), (2, 0, None));
            assert_eq!((between, falses.len()), (1, 1));
            let ratio =
                |i: usize| match (d[i].min_perfect_threshold_ns, d[0].min_perfect_threshold_ns) {
                    (Some(b), Some(x)) if x > 0 => Some(b as f64 / x as f64),
                    _ => None,
                };
            let report = FdBenchReport {
                ratio_plain_over_xfd: ratio(1),
                ratio_phi_over_xfd: ratio(2),
                ratio_plain_over_xfd_outside_host_gaps: None,
                ratio_phi_over_xfd_outside_host_gaps: None,
                host_gap_rule: crate::fd_gaps::RULE.into(),
                detectors: d,
                rounds: Vec::new(),
                floor: Floor {
                    stolen_fraction: 0.0,
                    max_gap_ns: 0,
                    cores: Vec::new(),
                },
                lane_core: None,
                failures: f,
                failure_run: None,
                host_measures: Vec::new(),
                cross_traffic_bps: Vec::new(),
                switch_best_effort_drops: 0,
                plots: Vec::new(),
                params: FdRunParams {
                    hosts: 3,
                    link_rate_bps: 1_000_000_000,
                    period_ns: t,
                    heartbeats_requested: 0,
                    lane_core: 1,
                    cross_traffic: false,
                    cpu_load: false,
                },
            };
            assert!(report.ratio_plain_over_xfd.is_none());
            let text = report.render();
            assert!(!text.contains("NaN") && !text.contains("inf"), "{text}");
            let files = plot::write(&report, &curves, &dir.join("fd-accuracy")).expect("plot");
            assert!(files.iter().all(|p| p.exists()));
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn nines_labels() {
        let y = plot_labels(6.6);
        assert_eq!(
            y,
            ["0%", "90%", "99%", "99.9%", "99.99%", "99.999%", "99.9999%", "100%"]
        );
    }

    fn plot_labels(top: f64) -> Vec<String> {
        plot::nines_labels(top)
    }

    #[test]
    fn curve_indices_cover_the_tail() {
        for n in [0usize, 1, 10, 1000, 1_000_000] {
            let v = curve_indices(n);
            assert!(v.windows(2).all(|w| w[0] < w[1]));
            assert!(v.iter().all(|&i| i < n));
            if n > 0 {
                assert_eq!(v.last(), Some(&(n - 1)));
                assert!(v.len() <= n);
            }
        }
    }
}
