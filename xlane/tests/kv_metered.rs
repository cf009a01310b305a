//! Three lane members under a metering controller: `xlane ctl serve
//! --testbed` programs the emulated datacenter (a rate limiter per tunnel on
//! the sending host's NIC and the tree's switch ports, the trees' multicast
//! groups in the switch) and reads every tunnel's meters; the members ask
//! for their trees (`--controller`, network replication) and a client
//! writes for 60 s. A punctual member is neither reclaimed (`BwUnused`) nor
//! demoted (`BwExceeded`), and every tree's packets are counted by its own
//! class.
//!
//! Hosts: the controller and the writing client in h0, members in h1..h3.
//! The meters are read every 250 ms and a tunnel counts as unused after
//! 10 s under a quarter of its allocation (reading `tc` on a loaded 2-CPU
//! machine moves an interval's edges by tens of ms; the members wait for
//! one another's trees before the first write). One client writes
//! sequentially, each write one entry: the burst the members' trees are
//! sized for (`--lane-burst-bytes 96`).
//!
//! Needs root (network namespaces); without it the test says so and passes
//! nothing else.

mod common;

use common::{Children, Conn};
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use xlane_kv::resp::Reply;
use xlane_testbed::shaping::parse_class_stats;
use xlane_testbed::{enter_netns, Testbed, TestbedConfig, TunnelSlot};

const MEMBERS: usize = 3;
const RAFT_PORT: u16 = 7001;
const RESP_PORT: u16 = 6379;
const CTL_PORT: u16 = 7070;
/// Replication period, µs.
const REPL_PERIOD_US: u64 = 1_000;
/// X-FD period T, µs.
const FD_PERIOD_US: u64 = 10_000;
const WRITE_PHASE: Duration = Duration::from_secs(60);

