//! Bitmaps, bit fields, string ranges and `LCS` over a string's bytes: the
//! computations of Redis 7.0's `SETBIT`, `GETBIT`, `BITCOUNT`, `BITPOS`,
//! `BITOP`, `BITFIELD`, `BITFIELD_RO`, `SETRANGE`, `GETRANGE` (and its
//! alias `SUBSTR`) and `LCS`, with Redis's replies and exact error texts.
//!
//! Conventions shared by every function here:
//!
//! * `words` is the whole command as received: `words[0]` is the command
//!   name, `words[1]` the (first) key, and so on. A short `words` gives
//!   [`BitsError::WrongArity`] (the command table normally catches it
//!   first).
//! * Bit 0 is the most significant bit of byte 0 (Redis's order, the same
//!   for `SETBIT`, `BITPOS` and `BITFIELD`).
//! * `max_bytes` is Redis's `proto-max-bulk-len` ([`DEFAULT_MAX_BYTES`]
//!   by default): the bound of bit offsets, of `SETRANGE`'s result and of
//!   `LCS`'s transient table.
//! * Read commands whose argument checks interleave with the key lookup
//!   (`GETBIT`, `BITCOUNT`, `BITPOS`, `GETRANGE`, `BITFIELD_RO`, `LCS`) have
//!   a `cmd_*` function that takes the key as a [`Lookup`] and reproduces
//!   Redis's order of checks exactly (which error wins, and when a missing
//!   key answers before the remaining arguments are even parsed).
//! * Write commands (`SETBIT`, `SETRANGE`, `BITOP`, `BITFIELD`) split into
//!   `parse_*` (every error that depends on the words alone), then the
//!   caller's `WRONGTYPE` check of the key, then an apply function over the
//!   key's bytes. A missing key is passed as an empty `Vec`; the apply
//!   function says whether the value `changed`: store it back (creating
//!   the key) exactly when it did, and only then signal the key modified.
//! * Everything is a deterministic function of its inputs; nothing panics
//!   on client input; every allocation is bounded by `max_bytes` (checked
//!   at parse time for offsets) or by the inputs' own lengths.

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

// ---------------------------------------------------------------------------
// Argument helpers.
// ---------------------------------------------------------------------------

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
fn c_str(b: &[u8]) -> &[u8] {
    match b.iter().position(|&c| c == 0) {
        Some(i) => b.get(..i).unwrap_or(b),
        None => b,
    }
}

/// `strcasecmp(word, name) == 0`.
fn is_word(word: &[u8], name: &str) -> bool {
    c_str(word).eq_ignore_ascii_case(name.as_bytes())
}

fn arity_error(words: &[Vec<u8>], name: &str) -> BitsError {
    let name = match words.first() {
        Some(w) => String::from_utf8_lossy(w).to_ascii_lowercase(),
        None => name.to_string(),
    };
    BitsError::WrongArity(name)
}

/// `words[i]`, or the arity error of command `name`.
fn word<'w>(words: &'w [Vec<u8>], i: usize, name: &str) -> Result<&'w [u8], BitsError> {
    match words.get(i) {
        Some(w) => Ok(w),
        None => Err(arity_error(words, name)),
    }
}

fn int_arg(b: &[u8]) -> Result<i64, BitsError> {
    parse_i64(b).ok_or(BitsError::NotInteger)
}

/// Parses a bit offset as `SETBIT`, `GETBIT` and `BITFIELD` do: a
/// non-negative integer whose byte (`offset / 8`) is below `max_bytes`.
/// With `hash_bits = Some(n)` (`BITFIELD`, the type's width), `#k` means
/// `k * n` (multiplied with 64-bit wrap-around, as Redis does).
fn parse_bit_offset(word: &[u8], hash_bits: Option<u32>, max_bytes: u64) -> Result<u64, BitsError> {
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
fn grow_zero(value: &mut Vec<u8>, len: u64) -> Result<bool, BitsError> {
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
fn resolve_range(start: i64, end: i64, total: i128) -> Option<(i128, i128)> {
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

// ---------------------------------------------------------------------------
// SETBIT / GETBIT.
// ---------------------------------------------------------------------------

/// The arguments of `SETBIT key offset value`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SetbitArgs {
    /// The bit's offset (its byte below `max_bytes`).
    pub offset: u64,
    /// The value to set.
    pub on: bool,
}

/// What `SETBIT` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SetbitOutcome {
    /// The reply: the bit's previous value, 0 or 1.
    pub old: i64,
    /// True when the string grew (or was created) or the bit changed:
    /// store it back and signal the key modified.
    pub changed: bool,
}

/// `SETBIT key offset value`: parses `words` (errors: `BitOffset`, then
/// `BitValue`). The caller then checks the key's type (`WRONGTYPE`) and
/// calls [`setbit`].
pub fn parse_setbit(words: &[Vec<u8>], max_bytes: u64) -> Result<SetbitArgs, BitsError> {
    if words.len() != 4 {
        return Err(arity_error(words, "setbit"));
    }
    let offset = parse_bit_offset(word(words, 2, "setbit")?, None, max_bytes)?;
    let on = parse_i64(word(words, 3, "setbit")?).ok_or(BitsError::BitValue)?;
    if on & !1 != 0 {
        return Err(BitsError::BitValue);
    }
    Ok(SetbitArgs {
        offset,
        on: on == 1,
    })
}

/// `SETBIT`: sets the bit, zero-padding the string up to its byte
/// (`value` empty for a missing key).
pub fn setbit(value: &mut Vec<u8>, args: &SetbitArgs) -> SetbitOutcome {
    let grew = grow_zero(value, (args.offset >> 3) + 1).unwrap_or(false);
    let shift = 7 - (args.offset & 7) as u32;
    let byte = usize::try_from(args.offset >> 3)
        .ok()
        .and_then(|i| value.get_mut(i));
    let Some(byte) = byte else {
        return SetbitOutcome {
            old: 0,
            changed: grew,
        };
    };
    let old = (*byte >> shift) & 1;
    if args.on {
        *byte |= 1 << shift;
    } else {
        *byte &= !(1u8 << shift);
    }
    SetbitOutcome {
        old: i64::from(old),
        changed: grew || (old == 1) != args.on,
    }
}

/// `GETBIT key offset`: parses the offset (error `BitOffset`); the key is
/// looked up after.
pub fn parse_getbit(words: &[Vec<u8>], max_bytes: u64) -> Result<u64, BitsError> {
    if words.len() != 3 {
        return Err(arity_error(words, "getbit"));
    }
    parse_bit_offset(word(words, 2, "getbit")?, None, max_bytes)
}

/// `GETBIT`: the bit at `offset`, 0 past the end of the string.
pub fn getbit(value: &[u8], offset: u64) -> i64 {
    let byte = usize::try_from(offset >> 3)
        .ok()
        .and_then(|i| value.get(i))
        .copied()
        .unwrap_or(0);
    i64::from((byte >> (7 - (offset & 7))) & 1)
}

/// `GETBIT key offset`, whole: offset errors first, then 0 for a missing
/// key, then `WRONGTYPE`.
pub fn cmd_getbit(words: &[Vec<u8>], key: Lookup<'_>, max_bytes: u64) -> Result<i64, BitsError> {
    let offset = parse_getbit(words, max_bytes)?;
    match key {
        Lookup::Missing => Ok(0),
        Lookup::WrongType => Err(BitsError::WrongType),
        Lookup::Str(v) => Ok(getbit(v, offset)),
    }
}

// ---------------------------------------------------------------------------
// BITCOUNT / BITPOS.
// ---------------------------------------------------------------------------

/// The unit of a `BITCOUNT`/`BITPOS` range.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BitUnit {
    /// `BYTE` (the default): indexes are byte indexes.
    #[default]
    Byte,
    /// `BIT`: indexes are bit indexes.
    Bit,
}

