use super::*;

#[test]
fn marks_and_stamps_on_loopback() {
    let mut rx = LaneSocket::open(&SocketConfig::express(SocketAddrV4::new(
        Ipv4Addr::LOCALHOST,
        0,
    )))
    .unwrap();
    let tx = LaneSocket::open(&SocketConfig::express(SocketAddrV4::new(
        Ipv4Addr::LOCALHOST,
        0,
    )))
    .unwrap();
    let dst = rx.local_addr().unwrap();
    // The kernel turns receive stamping on lazily (a deferred static
    // key), so the first datagrams may come unstamped: those fall back to
    // the user-space time. Within a bounded number of tries one is stamped.
    let mut buf = [0u8; 64];
    let mut stamped = None;
    for _ in 0..200 {
        let before = realtime_ns();
        tx.send_to(b"hello", dst).unwrap();
        let got = rx.recv(&mut buf).unwrap().expect("a datagram");
        assert_eq!(&buf[..got.len], b"hello");
        assert!(!got.truncated);
        assert!(got.rx_ns >= before && got.rx_ns <= got.user_ns);
        if got.source == StampSource::User {
            assert_eq!(got.rx_ns, got.user_ns, "unstamped falls back to user time");
            std::thread::sleep(std::time::Duration::from_millis(1));
            continue;
        }
        stamped = Some(got);
        break;
    }
    let got = stamped.expect("loopback offers software receive stamps");
    assert_eq!(got.source, StampSource::Kernel);
    assert_eq!(got.src, tx.local_addr().unwrap());
}

#[test]
fn truncation_is_reported() {
    let mut rx = LaneSocket::open(&SocketConfig::plain(SocketAddrV4::new(
        Ipv4Addr::LOCALHOST,
        0,
    )))
    .unwrap();
    let tx = LaneSocket::open(&SocketConfig::plain(SocketAddrV4::new(
        Ipv4Addr::LOCALHOST,
        0,
    )))
    .unwrap();
    tx.send_to(&[7u8; 100], rx.local_addr().unwrap()).unwrap();
    let mut buf = [0u8; 10];
    let got = rx.recv(&mut buf).unwrap().unwrap();
    assert!(got.truncated);
    assert_eq!(got.len, 10);
}

#[test]
fn drain_is_bounded_and_reports_cut_datagrams() {
    let mut cfg = SocketConfig::plain(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0));
    cfg.nonblocking = true;
    let mut rx = LaneSocket::open(&cfg).unwrap();
    let tx = LaneSocket::open(&SocketConfig::plain(SocketAddrV4::new(
        Ipv4Addr::LOCALHOST,
        0,
    )))
    .unwrap();
    let dst = rx.local_addr().unwrap();
    for d in [&b"one"[..], &b"two"[..], &[9u8; 40][..]] {
        tx.send_to(d, dst).unwrap();
    }
    let mut buf = [0u8; 16];
    let mut seen: Vec<Option<Vec<u8>>> = Vec::new();
    // At most two per call: not empty yet.
    let empty = rx
        .drain(&mut buf, 2, &mut |d| {
            assert_eq!(d.src, tx.local_addr().unwrap());
            seen.push(d.bytes.map(<[u8]>::to_vec));
        })
        .unwrap();
    assert!(!empty);
    assert_eq!(seen, [Some(b"one".to_vec()), Some(b"two".to_vec())]);
    // The third was longer than the buffer: handed over without bytes.
    let empty = rx
        .drain(&mut buf, 2, &mut |d| seen.push(d.bytes.map(<[u8]>::to_vec)))
        .unwrap();
    assert!(empty);
    assert_eq!(seen.len(), 3);
    assert_eq!(seen[2], None);
}

#[test]
fn nonblocking_empty_is_none() {
    let mut cfg = SocketConfig::plain(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0));
    cfg.nonblocking = true;
    let mut rx = LaneSocket::open(&cfg).unwrap();
    let mut buf = [0u8; 10];
    assert!(rx.recv(&mut buf).unwrap().is_none());
}

#[test]
fn bad_dscp_is_refused() {
    let mut cfg = SocketConfig::plain(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0));
    cfg.dscp = 64;
    assert!(matches!(
        LaneSocket::open(&cfg),
        Err(SocketError::BadDscp(64))
    ));
}

#[test]
fn tx_stamps_come_back_numbered() {
    let mut rx = LaneSocket::open(&SocketConfig::plain(SocketAddrV4::new(
        Ipv4Addr::LOCALHOST,
        0,
    )))
    .unwrap();
    let mut tx = LaneSocket::open(&SocketConfig::plain(SocketAddrV4::new(
        Ipv4Addr::LOCALHOST,
        0,
    )))
    .unwrap();
    tx.enable_tx_timestamps().unwrap();
    let dst = rx.local_addr().unwrap();
    let mut bounds = Vec::new();
    for i in 0..5u8 {
        let before = realtime_ns();
        tx.send_to(&[i; 32], dst).unwrap();
        bounds.push((before, realtime_ns()));
    }
    let mut buf = [0u8; 64];
    for _ in 0..5 {
        let got = rx.recv_stamps(&mut buf).unwrap().expect("a datagram");
        assert_eq!(got.received.len, 32);
    }
    let mut seen = Vec::new();
    for _ in 0..200 {
        match tx.recv_tx_stamp().unwrap() {
            Some(s) => seen.push(s),
            None if seen.len() >= 5 => break,
            None => std::thread::sleep(std::time::Duration::from_millis(1)),
        }
    }
    let sw: Vec<_> = seen.iter().filter(|s| s.software_ns.is_some()).collect();
    assert_eq!(
        sw.len(),
        5,
        "loopback gives one software stamp per datagram: {seen:?}"
    );
    for (k, s) in sw.iter().enumerate() {
        assert_eq!(s.id as usize, k);
        let ns = s.software_ns.unwrap();
        let (lo, hi) = bounds[k];
        assert!(
            ns >= lo && ns <= hi,
            "stamp {ns} outside its send call [{lo}, {hi}]"
        );
    }
    assert!(tx.recv_tx_stamp().unwrap().is_none());
}

mod hw_stamp_tests {
    use super::*;

    #[test]
    fn bad_names_and_refusals_are_typed() {
        for name in ["", "a-name-far-too-long-for-ifnamsiz", "a\0b"] {
            assert!(
                matches!(enable_hw_timestamping(name), Err(HwStampError::BadName(_))),
                "{name:?}"
            );
        }
        // Loopback cannot stamp in hardware; a missing device does not exist.
        for name in ["lo", "xlnosuchdev0"] {
            match enable_hw_timestamping(name) {
                Err(HwStampError::Refused { iface, .. }) => assert_eq!(iface, name),
                other => panic!("{name}: {other:?}"),
            }
        }
    }
}
