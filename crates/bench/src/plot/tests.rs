//! Tests of the figures: number formats, percentiles, ticks and CDF reduction.

use super::axis::LogAxis;
use super::cdf::{cdf_indices, CDF_POINTS};
use super::figure::percentile;
use super::style::{axis_ns, fmt_count};

#[test]
fn formats_durations() {
    let cases = [
        (0.0, "0 ns"),
        (850.0, "850 ns"),
        (1000.0, "1 µs"),
        (4133.0, "4.133 µs"),
        (12_500.0, "12.5 µs"),
        (2_000_000.0, "2 ms"),
        (48_000_000_000.0, "48 s"),
        (1.8e19, "1.80e10 s"),
    ];
    for (ns, want) in cases {
        assert_eq!(axis_ns(ns), want, "{ns}");
    }
    let counts = [
        (0, "0"),
        (999, "999"),
        (1000, "1,000"),
        (1_000_000, "1,000,000"),
    ];
    for (n, want) in counts {
        assert_eq!(fmt_count(n), want);
    }
}

#[test]
fn nearest_rank() {
    let v: Vec<u64> = (1..=100).collect();
    assert_eq!(percentile(&v, 1, 2), Some(50));
    assert_eq!(percentile(&v, 99, 100), Some(99));
    assert_eq!(percentile(&v, 999, 1000), Some(100));
    assert_eq!(percentile(&[], 1, 2), None);
    assert_eq!(percentile(&[7], 1, 2), Some(7));
}

#[test]
fn ticks_are_readable() {
    // (lo, hi, min ticks)
    let cases = [
        (4000.0, 4300.0, 3),
        (900.0, 60_000_000.0, 4),
        (1.0, 1e12, 4),
        (3000.0, 9000.0, 3),
        (0.5, 2.0, 2),
    ];
    for (lo, hi, min) in cases {
        let axis = LogAxis::covering(lo, hi);
        let t = axis.ticks(10, 0.07);
        assert!(t.len() >= min && t.len() <= 10, "{lo}..{hi}: {t:?}");
        assert!(t.windows(2).all(|w| w[0] < w[1]), "{t:?}");
    }
}

#[test]
fn cdf_indices_keep_ends_and_tail() {
    let idx = cdf_indices(1_000_000);
    assert_eq!(idx.first(), Some(&0));
    assert_eq!(idx.last(), Some(&999_999));
    assert!(idx.contains(&(999_990 - 1)));
    assert!(idx.len() < 2 * CDF_POINTS);
    assert_eq!(cdf_indices(3), vec![0, 1, 2]);
    assert!(cdf_indices(0).is_empty());
}
