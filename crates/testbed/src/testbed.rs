//! Bringing a testbed up and down, finding testbeds left by other processes.

use crate::config::{is_generated_prefix, validate_prefix, TestbedConfig};
use crate::error::TestbedError;
use crate::exec::{run, run_batch};
use crate::measurement::{path_jitter, LinkMeasurement};
use crate::netns::{write_sysctl_in, NETNS_DIR};
use crate::probe::{measure_path_idle, run_probe, ProbeResult, ProbeSpec};
use crate::shaping::{
    htb_lines, parse_class_stats, split_htb_lines, stats_from_classes, QdiscStats,
};
use crate::state::{
    self, process_alive, read_state, remove_state, GeneratorRecord, HostInfo, StateFile,
};
use crate::topology::{Link, Node, NodeKind, Topology, SCHEMA_VERSION};
use crate::traffic::{self, CrossTraffic, GenRegistry, TrafficHandle};
use std::net::Ipv4Addr;
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Name of the switch namespace of `prefix`.
pub fn switch_netns_name(prefix: &str) -> String {
    format!("{prefix}-sw")
}

/// Name of host `i`'s namespace (and of its interface) for `prefix`.
pub fn host_netns_name(prefix: &str, i: usize) -> String {
    format!("{prefix}-h{i}")
}

/// Address of host `i`: 198.18.0.(i+1) (RFC 2544 benchmark range).
pub fn host_addr(i: usize) -> Ipv4Addr {
    Ipv4Addr::new(198, 18, 0, (i + 1) as u8)
}

fn host_mac(i: usize) -> String {
    format!("02:78:6c:00:00:{:02x}", i + 1)
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// An emulated datacenter: hosts in network namespaces joined by a switch
/// (a Linux bridge in its own namespace), every egress shaped by HTB with
/// strict-priority express classes (see [`crate::shaping`]).
///
/// Dropping a `Testbed` made by [`Testbed::up`] stops its generators and
/// tears everything down, also while unwinding from a panic. A testbed
/// from [`Testbed::attach`], or one that was [`Testbed::detach`]ed, is left
/// alone on drop.
pub struct Testbed {
    prefix: String,
    cfg: TestbedConfig,
    hosts: Vec<HostInfo>,
    switch_netns: String,
    bridge: String,
    switch_ports: Vec<String>,
    owned: bool,
    torn_down: bool,
    measurement: Mutex<Option<LinkMeasurement>>,
    registry: GenRegistry,
    standalone_generators: bool,
    /// Per-tunnel policies installed by this value (see [`crate::policing`]).
    pub(crate) tunnels: Mutex<crate::policing::TunnelRegistry>,
}

impl std::fmt::Debug for Testbed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Testbed")
            .field("prefix", &self.prefix)
            .field("hosts", &self.hosts.len())
            .field("owned", &self.owned)
            .finish()
    }
}

/// Every namespace name of `prefix` present in `/run/netns`.
fn netns_with_prefix(prefix: &str) -> Vec<String> {
    let want = format!("{prefix}-");
    list_netns()
        .into_iter()
        .filter(|n| n.starts_with(&want))
        .collect()
}

fn list_netns() -> Vec<String> {
    let Ok(rd) = std::fs::read_dir(NETNS_DIR) else {
        return Vec::new();
    };
    let mut v: Vec<String> = rd
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .collect();
    v.sort();
    v
}

/// Links in the current namespace (normally the root one).
fn list_links() -> Vec<String> {
    let Ok(out) = run("ip", &["-o", "link", "show"]) else {
        return Vec::new();
    };
    out.lines()
        .filter_map(|l| l.split(": ").nth(1))
        .map(|n| n.split('@').next().unwrap_or(n).to_string())
        .collect()
}

fn random_prefix(attempt: u32) -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    h.write_u32(attempt);
    h.write_u128(crate::probe::realtime_ns() as u128);
    h.write_u64(traffic::next_id());
    format!("xl{:06x}", h.finish() & 0xff_ffff)
}

