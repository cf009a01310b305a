//! Three controller replicas in one process on 127.0.0.1: the serving one
//! is stopped; the one that takes over holds every grant and serves; the
//! stopped one restarts from its raft log and every replica reaches the
//! same state. (`kill -9` of a replica process with 1 008 requests in
//! flight is `xlane/tests/ctl_replicas.rs`.)

use std::time::{Duration, Instant};
use xlane_ctl::client::{Client, ClientError};
use xlane_ctl::proto::{RefusalCode, TunnelId};
use xlane_ctl_replica::testing::{connect, Group};

/// How long a wait may take before the test gives up (a bound against
/// hanging, not a measurement).
const PATIENCE: Duration = Duration::from_secs(20);

fn grant(c: &mut Client, h: &str, to: &str) -> TunnelId {
    match c.request(&[to.to_string()], 64, 1_000_000, 0) {
        Ok(g) => g.tunnel,
        Err(e) => panic!("{h} -> {to}: {e}"),
    }
}

#[test]
fn a_stopped_replica_restarts_into_the_same_state() {
    let mut g = Group::start();
    let leader = g.wait_serving(PATIENCE);
    let (addrs, keys, names) = (g.addrs.clone(), g.keys.clone(), g.names.clone());
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
        let mut c = connect(&addrs, h, &keys, PATIENCE);
        for to in &names[4..9] {
            granted.push(grant(&mut c, h, to));
        }
    }
    g.rs[leader].take().unwrap().stop();
    let next = g.wait_serving(PATIENCE);
    assert_ne!(next, leader);
    let mut c = connect(&addrs, "h9", &keys, PATIENCE);
    granted.push(grant(&mut c, "h9", "h0"));
    let held = g.rs[next]
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
    g.start_replica(leader);
    let base = g.rs[next].as_ref().unwrap();
    for r in g.rs.iter().flatten().filter(|r| r.id() != base.id()) {
        let t0 = Instant::now();
        while r.state().applied() != base.state().applied() {
            assert!(t0.elapsed() < PATIENCE, "replica {} lags", r.id());
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
    let mut g = Group::start();
    let (addrs, keys) = (g.addrs.clone(), g.keys.clone());
    let leader = g.wait_serving(PATIENCE);
    // h0 -> h1 and h3 -> h1 share the edge switch's port to h1 (fat-tree:4:
    // h0..h3 are pod 0), so the second grant changes the first tunnel's
    // range: an upcall to h0.
    let mut h0 = connect(&addrs, "h0", &keys, PATIENCE);
    h0.subscribe().unwrap();
    let mine = grant(&mut h0, "h0", "h1");
    let mut h3 = connect(&addrs, "h3", &keys, PATIENCE);
    grant(&mut h3, "h3", "h1");
    let first = h0
        .next_upcall(Duration::from_secs(10))
        .unwrap()
        .expect("an upcall for h0's tunnel");
    assert_eq!(first.tunnel(), mine);
    let seen = h0.last_upcall_seq();
    assert!(seen > 0, "a replica numbers upcalls");

    g.rs[leader].take().unwrap().stop();
    g.wait_serving(PATIENCE);
    // Away from h0: another grant on the shared port.
    let mut h2 = connect(&addrs, "h2", &keys, PATIENCE);
    grant(&mut h2, "h2", "h1");

    // A fresh subscriber is not sent the past.
    let mut fresh = connect(&addrs, "h0", &keys, PATIENCE);
    fresh.subscribe().unwrap();
    assert_eq!(fresh.last_upcall_seq(), seen + 1);
    assert!(fresh
        .next_upcall(Duration::from_millis(300))
        .unwrap()
        .is_none());
    // h0, subscribing after what it saw, gets the one it missed, once.
    let mut back = connect(&addrs, "h0", &keys, PATIENCE);
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

/// A replica that leads serves hosts at once, before its tick has seen
/// the lead: the upcalls its requests produce reach their hosts then too
/// (the first of them takes over the fabric). Here the tick never comes.
#[test]
fn a_new_leader_delivers_upcalls_before_its_first_tick() {
    let g = Group::start_ticking(Duration::from_secs(3600));
    let (addrs, keys) = (g.addrs.clone(), g.keys.clone());
    g.wait_serving(PATIENCE);
    // As above: the second grant on the shared port changes the first's
    // range.
    let mut h0 = connect(&addrs, "h0", &keys, PATIENCE);
    h0.subscribe().unwrap();
    let mine = grant(&mut h0, "h0", "h1");
    let mut h3 = connect(&addrs, "h3", &keys, PATIENCE);
    grant(&mut h3, "h3", "h1");
    let up = h0
        .next_upcall(Duration::from_secs(10))
        .unwrap()
        .expect("an upcall for h0's tunnel");
    assert_eq!(up.tunnel(), mine);
}
