//! A process's send side: scatterings stamped with one timestamp, ACKs,
//! losses reported or repaired, and the process's own barriers.
//!
//! A scattering (one message to each of several processes) gets one
//! timestamp from the sender's clock: `max(now, last + 1)`, so a sender's
//! timestamps strictly increase and ⟨sender, timestamp⟩ names one
//! message at each receiver. Every data packet carries the timestamp as
//! its barrier too (nothing this sender sends later is below it) and the
//! sender's commit barrier.
//!
//! - **Best effort**: a message unacknowledged after `ack_timeout_ns`, or
//!   refused with a NAK (late at its receiver), is reported
//!   ([`SendEvent::Failed`]) and never sent again.
//! - **Reliable** (two phases): a message is kept and sent again every
//!   `rto_ns` until its receiver acknowledges it; the sender's commit
//!   barrier is just below its oldest unacknowledged reliable message (or
//!   below the next timestamp it can give when none is), and receivers
//!   deliver reliable messages only once the commit barrier, aggregated
//!   over every sender, reaches them.
//! - When process `p` fails ([`Sender::proc_failed`]), reliable messages
//!   to `p` still unacknowledged are dropped and reported; their
//!   scatterings are aborted: every other receiver of one gets a RECALL.
//!
//! Bounded: at most `max_outstanding` messages waiting for an ACK.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};

use crate::wire::{Header, Kind, MAX_PAYLOAD};
use crate::Nanos;

/// Settings of a sender.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SenderConfig {
    /// A best-effort message unacknowledged this long is reported lost.
    pub ack_timeout_ns: Nanos,
    /// A reliable message unacknowledged this long is sent again.
    pub rto_ns: Nanos,
    /// Messages waiting for an ACK at most.
    pub max_outstanding: usize,
}

impl Default for SenderConfig {
    /// 100 ms to report a best-effort loss, 10 ms between retransmissions,
    /// 65 536 messages outstanding.
    fn default() -> Self {
        SenderConfig {
            ack_timeout_ns: 100_000_000,
            rto_ns: 10_000_000,
            max_outstanding: 65_536,
        }
    }
}

/// Why a message was not delivered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailReason {
    /// No ACK in time (best effort).
    Unacknowledged,
    /// Refused: it reached its receiver below the barrier (best effort)
    /// or found no room there.
    Refused,
    /// Its receiver failed before acknowledging it (reliable).
    ReceiverFailed,
    /// Its scattering was aborted because another of its receivers failed.
    Aborted,
}

/// What the sender tells its user.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendEvent {
    /// 1Pipe's `send_fail`: the message of timestamp `ts` to `dst` will
    /// not be delivered.
    Failed {
        /// The scattering's timestamp.
        ts: u64,
        /// The receiver.
        dst: u32,
        /// Why.
        reason: FailReason,
    },
}

/// Why a scattering was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SendError {
    /// No message.
    #[error("an empty scattering")]
    Empty,
    /// Two messages to one process in one scattering.
    #[error("two messages to process {0} in one scattering")]
    SameDestination(u32),
    /// A message longer than a packet's payload.
    #[error("a message of {0} bytes (at most {MAX_PAYLOAD})")]
    TooLong(usize),
    /// Too many messages waiting for ACKs.
    #[error("{0} messages already wait for an ACK")]
    Full(usize),
    /// A message to a process known to have failed.
    #[error("process {0} has failed")]
    Failed(u32),
}

#[derive(Clone, Debug)]
struct Pending {
    seq: u32,
    reliable: bool,
    payload: Vec<u8>,
    sent_at: Nanos,
}

/// A packet to send: its header and payload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outgoing {
    /// The header (barriers filled in).
    pub header: Header,
    /// The payload (data only).
    pub payload: Vec<u8>,
}

/// Counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SenderStats {
    /// Scatterings stamped.
    pub scatterings: u64,
    /// Messages sent (first time).
    pub messages: u64,
    /// Reliable messages sent again.
    pub retransmits: u64,
    /// Messages reported failed.
    pub failed: u64,
    /// ACKs and NAKs matching nothing outstanding.
    pub stray_replies: u64,
}

/// A process's send side.
#[derive(Debug)]
pub struct Sender {
    me: u32,
    cfg: SenderConfig,
    last_ts: u64,
    next_seq: HashMap<u32, u32>,
    /// Messages waiting for an ACK, by (timestamp, receiver).
    pending: BTreeMap<(u64, u32), Pending>,
    /// Receivers of reliable scatterings not yet committed (for recalls).
    uncommitted: BTreeMap<u64, Vec<u32>>,
    commit: u64,
    /// Processes known to have failed.
    failed: HashSet<u32>,
    tx: VecDeque<Outgoing>,
    events: VecDeque<SendEvent>,
    stats: SenderStats,
}

