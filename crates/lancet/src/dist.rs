//! Distributions: request inter-arrival times (client) and service times
//! (synthetic server), and the parser for durations such as `20us`.

use crate::rng::Rng;
use serde::Serialize;
use std::fmt;

/// Why a distribution or duration could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DistError {
    /// The duration is not `<number><unit>` with unit ns, us, µs, ms or s.
    #[error("bad duration {0:?}: expected a number and a unit (ns, us, ms, s), e.g. 20us")]
    Duration(String),
    /// The service distribution is not `fixed:D`, `exp:D` or `bimodal:D`.
    #[error("bad service time {0:?}: expected fixed:D, exp:D or bimodal:D with D like 20us")]
    Service(String),
    /// The inter-arrival distribution is not `poisson` or `fixed`.
    #[error("unknown inter-arrival distribution {0:?}: expected poisson or fixed")]
    Arrival(String),
}

/// Parse a duration like `20us`, `1.5ms`, `500ns`, `2s` (also `µs`) into
/// nanoseconds. Negative, non-finite or absurd (> 1 day) values are refused.
pub fn parse_duration_ns(s: &str) -> Result<u64, DistError> {
    let bad = || DistError::Duration(s.to_string());
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .ok_or_else(bad)?;
    let (num, unit) = t.split_at(split);
    let v: f64 = num.parse().map_err(|_| bad())?;
    let mult = match unit.trim() {
        "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        _ => return Err(bad()),
    };
    let ns = v * mult;
    if !ns.is_finite() || !(0.0..=86_400e9).contains(&ns) {
        return Err(bad());
    }
    Ok(ns.round() as u64)
}

/// How requests are spaced in time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Arrival {
    /// Exponential gaps: a Poisson process.
    Poisson,
    /// Equal gaps.
    Fixed,
}

impl std::str::FromStr for Arrival {
    type Err = DistError;
    fn from_str(s: &str) -> Result<Self, DistError> {
        match s {
            "poisson" | "exp" => Ok(Arrival::Poisson),
            "fixed" | "uniform" => Ok(Arrival::Fixed),
            _ => Err(DistError::Arrival(s.to_string())),
        }
    }
}

impl fmt::Display for Arrival {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Arrival::Poisson => "poisson",
            Arrival::Fixed => "fixed",
        })
    }
}

/// A schedule of send times at a given rate: `next()` gives the next
/// scheduled time in nanoseconds after the start (fractional nanoseconds are
/// carried, so a fixed rate does not drift). The rate may change at given
/// times ([`Schedule::with_steps`]).
#[derive(Clone, Debug)]
pub struct Schedule {
    arrival: Arrival,
    /// The mean gap at the first rate.
    base_gap_ns: f64,
    mean_gap_ns: f64,
    /// Start of the current rate's stretch (a fixed schedule counts from it).
    from_ns: f64,
    t_ns: f64,
    count: u64,
    rng: Rng,
    /// Later rates: (from this time, ns; mean gap, ns), in time order.
    steps: Vec<(u64, f64)>,
    next_step: usize,
}

impl Schedule {
    /// A schedule at `rate` requests/s (must be > 0), first send one gap
    /// after 0. `seed` selects the generator: [`Rng::stream`]`(seed, 1000 + agent)`
    /// is what the client uses.
    pub fn new(arrival: Arrival, rate: f64, seed: u64) -> Self {
        Self::with_rng(arrival, rate, Rng::new(seed))
    }

    /// A schedule drawing from `rng`.
    pub fn with_rng(arrival: Arrival, rate: f64, rng: Rng) -> Self {
        Schedule {
            arrival,
            base_gap_ns: 1e9 / rate,
            mean_gap_ns: 1e9 / rate,
            from_ns: 0.0,
            t_ns: 0.0,
            count: 0,
            rng,
            steps: Vec::new(),
            next_step: 0,
        }
    }

