//! The host measures of the X-Lane paper (§4.3) that can be applied while a
//! lane runs, and undone when it stops.
//!
//! Each measure changes one machine-wide setting for the benefit of the lane
//! core, records the old value, and restores it on exit:
//!
//! | measure | what it does |
//! |---|---|
//! | `rt_throttling` | `/proc/sys/kernel/sched_rt_runtime_us` → `-1`, so a SCHED_FIFO busy-polling lane thread is not stopped for 50 ms of every second |
//! | `cstates` | holds `/dev/cpu_dma_latency` open with the value 0 (the kernel's PM QoS interface): idle cores stay in shallow C-states; closing the file restores |
//! | `irq_affinity`, `irq_default_affinity` | removes the lane core from every IRQ's affinity (where another online core remains) and from `/proc/irq/default_smp_affinity` |
//! | `rps`, `xps` | sets `rps_cpus` / `xps_cpus` of the lane's interfaces (optionally inside a network namespace) by an [`RpsPolicy`] |
//!
//! Things that need a reboot (isolcpus, nohz_full, rcu_nocbs, nowatchdog,
//! idle=poll) are not changed here; `xlane doctor` reports them.
//!
//! # Restoring
//!
//! [`HostTuning::apply`] returns an [`AppliedTuning`]. Restoring happens in
//! reverse order, continues past errors and reports each step, either by
//! [`AppliedTuning::restore`] or when the value is dropped. To make sure Drop
//! runs on SIGTERM/SIGINT, call [`install_termination_flag`] and let the
//! daemon's loops poll the flag and return normally.
//!
//! SIGKILL (and a crash, or a power cut) cannot be handled. For those, every
//! applied change is also written to a journal file
//! (`/run/xlane/tuning-<pid>.json` by default) while it is in force;
//! [`restore_from_journal`] undoes a dead run's changes, and `xlane doctor`
//! lists leftover journals. The journal is written *before* anything is
//! changed (with every planned change), then rewritten with the changes that
//! were actually made, and deleted after a clean restore. The C-state hold
//! needs no journal: the kernel drops it when the process's file closes.
//!
//! A setting that already has the wanted value is left alone and not
//! journaled, so two nested runs restore correctly when they stop in
//! reverse order of starting.

mod cpuset;
mod journal;
mod signal;

pub use cpuset::{CpuSet, CpuSetParseError, MAX_CPUS};
pub use journal::{
    list_journals, restore_from_journal, JournalError, JournalInfo, DEFAULT_JOURNAL_DIR,
};
pub use signal::install_termination_flag;

pub(crate) use journal::{parse_start_time, summarize_journal_text};
use journal::{Journal, JournalEntry};
use serde::Serialize;
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Where receive-side (RPS) or transmit-side (XPS) kernel work of an
/// interface is steered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RpsPolicy {
    /// Onto the lane core only: the lane's packets are processed by the
    /// kernel on the core that waits for them.
    LaneCore,
    /// Onto every online core except the lane core: the lane core is spared
    /// the interface's kernel work.
    RegularCores,
    /// Leave the setting as it is.
    Leave,
}

/// One interface whose RPS/XPS masks are set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RpsTarget {
    /// The network namespace (a name under `/run/netns`) the interface lives
    /// in; `None` for the current namespace.
    pub netns: Option<String>,
    /// The interface name.
    pub iface: String,
    /// The policy for `queues/rx-*/rps_cpus`.
    pub rps: RpsPolicy,
    /// The policy for `queues/tx-*/xps_cpus`.
    pub xps: RpsPolicy,
}

impl RpsTarget {
    /// A target with the same policy for RPS and XPS.
    pub fn new(netns: Option<&str>, iface: &str, policy: RpsPolicy) -> Self {
        Self {
            netns: netns.map(str::to_string),
            iface: iface.to_string(),
            rps: policy,
            xps: policy,
        }
    }
}

/// What to change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TuningPlan {
    /// The CPU the lane thread runs on.
    pub lane_core: usize,
    /// Set `sched_rt_runtime_us` to -1.
    pub rt_throttling_off: bool,
    /// Hold `/dev/cpu_dma_latency` at 0.
    pub hold_cstates: bool,
    /// Move IRQs off the lane core.
    pub irq_affinity: bool,
    /// Interfaces whose RPS/XPS masks are set.
    pub rps: Vec<RpsTarget>,
    /// The root under which `proc/`, `sys/` and `dev/` are found: `/` on a
    /// real machine, a directory tree in tests. Files inside network
    /// namespaces are always the real ones.
    pub root: PathBuf,
    /// Where the journal is written; `None` writes none.
    pub journal_dir: Option<PathBuf>,
}