impl Sender {
    /// The send side of process `me`.
    pub fn new(me: u32, cfg: SenderConfig) -> Self {
        Sender {
            me,
            cfg,
            last_ts: 0,
            next_seq: HashMap::new(),
            pending: BTreeMap::new(),
            uncommitted: BTreeMap::new(),
            commit: 0,
            failed: HashSet::new(),
            tx: VecDeque::new(),
            events: VecDeque::new(),
            stats: SenderStats::default(),
        }
    }

    /// The counters.
    pub fn stats(&self) -> &SenderStats {
        &self.stats
    }

    /// Messages waiting for an ACK.
    pub fn outstanding(&self) -> usize {
        self.pending.len()
    }

    /// The smallest timestamp a scattering stamped at `now` or later can
    /// get: the sender's best-effort barrier.
    pub fn barrier(&self, now: Nanos) -> u64 {
        now.max(self.last_ts + 1)
    }

    /// The sender's commit barrier at `now`: below its oldest
    /// unacknowledged reliable message, and below anything it can still
    /// stamp. Never decreases.
    pub fn commit_barrier(&mut self, now: Nanos) -> u64 {
        let oldest = self
            .pending
            .iter()
            .filter(|(_, p)| p.reliable)
            .map(|((ts, _), _)| *ts)
            .next();
        let cand = oldest.unwrap_or(self.barrier(now)).saturating_sub(1);
        self.commit = self.commit.max(cand);
        // Committed scatterings can no longer be recalled.
        let c = self.commit;
        while self
            .uncommitted
            .first_key_value()
            .is_some_and(|(t, _)| *t <= c)
        {
            self.uncommitted.pop_first();
        }
        self.commit
    }

    /// Stamps `msgs` (one per receiver) with one timestamp at `now` and
    /// queues their packets; returns the timestamp.
    pub fn scatter(
        &mut self,
        now: Nanos,
        msgs: &[(u32, &[u8])],
        reliable: bool,
    ) -> Result<u64, SendError> {
        if msgs.is_empty() {
            return Err(SendError::Empty);
        }
        for (i, (dst, m)) in msgs.iter().enumerate() {
            if m.len() > MAX_PAYLOAD {
                return Err(SendError::TooLong(m.len()));
            }
            if msgs[..i].iter().any(|(d, _)| d == dst) {
                return Err(SendError::SameDestination(*dst));
            }
            if self.failed.contains(dst) {
                return Err(SendError::Failed(*dst));
            }
        }
        if self.pending.len() + msgs.len() > self.cfg.max_outstanding {
            return Err(SendError::Full(self.pending.len()));
        }
        // The commit barrier before stamping: below this scattering.
        let commit = self.commit_barrier(now);
        let ts = self.barrier(now);
        self.last_ts = ts;
        for &(dst, m) in msgs {
            let seq = self.next_seq.entry(dst).or_insert(0);
            let s = *seq;
            *seq = seq.wrapping_add(1);
            self.pending.insert(
                (ts, dst),
                Pending {
                    seq: s,
                    reliable,
                    payload: m.to_vec(),
                    sent_at: now,
                },
            );
            self.tx.push_back(Outgoing {
                header: Header {
                    kind: Kind::Data,
                    reliable,
                    src: self.me,
                    dst,
                    seq: s,
                    ts,
                    barrier: ts,
                    commit,
                },
                payload: m.to_vec(),
            });
            self.stats.messages += 1;
        }
        if reliable {
            self.uncommitted
                .insert(ts, msgs.iter().map(|(d, _)| *d).collect());
        }
        self.stats.scatterings += 1;
        Ok(ts)
    }

    /// An ACK or NAK from a receiver.
    pub fn on_reply(&mut self, h: &Header) {
        let key = (h.ts, h.src);
        let matches = self.pending.get(&key).is_some_and(|p| p.seq == h.seq);
        if !matches {
            self.stats.stray_replies += 1;
            return;
        }
        match h.kind {
            Kind::Ack => {
                self.pending.remove(&key);
            }
            Kind::Nak => {
                self.pending.remove(&key);
                self.fail(h.ts, h.src, FailReason::Refused);
            }
            _ => self.stats.stray_replies += 1,
        }
    }

    fn fail(&mut self, ts: u64, dst: u32, reason: FailReason) {
        self.stats.failed += 1;
        self.events.push_back(SendEvent::Failed { ts, dst, reason });
    }

