//! The report of a run: a human table and JSON (serde).

use crate::analysis::{label, Analysis, Check, CheckStatus, PercentileRow, RunFacts};
use crate::config::{AgentKind, ClientConfig};
use serde::Serialize;
use std::fmt::Write as _;

/// Counters summed over the agents of a run.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    /// Requests sent.
    pub sent: u64,
    /// Responses matched to a request.
    pub received: u64,
    /// Requests never answered (after the drain time, or pushed out of the
    /// in-flight table).
    pub lost: u64,
    /// Requests refused with an R2P2 DROP (a full server or router):
    /// answered, never a sample.
    pub dropped: u64,
    /// Responses matching no outstanding request (duplicates, too late).
    pub unmatched: u64,
    /// Responses that did not parse.
    pub malformed: u64,
    /// Sends that failed (socket buffer full, connection broken).
    pub send_errors: u64,
    /// Receive errors (e.g. ICMP port unreachable).
    pub recv_errors: u64,
    /// Transmit stamps that contradicted their request (numbering lost; the
    /// socket then falls back to user-space transmit times).
    pub tx_stamp_mismatch: u64,
    /// Responses whose receive time came before their request's transmit
    /// time (the realtime clock stepped between the two): no latency can be
    /// told, so they are counted here and are not samples.
    pub rx_before_tx: u64,
    /// Samples not kept because the sample store was full.
    pub samples_dropped: u64,
    /// Samples whose transmit time is the kernel's software stamp.
    pub tx_kernel: u64,
    /// ... the NIC's hardware stamp.
    pub tx_hardware: u64,
    /// ... the user-space time before the send call.
    pub tx_user: u64,
    /// Samples whose receive time is the kernel's software stamp.
    pub rx_kernel: u64,
    /// ... the NIC's hardware stamp.
    pub rx_hardware: u64,
    /// ... the user-space time after the receive call.
    pub rx_user: u64,
    /// Largest time from a send call to its request's kernel software
    /// transmit stamp, ns: the client's own send path, and on TCP also the
    /// wait in the client's buffers for the congestion or receive window.
    /// The latency counts from the stamp and leaves this out; `user rtt`
    /// includes it.
    pub tx_delay_max_ns: u64,
    /// Largest send lag behind the schedule, ns.
    pub max_lag_ns: u64,
    /// Agent threads that asked for `SCHED_FIFO` and were refused.
    pub rt_denied: u64,
}

impl Counts {
    /// Add another agent's counters.
    pub fn add(&mut self, o: &Counts) {
        self.sent += o.sent;
        self.received += o.received;
        self.lost += o.lost;
        self.dropped += o.dropped;
        self.unmatched += o.unmatched;
        self.malformed += o.malformed;
        self.send_errors += o.send_errors;
        self.recv_errors += o.recv_errors;
        self.tx_stamp_mismatch += o.tx_stamp_mismatch;
        self.rx_before_tx += o.rx_before_tx;
        self.samples_dropped += o.samples_dropped;
        self.tx_kernel += o.tx_kernel;
        self.tx_hardware += o.tx_hardware;
        self.tx_user += o.tx_user;
        self.rx_kernel += o.rx_kernel;
        self.rx_hardware += o.rx_hardware;
        self.rx_user += o.rx_user;
        self.tx_delay_max_ns = self.tx_delay_max_ns.max(o.tx_delay_max_ns);
        self.max_lag_ns = self.max_lag_ns.max(o.max_lag_ns);
        self.rt_denied += o.rt_denied;
    }
}

/// Sample bookkeeping of a run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SampleCounts {
    /// Latency samples collected.
    pub collected: usize,
    /// ... scheduled after the warm-up.
    pub after_warmup: usize,
    /// Every lag-th is used (independence).
    pub thinning_lag: usize,
    /// ... so many are used for the percentiles.
    pub used: usize,
}

/// Send lag behind the schedule over the samples, ns.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LagSummary {
    /// Median.
    pub p50_ns: u64,
    /// 99th percentile.
    pub p99_ns: u64,
    /// Largest.
    pub max_ns: u64,
}

