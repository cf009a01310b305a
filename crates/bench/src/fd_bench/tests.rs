//! Tests of `xlane bench fd`: classification, the phi axis, the replay and
//! its evaluation, the text report and the plot.

use super::analysis::{curve_indices, evaluate, PhiAxis};
use super::classify::classify;
use super::config::*;
use super::plot;
use super::replay::Accumulators;
use super::report::*;
use crate::attribution::GapIndex;
use crate::flows::FlowSample;
use crate::interference::Floor;
use std::net::{Ipv4Addr, SocketAddrV4};
use xlane_fd::{Event, EventKind, Reason};
use xlane_testbed::HostInfo;

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
                send_returned_ns: 0,
                send_driver_ns: 0,
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
    acc.add_round(t, lane, plain, false).expect("replay");
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
                false,
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
        let ratio = |i: usize| match (d[i].min_perfect_threshold_ns, d[0].min_perfect_threshold_ns)
        {
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
            lane_core_polling: None,
            ratio_plain_over_xfd_poll_outside_host_gaps: None,
            ratio_xfd_over_xfd_poll_outside_host_gaps: None,
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

/// A run that compares both ways of waiting: the rounds take turns, the
/// polling rounds' lane heartbeats feed a detector of their own, and the
/// plain baselines take every round's.
#[test]
fn a_comparison_keeps_the_polling_rounds_apart() {
    use super::config::{LaneModes, XFD_POLL};
    use xlane_host::runtime::WaitMode;
    // (mode, round, want wait mode, want polling round)
    let cases = [
        (
            LaneModes::One(WaitMode::Interrupt),
            1,
            WaitMode::Interrupt,
            false,
        ),
        (
            LaneModes::One(WaitMode::BusyPoll),
            0,
            WaitMode::BusyPoll,
            false,
        ),
        (LaneModes::Both, 0, WaitMode::Interrupt, false),
        (LaneModes::Both, 1, WaitMode::BusyPoll, true),
        (LaneModes::Both, 2, WaitMode::Interrupt, false),
    ];
    for (m, round, want, polling) in cases {
        assert_eq!((m.of_round(round), m.polling_round(round)), (want, polling));
    }
    for (s, want) in [
        ("both", Some(LaneModes::Both)),
        ("busy-poll", Some(LaneModes::One(WaitMode::BusyPoll))),
        ("interrupt", Some(LaneModes::One(WaitMode::Interrupt))),
        ("sometimes", None),
    ] {
        assert_eq!(s.parse::<LaneModes>().ok(), want, "{s}");
    }
    let t = 1_000_000;
    let mut acc = Accumulators::new();
    // Sleeping: one heartbeat 300 µs late; polling: one 40 µs late.
    acc.add_round(
        t,
        vec![trace(2000, t, &[], &[(1000, 300_000)])],
        vec![trace(2000, t, &[], &[])],
        false,
    )
    .expect("replay");
    acc.add_round(
        t,
        vec![trace(2000, t, &[], &[(500, 40_000)])],
        vec![trace(2000, t, &[], &[])],
        true,
    )
    .expect("replay");
    acc.lane_sent = 2000;
    acc.lane_sent_poll = 2000;
    let none = GapIndex::default();
    let (d, curves) = evaluate(t, acc, &none, &none);
    let names: Vec<&str> = d.iter().map(|x| x.name.as_str()).collect();
    assert_eq!(names, [XFD, PLAIN_TIMEOUT, PHI, XFD_POLL]);
    assert_eq!(curves.len(), 4);
    assert_eq!(
        (d[0].heartbeats, d[3].heartbeats, d[1].heartbeats),
        (2000, 2000, 4000)
    );
    let jit = |i: u64| (i * 7919 % 13) as i64 * 1_000;
    assert_eq!(
        d[0].min_perfect_threshold_ns,
        Some(300_000 + jit(1000) - jit(999))
    );
    assert_eq!(
        d[3].min_perfect_threshold_ns,
        Some(40_000 + jit(500) - jit(499))
    );
    assert_eq!(d[3].kernel_min_perfect_threshold_ns, None);
}
