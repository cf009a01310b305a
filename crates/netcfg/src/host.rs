//! Host mode: a host enforces the tunnels it sends on, on its own
//! interface, with no testbed.
//!
//! [`wanted`] reads the controller's tunnel list (`ListTunnels`) and keeps
//! the tunnels this host sends on; [`diff`] says what to change on the
//! interface to get there; [`Egress`] owns the interface and carries the
//! changes out:
//!
//! - at [`Egress::take`], the HTB root the testbed gives every port
//!   ([`xlane_testbed::shaping::htb_lines`]: the express classes served
//!   first by DSCP, best effort with the rest), and an `iptables` chain in
//!   the `mangle` table's `POSTROUTING` for packets leaving the interface;
//! - per granted tunnel, its class at rate π with a burst of σ and its own
//!   short queue ([`xlane_testbed::policing::install_lines`]) and a rule
//!   that marks its packets (matched like the class filter: IPv4, UDP,
//!   payload magic `XL`, tunnel id) with its sub-lane's DSCP;
//! - a demoted tunnel's filter steers into best effort and its packets are
//!   re-marked to DSCP 0, so switches that read only DSCP keep it out of
//!   the express queues;
//! - [`Egress::restore`] (also on drop) deletes the root qdisc (the
//!   kernel's default comes back) and the chain.
//!
//! An interface with a root qdisc someone configured is refused: host mode
//! does not guess how to put it back.

use crate::{tunnel_class, NetcfgError};
use std::collections::BTreeMap;
use xlane_ctl::proto::{TunnelInfo, TunnelState};
use xlane_host::level::xtables;
use xlane_testbed::exec::{run, run_batch};
use xlane_testbed::policing::{
    allocate_slot, install_lines, parse_root_htid, remove_lines, steer_line, Steer,
    EXPRESS_FILTER_PREF, IP_OFFSET_MAGIC, IP_OFFSET_TUNNEL, XLANE_MAGIC,
};
use xlane_testbed::shaping::htb_lines;
use xlane_testbed::{TestbedConfig, Topology, TunnelPolicy, TunnelSlot};

/// What a host enforces for one of its tunnels.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wanted {
    /// Its class.
    pub policy: TunnelPolicy,
    /// Granted (its own class, its sub-lane's DSCP) or demoted (best
    /// effort, DSCP 0).
    pub active: bool,
}

/// A change to the interface.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// A new tunnel, or one whose class changed (removed first).
    Add(Wanted),
    /// Same class, granted ↔ demoted.
    Steer(Wanted),
    /// The tunnel is gone.
    Remove(u32),
}

/// The port a host shapes: its link towards the network in the topology
/// file (rate, queues) and the file's DSCPs and class shares.
pub fn host_port(topo: &Topology, host: &str) -> Result<(u64, TestbedConfig), NetcfgError> {
    let link = topo.link.iter().find(|l| l.from == host).ok_or_else(|| {
        NetcfgError::Topology(format!(
            "host `{host}` has no link in the topology file (is it named there?)"
        ))
    })?;
    Ok((link.bandwidth_bps, crate::port_shaping(topo, link)))
}

/// The tunnels `host` sends on, from the controller's list, by wire id.
pub fn wanted(host: &str, list: &[TunnelInfo]) -> Result<BTreeMap<u32, Wanted>, NetcfgError> {
    let mut out = BTreeMap::new();
    for t in list.iter().filter(|t| t.sender == host) {
        let r = &t.resources;
        let rate = xlane_te::alloc::rate_bps(r.load_bytes, r.period_ns);
        let policy = tunnel_class(t.tunnel.0, t.sublane, rate, r.load_bytes, 1)?;
        out.insert(
            policy.tunnel,
            Wanted {
                policy,
                active: t.state == TunnelState::Active,
            },
        );
    }
    Ok(out)
}

/// What to change to go from `have` to `want`: removals first (they free
/// slots), then additions and re-steering, each in tunnel order.
pub fn diff(have: &BTreeMap<u32, Wanted>, want: &BTreeMap<u32, Wanted>) -> Vec<Change> {
    let mut v: Vec<Change> = have
        .keys()
        .filter(|t| !want.contains_key(t))
        .map(|&t| Change::Remove(t))
        .collect();
    for (t, w) in want {
        match have.get(t) {
            None => v.push(Change::Add(w.clone())),
            Some(h) if h.policy != w.policy => {
                v.push(Change::Remove(*t));
                v.push(Change::Add(w.clone()));
            }
            Some(h) if h.active != w.active => v.push(Change::Steer(w.clone())),
            Some(_) => {}
        }
    }
    v
}

