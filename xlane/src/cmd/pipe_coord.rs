//! `xlane pipe coordinator`: a replica of 1Pipe's recovery coordinator
//! (`xlane_pipe::Coordinator`), its one decision kept in an `xlane kv`
//! Raft group.

use super::CmdResult;
use std::collections::HashMap;
use std::net::{SocketAddr, SocketAddrV4, UdpSocket};
use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::time::{Duration, Instant};
use xlane_host::tuning::install_termination_flag;
use xlane_kv::client::Client;
use xlane_kv::resp::Reply;
use xlane_pipe::seal::{self, PipeSeal};
use xlane_pipe::udp::now_ns;
use xlane_pipe::{CoordOut, Coordinator, Ctl};

/// Arguments of `xlane pipe coordinator`.
#[derive(clap::Args)]
pub struct CoordArgs {
    /// Address this replica receives on (give it to every hop's and
    /// process's --coordinator).
    #[arg(long)]
    bind: SocketAddrV4,
    /// A member of the `xlane kv` group that keeps the decisions (its
    /// RESP address). Repeat for every member; -MOVED is followed.
    #[arg(long = "store", required = true)]
    store: Vec<SocketAddr>,
    /// The hash in the store: field = process id, value = its failure
    /// timestamp. Replicas of one deployment share it.
    #[arg(long, default_value = "xlane:pipe:failed")]
    store_key: String,
    /// ID=ADDR: a process and its endpoint address. Repeat for every
    /// process.
    #[arg(long = "process", required = true, value_parser = super::parse_route)]
    processes: Vec<(u32, SocketAddrV4)>,
    #[command(flatten)]
    key: super::KeyArgs,
    /// Milliseconds between re-sends of unconfirmed messages.
    #[arg(long, default_value_t = 20)]
    resend_ms: u64,
    /// Milliseconds a store round trip may take before another member is
    /// tried.
    #[arg(long, default_value_t = 1000)]
    store_timeout_ms: u64,
}

fn emit(v: serde_json::Value) {
    println!("{v}");
}

fn words(ws: &[&str]) -> Vec<Vec<u8>> {
    ws.iter().map(|w| w.as_bytes().to_vec()).collect()
}

