//! Consumer groups, consumers and pending entries, and the option and
//! result types of group reads, claims and pending queries.

use super::entry::{entries_reply, Entry, Fields, GroupEntry};
use super::error::{arg, arity, int_or, is, msg, StreamError};
use super::id::{range_start, StreamId};
use crate::resp::Reply;
use imbl::{OrdMap, OrdSet};

/// A pending entry of a group: delivered, not yet acknowledged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Nack {
    /// The consumer it was last delivered to.
    pub consumer: Vec<u8>,
    /// When it was last delivered (ms, Unix time).
    pub delivery_time: i64,
    /// How many times it was delivered.
    pub delivery_count: u64,
}

/// A consumer of a group.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Consumer {
    /// Its last activity (ms): creation, reads, claims (7.0's seen-time).
    pub seen_time: i64,
    /// Its pending entries (their details are in the group's PEL).
    pub pel: OrdSet<StreamId>,
}

/// `entries_read` of a group whose counter is unknown.
pub const ENTRIES_READ_INVALID: i64 = -1;

/// A consumer group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Group {
    /// The last ID delivered to the group.
    pub last_id: StreamId,
    /// The logical read counter ([`ENTRIES_READ_INVALID`]: unknown).
    pub entries_read: i64,
    /// The pending entries list: ID → delivery.
    pub pel: OrdMap<StreamId, Nack>,
    /// Consumers by name.
    pub consumers: OrdMap<Vec<u8>, Consumer>,
}

impl Group {
    pub(super) fn new(last_id: StreamId, entries_read: i64) -> Group {
        Group {
            last_id,
            entries_read,
            pel: OrdMap::new(),
            consumers: OrdMap::new(),
        }
    }

    /// Redis's `streamLookupConsumer` with refresh, or
    /// `streamCreateConsumer`: the consumer's seen-time becomes `now`.
    /// Returns true when it was created.
    pub(super) fn touch_consumer(&mut self, name: &[u8], now: i64) -> bool {
        match self.consumers.get_mut(name) {
            Some(c) => {
                c.seen_time = now;
                false
            }
            None => {
                self.consumers.insert(
                    name.to_vec(),
                    Consumer {
                        seen_time: now,
                        pel: OrdSet::new(),
                    },
                );
                true
            }
        }
    }

    /// Removes `id` from the PEL and from its consumer's.
    pub(super) fn drop_nack(&mut self, id: StreamId) -> bool {
        match self.pel.remove(&id) {
            Some(n) => {
                if let Some(c) = self.consumers.get_mut(&n.consumer) {
                    c.pel.remove(&id);
                }
                true
            }
            None => false,
        }
    }

    /// Gives pending `id` to `consumer` (which exists), moving it out of
    /// its previous owner's PEL.
    pub(super) fn reassign(&mut self, id: StreamId, consumer: &[u8]) {
        let Some(n) = self.pel.get_mut(&id) else {
            return;
        };
        if n.consumer.as_slice() != consumer {
            let old = std::mem::replace(&mut n.consumer, consumer.to_vec());
            if let Some(c) = self.consumers.get_mut(&old) {
                c.pel.remove(&id);
            }
        }
        if let Some(c) = self.consumers.get_mut(consumer) {
            c.pel.insert(id);
        }
    }
}

/// What [`Stream::read_group`](super::Stream::read_group) did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupRead {
    /// The entries served (`None`: nothing to serve, the consumer was not
    /// looked up; Redis leaves the stream out of the reply). A history
    /// read gives `(id, None)` for a pending entry no longer in the stream.
    pub entries: Option<Vec<GroupEntry>>,
    /// The consumer was created by this read.
    pub consumer_created: bool,
}

/// Where XREADGROUP (and XREAD) read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadFrom {
    /// Entries after this ID (XREAD; for XREADGROUP, the consumer's
    /// pending entries after it).
    After(StreamId),
    /// `>`: entries never delivered to the group.
    New,
}

/// Options of XCLAIM (besides the IDs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ClaimOptions {
    /// min-idle-time (ms; negative taken as 0).
    pub min_idle: i64,
    /// `IDLE ms` or `TIME ms-unix-time`, the last given (each sets the
    /// delivery time; one outside `0..=now` means now).
    pub delivery: Option<ClaimDelivery>,
    /// `RETRYCOUNT n` (negative: as if not given).
    pub retry_count: Option<i64>,
    /// `FORCE`.
    pub force: bool,
    /// `JUSTID`.
    pub just_id: bool,
    /// `LASTID id`.
    pub last_id: Option<StreamId>,
}

/// XCLAIM's new delivery time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClaimDelivery {
    /// `IDLE ms`: `now - ms`.
    Idle(i64),
    /// `TIME ms`: that Unix time.
    Time(i64),
}

/// Entries or IDs claimed by XCLAIM/XAUTOCLAIM.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claimed {
    /// Without JUSTID: the entries.
    Entries(Vec<Entry>),
    /// With JUSTID: their IDs.
    Ids(Vec<StreamId>),
}

impl Claimed {
    pub(super) fn new(just_id: bool) -> Claimed {
        if just_id {
            Claimed::Ids(Vec::new())
        } else {
            Claimed::Entries(Vec::new())
        }
    }

    pub(super) fn push(&mut self, id: StreamId, fields: &Fields) {
        match self {
            Claimed::Entries(v) => v.push((id, fields.clone())),
            Claimed::Ids(v) => v.push(id),
        }
    }

    /// How many.
    pub fn len(&self) -> usize {
        match self {
            Claimed::Entries(v) => v.len(),
            Claimed::Ids(v) => v.len(),
        }
    }