/// The `iptables` u32 match of a tunnel's packets (the class filter's:
/// IPv4 with IHL 5, not a non-first fragment, UDP, magic, tunnel id).
pub fn u32_match(tunnel: u32) -> String {
    format!(
        "0>>24=0x45&&6>>16&0x1fff=0&&6&0xff=17&&{IP_OFFSET_MAGIC}>>16={XLANE_MAGIC:#x}&&{IP_OFFSET_TUNNEL}={tunnel:#x}"
    )
}

/// Why the interface could not be configured or restored.
#[derive(Debug, thiserror::Error)]
pub enum EgressError {
    /// A `tc` or `iptables` command failed.
    #[error(transparent)]
    Command(#[from] xlane_testbed::CommandError),
    /// The interface has a configured root qdisc.
    #[error("{dev} already has a configured root qdisc ({found}); host mode replaces only the kernel's default: remove it first (tc qdisc del dev {dev} root)")]
    Busy {
        /// The interface.
        dev: String,
        /// The qdisc line found.
        found: String,
    },
    /// A tunnel on a sub-lane without a DSCP.
    #[error("tunnel {0}: sub-lane {1} has no DSCP in the topology file")]
    Sublane(u32, u8),
    /// No slot left, or no filter table after shaping.
    #[error("{0}")]
    Internal(String),
}

/// The interface, owned by host mode until [`Egress::restore`].
#[derive(Debug)]
pub struct Egress {
    dev: String,
    chain: String,
    shaping: TestbedConfig,
    htid: String,
    have: BTreeMap<u32, Wanted>,
    slots: BTreeMap<u32, TunnelSlot>,
    /// Packets marked per tunnel before the chain was last rewritten.
    marked_before: BTreeMap<u32, u64>,
    restored: bool,
}

fn ipt(args: &[&str]) -> Result<String, xlane_testbed::CommandError> {
    let mut a = vec!["-w", "-t", "mangle"];
    a.extend_from_slice(args);
    run(xtables(false), &a)
}

/// The `iptables` chain of `dev` (chain names hold at most 28 bytes).
pub fn chain_name(dev: &str) -> String {
    let mut c = format!("XLANE-{dev}");
    c.truncate(28);
    c
}

impl Egress {
    /// Shape `dev` (in the current network namespace) to `rate_bps` with
    /// the classes of `shaping`, and hook the marking chain to it.
    pub fn take(dev: &str, rate_bps: u64, shaping: TestbedConfig) -> Result<Egress, EgressError> {
        let root = run("tc", &["qdisc", "show", "dev", dev, "root"])?;
        let line = root.lines().next().unwrap_or("").trim().to_string();
        // The kernel's defaults have handle 0: (or none at all).
        let configured = line.split_whitespace().nth(2).is_some_and(|h| h != "0:");
        if configured {
            return Err(EgressError::Busy {
                dev: dev.to_string(),
                found: line,
            });
        }
        let chain = chain_name(dev);
        let mut e = Egress {
            dev: dev.to_string(),
            chain,
            shaping,
            htid: String::new(),
            have: BTreeMap::new(),
            slots: BTreeMap::new(),
            marked_before: BTreeMap::new(),
            restored: false,
        };
        // A chain left by a run that did not restore: start clean.
        e.unhook();
        run_batch("tc", None, &htb_lines(dev, rate_bps, &e.shaping), false)?;
        let filters = run("tc", &["filter", "show", "dev", dev])?;
        e.htid = parse_root_htid(&filters, EXPRESS_FILTER_PREF)
            .ok_or_else(|| EgressError::Internal(format!("{dev}: no express filter table")))?;
        ipt(&["-N", &e.chain])?;
        ipt(&["-A", "POSTROUTING", "-o", dev, "-j", &e.chain])?;
        Ok(e)
    }

    /// The interface.
    pub fn device(&self) -> &str {
        &self.dev
    }

    /// The marking chain.
    pub fn chain(&self) -> &str {
        &self.chain
    }

    /// The tunnels enforced now.
    pub fn enforced(&self) -> &BTreeMap<u32, Wanted> {
        &self.have
    }

    /// The slot (class `1:<1000+slot>`) of an enforced tunnel.
    pub fn slot(&self, tunnel: u32) -> Option<TunnelSlot> {
        self.slots.get(&tunnel).copied()
    }

    fn dscp(&self, w: &Wanted) -> Result<u8, EgressError> {
        if !w.active {
            return Ok(0);
        }
        match w.policy.sublane {
            0 => Ok(self.shaping.express_dscp),
            1 => self
                .shaping
                .express2_dscp
                .ok_or(EgressError::Sublane(w.policy.tunnel, 1)),
            s => Err(EgressError::Sublane(w.policy.tunnel, s)),
        }
    }

