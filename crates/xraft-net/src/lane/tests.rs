//! The lane link's tests.
use super::*;
use xlane_xraft::batch::{encode_message, KIND_WHOLE};
use xlane_xraft::raft::eraftpb::{Entry, MessageType};
use xlane_xraft::Message;

#[test]
fn default_tree_ids_are_distinct() {
    let a = TreeIds::default_for(1);
    let b = TreeIds::default_for(2);
    assert_ne!(a.fd, b.fd);
    assert_ne!(a.repl, b.repl);
    assert_eq!(TreeIds::default_for(4095).repl, REPL_TUNNEL_BASE + 4095);
    const { assert!(FD_TUNNEL_BASE + 4095 < REPL_TUNNEL_BASE) };
}

/// Members join and leave a running link; what the lane cannot serve is
/// refused and changes nothing.
#[test]
fn peers_join_and_leave() {
    let p = |port: u16| -> SocketAddr { SocketAddr::from(([127, 0, 0, 1], port)) };
    let v = |port: u16| v4(p(port), "").expect("v4");
    let t = LaneTiming::default();
    // A raft port whose next port is free too (the X-FD socket).
    let me = xlane_testports::raft_pair();
    let mut l =
        LaneLink::new(1, me, &[(1, me), (2, p(7002))], t, &BTreeMap::new(), None).expect("link");
    l.add_peer(3, p(7004)).expect("add");
    assert_eq!(l.peer_ids().collect::<Vec<_>>(), [2, 3]);
    assert_eq!(dsts(&l, l.repl_tx), [v(7002), v(7004)]);
    assert_eq!(dsts(&l, l.fd_tx), [v(7003), v(7005)]);
    // What was queued before the change goes to every member.
    assert_eq!(repl_to(&l), Destinations::ALL);
    let refused = [
        (3, p(7006)),
        (1, p(7006)),
        (5000, p(7006)),
        (4, "[::1]:7006".parse().expect("v6")),
    ];
    for (id, a) in refused {
        assert!(l.add_peer(id, a).is_err(), "{id} {a}");
    }
    assert!(l.remove_peer(2));
    assert!(!l.remove_peer(2));
    assert_eq!(l.peer_ids().collect::<Vec<_>>(), [3]);
    assert_eq!(dsts(&l, l.repl_tx), [v(7004)]);
    assert_eq!(dsts(&l, l.fd_tx), [v(7005)]);
    let (repl_rx, fd_rx) = (l.repl_rx, l.fd_rx);
    let (repl, fd) = sinks(&mut l.lane, repl_rx, fd_rx).expect("sinks");
    assert_eq!(fd.detector.len(), 1);
    assert_eq!(fd.peers.len(), 1);
    assert_eq!(repl.peers.len(), 1);
}

/// A tree's destinations.
fn dsts(l: &LaneLink, tx: SenderId) -> Vec<SocketAddrV4> {
    l.lane.sender(tx).expect("tree").spec.dsts.clone()
}

/// The peers the replication tree's next frame goes to.
fn repl_to(l: &LaneLink) -> Destinations {
    match l.lane.sender(l.repl_tx).map(|s| &s.spec.fill) {
        Some(LinkFill::Repl { to, .. }) => *to,
        _ => panic!("no replication tree"),
    }
}

#[test]
fn bad_configurations_are_refused() {
    let a: SocketAddr = "127.0.0.1:7001".parse().unwrap();
    let b: SocketAddr = "127.0.0.1:7003".parse().unwrap();
    let t = LaneTiming::default();
    let none = BTreeMap::new();
    let err = |r: Result<LaneLink, LaneError>| r.err().map(|e| e.to_string()).unwrap_or_default();
    assert!(err(LaneLink::new(1, a, &[(1, a)], t, &none, None)).contains("at least one other"));
    assert!(err(LaneLink::new(1, a, &[(1, a), (5000, b)], t, &none, None)).contains("1..4096"));
    let v6: SocketAddr = "[::1]:7005".parse().unwrap();
    assert!(err(LaneLink::new(1, a, &[(1, a), (2, v6)], t, &none, None)).contains("IPv4"));
    let top: SocketAddr = "127.0.0.1:65535".parse().unwrap();
    assert!(err(LaneLink::new(1, a, &[(1, a), (2, top)], t, &none, None)).contains("port"));
    let zero = LaneTiming {
        repl_period_ns: 0,
        ..t
    };
    assert!(err(LaneLink::new(1, a, &[(1, a), (2, b)], zero, &none, None)).contains("> 0"));
    let tiny = LaneTiming {
        repl_frame_bytes: 8,
        ..t
    };
    assert!(err(LaneLink::new(1, a, &[(1, a), (2, b)], tiny, &none, None)).contains("replication"));
    let mc = LaneTiming {
        multicast: true,
        ..t
    };
    assert!(err(LaneLink::new(1, a, &[(1, a), (2, b)], mc, &none, None)).contains("raft port"));
    let any: SocketAddr = "0.0.0.0:7001".parse().unwrap();
    assert!(err(LaneLink::new(1, any, &[(1, a), (2, a)], mc, &none, None)).contains("0.0.0.0"));
}

