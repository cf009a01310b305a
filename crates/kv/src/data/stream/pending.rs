//! `XACK`, `XPENDING`, `XCLAIM` and `XAUTOCLAIM`.

use super::command::{outcome, Key, KeyMut, Outcome};
use super::error::{arg, arity, ctext, int, int_or, is, msg, nogroup, StreamError};
use super::group::{
    pending_entries_reply, AutoClaimOutcome, ClaimDelivery, ClaimOptions, Claimed, PendingEntry,
    PendingRange, PendingSummary, Xautoclaim,
};
use super::id::{range_end, range_start, StreamId};
use super::write::strict_ids;
use crate::resp::Reply;

/// `XACK key group id [id ...]`, parsed (the IDs are checked after the
/// key and group, as in Redis).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Xack {
    /// The group.
    pub group: Vec<u8>,
    /// The ID words.
    pub ids: Vec<Vec<u8>>,
}

impl Xack {
    /// Parses XACK's words.
    pub fn parse(args: &[Vec<u8>]) -> Result<Xack, StreamError> {
        arity(args, -4, "xack")?;
        Ok(Xack {
            group: arg(args, 2).to_vec(),
            ids: args.get(3..).unwrap_or(&[]).to_vec(),
        })
    }
}

/// Runs XACK: how many IDs were pending (0 without the key or group).
pub fn xack(key: KeyMut<'_>, a: &Xack) -> Result<Outcome<u64>, StreamError> {
    let KeyMut::Slot(slot) = key else {
        return Err(StreamError::WrongType);
    };
    let Some(s) = slot.as_mut().filter(|s| s.group(&a.group).is_some()) else {
        return Ok(outcome(0, vec![]));
    };
    let ids = strict_ids(&a.ids)?;
    Ok(outcome(s.ack(&a.group, &ids).unwrap_or(0), vec![]))
}

/// `XPENDING key group [[IDLE ms] start end count [consumer]]`, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Xpending {
    /// The group.
    pub group: Vec<u8>,
    /// The extended form (`None`: the summary).
    pub range: Option<PendingRange>,
}

/// What XPENDING replies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum XpendingReply {
    /// The summary form.
    Summary(PendingSummary),
    /// The extended form.
    Entries(Vec<PendingEntry>),
}

impl XpendingReply {
    /// The RESP reply.
    pub fn to_reply(&self) -> Reply {
        match self {
            XpendingReply::Summary(s) => s.to_reply(),
            XpendingReply::Entries(e) => pending_entries_reply(e),
        }
    }
}

impl Xpending {
    /// Parses XPENDING's words.
    pub fn parse(args: &[Vec<u8>]) -> Result<Xpending, StreamError> {
        arity(args, -3, "xpending")?;
        let n = args.len();
        if n != 3 && !(6..=9).contains(&n) {
            return Err(StreamError::Syntax);
        }
        let mut range = None;
        if n >= 6 {
            let mut at = 3;
            let mut min_idle = 0;
            if is(arg(args, 3), "IDLE") {
                min_idle = int(arg(args, 4))?;
                if n < 8 {
                    return Err(StreamError::Syntax);
                }
                at += 2;
            }
            let count = int(arg(args, at + 2))?.max(0) as u64;
            let start = range_start(arg(args, at))?;
            let end = range_end(arg(args, at + 1))?;
            let consumer = args.get(at + 3).cloned();
            range = Some(PendingRange {
                min_idle,
                start,
                end,
                count,
                consumer,
            });
        }
        Ok(Xpending {
            group: arg(args, 2).to_vec(),
            range,
        })
    }
}

/// Runs XPENDING at `now_ms` (idle times); `key_name` for the NOGROUP
/// error.
pub fn xpending(
    key: Key<'_>,
    key_name: &[u8],
    a: &Xpending,
    now_ms: u64,
) -> Result<XpendingReply, StreamError> {
    let s = match key {
        Key::WrongType => return Err(StreamError::WrongType),
        Key::Missing => None,
        Key::Stream(s) => Some(s),
    };
    let err = || nogroup(key_name, &a.group, "");
    let s = s.filter(|s| s.group(&a.group).is_some()).ok_or_else(err)?;
    match &a.range {
        None => s
            .pending_summary(&a.group)
            .map(XpendingReply::Summary)
            .ok_or_else(err),
        Some(r) => s
            .pending_range(&a.group, r, now_ms)
            .map(XpendingReply::Entries)
            .ok_or_else(err),
    }
}

