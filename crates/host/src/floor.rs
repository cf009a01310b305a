//! The machine's noise floor: how much time the machine takes away from a
//! core.
//!
//! A [`FloorProbe`] pins a thread to one core and reads `CLOCK_MONOTONIC` in
//! a tight loop. Consecutive reads normally lie tens of nanoseconds apart;
//! every gap above a threshold (10 µs by default) is time in which the
//! thread did not run: an interrupt, a timer tick, another task scheduled on
//! the core, or the hypervisor running something else on the physical CPU.
//!
//! What it measures is precisely *time not available to a thread on this
//! core*. The spinner competes with whatever else runs there, so on a core
//! that is shared with busy tasks the fair scheduler's time slices show up
//! as gaps as well; on an isolated core (or at SCHED_FIFO, see
//! [`FloorConfig::fifo_priority`]) what remains are interrupts, ticks and
//! the hypervisor. Latency reports carry this floor, measured on the same
//! cores during the same run, so that an outlier can be attributed to a host
//! gap ([`FloorReport::overlaps`]).
//!
//! Each gap's start is also given on `CLOCK_REALTIME`, the clock packet
//! timestamps are taken with, so gaps can be matched to packets. The
//! storage for gaps is allocated before the loop starts; gaps beyond its
//! capacity are counted in [`FloorReport::gaps_dropped`] (and still count
//! towards [`FloorReport::stolen_ns`] and [`FloorReport::max_gap_ns`]).

use serde::Serialize;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::Duration;

/// How a probe runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FloorConfig {
    /// Gaps longer than this are recorded (nanoseconds). Default 10 µs.
    pub threshold_ns: u64,
    /// How many gaps are kept (preallocated). Default 65 536.
    pub max_gaps: usize,
    /// Run the spinner at SCHED_FIFO with this priority (1..=99), restoring
    /// its policy afterwards. `None` (default) keeps the normal policy.
    /// A SCHED_FIFO spinner starves normal tasks on its core (up to the RT
    /// throttling limit): use it only on a core reserved for the lane.
    pub fifo_priority: Option<i32>,
    /// Instead of spinning, wake on an absolute timer every this many
    /// nanoseconds and record each wake-up later than `threshold_ns` as a
    /// gap (start: the deadline; length: the lateness), as `cyclictest`
    /// does. With `fifo_priority` set just below the lane threads', this is
    /// the time the machine takes away from a real-time thread on that core
    /// (hypervisor, interrupts and softirqs, higher-priority threads),
    /// measured without taking the core from anyone.
    pub timer_interval_ns: Option<u64>,
}

impl Default for FloorConfig {
    fn default() -> Self {
        Self {
            threshold_ns: 10_000,
            max_gaps: 1 << 16,
            fifo_priority: None,
            timer_interval_ns: None,
        }
    }
}

/// One stretch of time the spinner did not run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Gap {
    /// When the gap began, nanoseconds since the Unix epoch
    /// (`CLOCK_REALTIME`).
    pub start_realtime_ns: u64,
    /// How long it lasted, nanoseconds.
    pub len_ns: u64,
}

impl Gap {
    /// The end of the gap on `CLOCK_REALTIME` (exclusive).
    pub fn end_realtime_ns(&self) -> u64 {
        self.start_realtime_ns.saturating_add(self.len_ns)
    }
}

/// What a probe saw.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FloorReport {
    /// The core probed.
    pub core: usize,
    /// The threshold used, nanoseconds.
    pub threshold_ns: u64,
    /// How long the probe ran, nanoseconds.
    pub duration_ns: u64,
    /// The total length of all gaps above the threshold, nanoseconds.
    pub stolen_ns: u64,
    /// `stolen_ns / duration_ns` (0 for an empty run).
    pub stolen_fraction: f64,
    /// The longest gap, nanoseconds.
    pub max_gap_ns: u64,
    /// The gaps kept, in time order (non-overlapping).
    pub gaps: Vec<Gap>,
    /// Gaps not kept because the storage was full.
    pub gaps_dropped: u64,
    /// The growth of the "steal" column of `/proc/stat` for this CPU during
    /// the run, in clock ticks (`USER_HZ`, usually 1/100 s); 0 if
    /// unavailable.
    pub steal_ticks_delta: u64,
}

/// A compact, serializable view of a [`FloorReport`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FloorSummary {
    /// The core probed.
    pub core: usize,
    /// How long the probe ran, nanoseconds.
    pub duration_ns: u64,
    /// The fraction of the time lost in gaps.
    pub stolen_fraction: f64,
    /// The longest gap, nanoseconds.
    pub max_gap_ns: u64,
    /// The number of gaps above the threshold (kept and dropped).
    pub gaps: u64,
    /// See [`FloorReport::steal_ticks_delta`].
    pub steal_ticks_delta: u64,
}

