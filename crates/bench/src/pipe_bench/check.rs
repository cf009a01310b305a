//! What a point's deliveries prove: the order at each receiver, the
//! atomicity of each scattering, and how long delivery took to resume
//! after a failure.

use std::collections::HashSet;

use super::rig::Rec;

/// Deliveries that did not come strictly after the one before in
/// ⟨timestamp, sender⟩ order (a repeat counts too). Every receiver of
/// 1Pipe delivers in that one order, so any two agree on the order of
/// what both deliver.
pub fn ordering_violations(recs: &[Rec]) -> u64 {
    recs.windows(2)
        .filter(|w| (w[1].ts, w[1].src) <= (w[0].ts, w[0].src))
        .count() as u64
}

/// A sender's scatterings, for the atomicity check.
pub struct Sent<'a> {
    /// The sender.
    pub id: u32,
    /// Timestamp and receivers (bit per process) of each scattering.
    pub sent: &'a [(u64, u64)],
    /// Timestamps of its scatterings reported failed (`send_fail`).
    pub failed: &'a [u64],
}

/// The outcome of the atomicity check.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Atomicity {
    /// Scatterings checked.
    pub scatterings: u64,
    /// Delivered to some of their correct receivers but not to all.
    pub violations: u64,
    /// From a correct sender, never reported failed, and yet delivered to
    /// none of their correct receivers: lost.
    pub lost: u64,
}

/// Checks every scattering against what the correct receivers delivered.
/// `correct[p]`: process `p` neither failed nor was fenced; `recs[p]`: its
/// deliveries.
pub fn atomicity(senders: &[Sent], recs: &[&[Rec]], correct: &[bool]) -> Atomicity {
    let got: Vec<HashSet<(u32, u64)>> = recs
        .iter()
        .map(|r| r.iter().map(|d| (d.src, d.ts)).collect())
        .collect();
    let mut a = Atomicity::default();
    for s in senders {
        let failed: HashSet<u64> = s.failed.iter().copied().collect();
        for &(ts, mask) in s.sent {
            a.scatterings += 1;
            let (mut want, mut have) = (0u32, 0u32);
            for (p, ok) in correct.iter().enumerate() {
                if *ok && p < 64 && mask & (1 << p) != 0 {
                    want += 1;
                    if got.get(p).is_some_and(|g| g.contains(&(s.id, ts))) {
                        have += 1;
                    }
                }
            }
            if have > 0 && have < want {
                a.violations += 1;
            } else if have == 0
                && want > 0
                && correct.get(s.id as usize) == Some(&true)
                && !failed.contains(&ts)
            {
                a.lost += 1;
            }
        }
    }
    a
}

/// How long after `t` (monotonic ns) delivery resumed at every receiver
/// in `recs`: per receiver, from `t` to its first delivery of a message
/// stamped after `t`; the longest of those. `None` if some receiver
/// delivered nothing stamped after `t`, or there is none.
pub fn resumed_after(recs: &[&[Rec]], t: u64) -> Option<u64> {
    if recs.is_empty() {
        return None;
    }
    let mut worst = 0;
    for r in recs {
        let first = r.iter().find(|d| d.ts > t)?;
        worst = worst.max(first.delivered.saturating_sub(t));
    }
    Some(worst)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(src: u32, ts: u64) -> Rec {
        Rec {
            src,
            ts,
            arrived: ts + 1,
            delivered: ts + 2,
        }
    }

    #[test]
    fn ordering_counts_every_step_back_and_repeat() {
        let cases: &[(&[(u32, u64)], u64)] = &[
            (&[], 0),
            (&[(1, 5)], 0),
            (&[(1, 5), (2, 5), (1, 6)], 0),
            (&[(2, 5), (1, 5)], 1),
            (&[(1, 5), (1, 5)], 1),
            (&[(1, 9), (1, 5), (1, 7), (1, 6)], 2),
        ];
        for (seq, want) in cases {
            let recs: Vec<Rec> = seq.iter().map(|&(s, t)| rec(s, t)).collect();
            assert_eq!(ordering_violations(&recs), *want, "{seq:?}");
        }
    }

    #[test]
    fn atomicity_table() {
        // Process 0 sends to 1 and 2 (mask 0b110); process 3 is failed.
        /// Delivered at 1, at 2; reported failed; sender correct; want.
        type Case<'a> = (
            &'a [(u32, u64)],
            &'a [(u32, u64)],
            &'a [u64],
            bool,
            Atomicity,
        );
        let cases: &[Case] = &[
            // Both correct receivers: fine.
            (
                &[(0, 10)],
                &[(0, 10)],
                &[],
                true,
                Atomicity {
                    scatterings: 1,
                    ..Atomicity::default()
                },
            ),
            // One of two: a violation.
            (
                &[(0, 10)],
                &[],
                &[],
                true,
                Atomicity {
                    scatterings: 1,
                    violations: 1,
                    lost: 0,
                },
            ),
            // None, not reported failed: lost.
            (
                &[],
                &[],
                &[],
                true,
                Atomicity {
                    scatterings: 1,
                    violations: 0,
                    lost: 1,
                },
            ),
            // None, reported failed: fine.
            (
                &[],
                &[],
                &[10],
                true,
                Atomicity {
                    scatterings: 1,
                    ..Atomicity::default()
                },
            ),
            // None, from a sender that failed: fine.
            (
                &[],
                &[],
                &[],
                false,
                Atomicity {
                    scatterings: 1,
                    ..Atomicity::default()
                },
            ),
        ];
        for (at1, at2, failed, sender_ok, want) in cases {
            let r1: Vec<Rec> = at1.iter().map(|&(s, t)| rec(s, t)).collect();
            let r2: Vec<Rec> = at2.iter().map(|&(s, t)| rec(s, t)).collect();
            let sent = [(10u64, 0b110u64)];
            let s = [Sent {
                id: 0,
                sent: &sent,
                failed,
            }];
            let correct = [*sender_ok, true, true, false];
            let got = atomicity(&s, &[&[], &r1, &r2, &[]], &correct);
            assert_eq!(got, *want, "{at1:?} {at2:?} {failed:?} {sender_ok}");
        }
        // A failed receiver does not count: delivered to 1 only, 2 failed.
        let r1 = [rec(0, 10)];
        let sent = [(10u64, 0b110u64)];
        let s = [Sent {
            id: 0,
            sent: &sent,
            failed: &[],
        }];
        let got = atomicity(&s, &[&[], &r1, &[], &[]], &[true, true, false, true]);
        assert_eq!(got.violations, 0);
    }

    #[test]
    fn resumption_is_the_slowest_receiver() {
        let a = [rec(1, 5), rec(1, 20)]; // after 10: delivered at 22
        let b = [rec(2, 15)]; // delivered at 17
        assert_eq!(resumed_after(&[&a, &b], 10), Some(12));
        assert_eq!(resumed_after(&[&a, &b], 20), None);
        assert_eq!(resumed_after(&[], 0), None);
    }
}
