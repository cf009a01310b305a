//! Two processes, one bridge: this test binary runs itself again as the
//! application (selected by an environment variable), connects through the
//! UNIX socket, and moves 10^7 messages through the R-X ring; the parent
//! (the daemon) checks each one and echoes it through the X-R ring, where
//! the child checks it again. Also: the daemon learns of a killed
//! application.
//!
//! Every message carries its sequence number, bytes derived from it, and a
//! checksum, and both sides regenerate the message they expect next, so a
//! lost, reordered, duplicated or corrupted message fails the test.

use std::fs;
use std::hint;
use std::io::Read;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use xlane_host::bridge::{
    client, BridgeServer, BridgeServerConfig, LaneEnd, RecvError, RingConfig, SendError,
};

/// Tells a re-executed test binary which role to play: `<mode>:<socket path>`.
const CHILD_ENV: &str = "XLANE_BRIDGE_TEST_CHILD";

const MESSAGES: u64 = 10_000_000;

/// Only a guard against hanging forever; no test asserts a duration.
const HANG_GUARD: Duration = Duration::from_secs(600);

const RING: RingConfig = RingConfig {
    slot_size: 32,
    slots: 4096,
};

/// Length of message `seq`: 16 ..= 32 bytes.
fn msg_len(seq: u64) -> usize {
    16 + (seq.wrapping_mul(7) % 17) as usize
}

fn fnv32(bytes: &[u8]) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for &b in bytes {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    h
}

/// Writes message `seq` into `buf` (at least 32 bytes) and returns its length.
fn encode(seq: u64, buf: &mut [u8]) -> usize {
    let len = msg_len(seq);
    buf[..8].copy_from_slice(&seq.to_le_bytes());
    let salt = (seq >> 8) as u8 ^ (seq >> 24) as u8;
    for (i, b) in buf[8..len - 4].iter_mut().enumerate() {
        *b = (seq as u8).wrapping_add(i as u8) ^ salt;
    }
    let sum = fnv32(&buf[..len - 4]);
    buf[len - 4..len].copy_from_slice(&sum.to_le_bytes());
    len
}

/// Checks that `msg` is exactly message `seq`.
fn check(seq: u64, msg: &[u8]) -> Result<(), String> {
    let mut want = [0u8; 32];
    let len = encode(seq, &mut want);
    if msg == &want[..len] {
        return Ok(());
    }
    let got_seq = msg
        .get(..8)
        .and_then(|b| b.try_into().ok())
        .map(u64::from_le_bytes);
    let sum_ok =
        msg.len() >= 12 && fnv32(&msg[..msg.len() - 4]).to_le_bytes()[..] == msg[msg.len() - 4..];
    Err(format!(
        "expected message {seq} ({len} bytes), got {} bytes carrying seq {got_seq:?}, checksum {}",
        msg.len(),
        if sum_ok { "valid" } else { "INVALID" }
    ))
}

/// Spin, then yield.
struct Idle(u32);

impl Idle {
    fn reset(&mut self) {
        self.0 = 0;
    }

    /// Returns true every ~1024 waits, for slow-path checks.
    fn wait(&mut self) -> bool {
        self.0 = self.0.wrapping_add(1);
        if self.0 < 64 {
            hint::spin_loop();
            false
        } else {
            thread::yield_now();
            self.0 % 1024 == 0
        }
    }
}

/// The child process, killed (by its PID) if the test ends early.
struct ChildGuard(Option<Child>);

