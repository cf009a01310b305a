//! Slot arithmetic of the periodic sender.

use crate::{Nanos, ParamsError};

/// The slot grid of a tunnel: slot `k` starts at `first + k·π` and its window is
/// `[first + k·π, first + (k+1)·π)`.
///
/// Rules:
/// * at most one frame per window ("once during every period", paper §2.1);
/// * a frame sent at `now` belongs to the window containing `now`, so it always
///   leaves inside its own window (a late poll sends now, in the current window);
/// * windows that passed without a poll are skipped, never made up for (no burst).
///
/// Two pointers: `next_due` is the first window the periodic poll still has to
/// serve; `next_free` the first window in which a frame may still be sent. An idle
/// poll (nothing to send) advances only `next_due`, so an explicit
/// [`crate::PeriodicSender::transmit_now`] may still use that window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlotClock {
    first: Nanos,
    period: Nanos,
    next_due: u64,
    next_free: u64,
}

/// A window claimed for one frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Claim {
    /// Slot index `k`.
    pub index: u64,
    /// Start of the slot, `first + k·π`.
    pub slot: Nanos,
    /// Windows between the one that was due and this one that nobody polled in.
    pub missed: u64,
}

impl SlotClock {
    /// A grid starting at `first` with period `period` (> 0).
    pub fn new(first: Nanos, period: Nanos) -> Result<Self, ParamsError> {
        if period == 0 {
            return Err(ParamsError::ZeroPeriod);
        }
        Ok(SlotClock {
            first,
            period,
            next_due: 0,
            next_free: 0,
        })
    }

    /// The period π.
    pub fn period(&self) -> Nanos {
        self.period
    }

    /// Start of slot `k` (saturating at `u64::MAX`).
    pub fn slot_time(&self, k: u64) -> Nanos {
        self.first.saturating_add(k.saturating_mul(self.period))
    }

    /// Index of the window containing `now`, or `None` before the first slot.
    pub fn index_at(&self, now: Nanos) -> Option<u64> {
        now.checked_sub(self.first).map(|d| d / self.period)
    }

    /// When the periodic poll is next due.
    pub fn next_due(&self) -> Nanos {
        self.slot_time(self.next_due)
    }

    /// Earliest time a frame may be sent.
    pub fn next_free(&self) -> Nanos {
        self.slot_time(self.next_free)
    }

    /// `true` if the periodic poll is due at `now`.
    pub fn is_due(&self, now: Nanos) -> bool {
        now >= self.next_due()
    }

    /// Claims the window containing `now` for a frame, or says when the next free
    /// window starts (`Err(next_free)`): before the first slot, or if this window
    /// already carried a frame.
    pub fn claim(&mut self, now: Nanos) -> Result<Claim, Nanos> {
        let k = match self.index_at(now) {
            Some(k) if k >= self.next_free => k,
            _ => return Err(self.next_free()),
        };
        let missed = k.saturating_sub(self.next_due);
        self.next_free = k + 1;
        self.next_due = self.next_due.max(k + 1);
        Ok(Claim {
            index: k,
            slot: self.slot_time(k),
            missed,
        })
    }

    /// The poll found nothing to send: the periodic poll moves on to the next
    /// window. Returns the windows nobody polled in (as in [`Claim::missed`]).
    pub fn pass(&mut self, now: Nanos) -> u64 {
        match self.index_at(now) {
            Some(k) if k >= self.next_due => {
                let missed = k - self.next_due;
                self.next_due = k + 1;
                missed
            }
            _ => 0,
        }
    }
}

/// Where a tunnel's slot grid starts when it starts at `now`: the first
/// multiple of `period` after `now` (so the first window is whole, and a
/// host's tunnels of one period share its phase whatever the moment each
/// was set up). `period` 0 reads as 1.
pub fn first_slot_after(now: Nanos, period: Nanos) -> Nanos {
    let period = period.max(1);
    (now / period + 1).saturating_mul(period)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_slot_table() {
        // (now, period, first slot)
        let rows: &[(Nanos, Nanos, Nanos)] = &[
            (0, 10, 10),
            (9, 10, 10),
            (10, 10, 20),
            (11, 10, 20),
            (1_000_000_123, 1_000_000, 1_001_000_000),
            (5, 0, 6),
            (u64::MAX - 1, 10, u64::MAX),
        ];
        for &(now, period, want) in rows {
            assert_eq!(first_slot_after(now, period), want, "now {now}, π {period}");
        }
    }

    #[test]
    fn grid_claims_table() {
        // (action, now, expected) with π = 10, first = 100.
        enum A {
            Claim(Result<(u64, u64, u64), u64>),
            Pass(u64),
        }
        let steps: &[(Nanos, A)] = &[
            (99, A::Claim(Err(100))),
            (100, A::Claim(Ok((0, 100, 0)))),
            (109, A::Claim(Err(110))),
            (115, A::Claim(Ok((1, 110, 0)))),
            (147, A::Claim(Ok((4, 140, 2)))),
            (150, A::Pass(0)),
            (155, A::Claim(Ok((5, 150, 0)))), // idle poll left the window free
            (181, A::Pass(2)),
        ];
        let mut c = SlotClock::new(100, 10).unwrap();
        for (i, (now, a)) in steps.iter().enumerate() {
            match a {
                A::Claim(want) => {
                    let got = c.claim(*now).map(|c| (c.index, c.slot, c.missed));
                    assert_eq!(got, *want, "step {i}");
                }
                A::Pass(want) => assert_eq!(c.pass(*now), *want, "step {i}"),
            }
        }
        assert_eq!(c.next_due(), 190);
        assert_eq!(SlotClock::new(0, 0), Err(ParamsError::ZeroPeriod));
    }
}
