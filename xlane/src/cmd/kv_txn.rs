//! `xlane kv txn-proxy` and `xlane kv txn-shard`: transactions across
//! shards (Raft groups), ordered by 1Pipe (`xlane_kv::xshard`).

use super::CmdResult;
use std::net::{SocketAddr, SocketAddrV4, TcpListener};
use std::time::Duration;
use xlane_host::tuning::install_termination_flag;
use xlane_kv::xshard::{proxy, shard};

/// Arguments of `xlane kv txn-proxy`.
#[derive(clap::Args)]
pub struct ProxyArgs {
    #[command(flatten)]
    key: super::KeyArgs,
    /// Address to serve RESP on.
    #[arg(long, default_value = "127.0.0.1:6390")]
    bind: SocketAddr,
    /// Client connections served at once; one more gets Redis's `-ERR max
    /// number of clients reached`. One thread serves every client (an
    /// event loop).
    #[arg(long, default_value_t = 1000)]
    maxclients: usize,
    /// This proxy's 1Pipe process id: above --shards (the appliers are
    /// 1..=shards), unique among the proxies.
    #[arg(long)]
    id: u32,
    /// How many shards (each a `xlane kv serve` group with its own
    /// `xlane kv txn-shard`); a key's shard is its hash slot modulo this.
    #[arg(long)]
    shards: u32,
    /// The proxy's 1Pipe endpoint (give it to the hop as an --input and a
    /// --route, and to each txn-shard as a --proxy).
    #[arg(long)]
    pipe: SocketAddrV4,
    /// Where the shards send their replies (port 0: any).
    #[arg(long)]
    replies: SocketAddrV4,
    /// The 1Pipe hop (`xlane pipe switchd --bind`).
    #[arg(long)]
    hop: SocketAddrV4,
    /// 1Pipe beacon interval in microseconds (as the hop's --beacon-us).
    #[arg(long, default_value_t = 1000)]
    beacon_us: u64,
    /// How long a request waits for its shards, in milliseconds; a shard
    /// silent that long answers `TRYAGAIN outcome unknown`.
    #[arg(long, default_value_t = 5000)]
    reply_timeout_ms: u64,
    /// A 1Pipe recovery coordinator (`xlane pipe coordinator --bind`)
    /// whose proc_fail it obeys; repeat for each replica. Needed with a hop
    /// that holds silent links (`switchd --hold-silent`).
    #[arg(long = "coordinator")]
    coordinators: Vec<SocketAddrV4>,
    /// The clock 1Pipe stamps with, the same in every proxy and shard:
    /// `monotonic` when everything runs on one machine, `tai` across
    /// hosts whose clocks PTP keeps together (docs/pipe.md, "Clocks").
    #[arg(long, default_value = "monotonic", value_parser = ["monotonic", "tai"])]
    clock: String,
}

/// Arguments of `xlane kv txn-shard`.
#[derive(clap::Args)]
pub struct ShardArgs {
    #[command(flatten)]
    key: super::KeyArgs,
    /// The shard's index, 0-based (its 1Pipe process id is this + 1).
    #[arg(long)]
    shard: u32,
    /// The applier's 1Pipe endpoint (an --input and a --route of the hop).
    #[arg(long)]
    pipe: SocketAddrV4,
    /// The 1Pipe hop (`xlane pipe switchd --bind`).
    #[arg(long)]
    hop: SocketAddrV4,
    /// A proxy, `ID=IPv4:PORT` (its --id and --pipe): where ACKs go.
    /// Repeat for every proxy.
    #[arg(long = "proxy", required = true, value_parser = super::parse_route)]
    proxies: Vec<(u32, SocketAddrV4)>,
    /// A member of the shard's Raft group (its RESP address). Repeat for
    /// every member; the applier follows -MOVED to the leader.
    #[arg(long = "member", required = true)]
    members: Vec<SocketAddr>,
    /// 1Pipe beacon interval in microseconds (as the hop's --beacon-us).
    #[arg(long, default_value_t = 1000)]
    beacon_us: u64,
    /// One round trip to a member at most, in milliseconds, before the
    /// applier tries another.
    #[arg(long, default_value_t = 1000)]
    timeout_ms: u64,
    /// A 1Pipe recovery coordinator (`xlane pipe coordinator --bind`)
    /// whose proc_fail it obeys; repeat for each replica. Needed with a hop
    /// that holds silent links (`switchd --hold-silent`).
    #[arg(long = "coordinator")]
    coordinators: Vec<SocketAddrV4>,
    /// The clock 1Pipe stamps with, the same in every proxy and shard:
    /// `monotonic` when everything runs on one machine, `tai` across
    /// hosts whose clocks PTP keeps together (docs/pipe.md, "Clocks").
    #[arg(long, default_value = "monotonic", value_parser = ["monotonic", "tai"])]
    clock: String,
    /// The measured bound on clock skew between any two hosts, µs (with
    /// --clock tai). Parts run only once this host's clock passes their
    /// timestamp plus the bound: transactions are then ordered as they
    /// happened in real time (strictly serializable), at the price of the
    /// bound in latency. Without it: serializable.
    #[arg(long)]
    skew_us: Option<u64>,
}