/// Retries `f` on the store until it gives an answer (or the process is
/// asked to stop).
fn with_store<T>(
    c: &mut Client,
    stop: &std::sync::atomic::AtomicBool,
    mut f: impl FnMut(&mut Client) -> Option<T>,
) -> Option<T> {
    while !stop.load(Ordering::Relaxed) {
        if let Some(x) = f(c) {
            return Some(x);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}

fn int(r: &Reply) -> Option<u64> {
    match r {
        Reply::Bulk(Some(b)) => std::str::from_utf8(b).ok()?.parse().ok(),
        _ => None,
    }
}

/// Runs `xlane pipe coordinator`.
pub fn run(a: CoordArgs) -> CmdResult {
    for (i, (p, _)) in a.processes.iter().enumerate() {
        if a.processes[..i].iter().any(|(q, _)| q == p) {
            return Err(format!("--process {p} given twice").into());
        }
    }
    let sock = UdpSocket::bind(a.bind).map_err(|e| format!("--bind {}: {e}", a.bind))?;
    sock.set_read_timeout(Some(Duration::from_millis(2)))?;
    let mut seal = match a.key.ring("1Pipe control messages", a.bind.into())? {
        Some((ring, id)) => {
            Some(PipeSeal::for_socket(ring, id, &sock).map_err(|e| format!("--key-id: {e}"))?)
        }
        None => None,
    };
    let mut unauthenticated = 0u64;
    let stop = install_termination_flag();
    let timeout = Duration::from_millis(a.store_timeout_ms.max(1));
    let mut store = Client::new(a.store.clone(), timeout);
    let key = a.store_key.clone();
    // What the store already decided: those processes failed before.
    let known = with_store(&mut store, stop, |c| {
        let r = c.call(&[words(&["HGETALL", &key])]).ok()?;
        match &r[0] {
            Reply::Array(Some(items)) => Some(
                items
                    .chunks(2)
                    .filter_map(|kv| Some((int(&kv[0])? as u32, int(&kv[1])?)))
                    .collect::<Vec<_>>(),
            ),
            Reply::Map(pairs) => Some(
                pairs
                    .iter()
                    .filter_map(|(k, v)| Some((int(k)? as u32, int(v)?)))
                    .collect(),
            ),
            r if c.redirected(r) => None,
            _ => None,
        }
    })
    .unwrap_or_default();
    let mut core = Coordinator::new(&a.processes, a.resend_ms.max(1) * 1_000_000);
    for &(p, t) in &known {
        core.restore(p, t);
    }
    // Decisions on their own thread: a leaderless store must not stop the
    // re-sends of other recoveries.
    let (ask, asks) = mpsc::channel::<(u32, u64)>();
    let (tell, told) = mpsc::channel::<(u32, u64)>();
    let store_key = key.clone();
    std::thread::Builder::new()
        .name("coord-store".into())
        .spawn(move || {
            for (proc, t) in asks {
                let (p, ts) = (proc.to_string(), t.to_string());
                let decided = with_store(&mut store, stop, |c| {
                    let cmds = [
                        words(&["HSETNX", &store_key, &p, &ts]),
                        words(&["HGET", &store_key, &p]),
                    ];
                    let r = c.call(&cmds).ok()?;
                    if r.iter().any(|x| c.redirected(x)) {
                        return None;
                    }
                    int(&r[1])
                });
                match decided {
                    Some(d) if tell.send((proc, d)).is_ok() => {}
                    _ => return,
                }
            }
        })?;
    emit(serde_json::json!({
        "event": "ready", "bind": a.bind.to_string(), "processes": a.processes.len(),
        "failed_before": known.iter().map(|(p, _)| *p).collect::<Vec<_>>(),
    }));
    let mut first_report: HashMap<u32, Instant> = HashMap::new();
    let mut buf = [0u8; 512];
    let mut out = Vec::with_capacity(64);
    while !stop.load(Ordering::Relaxed) {
        match sock.recv_from(&mut buf) {
            Ok((n, SocketAddr::V4(from))) => {
                let n = seal::opened(seal.as_mut(), &buf[..n]);
                if n.is_none() {
                    unauthenticated += 1;
                }
                if let Some(Ok(m)) = n.map(|n| Ctl::parse(&buf[..n])) {
                    if let Ctl::Silent { link, .. } = m {
                        if let Some(&(p, _)) = a.processes.iter().find(|(_, l)| *l == link) {
                            first_report.entry(p).or_insert_with(Instant::now);
                        }
                    }
                    core.on_ctl(from, m, now_ns());
                }
            }
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock
                        | std::io::ErrorKind::TimedOut
                        | std::io::ErrorKind::Interrupted
                ) => {}
            Err(e) => return Err(format!("coordinator socket: {e}").into()),
        }
        while let Ok((proc, t_fail)) = told.try_recv() {
            emit(serde_json::json!({"event": "decided", "proc": proc, "t_fail": t_fail}));
            core.on_decided(proc, t_fail, now_ns());
        }
        core.handle_timeout(now_ns());
        while let Some(o) = core.poll() {
            match o {
                CoordOut::Decide { proc, t_fail } => {
                    let _ = ask.send((proc, t_fail));
                }
                CoordOut::Send { to, msg } => {
                    out.clear();
                    msg.emit(&mut out);
                    let _ = seal::send(&sock, seal.as_mut(), &out, to);
                }
                CoordOut::Recovered { proc, t_fail } => {
                    let ms = first_report
                        .get(&proc)
                        .map(|t| t.elapsed().as_secs_f64() * 1e3);
                    emit(serde_json::json!({
                        "event": "recovered", "proc": proc, "t_fail": t_fail,
                        "ms_since_report": ms,
                    }));
                }
            }
        }
    }
    let s = core.stats();
    emit(serde_json::json!({
        "event": "stopped", "recovered": s.recovered, "resent": s.resent,
        "unknown_links": s.unknown_links, "unauthenticated": unauthenticated,
    }));
    Ok(())
}