impl ChildGuard {
    fn spawn(test_name: &str, mode: &str, sock: &str) -> Self {
        let exe = std::env::current_exe().expect("current test binary");
        let child = Command::new(exe)
            .args([test_name, "--exact", "--nocapture", "--test-threads=1"])
            .env(CHILD_ENV, format!("{mode}:{sock}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn the child test process");
        ChildGuard(Some(child))
    }

    fn child(&mut self) -> &mut Child {
        self.0.as_mut().expect("child present")
    }

    /// Exit status if the child has exited.
    fn exited(&mut self) -> Option<ExitStatus> {
        self.child().try_wait().ok().flatten()
    }

    /// Waits for the child to exit (up to the hang guard) and returns its
    /// status and stderr.
    fn finish(mut self) -> (ExitStatus, String) {
        let deadline = Instant::now() + HANG_GUARD;
        let status = loop {
            if let Some(s) = self.exited() {
                break s;
            }
            if Instant::now() > deadline {
                panic!("child did not exit: {}", self.stderr());
            }
            thread::sleep(Duration::from_millis(5));
        };
        let err = self.stderr();
        self.0 = None;
        (status, err)
    }

    fn stderr(&mut self) -> String {
        let mut s = String::new();
        if let Some(mut e) = self.child().stderr.take() {
            let _ = e.read_to_string(&mut s);
        }
        s
    }

    fn kill(&mut self) {
        let _ = self.child().kill();
        let _ = self.child().wait();
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("xlane-bridge2p-{}-{tag}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).expect("temp dir");
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// In a child process: the role it was started for, if any.
fn child_role() -> Option<(String, String)> {
    let spec = std::env::var(CHILD_ENV).ok()?;
    let (mode, sock) = spec.split_once(':')?;
    Some((mode.to_owned(), sock.to_owned()))
}

fn accept(server: &mut BridgeServer, child: &mut ChildGuard) -> LaneEnd {
    let deadline = Instant::now() + HANG_GUARD;
    loop {
        if let Some(lane) = server.poll_accept().expect("accept") {
            return lane;
        }
        if let Some(status) = child.exited() {
            panic!(
                "child exited before connecting: {status}: {}",
                child.stderr()
            );
        }
        assert!(Instant::now() < deadline, "child never connected");
        thread::sleep(Duration::from_millis(1));
    }
}

fn server(dir: &TempDir) -> (BridgeServer, String) {
    let path = dir.0.join("lane.sock");
    let server = BridgeServer::bind(
        &path,
        BridgeServerConfig {
            to_lane: RING,
            to_app: RING,
            max_clients: 2,
        },
    )
    .expect("bind bridge server");
    (server, path.to_str().expect("utf-8 temp path").to_owned())
}

// ---------------------------------------------------------------------------

const ECHO_TEST: &str = "two_processes_move_ten_million_messages";

#[test]
fn two_processes_move_ten_million_messages() {
    if let Some((mode, sock)) = child_role() {
        assert_eq!(mode, "echo");
        return echo_child(&sock);
    }
    let dir = TempDir::new("echo");
    let (mut server, sock) = server(&dir);
    let mut child = ChildGuard::spawn(ECHO_TEST, "echo", &sock);
    let mut lane = accept(&mut server, &mut child);
    let started = Instant::now();

    let mut expected = 0u64;
    let mut buf = [0u8; 32];
    let mut pending: Option<usize> = None;
    let mut idle = Idle(0);
    let deadline = Instant::now() + HANG_GUARD;
    while expected < MESSAGES || pending.is_some() {
        let mut progress = false;
        if let Some(len) = pending {
            match lane.to_app.try_send(&buf[..len]) {
                Ok(()) => {
                    pending = None;
                    progress = true;
                }
                Err(SendError::Full) => {}
                Err(e) => panic!("echo of message {}: {e}", expected - 1),
            }
        }
        if pending.is_none() {
            let got = lane.from_app.try_recv_with(|m| {
                check(expected, m)?;
                buf[..m.len()].copy_from_slice(m);
                Ok::<usize, String>(m.len())
            });
            match got {
                Ok(Some(Ok(len))) => {
                    pending = Some(len);
                    expected += 1;
                    progress = true;
                }
                Ok(Some(Err(e))) => panic!("daemon side: {e}"),
                Ok(None) => {}
                Err(RecvError::PeerGone) => {
                    panic!(
                        "child went away after {expected} messages: {}",
                        child.stderr()
                    )
                }
                Err(e) => panic!("daemon side, after {expected} messages: {e}"),
            }
        }
        if progress {
            idle.reset();
        } else if idle.wait() {
            if let Some(status) = child.exited() {
                panic!(
                    "child exited ({status}) after {expected} messages: {}",
                    child.stderr()
                );
            }
            assert!(Instant::now() < deadline, "stuck after {expected} messages");
        }
    }
    let elapsed = started.elapsed();
    let (status, stderr) = child.finish();
    assert!(status.success(), "child failed ({status}): {stderr}");
    assert_eq!(expected, MESSAGES);
    assert_eq!(lane.from_app.received(), MESSAGES);
    assert_eq!(lane.to_app.sent(), MESSAGES);
    // The child has exited: its ends are closed, and its socket too.
    let mut rest = [0u8; 32];
    assert_eq!(lane.from_app.try_recv(&mut rest), Err(RecvError::PeerGone));
    eprintln!(
        "moved {MESSAGES} messages each way in {elapsed:?} ({:.1} M round trips/s, informational)",
        MESSAGES as f64 / elapsed.as_secs_f64() / 1e6
    );
}

/// The application: sends every message, checks every echo.
fn echo_child(sock: &str) {
    let mut bridge = client::connect(sock).expect("child: connect");
    let mut next_send = 0u64;
    let mut next_recv = 0u64;
    let mut idle = Idle(0);
    while next_recv < MESSAGES {
        let mut progress = false;
        let mut burst = 0;
        while next_send < MESSAGES && burst < 256 {
            match bridge.send_with(|slot| encode(next_send, slot)) {
                Ok(_) => {
                    next_send += 1;
                    burst += 1;
                    progress = true;
                }
                Err(SendError::Full) => break,
                Err(e) => panic!("child: send of message {next_send}: {e}"),
            }
        }
        loop {
            match bridge.try_recv_with(|m| check(next_recv, m)) {
                Ok(Some(Ok(()))) => {
                    next_recv += 1;
                    progress = true;
                }
                Ok(Some(Err(e))) => panic!("child: echo: {e}"),
                Ok(None) => break,
                Err(e) => panic!("child: after {next_recv} echoes: {e}"),
            }
        }
        if progress {
            idle.reset();
        } else if idle.wait() && !bridge.peer_alive() {
            panic!("child: the daemon went away after {next_recv} echoes");
        }
    }
    assert_eq!(next_send, MESSAGES);
    eprintln!("child: {MESSAGES} messages sent and echoed intact");
}

// ---------------------------------------------------------------------------

const CRASH_TEST: &str = "daemon_learns_of_a_killed_application";
const BEFORE_CRASH: u64 = 1000;

#[test]
fn daemon_learns_of_a_killed_application() {
    if let Some((mode, sock)) = child_role() {
        assert_eq!(mode, "crash");
        return crash_child(&sock);
    }
    let dir = TempDir::new("crash");
    let (mut server, sock) = server(&dir);
    let mut child = ChildGuard::spawn(CRASH_TEST, "crash", &sock);
    let mut lane = accept(&mut server, &mut child);
    // Receive what the child sent, then kill it (SIGKILL: no destructor runs,
    // no closed flag is set; only the kernel closes its socket).
    let mut buf = [0u8; 32];
    let mut got = 0u64;
    let mut idle = Idle(0);
    let deadline = Instant::now() + HANG_GUARD;
    while got < BEFORE_CRASH {
        match lane.from_app.try_recv(&mut buf) {
            Ok(Some(n)) => {
                check(got, &buf[..n]).expect("intact");
                got += 1;
                idle.reset();
            }
            Ok(None) => {
                if idle.wait() {
                    assert!(child.exited().is_none(), "child exited early");
                    assert!(Instant::now() < deadline, "stuck");
                }
            }
            Err(e) => panic!("{e}"),
        }
    }
    assert!(!lane.from_app.is_peer_gone());
    child.kill();
    // The control thread's poll notices; then the lane thread sees PeerGone.
    loop {
        let gone = server.poll_hangups();
        if !gone.is_empty() {
            assert_eq!(gone, vec![lane.id]);
            break;
        }
        assert!(Instant::now() < deadline, "hangup never noticed");
        thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(lane.from_app.try_recv(&mut buf), Err(RecvError::PeerGone));
    assert_eq!(lane.to_app.try_send(b"anyone?"), Err(SendError::PeerGone));
    assert_eq!(server.clients(), 0);
}

/// The application that gets killed: sends a few messages, then waits.
fn crash_child(sock: &str) {
    let mut bridge = client::connect(sock).expect("child: connect");
    let mut buf = [0u8; 32];
    for seq in 0..BEFORE_CRASH {
        let len = encode(seq, &mut buf);
        bridge
            .send_blocking(&buf[..len], None)
            .expect("child: send");
    }
    // Wait to be killed; leave if the daemon disappears instead.
    while bridge.peer_alive() {
        thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn message_encoding_round_trips() {
    let mut buf = [0u8; 32];
    for seq in [0u64, 1, 255, 256, 1 << 24, MESSAGES - 1, u64::MAX] {
        let len = encode(seq, &mut buf);
        assert!((16..=32).contains(&len));
        check(seq, &buf[..len]).expect("own encoding");
        assert!(check(seq.wrapping_add(1), &buf[..len]).is_err());
        let mut bad = buf;
        bad[len / 2] ^= 1;
        assert!(check(seq, &bad[..len]).is_err());
    }
}
