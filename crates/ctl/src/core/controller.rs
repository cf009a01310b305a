//! The controller's state ([`Controller`] and its tunnel table), its
//! constructor and read-only accessors.

use super::outcome::Outcome;
use super::policy::Policy;
use crate::proto::{RefusalCode, TunnelId, TunnelInfo, TunnelState, UNBOUNDED_NS};
use std::collections::HashMap;
use xlane_te::alloc::Tunnel;
use xlane_te::{Allocator, Refusal, Resources, TeConfig, Topology};

/// Who sent a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Principal {
    /// Not (yet) authenticated.
    Anonymous,
    /// An authenticated host.
    Host(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum State {
    Active(xlane_te::TunnelId),
    Unbounded,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Entry {
    pub(super) owner: String,
    pub(super) receivers: Vec<String>,
    pub(super) sublane: u8,
    pub(super) load_bytes: u32,
    pub(super) requested_period_ns: u64,
    pub(super) resources: Resources,
    pub(super) hops: Vec<(String, String)>,
    pub(super) state: State,
    pub(super) exceed_streak: u32,
    pub(super) unused_streak: u32,
    pub(super) reclaim_pending: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Action {
    Install(TunnelId),
    Reclaim {
        tunnel: TunnelId,
        load_bytes: u32,
        period_ns: u64,
        old: Resources,
        announced: Resources,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Pending {
    pub(super) due_ns: u64,
    pub(super) action: Action,
}

/// A TE side effect: another tunnel's resources changed (the tunnel, its
/// resources before and now, its owner).
pub(super) type TeChange = (TunnelId, Resources, Resources, String);

/// Why an internal operation failed.
pub(super) enum OpError {
    Refused(Refusal),
    NoTunnel,
}

/// The controller state machine (see the [`crate::core`] docs).
#[derive(Debug, Clone)]
pub struct Controller {
    pub(super) alloc: Allocator,
    pub(super) policy: Policy,
    /// By id, hashed: a request updates each tunnel it changed (hundreds
    /// at 10⁵ tunnels); [`Controller::by_id`] lists them in order.
    pub(super) tunnels: HashMap<TunnelId, Entry>,
    pub(super) by_alloc: HashMap<xlane_te::TunnelId, TunnelId>,
    pub(super) next_id: u64,
    pub(super) pending: Vec<Pending>,
    /// Snapshot tunnels whose ranges are checked once the snapshot is
    /// replayed: (record index, tunnel, recorded resources).
    pub(super) deferred: Vec<(usize, TunnelId, Resources)>,
    /// The secret tunnel keys are derived from (`None`: no keys given).
    pub(super) key_secret: Option<xlane_auth::Key>,
}

pub(super) fn unbounded(r: Resources) -> Resources {
    Resources {
        max_jitter_ns: UNBOUNDED_NS,
        ..r
    }
}

pub(super) fn widened(old: &Resources, new: &Resources) -> bool {
    new.max_latency_ns() > old.max_latency_ns() || new.min_latency_ns < old.min_latency_ns
}

impl Controller {
    /// An empty controller over `topo`.
    pub fn new(topo: Topology, te: TeConfig, policy: Policy) -> Controller {
        Controller {
            alloc: Allocator::new(topo, te),
            policy,
            tunnels: HashMap::new(),
            by_alloc: HashMap::new(),
            next_id: 1,
            pending: Vec::new(),
            deferred: Vec::new(),
            key_secret: None,
        }
    }

    /// The secret each tunnel's MAC key is derived from (with the tunnel
    /// id): a host that sends or receives on a tunnel gets its key with
    /// `TunnelKey`. Keep it across restarts, or keys change.
    pub fn set_key_secret(&mut self, secret: xlane_auth::Key) {
        self.key_secret = Some(secret);
    }

    /// A tunnel's MAC key (with a key secret set).
    pub fn tunnel_key(&self, id: TunnelId) -> Option<xlane_auth::Key> {
        let s = self.key_secret.as_ref()?;
        Some(s.derive(&id.0.to_be_bytes()))
    }

    /// A refusal as the client sees it: allocator tunnel ids translated to
    /// the controller's.
    pub(super) fn public(&self, r: Refusal) -> Refusal {
        match r {
            Refusal::WouldInvalidate {
                tunnel,
                period_ns,
                required_ns,
            } => Refusal::WouldInvalidate {
                tunnel: xlane_te::TunnelId(self.by_alloc.get(&tunnel).map_or(0, |t| t.0)),
                period_ns,
                required_ns,
            },
            r => r,
        }
    }

    pub(super) fn refusal(&self, r: Refusal) -> Outcome {
        let r = self.public(r);
        Outcome::refused(RefusalCode::of(&r), r.to_string())
    }

    /// The allocator (read-only).
    pub fn allocator(&self) -> &Allocator {
        &self.alloc
    }

    /// The policy.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// The id the next granted tunnel gets.
    pub fn next_id(&self) -> TunnelId {
        TunnelId(self.next_id)
    }

    /// The allocator's tunnel behind an active controller tunnel.
    pub fn alloc_tunnel(&self, id: TunnelId) -> Option<&Tunnel> {
        match self.tunnels.get(&id)?.state {
            State::Active(a) => self.alloc.tunnel(a),
            State::Unbounded => None,
        }
    }

    /// The tunnels by increasing id.
    pub(super) fn by_id(&self) -> impl Iterator<Item = (TunnelId, &Entry)> {
        let mut all: Vec<(TunnelId, &Entry)> =
            self.tunnels.iter().map(|(&id, e)| (id, e)).collect();
        all.sort_unstable_by_key(|x| x.0);
        all.into_iter()
    }

    /// All tunnels, by increasing id.
    pub fn tunnels(&self) -> Vec<TunnelInfo> {
        self.by_id().map(|(id, e)| info(id, e)).collect()
    }

    /// One tunnel.
    pub fn tunnel(&self, id: TunnelId) -> Option<TunnelInfo> {
        self.tunnels.get(&id).map(|e| info(id, e))
    }
}

pub(super) fn info(id: TunnelId, e: &Entry) -> TunnelInfo {
    TunnelInfo {
        tunnel: id,
        sender: e.owner.clone(),
        receivers: e.receivers.clone(),
        sublane: e.sublane,
        state: match e.state {
            State::Active(_) => TunnelState::Active,
            State::Unbounded => TunnelState::Unbounded,
        },
        requested_period_ns: e.requested_period_ns,
        resources: e.resources,
    }
}
