//! `xlane bench apps`: etcd, Redis and sockperf, default and under `xlane
//! run`, under cross traffic and CPU load (see `xlane_bench::apps_bench`).

use std::time::Duration;

use xlane_bench::apps_bench::{self, App, AppsBenchConfig};

/// Arguments of `xlane bench apps`.
#[derive(clap::Args)]
pub struct AppsArgs {
    /// Print the report as JSON (`apps`: name, mode, scenario, p50_ns,
    /// p99_ns, max_ns, errors, leader_changes, path; `ratios`; `level`;
    /// `floor`).
    #[arg(long)]
    json: bool,
    /// Applications, comma-separated: etcd, redis, sockperf.
    #[arg(long, default_value = "etcd,redis,sockperf", value_delimiter = ',')]
    apps: Vec<String>,
    /// The QJump level of the `level` runs (1 or 2).
    #[arg(long, default_value_t = 2)]
    level: u8,
    /// Timed writes of each etcd and Redis run.
    #[arg(long, default_value_t = 300)]
    writes: usize,
    /// Longest write phase of a run, seconds (fewer writes if slower).
    #[arg(long, default_value_t = 30.0)]
    latency_seconds: f64,
    /// Seconds of each sockperf run.
    #[arg(long, default_value_t = 5)]
    sockperf_seconds: u32,
    /// sockperf's messages per second.
    #[arg(long, default_value_t = 1000)]
    sockperf_mps: u32,
    /// Write the plot (PNG and SVG) into this directory.
    #[arg(long, default_value = "out/apps")]
    plots: std::path::PathBuf,
    /// Write no plot.
    #[arg(long)]
    no_plots: bool,
    /// Directory for the clusters' data (a RAM disk).
    #[arg(long, default_value = "/dev/shm")]
    work_dir: std::path::PathBuf,
    /// The xlane binary whose `run` is used (default: this one;
    /// libxlane_preload.so must be beside it).
    #[arg(long)]
    xlane: Option<std::path::PathBuf>,
    /// Seconds a write may take to become visible before it counts as
    /// failed (also bounds a cluster's start, at least 20 s).
    #[arg(long, default_value_t = 10.0)]
    timeout: f64,
    /// The lane core, kept free of the bench (default: the last CPU).
    #[arg(long)]
    lane_core: Option<usize>,
    /// Link rate of every switch port (R of the level's epoch).
    #[arg(long, default_value = "40mbit")]
    rate: String,
    /// In the level runs, leave the application on the regular cores with
    /// the interference (network level only; by default it runs on the
    /// lane core at nice -10, as bench kv places the lane's members).
    #[arg(long)]
    level_off_lane_core: bool,
    /// Best-effort queue of every switch port, packets.
    #[arg(long, default_value_t = 400)]
    best_effort_queue: u32,
}

/// Runs the bench.
pub fn apps(a: AppsArgs) -> super::CmdResult {
    let apps = a
        .apps
        .iter()
        .map(|s| {
            App::from_name(s).ok_or_else(|| format!("unknown app {s:?} (etcd, redis, sockperf)"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    if a.writes == 0 || a.writes > 1_000_000 {
        return Err("--writes must be 1..=1000000".into());
    }
    if !(a.latency_seconds > 0.0 && a.latency_seconds <= 3600.0) {
        return Err("--latency-seconds must be in (0, 3600]".into());
    }
    if !(a.timeout > 0.0 && a.timeout <= 600.0) {
        return Err("--timeout must be in (0, 600] seconds".into());
    }
    if a.sockperf_seconds == 0 || a.sockperf_seconds > 3600 {
        return Err("--sockperf-seconds must be 1..=3600".into());
    }
    if a.sockperf_mps == 0 || a.sockperf_mps > 1_000_000 {
        return Err("--sockperf-mps must be 1..=1000000".into());
    }
    if a.best_effort_queue == 0 {
        return Err("--best-effort-queue must be at least 1 packet".into());
    }
    let xlane = match a.xlane {
        Some(p) => p,
        None => std::env::current_exe()?,
    };
    let mut cfg = AppsBenchConfig::new(xlane);
    cfg.apps = apps;
    cfg.level = a.level;
    cfg.writes = a.writes;
    cfg.latency_cap = Duration::from_secs_f64(a.latency_seconds);
    cfg.sockperf_seconds = a.sockperf_seconds;
    cfg.sockperf_mps = a.sockperf_mps;
    cfg.plot_dir = (!a.no_plots).then_some(a.plots);
    cfg.work_dir = a.work_dir;
    cfg.timeout = Duration::from_secs_f64(a.timeout);
    if let Some(c) = a.lane_core {
        cfg.lane_core = c;
    }
    cfg.link_rate_bps = xlane_testbed::parse_rate(&a.rate)?;
    cfg.best_effort_queue_pkts = a.best_effort_queue;
    cfg.level_on_lane_core = !a.level_off_lane_core;
    let report = apps_bench::run(&cfg, &mut |line| eprintln!("[xlane] {line}"))?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", apps_bench::render(&report));
    }
    Ok(())
}
