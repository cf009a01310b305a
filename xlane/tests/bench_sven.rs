//! `xlane bench sven` through the real command, scaled down: two workers,
//! one distribution, two curve points, a 4-second stepped run per
//! controller. The JSON has the documented shape, the per-second rows
//! add up (no more replies than requests sent and not dropped or lost),
//! the plots are written, and bad
//! arguments get a clear error. No time is asserted (the targets' verdicts
//! are measurements, not test results).

use std::process::Command;

fn xlane() -> Command {
    Command::new(env!("CARGO_BIN_EXE_xlane"))
}

#[test]
fn bench_sven_json_has_curves_controllers_and_seconds() {
    let plots = std::env::temp_dir().join(format!("xlane-bench-sven-{}", std::process::id()));
    let out = xlane()
        .args([
            "bench",
            "sven",
            "--json",
            "--workers",
            "2",
            "--service",
            "1ms",
        ])
        .args(["--distributions", "exp", "--curve-loads", "0.5,0.9"])
        .args(["--curve-seconds", "1", "--steps", "0.5:1,1.2:3"])
        .args(["--controllers", "none,aiad,default", "--plots"])
        .arg(&plots)
        .output()
        .expect("run xlane");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "xlane bench sven failed: {stderr}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
    // SLO p99 = 30 × 1 ms; capacity 2 / 1 ms.
    assert_eq!(v["slo_ns"], 30_000_000u64, "{v}");
    assert_eq!(v["capacity_rps"].as_f64(), Some(2000.0));
    assert!(
        v["slo_violating_rps"]["exp"]
            .as_f64()
            .is_some_and(|r| r > 0.0),
        "{v}"
    );
    let curve = &v["curves"][0];
    assert_eq!(curve["points"].as_array().map(Vec::len), Some(2), "{curve}");
    let runs = v["controllers"].as_array().expect("controllers");
    let names: Vec<&str> = runs.iter().filter_map(|r| r["name"].as_str()).collect();
    assert_eq!(names, ["none", "aiad", "default"]);
    for r in runs {
        assert_eq!(r["distribution"], "exp", "{r}");
        let secs = r["seconds"].as_array().expect("seconds");
        assert_eq!(secs.len(), 4, "{r}");
        for s in secs {
            for key in ["offered_rps", "achieved_rps", "goodput_rps", "drop_rate"] {
                assert!(s[key].is_f64(), "{key} missing in {s}");
            }
            assert!(s["p99_ns"].is_u64(), "{s}");
            let ok = s["achieved_rps"].as_f64().unwrap();
            assert!(s["goodput_rps"].as_f64().unwrap() <= ok, "{s}");
        }
        // Replies received within the run are at most the requests sent,
        // less those dropped or lost.
        let sum = |f: &dyn Fn(&serde_json::Value) -> f64| secs.iter().map(f).sum::<f64>();
        let sent = sum(&|s| s["offered_rps"].as_f64().unwrap());
        let dropped =
            sum(&|s| s["drop_rate"].as_f64().unwrap() * s["offered_rps"].as_f64().unwrap());
        let lost = sum(&|s| s["lost"].as_u64().unwrap() as f64);
        let replies = sum(&|s| s["achieved_rps"].as_f64().unwrap());
        assert!(
            replies > 0.0 && replies <= sent - dropped - lost + 0.5,
            "{r}"
        );
        // Second 0 at half load, then overload; the first overload second
        // settles, so seconds 2 and 3 are the settled ones.
        let settled: Vec<bool> = secs.iter().map(|s| s["settled"] == true).collect();
        assert_eq!(settled, [false, false, true, true], "{r}");
        if r["name"] == "none" {
            assert_eq!(r["admission_drops"], 0, "{r}");
        }
    }
    let targets = v["targets"].as_array().expect("targets");
    assert_eq!(targets.len(), 4, "{v}");
    assert!(plots.join("sven-curve.png").exists(), "{stderr}");
    assert!(plots.join("sven-steps.png").exists(), "{stderr}");
    std::fs::remove_dir_all(&plots).unwrap();
}

#[test]
fn bench_sven_refuses_bad_arguments() {
    for (args, want) in [
        (&["--distributions", "normal"][..], "unknown distribution"),
        (&["--controllers", "pid"][..], "unknown controller"),
        (&["--steps", "1.2"][..], "LOAD:SECONDS"),
        (&["--curve-loads", "0.9,0.5"][..], "--curve-loads"),
        (&["--slo", "p100=1ms"][..], "bad SLO"),
        (&["--service", "1us"][..], "--service"),
        (&["--workers", "0"][..], "--workers"),
    ] {
        let out = xlane()
            .args(["bench", "sven", "--no-plots"])
            .args(args)
            .output()
            .expect("run xlane");
        assert!(!out.status.success(), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(want), "{args:?}: {err}");
    }
}
