//! `BITFIELD` and `BITFIELD_RO`: field types, overflow rules, reads and
//! writes of arbitrary-width integers.

use super::args::{
    arity_error, c_str, grow_zero, int_arg, is_word, parse_bit_offset, parse_i64, word, BitsError,
    Lookup,
};
use super::bit::bit_at;
use crate::resp::Reply;

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
pub(super) fn read_field(value: &[u8], offset: u64, bits: u32) -> u64 {
    let mut v = 0u64;
    for k in 0..u64::from(bits) {
        v = (v << 1) | u64::from(bit_at(value, i128::from(offset) + i128::from(k)));
    }
    v
}

/// Writes the low `bits` bits of `v` at bit `offset` (bits past the end
/// are dropped; the caller grew the string first).
pub(super) fn write_field(value: &mut [u8], offset: u64, bits: u32, v: u64) {
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
pub(super) fn sign_extend(v: u64, bits: u32) -> i64 {
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
pub(super) enum Direction {
    Over,
    Under,
}

/// Redis's overflow test of `value + incr` as an unsigned `bits`-bit
/// integer (`value` may itself be out of range: the `SET` case).
pub(super) fn unsigned_overflow(value: u64, incr: i64, bits: u32) -> Option<Direction> {
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
pub(super) fn signed_overflow(value: i64, incr: i64, bits: u32) -> Option<Direction> {
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
pub(super) fn unsigned_limit(
    value: u64,
    incr: i64,
    bits: u32,
    dir: Direction,
    ow: Overflow,
) -> Option<u64> {
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
pub(super) fn signed_limit(
    value: i64,
    incr: i64,
    bits: u32,
    dir: Direction,
    ow: Overflow,
) -> Option<i64> {
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
pub(super) fn bitfield_write_op(
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
