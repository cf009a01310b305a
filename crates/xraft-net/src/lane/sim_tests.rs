//! The link's sans-IO ends on `xlane_lane::sim`'s seeded network, on a
//! virtual clock: the replication tree's fill and the replication sink
//! hand raft only whole, intact datagrams, each once, over a
//! network that drops, duplicates, corrupts and reorders frames; the X-FD
//! tree's fill and sink suspect a partitioned peer and trust it again
//! after, the commit notices riding on its heartbeats.

use super::ends::{FdPeer, FdSink, Inbox, LinkFill, LinkSink, ReplPeer, ReplSink};
use super::*;
use std::net::Ipv4Addr;
use xlane_fd::{EventKind, FD_PRODUCER};
use xlane_host::lane_loop::{FrameSink, SlotFill};
use xlane_host::socket::{Received, RxStamps, StampSource};
use xlane_lane::sim::{NetConfig, SimNet, SimRng};

const A: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), 7001);
const A_FD: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), 7002);
const PERIOD: u64 = 50_000;

/// The datagram as member 2's socket would stamp it.
fn stamps(src: SocketAddrV4, len: usize, at: u64) -> RxStamps {
    RxStamps {
        received: Received {
            len,
            truncated: false,
            src,
            rx_ns: at,
            source: StampSource::Kernel,
            user_ns: at,
        },
        software_ns: Some(at),
        hardware_ns: None,
    }
}

/// Raft datagram `k`: its number, then bytes that depend on it (so a
/// corrupted or mixed datagram is told from a whole one).
fn datagram(k: u64, rng: &mut SimRng) -> Vec<u8> {
    let len = 8 + rng.below(400) as usize;
    let mut d = k.to_le_bytes().to_vec();
    d.extend((8..len).map(|i| (k as usize * 31 + i) as u8));
    d
}

fn intact(d: &[u8]) -> Option<u64> {
    let k = u64::from_le_bytes(d.get(..8)?.try_into().ok()?);
    d[8..]
        .iter()
        .enumerate()
        .all(|(i, &b)| b == (k as usize * 31 + i + 8) as u8)
        .then_some(k)
}

fn repl_sink(stats: &Arc<LaneStats>) -> LinkSink {
    let trees = TreeIds::default_for(1);
    LinkSink::Repl(ReplSink {
        me: 2,
        peers: vec![ReplPeer {
            id: 1,
            addr: A,
            trees,
            rx: PeriodicReceiver::new(repl_rx_params(trees.repl, PERIOD)),
            stream: StreamReassembler::new(MAX_DATAGRAM),
        }],
        open: None,
        inbox: Inbox::new(),
        stats: stats.clone(),
    })
}

#[test]
fn replication_ends_hand_raft_whole_datagrams_over_a_faulty_network() {
    let faulty = NetConfig {
        drop: 0.05,
        duplicate: 0.05,
        corrupt: 0.05,
        min_delay: 5_000,
        max_delay: 3 * PERIOD,
    };
    for (name, net_cfg, seed) in [
        ("perfect", NetConfig::perfect(5_000), 1),
        ("faulty", faulty, 2),
        ("faulty", faulty, 3),
    ] {
        let mut net = SimNet::new(net_cfg, seed);
        let mut rng = SimRng::new(seed);
        let tree = TreeIds::default_for(1).repl;
        let params = TunnelParams {
            tunnel: tree,
            period_ns: PERIOD,
            max_packet: MAX_FRAME_LEN,
            schema: Schema::Chunk36,
        };
        let mut core = PeriodicSender::with_capacity(params, 0, REPL_QUEUE_CHUNKS).expect("tree");
        let stats = Arc::new(LaneStats::default());
        let mut fill = LinkFill::Repl {
            to: Destinations::NONE,
            stats: stats.clone(),
            errors: 0,
        };
        let mut sink = repl_sink(&Arc::new(LaneStats::default()));
        let mut idle = PeriodicReceiver::new(repl_rx_params(0, PERIOD));
        let mut scratch = vec![0u8; MAX_DATAGRAM + 64];
        let mut buf = vec![0u8; MAX_FRAME_LEN];
        let (mut queued, mut got) = (0u64, Vec::new());
        let mut now = 0;
        while now < 200 * PERIOD || core.pending() > 0 || net.next_arrival().is_some() {
            // Raft hands the link a datagram now and then, for 200 periods.
            if now < 200 * PERIOD && rng.chance(0.3) {
                let d = datagram(queued, &mut rng);
                if enqueue_to(&mut core, RAFT_PRODUCER, 2, &d, 0, &mut scratch) {
                    queued += 1;
                }
            }
            // The loop's sending half, as for an event-driven sender.
            if core.pending() > 0 && now >= core.clock().next_free() {
                fill.fill(&mut core, now);
                assert!(fill.send_when_free());
                if let Ok(tx) = core.transmit_now(now, &mut buf) {
                    net.send(now, &buf[..tx.len]);
                }
            }
            while let Some(a) = net.pop_due(now) {
                let st = stamps(A, a.bytes.len(), a.at);
                sink.on_datagram(&mut idle, &st, &a.bytes);
            }
            if let LinkSink::Repl(r) = &mut sink {
                r.inbox.drain(&mut |from, d| {
                    assert_eq!(from, 1);
                    got.push(intact(d));
                });
            }
            now += 10_000;
        }
        let got: Vec<u64> = got
            .into_iter()
            .map(|k| k.unwrap_or_else(|| panic!("{name}: a datagram came corrupted")))
            .collect();
        assert!(queued > 100, "{name}: {queued} queued");
        // Each once (a network that reorders frames may reorder whole
        // datagrams: raft's transports may, and it copes).
        let mut once = got.clone();
        once.sort_unstable();
        once.dedup();
        assert_eq!(once.len(), got.len(), "{name}: a datagram came twice");
        assert!(got.iter().all(|&k| k < queued), "{name}");
        if net_cfg == NetConfig::perfect(5_000) {
            assert!(
                got.iter().copied().eq(0..queued),
                "{name}: every datagram, in order"
            );
        } else {
            // Whole datagrams are lost with the frames that carried them,
            // never parts of them; most still come.
            assert!(
                got.len() as u64 > queued / 2,
                "{name}: {} of {queued}",
                got.len()
            );
            assert!(
                net.stats().corrupted > 0 && net.stats().duplicated > 0,
                "{name}"
            );
        }
    }
}

