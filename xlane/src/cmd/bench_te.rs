//! `xlane bench te`: the controller at datacenter scale, simulated (see
//! `xlane_bench::te_bench`).

use xlane_bench::te_bench::{self, TeBenchConfig};

/// Arguments of `xlane bench te`.
#[derive(clap::Args)]
pub struct TeArgs {
    /// Topology: fat-tree:K (K³/4 hosts) or leaf-spine:LEAVES,HOSTS,SPINES.
    #[arg(long, default_value = "fat-tree:32")]
    topology: String,
    /// Tunnels to reach.
    #[arg(long, default_value_t = 100_000)]
    tunnels: usize,
    /// Tunnel counts to report at, comma-separated.
    #[arg(long, default_value = "1000,10000,100000", value_delimiter = ',')]
    points: Vec<usize>,
    /// Requests timed before each point.
    #[arg(long, default_value_t = 1000)]
    window: usize,
    /// One churn operation (release, change, host restart) per this many
    /// requests; 0 for none.
    #[arg(long, default_value_t = 20)]
    churn: u64,
    /// Seed of the workload.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Write the plot (PNG and SVG) into this directory.
    #[arg(long, default_value = "out/te")]
    plots: std::path::PathBuf,
    /// Write no plot.
    #[arg(long)]
    no_plots: bool,
    /// Print the report as JSON (`points`: tunnels, requests, p50_ns,
    /// p99_ns, max_ns, rss_bytes, at_s; `fill_s`, `replay_s`, `refused`,
    /// `bounds_equal`, ...).
    #[arg(long)]
    json: bool,
}

/// Runs the bench.
pub fn te(a: TeArgs) -> super::CmdResult {
    let cfg = TeBenchConfig {
        topology: a.topology,
        tunnels: a.tunnels,
        points: a.points,
        window: a.window,
        churn: a.churn,
        seed: a.seed,
    };
    let report = te_bench::run(&cfg, &mut |line| eprintln!("[xlane] {line}"))?;
    if !a.no_plots {
        let [png, _] = te_bench::plot(&report, &a.plots.join("te-request-time"))?;
        eprintln!("[xlane] plot: {}", png.display());
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", te_bench::render(&report));
    }
    Ok(())
}
