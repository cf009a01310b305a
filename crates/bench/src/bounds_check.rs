//! The pure half of `xlane bench bounds`: which range held for a packet,
//! and whether a packet outside it is explained by a host gap.
//!
//! A tunnel's announced range changes over a run: the controller may
//! shrink it (another tunnel was demoted or released: `bandwidthChanged`
//! with reason TE) or move it (a longer period for an under-user). A change
//! announced at `t` with grace period `g` takes effect at `t` for the new
//! range and ends the old one at `t + g`; while both hold a packet may use
//! either, so it is checked against their union.
//!
//! A packet with latency `L` above its range's maximum `M` is **explained
//! by host gaps** when the machine took at least `L − M` of its flight
//! away (the gaps of every core between its send stamp and its kernel
//! receive stamp): without the stolen time it would have been inside. A
//! packet below the minimum is never explained.

use crate::attribution::GapIndex;
use serde::Serialize;

/// A range `[min_ns, max_ns]` that holds from `from_ns` until `until_ns`
/// (`CLOCK_REALTIME` ns of the packet's send stamp; `until_ns = u64::MAX`
/// while it still holds).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct RangeEpoch {
    /// First send time it holds for.
    pub from_ns: u64,
    /// First send time it no longer holds for.
    pub until_ns: u64,
    /// Announced minimum latency, ns.
    pub min_ns: u64,
    /// Announced maximum latency (`λmin + δmax`), ns.
    pub max_ns: u64,
}

/// The ranges a tunnel was announced over a run.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct RangeTimeline {
    epochs: Vec<RangeEpoch>,
}

impl RangeTimeline {
    /// The range granted at `t_ns`.
    pub fn granted(t_ns: u64, min_ns: u64, max_ns: u64) -> Self {
        RangeTimeline {
            epochs: vec![RangeEpoch {
                from_ns: t_ns,
                until_ns: u64::MAX,
                min_ns,
                max_ns,
            }],
        }
    }

    /// A change announced at `t_ns` with `grace_ns`: the ranges still open
    /// end at `t_ns + grace_ns`, the new one holds from `t_ns`.
    pub fn change(&mut self, t_ns: u64, grace_ns: u64, min_ns: u64, max_ns: u64) {
        let end = t_ns.saturating_add(grace_ns);
        for e in &mut self.epochs {
            if e.until_ns > end {
                e.until_ns = end.max(e.from_ns);
            }
        }
        self.epochs.push(RangeEpoch {
            from_ns: t_ns,
            until_ns: u64::MAX,
            min_ns,
            max_ns,
        });
    }

    /// The promise ended at `t_ns` (demoted or terminated): packets sent
    /// from then on carry none.
    pub fn end(&mut self, t_ns: u64) {
        for e in &mut self.epochs {
            if e.until_ns > t_ns {
                e.until_ns = t_ns.max(e.from_ns);
            }
        }
    }

    /// The union of the ranges holding for a packet sent at `send_ns`, or
    /// `None` if no promise covers it.
    pub fn at(&self, send_ns: u64) -> Option<(u64, u64)> {
        self.epochs
            .iter()
            .filter(|e| e.from_ns <= send_ns && send_ns < e.until_ns)
            .fold(None, |acc, e| match acc {
                None => Some((e.min_ns, e.max_ns)),
                Some((a, b)) => Some((a.min(e.min_ns), b.max(e.max_ns))),
            })
    }

    /// Every epoch, in the order announced.
    pub fn epochs(&self) -> &[RangeEpoch] {
        &self.epochs
    }
}

/// One received packet: send stamp and kernel receive stamp.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Arrival {
    /// Sender's stamp (`CLOCK_REALTIME` ns, right before `sendto`).
    pub send_ns: u64,
    /// Receiver's kernel stamp.
    pub rx_ns: u64,
}

/// A packet outside its range that host gaps do not explain.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Unexplained {
    /// Its send stamp (`CLOCK_REALTIME` ns).
    pub send_ns: u64,
    /// Its latency, ns.
    pub latency_ns: u64,
    /// How far outside its range, ns (negative: below the minimum).
    pub excess_ns: i64,
    /// Host-gap time during its flight, ns.
    pub gap_overlap_ns: u64,
}

/// How many [`Unexplained`] packets a check keeps (the largest excesses).
pub const UNEXPLAINED_KEPT: usize = 8;

/// What the check found for one tunnel.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct RangeCheck {
    /// Packets received (every receiver's copy counts).
    pub packets: u64,
    /// Packets sent while a promise held (the others are not checked).
    pub promised: u64,
    /// Smallest latency seen among promised packets, ns.
    pub observed_min_ns: u64,
    /// Largest latency seen among promised packets, ns.
    pub observed_max_ns: u64,
    /// Promised packets outside their range.
    pub outside: u64,
    /// Of those, above the maximum by no more than the host gaps during
    /// their flight.
    pub outside_explained_by_host_gaps: u64,
    /// Packets below the minimum (a subset of `outside`).
    pub below_min: u64,
    /// The unexplained packets with the largest excess (at most
    /// [`UNEXPLAINED_KEPT`]), for a person to look at.
    pub worst_unexplained: Vec<Unexplained>,
}

impl RangeCheck {
    /// Packets outside their range that host gaps do not explain.
    pub fn unexplained(&self) -> u64 {
        // Every explained packet was counted outside too (`check`).
        self.outside - self.outside_explained_by_host_gaps
    }
}

