//! The text report of `xlane bench kv`: a table per scenario, the ratios
//! that answer the benchmark's question, and each scenario's floor, lane
//! core and cross traffic.

use std::fmt::Write as _;

use super::{KvBenchReport, Ratio, System, SystemReport};
use crate::interference::render_cross_traffic;
use crate::table::{fmt_ns, Table};

/// The ratios stated per scenario and replica count: under interference
/// (`both`, `cross`, `cpu`) etcd's and Redis' mean and p99 over those of
/// xlane kv over the lane; when idle, the lane's mean over plain UDP's and
/// xlane kv's writes/s over Redis'. Pairs with a system missing or not
/// available are left out.
///
/// A failed write took at least `timeout_ns` (it was not visible on every
/// member by then), so a system with failed timed writes counts them at
/// the timeout: its mean is then a lower bound, and so is its p99 once more
/// than 1 % of its writes failed (with none visible at all, both are the
/// timeout). Such ratios are marked `lower_bound`.
///
/// A ratio is only stated when both figures were measured: a latency ratio
/// needs a timed write (visible or failed) on both sides, a writes/s ratio
/// a throughput phase on both sides and a non-zero denominator, and the
/// denominator must not itself be a lower bound (the quotient would be
/// bounded in no direction the report could state). Otherwise the pair is
/// left out, not reported as 0, infinite or exact.
pub fn ratios(systems: &[SystemReport], timeout_ns: u64) -> Vec<Ratio> {
    let find = |sc: &str, n: usize, name: &str| {
        systems
            .iter()
            .find(|s| s.scenario == sc && s.replicas == n && s.name == name && s.available)
    };
    let mut keys: Vec<(String, usize)> = Vec::new();
    for s in systems {
        let k = (s.scenario.clone(), s.replicas);
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    let mut out = Vec::new();
    for (sc, n) in keys {
        let pairs: &[(&str, &str, &str)] = if sc == "idle" {
            &[
                ("mean", "xlane-lane", "xlane"),
                ("writes/s", "xlane", "redis"),
            ]
        } else {
            &[
                ("p99", "etcd", "xlane-lane"),
                ("mean", "etcd", "xlane-lane"),
                ("p99", "redis", "xlane-lane"),
                ("mean", "redis", "xlane-lane"),
            ]
        };
        for &(metric, a, b) in pairs {
            let (Some(x), Some(y)) = (find(&sc, n, a), find(&sc, n, b)) else {
                continue;
            };
            let measured = |s: &SystemReport| match metric {
                "writes/s" => s.throughput_ns > 0,
                _ => s.latency_writes + s.errors > 0,
            };
            if !measured(x) || !measured(y) {
                continue;
            }
            let t = timeout_ns as f64;
            // (figure, whether it is a lower bound)
            let v = |s: &SystemReport| {
                let (ok, failed) = (s.latency_writes as f64, s.errors as f64);
                match metric {
                    "p99" if failed > 0.01 * (ok + failed) => (t.max(s.p99_ns as f64), true),
                    "p99" => (s.p99_ns as f64, false),
                    "mean" if failed > 0.0 => {
                        ((s.mean_ns as f64 * ok + t * failed) / (ok + failed), true)
                    }
                    "mean" => (s.mean_ns as f64, false),
                    _ => (s.ops_per_s, false),
                }
            };
            let ((vx, lx), (vy, ly)) = (v(x), v(y));
            // A denominator of 0 (no write/s, or a latency of 0 ns) has no
            // finite ratio; one that is only a lower bound no stated one.
            if ly || vy.is_nan() || vy <= 0.0 {
                continue;
            }
            out.push(Ratio {
                scenario: sc.clone(),
                replicas: n,
                metric: metric.to_string(),
                system: a.to_string(),
                versus: b.to_string(),
                ratio: vx / vy,
                lower_bound: lx,
            });
        }
    }
    out
}

/// Mean, p50, p99, p99.9, max and acknowledgement p50 as the table prints
/// them: "–" when none of the system's timed writes became visible (a 0
/// would read as the fastest).
fn latency_cells(s: &SystemReport) -> [String; 6] {
    let ns = [
        s.mean_ns,
        s.p50_ns,
        s.p99_ns,
        s.p999_ns,
        s.max_ns,
        s.ack_p50_ns,
    ];
    ns.map(|v| {
        if s.latency_writes > 0 {
            fmt_ns(v)
        } else {
            "–".to_string()
        }
    })
}

/// The label of a system name.
pub fn label_of(name: &str) -> &str {
    match System::from_name(name) {
        Some(s) => s.label(),
        None => name,
    }
}

impl KvBenchReport {
    /// The report as text tables.
    pub fn render(&self) -> String {
        let w = &self.workload;
        let mut out = format!(
            "Replicated writes, time until visible on every member (X-Lane §6.5)\n\
             values: truncated normal mean {} B σ {} B in [{}, {}] B (observed mean {:.1} B σ {:.1} B), seed {}\n\
             latency: {} sequential writes after a warm-up; visible = {}\n\
             throughput: {} closed-loop clients for {} s; a write not visible everywhere in {} s fails\n\
             rounds: {} per phase, the systems side by side taking turns (order alternating)\n\
             placement: {}\n",
            w.mean_size,
            w.sd_size,
            w.min_size,
            w.max_size,
            w.observed_mean,
            w.observed_sd,
            w.seed,
            w.writes,
            w.visibility,
            w.clients,
            w.seconds,
            w.timeout_s,
            w.rounds,
            w.placement,
        );
        for c in &self.scenarios {
            let _ = writeln!(out, "\n== scenario {} ==", c.scenario);
            let mut t = Table::new(&[
                "system",
                "replicas",
                "mean",
                "p50",
                "p99",
                "p99.9",
                "max",
                "ack p50",
                "writes/s",
                "failed",
                "leader chg",
                "lane core",
            ]);
            let mut notes = Vec::new();
            for s in self.systems.iter().filter(|s| s.scenario == c.scenario) {
                let label = label_of(&s.name).to_string();
                if s.available {
                    let [mean, p50, p99, p999, max, ack] = latency_cells(s);
                    t.row(vec![
                        label.clone(),
                        s.replicas.to_string(),
                        mean,
                        p50,
                        p99,
                        p999,
                        max,
                        ack,
                        if s.throughput_ns > 0 {
                            format!("{:.0}", s.ops_per_s)
                        } else {
                            "–".into()
                        },
                        s.errors.to_string(),
                        s.leader_changes.to_string(),
                        s.lane_core_busy
                            .map_or("–".into(), |b| format!("{:.0}%", 100.0 * b)),
                    ]);
                } else {
                    t.row(vec![label.clone(), s.replicas.to_string(), "n/a".into()]);
                }
                if let Some(r) = &s.reason {
                    let what = if s.available { "" } else { "not available: " };
                    notes.push(format!("{label} with {} members: {what}{r}", s.replicas));
                }
            }
            out.push_str(&t.render());
            out.push_str(
                "failed: writes refused or not visible on every member in time; leader chg: raft \
                 terms begun (etcd, xlane kv) or roles changed (Redis); lane core: its busy share \
                 during that system's rounds; –: not measured (no write timed, no throughput \
                 round, /proc/stat unreadable)\n",
            );
            for n in notes {
                let _ = writeln!(out, "{n}");
            }
            for r in self.ratios.iter().filter(|r| r.scenario == c.scenario) {
                let _ = writeln!(
                    out,
                    "{} / {} {} with {} members: {}{:.2}×",
                    r.system,
                    r.versus,
                    r.metric,
                    r.replicas,
                    if r.lower_bound { "≥ " } else { "" },
                    r.ratio
                );
            }
            out.push_str(&c.floor.render(c.lane_core.core));
            let l = &c.lane_core;
            let pct = |x: f64| format!("{:.1}%", 100.0 * x);
            let lane = if super::cpu_measured(&l.cpu) {
                format!(
                    "busy {} (softirq {}, system {}, user {}), idle {}",
                    pct(l.busy_fraction),
                    pct(l.cpu.softirq),
                    pct(l.cpu.system),
                    pct(l.cpu.user),
                    pct(l.headroom)
                )
            } else {
                "not measured (/proc/stat unreadable)".to_string()
            };
            let _ = writeln!(
                out,
                "lane core {} over the scenario: {lane}, machine {}{}",
                l.core,
                pct(l.machine_fraction),
                if l.saturated { "; SATURATED" } else { "" }
            );
            if !c.cross_traffic_bps.is_empty() {
                out.push_str(&render_cross_traffic(
                    &c.cross_traffic_bps,
                    c.switch_best_effort_drops,
                    c.link_rate_bps,
                ));
            }
            for p in c.plots.iter().filter(|p| p.ends_with(".png")) {
                let _ = writeln!(out, "plot: {p}");
            }
        }
        out.push('\n');
        let mut seen = Vec::new();
        for s in &self.systems {
            if !seen.contains(&s.name) {
                seen.push(s.name.clone());
                let _ = writeln!(
                    out,
                    "{}: {}{}",
                    label_of(&s.name),
                    s.durability,
                    if s.version.is_empty() {
                        String::new()
                    } else {
                        format!(" [{}]", s.version)
                    }
                );
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::super::{KvLaneCore, ScenarioConditions, Workload};
    use super::*;
    use crate::interference::Floor;
    use xlane_host::budget::CpuShares;

    fn mk(sc: &str, name: &str, n: usize, mean: u64, p99: u64, ops: f64) -> SystemReport {
        let mut r = super::super::empty_report(super::super::Scenario::Idle, System::Xlane, n);
        r.scenario = sc.into();
        r.name = name.into();
        r.available = true;
        r.mean_ns = mean;
        r.p99_ns = p99;
        r.ops_per_s = ops;
        // Measured figures come with their samples.
        r.latency_writes = if mean > 0 { 100 } else { 0 };
        r.throughput_ns = if ops > 0.0 { 1_000_000_000 } else { 0 };
        r
    }

    fn report_of(systems: Vec<SystemReport>, cpu: CpuShares) -> KvBenchReport {
        KvBenchReport {
            ratios: ratios(&systems, 1_000_000),
            systems,
            scenarios: vec![ScenarioConditions {
                scenario: "both".into(),
                floor: Floor {
                    stolen_fraction: 0.0,
                    max_gap_ns: 0,
                    cores: Vec::new(),
                },
                lane_core: KvLaneCore {
                    core: 1,
                    busy_fraction: 1.0 - cpu.idle,
                    headroom: cpu.idle,
                    saturated: super::super::cpu_measured(&cpu)
                        && cpu.idle < crate::budget::SATURATION_HEADROOM,
                    cpu,
                    ..KvLaneCore::default()
                },
                cross_traffic_bps: Vec::new(),
                switch_best_effort_drops: 0,
                link_rate_bps: 40_000_000,
                plots: Vec::new(),
            }],
            workload: Workload {
                mean_size: 25.6,
                sd_size: 10.0,
                min_size: 1,
                max_size: super::super::MAX_SIZE,
                observed_mean: 0.0,
                observed_sd: 0.0,
                seed: 1,
                writes: 10,
                clients: 1,
                rounds: 1,
                seconds: 1.0,
                timeout_s: 1.0,
                visibility: String::new(),
                placement: String::new(),
            },
        }
    }

    /// Every degenerate input a run can leave behind goes through the
    /// ratios, the text and the figure; what was not measured shows as
    /// such ("–", "n/a", "not measured", no ratio), never as a 0.
    #[test]
    fn degenerate_inputs_are_analysed_and_reported() {
        let one = |name: &str| {
            let mut r = mk("both", name, 3, 0, 0, 0.0);
            (r.latency_writes, r.mean_ns, r.p50_ns, r.p99_ns) = (1, 700, 700, 700);
            (r.min_ns, r.max_ns, r.p999_ns) = (700, 700, 700);
            r
        };
        let nothing = |name: &str| mk("both", name, 3, 0, 0, 0.0);
        let all_failed = |name: &str| {
            let mut r = nothing(name);
            r.errors = 5;
            r.reason = Some("first failed write: k: not visible".into());
            r
        };
        let off = |name: &str| {
            let mut r = nothing(name);
            r.available = false;
            r.reason = Some("did not start".into());
            r
        };
        let measured = CpuShares {
            idle: 0.05,
            user: 0.95,
            ..CpuShares::default()
        };
        // (case, systems, lane core, ratios stated (metric, lower bound),
        //  "–" cells in etcd's row (None: no row), text the render must
        //  contain, text it must not)
        type Case = (
            &'static str,
            Vec<SystemReport>,
            CpuShares,
            Vec<(&'static str, bool)>,
            Option<usize>,
            Vec<&'static str>,
            Vec<&'static str>,
        );
        let cases: Vec<Case> = vec![
            (
                "no system at all",
                vec![],
                CpuShares::default(),
                vec![],
                None,
                vec![
                    "== scenario both ==",
                    "lane core 1 over the scenario: not measured",
                ],
                vec!["SATURATED", " / xlane-lane"],
            ),
            (
                "every system failed to start",
                vec![off("xlane-lane"), off("etcd"), off("redis")],
                CpuShares::default(),
                vec![],
                Some(0),
                vec!["n/a", "etcd with 3 members: not available: did not start"],
                vec![" / xlane-lane"],
            ),
            (
                "available, nothing timed, no throughput round",
                vec![nothing("xlane-lane"), nothing("etcd")],
                CpuShares::default(),
                vec![],
                // 6 latencies, writes/s, lane core.
                Some(8),
                vec![],
                vec![" / xlane-lane"],
            ),
            (
                "every write failed, against one sample",
                vec![one("xlane-lane"), all_failed("etcd")],
                measured,
                vec![("p99", true), ("mean", true)],
                Some(8),
                vec![
                    "etcd / xlane-lane p99 with 3 members: ≥ ",
                    "first failed write",
                    "SATURATED",
                ],
                vec!["over the scenario: not measured"],
            ),
            (
                "one sample against a denominator with none visible",
                vec![all_failed("xlane-lane"), one("etcd"), nothing("redis")],
                measured,
                vec![],
                Some(2),
                vec![],
                vec![" / xlane-lane"],
            ),
        ];
        let dir = std::env::temp_dir().join(format!("xlane-kv-degenerate-{}", std::process::id()));
        for (case, systems, cpu, want_ratios, etcd_dashes, has, lacks) in cases {
            let r = report_of(systems, cpu);
            let got: Vec<(&str, bool)> = r
                .ratios
                .iter()
                .map(|x| (x.metric.as_str(), x.lower_bound))
                .collect();
            assert_eq!(got, want_ratios, "{case}: {:?}", r.ratios);
            assert!(
                r.ratios
                    .iter()
                    .all(|x| x.ratio.is_finite() && x.ratio > 0.0),
                "{case}: {:?}",
                r.ratios
            );
            let text = r.render();
            let row = text.lines().find(|l| l.starts_with("etcd "));
            assert_eq!(
                row.map(|l| l.matches('–').count()),
                etcd_dashes,
                "{case}: etcd's row in\n{text}"
            );
            for h in has {
                assert!(text.contains(h), "{case}: no {h:?} in\n{text}");
            }
            for l in lacks {
                assert!(!text.contains(l), "{case}: {l:?} in\n{text}");
            }
            let files = super::super::plot::plot(&r.systems, "both", &dir.join("fig8"))
                .unwrap_or_else(|e| panic!("{case}: {e}"));
            assert!(files.iter().all(|f| f.is_file()), "{case}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn no_visible_write_prints_no_latency() {
        let mut none = mk("both", "etcd", 3, 0, 0, 0.0);
        none.errors = 17;
        assert_eq!(
            latency_cells(&none),
            ["–", "–", "–", "–", "–", "–"].map(String::from)
        );
        let mut some = mk("both", "etcd", 3, 2_000_000, 3_000_000, 1.0);
        (some.latency_writes, some.p50_ns) = (3, 1_500_000);
        let cells = latency_cells(&some);
        assert_eq!(cells[0], fmt_ns(2_000_000));
        assert_eq!(cells[1], fmt_ns(1_500_000));
        assert_eq!(cells[2], fmt_ns(3_000_000));
    }

    #[test]
    fn ratios_pair_systems_per_scenario_and_replica_count() {
        let mut off = mk("both", "redis", 3, 1, 1, 1.0);
        off.available = false;
        let mut failed = mk("both", "redis", 5, 0, 0, 0.0);
        failed.errors = 4;
        let mut some = mk("both", "etcd", 5, 5000, 40_000, 1.0);
        (some.latency_writes, some.errors) = (99, 1);
        let r = ratios(
            &[
                mk("idle", "xlane", 3, 100, 200, 1000.0),
                mk("idle", "xlane-lane", 3, 150, 300, 900.0),
                mk("idle", "redis", 3, 80, 90, 500.0),
                mk("both", "xlane-lane", 3, 100, 1000, 10.0),
                mk("both", "etcd", 3, 5000, 40_000, 1.0),
                off,
                some,
                failed,
                mk("both", "xlane-lane", 5, 100, 1000, 10.0),
            ],
            1_000_000,
        );
        let got: Vec<(&str, usize, &str, &str, &str, f64, bool)> = r
            .iter()
            .map(|x| {
                (
                    x.scenario.as_str(),
                    x.replicas,
                    x.metric.as_str(),
                    x.system.as_str(),
                    x.versus.as_str(),
                    x.ratio,
                    x.lower_bound,
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                ("idle", 3, "mean", "xlane-lane", "xlane", 1.5, false),
                ("idle", 3, "writes/s", "xlane", "redis", 2.0, false),
                ("both", 3, "p99", "etcd", "xlane-lane", 40.0, false),
                ("both", 3, "mean", "etcd", "xlane-lane", 50.0, false),
                // 1 of 100 failed: p99 as measured, mean counts it at 1 ms.
                ("both", 5, "p99", "etcd", "xlane-lane", 40.0, false),
                ("both", 5, "mean", "etcd", "xlane-lane", 149.5, true),
                // Every write failed: both at the 1 ms timeout.
                ("both", 5, "p99", "redis", "xlane-lane", 1000.0, true),
                ("both", 5, "mean", "redis", "xlane-lane", 10000.0, true),
            ]
        );
    }
}
