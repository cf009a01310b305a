//! Tuning applied to and restored from a directory tree shaped like
//! `/proc`, `/sys` and `/dev` (no root needed; nothing on the machine is
//! touched).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use xlane_host::tuning::{
    restore_from_journal, HostTuning, MeasureStatus, RestoreOutcome, RpsPolicy, RpsTarget,
    SkipReason, TuningError, TuningPlan,
};

static SEQ: AtomicU32 = AtomicU32::new(0);

/// A temporary directory tree, removed on drop.
struct Tree(PathBuf);

impl Tree {
    fn new(tag: &str) -> Self {
        let p = std::env::temp_dir().join(format!(
            "xlane-{tag}-{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).expect("create temp tree");
        Tree(p)
    }
    fn file(&self, rel: &str, content: &str) -> &Self {
        let p = self.0.join(rel);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(p, content).expect("write");
        self
    }
    fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.0.join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
    }
    fn path(&self, rel: &str) -> PathBuf {
        self.0.join(rel)
    }
}

impl Drop for Tree {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// (file, original content, content while applied with lane core 3)
const FILES: &[(&str, &str, &str)] = &[
    ("proc/sys/kernel/sched_rt_runtime_us", "950000\n", "-1\n"),
    ("proc/irq/default_smp_affinity", "f\n", "7\n"),
    ("proc/irq/1/smp_affinity_list", "0-3\n", "0-2\n"),
    ("proc/irq/1/smp_affinity", "f\n", "f\n"),
    ("proc/irq/2/smp_affinity_list", "3\n", "3\n"),
    ("proc/irq/3/smp_affinity_list", "0-1\n", "0-1\n"),
    ("proc/irq/4/smp_affinity", "c\n", "4\n"),
    ("proc/irq/5/smp_affinity_list", "3-4\n", "3-4\n"),
    ("sys/class/net/veth0/queues/rx-0/rps_cpus", "0\n", "8\n"),
    ("sys/class/net/veth0/queues/rx-1/rps_cpus", "1\n", "8\n"),
    ("sys/class/net/veth0/queues/tx-0/xps_cpus", "0\n", "7\n"),
    ("sys/class/net/veth0/queues/tx-0/tx_maxrate", "0\n", "0\n"),
];

fn machine() -> Tree {
    let t = Tree::new("tuning");
    t.file("sys/devices/system/cpu/online", "0-3\n");
    t.file("dev/cpu_dma_latency", "");
    for (f, old, _) in FILES {
        t.file(f, old);
    }
    t
}

fn plan(t: &Tree) -> TuningPlan {
    TuningPlan {
        rps: vec![RpsTarget {
            netns: None,
            iface: "veth0".into(),
            rps: RpsPolicy::LaneCore,
            xps: RpsPolicy::RegularCores,
        }],
        root: t.0.clone(),
        journal_dir: Some(t.path("run/xlane")),
        ..TuningPlan::all(3)
    }
}

fn assert_files(t: &Tree, applied: bool) {
    for (f, old, new) in FILES {
        let want = if applied { new } else { old };
        assert_eq!(t.read(f), *want, "{f} (applied={applied})");
    }
}

fn status_of(rec: &[xlane_host::tuning::MeasureRecord], target_end: &str) -> MeasureStatus {
    rec.iter()
        .find(|r| r.target.ends_with(target_end))
        .unwrap_or_else(|| panic!("no record for {target_end}"))
        .status
        .clone()
}

fn reason(s: &MeasureStatus) -> Option<SkipReason> {
    match s {
        MeasureStatus::Applied => None,
        MeasureStatus::Skipped { reason, .. } => Some(*reason),
    }
}

#[test]
fn apply_then_restore_leaves_every_file_as_before() {
    let t = machine();
    let applied = HostTuning::apply(&plan(&t)).expect("apply");
    assert_files(&t, true);
    let rec = applied.measures();
    // (target suffix, expected skip reason; None = applied)
    let table: &[(&str, Option<SkipReason>)] = &[
        ("sched_rt_runtime_us", None),
        ("cpu_dma_latency", None),
        ("default_smp_affinity", None),
        ("irq/1/smp_affinity_list", None),
        ("irq/2/smp_affinity_list", Some(SkipReason::NotApplicable)),
        ("irq/3/smp_affinity_list", Some(SkipReason::NotApplicable)),
        ("irq/4/smp_affinity", None),
        // cpu4 is not online: nothing would remain.
        ("irq/5/smp_affinity_list", Some(SkipReason::NotApplicable)),
        ("rx-0/rps_cpus", None),
        ("rx-1/rps_cpus", None),
        ("tx-0/xps_cpus", None),
    ];
    for (target, want) in table {
        assert_eq!(reason(&status_of(rec, target)), *want, "{target}");
    }
    // The journal lists exactly the file changes made.
    let jpath = applied.journal_path().expect("journal").to_path_buf();
    let j: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&jpath).expect("read journal"))
            .expect("journal json");
    let entries = j["entries"].as_array().expect("entries");
    assert_eq!(entries.len(), 7, "{j}");
    assert!(!applied.summary().is_empty());

    let report = applied.restore();
    assert!(report.is_clean(), "{report:?}");
    assert!(report.journal_removed);
    assert!(!jpath.exists());
    assert_files(&t, false);
    // Reverse order: the last change made is undone first.
    assert_eq!(report.entries.first().map(|e| e.name.as_str()), Some("xps"));
    assert_eq!(
        report.entries.last().map(|e| e.name.as_str()),
        Some("rt_throttling")
    );
}

