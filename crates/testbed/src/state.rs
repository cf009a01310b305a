//! The state file of a testbed, `/run/xlane/<prefix>.toml`, so that another
//! process (`xlane testbed down`, `status`, `traffic`) can find it.
//!
//! Writers take an exclusive `flock` on `/run/xlane/<prefix>.lock` and
//! replace the file atomically (write to a temporary file, then rename).

use crate::config::TestbedConfig;
use crate::error::TestbedError;
use crate::measurement::LinkMeasurement;
use serde::{Deserialize, Serialize};
use std::fs::{File, OpenOptions};
use std::net::Ipv4Addr;
use std::os::fd::AsRawFd;
use std::path::PathBuf;

/// Directory of state files.
pub const STATE_DIR: &str = "/run/xlane";

/// One emulated host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostInfo {
    /// Index, 0-based (`h0`, `h1`, ...).
    pub index: usize,
    /// Network namespace (`<prefix>-h<i>`).
    pub netns: String,
    /// The host's interface inside its namespace (`<prefix>-h<i>`).
    pub iface: String,
    /// Its address (198.18.0.(i+1)/24).
    pub addr: Ipv4Addr,
    /// Its MAC address (`02:78:6c:00:00:<i+1>`).
    pub mac: String,
}

/// A running cross-traffic generator, as recorded in the state file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GeneratorRecord {
    /// Unique within the process.
    pub id: u64,
    /// Process running the generator.
    pub pid: u32,
    /// Start time of that process (clock ticks after boot, field 22 of
    /// `/proc/<pid>/stat`), so a reused PID is never mistaken for it.
    pub start_ticks: u64,
    /// True when the process exists only to run generators (e.g. `xlane
    /// testbed traffic`): `down` then sends it SIGTERM. Generators that are
    /// threads of the testbed's owner are not killed (deleting the
    /// namespaces is enough).
    pub standalone: bool,
    /// Human description (`udp h1->h2 saturate`).
    pub description: String,
}

/// Contents of `/run/xlane/<prefix>.toml`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StateFile {
    /// The testbed's prefix.
    pub prefix: String,
    /// Seconds since the Unix epoch when `up` started.
    pub created_unix_s: u64,
    /// Process that owns the testbed and tears it down on exit; `None` for
    /// a detached testbed (made by `xlane testbed up`), which lives until
    /// `xlane testbed down`.
    pub owner_pid: Option<u32>,
    /// Start time of the owner (see `GeneratorRecord::start_ticks`).
    pub owner_start_ticks: Option<u64>,
    /// The configuration it was made with (prefix filled in).
    pub config: TestbedConfig,
    /// Switch namespace.
    pub switch_netns: String,
    /// Bridge device in the switch namespace.
    pub bridge: String,
    /// Switch-side port of each host, by host index.
    pub switch_ports: Vec<String>,
    /// The hosts.
    pub hosts: Vec<HostInfo>,
    /// Measured link latencies, if measured.
    #[serde(default)]
    pub measurement: Option<LinkMeasurement>,
    /// Generators running now.
    #[serde(default)]
    pub generators: Vec<GeneratorRecord>,
}

/// Path of the state file of `prefix`.
pub fn state_path(prefix: &str) -> PathBuf {
    PathBuf::from(format!("{STATE_DIR}/{prefix}.toml"))
}

fn lock_path(prefix: &str) -> PathBuf {
    PathBuf::from(format!("{STATE_DIR}/{prefix}.lock"))
}

/// An exclusive lock on a testbed's state; released on drop.
pub(crate) struct StateLock {
    _file: File,
}

pub(crate) fn lock(prefix: &str) -> Result<StateLock, TestbedError> {
    std::fs::create_dir_all(STATE_DIR)
        .map_err(|e| TestbedError::io(format!("create {STATE_DIR}"), e))?;
    let p = lock_path(prefix);
    let f = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&p)
        .map_err(|e| TestbedError::io(format!("open {}", p.display()), e))?;
    // SAFETY: flock on a valid, owned file descriptor.
    let rc = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) };
    if rc != 0 {
        return Err(TestbedError::io(
            format!("flock {}", p.display()),
            std::io::Error::last_os_error(),
        ));
    }
    Ok(StateLock { _file: f })
}

