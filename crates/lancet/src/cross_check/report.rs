//! What the cross-check found, and its human rendering.

use super::CrossCheckConfig;
use crate::analysis::label;
use serde::Serialize;
use std::fmt::Write as _;
use xlane_stats::fmt_ns;

/// One sockperf round.
#[derive(Clone, Debug, Serialize)]
pub struct SockperfRound {
    /// Round number, from 0.
    pub round: usize,
    /// Observations in sockperf's summary ("Total N observations").
    pub observations: Option<u64>,
    /// Rows of its `--full-log` (the round trips pooled).
    pub logged: usize,
    /// sockperf got no reply at all in this round (the server did not run
    /// for the whole round).
    pub no_replies: bool,
    /// Messages it counted as dropped.
    pub dropped: Option<u64>,
    /// Its own printed percentiles for this round, `(percent, ns)`, for
    /// each compared percentile it printed.
    pub printed: Vec<(f64, f64)>,
}

/// One lancet round.
#[derive(Clone, Debug, Serialize)]
pub struct LancetRound {
    /// Round number, from 0.
    pub round: usize,
    /// Requests sent.
    pub sent: u64,
    /// Replies matched to a request.
    pub received: u64,
    /// Requests never answered.
    pub lost: u64,
    /// Replies that did not parse as sockperf's.
    pub malformed: u64,
    /// Replies matching no outstanding request.
    pub unmatched: u64,
    /// Failed sends.
    pub send_errors: u64,
    /// Samples scheduled after the warm-up (the ones pooled).
    pub samples: usize,
    /// The run's own count of them ([`crate::report::SampleCounts::after_warmup`]).
    pub after_warmup: usize,
    /// User-space round trip of this round at each compared percentile, ns.
    pub user_rtt_ns: Vec<(f64, u64)>,
}

/// One compared percentile over the pools.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    /// Percentile, percent.
    pub percentile: f64,
    /// sockperf's pooled round trip, ns.
    pub sockperf_ns: u64,
    /// lancet's pooled user-space round trip, ns.
    pub lancet_user_rtt_ns: u64,
    /// `lancet_user_rtt_ns / sockperf_ns`.
    pub ratio: f64,
    /// lancet's pooled kernel-stamped latency, ns (for reference).
    pub lancet_kernel_ns: u64,
    /// `|ratio − 1| ≤ tolerance`.
    pub agree: bool,
}

/// What the floor probes of one CPU saw, summed over the slices.
#[derive(Clone, Debug, Serialize)]
pub struct CpuFloor {
    /// The CPU.
    pub cpu: usize,
    /// Who runs there: `clients`, `server` or `any` (no placement).
    pub role: &'static str,
    /// Total probing time, ns.
    pub duration_ns: u64,
    /// Time lost in gaps above the threshold, ns.
    pub stolen_ns: u64,
    /// `stolen_ns / duration_ns`; NaN (`null` in JSON) if the probe ran for
    /// no time.
    pub stolen_fraction: f64,
    /// Longest gap, ns.
    pub max_gap_ns: u64,
    /// Gaps above the threshold.
    pub gaps: u64,
    /// The gap threshold, ns.
    pub threshold_ns: u64,
    /// Share of round trips of sockperf's median length that a gap would
    /// touch: `(gaps · p50 + stolen) / duration`; NaN (`null` in JSON) if
    /// the probe ran for no time.
    pub touch_share: f64,
}

/// Everything the cross-check found; `--json` prints this.
#[derive(Clone, Debug, Serialize)]
pub struct CrossCheckReport {
    /// Settings.
    pub config: CrossCheckConfig,
    /// `sockperf --version`.
    pub sockperf_version: Option<String>,
    /// The server's UDP port on 127.0.0.1.
    pub port: u16,
    /// Each sockperf round.
    pub sockperf_rounds: Vec<SockperfRound>,
    /// Each lancet round.
    pub lancet_rounds: Vec<LancetRound>,
    /// Round trips in sockperf's pool.
    pub sockperf_pool: usize,
    /// Samples in lancet's pool.
    pub lancet_pool: usize,
    /// Each compared percentile.
    pub rows: Vec<Row>,
    /// The floor of each probed CPU (empty when `floor_ns` is 0).
    pub floor: Vec<CpuFloor>,
    /// Requests lancet lost over all rounds (its pool then misses them).
    pub lancet_lost: u64,
    /// Every row agrees, lancet lost nothing and every sockperf round got
    /// replies.
    pub agree: bool,
    /// One line: the outcome.
    pub verdict: String,
}

