//! The journal of changes in force, so that a run killed by SIGKILL (or a
//! crash) can be undone later.

use super::{restore_file, restore_netns, valid_netns, RestoreEntry, RestoreReport};
use serde::{Deserialize, Serialize};
use std::io;
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

/// Where journals are written by default.
pub const DEFAULT_JOURNAL_DIR: &str = "/run/xlane";

const VERSION: u32 = 1;

/// Why a journal could not be written, read or restored.
#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    /// Reading, writing or deleting the file failed.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The cause.
        source: io::Error,
    },
    /// The file is not a journal.
    #[error("{path}: not a tuning journal: {source}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: serde_json::Error,
    },
    /// The journal has a version this code does not know.
    #[error("{path}: unknown journal version {version}")]
    Version {
        /// The file.
        path: PathBuf,
        /// The version found.
        version: u32,
    },
    /// The run that wrote the journal is still alive: its changes are in
    /// force on purpose.
    #[error("the run that wrote this journal (pid {pid}) is still running")]
    StillRunning {
        /// Its process id.
        pid: u32,
    },
    /// An entry names a file outside `proc/` and `sys/`, or a bad namespace.
    #[error("{path}: refusing entry {entry}")]
    InvalidEntry {
        /// The file.
        path: PathBuf,
        /// The entry, described.
        entry: String,
    },
}

/// One change in force: the value to write back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub(crate) enum JournalEntry {
    /// A file under the journal's root (path relative to it).
    File {
        name: String,
        path: String,
        value: String,
    },
    /// A file inside a network namespace (absolute path there).
    Netns {
        name: String,
        netns: String,
        path: String,
        value: String,
    },
}

/// The journal file's content. Entries are in the order applied.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Journal {
    version: u32,
    pid: u32,
    /// The writer's start time (clock ticks since boot, /proc/PID/stat
    /// field 22), to tell a live writer from a reused pid.
    start_time: Option<u64>,
    root: PathBuf,
    entries: Vec<JournalEntry>,
}

/// A journal found on disk.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct JournalInfo {
    /// The file.
    pub path: PathBuf,
    /// The pid of the run that wrote it (0 if unreadable).
    pub pid: u32,
    /// Whether that run is still alive.
    pub running: bool,
    /// The number of changes it lists.
    pub entries: usize,
    /// Why it could not be read, if so.
    pub error: Option<String>,
}

static SEQ: AtomicU32 = AtomicU32::new(0);

impl Journal {
    pub(crate) fn new(root: &Path, entries: Vec<JournalEntry>) -> Self {
        let pid = std::process::id();
        Self {
            version: VERSION,
            pid,
            start_time: process_start_time(pid),
            root: root.to_path_buf(),
            entries,
        }
    }

    /// Writes a new journal into `dir` (created if needed) and returns its
    /// path: `tuning-<pid>.json`, or `tuning-<pid>-<n>.json` for the n-th
    /// further tuning of the same process.
    pub(crate) fn write(&self, dir: &Path) -> Result<PathBuf, JournalError> {
        std::fs::create_dir_all(dir).map_err(|source| JournalError::Io {
            path: dir.to_path_buf(),
            source,
        })?;
        let n = SEQ.fetch_add(1, Ordering::Relaxed);
        let name = if n == 0 {
            format!("tuning-{}.json", self.pid)
        } else {
            format!("tuning-{}-{n}.json", self.pid)
        };
        let path = dir.join(name);
        self.write_to(&path)?;
        Ok(path)
    }

    /// Replaces the file at `path` atomically (temporary file + rename).
    pub(crate) fn write_to(&self, path: &Path) -> Result<(), JournalError> {
        let text = serde_json::to_string_pretty(self).map_err(|source| JournalError::Parse {
            path: path.to_path_buf(),
            source,
        })?;
        let tmp = path.with_extension("json.tmp");
        let io_err = |source| JournalError::Io {
            path: path.to_path_buf(),
            source,
        };
        std::fs::write(&tmp, text).map_err(io_err)?;
        std::fs::rename(&tmp, path).map_err(|source| JournalError::Io {
            path: path.to_path_buf(),
            source,
        })
    }

    fn read(path: &Path) -> Result<Self, JournalError> {
        let text = std::fs::read_to_string(path).map_err(|source| JournalError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        let j: Journal = serde_json::from_str(&text).map_err(|source| JournalError::Parse {
            path: path.to_path_buf(),
            source,
        })?;
        if j.version != VERSION {
            return Err(JournalError::Version {
                path: path.to_path_buf(),
                version: j.version,
            });
        }
        Ok(j)
    }

    /// Whether the writer is alive (and is not this process).
    fn writer_running(&self) -> bool {
        if self.pid == std::process::id() {
            return false;
        }
        match (process_start_time(self.pid), self.start_time) {
            (Some(now), Some(then)) => now == then,
            (Some(_), None) => true,
            (None, _) => false,
        }
    }
}

/// The start time of a process (clock ticks after boot), if it exists.
fn process_start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_start_time(&stat)
}