#[test]
fn the_fd_ends_suspect_a_partitioned_peer_and_carry_notices() {
    let fd_period = 1_000_000;
    let trees = TreeIds::default_for(1);
    let params = TunnelParams {
        tunnel: trees.fd,
        period_ns: fd_period,
        max_packet: MAX_FRAME_LEN,
        schema: Schema::Chunk26,
    };
    let mut core = PeriodicSender::new(params, 0).expect("tree");
    let stats = Arc::new(LaneStats::default());
    let mut fill = LinkFill::Fd {
        incarnation: 7,
        stats: stats.clone(),
        errors: 0,
    };
    let detector = Detector::new(
        DetectorConfig {
            period_ns: fd_period,
            threshold: 5_000_000.0,
            stall_periods: None,
            join_deadline: None,
        },
        FixedTimeout::new(fd_period, Anchor::Arrival),
        &[PeerSpec {
            addr: A_FD,
            tunnel: trees.fd,
        }],
    )
    .expect("detector");
    let mut sink = LinkSink::Fd(Box::new(FdSink {
        me: 2,
        detector,
        peers: vec![FdPeer {
            id: 1,
            ip: *A.ip(),
            notices: StreamReassembler::new(MAX_DATAGRAM),
        }],
        open: None,
        inbox: Inbox::new(),
        stats: Arc::new(LaneStats::default()),
    }));
    let mut idle = PeriodicReceiver::new(repl_rx_params(0, fd_period));
    let mut net = SimNet::new(NetConfig::perfect(20_000), 9);
    let mut scratch = vec![0u8; MAX_DATAGRAM + 64];
    let mut buf = vec![0u8; MAX_FRAME_LEN];
    let (mut notices, mut events, mut frames) = (0, Vec::new(), 0);
    let mut now = 0;
    while now < 100 * fd_period {
        // Cut from 30 to 60 ms.
        net.set_partitioned((30..60).contains(&(now / fd_period)));
        if now % (10 * fd_period) == 0 {
            // A commit notice rides the next heartbeat.
            let notice = [now as u8; 30];
            assert!(enqueue_to(
                &mut core,
                NOTICE_PRODUCER,
                2,
                &notice,
                1,
                &mut scratch
            ));
        }
        if now >= core.poll_timeout() {
            fill.fill(&mut core, now);
            if let Ok(Some(tx)) = core.poll_transmit(now, &mut buf) {
                assert_eq!(fill.to(), Destinations::ALL);
                net.send(now, &buf[..tx.len]);
                frames += 1;
            }
        }
        while let Some(a) = net.pop_due(now) {
            let st = stamps(A_FD, a.bytes.len(), a.at);
            assert!(sink.on_datagram(&mut idle, &st, &a.bytes));
        }
        if sink.poll_timeout().is_some_and(|t| t <= now) {
            sink.on_timeout(now, true);
        }
        if let LinkSink::Fd(f) = &mut sink {
            f.inbox.drain(&mut |from, n| {
                assert_eq!((from, n.len()), (1, 30));
                notices += 1;
            });
            while let Some(ev) = f.detector.next_event() {
                events.push((now / fd_period, ev.kind));
            }
        }
        now += 100_000;
    }
    assert_eq!(frames, 100, "a heartbeat every slot");
    assert_eq!(core.pending_for(FD_PRODUCER), 0);
    let kinds: Vec<_> = events.iter().map(|(_, k)| *k).collect();
    assert!(
        matches!(
            kinds[..],
            [
                EventKind::Joined,
                EventKind::Suspected(_),
                EventKind::Recovered
            ]
        ),
        "{events:?}"
    );
    // Suspected after T + Λ of silence, inside the cut; trusted after it.
    let (at_suspect, at_trust) = (events[1].0, events[2].0);
    assert!((35..=37).contains(&at_suspect), "{events:?}");
    assert!((60..=61).contains(&at_trust), "{events:?}");
    // Notices queued in the cut were lost with their heartbeats (3 of 10).
    assert_eq!(notices, 7);
}
