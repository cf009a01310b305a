//! The real client path: a server (the real `BridgeServer`, or a fake one
//! that hands out corrupt rings and malformed hellos) and `client::connect`.

use std::fs::{self, File};
use std::io::Write;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::fs::FileExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::ptr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use memmap2::MmapOptions;
use nix::fcntl::{fcntl, FcntlArg, SealFlag};
use nix::sys::memfd::{memfd_create, MemFdCreateFlag};
use xlane_host::bridge::handshake::{self, HELLO_MAGIC, PROTOCOL_VERSION};
use xlane_host::bridge::layout::{self, field};
use xlane_host::bridge::{
    client, AcceptError, AttachError, BindError, BridgeClient, BridgeServer, BridgeServerConfig,
    ConnectError, Direction, HeaderDefect, LaneEnd, RecvError, Ring, RingConfig, SendError,
};

/// A directory of its own for each test, removed at the end.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> Self {
        static N: AtomicU32 = AtomicU32::new(0);
        let dir = std::env::temp_dir().join(format!(
            "xlane-bridge-{}-{}-{}",
            std::process::id(),
            tag,
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).expect("create temp dir");
        TempDir(dir)
    }

    fn sock(&self) -> PathBuf {
        self.0.join("bridge.sock")
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

fn small() -> RingConfig {
    RingConfig {
        slot_size: 64,
        slots: 16,
    }
}

/// Runs `serve` on the single connection a fake server accepts at `path`,
/// and returns what `connect` made of it.
fn against_fake_server(
    path: &Path,
    serve: impl FnOnce(UnixStream) + Send + 'static,
) -> Result<BridgeClient, ConnectError> {
    let listener = UnixListener::bind(path).expect("bind fake server");
    let server = thread::spawn(move || {
        let (stream, _) = listener.accept().expect("accept");
        serve(stream);
    });
    let result = client::connect_with_timeout(path, Duration::from_secs(10));
    server.join().expect("fake server thread");
    result
}

/// Writes `value` at `offset` into the mapping of `ring`'s memfd.
fn poke<T: Copy>(ring: &Ring, offset: usize, value: T) {
    let map = MmapOptions::new()
        .len(ring.geometry().map_len)
        .map_raw(ring.fd().as_raw_fd())
        .expect("map ring");
    // SAFETY: offset + size_of::<T>() is inside the header; aligned fields.
    unsafe { ptr::write_volatile(map.as_mut_ptr().add(offset).cast::<T>(), value) };
}

fn reseal(ring: &Ring) {
    let map = MmapOptions::new()
        .len(ring.geometry().map_len)
        .map_raw(ring.fd().as_raw_fd())
        .expect("map ring");
    // SAFETY: reading the first 32 header bytes of a live mapping.
    let immutable = unsafe { std::slice::from_raw_parts(map.as_ptr(), 32) };
    let sum = layout::checksum(immutable);
    poke(ring, field::CHECKSUM.start, sum);
}

type Corrupt = fn(&Ring);
type Expect = fn(&AttachError) -> bool;

#[test]
fn corrupt_rings_are_refused_through_the_client_path() {
    let cases: Vec<(&str, Direction, Corrupt, Expect)> = vec![
        (
            "wrong layout version",
            Direction::RegularToExpress,
            |r| poke(r, field::VERSION.start, layout::LAYOUT_VERSION + 1),
            |e| {
                matches!(e, AttachError::VersionMismatch { found, expected }
                    if *found == layout::LAYOUT_VERSION + 1 && *expected == layout::LAYOUT_VERSION)
            },
        ),
        (
            "wrong layout version on the X-R ring",
            Direction::ExpressToRegular,
            |r| poke(r, field::VERSION.start, 0u32),
            |e| matches!(e, AttachError::VersionMismatch { found: 0, .. }),
        ),
        (
            "bad magic",
            Direction::ExpressToRegular,
            |r| poke(r, field::MAGIC.start, 0x1234u64),
            |e| matches!(e, AttachError::BadMagic { found: 0x1234 }),
        ),
        (
            "checksum mismatch",
            Direction::RegularToExpress,
            |r| poke(r, field::SLOT_SIZE.start, 63u32),
            |e| {
                matches!(
                    e,
                    AttachError::CorruptHeader {
                        what: HeaderDefect::Checksum { .. }
                    }
                )
            },
        ),
        (
            "slot count inconsistent with the memfd size",
            Direction::ExpressToRegular,
            |r| {
                poke(r, field::SLOTS.start, 32u32);
                reseal(r);
            },
            |e| {
                matches!(
                    e,
                    AttachError::CorruptHeader {
                        what: HeaderDefect::MappingSize { .. }
                    }
                )
            },
        ),
        (
            "producer index more than slots ahead",
            Direction::ExpressToRegular,
            |r| poke(r, field::PRODUCER_INDEX, 17u64),
            |e| {
                matches!(
                    e,
                    AttachError::CorruptHeader {
                        what: HeaderDefect::Indices {
                            producer: 17,
                            consumer: 0,
                            slots: 16
                        }
                    }
                )
            },
        ),
        (
            "consumer index ahead of the producer",
            Direction::RegularToExpress,
            |r| poke(r, field::CONSUMER_INDEX, 3u64),
            |e| {
                matches!(
                    e,
                    AttachError::CorruptHeader {
                        what: HeaderDefect::Indices { .. }
                    }
                )
            },
        ),
    ];
    let dir = TempDir::new("corrupt");
    for (i, (name, bad, corrupt, expect)) in cases.into_iter().enumerate() {
        let path = dir.0.join(format!("case{i}.sock"));
        let result = against_fake_server(&path, move |stream| {
            let to_lane = Ring::create("t-rx", small()).expect("ring");
            let to_app = Ring::create("t-xr", small()).expect("ring");
            corrupt(if bad == Direction::RegularToExpress {
                &to_lane
            } else {
                &to_app
            });
            handshake::offer(&stream, 7, to_lane.fd(), to_app.fd()).expect("offer");
        });
        match result {
            Err(ConnectError::Attach { direction, source }) => {
                assert_eq!(direction, bad, "{name}");
                assert!(expect(&source), "{name}: unexpected {source:?}");
                // The message is clear.
                eprintln!("{name}: {}", ConnectError::Attach { direction, source });
            }
            other => panic!("{name}: expected a refusal, got {other:?}"),
        }
    }
}

#[test]
fn unsealed_memfd_is_refused_through_the_client_path() {
    let dir = TempDir::new("unsealed");
    let result = against_fake_server(&dir.sock(), |stream| {
        let good = Ring::create("t-rx", small()).expect("ring");
        // Same bytes, in a memfd that anyone could shrink.
        let mut image = vec![0u8; good.geometry().map_len];
        File::from(good.fd().try_clone_to_owned().expect("dup"))
            .read_exact_at(&mut image, 0)
            .expect("read ring");
        let fd = memfd_create(c"t-unsealed", MemFdCreateFlag::MFD_CLOEXEC).expect("memfd");
        let mut f = File::from(fd);
        f.write_all(&image).expect("write");
        let unsealed = OwnedFd::from(f);
        let to_app = Ring::create("t-xr", small()).expect("ring");
        handshake::offer(&stream, 1, unsealed.as_fd(), to_app.fd()).expect("offer");
    });
    assert!(
        matches!(
            result,
            Err(ConnectError::Attach {
                direction: Direction::RegularToExpress,
                source: AttachError::NotSealed
            })
        ),
        "{result:?}"
    );
}

#[test]
fn malformed_hellos_are_refused() {
    type Serve = fn(UnixStream);
    type Want = fn(&ConnectError) -> bool;
    fn two_rings() -> (Ring, Ring) {
        (
            Ring::create("t-rx", small()).expect("ring"),
            Ring::create("t-xr", small()).expect("ring"),
        )
    }
    let cases: Vec<(&str, Serve, Want)> = vec![
        (
            "other protocol version",
            |s| {
                let (a, b) = two_rings();
                let hello = handshake::encode_hello(PROTOCOL_VERSION + 1, 2, 1);
                handshake::send_raw(&s, &hello, &[a.fd().as_raw_fd(), b.fd().as_raw_fd()])
                    .expect("send");
            },
            |e| {
                matches!(e, ConnectError::ProtocolMismatch { found, expected }
                    if *found == PROTOCOL_VERSION + 1 && *expected == PROTOCOL_VERSION)
            },
        ),
        (
            "one descriptor",
            |s| {
                let (a, _b) = two_rings();
                let hello = handshake::encode_hello(PROTOCOL_VERSION, 2, 1);
                handshake::send_raw(&s, &hello, &[a.fd().as_raw_fd()]).expect("send");
            },
            |e| matches!(e, ConnectError::WrongFdCount { got: 1 }),
        ),
        (
            "three descriptors",
            |s| {
                let (a, b) = two_rings();
                let hello = handshake::encode_hello(PROTOCOL_VERSION, 2, 1);
                let fds = [a.fd().as_raw_fd(), b.fd().as_raw_fd(), a.fd().as_raw_fd()];
                handshake::send_raw(&s, &hello, &fds).expect("send");
            },
            |e| matches!(e, ConnectError::WrongFdCount { got: 3 }),
        ),
        (
            "no descriptors",
            |s| {
                let hello = handshake::encode_hello(PROTOCOL_VERSION, 2, 1);
                handshake::send_raw(&s, &hello, &[]).expect("send");
            },
            |e| matches!(e, ConnectError::WrongFdCount { got: 0 }),
        ),
        (
            "bad magic",
            |s| {
                let (a, b) = two_rings();
                let mut hello = handshake::encode_hello(PROTOCOL_VERSION, 2, 1);
                hello[0] ^= 0xff;
                assert_ne!(HELLO_MAGIC.to_ne_bytes()[0], hello[0]);
                handshake::send_raw(&s, &hello, &[a.fd().as_raw_fd(), b.fd().as_raw_fd()])
                    .expect("send");
            },
            |e| matches!(e, ConnectError::BadHello { what: "bad magic" }),
        ),
        (
            "short hello",
            |s| {
                let (a, b) = two_rings();
                let hello = handshake::encode_hello(PROTOCOL_VERSION, 2, 1);
                handshake::send_raw(&s, &hello[..10], &[a.fd().as_raw_fd(), b.fd().as_raw_fd()])
                    .expect("send");
            },
            |e| matches!(e, ConnectError::BadHello { .. }),
        ),
        ("closed without a hello", drop, |e| {
            matches!(e, ConnectError::ServerClosed)
        }),
    ];
    let dir = TempDir::new("hello");
    for (i, (name, serve, want)) in cases.into_iter().enumerate() {
        let path = dir.0.join(format!("case{i}.sock"));
        match against_fake_server(&path, serve) {
            Err(e) => assert!(want(&e), "{name}: unexpected {e:?}"),
            Ok(c) => panic!("{name}: connected {c:?}"),
        }
    }
}

#[test]
fn silent_server_times_out() {
    let dir = TempDir::new("silent");
    let _listener = UnixListener::bind(dir.sock()).expect("bind");
    let result = client::connect_with_timeout(dir.sock(), Duration::from_millis(50));
    assert!(
        matches!(result, Err(ConnectError::Handshake(_))),
        "{result:?}"
    );
    let missing = client::connect(dir.0.join("nobody.sock"));
    assert!(
        matches!(missing, Err(ConnectError::Connect { .. })),
        "{missing:?}"
    );
}

// ---- the real server ----

/// Accepts one client: the client connects in a thread while the server polls.
fn accept_one(server: &mut BridgeServer) -> (LaneEnd, BridgeClient) {
    let path = server.path().to_path_buf();
    let client = thread::spawn(move || client::connect(path));
    let deadline = Instant::now() + Duration::from_secs(60);
    let lane = loop {
        if let Some(lane) = server.poll_accept().expect("accept") {
            break lane;
        }
        assert!(Instant::now() < deadline, "no client showed up");
        thread::sleep(Duration::from_millis(1));
    };
    let client = client.join().expect("client thread").expect("connect");
    assert_eq!(client.id(), lane.id);
    (lane, client)
}

#[test]
fn round_trip_through_the_real_server() {
    let dir = TempDir::new("roundtrip");
    let mut server = BridgeServer::bind(
        dir.sock(),
        BridgeServerConfig {
            to_lane: small(),
            to_app: RingConfig {
                slot_size: 128,
                slots: 4,
            },
            max_clients: 4,
        },
    )
    .expect("bind");
    assert!(server.poll_accept().expect("nobody waiting").is_none());
    let (mut lane, mut app) = accept_one(&mut server);
    assert_eq!(server.clients(), 1);
    assert_eq!(app.max_send(), 64);
    assert_eq!(app.max_recv(), 128);

    app.send(b"query").expect("send");
    assert_eq!(
        app.send(&[0; 65]),
        Err(SendError::TooLarge { len: 65, max: 64 })
    );
    let mut buf = [0u8; 128];
    assert_eq!(lane.from_app.try_recv(&mut buf), Ok(Some(5)));
    assert_eq!(&buf[..5], b"query");
    lane.to_app.try_send(b"answer").expect("send");
    assert_eq!(
        app.recv_blocking(&mut buf, Some(Duration::from_secs(10))),
        Ok(Some(6))
    );
    assert_eq!(&buf[..6], b"answer");
    // Nothing more: the timeout is reported as Ok(None).
    assert_eq!(
        app.recv_blocking(&mut buf, Some(Duration::from_millis(1))),
        Ok(None)
    );
    // X-R ring full: the lane gets Full, never a silent drop.
    for _ in 0..4 {
        lane.to_app.try_send(b"x").expect("room");
    }
    assert_eq!(lane.to_app.try_send(b"x"), Err(SendError::Full));
    // R-X ring full: send_blocking with a timeout reports Full.
    for _ in 0..16 {
        app.send(b"y").expect("room");
    }
    assert_eq!(
        app.send_blocking(b"y", Some(Duration::from_millis(1))),
        Err(SendError::Full)
    );
    assert_eq!(lane.from_app.try_recv(&mut buf), Ok(Some(1)));
    app.send_blocking(b"z", None).expect("room again");
    assert!(server.poll_hangups().is_empty());
    assert!(app.peer_alive());
}

#[test]
fn lane_dropping_its_ends_is_peer_gone_for_the_app() {
    let dir = TempDir::new("lanedrop");
    let mut server = BridgeServer::bind(dir.sock(), BridgeServerConfig::default()).expect("bind");
    let (lane, mut app) = accept_one(&mut server);
    let id = lane.id;
    let mut lane = lane;
    lane.to_app.try_send(b"last words").expect("send");
    drop(lane);
    let mut buf = [0u8; 256];
    assert_eq!(app.try_recv(&mut buf), Ok(Some(10)));
    assert_eq!(app.try_recv(&mut buf), Err(RecvError::PeerGone));
    assert_eq!(app.send(b"anyone?"), Err(SendError::PeerGone));
    // The server notices and closes the connection.
    assert_eq!(server.poll_hangups(), vec![id]);
    assert_eq!(server.clients(), 0);
    assert!(!app.peer_alive());
}

#[test]
fn daemon_going_away_is_peer_gone_for_blocking_calls() {
    let dir = TempDir::new("daemondrop");
    let mut server = BridgeServer::bind(dir.sock(), BridgeServerConfig::default()).expect("bind");
    let (lane, mut app) = accept_one(&mut server);
    // The daemon "dies" without dropping its ring ends: only the socket closes.
    std::mem::forget(lane);
    drop(server);
    assert!(!dir.sock().exists(), "socket file removed on drop");
    let mut buf = [0u8; 256];
    // No timeout: this would spin forever without the liveness check.
    assert_eq!(app.recv_blocking(&mut buf, None), Err(RecvError::PeerGone));
}

#[test]
fn app_crashing_is_peer_gone_for_the_lane() {
    let dir = TempDir::new("appcrash");
    let mut server = BridgeServer::bind(dir.sock(), BridgeServerConfig::default()).expect("bind");
    let (mut lane, mut app) = accept_one(&mut server);
    app.send(b"one").expect("send");
    app.send(b"two").expect("send");
    // The app "crashes": its ring ends set no flag, only its socket closes.
    let (producer, consumer, stream) = app.into_parts();
    std::mem::forget(producer);
    std::mem::forget(consumer);
    drop(stream);
    let mut buf = [0u8; 256];
    assert_eq!(lane.from_app.try_recv(&mut buf), Ok(Some(3)));
    assert_eq!(server.poll_hangups(), vec![lane.id]);
    assert_eq!(lane.from_app.try_recv(&mut buf), Ok(Some(3)));
    assert_eq!(&buf[..3], b"two");
    assert_eq!(lane.from_app.try_recv(&mut buf), Err(RecvError::PeerGone));
    assert_eq!(lane.to_app.try_send(b"hello?"), Err(SendError::PeerGone));
}

#[test]
fn client_limit_closes_extra_connections() {
    let dir = TempDir::new("limit");
    let mut server = BridgeServer::bind(
        dir.sock(),
        BridgeServerConfig {
            max_clients: 1,
            ..BridgeServerConfig::default()
        },
    )
    .expect("bind");
    let (_lane, _app) = accept_one(&mut server);
    let path = dir.sock();
    let second = thread::spawn(move || client::connect(path));
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match server.poll_accept() {
            Err(AcceptError::TooManyClients { max: 1 }) => break,
            Ok(None) => {}
            other => panic!("expected TooManyClients, got {other:?}"),
        }
        assert!(Instant::now() < deadline, "second client never showed up");
        thread::sleep(Duration::from_millis(1));
    }
    let second = second.join().expect("client thread");
    assert!(
        matches!(second, Err(ConnectError::ServerClosed)),
        "{second:?}"
    );
}

