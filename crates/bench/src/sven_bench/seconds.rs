//! The arithmetic of `xlane bench sven`, apart from any socket: the
//! per-second rows of a stepped run, the SLO-violating throughput of a
//! latency–throughput curve, and the targets.

use serde::Serialize;
use xlane_lancet::TimelineBucket;
use xlane_rpc::admission::Slo;

use crate::rpc_bench::Target;

/// One second of a stepped run. Offered, drop rate, p99 and lost count
/// the requests scheduled in that second; achieved and goodput the replies
/// received in it (a throughput, which cannot pass what the servers do).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Second {
    /// Seconds since the start of the run.
    pub t_s: u32,
    /// The offered load, a fraction of the capacity.
    pub load: f64,
    /// Requests sent per second.
    pub offered_rps: f64,
    /// Replies received in this second.
    pub achieved_rps: f64,
    /// Replies received in this second within the SLO's latency of their
    /// request's scheduled send.
    pub goodput_rps: f64,
    /// Share of the sent requests refused with DROP.
    pub drop_rate: f64,
    /// p99 latency of the answered requests, with every lost request
    /// counted as at least as late as it waited (run end + drain − its
    /// second's end), ns.
    pub p99_ns: u64,
    /// The SLO's percentile, counted the same way (equal to `p99_ns` for a
    /// p99 SLO), ns.
    pub slo_percentile_ns: u64,
    /// The percentiles fall on a lost request: they are lower bounds.
    pub at_least: bool,
    /// Answered requests scheduled in this second: with `lost`, what the
    /// percentiles are taken over. Both 0: the second has no percentile
    /// (`p99_ns` and `slo_percentile_ns` are then 0 and shown as "–").
    pub samples: u64,
    /// Requests never answered.
    pub lost: u64,
    /// Longest gap any CPU's floor probe saw in this second, ns.
    pub floor_max_gap_ns: u64,
    /// In the overload the targets look at: offered load ≥
    /// [`OVERLOAD`] of capacity, after the first such step settled.
    pub settled: bool,
}

/// Offered load (fraction of capacity) from which the targets apply.
pub const OVERLOAD: f64 = 1.1;

/// One run's requests, as the analysis needs them.
pub struct RunData<'a> {
    /// Lancet's timeline in 1 s buckets.
    pub timeline: &'a [TimelineBucket],
    /// (scheduled send time, latency) of every answered request, ns.
    pub samples: &'a [(u64, u64)],
    /// The offered load of each second.
    pub loads: &'a [f64],
    /// The SLO.
    pub slo: Slo,
    /// When the client stopped waiting for replies (end of sending plus
    /// the drain), ns after the start: a lost request scheduled in second
    /// `t` waited at least this less `t + 1` s.
    pub gave_up_ns: u64,
    /// Longest floor gap of each second, ns (shorter: 0 for the rest).
    pub floor_gaps: &'a [u64],
    /// Seconds of the first overload step left out as its settling time.
    pub settle_s: u32,
}

/// The per-second rows and the SLO's percentile over the settled seconds.
#[derive(Clone, Debug, PartialEq)]
pub struct Analysis {
    /// One row per second of the timeline.
    pub seconds: Vec<Second>,
    /// The SLO's percentile over every request of the settled seconds
    /// (lost ones counted as in [`Second::p99_ns`]), ns, and whether it is
    /// a lower bound; `None` without settled seconds.
    pub settled_percentile: Option<(u64, bool)>,
}

const S: u64 = 1_000_000_000;

