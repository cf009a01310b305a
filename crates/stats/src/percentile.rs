//! Nearest-rank percentiles and distribution-free confidence intervals for quantiles.

use serde::{Deserialize, Serialize};

use crate::normal::{normal_cdf, normal_pdf, normal_quantile};

/// Nearest-rank index (1-based) of the q-quantile among `n` sorted samples: `ceil(q·n)`.
///
/// Definition: the nearest-rank method (e.g. NIST/SEMATECH e-Handbook; Wikipedia "Percentile",
/// nearest-rank method): the p-th percentile is the smallest value such that at least a fraction
/// `q` of the data is less than or equal to it, i.e. the value at rank `ceil(q·n)`.
///
/// Floating-point care: `q·n` is snapped to the nearest integer when it is within a few ulps of
/// it, so that `q = 0.07, n = 100` gives rank 7 (the product is `7.000000000000001` in `f64`).
/// The result is clamped to `1..=n`.
///
/// `None` if `n == 0` or `q` is not in `(0, 1]` (including NaN).
pub fn nearest_rank(n: usize, q: f64) -> Option<usize> {
    if n == 0 || !(q > 0.0 && q <= 1.0) {
        return None;
    }
    let x = q * n as f64;
    let r = x.round();
    let rank = if (x - r).abs() <= 8.0 * f64::EPSILON * x.max(1.0) {
        r
    } else {
        x.ceil()
    };
    // `rank` is finite and in (0, n·(1+ε)]; the float->usize cast saturates.
    Some((rank as usize).clamp(1, n))
}

/// Nearest-rank percentile: the value at rank `ceil(q·n)` (1-based) of `sorted`.
///
/// `sorted` must be sorted ascending (not checked: an unsorted slice gives the element at
/// that index, without panicking). See [`nearest_rank`] for the rank definition.
///
/// `None` if `sorted` is empty or `q` is not in `(0, 1]` (including NaN).
pub fn percentile(sorted: &[u64], q: f64) -> Option<u64> {
    let r = nearest_rank(sorted.len(), q)?;
    // r >= 1: `nearest_rank` clamps to 1..=n and returns None for n = 0.
    sorted.get(r - 1).copied()
}

/// A distribution-free confidence interval `[lower, upper] = [X_(lower_rank), X_(upper_rank)]`
/// for the q-quantile ξ_q, see [`percentile_ci`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PercentileCi {
    /// The quantile level q in (0, 1).
    pub q: f64,
    /// Lower end: the order statistic `X_(lower_rank)`.
    pub lower: u64,
    /// Upper end: the order statistic `X_(upper_rank)`.
    pub upper: u64,
    /// 1-based rank of the lower end (`1 <= lower_rank < upper_rank`).
    pub lower_rank: usize,
    /// 1-based rank of the upper end (`upper_rank <= n`).
    pub upper_rank: usize,
    /// The exact coverage probability achieved by these ranks for continuous distributions,
    /// `B(upper_rank-1) - B(lower_rank-1)` with `B` the Binomial(n, q) CDF. It is at least the
    /// requested confidence (ranks are integers, so it is usually a bit larger).
    pub confidence: f64,
}

/// Terms of the binomial pmf smaller than this fraction of the mode's term are dropped.
/// The dropped mass is below ~1e-28, far below the smallest representable α/2 (≈5.5e-17).
const PMF_CUTOFF: f64 = 1e-30;

/// `ln(max(q, 1-q))` computed without cancellation; the worst of the two tails decides whether
/// an interval with both ends inside the sample exists.
fn ln_worst_tail_base(q: f64) -> f64 {
    if q >= 0.5 {
        q.ln()
    } else {
        (-q).ln_1p()
    }
}

fn valid_q_conf(q: f64, confidence: f64) -> bool {
    q > 0.0 && q < 1.0 && confidence > 0.0 && confidence < 1.0
}

/// Both tails fit inside a sample of size `n`: `max(q,1-q)^n <= α/2`. This is exactly the
/// condition `B(0) = (1-q)^n <= α/2` and `1 - B(n-1) = q^n <= α/2`.
fn tails_fit(n: usize, ln_p: f64, alpha_half: f64) -> bool {
    (n as f64 * ln_p).exp() <= alpha_half
}