/// A raft message as the driver sends it whole (kind byte + encoding).
fn sent_len(m: &Message) -> usize {
    1 + encode_message(m).expect("encode").len()
}

fn msg(t: MessageType) -> Message {
    let mut m = Message::default();
    m.set_msg_type(t);
    // Ids near MAX_NODE_ID, terms and indices near 2^35.
    (m.from, m.to, m.term) = (4095, 4094, 1 << 35);
    (m.commit, m.index, m.log_term) = (1 << 35, 1 << 35, 1 << 35);
    m
}

/// The sizes the burst policy assumes hold for what the codec makes.
#[test]
fn the_burst_policy_covers_the_messages_raft_sends() {
    assert_eq!(KIND_WHOLE, 2);
    for t in [MessageType::MsgHeartbeat, MessageType::MsgHeartbeatResponse] {
        let mut m = msg(t);
        m.index = 0;
        m.log_term = 0;
        assert!(sent_len(&m) <= NOTICE_BYTES, "{t:?}: {}", sent_len(&m));
    }
    for t in [
        MessageType::MsgAppendResponse,
        MessageType::MsgRequestVote,
        MessageType::MsgRequestVoteResponse,
    ] {
        let m = msg(t);
        assert!(sent_len(&m) <= RESPONSE_BYTES, "{t:?}: {}", sent_len(&m));
    }
    // An append of 8 entries of 32 bytes each: overhead + data.
    let mut m = msg(MessageType::MsgAppend);
    for i in 0..8u64 {
        let mut e = Entry::default();
        (e.term, e.index) = (1 << 35, (1 << 35) + i);
        e.data = vec![7u8; 32].into();
        m.entries.push(e);
    }
    assert!(
        sent_len(&m) <= APPEND_BASE_BYTES + 8 * (ENTRY_OVERHEAD_BYTES + 32),
        "{}",
        sent_len(&m)
    );
    m.entries.clear();
    assert!(sent_len(&m) <= APPEND_BASE_BYTES, "{}", sent_len(&m));
}

#[test]
fn frame_sizes_follow_the_members_and_the_burst() {
    // (members, burst) -> chunks of (fd, leader, follower); a chunk
    // carries 19 (X-FD) or 29 (replication) bytes of a stream.
    let rows = [
        (3, 256, (1 + 2 * 3, 2 * 11, 2)),
        (5, 64, (1 + 4 * 3, 4 * 4, 2)),
        (3, 0, (1 + 2 * 3, 2 * 2, 2)),
        (1, 256, (1 + 3, 11, 2)),
    ];
    for (members, burst, (fd, leader, follower)) in rows {
        let s = frame_sizes(members, burst);
        assert_eq!(s.fd, Schema::Chunk26.frame_len(fd), "{members} {burst}");
        assert_eq!(
            s.repl_leader,
            Schema::Chunk36.frame_len(leader),
            "{members} {burst}"
        );
        assert_eq!(s.repl_follower, Schema::Chunk36.frame_len(follower));
    }
    // Never above the largest frame.
    assert_eq!(frame_sizes(64, 4096).repl_leader, MAX_FRAME_LEN);
}

