//! `xlane ctl`: the X-Lane controller (tunnel allocation, X-Lane §2.2/§3).
//!
//! * `xlane ctl serve` — the daemon: topology, host keys, a state directory
//!   (journal + snapshot, recovered at start), listening on TCP until
//!   SIGINT/SIGTERM.
//! * `xlane ctl keygen` — a keys file with a fresh random key per host.
//! * `xlane ctl request | change | release | list | watch` — a host's
//!   client: authenticate as `--host` with its key from `--keys`, then ask.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};
use xlane_ctl::auth::{Key, Keys};
use xlane_ctl::client::{Client, Granted};
use xlane_ctl::fabric::{Fabric, FabricError, FabricOp, NoFabric, SwitchMeter};
use xlane_ctl::proto::{TunnelId, TunnelInfo, TunnelState, Upcall, UNBOUNDED_NS};
use xlane_ctl::server::{Server, ServerConfig};
use xlane_ctl::store::FsyncPolicy;
use xlane_ctl::te::Topology;
use xlane_host::tuning::install_termination_flag;

/// Arguments of `xlane ctl`.
#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(clap::Subcommand)]
enum Cmd {
    /// Run the controller daemon until SIGINT/SIGTERM.
    Serve(ServeArgs),
    /// Print a keys file (TOML) with a fresh random key for each host.
    Keygen(KeygenArgs),
    /// requestBandwidth: a tunnel from --host to --to.
    Request(RequestArgs),
    /// changeBandwidth: new load/period for a tunnel of --host (also
    /// re-admits a demoted one).
    Change(ChangeArgs),
    /// releaseBandwidth: free a tunnel of --host.
    Release(ReleaseArgs),
    /// List all tunnels.
    List(ListArgs),
    /// Print the MAC key of a tunnel --host sends or receives on, as a
    /// cluster key file entry (key id = tunnel id): append it to the file
    /// `--key-file` reads, on the tunnel's sender and receivers.
    TunnelKey(TunnelKeyArgs),
    /// Print the upcalls (bandwidthChanged, bandwidthTerminated) for --host's
    /// tunnels as they come.
    Watch(WatchArgs),
    /// Write the configuration of the topology's switches for the
    /// controller's current tunnels, instead of applying it: `tc` batch
    /// lines for Linux-based switches, `config_db` JSON for SONiC. Reads the
    /// state directory; works while the controller runs.
    ExportSwitchConfig(ExportArgs),
}

