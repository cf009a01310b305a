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
}

/// Run `xlane bench`.
pub fn run(args: Args) -> super::CmdResult {
    match args.what {
        What::Lane(a) => lane(a),
    }
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