impl TuningPlan {
    /// Every measure on (no interfaces), on the real machine, journaled to
    /// [`DEFAULT_JOURNAL_DIR`].
    pub fn all(lane_core: usize) -> Self {
        Self {
            lane_core,
            rt_throttling_off: true,
            hold_cstates: true,
            irq_affinity: true,
            rps: Vec::new(),
            root: PathBuf::from("/"),
            journal_dir: Some(PathBuf::from(DEFAULT_JOURNAL_DIR)),
        }
    }

    /// No measure on: a starting point to switch single measures on.
    pub fn none(lane_core: usize) -> Self {
        Self {
            rt_throttling_off: false,
            hold_cstates: false,
            irq_affinity: false,
            ..Self::all(lane_core)
        }
    }
}

/// Why a measure was not applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SkipReason {
    /// The setting does not exist on this machine.
    NotPresent,
    /// The process may not change it, or the kernel refused the value (for
    /// example per-CPU or managed IRQs).
    NotPermitted,
    /// There is nothing to do (already set, or only the lane core is
    /// possible).
    NotApplicable,
    /// The plan did not ask for it.
    NotRequested,
    /// Any other error.
    Failed,
}

/// The outcome of one measure.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum MeasureStatus {
    /// Changed; will be restored.
    Applied,
    /// Not changed.
    Skipped {
        /// Why.
        reason: SkipReason,
        /// Details (error text, the value found).
        detail: String,
    },
}

/// One setting the tuning considered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MeasureRecord {
    /// The measure (`rt_throttling`, `cstates`, `irq_affinity`,
    /// `irq_default_affinity`, `rps`, `xps`).
    pub name: String,
    /// What the measure does, in words.
    pub what: String,
    /// The file (or `netns:path`) it changes.
    pub target: String,
    /// The value before, when it could be read.
    pub old: Option<String>,
    /// The value written (or wanted).
    pub new: Option<String>,
    /// Applied or skipped.
    #[serde(flatten)]
    pub status: MeasureStatus,
}

impl MeasureRecord {
    /// Whether the measure was applied.
    pub fn applied(&self) -> bool {
        self.status == MeasureStatus::Applied
    }
}

/// An error that stops [`HostTuning::apply`] before anything is changed.
#[derive(Debug, thiserror::Error)]
pub enum TuningError {
    /// The list of online CPUs could not be read.
    #[error("cannot read the online cpus from {path}: {source}")]
    Online {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: io::Error,
    },
    /// The online CPU list could not be parsed.
    #[error("cannot parse the online cpus: {0}")]
    OnlineParse(#[from] CpuSetParseError),
    /// The lane core is not an online CPU.
    #[error("lane core {core} is not online (online: {online})")]
    LaneCoreOffline {
        /// The requested core.
        core: usize,
        /// The online CPUs.
        online: CpuSet,
    },
    /// An interface or namespace name is not acceptable.
    #[error("invalid {what} name {name:?}")]
    InvalidName {
        /// `interface` or `netns`.
        what: &'static str,
        /// The name.
        name: String,
    },
    /// The journal could not be written; nothing was changed.
    #[error("cannot write the tuning journal: {0}")]
    Journal(#[from] JournalError),
}

/// Entry point: applies a [`TuningPlan`].
#[derive(Debug)]
pub struct HostTuning;

/// One change that restoring undoes.
#[derive(Debug)]
enum Undo {
    /// Write `value` back to a file.
    File {
        record: usize,
        path: PathBuf,
        value: String,
    },
    /// Write `value` back to a file inside a network namespace.
    Netns {
        record: usize,
        netns: String,
        path: String,
        value: String,
    },
    /// Close the PM QoS file (restores the latency requirement).
    Hold { record: usize, file: File },
}

/// A change planned before anything is written.
#[derive(Debug)]
enum Planned {
    File {
        record: usize,
        path: PathBuf,
        old: String,
        new: String,
    },
    Netns {
        record: usize,
        netns: String,
        path: String,
        old: String,
        new: String,
    },
    Hold {
        record: usize,
        path: PathBuf,
    },
}

/// The changes in force; restores them on [`restore`](Self::restore) or drop.
#[derive(Debug)]
pub struct AppliedTuning {
    records: Vec<MeasureRecord>,
    undo: Vec<Undo>,
    root: PathBuf,
    journal: Option<PathBuf>,
    restored: bool,
}

/// The result of restoring one change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "outcome", content = "detail", rename_all = "snake_case")]
pub enum RestoreOutcome {
    /// The old value is back.
    Restored,
    /// Nothing to do (for example the namespace is gone).
    Skipped(String),
    /// Writing the old value failed.
    Failed(String),
}

/// One restored change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RestoreEntry {
    /// The measure.
    pub name: String,
    /// The file.
    pub target: String,
    /// The value written back.
    pub value: String,
    /// What happened.
    #[serde(flatten)]
    pub outcome: RestoreOutcome,
}

/// What restoring did, step by step (in the order done: reverse of applying).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct RestoreReport {
    /// Each step.
    pub entries: Vec<RestoreEntry>,
    /// The journal file, if one was used.
    pub journal: Option<PathBuf>,
    /// Whether the journal was deleted (only after a clean restore).
    pub journal_removed: bool,
    /// An error deleting or rewriting the journal.
    pub journal_error: Option<String>,
}

