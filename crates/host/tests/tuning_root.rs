//! Tuning on the real machine (needs root; prints "skipped: needs root"
//! otherwise). These tests change machine-wide settings: each one restores
//! them through guards even when it fails, and they run one at a time.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::Ordering;
use std::sync::Mutex;
use std::time::{Duration, Instant};
use xlane_host::tuning::{
    install_termination_flag, restore_from_journal, CpuSet, HostTuning, RpsPolicy, RpsTarget,
    TuningPlan,
};

/// Serializes the tests of this binary: they share global settings.
static LOCK: Mutex<()> = Mutex::new(());

const RT: &str = "/proc/sys/kernel/sched_rt_runtime_us";
const CHILD_ENV: &str = "XLANE_TUNING_CHILD_JOURNAL_DIR";

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        println!("skipped: needs root");
        return false;
    }
    true
}

fn lock() -> std::sync::MutexGuard<'static, ()> {
    LOCK.lock().unwrap_or_else(|p| p.into_inner())
}

fn read(p: &str) -> String {
    std::fs::read_to_string(p)
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|e| format!("<{e}>"))
}

fn lane_core() -> usize {
    CpuSet::parse_list(&read("/sys/devices/system/cpu/online"))
        .ok()
        .and_then(|s| s.last())
        .unwrap_or(0)
}

/// Every setting the tuning may touch on the host.
fn snapshot() -> Vec<(String, String)> {
    let mut v = vec![(RT.to_string(), read(RT))];
    let d = "/proc/irq/default_smp_affinity".to_string();
    v.push((d.clone(), read(&d)));
    if let Ok(rd) = std::fs::read_dir("/proc/irq") {
        let mut irqs: Vec<PathBuf> = rd.filter_map(|e| e.ok()).map(|e| e.path()).collect();
        irqs.sort();
        for p in irqs {
            for f in ["smp_affinity", "smp_affinity_list"] {
                let f = p.join(f);
                if f.exists() {
                    let s = f.display().to_string();
                    v.push((s.clone(), read(&s)));
                }
            }
        }
    }
    v
}

/// Puts the snapshot's values back if a test left something changed.
struct Guard(Vec<(String, String)>);

impl Drop for Guard {
    fn drop(&mut self) {
        for (p, v) in &self.0 {
            if read(p) != *v {
                let _ = std::fs::write(p, format!("{v}\n"));
            }
        }
    }
}

