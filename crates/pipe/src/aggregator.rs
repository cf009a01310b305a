//! A hop's barrier (1Pipe's switch logic, run by `xlane pipe switchd` as
//! the switch's host representative): the minimum, over the input links,
//! of the last barrier each link carried.
//!
//! Every packet that comes in on a link sets that link's register to the
//! packet's barriers; the hop's barrier is the minimum over its live input
//! links, and every packet it sends on (data or beacon) carries that
//! minimum instead of the one it came with. Only FIFO per link is needed,
//! so packets of one sender may take different paths.
//!
//! Links come and go:
//! - an input link silent for `dead_after` beacon intervals is reported
//!   ([`AggEvent::LinkSilent`], with its last barriers: the failure
//!   timestamp of what lies behind it) and, unless `hold_silent` is set,
//!   removed at once: it no longer holds the minimum back. Reliable 1Pipe
//!   sets `hold_silent`: the link keeps holding the barriers until the
//!   recovery has discarded and recalled what it must, and then
//!   [`Aggregator::remove_input`] lets them go;
//! - a new link is **joining** until the barrier it carries passes the
//!   hop's current one, so that the hop's barrier never goes back; then it
//!   counts ([`AggEvent::LinkUp`]).
//!
//! Both barriers are kept apart (best effort and commit) by the same rule,
//! and neither ever decreases. Output links that carried nothing for a
//! beacon interval are due a beacon ([`Aggregator::poll_beacon`]).
//!
//! Bounded: a fixed number of links, O(links) per packet (a switch has
//! tens of ports).

use crate::Nanos;

/// Most input or output links of one hop.
pub const MAX_LINKS: usize = 256;

/// Settings of a hop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AggConfig {
    /// Beacon interval: an output link idle this long gets a beacon.
    pub beacon_interval_ns: Nanos,
    /// An input link silent this many beacon intervals is reported (1Pipe
    /// uses 10).
    pub dead_after: u32,
    /// Keep a silent link (holding the barriers) until
    /// [`Aggregator::remove_input`] (reliable 1Pipe); otherwise remove it
    /// at once (best effort).
    pub hold_silent: bool,
}

impl Default for AggConfig {
    /// 100 µs beacons, a link silent after 10 intervals is removed.
    fn default() -> Self {
        AggConfig {
            beacon_interval_ns: 100_000,
            dead_after: 10,
            hold_silent: false,
        }
    }
}

/// A link of the hop (the caller's number for it).
pub type LinkId = u32;

/// What the hop tells its driver.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AggEvent {
    /// An input link was silent too long (removed unless `hold_silent`),
    /// with the last barriers it carried.
    LinkSilent {
        /// The link.
        link: LinkId,
        /// Its last best-effort barrier.
        barrier: u64,
        /// Its last commit barrier.
        commit: u64,
    },
    /// A joining input link caught up and counts from now on.
    LinkUp(LinkId),
}

/// Misuse of the hop's links.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AggError {
    /// A packet on a link the hop does not have.
    #[error("no input link {0}")]
    UnknownLink(LinkId),
    /// A packet on a held silent link: the link is fenced until
    /// [`Aggregator::remove_input`], so that its last barriers (the failed
    /// process's failure timestamp) stay final even if the process was
    /// only held back and speaks again.
    #[error("input link {0} was reported silent: fenced until removed")]
    Fenced(LinkId),
    /// A link added twice.
    #[error("link {0} exists already")]
    Exists(LinkId),
    /// More than [`MAX_LINKS`].
    #[error("more than {MAX_LINKS} links")]
    TooMany,
    /// A barrier that went back on its link (a link that is not FIFO, or
    /// a sender whose clock went back): ignored.
    #[error("link {link}: barrier went back from {was} to {now}")]
    Backwards {
        /// The link.
        link: LinkId,
        /// Its register.
        was: u64,
        /// What came.
        now: u64,
    },
}

