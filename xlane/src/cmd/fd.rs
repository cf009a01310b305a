//! `xlane fd`: X-FD, the failure detector on the express lane (paper §5.1).
//!
//! * `xlane fd run` — the runner: heartbeats every period T over the
//!   periodic multicast lane, the alive table and its event ring in shared
//!   memory. Prints one JSON line `{"event":"ready",..}` once bound, one JSON
//!   line per detector event, and the run's counters as JSON on exit
//!   (SIGTERM, SIGINT or `--seconds`).
//! * `xlane fd watch` — prints the live alive table (refreshing), or once,
//!   as text or JSON.
//! * `xlane fd bump` — a stand-in application: bumps a liveness counter
//!   every interval (T/3 in the paper's evaluation).
//! * `xlane fd keygen` — prints a cluster key file for `run --key-file`.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use xlane_fd::service::{bump_loop, FdAuth, RunConfig, Service, Transport};
use xlane_fd::shm::RUN_DIR;
use xlane_fd::{AliveTable, Anchor, Event, EventItem, LivenessCounter, PeerSpec, Reason, Status};
use xlane_host::runtime::{Placement, WaitMode};
use xlane_host::socket::realtime_ns;
use xlane_host::tuning::install_termination_flag;
use xlane_stats::fmt_ns;

/// Arguments of `xlane fd`.
#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(clap::Subcommand)]
enum Cmd {
    /// Run X-FD: send heartbeats, watch the peers, publish the alive table.
    Run(Box<RunArgs>),
    /// Print the alive table of a running X-FD.
    Watch(WatchArgs),
    /// Bump a liveness counter periodically (a stand-in application).
    Bump(BumpArgs),
    /// Print a cluster key file (TOML, fresh random keys) for `run
    /// --key-file`: give every host the same file, mode 0600.
    Keygen(KeygenArgs),
}

#[derive(clap::Args)]
struct KeygenArgs {
    /// Key ids to generate (one per group); repeat or separate with commas.
    #[arg(long = "id", value_delimiter = ',', default_value = "1")]
    ids: Vec<u32>,
}

fn duration(s: &str) -> Result<u64, String> {
    xlane_lancet::dist::parse_duration_ns(s).map_err(|e| e.to_string())
}

fn default_table() -> PathBuf {
    PathBuf::from(RUN_DIR).join("fd.table")
}

