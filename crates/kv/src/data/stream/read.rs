//! `XRANGE`, `XREVRANGE`, `XLEN`, `XREAD` and `XREADGROUP`'s per-key
//! part: parsing and execution.

use super::command::{outcome, Key, KeyMut, Outcome};
use super::entry::{Entry, GroupEntry, KeyEntries};
use super::error::{arg, arity, int, int_or, is, is_exact, msg, nogroup, StreamError};
use super::group::ReadFrom;
use super::id::{range_end, range_start, StreamId};

/// `XRANGE key start end [COUNT n]` / `XREVRANGE key end start [COUNT
/// n]`, parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Xrange {
    /// Inclusive start (the lower bound, for XREVRANGE too).
    pub start: StreamId,
    /// Inclusive end.
    pub end: StreamId,
    /// COUNT (`None`: all; `Some(0)`, or a negative COUNT: the nil reply).
    pub count: Option<u64>,
    /// XREVRANGE.
    pub rev: bool,
}

impl Xrange {
    /// Parses XRANGE's (`rev` false) or XREVRANGE's words.
    pub fn parse(args: &[Vec<u8>], rev: bool) -> Result<Xrange, StreamError> {
        arity(args, -4, if rev { "xrevrange" } else { "xrange" })?;
        let (s, e) = if rev { (3, 2) } else { (2, 3) };
        let start = range_start(arg(args, s))?;
        let end = range_end(arg(args, e))?;
        let mut count = None;
        let mut j = 4;
        while j < args.len() {
            if is(arg(args, j), "COUNT") && j + 1 < args.len() {
                count = Some(int(arg(args, j + 1))?.max(0) as u64);
                j += 1;
            } else {
                return Err(StreamError::Syntax);
            }
            j += 1;
        }
        Ok(Xrange {
            start,
            end,
            count,
            rev,
        })
    }
}

/// Runs XRANGE/XREVRANGE: the entries, or `None` for the nil array
/// (`COUNT 0`). A missing key gives an empty array.
pub fn xrange(key: Key<'_>, a: &Xrange) -> Result<Option<Vec<Entry>>, StreamError> {
    let s = match key {
        Key::WrongType => return Err(StreamError::WrongType),
        Key::Missing => return Ok(Some(Vec::new())),
        Key::Stream(s) => s,
    };
    match a.count {
        Some(0) => Ok(None),
        c => {
            let n = c.map_or(0, |c| usize::try_from(c).unwrap_or(usize::MAX));
            Ok(Some(s.range(a.start, a.end, n, a.rev)))
        }
    }
}

/// Runs XLEN (after the arity check: exactly `XLEN key`).
pub fn xlen(key: Key<'_>) -> Result<u64, StreamError> {
    match key {
        Key::WrongType => Err(StreamError::WrongType),
        Key::Missing => Ok(0),
        Key::Stream(s) => Ok(s.len()),
    }
}

/// `XREAD [COUNT n] [BLOCK ms] STREAMS key ... id ...` and
/// `XREADGROUP GROUP group consumer [COUNT n] [BLOCK ms] [NOACK] STREAMS
/// key ... id ...`, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Xread {
    /// BLOCK (ms; 0: forever). This module serves the non-blocking part.
    pub block_ms: Option<i64>,
    /// COUNT (0: no limit).
    pub count: u64,
    /// GROUP group consumer (XREADGROUP).
    pub group: Option<(Vec<u8>, Vec<u8>)>,
    /// NOACK.
    pub noack: bool,
    /// The keys.
    pub keys: Vec<Vec<u8>>,
    /// Their ID words (`$`, `>`, IDs), checked against the keys by
    /// [`xread_resolve`].
    pub ids: Vec<Vec<u8>>,
}

impl Xread {
    /// Parses XREAD's (`group_form` false) or XREADGROUP's words.
    pub fn parse(args: &[Vec<u8>], group_form: bool) -> Result<Xread, StreamError> {
        if group_form {
            arity(args, -7, "xreadgroup")?;
        } else {
            arity(args, -4, "xread")?;
        }
        let n = args.len();
        let mut r = Xread {
            block_ms: None,
            count: 0,
            group: None,
            noack: false,
            keys: Vec::new(),
            ids: Vec::new(),
        };
        let mut streams_at = None;
        let mut i = 1;
        while i < n {
            let more = n - i - 1;
            let o = arg(args, i);
            if is(o, "BLOCK") && more > 0 {
                i += 1;
                let t = int_or(arg(args, i), msg::TIMEOUT_NOT_INTEGER)?;
                if t < 0 {
                    return Err(StreamError::Msg(msg::TIMEOUT_NEGATIVE));
                }
                r.block_ms = Some(t);
            } else if is(o, "COUNT") && more > 0 {
                i += 1;
                r.count = int(arg(args, i))?.max(0) as u64;
            } else if is(o, "STREAMS") && more > 0 {
                let at = i + 1;
                if (n - at) % 2 != 0 {
                    return Err(StreamError::Msg(msg::UNBALANCED));
                }
                streams_at = Some(at);
                break;
            } else if is(o, "GROUP") && more >= 2 {
                if !group_form {
                    return Err(StreamError::Msg(msg::GROUP_IN_XREAD));
                }
                r.group = Some((arg(args, i + 1).to_vec(), arg(args, i + 2).to_vec()));
                i += 2;
            } else if is(o, "NOACK") {
                if !group_form {
                    return Err(StreamError::Msg(msg::NOACK_IN_XREAD));
                }
                r.noack = true;
            } else {
                return Err(StreamError::Syntax);
            }
            i += 1;
        }
        let Some(at) = streams_at else {
            return Err(StreamError::Syntax);
        };
        if group_form && r.group.is_none() {
            return Err(StreamError::Msg(msg::MISSING_GROUP));
        }
        let k = (n - at) / 2;
        r.keys = args[at..at + k].to_vec();
        r.ids = args[at + k..].to_vec();
        Ok(r)
    }
}

