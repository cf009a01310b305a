//! The checks, one function each, and [`run_checks`] that runs them all.

use super::model::*;
use super::sys::*;
use crate::floor::FloorReport;
use crate::tuning::{self, CpuSet};
use std::collections::BTreeMap;
use xlane_stats::fmt_ns;

/// Is the lane core in `isolcpus` (§4.3.1)?
pub fn check_isolcpus(src: &dyn SysSource, ctx: &Context) -> Check {
    let lane = ctx.lane_core;
    let cl = cmdline(src);
    let from_cmdline = cmdline_value(&cl, "isolcpus").map(|v| cpus_of_param(&v));
    let isolated = cpu_list_file(src, "/sys/devices/system/cpu/isolated");
    let in_sys = isolated.as_ref().is_some_and(|s| s.contains(lane));
    let in_cl = from_cmdline.as_ref().is_some_and(|s| s.contains(lane));
    if in_sys || in_cl {
        return check(
            "isolcpus",
            Status::Ok,
            format!("cpu{lane} is isolated from the scheduler"),
            None,
        );
    }
    let mut want = from_cmdline.unwrap_or_default();
    want.insert(lane);
    let now = isolated
        .filter(|s| !s.is_empty())
        .map(|s| format!("isolated: {s}"))
        .unwrap_or_else(|| "no cpu is isolated".into());
    check(
        "isolcpus",
        Status::NeedsReboot,
        format!("cpu{lane} is shared with every other task ({now})"),
        Some(format!("isolcpus={}", want.to_list())),
    )
}

/// Is the lane core in adaptive-tick mode (§4.3.2 timer ticks)?
pub fn check_nohz_full(src: &dyn SysSource, ctx: &Context) -> Check {
    let lane = ctx.lane_core;
    let fix = Some(format!("nohz_full={lane}"));
    match cpu_list_file(src, "/sys/devices/system/cpu/nohz_full") {
        Some(s) if s.contains(lane) => check(
            "nohz_full",
            Status::Ok,
            format!("cpu{lane} runs in adaptive-tick mode"),
            None,
        ),
        Some(s) => check(
            "nohz_full",
            Status::NeedsReboot,
            if s.is_empty() {
                "no cpu in nohz_full".to_string()
            } else {
                format!("nohz_full={s} does not include cpu{lane}")
            },
            fix,
        ),
        None => {
            let cfg = kernel_config(src).and_then(|c| config_value(&c, "CONFIG_NO_HZ_FULL"));
            let why = match cfg.as_deref() {
                Some("y") => "nohz_full is not set",
                Some(_) => "this kernel is built without CONFIG_NO_HZ_FULL",
                None => "this kernel shows no nohz_full (built without CONFIG_NO_HZ_FULL?)",
            };
            let fix = if cfg.as_deref() == Some("y") {
                format!("nohz_full={lane}")
            } else {
                format!("nohz_full={lane} (on a kernel with CONFIG_NO_HZ_FULL=y)")
            };
            check("nohz_full", Status::NeedsReboot, why, Some(fix))
        }
    }
}

/// Are RCU callbacks offloaded from the lane core (§4.3.2 RCU warnings)?
pub fn check_rcu_nocbs(src: &dyn SysSource, ctx: &Context) -> Check {
    let lane = ctx.lane_core;
    let cl = cmdline(src);
    let nocbs = cmdline_value(&cl, "rcu_nocbs").map(|v| cpus_of_param(&v));
    let nohz = cpu_list_file(src, "/sys/devices/system/cpu/nohz_full");
    if nocbs.as_ref().is_some_and(|s| s.contains(lane)) {
        return check(
            "rcu_nocbs",
            Status::Ok,
            format!("RCU callbacks of cpu{lane} are offloaded"),
            None,
        );
    }
    if nohz.as_ref().is_some_and(|s| s.contains(lane)) {
        return check(
            "rcu_nocbs",
            Status::Ok,
            format!("cpu{lane} is nohz_full, which offloads its RCU callbacks"),
            None,
        );
    }
    let cfg = kernel_config(src).and_then(|c| config_value(&c, "CONFIG_RCU_NOCB_CPU"));
    let mut want = nocbs.unwrap_or_default();
    want.insert(lane);
    let mut fix = format!("rcu_nocbs={}", want.to_list());
    if cfg.as_deref().is_some_and(|v| v != "y") {
        fix.push_str(" (on a kernel with CONFIG_RCU_NOCB_CPU=y)");
    }
    check(
        "rcu_nocbs",
        Status::NeedsReboot,
        format!("RCU callbacks run on cpu{lane}"),
        Some(fix),
    )
}