impl RestoreReport {
    /// Whether no step failed.
    pub fn is_clean(&self) -> bool {
        self.entries
            .iter()
            .all(|e| !matches!(e.outcome, RestoreOutcome::Failed(_)))
            && self.journal_error.is_none()
    }
}

impl HostTuning {
    /// Applies `plan`: reads every old value, writes the journal, then makes
    /// the changes. Measures that cannot be applied are recorded as skipped;
    /// only an invalid plan or an unwritable journal is an error (and then
    /// nothing has changed).
    pub fn apply(plan: &TuningPlan) -> Result<AppliedTuning, TuningError> {
        for t in &plan.rps {
            if !valid_iface(&t.iface) {
                return Err(TuningError::InvalidName {
                    what: "interface",
                    name: t.iface.clone(),
                });
            }
            if let Some(ns) = &t.netns {
                if !valid_netns(ns) {
                    return Err(TuningError::InvalidName {
                        what: "netns",
                        name: ns.clone(),
                    });
                }
            }
        }
        let online_path = plan.root.join("sys/devices/system/cpu/online");
        let online_text =
            std::fs::read_to_string(&online_path).map_err(|source| TuningError::Online {
                path: online_path.clone(),
                source,
            })?;
        let online = CpuSet::parse_list(&online_text)?;
        if !online.contains(plan.lane_core) {
            return Err(TuningError::LaneCoreOffline {
                core: plan.lane_core,
                online,
            });
        }

        let mut p = Planner {
            root: &plan.root,
            lane: plan.lane_core,
            online: &online,
            records: Vec::new(),
            planned: Vec::new(),
        };
        p.plan_rt(plan.rt_throttling_off);
        p.plan_cstates(plan.hold_cstates);
        p.plan_irqs(plan.irq_affinity);
        for t in &plan.rps {
            p.plan_rps(t);
        }
        let Planner {
            mut records,
            planned,
            ..
        } = p;

        // Write-ahead journal of every planned file change.
        let journal_entries: Vec<JournalEntry> = planned
            .iter()
            .filter_map(|c| journal_entry_of(c, &records, &plan.root))
            .collect();
        let journal_path = match (&plan.journal_dir, journal_entries.is_empty()) {
            (Some(dir), false) => {
                let j = Journal::new(&plan.root, journal_entries);
                Some(j.write(dir)?)
            }
            _ => None,
        };

        let mut applied = AppliedTuning {
            records: Vec::new(),
            undo: Vec::new(),
            root: plan.root.clone(),
            journal: journal_path,
            restored: false,
        };
        for change in planned {
            if let Some(u) = execute(change, &mut records) {
                applied.undo.push(u);
            }
        }
        applied.records = records;
        applied.rewrite_journal();
        Ok(applied)
    }
}

fn journal_entry_of(c: &Planned, records: &[MeasureRecord], root: &Path) -> Option<JournalEntry> {
    match c {
        Planned::File {
            record, path, old, ..
        } => {
            let rel = path.strip_prefix(root).unwrap_or(path);
            Some(JournalEntry::File {
                name: records[*record].name.clone(),
                path: rel.to_string_lossy().into_owned(),
                value: old.clone(),
            })
        }
        Planned::Netns {
            record,
            netns,
            path,
            old,
            ..
        } => Some(JournalEntry::Netns {
            name: records[*record].name.clone(),
            netns: netns.clone(),
            path: path.clone(),
            value: old.clone(),
        }),
        Planned::Hold { .. } => None,
    }
}

