//! Sample moments and the X-Lane §6.3 violation-probability bound.

use serde::{Deserialize, Serialize};

/// Welford's update over an iterator of finite values; returns `(count, mean, M2)` where
/// `M2 = Σ (x_i - mean)²`.
fn welford(values: impl Iterator<Item = f64>) -> (usize, f64, f64) {
    let mut n = 0usize;
    let mut mean = 0.0f64;
    let mut m2 = 0.0f64;
    for x in values {
        n += 1;
        let delta = x - mean;
        mean += delta / n as f64;
        m2 += delta * (x - mean);
    }
    (n, mean, m2)
}

/// Mean and **sample** (unbiased, `n-1` denominator) variance of `samples`, computed in one pass
/// with Welford's algorithm (B. P. Welford, *Technometrics* 4(3), 1962; Knuth, *TAOCP* vol. 2,
/// §4.2.2, recurrences (15)–(16)):
///
/// `M_k = M_{k-1} + (x_k - M_{k-1})/k`, `S_k = S_{k-1} + (x_k - M_{k-1})(x_k - M_k)`,
/// `variance = S_n/(n-1)`.
///
/// The sample variance is used because it is unbiased and slightly larger than the population
/// variance `S_n/n`, i.e. conservative in [`violation_bound`]. Multiply by `(n-1)/n` for the
/// population variance. Values are converted to `f64` (exact below 2^53 ns ≈ 104 days).
///
/// Not-defined cases (the signature has no `Option`): empty input gives `(NaN, NaN)`;
/// a single sample gives `(x, 0.0)`.
pub fn mean_variance(samples: &[u64]) -> (f64, f64) {
    let (n, mean, m2) = welford(samples.iter().map(|&x| x as f64));
    match n {
        0 => (f64::NAN, f64::NAN),
        1 => (mean, 0.0),
        _ => (mean, (m2 / (n - 1) as f64).max(0.0)),
    }
}

/// Like [`mean_variance`] (mean and sample variance, Welford) for `f64` samples.
///
/// `None` if `samples` is empty, contains a non-finite value, or the result overflows.
/// A single sample gives `Some((x, 0.0))`.
pub fn mean_variance_f64(samples: &[f64]) -> Option<(f64, f64)> {
    if samples.is_empty() || samples.iter().any(|x| !x.is_finite()) {
        return None;
    }
    let (n, mean, m2) = welford(samples.iter().copied());
    let var = if n > 1 { m2 / (n - 1) as f64 } else { 0.0 };
    (mean.is_finite() && var.is_finite()).then_some((mean, var.max(0.0)))
}

/// Upper bounds on the probability of a latency violation, see [`violation_bound`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ProbBound {
    /// Bound `P^1_λ` on the probability that one packet exceeds λ, in `[0, 1]`.
    pub p1: f64,
    /// Bound `P^N_λ = 1 - (1 - P^1_λ)^N` on the probability that at least one of N independent
    /// packets exceeds λ, in `[0, 1]`.
    pub pn: f64,
}

/// `1 - (1-p1)^n`, computed as `-expm1(n·ln1p(-p1))` to stay accurate for tiny `p1`.
fn at_least_one(p1: f64, n: u64) -> f64 {
    if n == 0 {
        return 0.0;
    }
    if p1 >= 1.0 {
        return 1.0;
    }
    (-(n as f64 * (-p1).ln_1p()).exp_m1()).clamp(0.0, 1.0)
}

/// Inputs the bounds cannot use: NaN anywhere, non-finite mean, negative or NaN variance.
fn invalid(mean: f64, variance: f64, lambda: f64) -> bool {
    !mean.is_finite() || variance.is_nan() || variance < 0.0 || lambda.is_nan()
}

/// `(k/σ)²`, computed as a ratio first so that neither square overflows on its own.
fn k_over_sigma_sq(k: f64, variance: f64) -> f64 {
    (k / variance.sqrt()).powi(2)
}

