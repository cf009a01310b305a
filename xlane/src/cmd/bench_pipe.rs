//! `xlane bench pipe`: 1Pipe's totally ordered scattering measured in the
//! emulated datacenter (see `xlane_bench::pipe_bench`).

use xlane_bench::pipe_bench::{self, PipeBenchConfig};

/// Arguments of `xlane bench pipe`.
#[derive(clap::Args)]
pub struct PipeArgs {
    /// Hosts of the testbed; process p runs on host p mod hosts.
    #[arg(long, default_value_t = 4)]
    hosts: usize,
    /// Process counts of the latency phase, comma-separated.
    #[arg(long, default_value = "2,4,8,16", value_delimiter = ',')]
    procs: Vec<usize>,
    /// Receivers per scattering.
    #[arg(long, default_value_t = 3)]
    fanout: usize,
    /// Scatterings per second of each process in the latency phase.
    #[arg(long, default_value_t = 300.0)]
    rate: f64,
    /// Seconds per latency point.
    #[arg(long, default_value_t = 2.0)]
    seconds: f64,
    /// Beacon interval, µs (latency, failure and volume phases).
    #[arg(long, default_value_t = 1000)]
    beacon_us: u64,
    /// Beacon intervals before a silent link is reported (1Pipe uses 10;
    /// 30 here, as a host stall past the deadline fences a correct
    /// process and shared VMs stall for tens of ms).
    #[arg(long, default_value_t = 30)]
    dead_after: u32,
    /// Beacon intervals of the beacon phase, µs, comma-separated ("" skips).
    #[arg(long, default_value = "50,100,200,500,1000", value_delimiter = ',')]
    beacon_sweep_us: Vec<String>,
    /// Scatterings per second of each process in the beacon phase.
    #[arg(long, default_value_t = 50.0)]
    sweep_rate: f64,
    /// Processes of the beacon, failure and volume phases.
    #[arg(long, default_value_t = 8)]
    procs_failures: usize,
    /// Seconds of a failure point (a kill at a third, a host's link cut
    /// at two thirds); 0 skips the phase.
    #[arg(long, default_value_t = 3.0)]
    failure_seconds: f64,
    /// Messages the volume phase (reliable, with two kills and a cut)
    /// delivers at least; 0 skips it.
    #[arg(long, default_value_t = 1_000_000)]
    messages: u64,
    /// Scatterings per second of each process in the volume phase.
    #[arg(long, default_value_t = 500.0)]
    volume_rate: f64,
    /// Payload bytes per message.
    #[arg(long, default_value_t = 64)]
    payload: usize,
    /// No background-flow points in the latency phase.
    #[arg(long)]
    no_background: bool,
    /// Skip the lane phase (beacons on tunnels the controller allocates;
    /// it needs 4 hosts or more, one for the hop).
    #[arg(long)]
    no_lane: bool,
    /// Link rate of the lane phase's own testbed, Mbit/s (slow enough for
    /// this machine's flows to fill its links).
    #[arg(long, default_value_t = 100)]
    lane_link_mbps: u64,
    /// Period of the beacon tunnels asked of the controller, µs (the
    /// regular beacon interval by default: the same beacons, another
    /// path).
    #[arg(long, default_value_t = 1_000)]
    lane_period_us: u64,
    /// W, µs: a lane beacon carries no more than the barriers of the
    /// oldest packet its sender sent on the regular path in the last W
    /// (about that path's p99.9 delay).
    #[arg(long, default_value_t = 2_000)]
    lane_window_us: u64,
    /// SCHED_FIFO priority of the processes and the hop (0: none).
    #[arg(long, default_value_t = xlane_bench::flows::LANE_PRIORITY - 1)]
    fifo: i32,
    /// Seed of picks and gaps.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// The core the floor reports as the lane's (default: the last).
    #[arg(long)]
    lane_core: Option<usize>,
    /// Write the plots (PNG and SVG) into this directory.
    #[arg(long, default_value = "out/pipe")]
    plots: std::path::PathBuf,
    /// Write no plot.
    #[arg(long)]
    no_plots: bool,
    /// Print the report as JSON: `points` (per point: phase, procs, mode,
    /// condition, beacons, latencies, overhead, wait for the barrier, CPU,
    /// beacons, lane frames, suspicions, failures with
    /// detection/recovery/resumption, floor), the totals `messages`,
    /// `ordering_violations`, `atomicity_violations`, with `targets`, and
    /// the lane phase's `lane_tunnels` and `lane_upcalls`.
    #[arg(long)]
    json: bool,
}

/// Runs the bench.
pub fn pipe(a: PipeArgs) -> super::CmdResult {
    let sweep = a
        .beacon_sweep_us
        .iter()
        .filter(|s| !s.trim().is_empty())
        .map(|s| {
            s.trim()
                .parse::<u64>()
                .map_err(|_| format!("--beacon-sweep-us: bad interval {s:?}"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let ncpu = xlane_bench::interference::Cores::online();
    let cfg = PipeBenchConfig {
        exe: std::env::current_exe()?,
        hosts: a.hosts,
        procs: a.procs,
        fanout: a.fanout,
        rate: a.rate,
        seconds: a.seconds,
        beacon_us: a.beacon_us,
        dead_after: a.dead_after,
        beacon_sweep_us: sweep,
        sweep_rate: a.sweep_rate,
        procs_failures: a.procs_failures,
        failure_seconds: a.failure_seconds,
        messages: a.messages,
        volume_rate: a.volume_rate,
        payload: a.payload,
        background: !a.no_background,
        fifo: a.fifo,
        lane: !a.no_lane,
        lane_link_rate_bps: a.lane_link_mbps * 1_000_000,
        lane_period_us: a.lane_period_us,
        lane_window_us: a.lane_window_us,
        lane_core: a.lane_core.unwrap_or(ncpu.saturating_sub(1)),
        seed: a.seed,
    };
    let report = pipe_bench::run(&cfg, &mut |line| eprintln!("[xlane] {line}"))?;
    if !a.no_plots {
        let files = pipe_bench::plot(&report, &a.plots)?;
        let names: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
        eprintln!("[xlane] plots: {}", names.join(" "));
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", pipe_bench::render(&report));
    }
    let missed: Vec<&str> = report
        .targets
        .iter()
        .filter(|t| !t.met && t.name.contains("violations"))
        .map(|t| t.name.as_str())
        .collect();
    if !missed.is_empty() {
        return Err(format!("correctness targets missed: {}", missed.join(", ")).into());
    }
    Ok(())
}
