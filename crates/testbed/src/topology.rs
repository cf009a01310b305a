//! The topology export read by the controller.
//!
//! # Schema (TOML, `schema = 1`)
//!
//! ```toml
//! schema = 1
//! prefix = "xl1a2b3c"          # testbed prefix
//! express_dscp = 46            # DSCP of express sub-lane 1 (HTB prio 0)
//! express2_dscp = 40           # DSCP of express sub-lane 2 (prio 1); absent if disabled
//! express_rate_percent = 10    # guaranteed rate of each express class, % of its link
//! burst_ns = 50000             # burst of the shaped classes, as time at their rate
//!
//! [[node]]
//! name = "h0"                  # h<i> for hosts, "sw" for the switch
//! kind = "host"                # "host" | "switch"
//! netns = "xl1a2b3c-h0"
//! addr = "198.18.0.1"          # hosts only
//!
//! [[link]]                     # one per direction of every cable
//! from = "h0"
//! to = "sw"
//! device = "xl1a2b3c-h0"       # egress device shaping this direction (in `from`'s netns)
//! bandwidth_bps = 1000000000
//! express_queue_pkts = 64      # per express sub-lane
//! best_effort_queue_pkts = 1000
//! min_latency_ns = 9000        # measured, see below; 0 if not measured
//! max_jitter_ns = 4000
//! measured = true
//! min_includes_tx = false      # token-bucket ports: no serialization delay when tokens are left
//! ```
//!
//! # How latencies are measured
//!
//! At `up` (or `Testbed::measure`), on an idle network, each host `i` sends
//! probes to host `(i+1) mod n`, one at a time (see
//! [`crate::probe::measure_path_idle`]): the path `h_i → sw → h_(i+1)`
//! crosses exactly the uplink of `h_i` and the downlink to `h_(i+1)`, so
//! every link is on exactly one measured path. A path's minimum one-way
//! latency and its jitter (p99.9 − min) are split **half to each of its two
//! links**: the two hops are alike (veth + HTB) and one-way probes cannot
//! tell them apart. A link's minimum is half of the smallest path minimum,
//! less 20 % ([`MIN_MARGIN_PERCENT`]), so that neither a path between
//! hosts never measured together nor the sample minimum's own noise
//! announces a path slower than it can be. The numbers include the sender's and receiver's kernel
//! stack, as a real NIC-to-NIC latency would not.

use crate::probe::PathMeasurement;
use serde::{Deserialize, Serialize};
use std::net::Ipv4Addr;
use std::path::Path;

/// How far below the measured minimum a link's announced minimum lies,
/// percent (see [`LinkMeasurement::uplink`]).
pub const MIN_MARGIN_PERCENT: u64 = 20;

/// Current schema version.
pub const SCHEMA_VERSION: u32 = 1;

/// Node kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NodeKind {
    /// An emulated host.
    Host,
    /// The switch.
    Switch,
}

/// A node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Node {
    /// `h<i>` or `sw`.
    pub name: String,
    /// Host or switch.
    pub kind: NodeKind,
    /// Its network namespace (empty in a file describing real hosts).
    #[serde(default)]
    pub netns: String,
    /// Host address (hosts only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub addr: Option<Ipv4Addr>,
}

/// One direction of a cable.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Link {
    /// Sending node name.
    pub from: String,
    /// Receiving node name.
    pub to: String,
    /// Egress device that shapes this direction (in `from`'s namespace).
    pub device: String,
    /// Shaped rate, bits per second.
    pub bandwidth_bps: u64,
    /// Queue of each express sub-lane, packets.
    pub express_queue_pkts: u32,
    /// Best-effort queue, packets (default 1000).
    #[serde(default = "default_best_effort_queue")]
    pub best_effort_queue_pkts: u32,
    /// Measured minimum latency of this hop, ns (0 if not measured).
    #[serde(default)]
    pub min_latency_ns: u64,
    /// Measured jitter of this hop (share of p99.9 − min), ns.
    #[serde(default)]
    pub max_jitter_ns: u64,
    /// Whether the two numbers above were measured.
    #[serde(default)]
    pub measured: bool,
    /// Whether a packet's transmission time adds to the hop's minimum
    /// latency: false here, since the ports are HTB token buckets that
    /// release a packet at once when tokens are left (the controller keeps
    /// the transmission time in the maximum).
    #[serde(default = "yes")]
    pub min_includes_tx: bool,
}

fn yes() -> bool {
    true
}

fn default_best_effort_queue() -> u32 {
    crate::TestbedConfig::default().best_effort_queue_pkts
}

fn default_express_percent() -> u8 {
    crate::TestbedConfig::default().express_rate_percent
}

