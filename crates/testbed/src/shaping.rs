//! HTB shaping with strict-priority express classes, and its statistics.
//!
//! Every shaped egress (switch port towards a host, and host NIC towards the
//! switch) gets:
//!
//! ```text
//! root htb 1: (default 1:30)
//! └─ 1:1  rate = ceil = link rate
//!    ├─ 1:10 express    prio 0, rate p% of link, ceil link  → pfifo 10: (express_queue_pkts)
//!    ├─ 1:20 express 2  prio 1, rate p% of link, ceil link  → pfifo 20: (express_queue_pkts)
//!    └─ 1:30 best effort prio 2 (1 without express 2), rate = rest, ceil link → pfifo 30:
//! filters (u32 on the IP TOS byte, mask 0xfc = DSCP bits):
//!    tos = express_dscp<<2  → 1:10;  tos = express2_dscp<<2 → 1:20;  ARP → 1:10
//! ```
//!
//! With a lane core given ([`TestbedConfig::lane_core`]), the device has
//! two transmit queues under an `mq` root (`ff00:`): the lane core's queue
//! (`tx-1`) holds the HTB `1:` above, the one the controller programs; the
//! other cores' queue (`tx-0`) a twin `2:` with the same classes (leaf
//! qdiscs `210:`, `220:`, `230:`); XPS sends each CPU's packets to its
//! queue ([`split_htb_lines`]).
//!
//! HTB serves leaf classes by priority, so an express packet leaves before
//! any queued best-effort packet as long as the express class stays under
//! its guaranteed rate. ARP rides in the express class so that address
//! resolution never waits behind bulk traffic (the testbed also installs
//! permanent neighbour entries, so ARP is rare).

use crate::config::{dscp_to_tos, format_rate, TestbedConfig};
use crate::error::TestbedError;

/// Class id of the link (parent) class.
pub const CLASS_LINK: &str = "1:1";
/// Class id of the first express sub-lane.
pub const CLASS_EXPRESS: &str = "1:10";
/// Class id of the second express sub-lane.
pub const CLASS_EXPRESS2: &str = "1:20";
/// Class id of best effort.
pub const CLASS_BEST_EFFORT: &str = "1:30";

/// Largest Ethernet frame HTB sees on these links (MTU 1500 + header).
const FRAME_BYTES: u64 = 1514;

fn burst_bytes(rate_bps: u64, burst_ns: u64) -> u64 {
    let by_time = (rate_bps as u128 * burst_ns as u128 / 8_000_000_000u128) as u64;
    by_time.max(2 * FRAME_BYTES)
}

/// Guaranteed rates of a port's classes, bit/s (each may borrow up to the
/// link rate).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClassRates {
    /// Each express class: `express_rate_percent` of the link (≥ 8 kbit/s).
    pub express: u64,
    /// Best effort: what the express classes leave (≥ 8 kbit/s).
    pub best_effort: u64,
}

/// The guaranteed rates of the classes of a port shaped to `rate_bps`.
pub fn class_rates(rate_bps: u64, cfg: &TestbedConfig) -> ClassRates {
    let pct = cfg.express_rate_percent as u64;
    let express = (rate_bps * pct / 100).max(8_000);
    let n_express = if cfg.express2_dscp.is_some() { 2 } else { 1 };
    ClassRates {
        express,
        best_effort: rate_bps.saturating_sub(express * n_express).max(8_000),
    }
}

/// The `tc -batch` lines that shape `dev` to `rate_bps` with the classes
/// above.
pub fn htb_lines(dev: &str, rate_bps: u64, cfg: &TestbedConfig) -> Vec<String> {
    htb_lines_at(dev, rate_bps, cfg, 1, None)
}

/// The handle of the regular cores' HTB when a port is split by CPU.
pub const REGULAR_HTB: u32 = 2;
/// The handle of the `mq` root of a port split by CPU.
pub const MQ_ROOT: &str = "ff00:";