#[derive(clap::Args)]
struct RunArgs {
    /// This host's heartbeat address, ADDR:PORT (what peers know it by).
    #[arg(long, conflicts_with = "iface")]
    bind: Option<SocketAddrV4>,
    /// Take the heartbeat address from this interface (with --port).
    #[arg(long, requires = "port")]
    iface: Option<String>,
    /// Heartbeat port with --iface.
    #[arg(long)]
    port: Option<u16>,
    /// Multicast group GROUP:PORT (the port must be the heartbeat port).
    /// Without it, each heartbeat is sent to every peer.
    #[arg(long)]
    group: Option<SocketAddrV4>,
    /// A peer, ADDR:PORT[/TUNNEL]; repeat, or separate with commas. This
    /// host's own address may be listed (it is skipped).
    #[arg(long = "peer", value_delimiter = ',', required = true)]
    peers: Vec<String>,
    /// Tunnel of this host's heartbeats (and the peers' default).
    #[arg(long, default_value_t = 253)]
    tunnel: u32,
    /// Heartbeat period T.
    #[arg(long, default_value = "1ms", value_parser = duration)]
    period: u64,
    /// Λ: a peer is suspected after T + Λ without a heartbeat.
    #[arg(long, default_value = "500us", value_parser = duration)]
    lambda: u64,
    /// Suspect a peer whose application counter stopped for this many
    /// periods (0: off).
    #[arg(long, default_value_t = 10)]
    stall: u32,
    /// Suspect peers never heard this long after start (default: never).
    #[arg(long, value_parser = duration)]
    join_grace: Option<u64>,
    /// Count silence from the last arrival (arrival) or from the sender's
    /// send time (send; needs synchronized clocks).
    #[arg(long, default_value = "arrival", value_parser = ["arrival", "send"])]
    anchor: String,
    /// Plain UDP heartbeats on a best-effort socket (the baseline) instead of the lane.
    #[arg(long)]
    plain: bool,
    /// The application's liveness counter file (created if absent).
    #[arg(long)]
    counter: Option<PathBuf>,
    /// The alive table file.
    #[arg(long, default_value_os_t = default_table())]
    table: PathBuf,
    /// Event slots in the table's ring.
    #[arg(long, default_value_t = 4096)]
    events: usize,
    /// Pin the runner to this core.
    #[arg(long)]
    core: Option<usize>,
    /// SCHED_FIFO priority (0: normal scheduling).
    #[arg(long, default_value_t = 0)]
    fifo: i32,
    /// How the runner waits: interrupt or busy-poll.
    #[arg(long, default_value = "interrupt")]
    mode: WaitMode,
    /// Do not lock memory.
    #[arg(long)]
    no_mlock: bool,
    /// Enter this network namespace (as `ip netns` names it) first.
    #[arg(long)]
    netns: Option<String>,
    /// Stop after this many seconds (0: until SIGTERM/SIGINT).
    #[arg(long, default_value_t = 0.0)]
    seconds: f64,
    /// Do not print event lines.
    #[arg(long)]
    quiet: bool,
    /// Authenticate heartbeats with the keys of this cluster key file
    /// (`xlane fd keygen`): every heartbeat sent carries a MAC, and every
    /// datagram that is forged, replayed or without one is counted and
    /// dropped before it is decoded.
    #[arg(long)]
    key_file: Option<PathBuf>,
    /// The key this host seals with (every peer must hold it).
    #[arg(long, default_value_t = 1, requires = "key_file")]
    key_id: u32,
    /// Serve Prometheus metrics at http://ADDR/metrics: heartbeats sent
    /// and received, datagrams ignored by reason, events, peers by status
    /// (read from the alive table at each scrape).
    #[arg(long)]
    metrics: Option<std::net::SocketAddr>,
}

#[derive(clap::Args)]
struct WatchArgs {
    /// The alive table file.
    #[arg(long, default_value_os_t = default_table())]
    table: PathBuf,
    /// Print once and exit.
    #[arg(long)]
    once: bool,
    /// JSON instead of text (one object per refresh).
    #[arg(long)]
    json: bool,
    /// Refresh interval.
    #[arg(long, default_value = "200ms", value_parser = duration)]
    interval: u64,
    /// Recent events shown.
    #[arg(long, default_value_t = 10)]
    last: u64,
}

#[derive(clap::Args)]
struct BumpArgs {
    /// The liveness counter file (created if absent).
    #[arg(long)]
    counter: PathBuf,
    /// Bump interval (the paper: T/3).
    #[arg(long, default_value = "333us", value_parser = duration)]
    interval: u64,
    /// SCHED_FIFO priority (0: normal scheduling).
    #[arg(long, default_value_t = 0)]
    fifo: i32,
    /// Stop after this many seconds (0: until SIGTERM/SIGINT).
    #[arg(long, default_value_t = 0.0)]
    seconds: f64,
}

/// Runs `xlane fd`.
pub fn run(args: Args) -> super::CmdResult {
    match args.cmd {
        Cmd::Run(a) => run_fd(*a),
        Cmd::Watch(a) => watch(a),
        Cmd::Bump(a) => bump(a),
        Cmd::Keygen(a) => {
            let mut ring = xlane_auth::KeyRing::default();
            for id in a.ids {
                ring.insert(id, xlane_auth::Key::random()?);
            }
            print!("{}", ring.to_toml());
            Ok(())
        }
    }
}

fn until(seconds: f64) -> Result<u64, String> {
    if !(seconds >= 0.0 && seconds.is_finite()) {
        return Err("--seconds must be 0 or more".into());
    }
    Ok(if seconds > 0.0 {
        realtime_ns().saturating_add((seconds * 1e9) as u64)
    } else {
        u64::MAX
    })
}

