//! Part 2, real failures: the runners' Λ, the fleet and the injections.

use super::classify::classify;
use super::config::{
    host_of, FailureKind, FailurePlan, FdBenchConfig, DEFAULT_FAILURE_LAMBDA_NS, MAX_FALSE_LISTED,
};
use super::error::FdBenchError;
use super::fleet::{io_file, signal, Fleet, Sig};
use super::recorder::{Observer, Recorder};
use super::report::{FailureReport, FailureRun, Window};
use crate::attribution::GapIndex;
use crate::interference::{Cores, FloorSet};
use crate::table::fmt_ns;
use std::path::PathBuf;
use std::time::{Duration, Instant};
use xlane_fd::{Event, EventKind};
use xlane_host::socket::realtime_ns;
use xlane_testbed::Testbed;

/// Part 2's Λ and where it came from: given, from part 1's measurement
/// (`(smallest perfect Λ, longest host gap)`), or the default.
pub(super) fn failure_lambda(plan: &FailurePlan, measured: Option<(i64, u64)>) -> (u64, String) {
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
pub(super) fn failure_seconds_bound(plan: &FailurePlan, lambda_ns: u64, period_ns: u64) -> u64 {
    let stall = failure_stall_periods(plan, lambda_ns, period_ns) as u64;
    let injections = (plan.kinds.len() * plan.repetitions) as u64;
    120 + injections * (30 + 2 * (lambda_ns + stall * period_ns) / 1_000_000_000)
}

pub(super) fn failure_part(
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
