//! Three controller replicas in one process on 127.0.0.1: the serving one
//! is stopped; the one that takes over holds every grant and serves; the
//! stopped one restarts from its raft log and every replica reaches the
//! same state. (`kill -9` of a replica process with 1 008 requests in
//! flight is `xlane/tests/ctl_replicas.rs`.)

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};
use xlane_ctl::auth::Keys;
use xlane_ctl::client::{Client, ClientError};
use xlane_ctl::proto::{RefusalCode, TunnelId};
use xlane_ctl::te::{gen, TeConfig, Topology};
use xlane_ctl::{NoFabric, Policy};
use xlane_ctl_replica::{ControllerReplica, ReplicaAddrs, ReplicaConfig};

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

/// Three replicas on 127.0.0.1 (fat-tree:4, a key per host).
struct Group {
    dir: tempfile::TempDir,
    names: Vec<String>,
    keys: Keys,
    peers: BTreeMap<u64, ReplicaAddrs>,
    addrs: Vec<SocketAddr>,
    rs: Vec<Option<ControllerReplica>>,
}

fn group() -> Group {
    let dir = tempfile::tempdir().unwrap();
    let names = hosts(&topo());
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
    let addrs = peers.values().map(|p| p.client).collect();
    let rs = (1..=3)
        .map(|i| Some(start(i, &peers, dir.path(), &keys)))
        .collect();
    Group {
        dir,
        names,
        keys,
        peers,
        addrs,
        rs,
    }
}

fn grant(c: &mut Client, h: &str, to: &str) -> TunnelId {
    match c.request(&[to.to_string()], 64, 1_000_000, 0) {
        Ok(g) => g.tunnel,
        Err(e) => panic!("{h} -> {to}: {e}"),
    }
}

#[test]
fn a_stopped_replica_restarts_into_the_same_state() {
    let Group {
        dir,
        names,
        keys,
        peers,
        addrs,
        mut rs,
    } = group();
    let leader = wait_serving(&rs, Duration::from_secs(20));
    // Followers refuse hosts, naming the serving replica.
    for (i, a) in addrs.iter().enumerate().filter(|(i, _)| *i != leader) {
        match Client::connect(a, "h0", keys.get("h0").unwrap()) {
            Err(ClientError::Refused { code, message }) => {
                assert_eq!(code, RefusalCode::NotLeader, "replica {}", i + 1);
                assert!(message.contains(&addrs[leader].to_string()), "{message}");
            }
            r => panic!("replica {} answered a host: {:?}", i + 1, r.map(|_| ())),
        }
    }
    let mut granted = Vec::new();
    for h in &names[..4] {
        let mut c = connect(&addrs, h, &keys);
        for to in &names[4..9] {
            granted.push(grant(&mut c, h, to));
        }
    }
    rs[leader].take().unwrap().stop();
    let next = wait_serving(&rs, Duration::from_secs(20));
    assert_ne!(next, leader);
    let mut c = connect(&addrs, "h9", &keys);
    granted.push(grant(&mut c, "h9", "h0"));
    let held = rs[next]
        .as_ref()
        .unwrap()
        .state()
        .with_controller(|c| c.tunnels());
    let held: Vec<TunnelId> = held.iter().map(|t| t.tunnel).collect();
    for id in &granted {
        assert!(held.contains(id), "{id} lost in the takeover");
    }

    // The stopped replica restarts from its log. Nothing is proposed now
    // (no hosts; no meters; no grace period runs): every replica reaches
    // the same index and the same state.
    rs[leader] = Some(start(leader as u64 + 1, &peers, dir.path(), &keys));
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

/// An upcall produced while its host is away (the serving replica died
/// under it) is sent when the host subscribes again after the last one
/// it saw, and none is sent twice.
#[test]
fn upcalls_missed_across_a_takeover_are_replayed_once() {
    // The directory lives as long as the replicas.
    let Group {
        dir: _dir,
        keys,
        addrs,
        mut rs,
        ..
    } = group();
    let leader = wait_serving(&rs, Duration::from_secs(20));
    // h0 -> h1 and h3 -> h1 share the edge switch's port to h1 (fat-tree:4:
    // h0..h3 are pod 0), so the second grant changes the first tunnel's
    // range: an upcall to h0.
    let mut h0 = connect(&addrs, "h0", &keys);
    h0.subscribe().unwrap();
    let mine = grant(&mut h0, "h0", "h1");
    let mut h3 = connect(&addrs, "h3", &keys);
    grant(&mut h3, "h3", "h1");
    let first = h0
        .next_upcall(Duration::from_secs(10))
        .unwrap()
        .expect("an upcall for h0's tunnel");
    assert_eq!(first.tunnel(), mine);
    let seen = h0.last_upcall_seq();
    assert!(seen > 0, "a replica numbers upcalls");

    rs[leader].take().unwrap().stop();
    wait_serving(&rs, Duration::from_secs(20));
    // Away from h0: another grant on the shared port.
    let mut h2 = connect(&addrs, "h2", &keys);
    grant(&mut h2, "h2", "h1");

    // A fresh subscriber is not sent the past.
    let mut fresh = connect(&addrs, "h0", &keys);
    fresh.subscribe().unwrap();
    assert_eq!(fresh.last_upcall_seq(), seen + 1);
    assert!(fresh
        .next_upcall(Duration::from_millis(300))
        .unwrap()
        .is_none());
    // h0, subscribing after what it saw, gets the one it missed, once.
    let mut back = connect(&addrs, "h0", &keys);
    back.subscribe_after(seen).unwrap();
    let missed = back
        .next_upcall(Duration::from_secs(10))
        .unwrap()
        .expect("the upcall sent while h0 was away");
    assert_eq!(missed.tunnel(), mine);
    assert_eq!(back.last_upcall_seq(), seen + 1);
    assert_eq!(back.missed_upcalls(), 0);
    assert!(back
        .next_upcall(Duration::from_millis(300))
        .unwrap()
        .is_none());
}
