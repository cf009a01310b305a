//! The lane daemon over real sockets: bad input is counted and dropped
//! without a panic, and applications talk through the daemons' bridges.

use std::io::{BufRead, BufReader};
use std::net::{SocketAddrV4, UdpSocket};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};
use xlane_host::bridge::{connect, DeliveryHeader};
use xlane_wire::{FrameBuilder, Schema, HEADER_LEN, MAX_FRAME_LEN};

struct Daemon {
    child: Child,
    out: BufReader<ChildStdout>,
}

impl Daemon {
    fn start(args: &[&str]) -> (Daemon, SocketAddrV4) {
        let mut child = Command::new(env!("CARGO_BIN_EXE_xlaned"))
            .args(["--no-tuning", "--fifo", "0", "--core", "0"])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn xlaned");
        let mut out = BufReader::new(child.stdout.take().expect("stdout"));
        let mut line = String::new();
        out.read_line(&mut line).expect("ready line");
        let v: serde_json::Value =
            serde_json::from_str(&line).unwrap_or_else(|e| panic!("ready line {line:?}: {e}"));
        assert_eq!(v["event"], "ready", "{line}");
        let addr = v["addr"]
            .as_str()
            .expect("addr")
            .parse()
            .expect("socket address");
        (Daemon { child, out }, addr)
    }

    /// SIGTERM by PID, then the final JSON counters; asserts a clean exit.
    fn stop(mut self) -> serde_json::Value {
        // SAFETY: signalling the child we started, by its PID.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let mut last = String::new();
        let mut line = String::new();
        while self.out.read_line(&mut line).unwrap_or(0) > 0 {
            last = std::mem::take(&mut line);
        }
        let status = self.child.wait().expect("wait");
        assert!(status.success(), "xlaned exited with {status}");
        serde_json::from_str(&last).unwrap_or_else(|e| panic!("final line {last:?}: {e}"))
    }
}

fn frame(tunnel: u32, seq: u64, chunks: &[&[u8]]) -> Vec<u8> {
    let mut buf = vec![0u8; MAX_FRAME_LEN];
    let mut b = FrameBuilder::new(&mut buf, Schema::Chunk26).expect("builder");
    for c in chunks {
        b.push_chunk(1, c).expect("chunk");
    }
    let n = b.finish(tunnel, seq, 1, 0).expect("finish");
    buf.truncate(n);
    buf
}