/// Smallest sample size `n` for which [`percentile_ci`] returns an interval at all.
///
/// With the equal-tailed construction of [`percentile_ci`], the interval needs a lower rank
/// `>= 1`, i.e. `P(Bin(n,q) = 0) = (1-q)^n <= α/2`, and an upper rank `<= n`, i.e.
/// `P(Bin(n,q) = n) = q^n <= α/2`, where `α = 1 - confidence`. Hence
///
/// `n_min = ceil( ln(α/2) / ln(max(q, 1-q)) )`
///
/// (corrected by ±1 after the float computation so that it agrees exactly with
/// [`percentile_ci`]). Examples: median at 95 %: 6 (0.5^6 = 0.0156 <= 0.025 < 0.5^5);
/// p99 at 95 %: 368; p99.99 at 95 %: 36 887.
///
/// Returns `usize::MAX` ("no sample size suffices") if `q` is not in `(0, 1)` or `confidence`
/// is not in `(0, 1)` (including NaN), or if the answer does not fit in `usize`.
pub fn min_samples_for_ci(q: f64, confidence: f64) -> usize {
    if !valid_q_conf(q, confidence) {
        return usize::MAX;
    }
    let alpha_half = (1.0 - confidence) / 2.0;
    let ln_p = ln_worst_tail_base(q);
    if ln_p >= 0.0 || alpha_half <= 0.0 {
        return usize::MAX;
    }
    let est = (alpha_half.ln() / ln_p).ceil();
    if !est.is_finite() || est >= 1e15 {
        // Beyond 2^53 the integer n is not even representable in the float computation;
        // return the float estimate (saturating).
        return if est.is_finite() {
            est as usize
        } else {
            usize::MAX
        };
    }
    let mut n = (est as usize).max(1);
    // Fix float rounding of the estimate; these loops run at most a couple of times.
    while n > 1 && tails_fit(n - 1, ln_p, alpha_half) {
        n -= 1;
    }
    while !tails_fit(n, ln_p, alpha_half) {
        n += 1;
    }
    n
}

/// Ranks `(lower_rank, upper_rank, coverage)` of the distribution-free confidence interval for
/// the q-quantile from `n` samples; see [`percentile_ci`] for the construction.
///
/// The Binomial(n, q) CDF is evaluated exactly (up to float rounding) whenever the binomial
/// variance `n·q·(1-q) <= 1e8` — in practice for every sample that fits in memory at moderate
/// q, e.g. all n <= 4·10^8: the pmf is generated by the ratio recurrence
/// `p(k+1)/p(k) = (n-k)/(k+1) · q/(1-q)` outward from the mode, normalised by its sum, and cut
/// where terms drop below 1e-30 of the mode's. This costs O(√(n·q(1-q))) time and O(1) memory.
///
/// Above that variance, the CDF is the normal approximation with continuity correction and
/// the one-term Edgeworth (skewness) correction,
/// `B(m) ≈ Φ(x) - γ/6·(x²-1)·φ(x)`, `x = (m + 1/2 - nq)/σ`, `σ² = nq(1-q)`, `γ = (1-2q)/σ`
/// (Esseen's expansion for lattice distributions, e.g. Feller vol. 2, §XVI.4), whose absolute
/// error is O(1/σ²) <= ~1e-8 there — far below the probability of a single rank (≈ φ(z)/σ).
/// For `n > 2^53` ranks are only as exact as `f64` integers.
///
/// `None` if `q` or `confidence` is not in `(0, 1)` (including NaN) or `n <
/// min_samples_for_ci(q, confidence)`.
pub fn percentile_ci_ranks(n: usize, q: f64, confidence: f64) -> Option<(usize, usize, f64)> {
    if !valid_q_conf(q, confidence) || n < min_samples_for_ci(q, confidence) {
        return None;
    }
    let alpha_half = (1.0 - confidence) / 2.0;
    if n as f64 * q * (1.0 - q) > EXACT_MAX_VARIANCE {
        approx_ranks(n, q, alpha_half)
    } else {
        exact_ranks(n, q, alpha_half)
    }
}

