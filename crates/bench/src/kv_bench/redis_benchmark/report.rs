//! The report of `--workload redis-benchmark`: per default test, each
//! (client, system) pair's median requests/s over the rounds and its
//! errors; the ratios the issue asks for; the floor and the client's
//! saturation; a text table and `--json`.

use std::fmt::Write as _;

use serde::Serialize;

use super::suite::DEFAULT_TESTS;
use super::{Client, PairRun, RbConfig, RbSystem};
use crate::interference::{Floor, FLOOR_THRESHOLD_NS};
use crate::table::{fmt_ns, Table};

/// A client using at least this share of one core may be what bounds
/// its figures (redis-benchmark and the driver are single-threaded).
pub const CLIENT_SATURATED: f64 = 0.9;
/// The machine busier than this during a run had no CPU to spare.
pub const MACHINE_SATURATED: f64 = 0.9;

/// One system as started.
#[derive(Clone, Debug, Serialize)]
pub struct RbSystemInfo {
    /// `redis`, `redis-wait`, `xlane-1`, `xlane-3`.
    pub name: String,
    /// Whether it started.
    pub available: bool,
    /// Why not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Server version.
    pub version: String,
    /// Durability setting.
    pub durability: String,
    /// The command lines started.
    pub command_lines: Vec<String>,
}

/// One (client, system) pair over all rounds.
#[derive(Clone, Debug, Serialize)]
pub struct RbPair {
    /// `redis-benchmark` or `driver`.
    pub client: String,
    /// The system.
    pub system: String,
    /// Rounds completed.
    pub rounds: usize,
    /// Why the pair stopped early, if it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub broken: Option<String>,
    /// Tests with errors (not results).
    pub tests_with_errors: usize,
    /// The client's CPU time over its wall time (share of one core);
    /// `None` without a round (no wall time).
    pub client_cpu: Option<f64>,
    /// Share of all CPUs busy while the pair ran; `None` without a round
    /// or when `/proc/stat` could not be read.
    pub machine_busy: Option<f64>,
    /// Per test, the rounds' requests/s (in round order; `None`: that
    /// round gave no figure), so that two pairs' rounds line up.
    #[serde(skip)]
    per_test: Vec<Vec<Option<f64>>>,
    #[serde(skip)]
    errors: Vec<(u64, Option<String>)>,
}

/// The median of the rounds that gave a figure.
fn median_of(v: &[Option<f64>]) -> Option<f64> {
    median(&v.iter().flatten().copied().collect::<Vec<f64>>())
}

fn median(v: &[f64]) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    Some(if n % 2 == 1 {
        s[n / 2]
    } else {
        // n even and not empty: n ≥ 2.
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    })
}

impl RbPair {
    /// The pair's report from its rounds' runs.
    pub fn from_runs(
        client: Client,
        system: RbSystem,
        runs: &[PairRun],
        broken: Option<String>,
    ) -> RbPair {
        let n = DEFAULT_TESTS.len();
        let mut per_test = vec![Vec::new(); n];
        let mut errors: Vec<(u64, Option<String>)> = vec![(0, None); n];
        let (mut cpu, mut wall, mut busy, mut total) = (0u64, 0u64, 0u64, 0u64);
        for r in runs {
            for (i, (rps, e, first)) in r.tests.iter().enumerate().take(n) {
                per_test[i].push(*rps);
                errors[i].0 += e;
                if errors[i].1.is_none() {
                    errors[i].1.clone_from(first);
                }
            }
            cpu += r.client_cpu_ns;
            wall += r.wall_ns;
            busy += r.busy.0;
            total += r.busy.1;
        }
        // Nothing measured is no share (a 0 % would read as idle).
        let ratio = |a: u64, b: u64| (b > 0).then(|| a as f64 / b as f64);
        RbPair {
            client: client.name().into(),
            system: system.name().into(),
            rounds: runs.len(),
            broken,
            tests_with_errors: errors.iter().filter(|e| e.0 > 0).count(),
            client_cpu: ratio(cpu, wall),
            machine_busy: ratio(busy, total),
            per_test,
            errors,
        }
    }

    fn key(&self) -> String {
        format!("{}:{}", self.client, self.system)
    }
}

