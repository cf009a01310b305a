//! Ground truth: measured sojourn percentiles against M/M/c theory.
//!
//! The synthetic server (exponential service, `c` workers, one FIFO queue)
//! is driven by a Poisson client at `λ = ρ·c·μ` for each load `ρ`; queueing
//! theory then gives the whole sojourn distribution
//! ([`xlane_stats::mmc::sojourn_quantile`]). What the client measures is the
//! sojourn plus the round trip through the stacks, the client and the
//! server's hand-off to a worker. That overhead is measured first, in a run
//! against the same server with zero service time; its median is subtracted
//! from the measured percentiles and their confidence intervals, and its
//! spread (p99 − p50, at least [`MIN_SLACK_NS`]) is allowed on both sides.
//! A row passes when theory lies in
//!
//! `[ (lower − overhead_p50)·0.7 − slack , (upper − overhead_p50)·1.3 + slack ]`
//!
//! where `[lower, upper]` is the run's confidence interval of the percentile
//! (after the independence thinning). The 0.7/1.3 margins absorb what the
//! interval does not: the overhead is not a constant, and an idle worker's
//! wake-up slightly lengthens service. The server-side sojourn (reported in
//! every response) is shown beside, as a measurement without the network.

use crate::client::{run, AgentKind, ClientConfig, RunError};
use crate::dist::{Arrival, ServiceDist};
use crate::proto::App;
use crate::report::Report;
use crate::server::{ServeConfig, ServeError, Server};
use crate::Transport;
use serde::Serialize;
use std::fmt::Write as _;
use std::net::{Ipv4Addr, SocketAddrV4};
use xlane_stats::fmt_ns;

/// Smallest slack allowed around theory, ns.
pub const MIN_SLACK_NS: u64 = 20_000;

/// Settings of the check.
#[derive(Clone, Debug, Serialize)]
pub struct MmcConfig {
    /// Mean service time, ns.
    pub service_mean_ns: u64,
    /// Workers `c`.
    pub workers: usize,
    /// Loads `ρ` to run, each in (0, 1).
    pub loads: Vec<f64>,
    /// Percentiles (percent) compared.
    pub percentiles: Vec<f64>,
    /// Minimum run per load, ns.
    pub duration_ns: u64,
    /// Maximum run per load while the intervals are wider than `ci_width`, ns.
    pub max_duration_ns: u64,
    /// Wanted relative half-width of the intervals.
    pub ci_width: f64,
    /// Confidence level.
    pub confidence: f64,
    /// Length of the zero-service overhead run, ns.
    pub baseline_ns: u64,
    /// Lower multiplicative margin (0.7).
    pub margin_low: f64,
    /// Upper multiplicative margin (1.3).
    pub margin_high: f64,
    /// Seed of client schedules and server service times.
    pub seed: u64,
    /// UDP or TCP.
    pub transport: Transport,
    /// `SCHED_FIFO` priority of the server's workers; its receiving thread
    /// runs one above and the client's agent two above (`None`: normal
    /// scheduling). On a 2-vCPU machine shared with other work this keeps
    /// other processes from stretching service times or delaying sends.
    pub rt_priority: Option<i32>,
}

impl Default for MmcConfig {
    /// c = 1, mean service 500 µs, ρ = 0.3/0.5/0.7, p50 and p99, UDP.
    fn default() -> Self {
        MmcConfig {
            service_mean_ns: 500_000,
            workers: 1,
            loads: vec![0.3, 0.5, 0.7],
            percentiles: vec![50.0, 99.0],
            duration_ns: 5_000_000_000,
            max_duration_ns: 15_000_000_000,
            ci_width: 0.15,
            confidence: 0.95,
            baseline_ns: 2_000_000_000,
            margin_low: 0.7,
            margin_high: 1.3,
            seed: 1,
            transport: Transport::Udp,
            rt_priority: Some(10),
        }
    }
}

