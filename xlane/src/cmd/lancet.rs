//! `xlane lancet`: open-loop latency measurement against any UDP or TCP
//! server, with Lancet's self-checks; `serve` runs the synthetic (or echo)
//! server; `mmc-check` compares measured sojourn times with M/M/c theory;
//! `cross-check` compares lancet's round trips with `sockperf ping-pong`'s.

use clap::Subcommand;
use std::net::SocketAddrV4;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};
use xlane_lancet::cross_check::{CrossCheckConfig, Placement};
use xlane_lancet::mmc::{run_mmc, MmcConfig};
use xlane_lancet::{
    parse_duration_ns, AgentKind, App, Arrival, ClientConfig, ServeConfig, ServeMode, Server,
    ServiceDist, Transport,
};

/// Arguments of `xlane lancet`.
///
/// Without a subcommand: measure. Requests are sent open-loop at scheduled
/// times (Poisson or fixed spacing); each latency counts from the scheduled
/// send time, with kernel transmit/receive stamps where the socket gives
/// them (UDP) and user-space stamps otherwise. The run lasts --duration,
/// and longer (up to --max-duration) while a percentile's confidence
/// interval is wider than --ci-width. Every self-check (achieved rate,
/// Poisson send times, independence, stationarity, CI width, answered
/// requests) must pass, otherwise the report gives verdicts instead of
/// numbers and the command exits with an error.
#[derive(clap::Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct Args {
    #[command(subcommand)]
    sub: Option<Sub>,
    #[command(flatten)]
    client: ClientArgs,
}

#[derive(Subcommand)]
enum Sub {
    /// Run the synthetic server (c workers behind one FIFO queue, busy-spinning
    /// for each request's service time) or an echo server, until SIGINT or
    /// SIGTERM (or --seconds).
    Serve(ServeArgs),
    /// Measure the synthetic server (exponential service) at several loads on
    /// 127.0.0.1 and compare p50/p99 sojourn times with M/M/c theory.
    MmcCheck(MmcArgs),
    /// Compare lancet's round trips with `sockperf ping-pong`'s on one real
    /// `sockperf server` (127.0.0.1), with the machine's floor.
    ///
    /// Both tools measure the same server in alternating rounds (sockperf
    /// first); each tool's round trips are pooled over its rounds and the
    /// percentiles are taken over the pools. lancet's figure is its
    /// user-space round trip (the two points sockperf times); its
    /// kernel-stamped latency is printed beside.
    ///
    /// Prints each round, the floor of both CPUs measured between the
    /// rounds (the time the machine took away), both tools' pooled
    /// percentiles, their ratio, and a verdict line; exits with an error
    /// when a ratio is outside --tolerance or lancet lost requests. This is
    /// a measurement of the machine as it is now, not a test: on a busy
    /// machine the tools can disagree for reasons neither is responsible
    /// for, and the floor lines say how busy it was.
    ///
    /// Needs the Debian package `sockperf` (3.x: apt-get install sockperf),
    /// `taskset` and `chrt` (util-linux), two CPUs for the placement
    /// (clients on --client-cpu, server on --server-cpu), and root
    /// (CAP_SYS_NICE) for the server's SCHED_FIFO priority
    /// (--server-priority 0 runs it at normal priority). Takes about
    /// 2·rounds·round-seconds + rounds·floor-ms: 40 s with the defaults.
    CrossCheck(CrossCheckArgs),
}