#[derive(clap::Args)]
struct ExportArgs {
    /// Topology TOML the controller serves (with each link's `device`: the
    /// switch port's name).
    #[arg(long)]
    topology: PathBuf,
    /// The controller's state directory.
    #[arg(long)]
    state: PathBuf,
    /// Output format.
    #[arg(long, value_enum, default_value = "tc")]
    format: SwitchFormat,
    /// Only this switch (default: every switch in the topology).
    #[arg(long)]
    switch: Option<String>,
    /// Write to this file instead of stdout.
    #[arg(long)]
    out: Option<PathBuf>,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum SwitchFormat {
    /// `tc -batch` lines (Linux-based switches).
    Tc,
    /// SONiC `config_db` JSON (QoS maps, schedulers, queue bindings).
    Sonic,
}

#[derive(clap::Args)]
struct ServeArgs {
    /// Topology TOML (the testbed's export; see xlane_te::topology), or a
    /// generated fabric with datacenter link rates: fat-tree:K (K even) or
    /// leaf-spine:LEAVES,HOSTS,SPINES (hosts named h0, h1, ...).
    #[arg(long)]
    topology: PathBuf,
    /// Host keys file (from `xlane ctl keygen`).
    #[arg(long)]
    keys: PathBuf,
    /// A replica's raft traffic between the replicas (UDP datagrams and
    /// the TCP side channel) authenticated with this group key.
    #[command(flatten)]
    raft_key: super::KeyArgs,
    /// State directory (journal, snapshot); created if missing.
    #[arg(long)]
    state: PathBuf,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:7070")]
    listen: SocketAddr,
    /// Sync the journal after every change (always) or leave it to the
    /// kernel (never: a machine crash may lose the last changes).
    #[arg(long, default_value = "always", value_parser = parse_fsync)]
    fsync: FsyncPolicy,
    /// Program this testbed (its prefix, from `xlane testbed up` or
    /// `status`): per-tunnel rate limiters on the sending hosts' NICs and
    /// the switch ports of each tree, multicast trees in the switch,
    /// demotion to best effort, meters read back for the monitoring.
    #[arg(long, conflicts_with = "log_fabric")]
    testbed: Option<String>,
    /// Program nothing, print every fabric operation to stderr instead.
    #[arg(long)]
    log_fabric: bool,
    /// How often the fabric's meters are read (one monitoring interval)
    /// and due grace periods end, ms.
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u64).range(1..=60_000))]
    meter_interval_ms: u64,
    /// A tunnel whose intervals all stay under a quarter of its allocation
    /// for this long gets its period raised (BwUnused), ms. Default: five
    /// intervals.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    unused_after_ms: Option<u64>,
    /// Tolerance over a tunnel's packet rate before it counts as exceeding
    /// (and is demoted), per mille.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(0..=10_000))]
    exceed_tolerance_permille: u32,
    /// Serve Prometheus metrics at http://ADDR/metrics: connections,
    /// refusals by kind, fabric and journal errors, tunnels by state,
    /// upcalls, and whether this daemon serves (a replica: leads).
    #[arg(long)]
    metrics: Option<std::net::SocketAddr>,
    /// This replica's id, with --peer.
    #[arg(long, requires = "peers")]
    id: Option<u64>,
    /// A replica of a replicated controller, ID=RAFT_ADDR/CLIENT_ADDR, once
    /// per replica (this one included; give every replica the same list).
    /// The controller's changes then go through an X-Raft log among the
    /// replicas (UDP and TCP on RAFT_ADDR): the leader serves hosts, the
    /// others refuse them naming it, and any minority of replicas may fail.
    /// --state holds this replica's raft log; the replica listens on its
    /// CLIENT_ADDR (--listen is not used).
    #[arg(long = "peer", value_name = "ID=RAFT/CLIENT", requires = "id")]
    peers: Vec<String>,
}

#[derive(clap::Args)]
struct KeygenArgs {
    /// Host names, comma-separated.
    #[arg(long, value_delimiter = ',', required = true)]
    hosts: Vec<String>,
    /// Write to this new file (mode 0600) instead of stdout.
    #[arg(long)]
    out: Option<PathBuf>,
}

#[derive(clap::Args)]
struct Conn {
    /// The host to speak for (the tunnel's sender).
    #[arg(long)]
    host: String,
    /// Keys file holding --host's key.
    #[arg(long)]
    keys: PathBuf,
    /// The controller; a replicated one's replicas comma-separated (the
    /// serving one is found).
    #[arg(long, default_value = "127.0.0.1:7070", value_delimiter = ',')]
    controller: Vec<SocketAddr>,
}

#[derive(clap::Args)]
struct RequestArgs {
    #[command(flatten)]
    conn: Conn,
    /// Receiving hosts, comma-separated (several: multicast).
    #[arg(long, value_delimiter = ',', required = true)]
    to: Vec<String>,
    /// Largest packet, bytes (σ).
    #[arg(long)]
    load: u32,
    /// Period: a number with ns, us, ms or s (e.g. 200us); the granted one
    /// may be larger.
    #[arg(long, value_parser = parse_duration_ns)]
    period: u64,
    /// Express sub-lane (0 = highest priority).
    #[arg(long, default_value_t = 0)]
    sublane: u8,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args)]
struct ChangeArgs {
    #[command(flatten)]
    conn: Conn,
    /// The tunnel id.
    #[arg(long)]
    tunnel: u64,
    /// New largest packet, bytes.
    #[arg(long)]
    load: u32,
    /// New period (e.g. 200us).
    #[arg(long, value_parser = parse_duration_ns)]
    period: u64,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args)]
struct ReleaseArgs {
    #[command(flatten)]
    conn: Conn,
    /// The tunnel id.
    #[arg(long)]
    tunnel: u64,
}