#[derive(Clone, Copy, Debug)]
struct Input {
    id: LinkId,
    barrier: u64,
    commit: u64,
    heard: Nanos,
    joining: bool,
    /// Reported silent (and held).
    silent: bool,
    /// Its own beacon interval, when above the hop's (a lane period the
    /// controller raised): its silence limit scales with it.
    interval: Nanos,
}

#[derive(Clone, Copy, Debug)]
struct Output {
    id: LinkId,
    sent: Nanos,
}

/// One hop's barrier state.
#[derive(Clone, Debug)]
pub struct Aggregator {
    cfg: AggConfig,
    inputs: Vec<Input>,
    outputs: Vec<Output>,
    barrier: u64,
    commit: u64,
    events: Vec<AggEvent>,
}

impl Aggregator {
    /// A hop with no links, barriers at 0.
    pub fn new(cfg: AggConfig) -> Self {
        Aggregator {
            cfg,
            inputs: Vec::new(),
            outputs: Vec::new(),
            barrier: 0,
            commit: 0,
            events: Vec::new(),
        }
    }

    /// The settings it runs with.
    pub fn config(&self) -> AggConfig {
        self.cfg
    }

    /// The hop's current barriers (best effort, commit).
    pub fn barriers(&self) -> (u64, u64) {
        (self.barrier, self.commit)
    }

    /// Input links that count (not joining).
    pub fn live_inputs(&self) -> usize {
        self.inputs.iter().filter(|l| !l.joining).count()
    }

    /// Adds an input link at `now`. Links added before the hop gave out a
    /// barrier (its barriers still 0) count at once; later ones join: they
    /// count once their barrier passes the hop's.
    pub fn add_input(&mut self, id: LinkId, now: Nanos) -> Result<(), AggError> {
        if self.inputs.iter().any(|l| l.id == id) {
            return Err(AggError::Exists(id));
        }
        if self.inputs.len() >= MAX_LINKS {
            return Err(AggError::TooMany);
        }
        let started = self.barrier > 0;
        self.inputs.push(Input {
            id,
            barrier: 0,
            commit: 0,
            heard: now,
            joining: started,
            silent: false,
            interval: 0,
        });
        Ok(())
    }

    /// Adds an output link (for beacons).
    pub fn add_output(&mut self, id: LinkId, now: Nanos) -> Result<(), AggError> {
        if self.outputs.iter().any(|l| l.id == id) {
            return Err(AggError::Exists(id));
        }
        if self.outputs.len() >= MAX_LINKS {
            return Err(AggError::TooMany);
        }
        self.outputs.push(Output { id, sent: now });
        Ok(())
    }

    /// A packet (data or beacon) came in on `link` with these barriers;
    /// returns the hop's barriers, which every packet it sends on carries.
    pub fn on_packet(
        &mut self,
        link: LinkId,
        barrier: u64,
        commit: u64,
        now: Nanos,
    ) -> Result<(u64, u64), AggError> {
        self.take(link, barrier, commit, now, false)
    }

    /// A beacon of input `link`. It carries no message, so nothing is lost
    /// if it comes late: its barriers are taken by maximum, never refused
    /// as going back. A beacon that came over the express lane, a path
    /// other than its link's data, may overtake that data (its sender caps
    /// it, [`crate::lane::BarrierCap`], so that it does not); a beacon on
    /// the regular path may be overtaken by a lane beacon. Returns the
    /// hop's barriers.
    pub fn on_beacon(
        &mut self,
        link: LinkId,
        barrier: u64,
        commit: u64,
        now: Nanos,
    ) -> Result<(u64, u64), AggError> {
        self.take(link, barrier, commit, now, true)
    }

    /// Input `link`'s own beacon interval, when it is above the hop's
    /// (its lane period): it counts as silent after `dead_after` of its
    /// own intervals.
    pub fn set_input_interval(&mut self, link: LinkId, interval: Nanos) -> Result<(), AggError> {
        let l = self
            .inputs
            .iter_mut()
            .find(|l| l.id == link)
            .ok_or(AggError::UnknownLink(link))?;
        l.interval = interval;
        Ok(())
    }

