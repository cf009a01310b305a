//! Which heartbeat silences of `xlane bench fd` the machine explains: the
//! strict host-gap rule, the one `xlane bench bounds` applies to packets
//! ([`crate::bounds_check`]).
//!
//! A detector with threshold Λ wrongly suspects a live sender when the
//! silence before one of its heartbeats reaches a level above Λ (for a
//! timeout, the level is the silence's length − T). Such a silence is
//! **explained by host gaps** when the floor probes recorded, inside it,
//! enough time taken from the machine to cover its excess over the
//! threshold: without the stolen time it would have stayed within Λ. The
//! recorded gap time only counts (never the probe interval before a gap,
//! where a stall may have begun unseen), the gaps of the cores the path
//! runs on are merged first so that time taken from two of them at once
//! counts once, and a gap counts only for the part of it that lies inside
//! the silence.
//!
//! The smallest Λ at which every silence is within Λ or explained is
//! `max over silences of level(length − gap time inside it)`: a silence
//! whose gap time covers only part of its excess keeps the rest in the
//! threshold. The silences **set aside** at that Λ are those whose level
//! exceeds it: the false suspicions the threshold would have made had the
//! machine not taken the time away.
//!
//! The excess is counted over the threshold, not over T alone, as bounds
//! counts a late packet's excess over its range's maximum. An all-or-nothing
//! rule against T would keep a 30 ms stall whole in the threshold when its
//! recorded gap time falls a few µs short of the silence; and it always
//! can: a probe sees a stall only at its next wake-up (up to one probe
//! interval after it began), and after a stall the lane's threads run one
//! after the other, so the silence outlasts the recorded gap.

use crate::attribution::GapIndex;
use xlane_fd::model::phi_of_z;

/// The rule in one line, for reports.
pub const RULE: &str = "strict: an interval counts as explained by host gaps at threshold Λ when the gap time the floor probes recorded inside it (on the cores its path runs on, merged, no probe-interval lead) covers its excess over T + Λ; the smallest perfect Λ is the largest level an interval would have reached without its gap time";

/// How a detector's level grows with the silence.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Shape {
    /// A fixed timeout: level = silence − T, ns.
    Timeout,
    /// Phi-accrual with the estimates it held during the silence:
    /// level = φ((silence − μ) / σ).
    Phi {
        /// μ, ns.
        mean_ns: f64,
        /// σ, ns (floored).
        std_ns: f64,
    },
}

/// One silence: an inter-arrival interval and the level the detector
/// reached at its end.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Silence {
    /// The previous arrival, `CLOCK_REALTIME` ns.
    pub from_ns: u64,
    /// The arrival that ended it, `CLOCK_REALTIME` ns.
    pub to_ns: u64,
    /// The detector's level just before that arrival.
    pub level: f64,
    /// How the level follows from the silence's length.
    pub shape: Shape,
}

impl Silence {
    /// The level the detector would have reached had `stolen_ns` of the
    /// silence not been taken away.
    pub fn level_without(&self, stolen_ns: u64) -> f64 {
        let len = self.to_ns.saturating_sub(self.from_ns);
        let stolen = stolen_ns.min(len);
        match self.shape {
            Shape::Timeout => self.level - stolen as f64,
            Shape::Phi { mean_ns, std_ns } => {
                phi_of_z(((len - stolen) as f64 - mean_ns) / std_ns.max(1e-9))
            }
        }
    }

    /// At threshold `threshold`, is this silence a false suspicion that the
    /// gap time inside it explains?
    pub fn explained_at(&self, threshold: f64, gaps: &GapIndex) -> bool {
        self.level > threshold
            && self.level_without(gaps.overlap(self.from_ns, self.to_ns)) <= threshold
    }
}

/// The smallest perfect threshold outside host gaps.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct OutsideGaps {
    /// The smallest threshold at which every silence is within it or
    /// explained by host gaps (`None` without any interval).
    pub threshold: Option<f64>,
    /// Silences above it, each explained by host gaps.
    pub set_aside: u64,
}