#[derive(clap::Args)]
struct TunnelKeyArgs {
    #[command(flatten)]
    conn: Conn,
    /// The tunnel id (one --host sends or receives on).
    #[arg(long)]
    tunnel: u64,
}

#[derive(clap::Args)]
struct ListArgs {
    #[command(flatten)]
    conn: Conn,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args)]
struct WatchArgs {
    #[command(flatten)]
    conn: Conn,
    /// Stop after this many seconds (default: until SIGINT/SIGTERM).
    #[arg(long)]
    seconds: Option<f64>,
}

fn parse_fsync(s: &str) -> Result<FsyncPolicy, String> {
    s.parse()
}

/// `200us`, `1.5ms`, `2s`, `500ns` (a bare number is ns) → ns.
fn parse_duration_ns(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let scale = match unit.trim() {
        "" | "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        u => return Err(format!("unknown unit `{u}` (use ns, us, ms or s)")),
    };
    let v: f64 = num
        .parse()
        .map_err(|_| format!("`{s}` is not a duration like 200us"))?;
    let ns = (v * scale).round();
    if !(1.0..=u64::MAX as f64).contains(&ns) {
        return Err(format!("`{s}` is not a positive duration"));
    }
    Ok(ns as u64)
}

/// Runs `xlane ctl`.
pub fn run(args: Args) -> super::CmdResult {
    match args.cmd {
        Cmd::Serve(a) => serve(a),
        Cmd::Keygen(a) => keygen(a),
        Cmd::Request(a) => request(a),
        Cmd::Change(a) => change(a),
        Cmd::Release(a) => release(a),
        Cmd::List(a) => list(a),
        Cmd::TunnelKey(a) => {
            let mut c = connect(&a.conn)?;
            let key = c.tunnel_key(TunnelId(a.tunnel))?;
            let id = u32::try_from(a.tunnel)
                .map_err(|_| format!("tunnel {} does not fit a key id", a.tunnel))?;
            print!(
                "{}",
                xlane_auth::KeyRing::from_pairs(&[(id, key)]).to_toml()
            );
            Ok(())
        }
        Cmd::Watch(a) => watch(a),
        Cmd::ExportSwitchConfig(a) => export_switch_config(a),
    }
}

fn export_switch_config(a: ExportArgs) -> super::CmdResult {
    use xlane_netcfg::switch;
    let text = std::fs::read_to_string(&a.topology)
        .map_err(|e| format!("{}: {e}", a.topology.display()))?;
    let te_topo =
        Topology::from_toml(&text).map_err(|e| format!("{}: {e}", a.topology.display()))?;
    let ports = xlane_testbed::Topology::from_toml(&text)
        .map_err(|e| format!("{}: {e}", a.topology.display()))?;
    if let Some(s) = &a.switch {
        let known = ports
            .node
            .iter()
            .any(|n| &n.name == s && n.kind == xlane_testbed::NodeKind::Switch);
        if !known {
            return Err(format!("--switch {s}: no switch of that name in the topology").into());
        }
    }
    let records = xlane_ctl::store::Store::read(&a.state)
        .map_err(|e| format!("state {}: {e}", a.state.display()))?;
    let defaults = ServerConfig::new(([127, 0, 0, 1], 0).into(), a.state.clone());
    let core = xlane_ctl::Controller::recover(te_topo, defaults.te, defaults.policy, &records)
        .map_err(|e| format!("state {}: {e}", a.state.display()))?;
    let plan = switch::plan(&ports, &core.resync())?;
    let out = match a.format {
        SwitchFormat::Tc => switch::render_tc(&plan, a.switch.as_deref()),
        SwitchFormat::Sonic => {
            let v = switch::render_sonic(&plan, a.switch.as_deref());
            format!("{}\n", serde_json::to_string_pretty(&v)?)
        }
    };
    match &a.out {
        Some(p) => std::fs::write(p, out).map_err(|e| format!("{}: {e}", p.display()))?,
        None => print!("{out}"),
    }
    let tunnels: usize = plan.ports.iter().map(|p| p.tunnels.len()).sum();
    tracing::info!(
        "{} switch port(s), {tunnels} tunnel class(es), {} demoted tunnel(s)",
        plan.ports.len(),
        plan.demoted.len()
    );
    Ok(())
}