#[derive(clap::Args)]
struct ClientArgs {
    /// The server, IPv4:port. Repeat it (UDP, R2P2) to spread the requests
    /// over several servers, one picked at random per request.
    #[arg(long, required = true)]
    target: Vec<SocketAddrV4>,
    /// Transport: udp, tcp, or r2p2 (R2P2 over UDP: the target is an
    /// `xlane rpc router` or R2P2 servers; replies and DROPs come from the
    /// servers, REQ1…REQn of a long request go to the server that sent the
    /// REQRDY).
    #[arg(long, default_value = "udp")]
    proto: Transport,
    /// Request/response protocol: echo (the server sends the request back; the
    /// id is in its first 8 bytes), synthetic (`xlane lancet serve`), or
    /// sockperf (answered by `sockperf server`).
    #[arg(long, default_value = "echo")]
    app: App,
    /// Total request rate, requests per second.
    #[arg(long, default_value_t = 1000.0)]
    rate: f64,
    /// Inter-arrival distribution: poisson or fixed.
    #[arg(long, default_value = "poisson")]
    dist: Arrival,
    /// Before measuring, set this NIC to stamp every packet in hardware
    /// (SIOCSHWTSTAMP, needs CAP_NET_ADMIN; the setting stays after the
    /// run). Refused by NICs that cannot (veth, virtio, loopback): then
    /// nothing is measured. Without it, hardware stamps are used only if
    /// the NIC was already set up.
    #[arg(long, value_name = "IFACE")]
    hw_stamps: Option<String>,
    /// UDP sockets or TCP connections of the loading agents (at least --threads).
    #[arg(long, default_value_t = 1)]
    conns: usize,
    /// Loading agent threads (the rate is split evenly).
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// latency: one agent stamps every request of --latency-rate (default all
    /// of --rate) and throughput agents carry the rest; throughput: load
    /// only, no latencies; symmetric: every agent loads and stamps.
    #[arg(long, default_value = "symmetric")]
    agent: AgentKind,
    /// With --agent latency: the latency agent's own rate (requests/s).
    #[arg(long)]
    latency_rate: Option<f64>,
    /// Request size in bytes (echo ≥ 8, sockperf ≥ 14, synthetic ≥ 32).
    #[arg(long, default_value_t = 64)]
    size: usize,
    /// Minimum run length, seconds.
    #[arg(long, default_value_t = 10.0)]
    duration: f64,
    /// Maximum run length, seconds, while confidence intervals are too wide.
    #[arg(long, default_value_t = 60.0)]
    max_duration: f64,
    /// Seconds of samples discarded at the start (default: 10 % of
    /// --duration, at most 1 s).
    #[arg(long)]
    warmup: Option<f64>,
    /// Percentiles to report, comma-separated, each in (0, 100).
    #[arg(long, default_value = "50,99,99.9", value_delimiter = ',')]
    percentiles: Vec<f64>,
    /// Largest relative half-width of each percentile's confidence interval
    /// (0.05 = ±5 %).
    #[arg(long, default_value_t = 0.05)]
    ci_width: f64,
    /// Confidence level of the intervals.
    #[arg(long, default_value_t = 0.95)]
    confidence: f64,
    /// Seed of the send schedules.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// After the last send, wait this long for outstanding responses, ms.
    #[arg(long, default_value_t = 500)]
    drain_ms: u64,
    /// Busy-poll this long before each send instead of sleeping, µs (less
    /// lag behind the schedule, more CPU).
    #[arg(long, default_value_t = 50)]
    spin_us: u64,
    /// Run the agent threads under SCHED_FIFO at this priority (1..=98,
    /// needs root) so that other load does not delay their sends.
    #[arg(long)]
    rt_priority: Option<i32>,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
    /// Run inside this network namespace (/run/netns/NAME).
    #[arg(long)]
    netns: Option<String>,
}

