//! Deterministic test helpers: a tiny seeded PRNG (SplitMix64, Steele, Lea & Flood,
//! "Fast splittable pseudorandom number generators", OOPSLA 2014) and inverse-CDF samplers.

/// SplitMix64 generator.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
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