/// The `q` quantile (nearest rank) of answered latencies `lat` (sorted)
/// and `lost` requests of latency at least `lost_ns`: the value, and
/// whether it falls on a lost request.
pub(crate) fn quantile_with_lost(
    lat: &[u64],
    lost: u64,
    lost_ns: u64,
    q: f64,
) -> Option<(u64, bool)> {
    let n = lat.len() as u64 + lost;
    if n == 0 {
        return None;
    }
    // n ≥ 1 here, so the clamped rank is at least 1.
    let rank = ((q * n as f64).ceil() as u64).clamp(1, n) - 1;
    // Lost requests sort after every answered latency below `lost_ns`.
    let below = lat.partition_point(|&v| v < lost_ns) as u64;
    Some(if rank < below {
        (lat[rank as usize], false)
    } else if rank < below + lost {
        (lost_ns, true)
    } else {
        // rank ≥ below + lost, so rank − lost ≥ below ≥ 0; and rank ≤ n − 1
        // = lat.len() + lost − 1, so the index is within `lat`.
        (lat[(rank - lost) as usize], false)
    })
}

/// The per-second rows of one run.
pub fn analyze(d: &RunData) -> Analysis {
    let first_over = d.loads.iter().position(|&l| l >= OVERLOAD - 1e-9);
    let settled_from = first_over.map(|f| f as u32 + d.settle_s);
    let n = d.timeline.len();
    let mut per_second: Vec<Vec<u64>> = vec![Vec::new(); n];
    // Replies received, and those within the SLO, by the second of receipt.
    let mut replies = vec![(0u64, 0u64); n];
    for &(t, lat) in d.samples {
        if let Some(v) = per_second.get_mut((t / S) as usize) {
            v.push(lat);
        }
        if let Some(r) = replies.get_mut((t.saturating_add(lat) / S) as usize) {
            r.0 += 1;
            r.1 += u64::from(lat <= d.slo.latency_ns);
        }
    }
    let mut seconds = Vec::with_capacity(d.timeline.len());
    let mut pooled: Vec<u64> = Vec::new();
    let mut pooled_lost: Vec<u64> = Vec::new();
    for (i, (b, lat)) in d.timeline.iter().zip(per_second.iter_mut()).enumerate() {
        lat.sort_unstable();
        let load = d.loads.get(i).copied().unwrap_or(0.0);
        // A second that ended after the client gave up (a run cut short):
        // its lost requests waited at least 0, a bound `at_least` flags
        // when a percentile falls on one.
        let lost_ns = d.gave_up_ns.saturating_sub((i as u64 + 1) * S);
        let p99 = quantile_with_lost(lat, b.lost, lost_ns, 0.99);
        let ps = quantile_with_lost(lat, b.lost, lost_ns, d.slo.quantile);
        let settled = settled_from.is_some_and(|f| i as u32 >= f) && load >= OVERLOAD - 1e-9;
        if settled {
            pooled.extend_from_slice(lat);
            pooled_lost.extend(std::iter::repeat(lost_ns).take(b.lost as usize));
        }
        seconds.push(Second {
            t_s: i as u32,
            load,
            offered_rps: b.sent as f64,
            achieved_rps: replies[i].0 as f64,
            goodput_rps: replies[i].1 as f64,
            drop_rate: if b.sent == 0 {
                0.0
            } else {
                b.dropped as f64 / b.sent as f64
            },
            p99_ns: p99.map_or(0, |p| p.0),
            slo_percentile_ns: ps.map_or(0, |p| p.0),
            at_least: ps.is_some_and(|p| p.1) || p99.is_some_and(|p| p.1),
            samples: lat.len() as u64,
            lost: b.lost,
            floor_max_gap_ns: d.floor_gaps.get(i).copied().unwrap_or(0),
            settled,
        });
    }
    // The pooled percentile: lost requests of different seconds have
    // different bounds, so merge them as latencies and remember which.
    let settled_percentile = if pooled.is_empty() && pooled_lost.is_empty() {
        None
    } else {
        let mut all: Vec<(u64, bool)> = pooled
            .iter()
            .map(|&v| (v, false))
            .chain(pooled_lost.iter().map(|&v| (v, true)))
            .collect();
        all.sort_unstable();
        // Not both empty: n ≥ 1.
        let n = all.len();
        let rank = ((d.slo.quantile * n as f64).ceil() as usize).clamp(1, n) - 1;
        Some(all[rank])
    };
    Analysis {
        seconds,
        settled_percentile,
    }
}