/// One pair's figure for one test.
#[derive(Clone, Debug, Serialize)]
pub struct RbCell {
    /// `redis-benchmark` or `driver`.
    pub client: String,
    /// The system.
    pub system: String,
    /// Median requests/s over the rounds; `None` when the test has errors
    /// or no round gave a figure (a test with errors is not a result).
    pub rps: Option<f64>,
    /// Error replies (and errors redis-benchmark printed) over all rounds.
    pub errors: u64,
    /// The first of them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_error: Option<String>,
    /// Every round's requests/s (`null`: the round gave no figure).
    pub rounds_rps: Vec<Option<f64>>,
}

/// One default test.
#[derive(Clone, Debug, Serialize)]
pub struct RbTest {
    /// Its name, as redis-benchmark prints it.
    pub name: String,
    /// Whether it is a write test (see `suite`).
    pub write: bool,
    /// Per pair.
    pub systems: Vec<RbCell>,
}

/// A ratio of two pairs on one test, and its target: the median over the
/// rounds of each round's ratio (the round's two figures were measured
/// seconds apart, so the machine's drift over a run cancels out of each).
#[derive(Clone, Debug, Serialize)]
pub struct RbRatio {
    /// The test.
    pub test: String,
    /// The client both figures come from.
    pub client: String,
    /// Numerator's system.
    pub system: String,
    /// Denominator's system.
    pub versus: String,
    /// `system` ÷ `versus`, the median of `rounds`; `None` when either
    /// has errors or no round gave both figures.
    pub ratio: Option<f64>,
    /// Each round's `system` ÷ `versus` (the rounds that gave both).
    pub rounds: Vec<f64>,
    /// The least ratio the issue asks for.
    pub target: f64,
    /// Whether `ratio` reaches `target`.
    pub met: bool,
}

/// The whole report.
#[derive(Clone, Debug, Serialize)]
pub struct RbReport {
    /// `redis-benchmark`.
    pub workload: String,
    /// Per default test.
    pub tests: Vec<RbTest>,
    /// xlane-1 / redis (redis-benchmark, every test, target 0.9) and
    /// xlane-3 / redis-wait (driver, write tests, target 1).
    pub ratios: Vec<RbRatio>,
    /// Per pair: rounds, errors, client CPU, machine load.
    pub pairs: Vec<RbPair>,
    /// The systems as started.
    pub systems: Vec<RbSystemInfo>,
    /// The floor of every core over the run; `None` if the probes could
    /// not start (`floor_error`).
    pub floor: Option<Floor>,
    /// Why there is no floor.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub floor_error: Option<String>,
    /// Requests per test (`-n`).
    pub requests: u64,
    /// Connections (`-c`).
    pub connections: usize,
    /// Pipelined requests (`-P`).
    pub pipeline: usize,
    /// Rounds asked for.
    pub rounds: usize,
    /// Length of the measured part, seconds.
    pub seconds: f64,
    /// Versions of the binaries.
    pub versions: Vec<String>,
    /// Figure files written.
    pub plots: Vec<String>,
}

/// The ratios stated: (client, system, versus, target, write tests only).
pub const RATIOS: [(Client, RbSystem, RbSystem, f64, bool); 2] = [
    (
        Client::RedisBenchmark,
        RbSystem::Xlane1,
        RbSystem::Redis,
        0.9,
        false,
    ),
    (
        Client::Driver,
        RbSystem::Xlane3,
        RbSystem::RedisWait,
        1.0,
        true,
    ),
];