fn prefix_in_use(prefix: &str) -> bool {
    let want = format!("{prefix}-");
    !netns_with_prefix(prefix).is_empty()
        || state::state_path(prefix).exists()
        || list_links().iter().any(|l| l.starts_with(&want))
}

impl Testbed {
    /// Create the namespaces, links, bridge and shaping of `cfg`, then (if
    /// `cfg.measure_probes > 0`) measure idle latencies. Needs root. On any
    /// error, everything created so far is removed.
    pub fn up(cfg: TestbedConfig) -> Result<Testbed, TestbedError> {
        if !is_root() {
            return Err(TestbedError::NotRoot);
        }
        cfg.validate()?;
        let mut cfg = cfg;
        let (pid, start_ticks) = state::me();
        // Claim a prefix by writing its state file under its lock.
        let mut attempt = 0;
        let (prefix, lock) = loop {
            let p = match &cfg.prefix {
                Some(p) => p.clone(),
                None => random_prefix(attempt),
            };
            let lock = state::lock(&p)?;
            if !prefix_in_use(&p) {
                break (p, lock);
            }
            drop(lock);
            if cfg.prefix.is_some() || attempt >= 16 {
                return Err(TestbedError::Invalid(format!(
                    "prefix {p:?} is in use (see `xlane testbed status`)"
                )));
            }
            attempt += 1;
        };
        cfg.prefix = Some(prefix.clone());
        let n = cfg.hosts;
        let hosts: Vec<HostInfo> = (0..n)
            .map(|i| HostInfo {
                index: i,
                netns: host_netns_name(&prefix, i),
                iface: host_netns_name(&prefix, i),
                addr: host_addr(i),
                mac: host_mac(i),
            })
            .collect();
        let tb = Testbed {
            switch_netns: switch_netns_name(&prefix),
            bridge: format!("{prefix}-br"),
            switch_ports: (0..n).map(|i| format!("{prefix}-p{i}")).collect(),
            prefix,
            cfg,
            hosts,
            owned: true,
            torn_down: false,
            measurement: Mutex::new(None),
            registry: GenRegistry::default(),
            standalone_generators: false,
            tunnels: Mutex::default(),
        };
        let st = tb.state_file(Some(pid), start_ticks);
        state::write_state_locked(&st)?;
        drop(lock);
        // From here on, dropping `tb` (also via `?`) tears down.
        tb.build()?;
        if tb.cfg.measure_probes > 0 {
            tb.measure(tb.cfg.measure_probes)?;
        }
        Ok(tb)
    }

