//! The testbed's side of tunnel policing: the `Testbed` methods that install,
//! demote, promote, meter and remove tunnel policies on the testbed's devices
//! and set express queue lengths, keeping what they did in the value's
//! [`TunnelRegistry`](super::TunnelRegistry).

use super::{
    allocate_slot, express_queue_line, install_lines, parse_filter_counters, parse_root_htid,
    remove_lines, steer_line, tap_ip_lines, tap_tc_lines, Installed, InstalledPlace,
    InstalledTunnel, Place, PolicyError, Steer, TunnelMeter, TunnelPolicy, TunnelRegistry,
    TunnelSlot, UsedIds, EXPRESS_FILTER_PREF, TAP_DEVICE,
};
use crate::error::TestbedError;
use crate::exec::{run, run_batch};
use crate::shaping::{parse_class_stats, ClassStats};
use crate::testbed::Testbed;
use std::collections::{BTreeMap, BTreeSet};

fn tc_show(ns: &str, what: &str, dev: &str, stats: bool) -> Result<String, TestbedError> {
    let mut args = vec!["-n", ns];
    if stats {
        args.push("-s");
    }
    args.extend([what, "show", "dev", dev]);
    if what == "filter" {
        // The tunnels' filters hang on HTB 1:, the root or (on a port
        // split by CPU) the lane core's queue.
        args.extend(["parent", "1:"]);
    }
    Ok(run("tc", &args)?)
}

/// Create the counting tap in `ns` if needed; false if that failed.
fn ensure_tap(ns: &str) -> bool {
    let exists = run("ip", &["-n", ns, "link", "show", "dev", TAP_DEVICE]).is_ok();
    if !exists && run_batch("ip", Some(ns), &tap_ip_lines(), false).is_err() {
        return false;
    }
    run_batch("tc", Some(ns), &tap_tc_lines(), false).is_ok()
}

impl Testbed {
    fn registry(&self) -> std::sync::MutexGuard<'_, TunnelRegistry> {
        // The registry is only changed after the tc commands of a step
        // finished, so it stays consistent even if a holder panicked.
        self.tunnels.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Namespace, device and link rate of a place.
    fn place_device(&self, place: Place) -> Result<(String, String, u64), TestbedError> {
        match place {
            Place::Host(i) => {
                let h = self.host(i)?;
                Ok((
                    h.netns.clone(),
                    h.iface.clone(),
                    self.config().effective_host_rate_bps(),
                ))
            }
            Place::SwitchPort(i) => {
                let dev = self.switch_port(i).ok_or(TestbedError::BadHost {
                    index: i,
                    hosts: self.hosts().len(),
                })?;
                Ok((
                    self.switch_netns().to_string(),
                    dev.to_string(),
                    self.config().link_rate_bps,
                ))
            }
        }
    }

