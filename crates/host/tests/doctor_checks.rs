//! Table-driven tests of the doctor's checks against directory trees shaped
//! like `/proc` and `/sys` (deterministic: only parsing and decisions).

use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use xlane_host::doctor::{self, Check, Context, Measurements, RootFs, Status, SysSource};
use xlane_host::floor::{FloorReport, Gap};

static SEQ: AtomicU32 = AtomicU32::new(0);

/// A temporary directory tree, removed on drop.
struct Tree(PathBuf);

impl Tree {
    fn new(files: &[(&str, &str)]) -> Self {
        let p = std::env::temp_dir().join(format!(
            "xlane-doctor-{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).expect("create temp tree");
        for (rel, content) in files {
            let f = p.join(rel.trim_start_matches('/'));
            std::fs::create_dir_all(f.parent().expect("parent")).expect("mkdir");
            if let Some(dir) = rel.strip_suffix("/.") {
                std::fs::create_dir_all(p.join(dir.trim_start_matches('/'))).expect("mkdir");
            } else {
                std::fs::write(f, content).expect("write");
            }
        }
        Tree(p)
    }
}

impl Drop for Tree {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

type CheckFn = fn(&dyn SysSource, &Context) -> Check;

struct Case {
    label: &'static str,
    check: CheckFn,
    files: &'static [(&'static str, &'static str)],
    lane: usize,
    window: Option<fn() -> Measurements>,
    status: Status,
    fix_has: Option<&'static str>,
    detail_has: Option<&'static str>,
}

const BASE: &[(&str, &str)] = &[("/sys/devices/system/cpu/online", "0-1\n")];

fn run(c: &Case) {
    let mut files: Vec<(&str, &str)> = BASE.to_vec();
    files.extend_from_slice(c.files);
    let t = Tree::new(&files);
    let src = RootFs::new(&t.0);
    let mut ctx = Context::new(c.lane);
    ctx.window = c.window.map(|f| f());
    let got = (c.check)(&src, &ctx);
    assert_eq!(got.status, c.status, "{}: {got:?}", c.label);
    if let Some(f) = c.fix_has {
        let fix = got.fix.as_deref().unwrap_or("");
        assert!(fix.contains(f), "{}: fix {fix:?} lacks {f:?}", c.label);
    }
    if let Some(d) = c.detail_has {
        assert!(
            got.detail.contains(d),
            "{}: detail {:?} lacks {d:?}",
            c.label,
            got.detail
        );
    }
    match got.status {
        Status::FixableNow | Status::NeedsReboot => {
            assert!(got.fix.is_some(), "{}: a finding without a fix", c.label)
        }
        Status::Ok => assert!(got.fix.is_none(), "{}: ok with a fix", c.label),
        _ => {}
    }
}

fn interrupts(loc0: u64, loc1: u64, dev1: u64) -> String {
    format!(
        "           CPU0       CPU1\n 36:          0 {dev1:>10}  PCI-MSIX-0000:00:02.0   1-edge      virtio1-req.0\nNMI:          0          0   Non-maskable interrupts\nLOC: {loc0:>10} {loc1:>10}   Local timer interrupts\nERR:          0\n"
    )
}

/// `/proc/stat` with cpu0's user, idle and steal counters given.
fn stat(steal: u64, user0: u64, idle0: u64) -> String {
    format!(
        "cpu  0 0 0 0 0 0 0 0 0 0\ncpu0 {user0} 0 0 {idle0} 0 0 0 {steal} 0 0\ncpu1 100 0 0 100 0 0 0 0 0 0\n"
    )
}

fn window(loc_delta: u64) -> Measurements {
    Measurements {
        seconds: 4.0,
        interrupts_before: interrupts(100, 100, 5),
        interrupts_after: interrupts(100 + loc_delta, 100 + loc_delta, 5),
        stat_before: stat(0, 0, 1000),
        stat_after: stat(0, 0, 1000),
        user_hz: 100,
        ..Default::default()
    }
}

fn floor(core: usize, stolen_fraction: f64, max_gap_ns: u64) -> FloorReport {
    FloorReport {
        core,
        threshold_ns: 10_000,
        duration_ns: 4_000_000_000,
        stolen_ns: (stolen_fraction * 4e9) as u64,
        stolen_fraction,
        max_gap_ns,
        gaps: vec![Gap {
            start_realtime_ns: 1,
            len_ns: max_gap_ns,
        }],
        gaps_dropped: 0,
        steal_ticks_delta: 0,
    }
}

fn w_ticks_250() -> Measurements {
    window(1000)
}
fn w_ticks_1() -> Measurements {
    window(4)
}
fn w_irq_hits() -> Measurements {
    let mut w = window(4);
    w.interrupts_after = interrupts(104, 104, 25);
    w
}
fn w_floor_quiet() -> Measurements {
    Measurements {
        floors: vec![floor(0, 0.0001, 20_000), floor(1, 0.0, 12_000)],
        ..window(4)
    }
}
fn w_floor_noisy() -> Measurements {
    Measurements {
        floors: vec![floor(0, 0.05, 27_000_000), floor(1, 0.048, 25_000_000)],
        ..window(4)
    }
}
fn w_floor_failed() -> Measurements {
    Measurements {
        floors: vec![floor(0, 0.0, 0)],
        floor_errors: vec![(1, "cannot pin".into())],
        ..window(4)
    }
}
fn w_steal() -> Measurements {
    Measurements {
        stat_after: stat(5, 0, 1000),
        ..window(4)
    }
}
fn w_busy_sibling() -> Measurements {
    Measurements {
        stat_after: stat(0, 500, 1500),
        ..window(4)
    }
}

fn cases() -> Vec<Case> {
    use doctor::*;
    let c = |label, check: CheckFn, files, lane, status| Case {
        label,
        check,
        files,
        lane,
        window: None,
        status,
        fix_has: None,
        detail_has: None,
    };
    vec![
        // isolcpus
        c(
            "isolated in sysfs",
            check_isolcpus,
            &[("/sys/devices/system/cpu/isolated", "1\n")],
            1,
            Status::Ok,
        ),
        c(
            "isolated on cmdline",
            check_isolcpus,
            &[("/proc/cmdline", "ro isolcpus=managed_irq,domain,1 quiet\n")],
            1,
            Status::Ok,
        ),
        Case {
            fix_has: Some("isolcpus=0-1"),
            ..c(
                "other core isolated",
                check_isolcpus,
                &[
                    ("/sys/devices/system/cpu/isolated", "\n"),
                    ("/proc/cmdline", "isolcpus=0\n"),
                ],
                1,
                Status::NeedsReboot,
            )
        },
        Case {
            fix_has: Some("isolcpus=1"),
            ..c(
                "after -- is init's",
                check_isolcpus,
                &[("/proc/cmdline", "quiet -- isolcpus=1\n")],
                1,
                Status::NeedsReboot,
            )
        },
        // nohz_full
        c(
            "nohz_full set",
            check_nohz_full,
            &[("/sys/devices/system/cpu/nohz_full", "1\n")],
            1,
            Status::Ok,
        ),
        Case {
            fix_has: Some("nohz_full=1"),
            ..c(
                "nohz_full empty",
                check_nohz_full,
                &[("/sys/devices/system/cpu/nohz_full", "(null)\n")],
                1,
                Status::NeedsReboot,
            )
        },
        Case {
            fix_has: Some("CONFIG_NO_HZ_FULL=y"),
            detail_has: Some("without CONFIG_NO_HZ_FULL"),
            ..c(
                "kernel without nohz_full",
                check_nohz_full,
                &[
                    ("/proc/sys/kernel/osrelease", "6.1.0\n"),
                    (
                        "/boot/config-6.1.0",
                        "CONFIG_HZ=250\n# CONFIG_NO_HZ_FULL is not set\n",
                    ),
                ],
                1,
                Status::NeedsReboot,
            )
        },
        // rcu_nocbs
        c(
            "rcu_nocbs on cmdline",
            check_rcu_nocbs,
            &[("/proc/cmdline", "rcu_nocbs=0-1\n")],
            1,
            Status::Ok,
        ),
        c(
            "implied by nohz_full",
            check_rcu_nocbs,
            &[("/sys/devices/system/cpu/nohz_full", "1\n")],
            1,
            Status::Ok,
        ),
        Case {
            fix_has: Some("rcu_nocbs=1"),
            ..c(
                "rcu_nocbs missing",
                check_rcu_nocbs,
                &[("/proc/cmdline", "quiet\n")],
                1,
                Status::NeedsReboot,
            )
        },
        // C-states
        c(
            "idle=poll",
            check_cstates,
            &[("/proc/cmdline", "idle=poll\n")],
            1,
            Status::Ok,
        ),
        Case {
            fix_has: Some("idle=poll"),
            detail_has: Some("no cpuidle driver"),
            ..c(
                "no cpuidle driver",
                check_cstates,
                &[
                    ("/sys/devices/system/cpu/cpuidle/current_driver", "none\n"),
                    ("/dev/cpu_dma_latency", ""),
                ],
                1,
                Status::NeedsReboot,
            )
        },
        Case {
            fix_has: Some("cpu1/cpuidle/state1/disable"),
            detail_has: Some("state1=C1"),
            ..c(
                "deep state enabled",
                check_cstates,
                &[
                    (
                        "/sys/devices/system/cpu/cpuidle/current_driver",
                        "intel_idle\n",
                    ),
                    ("/sys/devices/system/cpu/cpu1/cpuidle/state0/name", "POLL\n"),
                    ("/sys/devices/system/cpu/cpu1/cpuidle/state0/disable", "0\n"),
                    ("/sys/devices/system/cpu/cpu1/cpuidle/state1/name", "C1\n"),
                    ("/sys/devices/system/cpu/cpu1/cpuidle/state1/disable", "0\n"),
                    ("/sys/devices/system/cpu/cpu1/cpuidle/state2/name", "C6\n"),
                    ("/sys/devices/system/cpu/cpu1/cpuidle/state2/disable", "1\n"),
                ],
                1,
                Status::FixableNow,
            )
        },
        c(
            "deep states disabled",
            check_cstates,
            &[
                (
                    "/sys/devices/system/cpu/cpuidle/current_driver",
                    "intel_idle\n",
                ),
                ("/sys/devices/system/cpu/cpu1/cpuidle/state0/name", "POLL\n"),
                ("/sys/devices/system/cpu/cpu1/cpuidle/state0/disable", "0\n"),
                ("/sys/devices/system/cpu/cpu1/cpuidle/state1/name", "C1\n"),
                ("/sys/devices/system/cpu/cpu1/cpuidle/state1/disable", "1\n"),
            ],
            1,
            Status::Ok,
        ),
        // NMI watchdog
        c(
            "watchdog off",
            check_nmi_watchdog,
            &[("/proc/sys/kernel/nmi_watchdog", "0\n")],
            1,
            Status::Ok,
        ),
        Case {
            fix_has: Some("sysctl -w kernel.nmi_watchdog=0"),
            ..c(
                "watchdog on",
                check_nmi_watchdog,
                &[("/proc/sys/kernel/nmi_watchdog", "1\n")],
                1,
                Status::FixableNow,
            )
        },
        c(
            "nowatchdog at boot",
            check_nmi_watchdog,
            &[
                ("/proc/cmdline", "nowatchdog\n"),
                ("/proc/sys/kernel/nmi_watchdog", "1\n"),
            ],
            1,
            Status::Ok,
        ),
        c("no watchdog", check_nmi_watchdog, &[], 1, Status::Info),
        // timer ticks
        c(
            "ticks unmeasured",
            check_timer_ticks,
            &[],
            1,
            Status::Unknown,
        ),
        Case {
            window: Some(w_ticks_250),
            fix_has: Some("nohz_full=1"),
            detail_has: Some("250 local timer"),
            ..c(
                "250 ticks/s",
                check_timer_ticks,
                &[],
                1,
                Status::NeedsReboot,
            )
        },
        Case {
            window: Some(w_ticks_1),
            ..c("1 tick/s", check_timer_ticks, &[], 1, Status::Ok)
        },
        Case {
            window: Some(w_ticks_250),
            ..c(
                "nohz_full but ticking",
                check_timer_ticks,
                &[("/sys/devices/system/cpu/nohz_full", "1\n")],
                1,
                Status::Warn,
            )
        },
        Case {
            window: Some(w_ticks_250),
            detail_has: Some("CONFIG_HZ=1000"),
            ..c(
                "hz from config",
                check_timer_ticks,
                &[
                    ("/proc/sys/kernel/osrelease", "6.1.0\n"),
                    ("/boot/config-6.1.0", "CONFIG_HZ=1000\n"),
                ],
                1,
                Status::NeedsReboot,
            )
        },
        // IRQ affinity
        Case {
            fix_has: Some("for i in 24 26; do echo 0 > /proc/irq/$i/smp_affinity_list; done"),
            detail_has: Some("1 pinned"),
            ..c(
                "irqs may hit the lane core",
                check_irq_affinity,
                &[
                    ("/proc/irq/default_smp_affinity", "1\n"),
                    ("/proc/irq/24/smp_affinity_list", "0-1\n"),
                    ("/proc/irq/25/smp_affinity_list", "1\n"),
                    ("/proc/irq/26/smp_affinity", "3\n"),
                    ("/proc/irq/27/smp_affinity_list", "0\n"),
                ],
                1,
                Status::FixableNow,
            )
        },
        Case {
            fix_has: Some("echo 1 > /proc/irq/default_smp_affinity"),
            ..c(
                "default affinity only",
                check_irq_affinity,
                &[
                    ("/proc/irq/default_smp_affinity", "3\n"),
                    ("/proc/irq/24/smp_affinity_list", "0\n"),
                ],
                1,
                Status::FixableNow,
            )
        },
        Case {
            window: Some(w_irq_hits),
            detail_has: Some("20 device interrupts hit cpu1"),
            ..c(
                "irqs routed away",
                check_irq_affinity,
                &[
                    ("/proc/irq/default_smp_affinity", "1\n"),
                    ("/proc/irq/24/smp_affinity_list", "0\n"),
                ],
                1,
                Status::Ok,
            )
        },
        // RT throttling
        c(
            "rt off",
            check_rt_throttling,
            &[("/proc/sys/kernel/sched_rt_runtime_us", "-1\n")],
            1,
            Status::Ok,
        ),
        Case {
            fix_has: Some("sysctl -w kernel.sched_rt_runtime_us=-1"),
            ..c(
                "rt on",
                check_rt_throttling,
                &[("/proc/sys/kernel/sched_rt_runtime_us", "950000\n")],
                1,
                Status::FixableNow,
            )
        },
        c(
            "rt unreadable",
            check_rt_throttling,
            &[],
            1,
            Status::Unknown,
        ),
        // THP
        c(
            "thp madvise",
            check_thp,
            &[(
                "/sys/kernel/mm/transparent_hugepage/enabled",
                "always [madvise] never\n",
            )],
            1,
            Status::Ok,
        ),
        c(
            "thp never",
            check_thp,
            &[(
                "/sys/kernel/mm/transparent_hugepage/enabled",
                "always madvise [never]\n",
            )],
            1,
            Status::Ok,
        ),
        Case {
            fix_has: Some("echo madvise > /sys/kernel/mm/transparent_hugepage/enabled"),
            ..c(
                "thp always",
                check_thp,
                &[(
                    "/sys/kernel/mm/transparent_hugepage/enabled",
                    "[always] madvise never\n",
                )],
                1,
                Status::FixableNow,
            )
        },
        c("no thp", check_thp, &[], 1, Status::Info),
        // cpufreq
        c(
            "performance",
            check_cpufreq,
            &[(
                "/sys/devices/system/cpu/cpu1/cpufreq/scaling_governor",
                "performance\n",
            )],
            1,
            Status::Ok,
        ),
        Case {
            fix_has: Some(
                "echo performance > /sys/devices/system/cpu/cpu1/cpufreq/scaling_governor",
            ),
            ..c(
                "powersave",
                check_cpufreq,
                &[(
                    "/sys/devices/system/cpu/cpu1/cpufreq/scaling_governor",
                    "powersave\n",
                )],
                1,
                Status::FixableNow,
            )
        },
        Case {
            detail_has: Some("no cpufreq"),
            ..c("no cpufreq", check_cpufreq, &[], 1, Status::Info)
        },
        // SMT
        c(
            "no sibling",
            check_smt,
            &[(
                "/sys/devices/system/cpu/cpu1/topology/thread_siblings_list",
                "1\n",
            )],
            1,
            Status::Ok,
        ),
        Case {
            window: Some(w_busy_sibling),
            fix_has: Some("echo 0 > /sys/devices/system/cpu/cpu0/online"),
            detail_has: Some("cpu0 (50% busy)"),
            ..c(
                "busy sibling",
                check_smt,
                &[(
                    "/sys/devices/system/cpu/cpu1/topology/thread_siblings_list",
                    "0-1\n",
                )],
                1,
                Status::FixableNow,
            )
        },
        c(
            "sibling offline",
            check_smt,
            &[(
                "/sys/devices/system/cpu/cpu1/topology/thread_siblings_list",
                "1,3\n",
            )],
            1,
            Status::Ok,
        ),
        c("no topology", check_smt, &[], 1, Status::Unknown),
        // NIC NUMA
        Case {
            fix_has: Some("--lane-core 3"),
            ..c(
                "nic on the other node",
                check_nic_numa,
                &[
                    ("/sys/devices/system/cpu/cpu1/node0/.", ""),
                    ("/sys/devices/system/node/node1/cpulist", "2-3\n"),
                    ("/sys/class/net/eth0/device/numa_node", "1\n"),
                ],
                1,
                Status::FixableNow,
            )
        },
        c(
            "nic on the lane's node",
            check_nic_numa,
            &[
                ("/sys/devices/system/cpu/cpu1/node0/.", ""),
                ("/sys/class/net/eth0/device/numa_node", "0\n"),
            ],
            1,
            Status::Ok,
        ),
        Case {
            detail_has: Some("veth0: virtual"),
            ..c(
                "virtual nic",
                check_nic_numa,
                &[
                    ("/sys/class/net/veth0/queues/.", ""),
                    ("/sys/class/net/lo/.", ""),
                ],
                1,
                Status::Info,
            )
        },
        Case {
            detail_has: Some("no NUMA affinity"),
            ..c(
                "numa -1",
                check_nic_numa,
                &[("/sys/class/net/eth0/device/numa_node", "-1\n")],
                1,
                Status::Info,
            )
        },
        // SMI
        c("smi", check_smi, &[], 1, Status::Unknown),
        // floor
        c(
            "floor unmeasured",
            check_floor_lane,
            &[],
            1,
            Status::Unknown,
        ),
        Case {
            window: Some(w_floor_quiet),
            ..c("quiet lane", check_floor_lane, &[], 1, Status::Ok)
        },
        Case {
            window: Some(w_floor_noisy),
            detail_has: Some("longest 25.00ms"),
            ..c("noisy lane", check_floor_lane, &[], 1, Status::Warn)
        },
        Case {
            window: Some(w_floor_failed),
            ..c(
                "lane probe failed",
                check_floor_lane,
                &[],
                1,
                Status::Unknown,
            )
        },
        Case {
            window: Some(w_floor_quiet),
            ..c("quiet others", check_floor_others, &[], 1, Status::Ok)
        },
        Case {
            window: Some(w_floor_noisy),
            detail_has: Some("cpu0: 5.00%"),
            ..c("noisy others", check_floor_others, &[], 1, Status::Warn)
        },
        Case {
            window: Some(w_floor_failed),
            ..c(
                "others quiet, lane failed",
                check_floor_others,
                &[],
                1,
                Status::Ok,
            )
        },
        // steal
        c("steal unmeasured", check_steal, &[], 1, Status::Unknown),
        Case {
            window: Some(w_ticks_1),
            ..c("no steal", check_steal, &[], 1, Status::Ok)
        },
        Case {
            window: Some(w_steal),
            detail_has: Some("5 steal ticks"),
            ..c("steal", check_steal, &[], 1, Status::Warn)
        },
        // journals
        c("no journals", check_journals, &[], 1, Status::Ok),
        Case {
            fix_has: Some("xlane doctor --restore-journal /run/xlane/tuning-77.json"),
            ..c(
                "journal of a dead run",
                check_journals,
                &[(
                    "/run/xlane/tuning-77.json",
                    r#"{"version":1,"pid":77,"start_time":5,"root":"/","entries":[{"kind":"file","name":"rt_throttling","path":"proc/sys/kernel/sched_rt_runtime_us","value":"950000"}]}"#,
                )],
                1,
                Status::FixableNow,
            )
        },
        Case {
            fix_has: Some("tuning-77.json"),
            ..c(
                "pid reused",
                check_journals,
                &[
                    (
                        "/run/xlane/tuning-77.json",
                        r#"{"version":1,"pid":77,"start_time":5,"root":"/","entries":[]}"#,
                    ),
                    (
                        "/proc/77/stat",
                        "77 (other) S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 9 0 0\n",
                    ),
                ],
                1,
                Status::FixableNow,
            )
        },
        Case {
            detail_has: Some("pid 77"),
            ..c(
                "journal of a live run",
                check_journals,
                &[
                    (
                        "/run/xlane/tuning-77.json",
                        r#"{"version":1,"pid":77,"start_time":5,"root":"/","entries":[]}"#,
                    ),
                    (
                        "/proc/77/stat",
                        "77 (xlane run) S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5 0 0\n",
                    ),
                ],
                1,
                Status::Info,
            )
        },
    ]
}

#[test]
fn checks_table() {
    for c in cases() {
        run(&c);
    }
}

#[test]
fn every_check_runs_in_order_on_an_empty_machine() {
    let t = Tree::new(BASE);
    let checks = doctor::run_checks(&RootFs::new(&t.0), &Context::new(1));
    let names: Vec<&str> = checks.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, doctor::CHECK_NAMES);
}

#[test]
fn run_on_a_tree_picks_the_last_cpu_and_measures_nothing() {
    let t = Tree::new(&[("/sys/devices/system/cpu/online", "0-3\n")]);
    let opts = doctor::DoctorOptions {
        root: t.0.clone(),
        journal_dir: t.0.join("run/xlane"),
        ..Default::default()
    };
    let r = doctor::run(&opts).expect("run");
    assert_eq!(r.lane_core, 3);
    assert!(r.floor.is_none());
    let table = r.to_table();
    assert!(table.lines().next().is_some_and(|l| l.starts_with("check")));
    assert!(table.trim_end().ends_with(&r.summary_line()));
    let bad = doctor::DoctorOptions {
        lane_core: Some(9),
        ..opts.clone()
    };
    assert!(doctor::run(&bad).is_err());
    let bad = doctor::DoctorOptions {
        seconds: f64::NAN,
        ..opts
    };
    assert!(doctor::run(&bad).is_err());
}

#[test]
fn rx_path_says_which_receive_path_the_lane_can_have() {
    use xlane_host::xdp::RxPathProbe;
    let tree = Tree::new(&[]);
    let src = RootFs::new(&tree.0);
    let cases = [
        (None, Status::Unknown, "not probed"),
        (Some(RxPathProbe::Xdp), Status::Ok, "xdp:"),
        (
            Some(RxPathProbe::Socket(
                "no AF_XDP sockets: EAFNOSUPPORT".into(),
            )),
            Status::Info,
            "socket only: no AF_XDP sockets",
        ),
    ];
    for (probe, status, detail) in cases {
        let ctx = Context {
            rx_path: probe,
            ..Context::new(1)
        };
        let c = doctor::check_rx_path(&src, &ctx);
        assert_eq!(c.status, status, "{c:?}");
        assert!(c.detail.starts_with(detail), "{c:?}");
    }
}
