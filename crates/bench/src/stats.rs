//! Latency summaries from raw samples.

use serde::Serialize;

pub use xlane_stats::percentile;

/// The summary of one configuration's latency samples (all in ns).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct LatencySummary {
    /// Configuration name.
    pub name: String,
    /// Samples received.
    pub samples: u64,
    /// Samples expected but not received.
    pub lost: u64,
    /// λmin.
    pub min_ns: u64,
    /// λ50.
    pub p50_ns: u64,
    /// λ99.
    pub p99_ns: u64,
    /// λ99.9.
    pub p999_ns: u64,
    /// λ99.99.
    pub p9999_ns: u64,
    /// λmax.
    pub max_ns: u64,
    /// Mean.
    pub avg_ns: u64,
    /// δmax = λmax − λmin.
    pub delta_max_ns: u64,
}

impl LatencySummary {
    /// Summarise `samples` (sorted in place). `lost` is carried through.
    pub fn from_samples(name: &str, samples: &mut [u64], lost: u64) -> Self {
        samples.sort_unstable();
        let p = |q| percentile(samples, q).unwrap_or(0);
        let n = samples.len() as u64;
        let sum: u128 = samples.iter().map(|&s| s as u128).sum();
        let min = samples.first().copied().unwrap_or(0);
        let max = samples.last().copied().unwrap_or(0);
        LatencySummary {
            name: name.to_string(),
            samples: n,
            lost,
            min_ns: min,
            p50_ns: p(0.5),
            p99_ns: p(0.99),
            p999_ns: p(0.999),
            p9999_ns: p(0.9999),
            max_ns: max,
            avg_ns: if n == 0 { 0 } else { (sum / n as u128) as u64 },
            // Sorted above: the last is at least the first.
            delta_max_ns: max - min,
        }
    }
}

/// `a − b` as a signed count (of ns), whichever of the two is larger,
/// saturating at `i64`'s ends (585 years of ns: never reached by two
/// instants of one run).
pub fn signed_diff(a: u64, b: u64) -> i64 {
    if a >= b {
        i64::try_from(a - b).unwrap_or(i64::MAX)
    } else {
        i64::try_from(b - a).map_or(i64::MIN, |d| -d)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signed_differences_never_wrap() {
        for (a, b, want) in [
            (5u64, 3u64, 2i64),
            (3, 5, -2),
            (7, 7, 0),
            (0, u64::MAX, i64::MIN),
            (u64::MAX, 0, i64::MAX),
        ] {
            assert_eq!(signed_diff(a, b), want, "{a} − {b}");
        }
    }

    #[test]
    fn summary_of_known_samples() {
        let mut v: Vec<u64> = (1..=10_000).rev().collect();
        let s = LatencySummary::from_samples("x", &mut v, 3);
        assert_eq!(s.samples, 10_000);
        assert_eq!(s.lost, 3);
        assert_eq!((s.min_ns, s.max_ns), (1, 10_000));
        assert_eq!(s.p50_ns, 5_000);
        assert_eq!(s.p99_ns, 9_900);
        assert_eq!(s.p999_ns, 9_990);
        assert_eq!(s.p9999_ns, 9_999);
        assert_eq!(s.delta_max_ns, 9_999);
        assert_eq!(s.avg_ns, 5_000);
    }

    #[test]
    fn empty_summary_is_zero() {
        let s = LatencySummary::from_samples("e", &mut [], 5);
        assert_eq!(s.samples, 0);
        assert_eq!(s.max_ns, 0);
        assert_eq!(s.lost, 5);
    }
}
