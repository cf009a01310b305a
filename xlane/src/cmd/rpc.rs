//! `xlane rpc`: R2P2 on the regular lane.
//!
//! * `xlane rpc router --bind ADDR --server ADDR ... [--policy P]` routes
//!   REQ0 to the servers (`random`, `round-robin`, `jsq`, `jbsq:N`),
//!   freed by their FEEDBACK; prints `{"event":"ready",...}` once bound, a
//!   status line every `--status-every` seconds and a final one at the stop
//!   (SIGTERM, SIGINT or `--seconds`).

use super::CmdResult;
use clap::{Parser, Subcommand};
use std::net::SocketAddrV4;
use std::time::Duration;
use xlane_host::tuning::install_termination_flag;
use xlane_rpc::admission::{ControllerKind, Slo};
use xlane_rpc::router::{AdmissionConfig, Policy, RouterConfig};
use xlane_rpc::udp::RpcRouter;

/// R2P2 request-reply RPCs (see docs/rpc.md).
#[derive(Parser)]
pub struct Args {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// The R2P2 router: clients send each request's first packet (REQ0) to
    /// it; it forwards the packet to a server picked by --policy, as sent by
    /// the client (a raw IPv4 socket: needs root or CAP_NET_RAW), so the
    /// server answers the client directly; the rest of a request and the
    /// reply never cross the router. Servers send it a FEEDBACK after each
    /// reply (xlane's R2P2 server with feedback_to set to --bind). A
    /// retransmitted REQ0 goes to the server that took the first. A new
    /// request gets a DROP when --max-tracked requests are tracked or
    /// --max-queued wait.
    Router(RouterArgs),
}

#[derive(Parser)]
struct RouterArgs {
    /// Address clients send REQ0 to and servers FEEDBACK to (IPv4).
    #[arg(long)]
    bind: SocketAddrV4,
    /// A server (IPv4 address and port); repeat for each.
    #[arg(long = "server", required = true)]
    servers: Vec<SocketAddrV4>,
    /// random, round-robin (rr), jsq (fewest outstanding requests), or
    /// jbsq:N (as jsq, at most N outstanding per server; the rest wait at
    /// the router, first come first served).
    #[arg(long, default_value = "jbsq:1")]
    policy: Policy,
    /// Seed of random picks and tie breaks.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Requests tracked at most (outstanding, remembered for
    /// retransmissions, or waiting).
    #[arg(long, default_value_t = 65_536)]
    max_tracked: usize,
    /// Requests waiting at the router at most (jbsq:N).
    #[arg(long, default_value_t = 4_096)]
    max_queued: usize,
    /// A request stops counting against its server this many milliseconds
    /// after its forwarding if no FEEDBACK came (a few times the longest
    /// service time).
    #[arg(long, default_value_t = 100)]
    feedback_timeout_ms: u64,
    /// A finished request's server is remembered this many milliseconds,
    /// for retransmitted REQ0s (at least the clients' request timeout).
    #[arg(long, default_value_t = 1_000)]
    sticky_ms: u64,
    /// SLO-aware admission control (SVEN): the objective, pQ=DURATION
    /// (p99=10ms). New requests the controller turns away get DROP at
    /// once, before --policy runs. Latency is measured from a REQ0's
    /// arrival to its FEEDBACK.
    #[arg(long)]
    slo: Option<Slo>,
    /// The admission controller: cap (default: a bound on outstanding
    /// requests, moved toward the bound that meets the SLO) or aiad
    /// (SVEN's Listing 1: a drop rate stepped by 0.01 per period).
    #[arg(long, default_value = "cap", requires = "slo")]
    admission: ControllerKind,
    /// The admission controller's period, ms.
    #[arg(long, default_value_t = 20, requires = "slo")]
    admission_period_ms: u64,
    /// Request classes never dropped by admission control, comma-separated
    /// (a class is the REQ0's R2P2 policy value: 0, or 2 to 15 as the
    /// application sets them; each other class has its own controller).
    #[arg(long, value_delimiter = ',', requires = "slo")]
    never_drop: Vec<u8>,
    /// Seconds between status lines (0: only the final one).
    #[arg(long, default_value_t = 0)]
    status_every: u64,
    /// Stop after this many seconds (0: until SIGTERM/SIGINT).
    #[arg(long, default_value_t = 0)]
    seconds: u64,
}

