//! `xlane bench fd`, end to end through the real command, short: the
//! accuracy run (X-FD on the lane, a fixed timeout and phi-accrual on plain
//! UDP, under cross traffic and CPU load) and one injection of each real
//! failure (the runners are `xlane fd run` processes of this binary). Checks
//! the documented JSON, the curves' shape and that every failure is
//! detected at every live peer. No time is asserted; the ratio and the
//! false suspicions are printed.

use std::process::Command;

const HEARTBEATS: u64 = 20_000;
const HOSTS: u64 = 4;

#[test]
fn bench_fd_json_detectors_curves_and_failures() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: needs root");
        return;
    }
    let plots = std::env::temp_dir().join(format!("xlane-bench-fd-test-{}", std::process::id()));
    let out = Command::new(env!("CARGO_BIN_EXE_xlane"))
        .args([
            "bench",
            "fd",
            "--json",
            "--heartbeats",
            &HEARTBEATS.to_string(),
            "--hosts",
            &HOSTS.to_string(),
            "--repetitions",
            "1",
            "--failures",
            "--plots",
        ])
        .arg(&plots)
        .output()
        .expect("run xlane");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "xlane bench fd failed: {stderr}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");

    // Part 1: the three detectors, in order.
    let dets = v["detectors"].as_array().expect("detectors");
    let names: Vec<&str> = dets.iter().filter_map(|d| d["name"].as_str()).collect();
    assert_eq!(names, ["x-fd", "plain-timeout", "phi-accrual"]);
    for d in dets {
        let name = d["name"].as_str().unwrap_or("?");
        let hb = d["heartbeats"].as_u64().expect("heartbeats");
        assert!(hb >= HEARTBEATS, "{name}: {hb} heartbeats < {HEARTBEATS}");
        let min = d["min_perfect_threshold_ns"]
            .as_i64()
            .unwrap_or_else(|| panic!("{name}: no min_perfect_threshold_ns"));
        let acc: Vec<(i64, f64)> = d["accuracy"]
            .as_array()
            .expect("accuracy list")
            .iter()
            .map(|p| {
                let p = p.as_array().expect("[threshold_ns, accuracy]");
                assert_eq!(p.len(), 2, "{name}: pair {p:?}");
                (
                    p[0].as_i64().expect("threshold_ns"),
                    p[1].as_f64().expect("accuracy"),
                )
            })
            .collect();
        assert!(acc.len() > 10, "{name}: {} points", acc.len());
        for w in acc.windows(2) {
            assert!(w[0].0 < w[1].0, "{name}: thresholds not ascending: {w:?}");
            assert!(w[0].1 <= w[1].1, "{name}: accuracy decreases: {w:?}");
        }
        for &(x, a) in &acc {
            assert!((0.0..=1.0).contains(&a), "{name}: accuracy {a} at {x}");
            if x < min {
                assert!(a < 1.0, "{name}: perfect at {x} < smallest perfect {min}");
            }
        }
        // Setting host-gap silences aside can only lower it.
        if let Some(out) = d["min_perfect_threshold_outside_host_gaps_ns"].as_i64() {
            assert!(out <= min, "{name}: {out} outside host gaps > {min}");
        }
        let intervals = d["intervals"].as_u64().expect("intervals");
        let aside = d["intervals_in_host_gaps"].as_u64().expect("set aside");
        assert!(
            aside <= intervals,
            "{name}: {aside} of {intervals} set aside"
        );
        let frac = d["intervals_in_host_gaps_fraction"]
            .as_f64()
            .expect("fraction set aside");
        assert!((0.0..=1.0).contains(&frac), "{name}: fraction {frac}");
        let at_min = acc.iter().find(|p| p.0 == min);
        assert_eq!(
            at_min.map(|p| p.1),
            Some(1.0),
            "{name}: accuracy at min_perfect_threshold_ns {min}"
        );
    }
    assert!(dets[2]["phi"]["min_perfect_phi"].is_f64(), "{}", dets[2]);
    eprintln!(
        "smallest perfect Λ: x-fd {} ns, plain-timeout {} ns, phi-accrual {} ns; plain / x-fd = {} (outside host gaps: {}, x-fd set aside {} of {})",
        dets[0]["min_perfect_threshold_ns"],
        dets[1]["min_perfect_threshold_ns"],
        dets[2]["min_perfect_threshold_ns"],
        v["ratio_plain_over_xfd"],
        v["ratio_plain_over_xfd_outside_host_gaps"],
        dets[0]["intervals_in_host_gaps"],
        dets[0]["intervals"]
    );
    assert!(v["host_gap_rule"].is_string(), "{}", v["host_gap_rule"]);
    assert!(v["floor"]["stolen_fraction"].is_f64(), "{}", v["floor"]);
    assert!(v["floor"]["max_gap_ns"].is_u64(), "{}", v["floor"]);

    // Part 2: every kind injected once and seen by every live peer.
    let fails = v["failures"].as_array().expect("failures");
    let kinds: Vec<&str> = fails.iter().filter_map(|f| f["kind"].as_str()).collect();
    assert_eq!(kinds, ["kill-runner", "link-down", "stop-app"]);
    for f in fails {
        let kind = f["kind"].as_str().unwrap_or("?");
        assert_eq!(f["injections"].as_u64(), Some(1), "{f}");
        let det = f["detection_ns"].as_array().expect("detection_ns");
        assert_eq!(
            det.len() as u64,
            HOSTS - 1,
            "{kind}: not seen by every peer: {f}"
        );
        assert_eq!(f["detected"].as_u64(), Some(HOSTS - 1), "{f}");
        assert!(f["false_suspicions"].is_u64(), "{f}");
        let (lo, mid, hi) = (
            f["min_ns"].as_u64(),
            f["p50_ns"].as_u64(),
            f["max_ns"].as_u64(),
        );
        assert!(lo <= mid && mid <= hi && lo.is_some(), "{kind}: {f}");
    }
    eprintln!(
        "false suspicions in the failure part: {}",
        v["failure_run"]["false_suspicions_total"]
    );

    // The plot, and nothing left behind.
    for p in v["plots"].as_array().expect("plots") {
        let p = std::path::Path::new(p.as_str().expect("path"));
        let len = std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
        assert!(len > 1000, "{} missing or empty", p.display());
    }
    let _ = std::fs::remove_dir_all(&plots);
    let prefix = stderr
        .split_whitespace()
        .skip_while(|w| *w != "testbed")
        .nth(1)
        .expect("the run names its testbed");
    let ns = Command::new("ip")
        .args(["netns", "list"])
        .output()
        .expect("ip netns");
    let ns = String::from_utf8_lossy(&ns.stdout);
    assert!(!ns.contains(prefix), "testbed {prefix} left behind: {ns}");
    let left: Vec<String> = std::fs::read_dir("/run/xlane")
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().to_string())
                .filter(|n| n.contains(prefix))
                .collect()
        })
        .unwrap_or_default();
    assert!(left.is_empty(), "runner files left behind: {left:?}");
}
