//! Bitmaps, bit fields and string ranges: SETBIT, GETBIT, BITCOUNT,
//! BITPOS, BITOP, BITFIELD, BITFIELD_RO, SETRANGE, GETRANGE, SUBSTR and
//! LCS, on the computations of [`crate::data::bits`] (Redis's replies,
//! error texts and order of checks).
//!
//! The size limit (`proto-max-bulk-len`: the largest bit offset and
//! string, `LCS`'s table) is the replicated
//! [`crate::store::DataConfig::proto_max_bulk_len`], the same on every
//! member. The leader's check of a command's words ([`parse`]) has no
//! store: it refuses only what every limit would refuse, and the rest of
//! the check — an offset past the limit — is made against the store's
//! limit by [`Cmd::unchanged`] (the leader answers such an error like a
//! read) and, the same, by [`Cmd::apply`] on every member.
//!
//! Writes store a value back (creating the key) only when it changed, and
//! signal the key where Redis does: `setbit` (SETBIT, BITFIELD),
//! `setrange`, and for BITOP `set` or, for an empty result, `del` of a
//! destination that existed. A BITFIELD of GETs only changes nothing: the
//! leader answers it like a read.

use crate::data::bits::{self, BitsError, Lookup};
use crate::notify::NotifyFlags;
use crate::resp::Reply;
use crate::store::Store;
use crate::value::{wrongtype, SplitMix, Value};

pub(super) const NAMES: &[&str] = &[
    "setbit",
    "getbit",
    "bitcount",
    "bitpos",
    "bitop",
    "bitfield",
    "bitfield_ro",
    "setrange",
    "getrange",
    "substr",
    "lcs",
];

/// The most bytes [`Cmd::unchanged`] copies to learn whether a `BITFIELD`
/// with `SET`/`INCRBY` would change its key (the span its operations
/// touch); one spanning more is just applied (the op then changes
/// nothing, as it would have found).
const UNCHANGED_COPY_MAX: u64 = 4096;

/// Which command of this module.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    SetBit,
    GetBit,
    BitCount,
    BitPos,
    BitOp,
    BitField,
    BitFieldRo,
    SetRange,
    GetRange,
    Lcs,
}

/// A command of this module: its kind and its words (parsed again where
/// the store's size limit is known).
pub(super) struct Cmd<'a> {
    kind: Kind,
    words: &'a [Vec<u8>],
}

fn err(e: BitsError) -> Reply {
    e.to_reply()
}

/// The error a parse that depends on the size limit gives whatever the
/// limit is (tried with the smallest and the largest: an offset check
/// fails for every limit below the smallest that passes it, so a parse
/// failing the same way at both ends fails so in between); `Ok` when it
/// may pass or fail otherwise.
fn certain_error<T>(f: impl Fn(u64) -> Result<T, BitsError>) -> Result<(), Reply> {
    match (f(0), f(u64::MAX)) {
        (Err(lo), Err(hi)) if lo == hi => Err(err(hi)),
        _ => Ok(()),
    }
}

/// Parses command `name` of this module (its arity already checked): the
/// errors that do not depend on the store.
pub(super) fn parse<'a>(name: &str, a: &'a [Vec<u8>]) -> Result<Cmd<'a>, Reply> {
    let kind = match name {
        "setbit" => {
            certain_error(|max| bits::parse_setbit(a, max))?;
            Kind::SetBit
        }
        "getbit" => Kind::GetBit,
        "bitcount" => Kind::BitCount,
        "bitpos" => Kind::BitPos,
        "bitop" => {
            bits::parse_bitop(a).map_err(err)?;
            Kind::BitOp
        }
        "bitfield" => {
            certain_error(|max| bits::parse_bitfield(a, false, max))?;
            Kind::BitField
        }
        "bitfield_ro" => Kind::BitFieldRo,
        "setrange" => {
            bits::parse_setrange(a).map_err(err)?;
            Kind::SetRange
        }
        "getrange" | "substr" => Kind::GetRange,
        "lcs" => Kind::Lcs,
        _ => return Err(super::args::syntax()),
    };
    Ok(Cmd { kind, words: a })
}

/// The store's size limit (`proto-max-bulk-len`).
fn max_bytes(st: &Store) -> u64 {
    st.data_config().proto_max_bulk_len
}

/// The key a write finds: absent, a string, or WRONGTYPE.
fn string_at<'s>(st: &'s Store, key: &[u8]) -> Result<Option<&'s Vec<u8>>, Reply> {
    match st.cur(key) {
        None => Ok(None),
        Some(Value::Str(s)) => Ok(Some(s)),
        Some(_) => Err(wrongtype()),
    }
}

