//! [`StreamId`]: an entry ID and Redis's parsing of it (full, ms-only,
//! `-`/`+`, `(` exclusive bounds, `*` and `ms-*` for `XADD`).

use super::error::{cstr, is_exact, StreamError};
use crate::resp::{parse_i64_strict, Reply};
use std::fmt;

/// A stream entry ID: milliseconds and sequence, ordered as Redis orders
/// them (by `ms`, then `seq`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct StreamId {
    /// The milliseconds part.
    pub ms: u64,
    /// The sequence part.
    pub seq: u64,
}

impl fmt::Display for StreamId {
    /// `<ms>-<seq>`, as Redis replies.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.ms, self.seq)
    }
}

impl StreamId {
    /// `0-0`.
    pub const MIN: StreamId = StreamId { ms: 0, seq: 0 };
    /// `18446744073709551615-18446744073709551615`.
    pub const MAX: StreamId = StreamId {
        ms: u64::MAX,
        seq: u64::MAX,
    };

    /// `ms-seq`.
    pub const fn new(ms: u64, seq: u64) -> StreamId {
        StreamId { ms, seq }
    }

    /// True for `0-0`.
    pub fn is_zero(self) -> bool {
        self == StreamId::MIN
    }

    /// The next ID (`None` after the maximum), Redis's `streamIncrID`.
    pub fn incr(self) -> Option<StreamId> {
        if self.seq == u64::MAX {
            if self.ms == u64::MAX {
                None
            } else {
                Some(StreamId::new(self.ms + 1, 0))
            }
        } else {
            Some(StreamId::new(self.ms, self.seq + 1))
        }
    }

    /// The previous ID (`None` before `0-0`), Redis's `streamDecrID`.
    pub fn decr(self) -> Option<StreamId> {
        if self.seq == 0 {
            if self.ms == 0 {
                None
            } else {
                Some(StreamId::new(self.ms - 1, u64::MAX))
            }
        } else {
            Some(StreamId::new(self.ms, self.seq - 1))
        }
    }

    /// The ID as Redis writes it in a reply: `<ms>-<seq>`.
    pub fn to_bytes(self) -> Vec<u8> {
        self.to_string().into_bytes()
    }

    /// The ID as a bulk-string reply.
    pub fn to_reply(self) -> Reply {
        Reply::bulk(self.to_bytes())
    }

    /// Parses an ID where `-` (0-0) and `+` (the maximum) are accepted;
    /// an ID without `-seq` takes `missing_seq` (0 for a start, `u64::MAX`
    /// for an end). Redis's `streamParseIDOrReply` (XRANGE bounds,
    /// `XGROUP SETID`).
    pub fn parse(arg: &[u8], missing_seq: u64) -> Result<StreamId, StreamError> {
        parse_id(arg, missing_seq, false, false).map(|(id, _)| id)
    }

    /// Parses an ID where `-` and `+` are refused (Redis's
    /// `streamParseStrictIDOrReply`: XDEL, XACK, XCLAIM, XREAD IDs,
    /// `XGROUP CREATE`, `XSETID`, `MINID`).
    pub fn parse_strict(arg: &[u8], missing_seq: u64) -> Result<StreamId, StreamError> {
        parse_id(arg, missing_seq, true, false).map(|(id, _)| id)
    }

    /// Parses a range bound: `(` before an ID makes it exclusive (and
    /// strict: `(-`, `(+` are refused). Returns the ID and whether it was
    /// exclusive; see [`range_start`] and [`range_end`] for the bound
    /// itself.
    pub fn parse_interval(arg: &[u8], missing_seq: u64) -> Result<(StreamId, bool), StreamError> {
        if arg.len() > 1 && arg[0] == b'(' {
            Ok((parse_id(&arg[1..], missing_seq, true, false)?.0, true))
        } else {
            Ok((parse_id(arg, missing_seq, false, false)?.0, false))
        }
    }
}