/// The `tc -batch` lines of a port split by CPU (`cfg.lane_core` set):
/// an `mq` root over the device's two transmit queues, the lane core's
/// queue (`tx-1`) with the HTB `1:` that the controller programs, the
/// regular cores' queue (`tx-0`) with HTB `2:`, both with the classes
/// above. Which queue a packet takes is chosen by the CPU that sends or
/// forwards it (XPS, set by the testbed).
pub fn split_htb_lines(dev: &str, rate_bps: u64, cfg: &TestbedConfig) -> Vec<String> {
    let mut v = vec![format!("qdisc add dev {dev} root handle {MQ_ROOT} mq")];
    v.extend(htb_lines_at(
        dev,
        rate_bps,
        cfg,
        1,
        Some(&format!("{MQ_ROOT}2")),
    ));
    v.extend(htb_lines_at(
        dev,
        rate_bps,
        cfg,
        REGULAR_HTB,
        Some(&format!("{MQ_ROOT}1")),
    ));
    v
}

/// [`htb_lines`] for an HTB with handle `h:` under `parent` (`None`: root).
fn htb_lines_at(
    dev: &str,
    rate_bps: u64,
    cfg: &TestbedConfig,
    h: u32,
    parent: Option<&str>,
) -> Vec<String> {
    // The class ids of HTB `h:` (1: has the exported constants' ids).
    let id = |c: &str| format!("{h}:{}", c.split(':').nth(1).unwrap_or(""));
    let (link, ex1, ex2, be) = (
        id(CLASS_LINK),
        id(CLASS_EXPRESS),
        id(CLASS_EXPRESS2),
        id(CLASS_BEST_EFFORT),
    );
    // Leaf qdisc handles: 10:, 20:, 30: under HTB 1:; 210:, 220:, 230: under 2:.
    let leaf = |n: u32| {
        if h == 1 {
            format!("{n}:")
        } else {
            format!("{}:", h * 100 + n)
        }
    };
    let root = match parent {
        Some(p) => format!("parent {p}"),
        None => "root".to_string(),
    };
    let ClassRates {
        express: express_rate,
        best_effort: be_rate,
    } = class_rates(rate_bps, cfg);
    let cburst = burst_bytes(rate_bps, cfg.burst_ns);
    let ceil = format_rate(rate_bps);
    let class = |id: &str, prio: u32, rate: u64| {
        format!(
            "class add dev {dev} parent {link} classid {id} htb rate {} ceil {ceil} \
             burst {}b cburst {cburst}b prio {prio} quantum {FRAME_BYTES}",
            format_rate(rate),
            burst_bytes(rate, cfg.burst_ns)
        )
    };
    let mut v = vec![
        format!("qdisc add dev {dev} {root} handle {h}: htb default 30"),
        format!(
            "class add dev {dev} parent {h}: classid {link} htb rate {ceil} ceil {ceil} \
             burst {cburst}b cburst {cburst}b quantum {FRAME_BYTES}"
        ),
        class(&ex1, 0, express_rate),
    ];
    let be_prio = if cfg.express2_dscp.is_some() {
        v.push(class(&ex2, 1, express_rate));
        2
    } else {
        1
    };
    v.push(class(&be, be_prio, be_rate));
    v.push(format!(
        "qdisc add dev {dev} parent {ex1} handle {} pfifo limit {}",
        leaf(10),
        cfg.express_queue_pkts
    ));
    if cfg.express2_dscp.is_some() {
        v.push(format!(
            "qdisc add dev {dev} parent {ex2} handle {} pfifo limit {}",
            leaf(20),
            cfg.express_queue_pkts
        ));
    }
    v.push(format!(
        "qdisc add dev {dev} parent {be} handle {} pfifo limit {}",
        leaf(30),
        cfg.best_effort_queue_pkts
    ));
    v.push(format!(
        "filter add dev {dev} parent {h}: protocol ip prio 1 u32 match ip tos {:#04x} 0xfc flowid {ex1}",
        dscp_to_tos(cfg.express_dscp)
    ));
    if let Some(d2) = cfg.express2_dscp {
        v.push(format!(
            "filter add dev {dev} parent {h}: protocol ip prio 2 u32 match ip tos {:#04x} 0xfc flowid {ex2}",
            dscp_to_tos(d2)
        ));
    }
    v.push(format!(
        "filter add dev {dev} parent {h}: protocol arp prio 3 u32 match u32 0 0 flowid {ex1}"
    ));
    v
}

/// Counters of one HTB class (from `tc -s class show`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ClassStats {
    /// Bytes sent.
    pub sent_bytes: u64,
    /// Packets sent.
    pub sent_packets: u64,
    /// Packets dropped (queue full).
    pub dropped: u64,
    /// Times the class was over its limit (had to wait or borrow).
    pub overlimits: u64,
    /// Requeues.
    pub requeues: u64,
    /// Bytes queued now.
    pub backlog_bytes: u64,
    /// Packets queued now.
    pub backlog_packets: u64,
}

