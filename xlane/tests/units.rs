//! The service files in `contrib/systemd` and the settings files in
//! `contrib/config` stay true to the commands: each unit's `ExecStart`
//! runs (with `--help`) against the sample settings file it names, so
//! every key of the sample is a flag of that command; each unit restarts
//! on failure, and the lane daemons get their real-time and locked-memory
//! limits and capabilities rather than full root where they can.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

fn contrib() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../contrib")
}

fn exec_start(unit: &str) -> Vec<String> {
    let line = unit
        .lines()
        .find_map(|l| l.strip_prefix("ExecStart="))
        .expect("an ExecStart");
    line.split_whitespace().map(String::from).collect()
}

#[test]
fn every_unit_runs_its_command_with_its_sample_settings() {
    let units = [
        ("xlane-ctl.service", None, "ctl.toml"),
        ("xlane-fd.service", None, "fd.toml"),
        ("xlane-kv.service", None, "kv.toml"),
        ("xlane-host.service", None, "host.toml"),
        ("xlaned@.service", Some("receiver"), "xlaned-receiver.toml"),
    ];
    for (name, instance, sample) in units {
        let text = std::fs::read_to_string(contrib().join("systemd").join(name)).unwrap();
        assert!(text.contains("Restart=on-failure"), "{name}");
        let mut argv = exec_start(&text);
        for a in &mut argv {
            if let Some(i) = instance {
                *a = a.replace("%i", i);
            }
        }
        let exe = match argv[0].as_str() {
            "/usr/local/bin/xlane" => PathBuf::from(env!("CARGO_BIN_EXE_xlane")),
            "/usr/local/bin/xlaned" => common::xlaned_bin(),
            other => panic!("{name}: unknown program {other}"),
        };
        let at = argv.iter().position(|a| a == "--config").expect("--config");
        assert!(argv[at + 1].starts_with("/etc/xlane/"), "{name}");
        argv[at + 1] = contrib().join("config").join(sample).display().to_string();
        let out = Command::new(exe)
            .args(&argv[1..])
            .arg("--help")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{name} with {sample}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        if name.starts_with("xlane-fd") || name.starts_with("xlaned") {
            assert!(text.contains("LimitMEMLOCK=infinity"), "{name}");
            assert!(text.contains("LimitRTPRIO=99"), "{name}");
            assert!(text.contains("AmbientCapabilities=CAP_SYS_NICE"), "{name}");
        }
        if name.starts_with("xlane-host") {
            assert!(text.contains("AmbientCapabilities=CAP_NET_ADMIN"), "{name}");
        }
    }
    // A key the command lacks is caught the same way.
    let bad = std::env::temp_dir().join(format!("xlane-units-{}.toml", std::process::id()));
    std::fs::write(&bad, "no-such-flag = 1\n").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_xlane"))
        .args(["kv", "serve", "--config"])
        .arg(&bad)
        .arg("--help")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let _ = std::fs::remove_file(&bad);
}