/// Binomial variance above which [`percentile_ci_ranks`] switches to the Edgeworth-corrected
/// normal approximation (the exact walk costs ~25·σ steps: 2.5·10^5 at this limit).
const EXACT_MAX_VARIANCE: f64 = 1e8;

/// Edgeworth-corrected normal approximation of the Binomial(n, q) CDF at integer `m`.
fn edgeworth_cdf(m: f64, mean: f64, sd: f64, skew: f64) -> f64 {
    let x = (m + 0.5 - mean) / sd;
    (normal_cdf(x) - skew / 6.0 * (x * x - 1.0) * normal_pdf(x)).clamp(0.0, 1.0)
}

/// Ranks from the Edgeworth-corrected normal approximation (large binomial variance only).
fn approx_ranks(n: usize, q: f64, alpha_half: f64) -> Option<(usize, usize, f64)> {
    let nf = n as f64;
    let mean = nf * q;
    let sd = (nf * q * (1.0 - q)).sqrt();
    let skew = (1.0 - 2.0 * q) / sd;
    let cdf = |m: f64| edgeworth_cdf(m, mean, sd, skew);
    let last = nf - 1.0;
    // Cornish–Fisher start: standardized quantile ≈ z + γ/6·(z²-1); then step to the exact
    // boundary of the approximate CDF (a few steps; bounded so that n > 2^53 cannot loop).
    let z = normal_quantile(alpha_half)?; // negative
    let cf = |z: f64| z + skew / 6.0 * (z * z - 1.0);
    // j-1 = largest m with B(m) <= α/2.
    let mut lo = (mean - 0.5 + sd * cf(z)).floor().clamp(0.0, last);
    for _ in 0..64 {
        if lo + 1.0 <= last && cdf(lo + 1.0) <= alpha_half {
            lo += 1.0;
        } else if lo > 0.0 && cdf(lo) > alpha_half {
            lo -= 1.0;
        } else {
            break;
        }
    }
    // k-1 = smallest m with B(m) >= 1 - α/2.
    let mut hi = (mean - 0.5 + sd * cf(-z)).ceil().clamp(0.0, last);
    for _ in 0..64 {
        if hi > 0.0 && cdf(hi - 1.0) >= 1.0 - alpha_half {
            hi -= 1.0;
        } else if hi < last && cdf(hi) < 1.0 - alpha_half {
            hi += 1.0;
        } else {
            break;
        }
    }
    let lower_rank = (lo as usize).saturating_add(1).clamp(1, n);
    let upper_rank = (hi as usize).saturating_add(1).clamp(1, n);
    if lower_rank >= upper_rank {
        return None;
    }
    Some((lower_rank, upper_rank, (cdf(hi) - cdf(lo)).clamp(0.0, 1.0)))
}

