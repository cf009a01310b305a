//! `xlane bench sven`: SLO-aware admission control under a stepped load
//! (see `xlane_bench::sven_bench`).

use xlane_bench::sven_bench::{self, Control, Shape, Step, SvenBenchConfig};
use xlane_lancet::parse_duration_ns;

/// Arguments of `xlane bench sven`.
#[derive(clap::Args)]
pub struct SvenArgs {
    /// Worker ports of the synthetic server (each its own FIFO).
    #[arg(long, default_value_t = 4)]
    workers: usize,
    /// Mean service time S̄ of every distribution.
    #[arg(long, default_value = "500us")]
    service: String,
    /// The SLO, like p99=15ms (default: p99 = 30 × --service, SVEN's
    /// 300 µs for 10 µs).
    #[arg(long)]
    slo: Option<String>,
    /// Service-time distributions, comma-separated: fixed, exp, bimodal.
    #[arg(long, default_value = "fixed,exp,bimodal", value_delimiter = ',')]
    distributions: Vec<String>,
    /// Loads of the curve without control, fractions of capacity.
    #[arg(
        long,
        default_value = "0.5,0.6,0.7,0.8,0.85,0.9,0.95,1.0",
        value_delimiter = ','
    )]
    curve_loads: Vec<f64>,
    /// Seconds per curve point (the first half-second is warm-up).
    #[arg(long, default_value_t = 3.0)]
    curve_seconds: f64,
    /// The stepped load, LOAD:SECONDS comma-separated.
    #[arg(
        long,
        default_value = "0.6:4,0.8:4,1.0:4,1.1:10,1.15:12",
        value_delimiter = ','
    )]
    steps: Vec<String>,
    /// Seconds after the first step at ≥ 1.1 × capacity that the targets
    /// leave out (the controller settling).
    #[arg(long, default_value_t = 1)]
    settle_seconds: u32,
    /// Controllers, comma-separated: none, aiad, default.
    #[arg(long, default_value = "none,aiad,default", value_delimiter = ',')]
    controllers: Vec<String>,
    /// Control period of the router's admission control.
    #[arg(long, default_value = "20ms")]
    period: String,
    /// Seed of schedules, service times and random picks.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    #[command(flatten)]
    retry: super::bench_rpc::RetryArgs,
    /// Write the plots (PNG and SVG) into this directory.
    #[arg(long, default_value = "out/sven")]
    plots: std::path::PathBuf,
    /// Write no plot.
    #[arg(long)]
    no_plots: bool,
    /// Print the report as JSON (`slo_ns`, `capacity_rps`,
    /// `slo_violating_rps` per distribution, `curves`, `controllers` with
    /// `name`, `distribution` and per-second `seconds`: `offered_rps`,
    /// `achieved_rps`, `goodput_rps`, `drop_rate`, `p99_ns`, floor;
    /// `targets`).
    #[arg(long)]
    json: bool,
}

fn list<T: std::str::FromStr<Err = String>>(v: &[String]) -> Result<Vec<T>, String> {
    v.iter().map(|s| s.trim().parse()).collect()
}

/// Runs the bench.
pub fn sven(a: SvenArgs) -> super::CmdResult {
    let cfg = SvenBenchConfig {
        workers: a.workers,
        service_ns: parse_duration_ns(&a.service)?,
        slo: a.slo.as_deref().map(str::parse).transpose()?,
        distributions: list::<Shape>(&a.distributions)
            .map_err(|e| format!("--distributions: {e}"))?,
        curve_loads: a.curve_loads,
        curve_seconds: a.curve_seconds,
        steps: list::<Step>(&a.steps).map_err(|e| format!("--steps: {e}"))?,
        settle_seconds: a.settle_seconds,
        controllers: list::<Control>(&a.controllers).map_err(|e| format!("--controllers: {e}"))?,
        period_ns: parse_duration_ns(&a.period)?,
        seed: a.seed,
        max_gap_ns: a.retry.max_gap_ns()?,
        retries: a.retry.retries,
    };
    let report = sven_bench::run(&cfg, &mut |line| eprintln!("[xlane] {line}"))?;
    if !a.no_plots {
        let [curve, steps] = sven_bench::plot(&report, &a.plots)?;
        eprintln!("[xlane] plots: {} {}", curve.display(), steps.display());
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", sven_bench::render(&report));
    }
    Ok(())
}