/// X-Lane §6.3 probability-based metric.
///
/// `P^1_λ = min(1, σ² / (λ - λ_avg)²)` for `λ > λ_avg` — Chebyshev's inequality
/// `P(|X-μ| >= k) <= σ²/k²` (e.g. Feller, *An Introduction to Probability Theory*, vol. 1,
/// §IX.6), which bounds the one-sided event `X >= μ + k` as the paper writes it; and, assuming
/// independence, `P^N_λ = 1 - (1 - P^1_λ)^N`. (The one-sided Cantelli inequality is tighter, see
/// [`cantelli_bound`].) Like the paper, this treats the sample `mean` and `variance` as the true
/// moments.
///
/// Edge cases (no `Option` in the signature; all give the trivial, conservative bound):
/// `λ <= mean` gives `p1 = 1`; NaN in any input, a non-finite mean, or a negative variance gives
/// `p1 = 1`. `variance = +∞` gives `p1 = 1`; `λ = +∞` with finite variance gives `p1 = 0`.
/// `n = 0` always gives `pn = 0` (no packet, no violation).
pub fn violation_bound(mean: f64, variance: f64, lambda: f64, n: u64) -> ProbBound {
    let p1 = if invalid(mean, variance, lambda) || lambda <= mean {
        1.0
    } else {
        let t = k_over_sigma_sq(lambda - mean, variance);
        if t.is_nan() {
            1.0 // ∞/∞
        } else {
            (1.0 / t).min(1.0)
        }
    };
    ProbBound {
        p1,
        pn: at_least_one(p1, n),
    }
}