/// Two links on loopback, A (member 1) sending to B (member 2): with the
/// group key on both, B takes A's datagram and heartbeats; a sender
/// without the key, or with another, gets nothing past B's MAC check,
/// and each of its frames is counted. The sealed frames fit one datagram.
#[test]
fn sealed_frames_open_only_under_the_group_key() {
    use xlane_auth::{Key, KeyRing};
    let k1 = Key::random().expect("key");
    let k2 = Key::random().expect("key");
    let auth = |k: &Key| NetAuth {
        ring: KeyRing::from_pairs(&[(1, k.clone())]),
        key_id: 1,
    };
    let cases: [(&str, Option<NetAuth>, bool); 3] = [
        ("same key", Some(auth(&k1)), true),
        ("no key", None, false),
        ("other key", Some(auth(&k2)), false),
    ];
    let t = LaneTiming {
        repl_period_ns: 1_000_000,
        fd_period_ns: 5_000_000,
        ..LaneTiming::default()
    };
    for (name, a_auth, taken) in cases {
        // Two raft ports, each with the next port free (X-FD).
        let (pa, pb) = (xlane_testports::raft_pair(), xlane_testports::raft_pair());
        let peers = [(1, pa), (2, pb)];
        let none = BTreeMap::new();
        let mut a = LaneLink::new(
            1,
            pa,
            &peers,
            t,
            &none,
            a_auth.map(|a| LaneKeys::group(&a)).as_ref(),
        )
        .expect("A");
        let mut b =
            LaneLink::new(2, pb, &peers, t, &none, Some(&LaneKeys::group(&auth(&k1)))).expect("B");
        assert_eq!(b.frame_cap, SEALED_FRAME_LEN);
        let msg = vec![9u8; 200];
        let mut got = Vec::new();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        let stats = b.stats();
        while std::time::Instant::now() < deadline {
            a.send(2, TrafficClass::Express, &msg);
            a.flush();
            let now = realtime_ns();
            a.poll(now, 64, Readiness::UNKNOWN, &mut |_| {});
            b.poll(now, 64, Readiness::UNKNOWN, &mut |i| {
                if let Input::Datagram { from, bytes } = i {
                    got.push((from, bytes.to_vec()));
                }
            });
            let refused = stats.unauthenticated.load(Ordering::Relaxed);
            if (taken && !got.is_empty()) || (!taken && refused >= 3) {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        let refused = stats.unauthenticated.load(Ordering::Relaxed);
        if taken {
            assert_eq!(got.first(), Some(&(1, msg.clone())), "{name}");
            assert_eq!(refused, 0, "{name}");
        } else {
            assert!(got.is_empty(), "{name}: {} datagrams taken", got.len());
            assert!(refused >= 3, "{name}: {refused} frames refused");
            assert_eq!(stats.repl_frames_received.load(Ordering::Relaxed), 0);
        }
    }
}

/// A replication frame goes only to the members its datagrams are for: of
/// three members, A writes to B only, and C's socket sees none of A's
/// replication frames while B takes every datagram; A's heartbeats reach
/// both.
#[test]
fn replication_frames_go_only_to_the_members_they_carry_datagrams_for() {
    let t = LaneTiming {
        repl_period_ns: 100_000,
        fd_period_ns: 1_000_000,
        ..LaneTiming::default()
    };
    let ports = [
        xlane_testports::raft_pair(),
        xlane_testports::raft_pair(),
        xlane_testports::raft_pair(),
    ];
    let peers = [(1, ports[0]), (2, ports[1]), (3, ports[2])];
    let none = BTreeMap::new();
    let mut links: Vec<LaneLink> = (0..3)
        .map(|i| LaneLink::new(i as u64 + 1, ports[i], &peers, t, &none, None).expect("link"))
        .collect();
    let msg = [3u8; 500];
    let (mut to_b, mut to_c) = (0, 0);
    // Stops on progress: B took 50 datagrams and C heard A's heartbeats.
    for _ in 0..20_000 {
        links[0].send(2, TrafficClass::Express, &msg);
        links[0].flush();
        let now = realtime_ns();
        for (i, l) in links.iter_mut().enumerate() {
            l.poll(now, 64, Readiness::UNKNOWN, &mut |input| {
                if let Input::Datagram { from: 1, .. } = input {
                    match i {
                        1 => to_b += 1,
                        2 => to_c += 1,
                        _ => {}
                    }
                }
            });
        }
        let c_heard = hears(&mut links[2], 0) == Some(Status::Alive);
        if to_b >= 50 && c_heard {
            break;
        }
        std::thread::sleep(std::time::Duration::from_micros(200));
    }
    assert!(to_b >= 50, "B took {to_b} datagrams");
    assert_eq!(to_c, 0);
    let (b, c) = (links[1].stats(), links[2].stats());
    assert!(b.repl_frames_received.load(Ordering::Relaxed) > 0);
    assert_eq!(c.repl_frames_received.load(Ordering::Relaxed), 0);
    assert_eq!(c.refused_frames.load(Ordering::Relaxed), 0);
    // C heard A all along: it is the detector's peer 0 (A), alive.
    assert_eq!(hears(&mut links[2], 0), Some(Status::Alive));
}

/// What `l`'s detector says of its peer `i`.
fn hears(l: &mut LaneLink, i: usize) -> Option<Status> {
    let (_, f) = sinks(&mut l.lane, l.repl_rx, l.fd_rx)?;
    f.detector.peer(i).map(|v| v.status)
}
