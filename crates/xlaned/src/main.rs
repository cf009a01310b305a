//! `xlaned`: the endhost lane daemon.
//!
//! It runs one tunnel end — a periodic sender or a periodic receiver — on a
//! lane thread pinned to the lane core at `SCHED_FIFO`, with memory locked
//! and the host measures of X-Lane §4.3 applied for as long as it runs
//! (each one listed at start and restored on exit, also on SIGTERM and
//! SIGINT). Applications reach it through a bridge: a UNIX socket that
//! hands each of them a pair of shared-memory rings (R-X to the lane, X-R
//! from it).
//!
//! On exit it prints one JSON object with its counters on standard output.
//! At start, once the socket is bound, it prints one JSON line
//! `{"event":"ready",...}`, so a supervisor or a test knows the address
//! (and the `--metrics` endpoint's, which serves the counters and the
//! latency or wake-lateness histogram while it runs).

use clap::{Parser, Subcommand};
use serde_json::json;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;
use xlane_host::bridge::{
    delivery, BridgeServer, BridgeServerConfig, DeliveryHeader, LaneEnd, RingConfig,
};
use xlane_host::lane_loop::{FrameSink, LaneLoop, ReceiverSpec, SenderSpec, SlotFill, XdpSend};
use xlane_host::runtime::{
    default_lane_core, lock_memory, place_current_thread, Placement, Sample, WaitMode,
};
use xlane_host::socket::{realtime_ns, LaneSocket, SocketConfig};
use xlane_host::tuning::{install_termination_flag, HostTuning, RpsPolicy, RpsTarget, TuningPlan};
use xlane_host::xdp::{PathMode, RxPathProbe, XdpConfig, XdpRings};
use xlane_lane::{first_slot_after, Delivery, PeriodicReceiver, PeriodicSender, TunnelParams};
use xlane_metrics::{Family, Histogram, Kind, LATENCY_BOUNDS_NS};
use xlane_wire::{Schema, MAX_FRAME_LEN};

/// The xlane endhost daemon: one periodic tunnel end on a real-time lane thread.
#[derive(Parser)]
#[command(name = "xlaned", version, about, long_about = None, args_override_self = true)]
struct Cli {
    #[command(subcommand)]
    role: Role,
    /// Settings from a TOML file: each key is a long flag (`period-us =
    /// 500`, `no-tuning = true`); flags on the command line override it.
    #[arg(long, global = true, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Tunnel id (frames of other tunnels are counted and dropped).
    #[arg(long, default_value_t = 1, global = true)]
    tunnel: u32,
    /// Period π in microseconds: at most one frame per period.
    #[arg(long, default_value_t = 1000, global = true)]
    period_us: u64,
    /// Largest frame σ in bytes (header and chunks), at most 1472.
    #[arg(long, default_value_t = MAX_FRAME_LEN, global = true)]
    max_packet: usize,
    /// Chunk schema: 26 (55 chunks of 26 B per MTU) or 36 (40 chunks of 36 B).
    #[arg(long, default_value_t = 26, global = true)]
    schema: u8,
    /// The lane core (default: the last CPU).
    #[arg(long, global = true)]
    core: Option<usize>,
    /// SCHED_FIFO priority of the lane thread; 0 keeps the normal policy.
    #[arg(long, default_value_t = 80, global = true)]
    fifo: i32,
    /// How the lane thread waits: interrupt or busy-poll.
    #[arg(long, default_value = "interrupt", global = true)]
    mode: WaitMode,
    /// Do not apply the host measures (RT throttling, C-states, IRQ affinity).
    #[arg(long, global = true)]
    no_tuning: bool,
    /// Serve applications on this UNIX socket (bridges).
    #[arg(long, global = true)]
    bridge: Option<PathBuf>,
    /// Stop after this many seconds (0: run until SIGTERM or SIGINT).
    #[arg(long, default_value_t = 0.0, global = true)]
    seconds: f64,
    /// Enter this network namespace (by name, as `ip netns` knows it) first.
    #[arg(long, global = true)]
    netns: Option<String>,
    /// The lane's network interface (default: the one holding the bind,
    /// multicast-interface or join address). The default lane core is the
    /// last CPU of this NIC's NUMA node.
    #[arg(long, global = true)]
    iface: Option<String>,
    /// Steer the interface's receive (RPS) and transmit (XPS) kernel work
    /// onto the lane core, restored on exit. Use it when the interface
    /// carries lane traffic only.
    #[arg(long, global = true)]
    steer: bool,
    /// How a receiver reads the lane's frames: `socket` (the kernel's UDP
    /// path) or `xdp` (an XDP program on the interface steers the lane's
    /// DSCP and port to AF_XDP sockets the lane thread reads; everything
    /// else reaches the stack as before). Without XDP or AF_XDP on this
    /// host, `xdp` falls back to the socket and says so in one line.
    #[arg(long, global = true, default_value = "socket")]
    rx: xlane_host::xdp::PathMode,
    /// How a sender sends the lane's frames: `socket` (the kernel's UDP
    /// and IP output path) or `xdp` (the lane thread writes whole frames
    /// into an AF_XDP transmit ring of the interface; they skip its
    /// queueing discipline and netfilter, and reach multicast groups and
    /// hosts on the link the kernel has resolved). Without AF_XDP, or with
    /// a destination it cannot reach, `xdp` falls back to the socket and
    /// says so in one line.
    #[arg(long, global = true, default_value = "socket")]
    tx: xlane_host::xdp::PathMode,
    /// Serve Prometheus metrics at http://ADDR/metrics: frames, chunks,
    /// refusals, and histograms of the sender's wake lateness per slot
    /// (the host-gap floor as the lane core sees it) or the receiver's
    /// frame latency.
    #[arg(long, global = true)]
    metrics: Option<std::net::SocketAddr>,
}

