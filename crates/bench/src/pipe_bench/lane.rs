//! The lane phase's tunnels. The phase runs in a testbed of its own whose
//! links are slow enough (100 Mbit/s by default) for the TCP flows this
//! two-CPU machine can generate to fill them: on the main testbed's
//! 1 Gbit/s links they ran out of CPU at about half the rate, no queue
//! formed, and the regular path delayed nothing. The controller daemon
//! is started on this testbed (as `bench bounds` does: the topology exported from the
//! measured testbed, a key per host, the switch and the host NICs
//! programmed through [`TestbedFabric`]), then one beacon tunnel per
//! process to the hop's host and one multicast tunnel from the hop's host
//! back to the processes' hosts, asked for over the controller's
//! authenticated protocol with each host's own key. The hop (1Pipe's host
//! representative of the switch) runs on a testbed host of its own: the
//! controller allocates tunnels between hosts.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::Duration;

use serde::Serialize;
use xlane_ctl::auth::Keys;
use xlane_ctl::client::Client;
use xlane_ctl::core::Policy;
use xlane_ctl::fabric::group_of;
use xlane_ctl::proto::{TunnelId, Upcall};
use xlane_ctl::server::{Server, ServerConfig};
use xlane_pipe::lane::{LanePortConfig, LaneTunnel, LANE_WIRE_BYTES};
use xlane_testbed::testbed::host_addr;
use xlane_testbed::Testbed;

use super::rig::SwitchdLane;
use super::PipeBenchError;
use crate::fabric::TestbedFabric;

/// The lane port of the processes and the hop.
pub const LANE_PORT: u16 = 7600;
/// Best-effort queue of the lane phase's testbed, packets: 12 ms of full
/// frames at 100 Mbit/s, as the main testbed's 1 000 at 1 Gbit/s.
pub const LANE_QUEUE_PKTS: u32 = 100;

/// A tunnel as granted, for the report.
#[derive(Clone, Debug, Serialize)]
pub struct TunnelOut {
    /// Its id.
    pub tunnel: u64,
    /// Sending host.
    pub from: String,
    /// Receiving hosts.
    pub to: Vec<String>,
    /// Granted period, ns.
    pub period_ns: u64,
    /// Whether the controller raised the period asked for.
    pub period_raised: bool,
    /// Announced latency range, ns.
    pub min_latency_ns: u64,
    /// Announced maximum latency, ns.
    pub max_latency_ns: u64,
    /// The sending host's index (its client releases the tunnel).
    #[serde(skip)]
    owner: usize,
}

/// The controller and the phase's tunnels.
pub struct LaneGrants {
    server: Server,
    clients: Vec<Client>,
    /// Each process's beacon tunnel (index = process), by its host's
    /// client.
    uplinks: Vec<(usize, LaneTunnel)>,
    downlink: LaneTunnel,
    hop_host: usize,
    dscp: u8,
    window_us: u64,
    /// Every tunnel, for the report.
    pub tunnels: Vec<TunnelOut>,
    /// Upcalls the hosts got (a demotion would show here).
    pub upcalls: Vec<String>,
}

fn host_name(i: usize) -> String {
    format!("h{i}")
}

fn refused(what: &str) -> impl Fn(xlane_ctl::client::ClientError) -> PipeBenchError + '_ {
    move |e| PipeBenchError::Run(format!("{what}: {e}"))
}

