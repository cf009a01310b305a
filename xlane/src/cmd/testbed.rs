//! `xlane testbed`: the emulated datacenter (hosts and a switch in network
//! namespaces, shaped links with strict-priority express classes).

use std::path::PathBuf;
use std::time::{Duration, Instant};
use xlane_testbed::{
    format_rate, parse_rate, CrossTraffic, Proto, Testbed, TestbedConfig, TestbedError,
};

/// The emulated datacenter: hosts and a switch in network namespaces.
#[derive(clap::Args)]
#[command(
    after_help = "The emulated datacenter: N hosts and one switch, each a network namespace \
named <prefix>-h<i> / <prefix>-sw, joined by veth pairs to a Linux bridge. Host i has \
198.18.0.(i+1)/24 and no default route. Every switch port and host NIC is shaped by HTB to \
the link rate, with strict-priority express classes (DSCP 46, then DSCP 40) above best \
effort. State of each testbed is kept in /run/xlane/<prefix>.toml. Needs root."
)]
pub struct Args {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(clap::Subcommand)]
enum Cmd {
    /// Create a testbed and leave it running; prints its prefix, hosts and addresses.
    Up(UpArgs),
    /// Remove a testbed by prefix, or every testbed nobody owns with --all.
    Down(DownArgs),
    /// List the testbeds on this machine.
    Status,
    /// Run bulk cross traffic between two hosts in the foreground, then print the rate.
    Traffic(TrafficArgs),
    /// Print or write the topology TOML of a running testbed.
    Topology(TopologyArgs),
}

#[derive(clap::Args)]
struct UpArgs {
    /// Number of hosts (2..=16).
    #[arg(long, default_value_t = 4)]
    hosts: usize,
    /// Rate of every switch port (e.g. 1gbit, 200mbit, 500k).
    #[arg(long, default_value = "1gbit", value_parser = parse_rate)]
    rate: u64,
    /// Rate of every host NIC [default: same as --rate].
    #[arg(long, value_parser = parse_rate)]
    host_rate: Option<u64>,
    /// Queue of each express class, packets.
    #[arg(long, default_value_t = 64)]
    express_queue: u32,
    /// Queue of the best-effort class, packets.
    #[arg(long, default_value_t = 1000)]
    best_effort_queue: u32,
    /// DSCP of the first express sub-lane.
    #[arg(long, default_value_t = xlane_testbed::DSCP_EF)]
    express_dscp: u8,
    /// DSCP of the second express sub-lane.
    #[arg(long, default_value_t = xlane_testbed::DSCP_CS5, conflicts_with = "no_express2")]
    express2_dscp: u8,
    /// No second express sub-lane.
    #[arg(long)]
    no_express2: bool,
    /// Name prefix (1..=11 of a-z0-9) [default: xl + 6 random hex digits].
    #[arg(long)]
    prefix: Option<String>,
    /// Probes per host pair for the idle latency measurement (0 = skip).
    #[arg(long, default_value_t = 2000)]
    probes: usize,
    /// Write the topology TOML to this file.
    #[arg(long)]
    topology_out: Option<PathBuf>,
}

#[derive(clap::Args)]
struct DownArgs {
    /// Prefix of the testbed to remove.
    #[arg(required_unless_present = "all", conflicts_with = "all")]
    prefix: Option<String>,
    /// Remove every testbed whose owner process is gone (crashed runs and
    /// testbeds made by `xlane testbed up`).
    #[arg(long)]
    all: bool,
    /// With --all: also remove testbeds owned by running processes.
    #[arg(long, requires = "all")]
    force: bool,
}

#[derive(clap::Args)]
struct TrafficArgs {
    /// Prefix of the testbed.
    #[arg(long)]
    prefix: String,
    /// Source host index.
    #[arg(long)]
    from: usize,
    /// Destination host index.
    #[arg(long)]
    to: usize,
    /// UDP datagrams (the default).
    #[arg(long, conflicts_with = "tcp")]
    udp: bool,
    /// One TCP connection.
    #[arg(long)]
    tcp: bool,
    /// Offered rate (e.g. 200mbit) [default: unpaced, as fast as the links allow].
    #[arg(long, value_parser = parse_rate)]
    rate: Option<u64>,
    /// How long to run, seconds.
    #[arg(long)]
    seconds: f64,
    /// Pin the generator threads to these CPUs (e.g. 0 or 0,1).
    #[arg(long, value_delimiter = ',')]
    cpus: Vec<usize>,
}

