//! `xlane ctl export-switch-config` against what the testbed applies.
//!
//! The controller programs a testbed's switch for three tunnels (two
//! unicast, one multicast). The exported `tc` lines for that switch are
//! then applied to fresh veth devices of the same names in a namespace of
//! their own, and each port's qdiscs, classes and filters there must be
//! the ones the testbed's switch port has: the export is what the testbed
//! runs, and it runs. The SONiC rendering of the same state is checked
//! for its queue bindings.
//!
//! Needs root (network namespaces); without it the test says so and passes
//! nothing else.

mod common;

use common::Children;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use xlane_testbed::{Testbed, TestbedConfig, TunnelSlot};

/// A namespace of this run, deleted when the test ends.
struct Scratch(String);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

fn run(prog: &str, args: &[&str]) -> String {
    let out = Command::new(prog).args(args).output().expect(prog);
    assert!(
        out.status.success(),
        "{prog} {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `tc -n ns what show dev dev`, without the per-device reference count.
fn show(ns: &str, what: &str, dev: &str) -> Vec<String> {
    run("tc", &["-n", ns, what, "show", "dev", dev])
        .lines()
        .map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            let mut out = Vec::new();
            let mut i = 0;
            while i < w.len() {
                if w[i] == "refcnt" {
                    i += 2;
                    continue;
                }
                out.push(w[i]);
                i += 1;
            }
            out.join(" ")
        })
        .filter(|l| !l.is_empty())
        .collect()
}

#[test]
fn exported_tc_lines_rebuild_the_testbeds_switch_ports() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: needs root (network namespaces)");
        return;
    }
    let tb = Testbed::up(TestbedConfig {
        hosts: 3,
        ..TestbedConfig::default()
    })
    .expect("testbed up");
    let hosts = tb.hosts().to_vec();
    let dir = std::env::temp_dir().join(format!("xlane-switch-export-{}", tb.prefix()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    let topo = dir.join("topo.toml");
    let exported = tb.export_topology();
    std::fs::write(&topo, exported.to_toml().expect("topology")).expect("write");
    let keys = dir.join("keys.toml");
    let xlane = env!("CARGO_BIN_EXE_xlane");
    run(
        xlane,
        &[
            "ctl",
            "keygen",
            "--hosts",
            "h0,h1,h2",
            "--out",
            keys.to_str().unwrap(),
        ],
    );
    let state = dir.join("state");
    let ctl = format!("{}:7070", hosts[0].addr);
    let mut procs = Children(Vec::new());
    procs.0.push(
        Command::new("ip")
            .args(["netns", "exec", &hosts[0].netns, xlane, "ctl", "serve"])
            .args(["--topology", topo.to_str().unwrap()])
            .args(["--keys", keys.to_str().unwrap()])
            .args(["--state", state.to_str().unwrap()])
            .args(["--listen", &ctl, "--testbed", tb.prefix()])
            .stderr(Stdio::null())
            .spawn()
            .expect("ctl serve"),
    );
    let request = |from: usize, to: &str| -> u64 {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let out = Command::new("ip")
                .args(["netns", "exec", &hosts[from].netns, xlane, "ctl", "request"])
                .args([
                    "--host",
                    &format!("h{from}"),
                    "--keys",
                    keys.to_str().unwrap(),
                ])
                .args(["--controller", &ctl, "--to", to])
                .args(["--load", "300", "--period", "1ms", "--json"])
                .output()
                .expect("request");
            if out.status.success() {
                let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
                return v["tunnel"].as_u64().expect("tunnel");
            }
            // The controller may still be starting.
            assert!(
                Instant::now() < deadline,
                "request: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    let tunnels = [request(0, "h1"), request(0, "h1,h2"), request(1, "h2")];
    let sw_ns = tb.switch_netns().to_string();
    let ports: Vec<String> = exported
        .link
        .iter()
        .filter(|l| l.from == "sw")
        .map(|l| l.device.clone())
        .collect();
    // Wait for the controller's installs: h1's port carries tunnels 1 and
    // 2, h2's port 2 and 3.
    let deadline = Instant::now() + Duration::from_secs(60);
    let want = [(1, &tunnels[..2]), (2, &tunnels[1..])];
    while !want.iter().all(|(p, ts)| {
        let classes = show(&sw_ns, "class", &ports[*p]).join("\n");
        ts.iter().all(|&t| {
            classes.contains(&format!(
                "class htb {} ",
                TunnelSlot::preferred(t as u32).class_id()
            ))
        })
    }) {
        assert!(Instant::now() < deadline, "the controller did not install");
        std::thread::sleep(Duration::from_millis(50));
    }

    let out = Command::new(xlane)
        .args(["ctl", "export-switch-config", "--switch", "sw"])
        .args(["--topology", topo.to_str().unwrap()])
        .args(["--state", state.to_str().unwrap()])
        .output()
        .expect("export");
    assert!(
        out.status.success(),
        "export: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines = String::from_utf8_lossy(&out.stdout).into_owned();
    let file = dir.join("sw.tc");
    std::fs::write(&file, &lines).expect("write");

    // The same port names, fresh, in a namespace of their own.
    let scratch = Scratch(format!("{}-x", tb.prefix()));
    run("ip", &["netns", "add", &scratch.0]);
    for (i, p) in ports.iter().enumerate() {
        let peer = format!("xq{i}");
        run(
            "ip",
            &[
                "-n", &scratch.0, "link", "add", p, "type", "veth", "peer", "name", &peer,
            ],
        );
        run("ip", &["-n", &scratch.0, "link", "set", p, "up"]);
    }
    run("tc", &["-n", &scratch.0, "-batch", file.to_str().unwrap()]);
    // The controller programs the switch after it journals a change (a
    // tunnel's rate may still move as the later requests come in): the
    // live ports reach the exported state, within a deadline.
    let deadline = Instant::now() + Duration::from_secs(30);
    for p in &ports {
        for what in ["qdisc", "class", "filter"] {
            let built = show(&scratch.0, what, p);
            loop {
                let live = show(&sw_ns, what, p);
                if built == live {
                    break;
                }
                assert!(
                    Instant::now() < deadline,
                    "{what} of port {p} differs from the testbed's\nlive: {live:?}\nbuilt: {built:?}\nexport:\n{lines}"
                );
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }
    let tunnel_classes = lines.matches("class add").count() - 4 * ports.len();
    assert_eq!(
        tunnel_classes, 4,
        "four tunnel classes over the ports:\n{lines}"
    );

    // SONiC: every port bound to the express queue's strict scheduler.
    let out = Command::new(xlane)
        .args(["ctl", "export-switch-config", "--format", "sonic"])
        .args(["--topology", topo.to_str().unwrap()])
        .args(["--state", state.to_str().unwrap()])
        .output()
        .expect("export sonic");
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("config_db JSON");
    for p in &ports {
        let s = v["QUEUE"][format!("{p}|6")]["scheduler"]
            .as_str()
            .expect("queue 6 bound");
        assert_eq!(v["SCHEDULER"][s]["type"], "STRICT", "{p}");
    }
    // Unknown switches and bad state are clear errors.
    let out = Command::new(xlane)
        .args(["ctl", "export-switch-config", "--switch", "nope"])
        .args(["--topology", topo.to_str().unwrap()])
        .args(["--state", state.to_str().unwrap()])
        .output()
        .expect("export");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--switch nope"));
    drop(procs);
    let _ = std::fs::remove_dir_all(&dir);
}