impl FloorReport {
    /// Whether any gap overlaps the closed interval `[start_ns, end_ns]` of
    /// `CLOCK_REALTIME` nanoseconds. O(log n): the gaps are sorted and
    /// disjoint. An interval with `end_ns < start_ns` overlaps nothing.
    pub fn overlaps(&self, start_ns: u64, end_ns: u64) -> bool {
        if end_ns < start_ns {
            return false;
        }
        // The gaps starting at or before end_ns; the last of them ends last.
        let idx = self.gaps.partition_point(|g| g.start_realtime_ns <= end_ns);
        idx > 0 && self.gaps[idx - 1].end_realtime_ns() > start_ns
    }

    /// The compact view.
    pub fn summary(&self) -> FloorSummary {
        FloorSummary {
            core: self.core,
            duration_ns: self.duration_ns,
            stolen_fraction: self.stolen_fraction,
            max_gap_ns: self.max_gap_ns,
            gaps: self.gaps.len() as u64 + self.gaps_dropped,
            steal_ticks_delta: self.steal_ticks_delta,
        }
    }

    fn empty(core: usize, threshold_ns: u64) -> Self {
        Self {
            core,
            threshold_ns,
            duration_ns: 0,
            stolen_ns: 0,
            stolen_fraction: 0.0,
            max_gap_ns: 0,
            gaps: Vec::new(),
            gaps_dropped: 0,
            steal_ticks_delta: 0,
        }
    }
}

/// Why a probe could not start.
#[derive(Debug, thiserror::Error)]
pub enum FloorError {
    /// The core number is beyond what the affinity mask can hold.
    #[error("cpu {0} is out of range")]
    BadCore(usize),
    /// Pinning the spinner to the core failed (the core is offline or not
    /// allowed to this process).
    #[error("cannot pin the probe to cpu {core}: {source}")]
    Affinity {
        /// The core.
        core: usize,
        /// The cause.
        source: nix::Error,
    },
    /// Switching the spinner to SCHED_FIFO failed.
    #[error("cannot run the probe at SCHED_FIFO priority {priority}: {source}")]
    Fifo {
        /// The priority asked for.
        priority: i32,
        /// The cause.
        source: std::io::Error,
    },
    /// The thread could not be started.
    #[error("cannot start the probe thread: {0}")]
    Spawn(#[from] std::io::Error),
    /// The thread ended before reporting that it runs.
    #[error("the probe thread ended before it started spinning")]
    Died,
}

/// A running probe; [`stop`](Self::stop) it to get the report. Dropping it
/// stops the spinner too.
#[derive(Debug)]
pub struct FloorProbe {
    core: usize,
    threshold_ns: u64,
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<FloorReport>>,
    steal_before: Option<u64>,
}

impl FloorProbe {
    /// Starts a spinner pinned to `core`; returns once it spins.
    pub fn start(core: usize, cfg: FloorConfig) -> Result<FloorProbe, FloorError> {
        let mut set = nix::sched::CpuSet::new();
        set.set(core).map_err(|_| FloorError::BadCore(core))?;
        let stop = Arc::new(AtomicBool::new(false));
        let (ready_tx, ready_rx) = mpsc::channel();
        let stop2 = Arc::clone(&stop);
        let steal_before = read_steal_ticks(core);
        let handle = std::thread::Builder::new()
            .name(format!("floor-cpu{core}"))
            .spawn(move || spin(core, set, cfg, &stop2, ready_tx))?;
        match ready_rx.recv() {
            Ok(Ok(())) => Ok(FloorProbe {
                core,
                threshold_ns: cfg.threshold_ns,
                stop,
                handle: Some(handle),
                steal_before,
            }),
            Ok(Err(e)) => {
                let _ = handle.join();
                Err(e)
            }
            Err(_) => {
                let _ = handle.join();
                Err(FloorError::Died)
            }
        }
    }

    /// The core probed.
    pub fn core(&self) -> usize {
        self.core
    }

    /// Stops the spinner and returns what it saw. (Should the spinner
    /// thread have died, which its code cannot do, the report is empty.)
    pub fn stop(mut self) -> FloorReport {
        self.finish()
    }

