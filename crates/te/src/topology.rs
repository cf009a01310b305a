//! The network graph `G` of X-Lane §3.1, read from the testbed's topology
//! export.
//!
//! # Input schema (TOML, `schema = 1`)
//!
//! The file written by `xlane testbed up --topology-out` (see the
//! `xlane-testbed` crate, module `topology`):
//!
//! ```toml
//! schema = 1
//! [[node]]
//! name = "h0"          # unique
//! kind = "host"        # "host" | "switch"
//! [[link]]             # one per direction
//! from = "h0"
//! to = "sw"
//! bandwidth_bps = 1000000000
//! express_queue_pkts = 64       # per express sub-lane
//! best_effort_queue_pkts = 1000 # optional, kept for information
//! min_latency_ns = 2339         # λmin of the hop (optional, default 0)
//! max_jitter_ns = 8581          # δmax of the hop (optional, default 0)
//! min_includes_tx = true        # optional, default true; see below
//! ```
//!
//! `min_includes_tx = false` marks a link emulated by a token-bucket shaper
//! (the testbed's HTB ports): a packet that finds tokens leaves at once, so
//! its transmission time is not part of the hop's minimum latency. It still
//! counts in the maximum (a packet behind others waits for their tokens).
//!
//! Other keys (`prefix`, `express_dscp`, `netns`, `addr`, `device`,
//! `measured`, …) are accepted and ignored.
//!
//! # Validation
//!
//! [`Topology::from_toml`] and [`Topology::new`] refuse, with a
//! [`TopologyError`] naming the offending entry: an unsupported or missing
//! schema version, a missing or negative field, a zero bandwidth, a duplicate
//! node name, an unknown node kind, a link naming an unknown node, a
//! self-loop, two links in the same direction between the same nodes, and a
//! pair of hosts `(a, b)` with no directed path from `a` to `b`.
//!
//! # Forwarding model
//!
//! Only switches forward: a path from host `a` to host `b` may pass through
//! switches only, never through a third host. Connectivity is checked with the
//! same rule, so every host pair accepted here has a usable path.

use serde::Deserialize;
use std::collections::HashMap;
use std::path::Path;

/// The topology schema version this crate reads.
pub const SCHEMA_VERSION: i64 = 1;

/// Index of a node in [`Topology::nodes`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NodeId(pub usize);

/// Index of a directed link in [`Topology::links`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LinkId(pub usize);

/// Whether a node is an endhost or a switch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NodeKind {
    /// An endhost: sends and receives, never forwards.
    Host,
    /// A switch: forwards.
    Switch,
}

/// A node of the graph.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    /// Unique name (`h0`, `sw`, …).
    pub name: String,
    /// Host or switch.
    pub kind: NodeKind,
}

/// One direction of a cable, with the per-link parameters of X-Lane §3.1.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    /// Sending node (owner of the egress queue).
    pub from: NodeId,
    /// Receiving node.
    pub to: NodeId,
    /// `bw(u, v)`, bits per second (> 0).
    pub bandwidth_bps: u64,
    /// `qlen(u, v)`: length of each express sub-lane's egress queue, packets.
    pub express_queue_pkts: u32,
    /// Length of the best-effort egress queue, packets (informational).
    pub best_effort_queue_pkts: u32,
    /// `λmin(u, v)`: minimum processing + propagation delay, ns.
    pub min_latency_ns: u64,
    /// `δmax(u, v)`: maximum jitter on top of `λmin`, ns.
    pub max_jitter_ns: u64,
    /// Whether a packet's transmission time adds to the hop's minimum
    /// (false for token-bucket–emulated links, see the module docs).
    pub min_includes_tx: bool,
}

/// A link given by node names, the input of [`Topology::new`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkSpec {
    /// Sending node name.
    pub from: String,
    /// Receiving node name.
    pub to: String,
    /// Bandwidth, bits per second.
    pub bandwidth_bps: u64,
    /// Express queue length (per sub-lane), packets.
    pub express_queue_pkts: u32,
    /// Best-effort queue length, packets.
    pub best_effort_queue_pkts: u32,
    /// λmin, ns.
    pub min_latency_ns: u64,
    /// δmax, ns.
    pub max_jitter_ns: u64,
    /// Whether transmission time adds to the minimum (see [`Link`]).
    pub min_includes_tx: bool,
}