/// `XCLAIM key group consumer min-idle-time id [id ...] [IDLE ms] [TIME
/// ms] [RETRYCOUNT n] [FORCE] [JUSTID] [LASTID id]`, parsed (Redis reads
/// everything after the group check, so the words are kept).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Xclaim {
    /// The group.
    pub group: Vec<u8>,
    /// The consumer.
    pub consumer: Vec<u8>,
    /// min-idle-time, the IDs and the options, as words.
    pub rest: Vec<Vec<u8>>,
}

impl Xclaim {
    /// Parses XCLAIM's words (arity only).
    pub fn parse(args: &[Vec<u8>]) -> Result<Xclaim, StreamError> {
        arity(args, -6, "xclaim")?;
        Ok(Xclaim {
            group: arg(args, 2).to_vec(),
            consumer: arg(args, 3).to_vec(),
            rest: args.get(4..).unwrap_or(&[]).to_vec(),
        })
    }

    /// The min-idle-time, IDs and options (IDs are read until the first
    /// word that is not one; the rest must be options).
    pub fn options(&self) -> Result<(Vec<StreamId>, ClaimOptions), StreamError> {
        let mut o = ClaimOptions {
            min_idle: int_or(arg(&self.rest, 0), msg::XCLAIM_MIN_IDLE)?.max(0),
            ..ClaimOptions::default()
        };
        let words = self.rest.get(1..).unwrap_or(&[]);
        let mut ids = Vec::new();
        let mut j = 0;
        while j < words.len() {
            match StreamId::parse_strict(&words[j], 0) {
                Ok(id) => ids.push(id),
                Err(_) => break,
            }
            j += 1;
        }
        while j < words.len() {
            let more = words.len() - 1 - j;
            let w = &words[j];
            if is(w, "FORCE") {
                o.force = true;
            } else if is(w, "JUSTID") {
                o.just_id = true;
            } else if is(w, "IDLE") && more > 0 {
                j += 1;
                o.delivery = Some(ClaimDelivery::Idle(int_or(&words[j], msg::XCLAIM_IDLE)?));
            } else if is(w, "TIME") && more > 0 {
                j += 1;
                o.delivery = Some(ClaimDelivery::Time(int_or(&words[j], msg::XCLAIM_TIME)?));
            } else if is(w, "RETRYCOUNT") && more > 0 {
                j += 1;
                o.retry_count = Some(int_or(&words[j], msg::XCLAIM_RETRYCOUNT)?);
            } else if is(w, "LASTID") && more > 0 {
                j += 1;
                o.last_id = Some(StreamId::parse_strict(&words[j], 0)?);
            } else {
                return Err(StreamError::UnrecognizedXclaimOption(ctext(w, usize::MAX)));
            }
            j += 1;
        }
        Ok((ids, o))
    }
}

/// Runs XCLAIM at `now_ms`; `key_name` for the NOGROUP error. Event:
/// `xgroup-createconsumer` when the consumer was created.
pub fn xclaim(
    key: KeyMut<'_>,
    key_name: &[u8],
    a: &Xclaim,
    now_ms: u64,
) -> Result<Outcome<Claimed>, StreamError> {
    let KeyMut::Slot(slot) = key else {
        return Err(StreamError::WrongType);
    };
    let Some(s) = slot.as_mut().filter(|s| s.group(&a.group).is_some()) else {
        return Err(nogroup(key_name, &a.group, ""));
    };
    let (ids, o) = a.options()?;
    let r = s
        .claim(&a.group, &a.consumer, &ids, &o, now_ms)
        .ok_or_else(|| nogroup(key_name, &a.group, ""))?;
    let events = if r.consumer_created {
        vec!["xgroup-createconsumer"]
    } else {
        vec![]
    };
    Ok(outcome(r.claimed, events))
}

/// Runs XAUTOCLAIM at `now_ms`; `key_name` for the NOGROUP error. Event:
/// `xgroup-createconsumer` when the consumer was created.
pub fn xautoclaim(
    key: KeyMut<'_>,
    key_name: &[u8],
    a: &Xautoclaim,
    now_ms: u64,
) -> Result<Outcome<AutoClaimOutcome>, StreamError> {
    let KeyMut::Slot(slot) = key else {
        return Err(StreamError::WrongType);
    };
    let Some(s) = slot.as_mut() else {
        return Err(nogroup(key_name, &a.group, ""));
    };
    let r = s
        .autoclaim(a, now_ms)
        .ok_or_else(|| nogroup(key_name, &a.group, ""))?;
    let events = if r.consumer_created {
        vec!["xgroup-createconsumer"]
    } else {
        vec![]
    };
    Ok(outcome(r, events))
}