    fn finish(&mut self) -> FloorReport {
        self.stop.store(true, Ordering::Relaxed);
        let mut report = match self.handle.take().map(JoinHandle::join) {
            Some(Ok(r)) => r,
            _ => FloorReport::empty(self.core, self.threshold_ns),
        };
        if let (Some(before), Some(after)) = (self.steal_before, read_steal_ticks(self.core)) {
            // A counter that went back (the CPU went offline and came back)
            // tells nothing: 0, as documented for "unavailable".
            report.steal_ticks_delta = after.saturating_sub(before);
        }
        report
    }
}

impl Drop for FloorProbe {
    fn drop(&mut self) {
        if self.handle.is_some() {
            let _ = self.finish();
        }
    }
}

/// Probes `core` with the default configuration for `duration`, blocking.
pub fn measure_blocking(core: usize, duration: Duration) -> Result<FloorReport, FloorError> {
    measure_blocking_with(core, duration, FloorConfig::default())
}

/// Probes `core` with `cfg` for `duration`, blocking.
pub fn measure_blocking_with(
    core: usize,
    duration: Duration,
    cfg: FloorConfig,
) -> Result<FloorReport, FloorError> {
    let probe = FloorProbe::start(core, cfg)?;
    std::thread::sleep(duration);
    Ok(probe.stop())
}

/// A `CLOCK_MONOTONIC` instant and the `CLOCK_REALTIME` reading taken at it:
/// the realtime clock read between two monotonic readings, the tightest of
/// up to four tries (a thread held up between the reads would otherwise
/// shift the mapping by as long). Bounded work.
fn paired_clocks() -> (u64, u64) {
    let mut best: Option<(u64, u64, u64)> = None;
    for _ in 0..4 {
        let m1 = clock_ns(libc::CLOCK_MONOTONIC);
        let rt = clock_ns(libc::CLOCK_REALTIME);
        let m2 = clock_ns(libc::CLOCK_MONOTONIC);
        let width = m2.saturating_sub(m1);
        if best.map_or(true, |(w, _, _)| width < w) {
            best = Some((width, m1 + width / 2, rt));
        }
        if width < 1_000 {
            break;
        }
    }
    let (_, mono, rt) = best.expect("at least one try");
    (mono, rt)
}

fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid timespec; CLOCK_MONOTONIC and CLOCK_REALTIME
    // always exist, so the call cannot fail.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    (ts.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(ts.tv_nsec as u64)
}

/// The scheduling policy of the calling thread, to restore later.
struct SavedSched {
    policy: libc::c_int,
    param: libc::sched_param,
}

fn enter_fifo(priority: i32) -> Result<SavedSched, FloorError> {
    let err = |source| FloorError::Fifo { priority, source };
    // SAFETY: plain system calls on the calling thread (pid 0) with valid
    // pointers.
    unsafe {
        let policy = libc::sched_getscheduler(0);
        if policy < 0 {
            return Err(err(std::io::Error::last_os_error()));
        }
        let mut param = libc::sched_param { sched_priority: 0 };
        if libc::sched_getparam(0, &mut param) != 0 {
            return Err(err(std::io::Error::last_os_error()));
        }
        let fifo = libc::sched_param {
            sched_priority: priority,
        };
        if libc::sched_setscheduler(0, libc::SCHED_FIFO, &fifo) != 0 {
            return Err(err(std::io::Error::last_os_error()));
        }
        Ok(SavedSched { policy, param })
    }
}

fn leave_fifo(saved: &SavedSched) {
    // SAFETY: restores the calling thread's own policy with a valid pointer.
    unsafe {
        libc::sched_setscheduler(0, saved.policy, &saved.param);
    }
}

