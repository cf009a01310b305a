//! SLO-aware admission control (SVEN), without I/O.
//!
//! The router measures each request's latency from its REQ0's arrival to
//! the FEEDBACK that closes it and records it in a [`Histogram`]. Every
//! control period a [`Controller`] reads the period's histogram and sets
//! the probability with which the router drops a new REQ0 (answering its
//! client with DROP) before any scheduling policy runs. The only setting is
//! the SLO ([`Slo`]: a latency at a percentile); nothing about the service
//! time is known.
//!
//! Two controllers:
//!
//! * [`ControllerKind::Aiad`], SVEN's Listing 1: estimate which percentile
//!   the SLO latency sits at (an EWMA over periods); below the target
//!   percentile, raise the drop rate by a fixed step, else lower it by the
//!   same step. It must see violations to react, so it oscillates around
//!   the SLO, more where the latency–throughput curve is steep.
//! * [`ControllerKind::Cap`], the default: a bound on the requests
//!   outstanding at the servers (forwarded, no FEEDBACK yet), checked for
//!   every REQ0 at once, with the bound moved each period, multiplicatively,
//!   by `gain · ln(aim · SLO / p̂)` (from no higher than the most requests
//!   outstanding in the period), p̂ the SLO's percentile over an
//!   exponentially decayed histogram of recent periods (about ten deep).
//!
//! Why a bound and not a drop rate: a drop rate acts on the latency only
//! through the queue, and the latencies that tell the loop about the queue
//! arrive a queue-length late, so a loop on the drop rate chases its own
//! delay (in the simulated tests a PI controller on the drop rate, at the
//! eight gain settings tried, swung between 0.2 and 0.7 and left most
//! per-second p99s at 1.5–2.8× the SLO; see `docs/rpc.md`). The number outstanding *is* the queue, known at once, and the
//! percentile that a given bound yields depends on the service-time
//! distribution and the servers, not on the offered load: the outer loop
//! only has to find one number, and it does not move when the load steps.
//! The bound may only grow in a period in which it turned a request away
//! (below the bound it is not what keeps latency down, and it must not
//! drift up to its maximum); it aims at 0.7 of the SLO so that the
//! estimate's noise and the load's swings stay under it. Requests turned
//! away get DROP at once, as SVEN's do.

use std::fmt;

/// Sub-buckets per power of two in [`Histogram`] (relative width 1/16).
const SUB_BITS: u32 = 4;
const SUB: usize = 1 << SUB_BITS;
/// Buckets: values below `SUB` exactly, then `SUB` per power of two.
const BUCKETS: usize = (64 - SUB_BITS as usize) * SUB + SUB;

/// Latencies (ns) in log-linear buckets: exact below 16 ns, then 16 buckets
/// per power of two (an upper bound at most 6.25 % above any value it
/// holds). Fixed size (about 4 KB), no allocation after creation.
#[derive(Clone)]
pub struct Histogram {
    counts: Box<[u32; BUCKETS]>,
    total: u64,
}

impl fmt::Debug for Histogram {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Histogram")
            .field("total", &self.total)
            .finish()
    }
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            counts: Box::new([0; BUCKETS]),
            total: 0,
        }
    }
}

fn bucket_of(v: u64) -> usize {
    if v < SUB as u64 {
        return v as usize;
    }
    let e = 63 - v.leading_zeros(); // ≥ SUB_BITS
    let sub = ((v >> (e - SUB_BITS)) as usize) & (SUB - 1);
    (e - SUB_BITS + 1) as usize * SUB + sub
}

/// The largest value bucket `i` holds.
fn bucket_max(i: usize) -> u64 {
    if i < SUB {
        return i as u64;
    }
    let e = (i / SUB) as u32 + SUB_BITS - 1;
    let sub = (i % SUB) as u64;
    let base = (SUB as u64 + sub) << (e - SUB_BITS);
    base.saturating_add((1u64 << (e - SUB_BITS)) - 1)
}

