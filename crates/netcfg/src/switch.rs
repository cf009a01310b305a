//! Switch configuration, written instead of applied.
//!
//! The controller programs the testbed's emulated switch itself; a real
//! switch is configured by its operator. [`plan`] turns the controller's
//! state (the [`FabricOp`]s that would program a fresh fabric,
//! `Controller::resync`) and the topology file into one [`Port`] per
//! switch egress link, and two renderings write it out:
//!
//! - [`render_tc`]: `tc -batch` lines for Linux-based switches, built by
//!   the same functions the testbed runs on its switch ports: the HTB root
//!   with the express classes (strict priority by DSCP) and best effort,
//!   then one class and filter per tunnel crossing the port (rate π,
//!   burst σ, its own short queue). Applied to a freshly created device,
//!   they give the tree of classes, queues and filters the testbed has.
//! - [`render_sonic`]: `config_db` JSON for SONiC: `DSCP_TO_TC_MAP` and
//!   `TC_TO_QUEUE_MAP` (express DSCP → traffic class 6 → queue 6, the
//!   second express DSCP → 5 → 5, everything else → 0), one `SCHEDULER`
//!   per port and class (the express queues `STRICT`, best effort `DWRR`,
//!   each with the HTB class's guaranteed rate as `cir` and the link rate
//!   as `pir`, in bytes per second), and the `QUEUE` and `PORT_QOS_MAP`
//!   bindings. SONiC's ACLs cannot match the tunnel id inside the UDP
//!   payload, so a SONiC switch gets no per-tunnel classes: tunnels are
//!   policed at their senders (host mode, [`crate::host`]), which also
//!   re-mark a demoted tunnel's packets to best effort.
//!
//! Ports are named by the topology's `device` field (for SONiC, put the
//! port name, e.g. `Ethernet0`, there). A demoted tunnel gets no class on
//! any switch (its sender re-marks it), and multicast trees come from the
//! switches' IGMP snooping: receivers join the tunnel's group
//! ([`xlane_ctl::fabric::group_of`]).

use crate::{tunnel_class, NetcfgError};
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, BTreeSet};
use xlane_ctl::fabric::FabricOp;
use xlane_testbed::policing::{allocate_slot, install_lines};
use xlane_testbed::shaping::{class_rates, htb_lines};
use xlane_testbed::{NodeKind, TestbedConfig, Topology, TunnelPolicy, TunnelSlot};

/// Hash table of the pref-1 u32 filters on a freshly shaped port (the
/// kernel numbers a qdisc's u32 tables from `800:` in creation order, and
/// the express DSCP filter is the first).
pub const FIRST_U32_TABLE: &str = "800";
/// Traffic class and queue of express sub-lane 0 on SONiC.
pub const SONIC_EXPRESS_QUEUE: u8 = 6;
/// Traffic class and queue of express sub-lane 1 on SONiC.
pub const SONIC_EXPRESS2_QUEUE: u8 = 5;
/// Traffic class and queue of best effort on SONiC.
pub const SONIC_BEST_EFFORT_QUEUE: u8 = 0;
/// Name of the QoS maps written for SONiC.
pub const SONIC_MAP: &str = "XLANE";

/// A tunnel as one port enforces it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortTunnel {
    /// Its slot (class `1:<1000+slot>`, the same on every port).
    pub slot: TunnelSlot,
    /// Its class.
    pub policy: TunnelPolicy,
}

/// One switch egress port.
#[derive(Debug, Clone, PartialEq)]
pub struct Port {
    /// The switch.
    pub switch: String,
    /// The port's device (topology `device`).
    pub device: String,
    /// The node at the other end.
    pub peer: String,
    /// The link rate, bit/s.
    pub rate_bps: u64,
    /// DSCPs, queue lengths and class shares of the port.
    pub shaping: TestbedConfig,
    /// Tunnels that egress here (granted, not demoted), by slot.
    pub tunnels: Vec<PortTunnel>,
}

/// Every switch port of a topology with the tunnels it enforces.
#[derive(Debug, Clone, PartialEq)]
pub struct SwitchPlan {
    /// The ports, in topology order.
    pub ports: Vec<Port>,
    /// Demoted tunnels (on no port; their senders re-mark them).
    pub demoted: Vec<u64>,
}

