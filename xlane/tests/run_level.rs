//! `xlane run` end to end: a static binary (built here with `cc -static`)
//! in a testbed host cannot be preloaded, so its traffic is marked by
//! port from outside; the switch, which classifies on the DSCP alone,
//! then counts its packets in the express class. Before and after the
//! run the same program's packets are best effort (the rules are gone).

use std::path::PathBuf;
use std::process::Command;

use xlane_testbed::{Testbed, TestbedConfig};

const COUNT: u64 = 200;
const PORT: u16 = 47999;

fn static_sender() -> Option<PathBuf> {
    let dir = std::env::temp_dir().join(format!("xlane-run-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).ok()?;
    let out = dir.join("sender");
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/run_level/sender.c");
    let ok = Command::new("cc")
        .args(["-static", "-O1", "-o"])
        .arg(&out)
        .arg(&src)
        .status()
        .ok()?
        .success();
    ok.then_some(out)
}

/// Packets the switch sent towards host 1 in its express class so far.
fn express_towards(tb: &Testbed, host: usize) -> u64 {
    tb.qdisc_stats(host)
        .expect("switch port stats")
        .express
        .sent_packets
}

#[test]
fn a_static_binary_is_marked_by_port_in_a_testbed_host() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: needs root");
        return;
    }
    let sender = static_sender().expect("cc -static (install build-essential)");
    let tb = Testbed::up(TestbedConfig {
        hosts: 2,
        measure_probes: 0,
        ..TestbedConfig::default()
    })
    .expect("testbed up");
    let h0 = tb.host(0).unwrap().clone();
    let to = tb.host(1).unwrap().addr.to_string();
    let plain = || {
        let o = Command::new("ip")
            .args(["netns", "exec", &h0.netns])
            .arg(&sender)
            .args([&to, &PORT.to_string(), &COUNT.to_string()])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    };

    let before = express_towards(&tb, 1);
    plain();
    let unmarked = express_towards(&tb, 1) - before;
    assert!(unmarked < COUNT, "unmarked run: {unmarked} express packets");

    let before = express_towards(&tb, 1);
    let o = Command::new("ip")
        .args(["netns", "exec", &h0.netns])
        .arg(env!("CARGO_BIN_EXE_xlane"))
        .args([
            "run",
            "--level",
            "2",
            "--ports",
            &PORT.to_string(),
            "--dev",
            &h0.iface,
            "--hosts",
            "2",
            "--link-rate",
            "1gbit",
            "--",
        ])
        .arg(&sender)
        .args([&to, &PORT.to_string(), &COUNT.to_string()])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("path: classifier"), "{err}");
    assert!(err.contains("static binary"), "{err}");
    assert!(err.contains("latency bound"), "{err}");
    assert!(err.contains("paced: HTB class 1:10"), "{err}");
    assert_eq!(
        String::from_utf8_lossy(&o.stdout).trim(),
        format!("sent {COUNT}")
    );
    let marked = express_towards(&tb, 1) - before;
    assert!(
        marked >= COUNT,
        "marked run: {marked} express packets of {COUNT}"
    );

    // The rules left with the run.
    let rules = Command::new("ip")
        .args([
            "netns",
            "exec",
            &h0.netns,
            "iptables-legacy",
            "-t",
            "mangle",
            "-S",
        ])
        .output()
        .unwrap();
    assert!(
        !String::from_utf8_lossy(&rules.stdout).contains("xlane-run"),
        "rules left behind"
    );
    let before = express_towards(&tb, 1);
    plain();
    let after = express_towards(&tb, 1) - before;
    assert!(after < COUNT, "after the run: {after} express packets");
    tb.down().expect("testbed down");
}