/// Prints fabric operations instead of programming anything.
struct LogFabric;

impl Fabric for LogFabric {
    fn apply(&mut self, op: &FabricOp) -> Result<(), FabricError> {
        tracing::info!("fabric: {op:?}");
        Ok(())
    }
    fn meters(&mut self) -> Result<Vec<SwitchMeter>, FabricError> {
        Ok(Vec::new())
    }
}

/// A topology file, or a generated fabric's spec (`fat-tree:4`).
fn load_topology(p: &Path) -> Result<Topology, String> {
    let text = p.to_string_lossy();
    if !p.exists() && (text.starts_with("fat-tree:") || text.starts_with("leaf-spine:")) {
        return xlane_ctl::te::gen::from_spec(&text).map_err(|e| format!("--topology {text}: {e}"));
    }
    Topology::from_file(p).map_err(|e| format!("--topology {}: {e}", p.display()))
}

fn serve(a: ServeArgs) -> super::CmdResult {
    let topo = load_topology(&a.topology)?;
    let keys = Keys::from_file(&a.keys)?;
    for h in keys.hosts() {
        if topo.node_id(h).is_none() {
            tracing::warn!("key for `{h}`, which is not in the topology");
        }
    }
    let mut cfg = ServerConfig::new(a.listen, a.state.clone());
    cfg.fsync = a.fsync;
    cfg.tick_interval = Duration::from_millis(a.meter_interval_ms);
    cfg.policy.exceed_tolerance_permille = a.exceed_tolerance_permille;
    if let Some(ms) = a.unused_after_ms {
        cfg.policy.unused_intervals =
            ms.div_ceil(a.meter_interval_ms).clamp(1, u32::MAX as u64) as u32;
    }
    let fabric: Box<dyn Fabric> = if let Some(prefix) = &a.testbed {
        let hosts = topo
            .nodes()
            .iter()
            .filter(|n| n.kind == xlane_ctl::te::topology::NodeKind::Host)
            .count();
        Box::new(xlane_bench::fabric::TestbedFabric::attach(prefix, hosts)?)
    } else if a.log_fabric {
        Box::new(LogFabric)
    } else {
        Box::new(NoFabric)
    };
    let stop = install_termination_flag();
    if let Some(id) = a.id {
        return serve_replica(id, &a, cfg, topo, keys, fabric, stop);
    }
    let server = Server::start(cfg, topo, keys, fabric)?;
    let _exporter = match a.metrics {
        Some(m) => {
            let h = server.stats_handle();
            let e = xlane_metrics::Exporter::serve(m, std::sync::Arc::new(move || ctl_metrics(&h)))
                .map_err(|e| format!("--metrics {m}: {e}"))?;
            tracing::info!("metrics at http://{}/metrics", e.local_addr());
            Some(e)
        }
        None => None,
    };
    tracing::info!(
        "listening on {}; state {}: {}; {} tunnel(s)",
        server.local_addr(),
        a.state.display(),
        server.recovery(),
        server.tunnels().len()
    );
    let handle = server.stop_flag();
    std::thread::spawn(move || {
        while !stop.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(100));
        }
        handle.stop();
    });
    server.wait();
    tracing::info!("stopped");
    Ok(())
}

