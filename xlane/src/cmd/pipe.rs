//! `xlane pipe`: 1Pipe, totally ordered scattering.
//!
//! * `xlane pipe switchd --bind ADDR --input ADDR ... --route PROC=ADDR ...`
//!   runs a hop (the switch's host representative): the minimum barrier
//!   over its input links rewritten into every packet it forwards, beacons
//!   on idle outputs, a silent input link removed. Prints
//!   `{"event":"ready",...}` once bound, `link_silent` when an input falls
//!   silent, a status line every `--status-every` seconds and a final one
//!   at the stop (SIGTERM, SIGINT or `--seconds`). With `--lane-bind`,
//!   beacons travel on express-lane tunnels the controller granted
//!   (`--lane-in`, `--lane-out`; see docs/pipe.md).
//! * `xlane pipe coordinator --bind ADDR --store RESP ... --process ID=ADDR ...`
//!   runs a replica of the recovery coordinator (`pipe_coord`).

use super::CmdResult;
use clap::{Parser, Subcommand};
use std::net::SocketAddrV4;
use std::time::Duration;
use xlane_host::tuning::install_termination_flag;
use xlane_pipe::lane::{LanePortConfig, LaneTunnel};
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
    /// a recovery coordinator (--coordinator) has it removed.
    Switchd(SwitchdArgs),
    /// A replica of the recovery coordinator of reliable 1Pipe. Hops
    /// (`switchd --hold-silent --coordinator THIS`) report a held silent
    /// input; the coordinator has the failed process's failure timestamp
    /// decided once in an `xlane kv` Raft group (--store: HSETNX on the
    /// hash --store-key, so every replica gets the same one), tells every
    /// --process (`proc_fail`: discard, abort, callback) until each
    /// correct one confirms, then has the hop remove the link. Run several
    /// replicas, each on its own address and given to every hop and
    /// process: every step is idempotent, and any live replica finishes a
    /// recovery. Prints JSON lines: ready, decided, recovered, stopped.
    Coordinator(super::pipe_coord::CoordArgs),
}

#[derive(Parser)]
struct SwitchdArgs {
    /// Address the hop receives on (IPv4).
    #[arg(long)]
    bind: SocketAddrV4,
    #[command(flatten)]
    key: super::KeyArgs,
    /// An input link: the address packets come from (an endpoint or an
    /// upstream hop); repeat for each.
    #[arg(long = "input", required = true)]
    inputs: Vec<SocketAddrV4>,
    /// PROC=ADDR: where messages to process PROC go next (its endpoint or
    /// the next hop); repeat for each process.
    #[arg(long = "route", required = true, value_parser = super::parse_route)]
    routes: Vec<(u32, SocketAddrV4)>,
    /// Beacon interval, µs: an output idle this long gets a beacon.
    #[arg(long, default_value_t = 100)]
    beacon_us: u64,
    /// An input silent this many beacon intervals is removed.
    #[arg(long, default_value_t = 10)]
    dead_after: u32,
    /// Keep a silent input holding the barriers (reliable mode: its
    /// uncommitted messages must be discarded everywhere first) until a
    /// --coordinator removes it.
    #[arg(long)]
    hold_silent: bool,
    /// A recovery coordinator (`xlane pipe coordinator --bind`): held
    /// silent inputs are reported to it every 20 ms until one removes
    /// them. Repeat for each replica.
    #[arg(long = "coordinator")]
    coordinators: Vec<SocketAddrV4>,
    /// DSCP of everything the hop sends (0: best effort; 46, the
    /// testbed's express class, puts barriers and beacons on the lane).
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u8).range(0..64))]
    dscp: u8,
    /// Take beacons from the express lane on this address (the hop
    /// host's address and a lane port): the processes' beacons come as
    /// lane frames on their --lane-in tunnels, by maximum (they may
    /// overtake data), and with --lane-out the hop's beacons go out on its
    /// own tunnel instead of the regular path.
    #[arg(long)]
    lane_bind: Option<SocketAddrV4>,
    /// TUNNEL:PERIOD_US: a process's beacon tunnel to this hop's host, as
    /// the controller granted it (`xlane ctl request --to HOP_HOST
    /// --bytes 110`); repeat for each process.
    #[arg(long = "lane-in", value_parser = parse_lane_in, requires = "lane_bind")]
    lane_in: Vec<LaneTunnel>,
    /// TUNNEL:PERIOD_US@ADDR: the hop's own beacon tunnel and where its
    /// frames go (a multicast tunnel to the processes' hosts: its group,
    /// 239.78.x.y from the tunnel id, and the processes' lane port).
    #[arg(long, value_parser = parse_lane_out, requires = "lane_bind")]
    lane_out: Option<(LaneTunnel, SocketAddrV4)>,
    /// DSCP of the lane tunnels' sub-lane (the testbed's express class is
    /// 46).
    #[arg(long, default_value_t = 46, value_parser = clap::value_parser!(u8).range(0..64))]
    lane_dscp: u8,
    /// W, µs: a lane beacon carries no more than the barriers of the
    /// oldest packet forwarded in the last W (about the regular path's
    /// p99.9 delay), so it never overtakes what was forwarded before it
    /// unless that packet is slower than W.
    #[arg(long, default_value_t = 2_000)]
    lane_window_us: u64,
    /// Seconds between status lines (0: only the final one).
    #[arg(long, default_value_t = 0)]
    status_every: u64,
    /// Stop after this many seconds (0: until SIGTERM/SIGINT).
    #[arg(long, default_value_t = 0)]
    seconds: u64,
}

