//! The seeded generator ([`xlane_stats::SplitMix64`]) and the variates the
//! tool draws from it. Deterministic for a given seed, no allocation.

use xlane_stats::SplitMix64;

/// SplitMix64 with the variates of inter-arrival and service times.
#[derive(Clone, Debug)]
pub struct Rng {
    state: SplitMix64,
}

impl Rng {
    /// A generator seeded with `seed` (any value, 0 included).
    pub fn new(seed: u64) -> Self {
        Rng {
            state: SplitMix64::new(seed),
        }
    }

    /// A generator for stream `stream` of `seed`: different streams of one
    /// seed are unrelated (the client's schedules and the server's service
    /// times must not share a sequence even when given the same seed, or
    /// long gaps would come with long services).
    pub fn stream(seed: u64, stream: u64) -> Self {
        let mut m = Rng::new(stream ^ 0x5EED_5EED_5EED_5EED);
        let salt = m.next_u64();
        let mut r = Rng::new(seed ^ salt);
        r.next_u64();
        r
    }

    /// The next 64 uniformly distributed bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state.next_u64()
    }

    /// Uniform in `(0, 1]` (never 0, so its logarithm is finite).
    pub fn open01(&mut self) -> f64 {
        ((self.next_u64() >> 11) + 1) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Exponentially distributed with the given mean (inverse transform).
    pub fn exp(&mut self, mean: f64) -> f64 {
        -self.open01().ln() * mean
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deterministic_and_in_range() {
        let mut a = Rng::new(7);
        let mut b = Rng::new(7);
        for _ in 0..1000 {
            let (x, y) = (a.open01(), b.open01());
            assert_eq!(x, y);
            assert!(x > 0.0 && x <= 1.0);
            let u = a.unit();
            b.unit();
            assert!((0.0..1.0).contains(&u));
        }
    }

    #[test]
    fn streams_are_unrelated() {
        for seed in [0u64, 1, 42] {
            let mut a = Rng::stream(seed, 1);
            let mut b = Rng::stream(seed, 2);
            let n = 20_000;
            let (xs, ys): (Vec<f64>, Vec<f64>) = (0..n).map(|_| (a.unit(), b.unit())).unzip();
            let mx = xs.iter().sum::<f64>() / n as f64;
            let my = ys.iter().sum::<f64>() / n as f64;
            let cov: f64 = xs
                .iter()
                .zip(&ys)
                .map(|(x, y)| (x - mx) * (y - my))
                .sum::<f64>()
                / n as f64;
            // Correlation of two independent uniforms: sd 1/sqrt(n) ≈ 0.007.
            let corr = cov * 12.0;
            assert!(corr.abs() < 0.03, "seed {seed}: correlation {corr}");
        }
    }

    #[test]
    fn exponential_mean_is_close() {
        let seed = 11;
        let mut r = Rng::new(seed);
        let n = 200_000;
        let m: f64 = (0..n).map(|_| r.exp(5.0)).sum::<f64>() / n as f64;
        assert!((m - 5.0).abs() < 0.05, "seed {seed}: mean {m}");
    }
}