/// XREAD/XREADGROUP's checks of each key in order (its type; for
/// XREADGROUP the group, `NOGROUP` otherwise), each followed by its ID
/// (`$`: the stream's last ID, or 0-0 for a missing key; `>`: new
/// entries; else a strict ID), as Redis does before serving any stream.
/// `keys` are the lookups of `a.keys`, in order.
pub fn xread_resolve(a: &Xread, keys: &[Key<'_>]) -> Result<Vec<ReadFrom>, StreamError> {
    let mut out = Vec::with_capacity(a.keys.len());
    for (i, word) in a.ids.iter().enumerate() {
        let key = keys.get(i).copied().unwrap_or(Key::Missing);
        let name = a.keys.get(i).map_or(&[][..], |k| k.as_slice());
        let s = match key {
            Key::WrongType => return Err(StreamError::WrongType),
            Key::Missing => None,
            Key::Stream(s) => Some(s),
        };
        if let Some((group, _)) = &a.group {
            if !s.is_some_and(|s| s.group(group).is_some()) {
                return Err(nogroup(name, group, " in XREADGROUP with GROUP option"));
            }
        }
        if is_exact(word, "$") {
            if a.group.is_some() {
                return Err(StreamError::Msg(msg::DOLLAR_IN_XREADGROUP));
            }
            out.push(ReadFrom::After(s.map_or(StreamId::MIN, |s| s.last_id())));
            continue;
        }
        if is_exact(word, ">") {
            if a.group.is_none() {
                return Err(StreamError::Msg(msg::GT_IN_XREAD));
            }
            out.push(ReadFrom::New);
            continue;
        }
        let id = StreamId::parse_strict(word, 0)?;
        // Redis marks `>` with the maximum ID, so that ID reads as `>`.
        out.push(if id == StreamId::MAX && a.group.is_some() {
            ReadFrom::New
        } else {
            ReadFrom::After(id)
        });
    }
    Ok(out)
}

/// XREAD without blocking: checks as [`xread_resolve`], then each stream
/// with entries after its ID, with them (keys without any are left out;
/// an empty result is the nil reply, or where BLOCK would wait).
pub fn xread(a: &Xread, keys: &[Key<'_>]) -> Result<Vec<KeyEntries>, StreamError> {
    let from = xread_resolve(a, keys)?;
    let count = usize::try_from(a.count).unwrap_or(usize::MAX);
    let mut out = Vec::new();
    for (i, f) in from.iter().enumerate() {
        let (Some(Key::Stream(s)), ReadFrom::After(after), Some(name)) =
            (keys.get(i), f, a.keys.get(i))
        else {
            continue;
        };
        if let Some(e) = s.read_after(*after, count) {
            out.push((name.clone(), e));
        }
    }
    Ok(out)
}

/// XREADGROUP's serving of its `i`-th stream, after [`xread_resolve`]
/// (call it for each key in order, on the state the previous ones left):
/// the entries, or `None` when the stream is not served. Event:
/// `xgroup-createconsumer` when the consumer was created.
pub fn xreadgroup_key(
    key: KeyMut<'_>,
    a: &Xread,
    from: ReadFrom,
    now_ms: u64,
) -> Result<Outcome<Option<Vec<GroupEntry>>>, StreamError> {
    let KeyMut::Slot(slot) = key else {
        return Err(StreamError::WrongType);
    };
    let (Some(s), Some((group, consumer))) = (slot.as_mut(), &a.group) else {
        return Ok(outcome(None, vec![]));
    };
    let count = usize::try_from(a.count).unwrap_or(usize::MAX);
    match s.read_group(group, consumer, from, count, a.noack, now_ms) {
        None => Ok(outcome(None, vec![])),
        Some(r) => Ok(outcome(
            r.entries,
            if r.consumer_created {
                vec!["xgroup-createconsumer"]
            } else {
                vec![]
            },
        )),
    }
}