/// Read the state file of `prefix`; `Ok(None)` if there is none.
pub fn read_state(prefix: &str) -> Result<Option<StateFile>, TestbedError> {
    let path = state_path(prefix);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(TestbedError::io(format!("read {}", path.display()), e)),
    };
    toml::from_str(&text)
        .map(Some)
        .map_err(|e| TestbedError::State {
            path,
            reason: e.to_string(),
        })
}

/// Write the state file atomically (caller holds the lock).
pub(crate) fn write_state_locked(state: &StateFile) -> Result<(), TestbedError> {
    let path = state_path(&state.prefix);
    let text = toml::to_string(state).map_err(|e| TestbedError::State {
        path: path.clone(),
        reason: e.to_string(),
    })?;
    std::fs::create_dir_all(STATE_DIR)
        .map_err(|e| TestbedError::io(format!("create {STATE_DIR}"), e))?;
    let tmp = PathBuf::from(format!("{}.tmp{}", path.display(), std::process::id()));
    std::fs::write(&tmp, text)
        .map_err(|e| TestbedError::io(format!("write {}", tmp.display()), e))?;
    std::fs::rename(&tmp, &path)
        .map_err(|e| TestbedError::io(format!("rename to {}", path.display()), e))
}

/// Read, change and write back the state of `prefix` under its lock.
/// Returns `Ok(false)` when there is no state file.
pub(crate) fn update_state(
    prefix: &str,
    f: impl FnOnce(&mut StateFile),
) -> Result<bool, TestbedError> {
    // Do not create a lock file for a testbed that is gone.
    if !state_path(prefix).exists() {
        return Ok(false);
    }
    let _l = lock(prefix)?;
    let Some(mut s) = read_state(prefix)? else {
        // Removed while we waited for the lock: drop the lock file again.
        let _ = std::fs::remove_file(lock_path(prefix));
        return Ok(false);
    };
    f(&mut s);
    write_state_locked(&s)?;
    Ok(true)
}

/// Remove the state and lock files of `prefix` (missing files are fine).
pub(crate) fn remove_state(prefix: &str) {
    let _ = std::fs::remove_file(state_path(prefix));
    let _ = std::fs::remove_file(lock_path(prefix));
}

/// Prefixes that have a state file.
pub fn state_prefixes() -> Vec<String> {
    let Ok(rd) = std::fs::read_dir(STATE_DIR) else {
        return Vec::new();
    };
    let mut v: Vec<String> = rd
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            e.file_name()
                .to_str()
                .and_then(|n| n.strip_suffix(".toml"))
                .map(str::to_string)
        })
        .collect();
    v.sort();
    v
}

/// Start time of process `pid` in clock ticks after boot, or `None` if it
/// does not exist.
pub fn process_start_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may contain spaces:
    // fields after the last ')' are space-separated, starting at field 3.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// True when process `pid` exists and started at `start_ticks`.
pub fn process_alive(pid: u32, start_ticks: Option<u64>) -> bool {
    match (process_start_ticks(pid), start_ticks) {
        (Some(now), Some(then)) => now == then,
        (Some(_), None) => true,
        (None, _) => false,
    }
}

/// This process: (pid, start ticks).
pub(crate) fn me() -> (u32, Option<u64>) {
    let pid = std::process::id();
    (pid, process_start_ticks(pid))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_process_is_alive() {
        let (pid, start) = me();
        assert!(start.is_some());
        assert!(process_alive(pid, start));
        assert!(!process_alive(pid, start.map(|s| s + 1)));
    }

    #[test]
    fn dead_process_is_not_alive() {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        // Reaped: the PID is free (reuse within this instant is unlikely,
        // and a reused PID would have another start time anyway).
        assert!(process_start_ticks(pid).is_none() || !process_alive(pid, Some(0)));
    }
}
