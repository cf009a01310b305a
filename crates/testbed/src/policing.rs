//! Per-tunnel enforcement: every xlane tunnel gets its own HTB class, sized
//! to its allocation (rate π, burst σ), on the sender's NIC and on every
//! switch port it egresses, plus meters that let a controller demote a
//! tunnel that exceeds its allocation.
//!
//! The kernel has no `act_police`, so a tunnel is policed by shaping: its
//! class has `rate = ceil = π` (it never borrows), a burst of σ and a short
//! `pfifo`. A tunnel that sends more than π queues and then drops in its
//! own class only; the express classes and the other tunnels keep their
//! share.
//!
//! ```text
//! root htb 1:
//! └─ 1:1 link
//!    ├─ 1:10 / 1:20 / 1:30          (see crate::shaping)
//!    └─ 1:<1000+slot> tunnel T      prio = its sub-lane's prio, rate = ceil = π,
//!                                    burst = cburst = σ → pfifo <1000+slot>: (queue_pkts)
//! filter (u32, same pref 1 hash table as the express DSCP filter, node id
//! slot < 0x800, so it is tried first):
//!    IPv4, IHL 5, not a fragment, UDP, payload "XL", tunnel id = T → 1:<1000+slot>
//! ```
//!
//! Offsets: with a 20-byte IP header and the 8-byte UDP header, the xlane
//! magic is at IP offset 28 and the tunnel id (u32, big endian, header
//! bytes 8..12) at IP offset 36.
//!
//! Demotion replaces the tunnel's filter (same handle) so that it steers
//! into best effort (1:30). The tunnel's own class stays, with its counters
//! frozen. This kernel is built without `CONFIG_CLS_U32_PERF` (no u32 hit
//! counters), so the demoted filter also carries a counting tap:
//! `action mirred egress mirror dev xltap`, where `xltap` is an `ifb`
//! device in the same namespace whose root qdisc is `pfifo limit 0` (every
//! mirrored copy is dropped at once). The mirred action's statistics count
//! the tunnel's packets and bytes since demotion. If the tap cannot be
//! created, demotion works without it and those counters read `None`.
//! If the kernel does have u32 hit counters they are reported too.

use crate::config::format_rate;
use crate::error::TestbedError;
use crate::shaping::{ClassStats, CLASS_BEST_EFFORT, CLASS_EXPRESS, CLASS_EXPRESS2, CLASS_LINK};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// IP offset of the xlane magic (20-byte IP header + 8-byte UDP header).
pub const IP_OFFSET_MAGIC: u32 = 28;
/// IP offset of the tunnel id (payload bytes 8..12).
pub const IP_OFFSET_TUNNEL: u32 = 36;
/// The xlane magic `"XL"` as a big-endian u16.
pub const XLANE_MAGIC: u16 = 0x584c;
/// Filter preference shared with the express DSCP filter of
/// [`crate::shaping::htb_lines`] (`prio 1`). Tunnel filters join that
/// filter's u32 hash table with node ids below its automatic id (0x800),
/// and u32 tries nodes in node-id order, so tunnel filters win.
pub const EXPRESS_FILTER_PREF: u32 = 1;
/// Most tunnel slots per testbed (node ids 1..=0x7ff).
pub const MAX_SLOTS: u16 = 0x7ff;
/// Class minor (and qdisc major) of slot `s` is `SLOT_BASE + s`.
const SLOT_BASE: u16 = 0x1000;
/// The counting tap device created in a namespace at the first demotion.
pub const TAP_DEVICE: &str = "xltap";
/// Smallest burst installed: one full-size Ethernet frame (a smaller σ is
/// raised to this, since HTB cannot send a frame larger than its burst
/// without running its tokens negative).
pub const MIN_BURST_BYTES: u32 = 1514;
/// Longest burst accepted, as time at the tunnel rate (`tc` stores the
/// burst as a 32-bit tick count).
pub const MAX_BURST_NS: u128 = 60_000_000_000;
/// HTB quantum of tunnel classes (one full frame: no "quantum is small"
/// warnings at low rates).
const QUANTUM: u32 = 1514;