    /// Police tunnel `p.tunnel`: on the sender's NIC and on each listed
    /// switch port, add its own HTB class (prio of its sub-lane,
    /// `rate = ceil = π`, burst σ), a pfifo of `queue_pkts` and a u32 filter
    /// tried before the DSCP filters. The slot (class ids) is
    /// `TunnelSlot::preferred(tunnel)` or the next one free on every place.
    /// On error nothing stays installed.
    pub fn install_tunnel_policy(&self, p: &TunnelPolicy) -> Result<(), TestbedError> {
        let places = p.places();
        let mut devs = Vec::with_capacity(places.len());
        // Validate the indices first, so BadHost is reported as such.
        let hosts = self.hosts().len();
        for &pl in &places {
            let (Place::Host(i) | Place::SwitchPort(i)) = pl;
            if i >= hosts {
                return Err(PolicyError::BadHost { index: i, hosts }.into());
            }
        }
        for &pl in &places {
            devs.push(self.place_device(pl)?);
        }
        let link_bps = devs.iter().map(|d| d.2).min().unwrap_or(0);
        p.validate(hosts, self.config().express2_dscp.is_some(), link_bps)?;
        let mut reg = self.registry();
        if reg.tunnels.contains_key(&p.tunnel) {
            return Err(PolicyError::AlreadyInstalled(p.tunnel).into());
        }
        // What exists on every place (also ids made by others).
        let mut found = Vec::with_capacity(devs.len());
        for (ns, dev, _) in &devs {
            let filters = tc_show(ns, "filter", dev, false)?;
            let htid = parse_root_htid(&filters, EXPRESS_FILTER_PREF).ok_or_else(|| {
                PolicyError::NotShaped {
                    netns: ns.clone(),
                    device: dev.clone(),
                }
            })?;
            let used = UsedIds::parse(
                &tc_show(ns, "class", dev, false)?,
                &tc_show(ns, "qdisc", dev, false)?,
                &filters,
            );
            found.push((htid, used));
        }
        let mine: BTreeSet<TunnelSlot> = reg.tunnels.values().map(|t| t.slot).collect();
        let slot = allocate_slot(p.tunnel, |s| {
            mine.contains(&s) || found.iter().any(|(htid, used)| used.uses(s, htid))
        })
        .ok_or(PolicyError::NoFreeSlot)?;
        let mut done: Vec<InstalledPlace> = Vec::with_capacity(places.len());
        for ((&place, (ns, dev, _)), (htid, _)) in places.iter().zip(&devs).zip(&found) {
            let r = run_batch("tc", Some(ns), &install_lines(dev, htid, slot, p), false);
            let ip = InstalledPlace {
                place,
                netns: ns.clone(),
                device: dev.clone(),
                htid: htid.clone(),
                demoted: false,
                tapped: false,
            };
            if let Err(e) = r {
                // The slot's ids were free here, so whatever exists now is ours.
                done.push(ip);
                for d in &done {
                    let _ = run_batch(
                        "tc",
                        Some(&d.netns),
                        &remove_lines(&d.device, &d.htid, slot),
                        true,
                    );
                }
                return Err(e.into());
            }
            done.push(ip);
        }
        reg.tunnels.insert(
            p.tunnel,
            Installed {
                policy: p.clone(),
                slot,
                places: done,
            },
        );
        Ok(())
    }

    /// Steer `tunnel`'s packets into best effort (1:30) on every place it
    /// is policed, keeping its class (and counters). Each demoted filter
    /// mirrors to a counting tap (see the module docs) when one can be
    /// made. Demoting a demoted tunnel does nothing.
    pub fn demote_tunnel(&self, tunnel: u32) -> Result<(), TestbedError> {
        let mut reg = self.registry();
        let t = reg
            .tunnels
            .get_mut(&tunnel)
            .ok_or(PolicyError::NotInstalled(tunnel))?;
        let slot = t.slot;
        let mut taps: BTreeMap<String, bool> = BTreeMap::new();
        for pl in t.places.iter_mut().filter(|pl| !pl.demoted) {
            let tap_ok = *taps
                .entry(pl.netns.clone())
                .or_insert_with(|| ensure_tap(&pl.netns));
            let line = |tap| {
                steer_line(
                    &pl.device,
                    &pl.htid,
                    slot,
                    tunnel,
                    Steer::BestEffort { tap },
                )
            };
            let mut tapped = false;
            if tap_ok && run_batch("tc", Some(&pl.netns), &[line(Some(TAP_DEVICE))], false).is_ok()
            {
                tapped = true;
            } else {
                run_batch("tc", Some(&pl.netns), &[line(None)], false)?;
            }
            pl.demoted = true;
            pl.tapped = tapped;
        }
        Ok(())
    }

    /// Undo [`Testbed::demote_tunnel`]: steer the tunnel into its own class
    /// again (the tap counter is dropped).
    pub fn promote_tunnel(&self, tunnel: u32) -> Result<(), TestbedError> {
        let mut reg = self.registry();
        let t = reg
            .tunnels
            .get_mut(&tunnel)
            .ok_or(PolicyError::NotInstalled(tunnel))?;
        let slot = t.slot;
        for pl in t.places.iter_mut().filter(|pl| pl.demoted) {
            let line = steer_line(&pl.device, &pl.htid, slot, tunnel, Steer::Own);
            run_batch("tc", Some(&pl.netns), &[line], false)?;
            pl.demoted = false;
            pl.tapped = false;
        }
        Ok(())
    }

