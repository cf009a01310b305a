//! The host side of a QJump level (`xlane run`): pacing the level's
//! traffic on the host's interface, and marking the traffic of programs
//! the preload library cannot reach (static and Go binaries) by port.
//!
//! **Pacing.** The level's packets (matched on their DSCP by a `u32`
//! classifier) go to an HTB class whose `rate = ceil =` the level's rate
//! and whose burst is the level's `f` packets: a host that sends faster
//! than its share waits in that class (it is paced, not dropped, up to
//! the class's queue). The class layout is the testbed's
//! (`xlane_testbed::shaping`): level 2 is class `h:10` (DSCP 46), level 1
//! class `h:20` (DSCP 40), best effort `h:30`, for HTB `1:` and, on a port
//! split by CPU, also `2:` (each transmit queue is paced to the rate). If
//! the interface has no such HTB, [`Pacing::apply`] installs one as the
//! root qdisc (replacing the root, which is deleted again afterwards).
//! Every change is undone when the [`Pacing`] is dropped.
//!
//! **Classifier.** This kernel's `tc` has no `skbedit`, `pedit`, `csum` or
//! `gact` actions (only `mirred`), so a `tc` filter can steer a packet to
//! a class but cannot rewrite its DSCP, and the switch classifies on the
//! DSCP. The netfilter `DSCP` target can: [`PortClassifier`] adds, in the
//! `mangle` table's `POSTROUTING` chain (IPv4 and IPv6, `iptables-legacy`
//! when present), one rule per listed port, protocol (TCP, UDP) and
//! direction (source, destination port) that sets the level's DSCP; the
//! HTB's `u32` DSCP classifier then puts the packet in the level's class.
//! The rules carry a comment naming their owner and are deleted when the
//! classifier is dropped.

use std::process::Command;

use xlane_level::LevelSpec;

/// Largest Ethernet frame HTB sees (MTU 1500 + header).
const FRAME_BYTES: u64 = 1514;

/// Why the host side of a level could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum LevelHostError {
    /// A tool could not be run or failed.
    #[error("{command}: {detail}")]
    Tool {
        /// The command line.
        command: String,
        /// Its error output, or why it did not run.
        detail: String,
    },
    /// The level is best effort: nothing to pace or mark.
    #[error("level {0} is best effort: nothing to pace or mark")]
    BestEffort(u8),
    /// No port given to the classifier.
    #[error("marking by port needs at least one port")]
    NoPorts,
}

