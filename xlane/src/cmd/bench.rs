//! `xlane bench`: measurements that compare side by side in one run.

use clap::Subcommand;
use xlane_bench::lane_bench::{self, LaneBenchConfig};
use xlane_host::runtime::WaitMode;

/// Arguments of `xlane bench`.
#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    what: What,
}

#[derive(Subcommand)]
enum What {
    /// The express lane beside a plain UDP socket, one host to all others by
    /// multicast, under saturating cross traffic and CPU load, in one run.
    /// Needs root (it builds the emulated datacenter in network namespaces).
    Lane(LaneArgs),
    /// The comparison of X-Lane §6.2: xlane, xlane0, qjump, busypoll and
    /// plain, interleaved in short rounds, under idle, cross-traffic, CPU
    /// and combined interference; tables, plots, outlier attribution and
    /// the machine's floor. Needs root.
    Jitter(JitterArgs),
    /// The controller's promise checked end to end: the controller daemon
    /// allocates unicast and multicast tunnels on both express sub-lanes
    /// and programs the emulated switch; the tunnels run under saturating
    /// cross traffic and CPU load, beside a rogue sender that ignores its
    /// period; every packet is checked against the range its tunnel was
    /// announced, and packets outside are attributed to host gaps or not.
    /// Needs root.
    Bounds(BoundsArgs),
    /// The failure detector of X-Lane §6.4 (Fig. 7): X-FD on the lane beside
    /// a fixed timeout and phi-accrual on plain UDP, every host heartbeating
    /// to all others every T under cross traffic and CPU load; the smallest
    /// Λ with 100 % accuracy per detector and accuracy against Λ; then real
    /// failures (kill -9 of a runner, a cut link, SIGSTOP of the
    /// application) with their detection times. Needs root.
    Fd(FdArgs),
    /// Replicated key-value writes of X-Lane §6.5 (Fig. 8), asking which
    /// store still commits in microseconds when the datacenter is
    /// saturated: xlane kv over the lane (X-Raft) and over plain UDP, real
    /// etcd and real Redis (one primary, `WAIT` for all replicas after
    /// every write), each member in its own testbed host, per scenario
    /// (idle: nothing else runs; both: every switch port towards a member
    /// saturated by best-effort cross traffic, CPU load on the regular
    /// cores). The systems' clusters run side by side and take turns in
    /// rounds, so that every system meets the machine's slow minutes alike.
    /// The lane's members run on the lane core at nice -10;
    /// the others as users run them (default priority, best effort, off
    /// the lane core). A write is visible when an observer in every
    /// member's host got its member's notification (keyspace
    /// notifications; etcd: a watch). Reports mean, p50, p99, p99.9, max,
    /// writes/s, failed writes and leader changes, with each scenario's
    /// floor and lane-core load. Needs root, `etcd` and `redis-server`.
    ///
    /// With `--workload redis-benchmark`: the real `redis-benchmark`'s
    /// default tests (`-q --csv`, by default `-P 16 -n 100000 -c 50`) against xlane kv
    /// (one node, and three members with clients on the leader) and one
    /// real redis-server (AOF, appendfsync everysec), all on loopback; and
    /// a driver replaying the same tests, with `WAIT 2 0` after every
    /// pipelined batch of a write test, against Redis with 2 replicas, and
    /// without WAIT against the three xlane kv members and the lone Redis.
    /// Reports per test the median requests/s over --rounds (every pair
    /// runs a test before the next test starts, order alternating),
    /// errors (a test with errors is not a
    /// result), the ratios xlane-1/redis and xlane-3/redis-wait, the
    /// client's CPU share and the floor. Uses --rounds, --requests,
    /// --connections, --pipeline, --systems, --work-dir, --xlane, --timeout,
    /// --plots, --no-plots and --json; the other options belong to the default workload. Needs
    /// `redis-server` and `redis-benchmark`; the floor needs root.
    Kv(KvArgs),
    /// QJump's application experiment with today's programs: real etcd (3
    /// members, peer traffic on the level), real Redis with 2 replicas
    /// (SET + WAIT, replication on the level) and sockperf ping-pong, each
    /// in testbed hosts under saturating cross traffic and CPU load, run
    /// as users run them and under `xlane run --level 2` (sockperf also
    /// interference-free). Reports p50/p99/max, errors, etcd's leader
    /// changes, the ratios, the floor; plots them. Needs root, etcd,
    /// redis-server, sockperf, iptables, and libxlane_preload.so beside
    /// the xlane binary.
    Apps(super::bench_apps::AppsArgs),
    /// R2P2 on the regular lane (Lancet's R2P2 experiment scaled to this
    /// machine): synthetic R2P2 servers (4 × 2 workers, bimodal service)
    /// behind the router under each policy (random, round-robin, jsq,
    /// jbsq:1, jbsq:2) and without a router (the client picks a worker at random),
    /// Poisson load from 0.1 to 0.9 of capacity measured by Lancet's R2P2
    /// agent; p50/p99/p99.9 and drops per point, the floor, the targets
    /// (jbsq:1 p99 ≤ ½ random at 0.8; jsq/jbsq below random above 0.5),
    /// and a plot of p99 against load. About 5 minutes with the defaults.
    /// Needs root (the router forwards on a raw socket).
    Rpc(super::bench_rpc::RpcArgs),
    /// SLO-aware admission control (SVEN's Figs. 3 and 4 scaled to this
    /// machine): one synthetic R2P2 server (4 workers, fixed, exp and
    /// bimodal service of mean 500 µs) behind the router's `random`
    /// policy, SLO p99 = 30 × the mean. First p99 against throughput
    /// without control (the SLO-violating throughput), then a load stepped
    /// from 0.6 to 1.15 of capacity with no control, SVEN's AIAD loop and
    /// the router's default: offered, achieved and goodput rates, drop rate
    /// and p99 every second, the floor per second, the targets, and plots.
    /// About 8 minutes with the defaults. Needs root (raw socket).
    Sven(super::bench_sven::SvenArgs),
    /// 1Pipe's totally ordered scattering (its Figs. 9a, 10, 12, 13
    /// scaled to this machine): `xlane pipe switchd` in the switch
    /// namespace, 2–16 processes in the hosts. Latency of best-effort and
    /// reliable scatterings against the same messages unordered, idle and
    /// beside saturating background flows (1Pipe on the regular class and
    /// on the express class); beacon CPU and bandwidth against the
    /// interval; detection and recovery of a killed process and a cut
    /// link; ordering and atomicity violations counted at every receiver
    /// over at least 10⁶ messages with kills and a cut. Plots, targets,
    /// --json. About 3 minutes with the defaults. Needs root.
    Pipe(super::bench_pipe::PipeArgs),
    /// The controller at datacenter scale, simulated (no testbed): a
    /// generated fat-tree or leaf-spine, requests as a deployment sends
    /// them (X-FD trees, replication, QJump-level tunnels) with churn;
    /// request time at 10³, 10⁴, 10⁵ tunnels, time to fill, journal
    /// replay time, memory, refusals by reason, and every announced range
    /// checked against a recomputation from scratch. A plot of request
    /// time against tunnels. Minutes for fat-tree:32 and 10⁵ tunnels.
    Te(super::bench_te::TeArgs),
}