#[test]
fn bad_input_is_refused_with_a_clear_message() {
    let cases: [(&[&str], &str); 4] = [
        (&["--level", "3", "--", "true"], "no level 3"),
        (
            &["--level", "2", "--ports", "80,x", "--", "true"],
            "--ports",
        ),
        (
            &["--level", "2", "--no-pace", "--", "/nonexistent/prog"],
            "not found",
        ),
        (
            &[
                "--level",
                "2",
                "--no-pace",
                "--link-rate",
                "5mbps",
                "--",
                "true",
            ],
            "--link-rate",
        ),
    ];
    for (args, want) in cases {
        let o = Command::new(env!("CARGO_BIN_EXE_xlane"))
            .arg("run")
            .args(args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{args:?} succeeded");
        assert!(err.contains(want), "{args:?}: {err}");
    }
}

#[test]
fn the_exit_status_is_the_programs() {
    let o = Command::new(env!("CARGO_BIN_EXE_xlane"))
        .args(["run", "--level", "0", "--", "sh", "-c", "exit 7"])
        .env("XLANE_PRELOAD_LIB", "/nonexistent.so")
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(7),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// Kills a child by its PID when dropped.
struct Reap(std::process::Child);

impl Drop for Reap {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn the_controller_admits_the_level_like_a_tunnel() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: needs root");
        return;
    }
    let xlane = env!("CARGO_BIN_EXE_xlane");
    let tb = Testbed::up(TestbedConfig {
        hosts: 3,
        link_rate_bps: 40_000_000,
        measure_probes: 0,
        ..TestbedConfig::default()
    })
    .expect("testbed up");
    let dir = std::env::temp_dir().join(format!("xlane-run-ctl-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let topo = dir.join("topo.toml");
    let keys = dir.join("keys.toml");
    tb.export_topology().write_to(&topo).unwrap();
    let st = Command::new(xlane)
        .args(["ctl", "keygen", "--hosts", "h0,h1,h2", "--out"])
        .arg(&keys)
        .status()
        .unwrap();
    assert!(st.success());
    let (h0, h2) = (tb.host(0).unwrap().clone(), tb.host(2).unwrap().clone());
    let listen = format!("{}:7171", h2.addr);
    let ctl = Reap(
        Command::new("ip")
            .args([
                "netns",
                "exec",
                &h2.netns,
                xlane,
                "ctl",
                "serve",
                "--topology",
            ])
            .arg(&topo)
            .arg("--keys")
            .arg(&keys)
            .arg("--state")
            .arg(dir.join("state"))
            .args(["--listen", &listen])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    // `xlane run` in h0, paced on `dev`.
    let run_on = |dev: &str| {
        Command::new("ip")
            .args([
                "netns", "exec", &h0.netns, xlane, "run", "--level", "2", "--dev", dev,
            ])
            .args([
                "--hosts",
                "3",
                "--link-rate",
                "40mbit",
                "--controller",
                &listen,
            ])
            .arg("--keys")
            .arg(&keys)
            .args(["--host", "h0", "--to", "h1", "--", "true"])
            .output()
            .unwrap()
    };
    let run = || run_on(&h0.iface);
    // The controller may still be starting: a few tries.
    let mut o = run();
    for _ in 0..50 {
        if o.status.success() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
        o = run();
    }
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains("controller") && err.contains("tunnel"),
        "{err}"
    );
    assert!(err.contains("paced: HTB class"), "{err}");
    // The tunnels h0 holds, as `xlane ctl list` prints them (a header
    // line first).
    let held = || {
        let list = Command::new("ip")
            .args([
                "netns", "exec", &h0.netns, xlane, "ctl", "list", "--host", "h0",
            ])
            .arg("--keys")
            .arg(&keys)
            .args(["--controller", &listen])
            .output()
            .unwrap();
        assert!(
            list.status.success(),
            "{}",
            String::from_utf8_lossy(&list.stderr)
        );
        String::from_utf8_lossy(&list.stdout).into_owned()
    };
    // The tunnel was released when the program ended.
    let text = held();
    assert_eq!(text.lines().count(), 1, "tunnels left: {text}");
    // A failure after the grant (pacing on a device that does not
    // exist) releases the tunnel too.
    let failed = run_on("xlnodev0");
    let err = String::from_utf8_lossy(&failed.stderr);
    assert!(!failed.status.success(), "{err}");
    assert!(err.contains("released tunnel"), "{err}");
    let text = held();
    assert_eq!(
        text.lines().count(),
        1,
        "tunnels left after a failed run: {text}"
    );
    drop(ctl);
    let _ = std::fs::remove_dir_all(&dir);
    tb.down().expect("testbed down");
}