/// Can the lane core drop into deep C-states (§4.3.1)?
pub fn check_cstates(src: &dyn SysSource, ctx: &Context) -> Check {
    let lane = ctx.lane_core;
    let cl = cmdline(src);
    let boot_fix = "cpuidle.off=1 processor.max_cstate=0 idle=poll".to_string();
    let qos = if src.exists("/dev/cpu_dma_latency") {
        "; /dev/cpu_dma_latency is available (xlane holds it at 0 while it runs)"
    } else {
        "; no /dev/cpu_dma_latency"
    };
    if cmdline_value(&cl, "idle").as_deref() == Some("poll")
        || cmdline_value(&cl, "cpuidle.off").as_deref() == Some("1")
    {
        return check(
            "cstates",
            Status::Ok,
            "idle=poll or cpuidle.off=1 on the kernel command line",
            None,
        );
    }
    let driver = src
        .read("/sys/devices/system/cpu/cpuidle/current_driver")
        .map(|s| s.trim().to_string())
        .ok();
    let dir = format!("/sys/devices/system/cpu/cpu{lane}/cpuidle");
    let states: Vec<String> = src
        .list(&dir)
        .unwrap_or_default()
        .into_iter()
        .filter(|s| s.starts_with("state"))
        .collect();
    if states.is_empty() {
        let d = match driver.as_deref() {
            Some("none") | None => format!(
                "no cpuidle driver: an idle cpu{lane} halts (in a VM the vCPU is descheduled); a busy-polling lane never idles{qos}"
            ),
            Some(d) => format!("cpuidle driver {d} but no idle states on cpu{lane}{qos}"),
        };
        return check("cstates", Status::NeedsReboot, d, Some(boot_fix));
    }
    let mut deep_enabled = Vec::new();
    for s in &states {
        let name = src
            .read(&format!("{dir}/{s}/name"))
            .map(|n| n.trim().to_string())
            .unwrap_or_default();
        if name == "POLL" {
            continue;
        }
        let disabled = src
            .read(&format!("{dir}/{s}/disable"))
            .map(|d| d.trim() == "1")
            .unwrap_or(false);
        if !disabled {
            deep_enabled.push((s.clone(), name));
        }
    }
    if deep_enabled.is_empty() {
        return check(
            "cstates",
            Status::Ok,
            format!(
                "only polling idle on cpu{lane} (driver {})",
                driver.unwrap_or_default()
            ),
            None,
        );
    }
    let names: Vec<String> = deep_enabled
        .iter()
        .map(|(s, n)| format!("{s}={n}"))
        .collect();
    let files: Vec<String> = deep_enabled
        .iter()
        .map(|(s, _)| format!("{dir}/{s}/disable"))
        .collect();
    check(
        "cstates",
        Status::FixableNow,
        format!(
            "cpu{lane} may enter {} (driver {}){qos}",
            names.join(", "),
            driver.unwrap_or_default()
        ),
        Some(format!(
            "echo 1 | tee {} >/dev/null  # boot: {boot_fix}",
            files.join(" ")
        )),
    )
}