fn parse_unit(w: &[u8]) -> Result<BitUnit, BitsError> {
    if is_word(w, "bit") {
        Ok(BitUnit::Bit)
    } else if is_word(w, "byte") {
        Ok(BitUnit::Byte)
    } else {
        Err(BitsError::Syntax)
    }
}

/// The `start end [BYTE|BIT]` range of `BITCOUNT`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BitRange {
    /// First index (negative: from the end).
    pub start: i64,
    /// Last index, inclusive (negative: from the end).
    pub end: i64,
    /// Bytes or bits.
    pub unit: BitUnit,
}

/// Converts a resolved range in `unit` into bit positions.
fn to_bits(start: i128, end: i128, unit: BitUnit) -> (i128, i128) {
    match unit {
        BitUnit::Bit => (start, end),
        BitUnit::Byte => (start * 8, end * 8 + 7),
    }
}

fn bit_at(value: &[u8], pos: i128) -> u8 {
    let byte = usize::try_from(pos >> 3)
        .ok()
        .and_then(|i| value.get(i))
        .copied()
        .unwrap_or(0);
    (byte >> (7 - (pos & 7) as u32)) & 1
}

fn byte_at(value: &[u8], pos: i128) -> u8 {
    usize::try_from(pos >> 3)
        .ok()
        .and_then(|i| value.get(i))
        .copied()
        .unwrap_or(0)
}

/// The number of set bits in bit positions `from..=to`.
fn count_ones_in(value: &[u8], from: i128, to: i128) -> i64 {
    let mut n: i64 = 0;
    let mut p = from;
    while p <= to {
        if p & 7 == 0 && p + 7 <= to {
            // Whole bytes at a time.
            let first = usize::try_from(p >> 3).unwrap_or(usize::MAX);
            let last = usize::try_from(to >> 3).unwrap_or(usize::MAX);
            let full_end = if (to & 7) == 7 {
                last.saturating_add(1)
            } else {
                last
            };
            if let Some(bytes) = value.get(first..full_end.min(value.len())) {
                n += bytes.iter().map(|b| i64::from(b.count_ones())).sum::<i64>();
            }
            p = (full_end as i128) * 8;
            continue;
        }
        n += i64::from(bit_at(value, p));
        p += 1;
    }
    n
}

/// `BITCOUNT`: the number of set bits in `value`, in `range` if given.
/// As Redis: a range whose `start` and `end` are both negative with
/// `start > end` counts 0; otherwise negatives count from the end and are
/// clamped to the string.
pub fn bitcount(value: &[u8], range: Option<BitRange>) -> i64 {
    let Some(r) = range else {
        return count_ones_in(value, 0, value.len() as i128 * 8 - 1);
    };
    if r.start < 0 && r.end < 0 && r.start > r.end {
        return 0;
    }
    let total = match r.unit {
        BitUnit::Byte => value.len() as i128,
        BitUnit::Bit => value.len() as i128 * 8,
    };
    match resolve_range(r.start, r.end, total) {
        None => 0,
        Some((s, e)) => {
            let (s, e) = to_bits(s, e, r.unit);
            count_ones_in(value, s, e)
        }
    }
}

/// `BITCOUNT key [start end [BYTE|BIT]]`, whole, in Redis's order: 0 for a
/// missing key (whatever the other arguments), `WRONGTYPE`, then the
/// range's integers, then the both-negative `start > end` answer of 0,
/// then the unit (`Syntax`); 3 or more than 5 words are a `Syntax` error.
pub fn cmd_bitcount(words: &[Vec<u8>], key: Lookup<'_>) -> Result<i64, BitsError> {
    if words.len() < 2 {
        return Err(arity_error(words, "bitcount"));
    }
    let value = match key {
        Lookup::Missing => return Ok(0),
        Lookup::WrongType => return Err(BitsError::WrongType),
        Lookup::Str(v) => v,
    };
    match words.len() {
        2 => Ok(bitcount(value, None)),
        4 | 5 => {
            let start = int_arg(word(words, 2, "bitcount")?)?;
            let end = int_arg(word(words, 3, "bitcount")?)?;
            if start < 0 && end < 0 && start > end {
                return Ok(0);
            }
            let unit = match words.get(4) {
                Some(w) => parse_unit(w)?,
                None => BitUnit::Byte,
            };
            Ok(bitcount(value, Some(BitRange { start, end, unit })))
        }
        _ => Err(BitsError::Syntax),
    }
}

/// `BITPOS`: the position of the first bit equal to `bit` (0 or 1; any
/// other value is taken as 1) in `value`, from `start` to `end` (in
/// `unit`s, negatives from the end, as [`bitcount`] but without its
/// both-negative special case), or -1.
///
/// Redis's special cases: an empty range gives -1; looking for 1 and
/// finding none gives -1; looking for 0 and finding none gives -1 when
/// `end` was given, else the first bit past the string (the string is
/// taken as zero-padded on the right), i.e. `8 * value.len()`. A missing
/// key is not a string here: [`cmd_bitpos`] answers 0 / -1 for it.
/// `BITPOS key bit` is `start = 0, end = None, unit = Byte`.
pub fn bitpos(value: &[u8], bit: u8, start: i64, end: Option<i64>, unit: BitUnit) -> i64 {
    let want = u8::from(bit != 0);
    let total = match unit {
        BitUnit::Byte => value.len() as i128,
        BitUnit::Bit => value.len() as i128 * 8,
    };
    // Without an end the range runs to the end of the string.
    let end_index = end.unwrap_or(-1);
    let Some((s, e)) = resolve_range(start, end_index, total) else {
        return -1;
    };
    let (s, e) = to_bits(s, e, unit);
    let skip = if want == 1 { 0u8 } else { 0xff };
    let mut p = s;
    while p <= e {
        if p & 7 == 0 && p + 7 <= e && byte_at(value, p) == skip {
            // Skip the whole bytes of `skip` at once.
            let first = usize::try_from(p >> 3).unwrap_or(usize::MAX);
            let whole = usize::try_from((e + 1) >> 3).unwrap_or(usize::MAX);
            let bytes = value.get(first..whole.min(value.len())).unwrap_or_default();
            let n = bytes.iter().position(|&b| b != skip).unwrap_or(bytes.len());
            p += 8 * n.max(1) as i128;
            continue;
        }
        if bit_at(value, p) == want {
            return i64::try_from(p).unwrap_or(-1);
        }
        p += 1;
    }
    if want == 0 && end.is_none() {
        i64::try_from(e + 1).unwrap_or(-1)
    } else {
        -1
    }
}

/// `BITPOS key bit [start [end [BYTE|BIT]]]`, whole, in Redis's order: the
/// bit (`NotInteger`, then `BitposBit`), then a missing key (0 when
/// looking for 0, -1 for 1), `WRONGTYPE`, then `start`, the unit
/// (`Syntax`), `end`; more than 6 words are a `Syntax` error.
pub fn cmd_bitpos(words: &[Vec<u8>], key: Lookup<'_>) -> Result<i64, BitsError> {
    let bit = int_arg(word(words, 2, "bitpos")?)?;
    if bit != 0 && bit != 1 {
        return Err(BitsError::BitposBit);
    }
    let value = match key {
        Lookup::Missing => return Ok(if bit == 1 { -1 } else { 0 }),
        Lookup::WrongType => return Err(BitsError::WrongType),
        Lookup::Str(v) => v,
    };
    let bit = bit as u8;
    match words.len() {
        3 => Ok(bitpos(value, bit, 0, None, BitUnit::Byte)),
        4..=6 => {
            let start = int_arg(word(words, 3, "bitpos")?)?;
            let unit = match words.get(5) {
                Some(w) => parse_unit(w)?,
                None => BitUnit::Byte,
            };
            let end = match words.get(4) {
                Some(w) => Some(int_arg(w)?),
                None => None,
            };
            Ok(bitpos(value, bit, start, end, unit))
        }
        _ => Err(BitsError::Syntax),
    }
}