    /// The same schedule, whose rate becomes `rate` (> 0) at `at_ns` for
    /// each `(at_ns, rate)` of `steps` (in increasing time order). A
    /// Poisson schedule crossing a step starts afresh at the step's time
    /// (exact, the exponential having no memory); a fixed one sends one new
    /// gap after it.
    pub fn with_steps(mut self, steps: &[(u64, f64)]) -> Self {
        self.steps = steps.iter().map(|&(at, r)| (at, 1e9 / r)).collect();
        self.next_step = 0;
        self
    }

    /// The current rate over the first rate (1 without steps).
    pub fn rate_factor(&self) -> f64 {
        self.base_gap_ns / self.mean_gap_ns
    }

    /// The next scheduled time (ns after the start).
    pub fn next_ns(&mut self) -> u64 {
        loop {
            let t = match self.arrival {
                Arrival::Poisson => self.t_ns + self.rng.exp(self.mean_gap_ns),
                // Multiplied, not summed: no rounding drift over long runs.
                Arrival::Fixed => self.from_ns + (self.count + 1) as f64 * self.mean_gap_ns,
            };
            if let Some(&(at, gap)) = self.steps.get(self.next_step) {
                if t >= at as f64 {
                    self.next_step += 1;
                    self.mean_gap_ns = gap;
                    self.from_ns = at as f64;
                    self.t_ns = at as f64;
                    self.count = 0;
                    continue;
                }
            }
            self.count += 1;
            self.t_ns = t;
            return t.round() as u64;
        }
    }
}

/// The synthetic server's service-time distribution.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", content = "base_ns", rename_all = "lowercase")]
pub enum ServiceDist {
    /// Every request takes exactly this long (ns).
    Fixed(u64),
    /// Exponential with this mean (ns).
    Exp(u64),
    /// 90 % of requests take the base time, 10 % take ten times it; the mean
    /// is therefore 1.9 × base.
    Bimodal(u64),
}

impl ServiceDist {
    /// Draw one service time in ns.
    pub fn sample(&self, rng: &mut Rng) -> u64 {
        match *self {
            ServiceDist::Fixed(ns) => ns,
            ServiceDist::Exp(mean) => rng.exp(mean as f64).round() as u64,
            ServiceDist::Bimodal(base) => {
                if rng.unit() < 0.1 {
                    base.saturating_mul(10)
                } else {
                    base
                }
            }
        }
    }

    /// The mean service time in ns.
    pub fn mean_ns(&self) -> f64 {
        match *self {
            ServiceDist::Fixed(ns) | ServiceDist::Exp(ns) => ns as f64,
            ServiceDist::Bimodal(base) => 1.9 * base as f64,
        }
    }
}

impl std::str::FromStr for ServiceDist {
    type Err = DistError;
    fn from_str(s: &str) -> Result<Self, DistError> {
        let (kind, d) = s
            .split_once(':')
            .ok_or_else(|| DistError::Service(s.to_string()))?;
        let ns = parse_duration_ns(d).map_err(|_| DistError::Service(s.to_string()))?;
        match kind {
            "fixed" => Ok(ServiceDist::Fixed(ns)),
            "exp" => Ok(ServiceDist::Exp(ns)),
            "bimodal" => Ok(ServiceDist::Bimodal(ns)),
            _ => Err(DistError::Service(s.to_string())),
        }
    }
}

