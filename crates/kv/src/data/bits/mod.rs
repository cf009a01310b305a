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
//!
//! The files, from the bottom up: `args` (errors, lookups, word helpers),
//! then one per command family: `bit`, `bitop`, `bitfield`, `range`,
//! `lcs`.

mod args;
mod bit;
mod bitfield;
mod bitop;
mod lcs;
mod range;

pub use self::args::*;
pub use self::bit::*;
pub use self::bitfield::*;
pub use self::bitop::*;
pub use self::lcs::*;
pub use self::range::*;

#[cfg(test)]
mod tests;
