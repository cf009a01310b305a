//! The `DUMP`/`RESTORE` payload of Redis 7.0: one value in Redis's RDB
//! object encoding, so that a value moves between a real Redis 7.0 and
//! xlane kv in both directions (`DUMP` there, `RESTORE` here, and back).
//!
//! # The payload (facts of Redis's `rdb.c` and `cluster.c`)
//!
//! `type byte | object | RDB version (u16 LE) | CRC-64 (u64 LE)`: the
//! CRC-64 is Redis's "Jones" variant (reflected, polynomial
//! `0xad93d23594c935a9`, initial value 0, no final xor: the `crc` crate's
//! `CRC_64_REDIS`) of everything before it. Redis 7.0 writes version 10
//! and refuses a greater one.
//!
//! Lengths are `00xxxxxx` (6 bits), `01xxxxxx yyyyyyyy` (14 bits, big
//! endian), `0x80` + u32 BE, `0x81` + u64 BE; `11xxxxxx` marks a specially
//! encoded string: `0xC0`/`0xC1`/`0xC2` an 8/16/32-bit little-endian
//! integer (its decimal text is the string), `0xC3` LZF: compressed length,
//! plain length, compressed bytes (see `lzf.rs`).
//!
//! Object types read by [`restore`] (every one Redis 7.0 loads):
//!
//! | type | value | object |
//! |---|---|---|
//! | 0 | string | a string |
//! | 1 | list | count, strings (linked list, before Redis 3.2) |
//! | 2 | set | count, strings |
//! | 3 | zset | count, (member, score as text: length byte, 253 NaN, 254 +inf, 255 -inf) |
//! | 4 | hash | count, (field, value) |
//! | 5 | zset | count, (member, score as f64 LE) |
//! | 9 | hash | a zipmap in a string |
//! | 10 | list | a ziplist in a string |
//! | 11 | set | an intset in a string |
//! | 12 | zset | a ziplist of member, score in a string |
//! | 13 | hash | a ziplist of field, value in a string |
//! | 14 | list | count, ziplists (quicklist) |
//! | 16 | hash | a listpack of field, value in a string |
//! | 17 | zset | a listpack of member, score in a string |
//! | 18 | list | count, (container 1 = one plain element / 2 = a listpack) (quicklist 2) |
//!
//! | 15 | stream | listpack nodes, counters, groups (Redis 5 to 6.2; see `stream.rs`) |
//! | 19 | stream | the same with 7.0's counters (first ID, max deleted ID, entries added, groups' entries read) |
//!
//! [`dump`] writes a stream as type 19, as Redis 7.0 does. Types 6 and 7 (module values) give "Bad data format", as
//! on a Redis without the module. Redis 7.0 has no listpack-encoded set
//! (that is type 20, Redis 7.2).
//!
//! Each check is the deep one of `sanitize-dump-payload yes`: counts,
//! lengths and offsets inside the payload, listpack/ziplist/intset/zipmap
//! structure, no duplicate set members, hash fields or zset members, no
//! NaN score, no empty collection. Nothing read from the payload is
//! trusted for an allocation: a count only drives a loop that consumes
//! input, and a decompressed length is checked against what its
//! compressed bytes can possibly produce.
//!
//! [`dump`] writes what Redis 7.0 itself writes for a freshly built value
//! of that size: integers that fit in 32 bits as integers, strings over 20
//! bytes LZF-compressed when that saves at least 4 bytes, lists as
//! quicklist-2 nodes filled as `RPUSH` fills them, sets of at most 512
//! canonical integers as intsets, hashes (at most 512 pairs of at most 64
//! bytes each) and sorted sets (at most 128 members of at most 64 bytes)
//! as listpacks, larger ones as plain sets, hashes and type-5 sorted sets.
//! The thresholds are Redis's configuration ([`DumpOptions`]). For values
//! whose Redis encoding does not depend on hash order (strings, lists,
//! intsets, sorted sets, listpack hashes) and with compression off, the
//! bytes equal Redis's `DUMP` of the same value (a listpack hash is
//! written in field order, Redis's in insertion order: equal when the
//! fields were inserted in order). The LZF compressor is this module's
//! own, so compressed bytes differ from Redis's; both decompress alike.
//!
//! # Fidelity notes
//!
//! * As in Redis, the object is read from the whole payload, footer
//!   included, and bytes left after the object are ignored: a truncated
//!   object can read its last bytes from the footer, exactly as Redis does.
//! * Score texts are read as Redis's C library reads them (see
//!   `strtod.rs`): type-3 scores with glibc's `sscanf("%lg")` (unreadable:
//!   "Bad data format"), listpack/ziplist scores with `strtod` on at most
//!   127 bytes (unreadable: 0). A listpack score text that reads as NaN is
//!   refused here (a sorted set here cannot hold NaN); Redis accepts it.
//! * A listpack or ziplist entry whose 32-bit length wraps around in
//!   Redis's arithmetic, and a zipmap length written in 5 bytes although it
//!   is below 254, are refused here; Redis validates them and then reads
//!   memory it should not.
//! * A score of -0 becomes 0 (xlane's [`Score`] has no negative zero).
//! * The order of a listpack sorted set is recomputed from the scores; a
//!   (hostile) payload whose listpack is out of order is listed in order
//!   here and in listpack order by Redis.
//!
//! # API by command
//!
//! * `DUMP key`: [`dump`] (Redis's defaults) or [`dump_with`]
//!   ([`DumpOptions`]: `hash-max-listpack-*`, `zset-max-listpack-*`,
//!   `set-max-intset-entries`, `list-max-listpack-size`, `rdbcompression`);
//!   a missing key replies nil.
//! * `RESTORE key ttl serialized-value [REPLACE] [ABSTTL] [IDLETIME s]
//!   [FREQ f]`, in Redis's order of checks:
//!   1. [`parse_restore_options`] on the arguments after the payload;
//!   2. without `REPLACE`, an existing key: [`RdbError::BusyKey`];
//!   3. [`parse_restore_ttl`];
//!   4. [`restore`] (which runs [`verify`], then decodes);
//!   5. [`restore_expiry`]: the key's absolute expiry, or
//!      [`RestoreExpiry::AlreadyExpired`]: then the old key is deleted if
//!      `REPLACE` (a `del` event) and nothing is stored; the reply is `OK`
//!      either way.
//! * The pieces: [`encode_object`] / [`load_object`] (type byte and object
//!   only), [`crc64`], [`verify`].