/// Is the NMI watchdog off (§4.3.2)?
pub fn check_nmi_watchdog(src: &dyn SysSource, _ctx: &Context) -> Check {
    let cl = cmdline(src);
    if cl
        .iter()
        .any(|(k, _)| k == "nowatchdog" || k == "nmi_watchdog")
        && cmdline_value(&cl, "nmi_watchdog").as_deref() != Some("1")
    {
        return check(
            "nmi_watchdog",
            Status::Ok,
            "disabled on the kernel command line",
            None,
        );
    }
    match src.read("/proc/sys/kernel/nmi_watchdog") {
        Ok(v) if v.trim() == "0" => check("nmi_watchdog", Status::Ok, "disabled", None),
        Ok(v) => check(
            "nmi_watchdog",
            Status::FixableNow,
            format!("enabled ({}): sends NMIs to every core", v.trim()),
            Some("sysctl -w kernel.nmi_watchdog=0  # boot: nowatchdog".into()),
        ),
        Err(_) => check(
            "nmi_watchdog",
            Status::Info,
            "no NMI watchdog in this kernel",
            None,
        ),
    }
}

/// How many timer ticks hit the lane core (§4.3.2 timer ticks)?
pub fn check_timer_ticks(src: &dyn SysSource, ctx: &Context) -> Check {
    let lane = ctx.lane_core;
    let hz = kernel_config(src).and_then(|c| config_value(&c, "CONFIG_HZ"));
    let hz_text = match &hz {
        Some(h) => format!("CONFIG_HZ={h}"),
        None => "CONFIG_HZ unknown (no kernel config)".into(),
    };
    let Some(w) = &ctx.window else {
        return check(
            "timer_ticks",
            Status::Unknown,
            format!("{hz_text}; no measurement window"),
            None,
        );
    };
    let before = Interrupts::parse(&w.interrupts_before);
    let after = Interrupts::parse(&w.interrupts_after);
    let (Some(a), Some(b)) = (after.count("LOC", lane), before.count("LOC", lane)) else {
        return check(
            "timer_ticks",
            Status::Unknown,
            format!("{hz_text}; no LOC counter for cpu{lane} in /proc/interrupts"),
            None,
        );
    };
    if w.seconds <= 0.0 {
        return check(
            "timer_ticks",
            Status::Unknown,
            format!("{hz_text}; empty window"),
            None,
        );
    }
    let rate = a.saturating_sub(b) as f64 / w.seconds;
    let detail = format!(
        "{rate:.0} local timer interrupts/s on busy cpu{lane} over {:.1} s ({hz_text})",
        w.seconds
    );
    if rate <= TICKS_OK_PER_SEC {
        return check("timer_ticks", Status::Ok, detail, None);
    }
    let nohz = cpu_list_file(src, "/sys/devices/system/cpu/nohz_full");
    if nohz.is_some_and(|s| s.contains(lane)) {
        // Adaptive ticks are on but something keeps the tick alive (more
        // than one runnable task, pending timers): nothing to add at boot.
        return check(
            "timer_ticks",
            Status::Warn,
            format!("{detail}; nohz_full is on but the tick keeps running (more than one task on the core?)"),
            None,
        );
    }
    check(
        "timer_ticks",
        Status::NeedsReboot,
        detail,
        Some(format!(
            "nohz_full={lane} (kernel with CONFIG_NO_HZ_FULL=y)"
        )),
    )
}

