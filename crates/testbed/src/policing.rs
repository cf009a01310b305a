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
use crate::exec::{run, run_batch};
use crate::shaping::{
    parse_class_stats, ClassStats, CLASS_BEST_EFFORT, CLASS_EXPRESS, CLASS_EXPRESS2, CLASS_LINK,
};
use crate::testbed::Testbed;
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
/// [`Testbed::attach`] does not see another process's policies).
#[derive(Debug, Default)]
pub(crate) struct TunnelRegistry {
    tunnels: BTreeMap<u32, Installed>,
}

fn tc_show(ns: &str, what: &str, dev: &str, stats: bool) -> Result<String, TestbedError> {
    let mut args = vec!["-n", ns];
    if stats {
        args.push("-s");
    }
    args.extend([what, "show", "dev", dev]);
    if what == "filter" {
        // The tunnels' filters hang on HTB 1:, the root or (on a port
        // split by CPU) the lane core's queue.
        args.extend(["parent", "1:"]);
    }
    Ok(run("tc", &args)?)
}

/// Create the counting tap in `ns` if needed; false if that failed.
fn ensure_tap(ns: &str) -> bool {
    let exists = run("ip", &["-n", ns, "link", "show", "dev", TAP_DEVICE]).is_ok();
    if !exists && run_batch("ip", Some(ns), &tap_ip_lines(), false).is_err() {
        return false;
    }
    run_batch("tc", Some(ns), &tap_tc_lines(), false).is_ok()
}

impl Testbed {
    fn registry(&self) -> std::sync::MutexGuard<'_, TunnelRegistry> {
        // The registry is only changed after the tc commands of a step
        // finished, so it stays consistent even if a holder panicked.
        self.tunnels.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Namespace, device and link rate of a place.
    fn place_device(&self, place: Place) -> Result<(String, String, u64), TestbedError> {
        match place {
            Place::Host(i) => {
                let h = self.host(i)?;
                Ok((
                    h.netns.clone(),
                    h.iface.clone(),
                    self.config().effective_host_rate_bps(),
                ))
            }
            Place::SwitchPort(i) => {
                let dev = self.switch_port(i).ok_or(TestbedError::BadHost {
                    index: i,
                    hosts: self.hosts().len(),
                })?;
                Ok((
                    self.switch_netns().to_string(),
                    dev.to_string(),
                    self.config().link_rate_bps,
                ))
            }
        }
    }

