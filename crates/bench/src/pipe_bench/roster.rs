//! Who is still in a point and when it stops sending: the processes the
//! failure schedule killed or cut, those fenced after the hop reported
//! their link silent, and the point's sending window. Time is passed in
//! (monotonic ns); no I/O, so a point that ends before it starts can be
//! replayed in a test.

use serde::Serialize;

use crate::stats::signed_diff;

/// A point's sending window, `[start, end)` in monotonic ns. `start ≤ end`
/// holds by construction, so its length never underflows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    start: u64,
    end: u64,
}

impl Window {
    /// The window from `start` to `end`; `None` when `end` comes first.
    pub fn new(start: u64, end: u64) -> Option<Window> {
        (start <= end).then_some(Window { start, end })
    }

    /// Where it starts.
    pub fn start(self) -> u64 {
        self.start
    }

    /// Where it ends (excluded).
    pub fn end(self) -> u64 {
        self.end
    }

    /// Its length, ns.
    pub fn len_ns(self) -> u64 {
        // start ≤ end: checked in `new`.
        self.end - self.start
    }

    /// The end of the warm-up, a tenth of the way in.
    pub fn warmed_up(self) -> u64 {
        self.start + self.len_ns() / 10
    }
}

/// How a process left a point.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Cause {
    /// The failure schedule killed it.
    Killed,
    /// The failure schedule cut its host's link.
    Cut,
    /// It was up, but the hop reported its link silent (the machine held
    /// it back past the deadline) and, in reliable mode, the bench fenced
    /// it.
    FencedAfterSilence,
}

impl Cause {
    /// Who took it out, in words.
    pub fn describe(self) -> &'static str {
        match self {
            Cause::Killed => "killed by the failure schedule",
            Cause::Cut => "cut off by the failure schedule",
            Cause::FencedAfterSilence => "fenced after the hop reported its link silent",
        }
    }
}

/// A process out of a point.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Removal {
    /// The process.
    pub proc: u32,
    /// Who took it out.
    pub cause: Cause,
    /// When, since the point's start, ns; negative: before the start.
    pub at_ns: i64,
}

/// The processes of a point and its planned end.
#[derive(Debug)]
pub struct Roster {
    start: u64,
    end: u64,
    /// Killed or cut: when, and which.
    failed: Vec<Option<(Cause, u64)>>,
    /// Fenced after a silence report: when.
    fenced: Vec<Option<u64>>,
    quiet: bool,
    ended_early: bool,
}

/// How a point went, once it stopped sending.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    /// Its sending window (empty at the start if it ended before it).
    pub window: Window,
    /// Sending stopped early: fewer than two correct processes were left.
    pub ended_early: bool,
    /// It stopped before its start: nothing it delivered is measured.
    pub ended_before_start: bool,
    /// Every process out of the point, in process order.
    pub removed: Vec<Removal>,
}

impl Roster {
    /// `procs` processes, sending from `start` to `planned_end`.
    pub fn new(procs: usize, start: u64, planned_end: u64) -> Roster {
        Roster {
            start,
            end: planned_end.max(start),
            failed: vec![None; procs],
            fenced: vec![None; procs],
            quiet: false,
            ended_early: false,
        }
    }

    /// Process `q` killed or cut at `at` (the first failure counts).
    pub fn fail(&mut self, q: usize, cause: Cause, at: u64) {
        if let Some(f) = self.failed.get_mut(q) {
            f.get_or_insert((cause, at));
        }
    }

    /// Process `q` fenced at `at` (the first fencing counts).
    pub fn fence(&mut self, q: usize, at: u64) {
        if let Some(f) = self.fenced.get_mut(q) {
            f.get_or_insert(at);
        }
    }

    /// `q` was killed or cut (a real failure, not a false suspicion).
    pub fn failed(&self, q: usize) -> bool {
        self.failed.get(q).is_some_and(Option::is_some)
    }

    /// Per process: neither failed nor fenced.
    pub fn correct(&self) -> Vec<bool> {
        self.failed
            .iter()
            .zip(&self.fenced)
            .map(|(f, x)| f.is_none() && x.is_none())
            .collect()
    }

    /// Called every turn: true once, when the point must stop sending —
    /// its planned end passed, `enough` was delivered, or fewer than two
    /// correct processes are left (then it ended early).
    pub fn poll_end(&mut self, now: u64, enough: bool) -> bool {
        if self.quiet {
            return false;
        }
        if self.correct().iter().filter(|c| **c).count() < 2 {
            self.ended_early = true;
        }
        if now >= self.end || enough || self.ended_early {
            self.end = self.end.min(now);
            self.quiet = true;
            return true;
        }
        false
    }

    /// When sending stops (or stopped), monotonic ns.
    pub fn end(&self) -> u64 {
        self.end
    }

    /// How it went.
    pub fn outcome(&self) -> Outcome {
        let ended_before_start = self.end < self.start;
        let window = Window::new(self.start, self.end).unwrap_or(Window {
            start: self.start,
            end: self.start,
        });
        let removed = (0..self.failed.len())
            .filter_map(|q| {
                let fenced = self.fenced[q].map(|at| (Cause::FencedAfterSilence, at));
                // The earlier of the two is why it left.
                let (cause, at) = match (self.failed[q], fenced) {
                    (Some(f), Some(x)) => {
                        if x.1 < f.1 {
                            x
                        } else {
                            f
                        }
                    }
                    (f, x) => f.or(x)?,
                };
                Some(Removal {
                    proc: q as u32,
                    cause,
                    at_ns: signed_diff(at, self.start),
                })
            })
            .collect();
        Outcome {
            window,
            ended_early: self.ended_early,
            ended_before_start,
            removed,
        }
    }
}

