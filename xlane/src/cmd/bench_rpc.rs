//! `xlane bench rpc`: R2P2 load balancing on the regular lane (see
//! `xlane_bench::rpc_bench`).

use xlane_bench::rpc_bench::{self, RpcBenchConfig};
use xlane_lancet::parse_duration_ns;

/// Arguments of `xlane bench rpc`.
#[derive(clap::Args)]
pub struct RpcArgs {
    /// Synthetic R2P2 servers.
    #[arg(long, default_value_t = 4)]
    servers: usize,
    /// Workers per server (each its own port and FIFO).
    #[arg(long, default_value_t = 2)]
    workers: usize,
    /// The short service time D: 90 % of requests take D, 10 % take 10·D.
    #[arg(long, default_value = "1ms")]
    service: String,
    /// Loads, fractions of the capacity, comma-separated.
    #[arg(
        long,
        default_value = "0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8,0.9",
        value_delimiter = ','
    )]
    loads: Vec<f64>,
    /// Router policies, comma-separated: random, round-robin, jsq, jbsq:N.
    #[arg(
        long,
        default_value = "random,round-robin,jsq,jbsq:1,jbsq:2",
        value_delimiter = ','
    )]
    policies: Vec<String>,
    /// Leave out the routerless baseline (the client picks a worker at random).
    #[arg(long)]
    no_direct: bool,
    /// Seconds per point, warm-up included.
    #[arg(long, default_value_t = 4.0)]
    seconds: f64,
    /// Seconds of warm-up per point (samples dropped).
    #[arg(long, default_value_t = 0.5)]
    warmup: f64,
    /// Seed of schedules, service times and random picks.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    #[command(flatten)]
    retry: RetryArgs,
    /// Write the plot (PNG and SVG) into this directory.
    #[arg(long, default_value = "out/rpc")]
    plots: std::path::PathBuf,
    /// Write no plot.
    #[arg(long)]
    no_plots: bool,
    /// Print the report as JSON (`policies`: name and `points` with load,
    /// offered_rps, achieved_rps, p50_ns, p99_ns, p999_ns, dropped, lost,
    /// samples, floor; `targets`; `capacity_rps`).
    #[arg(long)]
    json: bool,
}

/// When a measured point runs again (shared by `bench rpc` and `bench sven`).
#[derive(clap::Args)]
pub(super) struct RetryArgs {
    /// Run a point (in `bench sven`, a point of the curve without control)
    /// again when a CPU's floor probe saw a gap longer than this many ms
    /// during it (the machine held a CPU; the requests sent
    /// and answered meanwhile waited it out); the attempt with the
    /// shortest gap is kept, the others are reported.
    #[arg(long, default_value_t = 10.0)]
    max_gap_ms: f64,
    /// Most extra attempts per point (0: never run a point again).
    #[arg(long, default_value_t = 2)]
    pub(super) retries: usize,
}

impl RetryArgs {
    /// `--max-gap-ms` in ns (a positive number of ms).
    pub(super) fn max_gap_ns(&self) -> Result<u64, String> {
        let ms = self.max_gap_ms;
        if ms.is_finite() && ms > 0.0 {
            Ok((ms * 1e6) as u64)
        } else {
            Err(format!("--max-gap-ms must be a positive number, got {ms}"))
        }
    }
}

/// Runs the bench.
pub fn rpc(a: RpcArgs) -> super::CmdResult {
    let cfg = RpcBenchConfig {
        servers: a.servers,
        workers: a.workers,
        service_ns: parse_duration_ns(&a.service)?,
        loads: a.loads,
        policies: a.policies,
        direct: !a.no_direct,
        seconds: a.seconds,
        warmup: a.warmup,
        seed: a.seed,
        max_gap_ns: a.retry.max_gap_ns()?,
        retries: a.retry.retries,
    };
    let report = rpc_bench::run(&cfg, &mut |line| eprintln!("[xlane] {line}"))?;
    if !a.no_plots {
        let [png, _] = rpc_bench::plot(&report, &a.plots.join("rpc-p99-vs-load"))?;
        eprintln!("[xlane] plot: {}", png.display());
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", rpc_bench::render(&report));
    }
    Ok(())
}