/// Check every arrival against the range that held when it was sent.
pub fn check(arrivals: &[Arrival], ranges: &RangeTimeline, gaps: &GapIndex) -> RangeCheck {
    let mut c = RangeCheck {
        packets: arrivals.len() as u64,
        observed_min_ns: u64::MAX,
        ..RangeCheck::default()
    };
    for a in arrivals {
        let Some((lo, hi)) = ranges.at(a.send_ns) else {
            continue;
        };
        let l = a.rx_ns.saturating_sub(a.send_ns);
        c.promised += 1;
        c.observed_min_ns = c.observed_min_ns.min(l);
        c.observed_max_ns = c.observed_max_ns.max(l);
        let gap = || gaps.overlap(a.send_ns, a.rx_ns);
        let unexplained = if l < lo {
            c.outside += 1;
            c.below_min += 1;
            Some(-((lo - l) as i64))
        } else if l > hi {
            c.outside += 1;
            if gap() >= l - hi {
                c.outside_explained_by_host_gaps += 1;
                None
            } else {
                Some((l - hi) as i64)
            }
        } else {
            None
        };
        if let Some(excess_ns) = unexplained {
            keep_worst(
                &mut c.worst_unexplained,
                Unexplained {
                    send_ns: a.send_ns,
                    latency_ns: l,
                    excess_ns,
                    gap_overlap_ns: gap(),
                },
            );
        }
    }
    if c.promised == 0 {
        c.observed_min_ns = 0;
    }
    c
}

fn keep_worst(v: &mut Vec<Unexplained>, u: Unexplained) {
    if v.len() < UNEXPLAINED_KEPT {
        v.push(u);
    } else if let Some((i, w)) = v
        .iter()
        .enumerate()
        .min_by_key(|(_, w)| w.excess_ns.unsigned_abs())
    {
        if w.excess_ns.unsigned_abs() < u.excess_ns.unsigned_abs() {
            v[i] = u;
        }
    }
    v.sort_by_key(|w| std::cmp::Reverse(w.excess_ns.unsigned_abs()));
}

#[cfg(test)]
mod tests {
    use super::*;
    use xlane_host::floor::Gap;

    fn gap(start: u64, len: u64) -> Gap {
        Gap {
            start_realtime_ns: start,
            len_ns: len,
        }
    }

    #[test]
    fn timeline_union_during_grace_then_new_range() {
        let mut t = RangeTimeline::granted(100, 10, 50);
        t.change(1_000, 500, 10, 30);
        let table = [
            (99, None),
            (100, Some((10, 50))),
            (999, Some((10, 50))),
            (1_000, Some((10, 50))),
            (1_499, Some((10, 50))),
            (1_500, Some((10, 30))),
        ];
        for (at, want) in table {
            assert_eq!(t.at(at), want, "send time {at}");
        }
        t.end(2_000);
        assert_eq!(t.at(1_999), Some((10, 30)));
        assert_eq!(t.at(2_000), None);
    }

    #[test]
    fn outside_packets_explained_only_by_enough_gap() {
        let ranges = RangeTimeline::granted(0, 10, 100);
        let gaps = GapIndex::new(&[gap(1_000, 40), gap(2_000, 10)]);
        // (send, rx, outside, explained, below)
        let table: [(u64, u64, u64, u64, u64); 6] = [
            (0, 50, 0, 0, 0),        // inside
            (0, 5, 1, 0, 1),         // below min: never explained
            (990, 1_130, 1, 1, 0),   // 140 > 100 by 40; 40 of gap in flight
            (990, 1_131, 1, 0, 0),   // by 41: the gap is 1 ns short
            (1_995, 2_106, 1, 0, 0), // by 11, 10 of gap
            (5_000, 5_100, 0, 0, 0), // exactly the maximum is inside
        ];
        for (send, rx, outside, explained, below) in table {
            let c = check(
                &[Arrival {
                    send_ns: send,
                    rx_ns: rx,
                }],
                &ranges,
                &gaps,
            );
            assert_eq!(
                (c.outside, c.outside_explained_by_host_gaps, c.below_min),
                (outside, explained, below),
                "packet sent {send} received {rx}"
            );
        }
    }

    #[test]
    fn keeps_the_worst_unexplained_packets() {
        let ranges = RangeTimeline::granted(0, 10, 100);
        let arr: Vec<Arrival> = (0..20u64)
            .map(|i| Arrival {
                send_ns: i * 1_000,
                rx_ns: i * 1_000 + 101 + i,
            })
            .chain(std::iter::once(Arrival {
                send_ns: 50_000,
                rx_ns: 50_001,
            }))
            .collect();
        let c = check(&arr, &ranges, &GapIndex::default());
        assert_eq!(c.outside, 21);
        let ex: Vec<i64> = c.worst_unexplained.iter().map(|u| u.excess_ns).collect();
        assert_eq!(ex, [20, 19, 18, 17, 16, 15, 14, 13]);
    }

    #[test]
    fn packets_without_a_promise_are_counted_not_checked() {
        let mut ranges = RangeTimeline::granted(100, 10, 20);
        ranges.end(200);
        let arr = [
            Arrival {
                send_ns: 50,
                rx_ns: 1_000,
            },
            Arrival {
                send_ns: 150,
                rx_ns: 165,
            },
            Arrival {
                send_ns: 250,
                rx_ns: 9_000,
            },
        ];
        let c = check(&arr, &ranges, &GapIndex::default());
        assert_eq!((c.packets, c.promised, c.outside), (3, 1, 0));
        assert_eq!((c.observed_min_ns, c.observed_max_ns), (15, 15));
    }
}
