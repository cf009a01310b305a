//! Deterministic test helpers: inverse-CDF samplers over the crate's
//! seeded generator ([`crate::SplitMix64`]).

/// Seeded draws for tests.
pub struct Rng(crate::SplitMix64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(crate::SplitMix64::new(seed))
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }

    /// Uniform in the open interval (0, 1).
    pub fn uniform(&mut self) -> f64 {
        ((self.next_u64() >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }

    /// Exponential with the given rate, by inversion: -ln(U)/rate.
    pub fn exp(&mut self, rate: f64) -> f64 {
        -self.uniform().ln() / rate
    }

    /// Standard normal by Box–Muller (one of the pair is discarded; speed is irrelevant here).
    pub fn normal(&mut self) -> f64 {
        let u1 = self.uniform();
        let u2 = self.uniform();
        (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
    }
}