/// Why the check could not run.
#[derive(Debug, thiserror::Error)]
pub enum MmcError {
    /// Bad settings.
    #[error("{0}")]
    Config(String),
    /// The server did not start.
    #[error("synthetic server: {0}")]
    Serve(#[from] ServeError),
    /// A measurement could not run.
    #[error("measurement: {0}")]
    Run(#[from] RunError),
    /// The zero-service run gave no latency percentiles, so the overhead to
    /// subtract is unknown and no load can be compared with theory.
    #[error(
        "the zero-service run gave no latency samples ({sent} sent, {received} answered, \
         {lost} lost): the overhead cannot be measured"
    )]
    NoBaseline {
        /// Requests it sent.
        sent: u64,
        /// Responses it received.
        received: u64,
        /// Requests never answered.
        lost: u64,
    },
}

/// The overhead measured with zero service time.
#[derive(Clone, Debug, Serialize)]
pub struct Overhead {
    /// Median latency, ns.
    pub p50_ns: u64,
    /// 99th percentile, ns.
    pub p99_ns: u64,
    /// Slack used: max(p99 − p50, [`MIN_SLACK_NS`]).
    pub slack_ns: u64,
    /// Samples used.
    pub samples: usize,
}

/// One (load, percentile) comparison.
#[derive(Clone, Debug, Serialize)]
pub struct MmcRow {
    /// Load ρ.
    pub rho: f64,
    /// Arrival rate, requests/s.
    pub lambda: f64,
    /// Percentile (percent).
    pub percentile: f64,
    /// M/M/c sojourn percentile, ns.
    pub theory_ns: f64,
    /// Measured latency percentile, ns.
    pub measured_ns: Option<u64>,
    /// Its confidence interval, ns.
    pub ci_ns: Option<(u64, u64)>,
    /// Measured minus the overhead median, ns.
    pub corrected_ns: Option<f64>,
    /// The acceptance window for theory, ns.
    pub window_ns: Option<(f64, f64)>,
    /// Server-side sojourn percentile, ns.
    pub server_ns: Option<u64>,
    /// Theory inside the window.
    pub pass: bool,
}

/// One load's run.
#[derive(Clone, Debug, Serialize)]
pub struct MmcRun {
    /// Load ρ.
    pub rho: f64,
    /// The measurement's report.
    pub report: Report,
}

/// The whole check.
#[derive(Clone, Debug, Serialize)]
pub struct MmcReport {
    /// Settings.
    pub config: MmcConfig,
    /// The zero-service overhead.
    pub overhead: Overhead,
    /// Every comparison.
    pub rows: Vec<MmcRow>,
    /// Every load's report.
    pub runs: Vec<MmcRun>,
    /// Every row passed.
    pub all_pass: bool,
    /// Threads (client and server) refused `SCHED_FIFO`.
    pub rt_denied: u64,
}

fn client_cfg(
    cfg: &MmcConfig,
    target: SocketAddrV4,
    rate: f64,
    dur: u64,
    max: u64,
) -> ClientConfig {
    ClientConfig {
        transport: cfg.transport,
        app: App::Synthetic,
        rate,
        arrival: Arrival::Poisson,
        conns: 1,
        threads: 1,
        agent: AgentKind::Symmetric,
        size: 32,
        duration_ns: dur,
        max_duration_ns: max,
        warmup_ns: Some((dur / 10).min(500_000_000)),
        percentiles: cfg.percentiles.clone(),
        ci_width: cfg.ci_width,
        confidence: cfg.confidence,
        seed: cfg.seed,
        drain_ns: 1_000_000_000,
        rt_priority: cfg.rt_priority.map(|p| p + 2),
        ..ClientConfig::new(target)
    }
}

fn start(cfg: &MmcConfig, service: ServiceDist, seed: u64) -> Result<Server, ServeError> {
    let mut sc = ServeConfig::synthetic(
        SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0),
        service,
        cfg.workers,
    );
    sc.transport = cfg.transport;
    sc.seed = seed;
    sc.rt_priority = cfg.rt_priority;
    Server::start(&sc)
}

