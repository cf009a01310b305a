//! Authenticated heartbeats (`RunConfig::auth`) against an attacker: two
//! X-FD runners on loopback share a key; a tap, listed as a third peer of
//! runner B, records B's genuine sealed heartbeats. B stops. From B's own
//! address (free once B is gone: the attacker spoofs it that way) the
//! attacker then keeps sending A, every millisecond, the recorded
//! heartbeats again (replays), the same with a flipped byte or sealed under
//! a key A does not trust (forgeries), and bare lane frames as B sent them
//! before authentication (no MAC: their last bytes name no key). A must suspect B as if B were silent:
//! no datagram after B stopped is ever accepted, so the suspicion comes
//! T + Λ after B's last genuine heartbeat, and every attack datagram is
//! counted by kind. No time is asserted.

use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};
use xlane_auth::{Key, KeyRing, Sealer};
use xlane_fd::service::{FdAuth, RunConfig, RunReport, Service};
use xlane_fd::{AliveTable, Event, EventKind, PeerSpec, Reason};
use xlane_host::socket::realtime_ns;

const PERIOD_NS: u64 = 5_000_000;
const LAMBDA_NS: u64 = 100_000_000;
const TUNNEL: u32 = 253;

fn config(addr: SocketAddrV4, peers: &[SocketAddrV4], table: PathBuf, ring: &KeyRing) -> RunConfig {
    let peers = peers
        .iter()
        .map(|p| PeerSpec::parse(&p.to_string(), TUNNEL).unwrap())
        .collect();
    RunConfig {
        event_capacity: 256,
        auth: Some(FdAuth {
            ring: ring.clone(),
            key_id: 1,
        }),
        ..RunConfig::new(addr, TUNNEL, peers, PERIOD_NS, LAMBDA_NS, table)
    }
}

struct Runner {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<RunReport>,
}

fn start(cfg: RunConfig, events: Option<mpsc::Sender<Event>>) -> Runner {
    let stop = Arc::new(AtomicBool::new(false));
    let st = stop.clone();
    let svc = Service::start(cfg).expect("start");
    let thread = std::thread::spawn(move || {
        svc.run(&st, &mut |e| {
            if let Some(tx) = &events {
                let _ = tx.send(*e);
            }
        })
        .expect("run")
    });
    Runner { stop, thread }
}

impl Runner {
    fn stop(self) -> RunReport {
        self.stop.store(true, Ordering::SeqCst);
        self.thread.join().expect("runner thread")
    }
}

fn wait_event(
    rx: &mpsc::Receiver<Event>,
    addr: SocketAddrV4,
    kind: EventKind,
    what: &str,
) -> Event {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        assert!(!left.is_zero(), "timed out waiting for {what}");
        if let Ok(e) = rx.recv_timeout(left) {
            if e.addr == addr && e.kind == kind {
                return e;
            }
        }
    }
}

#[test]
fn forged_replayed_and_unsealed_heartbeats_do_not_keep_a_stopped_peer_alive() {
    let dir = std::env::temp_dir().join(format!(
        "xlane-fd-forged-{}-{}",
        std::process::id(),
        realtime_ns()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let ring = KeyRing::from_pairs(&[(1, Key::random().unwrap())]);
    let (a, b) = (xlane_testports::udp(), xlane_testports::udp());
    let tap = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    tap.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let tap_addr = match tap.local_addr().unwrap() {
        std::net::SocketAddr::V4(t) => t,
        _ => unreachable!(),
    };
    let (tx, rx) = mpsc::channel();
    let ra = start(config(a, &[b], dir.join("a.table"), &ring), Some(tx));
    let rb = start(config(b, &[a, tap_addr], dir.join("b.table"), &ring), None);
    wait_event(&rx, b, EventKind::Joined, "A to hear B");
    // Genuine sealed heartbeats of B, as anyone on the path could record.
    let mut recorded = Vec::new();
    let mut buf = [0u8; 2048];
    while recorded.len() < 20 {
        let n = tap.recv(&mut buf).expect("B's heartbeats at the tap");
        recorded.push(buf[..n].to_vec());
    }
    let report_b = rb.stop();
    assert!(report_b.heartbeats_sent > 0);
    let stopped = realtime_ns();
    // The attacker takes B's address.
    let attacker = UdpSocket::bind(b).expect("B's address is free");
    let other = KeyRing::from_pairs(&[(1, Key::random().unwrap())]);
    let mut wrong_key = Sealer::new(1, other.get(1).unwrap().clone(), u32::from(*b.ip()));
    let mut sent = [0u64; 4];
    let mut i = 0;
    let suspected = loop {
        let g = &recorded[i % recorded.len()];
        i += 1;
        // Replayed as recorded.
        attacker.send_to(g, a).unwrap();
        sent[0] += 1;
        // A byte of the frame flipped.
        let mut f = g.clone();
        f[40] ^= 0x01;
        attacker.send_to(&f, a).unwrap();
        sent[1] += 1;
        // The frame sealed afresh under a key A does not trust.
        let frame_len = g.len() - xlane_auth::TRAILER_LEN;
        let mut w = g.clone();
        let n = wrong_key
            .seal(&mut w, frame_len, xlane_auth::ANY_RECEIVER, realtime_ns())
            .unwrap();
        attacker.send_to(&w[..n], a).unwrap();
        sent[2] += 1;
        // The bare frame, as before authentication.
        attacker.send_to(&g[..frame_len], a).unwrap();
        sent[3] += 1;
        if let Ok(e) = rx.recv_timeout(Duration::from_millis(1)) {
            if e.addr == b && e.kind == EventKind::Suspected(Reason::Silent) {
                break e;
            }
            assert!(
                e.addr != b || e.kind != EventKind::Recovered,
                "B recovered: {e:?}"
            );
        }
        assert!(i < 30_000, "B never suspected");
    };
    // Nothing after B stopped was taken for B.
    let table = AliveTable::open(dir.join("a.table")).unwrap();
    let seen = table.find(b).expect("B in A's table");
    let last = seen.last_rx_ns.expect("B was heard");
    assert!(last < stopped, "a datagram after B stopped was accepted");
    assert!(
        suspected.at_ns > last + PERIOD_NS + LAMBDA_NS,
        "{suspected:?} {last}"
    );
    let report = ra.stop();
    let auth = report.auth;
    // Every attack datagram was counted, by kind (those still in flight
    // when A stopped aside).
    assert!(
        auth.replayed > 0 && auth.replayed <= sent[0],
        "{auth:?} {sent:?}"
    );
    assert!(
        auth.forged > 0 && auth.forged <= sent[1] + sent[2],
        "{auth:?} {sent:?}"
    );
    // A bare frame's last 24 bytes, read as a trailer, name no key held.
    assert!(
        auth.unkeyed + auth.unsealed > 0 && auth.unkeyed + auth.unsealed <= sent[3],
        "{auth:?} {sent:?}"
    );
    assert_eq!(auth.wrong_sender, 0, "{auth:?}");
    assert!(auth.accepted > 0);
    let _ = std::fs::remove_dir_all(&dir);
}