// ---------------------------------------------------------------------------
// BITOP.
// ---------------------------------------------------------------------------

/// A `BITOP` operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BitopKind {
    /// `AND`.
    And,
    /// `OR`.
    Or,
    /// `XOR`.
    Xor,
    /// `NOT` (one source).
    Not,
}

/// The arguments of `BITOP op destkey srckey...`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BitopArgs {
    /// The operation.
    pub op: BitopKind,
    /// The destination key.
    pub dest: Vec<u8>,
    /// The source keys (at least one; exactly one for `NOT`).
    pub sources: Vec<Vec<u8>>,
}

/// `BITOP op destkey srckey...`: parses `words` (errors: `Syntax` for an
/// unknown operation, then `BitopNot`). The caller then looks the sources
/// up (any non-string: `WRONGTYPE`; the destination's type does not
/// matter, it is overwritten) and calls [`bitop`].
pub fn parse_bitop(words: &[Vec<u8>]) -> Result<BitopArgs, BitsError> {
    if words.len() < 4 {
        return Err(arity_error(words, "bitop"));
    }
    let name = word(words, 1, "bitop")?;
    let op = if is_word(name, "and") {
        BitopKind::And
    } else if is_word(name, "or") {
        BitopKind::Or
    } else if is_word(name, "xor") {
        BitopKind::Xor
    } else if is_word(name, "not") {
        BitopKind::Not
    } else {
        return Err(BitsError::Syntax);
    };
    if op == BitopKind::Not && words.len() != 4 {
        return Err(BitsError::BitopNot);
    }
    Ok(BitopArgs {
        op,
        dest: word(words, 2, "bitop")?.to_vec(),
        sources: words.get(3..).unwrap_or_default().to_vec(),
    })
}

/// `BITOP`: the result of `op` over `sources` (a missing key is an empty
/// string), as long as the longest source, shorter ones zero-padded.
/// The reply is its length; an empty result deletes the destination key
/// (signal it modified only if it existed), otherwise it is stored there.
pub fn bitop(op: BitopKind, sources: &[&[u8]]) -> Vec<u8> {
    let len = sources.iter().map(|s| s.len()).max().unwrap_or(0);
    let mut out = Vec::with_capacity(len);
    for i in 0..len {
        let at = |s: &&[u8]| s.get(i).copied().unwrap_or(0);
        let mut it = sources.iter();
        let mut acc = it.next().map(at).unwrap_or(0);
        match op {
            BitopKind::Not => acc = !acc,
            BitopKind::And => it.for_each(|s| acc &= at(s)),
            BitopKind::Or => it.for_each(|s| acc |= at(s)),
            BitopKind::Xor => it.for_each(|s| acc ^= at(s)),
        }
        out.push(acc);
    }
    out
}

// ---------------------------------------------------------------------------
// BITFIELD / BITFIELD_RO.
// ---------------------------------------------------------------------------

/// A `BITFIELD` integer type: `i1`..`i64` or `u1`..`u63`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BitfieldType {
    /// `i` (two's complement) rather than `u`.
    pub signed: bool,
    /// The width in bits.
    pub bits: u32,
}

/// Parses a `BITFIELD` type (error `BitfieldType`).
pub fn parse_bitfield_type(word: &[u8]) -> Result<BitfieldType, BitsError> {
    // Redis reads the type as a C string.
    let w = c_str(word);
    let signed = match w.first() {
        Some(b'i') => true,
        Some(b'u') => false,
        _ => return Err(BitsError::BitfieldType),
    };
    let bits = parse_i64(w.get(1..).unwrap_or_default()).ok_or(BitsError::BitfieldType)?;
    let limit = if signed { 64 } else { 63 };
    if !(1..=limit).contains(&bits) {
        return Err(BitsError::BitfieldType);
    }
    Ok(BitfieldType {
        signed,
        bits: bits as u32,
    })
}

/// `BITFIELD ... OVERFLOW WRAP|SAT|FAIL`: what `SET`/`INCRBY` do when the
/// value does not fit; applies to the operations that follow it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Overflow {
    /// Wrap around (modulo 2^bits; signed values wrap to the negatives).
    #[default]
    Wrap,
    /// Saturate at the type's minimum or maximum.
    Sat,
    /// Do nothing and reply nil.
    Fail,
}

/// One `BITFIELD` operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BitfieldOpKind {
    /// `GET type offset`: replies the value.
    Get,
    /// `SET type offset value`: replies the previous value.
    Set(i64),
    /// `INCRBY type offset increment`: replies the new value.
    Incrby(i64),
}

/// One `BITFIELD` operation with its type, bit offset (`#k` already
/// multiplied) and the overflow mode in force for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BitfieldOp {
    /// What to do.
    pub kind: BitfieldOpKind,
    /// The integer type.
    pub ty: BitfieldType,
    /// The offset of the integer's most significant bit.
    pub offset: u64,
    /// The overflow mode (ignored by `GET`).
    pub overflow: Overflow,
}

/// A parsed `BITFIELD`/`BITFIELD_RO` command: its operations in order
/// (`OVERFLOW` folded into them).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Bitfield {
    /// The operations, in order: one reply each.
    pub ops: Vec<BitfieldOp>,
}

impl Bitfield {
    /// True when every operation is a `GET` (including no operation at
    /// all): Redis then neither creates nor grows the key.
    pub fn is_read_only(&self) -> bool {
        self.ops.iter().all(|op| op.kind == BitfieldOpKind::Get)
    }
}

/// `BITFIELD key [GET type offset | SET type offset value | INCRBY type
/// offset increment | OVERFLOW WRAP|SAT|FAIL]...` and, with
/// `read_only_command`, `BITFIELD_RO key [GET type offset]...`: parses
/// `words` in Redis's order: each subcommand (`Syntax` when unknown or
/// short of arguments, `OverflowType`), its type (`BitfieldType`), offset
/// (`BitOffset`), value (`NotInteger`); after all of them, for
/// `BITFIELD_RO`, `BitfieldReadOnly` if any is a `SET` or `INCRBY`. The
/// key's type is checked after this (`WRONGTYPE`).
pub fn parse_bitfield(
    words: &[Vec<u8>],
    read_only_command: bool,
    max_bytes: u64,
) -> Result<Bitfield, BitsError> {
    let name = if read_only_command {
        "bitfield_ro"
    } else {
        "bitfield"
    };
    if words.len() < 2 {
        return Err(arity_error(words, name));
    }
    let mut ops = Vec::new();
    let mut overflow = Overflow::Wrap;
    let mut j = 2;
    while let Some(sub) = words.get(j) {
        let remaining = words.len() - j - 1;
        // 0: GET, 1: SET, 2: INCRBY.
        let which = if is_word(sub, "get") && remaining >= 2 {
            0
        } else if is_word(sub, "set") && remaining >= 3 {
            1
        } else if is_word(sub, "incrby") && remaining >= 3 {
            2
        } else if is_word(sub, "overflow") && remaining >= 1 {
            let mode = word(words, j + 1, name)?;
            overflow = if is_word(mode, "wrap") {
                Overflow::Wrap
            } else if is_word(mode, "sat") {
                Overflow::Sat
            } else if is_word(mode, "fail") {
                Overflow::Fail
            } else {
                return Err(BitsError::OverflowType);
            };
            j += 2;
            continue;
        } else {
            return Err(BitsError::Syntax);
        };
        let ty = parse_bitfield_type(word(words, j + 1, name)?)?;
        let offset = parse_bit_offset(word(words, j + 2, name)?, Some(ty.bits), max_bytes)?;
        let kind = if which == 0 {
            j += 3;
            BitfieldOpKind::Get
        } else {
            let v = int_arg(word(words, j + 3, name)?)?;
            j += 4;
            if which == 1 {
                BitfieldOpKind::Set(v)
            } else {
                BitfieldOpKind::Incrby(v)
            }
        };
        ops.push(BitfieldOp {
            kind,
            ty,
            offset,
            overflow,
        });
    }
    let bf = Bitfield { ops };
    if read_only_command && !bf.is_read_only() {
        return Err(BitsError::BitfieldReadOnly);
    }
    Ok(bf)
}