/// The start time (field 22) from the text of `/proc/PID/stat`.
pub(crate) fn parse_start_time(stat: &str) -> Option<u64> {
    let after = &stat[stat.rfind(')')? + 1..];
    // Fields after the command name start with field 3 (state); start
    // time is field 22.
    after.split_whitespace().nth(19)?.parse().ok()
}

/// `(pid, start time, number of entries)` of a journal's text.
pub(crate) fn summarize_journal_text(text: &str) -> Option<(u32, Option<u64>, usize)> {
    let j: Journal = serde_json::from_str(text).ok()?;
    Some((j.pid, j.start_time, j.entries.len()))
}

/// Checks that a root-relative path stays under `proc/` or `sys/`.
fn safe_relative(path: &str) -> bool {
    let p = Path::new(path);
    let mut comps = p.components();
    let first_ok = matches!(comps.next(), Some(Component::Normal(c)) if c == "proc" || c == "sys");
    first_ok && comps.all(|c| matches!(c, Component::Normal(_)))
}

/// Undoes the changes listed in a journal left by a run that did not
/// restore them (killed by SIGKILL, crashed), in reverse order, continuing
/// past errors. The journal is deleted when every step succeeded.
///
/// Refuses journals whose writer is still running, and journals naming
/// files outside `proc/` and `sys/` (nothing is written then).
pub fn restore_from_journal(path: &Path) -> Result<RestoreReport, JournalError> {
    let j = Journal::read(path)?;
    if j.writer_running() {
        return Err(JournalError::StillRunning { pid: j.pid });
    }
    for e in &j.entries {
        let ok = match e {
            JournalEntry::File { path: p, .. } => safe_relative(p),
            JournalEntry::Netns { netns, path: p, .. } => {
                valid_netns(netns)
                    && p.starts_with("/sys/class/net/")
                    && Path::new(p)
                        .components()
                        .all(|c| matches!(c, Component::RootDir | Component::Normal(_)))
            }
        };
        if !ok {
            return Err(JournalError::InvalidEntry {
                path: path.to_path_buf(),
                entry: format!("{e:?}"),
            });
        }
    }
    let mut report = RestoreReport {
        journal: Some(path.to_path_buf()),
        ..Default::default()
    };
    for e in j.entries.iter().rev() {
        report.entries.push(match e {
            JournalEntry::File {
                name,
                path: p,
                value,
            } => {
                let full = j.root.join(p);
                RestoreEntry {
                    name: name.clone(),
                    target: full.display().to_string(),
                    value: value.clone(),
                    outcome: restore_file(&full, value),
                }
            }
            JournalEntry::Netns {
                name,
                netns,
                path: p,
                value,
            } => RestoreEntry {
                name: name.clone(),
                target: format!("{netns}:{p}"),
                value: value.clone(),
                outcome: restore_netns(netns, p, value),
            },
        });
    }
    if report.is_clean() {
        match std::fs::remove_file(path) {
            Ok(()) => report.journal_removed = true,
            Err(e) => report.journal_error = Some(e.to_string()),
        }
    }
    Ok(report)
}

/// The journals in `dir` (`tuning-*.json`), with whether their writer still
/// runs. A missing directory gives an empty list.
pub fn list_journals(dir: &Path) -> io::Result<Vec<JournalInfo>> {
    let rd = match std::fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut out = Vec::new();
    for ent in rd.filter_map(|e| e.ok()) {
        let name = ent.file_name();
        let Some(name) = name.to_str() else { continue };
        if !(name.starts_with("tuning-") && name.ends_with(".json")) {
            continue;
        }
        let path = ent.path();
        out.push(match Journal::read(&path) {
            Ok(j) => JournalInfo {
                path,
                pid: j.pid,
                running: j.writer_running() || j.pid == std::process::id(),
                entries: j.entries.len(),
                error: None,
            },
            Err(e) => JournalInfo {
                path,
                pid: 0,
                running: false,
                entries: 0,
                error: Some(e.to_string()),
            },
        });
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_paths() {
        for ok in [
            "proc/sys/kernel/sched_rt_runtime_us",
            "sys/class/net/x/queues/rx-0/rps_cpus",
        ] {
            assert!(safe_relative(ok), "{ok}");
        }
        for bad in [
            "/proc/x",
            "etc/passwd",
            "proc/../etc/passwd",
            "",
            "proc/./x/../../y",
        ] {
            assert!(!safe_relative(bad), "{bad}");
        }
    }

    #[test]
    fn own_start_time_is_readable() {
        assert!(process_start_time(std::process::id()).is_some());
    }
}
