//! `xlane pipe switchd` as users run it: three library endpoints on
//! loopback scatter through the hop command; every receiver delivers in
//! (timestamp, sender) order and, with reliable messages, gets each
//! exactly once. An endpoint that goes quiet is reported silent and
//! removed, and delivery between the others goes on. The same with the
//! endpoints' beacons as lane frames on their tunnels to the hop's lane
//! port (`--lane-bind`, `--lane-in`): every one taken, none refused.
//! SIGTERM by PID ends the hop with a final status line. Bad arguments
//! get a clear error.

mod common;

use std::collections::{HashMap, HashSet};
use std::io::BufRead;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::process::Command;
use std::time::Duration;
use xlane_pipe::lane::{LanePortConfig, LaneTunnel};
use xlane_pipe::udp::UdpEndpoint;
use xlane_pipe::{ReceiverConfig, SenderConfig};

fn xlane() -> Command {
    Command::new(env!("CARGO_BIN_EXE_xlane"))
}

#[test]
fn scatterings_cross_the_hop_command_in_order() {
    cross_the_hop(false);
}

#[test]
fn scatterings_cross_the_hop_command_in_order_with_lane_beacons() {
    cross_the_hop(true);
}

/// Lane tunnel of process `p` (as a controller would have granted it).
const fn tunnel(p: u32) -> LaneTunnel {
    LaneTunnel {
        tunnel: 40 + p,
        period_ns: 500_000,
    }
}

fn cross_the_hop(lane: bool) {
    let addrs = xlane_testports::udp_n(6);
    let (hop, lane_addr, eps) = (addrs[0], addrs[1], &addrs[2..]);
    let mut cmd = xlane();
    cmd.args(["pipe", "switchd", "--bind", &hop.to_string()])
        // Silent after 200 ms: longer than a busy machine holds a thread.
        .args(["--beacon-us", "500", "--dead-after", "400"]);
    for (p, a) in eps.iter().enumerate() {
        cmd.args(["--input", &a.to_string(), "--route", &format!("{p}={a}")]);
    }
    if lane {
        cmd.args(["--lane-bind", &lane_addr.to_string(), "--lane-dscp", "0"]);
        for p in 0..4 {
            cmd.args(["--lane-in", &format!("{}:500", tunnel(p).tunnel)]);
        }
    }
    let (mut child, out, ready) = common::spawn_until_ready(&mut cmd);
    assert!(ready.contains(&hop.to_string()), "{ready}");
    let peers: HashMap<u32, SocketAddrV4> = eps
        .iter()
        .enumerate()
        .map(|(i, a)| (i as u32, *a))
        .collect();
    let mut ends: Vec<UdpEndpoint> = (0..4u32)
        .map(|p| {
            let mut e = UdpEndpoint::bind(
                eps[p as usize],
                p,
                hop,
                peers.clone(),
                500_000,
                (
                    SenderConfig {
                        rto_ns: 50_000_000,
                        ..SenderConfig::default()
                    },
                    ReceiverConfig::default(),
                ),
            )
            .unwrap();
            if lane {
                e.set_lane(&LanePortConfig {
                    bind: SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0),
                    join: None,
                    multicast_if: None,
                    dscp: 0,
                    tx: Some((tunnel(p), lane_addr)),
                    rx: Vec::new(),
                    window_ns: 50_000_000,
                })
                .unwrap();
            }
            e
        })
        .collect();
    // Process 3 stays quiet from the start: no beacon, no data. The hop
    // reports it silent and goes on without it.
    let live = 3u32;
    let mut sent: HashSet<(u64, u32, u32)> = HashSet::new();
    let mut got: HashMap<u32, Vec<(u64, u32)>> = HashMap::new();
    // A pass waits at most 600 µs (200 µs per live endpoint, less when
    // packets come), so this many passes are 120 s of waiting at most; a
    // run delivers everything in far fewer.
    const MAX_PASSES: u32 = 200_000;
    let mut passes = 0u32;
    let mut k = 0u32;
    loop {
        passes += 1;
        if k < 300 {
            let p = k % live;
            let (a, b) = ((p + 1) % live, (p + 2) % live);
            let msgs: Vec<(u32, &[u8])> = vec![(a, b"x"), (b, b"y")];
            let ts = ends[p as usize].scatter(&msgs, true).unwrap();
            sent.insert((ts, p, a));
            sent.insert((ts, p, b));
            k += 1;
        }
        for (p, e) in ends.iter_mut().enumerate().take(live as usize) {
            e.wait(Duration::from_micros(200)).unwrap();
            while let Some(d) = e.poll_deliver() {
                got.entry(p as u32).or_default().push((d.ts, d.src));
            }
        }
        let n: usize = got.values().map(Vec::len).sum();
        if k == 300 && n == sent.len() {
            break;
        }
        if passes >= MAX_PASSES {
            let missing: Vec<&(u64, u32, u32)> = sent
                .iter()
                .filter(|(ts, src, dst)| !got.get(dst).is_some_and(|g| g.contains(&(*ts, *src))))
                .take(10)
                .collect();
            panic!(
                "stuck after {passes} passes: {n} of {} delivered, {} of 300 \
                 scatterings sent, undelivered (ts, src, dst) include {missing:?}",
                sent.len(),
                k
            );
        }
    }
    for (p, ds) in &got {
        assert!(
            ds.windows(2).all(|w| w[0] < w[1]),
            "receiver {p} out of order"
        );
        for &(ts, src) in ds {
            assert!(sent.contains(&(ts, src, *p)), "unknown message");
        }
    }
    assert_eq!(
        unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) },
        0
    );
    assert!(child.wait().unwrap().success());
    let lines: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(&l.unwrap()).unwrap())
        .collect();
    let silent: Vec<&serde_json::Value> = lines
        .iter()
        .filter(|l| l["event"] == "link_silent")
        .collect();
    assert_eq!(silent.len(), 1, "{lines:?}");
    assert_eq!(silent[0]["input"], eps[3].to_string());
    let fin = lines.last().unwrap();
    assert_eq!(fin["event"], "stopped");
    assert_eq!(fin["refused"], 0, "{fin}");
    assert_eq!(fin["live_inputs"], 3, "{fin}");
    assert_eq!(fin["rejoined"], 0, "{fin}");
    assert!(fin["received"].as_u64().unwrap() >= 600, "{fin}");
    if lane {
        let l = &fin["lane"];
        assert!(l["received"].as_u64().unwrap() > 0, "{fin}");
        assert_eq!(l["refused"], 0, "{fin}");
        let sent: u64 = ends.iter().map(|e| e.lane_stats().unwrap().sent).sum();
        assert!(sent >= l["received"].as_u64().unwrap(), "{fin}");
    } else {
        assert!(fin["lane"].is_null(), "{fin}");
    }
}

