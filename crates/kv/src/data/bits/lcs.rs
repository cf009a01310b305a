//! `LCS`: the longest common subsequence of two strings, its length and
//! its matches.

use super::args::{arity_error, int_arg, is_word, lookup_bytes, word, BitsError, Lookup};
use crate::resp::Reply;

/// The options of `LCS key1 key2 [LEN] [IDX] [MINMATCHLEN n]
/// [WITHMATCHLEN]` (each may repeat; the last `MINMATCHLEN` wins).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LcsOptions {
    /// `LEN`: reply only the length.
    pub len: bool,
    /// `IDX`: reply the matching ranges and the length.
    pub idx: bool,
    /// `MINMATCHLEN n`: with `IDX`, only ranges at least this long (a
    /// negative `n` is 0: every range).
    pub min_match_len: u64,
    /// `WITHMATCHLEN`: with `IDX`, each range carries its length.
    pub with_match_len: bool,
}

/// `LCS`'s options: parses `words[3..]` in order (`Syntax` for an unknown
/// word or a `MINMATCHLEN` without argument, `NotInteger`), then
/// `LcsLenAndIdx` if both `LEN` and `IDX` are given. Redis checks the
/// keys' types before this (`LcsNotString`).
pub fn parse_lcs(words: &[Vec<u8>]) -> Result<LcsOptions, BitsError> {
    if words.len() < 3 {
        return Err(arity_error(words, "lcs"));
    }
    let mut opts = LcsOptions::default();
    let mut j = 3;
    while let Some(w) = words.get(j) {
        let more = words.len() - 1 - j;
        if is_word(w, "IDX") {
            opts.idx = true;
        } else if is_word(w, "LEN") {
            opts.len = true;
        } else if is_word(w, "WITHMATCHLEN") {
            opts.with_match_len = true;
        } else if is_word(w, "MINMATCHLEN") && more > 0 {
            let n = int_arg(word(words, j + 1, "lcs")?)?;
            opts.min_match_len = n.max(0) as u64;
            j += 1;
        } else {
            return Err(BitsError::Syntax);
        }
        j += 1;
    }
    if opts.len && opts.idx {
        return Err(BitsError::LcsLenAndIdx);
    }
    Ok(opts)
}

/// One matching range of `LCS ... IDX`: inclusive byte ranges in each
/// string.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LcsMatch {
    /// First byte of the range in the first string.
    pub a_start: u64,
    /// Last byte of the range in the first string.
    pub a_end: u64,
    /// First byte of the range in the second string.
    pub b_start: u64,
    /// Last byte of the range in the second string.
    pub b_end: u64,
    /// The range's length (`a_end - a_start + 1`), replied with
    /// `WITHMATCHLEN`.
    pub len: u64,
}

/// The reply of `LCS`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LcsReply {
    /// Without `LEN` or `IDX`: the longest common subsequence (bulk).
    Str(Vec<u8>),
    /// `LEN`: its length (integer).
    Len(i64),
    /// `IDX`: a map `matches` → ranges, `len` → the LCS's length.
    Idx {
        /// The ranges, as Redis lists them: from the ends of the strings
        /// backwards, each `[[a_start, a_end], [b_start, b_end]]` plus the
        /// length with `WITHMATCHLEN`; only those of at least
        /// `MINMATCHLEN` bytes.
        matches: Vec<LcsMatch>,
        /// The length of the whole LCS (whatever `MINMATCHLEN` filtered).
        len: i64,
        /// Whether each range carries its length.
        with_match_len: bool,
    },
}

impl LcsReply {
    /// The RESP reply: a bulk string, an integer, or for `IDX` a map
    /// (`matches`, array of ranges; `len`, integer) that RESP2 sends as a
    /// flat array of 4.
    pub fn to_reply(&self) -> Reply {
        match self {
            LcsReply::Str(s) => Reply::Bulk(Some(s.clone())),
            LcsReply::Len(n) => Reply::Integer(*n),
            LcsReply::Idx {
                matches,
                len,
                with_match_len,
            } => {
                let pair = |x: u64, y: u64| {
                    Reply::Array(Some(vec![
                        Reply::Integer(x as i64),
                        Reply::Integer(y as i64),
                    ]))
                };
                let ranges = matches
                    .iter()
                    .map(|m| {
                        let mut r = vec![pair(m.a_start, m.a_end), pair(m.b_start, m.b_end)];
                        if *with_match_len {
                            r.push(Reply::Integer(m.len as i64));
                        }
                        Reply::Array(Some(r))
                    })
                    .collect();
                Reply::Map(vec![
                    (
                        Reply::Bulk(Some(b"matches".to_vec())),
                        Reply::Array(Some(ranges)),
                    ),
                    (Reply::Bulk(Some(b"len".to_vec())), Reply::Integer(*len)),
                ])
            }
        }
    }
}

