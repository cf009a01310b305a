//! A process's receive side: messages held in timestamp order until the
//! barrier passes them.
//!
//! A best-effort message is delivered once the best-effort barrier is
//! above its timestamp; a reliable one once the commit barrier reaches
//! it. Each kind is one total order: by timestamp, then by sender. A
//! best-effort message that arrives below the barrier already used for
//! delivery is late: it is refused with a NAK (its sender reports it),
//! never delivered out of order. A message seen again (a reliable
//! retransmission whose ACK was lost, or a copy the network duplicated)
//! is acknowledged again and kept once: held messages are known by
//! ⟨sender, timestamp⟩, delivered reliable ones lie at or below the commit
//! barrier, and the last 4 096 delivered best-effort ones are remembered.
//! Every held message is acknowledged, which is how senders find losses.
//!
//! Memory is bounded (`max_held` messages, `max_bytes` of payload): a
//! best-effort message beyond them is refused with a NAK; a reliable one
//! is not acknowledged, so its sender retransmits it later.

use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap, HashSet, VecDeque};

/// Delivered best-effort messages remembered, to know a late duplicate
/// from a late original.
const RECENT: usize = 4096;

use crate::wire::{Header, Kind};
use crate::Nanos;

/// Settings of a receiver.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReceiverConfig {
    /// Messages held at most.
    pub max_held: usize,
    /// Payload bytes held at most.
    pub max_bytes: usize,
    /// The bound on clock skew between any two processes, for an order
    /// consistent with real time: a message of timestamp `ts` is delivered
    /// only once this receiver's clock reads past `ts + skew` (a commit
    /// wait, as Spanner's). Then a scattering sent after another was
    /// delivered anywhere gets a larger timestamp, whatever the clocks.
    /// `None`: the order only (delivery waits for the barriers alone).
    pub skew_ns: Option<Nanos>,
}

impl Default for ReceiverConfig {
    /// 65 536 messages, 64 MiB, no skew wait.
    fn default() -> Self {
        ReceiverConfig {
            max_held: 65_536,
            max_bytes: 64 << 20,
            skew_ns: None,
        }
    }
}

/// A delivered message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Delivery {
    /// Its timestamp.
    pub ts: u64,
    /// Its sender.
    pub src: u32,
    /// Reliable (delivered at the commit barrier) or best effort.
    pub reliable: bool,
    /// The payload.
    pub payload: Vec<u8>,
    /// When it arrived (the caller's clock): delivery minus arrival is the
    /// wait for the barrier, the price of the order.
    pub arrived: Nanos,
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Held {
    ts: u64,
    src: u32,
    seq: u32,
    payload: Vec<u8>,
    arrived: Nanos,
}

/// Why a packet was not taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RecvError {
    /// A packet for another process.
    #[error("packet for process {dst}, this is {me}")]
    NotMine {
        /// Addressed to.
        dst: u32,
        /// This process.
        me: u32,
    },
    /// A kind a receiver does not take (ACK, NAK).
    #[error("{0:?} packet at a receiver")]
    Kind(Kind),
}

/// Counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReceiverStats {
    /// Messages delivered.
    pub delivered: u64,
    /// Best-effort messages refused for arriving below the barrier.
    pub late: u64,
    /// Messages refused (best effort) or left unacknowledged (reliable)
    /// for want of room.
    pub full: u64,
    /// Reliable messages seen again.
    pub duplicates: u64,
    /// Messages dropped by a recall or a failed sender's discard.
    pub discarded: u64,
}

/// A process's receive side.
#[derive(Debug)]
pub struct Receiver {
    me: u32,
    cfg: ReceiverConfig,
    best_effort: BinaryHeap<Reverse<Held>>,
    reliable: BinaryHeap<Reverse<Held>>,
    /// (sender, timestamp) of the messages held.
    held_keys: HashSet<(u32, u64)>,
    /// (sender, timestamp) of the last [`RECENT`] best-effort deliveries,
    /// oldest first, and the same as a set.
    recent: VecDeque<(u32, u64)>,
    recent_keys: HashSet<(u32, u64)>,
    /// (timestamp, sender) of reliable messages recalled and not yet
    /// under the commit barrier: a copy that comes after its RECALL (the
    /// network reordered them) is not held.
    recalled: BTreeSet<(u64, u32)>,
    bytes: usize,
    barrier: u64,
    commit: u64,
    replies: VecDeque<Header>,
    stats: ReceiverStats,
}

