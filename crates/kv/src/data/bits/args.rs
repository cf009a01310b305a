//! The shared ground of the bit commands: their errors, a key as a read
//! finds it, and the word, integer, offset and range helpers.

use crate::resp::Reply;
use crate::value::{Value, ERR_WRONGTYPE};

/// Redis's default `proto-max-bulk-len`: 512 MiB, the largest string.
pub const DEFAULT_MAX_BYTES: u64 = 512 * 1024 * 1024;

/// An error of one of these commands, its `Display` being Redis's exact
/// error text (the `-` of the RESP error line excluded).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BitsError {
    /// Too few (or too many) words; carries the command's lowercase name.
    #[error("ERR wrong number of arguments for '{0}' command")]
    WrongArity(String),
    /// `ERR syntax error` (unknown option, `BITOP` operation or
    /// `BITFIELD` subcommand, wrong argument count of `BITCOUNT`/`BITPOS`).
    #[error("ERR syntax error")]
    Syntax,
    /// An integer argument that does not parse as a signed 64-bit integer.
    #[error("ERR value is not an integer or out of range")]
    NotInteger,
    /// The key holds something other than a string.
    #[error("{}", ERR_WRONGTYPE)]
    WrongType,
    /// `SETBIT`/`GETBIT`/`BITFIELD`: the offset is not an integer, is
    /// negative, or addresses a byte at or past `max_bytes`.
    #[error("ERR bit offset is not an integer or out of range")]
    BitOffset,
    /// `SETBIT`: the value is not 0 or 1.
    #[error("ERR bit is not an integer or out of range")]
    BitValue,
    /// `BITPOS`: the bit looked for is an integer other than 0 or 1.
    #[error("ERR The bit argument must be 1 or 0.")]
    BitposBit,
    /// `BITOP NOT` with other than one source key.
    #[error("ERR BITOP NOT must be called with a single source key.")]
    BitopNot,
    /// `BITFIELD`: a type other than `i1`..`i64`, `u1`..`u63`.
    #[error(
        "ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is."
    )]
    BitfieldType,
    /// `BITFIELD ... OVERFLOW x` with `x` not `WRAP`, `SAT` or `FAIL`.
    #[error("ERR Invalid OVERFLOW type specified")]
    OverflowType,
    /// `BITFIELD_RO` given a `SET` or `INCRBY`.
    #[error("ERR BITFIELD_RO only supports the GET subcommand")]
    BitfieldReadOnly,
    /// `SETRANGE`: the result would exceed `max_bytes`.
    #[error("ERR string exceeds maximum allowed size (proto-max-bulk-len)")]
    TooBig,
    /// `SETRANGE`: a negative offset.
    #[error("ERR offset is out of range")]
    OffsetOutOfRange,
    /// `LCS`: one of the keys holds something other than a string.
    #[error("ERR The specified keys must contain string values")]
    LcsNotString,
    /// `LCS` with both `LEN` and `IDX`.
    #[error("ERR If you want both the length and indexes, please just use IDX.")]
    LcsLenAndIdx,
    /// `LCS`: a string of 2^32 - 2 bytes or more.
    #[error("ERR String too long for LCS")]
    LcsTooLong,
    /// `LCS`: the table of `(len(a)+1) * (len(b)+1)` 32-bit cells exceeds
    /// `max_bytes`.
    #[error("ERR Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len")]
    LcsMemory,
    /// `LCS`: the table could not be allocated (not deterministic: only a
    /// read command can see it).
    #[error("ERR Insufficient memory, failed allocating transient memory for LCS")]
    LcsAlloc,
}

impl BitsError {
    /// The error as a RESP error reply.
    pub fn to_reply(&self) -> Reply {
        Reply::err(self.to_string())
    }
}

/// What a read command found under a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lookup<'a> {
    /// No such key.
    Missing,
    /// A string, its bytes.
    Str(&'a [u8]),
    /// A value of another type.
    WrongType,
}

