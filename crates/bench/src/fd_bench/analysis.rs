//! Part 1's analysis: the smallest perfect thresholds, accuracy targets,
//! host-gap view and curves of every detector, and phi on the Λ axis.

use super::config::{PHI, PLAIN_TIMEOUT, XFD, XFD_POLL};
use super::replay::{Accumulators, Levels};
use super::report::{DetectorReport, PhiDetail};
use crate::attribution::GapIndex;
use crate::fd_gaps::OutsideGaps;
use xlane_fd::model::{phi_of_z, z_for_phi};
use xlane_fd::{ModelKind, PhiParams, ReplaySummary};

/// Accuracy targets reported as thresholds.
const TARGETS: [f64; 4] = [0.99, 0.999, 0.9999, 0.99999];

/// Maps phi levels to the Λ axis (see the module docs).
#[derive(Clone, Copy, Debug)]
pub(super) struct PhiAxis {
    pub(super) mean: f64,
    pub(super) std: f64,
    pub(super) period: f64,
}

impl PhiAxis {
    fn from_moments(m: &[(f64, f64)], period_ns: u64) -> Self {
        let n = m.len().max(1) as f64;
        let (s_mu, s_sd) = m
            .iter()
            .fold((0.0, 0.0), |(a, b), (mu, sd)| (a + mu, b + sd));
        let t = period_ns as f64;
        if m.is_empty() {
            return PhiAxis {
                mean: t,
                std: t / 4.0,
                period: t,
            };
        }
        PhiAxis {
            mean: s_mu / n,
            std: s_sd / n,
            period: t,
        }
    }

    /// Λ-equivalent of φ (ns, may be negative); `None` for a φ that has no
    /// finite quantile.
    pub(super) fn lambda(&self, phi: f64) -> Option<f64> {
        z_for_phi(phi).map(|z| self.mean + z * self.std - self.period)
    }

    /// φ whose Λ-equivalent is `lambda_ns`.
    pub(super) fn phi(&self, lambda_ns: f64) -> f64 {
        phi_of_z((lambda_ns + self.period - self.mean) / self.std.max(1e-9))
    }
}

/// `part / whole`, 0 for an empty whole.
fn fraction(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 / whole as f64
    }
}

pub(super) fn ceil_i64(x: f64) -> i64 {
    x.ceil().clamp(-9.0e18, 9.0e18) as i64
}

/// The threshold grid every detector's curve is reported on: 24 points per
/// decade from 1 µs up to twice the largest finite smallest-perfect Λ.
fn grid(hi_ns: f64) -> Vec<i64> {
    let hi = hi_ns.max(10_000.0) * 2.0;
    let mut v = Vec::new();
    let mut k = 0;
    loop {
        let x = 1_000.0 * 10f64.powf(k as f64 / 24.0);
        if x > hi {
            break;
        }
        v.push(x.round() as i64);
        k += 1;
    }
    v
}