mod legacy;
mod listpack;
mod lzf;
mod stream;
mod strtod;

use crate::value::{fmt_score, Score, Value, ZSet};
use imbl::{OrdMap, OrdSet, Vector};

/// The RDB version Redis 7.0 writes into a payload, and the greatest it
/// accepts.
pub const RDB_VERSION: u16 = 10;

/// RDB object type: string.
pub const TYPE_STRING: u8 = 0;
/// RDB object type: list as a linked list of strings (old).
pub const TYPE_LIST: u8 = 1;
/// RDB object type: set of strings.
pub const TYPE_SET: u8 = 2;
/// RDB object type: sorted set with scores as text (old).
pub const TYPE_ZSET: u8 = 3;
/// RDB object type: hash of (field, value) strings.
pub const TYPE_HASH: u8 = 4;
/// RDB object type: sorted set with binary scores.
pub const TYPE_ZSET_2: u8 = 5;
/// RDB object type: module value (version 1).
pub const TYPE_MODULE: u8 = 6;
/// RDB object type: module value (version 2).
pub const TYPE_MODULE_2: u8 = 7;
/// RDB object type: hash as a zipmap (Redis < 2.6).
pub const TYPE_HASH_ZIPMAP: u8 = 9;
/// RDB object type: list as one ziplist (Redis < 3.2).
pub const TYPE_LIST_ZIPLIST: u8 = 10;
/// RDB object type: set as an intset.
pub const TYPE_SET_INTSET: u8 = 11;
/// RDB object type: sorted set as a ziplist (Redis < 7).
pub const TYPE_ZSET_ZIPLIST: u8 = 12;
/// RDB object type: hash as a ziplist (Redis < 7).
pub const TYPE_HASH_ZIPLIST: u8 = 13;
/// RDB object type: list as a quicklist of ziplists (Redis 3.2 to 6.2).
pub const TYPE_LIST_QUICKLIST: u8 = 14;
/// RDB object type: stream (Redis 5 to 6.2).
pub const TYPE_STREAM_LISTPACKS: u8 = 15;
/// RDB object type: hash as a listpack.
pub const TYPE_HASH_LISTPACK: u8 = 16;
/// RDB object type: sorted set as a listpack.
pub const TYPE_ZSET_LISTPACK: u8 = 17;
/// RDB object type: list as a quicklist of listpacks and plain nodes.
pub const TYPE_LIST_QUICKLIST_2: u8 = 18;
/// RDB object type: stream (Redis 7.0).
pub const TYPE_STREAM_LISTPACKS_2: u8 = 19;

/// Quicklist-2 node holding one element as is.
const CONTAINER_PLAIN: u64 = 1;
/// Quicklist-2 node holding a listpack.
const CONTAINER_PACKED: u64 = 2;
/// A list element this long gets a plain node of its own (Redis's
/// `packed_threshold`).
const PACKED_THRESHOLD: usize = 1 << 30;
/// Listpack byte limits of `list-max-listpack-size` -1 .. -5.
const LIST_SIZE_LEVELS: [usize; 5] = [4096, 8192, 16384, 32768, 65536];
/// A list node limited by count stays under this many bytes.
const LIST_SIZE_SAFETY: usize = 8192;
/// Redis never lets a listpack pass 1 GiB.
const LISTPACK_MAX_SAFETY: usize = 1 << 30;

