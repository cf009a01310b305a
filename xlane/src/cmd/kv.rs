//! `xlane kv`: a Redis-compatible (RESP2) key-value server.
//!
//! * `xlane kv serve` — serves GET/SET/INCR/EXPIRE/... to any Redis client
//!   (redis-cli, redis-benchmark, client libraries) on one node, optionally
//!   with an append-only file. Prints one JSON line
//!   `{"event":"ready",...}` once listening; runs until killed.

use std::path::PathBuf;
use std::sync::Arc;
use xlane_kv::replicator::{FsyncPolicy, LocalReplicator, Replicator};
use xlane_kv::resp::Limits;
use xlane_kv::server::Server;

/// Arguments of `xlane kv`.
#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(clap::Subcommand)]
enum Cmd {
    /// Serve the Redis protocol (RESP2) on TCP, single node.
    ///
    /// Commands: GET SET(NX XX EX PX EXAT PXAT KEEPTTL GET) DEL EXISTS INCR
    /// DECR INCRBY DECRBY MGET MSET APPEND STRLEN EXPIRE PEXPIRE EXPIREAT
    /// PEXPIREAT PERSIST TTL PTTL PING ECHO INFO DBSIZE FLUSHDB FLUSHALL
    /// COMMAND CONFIG(GET) SELECT(0) HELLO(2) CLIENT QUIT. One database,
    /// strings only. Runs until killed; with --aof the data survives a
    /// restart.
    Serve(ServeArgs),
}

#[derive(clap::Args)]
struct ServeArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:6380")]
    bind: String,
    /// Append-only file: every write is appended before it is acknowledged
    /// and the file is replayed at start (a torn tail is cut and reported).
    /// Without it the data lives in memory only.
    #[arg(long)]
    aof: Option<PathBuf>,
    /// When the append-only file is fsynced: before each reply (always),
    /// once a second (everysec), or by the OS (never).
    #[arg(long, default_value = "everysec", value_parser = ["always", "everysec", "never"])]
    appendfsync: String,
    /// Largest bulk string a client may send, in bytes (requests above it
    /// get an error and the connection is closed).
    #[arg(long, default_value_t = 512 << 20)]
    max_bulk: usize,
}

/// Runs `xlane kv`.
pub fn run(args: Args) -> super::CmdResult {
    match args.cmd {
        Cmd::Serve(a) => serve(a),
    }
}

fn serve(a: ServeArgs) -> super::CmdResult {
    let policy: FsyncPolicy = a.appendfsync.parse()?;
    let (repl, replayed): (Arc<dyn Replicator>, Option<xlane_kv::replicator::Replay>) = match &a.aof
    {
        Some(path) => {
            let (r, replay) = LocalReplicator::with_aof(path, policy)?;
            if replay.truncated_bytes > 0 {
                eprintln!(
                    "xlane kv: warning: {}: cut {} bytes of torn or corrupt tail after {} ops",
                    path.display(),
                    replay.truncated_bytes,
                    replay.ops
                );
            }
            (Arc::new(r), Some(replay))
        }
        None => (Arc::new(LocalReplicator::in_memory()), None),
    };
    let limits = Limits {
        max_bulk: a.max_bulk,
        ..Limits::default()
    };
    let server = Server::bind(&a.bind, repl, limits)?;
    let addr = server.local_addr()?;
    println!(
        "{}",
        serde_json::json!({
            "event": "ready",
            "bind": addr.to_string(),
            "aof": a.aof.as_ref().map(|p| p.display().to_string()),
            "appendfsync": a.appendfsync,
            "replayed_ops": replayed.as_ref().map(|r| r.ops),
            "truncated_bytes": replayed.as_ref().map(|r| r.truncated_bytes),
        })
    );
    server.serve()?;
    Ok(())
}