#[derive(clap::Args)]
struct BoundsArgs {
    /// Print the report as JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// Run at least this long, in seconds (lengthened to reach --packets).
    #[arg(long, default_value_t = 30.0)]
    seconds: f64,
    /// Received packets to reach at least, all tunnels together.
    #[arg(long, default_value_t = 1_000_000)]
    packets: u64,
    /// Period every tunnel requests, in microseconds.
    #[arg(long, default_value_t = 500)]
    period_us: u64,
    /// Link rate of every emulated port.
    #[arg(long, default_value = "100mbit")]
    rate: String,
    /// Punctual tunnels to place (unicast and multicast on both express
    /// sub-lanes), besides the rogue.
    #[arg(long, default_value_t = 8)]
    tunnels: usize,
    /// The rogue sends this many packets per granted period.
    #[arg(long, default_value_t = 10)]
    rogue_factor: u32,
    /// Leave the rogue tunnel out.
    #[arg(long)]
    no_rogue: bool,
    /// Run without cross traffic.
    #[arg(long)]
    no_cross_traffic: bool,
    /// Run without CPU load on the regular cores.
    #[arg(long)]
    no_cpu_load: bool,
    /// Idle probes per path when measuring the links for the topology.
    #[arg(long, default_value_t = 2000)]
    probes: usize,
    /// The lane core (default: the last CPU).
    #[arg(long)]
    lane_core: Option<usize>,
    /// Also write every packet (packets.csv: tunnel, receiver, stamps,
    /// latency, the range that held, host-gap time in flight) and every
    /// host gap (gaps.csv) into this directory.
    #[arg(long, value_name = "DIR")]
    csv: Option<std::path::PathBuf>,
}

