//! `xlane rpc router` as users run it: two R2P2 servers (the library's, in
//! this process) behind the router on loopback, a client sending through
//! it; SIGTERM by PID ends it with a final status line that counts every
//! request. Bad arguments get a clear error and no router.

mod common;

use std::io::BufRead;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, UdpSocket};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use xlane_rpc::udp::{RpcClient, RpcServer};
use xlane_rpc::{ClientConfig, Outcome, ServerConfig};

const ANY: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0);

fn xlane() -> Command {
    Command::new(env!("CARGO_BIN_EXE_xlane"))
}

#[test]
fn requests_cross_the_router_command() {
    // A free port for the router, which the servers must know first.
    let router_addr = match UdpSocket::bind(ANY).unwrap().local_addr().unwrap() {
        SocketAddr::V4(a) => a,
        SocketAddr::V6(_) => unreachable!(),
    };
    let stop = Arc::new(AtomicBool::new(false));
    let mut servers = Vec::new();
    for _ in 0..2 {
        let cfg = ServerConfig {
            feedback_to: Some(router_addr),
            reply_hold_ns: 120_000_000_000,
            reassembly_timeout_ns: 60_000_000_000,
            ..ServerConfig::default()
        };
        let mut s = RpcServer::bind(ANY, cfg).unwrap();
        let addr = s.local_addr();
        let stop = stop.clone();
        let t = std::thread::spawn(move || {
            let mut served = 0u64;
            while !stop.load(Ordering::Relaxed) {
                s.wait(Duration::from_millis(20)).unwrap();
                while let Some(inc) = s.poll_request() {
                    let reply = s.request(inc.handle).unwrap().to_vec();
                    s.respond(inc.handle, &reply).unwrap();
                    served += 1;
                }
            }
            served
        });
        servers.push((addr, t));
    }
    let mut cmd = xlane();
    cmd.args(["rpc", "router", "--bind", &router_addr.to_string()])
        .args(["--policy", "jsq", "--feedback-timeout-ms", "60000"])
        // Admission control on, with an SLO no request breaks here.
        .args([
            "--slo",
            "p99=60s",
            "--admission",
            "cap",
            "--never-drop",
            "0,2",
        ])
        .args(["--status-every", "1"]);
    for (a, _) in &servers {
        cmd.args(["--server", &a.to_string()]);
    }
    let (mut child, mut out, ready) = common::spawn_until_ready(&mut cmd);
    let ready: serde_json::Value = serde_json::from_str(&ready).unwrap();
    assert_eq!(ready["policy"], "jsq");
    assert_eq!(ready["slo"], "p99=60s");

    let mut client = RpcClient::bind(
        ANY,
        ClientConfig {
            request_timeout_ns: 60_000_000_000,
            rid_quarantine_ns: 120_000_000_000,
            // Request class 2 (the R2P2 policy value), never dropped.
            policy: 2,
            ..ClientConfig::new(ANY)
        },
    )
    .unwrap();
    let mut pending = std::collections::HashMap::new();
    for i in 0..40usize {
        let req = format!("request {i}")
            .repeat(1 + (i % 3) * 200)
            .into_bytes();
        pending.insert(client.send(router_addr, &req).unwrap(), req);
    }
    let total = pending.len() as u64;
    while !pending.is_empty() {
        client.wait(Duration::from_millis(50)).unwrap();
        while let Some(c) = client.poll_completion() {
            let req = pending.remove(&c.handle).expect("completes once");
            assert_eq!(c.outcome, Outcome::Reply);
            assert!(client.reply(c.handle) == Some(&req[..]));
            client.release(c.handle);
        }
    }
    // FEEDBACK follows each reply: read status lines until the router has
    // counted them all, then stop it.
    let mut line = String::new();
    loop {
        line.clear();
        assert!(out.read_line(&mut line).unwrap() > 0, "router ended early");
        let s: serde_json::Value = serde_json::from_str(&line).unwrap();
        if s["feedbacks"] == total {
            break;
        }
    }
    assert_eq!(
        unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) },
        0
    );
    assert!(child.wait().unwrap().success());
    let mut last = String::new();
    for line in out.lines() {
        last = line.unwrap();
    }
    let fin: serde_json::Value = serde_json::from_str(&last).unwrap();
    assert_eq!(fin["event"], "stopped");
    assert_eq!(fin["forwarded"], total);
    assert_eq!(fin["feedbacks"], total, "{fin}");
    assert_eq!(fin["dropped"], 0);
    assert_eq!(fin["admission_drops"], 0, "{fin}");
    // One class seen: 2, with its own controller.
    let classes = fin["admission_classes"].as_array().expect("classes");
    assert_eq!(classes.len(), 1, "{fin}");
    assert_eq!(classes[0]["class"], 2, "{fin}");
    assert_eq!(classes[0]["requests"], total, "{fin}");
    assert_eq!(classes[0]["drops"], 0, "{fin}");
    assert!(classes[0]["cap"].as_u64().is_some_and(|c| c >= 1), "{fin}");
    stop.store(true, Ordering::Relaxed);
    let served: u64 = servers.into_iter().map(|(_, t)| t.join().unwrap()).sum();
    assert_eq!(served, total);
}

#[test]
fn bad_arguments_are_refused_clearly() {
    for (args, says) in [
        (
            &["--server", "127.0.0.1:9", "--policy", "jbsq:0"][..],
            "unknown policy",
        ),
        (
            &["--server", "127.0.0.1:9", "--policy", "fastest"][..],
            "unknown policy",
        ),
        (&["--server", "localhost:9"][..], "invalid value"),
        (&[][..], "--server"),
        (&["--server", "127.0.0.1:9", "--slo", "p99"][..], "bad SLO"),
        (
            &["--server", "127.0.0.1:9", "--slo", "p100=1ms"][..],
            "bad SLO",
        ),
        (
            &[
                "--server",
                "127.0.0.1:9",
                "--slo",
                "p99=1ms",
                "--admission",
                "pid",
            ][..],
            "unknown controller",
        ),
        (
            &["--server", "127.0.0.1:9", "--admission", "aiad"][..],
            "--slo",
        ),
        (
            &[
                "--server",
                "127.0.0.1:9",
                "--slo",
                "p99=1ms",
                "--never-drop",
                "1",
            ][..],
            "FIXED_ROUTE",
        ),
        (
            &[
                "--server",
                "127.0.0.1:9",
                "--slo",
                "p99=1ms",
                "--never-drop",
                "16",
            ][..],
            "--never-drop 16",
        ),
    ] {
        let out = xlane()
            .args(["rpc", "router", "--bind", "127.0.0.1:0"])
            .args(args)
            .output()
            .unwrap();
        assert!(!out.status.success(), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(says), "{args:?}: {err}");
    }
    let out = xlane()
        .args([
            "rpc",
            "router",
            "--bind",
            "127.0.0.1:7999",
            "--server",
            "127.0.0.1:7999",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("own --bind"));
}