impl<'a> Lookup<'a> {
    /// From the store's value under the key.
    pub fn from_value(v: Option<&'a Value>) -> Lookup<'a> {
        match v {
            None => Lookup::Missing,
            Some(Value::Str(s)) => Lookup::Str(s),
            Some(_) => Lookup::WrongType,
        }
    }
}

/// Parses an integer as Redis's `string2ll`: an optional `-`, then `0` or a
/// digit 1-9 followed by digits, nothing else (no `+`, no spaces, no
/// leading zeros, no `-0`), fewer than 21 bytes, within `i64`.
pub fn parse_i64(b: &[u8]) -> Option<i64> {
    if b.is_empty() || b.len() >= 21 {
        return None;
    }
    if b == b"0" {
        return Some(0);
    }
    let (negative, digits) = match b.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, b),
    };
    let (first, rest) = digits.split_first()?;
    if !(b'1'..=b'9').contains(first) {
        return None;
    }
    let mut v = u64::from(first - b'0');
    for &d in rest {
        if !d.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
    }
    if negative {
        if v > 1u64 << 63 {
            None
        } else {
            Some((v as i64).wrapping_neg())
        }
    } else {
        i64::try_from(v).ok()
    }
}

/// The bytes Redis's C string comparisons see: up to the first NUL.
pub(super) fn c_str(b: &[u8]) -> &[u8] {
    match b.iter().position(|&c| c == 0) {
        Some(i) => b.get(..i).unwrap_or(b),
        None => b,
    }
}

/// `strcasecmp(word, name) == 0`.
pub(super) fn is_word(word: &[u8], name: &str) -> bool {
    c_str(word).eq_ignore_ascii_case(name.as_bytes())
}

pub(super) fn arity_error(words: &[Vec<u8>], name: &str) -> BitsError {
    let name = match words.first() {
        Some(w) => String::from_utf8_lossy(w).to_ascii_lowercase(),
        None => name.to_string(),
    };
    BitsError::WrongArity(name)
}

/// `words[i]`, or the arity error of command `name`.
pub(super) fn word<'w>(words: &'w [Vec<u8>], i: usize, name: &str) -> Result<&'w [u8], BitsError> {
    match words.get(i) {
        Some(w) => Ok(w),
        None => Err(arity_error(words, name)),
    }
}

pub(super) fn int_arg(b: &[u8]) -> Result<i64, BitsError> {
    parse_i64(b).ok_or(BitsError::NotInteger)
}

/// Parses a bit offset as `SETBIT`, `GETBIT` and `BITFIELD` do: a
/// non-negative integer whose byte (`offset / 8`) is below `max_bytes`.
/// With `hash_bits = Some(n)` (`BITFIELD`, the type's width), `#k` means
/// `k * n` (multiplied with 64-bit wrap-around, as Redis does).
pub(super) fn parse_bit_offset(
    word: &[u8],
    hash_bits: Option<u32>,
    max_bytes: u64,
) -> Result<u64, BitsError> {
    let (digits, mult) = match (word.split_first(), hash_bits) {
        (Some((b'#', rest)), Some(bits)) if bits > 0 => (rest, Some(bits)),
        _ => (word, None),
    };
    let mut offset = parse_i64(digits).ok_or(BitsError::BitOffset)?;
    if let Some(bits) = mult {
        offset = offset.wrapping_mul(i64::from(bits));
    }
    if offset < 0 || (offset as u64 >> 3) >= max_bytes {
        return Err(BitsError::BitOffset);
    }
    Ok(offset as u64)
}

/// Grows `value` with zero bytes to at least `len` bytes; true if it grew.
/// Fails (leaving `value` as it is) only when the memory cannot be had,
/// which a `max_bytes` the process can allocate rules out.
pub(super) fn grow_zero(value: &mut Vec<u8>, len: u64) -> Result<bool, BitsError> {
    let Ok(len) = usize::try_from(len) else {
        return Err(BitsError::TooBig);
    };
    if len <= value.len() {
        return Ok(false);
    }
    value
        .try_reserve_exact(len - value.len())
        .map_err(|_| BitsError::TooBig)?;
    value.resize(len, 0);
    Ok(true)
}

/// Resolves a `[start, end]` range with Redis's rules for negative
/// indexes over `total` units: negatives count from the end, both are
/// clamped to 0, `end` to `total - 1`. `None` for an empty range.
pub(super) fn resolve_range(start: i64, end: i64, total: i128) -> Option<(i128, i128)> {
    let fix = |v: i64| {
        let v = i128::from(v);
        let v = if v < 0 { total + v } else { v };
        v.max(0)
    };
    let start = fix(start);
    let end = fix(end).min(total - 1);
    if start > end {
        None
    } else {
        Some((start, end))
    }
}

/// A string's bytes; nothing for a missing key (or another type).
pub(super) fn lookup_bytes(k: Lookup<'_>) -> &[u8] {
    match k {
        Lookup::Str(s) => s,
        Lookup::Missing | Lookup::WrongType => &[],
    }
}