/// Which IRQs can be routed to the lane core (§4.3.2 IRQ affinity)?
pub fn check_irq_affinity(src: &dyn SysSource, ctx: &Context) -> Check {
    let lane = ctx.lane_core;
    let Some(online) = online(src) else {
        return check(
            "irq_affinity",
            Status::Unknown,
            "cannot read the online cpus",
            None,
        );
    };
    let rest = others(&online, lane);
    let irqs: Vec<u32> = match src.list("/proc/irq") {
        Ok(v) => {
            let mut v: Vec<u32> = v.iter().filter_map(|n| n.parse().ok()).collect();
            v.sort_unstable();
            v
        }
        Err(e) => {
            return check(
                "irq_affinity",
                Status::Unknown,
                format!("cannot list /proc/irq: {e}"),
                None,
            )
        }
    };
    // New affinity list → IRQs that need it.
    let mut movable: BTreeMap<String, Vec<u32>> = BTreeMap::new();
    let mut pinned = Vec::new();
    for irq in &irqs {
        let list =
            cpu_list_file(src, &format!("/proc/irq/{irq}/smp_affinity_list")).or_else(|| {
                src.read(&format!("/proc/irq/{irq}/smp_affinity"))
                    .ok()
                    .and_then(|t| CpuSet::parse_mask(&t).ok())
            });
        let Some(set) = list else { continue };
        if !set.contains(lane) {
            continue;
        }
        let mut new = set.clone();
        new.remove(lane);
        if new.intersection(&online).is_empty() {
            pinned.push(*irq);
        } else {
            movable.entry(new.to_list()).or_default().push(*irq);
        }
    }
    let default = src
        .read("/proc/irq/default_smp_affinity")
        .ok()
        .and_then(|t| CpuSet::parse_mask(&t).ok());
    let default_hits = default.as_ref().is_some_and(|d| d.contains(lane)) && !rest.is_empty();

    let mut detail = Vec::new();
    let n_movable: usize = movable.values().map(Vec::len).sum();
    if n_movable > 0 {
        let all: Vec<String> = movable.values().flatten().map(|i| i.to_string()).collect();
        detail.push(format!(
            "{n_movable} IRQs may be routed to cpu{lane} ({})",
            all.join(" ")
        ));
    } else {
        detail.push(format!("no movable IRQ may be routed to cpu{lane}"));
    }
    if !pinned.is_empty() {
        detail.push(format!("{} pinned to cpu{lane} alone", pinned.len()));
    }
    if default_hits {
        detail.push("default_smp_affinity includes it".into());
    }
    if let Some(w) = &ctx.window {
        let before = Interrupts::parse(&w.interrupts_before);
        let after = Interrupts::parse(&w.interrupts_after);
        let mut hits: Vec<(u64, String)> = after
            .rows
            .iter()
            .filter(|r| r.0.chars().all(|c| c.is_ascii_digit()))
            .filter_map(|r| {
                let d = after
                    .count(&r.0, lane)?
                    .saturating_sub(before.count(&r.0, lane).unwrap_or(0));
                (d > 0).then(|| {
                    (
                        d,
                        format!("{}:{}", r.0, r.2.split_whitespace().last().unwrap_or("")),
                    )
                })
            })
            .collect();
        hits.sort_by_key(|h| std::cmp::Reverse(h.0));
        let total: u64 = hits.iter().map(|h| h.0).sum();
        let top: Vec<String> = hits
            .iter()
            .take(3)
            .map(|(n, l)| format!("{l} x{n}"))
            .collect();
        if total > 0 {
            detail.push(format!(
                "{total} device interrupts hit cpu{lane} in {:.1} s ({})",
                w.seconds,
                top.join(", ")
            ));
        } else {
            detail.push(format!(
                "no device interrupt hit cpu{lane} in {:.1} s",
                w.seconds
            ));
        }
    }
    let detail = detail.join("; ");
    if n_movable == 0 && !default_hits {
        return check("irq_affinity", Status::Ok, detail, None);
    }
    let mut cmds = Vec::new();
    if default_hits {
        if let Some(d) = default {
            cmds.push(format!(
                "echo {} > /proc/irq/default_smp_affinity",
                others(&d, lane).to_mask()
            ));
        }
    }
    for (new, irqs) in &movable {
        let list: Vec<String> = irqs.iter().map(|i| i.to_string()).collect();
        cmds.push(format!(
            "for i in {}; do echo {new} > /proc/irq/$i/smp_affinity_list; done",
            list.join(" ")
        ));
    }
    check(
        "irq_affinity",
        Status::FixableNow,
        detail,
        Some(format!(
            "{}  # xlane does this while it runs; boot: irqaffinity={}",
            cmds.join("; "),
            rest.to_list()
        )),
    )
}