fn spin(
    core: usize,
    set: nix::sched::CpuSet,
    cfg: FloorConfig,
    stop: &AtomicBool,
    ready: mpsc::Sender<Result<(), FloorError>>,
) -> FloorReport {
    if let Err(source) = nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &set) {
        let _ = ready.send(Err(FloorError::Affinity { core, source }));
        return FloorReport::empty(core, cfg.threshold_ns);
    }
    let saved = match cfg.fifo_priority.map(enter_fifo).transpose() {
        Ok(s) => s,
        Err(e) => {
            let _ = ready.send(Err(e));
            return FloorReport::empty(core, cfg.threshold_ns);
        }
    };
    // Everything the loop touches is allocated here, before it starts.
    let mut gaps: Vec<Gap> = Vec::with_capacity(cfg.max_gaps);
    let mut dropped = 0u64;
    let mut stolen = 0u64;
    let mut max_gap = 0u64;
    let threshold = cfg.threshold_ns;
    let _ = ready.send(Ok(()));

    let t0 = clock_ns(libc::CLOCK_MONOTONIC);
    let mut prev = t0;
    let timer = cfg.timer_interval_ns.filter(|&i| i > 0);
    if let Some(interval) = timer {
        let mut deadline = t0;
        while !stop.load(Ordering::Relaxed) {
            deadline += interval;
            crate::runtime::sleep_until(libc::CLOCK_MONOTONIC, deadline);
            let now = clock_ns(libc::CLOCK_MONOTONIC);
            let late = now.saturating_sub(deadline);
            if late > threshold {
                stolen += late;
                max_gap = max_gap.max(late);
                // The deadline on CLOCK_REALTIME, from a realtime reading
                // taken between two monotonic ones (not from `now`: this
                // thread may have been held up since `now` was read, which
                // would move the gap later by as much).
                let (mono_at_rt, rt) = paired_clocks();
                let start_rt = rt.saturating_sub(mono_at_rt.saturating_sub(deadline));
                if gaps.len() < gaps.capacity() {
                    gaps.push(Gap {
                        start_realtime_ns: start_rt,
                        len_ns: late,
                    });
                } else {
                    dropped += 1;
                }
            }
            if now > deadline + interval {
                deadline = now; // never a burst of catch-up wake-ups
            }
            prev = now;
        }
    }
    while timer.is_none() {
        let now = clock_ns(libc::CLOCK_MONOTONIC);
        let d = now.saturating_sub(prev);
        if d > threshold {
            stolen += d;
            max_gap = max_gap.max(d);
            // Map the gap's start onto CLOCK_REALTIME with a fresh pair of
            // readings (follows any adjustment of the realtime clock).
            let (mono, rt) = paired_clocks();
            let start_rt = rt.saturating_sub(mono.saturating_sub(prev));
            if gaps.len() < gaps.capacity() {
                gaps.push(Gap {
                    start_realtime_ns: start_rt,
                    len_ns: d,
                });
            } else {
                dropped += 1;
            }
        }
        prev = now;
        if stop.load(Ordering::Relaxed) {
            break;
        }
    }
    if let Some(s) = &saved {
        leave_fifo(s);
    }
    // prev >= t0: monotonic readings of this thread, prev taken last.
    let duration = prev.saturating_sub(t0);
    FloorReport {
        core,
        threshold_ns: threshold,
        duration_ns: duration,
        stolen_ns: stolen,
        stolen_fraction: if duration > 0 {
            stolen as f64 / duration as f64
        } else {
            0.0
        },
        max_gap_ns: max_gap,
        gaps,
        gaps_dropped: dropped,
        steal_ticks_delta: 0,
    }
}

/// The "steal" column (8th value) of `cpuN` in `/proc/stat`.
fn read_steal_ticks(core: usize) -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    parse_steal_ticks(&stat, core)
}