/// Errors of `DUMP`/`RESTORE`, with Redis's reply texts.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RdbError {
    /// Shorter than its footer, a version above [`RDB_VERSION`], or a
    /// CRC-64 that does not match.
    #[error("ERR DUMP payload version or checksum are wrong")]
    VersionOrChecksum,
    /// The object does not decode (the reason is for logs and tests; the
    /// reply is Redis's).
    #[error("ERR Bad data format")]
    BadFormat(&'static str),
    /// An unknown `RESTORE` option or one missing its argument.
    #[error("ERR syntax error")]
    Syntax,
    /// A TTL, `IDLETIME` or `FREQ` that is not an integer.
    #[error("ERR value is not an integer or out of range")]
    NotAnInteger,
    /// `IDLETIME` below 0.
    #[error("ERR Invalid IDLETIME value, must be >= 0")]
    InvalidIdleTime,
    /// `FREQ` outside 0..=255.
    #[error("ERR Invalid FREQ value, must be >= 0 and <= 255")]
    InvalidFreq,
    /// A TTL below 0.
    #[error("ERR Invalid TTL value, must be >= 0")]
    InvalidTtl,
    /// `RESTORE` without `REPLACE` onto an existing key.
    #[error("BUSYKEY Target key name already exists.")]
    BusyKey,
}

fn bad(why: &'static str) -> RdbError {
    RdbError::BadFormat(why)
}

/// One element of a listpack or ziplist: a string or an integer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Entry<'a> {
    Str(&'a [u8]),
    Int(i64),
}

impl Entry<'_> {
    /// The element as Redis hands it out (an integer as its decimal text).
    fn to_bytes(self) -> Vec<u8> {
        match self {
            Entry::Str(s) => s.to_vec(),
            Entry::Int(i) => i.to_string().into_bytes(),
        }
    }
}

/// Redis's `string2ll`: the integer `s` spells exactly (no sign but `-`,
/// no leading zero, no space, at most 20 bytes), or `None`.
fn string2ll(s: &[u8]) -> Option<i64> {
    if s.is_empty() || s.len() > 20 {
        return None;
    }
    if s == b"0" {
        return Some(0);
    }
    let (neg, digits) = match s.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, s),
    };
    match digits.first() {
        Some(b'1'..=b'9') => {}
        _ => return None,
    }
    let mut v: u64 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
    }
    if neg {
        if v > 1 << 63 {
            return None;
        }
        Some((v as i64).wrapping_neg())
    } else {
        i64::try_from(v).ok()
    }
}

/// Redis's `double2ll`: the integer a score equals, if it is one and lies
/// within ±2^62 (then Redis stores it in a listpack as an integer).
fn double2ll(d: f64) -> Option<i64> {
    let lim = (i64::MAX / 2) as f64;
    if d.is_nan() || d < -lim || d > lim {
        return None;
    }
    let ll = d as i64;
    (ll as f64 == d).then_some(ll)
}

// ---------------------------------------------------------------------
// The footer.

/// Redis's CRC-64 (Jones polynomial, reflected, initial value 0) of
/// `data`.
pub fn crc64(data: &[u8]) -> u64 {
    const CRC: crc::Crc<u64> = crc::Crc::<u64>::new(&crc::CRC_64_REDIS);
    CRC.checksum(data)
}

/// `RESTORE`'s first check (Redis's `verifyDumpPayload`): at least the
/// 10-byte footer, a version at most [`RDB_VERSION`], and the CRC-64 of
/// all but the last 8 bytes equal to those bytes. Returns the version.
pub fn verify(payload: &[u8]) -> Result<u16, RdbError> {
    let n = payload.len();
    if n < 10 {
        return Err(RdbError::VersionOrChecksum);
    }
    let version = u16::from_le_bytes([payload[n - 10], payload[n - 9]]);
    if version > RDB_VERSION {
        return Err(RdbError::VersionOrChecksum);
    }
    let mut stored = [0u8; 8];
    stored.copy_from_slice(&payload[n - 8..]);
    if crc64(&payload[..n - 8]) != u64::from_le_bytes(stored) {
        return Err(RdbError::VersionOrChecksum);
    }
    Ok(version)
}

// ---------------------------------------------------------------------
// RESTORE.

/// `RESTORE`: the value in a `DUMP` payload (from Redis 7.0 or older, or
/// from [`dump`]), after [`verify`]; "Bad data format" for anything Redis
/// 7.0 with `sanitize-dump-payload yes` refuses.
pub fn restore(payload: &[u8]) -> Result<Value, RdbError> {
    verify(payload)?;
    // Redis reads the object from the whole buffer, footer included.
    load_object(payload).map(|(v, _)| v)
}

