//! A real daemon on 127.0.0.1 (port 0) with the testbed's star topology:
//! authentication, grants and TE upcalls (checked against the allocator run
//! directly), malformed and stalled clients, restart on the same state
//! directory (also after a torn journal), and monitoring.

mod common;

use common::*;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::{Duration, Instant};
use xlane_ctl::auth::{Key, Keys};
use xlane_ctl::client::{Client, ClientError};
use xlane_ctl::fabric::{FabricOp, RecordingFabric, SwitchMeter};
use xlane_ctl::proto::{
    ClientMsg, Message, MeterReading, Reason, RefusalCode, ServerMsg, TerminateReason, TunnelId,
    TunnelState, Upcall,
};
use xlane_ctl::server::{Server, ServerConfig};
use xlane_ctl::store::{FsyncPolicy, Store};
use xlane_te::{Allocator, Request, TeConfig};

struct Fixture {
    keys: Keys,
    fabric: RecordingFabric,
}

fn keys() -> Keys {
    Keys::generate(&["h0", "h1", "h2", "h3"]).unwrap()
}

fn config(dir: &Path) -> ServerConfig {
    let mut cfg = ServerConfig::new("127.0.0.1:0".parse().unwrap(), dir.to_path_buf());
    cfg.fsync = FsyncPolicy::Always;
    cfg.policy = policy();
    cfg.tick_interval = Duration::from_millis(10);
    cfg.handshake_timeout = Duration::from_secs(2);
    cfg.frame_timeout = Duration::from_millis(300);
    cfg
}

fn start(dir: &Path, fx: &Fixture) -> Server {
    Server::start(
        config(dir),
        star4(),
        fx.keys.clone(),
        Box::new(fx.fabric.clone()),
    )
    .unwrap()
}

fn fixture() -> Fixture {
    Fixture {
        keys: keys(),
        fabric: RecordingFabric::new(),
    }
}

fn client(s: &Server, fx: &Fixture, h: &str) -> Client {
    let mut c = Client::connect(s.local_addr(), h, fx.keys.get(h).unwrap()).unwrap();
    c.set_timeout(Duration::from_secs(5));
    c
}

fn refused(e: ClientError) -> RefusalCode {
    match e {
        ClientError::Refused { code, .. } => code,
        e => panic!("expected a refusal, got {e:?}"),
    }
}

/// Read raw frames until the server closes (or `limit` passes).
fn read_until_closed(stream: &mut TcpStream, limit: Duration) -> (Vec<ServerMsg>, bool) {
    stream
        .set_read_timeout(Some(Duration::from_millis(50)))
        .unwrap();
    let deadline = Instant::now() + limit;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let mut closed = false;
    while Instant::now() < deadline {
        match stream.read(&mut chunk) {
            Ok(0) => {
                closed = true;
                break;
            }
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e)
                if e.kind() == std::io::ErrorKind::WouldBlock
                    || e.kind() == std::io::ErrorKind::TimedOut => {}
            Err(_) => {
                closed = true;
                break;
            }
        }
    }
    let mut msgs = Vec::new();
    let mut at = 0;
    while let Ok((m, n)) = ServerMsg::decode(&buf[at..]) {
        msgs.push(m);
        at += n;
    }
    (msgs, closed)
}

#[test]
fn authentication_failures_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let fx = fixture();
    let s = start(dir.path(), &fx);
    let wrong = Key([7u8; 32]);
    for (host, key) in [
        ("h0", &wrong),
        ("nobody", &wrong),
        ("h1", fx.keys.get("h0").unwrap()),
    ] {
        let e = Client::connect(s.local_addr(), host, key).unwrap_err();
        assert_eq!(refused(e), RefusalCode::Unauthenticated, "{host}");
    }
    // A request before any handshake: refused, connection closed.
    let mut raw = TcpStream::connect(s.local_addr()).unwrap();
    raw.write_all(&ClientMsg::ListTunnels.to_frame().unwrap())
        .unwrap();
    let (msgs, closed) = read_until_closed(&mut raw, Duration::from_secs(3));
    assert!(closed);
    assert!(
        matches!(
            &msgs[..],
            [ServerMsg::Refused {
                code: RefusalCode::Unauthenticated,
                ..
            }]
        ),
        "{msgs:?}"
    );
    // A silent connection is closed after the handshake timeout.
    let mut idle = TcpStream::connect(s.local_addr()).unwrap();
    let (msgs, closed) = read_until_closed(&mut idle, Duration::from_secs(5));
    assert!(closed, "handshake timeout");
    assert!(matches!(
        &msgs[..],
        [ServerMsg::Refused {
            code: RefusalCode::Unauthenticated,
            ..
        }]
    ));
    assert_eq!(s.stats().auth_failures, 3);
    // The right key works.
    let mut c = client(&s, &fx, "h0");
    assert_eq!(c.list().unwrap(), (vec![], false));
}