/// Parses the steal ticks of `cpu<core>` from `/proc/stat` text.
pub fn parse_steal_ticks(stat: &str, core: usize) -> Option<u64> {
    let label = format!("cpu{core}");
    let line = stat
        .lines()
        .find(|l| l.split_whitespace().next() == Some(label.as_str()))?;
    line.split_whitespace().nth(8)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(gaps: &[(u64, u64)]) -> FloorReport {
        FloorReport {
            gaps: gaps
                .iter()
                .map(|&(s, l)| Gap {
                    start_realtime_ns: s,
                    len_ns: l,
                })
                .collect(),
            ..FloorReport::empty(0, 10_000)
        }
    }

    #[test]
    fn overlaps_table() {
        let r = report(&[(100, 10), (200, 50), (1000, 1)]);
        let cases = [
            (0, 50, false),
            (0, 100, true),
            (105, 105, true),
            (110, 110, false),
            (110, 199, false),
            (110, 200, true),
            (249, 300, true),
            (250, 999, false),
            (1000, 1000, true),
            (1001, 5000, false),
            (300, 200, false),
        ];
        for (a, b, want) in cases {
            assert_eq!(r.overlaps(a, b), want, "[{a}, {b}]");
        }
        assert!(!report(&[]).overlaps(0, u64::MAX));
    }

    #[test]
    fn steal_column() {
        let stat = "cpu  1 2 3 4 5 6 7 8 9 10\ncpu0 5500 0 1089 24888 21 0 13 14 0 0\ncpu1 1 1 1 1 1 1 1 99 0 0\n";
        assert_eq!(parse_steal_ticks(stat, 0), Some(14));
        assert_eq!(parse_steal_ticks(stat, 1), Some(99));
        assert_eq!(parse_steal_ticks(stat, 2), None);
        assert_eq!(parse_steal_ticks("cpu0 1 2\n", 0), None);
    }

    #[test]
    fn probe_runs_and_reports_consistently() {
        let r = match measure_blocking(0, Duration::from_millis(50)) {
            Ok(r) => r,
            Err(e) => panic!("probe on cpu0: {e}"),
        };
        assert_eq!(r.core, 0);
        assert!(r.duration_ns > 0);
        assert!(r.stolen_ns <= r.duration_ns);
        assert!((0.0..=1.0).contains(&r.stolen_fraction));
        let sum: u64 = r.gaps.iter().map(|g| g.len_ns).sum();
        if r.gaps_dropped == 0 {
            assert_eq!(sum, r.stolen_ns);
        }
        assert!(r.gaps.iter().all(|g| g.len_ns > r.threshold_ns));
        assert!(r
            .gaps
            .windows(2)
            .all(|w| w[0].end_realtime_ns() <= w[1].start_realtime_ns + 1_000));
        assert_eq!(
            r.gaps.iter().map(|g| g.len_ns).max().unwrap_or(0),
            r.max_gap_ns
        );
    }

    #[test]
    fn bad_core_is_an_error() {
        assert!(matches!(
            FloorProbe::start(100_000, FloorConfig::default()),
            Err(FloorError::BadCore(_))
        ));
    }

    #[test]
    fn timer_mode_records_late_wakeups() {
        // A threshold of 0 makes every wake-up late; the gaps start at their
        // deadlines, so they are ordered and spaced by at least the interval.
        let cfg = FloorConfig {
            threshold_ns: 0,
            timer_interval_ns: Some(1_000_000),
            ..FloorConfig::default()
        };
        let r = match measure_blocking_with(0, Duration::from_millis(30), cfg) {
            Ok(r) => r,
            Err(e) => panic!("probe: {e}"),
        };
        // How many wake-ups fit in 30 ms depends on how busy the machine
        // is; at least one always comes (the first deadline is waited for).
        assert!(!r.gaps.is_empty(), "no wake-up recorded");
        for w in r.gaps.windows(2) {
            assert!(w[1].start_realtime_ns >= w[0].start_realtime_ns + 1_000_000 - 1_000);
        }
        assert_eq!(r.stolen_ns, r.gaps.iter().map(|g| g.len_ns).sum::<u64>());
    }

    #[test]
    fn tiny_storage_counts_dropped_gaps() {
        // A threshold of 0 makes every read a "gap": storage for 4 fills
        // at once and the rest are counted.
        let cfg = FloorConfig {
            threshold_ns: 0,
            max_gaps: 4,
            ..FloorConfig::default()
        };
        let r = match measure_blocking_with(0, Duration::from_millis(5), cfg) {
            Ok(r) => r,
            Err(e) => panic!("probe: {e}"),
        };
        assert_eq!(r.gaps.len(), 4);
        assert!(r.gaps_dropped > 0);
    }

    /// A probe that saw nothing (it died, or ran for no time) reports no
    /// time, no gaps and a fraction of 0 with its duration of 0, and
    /// overlaps no interval, reversed ones included.
    #[test]
    fn an_empty_floor() {
        let r = FloorReport::empty(3, 10_000);
        let s = r.summary();
        assert_eq!((s.core, s.duration_ns, s.gaps, s.max_gap_ns), (3, 0, 0, 0));
        assert_eq!(s.stolen_fraction, 0.0);
        for (a, b) in [(0, 0), (0, u64::MAX), (u64::MAX, 0), (5, 4)] {
            assert!(!r.overlaps(a, b), "[{a}, {b}]");
        }
        // A gap of no length overlaps nothing; one at the end of time ends
        // there (saturating) instead of wrapping around.
        let r = report(&[(5, 0), (u64::MAX - 1, 10)]);
        assert!(!r.overlaps(5, 5));
        assert_eq!(r.gaps[1].end_realtime_ns(), u64::MAX);
        assert!(r.overlaps(u64::MAX - 1, u64::MAX - 1));
        assert!(!r.overlaps(0, 4));
    }

    #[test]
    fn a_probe_stopped_at_once_is_consistent() {
        let r = match measure_blocking(0, Duration::ZERO) {
            Ok(r) => r,
            Err(e) => panic!("probe on cpu0: {e}"),
        };
        assert!(r.stolen_ns <= r.duration_ns, "{r:?}");
        assert!((0.0..=1.0).contains(&r.stolen_fraction), "{r:?}");
        if r.duration_ns == 0 {
            assert!(r.gaps.is_empty() && r.stolen_fraction == 0.0, "{r:?}");
        }
    }
}