impl fmt::Display for ServiceDist {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (k, ns) = match *self {
            ServiceDist::Fixed(ns) => ("fixed", ns),
            ServiceDist::Exp(ns) => ("exp", ns),
            ServiceDist::Bimodal(ns) => ("bimodal", ns),
        };
        write!(f, "{k}:{}", xlane_stats::fmt_ns(ns))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        let table: &[(&str, Option<u64>)] = &[
            ("20us", Some(20_000)),
            ("20µs", Some(20_000)),
            ("1.5ms", Some(1_500_000)),
            ("500ns", Some(500)),
            ("2s", Some(2_000_000_000)),
            ("0us", Some(0)),
            ("20", None),
            ("us", None),
            ("-1us", None),
            ("1e3us", None),
            ("20 parsecs", None),
            ("", None),
            ("99999999s", None),
        ];
        for (s, want) in table {
            assert_eq!(parse_duration_ns(s).ok(), *want, "{s}");
        }
    }

    #[test]
    fn service_parse_and_mean() {
        let table: &[(&str, Option<ServiceDist>, f64)] = &[
            ("fixed:20us", Some(ServiceDist::Fixed(20_000)), 20_000.0),
            ("exp:1ms", Some(ServiceDist::Exp(1_000_000)), 1e6),
            ("bimodal:10us", Some(ServiceDist::Bimodal(10_000)), 19_000.0),
            ("uniform:1us", None, 0.0),
            ("fixed", None, 0.0),
            ("fixed:x", None, 0.0),
        ];
        for (s, want, mean) in table {
            let got = s.parse::<ServiceDist>().ok();
            assert_eq!(got, *want, "{s}");
            if let Some(d) = got {
                assert_eq!(d.mean_ns(), *mean);
                assert_eq!(d.to_string().parse::<ServiceDist>().ok(), got);
            }
        }
    }

    #[test]
    fn sampled_means_match_documented_means() {
        let seed = 3;
        let mut rng = Rng::new(seed);
        for d in [
            ServiceDist::Fixed(1000),
            ServiceDist::Exp(1000),
            ServiceDist::Bimodal(1000),
        ] {
            let n = 200_000;
            let m = (0..n).map(|_| d.sample(&mut rng) as f64).sum::<f64>() / n as f64;
            assert!(
                (m / d.mean_ns() - 1.0).abs() < 0.02,
                "seed {seed}: {d}: {m} vs {}",
                d.mean_ns()
            );
        }
    }

    #[test]
    fn fixed_schedule_does_not_drift() {
        let mut s = Schedule::new(Arrival::Fixed, 3.0, 1);
        let mut last = 0;
        for _ in 0..3_000_000 {
            last = s.next_ns();
        }
        // 3 million requests at 3/s: exactly 10^6 s.
        assert_eq!(last, 1_000_000_000_000_000);
    }

    #[test]
    fn poisson_schedule_has_the_rate() {
        let mut s = Schedule::new(Arrival::Poisson, 1000.0, 5);
        let mut last = 0;
        for _ in 0..100_000 {
            last = s.next_ns();
        }
        let rate = 100_000.0 / (last as f64 / 1e9);
        assert!((rate / 1000.0 - 1.0).abs() < 0.02, "rate {rate}");
    }

    /// Each stretch of a stepped schedule has its own rate, for both
    /// arrival processes and several seeds.
    #[test]
    fn stepped_schedule_has_each_rate() {
        // (from s, to s, rate) of each stretch.
        let stretches = [
            (0.0, 20.0, 1000.0),
            (20.0, 40.0, 3000.0),
            (40.0, 60.0, 500.0),
        ];
        let steps = [(20_000_000_000, 3000.0), (40_000_000_000, 500.0)];
        for arrival in [Arrival::Poisson, Arrival::Fixed] {
            for seed in 1..=3 {
                let mut s = Schedule::new(arrival, 1000.0, seed).with_steps(&steps);
                let mut counts = [0u64; 3];
                let mut last = 0;
                loop {
                    let t = s.next_ns();
                    assert!(t >= last, "{arrival} seed {seed}: time went back");
                    last = t;
                    let secs = t as f64 / 1e9;
                    if secs >= 60.0 {
                        break;
                    }
                    let i = stretches.iter().position(|x| secs < x.1).unwrap();
                    counts[i] += 1;
                    let want_factor = stretches[i].2 / 1000.0;
                    assert_eq!(
                        s.rate_factor(),
                        want_factor,
                        "{arrival} seed {seed} at {secs}"
                    );
                }
                for (i, (from, to, rate)) in stretches.iter().enumerate() {
                    let got = counts[i] as f64 / (to - from);
                    assert!(
                        (got / rate - 1.0).abs() < 0.03,
                        "{arrival} seed {seed} stretch {i}: {got}/s, not {rate}"
                    );
                }
            }
        }
    }
}