/// Is RT throttling off (Gotchas)?
pub fn check_rt_throttling(src: &dyn SysSource, _ctx: &Context) -> Check {
    match src.read("/proc/sys/kernel/sched_rt_runtime_us") {
        Ok(v) if v.trim() == "-1" => check("rt_throttling", Status::Ok, "off (-1)", None),
        Ok(v) => check(
            "rt_throttling",
            Status::FixableNow,
            format!(
                "sched_rt_runtime_us={}: a SCHED_FIFO lane thread is stopped for the rest of each period",
                v.trim()
            ),
            Some("sysctl -w kernel.sched_rt_runtime_us=-1  # xlane does this while it runs".into()),
        ),
        Err(e) => check(
            "rt_throttling",
            Status::Unknown,
            format!("cannot read sched_rt_runtime_us: {e}"),
            None,
        ),
    }
}

/// Are transparent huge pages off or opt-in (§4.3.3 memory management)?
pub fn check_thp(src: &dyn SysSource, _ctx: &Context) -> Check {
    let path = "/sys/kernel/mm/transparent_hugepage/enabled";
    let Ok(text) = src.read(path) else {
        return check(
            "transparent_hugepages",
            Status::Info,
            "no transparent huge pages in this kernel",
            None,
        );
    };
    let mode = text
        .split_whitespace()
        .find(|t| t.starts_with('[') && t.ends_with(']'))
        .map(|t| t.trim_matches(|c| c == '[' || c == ']').to_string())
        .unwrap_or_else(|| text.trim().to_string());
    match mode.as_str() {
        "never" | "madvise" => check(
            "transparent_hugepages",
            Status::Ok,
            format!("{mode}: no background compaction for ordinary memory"),
            None,
        ),
        _ => check(
            "transparent_hugepages",
            Status::FixableNow,
            format!("{mode}: khugepaged and compaction may stall any task"),
            Some(format!(
                "echo madvise > {path}  # boot: transparent_hugepage=madvise"
            )),
        ),
    }
}

/// Does the lane core run at full frequency?
pub fn check_cpufreq(src: &dyn SysSource, ctx: &Context) -> Check {
    let lane = ctx.lane_core;
    let path = format!("/sys/devices/system/cpu/cpu{lane}/cpufreq/scaling_governor");
    match src.read(&path) {
        Ok(g) if g.trim() == "performance" => check(
            "cpufreq_governor",
            Status::Ok,
            format!("cpu{lane}: performance"),
            None,
        ),
        Ok(g) => check(
            "cpufreq_governor",
            Status::FixableNow,
            format!("cpu{lane}: {} (frequency changes add latency)", g.trim()),
            Some(format!("echo performance > {path}")),
        ),
        Err(_) => check(
            "cpufreq_governor",
            Status::Info,
            "no cpufreq (virtual machine?)",
            None,
        ),
    }
}

/// Does the lane core share its physical core with a busy sibling?
pub fn check_smt(src: &dyn SysSource, ctx: &Context) -> Check {
    let lane = ctx.lane_core;
    let path = format!("/sys/devices/system/cpu/cpu{lane}/topology/thread_siblings_list");
    let Some(sib) = cpu_list_file(src, &path) else {
        return check(
            "smt_sibling",
            Status::Unknown,
            format!("cannot read {path}"),
            None,
        );
    };
    let mut siblings = sib;
    siblings.remove(lane);
    let online = online(src).unwrap_or_default();
    let active: Vec<usize> = siblings.iter().filter(|c| online.contains(*c)).collect();
    if active.is_empty() {
        return check(
            "smt_sibling",
            Status::Ok,
            format!("cpu{lane} has no online SMT sibling"),
            None,
        );
    }
    let busy = ctx.window.as_ref().map(stat_delta);
    let parts: Vec<String> = active
        .iter()
        .map(|c| {
            let b = busy.as_ref().and_then(|d| d.get(c)).map(|v| {
                let total: u64 = v.iter().take(8).sum();
                let idle = v.get(3).copied().unwrap_or(0) + v.get(4).copied().unwrap_or(0);
                if total == 0 {
                    0.0
                } else {
                    100.0 * total.saturating_sub(idle) as f64 / total as f64
                }
            });
            match b {
                Some(p) => format!("cpu{c} ({p:.0}% busy)"),
                None => format!("cpu{c}"),
            }
        })
        .collect();
    let cmds: Vec<String> = active
        .iter()
        .map(|c| format!("echo 0 > /sys/devices/system/cpu/cpu{c}/online"))
        .collect();
    check(
        "smt_sibling",
        Status::FixableNow,
        format!(
            "cpu{lane} shares its core with {}: the sibling's work slows the lane",
            parts.join(", ")
        ),
        Some(format!("{}  # boot: nosmt", cmds.join("; "))),
    )
}

