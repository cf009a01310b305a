//! The X-FD runner's loop allocates nothing while it runs: two runners on
//! loopback watch each other, and a counting global allocator watches one
//! of them turning (heartbeats out at every slot, the peer's heartbeats in,
//! the peer's join published in the table and as an event), for each
//! transport: lane frames, lane frames with MACs, plain UDP heartbeats.
//!
//! Only allocations made by the armed thread are counted; everything the
//! loop needs is allocated when it is set up ([`Service::into_loop`]), and
//! a first run warms it before the counted one.

use std::net::SocketAddrV4;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use xlane_alloc_count::counted;
use xlane_auth::{Key, KeyRing};
use xlane_fd::service::{FdAuth, RunConfig, Service, Transport};
use xlane_fd::{Event, PeerSpec};

#[global_allocator]
static GLOBAL: xlane_alloc_count::Counting = xlane_alloc_count::Counting;

const TUNNEL: u32 = 41;

fn config(
    me: SocketAddrV4,
    peer: SocketAddrV4,
    dir: &Path,
    transport: Transport,
    auth: Option<&KeyRing>,
) -> RunConfig {
    let peers = vec![PeerSpec {
        addr: peer,
        tunnel: TUNNEL,
    }];
    let table = dir.join(format!("{}.table", me.port()));
    RunConfig {
        transport,
        counter: Some(dir.join(format!("{}.counter", me.port()))),
        event_capacity: 64,
        auth: auth.map(|ring| FdAuth {
            ring: ring.clone(),
            key_id: 1,
        }),
        ..RunConfig::new(me, TUNNEL, peers, 1_000_000, 200_000_000, table)
    }
}

/// Sets `stop` after `ms` milliseconds, from another thread.
fn stop_after(stop: &Arc<AtomicBool>, ms: u64) -> std::thread::JoinHandle<()> {
    let s = stop.clone();
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(ms));
        s.store(true, Ordering::SeqCst);
    })
}

#[test]
fn the_runner_loop_does_not_allocate() {
    let ring = KeyRing::from_pairs(&[(1, Key::random().expect("key"))]);
    let cases = [
        ("lane", Transport::Lane, None),
        ("lane with MACs", Transport::Lane, Some(&ring)),
        ("plain UDP", Transport::Plain, None),
    ];
    for (name, transport, auth) in cases {
        let dir = std::env::temp_dir().join(format!(
            "xlane-fd-loop-alloc-{}-{}",
            std::process::id(),
            TUNNEL + transport as u32 + auth.is_some() as u32 * 2
        ));
        std::fs::create_dir_all(&dir).expect("dir");
        let (a, b) = (xlane_testports::udp(), xlane_testports::udp());
        // B: an ordinary runner on its own thread (not counted).
        let svc_b = Service::start(config(b, a, &dir, transport, auth)).expect("start B");
        let stop_b = Arc::new(AtomicBool::new(false));
        let sb = stop_b.clone();
        let runner_b = std::thread::spawn(move || svc_b.run(&sb, &mut |_| {}).expect("run B"));
        // A: its loop, set up here, warmed, then counted.
        let svc_a = Service::start(config(a, b, &dir, transport, auth)).expect("start A");
        let mut joined = 0u64;
        let mut on_event = |e: &Event| {
            if e.addr == b {
                joined += 1;
            }
        };
        let mut lp = svc_a.into_loop(&mut on_event).expect("loop");
        let stop = Arc::new(AtomicBool::new(false));
        let t = stop_after(&stop, 100);
        lp.run(&stop).expect("warm-up run");
        t.join().expect("stopper");
        stop.store(false, Ordering::SeqCst);
        let t = stop_after(&stop, 400);
        let (r, allocs) = counted(|| lp.run(&stop));
        r.expect("counted run");
        t.join().expect("stopper");
        let report = lp.finish();
        stop_b.store(true, Ordering::SeqCst);
        let report_b = runner_b.join().expect("runner B");
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(allocs, 0, "{name}: allocations in the running loop");
        // The loop did its work meanwhile: sent, heard B, published B's join.
        assert!(report.heartbeats_sent >= 100, "{name}: {report:?}");
        assert!(report.datagrams >= 100, "{name}: {report:?}");
        assert!(report_b.datagrams >= 100, "{name}: B heard A: {report_b:?}");
        assert!(joined >= 1, "{name}: B's join was published");
        assert_eq!(report.detector.suspicions, 0, "{name}: {report:?}");
        if auth.is_some() {
            assert!(report.auth.accepted >= 100, "{name}: {report:?}");
        }
    }
}
