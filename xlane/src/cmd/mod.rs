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