#[test]
fn drop_restores() {
    let t = machine();
    {
        let _applied = HostTuning::apply(&plan(&t)).expect("apply");
        assert_files(&t, true);
    }
    assert_files(&t, false);
    assert_eq!(
        std::fs::read_dir(t.path("run/xlane"))
            .map(|d| d.count())
            .unwrap_or(0),
        0
    );
}

#[test]
fn nothing_requested_changes_nothing_and_writes_no_journal() {
    let t = machine();
    let p = TuningPlan {
        root: t.0.clone(),
        journal_dir: Some(t.path("run/xlane")),
        ..TuningPlan::none(3)
    };
    let applied = HostTuning::apply(&p).expect("apply");
    assert!(applied.measures().iter().all(|r| !r.applied()));
    assert!(applied
        .measures()
        .iter()
        .all(|r| reason(&r.status) == Some(SkipReason::NotRequested)));
    assert!(applied.journal_path().is_none());
    assert_files(&t, false);
    assert!(!t.path("run/xlane").exists());
}

#[test]
fn already_set_values_are_left_alone() {
    let t = machine();
    t.file("proc/sys/kernel/sched_rt_runtime_us", "-1\n");
    let applied = HostTuning::apply(&plan(&t)).expect("apply");
    assert_eq!(
        reason(&status_of(applied.measures(), "sched_rt_runtime_us")),
        Some(SkipReason::NotApplicable)
    );
    drop(applied);
    assert_eq!(t.read("proc/sys/kernel/sched_rt_runtime_us"), "-1\n");
}

#[test]
fn missing_settings_are_reported_not_present() {
    let t = Tree::new("tuning-bare");
    t.file("sys/devices/system/cpu/online", "0-1\n");
    let mut p = plan(&t);
    p.lane_core = 1;
    let applied = HostTuning::apply(&p).expect("apply");
    for name in [
        "rt_throttling",
        "cstates",
        "irq_default_affinity",
        "rps",
        "xps",
    ] {
        let r = applied
            .measures()
            .iter()
            .find(|r| r.name == name)
            .unwrap_or_else(|| panic!("{name}"));
        assert_eq!(
            reason(&r.status),
            Some(SkipReason::NotPresent),
            "{name}: {r:?}"
        );
    }
}

#[test]
fn restore_continues_past_errors_and_keeps_the_journal() {
    let t = machine();
    let applied = HostTuning::apply(&plan(&t)).expect("apply");
    let jpath = applied.journal_path().expect("journal").to_path_buf();
    // Make one file unwritable: replace it by a directory.
    let victim = t.path("proc/irq/default_smp_affinity");
    std::fs::remove_file(&victim).expect("rm");
    std::fs::create_dir(&victim).expect("mkdir");
    let report = applied.restore();
    assert!(!report.is_clean());
    let failed: Vec<&str> = report
        .entries
        .iter()
        .filter(|e| matches!(e.outcome, RestoreOutcome::Failed(_)))
        .map(|e| e.name.as_str())
        .collect();
    assert_eq!(failed, vec!["irq_default_affinity"]);
    assert!(jpath.exists(), "journal kept after a failed restore");
    // Everything else is back.
    for (f, old, _) in FILES
        .iter()
        .filter(|f| !f.0.ends_with("default_smp_affinity"))
    {
        assert_eq!(t.read(f), *old, "{f}");
    }
}

#[test]
fn journal_restores_a_run_that_never_restored() {
    let t = machine();
    let applied = HostTuning::apply(&plan(&t)).expect("apply");
    let jpath = applied.journal_path().expect("journal").to_path_buf();
    // Simulate SIGKILL: the process never runs Drop.
    std::mem::forget(applied);
    assert_files(&t, true);
    let list = xlane_host::tuning::list_journals(&t.path("run/xlane")).expect("list");
    assert_eq!(list.len(), 1);
    assert_eq!(list[0].pid, std::process::id());
    let report = restore_from_journal(&jpath).expect("restore");
    assert!(report.is_clean(), "{report:?}");
    assert!(report.journal_removed);
    assert!(!jpath.exists());
    assert_files(&t, false);
}

#[test]
fn journals_outside_proc_and_sys_are_refused() {
    let t = machine();
    t.file("etc/important", "keep\n");
    let j = serde_json::json!({
        "version": 1, "pid": 999_999_999u32, "start_time": null,
        "root": t.0, "entries": [
            {"kind": "file", "name": "x", "path": "proc/sys/kernel/sched_rt_runtime_us", "value": "1"},
            {"kind": "file", "name": "x", "path": "proc/../etc/important", "value": "gone"}
        ]
    });
    t.file("run/xlane/tuning-1.json", &j.to_string());
    let r = restore_from_journal(&t.path("run/xlane/tuning-1.json"));
    assert!(r.is_err(), "{r:?}");
    assert_eq!(t.read("etc/important"), "keep\n");
    assert_eq!(t.read("proc/sys/kernel/sched_rt_runtime_us"), "950000\n");
    assert!(restore_from_journal(Path::new("/nonexistent/xlane.json")).is_err());
}

#[test]
fn bad_plans_are_errors() {
    let t = machine();
    let mut p = plan(&t);
    p.lane_core = 9;
    assert!(matches!(
        HostTuning::apply(&p),
        Err(TuningError::LaneCoreOffline { core: 9, .. })
    ));
    for (ns, iface) in [
        (None, "a/b"),
        (None, "../x"),
        (Some("a b"), "veth0"),
        (None, "$(x)"),
    ] {
        let mut p = plan(&t);
        p.rps = vec![RpsTarget::new(ns, iface, RpsPolicy::LaneCore)];
        assert!(
            matches!(HostTuning::apply(&p), Err(TuningError::InvalidName { .. })),
            "{ns:?} {iface}"
        );
    }
    assert_files(&t, false);
}