/// The upper bound of the bucket where the running sum of `counts` (one
/// per bucket, in order) reaches `rank`.
fn bucket_at_rank(counts: impl Iterator<Item = f64>, rank: f64) -> u64 {
    let mut seen = 0.0;
    for (i, c) in counts.enumerate() {
        seen += c;
        if seen >= rank {
            return bucket_max(i);
        }
    }
    bucket_max(BUCKETS - 1)
}

impl Histogram {
    /// Counts one latency.
    pub fn record(&mut self, ns: u64) {
        let b = &mut self.counts[bucket_of(ns)];
        *b = b.saturating_add(1);
        self.total += 1;
    }

    /// Latencies counted.
    pub fn len(&self) -> u64 {
        self.total
    }

    /// Whether nothing was counted.
    pub fn is_empty(&self) -> bool {
        self.total == 0
    }

    /// Forgets every count.
    pub fn clear(&mut self) {
        self.counts.fill(0);
        self.total = 0;
    }

    /// The `q`-quantile (0 < q ≤ 1; nearest rank) as its bucket's upper
    /// bound; `None` when empty.
    pub fn quantile(&self, q: f64) -> Option<u64> {
        if self.total == 0 {
            return None;
        }
        let rank = ((q * self.total as f64).ceil() as u64).clamp(1, self.total);
        Some(bucket_at_rank(
            self.counts.iter().map(|&c| f64::from(c)),
            rank as f64,
        ))
    }

    /// Share of the latencies in buckets wholly at or below `ns` (SVEN's
    /// "which percentile is the SLO at"); `None` when empty.
    pub fn fraction_at_most(&self, ns: u64) -> Option<f64> {
        if self.total == 0 {
            return None;
        }
        let below: u64 = self
            .counts
            .iter()
            .enumerate()
            .take_while(|(i, _)| bucket_max(*i) <= ns)
            .map(|(_, &c)| u64::from(c))
            .sum();
        Some(below as f64 / self.total as f64)
    }
}

/// A latency objective: `quantile` of latencies at most `latency_ns`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Slo {
    /// The percentile as a fraction (0.99 for p99).
    pub quantile: f64,
    /// The latency bound, ns.
    pub latency_ns: u64,
}

/// Why an SLO did not parse.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("bad SLO {0:?}: expected pQ=DURATION with 0 < Q < 100, like p99=10ms or p99.9=500us")]
pub struct SloError(pub String);

impl std::str::FromStr for Slo {
    type Err = SloError;
    fn from_str(s: &str) -> Result<Self, SloError> {
        let err = || SloError(s.to_string());
        let (p, d) = s.split_once('=').ok_or_else(err)?;
        let q: f64 = p
            .strip_prefix('p')
            .ok_or_else(err)?
            .parse()
            .map_err(|_| err())?;
        if !(q > 0.0 && q < 100.0) {
            return Err(err());
        }
        let split = d
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(err)?;
        let (num, unit) = d.split_at(split);
        let v: f64 = num.parse().map_err(|_| err())?;
        let scale = match unit {
            "ns" => 1.0,
            "us" | "µs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            _ => return Err(err()),
        };
        let ns = v * scale;
        if !(1.0..=3.6e12).contains(&ns) {
            return Err(err());
        }
        Ok(Slo {
            quantile: q / 100.0,
            latency_ns: ns as u64,
        })
    }
}

impl fmt::Display for Slo {
    /// As parsed: `p99=10ms` (the largest unit that divides the bound).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let p = (self.quantile * 1e6).round() / 1e4;
        let ns = self.latency_ns;
        let (v, unit) = match ns {
            _ if ns % 1_000_000_000 == 0 => (ns / 1_000_000_000, "s"),
            _ if ns % 1_000_000 == 0 => (ns / 1_000_000, "ms"),
            _ if ns % 1_000 == 0 => (ns / 1_000, "us"),
            _ => (ns, "ns"),
        };
        write!(f, "p{p}={v}{unit}")
    }
}