fn fifo(prio: i32) -> Result<Option<i32>, String> {
    match prio {
        0 => Ok(None),
        1..=99 => Ok(Some(prio)),
        p => Err(format!("--fifo {p}: use 0..=99")),
    }
}

/// A cluster key file (`xlane fd keygen`), read and checked.
pub(super) fn key_ring(f: &std::path::Path) -> Result<xlane_auth::KeyRing, String> {
    let text =
        std::fs::read_to_string(f).map_err(|e| format!("--key-file {}: {e}", f.display()))?;
    xlane_auth::KeyRing::from_toml(&text).map_err(|e| format!("--key-file {}: {e}", f.display()))
}

/// The first IPv4 address of an interface.
fn iface_ipv4(name: &str) -> Result<Ipv4Addr, String> {
    let addrs = nix::ifaddrs::getifaddrs().map_err(|e| format!("getifaddrs: {e}"))?;
    for a in addrs {
        if a.interface_name != name {
            continue;
        }
        if let Some(sin) = a.address.as_ref().and_then(|s| s.as_sockaddr_in()) {
            return Ok(sin.ip());
        }
    }
    Err(format!("interface {name} has no IPv4 address"))
}

fn run_fd(a: RunArgs) -> super::CmdResult {
    let until_ns = until(a.seconds)?;
    let placement = Placement {
        core: a.core,
        fifo: fifo(a.fifo)?,
    };
    // Enter the namespace before anything looks at interfaces or sockets.
    let _netns = match &a.netns {
        Some(n) => Some(xlane_testbed::enter_netns(n)?),
        None => None,
    };
    let addr = match (a.bind, &a.iface, a.port) {
        (Some(b), _, _) => b,
        (None, Some(i), Some(p)) => SocketAddrV4::new(iface_ipv4(i)?, p),
        _ => return Err("give --bind ADDR:PORT or --iface NAME --port PORT".into()),
    };
    let peers = a
        .peers
        .iter()
        .filter(|s| !s.trim().is_empty())
        .map(|s| PeerSpec::parse(s, a.tunnel))
        .collect::<Result<Vec<_>, _>>()?;
    let cfg = RunConfig {
        addr,
        group: a.group,
        peers,
        tunnel: a.tunnel,
        period_ns: a.period,
        lambda_ns: a.lambda,
        stall_periods: (a.stall > 0).then_some(a.stall),
        join_grace_ns: a.join_grace,
        anchor: if a.anchor == "send" {
            Anchor::SendTime
        } else {
            Anchor::Arrival
        },
        transport: if a.plain {
            Transport::Plain
        } else {
            Transport::Lane
        },
        counter: a.counter.clone(),
        table: a.table.clone(),
        event_capacity: a.events,
        placement,
        mode: a.mode,
        lock_memory: !a.no_mlock,
        until_ns,
        auth: match &a.key_file {
            Some(f) => Some(FdAuth {
                ring: key_ring(f)?,
                key_id: a.key_id,
            }),
            None => None,
        },
    };
    let stop = install_termination_flag();
    let svc = Service::start(cfg)?;
    let exporter = match a.metrics {
        Some(m) => {
            let table = svc.table_path().to_path_buf();
            let e = xlane_metrics::Exporter::serve(m, Arc::new(move || fd_metrics(&table)))
                .map_err(|e| format!("--metrics {m}: {e}"))?;
            Some(e)
        }
        None => None,
    };
    let peers: Vec<String> = svc
        .detector()
        .peers()
        .map(|p| format!("{}/{}", p.addr, p.tunnel))
        .collect();
    println!(
        "{}",
        serde_json::json!({
            "event": "ready",
            "addr": svc.addr().to_string(),
            "table": svc.table_path().display().to_string(),
            "counter": a.counter.as_ref().map(|c| c.display().to_string()),
            "peers": peers,
            "period_ns": a.period,
            "lambda_ns": a.lambda,
            "pid": std::process::id(),
            "metrics": exporter.as_ref().map(|e| e.local_addr().to_string()),
        })
    );
    let quiet = a.quiet;
    let mut on_event = |e: &Event| {
        if !quiet {
            println!("{}", event_json(e));
        }
    };
    let report = svc.run(stop, &mut on_event)?;
    if report.memory_unlocked {
        tracing::warn!("mlockall failed (pages may fault in)");
    }
    println!("{}", serde_json::json!({"event": "exit", "report": report}));
    Ok(())
}