/// Decodes one RDB object (type byte and object) at the start of `buf`;
/// returns the value and the number of bytes it took. No footer check:
/// that is [`verify`]'s.
pub fn load_object(buf: &[u8]) -> Result<(Value, usize), RdbError> {
    let mut r = Reader { b: buf, pos: 0 };
    let t = r.u8()?;
    let v = match t {
        TYPE_STRING => Value::Str(r.string()?),
        TYPE_LIST => {
            let n = r.len()?;
            let mut list = Vector::new();
            for _ in 0..n {
                list.push_back(r.string()?);
            }
            non_empty_list(list)?
        }
        TYPE_SET => {
            let n = r.len()?;
            let mut set = OrdSet::new();
            for _ in 0..n {
                if set.insert(r.string()?).is_some() {
                    return Err(bad("Duplicate set members detected"));
                }
            }
            if set.is_empty() {
                return Err(bad("empty key"));
            }
            Value::Set(set)
        }
        TYPE_ZSET | TYPE_ZSET_2 => {
            let n = r.len()?;
            let mut z = ZSet::default();
            for _ in 0..n {
                let member = r.string()?;
                let score = if t == TYPE_ZSET {
                    r.text_double()?
                } else {
                    r.binary_double()?
                };
                let score = Score::new(score).ok_or(bad("Zset with NAN score detected"))?;
                if z.scores.contains_key(&member) {
                    return Err(bad("Duplicate zset fields detected"));
                }
                z.insert(member, score);
            }
            if z.is_empty() {
                return Err(bad("empty key"));
            }
            Value::ZSet(z)
        }
        TYPE_HASH => {
            let n = r.len()?;
            let mut h = OrdMap::new();
            for _ in 0..n {
                let field = r.string()?;
                let value = r.string()?;
                if h.insert(field, value).is_some() {
                    return Err(bad("Duplicate hash fields detected"));
                }
            }
            if h.is_empty() {
                return Err(bad("empty key"));
            }
            Value::Hash(h)
        }
        TYPE_LIST_QUICKLIST | TYPE_LIST_QUICKLIST_2 => {
            let v2 = t == TYPE_LIST_QUICKLIST_2;
            let nodes = r.len()?;
            let mut list = Vector::new();
            for _ in 0..nodes {
                let container = if v2 { r.len()? } else { CONTAINER_PACKED };
                if container != CONTAINER_PLAIN && container != CONTAINER_PACKED {
                    return Err(bad("Quicklist integrity check failed."));
                }
                let data = r.string()?;
                if data.is_empty() {
                    return Err(bad("empty quicklist node"));
                }
                if container == CONTAINER_PLAIN {
                    list.push_back(data);
                    continue;
                }
                let entries = if v2 {
                    listpack::parse(&data).ok_or(bad("Listpack integrity check failed."))?
                } else {
                    legacy::ziplist(&data).ok_or(bad("Ziplist integrity check failed."))?
                };
                list.extend(entries.into_iter().map(Entry::to_bytes));
            }
            non_empty_list(list)?
        }
        TYPE_HASH_ZIPMAP => {
            let blob = r.string()?;
            let pairs = legacy::zipmap(&blob).ok_or(bad("Zipmap integrity check failed."))?;
            let mut h = OrdMap::new();
            for (f, v) in pairs {
                if h.insert(f.to_vec(), v.to_vec()).is_some() {
                    return Err(bad("Hash zipmap with dup elements"));
                }
            }
            Value::Hash(h)
        }
        TYPE_LIST_ZIPLIST => {
            let blob = r.string()?;
            let entries =
                legacy::ziplist(&blob).ok_or(bad("List ziplist integrity check failed."))?;
            non_empty_list(entries.into_iter().map(Entry::to_bytes).collect())?
        }
        TYPE_SET_INTSET => {
            let blob = r.string()?;
            let members = legacy::intset(&blob).ok_or(bad("Intset integrity check failed."))?;
            Value::Set(members.iter().map(|m| m.to_string().into_bytes()).collect())
        }
        TYPE_ZSET_ZIPLIST | TYPE_ZSET_LISTPACK => {
            let blob = r.string()?;
            let entries = if t == TYPE_ZSET_ZIPLIST {
                legacy::ziplist(&blob)
            } else {
                listpack::parse(&blob)
            };
            let entries = entries.ok_or(bad("Zset listpack integrity check failed."))?;
            zset_from_pairs(&entries)?
        }
        TYPE_HASH_ZIPLIST | TYPE_HASH_LISTPACK => {
            let blob = r.string()?;
            let entries = if t == TYPE_HASH_ZIPLIST {
                legacy::ziplist(&blob)
            } else {
                listpack::parse(&blob)
            };
            let entries = entries.ok_or(bad("Hash listpack integrity check failed."))?;
            hash_from_pairs(&entries)?
        }
        TYPE_STREAM_LISTPACKS | TYPE_STREAM_LISTPACKS_2 => {
            stream::load(&mut r, t == TYPE_STREAM_LISTPACKS_2)?
        }
        TYPE_MODULE | TYPE_MODULE_2 => return Err(bad("module value")),
        _ => return Err(bad("unknown RDB object type")),
    };
    Ok((v, r.pos))
}

