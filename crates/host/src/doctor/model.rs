//! What the checks work on and give: thresholds, the check names, the
//! [`SysSource`] files are read from, a [`Check`]'s [`Status`], the
//! [`Measurements`] of the window and the [`Context`].

use crate::floor::FloorReport;
use crate::tuning::{self};
use serde::Serialize;
use std::io;
use std::path::PathBuf;

/// A floor is `ok` up to this fraction of time lost in gaps.
pub const FLOOR_OK_STOLEN_FRACTION: f64 = 0.001;
/// A floor is `ok` up to this longest gap (nanoseconds).
pub const FLOOR_OK_MAX_GAP_NS: u64 = 100_000;
/// Timer ticks per second on the lane core that count as `ok` (adaptive
/// ticks bring them to about 1 Hz).
pub const TICKS_OK_PER_SEC: f64 = 10.0;

/// The names of all checks, in report order.
pub const CHECK_NAMES: &[&str] = &[
    "isolcpus",
    "nohz_full",
    "rcu_nocbs",
    "cstates",
    "nmi_watchdog",
    "timer_ticks",
    "irq_affinity",
    "rt_throttling",
    "transparent_hugepages",
    "cpufreq_governor",
    "smt_sibling",
    "nic_numa",
    "smi",
    "floor_lane_core",
    "floor_other_cores",
    "steal_time",
    "tuning_leftovers",
    "rx_path",
];

/// Read access to a machine's files, by absolute path (`/proc/cmdline`).
pub trait SysSource {
    /// The whole content of a file.
    fn read(&self, path: &str) -> io::Result<String>;
    /// The names in a directory, sorted.
    fn list(&self, dir: &str) -> io::Result<Vec<String>>;
    /// Whether the path exists.
    fn exists(&self, path: &str) -> bool;
    /// The content of a gzip-compressed file, decompressed.
    fn read_gz(&self, path: &str) -> io::Result<String> {
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            format!("cannot decompress {path}"),
        ))
    }
    /// Whether this process may write the file.
    fn writable(&self, path: &str) -> bool;
}

/// The files under a root directory: `/` for the machine itself, a
/// directory tree in tests.
#[derive(Debug, Clone)]
pub struct RootFs {
    root: PathBuf,
}

impl RootFs {
    /// Files under `root`.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    /// The real path of an absolute path.
    pub fn resolve(&self, path: &str) -> PathBuf {
        self.root.join(path.trim_start_matches('/'))
    }
}

impl SysSource for RootFs {
    fn read(&self, path: &str) -> io::Result<String> {
        std::fs::read_to_string(self.resolve(path))
    }

    fn list(&self, dir: &str) -> io::Result<Vec<String>> {
        let mut v: Vec<String> = std::fs::read_dir(self.resolve(dir))?
            .filter_map(|e| e.ok())
            .filter_map(|e| e.file_name().to_str().map(str::to_string))
            .collect();
        v.sort();
        Ok(v)
    }

    fn exists(&self, path: &str) -> bool {
        self.resolve(path).exists()
    }

    fn read_gz(&self, path: &str) -> io::Result<String> {
        let out = std::process::Command::new("gzip")
            .arg("-dc")
            .arg(self.resolve(path))
            .output()?;
        if !out.status.success() {
            return Err(io::Error::other(format!("gzip -dc {path}: {}", out.status)));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    fn writable(&self, path: &str) -> bool {
        nix::unistd::access(&self.resolve(path), nix::unistd::AccessFlags::W_OK).is_ok()
    }
}

/// The verdict of one check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Status {
    /// Nothing to do.
    #[serde(rename = "ok")]
    Ok,
    /// Can be fixed at run time; the fix is a shell command.
    #[serde(rename = "fixable now")]
    FixableNow,
    /// Needs a kernel boot parameter (or a different kernel).
    #[serde(rename = "needs reboot")]
    NeedsReboot,
    /// A finding no setting fixes (the machine's floor).
    #[serde(rename = "warn")]
    Warn,
    /// For information.
    #[serde(rename = "info")]
    Info,
    /// Cannot tell.
    #[serde(rename = "unknown")]
    Unknown,
}

impl Status {
    /// The word printed for it.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::FixableNow => "fixable now",
            Status::NeedsReboot => "needs reboot",
            Status::Warn => "warn",
            Status::Info => "info",
            Status::Unknown => "unknown",
        }
    }
}

/// One line of the report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Check {
    /// The check (one of [`CHECK_NAMES`]).
    pub name: String,
    /// The verdict.
    pub status: Status,
    /// What was found.
    pub detail: String,
    /// The shell command (fixable now) or boot parameter (needs reboot).
    pub fix: Option<String>,
}

pub(super) fn check(
    name: &str,
    status: Status,
    detail: impl Into<String>,
    fix: Option<String>,
) -> Check {
    Check {
        name: name.to_string(),
        status,
        detail: detail.into(),
        fix,
    }
}

/// What was measured during the measurement window.
#[derive(Debug, Clone, Default)]
pub struct Measurements {
    /// The window's length, seconds.
    pub seconds: f64,
    /// `/proc/interrupts` at the start.
    pub interrupts_before: String,
    /// `/proc/interrupts` at the end.
    pub interrupts_after: String,
    /// `/proc/stat` at the start.
    pub stat_before: String,
    /// `/proc/stat` at the end.
    pub stat_after: String,
    /// Clock ticks per second of `/proc/stat` (`USER_HZ`).
    pub user_hz: u64,
    /// The floor probe's report for each core probed.
    pub floors: Vec<FloorReport>,
    /// Cores whose probe failed to start, with the error.
    pub floor_errors: Vec<(usize, String)>,
}

/// What the checks know besides the files.
#[derive(Debug, Clone, Default)]
pub struct Context {
    /// The lane core.
    pub lane_core: usize,
    /// Interfaces the lane uses; empty means every interface but `lo`.
    pub ifaces: Vec<String>,
    /// The measurement window, if one was taken.
    pub window: Option<Measurements>,
    /// Where tuning journals live (absolute path in the source).
    pub journal_dir: String,
    /// Which receive path this machine can give the lane (`None`: not
    /// probed, e.g. a root other than `/`).
    pub rx_path: Option<crate::xdp::RxPathProbe>,
}

impl Context {
    /// A context without measurements, journals in the default place.
    pub fn new(lane_core: usize) -> Self {
        Self {
            lane_core,
            ifaces: Vec::new(),
            window: None,
            journal_dir: tuning::DEFAULT_JOURNAL_DIR.to_string(),
            rx_path: None,
        }
    }
}