    /// Reports best-effort messages unacknowledged too long, and sends
    /// reliable ones again.
    pub fn handle_timeout(&mut self, now: Nanos) {
        let mut lost = Vec::new();
        let commit = self.commit_barrier(now);
        let barrier = self.barrier(now);
        for (&(ts, dst), p) in self.pending.iter_mut() {
            if p.reliable {
                if now.saturating_sub(p.sent_at) >= self.cfg.rto_ns {
                    p.sent_at = now;
                    self.stats.retransmits += 1;
                    self.tx.push_back(Outgoing {
                        header: Header {
                            kind: Kind::Data,
                            reliable: true,
                            src: self.me,
                            dst,
                            seq: p.seq,
                            ts,
                            // Never below a barrier this sender announced.
                            barrier,
                            commit,
                        },
                        payload: p.payload.clone(),
                    });
                }
            } else if now.saturating_sub(p.sent_at) >= self.cfg.ack_timeout_ns {
                lost.push((ts, dst));
            }
        }
        for (ts, dst) in lost {
            self.pending.remove(&(ts, dst));
            self.fail(ts, dst, FailReason::Unacknowledged);
        }
    }

    /// When to call [`Self::handle_timeout`] next.
    pub fn poll_timeout(&self) -> Option<Nanos> {
        self.pending
            .values()
            .map(|p| {
                p.sent_at.saturating_add(if p.reliable {
                    self.cfg.rto_ns
                } else {
                    self.cfg.ack_timeout_ns
                })
            })
            .min()
    }

    /// Process `proc` failed: its unacknowledged reliable messages are
    /// dropped and reported, and their scatterings aborted (a RECALL to
    /// each other receiver, reported too); scatterings to it are refused
    /// from now on (a recovered process comes back as a new one).
    pub fn proc_failed(&mut self, proc: u32, now: Nanos) {
        self.failed.insert(proc);
        let dead: Vec<u64> = self
            .pending
            .iter()
            .filter(|((_, d), p)| *d == proc && p.reliable)
            .map(|((ts, _), _)| *ts)
            .collect();
        for ts in dead {
            self.pending.remove(&(ts, proc));
            self.fail(ts, proc, FailReason::ReceiverFailed);
            let others = self.uncommitted.remove(&ts).unwrap_or_default();
            for dst in others.into_iter().filter(|&d| d != proc) {
                let seq = self.pending.remove(&(ts, dst)).map_or(0, |p| p.seq);
                self.fail(ts, dst, FailReason::Aborted);
                self.tx.push_back(Outgoing {
                    header: Header {
                        kind: Kind::Recall,
                        reliable: true,
                        src: self.me,
                        dst,
                        seq,
                        ts,
                        barrier: self.barrier(now),
                        commit: self.commit,
                    },
                    payload: Vec::new(),
                });
            }
        }
    }

    /// A beacon from this process (its barriers at `now`).
    pub fn beacon(&mut self, now: Nanos) -> Header {
        let commit = self.commit_barrier(now);
        Header::beacon(self.me, self.barrier(now), commit)
    }

    /// The next packet to send.
    pub fn poll_transmit(&mut self) -> Option<Outgoing> {
        self.tx.pop_front()
    }

