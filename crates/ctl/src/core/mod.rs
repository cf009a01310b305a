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
//!   [`FabricOp::Demote`](crate::fabric::FabricOp::Demote), its allocation released (the tunnels that shared
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
//! [`FabricOp::Install`](crate::fabric::FabricOp::Install) is held back for that grace period (the others'
//! old guarantees hold until then), and the upcalls carry it; upcalls that
//! only narrow a range carry `grace_ns = 0` (the old, wider range stays
//! true).

mod controller;
mod live;
mod monitor;
mod ops;
mod outcome;
mod policy;
mod replay;

pub use controller::{Controller, Principal};
pub use outcome::{CompactError, Outcome, ReplayError};
pub use policy::{classify, Observation, Policy, Usage, MAX_INTERVAL_NS};
