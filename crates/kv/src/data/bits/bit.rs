//! Single bits and counts: `SETBIT`, `GETBIT`, `BITCOUNT`, `BITPOS`.

use super::args::{
    arity_error, grow_zero, int_arg, is_word, parse_bit_offset, parse_i64, resolve_range, word,
    BitsError, Lookup,
};

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

/// The unit of a `BITCOUNT`/`BITPOS` range.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BitUnit {
    /// `BYTE` (the default): indexes are byte indexes.
    #[default]
    Byte,
    /// `BIT`: indexes are bit indexes.
    Bit,
}

pub(super) fn parse_unit(w: &[u8]) -> Result<BitUnit, BitsError> {
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
pub(super) fn to_bits(start: i128, end: i128, unit: BitUnit) -> (i128, i128) {
    match unit {
        BitUnit::Bit => (start, end),
        BitUnit::Byte => (start * 8, end * 8 + 7),
    }
}

pub(super) fn bit_at(value: &[u8], pos: i128) -> u8 {
    let byte = usize::try_from(pos >> 3)
        .ok()
        .and_then(|i| value.get(i))
        .copied()
        .unwrap_or(0);
    (byte >> (7 - (pos & 7) as u32)) & 1
}

pub(super) fn byte_at(value: &[u8], pos: i128) -> u8 {
    usize::try_from(pos >> 3)
        .ok()
        .and_then(|i| value.get(i))
        .copied()
        .unwrap_or(0)
}

/// The number of set bits in bit positions `from..=to`.
pub(super) fn count_ones_in(value: &[u8], from: i128, to: i128) -> i64 {
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