#[test]
fn grants_and_te_upcalls_match_the_allocator() {
    let dir = tempfile::tempdir().unwrap();
    let fx = fixture();
    let s = start(dir.path(), &fx);
    let mut c0 = client(&s, &fx, "h0");
    let mut c2 = client(&s, &fx, "h2");
    c0.subscribe().unwrap();
    let g1 = c0.request(&names(&["h1"]), 1000, 100_000, 0).unwrap();
    let g2 = c2.request(&names(&["h1"]), 500, 200_000, 0).unwrap();
    // The same requests on the allocator directly.
    let mut a = Allocator::new(star4(), TeConfig::default());
    let r = |s: &str, load, period| Request {
        sender: s.into(),
        receivers: names(&["h1"]),
        load_bytes: load,
        period_ns: period,
        sublane: 0,
    };
    let a1 = a.request(&r("h0", 1000, 100_000)).unwrap();
    let a2 = a.request(&r("h2", 500, 200_000)).unwrap();
    assert_eq!((g1.tunnel, g1.resources), (TunnelId(1), a1.resources));
    assert_eq!((g2.tunnel, g2.resources), (TunnelId(2), a2.resources));
    // Whatever the allocator says changed, h0 hears, with its numbers.
    let up = c0.next_upcall(Duration::from_millis(500)).unwrap();
    match (&a2.changed[..], up) {
        ([], None) => {}
        (
            [ch],
            Some(Upcall::BandwidthChanged {
                tunnel,
                old,
                new,
                reason: Reason::Te,
                ..
            }),
        ) => {
            assert_eq!((tunnel, old, new), (TunnelId(ch.tunnel.0), ch.old, ch.new));
        }
        (ch, up) => panic!("allocator changed {ch:?}, upcall {up:?}"),
    }
    // On the star the two share sw->h1, so there is one.
    assert_eq!(a2.changed.len(), 1);
    // h2 did not subscribe and h0's tunnel is not h2's: nothing for h2.
    let (list, truncated) = c2.list().unwrap();
    assert!(!truncated);
    assert_eq!(list.len(), 2);
    assert_eq!(list[0].resources, a.tunnel(a1.tunnel).unwrap().resources());
    // Fabric: both installed.
    let ops = fx.fabric.ops();
    assert!(
        matches!(
            &ops[..],
            [
                FabricOp::Install {
                    tunnel: TunnelId(1),
                    ..
                },
                FabricOp::Install {
                    tunnel: TunnelId(2),
                    ..
                }
            ]
        ),
        "{ops:?}"
    );
    // Authorization over the wire.
    assert_eq!(
        refused(c2.release(g1.tunnel).unwrap_err()),
        RefusalCode::Forbidden
    );
    assert_eq!(
        refused(c2.change(TunnelId(9), 1, 1_000_000).unwrap_err()),
        RefusalCode::UnknownTunnel
    );
    let e = c2
        .call(&ClientMsg::RequestBandwidth {
            sender: "h0".into(),
            receivers: names(&["h1"]),
            load_bytes: 1,
            period_ns: 1_000_000,
            sublane: 0,
        })
        .unwrap_err();
    assert_eq!(refused(e), RefusalCode::Forbidden);
    assert_eq!(s.tunnels().len(), 2);
    // Release: h0 hears its range shrink back.
    c2.release(g2.tunnel).unwrap();
    match c0.next_upcall(Duration::from_secs(2)).unwrap() {
        Some(Upcall::BandwidthChanged {
            tunnel,
            new,
            reason: Reason::Te,
            grace_ns: 0,
            ..
        }) => {
            assert_eq!((tunnel, new), (g1.tunnel, g1.resources));
        }
        u => panic!("{u:?}"),
    }
}