/// Ranks from the exact binomial CDF (see [`percentile_ci_ranks`]).
fn exact_ranks(n: usize, q: f64, alpha_half: f64) -> Option<(usize, usize, f64)> {
    let odds_up = q / (1.0 - q); // p(k+1)/p(k) = (n-k)/(k+1) * odds_up
    let odds_down = (1.0 - q) / q; // p(k-1)/p(k) = k/(n-k+1) * odds_down
    let nf = n as f64;
    let mode = (((nf + 1.0) * q).floor() as usize).min(n);

    // Pass 1: total (unnormalised) mass and the lower end of the support we keep.
    let mut total = 1.0;
    let mut term = 1.0;
    let mut k = mode;
    while k > 0 && term >= PMF_CUTOFF {
        term *= k as f64 / (nf - k as f64 + 1.0) * odds_down;
        k -= 1;
        total += term;
    }
    let (lo, term_lo) = (k, term);
    term = 1.0;
    k = mode;
    while k < n && term >= PMF_CUTOFF {
        term *= (nf - k as f64) / (k as f64 + 1.0) * odds_up;
        k += 1;
        total += term;
    }
    let hi = k;

    // Pass 2: walk the CDF B(m) upward from `lo`.
    // j-1 = largest m with B(m) <= α/2; k-1 = smallest m with B(m) >= 1-α/2.
    let mut jm: Option<(usize, f64)> = if lo > 0 { Some((lo - 1, 0.0)) } else { None };
    let mut cdf = 0.0;
    term = term_lo;
    let mut m = lo;
    let (k_minus_1, b_upper) = loop {
        cdf += term / total;
        if cdf <= alpha_half {
            jm = Some((m, cdf));
        }
        // Past `hi` the remaining mass is < 1e-28, so B(hi) is 1 up to rounding.
        if cdf >= 1.0 - alpha_half || m >= hi {
            // n >= 1: the caller checked n >= min_samples_for_ci(..) >= 1.
            break (m.min(n - 1), cdf.min(1.0));
        }
        term *= (nf - m as f64) / (m as f64 + 1.0) * odds_up;
        m += 1;
    };
    // Existence was established exactly by `min_samples_for_ci`; the fallback and clamps below
    // only guard against float rounding at the very ends of the support.
    let (j_minus_1, b_lower) = jm.unwrap_or((0, (nf * (-q).ln_1p()).exp()));
    let lower_rank = (j_minus_1 + 1).clamp(1, n);
    let upper_rank = (k_minus_1 + 1).clamp(1, n);
    if lower_rank >= upper_rank {
        return None;
    }
    let coverage = (b_upper - b_lower).clamp(0.0, 1.0);
    Some((lower_rank, upper_rank, coverage))
}

