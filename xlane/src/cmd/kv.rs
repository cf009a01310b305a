//! `xlane kv`: a Redis-compatible (RESP2 and RESP3) key-value server.
//!
//! * `xlane kv serve` — serves GET/SET/INCR/EXPIRE/... to any Redis client
//!   (redis-cli, redis-benchmark, client libraries), either on one node (a
//!   raft group of one member, its log the append-only file) or, with
//!   `--peer`, as a member of a Raft-replicated cluster (X-Raft over UDP/TCP
//!   or the lane). Both are served by the same event loop. Prints one JSON line
//!   `{"event":"ready",...}` once listening; runs until SIGTERM/SIGINT
//!   (then a clean stop and `{"event":"stopped",...}`) or until killed.
//! * `xlane kv txn-proxy` / `xlane kv txn-shard` — transactions across
//!   shards (Raft groups) ordered by 1Pipe (`kv_txn`).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use xlane_kv::raft::{
    parse_peer, timeouts_from_bounds, LaneTiming, LogFsync, Peer, RaftConfig, RaftReplicator,
    StorageConfig, Tree,
};
use xlane_kv::resp::Limits;
use xlane_kv::session::Stats;
use xlane_xraft_net::session::{Grant, Session, SessionConfig, SessionEvent, WAIT_FOR_CONTROLLER};

/// Arguments of `xlane kv`.
#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(clap::Subcommand)]
enum Cmd {
    /// Serve the Redis protocol (RESP2 and RESP3) on TCP: single node, or replicated.
    ///
    /// Without --peer: a single node, which is a raft group of one member
    /// (id 1) served by the same event loop as a cluster member; its raft
    /// log in --data is its append-only file (a restart on the same
    /// directory recovers the data), or, without --data, a fresh directory
    /// in /dev/shm removed at a clean stop (the data lives in memory only).
    /// It needs no raft address: its raft socket binds an ephemeral
    /// loopback port and sends nothing. With --peer
    /// (one per member, this node included) and --id: a Raft cluster
    /// member. The cluster bootstraps itself the first time the members
    /// start with empty --data directories; a restarted member recovers
    /// from its directory and catches up from the leader. Writes on a
    /// follower get `-MOVED <slot> <leader RESP address>` (`redis-cli -c`
    /// follows it); reads on any member are linearizable (Raft ReadIndex,
    /// confirmed by the leader). Raft messages go over UDP on the raft
    /// address (datagrams of at most 1400 bytes) or, with --transport lane,
    /// over the lane; snapshots and messages over 16 KiB go over TCP to the
    /// same port. A member serves its clients on its raft thread: one event
    /// loop per member, as in Redis.
    ///
    /// Membership changes while the cluster runs: start the new member with
    /// --join, then send `RAFT.NODE ADD <id> <raft ip:port>/<resp ip:port>`
    /// to the leader (any member redirects with -MOVED); `RAFT.NODE REMOVE
    /// <id>` removes one, `RAFT.NODES` lists them. The member addresses
    /// travel in the raft log and snapshots: --peer is only where a member
    /// starts from.
    ///
    /// Commands: Redis 7.0's strings, bitmaps, HyperLogLog, keys and
    /// expiry (DUMP/RESTORE, SORT, OBJECT), hashes, lists, sets, sorted sets,
    /// geo, streams (consumer groups included), blocking pops (BLPOP ...
    /// BZMPOP, XREAD/XREADGROUP BLOCK), transactions, pub/sub (sharded
    /// too), access control (AUTH, ACL, --requirepass, --aclfile), CLIENT
    /// (TRACKING ...), CONFIG, INFO, COMMAND, HELLO 2/3, RESET, SHUTDOWN,
    /// MONITOR, ROLE, WAIT (how many other members hold the connection's
    /// writes); CLUSTER(SLOTS SHARDS NODES INFO MYID KEYSLOT),
    /// RAFT.NODE(ADD REMOVE) RAFT.NODES RAFT.TRANSFER_LEADER; scripts and
    /// functions (EVAL, EVALSHA, SCRIPT, FUNCTION, FCALL: Lua 5.1, one
    /// replicated op per script). RESP over TLS beside the plain port with
    /// --tls-port. The whole list with how each is replicated is
    /// docs/kv-commands.md. One database. Runs until SIGTERM
    /// or SIGINT, which stop it cleanly (the raft log written and fsynced,
    /// controller tunnels given back, exit status 0), or until killed.
    Serve(Box<ServeArgs>),
    /// The RESP front of a sharded deployment: multi-key commands
    /// (MSET, MGET, DEL, UNLINK, EXISTS, TOUCH) and MULTI/EXEC whose keys
    /// live on different shards run atomically and serializably, ordered
    /// by 1Pipe. A key's shard is its hash slot modulo --shards. Each
    /// request becomes one reliable 1Pipe scattering, one part per shard
    /// it touches, through the hop (`xlane pipe switchd`) to every shard's
    /// `xlane kv txn-shard`. Commands without a key (DBSIZE, KEYS, ...),
    /// WATCH and pub/sub are refused: send those to a shard. Every
    /// command of a MULTI is checked as it is queued (an unknown command
    /// or a wrong arity makes EXEC abort, as in Redis). A shard's part must
    /// fit one 1Pipe message (about 1.4 KB). Design: docs/pipe.md.
    TxnProxy(super::kv_txn::ProxyArgs),
    /// A shard's 1Pipe receiver: runs the parts of transactions it
    /// delivers, in 1Pipe's order, on the shard's Raft group (its
    /// --member list, following -MOVED), each as one MULTI/EXEC exactly
    /// once across leader changes (it writes the marker key
    /// __xlane:pipe:<shard> with each part), and answers the proxies.
    TxnShard(super::kv_txn::ShardArgs),
}