/// Runs the `rpc` subcommand.
pub fn run(a: Args) -> CmdResult {
    match a.cmd {
        Cmd::Router(r) => router(r),
    }
}

fn router(a: RouterArgs) -> CmdResult {
    if a.servers.contains(&a.bind) {
        return Err(format!("--server {} is the router's own --bind", a.bind).into());
    }
    let mut never_drop = 0u16;
    for &c in &a.never_drop {
        if !xlane_rpc::wire::policy::is_load_balanced(c) {
            return Err(format!(
                "--never-drop {c}: a class is 0 or 2 to 15 (1 is FIXED_ROUTE, never load-balanced)"
            )
            .into());
        }
        never_drop |= 1 << c;
    }
    let cfg = RouterConfig {
        servers: a.servers.clone(),
        policy: a.policy,
        seed: a.seed,
        max_tracked: a.max_tracked.max(1),
        max_queued: a.max_queued,
        feedback_timeout_ns: a.feedback_timeout_ms.max(1) * 1_000_000,
        sticky_ns: a.sticky_ms * 1_000_000,
        admission: a.slo.map(|slo| AdmissionConfig {
            period_ns: a.admission_period_ms.max(1) * 1_000_000,
            never_drop,
            ..AdmissionConfig::new(slo, a.admission)
        }),
    };
    let mut r = RpcRouter::bind(a.bind, cfg).map_err(|e| format!("router on {}: {e}", a.bind))?;
    let stop = install_termination_flag();
    println!(
        "{}",
        serde_json::json!({
            "event": "ready",
            "bind": r.local_addr().to_string(),
            "policy": a.policy.to_string(),
            "slo": a.slo.map(|s| s.to_string()),
            "servers": a.servers.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
        })
    );
    super::status_loop(
        &mut r,
        stop,
        a.status_every,
        a.seconds,
        |r| Ok(r.wait(Duration::from_millis(50))?),
        status,
    )
}

fn status(r: &RpcRouter, event: &str, t: Duration) -> serde_json::Value {
    let s = r.core().stats();
    let d = r.stats();
    serde_json::json!({
        "event": event,
        "seconds": t.as_secs_f64(),
        "forwarded": s.forwarded,
        "retransmits": s.retransmits,
        "duplicate_waiting": s.duplicate_waiting,
        "queued": s.queued,
        "waiting": r.core().waiting(),
        "dropped": s.dropped,
        "feedbacks": s.feedbacks,
        "feedback_timeouts": s.feedback_timeouts,
        "refused": s.refused,
        "send_errors": d.send_errors,
        "admission_drops": s.admission_drops,
        "admission_classes": (0..xlane_rpc::wire::policy::COUNT as u8)
            .filter_map(|c| {
                let ctl = r.core().admission(c)?;
                let i = usize::from(c);
                (s.requests_by_class[i] > 0).then(|| serde_json::json!({
                    "class": c,
                    "requests": s.requests_by_class[i],
                    "drops": s.admission_drops_by_class[i],
                    "drop_rate": ctl.drop_rate(),
                    "cap": ctl.cap(),
                }))
            })
            .collect::<Vec<_>>(),
        "servers": r.core().config().servers.iter().enumerate().map(|(i, a)| serde_json::json!({
            "addr": a.to_string(),
            "forwarded": s.per_server[i],
            "outstanding": r.core().outstanding()[i],
        })).collect::<Vec<_>>(),
    })
}