/// The ports of every switch in `topo` with the tunnels of `ops` (the
/// controller's resync: an install per tunnel, a demote per demoted one).
/// Slots are given in tunnel id order, as the testbed gives them to
/// tunnels installed in that order.
pub fn plan(topo: &Topology, ops: &[FabricOp]) -> Result<SwitchPlan, NetcfgError> {
    let mut tunnels: BTreeMap<u64, (TunnelPolicy, Vec<(String, String)>)> = BTreeMap::new();
    let mut demoted = BTreeSet::new();
    for op in ops {
        match op {
            FabricOp::Install {
                tunnel,
                hops,
                sublane,
                rate_bps,
                burst_bytes,
                queue_pkts,
                ..
            } => {
                let p = tunnel_class(tunnel.0, *sublane, *rate_bps, *burst_bytes, *queue_pkts)?;
                demoted.remove(&tunnel.0);
                tunnels.insert(tunnel.0, (p, hops.clone()));
            }
            FabricOp::Demote { tunnel } => {
                demoted.insert(tunnel.0);
            }
            FabricOp::Remove { tunnel } => {
                tunnels.remove(&tunnel.0);
                demoted.remove(&tunnel.0);
            }
        }
    }
    let switch = |name: &str| {
        topo.node
            .iter()
            .any(|n| n.name == name && n.kind == NodeKind::Switch)
    };
    let mut taken = BTreeSet::new();
    let mut slots = BTreeMap::new();
    for (id, (p, hops)) in &tunnels {
        for (from, to) in hops {
            if switch(from) && topo.link(from, to).is_none() {
                return Err(NetcfgError::Topology(format!(
                    "tunnel {id} crosses {from} -> {to}, a link the topology file does not have"
                )));
            }
        }
        let slot = allocate_slot(p.tunnel, |s| taken.contains(&s))
            .ok_or_else(|| NetcfgError::Topology("more tunnels than tunnel slots".into()))?;
        taken.insert(slot);
        slots.insert(*id, slot);
    }
    let mut ports = Vec::new();
    for link in topo.link.iter().filter(|l| switch(&l.from)) {
        let mut here = Vec::new();
        for (id, (p, hops)) in &tunnels {
            let crosses = hops.iter().any(|(f, t)| *f == link.from && *t == link.to);
            if !crosses || demoted.contains(id) {
                continue;
            }
            if p.rate_bps > link.bandwidth_bps {
                return Err(NetcfgError::Topology(format!(
                    "tunnel {id}: rate {} bit/s exceeds {} -> {} ({} bit/s)",
                    p.rate_bps, link.from, link.to, link.bandwidth_bps
                )));
            }
            here.push(PortTunnel {
                slot: slots[id],
                policy: p.clone(),
            });
        }
        ports.push(Port {
            switch: link.from.clone(),
            device: link.device.clone(),
            peer: link.to.clone(),
            rate_bps: link.bandwidth_bps,
            shaping: crate::port_shaping(topo, link),
            tunnels: here,
        });
    }
    Ok(SwitchPlan {
        ports,
        demoted: demoted.into_iter().collect(),
    })
}

/// The switches that have ports in `plan`, in order.
pub fn switches(plan: &SwitchPlan) -> Vec<&str> {
    let mut v: Vec<&str> = Vec::new();
    for p in &plan.ports {
        if !v.contains(&p.switch.as_str()) {
            v.push(&p.switch);
        }
    }
    v
}

/// The `tc -batch` lines of one port, without comments: its classes, then
/// its tunnels'.
pub fn port_lines(port: &Port) -> Vec<String> {
    let mut v = htb_lines(&port.device, port.rate_bps, &port.shaping);
    for t in &port.tunnels {
        v.extend(install_lines(
            &port.device,
            FIRST_U32_TABLE,
            t.slot,
            &t.policy,
        ));
    }
    v
}

/// `tc -batch` input for the ports of `switch` (all switches if `None`),
/// each port's lines after a comment naming it.
pub fn render_tc(plan: &SwitchPlan, switch: Option<&str>) -> String {
    let mut out = String::from(
        "# xlane switch configuration (xlane ctl export-switch-config): run on each\n\
         # switch with `tc -batch FILE`, on ports without a root qdisc.\n",
    );
    for p in plan
        .ports
        .iter()
        .filter(|p| switch.map_or(true, |s| s == p.switch))
    {
        out.push_str(&format!(
            "# switch {}, port {} (to {}): {} bit/s, {} tunnel(s)\n",
            p.switch,
            p.device,
            p.peer,
            p.rate_bps,
            p.tunnels.len()
        ));
        for l in port_lines(p) {
            out.push_str(&l);
            out.push('\n');
        }
    }
    if !plan.demoted.is_empty() {
        let ids: Vec<String> = plan.demoted.iter().map(|t| t.to_string()).collect();
        out.push_str(&format!(
            "# demoted (best effort, re-marked by their senders): {}\n",
            ids.join(", ")
        ));
    }
    out
}

fn scheduler(kind: &str, cir_bps: u64, pir_bps: u64) -> Value {
    let mut m = Map::new();
    m.insert("type".into(), json!(kind));
    if kind == "DWRR" {
        m.insert("weight".into(), json!("1"));
    }
    m.insert("meter_type".into(), json!("bytes"));
    m.insert("cir".into(), json!((cir_bps / 8).to_string()));
    m.insert("pir".into(), json!((pir_bps / 8).to_string()));
    Value::Object(m)
}