/// Makes one planned change; on failure marks its record skipped.
fn execute(change: Planned, records: &mut [MeasureRecord]) -> Option<Undo> {
    match change {
        Planned::File {
            record,
            path,
            old,
            new,
        } => match write_value(&path, &new) {
            Ok(()) => {
                records[record].status = MeasureStatus::Applied;
                Some(Undo::File {
                    record,
                    path,
                    value: old,
                })
            }
            Err(e) => {
                records[record].status = skip_for_error(&e);
                None
            }
        },
        Planned::Netns {
            record,
            netns,
            path,
            old,
            new,
        } => match netns_write(&netns, &path, &new) {
            Ok(()) => {
                records[record].status = MeasureStatus::Applied;
                Some(Undo::Netns {
                    record,
                    netns,
                    path,
                    value: old,
                })
            }
            Err(e) => {
                records[record].status = skip_for_error(&e);
                None
            }
        },
        Planned::Hold { record, path } => {
            let res = OpenOptions::new()
                .read(true)
                .write(true)
                .open(&path)
                .and_then(|mut f| {
                    let mut buf = [0u8; 4];
                    // The device reports the current requirement; a plain
                    // file (tests) may be empty.
                    if f.read_exact(&mut buf).is_ok() {
                        records[record].old = Some(i32::from_ne_bytes(buf).to_string());
                    }
                    let n = f.write(&0i32.to_ne_bytes())?;
                    if n != 4 {
                        return Err(io::Error::new(io::ErrorKind::WriteZero, "short write"));
                    }
                    Ok(f)
                });
            match res {
                Ok(file) => {
                    records[record].status = MeasureStatus::Applied;
                    Some(Undo::Hold { record, file })
                }
                Err(e) => {
                    records[record].status = skip_for_error(&e);
                    None
                }
            }
        }
    }
}

struct Planner<'a> {
    root: &'a Path,
    lane: usize,
    online: &'a CpuSet,
    records: Vec<MeasureRecord>,
    planned: Vec<Planned>,
}