#[derive(clap::Args)]
struct ServeArgs {
    /// Address to listen on, IPv4:port.
    #[arg(long)]
    bind: SocketAddrV4,
    /// Transport: udp, tcp, or r2p2 (each worker then has its own UDP port,
    /// --bind's and the next ones, and its own FIFO, for a router to pick
    /// from; it waits out service times asleep instead of spinning).
    #[arg(long, default_value = "udp")]
    proto: Transport,
    /// R2P2: send FEEDBACK after every reply to this router, IPv4:port.
    #[arg(long, value_name = "ROUTER")]
    feedback_to: Option<SocketAddrV4>,
    /// Service time: fixed:D, exp:D (mean D) or bimodal:D (90 % take D, 10 %
    /// take 10·D; mean 1.9·D), D like 20us or 1ms.
    #[arg(long, required_unless_present = "echo", conflicts_with = "echo")]
    service: Option<ServiceDist>,
    /// Worker threads c.
    #[arg(long, default_value_t = 1)]
    workers: usize,
    /// Echo every message back instead (any client, e.g. --app echo).
    #[arg(long)]
    echo: bool,
    /// Seed of the service times.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Run the workers under SCHED_FIFO at this priority (1..=97) and the
    /// receiving threads one above (needs root). Real-time busy-spinning
    /// workers: an overloaded server makes the machine sluggish.
    #[arg(long)]
    rt_priority: Option<i32>,
    /// Stop after this many seconds (default: run until SIGINT/SIGTERM).
    #[arg(long)]
    seconds: Option<f64>,
    /// Run inside this network namespace (/run/netns/NAME).
    #[arg(long)]
    netns: Option<String>,
    /// Print the counters at exit as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args)]
struct MmcArgs {
    /// Mean service time (exponential), e.g. 500us.
    #[arg(long, default_value = "500us")]
    service_mean: String,
    /// Workers c.
    #[arg(long, default_value_t = 1)]
    workers: usize,
    /// Loads ρ, comma-separated, each in (0, 1).
    #[arg(long, default_value = "0.3,0.5,0.7", value_delimiter = ',')]
    loads: Vec<f64>,
    /// Percentiles compared, comma-separated.
    #[arg(long, default_value = "50,99", value_delimiter = ',')]
    percentiles: Vec<f64>,
    /// Minimum seconds per load.
    #[arg(long, default_value_t = 5.0)]
    duration: f64,
    /// Maximum seconds per load while the intervals are wider than --ci-width.
    #[arg(long, default_value_t = 15.0)]
    max_duration: f64,
    /// Wanted relative half-width of the intervals.
    #[arg(long, default_value_t = 0.15)]
    ci_width: f64,
    /// Seconds of the zero-service overhead run.
    #[arg(long, default_value_t = 2.0)]
    baseline: f64,
    /// Transport: udp or tcp.
    #[arg(long, default_value = "udp")]
    proto: Transport,
    /// Seed of schedules and service times.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// SCHED_FIFO priority of the server's workers (its receiver runs one
    /// above, the client two above); 0 for normal scheduling.
    #[arg(long, default_value_t = 10)]
    rt_priority: i32,
    /// Print the result as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args)]
struct CrossCheckArgs {
    /// Message size in bytes (≥ 14).
    #[arg(long, default_value_t = 64)]
    size: usize,
    /// Messages per second of each tool (fixed spacing).
    #[arg(long, default_value_t = 1000)]
    rate: u32,
    /// Rounds of each tool; they alternate, sockperf first.
    #[arg(long, default_value_t = 16)]
    rounds: usize,
    /// Seconds per round of one tool.
    #[arg(long, default_value_t = 1)]
    round_seconds: u64,
    /// Percentiles compared, comma-separated, each in (0, 100).
    #[arg(long, default_value = "50,99", value_delimiter = ',')]
    percentiles: Vec<f64>,
    /// Largest relative difference |lancet / sockperf − 1| that agrees.
    #[arg(long, default_value_t = 0.20)]
    tolerance: f64,
    /// CPU of both clients (sockperf ping-pong and lancet's agent).
    #[arg(long, default_value_t = 0)]
    client_cpu: usize,
    /// CPU of sockperf server and its SCHED_IDLE spinner (default: the last).
    #[arg(long)]
    server_cpu: Option<usize>,
    /// Leave placement to the scheduler: no taskset, no pinning, no spinner.
    #[arg(long, conflicts_with_all = ["client_cpu", "server_cpu"])]
    no_placement: bool,
    /// SCHED_FIFO priority of sockperf server (chrt -f, needs root); 0 runs
    /// it at normal priority.
    #[arg(long, default_value_t = 10)]
    server_priority: i32,
    /// Floor probe on each CPU after each lancet round, ms (0: none).
    #[arg(long, default_value_t = 250)]
    floor_ms: u64,
    /// After a lancet round's last send, wait this long for replies, ms.
    #[arg(long, default_value_t = 1000)]
    drain_ms: u64,
    /// Seed of lancet's rounds.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
}

fn secs(name: &str, v: f64) -> Result<u64, Box<dyn std::error::Error>> {
    if !(v.is_finite() && v > 0.0 && v <= 86_400.0) {
        return Err(format!("--{name} must be a number of seconds in (0, 86400], got {v}").into());
    }
    Ok((v * 1e9) as u64)
}

/// Run `xlane lancet`.
pub fn run(args: Args) -> super::CmdResult {
    match args.sub {
        Some(Sub::Serve(a)) => serve(a),
        Some(Sub::MmcCheck(a)) => mmc_check(a),
        Some(Sub::CrossCheck(a)) => cross_check(a),
        None => measure(args.client),
    }
}

fn measure(a: ClientArgs) -> super::CmdResult {
    let (&target, more_targets) = a.target.split_first().ok_or("--target is required")?;
    if let Some(iface) = &a.hw_stamps {
        xlane_host::socket::enable_hw_timestamping(iface)?;
        tracing::info!("{iface} stamps every packet in hardware");
    }
    let warmup_ns = match a.warmup {
        Some(0.0) => Some(0),
        Some(w) => Some(secs("warmup", w)?),
        None => None,
    };
    let cfg = ClientConfig {
        target,
        transport: a.proto,
        app: a.app,
        rate: a.rate,
        arrival: a.dist,
        conns: a.conns,
        threads: a.threads,
        agent: a.agent,
        latency_rate: a.latency_rate,
        size: a.size,
        duration_ns: secs("duration", a.duration)?,
        max_duration_ns: secs("max-duration", a.max_duration)?,
        warmup_ns,
        percentiles: a.percentiles,
        ci_width: a.ci_width,
        confidence: a.confidence,
        seed: a.seed,
        drain_ns: a.drain_ms.saturating_mul(1_000_000),
        spin_ns: a.spin_us.saturating_mul(1_000),
        rt_priority: a.rt_priority,
        more_targets: more_targets.to_vec(),
        ..ClientConfig::new(target)
    };
    cfg.validate()?;
    let _ns = match &a.netns {
        Some(n) => Some(xlane_testbed::enter_netns(n)?),
        None => None,
    };
    let report = xlane_lancet::run(&cfg)?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", report.render());
    }
    let measuring = cfg.agent != AgentKind::Throughput;
    if !report.valid {
        return Err(format!(
            "the measurement failed its self-checks ({} verdicts){}",
            report.verdicts.len(),
            if measuring {
                ": its percentiles are not trustworthy"
            } else {
                ""
            }
        )
        .into());
    }
    Ok(())
}

fn serve(a: ServeArgs) -> super::CmdResult {
    let mode = match (a.echo, a.service) {
        (true, _) => ServeMode::Echo,
        (false, Some(s)) => ServeMode::Synthetic(s),
        (false, None) => return Err("give --service KIND:TIME or --echo".into()),
    };
    let limit = a.seconds.map(|s| secs("seconds", s)).transpose()?;
    let _ns = match &a.netns {
        Some(n) => Some(xlane_testbed::enter_netns(n)?),
        None => None,
    };
    let stop = xlane_host::tuning::install_termination_flag();
    let cfg = ServeConfig {
        bind: a.bind,
        transport: a.proto,
        mode,
        workers: a.workers,
        seed: a.seed,
        queue_cap: 1 << 16,
        rt_priority: a.rt_priority,
        feedback_to: a.feedback_to,
    };
    if cfg.feedback_to.is_some() && cfg.transport != Transport::R2p2 {
        return Err("--feedback-to needs --proto r2p2".into());
    }
    let srv = Server::start(&cfg)?;
    let what = match mode {
        ServeMode::Echo => "echo".to_string(),
        ServeMode::Synthetic(s) => format!(
            "synthetic, service {s} (mean {}), {} workers",
            xlane_lancet::report::fmt_ns(s.mean_ns() as u64),
            a.workers
        ),
    };
    let on: Vec<String> = srv.addrs().iter().map(|a| a.to_string()).collect();
    tracing::info!("serving {} {what} on {}", a.proto, on.join(" "));
    let start = Instant::now();
    while !stop.load(Ordering::Relaxed)
        && !matches!(limit, Some(l) if start.elapsed() >= Duration::from_nanos(l))
    {
        std::thread::sleep(Duration::from_millis(50));
    }
    let st = srv.stop();
    if st.rt_denied > 0 {
        tracing::warn!("SCHED_FIFO refused for {} threads", st.rt_denied);
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&st)?);
    } else {
        println!(
            "requests {}, responses {}, malformed {}, dropped (queue full) {}, send errors {}, connections {}",
            st.requests, st.responses, st.malformed, st.dropped, st.send_errors, st.connections
        );
    }
    Ok(())
}

