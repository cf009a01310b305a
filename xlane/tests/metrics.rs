//! `--metrics ADDR` as a Prometheus scraper meets it: `xlane fd run`,
//! `xlane kv serve`, `xlane ctl serve` and `xlaned` serve the text format
//! at `/metrics` (all but the controller name the endpoint in their ready
//! line), and the counters move between two scrapes as the daemon works
//! (heartbeats sent; client commands answered; connections, a refused
//! handshake and a tunnel granted; lane frames sent and received, with
//! their histograms filling). What moves is asserted, not how fast.
//! `xlane host`'s endpoint is scraped in `tests/host_mode.rs`.

mod common;

use common::{scrape, spawn_until_ready, stop, value, Conn};
use std::process::Command;
use std::time::{Duration, Instant};
use xlane_kv::resp::Reply;

fn xlane() -> Command {
    Command::new(env!("CARGO_BIN_EXE_xlane"))
}

fn metrics_addr(ready: &str) -> String {
    let v: serde_json::Value = serde_json::from_str(ready).unwrap();
    v["metrics"]
        .as_str()
        .expect("metrics in the ready line")
        .to_string()
}

/// Scrapes until `series` is above `than` (or 20 s pass).
fn until_above(addr: &str, series: &str, than: f64) -> f64 {
    let t = Instant::now();
    loop {
        let v = value(&scrape(addr), series);
        if v > than || t.elapsed() > Duration::from_secs(20) {
            return v;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn fd_run_serves_metrics_that_move() {
    let dir = std::env::temp_dir().join(format!("xlane-metrics-fd-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (me, peer) = (xlane_testports::udp(), xlane_testports::udp());
    let (child, _out, ready) = spawn_until_ready(
        xlane()
            .args([
                "fd",
                "run",
                "--bind",
                &me.to_string(),
                "--peer",
                &peer.to_string(),
            ])
            .arg("--table")
            .arg(dir.join("t.table"))
            .args(["--metrics", "127.0.0.1:0", "--no-mlock", "--quiet"]),
    );
    let addr = metrics_addr(&ready);
    let text = scrape(&addr);
    assert!(
        text.contains("# TYPE xlane_fd_heartbeats_sent_total counter"),
        "{text}"
    );
    let first = value(&text, "xlane_fd_heartbeats_sent_total");
    assert!(until_above(&addr, "xlane_fd_heartbeats_sent_total", first) > first);
    let text = scrape(&addr);
    // The peer never answers: it is watched, and not alive.
    assert_eq!(
        value(&text, "xlane_fd_peers{status=\"alive\"}"),
        0.0,
        "{text}"
    );
    assert_eq!(
        value(&text, "xlane_fd_peers{status=\"unknown\"}")
            + value(&text, "xlane_fd_peers{status=\"suspected\"}"),
        1.0
    );
    stop(child);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn kv_serve_serves_metrics_that_move() {
    let bind = xlane_testports::tcp();
    let dir = std::env::temp_dir().join(format!("xlane-metrics-kv-{}", std::process::id()));
    let (child, _out, ready) = spawn_until_ready(
        xlane()
            .args(["kv", "serve", "--bind", &bind.to_string()])
            .arg("--data")
            .arg(&dir)
            .args(["--fsync", "never", "--metrics", "127.0.0.1:0"]),
    );
    let addr = metrics_addr(&ready);
    let before = value(&scrape(&addr), "xlane_kv_commands_total");
    let mut c = Conn::open(bind);
    for i in 0..5 {
        assert_eq!(c.cmd(&["SET", &format!("k{i}"), "v"]), Reply::ok());
    }
    let after = until_above(&addr, "xlane_kv_commands_total", before + 4.0);
    assert!(after >= before + 5.0, "{before} → {after}");
    let text = scrape(&addr);
    assert_eq!(value(&text, "xlane_raft_leader_id"), 1.0, "{text}");
    assert!(value(&text, "xlane_kv_connections_total") >= 1.0);
    assert!(text.contains("xlane_raft_udp_refused_total{reason=\"unauthenticated\"} 0"));
    assert!(text.contains("xlane_raft_tcp_refused_total{reason=\"not_a_peer\"} 0"));
    stop(child);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn ctl_serve_serves_metrics_that_move() {
    use std::io::BufRead;
    let dir = std::env::temp_dir().join(format!("xlane-metrics-ctl-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let hosts = ["a", "b"];
    let mut topo = String::from("schema = 1\n");
    for h in hosts {
        topo += &format!("[[node]]\nname = \"{h}\"\nkind = \"host\"\n");
    }
    topo += "[[node]]\nname = \"sw\"\nkind = \"switch\"\n";
    for h in hosts {
        for (x, y) in [(h, "sw"), ("sw", h)] {
            topo += &format!(
                "[[link]]\nfrom = \"{x}\"\nto = \"{y}\"\nbandwidth_bps = 10000000000\n\
                 express_queue_pkts = 64\nbest_effort_queue_pkts = 1000\n\
                 min_latency_ns = 5000\nmax_jitter_ns = 50000\n"
            );
        }
    }
    std::fs::write(dir.join("topo.toml"), topo).unwrap();
    let keys = dir.join("keys.toml");
    assert!(xlane()
        .args(["ctl", "keygen", "--hosts", "a,b", "--out"])
        .arg(&keys)
        .status()
        .unwrap()
        .success());
    let (listen, metrics) = (xlane_testports::tcp(), xlane_testports::tcp());
    let mut child = xlane()
        .args(["ctl", "serve", "--topology"])
        .arg(dir.join("topo.toml"))
        .arg("--keys")
        .arg(&keys)
        .arg("--state")
        .arg(dir.join("state"))
        .args([
            "--listen",
            &listen.to_string(),
            "--metrics",
            &metrics.to_string(),
        ])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    while !line.contains("listening on") {
        line.clear();
        assert!(
            err.read_line(&mut line).unwrap() > 0,
            "the controller ended"
        );
    }
    let m = metrics.to_string();
    let text = scrape(&m);
    assert_eq!(value(&text, "xlane_ctl_connections_total"), 0.0, "{text}");
    assert_eq!(value(&text, "xlane_ctl_tunnels{state=\"active\"}"), 0.0);
    let k = xlane_ctl::auth::Keys::from_file(&keys).unwrap();
    let mut a = xlane_ctl::client::Client::connect(listen, "a", k.get("a").unwrap()).unwrap();
    a.request(&["b".to_string()], 100, 1_000_000, 0).unwrap();
    // A host with the wrong key is refused and counted.
    assert!(xlane_ctl::client::Client::connect(listen, "b", k.get("a").unwrap()).is_err());
    let text = scrape(&m);
    assert!(value(&text, "xlane_ctl_connections_total") >= 2.0, "{text}");
    assert_eq!(
        value(&text, "xlane_ctl_tunnels{state=\"active\"}"),
        1.0,
        "{text}"
    );
    assert!(value(&text, "xlane_ctl_refused_total{reason=\"auth_failure\"}") >= 1.0);
    drop(a);
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn xlaned_serves_metrics_that_move() {
    let lane = |role: &[&str]| {
        let mut c = Command::new(common::xlaned_bin());
        c.args(["--no-tuning", "--fifo", "0", "--core", "0", "--tunnel", "7"])
            .args(["--period-us", "1000", "--metrics", "127.0.0.1:0"])
            .args(role);
        spawn_until_ready(&mut c)
    };
    let (rx, _rx_out, rx_ready) = lane(&["receiver", "--bind", "127.0.0.1:0"]);
    let rx_addr: serde_json::Value = serde_json::from_str(&rx_ready).unwrap();
    let dest = rx_addr["addr"].as_str().unwrap().to_string();
    let (tx, _tx_out, tx_ready) = lane(&["sender", "--heartbeat", "--dest", &dest]);
    let (rm, tm) = (metrics_addr(&rx_ready), metrics_addr(&tx_ready));
    let sent = until_above(&tm, "xlane_lane_frames_total", 5.0);
    assert!(sent > 5.0, "sender's frames did not move");
    let got = until_above(&rm, "xlane_lane_frames_total", 5.0);
    assert!(got > 5.0, "receiver's frames did not move");
    let r = scrape(&rm);
    assert!(value(&r, "xlane_lane_latency_seconds_count") >= got, "{r}");
    assert!(
        r.contains("# TYPE xlane_lane_latency_seconds histogram"),
        "{r}"
    );
    let t = scrape(&tm);
    assert!(
        value(&t, "xlane_lane_wake_late_seconds_bucket{le=\"+Inf\"}") > 0.0,
        "{t}"
    );
    assert!(value(&t, "xlane_lane_heartbeats_total") > 0.0, "{t}");
    stop(tx);
    stop(rx);
}