impl Planner<'_> {
    fn record(&mut self, name: &str, what: &str, target: String) -> usize {
        self.records.push(MeasureRecord {
            name: name.to_string(),
            what: what.to_string(),
            target,
            old: None,
            new: None,
            status: MeasureStatus::Skipped {
                reason: SkipReason::Failed,
                detail: "not attempted".into(),
            },
        });
        self.records.len() - 1
    }

    fn skip(&mut self, idx: usize, reason: SkipReason, detail: impl Into<String>) {
        self.records[idx].status = MeasureStatus::Skipped {
            reason,
            detail: detail.into(),
        };
    }

    /// Plans writing `new` to a file of the host, unless it already holds it
    /// or cannot be written.
    fn plan_file(&mut self, idx: usize, path: PathBuf, old: String, new: String, same: bool) {
        self.records[idx].old = Some(old.clone());
        self.records[idx].new = Some(new.clone());
        if same {
            self.skip(idx, SkipReason::NotApplicable, "already set");
            return;
        }
        if let Err(e) = nix::unistd::access(&path, nix::unistd::AccessFlags::W_OK) {
            self.skip(idx, SkipReason::NotPermitted, e.desc());
            return;
        }
        self.planned.push(Planned::File {
            record: idx,
            path,
            old,
            new,
        });
    }

    fn plan_rt(&mut self, on: bool) {
        let path = self.root.join("proc/sys/kernel/sched_rt_runtime_us");
        let idx = self.record(
            "rt_throttling",
            "let SCHED_FIFO threads run without the 5% RT throttling",
            path.display().to_string(),
        );
        if !on {
            return self.skip(idx, SkipReason::NotRequested, "off in plan");
        }
        match read_value(&path) {
            Ok(old) => {
                let same = old == "-1";
                self.plan_file(idx, path, old, "-1".into(), same);
            }
            Err(e) => {
                let st = skip_for_error(&e);
                self.records[idx].status = st;
            }
        }
    }

    fn plan_cstates(&mut self, on: bool) {
        let path = self.root.join("dev/cpu_dma_latency");
        let idx = self.record(
            "cstates",
            "hold a 0 us PM QoS latency requirement: cores stay out of deep C-states",
            path.display().to_string(),
        );
        self.records[idx].new = Some("0".into());
        if !on {
            return self.skip(idx, SkipReason::NotRequested, "off in plan");
        }
        if !path.exists() {
            return self.skip(idx, SkipReason::NotPresent, "no /dev/cpu_dma_latency");
        }
        if let Err(e) = nix::unistd::access(&path, nix::unistd::AccessFlags::W_OK) {
            return self.skip(idx, SkipReason::NotPermitted, e.desc());
        }
        self.planned.push(Planned::Hold { record: idx, path });
    }

    fn plan_irqs(&mut self, on: bool) {
        let lane = self.lane;
        let dflt = self.root.join("proc/irq/default_smp_affinity");
        let idx = self.record(
            "irq_default_affinity",
            "new IRQs avoid the lane core",
            dflt.display().to_string(),
        );
        if !on {
            self.skip(idx, SkipReason::NotRequested, "off in plan");
            let idx = self.record(
                "irq_affinity",
                "route the IRQ away from the lane core",
                self.root.join("proc/irq").display().to_string(),
            );
            return self.skip(idx, SkipReason::NotRequested, "off in plan");
        }
        self.plan_affinity(idx, dflt, false, lane);
        let irq_dir = self.root.join("proc/irq");
        let mut irqs: Vec<u32> = match std::fs::read_dir(&irq_dir) {
            Ok(rd) => rd
                .filter_map(|e| e.ok())
                .filter_map(|e| e.file_name().to_str().and_then(|s| s.parse().ok()))
                .collect(),
            Err(e) => {
                let idx = self.record(
                    "irq_affinity",
                    "route the IRQ away from the lane core",
                    irq_dir.display().to_string(),
                );
                let st = skip_for_error(&e);
                self.records[idx].status = st;
                return;
            }
        };
        irqs.sort_unstable();
        for irq in irqs {
            let dir = irq_dir.join(irq.to_string());
            let list = dir.join("smp_affinity_list");
            let (path, is_list) = if list.exists() {
                (list, true)
            } else {
                (dir.join("smp_affinity"), false)
            };
            let idx = self.record(
                "irq_affinity",
                "route the IRQ away from the lane core",
                path.display().to_string(),
            );
            self.plan_affinity(idx, path, is_list, lane);
        }
    }

    fn plan_affinity(&mut self, idx: usize, path: PathBuf, is_list: bool, lane: usize) {
        let old = match read_value(&path) {
            Ok(v) => v,
            Err(e) => {
                self.records[idx].status = skip_for_error(&e);
                return;
            }
        };
        let parsed = if is_list {
            CpuSet::parse_list(&old)
        } else {
            CpuSet::parse_mask(&old)
        };
        let set = match parsed {
            Ok(s) => s,
            Err(e) => {
                self.records[idx].old = Some(old);
                return self.skip(idx, SkipReason::Failed, e.to_string());
            }
        };
        if !set.contains(lane) {
            self.records[idx].old = Some(old);
            return self.skip(idx, SkipReason::NotApplicable, "lane core not in mask");
        }
        let mut rest = set.clone();
        rest.remove(lane);
        if rest.intersection(self.online).is_empty() {
            self.records[idx].old = Some(old);
            return self.skip(
                idx,
                SkipReason::NotApplicable,
                "no other online core in mask",
            );
        }
        let new = if is_list {
            rest.to_list()
        } else {
            rest.to_mask()
        };
        self.plan_file(idx, path, old, new, false);
    }

    fn plan_rps(&mut self, t: &RpsTarget) {
        let mask_for = |policy: RpsPolicy, online: &CpuSet, lane: usize| -> Option<CpuSet> {
            match policy {
                RpsPolicy::LaneCore => Some(CpuSet::single(lane)),
                RpsPolicy::RegularCores => {
                    let mut s = online.clone();
                    s.remove(lane);
                    Some(s)
                }
                RpsPolicy::Leave => None,
            }
        };
        let label = match &t.netns {
            Some(ns) => format!("{ns}:{}", t.iface),
            None => t.iface.clone(),
        };
        // (kind, file name, queue prefix, policy)
        let kinds = [
            ("rps", "rps_cpus", "rx-", t.rps),
            ("xps", "xps_cpus", "tx-", t.xps),
        ];
        let files = if kinds.iter().all(|k| k.3 == RpsPolicy::Leave) {
            Ok(Vec::new())
        } else {
            match &t.netns {
                None => list_queue_files_local(self.root, &t.iface),
                Some(ns) => list_queue_files_netns(ns, &t.iface),
            }
        };
        for (name, file, prefix, policy) in kinds {
            let what = format!("steer {name} work of {label} by policy {policy:?}");
            let Some(want) = mask_for(policy, self.online, self.lane) else {
                let idx = self.record(name, &what, label.clone());
                self.skip(idx, SkipReason::NotRequested, "policy leave");
                continue;
            };
            if want.is_empty() {
                let idx = self.record(name, &what, label.clone());
                self.skip(idx, SkipReason::NotApplicable, "no regular cores");
                continue;
            }
            let files = match &files {
                Ok(f) => f,
                Err(e) => {
                    let idx = self.record(name, &what, label.clone());
                    let st = skip_for_error(e);
                    self.records[idx].status = st;
                    continue;
                }
            };
            let mine: Vec<&(String, Option<String>)> = files
                .iter()
                .filter(|(p, _)| {
                    p.ends_with(&format!("/{file}")) && p.contains(&format!("/queues/{prefix}"))
                })
                .collect();
            if mine.is_empty() {
                let idx = self.record(name, &what, label.clone());
                self.skip(idx, SkipReason::NotPresent, format!("no {file} on {label}"));
                continue;
            }
            for (path, old) in mine {
                let target = match &t.netns {
                    Some(ns) => format!("{ns}:{path}"),
                    None => path.clone(),
                };
                let idx = self.record(name, &what, target);
                let Some(old) = old.clone() else {
                    self.skip(idx, SkipReason::NotPresent, "unreadable");
                    continue;
                };
                let same = CpuSet::parse_mask(&old).map(|s| s == want).unwrap_or(false);
                let new = want.to_mask();
                match &t.netns {
                    None => self.plan_file(idx, PathBuf::from(path), old, new, same),
                    Some(ns) => {
                        self.records[idx].old = Some(old.clone());
                        self.records[idx].new = Some(new.clone());
                        if same {
                            self.skip(idx, SkipReason::NotApplicable, "already set");
                            continue;
                        }
                        self.planned.push(Planned::Netns {
                            record: idx,
                            netns: ns.clone(),
                            path: path.clone(),
                            old,
                            new,
                        });
                    }
                }
            }
        }
    }
}