/// Runs `f` on the string at `key` (changed in place; expiry kept), or on
/// an empty one stored as the new key when `f` says it changed it (`f`
/// returns its result and whether the value changed). The caller has
/// checked the key's type.
fn with_string<T>(
    st: &mut Store,
    key: &[u8],
    f: impl FnOnce(&mut Vec<u8>) -> Result<(T, bool), Reply>,
) -> Result<T, Reply> {
    if let Some(Value::Str(s)) = st.cur_mut(key) {
        return f(s).map(|(t, _)| t);
    }
    let mut v = Vec::new();
    let (t, changed) = f(&mut v)?;
    if changed {
        st.put_value(key, Value::Str(v), None);
    }
    Ok(t)
}

/// The bytes of `s` that `bf`'s operations touch, and the operations
/// moved to them, when none writes past the end of `s` (which would grow
/// it: a change) and they span at most [`UNCHANGED_COPY_MAX`] bytes: run
/// on these, `bf` gives the replies it would on `s`, and changes them iff
/// it would change `s`.
fn window(bf: &bits::Bitfield, s: &[u8]) -> Option<(Vec<u8>, bits::Bitfield)> {
    let last_byte = |op: &bits::BitfieldOp| (op.offset + u64::from(op.ty.bits) - 1) >> 3;
    let written = bf
        .ops
        .iter()
        .filter(|op| op.kind != bits::BitfieldOpKind::Get)
        .map(last_byte)
        .max()?;
    if written >= s.len() as u64 {
        return None;
    }
    let first = bf.ops.iter().map(|op| op.offset >> 3).min()?;
    let last = bf.ops.iter().map(last_byte).max()?;
    if last - first >= UNCHANGED_COPY_MAX {
        return None;
    }
    let lo = usize::try_from(first).ok()?;
    let hi = usize::try_from(last).ok()?.min(s.len() - 1);
    let bytes = s.get(lo..=hi)?.to_vec();
    let ops = bf
        .ops
        .iter()
        .map(|op| bits::BitfieldOp {
            offset: op.offset - (first << 3),
            ..*op
        })
        .collect();
    Some((bytes, bits::Bitfield { ops }))
}

/// `LCS`'s reply in RESP2's terms: `IDX`'s map as a flat array
/// (`crate::resp3` makes it a map again).
fn lcs_reply(r: &bits::LcsReply) -> Reply {
    match r.to_reply() {
        Reply::Map(pairs) => {
            Reply::Array(Some(pairs.into_iter().flat_map(|(k, v)| [k, v]).collect()))
        }
        other => other,
    }
}