/// Why a point stopped early, in one line (`None` if it did not).
pub fn describe_early_end(
    ended_early: bool,
    before_start: bool,
    removed: &[Removal],
) -> Option<String> {
    if !ended_early && !before_start {
        return None;
    }
    let when = if before_start {
        "ended before it started"
    } else {
        "ended early"
    };
    let who: Vec<String> = removed
        .iter()
        .map(|r| {
            let at = crate::table::fmt_ns(r.at_ns.unsigned_abs());
            let rel = if r.at_ns < 0 { "before" } else { "after" };
            format!(
                "process {} {} {at} {rel} the start",
                r.proc,
                r.cause.describe()
            )
        })
        .collect();
    Some(format!(
        "{when}: fewer than two correct processes were left ({})",
        if who.is_empty() {
            "none removed".to_string()
        } else {
            who.join("; ")
        }
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn a_window_is_never_negative() {
        assert_eq!(Window::new(10, 5), None);
        let w = Window::new(1_000, 2_000).unwrap();
        assert_eq!((w.len_ns(), w.warmed_up()), (1_000, 1_100));
        assert_eq!(Window::new(7, 7).unwrap().len_ns(), 0);
    }

    /// The CI failure of issue 39: six reliable processes, the hop
    /// reports five of them silent while the point has not started yet.
    #[test]
    fn every_process_but_one_fenced_before_the_start_is_reported_so() {
        let start = 1_000 * MS;
        let mut r = Roster::new(6, start, start + 2_000 * MS);
        assert!(!r.poll_end(start - 40 * MS, false));
        for q in [0, 2, 3, 4, 5] {
            r.fence(q, start - 30 * MS + q as u64);
        }
        assert!(r.poll_end(start - 29 * MS, false));
        assert!(!r.poll_end(start - 28 * MS, false), "ends once");
        let o = r.outcome();
        assert!(o.ended_early && o.ended_before_start);
        assert_eq!(o.window, Window::new(start, start).unwrap());
        assert_eq!(o.removed.len(), 5);
        assert!(o
            .removed
            .iter()
            .all(|x| x.cause == Cause::FencedAfterSilence && x.at_ns < 0));
        assert_eq!(r.correct(), vec![false, true, false, false, false, false]);
        let line = describe_early_end(o.ended_early, o.ended_before_start, &o.removed).unwrap();
        assert!(line.starts_with("ended before it started"), "{line}");
        assert!(
            line.contains(
                "process 0 fenced after the hop reported its link silent 30.00ms before the start"
            ),
            "{line}"
        );
    }

    /// (fails, fences, poll at, want ended early, before start, removed).
    #[test]
    fn the_first_cause_is_why_a_process_left() {
        type Case = (
            &'static [(usize, Cause, u64)],
            &'static [(usize, u64)],
            u64,
            (bool, bool),
            &'static [(u32, Cause, i64)],
        );
        let s = 100;
        let cases: &[Case] = &[
            // Nobody left: the planned end.
            (&[], &[], 300, (false, false), &[]),
            // A kill, then its fencing: killed.
            (
                &[(1, Cause::Killed, 150)],
                &[(1, 160)],
                300,
                (false, false),
                &[(1, Cause::Killed, 50)],
            ),
            // Fenced falsely, then killed by the schedule: fenced.
            (
                &[(0, Cause::Killed, 170)],
                &[(0, 120)],
                300,
                (false, false),
                &[(0, Cause::FencedAfterSilence, 20)],
            ),
            // Two of three cut: ended early, after the start.
            (
                &[(1, Cause::Cut, 180), (2, Cause::Cut, 180)],
                &[],
                190,
                (true, false),
                &[(1, Cause::Cut, 80), (2, Cause::Cut, 80)],
            ),
            // Every process failed before the start.
            (
                &[(0, Cause::Killed, 10), (1, Cause::Killed, 20)],
                &[(2, 30)],
                40,
                (true, true),
                &[
                    (0, Cause::Killed, -90),
                    (1, Cause::Killed, -80),
                    (2, Cause::FencedAfterSilence, -70),
                ],
            ),
        ];
        for (fails, fences, at, (early, before), want) in cases {
            let mut r = Roster::new(3, s, s + 200);
            for &(q, c, t) in *fails {
                r.fail(q, c, t);
            }
            for &(q, t) in *fences {
                r.fence(q, t);
            }
            r.poll_end(*at, false);
            let o = r.outcome();
            let got: Vec<(u32, Cause, i64)> = o
                .removed
                .iter()
                .map(|x| (x.proc, x.cause, x.at_ns))
                .collect();
            assert_eq!(
                (o.ended_early, o.ended_before_start, got.as_slice()),
                (*early, *before, *want),
                "{fails:?} {fences:?}"
            );
            assert!(o.window.end() >= o.window.start());
            assert_eq!(
                describe_early_end(o.ended_early, o.ended_before_start, &o.removed).is_some(),
                *early || *before
            );
        }
    }

    #[test]
    fn enough_messages_end_the_point_without_calling_it_early() {
        let mut r = Roster::new(4, 0, 1_000);
        assert!(r.poll_end(500, true));
        let o = r.outcome();
        assert_eq!((o.window.len_ns(), o.ended_early), (500, false));
        // Unknown processes are ignored, not a panic.
        r.fail(9, Cause::Killed, 1);
        r.fence(9, 1);
        assert!(!r.failed(9));
    }
}