/// The NUMA node of a CPU (0 when the machine shows none).
pub(super) fn cpu_node(src: &dyn SysSource, cpu: usize) -> Option<i64> {
    src.list(&format!("/sys/devices/system/cpu/cpu{cpu}"))
        .ok()?
        .iter()
        .find_map(|n| n.strip_prefix("node").and_then(|x| x.parse().ok()))
}

/// Is the lane core on the NUMA node of the NIC (§4.3.3)?
pub fn check_nic_numa(src: &dyn SysSource, ctx: &Context) -> Check {
    let lane = ctx.lane_core;
    let ifaces: Vec<String> = if ctx.ifaces.is_empty() {
        src.list("/sys/class/net")
            .unwrap_or_default()
            .into_iter()
            .filter(|i| i != "lo")
            .collect()
    } else {
        ctx.ifaces.clone()
    };
    if ifaces.is_empty() {
        return check("nic_numa", Status::Info, "no network interface", None);
    }
    let lane_node = cpu_node(src, lane);
    let mut parts = Vec::new();
    let mut mismatch: Option<(String, i64)> = None;
    let mut any_known = false;
    for i in &ifaces {
        let base = format!("/sys/class/net/{i}");
        if !src.exists(&base) {
            parts.push(format!("{i}: not found"));
            continue;
        }
        if !src.exists(&format!("{base}/device")) {
            parts.push(format!("{i}: virtual"));
            continue;
        }
        match src
            .read(&format!("{base}/device/numa_node"))
            .ok()
            .and_then(|t| t.trim().parse::<i64>().ok())
        {
            Some(n) if n >= 0 => {
                any_known = true;
                parts.push(format!("{i}: node {n}"));
                if lane_node.is_some_and(|l| l != n) && mismatch.is_none() {
                    mismatch = Some((i.clone(), n));
                }
            }
            _ => parts.push(format!("{i}: no NUMA affinity")),
        }
    }
    let lane_text = match lane_node {
        Some(n) => format!("cpu{lane} on node {n}"),
        None => format!("cpu{lane} node unknown"),
    };
    let detail = format!("{lane_text}; {}", parts.join(", "));
    if let Some((i, n)) = mismatch {
        let cpus = cpu_list_file(src, &format!("/sys/devices/system/node/node{n}/cpulist"));
        let fix = match cpus.and_then(|c| c.last()) {
            Some(c) => format!("--lane-core {c}  # a core on node {n}, the node of {i}"),
            None => format!("pick a lane core on node {n}, the node of {i}"),
        };
        return check("nic_numa", Status::FixableNow, detail, Some(fix));
    }
    if any_known {
        check("nic_numa", Status::Ok, detail, None)
    } else {
        check("nic_numa", Status::Info, detail, None)
    }
}

/// System management interrupts (§4.3.2) cannot be seen from here.
pub fn check_smi(_src: &dyn SysSource, _ctx: &Context) -> Check {
    check(
        "smi",
        Status::Unknown,
        "SMIs are invisible to the kernel; thermal-throttling SMIs are disabled in the BIOS",
        None,
    )
}