fn wait_for(mut f: impl FnMut() -> bool, what: &str) {
    let t = Instant::now();
    while !f() {
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// A receiving and a sending daemon on tunnel 3 (500 µs period), each
/// with its own arguments first and a bridge in `dir`: `n` numbered
/// messages from an application on the sender's bridge must reach one on
/// the receiver's, complete and in order. Returns both daemons' final
/// counters (sender, receiver).
fn talk(
    dir: &std::path::Path,
    (rx_args, rx_bind): (&[&str], &str),
    (tx_args, tx_bind): (&[&str], &str),
    n: u64,
) -> (serde_json::Value, serde_json::Value) {
    let rx_sock = dir.join("rx.sock");
    let tx_sock = dir.join("tx.sock");
    let tunnel = |bridge: &std::path::Path| {
        [
            "--tunnel".to_string(),
            "3".into(),
            "--period-us".into(),
            "500".into(),
            "--bridge".into(),
            bridge.to_str().expect("path").into(),
        ]
    };
    let args = |own: &[&str], bridge, role: &[&str]| -> Vec<String> {
        let mut v: Vec<String> = own.iter().map(|a| a.to_string()).collect();
        v.extend(tunnel(bridge));
        v.extend(role.iter().map(|a| a.to_string()));
        v
    };
    let rx = args(rx_args, &rx_sock, &["receiver", "--bind", rx_bind]);
    let (rxd, rx_addr) = Daemon::start(&rx.iter().map(String::as_str).collect::<Vec<_>>());
    let dest = rx_addr.to_string();
    let tx = args(
        tx_args,
        &tx_sock,
        &["sender", "--bind", tx_bind, "--dest", &dest],
    );
    let (txd, _) = Daemon::start(&tx.iter().map(String::as_str).collect::<Vec<_>>());
    let mut consumer = connect(&rx_sock).expect("connect to receiver's bridge");
    let mut producer = connect(&tx_sock).expect("connect to sender's bridge");
    // The daemons attach applications from their control threads: wait a beat.
    std::thread::sleep(Duration::from_millis(100));
    let mut buf = [0u8; 64];
    let (mut next_expected, mut sent) = (0u64, 0u64);
    wait_for(
        || {
            // A full ring: the lane drains it one frame per period.
            while sent < n && producer.send(&sent.to_be_bytes()).is_ok() {
                sent += 1;
            }
            while let Ok(Some(len)) = consumer.try_recv(&mut buf) {
                let (_, data) = DeliveryHeader::parse(&buf[..len]).expect("a delivery");
                assert_eq!(data.len(), 8, "delivery size");
                let v = u64::from_be_bytes(data.try_into().expect("8 bytes"));
                assert_eq!(v, next_expected, "lost or reordered");
                next_expected += 1;
            }
            next_expected == n
        },
        "all messages through the lane",
    );
    (txd.stop(), rxd.stop())
}

#[test]
fn bad_input_is_counted_and_dropped() {
    let (d, addr) = Daemon::start(&[
        "--tunnel",
        "7",
        "--period-us",
        "1000",
        "receiver",
        "--bind",
        "127.0.0.1:0",
    ]);
    let tx = UdpSocket::bind("127.0.0.1:0").expect("bind");
    let mut seq = 0;
    let send = |b: &[u8]| {
        tx.send_to(b, addr).expect("send");
        std::thread::sleep(Duration::from_micros(300));
    };
    let mut good = 0;
    for _ in 0..10 {
        seq += 1;
        send(&frame(7, seq, &[b"hello", b"world"]));
        good += 1;
    }
    // Malformed: garbage, empty, a lone header byte, and truncated frames.
    let mut malformed = 0;
    for g in [&b"GARBAGE-NOT-A-FRAME"[..], &[], &[0x58], &[0xff; 40]] {
        send(g);
        malformed += 1;
    }
    let whole = frame(7, 100, &[b"abc", b"def", b"ghi"]);
    for cut in [HEADER_LEN - 1, HEADER_LEN + 1, whole.len() - 1] {
        send(&whole[..cut]);
        malformed += 1;
    }
    // A header bit flipped: the header CRC refuses the frame.
    let mut flipped = frame(7, 101, &[b"x"]);
    flipped[12] ^= 0x10;
    send(&flipped);
    malformed += 1;
    // Oversized: larger than σ (and than any lane frame).
    for _ in 0..3 {
        send(&[0u8; 2000]);
    }
    // Wrong tunnel.
    for s in 0..4 {
        send(&frame(8, 200 + s, &[b"other"]));
    }
    // One bad chunk inside an otherwise good frame: the frame counts, the chunk does not.
    seq += 1;
    let mut one_bad = frame(7, seq, &[b"good", b"bad!"]);
    let chunk2 = HEADER_LEN + Schema::Chunk26.chunk_len() + 3;
    one_bad[chunk2] ^= 0x01;
    send(&one_bad);
    good += 1;
    std::thread::sleep(Duration::from_millis(100));
    let v = d.stop();
    assert_eq!(v["frames"], good, "{v}");
    assert_eq!(v["malformed"], malformed, "{v}");
    assert_eq!(v["oversized"], 3, "{v}");
    assert_eq!(v["wrong_tunnel"], 4, "{v}");
    assert_eq!(v["bad_chunks"], 1, "{v}");
    assert_eq!(v["chunks"], 2 * 10 + 1, "{v}");
    assert_eq!(v["datagrams"], good + malformed + 3 + 4, "{v}");
}

#[test]
fn applications_talk_through_two_daemons() {
    let dir = std::env::temp_dir().join(format!("xlaned-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("tmp dir");
    let n: u64 = 5_000;
    let (t, r) = talk(&dir, (&[], "127.0.0.1:0"), (&[], "127.0.0.1:0"), n);
    assert_eq!(t["chunks"], n, "{t}");
    assert_eq!(r["delivered"], n, "{r}");
    assert_eq!(r["lost"], 0, "{r}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn daemons_on_the_lanes_own_rings() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: needs root");
        return;
    }
    let tb = xlane_testbed::Testbed::up(xlane_testbed::TestbedConfig {
        hosts: 2,
        measure_probes: 0,
        lane_core: Some(1),
        ..xlane_testbed::TestbedConfig::default()
    })
    .expect("testbed up");
    let (h0, h1) = (tb.hosts()[0].clone(), tb.hosts()[1].clone());
    let dir = std::env::temp_dir().join(format!("xlaned-xdp-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("tmp dir");
    let n: u64 = 2_000;
    let (rx_bind, tx_bind) = (format!("{}:0", h1.addr), format!("{}:0", h0.addr));
    let (t, r) = talk(
        &dir,
        (&["--netns", &h1.netns, "--rx", "xdp"], &rx_bind),
        (&["--netns", &h0.netns, "--tx", "xdp"], &tx_bind),
        n,
    );
    assert_eq!(t["tx"], "xdp", "{t}");
    assert_eq!(
        t["xdp_sent"], t["frames"],
        "every frame through the ring: {t}"
    );
    assert_eq!(t["xdp_send_refused"], 0, "{t}");
    assert_eq!(r["rx"], "xdp", "{r}");
    assert_eq!(r["xdp_datagrams"], r["datagrams"], "{r}");
    assert_eq!(
        (r["delivered"].as_u64(), r["lost"].as_u64()),
        (Some(n), Some(0)),
        "{r}"
    );

    // A destination off the link: the sender says why and uses its socket.
    let mut child = Command::new(env!("CARGO_BIN_EXE_xlaned"))
        .args(["--no-tuning", "--fifo", "0", "--core", "0"])
        .args(["--netns", &h0.netns, "--tx", "xdp", "--seconds", "0.3"])
        .args(["sender", "--bind", &format!("{}:0", h0.addr)])
        .args(["--dest", "10.254.0.9:9000"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn xlaned");
    let mut err = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().expect("stderr"), &mut err)
        .expect("stderr");
    let out = child.wait_with_output().expect("wait");
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("tx: no resolved neighbour entry for 10.254.0.9")
            && err.contains("sending on the socket"),
        "{err}"
    );
    let last = String::from_utf8_lossy(&out.stdout);
    let v: serde_json::Value =
        serde_json::from_str(last.trim().lines().last().unwrap_or("")).expect("report");
    assert_eq!(v["tx"], "socket", "{v}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn host_measures_are_applied_and_restored_on_sigterm() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: needs root");
        return;
    }
    let path = "/proc/sys/kernel/sched_rt_runtime_us";
    let before = std::fs::read_to_string(path).expect("read rt runtime");
    let mut child = Command::new(env!("CARGO_BIN_EXE_xlaned"))
        .args([
            "--fifo",
            "0",
            "--core",
            "0",
            "receiver",
            "--bind",
            "127.0.0.1:0",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn xlaned");
    let mut out = BufReader::new(child.stdout.take().expect("stdout"));
    let mut line = String::new();
    out.read_line(&mut line).expect("ready line");
    assert!(line.contains("\"ready\""), "{line}");
    let during = std::fs::read_to_string(path).expect("read rt runtime");
    // SAFETY: signalling the child we started, by its PID.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let output = child.wait_with_output().expect("wait");
    let after = std::fs::read_to_string(path).expect("read rt runtime");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "exit {}: {stderr}", output.status);
    assert_eq!(during.trim(), "-1", "RT throttling off while running");
    assert_eq!(after, before, "restored after SIGTERM");
    assert!(
        stderr.contains("host measure: rt_throttling"),
        "measures listed: {stderr}"
    );
}
