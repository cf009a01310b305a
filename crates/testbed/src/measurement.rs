//! The idle latency measurements of a testbed: one host-to-host path
//! ([`PathMeasurement`], taken by [`crate::probe::measure_path_idle`]) and the
//! set stored with a testbed ([`LinkMeasurement`]), with the share of each
//! hop that the topology export announces (see [`crate::topology`]).

use serde::{Deserialize, Serialize};

/// How far below the measured minimum a link's announced minimum lies,
/// percent (see [`LinkMeasurement::uplink`]).
pub const MIN_MARGIN_PERCENT: u64 = 20;

/// Idle one-way latency of one host-to-host path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PathMeasurement {
    /// Sending host index.
    pub from: usize,
    /// Receiving host index.
    pub to: usize,
    /// Probes sent (after warm-up).
    pub sent: usize,
    /// Probes received with a timestamp not before their send time (one
    /// stamped earlier, after a step of the realtime clock, has no latency
    /// and counts as not received).
    pub received: usize,
    /// Minimum one-way latency, ns.
    pub min_ns: u64,
    /// Median, ns.
    pub p50_ns: u64,
    /// 99.9th percentile, ns.
    pub p999_ns: u64,
    /// Maximum, ns.
    pub max_ns: u64,
}

/// The idle measurement stored with a testbed: one path per host
/// (`h_i → h_(i+1) mod n`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LinkMeasurement {
    /// Probes per path.
    pub probes_per_path: usize,
    /// The measured paths.
    pub paths: Vec<PathMeasurement>,
    /// Sending hosts of the paths measured again because their first
    /// reading was an outlier (see [`LinkMeasurement::outliers`]).
    #[serde(default)]
    pub remeasured: Vec<usize>,
}

/// A path whose jitter (p99.9 − min) is above this many times the
/// median path's was measured through a stall of the measuring host, not
/// through a slow link: the testbed's links are alike.
pub const OUTLIER_FACTOR: u64 = 8;

/// Jitter (p99.9 − min) of a path, ns.
pub fn path_jitter(p: &PathMeasurement) -> u64 {
    p.p999_ns.saturating_sub(p.min_ns)
}

impl LinkMeasurement {
    /// Indices into `paths` of the paths whose jitter is above
    /// [`OUTLIER_FACTOR`] times the median path's (the upper median, so
    /// that with two paths the larger one is the reference; never one
    /// path alone). A median of zero takes 1 ns.
    pub fn outliers(paths: &[PathMeasurement]) -> Vec<usize> {
        if paths.len() < 2 {
            return Vec::new();
        }
        let mut j: Vec<u64> = paths.iter().map(path_jitter).collect();
        j.sort_unstable();
        let median = j[j.len() / 2].max(1);
        paths
            .iter()
            .enumerate()
            .filter(|(_, p)| path_jitter(p) > median.saturating_mul(OUTLIER_FACTOR))
            .map(|(i, _)| i)
            .collect()
    }

    /// (min, jitter) of host `i`'s uplink: half of the path that starts at `i`.
    pub fn uplink(&self, i: usize) -> Option<(u64, u64)> {
        let p = self.paths.iter().find(|p| p.from == i)?;
        Some(self.half(p))
    }
    /// (min, jitter) of the downlink to host `i`: half of the path ending at `i`.
    pub fn downlink(&self, i: usize) -> Option<(u64, u64)> {
        let p = self.paths.iter().find(|p| p.to == i)?;
        Some(self.half(p))
    }

    /// A hop's share of path `p`: its jitter is half of the path's, its
    /// minimum half of the **smallest** path minimum less
    /// [`MIN_MARGIN_PERCENT`]. The hops are alike, and a path's minimum is
    /// a sample minimum, an estimate from above of the least latency a
    /// packet can take: between runs on the 2-vCPU VM this is built on,
    /// the smallest of 2000 idle probes per path moved between 4.1 and
    /// 4.6 µs, and lane packets later took 4.2 µs on a path measured at
    /// 4.6 µs. A minimum must not be announced above what a packet can
    /// take.
    fn half(&self, p: &PathMeasurement) -> (u64, u64) {
        let floor = self
            .paths
            .iter()
            .map(|q| q.min_ns)
            .min()
            .unwrap_or(p.min_ns);
        (
            floor / 2 * (100 - MIN_MARGIN_PERCENT) / 100,
            p.p999_ns.saturating_sub(p.min_ns) / 2,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn halves() {
        let path = |from, to, min_ns, p999_ns| PathMeasurement {
            from,
            to,
            sent: 10,
            received: 10,
            min_ns,
            p50_ns: min_ns + 2_000,
            p999_ns,
            max_ns: p999_ns + 1_000,
        };
        let m = LinkMeasurement {
            probes_per_path: 10,
            paths: vec![path(0, 1, 20_000, 30_000), path(1, 2, 24_000, 28_000)],
            remeasured: Vec::new(),
        };
        // Minimum: half of the smallest path minimum (20 µs), less 20 %;
        // jitter: half of the path's own p99.9 − min.
        let cases = [
            (m.uplink(0), Some((8_000, 5_000))),
            (m.downlink(1), Some((8_000, 5_000))),
            (m.uplink(1), Some((8_000, 2_000))),
            (m.downlink(2), Some((8_000, 2_000))),
            (m.uplink(2), None),
            (m.downlink(0), None),
        ];
        for (i, (got, want)) in cases.into_iter().enumerate() {
            assert_eq!(got, want, "case {i}");
        }
    }

    #[test]
    fn outliers() {
        let path = |from, min_ns, p999_ns| PathMeasurement {
            from,
            to: from + 1,
            sent: 10,
            received: 10,
            min_ns,
            p50_ns: min_ns,
            p999_ns,
            max_ns: p999_ns,
        };
        // (jitters above a 10 µs minimum, outliers expected)
        let cases: [(&[u64], &[usize]); 7] = [
            (&[], &[]),
            (&[9_000_000], &[]),
            (&[100_000, 9_000_000], &[]),
            (&[100_000, 120_000, 9_000_000, 90_000], &[2]),
            (&[100_000, 800_000, 801_000, 90_000], &[]),
            (&[0, 0, 9, 0], &[2]),
            (&[100_000, 9_000_000, 9_000_000, 90_000], &[]),
        ];
        for (i, (jit, want)) in cases.iter().enumerate() {
            let paths: Vec<_> = jit
                .iter()
                .enumerate()
                .map(|(k, &j)| path(k, 10_000, 10_000 + j))
                .collect();
            assert_eq!(LinkMeasurement::outliers(&paths), *want, "case {i}");
        }
    }
}