/// `lane_gaps`: the gap time of the lane core (X-FD's path);
/// `regular_gaps`: of the regular cores (plain UDP's, phi's).
pub(super) fn evaluate(
    period_ns: u64,
    acc: Accumulators,
    lane_gaps: &GapIndex,
    regular_gaps: &GapIndex,
) -> (Vec<DetectorReport>, Vec<Vec<(f64, f64)>>) {
    let Accumulators {
        xfd,
        xfd_poll,
        xfd_kernel,
        xfd_send,
        plain,
        plain_kernel,
        plain_send,
        phi,
        phi_kernel,
        lane_sent,
        lane_sent_poll,
        plain_sent,
    } = acc;
    let polled = xfd_poll.arrivals > 0;
    let xfd_poll_out = xfd_poll.outside_gaps(lane_gaps);
    let (xfd_poll, _) = xfd_poll.summary(ModelKind::TimeoutArrival);
    let xfd_poll_min = xfd_poll.max_level().filter(|l| l.is_finite()).map(ceil_i64);
    let max_int = |l: Levels, kind| l.summary(kind).0.max_level().map(ceil_i64);
    let xfd_out = xfd.outside_gaps(lane_gaps);
    let plain_out = plain.outside_gaps(regular_gaps);
    let phi_out = phi.outside_gaps(regular_gaps);
    let (xfd, _) = xfd.summary(ModelKind::TimeoutArrival);
    let (plain, _) = plain.summary(ModelKind::TimeoutArrival);
    let (phi, moments) = phi.summary(ModelKind::Phi);
    let (phi_k, moments_k) = phi_kernel.summary(ModelKind::Phi);
    let axis = PhiAxis::from_moments(&moments, period_ns);
    let axis_k = PhiAxis::from_moments(&moments_k, period_ns);
    let phi_star = phi.max_level().filter(|p| p.is_finite());
    let phi_lambda = phi_star.and_then(|p| axis.lambda(p)).map(ceil_i64);
    let phi_lambda_k = phi_k
        .max_level()
        .filter(|p| p.is_finite())
        .and_then(|p| axis_k.lambda(p))
        .map(ceil_i64);
    let xfd_min = xfd.max_level().filter(|l| l.is_finite()).map(ceil_i64);
    let plain_min = plain.max_level().filter(|l| l.is_finite()).map(ceil_i64);
    let hi = [xfd_min, plain_min, phi_lambda, xfd_poll_min]
        .iter()
        .flatten()
        .map(|&x| x as f64)
        .fold(0.0, f64::max);
    let mut xs = grid(hi);
    xs.extend(
        [xfd_min, plain_min, phi_lambda, xfd_poll_min]
            .iter()
            .flatten(),
    );
    xs.sort_unstable();
    xs.dedup();
    let timeout_report = |name: &str,
                          path: &str,
                          s: &ReplaySummary,
                          min: Option<i64>,
                          sent: u64,
                          kernel: Option<i64>,
                          send: Option<i64>,
                          out: OutsideGaps| {
        let intervals = s.levels.len() as u64;
        DetectorReport {
            name: name.into(),
            path: path.into(),
            model: "fixed timeout T + Λ after the last arrival".into(),
            threshold_unit: "ns".into(),
            heartbeats: s.arrivals,
            heartbeats_sent: sent,
            intervals,
            min_perfect_threshold_ns: min,
            accuracy: xs.iter().map(|&x| (x, s.accuracy(x as f64))).collect(),
            threshold_for_accuracy: TARGETS
                .iter()
                .filter_map(|&a| s.threshold_for(a).map(|t| (a, ceil_i64(t))))
                .collect(),
            accuracy_at_xfd_threshold: xfd_min.map(|x| s.accuracy(x as f64)),
            kernel_min_perfect_threshold_ns: kernel,
            send_anchor_min_perfect_threshold_ns: send,
            min_perfect_threshold_outside_host_gaps_ns: out
                .threshold
                .filter(|l| l.is_finite())
                .map(ceil_i64),
            intervals_in_host_gaps: out.set_aside,
            intervals_in_host_gaps_fraction: fraction(out.set_aside, intervals),
            phi: None,
        }
    };
    let xfd_report = timeout_report(
        XFD,
        "lane",
        &xfd,
        xfd_min,
        lane_sent,
        max_int(xfd_kernel, ModelKind::TimeoutArrival),
        max_int(xfd_send, ModelKind::TimeoutSend),
        xfd_out,
    );
    let plain_report = timeout_report(
        PLAIN_TIMEOUT,
        "plain-udp",
        &plain,
        plain_min,
        plain_sent,
        max_int(plain_kernel, ModelKind::TimeoutArrival),
        max_int(plain_send, ModelKind::TimeoutSend),
        plain_out,
    );
    // Phi: accuracy at the φ whose Λ-equivalent is x; never below φ* at or
    // beyond its own perfect point (the bisection's rounding).
    let phi_at = |x: i64| {
        let mut p = axis.phi(x as f64);
        if let (Some(ps), Some(pl)) = (phi_star, phi_lambda) {
            if x >= pl {
                p = p.max(ps);
            }
        }
        p
    };
    let phi_detail = phi_star.map(|ps| {
        let z = z_for_phi(ps).unwrap_or(f64::INFINITY);
        let max_timeout = moments
            .iter()
            .map(|(mu, sd)| mu + z * sd - axis.period)
            .fold(f64::NEG_INFINITY, f64::max);
        let mut accuracy_phi: Vec<(f64, f64)> = [
            0.5, 1.0, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0, 16.0, 24.0, 32.0, 64.0, 128.0, 256.0, 512.0,
            1024.0, 4096.0, 16384.0,
        ]
        .iter()
        .map(|&p| (p, phi.accuracy(p)))
        .collect();
        accuracy_phi.push((ps, phi.accuracy(ps)));
        accuracy_phi.sort_by(|a, b| a.0.total_cmp(&b.0));
        let params = PhiParams::for_period(period_ns);
        PhiDetail {
            min_perfect_phi: ps,
            accuracy_phi,
            mean_estimate_ns: axis.mean,
            std_estimate_ns: axis.std,
            timeout_at_min_perfect_mean_ns: axis.lambda(ps).unwrap_or(f64::INFINITY),
            timeout_at_min_perfect_max_ns: max_timeout,
            window: params.window,
            min_std_ns: params.min_std_ns,
            conversion: "Λ(φ) = μ̄ + z(φ)·σ̄ − T with μ̄, σ̄ phi's estimates averaged over every interval; z(φ) the normal quantile with −log10 P(Z > z) = φ".into(),
        }
    });
    let phi_report = DetectorReport {
        name: PHI.into(),
        path: "plain-udp".into(),
        model: "phi-accrual (normal inter-arrival model, window 1000, σ ≥ T/10)".into(),
        threshold_unit: "phi".into(),
        heartbeats: phi.arrivals,
        heartbeats_sent: plain_sent,
        intervals: phi.levels.len() as u64,
        min_perfect_threshold_ns: phi_lambda,
        accuracy: xs.iter().map(|&x| (x, phi.accuracy(phi_at(x)))).collect(),
        threshold_for_accuracy: TARGETS
            .iter()
            .filter_map(|&a| {
                phi.threshold_for(a)
                    .and_then(|p| axis.lambda(p))
                    .map(|l| (a, ceil_i64(l)))
            })
            .collect(),
        accuracy_at_xfd_threshold: xfd_min.map(|x| phi.accuracy(phi_at(x))),
        kernel_min_perfect_threshold_ns: phi_lambda_k,
        send_anchor_min_perfect_threshold_ns: None,
        min_perfect_threshold_outside_host_gaps_ns: phi_out
            .threshold
            .filter(|p| p.is_finite())
            .and_then(|p| axis.lambda(p))
            .map(ceil_i64),
        intervals_in_host_gaps: phi_out.set_aside,
        intervals_in_host_gaps_fraction: fraction(phi_out.set_aside, phi.levels.len() as u64),
        phi: phi_detail,
    };
    let id = |l: f64| l.is_finite().then_some(l);
    let mut curves = vec![
        curve_points(&xfd, id),
        curve_points(&plain, id),
        curve_points(&phi, |p| if p.is_finite() { axis.lambda(p) } else { None }),
    ];
    let mut reports = vec![xfd_report, plain_report, phi_report];
    if polled {
        // The detector's own clock only: its kernel and send-anchored
        // thresholds are the interrupt rounds' concern.
        reports.push(timeout_report(
            XFD_POLL,
            "lane, polling",
            &xfd_poll,
            xfd_poll_min,
            lane_sent_poll,
            None,
            None,
            xfd_poll_out,
        ));
        curves.push(curve_points(&xfd_poll, id));
    }
    (reports, curves)
}

/// Indices of the sorted levels a curve is drawn from: 600 evenly spaced,
/// and the last ones on a log scale of their distance to the end (the tail,
/// where the nines are), the last 64 exactly.
pub(super) fn curve_indices(n: usize) -> Vec<usize> {
    let mut v: Vec<usize> = (0..600).map(|i| i * n / 600).collect();
    let mut k = 0.0f64;
    loop {
        let m = 10f64.powf(k / 40.0).round() as usize;
        if m > n {
            break;
        }
        v.push(n - m);
        k += 1.0;
    }
    v.extend(n.saturating_sub(64)..n);
    v.retain(|&i| i < n);
    v.sort_unstable();
    v.dedup();
    v
}

/// The exact accuracy staircase of a detector at the chosen levels, as
/// (Λ ns, accuracy) points.
fn curve_points(s: &ReplaySummary, to_ns: impl Fn(f64) -> Option<f64>) -> Vec<(f64, f64)> {
    curve_indices(s.levels.len())
        .into_iter()
        .filter_map(|i| {
            let l = s.levels[i];
            to_ns(l).map(|x| (x, s.accuracy(l)))
        })
        .collect()
}