    fn take(
        &mut self,
        link: LinkId,
        barrier: u64,
        commit: u64,
        now: Nanos,
        by_max: bool,
    ) -> Result<(u64, u64), AggError> {
        let l = self
            .inputs
            .iter_mut()
            .find(|l| l.id == link)
            .ok_or(AggError::UnknownLink(link))?;
        if l.silent {
            return Err(AggError::Fenced(link));
        }
        l.heard = now;
        let (barrier, commit) = if by_max {
            (l.barrier.max(barrier), l.commit.max(commit))
        } else if barrier < l.barrier || commit < l.commit {
            return Err(AggError::Backwards {
                link,
                was: l.barrier,
                now: barrier,
            });
        } else {
            (barrier, commit)
        };
        l.barrier = barrier;
        l.commit = commit;
        if l.joining && barrier > self.barrier && commit >= self.commit {
            l.joining = false;
            self.events.push(AggEvent::LinkUp(link));
        }
        self.recompute();
        Ok((self.barrier, self.commit))
    }

    /// The minimum over live inputs; never below what was already given out.
    fn recompute(&mut self) {
        let live = self.inputs.iter().filter(|l| !l.joining);
        let (b, c) = live.fold((u64::MAX, u64::MAX), |(b, c), l| {
            (b.min(l.barrier), c.min(l.commit))
        });
        if b != u64::MAX {
            self.barrier = self.barrier.max(b);
            self.commit = self.commit.max(c).min(self.barrier);
        }
    }

    /// Reports (and, unless `hold_silent`, removes) input links silent for
    /// `dead_after` beacon intervals.
    pub fn handle_timeout(&mut self, now: Nanos) {
        let cfg = self.cfg;
        let hold = cfg.hold_silent;
        let before = self.inputs.len();
        let events = &mut self.events;
        self.inputs.retain_mut(|l| {
            let dead = !l.silent && now.saturating_sub(l.heard) >= silence_limit(&cfg, l);
            if dead {
                l.silent = true;
                events.push(AggEvent::LinkSilent {
                    link: l.id,
                    barrier: l.barrier,
                    commit: l.commit,
                });
            }
            !dead || hold
        });
        self.after_removal(before);
    }

    /// Removes input link `id` (a held silent link, once the recovery is
    /// done, or a link taken out of service).
    pub fn remove_input(&mut self, id: LinkId) -> Result<(), AggError> {
        let before = self.inputs.len();
        self.inputs.retain(|l| l.id != id);
        if self.inputs.len() == before {
            return Err(AggError::UnknownLink(id));
        }
        self.after_removal(before);
        Ok(())
    }

    fn after_removal(&mut self, before: usize) {
        if self.inputs.len() != before {
            // With every counted link gone, the oldest joining one counts.
            if self.inputs.iter().all(|l| l.joining) {
                if let Some(l) = self.inputs.first_mut() {
                    l.joining = false;
                    self.events.push(AggEvent::LinkUp(l.id));
                }
            }
            self.recompute();
        }
    }

    /// The next event, if any.
    pub fn poll_event(&mut self) -> Option<AggEvent> {
        if self.events.is_empty() {
            None
        } else {
            Some(self.events.remove(0))
        }
    }

    /// A packet went out on `link` at `now` (it carried the barriers).
    pub fn on_sent(&mut self, link: LinkId, now: Nanos) {
        if let Some(o) = self.outputs.iter_mut().find(|o| o.id == link) {
            o.sent = now;
        }
    }

    /// An output link idle for a beacon interval, due a beacon with
    /// [`Self::barriers`] (marked sent).
    pub fn poll_beacon(&mut self, now: Nanos) -> Option<LinkId> {
        let iv = self.cfg.beacon_interval_ns;
        let o = self
            .outputs
            .iter_mut()
            .find(|o| now.saturating_sub(o.sent) >= iv)?;
        o.sent = now;
        Some(o.id)
    }

