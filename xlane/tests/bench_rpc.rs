//! `xlane bench rpc` through the real command, scaled down: two worker
//! ports behind the router (jbsq:1) and without one, one load, one second
//! per point. Every request is answered; the JSON has the documented
//! shape; the plot is written; bad arguments get a clear error. No time
//! is asserted (the targets' verdicts are measurements, not test results).

use std::process::Command;

fn xlane() -> Command {
    Command::new(env!("CARGO_BIN_EXE_xlane"))
}

#[test]
fn bench_rpc_json_has_every_policy_and_point() {
    let plots = std::env::temp_dir().join(format!("xlane-bench-rpc-{}", std::process::id()));
    let out = xlane()
        .args(["bench", "rpc", "--json", "--servers", "1", "--workers", "2"])
        .args([
            "--service",
            "200us",
            "--loads",
            "0.3",
            "--policies",
            "jbsq:1,random",
        ])
        .args(["--seconds", "1", "--warmup", "0.2", "--plots"])
        .arg(&plots)
        .output()
        .expect("run xlane");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "xlane bench rpc failed: {stderr}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
    let pols = v["policies"].as_array().expect("policies");
    let names: Vec<&str> = pols.iter().filter_map(|p| p["name"].as_str()).collect();
    assert_eq!(names, ["jbsq:1", "random", "direct"]);
    for p in pols {
        let pts = p["points"].as_array().expect("points");
        assert_eq!(pts.len(), 1, "{p}");
        let q = &pts[0];
        for key in ["p50_ns", "p99_ns", "p999_ns", "dropped", "lost", "samples"] {
            assert!(q[key].is_u64(), "{key} missing in {q}");
        }
        for key in ["offered_rps", "achieved_rps", "load"] {
            assert!(q[key].is_f64(), "{key} missing in {q}");
        }
        assert!(q["samples"].as_u64().unwrap() > 0, "{q}");
        assert_eq!(q["lost"], 0, "{q}");
        assert_eq!(q["dropped"], 0, "{q}");
        let (p50, p99, p999) = (
            q["p50_ns"].as_u64(),
            q["p99_ns"].as_u64(),
            q["p999_ns"].as_u64(),
        );
        assert!(p50 <= p99 && p99 <= p999, "{q}");
    }
    // 2 workers of mean 1.9 · 200 µs.
    let cap = v["capacity_rps"].as_f64().unwrap();
    assert!((cap - 2.0 / 380e-6).abs() < 1e-3, "{cap}");
    assert!(v["targets"].as_array().is_some_and(|t| !t.is_empty()));
    assert!(plots.join("rpc-p99-vs-load.png").exists(), "{stderr}");
    std::fs::remove_dir_all(&plots).unwrap();
}

#[test]
fn bench_rpc_refuses_bad_arguments() {
    for (args, want) in [
        (&["--loads", "1.5"][..], "--loads"),
        (&["--policies", "fastest"][..], "unknown policy"),
        (&["--service", "fast"][..], "fast"),
        (&["--workers", "0"][..], "--workers"),
        (&["--max-gap-ms", "0"][..], "--max-gap-ms"),
        (&["--retries", "11"][..], "--retries"),
    ] {
        let out = xlane()
            .args(["bench", "rpc", "--no-plots"])
            .args(args)
            .output()
            .expect("run xlane");
        assert!(!out.status.success(), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(want), "{args:?}: {err}");
    }
}
