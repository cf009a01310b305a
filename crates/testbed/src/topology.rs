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

// The measurement types, also reachable as `topology::*`.
pub use crate::measurement::{path_jitter, LinkMeasurement, MIN_MARGIN_PERCENT, OUTLIER_FACTOR};
use serde::{Deserialize, Serialize};
use std::net::Ipv4Addr;
use std::path::Path;

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
}