/// A range being extended backwards while walking the LCS table.
#[derive(Debug, Clone, Copy)]
pub(super) struct OpenRange {
    pub(super) a_start: u64,
    pub(super) a_end: u64,
    pub(super) b_start: u64,
    pub(super) b_end: u64,
}

/// `LCS`: the longest common subsequence of `a` and `b` by Redis's
/// dynamic programme and walk back (ties go towards shorter `b`), so the
/// string and the ranges are Redis's. Errors: `LcsTooLong`, then
/// `LcsMemory` when the `(len(a)+1) * (len(b)+1)` table of 4-byte cells
/// exceeds `max_bytes`, `LcsAlloc` if it cannot be allocated.
pub fn lcs(a: &[u8], b: &[u8], opts: &LcsOptions, max_bytes: u64) -> Result<LcsReply, BitsError> {
    let too_long = u64::from(u32::MAX) - 1;
    if a.len() as u64 >= too_long || b.len() as u64 >= too_long {
        return Err(BitsError::LcsTooLong);
    }
    let width = b.len() + 1;
    let cells = (a.len() as u128 + 1) * (b.len() as u128 + 1);
    if cells * 4 > u128::from(max_bytes) {
        return Err(BitsError::LcsMemory);
    }
    let cells = usize::try_from(cells).map_err(|_| BitsError::LcsAlloc)?;
    let mut table: Vec<u32> = Vec::new();
    table
        .try_reserve_exact(cells)
        .map_err(|_| BitsError::LcsAlloc)?;
    table.resize(cells, 0);
    let at = |t: &[u32], i: usize, j: usize| t.get(i * width + j).copied().unwrap_or(0);
    for (i, &ca) in a.iter().enumerate() {
        for (j, &cb) in b.iter().enumerate() {
            let v = if ca == cb {
                at(&table, i, j) + 1
            } else {
                at(&table, i, j + 1).max(at(&table, i + 1, j))
            };
            if let Some(cell) = table.get_mut((i + 1) * width + j + 1) {
                *cell = v;
            }
        }
    }
    let total = at(&table, a.len(), b.len());
    if opts.len && !opts.idx {
        return Ok(LcsReply::Len(i64::from(total)));
    }
    let mut rev = Vec::with_capacity(total as usize);
    let mut matches = Vec::new();
    let mut open: Option<OpenRange> = None;
    let (mut i, mut j) = (a.len(), b.len());
    while i > 0 && j > 0 {
        let (ca, cb) = (a.get(i - 1).copied(), b.get(j - 1).copied());
        let mut emit = false;
        if ca == cb {
            rev.push(ca.unwrap_or(0));
            let (ai, bj) = ((i - 1) as u64, (j - 1) as u64);
            match &mut open {
                None => {
                    open = Some(OpenRange {
                        a_start: ai,
                        a_end: ai,
                        b_start: bj,
                        b_end: bj,
                    })
                }
                Some(r) if r.a_start == ai + 1 && r.b_start == bj + 1 => {
                    r.a_start = ai;
                    r.b_start = bj;
                }
                // Not contiguous: the open range is closed and this match
                // opens none (Redis's walk; it cannot happen after a
                // match, which always extends).
                Some(_) => emit = true,
            }
            if open.is_some_and(|r| r.a_start == 0 || r.b_start == 0) {
                emit = true;
            }
            i -= 1;
            j -= 1;
        } else {
            if at(&table, i - 1, j) > at(&table, i, j - 1) {
                i -= 1;
            } else {
                j -= 1;
            }
            emit = open.is_some();
        }
        if emit {
            if let Some(r) = open.take() {
                let len = r.a_end - r.a_start + 1;
                if opts.min_match_len == 0 || len >= opts.min_match_len {
                    matches.push(LcsMatch {
                        a_start: r.a_start,
                        a_end: r.a_end,
                        b_start: r.b_start,
                        b_end: r.b_end,
                        len,
                    });
                }
            }
        }
    }
    if opts.idx {
        return Ok(LcsReply::Idx {
            matches,
            len: i64::from(total),
            with_match_len: opts.with_match_len,
        });
    }
    rev.reverse();
    Ok(LcsReply::Str(rev))
}

/// `LCS key1 key2 [LEN] [IDX] [MINMATCHLEN n] [WITHMATCHLEN]`, whole, in
/// Redis's order: `LcsNotString` if either key holds a non-string, then
/// the options ([`parse_lcs`]), then [`lcs`]; a missing key is an empty
/// string.
pub fn cmd_lcs(
    words: &[Vec<u8>],
    a: Lookup<'_>,
    b: Lookup<'_>,
    max_bytes: u64,
) -> Result<LcsReply, BitsError> {
    if words.len() < 3 {
        return Err(arity_error(words, "lcs"));
    }
    if a == Lookup::WrongType || b == Lookup::WrongType {
        return Err(BitsError::LcsNotString);
    }
    let opts = parse_lcs(words)?;
    lcs(lookup_bytes(a), lookup_bytes(b), &opts, max_bytes)
}