/// `xlane ctl serve --id N --peer ...`: one replica of a replicated
/// controller, until SIGINT/SIGTERM.
fn serve_replica(
    id: u64,
    a: &ServeArgs,
    cfg: ServerConfig,
    topo: Topology,
    keys: Keys,
    fabric: Box<dyn Fabric>,
    stop: &std::sync::atomic::AtomicBool,
) -> super::CmdResult {
    use xlane_ctl_replica::{parse_replica, ControllerReplica, ReplicaConfig};
    let mut peers = std::collections::BTreeMap::new();
    for p in &a.peers {
        let (pid, addrs) = parse_replica(p).map_err(|e| format!("--peer {p:?}: {e}"))?;
        if peers.insert(pid, addrs).is_some() {
            return Err(format!("--peer: replica {pid} given twice").into());
        }
    }
    if !peers.contains_key(&id) {
        return Err(format!("--id {id}: no --peer entry for this replica").into());
    }
    let n = peers.len();
    let mut rc = ReplicaConfig::new(id, peers, a.state.clone())?;
    rc.storage.fsync = match a.fsync {
        // Once per raft Ready, before any message leaves: nothing is
        // acknowledged before it is on disk.
        FsyncPolicy::Always => xlane_ctl_replica::FsyncPolicy::Batch,
        FsyncPolicy::Never => xlane_ctl_replica::FsyncPolicy::Never,
    };
    let (te, policy) = (cfg.te.clone(), cfg.policy.clone());
    rc.server = cfg;
    if let Some(f) = &a.raft_key.key_file {
        rc.auth = Some(xlane_ctl_replica::NetAuth {
            ring: super::fd::key_ring(f)?,
            key_id: a.raft_key.key_id,
        });
    }
    let replica = ControllerReplica::start(rc, topo, te, policy, keys, fabric)?;
    let _exporter = match (a.metrics, replica.server()) {
        (Some(m), Some(server)) => {
            let h = server.stats_handle();
            let e = xlane_metrics::Exporter::serve(m, std::sync::Arc::new(move || ctl_metrics(&h)))
                .map_err(|e| format!("--metrics {m}: {e}"))?;
            tracing::info!("metrics at http://{}/metrics", e.local_addr());
            Some(e)
        }
        _ => None,
    };
    tracing::info!(
        "listening on {}; replica {id} of {n}; raft log {}: {} record(s) replayed{}",
        replica
            .client_addr()
            .map_or_else(|| "-".into(), |a| a.to_string()),
        a.state.display(),
        replica.open_report().records,
        if replica.open_report().torn_tail.is_some() {
            ", a torn tail cut"
        } else {
            ""
        }
    );
    let mut serving = false;
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(50));
        let now = replica.serves();
        if now != serving {
            serving = now;
            if now {
                tracing::info!("replica {id} serves");
            } else {
                tracing::info!(
                    "replica {id} follows (leader: replica {})",
                    replica.leader_id()
                );
            }
        }
    }
    replica.stop();
    tracing::info!("stopped");
    Ok(())
}

/// The controller's metrics.
fn ctl_metrics(h: &xlane_ctl::server::StatsHandle) -> Vec<xlane_metrics::Family> {
    use xlane_ctl::proto::TunnelState;
    use xlane_metrics::{Family, Kind};
    let s = h.stats();
    let tunnels = h.tunnels();
    let active = tunnels
        .iter()
        .filter(|t| t.state == TunnelState::Active)
        .count() as f64;
    let c = |name: &str, help: &str, v: u64| Family::one(name, help, Kind::Counter, v as f64);
    vec![
        c(
            "xlane_ctl_connections_total",
            "Host connections accepted.",
            s.connections,
        ),
        Family::one(
            "xlane_ctl_open_connections",
            "Host connections open now.",
            Kind::Gauge,
            s.open_connections as f64,
        ),
        Family::by(
            "xlane_ctl_refused_total",
            "Connections or frames refused, by reason.",
            Kind::Counter,
            "reason",
            &[
                ("malformed", s.malformed as f64),
                ("auth_failure", s.auth_failures as f64),
                ("slow_client", s.slow_clients as f64),
            ],
        ),
        c(
            "xlane_ctl_fabric_errors_total",
            "Fabric operations that failed.",
            s.fabric_errors,
        ),
        c(
            "xlane_ctl_journal_errors_total",
            "Journal appends that failed (rolled back).",
            s.store_errors,
        ),
        c(
            "xlane_ctl_compactions_total",
            "Journal compactions.",
            s.compactions,
        ),
        Family::one(
            "xlane_ctl_serving",
            "1 while this daemon answers hosts (a replica: while it leads), else 0.",
            Kind::Gauge,
            if h.serves() { 1.0 } else { 0.0 },
        ),
        c(
            "xlane_ctl_upcalls_total",
            "Upcalls queued to subscribed connections.",
            s.upcalls,
        ),
        c(
            "xlane_ctl_unanswered_total",
            "Requests a replica left unanswered (its leadership was lost while they were replicated).",
            s.unanswered,
        ),
        Family::by(
            "xlane_ctl_tunnels",
            "Tunnels by state.",
            Kind::Gauge,
            "state",
            &[
                ("active", active),
                ("unbounded", tunnels.len() as f64 - active),
            ],
        ),
    ]
}