    fn state_file(&self, owner_pid: Option<u32>, owner_start_ticks: Option<u64>) -> StateFile {
        StateFile {
            prefix: self.prefix.clone(),
            created_unix_s: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0),
            owner_pid,
            owner_start_ticks,
            config: self.cfg.clone(),
            switch_netns: self.switch_netns.clone(),
            bridge: self.bridge.clone(),
            switch_ports: self.switch_ports.clone(),
            hosts: self.hosts.clone(),
            measurement: self.measurement.lock().ok().and_then(|m| m.clone()),
            generators: Vec::new(),
        }
    }

    fn build(&self) -> Result<(), TestbedError> {
        let sw = &self.switch_netns;
        // 1. Namespaces and veth pairs, created directly in their namespaces.
        let mut root = vec![format!("netns add {sw}")];
        for h in &self.hosts {
            root.push(format!("netns add {}", h.netns));
        }
        let split = self.split_cpus();
        let queues = if split.is_some() {
            " numtxqueues 2 numrxqueues 2"
        } else {
            ""
        };
        for (h, port) in self.hosts.iter().zip(&self.switch_ports) {
            root.push(format!(
                "link add name {} address {} netns {}{queues} type veth peer name {port} netns {sw}{queues}",
                h.iface, h.mac, h.netns
            ));
        }
        run_batch("ip", None, &root, false)?;
        // 2. No IPv6 (no router solicitations, MLD or DAD noise on the links).
        for ns in std::iter::once(sw).chain(self.hosts.iter().map(|h| &h.netns)) {
            for key in ["all", "default"] {
                match write_sysctl_in(ns, &format!("net/ipv6/conf/{key}/disable_ipv6"), "1") {
                    Err(TestbedError::Io { source, .. })
                        if source.kind() == std::io::ErrorKind::NotFound => {}
                    other => other?,
                }
            }
        }
        // 3. The switch: a bridge that floods multicast, learns, no STP.
        let br = &self.bridge;
        let mut s = vec![format!(
            "link add name {br} type bridge stp_state 0 mcast_snooping 0 ageing_time 30000 forward_delay 0"
        )];
        for p in &self.switch_ports {
            s.push(format!("link set dev {p} master {br}"));
            s.push(format!(
                "link set dev {p} gso_max_size 1500 gro_max_size 1500"
            ));
        }
        s.push("link set dev lo up".into());
        s.push(format!("link set dev {br} up"));
        for p in &self.switch_ports {
            s.push(format!("link set dev {p} up"));
        }
        run_batch("ip", Some(sw), &s, false)?;
        // Static forwarding entries: no unknown-unicast flooding while the
        // bridge would still be learning (it skews the first measurements).
        let fdb: Vec<String> = self
            .hosts
            .iter()
            .zip(&self.switch_ports)
            .map(|(h, p)| format!("fdb replace {} dev {p} master static", h.mac))
            .collect();
        run_batch("bridge", Some(sw), &fdb, false)?;
        // 4. Hosts: address, multicast route, permanent neighbours, no
        //    segmentation offload (a frame on the wire is at most one MTU).
        for h in &self.hosts {
            let mut l = vec![
                "link set dev lo up".to_string(),
                format!(
                    "link set dev {} gso_max_size 1500 gro_max_size 1500",
                    h.iface
                ),
                format!("addr add {}/24 dev {}", h.addr, h.iface),
                format!("link set dev {} up", h.iface),
                format!("route add 224.0.0.0/4 dev {}", h.iface),
            ];
            for o in self.hosts.iter().filter(|o| o.index != h.index) {
                l.push(format!(
                    "neigh replace {} lladdr {} dev {} nud permanent",
                    o.addr, o.mac, h.iface
                ));
            }
            run_batch("ip", Some(&h.netns), &l, false)?;
        }
        // 5. Shaping: switch ports at the link rate, host NICs at the host
        //    rate; split by CPU when a lane core is given.
        let lines = |dev: &str, rate: u64| match split {
            Some(_) => split_htb_lines(dev, rate, &self.cfg),
            None => htb_lines(dev, rate, &self.cfg),
        };
        let mut t = Vec::new();
        for p in &self.switch_ports {
            t.extend(lines(p, self.cfg.link_rate_bps));
        }
        run_batch("tc", Some(sw), &t, false)?;
        let host_rate = self.cfg.effective_host_rate_bps();
        for h in &self.hosts {
            run_batch("tc", Some(&h.netns), &lines(&h.iface, host_rate), false)?;
        }
        // 6. XPS: the lane core transmits on queue 1, the others on queue 0.
        if let Some((lane, regular)) = split {
            let mut ends: Vec<(&str, &str)> = self
                .switch_ports
                .iter()
                .map(|p| (sw.as_str(), p.as_str()))
                .collect();
            ends.extend(
                self.hosts
                    .iter()
                    .map(|h| (h.netns.as_str(), h.iface.as_str())),
            );
            for (ns, dev) in ends {
                let script = format!(
                    "echo {regular:x} > /sys/class/net/{dev}/queues/tx-0/xps_cpus && \
                     echo {lane:x} > /sys/class/net/{dev}/queues/tx-1/xps_cpus"
                );
                run("ip", &["netns", "exec", ns, "sh", "-c", &script])?;
            }
        }
        Ok(())
    }

    /// The CPU masks (lane, regular) of a split testbed: `None` without a
    /// lane core, on a one-CPU machine, or with a lane core that does not
    /// exist.
    fn split_cpus(&self) -> Option<(u64, u64)> {
        let lane = self.cfg.lane_core?;
        // SAFETY: plain sysconf.
        let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
        let n = if n > 0 { n as usize } else { 1 };
        if n < 2 || lane >= n || n > 64 {
            return None;
        }
        let all = if n == 64 { u64::MAX } else { (1u64 << n) - 1 };
        Some((1u64 << lane, all & !(1u64 << lane)))
    }

    /// Measure idle one-way latencies on the ring `h_i → h_(i+1)` with
    /// `probes` probes per path (express TOS), store them for
    /// [`Testbed::export_topology`] and the state file, and return them.
    /// Takes about `hosts × probes × 30 µs`.
    pub fn measure(&self, probes: usize) -> Result<LinkMeasurement, TestbedError> {
        // On a split testbed the lane's packets leave from the lane core's
        // queues: measure that path, from the lane core (the probe threads
        // inherit the placement).
        let lane = self.split_cpus().and(self.cfg.lane_core);
        match lane {
            Some(core) => std::thread::scope(|s| {
                s.spawn(|| {
                    pin_to(core);
                    self.measure_here(probes)
                })
                .join()
                .unwrap_or_else(|_| {
                    Err(TestbedError::io(
                        "link measurement",
                        std::io::Error::other("the measuring thread panicked"),
                    ))
                })
            }),
            None => self.measure_here(probes),
        }
    }

    fn measure_here(&self, probes: usize) -> Result<LinkMeasurement, TestbedError> {
        let tos = crate::config::dscp_to_tos(self.cfg.express_dscp);
        let n = self.hosts.len();
        // A discarded first pass: in a fresh process the first path
        // measured otherwise reads higher (cold caches and code paths).
        measure_path_idle(&self.hosts[0], &self.hosts[1], probes.clamp(1, 300), tos)?;
        let path = |i: usize| {
            measure_path_idle(&self.hosts[i], &self.hosts[(i + 1) % n], probes.max(1), tos)
        };
        let mut paths = (0..n).map(path).collect::<Result<Vec<_>, _>>()?;
        // A path far above the others was read through a stall of this
        // host (the links are alike): measure it again, at most
        // REMEASURE times, keeping the reading with the least jitter. Left
        // in, one stall would give a link a jitter of milliseconds and
        // every tunnel over it a period raised to match, which the next
        // tunnel on that link then cannot be admitted beside.
        const REMEASURE: usize = 3;
        let mut remeasured = Vec::new();
        for i in LinkMeasurement::outliers(&paths) {
            remeasured.push(paths[i].from);
            for _ in 0..REMEASURE {
                let again = path(i)?;
                if path_jitter(&again) < path_jitter(&paths[i]) {
                    paths[i] = again;
                }
                if !LinkMeasurement::outliers(&paths).contains(&i) {
                    break;
                }
            }
        }
        let m = LinkMeasurement {
            probes_per_path: probes.max(1),
            paths,
            remeasured,
        };
        if let Ok(mut g) = self.measurement.lock() {
            *g = Some(m.clone());
        }
        let mc = m.clone();
        state::update_state(&self.prefix, move |s| s.measurement = Some(mc))?;
        Ok(m)
    }

    /// Use a testbed made by another process (e.g. `xlane testbed up`),
    /// from its state file. Dropping the result does not tear it down.
    pub fn attach(prefix: &str) -> Result<Testbed, TestbedError> {
        validate_prefix(prefix)?;
        let st = read_state(prefix)?.ok_or_else(|| TestbedError::NoSuchTestbed(prefix.into()))?;
        if !std::path::Path::new(&format!("{NETNS_DIR}/{}", st.switch_netns)).exists() {
            return Err(TestbedError::NoSuchTestbed(prefix.into()));
        }
        Ok(Testbed {
            prefix: st.prefix,
            cfg: st.config,
            hosts: st.hosts,
            switch_netns: st.switch_netns,
            bridge: st.bridge,
            switch_ports: st.switch_ports,
            owned: false,
            torn_down: false,
            measurement: Mutex::new(st.measurement),
            registry: GenRegistry::default(),
            standalone_generators: false,
            tunnels: Mutex::default(),
        })
    }

    /// Keep the testbed after this value (and this process) is gone; it
    /// then lives until [`down`] (`xlane testbed down`). Returns the prefix.
    pub fn detach(mut self) -> Result<String, TestbedError> {
        state::update_state(&self.prefix, |s| {
            s.owner_pid = None;
            s.owner_start_ticks = None;
        })?;
        self.owned = false;
        Ok(self.prefix.clone())
    }

    /// Tear down now, reporting errors (drop does the same silently).
    pub fn down(mut self) -> Result<(), TestbedError> {
        self.teardown()
    }

    fn teardown(&mut self) -> Result<(), TestbedError> {
        if self.torn_down {
            return Ok(());
        }
        self.torn_down = true;
        self.registry.stop_all(Duration::from_secs(2));
        let r = remove_prefix(&self.prefix);
        remove_state(&self.prefix);
        r.map(|_| ())
    }

    /// The per-run prefix of every name.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// The configuration in effect (prefix filled in).
    pub fn config(&self) -> &TestbedConfig {
        &self.cfg
    }

    /// The hosts, by index.
    pub fn hosts(&self) -> &[HostInfo] {
        &self.hosts
    }

    /// Host `i`.
    pub fn host(&self, i: usize) -> Result<&HostInfo, TestbedError> {
        self.hosts.get(i).ok_or(TestbedError::BadHost {
            index: i,
            hosts: self.hosts.len(),
        })
    }

    /// The switch namespace.
    pub fn switch_netns(&self) -> &str {
        &self.switch_netns
    }

    /// The bridge device in the switch namespace.
    pub fn bridge(&self) -> &str {
        &self.bridge
    }

    /// The switch-side port (egress towards host `i`), if `i` is a host.
    pub fn switch_port(&self, i: usize) -> Option<&str> {
        self.switch_ports.get(i).map(String::as_str)
    }

    /// True when dropping this value tears the testbed down.
    pub fn is_owned(&self) -> bool {
        self.owned
    }

    /// Start a cross-traffic flow (see [`CrossTraffic`]). The testbed's
    /// teardown stops it too.
    pub fn start_cross_traffic(&self, spec: CrossTraffic) -> Result<TrafficHandle, TestbedError> {
        let src = self.host(spec.from)?;
        let dst = self.host(spec.to)?;
        traffic::start(
            src,
            dst,
            &spec,
            &self.registry,
            Some((&self.prefix, self.standalone_generators)),
        )
    }

    /// Number of this value's generators still running.
    pub fn generators_running(&self) -> usize {
        self.registry.running()
    }

    /// Open-loop one-way latency probes (see [`ProbeSpec`]).
    pub fn probe(&self, spec: &ProbeSpec) -> Result<ProbeResult, TestbedError> {
        run_probe(self.host(spec.from)?, self.host(spec.to)?, spec)
    }

    /// Queue statistics of switch port `port` (egress towards host `port`).
    pub fn qdisc_stats(&self, port: usize) -> Result<QdiscStats, TestbedError> {
        let dev = self.switch_port(port).ok_or(TestbedError::BadHost {
            index: port,
            hosts: self.hosts.len(),
        })?;
        self.class_stats(&self.switch_netns, dev)
    }

    /// Queue statistics of host `i`'s NIC egress (towards the switch).
    pub fn host_qdisc_stats(&self, i: usize) -> Result<QdiscStats, TestbedError> {
        let h = self.host(i)?;
        self.class_stats(&h.netns, &h.iface)
    }

    fn class_stats(&self, ns: &str, dev: &str) -> Result<QdiscStats, TestbedError> {
        let out = run("tc", &["-n", ns, "-s", "class", "show", "dev", dev])?;
        let classes = parse_class_stats(&out)?;
        stats_from_classes(ns, dev, &classes, self.cfg.express2_dscp.is_some())
    }

    /// The topology for the controller (see [`crate::topology`] for the
    /// schema and how latencies are attributed to links).
    pub fn export_topology(&self) -> Topology {
        let m = self.measurement.lock().ok().and_then(|m| m.clone());
        let mut node: Vec<Node> = self
            .hosts
            .iter()
            .map(|h| Node {
                name: format!("h{}", h.index),
                kind: NodeKind::Host,
                netns: h.netns.clone(),
                addr: Some(h.addr),
            })
            .collect();
        node.push(Node {
            name: "sw".into(),
            kind: NodeKind::Switch,
            netns: self.switch_netns.clone(),
            addr: None,
        });
        let mut link = Vec::new();
        for h in &self.hosts {
            let name = format!("h{}", h.index);
            let up = m.as_ref().and_then(|m| m.uplink(h.index));
            let down = m.as_ref().and_then(|m| m.downlink(h.index));
            let mk = |from: &str, to: &str, device: &str, bw: u64, meas: Option<(u64, u64)>| Link {
                from: from.into(),
                to: to.into(),
                device: device.into(),
                bandwidth_bps: bw,
                express_queue_pkts: self.cfg.express_queue_pkts,
                best_effort_queue_pkts: self.cfg.best_effort_queue_pkts,
                min_latency_ns: meas.map(|x| x.0).unwrap_or(0),
                max_jitter_ns: meas.map(|x| x.1).unwrap_or(0),
                measured: meas.is_some(),
                min_includes_tx: false,
            };
            link.push(mk(
                &name,
                "sw",
                &h.iface,
                self.cfg.effective_host_rate_bps(),
                up,
            ));
            link.push(mk(
                "sw",
                &name,
                &self.switch_ports[h.index],
                self.cfg.link_rate_bps,
                down,
            ));
        }
        Topology {
            schema: SCHEMA_VERSION,
            prefix: self.prefix.clone(),
            express_dscp: self.cfg.express_dscp,
            express2_dscp: self.cfg.express2_dscp,
            express_rate_percent: self.cfg.express_rate_percent,
            burst_ns: self.cfg.burst_ns,
            node,
            link,
        }
    }

    /// Declare this process a standalone generator process (one that
    /// exists only to run cross traffic, like `xlane testbed traffic`):
    /// generators it starts from now on are recorded as `standalone`, so
    /// `down` of the testbed from another process stops this process with
    /// SIGTERM.
    pub fn set_standalone_generator_process(&mut self, standalone: bool) {
        self.standalone_generators = standalone;
    }
}