/// The strict rule over a detector's silences. `kept_max` is the highest
/// level of the silences not checked against gaps (kept whole); `silences`
/// are the others.
pub fn min_perfect_outside_gaps(
    kept_max: Option<f64>,
    silences: &[Silence],
    gaps: &GapIndex,
) -> OutsideGaps {
    let mut threshold = kept_max;
    for s in silences {
        let l = s.level_without(gaps.overlap(s.from_ns, s.to_ns));
        threshold = Some(threshold.map_or(l, |m: f64| m.max(l)));
    }
    let set_aside = threshold.map_or(0, |t| silences.iter().filter(|s| s.level > t).count()) as u64;
    OutsideGaps {
        threshold,
        set_aside,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use xlane_host::floor::Gap;

    const MS: u64 = 1_000_000;
    const US: u64 = 1_000;
    const T: u64 = MS;

    fn gap(start: u64, len: u64) -> Gap {
        Gap {
            start_realtime_ns: start,
            len_ns: len,
        }
    }

    /// A timeout silence `[from, to)` (level = length − T).
    fn timeout(from: u64, to: u64) -> Silence {
        Silence {
            from_ns: from,
            to_ns: to,
            level: (to - from) as f64 - T as f64,
            shape: Shape::Timeout,
        }
    }

    #[test]
    fn strict_rule_table() {
        // One silence [10 ms, 16 ms): level 5 ms; the silences checked
        // nowhere else reached 10 µs.
        let (from, to) = (10 * MS, 16 * MS);
        let kept = Some((10 * US) as f64);
        // (case, gaps, smallest perfect Λ, set aside)
        let cases: Vec<(&str, Vec<Gap>, f64, u64)> = vec![
            ("no gap", vec![], (5 * MS) as f64, 0),
            (
                "excess fully covered: set aside",
                vec![gap(11 * MS, 5 * MS)],
                (10 * US) as f64,
                1,
            ),
            (
                "excess covered down to the rest's level: set aside",
                vec![gap(11 * MS, 5 * MS - 10 * US)],
                (10 * US) as f64,
                1,
            ),
            (
                "covered 50 µs short: kept, and only those 50 µs count",
                vec![gap(11 * MS, 5 * MS - 50 * US)],
                (50 * US) as f64,
                1,
            ),
            (
                "partly covered: the uncovered 1 ms stays",
                vec![gap(11 * MS, 4 * MS)],
                MS as f64,
                1,
            ),
            (
                "gaps outside the silence do not count",
                vec![gap(4 * MS, 6 * MS), gap(16 * MS, 5 * MS)],
                (5 * MS) as f64,
                0,
            ),
            (
                "a gap across its start counts only inside",
                vec![gap(8 * MS, 5 * MS)],
                (2 * MS) as f64,
                1,
            ),
            (
                "overlapping gaps (two cores at once) count once",
                vec![gap(11 * MS, 3 * MS), gap(12 * MS, 3 * MS)],
                MS as f64,
                1,
            ),
            (
                "a zero-length gap is no gap",
                vec![gap(11 * MS, 0)],
                (5 * MS) as f64,
                0,
            ),
        ];
        for (case, g, want, aside) in cases {
            let idx = GapIndex::new(g.iter());
            let got = min_perfect_outside_gaps(kept, &[timeout(from, to)], &idx);
            assert_eq!(got.threshold, Some(want), "{case}");
            assert_eq!(got.set_aside, aside, "{case}");
        }
    }

    #[test]
    fn explained_only_when_the_excess_over_the_threshold_is_covered() {
        // Level 5 ms, 4 ms of gap time inside.
        let s = timeout(10 * MS, 16 * MS);
        let idx = GapIndex::new([gap(11 * MS, 4 * MS)].iter());
        // (threshold, explained)
        let cases = [
            (0.0, false),
            ((10 * US) as f64, false),
            ((MS - 1) as f64, false),
            (MS as f64, true),
            ((3 * MS) as f64, true),
            // Within the threshold: no false suspicion to explain.
            ((5 * MS) as f64, false),
        ];
        for (th, want) in cases {
            assert_eq!(s.explained_at(th, &idx), want, "Λ = {th}");
        }
    }

    #[test]
    fn several_silences_and_what_is_set_aside() {
        let idx = GapIndex::new([gap(11 * MS, 5 * MS), gap(31 * MS, 2 * MS)].iter());
        let silences = [
            timeout(10 * MS, 16 * MS),            // level 5 ms, covered: 0
            timeout(30 * MS, 34 * MS),            // level 3 ms, 2 ms covered: 1 ms
            timeout(50 * MS, 51 * MS + 400 * US), // level 400 µs, no gap
        ];
        let got = min_perfect_outside_gaps(None, &silences, &idx);
        assert_eq!(got.threshold, Some(MS as f64));
        // Above 1 ms: the first two, each explained there.
        assert_eq!(got.set_aside, 2);
        assert!(silences[..2]
            .iter()
            .all(|s| s.explained_at(MS as f64, &idx)));
        assert!(!silences[2].explained_at(MS as f64, &idx));
        // Nothing at all.
        assert_eq!(
            min_perfect_outside_gaps(None, &[], &idx),
            OutsideGaps::default()
        );
        // Never above the raw maximum.
        let raw = silences.iter().map(|s| s.level).fold(0.0, f64::max);
        assert!(got.threshold.unwrap() <= raw);
    }

    #[test]
    fn phi_levels_follow_the_silence_without_the_gap() {
        let (mean, std) = (MS as f64, 100.0 * US as f64);
        let s = Silence {
            from_ns: 10 * MS,
            to_ns: 16 * MS,
            level: phi_of_z((6.0 * MS as f64 - mean) / std),
            shape: Shape::Phi {
                mean_ns: mean,
                std_ns: std,
            },
        };
        // 4.8 ms of 6 ms taken: as if 1.2 ms had passed, 2 σ above μ.
        let idx = GapIndex::new([gap(11 * MS, 4_800 * US)].iter());
        let got = min_perfect_outside_gaps(Some(1.0), &[s], &idx);
        let want = phi_of_z(2.0);
        assert!((got.threshold.unwrap() - want).abs() < 1e-9, "{got:?}");
        assert_eq!(got.set_aside, 1);
        // Gap time beyond the silence's length cannot make it negative.
        assert!(s.level_without(u64::MAX) <= s.level);
    }
}