/// Run the check (takes about the sum of the run lengths).
pub fn run_mmc(cfg: &MmcConfig) -> Result<MmcReport, MmcError> {
    if cfg.workers == 0 || cfg.service_mean_ns == 0 {
        return Err(MmcError::Config(
            "workers and the mean service time must be positive".into(),
        ));
    }
    if cfg.rt_priority.is_some_and(|p| !(1..=96).contains(&p)) {
        return Err(MmcError::Config("the RT priority must be in 1..=96".into()));
    }
    if cfg.loads.is_empty() || cfg.loads.iter().any(|r| !(*r > 0.0 && *r < 1.0)) {
        return Err(MmcError::Config("every load must be in (0, 1)".into()));
    }
    if cfg.percentiles.is_empty() {
        return Err(MmcError::Config("at least one percentile is needed".into()));
    }
    let mu = 1e9 / cfg.service_mean_ns as f64;
    let c = cfg.workers;
    // 1. Overhead: the same path with zero service time, at the middle load's rate.
    let mid = cfg.loads[cfg.loads.len() / 2];
    let srv = start(cfg, ServiceDist::Fixed(0), cfg.seed)?;
    let mut bc = client_cfg(
        cfg,
        srv.local_addr(),
        mid * c as f64 * mu,
        cfg.baseline_ns,
        cfg.baseline_ns,
    );
    bc.percentiles = vec![50.0, 99.0];
    let base = run(&bc)?;
    let mut rt_denied = base.counts.rt_denied + srv.stop().rt_denied;
    let overhead = overhead_of(&base)?;
    // 2. Each load against a fresh server (empty queue, its own seed).
    let mut rows = Vec::new();
    let mut runs = Vec::new();
    for (i, &rho) in cfg.loads.iter().enumerate() {
        let lambda = rho * c as f64 * mu;
        let seed = cfg.seed.wrapping_add(100 + i as u64);
        let srv = start(cfg, ServiceDist::Exp(cfg.service_mean_ns), seed)?;
        let mut cc = client_cfg(
            cfg,
            srv.local_addr(),
            lambda,
            cfg.duration_ns,
            cfg.max_duration_ns,
        );
        cc.seed = seed;
        let rep = run(&cc)?;
        rt_denied += rep.counts.rt_denied + srv.stop().rt_denied;
        rows.extend(compare(cfg, &overhead, rho, mu, &rep)?);
        runs.push(MmcRun { rho, report: rep });
    }
    // No row is no agreement.
    let all_pass = !rows.is_empty() && rows.iter().all(|r| r.pass);
    Ok(MmcReport {
        config: cfg.clone(),
        overhead,
        rows,
        runs,
        all_pass,
        rt_denied,
    })
}

/// The overhead from the zero-service run; an error if it gave no
/// percentiles (subtracting 0 instead would make every row look better).
fn overhead_of(base: &Report) -> Result<Overhead, MmcError> {
    let p = |q: f64| base.latency_at(q).and_then(|x| x.raw_ns);
    let (Some(b50), Some(b99)) = (p(50.0), p(99.0)) else {
        let k = &base.counts;
        return Err(MmcError::NoBaseline {
            sent: k.sent,
            received: k.received,
            lost: k.lost,
        });
    };
    Ok(Overhead {
        p50_ns: b50,
        p99_ns: b99,
        // p99 >= p50 (nearest ranks of the same sorted samples); saturating
        // all the same.
        slack_ns: b99.saturating_sub(b50).max(MIN_SLACK_NS),
        samples: base.samples.used,
    })
}

