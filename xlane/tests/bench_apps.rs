//! `xlane bench apps --json` end to end, short: Redis (a primary and 2
//! replicas) and sockperf, each default and under `xlane run`, under
//! saturating cross traffic and CPU load in a testbed of its own. Asserts
//! the documented JSON and that the level runs took the preload path,
//! never a timing. Needs root, redis-server, sockperf, and
//! libxlane_preload.so beside the xlane binary (scripts/test.sh builds
//! it).

use std::process::Command;

#[test]
fn bench_apps_json_has_every_run() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: needs root");
        return;
    }
    let lib =
        std::path::Path::new(env!("CARGO_BIN_EXE_xlane")).with_file_name("libxlane_preload.so");
    assert!(
        lib.is_file(),
        "{} missing: cargo build -p xlane-preload (scripts/test.sh does)",
        lib.display()
    );
    let out = Command::new(env!("CARGO_BIN_EXE_xlane"))
        .args([
            "bench",
            "apps",
            "--json",
            "--no-plots",
            "--apps",
            "redis,sockperf",
            "--writes",
            "20",
            "--sockperf-seconds",
            "2",
        ])
        .output()
        .expect("run xlane");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "xlane bench apps failed: {stderr}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
    let apps = v["apps"].as_array().expect("apps");
    let runs: Vec<(String, String, String)> = apps
        .iter()
        .map(|a| {
            let s = |k: &str| a[k].as_str().unwrap_or("").to_string();
            (s("name"), s("scenario"), s("mode"))
        })
        .collect();
    let want = [
        ("redis", "both", "default"),
        ("redis", "both", "level"),
        ("sockperf", "idle", "default"),
        ("sockperf", "both", "default"),
        ("sockperf", "both", "level"),
    ];
    for (n, sc, m) in want {
        assert!(
            runs.contains(&(n.into(), sc.into(), m.into())),
            "{n}/{sc}/{m} missing in {runs:?}"
        );
    }
    for a in apps {
        for k in ["p50_ns", "p99_ns", "max_ns", "errors", "leader_changes"] {
            assert!(a[k].is_u64(), "{k} in {a}");
        }
        if a["mode"] == "level" && a["available"] == true {
            assert!(
                a["path"].as_str().unwrap_or("").starts_with("preload"),
                "{a}"
            );
        }
    }
    // The level runs of both applications produced numbers.
    for n in ["redis", "sockperf"] {
        let level = apps
            .iter()
            .find(|a| a["name"] == n && a["mode"] == "level")
            .unwrap();
        assert_eq!(level["available"], true, "{level}");
    }
    assert!(v["floor"]["max_gap_ns"].is_u64());
    assert!(v["level"]["bound_ns"].as_u64().unwrap_or(0) > 0);
}