/// What the controller allocated to one tunnel, and where to enforce it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TunnelPolicy {
    /// Tunnel id (xlane header bytes 8..12).
    pub tunnel: u32,
    /// Express sub-lane: 0 (HTB prio 0, like 1:10) or 1 (prio 1, like
    /// 1:20; needs `express2_dscp`).
    pub sublane: u8,
    /// Rate π in bits per second, counted on Ethernet frames (IP packet +
    /// 14 bytes), as HTB counts them. At most the link rate of every place.
    pub rate_bps: u64,
    /// Burst σ in bytes (raised to [`MIN_BURST_BYTES`] if smaller).
    pub burst_bytes: u32,
    /// `pfifo` length of the tunnel's class, packets (≥ 1).
    pub queue_pkts: u32,
    /// Index of the sending host: its NIC egress is policed.
    pub sender: usize,
    /// Switch ports (= receiver host indices) the tunnel egresses; each is
    /// policed too. May be empty (police at the sender only).
    pub ports: Vec<usize>,
}

/// Why a tunnel policy or a policing request was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    /// Sub-lane other than 0 or 1, or 1 without a second express DSCP.
    #[error("sub-lane {0} does not exist (0, or 1 when express2_dscp is set)")]
    Sublane(u8),
    /// A rate of zero.
    #[error("tunnel {0}: rate_bps must be greater than 0")]
    ZeroRate(u32),
    /// A rate above the link rate of a place.
    #[error("tunnel {tunnel}: rate {rate_bps} bit/s exceeds the link rate {link_bps} bit/s")]
    RateAboveLink {
        /// The tunnel.
        tunnel: u32,
        /// The rate asked for.
        rate_bps: u64,
        /// The smallest link rate among its places.
        link_bps: u64,
    },
    /// A queue of zero packets.
    #[error("queue must be at least 1 packet")]
    ZeroQueue,
    /// The burst takes longer than [`MAX_BURST_NS`] at the rate.
    #[error("tunnel {tunnel}: burst {burst_bytes} B takes more than 60 s at {rate_bps} bit/s")]
    BurstTooLong {
        /// The tunnel.
        tunnel: u32,
        /// The burst asked for.
        burst_bytes: u32,
        /// The rate.
        rate_bps: u64,
    },
    /// A host or port index out of range.
    #[error("host index {index} out of range (testbed has {hosts} hosts)")]
    BadHost {
        /// The index given.
        index: usize,
        /// Number of hosts.
        hosts: usize,
    },
    /// A port listed twice.
    #[error("tunnel {tunnel}: port {port} listed twice")]
    DuplicatePort {
        /// The tunnel.
        tunnel: u32,
        /// The port.
        port: usize,
    },
    /// The sender's own switch port (traffic from a host never egresses it).
    #[error("tunnel {tunnel}: port {port} is the sender's own port")]
    PortIsSender {
        /// The tunnel.
        tunnel: u32,
        /// The port.
        port: usize,
    },
    /// The tunnel already has a policy (remove it first).
    #[error("tunnel {0} already has a policy")]
    AlreadyInstalled(u32),
    /// The tunnel has no policy.
    #[error("tunnel {0} has no policy")]
    NotInstalled(u32),
    /// All [`MAX_SLOTS`] slots are taken.
    #[error("no free tunnel slot (at most {MAX_SLOTS} tunnels)")]
    NoFreeSlot,
    /// The device has no express filter table (not shaped by a testbed).
    #[error("{device} in {netns} has no pref {EXPRESS_FILTER_PREF} u32 filter table (not shaped by this testbed?)")]
    NotShaped {
        /// The namespace.
        netns: String,
        /// The device.
        device: String,
    },
}

impl From<PolicyError> for TestbedError {
    fn from(e: PolicyError) -> Self {
        match e {
            PolicyError::BadHost { index, hosts } => TestbedError::BadHost { index, hosts },
            other => TestbedError::Invalid(other.to_string()),
        }
    }
}

