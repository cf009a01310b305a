//! `xlane bench jitter --json` end to end: every configuration of the
//! comparison in one short run of the `both` scenario, the documented JSON
//! keys and the plots. No time is asserted and no two timings compared
//! (docs/design.md, "Principles"): the lane against the plain socket is what the
//! command reports.

use std::process::Command;

#[test]
fn jitter_json_and_plots() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: needs root");
        return;
    }
    let dir = std::env::temp_dir().join(format!("xlane-jitter-test-{}", std::process::id()));
    let out = Command::new(env!("CARGO_BIN_EXE_xlane"))
        .args([
            "bench",
            "jitter",
            "--json",
            "--scenario",
            "both",
            "--seconds",
            "1",
            "--round",
            "0.5",
        ])
        .arg("--plots")
        .arg(&dir)
        .output()
        .expect("run xlane");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "xlane bench jitter failed: {stderr}");
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 1, "one JSON object per scenario: {text}");
    let v: serde_json::Value = serde_json::from_str(lines[0]).expect("JSON");
    assert_eq!(v["scenario"], "both");
    let configs = v["configs"].as_array().expect("configs");
    let names: Vec<&str> = configs.iter().filter_map(|c| c["name"].as_str()).collect();
    assert_eq!(names, ["xlane", "xlane0", "qjump", "busypoll", "plain"]);
    for c in configs {
        for key in [
            "samples",
            "lost",
            "min_ns",
            "p50_ns",
            "p99_ns",
            "p999_ns",
            "p9999_ns",
            "max_ns",
            "avg_ns",
            "delta_max_ns",
            "delta_max_excl_gaps_ns",
        ] {
            assert!(c[key].is_u64(), "{key} missing in {c}");
        }
        assert!(
            c["relative_jitter"].is_f64() && c["p_bound"].is_f64(),
            "{c}"
        );
        let p = c["p_bound"].as_f64().unwrap();
        assert!((0.0..=1.0).contains(&p), "{c}");
        for q in ["p50", "p99", "p99.9", "p99.99"] {
            assert!(c["ci"].get(q).is_some(), "ci of {q} missing in {c}");
        }
        let (lo, p50, hi) = (
            c["ci"]["p50"][0].as_u64(),
            c["p50_ns"].as_u64(),
            c["ci"]["p50"][1].as_u64(),
        );
        if let (Some(lo), Some(p50), Some(hi)) = (lo, p50, hi) {
            assert!(lo <= p50 && p50 <= hi, "p50 outside its interval: {c}");
        }
        assert!(c["delta_max_excl_gaps_ns"].as_u64() <= c["delta_max_ns"].as_u64());
    }
    let floor = &v["floor"];
    assert!(
        floor["stolen_fraction"].is_f64() && floor["max_gap_ns"].is_u64(),
        "{floor}"
    );
    assert!(
        floor["cores"].as_array().is_some_and(|c| !c.is_empty()),
        "{floor}"
    );
    // The lane against the plain socket is the command's output (a ratio
    // in one run), not asserted here: two timings compared depend on how
    // busy the machine is.
    for c in configs {
        assert!(c["samples"].as_u64().is_some_and(|n| n > 0), "{c}");
    }
    for kind in ["cdf", "ladder", "outliers"] {
        for ext in ["png", "svg"] {
            let f = dir.join(format!("jitter-both-{kind}.{ext}"));
            let meta = std::fs::metadata(&f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
            assert!(meta.len() > 1000, "{} is too small", f.display());
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