/// Queueing statistics of one shaped egress.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct QdiscStats {
    /// Namespace of the device.
    pub netns: String,
    /// The device.
    pub device: String,
    /// The link class (all traffic).
    pub link: ClassStats,
    /// First express sub-lane.
    pub express: ClassStats,
    /// Second express sub-lane, when configured.
    pub express2: Option<ClassStats>,
    /// Best effort.
    pub best_effort: ClassStats,
}

/// Parse `tc -s class show dev X` output into (class id, stats) pairs.
pub fn parse_class_stats(text: &str) -> Result<Vec<(String, ClassStats)>, TestbedError> {
    let perr = |detail: String| TestbedError::Parse {
        what: "tc class statistics".into(),
        detail,
    };
    let mut out: Vec<(String, ClassStats)> = Vec::new();
    for line in text.lines() {
        let toks: Vec<&str> = line.split_whitespace().collect();
        match toks.first().copied() {
            Some("class") => {
                let id = toks
                    .get(2)
                    .ok_or_else(|| perr(format!("class line without id: {line:?}")))?;
                out.push((id.to_string(), ClassStats::default()));
            }
            Some("Sent") => {
                let cur = match out.last_mut() {
                    Some((_, s)) => s,
                    None => return Err(perr(format!("Sent line before a class: {line:?}"))),
                };
                // Sent B bytes P pkt (dropped D, overlimits O requeues R)
                let num = |i: usize| -> Result<u64, TestbedError> {
                    toks.get(i)
                        .map(|t| t.trim_matches(|c| c == '(' || c == ')' || c == ','))
                        .and_then(|t| t.parse().ok())
                        .ok_or_else(|| perr(format!("field {i} of {line:?}")))
                };
                cur.sent_bytes = num(1)?;
                cur.sent_packets = num(3)?;
                cur.dropped = num(6)?;
                cur.overlimits = num(8)?;
                cur.requeues = num(10)?;
            }
            Some("backlog") => {
                let cur = match out.last_mut() {
                    Some((_, s)) => s,
                    None => return Err(perr(format!("backlog line before a class: {line:?}"))),
                };
                let b = toks
                    .get(1)
                    .and_then(|t| parse_size(t))
                    .ok_or_else(|| perr(format!("backlog bytes in {line:?}")))?;
                let p = toks
                    .get(2)
                    .and_then(|t| t.strip_suffix('p'))
                    .and_then(|t| t.parse().ok())
                    .ok_or_else(|| perr(format!("backlog packets in {line:?}")))?;
                cur.backlog_bytes = b;
                cur.backlog_packets = p;
            }
            _ => {}
        }
    }
    Ok(out)
}

/// Parse a `tc` size: `123b`, `12Kb`, `3Mb` (binary multiples), or a
/// plain number.
fn parse_size(t: &str) -> Option<u64> {
    let (num, mult) = if let Some(n) = t.strip_suffix("Mb") {
        (n, 1u64 << 20)
    } else if let Some(n) = t.strip_suffix("Kb") {
        (n, 1 << 10)
    } else if let Some(n) = t.strip_suffix('b') {
        (n, 1)
    } else {
        (t, 1)
    };
    let v: f64 = num.parse().ok()?;
    if !v.is_finite() || v < 0.0 {
        return None;
    }
    Some((v * mult as f64).round() as u64)
}