    /// Bring the interface to `want`; returns how many changes were made.
    /// On error the tunnels changed so far stay changed and the failing
    /// one is left out (the next call tries it again).
    pub fn apply(&mut self, want: &BTreeMap<u32, Wanted>) -> Result<usize, EgressError> {
        let changes = diff(&self.have, want);
        let n = changes.len();
        if n == 0 {
            return Ok(0);
        }
        for c in changes {
            match c {
                Change::Remove(t) => {
                    if let Some(slot) = self.slots.remove(&t) {
                        run_batch("tc", None, &remove_lines(&self.dev, &self.htid, slot), true)?;
                    }
                    self.have.remove(&t);
                }
                Change::Add(w) => {
                    self.dscp(&w)?;
                    let t = w.policy.tunnel;
                    let used: Vec<TunnelSlot> = self.slots.values().copied().collect();
                    let slot = allocate_slot(t, |s| used.contains(&s))
                        .ok_or_else(|| EgressError::Internal("no free tunnel slot".into()))?;
                    let mut lines = install_lines(&self.dev, &self.htid, slot, &w.policy);
                    if !w.active {
                        lines.push(self.steer(slot, &w));
                    }
                    run_batch("tc", None, &lines, false)?;
                    self.slots.insert(t, slot);
                    self.have.insert(t, w);
                }
                Change::Steer(w) => {
                    self.dscp(&w)?;
                    let t = w.policy.tunnel;
                    if let Some(&slot) = self.slots.get(&t) {
                        run_batch("tc", None, &[self.steer(slot, &w)], false)?;
                    }
                    self.have.insert(t, w);
                }
            }
        }
        self.mark()?;
        Ok(n)
    }

    fn steer(&self, slot: TunnelSlot, w: &Wanted) -> String {
        let to = if w.active {
            Steer::Own
        } else {
            Steer::BestEffort { tap: None }
        };
        steer_line(&self.dev, &self.htid, slot, w.policy.tunnel, to)
    }

    /// Rewrite the marking chain from the enforced set (keeping what its
    /// counters said).
    fn mark(&mut self) -> Result<(), EgressError> {
        for (t, n) in self.chain_counts()? {
            *self.marked_before.entry(t).or_default() += n;
        }
        ipt(&["-F", &self.chain])?;
        for (t, w) in &self.have {
            let dscp = self.dscp(w)?.to_string();
            let comment = format!("xlane tunnel {t}");
            ipt(&[
                "-A",
                &self.chain,
                "-p",
                "udp",
                "-m",
                "u32",
                "--u32",
                &u32_match(*t),
                "-m",
                "comment",
                "--comment",
                &comment,
                "-j",
                "DSCP",
                "--set-dscp",
                &dscp,
            ])?;
        }
        Ok(())
    }

    /// Packets marked per tunnel since the interface was taken.
    pub fn marked(&self) -> Result<BTreeMap<u32, u64>, EgressError> {
        let mut m = self.marked_before.clone();
        for (t, n) in self.chain_counts()? {
            *m.entry(t).or_default() += n;
        }
        Ok(m)
    }

    /// The chain's counters now, per tunnel.
    fn chain_counts(&self) -> Result<BTreeMap<u32, u64>, EgressError> {
        let out = ipt(&["-L", &self.chain, "-v", "-x", "-n"])?;
        let mut m = BTreeMap::new();
        for l in out.lines() {
            let Some(i) = l.find("xlane tunnel ") else {
                continue;
            };
            let id = l[i + 13..]
                .split(|c: char| !c.is_ascii_digit())
                .next()
                .and_then(|s| s.parse().ok());
            let pkts = l.split_whitespace().next().and_then(|s| s.parse().ok());
            if let (Some(id), Some(p)) = (id, pkts) {
                m.insert(id, p);
            }
        }
        Ok(m)
    }

    /// Remove the chain and its hook, ignoring what is already gone.
    fn unhook(&self) {
        while ipt(&["-D", "POSTROUTING", "-o", &self.dev, "-j", &self.chain]).is_ok() {}
        let _ = ipt(&["-F", &self.chain]);
        let _ = ipt(&["-X", &self.chain]);
    }