/// Why a topology was refused.
#[derive(Debug, thiserror::Error)]
pub enum TopologyError {
    /// The file could not be read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// The text is not TOML of the expected shape.
    #[error("topology TOML: {0}")]
    Toml(#[from] toml::de::Error),
    /// The top-level `schema` key is absent.
    #[error("topology has no `schema` key (expected schema = {SCHEMA_VERSION})")]
    MissingSchema,
    /// The schema version is not one this code reads.
    #[error("unsupported topology schema {0} (this code reads {SCHEMA_VERSION})")]
    UnsupportedSchema(i64),
    /// A required field is missing.
    #[error("{entry}: missing field `{field}`")]
    MissingField {
        /// The entry, e.g. `link #2 (h1 -> sw)`.
        entry: String,
        /// The field.
        field: &'static str,
    },
    /// A numeric field is negative or too large.
    #[error("{entry}: field `{field}` = {value} is out of range")]
    OutOfRange {
        /// The entry.
        entry: String,
        /// The field.
        field: &'static str,
        /// The value read.
        value: i64,
    },
    /// A link has zero bandwidth.
    #[error("{entry}: bandwidth_bps must be > 0")]
    ZeroBandwidth {
        /// The entry.
        entry: String,
    },
    /// Two nodes have the same name.
    #[error("duplicate node `{0}`")]
    DuplicateNode(String),
    /// A node kind other than `host` or `switch`.
    #[error("node `{node}`: unknown kind `{kind}` (expected \"host\" or \"switch\")")]
    UnknownKind {
        /// The node.
        node: String,
        /// The kind read.
        kind: String,
    },
    /// A link names a node that does not exist.
    #[error("{entry}: unknown node `{name}`")]
    UnknownNode {
        /// The entry.
        entry: String,
        /// The missing node name.
        name: String,
    },
    /// A link from a node to itself.
    #[error("{entry}: self-loop")]
    SelfLoop {
        /// The entry.
        entry: String,
    },
    /// Two links with the same direction between the same nodes.
    #[error("{entry}: duplicate of an earlier link {from} -> {to}")]
    DuplicateLink {
        /// The entry.
        entry: String,
        /// Sending node.
        from: String,
        /// Receiving node.
        to: String,
    },
    /// A host cannot reach another host (through switches only).
    #[error("host `{from}` has no path to host `{to}` (paths may only cross switches)")]
    Disconnected {
        /// Sending host.
        from: String,
        /// Unreachable host.
        to: String,
    },
}

/// The validated network graph.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Topology {
    nodes: Vec<Node>,
    links: Vec<Link>,
    out: Vec<Vec<LinkId>>,
    by_name: HashMap<String, NodeId>,
    /// How many nodes are hosts.
    host_count: usize,
}

#[derive(Deserialize)]
struct RawTopology {
    schema: Option<i64>,
    #[serde(default)]
    node: Vec<RawNode>,
    #[serde(default)]
    link: Vec<RawLink>,
}

#[derive(Deserialize)]
struct RawNode {
    name: Option<String>,
    kind: Option<String>,
}

#[derive(Deserialize)]
struct RawLink {
    from: Option<String>,
    to: Option<String>,
    bandwidth_bps: Option<i64>,
    express_queue_pkts: Option<i64>,
    best_effort_queue_pkts: Option<i64>,
    min_latency_ns: Option<i64>,
    max_jitter_ns: Option<i64>,
    min_includes_tx: Option<bool>,
}

fn link_entry(i: usize, from: &str, to: &str) -> String {
    format!("link #{i} ({from} -> {to})")
}

fn non_negative(entry: &str, field: &'static str, v: i64) -> Result<u64, TopologyError> {
    u64::try_from(v).map_err(|_| TopologyError::OutOfRange {
        entry: entry.to_string(),
        field,
        value: v,
    })
}

fn small(entry: &str, field: &'static str, v: i64) -> Result<u32, TopologyError> {
    u32::try_from(v).map_err(|_| TopologyError::OutOfRange {
        entry: entry.to_string(),
        field,
        value: v,
    })
}

