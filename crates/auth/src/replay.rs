//! The replay window: the highest sequence number seen and a bitmap of
//! the 63 below it.

/// Sequence numbers remembered: the highest and the 63 below it.
pub const WINDOW: u64 = 64;

/// What [`ReplayWindow::check_and_record`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Not seen: recorded.
    Fresh,
    /// Seen before.
    Seen,
    /// Older than the window: refused, as it cannot be told apart from a
    /// replay.
    TooOld,
}

/// One sender's window (per key).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReplayWindow {
    highest: u64,
    /// Bit `i`: `highest − i` was seen.
    seen: u64,
}

impl ReplayWindow {
    /// Checks `seq` and records it if fresh. Sequence number 0 is never
    /// fresh (a sealer's first is at least 1).
    pub fn check_and_record(&mut self, seq: u64) -> Verdict {
        if seq == 0 {
            return Verdict::TooOld;
        }
        if seq > self.highest {
            let shift = seq - self.highest;
            self.seen = if shift >= WINDOW {
                0
            } else {
                self.seen << shift
            };
            self.seen |= 1;
            self.highest = seq;
            return Verdict::Fresh;
        }
        let back = self.highest - seq;
        if back >= WINDOW {
            return Verdict::TooOld;
        }
        let bit = 1u64 << back;
        if self.seen & bit != 0 {
            Verdict::Seen
        } else {
            self.seen |= bit;
            Verdict::Fresh
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_window_table() {
        let mut w = ReplayWindow::default();
        let rows: &[(u64, Verdict)] = &[
            (0, Verdict::TooOld),
            (10, Verdict::Fresh),
            (10, Verdict::Seen),
            (8, Verdict::Fresh), // late but inside the window
            (8, Verdict::Seen),
            (9, Verdict::Fresh),
            (73, Verdict::Fresh), // 10 is 63 back: still inside
            (10, Verdict::Seen),
            (9, Verdict::TooOld), // 64 back
            (1_000, Verdict::Fresh),
            (937, Verdict::Fresh), // 63 back, never seen
            (936, Verdict::TooOld),
            (999, Verdict::Fresh),
            (1_000, Verdict::Seen),
        ];
        for (i, &(seq, want)) in rows.iter().enumerate() {
            assert_eq!(w.check_and_record(seq), want, "row {i}: seq {seq}");
        }
    }
}