impl RbReport {
    /// The report from every pair's rounds.
    pub fn new(
        cfg: &RbConfig,
        pairs: Vec<RbPair>,
        systems: Vec<RbSystemInfo>,
        floor: Option<Floor>,
        floor_error: Option<String>,
        seconds: f64,
        versions: Vec<String>,
    ) -> RbReport {
        let tests: Vec<RbTest> = DEFAULT_TESTS
            .iter()
            .enumerate()
            .map(|(i, t)| RbTest {
                name: t.name.to_string(),
                write: t.write,
                systems: pairs
                    .iter()
                    .map(|p| {
                        let (errors, first_error) = p.errors[i].clone();
                        RbCell {
                            client: p.client.clone(),
                            system: p.system.clone(),
                            rps: median_of(&p.per_test[i]).filter(|_| errors == 0),
                            errors,
                            first_error,
                            rounds_rps: p.per_test[i].clone(),
                        }
                    })
                    .collect(),
            })
            .collect();
        let mut ratios = Vec::new();
        for t in &tests {
            for (client, a, b, target, writes_only) in RATIOS {
                // A ratio of a system that did not run (`--systems`) is
                // not reported; one of a pair that broke is, without value.
                let ran = |s: RbSystem| {
                    pairs
                        .iter()
                        .any(|p| p.client == client.name() && p.system == s.name())
                };
                if (writes_only && !t.write) || !ran(a) || !ran(b) {
                    continue;
                }
                let cell = |s: RbSystem| {
                    t.systems
                        .iter()
                        .find(|c| c.client == client.name() && c.system == s.name())
                        .filter(|c| c.errors == 0)
                };
                let rounds: Vec<f64> = match (cell(a), cell(b)) {
                    (Some(x), Some(y)) => x
                        .rounds_rps
                        .iter()
                        .zip(&y.rounds_rps)
                        .filter_map(|(x, y)| match (x, y) {
                            (Some(x), Some(y)) if *y > 0.0 => Some(x / y),
                            _ => None,
                        })
                        .collect(),
                    _ => Vec::new(),
                };
                let ratio = median(&rounds);
                ratios.push(RbRatio {
                    test: t.name.clone(),
                    client: client.name().into(),
                    system: a.name().into(),
                    versus: b.name().into(),
                    ratio,
                    rounds,
                    target,
                    met: ratio.is_some_and(|r| r >= target),
                });
            }
        }
        RbReport {
            workload: "redis-benchmark".into(),
            tests,
            ratios,
            pairs,
            systems,
            floor,
            floor_error,
            requests: cfg.requests,
            connections: cfg.connections,
            pipeline: cfg.pipeline,
            rounds: cfg.rounds,
            seconds,
            versions,
            plots: Vec::new(),
        }
    }

    fn ratio(&self, test: &str, system: RbSystem) -> Option<&RbRatio> {
        self.ratios
            .iter()
            .find(|r| r.test == test && r.system == system.name())
    }