/// A point of the latency–throughput curve.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CurveAt {
    /// Throughput achieved, requests/s.
    pub achieved_rps: f64,
    /// The SLO's percentile, ns.
    pub percentile_ns: u64,
}

/// The throughput at which the SLO's percentile crosses its bound, on a
/// curve ordered by load: interpolated (linear in throughput, logarithmic
/// in latency) between the **last** point within the SLO and the next. A
/// violation at a lower load followed by points within the SLO is the
/// machine's noise (a host gap), not the queue's: the queue's percentile
/// only grows with the load. `(rps, crossed)`: when the last point is
/// within the SLO, its throughput (`crossed` false: the curve stops short
/// of the violation); when no point is, the first point's.
pub fn slo_violating_rps(points: &[CurveAt], slo_ns: u64) -> Option<(f64, bool)> {
    let last_good = points.iter().rposition(|p| p.percentile_ns <= slo_ns);
    match last_good {
        _ if points.is_empty() => None,
        None => Some((points[0].achieved_rps, true)),
        Some(i) if i + 1 == points.len() => Some((points[i].achieved_rps, false)),
        Some(i) => {
            let (a, b) = (points[i], points[i + 1]);
            let la = (a.percentile_ns.max(1) as f64).ln();
            let lb = (b.percentile_ns.max(1) as f64).ln();
            let ls = (slo_ns.max(1) as f64).ln();
            let f = if lb > la {
                ((ls - la) / (lb - la)).clamp(0.0, 1.0)
            } else {
                1.0
            };
            Some((a.achieved_rps + f * (b.achieved_rps - a.achieved_rps), true))
        }
    }
}

/// What the targets need of one distribution.
pub struct DistResult<'a> {
    /// `fixed`, `exp` or `bimodal`.
    pub name: &'a str,
    /// Its SLO-violating throughput, requests/s.
    pub slo_violating_rps: Option<f64>,
    /// Per-second rows and pooled percentile of `none`, `aiad`, `default`.
    pub none: Option<&'a Analysis>,
    /// `aiad`.
    pub aiad: Option<&'a Analysis>,
    /// `default`.
    pub default: Option<&'a Analysis>,
}

/// Share of the settled seconds within 1.1× the SLO the default must
/// keep.
pub const WITHIN_SHARE: f64 = 0.95;
/// Goodput the default must keep, a share of the SLO-violating throughput.
pub const GOODPUT_SHARE: f64 = 0.9;
/// Without control the SLO's percentile must exceed this many SLOs.
pub const UNCONTROLLED_FACTOR: f64 = 10.0;

impl Second {
    /// Whether the second has a percentile: some request scheduled in it
    /// was answered or lost.
    pub fn has_percentile(&self) -> bool {
        self.samples + self.lost > 0
    }
}

/// Largest per-second SLO percentile of a run over the SLO's bound;
/// `None` when no second has a percentile (or the bound is 0).
pub fn overshoot(a: &Analysis, slo: Slo) -> Option<f64> {
    if slo.latency_ns == 0 {
        return None;
    }
    a.seconds
        .iter()
        .filter(|s| s.has_percentile())
        .map(|s| s.slo_percentile_ns as f64 / slo.latency_ns as f64)
        .reduce(f64::max)
}

