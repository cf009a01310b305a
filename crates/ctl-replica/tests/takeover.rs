//! Three controller replicas on 127.0.0.1: the serving one is stopped
//! while 1 008 requests from 16 hosts are in flight. Every acknowledged
//! grant must be held by the replica that takes over; the unanswered
//! requests are retried there with their request ids (`Tagged`), and none
//! is granted twice; the new serving replica answers new requests; the
//! stopped one restarts from its log and catches up to the same state.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};
use xlane_ctl::auth::Keys;
use xlane_ctl::client::{Client, ClientError};
use xlane_ctl::proto::{ClientMsg, RefusalCode, ServerMsg, TunnelId};
use xlane_ctl::te::{gen, TeConfig, Topology};
use xlane_ctl::{NoFabric, Policy};
use xlane_ctl_replica::{ControllerReplica, ReplicaAddrs, ReplicaConfig};

const PER_HOST: usize = 63;

fn topo() -> Topology {
    gen::from_spec("fat-tree:4").unwrap()
}

fn hosts(t: &Topology) -> Vec<String> {
    t.hosts().map(|h| t.node(h).name.clone()).collect()
}

fn start(
    id: u64,
    peers: &BTreeMap<u64, ReplicaAddrs>,
    dir: &Path,
    keys: &Keys,
) -> ControllerReplica {
    let mut cfg = ReplicaConfig::new(id, peers.clone(), dir.join(format!("r{id}"))).unwrap();
    cfg.server.tick_interval = Duration::from_millis(20);
    ControllerReplica::start(
        cfg,
        topo(),
        TeConfig::default(),
        Policy::default(),
        keys.clone(),
        Box::new(NoFabric),
    )
    .unwrap()
}