#[derive(clap::Args)]
struct ServeArgs {
    /// Address to serve RESP on. Default: this node's client address from
    /// its --peer entry, else 127.0.0.1:6380.
    #[arg(long)]
    bind: Option<String>,
    /// The `default` user's password (Redis' `requirepass`): clients must
    /// `AUTH` first. Every member of a cluster must be given the same.
    #[arg(long, value_name = "PASS")]
    requirepass: Option<String>,
    /// An ACL file (Redis' `aclfile`: `user <name> <rules...>` lines),
    /// loaded at start, read again by `ACL LOAD` and written by `ACL SAVE`.
    /// Every member of a cluster must be given the same file.
    #[arg(long, value_name = "FILE")]
    aclfile: Option<PathBuf>,
    /// Also serve RESP over TLS on this port, at the IP address of --bind
    /// (Redis' `tls-port`; 0 picks a free port, shown in the ready line).
    /// Needs --tls-cert-file and --tls-key-file.
    #[arg(long, value_name = "PORT", requires_all = ["tls_cert_file", "tls_key_file"])]
    tls_port: Option<u16>,
    /// The member's certificate chain for --tls-port (PEM, leaf first).
    #[arg(long, value_name = "FILE", requires = "tls_port")]
    tls_cert_file: Option<PathBuf>,
    /// The private key of --tls-cert-file (PEM: PKCS#8, PKCS#1 or SEC1).
    #[arg(long, value_name = "FILE", requires = "tls_port")]
    tls_key_file: Option<PathBuf>,
    /// CA certificates (PEM) that sign the clients' certificates. With it,
    /// clients must present one (see --tls-auth-clients); without it, none
    /// is asked for.
    #[arg(long, value_name = "FILE", requires = "tls_port")]
    tls_ca_cert_file: Option<PathBuf>,
    /// With --tls-ca-cert-file: whether clients must present a certificate
    /// (yes), may (optional: one presented must be valid) or are not asked
    /// (no), as Redis' `tls-auth-clients` [possible values: yes, no,
    /// optional].
    #[arg(
        long,
        value_name = "yes|no|optional",
        default_value = "yes",
        requires = "tls_ca_cert_file"
    )]
    tls_auth_clients: xlane_kv::tls::AuthClients,
    /// Raft id of this node (cluster mode; must appear in a --peer).
    #[arg(long)]
    id: Option<u64>,
    /// Address the raft UDP socket and TCP listener bind (cluster mode).
    /// Default: this node's raft address from its --peer entry.
    #[arg(long)]
    raft: Option<SocketAddr>,
    /// A cluster member, `ID=RAFT_IP:PORT/RESP_IP:PORT`, e.g.
    /// `1=127.0.0.1:7001/127.0.0.1:6381`. Repeat for every member,
    /// this node included. Raft packets from other addresses are ignored.
    #[arg(long = "peer", value_name = "ID=RAFT/RESP")]
    peers: Vec<String>,
    /// Directory of the raft log and snapshots (created if missing). A
    /// cluster member needs it or --ram-disk; a single node without it
    /// keeps its data in memory only.
    #[arg(long)]
    data: Option<PathBuf>,
    /// When the raft log in --data is fsynced: after every write (always),
    /// once per Raft ready cycle, before the messages and replies that
    /// depend on it (batch), at most once a second and at a clean stop
    /// (everysec, as Redis' appendfsync everysec: a machine crash may lose
    /// the last second of acknowledged writes), or never. Under every
    /// policy a write reaches the log file before it is acknowledged, so a
    /// crash of the process alone loses nothing acknowledged.
    #[arg(long, default_value = "batch", value_parser = ["always", "batch", "everysec", "never"])]
    fsync: String,
    /// Keep a member's raft log in /dev/shm/xlane-kv-<id>-<raft port>
    /// without fsync (as the X-Lane paper's evaluation does) instead of
    /// --data; --fsync is then ignored. The raft port in the name keeps two
    /// clusters on one machine from sharing a log. (A single node without
    /// --data always keeps its log in /dev/shm.)
    #[arg(long, conflicts_with = "data")]
    ram_disk: bool,
    /// How raft's express traffic travels between members: plain UDP on
    /// the raft port, or the lane: a replication sub-lane (DSCP 40) on the
    /// raft port with a period of --lane-period-us, and X-FD heartbeats
    /// (DSCP 46) on the raft port + 1 every --fd-period-us carrying Raft's
    /// heartbeats (commit notices); an X-FD suspicion of the leader starts
    /// an election at once. Snapshots use TCP either way.
    #[arg(long, default_value = "udp", value_parser = ["udp", "lane"])]
    transport: String,
    /// Replication sub-lane period in microseconds (--transport lane).
    #[arg(long, default_value_t = 10)]
    lane_period_us: u64,
    /// X-FD heartbeat period T in microseconds (--transport lane); also
    /// the Raft tick, replacing --tick-ms. Each tick the leader sends a
    /// Raft heartbeat to every follower, so a short T costs CPU: on a
    /// 2-vCPU machine running every member, 1000 raised the 5-replica
    /// write latency 1.7x against 10000 (the default, as --tick-ms).
    #[arg(long, default_value_t = 10_000)]
    fd_period_us: u64,
    /// X-FD threshold Λ in microseconds (--transport lane): a member
    /// silent for T + Λ is suspected, and a suspected leader is replaced
    /// at once. Keep Λ above the longest stall the machine imposes (`xlane
    /// doctor`, or the floor line of any `xlane bench`): on a VM a longer
    /// hypervisor stall of the leader makes it lose leadership.
    #[arg(long, default_value_t = 20_000)]
    fd_lambda_us: u64,
    /// Ask this `xlane ctl serve` controller for the member's tunnels
    /// before the first packet (--transport lane): an X-FD tree to every
    /// other member on the higher sub-lane and a replication tree on the
    /// lower one, σ sized by the burst policy (see --lane-burst-bytes).
    /// Frames carry the granted tunnel ids. The member waits until every
    /// other member holds its trees, then runs the lane at the granted
    /// periods; the announced ranges set the timeouts: Λ is raised to at
    /// least the X-FD tree's announced maximum latency, and
    /// --max-latency-ms is replaced by the largest announced maximum. The
    /// leader's replication tree is resized to carry its appends; a new
    /// period from the controller is followed at once. Tunnels this host
    /// held from an earlier run are released first. A replicated
    /// controller's replicas are given comma-separated: the member uses
    /// whichever serves, and when that connection ends it looks for the
    /// serving one again through the whole list (keeping its grants
    /// meanwhile), then subscribes again and reconciles its trees.
    #[arg(
        long,
        requires = "ctl_keys",
        value_name = "ADDR[,ADDR...]",
        value_delimiter = ','
    )]
    controller: Vec<SocketAddr>,
    /// Burst policy of the lane trees (--controller): a leader's
    /// replication frame carries an append of this many bytes of entries
    /// (each entry's data plus 24 bytes of framing) to every follower; a
    /// follower's carries one append response; an X-FD frame the heartbeat
    /// and one commit notice to every other member. What does not fit
    /// waits for the next period.
    #[arg(long, default_value_t = 256)]
    lane_burst_bytes: usize,
    /// Send each lane frame once, to its tree's multicast group, and let
    /// the network replicate it (--controller with a fabric that builds the
    /// trees, e.g. `xlane ctl serve --testbed`); every member must use the
    /// same raft port. Without it the member sends a copy to every peer.
    #[arg(long, requires = "controller")]
    lane_multicast: bool,
    /// How long a member waits at start for the others to hold their trees
    /// at the controller, seconds.
    #[arg(long, default_value_t = 60)]
    ctl_wait_s: u64,
    /// Keys file (`xlane ctl keygen`) holding this member's controller key.
    #[arg(long, value_name = "FILE")]
    ctl_keys: Option<PathBuf>,
    /// Seal the lane frames with each tree's own key from the controller
    /// (`TunnelKey`, fetched for this member's trees and every tree it
    /// receives) instead of a cluster key file.
    #[arg(long, requires = "controller", conflicts_with = "key_file")]
    tree_keys: bool,
    /// The controller's host name of a member, `ID=NAME`; repeat for every
    /// member (default: `kvID`).
    #[arg(long = "ctl-host", value_name = "ID=NAME")]
    ctl_hosts: Vec<String>,
    /// Raft tick (heartbeat) period in milliseconds (cluster mode, UDP).
    #[arg(long, default_value_t = 10)]
    tick_ms: u64,
    /// Join a running cluster as a new member instead of bootstrapping one
    /// (cluster mode): with an empty --data directory (or --ram-disk) the
    /// member starts with no configuration and waits until the leader adds
    /// it (`RAFT.NODE ADD <id> <raft>/<resp>`) and sends it a snapshot over
    /// TCP. Give a --peer for this node and for the running members (at
    /// least the leader). Once the directory holds a log, a restart.
    #[arg(long)]
    join: bool,
    /// Worst-case one-way latency between members in milliseconds; with
    /// the tick it sets the election timeout (3 ticks + 2x this + 1 tick,
    /// randomized up to twice that).
    #[arg(long, default_value_t = 50)]
    max_latency_ms: u64,
    /// Snapshot the store and compact the raft log every this many applied
    /// log entries (0: never). A member too far behind gets the snapshot
    /// (over TCP).
    #[arg(long, default_value_t = 10_000)]
    snapshot_interval: u64,
    /// Also snapshot and compact once the log entries appended since the
    /// last snapshot hold this many MiB (0: no bound by size). The log is
    /// kept in memory: this bounds it where entries are large (pipelined
    /// batches, big values, many PUBLISH).
    #[arg(long, default_value_t = 64)]
    snapshot_log_mib: u64,
    /// Largest bulk string a client may send, in bytes (requests above it
    /// get an error and the connection is closed).
    #[arg(long, default_value_t = 512 << 20)]
    max_bulk: usize,
    /// Authenticate raft traffic with the keys of this cluster key file
    /// (`xlane fd keygen`): over UDP each datagram carries a MAC for the
    /// member it goes to, over the lane each frame (replication and X-FD)
    /// one for the group; a forged, replayed or redirected one is counted
    /// and dropped before raft or the detector reads it.
    #[arg(long)]
    key_file: Option<PathBuf>,
    /// The group's key (every member must hold it).
    #[arg(long, default_value_t = 1, requires = "key_file")]
    key_id: u32,
    /// Serve Prometheus metrics at http://ADDR/metrics: client
    /// connections and commands, the raft leader, raft datagrams and
    /// frames sent, received and refused by reason.
    #[arg(long)]
    metrics: Option<SocketAddr>,
}

