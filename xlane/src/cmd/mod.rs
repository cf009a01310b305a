//! One module per subcommand; each has an `Args` (clap) and a `run`.

pub mod bench;
pub mod bench_apps;
pub mod bench_pipe;
pub mod bench_rpc;
pub mod bench_sven;
pub mod bench_te;
pub mod ctl;
pub mod doctor;
pub mod fd;
pub mod host;
pub mod kv;
pub mod kv_txn;
pub mod lancet;
pub mod pipe;
pub mod pipe_coord;
pub mod rpc;
pub mod run;
pub mod testbed;

/// The error type every subcommand returns to `main`.
pub type CmdResult = Result<(), Box<dyn std::error::Error>>;

/// A daemon's group key (`xlane fd keygen` writes the file).
#[derive(clap::Args, Clone, Debug)]
pub struct KeyArgs {
    /// Authenticate this daemon's datagrams with the keys of this cluster
    /// key file (`xlane fd keygen`): every one sent carries a MAC, and
    /// every one received that is forged, replayed or without one is
    /// counted and dropped before it is decoded. Every peer needs it.
    #[arg(long)]
    pub key_file: Option<std::path::PathBuf>,
    /// The key this daemon seals with (every peer must hold it).
    #[arg(long, default_value_t = 1, requires = "key_file")]
    pub key_id: u32,
}

impl KeyArgs {
    /// The ring and key id, if a key file was given; without one, the
    /// warning a daemon listening on `bind` (not loopback) prints, once.
    pub fn ring(
        &self,
        what: &str,
        bind: std::net::SocketAddr,
    ) -> Result<Option<(xlane_auth::KeyRing, u32)>, String> {
        match &self.key_file {
            Some(f) => Ok(Some((fd::key_ring(f)?, self.key_id))),
            None => {
                if let Some(w) = xlane_auth::unkeyed_warning(what, bind, "speak for a peer", "peer")
                {
                    tracing::warn!("{w}");
                }
                Ok(None)
            }
        }
    }
}

/// `PROC=IPv4:PORT`: a 1Pipe process (or proxy) id and its address, as
/// `pipe switchd --route`, `pipe coordinator --process` and `kv txn-shard --proxy`
/// take it.
fn parse_route(s: &str) -> Result<(u32, std::net::SocketAddrV4), String> {
    let bad = || format!("bad route {s:?}: expected PROC=IPv4:PORT, like 3=10.0.0.3:7400");
    let (p, a) = s.split_once('=').ok_or_else(bad)?;
    Ok((p.parse().map_err(|_| bad())?, a.parse().map_err(|_| bad())?))
}

/// A daemon's main loop until SIGTERM/SIGINT (`stop`) or `seconds` (0: no
/// limit): `turn` once per pass (it waits for work itself), a `status`
/// line every `status_every` seconds (0: none) and a final `stopped` one.
pub fn status_loop<S>(
    state: &mut S,
    stop: &std::sync::atomic::AtomicBool,
    status_every: u64,
    seconds: u64,
    mut turn: impl FnMut(&mut S) -> CmdResult,
    status: impl Fn(&S, &str, std::time::Duration) -> serde_json::Value,
) -> CmdResult {
    use std::time::{Duration, Instant};
    let start = Instant::now();
    let mut next_status = Duration::from_secs(status_every);
    loop {
        turn(state)?;
        let t = start.elapsed();
        if stop.load(std::sync::atomic::Ordering::Relaxed)
            || (seconds > 0 && t.as_secs() >= seconds)
        {
            break;
        }
        if status_every > 0 && t >= next_status {
            println!("{}", status(state, "status", t));
            next_status += Duration::from_secs(status_every);
        }
    }
    println!("{}", status(state, "stopped", start.elapsed()));
    Ok(())
}
