//! The self-checks of a run, and the percentiles with their confidence
//! intervals. Pure functions of the samples and counters (no clocks, no I/O).
//!
//! | check          | passes when                                                         |
//! |----------------|---------------------------------------------------------------------|
//! | `rate`         | achieved send rate within ±10 % of the requested rate               |
//! | `poisson`      | Anderson–Darling (exponential, mean estimated) does not reject the send gaps above a floor at 5 % (Poisson schedules only) |
//! | `independence` | some lag ≤ max lag has Spearman \|ρ\| below 1.96/√(m−1); samples are then thinned to every lag-th |
//! | `stationarity` | KPSS level-stationarity not rejected at 5 % (on window medians)     |
//! | `ci`           | every percentile's CI lies within ±`ci_width` of the estimate       |
//! | `responses`    | unanswered requests are under a tenth of the highest percentile's tail |
//!
//! A failing check makes the run invalid: the report shows verdicts (what
//! went wrong and what to change) instead of the percentiles.

use crate::config::ClientConfig;
use crate::dist::Arrival;
use crate::sample::Sample;
use serde::Serialize;
use xlane_stats::{
    anderson_darling_exponential, fmt_ns, independence_lag, kpss, min_samples_for_ci, percentile,
    percentile_ci,
};

/// Allowed relative deviation of the achieved from the requested rate.
pub const RATE_TOLERANCE: f64 = 0.10;
/// Most send gaps given to the Anderson–Darling test (evenly spread over the
/// run). With 10⁵ gaps the test notices the µs granularity of system calls,
/// which does not matter for latency; 2000 keep it sensitive to real
/// departures from the schedule.
pub const AD_MAX_GAPS: usize = 2000;
/// Most consecutive samples the independence check looks at (the middle of
/// the run); bounds its cost.
pub const INDEPENDENCE_WINDOW: usize = 50_000;
/// Largest lag tried by the independence check.
pub const MAX_LAG: usize = 1000;
/// Number of window medians the KPSS test runs on (for long series).
pub const KPSS_WINDOWS: usize = 100;
/// Largest floor below which send gaps are left out of the Poisson check, ns
/// (see [`gap_floor_ns`]).
pub const GAP_FLOOR_MAX_NS: f64 = 20_000.0;

/// The floor for an agent whose mean gap is `mean_gap_ns`: the smaller of
/// [`GAP_FLOOR_MAX_NS`] and a twentieth of the mean gap. A sender cannot put
/// two requests closer than one pass of its loop (a send system call, a few
/// µs), so gaps that short are rarer than in a Poisson process; by the
/// memorylessness of the exponential, the gaps above a floor δ, less δ, are
/// again exponential with the same mean, and that is what is tested.
pub fn gap_floor_ns(mean_gap_ns: f64) -> f64 {
    GAP_FLOOR_MAX_NS.min(mean_gap_ns / 20.0)
}

/// Outcome of one check.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CheckStatus {
    /// The check holds.
    Pass,
    /// The check failed: the run is not valid.
    Fail,
    /// The check does not apply to this run.
    Skipped,
}

/// One self-check with its statistic.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Check {
    /// Short name (`rate`, `poisson`, `independence`, `stationarity`, `ci`, `responses`).
    pub name: &'static str,
    /// Pass, fail or skipped.
    pub status: CheckStatus,
    /// The test statistic, if any.
    pub statistic: Option<f64>,
    /// The threshold it is compared with, if any.
    pub threshold: Option<f64>,
    /// One line for humans.
    pub detail: String,
}

/// One percentile of a latency distribution.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PercentileRow {
    /// The percentile, in percent (99.9).
    pub percentile: f64,
    /// The estimate, only when every check passed (otherwise see `raw_ns`).
    pub value_ns: Option<u64>,
    /// The estimate whatever the checks say (for diagnosis), ns.
    pub raw_ns: Option<u64>,
    /// Lower end of the confidence interval, ns.
    pub ci_lower_ns: Option<u64>,
    /// Upper end of the confidence interval, ns.
    pub ci_upper_ns: Option<u64>,
    /// Larger distance from the estimate to an end of the interval, relative
    /// to the estimate (0.05 = ±5 %).
    pub ci_rel_halfwidth: Option<f64>,
    /// The interval exists and is within the requested width.
    pub ci_ok: bool,
}