#[test]
fn a_malformed_or_stalled_client_is_cut_off_and_others_are_served() {
    let dir = tempfile::tempdir().unwrap();
    let fx = fixture();
    let s = start(dir.path(), &fx);
    let mut good = client(&s, &fx, "h1");
    // An authenticated client sends garbage: Refused{Malformed}, then closed.
    let mut bad = client(&s, &fx, "h0");
    bad.send_raw(&[0, 0, 0, 3, 1, 0x7e, 0]).unwrap();
    match bad.recv(Duration::from_secs(2)) {
        Ok(Some(ServerMsg::Refused {
            code: RefusalCode::Malformed,
            message,
        })) => {
            assert!(message.contains("unknown message kind"), "{message}");
        }
        r => panic!("{r:?}"),
    }
    assert!(matches!(
        bad.recv(Duration::from_secs(2)),
        Err(ClientError::Closed)
    ));
    // An oversized length is refused from the header alone.
    let mut raw = TcpStream::connect(s.local_addr()).unwrap();
    raw.write_all(&[0xff, 0xff, 0xff, 0xff]).unwrap();
    let (msgs, closed) = read_until_closed(&mut raw, Duration::from_secs(2));
    assert!(closed);
    assert!(
        matches!(&msgs[..], [ServerMsg::Refused { code: RefusalCode::Malformed, message }] if message.contains("exceeds"))
    );
    // Half a frame, then silence: the others are served meanwhile, and the
    // staller is cut off after the frame timeout.
    let mut stall = TcpStream::connect(s.local_addr()).unwrap();
    let hello = ClientMsg::Hello {
        host: "h3".into(),
        client_nonce: [1; 32],
    }
    .to_frame()
    .unwrap();
    stall.write_all(&hello[..10]).unwrap();
    let t = Instant::now();
    let g = good.request(&names(&["h2"]), 100, 1_000_000, 1).unwrap();
    assert_eq!(g.tunnel, TunnelId(1));
    let (msgs, closed) = read_until_closed(&mut stall, Duration::from_secs(3));
    assert!(closed && t.elapsed() < Duration::from_secs(3));
    assert!(
        matches!(
            &msgs[..],
            [ServerMsg::Refused {
                code: RefusalCode::Malformed,
                ..
            }]
        ),
        "{msgs:?}"
    );
    // The daemon still serves, and nothing changed.
    assert_eq!(good.list().unwrap().0.len(), 1);
    let mut again = client(&s, &fx, "h0");
    assert_eq!(again.list().unwrap().0.len(), 1);
    assert!(s.stats().malformed >= 3);
}

#[test]
fn too_many_connections_get_busy() {
    let dir = tempfile::tempdir().unwrap();
    let fx = fixture();
    let mut cfg = config(dir.path());
    cfg.max_connections = 1;
    let s = Server::start(cfg, star4(), fx.keys.clone(), Box::new(fx.fabric.clone())).unwrap();
    let _first = client(&s, &fx, "h0");
    let e = Client::connect(s.local_addr(), "h1", fx.keys.get("h1").unwrap()).unwrap_err();
    assert!(
        matches!(
            e,
            ClientError::Refused {
                code: RefusalCode::Busy,
                ..
            } | ClientError::Closed
                | ClientError::Io(_)
        ),
        "{e:?}"
    );
}

