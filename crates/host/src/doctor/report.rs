//! A doctor run on the real machine ([`run`]: measure the window, run
//! the checks, probe the floor) and its [`DoctorReport`].

use super::checks::*;
use super::model::*;
use super::sys::*;
use crate::floor::{FloorConfig, FloorProbe, FloorReport, FloorSummary};
use crate::tuning::{self, CpuSet};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// What [`run`] does.
#[derive(Debug, Clone)]
pub struct DoctorOptions {
    /// The lane core; `None` picks the last online CPU.
    pub lane_core: Option<usize>,
    /// The measurement window (floor probes on every online core). 0 skips
    /// it.
    pub seconds: f64,
    /// Interfaces the lane uses (empty: all but `lo`).
    pub ifaces: Vec<String>,
    /// The root of the files read (`/`). The floor and window are measured
    /// only when it is `/`.
    pub root: PathBuf,
    /// The directory of tuning journals.
    pub journal_dir: PathBuf,
}

impl Default for DoctorOptions {
    fn default() -> Self {
        Self {
            lane_core: None,
            seconds: 3.0,
            ifaces: Vec::new(),
            root: PathBuf::from("/"),
            journal_dir: PathBuf::from(tuning::DEFAULT_JOURNAL_DIR),
        }
    }
}

/// The floor part of the report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FloorSection {
    /// The window, seconds.
    pub seconds: f64,
    /// The probe threshold, nanoseconds.
    pub threshold_ns: u64,
    /// One summary per probed core.
    pub cores: Vec<FloorSummary>,
    /// Cores whose probe failed.
    pub errors: Vec<FloorProbeError>,
    /// Whether a core is `ok` (see the module docs for the thresholds).
    pub ok_max_stolen_fraction: f64,
    /// See [`FLOOR_OK_MAX_GAP_NS`].
    pub ok_max_gap_ns: u64,
}

/// A core whose floor probe could not run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FloorProbeError {
    /// The core.
    pub core: usize,
    /// Why.
    pub error: String,
}

/// The doctor's findings.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DoctorReport {
    /// The lane core checked.
    pub lane_core: usize,
    /// Every check.
    pub checks: Vec<Check>,
    /// The floor, when a window was measured.
    pub floor: Option<FloorSection>,
}

/// Why the doctor could not run.
#[derive(Debug, thiserror::Error)]
pub enum DoctorError {
    /// The online CPUs could not be read.
    #[error("cannot read the online cpus from /sys/devices/system/cpu/online")]
    Online,
    /// The lane core is not online.
    #[error("lane core {core} is not online (online: {online})")]
    LaneCoreOffline {
        /// The requested core.
        core: usize,
        /// The online CPUs.
        online: CpuSet,
    },
    /// The window length is not a finite, non-negative number of seconds
    /// (at most an hour).
    #[error("bad measurement window {0} s")]
    BadWindow(f64),
}

/// Measures the window on the real machine: floor probes on every core of
/// `cores` at once, with `/proc/interrupts` and `/proc/stat` read before and
/// after.
pub fn measure_window(cores: &CpuSet, seconds: f64) -> Measurements {
    let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
    let mut m = Measurements {
        seconds,
        // SAFETY: sysconf has no preconditions.
        user_hz: u64::try_from(unsafe { libc::sysconf(libc::_SC_CLK_TCK) }).unwrap_or(100),
        ..Default::default()
    };
    let mut probes = Vec::new();
    for c in cores.iter() {
        match FloorProbe::start(c, FloorConfig::default()) {
            Ok(p) => probes.push(p),
            Err(e) => m.floor_errors.push((c, e.to_string())),
        }
    }
    m.interrupts_before = read("/proc/interrupts");
    m.stat_before = read("/proc/stat");
    let t0 = std::time::Instant::now();
    std::thread::sleep(Duration::from_secs_f64(seconds));
    m.interrupts_after = read("/proc/interrupts");
    m.stat_after = read("/proc/stat");
    m.seconds = t0.elapsed().as_secs_f64();
    m.floors = probes.into_iter().map(FloorProbe::stop).collect();
    m
}