impl AppliedTuning {
    /// Every setting considered, in the order applied.
    pub fn measures(&self) -> &[MeasureRecord] {
        &self.records
    }

    /// The journal file, while changes are in force.
    pub fn journal_path(&self) -> Option<&Path> {
        self.journal.as_deref()
    }

    /// A one-line summary per measure name: how many settings were applied
    /// and skipped (by reason).
    pub fn summary(&self) -> Vec<String> {
        let mut names: Vec<&str> = Vec::new();
        for r in &self.records {
            if !names.contains(&r.name.as_str()) {
                names.push(&r.name);
            }
        }
        names
            .into_iter()
            .map(|n| {
                let of: Vec<&MeasureRecord> = self.records.iter().filter(|r| r.name == n).collect();
                let applied = of.iter().filter(|r| r.applied()).count();
                let mut parts = vec![format!("{applied} applied")];
                for reason in [
                    SkipReason::NotPresent,
                    SkipReason::NotPermitted,
                    SkipReason::NotApplicable,
                    SkipReason::NotRequested,
                    SkipReason::Failed,
                ] {
                    let c = of
                        .iter()
                        .filter(|r| {
                            matches!(&r.status, MeasureStatus::Skipped { reason: x, .. } if *x == reason)
                        })
                        .count();
                    if c > 0 {
                        parts.push(format!("{c} {}", reason_word(reason)));
                    }
                }
                format!("{n}: {}", parts.join(", "))
            })
            .collect()
    }

    /// Undoes every change in reverse order, continuing past errors, and
    /// deletes the journal if all went well.
    pub fn restore(mut self) -> RestoreReport {
        self.restore_inner()
    }

    fn restore_inner(&mut self) -> RestoreReport {
        self.restored = true;
        let mut report = RestoreReport {
            journal: self.journal.clone(),
            ..Default::default()
        };
        while let Some(u) = self.undo.pop() {
            let entry = match u {
                Undo::File {
                    record,
                    path,
                    value,
                } => RestoreEntry {
                    name: self.records[record].name.clone(),
                    target: path.display().to_string(),
                    outcome: restore_file(&path, &value),
                    value,
                },
                Undo::Netns {
                    record,
                    netns,
                    path,
                    value,
                } => RestoreEntry {
                    name: self.records[record].name.clone(),
                    target: format!("{netns}:{path}"),
                    outcome: restore_netns(&netns, &path, &value),
                    value,
                },
                Undo::Hold { record, file } => {
                    drop(file);
                    RestoreEntry {
                        name: self.records[record].name.clone(),
                        target: self.records[record].target.clone(),
                        value: self.records[record].old.clone().unwrap_or_default(),
                        outcome: RestoreOutcome::Restored,
                    }
                }
            };
            report.entries.push(entry);
        }
        if let Some(j) = self.journal.take() {
            if report.is_clean() {
                match std::fs::remove_file(&j) {
                    Ok(()) => report.journal_removed = true,
                    Err(e) if e.kind() == io::ErrorKind::NotFound => report.journal_removed = true,
                    Err(e) => report.journal_error = Some(e.to_string()),
                }
            }
        }
        report
    }