    /// The next event.
    pub fn poll_event(&mut self) -> Option<SendEvent> {
        self.events.pop_front()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ack(kind: Kind, from: u32, seq: u32, ts: u64) -> Header {
        Header {
            kind,
            reliable: false,
            src: from,
            dst: 1,
            seq,
            ts,
            barrier: 0,
            commit: 0,
        }
    }

    #[test]
    fn timestamps_strictly_increase_and_scatterings_are_checked() {
        let mut s = Sender::new(1, SenderConfig::default());
        // (now, result)
        type Case<'a> = (Nanos, &'a [(u32, &'a [u8])], Result<u64, SendError>);
        let cases: &[Case] = &[
            (100, &[(2, b"a"), (3, b"b")], Ok(100)),
            (100, &[(2, b"c")], Ok(101)), // same clock: next nanosecond
            (50, &[(2, b"d")], Ok(102)),  // clock behind: still above
            (500, &[(4, b"e")], Ok(500)),
            (600, &[], Err(SendError::Empty)),
            (
                600,
                &[(2, b"x"), (2, b"y")],
                Err(SendError::SameDestination(2)),
            ),
        ];
        for (now, msgs, want) in cases {
            assert_eq!(s.scatter(*now, msgs, false), *want, "at {now}");
        }
        let out: Vec<(u32, u32, u64)> = std::iter::from_fn(|| s.poll_transmit())
            .map(|o| (o.header.dst, o.header.seq, o.header.ts))
            .collect();
        assert_eq!(
            out,
            [
                (2, 0, 100),
                (3, 0, 100),
                (2, 1, 101),
                (2, 2, 102),
                (4, 0, 500)
            ]
        );
        assert_eq!(s.barrier(400), 501);
        let big = vec![0u8; MAX_PAYLOAD + 1];
        assert_eq!(
            s.scatter(700, &[(2, &big)], false),
            Err(SendError::TooLong(MAX_PAYLOAD + 1))
        );
    }

    #[test]
    fn best_effort_losses_and_naks_are_reported_once() {
        let mut s = Sender::new(
            1,
            SenderConfig {
                ack_timeout_ns: 1_000,
                ..SenderConfig::default()
            },
        );
        s.scatter(10, &[(2, b"a"), (3, b"b"), (4, b"c")], false)
            .unwrap();
        s.on_reply(&ack(Kind::Ack, 2, 0, 10));
        s.on_reply(&ack(Kind::Nak, 3, 0, 10));
        s.on_reply(&ack(Kind::Ack, 3, 0, 10)); // stray now
        s.handle_timeout(500);
        assert_eq!(
            s.poll_event().map(|e| matches!(
                e,
                SendEvent::Failed {
                    dst: 3,
                    reason: FailReason::Refused,
                    ..
                }
            )),
            Some(true)
        );
        assert_eq!(s.poll_event(), None);
        s.handle_timeout(1_010);
        assert_eq!(
            s.poll_event(),
            Some(SendEvent::Failed {
                ts: 10,
                dst: 4,
                reason: FailReason::Unacknowledged
            })
        );
        assert_eq!(s.outstanding(), 0);
        assert_eq!(s.stats().stray_replies, 1);
        assert_eq!(s.stats().failed, 2);
        // Nothing is ever sent again in best effort.
        assert_eq!(s.stats().retransmits, 0);
    }

    #[test]
    fn the_commit_barrier_waits_for_every_ack_and_loss_is_repaired() {
        let mut s = Sender::new(
            1,
            SenderConfig {
                rto_ns: 100,
                ..SenderConfig::default()
            },
        );
        assert_eq!(s.commit_barrier(50), 49);
        s.scatter(60, &[(2, b"a"), (3, b"b")], true).unwrap();
        s.scatter(70, &[(2, b"c")], true).unwrap();
        while s.poll_transmit().is_some() {}
        assert_eq!(s.commit_barrier(80), 59);
        s.on_reply(&ack(Kind::Ack, 2, 0, 60));
        assert_eq!(s.commit_barrier(80), 59, "3 has not acknowledged 60");
        // Both unacknowledged for an RTO (sent at 60 and 70) by 170.
        s.handle_timeout(170);
        let again: Vec<(u32, u64)> = std::iter::from_fn(|| s.poll_transmit())
            .map(|o| (o.header.dst, o.header.ts))
            .collect();
        assert_eq!(again, [(3, 60), (2, 70)]);
        s.on_reply(&ack(Kind::Ack, 3, 0, 60));
        assert_eq!(s.commit_barrier(170), 69);
        s.on_reply(&ack(Kind::Ack, 2, 1, 70));
        assert_eq!(s.commit_barrier(170), 169);
        // Never back.
        assert_eq!(s.commit_barrier(10), 169);
    }

    #[test]
    fn a_failed_receiver_aborts_its_uncommitted_scatterings() {
        let mut s = Sender::new(1, SenderConfig::default());
        s.scatter(10, &[(2, b"a"), (3, b"b"), (4, b"c")], true)
            .unwrap();
        s.scatter(20, &[(2, b"d")], true).unwrap();
        while s.poll_transmit().is_some() {}
        s.on_reply(&ack(Kind::Ack, 2, 0, 10));
        s.on_reply(&ack(Kind::Ack, 2, 1, 20));
        s.on_reply(&ack(Kind::Ack, 4, 0, 10));
        s.proc_failed(3, 30);
        let events: Vec<SendEvent> = std::iter::from_fn(|| s.poll_event()).collect();
        assert_eq!(
            events,
            [
                SendEvent::Failed {
                    ts: 10,
                    dst: 3,
                    reason: FailReason::ReceiverFailed
                },
                SendEvent::Failed {
                    ts: 10,
                    dst: 2,
                    reason: FailReason::Aborted
                },
                SendEvent::Failed {
                    ts: 10,
                    dst: 4,
                    reason: FailReason::Aborted
                },
            ]
        );
        let recalls: Vec<(Kind, u32, u64)> = std::iter::from_fn(|| s.poll_transmit())
            .map(|o| (o.header.kind, o.header.dst, o.header.ts))
            .collect();
        assert_eq!(recalls, [(Kind::Recall, 2, 10), (Kind::Recall, 4, 10)]);
        assert_eq!(s.scatter(50, &[(3, b"x")], true), Err(SendError::Failed(3)));
        assert_eq!(s.outstanding(), 0);
        assert_eq!(s.commit_barrier(40), 39);
    }
}
