//! The text report of `xlane bench fd`.

use super::analysis::ceil_i64;
use super::config::{PHI, PLAIN_TIMEOUT, XFD};
use super::report::FdBenchReport;
use crate::table::{fmt_ns, Table};

fn fmt_signed(x: i64) -> String {
    if x < 0 {
        format!("-{}", fmt_ns(x.unsigned_abs()))
    } else {
        fmt_ns(x as u64)
    }
}

fn fmt_opt(x: Option<i64>) -> String {
    x.map_or("-".to_string(), fmt_signed)
}

fn fmt_acc(a: f64) -> String {
    if a >= 1.0 {
        "100%".to_string()
    } else {
        format!("{:.4}%", 100.0 * a)
    }
}

impl FdBenchReport {
    /// The tables a person reads.
    pub fn render(&self) -> String {
        let mut out = String::new();
        if !self.detectors.is_empty() {
            out.push_str(&format!(
                "accuracy against Λ (suspect after T + Λ of silence; T = {}, {} hosts, each heartbeating to all others; detector clock: the receiving thread)\n",
                fmt_ns(self.params.period_ns),
                self.params.hosts
            ));
            let mut t = Table::new(&[
                "detector",
                "path",
                "heartbeats",
                "lost",
                "Λ 99%",
                "Λ 99.9%",
                "Λ 99.99%",
                "Λ 100%",
                "acc. at x-fd's Λ",
                "Λ 100% kernel",
                "Λ 100% latency",
                "Λ 100% ¬gap",
                "intervals",
                "set aside ¬gap",
            ]);
            for d in &self.detectors {
                let at = |a: f64| {
                    d.threshold_for_accuracy
                        .iter()
                        .find(|(x, _)| *x == a)
                        .map(|(_, l)| fmt_signed(*l))
                        .unwrap_or_else(|| "-".into())
                };
                let lost = d.heartbeats_sent.saturating_sub(d.heartbeats);
                let loss = if d.heartbeats_sent > 0 {
                    format!("{:.2}%", 100.0 * lost as f64 / d.heartbeats_sent as f64)
                } else {
                    "-".into()
                };
                t.row(vec![
                    d.name.clone(),
                    d.path.clone(),
                    d.heartbeats.to_string(),
                    loss,
                    at(0.99),
                    at(0.999),
                    at(0.9999),
                    fmt_opt(d.min_perfect_threshold_ns),
                    d.accuracy_at_xfd_threshold.map_or("-".into(), fmt_acc),
                    fmt_opt(d.kernel_min_perfect_threshold_ns),
                    fmt_opt(d.send_anchor_min_perfect_threshold_ns),
                    fmt_opt(d.min_perfect_threshold_outside_host_gaps_ns),
                    d.intervals.to_string(),
                    format!(
                        "{} ({:.4}%)",
                        d.intervals_in_host_gaps,
                        100.0 * d.intervals_in_host_gaps_fraction
                    ),
                ]);
            }
            let r = |x: Option<f64>| x.map_or("-".to_string(), |v| format!("{v:.1}×"));
            for (name, raw, outside) in [
                (
                    PLAIN_TIMEOUT,
                    self.ratio_plain_over_xfd,
                    self.ratio_plain_over_xfd_outside_host_gaps,
                ),
                (
                    PHI,
                    self.ratio_phi_over_xfd,
                    self.ratio_phi_over_xfd_outside_host_gaps,
                ),
            ] {
                let mut row = vec![String::new(); 13];
                row[0] = format!("{name} / {XFD}");
                row[7] = r(raw);
                row[11] = r(outside);
                t.row(row);
            }
            out.push_str(&t.render());
            out.push_str("Λ 100%: the smallest Λ without a false suspicion (T not included); kernel: the same with the kernel's receive stamps; latency: counted from the send time (the paper's per-heartbeat latency metric); ¬gap: the smallest Λ at which every interval is within Λ or explained by host gaps, i.e. the gap time the floor probes recorded inside it on the cores of its path covers its excess over T + Λ; set aside ¬gap: the intervals above that Λ, each so explained\n");
            out.push_str(&format!(
                "\nsmallest perfect Λ, plain-timeout / x-fd: {} over all intervals, {} outside host gaps\n",
                r(self.ratio_plain_over_xfd),
                r(self.ratio_plain_over_xfd_outside_host_gaps)
            ));
            out.push_str(&format!(
                "smallest perfect Λ, phi-accrual / x-fd: {} over all intervals, {} outside host gaps\n",
                r(self.ratio_phi_over_xfd),
                r(self.ratio_phi_over_xfd_outside_host_gaps)
            ));
            if self.ratio_plain_over_xfd_poll_outside_host_gaps.is_some() {
                out.push_str(&format!(
                    "the lane core polling, same run: smallest perfect Λ outside host gaps, plain-timeout / x-fd-poll {}, x-fd / x-fd-poll {}\n",
                    r(self.ratio_plain_over_xfd_poll_outside_host_gaps),
                    r(self.ratio_xfd_over_xfd_poll_outside_host_gaps)
                ));
            }
            if let Some(x) = self.detectors.iter().find(|d| d.name == XFD) {
                out.push_str(&format!(
                    "x-fd intervals set aside as explained by host gaps: {} of {} ({:.4}%)\n",
                    x.intervals_in_host_gaps,
                    x.intervals,
                    100.0 * x.intervals_in_host_gaps_fraction
                ));
            }
            if let Some(p) = self.detectors.iter().find_map(|d| d.phi.as_ref()) {
                out.push_str(&format!(
                    "phi-accrual: smallest perfect φ = {:.2}; on the Λ axis as μ̄ + z(φ)·σ̄ − T with its estimates averaged over the run (μ̄ = {}, σ̄ = {}): {}; the longest timeout − T it applied at that φ: {}\n",
                    p.min_perfect_phi,
                    fmt_ns(p.mean_estimate_ns.max(0.0) as u64),
                    fmt_ns(p.std_estimate_ns.max(0.0) as u64),
                    fmt_signed(ceil_i64(p.timeout_at_min_perfect_mean_ns)),
                    fmt_signed(ceil_i64(p.timeout_at_min_perfect_max_ns)),
                ));
            }
            let secs: f64 = self.rounds.iter().map(|r| r.duration_ns as f64 / 1e9).sum();
            let late_lane = self
                .rounds
                .iter()
                .map(|r| r.lane_sender_late_max_ns)
                .max()
                .unwrap_or(0);
            let late_plain = self
                .rounds
                .iter()
                .map(|r| r.plain_sender_late_max_ns)
                .max()
                .unwrap_or(0);
            out.push_str(&format!(
                "{} round(s), {:.1} s of heartbeats; worst sender lateness: lane {}, plain {}\n",
                self.rounds.len(),
                secs,
                fmt_ns(late_lane),
                fmt_ns(late_plain)
            ));
        }
        out.push_str(&self.floor.render(self.params.lane_core));
        if let Some(b) = &self.lane_core {
            if self.lane_core_polling.is_some() {
                out.push_str("rounds sleeping when idle:\n");
            }
            out.push_str(&b.render(self.params.lane_core));
        }
        if let Some(b) = &self.lane_core_polling {
            out.push_str("rounds polling:\n");
            out.push_str(&b.render(self.params.lane_core));
        }
        if let Some(x) = self
            .detectors
            .iter()
            .find(|d| d.name == XFD)
            .and_then(|d| d.min_perfect_threshold_ns)
        {
            out.push_str(&format!(
                "x-fd's smallest perfect Λ {} against the lane core's longest host gap {}\n",
                fmt_signed(x),
                fmt_ns(self.floor.max_gap_ns)
            ));
        }
        out.push_str(&crate::interference::render_cross_traffic(
            &self.cross_traffic_bps,
            self.switch_best_effort_drops,
            self.params.link_rate_bps,
        ));
        if let Some(f) = &self.failure_run {
            out.push_str(&format!(
                "\nreal failures: `xlane fd run` on every host, T = {}, Λ = {} ({}), stall after {} periods, {} per kind\n",
                fmt_ns(f.period_ns),
                fmt_ns(f.lambda_ns),
                f.lambda_source,
                f.stall_periods,
                f.repetitions
            ));
            let mut t = Table::new(&[
                "failure",
                "injections",
                "detected",
                "min",
                "p50",
                "max",
                "false suspicions",
            ]);
            for r in &self.failures {
                let o = |x: Option<u64>| x.map_or("-".to_string(), fmt_ns);
                t.row(vec![
                    format!("{} ({})", r.kind.name(), r.description),
                    r.injections.to_string(),
                    format!("{}/{}", r.detected, r.expected_detections),
                    o(r.min_ns),
                    o(r.p50_ns),
                    o(r.max_ns),
                    r.false_suspicions.to_string(),
                ]);
            }
            out.push_str(&t.render());
            out.push_str("detection time: the first suspicion of the victim at each other host − the injection instant\n");
            let part: u64 = self.failures.iter().map(|r| r.partition_suspicions).sum();
            out.push_str(&format!(
                "false suspicions of live peers: {} in total ({} while the lane core was away for at least half the silence; its longest host gap in this part: {}), {} outside injections; the cut host suspected its unreachable peers {} times (not counted); {} suspicions while the runners started (not counted); {} events missed; {} runners started\n",
                f.false_suspicions_total,
                f.false_suspicions_in_host_gaps,
                fmt_ns(f.floor.max_gap_ns),
                f.false_suspicions_between,
                part,
                f.startup_suspicions,
                f.events_missed,
                f.runners_started
            ));
        }
        for p in &self.plots {
            out.push_str(&format!("plot: {p}\n"));
        }
        out
    }
}