#[derive(clap::Args)]
struct JitterArgs {
    /// Print one JSON object per scenario (JSON Lines) instead of tables.
    #[arg(long)]
    json: bool,
    /// Scenarios, comma-separated: idle, cross, cpu, both.
    #[arg(long, default_value = "idle,cross,cpu,both", value_delimiter = ',')]
    scenario: Vec<String>,
    /// Configurations, comma-separated: xlane, xlane-xdp (the lane on its
    /// own AF_XDP rings: receiving through rings fed by XDP steering,
    /// sending through a transmit ring), xlane-xdp-rx (the rings for
    /// receiving only), xlane0, qjump, busypoll, plain.
    #[arg(
        long,
        default_value = "xlane,xlane0,qjump,busypoll,plain",
        value_delimiter = ','
    )]
    configs: Vec<String>,
    /// Seconds each configuration runs per scenario (split into rounds).
    #[arg(long, default_value_t = 10.0)]
    seconds: f64,
    /// Seconds per round; configurations take turns round by round.
    #[arg(long, default_value_t = 2.0)]
    round: f64,
    /// Period π in microseconds.
    #[arg(long, default_value_t = 200)]
    period_us: u64,
    /// Link rate of every emulated port (e.g. 100mbit, 1gbit).
    #[arg(long, default_value = "100mbit")]
    rate: String,
    /// Emulated hosts: host 0 sends, all others receive.
    #[arg(long, default_value_t = 4)]
    hosts: usize,
    /// Write PNG and SVG plots into this directory.
    #[arg(long, default_value = "out/jitter")]
    plots: std::path::PathBuf,
    /// Write no plots.
    #[arg(long)]
    no_plots: bool,
    /// Confidence of the percentile intervals.
    #[arg(long, default_value_t = 0.95)]
    confidence: f64,
    /// The lane core (default: the last CPU).
    #[arg(long)]
    lane_core: Option<usize>,
    /// How the xlane configuration's threads wait: interrupt or busy-poll.
    #[arg(long, default_value = "interrupt")]
    mode: WaitMode,
}

#[derive(clap::Args)]
struct LaneArgs {
    /// Print the report as JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// How long the flows run, in seconds.
    #[arg(long, default_value_t = 10.0)]
    seconds: f64,
    /// Lane period π in microseconds (one packet per period per flow).
    #[arg(long, default_value_t = 200)]
    period_us: u64,
    /// Link rate of every emulated port (e.g. 1gbit, 200mbit). The default
    /// is one that the cross-traffic generators can saturate on a 2-core
    /// machine; with more cores, raise it.
    #[arg(long, default_value = "100mbit")]
    rate: String,
    /// Best-effort queue length of every switch port, in packets.
    #[arg(long, default_value_t = 1000)]
    best_effort_queue: u32,
    /// Emulated hosts: host 0 sends, all others receive.
    #[arg(long, default_value_t = 4)]
    hosts: usize,
    /// Bytes of payload per message.
    #[arg(long, default_value_t = 16)]
    message_len: usize,
    /// Run without cross traffic.
    #[arg(long)]
    no_cross_traffic: bool,
    /// Run without CPU load on the regular cores.
    #[arg(long)]
    no_cpu_load: bool,
    /// The lane core (default: the last CPU).
    #[arg(long)]
    lane_core: Option<usize>,
    /// How lane threads wait: interrupt (sleep until period or packet; lane
    /// threads of all emulated hosts share the lane core) or busy-poll.
    #[arg(long, default_value = "interrupt")]
    mode: WaitMode,
    /// Do not apply the host measures (RT throttling, C-states, IRQ affinity).
    #[arg(long)]
    no_tuning: bool,
    /// No authenticated lane flow (`xlane-mac`, every frame sealed with a
    /// MAC and checked at every receiver: the cost of authentication in the
    /// same run).
    #[arg(long)]
    no_mac: bool,
    /// How the lane flows' receivers read: socket, or xdp (AF_XDP rings
    /// fed by an XDP program on each receiving host's interface).
    #[arg(long, default_value = "socket")]
    rx: xlane_host::xdp::PathMode,
    /// How the lane flows' senders send: socket, or xdp (whole frames
    /// written into the sending host's AF_XDP transmit ring; needs `--rx
    /// xdp`).
    #[arg(long, default_value = "socket")]
    tx: xlane_host::xdp::PathMode,
}