#[test]
fn bad_arguments_are_refused_clearly() {
    let lane = |extra: &'static [&'static str]| {
        let mut v = vec!["--input", "127.0.0.1:9", "--route", "1=127.0.0.1:9"];
        v.extend_from_slice(extra);
        v
    };
    for (args, says) in [
        (lane(&["--lane-in", "4:500"]), "--lane-bind"),
        (
            lane(&["--lane-bind", "127.0.0.1:0", "--lane-in", "4"]),
            "TUNNEL:PERIOD_US",
        ),
        (
            lane(&["--lane-bind", "127.0.0.1:0", "--lane-in", "4:0"]),
            "at least 1 µs",
        ),
        (
            lane(&["--lane-bind", "127.0.0.1:0", "--lane-out", "4:500"]),
            "TUNNEL:PERIOD_US@IPv4:PORT",
        ),
        (
            lane(&[
                "--lane-bind",
                "127.0.0.1:0",
                "--lane-in",
                "4:500",
                "--lane-in",
                "4:600",
            ]),
            "given twice",
        ),
    ] {
        let out = xlane()
            .args(["pipe", "switchd", "--bind", "127.0.0.1:0"])
            .args(&args)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} was accepted");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
    for (args, says) in [
        (&["--input", "127.0.0.1:9"][..], "--route"),
        (
            &["--input", "127.0.0.1:9", "--route", "x=127.0.0.1:9"][..],
            "bad route",
        ),
        (
            &[
                "--input",
                "127.0.0.1:9",
                "--route",
                "1=127.0.0.1:9",
                "--route",
                "1=127.0.0.1:8",
            ][..],
            "routed twice",
        ),
        (
            &["--input", "127.0.0.1:0", "--route", "1=127.0.0.1:9"][..],
            "own --bind",
        ),
        (
            &[
                "--input",
                "127.0.0.1:9",
                "--route",
                "1=127.0.0.1:9",
                "--beacon-us",
                "0",
            ][..],
            "--beacon-us",
        ),
        (
            &[
                "--input",
                "127.0.0.1:9",
                "--route",
                "1=127.0.0.1:9",
                "--hold-silent",
            ][..],
            "needs a --coordinator",
        ),
        (
            &[
                "--input",
                "127.0.0.1:9",
                "--route",
                "1=127.0.0.1:9",
                "--coordinator",
                "127.0.0.1:7",
            ][..],
            "needs --hold-silent",
        ),
    ] {
        let out = xlane()
            .args(["pipe", "switchd", "--bind", "127.0.0.1:0"])
            .args(args)
            .output()
            .expect("run xlane");
        assert!(!out.status.success(), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(says), "{args:?}: {err}");
    }
}
