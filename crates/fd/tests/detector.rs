//! Table-driven tests of the sans-IO detector with a fake clock.

use std::net::{Ipv4Addr, SocketAddrV4};
use xlane_fd::detector::DetectorConfig;
use xlane_fd::{
    replay, Anchor, Arrival, Detector, EventKind, FixedTimeout, Heartbeat, HeartbeatError,
    HeartbeatPayload, MalformedError, PeerSpec, PhiFd, PhiParams, Reason, Status, XFd, FD_PRODUCER,
};
use xlane_wire::{FrameBuilder, Schema, MAX_FRAME_LEN};

const T: u64 = 1000;
const LAMBDA: u64 = 500;
const K: u32 = 3;
const TUNNEL: u32 = 9;

fn addr(i: usize) -> SocketAddrV4 {
    SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1 + i as u8), 4000)
}

fn peers(n: usize) -> Vec<PeerSpec> {
    (0..n)
        .map(|i| PeerSpec {
            addr: addr(i),
            tunnel: TUNNEL,
        })
        .collect()
}

use EventKind::*;
const SILENT: EventKind = Suspected(Reason::Silent);
const STALLED: EventKind = Suspected(Reason::Stalled);

#[derive(Clone, Copy, Debug)]
enum Step {
    /// Heartbeat of peer at t with seq, incarnation, counter.
    Hb(u64, usize, u64, u64, Option<u64>),
    /// Poll at t, expecting exactly these (peer, kind) events in order.
    Poll(u64, &'static [(usize, EventKind)]),
    /// Expect a peer's status now.
    Status(usize, Status),
    /// Expect next_deadline().
    Deadline(Option<u64>),
}
use Step::*;

struct Case {
    name: &'static str,
    peers: usize,
    join_deadline: Option<u64>,
    steps: &'static [Step],
    /// accepted, unknown sender, unknown tunnel, replay, malformed
    stats: (u64, u64, u64, u64, u64),
}

fn hb(peer: usize, seq: u64, inc: u64, counter: Option<u64>) -> Heartbeat {
    Heartbeat {
        peer: addr(peer),
        tunnel: TUNNEL,
        seq,
        incarnation: inc,
        counter,
        send_ns: None,
    }
}

#[test]
fn scenarios() {
    let cases = [
        Case {
            name: "all alive: joined once, never suspected",
            peers: 2,
            join_deadline: None,
            steps: &[
                Hb(0, 0, 1, 1, Some(1)),
                Hb(10, 1, 1, 1, Some(1)),
                Poll(20, &[(0, Joined), (1, Joined)]),
                Hb(1000, 0, 2, 1, Some(2)),
                Hb(1010, 1, 2, 1, Some(2)),
                Hb(2000, 0, 3, 1, Some(3)),
                Hb(2010, 1, 3, 1, Some(3)),
                Poll(2500, &[]),
                Status(0, Status::Alive),
                Deadline(Some(2000 + T + LAMBDA + 1)),
            ],
            stats: (6, 0, 0, 0, 0),
        },
        Case {
            name: "silent exactly after T+Λ, then recovery",
            peers: 1,
            join_deadline: None,
            steps: &[
                Hb(0, 0, 1, 1, None),
                Poll(T + LAMBDA, &[(0, Joined)]),
                Poll(T + LAMBDA + 1, &[(0, SILENT)]),
                Status(0, Status::Suspected(Reason::Silent)),
                Deadline(None),
                Poll(5000, &[]),
                Hb(6000, 0, 2, 1, None),
                Poll(6000, &[(0, Recovered)]),
                Status(0, Status::Alive),
            ],
            stats: (2, 0, 0, 0, 0),
        },
        Case {
            name: "a late heartbeat with no poll in between still counts as a suspicion",
            peers: 1,
            join_deadline: None,
            steps: &[
                Hb(0, 0, 1, 1, None),
                Hb(1600, 0, 2, 1, None),
                Poll(1600, &[(0, Joined), (0, SILENT), (0, Recovered)]),
                Hb(2600, 0, 3, 1, None),
                Poll(2600, &[]),
            ],
            stats: (3, 0, 0, 0, 0),
        },
        Case {
            name: "counter stalls for k periods, then advances",
            peers: 1,
            join_deadline: None,
            steps: &[
                Hb(0, 0, 1, 1, Some(1)),
                Hb(1000, 0, 2, 1, Some(2)),
                Hb(2000, 0, 3, 1, Some(2)),
                Hb(3000, 0, 4, 1, Some(2)),
                Poll(3000, &[(0, Joined)]),
                Hb(4000, 0, 5, 1, Some(2)),
                Poll(4000, &[(0, STALLED)]),
                Hb(5000, 0, 6, 1, Some(2)),
                Poll(5000, &[]),
                Status(0, Status::Suspected(Reason::Stalled)),
                Hb(6000, 0, 7, 1, Some(3)),
                Poll(6000, &[(0, Recovered)]),
            ],
            stats: (7, 0, 0, 0, 0),
        },
        Case {
            name: "lost heartbeats count as periods for the stall",
            peers: 1,
            join_deadline: None,
            steps: &[
                Hb(0, 0, 1, 1, Some(7)),
                Hb(1000, 0, 4, 1, Some(7)),
                Poll(1000, &[(0, Joined), (0, STALLED)]),
            ],
            stats: (2, 0, 0, 0, 0),
        },
        Case {
            name: "stalled, then silent",
            peers: 1,
            join_deadline: None,
            steps: &[
                Hb(0, 0, 1, 1, Some(1)),
                Hb(1000, 0, 4, 1, Some(1)),
                Poll(1000, &[(0, Joined), (0, STALLED)]),
                Poll(2501, &[(0, SILENT)]),
                Hb(3000, 0, 5, 1, Some(1)),
                Poll(3000, &[(0, STALLED)]),
            ],
            stats: (3, 0, 0, 0, 0),
        },
        Case {
            name: "no application counter: never stalled",
            peers: 1,
            join_deadline: None,
            steps: &[
                Hb(0, 0, 1, 1, None),
                Hb(1000, 0, 2, 1, None),
                Hb(2000, 0, 3, 1, None),
                Hb(3000, 0, 4, 1, None),
                Hb(4000, 0, 5, 1, None),
                Poll(4000, &[(0, Joined)]),
            ],
            stats: (5, 0, 0, 0, 0),
        },
        Case {
            name: "replays are ignored and counted",
            peers: 1,
            join_deadline: None,
            steps: &[
                Hb(0, 0, 5, 1, None),
                Hb(10, 0, 5, 1, None),
                Hb(20, 0, 4, 1, None),
                Hb(30, 0, 6, 0, None),
                Poll(30, &[(0, Joined)]),
            ],
            stats: (1, 0, 0, 3, 0),
        },
        Case {
            name: "restart: new incarnation accepted, old one is a replay",
            peers: 1,
            join_deadline: None,
            steps: &[
                Hb(0, 0, 100, 1, Some(50)),
                Hb(1000, 0, 1, 2, Some(0)),
                Poll(1000, &[(0, Joined), (0, Restarted)]),
                Hb(1500, 0, 101, 1, Some(51)),
                Hb(2000, 0, 2, 2, Some(1)),
                Poll(2000, &[]),
            ],
            stats: (3, 0, 0, 1, 0),
        },
        Case {
            name: "restart after silence: suspected, restarted, recovered",
            peers: 1,
            join_deadline: None,
            steps: &[
                Hb(0, 0, 100, 1, None),
                Poll(2000, &[(0, Joined), (0, SILENT)]),
                Hb(9000, 0, 0, 2, None),
                Poll(9000, &[(0, Restarted), (0, Recovered)]),
            ],
            stats: (2, 0, 0, 0, 0),
        },
        Case {
            name: "join deadline: a peer never heard is suspected",
            peers: 2,
            join_deadline: Some(3000),
            steps: &[
                Deadline(Some(3000)),
                Hb(0, 0, 1, 1, None),
                Hb(1000, 0, 2, 1, None),
                Hb(2000, 0, 3, 1, None),
                Poll(2999, &[(0, Joined)]),
                Deadline(Some(3000)),
                Poll(3000, &[(1, SILENT)]),
                Status(1, Status::Suspected(Reason::Silent)),
                Deadline(Some(2000 + T + LAMBDA + 1)),
                Hb(3100, 1, 1, 1, None),
                Poll(3100, &[(1, Joined), (1, Recovered)]),
            ],
            stats: (4, 0, 0, 0, 0),
        },
    ];
    for c in &cases {
        let cfg = DetectorConfig {
            period_ns: T,
            threshold: LAMBDA as f64,
            stall_periods: Some(K),
            join_deadline: c.join_deadline,
        };
        let mut d = Detector::new(cfg, FixedTimeout::new(T, Anchor::Arrival), &peers(c.peers))
            .expect("detector");
        for (n, step) in c.steps.iter().enumerate() {
            let ctx = format!("case {:?}, step {n} {step:?}", c.name);
            match *step {
                Hb(t, p, seq, inc, counter) => {
                    let _ = d.on_heartbeat(t, &hb(p, seq, inc, counter));
                }
                Poll(t, want) => {
                    let got: Vec<(usize, EventKind)> =
                        d.poll(t).map(|e| (e.peer, e.kind)).collect();
                    assert_eq!(got, want, "{ctx}");
                }
                Status(p, s) => assert_eq!(d.peer(p).expect("peer").status, s, "{ctx}"),
                Deadline(want) => assert_eq!(d.next_deadline(), want, "{ctx}"),
            }
        }
        let s = d.stats();
        assert_eq!(
            (
                s.accepted,
                s.unknown_sender,
                s.unknown_tunnel,
                s.replay,
                s.malformed
            ),
            c.stats,
            "case {:?}: {s:?}",
            c.name
        );
    }
}

#[test]
fn event_numbers_have_no_gaps() {
    let mut d = XFd::x_fd(T, LAMBDA, Some(K), &peers(3)).expect("detector");
    let mut numbers = vec![];
    for round in 0..20u64 {
        for p in 0..3 {
            // Peer 2 goes quiet in rounds 5..10.
            if p == 2 && (5..10).contains(&round) {
                continue;
            }
            let _ = d.on_heartbeat(round * T + p as u64, &hb(p, round, 1, Some(round)));
        }
        numbers.extend(d.poll(round * T + 900).map(|e| e.number));
    }
    assert!(!numbers.is_empty());
    for (i, n) in numbers.iter().enumerate() {
        assert_eq!(*n, i as u64);
    }
}

/// Members join and leave a running detector: the others keep their state,
/// indices after a removed peer move down (in queued events too), and a
/// removed peer's heartbeats are strangers'.
#[test]
fn peers_join_and_leave() {
    let mut d = XFd::x_fd(T, LAMBDA, None, &peers(3)).expect("detector");
    for p in 0..3 {
        d.on_heartbeat(p as u64, &hb(p, 0, 1, None))
            .expect("accepted");
    }
    assert_eq!(d.remove_peer(1).map(|s| s.addr), Some(addr(1)));
    assert_eq!(d.remove_peer(7), None);
    let ev: Vec<_> = d.poll(10).map(|e| (e.peer, e.addr, e.kind)).collect();
    assert_eq!(ev, [(0, addr(0), Joined), (1, addr(2), Joined)]);
    assert!(matches!(
        d.on_heartbeat(20, &hb(1, 1, 1, None)),
        Err(HeartbeatError::UnknownSender(a)) if a == addr(1)
    ));
    let new = PeerSpec {
        addr: addr(3),
        tunnel: TUNNEL,
    };
    let model = || FixedTimeout::new(T, Anchor::Arrival);
    assert_eq!(d.add_peer(new, model()), Ok(2));
    assert!(matches!(
        d.add_peer(new, model()),
        Err(xlane_fd::detector::ConfigError::DuplicatePeer(a)) if a == addr(3)
    ));
    assert_eq!(d.peer(2).map(|v| v.status), Some(Status::Unknown));
    // Peer 0 and the newcomer go on; the old peer 2 (now 1) falls silent
    // and is suspected from the state it had before the changes.
    d.on_heartbeat(T, &hb(0, 1, 1, None)).expect("accepted");
    d.on_heartbeat(T, &hb(3, 0, 1, None)).expect("accepted");
    let ev: Vec<_> = d.poll(T + 10).map(|e| (e.peer, e.kind)).collect();
    assert_eq!(ev, [(2, Joined)]);
    d.on_heartbeat(2 * T, &hb(0, 2, 1, None)).expect("accepted");
    d.on_heartbeat(2 * T, &hb(3, 1, 1, None)).expect("accepted");
    let ev: Vec<_> = d.poll(2 * T + LAMBDA).map(|e| (e.peer, e.kind)).collect();
    assert_eq!(ev, [(1, SILENT)]);
}

#[test]
fn unknown_sender_and_tunnel_are_counted() {
    let mut d = XFd::x_fd(T, LAMBDA, Some(K), &peers(2)).expect("detector");
    let stranger = SocketAddrV4::new(Ipv4Addr::new(10, 9, 9, 9), 4000);
    let other_port = SocketAddrV4::new(*addr(0).ip(), 4001);
    for a in [stranger, other_port] {
        let h = Heartbeat {
            peer: a,
            ..hb(0, 1, 1, None)
        };
        assert_eq!(d.on_heartbeat(0, &h), Err(HeartbeatError::UnknownSender(a)));
    }
    let h = Heartbeat {
        tunnel: TUNNEL + 1,
        ..hb(1, 1, 1, None)
    };
    assert_eq!(
        d.on_heartbeat(0, &h),
        Err(HeartbeatError::UnknownTunnel {
            peer: 1,
            got: TUNNEL + 1,
            want: TUNNEL
        })
    );
    let s = d.stats();
    assert_eq!((s.unknown_sender, s.unknown_tunnel, s.accepted), (2, 1, 0));
    assert_eq!(d.poll(10).count(), 0);
    assert_eq!(d.peer(1).expect("peer").status, Status::Unknown);
}

/// A changed Λ moves the deadline of a peer already heard: a silence the
/// old Λ would suspect is tolerated after a raise, and a cut suspects sooner.
#[test]
fn threshold_changes_move_deadlines() {
    let mut d = XFd::x_fd(T, LAMBDA, None, &peers(1)).expect("detector");
    d.on_heartbeat(0, &hb(0, 1, 1, None)).expect("heartbeat");
    let at = d.next_deadline().expect("a deadline");
    d.set_threshold((LAMBDA + 300) as f64).expect("raise");
    assert_eq!(d.threshold(), (LAMBDA + 300) as f64);
    assert_eq!(d.next_deadline(), Some(at + 300));
    d.check_deadlines(at + 100);
    assert_eq!(d.peer(0).expect("peer").status, Status::Alive);
    d.set_threshold((LAMBDA - 400) as f64).expect("cut");
    assert_eq!(d.next_deadline(), Some(at - 400));
    d.check_deadlines(at - 300);
    assert_eq!(
        d.peer(0).expect("peer").status,
        Status::Suspected(Reason::Silent)
    );
    assert_eq!(
        d.set_threshold(f64::NAN),
        Err(xlane_fd::ConfigError::NanThreshold)
    );
}

#[test]
fn config_refusals() {
    let p = peers(2);
    let dup = [p[0], p[0]];
    assert!(matches!(
        XFd::x_fd(T, LAMBDA, None, &dup),
        Err(xlane_fd::ConfigError::DuplicatePeer(_))
    ));
    assert!(matches!(
        XFd::x_fd(0, LAMBDA, None, &p),
        Err(xlane_fd::ConfigError::ZeroPeriod)
    ));
    assert!(matches!(
        XFd::x_fd(T, LAMBDA, Some(0), &p),
        Err(xlane_fd::ConfigError::ZeroStall)
    ));
    let many: Vec<PeerSpec> = (0..xlane_fd::detector::MAX_PEERS + 1)
        .map(|i| PeerSpec {
            addr: SocketAddrV4::new(Ipv4Addr::from(i as u32), 1),
            tunnel: 0,
        })
        .collect();
    assert!(matches!(
        XFd::x_fd(T, LAMBDA, None, &many),
        Err(xlane_fd::ConfigError::TooManyPeers(_))
    ));
    assert!(matches!(
        PhiFd::phi(PhiParams::for_period(T), f64::NAN, &p),
        Err(xlane_fd::ConfigError::NanThreshold)
    ));
    assert!("10.0.0.1:5/7".parse::<SocketAddrV4>().is_err());
    assert_eq!(
        PeerSpec::parse("10.0.0.1:5/7", 1),
        Ok(PeerSpec {
            addr: "10.0.0.1:5".parse().expect("addr"),
            tunnel: 7
        })
    );
    assert_eq!(PeerSpec::parse(" 10.0.0.1:5 ", 3).map(|p| p.tunnel), Ok(3));
    for bad in ["10.0.0.1", "x:5", "10.0.0.1:5/x", "10.0.0.1:99999"] {
        assert!(PeerSpec::parse(bad, 1).is_err(), "{bad}");
    }
}

fn lane_frame(tunnel: u32, seq: u64, chunks: &[(u8, &[u8])]) -> Vec<u8> {
    let mut buf = vec![0u8; MAX_FRAME_LEN];
    let mut b = FrameBuilder::new(&mut buf, Schema::Chunk26).expect("builder");
    for (p, c) in chunks {
        b.push_chunk(*p, c).expect("chunk");
    }
    let n = b.finish(tunnel, seq, 12_345, 0).expect("finish");
    buf.truncate(n);
    buf
}

#[test]
fn lane_datagrams_table() {
    let good = HeartbeatPayload {
        incarnation: 1,
        counter: Some(4),
    }
    .encode();
    let mut bad_payload = good;
    bad_payload[0] = b'Z';
    let mut corrupt_chunk = lane_frame(TUNNEL, 3, &[(FD_PRODUCER, &good)]);
    let last = corrupt_chunk.len() - 6;
    corrupt_chunk[last] ^= 0x01;
    type Want = Result<usize, HeartbeatError>;
    let cases: Vec<(&str, SocketAddrV4, Vec<u8>, Want)> = vec![
        (
            "good",
            addr(0),
            lane_frame(TUNNEL, 1, &[(FD_PRODUCER, &good)]),
            Ok(0),
        ),
        (
            "good after another producer's chunk",
            addr(0),
            lane_frame(TUNNEL, 2, &[(7, b"raft"), (FD_PRODUCER, &good)]),
            Ok(0),
        ),
        (
            "garbage",
            addr(0),
            b"not a frame at all, just some bytes: long enough".to_vec(),
            Err(HeartbeatError::Malformed(MalformedError::Frame(
                xlane_wire::FrameError::BadMagic,
            ))),
        ),
        (
            "empty",
            addr(0),
            vec![],
            Err(HeartbeatError::Malformed(MalformedError::Frame(
                xlane_wire::FrameError::Truncated { len: 0 },
            ))),
        ),
        (
            "no heartbeat chunk (an empty lane heartbeat frame)",
            addr(0),
            lane_frame(TUNNEL, 3, &[]),
            Err(HeartbeatError::Malformed(MalformedError::NoHeartbeat)),
        ),
        (
            "bad payload",
            addr(0),
            lane_frame(TUNNEL, 3, &[(FD_PRODUCER, &bad_payload)]),
            Err(HeartbeatError::Malformed(MalformedError::Payload(
                xlane_fd::DecodeError::Magic,
            ))),
        ),
        (
            "corrupt chunk",
            addr(0),
            corrupt_chunk,
            Err(HeartbeatError::Malformed(MalformedError::Chunk(
                xlane_wire::ChunkError::Crc,
            ))),
        ),
        (
            "wrong tunnel",
            addr(0),
            lane_frame(TUNNEL + 1, 3, &[(FD_PRODUCER, &good)]),
            Err(HeartbeatError::UnknownTunnel {
                peer: 0,
                got: TUNNEL + 1,
                want: TUNNEL,
            }),
        ),
        (
            "unknown sender",
            addr(5),
            lane_frame(TUNNEL, 3, &[(FD_PRODUCER, &good)]),
            Err(HeartbeatError::UnknownSender(addr(5))),
        ),
        (
            "replayed frame",
            addr(0),
            lane_frame(TUNNEL, 2, &[(FD_PRODUCER, &good)]),
            Err(HeartbeatError::Replay {
                peer: 0,
                incarnation: 1,
                seq: 2,
                last_incarnation: 1,
                last_seq: 2,
            }),
        ),
    ];
    let mut d = XFd::x_fd(T, LAMBDA, Some(K), &peers(2)).expect("detector");
    // The same cases through on_lane_frame for frames that parse (the
    // caller validated them): same answers, same counters.
    let mut f = XFd::x_fd(T, LAMBDA, Some(K), &peers(2)).expect("detector");
    for (i, (name, src, bytes, want)) in cases.into_iter().enumerate() {
        let got = d.on_lane_datagram(100 * i as u64, src, &bytes);
        assert_eq!(got, want, "{name}");
        let via_frame = match xlane_wire::Frame::new_checked(&bytes) {
            Ok(frame) => f.on_lane_frame(100 * i as u64, src, &frame),
            Err(_) => f.on_lane_datagram(100 * i as u64, src, &bytes),
        };
        assert_eq!(via_frame, want, "{name} (frame)");
    }
    assert_eq!(f.stats(), d.stats());
    let s = d.stats();
    assert_eq!(
        (
            s.accepted,
            s.malformed,
            s.unknown_tunnel,
            s.unknown_sender,
            s.replay
        ),
        (2, 5, 1, 1, 1)
    );
    let v = d.peer(0).expect("peer");
    assert_eq!(v.last_send_ns, Some(12_345));
    assert_eq!(v.counter, Some(4));
    // The peer moves to another tunnel (a new grant): its frames on the
    // new one are heartbeats, those on the old one are refused.
    assert!(d.set_peer_tunnel(0, TUNNEL + 1));
    assert!(!d.set_peer_tunnel(9, TUNNEL + 1));
    assert_eq!(d.peer(0).map(|p| p.tunnel), Some(TUNNEL + 1));
    let moved = lane_frame(TUNNEL + 1, 4, &[(FD_PRODUCER, &good)]);
    assert_eq!(d.on_lane_datagram(5_000, addr(0), &moved), Ok(0));
    let old = lane_frame(TUNNEL, 5, &[(FD_PRODUCER, &good)]);
    assert!(matches!(
        d.on_lane_datagram(5_100, addr(0), &old),
        Err(HeartbeatError::UnknownTunnel { peer: 0, .. })
    ));
}

#[test]
fn frames_from_the_periodic_sender_are_heartbeats() {
    use xlane_lane::{PeriodicSender, TunnelParams};
    let params = TunnelParams {
        tunnel: TUNNEL,
        period_ns: T,
        max_packet: xlane_wire::HEADER_LEN + Schema::Chunk26.chunk_len(),
        schema: Schema::Chunk26,
    };
    let mut tx = PeriodicSender::new(params, 0).expect("sender");
    let mut d = XFd::x_fd(T, LAMBDA, Some(K), &peers(1)).expect("detector");
    let mut buf = [0u8; MAX_FRAME_LEN];
    for period in 0..50u64 {
        let now = period * T + 3;
        let p = HeartbeatPayload {
            incarnation: 77,
            counter: Some(period / 2),
        };
        tx.enqueue(FD_PRODUCER, &p.encode()).expect("enqueue");
        let t = tx
            .poll_transmit(now, &mut buf)
            .expect("transmit")
            .expect("due");
        d.on_lane_datagram(now + 20, addr(0), &buf[..t.len])
            .expect("accepted");
        for e in d.poll(now + 20) {
            assert_eq!(e.kind, Joined, "{e:?}");
        }
    }
    assert_eq!(d.stats().accepted, 50);
    assert_eq!(d.peer(0).expect("peer").max_level, Some(0.0));
}

#[test]
fn phi_detector_suspects_and_recovers() {
    let mut d = PhiFd::phi(PhiParams::for_period(T), 8.0, &peers(1)).expect("detector");
    for i in 0..100u64 {
        d.on_heartbeat(i * T, &hb(0, i, 1, None)).expect("accepted");
    }
    let evs: Vec<EventKind> = d.poll(99 * T + 1).map(|e| e.kind).collect();
    assert_eq!(evs, vec![Joined]);
    let dl = d.next_deadline().expect("deadline");
    // Regular arrivals: σ is the floor T/10, so φ = 8 is ≈ 5.6σ past the mean.
    assert!(dl > 99 * T + T && dl < 99 * T + 2 * T, "{dl}");
    assert_eq!(d.poll(dl - 1).count(), 0);
    let evs: Vec<EventKind> = d.poll(dl).map(|e| e.kind).collect();
    assert_eq!(evs, vec![SILENT]);
    d.on_heartbeat(200 * T, &hb(0, 200, 1, None))
        .expect("accepted");
    let evs: Vec<EventKind> = d.poll(200 * T).map(|e| e.kind).collect();
    assert_eq!(evs, vec![Recovered]);
}

fn gaps_strategy() -> impl proptest::strategy::Strategy<Value = Vec<u64>> {
    proptest::collection::vec(500u64..3000, 2..200)
}

proptest::proptest! {
    /// Driven by arrivals only (no poll in between), the detector suspects a
    /// live peer exactly as often as the replay says for that threshold: the
    /// bench's replay and the live detector agree.
    #[test]
    fn detector_agrees_with_replay(gaps in gaps_strategy(), thr in 0u64..2500) {
        let mut t = 0;
        let arrivals: Vec<u64> = gaps.iter().map(|g| { t += g; t }).collect();
        let mut m = FixedTimeout::new(T, Anchor::Arrival);
        let summary = replay(&mut m, arrivals.iter().map(|&r| Arrival::at(r)));
        let mut d = XFd::x_fd(T, thr, None, &peers(1)).expect("detector");
        let mut suspicions = 0;
        for (i, &rx) in arrivals.iter().enumerate() {
            d.on_heartbeat(rx, &hb(0, i as u64, 1, None)).expect("accepted");
            suspicions += d.poll(rx).filter(|e| e.kind == SILENT).count();
        }
        proptest::prop_assert_eq!(suspicions, summary.mistakes(thr as f64));
        let max = summary.max_level().expect("levels");
        proptest::prop_assert_eq!(d.peer(0).expect("peer").max_level, Some(max));
        proptest::prop_assert_eq!(summary.accuracy(max), 1.0);
    }

    /// The same for phi, away from rounding at the threshold.
    #[test]
    fn phi_detector_agrees_with_replay(gaps in gaps_strategy(), thr in 0.5f64..12.0) {
        let mut t = 0;
        let arrivals: Vec<u64> = gaps.iter().map(|g| { t += g; t }).collect();
        let params = PhiParams { period_ns: T, window: 50, min_std_ns: 50.0 };
        let mut m = xlane_fd::PhiAccrual::new(params).expect("phi");
        let summary = replay(&mut m, arrivals.iter().map(|&r| Arrival::at(r)));
        let near = summary.levels.iter().any(|l| (l - thr).abs() < 1e-3);
        proptest::prop_assume!(!near);
        let mut d = PhiFd::phi(params, thr, &peers(1)).expect("detector");
        let mut suspicions = 0;
        for (i, &rx) in arrivals.iter().enumerate() {
            d.on_heartbeat(rx, &hb(0, i as u64, 1, None)).expect("accepted");
            suspicions += d.poll(rx).filter(|e| e.kind == SILENT).count();
        }
        proptest::prop_assert_eq!(suspicions, summary.mistakes(thr));
    }
}