#[test]
fn restart_on_the_same_state_dir_recovers_the_tunnels() {
    let dir = tempfile::tempdir().unwrap();
    let fx = fixture();
    let before;
    {
        let s = start(dir.path(), &fx);
        let mut c0 = client(&s, &fx, "h0");
        let mut c3 = client(&s, &fx, "h3");
        c0.request(&names(&["h1", "h2"]), 200, 300_000, 0).unwrap();
        let t2 = c3
            .request(&names(&["h1"]), 1500, 100_000, 0)
            .unwrap()
            .tunnel;
        c0.request(&names(&["h3"]), 64, 50_000, 1).unwrap();
        c3.change(t2, 1000, 150_000).unwrap();
        c3.request(&names(&["h0"]), 10, 1_000_000, 1).unwrap();
        c3.release(TunnelId(4)).unwrap();
        before = s.tunnels();
        s.stop();
    }
    assert_eq!(before.len(), 3);
    let fabric2 = RecordingFabric::new();
    let fx2 = Fixture {
        keys: fx.keys.clone(),
        fabric: fabric2.clone(),
    };
    {
        let s = start(dir.path(), &fx2);
        assert_eq!(s.recovery().torn_tail, None);
        assert_eq!(s.tunnels(), before);
        // The fabric was reprogrammed from scratch.
        let installs: Vec<_> = fabric2.ops().iter().map(|o| o.tunnel()).collect();
        assert_eq!(installs, vec![TunnelId(1), TunnelId(2), TunnelId(3)]);
        // Ids are never reused: the released 4 stays gone.
        let mut c1 = client(&s, &fx2, "h1");
        assert_eq!(
            c1.request(&names(&["h0"]), 10, 1_000_000, 1)
                .unwrap()
                .tunnel,
            TunnelId(5)
        );
        // The host reconciles: its own tunnel kept, a stranger terminated.
        let mut c0 = client(&s, &fx2, "h0");
        let r = c0
            .reconcile(&[TunnelId(1), TunnelId(3), TunnelId(77)])
            .unwrap();
        assert_eq!(r.kept, vec![TunnelId(1), TunnelId(3)]);
        assert_eq!(r.terminated, vec![TunnelId(77)]);
        s.stop();
    }
    // A crash mid-append: cut the journal inside its last record.
    let j = Store::journal_path(dir.path());
    let len = std::fs::metadata(&j).unwrap().len();
    let f = std::fs::OpenOptions::new().write(true).open(&j).unwrap();
    f.set_len(len - 5).unwrap();
    drop(f);
    let s = start(dir.path(), &fx2);
    let torn = s.recovery().torn_tail.clone().expect("torn tail reported");
    assert!(torn.discarded_bytes > 0 && torn.offset < len);
    assert_eq!(
        s.tunnels(),
        before,
        "the lost last record was tunnel 5's grant"
    );
    let mut c1 = client(&s, &fx2, "h1");
    // The cut record was tunnel 5's grant: it is gone, so its id is free.
    assert_eq!(
        c1.request(&names(&["h0"]), 10, 1_000_000, 1)
            .unwrap()
            .tunnel,
        TunnelId(5)
    );
}

#[test]
fn compaction_keeps_the_state_across_restarts() {
    let dir = tempfile::tempdir().unwrap();
    let fx = fixture();
    let before;
    {
        let mut cfg = config(dir.path());
        cfg.compact_every = 3;
        let s = Server::start(cfg, star4(), fx.keys.clone(), Box::new(fx.fabric.clone())).unwrap();
        let mut c = client(&s, &fx, "h2");
        for i in 0..7u64 {
            let g = c
                .request(&names(&["h0"]), 100 + i as u32, 1_000_000, (i % 2) as u8)
                .unwrap();
            if i % 3 == 1 {
                c.release(g.tunnel).unwrap();
            }
        }
        assert!(s.stats().compactions >= 2, "{:?}", s.stats());
        before = s.tunnels();
    }
    let s = start(dir.path(), &fx);
    assert!(s.recovery().snapshot_records > 0);
    assert_eq!(s.tunnels(), before);
    let mut c = client(&s, &fx, "h2");
    assert_eq!(
        c.request(&names(&["h1"]), 1, 1_000_000, 0).unwrap().tunnel,
        TunnelId(8)
    );
}

