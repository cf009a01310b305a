//! The recovery coordinator of reliable 1Pipe, sans I/O.
//!
//! A hop that holds a silent input link reports it ([`Ctl::Silent`], sent
//! again until the link is removed). The coordinator then:
//! 1. has the **failure timestamp** decided once, in replicated storage
//!    ([`CoordOut::Decide`]; the first proposal wins, and every
//!    coordinator replica gets the same answer through
//!    [`Coordinator::on_decided`]). The proposal is the link's last
//!    commit barrier;
//! 2. tells every process ([`Ctl::ProcFail`]): each correct one discards
//!    the failed process's messages above the timestamp, aborts its
//!    scatterings to it, calls its `proc_fail` callback and confirms
//!    ([`Ctl::ProcFailAck`]); the failed one, if it still runs, learns it
//!    was excluded;
//! 3. once every correct process confirmed, has the hop remove the link
//!    ([`Ctl::Remove`], until [`Ctl::Removed`]), and delivery resumes;
//! 4. records the recovery ([`CoordOut::Recovered`]).
//!
//! Every step is idempotent, so several coordinators can run the same
//! recovery at once (the hop reports to all of them): that is how the
//! coordinator is replicated. Its one decision lives in a Raft group; the
//! rest is re-sent until confirmed. A coordinator that starts late learns
//! the failures already decided ([`Coordinator::restore`]), so it never
//! waits for a failed process to confirm.

use crate::ctl::Ctl;
use crate::Nanos;
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::net::SocketAddrV4;

/// What the coordinator asks of its driver.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CoordOut {
    /// Propose `t_fail` as `proc`'s failure timestamp to the replicated
    /// store (first proposal wins), then call
    /// [`Coordinator::on_decided`] with the value it holds.
    Decide {
        /// The failed process.
        proc: u32,
        /// The proposal.
        t_fail: u64,
    },
    /// Send `msg` to `to`.
    Send {
        /// Where.
        to: SocketAddrV4,
        /// What.
        msg: Ctl,
    },
    /// `proc`'s recovery is complete: its link is removed.
    Recovered {
        /// The failed process.
        proc: u32,
        /// Its failure timestamp.
        t_fail: u64,
    },
}

/// Counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CoordStats {
    /// Silent reports of a link no process has.
    pub unknown_links: u64,
    /// Messages re-sent.
    pub resent: u64,
    /// Recoveries completed.
    pub recovered: u64,
}

#[derive(Debug, Clone)]
struct Recovery {
    link: SocketAddrV4,
    hop: Option<SocketAddrV4>,
    t_fail: Option<u64>,
    acked: BTreeSet<u32>,
    removed: bool,
    next_send: Nanos,
}

/// One coordinator replica's view.
#[derive(Debug, Clone)]
pub struct Coordinator {
    procs: BTreeMap<u32, SocketAddrV4>,
    by_addr: HashMap<SocketAddrV4, u32>,
    failed: BTreeMap<u32, Recovery>,
    out: VecDeque<CoordOut>,
    resend_ns: Nanos,
    stats: CoordStats,
}

impl Coordinator {
    /// Every process (its id and endpoint address: its input link at the
    /// hop and where control messages go); unconfirmed messages are sent
    /// again every `resend_ns`.
    pub fn new(procs: &[(u32, SocketAddrV4)], resend_ns: Nanos) -> Self {
        Coordinator {
            procs: procs.iter().copied().collect(),
            by_addr: procs.iter().map(|&(p, a)| (a, p)).collect(),
            failed: BTreeMap::new(),
            out: VecDeque::new(),
            resend_ns: resend_ns.max(1),
            stats: CoordStats::default(),
        }
    }

    /// The counters.
    pub fn stats(&self) -> CoordStats {
        self.stats
    }

    /// Failures decided before this replica started (from the store):
    /// `proc` counts as failed, and its recovery as done unless a hop
    /// still reports its link.
    pub fn restore(&mut self, proc: u32, t_fail: u64) {
        let Some(&link) = self.procs.get(&proc) else {
            return;
        };
        self.failed.entry(proc).or_insert(Recovery {
            link,
            hop: None,
            t_fail: Some(t_fail),
            acked: BTreeSet::new(),
            removed: true,
            next_send: 0,
        });
    }

