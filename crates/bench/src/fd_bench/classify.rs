//! Part 2's analysis: sorts every suspicion into detections, partition
//! suspicions and false suspicions.

use super::config::{host_of, FailureKind};
use super::report::{FailureReport, FalseSuspicion, Window};
use std::collections::BTreeMap;
use xlane_fd::{Event, EventKind, Reason};
use xlane_testbed::HostInfo;

/// Sorts every suspicion into detections, partition suspicions and false
/// suspicions; returns the per-kind reports, the false suspicions outside
/// every injection, and every false suspicion.
pub(super) fn classify(
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
