//! The targets a run is checked against, and the report as tables.

use super::{Beacons, Failure, Mode, PipeBenchConfig, PipeReport, PointOut, Target};

/// The targets on this run: no ordering or atomicity violation
/// over at least `messages`; per latency point pair, the ordering
/// overhead of best effort within 3 beacon intervals plus the idle
/// floor's median hop, and reliable's median within 3× best effort's.
pub(super) fn targets(
    cfg: &PipeBenchConfig,
    pts: &[PointOut],
    hop: u64,
    messages: u64,
) -> Vec<Target> {
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
    // The lane phase: the processes' beacons on their tunnels wait less
    // for the barrier than on the regular path, behind the flows.
    let lane = |m: Mode, b: Beacons| {
        pts.iter()
            .find(|p| p.phase == "lane" && p.mode == m && p.beacons == b)
    };
    if let (Some(reg), Some(li)) = (
        lane(Mode::BestEffort, Beacons::Regular),
        lane(Mode::BestEffort, Beacons::LaneIn),
    ) {
        t.push(Target {
            name: "lane phase, best effort: wait p99 with beacons on lane tunnels ≤ on the regular path"
                .into(),
            value: li.wait_p99_ns as f64,
            bound: reg.wait_p99_ns as f64,
            met: li.wait_p99_ns <= reg.wait_p99_ns,
        });
    }
    t
}

/// `median / p99`.
fn pair(p50: u64, p99: u64) -> String {
    format!(
        "{} / {}",
        crate::table::fmt_ns(p50),
        crate::table::fmt_ns(p99)
    )
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
            pair(p.unordered_p50_ns, p.unordered_p99_ns),
            pair(p.delivered_p50_ns, p.delivered_p99_ns),
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
    if phase("lane").next().is_some() {
        s += "\nLane (beacons on controller-allocated express-lane tunnels; hop on its own host; only the first host's processes send; flows between the other hosts): wait = delivery − arrival, median / p99\n";
        let mut t = Table::new(&[
            "mode",
            "beacons",
            "background",
            "messages",
            "unordered",
            "delivered",
            "wait",
            "late",
            "lane frames (lost)",
            "refused",
            "capped",
            "silent (false)",
            "floor gap",
        ]);
        for p in phase("lane") {
            t.row(vec![
                p.mode.name().into(),
                p.beacons.name().into(),
                format!("{:.0} Mbit/s", p.background_bps as f64 / 1e6),
                p.messages.to_string(),
                pair(p.unordered_p50_ns, p.unordered_p99_ns),
                pair(p.delivered_p50_ns, p.delivered_p99_ns),
                pair(p.wait_p50_ns, p.wait_p99_ns),
                p.late.to_string(),
                format!("{} ({})", p.lane_received, p.lane_lost),
                p.lane_refused.to_string(),
                p.lane_capped.to_string(),
                format!("{} ({})", p.suspicions.len(), p.false_suspicions),
                fmt_ns(p.floor_max_gap_ns),
            ]);
        }
        s += &t.render();
        let mut t = Table::new(&["tunnel", "from", "to", "period", "announced range"]);
        for x in &r.lane_tunnels {
            t.row(vec![
                x.tunnel.to_string(),
                x.from.clone(),
                x.to.join(","),
                format!(
                    "{}{}",
                    fmt_ns(x.period_ns),
                    if x.period_raised { " (raised)" } else { "" }
                ),
                format!("{}–{}", fmt_ns(x.min_latency_ns), fmt_ns(x.max_latency_ns)),
            ]);
        }
        s += "\nBeacon tunnels granted by the controller (σ 110 B, sub-lane 0):\n";
        s += &t.render();
        if !r.lane_upcalls.is_empty() {
            s += &format!("Upcalls: {}\n", r.lane_upcalls.join("; "));
        }
    }
    let early: Vec<String> = r
        .points
        .iter()
        .filter_map(|p| {
            let why = p.early_end()?;
            Some(format!(
                "  {}, {}, {} processes: {why}\n",
                p.phase,
                p.mode.name(),
                p.procs
            ))
        })
        .collect();
    if !early.is_empty() {
        s += "\nPoints that stopped sending early:\n";
        s += &early.concat();
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