fn wait_serving(rs: &[Option<ControllerReplica>], limit: Duration) -> usize {
    let t0 = Instant::now();
    loop {
        if let Some(i) = rs
            .iter()
            .position(|r| r.as_ref().is_some_and(|r| r.serves()))
        {
            return i;
        }
        assert!(t0.elapsed() < limit, "no replica serves after {limit:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn connect(addrs: &[SocketAddr], host: &str, keys: &Keys) -> Client {
    let t0 = Instant::now();
    loop {
        match Client::connect_any(addrs, host, keys.get(host).unwrap()) {
            Ok(mut c) => {
                c.set_timeout(Duration::from_secs(10));
                return c;
            }
            Err(e) => {
                assert!(
                    t0.elapsed() < Duration::from_secs(20),
                    "{host}: no serving replica: {e}"
                );
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
}

#[derive(Default, Debug)]
struct HostResult {
    host: String,
    acked: Vec<TunnelId>,
    refused: Vec<RefusalCode>,
    unanswered: usize,
    retried: usize,
    after: Vec<TunnelId>,
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

#[test]
fn acknowledged_grants_survive_the_serving_replica() {
    let dir = tempfile::tempdir().unwrap();
    let t = topo();
    let names = hosts(&t);
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let keys = Keys::generate(&refs).unwrap();
    let peers: BTreeMap<u64, ReplicaAddrs> = (1..=3)
        .map(|i| {
            (
                i,
                ReplicaAddrs {
                    raft: xlane_testports::raft(),
                    client: xlane_testports::tcp(),
                },
            )
        })
        .collect();
    let addrs: Vec<SocketAddr> = peers.values().map(|p| p.client).collect();
    let mut rs: Vec<Option<ControllerReplica>> = (1..=3)
        .map(|i| Some(start(i, &peers, dir.path(), &keys)))
        .collect();
    let leader = wait_serving(&rs, Duration::from_secs(20));

    let acked = Arc::new(AtomicUsize::new(0));
    let go = Arc::new(Barrier::new(names.len() + 1));
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
                let mut c = connect(&addrs, &h, &keys);
                let to = |j: usize| others[(i + j) % others.len()].clone();
                go.wait();
                // Every request written at once: all in flight.
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
                        Ok(Some(ServerMsg::Refused { code, message })) => {
                            assert_ne!(code, RefusalCode::Internal, "{h}: {message}");
                            if code == RefusalCode::NotLeader {
                                // The connection is closed after it.
                                r.unanswered += PER_HOST - answered;
                                break;
                            }
                            r.refused.push(code);
                        }
                        Ok(Some(ServerMsg::Upcall(_))) => continue,
                        Ok(Some(m)) => panic!("{h}: unexpected {m:?}"),
                        Ok(None) | Err(_) => {
                            r.unanswered += PER_HOST - answered;
                            break;
                        }
                    }
                    answered += 1;
                }
                // The serving replica (perhaps a new one) answers the
                // unanswered requests, retried with their ids, then new ones.
                let mut c = connect(&addrs, &h, &keys);
                for j in answered..PER_HOST {
                    match c.call(&request(&h, &to(j), j)) {
                        Ok(ServerMsg::Granted { tunnel, .. }) => r.acked.push(tunnel),
                        Err(ClientError::Refused { code, message }) => {
                            assert_ne!(code, RefusalCode::Internal, "{h}: {message}");
                            assert_ne!(code, RefusalCode::NotLeader, "{h}: {message}");
                            r.refused.push(code);
                        }
                        m => panic!("{h}: retry of request {}: {m:?}", j + 1),
                    }
                    r.retried += 1;
                }
                for j in 0..3 {
                    let g = c.request(&[to(j + 1)], 64, 1_000_000, 0);
                    match g {
                        Ok(g) => r.after.push(g.tunnel),
                        Err(ClientError::Refused { code, message }) => {
                            assert_ne!(code, RefusalCode::Internal, "{h}: {message}");
                            assert_ne!(code, RefusalCode::NotLeader, "{h}: {message}");
                        }
                        Err(e) => panic!("{h}: after the takeover: {e}"),
                    }
                }
                r
            })
        })
        .collect();
    go.wait();
    // Stop the serving replica once a third of the requests are granted.
    let total = names.len() * PER_HOST;
    let t0 = Instant::now();
    while acked.load(Ordering::Relaxed) < total / 3 {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "only {} grants in 60 s",
            acked.load(Ordering::Relaxed)
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    let killed_at = Instant::now();
    let at_kill = acked.load(Ordering::Relaxed);
    rs[leader].take().unwrap().stop();
    let next = wait_serving(&rs, Duration::from_secs(20));
    let takeover = killed_at.elapsed();
    assert_ne!(next, leader);

    let results: Vec<HostResult> = workers.into_iter().map(|w| w.join().unwrap()).collect();
    let acks: Vec<TunnelId> = results.iter().flat_map(|r| r.acked.clone()).collect();
    let after: Vec<TunnelId> = results.iter().flat_map(|r| r.after.clone()).collect();
    let unanswered: usize = results.iter().map(|r| r.unanswered).sum();
    let retried: usize = results.iter().map(|r| r.retried).sum();
    let refused: usize = results.iter().map(|r| r.refused.len()).sum();
    eprintln!(
        "takeover: {} requests, {} granted ({at_kill} before the stop), {refused} refused, \
         {unanswered} unanswered then retried; a replica served again {:.0} ms after the \
         stop; {} new requests granted after",
        total,
        acks.len(),
        takeover.as_secs_f64() * 1e3,
        after.len()
    );
    assert_eq!(retried, unanswered);
    assert_eq!(acks.len() + refused, total, "every request answered");
    assert!(!after.is_empty(), "the new serving replica granted nothing");

    // Every acknowledged grant is held by the new serving replica.
    let serving = rs[next].as_ref().unwrap();
    let held = serving.state().with_controller(|c| c.tunnels());
    let held: std::collections::BTreeSet<TunnelId> = held.iter().map(|t| t.tunnel).collect();
    for id in acks.iter().chain(&after) {
        assert!(held.contains(id), "acknowledged {id} lost in the takeover");
    }
    // And none twice: each host holds as many tunnels as it was granted.
    let tunnels = serving.state().with_controller(|c| c.tunnels());
    for r in &results {
        let mine = tunnels.iter().filter(|t| t.sender == r.host).count();
        let mut granted: Vec<TunnelId> = r.acked.iter().chain(&r.after).copied().collect();
        granted.sort();
        granted.dedup();
        assert_eq!(mine, granted.len(), "{}: tunnels held vs granted", r.host);
        assert_eq!(granted.len(), r.acked.len() + r.after.len(), "{}", r.host);
    }

    // The stopped replica restarts from its log and catches up.
    let want = serving.state().applied();
    rs[leader] = Some(start(leader as u64 + 1, &peers, dir.path(), &keys));
    let t0 = Instant::now();
    for r in rs.iter().flatten() {
        while r.state().applied() < want {
            assert!(
                t0.elapsed() < Duration::from_secs(20),
                "replica {} stuck at {} < {want}",
                r.id(),
                r.state().applied()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    // Nothing is proposed now (no hosts; no meters; no grace period
    // runs): every replica reaches the same index and the same state.
    let base = rs[next].as_ref().unwrap();
    for r in rs.iter().flatten().filter(|r| r.id() != base.id()) {
        let t0 = Instant::now();
        while r.state().applied() != base.state().applied() {
            assert!(
                t0.elapsed() < Duration::from_secs(20),
                "replica {} lags",
                r.id()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        base.state()
            .with_controller(|a| r.state().with_controller(|b| a.same_state(b)))
            .unwrap_or_else(|e| panic!("replica {} differs: {e}", r.id()));
    }
}