/// What the analysis needs from the settings.
#[derive(Clone, Debug)]
pub struct AnalysisParams {
    /// Quantiles as fractions (0.999).
    pub quantiles: Vec<f64>,
    /// Largest relative half-width accepted.
    pub ci_width: f64,
    /// Confidence level.
    pub confidence: f64,
    /// The requested inter-arrival distribution.
    pub arrival: Arrival,
    /// The requested total rate, requests/s.
    pub rate: f64,
}

impl AnalysisParams {
    /// From the run's settings.
    pub fn from_config(cfg: &ClientConfig) -> Self {
        AnalysisParams {
            quantiles: cfg.percentiles.iter().map(|p| p / 100.0).collect(),
            ci_width: cfg.ci_width,
            confidence: cfg.confidence,
            arrival: cfg.arrival,
            rate: cfg.rate,
        }
    }
}

/// Counters of the run the analysis needs.
#[derive(Clone, Debug)]
pub struct RunFacts<'a> {
    /// Requests sent.
    pub sent: u64,
    /// Requests never answered.
    pub lost: u64,
    /// Requests refused (R2P2 DROP): answered, but without a latency.
    pub dropped: u64,
    /// From the start to the end of sending, ns.
    pub window_ns: u64,
    /// Send gaps above the floor, less the floor, in units of the agent's
    /// mean gap (unit exponentials for a Poisson sender).
    pub gaps: &'a [f64],
    /// The largest floor used (see [`gap_floor_ns`]), ns.
    pub gap_floor_ns: f64,
    /// Whether any agent stamped (otherwise no latency checks apply).
    pub measuring: bool,
}

/// Everything the analysis concludes.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Analysis {
    /// Every check, in the order of the table above.
    pub checks: Vec<Check>,
    /// Every lag-th sample is used for the percentiles (1 = all).
    pub thinning_lag: usize,
    /// Samples used for the percentiles, after thinning.
    pub used: usize,
    /// Latency percentiles (from the scheduled send time).
    pub latency: Vec<PercentileRow>,
    /// User-space round trips (send call to receipt), same samples.
    pub user_rtt: Vec<PercentileRow>,
    /// The server's own sojourn (synthetic protocol), same samples.
    pub server_sojourn: Option<Vec<PercentileRow>>,
    /// Send lag percentiles over all samples: (p50, p99, max), ns.
    pub send_lag: Option<(u64, u64, u64)>,
    /// Mean latency over the used samples, ns.
    pub mean_latency_ns: Option<f64>,
    /// All checks passed (or did not apply).
    pub valid: bool,
    /// For every failed check: what went wrong and what to change.
    pub verdicts: Vec<String>,
}