/// One-sided Cantelli inequality `P(X - μ >= k) <= σ²/(σ² + k²)` for `k = λ - mean > 0`
/// (Cantelli 1928; e.g. Grimmett & Stirzaker, *Probability and Random Processes*, §7.11,
/// exercise 9), with `P^N` as in [`violation_bound`]. Always `<=` the Chebyshev form.
/// Same edge-case conventions as [`violation_bound`].
pub fn cantelli_bound(mean: f64, variance: f64, lambda: f64, n: u64) -> ProbBound {
    let p1 = if invalid(mean, variance, lambda) || lambda <= mean {
        1.0
    } else {
        // σ²/(σ²+k²) = 1/(1 + k²/σ²); sharing t with the Chebyshev form keeps the two
        // consistently ordered after rounding.
        let t = k_over_sigma_sq(lambda - mean, variance);
        if t.is_nan() {
            1.0
        } else {
            (1.0 / (1.0 + t)).min(1.0)
        }
    };
    ProbBound {
        p1,
        pn: at_least_one(p1, n),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, tol: f64) -> bool {
        a == b || (a - b).abs() <= tol * b.abs()
    }

    #[test]
    fn mean_variance_table() {
        // Hand-computed. [2,4,4,4,5,5,7,9]: mean 5, Σ(x-5)² = 32, sample var 32/7.
        // Offset data 1e15 + [4,7,13,16]: mean 1e15+10, Σd² = 36+9+9+36 = 90, var 30 — the
        // naive Σx² - n·mean² formula loses everything here; Welford must not.
        let cases: &[(&[u64], f64, f64)] = &[
            (&[2, 4, 4, 4, 5, 5, 7, 9], 5.0, 32.0 / 7.0),
            (
                &[
                    1_000_000_000_000_004,
                    1_000_000_000_000_007,
                    1_000_000_000_000_013,
                    1_000_000_000_000_016,
                ],
                1e15 + 10.0,
                30.0,
            ),
            (&[7], 7.0, 0.0),
            (&[3, 3, 3], 3.0, 0.0),
            (
                &[0, u64::MAX],
                u64::MAX as f64 / 2.0,
                (u64::MAX as f64).powi(2) / 2.0,
            ),
        ];
        for (i, (data, m, v)) in cases.iter().enumerate() {
            let (gm, gv) = mean_variance(data);
            assert!(close(gm, *m, 1e-15), "case {i}: mean {gm} vs {m}");
            assert!(close(gv, *v, 1e-12), "case {i}: var {gv} vs {v}");
        }
        let (m, v) = mean_variance(&[]);
        assert!(m.is_nan() && v.is_nan());
    }

    #[test]
    fn mean_variance_f64_table() {
        assert_eq!(
            mean_variance_f64(&[1.0, 2.0, 3.0, 4.0]),
            Some((2.5, 5.0 / 3.0))
        );
        assert_eq!(mean_variance_f64(&[]), None);
        assert_eq!(mean_variance_f64(&[1.0, f64::NAN]), None);
        assert_eq!(mean_variance_f64(&[1.0, f64::INFINITY]), None);
        assert_eq!(mean_variance_f64(&[f64::MAX, -f64::MAX]), None); // overflow
    }

    #[test]
    fn violation_bound_table() {
        // Hand-computed: σ² = 4, mean 10.
        // λ=14: 4/16 = .25; N=2: 1 - .75² = .4375.
        // λ=20: 4/100 = .04; N=100: 1 - .96^100 = 1 - e^{100 ln .96} = 1 - e^{-4.0821995}
        //       = 1 - 0.0168703 = 0.9831297.
        // λ=12: 4/4 = 1 (cap). λ=11: 4/1 = 4 -> capped at 1. λ <= mean -> 1.
        // p1 = 1e-12, N = 1e6: 1-(1-1e-12)^1e6 ≈ 1e-6 (needs expm1/ln1p to get right).
        let cases = [
            (10.0, 4.0, 14.0, 1, 0.25, 0.25),
            (10.0, 4.0, 14.0, 2, 0.25, 0.4375),
            (10.0, 4.0, 20.0, 100, 0.04, 0.983_129_7),
            (10.0, 4.0, 12.0, 5, 1.0, 1.0),
            (10.0, 4.0, 11.0, 5, 1.0, 1.0),
            (10.0, 4.0, 10.0, 5, 1.0, 1.0),
            (10.0, 4.0, 9.0, 5, 1.0, 1.0),
            (10.0, 4.0, 14.0, 0, 0.25, 0.0),
            (10.0, 0.0, 14.0, 100, 0.0, 0.0),
            (0.0, 1e-12, 1.0, 1_000_000, 1e-12, 9.999_995e-7),
            (10.0, 4.0, f64::INFINITY, 5, 0.0, 0.0),
            (10.0, f64::INFINITY, 14.0, 5, 1.0, 1.0),
            (f64::NAN, 4.0, 14.0, 5, 1.0, 1.0),
            (10.0, f64::NAN, 14.0, 5, 1.0, 1.0),
            (10.0, 4.0, f64::NAN, 5, 1.0, 1.0),
            (10.0, -1.0, 14.0, 5, 1.0, 1.0),
            (f64::INFINITY, 4.0, f64::INFINITY, 5, 1.0, 1.0),
        ];
        for (i, (m, v, l, n, p1, pn)) in cases.into_iter().enumerate() {
            let b = violation_bound(m, v, l, n);
            assert!(close(b.p1, p1, 1e-9), "case {i}: p1 {} vs {p1}", b.p1);
            assert!(close(b.pn, pn, 1e-6), "case {i}: pn {} vs {pn}", b.pn);
        }
    }

    #[test]
    fn cantelli_table() {
        // σ²=4, k=4: 4/(4+16) = 0.2 (< Chebyshev's 0.25). k=2: 4/8 = 0.5 (Chebyshev gives 1).
        let cases = [
            (10.0, 4.0, 14.0, 1, 0.2),
            (10.0, 4.0, 12.0, 1, 0.5),
            (10.0, 4.0, 10.0, 1, 1.0),
            (10.0, 0.0, 14.0, 1, 0.0),
            (10.0, 4.0, f64::INFINITY, 1, 0.0),
        ];
        for (i, (m, v, l, n, p1)) in cases.into_iter().enumerate() {
            let b = cantelli_bound(m, v, l, n);
            assert!(close(b.p1, p1, 1e-12), "case {i}: {} vs {p1}", b.p1);
            assert!(b.p1 <= violation_bound(m, v, l, n).p1);
        }
    }

    #[test]
    fn no_samples_give_the_trivial_bound() {
        // An empty run: no moments, so no bound better than 1; no packets, no violation.
        let (m, v) = mean_variance(&[]);
        let b = violation_bound(m, v, 100.0, 1000);
        assert_eq!((b.p1, b.pn), (1.0, 1.0));
        let b = cantelli_bound(m, v, 100.0, 1000);
        assert_eq!((b.p1, b.pn), (1.0, 1.0));
        assert_eq!(violation_bound(10.0, 4.0, 20.0, 0).pn, 0.0);
        // One sample: variance 0, so any λ above it is never exceeded.
        let (m, v) = mean_variance(&[5]);
        assert_eq!((m, v), (5.0, 0.0));
        assert_eq!(violation_bound(m, v, 6.0, 10).p1, 0.0);
        assert_eq!(violation_bound(m, v, 5.0, 10).p1, 1.0);
        assert_eq!(mean_variance_f64(&[5.0]), Some((5.0, 0.0)));
    }
}
