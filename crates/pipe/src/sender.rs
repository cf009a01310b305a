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
//!
//! Cost: the commit barrier reads the first key of an ordered count of
//! the unacknowledged reliable timestamps (O(1) to read, O(log n) to
//! keep up per message), and timeouts come from two queues ordered by
//! sending time, one per kind of message (their timeout is the same
//! within a kind), so [`Sender::handle_timeout`] touches only the due
//! messages and [`Sender::poll_timeout`] reads two queue tops. Queue
//! entries left behind by an ACK or a retransmission are skipped when
//! they come to the top, and the queues are compacted when a scattering
//! finds them holding more than twice the pending messages, so they stay
//! within twice `max_outstanding` (plus a little slack).

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap, HashSet, VecDeque};

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
    /// A RECALL of an aborted scattering's message, sent until
    /// acknowledged (it holds the commit barrier below the scattering
    /// meanwhile, so no receiver can deliver what another dropped).
    recall: bool,
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

/// A timeout queue entry: (sent at, timestamp, receiver), smallest
/// sending time on top. Live while the message is pending and was last
/// sent at that time; otherwise skipped.
type Due = Reverse<(Nanos, u64, u32)>;

/// Queue entries beyond twice the pending messages plus this are
/// compacted away.
const QUEUE_SLACK: usize = 64;