    /// Rewrites the journal to hold only the changes actually made (or
    /// deletes it when none was made).
    fn rewrite_journal(&mut self) {
        let Some(path) = self.journal.clone() else {
            return;
        };
        let entries: Vec<JournalEntry> = self
            .undo
            .iter()
            .filter_map(|u| match u {
                Undo::File {
                    record,
                    path,
                    value,
                } => Some(JournalEntry::File {
                    name: self.records[*record].name.clone(),
                    path: path
                        .strip_prefix(&self.root)
                        .unwrap_or(path)
                        .to_string_lossy()
                        .into_owned(),
                    value: value.clone(),
                }),
                Undo::Netns {
                    record,
                    netns,
                    path,
                    value,
                } => Some(JournalEntry::Netns {
                    name: self.records[*record].name.clone(),
                    netns: netns.clone(),
                    path: path.clone(),
                    value: value.clone(),
                }),
                Undo::Hold { .. } => None,
            })
            .collect();
        if entries.is_empty() {
            // The write-ahead journal may be removed: nothing was changed.
            if std::fs::remove_file(&path).is_ok() {
                self.journal = None;
            }
            return;
        }
        // If the rewrite fails the write-ahead version stays, which lists a
        // superset of the changes: restoring from it is still correct.
        let _ = Journal::new(&self.root, entries).write_to(&path);
    }
}

impl Drop for AppliedTuning {
    fn drop(&mut self) {
        if !self.restored {
            let _ = self.restore_inner();
        }
    }
}

fn reason_word(r: SkipReason) -> &'static str {
    match r {
        SkipReason::NotPresent => "not present",
        SkipReason::NotPermitted => "not permitted",
        SkipReason::NotApplicable => "not applicable",
        SkipReason::NotRequested => "not requested",
        SkipReason::Failed => "failed",
    }
}

/// Maps an I/O error to a skip status.
fn skip_for_error(e: &io::Error) -> MeasureStatus {
    let reason = match e.kind() {
        io::ErrorKind::NotFound => SkipReason::NotPresent,
        io::ErrorKind::PermissionDenied => SkipReason::NotPermitted,
        _ => match e.raw_os_error() {
            Some(libc::EIO) | Some(libc::EINVAL) | Some(libc::EPERM) | Some(libc::EROFS)
            | Some(libc::EACCES) | Some(libc::ENOSPC) => SkipReason::NotPermitted,
            _ => SkipReason::Failed,
        },
    };
    MeasureStatus::Skipped {
        reason,
        detail: e.to_string(),
    }
}

/// Reads a settings file, trimmed.
pub(crate) fn read_value(path: &Path) -> io::Result<String> {
    Ok(std::fs::read_to_string(path)?.trim().to_string())
}

/// Writes a settings file in one `write` call (sysfs/procfs want that).
pub(crate) fn write_value(path: &Path, value: &str) -> io::Result<()> {
    let mut f = OpenOptions::new().write(true).truncate(true).open(path)?;
    let data = format!("{value}\n");
    let n = f.write(data.as_bytes())?;
    if n != data.len() {
        return Err(io::Error::new(io::ErrorKind::WriteZero, "short write"));
    }
    Ok(())
}

/// Writes `value` back unless the file already holds it.
pub(crate) fn restore_file(path: &Path, value: &str) -> RestoreOutcome {
    if read_value(path).map(|v| v == value).unwrap_or(false) {
        return RestoreOutcome::Restored;
    }
    match write_value(path, value) {
        Ok(()) => RestoreOutcome::Restored,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            RestoreOutcome::Skipped(format!("gone: {e}"))
        }
        Err(e) => RestoreOutcome::Failed(e.to_string()),
    }
}

/// Writes `value` back inside a namespace unless it already holds it.
pub(crate) fn restore_netns(netns: &str, path: &str, value: &str) -> RestoreOutcome {
    if !Path::new("/run/netns").join(netns).exists() {
        return RestoreOutcome::Skipped(format!("netns {netns} no longer exists"));
    }
    if let Ok(cur) = netns_read(netns, path) {
        if cur == value {
            return RestoreOutcome::Restored;
        }
    }
    match netns_write(netns, path, value) {
        Ok(()) => RestoreOutcome::Restored,
        Err(e) => RestoreOutcome::Failed(e.to_string()),
    }
}

