//! String ranges: `SETRANGE` and `GETRANGE`.

use super::args::{arity_error, grow_zero, int_arg, resolve_range, word, BitsError, Lookup};

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
