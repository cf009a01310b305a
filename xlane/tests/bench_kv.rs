//! `xlane bench kv --json` end to end, short: scenario `both` (saturating
//! cross traffic and CPU load) in a testbed of its own, with real etcd,
//! real Redis and xlane kv clusters of 3 (raft over UDP and X-Raft over
//! the lane), each member in its own host; the documented JSON on stdout.
//! Asserts the shape, that X-Raft over the lane wrote every write without a
//! failure, and that every other system's writes were counted (done or
//! failed: under the saturated switch some fail, which is the benchmark's
//! point), never a timing. Needs root (the testbed), as CI has.

use std::process::Command;

fn installed(bin: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {bin}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn bench_kv_json_reports_every_system_under_saturation() {
    for (bin, pkg) in [
        ("etcd", "etcd-server etcd-client"),
        ("redis-server", "redis-server redis-tools"),
    ] {
        assert!(
            installed(bin),
            "{bin} is not installed: apt-get install -y {pkg} (scripts/test.sh does)"
        );
    }
    let work = if std::path::Path::new("/dev/shm").is_dir() {
        std::path::PathBuf::from("/dev/shm")
    } else {
        std::env::temp_dir()
    };
    let out = Command::new(env!("CARGO_BIN_EXE_xlane"))
        .args(["bench", "kv", "--json", "--scenario", "both"])
        .args(["--replicas", "3", "--writes", "50", "--seconds", "1"])
        .args(["--latency-seconds", "10", "--timeout", "3"])
        .args(["--clients", "4", "--no-plots", "--seed", "42"])
        .arg("--work-dir")
        .arg(work)
        .output()
        .expect("run xlane");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "xlane bench kv failed: {stderr}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
    let systems = v["systems"].as_array().expect("systems array");
    let names: Vec<&str> = systems.iter().filter_map(|s| s["name"].as_str()).collect();
    assert_eq!(names, ["xlane", "xlane-lane", "etcd", "redis"], "{stderr}");
    for s in systems {
        let name = s["name"].as_str().unwrap_or("?");
        assert_eq!(s["scenario"].as_str(), Some("both"), "{name}");
        assert_eq!(s["replicas"].as_u64(), Some(3), "{name}");
        for key in [
            "mean_ns",
            "p50_ns",
            "p99_ns",
            "p999_ns",
            "max_ns",
            "ops_per_s",
            "errors",
            "leader_changes",
        ] {
            assert!(s.get(key).is_some_and(|x| x.is_number()), "{name}: {key}");
        }
        let available = s["available"].as_bool().unwrap_or(false);
        assert!(available, "{name} did not run: {s} {stderr}");
        let errors = s["errors"].as_u64().expect("errors");
        let timed = s["latency_writes"].as_u64().expect("latency_writes");
        if name == "xlane-lane" {
            assert_eq!(errors, 0, "{name}: failed writes: {s}");
            assert_eq!(timed, 50, "{name}: {s}");
            assert!(
                s["throughput_writes"].as_u64().is_some_and(|x| x > 0),
                "{name}: no throughput write"
            );
        } else {
            // Best effort through oversubscribed ports and a loaded core:
            // writes are done or fail, and each is counted.
            assert!(timed + errors >= 1, "{name}: no write counted: {s}");
        }
        if timed > 0 {
            let (p50, p99, p999) = (
                s["p50_ns"].as_u64(),
                s["p99_ns"].as_u64(),
                s["p999_ns"].as_u64(),
            );
            assert!(p50.is_some_and(|x| x > 0), "{name}: p50 {p50:?}");
            assert!(
                p50 <= p99 && p99 <= p999,
                "{name}: percentiles out of order"
            );
        }
    }
    assert_eq!(v["workload"]["seed"].as_u64(), Some(42));
    // The scenario's conditions, from the same run: a floor probe per
    // core, the lane core's load, the cross traffic that ran.
    let sc = v["scenarios"].as_array().expect("scenarios");
    assert_eq!(sc.len(), 1, "{sc:?}");
    assert_eq!(sc[0]["scenario"].as_str(), Some("both"));
    let cores = sc[0]["floor"]["cores"].as_array().expect("floor cores");
    assert!(!cores.is_empty());
    let lane = &sc[0]["lane_core"];
    assert!(
        lane["busy_fraction"].is_number() && lane["saturated"].is_boolean(),
        "{lane}"
    );
    let flows = sc[0]["cross_traffic_bps"]
        .as_array()
        .expect("cross traffic");
    assert!(
        flows.len() >= 3,
        "every member's port gets cross traffic: {flows:?}"
    );
    let ratios = v["ratios"].as_array().expect("ratios");
    for o in ["etcd", "redis"] {
        for metric in ["p99", "mean"] {
            assert!(
                ratios.iter().any(|r| r["system"] == o
                    && r["versus"] == "xlane-lane"
                    && r["metric"] == metric),
                "no ratio {o}/xlane-lane {metric}"
            );
        }
    }
}