/// Interface names as the kernel allows them, minus what a shell or a path
/// could misread.
fn valid_iface(name: &str) -> bool {
    !name.is_empty()
        && name.len() < 16
        && name != "."
        && name != ".."
        && !name.starts_with('-')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b'@' | b':'))
}

/// Namespace names as `ip netns` allows them, conservatively.
pub(crate) fn valid_netns(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name != "."
        && name != ".."
        && !name.starts_with('-')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
}

type QueueFiles = Vec<(String, Option<String>)>;

/// `(path, value)` of every `rps_cpus`/`xps_cpus` file of `iface` on the
/// host; `None` values could not be read.
fn list_queue_files_local(root: &Path, iface: &str) -> io::Result<QueueFiles> {
    let qdir = root.join("sys/class/net").join(iface).join("queues");
    let mut out = Vec::new();
    let mut queues: Vec<String> = std::fs::read_dir(&qdir)?
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .collect();
    queues.sort_by_key(|q| queue_sort_key(q));
    for q in queues {
        let file = if q.starts_with("rx-") {
            "rps_cpus"
        } else if q.starts_with("tx-") {
            "xps_cpus"
        } else {
            continue;
        };
        let p = qdir.join(&q).join(file);
        if p.exists() {
            out.push((p.display().to_string(), read_value(&p).ok()));
        }
    }
    Ok(out)
}

fn queue_sort_key(q: &str) -> (String, u32) {
    match q.split_once('-') {
        Some((a, b)) => (a.to_string(), b.parse().unwrap_or(u32::MAX)),
        None => (q.to_string(), u32::MAX),
    }
}

/// Runs a shell script inside a namespace with `ip netns exec`, which also
/// mounts that namespace's sysfs for the script. Arguments are passed as
/// positional parameters, never spliced into the script.
fn netns_sh(netns: &str, script: &str, args: &[&str]) -> io::Result<String> {
    let out = Command::new("ip")
        .args(["netns", "exec", netns, "sh", "-c", script, "sh"])
        .args(args)
        .output()?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr).trim().to_string();
        let kind = if err.contains("Permission denied") || err.contains("Operation not permitted") {
            io::ErrorKind::PermissionDenied
        } else if err.contains("No such file") {
            io::ErrorKind::NotFound
        } else {
            io::ErrorKind::Other
        };
        return Err(io::Error::new(
            kind,
            format!("ip netns exec {netns}: {}: {err}", out.status),
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn list_queue_files_netns(netns: &str, iface: &str) -> io::Result<QueueFiles> {
    let script = r#"[ -d "/sys/class/net/$1/queues" ] || { echo "no interface $1" >&2; exit 3; }
for f in /sys/class/net/"$1"/queues/rx-*/rps_cpus /sys/class/net/"$1"/queues/tx-*/xps_cpus; do
  [ -e "$f" ] || continue
  if v=$(cat "$f" 2>/dev/null); then printf '%s %s\n' "$f" "$v"; else printf '%s\n' "$f"; fi
done"#;
    let out = netns_sh(netns, script, &[iface]).map_err(|e| {
        if e.to_string().contains("no interface") {
            io::Error::new(io::ErrorKind::NotFound, e.to_string())
        } else {
            e
        }
    })?;
    let mut files: QueueFiles = out
        .lines()
        .filter_map(|l| {
            let mut it = l.splitn(2, ' ');
            let p = it.next()?.to_string();
            if p.is_empty() {
                return None;
            }
            Some((p, it.next().map(|v| v.trim().to_string())))
        })
        .collect();
    files.sort_by_key(|(p, _)| {
        let q = p.split('/').nth_back(1).unwrap_or("").to_string();
        queue_sort_key(&q)
    });
    Ok(files)
}

fn netns_read(netns: &str, path: &str) -> io::Result<String> {
    Ok(netns_sh(netns, r#"cat "$1""#, &[path])?.trim().to_string())
}

fn netns_write(netns: &str, path: &str, value: &str) -> io::Result<()> {
    if !path.starts_with("/sys/class/net/") || path.contains("..") {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("refusing to write {path} in a namespace"),
        ));
    }
    netns_sh(netns, r#"printf '%s\n' "$2" > "$1""#, &[path, value]).map(|_| ())
}

#[cfg(test)]
mod tests;
