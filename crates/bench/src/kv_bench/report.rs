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
            out.push(Ratio {
                scenario: sc.clone(),
                replicas: n,
                metric: metric.to_string(),
                system: a.to_string(),
                versus: b.to_string(),
                ratio: if vy > 0.0 { vx / vy } else { 0.0 },
                lower_bound: lx && !ly,
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
                        format!("{:.0}", s.ops_per_s),
                        s.errors.to_string(),
                        s.leader_changes.to_string(),
                        format!("{:.0}%", 100.0 * s.lane_core_busy),
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
                 during that system's rounds\n",
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
            let _ = writeln!(
                out,
                "lane core {} over the scenario: busy {} (softirq {}, system {}, user {}), idle {}, \
                 machine {}{}",
                l.core,
                pct(l.busy_fraction),
                pct(l.cpu.softirq),
                pct(l.cpu.system),
                pct(l.cpu.user),
                pct(l.headroom),
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
    use super::*;

    fn mk(sc: &str, name: &str, n: usize, mean: u64, p99: u64, ops: f64) -> SystemReport {
        let mut r = super::super::empty_report(super::super::Scenario::Idle, System::Xlane, n);
        r.scenario = sc.into();
        r.name = name.into();
        r.available = true;
        r.mean_ns = mean;
        r.p99_ns = p99;
        r.ops_per_s = ops;
        r
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
