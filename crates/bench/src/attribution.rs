//! Why was a packet late? Every packet above its configuration's λ99 is
//! tagged with the first cause that accounts for at least half of its
//! excess over the configuration's median:
//!
//! 1. **host gap** — the floor probes saw the machine take at least that
//!    much time away (summed over the cores the configuration's threads
//!    run on) while the packet was in flight, from the sender's stamp to
//!    the receiving thread;
//! 2. **queueing** — its network part (send stamp → kernel receive stamp)
//!    exceeds the configuration's median network part by that much: it
//!    waited in a qdisc, the switch or a backlog;
//! 3. **sender late** — the sender stamped it that long after its slot:
//!    the sending thread was held back around the send;
//! 4. **receiver late** — the receiving thread took that much longer than
//!    usual to pick it up after the kernel stamp;
//! 5. otherwise **unexplained**.
//!
//! Lost frames have no latency; they are counted on their own.

use crate::flows::FlowSample;
use serde::Serialize;
use xlane_host::floor::Gap;
use xlane_stats::percentile;

/// The cause of one outlier.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Cause {
    /// The machine took the time away.
    HostGap,
    /// Waiting in queues on the way.
    Queueing,
    /// The sender was late.
    SenderLate,
    /// The receiving thread was late.
    ReceiverLate,
    /// None of the above accounts for it.
    Unexplained,
}

impl Cause {
    /// Every cause, in report order.
    pub const ALL: [Cause; 5] = [
        Cause::HostGap,
        Cause::Queueing,
        Cause::SenderLate,
        Cause::ReceiverLate,
        Cause::Unexplained,
    ];

    /// Name in reports and plots.
    pub fn name(self) -> &'static str {
        match self {
            Cause::HostGap => "host gap",
            Cause::Queueing => "queueing",
            Cause::SenderLate => "sender late",
            Cause::ReceiverLate => "receiver late",
            Cause::Unexplained => "unexplained",
        }
    }
}

/// Gaps of every core, merged into disjoint intervals, for overlap queries.
#[derive(Clone, Debug, Default)]
pub struct GapIndex {
    /// Disjoint, sorted `[start, end)` intervals (realtime ns).
    spans: Vec<(u64, u64)>,
    /// `prefix[i]` = total length of `spans[..i]`.
    prefix: Vec<u64>,
}

impl GapIndex {
    /// Build from the gaps of any number of cores.
    pub fn new<'a>(gaps: impl IntoIterator<Item = &'a Gap>) -> Self {
        Self::with_lead(gaps, 0)
    }

    /// Build with every gap extended back by `lead_ns`: a probe that wakes
    /// every `lead_ns` sees a stall only once its next wake-up is late, so
    /// the stall may have begun up to one interval before the gap it
    /// reports.
    pub fn with_lead<'a>(gaps: impl IntoIterator<Item = &'a Gap>, lead_ns: u64) -> Self {
        let mut v: Vec<(u64, u64)> = gaps
            .into_iter()
            .filter(|g| g.len_ns > 0)
            .map(|g| {
                (
                    g.start_realtime_ns.saturating_sub(lead_ns),
                    g.start_realtime_ns.saturating_add(g.len_ns),
                )
            })
            .filter(|(a, b)| b > a)
            .collect();
        v.sort_unstable();
        let mut spans: Vec<(u64, u64)> = Vec::with_capacity(v.len());
        for (a, b) in v {
            match spans.last_mut() {
                Some(last) if a <= last.1 => last.1 = last.1.max(b),
                _ => spans.push((a, b)),
            }
        }
        let mut prefix = Vec::with_capacity(spans.len() + 1);
        let mut acc = 0;
        prefix.push(0);
        for (a, b) in &spans {
            acc += b - a;
            prefix.push(acc);
        }
        GapIndex { spans, prefix }
    }

    /// Total gap time inside `[from, to)`. O(log n).
    pub fn overlap(&self, from: u64, to: u64) -> u64 {
        if to <= from || self.spans.is_empty() {
            return 0;
        }
        // First span ending after `from`, first span starting at or after `to`.
        let i = self.spans.partition_point(|&(_, e)| e <= from);
        let j = self.spans.partition_point(|&(s, _)| s < to);
        if i >= j {
            return 0;
        }
        let mut total = self.prefix[j] - self.prefix[i];
        let (s0, _) = self.spans[i];
        if s0 < from {
            total -= from - s0;
        }
        let (_, e1) = self.spans[j - 1];
        if e1 > to {
            total -= e1 - to;
        }
        total
    }
}

/// The attribution of one configuration's samples.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Attribution {
    /// λ99 that outliers exceed.
    pub threshold_ns: u64,
    /// Index into the samples and cause of every outlier.
    pub outliers: Vec<(usize, Cause)>,
    /// δmax over the samples not explained by host gaps.
    pub delta_max_excl_gaps_ns: u64,
}

impl Attribution {
    /// How many outliers have this cause.
    pub fn count(&self, c: Cause) -> u64 {
        self.outliers.iter().filter(|(_, x)| *x == c).count() as u64
    }
}