fn mmc_check(a: MmcArgs) -> super::CmdResult {
    let cfg = MmcConfig {
        service_mean_ns: parse_duration_ns(&a.service_mean)?,
        workers: a.workers,
        loads: a.loads,
        percentiles: a.percentiles,
        duration_ns: secs("duration", a.duration)?,
        max_duration_ns: secs("max-duration", a.max_duration)?,
        ci_width: a.ci_width,
        baseline_ns: secs("baseline", a.baseline)?,
        transport: a.proto,
        seed: a.seed,
        rt_priority: (a.rt_priority != 0).then_some(a.rt_priority),
        ..MmcConfig::default()
    };
    let rep = run_mmc(&cfg)?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&rep)?);
    } else {
        print!("{}", rep.render());
    }
    if !rep.all_pass {
        return Err("measured percentiles disagree with M/M/c theory".into());
    }
    Ok(())
}

fn cross_check(a: CrossCheckArgs) -> super::CmdResult {
    let placement = if a.no_placement {
        None
    } else {
        let server_cpu = match a.server_cpu {
            Some(c) => c,
            None => std::thread::available_parallelism()?.get() - 1,
        };
        if server_cpu == a.client_cpu {
            return Err(format!(
                "the server and the clients need different CPUs (both {server_cpu}); \
                 this machine has {} CPU(s): give --server-cpu, or --no-placement",
                server_cpu + 1
            )
            .into());
        }
        Some(Placement {
            client_cpu: a.client_cpu,
            server_cpu,
        })
    };
    if a.server_priority < 0 {
        return Err("--server-priority must be 0 (normal) or in 1..=98".into());
    }
    let cfg = CrossCheckConfig {
        size: a.size,
        rate: a.rate,
        round_seconds: a.round_seconds,
        rounds: a.rounds,
        percentiles: a.percentiles,
        tolerance: a.tolerance,
        placement,
        server_priority: (a.server_priority != 0).then_some(a.server_priority),
        floor_ns: a.floor_ms.saturating_mul(1_000_000),
        drain_ns: a.drain_ms.saturating_mul(1_000_000),
        seed: a.seed,
    };
    let rep = xlane_lancet::cross_check::run(&cfg)?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&rep)?);
    } else {
        print!("{}", rep.render());
    }
    if !rep.agree {
        return Err(rep
            .verdict
            .trim_start_matches("verdict: ")
            .to_string()
            .into());
    }
    Ok(())
}