fn non_empty_list(list: Vector<Vec<u8>>) -> Result<Value, RdbError> {
    if list.is_empty() {
        return Err(bad("empty key"));
    }
    Ok(Value::List(list))
}

/// A hash from a listpack/ziplist of field, value, ...: an even number of
/// entries, no field twice, not empty.
fn hash_from_pairs(entries: &[Entry<'_>]) -> Result<Value, RdbError> {
    if entries.len() % 2 != 0 {
        return Err(bad("odd number of hash entries"));
    }
    let mut h = OrdMap::new();
    for pair in entries.chunks_exact(2) {
        if h.insert(pair[0].to_bytes(), pair[1].to_bytes()).is_some() {
            return Err(bad("Hash with dup elements"));
        }
    }
    if h.is_empty() {
        return Err(bad("empty key"));
    }
    Ok(Value::Hash(h))
}

/// A sorted set from a listpack/ziplist of member, score, ...: an even
/// number of entries, no member twice, not empty; a score is an integer
/// entry or text read as Redis's `zzlStrtod` reads it (C `strtod` of at
/// most 127 bytes; no number reads as 0).
fn zset_from_pairs(entries: &[Entry<'_>]) -> Result<Value, RdbError> {
    if entries.len() % 2 != 0 {
        return Err(bad("odd number of zset entries"));
    }
    let mut z = ZSet::default();
    for pair in entries.chunks_exact(2) {
        let member = pair[0].to_bytes();
        if z.scores.contains_key(&member) {
            return Err(bad("Zset with dup elements"));
        }
        let score = match pair[1] {
            Entry::Int(i) => i as f64,
            Entry::Str(s) => {
                let s = &s[..s.len().min(127)];
                strtod::strtod(s).map_or(0.0, |(v, _)| v)
            }
        };
        z.insert(member, Score::new(score).ok_or(bad("NaN score"))?);
    }
    if z.is_empty() {
        return Err(bad("empty key"));
    }
    Ok(Value::ZSet(z))
}

/// A cursor over the payload; every read is bounds-checked.
struct Reader<'a> {
    b: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn u8(&mut self) -> Result<u8, RdbError> {
        let v = *self.b.get(self.pos).ok_or(bad("short read"))?;
        self.pos += 1;
        Ok(v)
    }

    fn take(&mut self, n: u64) -> Result<&'a [u8], RdbError> {
        let left = (self.b.len() - self.pos) as u64;
        if n > left {
            return Err(bad("short read"));
        }
        let s = &self.b[self.pos..self.pos + n as usize];
        self.pos += n as usize;
        Ok(s)
    }

    /// Redis's `rdbLoadLenByRef`: (length, "specially encoded" flag).
    fn len_enc(&mut self) -> Result<(u64, bool), RdbError> {
        let b = self.u8()?;
        match b >> 6 {
            0 => Ok((u64::from(b & 0x3f), false)),
            1 => Ok(((u64::from(b & 0x3f) << 8) | u64::from(self.u8()?), false)),
            3 => Ok((u64::from(b & 0x3f), true)),
            _ => match b {
                0x80 => {
                    let s = self.take(4)?;
                    Ok((
                        u64::from(u32::from_be_bytes([s[0], s[1], s[2], s[3]])),
                        false,
                    ))
                }
                0x81 => {
                    let mut a = [0u8; 8];
                    a.copy_from_slice(self.take(8)?);
                    Ok((u64::from_be_bytes(a), false))
                }
                _ => Err(bad("Unknown length encoding")),
            },
        }
    }

    /// Redis's `rdbLoadLen(rdb, NULL)`: the length, the "encoded" flag
    /// ignored as Redis ignores it for counts.
    fn len(&mut self) -> Result<u64, RdbError> {
        Ok(self.len_enc()?.0)
    }

    /// Redis's `rdbGenericLoadStringObject`.
    fn string(&mut self) -> Result<Vec<u8>, RdbError> {
        let (len, encoded) = self.len_enc()?;
        if !encoded {
            return Ok(self.take(len)?.to_vec());
        }
        let int = |v: i64| Ok(v.to_string().into_bytes());
        match len {
            0 => int(i64::from(self.u8()? as i8)),
            1 => {
                let s = self.take(2)?;
                int(i64::from(i16::from_le_bytes([s[0], s[1]])))
            }
            2 => {
                let s = self.take(4)?;
                int(i64::from(i32::from_le_bytes([s[0], s[1], s[2], s[3]])))
            }
            3 => {
                let clen = self.len()?;
                let len = self.len()?;
                let z = self.take(clen)?;
                lzf::decompress(z, len).ok_or(bad("Invalid LZF compressed string"))
            }
            _ => Err(bad("Unknown RDB string encoding type")),
        }
    }

    /// Redis's `rdbLoadDoubleValue`: a length byte (253 NaN, 254 +inf, 255
    /// -inf) and that much text, read as glibc's `sscanf("%lg")` reads it.
    fn text_double(&mut self) -> Result<f64, RdbError> {
        match self.u8()? {
            255 => Ok(f64::NEG_INFINITY),
            254 => Ok(f64::INFINITY),
            253 => Ok(f64::NAN),
            n => {
                let text = self.take(u64::from(n))?;
                strtod::scanf_double(text).ok_or(bad("unreadable score"))
            }
        }
    }

    /// Redis's `rdbLoadBinaryDoubleValue`: an f64, little endian.
    fn binary_double(&mut self) -> Result<f64, RdbError> {
        let mut a = [0u8; 8];
        a.copy_from_slice(self.take(8)?);
        Ok(f64::from_le_bytes(a))
    }
}

