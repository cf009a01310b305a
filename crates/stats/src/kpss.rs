//! KPSS test of level stationarity.

use serde::{Deserialize, Serialize};

/// KPSS η_μ 10 % critical value (Kwiatkowski et al. 1992, Table 1, level stationarity).
pub const KPSS_CRITICAL_10PCT: f64 = 0.347;
/// KPSS η_μ 5 % critical value (Kwiatkowski et al. 1992, Table 1).
pub const KPSS_CRITICAL_5PCT: f64 = 0.463;
/// KPSS η_μ 1 % critical value (Kwiatkowski et al. 1992, Table 1).
pub const KPSS_CRITICAL_1PCT: f64 = 0.739;

/// Result of [`kpss`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Kpss {
    /// The statistic η_μ = Σ S_t² / (n² σ̂²).
    pub statistic: f64,
    /// Bartlett-kernel truncation lag ℓ used for σ̂².
    pub lags: usize,
    /// 5 % critical value, 0.463.
    pub critical_5pct: f64,
    /// `statistic < critical_5pct`: level stationarity not rejected at 5 %.
    pub stationary: bool,
}

/// Schwert's rule for the truncation lag, `ℓ = floor(4 · (n/100)^{1/4})` (G. W. Schwert,
/// *J. Business & Economic Statistics* 7(2), 1989; the "ℓ4" choice of Kwiatkowski et al.
/// 1992). E.g. n = 100 -> 4, n = 500 -> 5, n = 1000 -> 7.
pub fn schwert_lags(n: usize) -> usize {
    (4.0 * (n as f64 / 100.0).powf(0.25)).floor() as usize
}

/// KPSS level-stationarity test (Kwiatkowski, Phillips, Schmidt & Shin, "Testing the null
/// hypothesis of stationarity against the alternative of a unit root", *J. Econometrics*
/// 54:159–178, 1992, eqs. (13)–(14)), with ℓ = [`schwert_lags`]`(n)`.
///
/// With residuals from the mean `e_t = x_t - x̄`, partial sums `S_t = Σ_{i<=t} e_i`, and the
/// Newey–West long-run variance with Bartlett weights `w(s, ℓ) = 1 - s/(ℓ+1)`:
///
/// `σ̂²(ℓ) = (1/n) Σ_t e_t² + (2/n) Σ_{s=1..ℓ} w(s,ℓ) Σ_{t=s+1..n} e_t e_{t-s}`,
///
/// the statistic is `η_μ = Σ_t S_t² / (n² σ̂²(ℓ))`. The null (level stationarity) is rejected at
/// 5 % when `η_μ >= 0.463`. The critical values are asymptotic; use n >= ~50.
///
/// `None` if `n < 4`, any sample is non-finite, the series is constant (σ̂² = 0), or the
/// computation overflows.
pub fn kpss(samples: &[f64]) -> Option<Kpss> {
    if samples.len() < 4 {
        return None;
    }
    kpss_with_lags(samples, schwert_lags(samples.len()))
}