/// The metrics of a running X-FD, from its alive table.
fn fd_metrics(table: &std::path::Path) -> Vec<xlane_metrics::Family> {
    use xlane_metrics::{Family, Kind};
    let Ok(t) = AliveTable::open(table) else {
        return Vec::new();
    };
    let st = t.stats();
    let (mut alive, mut suspected, mut unknown) = (0.0, 0.0, 0.0);
    for i in 0..t.len() {
        match t.entry(i).map(|p| p.status) {
            Ok(Status::Alive) => alive += 1.0,
            Ok(Status::Suspected(_)) => suspected += 1.0,
            _ => unknown += 1.0,
        }
    }
    vec![
        Family::one(
            "xlane_fd_heartbeats_sent_total",
            "Heartbeats this host sent.",
            Kind::Counter,
            st.heartbeats_sent as f64,
        ),
        Family::one(
            "xlane_fd_heartbeats_received_total",
            "Heartbeats accepted from peers.",
            Kind::Counter,
            st.accepted as f64,
        ),
        Family::by(
            "xlane_fd_datagrams_ignored_total",
            "Datagrams ignored, by reason.",
            Kind::Counter,
            "reason",
            &[
                ("unknown_sender", st.unknown_sender as f64),
                ("unknown_tunnel", st.unknown_tunnel as f64),
                ("replay", st.replay as f64),
                ("malformed", st.malformed as f64),
            ],
        ),
        Family::one(
            "xlane_fd_send_errors_total",
            "Heartbeats the socket refused.",
            Kind::Counter,
            st.send_errors as f64,
        ),
        Family::one(
            "xlane_fd_events_total",
            "Detector events published (joined, suspected, recovered, restarted).",
            Kind::Counter,
            t.events_published() as f64,
        ),
        Family::one(
            "xlane_fd_events_dropped_total",
            "Events the detector dropped.",
            Kind::Counter,
            st.events_dropped as f64,
        ),
        Family::by(
            "xlane_fd_peers",
            "Watched peers by status.",
            Kind::Gauge,
            "status",
            &[
                ("alive", alive),
                ("suspected", suspected),
                ("unknown", unknown),
            ],
        ),
    ]
}

fn event_json(e: &Event) -> serde_json::Value {
    serde_json::json!({
        "event": kind_name(e),
        "number": e.number,
        "peer": e.peer,
        "addr": e.addr.to_string(),
        "at_ns": e.at_ns,
    })
}

fn kind_name(e: &Event) -> &'static str {
    use xlane_fd::EventKind::*;
    match e.kind {
        Joined => "joined",
        Suspected(Reason::Silent) => "suspected-silent",
        Suspected(Reason::Stalled) => "suspected-stalled",
        Recovered => "recovered",
        Restarted => "restarted",
    }
}

fn status_name(s: Status) -> &'static str {
    match s {
        Status::Unknown => "unknown",
        Status::Alive => "alive",
        Status::Suspected(Reason::Silent) => "SUSPECTED (silent)",
        Status::Suspected(Reason::Stalled) => "SUSPECTED (stalled)",
    }
}

fn ago(now: u64, t: Option<u64>) -> String {
    match t {
        None => "-".into(),
        Some(t) if t > now => "0".into(),
        Some(t) => fmt_ns(now - t),
    }
}

fn recent_events(t: &AliveTable, last: u64) -> Vec<Event> {
    let mut c = t.subscribe_from(t.events_published().saturating_sub(last));
    c.iter(t)
        .filter_map(|i| match i {
            EventItem::Event(e) => Some(e),
            EventItem::Missed(_) => None,
        })
        .collect()
}