impl TunnelPolicy {
    /// Check the policy for a testbed of `hosts` hosts, with or without a
    /// second express sub-lane, whose links run at `link_bps` (the smallest
    /// rate among the tunnel's places).
    pub fn validate(&self, hosts: usize, express2: bool, link_bps: u64) -> Result<(), PolicyError> {
        let t = self.tunnel;
        if self.sublane > 1 || (self.sublane == 1 && !express2) {
            return Err(PolicyError::Sublane(self.sublane));
        }
        if self.rate_bps == 0 {
            return Err(PolicyError::ZeroRate(t));
        }
        if self.rate_bps > link_bps {
            return Err(PolicyError::RateAboveLink {
                tunnel: t,
                rate_bps: self.rate_bps,
                link_bps,
            });
        }
        if self.queue_pkts == 0 {
            return Err(PolicyError::ZeroQueue);
        }
        let burst_ns =
            self.effective_burst_bytes() as u128 * 8 * 1_000_000_000 / self.rate_bps as u128;
        if burst_ns > MAX_BURST_NS {
            return Err(PolicyError::BurstTooLong {
                tunnel: t,
                burst_bytes: self.burst_bytes,
                rate_bps: self.rate_bps,
            });
        }
        if self.sender >= hosts {
            return Err(PolicyError::BadHost {
                index: self.sender,
                hosts,
            });
        }
        let mut seen = BTreeSet::new();
        for &p in &self.ports {
            if p >= hosts {
                return Err(PolicyError::BadHost { index: p, hosts });
            }
            if p == self.sender {
                return Err(PolicyError::PortIsSender { tunnel: t, port: p });
            }
            if !seen.insert(p) {
                return Err(PolicyError::DuplicatePort { tunnel: t, port: p });
            }
        }
        Ok(())
    }

    /// The burst installed: σ, at least [`MIN_BURST_BYTES`].
    pub fn effective_burst_bytes(&self) -> u32 {
        self.burst_bytes.max(MIN_BURST_BYTES)
    }

    /// HTB prio of the tunnel's class (its sub-lane's prio).
    pub fn htb_prio(&self) -> u32 {
        self.sublane as u32
    }

    /// Where the policy is enforced: the sender's NIC, then the ports.
    pub fn places(&self) -> Vec<Place> {
        std::iter::once(Place::Host(self.sender))
            .chain(self.ports.iter().map(|&p| Place::SwitchPort(p)))
            .collect()
    }
}

/// A shaped egress where a tunnel is policed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Place {
    /// Host `i`'s NIC (egress towards the switch).
    Host(usize),
    /// Switch port `i` (egress towards host `i`).
    SwitchPort(usize),
}

/// The slot of a tunnel: one number that names its HTB class
/// (`1:<1000+slot>` in hex), its pfifo (`<1000+slot>:`) and its u32 filter
/// node (`<htid>::<slot>`) on every place. `1..=MAX_SLOTS`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TunnelSlot(u16);

impl TunnelSlot {
    /// The slot `n`, if `1..=MAX_SLOTS`.
    pub fn new(n: u16) -> Option<TunnelSlot> {
        (1..=MAX_SLOTS).contains(&n).then_some(TunnelSlot(n))
    }

    /// The slot tried first for `tunnel`: `tunnel mod 0x7ff + 1`
    /// (small tunnel ids read back in `tc` output: tunnel 4 → 1:1005).
    pub fn preferred(tunnel: u32) -> TunnelSlot {
        TunnelSlot((tunnel % MAX_SLOTS as u32) as u16 + 1)
    }

    /// The slot number.
    pub fn get(self) -> u16 {
        self.0
    }

    /// The next slot, wrapping from `MAX_SLOTS` to 1.
    fn next(self) -> TunnelSlot {
        TunnelSlot(self.0 % MAX_SLOTS + 1)
    }