/// Which control loop.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ControllerKind {
    /// SVEN's Listing 1: additive increase/decrease by `step` on an EWMA
    /// (weight `alpha` on the new period) of the SLO's percentile.
    Aiad {
        /// Drop-rate change per period (SVEN: 0.01).
        step: f64,
        /// EWMA weight of the newest period.
        alpha: f64,
    },
    /// The default: a bound on the requests outstanding at the servers,
    /// applied to every REQ0 at once, and moved each period by
    /// `gain · ln(SLO / p̂)` (multiplicatively) toward the bound at which
    /// the percentile p̂ of recent latencies is the SLO (see the module
    /// docs). `alpha`: weight of the newest period in p̂'s decayed
    /// histogram.
    Cap {
        /// Log-step of the bound per unit of log error.
        gain: f64,
        /// Decay of the latency histogram: the newest period's weight.
        alpha: f64,
        /// The percentile aimed at, as a fraction of the SLO: below 1, so
        /// that the estimate's noise and the load's swings stay under it.
        aim: f64,
    },
}

impl ControllerKind {
    /// SVEN's constants: step 0.01, EWMA weight 0.5.
    pub const AIAD: ControllerKind = ControllerKind::Aiad {
        step: 0.01,
        alpha: 0.5,
    };
    /// The default: gain 0.1, newest period weighted 0.1, aim at 0.7 of
    /// the SLO.
    pub const CAP: ControllerKind = ControllerKind::Cap {
        gain: 0.1,
        alpha: 0.1,
        aim: 0.7,
    };
}

impl std::str::FromStr for ControllerKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "aiad" => Ok(ControllerKind::AIAD),
            "cap" | "default" => Ok(ControllerKind::CAP),
            _ => Err(format!("unknown controller {s:?}: expected aiad or cap")),
        }
    }
}

/// Highest drop rate a controller sets (SVEN: 0.99).
pub const MAX_DROP: f64 = 0.99;

/// The cap's largest (and first) bound on outstanding requests.
pub const MAX_CAP: f64 = 65_536.0;

/// A control loop: one [`Controller::update`] per control period.
#[derive(Clone, Debug)]
pub struct Controller {
    kind: ControllerKind,
    slo: Slo,
    drop: f64,
    /// AIAD: EWMA of the SLO's percentile.
    ewma: Option<f64>,
    /// Cap: the latencies of recent periods, each period's counts weighted
    /// down by `1 − alpha` per period since (an exponentially decayed
    /// histogram, about `1 / alpha` periods deep).
    decayed: Box<[f32; BUCKETS]>,
    /// Cap: the bound on outstanding requests.
    cap: f64,
    /// Cap: the bound was reached since the last update (only then may it
    /// grow: below it, the bound is not what keeps latency down).
    hit: bool,
    /// Cap: the most requests outstanding at an arrival since the last
    /// update (a shrinking bound starts from there, not from above it).
    peak: usize,
}

impl Controller {
    /// A loop for `slo`, dropping nothing yet.
    pub fn new(kind: ControllerKind, slo: Slo) -> Self {
        Controller {
            kind,
            slo,
            drop: 0.0,
            ewma: None,
            decayed: Box::new([0.0; BUCKETS]),
            cap: MAX_CAP,
            hit: false,
            peak: 0,
        }
    }

    /// AIAD's drop probability now (0 for the cap).
    pub fn drop_rate(&self) -> f64 {
        self.drop
    }

    /// The cap's bound on outstanding requests now (`None` for AIAD).
    pub fn cap(&self) -> Option<u32> {
        matches!(self.kind, ControllerKind::Cap { .. }).then_some(self.cap as u32)
    }

    /// Whether a new request is admitted, with `outstanding` requests
    /// forwarded and not yet finished and `coin` uniform in [0, 1). O(1).
    pub fn admits(&mut self, outstanding: usize, coin: f64) -> bool {
        match self.kind {
            ControllerKind::Aiad { .. } => coin >= self.drop,
            ControllerKind::Cap { .. } => {
                self.peak = self.peak.max(outstanding + 1);
                if (outstanding as f64) < self.cap.floor() {
                    true
                } else {
                    self.hit = true;
                    false
                }
            }
        }
    }

    /// The SLO.
    pub fn slo(&self) -> Slo {
        self.slo
    }