impl CrossCheckReport {
    /// The human report.
    pub fn render(&self) -> String {
        let c = &self.config;
        let mut s = String::new();
        let _ = writeln!(
            s,
            "cross-check: lancet (--app sockperf) and sockperf {} ping-pong against one \
             `sockperf server` on 127.0.0.1:{}",
            self.sockperf_version
                .as_deref()
                .unwrap_or("(version unknown)"),
            self.port
        );
        let place = match c.placement {
            Some(p) => format!(
                "clients on CPU {}, server on CPU {} (SCHED_IDLE spinner beside it)",
                p.client_cpu, p.server_cpu
            ),
            None => "placement left to the scheduler".into(),
        };
        let _ = writeln!(
            s,
            "{} B at {}/s, fixed spacing, {} alternating rounds of {} s per tool; {place}; \
             server {}",
            c.size,
            c.rate,
            c.rounds,
            c.round_seconds,
            match c.server_priority {
                Some(p) => format!("under SCHED_FIFO {p}"),
                None => "at normal priority".into(),
            }
        );
        for (sr, lr) in self.sockperf_rounds.iter().zip(&self.lancet_rounds) {
            let printed: Vec<String> = sr
                .printed
                .iter()
                .map(|(p, v)| format!("{} {}", label(p / 100.0), fmt_ns(*v as u64)))
                .collect();
            let mine: Vec<String> = lr
                .user_rtt_ns
                .iter()
                .map(|(p, v)| format!("{} {}", label(p / 100.0), fmt_ns(*v)))
                .collect();
            let sp = if sr.no_replies {
                "NO REPLIES (the server did not run)".to_string()
            } else {
                printed.join(" ")
            };
            let _ = writeln!(
                s,
                "round {:>2}: sockperf {} ({} observations, {} logged) | lancet user rtt {} \
                 ({} samples, {} lost)",
                sr.round,
                sp,
                sr.observations.map_or("?".into(), |n| n.to_string()),
                sr.logged,
                mine.join(" "),
                lr.samples,
                lr.lost
            );
        }
        if !self.floor.is_empty() {
            let _ = writeln!(
                s,
                "\nfloor: time a spinning normal-priority thread could not run (gaps > {}), \
                 measured after each lancet round, {} × {} per CPU:",
                fmt_ns(self.floor[0].threshold_ns),
                c.rounds,
                fmt_ns(c.floor_ns)
            );
            for f in &self.floor {
                if f.duration_ns == 0 {
                    let _ = writeln!(
                        s,
                        "  CPU {} ({}): not measured (the probe ran for no time)",
                        f.cpu, f.role
                    );
                    continue;
                }
                let _ = writeln!(
                    s,
                    "  CPU {} ({}): {:.3} % lost, longest gap {}, {} gaps; \
                     they would touch {:.2} % of median-length round trips",
                    f.cpu,
                    f.role,
                    f.stolen_fraction * 100.0,
                    fmt_ns(f.max_gap_ns),
                    f.gaps,
                    f.touch_share * 100.0
                );
            }
            let top = c.percentiles.iter().cloned().fold(0.0f64, f64::max);
            let tail = (100.0 - top) / 100.0;
            if let Some(f) = self.floor.iter().find(|f| f.touch_share >= tail) {
                let _ = writeln!(
                    s,
                    "  note: CPU {}'s gaps would touch more round trips than the {:.1} % \
                     beyond {}: on this run {} is within reach of the machine's floor",
                    f.cpu,
                    tail * 100.0,
                    label(top / 100.0),
                    label(top / 100.0)
                );
            }
        }
        let _ = writeln!(
            s,
            "\npooled: sockperf {} round trips, lancet {} samples ({} lost)",
            self.sockperf_pool, self.lancet_pool, self.lancet_lost
        );
        let _ = writeln!(
            s,
            "  {:<7} {:>10} {:>16} {:>7}   (lancet kernel-stamped latency)",
            "", "sockperf", "lancet user rtt", "ratio"
        );
        for r in &self.rows {
            let _ = writeln!(
                s,
                "  {:<7} {:>10} {:>16} {:>7.3}   ({}){}",
                label(r.percentile / 100.0),
                fmt_ns(r.sockperf_ns),
                fmt_ns(r.lancet_user_rtt_ns),
                r.ratio,
                fmt_ns(r.lancet_kernel_ns),
                if r.agree { "" } else { "  outside tolerance" }
            );
        }
        let _ = writeln!(s, "{}", self.verdict);
        s
    }
}