/// Build `QdiscStats` from parsed classes.
pub(crate) fn stats_from_classes(
    netns: &str,
    device: &str,
    classes: &[(String, ClassStats)],
    with_express2: bool,
) -> Result<QdiscStats, TestbedError> {
    // On a port split by CPU, each class of HTB 1: has its twin in 2:
    // (same minor number); the port's figures are their sums.
    let twin = |id: &str| format!("{REGULAR_HTB}:{}", id.split(':').nth(1).unwrap_or(""));
    let get = |id: &str| {
        let tw = twin(id);
        classes
            .iter()
            .find(|(c, _)| c == id)
            .map(|(_, s)| {
                let mut s = *s;
                if let Some((_, t)) = classes.iter().find(|(c, _)| *c == tw) {
                    s.sent_bytes += t.sent_bytes;
                    s.sent_packets += t.sent_packets;
                    s.dropped += t.dropped;
                    s.overlimits += t.overlimits;
                    s.requeues += t.requeues;
                    s.backlog_bytes += t.backlog_bytes;
                    s.backlog_packets += t.backlog_packets;
                }
                s
            })
            .ok_or_else(|| TestbedError::Parse {
                what: format!("tc classes of {device} in {netns}"),
                detail: format!("class {id} missing (is the device shaped by this testbed?)"),
            })
    };
    Ok(QdiscStats {
        netns: netns.to_string(),
        device: device.to_string(),
        link: get(CLASS_LINK)?,
        express: get(CLASS_EXPRESS)?,
        express2: if with_express2 {
            Some(get(CLASS_EXPRESS2)?)
        } else {
            None
        },
        best_effort: get(CLASS_BEST_EFFORT)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "\
class htb 1:1 root rate 100Mbit ceil 100Mbit burst 1600b cburst 1600b 
 Sent 5000 bytes 10 pkt (dropped 0, overlimits 7 requeues 0) 
 backlog 0b 0p requeues 0
 lended: 0 borrowed: 0 giants: 0
 tokens: 2000 ctokens: 2000

class htb 1:10 parent 1:1 leaf 10: prio 0 rate 10Mbit ceil 100Mbit burst 1600b cburst 1600b 
 Sent 100 bytes 2 pkt (dropped 0, overlimits 0 requeues 0) 
 backlog 0b 0p requeues 0
 lended: 0 borrowed: 0 giants: 0
 tokens: 20000 ctokens: 2000

class htb 1:30 parent 1:1 leaf 30: prio 1 rate 80Mbit ceil 100Mbit burst 1600b cburst 1600b 
 Sent 4900 bytes 8 pkt (dropped 123, overlimits 45 requeues 1) 
 backlog 151Kb 100p requeues 1
 lended: 0 borrowed: 0 giants: 0
 tokens: 2500 ctokens: 2000
";

    #[test]
    fn parses_tc_output() {
        let c = parse_class_stats(SAMPLE).unwrap();
        assert_eq!(c.len(), 3);
        let s = stats_from_classes("ns", "dev", &c, false).unwrap();
        assert_eq!(s.link.sent_bytes, 5000);
        assert_eq!(s.link.overlimits, 7);
        assert_eq!(s.express.sent_packets, 2);
        assert_eq!(s.best_effort.dropped, 123);
        assert_eq!(s.best_effort.requeues, 1);
        assert_eq!(s.best_effort.backlog_bytes, 151 * 1024);
        assert_eq!(s.best_effort.backlog_packets, 100);
        assert!(s.express2.is_none());
        assert!(stats_from_classes("ns", "dev", &c, true).is_err());
    }

    #[test]
    fn sizes() {
        let table = [
            ("0b", Some(0)),
            ("1514b", Some(1514)),
            ("12Kb", Some(12 * 1024)),
            ("2Mb", Some(2 << 20)),
            ("77", Some(77)),
            ("xb", None),
        ];
        for (t, want) in table {
            assert_eq!(parse_size(t), want, "{t}");
        }
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        assert!(parse_class_stats(" Sent 1 bytes").is_err());
        assert!(parse_class_stats("class htb 1:1\n Sent x bytes").is_err());
        assert!(parse_class_stats("class htb 1:1\n backlog 1b").is_err());
        assert_eq!(parse_class_stats("").unwrap().len(), 0);
    }

    #[test]
    fn lines_have_all_classes() {
        let cfg = TestbedConfig::default();
        let l = htb_lines("p0", 1_000_000_000, &cfg);
        let all = l.join("\n");
        for want in [
            "classid 1:10",
            "classid 1:20",
            "classid 1:30",
            "tos 0xb8 0xfc",
            "tos 0xa0 0xfc",
            "pfifo limit 64",
            "pfifo limit 1000",
            "protocol arp",
        ] {
            assert!(all.contains(want), "missing {want} in\n{all}");
        }
        let one = TestbedConfig {
            express2_dscp: None,
            ..cfg
        };
        let all = htb_lines("p0", 1_000_000_000, &one).join("\n");
        assert!(!all.contains("1:20"), "{all}");
        assert!(all.contains("classid 1:30 htb rate 900mbit"), "{all}");
    }

    #[test]
    fn burst_floor() {
        assert_eq!(burst_bytes(1_000_000, 50_000), 2 * FRAME_BYTES);
        assert_eq!(burst_bytes(1_000_000_000, 50_000), 6250);
    }
}
