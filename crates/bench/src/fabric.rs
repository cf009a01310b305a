//! The controller's [`Fabric`] for the emulated datacenter: what the
//! controller asks of the network, carried out on the testbed's switch and
//! host NICs.
//!
//! - **Install**: a per-tunnel HTB class on the sender's NIC (the host's
//!   rate limiter) and on every switch port of the tree, at the tunnel's
//!   rate with its own short queue (see `xlane_testbed::policing`), and for
//!   a multicast tunnel the tree itself: permanent entries in the switch's
//!   multicast database so that the tunnel's group ([`group_of`]) reaches
//!   exactly its receivers' ports (multicast snooping and the bridge's own
//!   querier are turned on at attach; without them the bridge floods).
//! - **Demote**: the tunnel's packets go to best effort; still metered.
//! - **Remove**: class, filter and tree entries deleted — except for a
//!   demoted tunnel, whose filter keeps steering it into best effort.
//! - An Install that changes nothing (a range-only TE change) leaves the
//!   running classes alone.
//! - **Meters**: per tunnel, what its sender's NIC class offered (sent +
//!   dropped) in the interval since the last reading, and what that class
//!   dropped; for a demoted tunnel, what the counting tap saw. The interval
//!   is the longest the reading can have covered (see [`TestbedFabric`]'s
//!   `meters`), so rates are never overstated.

use std::collections::HashMap;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use xlane_ctl::fabric::{Fabric, FabricError, FabricOp, SwitchMeter};
use xlane_ctl::proto::TunnelId;
use xlane_host::socket::realtime_ns;
use xlane_netcfg::tunnel_class;
use xlane_testbed::{Place, Testbed, TestbedError, TunnelPolicy};

pub use xlane_ctl::fabric::group_of;

/// The testbed as the controller programs it.
pub struct TestbedFabric {
    tb: Testbed,
    hosts: usize,
    /// Multicast tree entries installed per tunnel: switch ports.
    trees: HashMap<u64, Vec<usize>>,
    /// Last counters per tunnel: (time, offered packets, bytes, dropped).
    last: HashMap<u64, (u64, u64, u64, u64)>,
    /// What each installed tunnel was installed with.
    installed: HashMap<u64, TunnelPolicy>,
    /// Tunnels demoted (their packets stay in best effort even after
    /// removal: a demoted sender is not trusted to stop).
    demoted: std::collections::HashSet<u64>,
    /// Tunnels installed now, shared with whoever waits for them.
    installed_count: Arc<AtomicUsize>,
}

fn failed(e: impl std::fmt::Display) -> FabricError {
    FabricError::Failed(e.to_string())
}

fn host_index(name: &str, hosts: usize) -> Result<usize, FabricError> {
    name.strip_prefix('h')
        .and_then(|s| s.parse::<usize>().ok())
        .filter(|&i| i < hosts)
        .ok_or_else(|| failed(format!("no testbed host named {name:?}")))
}

impl TestbedFabric {
    /// Take a handle on testbed `prefix` (made by this or another process)
    /// and switch its bridge to multicast snooping with its own querier.
    pub fn attach(prefix: &str, hosts: usize) -> Result<TestbedFabric, TestbedError> {
        let tb = Testbed::attach(prefix)?;
        let f = TestbedFabric {
            tb,
            hosts,
            trees: HashMap::new(),
            last: HashMap::new(),
            installed: HashMap::new(),
            demoted: Default::default(),
            installed_count: Arc::default(),
        };
        f.bridge(&[
            "link",
            "set",
            "dev",
            f.tb.bridge(),
            "type",
            "bridge",
            "mcast_snooping",
            "1",
            "mcast_querier",
            "1",
        ])
        .map_err(|e| TestbedError::Invalid(e.to_string()))?;
        Ok(f)
    }

    /// How many tunnels are installed (live), readable after the fabric
    /// has been handed to the daemon.
    pub fn installed_counter(&self) -> Arc<AtomicUsize> {
        Arc::clone(&self.installed_count)
    }

    /// Waits until `counter` (from [`Self::installed_counter`]) reaches
    /// `n` or `limit` passes: the daemon installs in its tick, and `tc` is
    /// slow on a loaded machine. Returns the count reached.
    pub fn wait_installed(counter: &AtomicUsize, n: usize, limit: std::time::Duration) -> usize {
        let deadline = std::time::Instant::now() + limit;
        while counter.load(Ordering::Relaxed) < n && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        counter.load(Ordering::Relaxed)
    }