    /// HTB class id, e.g. `1:1005`.
    pub fn class_id(self) -> String {
        format!("1:{:x}", SLOT_BASE + self.0)
    }

    /// Handle of the class's pfifo, e.g. `1005:`.
    pub fn qdisc_handle(self) -> String {
        format!("{:x}:", SLOT_BASE + self.0)
    }

    /// u32 filter handle in hash table `htid` (e.g. `800`): `800::5`.
    pub fn filter_handle(self, htid: &str) -> String {
        format!("{htid}::{:x}", self.0)
    }
}

/// The first slot, starting at [`TunnelSlot::preferred`] and probing
/// upwards (wrapping), for which `taken` is false.
pub fn allocate_slot(tunnel: u32, taken: impl Fn(TunnelSlot) -> bool) -> Option<TunnelSlot> {
    let mut s = TunnelSlot::preferred(tunnel);
    for _ in 0..MAX_SLOTS {
        if !taken(s) {
            return Some(s);
        }
        s = s.next();
    }
    None
}

/// The u32 selector of `tunnel`'s packets: IPv4 with IHL 5, not a
/// non-first fragment, UDP, payload magic `XL`, tunnel id.
pub fn tunnel_match(tunnel: u32) -> String {
    format!(
        "match u8 0x45 0xff at 0 match u16 0x0000 0x1fff at 6 match u8 0x11 0xff at 9 \
         match u16 {XLANE_MAGIC:#06x} 0xffff at {IP_OFFSET_MAGIC} \
         match u32 {tunnel:#010x} 0xffffffff at {IP_OFFSET_TUNNEL}"
    )
}

/// The `tc -batch` lines that install `p` on `dev`, whose pref-1 u32 hash
/// table is `htid`: class, pfifo, filter.
pub fn install_lines(dev: &str, htid: &str, slot: TunnelSlot, p: &TunnelPolicy) -> Vec<String> {
    let cid = slot.class_id();
    let rate = format_rate(p.rate_bps);
    let burst = p.effective_burst_bytes();
    vec![
        format!(
            "class add dev {dev} parent {CLASS_LINK} classid {cid} htb rate {rate} ceil {rate} \
             burst {burst}b cburst {burst}b prio {} quantum {QUANTUM}",
            p.htb_prio()
        ),
        format!(
            "qdisc add dev {dev} parent {cid} handle {} pfifo limit {}",
            slot.qdisc_handle(),
            p.queue_pkts
        ),
        format!(
            "filter add dev {dev} parent 1: protocol ip prio {EXPRESS_FILTER_PREF} handle {} u32 {} flowid {cid}",
            slot.filter_handle(htid),
            tunnel_match(p.tunnel)
        ),
    ]
}

/// Where a tunnel's filter steers its packets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Steer<'a> {
    /// Into the tunnel's own class (installed / promoted).
    Own,
    /// Into best effort (demoted), optionally mirroring every packet to
    /// the counting tap device named here.
    BestEffort {
        /// The tap device, if there is one.
        tap: Option<&'a str>,
    },
}

/// The `tc` line that re-points `tunnel`'s filter (`filter replace`, same
/// handle; the kernel keeps the selector).
pub fn steer_line(dev: &str, htid: &str, slot: TunnelSlot, tunnel: u32, to: Steer<'_>) -> String {
    let mut l = format!(
        "filter replace dev {dev} parent 1: protocol ip prio {EXPRESS_FILTER_PREF} handle {} u32 {} flowid ",
        slot.filter_handle(htid),
        tunnel_match(tunnel)
    );
    match to {
        Steer::Own => l.push_str(&slot.class_id()),
        Steer::BestEffort { tap } => {
            l.push_str(CLASS_BEST_EFFORT);
            if let Some(tap) = tap {
                l.push_str(&format!(" action mirred egress mirror dev {tap}"));
            }
        }
    }
    l
}

