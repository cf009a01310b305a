//! Runs `xlane bench fd`: brings up the testbed and host measures, then runs
//! part 1 and part 2 and writes the plot.

use super::accuracy::{accuracy_part, accuracy_run_bound_ns, AccuracyOutcome};
use super::config::{FdBenchConfig, PHI, PLAIN_TIMEOUT, XFD, XFD_POLL};
use super::error::FdBenchError;
use super::failure::{failure_lambda, failure_part, failure_seconds_bound};
use super::plot;
use super::report::{FdBenchReport, FdRunParams};
use crate::interference::{
    apply_host_measures, restore_host_measures, switch_drops, BenchError, Cores, Floor, FloorSet,
    Interference, Stage,
};
use xlane_host::runtime::lock_memory;
use xlane_testbed::{CrossTraffic, Testbed};

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
    let stage = Stage::up(
        cfg.hosts,
        cfg.link_rate_bps,
        None,
        cfg.best_effort_queue_pkts,
        cfg.lane_core,
        progress,
    )?;
    let (tuning, host_measures) = apply_host_measures(cfg.tuning, cfg.lane_core, progress)?;
    let _ = lock_memory();
    let result = run_parts(cfg, &stage.tb, &stage.cores, host_measures, progress);
    restore_host_measures(tuning, progress);
    stage.tear_down(progress);
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
    let (detectors, curves, rounds, lane_use, lane_use_poll) = match acc {
        Some(a) => (
            a.detectors,
            a.curves,
            a.rounds,
            Some(a.lane_use),
            a.lane_use_poll,
        ),
        None => (Vec::new(), Vec::new(), Vec::new(), None, None),
    };
    let lane_core = lane_use.map(|u| u.budget(floor.stolen_fraction));
    let lane_core_polling = lane_use_poll.map(|u| u.budget(floor.stolen_fraction));
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
    let ratio_of = |a: Option<i64>, b: Option<i64>| match (a, b) {
        (Some(a), Some(b)) if b > 0 => Some(a as f64 / b as f64),
        _ => None,
    };
    let ratio_outside = |name: &str| ratio_of(outside(name), outside(XFD));
    let (failures, failure_run) = match failures {
        Some((f, r)) => (f, Some(r)),
        None => (Vec::new(), None),
    };
    let mut report = FdBenchReport {
        ratio_plain_over_xfd: ratio(PLAIN_TIMEOUT),
        ratio_phi_over_xfd: ratio(PHI),
        ratio_plain_over_xfd_outside_host_gaps: ratio_outside(PLAIN_TIMEOUT),
        ratio_phi_over_xfd_outside_host_gaps: ratio_outside(PHI),
        ratio_plain_over_xfd_poll_outside_host_gaps: ratio_of(
            outside(PLAIN_TIMEOUT),
            outside(XFD_POLL),
        ),
        ratio_xfd_over_xfd_poll_outside_host_gaps: ratio_of(outside(XFD), outside(XFD_POLL)),
        lane_core_polling,
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