fn run(tool: &str, args: &[String]) -> Result<String, LevelHostError> {
    let command = format!("{tool} {}", args.join(" "));
    let out = Command::new(tool)
        .args(args)
        .output()
        .map_err(|e| LevelHostError::Tool {
            command: command.clone(),
            detail: e.to_string(),
        })?;
    if !out.status.success() {
        return Err(LevelHostError::Tool {
            command,
            detail: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn words(s: &str) -> Vec<String> {
    s.split_whitespace().map(str::to_string).collect()
}

/// The HTB class minor of a level (`None`: best effort).
pub fn class_minor(level: &LevelSpec) -> Option<u32> {
    match level.level {
        2 => Some(10),
        1 => Some(20),
        _ => None,
    }
}

/// One HTB class as `tc class show` prints it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HtbClass {
    /// `h:m`.
    pub id: String,
    /// Its parent.
    pub parent: String,
    /// `prio`.
    pub prio: String,
    /// `rate`, as printed.
    pub rate: String,
    /// `ceil`, as printed.
    pub ceil: String,
    /// `burst`, as printed.
    pub burst: String,
    /// `cburst`, as printed.
    pub cburst: String,
}

/// Parses the HTB classes of `tc class show dev D` (lines it does not
/// understand are skipped).
pub fn parse_htb_classes(text: &str) -> Vec<HtbClass> {
    let mut v = Vec::new();
    for line in text.lines() {
        let t: Vec<&str> = line.split_whitespace().collect();
        if t.len() < 3 || t[0] != "class" || t[1] != "htb" {
            continue;
        }
        let after = |k: &str| {
            t.iter()
                .position(|w| *w == k)
                .and_then(|i| t.get(i + 1))
                .map(|s| s.to_string())
        };
        let (Some(rate), Some(ceil), Some(burst), Some(cburst)) = (
            after("rate"),
            after("ceil"),
            after("burst"),
            after("cburst"),
        ) else {
            continue;
        };
        v.push(HtbClass {
            id: t[2].to_string(),
            parent: after("parent").unwrap_or_else(|| "root".into()),
            prio: after("prio").unwrap_or_else(|| "0".into()),
            rate,
            ceil,
            burst,
            cburst,
        });
    }
    v
}

/// `tc class change` of `c` to the given figures.
fn change_line(
    dev: &str,
    c: &HtbClass,
    rate: &str,
    ceil: &str,
    burst: &str,
    cburst: &str,
) -> String {
    let parent = if c.parent == "root" {
        String::new()
    } else {
        format!("parent {} ", c.parent)
    };
    format!(
        "class change dev {dev} {parent}classid {} htb rate {rate} ceil {ceil} burst {burst} \
         cburst {cburst} prio {} quantum {FRAME_BYTES}",
        c.id, c.prio
    )
}

/// A level paced on an interface; undone when dropped.
#[derive(Debug)]
pub struct Pacing {
    dev: String,
    /// `tc` argument lines that undo the change, in order.
    undo: Vec<String>,
    classes: Vec<String>,
    installed: bool,
}

impl Pacing {
    /// Paces `level` on `dev` to `rate_bps` with a burst of `burst_bytes`
    /// (raised to two frames). `link_bps` sizes the HTB installed when the
    /// interface has none.
    pub fn apply(
        dev: &str,
        level: &LevelSpec,
        rate_bps: u64,
        burst_bytes: u64,
        link_bps: u64,
    ) -> Result<Pacing, LevelHostError> {
        let minor = class_minor(level).ok_or(LevelHostError::BestEffort(level.level))?;
        let burst = format!("{}b", burst_bytes.max(2 * FRAME_BYTES));
        let rate = format!("{rate_bps}bit");
        let show = |args: &str| run("tc", &words(&format!("{args} dev {dev}")));
        let mut classes = parse_htb_classes(&show("class show")?);
        let mut p = Pacing {
            dev: dev.to_string(),
            undo: Vec::new(),
            classes: Vec::new(),
            installed: false,
        };
        let ours = |c: &HtbClass| {
            c.id.split_once(':')
                .is_some_and(|(h, m)| (h == "1" || h == "2") && m == minor.to_string())
        };
        if !classes.iter().any(ours) {
            for l in install_lines(dev, link_bps) {
                run("tc", &words(&l))?;
            }
            p.installed = true;
            classes = parse_htb_classes(&show("class show")?);
        }
        for c in classes.iter().filter(|c| ours(c)) {
            let set = change_line(dev, c, &rate, &rate, &burst, &burst);
            run("tc", &words(&set))?;
            p.classes.push(c.id.clone());
            if !p.installed {
                p.undo
                    .push(change_line(dev, c, &c.rate, &c.ceil, &c.burst, &c.cburst));
            }
        }
        if p.installed {
            p.undo.push(format!("qdisc del dev {dev} root"));
        }
        Ok(p)
    }

    /// One line for the run's output.
    pub fn describe(&self) -> String {
        format!(
            "HTB class{} {} on {}{}",
            if self.classes.len() > 1 { "es" } else { "" },
            self.classes.join(", "),
            self.dev,
            if self.installed {
                " (HTB installed by xlane run, removed at exit)"
            } else {
                ""
            }
        )
    }
}

impl Drop for Pacing {
    fn drop(&mut self) {
        for l in &self.undo {
            let _ = run("tc", &words(l));
        }
    }
}

/// The HTB installed on an interface without one: the testbed's classes
/// (level 2 `1:10` prio 0, level 1 `1:20` prio 1, best effort `1:30`
/// prio 2), DSCP filters, all under a link class of `link_bps`.
pub fn install_lines(dev: &str, link_bps: u64) -> Vec<String> {
    let link = format!("{link_bps}bit");
    let small = format!("{}bit", (link_bps / 100).max(8_000));
    let b = 2 * FRAME_BYTES;
    let mut v = vec![
        format!("qdisc replace dev {dev} root handle 1: htb default 30"),
        format!(
            "class add dev {dev} parent 1: classid 1:1 htb rate {link} ceil {link} burst {b}b cburst {b}b"
        ),
    ];
    for (minor, prio, rate) in [(10, 0, &small), (20, 1, &small), (30, 2, &link)] {
        v.push(format!(
            "class add dev {dev} parent 1:1 classid 1:{minor} htb rate {rate} ceil {link} \
             burst {b}b cburst {b}b prio {prio} quantum {FRAME_BYTES}"
        ));
    }
    for (pref, l) in [(1, 2u8), (2, 1u8)] {
        if let (Some(spec), Some(minor)) = (
            LevelSpec::get(l),
            LevelSpec::get(l).as_ref().and_then(class_minor),
        ) {
            v.push(format!(
                "filter add dev {dev} parent 1: protocol ip prio {pref} u32 match ip tos {:#04x} 0xfc flowid 1:{minor}",
                spec.tos()
            ));
            v.push(format!(
                "filter add dev {dev} parent 1: protocol ipv6 prio {} u32 match ip6 priority {:#04x} 0xfc flowid 1:{minor}",
                pref + 10,
                spec.tos()
            ));
        }
    }
    v
}

/// The netfilter tool of a family: the legacy one when installed (this
/// kernel has `ip_tables`), else the default.
pub fn xtables(v6: bool) -> &'static str {
    let (legacy, plain) = if v6 {
        ("ip6tables-legacy", "ip6tables")
    } else {
        ("iptables-legacy", "iptables")
    };
    let found = std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .chain(["/usr/sbin".into(), "/sbin".into()])
        .any(|d| d.join(legacy).is_file());
    if found {
        legacy
    } else {
        plain
    }
}

/// Rules that set a level's DSCP on the packets of listed ports; deleted
/// when dropped.
#[derive(Debug)]
pub struct PortClassifier {
    /// (tool, rule arguments after `-A`/`-D POSTROUTING`).
    rules: Vec<(&'static str, Vec<String>)>,
}

/// The rule arguments for `port` (after `-t mangle -A POSTROUTING`).
pub fn rule_args(port: u16, dscp: u8, tag: &str) -> Vec<Vec<String>> {
    let mut v = Vec::new();
    for proto in ["tcp", "udp"] {
        for dir in ["--sport", "--dport"] {
            v.push(words(&format!(
                "-p {proto} -m {proto} {dir} {port} -m comment --comment {tag} -j DSCP --set-dscp {dscp}"
            )));
        }
    }
    v
}

impl PortClassifier {
    /// Installs the rules for `ports` with `level`'s DSCP, tagged `tag`
    /// (one word, e.g. `xlane-run-<pid>`). On failure the rules already
    /// added are removed.
    pub fn install(
        ports: &[u16],
        level: &LevelSpec,
        tag: &str,
    ) -> Result<PortClassifier, LevelHostError> {
        if ports.is_empty() {
            return Err(LevelHostError::NoPorts);
        }
        let mut c = PortClassifier { rules: Vec::new() };
        for v6 in [false, true] {
            let tool = xtables(v6);
            for &p in ports {
                for r in rule_args(p, level.dscp, tag) {
                    let mut args = words("-t mangle -A POSTROUTING");
                    args.extend(r.iter().cloned());
                    run(tool, &args)?;
                    c.rules.push((tool, r));
                }
            }
        }
        Ok(c)
    }

    /// One line for the run's output.
    pub fn describe(&self) -> String {
        let tools: Vec<&str> = {
            let mut t: Vec<&str> = self.rules.iter().map(|(t, _)| *t).collect();
            t.dedup();
            t
        };
        format!(
            "{} netfilter DSCP rules (mangle POSTROUTING, {})",
            self.rules.len(),
            tools.join(" and ")
        )
    }
}

impl Drop for PortClassifier {
    fn drop(&mut self) {
        for (tool, r) in &self.rules {
            let mut args = words("-t mangle -D POSTROUTING");
            args.extend(r.iter().cloned());
            let _ = run(tool, &args);
        }
    }
}

/// The interface of the default route (from `/proc/net/route`), else the
/// only interface other than loopback.
pub fn default_interface() -> Option<String> {
    if let Ok(t) = std::fs::read_to_string("/proc/net/route") {
        for l in t.lines().skip(1) {
            let f: Vec<&str> = l.split_whitespace().collect();
            if f.len() > 2 && f[1] == "00000000" {
                return Some(f[0].to_string());
            }
        }
    }
    let devs: Vec<String> = std::fs::read_dir("/sys/class/net")
        .ok()?
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n != "lo")
        .collect();
    match devs.as_slice() {
        [one] => Some(one.clone()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHOW: &str = "\
class htb 1:1 root rate 40Mbit ceil 40Mbit burst 3028b cburst 3028b 
class htb 1:10 parent 1:1 leaf 10: prio 0 rate 4Mbit ceil 40Mbit burst 3028b cburst 3028b 
class htb 2:10 parent 2:1 leaf 210: prio 0 rate 4Mbit ceil 40Mbit burst 3028b cburst 3028b 
class mq :1 root 
";

    #[test]
    fn parses_classes_and_restores_them() {
        let c = parse_htb_classes(SHOW);
        assert_eq!(c.len(), 3);
        assert_eq!(c[1].id, "1:10");
        assert_eq!(c[1].parent, "1:1");
        assert_eq!(
            (c[1].rate.as_str(), c[1].ceil.as_str()),
            ("4Mbit", "40Mbit")
        );
        assert_eq!(c[0].parent, "root");
        let undo = change_line(
            "eth0",
            &c[1],
            &c[1].rate,
            &c[1].ceil,
            &c[1].burst,
            &c[1].cburst,
        );
        assert_eq!(
            undo,
            "class change dev eth0 parent 1:1 classid 1:10 htb rate 4Mbit ceil 40Mbit \
             burst 3028b cburst 3028b prio 0 quantum 1514"
        );
    }

    #[test]
    fn rules_cover_both_protocols_and_directions() {
        let r = rule_args(2380, 46, "xlane-run-1");
        assert_eq!(r.len(), 4);
        let all: Vec<String> = r.iter().map(|v| v.join(" ")).collect();
        assert!(all.contains(
            &"-p tcp -m tcp --sport 2380 -m comment --comment xlane-run-1 -j DSCP --set-dscp 46"
                .to_string()
        ));
        assert!(all
            .iter()
            .any(|l| l.contains("udp") && l.contains("--dport 2380")));
    }

    #[test]
    fn installed_htb_has_the_level_classes() {
        let l = install_lines("eth0", 1_000_000_000).join("\n");
        for want in [
            "classid 1:10",
            "classid 1:20",
            "classid 1:30",
            "tos 0xb8",
            "tos 0xa0",
        ] {
            assert!(l.contains(want), "{want} in {l}");
        }
        assert_eq!(class_minor(&LevelSpec::get(0).unwrap()), None);
    }
}
