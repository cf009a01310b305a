//! Rebuilding and persisting the state: journal replay
//! ([`Controller::recover`], [`Controller::apply_record`]), compaction into a
//! snapshot, and the fabric resync after a restart.

use super::controller::{info, Controller, Entry, OpError, State};
use super::outcome::{CompactError, ReplayError};
use super::policy::Policy;
use crate::fabric::FabricOp;
use crate::proto::TunnelId;
use crate::store::Record;
use xlane_te::{Resources, TeConfig, Topology};

impl Controller {
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
    pub(super) fn settle(&mut self) {
        self.alloc.settle();
        for e in self.tunnels.values_mut() {
            if let State::Active(a) = e.state {
                if let Some(t) = self.alloc.tunnel(a) {
                    e.resources = t.resources();
                }
            }
        }
    }
    /// Check the ranges of the snapshot tunnels replayed so far (they are
    /// only final once every snapshot tunnel is in), settling every range
    /// first if there are any.
    pub(super) fn check_deferred(&mut self) -> Result<(), ReplayError> {
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

    pub(super) fn snapshot_records(&self) -> Vec<Record> {
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
