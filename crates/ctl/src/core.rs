//! The controller's state machine, sans-IO: requests, meter readings and
//! time go in; replies, upcalls, fabric operations and journal records come
//! out.
//!
//! # Calls
//!
//! - [`Controller::handle`]`(principal, request, now_ns)` for every request
//!   of an authenticated connection;
//! - [`Controller::on_switch_meters`]`(meters, now_ns)` with the fabric's
//!   readings, and [`Controller::tick`]`(now_ns)` periodically (grace periods
//!   end there);
//! - [`Controller::reconcile_host`] when a host comes back;
//! - [`Controller::recover`] / [`Controller::apply_record`] to rebuild the
//!   state from the journal, [`Controller::compaction_records`] to write a
//!   snapshot, [`Controller::resync`] to reprogram the fabric after a
//!   restart.
//!
//! Each returns an [`Outcome`]. The caller must persist
//! [`Outcome::records`] (see [`crate::store`]) before it sends the reply,
//! applies [`Outcome::fabric`] or delivers [`Outcome::upcalls`]; if it cannot,
//! it restores a clone of the controller taken before the call (the daemon
//! does this), so that what clients are told is always what a restart
//! recovers. `now_ns` is any monotonic clock; it is never persisted.
//!
//! # Authorization and validation
//!
//! Without an authenticated principal every request is `Unauthenticated`.
//! A host requests tunnels only with itself as sender and releases,
//! changes, meters and reconciles only its own tunnels (`Forbidden`);
//! unknown tunnels are `UnknownTunnel`; receivers beyond the topology's
//! host count or meter intervals of 0 or above [`MAX_INTERVAL_NS`] are
//! `OutOfRange`; every allocator refusal ([`xlane_te::Refusal`]: load 0 or
//! above the MTU, period 0/too small/too large, unknown or switch host
//! names, sub-lane beyond the configuration, no capacity) keeps its own
//! code. A refused request changes nothing and produces no record.
//!
//! # Monitoring policy ([`Policy`])
//!
//! Each meter reading (from a host's `ReportMeters` or the fabric) is one
//! interval of one tunnel and is classified by [`classify`]:
//!
//! - **exceeded**: more packets than `⌊interval/π⌋ + 1` (one of phase slack)
//!   by more than the tolerance, a packet larger than `σ` on average, or any
//!   switch drop. An active tunnel is **demoted** at once: unbounded,
//!   [`FabricOp::Demote`], its allocation released (the tunnels that shared
//!   its queues get `BandwidthChanged{Te}` with their shrunk ranges), and
//!   its owner gets `BandwidthChanged{BwExceeded}` whose `new` has
//!   `max_jitter_ns == UNBOUNDED_NS`. An unbounded tunnel that exceeds in
//!   [`Policy::terminate_after`] consecutive further intervals is
//!   **terminated** (`BandwidthTerminated{BwExceeded}`); a compliant
//!   interval resets the count. The owner recovers with `ChangeBandwidth`,
//!   which re-admits the tunnel like a new request (same id).
//! - **unused**: less than [`Policy::unused_permille`] of `σ·interval/π`
//!   (intervals shorter than `π` never count). After
//!   [`Policy::unused_intervals`] consecutive such intervals the period is
//!   raised by [`Policy::reclaim_factor`] (capped at the allocator's
//!   maximum): the owner gets `BandwidthChanged{BwUnused, grace_ns}` at
//!   once, the old resources stay allocated and installed until the grace
//!   period ends, then the allocator change is made and journaled and the
//!   new rate installed (in [`Controller::tick`]). A tunnel already at the
//!   maximum period that stays unused is terminated
//!   (`BandwidthTerminated{BwUnused}`). A reclaim whose tunnel the owner
//!   changed or released during the grace period is dropped. Pending
//!   reclaims are not journaled: after a restart the tunnel keeps its old,
//!   larger allocation (safe), and monitoring starts over.
//!
//! # TE upcalls and grace
//!
//! Every tunnel whose resources an operation changed gets
//! `BandwidthChanged{Te}`. If an operation widened someone's range and
//! [`Policy::te_grace_ns`] > 0, the new or changed tunnel's
//! [`FabricOp::Install`] is held back for that grace period (the others'
//! old guarantees hold until then), and the upcalls carry it; upcalls that
//! only narrow a range carry `grace_ns = 0` (the old, wider range stays
//! true).

use crate::fabric::{FabricOp, SwitchMeter};
use crate::proto::{
    ClientMsg, MeterReading, Reason, RefusalCode, ServerMsg, TerminateReason, TunnelId, TunnelInfo,
    TunnelState, Upcall, MAX_FRAME, UNBOUNDED_NS,
};
use crate::store::Record;
use std::collections::HashMap;
use xlane_te::alloc::{rate_bps, ChangeError, Tunnel};
use xlane_te::{Allocator, Refusal, Request, Resources, TeConfig, Topology};

/// Longest meter interval accepted, ns (one hour).
pub const MAX_INTERVAL_NS: u64 = 3_600_000_000_000;

/// Who sent a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Principal {
    /// Not (yet) authenticated.
    Anonymous,
    /// An authenticated host.
    Host(String),
}

/// Monitoring and grace parameters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    /// Tolerance over the allocation before a tunnel counts as exceeding,
    /// ‰. Default 100 (10 %).
    pub exceed_tolerance_permille: u32,
    /// `K`: consecutive exceeding intervals of an unbounded tunnel before it
    /// is terminated. Default 3.
    pub terminate_after: u32,
    /// Below this share of its allocation an interval counts as unused, ‰.
    /// Default 250 (25 %).
    pub unused_permille: u32,
    /// `M`: consecutive unused intervals before the period is raised.
    /// Default 5.
    pub unused_intervals: u32,
    /// Factor the period is multiplied by on a reclaim (≥ 2). Default 2.
    pub reclaim_factor: u32,
    /// Grace period of `BandwidthChanged{BwUnused}`, ns. Default 1 s.
    pub grace_ns: u64,
    /// Grace period of `BandwidthChanged{Te}` that widens a range, ns.
    /// Default 10 ms.
    pub te_grace_ns: u64,
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            exceed_tolerance_permille: 100,
            terminate_after: 3,
            unused_permille: 250,
            unused_intervals: 5,
            reclaim_factor: 2,
            grace_ns: 1_000_000_000,
            te_grace_ns: 10_000_000,
        }
    }
}