    /// When to call [`Self::handle_timeout`] and [`Self::poll_beacon`] next.
    pub fn poll_timeout(&self) -> Option<Nanos> {
        let iv = self.cfg.beacon_interval_ns;
        let b = self.outputs.iter().map(|o| o.sent.saturating_add(iv));
        let d = self
            .inputs
            .iter()
            .filter(|l| !l.silent)
            .map(|l| l.heard.saturating_add(silence_limit(&self.cfg, l)));
        b.chain(d).min()
    }
}

/// How long input `l` may be silent: `dead_after` of its beacon
/// intervals (the hop's, or its own if longer).
fn silence_limit(cfg: &AggConfig, l: &Input) -> Nanos {
    cfg.beacon_interval_ns
        .max(l.interval)
        .saturating_mul(u64::from(cfg.dead_after))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn agg() -> Aggregator {
        Aggregator::new(AggConfig {
            beacon_interval_ns: 10,
            dead_after: 3,
            hold_silent: false,
        })
    }

    /// (link, barrier, commit) in → the hop's (barrier, commit) out.
    #[test]
    fn the_barrier_is_the_minimum_over_links_and_never_goes_back() {
        let mut a = agg();
        // Links there from the start count at once: the minimum is 0 until
        // both have spoken.
        a.add_input(0, 0).unwrap();
        a.add_input(3, 0).unwrap();
        assert_eq!(a.on_packet(0, 100, 50, 1).unwrap(), (0, 0));
        assert_eq!(a.on_packet(3, 100, 50, 1).unwrap(), (100, 50));
        a.remove_input(3).unwrap();
        // Links 1 and 2 come later: they count once they pass.
        a.add_input(1, 0).unwrap();
        a.add_input(2, 0).unwrap();
        let steps: &[(LinkId, u64, u64, (u64, u64))] = &[
            (1, 80, 80, (100, 50)),   // joining, behind: does not count
            (1, 120, 90, (100, 50)),  // passes 100 with commit ≥ 50: counts; min(100,120)
            (2, 300, 200, (100, 50)), // passes: counts
            (0, 200, 150, (120, 90)),
            (1, 400, 300, (200, 150)),
            (0, 500, 400, (300, 200)),
        ];
        for (i, &(l, b, c, want)) in steps.iter().enumerate() {
            assert_eq!(a.on_packet(l, b, c, 1).unwrap(), want, "step {i}");
        }
        assert_eq!(a.poll_event(), Some(AggEvent::LinkUp(1)));
        assert_eq!(a.poll_event(), Some(AggEvent::LinkUp(2)));
        assert_eq!(a.poll_event(), None);
        assert_eq!(
            a.on_packet(0, 499, 400, 2),
            Err(AggError::Backwards {
                link: 0,
                was: 500,
                now: 499
            })
        );
        assert_eq!(a.on_packet(9, 1, 1, 2), Err(AggError::UnknownLink(9)));
        assert_eq!(a.add_input(0, 2), Err(AggError::Exists(0)));
    }

    /// A lane beacon may overtake data: (link, lane?, barrier, commit) in
    /// → the hop's barriers, or the packet refused.
    #[test]
    fn lane_beacons_are_taken_by_maximum_and_data_behind_them_still_passes() {
        let mut a = agg();
        a.add_input(0, 0).unwrap();
        a.add_input(1, 0).unwrap();
        type Row = (LinkId, bool, u64, u64, Result<(u64, u64), AggError>);
        let rows: &[Row] = &[
            (0, false, 100, 90, Ok((0, 0))),
            (1, true, 200, 150, Ok((100, 90))),
            // Data of link 1 sent before its beacon, overtaken: its
            // barriers are below the register, the packet is refused.
            (
                1,
                false,
                180,
                140,
                Err(AggError::Backwards {
                    link: 1,
                    was: 200,
                    now: 180,
                }),
            ),
            // A lane beacon below the register changes nothing.
            (1, true, 190, 140, Ok((100, 90))),
            (0, true, 300, 250, Ok((200, 150))),
            (1, false, 200, 150, Ok((200, 150))),
        ];
        for (i, (l, lane, b, c, want)) in rows.iter().enumerate() {
            let got = if *lane {
                a.on_beacon(*l, *b, *c, 1)
            } else {
                a.on_packet(*l, *b, *c, 1)
            };
            assert_eq!(got, *want, "row {i}");
        }
    }

    #[test]
    fn an_input_with_a_longer_interval_is_silent_after_its_own_intervals() {
        let mut a = agg();
        a.add_input(0, 0).unwrap();
        a.add_input(1, 0).unwrap();
        // Hop: 3 × 10; link 1's lane period 25: 3 × 25.
        a.set_input_interval(1, 25).unwrap();
        assert_eq!(a.set_input_interval(7, 25), Err(AggError::UnknownLink(7)));
        assert_eq!(a.poll_timeout(), Some(30));
        a.on_packet(0, 10, 5, 60).unwrap();
        a.handle_timeout(60);
        assert_eq!(a.poll_event(), None, "link 1 has until 75");
        assert_eq!(a.poll_timeout(), Some(75));
        a.handle_timeout(75);
        assert!(matches!(
            a.poll_event(),
            Some(AggEvent::LinkSilent { link: 1, .. })
        ));
    }

    #[test]
    fn a_silent_link_is_removed_and_stops_holding_the_barrier_back() {
        let mut a = agg();
        a.add_input(0, 0).unwrap();
        a.add_input(1, 0).unwrap();
        a.on_packet(0, 10, 5, 0).unwrap();
        a.on_packet(1, 20, 10, 0).unwrap(); // joins (20 > 10)
        a.poll_event();
        for t in [10, 20] {
            a.on_packet(1, 20 + t, 10 + t, t).unwrap();
            a.handle_timeout(t);
            assert_eq!(a.live_inputs(), 2, "at {t}");
        }
        assert_eq!(a.barriers(), (10, 5));
        // Link 0 last heard at 0: dead at 3 intervals (30).
        a.on_packet(1, 50, 40, 30).unwrap();
        a.handle_timeout(30);
        assert_eq!(
            a.poll_event(),
            Some(AggEvent::LinkSilent {
                link: 0,
                barrier: 10,
                commit: 5
            })
        );
        assert_eq!(a.live_inputs(), 1);
        assert_eq!(a.barriers(), (50, 40));
    }

    #[test]
    fn a_held_silent_link_holds_the_barrier_until_removed() {
        let mut a = Aggregator::new(AggConfig {
            hold_silent: true,
            ..agg().cfg
        });
        a.add_input(0, 0).unwrap();
        a.add_input(1, 0).unwrap();
        a.on_packet(0, 10, 5, 0).unwrap();
        a.on_packet(1, 20, 10, 0).unwrap();
        a.poll_event();
        a.on_packet(1, 50, 40, 30).unwrap();
        a.handle_timeout(30);
        a.handle_timeout(40); // reported once
        assert_eq!(
            a.poll_event(),
            Some(AggEvent::LinkSilent {
                link: 0,
                barrier: 10,
                commit: 5
            })
        );
        assert_eq!(a.poll_event(), None);
        assert_eq!(a.barriers(), (10, 5));
        // The process was only held back and speaks again: fenced, its
        // failure timestamp (commit 5) stays final.
        assert_eq!(a.on_packet(0, 60, 45, 41), Err(AggError::Fenced(0)));
        assert_eq!(a.barriers(), (10, 5));
        a.remove_input(0).unwrap();
        assert_eq!(a.barriers(), (50, 40));
        assert_eq!(a.remove_input(0), Err(AggError::UnknownLink(0)));
    }

    #[test]
    fn idle_outputs_get_beacons() {
        let mut a = agg();
        a.add_output(7, 0).unwrap();
        a.add_output(8, 0).unwrap();
        assert_eq!(a.poll_beacon(5), None);
        a.on_sent(8, 5);
        assert_eq!(a.poll_beacon(10), Some(7));
        assert_eq!(a.poll_beacon(10), None);
        assert_eq!(a.poll_timeout(), Some(15));
        assert_eq!(a.poll_beacon(15), Some(8));
    }
}
