//! The monitoring policy: its parameters ([`Policy`]), one interval of a
//! tunnel's traffic ([`Observation`]) and how it compares with an allocation
//! ([`classify`]).

use crate::fabric::SwitchMeter;
use crate::proto::MeterReading;

/// Longest meter interval accepted, ns (one hour).
pub const MAX_INTERVAL_NS: u64 = 3_600_000_000_000;

/// Monitoring and grace parameters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    /// Tolerance over the allocation before a tunnel counts as exceeding,
    /// ‰. Default 100 (10 %).
    pub exceed_tolerance_permille: u32,
    /// `K`: consecutive exceeding intervals of an unbounded tunnel before it
    /// is terminated. Default 3.
    pub terminate_after: u32,
    /// Below this share of its allocation an interval counts as unused, ‰.
    /// Default 250 (25 %).
    pub unused_permille: u32,
    /// `M`: consecutive unused intervals before the period is raised.
    /// Default 5.
    pub unused_intervals: u32,
    /// Factor the period is multiplied by on a reclaim (≥ 2). Default 2.
    pub reclaim_factor: u32,
    /// Grace period of `BandwidthChanged{BwUnused}`, ns. Default 1 s.
    pub grace_ns: u64,
    /// Grace period of `BandwidthChanged{Te}` that widens a range, ns.
    /// Default 10 ms.
    pub te_grace_ns: u64,
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            exceed_tolerance_permille: 100,
            terminate_after: 3,
            unused_permille: 250,
            unused_intervals: 5,
            reclaim_factor: 2,
            grace_ns: 1_000_000_000,
            te_grace_ns: 10_000_000,
        }
    }
}

/// One interval of a tunnel's traffic, from a host or a switch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Observation {
    /// Packets.
    pub packets: u64,
    /// Bytes.
    pub bytes: u64,
    /// Interval, ns.
    pub interval_ns: u64,
    /// Packets dropped by a limiter (switch meters only).
    pub dropped_packets: u64,
}

impl From<&MeterReading> for Observation {
    fn from(r: &MeterReading) -> Self {
        Observation {
            packets: r.packets,
            bytes: r.bytes,
            interval_ns: r.interval_ns,
            dropped_packets: 0,
        }
    }
}

impl From<&SwitchMeter> for Observation {
    fn from(m: &SwitchMeter) -> Self {
        Observation {
            packets: m.packets,
            bytes: m.bytes,
            interval_ns: m.interval_ns,
            dropped_packets: m.dropped_packets,
        }
    }
}

/// How one interval compares with an allocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Usage {
    /// Over the allocation (see the [`crate::core`] docs).
    Exceeded,
    /// Within it.
    Normal,
    /// Well under it.
    Unused,
}

/// Classify one interval of a tunnel with load `load_bytes` and period
/// `period_ns` (pure; the monitoring policy's only arithmetic).
pub fn classify(policy: &Policy, load_bytes: u32, period_ns: u64, o: &Observation) -> Usage {
    if o.dropped_packets > 0 {
        return Usage::Exceeded;
    }
    if o.interval_ns == 0 || period_ns == 0 {
        return Usage::Normal;
    }
    let load = load_bytes as u128;
    let period = period_ns as u128;
    let interval = o.interval_ns as u128;
    if o.bytes as u128 > o.packets as u128 * load {
        return Usage::Exceeded;
    }
    // packets ≤ (interval/π + 1)·(1 + tol)  ⇔  packets·π·1000 ≤ (interval + π)·(1000 + tol)
    let tol = 1000 + policy.exceed_tolerance_permille as u128;
    if o.packets as u128 * period * 1000 > (interval + period) * tol {
        return Usage::Exceeded;
    }
    // bytes < σ·interval/π · unused‰  ⇔  bytes·π·1000 < σ·interval·unused
    if interval >= period
        && (o.bytes as u128) * period * 1000 < load * interval * policy.unused_permille as u128
    {
        return Usage::Unused;
    }
    Usage::Normal
}