impl Receiver {
    /// The receive side of process `me`.
    pub fn new(me: u32, cfg: ReceiverConfig) -> Self {
        Receiver {
            me,
            cfg,
            best_effort: BinaryHeap::new(),
            reliable: BinaryHeap::new(),
            held_keys: HashSet::new(),
            recent: VecDeque::with_capacity(RECENT),
            recent_keys: HashSet::with_capacity(RECENT),
            recalled: BTreeSet::new(),
            bytes: 0,
            barrier: 0,
            commit: 0,
            replies: VecDeque::new(),
            stats: ReceiverStats::default(),
        }
    }

    /// The counters.
    pub fn stats(&self) -> &ReceiverStats {
        &self.stats
    }

    /// The (best-effort, commit) barriers seen.
    pub fn barriers(&self) -> (u64, u64) {
        (self.barrier, self.commit)
    }

    /// Messages held.
    pub fn held(&self) -> usize {
        self.best_effort.len() + self.reliable.len()
    }

    fn reply(&mut self, kind: Kind, h: &Header) {
        self.replies.push_back(Header {
            kind,
            reliable: h.reliable,
            src: self.me,
            dst: h.src,
            seq: h.seq,
            ts: h.ts,
            barrier: 0,
            commit: 0,
        });
    }

    /// A packet from the last hop: a message, a beacon or a recall (with
    /// its payload), arrived at `now`. Its barriers apply after the
    /// message is held.
    pub fn on_packet(&mut self, h: &Header, payload: &[u8], now: Nanos) -> Result<(), RecvError> {
        match h.kind {
            Kind::Data => {
                if h.dst != self.me {
                    return Err(RecvError::NotMine {
                        dst: h.dst,
                        me: self.me,
                    });
                }
                self.message(h, payload, now);
            }
            Kind::Recall => {
                if h.dst != self.me {
                    return Err(RecvError::NotMine {
                        dst: h.dst,
                        me: self.me,
                    });
                }
                self.recall(h.src, h.ts);
                if h.ts > self.commit {
                    self.recalled.insert((h.ts, h.src));
                }
                self.reply(Kind::Ack, h);
            }
            Kind::Beacon => {}
            k => return Err(RecvError::Kind(k)),
        }
        self.on_barriers(h.barrier, h.commit);
        Ok(())
    }

    fn message(&mut self, h: &Header, payload: &[u8], now: Nanos) {
        let key = (h.src, h.ts);
        let seen = self.held_keys.contains(&key)
            || if h.reliable {
                h.ts <= self.commit || self.recalled.contains(&(h.ts, h.src))
            } else {
                self.recent_keys.contains(&key)
            };
        if seen {
            // Held or delivered already: the ACK was lost, or the network
            // made a copy.
            self.stats.duplicates += 1;
            self.reply(Kind::Ack, h);
            return;
        }
        if !h.reliable && h.ts < self.barrier {
            self.stats.late += 1;
            self.reply(Kind::Nak, h);
            return;
        }
        if self.held() >= self.cfg.max_held || self.bytes + payload.len() > self.cfg.max_bytes {
            self.stats.full += 1;
            if !h.reliable {
                self.reply(Kind::Nak, h);
            }
            return;
        }
        let held = Held {
            ts: h.ts,
            src: h.src,
            seq: h.seq,
            payload: payload.to_vec(),
            arrived: now,
        };
        self.bytes += payload.len();
        self.held_keys.insert(key);
        if h.reliable {
            self.reliable.push(Reverse(held));
        } else {
            self.best_effort.push(Reverse(held));
        }
        self.reply(Kind::Ack, h);
    }

    /// New barriers from the last hop (they never go back).
    pub fn on_barriers(&mut self, barrier: u64, commit: u64) {
        self.barrier = self.barrier.max(barrier);
        self.commit = self.commit.max(commit.min(self.barrier));
        // Copies at or below the commit barrier count as seen anyway.
        while self
            .recalled
            .first()
            .is_some_and(|&(ts, _)| ts <= self.commit)
        {
            self.recalled.pop_first();
        }
    }