/// One interval of a tunnel's traffic, from a host or a switch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Observation {
    /// Packets.
    pub packets: u64,
    /// Bytes.
    pub bytes: u64,
    /// Interval, ns.
    pub interval_ns: u64,
    /// Packets dropped by a limiter (switch meters only).
    pub dropped_packets: u64,
}

impl From<&MeterReading> for Observation {
    fn from(r: &MeterReading) -> Self {
        Observation {
            packets: r.packets,
            bytes: r.bytes,
            interval_ns: r.interval_ns,
            dropped_packets: 0,
        }
    }
}

impl From<&SwitchMeter> for Observation {
    fn from(m: &SwitchMeter) -> Self {
        Observation {
            packets: m.packets,
            bytes: m.bytes,
            interval_ns: m.interval_ns,
            dropped_packets: m.dropped_packets,
        }
    }
}

/// How one interval compares with an allocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Usage {
    /// Over the allocation (see the module docs).
    Exceeded,
    /// Within it.
    Normal,
    /// Well under it.
    Unused,
}

/// Classify one interval of a tunnel with load `load_bytes` and period
/// `period_ns` (pure; the monitoring policy's only arithmetic).
pub fn classify(policy: &Policy, load_bytes: u32, period_ns: u64, o: &Observation) -> Usage {
    if o.dropped_packets > 0 {
        return Usage::Exceeded;
    }
    if o.interval_ns == 0 || period_ns == 0 {
        return Usage::Normal;
    }
    let load = load_bytes as u128;
    let period = period_ns as u128;
    let interval = o.interval_ns as u128;
    if o.bytes as u128 > o.packets as u128 * load {
        return Usage::Exceeded;
    }
    // packets ≤ (interval/π + 1)·(1 + tol)  ⇔  packets·π·1000 ≤ (interval + π)·(1000 + tol)
    let tol = 1000 + policy.exceed_tolerance_permille as u128;
    if o.packets as u128 * period * 1000 > (interval + period) * tol {
        return Usage::Exceeded;
    }
    // bytes < σ·interval/π · unused‰  ⇔  bytes·π·1000 < σ·interval·unused
    if interval >= period
        && (o.bytes as u128) * period * 1000 < load * interval * policy.unused_permille as u128
    {
        return Usage::Unused;
    }
    Usage::Normal
}

/// Everything one call produced.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Outcome {
    /// The answer to the request (`None` for ticks and fabric meters).
    pub reply: Option<ServerMsg>,
    /// Upcalls, each to the owning host.
    pub upcalls: Vec<(String, Upcall)>,
    /// Fabric operations, in order.
    pub fabric: Vec<FabricOp>,
    /// Journal records, in order (persist before anything else).
    pub records: Vec<Record>,
}

impl Outcome {
    fn refused(code: RefusalCode, message: impl Into<String>) -> Outcome {
        Outcome {
            reply: Some(ServerMsg::Refused {
                code,
                message: message.into(),
            }),
            ..Outcome::default()
        }
    }
}

/// Why a journal record could not be replayed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReplayError {
    /// The allocator answered differently than when the record was written
    /// (a different topology, configuration or allocator version).
    #[error("record #{index}: {tunnel} was granted {expected:?} but replay gives {got:?}")]
    Diverged {
        /// Record index.
        index: usize,
        /// The tunnel.
        tunnel: TunnelId,
        /// Resources in the record.
        expected: Resources,
        /// Resources on replay.
        got: Resources,
    },
    /// The allocator refused what it once granted.
    #[error("record #{index}: {tunnel} refused on replay: {refusal}")]
    Refused {
        /// Record index.
        index: usize,
        /// The tunnel.
        tunnel: TunnelId,
        /// Why.
        refusal: Refusal,
    },
    /// The record names a tunnel that does not exist (or is in the wrong
    /// state for it).
    #[error("record #{index}: {tunnel} does not exist or is not {expected}")]
    BadTunnel {
        /// Record index.
        index: usize,
        /// The tunnel.
        tunnel: TunnelId,
        /// The state the record needs.
        expected: &'static str,
    },
    /// The record reuses an id.
    #[error("record #{index}: {tunnel} id is already used")]
    DuplicateId {
        /// Record index.
        index: usize,
        /// The tunnel.
        tunnel: TunnelId,
    },
    /// The rebuilt allocation fails the allocator's invariants.
    #[error("rebuilt allocation is invalid: {0}")]
    Invalid(String),
}