    /// Police tunnel `p.tunnel`: on the sender's NIC and on each listed
    /// switch port, add its own HTB class (prio of its sub-lane,
    /// `rate = ceil = π`, burst σ), a pfifo of `queue_pkts` and a u32 filter
    /// tried before the DSCP filters. The slot (class ids) is
    /// `TunnelSlot::preferred(tunnel)` or the next one free on every place.
    /// On error nothing stays installed.
    pub fn install_tunnel_policy(&self, p: &TunnelPolicy) -> Result<(), TestbedError> {
        let places = p.places();
        let mut devs = Vec::with_capacity(places.len());
        // Validate the indices first, so BadHost is reported as such.
        let hosts = self.hosts().len();
        for &pl in &places {
            let (Place::Host(i) | Place::SwitchPort(i)) = pl;
            if i >= hosts {
                return Err(PolicyError::BadHost { index: i, hosts }.into());
            }
        }
        for &pl in &places {
            devs.push(self.place_device(pl)?);
        }
        let link_bps = devs.iter().map(|d| d.2).min().unwrap_or(0);
        p.validate(hosts, self.config().express2_dscp.is_some(), link_bps)?;
        let mut reg = self.registry();
        if reg.tunnels.contains_key(&p.tunnel) {
            return Err(PolicyError::AlreadyInstalled(p.tunnel).into());
        }
        // What exists on every place (also ids made by others).
        let mut found = Vec::with_capacity(devs.len());
        for (ns, dev, _) in &devs {
            let filters = tc_show(ns, "filter", dev, false)?;
            let htid = parse_root_htid(&filters, EXPRESS_FILTER_PREF).ok_or_else(|| {
                PolicyError::NotShaped {
                    netns: ns.clone(),
                    device: dev.clone(),
                }
            })?;
            let used = UsedIds::parse(
                &tc_show(ns, "class", dev, false)?,
                &tc_show(ns, "qdisc", dev, false)?,
                &filters,
            );
            found.push((htid, used));
        }
        let mine: BTreeSet<TunnelSlot> = reg.tunnels.values().map(|t| t.slot).collect();
        let slot = allocate_slot(p.tunnel, |s| {
            mine.contains(&s) || found.iter().any(|(htid, used)| used.uses(s, htid))
        })
        .ok_or(PolicyError::NoFreeSlot)?;
        let mut done: Vec<InstalledPlace> = Vec::with_capacity(places.len());
        for ((&place, (ns, dev, _)), (htid, _)) in places.iter().zip(&devs).zip(&found) {
            let r = run_batch("tc", Some(ns), &install_lines(dev, htid, slot, p), false);
            let ip = InstalledPlace {
                place,
                netns: ns.clone(),
                device: dev.clone(),
                htid: htid.clone(),
                demoted: false,
                tapped: false,
            };
            if let Err(e) = r {
                // The slot's ids were free here, so whatever exists now is ours.
                done.push(ip);
                for d in &done {
                    let _ = run_batch(
                        "tc",
                        Some(&d.netns),
                        &remove_lines(&d.device, &d.htid, slot),
                        true,
                    );
                }
                return Err(e.into());
            }
            done.push(ip);
        }
        reg.tunnels.insert(
            p.tunnel,
            Installed {
                policy: p.clone(),
                slot,
                places: done,
            },
        );
        Ok(())
    }

    /// Steer `tunnel`'s packets into best effort (1:30) on every place it
    /// is policed, keeping its class (and counters). Each demoted filter
    /// mirrors to a counting tap (see the module docs) when one can be
    /// made. Demoting a demoted tunnel does nothing.
    pub fn demote_tunnel(&self, tunnel: u32) -> Result<(), TestbedError> {
        let mut reg = self.registry();
        let t = reg
            .tunnels
            .get_mut(&tunnel)
            .ok_or(PolicyError::NotInstalled(tunnel))?;
        let slot = t.slot;
        let mut taps: BTreeMap<String, bool> = BTreeMap::new();
        for pl in t.places.iter_mut().filter(|pl| !pl.demoted) {
            let tap_ok = *taps
                .entry(pl.netns.clone())
                .or_insert_with(|| ensure_tap(&pl.netns));
            let line = |tap| {
                steer_line(
                    &pl.device,
                    &pl.htid,
                    slot,
                    tunnel,
                    Steer::BestEffort { tap },
                )
            };
            let mut tapped = false;
            if tap_ok && run_batch("tc", Some(&pl.netns), &[line(Some(TAP_DEVICE))], false).is_ok()
            {
                tapped = true;
            } else {
                run_batch("tc", Some(&pl.netns), &[line(None)], false)?;
            }
            pl.demoted = true;
            pl.tapped = tapped;
        }
        Ok(())
    }

    /// Undo [`Testbed::demote_tunnel`]: steer the tunnel into its own class
    /// again (the tap counter is dropped).
    pub fn promote_tunnel(&self, tunnel: u32) -> Result<(), TestbedError> {
        let mut reg = self.registry();
        let t = reg
            .tunnels
            .get_mut(&tunnel)
            .ok_or(PolicyError::NotInstalled(tunnel))?;
        let slot = t.slot;
        for pl in t.places.iter_mut().filter(|pl| pl.demoted) {
            let line = steer_line(&pl.device, &pl.htid, slot, tunnel, Steer::Own);
            run_batch("tc", Some(&pl.netns), &[line], false)?;
            pl.demoted = false;
            pl.tapped = false;
        }
        Ok(())
    }