fn default_burst_ns() -> u64 {
    crate::TestbedConfig::default().burst_ns
}

/// The whole topology.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Topology {
    /// Schema version (`SCHEMA_VERSION`).
    pub schema: u32,
    /// Testbed prefix (empty in a file describing real hosts).
    #[serde(default)]
    pub prefix: String,
    /// DSCP of express sub-lane 1.
    pub express_dscp: u8,
    /// DSCP of express sub-lane 2, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub express2_dscp: Option<u8>,
    /// Guaranteed rate of each express class, percent of its link
    /// ([`crate::TestbedConfig::express_rate_percent`]).
    #[serde(default = "default_express_percent")]
    pub express_rate_percent: u8,
    /// Burst of every shaped class, as time at its rate, ns
    /// ([`crate::TestbedConfig::burst_ns`]).
    #[serde(default = "default_burst_ns")]
    pub burst_ns: u64,
    /// Nodes.
    #[serde(default)]
    pub node: Vec<Node>,
    /// Links (both directions of every cable).
    #[serde(default)]
    pub link: Vec<Link>,
}

/// Why a topology could not be written or read.
#[derive(Debug, thiserror::Error)]
pub enum TopologyError {
    /// TOML encoding failed.
    #[error("encode topology: {0}")]
    Encode(#[from] toml::ser::Error),
    /// TOML decoding failed.
    #[error("decode topology: {0}")]
    Decode(#[from] toml::de::Error),
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// The schema version is not one this code reads.
    #[error("unsupported topology schema {0} (this code reads {SCHEMA_VERSION})")]
    Schema(u32),
}

impl Topology {
    /// Encode as TOML.
    pub fn to_toml(&self) -> Result<String, TopologyError> {
        Ok(toml::to_string(self)?)
    }

    /// Decode from TOML (checks the schema version).
    pub fn from_toml(text: &str) -> Result<Topology, TopologyError> {
        let t: Topology = toml::from_str(text)?;
        if t.schema != SCHEMA_VERSION {
            return Err(TopologyError::Schema(t.schema));
        }
        Ok(t)
    }

    /// Write as TOML to `path`.
    pub fn write_to(&self, path: &Path) -> Result<(), TopologyError> {
        std::fs::write(path, self.to_toml()?).map_err(|source| TopologyError::Io {
            path: path.display().to_string(),
            source,
        })
    }

    /// Read from a TOML file.
    pub fn read_from(path: &Path) -> Result<Topology, TopologyError> {
        let text = std::fs::read_to_string(path).map_err(|source| TopologyError::Io {
            path: path.display().to_string(),
            source,
        })?;
        Topology::from_toml(&text)
    }

    /// The link from `from` to `to`, by node name.
    pub fn link(&self, from: &str, to: &str) -> Option<&Link> {
        self.link.iter().find(|l| l.from == from && l.to == to)
    }
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

    fn sample() -> Topology {
        Topology {
            schema: SCHEMA_VERSION,
            prefix: "xl000001".into(),
            express_dscp: 46,
            express2_dscp: Some(40),
            express_rate_percent: 10,
            burst_ns: 50_000,
            node: vec![
                Node {
                    name: "h0".into(),
                    kind: NodeKind::Host,
                    netns: "xl000001-h0".into(),
                    addr: Some(Ipv4Addr::new(198, 18, 0, 1)),
                },
                Node {
                    name: "sw".into(),
                    kind: NodeKind::Switch,
                    netns: "xl000001-sw".into(),
                    addr: None,
                },
            ],
            link: vec![Link {
                from: "h0".into(),
                to: "sw".into(),
                device: "xl000001-h0".into(),
                bandwidth_bps: 1_000_000_000,
                express_queue_pkts: 64,
                best_effort_queue_pkts: 1000,
                min_latency_ns: 9000,
                max_jitter_ns: 4000,
                measured: true,
                min_includes_tx: false,
            }],
        }
    }

    #[test]
    fn toml_round_trip() {
        let t = sample();
        let text = t.to_toml().unwrap();
        assert!(
            text.contains("[[node]]") && text.contains("[[link]]"),
            "{text}"
        );
        assert!(text.contains("kind = \"switch\""), "{text}");
        assert_eq!(Topology::from_toml(&text).unwrap(), t);
        assert!(t.link("h0", "sw").is_some());
        assert!(t.link("sw", "h0").is_none());
    }

    #[test]
    fn wrong_schema_is_refused() {
        let mut t = sample();
        t.schema = 99;
        let text = t.to_toml().unwrap();
        assert!(matches!(
            Topology::from_toml(&text),
            Err(TopologyError::Schema(99))
        ));
        assert!(Topology::from_toml("schema = ").is_err());
    }

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
