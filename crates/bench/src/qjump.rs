//! QJump's host rate limiter for one level, as a baseline (QJump, ;login:
//! 2015).
//!
//! QJump bounds queueing by letting each of n hosts send at most one packet
//! of size P per *network epoch* 2nP/R at the highest level (R the link
//! rate). A level with throughput factor f may send f packets per epoch,
//! trading a looser bound for more bandwidth. The limiter is a token bucket
//! of f tokens refilled every epoch; time is passed in (ns).

/// A QJump level's limiter.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct QjumpLimiter {
    epoch_ns: u64,
    f: u32,
    tokens: f64,
    last_ns: Option<u64>,
}

impl QjumpLimiter {
    /// The network epoch 2nP/R in ns for `hosts` hosts, packets of
    /// `packet_bytes` and links of `link_bps`.
    pub fn epoch_ns(hosts: u32, packet_bytes: u32, link_bps: u64) -> u64 {
        if link_bps == 0 {
            return u64::MAX;
        }
        (2 * hosts as u128 * packet_bytes as u128 * 8 * 1_000_000_000 / link_bps as u128) as u64
    }

    /// A limiter of `f` packets per epoch (f ≥ 1), starting full.
    pub fn new(epoch_ns: u64, f: u32) -> Self {
        let f = f.max(1);
        QjumpLimiter {
            epoch_ns: epoch_ns.max(1),
            f,
            tokens: f as f64,
            last_ns: None,
        }
    }

    /// The smallest throughput factor that lets one packet per `period_ns`
    /// through.
    pub fn factor_for_period(epoch_ns: u64, period_ns: u64) -> u32 {
        epoch_ns
            .div_ceil(period_ns.max(1))
            .clamp(1, u32::MAX as u64) as u32
    }

    /// The throughput factor.
    pub fn factor(&self) -> u32 {
        self.f
    }

    /// May a packet leave at `now_ns`? Takes a token if so.
    pub fn admit(&mut self, now_ns: u64) -> bool {
        if let Some(last) = self.last_ns {
            let dt = now_ns.saturating_sub(last) as f64;
            self.tokens =
                (self.tokens + dt * self.f as f64 / self.epoch_ns as f64).min(self.f as f64);
        }
        self.last_ns = Some(now_ns);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn epoch_table() {
        // 2nP/R: n hosts, P bytes, R bits/s (worked by hand).
        let cases = [
            (4, 1500, 100_000_000, 960_000),
            (4, 1500, 1_000_000_000, 96_000),
            (2, 64, 1_000_000_000, 2_048),
            (1000, 1500, 10_000_000_000, 2_400_000),
        ];
        for (n, p, r, want) in cases {
            assert_eq!(QjumpLimiter::epoch_ns(n, p, r), want, "n={n} P={p} R={r}");
        }
        assert_eq!(QjumpLimiter::epoch_ns(4, 1500, 0), u64::MAX);
    }

    #[test]
    fn factor_fits_the_period() {
        assert_eq!(QjumpLimiter::factor_for_period(960_000, 200_000), 5);
        assert_eq!(QjumpLimiter::factor_for_period(960_000, 960_000), 1);
        assert_eq!(QjumpLimiter::factor_for_period(960_000, 2_000_000), 1);
    }

    #[test]
    fn admits_f_per_epoch() {
        // f = 2 per 1000 ns: a burst of 2, then one every 500 ns.
        let mut l = QjumpLimiter::new(1_000, 2);
        let admitted: Vec<bool> = [0, 0, 0, 499, 500, 1_000, 1_001, 1_002]
            .iter()
            .map(|&t| l.admit(t))
            .collect();
        assert_eq!(
            admitted,
            [true, true, false, false, true, true, false, false]
        );
    }

    #[test]
    fn a_flow_at_the_fitted_rate_is_never_held() {
        let epoch = QjumpLimiter::epoch_ns(4, 1500, 100_000_000);
        let period = 200_000;
        let mut l = QjumpLimiter::new(epoch, QjumpLimiter::factor_for_period(epoch, period));
        assert!((0..10_000u64).all(|k| l.admit(k * period)));
    }
}