impl Topology {
    /// Parse and validate the testbed's TOML export.
    pub fn from_toml(text: &str) -> Result<Topology, TopologyError> {
        let raw: RawTopology = toml::from_str(text)?;
        match raw.schema {
            None => return Err(TopologyError::MissingSchema),
            Some(SCHEMA_VERSION) => {}
            Some(v) => return Err(TopologyError::UnsupportedSchema(v)),
        }
        let mut nodes = Vec::with_capacity(raw.node.len());
        for (i, n) in raw.node.into_iter().enumerate() {
            let name = n.name.ok_or_else(|| TopologyError::MissingField {
                entry: format!("node #{i}"),
                field: "name",
            })?;
            let kind = match n.kind.as_deref() {
                Some("host") => NodeKind::Host,
                Some("switch") => NodeKind::Switch,
                Some(other) => {
                    return Err(TopologyError::UnknownKind {
                        node: name,
                        kind: other.to_string(),
                    })
                }
                None => {
                    return Err(TopologyError::MissingField {
                        entry: format!("node #{i} ({name})"),
                        field: "kind",
                    })
                }
            };
            nodes.push(Node { name, kind });
        }
        let mut links = Vec::with_capacity(raw.link.len());
        for (i, l) in raw.link.into_iter().enumerate() {
            let from = l.from.ok_or_else(|| TopologyError::MissingField {
                entry: format!("link #{i}"),
                field: "from",
            })?;
            let to = l.to.ok_or_else(|| TopologyError::MissingField {
                entry: format!("link #{i} (from {from})"),
                field: "to",
            })?;
            let entry = link_entry(i, &from, &to);
            let bw = l.bandwidth_bps.ok_or_else(|| TopologyError::MissingField {
                entry: entry.clone(),
                field: "bandwidth_bps",
            })?;
            let q = l
                .express_queue_pkts
                .ok_or_else(|| TopologyError::MissingField {
                    entry: entry.clone(),
                    field: "express_queue_pkts",
                })?;
            links.push(LinkSpec {
                bandwidth_bps: non_negative(&entry, "bandwidth_bps", bw)?,
                express_queue_pkts: small(&entry, "express_queue_pkts", q)?,
                best_effort_queue_pkts: small(
                    &entry,
                    "best_effort_queue_pkts",
                    l.best_effort_queue_pkts.unwrap_or(0),
                )?,
                min_latency_ns: non_negative(
                    &entry,
                    "min_latency_ns",
                    l.min_latency_ns.unwrap_or(0),
                )?,
                max_jitter_ns: non_negative(&entry, "max_jitter_ns", l.max_jitter_ns.unwrap_or(0))?,
                min_includes_tx: l.min_includes_tx.unwrap_or(true),
                from,
                to,
            });
        }
        Topology::new(nodes, links)
    }

    /// Read a file and parse it with [`Topology::from_toml`]. The only I/O of
    /// this crate.
    pub fn from_file(path: &Path) -> Result<Topology, TopologyError> {
        let text = std::fs::read_to_string(path).map_err(|source| TopologyError::Io {
            path: path.display().to_string(),
            source,
        })?;
        Topology::from_toml(&text)
    }

    /// Build and validate a topology from nodes and links given by name.
    pub fn new(nodes: Vec<Node>, links: Vec<LinkSpec>) -> Result<Topology, TopologyError> {
        let mut by_name = HashMap::with_capacity(nodes.len());
        for (i, n) in nodes.iter().enumerate() {
            if by_name.insert(n.name.clone(), NodeId(i)).is_some() {
                return Err(TopologyError::DuplicateNode(n.name.clone()));
            }
        }
        let mut out = vec![Vec::new(); nodes.len()];
        let mut seen = HashMap::new();
        let mut resolved = Vec::with_capacity(links.len());
        for (i, l) in links.into_iter().enumerate() {
            let entry = link_entry(i, &l.from, &l.to);
            let lookup = |name: &str| {
                by_name
                    .get(name)
                    .copied()
                    .ok_or_else(|| TopologyError::UnknownNode {
                        entry: entry.clone(),
                        name: name.to_string(),
                    })
            };
            let from = lookup(&l.from)?;
            let to = lookup(&l.to)?;
            if from == to {
                return Err(TopologyError::SelfLoop { entry });
            }
            if l.bandwidth_bps == 0 {
                return Err(TopologyError::ZeroBandwidth { entry });
            }
            if seen.insert((from, to), i).is_some() {
                return Err(TopologyError::DuplicateLink {
                    entry,
                    from: l.from,
                    to: l.to,
                });
            }
            out[from.0].push(LinkId(i));
            resolved.push(Link {
                from,
                to,
                bandwidth_bps: l.bandwidth_bps,
                express_queue_pkts: l.express_queue_pkts,
                best_effort_queue_pkts: l.best_effort_queue_pkts,
                min_latency_ns: l.min_latency_ns,
                max_jitter_ns: l.max_jitter_ns,
                min_includes_tx: l.min_includes_tx,
            });
        }
        let host_count = nodes.iter().filter(|n| n.kind == NodeKind::Host).count();
        let t = Topology {
            nodes,
            links: resolved,
            out,
            by_name,
            host_count,
        };
        t.check_connected()?;
        Ok(t)
    }