impl LaneGrants {
    /// Starts the controller on the measured testbed `tb` and asks for
    /// the tunnels of processes on `proc_hosts` (index = process) and a
    /// hop on `hop_host`, each at `period_ns`; waits until the fabric
    /// enforces them all.
    pub fn start(
        tb: &Testbed,
        proc_hosts: &[usize],
        hop_host: usize,
        period_ns: u64,
        window_us: u64,
        progress: &mut dyn FnMut(&str),
    ) -> Result<LaneGrants, PipeBenchError> {
        let cfg_err = |m: String| PipeBenchError::Config(m);
        let hosts = tb.hosts().len();
        let topo_text = tb
            .export_topology()
            .to_toml()
            .map_err(|e| cfg_err(format!("topology export: {e}")))?;
        let topo = xlane_te::Topology::from_toml(&topo_text)
            .map_err(|e| cfg_err(format!("exported topology refused: {e}")))?;
        let names: Vec<String> = (0..hosts).map(host_name).collect();
        let keys = Keys::generate(&names).map_err(|e| cfg_err(format!("keys: {e}")))?;
        let fabric = TestbedFabric::attach(tb.prefix(), hosts)?;
        let installed = fabric.installed_counter();
        let state_dir = std::env::temp_dir().join(format!("xlane-pipe-lane-{}", tb.prefix()));
        let _ = std::fs::remove_dir_all(&state_dir);
        let mut sc = ServerConfig::new(std::net::SocketAddr::from(([127, 0, 0, 1], 0)), state_dir);
        // As in `bench bounds`: meters read with `tc` on a loaded machine
        // need long intervals and a tolerance; the phase's regular-beacon
        // points leave the tunnels idle for seconds, which must not count
        // as unused.
        sc.tick_interval = Duration::from_millis(250);
        sc.policy = Policy {
            exceed_tolerance_permille: 300,
            unused_intervals: 240,
            ..Policy::default()
        };
        let server = Server::start(sc, topo, keys.clone(), Box::new(fabric))
            .map_err(|e| cfg_err(format!("controller: {e}")))?;
        let addr = server.local_addr();
        progress(&format!("controller listening on {addr}"));
        let mut clients = Vec::new();
        for name in &names {
            let key = keys.get(name).expect("generated");
            let mut c = Client::connect(addr, name, key)
                .map_err(|e| cfg_err(format!("{name} cannot reach the controller: {e}")))?;
            c.subscribe().map_err(refused("subscribe"))?;
            clients.push(c);
        }
        let mut tunnels = Vec::new();
        let mut grant = |clients: &mut Vec<Client>,
                         from: usize,
                         to: Vec<usize>|
         -> Result<LaneTunnel, PipeBenchError> {
            let names: Vec<String> = to.iter().map(|&h| host_name(h)).collect();
            let g = clients[from]
                .request(&names, LANE_WIRE_BYTES, period_ns, 0)
                .map_err(refused("a beacon tunnel was refused"))?;
            let r = g.resources;
            tunnels.push(TunnelOut {
                tunnel: g.tunnel.0,
                from: host_name(from),
                to: names,
                period_ns: r.period_ns,
                period_raised: g.period_raised,
                min_latency_ns: r.min_latency_ns,
                max_latency_ns: r.min_latency_ns.saturating_add(r.max_jitter_ns),
                owner: from,
            });
            Ok(LaneTunnel {
                tunnel: g.tunnel.0 as u32,
                period_ns: r.period_ns,
            })
        };
        let mut uplinks = Vec::new();
        for &h in proc_hosts {
            uplinks.push((h, grant(&mut clients, h, vec![hop_host])?));
        }
        let mut to: Vec<usize> = proc_hosts.to_vec();
        to.sort_unstable();
        to.dedup();
        let downlink = grant(&mut clients, hop_host, to)?;
        let n = TestbedFabric::wait_installed(&installed, tunnels.len(), Duration::from_secs(60));
        if n < tunnels.len() {
            return Err(PipeBenchError::Run(format!(
                "the controller installed {n} of {} beacon tunnels in 60 s",
                tunnels.len()
            )));
        }
        let periods: Vec<u64> = tunnels.iter().map(|t| t.period_ns).collect();
        progress(&format!(
            "{} beacon tunnels granted and enforced (periods {}–{} µs, worst announced latency {} µs)",
            tunnels.len(),
            periods.iter().min().unwrap_or(&0) / 1_000,
            periods.iter().max().unwrap_or(&0) / 1_000,
            tunnels.iter().map(|t| t.max_latency_ns).max().unwrap_or(0) / 1_000
        ));
        Ok(LaneGrants {
            server,
            clients,
            uplinks,
            downlink,
            hop_host,
            dscp: tb.config().express_dscp,
            window_us,
            tunnels,
            upcalls: Vec::new(),
        })
    }

    /// The multicast group of the hop's tunnel.
    fn group(&self) -> Ipv4Addr {
        group_of(u64::from(self.downlink.tunnel))
    }

    /// The lane port of process `proc`; with `from_hop`, it also takes
    /// the hop's multicast beacons.
    pub fn endpoint(&self, proc: usize, from_hop: bool) -> LanePortConfig {
        let (host, up) = self.uplinks[proc];
        LanePortConfig {
            bind: SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, LANE_PORT),
            join: from_hop.then(|| (self.group(), host_addr(host))),
            multicast_if: None,
            dscp: self.dscp,
            tx: Some((up, SocketAddrV4::new(host_addr(self.hop_host), LANE_PORT))),
            rx: if from_hop {
                vec![self.downlink]
            } else {
                Vec::new()
            },
            window_ns: self.window_us * 1_000,
        }
    }

    /// The hop's side; with `to_procs`, its beacons go on its multicast
    /// tunnel.
    pub fn switchd(&self, procs: usize, to_procs: bool) -> SwitchdLane {
        SwitchdLane {
            bind: SocketAddrV4::new(host_addr(self.hop_host), LANE_PORT),
            inputs: self.uplinks[..procs].iter().map(|(_, t)| *t).collect(),
            out: to_procs.then(|| (self.downlink, SocketAddrV4::new(self.group(), LANE_PORT))),
            dscp: self.dscp,
            window_us: self.window_us,
        }
    }

    /// Collects the upcalls that came (bandwidth changed or terminated).
    pub fn drain_upcalls(&mut self) {
        for (i, c) in self.clients.iter_mut().enumerate() {
            while let Ok(Some(u)) = c.next_upcall(Duration::from_millis(1)) {
                let what = match u {
                    Upcall::BandwidthChanged {
                        tunnel,
                        reason,
                        new,
                        ..
                    } => {
                        if let Some(t) = self.tunnels.iter_mut().find(|t| t.tunnel == tunnel.0) {
                            t.period_ns = new.period_ns;
                            t.min_latency_ns = new.min_latency_ns;
                            t.max_latency_ns = new.min_latency_ns.saturating_add(new.max_jitter_ns);
                        }
                        format!("{}: tunnel {} changed ({reason:?})", host_name(i), tunnel.0)
                    }
                    Upcall::BandwidthTerminated { tunnel, reason } => format!(
                        "{}: tunnel {} terminated ({reason:?})",
                        host_name(i),
                        tunnel.0
                    ),
                };
                self.upcalls.push(what);
            }
        }
    }

    /// Releases every tunnel (the fabric takes them out) and stops the
    /// controller.
    pub fn stop(mut self) -> Result<(), PipeBenchError> {
        self.drain_upcalls();
        let mut first = None;
        for t in &self.tunnels {
            if let Err(e) = self.clients[t.owner].release(TunnelId(t.tunnel)) {
                first.get_or_insert(format!("release tunnel {}: {e}", t.tunnel));
            }
        }
        let errors = self.server.stats().fabric_errors;
        self.server.stop();
        match (first, errors) {
            (Some(e), _) => Err(PipeBenchError::Run(e)),
            (None, 0) => Ok(()),
            (None, n) => Err(PipeBenchError::Run(format!(
                "the controller met {n} fabric errors (see its messages above)"
            ))),
        }
    }
}
