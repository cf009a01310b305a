//! The doctor on this machine: checks the JSON shape and that every check is
//! present (the verdicts depend on the machine and are not asserted).

use xlane_host::doctor::{self, DoctorOptions, CHECK_NAMES};

const STATUSES: &[&str] = &[
    "ok",
    "fixable now",
    "needs reboot",
    "warn",
    "info",
    "unknown",
];

fn check_shape(v: &serde_json::Value) {
    let obj = v.as_object().expect("object");
    let mut keys: Vec<&str> = obj.keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(keys, ["checks", "floor", "lane_core"]);
    assert!(v["lane_core"].is_u64());
    let checks = v["checks"].as_array().expect("checks");
    let names: Vec<&str> = checks
        .iter()
        .map(|c| c["name"].as_str().expect("name"))
        .collect();
    assert_eq!(names, CHECK_NAMES);
    for c in checks {
        let status = c["status"].as_str().expect("status");
        assert!(STATUSES.contains(&status), "{c}");
        assert!(c["detail"].is_string(), "{c}");
        assert!(c["fix"].is_null() || c["fix"].is_string(), "{c}");
    }
}

#[test]
fn doctor_json_on_this_machine() {
    let opts = DoctorOptions {
        seconds: 0.3,
        ..Default::default()
    };
    let report = doctor::run(&opts).expect("doctor");
    let v = serde_json::to_value(&report).expect("json");
    check_shape(&v);
    let floor = &v["floor"];
    let cores = floor["cores"].as_array().expect("floor cores");
    let probed = cores.len() + floor["errors"].as_array().map_or(0, Vec::len);
    let online = std::fs::read_to_string("/sys/devices/system/cpu/online").expect("online");
    let n = xlane_host::tuning::CpuSet::parse_list(&online)
        .expect("parse")
        .len();
    assert_eq!(probed, n);
    for c in cores {
        for k in [
            "core",
            "stolen_fraction",
            "max_gap_ns",
            "gaps",
            "duration_ns",
        ] {
            assert!(!c[k].is_null(), "{k} in {c}");
        }
    }
    // The table shows every check and the summary line.
    let table = report.to_table();
    for name in CHECK_NAMES {
        assert!(table.contains(name), "{name}");
    }
    assert!(table.contains(&report.summary_line()));
}

#[test]
fn doctor_without_window() {
    let opts = DoctorOptions {
        seconds: 0.0,
        ..Default::default()
    };
    let report = doctor::run(&opts).expect("doctor");
    let v = serde_json::to_value(&report).expect("json");
    check_shape(&v);
    assert!(v["floor"].is_null());
    let floor = report
        .checks
        .iter()
        .find(|c| c.name == "floor_lane_core")
        .expect("floor check");
    assert_eq!(floor.status, doctor::Status::Unknown);
}
