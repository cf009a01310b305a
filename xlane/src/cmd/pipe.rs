//! `xlane pipe`: 1Pipe, totally ordered scattering.
//!
//! * `xlane pipe switchd --bind ADDR --input ADDR ... --route PROC=ADDR ...`
//!   runs a hop (the switch's host representative): the minimum barrier
//!   over its input links rewritten into every packet it forwards, beacons
//!   on idle outputs, a silent input link removed. Prints
//!   `{"event":"ready",...}` once bound, `link_silent` when an input falls
//!   silent, a status line every `--status-every` seconds and a final one
//!   at the stop (SIGTERM, SIGINT or `--seconds`).

use super::CmdResult;
use clap::{Parser, Subcommand};
use std::net::SocketAddrV4;
use std::time::Duration;
use xlane_host::tuning::install_termination_flag;
use xlane_pipe::udp::{HopConfig, UdpHop};
use xlane_pipe::{AggConfig, AggEvent};

/// 1Pipe: totally ordered scattering (see docs/pipe.md).
#[derive(Parser)]
pub struct Args {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// A 1Pipe hop (the switch's host representative): it takes packets
    /// from its --input links (endpoints or hops), forwards each message
    /// toward its receiver by --route with the minimum barrier over its
    /// inputs written in, and sends beacons on outputs idle for
    /// --beacon-us. An input silent for --dead-after beacon intervals is
    /// removed, so that the barrier moves on; if it speaks again it joins
    /// anew, counting once its barrier catches up. With --hold-silent (a
    /// reliable deployment) a silent input keeps holding the barriers until
    /// the recovery coordinator writes `remove ADDR` on standard input.
    Switchd(SwitchdArgs),
}

#[derive(Parser)]
struct SwitchdArgs {
    /// Address the hop receives on (IPv4).
    #[arg(long)]
    bind: SocketAddrV4,
    /// An input link: the address packets come from (an endpoint or an
    /// upstream hop); repeat for each.
    #[arg(long = "input", required = true)]
    inputs: Vec<SocketAddrV4>,
    /// PROC=ADDR: where messages to process PROC go next (its endpoint or
    /// the next hop); repeat for each process.
    #[arg(long = "route", required = true, value_parser = parse_route)]
    routes: Vec<(u32, SocketAddrV4)>,
    /// Beacon interval, µs: an output idle this long gets a beacon.
    #[arg(long, default_value_t = 100)]
    beacon_us: u64,
    /// An input silent this many beacon intervals is removed.
    #[arg(long, default_value_t = 10)]
    dead_after: u32,
    /// Keep a silent input holding the barriers (reliable mode: its
    /// uncommitted messages must be discarded everywhere first) until a
    /// line `remove ADDR` on standard input removes it.
    #[arg(long)]
    hold_silent: bool,
    /// DSCP of everything the hop sends (0: best effort; 46, the
    /// testbed's express class, puts barriers and beacons on the lane).
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u8).range(0..64))]
    dscp: u8,
    /// Seconds between status lines (0: only the final one).
    #[arg(long, default_value_t = 0)]
    status_every: u64,
    /// Stop after this many seconds (0: until SIGTERM/SIGINT).
    #[arg(long, default_value_t = 0)]
    seconds: u64,
}

pub(super) fn parse_route(s: &str) -> Result<(u32, SocketAddrV4), String> {
    let bad = || format!("bad route {s:?}: expected PROC=IPv4:PORT, like 3=10.0.0.3:7400");
    let (p, a) = s.split_once('=').ok_or_else(bad)?;
    Ok((p.parse().map_err(|_| bad())?, a.parse().map_err(|_| bad())?))
}

/// Runs the `pipe` subcommand.
pub fn run(a: Args) -> CmdResult {
    match a.cmd {
        Cmd::Switchd(s) => switchd(s),
    }
}

fn switchd(a: SwitchdArgs) -> CmdResult {
    if a.beacon_us == 0 || a.dead_after == 0 {
        return Err("--beacon-us and --dead-after must be at least 1".into());
    }
    if a.inputs.contains(&a.bind) {
        return Err(format!("--input {} is the hop's own --bind", a.bind).into());
    }
    for (i, (p, _)) in a.routes.iter().enumerate() {
        if a.routes[..i].iter().any(|(q, _)| q == p) {
            return Err(format!("--route: process {p} routed twice").into());
        }
    }
    let cfg = HopConfig {
        agg: AggConfig {
            beacon_interval_ns: a.beacon_us * 1_000,
            dead_after: a.dead_after,
            hold_silent: a.hold_silent,
        },
        inputs: a.inputs.clone(),
        routes: a.routes.clone(),
    };
    let mut hop = UdpHop::bind(a.bind, cfg).map_err(|e| format!("hop on {}: {e}", a.bind))?;
    hop.set_tos(a.dscp << 2)
        .map_err(|e| format!("--dscp {}: {e}", a.dscp))?;
    xlane_host::runtime::tighten_timer_slack();
    let stop = install_termination_flag();
    println!(
        "{}",
        serde_json::json!({
            "event": "ready",
            "bind": hop.local_addr()?.to_string(),
            "inputs": a.inputs.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
            "routes": a.routes.len(),
            "beacon_us": a.beacon_us,
        })
    );
    let commands = stdin_lines();
    super::status_loop(
        &mut hop,
        stop,
        a.status_every,
        a.seconds,
        |hop| {
            hop.wait(Duration::from_millis(50))?;
            while let Ok(line) = commands.try_recv() {
                command(hop, line.trim());
            }
            while let Some((e, addr)) = hop.poll_event() {
                if let AggEvent::LinkSilent {
                    barrier, commit, ..
                } = e
                {
                    println!(
                        "{}",
                        serde_json::json!({
                            "event": "link_silent",
                            "input": addr.map(|a| a.to_string()),
                            "barrier": barrier,
                            "commit": commit,
                        })
                    );
                }
            }
            Ok(())
        },
        status,
    )
}

/// Lines of standard input, read on their own thread (none once it
/// closes).
fn stdin_lines() -> std::sync::mpsc::Receiver<String> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::stdin().lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// One command from standard input: `remove ADDR`. Its outcome is a JSON
/// line; a bad command is reported, never fatal.
fn command(hop: &mut UdpHop, line: &str) {
    if line.is_empty() {
        return;
    }
    let out = match line.split_once(' ') {
        Some(("remove", a)) => match a.trim().parse::<SocketAddrV4>() {
            Ok(addr) if hop.remove_input(addr) => {
                serde_json::json!({"event": "removed", "input": addr.to_string()})
            }
            Ok(addr) => serde_json::json!({
                "event": "error",
                "error": format!("no live input from {addr}"),
            }),
            Err(_) => serde_json::json!({
                "event": "error",
                "error": format!("bad address {a:?}: expected IPv4:PORT"),
            }),
        },
        _ => serde_json::json!({
            "event": "error",
            "error": format!("unknown command {line:?}: expected `remove ADDR`"),
        }),
    };
    println!("{out}");
}

fn status(h: &UdpHop, event: &str, t: Duration) -> serde_json::Value {
    let d = h.stats();
    let (barrier, commit) = h.core().barriers();
    serde_json::json!({
        "event": event,
        "seconds": t.as_secs_f64(),
        "received": d.received,
        "sent": d.sent,
        "refused": d.refused,
        "send_errors": d.send_errors,
        "rejoined": d.rejoined,
        "beacons": d.beacons,
        "live_inputs": h.core().live_inputs(),
        "barrier": barrier,
        "commit": commit,
    })
}