    /// Put the interface back: the root qdisc deleted (the kernel's default
    /// returns), the chain removed. Idempotent.
    pub fn restore(&mut self) -> Result<(), EgressError> {
        if self.restored {
            return Ok(());
        }
        self.restored = true;
        self.unhook();
        run("tc", &["qdisc", "del", "dev", &self.dev, "root"])?;
        self.have.clear();
        self.slots.clear();
        Ok(())
    }
}

impl Drop for Egress {
    fn drop(&mut self) {
        let _ = self.restore();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use xlane_ctl::proto::TunnelId;
    use xlane_te::Resources;

    fn info(id: u64, sender: &str, load: u32, state: TunnelState) -> TunnelInfo {
        TunnelInfo {
            tunnel: TunnelId(id),
            sender: sender.into(),
            receivers: vec!["h1".into()],
            sublane: 0,
            state,
            requested_period_ns: 1_000_000,
            resources: Resources {
                load_bytes: load,
                period_ns: 1_000_000,
                min_latency_ns: 1_000,
                max_jitter_ns: 9_000,
            },
        }
    }

    #[test]
    fn a_host_enforces_its_own_tunnels() {
        let list = [
            info(1, "h0", 100, TunnelState::Active),
            info(2, "h1", 100, TunnelState::Active),
            info(3, "h0", 200, TunnelState::Unbounded),
        ];
        let w = wanted("h0", &list).unwrap();
        assert_eq!(w.keys().copied().collect::<Vec<_>>(), vec![1, 3]);
        // 100 B per 1 ms = 800 kbit/s, burst σ.
        assert_eq!(w[&1].policy.rate_bps, 800_000);
        assert_eq!(w[&1].policy.burst_bytes, 100);
        assert!(w[&1].active && !w[&3].active);
    }

    #[test]
    fn diffs() {
        let w = |id: u64, load: u32, st: TunnelState| {
            wanted("h0", &[info(id, "h0", load, st)]).unwrap()[&(id as u32)].clone()
        };
        let set = |v: &[Wanted]| {
            v.iter()
                .map(|w| (w.policy.tunnel, w.clone()))
                .collect::<BTreeMap<_, _>>()
        };
        let (a, a_demoted, a_bigger, b) = (
            w(1, 100, TunnelState::Active),
            w(1, 100, TunnelState::Unbounded),
            w(1, 300, TunnelState::Active),
            w(2, 100, TunnelState::Active),
        );
        type Case = (&'static str, Vec<Wanted>, Vec<Wanted>, Vec<Change>);
        let cases: Vec<Case> = vec![
            ("nothing", vec![a.clone()], vec![a.clone()], vec![]),
            ("new", vec![], vec![a.clone()], vec![Change::Add(a.clone())]),
            (
                "gone",
                vec![a.clone(), b.clone()],
                vec![b.clone()],
                vec![Change::Remove(1)],
            ),
            (
                "demoted",
                vec![a.clone()],
                vec![a_demoted.clone()],
                vec![Change::Steer(a_demoted.clone())],
            ),
            (
                "re-admitted",
                vec![a_demoted.clone()],
                vec![a.clone()],
                vec![Change::Steer(a.clone())],
            ),
            (
                "changed class",
                vec![a.clone()],
                vec![a_bigger.clone()],
                vec![Change::Remove(1), Change::Add(a_bigger.clone())],
            ),
            (
                "removals first",
                vec![b.clone()],
                vec![a.clone()],
                vec![Change::Remove(2), Change::Add(a.clone())],
            ),
        ];
        for (name, have, want, expect) in cases {
            assert_eq!(diff(&set(&have), &set(&want)), expect, "{name}");
        }
    }

    #[test]
    fn ports_and_matches() {
        let m = u32_match(5);
        assert!(m.ends_with("36=0x5"), "{m}");
        assert!(m.contains("28>>16=0x584c"), "{m}");
        assert_eq!(chain_name("eth0"), "XLANE-eth0");
        assert_eq!(chain_name(&"x".repeat(40)).len(), 28);
        let topo = Topology {
            schema: 1,
            prefix: "t".into(),
            express_dscp: 46,
            express2_dscp: None,
            express_rate_percent: 20,
            burst_ns: 50_000,
            node: vec![],
            link: vec![xlane_testbed::Link {
                from: "h0".into(),
                to: "sw".into(),
                device: "eth0".into(),
                bandwidth_bps: 10_000_000_000,
                express_queue_pkts: 32,
                best_effort_queue_pkts: 500,
                min_latency_ns: 0,
                max_jitter_ns: 0,
                measured: false,
                min_includes_tx: true,
            }],
        };
        let (rate, s) = host_port(&topo, "h0").unwrap();
        assert_eq!(rate, 10_000_000_000);
        assert_eq!((s.express_queue_pkts, s.express_rate_percent), (32, 20));
        let e = host_port(&topo, "h9").unwrap_err();
        assert!(e.to_string().contains("h9"), "{e}");
    }
}