/// The `tc` lines that remove a tunnel from `dev`: the filter first (HTB
/// refuses to delete a class a filter points at), then the class (its
/// pfifo goes with it).
pub fn remove_lines(dev: &str, htid: &str, slot: TunnelSlot) -> Vec<String> {
    vec![
        format!(
            "filter del dev {dev} parent 1: protocol ip prio {EXPRESS_FILTER_PREF} handle {} u32",
            slot.filter_handle(htid)
        ),
        format!("class del dev {dev} classid {}", slot.class_id()),
    ]
}

/// The `tc` line that sets the pfifo length of express sub-lane `sublane`
/// (0 → `10:` under 1:10, 1 → `20:` under 1:20) on `dev`.
pub fn express_queue_line(dev: &str, sublane: u8, pkts: u32) -> Result<String, PolicyError> {
    let (class, handle) = match sublane {
        0 => (CLASS_EXPRESS, "10:"),
        1 => (CLASS_EXPRESS2, "20:"),
        s => return Err(PolicyError::Sublane(s)),
    };
    if pkts == 0 {
        return Err(PolicyError::ZeroQueue);
    }
    Ok(format!(
        "qdisc change dev {dev} parent {class} handle {handle} pfifo limit {pkts}"
    ))
}

/// `ip -batch` lines that create the counting tap in a namespace.
pub fn tap_ip_lines() -> Vec<String> {
    vec![
        format!("link add name {TAP_DEVICE} type ifb"),
        format!("link set dev {TAP_DEVICE} up"),
    ]
}

/// `tc -batch` lines that make the tap drop everything it is given.
pub fn tap_tc_lines() -> Vec<String> {
    vec![format!("qdisc replace dev {TAP_DEVICE} root pfifo limit 0")]
}

/// The root hash table id (e.g. `800`) of the `protocol ip pref <pref>`
/// u32 filter in `tc filter show dev X` output.
pub fn parse_root_htid(filter_show: &str, pref: u32) -> Option<String> {
    let want = format!("pref {pref} u32");
    filter_show
        .lines()
        .filter(|l| l.starts_with("filter ") && l.contains("protocol ip ") && l.contains(&want))
        .find_map(|l| {
            let toks: Vec<&str> = l.split_whitespace().collect();
            let i = toks.iter().position(|t| *t == "fh")?;
            let fh = toks.get(i + 1)?;
            let is_table = toks.get(i + 2) == Some(&"ht") && toks.get(i + 3) == Some(&"divisor");
            let htid = fh.strip_suffix(':')?;
            (is_table && !htid.is_empty() && !htid.contains(':')).then(|| htid.to_string())
        })
}

/// Ids in use on one device, from `tc class show`, `tc qdisc show` and
/// `tc filter show` output.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UsedIds {
    /// Class ids (`1:10`).
    pub classes: BTreeSet<String>,
    /// Qdisc handles (`10:`).
    pub qdiscs: BTreeSet<String>,
    /// Filter handles (`800::800`).
    pub filters: BTreeSet<String>,
}

impl UsedIds {
    /// Parse the three listings of one device.
    pub fn parse(class_show: &str, qdisc_show: &str, filter_show: &str) -> UsedIds {
        let third = |text: &str, kind: &str| -> BTreeSet<String> {
            text.lines()
                .filter(|l| l.starts_with(kind))
                .filter_map(|l| l.split_whitespace().nth(2).map(str::to_string))
                .collect()
        };
        let filters = filter_show
            .lines()
            .filter(|l| l.starts_with("filter "))
            .filter_map(|l| {
                let mut it = l.split_whitespace().skip_while(|t| *t != "fh");
                it.next();
                it.next().map(str::to_string)
            })
            .collect();
        UsedIds {
            classes: third(class_show, "class "),
            qdiscs: third(qdisc_show, "qdisc "),
            filters,
        }
    }

    /// True if any id of `slot` (with filter table `htid`) is in use.
    pub fn uses(&self, slot: TunnelSlot, htid: &str) -> bool {
        self.classes.contains(&slot.class_id())
            || self.qdiscs.contains(&slot.qdisc_handle())
            || self.filters.contains(&slot.filter_handle(htid))
    }
}