pub(super) fn floor_verdict(r: &FloorReport) -> bool {
    r.stolen_fraction <= FLOOR_OK_STOLEN_FRACTION && r.max_gap_ns <= FLOOR_OK_MAX_GAP_NS
}

pub(super) fn floor_text(r: &FloorReport) -> String {
    format!(
        "cpu{}: {:.2}% of {:.1} s lost in {} gaps > {}, longest {}",
        r.core,
        100.0 * r.stolen_fraction,
        r.duration_ns as f64 / 1e9,
        r.gaps.len() as u64 + r.gaps_dropped,
        fmt_ns(r.threshold_ns),
        fmt_ns(r.max_gap_ns)
    )
}

pub(super) const FLOOR_FIX: &str = "no setting fixes this: use dedicated CPUs (bare metal, pinned vCPUs); latency reports attribute outliers to these gaps";

/// How much time does the machine take from the lane core?
pub fn check_floor_lane(_src: &dyn SysSource, ctx: &Context) -> Check {
    let lane = ctx.lane_core;
    let Some(w) = &ctx.window else {
        return check(
            "floor_lane_core",
            Status::Unknown,
            "no measurement window",
            None,
        );
    };
    if let Some((_, e)) = w.floor_errors.iter().find(|(c, _)| *c == lane) {
        return check(
            "floor_lane_core",
            Status::Unknown,
            format!("probe failed: {e}"),
            None,
        );
    }
    let Some(r) = w.floors.iter().find(|r| r.core == lane) else {
        return check(
            "floor_lane_core",
            Status::Unknown,
            format!("cpu{lane} was not probed"),
            None,
        );
    };
    if floor_verdict(r) {
        check("floor_lane_core", Status::Ok, floor_text(r), None)
    } else {
        check(
            "floor_lane_core",
            Status::Warn,
            floor_text(r),
            Some(FLOOR_FIX.into()),
        )
    }
}

/// How much time does the machine take from the other cores?
pub fn check_floor_others(_src: &dyn SysSource, ctx: &Context) -> Check {
    let lane = ctx.lane_core;
    let Some(w) = &ctx.window else {
        return check(
            "floor_other_cores",
            Status::Unknown,
            "no measurement window",
            None,
        );
    };
    let rs: Vec<&FloorReport> = w.floors.iter().filter(|r| r.core != lane).collect();
    if rs.is_empty() {
        return check(
            "floor_other_cores",
            Status::Info,
            "no other core was probed",
            None,
        );
    }
    let texts: Vec<String> = rs.iter().map(|r| floor_text(r)).collect();
    if rs.iter().all(|r| floor_verdict(r)) {
        check("floor_other_cores", Status::Ok, texts.join("; "), None)
    } else {
        check(
            "floor_other_cores",
            Status::Warn,
            texts.join("; "),
            Some(FLOOR_FIX.into()),
        )
    }
}

/// Does the hypervisor report stolen time?
pub fn check_steal(_src: &dyn SysSource, ctx: &Context) -> Check {
    let Some(w) = &ctx.window else {
        return check("steal_time", Status::Unknown, "no measurement window", None);
    };
    let d = stat_delta(w);
    if d.is_empty() {
        return check(
            "steal_time",
            Status::Unknown,
            "no per-cpu lines in /proc/stat",
            None,
        );
    }
    let steal: u64 = d.values().map(|v| v.get(7).copied().unwrap_or(0)).sum();
    let total: u64 = d.values().map(|v| v.iter().take(8).sum::<u64>()).sum();
    let per_cpu: Vec<String> = d
        .iter()
        .map(|(c, v)| format!("cpu{c} {}", v.get(7).copied().unwrap_or(0)))
        .collect();
    let frac = if total > 0 {
        100.0 * steal as f64 / total as f64
    } else {
        0.0
    };
    let detail = format!(
        "{steal} steal ticks in {:.1} s ({frac:.2}% of cpu time; {}) at {} ticks/s",
        w.seconds,
        per_cpu.join(", "),
        w.user_hz
    );
    if steal == 0 {
        check(
            "steal_time",
            Status::Ok,
            format!("{detail}; the floor probe is the better witness"),
            None,
        )
    } else {
        check("steal_time", Status::Warn, detail, Some(FLOOR_FIX.into()))
    }
}