    /// Every host reaches every other through switches only. Hosts with the
    /// same next hops reach the same nodes, so one search per set of next
    /// hops (a rack's hosts share their top-of-rack switch) covers them all.
    fn check_connected(&self) -> Result<(), TopologyError> {
        let mut by_hops: HashMap<Vec<NodeId>, Vec<bool>> = HashMap::new();
        for a in self.hosts() {
            let mut hops: Vec<NodeId> = self.out[a.0].iter().map(|l| self.links[l.0].to).collect();
            hops.sort();
            hops.dedup();
            let reach = by_hops
                .entry(hops)
                .or_insert_with_key(|hops| self.reachable_through(hops));
            for b in self.hosts() {
                if a != b && !reach[b.0] {
                    return Err(TopologyError::Disconnected {
                        from: self.nodes[a.0].name.clone(),
                        to: self.nodes[b.0].name.clone(),
                    });
                }
            }
        }
        Ok(())
    }

    /// Nodes reachable from the next hops `start` of a host by paths whose
    /// intermediate nodes are switches (the hops themselves included).
    fn reachable_through(&self, start: &[NodeId]) -> Vec<bool> {
        let mut seen = vec![false; self.nodes.len()];
        let mut stack = Vec::new();
        for &s in start {
            seen[s.0] = true;
            stack.push(s);
        }
        while let Some(u) = stack.pop() {
            if self.nodes[u.0].kind == NodeKind::Host {
                continue;
            }
            for &l in &self.out[u.0] {
                let v = self.links[l.0].to;
                if !seen[v.0] {
                    seen[v.0] = true;
                    stack.push(v);
                }
            }
        }
        seen
    }

    /// All nodes, indexed by [`NodeId`].
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    /// All directed links, indexed by [`LinkId`].
    pub fn links(&self) -> &[Link] {
        &self.links
    }

    /// The node with this id (panics on an id not from this topology).
    pub fn node(&self, id: NodeId) -> &Node {
        &self.nodes[id.0]
    }

    /// The link with this id (panics on an id not from this topology).
    pub fn link(&self, id: LinkId) -> &Link {
        &self.links[id.0]
    }

    /// The node named `name`.
    pub fn node_id(&self, name: &str) -> Option<NodeId> {
        self.by_name.get(name).copied()
    }

    /// The link `from -> to`, by node names.
    pub fn link_between(&self, from: &str, to: &str) -> Option<LinkId> {
        let f = self.node_id(from)?;
        let t = self.node_id(to)?;
        self.out[f.0]
            .iter()
            .copied()
            .find(|l| self.links[l.0].to == t)
    }

    /// Links leaving `node`.
    pub fn out_links(&self, node: NodeId) -> &[LinkId] {
        &self.out[node.0]
    }

    /// Host ids, in file order.
    pub fn hosts(&self) -> impl Iterator<Item = NodeId> + '_ {
        self.nodes
            .iter()
            .enumerate()
            .filter(|(_, n)| n.kind == NodeKind::Host)
            .map(|(i, _)| NodeId(i))
    }

    /// How many hosts there are (without counting them).
    pub fn host_count(&self) -> usize {
        self.host_count
    }

    /// `"h0 -> sw"` for a link, for messages.
    pub fn describe_link(&self, id: LinkId) -> String {
        let l = &self.links[id.0];
        format!(
            "{} -> {}",
            self.nodes[l.from.0].name, self.nodes[l.to.0].name
        )
    }
}
