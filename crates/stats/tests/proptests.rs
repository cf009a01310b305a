//! Property tests against the public API: arbitrary input (NaN, ±∞, subnormals, huge values)
//! never panics, and outputs stay within their documented ranges.

use proptest::prelude::*;
use xlane_stats::*;

fn any_f64() -> impl Strategy<Value = f64> {
    prop_oneof![
        prop::num::f64::ANY,
        -1e3..1e3f64,
        0.0..1.0f64,
        Just(f64::NAN),
        Just(f64::INFINITY),
        Just(f64::NEG_INFINITY),
        Just(0.0),
        Just(1.0),
    ]
}

fn prob() -> impl Strategy<Value = f64> {
    prop_oneof![0.0..=1.0f64, any_f64()]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn nothing_panics(
        xs in prop::collection::vec(any_f64(), 0..64),
        ys in prop::collection::vec(any_f64(), 0..64),
        us in prop::collection::vec(any::<u64>(), 0..64),
        q in prob(),
        conf in prob(),
        a in any_f64(),
        b in any_f64(),
        t in any_f64(),
        n in any::<u64>(),
        c in 0usize..40,
        lag in 0usize..70,
    ) {
        let mut us = us;
        us.sort_unstable();
        let _ = percentile(&us, q);
        let _ = percentile_ci(&us, q, conf);
        let _ = min_samples_for_ci(q, conf);
        let _ = percentile_ci_ranks(n as usize, q, conf);
        let _ = violation_bound(a, b, t, n);
        let _ = cantelli_bound(a, b, t, n);
        let _ = mean_variance(&us);
        let _ = mean_variance_f64(&xs);
        let _ = anderson_darling_exponential(&xs);
        let abs: Vec<f64> = xs.iter().map(|x| x.abs()).collect();
        let _ = anderson_darling_exponential(&abs);
        let _ = spearman(&xs, &ys);
        let _ = spearman(&xs, &xs);
        let _ = independence_lag(&xs, lag);
        let _ = kpss(&xs);
        let _ = kpss_with_lags(&xs, lag);
        let _ = mmc::erlang_c(c, a);
        let _ = mmc::mean_sojourn(a, b, c);
        let _ = mmc::sojourn_cdf(a, b, c, t);
        let _ = mmc::sojourn_quantile(a, b, c, q);
    }

    #[test]
    fn percentile_is_an_element_and_monotone(
        us in prop::collection::vec(any::<u64>(), 1..200),
        q1 in 1e-9..=1.0f64,
        q2 in 1e-9..=1.0f64,
    ) {
        let mut us = us;
        us.sort_unstable();
        let (lo, hi) = if q1 <= q2 { (q1, q2) } else { (q2, q1) };
        let a = percentile(&us, lo).unwrap();
        let b = percentile(&us, hi).unwrap();
        prop_assert!(a <= b);
        prop_assert!(us.contains(&a));
        // Nearest rank: at least a fraction q of the data is <= the result.
        let below = us.iter().filter(|&&x| x <= a).count();
        prop_assert!(below as f64 >= lo * us.len() as f64 * (1.0 - 1e-12));
        prop_assert_eq!(percentile(&us, 1.0), us.last().copied());
    }

    #[test]
    fn ci_exists_iff_enough_samples(
        n in 1usize..3000,
        q in 0.001..0.999f64,
        conf in 0.5..0.999f64,
    ) {
        let need = min_samples_for_ci(q, conf);
        let r = percentile_ci_ranks(n, q, conf);
        prop_assert_eq!(r.is_some(), n >= need, "n={} need={}", n, need);
        if let Some((l, u, cov)) = r {
            prop_assert!(1 <= l && l < u && u <= n);
            prop_assert!(cov >= conf - 1e-9 && cov <= 1.0, "cov={}", cov);
        }
    }

    #[test]
    fn ci_brackets_and_orders(
        us in prop::collection::vec(any::<u64>(), 6..400),
        q in 0.05..0.95f64,
    ) {
        let mut us = us;
        us.sort_unstable();
        if let Some(ci) = percentile_ci(&us, q, 0.9) {
            prop_assert!(ci.lower <= ci.upper);
            prop_assert_eq!(ci.lower, us[ci.lower_rank - 1]);
            prop_assert_eq!(ci.upper, us[ci.upper_rank - 1]);
            let p = percentile(&us, q).unwrap();
            prop_assert!(ci.lower <= p && p <= ci.upper);
        }
    }

    #[test]
    fn bounds_in_unit_interval_and_monotone(
        mean in any_f64(), var in any_f64(), lambda in any_f64(), n in 0u64..1_000_000,
    ) {
        let b = violation_bound(mean, var, lambda, n);
        let b2 = violation_bound(mean, var, lambda, n + 1);
        let c = cantelli_bound(mean, var, lambda, n);
        for v in [b.p1, b.pn, c.p1, c.pn] {
            prop_assert!((0.0..=1.0).contains(&v), "{:?} {:?}", b, c);
        }
        prop_assert!(b2.pn >= b.pn);
        prop_assert!(c.p1 <= b.p1);
    }

    #[test]
    fn spearman_range_and_symmetry(
        pairs in prop::collection::vec((-1e6..1e6f64, -1e6..1e6f64), 2..100),
    ) {
        let (x, y): (Vec<f64>, Vec<f64>) = pairs.into_iter().unzip();
        let r = spearman(&x, &y);
        prop_assert_eq!(r, spearman(&y, &x));
        if let Some(r) = r {
            prop_assert!((-1.0..=1.0).contains(&r));
            // Invariant under strictly increasing transforms, flips sign under decreasing.
            let x3: Vec<f64> = x.iter().map(|v| v * 2.0 + 7.0).collect();
            let xn: Vec<f64> = x.iter().map(|v| -v).collect();
            prop_assert!((spearman(&x3, &y).unwrap() - r).abs() < 1e-12);
            prop_assert!((spearman(&xn, &y).unwrap() + r).abs() < 1e-12);
        }
    }

    #[test]
    fn erlang_c_in_unit_interval_and_decreasing_in_c(c in 1usize..200, frac in 0.0..0.999f64) {
        let a = frac * c as f64;
        let e = mmc::erlang_c(c, a);
        prop_assert!((0.0..=1.0).contains(&e));
        // One more server with the same load never makes waiting more likely.
        prop_assert!(mmc::erlang_c(c + 1, a) <= e + 1e-12);
    }

    #[test]
    fn sojourn_quantile_inverts_cdf(
        c in 1usize..20, rho in 0.01..0.98f64, mu in 0.01..100.0f64, q in 0.001..0.9999f64,
    ) {
        let lambda = rho * c as f64 * mu;
        let t = mmc::sojourn_quantile(lambda, mu, c, q).unwrap();
        prop_assert!(t > 0.0 && t.is_finite());
        let back = mmc::sojourn_cdf(lambda, mu, c, t).unwrap();
        prop_assert!((back - q).abs() < 1e-9, "q={} back={}", q, back);
        // Sojourn is at least the service time: P(T <= t) <= P(S <= t).
        prop_assert!(back <= 1.0 - (-mu * t).exp() + 1e-12);
    }
}