/// Run `xlane bench`.
pub fn run(args: Args) -> super::CmdResult {
    match args.what {
        What::Lane(a) => lane(a),
        What::Jitter(a) => jitter(a),
        What::Bounds(a) => bounds(a),
        What::Fd(a) => fd(a),
        What::Kv(a) => kv(a),
        What::Apps(a) => super::bench_apps::apps(a),
        What::Rpc(a) => super::bench_rpc::rpc(a),
        What::Sven(a) => super::bench_sven::sven(a),
        What::Pipe(a) => super::bench_pipe::pipe(a),
        What::Te(a) => super::bench_te::te(a),
    }
}

fn bounds(a: BoundsArgs) -> super::CmdResult {
    use xlane_bench::bounds::{self, BoundsConfig};
    if !(a.seconds > 0.0 && a.seconds <= 3600.0) {
        return Err("--seconds must be in (0, 3600]".into());
    }
    if a.period_us < 50 {
        return Err("--period-us must be at least 50".into());
    }
    if !(1..=64).contains(&a.tunnels) {
        return Err("--tunnels must be in 1..=64".into());
    }
    let mut cfg = BoundsConfig {
        link_rate_bps: xlane_testbed::parse_rate(&a.rate)?,
        period_ns: a.period_us.saturating_mul(1000),
        duration_ns: (a.seconds * 1e9) as u64,
        min_packets: a.packets,
        tunnels: a.tunnels,
        rogue: !a.no_rogue,
        rogue_factor: a.rogue_factor,
        cross_traffic: !a.no_cross_traffic,
        cpu_load: !a.no_cpu_load,
        probes: a.probes.max(1),
        raw_dir: a.csv,
        ..BoundsConfig::default()
    };
    if let Some(c) = a.lane_core {
        cfg.lane_core = c;
    }
    let report = bounds::run(&cfg, &mut |line| eprintln!("[xlane] {line}"))?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", report.render());
    }
    Ok(())
}

