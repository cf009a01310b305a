//! Reading the system: the kernel command line and configuration, CPU
//! lists, interrupt counts and `/proc/stat`.

use super::model::*;
use crate::tuning::CpuSet;
use std::collections::BTreeMap;

/// The kernel command line as `(key, value)` pairs, up to a `--` (which
/// hands the rest to init).
pub fn cmdline(src: &dyn SysSource) -> Vec<(String, Option<String>)> {
    let text = src.read("/proc/cmdline").unwrap_or_default();
    text.split_whitespace()
        .take_while(|t| *t != "--")
        .map(|t| match t.split_once('=') {
            Some((k, v)) => (k.to_string(), Some(v.to_string())),
            None => (t.to_string(), None),
        })
        .collect()
}

pub(super) fn cmdline_value(cl: &[(String, Option<String>)], key: &str) -> Option<String> {
    cl.iter()
        .rev()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.clone().unwrap_or_default())
}

/// The CPUs of a boot parameter value such as `isolcpus=domain,managed_irq,2-3`
/// (flags dropped); `nohz_full=`/`rcu_nocbs=` values are plain lists.
pub fn cpus_of_param(value: &str) -> CpuSet {
    let cpus: Vec<&str> = value
        .split(',')
        .filter(|t| t.starts_with(|c: char| c.is_ascii_digit()))
        .collect();
    CpuSet::parse_list(&cpus.join(",")).unwrap_or_default()
}

pub(super) fn online(src: &dyn SysSource) -> Option<CpuSet> {
    src.read("/sys/devices/system/cpu/online")
        .ok()
        .and_then(|t| CpuSet::parse_list(&t).ok())
}

pub(super) fn cpu_list_file(src: &dyn SysSource, path: &str) -> Option<CpuSet> {
    src.read(path)
        .ok()
        .and_then(|t| CpuSet::parse_list(&t).ok())
}

/// The running kernel's build configuration, if available (from
/// `/boot/config-<release>` or `/proc/config.gz`).
pub fn kernel_config(src: &dyn SysSource) -> Option<String> {
    if let Ok(rel) = src.read("/proc/sys/kernel/osrelease") {
        if let Ok(c) = src.read(&format!("/boot/config-{}", rel.trim())) {
            return Some(c);
        }
    }
    if src.exists("/proc/config.gz") {
        if let Ok(c) = src.read_gz("/proc/config.gz") {
            return Some(c);
        }
    }
    None
}

/// The value of `CONFIG_X` in a configuration text: `Some("y")`,
/// `Some("250")`, `Some("n")` for "is not set", `None` if absent.
pub fn config_value(config: &str, key: &str) -> Option<String> {
    for line in config.lines() {
        let line = line.trim();
        if let Some(rest) = line.strip_prefix(key) {
            if let Some(v) = rest.strip_prefix('=') {
                return Some(v.trim_matches('"').to_string());
            }
        }
        if line == format!("# {key} is not set") {
            return Some("n".into());
        }
    }
    None
}

/// Per-CPU counters of `/proc/interrupts`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Interrupts {
    /// The CPU number of each column.
    pub cpus: Vec<usize>,
    /// Each row: label (`24`, `LOC`, …), counts per column, description.
    pub rows: Vec<(String, Vec<u64>, String)>,
}

impl Interrupts {
    /// Parses the text of `/proc/interrupts`.
    pub fn parse(text: &str) -> Self {
        let mut lines = text.lines();
        let cpus: Vec<usize> = lines
            .next()
            .unwrap_or("")
            .split_whitespace()
            .filter_map(|t| t.strip_prefix("CPU").and_then(|n| n.parse().ok()))
            .collect();
        let mut rows = Vec::new();
        for line in lines {
            let Some((label, rest)) = line.split_once(':') else {
                continue;
            };
            let mut counts = Vec::new();
            let mut toks = rest.split_whitespace().peekable();
            while counts.len() < cpus.len() {
                match toks.peek().and_then(|t| t.parse::<u64>().ok()) {
                    Some(n) => {
                        counts.push(n);
                        toks.next();
                    }
                    None => break,
                }
            }
            let desc: Vec<&str> = toks.collect();
            rows.push((label.trim().to_string(), counts, desc.join(" ")));
        }
        Self { cpus, rows }
    }

    /// The count of `label` on `cpu`.
    pub fn count(&self, label: &str, cpu: usize) -> Option<u64> {
        let col = self.cpus.iter().position(|&c| c == cpu)?;
        let row = self.rows.iter().find(|r| r.0 == label)?;
        row.1.get(col).copied()
    }
}

/// The per-CPU lines of `/proc/stat`: CPU number → counters
/// (user nice system idle iowait irq softirq steal …).
pub fn parse_stat(text: &str) -> BTreeMap<usize, Vec<u64>> {
    text.lines()
        .filter_map(|l| {
            let mut it = l.split_whitespace();
            let cpu: usize = it.next()?.strip_prefix("cpu")?.parse().ok()?;
            Some((cpu, it.filter_map(|t| t.parse().ok()).collect()))
        })
        .collect()
}

pub(super) fn stat_delta(w: &Measurements) -> BTreeMap<usize, Vec<u64>> {
    let before = parse_stat(&w.stat_before);
    let after = parse_stat(&w.stat_after);
    after
        .into_iter()
        .filter_map(|(cpu, a)| {
            let b = before.get(&cpu)?;
            Some((
                cpu,
                a.iter()
                    .zip(b.iter())
                    .map(|(x, y)| x.saturating_sub(*y))
                    .collect(),
            ))
        })
        .collect()
}

pub(super) fn others(online: &CpuSet, lane: usize) -> CpuSet {
    let mut o = online.clone();
    o.remove(lane);
    o
}
