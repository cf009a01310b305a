//! `xlane bench kv --json` end to end: real etcd, real Redis and xlane kv
//! clusters of 3 on loopback (raft over UDP and X-Raft over the lane), a
//! short latency and throughput phase, the documented JSON on stdout.

use std::process::Command;

fn installed(bin: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {bin}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn bench_kv_json_reports_every_system() {
    for (bin, pkg) in [
        ("etcd", "etcd-server etcd-client"),
        ("redis-server", "redis-server redis-tools"),
    ] {
        assert!(
            installed(bin),
            "{bin} is not installed: apt-get install -y {pkg} (scripts/test.sh does)"
        );
    }
    let work = std::env::temp_dir();
    let out = Command::new(env!("CARGO_BIN_EXE_xlane"))
        .args([
            "bench",
            "kv",
            "--json",
            "--replicas",
            "3",
            "--writes",
            "200",
            "--seconds",
            "2",
            "--clients",
            "4",
            "--no-plots",
            "--seed",
            "42",
        ])
        .arg("--work-dir")
        .arg(if std::path::Path::new("/dev/shm").is_dir() {
            std::path::PathBuf::from("/dev/shm")
        } else {
            work
        })
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
        assert_eq!(s["replicas"].as_u64(), Some(3), "{name}");
        for key in ["mean_ns", "p50_ns", "p99_ns", "ops_per_s"] {
            assert!(s.get(key).is_some_and(|x| x.is_number()), "{name}: {key}");
        }
        let available = s["available"].as_bool().unwrap_or(false);
        assert!(available, "{name} did not run: {s} {stderr}");
        let (p50, p99) = (s["p50_ns"].as_u64(), s["p99_ns"].as_u64());
        assert!(p50.is_some_and(|x| x > 0), "{name}: p50 {p50:?}");
        assert!(p50 <= p99, "{name}: p50 {p50:?} > p99 {p99:?}");
        assert!(
            s["ops_per_s"].as_f64().is_some_and(|x| x > 0.0),
            "{name}: no throughput"
        );
    }
    assert_eq!(v["workload"]["seed"].as_u64(), Some(42));
    // The machine floor, measured in the same run.
    let f = &v["floor"];
    assert_eq!(f["samples"].as_u64(), Some(10_000), "{f}");
    let rtt = f["rtt_p50_ns"].as_u64().expect("rtt_p50_ns");
    assert!(rtt > 0, "{f}");
    assert_eq!(f["visible_floor_ns"].as_u64(), Some(3 * rtt), "{f}");
    let ratios = v["ratios"].as_array().expect("ratios");
    for x in ["xlane", "xlane-lane"] {
        for o in ["etcd", "redis"] {
            assert!(
                ratios.iter().any(|r| r["system"] == x && r["versus"] == o),
                "no ratio {x} vs {o}"
            );
        }
    }
}