impl Drop for Testbed {
    fn drop(&mut self) {
        if self.owned {
            if let Err(e) = self.teardown() {
                eprintln!("xlane-testbed: teardown of {} failed: {e}", self.prefix);
            }
        }
    }
}

/// Delete every namespace and root-namespace link named `<prefix>-*`.
/// Returns what was deleted.
/// Pins the calling thread to `core` (best effort: a failure leaves it
/// where it was).
fn pin_to(core: usize) {
    // SAFETY: cpu_set_t is plain data; CPU_SET writes inside it (core is
    // below CPU_SETSIZE: split_cpus checked it against the online CPUs).
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(core, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

fn remove_prefix(prefix: &str) -> Result<Vec<String>, TestbedError> {
    let want = format!("{prefix}-");
    let ns = netns_with_prefix(prefix);
    let links: Vec<String> = list_links()
        .into_iter()
        .filter(|l| l.starts_with(&want))
        .collect();
    let mut lines: Vec<String> = ns.iter().map(|n| format!("netns del {n}")).collect();
    lines.extend(links.iter().map(|l| format!("link del dev {l}")));
    let batch = run_batch("ip", None, &lines, true);
    let left = netns_with_prefix(prefix);
    if !left.is_empty() {
        return Err(match batch {
            Err(e) => e.into(),
            Ok(_) => TestbedError::Invalid(format!("namespaces still present: {left:?}")),
        });
    }
    let mut removed = ns;
    removed.extend(links);
    Ok(removed)
}

/// Stop the standalone generator processes recorded for a testbed
/// (SIGTERM, then SIGKILL after a second). Never signals this process or
/// the testbed's owner.
fn stop_generator_processes(st: &StateFile) {
    use nix::sys::signal::{kill, Signal};
    use nix::unistd::Pid;
    let me = std::process::id();
    let targets: Vec<&GeneratorRecord> = st
        .generators
        .iter()
        .filter(|g| g.standalone && g.pid != me && Some(g.pid) != st.owner_pid)
        .filter(|g| process_alive(g.pid, Some(g.start_ticks)))
        .collect();
    for g in &targets {
        let _ = kill(Pid::from_raw(g.pid as i32), Signal::SIGTERM);
    }
    let deadline = Instant::now() + Duration::from_secs(1);
    while Instant::now() < deadline
        && targets
            .iter()
            .any(|g| process_alive(g.pid, Some(g.start_ticks)))
    {
        std::thread::sleep(Duration::from_millis(10));
    }
    for g in &targets {
        if process_alive(g.pid, Some(g.start_ticks)) {
            let _ = kill(Pid::from_raw(g.pid as i32), Signal::SIGKILL);
        }
    }
}

/// Tear down the testbed `prefix`, whoever made it: stop its standalone
/// generator processes, delete its namespaces and links, remove its state
/// file. Returns the names deleted; `NoSuchTestbed` if nothing existed.
pub fn down(prefix: &str) -> Result<Vec<String>, TestbedError> {
    validate_prefix(prefix)?;
    if !is_root() {
        return Err(TestbedError::NotRoot);
    }
    let st = read_state(prefix).ok().flatten();
    let had_state = state::state_path(prefix).exists();
    if let Some(st) = &st {
        stop_generator_processes(st);
    }
    let removed = remove_prefix(prefix)?;
    remove_state(prefix);
    if removed.is_empty() && !had_state {
        return Err(TestbedError::NoSuchTestbed(prefix.into()));
    }
    Ok(removed)
}

/// Prefix of a namespace name `<prefix>-sw` / `<prefix>-h<i>`.
fn prefix_of(name: &str) -> Option<&str> {
    let (p, rest) = name.rsplit_once('-')?;
    let ok = rest == "sw"
        || rest == "br"
        || (rest.len() > 1
            && (rest.starts_with('h') || rest.starts_with('p'))
            && rest[1..].bytes().all(|b| b.is_ascii_digit()));
    (ok && validate_prefix(p).is_ok()).then_some(p)
}

/// Prefixes of every testbed visible on this machine: generated-looking
/// names in `/run/netns` and the root namespace, plus state files.
fn all_prefixes() -> Vec<String> {
    let mut v: Vec<String> = list_netns()
        .iter()
        .chain(list_links().iter())
        .filter_map(|n| prefix_of(n))
        .filter(|p| is_generated_prefix(p))
        .map(str::to_string)
        .chain(state::state_prefixes())
        .collect();
    v.sort();
    v.dedup();
    v
}

fn owner_alive(st: &StateFile) -> bool {
    st.owner_pid
        .is_some_and(|pid| process_alive(pid, st.owner_start_ticks))
}

/// Remove every testbed that no live process owns: leftovers of crashed
/// runs and detached testbeds (`xlane testbed up`). Testbeds whose owner
/// process is alive are kept (use [`down_all_force`] for those too).
/// Returns the prefixes removed.
pub fn down_all() -> Result<Vec<String>, TestbedError> {
    down_all_inner(false)
}

/// Remove every testbed, even those owned by live processes.
pub fn down_all_force() -> Result<Vec<String>, TestbedError> {
    down_all_inner(true)
}

fn down_all_inner(force: bool) -> Result<Vec<String>, TestbedError> {
    if !is_root() {
        return Err(TestbedError::NotRoot);
    }
    let mut removed = Vec::new();
    let mut first_err = None;
    for p in all_prefixes() {
        if !force {
            if let Ok(Some(st)) = read_state(&p) {
                if owner_alive(&st) {
                    continue;
                }
            }
        }
        match down(&p) {
            Ok(_) => removed.push(p),
            Err(TestbedError::NoSuchTestbed(_)) => {}
            Err(e) => {
                first_err.get_or_insert(e);
            }
        }
    }
    match first_err {
        Some(e) => Err(e),
        None => Ok(removed),
    }
}

/// A generator recorded in a state file, and whether its process runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GeneratorStatus {
    /// The record.
    pub record: GeneratorRecord,
    /// Its process is alive.
    pub alive: bool,
}

/// What `status()` knows about one testbed.
#[derive(Debug, Clone, PartialEq)]
pub struct TestbedStatus {
    /// Its prefix.
    pub prefix: String,
    /// Host namespaces present.
    pub host_netns: Vec<String>,
    /// The switch namespace is present.
    pub switch_present: bool,
    /// Its state file, if readable.
    pub state: Option<StateFile>,
    /// Owner process alive (false for detached or crashed testbeds).
    pub owner_alive: bool,
    /// Recorded generators.
    pub generators: Vec<GeneratorStatus>,
}

impl TestbedStatus {
    /// True if any recorded generator's process is alive.
    pub fn generators_running(&self) -> bool {
        self.generators.iter().any(|g| g.alive)
    }
    /// True if the testbed is incomplete or nobody owns it.
    pub fn is_leftover(&self) -> bool {
        self.state.is_none() || !self.switch_present
    }
}

/// Every testbed present on this machine.
pub fn status() -> Vec<TestbedStatus> {
    let netns = list_netns();
    all_prefixes()
        .into_iter()
        .map(|p| {
            let want = format!("{p}-");
            let mine: Vec<&String> = netns.iter().filter(|n| n.starts_with(&want)).collect();
            let host_netns = mine
                .iter()
                .filter(|n| prefix_of(n) == Some(p.as_str()) && !n.ends_with("-sw"))
                .map(|n| n.to_string())
                .collect();
            let switch_present = mine.iter().any(|n| **n == switch_netns_name(&p));
            let state = read_state(&p).ok().flatten();
            let owner_alive = state.as_ref().is_some_and(owner_alive);
            let generators = state
                .as_ref()
                .map(|s| {
                    s.generators
                        .iter()
                        .map(|g| GeneratorStatus {
                            record: g.clone(),
                            alive: process_alive(g.pid, Some(g.start_ticks)),
                        })
                        .collect()
                })
                .unwrap_or_default();
            TestbedStatus {
                prefix: p,
                host_netns,
                switch_present,
                state,
                owner_alive,
                generators,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_of_names() {
        let table = [
            ("xl0a1b2c-sw", Some("xl0a1b2c")),
            ("xl0a1b2c-h0", Some("xl0a1b2c")),
            ("xl0a1b2c-h15", Some("xl0a1b2c")),
            ("xl0a1b2c-p3", Some("xl0a1b2c")),
            ("xl0a1b2c-br", Some("xl0a1b2c")),
            ("xl0a1b2c-x", None),
            ("xl0a1b2c-h", None),
            ("eth0", None),
            ("Foo-sw", None),
        ];
        for (n, want) in table {
            assert_eq!(prefix_of(n), want, "{n}");
        }
    }

    #[test]
    fn names_fit_interfaces() {
        let p = "abcdefghijk";
        assert!(format!("{p}-p15").len() <= 15);
        assert!(host_netns_name(p, 15).len() <= 15);
        assert_eq!(host_addr(0), Ipv4Addr::new(198, 18, 0, 1));
        assert_eq!(host_mac(15), "02:78:6c:00:00:10");
    }

    #[test]
    fn random_prefixes_look_generated() {
        for i in 0..20 {
            assert!(is_generated_prefix(&random_prefix(i)));
        }
    }
}