fn clock_of(name: &str) -> xlane_pipe::udp::Clock {
    match name {
        "tai" => xlane_pipe::udp::Clock::Tai,
        _ => xlane_pipe::udp::Clock::Monotonic,
    }
}

fn ready_line(v: serde_json::Value) {
    println!("{v}");
}

/// Runs `xlane kv txn-proxy`.
pub fn proxy(a: ProxyArgs) -> CmdResult {
    if a.shards == 0 {
        return Err("--shards must be at least 1".into());
    }
    if a.id <= a.shards {
        return Err(format!(
            "--id {} is an applier's id: the appliers of {} shards are 1..={}, take one above",
            a.id, a.shards, a.shards
        )
        .into());
    }
    if a.beacon_us == 0 {
        return Err("--beacon-us must be at least 1".into());
    }
    let listener = TcpListener::bind(a.bind).map_err(|e| format!("--bind {}: {e}", a.bind))?;
    let cfg = proxy::ProxyConfig {
        id: a.id,
        shards: a.shards,
        pipe: a.pipe,
        replies: a.replies,
        hop: a.hop,
        beacon: Duration::from_micros(a.beacon_us),
        reply_timeout: Duration::from_millis(a.reply_timeout_ms.max(1)),
        coordinators: a.coordinators.clone(),
        clock: clock_of(&a.clock),
        key: a
            .key
            .ring("1Pipe datagrams and shard replies", a.pipe.into())?,
        max_clients: a.maxclients.max(1),
    };
    let stop = install_termination_flag();
    let bind = listener.local_addr()?;
    let stats = proxy::run(&cfg, listener, stop, || {
        ready_line(serde_json::json!({
            "event": "ready", "role": "txn-proxy", "bind": bind.to_string(),
            "id": a.id, "shards": a.shards, "pipe": a.pipe.to_string(),
        }))
    })
    .map_err(|e| format!("txn-proxy: {e}"))?;
    ready_line(serde_json::json!({
        "event": "stopped", "requests": stats.requests, "answered": stats.answered,
        "unknown": stats.unknown, "aborted": stats.aborted, "stray_replies": stats.stray_replies,
        "unauthenticated": stats.unauthenticated, "rejected": stats.rejected,
    }));
    Ok(())
}

/// Runs `xlane kv txn-shard`.
pub fn shard(a: ShardArgs) -> CmdResult {
    if a.beacon_us == 0 {
        return Err("--beacon-us must be at least 1".into());
    }
    if let Some((id, _)) = a.proxies.iter().find(|(id, _)| *id == a.shard + 1) {
        return Err(format!("--proxy {id}: that is this shard's own 1Pipe id").into());
    }
    let cfg = shard::ShardConfig {
        shard: a.shard,
        pipe: a.pipe,
        hop: a.hop,
        proxies: a.proxies.iter().copied().collect(),
        members: a.members.clone(),
        beacon: Duration::from_micros(a.beacon_us),
        timeout: Duration::from_millis(a.timeout_ms.max(1)),
        coordinators: a.coordinators.clone(),
        clock: clock_of(&a.clock),
        skew: a.skew_us.map(Duration::from_micros),
        key: a.key.ring("1Pipe datagrams", a.pipe.into())?,
    };
    let stop = install_termination_flag();
    let stats = shard::run(&cfg, stop, || {
        ready_line(serde_json::json!({
            "event": "ready", "role": "txn-shard", "shard": a.shard,
            "pipe": a.pipe.to_string(), "members": a.members.len(),
            "clock": a.clock, "skew_us": a.skew_us,
        }))
    })
    .map_err(|e| format!("txn-shard {}: {e}", a.shard))?;
    ready_line(serde_json::json!({
        "event": "stopped", "delivered": stats.delivered, "malformed": stats.malformed,
        "applied": stats.applier.applied, "retries": stats.applier.retries,
        "replies_lost": stats.applier.replies_lost, "reply_errors": stats.reply_errors,
        "unauthenticated": stats.unauthenticated,
    }));
    Ok(())
}