/// `p99.9` style label of a quantile given as a fraction.
pub fn label(q: f64) -> String {
    let p = q * 100.0;
    let s = format!("{p:.4}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    format!("p{s}")
}

struct Thinning {
    lag: usize,
    ok: bool,
    check: Check,
}

fn independence(samples: &[Sample]) -> Thinning {
    let n = samples.len();
    if n < 30 {
        return Thinning {
            lag: 1,
            ok: false,
            check: Check {
                name: "independence",
                status: CheckStatus::Fail,
                statistic: None,
                threshold: None,
                detail: format!("{n} samples are too few to test (30 needed)"),
            },
        };
    }
    let w = n.min(INDEPENDENCE_WINDOW);
    let start = (n - w) / 2; // w <= n
    let series: Vec<f64> = samples[start..start + w]
        .iter()
        .map(|s| s.latency_ns as f64)
        .collect();
    let max_lag = (w / 10).clamp(1, MAX_LAG);
    let ind = independence_lag(&series, max_lag);
    let last = ind.rho_at_lag.last().copied();
    match ind.lag {
        Some(lag) => Thinning {
            lag,
            ok: true,
            check: Check {
                name: "independence",
                status: CheckStatus::Pass,
                statistic: last.map(|(_, r)| r),
                threshold: Some(ind.threshold),
                detail: if lag == 1 {
                    format!(
                        "Spearman ρ = {:.3} at lag 1 (|ρ| < {:.3}, {w} samples): no thinning",
                        last.map_or(0.0, |(_, r)| r),
                        ind.threshold
                    )
                } else {
                    let r1 = ind.rho_at_lag.first().map_or(0.0, |(_, r)| *r);
                    format!(
                        "ρ = {r1:.3} at lag 1; lag {lag} is independent (ρ = {:.3}, |ρ| < {:.3}): every {lag}-th sample used",
                        last.map_or(0.0, |(_, r)| r),
                        ind.threshold
                    )
                },
            },
        },
        None => Thinning {
            lag: max_lag,
            ok: false,
            check: Check {
                name: "independence",
                status: CheckStatus::Fail,
                statistic: last.map(|(_, r)| r),
                threshold: Some(ind.threshold),
                detail: match last {
                    Some((l, r)) => format!(
                        "still correlated at lag {l}: ρ = {r:.3}, threshold {:.3}",
                        ind.threshold
                    ),
                    None => "ρ undefined (constant latencies?)".to_string(),
                },
            },
        },
    }
}

fn sorted_by<F: Fn(&Sample) -> Option<u64>>(samples: &[Sample], lag: usize, f: F) -> Vec<u64> {
    let mut v: Vec<u64> = samples.iter().step_by(lag.max(1)).filter_map(f).collect();
    v.sort_unstable();
    v
}

fn rows(sorted: &[u64], params: &AnalysisParams) -> Vec<PercentileRow> {
    params
        .quantiles
        .iter()
        .map(|&q| {
            let est = percentile(sorted, q);
            let ci = percentile_ci(sorted, q, params.confidence);
            let rel = match (est, ci) {
                (Some(e), Some(c)) => Some(if e == 0 {
                    if c.upper == 0 {
                        0.0
                    } else {
                        f64::INFINITY
                    }
                } else {
                    (e.saturating_sub(c.lower)).max(c.upper.saturating_sub(e)) as f64 / e as f64
                }),
                _ => None,
            };
            PercentileRow {
                percentile: q * 100.0,
                value_ns: None,
                raw_ns: est,
                ci_lower_ns: ci.map(|c| c.lower),
                ci_upper_ns: ci.map(|c| c.upper),
                ci_rel_halfwidth: rel,
                ci_ok: rel.is_some_and(|r| r <= params.ci_width),
            }
        })
        .collect()
}

/// Independent samples needed for quantile row `r` to meet the width, given
/// `n` now (None when it already does).
fn needed_independent(r: &PercentileRow, n: usize, params: &AnalysisParams) -> Option<usize> {
    if r.ci_ok {
        return None;
    }
    let q = r.percentile / 100.0;
    let min = min_samples_for_ci(q, params.confidence);
    Some(match r.ci_rel_halfwidth {
        // The half-width shrinks like 1/√n.
        Some(h) if h.is_finite() && h > 0.0 => {
            let k = (h / params.ci_width).powi(2) * 1.1;
            ((n as f64 * k).ceil() as usize).max(min).max(n + 1)
        }
        _ => min.saturating_add(min / 2).max(n + 1),
    })
}

/// For the run-longer loop: the number of (post-warm-up) samples wanted so
/// that every percentile's interval meets the width; `None` if they all do.
pub fn samples_needed(samples: &[Sample], params: &AnalysisParams) -> Option<usize> {
    let th = independence(samples);
    let sorted = sorted_by(samples, th.lag, |s| Some(s.latency_ns));
    let n = sorted.len();
    let need = rows(&sorted, params)
        .iter()
        .filter_map(|r| needed_independent(r, n, params))
        .max()?;
    Some(need.saturating_mul(th.lag).max(samples.len() + 1))
}

/// The median of `v`, which must not be empty (the caller gives chunks of
/// at least 10 samples).
fn median(v: &mut [f64]) -> f64 {
    let m = v.len() / 2;
    let (_, x, _) = v.select_nth_unstable_by(m, f64::total_cmp);
    *x
}

fn stationarity(samples: &[Sample]) -> Check {
    let n = samples.len();
    let lat: Vec<f64> = samples.iter().map(|s| s.latency_ns as f64).collect();
    let (series, what) = if n >= 10 * KPSS_WINDOWS {
        let per = n / KPSS_WINDOWS;
        let meds: Vec<f64> = lat
            .chunks_exact(per)
            .take(KPSS_WINDOWS)
            .map(|c| median(&mut c.to_vec()))
            .collect();
        (meds, format!("{KPSS_WINDOWS} medians of {per} samples"))
    } else {
        (lat, format!("{n} samples"))
    };
    if series.len() < 20 {
        return Check {
            name: "stationarity",
            status: CheckStatus::Fail,
            statistic: None,
            threshold: None,
            detail: format!("{n} samples are too few to test (20 needed)"),
        };
    }
    match kpss(&series) {
        Some(k) => Check {
            name: "stationarity",
            status: if k.stationary {
                CheckStatus::Pass
            } else {
                CheckStatus::Fail
            },
            statistic: Some(k.statistic),
            threshold: Some(k.critical_5pct),
            detail: format!(
                "KPSS η = {:.3} (5 % critical {:.3}, {what}, {} lags)",
                k.statistic, k.critical_5pct, k.lags
            ),
        },
        None => Check {
            name: "stationarity",
            status: CheckStatus::Pass,
            statistic: None,
            threshold: None,
            detail: format!("constant series ({what})"),
        },
    }
}

fn poisson(gaps: &[f64], floor_ns: f64, arrival: Arrival) -> Check {
    if arrival == Arrival::Fixed {
        return Check {
            name: "poisson",
            status: CheckStatus::Skipped,
            statistic: None,
            threshold: None,
            detail: "fixed spacing asked for: the rate check covers the schedule".into(),
        };
    }
    let step = gaps.len().div_ceil(AD_MAX_GAPS).max(1);
    let sub: Vec<f64> = gaps.iter().step_by(step).copied().collect();
    match anderson_darling_exponential(&sub) {
        Some(ad) => Check {
            name: "poisson",
            status: if ad.reject_at_5pct {
                CheckStatus::Fail
            } else {
                CheckStatus::Pass
            },
            statistic: Some(ad.statistic),
            threshold: Some(ad.critical_5pct),
            detail: format!(
                "Anderson–Darling A² = {:.3} (5 % critical {:.3}, {} send gaps above {})",
                ad.statistic,
                ad.critical_5pct,
                ad.n,
                fmt_ns(floor_ns as u64)
            ),
        },
        None => Check {
            name: "poisson",
            status: CheckStatus::Fail,
            statistic: None,
            threshold: None,
            detail: format!("{} send gaps are too few to test", sub.len()),
        },
    }
}

fn secs_for(samples: usize, per_s: f64) -> f64 {
    if per_s > 0.0 {
        samples as f64 / per_s
    } else {
        f64::INFINITY
    }
}

/// The rate check and, when it fails, its verdict. A window of 0 (sending
/// ended when it began) or a requested rate that is not positive has no
/// rate to compare: the check fails and says so instead of dividing by 0.
fn rate(facts: &RunFacts<'_>, params: &AnalysisParams) -> (Check, Option<String>) {
    let fail = |detail: String| Check {
        name: "rate",
        status: CheckStatus::Fail,
        statistic: None,
        threshold: Some(params.rate),
        detail,
    };
    if facts.window_ns == 0 {
        return (
            fail(format!(
                "no sending window (it ended when it began): {} requests sent, no rate",
                facts.sent
            )),
            Some("rate: the run has no sending window (its end is not after its start), so nothing was measured; check that the agents started and ran for --duration".into()),
        );
    }
    if !(params.rate > 0.0 && params.rate.is_finite()) {
        return (
            fail(format!("no requested rate to compare with ({})", params.rate)),
            Some(format!(
                "rate: the requested rate is {}, so the achieved rate cannot be checked; give a positive --rate",
                params.rate
            )),
        );
    }
    let achieved = facts.sent as f64 / (facts.window_ns as f64 / 1e9);
    let dev = achieved / params.rate - 1.0;
    let rate_ok = dev.abs() <= RATE_TOLERANCE;
    let check = Check {
        name: "rate",
        status: if rate_ok {
            CheckStatus::Pass
        } else {
            CheckStatus::Fail
        },
        statistic: Some(achieved),
        threshold: Some(params.rate),
        detail: format!(
            "achieved {achieved:.0} req/s vs {:.0} requested ({:+.1} %, ±{:.0} % allowed)",
            params.rate,
            dev * 100.0,
            RATE_TOLERANCE * 100.0
        ),
    };
    let verdict = (!rate_ok).then(|| {
        format!(
            "rate: sent {achieved:.0} req/s instead of {:.0} ({:+.1} %): the client could not keep its schedule or its sends failed; lower --rate, add --threads/--conns, or check send errors",
            params.rate,
            dev * 100.0
        )
    });
    (check, verdict)
}

/// Analyse a run: `samples` are the post-warm-up latency samples of every
/// measuring agent in scheduled-time order.
///
/// Degenerate runs give a report, never a panic: no samples, a window of 0
/// or a requested rate of 0 fail the checks concerned, each with its verdict,
/// and leave the percentiles `None`.
pub fn analyze(samples: &[Sample], facts: &RunFacts<'_>, params: &AnalysisParams) -> Analysis {
    let mut checks = Vec::new();
    let mut verdicts = Vec::new();
    let window_s = facts.window_ns as f64 / 1e9;
    let (rate_check, rate_verdict) = rate(facts, params);
    checks.push(rate_check);
    verdicts.extend(rate_verdict);
    let ad = poisson(facts.gaps, facts.gap_floor_ns, params.arrival);
    if ad.status == CheckStatus::Fail {
        verdicts.push(format!(
            "poisson: the send times are not a Poisson process ({}): the client deviates from its schedule; lower --rate, add --threads, or raise --spin-us",
            ad.detail
        ));
    }
    checks.push(ad);

    let qmax = params.quantiles.iter().copied().fold(0.0, f64::max);
    let mut out = Analysis {
        checks: Vec::new(),
        thinning_lag: 1,
        used: 0,
        latency: Vec::new(),
        user_rtt: Vec::new(),
        server_sojourn: None,
        send_lag: None,
        mean_latency_ns: None,
        valid: false,
        verdicts: Vec::new(),
    };
    if facts.measuring {
        let th = independence(samples);
        if !th.ok {
            verdicts.push(format!(
                "independence: {}: consecutive latencies are not independent, so no confidence interval holds; lower the load, sample with a sparse latency agent (--agent latency --latency-rate R), or run longer",
                th.check.detail
            ));
        }
        let lag = th.lag;
        checks.push(th.check);
        let st = stationarity(samples);
        if st.status == CheckStatus::Fail {
            verdicts.push(format!(
                "stationarity: latency drifts during the run ({}): the system is not in a steady state (a growing queue, background load, warm-up); lower --rate, lengthen --warmup, or quiet the machine",
                st.detail
            ));
        }
        checks.push(st);

        let sorted = sorted_by(samples, lag, |s| Some(s.latency_ns));
        let n = sorted.len();
        out.latency = rows(&sorted, params);
        out.user_rtt = rows(
            &sorted_by(samples, lag, |s| Some(s.user_rtt_ns as u64)),
            params,
        );
        let server = sorted_by(samples, lag, |s| {
            (s.server_ns != u32::MAX).then_some(s.server_ns as u64)
        });
        if !server.is_empty() {
            out.server_sojourn = Some(rows(&server, params));
        }
        if n > 0 {
            out.mean_latency_ns = Some(sorted.iter().map(|&v| v as f64).sum::<f64>() / n as f64);
        }
        let lags = sorted_by(samples, 1, |s| Some(s.lag_ns as u64));
        if let (Some(a), Some(b), Some(m)) = (
            percentile(&lags, 0.5),
            percentile(&lags, 0.99),
            lags.last().copied(),
        ) {
            out.send_lag = Some((a, b, m));
        }
        out.thinning_lag = lag;
        out.used = n;
        // Raw samples per second of sending (after warm-up), for advice;
        // 0 for an empty window (the advice then cannot say how long).
        let per_s = if window_s > 0.0 {
            samples.len() as f64 / window_s
        } else {
            0.0
        };
        let mut ci_fail = Vec::new();
        for r in &out.latency {
            let Some(need) = needed_independent(r, n, params) else {
                continue;
            };
            let q = r.percentile / 100.0;
            let raw_need = need.saturating_mul(lag);
            let t = secs_for(raw_need, per_s);
            let how_long = if t.is_finite() {
                format!("≈ {t:.0} s at this rate")
            } else if samples.is_empty() {
                "and none came in during the run".to_string()
            } else {
                "with no sending window to tell how long that takes".to_string()
            };
            ci_fail.push(label(q));
            if r.ci_lower_ns.is_none() {
                verdicts.push(format!(
                    "ci: too few samples for {}: {n} independent samples (every {lag}-th of {}), at least {} needed for a {:.0} % interval (min_samples_for_ci), {} for ±{:.1} %: about {raw_need} latency samples, {how_long}; raise --max-duration",
                    label(q),
                    samples.len(),
                    min_samples_for_ci(q, params.confidence),
                    params.confidence * 100.0,
                    need,
                    params.ci_width * 100.0
                ));
            } else {
                verdicts.push(format!(
                    "ci: the {:.0} % interval of {} is ±{:.1} %, wider than ±{:.1} %: about {need} independent samples needed ({raw_need} latency samples, {how_long}); raise --max-duration or loosen --ci-width",
                    params.confidence * 100.0,
                    label(q),
                    r.ci_rel_halfwidth.unwrap_or(f64::INFINITY) * 100.0,
                    params.ci_width * 100.0
                ));
            }
        }
        checks.push(Check {
            name: "ci",
            status: if ci_fail.is_empty() {
                CheckStatus::Pass
            } else {
                CheckStatus::Fail
            },
            statistic: out
                .latency
                .iter()
                .filter_map(|r| r.ci_rel_halfwidth)
                .fold(None, |m: Option<f64>, h| Some(m.map_or(h, |m| m.max(h)))),
            threshold: Some(params.ci_width),
            detail: if ci_fail.is_empty() {
                format!(
                    "every {:.0} % interval within ±{:.1} % ({n} samples)",
                    params.confidence * 100.0,
                    params.ci_width * 100.0
                )
            } else {
                format!(
                    "too wide or missing for {} ({n} samples)",
                    ci_fail.join(", ")
                )
            },
        });
    }
    let allowed = if facts.measuring {
        (1.0 - qmax) / 10.0
    } else {
        1e-3
    };
    let frac = if facts.sent > 0 {
        (facts.lost + facts.dropped) as f64 / facts.sent as f64
    } else {
        0.0
    };
    let resp_ok = frac <= allowed;
    checks.push(Check {
        name: "responses",
        status: if resp_ok {
            CheckStatus::Pass
        } else {
            CheckStatus::Fail
        },
        statistic: Some(frac),
        threshold: Some(allowed),
        detail: format!(
            "{} of {} requests unanswered or dropped ({:.4} %, at most {:.4} % allowed)",
            facts.lost + facts.dropped,
            facts.sent,
            frac * 100.0,
            allowed * 100.0
        ),
    });
    if !resp_ok {
        verdicts.push(format!(
            "responses: {} of {} requests got no response or a DROP ({:.4} % > {:.4} %): the tail of the latency distribution is unknown; lower --rate, check the server, or raise --drain-ms if responses are only slow",
            facts.lost + facts.dropped,
            facts.sent,
            frac * 100.0,
            allowed * 100.0
        ));
    }
    let valid = checks.iter().all(|c| c.status != CheckStatus::Fail);
    if valid {
        for r in &mut out.latency {
            r.value_ns = r.raw_ns;
        }
        for r in &mut out.user_rtt {
            r.value_ns = r.raw_ns;
        }
        if let Some(rs) = &mut out.server_sojourn {
            for r in rs {
                r.value_ns = r.raw_ns;
            }
        }
    }
    out.checks = checks;
    out.valid = valid;
    out.verdicts = verdicts;
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Rng;

    fn params(qs: &[f64], w: f64) -> AnalysisParams {
        AnalysisParams {
            quantiles: qs.to_vec(),
            ci_width: w,
            confidence: 0.95,
            arrival: Arrival::Poisson,
            rate: 1000.0,
        }
    }

    fn iid(n: usize, seed: u64) -> Vec<Sample> {
        let mut r = Rng::new(seed);
        (0..n)
            .map(|i| Sample {
                sched_ns: i as u64 * 1_000_000,
                latency_ns: 10_000 + r.exp(20_000.0) as u64,
                server_ns: u32::MAX,
                ..Sample::default()
            })
            .collect()
    }

    fn exp_gaps(n: usize, seed: u64) -> Vec<f64> {
        let mut r = Rng::new(seed);
        (0..n).map(|_| r.exp(1.0)).collect()
    }

    fn facts<'a>(n: usize, gaps: &'a [f64]) -> RunFacts<'a> {
        RunFacts {
            sent: n as u64,
            lost: 0,
            dropped: 0,
            window_ns: n as u64 * 1_000_000,
            gaps,
            gap_floor_ns: 0.0,
            measuring: true,
        }
    }

    #[test]
    fn labels() {
        let table = [
            (0.5, "p50"),
            (0.99, "p99"),
            (0.999, "p99.9"),
            (0.9999, "p99.99"),
        ];
        for (q, want) in table {
            assert_eq!(label(q), want);
        }
    }

    #[test]
    fn a_clean_run_is_valid() {
        let seed = 21;
        let s = iid(20_000, seed);
        let g = exp_gaps(2000, seed);
        let a = analyze(&s, &facts(20_000, &g), &params(&[0.5, 0.99], 0.1));
        assert!(a.valid, "seed {seed}: {:#?}", a.checks);
        assert_eq!(a.thinning_lag, 1);
        assert!(a.verdicts.is_empty());
        assert_eq!(a.latency[0].value_ns, a.latency[0].raw_ns);
        // p50 of 10 µs + Exp(20 µs) is 10 + 20·ln 2 ≈ 23.9 µs.
        let p50 = a.latency[0].raw_ns.unwrap() as f64;
        assert!((p50 / 23_863.0 - 1.0).abs() < 0.05, "seed {seed}: {p50}");
    }

    #[test]
    fn each_failure_gives_its_verdict() {
        let seed = 5;
        let s = iid(20_000, seed);
        let g = exp_gaps(2000, seed);
        let p = params(&[0.5, 0.99], 0.1);
        // Rate 20 % short.
        let mut f = facts(20_000, &g);
        f.sent = 16_000;
        let a = analyze(&s, &f, &p);
        assert!(!a.valid && a.verdicts.iter().any(|v| v.starts_with("rate:")));
        assert!(a
            .latency
            .iter()
            .all(|r| r.value_ns.is_none() && r.raw_ns.is_some()));
        // Fixed gaps are not exponential.
        let fixed = vec![1.0; 2000];
        let a = analyze(&s, &facts(20_000, &fixed), &p);
        assert!(a.verdicts.iter().any(|v| v.starts_with("poisson:")));
        // A trend is not stationary.
        let mut trend = s.clone();
        for (i, x) in trend.iter_mut().enumerate() {
            x.latency_ns += i as u64 * 10;
        }
        let a = analyze(&trend, &facts(20_000, &g), &p);
        assert!(
            a.verdicts.iter().any(|v| v.starts_with("stationarity:")),
            "{:?}",
            a.verdicts
        );
        // Too few samples for p99.99.
        let a = analyze(&s[..2000], &facts(2000, &g), &params(&[0.9999], 0.1));
        let v = a
            .verdicts
            .iter()
            .find(|v| v.starts_with("ci:"))
            .expect("ci verdict");
        assert!(
            v.contains("too few samples for p99.99") && v.contains("36887"),
            "{v}"
        );
        // Lost responses.
        let mut f = facts(20_000, &g);
        f.lost = 100;
        let a = analyze(&s, &f, &p);
        assert!(a.verdicts.iter().any(|v| v.starts_with("responses:")));
    }

    #[test]
    fn correlated_samples_are_thinned() {
        // An AR(1)-like series: each sample mostly repeats the previous one.
        let seed = 9;
        let mut r = Rng::new(seed);
        let mut x = 50_000.0;
        let s: Vec<Sample> = (0..20_000)
            .map(|i| {
                x = 0.8 * x + 0.2 * (50_000.0 + r.exp(20_000.0));
                Sample {
                    sched_ns: i * 1_000_000,
                    latency_ns: x as u64,
                    server_ns: u32::MAX,
                    ..Sample::default()
                }
            })
            .collect();
        let g = exp_gaps(2000, seed);
        let a = analyze(&s, &facts(20_000, &g), &params(&[0.5], 0.2));
        assert!(a.thinning_lag > 3, "seed {seed}: lag {}", a.thinning_lag);
        assert_eq!(a.used, 20_000usize.div_ceil(a.thinning_lag));
        let c = a.checks.iter().find(|c| c.name == "independence").unwrap();
        assert_eq!(c.status, CheckStatus::Pass);
    }

    #[test]
    fn samples_needed_grows_with_tighter_width() {
        let s = iid(5000, 3);
        assert_eq!(samples_needed(&s, &params(&[0.5], 0.5)), None);
        let loose = samples_needed(&s, &params(&[0.99], 0.05)).unwrap();
        let tight = samples_needed(&s, &params(&[0.99], 0.01)).unwrap();
        assert!(tight > loose && loose > 5000, "{loose} {tight}");
    }

    /// Degenerate runs: every one gives an invalid analysis that says why,
    /// no percentile without samples, and no NaN or infinite statistic.
    #[test]
    fn degenerate_runs_are_reported() {
        type Edit = fn(&mut RunFacts<'_>, &mut AnalysisParams);
        let one = iid(1, 1);
        let few = iid(10, 1);
        let none: &[Sample] = &[];
        // (case, samples, edit of a clean run's facts/params, samples used,
        //  the check that must fail, a phrase of its detail)
        type Case<'a> = (&'a str, &'a [Sample], Edit, usize, &'a str, &'a str);
        let table: &[Case] = &[
            (
                "no deliveries",
                none,
                |f, _| f.lost = f.sent,
                0,
                "independence",
                "0 samples are too few",
            ),
            (
                "one sample",
                &one,
                |_, _| {},
                1,
                "stationarity",
                "1 samples are too few",
            ),
            (
                "ten samples",
                &few,
                |_, _| {},
                10,
                "ci",
                "too wide or missing",
            ),
            (
                "every agent failed",
                none,
                |f, _| {
                    f.sent = 0;
                    f.gaps = &[];
                },
                0,
                "poisson",
                "0 send gaps are too few",
            ),
            (
                "window ended when it began",
                none,
                |f, _| f.window_ns = 0,
                0,
                "rate",
                "no sending window",
            ),
            (
                "requested rate of zero",
                none,
                |_, p| p.rate = 0.0,
                0,
                "rate",
                "no requested rate",
            ),
            (
                "nothing measured, nothing sent",
                none,
                |f, _| {
                    f.sent = 0;
                    f.measuring = false;
                },
                0,
                "rate",
                "achieved 0 req/s",
            ),
        ];
        let g = exp_gaps(2000, 3);
        for &(case, samples, edit, used, failing, phrase) in table {
            let mut f = facts(1000, &g);
            let mut p = params(&[0.5, 0.99], 0.1);
            edit(&mut f, &mut p);
            let a = analyze(samples, &f, &p);
            assert!(!a.valid, "{case}: valid");
            assert_eq!(a.used, used, "{case}");
            let c = a
                .checks
                .iter()
                .find(|c| c.name == failing)
                .unwrap_or_else(|| panic!("{case}: no {failing} check"));
            assert_eq!(c.status, CheckStatus::Fail, "{case}: {c:?}");
            assert!(c.detail.contains(phrase), "{case}: {:?}", c.detail);
            for c in a.checks.iter().filter(|c| c.status == CheckStatus::Fail) {
                let prefix = format!("{}:", c.name);
                assert!(
                    a.verdicts.iter().any(|v| v.starts_with(&prefix)),
                    "{case}: no verdict for {}: {:?}",
                    c.name,
                    a.verdicts
                );
            }
            assert!(
                a.checks
                    .iter()
                    .filter_map(|c| c.statistic)
                    .all(f64::is_finite),
                "{case}: {:?}",
                a.checks
            );
            for r in a.latency.iter().chain(&a.user_rtt) {
                assert_eq!(r.value_ns, None, "{case}: a value on an invalid run");
                assert_eq!(r.raw_ns.is_some(), used > 0, "{case}: {r:?}");
                if used < min_samples_for_ci(r.percentile / 100.0, p.confidence) {
                    assert_eq!(r.ci_lower_ns, None, "{case}: an interval from {used}");
                    assert!(!r.ci_ok, "{case}");
                }
            }
            assert_eq!(a.mean_latency_ns.is_some(), used > 0, "{case}");
            if f.measuring && used == 0 {
                assert!(
                    a.verdicts
                        .iter()
                        .any(|v| v.starts_with("ci: too few samples")),
                    "{case}: {:?}",
                    a.verdicts
                );
            }
        }
    }

    #[test]
    fn samples_needed_without_samples() {
        let p = params(&[0.5, 0.99], 0.1);
        let need = samples_needed(&[], &p).expect("some samples are needed");
        assert!(need >= min_samples_for_ci(0.99, 0.95), "{need}");
        let need = samples_needed(&iid(1, 1), &p).expect("more samples are needed");
        assert!(need > 1, "{need}");
    }
}