    /// True when nothing was claimed.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The RESP reply: an array of entries, or of IDs.
    pub fn to_reply(&self) -> Reply {
        match self {
            Claimed::Entries(v) => entries_reply(v),
            Claimed::Ids(v) => Reply::Array(Some(v.iter().map(|id| id.to_reply()).collect())),
        }
    }
}

/// What XCLAIM did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimOutcome {
    /// The reply.
    pub claimed: Claimed,
    /// The consumer was created.
    pub consumer_created: bool,
}

/// What XAUTOCLAIM did; its reply is `[next, claimed, deleted]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AutoClaimOutcome {
    /// The cursor for the next call (`0-0`: the scan is complete).
    pub next: StreamId,
    /// The entries (or IDs) claimed.
    pub claimed: Claimed,
    /// Pending IDs found deleted from the stream, removed from the PEL
    /// (7.0's third element).
    pub deleted: Vec<StreamId>,
    /// The consumer was created.
    pub consumer_created: bool,
}

impl AutoClaimOutcome {
    /// The RESP reply `[next-id, claimed, deleted-ids]`.
    pub fn to_reply(&self) -> Reply {
        Reply::Array(Some(vec![
            self.next.to_reply(),
            self.claimed.to_reply(),
            Reply::Array(Some(self.deleted.iter().map(|id| id.to_reply()).collect())),
        ]))
    }
}

/// XPENDING's summary form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingSummary {
    /// Pending entries of the group.
    pub count: u64,
    /// The lowest and highest pending IDs (`None` when none is pending).
    pub bounds: Option<(StreamId, StreamId)>,
    /// Consumers with pending entries, by name, and how many each has.
    pub consumers: Vec<(Vec<u8>, u64)>,
}

impl PendingSummary {
    /// `[count, min, max, [[consumer, "n"], ...]]`; with nothing pending
    /// `[0, nil, nil, nil-array]`. The per-consumer counts are bulk
    /// strings, as Redis sends them.
    pub fn to_reply(&self) -> Reply {
        let count = Reply::Integer(self.count as i64);
        match self.bounds {
            None => Reply::Array(Some(vec![
                count,
                Reply::nil(),
                Reply::nil(),
                Reply::Array(None),
            ])),
            Some((lo, hi)) => Reply::Array(Some(vec![
                count,
                lo.to_reply(),
                hi.to_reply(),
                Reply::Array(Some(
                    self.consumers
                        .iter()
                        .map(|(n, c)| {
                            Reply::Array(Some(vec![
                                Reply::bulk(n.clone()),
                                Reply::bulk(c.to_string()),
                            ]))
                        })
                        .collect(),
                )),
            ])),
        }
    }
}

/// One line of XPENDING's extended form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingEntry {
    /// The entry.
    pub id: StreamId,
    /// Its consumer.
    pub consumer: Vec<u8>,
    /// Milliseconds since its last delivery (at least 0).
    pub idle: i64,
    /// Deliveries.
    pub delivery_count: u64,
}

/// The RESP reply of XPENDING's extended form:
/// `[[id, consumer, idle, deliveries], ...]`.
pub fn pending_entries_reply(v: &[PendingEntry]) -> Reply {
    Reply::Array(Some(
        v.iter()
            .map(|p| {
                Reply::Array(Some(vec![
                    p.id.to_reply(),
                    Reply::bulk(p.consumer.clone()),
                    Reply::Integer(p.idle),
                    Reply::Integer(p.delivery_count as i64),
                ]))
            })
            .collect(),
    ))
}

/// The arguments of XPENDING's extended form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingRange {
    /// `IDLE ms` (0: no filter).
    pub min_idle: i64,
    /// Inclusive start.
    pub start: StreamId,
    /// Inclusive end.
    pub end: StreamId,
    /// The most lines (0: none).
    pub count: u64,
    /// Only this consumer's entries.
    pub consumer: Option<Vec<u8>>,
}

/// `XAUTOCLAIM key group consumer min-idle-time start [COUNT n]
/// [JUSTID]`, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Xautoclaim {
    /// The group.
    pub group: Vec<u8>,
    /// The consumer.
    pub consumer: Vec<u8>,
    /// min-idle-time (negative taken as 0).
    pub min_idle: i64,
    /// Where the PEL scan starts.
    pub start: StreamId,
    /// COUNT (default 100).
    pub count: u64,
    /// JUSTID.
    pub just_id: bool,
}

impl Xautoclaim {
    /// Parses XAUTOCLAIM's words.
    pub fn parse(args: &[Vec<u8>]) -> Result<Xautoclaim, StreamError> {
        arity(args, -6, "xautoclaim")?;
        let min_idle = int_or(arg(args, 4), msg::XAUTOCLAIM_MIN_IDLE)?.max(0);
        let start = range_start(arg(args, 5))?;
        let mut r = Xautoclaim {
            group: arg(args, 2).to_vec(),
            consumer: arg(args, 3).to_vec(),
            min_idle,
            start,
            count: 100,
            just_id: false,
        };
        let n = args.len();
        let mut j = 6;
        while j < n {
            let more = n - 1 - j;
            let o = arg(args, j);
            if is(o, "COUNT") && more > 0 {
                let max = i64::MAX / 16;
                let c = int_or(arg(args, j + 1), msg::XAUTOCLAIM_COUNT)?;
                if !(1..=max).contains(&c) {
                    return Err(StreamError::Msg(msg::XAUTOCLAIM_COUNT));
                }
                r.count = c as u64;
                j += 1;
            } else if is(o, "JUSTID") {
                r.just_id = true;
            } else {
                return Err(StreamError::Syntax);
            }
            j += 1;
        }
        Ok(r)
    }
}
