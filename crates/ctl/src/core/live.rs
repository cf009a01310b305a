//! The live path: a connection's requests ([`Controller::handle`]), the
//! TE upcalls and installs they cause, and host reconciliation.

use super::controller::{info, widened, Action, Controller, OpError, Pending, Principal, TeChange};
use super::outcome::Outcome;
use super::policy::{Observation, MAX_INTERVAL_NS};
use crate::fabric::FabricOp;
use crate::proto::{
    ClientMsg, MeterReading, Reason, RefusalCode, ServerMsg, TerminateReason, TunnelId, Upcall,
    MAX_FRAME,
};
use crate::store::Record;
use xlane_te::alloc::rate_bps;

impl Controller {
    pub(super) fn key_of(&self, host: &str, id: TunnelId) -> Outcome {
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

    pub(super) fn te_upcalls(&self, changes: Vec<TeChange>, out: &mut Outcome) -> bool {
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

    pub(super) fn install_op(&self, id: TunnelId) -> Option<FabricOp> {
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
    pub(super) fn install(&mut self, id: TunnelId, delay: bool, now_ns: u64, out: &mut Outcome) {
        if delay && self.policy.te_grace_ns > 0 {
            self.pending.push(Pending {
                due_ns: now_ns.saturating_add(self.policy.te_grace_ns),
                action: Action::Install(id),
            });
        } else if let Some(op) = self.install_op(id) {
            out.fabric.push(op);
        }
    }

    /// Handle one request of a connection (see the [`crate::core`] docs).
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
    pub(super) fn not_owned(&self, host: &str, id: TunnelId) -> Option<Outcome> {
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
    pub(super) fn request(
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

    pub(super) fn release(&mut self, host: &str, id: TunnelId) -> Outcome {
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

    pub(super) fn change(
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

    pub(super) fn report_meters(
        &mut self,
        host: &str,
        readings: &[MeterReading],
        now_ns: u64,
    ) -> Outcome {
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

    pub(super) fn list(&self) -> Outcome {
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
}
