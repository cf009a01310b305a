//! Three `xlane ctl serve --id N --peer ...` processes on 127.0.0.1
//! (fat-tree:4, 16 hosts). 16 hosts write 1 008 tagged requests at once;
//! once a third are granted the serving replica is killed with `kill -9`.
//! Every acknowledged grant must be held by the replica that takes over,
//! every unanswered request is retried there with its id and answered,
//! none is granted twice, and the takeover time is printed. Each replica's
//! `/metrics` says whether it serves.

mod common;

use common::{scrape, value};
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};
use xlane_ctl::auth::Keys;
use xlane_ctl::client::{Client, ClientError};
use xlane_ctl::proto::{ClientMsg, RefusalCode, ServerMsg, TunnelId};
use xlane_ctl_replica::testing::connect;

const HOSTS: usize = 16;
const PER_HOST: usize = 63;
/// How long a host waits for a serving replica before the test gives up.
const PATIENCE: Duration = Duration::from_secs(30);

/// The replicas this test started, killed by PID when it ends.
struct Replicas(Vec<Option<Child>>);

impl Drop for Replicas {
    fn drop(&mut self) {
        for c in self.0.iter_mut().flatten() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn spawn(id: usize, peers: &[String], dir: &Path, keys: &Path, metrics: SocketAddr) -> Child {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_xlane"));
    cmd.args(["ctl", "serve", "--topology", "fat-tree:4", "--keys"])
        .arg(keys)
        // The replicas' raft traffic sealed with a group key.
        .arg("--key-file")
        .arg(keys.with_file_name("raft-keys.toml"))
        .arg("--state")
        .arg(dir.join(format!("r{id}")))
        .args(["--id", &id.to_string(), "--meter-interval-ms", "20"])
        .args(["--metrics", &metrics.to_string()]);
    for p in peers {
        cmd.args(["--peer", p]);
    }
    let mut child = cmd
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn xlane ctl serve");
    let mut err = BufReader::new(child.stderr.take().expect("stderr"));
    let mut line = String::new();
    while !line.contains("listening on") {
        line.clear();
        let n = err.read_line(&mut line).expect("replica line");
        assert!(n > 0, "replica {id} ended before listening");
    }
    // Keep the pipe drained.
    std::thread::spawn(move || for _ in err.lines().map_while(Result::ok) {});
    child
}

/// The index of the replica that accepts hosts now, if any.
fn serving(addrs: &[SocketAddr], up: &[bool], keys: &Keys) -> Option<usize> {
    (0..addrs.len())
        .filter(|&i| up[i])
        .find(|&i| Client::connect(addrs[i], "h0", keys.get("h0").unwrap()).is_ok())
}

fn request(h: &str, to: &str, j: usize) -> ClientMsg {
    ClientMsg::Tagged {
        request_id: j as u64 + 1,
        msg: Box::new(ClientMsg::RequestBandwidth {
            sender: h.to_string(),
            receivers: vec![to.to_string()],
            load_bytes: 64,
            period_ns: 1_000_000,
            sublane: (j % 2) as u8,
        }),
    }
}

#[derive(Default)]
struct HostResult {
    host: String,
    acked: Vec<TunnelId>,
    refused: usize,
    unanswered: usize,
}

#[test]
fn kill_9_of_the_serving_replica_loses_no_acknowledged_grant() {
    let dir = tempfile::tempdir().unwrap();
    let names: Vec<String> = (0..HOSTS).map(|i| format!("h{i}")).collect();
    let keys_path = dir.path().join("keys.toml");
    let st = Command::new(env!("CARGO_BIN_EXE_xlane"))
        .args(["ctl", "keygen", "--hosts", &names.join(","), "--out"])
        .arg(&keys_path)
        .status()
        .expect("xlane ctl keygen");
    assert!(st.success());
    let keys = Keys::from_file(&keys_path).unwrap();
    let raft_keys = xlane_auth::KeyRing::from_pairs(&[(1, xlane_auth::Key::random().unwrap())]);
    std::fs::write(dir.path().join("raft-keys.toml"), raft_keys.to_toml()).unwrap();
    let raft: Vec<SocketAddr> = (0..3).map(|_| xlane_testports::raft()).collect();
    let addrs: Vec<SocketAddr> = (0..3).map(|_| xlane_testports::tcp()).collect();
    let metrics: Vec<SocketAddr> = (0..3).map(|_| xlane_testports::tcp()).collect();
    let peers: Vec<String> = (0..3)
        .map(|i| format!("{}={}/{}", i + 1, raft[i], addrs[i]))
        .collect();
    // One by one, so that a failed start still ends those started.
    let mut rs = Replicas(Vec::new());
    for (i, m) in metrics.iter().enumerate() {
        rs.0.push(Some(spawn(i + 1, &peers, dir.path(), &keys_path, *m)));
    }
    let t0 = Instant::now();
    let leader = loop {
        if let Some(i) = serving(&addrs, &[true; 3], &keys) {
            break i;
        }
        assert!(t0.elapsed() < Duration::from_secs(30), "no replica serves");
        std::thread::sleep(Duration::from_millis(20));
    };

    // The serving replica says so; the others do not.
    for (i, m) in metrics.iter().enumerate() {
        let serving = value(&scrape(&m.to_string()), "xlane_ctl_serving");
        assert_eq!(
            serving,
            f64::from(u8::from(i == leader)),
            "replica {}",
            i + 1
        );
    }

    let acked = Arc::new(AtomicUsize::new(0));
    let go = Arc::new(Barrier::new(HOSTS + 1));
    let workers: Vec<_> = names
        .iter()
        .enumerate()
        .map(|(i, h)| {
            let (h, keys, addrs, acked, go) = (
                h.clone(),
                keys.clone(),
                addrs.clone(),
                acked.clone(),
                go.clone(),
            );
            let others: Vec<String> = names.iter().filter(|n| **n != h).cloned().collect();
            std::thread::spawn(move || {
                let mut r = HostResult {
                    host: h.clone(),
                    ..HostResult::default()
                };
                let to = |j: usize| others[(i + j) % others.len()].clone();
                let mut c = connect(&addrs, &h, &keys, PATIENCE);
                go.wait();
                for j in 0..PER_HOST {
                    c.send(&request(&h, &to(j), j)).unwrap();
                }
                let mut answered = 0;
                while answered < PER_HOST {
                    match c.recv(Duration::from_secs(10)) {
                        Ok(Some(ServerMsg::Granted { tunnel, .. })) => {
                            r.acked.push(tunnel);
                            acked.fetch_add(1, Ordering::Relaxed);
                        }
                        // The replica stopped serving (a loaded machine can
                        // move the lead before the kill): this and every
                        // later request are retried below, on the serving
                        // one, with the same ids.
                        Ok(Some(ServerMsg::Refused {
                            code: RefusalCode::NotLeader,
                            ..
                        })) => break,
                        Ok(Some(ServerMsg::Refused { code, message })) => {
                            assert!(
                                !matches!(code, RefusalCode::Internal),
                                "{h}: {code}: {message}"
                            );
                            r.refused += 1;
                        }
                        Ok(Some(ServerMsg::Upcall { .. })) => continue,
                        Ok(Some(m)) => panic!("{h}: unexpected {m:?}"),
                        Ok(None) | Err(_) => break,
                    }
                    answered += 1;
                }
                r.unanswered = PER_HOST - answered;
                // Retried on the serving replica with the same ids.
                let mut c = connect(&addrs, &h, &keys, PATIENCE);
                for j in answered..PER_HOST {
                    let mut reply = c.call(&request(&h, &to(j), j));
                    // Lead moved again (refused, or the connection closed
                    // unanswered as the replica lost the lead): find the
                    // serving replica, same id.
                    for _ in 0..5 {
                        if !matches!(
                            &reply,
                            Err(ClientError::Refused {
                                code: RefusalCode::NotLeader,
                                ..
                            } | ClientError::Closed)
                        ) {
                            break;
                        }
                        c = connect(&addrs, &h, &keys, PATIENCE);
                        reply = c.call(&request(&h, &to(j), j));
                    }
                    match reply {
                        Ok(ServerMsg::Granted { tunnel, .. }) => r.acked.push(tunnel),
                        Err(ClientError::Refused { code, message }) => {
                            assert!(
                                !matches!(code, RefusalCode::Internal | RefusalCode::NotLeader),
                                "{h}: retry: {code}: {message}"
                            );
                            r.refused += 1;
                        }
                        m => panic!("{h}: retry of request {}: {m:?}", j + 1),
                    }
                }
                r
            })
        })
        .collect();
    go.wait();
    let total = HOSTS * PER_HOST;
    let t1 = Instant::now();
    while acked.load(Ordering::Relaxed) < total / 3 {
        assert!(
            t1.elapsed() < Duration::from_secs(60),
            "only {} grants in 60 s",
            acked.load(Ordering::Relaxed)
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    // kill -9 by PID (Child::kill sends SIGKILL).
    let at_kill = acked.load(Ordering::Relaxed);
    let killed_at = Instant::now();
    let mut dead = rs.0[leader].take().unwrap();
    dead.kill().unwrap();
    dead.wait().unwrap();
    let mut up = [true; 3];
    up[leader] = false;
    let next = loop {
        if let Some(i) = serving(&addrs, &up, &keys) {
            break i;
        }
        assert!(
            killed_at.elapsed() < Duration::from_secs(30),
            "no replica serves 30 s after the kill"
        );
        std::thread::sleep(Duration::from_millis(5));
    };
    let takeover = killed_at.elapsed();
    assert_eq!(
        value(&scrape(&metrics[next].to_string()), "xlane_ctl_serving"),
        1.0
    );

    let results: Vec<HostResult> = workers.into_iter().map(|w| w.join().unwrap()).collect();
    let granted: usize = results.iter().map(|r| r.acked.len()).sum();
    let refused: usize = results.iter().map(|r| r.refused).sum();
    let unanswered: usize = results.iter().map(|r| r.unanswered).sum();
    eprintln!(
        "ctl replicas: {total} requests; {at_kill} granted before the kill -9 of replica {}; \
         {unanswered} unanswered then retried; {granted} granted and {refused} refused in all; \
         replica {} served {:.0} ms after the kill",
        leader + 1,
        next + 1,
        takeover.as_secs_f64() * 1e3
    );
    assert_eq!(granted + refused, total, "every request answered");

    // The serving replica holds every grant, none twice.
    let mut c = connect(&addrs, "h0", &keys, PATIENCE);
    let (list, truncated) = c.list().unwrap();
    assert!(!truncated);
    let held: std::collections::BTreeSet<TunnelId> = list.iter().map(|t| t.tunnel).collect();
    for r in &results {
        for id in &r.acked {
            assert!(held.contains(id), "{}: acknowledged {id} lost", r.host);
        }
        let mine = list.iter().filter(|t| t.sender == r.host).count();
        assert_eq!(mine, r.acked.len(), "{}: tunnels held vs granted", r.host);
    }
}