/// What a write `BITFIELD` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BitfieldOutcome {
    /// One reply per operation: an integer, or nil (`None`) for a `SET`
    /// or `INCRBY` that overflowed under `OVERFLOW FAIL`.
    pub replies: Vec<Option<i64>>,
    /// True when the string was created or grew, or an operation changed
    /// a value: store it back (a write `BITFIELD` on a missing key
    /// creates it even when every write fails).
    pub changed: bool,
    /// True when Redis signals the key modified and fires the `setbit`
    /// keyspace event: some `SET`/`INCRBY` was carried out (not `FAIL`ed)
    /// and either the string grew or that operation changed the value.
    pub notify: bool,
}

/// The unsigned integer of `bits` bits at bit `offset` (zero past the end).
fn read_field(value: &[u8], offset: u64, bits: u32) -> u64 {
    let mut v = 0u64;
    for k in 0..u64::from(bits) {
        v = (v << 1) | u64::from(bit_at(value, i128::from(offset) + i128::from(k)));
    }
    v
}

/// Writes the low `bits` bits of `v` at bit `offset` (bits past the end
/// are dropped; the caller grew the string first).
fn write_field(value: &mut [u8], offset: u64, bits: u32, v: u64) {
    for k in 0..bits {
        let bit = (v >> (bits - 1 - k)) & 1;
        let pos = offset + u64::from(k);
        let shift = 7 - (pos & 7) as u32;
        if let Some(b) = usize::try_from(pos >> 3)
            .ok()
            .and_then(|i| value.get_mut(i))
        {
            *b = (*b & !(1u8 << shift)) | ((bit as u8) << shift);
        }
    }
}

/// The low `bits` bits of `v` as a two's complement integer.
fn sign_extend(v: u64, bits: u32) -> i64 {
    if bits >= 64 || bits == 0 {
        v as i64
    } else if v & (1u64 << (bits - 1)) != 0 {
        (v | (u64::MAX << bits)) as i64
    } else {
        (v & !(u64::MAX << bits)) as i64
    }
}

/// `BITFIELD ... GET type offset`: the integer at bit `offset` of
/// `value`, zero-padded past its end.
pub fn bitfield_get(value: &[u8], ty: BitfieldType, offset: u64) -> i64 {
    let v = read_field(value, offset, ty.bits);
    if ty.signed {
        sign_extend(v, ty.bits)
    } else {
        v as i64
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Direction {
    Over,
    Under,
}

/// Redis's overflow test of `value + incr` as an unsigned `bits`-bit
/// integer (`value` may itself be out of range: the `SET` case).
fn unsigned_overflow(value: u64, incr: i64, bits: u32) -> Option<Direction> {
    let max = if bits >= 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    };
    let max_incr = max.wrapping_sub(value) as i64;
    let min_incr = value.wrapping_neg() as i64;
    if value > max || (incr > 0 && incr > max_incr) {
        Some(Direction::Over)
    } else if incr < 0 && incr < min_incr {
        Some(Direction::Under)
    } else {
        None
    }
}

/// Redis's overflow test of `value + incr` as a signed `bits`-bit integer
/// (its arithmetic wraps as Redis's does, so out-of-range `SET` values
/// fall on the same side).
fn signed_overflow(value: i64, incr: i64, bits: u32) -> Option<Direction> {
    let max = if bits >= 64 {
        i64::MAX
    } else {
        (1i64 << (bits - 1)) - 1
    };
    let min = -max - 1;
    let max_incr = (max as u64).wrapping_sub(value as u64) as i64;
    let min_incr = min.wrapping_sub(value);
    let narrow = bits != 64;
    if value > max || (narrow && incr > max_incr) || (value >= 0 && incr > 0 && incr > max_incr) {
        Some(Direction::Over)
    } else if value < min
        || (narrow && incr < min_incr)
        || (value < 0 && incr < 0 && incr < min_incr)
    {
        Some(Direction::Under)
    } else {
        None
    }
}

/// The value an overflowing unsigned `value + incr` becomes (`None`:
/// `FAIL`).
fn unsigned_limit(value: u64, incr: i64, bits: u32, dir: Direction, ow: Overflow) -> Option<u64> {
    let max = if bits >= 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    };
    match ow {
        Overflow::Fail => None,
        Overflow::Sat => Some(if dir == Direction::Over { max } else { 0 }),
        Overflow::Wrap => Some(value.wrapping_add(incr as u64) & max),
    }
}

/// The value an overflowing signed `value + incr` becomes (`None`:
/// `FAIL`).
fn signed_limit(value: i64, incr: i64, bits: u32, dir: Direction, ow: Overflow) -> Option<i64> {
    let max = if bits >= 64 {
        i64::MAX
    } else {
        (1i64 << (bits - 1)) - 1
    };
    match ow {
        Overflow::Fail => None,
        Overflow::Sat => Some(if dir == Direction::Over {
            max
        } else {
            -max - 1
        }),
        Overflow::Wrap => Some(sign_extend((value as u64).wrapping_add(incr as u64), bits)),
    }
}

/// Runs one `SET`/`INCRBY`: (reply, written value, previous value as
/// bits), or `None` for a `FAIL`ed overflow.
fn bitfield_write_op(
    value: &[u8],
    op: &BitfieldOp,
    arg: i64,
    incr: bool,
) -> Option<(i64, u64, u64)> {
    let bits = op.ty.bits;
    let old_bits = read_field(value, op.offset, bits);
    if op.ty.signed {
        let old = sign_extend(old_bits, bits);
        let (v, inc) = if incr { (old, arg) } else { (arg, 0) };
        let new = match signed_overflow(v, inc, bits) {
            None => v.wrapping_add(inc),
            Some(dir) => signed_limit(v, inc, bits, dir, op.overflow)?,
        };
        let reply = if incr { new } else { old };
        Some((reply, new as u64, old as u64))
    } else {
        let old = old_bits;
        let (v, inc) = if incr { (old, arg) } else { (arg as u64, 0) };
        let new = match unsigned_overflow(v, inc, bits) {
            None => v.wrapping_add(inc as u64),
            Some(dir) => unsigned_limit(v, inc, bits, dir, op.overflow)?,
        };
        let reply = if incr { new } else { old };
        Some((reply as i64, new, old))
    }
}

