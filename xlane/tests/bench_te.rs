//! `xlane bench te --json` on a small leaf-spine: the points, the fill,
//! the journal replay and the bounds check are all in the report, and a
//! bad topology spec is a clear error.

use std::process::Command;

#[test]
fn bench_te_reports_points_fill_replay_and_bounds() {
    let out = Command::new(env!("CARGO_BIN_EXE_xlane"))
        .args([
            "bench",
            "te",
            "--topology",
            "leaf-spine:4,4,2",
            "--tunnels",
            "60",
        ])
        .args([
            "--points",
            "10,50",
            "--window",
            "20",
            "--json",
            "--no-plots",
        ])
        .output()
        .expect("xlane bench te");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(v["hosts"], 16);
    let points = v["points"].as_array().expect("points");
    assert_eq!(points.len(), 2, "{v}");
    for p in points {
        for k in ["tunnels", "p50_ns", "p99_ns", "max_ns", "rss_bytes"] {
            assert!(p[k].is_u64(), "{k} in {p}");
        }
    }
    assert!(v["fill_s"].is_f64(), "{v}");
    assert!(v["replay_s"].is_f64(), "{v}");
    assert_eq!(v["replay_same"], true);
    assert_eq!(v["bounds_equal"], true);
    let bad = Command::new(env!("CARGO_BIN_EXE_xlane"))
        .args(["bench", "te", "--topology", "torus:3", "--no-plots"])
        .output()
        .expect("xlane bench te");
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("fat-tree:K"));
}