#[test]
fn bind_handles_live_and_stale_sockets_and_bad_config() {
    let dir = TempDir::new("bind");
    let path = dir.0.join("sub/dir/x.sock");
    let first = BridgeServer::bind(&path, BridgeServerConfig::default()).expect("bind");
    assert!(matches!(
        BridgeServer::bind(&path, BridgeServerConfig::default()),
        Err(BindError::AddrInUse { .. })
    ));
    drop(first);
    assert!(!path.exists(), "socket file removed on drop");
    // A stale socket (its listener gone, file left behind) is replaced.
    let stale = dir.0.join("stale.sock");
    drop(UnixListener::bind(&stale).expect("bind"));
    assert!(stale.exists());
    let again = BridgeServer::bind(&stale, BridgeServerConfig::default()).expect("rebind");
    drop(again);
    assert!(!stale.exists());
    // A regular file is never removed.
    let file = dir.0.join("file.sock");
    fs::write(&file, b"not a socket").expect("write");
    assert!(matches!(
        BridgeServer::bind(&file, BridgeServerConfig::default()),
        Err(BindError::Listen { .. })
    ));
    assert!(file.exists());
    let bad = BridgeServerConfig {
        to_app: RingConfig {
            slot_size: 8,
            slots: 3,
        },
        ..BridgeServerConfig::default()
    };
    assert!(matches!(
        BridgeServer::bind(dir.0.join("bad.sock"), bad),
        Err(BindError::Config {
            direction: Direction::ExpressToRegular,
            ..
        })
    ));
}

#[test]
fn seal_flags_on_server_rings() {
    // The memfds the server hands out are sealed; the attaching side checks it.
    let ring = Ring::create("t", small()).expect("ring");
    let seals = fcntl(ring.fd().as_raw_fd(), FcntlArg::F_GET_SEALS).expect("seals");
    let want = SealFlag::F_SEAL_SHRINK | SealFlag::F_SEAL_GROW | SealFlag::F_SEAL_SEAL;
    assert_eq!(seals & want.bits(), want.bits());
}