/// Distribution-free confidence interval for the q-quantile ξ_q from order statistics.
///
/// Source: Le Boudec, *Performance Evaluation of Computer and Communication Systems*, Theorem 2.1
/// (also David & Nagaraja, *Order Statistics*, §7.1). For i.i.d. samples from a continuous
/// distribution, the number `B` of samples `<= ξ_q` is Binomial(n, q), and
///
/// `P(X_(j) <= ξ_q <= X_(k)) = P(j <= B <= k-1) = B(k-1) - B(j-1)`.
///
/// We use the equal-tailed choice with `α = 1 - confidence`:
/// `j = max{ j >= 1 : B(j-1) <= α/2 }` and `k = min{ k <= n : B(k-1) >= 1-α/2 }`, so the
/// coverage is at least `1-α` and each tail misses with probability at most `α/2`.
/// For distributions with atoms (e.g. integer nanoseconds with ties) the closed interval is
/// conservative: each tail probability can only shrink, so coverage is still `>= 1-α`.
/// The binomial CDF is computed exactly up to a binomial variance of 1e8 and by an
/// Edgeworth-corrected normal approximation above (see [`percentile_ci_ranks`]).
///
/// `sorted` must be sorted ascending (not checked; unsorted input gives meaningless values but
/// never panics). `None` if `q` is not in `(0, 1)`, `confidence` is not in `(0, 1)` (NaN
/// included), or `sorted.len() < min_samples_for_ci(q, confidence)` — e.g. p99.99 at 95 % needs
/// at least 36 887 samples.
pub fn percentile_ci(sorted: &[u64], q: f64, confidence: f64) -> Option<PercentileCi> {
    let (lower_rank, upper_rank, coverage) = percentile_ci_ranks(sorted.len(), q, confidence)?;
    // Both ranks are >= 1 (clamped to 1..=n by the rank functions).
    Some(PercentileCi {
        q,
        lower: *sorted.get(lower_rank - 1)?,
        upper: *sorted.get(upper_rank - 1)?,
        lower_rank,
        upper_rank,
        confidence: coverage,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::Rng;

    #[test]
    fn nearest_rank_table() {
        // Hand-computed from the definition rank = ceil(q*n); the first two data sets are the
        // worked examples of the nearest-rank method in Wikipedia's "Percentile" article.
        let a = [15u64, 20, 35, 40, 50];
        let b = [3u64, 6, 7, 8, 8, 10, 13, 15, 16, 20];
        let hundred: Vec<u64> = (1..=100).collect();
        let cases: &[(&[u64], f64, Option<u64>)] = &[
            (&a, 0.05, Some(15)), // ceil(0.25) = 1
            (&a, 0.30, Some(20)), // ceil(1.5) = 2
            (&a, 0.40, Some(20)), // ceil(2.0) = 2
            (&a, 0.50, Some(35)), // ceil(2.5) = 3
            (&a, 1.00, Some(50)), // ceil(5) = 5
            (&b, 0.25, Some(7)),  // ceil(2.5) = 3
            (&b, 0.50, Some(8)),  // ceil(5) = 5
            (&b, 0.75, Some(15)), // ceil(7.5) = 8
            (&b, 1.00, Some(20)),
            (&hundred, 0.07, Some(7)), // 0.07*100 = 7.000000000000001 in f64: must be 7
            (&hundred, 0.29, Some(29)), // 28.999999999999996 in f64
            (&hundred, 0.99, Some(99)),
            (&hundred, 0.991, Some(100)), // ceil(99.1)
            (&hundred, 1e-9, Some(1)),
            (&[42], 0.5, Some(42)),
            (&[], 0.5, None),
            (&a, 0.0, None),
            (&a, -0.1, None),
            (&a, 1.01, None),
            (&a, f64::NAN, None),
            (&a, f64::INFINITY, None),
        ];
        for (i, (data, q, want)) in cases.iter().enumerate() {
            assert_eq!(percentile(data, *q), *want, "case {i}: q={q}");
        }
    }

    #[test]
    fn ci_ranks_table() {
        // Hand-computed from the Binomial(n, 1/2) CDF:
        // n=6:  B(0)=1/64 <= .025, B(5)=63/64 >= .975 -> [1,6], coverage 62/64.
        // n=10: B(1)=11/1024 <= .025 < B(2)=56/1024; B(7)=968/1024 < .975 <= B(8)=1013/1024
        //       -> [2,9], coverage 1002/1024 (the classic table value 97.85 %).
        // n=20: B(5)=21700/2^20=.02069, B(6)=.05766 -> j=6; B(13)=.94234, B(14)=.97931 -> k=15,
        //       coverage 1 - 43400/2^20.
        // n=5 is below min_samples (0.5^5 = .03125 > .025).
        type Case = (usize, f64, f64, Option<(usize, usize, f64)>);
        let cases: &[Case] = &[
            (6, 0.5, 0.95, Some((1, 6, 62.0 / 64.0))),
            (10, 0.5, 0.95, Some((2, 9, 1002.0 / 1024.0))),
            (20, 0.5, 0.95, Some((6, 15, 1.0 - 43400.0 / 1048576.0))),
            (5, 0.5, 0.95, None),
            // q=0.9, n=29: 0.9^29 = 0.04710 > .025; n=35: 0.9^35 = 0.02503 > .025;
            // n=36: 0.9^36 = 0.02253 <= .025 -> exists only from 36 on.
            (35, 0.9, 0.95, None),
            (10, 0.5, 1.0, None),
            (10, 0.5, 0.0, None),
            (10, 1.0, 0.95, None),
            (10, f64::NAN, 0.95, None),
            (10, 0.5, f64::NAN, None),
        ];
        for (i, (n, q, c, want)) in cases.iter().enumerate() {
            let got = percentile_ci_ranks(*n, *q, *c);
            match (got, want) {
                (None, None) => {}
                (Some((l, u, cov)), Some((wl, wu, wc))) => {
                    assert_eq!((l, u), (*wl, *wu), "case {i}");
                    assert!((cov - wc).abs() < 1e-12, "case {i}: coverage {cov} vs {wc}");
                }
                _ => panic!("case {i}: got {got:?}, want {want:?}"),
            }
        }
        let (l, u, _) = percentile_ci_ranks(36, 0.9, 0.95).unwrap();
        assert_eq!(u, 36);
        assert!(l >= 1);
    }

    #[test]
    fn min_samples_table() {
        // n_min = ceil(ln(α/2) / ln(max(q,1-q))):
        // q=.5,  95%: ln(.025)/ln(.5)   = 5.32  -> 6
        // q=.9,  95%: ln(.025)/ln(.9)   = 35.01 -> 36
        // q=.99, 95%: ln(.025)/ln(.99)  = 367.04 -> 368
        // q=.01, 95%: same as .99 by symmetry -> 368
        // q=.99, 99%: ln(.005)/ln(.99)  = 527.17 -> 528
        // q=.9999, 95%: ln(.025) = -3.688879, ln(.9999) = -1.000050e-4 -> 36886.9 -> 36887.
        //   That is, a sample needs ~3.7/(1-q) values before even X_(n) is a valid upper
        //   end: with fewer, the probability that *all* samples lie below ξ_q (q^n) exceeds α/2.
        let cases = [
            (0.5, 0.95, 6),
            (0.9, 0.95, 36),
            (0.99, 0.95, 368),
            (0.01, 0.95, 368),
            (0.99, 0.99, 528),
            (0.9999, 0.95, 36887),
        ];
        for (q, c, want) in cases {
            assert_eq!(min_samples_for_ci(q, c), want, "q={q} c={c}");
            assert!(percentile_ci_ranks(want, q, c).is_some());
            assert!(percentile_ci_ranks(want - 1, q, c).is_none());
        }
        assert_eq!(min_samples_for_ci(1.0, 0.95), usize::MAX);
        assert_eq!(min_samples_for_ci(0.5, f64::NAN), usize::MAX);
        assert_eq!(min_samples_for_ci(1e-300, 0.95), usize::MAX);
    }

    /// Independent oracle: binomial pmf from log-factorials, CDF by direct summation from
    /// k = 0 (fine for small n; log space avoids the underflow of (1-q)^n).
    fn naive_ranks(n: usize, q: f64, conf: f64) -> Option<(usize, usize)> {
        let a2 = (1.0 - conf) / 2.0;
        let mut ln_fact = vec![0.0f64; n + 1];
        for k in 1..=n {
            ln_fact[k] = ln_fact[k - 1] + (k as f64).ln();
        }
        let mut cdf = vec![0.0; n + 1];
        let mut s = 0.0;
        for k in 0..=n {
            let ln_pmf = ln_fact[n] - ln_fact[k] - ln_fact[n - k]
                + k as f64 * q.ln()
                + (n - k) as f64 * (1.0 - q).ln();
            s += ln_pmf.exp();
            cdf[k] = s;
        }
        let j = (1..=n).filter(|&j| cdf[j - 1] <= a2).max()?;
        let k = (1..=n).find(|&k| cdf[k - 1] >= 1.0 - a2)?;
        Some((j, k))
    }

    #[test]
    fn ci_ranks_match_naive_oracle() {
        let mut rng = Rng::new(7);
        for _ in 0..400 {
            let n = 1 + (rng.next_u64() % 300) as usize;
            let q = 0.02 + 0.96 * rng.uniform();
            let conf = [0.8, 0.9, 0.95, 0.99][(rng.next_u64() % 4) as usize];
            let got = percentile_ci_ranks(n, q, conf).map(|(l, u, _)| (l, u));
            assert_eq!(got, naive_ranks(n, q, conf), "n={n} q={q} conf={conf}");
        }
    }

    #[test]
    fn large_n_is_cheap_and_sane() {
        // n = 10^9: the walk is O(sqrt(n)); the interval must bracket the nearest rank.
        let n = 1_000_000_000;
        for q in [0.5, 0.99, 0.9999, 0.999999] {
            let (l, u, cov) = percentile_ci_ranks(n, q, 0.95).unwrap();
            let r = nearest_rank(n, q).unwrap();
            assert!(l < r && r <= u, "q={q}: {l} {r} {u}");
            assert!((0.95..0.9600).contains(&cov), "q={q}: cov={cov}");
            // Normal approximation check: half-width ≈ 1.96 sqrt(n q (1-q)).
            let hw = 1.959964 * (n as f64 * q * (1.0 - q)).sqrt();
            assert!(
                (((u - l) as f64) / 2.0 - hw).abs() < 0.02 * hw + 2.0,
                "q={q}"
            );
        }
    }

    #[test]
    fn approximation_agrees_with_exact() {
        // Where both are cheap, the Edgeworth-corrected normal approximation used above a
        // binomial variance of 1e8 must reproduce the exact ranks (±1) and coverage (±1e-4).
        for (n, q) in [
            (10_000_000usize, 0.5),
            (10_000_000, 0.99),
            (10_000_000, 0.001),
            (100_000, 0.3),
            (1_000_000_000, 0.0001),
        ] {
            for conf in [0.9, 0.95, 0.99] {
                let a2 = (1.0 - conf) / 2.0;
                let (el, eu, ec) = exact_ranks(n, q, a2).unwrap();
                let (al, au, ac) = approx_ranks(n, q, a2).unwrap();
                assert!(el.abs_diff(al) <= 1 && eu.abs_diff(au) <= 1, "n={n} q={q}");
                assert!((ec - ac).abs() < 1e-4, "n={n} q={q}: {ec} vs {ac}");
            }
        }
        // And it handles absurd n without looping.
        let (l, u, c) = percentile_ci_ranks(usize::MAX, 0.5, 0.95).unwrap();
        assert!(l < u && c > 0.9, "{l} {u} {c}");
    }

    #[test]
    fn empirical_coverage() {
        // 2000 trials of n = 1000 i.i.d. uniform values on [0, 2^53); the true q-quantile is
        // q·2^53. The exact coverage is >= 95 %; with 2000 trials the standard error is ~0.5 %,
        // so observing < 93 % would be a > 4-sigma event. Fixed seed -> deterministic.
        let seed = 0x5eed_0001;
        let mut rng = Rng::new(seed);
        let trials = 2000;
        let n = 1000;
        let scale = (1u64 << 53) as f64;
        let mut covered = [0usize; 2];
        let qs = [0.5, 0.99];
        let mut buf = vec![0u64; n];
        for _ in 0..trials {
            for x in buf.iter_mut() {
                *x = rng.next_u64() >> 11;
            }
            buf.sort_unstable();
            for (i, &q) in qs.iter().enumerate() {
                let ci = percentile_ci(&buf, q, 0.95).expect("n=1000 suffices");
                let xi = q * scale;
                if (ci.lower as f64) <= xi && xi <= ci.upper as f64 {
                    covered[i] += 1;
                }
            }
        }
        for (i, &q) in qs.iter().enumerate() {
            let frac = covered[i] as f64 / trials as f64;
            eprintln!("q={q}: empirical coverage {frac} over {trials} trials");
            assert!(frac >= 0.93, "seed {seed:#x}: q={q} coverage {frac}");
            assert!(
                frac <= 0.99,
                "seed {seed:#x}: q={q} suspiciously wide: {frac}"
            );
        }
    }

    #[test]
    fn degenerate_inputs_give_none() {
        // (sorted samples, q, estimate, an interval at 95 % exists)
        let six = [1u64, 2, 3, 4, 5, 6];
        let cases: &[(&[u64], f64, Option<u64>, bool)] = &[
            (&[], 0.5, None, false),
            (&[], 0.999, None, false),
            (&[7], 0.5, Some(7), false),
            (&[7], 0.999, Some(7), false),
            (&[7, 7], 0.5, Some(7), false),
            (&six[..5], 0.5, Some(3), false), // 5 < min_samples_for_ci(0.5, 0.95) = 6
            (&six, 0.5, Some(3), true),
            (&six, 0.99, Some(6), false),
        ];
        for (i, &(data, q, est, has_ci)) in cases.iter().enumerate() {
            assert_eq!(percentile(data, q), est, "case {i}");
            let ci = percentile_ci(data, q, 0.95);
            assert_eq!(ci.is_some(), has_ci, "case {i}: {ci:?}");
            if let Some(c) = ci {
                assert!(c.lower <= c.upper && c.lower_rank >= 1 && c.upper_rank <= data.len());
            }
        }
        for n in 0..6 {
            assert_eq!(percentile_ci_ranks(n, 0.5, 0.95), None, "n={n}");
        }
    }
}