#[test]
fn members_under_a_metering_controller_stay_punctual() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: needs root (network namespaces)");
        return;
    }
    let tb = Testbed::up(TestbedConfig {
        hosts: MEMBERS + 1,
        ..TestbedConfig::default()
    })
    .expect("testbed up");
    tb.measure(200).expect("measure the links");
    let hosts = tb.hosts().to_vec();
    let dir = std::env::temp_dir().join(format!("xlane-kv-metered-{}", tb.prefix()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    let topo = dir.join("topo.toml");
    std::fs::write(&topo, tb.export_topology().to_toml().expect("topology")).expect("write");
    let keys = dir.join("keys.toml");
    let names: Vec<String> = (1..=MEMBERS).map(|i| format!("h{i}")).collect();
    let st = Command::new(env!("CARGO_BIN_EXE_xlane"))
        .args(["ctl", "keygen", "--hosts", &names.join(","), "--out"])
        .arg(&keys)
        .status()
        .expect("keygen");
    assert!(st.success());

    let mut procs = Children(Vec::new());
    let ctl = SocketAddr::from((hosts[0].addr, CTL_PORT));
    let mut c = Command::new("ip")
        .args(["netns", "exec", &hosts[0].netns])
        .arg(env!("CARGO_BIN_EXE_xlane"))
        .args(["ctl", "serve", "--topology"])
        .arg(&topo)
        .arg("--keys")
        .arg(&keys)
        .arg("--state")
        .arg(dir.join("ctl-state"))
        .args(["--listen", &ctl.to_string(), "--testbed", tb.prefix()])
        .args(["--meter-interval-ms", "250", "--unused-after-ms", "10000"])
        .args(["--exceed-tolerance-permille", "300"])
        .stderr(Stdio::piped())
        .spawn()
        .expect("xlane ctl serve");
    let mut err = BufReader::new(c.stderr.take().expect("stderr"));
    procs.0.push(c);
    let mut line = String::new();
    err.read_line(&mut line).expect("controller line");
    assert!(line.contains("listening on"), "controller: {line}");
    std::thread::spawn(move || {
        for l in err.lines().map_while(Result::ok) {
            eprintln!("[ctl] {l}");
        }
    });

    // The members, started together (each waits for the others' trees).
    let peers: Vec<String> = (1..=MEMBERS)
        .map(|i| {
            let a = hosts[i].addr;
            format!("{i}={a}:{RAFT_PORT}/{a}:{RESP_PORT}")
        })
        .collect();
    let events: Arc<Mutex<Vec<(usize, serde_json::Value)>>> = Arc::default();
    let started: Vec<_> = std::thread::scope(|s| {
        let hs: Vec<_> = (1..=MEMBERS)
            .map(|i| {
                let mut cmd = Command::new("ip");
                cmd.args(["netns", "exec", &hosts[i].netns])
                    .arg(env!("CARGO_BIN_EXE_xlane"))
                    .args(["kv", "serve", "--id", &i.to_string()])
                    .args(peers.iter().flat_map(|p| ["--peer", p.as_str()]))
                    .arg("--data")
                    .arg(dir.join(format!("m{i}")))
                    .args(["--fsync", "never", "--transport", "lane"])
                    .args(["--lane-period-us", &REPL_PERIOD_US.to_string()])
                    .args(["--fd-period-us", &FD_PERIOD_US.to_string()])
                    .args(["--lane-burst-bytes", "96", "--lane-multicast"])
                    .args(["--controller", &ctl.to_string(), "--ctl-keys"])
                    .arg(&keys)
                    .args((1..=MEMBERS).flat_map(|j| ["--ctl-host".into(), format!("{j}=h{j}")]))
                    .stderr(Stdio::inherit());
                s.spawn(move || (i, common::spawn_until_ready(&mut cmd)))
            })
            .collect();
        hs.into_iter().map(|h| h.join().expect("start")).collect()
    });
    // (sending host, tree id, sub-lane)
    let mut trees: Vec<(usize, u32, u8)> = Vec::new();
    for (i, (child, out, ready)) in started {
        procs.0.push(child);
        let v: serde_json::Value = serde_json::from_str(&ready).expect("ready JSON");
        let t = v["tunnels"].as_array().expect("tunnels");
        assert_eq!(t.len(), 2, "two trees: {ready}");
        for g in t {
            let sublane = if g["what"] == "x-fd" { 0 } else { 1 };
            trees.push((i, g["tunnel"].as_u64().expect("id") as u32, sublane));
        }
        let ev = events.clone();
        std::thread::spawn(move || {
            for l in out.lines().map_while(Result::ok) {
                if let Ok(v) = serde_json::from_str(&l) {
                    ev.lock().expect("events").push((i, v));
                }
            }
        });
    }

    // The writer, in h0: the leader answers OK, the others MOVED.
    let _ns = enter_netns(&hosts[0].netns).expect("enter h0");
    let addrs: Vec<SocketAddr> = (1..=MEMBERS)
        .map(|i| SocketAddr::from((hosts[i].addr, RESP_PORT)))
        .collect();
    let deadline = Instant::now() + Duration::from_secs(30);
    let (mut conn, leader) = loop {
        assert!(Instant::now() < deadline, "no leader");
        let found = addrs.iter().enumerate().find_map(|(i, &a)| {
            let mut c = Conn::try_open(a, Duration::from_secs(1))?;
            (c.cmd(&["SET", "probe", "1"]) == Reply::ok()).then_some((c, i + 1))
        });
        if let Some(f) = found {
            break f;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let start = Instant::now();
    let mut n = 0u64;
    while start.elapsed() < WRITE_PHASE {
        let k = format!("k{n}");
        let r = conn.cmd(&["SET", k.as_str(), "a-value-of-about-25-bytes"]);
        assert_eq!(r, Reply::ok(), "write {n} to the leader {leader}");
        n += 1;
    }
    let secs = start.elapsed().as_secs_f64();
    eprintln!("{n} writes in {secs:.1} s through member {leader}");

    // Every tree's packets were counted by its own class on its sender's
    // NIC (the fabric gives tunnel t the class of its preferred slot).
    for &(host, t, sublane) in &trees {
        let h = &hosts[host];
        let out = Command::new("tc")
            .args(["-n", &h.netns, "-s", "class", "show", "dev", &h.iface])
            .output()
            .expect("tc");
        let text = String::from_utf8_lossy(&out.stdout);
        let classes = parse_class_stats(&text).expect("tc classes");
        let id = TunnelSlot::preferred(t).class_id();
        let (_, c) = classes
            .iter()
            .find(|(c, _)| *c == id)
            .unwrap_or_else(|| panic!("tree {t} of h{host}: no class {id}:\n{text}"));
        eprintln!(
            "tree {t} of h{host} (sub-lane {sublane}): {} packets, {} bytes counted; {} dropped",
            c.sent_packets, c.sent_bytes, c.dropped
        );
        // Counted by its own class: X-FD trees at all (how many depends on
        // how long the run took, which is no test's to assert);
        // replication trees for at least every other acknowledged write
        // (each write's append leaves in a frame of the leader's tree and
        // its answer in one of a follower's).
        let least = if sublane == 0 { 1 } else { n / 2 };
        assert!(
            c.sent_packets >= least,
            "tree {t} of h{host}: {} packets counted, expected at least {least}",
            c.sent_packets
        );
    }

    // Neither reclaimed nor demoted nor terminated; the leader resized its
    // replication tree for its appends.
    let ev = events.lock().expect("events").clone();
    let bad: Vec<_> = ev
        .iter()
        .filter(|(_, v)| {
            (v["event"] == "bandwidth_changed"
                && (v["reason"] == "BwUnused" || v["reason"] == "BwExceeded"))
                || v["event"] == "bandwidth_terminated"
        })
        .collect();
    assert!(bad.is_empty(), "{bad:?}");
    assert!(
        ev.iter()
            .any(|(i, v)| *i == leader && v["event"] == "tree_resized" && v["leader"] == true),
        "{ev:?}"
    );
    for (i, v) in ev.iter().filter(|(_, v)| v["event"] != "peer_trees") {
        eprintln!("member {i}: {v}");
    }
    drop(procs);
    let _ = std::fs::remove_dir_all(&dir);
}