    /// The text report.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "== redis-benchmark default tests: requests/s, median of {} rounds (-P {} -c {} -n {}) ==",
            self.rounds, self.pipeline, self.connections, self.requests
        );
        let mut head: Vec<String> = vec!["test".into(), "w".into()];
        for p in &self.pairs {
            head.push(p.key().replace("redis-benchmark:", "rb:"));
            if p.client == Client::RedisBenchmark.name() && p.system == RbSystem::Xlane1.name() {
                head.push("x1/redis".into());
            }
        }
        let x3 = self
            .ratios
            .iter()
            .any(|r| r.system == RbSystem::Xlane3.name());
        if x3 {
            head.push("x3/redis-wait".into());
        }
        let mut table = Table::new(&head);
        let fmt_ratio = |r: Option<&RbRatio>| match r {
            None => String::new(),
            Some(r) => match r.ratio {
                None => "–".into(),
                Some(x) => {
                    let lo = r.rounds.iter().copied().min_by(f64::total_cmp).unwrap_or(x);
                    let hi = r.rounds.iter().copied().max_by(f64::total_cmp).unwrap_or(x);
                    format!("{x:.2} [{lo:.2}–{hi:.2}]{}", if r.met { "" } else { " !" })
                }
            },
        };
        for t in &self.tests {
            let mut row = vec![t.name.clone(), if t.write { "w" } else { "" }.into()];
            for c in &t.systems {
                row.push(match (c.rps, c.errors) {
                    (_, e) if e > 0 => format!("ERR({e})"),
                    (Some(x), _) => format!("{x:.0}"),
                    (None, _) => "–".into(),
                });
                if c.client == Client::RedisBenchmark.name() && c.system == RbSystem::Xlane1.name()
                {
                    row.push(fmt_ratio(self.ratio(&t.name, RbSystem::Xlane1)));
                }
            }
            if x3 {
                row.push(fmt_ratio(self.ratio(&t.name, RbSystem::Xlane3)));
            }
            table.row(row);
        }
        out.push_str(&table.render());
        let targets: Vec<String> = RATIOS
            .iter()
            .filter(|(_, a, b, _, _)| {
                self.ratios
                    .iter()
                    .any(|r| r.system == a.name() && r.versus == b.name())
            })
            .map(|(_, a, b, target, _)| {
                let short = |s: &RbSystem| match s {
                    RbSystem::Xlane1 => "x1",
                    RbSystem::Xlane3 => "x3",
                    s => s.name(),
                };
                format!("{}/{} {target:.1}", short(a), short(b))
            })
            .collect();
        let _ = writeln!(
            out,
            "w: a write test (the driver sends WAIT 2 0 after each batch to redis-wait only); \
             ERR(n): n errors, not a result; a ratio is the median over the rounds of each round's \
             ratio (its two figures measured seconds apart) [the least–most round]; \
             !: below the target ({})",
            targets.join(", ")
        );
        for (client, a, b, target, writes) in RATIOS {
            let rs: Vec<&RbRatio> = self
                .ratios
                .iter()
                .filter(|r| r.system == a.name() && r.versus == b.name())
                .collect();
            if rs.is_empty() {
                continue;
            }
            let met = rs.iter().filter(|r| r.met).count();
            let min = rs.iter().filter_map(|r| r.ratio).min_by(f64::total_cmp);
            let _ = writeln!(
                out,
                "{} / {} ({}, {} tests): {met} of {} at least {target}; least {}",
                a.name(),
                b.name(),
                client.name(),
                if writes { "write" } else { "all" },
                rs.len(),
                min.map_or("–".to_string(), |m| format!("{m:.2}"))
            );
        }
        out.push_str("\nclients and saturation (every client is single-threaded and shares the 2 vCPUs with the servers):\n");
        for p in &self.pairs {
            let mut notes = Vec::new();
            if p.client_cpu.is_some_and(|c| c >= CLIENT_SATURATED) {
                notes.push("CLIENT SATURATED: the client may bound these figures");
            }
            if p.machine_busy.is_some_and(|b| b >= MACHINE_SATURATED) {
                notes.push("MACHINE SATURATED: no CPU to spare");
            }
            let pct =
                |x: Option<f64>| x.map_or("  –".to_string(), |x| format!("{:>3.0}", 100.0 * x));
            let _ = writeln!(
                out,
                "  {:<28} {} rounds, client {}% of a core, machine {}% busy, {} tests with errors{}{}",
                p.key(),
                p.rounds,
                pct(p.client_cpu),
                pct(p.machine_busy),
                p.tests_with_errors,
                if notes.is_empty() { String::new() } else { format!("; {}", notes.join("; ")) },
                p.broken.as_ref().map_or(String::new(), |b| format!("; BROKEN: {b}")),
            );
        }
        out.push_str("\nsystems:\n");
        for s in &self.systems {
            let _ = writeln!(
                out,
                "  {:<11} {} ({}){}",
                s.name,
                s.version,
                s.durability,
                s.reason
                    .as_ref()
                    .map_or(String::new(), |r| format!(": NOT AVAILABLE: {r}"))
            );
            for c in &s.command_lines {
                let _ = writeln!(out, "      {c}");
            }
        }
        out.push('\n');
        match (&self.floor, &self.floor_error) {
            (Some(f), _) => {
                let _ = writeln!(
                    out,
                    "floor ({:.0} s run): what the machine took from a real-time probe per core:",
                    self.seconds
                );
                for c in &f.cores {
                    let _ = writeln!(
                        out,
                        "  core {}: {:.2}% of the run in {} wake-ups over {} late, longest {}; hypervisor steal {} ticks",
                        c.core,
                        100.0 * c.stolen_fraction,
                        c.gaps,
                        fmt_ns(FLOOR_THRESHOLD_NS),
                        fmt_ns(c.max_gap_ns),
                        c.steal_ticks
                    );
                }
            }
            (None, e) => {
                let _ = writeln!(out, "floor: not measured ({})", e.as_deref().unwrap_or("?"));
            }
        }
        let _ = writeln!(out, "versions: {}", self.versions.join("; "));
        if !self.plots.is_empty() {
            let _ = writeln!(out, "plots: {}", self.plots.join(", "));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(rps: f64, errors: u64) -> PairRun {
        PairRun {
            tests: DEFAULT_TESTS
                .iter()
                .map(|_| (Some(rps), errors, (errors > 0).then(|| "ERR x".to_string())))
                .collect(),
            client_cpu_ns: 5,
            wall_ns: 10,
            busy: (1, 2),
        }
    }

    #[test]
    fn medians_ratios_and_errors() {
        let cfg = RbConfig::default();
        let pairs: Vec<RbPair> = super::super::PAIRS
            .iter()
            .map(|&(c, s)| {
                let runs: Vec<PairRun> = match s {
                    RbSystem::Redis => vec![run(100.0, 0), run(300.0, 0), run(200.0, 0)],
                    // Round by round 0.9 and 0.8 of Redis's (the medians
                    // alone would say 165 / 200 = 0.825).
                    RbSystem::Xlane1 => vec![run(90.0, 0), run(240.0, 0)],
                    RbSystem::RedisWait => vec![run(50.0, 0)],
                    RbSystem::Xlane3 if c == Client::Driver => vec![run(60.0, 0), run(1.0, 2)],
                    RbSystem::Xlane3 => vec![],
                };
                RbPair::from_runs(c, s, &runs, None)
            })
            .collect();
        let r = RbReport::new(&cfg, pairs, vec![], None, Some("x".into()), 1.0, vec![]);
        let set = &r.tests[2];
        assert_eq!(set.name, "SET");
        let rb_redis = &set.systems[0];
        assert_eq!(rb_redis.rps, Some(200.0));
        let x1 = r.ratio("SET", RbSystem::Xlane1).unwrap();
        assert_eq!(x1.rounds, vec![0.9, 0.8], "the rounds that gave both");
        assert!((x1.ratio.unwrap() - 0.85).abs() < 1e-12, "{:?}", x1.ratio);
        assert!(!x1.met, "0.85 is below the target 0.9");
        let x3 = r.ratio("SET", RbSystem::Xlane3).unwrap();
        assert_eq!(x3.ratio, None, "a test with errors is not a result");
        assert!(!x3.met);
        assert!(
            r.ratio("GET", RbSystem::Xlane3).is_none(),
            "reads: no x3 ratio"
        );
        assert_eq!(r.pairs[5].tests_with_errors, 20);
        assert_eq!(r.pairs[0].client_cpu, Some(0.5));
        let text = r.render();
        assert!(text.contains("ERR(2)"), "{text}");
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["workload"], "redis-benchmark");
        assert_eq!(json["tests"][2]["systems"][0]["rps"], 200.0);
        assert!(json["ratios"].as_array().is_some_and(|a| !a.is_empty()));
        // The figure is written, a ratio without a result left out.
        let dir = std::env::temp_dir().join(format!("xlane-rb-plot-{}", std::process::id()));
        let files = super::super::plot::plot(&r, &dir.join("fig")).expect("plot");
        for f in &files {
            let len = std::fs::metadata(f).map(|m| m.len()).unwrap_or(0);
            assert!(len > 1000, "{} has {len} bytes", f.display());
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// `--systems redis,xlane-1`: only the ratio of which both systems ran
    /// is reported, in the text, the JSON and the figure.
    #[test]
    fn a_run_of_two_systems_reports_only_their_ratio() {
        let pairs: Vec<RbPair> = [RbSystem::Redis, RbSystem::Xlane1]
            .into_iter()
            .map(|s| {
                let rps = if s == RbSystem::Redis { 100.0 } else { 95.0 };
                RbPair::from_runs(Client::RedisBenchmark, s, &[run(rps, 0)], None)
            })
            .collect();
        let cfg = RbConfig::default();
        let r = RbReport::new(&cfg, pairs, vec![], None, Some("x".into()), 1.0, vec![]);
        assert_eq!(r.ratios.len(), DEFAULT_TESTS.len());
        assert!(r
            .ratios
            .iter()
            .all(|x| x.system == "xlane-1" && x.versus == "redis" && x.met));
        let text = r.render();
        assert!(text.contains("20 of 20 at least 0.9"), "{text}");
        assert!(!text.contains("x3/redis-wait"), "{text}");
        assert!(!text.contains("xlane-3 / redis-wait"), "{text}");
        let dir = std::env::temp_dir().join(format!("xlane-rb-two-{}", std::process::id()));
        let files = super::super::plot::plot(&r, &dir.join("fig")).expect("plot");
        assert!(files.iter().all(|f| f.is_file()));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Degenerate rounds go through the medians, the ratios, the text and
    /// the figure: what was not measured shows as "–", ERR(n), BROKEN or
    /// NOT AVAILABLE, never as a 0 or as a ratio.
    #[test]
    fn degenerate_inputs_are_analysed_and_reported() {
        let writes = DEFAULT_TESTS.iter().filter(|t| t.write).count();
        let unmeasured = |mut r: PairRun| {
            (r.client_cpu_ns, r.wall_ns, r.busy) = (0, 0, (0, 0));
            r
        };
        let none: &dyn Fn(RbSystem) -> Vec<PairRun> = &|_| vec![];
        let failing: &dyn Fn(RbSystem) -> Vec<PairRun> = &|_| vec![run(100.0, 3)];
        let one: &dyn Fn(RbSystem) -> Vec<PairRun> = &|_| vec![run(100.0, 0)];
        let zero_redis: &dyn Fn(RbSystem) -> Vec<PairRun> = &|s| match s {
            RbSystem::Redis | RbSystem::RedisWait => vec![run(0.0, 0)],
            _ => vec![run(100.0, 0)],
        };
        let no_clock: &dyn Fn(RbSystem) -> Vec<PairRun> = &|_| vec![unmeasured(run(100.0, 0))];
        // (case, each pair's runs, broken, systems available, ratios with a
        //  value, ratios met, client CPU known, tests with errors per pair,
        //  text the render must contain)
        type Case<'a> = (
            &'a str,
            &'a dyn Fn(RbSystem) -> Vec<PairRun>,
            Option<&'a str>,
            bool,
            usize,
            usize,
            bool,
            usize,
            &'a [&'a str],
        );
        let all = DEFAULT_TESTS.len() + writes;
        let cases: &[Case] = &[
            (
                "no round at all",
                none,
                None,
                true,
                0,
                0,
                false,
                0,
                &["0 of 20 at least 0.9; least –", "client   –% of a core"],
            ),
            (
                "every pair broken, no system started",
                none,
                Some("did not start"),
                false,
                0,
                0,
                false,
                0,
                &["BROKEN: did not start", "NOT AVAILABLE: did not start"],
            ),
            (
                "every test errored",
                failing,
                None,
                true,
                0,
                0,
                true,
                20,
                &["ERR(3)", "least –"],
            ),
            ("one round", one, None, true, all, all, true, 0, &["1.00"]),
            (
                "a denominator of 0 requests/s",
                zero_redis,
                None,
                true,
                0,
                0,
                true,
                0,
                &["least –"],
            ),
            (
                "rounds without a clock",
                no_clock,
                None,
                true,
                all,
                all,
                false,
                0,
                &["machine   –% busy"],
            ),
        ];
        let dir = std::env::temp_dir().join(format!("xlane-rb-degenerate-{}", std::process::id()));
        for &(case, runs, broken, available, valued, met, cpu_known, errs, has) in cases {
            let pairs: Vec<RbPair> = super::super::PAIRS
                .iter()
                .map(|&(c, s)| RbPair::from_runs(c, s, &runs(s), broken.map(String::from)))
                .collect();
            let systems = RbSystem::ALL
                .iter()
                .map(|s| RbSystemInfo {
                    name: s.name().into(),
                    available,
                    reason: broken.filter(|_| !available).map(String::from),
                    version: String::new(),
                    durability: s.durability().into(),
                    command_lines: vec![],
                })
                .collect();
            let cfg = RbConfig::default();
            let r = RbReport::new(&cfg, pairs, systems, None, Some("x".into()), 0.0, vec![]);
            assert_eq!(r.ratios.len(), all, "{case}");
            let got = r.ratios.iter().filter(|x| x.ratio.is_some()).count();
            assert_eq!(got, valued, "{case}: {:?}", r.ratios);
            assert_eq!(r.ratios.iter().filter(|x| x.met).count(), met, "{case}");
            assert!(
                r.ratios.iter().flat_map(|x| x.ratio).all(f64::is_finite),
                "{case}"
            );
            for p in &r.pairs {
                assert_eq!(p.client_cpu.is_some(), cpu_known, "{case}: {p:?}");
                assert_eq!(p.machine_busy.is_some(), cpu_known, "{case}: {p:?}");
                assert_eq!(p.tests_with_errors, errs, "{case}: {p:?}");
            }
            let text = r.render();
            for h in has {
                assert!(text.contains(h), "{case}: no {h:?} in\n{text}");
            }
            let files = super::super::plot::plot(&r, &dir.join("fig"))
                .unwrap_or_else(|e| panic!("{case}: {e}"));
            assert!(files.iter().all(|f| f.is_file()), "{case}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