#[test]
fn exceeding_meters_demote_and_notify() {
    let dir = tempfile::tempdir().unwrap();
    let fx = fixture();
    let s = start(dir.path(), &fx);
    let mut c0 = client(&s, &fx, "h0");
    let mut c2 = client(&s, &fx, "h2");
    c0.subscribe().unwrap();
    c2.subscribe().unwrap();
    let g0 = c0.request(&names(&["h1"]), 1000, 100_000, 0).unwrap();
    let _ = c0.next_upcall(Duration::from_millis(100)).unwrap();
    let g2 = c2.request(&names(&["h1"]), 1000, 100_000, 0).unwrap();
    // h0's jitter grew with h2's tunnel (Te upcall).
    let grown = match c0.next_upcall(Duration::from_secs(2)).unwrap() {
        Some(Upcall::BandwidthChanged {
            new,
            reason: Reason::Te,
            ..
        }) => new,
        u => panic!("{u:?}"),
    };
    // h2 reports three times its allocation.
    let interval = g2.resources.period_ns * 100;
    c2.report_meters(&[MeterReading {
        tunnel: g2.tunnel,
        packets: 300,
        bytes: 300_000,
        interval_ns: interval,
    }])
    .unwrap();
    match c2.next_upcall(Duration::from_secs(2)).unwrap() {
        Some(Upcall::BandwidthChanged {
            tunnel,
            old,
            new,
            reason: Reason::BwExceeded,
            ..
        }) => {
            assert_eq!((tunnel, old), (g2.tunnel, g2.resources));
            assert_eq!(new.max_jitter_ns, xlane_ctl::proto::UNBOUNDED_NS);
        }
        u => panic!("{u:?}"),
    }
    match c0.next_upcall(Duration::from_secs(2)).unwrap() {
        Some(Upcall::BandwidthChanged {
            tunnel,
            old,
            new,
            reason: Reason::Te,
            ..
        }) => {
            assert_eq!((tunnel, old, new), (g0.tunnel, grown, g0.resources));
        }
        u => panic!("{u:?}"),
    }
    assert!(fx
        .fabric
        .ops()
        .contains(&FabricOp::Demote { tunnel: g2.tunnel }));
    let (list, _) = c0.list().unwrap();
    assert_eq!(list[1].state, TunnelState::Unbounded);
    // The switch keeps seeing drops (K = 2 further intervals): terminated.
    for _ in 0..2 {
        fx.fabric.push_meters(vec![SwitchMeter {
            tunnel: g2.tunnel,
            packets: 10,
            bytes: 10_000,
            dropped_packets: 5,
            interval_ns: 1_000_000,
        }]);
    }
    match c2.next_upcall(Duration::from_secs(3)).unwrap() {
        Some(Upcall::BandwidthTerminated {
            tunnel,
            reason: TerminateReason::BwExceeded,
        }) => {
            assert_eq!(tunnel, g2.tunnel)
        }
        u => panic!("{u:?}"),
    }
    assert_eq!(s.tunnels().len(), 1);
    // And the daemon's state survives a restart exactly.
    let before = s.tunnels();
    drop(s);
    let s = start(dir.path(), &fx);
    assert_eq!(s.tunnels(), before);
}

/// A tunnel's MAC key goes to its sender and its receivers, the same to
/// each, and to no other host; it differs from tunnel to tunnel and stays
/// across a restart on the same state directory.
#[test]
fn tunnel_keys_go_to_the_tunnels_hosts_only_and_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let fx = fixture();
    let s = start(dir.path(), &fx);
    let mut h0 = client(&s, &fx, "h0");
    let a = h0
        .request(&["h1".into(), "h2".into()], 100, 1_000_000, 0)
        .unwrap();
    let b = h0.request(&["h3".into()], 100, 1_000_000, 0).unwrap();
    let k = h0.tunnel_key(a.tunnel).unwrap();
    assert_eq!(client(&s, &fx, "h1").tunnel_key(a.tunnel).unwrap(), k);
    assert_eq!(client(&s, &fx, "h2").tunnel_key(a.tunnel).unwrap(), k);
    assert_eq!(
        refused(client(&s, &fx, "h3").tunnel_key(a.tunnel).unwrap_err()),
        RefusalCode::Forbidden
    );
    assert_eq!(
        refused(h0.tunnel_key(TunnelId(999)).unwrap_err()),
        RefusalCode::UnknownTunnel
    );
    let kb = h0.tunnel_key(b.tunnel).unwrap();
    assert_ne!(kb, k);
    drop(h0);
    s.stop();
    let s = start(dir.path(), &fx);
    assert_eq!(client(&s, &fx, "h2").tunnel_key(a.tunnel).unwrap(), k);
    assert_eq!(client(&s, &fx, "h3").tunnel_key(b.tunnel).unwrap(), kb);
    s.stop();
}
