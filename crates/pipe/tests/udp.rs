//! The endpoint and hop drivers over real UDP sockets on 127.0.0.1: four
//! processes behind one hop exchange scatterings, best effort and
//! reliable, with beacons on the regular path or on lane tunnels (the
//! processes' beacons as lane frames to the hop's lane port). Every receiver delivers in (timestamp, sender) order, none
//! late; every reliable message is delivered exactly once; every
//! best-effort one is delivered or reported. No time is asserted.

use std::collections::{HashMap, HashSet};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::Duration;
use xlane_lane::sim::SimRng;
use xlane_pipe::lane::{LanePortConfig, LaneTunnel};
use xlane_pipe::udp::{HopConfig, UdpEndpoint, UdpHop};
use xlane_pipe::{AggConfig, ReceiverConfig, SendEvent, SenderConfig};

const PROCS: u32 = 4;

/// The lane port of a process or the hop on loopback: sending on tunnel
/// `tx` (to `to`), taking from `rx`.
fn lane_port(tx: Option<(u32, SocketAddrV4)>, rx: Vec<u32>, period_ns: u64) -> LanePortConfig {
    let t = |tunnel| LaneTunnel { tunnel, period_ns };
    LanePortConfig {
        bind: SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0),
        join: None,
        multicast_if: None,
        dscp: 0,
        tx: tx.map(|(id, to)| (t(id), to)),
        rx: rx.into_iter().map(t).collect(),
        // Far above loopback's delays: a lane beacon never overtakes data.
        window_ns: 50_000_000,
    }
}

/// `n` endpoints behind one hop on loopback, beacons every beacon
/// interval of `agg` (on lane tunnels 100 + process if `lane`).
fn rig(n: u32, agg: AggConfig, sender: SenderConfig, lane: bool) -> (UdpHop, Vec<UdpEndpoint>) {
    let addrs = xlane_testports::udp_n(n as usize + 1);
    let (hop_addr, eps) = addrs.split_last().unwrap();
    let peers: HashMap<u32, SocketAddrV4> = eps
        .iter()
        .enumerate()
        .map(|(i, a)| (i as u32, *a))
        .collect();
    let beacon = agg.beacon_interval_ns;
    let hop = UdpHop::bind(
        *hop_addr,
        HopConfig {
            agg,
            inputs: eps.to_vec(),
            routes: peers.iter().map(|(p, a)| (*p, *a)).collect(),
        },
    )
    .unwrap();
    let mut hop = hop;
    let hop_lane = lane.then(|| {
        hop.set_lane(&lane_port(None, (0..n).map(|p| 100 + p).collect(), beacon))
            .unwrap();
        hop.lane_addr().unwrap()
    });
    let ends = (0..n)
        .map(|p| {
            let mut e = UdpEndpoint::bind(
                eps[p as usize],
                p,
                *hop_addr,
                peers.clone(),
                beacon,
                (sender, ReceiverConfig::default()),
            )
            .unwrap();
            if let Some(to) = hop_lane {
                e.set_lane(&lane_port(Some((100 + p, to)), Vec::new(), beacon))
                    .unwrap();
            }
            e
        })
        .collect();
    (hop, ends)
}

fn exchange(reliable: bool, per_proc: u32, seed: u64, lane: bool) {
    let (mut hop, mut ends) = rig(
        PROCS,
        AggConfig {
            beacon_interval_ns: 200_000,
            dead_after: 1_000,
            hold_silent: reliable,
        },
        SenderConfig {
            ack_timeout_ns: 5_000_000_000,
            rto_ns: 50_000_000,
            max_outstanding: 1 << 16,
        },
        lane,
    );
    let mut rng = SimRng::new(seed);
    let mut sent: HashSet<(u64, u32, u32)> = HashSet::new();
    let mut delivered: Vec<Vec<(u64, u32, bool)>> = vec![Vec::new(); PROCS as usize];
    let mut got: HashMap<(u64, u32, u32), u32> = HashMap::new();
    let mut failed: HashSet<(u64, u32, u32)> = HashSet::new();
    let mut left = vec![per_proc; PROCS as usize];
    // A pass waits at most 50 µs for the hop (less when packets come),
    // so this many passes are 120 s of waiting at most; a run settles in
    // far fewer.
    const MAX_PASSES: u32 = 2_400_000;
    let mut passes = 0u32;
    loop {
        passes += 1;
        for p in 0..PROCS {
            if left[p as usize] > 0 && rng.chance(0.5) {
                let k = rng.range(1, 3) as usize;
                let mut dsts = Vec::new();
                while dsts.len() < k {
                    let d = rng.below(PROCS as u64) as u32;
                    if !dsts.contains(&d) {
                        dsts.push(d);
                    }
                }
                let bodies: Vec<Vec<u8>> = dsts
                    .iter()
                    .map(|d| format!("{p}->{d}").into_bytes())
                    .collect();
                let msgs: Vec<(u32, &[u8])> = dsts
                    .iter()
                    .zip(&bodies)
                    .map(|(d, b)| (*d, &b[..]))
                    .collect();
                let ts = ends[p as usize].scatter(&msgs, reliable).unwrap();
                for d in dsts {
                    sent.insert((ts, p, d));
                }
                left[p as usize] -= 1;
            }
        }
        hop.wait(Duration::from_micros(50)).unwrap();
        for (p, e) in ends.iter_mut().enumerate() {
            e.turn().unwrap();
            while let Some(d) = e.poll_deliver() {
                assert_eq!(d.payload, format!("{}->{p}", d.src).into_bytes());
                delivered[p].push((d.ts, d.src, d.reliable));
                *got.entry((d.ts, d.src, p as u32)).or_insert(0) += 1;
            }
            while let Some(SendEvent::Failed { ts, dst, .. }) = e.poll_event() {
                assert!(failed.insert((ts, p as u32, dst)));
            }
        }
        let settled = sent
            .iter()
            .all(|m| got.contains_key(m) || failed.contains(m));
        if left.iter().all(|&l| l == 0) && settled {
            break;
        }
        if passes >= MAX_PASSES {
            let missing: Vec<&(u64, u32, u32)> = sent
                .iter()
                .filter(|m| !got.contains_key(m) && !failed.contains(m))
                .take(10)
                .collect();
            panic!(
                "stuck after {passes} passes: {} of {} messages settled, \
                 scatterings still to send {left:?}, unsettled (ts, src, dst) \
                 include {missing:?}",
                got.len() + failed.len(),
                sent.len()
            );
        }
    }
    for (p, ds) in delivered.iter().enumerate() {
        assert!(
            ds.windows(2).all(|w| (w[0].0, w[0].1) < (w[1].0, w[1].1)),
            "receiver {p} out of order"
        );
        assert_eq!(ends[p].receiver().stats().late, 0);
    }
    assert!(got.values().all(|&n| n == 1), "delivered twice");
    if reliable {
        assert!(
            failed.is_empty(),
            "{} reliable messages failed",
            failed.len()
        );
    }
    for m in &sent {
        assert!(got.contains_key(m) != failed.contains(m), "{m:?}");
    }
    assert_eq!(hop.stats().refused, 0);
    assert!(sent.len() as u32 >= per_proc * PROCS);
    if lane {
        // Every process's beacons came on its tunnel, each taken.
        let l = hop.lane_stats().unwrap();
        assert_eq!((l.refused, l.sent), (0, 0), "{l:?}");
        assert!(l.received > 0);
        for e in &ends {
            let s = e.lane_stats().unwrap();
            assert!(s.sent > 0 && s.send_errors == 0, "{s:?}");
        }
    }
}