fn keygen(a: KeygenArgs) -> super::CmdResult {
    let keys = Keys::generate(&a.hosts)?;
    let text = keys.to_toml();
    match a.out {
        None => print!("{text}"),
        Some(p) => write_private(&p, &text)?,
    }
    Ok(())
}

fn write_private(p: &Path, text: &str) -> super::CmdResult {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(p)
        .map_err(|e| format!("{}: {e}", p.display()))?;
    f.write_all(text.as_bytes())
        .map_err(|e| format!("{}: {e}", p.display()))?;
    Ok(())
}

fn connect(c: &Conn) -> Result<Client, Box<dyn std::error::Error>> {
    let key = host_key(&c.keys, &c.host)?;
    Ok(connect_as(&c.controller, &c.host, &key)?)
}

/// `host`'s key from the keys file at `path` (`xlane ctl keygen`).
pub(super) fn host_key(path: &std::path::Path, host: &str) -> Result<Key, String> {
    let keys = Keys::from_file(path).map_err(|e| e.to_string())?;
    keys.get(host)
        .cloned()
        .ok_or_else(|| format!("no key for host `{host}` in {}", path.display()))
}

/// A connection, authenticated as `host`, to whichever of `addrs` serves:
/// the controller's address, or a replicated controller's replicas (tried
/// in order). The error names every address tried.
pub(super) fn connect_as(addrs: &[SocketAddr], host: &str, key: &Key) -> Result<Client, String> {
    Client::connect_any(addrs, host, key)
        .map_err(|e| format!("controller {}: {e}", addr_list(addrs)))
}

/// `a,b,c`: controller addresses as messages name them.
pub(super) fn addr_list(addrs: &[SocketAddr]) -> String {
    let v: Vec<String> = addrs.iter().map(ToString::to_string).collect();
    v.join(",")
}

/// A duration of a tunnel's resources, or "unbounded".
fn fmt_bound(ns: u64) -> String {
    if ns == UNBOUNDED_NS {
        "unbounded".into()
    } else {
        xlane_stats::fmt_ns(ns)
    }
}

fn granted_json(g: &Granted) -> serde_json::Value {
    serde_json::json!({
        "tunnel": g.tunnel.0,
        "load_bytes": g.resources.load_bytes,
        "period_ns": g.resources.period_ns,
        "min_latency_ns": g.resources.min_latency_ns,
        "max_jitter_ns": g.resources.max_jitter_ns,
        "period_raised": g.period_raised,
    })
}

fn print_granted(what: &str, g: &Granted, json: bool) {
    if json {
        println!("{}", granted_json(g));
    } else {
        let r = &g.resources;
        println!(
            "{what} {}: {} B every {}{}, latency {} .. {}",
            g.tunnel,
            r.load_bytes,
            fmt_bound(r.period_ns),
            if g.period_raised {
                " (period raised)"
            } else {
                ""
            },
            fmt_bound(r.min_latency_ns),
            fmt_bound(r.min_latency_ns.saturating_add(r.max_jitter_ns)),
        );
    }
}

fn request(a: RequestArgs) -> super::CmdResult {
    let mut c = connect(&a.conn)?;
    let g = c.request(&a.to, a.load, a.period, a.sublane)?;
    print_granted("granted", &g, a.json);
    Ok(())
}

fn change(a: ChangeArgs) -> super::CmdResult {
    let mut c = connect(&a.conn)?;
    let g = c.change(TunnelId(a.tunnel), a.load, a.period)?;
    print_granted("changed", &g, a.json);
    Ok(())
}

fn release(a: ReleaseArgs) -> super::CmdResult {
    let mut c = connect(&a.conn)?;
    c.release(TunnelId(a.tunnel))?;
    println!("released tunnel {}", a.tunnel);
    Ok(())
}

