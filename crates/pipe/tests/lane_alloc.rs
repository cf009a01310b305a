//! A lane port's turns allocate nothing: two ports on loopback send each
//! other a beacon every period on their own tunnels and take the other's,
//! and a counting global allocator watches them turning (beacons built,
//! capped, sent, read and handed over).
//!
//! Only allocations made by the armed thread are counted; everything the
//! ports need is allocated when they open, and a first stretch of turns
//! warms them before the counted one.

use std::net::SocketAddrV4;
use std::time::Duration;
use xlane_alloc_count::counted;
use xlane_pipe::lane::{LaneBeacon, LanePort, LanePortConfig, LaneTunnel};
use xlane_pipe::udp::now_ns;

#[global_allocator]
static GLOBAL: xlane_alloc_count::Counting = xlane_alloc_count::Counting;

const PERIOD_NS: u64 = 1_000_000;

fn config(bind: SocketAddrV4, tx: u32, to: SocketAddrV4, rx: u32) -> LanePortConfig {
    let t = |tunnel| LaneTunnel {
        tunnel,
        period_ns: PERIOD_NS,
    };
    LanePortConfig {
        bind,
        join: None,
        multicast_if: None,
        dscp: 0,
        tx: Some((t(tx), to)),
        rx: vec![t(rx)],
        window_ns: 50_000_000,
    }
}

/// Beacons each port must send and take in a stretch of turns.
const PROGRESS: u64 = 100;

/// Turns both ports until each has sent `PROGRESS` more beacons and taken
/// `PROGRESS` of the other's (a slow machine only makes it longer; a
/// stretch without progress ends after a minute, and the assertions say
/// what was missing): regular packets noted, due beacons sent with
/// growing barriers, beacons taken. Returns the beacons each took.
fn turns(ports: &mut [LanePort; 2], barrier: &mut u64) -> [u64; 2] {
    let mut took = [0u64; 2];
    let sent0 = [ports[0].stats().sent, ports[1].stats().sent];
    let end = now_ns() + 60_000_000_000;
    let done = |ports: &[LanePort; 2], took: &[u64; 2]| {
        (0..2).all(|i| ports[i].stats().sent >= sent0[i] + PROGRESS && took[i] >= PROGRESS)
    };
    while !done(ports, &took) && now_ns() < end {
        let now = now_ns();
        for (i, p) in ports.iter_mut().enumerate() {
            *barrier += 1;
            let b = *barrier;
            p.on_regular_sent(now, b, b - 1);
            p.send_due(now, i as u32, || (b + 10, b + 9));
            let mut take = |beacon: LaneBeacon, period: u64| {
                assert_eq!((beacon.src, period), (1 - i as u32, PERIOD_NS));
                took[i] += 1;
            };
            p.recv(now, &mut take).expect("recv");
        }
        std::thread::sleep(Duration::from_micros(100));
    }
    took
}

#[test]
fn lane_port_turns_do_not_allocate() {
    let (a, b) = (xlane_testports::udp(), xlane_testports::udp());
    let now = now_ns();
    let mut ports = [
        LanePort::open(&config(a, 200, b, 201), now).expect("port A"),
        LanePort::open(&config(b, 201, a, 200), now).expect("port B"),
    ];
    assert_eq!(ports[0].local_addr().unwrap(), a);
    let mut barrier = 100;
    let warm = turns(&mut ports, &mut barrier);
    let sent_warm = [ports[0].stats().sent, ports[1].stats().sent];
    let (took, allocs) = counted(|| turns(&mut ports, &mut barrier));
    assert_eq!(allocs, 0, "allocations while the ports turned");
    for (i, p) in ports.iter().enumerate() {
        let s = p.stats();
        assert!(s.sent >= sent_warm[i] + PROGRESS, "port {i}: {s:?}");
        assert_eq!((s.send_errors, s.refused), (0, 0), "port {i}: {s:?}");
        assert_eq!(s.received, warm[i] + took[i], "port {i}: {s:?}");
        assert!(
            took[i] >= PROGRESS,
            "port {i} took the other's beacons: {took:?}"
        );
        // Every beacon was held under the regular packets just sent.
        assert!(s.capped >= s.sent, "port {i}: {s:?}");
    }
}