/// What the lane thread counts for `--metrics` (atomics: the lane thread
/// writes, the exporter's thread reads; no allocation, no lock).
struct LaneMetrics {
    frames: AtomicU64,
    chunks: AtomicU64,
    heartbeats: AtomicU64,
    late_slots: AtomicU64,
    refused: AtomicU64,
    /// Sender: `now − slot` at each slot's fill.
    wake_late: Histogram,
    /// Receiver: send stamp to the receiving thread, per frame.
    latency: Histogram,
}

impl LaneMetrics {
    fn new() -> LaneMetrics {
        LaneMetrics {
            frames: AtomicU64::new(0),
            chunks: AtomicU64::new(0),
            heartbeats: AtomicU64::new(0),
            late_slots: AtomicU64::new(0),
            refused: AtomicU64::new(0),
            wake_late: Histogram::new(LATENCY_BOUNDS_NS),
            latency: Histogram::new(LATENCY_BOUNDS_NS),
        }
    }

    fn families(&self, sender: bool) -> Vec<Family> {
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed) as f64;
        let c =
            |name: &str, help: &str, a: &AtomicU64| Family::one(name, help, Kind::Counter, get(a));
        let mut v = vec![
            c(
                "xlane_lane_frames_total",
                "Frames sent (sender) or received (receiver).",
                &self.frames,
            ),
            c(
                "xlane_lane_chunks_total",
                "Chunks sent (sender) or delivered to the bridges (receiver).",
                &self.chunks,
            ),
        ];
        if sender {
            v.push(c(
                "xlane_lane_heartbeats_total",
                "Frames sent with no chunk.",
                &self.heartbeats,
            ));
            v.push(c(
                "xlane_lane_late_slots_total",
                "Slots skipped because the lane thread came after their window.",
                &self.late_slots,
            ));
            v.push(c(
                "xlane_lane_refused_total",
                "Application chunks refused by a full send queue.",
                &self.refused,
            ));
            v.push(Family::histogram(
                "xlane_lane_wake_late_seconds",
                "How late the lane thread was at each slot: the host-gap floor as the lane core sees it.",
                &self.wake_late,
            ));
        } else {
            v.push(c(
                "xlane_lane_refused_total",
                "Chunks not delivered to an application: its X-R bridge was full (or the chunk was longer than a delivery carries).",
                &self.refused,
            ));
            v.push(Family::histogram(
                "xlane_lane_latency_seconds",
                "Frame latency, the sender's stamp to the receiving thread (clocks must agree across hosts).",
                &self.latency,
            ));
        }
        v
    }
}