/// `BITFIELD`: runs the operations in order on `value` (empty for a
/// missing key). With any `SET`/`INCRBY` the string is first zero-padded
/// to hold the farthest written bit (so a missing key is created even if
/// every write fails); a read-only command leaves it untouched.
pub fn bitfield(value: &mut Vec<u8>, bf: &Bitfield) -> BitfieldOutcome {
    let mut changed = false;
    let mut notify = false;
    if !bf.is_read_only() {
        let highest = bf
            .ops
            .iter()
            .filter(|op| op.kind != BitfieldOpKind::Get)
            .map(|op| op.offset + u64::from(op.ty.bits) - 1)
            .max()
            .unwrap_or(0);
        changed = grow_zero(value, (highest >> 3) + 1).unwrap_or(false);
    }
    let mut replies = Vec::with_capacity(bf.ops.len());
    for op in &bf.ops {
        let (arg, incr) = match op.kind {
            BitfieldOpKind::Get => {
                replies.push(Some(bitfield_get(value, op.ty, op.offset)));
                continue;
            }
            BitfieldOpKind::Set(v) => (v, false),
            BitfieldOpKind::Incrby(v) => (v, true),
        };
        match bitfield_write_op(value, op, arg, incr) {
            None => replies.push(None),
            Some((reply, new, old)) => {
                write_field(value, op.offset, op.ty.bits, new);
                // Both are in the type's range: equal values, equal bits.
                if changed || new != old {
                    changed = true;
                    notify = true;
                }
                replies.push(Some(reply));
            }
        }
    }
    BitfieldOutcome {
        replies,
        changed,
        notify,
    }
}

/// The replies of `bf` run against `value` without changing it: for a
/// read-only command (all `GET`s, as `BITFIELD_RO`), directly; otherwise
/// on a private copy of `value`.
pub fn bitfield_read(value: &[u8], bf: &Bitfield) -> Vec<Option<i64>> {
    if bf.is_read_only() {
        bf.ops
            .iter()
            .map(|op| Some(bitfield_get(value, op.ty, op.offset)))
            .collect()
    } else {
        let mut copy = value.to_vec();
        bitfield(&mut copy, bf).replies
    }
}

/// `BITFIELD_RO key [GET type offset]...`, whole: parse errors (including
/// `BitfieldReadOnly`) first, then `WRONGTYPE`; a missing key reads as
/// zeros.
pub fn cmd_bitfield_ro(
    words: &[Vec<u8>],
    key: Lookup<'_>,
    max_bytes: u64,
) -> Result<Vec<Option<i64>>, BitsError> {
    let bf = parse_bitfield(words, true, max_bytes)?;
    match key {
        Lookup::WrongType => Err(BitsError::WrongType),
        Lookup::Missing => Ok(bitfield_read(&[], &bf)),
        Lookup::Str(v) => Ok(bitfield_read(v, &bf)),
    }
}

/// The `BITFIELD` reply: an array of integers and nils.
pub fn bitfield_reply(replies: &[Option<i64>]) -> Reply {
    Reply::Array(Some(
        replies
            .iter()
            .map(|r| match r {
                Some(n) => Reply::Integer(*n),
                None => Reply::Bulk(None),
            })
            .collect(),
    ))
}

// ---------------------------------------------------------------------------
// SETRANGE / GETRANGE.
// ---------------------------------------------------------------------------

/// The arguments of `SETRANGE key offset value`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetrangeArgs {
    /// Where to write (non-negative).
    pub offset: u64,
    /// What to write.
    pub value: Vec<u8>,
}

/// What `SETRANGE` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SetrangeOutcome {
    /// The reply: the string's length afterwards.
    pub len: i64,
    /// True when something was written (even the same bytes): store it
    /// back (creating the key) and signal the key modified. False for an
    /// empty value: the key is neither created nor touched.
    pub changed: bool,
}

/// `SETRANGE key offset value`: parses `words` (errors: `NotInteger`, then
/// `OffsetOutOfRange`). The caller then checks the key's type
/// (`WRONGTYPE`) and calls [`setrange`].
pub fn parse_setrange(words: &[Vec<u8>]) -> Result<SetrangeArgs, BitsError> {
    if words.len() != 4 {
        return Err(arity_error(words, "setrange"));
    }
    let offset = int_arg(word(words, 2, "setrange")?)?;
    if offset < 0 {
        return Err(BitsError::OffsetOutOfRange);
    }
    Ok(SetrangeArgs {
        offset: offset as u64,
        value: word(words, 3, "setrange")?.to_vec(),
    })
}

/// `SETRANGE`: writes `args.value` at `args.offset` of `current` (empty
/// for a missing key), zero-padding the gap. An empty value changes
/// nothing and replies the current length (0 for a missing key) without
/// the size check; otherwise `TooBig` when `offset + len(value)` exceeds
/// `max_bytes`.
pub fn setrange(
    current: &mut Vec<u8>,
    args: &SetrangeArgs,
    max_bytes: u64,
) -> Result<SetrangeOutcome, BitsError> {
    if args.value.is_empty() {
        return Ok(SetrangeOutcome {
            len: current.len() as i64,
            changed: false,
        });
    }
    let total = u128::from(args.offset) + args.value.len() as u128;
    if total > u128::from(max_bytes) {
        return Err(BitsError::TooBig);
    }
    let (Ok(start), Ok(end)) = (usize::try_from(args.offset), usize::try_from(total)) else {
        return Err(BitsError::TooBig);
    };
    grow_zero(current, end as u64)?;
    if let Some(dst) = current.get_mut(start..end) {
        dst.copy_from_slice(&args.value);
    }
    Ok(SetrangeOutcome {
        len: current.len() as i64,
        changed: true,
    })
}

/// `GETRANGE`: the bytes of `value` from `start` to `end` inclusive, as
/// Redis 7.0 computes them: empty when both are negative and
/// `start > end`; negatives count from the end; both are clamped to 0
/// (so `GETRANGE k 0 -100` of a short string is its first byte) and `end`
/// to the last byte; empty when `start > end` or the string is empty.
pub fn getrange(value: &[u8], start: i64, end: i64) -> &[u8] {
    if start < 0 && end < 0 && start > end {
        return &[];
    }
    match resolve_range(start, end, value.len() as i128) {
        Some((s, e)) => {
            let (Ok(s), Ok(e)) = (usize::try_from(s), usize::try_from(e)) else {
                return &[];
            };
            value.get(s..=e).unwrap_or_default()
        }
        None => &[],
    }
}

/// `GETRANGE key start end` (and `SUBSTR`), whole: the integers first
/// (`NotInteger`), then an empty string for a missing key, then
/// `WRONGTYPE`.
pub fn cmd_getrange(words: &[Vec<u8>], key: Lookup<'_>) -> Result<Vec<u8>, BitsError> {
    if words.len() != 4 {
        return Err(arity_error(words, "getrange"));
    }
    let start = int_arg(word(words, 2, "getrange")?)?;
    let end = int_arg(word(words, 3, "getrange")?)?;
    match key {
        Lookup::Missing => Ok(Vec::new()),
        Lookup::WrongType => Err(BitsError::WrongType),
        Lookup::Str(v) => Ok(getrange(v, start, end).to_vec()),
    }
}