/// Runs the doctor: picks the lane core, measures the window (if
/// `seconds > 0` and the root is `/`), and runs every check.
pub fn run(opts: &DoctorOptions) -> Result<DoctorReport, DoctorError> {
    if !opts.seconds.is_finite() || opts.seconds < 0.0 || opts.seconds > 3600.0 {
        return Err(DoctorError::BadWindow(opts.seconds));
    }
    let src = RootFs::new(&opts.root);
    let online = online(&src).ok_or(DoctorError::Online)?;
    let lane = match opts.lane_core {
        Some(c) => c,
        None => online.last().ok_or(DoctorError::Online)?,
    };
    if !online.contains(lane) {
        return Err(DoctorError::LaneCoreOffline { core: lane, online });
    }
    let real = opts.root == Path::new("/");
    let window = (real && opts.seconds > 0.0).then(|| measure_window(&online, opts.seconds));
    let journal_dir = match opts.journal_dir.strip_prefix(&opts.root) {
        Ok(rel) => format!("/{}", rel.display()),
        Err(_) => opts.journal_dir.display().to_string(),
    };
    let ctx = Context {
        lane_core: lane,
        ifaces: opts.ifaces.clone(),
        window,
        journal_dir,
        rx_path: real.then(crate::xdp::probe),
    };
    let checks = run_checks(&src, &ctx);
    let floor = ctx.window.as_ref().map(|w| FloorSection {
        seconds: w.seconds,
        threshold_ns: FloorConfig::default().threshold_ns,
        cores: w.floors.iter().map(FloorReport::summary).collect(),
        errors: w
            .floor_errors
            .iter()
            .map(|(core, error)| FloorProbeError {
                core: *core,
                error: error.clone(),
            })
            .collect(),
        ok_max_stolen_fraction: FLOOR_OK_STOLEN_FRACTION,
        ok_max_gap_ns: FLOOR_OK_MAX_GAP_NS,
    });
    Ok(DoctorReport {
        lane_core: lane,
        checks,
        floor,
    })
}

impl DoctorReport {
    /// How many checks have `status`.
    pub fn count(&self, status: Status) -> usize {
        self.checks.iter().filter(|c| c.status == status).count()
    }

    /// One line: the lane core and the count per status.
    pub fn summary_line(&self) -> String {
        let parts: Vec<String> = [
            Status::Ok,
            Status::FixableNow,
            Status::NeedsReboot,
            Status::Warn,
            Status::Info,
            Status::Unknown,
        ]
        .iter()
        .map(|s| format!("{} {}", self.count(*s), s.as_str()))
        .collect();
        format!(
            "lane core cpu{}: {} checks: {}",
            self.lane_core,
            self.checks.len(),
            parts.join(", ")
        )
    }

    /// An aligned table (check, status, detail, fix) and the summary line.
    /// Long details wrap inside their column; fixes never wrap (they are
    /// meant to be copied).
    pub fn to_table(&self) -> String {
        const DETAIL_WIDTH: usize = 64;
        let w_name = self
            .checks
            .iter()
            .map(|c| c.name.len())
            .chain(["check".len()])
            .max()
            .unwrap_or(5);
        let w_status = self
            .checks
            .iter()
            .map(|c| c.status.as_str().len())
            .chain(["status".len()])
            .max()
            .unwrap_or(6);
        let mut out = String::new();
        out.push_str(&format!(
            "{:w_name$}  {:w_status$}  {:DETAIL_WIDTH$}  fix\n",
            "check", "status", "detail"
        ));
        for c in &self.checks {
            let lines = wrap(&c.detail, DETAIL_WIDTH);
            for (i, l) in lines.iter().enumerate() {
                let (n, s, f) = if i == 0 {
                    (
                        c.name.as_str(),
                        c.status.as_str(),
                        c.fix.as_deref().unwrap_or(""),
                    )
                } else {
                    ("", "", "")
                };
                let line = format!("{n:w_name$}  {s:w_status$}  {l:DETAIL_WIDTH$}  {f}");
                out.push_str(line.trim_end());
                out.push('\n');
            }
        }
        out.push_str(&self.summary_line());
        out.push('\n');
        out
    }
}

/// Word-wraps `text` to lines of at most `width` characters (longer words
/// stand alone).
pub(super) fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut cur = String::new();
    for word in text.split_whitespace() {
        if !cur.is_empty() && cur.chars().count() + 1 + word.chars().count() > width {
            lines.push(std::mem::take(&mut cur));
        }
        if !cur.is_empty() {
            cur.push(' ');
        }
        cur.push_str(word);
    }
    if !cur.is_empty() || lines.is_empty() {
        lines.push(cur);
    }
    lines
}