/// Tag every sample above λ99 (see the module docs).
pub fn attribute(samples: &[FlowSample], gaps: &GapIndex) -> Attribution {
    if samples.is_empty() {
        return Attribution::default();
    }
    let sorted = |f: &dyn Fn(&FlowSample) -> u64| {
        let mut v: Vec<u64> = samples.iter().map(f).collect();
        v.sort_unstable();
        v
    };
    let lat = sorted(&|s| s.latency_ns());
    let net = sorted(&|s| s.network_ns());
    let wake = sorted(&|s| s.sample.user_rx_ns.saturating_sub(s.sample.kernel_rx_ns));
    let p = |v: &[u64], q| percentile(v, q).unwrap_or(0);
    let (p50, p99) = (p(&lat, 0.5), p(&lat, 0.99));
    let (net50, wake50) = (p(&net, 0.5), p(&wake, 0.5));
    let mut outliers = Vec::new();
    for (i, s) in samples.iter().enumerate() {
        let l = s.latency_ns();
        if l <= p99 {
            continue;
        }
        let half = l.saturating_sub(p50) / 2;
        let cause = if gaps.overlap(s.sample.send_ns, s.sample.user_rx_ns) >= half.max(1) {
            Cause::HostGap
        } else if s.network_ns().saturating_sub(net50) >= half {
            Cause::Queueing
        } else if s.sender_late_ns() >= half {
            Cause::SenderLate
        } else if s
            .sample
            .user_rx_ns
            .saturating_sub(s.sample.kernel_rx_ns)
            .saturating_sub(wake50)
            >= half
        {
            Cause::ReceiverLate
        } else {
            Cause::Unexplained
        };
        outliers.push((i, cause));
    }
    let explained: std::collections::HashSet<usize> = outliers
        .iter()
        .filter(|(_, c)| *c == Cause::HostGap)
        .map(|(i, _)| *i)
        .collect();
    let kept = samples
        .iter()
        .enumerate()
        .filter(|(i, _)| !explained.contains(i))
        .map(|(_, s)| s.latency_ns());
    let (mut lo, mut hi) = (u64::MAX, 0);
    for l in kept {
        lo = lo.min(l);
        hi = hi.max(l);
    }
    Attribution {
        threshold_ns: p99,
        outliers,
        delta_max_excl_gaps_ns: hi.saturating_sub(lo),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use xlane_host::runtime::Sample;

    fn gap(start: u64, len: u64) -> Gap {
        Gap {
            start_realtime_ns: start,
            len_ns: len,
        }
    }

    #[test]
    fn overlap_table() {
        let g = [gap(100, 50), gap(120, 50), gap(300, 10), gap(1000, 0)];
        let idx = GapIndex::new(g.iter());
        // Merged: [100,170) and [300,310).
        let cases = [
            (0, 100, 0),
            (0, 1000, 80),
            (100, 170, 70),
            (110, 160, 50),
            (160, 305, 15),
            (169, 171, 1),
            (170, 300, 0),
            (305, 305, 0),
            (400, 300, 0),
        ];
        for (a, b, want) in cases {
            assert_eq!(idx.overlap(a, b), want, "[{a},{b})");
        }
        assert_eq!(GapIndex::new([].iter()).overlap(0, 100), 0);
    }

    #[test]
    fn lead_extends_gaps_back() {
        let g = [gap(100, 50), gap(300, 10)];
        let idx = GapIndex::with_lead(g.iter(), 40);
        // [60,150) and [260,310); a zero-length gap is no gap.
        let cases = [(0, 60, 0), (0, 100, 40), (0, 1000, 140), (250, 270, 10)];
        for (a, b, want) in cases {
            assert_eq!(idx.overlap(a, b), want, "[{a},{b})");
        }
        assert_eq!(
            GapIndex::with_lead([gap(500, 0)].iter(), 40).overlap(0, 1000),
            0
        );
    }

    /// One sample: sent at `send` (slot `slot`), kernel stamp after `net`,
    /// thread after `wake` more.
    fn s(slot: u64, send: u64, net: u64, wake: u64) -> FlowSample {
        FlowSample {
            sample: Sample {
                seq: 0,
                send_ns: send,
                kernel_rx_ns: send + net,
                user_rx_ns: send + net + wake,
            },
            slot_ns: slot,
            receiver: 0,
            send_returned_ns: 0,
            send_driver_ns: 0,
        }
    }

    #[test]
    fn causes_table() {
        // 1000 ordinary samples (latency 20) and five outliers.
        let mut v: Vec<FlowSample> = (0..1000).map(|k| s(k * 1000, k * 1000, 10, 10)).collect();
        let base = 10_000_000;
        v.push(s(base, base, 10, 10 + 500)); // thread late, inside a gap → host gap
        v.push(s(base + 10_000, base + 10_000, 510, 10)); // queueing
        v.push(s(base + 20_000 - 600, base + 20_000, 10, 10 + 30)); // sender late by 600
        v.push(s(base + 30_000, base + 30_000, 10, 10 + 500)); // receiver late
        v.push(s(base + 40_000, base + 40_000, 260, 260)); // network and thread each half
        let gaps = [gap(base + 5, 400)];
        let a = attribute(&v, &GapIndex::new(gaps.iter()));
        assert_eq!(a.threshold_ns, 20);
        let causes: Vec<Cause> = a.outliers.iter().map(|(_, c)| *c).collect();
        // The last one: excess 500, half 250; network excess 250 ≥ 250 → queueing.
        assert_eq!(
            causes,
            [
                Cause::HostGap,
                Cause::Queueing,
                Cause::SenderLate,
                Cause::ReceiverLate,
                Cause::Queueing
            ]
        );
        // δmax without the host-gap sample: max is the 520 of the last one.
        assert_eq!(a.delta_max_excl_gaps_ns, 520 - 20);
        assert_eq!(a.count(Cause::Queueing), 2);
    }

    #[test]
    fn empty_is_empty() {
        assert_eq!(attribute(&[], &GapIndex::default()), Attribution::default());
    }
}
