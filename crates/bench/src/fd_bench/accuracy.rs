//! Part 1, accuracy against the threshold: runs the rounds of heartbeats on the
//! lane and on plain UDP.

use super::analysis::evaluate;
use super::config::{lane_group, plain_group, FdBenchConfig, LaneModes, XFD};
use super::error::FdBenchError;
use super::replay::{pairs, Accumulators};
use super::report::{DetectorReport, RoundReport};
use crate::attribution::GapIndex;
use crate::budget::LaneCoreUse;
use crate::flows::{run_flows, FlowPlan, FlowResult, Variant};
use crate::interference::{BenchError, Cores, Floor, FloorSet};
use crate::table::fmt_ns;
use std::sync::atomic::AtomicBool;
use xlane_host::runtime::WaitMode;
use xlane_host::socket::realtime_ns;
use xlane_testbed::Testbed;

pub(super) struct AccuracyOutcome {
    pub(super) detectors: Vec<DetectorReport>,
    /// The floor during part 1.
    pub(super) floor: Floor,
    /// Exact accuracy staircases for the plot, in `detectors` order.
    pub(super) curves: Vec<Vec<(f64, f64)>>,
    pub(super) rounds: Vec<RoundReport>,
    /// The lane core's use over the rounds (the interrupt ones, when
    /// both ways of waiting are compared).
    pub(super) lane_use: LaneCoreUse,
    /// The lane core's use over the polling rounds of a comparison.
    pub(super) lane_use_poll: Option<LaneCoreUse>,
    /// X-FD's smallest perfect Λ on kernel stamps (what the runner sees).
    pub(super) xfd_kernel_lambda: Option<i64>,
}

/// Part 1's expected length, ns: each of its rounds as long as the first
/// (every heartbeat needed at the nominal rate), plus leads. Rounds that
/// run longer (a path that lost many) report gaps they could not keep.
pub(super) fn accuracy_run_bound_ns(cfg: &FdBenchConfig) -> u64 {
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

pub(super) fn accuracy_part(
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
    let mut lane_use_poll = LaneCoreUse::default();
    let mut rounds = Vec::new();
    let mut lane_rate = nominal_rate;
    let mut plain_rate = nominal_rate;
    let both = cfg.lane_mode == LaneModes::Both;
    // A comparison takes turns: twice the rounds.
    let max_rounds = cfg.max_rounds.max(1) * if both { 2 } else { 1 };
    for round in 0..max_rounds {
        let polling = cfg.lane_mode.polling_round(round);
        let xfd_need = need.saturating_sub(acc.xfd.arrivals);
        let poll_need = if both {
            need.saturating_sub(acc.xfd_poll.arrivals)
        } else {
            0
        };
        let lane_need = if polling { poll_need } else { xfd_need };
        let plain_need = need.saturating_sub(acc.plain.arrivals);
        if xfd_need == 0 && poll_need == 0 && plain_need == 0 {
            break;
        }
        let floor_rate = nominal_rate * 0.02;
        let secs = round_seconds(
            (lane_need as f64 / lane_rate.max(floor_rate))
                .max(plain_need as f64 / plain_rate.max(floor_rate)),
        );
        let duration_ns = (secs * 1e9) as u64;
        let mode = cfg.lane_mode.of_round(round);
        progress(&format!(
            "round {}: running {:.1} s, the lane loop {} (lane needs {} more heartbeats, plain {})",
            round + 1,
            secs,
            if mode == WaitMode::BusyPoll {
                "polling"
            } else {
                "sleeping when idle"
            },
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
                lane_mode: mode,
                sender: hosts[h].clone(),
                receivers: hosts.iter().filter(|o| o.index != h).cloned().collect(),
                first_slot_ns: start_ns + offset,
                until_ns,
                grace_ns: 300_000_000,
                qjump: None,
                mac: None,
                tx_stamps: false,
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
        let used = LaneCoreUse::of_run(&run, cfg.lane_core);
        if polling {
            lane_use_poll.add(&used);
        } else {
            lane_use.add(&used);
        }
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
        if polling {
            acc.lane_sent_poll += r.lane_sent;
        } else {
            acc.lane_sent += r.lane_sent;
        }
        acc.plain_sent += r.plain_sent;
        rounds.push(r);
        let lane_pairs = pairs(lane, &receivers[..n]);
        let plain_pairs = pairs(plain, &receivers[n..]);
        drop(flows);
        acc.add_round(cfg.period_ns, lane_pairs, plain_pairs, polling)?;
    }
    let poll_short = both && acc.xfd_poll.arrivals < need;
    if acc.xfd.arrivals < need || acc.plain.arrivals < need || poll_short {
        progress(&format!(
            "warning: after {} rounds the lane has {}{} and plain UDP {} heartbeats, fewer than the {} asked for",
            rounds.len(),
            acc.xfd.arrivals,
            if both {
                format!(" (polling {})", acc.xfd_poll.arrivals)
            } else {
                String::new()
            },
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
        lane_use_poll: both.then_some(lane_use_poll),
        xfd_kernel_lambda,
    })
}

/// Time from starting a round's threads to its first heartbeat.
const ROUND_LEAD_NS: u64 = 1_000_000_000;