fn temp_dir(tag: &str) -> PathBuf {
    let p = std::env::temp_dir().join(format!("xlane-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&p);
    let _ = std::fs::create_dir_all(&p);
    p
}

#[test]
fn apply_then_restore_real_machine() {
    if !is_root() {
        return;
    }
    let _l = lock();
    let before = snapshot();
    let _guard = Guard(before.clone());
    let lane = lane_core();
    let jdir = temp_dir("root-apply");
    let plan = TuningPlan {
        journal_dir: Some(jdir.clone()),
        ..TuningPlan::all(lane)
    };
    let applied = HostTuning::apply(&plan).expect("apply");
    for line in applied.summary() {
        println!("{line}");
    }
    for r in applied.measures().iter().filter(|r| r.applied()) {
        match r.name.as_str() {
            "rt_throttling" => assert_eq!(read(RT), "-1"),
            "irq_affinity" => {
                let set = CpuSet::parse_list(&read(&r.target)).expect("list");
                assert!(!set.contains(lane), "{} still has cpu{lane}", r.target);
            }
            _ => {}
        }
    }
    let report = applied.restore();
    assert!(report.is_clean(), "{report:?}");
    assert_eq!(snapshot(), before);
    let _ = std::fs::remove_dir_all(jdir);
}

#[test]
fn journal_undoes_a_killed_run() {
    if !is_root() {
        return;
    }
    let _l = lock();
    let before = snapshot();
    let _guard = Guard(before.clone());
    let jdir = temp_dir("root-journal");
    let plan = TuningPlan {
        rt_throttling_off: true,
        irq_affinity: true,
        journal_dir: Some(jdir.clone()),
        ..TuningPlan::none(lane_core())
    };
    let applied = HostTuning::apply(&plan).expect("apply");
    let Some(jpath) = applied.journal_path().map(PathBuf::from) else {
        println!("skipped: nothing to change on this machine");
        return;
    };
    // As if killed: Drop never runs.
    std::mem::forget(applied);
    assert_ne!(snapshot(), before);
    let report = restore_from_journal(&jpath).expect("restore");
    assert!(report.is_clean(), "{report:?}");
    assert!(!jpath.exists());
    assert_eq!(snapshot(), before);
    let _ = std::fs::remove_dir_all(jdir);
}

/// A network namespace with a veth pair, deleted on drop.
struct Netns(String);

impl Netns {
    fn new() -> Option<Self> {
        let name = format!("xlt{}-rps", std::process::id());
        let ok = Command::new("ip")
            .args(["netns", "add", &name])
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            return None;
        }
        let ns = Netns(name);
        let ok = Command::new("ip")
            .args([
                "-n", &ns.0, "link", "add", "xa", "type", "veth", "peer", "name", "xb",
            ])
            .status()
            .is_ok_and(|s| s.success());
        ok.then_some(ns)
    }
    fn cat(&self, path: &str) -> String {
        let out = Command::new("ip")
            .args(["netns", "exec", &self.0, "cat", path])
            .output()
            .expect("ip netns exec");
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

#[test]
fn rps_inside_a_namespace() {
    if !is_root() {
        return;
    }
    let _l = lock();
    let Some(ns) = Netns::new() else {
        println!("skipped: cannot create a network namespace");
        return;
    };
    let lane = lane_core();
    let rx = "/sys/class/net/xa/queues/rx-0/rps_cpus";
    let tx = "/sys/class/net/xa/queues/tx-0/xps_cpus";
    let (rx0, tx0) = (ns.cat(rx), ns.cat(tx));
    let jdir = temp_dir("root-rps");
    let plan = TuningPlan {
        rps: vec![RpsTarget::new(Some(&ns.0), "xa", RpsPolicy::LaneCore)],
        journal_dir: Some(jdir.clone()),
        ..TuningPlan::none(lane)
    };
    let applied = HostTuning::apply(&plan).expect("apply");
    let want = CpuSet::single(lane);
    assert_eq!(CpuSet::parse_mask(&ns.cat(rx)).ok(), Some(want.clone()));
    assert_eq!(CpuSet::parse_mask(&ns.cat(tx)).ok(), Some(want));
    let report = applied.restore();
    assert!(report.is_clean(), "{report:?}");
    assert_eq!((ns.cat(rx), ns.cat(tx)), (rx0, tx0));
    // The host's own interfaces were not touched by a namespace plan.
    let _ = std::fs::remove_dir_all(jdir);
}

/// Runs in the child process only: applies tuning, then waits for SIGTERM.
#[test]
fn child_applies_and_waits_for_sigterm() {
    let Ok(jdir) = std::env::var(CHILD_ENV) else {
        return;
    };
    let flag = install_termination_flag();
    let plan = TuningPlan {
        rt_throttling_off: true,
        irq_affinity: true,
        hold_cstates: true,
        journal_dir: Some(PathBuf::from(jdir)),
        ..TuningPlan::none(lane_core())
    };
    let applied = HostTuning::apply(&plan).expect("apply in child");
    println!("XLANE-CHILD-READY");
    let t0 = Instant::now();
    while !flag.load(Ordering::SeqCst) && t0.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(5));
    }
    let report = applied.restore();
    println!("XLANE-CHILD-RESTORED clean={}", report.is_clean());
}

/// Kills the child on drop if it still runs.
struct ChildGuard(Child);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

#[test]
fn sigterm_restores() {
    if !is_root() || std::env::var(CHILD_ENV).is_ok() {
        return;
    }
    let _l = lock();
    let before = snapshot();
    let _guard = Guard(before.clone());
    let jdir = temp_dir("root-sigterm");
    let exe = std::env::current_exe().expect("current exe");
    let child = Command::new(exe)
        .args([
            "--exact",
            "child_applies_and_waits_for_sigterm",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, &jdir)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn child");
    let mut child = ChildGuard(child);
    let stdout = child.0.stdout.take().expect("stdout");
    let mut lines = BufReader::new(stdout).lines();
    let mut ready = false;
    for line in lines.by_ref() {
        let line = line.expect("read child");
        if line.contains("XLANE-CHILD-READY") {
            ready = true;
            break;
        }
    }
    assert!(ready, "child never got ready");
    if before[0].1 != "-1" {
        assert_eq!(read(RT), "-1", "child applied RT throttling off");
    }
    let journals = std::fs::read_dir(&jdir).map(|d| d.count()).unwrap_or(0);
    let pid = child.0.id() as libc::pid_t;
    // SAFETY: sends SIGTERM to the child this test started.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    let status = child.0.wait().expect("wait child");
    assert!(status.success(), "child: {status}; output {rest:?}");
    assert!(
        rest.iter()
            .any(|l| l.contains("XLANE-CHILD-RESTORED clean=true")),
        "{rest:?}"
    );
    assert_eq!(snapshot(), before);
    if journals > 0 {
        assert_eq!(
            std::fs::read_dir(&jdir).map(|d| d.count()).unwrap_or(0),
            0,
            "journal removed after a clean restore"
        );
    }
    let _ = std::fs::remove_dir_all(jdir);
}