    /// One period: `window` holds the latencies of the requests that
    /// finished in it. Returns the new drop probability. An empty window
    /// keeps everything as it was.
    pub fn update(&mut self, window: &Histogram) -> f64 {
        match self.kind {
            ControllerKind::Aiad { step, alpha } => {
                let Some(p) = window.fraction_at_most(self.slo.latency_ns) else {
                    return self.drop;
                };
                let est = self.ewma.map_or(p, |e| alpha * p + (1.0 - alpha) * e);
                self.ewma = Some(est);
                self.drop = if est < self.slo.quantile {
                    (self.drop + step).min(MAX_DROP)
                } else {
                    (self.drop - step).max(0.0)
                };
            }
            ControllerKind::Cap { gain, alpha, aim } => {
                if window.is_empty() {
                    return self.drop;
                }
                let keep = (1.0 - alpha) as f32;
                let mut total = 0.0f64;
                for (d, &c) in self.decayed.iter_mut().zip(window.counts.iter()) {
                    *d = *d * keep + c as f32;
                    total += f64::from(*d);
                }
                let q = bucket_at_rank(
                    self.decayed.iter().map(|&d| f64::from(d)),
                    self.slo.quantile * total,
                );
                let e = (aim * self.slo.latency_ns as f64 / q.max(1) as f64).ln();
                if e < 0.0 {
                    let from = self.cap.min(self.peak.max(1) as f64);
                    self.cap = (from * (gain * e).exp()).clamp(1.0, MAX_CAP);
                } else if self.hit {
                    self.cap = (self.cap * (gain * e).exp()).clamp(1.0, MAX_CAP);
                }
                self.hit = false;
                self.peak = 0;
            }
        }
        self.drop
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_hold_their_values_within_a_sixteenth() {
        let mut v = 0u64;
        while v < u64::MAX / 3 {
            let b = bucket_of(v);
            assert!(bucket_max(b) >= v, "{v}");
            assert!(b == 0 || bucket_max(b - 1) < v, "{v}");
            assert!(bucket_max(b) as f64 <= v as f64 * 1.0625 + 1.0, "{v}");
            v = v + v / 8 + 1;
        }
        assert!(bucket_of(u64::MAX) < BUCKETS);
    }

    #[test]
    fn quantiles_and_fractions_by_table() {
        let mut h = Histogram::default();
        assert_eq!(h.quantile(0.5), None);
        assert_eq!(h.fraction_at_most(10), None);
        for v in 1..=100u64 {
            h.record(v * 1000);
        }
        // (q, the true value): the bucket bound is at most 1/16 above it.
        for (q, want) in [
            (0.5, 50_000u64),
            (0.99, 99_000),
            (1.0, 100_000),
            (0.01, 1000),
        ] {
            let got = h.quantile(q).unwrap();
            assert!(
                got >= want && got as f64 <= want as f64 * 1.0625,
                "{q}: {got}"
            );
        }
        let f = h.fraction_at_most(50_000).unwrap();
        assert!((0.46..=0.50).contains(&f), "{f}");
        h.clear();
        assert!(h.is_empty());
    }

    #[test]
    fn slos_parse_and_bad_ones_are_refused() {
        for (s, q, ns) in [
            ("p99=10ms", 0.99, 10_000_000u64),
            ("p99.9=500us", 0.999, 500_000),
            ("p50=1.5s", 0.5, 1_500_000_000),
            ("p90=300µs", 0.9, 300_000),
        ] {
            let slo: Slo = s.parse().unwrap();
            assert!((slo.quantile - q).abs() < 1e-12, "{s}");
            assert_eq!(slo.latency_ns, ns, "{s}");
            assert_eq!(slo.to_string().parse::<Slo>().unwrap(), slo, "{s}");
        }
        for s in [
            "99=1ms", "p100=1ms", "p0=1ms", "p99", "p99=10", "p99=fast", "p99=-1ms", "p99=0ns",
        ] {
            assert!(s.parse::<Slo>().is_err(), "{s}");
        }
    }
}