    /// Remove `tunnel`'s filters and classes everywhere. It is forgotten
    /// even if some `tc` command failed (the first error is returned).
    pub fn remove_tunnel_policy(&self, tunnel: u32) -> Result<(), TestbedError> {
        let t = self
            .registry()
            .tunnels
            .remove(&tunnel)
            .ok_or(PolicyError::NotInstalled(tunnel))?;
        let mut first = None;
        for pl in &t.places {
            let lines = remove_lines(&pl.device, &pl.htid, t.slot);
            if let Err(e) = run_batch("tc", Some(&pl.netns), &lines, true) {
                first.get_or_insert(e);
            }
        }
        match first {
            Some(e) => Err(e.into()),
            None => Ok(()),
        }
    }

    /// The installed policies, by tunnel id.
    pub fn tunnel_policies(&self) -> Vec<InstalledTunnel> {
        self.registry()
            .tunnels
            .values()
            .map(|t| InstalledTunnel {
                policy: t.policy.clone(),
                class_id: t.slot.class_id(),
                demoted: t.places.iter().all(|p| p.demoted),
            })
            .collect()
    }

    /// Counters of every policed tunnel at every place (by tunnel, then
    /// in the order of [`TunnelPolicy::places`]). Two `tc` calls per
    /// device involved.
    pub fn tunnel_meters(&self) -> Result<Vec<TunnelMeter>, TestbedError> {
        let reg = self.registry();
        type Dev = (String, String);
        let mut classes: BTreeMap<Dev, Vec<(String, ClassStats)>> = BTreeMap::new();
        let mut filters: BTreeMap<Dev, String> = BTreeMap::new();
        let mut out = Vec::new();
        for t in reg.tunnels.values() {
            for pl in &t.places {
                let key = (pl.netns.clone(), pl.device.clone());
                if !classes.contains_key(&key) {
                    let text = tc_show(&pl.netns, "class", &pl.device, true)?;
                    classes.insert(key.clone(), parse_class_stats(&text)?);
                    filters.insert(key.clone(), tc_show(&pl.netns, "filter", &pl.device, true)?);
                }
                let class_id = t.slot.class_id();
                let class = classes
                    .get(&key)
                    .and_then(|c| c.iter().find(|(id, _)| *id == class_id))
                    .map(|(_, s)| *s)
                    .ok_or_else(|| TestbedError::Parse {
                        what: format!("tc classes of {} in {}", pl.device, pl.netns),
                        detail: format!("class {class_id} of tunnel {} missing", t.policy.tunnel),
                    })?;
                let fc = filters
                    .get(&key)
                    .and_then(|f| parse_filter_counters(f, &t.slot.filter_handle(&pl.htid)))
                    .unwrap_or_default();
                out.push(TunnelMeter {
                    tunnel: t.policy.tunnel,
                    sublane: t.policy.sublane,
                    place: pl.place,
                    netns: pl.netns.clone(),
                    device: pl.device.clone(),
                    class_id,
                    rate_bps: t.policy.rate_bps,
                    class,
                    demoted: pl.demoted,
                    demoted_traffic: if pl.demoted && pl.tapped {
                        fc.action
                    } else {
                        None
                    },
                    filter_hits: fc.hits,
                });
            }
        }
        Ok(out)
    }

    /// Set the pfifo length of express sub-lane `sublane` (0 or 1) on
    /// switch port `port` (egress towards host `port`).
    pub fn set_express_queue(
        &self,
        port: usize,
        sublane: u8,
        pkts: u32,
    ) -> Result<(), TestbedError> {
        self.set_express_queue_at(Place::SwitchPort(port), sublane, pkts)
    }

    /// Set the pfifo length of express sub-lane `sublane` at any place
    /// (switch port or host NIC).
    pub fn set_express_queue_at(
        &self,
        place: Place,
        sublane: u8,
        pkts: u32,
    ) -> Result<(), TestbedError> {
        if sublane == 1 && self.config().express2_dscp.is_none() {
            return Err(PolicyError::Sublane(1).into());
        }
        let (ns, dev, _) = self.place_device(place)?;
        let line = express_queue_line(&dev, sublane, pkts)?;
        run_batch("tc", Some(&ns), &[line], false)?;
        Ok(())
    }
}