/// [`kpss`] with an explicit truncation lag `lags` (0 = no autocorrelation correction).
///
/// `None` if `n < 2`, `lags >= n`, any sample is non-finite, σ̂² is not positive (constant
/// series), or the computation overflows.
pub fn kpss_with_lags(samples: &[f64], lags: usize) -> Option<Kpss> {
    let n = samples.len();
    if n < 2 || lags >= n || samples.iter().any(|v| !v.is_finite()) {
        return None;
    }
    let nf = n as f64;
    let mut mean = 0.0f64;
    for (i, &x) in samples.iter().enumerate() {
        mean += (x - mean) / (i + 1) as f64;
    }
    let e: Vec<f64> = samples.iter().map(|&x| x - mean).collect();
    let mut s = 0.0f64;
    let mut sum_s2 = 0.0f64;
    for &et in &e {
        s += et;
        sum_s2 += s * s;
    }
    let mut lrv = e.iter().map(|v| v * v).sum::<f64>() / nf;
    // lag <= lags < n (checked above), so `n - lag` >= 1.
    for lag in 1..=lags {
        let w = 1.0 - lag as f64 / (lags as f64 + 1.0);
        let gamma: f64 = e[lag..].iter().zip(&e[..n - lag]).map(|(a, b)| a * b).sum();
        lrv += 2.0 * w * gamma / nf;
    }
    if !(lrv > 0.0 && lrv.is_finite()) {
        return None;
    }
    let statistic = sum_s2 / (nf * nf) / lrv;
    if !statistic.is_finite() {
        return None;
    }
    Some(Kpss {
        statistic,
        lags,
        critical_5pct: KPSS_CRITICAL_5PCT,
        stationary: statistic < KPSS_CRITICAL_5PCT,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::Rng;

    #[test]
    fn schwert_table() {
        // floor(4 (n/100)^0.25): n=4: 4·0.4472=1.79 -> 1; 100 -> 4; 500: 4·1.4953=5.98 -> 5;
        // 1000: 4·1.7783=7.11 -> 7; 10000: 4·3.1623=12.65 -> 12.
        for (n, l) in [(4, 1), (100, 4), (500, 5), (1000, 7), (10000, 12)] {
            assert_eq!(schwert_lags(n), l, "n={n}");
        }
    }

    #[test]
    fn hand_computed() {
        // x = [1,2,3,4]: x̄ = 2.5, e = [-1.5,-.5,.5,1.5], S = [-1.5,-2,-1.5,0], ΣS² = 8.5.
        // γ0 = 5/4, γ1 = (.75 - .25 + .75)/4 = .3125.
        // ℓ=0: σ̂² = 1.25, η = 8.5/(16·1.25) = 0.425.
        // ℓ=1 (Schwert for n=4): w = 1/2, σ̂² = 1.25 + 2·.5·.3125 = 1.5625, η = 8.5/25 = 0.34.
        let x = [1.0, 2.0, 3.0, 4.0];
        let cases = [(Some(0), 0.425), (Some(1), 0.34), (None, 0.34)];
        for (lags, want) in cases {
            let r = match lags {
                Some(l) => kpss_with_lags(&x, l),
                None => kpss(&x),
            }
            .unwrap();
            assert!((r.statistic - want).abs() < 1e-12, "{lags:?}: {r:?}");
            assert!(r.stationary);
        }
    }

    #[test]
    fn none_cases() {
        assert_eq!(kpss(&[1.0, 2.0, 3.0]), None);
        assert_eq!(kpss(&[5.0; 100]), None);
        assert_eq!(kpss(&[1.0, 2.0, f64::NAN, 4.0, 5.0]), None);
        assert_eq!(kpss_with_lags(&[1.0, 2.0, 3.0], 3), None);
        assert_eq!(kpss_with_lags(&[1.0], 0), None);
        assert_eq!(kpss(&[f64::MAX, -f64::MAX, f64::MAX, -f64::MAX]), None);
    }

    #[test]
    fn iid_noise_is_stationary() {
        let seed = 0x4B_0001;
        let mut rng = Rng::new(seed);
        let xs: Vec<f64> = (0..500).map(|_| 100.0 + rng.normal()).collect();
        let r = kpss(&xs).unwrap();
        assert!(r.stationary, "seed {seed:#x}: {r:?}");
        assert_eq!(r.lags, 5);
        // Size across seeds ≈ 5 % (300 trials; wide deterministic band).
        let rejected = (0..300)
            .filter(|_| {
                let xs: Vec<f64> = (0..500).map(|_| rng.exp(1.0)).collect();
                !kpss(&xs).unwrap().stationary
            })
            .count();
        eprintln!("KPSS iid rejected {rejected}/300");
        assert!(rejected <= 30, "seed {seed:#x}: {rejected}/300 rejected");
    }

    #[test]
    fn random_walk_and_trend_are_not() {
        let seed = 0x4B_0002;
        let mut rng = Rng::new(seed);
        let mut rejected = 0;
        for _ in 0..100 {
            let mut x = 0.0;
            let walk: Vec<f64> = (0..500)
                .map(|_| {
                    x += rng.normal();
                    x
                })
                .collect();
            if !kpss(&walk).unwrap().stationary {
                rejected += 1;
            }
        }
        eprintln!("KPSS random walk rejected {rejected}/100");
        assert!(
            rejected >= 90,
            "seed {seed:#x}: only {rejected}/100 walks rejected"
        );
        let trend: Vec<f64> = (0..500).map(|t| 0.01 * t as f64 + rng.normal()).collect();
        let r = kpss(&trend).unwrap();
        assert!(!r.stationary && r.statistic > KPSS_CRITICAL_1PCT, "{r:?}");
        // A level shift half-way (e.g. a route change) is also non-stationary.
        let shift: Vec<f64> = (0..500)
            .map(|t| if t < 250 { 0.0 } else { 2.0 } + rng.normal())
            .collect();
        assert!(!kpss(&shift).unwrap().stationary);
    }

    #[test]
    fn tiny_series() {
        let x = [1.0, 2.0];
        for n in 0..=2 {
            assert_eq!(kpss(&x[..n]), None, "n={n}");
            assert_eq!(kpss_with_lags(&x[..n], n), None, "n={n}: lags >= n");
        }
        assert_eq!(kpss_with_lags(&[], 0), None);
        assert_eq!(schwert_lags(0), 0);
    }
}