/// Everything a run found (see the crate docs); `--json` prints this.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// The settings.
    pub config: ClientConfig,
    /// Time from the start to the end of sending, s.
    pub elapsed_s: f64,
    /// Warm-up discarded, s.
    pub warmup_s: f64,
    /// Requests sent per second; NaN (`null` in JSON) when the sending
    /// window is empty (the `rate` check then says so).
    pub achieved_rate: f64,
    /// Responses received per second; NaN (`null` in JSON) when the sending
    /// window is empty.
    pub completion_rate: f64,
    /// Counters.
    pub counts: Counts,
    /// Samples.
    pub samples: SampleCounts,
    /// Latency from the scheduled send time.
    pub latency: Vec<PercentileRow>,
    /// User-space round trip (send call to receipt), same samples.
    pub user_rtt: Vec<PercentileRow>,
    /// Server-reported sojourn (synthetic protocol).
    pub server_sojourn: Option<Vec<PercentileRow>>,
    /// Mean latency of the used samples, ns.
    pub mean_latency_ns: Option<f64>,
    /// Send lag behind the schedule.
    pub send_lag: Option<LagSummary>,
    /// The self-checks.
    pub checks: Vec<Check>,
    /// All checks passed: the percentiles can be trusted.
    pub valid: bool,
    /// For each failed check, what went wrong and what to change.
    pub verdicts: Vec<String>,
}

pub use xlane_stats::fmt_ns;

/// `count` per second over `window_ns`; NaN for an empty window (there is
/// no rate, and 0 would claim one).
pub fn per_second(count: u64, window_ns: u64) -> f64 {
    if window_ns == 0 {
        f64::NAN
    } else {
        count as f64 / (window_ns as f64 / 1e9)
    }
}

/// `1234/s`, or `-/s` for a rate that is not a number (empty window).
pub fn fmt_rate(per_s: f64) -> String {
    if per_s.is_finite() {
        format!("{per_s:.0}/s")
    } else {
        "-/s".into()
    }
}

fn opt_ns(v: Option<u64>) -> String {
    v.map_or_else(|| "-".to_string(), fmt_ns)
}

fn pct(part: u64, whole: u64) -> String {
    if whole == 0 {
        "-".into()
    } else {
        format!("{:.0}%", part as f64 * 100.0 / whole as f64)
    }
}

impl Report {
    /// Assemble the report.
    pub fn build(
        cfg: &ClientConfig,
        counts: Counts,
        collected: usize,
        after_warmup: usize,
        facts: &RunFacts<'_>,
        a: Analysis,
    ) -> Report {
        let elapsed_s = facts.window_ns as f64 / 1e9;
        Report {
            config: cfg.clone(),
            elapsed_s,
            warmup_s: cfg.warmup() as f64 / 1e9,
            achieved_rate: per_second(counts.sent, facts.window_ns),
            completion_rate: per_second(counts.received, facts.window_ns),
            samples: SampleCounts {
                collected,
                after_warmup,
                thinning_lag: a.thinning_lag,
                used: a.used,
            },
            counts,
            latency: a.latency,
            user_rtt: a.user_rtt,
            server_sojourn: a.server_sojourn,
            mean_latency_ns: a.mean_latency_ns,
            send_lag: a.send_lag.map(|(p50_ns, p99_ns, max_ns)| LagSummary {
                p50_ns,
                p99_ns,
                max_ns,
            }),
            checks: a.checks,
            valid: a.valid,
            verdicts: a.verdicts,
        }
    }

    /// The latency row of `percentile` (in percent), if it was asked for.
    pub fn latency_at(&self, percentile: f64) -> Option<&PercentileRow> {
        self.latency
            .iter()
            .find(|r| (r.percentile - percentile).abs() < 1e-9)
    }