/// Why no compacted snapshot could be produced.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CompactError {
    /// Replaying only the live tunnels does not reproduce the current state
    /// exactly (history matters for this allocation): keep the journal.
    #[error("the live tunnels alone do not reproduce the state: {0}")]
    NotReproducible(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum State {
    Active(xlane_te::TunnelId),
    Unbounded,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    owner: String,
    receivers: Vec<String>,
    sublane: u8,
    load_bytes: u32,
    requested_period_ns: u64,
    resources: Resources,
    hops: Vec<(String, String)>,
    state: State,
    exceed_streak: u32,
    unused_streak: u32,
    reclaim_pending: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Action {
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
struct Pending {
    due_ns: u64,
    action: Action,
}

/// A TE side effect: another tunnel's resources changed (the tunnel, its
/// resources before and now, its owner).
type TeChange = (TunnelId, Resources, Resources, String);

/// Why an internal operation failed.
enum OpError {
    Refused(Refusal),
    NoTunnel,
}

/// The controller state machine (see the module docs).
#[derive(Debug, Clone)]
pub struct Controller {
    alloc: Allocator,
    policy: Policy,
    /// By id, hashed: a request updates each tunnel it changed (hundreds
    /// at 10⁵ tunnels); [`Controller::by_id`] lists them in order.
    tunnels: HashMap<TunnelId, Entry>,
    by_alloc: HashMap<xlane_te::TunnelId, TunnelId>,
    next_id: u64,
    pending: Vec<Pending>,
    /// Snapshot tunnels whose ranges are checked once the snapshot is
    /// replayed: (record index, tunnel, recorded resources).
    deferred: Vec<(usize, TunnelId, Resources)>,
    /// The secret tunnel keys are derived from (`None`: no keys given).
    key_secret: Option<xlane_auth::Key>,
}

fn unbounded(r: Resources) -> Resources {
    Resources {
        max_jitter_ns: UNBOUNDED_NS,
        ..r
    }
}

fn widened(old: &Resources, new: &Resources) -> bool {
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

    fn key_of(&self, host: &str, id: TunnelId) -> Outcome {
        let Some(e) = self.tunnels.get(&id) else {
            return Outcome::refused(RefusalCode::UnknownTunnel, format!("{id} does not exist"));
        };
        if e.owner != host && !e.receivers.iter().any(|r| r == host) {
            return Outcome::refused(
                RefusalCode::Forbidden,
                format!("host `{host}` neither sends nor receives on {id}"),
            );
        }
        match self.tunnel_key(id) {
            Some(k) => Outcome {
                reply: Some(ServerMsg::Key {
                    tunnel: id,
                    key: *k.bytes(),
                }),
                ..Outcome::default()
            },
            None => Outcome::refused(
                RefusalCode::Internal,
                "this controller hands out no tunnel keys (no key secret)",
            ),
        }
    }

    /// Rebuild the state from journal records (snapshot first), checking
    /// every grant against the resources recorded, then the allocator's
    /// invariants.
    pub fn recover(
        topo: Topology,
        te: TeConfig,
        policy: Policy,
        records: &[Record],
    ) -> Result<Controller, ReplayError> {
        let mut c = Controller::new(topo, te, policy);
        // Every record was once admitted: grants need not re-walk the
        // tunnels they share links with; ranges are settled when checked
        // and at the end, and the whole allocation verified.
        c.alloc.defer_others();
        for (i, r) in records.iter().enumerate() {
            if !matches!(r, Record::Tunnel { .. } | Record::NextId { .. }) {
                c.check_deferred()?;
                c.alloc.defer_others();
            }
            c.apply_record(i, r)?;
        }
        c.settle();
        c.check_deferred()?;
        c.alloc
            .verify()
            .map_err(|e| ReplayError::Invalid(e.to_string()))?;
        Ok(c)
    }

    /// Every active tunnel's resources from the allocator, its ranges
    /// recomputed (after a replay that deferred them).
    fn settle(&mut self) {
        self.alloc.settle();
        for e in self.tunnels.values_mut() {
            if let State::Active(a) = e.state {
                if let Some(t) = self.alloc.tunnel(a) {
                    e.resources = t.resources();
                }
            }
        }
    }

    /// A refusal as the client sees it: allocator tunnel ids translated to
    /// the controller's.
    fn public(&self, r: Refusal) -> Refusal {
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

    fn refusal(&self, r: Refusal) -> Outcome {
        let r = self.public(r);
        Outcome::refused(RefusalCode::of(&r), r.to_string())
    }

    /// Check the ranges of the snapshot tunnels replayed so far (they are
    /// only final once every snapshot tunnel is in), settling every range
    /// first if there are any.
    fn check_deferred(&mut self) -> Result<(), ReplayError> {
        if self.deferred.is_empty() {
            return Ok(());
        }
        self.settle();
        for (index, tunnel, expected) in std::mem::take(&mut self.deferred) {
            let got =
                self.tunnels
                    .get(&tunnel)
                    .map(|e| e.resources)
                    .ok_or(ReplayError::BadTunnel {
                        index,
                        tunnel,
                        expected: "a tunnel",
                    })?;
            if got != expected {
                return Err(ReplayError::Diverged {
                    index,
                    tunnel,
                    expected,
                    got,
                });
            }
        }
        Ok(())
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
    fn by_id(&self) -> impl Iterator<Item = (TunnelId, &Entry)> {
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

    // -- operations shared by the live path and replay ---------------------

    fn te_changes(&mut self, changed: &[xlane_te::Changed]) -> Vec<TeChange> {
        let mut out = Vec::new();
        for c in changed {
            if let Some(&id) = self.by_alloc.get(&c.tunnel) {
                if let Some(e) = self.tunnels.get_mut(&id) {
                    e.resources = c.new;
                    out.push((id, c.old, c.new, e.owner.clone()));
                }
            }
        }
        out.sort_by_key(|c| c.0);
        out
    }

    fn hops_of(&self, a: xlane_te::TunnelId) -> Vec<(String, String)> {
        let topo = self.alloc.topology();
        self.alloc
            .tunnel(a)
            .map(|t| {
                t.links
                    .iter()
                    .map(|&l| {
                        let link = topo.link(l);
                        (
                            topo.node(link.from).name.clone(),
                            topo.node(link.to).name.clone(),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// [`Controller::op_grant`] during replay: a refusal is a replay error
    /// at record `index`.
    #[allow(clippy::too_many_arguments)]
    fn replay_grant(
        &mut self,
        index: usize,
        tunnel: TunnelId,
        sender: &str,
        receivers: &[String],
        load_bytes: u32,
        period_ns: u64,
        sublane: u8,
        hops: &[(String, String)],
    ) -> Result<Resources, ReplayError> {
        match self.op_grant(
            tunnel, sender, receivers, load_bytes, period_ns, sublane, hops,
        ) {
            Ok((got, _, _)) => Ok(got),
            Err(refusal) => Err(ReplayError::Refused {
                index,
                tunnel,
                refusal: self.public(refusal),
            }),
        }
    }

    /// Grant tunnel `id`: on the tree `hops` if given (replay), else on
    /// the one the optimization phase finds.
    #[allow(clippy::too_many_arguments)]
    fn op_grant(
        &mut self,
        id: TunnelId,
        sender: &str,
        receivers: &[String],
        load_bytes: u32,
        period_ns: u64,
        sublane: u8,
        hops: &[(String, String)],
    ) -> Result<(Resources, bool, Vec<TeChange>), Refusal> {
        let req = Request {
            sender: sender.to_string(),
            receivers: receivers.to_vec(),
            load_bytes,
            period_ns,
            sublane,
        };
        let g = if hops.is_empty() {
            self.alloc.request(&req)?
        } else {
            let topo = self.alloc.topology();
            let mut links = Vec::with_capacity(hops.len());
            for (from, to) in hops {
                links.push(topo.link_between(from, to).ok_or_else(|| {
                    Refusal::NotATree(format!("`{from} -> {to}` is not a link of the topology"))
                })?);
            }
            self.alloc.request_on_tree(&req, &links)?
        };
        let hops = self.hops_of(g.tunnel);
        self.by_alloc.insert(g.tunnel, id);
        self.tunnels.insert(
            id,
            Entry {
                owner: sender.to_string(),
                receivers: receivers.to_vec(),
                sublane,
                load_bytes,
                requested_period_ns: period_ns,
                resources: g.resources,
                hops,
                state: State::Active(g.tunnel),
                exceed_streak: 0,
                unused_streak: 0,
                reclaim_pending: false,
            },
        );
        self.next_id = self.next_id.max(id.0.saturating_add(1));
        let changes = self.te_changes(&g.changed);
        Ok((g.resources, g.period_raised, changes))
    }

    /// Change an active tunnel, or re-admit an unbounded one.
    fn op_change(
        &mut self,
        id: TunnelId,
        load_bytes: u32,
        period_ns: u64,
    ) -> Result<(Resources, bool, Vec<TeChange>), OpError> {
        let e = self.tunnels.get(&id).ok_or(OpError::NoTunnel)?;
        let g = match e.state {
            State::Active(a) => match self.alloc.change(a, load_bytes, period_ns) {
                Ok(g) => g,
                Err(ChangeError::Refused(r)) => return Err(OpError::Refused(r)),
                Err(ChangeError::UnknownTunnel(_)) => return Err(OpError::NoTunnel),
            },
            State::Unbounded => self
                .alloc
                .request(&Request {
                    sender: e.owner.clone(),
                    receivers: e.receivers.clone(),
                    load_bytes,
                    period_ns,
                    sublane: e.sublane,
                })
                .map_err(OpError::Refused)?,
        };
        let hops = self.hops_of(g.tunnel);
        self.by_alloc.insert(g.tunnel, id);
        if let Some(e) = self.tunnels.get_mut(&id) {
            e.load_bytes = load_bytes;
            e.requested_period_ns = period_ns;
            e.resources = g.resources;
            e.hops = hops;
            e.state = State::Active(g.tunnel);
            e.exceed_streak = 0;
            e.unused_streak = 0;
            e.reclaim_pending = false;
        }
        let changes = self.te_changes(&g.changed);
        Ok((g.resources, g.period_raised, changes))
    }

    /// Remove a tunnel (release or termination).
    fn op_remove(&mut self, id: TunnelId) -> Result<Vec<TeChange>, OpError> {
        let e = self.tunnels.remove(&id).ok_or(OpError::NoTunnel)?;
        self.pending.retain(|p| match &p.action {
            Action::Install(t) => *t != id,
            Action::Reclaim { tunnel, .. } => *tunnel != id,
        });
        match e.state {
            State::Active(a) => {
                self.by_alloc.remove(&a);
                let changed = self.alloc.release(a).map_err(|_| OpError::NoTunnel)?;
                Ok(self.te_changes(&changed))
            }
            State::Unbounded => Ok(Vec::new()),
        }
    }

    /// Demote an active tunnel: out of the allocator, unbounded.
    fn op_demote(&mut self, id: TunnelId) -> Result<(Resources, Vec<TeChange>), OpError> {
        let e = self.tunnels.get_mut(&id).ok_or(OpError::NoTunnel)?;
        let State::Active(a) = e.state else {
            return Err(OpError::NoTunnel);
        };
        let old = e.resources;
        e.state = State::Unbounded;
        e.resources = unbounded(old);
        // No tree any more: best effort goes wherever routing sends it.
        e.hops.clear();
        e.exceed_streak = 0;
        e.unused_streak = 0;
        e.reclaim_pending = false;
        self.by_alloc.remove(&a);
        self.pending.retain(|p| match &p.action {
            Action::Install(t) => *t != id,
            Action::Reclaim { tunnel, .. } => *tunnel != id,
        });
        let changed = self.alloc.release(a).map_err(|_| OpError::NoTunnel)?;
        Ok((old, self.te_changes(&changed)))
    }

    /// Replay one journal record (`index` is for error messages).
    pub fn apply_record(&mut self, index: usize, r: &Record) -> Result<(), ReplayError> {
        let check = |tunnel: TunnelId, expected: Resources, got: Resources| {
            if expected == got {
                Ok(())
            } else {
                Err(ReplayError::Diverged {
                    index,
                    tunnel,
                    expected,
                    got,
                })
            }
        };
        let bad = |tunnel: TunnelId, expected: &'static str| ReplayError::BadTunnel {
            index,
            tunnel,
            expected,
        };
        match r {
            Record::NextId { next } => {
                self.next_id = self.next_id.max(*next);
                Ok(())
            }
            Record::Granted {
                tunnel,
                sender,
                receivers,
                load_bytes,
                period_ns,
                sublane,
                resources,
                hops,
            } => {
                if self.tunnels.contains_key(tunnel) {
                    return Err(ReplayError::DuplicateId {
                        index,
                        tunnel: *tunnel,
                    });
                }
                let got = self.replay_grant(
                    index,
                    *tunnel,
                    sender,
                    receivers,
                    *load_bytes,
                    *period_ns,
                    *sublane,
                    hops,
                )?;
                check(*tunnel, *resources, got)
            }
            Record::Tunnel {
                tunnel,
                sender,
                receivers,
                load_bytes,
                requested_period_ns,
                period_ns,
                sublane,
                unbounded,
                resources,
                hops,
            } => {
                if self.tunnels.contains_key(tunnel) {
                    return Err(ReplayError::DuplicateId {
                        index,
                        tunnel: *tunnel,
                    });
                }
                if *unbounded {
                    self.tunnels.insert(
                        *tunnel,
                        Entry {
                            owner: sender.clone(),
                            receivers: receivers.clone(),
                            sublane: *sublane,
                            load_bytes: *load_bytes,
                            requested_period_ns: *requested_period_ns,
                            resources: *resources,
                            hops: Vec::new(),
                            state: State::Unbounded,
                            exceed_streak: 0,
                            unused_streak: 0,
                            reclaim_pending: false,
                        },
                    );
                    self.next_id = self.next_id.max(tunnel.0.saturating_add(1));
                    return Ok(());
                }
                let got = self.replay_grant(
                    index,
                    *tunnel,
                    sender,
                    receivers,
                    *load_bytes,
                    *period_ns,
                    *sublane,
                    hops,
                )?;
                if got.period_ns != *period_ns {
                    return Err(ReplayError::Diverged {
                        index,
                        tunnel: *tunnel,
                        expected: *resources,
                        got,
                    });
                }
                if let Some(e) = self.tunnels.get_mut(tunnel) {
                    e.requested_period_ns = *requested_period_ns;
                }
                self.deferred.push((index, *tunnel, *resources));
                Ok(())
            }
            Record::Changed {
                tunnel,
                load_bytes,
                period_ns,
                resources,
            } => match self.op_change(*tunnel, *load_bytes, *period_ns) {
                Ok((got, _, _)) => check(*tunnel, *resources, got),
                Err(OpError::Refused(refusal)) => Err(ReplayError::Refused {
                    index,
                    tunnel: *tunnel,
                    refusal: self.public(refusal),
                }),
                Err(OpError::NoTunnel) => Err(bad(*tunnel, "a tunnel")),
            },
            Record::Released { tunnel } | Record::Terminated { tunnel } => self
                .op_remove(*tunnel)
                .map(|_| ())
                .map_err(|_| bad(*tunnel, "a tunnel")),
            Record::Demoted { tunnel } => self
                .op_demote(*tunnel)
                .map(|_| ())
                .map_err(|_| bad(*tunnel, "active")),
        }
    }

    // -- the live path -------------------------------------------------------

    fn te_upcalls(&self, changes: Vec<TeChange>, out: &mut Outcome) -> bool {
        let mut any_wider = false;
        out.upcalls.reserve(changes.len());
        for (id, old, new, owner) in changes {
            let wider = widened(&old, &new);
            any_wider |= wider;
            out.upcalls.push((
                owner,
                Upcall::BandwidthChanged {
                    tunnel: id,
                    old,
                    new,
                    reason: Reason::Te,
                    grace_ns: if wider { self.policy.te_grace_ns } else { 0 },
                },
            ));
        }
        any_wider
    }

    fn install_op(&self, id: TunnelId) -> Option<FabricOp> {
        let e = self.tunnels.get(&id)?;
        Some(FabricOp::Install {
            tunnel: id,
            sender: e.owner.clone(),
            receivers: e.receivers.clone(),
            hops: e.hops.clone(),
            sublane: e.sublane,
            load_bytes: e.resources.load_bytes,
            period_ns: e.resources.period_ns,
            rate_bps: rate_bps(e.resources.load_bytes, e.resources.period_ns),
            burst_bytes: e.resources.load_bytes,
            queue_pkts: 1,
        })
    }

    /// Install `id` now, or after the TE grace period if others widened.
    fn install(&mut self, id: TunnelId, delay: bool, now_ns: u64, out: &mut Outcome) {
        if delay && self.policy.te_grace_ns > 0 {
            self.pending.push(Pending {
                due_ns: now_ns.saturating_add(self.policy.te_grace_ns),
                action: Action::Install(id),
            });
        } else if let Some(op) = self.install_op(id) {
            out.fabric.push(op);
        }
    }

    /// Handle one request of a connection (see the module docs).
    pub fn handle(&mut self, principal: &Principal, req: &ClientMsg, now_ns: u64) -> Outcome {
        let Principal::Host(host) = principal else {
            return Outcome::refused(
                RefusalCode::Unauthenticated,
                "not authenticated: send Hello and Auth first",
            );
        };
        match req {
            ClientMsg::Hello { .. } | ClientMsg::Auth { .. } | ClientMsg::Subscribe { .. } => {
                Outcome::refused(
                    RefusalCode::Malformed,
                    "Hello, Auth and Subscribe are connection messages, not controller requests",
                )
            }
            // The at-most-once table is the replicated state's
            // (`crate::replicated`); here the request is applied as it is.
            ClientMsg::Tagged { msg, .. } => self.handle(principal, msg, now_ns),
            ClientMsg::RequestBandwidth {
                sender,
                receivers,
                load_bytes,
                period_ns,
                sublane,
            } => self.request(
                host,
                sender,
                receivers,
                *load_bytes,
                *period_ns,
                *sublane,
                now_ns,
            ),
            ClientMsg::ReleaseBandwidth { tunnel } => self.release(host, *tunnel),
            ClientMsg::ChangeBandwidth {
                tunnel,
                load_bytes,
                period_ns,
            } => self.change(host, *tunnel, *load_bytes, *period_ns, now_ns),
            ClientMsg::ReportMeters { readings } => self.report_meters(host, readings, now_ns),
            ClientMsg::ReconcileHost { tunnels } => self.reconcile_host(host, tunnels),
            ClientMsg::ListTunnels => self.list(),
            ClientMsg::TunnelKey { tunnel } => self.key_of(host, *tunnel),
        }
    }

    /// `None` if `host` owns `id`, else the refusal.
    fn not_owned(&self, host: &str, id: TunnelId) -> Option<Outcome> {
        match self.tunnels.get(&id) {
            None => Some(Outcome::refused(
                RefusalCode::UnknownTunnel,
                format!("{id} does not exist"),
            )),
            Some(e) if e.owner != host => Some(Outcome::refused(
                RefusalCode::Forbidden,
                format!("{id} belongs to host `{}`, not `{host}`", e.owner),
            )),
            Some(_) => None,
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn request(
        &mut self,
        host: &str,
        sender: &str,
        receivers: &[String],
        load_bytes: u32,
        period_ns: u64,
        sublane: u8,
        now_ns: u64,
    ) -> Outcome {
        if sender != host {
            return Outcome::refused(
                RefusalCode::Forbidden,
                format!(
                    "host `{host}` may request tunnels only with itself as sender, not `{sender}`"
                ),
            );
        }
        let hosts = self.alloc.topology().host_count();
        if receivers.len() > hosts {
            return Outcome::refused(
                RefusalCode::OutOfRange,
                format!(
                    "{} receivers, but the topology has {hosts} hosts",
                    receivers.len()
                ),
            );
        }
        let id = TunnelId(self.next_id);
        match self.op_grant(id, sender, receivers, load_bytes, period_ns, sublane, &[]) {
            Err(r) => self.refusal(r),
            Ok((resources, period_raised, changes)) => {
                let mut out = Outcome {
                    reply: Some(ServerMsg::Granted {
                        tunnel: id,
                        resources,
                        period_raised,
                    }),
                    records: vec![Record::Granted {
                        tunnel: id,
                        sender: sender.to_string(),
                        receivers: receivers.to_vec(),
                        load_bytes,
                        period_ns,
                        sublane,
                        resources,
                        hops: self
                            .tunnels
                            .get(&id)
                            .map(|e| e.hops.clone())
                            .unwrap_or_default(),
                    }],
                    ..Outcome::default()
                };
                let wider = self.te_upcalls(changes, &mut out);
                self.install(id, wider, now_ns, &mut out);
                out
            }
        }
    }

    fn release(&mut self, host: &str, id: TunnelId) -> Outcome {
        if let Some(o) = self.not_owned(host, id) {
            return o;
        }
        match self.op_remove(id) {
            Err(_) => Outcome::refused(RefusalCode::UnknownTunnel, format!("{id} does not exist")),
            Ok(changes) => {
                let mut out = Outcome {
                    reply: Some(ServerMsg::Released { tunnel: id }),
                    records: vec![Record::Released { tunnel: id }],
                    fabric: vec![FabricOp::Remove { tunnel: id }],
                    ..Outcome::default()
                };
                self.te_upcalls(changes, &mut out);
                out
            }
        }
    }

    fn change(
        &mut self,
        host: &str,
        id: TunnelId,
        load_bytes: u32,
        period_ns: u64,
        now_ns: u64,
    ) -> Outcome {
        if let Some(o) = self.not_owned(host, id) {
            return o;
        }
        match self.op_change(id, load_bytes, period_ns) {
            Err(OpError::Refused(r)) => self.refusal(r),
            Err(OpError::NoTunnel) => {
                Outcome::refused(RefusalCode::UnknownTunnel, format!("{id} does not exist"))
            }
            Ok((resources, period_raised, changes)) => {
                self.pending.retain(
                    |p| !matches!(&p.action, Action::Reclaim { tunnel, .. } if *tunnel == id),
                );
                let mut out = Outcome {
                    reply: Some(ServerMsg::Changed {
                        tunnel: id,
                        resources,
                        period_raised,
                    }),
                    records: vec![Record::Changed {
                        tunnel: id,
                        load_bytes,
                        period_ns,
                        resources,
                    }],
                    ..Outcome::default()
                };
                let wider = self.te_upcalls(changes, &mut out);
                self.install(id, wider, now_ns, &mut out);
                out
            }
        }
    }

    fn report_meters(&mut self, host: &str, readings: &[MeterReading], now_ns: u64) -> Outcome {
        for r in readings {
            if let Some(o) = self.not_owned(host, r.tunnel) {
                return o;
            }
            if r.interval_ns == 0 || r.interval_ns > MAX_INTERVAL_NS {
                return Outcome::refused(
                    RefusalCode::OutOfRange,
                    format!(
                        "{}: interval {} ns is outside 1..={MAX_INTERVAL_NS}",
                        r.tunnel, r.interval_ns
                    ),
                );
            }
        }
        let mut out = Outcome {
            reply: Some(ServerMsg::Ack),
            ..Outcome::default()
        };
        for r in readings {
            self.observe(r.tunnel, &Observation::from(r), now_ns, &mut out);
        }
        out
    }

    fn list(&self) -> Outcome {
        // Fit the reply in one frame: 16 bytes of framing and flags, then
        // each row's encoded size.
        let mut size = 16usize;
        let mut list = Vec::new();
        let mut truncated = false;
        for (id, e) in self.by_id() {
            let row = 8
                + 2
                + e.owner.len()
                + 2
                + e.receivers.iter().map(|r| 2 + r.len()).sum::<usize>()
                + 2
                + 8
                + 28;
            if size + row > MAX_FRAME {
                truncated = true;
                break;
            }
            size += row;
            list.push(info(id, e));
        }
        Outcome {
            reply: Some(ServerMsg::Tunnels { list, truncated }),
            ..Outcome::default()
        }
    }

    /// A host reports the tunnels it runs (after its restart or the
    /// controller's): the ones the controller knows for this host are kept,
    /// every other one is terminated (`BandwidthTerminated{Unknown}` to the
    /// host; [`FabricOp::Remove`] if no host owns it). Changes no state.
    pub fn reconcile_host(&mut self, host: &str, running: &[TunnelId]) -> Outcome {
        let mut kept = Vec::new();
        let mut terminated = Vec::new();
        let mut out = Outcome::default();
        for &id in running {
            if kept.contains(&id) || terminated.contains(&id) {
                continue;
            }
            match self.tunnels.get(&id) {
                Some(e) if e.owner == host => kept.push(id),
                other => {
                    terminated.push(id);
                    out.upcalls.push((
                        host.to_string(),
                        Upcall::BandwidthTerminated {
                            tunnel: id,
                            reason: TerminateReason::Unknown,
                        },
                    ));
                    if other.is_none() {
                        out.fabric.push(FabricOp::Remove { tunnel: id });
                    }
                }
            }
        }
        out.reply = Some(ServerMsg::Reconciled { kept, terminated });
        out
    }

    /// Meter readings from the fabric; readings of unknown tunnels are
    /// ignored (the fabric may lag behind).
    pub fn on_switch_meters(&mut self, meters: &[SwitchMeter], now_ns: u64) -> Outcome {
        let mut out = Outcome::default();
        for m in meters {
            if self.tunnels.contains_key(&m.tunnel) && m.interval_ns <= MAX_INTERVAL_NS {
                self.observe(m.tunnel, &Observation::from(m), now_ns, &mut out);
            }
        }
        out
    }

    fn terminate(&mut self, id: TunnelId, reason: TerminateReason, out: &mut Outcome) {
        let Some(owner) = self.tunnels.get(&id).map(|e| e.owner.clone()) else {
            return;
        };
        if let Ok(changes) = self.op_remove(id) {
            out.records.push(Record::Terminated { tunnel: id });
            out.fabric.push(FabricOp::Remove { tunnel: id });
            out.upcalls
                .push((owner, Upcall::BandwidthTerminated { tunnel: id, reason }));
            self.te_upcalls(changes, out);
        }
    }

    fn observe(&mut self, id: TunnelId, o: &Observation, now_ns: u64, out: &mut Outcome) {
        let Some(e) = self.tunnels.get(&id) else {
            return;
        };
        let usage = classify(&self.policy, e.load_bytes, e.resources.period_ns, o);
        let active = matches!(e.state, State::Active(_));
        match (active, usage) {
            (true, Usage::Exceeded) => {
                let owner = e.owner.clone();
                if let Ok((old, changes)) = self.op_demote(id) {
                    out.records.push(Record::Demoted { tunnel: id });
                    out.fabric.push(FabricOp::Demote { tunnel: id });
                    out.upcalls.push((
                        owner,
                        Upcall::BandwidthChanged {
                            tunnel: id,
                            old,
                            new: unbounded(old),
                            reason: Reason::BwExceeded,
                            grace_ns: 0,
                        },
                    ));
                    self.te_upcalls(changes, out);
                }
            }
            (true, Usage::Normal) => {
                if let Some(e) = self.tunnels.get_mut(&id) {
                    e.unused_streak = 0;
                }
            }
            (true, Usage::Unused) => {
                let streak = e.unused_streak.saturating_add(1);
                let pending = e.reclaim_pending;
                if let Some(e) = self.tunnels.get_mut(&id) {
                    e.unused_streak = streak;
                }
                if !pending && streak >= self.policy.unused_intervals.max(1) {
                    self.reclaim(id, now_ns, out);
                }
            }
            (false, Usage::Exceeded) => {
                let streak = e.exceed_streak.saturating_add(1);
                if streak >= self.policy.terminate_after.max(1) {
                    self.terminate(id, TerminateReason::BwExceeded, out);
                } else if let Some(e) = self.tunnels.get_mut(&id) {
                    e.exceed_streak = streak;
                }
            }
            (false, _) => {
                if let Some(e) = self.tunnels.get_mut(&id) {
                    e.exceed_streak = 0;
                }
            }
        }
    }

    fn reclaim(&mut self, id: TunnelId, now_ns: u64, out: &mut Outcome) {
        let Some(e) = self.tunnels.get(&id) else {
            return;
        };
        let State::Active(a) = e.state else {
            return;
        };
        let max = self.alloc.config().max_period_ns;
        let period = e.resources.period_ns;
        if period >= max {
            self.terminate(id, TerminateReason::BwUnused, out);
            return;
        }
        let new_period = period
            .saturating_mul(self.policy.reclaim_factor.max(2) as u64)
            .min(max);
        let (load, old, owner) = (e.load_bytes, e.resources, e.owner.clone());
        // What the change will give, without making it yet.
        let mut trial = self.alloc.clone();
        let Ok(g) = trial.change(a, load, new_period) else {
            if let Some(e) = self.tunnels.get_mut(&id) {
                e.unused_streak = 0;
            }
            return;
        };
        if let Some(e) = self.tunnels.get_mut(&id) {
            e.unused_streak = 0;
            e.reclaim_pending = true;
        }
        self.pending.push(Pending {
            due_ns: now_ns.saturating_add(self.policy.grace_ns),
            action: Action::Reclaim {
                tunnel: id,
                load_bytes: load,
                period_ns: new_period,
                old,
                announced: g.resources,
            },
        });
        out.upcalls.push((
            owner,
            Upcall::BandwidthChanged {
                tunnel: id,
                old,
                new: g.resources,
                reason: Reason::BwUnused,
                grace_ns: self.policy.grace_ns,
            },
        ));
    }

    /// End grace periods that are due at `now_ns`: held-back installs and
    /// reclaims.
    pub fn tick(&mut self, now_ns: u64) -> Outcome {
        let mut out = Outcome::default();
        let (due, later): (Vec<Pending>, Vec<Pending>) = std::mem::take(&mut self.pending)
            .into_iter()
            .partition(|p| p.due_ns <= now_ns);
        self.pending = later;
        for p in due {
            match p.action {
                Action::Install(id) => {
                    if self.alloc_tunnel(id).is_some() {
                        if let Some(op) = self.install_op(id) {
                            out.fabric.push(op);
                        }
                    }
                }
                Action::Reclaim {
                    tunnel,
                    load_bytes,
                    period_ns,
                    old,
                    announced,
                } => {
                    let Some(e) = self.tunnels.get_mut(&tunnel) else {
                        continue;
                    };
                    if !e.reclaim_pending {
                        continue;
                    }
                    if e.load_bytes != load_bytes || e.resources.period_ns != old.period_ns {
                        // Changed under us (not by the owner, who clears
                        // the pending reclaim): drop it.
                        e.reclaim_pending = false;
                        continue;
                    }
                    let owner = e.owner.clone();
                    match self.op_change(tunnel, load_bytes, period_ns) {
                        Ok((resources, _, changes)) => {
                            out.records.push(Record::Changed {
                                tunnel,
                                load_bytes,
                                period_ns,
                                resources,
                            });
                            if let Some(op) = self.install_op(tunnel) {
                                out.fabric.push(op);
                            }
                            if resources != announced {
                                out.upcalls.push((
                                    owner,
                                    Upcall::BandwidthChanged {
                                        tunnel,
                                        old: announced,
                                        new: resources,
                                        reason: Reason::Te,
                                        grace_ns: 0,
                                    },
                                ));
                            }
                            self.te_upcalls(changes, &mut out);
                        }
                        Err(_) => {
                            // The old resources stay: say so.
                            if let Some(e) = self.tunnels.get_mut(&tunnel) {
                                e.reclaim_pending = false;
                            }
                            out.upcalls.push((
                                owner,
                                Upcall::BandwidthChanged {
                                    tunnel,
                                    old: announced,
                                    new: old,
                                    reason: Reason::Te,
                                    grace_ns: 0,
                                },
                            ));
                        }
                    }
                }
            }
        }
        out
    }

    /// The earliest time a [`Controller::tick`] has work, if any.
    pub fn next_deadline(&self) -> Option<u64> {
        self.pending.iter().map(|p| p.due_ns).min()
    }

    /// Operations that program the whole current state into a fresh fabric
    /// (after a daemon restart): an install per tunnel, then a demote per
    /// unbounded one.
    pub fn resync(&self) -> Vec<FabricOp> {
        let mut ops = Vec::new();
        for (id, e) in self.by_id() {
            if let Some(op) = self.install_op(id) {
                ops.push(op);
            }
            if e.state == State::Unbounded {
                ops.push(FabricOp::Demote { tunnel: id });
            }
        }
        ops
    }

    fn snapshot_records(&self) -> Vec<Record> {
        let mut v = vec![Record::NextId { next: self.next_id }];
        for (id, e) in self.by_id() {
            v.push(Record::Tunnel {
                tunnel: id,
                sender: e.owner.clone(),
                receivers: e.receivers.clone(),
                load_bytes: e.load_bytes,
                requested_period_ns: e.requested_period_ns,
                period_ns: e.resources.period_ns,
                sublane: e.sublane,
                unbounded: e.state == State::Unbounded,
                resources: e.resources,
                hops: e.hops.clone(),
            });
        }
        v
    }

    /// Records that rebuild exactly the current state from nothing (for a
    /// snapshot): the next id, then every live tunnel in id order, granted
    /// at its current period on its current tree. Checked by replaying them
    /// and comparing every tunnel's tree, period and ranges with the current
    /// ones ([`CompactError::NotReproducible`] would mean an allocator bug:
    /// a subset of a valid allocation, on the same trees and periods, is
    /// valid).
    pub fn compaction_records(&self) -> Result<Vec<Record>, CompactError> {
        let recs = self.snapshot_records();
        let fresh = Controller::recover(
            self.alloc.topology().clone(),
            self.alloc.config().clone(),
            self.policy.clone(),
            &recs,
        )
        .map_err(|e| CompactError::NotReproducible(e.to_string()))?;
        self.same_state(&fresh)
            .map_err(CompactError::NotReproducible)?;
        Ok(recs)
    }

    /// Whether `other` holds the same tunnels with the same trees, periods
    /// and ranges (allocator-internal ids aside); `Err` says the first
    /// difference.
    pub fn same_state(&self, other: &Controller) -> Result<(), String> {
        if self.next_id != other.next_id {
            return Err(format!("next id {} vs {}", self.next_id, other.next_id));
        }
        if self.tunnels.len() != other.tunnels.len() {
            return Err(format!(
                "{} tunnels vs {}",
                self.tunnels.len(),
                other.tunnels.len()
            ));
        }
        for ((ia, a), (ib, b)) in self.by_id().zip(other.by_id()) {
            // Trees as link sets: the order links were attached in depends
            // on what else was allocated then, and nothing depends on it.
            let (mut ha, mut hb) = (a.hops.clone(), b.hops.clone());
            ha.sort();
            hb.sort();
            if ia != ib || info(ia, a) != info(ib, b) || ha != hb {
                return Err(format!(
                    "{ia} differs: {:?} {:?} vs {:?} {:?}",
                    info(ia, a),
                    a.hops,
                    info(ib, b),
                    b.hops
                ));
            }
            match (self.alloc_tunnel(ia), other.alloc_tunnel(ib)) {
                (None, None) => {}
                (Some(x), Some(y)) => {
                    // The allocator's own `requested_period_ns` is not
                    // compared: a snapshot asks for the granted period, and
                    // the allocator uses the requested one only to report
                    // `period_raised` for that very call.
                    let (mut lx, mut ly) = (x.links.clone(), y.links.clone());
                    lx.sort();
                    ly.sort();
                    if lx != ly
                        || x.period_ns != y.period_ns
                        || x.range != y.range
                        || x.per_receiver != y.per_receiver
                    {
                        return Err(format!("{ia}: allocator tunnel differs"));
                    }
                }
                _ => return Err(format!("{ia}: state differs")),
            }
        }
        if self.alloc.len() != other.alloc.len() {
            return Err("allocator tunnel count differs".into());
        }
        Ok(())
    }
}

fn info(id: TunnelId, e: &Entry) -> TunnelInfo {
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