#[derive(Subcommand)]
enum Role {
    /// Send one frame per period to one or more destinations, packing what
    /// applications wrote into their bridges.
    Sender {
        /// Local address to send from.
        #[arg(long, default_value = "0.0.0.0:0")]
        bind: SocketAddrV4,
        /// Destination (a unicast peer or a multicast group); repeat to
        /// replicate each frame at the sender.
        #[arg(long, required = true)]
        dest: Vec<SocketAddrV4>,
        /// Send multicast out of the interface with this address.
        #[arg(long)]
        multicast_if: Option<Ipv4Addr>,
        /// Send a frame every period even when no application has data.
        #[arg(long)]
        heartbeat: bool,
    },
    /// Receive the tunnel's frames, stamp them, and hand the chunks to every
    /// application attached to the bridge.
    Receiver {
        /// Local address and port to receive on.
        #[arg(long)]
        bind: SocketAddrV4,
        /// Join a multicast group: GROUP@INTERFACE-ADDRESS.
        #[arg(long)]
        join: Option<String>,
    },
}

#[derive(Debug, thiserror::Error)]
enum DaemonError {
    #[error("{0}")]
    Usage(String),
    #[error("network namespace: {0}")]
    Netns(#[from] xlane_testbed::TestbedError),
    #[error("host tuning: {0}")]
    Tuning(#[from] xlane_host::tuning::TuningError),
    #[error("socket: {0}")]
    Socket(#[from] xlane_host::socket::SocketError),
    #[error("lane thread: {0}")]
    Runtime(#[from] xlane_host::runtime::RuntimeError),
    #[error("bridge: {0}")]
    Bridge(String),
    #[error("lane loop: {0}")]
    Lane(std::io::Error),
}

fn main() -> ExitCode {
    use clap::CommandFactory;
    let args = match xlane_cli::config::expand(std::env::args_os().collect(), &Cli::command()) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("xlaned: error: {e}");
            return ExitCode::from(2);
        }
    };
    let cli = Cli::parse_from(args);
    xlane_cli::logging::init();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xlaned: error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn parse_join(s: &str) -> Result<(Ipv4Addr, Ipv4Addr), DaemonError> {
    let bad = || {
        DaemonError::Usage(format!(
            "--join {s:?}: expected GROUP@INTERFACE-ADDRESS, e.g. 239.77.0.1@198.18.0.2"
        ))
    };
    let (g, i) = s.split_once('@').ok_or_else(bad)?;
    let g: Ipv4Addr = g.parse().map_err(|_| bad())?;
    let i: Ipv4Addr = i.parse().map_err(|_| bad())?;
    if !g.is_multicast() {
        return Err(DaemonError::Usage(format!(
            "--join: {g} is not a multicast group"
        )));
    }
    Ok((g, i))
}

fn run(cli: Cli) -> Result<(), DaemonError> {
    let schema = match cli.schema {
        26 => Schema::Chunk26,
        36 => Schema::Chunk36,
        s => return Err(DaemonError::Usage(format!("--schema {s}: use 26 or 36"))),
    };
    let params = TunnelParams {
        tunnel: cli.tunnel,
        period_ns: cli.period_us.saturating_mul(1000),
        max_packet: cli.max_packet,
        schema,
    };
    params
        .validate()
        .map_err(|e| DaemonError::Usage(format!("tunnel parameters: {e}")))?;
    if !(cli.seconds >= 0.0 && cli.seconds.is_finite()) {
        return Err(DaemonError::Usage("--seconds must be 0 or more".into()));
    }
    if !(0..=99).contains(&cli.fifo) {
        return Err(DaemonError::Usage("--fifo must be 0..=99".into()));
    }
    let _netns = match &cli.netns {
        Some(n) => Some(xlane_testbed::enter_netns(n)?),
        None => None,
    };
    let iface = cli.iface.clone().or_else(|| {
        let addr = match &cli.role {
            Role::Sender {
                bind, multicast_if, ..
            } => multicast_if.unwrap_or(*bind.ip()),
            Role::Receiver { bind, join } => join
                .as_deref()
                .and_then(|j| parse_join(j).ok())
                .map(|(_, i)| i)
                .unwrap_or(*bind.ip()),
        };
        iface_of(addr)
    });
    let ncpu = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let core = cli
        .core
        .unwrap_or_else(|| default_lane_core(std::path::Path::new("/"), iface.as_deref(), ncpu));
    if core >= ncpu {
        return Err(DaemonError::Usage(format!(
            "--core {core}: this machine has {ncpu} CPUs"
        )));
    }
    tracing::info!(
        "lane core {core}, interface {}",
        iface.as_deref().unwrap_or("(unknown)")
    );
    let stop: &'static AtomicBool = install_termination_flag();
    let tuning = if cli.no_tuning {
        None
    } else {
        let mut plan = TuningPlan::all(core);
        if cli.steer {
            let Some(ifname) = iface.as_deref() else {
                return Err(DaemonError::Usage(
                    "--steer needs the lane's interface: give --iface".into(),
                ));
            };
            plan.rps.push(RpsTarget::new(
                cli.netns.as_deref(),
                ifname,
                RpsPolicy::LaneCore,
            ));
        }
        let t = HostTuning::apply(&plan)?;
        for line in t.summary() {
            tracing::info!("host measure: {line}");
        }
        Some(t)
    };
    if let Err(e) = lock_memory() {
        tracing::warn!("{e} (pages may fault in on the lane thread)");
    }
    let until = if cli.seconds > 0.0 {
        realtime_ns() + (cli.seconds * 1e9) as u64
    } else {
        u64::MAX
    };
    let mut server = match &cli.bridge {
        Some(path) => {
            let cfg = BridgeServerConfig {
                to_lane: RingConfig {
                    slot_size: schema.data_capacity(),
                    slots: 1024,
                },
                to_app: RingConfig {
                    slot_size: delivery::HEADER_LEN + schema.data_capacity(),
                    slots: 4096,
                },
                max_clients: 32,
            };
            Some(BridgeServer::bind(path, cfg).map_err(|e| DaemonError::Bridge(e.to_string()))?)
        }
        None => None,
    };
    let metrics = Arc::new(LaneMetrics::new());
    let exporter = match cli.metrics {
        Some(m) => {
            let mm = Arc::clone(&metrics);
            let sender = matches!(cli.role, Role::Sender { .. });
            let e = xlane_metrics::Exporter::serve(m, Arc::new(move || mm.families(sender)))
                .map_err(|e| DaemonError::Usage(format!("--metrics {m}: {e}")))?;
            Some(e)
        }
        None => None,
    };
    let metrics_addr = exporter.as_ref().map(|e| e.local_addr().to_string());
    let (tx_ends, rx_ends) = mpsc::channel::<LaneEnd>();
    let placement = Placement {
        core: Some(core),
        fifo: (cli.fifo > 0).then_some(cli.fifo),
    };
    let mode = cli.mode;
    let xdp = match (&cli.role, cli.rx, cli.tx) {
        (Role::Receiver { .. }, PathMode::Xdp, _) => open_xdp(iface.as_deref(), "rx")?,
        (Role::Sender { .. }, _, PathMode::Xdp) => open_xdp(iface.as_deref(), "tx")?,
        _ => None,
    };
    let result = std::thread::scope(|s| {
        let ctx = LaneCtx {
            params,
            placement,
            mode,
            stop,
            until,
            new_apps: rx_ends,
            metrics: Arc::clone(&metrics),
            metrics_addr,
        };
        let lane = s.spawn(move || match cli.role {
            Role::Sender {
                bind,
                dest,
                multicast_if,
                heartbeat,
            } => run_sender(ctx, bind, dest, multicast_if, heartbeat, xdp),
            Role::Receiver { bind, join } => run_receiver(ctx, bind, join, xdp),
        });
        // The control loop: hand new applications to the lane thread, notice
        // hang-ups; never on the lane core's hot path.
        while !lane.is_finished() {
            if let Some(srv) = server.as_mut() {
                match srv.poll_accept() {
                    Ok(Some(end)) => {
                        tracing::info!("application {} attached", end.id);
                        let _ = tx_ends.send(end);
                    }
                    Ok(None) => {}
                    Err(e) => tracing::warn!("bridge: {e}"),
                }
                for id in srv.poll_hangups() {
                    tracing::info!("application {id} went away");
                }
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        lane.join()
            .unwrap_or_else(|_| Err(DaemonError::Usage("the lane thread panicked".into())))
    });
    if let Some(t) = tuning {
        let rep = t.restore();
        if !rep.is_clean() {
            tracing::warn!("some host measures could not be restored: {rep:?}");
        }
    }
    let stats = result?;
    println!("{stats}");
    Ok(())
}

/// The AF_XDP rings on `iface` for `dir` (`rx` or `tx`), or `None` (the
/// socket path) when this host cannot have them, said in one line.
fn open_xdp(iface: Option<&str>, dir: &str) -> Result<Option<XdpRings>, DaemonError> {
    let Some(iface) = iface else {
        return Err(DaemonError::Usage(format!(
            "--{dir} xdp needs the lane's interface: give --iface, or bind on its address (or name it with --multicast-if or --join)"
        )));
    };
    if let RxPathProbe::Socket(why) = xlane_host::xdp::probe() {
        eprintln!("xlaned: {dir}: XDP unavailable ({why}); using the socket");
        return Ok(None);
    }
    let rx = XdpRings::open(&XdpConfig {
        iface: iface.to_string(),
        dscp: xlane_host::socket::DSCP_EXPRESS,
        mode: None,
    })
    .map_err(|e| DaemonError::Usage(format!("--{dir} xdp on {iface}: {e}")))?;
    tracing::info!(
        "{dir} through AF_XDP on {iface}: XDP {} mode, {} queues",
        rx.mode().name(),
        rx.queues()
    );
    Ok(Some(rx))
}

/// The interface holding an IPv4 address (none for the wildcard).
fn iface_of(addr: Ipv4Addr) -> Option<String> {
    if addr.is_unspecified() {
        return None;
    }
    nix::ifaddrs::getifaddrs().ok()?.find_map(|ifa| {
        let a = ifa.address?;
        let sin = a.as_sockaddr_in()?;
        (sin.ip() == addr).then(|| ifa.interface_name.clone())
    })
}

fn ready(role: &str, sock: &LaneSocket, metrics: &Option<String>) {
    let addr = sock.local_addr().map(|a| a.to_string()).unwrap_or_default();
    println!(
        "{}",
        json!({"event": "ready", "role": role, "addr": addr, "metrics": metrics})
    );
}

/// What both lane roles run with.
struct LaneCtx<'a> {
    params: TunnelParams,
    placement: Placement,
    mode: WaitMode,
    stop: &'a AtomicBool,
    until: u64,
    new_apps: mpsc::Receiver<LaneEnd>,
    metrics: Arc<LaneMetrics>,
    metrics_addr: Option<String>,
}

/// The sender's slot fill: at most one frame's worth of chunks from the
/// applications' R-X bridges per slot (bounded), new applications taken in
/// one per slot.
struct BridgeFill {
    apps: Vec<LaneEnd>,
    new_apps: mpsc::Receiver<LaneEnd>,
    msg: Vec<u8>,
    per_slot: usize,
    refused: u64,
    metrics: Arc<LaneMetrics>,
}

impl SlotFill for BridgeFill {
    fn fill(&mut self, c: &mut PeriodicSender, slot: u64) {
        let m = &self.metrics;
        m.wake_late.observe_ns(realtime_ns().saturating_sub(slot));
        // The counters up to the previous slot's frame.
        let st = c.stats();
        m.frames.store(st.frames, Ordering::Relaxed);
        m.chunks.store(st.chunks, Ordering::Relaxed);
        m.heartbeats.store(st.heartbeats, Ordering::Relaxed);
        m.late_slots.store(st.late_slots, Ordering::Relaxed);
        m.refused.store(self.refused, Ordering::Relaxed);
        if self.apps.len() < self.apps.capacity() {
            if let Ok(end) = self.new_apps.try_recv() {
                self.apps.push(end);
            }
        }
        let mut taken = 0;
        for app in self.apps.iter_mut() {
            while taken < self.per_slot {
                match app.from_app.try_recv(&mut self.msg) {
                    Ok(Some(n)) => {
                        taken += 1;
                        if c.enqueue((app.id & 0xff) as u8, &self.msg[..n]).is_err() {
                            self.refused += 1;
                        }
                    }
                    _ => break,
                }
            }
        }
    }
}

/// The receiver's sink: every delivered chunk, with its delivery header,
/// to every attached application's X-R bridge.
struct BridgeSink {
    apps: Vec<LaneEnd>,
    new_apps: mpsc::Receiver<LaneEnd>,
    out: Vec<u8>,
    /// Copies an application's full X-R ring refused.
    bridge_full: u64,
    /// Chunks longer than a delivery can carry (none from a receiver core
    /// of this schema: a guard, counted apart from full rings).
    undeliverable: u64,
    delivered: u64,
    metrics: Arc<LaneMetrics>,
}

impl FrameSink for BridgeSink {
    fn on_chunk(&mut self, d: Delivery<'_>) {
        if self.apps.len() < self.apps.capacity() {
            if let Ok(end) = self.new_apps.try_recv() {
                self.apps.push(end);
            }
        }
        let header = DeliveryHeader {
            producer: d.producer,
            seq: d.seq,
            send_time: d.send_time,
            rx_time: d.rx_time,
        };
        // `out` holds the header and the schema's largest chunk, the most
        // the receiver delivers; a longer one is counted apart.
        let Ok(n) = header.write(d.data, &mut self.out) else {
            self.undeliverable += 1;
            self.metrics
                .refused
                .store(self.bridge_full + self.undeliverable, Ordering::Relaxed);
            return;
        };
        self.delivered += 1;
        for app in self.apps.iter_mut() {
            if app.to_app.try_send(&self.out[..n]).is_err() {
                self.bridge_full += 1;
            }
        }
        let m = &self.metrics;
        m.chunks.store(self.delivered, Ordering::Relaxed);
        m.refused
            .store(self.bridge_full + self.undeliverable, Ordering::Relaxed);
    }
    fn on_frame(&mut self, s: Sample) {
        let m = &self.metrics;
        m.frames.fetch_add(1, Ordering::Relaxed);
        m.latency.observe_ns(s.latency_ns());
    }
}

type Lane = LaneLoop<BridgeFill, BridgeSink>;

fn run_sender(
    ctx: LaneCtx<'_>,
    bind: SocketAddrV4,
    dest: Vec<SocketAddrV4>,
    multicast_if: Option<Ipv4Addr>,
    heartbeat: bool,
    xdp: Option<XdpRings>,
) -> Result<serde_json::Value, DaemonError> {
    let mut cfg = SocketConfig::express(bind);
    cfg.rx_timestamps = false;
    cfg.multicast_if = multicast_if;
    let sock = LaneSocket::open(&cfg)?;
    let mut lane = Lane::new().map_err(DaemonError::Lane)?;
    // The transmit ring, when every destination has a next hop on it.
    let mut tx = None;
    if let Some(rings) = xdp {
        let src = sock.local_addr()?;
        match rings.frame_addrs(src, &dest, cfg.dscp) {
            Ok(addrs) => {
                let path = lane.add_xdp(rings).map_err(DaemonError::Lane)?;
                tx = Some(XdpSend { path, addrs });
            }
            Err(e) => eprintln!("xlaned: tx: {e}; sending on the socket"),
        }
    }
    ready("sender", &sock, &ctx.metrics_addr);
    place_current_thread(ctx.placement)?;
    let first = first_slot_after(realtime_ns(), ctx.params.period_ns);
    let mut core =
        PeriodicSender::new(ctx.params, first).map_err(|e| DaemonError::Usage(e.to_string()))?;
    core.set_heartbeat(heartbeat);
    let path = tx.as_ref().map(|x| x.path);
    let id = lane.add_sender(SenderSpec {
        sock,
        core,
        dsts: dest,
        until_ns: u64::MAX,
        fill: BridgeFill {
            apps: Vec::with_capacity(32),
            new_apps: ctx.new_apps,
            msg: vec![0u8; ctx.params.schema.data_capacity()],
            per_slot: ctx.params.chunks_per_frame(),
            refused: 0,
            metrics: Arc::clone(&ctx.metrics),
        },
        seal: None,
        xdp: tx,
    });
    lane.run(ctx.stop, ctx.until, ctx.mode)
        .map_err(DaemonError::Lane)?;
    let end = lane.remove_sender(id).expect("added above");
    let ring = path.and_then(|p| lane.xdp(p)).map(|x| x.stats());
    let (report, st) = (end.report, end.spec.core.stats());
    Ok(json!({
        "role": "sender",
        "frames": report.frames,
        "send_errors": report.send_errors,
        "tx": if ring.is_some() { "xdp" } else { "socket" },
        "xdp_sent": ring.map_or(0, |r| r.sent),
        "xdp_send_busy": ring.map_or(0, |r| r.send_busy),
        "xdp_send_refused": ring.map_or(0, |r| r.send_refused),
        "late_max_ns": report.late_max_ns,
        "chunks": st.chunks,
        "heartbeats": st.heartbeats,
        "late_slots": st.late_slots,
        "queue_refused": end.spec.fill.refused,
    }))
}

fn run_receiver(
    ctx: LaneCtx<'_>,
    bind: SocketAddrV4,
    join: Option<String>,
    xdp: Option<XdpRings>,
) -> Result<serde_json::Value, DaemonError> {
    let mut cfg = SocketConfig::express(bind);
    cfg.join = join.as_deref().map(parse_join).transpose()?;
    cfg.rcvbuf = 1 << 20;
    let sock = LaneSocket::open(&cfg)?;
    ready("receiver", &sock, &ctx.metrics_addr);
    place_current_thread(ctx.placement)?;
    let mut lane = Lane::new().map_err(DaemonError::Lane)?;
    let path = match xdp {
        Some(x) => Some(lane.add_xdp(x).map_err(DaemonError::Lane)?),
        None => None,
    };
    let id = lane
        .add_receiver(ReceiverSpec {
            sock,
            core: PeriodicReceiver::new(ctx.params),
            sink: BridgeSink {
                apps: Vec::with_capacity(32),
                new_apps: ctx.new_apps,
                out: vec![0u8; delivery::HEADER_LEN + ctx.params.schema.data_capacity()],
                bridge_full: 0,
                undeliverable: 0,
                delivered: 0,
                metrics: Arc::clone(&ctx.metrics),
            },
            open: None,
            xdp: path,
        })
        .map_err(DaemonError::Lane)?;
    lane.run(ctx.stop, ctx.until, ctx.mode)
        .map_err(DaemonError::Lane)?;
    let end = lane.remove_receiver(id).expect("added above");
    let (report, sink) = (end.report, &end.spec.sink);
    let ring = path.and_then(|p| lane.xdp(p)).map(|x| x.stats());
    let socket_drops = end.spec.sock.drops().unwrap_or(0);
    let st = end.spec.core.stats();
    Ok(json!({
        "role": "receiver",
        "datagrams": report.datagrams,
        "refused": report.refused,
        "truncated": report.truncated,
        "kernel_stamps": report.kernel_stamps,
        "hw_stamps": report.hw_stamps,
        "rx": if ring.is_some() { "xdp" } else { "socket" },
        "xdp_datagrams": report.xdp,
        "xdp_ring_drops": ring.map_or(0, |r| r.ring_drops),
        "frames": st.frames,
        "chunks": st.chunks,
        "delivered": sink.delivered,
        "lost": st.lost,
        "reordered": st.reordered,
        "duplicates": st.duplicates,
        "stale": st.stale,
        "bad_chunks": st.bad_chunks,
        "malformed": st.malformed,
        "oversized": st.oversized,
        "wrong_tunnel": st.wrong_tunnel,
        "wrong_schema": st.wrong_schema,
        "too_fast": st.too_fast,
        "bridge_full": sink.bridge_full,
        "undeliverable": sink.undeliverable,
        "socket_drops": socket_drops,
    }))
}