    /// Remove `tunnel`'s filters and classes everywhere. It is forgotten
    /// even if some `tc` command failed (the first error is returned).
    pub fn remove_tunnel_policy(&self, tunnel: u32) -> Result<(), TestbedError> {
        let t = self
            .registry()
            .tunnels
            .remove(&tunnel)
            .ok_or(PolicyError::NotInstalled(tunnel))?;
        let mut first = None;
        for pl in &t.places {
            let lines = remove_lines(&pl.device, &pl.htid, t.slot);
            if let Err(e) = run_batch("tc", Some(&pl.netns), &lines, true) {
                first.get_or_insert(e);
            }
        }
        match first {
            Some(e) => Err(e.into()),
            None => Ok(()),
        }
    }

    /// The installed policies, by tunnel id.
    pub fn tunnel_policies(&self) -> Vec<InstalledTunnel> {
        self.registry()
            .tunnels
            .values()
            .map(|t| InstalledTunnel {
                policy: t.policy.clone(),
                class_id: t.slot.class_id(),
                demoted: t.places.iter().all(|p| p.demoted),
            })
            .collect()
    }

    /// Counters of every policed tunnel at every place (by tunnel, then
    /// in the order of [`TunnelPolicy::places`]). Two `tc` calls per
    /// device involved.
    pub fn tunnel_meters(&self) -> Result<Vec<TunnelMeter>, TestbedError> {
        let reg = self.registry();
        type Dev = (String, String);
        let mut classes: BTreeMap<Dev, Vec<(String, ClassStats)>> = BTreeMap::new();
        let mut filters: BTreeMap<Dev, String> = BTreeMap::new();
        let mut out = Vec::new();
        for t in reg.tunnels.values() {
            for pl in &t.places {
                let key = (pl.netns.clone(), pl.device.clone());
                if !classes.contains_key(&key) {
                    let text = tc_show(&pl.netns, "class", &pl.device, true)?;
                    classes.insert(key.clone(), parse_class_stats(&text)?);
                    filters.insert(key.clone(), tc_show(&pl.netns, "filter", &pl.device, true)?);
                }
                let class_id = t.slot.class_id();
                let class = classes
                    .get(&key)
                    .and_then(|c| c.iter().find(|(id, _)| *id == class_id))
                    .map(|(_, s)| *s)
                    .ok_or_else(|| TestbedError::Parse {
                        what: format!("tc classes of {} in {}", pl.device, pl.netns),
                        detail: format!("class {class_id} of tunnel {} missing", t.policy.tunnel),
                    })?;
                let fc = filters
                    .get(&key)
                    .and_then(|f| parse_filter_counters(f, &t.slot.filter_handle(&pl.htid)))
                    .unwrap_or_default();
                out.push(TunnelMeter {
                    tunnel: t.policy.tunnel,
                    sublane: t.policy.sublane,
                    place: pl.place,
                    netns: pl.netns.clone(),
                    device: pl.device.clone(),
                    class_id,
                    rate_bps: t.policy.rate_bps,
                    class,
                    demoted: pl.demoted,
                    demoted_traffic: if pl.demoted && pl.tapped {
                        fc.action
                    } else {
                        None
                    },
                    filter_hits: fc.hits,
                });
            }
        }
        Ok(out)
    }

    /// Set the pfifo length of express sub-lane `sublane` (0 or 1) on
    /// switch port `port` (egress towards host `port`).
    pub fn set_express_queue(
        &self,
        port: usize,
        sublane: u8,
        pkts: u32,
    ) -> Result<(), TestbedError> {
        self.set_express_queue_at(Place::SwitchPort(port), sublane, pkts)
    }