/// The rows of the run `rep` at load `rho`: theory against the measured
/// interval less the overhead. A percentile without an interval (too few
/// samples, none at all) has no window and does not pass.
fn compare(
    cfg: &MmcConfig,
    overhead: &Overhead,
    rho: f64,
    mu: f64,
    rep: &Report,
) -> Result<Vec<MmcRow>, MmcError> {
    let c = cfg.workers;
    let lambda = rho * c as f64 * mu;
    let mut rows = Vec::new();
    for &pc in &cfg.percentiles {
        let q = pc / 100.0;
        let theory_ns = xlane_stats::mmc::sojourn_quantile(lambda, mu, c, q)
            .ok_or_else(|| MmcError::Config(format!("no M/M/{c} quantile for ρ = {rho}")))?
            * 1e9;
        let row = rep.latency_at(pc);
        let measured_ns = row.and_then(|r| r.raw_ns);
        let ci_ns = row.and_then(|r| r.ci_lower_ns.zip(r.ci_upper_ns));
        let off = overhead.p50_ns as f64;
        let slack = overhead.slack_ns as f64;
        let window_ns = ci_ns.map(|(lo, hi)| {
            (
                (lo as f64 - off) * cfg.margin_low - slack,
                (hi as f64 - off) * cfg.margin_high + slack,
            )
        });
        let server_ns = rep.server_sojourn.as_ref().and_then(|rs| {
            rs.iter()
                .find(|r| (r.percentile - pc).abs() < 1e-9)
                .and_then(|r| r.raw_ns)
        });
        rows.push(MmcRow {
            rho,
            lambda,
            percentile: pc,
            theory_ns,
            measured_ns,
            ci_ns,
            corrected_ns: measured_ns.map(|m| m as f64 - off),
            window_ns,
            server_ns,
            pass: window_ns.is_some_and(|(lo, hi)| theory_ns >= lo && theory_ns <= hi),
        });
    }
    Ok(rows)
}

fn f(ns: f64) -> String {
    if ns < 0.0 {
        format!("-{}", fmt_ns((-ns) as u64))
    } else {
        fmt_ns(ns as u64)
    }
}