    /// The next deliverable message at `now` (this receiver's clock):
    /// best effort below the barrier first, then reliable at or below the
    /// commit barrier; with a skew bound, only what is older than `now`
    /// minus the bound.
    pub fn poll_deliver(&mut self, now: Nanos) -> Option<Delivery> {
        // Below `ripe`: old enough for the skew wait.
        let ripe = self.cfg.skew_ns.map_or(u64::MAX, |s| now.saturating_sub(s));
        let be = self
            .best_effort
            .peek()
            .is_some_and(|Reverse(m)| m.ts < self.barrier && m.ts < ripe);
        let (heap, reliable) = if be {
            (&mut self.best_effort, false)
        } else if self
            .reliable
            .peek()
            .is_some_and(|Reverse(m)| m.ts <= self.commit && m.ts < ripe)
        {
            (&mut self.reliable, true)
        } else {
            return None;
        };
        let Reverse(m) = heap.pop()?;
        self.held_keys.remove(&(m.src, m.ts));
        if !reliable {
            if self.recent.len() == RECENT {
                if let Some(old) = self.recent.pop_front() {
                    self.recent_keys.remove(&old);
                }
            }
            self.recent.push_back((m.src, m.ts));
            self.recent_keys.insert((m.src, m.ts));
        }
        self.bytes -= m.payload.len();
        self.stats.delivered += 1;
        Some(Delivery {
            ts: m.ts,
            src: m.src,
            reliable,
            payload: m.payload,
            arrived: m.arrived,
        })
    }

    /// With a skew bound: when the oldest message the barriers let
    /// through becomes old enough to deliver (this receiver's clock).
    pub fn poll_timeout(&self) -> Option<Nanos> {
        let skew = self.cfg.skew_ns?;
        let be = self
            .best_effort
            .peek()
            .filter(|Reverse(m)| m.ts < self.barrier)
            .map(|Reverse(m)| m.ts);
        let rel = self
            .reliable
            .peek()
            .filter(|Reverse(m)| m.ts <= self.commit)
            .map(|Reverse(m)| m.ts);
        let ts = match (be, rel) {
            (Some(a), Some(b)) => a.min(b),
            (a, b) => a.or(b)?,
        };
        Some(ts.saturating_add(skew).saturating_add(1))
    }

    /// The next ACK or NAK to send.
    pub fn poll_reply(&mut self) -> Option<Header> {
        self.replies.pop_front()
    }

    /// Drops the held message of `src` at `ts` (its scattering was
    /// aborted), if it is still held.
    pub fn recall(&mut self, src: u32, ts: u64) {
        self.retain(|m| !(m.src == src && m.ts == ts));
    }

    /// `proc` failed at `t_fail`: its held reliable messages above that
    /// timestamp are dropped (nothing of it after `t_fail` is delivered
    /// anywhere); those at or below are delivered as usual.
    pub fn discard(&mut self, proc: u32, t_fail: u64) {
        self.retain(|m| !(m.src == proc && m.ts > t_fail));
    }