    /// The human table.
    pub fn render(&self) -> String {
        let c = &self.config;
        let mut s = String::new();
        let rate_part = match (c.agent, c.latency_rate) {
            (AgentKind::Latency, Some(lr)) => format!(
                "latency agent at {lr:.0} req/s + throughput agents at {:.0} req/s",
                c.rate - lr
            ),
            _ => format!("{} agents", c.agent),
        };
        let _ = writeln!(
            s,
            "lancet {} {} -> {}: {rate_part}, {} {:.0} req/s, {} conns, {} threads, {} B",
            c.transport, c.app, c.target, c.arrival, c.rate, c.conns, c.threads, c.size
        );
        let k = &self.counts;
        let _ = writeln!(
            s,
            "sent {} in {:.1} s ({}), received {} ({}), lost {}, unmatched {}, malformed {}, send errors {}",
            k.sent,
            self.elapsed_s,
            fmt_rate(self.achieved_rate),
            k.received,
            fmt_rate(self.completion_rate),
            k.lost,
            k.unmatched,
            k.malformed,
            k.send_errors
        );
        if c.transport == crate::Transport::R2p2 {
            let _ = writeln!(
                s,
                "r2p2: {} requests refused with DROP (answered, not samples); goodput {}",
                k.dropped,
                fmt_rate(self.completion_rate)
            );
        }
        if !c.more_targets.is_empty() {
            let _ = writeln!(
                s,
                "targets: {} servers, one picked at random per request",
                1 + c.more_targets.len()
            );
        }
        if let Some(p) = c.rt_priority {
            let _ = writeln!(
                s,
                "agent threads: SCHED_FIFO {p}{}",
                if k.rt_denied > 0 {
                    format!(
                        " refused for {} threads (not root?): they ran as normal threads",
                        k.rt_denied
                    )
                } else {
                    String::new()
                }
            );
        }
        if k.rx_before_tx > 0 {
            let _ = writeln!(
                s,
                "clock: {} responses stamped before their request was sent (the realtime clock stepped): not samples",
                k.rx_before_tx
            );
        }
        let stamped = k.tx_kernel + k.tx_hardware + k.tx_user;
        if stamped > 0 {
            let _ = writeln!(
                s,
                "stamps: tx kernel {} / hardware {} / user {}; rx kernel {} / hardware {} / user {}{}",
                pct(k.tx_kernel, stamped),
                pct(k.tx_hardware, stamped),
                pct(k.tx_user, stamped),
                pct(k.rx_kernel, stamped),
                pct(k.rx_hardware, stamped),
                pct(k.rx_user, stamped),
                if k.tx_stamp_mismatch > 0 {
                    format!(" ({} tx stamp mismatches)", k.tx_stamp_mismatch)
                } else {
                    String::new()
                }
            );
            if k.tx_kernel + k.tx_hardware > 0 {
                let _ = writeln!(
                    s,
                    "send call to kernel tx stamp: at most {} (left out of the latency)",
                    fmt_ns(k.tx_delay_max_ns)
                );
            }
            let sm = &self.samples;
            let _ = writeln!(
                s,
                "samples: {} collected, {} after {:.1} s warm-up, every {}-th used: {}",
                sm.collected, sm.after_warmup, self.warmup_s, sm.thinning_lag, sm.used
            );
            if let Some(l) = &self.send_lag {
                let _ = writeln!(
                    s,
                    "send lag behind schedule: p50 {}, p99 {}, max {}",
                    fmt_ns(l.p50_ns),
                    fmt_ns(l.p99_ns),
                    fmt_ns(l.max_ns)
                );
            }
            let _ = writeln!(s);
            let conf = c.confidence * 100.0;
            let _ = write!(
                s,
                "{:<9} {:>10}  {:>23}  {:>7}  {:<3} {:>10}",
                "",
                "latency",
                format!("{conf:.0}% CI"),
                "±",
                "",
                "user rtt"
            );
            if self.server_sojourn.is_some() {
                let _ = write!(s, " {:>10}", "server");
            }
            let _ = writeln!(s);
            for (i, r) in self.latency.iter().enumerate() {
                let value = match r.value_ns {
                    Some(v) => fmt_ns(v),
                    None => "INVALID".into(),
                };
                let ci = match (r.ci_lower_ns, r.ci_upper_ns) {
                    (Some(a), Some(b)) => format!("[{}, {}]", fmt_ns(a), fmt_ns(b)),
                    _ => "(too few samples)".into(),
                };
                let hw = r
                    .ci_rel_halfwidth
                    .map_or_else(|| "-".into(), |h| format!("{:.1}%", h * 100.0));
                let _ = write!(
                    s,
                    "{:<9} {:>10}  {:>23}  {:>7}  {:<3} {:>10}",
                    label(r.percentile / 100.0),
                    value,
                    ci,
                    hw,
                    if r.ci_ok { "ok" } else { "!" },
                    opt_ns(self.user_rtt.get(i).and_then(|u| u.raw_ns))
                );
                if let Some(sv) = &self.server_sojourn {
                    let _ = write!(s, " {:>10}", opt_ns(sv.get(i).and_then(|u| u.raw_ns)));
                }
                if r.value_ns.is_none() {
                    let _ = write!(s, "   (raw {})", opt_ns(r.raw_ns));
                }
                let _ = writeln!(s);
            }
            if let Some(m) = self.mean_latency_ns {
                let _ = writeln!(s, "{:<9} {:>10}", "mean", fmt_ns(m as u64));
            }
        }
        let _ = writeln!(s, "\nchecks:");
        for ch in &self.checks {
            let st = match ch.status {
                CheckStatus::Pass => "PASS",
                CheckStatus::Fail => "FAIL",
                CheckStatus::Skipped => "skip",
            };
            let _ = writeln!(s, "  {st}  {:<13} {}", ch.name, ch.detail);
        }
        if self.valid {
            let _ = writeln!(s, "\nvalid: every check passed");
        } else {
            let _ = writeln!(s, "\nNOT VALID — verdicts:");
            for v in &self.verdicts {
                let _ = writeln!(s, "  - {v}");
            }
        }
        s
    }
}

