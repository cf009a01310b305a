//! `--config FILE` on every daemon (`xlane kv serve`, `xlane fd run`,
//! `xlane ctl serve`, `xlaned`): the file's keys are the flags' long
//! names, a flag on the command line overrides the file, and a key that
//! names no flag, or a bad value, is refused with the key named.

mod common;

use common::{spawn_until_ready, stop};
use std::process::Command;

fn xlane() -> Command {
    Command::new(env!("CARGO_BIN_EXE_xlane"))
}

fn xlaned() -> Command {
    Command::new(common::xlaned_bin())
}

fn write(dir: &std::path::Path, name: &str, text: &str) -> std::path::PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn daemons_take_their_settings_from_a_file_and_flags_override_it() {
    let dir = std::env::temp_dir().join(format!("xlane-config-it-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    // kv serve: bind, data and fsync from the file; --bind overrides.
    let (file_bind, flag_bind) = (xlane_testports::tcp(), xlane_testports::tcp());
    let kv = write(
        &dir,
        "kv.toml",
        &format!(
            "bind = \"{file_bind}\"\ndata = \"{}\"\nfsync = \"never\"\n",
            dir.join("kv").display()
        ),
    );
    let (c, _out, ready) = spawn_until_ready(
        xlane()
            .args(["kv", "serve", "--config"])
            .arg(&kv)
            .args(["--bind", &flag_bind.to_string()]),
    );
    let v: serde_json::Value = serde_json::from_str(&ready).unwrap();
    assert_eq!(v["bind"], flag_bind.to_string(), "{ready}");
    assert_eq!(v["fsync"], "never", "{ready}");
    assert_eq!(v["data"], dir.join("kv").display().to_string(), "{ready}");
    stop(c);
    // fd run: everything from the file, the switch included.
    let (me, peer) = (xlane_testports::udp(), xlane_testports::udp());
    let fd = write(
        &dir,
        "fd.toml",
        &format!(
            "bind = \"{me}\"\npeer = [\"{peer}\"]\ntable = \"{}\"\nperiod = \"2ms\"\nno-mlock = true\nquiet = true\n",
            dir.join("fd.table").display()
        ),
    );
    let (c, _out, ready) = spawn_until_ready(xlane().args(["fd", "run", "--config"]).arg(&fd));
    let v: serde_json::Value = serde_json::from_str(&ready).unwrap();
    assert_eq!(v["addr"], me.to_string(), "{ready}");
    assert_eq!(v["period_ns"], 2_000_000, "{ready}");
    stop(c);
    // Refusals name the file's key, for every daemon.
    let bad_key = write(&dir, "bad.toml", "colour = 3\n");
    let bad_value = write(&dir, "value.toml", "fsync = \"sometimes\"\n");
    for (cmd, says) in [
        (
            xlane().args(["kv", "serve"]),
            "key `colour`: `xlane kv serve` has no --colour",
        ),
        (
            xlane().args(["fd", "run"]),
            "key `colour`: `xlane fd run` has no --colour",
        ),
        (
            xlane().args(["ctl", "serve"]),
            "key `colour`: `xlane ctl serve` has no --colour",
        ),
        (
            xlaned().arg("sender"),
            "key `colour`: `xlaned sender` has no --colour",
        ),
    ] {
        let out = cmd.arg("--config").arg(&bad_key).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && err.contains(says), "{says}: {err}");
    }
    let out = xlane()
        .args(["kv", "serve", "--config"])
        .arg(&bad_value)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("'--fsync"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}