/// An inclusive start bound from a range argument (`-`, `ms`, `ms-seq`,
/// `(ms-seq`): XRANGE's start, XREVRANGE's start (its last argument),
/// XPENDING's and XAUTOCLAIM's start.
pub fn range_start(arg: &[u8]) -> Result<StreamId, StreamError> {
    let (id, ex) = StreamId::parse_interval(arg, 0)?;
    if ex {
        id.incr().ok_or(StreamError::InvalidStart)
    } else {
        Ok(id)
    }
}

/// An inclusive end bound from a range argument (`+`, `ms` = `ms-MAX`,
/// `ms-seq`, `(ms-seq`).
pub fn range_end(arg: &[u8]) -> Result<StreamId, StreamError> {
    let (id, ex) = StreamId::parse_interval(arg, u64::MAX)?;
    if ex {
        id.decr().ok_or(StreamError::InvalidEnd)
    } else {
        Ok(id)
    }
}

/// The ID argument of XADD.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum XaddId {
    /// `*`: from the clock (`now_ms`), or the last ID plus one.
    Auto,
    /// `ms-*`: the given ms, the sequence generated.
    Ms(u64),
    /// `ms-seq` or `ms` (sequence 0).
    Explicit(StreamId),
}

impl XaddId {
    /// Parses XADD's ID argument (strict: no `-`/`+`).
    pub fn parse(arg: &[u8]) -> Result<XaddId, StreamError> {
        if is_exact(arg, "*") {
            return Ok(XaddId::Auto);
        }
        let (id, seq_given) = parse_id(arg, 0, true, true)?;
        Ok(if seq_given {
            XaddId::Explicit(id)
        } else {
            XaddId::Ms(id.ms)
        })
    }
}

/// Redis's `streamGenericParseIDOrReply`: returns the ID and whether the
/// sequence was given (false only for `ms-*` when `star_seq`).
pub(super) fn parse_id(
    arg: &[u8],
    missing_seq: u64,
    strict: bool,
    star_seq: bool,
) -> Result<(StreamId, bool), StreamError> {
    // Redis copies the argument into a 128-byte buffer and reads it as a
    // C string.
    if arg.len() > 127 {
        return Err(StreamError::InvalidId);
    }
    let buf = cstr(arg);
    if strict && (buf == b"-" || buf == b"+") {
        return Err(StreamError::InvalidId);
    }
    if buf == b"-" {
        return Ok((StreamId::MIN, true));
    }
    if buf == b"+" {
        return Ok((StreamId::MAX, true));
    }
    let (ms_part, seq_part) = match buf.iter().position(|&c| c == b'-') {
        Some(i) => (&buf[..i], Some(&buf[i + 1..])),
        None => (buf, None),
    };
    let ms = string2ull(ms_part).ok_or(StreamError::InvalidId)?;
    let (seq, given) = match seq_part {
        Some(b"*") if star_seq => (0, false),
        Some(s) => (string2ull(s).ok_or(StreamError::InvalidId)?, true),
        None => (missing_seq, true),
    };
    Ok((StreamId::new(ms, seq), given))
}

/// Redis's `string2ull`: a strict integer (`string2ll`) that must not be
/// negative, else whatever C's `strtoull` accepts in full (leading
/// spaces, a sign, leading zeros; a `-` negates modulo 2^64).
pub(super) fn string2ull(s: &[u8]) -> Option<u64> {
    if let Some(v) = parse_i64_strict(s) {
        return u64::try_from(v).ok();
    }
    let mut i = 0;
    while i < s.len() && matches!(s[i], b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r') {
        i += 1;
    }
    let mut neg = false;
    if i < s.len() && (s[i] == b'+' || s[i] == b'-') {
        neg = s[i] == b'-';
        i += 1;
    }
    let digits = &s[i..];
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut v: u64 = 0;
    for &d in digits {
        v = v.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
    }
    Some(if neg { v.wrapping_neg() } else { v })
}