/// The four targets for one distribution.
pub fn targets(d: &DistResult, slo: Slo) -> Vec<Target> {
    let bound = slo.latency_ns as f64;
    let mut out = Vec::new();
    let settled = |a: &Analysis| {
        a.seconds
            .iter()
            .filter(|s| s.settled)
            .cloned()
            .collect::<Vec<_>>()
    };
    // A settled second without a request has no percentile to be within
    // the SLO: it is left out of the share (and said so).
    let with_percentile = |a: &Analysis| {
        a.seconds
            .iter()
            .filter(|s| s.settled && s.has_percentile())
            .cloned()
            .collect::<Vec<_>>()
    };
    let na = |claim: String, why: &str| Target {
        claim,
        holds: None,
        detail: why.into(),
    };
    let claim = format!(
        "{}: default within 1.1×SLO in ≥95 % of settled overload seconds",
        d.name
    );
    out.push(
        match d.default.map(|a| (with_percentile(a), settled(a).len())) {
            Some((s, all)) if !s.is_empty() => {
                // A lower bound within the SLO does not show the second was.
                let ok = s
                    .iter()
                    .filter(|x| !x.at_least && x.slo_percentile_ns as f64 <= 1.1 * bound)
                    .count();
                let share = ok as f64 / s.len() as f64;
                let empty = all - s.len(); // `s` is a subset of the settled seconds
                Target {
                    claim,
                    holds: Some(share >= WITHIN_SHARE),
                    detail: format!(
                        "{ok} of {} seconds ({:.0} %){}",
                        s.len(),
                        share * 100.0,
                        if empty > 0 {
                            format!("; {empty} without a request left out")
                        } else {
                            String::new()
                        }
                    ),
                }
            }
            Some((_, all)) if all > 0 => na(claim, "no settled overload second has a request"),
            _ => na(claim, "needs a default run with settled overload seconds"),
        },
    );
    let claim = format!(
        "{}: default goodput ≥ 90 % of the SLO-violating throughput",
        d.name
    );
    out.push(match (d.default.map(settled), d.slo_violating_rps) {
        (Some(s), Some(v)) if !s.is_empty() && v > 0.0 => {
            let g = s.iter().map(|x| x.goodput_rps).sum::<f64>() / s.len() as f64;
            Target {
                claim,
                holds: Some(g >= GOODPUT_SHARE * v),
                detail: format!("{g:.0}/s vs {v:.0}/s ({:.0} %)", g / v * 100.0),
            }
        }
        _ => na(claim, "needs a default run and the curve without control"),
    });
    let claim = format!(
        "{}: without control, percentile > 10×SLO in overload",
        d.name
    );
    out.push(match d.none.and_then(|a| a.settled_percentile) {
        // A lower bound below the threshold says nothing either way.
        Some((p, true)) if p as f64 <= UNCONTROLLED_FACTOR * bound => Target {
            claim,
            holds: None,
            detail: format!(
                "≥ {} = {:.1}× SLO: a lower bound (lost requests), cannot tell",
                crate::table::fmt_ns(p),
                p as f64 / bound
            ),
        },
        Some((p, at_least)) => Target {
            claim,
            holds: Some(p as f64 > UNCONTROLLED_FACTOR * bound),
            detail: format!(
                "{}{} = {:.1}× SLO",
                if at_least { "≥ " } else { "" },
                crate::table::fmt_ns(p),
                p as f64 / bound
            ),
        },
        None => na(claim, "needs a none run with settled overload seconds"),
    });
    let claim = format!("{}: default overshoot < aiad overshoot", d.name);
    out.push(match (d.default, d.aiad) {
        (Some(df), Some(ai)) => match (overshoot(df, slo), overshoot(ai, slo)) {
            (Some(o_d), Some(o_a)) => Target {
                claim,
                holds: Some(o_d < o_a),
                detail: format!("largest second {o_d:.2}× SLO vs {o_a:.2}×"),
            },
            _ => na(claim, "a default or aiad run has no second with a request"),
        },
        _ => na(claim, "needs default and aiad runs"),
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const SLO: Slo = Slo {
        quantile: 0.99,
        latency_ns: 10_000_000,
    };

    fn bucket(sent: u64, answered: u64, dropped: u64, lost: u64) -> TimelineBucket {
        TimelineBucket {
            sent,
            answered,
            dropped,
            lost,
        }
    }

    #[test]
    fn quantiles_count_lost_requests_as_late() {
        // (answered, lost, lost_ns, q) → (value, at_least)
        let lat: Vec<u64> = (1..=98).collect();
        type Case<'a> = (&'a [u64], u64, u64, f64, Option<(u64, bool)>);
        let cases: &[Case] = &[
            (&[], 0, 0, 0.99, None),
            (&lat, 0, 0, 0.5, Some((49, false))),
            // 98 answered + 2 lost at 1000: p99 is the first lost one.
            (&lat, 2, 1000, 0.99, Some((1000, true))),
            (&lat, 2, 1000, 0.98, Some((98, false))),
            // A lost bound below some answered latencies sorts among them.
            (&lat, 2, 50, 0.5, Some((50, true))),
            (&lat, 2, 50, 0.99, Some((97, false))),
            (&[], 3, 7, 0.99, Some((7, true))),
        ];
        for &(l, lost, lost_ns, q, want) in cases {
            assert_eq!(
                quantile_with_lost(l, lost, lost_ns, q),
                want,
                "{lost} lost at {lost_ns}, q {q}"
            );
        }
    }

    #[test]
    fn seconds_count_rates_goodput_and_settling() {
        // Second 0 at 0.6, seconds 1–3 at 1.15; settle 1 s: seconds 2, 3.
        let timeline = [
            bucket(100, 100, 0, 0),
            bucket(200, 150, 50, 0),
            bucket(200, 100, 99, 1),
            bucket(200, 200, 0, 0),
        ];
        let mut samples = Vec::new();
        for (sec, n, lat) in [
            (0u64, 99, 1_000_000u64),
            (1, 150, 5_000_000),
            (2, 100, 20_000_000),
            (3, 200, 9_000_000),
        ] {
            for k in 0..n {
                samples.push((sec * S + k, lat));
            }
        }
        // Sent at the end of second 0, its reply (20 ms, late) in second 1.
        samples.push((S - 1, 20_000_000));
        let a = analyze(&RunData {
            timeline: &timeline,
            samples: &samples,
            loads: &[0.6, 1.15, 1.15, 1.15],
            slo: SLO,
            gave_up_ns: 6 * S,
            floor_gaps: &[0, 30_000],
            settle_s: 1,
        });
        let s = &a.seconds;
        assert_eq!(s.len(), 4);
        assert_eq!(
            s.iter().map(|x| x.settled).collect::<Vec<_>>(),
            [false, false, true, true]
        );
        assert_eq!(s[1].offered_rps, 200.0);
        // 150 replies of second 1's requests, and the late one of second 0.
        assert_eq!(s[1].achieved_rps, 151.0);
        assert_eq!(s[1].drop_rate, 0.25);
        assert_eq!(s[1].goodput_rps, 150.0);
        assert_eq!((s[0].achieved_rps, s[0].goodput_rps), (99.0, 99.0));
        // Second 0's p99 is rank 99 of 100: 1 ms (the late one is rank 100).
        assert_eq!(s[0].p99_ns, 1_000_000);
        assert_eq!(s[1].floor_max_gap_ns, 30_000);
        assert_eq!(s[3].floor_max_gap_ns, 0);
        // Second 2: 100 answered at 20 ms (beyond the SLO) and 1 lost,
        // which waited at least 6 s − 3 s.
        assert_eq!(s[2].goodput_rps, 0.0);
        assert_eq!((s[2].p99_ns, s[2].at_least), (20_000_000, false));
        assert_eq!(s[2].lost, 1);
        assert_eq!(s[3].p99_ns, 9_000_000);
        // Pooled over seconds 2 and 3: 301 requests, p99 = rank 298.
        assert_eq!(a.settled_percentile, Some((20_000_000, false)));
    }

    #[test]
    fn no_overload_means_no_settled_seconds() {
        let a = analyze(&RunData {
            timeline: &[bucket(1, 1, 0, 0)],
            samples: &[(0, 5)],
            loads: &[1.0],
            slo: SLO,
            gave_up_ns: S,
            floor_gaps: &[],
            settle_s: 0,
        });
        assert!(!a.seconds[0].settled);
        assert_eq!(a.settled_percentile, None);
    }

    #[test]
    fn the_violating_throughput_is_interpolated_at_the_crossing() {
        let at = |r: f64, ms: u64| CurveAt {
            achieved_rps: r,
            percentile_ns: ms * 1_000_000,
        };
        let slo = 10_000_000;
        type Case<'a> = (&'a [CurveAt], Option<(f64, bool)>);
        let cases: &[Case] = &[
            (&[], None),
            (&[at(100.0, 1), at(200.0, 5)], Some((200.0, false))),
            (&[at(100.0, 20), at(200.0, 40)], Some((100.0, true))),
            // 1 ms → 100 ms: 10 ms is half way on a log scale.
            (
                &[at(50.0, 1), at(100.0, 1), at(200.0, 100)],
                Some((150.0, true)),
            ),
            // Exactly at the SLO is within it: the crossing is right there.
            (&[at(100.0, 10), at(200.0, 11)], Some((100.0, true))),
            // An early violation followed by points within: noise; the
            // crossing is after the last point within.
            (
                &[at(50.0, 1), at(100.0, 20), at(150.0, 1), at(200.0, 100)],
                Some((175.0, true)),
            ),
        ];
        for (pts, want) in cases {
            let got = slo_violating_rps(pts, slo);
            match (got, want) {
                (None, None) => {}
                (Some(g), Some(w)) => {
                    assert!(
                        (g.0 - w.0).abs() < 1e-6 && g.1 == w.1,
                        "{pts:?}: {g:?} vs {w:?}"
                    )
                }
                _ => panic!("{pts:?}: {got:?} vs {want:?}"),
            }
        }
    }

    fn run_with(
        settled_p: &[u64],
        other_p: &[u64],
        goodput: f64,
        pooled: Option<(u64, bool)>,
    ) -> Analysis {
        let row = |p: u64, settled: bool| Second {
            t_s: 0,
            load: if settled { 1.15 } else { 0.6 },
            offered_rps: 1.0,
            achieved_rps: 1.0,
            goodput_rps: goodput,
            drop_rate: 0.0,
            p99_ns: p,
            slo_percentile_ns: p,
            at_least: false,
            samples: 1,
            lost: 0,
            floor_max_gap_ns: 0,
            settled,
        };
        Analysis {
            seconds: other_p
                .iter()
                .map(|&p| row(p, false))
                .chain(settled_p.iter().map(|&p| row(p, true)))
                .collect(),
            settled_percentile: pooled,
        }
    }

    #[test]
    fn targets_hold_and_fail_on_their_thresholds() {
        let ms = 1_000_000u64;
        // 20 settled seconds, one at 12 ms (beyond 1.1×): 95 % holds.
        let mut within = vec![9 * ms; 19];
        within.push(12 * ms);
        let good = run_with(&within, &[2 * ms], 900.0, None);
        // Two beyond: 90 %, fails.
        let mut two = vec![9 * ms; 18];
        two.extend([12 * ms, 12 * ms]);
        let bad = run_with(&two, &[2 * ms], 899.0, None);
        let aiad = run_with(&[15 * ms], &[30 * ms], 0.0, None);
        let none_hi = run_with(&[], &[], 0.0, Some((101 * ms, true)));
        let none_lo = run_with(&[], &[], 0.0, Some((100 * ms, false)));
        let t = targets(
            &DistResult {
                name: "exp",
                slo_violating_rps: Some(1000.0),
                none: Some(&none_hi),
                aiad: Some(&aiad),
                default: Some(&good),
            },
            SLO,
        );
        assert_eq!(
            t.iter().map(|x| x.holds).collect::<Vec<_>>(),
            [Some(true), Some(true), Some(true), Some(true)],
            "{t:?}"
        );
        let t = targets(
            &DistResult {
                name: "exp",
                slo_violating_rps: Some(1000.0),
                none: Some(&none_lo),
                aiad: Some(&good),
                default: Some(&bad),
            },
            SLO,
        );
        // bad's overshoot (1.2×) equals good's: not smaller.
        assert_eq!(
            t.iter().map(|x| x.holds).collect::<Vec<_>>(),
            [Some(false), Some(false), Some(false), Some(false)],
            "{t:?}"
        );
        let t = targets(
            &DistResult {
                name: "exp",
                slo_violating_rps: None,
                none: None,
                aiad: None,
                default: None,
            },
            SLO,
        );
        assert!(t.iter().all(|x| x.holds.is_none()), "{t:?}");
    }
}