fn info_json(t: &TunnelInfo) -> serde_json::Value {
    serde_json::json!({
        "tunnel": t.tunnel.0,
        "sender": t.sender,
        "receivers": t.receivers,
        "sublane": t.sublane,
        "state": match t.state { TunnelState::Active => "active", TunnelState::Unbounded => "unbounded" },
        "requested_period_ns": t.requested_period_ns,
        "load_bytes": t.resources.load_bytes,
        "period_ns": t.resources.period_ns,
        "min_latency_ns": t.resources.min_latency_ns,
        "max_jitter_ns": if t.resources.max_jitter_ns == UNBOUNDED_NS {
            serde_json::Value::Null
        } else {
            t.resources.max_jitter_ns.into()
        },
    })
}

fn list(a: ListArgs) -> super::CmdResult {
    let mut c = connect(&a.conn)?;
    let (tunnels, truncated) = c.list()?;
    if a.json {
        let v = serde_json::json!({
            "tunnels": tunnels.iter().map(info_json).collect::<Vec<_>>(),
            "truncated": truncated,
        });
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(());
    }
    println!(
        "{:>6}  {:<8} {:<20} {:>3}  {:<9} {:>6}  {:>10}  {:>10}  {:>10}",
        "tunnel", "sender", "receivers", "sub", "state", "load", "period", "λmin", "δmax"
    );
    for t in &tunnels {
        println!(
            "{:>6}  {:<8} {:<20} {:>3}  {:<9} {:>5}B  {:>10}  {:>10}  {:>10}",
            t.tunnel.0,
            t.sender,
            t.receivers.join(","),
            t.sublane,
            match t.state {
                TunnelState::Active => "active",
                TunnelState::Unbounded => "unbounded",
            },
            t.resources.load_bytes,
            fmt_bound(t.resources.period_ns),
            fmt_bound(t.resources.min_latency_ns),
            fmt_bound(t.resources.max_jitter_ns),
        );
    }
    if truncated {
        println!("(more tunnels than fit in one reply)");
    }
    Ok(())
}

fn watch(a: WatchArgs) -> super::CmdResult {
    let stop = install_termination_flag();
    let mut c = connect(&a.conn)?;
    c.subscribe()?;
    let until = a
        .seconds
        .map(|s| Instant::now() + Duration::from_secs_f64(s.max(0.0)));
    while !stop.load(Ordering::Relaxed) && until.map_or(true, |u| Instant::now() < u) {
        let Some(up) = c.next_upcall(Duration::from_millis(200))? else {
            continue;
        };
        let v = match up {
            Upcall::BandwidthChanged {
                tunnel,
                old,
                new,
                reason,
                grace_ns,
            } => serde_json::json!({
                "upcall": "bandwidth_changed",
                "tunnel": tunnel.0,
                "reason": format!("{reason:?}"),
                "grace_ns": grace_ns,
                "old": {"load_bytes": old.load_bytes, "period_ns": old.period_ns,
                        "min_latency_ns": old.min_latency_ns, "max_jitter_ns": old.max_jitter_ns},
                "new": {"load_bytes": new.load_bytes, "period_ns": new.period_ns,
                        "min_latency_ns": new.min_latency_ns,
                        "max_jitter_ns": if new.max_jitter_ns == UNBOUNDED_NS { serde_json::Value::Null } else { new.max_jitter_ns.into() }},
            }),
            Upcall::BandwidthTerminated { tunnel, reason } => serde_json::json!({
                "upcall": "bandwidth_terminated",
                "tunnel": tunnel.0,
                "reason": format!("{reason:?}"),
            }),
        };
        println!("{v}");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::parse_duration_ns;

    #[test]
    fn durations() {
        let table = [
            ("200us", Ok(200_000)),
            ("1.5ms", Ok(1_500_000)),
            ("2s", Ok(2_000_000_000)),
            ("500ns", Ok(500)),
            ("700", Ok(700)),
            ("0us", Err(())),
            ("3 parsecs", Err(())),
            ("ms", Err(())),
        ];
        for (s, want) in table {
            assert_eq!(parse_duration_ns(s).map_err(|_| ()), want, "{s}");
        }
    }
}