/// Did a run leave tuning in force (killed by SIGKILL)?
pub fn check_journals(src: &dyn SysSource, ctx: &Context) -> Check {
    let dir = ctx.journal_dir.trim_end_matches('/');
    let names: Vec<String> = src
        .list(dir)
        .unwrap_or_default()
        .into_iter()
        .filter(|n| n.starts_with("tuning-") && n.ends_with(".json"))
        .collect();
    if names.is_empty() {
        return check(
            "tuning_leftovers",
            Status::Ok,
            format!("no tuning journal in {dir}"),
            None,
        );
    }
    let mut stale = Vec::new();
    let mut running = Vec::new();
    for n in names {
        let path = format!("{dir}/{n}");
        let Some((pid, start, entries)) = src
            .read(&path)
            .ok()
            .and_then(|t| tuning::summarize_journal_text(&t))
        else {
            stale.push((path, 0u32, 0usize));
            continue;
        };
        let alive = src
            .read(&format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|t| tuning::parse_start_time(&t));
        let live = match (alive, start) {
            (Some(a), Some(s)) => a == s,
            (Some(_), None) => true,
            (None, _) => false,
        };
        if live {
            running.push(format!("pid {pid} ({entries} changes)"));
        } else {
            stale.push((path, pid, entries));
        }
    }
    if stale.is_empty() {
        return check(
            "tuning_leftovers",
            Status::Info,
            format!("tuning in force by running xlane: {}", running.join(", ")),
            None,
        );
    }
    let detail: Vec<String> = stale
        .iter()
        .map(|(p, pid, e)| format!("{p}: {e} changes left by dead pid {pid}"))
        .collect();
    let cmds: Vec<String> = stale
        .iter()
        .map(|(p, _, _)| format!("xlane doctor --restore-journal {p}"))
        .collect();
    check(
        "tuning_leftovers",
        Status::FixableNow,
        detail.join("; "),
        Some(cmds.join("; ")),
    )
}

/// Which receive path the lane can have here: AF_XDP with XDP steering
/// (`xlaned --rx xdp`), or only the socket.
pub fn check_rx_path(_src: &dyn SysSource, ctx: &Context) -> Check {
    use crate::xdp::RxPathProbe;
    match &ctx.rx_path {
        None => check(
            "rx_path",
            Status::Unknown,
            "not probed (only on the machine itself)",
            None,
        ),
        Some(RxPathProbe::Xdp) => check(
            "rx_path",
            Status::Ok,
            "xdp: AF_XDP sockets and the XDP steering program load (xlaned --rx xdp); the NIC driver decides native or generic mode",
            None,
        ),
        Some(RxPathProbe::Socket(why)) => check(
            "rx_path",
            Status::Info,
            format!("socket only: {why}"),
            None,
        ),
    }
}

/// Runs every check, in [`CHECK_NAMES`] order.
pub fn run_checks(src: &dyn SysSource, ctx: &Context) -> Vec<Check> {
    type CheckFn = fn(&dyn SysSource, &Context) -> Check;
    let all: [CheckFn; 18] = [
        check_isolcpus,
        check_nohz_full,
        check_rcu_nocbs,
        check_cstates,
        check_nmi_watchdog,
        check_timer_ticks,
        check_irq_affinity,
        check_rt_throttling,
        check_thp,
        check_cpufreq,
        check_smt,
        check_nic_numa,
        check_smi,
        check_floor_lane,
        check_floor_others,
        check_steal,
        check_journals,
        check_rx_path,
    ];
    all.iter().map(|f| f(src, ctx)).collect()
}