impl MmcReport {
    /// The human table.
    pub fn render(&self) -> String {
        let c = &self.config;
        let o = &self.overhead;
        let mut s = String::new();
        let _ = writeln!(
            s,
            "M/M/{} check: exponential service, mean {}, {} on 127.0.0.1, {:.0} % intervals",
            c.workers,
            fmt_ns(c.service_mean_ns),
            c.transport,
            c.confidence * 100.0
        );
        let _ = writeln!(
            s,
            "overhead (zero service time, {} samples): p50 {}, p99 {} -> subtract {}, slack ±{}",
            o.samples,
            fmt_ns(o.p50_ns),
            fmt_ns(o.p99_ns),
            fmt_ns(o.p50_ns),
            fmt_ns(o.slack_ns)
        );
        let _ = writeln!(
            s,
            "scheduling: {}",
            match c.rt_priority {
                Some(p) => format!(
                    "SCHED_FIFO (server workers {p}, its receiver {}, client {}){}",
                    p + 1,
                    p + 2,
                    if self.rt_denied > 0 {
                        format!(
                            ", refused for {} threads: they ran normally",
                            self.rt_denied
                        )
                    } else {
                        String::new()
                    }
                ),
                None => "normal".into(),
            }
        );
        let _ = writeln!(
            s,
            "pass: theory in [(ci_lo − overhead)·{} − slack, (ci_hi − overhead)·{} + slack]\n",
            c.margin_low, c.margin_high
        );
        let _ = writeln!(
            s,
            "{:>4} {:>7} {:>4} {:>9} {:>9} {:>21} {:>10} {:>9} {:>21} {:>5}",
            "ρ", "λ/s", "", "theory", "measured", "CI", "−overhead", "server", "window", ""
        );
        for r in &self.rows {
            let _ = writeln!(
                s,
                "{:>4.2} {:>7.0} {:>4} {:>9} {:>9} {:>21} {:>10} {:>9} {:>21} {:>5}",
                r.rho,
                r.lambda,
                crate::analysis::label(r.percentile / 100.0),
                f(r.theory_ns),
                r.measured_ns.map_or("-".into(), fmt_ns),
                r.ci_ns.map_or("(too few)".into(), |(a, b)| format!(
                    "[{}, {}]",
                    fmt_ns(a),
                    fmt_ns(b)
                )),
                r.corrected_ns.map_or("-".into(), f),
                r.server_ns.map_or("-".into(), fmt_ns),
                r.window_ns
                    .map_or("-".into(), |(a, b)| format!("[{}, {}]", f(a), f(b))),
                if r.pass { "ok" } else { "FAIL" }
            );
        }
        let _ = writeln!(s);
        for run in &self.runs {
            let rep = &run.report;
            let checks: Vec<String> = rep
                .checks
                .iter()
                .map(|ch| {
                    format!(
                        "{} {}",
                        ch.name,
                        match ch.status {
                            crate::CheckStatus::Pass => "pass",
                            crate::CheckStatus::Fail => "FAIL",
                            crate::CheckStatus::Skipped => "skip",
                        }
                    )
                })
                .collect();
            let _ = writeln!(
                s,
                "ρ = {:.2}: {:.1} s, {} sent ({}), {} samples, every {}-th used ({}); {}",
                run.rho,
                rep.elapsed_s,
                rep.counts.sent,
                crate::report::fmt_rate(rep.achieved_rate),
                rep.samples.after_warmup,
                rep.samples.thinning_lag,
                rep.samples.used,
                checks.join(", ")
            );
        }
        let _ = writeln!(
            s,
            "\n{}",
            if self.all_pass {
                "agreement: every percentile matches M/M/c theory"
            } else {
                "DISAGREEMENT: see the rows marked FAIL"
            }
        );
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::empty_report;

    #[test]
    fn a_baseline_without_samples_is_an_error() {
        for (sent, window) in [(0, 0), (0, 1_000_000_000), (500, 1_000_000_000)] {
            match overhead_of(&empty_report(sent, window)) {
                Err(MmcError::NoBaseline { sent: s, lost, .. }) => {
                    assert_eq!((s, lost), (sent, sent));
                }
                r => panic!("{sent}/{window}: {r:?}"),
            }
        }
    }

    /// A load that got no response (zero arrivals at the server): its rows
    /// have no measurement and no window, and fail; the render says so.
    #[test]
    fn a_load_without_responses_fails_its_rows() {
        let cfg = MmcConfig::default();
        let overhead = Overhead {
            p50_ns: 30_000,
            p99_ns: 40_000,
            slack_ns: MIN_SLACK_NS,
            samples: 1000,
        };
        let mu = 1e9 / cfg.service_mean_ns as f64;
        for (sent, window) in [(1000, 1_000_000_000), (0, 0)] {
            let rep = empty_report(sent, window);
            let rows = compare(&cfg, &overhead, 0.5, mu, &rep).unwrap();
            assert_eq!(rows.len(), cfg.percentiles.len());
            for r in &rows {
                assert!(!r.pass, "{r:?}");
                assert_eq!((r.measured_ns, r.ci_ns, r.window_ns), (None, None, None));
                assert!(r.theory_ns.is_finite() && r.theory_ns > 0.0);
            }
            let report = MmcReport {
                config: cfg.clone(),
                overhead: overhead.clone(),
                rows,
                runs: vec![MmcRun {
                    rho: 0.5,
                    report: rep,
                }],
                all_pass: false,
                rt_denied: 0,
            };
            let text = report.render();
            assert!(
                text.contains("(too few)") && text.contains("DISAGREEMENT"),
                "{text}"
            );
            assert!(text.contains(&format!("{sent} sent")), "{text}");
            assert!(!text.contains("NaN"), "{text}");
        }
    }

    #[test]
    fn nothing_to_compare_is_refused() {
        type Edit = fn(&mut MmcConfig);
        let table: &[(&str, Edit)] = &[
            ("percentile", |c| c.percentiles.clear()),
            ("load", |c| c.loads.clear()),
            ("load", |c| c.loads = vec![0.0]),
            ("workers", |c| c.workers = 0),
        ];
        for (want, edit) in table {
            let mut c = MmcConfig::default();
            edit(&mut c);
            match run_mmc(&c) {
                Err(MmcError::Config(m)) => assert!(m.contains(want), "{want}: {m}"),
                r => panic!("{want}: {:?}", r.map(|r| r.all_pass)),
            }
        }
    }
}