impl Cmd<'_> {
    /// The first key.
    fn key(&self) -> &[u8] {
        self.words.get(1).map_or(&[][..], |k| k.as_slice())
    }

    /// The reply when running it would change nothing (see
    /// [`super::unchanged_reply`]): an error of the size limit, a SETBIT
    /// of the bit there, a BITFIELD of GETs only (or whose writes leave a
    /// short string as it is), a SETRANGE of nothing or past the limit, a
    /// BITOP of empty sources onto no key. `None` for a wrong type.
    pub(super) fn unchanged(&self, st: &Store) -> Option<Reply> {
        let max = max_bytes(st);
        let key = self.key();
        match self.kind {
            Kind::SetBit => {
                let args = match bits::parse_setbit(self.words, max) {
                    Ok(a) => a,
                    Err(e) => return Some(err(e)),
                };
                let s = string_at(st, key).ok()??;
                let byte = usize::try_from(args.offset >> 3).ok()?;
                let old = bits::getbit(s, args.offset);
                (byte < s.len() && (old == 1) == args.on).then_some(Reply::Integer(old))
            }
            Kind::BitField => {
                let bf = match bits::parse_bitfield(self.words, false, max) {
                    Ok(bf) => bf,
                    Err(e) => return Some(err(e)),
                };
                let s = string_at(st, key).ok()?;
                if bf.is_read_only() {
                    let v = s.map_or(&[][..], |s| s.as_slice());
                    return Some(bits::bitfield_reply(&bits::bitfield_read(v, &bf)));
                }
                let (mut bytes, shifted) = window(&bf, s?)?;
                let out = bits::bitfield(&mut bytes, &shifted);
                (!out.changed).then(|| bits::bitfield_reply(&out.replies))
            }
            Kind::SetRange => {
                let args = bits::parse_setrange(self.words).ok()?;
                let len = string_at(st, key).ok()?.map_or(0, |s| s.len());
                if args.value.is_empty() {
                    return Some(Reply::Integer(len as i64));
                }
                // The size check, made before anything is written.
                let total = u128::from(args.offset) + args.value.len() as u128;
                (total > u128::from(max)).then(|| err(BitsError::TooBig))
            }
            Kind::BitOp => {
                let args = bits::parse_bitop(self.words).ok()?;
                if st.cur(&args.dest).is_some() {
                    return None;
                }
                let all_empty = args.sources.iter().all(|k| match st.cur(k) {
                    None => true,
                    Some(Value::Str(s)) => s.is_empty(),
                    Some(_) => false,
                });
                all_empty.then_some(Reply::Integer(0))
            }
            _ => None,
        }
    }

    pub(super) fn apply(&self, st: &mut Store, now: u64) -> Reply {
        match self.apply_inner(st, now) {
            Ok(r) | Err(r) => r,
        }
    }

    fn apply_inner(&self, st: &mut Store, now: u64) -> Result<Reply, Reply> {
        let max = max_bytes(st);
        let key = self.key();
        Ok(match self.kind {
            Kind::SetBit => {
                let args = bits::parse_setbit(self.words, max).map_err(err)?;
                string_at(st, key)?;
                let out = with_string(st, key, |s| {
                    let out = bits::setbit(s, &args);
                    Ok((out, out.changed))
                })?;
                if out.changed {
                    st.notify(NotifyFlags::STRING, "setbit", key);
                }
                Reply::Integer(out.old)
            }
            Kind::BitField => {
                let bf = bits::parse_bitfield(self.words, false, max).map_err(err)?;
                let cur = string_at(st, key)?;
                if bf.is_read_only() {
                    let v = cur.map_or(&[][..], |s| s.as_slice());
                    return Ok(bits::bitfield_reply(&bits::bitfield_read(v, &bf)));
                }
                let out = with_string(st, key, |s| {
                    let out = bits::bitfield(s, &bf);
                    let changed = out.changed;
                    Ok((out, changed))
                })?;
                if out.notify {
                    st.notify(NotifyFlags::STRING, "setbit", key);
                }
                bits::bitfield_reply(&out.replies)
            }
            Kind::SetRange => {
                let args = bits::parse_setrange(self.words).map_err(err)?;
                string_at(st, key)?;
                let out = with_string(st, key, |s| {
                    let out = bits::setrange(s, &args, max).map_err(err)?;
                    Ok((out, out.changed))
                })?;
                if out.changed {
                    st.notify(NotifyFlags::STRING, "setrange", key);
                }
                Reply::Integer(out.len)
            }
            Kind::BitOp => {
                let args = bits::parse_bitop(self.words).map_err(err)?;
                let result = {
                    let mut sources: Vec<&[u8]> = Vec::with_capacity(args.sources.len());
                    for k in &args.sources {
                        sources.push(string_at(st, k)?.map_or(&[][..], |s| s.as_slice()));
                    }
                    bits::bitop(args.op, &sources)
                };
                let len = result.len() as i64;
                if result.is_empty() {
                    st.delete_with_event(&args.dest);
                } else {
                    st.put_value(&args.dest, Value::Str(result), None);
                    st.notify(NotifyFlags::STRING, "set", &args.dest);
                }
                Reply::Integer(len)
            }
            _ => self.read(st, now),
        })
    }

    pub(super) fn read(&self, st: &Store, now: u64) -> Reply {
        let w = self.words;
        let max = max_bytes(st);
        let lookup = |k: &[u8]| Lookup::from_value(st.value(k, now));
        let key = lookup(self.key());
        match self.kind {
            Kind::GetBit => bits::cmd_getbit(w, key, max).map_or_else(err, Reply::Integer),
            Kind::BitCount => bits::cmd_bitcount(w, key).map_or_else(err, Reply::Integer),
            Kind::BitPos => bits::cmd_bitpos(w, key).map_or_else(err, Reply::Integer),
            Kind::BitFieldRo => {
                bits::cmd_bitfield_ro(w, key, max).map_or_else(err, |r| bits::bitfield_reply(&r))
            }
            Kind::GetRange => bits::cmd_getrange(w, key).map_or_else(err, Reply::bulk),
            Kind::Lcs => {
                let other = lookup(w.get(2).map_or(&[][..], |k| k.as_slice()));
                bits::cmd_lcs(w, key, other, max).map_or_else(err, |r| lcs_reply(&r))
            }
            Kind::SetBit | Kind::BitField | Kind::SetRange | Kind::BitOp => super::args::syntax(),
        }
    }
}

impl super::run::Run for Cmd<'_> {
    fn apply(&self, st: &mut Store, now: u64, _rng: &mut SplitMix) -> Reply {
        Cmd::apply(self, st, now)
    }
    fn read(&self, st: &Store, now: u64, _rng: &mut SplitMix) -> Reply {
        Cmd::read(self, st, now)
    }
    fn unchanged(&self, st: &Store) -> Option<Reply> {
        Cmd::unchanged(self, st)
    }
}