    /// Set the pfifo length of express sub-lane `sublane` at any place
    /// (switch port or host NIC).
    pub fn set_express_queue_at(
        &self,
        place: Place,
        sublane: u8,
        pkts: u32,
    ) -> Result<(), TestbedError> {
        if sublane == 1 && self.config().express2_dscp.is_none() {
            return Err(PolicyError::Sublane(1).into());
        }
        let (ns, dev, _) = self.place_device(place)?;
        let line = express_queue_line(&dev, sublane, pkts)?;
        run_batch("tc", Some(&ns), &[line], false)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::TestbedConfig;
    use crate::shaping::htb_lines;

    fn policy() -> TunnelPolicy {
        TunnelPolicy {
            tunnel: 4,
            sublane: 0,
            rate_bps: 2_000_000,
            burst_bytes: 4000,
            queue_pkts: 16,
            sender: 0,
            ports: vec![1, 2],
        }
    }

    #[test]
    fn slots_name_everything() {
        let table: &[(u32, u16, &str, &str, &str)] = &[
            (0, 1, "1:1001", "1001:", "800::1"),
            (4, 5, "1:1005", "1005:", "800::5"),
            (2046, 0x7ff, "1:17ff", "17ff:", "800::7ff"),
            (2047, 1, "1:1001", "1001:", "800::1"),
            (u32::MAX, (u32::MAX % 2047) as u16 + 1, "", "", ""),
        ];
        for &(tunnel, slot, cid, qh, fh) in table {
            let s = TunnelSlot::preferred(tunnel);
            assert_eq!(s.get(), slot, "tunnel {tunnel}");
            assert!(TunnelSlot::new(s.get()).is_some());
            if !cid.is_empty() {
                assert_eq!(s.class_id(), cid);
                assert_eq!(s.qdisc_handle(), qh);
                assert_eq!(s.filter_handle("800"), fh);
            }
        }
        assert!(TunnelSlot::new(0).is_none());
        assert!(TunnelSlot::new(0x800).is_none());
        // Never the ids of the shaping classes, and node ids stay below
        // the DSCP filter's automatic 0x800.
        for n in 1..=MAX_SLOTS {
            let s = TunnelSlot(n);
            for fixed in ["1:1", "1:10", "1:20", "1:30"] {
                assert_ne!(s.class_id(), fixed);
            }
            for fixed in ["10:", "20:", "30:", "1:"] {
                assert_ne!(s.qdisc_handle(), fixed);
            }
            assert_ne!(s.filter_handle("800"), "800::800");
        }
    }

    #[test]
    fn allocation_probes_and_wraps() {
        let table: &[(u32, &[u16], Option<u16>)] = &[
            (4, &[], Some(5)),
            (4, &[5], Some(6)),
            (4, &[5, 6, 7], Some(8)),
            (2046, &[0x7ff], Some(1)),
            (2046, &[0x7ff, 1, 2], Some(3)),
        ];
        for &(tunnel, taken, want) in table {
            let got = allocate_slot(tunnel, |s| taken.contains(&s.get())).map(TunnelSlot::get);
            assert_eq!(got, want, "tunnel {tunnel} taken {taken:?}");
        }
        assert_eq!(allocate_slot(9, |_| true), None);
    }

    #[test]
    fn install_lines_are_exact() {
        let p = policy();
        let l = install_lines("xl1-h0", "800", TunnelSlot(5), &p);
        assert_eq!(
            l,
            vec![
                "class add dev xl1-h0 parent 1:1 classid 1:1005 htb rate 2mbit ceil 2mbit \
                 burst 4000b cburst 4000b prio 0 quantum 1514"
                    .to_string(),
                "qdisc add dev xl1-h0 parent 1:1005 handle 1005: pfifo limit 16".to_string(),
                "filter add dev xl1-h0 parent 1: protocol ip prio 1 handle 800::5 u32 \
                 match u8 0x45 0xff at 0 match u16 0x0000 0x1fff at 6 match u8 0x11 0xff at 9 \
                 match u16 0x584c 0xffff at 28 match u32 0x00000004 0xffffffff at 36 flowid 1:1005"
                    .to_string(),
            ]
        );
        let q = TunnelPolicy {
            sublane: 1,
            rate_bps: 1_500_001,
            burst_bytes: 100,
            tunnel: 0xdead_beef,
            ..policy()
        };
        let all = install_lines("p1", "801", TunnelSlot(0x7ff), &q).join("\n");
        for want in [
            "rate 1500001bit ceil 1500001bit",
            "burst 1514b cburst 1514b prio 1",
            "classid 1:17ff",
            "handle 801::7ff",
            "match u32 0xdeadbeef 0xffffffff at 36",
            "flowid 1:17ff",
        ] {
            assert!(all.contains(want), "missing {want} in\n{all}");
        }
    }

    #[test]
    fn steer_and_remove_lines() {
        let s = TunnelSlot(5);
        let m = tunnel_match(4);
        let table: &[(Steer<'_>, String)] = &[
            (
                Steer::Own,
                format!("filter replace dev d parent 1: protocol ip prio 1 handle 800::5 u32 {m} flowid 1:1005"),
            ),
            (
                Steer::BestEffort { tap: None },
                format!("filter replace dev d parent 1: protocol ip prio 1 handle 800::5 u32 {m} flowid 1:30"),
            ),
            (
                Steer::BestEffort { tap: Some("xltap") },
                format!(
                    "filter replace dev d parent 1: protocol ip prio 1 handle 800::5 u32 {m} flowid 1:30 \
                     action mirred egress mirror dev xltap"
                ),
            ),
        ];
        for (to, want) in table {
            assert_eq!(&steer_line("d", "800", s, 4, *to), want);
        }
        assert_eq!(
            remove_lines("d", "800", s),
            vec![
                "filter del dev d parent 1: protocol ip prio 1 handle 800::5 u32".to_string(),
                "class del dev d classid 1:1005".to_string(),
            ]
        );
    }

    #[test]
    fn express_queue_lines() {
        let table: &[(u8, u32, Result<&str, PolicyError>)] = &[
            (
                0,
                7,
                Ok("qdisc change dev p0 parent 1:10 handle 10: pfifo limit 7"),
            ),
            (
                1,
                300,
                Ok("qdisc change dev p0 parent 1:20 handle 20: pfifo limit 300"),
            ),
            (2, 7, Err(PolicyError::Sublane(2))),
            (0, 0, Err(PolicyError::ZeroQueue)),
        ];
        for (sub, pkts, want) in table {
            assert_eq!(
                express_queue_line("p0", *sub, *pkts),
                want.clone().map(str::to_string),
                "{sub} {pkts}"
            );
        }
    }

    #[test]
    fn validation() {
        let ok = policy();
        let link = 1_000_000_000;
        assert_eq!(ok.validate(4, true, link), Ok(()));
        let table: Vec<(TunnelPolicy, bool, PolicyError)> = vec![
            (
                TunnelPolicy {
                    sublane: 1,
                    ..ok.clone()
                },
                false,
                PolicyError::Sublane(1),
            ),
            (
                TunnelPolicy {
                    sublane: 2,
                    ..ok.clone()
                },
                true,
                PolicyError::Sublane(2),
            ),
            (
                TunnelPolicy {
                    rate_bps: 0,
                    ..ok.clone()
                },
                true,
                PolicyError::ZeroRate(4),
            ),
            (
                TunnelPolicy {
                    rate_bps: link + 1,
                    ..ok.clone()
                },
                true,
                PolicyError::RateAboveLink {
                    tunnel: 4,
                    rate_bps: link + 1,
                    link_bps: link,
                },
            ),
            (
                TunnelPolicy {
                    queue_pkts: 0,
                    ..ok.clone()
                },
                true,
                PolicyError::ZeroQueue,
            ),
            (
                TunnelPolicy {
                    rate_bps: 8,
                    burst_bytes: 100,
                    ..ok.clone()
                },
                true,
                PolicyError::BurstTooLong {
                    tunnel: 4,
                    burst_bytes: 100,
                    rate_bps: 8,
                },
            ),
            (
                TunnelPolicy {
                    sender: 4,
                    ..ok.clone()
                },
                true,
                PolicyError::BadHost { index: 4, hosts: 4 },
            ),
            (
                TunnelPolicy {
                    ports: vec![1, 9],
                    ..ok.clone()
                },
                true,
                PolicyError::BadHost { index: 9, hosts: 4 },
            ),
            (
                TunnelPolicy {
                    ports: vec![0],
                    ..ok.clone()
                },
                true,
                PolicyError::PortIsSender { tunnel: 4, port: 0 },
            ),
            (
                TunnelPolicy {
                    ports: vec![2, 1, 2],
                    ..ok.clone()
                },
                true,
                PolicyError::DuplicatePort { tunnel: 4, port: 2 },
            ),
        ];
        for (p, e2, want) in table {
            assert_eq!(p.validate(4, e2, link), Err(want.clone()), "{p:?}");
        }
        let sender_only = TunnelPolicy {
            ports: vec![],
            ..ok.clone()
        };
        assert_eq!(sender_only.validate(4, true, link), Ok(()));
        assert_eq!(sender_only.places(), vec![Place::Host(0)]);
        assert_eq!(
            ok.places(),
            vec![Place::Host(0), Place::SwitchPort(1), Place::SwitchPort(2)]
        );
        // 8 kbit/s with 60 kB: exactly 60 s is still fine.
        let slow = TunnelPolicy {
            rate_bps: 8_000,
            burst_bytes: 60_000,
            ..ok
        };
        assert_eq!(slow.validate(4, true, link), Ok(()));
    }

    /// Output of `tc filter show` on a shaped device with one tunnel.
    const FILTERS: &str = "\
filter parent 1: protocol ip pref 1 u32 chain 0 
filter parent 1: protocol ip pref 1 u32 chain 0 fh 800: ht divisor 1 
filter parent 1: protocol ip pref 1 u32 chain 0 fh 800::5 order 5 key ht 800 bkt 0 *flowid 1:30 not_in_hw 
  match 45000000/ff000000 at 0
  match 00000000/00001fff at 4
  match 00110000/00ff0000 at 8
  match 584c0000/ffff0000 at 28
  match 00000007/ffffffff at 36
\taction order 1: mirred (Egress Mirror to device xltap) pipe
\tindex 1 ref 1 bind 1 installed 0 sec used 0 sec firstused 0 sec
\tAction statistics:
\tSent 121000 bytes 500 pkt (dropped 0, overlimits 500 requeues 0) 
\tbacklog 0b 0p requeues 0

filter parent 1: protocol ip pref 1 u32 chain 0 fh 800::800 order 2048 key ht 800 bkt 0 *flowid 1:10 not_in_hw 
  match 00b80000/00fc0000 at 0
filter parent 1: protocol ip pref 2 u32 chain 0 
filter parent 1: protocol ip pref 2 u32 chain 0 fh 801: ht divisor 1 
filter parent 1: protocol ip pref 2 u32 chain 0 fh 801::800 order 2048 key ht 801 bkt 0 *flowid 1:20 not_in_hw 
  match 00a00000/00fc0000 at 0
filter parent 1: protocol arp pref 3 u32 chain 0 
filter parent 1: protocol arp pref 3 u32 chain 0 fh 802: ht divisor 1 
filter parent 1: protocol arp pref 3 u32 chain 0 fh 802::800 order 2048 key ht 802 bkt 0 *flowid 1:10 not_in_hw 
  match 00000000/00000000 at 0
";

    #[test]
    fn parses_htids() {
        let table: &[(&str, u32, Option<&str>)] = &[
            (FILTERS, 1, Some("800")),
            (FILTERS, 2, Some("801")),
            (FILTERS, 3, None), // protocol arp
            (FILTERS, 9, None),
            ("", 1, None),
            (
                "filter parent 1: protocol ip pref 1 u32 chain 0 fh",
                1,
                None,
            ),
            (
                "filter parent 1: protocol ip pref 1 u32 chain 0 fh : ht divisor 1",
                1,
                None,
            ),
        ];
        for &(text, pref, want) in table {
            assert_eq!(parse_root_htid(text, pref).as_deref(), want, "pref {pref}");
        }
    }

    #[test]
    fn parses_filter_counters() {
        let c = parse_filter_counters(FILTERS, "800::5").unwrap();
        assert_eq!(c.hits, None);
        assert_eq!(
            c.action,
            Some(Counts {
                packets: 500,
                bytes: 121000
            })
        );
        let plain = parse_filter_counters(FILTERS, "800::800").unwrap();
        assert_eq!(plain, FilterCounters::default());
        assert!(parse_filter_counters(FILTERS, "800::50").is_none());
        assert!(parse_filter_counters(FILTERS, "800::").is_none());
        // A kernel with CONFIG_CLS_U32_PERF prints hit counters.
        let perf = "filter parent 1: protocol ip pref 1 u32 chain 0 fh 800::5 order 5 key ht 800 bkt 0 flowid 1:1005 \n  (rule hit 812 success 40)\n  match 45000000/ff000000 at 0 (success 700 ) \n";
        assert_eq!(
            parse_filter_counters(perf, "800::5"),
            Some(FilterCounters {
                hits: Some(40),
                action: None
            })
        );
        // Garbage is no panic.
        for g in [
            "filter fh 800::5\n Sent x bytes y pkt",
            "filter fh 800::5\n (rule hit",
            "Sent",
        ] {
            let _ = parse_filter_counters(g, "800::5");
        }
    }

    #[test]
    fn used_ids() {
        let classes = "class htb 1:1 root rate 1Gbit ceil 1Gbit burst 6250b cburst 6250b \n\
                       class htb 1:1005 parent 1:1 leaf 1005: prio 0 rate 1Mbit ceil 1Mbit burst 3028b cburst 3028b \n";
        let qdiscs = "qdisc htb 1: root refcnt 2 r2q 10 default 0x30 direct_packets_stat 0 direct_qlen 1000\n\
                      qdisc pfifo 1005: parent 1:1005 limit 16p\n";
        let u = UsedIds::parse(classes, qdiscs, FILTERS);
        assert!(u.classes.contains("1:1005"));
        assert!(u.qdiscs.contains("1005:"));
        assert!(u.filters.contains("800::5") && u.filters.contains("800:"));
        assert!(u.uses(TunnelSlot(5), "800"));
        assert!(!u.uses(TunnelSlot(6), "800"));
        // Only the filter handle taken (class and qdisc free).
        let f = UsedIds::parse("", "", FILTERS);
        assert!(f.uses(TunnelSlot(5), "800"));
        assert!(!f.uses(TunnelSlot(5), "801"));
    }

    #[test]
    fn shares_the_express_filter_table() {
        // The tunnel filters rely on the express DSCP filter being the
        // pref-1 ip filter of the shaping.
        let cfg = TestbedConfig::default();
        let l = htb_lines("p0", 1_000_000_000, &cfg);
        assert!(
            l.iter().any(|x| x.contains(&format!(
                "protocol ip prio {EXPRESS_FILTER_PREF} u32 match ip tos"
            ))),
            "{l:?}"
        );
    }

    #[test]
    fn tap_lines() {
        assert_eq!(
            tap_ip_lines(),
            vec!["link add name xltap type ifb", "link set dev xltap up"]
        );
        assert_eq!(
            tap_tc_lines(),
            vec!["qdisc replace dev xltap root pfifo limit 0"]
        );
    }

    #[test]
    fn policy_errors_map_to_testbed_errors() {
        let e: TestbedError = PolicyError::BadHost { index: 5, hosts: 2 }.into();
        assert!(matches!(e, TestbedError::BadHost { index: 5, hosts: 2 }));
        let e: TestbedError = PolicyError::NotInstalled(3).into();
        assert!(e.to_string().contains("tunnel 3 has no policy"), "{e}");
    }
}
