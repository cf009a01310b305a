//! Spearman rank correlation and the Lancet-style independence (lag) check.

use serde::{Deserialize, Serialize};

/// Two-sided 5 % standard-normal quantile used by [`independence_lag`]: `Φ^{-1}(0.975) ≈ 1.96`.
pub const INDEPENDENCE_Z: f64 = 1.96;

/// Ranks with ties replaced by their average rank (1-based), e.g. `[10, 20, 20, 30]` ->
/// `[1, 2.5, 2.5, 4]`. Input must be free of NaN.
fn average_ranks(x: &[f64]) -> Vec<f64> {
    let n = x.len();
    let mut idx: Vec<usize> = (0..n).collect();
    idx.sort_by(|&a, &b| x[a].total_cmp(&x[b]));
    let mut ranks = vec![0.0; n];
    let mut i = 0;
    while i < n {
        let mut j = i + 1;
        // `==` (not total_cmp) so that -0.0 and 0.0 tie.
        while j < n && x[idx[j]] == x[idx[i]] {
            j += 1;
        }
        // positions i..j (0-based) hold ranks i+1..=j; their average is (i+1+j)/2.
        let avg = (i + 1 + j) as f64 / 2.0;
        for &k in &idx[i..j] {
            ranks[k] = avg;
        }
        i = j;
    }
    ranks
}

/// Spearman's rank correlation coefficient ρ_s with average ranks for ties.
///
/// Definition (C. Spearman 1904; e.g. Lehmann, *Nonparametrics: Statistical Methods Based on
/// Ranks*, §7.3): ρ_s is the Pearson correlation of the rank vectors,
/// `ρ_s = Σ (R_i - R̄)(S_i - S̄) / sqrt( Σ (R_i - R̄)² · Σ (S_i - S̄)² )`, with tied values given
/// the mean of the ranks they span. Without ties this equals `1 - 6 Σ d_i² / (n(n²-1))`.
///
/// `None` if the lengths differ, `n < 2`, any value is NaN or infinite, or either variable is
/// constant (all ranks tied, ρ undefined). The result is clamped to `[-1, 1]`.
pub fn spearman(x: &[f64], y: &[f64]) -> Option<f64> {
    let n = x.len();
    if n != y.len() || n < 2 || x.iter().chain(y).any(|v| !v.is_finite()) {
        return None;
    }
    let rx = average_ranks(x);
    let ry = average_ranks(y);
    let mean = (n as f64 + 1.0) / 2.0; // average ranks always sum to n(n+1)/2
    let (mut sxy, mut sxx, mut syy) = (0.0, 0.0, 0.0);
    for (a, b) in rx.iter().zip(&ry) {
        let (da, db) = (a - mean, b - mean);
        sxy += da * db;
        sxx += da * da;
        syy += db * db;
    }
    if sxx <= 0.0 || syy <= 0.0 {
        return None;
    }
    Some((sxy / (sxx * syy).sqrt()).clamp(-1.0, 1.0))
}

/// Result of [`independence_lag`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IndependenceCheck {
    /// Smallest lag whose |ρ| is below its 5 % threshold, or `None` if no lag tried qualified.
    pub lag: Option<usize>,
    /// `(lag, ρ)` for every lag tried, in increasing lag order, up to and including the selected
    /// lag. Lags where ρ is undefined (see [`spearman`]) are omitted.
    pub rho_at_lag: Vec<(usize, f64)>,
    /// The threshold `1.96/sqrt(m-1)` (m = number of pairs) at the selected lag; if no lag
    /// qualified, at the last lag tried; NaN if no lag could be tried at all.
    pub threshold: f64,
}