/// Packets and bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counts {
    /// Packets.
    pub packets: u64,
    /// Bytes (Ethernet frames).
    pub bytes: u64,
}

/// Counters of one u32 filter in `tc -s filter show dev X` output.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FilterCounters {
    /// Packets that matched every key (`rule hit H success S` → S); only
    /// with `CONFIG_CLS_U32_PERF`.
    pub hits: Option<u64>,
    /// Statistics of the filter's (first) action, e.g. the counting tap.
    pub action: Option<Counts>,
}

/// The counters of the filter with handle `handle` (e.g. `800::5`); `None`
/// if no such filter is listed.
pub fn parse_filter_counters(filter_stats: &str, handle: &str) -> Option<FilterCounters> {
    let mut lines = filter_stats.lines();
    lines.find(|l| {
        l.starts_with("filter ") && {
            let mut it = l.split_whitespace().skip_while(|t| *t != "fh");
            it.next();
            it.next() == Some(handle)
        }
    })?;
    let mut c = FilterCounters::default();
    for l in lines.take_while(|l| !l.starts_with("filter ")) {
        let toks: Vec<&str> = l
            .split_whitespace()
            .map(|t| t.trim_matches(|c| c == '(' || c == ')' || c == ','))
            .collect();
        if let Some(i) = toks.windows(2).position(|w| w == ["rule", "hit"]) {
            if toks.get(i + 3) == Some(&"success") {
                c.hits = c.hits.or(toks.get(i + 4).and_then(|t| t.parse().ok()));
            }
        }
        if toks.first() == Some(&"Sent") && c.action.is_none() {
            if let (Some(b), Some(p)) = (
                toks.get(1).and_then(|t| t.parse().ok()),
                toks.get(3).and_then(|t| t.parse().ok()),
            ) {
                c.action = Some(Counts {
                    bytes: b,
                    packets: p,
                });
            }
        }
    }
    Some(c)
}

/// One installed policy, as the testbed knows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InstalledTunnel {
    /// The policy.
    pub policy: TunnelPolicy,
    /// Its HTB class id on every place.
    pub class_id: String,
    /// Demoted on every place.
    pub demoted: bool,
}

/// Counters of one tunnel at one place.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TunnelMeter {
    /// The tunnel.
    pub tunnel: u32,
    /// Its sub-lane.
    pub sublane: u8,
    /// Where.
    pub place: Place,
    /// Namespace of the device.
    pub netns: String,
    /// The device.
    pub device: String,
    /// The tunnel's HTB class.
    pub class_id: String,
    /// Its rate π, bit/s.
    pub rate_bps: u64,
    /// Counters of the tunnel's class: sent, dropped (queue full),
    /// overlimits (times it ran out of tokens), backlog. Frozen while
    /// demoted.
    pub class: ClassStats,
    /// The filter steers the tunnel into best effort here.
    pub demoted: bool,
    /// Packets and bytes steered into best effort since the last demotion
    /// (the counting tap); `None` when not demoted or without a tap.
    pub demoted_traffic: Option<Counts>,
    /// Packets the filter matched since it was installed (u32 hit
    /// counters); `None` on kernels without `CONFIG_CLS_U32_PERF` (this
    /// testbed's kernel).
    pub filter_hits: Option<u64>,
}

#[derive(Debug, Clone)]
struct InstalledPlace {
    place: Place,
    netns: String,
    device: String,
    htid: String,
    demoted: bool,
    tapped: bool,
}

#[derive(Debug, Clone)]
struct Installed {
    policy: TunnelPolicy,
    slot: TunnelSlot,
    places: Vec<InstalledPlace>,
}

/// The policies a `Testbed` value installed (in memory: a testbed from
/// [`Testbed::attach`](crate::Testbed::attach) does not see another process's policies).
#[derive(Debug, Default)]
pub(crate) struct TunnelRegistry {
    tunnels: BTreeMap<u32, Installed>,
}

mod install;

#[cfg(test)]
mod tests;