fn render_text(t: &AliveTable, last: u64) -> String {
    use std::fmt::Write;
    let now = realtime_ns();
    let s = t.snapshot();
    let mut o = String::new();
    let state = if s.closed {
        "closed".to_string()
    } else {
        format!("updated {} ago", ago(now, Some(s.updated_ns)))
    };
    let _ = writeln!(
        o,
        "X-FD {} (pid {}), T = {}, Λ = {}, stall after {} periods; {state}",
        s.info.self_addr.map_or("?".to_string(), |a| a.to_string()),
        s.info.writer_pid,
        fmt_ns(s.info.period_ns),
        fmt_ns(s.info.threshold.max(0.0) as u64),
        s.info
            .stall_periods
            .map_or("-".to_string(), |k| k.to_string()),
    );
    let _ = writeln!(
        o,
        "{:<22} {:>6} {:<20} {:>10} {:>12} {:>10} {:>10} {:>10} {:>5}",
        "peer", "tunnel", "status", "heard", "counter", "advanced", "beats", "max gap-T", "susp"
    );
    for p in &s.peers {
        let max = p
            .max_level
            .map_or("-".to_string(), |l| fmt_ns(l.max(0.0) as u64));
        let _ = writeln!(
            o,
            "{:<22} {:>6} {:<20} {:>10} {:>12} {:>10} {:>10} {:>10} {:>5}",
            p.addr.to_string(),
            p.tunnel,
            status_name(p.status),
            ago(now, p.last_rx_ns),
            p.counter.map_or("-".to_string(), |c| c.to_string()),
            ago(now, p.counter_changed_ns),
            p.heartbeats,
            max,
            p.suspicions,
        );
    }
    for i in &s.unreadable {
        let _ = writeln!(o, "entry {i}: unreadable (writer busy)");
    }
    let st = s.stats;
    let _ = writeln!(
        o,
        "accepted {}  sent {}  ignored: unknown sender {}, unknown tunnel {}, replay {}, malformed {}  send errors {}",
        st.accepted, st.heartbeats_sent, st.unknown_sender, st.unknown_tunnel, st.replay, st.malformed, st.send_errors
    );
    for e in recent_events(t, last) {
        let _ = writeln!(
            o,
            "  #{:<6} {:>10} ago  {:<18} {}",
            e.number,
            ago(now, Some(e.at_ns)),
            kind_name(&e),
            e.addr
        );
    }
    o
}

fn render_json(t: &AliveTable, last: u64) -> Result<String, serde_json::Error> {
    let events: Vec<serde_json::Value> = recent_events(t, last).iter().map(event_json).collect();
    serde_json::to_string(&serde_json::json!({
        "now_ns": realtime_ns(),
        "table": t.snapshot(),
        "events": events,
    }))
}

fn watch(a: WatchArgs) -> super::CmdResult {
    let stop: &AtomicBool = install_termination_flag();
    let mut table = AliveTable::open(&a.table)?;
    loop {
        if a.json {
            println!("{}", render_json(&table, a.last)?);
        } else {
            if !a.once {
                print!("\x1b[H\x1b[2J");
            }
            print!("{}", render_text(&table, a.last));
        }
        if a.once || stop.load(std::sync::atomic::Ordering::Relaxed) {
            return Ok(());
        }
        std::thread::sleep(std::time::Duration::from_nanos(a.interval));
        // A restarted X-FD replaces the file: follow it.
        if table.is_closed() {
            if let Ok(t) = AliveTable::open(&a.table) {
                table = t;
            }
        }
    }
}

fn bump(a: BumpArgs) -> super::CmdResult {
    let until_ns = until(a.seconds)?;
    let counter = LivenessCounter::open_or_create(&a.counter)?;
    xlane_host::runtime::place_current_thread(Placement {
        core: None,
        fifo: fifo(a.fifo)?,
    })?;
    let stop = install_termination_flag();
    println!(
        "{}",
        serde_json::json!({"event": "ready", "counter": a.counter.display().to_string(), "pid": std::process::id()})
    );
    let n = bump_loop(&counter, a.interval, stop, until_ns);
    println!(
        "{}",
        serde_json::json!({"event": "exit", "bumps": n, "counter": counter.read()})
    );
    Ok(())
}