// ---------------------------------------------------------------------
// DUMP.

/// The Redis configuration that decides how [`dump_with`] encodes a value
/// (what Redis 7.0 would hold for it); [`Default`] is Redis's defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DumpOptions {
    /// `hash-max-listpack-entries` (512): more pairs make a plain hash.
    pub hash_max_listpack_entries: usize,
    /// `hash-max-listpack-value` (64): a longer field or value makes a
    /// plain hash.
    pub hash_max_listpack_value: usize,
    /// `set-max-intset-entries` (512): more members make a plain set.
    pub set_max_intset_entries: usize,
    /// `zset-max-listpack-entries` (128): more members make a type-5
    /// sorted set.
    pub zset_max_listpack_entries: usize,
    /// `zset-max-listpack-value` (64): a longer member makes a type-5
    /// sorted set.
    pub zset_max_listpack_value: usize,
    /// `list-max-listpack-size` (-2): a list node's limit, in entries when
    /// positive, -1 ..= -5 for 4, 8, 16, 32, 64 KiB.
    pub list_max_listpack_size: i64,
    /// `rdbcompression` (yes): LZF-compress strings over 20 bytes.
    pub rdbcompression: bool,
}

impl Default for DumpOptions {
    fn default() -> Self {
        DumpOptions {
            hash_max_listpack_entries: 512,
            hash_max_listpack_value: 64,
            set_max_intset_entries: 512,
            zset_max_listpack_entries: 128,
            zset_max_listpack_value: 64,
            list_max_listpack_size: -2,
            rdbcompression: true,
        }
    }
}

/// `DUMP` with Redis's default configuration: the payload of `v`.
pub fn dump(v: &Value) -> Vec<u8> {
    dump_with(v, &DumpOptions::default())
}