    fn retain(&mut self, keep: impl Fn(&Held) -> bool) {
        let mut gone = 0usize;
        let mut bytes = 0usize;
        let held = &mut self.held_keys;
        for heap in [&mut self.reliable, &mut self.best_effort] {
            heap.retain(|Reverse(m)| {
                let k = keep(m);
                if !k {
                    gone += 1;
                    bytes += m.payload.len();
                    held.remove(&(m.src, m.ts));
                }
                k
            });
        }
        self.bytes -= bytes;
        self.stats.discarded += gone as u64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(src: u32, seq: u32, ts: u64, reliable: bool, barrier: u64, commit: u64) -> Header {
        Header {
            kind: Kind::Data,
            reliable,
            src,
            dst: 1,
            seq,
            ts,
            barrier,
            commit,
        }
    }

    fn drain(r: &mut Receiver) -> Vec<(u64, u32, bool)> {
        std::iter::from_fn(|| r.poll_deliver(0))
            .map(|d| (d.ts, d.src, d.reliable))
            .collect()
    }

    fn replies(r: &mut Receiver) -> Vec<(Kind, u32, u32)> {
        std::iter::from_fn(|| r.poll_reply())
            .map(|h| (h.kind, h.dst, h.seq))
            .collect()
    }

    /// With a skew bound of 100, a message is delivered once the
    /// barriers let it through *and* the receiver's clock reads past its
    /// timestamp plus 100; the timer says when.
    #[test]
    fn the_skew_wait_holds_messages_until_the_clock_passes_ts_plus_skew() {
        let mut r = Receiver::new(
            1,
            ReceiverConfig {
                skew_ns: Some(100),
                ..ReceiverConfig::default()
            },
        );
        r.on_packet(&data(2, 0, 50, true, 40, 30), b"r", 0).unwrap();
        r.on_packet(&data(3, 0, 60, false, 40, 30), b"b", 0)
            .unwrap();
        r.on_packet(&data(4, 0, 75, false, 40, 30), b"c", 0)
            .unwrap();
        r.on_barriers(80, 70);
        // (now, what is delivered: (ts, src), the timer after)
        type Row = (Nanos, &'static [(u64, u32)], Option<Nanos>);
        let cases: &[Row] = &[
            (100, &[], Some(151)),
            (150, &[], Some(151)), // 50 + 100 is not past
            (151, &[(50, 2)], Some(161)),
            (170, &[(60, 3)], Some(176)),
            (1_000, &[(75, 4)], None),
        ];
        for (i, &(now, want, timer)) in cases.iter().enumerate() {
            let got: Vec<(u64, u32)> = std::iter::from_fn(|| r.poll_deliver(now))
                .map(|d| (d.ts, d.src))
                .collect();
            assert_eq!(got, want, "row {i}");
            assert_eq!(r.poll_timeout(), timer, "row {i}");
        }
        // Without a bound there is no timer: the barriers alone decide.
        assert_eq!(
            Receiver::new(1, ReceiverConfig::default()).poll_timeout(),
            None
        );
    }

    #[test]
    fn messages_wait_for_the_barrier_and_go_in_timestamp_then_sender_order() {
        let mut r = Receiver::new(1, ReceiverConfig::default());
        // Out of order arrivals; the barriers they carry lag.
        r.on_packet(&data(3, 0, 30, false, 5, 0), b"c", 0).unwrap();
        r.on_packet(&data(2, 0, 20, false, 5, 0), b"b", 0).unwrap();
        r.on_packet(&data(4, 0, 20, false, 5, 0), b"b'", 0).unwrap();
        assert_eq!(drain(&mut r), []);
        r.on_barriers(21, 0);
        assert_eq!(drain(&mut r), [(20, 2, false), (20, 4, false)]);
        // Strictly below: 30 waits for a barrier above 30.
        r.on_barriers(30, 0);
        assert_eq!(drain(&mut r), []);
        r.on_barriers(31, 0);
        assert_eq!(drain(&mut r), [(30, 3, false)]);
        assert_eq!(
            replies(&mut r),
            [(Kind::Ack, 3, 0), (Kind::Ack, 2, 0), (Kind::Ack, 4, 0)]
        );
    }

    #[test]
    fn a_late_best_effort_message_is_refused_with_a_nak() {
        let mut r = Receiver::new(1, ReceiverConfig::default());
        r.on_barriers(100, 0);
        r.on_packet(&data(2, 7, 99, false, 100, 0), b"x", 0)
            .unwrap();
        assert_eq!(replies(&mut r), [(Kind::Nak, 2, 7)]);
        assert_eq!(drain(&mut r), []);
        assert_eq!(r.stats().late, 1);
    }

    #[test]
    fn reliable_messages_go_at_the_commit_barrier_once() {
        let mut r = Receiver::new(1, ReceiverConfig::default());
        r.on_packet(&data(2, 0, 10, true, 10, 0), b"a", 0).unwrap();
        r.on_packet(&data(2, 0, 10, true, 10, 0), b"a", 0).unwrap(); // again
        r.on_packet(&data(3, 0, 10, true, 12, 0), b"b", 0).unwrap();
        assert_eq!(drain(&mut r), []);
        r.on_barriers(50, 10); // ≤ commit: both at 10
        assert_eq!(drain(&mut r), [(10, 2, true), (10, 3, true)]);
        r.on_packet(&data(2, 0, 10, true, 50, 10), b"a", 0).unwrap(); // after delivery
        assert_eq!(drain(&mut r), []);
        assert_eq!(r.stats().duplicates, 2);
        assert_eq!(
            replies(&mut r),
            [
                (Kind::Ack, 2, 0),
                (Kind::Ack, 2, 0),
                (Kind::Ack, 3, 0),
                (Kind::Ack, 2, 0)
            ]
        );
    }

    #[test]
    fn best_effort_copies_are_kept_once_and_acknowledged() {
        let mut r = Receiver::new(1, ReceiverConfig::default());
        r.on_packet(&data(2, 0, 10, false, 0, 0), b"a", 0).unwrap();
        r.on_packet(&data(2, 0, 10, false, 0, 0), b"a", 0).unwrap(); // held copy
        r.on_barriers(20, 0);
        assert_eq!(drain(&mut r), [(10, 2, false)]);
        r.on_packet(&data(2, 0, 10, false, 20, 0), b"a", 0).unwrap(); // delivered copy
        r.on_packet(&data(3, 0, 15, false, 20, 0), b"b", 0).unwrap(); // truly late
        assert_eq!(drain(&mut r), []);
        assert_eq!(
            replies(&mut r),
            [
                (Kind::Ack, 2, 0),
                (Kind::Ack, 2, 0),
                (Kind::Ack, 2, 0),
                (Kind::Nak, 3, 0)
            ]
        );
        assert_eq!(r.stats().duplicates, 2);
        assert_eq!(r.stats().late, 1);
    }

    #[test]
    fn a_delivery_carries_its_arrival() {
        let mut r = Receiver::new(1, ReceiverConfig::default());
        r.on_packet(&data(2, 0, 10, false, 0, 0), b"a", 700)
            .unwrap();
        r.on_packet(&data(3, 0, 5, false, 0, 0), b"b", 900).unwrap();
        r.on_barriers(20, 0);
        let got: Vec<_> = std::iter::from_fn(|| r.poll_deliver(0))
            .map(|d| (d.ts, d.arrived))
            .collect();
        assert_eq!(got, [(5, 900), (10, 700)]);
    }

    #[test]
    fn discard_and_recall_drop_what_must_not_be_delivered() {
        let mut r = Receiver::new(1, ReceiverConfig::default());
        for (src, ts) in [(2, 10), (2, 20), (2, 30), (3, 25)] {
            r.on_packet(&data(src, 0, ts, true, ts, 0), b"m", 0)
                .unwrap();
        }
        r.discard(2, 20); // 2 failed at 20: its 30 goes
        r.on_packet(
            &Header {
                kind: Kind::Recall,
                ..data(3, 0, 25, true, 30, 0)
            },
            b"",
            0,
        )
        .unwrap();
        r.on_barriers(100, 100);
        assert_eq!(drain(&mut r), [(10, 2, true), (20, 2, true)]);
        assert_eq!(r.stats().discarded, 2);
        assert_eq!(r.held(), 0);
    }

    #[test]
    fn room_is_bounded() {
        let mut r = Receiver::new(
            1,
            ReceiverConfig {
                max_held: 2,
                max_bytes: 100,
                skew_ns: None,
            },
        );
        r.on_packet(&data(2, 0, 10, false, 0, 0), b"a", 0).unwrap();
        r.on_packet(&data(2, 1, 11, true, 0, 0), b"b", 0).unwrap();
        r.on_packet(&data(2, 2, 12, false, 0, 0), b"c", 0).unwrap(); // NAK
        r.on_packet(&data(2, 3, 13, true, 0, 0), b"d", 0).unwrap(); // silence
        assert_eq!(
            replies(&mut r),
            [(Kind::Ack, 2, 0), (Kind::Ack, 2, 1), (Kind::Nak, 2, 2)]
        );
        assert_eq!(r.stats().full, 2);
        assert_eq!(
            r.on_packet(
                &Header {
                    dst: 5,
                    ..data(2, 0, 1, false, 0, 0)
                },
                b"",
                0
            ),
            Err(RecvError::NotMine { dst: 5, me: 1 })
        );
        assert_eq!(
            r.on_packet(
                &Header {
                    kind: Kind::Ack,
                    ..data(2, 0, 1, false, 0, 0)
                },
                b"",
                0
            ),
            Err(RecvError::Kind(Kind::Ack))
        );
    }
}
