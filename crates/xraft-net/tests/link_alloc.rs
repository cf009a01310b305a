//! X-Raft's lane link allocates nothing while it runs: two links on
//! loopback send each other raft datagrams on the replication tree and
//! commit notices on the X-FD tree, heartbeats go out at every slot and
//! the detector watches, and a counting global allocator watches the thread
//! that turns both (queueing, the lane loop's sends and reads, the sinks'
//! reassembly, the hand-over to raft), with and without MACs.
//!
//! Everything the links need is allocated when they are made; a first
//! exchange warms them before the counted one. The counted exchange stops
//! when enough has arrived, not at a time.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::time::Duration;
use xlane_alloc_count::counted;
use xlane_auth::{Key, KeyRing};
use xlane_host::socket::realtime_ns;
use xlane_xraft::{Input, Readiness, TrafficClass};
use xlane_xraft_net::{LaneKeys, LaneLink, LaneTiming, NetAuth};

#[global_allocator]
static GLOBAL: xlane_alloc_count::Counting = xlane_alloc_count::Counting;

/// Datagrams and notices each exchange must bring to B.
const PROGRESS: u64 = 200;

/// What B was handed, by kind (datagram bytes are checked, not kept).
#[derive(Default, Debug)]
struct Got {
    datagrams: u64,
    notices: u64,
    wrong: u64,
}

/// A sends B a replication datagram and a notice per turn and both links
/// turn, until B took `PROGRESS` of each (or 20 000 turns went by).
fn exchange(a: &mut LaneLink, b: &mut LaneLink, got: &mut Got) {
    let datagram = [7u8; 300];
    let notice = [5u8; 30];
    let (want_d, want_n) = (got.datagrams + PROGRESS, got.notices + PROGRESS);
    for _ in 0..20_000 {
        a.send(2, TrafficClass::Express, &datagram);
        a.send(2, TrafficClass::Notice, &notice);
        a.flush();
        let now = realtime_ns();
        a.poll(now, 64, Readiness::UNKNOWN, &mut |_| {});
        b.poll(now, 64, Readiness::UNKNOWN, &mut |i| {
            if let Input::Datagram { from: 1, bytes } = i {
                match bytes {
                    b if b == datagram => got.datagrams += 1,
                    b if b == notice => got.notices += 1,
                    _ => got.wrong += 1,
                }
            }
        });
        if got.datagrams >= want_d && got.notices >= want_n {
            return;
        }
        std::thread::sleep(Duration::from_micros(200));
    }
}

fn links(keys: Option<&LaneKeys>) -> (LaneLink, LaneLink) {
    let (pa, pb): (SocketAddr, SocketAddr) =
        (xlane_testports::raft_pair(), xlane_testports::raft_pair());
    let peers = [(1, pa), (2, pb)];
    let t = LaneTiming {
        repl_period_ns: 100_000,
        fd_period_ns: 1_000_000,
        ..LaneTiming::default()
    };
    let none = BTreeMap::new();
    let a = LaneLink::new(1, pa, &peers, t, &none, keys).expect("link A");
    let b = LaneLink::new(2, pb, &peers, t, &none, keys).expect("link B");
    (a, b)
}

#[test]
fn the_link_allocates_nothing_while_it_runs() {
    let key = Key::random().expect("key");
    let auth = NetAuth {
        ring: KeyRing::from_pairs(&[(1, key)]),
        key_id: 1,
    };
    for (name, keys) in [("plain", None), ("sealed", Some(LaneKeys::group(&auth)))] {
        let (mut a, mut b) = links(keys.as_ref());
        let mut got = Got::default();
        exchange(&mut a, &mut b, &mut got);
        assert!(got.datagrams >= PROGRESS, "{name}: warm-up {got:?}");
        let (_, allocs) = counted(|| exchange(&mut a, &mut b, &mut got));
        assert!(got.datagrams >= 2 * PROGRESS, "{name}: {got:?}");
        assert!(got.notices >= 2 * PROGRESS, "{name}: {got:?}");
        assert_eq!(got.wrong, 0, "{name}");
        let (sa, sb) = (a.stats(), b.stats());
        assert!(sa.fd_frames_sent.load(Ordering::Relaxed) > 0, "{name}");
        assert_eq!(sb.unauthenticated.load(Ordering::Relaxed), 0, "{name}");
        assert_eq!(allocs, 0, "{name}: the links allocated while they ran");
    }
}
