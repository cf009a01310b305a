//! What the controller asks of the network, and how the daemon asks it.
//!
//! The sans-IO core ([`crate::core`]) emits [`FabricOp`]s; the daemon hands
//! each to a [`Fabric`], which programs switches and hosts (rate limiters,
//! express queues, meters) and reads the switches' meters back. The testbed
//! implements [`Fabric`] for its emulated switch; [`NoFabric`] does nothing
//! and [`RecordingFabric`] records operations and plays back scripted meter
//! readings for tests.

use crate::proto::TunnelId;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

/// A change to program into the network.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FabricOp {
    /// Install or update a tunnel: the sender's rate limiter, the express
    /// classification on every hop and a meter. Idempotent: installing an
    /// installed tunnel replaces its parameters.
    Install {
        /// The tunnel.
        tunnel: TunnelId,
        /// Sending host.
        sender: String,
        /// Receiving hosts.
        receivers: Vec<String>,
        /// The tree's directed links `(from, to)`, by node name; empty for
        /// an unbounded tunnel (in [`crate::core::Controller::resync`],
        /// followed by its `Demote`).
        hops: Vec<(String, String)>,
        /// Express sub-lane (0 = highest priority).
        sublane: u8,
        /// `σ`, bytes.
        load_bytes: u32,
        /// Granted period, ns.
        period_ns: u64,
        /// Rate limit, bit/s: `⌈8·σ·10⁹/π⌉`.
        rate_bps: u64,
        /// Token-bucket depth of the rate limiter, bytes: one packet (`σ`).
        burst_bytes: u32,
        /// Packets of this tunnel that may wait at one hop: one (assumption 2
        /// of the delay model in `xlane_te::alloc`).
        queue_pkts: u32,
    },
    /// Take the tunnel's packets out of the express lane (best effort, no
    /// bounds) but keep metering it.
    Demote {
        /// The tunnel.
        tunnel: TunnelId,
    },
    /// Remove every trace of the tunnel.
    Remove {
        /// The tunnel.
        tunnel: TunnelId,
    },
}

impl FabricOp {
    /// The tunnel the operation is about.
    pub fn tunnel(&self) -> TunnelId {
        match self {
            FabricOp::Install { tunnel, .. }
            | FabricOp::Demote { tunnel }
            | FabricOp::Remove { tunnel } => *tunnel,
        }
    }
}

/// One interval of a tunnel's traffic as metered by a switch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SwitchMeter {
    /// The tunnel.
    pub tunnel: TunnelId,
    /// Packets seen.
    pub packets: u64,
    /// Bytes seen.
    pub bytes: u64,
    /// Packets dropped by the tunnel's rate limiter or meter (any drop means
    /// the tunnel exceeded its allocation).
    pub dropped_packets: u64,
    /// Length of the interval, ns.
    pub interval_ns: u64,
}

/// Why the fabric could not do something.
#[derive(Debug, thiserror::Error)]
pub enum FabricError {
    /// A device or command failed.
    #[error("fabric: {0}")]
    Failed(String),
    /// An I/O error.
    #[error("fabric I/O: {0}")]
    Io(#[from] std::io::Error),
}

/// The IP multicast group on which a fabric delivers the frames of
/// multicast tunnel `id` to its receivers: `239.78.x.y` from the id's low
/// 16 bits. A sender replicated by the network sends each frame once, to
/// this group; its receivers join it.
pub fn group_of(id: u64) -> std::net::Ipv4Addr {
    std::net::Ipv4Addr::new(239, 78, (id >> 8) as u8, id as u8)
}

/// The network, as the daemon programs it.
pub trait Fabric: Send {
    /// Carry out one operation.
    fn apply(&mut self, op: &FabricOp) -> Result<(), FabricError>;
    /// Meter readings since the last call (one interval per reading).
    fn meters(&mut self) -> Result<Vec<SwitchMeter>, FabricError>;
}

/// A fabric that does nothing and meters nothing.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoFabric;

impl Fabric for NoFabric {
    fn apply(&mut self, _op: &FabricOp) -> Result<(), FabricError> {
        Ok(())
    }
    fn meters(&mut self) -> Result<Vec<SwitchMeter>, FabricError> {
        Ok(Vec::new())
    }
}

/// Shared state of a [`RecordingFabric`] (clone the handle to inspect it
/// while the daemon owns the fabric).
#[derive(Debug, Default)]
pub struct Recording {
    /// Every applied operation, in order.
    pub ops: Vec<FabricOp>,
    /// Meter batches to return, one per [`Fabric::meters`] call.
    pub meters: VecDeque<Vec<SwitchMeter>>,
    /// If set, the next `apply` fails with this message.
    pub fail_next: Option<String>,
}

/// A fabric that records operations and returns scripted meters.
#[derive(Debug, Clone, Default)]
pub struct RecordingFabric {
    /// The shared recording.
    pub state: Arc<Mutex<Recording>>,
}

impl RecordingFabric {
    /// A new, empty recording.
    pub fn new() -> RecordingFabric {
        RecordingFabric::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Recording> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The operations applied so far.
    pub fn ops(&self) -> Vec<FabricOp> {
        self.lock().ops.clone()
    }

    /// Queue a batch of meter readings for the next [`Fabric::meters`].
    pub fn push_meters(&self, m: Vec<SwitchMeter>) {
        self.lock().meters.push_back(m);
    }
}

impl Fabric for RecordingFabric {
    fn apply(&mut self, op: &FabricOp) -> Result<(), FabricError> {
        let mut s = self.lock();
        if let Some(m) = s.fail_next.take() {
            return Err(FabricError::Failed(m));
        }
        s.ops.push(op.clone());
        Ok(())
    }
    fn meters(&mut self) -> Result<Vec<SwitchMeter>, FabricError> {
        Ok(self.lock().meters.pop_front().unwrap_or_default())
    }
}