#[test]
fn best_effort_scatterings_cross_a_hop_in_order() {
    exchange(false, 1_000, 1, false);
}

#[test]
fn reliable_scatterings_cross_a_hop_in_order() {
    exchange(true, 1_000, 2, false);
}

#[test]
fn best_effort_scatterings_in_order_with_beacons_on_lane_tunnels() {
    exchange(false, 1_000, 3, true);
}

#[test]
fn reliable_scatterings_in_order_with_beacons_on_lane_tunnels() {
    exchange(true, 1_000, 4, true);
}

/// An input removed as silent that speaks again joins anew: it counts once
/// its barrier passes the hop's, and nothing it sends is refused.
#[test]
fn a_silent_input_that_speaks_again_rejoins() {
    use xlane_pipe::AggEvent;
    let (mut hop, mut ends) = rig(
        2,
        AggConfig {
            beacon_interval_ns: 1_000_000,
            dead_after: 4,
            hold_silent: false,
        },
        SenderConfig::default(),
        false,
    );
    let quiet = ends[1].local_addr().unwrap();
    // Events of the quiet endpoint's link. (On a loaded machine this one
    // thread may be held back long enough for endpoint 0 to be found
    // silent too; it rejoins the same way, so only link 1 is followed.)
    let mut silent = false;
    let mut up = false;
    let note = |hop: &mut UdpHop, silent: &mut bool, up: &mut bool| {
        while let Some((e, addr)) = hop.poll_event() {
            if addr == Some(quiet) {
                match e {
                    AggEvent::LinkSilent { .. } => *silent = true,
                    AggEvent::LinkUp(_) => *up = true,
                }
            }
        }
    };
    // Only endpoint 0 speaks until the hop finds 1 silent. A pass waits
    // at most 1 ms (two waits of 500 µs, less when packets come), so this
    // many passes are 60 s of waiting at most; silence comes after a few
    // beacon intervals.
    const MAX_SILENT_PASSES: u32 = 60_000;
    let mut passes = 0u32;
    while !silent {
        passes += 1;
        assert!(
            passes <= MAX_SILENT_PASSES,
            "input 1 never found silent in {MAX_SILENT_PASSES} passes"
        );
        ends[0].wait(Duration::from_micros(500)).unwrap();
        hop.wait(Duration::from_micros(500)).unwrap();
        note(&mut hop, &mut silent, &mut up);
    }
    let live_while_quiet = hop.core().live_inputs();
    assert!(live_while_quiet <= 1, "{live_while_quiet} live inputs");
    // Endpoint 1 speaks again (its clock is past the hop's barrier), and
    // joins; then both count. A pass waits at most 1.5 ms (three waits of
    // 500 µs): 60 s at most.
    const MAX_REJOIN_PASSES: u32 = 40_000;
    let mut passes = 0u32;
    while !up || hop.core().live_inputs() < 2 {
        passes += 1;
        assert!(
            passes <= MAX_REJOIN_PASSES,
            "input 1 never rejoined in {MAX_REJOIN_PASSES} passes (rejoined {up}, live {})",
            hop.core().live_inputs()
        );
        ends[1].wait(Duration::from_micros(500)).unwrap();
        ends[0].wait(Duration::from_micros(500)).unwrap();
        hop.wait(Duration::from_micros(500)).unwrap();
        note(&mut hop, &mut silent, &mut up);
    }
    assert!(hop.stats().rejoined >= 1);
    assert_eq!(hop.stats().refused, 0);
}