/// SONiC `config_db` JSON for the ports of `switch` (all if `None`).
pub fn render_sonic(plan: &SwitchPlan, switch: Option<&str>) -> Value {
    let ports: Vec<&Port> = plan
        .ports
        .iter()
        .filter(|p| switch.map_or(true, |s| s == p.switch))
        .collect();
    let (dscp, dscp2) = ports
        .first()
        .map(|p| (p.shaping.express_dscp, p.shaping.express2_dscp))
        .unwrap_or((TestbedConfig::default().express_dscp, None));
    let mut dscp_map = Map::new();
    for d in 0u8..64 {
        let tc = if d == dscp {
            SONIC_EXPRESS_QUEUE
        } else if Some(d) == dscp2 {
            SONIC_EXPRESS2_QUEUE
        } else {
            SONIC_BEST_EFFORT_QUEUE
        };
        dscp_map.insert(d.to_string(), json!(tc.to_string()));
    }
    let mut tc_map = Map::new();
    let mut classes = vec![SONIC_BEST_EFFORT_QUEUE, SONIC_EXPRESS_QUEUE];
    if dscp2.is_some() {
        classes.push(SONIC_EXPRESS2_QUEUE);
    }
    for q in &classes {
        tc_map.insert(q.to_string(), json!(q.to_string()));
    }
    let (mut sched, mut queue, mut qos) = (Map::new(), Map::new(), Map::new());
    for p in ports {
        let r = class_rates(p.rate_bps, &p.shaping);
        let name = |c: &str| format!("xlane.{}.{c}", p.device);
        sched.insert(name("express"), scheduler("STRICT", r.express, p.rate_bps));
        queue.insert(
            format!("{}|{SONIC_EXPRESS_QUEUE}", p.device),
            json!({"scheduler": name("express")}),
        );
        if p.shaping.express2_dscp.is_some() {
            sched.insert(name("express2"), scheduler("STRICT", r.express, p.rate_bps));
            queue.insert(
                format!("{}|{SONIC_EXPRESS2_QUEUE}", p.device),
                json!({"scheduler": name("express2")}),
            );
        }
        sched.insert(
            name("best_effort"),
            scheduler("DWRR", r.best_effort, p.rate_bps),
        );
        queue.insert(
            format!("{}|{SONIC_BEST_EFFORT_QUEUE}", p.device),
            json!({"scheduler": name("best_effort")}),
        );
        qos.insert(
            p.device.clone(),
            json!({"dscp_to_tc_map": SONIC_MAP, "tc_to_queue_map": SONIC_MAP}),
        );
    }
    json!({
        "DSCP_TO_TC_MAP": {SONIC_MAP: dscp_map},
        "TC_TO_QUEUE_MAP": {SONIC_MAP: tc_map},
        "SCHEDULER": sched,
        "QUEUE": queue,
        "PORT_QOS_MAP": qos,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use xlane_ctl::proto::TunnelId;
    use xlane_testbed::{Link, Node};

    fn topo() -> Topology {
        let node = |name: &str, kind| Node {
            name: name.into(),
            kind,
            netns: format!("t-{name}"),
            addr: None,
        };
        let link = |from: &str, to: &str, device: &str| Link {
            from: from.into(),
            to: to.into(),
            device: device.into(),
            bandwidth_bps: 1_000_000_000,
            express_queue_pkts: 64,
            best_effort_queue_pkts: 1000,
            min_latency_ns: 0,
            max_jitter_ns: 0,
            measured: false,
            min_includes_tx: false,
        };
        Topology {
            schema: 1,
            prefix: "t".into(),
            express_dscp: 46,
            express2_dscp: Some(40),
            express_rate_percent: 10,
            burst_ns: 50_000,
            node: vec![
                node("h0", NodeKind::Host),
                node("h1", NodeKind::Host),
                node("h2", NodeKind::Host),
                node("sw", NodeKind::Switch),
            ],
            link: vec![
                link("h0", "sw", "h0-eth"),
                link("sw", "h0", "Ethernet0"),
                link("h1", "sw", "h1-eth"),
                link("sw", "h1", "Ethernet4"),
                link("h2", "sw", "h2-eth"),
                link("sw", "h2", "Ethernet8"),
            ],
        }
    }

    fn install(id: u64, to: &[&str]) -> FabricOp {
        let mut hops = vec![("h0".to_string(), "sw".to_string())];
        hops.extend(to.iter().map(|t| ("sw".to_string(), t.to_string())));
        FabricOp::Install {
            tunnel: TunnelId(id),
            sender: "h0".into(),
            receivers: to.iter().map(|t| t.to_string()).collect(),
            hops,
            sublane: 0,
            load_bytes: 100,
            period_ns: 1_000_000,
            rate_bps: 800_000,
            burst_bytes: 100,
            queue_pkts: 1,
        }
    }

    fn tunnels_on(plan: &SwitchPlan, device: &str) -> Vec<u32> {
        let p = plan.ports.iter().find(|p| p.device == device).unwrap();
        p.tunnels.iter().map(|t| t.policy.tunnel).collect()
    }

    #[test]
    fn tunnels_land_on_the_ports_of_their_trees() {
        let ops = [
            install(1, &["h1"]),
            install(2, &["h1", "h2"]),
            install(3, &["h2"]),
            FabricOp::Demote {
                tunnel: TunnelId(3),
            },
            install(4, &["h2"]),
            FabricOp::Remove {
                tunnel: TunnelId(4),
            },
        ];
        let plan = plan(&topo(), &ops).unwrap();
        // Only the switch's egress links are ports.
        assert_eq!(plan.ports.len(), 3);
        assert!(plan.ports.iter().all(|p| p.switch == "sw"));
        let cases: [(&str, &[u32]); 3] = [
            ("Ethernet0", &[]),
            ("Ethernet4", &[1, 2]),
            ("Ethernet8", &[2]),
        ];
        for (dev, want) in cases {
            assert_eq!(tunnels_on(&plan, dev), want, "{dev}");
        }
        assert_eq!(plan.demoted, vec![3]);
        // Same slot on every port, the preferred one.
        let p8 = &plan.ports[2].tunnels[0];
        assert_eq!(p8.slot, TunnelSlot::preferred(2));
        assert_eq!(p8.policy.queue_pkts, crate::MIN_QUEUE_PKTS);
    }

    #[test]
    fn tc_lines_are_the_testbeds() {
        let plan = plan(&topo(), &[install(5, &["h1"])]).unwrap();
        let port = &plan.ports[1];
        let mut want = htb_lines("Ethernet4", 1_000_000_000, &port.shaping);
        want.extend(install_lines(
            "Ethernet4",
            "800",
            TunnelSlot::preferred(5),
            &port.tunnels[0].policy,
        ));
        assert_eq!(port_lines(port), want);
        let text = render_tc(&plan, Some("sw"));
        assert!(text.contains("# switch sw, port Ethernet4 (to h1)"));
        assert!(text.contains("classid 1:1006 htb rate"), "{text}");
        assert!(render_tc(&plan, Some("other"))
            .lines()
            .all(|l| l.starts_with('#')));
    }

    #[test]
    fn sonic_maps_dscp_to_strict_queues() {
        let plan = plan(&topo(), &[install(5, &["h1"])]).unwrap();
        let v = render_sonic(&plan, None);
        let m = &v["DSCP_TO_TC_MAP"][SONIC_MAP];
        let cases = [("46", "6"), ("40", "5"), ("0", "0"), ("63", "0")];
        for (d, tc) in cases {
            assert_eq!(m[d], tc, "DSCP {d}");
        }
        assert_eq!(m.as_object().unwrap().len(), 64);
        assert_eq!(v["TC_TO_QUEUE_MAP"][SONIC_MAP]["6"], "6");
        let ex = &v["SCHEDULER"]["xlane.Ethernet4.express"];
        assert_eq!(ex["type"], "STRICT");
        // 10 % of 1 Gbit/s guaranteed, the link as peak, in bytes/s.
        assert_eq!(ex["cir"], "12500000");
        assert_eq!(ex["pir"], "125000000");
        assert_eq!(
            v["SCHEDULER"]["xlane.Ethernet4.best_effort"]["type"],
            "DWRR"
        );
        assert_eq!(
            v["QUEUE"]["Ethernet4|6"]["scheduler"],
            "xlane.Ethernet4.express"
        );
        assert_eq!(v["PORT_QOS_MAP"]["Ethernet8"]["dscp_to_tc_map"], SONIC_MAP);
    }

    #[test]
    fn unknown_links_and_fast_tunnels_are_refused() {
        let mut op = install(1, &["h1"]);
        if let FabricOp::Install { hops, .. } = &mut op {
            hops.push(("sw".into(), "h9".into()));
        }
        let e = plan(&topo(), &[op]).unwrap_err();
        assert!(e.to_string().contains("sw -> h9"), "{e}");
        let mut op = install(1, &["h1"]);
        if let FabricOp::Install { rate_bps, .. } = &mut op {
            *rate_bps = 2_000_000_000;
        }
        let e = plan(&topo(), &[op]).unwrap_err();
        assert!(e.to_string().contains("exceeds sw -> h1"), "{e}");
    }
}