#[derive(clap::Args)]
struct TopologyArgs {
    /// Prefix of the testbed.
    #[arg(long)]
    prefix: String,
    /// Re-measure idle latencies first, with this many probes per host pair.
    #[arg(long)]
    measure: Option<usize>,
    /// Write to this file instead of printing.
    #[arg(long)]
    out: Option<PathBuf>,
}

/// Run `xlane testbed ...`.
pub fn run(args: Args) -> super::CmdResult {
    match args.cmd {
        Cmd::Up(a) => up(a),
        Cmd::Down(a) => down(a),
        Cmd::Status => {
            status();
            Ok(())
        }
        Cmd::Traffic(a) => traffic(a),
        Cmd::Topology(a) => topology(a),
    }
}

fn us(ns: u64) -> String {
    format!("{:.1}", ns as f64 / 1000.0)
}

fn up(a: UpArgs) -> super::CmdResult {
    use std::fmt::Write as _;
    let cfg = TestbedConfig {
        hosts: a.hosts,
        link_rate_bps: a.rate,
        host_rate_bps: a.host_rate,
        express_queue_pkts: a.express_queue,
        best_effort_queue_pkts: a.best_effort_queue,
        express_dscp: a.express_dscp,
        express2_dscp: (!a.no_express2).then_some(a.express2_dscp),
        prefix: a.prefix,
        measure_probes: a.probes,
        ..TestbedConfig::default()
    };
    let started = Instant::now();
    let tb = Testbed::up(cfg)?;
    // Everything that can fail happens before `detach` (a failure tears the
    // new testbed down again); the report is printed after it, so that a
    // closed stdout cannot take the testbed with it.
    let mut out = String::new();
    let c = tb.config();
    let _ = writeln!(
        out,
        "testbed {} up in {:.2} s: {} hosts, switch netns {}, switch ports {}, host NICs {}",
        tb.prefix(),
        started.elapsed().as_secs_f64(),
        tb.hosts().len(),
        tb.switch_netns(),
        format_rate(c.link_rate_bps),
        format_rate(c.effective_host_rate_bps()),
    );
    let _ = writeln!(
        out,
        "express DSCP {}{}; queues: express {} pkts, best effort {} pkts",
        c.express_dscp,
        c.express2_dscp
            .map(|d| format!(" (sub-lane 2: DSCP {d})"))
            .unwrap_or_default(),
        c.express_queue_pkts,
        c.best_effort_queue_pkts
    );
    for h in tb.hosts() {
        let _ = writeln!(
            out,
            "  h{:<2} {:<12} netns {:<14} switch port {}",
            h.index,
            h.addr,
            h.netns,
            tb.switch_port(h.index).unwrap_or("?")
        );
    }
    if let Some(m) = xlane_testbed::state::read_state(tb.prefix())?.and_then(|st| st.measurement) {
        let _ = writeln!(out, "idle one-way latency per path (min / p50 / p99.9 µs):");
        for p in m.paths {
            let _ = writeln!(
                out,
                "  h{} -> h{}: {} / {} / {}  ({} probes)",
                p.from,
                p.to,
                us(p.min_ns),
                us(p.p50_ns),
                us(p.p999_ns),
                p.received
            );
        }
    }
    if let Some(path) = &a.topology_out {
        tb.export_topology().write_to(path)?;
        let _ = writeln!(out, "topology written to {}", path.display());
    }
    let prefix = tb.detach()?;
    let _ = writeln!(
        out,
        "state: {}",
        xlane_testbed::state::state_path(&prefix).display()
    );
    let _ = writeln!(out, "enter a host: ip netns exec {prefix}-h0 <command>");
    let _ = writeln!(out, "remove with: xlane testbed down {prefix}");
    let _ = std::io::Write::write_all(&mut std::io::stdout(), out.as_bytes());
    Ok(())
}