/// The report of a measuring run that got no response at all: `sent`
/// requests over `window_ns`, every one lost.
#[cfg(test)]
pub(crate) fn empty_report(sent: u64, window_ns: u64) -> Report {
    use crate::analysis::{analyze, AnalysisParams};
    use std::net::{Ipv4Addr, SocketAddrV4};
    let cfg = ClientConfig::new(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 9));
    let facts = RunFacts {
        sent,
        lost: sent,
        dropped: 0,
        window_ns,
        gaps: &[],
        gap_floor_ns: 0.0,
        measuring: true,
    };
    let a = analyze(&[], &facts, &AnalysisParams::from_config(&cfg));
    let counts = Counts {
        sent,
        lost: sent,
        ..Counts::default()
    };
    Report::build(&cfg, counts, 0, 0, &facts, a)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_over_an_empty_window_are_not_numbers() {
        let table = [
            (0, 0, None),
            (5, 0, None),
            (0, 1_000_000_000, Some(0.0)),
            (1000, 1_000_000_000, Some(1000.0)),
            (1, 500_000_000, Some(2.0)),
        ];
        for (count, window, want) in table {
            let got = per_second(count, window);
            match want {
                None => assert!(got.is_nan(), "{count}/{window}: {got}"),
                Some(w) => assert_eq!(got, w, "{count}/{window}"),
            }
        }
        assert_eq!(fmt_rate(f64::NAN), "-/s");
        assert_eq!(fmt_rate(f64::INFINITY), "-/s");
        assert_eq!(fmt_rate(1234.4), "1234/s");
    }

    /// Runs with no response, or no window: the report renders, says the
    /// run is not valid and why, and prints no NaN.
    #[test]
    fn empty_runs_render() {
        // (case, sent, window, phrases the text must hold)
        let table: &[(&str, u64, u64, &[&str])] = &[
            (
                "all lost",
                1000,
                1_000_000_000,
                &[
                    "sent 1000 in 1.0 s (1000/s)",
                    "lost 1000",
                    "0 samples are too few",
                    "NOT VALID",
                ],
            ),
            (
                "nothing sent",
                0,
                1_000_000_000,
                &["sent 0 in 1.0 s (0/s)", "FAIL  rate", "NOT VALID"],
            ),
            (
                "window ended when it began",
                0,
                0,
                &[
                    "sent 0 in 0.0 s (-/s), received 0 (-/s)",
                    "no sending window",
                    "NOT VALID",
                ],
            ),
        ];
        for &(case, sent, window, phrases) in table {
            let r = empty_report(sent, window);
            assert!(!r.valid, "{case}");
            assert_eq!((r.samples.collected, r.samples.used), (0, 0), "{case}");
            assert!(r
                .latency
                .iter()
                .all(|l| l.value_ns.is_none() && l.raw_ns.is_none()));
            assert_eq!(
                (r.mean_latency_ns, r.send_lag.clone()),
                (None, None),
                "{case}"
            );
            assert_eq!(r.achieved_rate.is_nan(), window == 0, "{case}");
            let text = r.render();
            for p in phrases {
                assert!(text.contains(p), "{case}: {p:?} not in\n{text}");
            }
            assert!(
                !text.contains("NaN") && !text.contains("inf"),
                "{case}:\n{text}"
            );
            assert!(
                r.latency_at(50.0).is_some_and(|l| l.raw_ns.is_none()),
                "{case}"
            );
        }
    }

    #[test]
    fn responses_before_their_requests_are_reported() {
        let mut r = empty_report(10, 1_000_000_000);
        assert!(!r.render().contains("clock:"));
        r.counts.rx_before_tx = 3;
        assert!(r
            .render()
            .contains("clock: 3 responses stamped before their request was sent"));
        let mut sum = Counts::default();
        sum.add(&r.counts);
        sum.add(&r.counts);
        assert_eq!(sum.rx_before_tx, 6);
    }

    #[test]
    fn durations_print_readably() {
        let table = [
            (999, "999ns"),
            (1_000, "1.0µs"),
            (28_793, "28.8µs"),
            (1_234_567, "1.23ms"),
            (2_500_000_000, "2.50s"),
        ];
        for (ns, want) in table {
            assert_eq!(fmt_ns(ns), want);
        }
    }
}