fn jitter(a: JitterArgs) -> super::CmdResult {
    use xlane_bench::flows::Variant;
    use xlane_bench::jitter::{self, JitterConfig, Scenario};
    let secs = |x: f64, what: &str| -> Result<u64, String> {
        if x > 0.0 && x <= 3600.0 {
            Ok((x * 1e9) as u64)
        } else {
            Err(format!("{what} must be in (0, 3600] seconds"))
        }
    };
    let scenarios = a
        .scenario
        .iter()
        .map(|s| {
            Scenario::from_name(s)
                .ok_or_else(|| format!("unknown scenario {s:?} (idle, cross, cpu, both)"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let variants = a
        .configs
        .iter()
        .map(|s| {
            Variant::from_name(s).ok_or_else(|| {
                format!(
                    "unknown configuration {s:?} (xlane, xlane-xdp, xlane-xdp-rx, xlane0, qjump, busypoll, plain)"
                )
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    if !(a.confidence > 0.5 && a.confidence < 1.0) {
        return Err("--confidence must be in (0.5, 1)".into());
    }
    let mut cfg = JitterConfig {
        hosts: a.hosts,
        link_rate_bps: xlane_testbed::parse_rate(&a.rate)?,
        period_ns: a.period_us.saturating_mul(1000),
        per_config_ns: secs(a.seconds, "--seconds")?,
        round_ns: secs(a.round, "--round")?,
        scenarios,
        variants,
        mode: a.mode,
        confidence: a.confidence,
        plot_dir: (!a.no_plots).then_some(a.plots),
        ..JitterConfig::default()
    };
    if let Some(c) = a.lane_core {
        cfg.lane_core = c;
    }
    let json = a.json;
    jitter::run(
        &cfg,
        &mut |line| eprintln!("[xlane] {line}"),
        &mut |report| {
            if json {
                match serde_json::to_string(report) {
                    Ok(s) => println!("{s}"),
                    Err(e) => eprintln!("xlane: cannot encode the report: {e}"),
                }
            } else {
                println!("{}", report.render());
            }
        },
    )?;
    Ok(())
}

fn lane(a: LaneArgs) -> super::CmdResult {
    if !(a.seconds > 0.0 && a.seconds <= 3600.0) {
        return Err("--seconds must be in (0, 3600]".into());
    }
    if a.message_len == 0 || a.message_len > 20 {
        return Err("--message-len must be 1..=20 bytes (one 26-byte chunk)".into());
    }
    let mut cfg = LaneBenchConfig {
        hosts: a.hosts,
        link_rate_bps: xlane_testbed::parse_rate(&a.rate)?,
        best_effort_queue_pkts: a.best_effort_queue,
        period_ns: a.period_us.saturating_mul(1000),
        duration_ns: (a.seconds * 1e9) as u64,
        message_len: a.message_len,
        cross_traffic: !a.no_cross_traffic,
        cpu_load: !a.no_cpu_load,
        mode: a.mode,
        tuning: !a.no_tuning,
        mac: !a.no_mac,
        rx: a.rx,
        tx: a.tx,
        ..LaneBenchConfig::default()
    };
    if let Some(c) = a.lane_core {
        cfg.lane_core = c;
    }
    let json = a.json;
    let report = lane_bench::run(&cfg, &mut |line| eprintln!("[xlane] {line}"))?;
    if json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", report.render());
    }
    Ok(())
}

#[derive(clap::Args)]
struct FdArgs {
    /// Print the report as JSON instead of tables.
    #[arg(long)]
    json: bool,
    /// Write the accuracy plot (PNG and SVG) into this directory.
    #[arg(long)]
    plots: Option<std::path::PathBuf>,
    /// Heartbeat receptions each detector needs at least (the run is as
    /// long as that takes).
    #[arg(long, default_value_t = 1_000_000)]
    heartbeats: u64,
    /// Heartbeat period T.
    #[arg(long, default_value = "1ms", value_parser = fd_duration)]
    period: u64,
    /// Emulated hosts; each heartbeats to all others.
    #[arg(long, default_value_t = 4)]
    hosts: usize,
    /// Link rate of every emulated port.
    #[arg(long, default_value = "100mbit")]
    rate: String,
    /// Run without cross traffic.
    #[arg(long)]
    no_cross_traffic: bool,
    /// Run without CPU load on the regular cores.
    #[arg(long)]
    no_cpu_load: bool,
    /// Inject real failures after the accuracy run (the default).
    #[arg(long, overrides_with = "no_failures")]
    failures: bool,
    /// Skip the real failures.
    #[arg(long, overrides_with = "failures")]
    no_failures: bool,
    /// Only the real failures (no accuracy run).
    #[arg(long, conflicts_with = "no_failures")]
    failures_only: bool,
    /// Injections per failure kind.
    #[arg(long, default_value_t = 5)]
    repetitions: usize,
    /// Λ of the X-FD runners in the failure part (default: twice the larger
    /// of X-FD's smallest perfect Λ and the longest host gap of the accuracy
    /// run, at least 1 ms; 10 ms with --failures-only).
    #[arg(long, value_parser = fd_duration)]
    lambda: Option<u64>,
    /// Stall threshold of the runners in periods (default: max(10, Λ/T + 2)).
    #[arg(long)]
    stall: Option<u32>,
    /// Let the X-FD runners lock their memory (they do so after switching
    /// to SCHED_FIFO on the lane core, which stalls the other runners there).
    #[arg(long)]
    runner_mlock: bool,
    /// The xlane binary the runners are started from (default: this one).
    #[arg(long)]
    xlane: Option<std::path::PathBuf>,
    /// The lane core (default: the last CPU).
    #[arg(long)]
    lane_core: Option<usize>,
    /// Do not apply the host measures.
    #[arg(long)]
    no_tuning: bool,
    /// How the accuracy run's lane loop waits: interrupt, busy-poll (it
    /// polls the lane core), or both (rounds take turns: X-FD sleeping and
    /// X-FD polling compared in one run). The failure part's runners share
    /// the lane core and always sleep when idle.
    #[arg(long, default_value = "interrupt")]
    mode: xlane_bench::fd_bench::LaneModes,
}

fn fd_duration(s: &str) -> Result<u64, String> {
    xlane_lancet::dist::parse_duration_ns(s).map_err(|e| e.to_string())
}

fn fd(a: FdArgs) -> super::CmdResult {
    use xlane_bench::fd_bench::{self, FailureKind, FailurePlan, FdBenchConfig};
    if a.heartbeats == 0 || a.heartbeats > 100_000_000 {
        return Err("--heartbeats must be 1..=100000000".into());
    }
    if a.repetitions == 0 || a.repetitions > 1000 {
        return Err("--repetitions must be 1..=1000".into());
    }
    let failures = if a.no_failures {
        None
    } else {
        let bin = match a.xlane {
            Some(p) => p,
            None => std::env::current_exe()?,
        };
        Some(FailurePlan {
            xlane_bin: bin,
            repetitions: a.repetitions,
            lambda_ns: a.lambda,
            stall_periods: a.stall,
            kinds: FailureKind::ALL.to_vec(),
            lock_runner_memory: a.runner_mlock,
        })
    };
    let mut cfg = FdBenchConfig {
        hosts: a.hosts,
        link_rate_bps: xlane_testbed::parse_rate(&a.rate)?,
        period_ns: a.period,
        heartbeats: a.heartbeats,
        cross_traffic: !a.no_cross_traffic,
        cpu_load: !a.no_cpu_load,
        tuning: !a.no_tuning,
        lane_mode: a.mode,
        accuracy: !a.failures_only,
        failures,
        plot_dir: a.plots,
        ..FdBenchConfig::default()
    };
    if let Some(c) = a.lane_core {
        cfg.lane_core = c;
    }
    let report = fd_bench::run(&cfg, &mut |line| eprintln!("[xlane] {line}"))?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", report.render());
    }
    Ok(())
}

#[derive(clap::Args)]
struct KvArgs {
    /// Print the report as JSON instead of tables.
    #[arg(long)]
    json: bool,
    /// What to measure: fig8 (replicated writes in the testbed, X-Lane
    /// Fig. 8) or redis-benchmark (redis-benchmark's default tests on
    /// loopback against xlane kv and Redis).
    #[arg(long, default_value = "fig8", value_parser = ["fig8", "redis-benchmark"])]
    workload: String,
    /// Requests per test (--workload redis-benchmark; redis-benchmark -n).
    #[arg(long, default_value_t = 100_000)]
    requests: u64,
    /// Connections (--workload redis-benchmark; redis-benchmark -c).
    #[arg(long, default_value_t = 50)]
    connections: usize,
    /// Requests pipelined per connection (--workload redis-benchmark;
    /// redis-benchmark -P).
    #[arg(long, default_value_t = 16)]
    pipeline: usize,
    /// Scenarios, comma-separated: idle, both (also cross, cpu: one of the
    /// two interferences alone).
    #[arg(long, default_value = "idle,both", value_delimiter = ',')]
    scenario: Vec<String>,
    /// Replica counts, comma-separated, each 2..=16 (one testbed host per
    /// member).
    #[arg(long, default_value = "3,5", value_delimiter = ',')]
    replicas: Vec<usize>,
    /// Systems, comma-separated. fig8: xlane (Raft over UDP), xlane-lane
    /// (X-Raft over the lane), etcd, redis (default: all four).
    /// redis-benchmark: redis, redis-wait, xlane-1, xlane-3 (default: all
    /// four; `redis,xlane-1` measures the single node against Redis alone,
    /// each ratio's two figures one after the other).
    #[arg(long, value_delimiter = ',')]
    systems: Option<Vec<String>>,
    /// Sequential writes of the latency phase (per system and replica
    /// count, over all rounds).
    #[arg(long, default_value_t = 2000)]
    writes: usize,
    /// Longest latency phase in seconds: a system that takes longer for
    /// --writes stops there with fewer samples (the report says how many).
    #[arg(long, default_value_t = 60.0)]
    latency_seconds: f64,
    /// Seconds of the throughput phase (per system and replica count, over
    /// all rounds).
    #[arg(long, default_value_t = 5.0)]
    seconds: f64,
    /// Concurrent clients of the throughput phase.
    #[arg(long, default_value_t = 8)]
    clients: usize,
    /// Rounds each phase is split into. All systems' clusters of a replica
    /// count run side by side, and the systems take turns round by round
    /// (alternating the order), so that a slow minute of the machine falls
    /// on every system's share of it rather than on one system's run.
    #[arg(long, default_value_t = 4)]
    rounds: usize,
    /// Seed of value sizes and contents.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Mean value size in bytes (normal, truncated to [1 B, 10 MB]).
    #[arg(long, default_value_t = 25.6)]
    mean_size: f64,
    /// Standard deviation of the value size in bytes.
    #[arg(long, default_value_t = 10.0)]
    sd_size: f64,
    /// Write the Fig. 8 plots, one per scenario (PNG and SVG), into this directory
    /// (--workload redis-benchmark: the ratios per test, kv-redis-benchmark.png
    /// and .svg).
    #[arg(long, default_value = "out/kv")]
    plots: std::path::PathBuf,
    /// Write no plots.
    #[arg(long)]
    no_plots: bool,
    /// Directory for the clusters' data (a RAM disk keeps fsync cheap).
    #[arg(long, default_value = "/dev/shm")]
    work_dir: std::path::PathBuf,
    /// The xlane binary whose `kv serve` is measured (default: this one).
    #[arg(long)]
    xlane: Option<std::path::PathBuf>,
    /// Seconds a write may take to become visible on every member before
    /// it counts as failed (also bounds a cluster's start, at least 20 s).
    /// With --workload redis-benchmark: how long a system may take to
    /// start, and a test may go without any reply (at least 20 s).
    #[arg(long, default_value_t = 10.0)]
    timeout: f64,
    /// The lane core (default: the last CPU).
    #[arg(long)]
    lane_core: Option<usize>,
    /// Link rate of every switch port (the hosts' NICs send at twice it, so
    /// that cross traffic oversubscribes every port). The default is one
    /// this machine's cross-traffic generators can saturate beside the CPU
    /// load; see docs/results/kv.md.
    #[arg(long, default_value = "40mbit")]
    rate: String,
    /// Best-effort queue length of every switch port, in packets (the
    /// default holds 120 ms at 40 Mbit/s, as `bench jitter`'s 1000 at
    /// 100 Mbit/s).
    #[arg(long, default_value_t = 400)]
    best_effort_queue: u32,
}

fn kv(a: KvArgs) -> super::CmdResult {
    use xlane_bench::kv_bench::{self, KvBenchConfig, Scenario, System};
    if a.workload == "redis-benchmark" {
        return kv_redis_benchmark(a);
    }
    if !(a.seconds > 0.0 && a.seconds <= 3600.0) {
        return Err("--seconds must be in (0, 3600]".into());
    }
    if a.writes == 0 || a.writes > 10_000_000 {
        return Err("--writes must be 1..=10000000".into());
    }
    if !(a.latency_seconds > 0.0 && a.latency_seconds <= 36_000.0) {
        return Err("--latency-seconds must be in (0, 36000]".into());
    }
    if a.clients == 0 || a.clients > 1024 {
        return Err("--clients must be 1..=1024".into());
    }
    if a.rounds == 0 || a.rounds > 1000 || a.rounds > a.writes {
        return Err("--rounds must be 1..=1000 and at most --writes".into());
    }
    let systems = a
        .systems
        .unwrap_or_else(|| {
            ["xlane", "xlane-lane", "etcd", "redis"]
                .map(String::from)
                .to_vec()
        })
        .iter()
        .map(|s| {
            System::from_name(s)
                .ok_or_else(|| format!("unknown system {s:?} (xlane, xlane-lane, etcd, redis)"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    if !(a.timeout > 0.0 && a.timeout <= 600.0) {
        return Err("--timeout must be in (0, 600] seconds".into());
    }
    if let Some(&n) = a.replicas.iter().find(|&&n| !(2..=16).contains(&n)) {
        return Err(format!("--replicas {n}: each count must be 2..=16").into());
    }
    let scenarios = a
        .scenario
        .iter()
        .map(|s| {
            Scenario::from_name(s)
                .ok_or_else(|| format!("unknown scenario {s:?} (idle, both, cross, cpu)"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let xlane_bin = match a.xlane {
        Some(p) => Some(p),
        None => std::env::current_exe().ok(),
    };
    let mut cfg = KvBenchConfig {
        scenarios,
        systems,
        replicas: a.replicas,
        writes: a.writes,
        latency_cap: std::time::Duration::from_secs_f64(a.latency_seconds),
        throughput_duration: std::time::Duration::from_secs_f64(a.seconds),
        clients: a.clients,
        rounds: a.rounds,
        seed: a.seed,
        mean_size: a.mean_size,
        sd_size: a.sd_size,
        xlane_bin,
        work_dir: a.work_dir,
        plot_dir: (!a.no_plots).then_some(a.plots),
        timeout: std::time::Duration::from_secs_f64(a.timeout),
        ..KvBenchConfig::default()
    };
    if let Some(c) = a.lane_core {
        cfg.lane_core = c;
    }
    cfg.link_rate_bps = xlane_testbed::parse_rate(&a.rate)?;
    if a.best_effort_queue == 0 {
        return Err("--best-effort-queue must be at least 1 packet".into());
    }
    cfg.best_effort_queue_pkts = a.best_effort_queue;
    let report = kv_bench::run(&cfg, &mut |line| eprintln!("[xlane] {line}"))?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", report.render());
    }
    Ok(())
}

/// `xlane bench kv --workload redis-benchmark`.
fn kv_redis_benchmark(a: KvArgs) -> super::CmdResult {
    use xlane_bench::kv_bench::redis_benchmark::{self, RbConfig, RbSystem};
    if a.requests == 0 || a.requests > 100_000_000 {
        return Err("--requests must be 1..=100000000".into());
    }
    if a.connections == 0 || a.connections > 10_000 {
        return Err("--connections must be 1..=10000".into());
    }
    if a.pipeline == 0 || a.pipeline > 10_000 {
        return Err("--pipeline must be 1..=10000".into());
    }
    if a.rounds == 0 || a.rounds > 1000 {
        return Err("--rounds must be 1..=1000".into());
    }
    if !(a.timeout > 0.0 && a.timeout <= 600.0) {
        return Err("--timeout must be in (0, 600] seconds".into());
    }
    let systems = match &a.systems {
        None => RbSystem::ALL.to_vec(),
        Some(names) => names
            .iter()
            .map(|s| {
                RbSystem::from_name(s).ok_or_else(|| {
                    format!("unknown system {s:?} (redis, redis-wait, xlane-1, xlane-3)")
                })
            })
            .collect::<Result<Vec<_>, _>>()?,
    };
    if systems.is_empty() {
        return Err("--systems: name at least one system".into());
    }
    let cfg = RbConfig {
        requests: a.requests,
        systems,
        connections: a.connections,
        pipeline: a.pipeline,
        rounds: a.rounds,
        xlane_bin: a.xlane.or_else(|| std::env::current_exe().ok()),
        work_dir: a.work_dir,
        // Starting a cluster may take longer than a stalled test.
        timeout: std::time::Duration::from_secs_f64(a.timeout.max(20.0)),
        plot_dir: (!a.no_plots).then_some(a.plots),
    };
    let report = redis_benchmark::run(&cfg, &mut |line| eprintln!("[xlane] {line}"))?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", report.render());
    }
    Ok(())
}
