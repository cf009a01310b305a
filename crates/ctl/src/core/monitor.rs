//! Monitoring: meter readings classified against allocations, demotion,
//! termination and reclaims, and the grace periods that end in
//! [`Controller::tick`].

use super::controller::{unbounded, Action, Controller, Pending, State};
use super::outcome::Outcome;
use super::policy::{classify, Observation, Usage, MAX_INTERVAL_NS};
use crate::fabric::{FabricOp, SwitchMeter};
use crate::proto::{Reason, TerminateReason, TunnelId, Upcall};
use crate::store::Record;

impl Controller {
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

    pub(super) fn terminate(&mut self, id: TunnelId, reason: TerminateReason, out: &mut Outcome) {
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

    pub(super) fn observe(
        &mut self,
        id: TunnelId,
        o: &Observation,
        now_ns: u64,
        out: &mut Outcome,
    ) {
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

    pub(super) fn reclaim(&mut self, id: TunnelId, now_ns: u64, out: &mut Outcome) {
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
}