/// `TUNNEL:PERIOD_US`.
pub(super) fn parse_lane_in(s: &str) -> Result<LaneTunnel, String> {
    let bad = || format!("bad lane tunnel {s:?}: expected TUNNEL:PERIOD_US, like 12:500");
    let (t, p) = s.split_once(':').ok_or_else(bad)?;
    let period_us: u64 = p.parse().map_err(|_| bad())?;
    if period_us == 0 {
        return Err(format!(
            "lane tunnel {s:?}: the period must be at least 1 µs"
        ));
    }
    Ok(LaneTunnel {
        tunnel: t.parse().map_err(|_| bad())?,
        period_ns: period_us * 1_000,
    })
}

/// `TUNNEL:PERIOD_US@IPv4:PORT`.
pub(super) fn parse_lane_out(s: &str) -> Result<(LaneTunnel, SocketAddrV4), String> {
    let bad = || {
        format!(
            "bad lane tunnel {s:?}: expected TUNNEL:PERIOD_US@IPv4:PORT, like 12:500@239.78.0.12:7500"
        )
    };
    let (t, a) = s.split_once('@').ok_or_else(bad)?;
    Ok((parse_lane_in(t)?, a.parse().map_err(|_| bad())?))
}

/// Runs the `pipe` subcommand.
pub fn run(a: Args) -> CmdResult {
    match a.cmd {
        Cmd::Switchd(s) => switchd(s),
        Cmd::Coordinator(c) => super::pipe_coord::run(c),
    }
}

fn switchd(a: SwitchdArgs) -> CmdResult {
    if a.beacon_us == 0 || a.dead_after == 0 {
        return Err("--beacon-us and --dead-after must be at least 1".into());
    }
    if a.coordinators.is_empty() == a.hold_silent {
        return Err(match a.hold_silent {
            true => "--hold-silent needs a --coordinator to remove held inputs",
            false => "--coordinator needs --hold-silent (best effort removes silent inputs itself)",
        }
        .into());
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
    hop.set_coordinators(a.coordinators.clone());
    if let Some((ring, id)) = a.key.ring("1Pipe datagrams", a.bind.into())? {
        hop.set_key(ring, id)
            .map_err(|e| format!("--key-id: {e}"))?;
    }
    if let Some(bind) = a.lane_bind {
        for (i, t) in a.lane_in.iter().enumerate() {
            if a.lane_in[..i].iter().any(|u| u.tunnel == t.tunnel) {
                return Err(format!("--lane-in: tunnel {} given twice", t.tunnel).into());
            }
        }
        hop.set_lane(&LanePortConfig {
            bind,
            join: None,
            multicast_if: a
                .lane_out
                .filter(|(_, to)| to.ip().is_multicast())
                .map(|_| *bind.ip()),
            dscp: a.lane_dscp,
            tx: a.lane_out,
            rx: a.lane_in.clone(),
            window_ns: a.lane_window_us * 1_000,
        })
        .map_err(|e| format!("--lane-bind {bind}: {e}"))?;
    }
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
            "lane": a.lane_bind.map(|b| serde_json::json!({
                "bind": b.to_string(),
                "in": a.lane_in.iter().map(|t| t.tunnel).collect::<Vec<_>>(),
                "out": a.lane_out.map(|(t, to)| serde_json::json!({"tunnel": t.tunnel, "to": to.to_string()})),
            })),
        })
    );
    super::status_loop(
        &mut hop,
        stop,
        a.status_every,
        a.seconds,
        |hop| {
            hop.wait(Duration::from_millis(50))?;
            while let Some(addr) = hop.poll_removed() {
                println!(
                    "{}",
                    serde_json::json!({"event": "removed", "input": addr.to_string(), "by": "coordinator"})
                );
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

fn status(h: &UdpHop, event: &str, t: Duration) -> serde_json::Value {
    let d = h.stats();
    let (barrier, commit) = h.core().barriers();
    let lane = h.lane_stats().map(|l| {
        serde_json::json!({
            "sent": l.sent,
            "send_errors": l.send_errors,
            "received": l.received,
            "refused": l.refused,
            "lost": l.lost,
            "capped": l.capped,
        })
    });
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
        "lane": lane,
    })
}
