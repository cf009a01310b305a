//! The report of `xlane bench fd`: the results of both parts, as serialised.

use super::config::FailureKind;
use crate::budget::LaneCoreBudget;
use crate::interference::Floor;
use serde::Serialize;
use xlane_fd::Reason;

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
    /// The first false suspicions (at most [`MAX_FALSE_LISTED`](super::config::MAX_FALSE_LISTED)).
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
    /// The lane core's budget during part 1's lane flows (none without
    /// part 1; the interrupt rounds' when both ways of waiting are compared).
    pub lane_core: Option<LaneCoreBudget>,
    /// The lane core's budget during the polling rounds of a comparison.
    pub lane_core_polling: Option<LaneCoreBudget>,
    /// plain-timeout / X-FD on the polling core, outside host gaps (a
    /// comparison only).
    pub ratio_plain_over_xfd_poll_outside_host_gaps: Option<f64>,
    /// X-FD sleeping / X-FD polling, smallest perfect Λ outside host gaps
    /// (a comparison only).
    pub ratio_xfd_over_xfd_poll_outside_host_gaps: Option<f64>,
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