/// Runs `xlane kv`.
pub fn run(args: Args) -> super::CmdResult {
    match args.cmd {
        Cmd::Serve(a) => serve(*a),
        Cmd::TxnProxy(a) => super::kv_txn::proxy(a),
        Cmd::TxnShard(a) => super::kv_txn::shard(a),
    }
}

fn serve(a: ServeArgs) -> super::CmdResult {
    let fsync: LogFsync = a.fsync.parse()?;
    if a.peers.is_empty() {
        if a.id.is_some() || a.join || a.raft.is_some() || !a.controller.is_empty() {
            return Err(
                "--id, --join, --raft and --controller are for cluster members: \
                 give a --peer per member (a single node needs none)"
                    .into(),
            );
        }
        if a.transport == "lane" {
            return Err("--transport lane needs cluster members (--peer)".into());
        }
        return serve_single(a, fsync);
    }
    serve_raft(a, fsync)
}

/// A single node: a raft group of one member (id 1), served as a member is.
fn serve_single(a: ServeArgs, fsync: LogFsync) -> super::CmdResult {
    let bind = a.bind.clone().unwrap_or_else(|| "127.0.0.1:6380".into());
    // The client port is bound first so a taken port fails before raft starts.
    let listener = std::net::TcpListener::bind(&bind)?;
    let addr = listener.local_addr()?;
    let (storage, scratch) = match &a.data {
        Some(dir) => {
            let mut s = StorageConfig::new(dir.clone());
            s.fsync = fsync;
            (s, None)
        }
        None => {
            // Memory only: a fresh log directory in /dev/shm, gone at a
            // clean stop (a kill leaves it; its name has the process id).
            let s = StorageConfig::ram_disk(&format!("xlane-kv-single-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&s.dir);
            let dir = s.dir.clone();
            (s, Some(dir))
        }
    };
    std::fs::create_dir_all(&storage.dir).map_err(|e| format!("{}: {e}", storage.dir.display()))?;
    let storage_dir = storage.dir.display().to_string();
    let fsync_name = if scratch.is_some() {
        "never"
    } else {
        a.fsync.as_str()
    };
    let mut cfg = RaftConfig::single(
        addr.to_string(),
        storage,
        a.tick_ms.max(1) * 1_000_000,
        a.max_latency_ms * 1_000_000,
    )?;
    cfg.node.snapshot_interval = a.snapshot_interval;
    cfg.node.snapshot_log_bytes = a.snapshot_log_mib << 20;
    cfg.acl = acl_start(&a);
    cfg.tls = tls_port(&a, addr)?;
    let tls_addr = tls_addr(&cfg);
    let limits = Limits {
        max_bulk: a.max_bulk,
        ..Limits::default()
    };
    let stats = Arc::new(Stats::default());
    let (repl, report) = RaftReplicator::start_serving(cfg, listener, limits, stats.clone())?;
    warn_torn_tail(&report);
    let repl = Arc::new(repl);
    let exporter = serve_metrics(a.metrics, &repl, &stats)?;
    // Whoever reads the ready line may send SIGTERM at once: catch it from
    // before the line (`exit_on_termination` below acts on the flag).
    xlane_host::tuning::install_termination_flag();
    println!(
        "{}",
        serde_json::json!({
            "event": "ready",
            "mode": "single",
            "metrics": exporter.as_ref().map(|e| e.local_addr().to_string()),
            "bind": addr.to_string(),
            "tls": tls_addr,
            "data": a.data.as_ref().map(|_| storage_dir.clone()),
            "log_dir": storage_dir,
            "fsync": fsync_name,
            "log_records_replayed": report.records,
            "snapshot_loaded": report.snapshot_loaded,
        })
    );
    let stopping = Arc::new(AtomicBool::new(false));
    let r = repl.clone();
    exit_on_termination(stopping.clone(), move || {
        r.shutdown();
        if let Some(dir) = &scratch {
            let _ = std::fs::remove_dir_all(dir);
        }
        serde_json::json!({ "log_synced": true })
    });
    watch_driver(&repl, &stopping)
}

/// Starts the `/metrics` endpoint of a member, if asked for.
fn serve_metrics(
    addr: Option<SocketAddr>,
    repl: &Arc<RaftReplicator>,
    stats: &Arc<Stats>,
) -> Result<Option<xlane_metrics::Exporter>, String> {
    let Some(addr) = addr else { return Ok(None) };
    let (r, st) = (repl.clone(), stats.clone());
    xlane_metrics::Exporter::serve(addr, Arc::new(move || kv_metrics(&r, &st)))
        .map(Some)
        .map_err(|e| format!("--metrics {addr}: {e}"))
}

/// The metrics of a member.
fn kv_metrics(repl: &RaftReplicator, stats: &Stats) -> Vec<xlane_metrics::Family> {
    use std::sync::atomic::Ordering::Relaxed;
    use xlane_metrics::{Family, Kind};
    let t = repl.stats();
    let n = |c: &std::sync::atomic::AtomicU64| c.load(Relaxed) as f64;
    let lane = repl.lane_stats().map(|l| {
        Family::by(
            "xlane_raft_lane_refused_total",
            "Lane frames refused, by reason.",
            Kind::Counter,
            "reason",
            &[
                ("unauthenticated", n(&l.unauthenticated)),
                ("invalid", n(&l.refused_frames)),
            ],
        )
    });
    let mut v = vec![
        Family::one(
            "xlane_kv_connections_total",
            "Client connections accepted.",
            Kind::Counter,
            n(&stats.connections),
        ),
        Family::one(
            "xlane_kv_commands_total",
            "Client requests answered.",
            Kind::Counter,
            n(&stats.commands),
        ),
        Family::one(
            "xlane_kv_protocol_errors_total",
            "Client connections closed for a protocol error.",
            Kind::Counter,
            n(&stats.protocol_errors),
        ),
        Family::by(
            "xlane_kv_clients_closed_total",
            "Client connections refused or closed by a limit, by reason.",
            Kind::Counter,
            "reason",
            &[
                ("maxclients", n(&stats.rejected)),
                ("output_buffer_limit", n(&stats.output_limit_closed)),
                ("timeout", n(&stats.idle_closed)),
            ],
        ),
        Family::one(
            "xlane_raft_leader_id",
            "The raft id of the leader this member knows (0: none).",
            Kind::Gauge,
            repl.leader_id() as f64,
        ),
        Family::by(
            "xlane_raft_udp_datagrams_total",
            "Raft datagrams over UDP, by direction.",
            Kind::Counter,
            "direction",
            &[("sent", n(&t.udp_sent)), ("received", n(&t.udp_received))],
        ),
        Family::by(
            "xlane_raft_udp_refused_total",
            "Raft datagrams refused or not sent, by reason.",
            Kind::Counter,
            "reason",
            &[
                ("unknown_sender", n(&t.udp_unknown)),
                ("unauthenticated", n(&t.udp_unauthenticated)),
                ("send_error", n(&t.udp_send_errors)),
            ],
        ),
        Family::by(
            "xlane_raft_tcp_frames_total",
            "Raft messages over TCP (snapshots, large messages), by direction.",
            Kind::Counter,
            "direction",
            &[("sent", n(&t.tcp_sent)), ("received", n(&t.tcp_received))],
        ),
        Family::by(
            "xlane_raft_tcp_refused_total",
            "Raft TCP connections or frames refused, or messages not sent, by reason.",
            Kind::Counter,
            "reason",
            &[
                ("not_a_peer", n(&t.tcp_refused)),
                ("unauthenticated", n(&t.tcp_unauthenticated)),
                ("unknown_sender", n(&t.tcp_unknown)),
                ("dropped", n(&t.tcp_dropped)),
            ],
        ),
    ];
    v.extend(lane);
    v
}

/// The TLS port of `--tls-port` at the IP address of the RESP listener
/// `bound`, its files read first.
fn tls_port(
    a: &ServeArgs,
    bound: SocketAddr,
) -> Result<Option<xlane_kv::tls::TlsPort>, xlane_kv::tls::TlsError> {
    let (Some(port), Some(cert), Some(key)) = (a.tls_port, &a.tls_cert_file, &a.tls_key_file)
    else {
        return Ok(None);
    };
    let files = xlane_kv::tls::TlsFiles {
        cert: cert.clone(),
        key: key.clone(),
        ca: a.tls_ca_cert_file.clone(),
        auth_clients: a.tls_auth_clients,
    };
    xlane_kv::tls::TlsPort::open(SocketAddr::new(bound.ip(), port), files).map(Some)
}

/// The TLS port's address for the ready line.
fn tls_addr(cfg: &RaftConfig) -> Option<String> {
    let port = cfg.tls.as_ref()?;
    port.listener.local_addr().ok().map(|a| a.to_string())
}

/// The users' start settings of `--requirepass` and `--aclfile`.
fn acl_start(a: &ServeArgs) -> xlane_kv::session::AclStart {
    xlane_kv::session::AclStart {
        requirepass: a.requirepass.as_ref().map(|p| p.as_bytes().to_vec()),
        aclfile: a.aclfile.clone(),
    }
}

/// Warns about a torn tail cut from the raft log at start.
fn warn_torn_tail(report: &xlane_kv::raft::OpenReport) {
    if let Some(t) = &report.torn_tail {
        tracing::warn!(
            "raft log {}: cut {} bytes of torn tail at offset {}",
            t.segment.display(),
            t.dropped_bytes,
            t.offset
        );
    }
}

/// The clients are served on the raft driver's thread; this one only
/// watches it until a clean stop takes over.
fn watch_driver(repl: &RaftReplicator, stopping: &AtomicBool) -> super::CmdResult {
    while repl.running() || stopping.load(Ordering::Acquire) {
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    Err("the raft driver stopped (the raft log could not be written)".into())
}

/// On SIGTERM or SIGINT: sets `stopping`, runs `finish` (what a clean stop
/// owes: the raft log written and fsynced, controller tunnels given back),
/// prints a JSON `stopped` line with what it returned, and exits with
/// status 0.
fn exit_on_termination(
    stopping: Arc<AtomicBool>,
    finish: impl FnOnce() -> serde_json::Value + Send + 'static,
) {
    let stop = xlane_host::tuning::install_termination_flag();
    std::thread::spawn(move || {
        while !stop.load(Ordering::Relaxed) {
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        stopping.store(true, Ordering::Release);
        let detail = finish();
        // Whoever read the ready line may have closed stdout since.
        use std::io::Write;
        let _ = writeln!(
            std::io::stdout(),
            "{}",
            serde_json::json!({ "event": "stopped", "detail": detail })
        );
        std::process::exit(0);
    });
}

fn serve_raft(a: ServeArgs, fsync: LogFsync) -> super::CmdResult {
    let id =
        a.id.ok_or("cluster mode needs --id (this node's raft id) and a --peer per member")?;
    let mut peers: BTreeMap<u64, Peer> = BTreeMap::new();
    for p in &a.peers {
        let (pid, peer) = parse_peer(p).map_err(|e| format!("--peer {p:?}: {e}"))?;
        if peers.insert(pid, peer).is_some() {
            return Err(format!("--peer: id {pid} given twice").into());
        }
    }
    let me = peers
        .get(&id)
        .ok_or_else(|| format!("--id {id} has no --peer entry"))?
        .clone();
    let storage = if a.ram_disk {
        StorageConfig::ram_disk(&format!("xlane-kv-{id}-{}", me.raft.port()))
    } else {
        let dir = a
            .data
            .clone()
            .ok_or("cluster mode needs --data DIR (or --ram-disk)")?;
        let mut s = StorageConfig::new(dir);
        s.fsync = fsync;
        s
    };
    std::fs::create_dir_all(&storage.dir).map_err(|e| format!("{}: {e}", storage.dir.display()))?;
    let storage_dir = storage.dir.display().to_string();
    let mut lane = (a.transport == "lane").then(|| LaneTiming {
        repl_period_ns: a.lane_period_us.max(1) * 1_000,
        fd_period_ns: a.fd_period_us.max(1) * 1_000,
        fd_lambda_ns: a.fd_lambda_us * 1_000,
        multicast: a.lane_multicast,
        ..LaneTiming::default()
    });
    let mut max_latency_ns = a.max_latency_ms * 1_000_000;
    let mut grants = Vec::new();
    let mut session = None;
    let mut trees = BTreeMap::new();
    let mut lane_keys = None;
    if !a.controller.is_empty() {
        let timing = lane
            .as_mut()
            .ok_or("--controller allocates lane tunnels: it needs --transport lane")?;
        let keys = a.ctl_keys.as_ref().ok_or("--controller needs --ctl-keys")?;
        let names = controller_names(&a.ctl_hosts, &peers)?;
        let key =
            super::ctl::host_key(keys, &names[&id]).map_err(|e| format!("--ctl-keys: {e}"))?;
        let cfg = SessionConfig {
            controllers: a.controller.clone(),
            key,
            me: id,
            names,
            burst_bytes: a.lane_burst_bytes,
            wait_for_peers: std::time::Duration::from_secs(a.ctl_wait_s),
            wait_for_controller: WAIT_FOR_CONTROLLER,
            sealed: a.key_file.is_some() || a.tree_keys,
            tree_keys: a.tree_keys,
        };
        let o = Session::open(cfg, timing)?;
        max_latency_ns = o.session.bound_ns().max(1);
        grants = o.grants.iter().map(grant_json).collect();
        trees = o.trees;
        lane_keys = o.keys;
        session = Some(o.session);
    }
    let tick_ns = match &lane {
        Some(t) => t.fd_period_ns,
        None => a.tick_ms.max(1) * 1_000_000,
    };
    let mut cfg = RaftConfig::new(id, peers.clone(), storage, tick_ns, max_latency_ns)?;
    let (raft_tick_ns, election_ticks) = (cfg.node.tick_ns, cfg.node.election_ticks);
    cfg.join = a.join;
    cfg.lane = lane;
    cfg.trees = trees;
    cfg.lane_keys = lane_keys;
    if let Some(f) = &a.key_file {
        cfg.auth = Some(xlane_kv::raft::NetAuth {
            ring: super::fd::key_ring(f)?,
            key_id: a.key_id,
        });
    }
    if let Some(r) = a.raft {
        cfg.bind = r;
    }
    cfg.node.snapshot_interval = a.snapshot_interval;
    cfg.node.snapshot_log_bytes = a.snapshot_log_mib << 20;
    cfg.acl = acl_start(&a);
    let bind = a.bind.clone().unwrap_or_else(|| me.client.clone());
    // The client port is bound first so a taken port fails before raft starts.
    let listener = std::net::TcpListener::bind(&bind)?;
    let limits = Limits {
        max_bulk: a.max_bulk,
        ..Limits::default()
    };
    let addr = listener.local_addr()?;
    cfg.tls = tls_port(&a, addr)?;
    let tls_addr = tls_addr(&cfg);
    let stats = Arc::new(Stats::default());
    let (repl, report) = RaftReplicator::start_serving(cfg, listener, limits, stats.clone())?;
    warn_torn_tail(&report);
    let raft_addr = repl.raft_addr();
    let repl = Arc::new(repl);
    let exporter = serve_metrics(a.metrics, &repl, &stats)?;
    // Whoever reads the ready line may send SIGTERM at once: catch it from
    // before the line (`exit_on_termination` below acts on the flag).
    xlane_host::tuning::install_termination_flag();
    println!(
        "{}",
        serde_json::json!({
            "event": "ready",
            "mode": "raft",
            "metrics": exporter.as_ref().map(|e| e.local_addr().to_string()),
            "transport": a.transport,
            "join": a.join,
            "id": id,
            "bind": addr.to_string(),
            "tls": tls_addr,
            "raft": raft_addr.to_string(),
            "peers": peers.iter().map(|(i, p)| serde_json::json!({
                "id": i, "raft": p.raft.to_string(), "client": p.client,
            })).collect::<Vec<_>>(),
            "data": storage_dir,
            "fsync": if a.ram_disk { "never" } else { a.fsync.as_str() },
            "log_records_replayed": report.records,
            "snapshot_loaded": report.snapshot_loaded,
            "max_latency_ns": max_latency_ns,
            "lane": lane.as_ref().map(|t| serde_json::json!({
                "repl_period_ns": t.repl_period_ns,
                "fd_period_ns": t.fd_period_ns,
                "fd_lambda_ns": t.fd_lambda_ns,
                "repl_frame_bytes": t.repl_frame_bytes,
                "fd_frame_bytes": t.fd_frame_bytes,
            })),
            "tunnels": grants,
        })
    );
    if let Some(s) = session {
        repl.group().follow_controller(
            s,
            Box::new(move |e| emit(event_json(&e, raft_tick_ns, election_ticks))),
        )?;
    }
    let stopping = Arc::new(AtomicBool::new(false));
    let r = repl.clone();
    exit_on_termination(stopping.clone(), move || {
        let released = r.group().shutdown();
        let st = r.stats();
        let n = |c: &std::sync::atomic::AtomicU64| c.load(std::sync::atomic::Ordering::Relaxed);
        let udp = serde_json::json!({
            "received": n(&st.udp_received),
            "unknown_sender": n(&st.udp_unknown),
            "unauthenticated": n(&st.udp_unauthenticated),
        });
        let mut out = serde_json::json!({ "log_synced": true, "raft_udp": udp });
        if let Some(l) = r.lane_stats() {
            out["raft_lane"] = serde_json::json!({
                "frames_received": n(&l.repl_frames_received),
                "refused": n(&l.refused_frames),
                "unauthenticated": n(&l.unauthenticated),
            });
        }
        if let Some(t) = released {
            out["tunnels_released"] = serde_json::json!(t);
        }
        out
    });
    watch_driver(&repl, &stopping)
}

/// Every member's controller host name, by raft id.
fn controller_names(
    given: &[String],
    peers: &BTreeMap<u64, Peer>,
) -> Result<BTreeMap<u64, String>, String> {
    let mut names: BTreeMap<u64, String> = peers.keys().map(|&i| (i, format!("kv{i}"))).collect();
    for g in given {
        let (i, name) = g
            .split_once('=')
            .ok_or_else(|| format!("--ctl-host {g:?}: expected ID=NAME"))?;
        let i: u64 = i
            .trim()
            .parse()
            .map_err(|_| format!("--ctl-host {g:?}: {i:?} is not a raft id"))?;
        let name = name.trim();
        if name.is_empty() {
            return Err(format!("--ctl-host {g:?}: empty name"));
        }
        match names.get_mut(&i) {
            Some(n) => *n = name.to_string(),
            None => return Err(format!("--ctl-host {g:?}: no member has id {i}")),
        }
    }
    Ok(names)
}

fn tree_name(t: Tree) -> &'static str {
    match t {
        Tree::Fd => "x-fd",
        Tree::Repl => "replication",
    }
}

/// One grant, for the ready line.
fn grant_json(g: &Grant) -> serde_json::Value {
    serde_json::json!({
        "what": tree_name(g.tree), "tunnel": g.tunnel, "to": g.to,
        "period_ns": g.period_ns, "period_raised": g.period_raised,
        "frame_bytes": g.frame_bytes, "min_latency_ns": g.min_latency_ns,
        "max_latency_ns": g.max_latency_ns,
    })
}

/// A session event as a JSON line: `bandwidth_changed` (with whether
/// Raft's election timeout, fixed at start, still covers every bound),
/// `bandwidth_terminated`, `tree_resized`, `resize_refused`, `peer_trees`,
/// `controller_lost`, `controller_unreachable`, `controller_reconnected`.
fn event_json(e: &SessionEvent, tick_ns: u64, election_ticks: usize) -> serde_json::Value {
    match e {
        SessionEvent::BandwidthChanged {
            tree,
            tunnel,
            reason,
            grace_ns,
            period_ns,
            old_period_ns,
            max_latency_ns,
            old_max_latency_ns,
            fd_lambda_ns,
            bound_ns,
        } => {
            // What Raft would need for the bound now, in ticks.
            let (_, needed, _) = timeouts_from_bounds(tick_ns, *bound_ns);
            let mut v = serde_json::json!({
                "event": "bandwidth_changed", "tunnel": tunnel, "what": tree_name(*tree),
                "reason": format!("{reason:?}"), "grace_ns": grace_ns,
                "max_latency_ns": max_latency_ns, "old_max_latency_ns": old_max_latency_ns,
                "period_ns": period_ns, "old_period_ns": old_period_ns,
                "period_followed": true,
                "election_timeout_holds": needed <= election_ticks,
            });
            if let Some(l) = fd_lambda_ns {
                v["fd_lambda_ns"] = (*l).into();
            }
            v
        }
        SessionEvent::BandwidthTerminated {
            tree,
            tunnel,
            reason,
        } => serde_json::json!({
            "event": "bandwidth_terminated", "tunnel": tunnel, "what": tree_name(*tree),
            "reason": format!("{reason:?}"),
        }),
        SessionEvent::Resized {
            leader,
            period_ns,
            frame_bytes,
            max_latency_ns,
        } => serde_json::json!({
            "event": "tree_resized", "what": "replication", "leader": leader,
            "period_ns": period_ns, "frame_bytes": frame_bytes,
            "max_latency_ns": max_latency_ns,
        }),
        SessionEvent::ResizeRefused { detail } => {
            serde_json::json!({ "event": "resize_refused", "detail": detail })
        }
        SessionEvent::PeerTrees { member, trees } => serde_json::json!({
            "event": "peer_trees", "member": member, "x_fd": trees.fd,
            "replication": trees.repl,
        }),
        SessionEvent::ControllerLost { detail } => {
            serde_json::json!({ "event": "controller_lost", "detail": detail })
        }
        SessionEvent::ControllerUnreachable { detail } => {
            serde_json::json!({ "event": "controller_unreachable", "detail": detail })
        }
        SessionEvent::Reconnected {
            controller,
            kept,
            resynced,
        } => serde_json::json!({
            "event": "controller_reconnected", "controller": controller.to_string(),
            "kept": kept, "resynced": resynced,
        }),
    }
}

/// One JSON line on stdout; a reader that went away is no error.
fn emit(v: serde_json::Value) {
    use std::io::Write;
    let _ = writeln!(std::io::stdout(), "{v}");
}
