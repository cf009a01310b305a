//! The operations shared by the live path and replay: grant, change,
//! remove and demote a tunnel, and the TE side effects they report.

use super::controller::{unbounded, Action, Controller, Entry, OpError, State, TeChange};
use super::outcome::ReplayError;
use crate::proto::TunnelId;
use xlane_te::alloc::ChangeError;
use xlane_te::{Refusal, Request, Resources};

impl Controller {
    pub(super) fn te_changes(&mut self, changed: &[xlane_te::Changed]) -> Vec<TeChange> {
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

    pub(super) fn hops_of(&self, a: xlane_te::TunnelId) -> Vec<(String, String)> {
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
    pub(super) fn replay_grant(
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
    pub(super) fn op_grant(
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
    pub(super) fn op_change(
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
    pub(super) fn op_remove(&mut self, id: TunnelId) -> Result<Vec<TeChange>, OpError> {
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
    pub(super) fn op_demote(
        &mut self,
        id: TunnelId,
    ) -> Result<(Resources, Vec<TeChange>), OpError> {
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
}