fn down(a: DownArgs) -> super::CmdResult {
    if a.all {
        let removed = if a.force {
            xlane_testbed::down_all_force()?
        } else {
            xlane_testbed::down_all()?
        };
        if removed.is_empty() {
            println!("no testbeds to remove");
        }
        for p in removed {
            println!("removed {p}");
        }
        let kept: Vec<String> = xlane_testbed::status()
            .into_iter()
            .filter(|s| s.owner_alive)
            .map(|s| {
                let pid = s.state.and_then(|st| st.owner_pid).unwrap_or(0);
                format!("{} (owned by running pid {pid})", s.prefix)
            })
            .collect();
        if !kept.is_empty() {
            println!(
                "kept: {} (use --force to remove these too)",
                kept.join(", ")
            );
        }
        return Ok(());
    }
    let prefix = a.prefix.ok_or("give a PREFIX or --all")?;
    let removed = xlane_testbed::down(&prefix)?;
    println!("removed {prefix} ({} namespaces/links)", removed.len());
    Ok(())
}

fn status() {
    let all = xlane_testbed::status();
    if all.is_empty() {
        println!("no testbeds");
        return;
    }
    for s in all {
        let owner = match s.state.as_ref() {
            None => "no state file (leftover)".to_string(),
            Some(st) => match st.owner_pid {
                None => "detached".to_string(),
                Some(pid) if s.owner_alive => format!("owned by pid {pid}"),
                Some(pid) => format!("owner pid {pid} gone (leftover)"),
            },
        };
        let rates = s
            .state
            .as_ref()
            .map(|st| {
                format!(
                    ", {} ports / {} NICs",
                    format_rate(st.config.link_rate_bps),
                    format_rate(st.config.effective_host_rate_bps())
                )
            })
            .unwrap_or_default();
        println!(
            "{}: {} hosts, switch {}{rates}, {owner}",
            s.prefix,
            s.host_netns.len(),
            if s.switch_present {
                "present"
            } else {
                "missing"
            },
        );
        if let Some(st) = &s.state {
            let hosts: Vec<String> = st
                .hosts
                .iter()
                .map(|h| format!("h{}={}", h.index, h.addr))
                .collect();
            println!("  hosts: {}", hosts.join(" "));
        }
        if s.generators.is_empty() {
            println!("  generators: none");
        }
        for g in &s.generators {
            println!(
                "  generator: {} (pid {}, {})",
                g.record.description,
                g.record.pid,
                if g.alive { "running" } else { "gone" }
            );
        }
    }
}

fn traffic(a: TrafficArgs) -> super::CmdResult {
    if !(a.seconds.is_finite() && a.seconds > 0.0 && a.seconds <= 86_400.0) {
        return Err("--seconds must be > 0 and at most 86400".into());
    }
    let mut tb = Testbed::attach(&a.prefix)?;
    tb.set_standalone_generator_process(true);
    let spec = CrossTraffic {
        proto: if a.tcp { Proto::Tcp } else { Proto::Udp },
        rate_bps: a.rate,
        cpus: a.cpus,
        ..if a.tcp {
            CrossTraffic::tcp(a.from, a.to)
        } else {
            CrossTraffic::udp(a.from, a.to)
        }
    };
    let h = tb.start_cross_traffic(spec)?;
    let end = Instant::now() + Duration::from_secs_f64(a.seconds);
    while Instant::now() < end && h.is_running() {
        std::thread::sleep((end - Instant::now()).min(Duration::from_millis(100)));
    }
    let r = h.stop();
    println!(
        "{}: {:.1} s, sent {:.1} Mbit/s ({} packets, {} refused), received {:.1} Mbit/s",
        r.description,
        r.elapsed.as_secs_f64(),
        r.sent_rate_bps / 1e6,
        r.packets_sent,
        r.send_errors,
        r.received_rate_bps / 1e6
    );
    if let Some(e) = r.error {
        return Err(TestbedError::Thread(e).into());
    }
    Ok(())
}

fn topology(a: TopologyArgs) -> super::CmdResult {
    let tb = Testbed::attach(&a.prefix)?;
    if let Some(n) = a.measure {
        tb.measure(n)?;
    }
    let t = tb.export_topology();
    match a.out {
        Some(p) => {
            t.write_to(&p)?;
            println!("topology written to {}", p.display());
        }
        None => print!("{}", t.to_toml()?),
    }
    Ok(())
}