    /// The processes not known to have failed.
    fn correct(&self) -> impl Iterator<Item = u32> + '_ {
        self.procs
            .keys()
            .copied()
            .filter(|p| !self.failed.contains_key(p))
    }

    /// A control message from `from`.
    pub fn on_ctl(&mut self, from: SocketAddrV4, msg: Ctl, now: Nanos) {
        match msg {
            Ctl::Silent { link, commit, .. } => {
                let Some(&proc) = self.by_addr.get(&link) else {
                    self.stats.unknown_links += 1;
                    return;
                };
                match self.failed.get_mut(&proc) {
                    None => {
                        self.failed.insert(
                            proc,
                            Recovery {
                                link,
                                hop: Some(from),
                                t_fail: None,
                                acked: BTreeSet::new(),
                                removed: false,
                                next_send: now,
                            },
                        );
                        self.out.push_back(CoordOut::Decide {
                            proc,
                            t_fail: commit,
                        });
                    }
                    Some(r) => {
                        // Still held: our Remove was lost, or the link
                        // was restored as done by a replica started late.
                        r.hop = Some(from);
                        if r.removed {
                            r.removed = false;
                            r.next_send = now;
                        }
                    }
                }
                self.step(now);
            }
            Ctl::ProcFailAck { proc, from: who } => {
                if let Some(r) = self.failed.get_mut(&proc) {
                    r.acked.insert(who);
                }
                self.step(now);
            }
            Ctl::Removed { link } => {
                let Some(&proc) = self.by_addr.get(&link) else {
                    return;
                };
                if let Some(r) = self.failed.get_mut(&proc) {
                    if !r.removed && r.t_fail.is_some() {
                        r.removed = true;
                        self.stats.recovered += 1;
                        self.out.push_back(CoordOut::Recovered {
                            proc,
                            t_fail: r.t_fail.unwrap_or(0),
                        });
                    }
                }
            }
            Ctl::Remove { .. } | Ctl::ProcFail { .. } => {}
        }
    }

    /// The store decided `proc`'s failure timestamp.
    pub fn on_decided(&mut self, proc: u32, t_fail: u64, now: Nanos) {
        if let Some(r) = self.failed.get_mut(&proc) {
            if r.t_fail.is_none() {
                r.t_fail = Some(t_fail);
                r.next_send = now;
            }
        }
        self.step(now);
    }

    /// Sends what is due.
    pub fn handle_timeout(&mut self, now: Nanos) {
        self.step(now);
    }

    fn step(&mut self, now: Nanos) {
        let correct: Vec<u32> = self.correct().collect();
        let everyone: Vec<(u32, SocketAddrV4)> = self.procs.iter().map(|(&p, &a)| (p, a)).collect();
        for (&proc, r) in self.failed.iter_mut() {
            let (Some(t_fail), false) = (r.t_fail, r.removed) else {
                continue;
            };
            if now < r.next_send {
                continue;
            }
            let first = r.acked.is_empty() && r.next_send != 0;
            let waiting: Vec<&(u32, SocketAddrV4)> = everyone
                .iter()
                .filter(|(p, _)| !r.acked.contains(p) && (*p == proc || correct.contains(p)))
                .collect();
            let all_acked = correct.iter().all(|p| r.acked.contains(p));
            if all_acked {
                if let Some(hop) = r.hop {
                    self.out.push_back(CoordOut::Send {
                        to: hop,
                        msg: Ctl::Remove { link: r.link },
                    });
                }
            } else {
                for &&(_, a) in &waiting {
                    self.out.push_back(CoordOut::Send {
                        to: a,
                        msg: Ctl::ProcFail { proc, t_fail },
                    });
                }
            }
            if !first {
                self.stats.resent += 1;
            }
            r.next_send = now + self.resend_ns;
        }
    }

    /// The next thing to do.
    pub fn poll(&mut self) -> Option<CoordOut> {
        self.out.pop_front()
    }

    /// The processes whose recovery is under way: reported, and their
    /// link not yet removed at the hop.
    pub fn recovering(&self) -> impl Iterator<Item = u32> + '_ {
        self.failed
            .iter()
            .filter(|(_, r)| !r.removed)
            .map(|(&p, _)| p)
    }

    /// When [`Coordinator::handle_timeout`] is next due.
    pub fn poll_timeout(&self) -> Option<Nanos> {
        self.failed
            .values()
            .filter(|r| r.t_fail.is_some() && !r.removed)
            .map(|r| r.next_send)
            .min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(p: u16) -> SocketAddrV4 {
        SocketAddrV4::new([10, 0, 0, 1].into(), p)
    }

    const HOP: u16 = 9000;

    fn drain(c: &mut Coordinator) -> Vec<CoordOut> {
        std::iter::from_fn(|| c.poll()).collect()
    }

    fn sends(outs: &[CoordOut]) -> Vec<(u16, Ctl)> {
        outs.iter()
            .filter_map(|o| match o {
                CoordOut::Send { to, msg } => Some((to.port(), *msg)),
                _ => None,
            })
            .collect()
    }

    fn three() -> Coordinator {
        Coordinator::new(&[(1, a(1)), (2, a(2)), (3, a(3))], 10)
    }

    #[test]
    fn a_recovery_step_by_step() {
        let mut c = three();
        let silent = Ctl::Silent {
            link: a(3),
            barrier: 50,
            commit: 40,
        };
        c.on_ctl(a(HOP), silent, 0);
        assert_eq!(
            drain(&mut c),
            vec![CoordOut::Decide {
                proc: 3,
                t_fail: 40
            }]
        );
        // The store holds an earlier proposal (another replica's): that one.
        c.on_decided(3, 38, 1);
        let pf = Ctl::ProcFail {
            proc: 3,
            t_fail: 38,
        };
        assert_eq!(sends(&drain(&mut c)), vec![(1, pf), (2, pf), (3, pf)]);
        // A repeated report changes nothing; the failed one need not ack.
        c.on_ctl(a(HOP), silent, 2);
        assert!(drain(&mut c).is_empty());
        c.on_ctl(a(1), Ctl::ProcFailAck { proc: 3, from: 1 }, 3);
        assert!(drain(&mut c).is_empty());
        // Re-sent to the ones that did not confirm.
        c.handle_timeout(11);
        assert_eq!(sends(&drain(&mut c)), vec![(2, pf), (3, pf)]);
        c.on_ctl(a(2), Ctl::ProcFailAck { proc: 3, from: 2 }, 12);
        c.handle_timeout(21);
        let rm = Ctl::Remove { link: a(3) };
        assert_eq!(sends(&drain(&mut c)), vec![(HOP, rm)]);
        c.handle_timeout(31);
        assert_eq!(sends(&drain(&mut c)), vec![(HOP, rm)], "until Removed");
        assert!(c.recovering().eq([3]));
        c.on_ctl(a(HOP), Ctl::Removed { link: a(3) }, 32);
        assert!(c.recovering().next().is_none());
        assert_eq!(
            drain(&mut c),
            vec![CoordOut::Recovered {
                proc: 3,
                t_fail: 38
            }]
        );
        c.handle_timeout(100);
        assert!(drain(&mut c).is_empty());
        assert_eq!(c.poll_timeout(), None);
    }

    #[test]
    fn a_second_failure_during_a_recovery_is_not_waited_for() {
        let mut c = three();
        c.on_ctl(
            a(HOP),
            Ctl::Silent {
                link: a(3),
                barrier: 9,
                commit: 9,
            },
            0,
        );
        c.on_decided(3, 9, 0);
        drain(&mut c);
        c.on_ctl(a(1), Ctl::ProcFailAck { proc: 3, from: 1 }, 1);
        // 2 fails before confirming: once its own failure is decided, 3's
        // recovery needs only 1.
        c.on_ctl(
            a(HOP),
            Ctl::Silent {
                link: a(2),
                barrier: 12,
                commit: 11,
            },
            2,
        );
        assert_eq!(
            drain(&mut c),
            vec![CoordOut::Decide {
                proc: 2,
                t_fail: 11
            }]
        );
        c.on_decided(2, 11, 3);
        c.handle_timeout(20);
        let outs = sends(&drain(&mut c));
        assert!(
            outs.contains(&(HOP, Ctl::Remove { link: a(3) })),
            "{outs:?}"
        );
    }

    #[test]
    fn a_late_replica_restores_decided_failures() {
        let mut c = three();
        c.restore(2, 5);
        c.on_ctl(
            a(HOP),
            Ctl::Silent {
                link: a(3),
                barrier: 9,
                commit: 9,
            },
            0,
        );
        drain(&mut c);
        c.on_decided(3, 9, 0);
        let outs = sends(&drain(&mut c));
        // 2 is not asked to confirm (it failed), 1 and 3 are told.
        assert_eq!(outs.len(), 2, "{outs:?}");
        c.on_ctl(a(1), Ctl::ProcFailAck { proc: 3, from: 1 }, 1);
        c.handle_timeout(11);
        assert_eq!(
            sends(&drain(&mut c)),
            vec![(HOP, Ctl::Remove { link: a(3) })]
        );
        // An unknown link is counted, nothing more.
        c.on_ctl(
            a(HOP),
            Ctl::Silent {
                link: a(77),
                barrier: 1,
                commit: 1,
            },
            12,
        );
        assert!(drain(&mut c).is_empty());
        assert_eq!(c.stats().unknown_links, 1);
    }
}
