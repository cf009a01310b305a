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
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use xlane_alloc_count::counted;
use xlane_auth::{Key, KeyRing};
use xlane_fd::service::{FdAuth, RunConfig, Service, Transport};
use xlane_fd::{AliveTable, Event, PeerSpec};

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

/// How many heartbeats the counted run must send and accept before it is
/// stopped.
const PROGRESS: u64 = 100;

/// Sets `stop` from another thread once A's table shows `PROGRESS` more
/// heartbeats sent and accepted than when it started looking (the runner
/// publishes its counters at least every `TOUCH_NS`): the run is stopped
/// by what it did, not by a time, so a slow machine only makes it longer.
/// A run that makes no progress is stopped after a minute, and the
/// assertions below say what was missing.
fn stop_after_progress(stop: &Arc<AtomicBool>, table: PathBuf) -> std::thread::JoinHandle<()> {
    let s = stop.clone();
    std::thread::spawn(move || {
        let counts = || {
            AliveTable::open(&table)
                .map(|t| {
                    let st = t.stats();
                    (st.heartbeats_sent, st.accepted)
                })
                .unwrap_or((0, 0))
        };
        let (sent0, got0) = counts();
        for _ in 0..1200 {
            std::thread::sleep(Duration::from_millis(50));
            let (sent, got) = counts();
            if sent >= sent0 + PROGRESS && got >= got0 + PROGRESS {
                break;
            }
        }
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
        let table = dir.join(format!("{}.table", a.port()));
        let stop = Arc::new(AtomicBool::new(false));
        let t = stop_after_progress(&stop, table.clone());
        lp.run(&stop).expect("warm-up run");
        t.join().expect("stopper");
        let before = AliveTable::open(&table).expect("table").stats();
        stop.store(false, Ordering::SeqCst);
        let t = stop_after_progress(&stop, table.clone());
        let (r, allocs) = counted(|| lp.run(&stop));
        r.expect("counted run");
        t.join().expect("stopper");
        let report = lp.finish();
        stop_b.store(true, Ordering::SeqCst);
        let report_b = runner_b.join().expect("runner B");
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(allocs, 0, "{name}: allocations in the running loop");
        // The loop did its work while counted: sent and accepted heartbeats
        // (what the stopper waited for), heard B, published B's join.
        let counted_sent = report.heartbeats_sent - before.heartbeats_sent;
        let counted_got = report.detector.accepted - before.accepted;
        assert!(counted_sent >= PROGRESS, "{name}: {report:?}");
        assert!(counted_got >= PROGRESS, "{name}: {report:?}");
        assert!(report_b.datagrams > 0, "{name}: B heard A: {report_b:?}");
        assert!(joined >= 1, "{name}: B's join was published");
        assert_eq!(report.detector.suspicions, 0, "{name}: {report:?}");
        if auth.is_some() {
            assert!(report.auth.accepted >= PROGRESS, "{name}: {report:?}");
        }
    }
}