    fn bridge(&self, args: &[&str]) -> Result<(), FabricError> {
        let prog = if args.first() == Some(&"link") {
            "ip"
        } else {
            "bridge"
        };
        let out = Command::new(prog)
            .arg("-n")
            .arg(self.tb.switch_netns())
            .args(args)
            .output()?;
        if out.status.success() {
            Ok(())
        } else {
            Err(failed(format!(
                "{prog} {}: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            )))
        }
    }

    fn mdb(&self, op: &str, tunnel: u64, port: usize) -> Result<(), FabricError> {
        let dev = self
            .tb
            .switch_port(port)
            .ok_or_else(|| failed(format!("no switch port {port}")))?
            .to_string();
        let grp = group_of(tunnel).to_string();
        let br = self.tb.bridge();
        if op == "add" {
            // An entry the port learned from its host's IGMP join would
            // make the add fail; replace it with the permanent one.
            let _ = self.bridge(&["mdb", "del", "dev", br, "port", &dev, "grp", &grp]);
            let add = [
                "mdb",
                "add",
                "dev",
                br,
                "port",
                &dev,
                "grp",
                &grp,
                "permanent",
            ];
            return self.bridge(&add);
        }
        self.bridge(&["mdb", op, "dev", br, "port", &dev, "grp", &grp])
    }

    fn remove(&mut self, tunnel: u64) -> Result<(), FabricError> {
        self.installed.remove(&tunnel);
        self.installed_count
            .store(self.installed.len(), Ordering::Relaxed);
        if self
            .tb
            .tunnel_policies()
            .iter()
            .any(|t| t.policy.tunnel as u64 == tunnel)
        {
            self.tb
                .remove_tunnel_policy(tunnel as u32)
                .map_err(failed)?;
        }
        for port in self.trees.remove(&tunnel).unwrap_or_default() {
            // Already gone is fine.
            let _ = self.mdb("del", tunnel, port);
        }
        self.last.remove(&tunnel);
        Ok(())
    }
}

impl Fabric for TestbedFabric {
    fn apply(&mut self, op: &FabricOp) -> Result<(), FabricError> {
        if std::env::var_os("XLANE_FABRIC_DEBUG").is_some() {
            eprintln!("[fabric] {op:?}");
        }
        match op {
            FabricOp::Install {
                tunnel,
                sender,
                receivers,
                sublane,
                rate_bps,
                burst_bytes,
                queue_pkts,
                ..
            } => {
                let id = tunnel.0;
                let mut policy = tunnel_class(id, *sublane, *rate_bps, *burst_bytes, *queue_pkts)
                    .map_err(failed)?;
                policy.sender = host_index(sender, self.hosts)?;
                let ports = receivers
                    .iter()
                    .map(|r| host_index(r, self.hosts))
                    .collect::<Result<Vec<_>, _>>()?;
                policy.ports = ports.clone();
                // A range change that leaves the enforcement as it is (the
                // usual TE upcall) must not touch the running classes.
                if !self.demoted.contains(&id) && self.installed.get(&id) == Some(&policy) {
                    return Ok(());
                }
                self.demoted.remove(&id);
                self.remove(id)?;
                self.tb.install_tunnel_policy(&policy).map_err(failed)?;
                self.installed.insert(id, policy);
                self.installed_count
                    .store(self.installed.len(), Ordering::Relaxed);
                if ports.len() > 1 {
                    for &p in &ports {
                        self.mdb("add", id, p)?;
                    }
                    self.trees.insert(id, ports);
                }
                Ok(())
            }
            FabricOp::Demote { tunnel } => {
                self.tb.demote_tunnel(tunnel.0 as u32).map_err(failed)?;
                self.demoted.insert(tunnel.0);
                Ok(())
            }
            // A demoted tunnel's filter stays, steering into best effort
            // (quarantine): its sender already ignored its allocation once.
            FabricOp::Remove { tunnel } if self.demoted.contains(&tunnel.0) => {
                self.installed.remove(&tunnel.0);
                for port in self.trees.remove(&tunnel.0).unwrap_or_default() {
                    let _ = self.mdb("del", tunnel.0, port);
                }
                Ok(())
            }
            FabricOp::Remove { tunnel } => self.remove(tunnel.0),
        }
    }

    fn meters(&mut self) -> Result<Vec<SwitchMeter>, FabricError> {
        // Reading every place's counters takes a while on a loaded machine
        // (one `tc` per place), so an interval runs from the start of the
        // previous reading to the end of this one: the longest it can have
        // been. A rate computed over it is never too high; drops at the
        // rate limiter, which are exact, tell a tunnel over its rate.
        let started = realtime_ns();
        let meters = self.tb.tunnel_meters().map_err(failed)?;
        let now = realtime_ns();
        let mut out = Vec::new();
        for m in meters {
            if !matches!(m.place, Place::Host(_)) {
                continue;
            }
            let id = m.tunnel as u64;
            let (mut pk, mut by) = (m.class.sent_packets + m.class.dropped, m.class.sent_bytes);
            if let Some(d) = m.demoted_traffic {
                pk += d.packets;
                by += d.bytes;
            }
            let dr = m.class.dropped;
            if let Some(&(t0, p0, b0, d0)) = self.last.get(&id) {
                out.push(SwitchMeter {
                    tunnel: TunnelId(id),
                    packets: pk.saturating_sub(p0),
                    bytes: by.saturating_sub(b0),
                    dropped_packets: dr.saturating_sub(d0),
                    interval_ns: now.saturating_sub(t0),
                });
            }
            self.last.insert(id, (started, pk, by, dr));
        }
        if std::env::var_os("XLANE_FABRIC_DEBUG").is_some() {
            eprintln!("[fabric] meters {out:?}");
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    #[test]
    fn groups_and_host_names() {
        assert_eq!(group_of(1), Ipv4Addr::new(239, 78, 0, 1));
        assert_eq!(group_of(0x1_0203), Ipv4Addr::new(239, 78, 2, 3));
        let table = [
            ("h0", Some(0)),
            ("h3", Some(3)),
            ("h4", None),
            ("sw", None),
            ("h", None),
        ];
        for (name, want) in table {
            assert_eq!(host_index(name, 4).ok(), want, "{name}");
        }
    }
}