/// Independence check as in Lancet (Kogias et al., "Lancet: A self-correcting Latency Measuring
/// Tool", USENIX ATC 2019): compute Spearman's ρ of the pairs `(x_i, x_{i+lag})`,
/// `i = 0..n-lag`, for `lag = 1, 2, …, max_lag`, and return the smallest lag at which the
/// correlation is not significant at the 5 % level, i.e. `|ρ| < 1.96 / sqrt(m - 1)` with
/// `m = n - lag` pairs. Sampling every `lag`-th value then gives approximately independent
/// samples.
///
/// The threshold uses the large-sample null distribution `ρ_s · sqrt(m-1) → N(0, 1)` under
/// independence (Kendall & Stuart, *The Advanced Theory of Statistics*, vol. 2, §31.19;
/// Lehmann, *Nonparametrics*, §7.3). It is an approximation, accurate for m >= ~30; lags with
/// fewer than 3 pairs are not tried.
///
/// Never fails: non-finite samples, `max_lag == 0`, too few samples, or a constant series give
/// `lag: None` with the lags that could be evaluated (possibly none).
pub fn independence_lag(samples: &[f64], max_lag: usize) -> IndependenceCheck {
    let mut out = IndependenceCheck {
        lag: None,
        rho_at_lag: Vec::new(),
        threshold: f64::NAN,
    };
    if samples.iter().any(|v| !v.is_finite()) {
        return out;
    }
    let n = samples.len();
    for lag in 1..=max_lag {
        let Some(m) = n.checked_sub(lag) else { break };
        if m < 3 {
            break;
        }
        let Some(rho) = spearman(&samples[..m], &samples[lag..]) else {
            continue;
        };
        let thr = INDEPENDENCE_Z / ((m - 1) as f64).sqrt();
        out.rho_at_lag.push((lag, rho));
        out.threshold = thr;
        if rho.abs() < thr {
            out.lag = Some(lag);
            break;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::Rng;

    #[test]
    fn ranks_with_ties() {
        assert_eq!(
            average_ranks(&[10.0, 20.0, 20.0, 30.0]),
            [1.0, 2.5, 2.5, 4.0]
        );
        assert_eq!(average_ranks(&[3.0, 1.0, 2.0]), [3.0, 1.0, 2.0]);
        assert_eq!(average_ranks(&[5.0, 5.0, 5.0]), [2.0, 2.0, 2.0]);
        assert_eq!(average_ranks(&[0.0, -0.0]), [1.5, 1.5]);
    }

    #[test]
    fn spearman_table() {
        // (1) monotone -> 1; reversed -> -1 (any strictly monotone transform).
        // (2) Textbook example (IQ vs. hours of TV per week, 10 people; Wikipedia "Spearman's
        //     rank correlation coefficient"): Σd² = 194, ρ = 1 - 6·194/(10·99) = -29/165.
        // (3) Ties, by hand: x=[1,2,2,3] -> R=[1,2.5,2.5,4], y=[1,3,2,4] -> S=[1,3,2,4];
        //     centred: [-1.5,0,0,1.5]·[-1.5,.5,-.5,1.5] = 4.5, ΣR'²=4.5, ΣS'²=5,
        //     ρ = 4.5/sqrt(22.5) = sqrt(0.9).
        // (4) n=3 by the d² formula: x=[1,2,3], y=[1,3,2]: Σd² = 0+1+1 = 2, ρ = 1 - 12/24 = .5.
        let iq = [106., 100., 86., 101., 99., 103., 97., 113., 112., 110.];
        let tv = [7., 27., 2., 50., 28., 29., 20., 12., 6., 17.];
        let inc: Vec<f64> = (0..50).map(|i| (i as f64).powi(3)).collect();
        let dec: Vec<f64> = (0..50).map(|i| -(i as f64).exp()).collect();
        let cases: &[(&[f64], &[f64], Option<f64>)] = &[
            (&inc, &inc, Some(1.0)),
            (&inc, &dec, Some(-1.0)),
            (&iq, &tv, Some(-29.0 / 165.0)),
            (&[1., 2., 2., 3.], &[1., 3., 2., 4.], Some(0.9f64.sqrt())),
            (&[1., 2., 3.], &[1., 3., 2.], Some(0.5)),
            (&[1., 2.], &[2., 1.], Some(-1.0)),
            (&[1.], &[1.], None),
            (&[1., 2.], &[1.], None),
            (&[1., 1., 1.], &[1., 2., 3.], None),
            (&[1., f64::NAN, 3.], &[1., 2., 3.], None),
            (&[1., 2., 3.], &[1., 2., f64::INFINITY], None),
        ];
        for (i, (x, y, want)) in cases.iter().enumerate() {
            let got = spearman(x, y);
            match (got, want) {
                (None, None) => {}
                (Some(g), Some(w)) => assert!((g - w).abs() < 1e-12, "case {i}: {g} vs {w}"),
                _ => panic!("case {i}: got {got:?}, want {want:?}"),
            }
        }
    }

    fn ar1(rng: &mut Rng, phi: f64, n: usize) -> Vec<f64> {
        let mut x = 0.0;
        (0..n)
            .map(|_| {
                x = phi * x + rng.normal();
                x
            })
            .collect()
    }

    #[test]
    fn ar1_needs_larger_lag() {
        // AR(1) with φ = 0.9: lag-L autocorrelation ≈ 0.9^L (Spearman's is close to Pearson's
        // for Gaussian data: ρ_s = (6/π) asin(ρ/2)). The threshold for n = 2000 is ≈ 0.044, so
        // 0.9^L < 0.044 needs L ≈ 30; sampling noise (s.e. ≈ 0.02 · inflation) moves it around.
        let seed = 0x1D_0001;
        let mut rng = Rng::new(seed);
        let xs = ar1(&mut rng, 0.9, 2000);
        let r = independence_lag(&xs, 200);
        let lag = r.lag.expect("some lag below 200 must qualify");
        eprintln!("AR(1) phi=.9 n=2000: lag {lag}, rho1 {:?}", r.rho_at_lag[0]);
        assert!((10..=120).contains(&lag), "seed {seed:#x}: lag {lag}");
        assert_eq!(r.rho_at_lag.len(), lag);
        assert!(r.rho_at_lag[0].1 > 0.85, "{:?}", r.rho_at_lag[0]);
        // max_lag too small: no lag found, all tried lags reported.
        let r = independence_lag(&xs, 3);
        assert_eq!(r.lag, None);
        assert_eq!(r.rho_at_lag.len(), 3);
    }

    #[test]
    fn iid_needs_lag_one() {
        // Fixed seed: lag 1 qualifies. Across seeds the lag-1 test has ≈ 5 % false positives.
        let seed = 0x1D_0002;
        let mut rng = Rng::new(seed);
        let xs: Vec<f64> = (0..2000).map(|_| rng.exp(1.0)).collect();
        let r = independence_lag(&xs, 50);
        assert_eq!(r.lag, Some(1), "seed {seed:#x}: {r:?}");
        assert!((r.threshold - 1.96 / 1998f64.sqrt()).abs() < 1e-12);
        let trials = 400;
        let lag1 = (0..trials)
            .filter(|_| {
                let xs: Vec<f64> = (0..500).map(|_| rng.uniform()).collect();
                independence_lag(&xs, 10).lag == Some(1)
            })
            .count();
        let frac = lag1 as f64 / trials as f64;
        eprintln!("iid: lag 1 accepted in {frac}");
        assert!((0.90..=0.99).contains(&frac), "seed {seed:#x}: {frac}");
    }

    #[test]
    fn degenerate_inputs() {
        let r = independence_lag(&[1.0, 2.0, f64::NAN, 4.0, 5.0], 2);
        assert_eq!((r.lag, r.rho_at_lag.len()), (None, 0));
        assert!(r.threshold.is_nan());
        let r = independence_lag(&[1.0; 100], 5);
        assert_eq!((r.lag, r.rho_at_lag.len()), (None, 0));
        let r = independence_lag(&[1.0, 2.0, 3.0], 5);
        assert_eq!((r.lag, r.rho_at_lag.len()), (None, 0));
        let r = independence_lag(&[1.0, 2.0, 3.0, 4.0, 5.0], 0);
        assert_eq!((r.lag, r.rho_at_lag.len()), (None, 0));
    }

    #[test]
    fn tiny_series() {
        let x = [1.0, 2.0];
        for n in 0..=2 {
            // Two pairs are the fewest with a correlation.
            let want = (n == 2).then_some(1.0);
            assert_eq!(spearman(&x[..n], &x[..n]), want, "n={n}");
            let r = independence_lag(&x[..n], 5);
            assert_eq!((r.lag, r.rho_at_lag.len()), (None, 0), "n={n}");
            assert!(r.threshold.is_nan(), "n={n}");
        }
        // max_lag beyond the series: stops at the first lag with fewer than 3 pairs.
        let r = independence_lag(&[1.0, 2.0, 3.0], usize::MAX);
        assert_eq!((r.lag, r.rho_at_lag.len()), (None, 0));
        // 3 pairs: the threshold 1.96/√2 exceeds any ρ, so lag 1 passes
        // (which is why lancet's analysis asks for 30 samples first).
        let r = independence_lag(&[1.0, 2.0, 3.0, 4.0], usize::MAX);
        assert_eq!((r.lag, r.rho_at_lag), (Some(1), vec![(1, 1.0)]));
    }
}