/// A process's send side.
#[derive(Debug)]
pub struct Sender {
    me: u32,
    cfg: SenderConfig,
    last_ts: u64,
    next_seq: HashMap<u32, u32>,
    /// Messages waiting for an ACK, by (timestamp, receiver).
    pending: BTreeMap<(u64, u32), Pending>,
    /// Unacknowledged reliable messages in `pending`, counted by
    /// timestamp: the commit barrier is below the first key.
    reliable_ts: BTreeMap<u64, u32>,
    /// Reliable pending messages by sending time (retransmissions).
    rto_queue: BinaryHeap<Due>,
    /// Best-effort pending messages by sending time (losses).
    ack_queue: BinaryHeap<Due>,
    /// Scratch for [`Self::handle_timeout`]: the due messages' keys.
    due: Vec<(u64, u32)>,
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
            reliable_ts: BTreeMap::new(),
            rto_queue: BinaryHeap::new(),
            ack_queue: BinaryHeap::new(),
            due: Vec::new(),
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
        let oldest = self.reliable_ts.first_key_value().map(|(ts, _)| *ts);
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
            let s = self.track(ts, dst, reliable, false, m.to_vec(), now);
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
        self.compact_queues();
        self.stats.scatterings += 1;
        Ok(ts)
    }

    /// Makes a message (or a recall) to `dst` at `ts` pending, sent at
    /// `now`, with the next sequence to `dst`: the reliable index and the
    /// timeout queues follow. Returns the sequence.
    fn track(
        &mut self,
        ts: u64,
        dst: u32,
        reliable: bool,
        recall: bool,
        payload: Vec<u8>,
        now: Nanos,
    ) -> u32 {
        let next = self.next_seq.entry(dst).or_insert(0);
        let seq = *next;
        *next = next.wrapping_add(1);
        self.pending.insert(
            (ts, dst),
            Pending {
                seq,
                reliable,
                recall,
                payload,
                sent_at: now,
            },
        );
        let entry = Reverse((now, ts, dst));
        if reliable {
            *self.reliable_ts.entry(ts).or_insert(0) += 1;
            self.rto_queue.push(entry);
        } else {
            self.ack_queue.push(entry);
        }
        seq
    }

    /// Removes the pending message `key`, keeping the reliable index.
    /// Callers clean the queue tops afterwards ([`Self::clean_tops`]).
    fn remove_pending(&mut self, key: (u64, u32)) -> Option<Pending> {
        let p = self.pending.remove(&key)?;
        if p.reliable {
            if let Some(n) = self.reliable_ts.get_mut(&key.0) {
                *n -= 1;
                if *n == 0 {
                    self.reliable_ts.remove(&key.0);
                }
            }
        }
        Some(p)
    }

    /// Whether a queue entry still names a pending message as last sent.
    fn is_live(pending: &BTreeMap<(u64, u32), Pending>, e: &Due) -> bool {
        let Reverse((sent_at, ts, dst)) = *e;
        pending
            .get(&(ts, dst))
            .is_some_and(|p| p.sent_at == sent_at)
    }

    /// Drops stale entries from the queue tops, so each top is live and
    /// [`Self::poll_timeout`] can read it. Amortized O(log n): every
    /// entry is popped at most once.
    fn clean_tops(&mut self) {
        for q in [&mut self.rto_queue, &mut self.ack_queue] {
            while q.peek().is_some_and(|e| !Self::is_live(&self.pending, e)) {
                q.pop();
            }
        }
    }

    /// Drops every stale queue entry once the queues hold more than
    /// twice the pending messages (plus some slack): O(n) after at least
    /// n pushes, so amortized O(1), and the queues stay O(n).
    fn compact_queues(&mut self) {
        let held = self.rto_queue.len() + self.ack_queue.len();
        if held > 2 * self.pending.len() + QUEUE_SLACK {
            let pending = &self.pending;
            self.rto_queue.retain(|e| Self::is_live(pending, e));
            self.ack_queue.retain(|e| Self::is_live(pending, e));
        }
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
                self.remove_pending(key);
                self.clean_tops();
            }
            Kind::Nak => {
                self.remove_pending(key);
                self.clean_tops();
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
    /// reliable ones again. Touches only the due messages (and queue
    /// entries left stale), each in (timestamp, receiver) order.
    pub fn handle_timeout(&mut self, now: Nanos) {
        let commit = self.commit_barrier(now);
        let barrier = self.barrier(now);
        let mut due = std::mem::take(&mut self.due);

        // Reliable: sent again. `now - sent_at` (saturating) never grows
        // with `sent_at`, so once the top is not due nothing below is.
        due.clear();
        Self::pop_due(
            &mut self.rto_queue,
            &self.pending,
            now,
            self.cfg.rto_ns,
            &mut due,
        );
        due.sort_unstable();
        for &(ts, dst) in &due {
            let Some(p) = self.pending.get_mut(&(ts, dst)) else {
                continue;
            };
            p.sent_at = now;
            self.stats.retransmits += 1;
            self.tx.push_back(Outgoing {
                header: Header {
                    kind: if p.recall { Kind::Recall } else { Kind::Data },
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
            // Pushed after popping every due entry: a zero RTO cannot
            // make this loop run again.
            self.rto_queue.push(Reverse((now, ts, dst)));
        }

        // Best effort: reported lost.
        due.clear();
        Self::pop_due(
            &mut self.ack_queue,
            &self.pending,
            now,
            self.cfg.ack_timeout_ns,
            &mut due,
        );
        due.sort_unstable();
        for &(ts, dst) in &due {
            self.remove_pending((ts, dst));
            self.fail(ts, dst, FailReason::Unacknowledged);
        }
        due.clear();
        self.due = due;
        self.clean_tops();
    }

    /// Pops the due live entries of `queue` (sent at least `timeout`
    /// before `now`) into `due`, and the stale ones met on the way.
    fn pop_due(
        queue: &mut BinaryHeap<Due>,
        pending: &BTreeMap<(u64, u32), Pending>,
        now: Nanos,
        timeout: Nanos,
        due: &mut Vec<(u64, u32)>,
    ) {
        while let Some(e) = queue.peek() {
            let Reverse((sent_at, ts, dst)) = *e;
            if !Self::is_live(pending, e) {
                queue.pop();
            } else if now.saturating_sub(sent_at) >= timeout {
                queue.pop();
                due.push((ts, dst));
            } else {
                break;
            }
        }
    }

    /// When to call [`Self::handle_timeout`] next.
    pub fn poll_timeout(&self) -> Option<Nanos> {
        // The queue tops are live (cleaned by every call that removes a
        // message), and `sent_at + timeout` grows with `sent_at`.
        let rto = self
            .rto_queue
            .peek()
            .map(|Reverse((sent_at, _, _))| sent_at.saturating_add(self.cfg.rto_ns));
        let ack = self
            .ack_queue
            .peek()
            .map(|Reverse((sent_at, _, _))| sent_at.saturating_add(self.cfg.ack_timeout_ns));
        match (rto, ack) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
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
            .filter(|((_, d), p)| *d == proc && p.reliable && !p.recall)
            .map(|((ts, _), _)| *ts)
            .collect();
        // Recalls to the failed process are moot.
        let moot: Vec<(u64, u32)> = self
            .pending
            .iter()
            .filter(|((_, d), p)| *d == proc && p.recall)
            .map(|(k, _)| *k)
            .collect();
        for k in moot {
            self.remove_pending(k);
        }
        let barrier = self.barrier(now);
        for ts in dead {
            self.remove_pending((ts, proc));
            self.fail(ts, proc, FailReason::ReceiverFailed);
            let others = self.uncommitted.remove(&ts).unwrap_or_default();
            // No recall to a process that failed before: it would never
            // be acknowledged, and would hold the commit barrier back.
            let others: Vec<u32> = others
                .into_iter()
                .filter(|&d| d != proc && !self.failed.contains(&d))
                .collect();
            for dst in others {
                // The message becomes its RECALL, with a sequence of its
                // own (a late ACK of the message must not count for it),
                // pending like a reliable message until acknowledged.
                self.remove_pending((ts, dst));
                self.fail(ts, dst, FailReason::Aborted);
                let s = self.track(ts, dst, true, true, Vec::new(), now);
                self.tx.push_back(Outgoing {
                    header: Header {
                        kind: Kind::Recall,
                        reliable: true,
                        src: self.me,
                        dst,
                        seq: s,
                        ts,
                        barrier,
                        commit: self.commit,
                    },
                    payload: Vec::new(),
                });
            }
        }
        self.clean_tops();
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
        // The recalls hold the commit barrier below the aborted scattering
        // until acknowledged, and go again after an RTO.
        assert_eq!(s.outstanding(), 2);
        assert_eq!(s.commit_barrier(40), 9);
        s.handle_timeout(30 + SenderConfig::default().rto_ns);
        let again: Vec<(Kind, u32, u64)> = std::iter::from_fn(|| s.poll_transmit())
            .map(|o| (o.header.kind, o.header.dst, o.header.ts))
            .collect();
        assert_eq!(again, [(Kind::Recall, 2, 10), (Kind::Recall, 4, 10)]);
        // A late ACK of the aborted message itself does not count.
        s.on_reply(&ack(Kind::Ack, 2, 0, 10));
        assert_eq!(s.outstanding(), 2);
        // Their own sequences: dst 2 had 0 and 1, dst 4 had 0.
        s.on_reply(&ack(Kind::Ack, 2, 2, 10));
        s.on_reply(&ack(Kind::Ack, 4, 1, 10));
        assert_eq!(s.outstanding(), 0);
        assert_eq!(s.commit_barrier(40), 39);
    }

    /// What the indexes must agree with, computed by scanning `pending`
    /// as the sender did before it kept them; then the commit barrier at
    /// `now` against it.
    fn check_against_scan(s: &mut Sender, now: Nanos, at: &str) {
        let mut counts: BTreeMap<u64, u32> = BTreeMap::new();
        for (&(ts, _), p) in &s.pending {
            if p.reliable {
                *counts.entry(ts).or_insert(0) += 1;
            }
        }
        assert_eq!(s.reliable_ts, counts, "{at}: reliable index");
        let timeout = s
            .pending
            .values()
            .map(|p| {
                p.sent_at.saturating_add(if p.reliable {
                    s.cfg.rto_ns
                } else {
                    s.cfg.ack_timeout_ns
                })
            })
            .min();
        assert_eq!(s.poll_timeout(), timeout, "{at}: poll_timeout");
        // Compaction keeps the queues within twice the outstanding limit.
        let held = s.rto_queue.len() + s.ack_queue.len();
        assert!(
            held <= 2 * s.cfg.max_outstanding + QUEUE_SLACK,
            "{at}: {held} queue entries for {} pending",
            s.pending.len()
        );
        let oldest = s
            .pending
            .iter()
            .filter(|(_, p)| p.reliable)
            .map(|((ts, _), _)| *ts)
            .min();
        let cand = oldest.unwrap_or(s.barrier(now)).saturating_sub(1);
        let want = s.commit.max(cand);
        assert_eq!(s.commit_barrier(now), want, "{at}: commit barrier");
    }

    /// A reply from `dst` to the pending message (ts, dst), or a stray
    /// one when it is not pending.
    fn reply(s: &mut Sender, kind: Kind, dst: u32, ts: u64) {
        let seq = s.pending.get(&(ts, dst)).map_or(u32::MAX, |p| p.seq);
        s.on_reply(&ack(kind, dst, seq, ts));
    }

    #[derive(Clone, Copy, Debug)]
    enum Op {
        Scatter(&'static [u32], bool),
        Ack(u32, u64),
        Nak(u32, u64),
        ProcFailed(u32),
        Timeout,
    }

    /// Applies `op` at `now`; returns the packets and events it made.
    fn apply(s: &mut Sender, now: Nanos, op: Op) -> (Vec<Outgoing>, Vec<SendEvent>) {
        match op {
            Op::Scatter(dsts, reliable) => {
                let msgs: Vec<(u32, &[u8])> = dsts.iter().map(|&d| (d, &b"m"[..])).collect();
                // Refusals (a failed receiver, full) are part of the test.
                let _ = s.scatter(now, &msgs, reliable);
            }
            Op::Ack(dst, ts) => reply(s, Kind::Ack, dst, ts),
            Op::Nak(dst, ts) => reply(s, Kind::Nak, dst, ts),
            Op::ProcFailed(p) => s.proc_failed(p, now),
            Op::Timeout => s.handle_timeout(now),
        }
        (
            std::iter::from_fn(|| s.poll_transmit()).collect(),
            std::iter::from_fn(|| s.poll_event()).collect(),
        )
    }

    /// What `handle_timeout(now)` must do, by a scan of `pending` in key
    /// order as the sender did before it kept queues: the (receiver,
    /// timestamp) of each retransmission, and the losses reported.
    fn timeouts_by_scan(s: &Sender, now: Nanos) -> (Vec<(u32, u64)>, Vec<SendEvent>) {
        let mut again = Vec::new();
        let mut lost = Vec::new();
        for (&(ts, dst), p) in &s.pending {
            if p.reliable {
                if now.saturating_sub(p.sent_at) >= s.cfg.rto_ns {
                    again.push((dst, ts));
                }
            } else if now.saturating_sub(p.sent_at) >= s.cfg.ack_timeout_ns {
                lost.push(SendEvent::Failed {
                    ts,
                    dst,
                    reason: FailReason::Unacknowledged,
                });
            }
        }
        (again, lost)
    }

    #[test]
    fn the_commit_barrier_matches_a_scan_of_the_pending_messages() {
        let mut s = Sender::new(
            1,
            SenderConfig {
                ack_timeout_ns: 1_000,
                rto_ns: 100,
                max_outstanding: 64,
            },
        );
        // (now, operation, the commit barrier at `now` after it)
        let cases: &[(Nanos, Op, u64)] = &[
            (5, Op::Timeout, 4),
            (10, Op::Scatter(&[2, 3], true), 9),
            (20, Op::Scatter(&[2], false), 9),
            (30, Op::Scatter(&[3, 4], true), 9),
            (35, Op::Ack(3, 10), 9),
            (36, Op::Ack(2, 10), 29),
            (37, Op::Ack(2, 10), 29), // stray
            (150, Op::Timeout, 29),   // sends 30 again
            (160, Op::Scatter(&[4], true), 29),
            (165, Op::Nak(2, 20), 29),
            (170, Op::ProcFailed(4), 29), // 30 aborted (its recall to 3 pending), 160 dropped
            (170, Op::Ack(3, 30), 169),   // the recall acknowledged
            (180, Op::Scatter(&[2, 3], true), 179),
            (185, Op::Scatter(&[4], true), 179), // refused: 4 failed
            (190, Op::Scatter(&[2], false), 179),
            (1_200, Op::Timeout, 179), // 190 lost, 180 sent again
            (1_210, Op::Ack(2, 180), 179),
            (1_220, Op::Scatter(&[2], true), 179),
            (1_230, Op::Ack(3, 180), 1_219),
            (100, Op::Scatter(&[3], true), 1_219), // clock behind: 1_221
            (1_240, Op::Ack(2, 1_220), 1_220),
            (1_250, Op::Ack(3, 1_221), 1_249),
            (50, Op::Timeout, 1_249), // never back
            (1_300, Op::ProcFailed(2), 1_299),
        ];
        for (i, &(now, op, want)) in cases.iter().enumerate() {
            apply(&mut s, now, op);
            let at = format!("row {i}: {op:?} at {now}");
            check_against_scan(&mut s, now, &at);
            assert_eq!(s.commit_barrier(now), want, "{at}");
        }
        assert_eq!(s.outstanding(), 0);
    }

    /// A receiver that acknowledged, then failed; then another receiver
    /// of the same scattering fails before acknowledging: the scattering
    /// is recalled from the one correct receiver only, and nothing stays
    /// pending (a recall to the first would never be acknowledged).
    #[test]
    fn no_recall_goes_to_a_process_that_failed_before() {
        let mut s = Sender::new(1, SenderConfig::default());
        let cases: &[(Nanos, Op, u64)] = &[
            (10, Op::Scatter(&[2, 3, 4], true), 9),
            (11, Op::Ack(4, 10), 9),
            (20, Op::ProcFailed(4), 9),
            // 3's failure aborts the scattering: one recall, to 2.
            (30, Op::ProcFailed(3), 9),
            (31, Op::Ack(2, 10), 30),
        ];
        for (i, &(now, op, want)) in cases.iter().enumerate() {
            apply(&mut s, now, op);
            check_against_scan(&mut s, now, &format!("row {i}"));
            assert_eq!(s.commit_barrier(now), want, "row {i}: {op:?}");
        }
        assert_eq!(s.outstanding(), 0);
    }

    /// Long pseudo-random runs, clocks sometimes behind, timeouts zero
    /// and huge too: the indexes never drift from a scan, and timeouts
    /// do what the scan says.
    #[test]
    fn the_indexes_match_a_scan_over_random_operations() {
        // (ack_timeout_ns, rto_ns)
        for (ack_timeout_ns, rto_ns) in [(300, 40), (0, 0), (u64::MAX - 20, 1)] {
            let mut s = Sender::new(
                1,
                SenderConfig {
                    ack_timeout_ns,
                    rto_ns,
                    max_outstanding: 200,
                },
            );
            const DSTS: [&[u32]; 5] = [&[2], &[3], &[2, 3], &[3, 4, 5], &[6]];
            let mut x = 0x9e37_79b9_7f4a_7c15u64;
            let mut next = move || {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x
            };
            let mut now: Nanos = 1;
            for i in 0..20_000 {
                // Mostly forward, sometimes behind.
                now = match next() % 10 {
                    0 => now.saturating_sub(next() % 50),
                    _ => now + next() % 7,
                };
                let keys: Vec<(u64, u32)> = s.pending.keys().copied().collect();
                let pick = |r: u64| keys.get(r as usize % keys.len().max(1)).copied();
                let op = match next() % 16 {
                    0..=4 => Op::Scatter(DSTS[(next() % 5) as usize], next() % 2 == 0),
                    5..=9 => pick(next()).map_or(Op::Timeout, |(ts, d)| Op::Ack(d, ts)),
                    10 => pick(next()).map_or(Op::Timeout, |(ts, d)| Op::Nak(d, ts)),
                    11 if i % 500 == 0 => Op::ProcFailed(2 + (next() % 5) as u32),
                    _ => Op::Timeout,
                };
                let at = format!("{ack_timeout_ns}/{rto_ns} step {i}: {op:?} at {now}");
                let want = matches!(op, Op::Timeout).then(|| timeouts_by_scan(&s, now));
                let (tx, events) = apply(&mut s, now, op);
                if let Some((again, lost)) = want {
                    let sent: Vec<(u32, u64)> =
                        tx.iter().map(|o| (o.header.dst, o.header.ts)).collect();
                    assert_eq!(sent, again, "{at}: retransmissions");
                    assert_eq!(events, lost, "{at}: losses");
                }
                check_against_scan(&mut s, now, &at);
            }
        }
    }
}