// ---------------------------------------------------------------------------
// LCS.
// ---------------------------------------------------------------------------

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
struct OpenRange {
    a_start: u64,
    a_end: u64,
    b_start: u64,
    b_end: u64,
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

/// A string's bytes; nothing for a missing key (or another type).
fn lookup_bytes(k: Lookup<'_>) -> &[u8] {
    match k {
        Lookup::Str(s) => s,
        Lookup::Missing | Lookup::WrongType => &[],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(line: &str) -> Vec<Vec<u8>> {
        line.split_whitespace()
            .map(|x| x.as_bytes().to_vec())
            .collect()
    }

    fn text<T: std::fmt::Debug>(r: Result<T, BitsError>) -> String {
        match r {
            Ok(v) => format!("{v:?}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn parse_i64_is_string2ll() {
        let cases: &[(&[u8], Option<i64>)] = &[
            (b"0", Some(0)),
            (b"-0", None),
            (b"00", None),
            (b"01", None),
            (b"+1", None),
            (b" 1", None),
            (b"1 ", None),
            (b"", None),
            (b"-", None),
            (b"12", Some(12)),
            (b"-12", Some(-12)),
            (b"9223372036854775807", Some(i64::MAX)),
            (b"9223372036854775808", None),
            (b"-9223372036854775808", Some(i64::MIN)),
            (b"-9223372036854775809", None),
            (b"1\0", None),
        ];
        for (input, want) in cases {
            assert_eq!(
                parse_i64(input),
                *want,
                "{:?}",
                String::from_utf8_lossy(input)
            );
        }
    }

    #[test]
    fn setbit_and_getbit() {
        let cases: &[(&str, &str)] = &[
            ("SETBIT k 7 1", "SetbitArgs { offset: 7, on: true }"),
            ("SETBIT k 7 0", "SetbitArgs { offset: 7, on: false }"),
            ("SETBIT k 7 2", "ERR bit is not an integer or out of range"),
            ("SETBIT k 7 -1", "ERR bit is not an integer or out of range"),
            ("SETBIT k 7 x", "ERR bit is not an integer or out of range"),
            (
                "SETBIT k -1 1",
                "ERR bit offset is not an integer or out of range",
            ),
            (
                "SETBIT k #1 1",
                "ERR bit offset is not an integer or out of range",
            ),
            (
                "SETBIT k 4294967296 1",
                "ERR bit offset is not an integer or out of range",
            ),
            (
                "SETBIT k 4294967295 1",
                "SetbitArgs { offset: 4294967295, on: true }",
            ),
            (
                "SETBIT k 1",
                "ERR wrong number of arguments for 'setbit' command",
            ),
        ];
        for (line, want) in cases {
            assert_eq!(
                text(parse_setbit(&w(line), DEFAULT_MAX_BYTES)),
                *want,
                "{line}"
            );
        }
        let mut v = Vec::new();
        let out = setbit(
            &mut v,
            &SetbitArgs {
                offset: 9,
                on: true,
            },
        );
        assert_eq!(
            out,
            SetbitOutcome {
                old: 0,
                changed: true
            }
        );
        assert_eq!(v, vec![0, 0x40]);
        let out = setbit(
            &mut v,
            &SetbitArgs {
                offset: 9,
                on: true,
            },
        );
        assert_eq!(
            out,
            SetbitOutcome {
                old: 1,
                changed: false
            }
        );
        let out = setbit(
            &mut v,
            &SetbitArgs {
                offset: 9,
                on: false,
            },
        );
        assert_eq!(
            out,
            SetbitOutcome {
                old: 1,
                changed: true
            }
        );
        assert_eq!(v, vec![0, 0]);
        let v = [0x80u8, 0x01];
        for (off, want) in [(0, 1), (1, 0), (15, 1), (16, 0), (u64::MAX, 0)] {
            assert_eq!(getbit(&v, off), want, "{off}");
        }
        assert_eq!(
            text(cmd_getbit(
                &w("GETBIT k x"),
                Lookup::WrongType,
                DEFAULT_MAX_BYTES
            )),
            "ERR bit offset is not an integer or out of range"
        );
        assert_eq!(
            text(cmd_getbit(
                &w("GETBIT k 1"),
                Lookup::WrongType,
                DEFAULT_MAX_BYTES
            )),
            ERR_WRONGTYPE
        );
        assert_eq!(text(cmd_getbit(&w("GETBIT k 1"), Lookup::Missing, 10)), "0");
    }

    #[test]
    fn bitcount_cases() {
        // The examples of Redis's documentation, and edge cases.
        let v = b"foobar";
        let cases: &[(&str, &str)] = &[
            ("BITCOUNT k", "26"),
            ("BITCOUNT k 0 0", "4"),
            ("BITCOUNT k 1 1", "6"),
            ("BITCOUNT k 1 1 BYTE", "6"),
            ("BITCOUNT k 5 30 BIT", "17"),
            ("BITCOUNT k 0 -1 bit", "26"),
            ("BITCOUNT k -100 100", "26"),
            ("BITCOUNT k -1 -2 nonsense", "0"),
            ("BITCOUNT k -10 -20", "0"),
            ("BITCOUNT k 2 1", "0"),
            ("BITCOUNT k 100 200", "0"),
            ("BITCOUNT k 0 0 bits", "ERR syntax error"),
            ("BITCOUNT k 0", "ERR syntax error"),
            ("BITCOUNT k 0 1 bit x", "ERR syntax error"),
            (
                "BITCOUNT k a 1",
                "ERR value is not an integer or out of range",
            ),
        ];
        for (line, want) in cases {
            assert_eq!(
                text(cmd_bitcount(&w(line), Lookup::Str(v))),
                *want,
                "{line}"
            );
        }
        assert_eq!(
            text(cmd_bitcount(&w("BITCOUNT k a b c"), Lookup::Missing)),
            "0"
        );
        assert_eq!(
            text(cmd_bitcount(&w("BITCOUNT k"), Lookup::WrongType)),
            ERR_WRONGTYPE
        );
        // Without the both-negative shortcut the clamped range would be
        // byte 0.
        let r = BitRange {
            start: -5,
            end: -10,
            unit: BitUnit::Byte,
        };
        assert_eq!(bitcount(b"\xff\xff\xff", Some(r)), 0);
        assert_eq!(bitcount(b"", None), 0);
    }

    #[test]
    fn bitpos_cases() {
        let cases: &[(&[u8], &str, &str)] = &[
            (b"\xff\xf0\x00", "BITPOS k 0", "12"),
            (b"\x00\xff\xf0", "BITPOS k 1 0", "8"),
            (b"\x00\xff\xf0", "BITPOS k 1 2", "16"),
            (b"\x00\xff\xf0", "BITPOS k 1 2 -1 BYTE", "16"),
            (b"\x00\xff\xf0", "BITPOS k 1 7 15 BIT", "8"),
            (b"\x00\x00\x00", "BITPOS k 1", "-1"),
            (b"\x00\x00\x00", "BITPOS k 1 7 -3 BIT", "-1"),
            (b"\x00\xff\xf0", "BITPOS k 1 7 -3 BIT", "8"),
            // Zeros past the end only without an explicit end.
            (b"\xff\xff", "BITPOS k 0", "16"),
            (b"\xff\xff", "BITPOS k 0 1", "16"),
            (b"\xff\xff", "BITPOS k 0 0 -1", "-1"),
            // A unit needs an end: "bit" is read as the end.
            (
                b"\xff\xff",
                "BITPOS k 0 3 bit",
                "ERR value is not an integer or out of range",
            ),
            (b"\xff\xff", "BITPOS k 0 3 15 bit", "-1"),
            (b"\xff\xfe", "BITPOS k 0 3 15 bit", "15"),
            (b"\xff\xff", "BITPOS k 0 5", "-1"),
            (b"", "BITPOS k 0", "-1"),
            (b"", "BITPOS k 1", "-1"),
            // No both-negative shortcut: both clamp to byte 0.
            (b"\x0f", "BITPOS k 1 -5 -10", "4"),
            (
                b"\x0f",
                "BITPOS k 2",
                "ERR The bit argument must be 1 or 0.",
            ),
            (
                b"\x0f",
                "BITPOS k x",
                "ERR value is not an integer or out of range",
            ),
            (
                b"\x0f",
                "BITPOS k 1 x 0 bad",
                "ERR value is not an integer or out of range",
            ),
            (b"\x0f", "BITPOS k 1 0 x bad", "ERR syntax error"),
            (
                b"\x0f",
                "BITPOS k 1 0 x bit",
                "ERR value is not an integer or out of range",
            ),
            (b"\x0f", "BITPOS k 1 0 1 bit x", "ERR syntax error"),
        ];
        for (v, line, want) in cases {
            assert_eq!(
                text(cmd_bitpos(&w(line), Lookup::Str(v))),
                *want,
                "{line} on {v:?}"
            );
        }
        assert_eq!(text(cmd_bitpos(&w("BITPOS k 0 x"), Lookup::Missing)), "0");
        assert_eq!(text(cmd_bitpos(&w("BITPOS k 1"), Lookup::Missing)), "-1");
        assert_eq!(
            text(cmd_bitpos(&w("BITPOS k 3"), Lookup::WrongType)),
            "ERR The bit argument must be 1 or 0."
        );
        assert_eq!(
            text(cmd_bitpos(&w("BITPOS k 1"), Lookup::WrongType)),
            ERR_WRONGTYPE
        );
    }

    #[test]
    fn bitop_cases() {
        let cases: &[(&str, &str)] = &[
            ("BITOP AND d a b", "And"),
            ("BITOP or d a", "Or"),
            ("BITOP XoR d a b c", "Xor"),
            ("BITOP NOT d a", "Not"),
            (
                "BITOP NOT d a b",
                "ERR BITOP NOT must be called with a single source key.",
            ),
            ("BITOP NAND d a b", "ERR syntax error"),
            (
                "BITOP AND d",
                "ERR wrong number of arguments for 'bitop' command",
            ),
        ];
        for (line, want) in cases {
            let got = parse_bitop(&w(line)).map(|a| a.op);
            assert_eq!(text(got), *want, "{line}");
        }
        let a: &[u8] = b"\xf0\x0f\xff";
        let b: &[u8] = b"\x3c";
        assert_eq!(bitop(BitopKind::And, &[a, b]), b"\x30\x00\x00");
        assert_eq!(bitop(BitopKind::Or, &[a, b]), b"\xfc\x0f\xff");
        assert_eq!(bitop(BitopKind::Xor, &[a, b, b]), a);
        assert_eq!(bitop(BitopKind::Not, &[b]), b"\xc3");
        assert_eq!(bitop(BitopKind::Or, &[b"", b""]), b"");
        assert_eq!(bitop(BitopKind::And, &[b"", b"\xff"]), b"\x00");
    }

    fn run_bitfield(value: &mut Vec<u8>, line: &str) -> String {
        match parse_bitfield(&w(line), false, DEFAULT_MAX_BYTES) {
            Ok(bf) => format!("{:?}", bitfield(value, &bf).replies),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn bitfield_sequences() {
        // Each table runs on one string, in order.
        let tables: &[&[(&str, &str)]] = &[
            &[
                ("BITFIELD k INCRBY i5 100 1 GET u4 0", "[Some(1), Some(0)]"),
                ("BITFIELD k GET i5 100", "[Some(1)]"),
            ],
            &[
                ("BITFIELD k incrby u2 100 1 OVERFLOW SAT incrby u2 102 1", "[Some(1), Some(1)]"),
                ("BITFIELD k incrby u2 100 1 OVERFLOW SAT incrby u2 102 1", "[Some(2), Some(2)]"),
                ("BITFIELD k incrby u2 100 1 OVERFLOW SAT incrby u2 102 1", "[Some(3), Some(3)]"),
                ("BITFIELD k incrby u2 100 1 OVERFLOW SAT incrby u2 102 1", "[Some(0), Some(3)]"),
                ("BITFIELD k OVERFLOW FAIL incrby u2 102 1", "[None]"),
                ("BITFIELD k OVERFLOW FAIL incrby u2 102 -3 GET u2 102", "[Some(0), Some(0)]"),
                ("BITFIELD k OVERFLOW FAIL incrby u2 102 -1", "[None]"),
            ],
            &[
                ("BITFIELD k SET i8 0 -1 GET u8 0 GET i4 4", "[Some(0), Some(255), Some(-1)]"),
                ("BITFIELD k SET u8 #1 300", "[Some(0)]"),
                ("BITFIELD k GET u8 8", "[Some(44)]"),
                ("BITFIELD k OVERFLOW SAT SET u8 #1 -1", "[Some(44)]"),
                ("BITFIELD k GET u8 8", "[Some(255)]"),
                ("BITFIELD k OVERFLOW SAT SET i8 8 200 GET i8 8", "[Some(-1), Some(127)]"),
                ("BITFIELD k OVERFLOW WRAP INCRBY i8 8 1", "[Some(-128)]"),
                ("BITFIELD k OVERFLOW SAT INCRBY i8 8 -1", "[Some(-128)]"),
                (
                    "BITFIELD k SET i64 16 9223372036854775807 INCRBY i64 16 1",
                    "[Some(0), Some(-9223372036854775808)]",
                ),
                (
                    "BITFIELD k OVERFLOW SAT INCRBY i64 16 -1 INCRBY i64 16 -9223372036854775808",
                    "[Some(-9223372036854775808), Some(-9223372036854775808)]",
                ),
                (
                    "BITFIELD k SET u63 0 -1 GET u63 0",
                    "[Some(9205428007089471488), Some(9223372036854775807)]",
                ),
            ],
            &[
                ("BITFIELD k GET u8 0", "[Some(0)]"),
                ("BITFIELD k", "[]"),
                ("BITFIELD k GET u64 0", "ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is."),
                ("BITFIELD k GET i65 0", "ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is."),
                ("BITFIELD k GET I8 0", "ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is."),
                ("BITFIELD k GET i8 -1", "ERR bit offset is not an integer or out of range"),
                ("BITFIELD k GET i8 #-1", "ERR bit offset is not an integer or out of range"),
                ("BITFIELD k GET i8 4294967296", "ERR bit offset is not an integer or out of range"),
                ("BITFIELD k SET i8 0 x", "ERR value is not an integer or out of range"),
                ("BITFIELD k OVERFLOW WRAPS", "ERR Invalid OVERFLOW type specified"),
                ("BITFIELD k OVERFLOW", "ERR syntax error"),
                ("BITFIELD k GET i8", "ERR syntax error"),
                ("BITFIELD k SET i8 0", "ERR syntax error"),
                ("BITFIELD k PUT i8 0", "ERR syntax error"),
            ],
        ];
        for table in tables {
            let mut v = Vec::new();
            for (line, want) in *table {
                assert_eq!(run_bitfield(&mut v, line), *want, "{line}");
            }
        }
        // `#k` multiplies with 64-bit wrap-around, as Redis.
        let bf = parse_bitfield(&w("BITFIELD k GET i64 #288230376151711745"), false, 16)
            .unwrap_or_default();
        assert_eq!(bf.ops.first().map(|o| o.offset), Some(64));
        // A write on a missing key creates it even if every write fails.
        let mut v = Vec::new();
        let bf = parse_bitfield(&w("BITFIELD k OVERFLOW FAIL INCRBY u2 9 7"), false, 16)
            .unwrap_or_default();
        let out = bitfield(&mut v, &bf);
        assert_eq!(
            out,
            BitfieldOutcome {
                replies: vec![None],
                changed: true,
                notify: false,
            }
        );
        assert_eq!(v, vec![0, 0]);
        // Read-only: nothing created.
        let mut v = Vec::new();
        let bf = parse_bitfield(&w("BITFIELD k GET u2 90"), false, 16).unwrap_or_default();
        assert!(!bitfield(&mut v, &bf).changed);
        assert!(v.is_empty());
    }

    #[test]
    fn bitfield_ro() {
        let cases: &[(&str, Lookup<'static>, &str)] = &[
            ("BITFIELD_RO k GET u8 0 GET i4 4", Lookup::Str(b"\xf7"), "[Some(247), Some(7)]"),
            ("BITFIELD_RO k GET u8 0", Lookup::Missing, "[Some(0)]"),
            ("BITFIELD_RO k GET u8 0", Lookup::WrongType, ERR_WRONGTYPE),
            ("BITFIELD_RO k GET u8 0 SET u8 0 1", Lookup::WrongType, "ERR BITFIELD_RO only supports the GET subcommand"),
            ("BITFIELD_RO k INCRBY u8 0 1", Lookup::Missing, "ERR BITFIELD_RO only supports the GET subcommand"),
            ("BITFIELD_RO k SET x8 0 1", Lookup::Missing, "ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is."),
            ("BITFIELD_RO k OVERFLOW SAT GET u8 0", Lookup::Missing, "[Some(0)]"),
        ];
        for (line, key, want) in cases {
            assert_eq!(
                text(cmd_bitfield_ro(&w(line), *key, DEFAULT_MAX_BYTES)),
                *want,
                "{line}"
            );
        }
        let bf =
            parse_bitfield(&w("BITFIELD k INCRBY u8 0 1 GET u8 0"), false, 16).unwrap_or_default();
        assert_eq!(bitfield_read(b"\x05", &bf), vec![Some(6), Some(6)]);
    }

    #[test]
    fn setrange_and_getrange() {
        let cases: &[(&str, &str)] = &[
            (
                "SETRANGE k 6 Redis",
                "SetrangeArgs { offset: 6, value: [82, 101, 100, 105, 115] }",
            ),
            ("SETRANGE k -1 a", "ERR offset is out of range"),
            (
                "SETRANGE k x a",
                "ERR value is not an integer or out of range",
            ),
            (
                "SETRANGE k 1",
                "ERR wrong number of arguments for 'setrange' command",
            ),
        ];
        for (line, want) in cases {
            assert_eq!(text(parse_setrange(&w(line))), *want, "{line}");
        }
        let args = |offset: u64, value: &[u8]| SetrangeArgs {
            offset,
            value: value.to_vec(),
        };
        let mut v = b"Hello World".to_vec();
        let out = setrange(&mut v, &args(6, b"Redis"), 100);
        assert_eq!(
            out,
            Ok(SetrangeOutcome {
                len: 11,
                changed: true
            })
        );
        assert_eq!(v, b"Hello Redis");
        let mut v = Vec::new();
        assert_eq!(
            setrange(&mut v, &args(6, b"Redis"), 100).map(|o| o.len),
            Ok(11)
        );
        assert_eq!(v, b"\0\0\0\0\0\0Redis");
        let mut v = Vec::new();
        assert_eq!(
            setrange(&mut v, &args(1 << 40, b""), 100),
            Ok(SetrangeOutcome {
                len: 0,
                changed: false
            })
        );
        assert_eq!(
            setrange(&mut v, &args(96, b"abcde"), 100),
            Err(BitsError::TooBig)
        );
        assert_eq!(
            setrange(&mut v, &args(95, b"abcde"), 100).map(|o| o.len),
            Ok(100)
        );
        assert_eq!(
            setrange(&mut v, &args(u64::MAX >> 1, b"a"), u64::MAX),
            Err(BitsError::TooBig)
        );

        let s = b"This is a string";
        let cases: &[(i64, i64, &[u8])] = &[
            (0, 3, b"This"),
            (-3, -1, b"ing"),
            (0, -1, b"This is a string"),
            (10, 100, b"string"),
            (0, -100, b"T"),
            (-1, -5, b""),
            (5, 3, b""),
            (100, 200, b""),
            (i64::MIN, i64::MAX, b"This is a string"),
        ];
        for (start, end, want) in cases {
            assert_eq!(getrange(s, *start, *end), *want, "{start} {end}");
        }
        assert_eq!(getrange(b"", 0, -1), b"");
        assert_eq!(
            text(cmd_getrange(&w("GETRANGE k a 1"), Lookup::WrongType)),
            "ERR value is not an integer or out of range"
        );
        assert_eq!(
            text(cmd_getrange(&w("GETRANGE k 0 1"), Lookup::WrongType)),
            ERR_WRONGTYPE
        );
        assert_eq!(
            text(cmd_getrange(&w("SUBSTR k 0 1"), Lookup::Missing)),
            "[]"
        );
    }

    #[test]
    fn lcs_cases() {
        let a = Lookup::Str(b"ohmytext");
        let b = Lookup::Str(b"mynewtext");
        let m = |a: (u64, u64), b: (u64, u64)| LcsMatch {
            a_start: a.0,
            a_end: a.1,
            b_start: b.0,
            b_end: b.1,
            len: a.1 - a.0 + 1,
        };
        let cases: &[(&str, Result<LcsReply, BitsError>)] = &[
            ("LCS a b", Ok(LcsReply::Str(b"mytext".to_vec()))),
            ("LCS a b LEN", Ok(LcsReply::Len(6))),
            (
                "LCS a b IDX",
                Ok(LcsReply::Idx {
                    matches: vec![m((4, 7), (5, 8)), m((2, 3), (0, 1))],
                    len: 6,
                    with_match_len: false,
                }),
            ),
            (
                "LCS a b IDX MINMATCHLEN 4 WITHMATCHLEN",
                Ok(LcsReply::Idx {
                    matches: vec![m((4, 7), (5, 8))],
                    len: 6,
                    with_match_len: true,
                }),
            ),
            ("LCS a b LEN IDX", Err(BitsError::LcsLenAndIdx)),
            ("LCS a b MINMATCHLEN", Err(BitsError::Syntax)),
            ("LCS a b MINMATCHLEN x", Err(BitsError::NotInteger)),
            ("LCS a b FOO", Err(BitsError::Syntax)),
        ];
        for (line, want) in cases {
            assert_eq!(cmd_lcs(&w(line), a, b, DEFAULT_MAX_BYTES), *want, "{line}");
        }
        assert_eq!(
            cmd_lcs(&w("LCS a b FOO"), a, Lookup::WrongType, 1 << 20),
            Err(BitsError::LcsNotString)
        );
        assert_eq!(
            cmd_lcs(&w("LCS a b"), Lookup::Missing, b, 1 << 20),
            Ok(LcsReply::Str(Vec::new()))
        );
        // (8+1) * (9+1) cells of 4 bytes: 360 bytes.
        assert_eq!(
            cmd_lcs(&w("LCS a b LEN"), a, b, 359),
            Err(BitsError::LcsMemory)
        );
        assert_eq!(cmd_lcs(&w("LCS a b LEN"), a, b, 360), Ok(LcsReply::Len(6)));
        let reply = LcsReply::Idx {
            matches: vec![m((0, 1), (2, 3))],
            len: 2,
            with_match_len: true,
        }
        .to_reply();
        let pair = |x, y| Reply::Array(Some(vec![Reply::Integer(x), Reply::Integer(y)]));
        assert_eq!(
            reply,
            Reply::Map(vec![
                (
                    Reply::Bulk(Some(b"matches".to_vec())),
                    Reply::Array(Some(vec![Reply::Array(Some(vec![
                        pair(0, 1),
                        pair(2, 3),
                        Reply::Integer(2)
                    ]))]))
                ),
                (Reply::Bulk(Some(b"len".to_vec())), Reply::Integer(2)),
            ])
        );
    }

    #[test]
    fn errors_carry_redis_texts() {
        assert_eq!(BitsError::WrongType.to_reply(), Reply::err(ERR_WRONGTYPE));
        assert_eq!(
            BitsError::TooBig.to_string(),
            "ERR string exceeds maximum allowed size (proto-max-bulk-len)"
        );
        assert_eq!(
            arity_error(&w("BITFIELD_RO"), "x").to_string(),
            "ERR wrong number of arguments for 'bitfield_ro' command"
        );
    }
}