/// `DUMP` under the configuration `o`: type byte, object, version 10,
/// CRC-64.
pub fn dump_with(v: &Value, o: &DumpOptions) -> Vec<u8> {
    let mut out = Vec::new();
    encode_object(v, o, &mut out);
    out.extend_from_slice(&RDB_VERSION.to_le_bytes());
    let crc = crc64(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// Appends `v`'s RDB type byte and object (no footer) to `out`, in the
/// encoding Redis 7.0 would use for it under `o`. An empty collection
/// (which is never a value) is written with a count of 0, which
/// `RESTORE` refuses.
pub fn encode_object(v: &Value, o: &DumpOptions, out: &mut Vec<u8>) {
    let z = o.rdbcompression;
    match v {
        Value::Str(s) => {
            out.push(TYPE_STRING);
            save_string(out, s, z);
        }
        Value::List(l) => {
            out.push(TYPE_LIST_QUICKLIST_2);
            let nodes = list_nodes(l, o.list_max_listpack_size);
            save_len(out, nodes.len() as u64);
            for node in &nodes {
                match node {
                    Node::Plain(e) => {
                        save_len(out, CONTAINER_PLAIN);
                        save_string(out, e, z);
                    }
                    Node::Packed(lp) => {
                        save_len(out, CONTAINER_PACKED);
                        save_string(out, lp, z);
                    }
                }
            }
        }
        Value::Set(s) => {
            let ints: Option<Vec<i64>> = if s.len() <= o.set_max_intset_entries {
                s.iter().map(|m| string2ll(m)).collect()
            } else {
                None
            };
            match ints {
                Some(mut ints) if !ints.is_empty() => {
                    ints.sort_unstable();
                    out.push(TYPE_SET_INTSET);
                    save_string(out, &legacy::write_intset(&ints), z);
                }
                _ => {
                    out.push(TYPE_SET);
                    save_len(out, s.len() as u64);
                    for m in s {
                        save_string(out, m, z);
                    }
                }
            }
        }
        Value::ZSet(zs) => {
            let total: usize = zs.order.iter().map(|(_, m)| m.len() + 16).sum();
            let listpack = !zs.is_empty()
                && zs.len() <= o.zset_max_listpack_entries
                && zs
                    .order
                    .iter()
                    .all(|(_, m)| m.len() <= o.zset_max_listpack_value)
                && total <= LISTPACK_MAX_SAFETY;
            if listpack {
                let mut w = listpack::Writer::new();
                for (score, m) in &zs.order {
                    w.append(m);
                    let s = score.get();
                    match double2ll(s) {
                        Some(i) => w.append_int(i),
                        None => w.append(fmt_score(s).as_bytes()),
                    }
                }
                out.push(TYPE_ZSET_LISTPACK);
                save_string(out, &w.finish(), z);
            } else {
                out.push(TYPE_ZSET_2);
                save_len(out, zs.len() as u64);
                // Highest score first, as Redis walks its skiplist.
                for (score, m) in zs.order.iter().rev() {
                    save_string(out, m, z);
                    out.extend_from_slice(&score.get().to_le_bytes());
                }
            }
        }
        Value::Stream(s) => {
            out.push(TYPE_STREAM_LISTPACKS_2);
            stream::encode(s, z, out);
        }
        Value::Hash(h) => {
            let total: usize = h.iter().map(|(f, v)| f.len() + v.len() + 22).sum();
            let listpack = !h.is_empty()
                && h.len() <= o.hash_max_listpack_entries
                && h.iter().all(|(f, v)| {
                    f.len() <= o.hash_max_listpack_value && v.len() <= o.hash_max_listpack_value
                })
                && total <= LISTPACK_MAX_SAFETY;
            if listpack {
                let mut w = listpack::Writer::new();
                for (f, v) in h {
                    w.append(f);
                    w.append(v);
                }
                out.push(TYPE_HASH_LISTPACK);
                save_string(out, &w.finish(), z);
            } else {
                out.push(TYPE_HASH);
                save_len(out, h.len() as u64);
                for (f, v) in h {
                    save_string(out, f, z);
                    save_string(out, v, z);
                }
            }
        }
    }
}

/// Redis's `rdbSaveLen`.
fn save_len(out: &mut Vec<u8>, n: u64) {
    if n < 1 << 6 {
        out.push(n as u8);
    } else if n < 1 << 14 {
        out.push(0x40 | (n >> 8) as u8);
        out.push(n as u8);
    } else if let Ok(n32) = u32::try_from(n) {
        out.push(0x80);
        out.extend_from_slice(&n32.to_be_bytes());
    } else {
        out.push(0x81);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

/// Redis's `rdbSaveRawString`: a canonical integer of at most 11 bytes
/// that fits in 32 bits as an 8/16/32-bit integer; else, with compression
/// on and over 20 bytes, LZF when that saves at least 4 bytes; else length
/// and bytes.
fn save_string(out: &mut Vec<u8>, s: &[u8], compress: bool) {
    if s.len() <= 11 {
        if let Some(v) = string2ll(s) {
            if let Ok(b) = i8::try_from(v) {
                out.push(0xc0);
                out.push(b as u8);
                return;
            } else if let Ok(h) = i16::try_from(v) {
                out.push(0xc1);
                out.extend_from_slice(&h.to_le_bytes());
                return;
            } else if let Ok(w) = i32::try_from(v) {
                out.push(0xc2);
                out.extend_from_slice(&w.to_le_bytes());
                return;
            }
        }
    }
    if compress && s.len() > 20 {
        if let Some(c) = lzf::compress(s, s.len() - 4) {
            out.push(0xc3);
            save_len(out, c.len() as u64);
            save_len(out, s.len() as u64);
            out.extend_from_slice(&c);
            return;
        }
    }
    save_len(out, s.len() as u64);
    out.extend_from_slice(s);
}

/// A quicklist node as written to the payload.
enum Node<'a> {
    Plain(&'a [u8]),
    Packed(Vec<u8>),
}

/// Whether Redis's `RPUSH` would add an element of `sz` bytes to a tail
/// node of `node_bytes` bytes and `count` entries, under fill `fill`
/// (Redis's `_quicklistNodeAllowInsert`).
fn node_allows(node_bytes: usize, count: usize, fill: i64, sz: usize) -> bool {
    let new_sz = node_bytes + sz + 8;
    if fill < 0 {
        let level = LIST_SIZE_LEVELS[((-fill - 1) as usize).min(4)];
        return new_sz <= level;
    }
    new_sz <= LIST_SIZE_SAFETY && (count as i64) < fill
}

/// The nodes Redis's quicklist holds after `RPUSH`ing `items` one by one.
fn list_nodes(items: &Vector<Vec<u8>>, fill: i64) -> Vec<Node<'_>> {
    let fill = fill.clamp(-5, i64::from(i16::MAX));
    let mut nodes = Vec::new();
    let mut tail: Option<(listpack::Writer, usize)> = None;
    for e in items {
        if e.len() >= PACKED_THRESHOLD {
            if let Some((w, _)) = tail.take() {
                nodes.push(Node::Packed(w.finish()));
            }
            nodes.push(Node::Plain(e));
            continue;
        }
        let fits = tail
            .as_ref()
            .is_some_and(|(w, n)| node_allows(w.bytes(), *n, fill, e.len()));
        if !fits {
            if let Some((w, _)) = tail.take() {
                nodes.push(Node::Packed(w.finish()));
            }
        }
        let (w, n) = tail.get_or_insert_with(|| (listpack::Writer::new(), 0));
        w.append(e);
        *n += 1;
    }
    if let Some((w, _)) = tail {
        nodes.push(Node::Packed(w.finish()));
    }
    nodes
}

// ---------------------------------------------------------------------
// RESTORE's arguments.

/// `RESTORE`'s options after the payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RestoreOptions {
    /// `REPLACE`: overwrite an existing key.
    pub replace: bool,
    /// `ABSTTL`: the TTL is an absolute Unix time in milliseconds.
    pub absttl: bool,
    /// `IDLETIME seconds` (for LRU eviction).
    pub idletime: Option<i64>,
    /// `FREQ frequency` (for LFU eviction).
    pub freq: Option<u8>,
}

/// Parses `RESTORE`'s options (the arguments after the payload), case
/// insensitive, as Redis does: `IDLETIME` and `FREQ` exclude each other
/// (the second is a syntax error), a missing argument is a syntax error.
pub fn parse_restore_options(opts: &[&[u8]]) -> Result<RestoreOptions, RdbError> {
    let mut o = RestoreOptions::default();
    let mut j = 0;
    while j < opts.len() {
        let a = opts[j];
        let more = opts.get(j + 1);
        if a.eq_ignore_ascii_case(b"replace") {
            o.replace = true;
        } else if a.eq_ignore_ascii_case(b"absttl") {
            o.absttl = true;
        } else if let (true, Some(arg), None) = (a.eq_ignore_ascii_case(b"idletime"), more, o.freq)
        {
            let v = string2ll(arg).ok_or(RdbError::NotAnInteger)?;
            if v < 0 {
                return Err(RdbError::InvalidIdleTime);
            }
            o.idletime = Some(v);
            j += 1;
        } else if let (true, Some(arg), None) = (a.eq_ignore_ascii_case(b"freq"), more, o.idletime)
        {
            let v = string2ll(arg).ok_or(RdbError::NotAnInteger)?;
            o.freq = Some(u8::try_from(v).map_err(|_| RdbError::InvalidFreq)?);
            j += 1;
        } else {
            return Err(RdbError::Syntax);
        }
        j += 1;
    }
    Ok(o)
}

/// Parses `RESTORE`'s TTL argument (milliseconds, 0 for none).
pub fn parse_restore_ttl(ttl: &[u8]) -> Result<i64, RdbError> {
    let v = string2ll(ttl).ok_or(RdbError::NotAnInteger)?;
    if v < 0 {
        return Err(RdbError::InvalidTtl);
    }
    Ok(v)
}

/// What `RESTORE` does with the key's time to live.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RestoreExpiry {
    /// TTL 0: the key does not expire.
    Persist,
    /// The key expires at this Unix time in milliseconds (Redis
    /// propagates the command with it and `ABSTTL`).
    At(i64),
    /// The expiry is not in the future: nothing is stored (an existing key
    /// is deleted when `REPLACE`), and the reply is still `OK`.
    AlreadyExpired,
}

/// The expiry of a restored key: `ttl` from [`parse_restore_ttl`],
/// relative to `now_ms` unless `absttl`.
pub fn restore_expiry(ttl: i64, absttl: bool, now_ms: i64) -> RestoreExpiry {
    if ttl == 0 {
        return RestoreExpiry::Persist;
    }
    let at = if absttl {
        ttl
    } else {
        ttl.wrapping_add(now_ms)
    };
    if at <= now_ms {
        RestoreExpiry::AlreadyExpired
    } else {
        RestoreExpiry::At(at)
    }
}

#[cfg(test)]
mod tests;
