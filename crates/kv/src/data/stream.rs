//! Redis 7.0's stream type: entries by ID, trimming, consumer groups with
//! their pending entries lists (PEL) and consumers, and every operation the
//! `X*` commands need, as pure deterministic functions of the stream, the
//! command's words and the `now_ms` the op carries (the leader's clock):
//! nothing here reads a clock or draws at random.
//!
//! # Layout
//!
//! * [`StreamId`]: an entry ID, Redis's parsing of it (full, ms-only,
//!   `-`/`+`, `(` exclusive bounds, `*` and `ms-*` for `XADD`) and its
//!   error texts.
//! * [`Stream`]: the value. Entries live in a persistent
//!   `imbl::OrdMap` (O(1) clone); beside them the stream keeps a model of
//!   Redis's radix tree of listpack nodes (each node's master ID, live and
//!   deleted counts, master fields and exact listpack byte size), so that
//!   approximate trimming (`MAXLEN ~`, `MINID ~`, which removes whole nodes
//!   only), `XINFO STREAM`'s `radix-tree-keys` and `radix-tree-nodes`
//!   come out as Redis's for the same sequence of commands
//!   ([`StreamConfig`] holds `stream-node-max-entries` and
//!   `stream-node-max-bytes`).
//! * [`Group`], [`Consumer`], [`Nack`]: consumer groups (last delivered
//!   ID, `entries_read`, lag by 7.0's rules), the group PEL and each
//!   consumer's PEL and seen-time (7.0 has no active-time).
//! * Reply types (plain Rust data) with a `to_reply` that builds the RESP
//!   reply Redis 7.0 sends (maps as [`Reply::Map`], which RESP2 writes as
//!   a flat array, as Redis does).
//! * Command layer: for each command a parsed form (`Xadd::parse`, ...)
//!   holding what Redis checks before it looks the key up, and a function
//!   (`xadd`, ...) that takes the key's state ([`Key`] for reads,
//!   [`KeyMut`] for writes) and does the rest in Redis's order, so every
//!   error, including the ones that depend on the key, is Redis's and comes
//!   in Redis's order. Writes report the keyspace events Redis fires
//!   ([`Outcome::events`]) and whether Redis signals the key modified
//!   ([`Outcome::touched`]).
//! * DUMP / RESTORE support: [`Stream::nodes`] lists each listpack node
//!   as Redis lays it out (deleted entries included, as they stay in the
//!   listpack), [`Stream::restore_node`], [`Stream::restore_meta`] and
//!   [`Stream::restore_group`] rebuild a stream from a payload.
//!
//! # Determinism
//!
//! Every timestamp (delivery times, seen-times, `*` IDs, idle times) comes
//! from the `now_ms` argument. Orders are those of ordered containers:
//! groups and consumers by name bytes (Redis's rax order), PELs by ID.

use crate::resp::{parse_i64_strict, Reply};
use imbl::{OrdMap, OrdSet, Vector};
use std::fmt;
use std::sync::Arc;

// ---------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------

/// An error of a stream command, its `Display` Redis's exact error text
/// (without the leading `-`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StreamError {
    /// `ERR Invalid stream ID specified as stream command argument`.
    #[error("ERR Invalid stream ID specified as stream command argument")]
    InvalidId,
    /// `XADD` with an ID not above the stream's last ID.
    #[error("ERR The ID specified in XADD is equal or smaller than the target stream top item")]
    IdNotGreater,
    /// `XADD` with the ID `0-0`.
    #[error("ERR The ID specified in XADD must be greater than 0-0")]
    IdZero,
    /// `XADD` on a stream whose last ID is the maximum.
    #[error("ERR The stream has exhausted the last possible ID, unable to add more items")]
    Exhausted,
    /// `XADD` whose fields and values exceed 1 GiB, and (as Redis 7.0.15
    /// replies, from a stale `errno`) `XADD ms-*` when `ms` is the last
    /// ID's and its sequence is the maximum.
    #[error("ERR Elements are too large to be stored")]
    TooLarge,
    /// An exclusive start bound `(` at the maximum ID.
    #[error("ERR invalid start ID for the interval")]
    InvalidStart,
    /// An exclusive end bound `(` at `0-0`.
    #[error("ERR invalid end ID for the interval")]
    InvalidEnd,
    /// `ERR syntax error`.
    #[error("ERR syntax error")]
    Syntax,
    /// `ERR value is not an integer or out of range`.
    #[error("ERR value is not an integer or out of range")]
    NotInteger,
    /// `WRONGTYPE ...`.
    #[error("WRONGTYPE Operation against a key holding the wrong kind of value")]
    WrongType,
    /// `ERR no such key` (`XINFO`, `XSETID`).
    #[error("ERR no such key")]
    NoSuchKey,
    /// `ERR wrong number of arguments for '<name>' command` (the name as
    /// Redis's command table has it: `xadd`, `xgroup|create`...).
    #[error("ERR wrong number of arguments for '{0}' command")]
    Arity(&'static str),
    /// `ERR unknown subcommand '<sub>'. Try <CMD> HELP.` (the dispatcher's).
    #[error("ERR unknown subcommand '{sub}'. Try {cmd} HELP.")]
    UnknownSubcommand {
        /// The subcommand as given (C string, at most 128 bytes).
        sub: String,
        /// `XGROUP` or `XINFO`.
        cmd: &'static str,
    },
    /// `ERR unknown subcommand or wrong number of arguments for '<sub>'.
    /// Try <CMD> HELP.` (the command's own check).
    #[error("ERR unknown subcommand or wrong number of arguments for '{sub}'. Try {cmd} HELP.")]
    SubcommandSyntax {
        /// The subcommand as given (C string, at most 128 bytes).
        sub: String,
        /// `XGROUP` or `XINFO`.
        cmd: &'static str,
    },
    /// `NOGROUP No such key '<key>' or consumer group '<group>'` (XPENDING,
    /// XCLAIM, XAUTOCLAIM), with ` in XREADGROUP with GROUP option`
    /// appended for XREADGROUP.
    #[error("NOGROUP No such key '{key}' or consumer group '{group}'{suffix}")]
    NoGroup {
        /// The key name (as C text).
        key: String,
        /// The group name (as C text).
        group: String,
        /// `""`, or `" in XREADGROUP with GROUP option"`.
        suffix: &'static str,
    },
    /// `NOGROUP No such consumer group '<group>' for key name '<key>'`
    /// (XGROUP, XINFO CONSUMERS).
    #[error("NOGROUP No such consumer group '{group}' for key name '{key}'")]
    NoGroupForKey {
        /// The group name (as C text).
        group: String,
        /// The key name (as C text).
        key: String,
    },
    /// Any other fixed Redis error text (full text, code included).
    #[error("{0}")]
    Msg(&'static str),
    /// `ERR Unrecognized XCLAIM option '<opt>'`.
    #[error("ERR Unrecognized XCLAIM option '{0}'")]
    UnrecognizedXclaimOption(String),
}

impl StreamError {
    /// The error as a RESP error reply.
    pub fn to_reply(&self) -> Reply {
        Reply::err(self.to_string())
    }
}

/// The fixed error texts of [`StreamError::Msg`].
pub mod msg {
    /// XADD/XTRIM with both MAXLEN and MINID.
    pub const MAXLEN_AND_MINID: &str =
        "ERR syntax error, MAXLEN and MINID options at the same time are not compatible";
    /// XADD/XTRIM `MAXLEN` below 0.
    pub const MAXLEN_NEGATIVE: &str = "ERR The MAXLEN argument must be >= 0.";
    /// XADD/XTRIM `LIMIT` below 0.
    pub const LIMIT_NEGATIVE: &str = "ERR The LIMIT argument must be >= 0.";
    /// XADD/XTRIM `LIMIT` without MAXLEN/MINID.
    pub const LIMIT_WITHOUT_STRATEGY: &str =
        "ERR syntax error, LIMIT cannot be used without specifying a trimming strategy";
    /// XTRIM without MAXLEN/MINID.
    pub const XTRIM_WITHOUT_STRATEGY: &str =
        "ERR syntax error, XTRIM must be called with a trimming strategy";
    /// XADD/XTRIM `LIMIT` without `~`.
    pub const LIMIT_WITHOUT_APPROX: &str =
        "ERR syntax error, LIMIT cannot be used without the special ~ option";
    /// XREAD `BLOCK` not an integer.
    pub const TIMEOUT_NOT_INTEGER: &str = "ERR timeout is not an integer or out of range";
    /// XREAD `BLOCK` below 0.
    pub const TIMEOUT_NEGATIVE: &str = "ERR timeout is negative";
    /// XREAD with an odd number of keys and IDs.
    pub const UNBALANCED: &str =
        "ERR Unbalanced XREAD list of streams: for each stream key an ID or '$' must be specified.";
    /// XREAD with GROUP.
    pub const GROUP_IN_XREAD: &str =
        "ERR The GROUP option is only supported by XREADGROUP. You called XREAD instead.";
    /// XREAD with NOACK.
    pub const NOACK_IN_XREAD: &str =
        "ERR The NOACK option is only supported by XREADGROUP. You called XREAD instead.";
    /// XREADGROUP without GROUP.
    pub const MISSING_GROUP: &str = "ERR Missing GROUP option for XREADGROUP";
    /// XREADGROUP with `$`.
    pub const DOLLAR_IN_XREADGROUP: &str = "ERR The $ ID is meaningless in the context of XREADGROUP: you want to read the history of this consumer by specifying a proper ID, or use the > ID to get new messages. The $ ID would just return an empty result set.";
    /// XREAD with `>`.
    pub const GT_IN_XREAD: &str = "ERR The > ID can be specified only when calling XREADGROUP using the GROUP <group> <consumer> option.";
    /// XGROUP `ENTRIESREAD` below -1.
    pub const ENTRIESREAD_NEGATIVE: &str = "ERR value for ENTRIESREAD must be positive or -1";
    /// XGROUP on a missing key (without MKSTREAM).
    pub const XGROUP_NEEDS_KEY: &str = "ERR The XGROUP subcommand requires the key to exist. Note that for CREATE you may want to use the MKSTREAM option to create an empty stream automatically.";
    /// XGROUP CREATE of an existing group.
    pub const BUSYGROUP: &str = "BUSYGROUP Consumer Group name already exists";
    /// XSETID `ENTRIESADDED` below 0.
    pub const ENTRIES_ADDED_NEGATIVE: &str = "ERR entries_added must be positive";
    /// XSETID with an ID below `MAXDELETEDID`.
    pub const XSETID_BELOW_MAXDELETED: &str =
        "ERR The ID specified in XSETID is smaller than the provided max_deleted_entry_id";
    /// XSETID below the last entry.
    pub const XSETID_BELOW_TOP: &str =
        "ERR The ID specified in XSETID is smaller than the target stream top item";
    /// XSETID `ENTRIESADDED` below the length.
    pub const XSETID_ENTRIES_ADDED_SMALL: &str =
        "ERR The entries_added specified in XSETID is smaller than the target stream length";
    /// XCLAIM min-idle-time not an integer.
    pub const XCLAIM_MIN_IDLE: &str = "ERR Invalid min-idle-time argument for XCLAIM";
    /// XCLAIM IDLE not an integer.
    pub const XCLAIM_IDLE: &str = "ERR Invalid IDLE option argument for XCLAIM";
    /// XCLAIM TIME not an integer.
    pub const XCLAIM_TIME: &str = "ERR Invalid TIME option argument for XCLAIM";
    /// XCLAIM RETRYCOUNT not an integer.
    pub const XCLAIM_RETRYCOUNT: &str = "ERR Invalid RETRYCOUNT option argument for XCLAIM";
    /// XAUTOCLAIM min-idle-time not an integer.
    pub const XAUTOCLAIM_MIN_IDLE: &str = "ERR Invalid min-idle-time argument for XAUTOCLAIM";
    /// XAUTOCLAIM COUNT not in 1..=2^59-1.
    pub const XAUTOCLAIM_COUNT: &str = "ERR COUNT must be > 0";
}

/// Text of a client-given word inside an error message, as Redis's `%s`
/// sees it: up to the first NUL byte, at most `max` bytes, `\r`/`\n` as
/// spaces (Redis keeps error replies on one line); invalid UTF-8 replaced.
fn ctext(b: &[u8], max: usize) -> String {
    let b = cstr(b);
    let b = &b[..b.len().min(max)];
    String::from_utf8_lossy(b)
        .chars()
        .map(|c| if c == '\r' || c == '\n' { ' ' } else { c })
        .collect()
}

/// A word as C code sees it: up to its first NUL byte.
fn cstr(b: &[u8]) -> &[u8] {
    match b.iter().position(|&c| c == 0) {
        Some(i) => &b[..i],
        None => b,
    }
}

/// `strcasecmp(word, w) == 0`.
fn is(word: &[u8], w: &str) -> bool {
    cstr(word).eq_ignore_ascii_case(w.as_bytes())
}

/// `strcmp(word, w) == 0`.
fn is_exact(word: &[u8], w: &str) -> bool {
    cstr(word) == w.as_bytes()
}

/// `getLongLongFromObjectOrReply` with Redis's default message.
fn int(b: &[u8]) -> Result<i64, StreamError> {
    parse_i64_strict(b).ok_or(StreamError::NotInteger)
}

/// `getLongLongFromObjectOrReply` with a message of its own.
fn int_or(b: &[u8], m: &'static str) -> Result<i64, StreamError> {
    parse_i64_strict(b).ok_or(StreamError::Msg(m))
}

fn nogroup(key: &[u8], group: &[u8], suffix: &'static str) -> StreamError {
    StreamError::NoGroup {
        key: ctext(key, usize::MAX),
        group: ctext(group, usize::MAX),
        suffix,
    }
}

fn nogroup_for_key(key: &[u8], group: &[u8]) -> StreamError {
    StreamError::NoGroupForKey {
        group: ctext(group, usize::MAX),
        key: ctext(key, usize::MAX),
    }
}

// ---------------------------------------------------------------------
// Stream IDs
// ---------------------------------------------------------------------

/// A stream entry ID: milliseconds and sequence, ordered as Redis orders
/// them (by `ms`, then `seq`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct StreamId {
    /// The milliseconds part.
    pub ms: u64,
    /// The sequence part.
    pub seq: u64,
}

impl fmt::Display for StreamId {
    /// `<ms>-<seq>`, as Redis replies.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.ms, self.seq)
    }
}

impl StreamId {
    /// `0-0`.
    pub const MIN: StreamId = StreamId { ms: 0, seq: 0 };
    /// `18446744073709551615-18446744073709551615`.
    pub const MAX: StreamId = StreamId {
        ms: u64::MAX,
        seq: u64::MAX,
    };

    /// `ms-seq`.
    pub const fn new(ms: u64, seq: u64) -> StreamId {
        StreamId { ms, seq }
    }

    /// True for `0-0`.
    pub fn is_zero(self) -> bool {
        self == StreamId::MIN
    }

    /// The next ID (`None` after the maximum), Redis's `streamIncrID`.
    pub fn incr(self) -> Option<StreamId> {
        if self.seq == u64::MAX {
            if self.ms == u64::MAX {
                None
            } else {
                Some(StreamId::new(self.ms + 1, 0))
            }
        } else {
            Some(StreamId::new(self.ms, self.seq + 1))
        }
    }

    /// The previous ID (`None` before `0-0`), Redis's `streamDecrID`.
    pub fn decr(self) -> Option<StreamId> {
        if self.seq == 0 {
            if self.ms == 0 {
                None
            } else {
                Some(StreamId::new(self.ms - 1, u64::MAX))
            }
        } else {
            Some(StreamId::new(self.ms, self.seq - 1))
        }
    }

    /// The ID as Redis writes it in a reply: `<ms>-<seq>`.
    pub fn to_bytes(self) -> Vec<u8> {
        self.to_string().into_bytes()
    }

    /// The ID as a bulk-string reply.
    pub fn to_reply(self) -> Reply {
        Reply::bulk(self.to_bytes())
    }

    /// Parses an ID where `-` (0-0) and `+` (the maximum) are accepted;
    /// an ID without `-seq` takes `missing_seq` (0 for a start, `u64::MAX`
    /// for an end). Redis's `streamParseIDOrReply` (XRANGE bounds,
    /// `XGROUP SETID`).
    pub fn parse(arg: &[u8], missing_seq: u64) -> Result<StreamId, StreamError> {
        parse_id(arg, missing_seq, false, false).map(|(id, _)| id)
    }

    /// Parses an ID where `-` and `+` are refused (Redis's
    /// `streamParseStrictIDOrReply`: XDEL, XACK, XCLAIM, XREAD IDs,
    /// `XGROUP CREATE`, `XSETID`, `MINID`).
    pub fn parse_strict(arg: &[u8], missing_seq: u64) -> Result<StreamId, StreamError> {
        parse_id(arg, missing_seq, true, false).map(|(id, _)| id)
    }

    /// Parses a range bound: `(` before an ID makes it exclusive (and
    /// strict: `(-`, `(+` are refused). Returns the ID and whether it was
    /// exclusive; see [`range_start`] and [`range_end`] for the bound
    /// itself.
    pub fn parse_interval(arg: &[u8], missing_seq: u64) -> Result<(StreamId, bool), StreamError> {
        if arg.len() > 1 && arg[0] == b'(' {
            Ok((parse_id(&arg[1..], missing_seq, true, false)?.0, true))
        } else {
            Ok((parse_id(arg, missing_seq, false, false)?.0, false))
        }
    }
}

/// An inclusive start bound from a range argument (`-`, `ms`, `ms-seq`,
/// `(ms-seq`): XRANGE's start, XREVRANGE's start (its last argument),
/// XPENDING's and XAUTOCLAIM's start.
pub fn range_start(arg: &[u8]) -> Result<StreamId, StreamError> {
    let (id, ex) = StreamId::parse_interval(arg, 0)?;
    if ex {
        id.incr().ok_or(StreamError::InvalidStart)
    } else {
        Ok(id)
    }
}

/// An inclusive end bound from a range argument (`+`, `ms` = `ms-MAX`,
/// `ms-seq`, `(ms-seq`).
pub fn range_end(arg: &[u8]) -> Result<StreamId, StreamError> {
    let (id, ex) = StreamId::parse_interval(arg, u64::MAX)?;
    if ex {
        id.decr().ok_or(StreamError::InvalidEnd)
    } else {
        Ok(id)
    }
}

/// The ID argument of XADD.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum XaddId {
    /// `*`: from the clock (`now_ms`), or the last ID plus one.
    Auto,
    /// `ms-*`: the given ms, the sequence generated.
    Ms(u64),
    /// `ms-seq` or `ms` (sequence 0).
    Explicit(StreamId),
}

impl XaddId {
    /// Parses XADD's ID argument (strict: no `-`/`+`).
    pub fn parse(arg: &[u8]) -> Result<XaddId, StreamError> {
        if is_exact(arg, "*") {
            return Ok(XaddId::Auto);
        }
        let (id, seq_given) = parse_id(arg, 0, true, true)?;
        Ok(if seq_given {
            XaddId::Explicit(id)
        } else {
            XaddId::Ms(id.ms)
        })
    }
}

/// Redis's `streamGenericParseIDOrReply`: returns the ID and whether the
/// sequence was given (false only for `ms-*` when `star_seq`).
fn parse_id(
    arg: &[u8],
    missing_seq: u64,
    strict: bool,
    star_seq: bool,
) -> Result<(StreamId, bool), StreamError> {
    // Redis copies the argument into a 128-byte buffer and reads it as a
    // C string.
    if arg.len() > 127 {
        return Err(StreamError::InvalidId);
    }
    let buf = cstr(arg);
    if strict && (buf == b"-" || buf == b"+") {
        return Err(StreamError::InvalidId);
    }
    if buf == b"-" {
        return Ok((StreamId::MIN, true));
    }
    if buf == b"+" {
        return Ok((StreamId::MAX, true));
    }
    let (ms_part, seq_part) = match buf.iter().position(|&c| c == b'-') {
        Some(i) => (&buf[..i], Some(&buf[i + 1..])),
        None => (buf, None),
    };
    let ms = string2ull(ms_part).ok_or(StreamError::InvalidId)?;
    let (seq, given) = match seq_part {
        Some(b"*") if star_seq => (0, false),
        Some(s) => (string2ull(s).ok_or(StreamError::InvalidId)?, true),
        None => (missing_seq, true),
    };
    Ok((StreamId::new(ms, seq), given))
}

/// Redis's `string2ull`: a strict integer (`string2ll`) that must not be
/// negative, else whatever C's `strtoull` accepts in full (leading
/// spaces, a sign, leading zeros; a `-` negates modulo 2^64).
fn string2ull(s: &[u8]) -> Option<u64> {
    if let Some(v) = parse_i64_strict(s) {
        return u64::try_from(v).ok();
    }
    let mut i = 0;
    while i < s.len() && matches!(s[i], b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r') {
        i += 1;
    }
    let mut neg = false;
    if i < s.len() && (s[i] == b'+' || s[i] == b'-') {
        neg = s[i] == b'-';
        i += 1;
    }
    let digits = &s[i..];
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut v: u64 = 0;
    for &d in digits {
        v = v.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
    }
    Some(if neg { v.wrapping_neg() } else { v })
}

// ---------------------------------------------------------------------
// The listpack model (byte sizes only)
// ---------------------------------------------------------------------

/// Bytes of a listpack's header (total bytes, element count) and its end
/// marker.
const LP_EMPTY_BYTES: u64 = 6 + 1;

/// Redis's cap on one listpack (and on an entry's total field/value
/// bytes).
const LISTPACK_MAX_SIZE: u64 = 1 << 30;

/// Encoded length of an integer element (without its back-length).
fn lp_int_len(v: i64) -> u64 {
    match v {
        0..=127 => 1,
        -4096..=4095 => 2,
        -32768..=32767 => 3,
        -8_388_608..=8_388_607 => 4,
        -2_147_483_648..=2_147_483_647 => 5,
        _ => 9,
    }
}

/// Bytes of the back-length that follows an element of `l` bytes.
fn lp_backlen(l: u64) -> u64 {
    match l {
        0..=127 => 1,
        128..=16382 => 2,
        16383..=2_097_150 => 3,
        2_097_151..=268_435_454 => 4,
        _ => 5,
    }
}

/// Bytes an integer element takes in a listpack.
fn lp_int(v: i64) -> u64 {
    let l = lp_int_len(v);
    l + lp_backlen(l)
}

/// A string as listpacks test it for integer encoding: canonical
/// decimal (no leading zeros, no `+`, `-0` refused), within `i64`,
/// shorter than 21 bytes.
fn lp_string_int(s: &[u8]) -> Option<i64> {
    if s.is_empty() || s.len() >= 21 {
        return None;
    }
    parse_i64_strict(s)
}

/// Bytes a string element takes in a listpack.
fn lp_str(s: &[u8]) -> u64 {
    if let Some(v) = lp_string_int(s) {
        return lp_int(v);
    }
    let n = s.len() as u64;
    let l = if n < 64 {
        1 + n
    } else if n < 4096 {
        2 + n
    } else {
        5 + n
    };
    l + lp_backlen(l)
}

// ---------------------------------------------------------------------
// The stream
// ---------------------------------------------------------------------

/// The field/value pairs of one entry, shared (a clone is O(1)).
pub type Fields = Arc<Vec<(Vec<u8>, Vec<u8>)>>;

/// One entry as replies carry it.
pub type Entry = (StreamId, Fields);

/// One entry of an XREADGROUP reply: `None` for a pending entry no longer
/// in the stream.
pub type GroupEntry = (StreamId, Option<Fields>);

/// One stream of an XREAD reply: its key and entries.
pub type KeyEntries = (Vec<u8>, Vec<Entry>);

/// The server settings that shape a stream's nodes: Redis's
/// `stream-node-max-entries` and `stream-node-max-bytes`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamConfig {
    /// Entries (live and deleted) per node before a new one starts; 0: no
    /// limit. Also sets approximate trimming's default LIMIT (100 times
    /// this). Redis's default: 100.
    pub node_max_entries: i64,
    /// A node's listpack bytes before a new one starts; 0: 1 GiB. Redis's
    /// default: 4096.
    pub node_max_bytes: u64,
}

impl Default for StreamConfig {
    fn default() -> Self {
        StreamConfig {
            node_max_entries: 100,
            node_max_bytes: 4096,
        }
    }
}

/// One node of Redis's radix tree of listpacks, as far as it shows: the
/// model that makes approximate trimming and `XINFO` match Redis.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Node {
    /// The master entry's field names (the node's first entry's).
    master_fields: Arc<Vec<Vec<u8>>>,
    /// Entries not deleted.
    live: u64,
    /// Entries flagged deleted (still in the listpack).
    deleted: u64,
    /// The listpack's bytes, but for its two counters.
    bytes: u64,
    /// The entries in listpack (append) order, deleted ones included.
    /// Live entries ascend in the normal course; deleted ones need not:
    /// after `XSETID` lowers the last ID below deleted entries, Redis
    /// appends below them (even with the same ID).
    order: Vector<Ent>,
}

/// An entry of a node's listpack.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Ent {
    id: StreamId,
    fields: Fields,
    /// Flagged deleted (a tombstone).
    deleted: bool,
}

impl Node {
    /// The last entry written to the node (deleted or not).
    fn last(&self) -> Option<StreamId> {
        self.order.last().map(|e| e.id)
    }

    /// The listpack's total bytes.
    fn lp_bytes(&self) -> u64 {
        self.bytes + lp_int(self.live as i64) + lp_int(self.deleted as i64)
    }
}

/// A pending entry of a group: delivered, not yet acknowledged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Nack {
    /// The consumer it was last delivered to.
    pub consumer: Vec<u8>,
    /// When it was last delivered (ms, Unix time).
    pub delivery_time: i64,
    /// How many times it was delivered.
    pub delivery_count: u64,
}

/// A consumer of a group.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Consumer {
    /// Its last activity (ms): creation, reads, claims (7.0's seen-time).
    pub seen_time: i64,
    /// Its pending entries (their details are in the group's PEL).
    pub pel: OrdSet<StreamId>,
}

/// `entries_read` of a group whose counter is unknown.
pub const ENTRIES_READ_INVALID: i64 = -1;

/// A consumer group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Group {
    /// The last ID delivered to the group.
    pub last_id: StreamId,
    /// The logical read counter ([`ENTRIES_READ_INVALID`]: unknown).
    pub entries_read: i64,
    /// The pending entries list: ID → delivery.
    pub pel: OrdMap<StreamId, Nack>,
    /// Consumers by name.
    pub consumers: OrdMap<Vec<u8>, Consumer>,
}

impl Group {
    fn new(last_id: StreamId, entries_read: i64) -> Group {
        Group {
            last_id,
            entries_read,
            pel: OrdMap::new(),
            consumers: OrdMap::new(),
        }
    }

    /// Redis's `streamLookupConsumer` with refresh, or
    /// `streamCreateConsumer`: the consumer's seen-time becomes `now`.
    /// Returns true when it was created.
    fn touch_consumer(&mut self, name: &[u8], now: i64) -> bool {
        match self.consumers.get_mut(name) {
            Some(c) => {
                c.seen_time = now;
                false
            }
            None => {
                self.consumers.insert(
                    name.to_vec(),
                    Consumer {
                        seen_time: now,
                        pel: OrdSet::new(),
                    },
                );
                true
            }
        }
    }

    /// Removes `id` from the PEL and from its consumer's.
    fn drop_nack(&mut self, id: StreamId) -> bool {
        match self.pel.remove(&id) {
            Some(n) => {
                if let Some(c) = self.consumers.get_mut(&n.consumer) {
                    c.pel.remove(&id);
                }
                true
            }
            None => false,
        }
    }

    /// Gives pending `id` to `consumer` (which exists), moving it out of
    /// its previous owner's PEL.
    fn reassign(&mut self, id: StreamId, consumer: &[u8]) {
        let Some(n) = self.pel.get_mut(&id) else {
            return;
        };
        if n.consumer.as_slice() != consumer {
            let old = std::mem::replace(&mut n.consumer, consumer.to_vec());
            if let Some(c) = self.consumers.get_mut(&old) {
                c.pel.remove(&id);
            }
        }
        if let Some(c) = self.consumers.get_mut(consumer) {
            c.pel.insert(id);
        }
    }
}

/// A stream value.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Stream {
    /// The listpack nodes by master ID (their first entry's ID), each
    /// with its entries in listpack order.
    nodes: OrdMap<StreamId, Node>,
    /// Live entries.
    length: u64,
    last_id: StreamId,
    first_id: StreamId,
    max_deleted_entry_id: StreamId,
    entries_added: u64,
    groups: OrdMap<Vec<u8>, Group>,
}

/// A trimming strategy (`MAXLEN`/`MINID`) with its options.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Trim {
    /// What to keep.
    pub strategy: TrimStrategy,
    /// `~`: remove whole nodes only.
    pub approx: bool,
    /// The most entries to remove (0: no limit). Redis sets it from
    /// `LIMIT`, or for `~` without `LIMIT` to 100 × node_max_entries
    /// (see [`Trim::new`]); exact trimming has none.
    pub limit: i64,
}

/// MAXLEN or MINID.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TrimStrategy {
    /// Keep at most this many entries.
    MaxLen(u64),
    /// Keep no entry below this ID.
    MinId(StreamId),
}

impl Trim {
    /// A trim as XADD/XTRIM set it up: `limit` is the `LIMIT` given (if
    /// any); approximate trimming without one gets
    /// 100 × `node_max_entries`, kept within 1..=1,000,000 (10,000 when not
    /// positive).
    pub fn new(
        strategy: TrimStrategy,
        approx: bool,
        limit: Option<i64>,
        cfg: &StreamConfig,
    ) -> Trim {
        let limit = match limit {
            Some(l) => l,
            None if approx => {
                let l = cfg.node_max_entries.wrapping_mul(100);
                if l <= 0 {
                    10_000
                } else {
                    l.min(1_000_000)
                }
            }
            None => 0,
        };
        Trim {
            strategy,
            approx,
            limit,
        }
    }
}

/// `now_ms` as Redis's signed milliseconds.
fn ms(now_ms: u64) -> i64 {
    i64::try_from(now_ms).unwrap_or(i64::MAX)
}

/// What [`Stream::read_group`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupRead {
    /// The entries served (`None`: nothing to serve, the consumer was not
    /// looked up; Redis leaves the stream out of the reply). A history
    /// read gives `(id, None)` for a pending entry no longer in the stream.
    pub entries: Option<Vec<GroupEntry>>,
    /// The consumer was created by this read.
    pub consumer_created: bool,
}

/// Where XREADGROUP (and XREAD) read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadFrom {
    /// Entries after this ID (XREAD; for XREADGROUP, the consumer's
    /// pending entries after it).
    After(StreamId),
    /// `>`: entries never delivered to the group.
    New,
}

/// Options of XCLAIM (besides the IDs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ClaimOptions {
    /// min-idle-time (ms; negative taken as 0).
    pub min_idle: i64,
    /// `IDLE ms` or `TIME ms-unix-time`, the last given (each sets the
    /// delivery time; one outside `0..=now` means now).
    pub delivery: Option<ClaimDelivery>,
    /// `RETRYCOUNT n` (negative: as if not given).
    pub retry_count: Option<i64>,
    /// `FORCE`.
    pub force: bool,
    /// `JUSTID`.
    pub just_id: bool,
    /// `LASTID id`.
    pub last_id: Option<StreamId>,
}

/// XCLAIM's new delivery time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClaimDelivery {
    /// `IDLE ms`: `now - ms`.
    Idle(i64),
    /// `TIME ms`: that Unix time.
    Time(i64),
}

/// Entries or IDs claimed by XCLAIM/XAUTOCLAIM.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claimed {
    /// Without JUSTID: the entries.
    Entries(Vec<Entry>),
    /// With JUSTID: their IDs.
    Ids(Vec<StreamId>),
}

impl Claimed {
    fn new(just_id: bool) -> Claimed {
        if just_id {
            Claimed::Ids(Vec::new())
        } else {
            Claimed::Entries(Vec::new())
        }
    }

    fn push(&mut self, id: StreamId, fields: &Fields) {
        match self {
            Claimed::Entries(v) => v.push((id, fields.clone())),
            Claimed::Ids(v) => v.push(id),
        }
    }

    /// How many.
    pub fn len(&self) -> usize {
        match self {
            Claimed::Entries(v) => v.len(),
            Claimed::Ids(v) => v.len(),
        }
    }

    /// True when nothing was claimed.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The RESP reply: an array of entries, or of IDs.
    pub fn to_reply(&self) -> Reply {
        match self {
            Claimed::Entries(v) => entries_reply(v),
            Claimed::Ids(v) => Reply::Array(Some(v.iter().map(|id| id.to_reply()).collect())),
        }
    }
}

/// What XCLAIM did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimOutcome {
    /// The reply.
    pub claimed: Claimed,
    /// The consumer was created.
    pub consumer_created: bool,
}

/// What XAUTOCLAIM did; its reply is `[next, claimed, deleted]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AutoClaimOutcome {
    /// The cursor for the next call (`0-0`: the scan is complete).
    pub next: StreamId,
    /// The entries (or IDs) claimed.
    pub claimed: Claimed,
    /// Pending IDs found deleted from the stream, removed from the PEL
    /// (7.0's third element).
    pub deleted: Vec<StreamId>,
    /// The consumer was created.
    pub consumer_created: bool,
}

impl AutoClaimOutcome {
    /// The RESP reply `[next-id, claimed, deleted-ids]`.
    pub fn to_reply(&self) -> Reply {
        Reply::Array(Some(vec![
            self.next.to_reply(),
            self.claimed.to_reply(),
            Reply::Array(Some(self.deleted.iter().map(|id| id.to_reply()).collect())),
        ]))
    }
}

/// XPENDING's summary form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingSummary {
    /// Pending entries of the group.
    pub count: u64,
    /// The lowest and highest pending IDs (`None` when none is pending).
    pub bounds: Option<(StreamId, StreamId)>,
    /// Consumers with pending entries, by name, and how many each has.
    pub consumers: Vec<(Vec<u8>, u64)>,
}

impl PendingSummary {
    /// `[count, min, max, [[consumer, "n"], ...]]`; with nothing pending
    /// `[0, nil, nil, nil-array]`. The per-consumer counts are bulk
    /// strings, as Redis sends them.
    pub fn to_reply(&self) -> Reply {
        let count = Reply::Integer(self.count as i64);
        match self.bounds {
            None => Reply::Array(Some(vec![
                count,
                Reply::nil(),
                Reply::nil(),
                Reply::Array(None),
            ])),
            Some((lo, hi)) => Reply::Array(Some(vec![
                count,
                lo.to_reply(),
                hi.to_reply(),
                Reply::Array(Some(
                    self.consumers
                        .iter()
                        .map(|(n, c)| {
                            Reply::Array(Some(vec![
                                Reply::bulk(n.clone()),
                                Reply::bulk(c.to_string()),
                            ]))
                        })
                        .collect(),
                )),
            ])),
        }
    }
}

/// One line of XPENDING's extended form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingEntry {
    /// The entry.
    pub id: StreamId,
    /// Its consumer.
    pub consumer: Vec<u8>,
    /// Milliseconds since its last delivery (at least 0).
    pub idle: i64,
    /// Deliveries.
    pub delivery_count: u64,
}

/// The RESP reply of XPENDING's extended form:
/// `[[id, consumer, idle, deliveries], ...]`.
pub fn pending_entries_reply(v: &[PendingEntry]) -> Reply {
    Reply::Array(Some(
        v.iter()
            .map(|p| {
                Reply::Array(Some(vec![
                    p.id.to_reply(),
                    Reply::bulk(p.consumer.clone()),
                    Reply::Integer(p.idle),
                    Reply::Integer(p.delivery_count as i64),
                ]))
            })
            .collect(),
    ))
}

/// The arguments of XPENDING's extended form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingRange {
    /// `IDLE ms` (0: no filter).
    pub min_idle: i64,
    /// Inclusive start.
    pub start: StreamId,
    /// Inclusive end.
    pub end: StreamId,
    /// The most lines (0: none).
    pub count: u64,
    /// Only this consumer's entries.
    pub consumer: Option<Vec<u8>>,
}

impl Stream {
    /// An empty stream.
    pub fn new() -> Stream {
        Stream::default()
    }

    /// Entries in the stream (`XLEN`).
    pub fn len(&self) -> u64 {
        self.length
    }

    /// True without entries (an empty stream is still a key).
    pub fn is_empty(&self) -> bool {
        self.length == 0
    }

    /// The last ID generated (`last-generated-id`; what `$` means).
    pub fn last_id(&self) -> StreamId {
        self.last_id
    }

    /// The first entry's ID as recorded (`recorded-first-entry-id`; 0-0
    /// when empty).
    pub fn first_id(&self) -> StreamId {
        self.first_id
    }

    /// The highest ID deleted by XDEL (`max-deleted-entry-id`).
    pub fn max_deleted_entry_id(&self) -> StreamId {
        self.max_deleted_entry_id
    }

    /// Entries ever added (`entries-added`).
    pub fn entries_added(&self) -> u64 {
        self.entries_added
    }

    /// The last entry present, as Redis finds it (`streamLastValidID`:
    /// the first live entry of a backward scan).
    pub fn last_entry_id(&self) -> Option<StreamId> {
        let mut last = None;
        self.scan(StreamId::MIN, StreamId::MAX, true, |_, _, e| {
            last = Some(e.id);
            false
        });
        last
    }

    /// The fields of entry `id` (Redis's lookup: a scan from `id` to
    /// `id`).
    pub fn get(&self, id: StreamId) -> Option<&Fields> {
        let mut at = None;
        self.scan(id, id, false, |k, i, _| {
            at = Some((k, i));
            false
        });
        let (k, i) = at?;
        self.nodes.get(&k)?.order.get(i).map(|e| &e.fields)
    }

    /// All entries, in Redis's order (ascending IDs, but for Redis's own
    /// corner cases: see [`Stream::nodes`]).
    pub fn iter(&self) -> impl Iterator<Item = (&StreamId, &Fields)> + '_ {
        self.nodes.values().flat_map(|n| {
            n.order
                .iter()
                .filter(|e| !e.deleted)
                .map(|e| (&e.id, &e.fields))
        })
    }

    /// Redis's stream iterator (`streamIteratorStart`/`GetID`, deleted
    /// entries skipped): forward, from the node at or before `start` (or
    /// the first), nodes in key order and each node's entries in listpack
    /// order, it passes the live entries at or above `start` and stops at
    /// the first above `end`; backward, from the node at or before `end`
    /// (or the last), the mirror. `f` gets each entry with its node and
    /// index, and returns whether to go on.
    fn scan(
        &self,
        start: StreamId,
        end: StreamId,
        rev: bool,
        mut f: impl FnMut(StreamId, usize, &Ent) -> bool,
    ) {
        if !rev {
            let seek = if start.is_zero() {
                None
            } else {
                self.nodes.get_prev(&start).map(|(k, _)| *k)
            };
            let nodes = match seek {
                Some(k) => self.nodes.range(k..),
                None => self.nodes.range(..),
            };
            for (k, node) in nodes {
                for (i, e) in node.order.iter().enumerate() {
                    if e.deleted || e.id < start {
                        continue;
                    }
                    if e.id > end || !f(*k, i, e) {
                        return;
                    }
                }
            }
        } else {
            let seek = if end.is_zero() {
                None
            } else {
                self.nodes.get_prev(&end).map(|(k, _)| *k)
            };
            let nodes = match seek {
                Some(k) => self.nodes.range(..=k),
                None => self.nodes.range(..),
            };
            for (k, node) in nodes.rev() {
                for i in (0..node.order.len()).rev() {
                    let Some(e) = node.order.get(i) else {
                        continue;
                    };
                    if e.deleted || e.id > end {
                        continue;
                    }
                    if e.id < start || !f(*k, i, e) {
                        return;
                    }
                }
            }
        }
    }

    /// The first live entry of a forward scan (Redis's
    /// `streamGetEdgeID(first, skip tombstones)`).
    pub fn first_live(&self) -> StreamId {
        let mut first = StreamId::MAX;
        self.scan(StreamId::MIN, StreamId::MAX, false, |_, _, e| {
            first = e.id;
            false
        });
        first
    }

    /// The consumer groups by name.
    pub fn groups(&self) -> &OrdMap<Vec<u8>, Group> {
        &self.groups
    }

    /// Group `name`.
    pub fn group(&self, name: &[u8]) -> Option<&Group> {
        self.groups.get(name)
    }

    /// Nodes of Redis's radix tree (`radix-tree-keys`).
    pub fn radix_tree_keys(&self) -> u64 {
        self.nodes.len() as u64
    }

    /// Nodes of the radix tree itself (`radix-tree-nodes`): those of a
    /// compressed radix tree over the nodes' 128-bit big-endian master IDs,
    /// as Redis's rax keeps it.
    pub fn radix_tree_nodes(&self) -> u64 {
        let keys: Vec<[u8; 16]> = self
            .nodes
            .keys()
            .map(|id| {
                let mut k = [0u8; 16];
                k[..8].copy_from_slice(&id.ms.to_be_bytes());
                k[8..].copy_from_slice(&id.seq.to_be_bytes());
                k
            })
            .collect();
        if keys.is_empty() {
            1
        } else {
            rax_nodes(&keys, 0)
        }
    }

    // -- adding -------------------------------------------------------

    /// XADD's append (trimming is [`Stream::trim`]): the ID from `id`
    /// (`*` from `now_ms`, or the last ID's successor when the clock is not
    /// ahead of it, so IDs never go back), the entry into the tail node or
    /// a new one (by `cfg`), counters updated. Errors as Redis's, in its
    /// order: `0-0`, exhausted stream, `ms-*` at the maximum sequence, ID
    /// not above the last, elements over 1 GiB.
    pub fn add(
        &mut self,
        id: XaddId,
        fields: Vec<(Vec<u8>, Vec<u8>)>,
        now_ms: u64,
        cfg: &StreamConfig,
    ) -> Result<StreamId, StreamError> {
        if id == XaddId::Explicit(StreamId::MIN) {
            return Err(StreamError::IdZero);
        }
        if self.last_id == StreamId::MAX {
            return Err(StreamError::Exhausted);
        }
        let new_id = match id {
            XaddId::Explicit(i) => i,
            XaddId::Ms(m) => {
                if self.last_id.ms == m {
                    if self.last_id.seq == u64::MAX {
                        return Err(StreamError::TooLarge);
                    }
                    StreamId::new(m, self.last_id.seq + 1)
                } else {
                    StreamId::new(m, 0)
                }
            }
            XaddId::Auto => {
                if now_ms > self.last_id.ms {
                    StreamId::new(now_ms, 0)
                } else {
                    self.last_id.incr().unwrap_or(StreamId::MIN)
                }
            }
        };
        if new_id <= self.last_id {
            return Err(StreamError::IdNotGreater);
        }
        let total: u64 = fields.iter().map(|(f, v)| (f.len() + v.len()) as u64).sum();
        if total > LISTPACK_MAX_SIZE {
            return Err(StreamError::TooLarge);
        }
        self.append(new_id, fields, total, cfg);
        Ok(new_id)
    }

    /// Appends an entry whose ID is above the last.
    fn append(
        &mut self,
        id: StreamId,
        fields: Vec<(Vec<u8>, Vec<u8>)>,
        total: u64,
        cfg: &StreamConfig,
    ) {
        let max_bytes = if cfg.node_max_bytes == 0 || cfg.node_max_bytes > LISTPACK_MAX_SIZE {
            LISTPACK_MAX_SIZE
        } else {
            cfg.node_max_bytes
        };
        let tail = self.nodes.get_max().map(|(k, n)| {
            let full = n.lp_bytes() + total >= max_bytes
                || (cfg.node_max_entries != 0
                    && (n.live + n.deleted) as i64 >= cfg.node_max_entries);
            (*k, full)
        });
        let (master, same) = match tail {
            Some((k, false)) => {
                let same = self
                    .nodes
                    .get(&k)
                    .is_some_and(|node| same_fields(&node.master_fields, &fields));
                (k, same)
            }
            // A node keyed by this very ID can exist only in Redis's
            // corner of corners (XSETID below a deleted master); Redis would
            // lose the old node, this keeps filling it.
            Some((_, true)) if self.nodes.contains_key(&id) => {
                let same = self
                    .nodes
                    .get(&id)
                    .is_some_and(|node| same_fields(&node.master_fields, &fields));
                (id, same)
            }
            _ => {
                let names: Vec<Vec<u8>> = fields.iter().map(|(f, _)| f.clone()).collect();
                let bytes = master_bytes(&names);
                self.nodes.insert(
                    id,
                    Node {
                        master_fields: Arc::new(names),
                        live: 0,
                        deleted: 0,
                        bytes,
                        order: Vector::new(),
                    },
                );
                (id, true)
            }
        };
        let entry = entry_bytes(master, id, &fields, same);
        if let Some(node) = self.nodes.get_mut(&master) {
            node.bytes += entry;
            node.live += 1;
            node.order.push_back(Ent {
                id,
                fields: Arc::new(fields),
                deleted: false,
            });
        }
        self.length += 1;
        self.entries_added += 1;
        self.last_id = id;
        if self.length == 1 {
            self.first_id = id;
        }
    }

    // -- removing -----------------------------------------------------

    /// Removes live entry `id` from the entries and flags it in its node
    /// (the node goes when it was its last live entry).
    fn remove_entry(&mut self, id: StreamId) -> bool {
        let mut at = None;
        self.scan(id, id, false, |k, i, _| {
            at = Some((k, i));
            false
        });
        let Some((k, i)) = at else {
            return false;
        };
        let drop_node = match self.nodes.get_mut(&k) {
            Some(node) if node.live <= 1 => true,
            Some(node) => {
                node.live -= 1;
                node.deleted += 1;
                flag_deleted(node, i);
                false
            }
            None => false,
        };
        if drop_node {
            self.nodes.remove(&k);
        }
        self.length = self.length.saturating_sub(1);
        true
    }

    /// XDEL: deletes the entries of `ids` present (each counts once) and
    /// returns how many; updates the first ID and `max-deleted-entry-id`.
    pub fn delete(&mut self, ids: &[StreamId]) -> u64 {
        let mut deleted = 0;
        let mut first_entry = false;
        for &id in ids {
            if self.remove_entry(id) {
                if id == self.first_id {
                    first_entry = true;
                }
                if id > self.max_deleted_entry_id {
                    self.max_deleted_entry_id = id;
                }
                deleted += 1;
            }
        }
        if deleted > 0 {
            if self.length == 0 {
                self.first_id = StreamId::MIN;
            } else if first_entry {
                self.first_id = self.first_live();
            }
        }
        deleted
    }

    /// XTRIM / XADD's trimming, as Redis's `streamTrim`: from the oldest
    /// node, removes whole nodes while the strategy allows (and the limit,
    /// counted in whole nodes' entries, is not passed); then, unless
    /// approximate, flags entries inside the next node. Returns the number
    /// of entries removed.
    pub fn trim(&mut self, t: &Trim) -> u64 {
        let mut deleted: u64 = 0;
        let mut cursor = StreamId::MIN;
        while let Some((master, live, last)) = self
            .nodes
            .get_next(&cursor)
            .map(|(k, n)| (*k, n.live, n.last().unwrap_or(*k)))
        {
            let len = self.len();
            if let TrimStrategy::MaxLen(max) = t.strategy {
                if len <= max {
                    break;
                }
            }
            if t.limit != 0 && (deleted + live) as i64 > t.limit {
                break;
            }
            let remove_node = match t.strategy {
                TrimStrategy::MaxLen(max) => len.saturating_sub(live) >= max,
                TrimStrategy::MinId(min) => last < min,
            };
            if remove_node {
                self.nodes.remove(&master);
                self.length = self.length.saturating_sub(live);
                deleted += live;
                match master.incr() {
                    Some(c) => cursor = c,
                    None => break,
                }
                continue;
            }
            if t.approx {
                break;
            }
            if let Some(node) = self.nodes.get_mut(&master) {
                for i in 0..node.order.len() {
                    let Some((id, was_deleted)) = node.order.get(i).map(|e| (e.id, e.deleted))
                    else {
                        break;
                    };
                    let stop = match t.strategy {
                        TrimStrategy::MaxLen(max) => self.length <= max,
                        TrimStrategy::MinId(min) => id >= min,
                    };
                    if stop {
                        break;
                    }
                    if !was_deleted {
                        flag_deleted(node, i);
                        node.live = node.live.saturating_sub(1);
                        node.deleted += 1;
                        self.length = self.length.saturating_sub(1);
                        deleted += 1;
                    }
                }
            }
            break;
        }
        if self.length == 0 {
            self.first_id = StreamId::MIN;
        } else if deleted > 0 {
            self.first_id = self.first_live();
        }
        deleted
    }

    // -- reading ------------------------------------------------------

    /// XRANGE (`rev` false) / XREVRANGE (`rev` true): entries with IDs in
    /// `start..=end`, at most `count` (0: all), from the end when `rev`.
    pub fn range(&self, start: StreamId, end: StreamId, count: usize, rev: bool) -> Vec<Entry> {
        let take = if count == 0 { usize::MAX } else { count };
        let mut out = Vec::new();
        self.scan(start, end, rev, |_, _, e| {
            out.push((e.id, e.fields.clone()));
            out.len() < take
        });
        out
    }

    /// XREAD's part for one stream: the entries after `after` (at most
    /// `count`, 0: all); `None` when there is none (Redis then leaves the
    /// stream out of the reply). The caller resolves `$` to
    /// [`Stream::last_id`].
    pub fn read_after(&self, after: StreamId, count: usize) -> Option<Vec<Entry>> {
        let last = self.last_entry_id()?;
        if last <= after {
            return None;
        }
        let start = after.incr().unwrap_or(StreamId::MIN);
        Some(self.range(start, StreamId::MAX, count, false))
    }

    // -- consumer groups: counters ------------------------------------

    /// Redis's `streamRangeHasTombstones(start, +inf)`.
    fn tombstones_from(&self, start: StreamId) -> bool {
        if self.length == 0 || self.max_deleted_entry_id.is_zero() {
            return false;
        }
        if self.first_id > self.max_deleted_entry_id {
            return false;
        }
        start <= self.max_deleted_entry_id
    }

    /// Redis's `streamEstimateDistanceFromFirstEverEntry`: the logical
    /// read counter of `id`, or [`ENTRIES_READ_INVALID`].
    pub fn estimate_distance(&self, id: StreamId) -> i64 {
        let added = self.entries_added as i64;
        if self.entries_added == 0 {
            return 0;
        }
        if self.length == 0 && id <= self.last_id {
            return added;
        }
        if id == self.last_id {
            return added;
        }
        if id > self.last_id {
            return ENTRIES_READ_INVALID;
        }
        if self.max_deleted_entry_id.is_zero() || self.max_deleted_entry_id < self.first_id {
            let len = self.len() as i64;
            if id < self.first_id {
                return added.wrapping_sub(len);
            }
            if id == self.first_id {
                return added.wrapping_sub(len).wrapping_add(1);
            }
        }
        ENTRIES_READ_INVALID
    }

    /// A group's lag (XINFO GROUPS / FULL): entries not yet delivered,
    /// `None` where Redis 7.0 replies null (the counter cannot be known).
    pub fn lag(&self, g: &Group) -> Option<i64> {
        let added = self.entries_added as i64;
        if self.entries_added == 0 {
            return Some(0);
        }
        if g.entries_read != ENTRIES_READ_INVALID && !self.tombstones_from(g.last_id) {
            return Some(added.wrapping_sub(g.entries_read));
        }
        match self.estimate_distance(g.last_id) {
            ENTRIES_READ_INVALID => None,
            read => Some(added.wrapping_sub(read)),
        }
    }

    // -- consumer groups: XGROUP --------------------------------------

    /// XGROUP CREATE: false when the group exists. `entries_read` is
    /// `ENTRIESREAD` ([`ENTRIES_READ_INVALID`] when not given).
    pub fn create_group(&mut self, name: &[u8], last_id: StreamId, entries_read: i64) -> bool {
        if self.groups.contains_key(name) {
            return false;
        }
        self.groups
            .insert(name.to_vec(), Group::new(last_id, entries_read));
        true
    }

    /// XGROUP SETID: false when there is no such group.
    pub fn set_group_id(&mut self, name: &[u8], last_id: StreamId, entries_read: i64) -> bool {
        match self.groups.get_mut(name) {
            Some(g) => {
                g.last_id = last_id;
                g.entries_read = entries_read;
                true
            }
            None => false,
        }
    }

    /// XGROUP DESTROY: false when there is no such group.
    pub fn destroy_group(&mut self, name: &[u8]) -> bool {
        self.groups.remove(name).is_some()
    }

    /// XGROUP CREATECONSUMER: `None` without the group, else whether the
    /// consumer was created (seen-time `now_ms`).
    pub fn create_consumer(&mut self, group: &[u8], consumer: &[u8], now_ms: u64) -> Option<bool> {
        let g = self.groups.get_mut(group)?;
        if g.consumers.contains_key(consumer) {
            return Some(false);
        }
        g.consumers.insert(
            consumer.to_vec(),
            Consumer {
                seen_time: ms(now_ms),
                pel: OrdSet::new(),
            },
        );
        Some(true)
    }

    /// XGROUP DELCONSUMER: `None` without the group, else the number of
    /// entries the consumer had pending (dropped from the group's PEL); 0
    /// when there is no such consumer.
    pub fn delete_consumer(&mut self, group: &[u8], consumer: &[u8]) -> Option<u64> {
        let g = self.groups.get_mut(group)?;
        let Some(c) = g.consumers.remove(consumer) else {
            return Some(0);
        };
        for id in c.pel.iter() {
            g.pel.remove(id);
        }
        Some(c.pel.len() as u64)
    }

    // -- consumer groups: reading and acknowledging -------------------

    /// XREADGROUP's part for one stream (`None`: no such group). `New`
    /// (`>`) serves entries after the group's last delivered ID when there
    /// are any, creating or updating pending entries (unless `noack`),
    /// advancing the group and its read counter; `After(id)` serves the
    /// consumer's own pending entries after `id` (their delivery time and
    /// count updated), which happens even when the stream is empty. The
    /// consumer is looked up (seen-time `now_ms`) or created only when the
    /// stream is served. `count` 0: no limit.
    pub fn read_group(
        &mut self,
        group: &[u8],
        consumer: &[u8],
        from: ReadFrom,
        count: usize,
        noack: bool,
        now_ms: u64,
    ) -> Option<GroupRead> {
        let now = ms(now_ms);
        let take = if count == 0 { usize::MAX } else { count };
        let g = self.groups.get(group)?;
        match from {
            ReadFrom::After(after) => {
                let start = after.incr().unwrap_or(StreamId::MIN);
                let mut g = g.clone();
                let created = g.touch_consumer(consumer, now);
                let ids: Vec<StreamId> = g
                    .consumers
                    .get(consumer)
                    .map(|c| c.pel.range(start..).take(take).copied().collect())
                    .unwrap_or_default();
                let mut out = Vec::with_capacity(ids.len());
                for id in ids {
                    match self.get(id) {
                        Some(f) => {
                            out.push((id, Some(f.clone())));
                            if let Some(n) = g.pel.get_mut(&id) {
                                n.delivery_time = now;
                                n.delivery_count = n.delivery_count.wrapping_add(1);
                            }
                        }
                        None => out.push((id, None)),
                    }
                }
                self.groups.insert(group.to_vec(), g);
                Some(GroupRead {
                    entries: Some(out),
                    consumer_created: created,
                })
            }
            ReadFrom::New => {
                let serve = self.last_entry_id().is_some_and(|last| last > g.last_id);
                if !serve {
                    return Some(GroupRead {
                        entries: None,
                        consumer_created: false,
                    });
                }
                let start = g.last_id.incr().unwrap_or(StreamId::MIN);
                let mut g = g.clone();
                let created = g.touch_consumer(consumer, now);
                let served = self.range(start, StreamId::MAX, take, false);
                let mut out = Vec::with_capacity(served.len());
                for (id, fields) in served {
                    if id > g.last_id {
                        if g.entries_read != ENTRIES_READ_INVALID && !self.tombstones_from(id) {
                            g.entries_read = g.entries_read.wrapping_add(1);
                        } else if self.entries_added != 0 {
                            g.entries_read = self.estimate_distance(id);
                        }
                        g.last_id = id;
                    }
                    if !noack {
                        match g.pel.get_mut(&id) {
                            Some(n) => {
                                n.delivery_time = now;
                                n.delivery_count = 1;
                                g.reassign(id, consumer);
                            }
                            None => {
                                g.pel.insert(
                                    id,
                                    Nack {
                                        consumer: consumer.to_vec(),
                                        delivery_time: now,
                                        delivery_count: 1,
                                    },
                                );
                                if let Some(c) = g.consumers.get_mut(consumer) {
                                    c.pel.insert(id);
                                }
                            }
                        }
                    }
                    out.push((id, Some(fields)));
                }
                self.groups.insert(group.to_vec(), g);
                Some(GroupRead {
                    entries: Some(out),
                    consumer_created: created,
                })
            }
        }
    }

    /// XACK: `None` without the group, else how many of `ids` were pending
    /// (and no longer are).
    pub fn ack(&mut self, group: &[u8], ids: &[StreamId]) -> Option<u64> {
        let g = self.groups.get_mut(group)?;
        Some(ids.iter().filter(|&&id| g.drop_nack(id)).count() as u64)
    }

    /// XPENDING's summary (`None` without the group).
    pub fn pending_summary(&self, group: &[u8]) -> Option<PendingSummary> {
        let g = self.groups.get(group)?;
        let bounds = match (g.pel.get_min(), g.pel.get_max()) {
            (Some((lo, _)), Some((hi, _))) => Some((*lo, *hi)),
            _ => None,
        };
        let consumers = g
            .consumers
            .iter()
            .filter(|(_, c)| !c.pel.is_empty())
            .map(|(n, c)| (n.clone(), c.pel.len() as u64))
            .collect();
        Some(PendingSummary {
            count: g.pel.len() as u64,
            bounds,
            consumers,
        })
    }

    /// XPENDING's extended form (`None` without the group; an unknown
    /// consumer gives no line). Idle times from `now_ms`.
    pub fn pending_range(
        &self,
        group: &[u8],
        r: &PendingRange,
        now_ms: u64,
    ) -> Option<Vec<PendingEntry>> {
        let g = self.groups.get(group)?;
        let now = ms(now_ms);
        let mut out = Vec::new();
        if r.start > r.end || r.count == 0 {
            return Some(out);
        }
        let ids: Box<dyn Iterator<Item = StreamId> + '_> = match &r.consumer {
            Some(name) => match g.consumers.get(name.as_slice()) {
                Some(c) => Box::new(c.pel.range(r.start..=r.end).copied()),
                None => return Some(out),
            },
            None => Box::new(g.pel.range(r.start..=r.end).map(|(k, _)| *k)),
        };
        for id in ids {
            let Some(n) = g.pel.get(&id) else { continue };
            let idle = now.wrapping_sub(n.delivery_time);
            if r.min_idle != 0 && idle < r.min_idle {
                continue;
            }
            out.push(PendingEntry {
                id,
                consumer: n.consumer.clone(),
                idle: idle.max(0),
                delivery_count: n.delivery_count,
            });
            if out.len() as u64 >= r.count {
                break;
            }
        }
        Some(out)
    }

    /// XCLAIM (`None` without the group): `LASTID` first, then each ID in
    /// order: a pending ID no longer in the stream leaves the PEL; one
    /// pending (or, with FORCE, present in the stream) and idle at least
    /// `min_idle` goes to `consumer` (created if needed) with the delivery
    /// time of IDLE/TIME (else `now_ms`) and its count set by RETRYCOUNT or
    /// incremented (not with JUSTID).
    pub fn claim(
        &mut self,
        group: &[u8],
        consumer: &[u8],
        ids: &[StreamId],
        o: &ClaimOptions,
        now_ms: u64,
    ) -> Option<ClaimOutcome> {
        let now = ms(now_ms);
        let mut g = self.groups.get(group)?.clone();
        if let Some(l) = o.last_id {
            if l > g.last_id {
                g.last_id = l;
            }
        }
        let delivery = match o.delivery {
            Some(ClaimDelivery::Idle(idle)) => Some(now.wrapping_sub(idle)),
            Some(ClaimDelivery::Time(t)) => Some(t),
            None => None,
        };
        let delivery = match delivery {
            Some(d) if (0..=now).contains(&d) => d,
            _ => now,
        };
        let min_idle = o.min_idle.max(0);
        let retry = o.retry_count.filter(|&r| r >= 0);
        let mut claimed = Claimed::new(o.just_id);
        let mut looked_up = false;
        let mut created = false;
        for &id in ids {
            let Some(fields) = self.get(id) else {
                g.drop_nack(id);
                continue;
            };
            let forced = if g.pel.contains_key(&id) {
                false
            } else if o.force {
                true
            } else {
                continue;
            };
            if !forced && min_idle != 0 {
                if let Some(n) = g.pel.get(&id) {
                    if now.wrapping_sub(n.delivery_time) < min_idle {
                        continue;
                    }
                }
            }
            if !looked_up {
                created = g.touch_consumer(consumer, now);
                looked_up = true;
            }
            if forced {
                g.pel.insert(
                    id,
                    Nack {
                        consumer: consumer.to_vec(),
                        delivery_time: now,
                        delivery_count: 1,
                    },
                );
            }
            if let Some(n) = g.pel.get_mut(&id) {
                n.delivery_time = delivery;
                if let Some(r) = retry {
                    n.delivery_count = r as u64;
                } else if !o.just_id {
                    n.delivery_count = n.delivery_count.wrapping_add(1);
                }
            }
            g.reassign(id, consumer);
            claimed.push(id, fields);
        }
        self.groups.insert(group.to_vec(), g);
        Some(ClaimOutcome {
            claimed,
            consumer_created: created,
        })
    }

    /// XAUTOCLAIM (`None` without the group): scans the PEL from `start`,
    /// examining at most 10 × `count` entries and claiming at most `count`
    /// (pending IDs found deleted from the stream count too: they leave
    /// the PEL and are reported); claimed entries go to `consumer` with
    /// delivery time `now_ms` and, without JUSTID, one more delivery.
    pub fn autoclaim(&mut self, a: &Xautoclaim, now_ms: u64) -> Option<AutoClaimOutcome> {
        let (consumer, just_id) = (a.consumer.as_slice(), a.just_id);
        let now = ms(now_ms);
        let mut g = self.groups.get(&a.group)?.clone();
        let min_idle = a.min_idle.max(0);
        let mut count = a.count;
        let mut attempts = count.saturating_mul(10);
        let mut claimed = Claimed::new(just_id);
        let mut deleted = Vec::new();
        let mut looked_up = false;
        let mut created = false;
        let mut pos = Some(a.start);
        let mut last_seen: Option<StreamId> = None;
        let mut eof = false;
        loop {
            if attempts == 0 {
                break;
            }
            attempts -= 1;
            if count == 0 {
                break;
            }
            let next =
                pos.and_then(|p| g.pel.range(p..).next().map(|(k, n)| (*k, n.delivery_time)));
            let Some((id, delivered)) = next else {
                eof = true;
                break;
            };
            last_seen = Some(id);
            pos = id.incr();
            let Some(fields) = self.get(id) else {
                g.drop_nack(id);
                deleted.push(id);
                count -= 1;
                continue;
            };
            if min_idle != 0 && now.wrapping_sub(delivered) < min_idle {
                continue;
            }
            if !looked_up {
                created = g.touch_consumer(consumer, now);
                looked_up = true;
            }
            if let Some(n) = g.pel.get_mut(&id) {
                n.delivery_time = now;
                if !just_id {
                    n.delivery_count = n.delivery_count.wrapping_add(1);
                }
            }
            g.reassign(id, consumer);
            claimed.push(id, fields);
            count -= 1;
        }
        let next = if eof {
            StreamId::MIN
        } else {
            last_seen
                .and_then(StreamId::incr)
                .and_then(|p| g.pel.range(p..).next().map(|(k, _)| *k))
                .unwrap_or(StreamId::MIN)
        };
        self.groups.insert(a.group.clone(), g);
        Some(AutoClaimOutcome {
            next,
            claimed,
            deleted,
            consumer_created: created,
        })
    }

    // -- XSETID -------------------------------------------------------

    /// XSETID: sets the last ID, and `entries_added` and
    /// `max_deleted_entry_id` when given (a `0-0` max-deleted ID is as not
    /// given). Errors as Redis's.
    pub fn set_id(
        &mut self,
        last_id: StreamId,
        entries_added: Option<u64>,
        max_deleted: Option<StreamId>,
    ) -> Result<(), StreamError> {
        if let Some(m) = max_deleted {
            if last_id < m {
                return Err(StreamError::Msg(msg::XSETID_BELOW_MAXDELETED));
            }
        }
        if let Some(top) = self.last_entry_id() {
            if last_id < top {
                return Err(StreamError::Msg(msg::XSETID_BELOW_TOP));
            }
            if let Some(a) = entries_added {
                if self.len() > a {
                    return Err(StreamError::Msg(msg::XSETID_ENTRIES_ADDED_SMALL));
                }
            }
        }
        self.last_id = last_id;
        if let Some(a) = entries_added {
            self.entries_added = a;
        }
        if let Some(m) = max_deleted {
            if !m.is_zero() {
                self.max_deleted_entry_id = m;
            }
        }
        Ok(())
    }
}

/// Flags entry `i` of `node` deleted (it stays in the listpack).
fn flag_deleted(node: &mut Node, i: usize) {
    if let Some(e) = node.order.get_mut(i) {
        e.deleted = true;
    }
}

/// A node's listpack bytes before its first entry (header, master
/// entry, end marker), but for its two counters.
fn master_bytes(names: &[Vec<u8>]) -> u64 {
    LP_EMPTY_BYTES
        + lp_int(names.len() as i64)
        + names.iter().map(|f| lp_str(f)).sum::<u64>()
        + lp_int(0)
}

/// The listpack bytes of entry `id` in the node of `master` (`same`: its
/// fields are the master entry's, so only values are stored).
fn entry_bytes(master: StreamId, id: StreamId, fields: &[(Vec<u8>, Vec<u8>)], same: bool) -> u64 {
    let n = fields.len() as i64;
    let mut bytes = lp_int(if same { 2 } else { 0 })
        + lp_int(id.ms.wrapping_sub(master.ms) as i64)
        + lp_int(id.seq.wrapping_sub(master.seq) as i64)
        + fields.iter().map(|(_, v)| lp_str(v)).sum::<u64>();
    let mut lp_count = n + 3;
    if !same {
        bytes += lp_int(n) + fields.iter().map(|(f, _)| lp_str(f)).sum::<u64>();
        lp_count += n + 1;
    }
    bytes + lp_int(lp_count)
}

fn same_fields(master: &[Vec<u8>], fields: &[(Vec<u8>, Vec<u8>)]) -> bool {
    master.len() == fields.len() && master.iter().zip(fields).all(|(m, (f, _))| m == f)
}

/// One listpack node of a stream as Redis lays it out, for a DUMP/RDB
/// writer ([`Stream::nodes`]): an entry's fields are stored as values
/// only (flag SAMEFIELDS) when its field names are the master entry's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeView {
    /// The node's key in the radix tree: its first entry's ID.
    pub master_id: StreamId,
    /// The master entry's field names.
    pub master_fields: Arc<Vec<Vec<u8>>>,
    /// Its entries in listpack order, deleted ones (flagged, still in the
    /// listpack) included: `(id, fields, deleted)`. Live entries ascend;
    /// a deleted one may be above later ones (see [`Stream::nodes`]).
    pub entries: Vec<(StreamId, Fields, bool)>,
    /// The listpack's size in bytes, as Redis's.
    pub lp_bytes: u64,
}

/// An entry as a payload gives it: ID, field/value pairs, deleted flag.
pub type RestoredEntry = (StreamId, Vec<(Vec<u8>, Vec<u8>)>, bool);

/// The counters of a stream an RDB payload carries beside its nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StreamMeta {
    /// `last-generated-id`.
    pub last_id: StreamId,
    /// `recorded-first-entry-id`.
    pub first_id: StreamId,
    /// `max-deleted-entry-id`.
    pub max_deleted_entry_id: StreamId,
    /// `entries-added`.
    pub entries_added: u64,
}

/// The error of a stream payload that does not hold together.
pub const ERR_BAD_PAYLOAD: &str = "ERR Bad data format";

impl Stream {
    /// The nodes in order, for DUMP. A node's entries are in the order
    /// Redis appended them: when `XSETID` lowered the last ID below
    /// deleted entries, later entries follow those (possibly with the
    /// same ID), as in Redis's listpack.
    pub fn nodes(&self) -> Vec<NodeView> {
        self.nodes
            .iter()
            .map(|(master, node)| NodeView {
                master_id: *master,
                master_fields: node.master_fields.clone(),
                lp_bytes: node.lp_bytes(),
                entries: node
                    .order
                    .iter()
                    .map(|e| (e.id, e.fields.clone(), e.deleted))
                    .collect(),
            })
            .collect()
    }

    /// RESTORE / RDB loading: appends a node (its master fields, and its
    /// entries in order with their deleted flags) after the existing ones.
    /// Counters are [`Stream::restore_meta`]'s. Refuses
    /// ([`ERR_BAD_PAYLOAD`]) a node without entries or with IDs not above
    /// every ID before them.
    pub fn restore_node(
        &mut self,
        master_fields: Vec<Vec<u8>>,
        entries: Vec<RestoredEntry>,
    ) -> Result<(), StreamError> {
        let bad = StreamError::Msg(ERR_BAD_PAYLOAD);
        let Some(master) = entries.first().map(|e| e.0) else {
            return Err(bad);
        };
        if self.nodes.contains_key(&master) {
            return Err(bad);
        }
        let mut node = Node {
            bytes: master_bytes(&master_fields),
            master_fields: Arc::new(master_fields),
            live: 0,
            deleted: 0,
            order: Vector::new(),
        };
        for (id, fields, deleted) in entries {
            let same = same_fields(&node.master_fields, &fields);
            node.bytes += entry_bytes(master, id, &fields, same);
            if deleted {
                node.deleted += 1;
            } else {
                node.live += 1;
            }
            node.order.push_back(Ent {
                id,
                fields: Arc::new(fields),
                deleted,
            });
        }
        self.length += node.live;
        self.nodes.insert(master, node);
        Ok(())
    }

    /// RESTORE / RDB loading: the stream's counters.
    pub fn restore_meta(&mut self, m: StreamMeta) {
        self.last_id = m.last_id;
        self.first_id = m.first_id;
        self.max_deleted_entry_id = m.max_deleted_entry_id;
        self.entries_added = m.entries_added;
    }

    /// RESTORE / RDB loading: a group as loaded (false when the name is
    /// taken). The caller keeps it consistent: each pending entry's
    /// consumer exists and lists it, and no consumer lists other IDs.
    pub fn restore_group(&mut self, name: Vec<u8>, g: Group) -> bool {
        if self.groups.contains_key(&name) {
            return false;
        }
        self.groups.insert(name, g);
        true
    }

    /// The counters, for DUMP.
    pub fn meta(&self) -> StreamMeta {
        StreamMeta {
            last_id: self.last_id,
            first_id: self.first_id,
            max_deleted_entry_id: self.max_deleted_entry_id,
            entries_added: self.entries_added,
        }
    }
}

/// Nodes of a compressed radix tree (Redis's rax) holding `keys` (sorted,
/// distinct, all equal on their first `d` bytes), counted from depth `d`:
/// a leaf per key, a node per branching point and one per run of bytes
/// between them.
fn rax_nodes(keys: &[[u8; 16]], d: usize) -> u64 {
    let (Some(first), Some(last)) = (keys.first(), keys.last()) else {
        return 0;
    };
    if d >= 16 {
        return 1;
    }
    if first[d] == last[d] {
        let mut e = d;
        while e < 16 && first[e] == last[e] {
            e += 1;
        }
        return 1 + rax_nodes(keys, e);
    }
    let mut n = 1;
    let mut i = 0;
    while i < keys.len() {
        let b = keys[i][d];
        let j = i + keys[i..].iter().take_while(|k| k[d] == b).count();
        n += rax_nodes(&keys[i..j], d + 1);
        i = j;
    }
    n
}

// ---------------------------------------------------------------------
// Replies
// ---------------------------------------------------------------------

/// One entry as Redis replies it: `[id, [field, value, ...]]`.
pub fn entry_reply(id: StreamId, fields: &Fields) -> Reply {
    let mut fv = Vec::with_capacity(fields.len() * 2);
    for (f, v) in fields.iter() {
        fv.push(Reply::bulk(f.clone()));
        fv.push(Reply::bulk(v.clone()));
    }
    Reply::Array(Some(vec![id.to_reply(), Reply::Array(Some(fv))]))
}

/// Entries as XRANGE replies them: `[[id, [f, v, ...]], ...]`.
pub fn entries_reply(entries: &[Entry]) -> Reply {
    Reply::Array(Some(
        entries.iter().map(|(id, f)| entry_reply(*id, f)).collect(),
    ))
}

/// XREADGROUP's entries for one stream: as [`entries_reply`], with
/// `[id, nil-array]` for a pending entry no longer in the stream.
pub fn group_entries_reply(entries: &[GroupEntry]) -> Reply {
    Reply::Array(Some(
        entries
            .iter()
            .map(|(id, f)| match f {
                Some(f) => entry_reply(*id, f),
                None => Reply::Array(Some(vec![id.to_reply(), Reply::Array(None)])),
            })
            .collect(),
    ))
}

/// XREAD's (and XREADGROUP's) RESP2 reply from each served stream's name
/// and entries reply: `[[key, entries], ...]`, or the nil array when no
/// stream was served. (RESP3: Redis sends a map key → entries instead.)
pub fn xread_reply(streams: Vec<(Vec<u8>, Reply)>) -> Reply {
    if streams.is_empty() {
        return Reply::Array(None);
    }
    Reply::Array(Some(
        streams
            .into_iter()
            .map(|(k, e)| Reply::Array(Some(vec![Reply::bulk(k), e])))
            .collect(),
    ))
}

fn field(name: &str, v: Reply) -> (Reply, Reply) {
    (Reply::bulk(name.as_bytes().to_vec()), v)
}

fn int_reply(v: u64) -> Reply {
    Reply::Integer(i64::try_from(v).unwrap_or(i64::MAX))
}

fn opt_int(v: Option<i64>) -> Reply {
    v.map_or_else(Reply::nil, Reply::Integer)
}

/// `XINFO STREAM key` (a map of 10 fields, in this order: `length`,
/// `radix-tree-keys`, `radix-tree-nodes`, `last-generated-id`,
/// `max-deleted-entry-id`, `entries-added`, `recorded-first-entry-id`,
/// `groups`, `first-entry`, `last-entry`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamInfo {
    /// `length`: integer.
    pub length: u64,
    /// `radix-tree-keys`: integer.
    pub radix_tree_keys: u64,
    /// `radix-tree-nodes`: integer.
    pub radix_tree_nodes: u64,
    /// `last-generated-id`: bulk ID.
    pub last_generated_id: StreamId,
    /// `max-deleted-entry-id`: bulk ID.
    pub max_deleted_entry_id: StreamId,
    /// `entries-added`: integer.
    pub entries_added: u64,
    /// `recorded-first-entry-id`: bulk ID.
    pub recorded_first_entry_id: StreamId,
    /// `groups`: integer.
    pub groups: u64,
    /// `first-entry`: `[id, [f, v, ...]]` or nil.
    pub first_entry: Option<Entry>,
    /// `last-entry`: `[id, [f, v, ...]]` or nil.
    pub last_entry: Option<Entry>,
}

/// The field names of `XINFO STREAM`, in Redis's order.
pub const XINFO_STREAM_FIELDS: [&str; 10] = [
    "length",
    "radix-tree-keys",
    "radix-tree-nodes",
    "last-generated-id",
    "max-deleted-entry-id",
    "entries-added",
    "recorded-first-entry-id",
    "groups",
    "first-entry",
    "last-entry",
];

/// The field names of `XINFO STREAM FULL`, in Redis's order.
pub const XINFO_STREAM_FULL_FIELDS: [&str; 9] = [
    "length",
    "radix-tree-keys",
    "radix-tree-nodes",
    "last-generated-id",
    "max-deleted-entry-id",
    "entries-added",
    "recorded-first-entry-id",
    "entries",
    "groups",
];

/// The field names of a group in `XINFO STREAM FULL`.
pub const XINFO_FULL_GROUP_FIELDS: [&str; 7] = [
    "name",
    "last-delivered-id",
    "entries-read",
    "lag",
    "pel-count",
    "pending",
    "consumers",
];

/// The field names of a consumer in `XINFO STREAM FULL` (7.0: no
/// `active-time`).
pub const XINFO_FULL_CONSUMER_FIELDS: [&str; 4] = ["name", "seen-time", "pel-count", "pending"];

/// The field names of `XINFO GROUPS`' maps.
pub const XINFO_GROUPS_FIELDS: [&str; 6] = [
    "name",
    "consumers",
    "pending",
    "last-delivered-id",
    "entries-read",
    "lag",
];

/// The field names of `XINFO CONSUMERS`' maps (7.0: no `inactive`).
pub const XINFO_CONSUMERS_FIELDS: [&str; 3] = ["name", "pending", "idle"];

impl StreamInfo {
    /// The RESP reply (a map; RESP2 writes it flat).
    pub fn to_reply(&self) -> Reply {
        let e = |x: &Option<Entry>| match x {
            Some((id, f)) => entry_reply(*id, f),
            None => Reply::nil(),
        };
        let v = vec![
            int_reply(self.length),
            int_reply(self.radix_tree_keys),
            int_reply(self.radix_tree_nodes),
            self.last_generated_id.to_reply(),
            self.max_deleted_entry_id.to_reply(),
            int_reply(self.entries_added),
            self.recorded_first_entry_id.to_reply(),
            int_reply(self.groups),
            e(&self.first_entry),
            e(&self.last_entry),
        ];
        Reply::Map(
            XINFO_STREAM_FIELDS
                .iter()
                .zip(v)
                .map(|(n, v)| field(n, v))
                .collect(),
        )
    }
}

/// A pending entry in `XINFO STREAM FULL`'s group:
/// `[id, consumer, delivery-time, delivery-count]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FullGroupPending {
    /// The entry.
    pub id: StreamId,
    /// Its consumer.
    pub consumer: Vec<u8>,
    /// Last delivery (ms, Unix time).
    pub delivery_time: i64,
    /// Deliveries.
    pub delivery_count: u64,
}

/// A consumer in `XINFO STREAM FULL` (map: `name`, `seen-time`,
/// `pel-count`, `pending` = `[[id, delivery-time, delivery-count], ...]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FullConsumer {
    /// `name`: bulk.
    pub name: Vec<u8>,
    /// `seen-time`: integer (ms, Unix time).
    pub seen_time: i64,
    /// `pel-count`: integer.
    pub pel_count: u64,
    /// `pending`: at most COUNT of `(id, delivery-time, delivery-count)`.
    pub pending: Vec<(StreamId, i64, u64)>,
}

/// A group in `XINFO STREAM FULL` (map: `name`, `last-delivered-id`,
/// `entries-read` (integer or nil), `lag` (integer or nil), `pel-count`,
/// `pending`, `consumers`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FullGroup {
    /// `name`: bulk.
    pub name: Vec<u8>,
    /// `last-delivered-id`: bulk ID.
    pub last_delivered_id: StreamId,
    /// `entries-read`: integer, or nil when unknown.
    pub entries_read: Option<i64>,
    /// `lag`: integer, or nil when it cannot be known.
    pub lag: Option<i64>,
    /// `pel-count`: integer.
    pub pel_count: u64,
    /// `pending`: at most COUNT entries of the group PEL.
    pub pending: Vec<FullGroupPending>,
    /// `consumers`: every consumer.
    pub consumers: Vec<FullConsumer>,
}

/// `XINFO STREAM key FULL [COUNT n]` (a map of 9 fields:
/// [`XINFO_STREAM_FULL_FIELDS`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamInfoFull {
    /// `length`.
    pub length: u64,
    /// `radix-tree-keys`.
    pub radix_tree_keys: u64,
    /// `radix-tree-nodes`.
    pub radix_tree_nodes: u64,
    /// `last-generated-id`.
    pub last_generated_id: StreamId,
    /// `max-deleted-entry-id`.
    pub max_deleted_entry_id: StreamId,
    /// `entries-added`.
    pub entries_added: u64,
    /// `recorded-first-entry-id`.
    pub recorded_first_entry_id: StreamId,
    /// `entries`: the first COUNT entries.
    pub entries: Vec<Entry>,
    /// `groups`: every group.
    pub groups: Vec<FullGroup>,
}

impl StreamInfoFull {
    /// The RESP reply (maps; RESP2 writes them flat).
    pub fn to_reply(&self) -> Reply {
        let groups = self
            .groups
            .iter()
            .map(|g| {
                let pending = g
                    .pending
                    .iter()
                    .map(|p| {
                        Reply::Array(Some(vec![
                            p.id.to_reply(),
                            Reply::bulk(p.consumer.clone()),
                            Reply::Integer(p.delivery_time),
                            int_reply(p.delivery_count),
                        ]))
                    })
                    .collect();
                let consumers = g
                    .consumers
                    .iter()
                    .map(|c| {
                        let pending = c
                            .pending
                            .iter()
                            .map(|(id, t, n)| {
                                Reply::Array(Some(vec![
                                    id.to_reply(),
                                    Reply::Integer(*t),
                                    int_reply(*n),
                                ]))
                            })
                            .collect();
                        let v = vec![
                            Reply::bulk(c.name.clone()),
                            Reply::Integer(c.seen_time),
                            int_reply(c.pel_count),
                            Reply::Array(Some(pending)),
                        ];
                        Reply::Map(
                            XINFO_FULL_CONSUMER_FIELDS
                                .iter()
                                .zip(v)
                                .map(|(n, v)| field(n, v))
                                .collect(),
                        )
                    })
                    .collect();
                let v = vec![
                    Reply::bulk(g.name.clone()),
                    g.last_delivered_id.to_reply(),
                    opt_int(g.entries_read),
                    opt_int(g.lag),
                    int_reply(g.pel_count),
                    Reply::Array(Some(pending)),
                    Reply::Array(Some(consumers)),
                ];
                Reply::Map(
                    XINFO_FULL_GROUP_FIELDS
                        .iter()
                        .zip(v)
                        .map(|(n, v)| field(n, v))
                        .collect(),
                )
            })
            .collect();
        let v = vec![
            int_reply(self.length),
            int_reply(self.radix_tree_keys),
            int_reply(self.radix_tree_nodes),
            self.last_generated_id.to_reply(),
            self.max_deleted_entry_id.to_reply(),
            int_reply(self.entries_added),
            self.recorded_first_entry_id.to_reply(),
            entries_reply(&self.entries),
            Reply::Array(Some(groups)),
        ];
        Reply::Map(
            XINFO_STREAM_FULL_FIELDS
                .iter()
                .zip(v)
                .map(|(n, v)| field(n, v))
                .collect(),
        )
    }
}

/// One group of `XINFO GROUPS` (map: [`XINFO_GROUPS_FIELDS`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupInfo {
    /// `name`: bulk.
    pub name: Vec<u8>,
    /// `consumers`: integer.
    pub consumers: u64,
    /// `pending`: integer.
    pub pending: u64,
    /// `last-delivered-id`: bulk ID.
    pub last_delivered_id: StreamId,
    /// `entries-read`: integer or nil.
    pub entries_read: Option<i64>,
    /// `lag`: integer or nil.
    pub lag: Option<i64>,
}

impl GroupInfo {
    /// The RESP reply of one group (a map).
    pub fn to_reply(&self) -> Reply {
        let v = vec![
            Reply::bulk(self.name.clone()),
            int_reply(self.consumers),
            int_reply(self.pending),
            self.last_delivered_id.to_reply(),
            opt_int(self.entries_read),
            opt_int(self.lag),
        ];
        Reply::Map(
            XINFO_GROUPS_FIELDS
                .iter()
                .zip(v)
                .map(|(n, v)| field(n, v))
                .collect(),
        )
    }
}

/// One consumer of `XINFO CONSUMERS` (map: [`XINFO_CONSUMERS_FIELDS`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerInfo {
    /// `name`: bulk.
    pub name: Vec<u8>,
    /// `pending`: integer.
    pub pending: u64,
    /// `idle`: integer, ms since its seen-time (at least 0).
    pub idle: i64,
}

impl ConsumerInfo {
    /// The RESP reply of one consumer (a map).
    pub fn to_reply(&self) -> Reply {
        let v = vec![
            Reply::bulk(self.name.clone()),
            int_reply(self.pending),
            Reply::Integer(self.idle),
        ];
        Reply::Map(
            XINFO_CONSUMERS_FIELDS
                .iter()
                .zip(v)
                .map(|(n, v)| field(n, v))
                .collect(),
        )
    }
}

fn entries_read(g: &Group) -> Option<i64> {
    (g.entries_read != ENTRIES_READ_INVALID).then_some(g.entries_read)
}

impl Stream {
    /// `XINFO STREAM key`.
    pub fn info(&self) -> StreamInfo {
        StreamInfo {
            length: self.len(),
            radix_tree_keys: self.radix_tree_keys(),
            radix_tree_nodes: self.radix_tree_nodes(),
            last_generated_id: self.last_id,
            max_deleted_entry_id: self.max_deleted_entry_id,
            entries_added: self.entries_added,
            recorded_first_entry_id: self.first_id,
            groups: self.groups.len() as u64,
            first_entry: self.range(StreamId::MIN, StreamId::MAX, 1, false).pop(),
            last_entry: self.range(StreamId::MIN, StreamId::MAX, 1, true).pop(),
        }
    }

    /// `XINFO STREAM key FULL [COUNT count]`: `count` entries, and as many
    /// pending entries per group and per consumer (0: all).
    pub fn info_full(&self, count: usize) -> StreamInfoFull {
        let take = if count == 0 { usize::MAX } else { count };
        let groups = self
            .groups
            .iter()
            .map(|(name, g)| FullGroup {
                name: name.clone(),
                last_delivered_id: g.last_id,
                entries_read: entries_read(g),
                lag: self.lag(g),
                pel_count: g.pel.len() as u64,
                pending: g
                    .pel
                    .iter()
                    .take(take)
                    .map(|(id, n)| FullGroupPending {
                        id: *id,
                        consumer: n.consumer.clone(),
                        delivery_time: n.delivery_time,
                        delivery_count: n.delivery_count,
                    })
                    .collect(),
                consumers: g
                    .consumers
                    .iter()
                    .map(|(cname, c)| FullConsumer {
                        name: cname.clone(),
                        seen_time: c.seen_time,
                        pel_count: c.pel.len() as u64,
                        pending: c
                            .pel
                            .iter()
                            .take(take)
                            .map(|id| {
                                let (t, n) = g
                                    .pel
                                    .get(id)
                                    .map_or((0, 0), |n| (n.delivery_time, n.delivery_count));
                                (*id, t, n)
                            })
                            .collect(),
                    })
                    .collect(),
            })
            .collect();
        StreamInfoFull {
            length: self.len(),
            radix_tree_keys: self.radix_tree_keys(),
            radix_tree_nodes: self.radix_tree_nodes(),
            last_generated_id: self.last_id,
            max_deleted_entry_id: self.max_deleted_entry_id,
            entries_added: self.entries_added,
            recorded_first_entry_id: self.first_id,
            entries: self.range(StreamId::MIN, StreamId::MAX, count, false),
            groups,
        }
    }

    /// `XINFO GROUPS key`.
    pub fn info_groups(&self) -> Vec<GroupInfo> {
        self.groups
            .iter()
            .map(|(name, g)| GroupInfo {
                name: name.clone(),
                consumers: g.consumers.len() as u64,
                pending: g.pel.len() as u64,
                last_delivered_id: g.last_id,
                entries_read: entries_read(g),
                lag: self.lag(g),
            })
            .collect()
    }

    /// `XINFO CONSUMERS key group` (`None` without the group); idle times
    /// from `now_ms`.
    pub fn info_consumers(&self, group: &[u8], now_ms: u64) -> Option<Vec<ConsumerInfo>> {
        let g = self.groups.get(group)?;
        let now = ms(now_ms);
        Some(
            g.consumers
                .iter()
                .map(|(name, c)| ConsumerInfo {
                    name: name.clone(),
                    pending: c.pel.len() as u64,
                    idle: now.wrapping_sub(c.seen_time).max(0),
                })
                .collect(),
        )
    }
}

// ---------------------------------------------------------------------
// The command layer
// ---------------------------------------------------------------------

/// A key as a read command finds it.
#[derive(Debug, Clone, Copy)]
pub enum Key<'a> {
    /// No such key.
    Missing,
    /// A key of another type.
    WrongType,
    /// A stream.
    Stream(&'a Stream),
}

/// A key as a write command finds it.
#[derive(Debug)]
pub enum KeyMut<'a> {
    /// A key of another type.
    WrongType,
    /// The key's slot: `None` when absent. A command that creates the
    /// stream (XADD, `XGROUP CREATE ... MKSTREAM`) fills it; the caller
    /// stores `Some` back as the key's value (an empty stream is a key,
    /// as in Redis) and leaves the key absent on `None`.
    Slot(&'a mut Option<Stream>),
}

/// A write's reply and the keyspace events Redis fires for it (in order,
/// e.g. `xadd` then `xtrim`; `xgroup-createconsumer` when a read or claim
/// creates the consumer). Every write that returns `Ok` with a non-empty
/// `events`, or that changes the stream otherwise (XACK, XREADGROUP,
/// XCLAIM), modified the key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome<R> {
    /// The reply.
    pub reply: R,
    /// Keyspace notification event names (class `t`, stream).
    pub events: Vec<&'static str>,
    /// Redis signals the key as modified (`WATCH` sees it): XADD, XDEL
    /// and XTRIM that removed entries, `XGROUP CREATE` that created the
    /// key. (Redis 7.0 does not for group and consumer changes.)
    pub touched: bool,
}

fn outcome<R>(reply: R, events: Vec<&'static str>) -> Outcome<R> {
    Outcome {
        reply,
        events,
        touched: false,
    }
}

fn touched<R>(reply: R, events: Vec<&'static str>, touched: bool) -> Outcome<R> {
    Outcome {
        reply,
        events,
        touched,
    }
}

fn arity(args: &[Vec<u8>], n: i64, name: &'static str) -> Result<(), StreamError> {
    let len = args.len() as i64;
    if (n > 0 && len != n) || (n < 0 && len < -n) {
        Err(StreamError::Arity(name))
    } else {
        Ok(())
    }
}

fn arg(args: &[Vec<u8>], i: usize) -> &[u8] {
    args.get(i).map_or(&[][..], |a| a.as_slice())
}

/// MAXLEN/MINID as parsed, before the server's defaults apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TrimSpec {
    /// MAXLEN or MINID.
    pub strategy: TrimStrategy,
    /// `~`.
    pub approx: bool,
    /// `LIMIT n` (only with `~`).
    pub limit: Option<i64>,
}

impl TrimSpec {
    /// The trim with `cfg`'s default LIMIT ([`Trim::new`]).
    pub fn resolve(&self, cfg: &StreamConfig) -> Trim {
        Trim::new(self.strategy, self.approx, self.limit, cfg)
    }
}

/// Redis's `streamParseAddOrTrimArgsOrReply`: the options after the key;
/// returns the trim, NOMKSTREAM, the XADD ID and the index of the ID (of
/// the first field minus one).
fn parse_add_or_trim(
    args: &[Vec<u8>],
    xadd: bool,
) -> Result<(Option<TrimSpec>, bool, XaddId, usize), StreamError> {
    let n = args.len();
    let mut i = 2;
    let mut strategy: Option<TrimStrategy> = None;
    let mut approx = false;
    let mut limit: i64 = 0;
    let mut limit_given = false;
    let mut no_mkstream = false;
    let mut id = XaddId::Auto;
    while i < n {
        let more = n - 1 - i;
        let opt = arg(args, i);
        if xadd && is_exact(opt, "*") {
            break;
        } else if (is(opt, "maxlen") || is(opt, "minid")) && more > 0 {
            if strategy.is_some() {
                return Err(StreamError::Msg(msg::MAXLEN_AND_MINID));
            }
            approx = false;
            let next = arg(args, i + 1);
            if more >= 2 && is_exact(next, "~") {
                approx = true;
                i += 1;
            } else if more >= 2 && is_exact(next, "=") {
                i += 1;
            }
            let v = arg(args, i + 1);
            strategy = Some(if is(opt, "maxlen") {
                let m = int(v)?;
                if m < 0 {
                    return Err(StreamError::Msg(msg::MAXLEN_NEGATIVE));
                }
                TrimStrategy::MaxLen(m as u64)
            } else {
                TrimStrategy::MinId(StreamId::parse_strict(v, 0)?)
            });
            i += 1;
        } else if is(opt, "limit") && more > 0 {
            limit = int(arg(args, i + 1))?;
            if limit < 0 {
                return Err(StreamError::Msg(msg::LIMIT_NEGATIVE));
            }
            limit_given = true;
            i += 1;
        } else if xadd && is(opt, "nomkstream") {
            no_mkstream = true;
        } else if xadd {
            id = XaddId::parse(opt)?;
            break;
        } else {
            return Err(StreamError::Syntax);
        }
        i += 1;
    }
    if limit != 0 && strategy.is_none() {
        return Err(StreamError::Msg(msg::LIMIT_WITHOUT_STRATEGY));
    }
    if !xadd && strategy.is_none() {
        return Err(StreamError::Msg(msg::XTRIM_WITHOUT_STRATEGY));
    }
    if limit_given && !approx {
        return Err(StreamError::Msg(msg::LIMIT_WITHOUT_APPROX));
    }
    let trim = strategy.map(|strategy| TrimSpec {
        strategy,
        approx,
        limit: limit_given.then_some(limit),
    });
    Ok((trim, no_mkstream, id, i))
}

/// `XADD key [NOMKSTREAM] [MAXLEN|MINID [=|~] threshold [LIMIT count]]
/// *|id field value [field value ...]`, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Xadd {
    /// NOMKSTREAM.
    pub no_mkstream: bool,
    /// MAXLEN/MINID.
    pub trim: Option<TrimSpec>,
    /// The ID argument.
    pub id: XaddId,
    /// The field/value pairs.
    pub fields: Vec<(Vec<u8>, Vec<u8>)>,
}

impl Xadd {
    /// Parses XADD's words (the command name first); errors are those
    /// Redis gives before looking the key up: options, arity, `0-0`.
    pub fn parse(args: &[Vec<u8>]) -> Result<Xadd, StreamError> {
        arity(args, -5, "xadd")?;
        let (trim, no_mkstream, id, idpos) = parse_add_or_trim(args, true)?;
        let field_pos = idpos + 1;
        let rest = args.get(field_pos..).unwrap_or(&[]);
        if rest.len() < 2 || rest.len() % 2 == 1 {
            return Err(StreamError::Arity("xadd"));
        }
        if id == XaddId::Explicit(StreamId::MIN) {
            return Err(StreamError::IdZero);
        }
        let fields = rest
            .chunks_exact(2)
            .map(|p| (p[0].clone(), p[1].clone()))
            .collect();
        Ok(Xadd {
            no_mkstream,
            trim,
            id,
            fields,
        })
    }
}

/// Runs XADD: the new ID, or `None` (nil reply) with NOMKSTREAM on a
/// missing key. Events: `xadd`, then `xtrim` if the trim removed entries.
pub fn xadd(
    key: KeyMut<'_>,
    a: Xadd,
    now_ms: u64,
    cfg: &StreamConfig,
) -> Result<Outcome<Option<StreamId>>, StreamError> {
    let KeyMut::Slot(slot) = key else {
        return Err(StreamError::WrongType);
    };
    if slot.is_none() {
        if a.no_mkstream {
            return Ok(outcome(None, vec![]));
        }
        *slot = Some(Stream::new());
    }
    let Some(s) = slot.as_mut() else {
        return Err(StreamError::WrongType);
    };
    let id = s.add(a.id, a.fields, now_ms, cfg)?;
    let mut events = vec!["xadd"];
    if let Some(t) = a.trim {
        if s.trim(&t.resolve(cfg)) > 0 {
            events.push("xtrim");
        }
    }
    Ok(touched(Some(id), events, true))
}

/// `XTRIM key MAXLEN|MINID [=|~] threshold [LIMIT count]`, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Xtrim {
    /// The trim.
    pub trim: TrimSpec,
}

impl Xtrim {
    /// Parses XTRIM's words.
    pub fn parse(args: &[Vec<u8>]) -> Result<Xtrim, StreamError> {
        arity(args, -4, "xtrim")?;
        let (trim, _, _, _) = parse_add_or_trim(args, false)?;
        let trim = trim.ok_or(StreamError::Msg(msg::XTRIM_WITHOUT_STRATEGY))?;
        Ok(Xtrim { trim })
    }
}

/// Runs XTRIM: the number of entries removed (0 for a missing key).
/// Event: `xtrim` when some were.
pub fn xtrim(key: KeyMut<'_>, a: &Xtrim, cfg: &StreamConfig) -> Result<Outcome<u64>, StreamError> {
    match key {
        KeyMut::WrongType => Err(StreamError::WrongType),
        KeyMut::Slot(slot) => match slot.as_mut() {
            None => Ok(outcome(0, vec![])),
            Some(s) => {
                let n = s.trim(&a.trim.resolve(cfg));
                Ok(touched(
                    n,
                    if n > 0 { vec!["xtrim"] } else { vec![] },
                    n > 0,
                ))
            }
        },
    }
}

/// `XDEL key id [id ...]`, parsed (the IDs are checked after the key, as
/// in Redis: a missing key answers 0 whatever they are).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Xdel {
    /// The ID words.
    pub ids: Vec<Vec<u8>>,
}

impl Xdel {
    /// Parses XDEL's words.
    pub fn parse(args: &[Vec<u8>]) -> Result<Xdel, StreamError> {
        arity(args, -3, "xdel")?;
        Ok(Xdel {
            ids: args.get(2..).unwrap_or(&[]).to_vec(),
        })
    }
}

fn strict_ids(words: &[Vec<u8>]) -> Result<Vec<StreamId>, StreamError> {
    words.iter().map(|w| StreamId::parse_strict(w, 0)).collect()
}

/// Runs XDEL: entries deleted. Event: `xdel` when some were.
pub fn xdel(key: KeyMut<'_>, a: &Xdel) -> Result<Outcome<u64>, StreamError> {
    match key {
        KeyMut::WrongType => Err(StreamError::WrongType),
        KeyMut::Slot(slot) => match slot.as_mut() {
            None => Ok(outcome(0, vec![])),
            Some(s) => {
                let ids = strict_ids(&a.ids)?;
                let n = s.delete(&ids);
                Ok(touched(n, if n > 0 { vec!["xdel"] } else { vec![] }, n > 0))
            }
        },
    }
}

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

/// `XGROUP ...`, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Xgroup {
    /// `XGROUP HELP`.
    Help,
    /// `XGROUP CREATE key group id|$ [MKSTREAM] [ENTRIESREAD n]`.
    Create {
        /// The key.
        key: Vec<u8>,
        /// The group.
        group: Vec<u8>,
        /// The ID word (checked after the key).
        id: Vec<u8>,
        /// MKSTREAM.
        mkstream: bool,
        /// ENTRIESREAD ([`ENTRIES_READ_INVALID`] when not given).
        entries_read: i64,
        /// Too many words: the error Redis gives after the key checks.
        late_error: Option<StreamError>,
    },
    /// `XGROUP SETID key group id|$ [ENTRIESREAD n]`.
    SetId {
        /// The key.
        key: Vec<u8>,
        /// The group.
        group: Vec<u8>,
        /// The ID word (checked after the key; `-`/`+` allowed).
        id: Vec<u8>,
        /// ENTRIESREAD ([`ENTRIES_READ_INVALID`] when not given).
        entries_read: i64,
        /// Wrong number of words: the error Redis gives after the key
        /// checks.
        late_error: Option<StreamError>,
    },
    /// `XGROUP DESTROY key group`.
    Destroy {
        /// The key.
        key: Vec<u8>,
        /// The group.
        group: Vec<u8>,
    },
    /// `XGROUP CREATECONSUMER key group consumer`.
    CreateConsumer {
        /// The key.
        key: Vec<u8>,
        /// The group.
        group: Vec<u8>,
        /// The consumer.
        consumer: Vec<u8>,
    },
    /// `XGROUP DELCONSUMER key group consumer`.
    DelConsumer {
        /// The key.
        key: Vec<u8>,
        /// The group.
        group: Vec<u8>,
        /// The consumer.
        consumer: Vec<u8>,
    },
}

/// What XGROUP replies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum XgroupReply {
    /// `+OK` (CREATE, SETID).
    Ok,
    /// An integer (DESTROY: 0/1, CREATECONSUMER: 0/1, DELCONSUMER: the
    /// pending count).
    Int(i64),
    /// HELP's lines (status replies).
    Help(Vec<&'static str>),
}

impl XgroupReply {
    /// The RESP reply.
    pub fn to_reply(&self) -> Reply {
        match self {
            XgroupReply::Ok => Reply::ok(),
            XgroupReply::Int(n) => Reply::Integer(*n),
            XgroupReply::Help(lines) => help_reply(lines),
        }
    }
}

fn help_reply(lines: &[&'static str]) -> Reply {
    Reply::Array(Some(
        lines
            .iter()
            .map(|l| Reply::Simple((*l).to_string()))
            .collect(),
    ))
}

/// The lines of `XGROUP HELP`.
pub const XGROUP_HELP: [&str; 17] = [
    "XGROUP <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "CREATE <key> <groupname> <id|$> [option]",
    "    Create a new consumer group. Options are:",
    "    * MKSTREAM",
    "      Create the empty stream if it does not exist.",
    "    * ENTRIESREAD entries_read",
    "      Set the group's entries_read counter (internal use).",
    "CREATECONSUMER <key> <groupname> <consumer>",
    "    Create a new consumer in the specified group.",
    "DELCONSUMER <key> <groupname> <consumer>",
    "    Remove the specified consumer.",
    "DESTROY <key> <groupname>",
    "    Remove the specified group.",
    "SETID <key> <groupname> <id|$> [ENTRIESREAD entries_read]",
    "    Set the current group ID and entries_read counter.",
    "HELP",
    "    Prints this help.",
];

/// The lines of `XINFO HELP`.
pub const XINFO_HELP: [&str; 9] = [
    "XINFO <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "CONSUMERS <key> <groupname>",
    "    Show consumers of <groupname>.",
    "GROUPS <key>",
    "    Show the stream consumer groups.",
    "STREAM <key> [FULL [COUNT <count>]",
    "    Show information about the stream.",
    "HELP",
    "    Prints this help.",
];

/// The subcommand of a container command: its lower-case name if known,
/// with the dispatcher's errors (`xgroup`/`xinfo` arity, unknown
/// subcommand, the subcommand's arity).
fn subcommand(
    args: &[Vec<u8>],
    cmd: &'static str,
    upper: &'static str,
    subs: &[(&'static str, i64, &'static str)],
) -> Result<&'static str, StreamError> {
    if args.len() < 2 {
        return Err(StreamError::Arity(cmd));
    }
    let sub = arg(args, 1);
    let Some(&(name, ar, full)) = subs
        .iter()
        .find(|(n, _, _)| sub.eq_ignore_ascii_case(n.as_bytes()))
    else {
        return Err(StreamError::UnknownSubcommand {
            sub: ctext(sub, 128),
            cmd: upper,
        });
    };
    arity(args, ar, full)?;
    Ok(name)
}

fn subcommand_syntax(args: &[Vec<u8>], cmd: &'static str) -> StreamError {
    StreamError::SubcommandSyntax {
        sub: ctext(arg(args, 1), 128),
        cmd,
    }
}

impl Xgroup {
    /// Parses XGROUP's words: the dispatcher's checks, then the options of
    /// CREATE/SETID (errors Redis gives before looking the key up).
    pub fn parse(args: &[Vec<u8>]) -> Result<Xgroup, StreamError> {
        let sub = subcommand(
            args,
            "xgroup",
            "XGROUP",
            &[
                ("create", -5, "xgroup|create"),
                ("setid", -5, "xgroup|setid"),
                ("destroy", 4, "xgroup|destroy"),
                ("createconsumer", 5, "xgroup|createconsumer"),
                ("delconsumer", 5, "xgroup|delconsumer"),
                ("help", 2, "xgroup|help"),
            ],
        )?;
        let n = args.len();
        let mut mkstream = false;
        let mut entries_read = ENTRIES_READ_INVALID;
        if n >= 4 {
            let create = sub == "create";
            let setid = sub == "setid";
            let mut i = 5;
            while i < n {
                if create && is(arg(args, i), "MKSTREAM") {
                    mkstream = true;
                    i += 1;
                } else if (create || setid) && is(arg(args, i), "ENTRIESREAD") && i + 1 < n {
                    entries_read = int(arg(args, i + 1))?;
                    if entries_read < 0 && entries_read != ENTRIES_READ_INVALID {
                        return Err(StreamError::Msg(msg::ENTRIESREAD_NEGATIVE));
                    }
                    i += 2;
                } else {
                    return Err(subcommand_syntax(args, "XGROUP"));
                }
            }
        }
        let key = arg(args, 2).to_vec();
        let group = arg(args, 3).to_vec();
        Ok(match sub {
            "help" => Xgroup::Help,
            "create" => Xgroup::Create {
                key,
                group,
                id: arg(args, 4).to_vec(),
                mkstream,
                entries_read,
                late_error: (!(5..=8).contains(&n)).then(|| subcommand_syntax(args, "XGROUP")),
            },
            "setid" => Xgroup::SetId {
                key,
                group,
                id: arg(args, 4).to_vec(),
                entries_read,
                late_error: (n != 5 && n != 7).then(|| subcommand_syntax(args, "XGROUP")),
            },
            "destroy" => Xgroup::Destroy { key, group },
            "createconsumer" => Xgroup::CreateConsumer {
                key,
                group,
                consumer: arg(args, 4).to_vec(),
            },
            _ => Xgroup::DelConsumer {
                key,
                group,
                consumer: arg(args, 4).to_vec(),
            },
        })
    }

    /// The key it names (`None` for HELP).
    pub fn key(&self) -> Option<&[u8]> {
        match self {
            Xgroup::Help => None,
            Xgroup::Create { key, .. }
            | Xgroup::SetId { key, .. }
            | Xgroup::Destroy { key, .. }
            | Xgroup::CreateConsumer { key, .. }
            | Xgroup::DelConsumer { key, .. } => Some(key),
        }
    }
}

/// Runs XGROUP (HELP needs no key: pass any `key`). Events:
/// `xgroup-create`, `xgroup-setid`, `xgroup-destroy`,
/// `xgroup-createconsumer`, `xgroup-delconsumer` when they did something.
pub fn xgroup(
    key: KeyMut<'_>,
    a: &Xgroup,
    now_ms: u64,
) -> Result<Outcome<XgroupReply>, StreamError> {
    let (name, group, mkstream) = match a {
        Xgroup::Help => return Ok(outcome(XgroupReply::Help(XGROUP_HELP.to_vec()), vec![])),
        Xgroup::Create {
            key,
            group,
            mkstream,
            ..
        } => (key, group, *mkstream),
        Xgroup::SetId { key, group, .. }
        | Xgroup::Destroy { key, group }
        | Xgroup::CreateConsumer { key, group, .. }
        | Xgroup::DelConsumer { key, group, .. } => (key, group, false),
    };
    let KeyMut::Slot(slot) = key else {
        return Err(StreamError::WrongType);
    };
    if !mkstream {
        let Some(s) = slot.as_ref() else {
            return Err(StreamError::Msg(msg::XGROUP_NEEDS_KEY));
        };
        let needs_group = matches!(
            a,
            Xgroup::SetId { .. } | Xgroup::CreateConsumer { .. } | Xgroup::DelConsumer { .. }
        );
        if needs_group && s.group(group).is_none() {
            return Err(nogroup_for_key(name, group));
        }
    }
    match a {
        Xgroup::Help => Ok(outcome(XgroupReply::Help(XGROUP_HELP.to_vec()), vec![])),
        Xgroup::Create {
            id,
            entries_read,
            late_error,
            ..
        } => {
            if let Some(e) = late_error {
                return Err(e.clone());
            }
            let last = if is_exact(id, "$") {
                slot.as_ref().map_or(StreamId::MIN, |s| s.last_id())
            } else {
                StreamId::parse_strict(id, 0)?
            };
            let created = slot.is_none();
            let s = slot.get_or_insert_with(Stream::new);
            if s.create_group(group, last, *entries_read) {
                Ok(touched(XgroupReply::Ok, vec!["xgroup-create"], created))
            } else {
                Err(StreamError::Msg(msg::BUSYGROUP))
            }
        }
        Xgroup::SetId {
            id,
            entries_read,
            late_error,
            ..
        } => {
            if let Some(e) = late_error {
                return Err(e.clone());
            }
            let Some(s) = slot.as_mut() else {
                return Err(StreamError::Msg(msg::XGROUP_NEEDS_KEY));
            };
            let last = if is_exact(id, "$") {
                s.last_id()
            } else {
                StreamId::parse(id, 0)?
            };
            s.set_group_id(group, last, *entries_read);
            Ok(outcome(XgroupReply::Ok, vec!["xgroup-setid"]))
        }
        Xgroup::Destroy { .. } => {
            let done = slot.as_mut().is_some_and(|s| s.destroy_group(group));
            Ok(outcome(
                XgroupReply::Int(i64::from(done)),
                if done { vec!["xgroup-destroy"] } else { vec![] },
            ))
        }
        Xgroup::CreateConsumer { consumer, .. } => {
            let created = slot
                .as_mut()
                .and_then(|s| s.create_consumer(group, consumer, now_ms))
                .unwrap_or(false);
            Ok(outcome(
                XgroupReply::Int(i64::from(created)),
                if created {
                    vec!["xgroup-createconsumer"]
                } else {
                    vec![]
                },
            ))
        }
        Xgroup::DelConsumer { consumer, .. } => {
            let s = slot.as_mut();
            let existed = s
                .as_ref()
                .and_then(|s| s.group(group))
                .is_some_and(|g| g.consumers.contains_key(consumer.as_slice()));
            let pending = s
                .and_then(|s| s.delete_consumer(group, consumer))
                .unwrap_or(0);
            Ok(outcome(
                XgroupReply::Int(pending as i64),
                if existed {
                    vec!["xgroup-delconsumer"]
                } else {
                    vec![]
                },
            ))
        }
    }
}

/// `XSETID key last-id [ENTRIESADDED n] [MAXDELETEDID id]`, parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Xsetid {
    /// The new last ID.
    pub id: StreamId,
    /// ENTRIESADDED.
    pub entries_added: Option<u64>,
    /// MAXDELETEDID.
    pub max_deleted: Option<StreamId>,
}

impl Xsetid {
    /// Parses XSETID's words.
    pub fn parse(args: &[Vec<u8>]) -> Result<Xsetid, StreamError> {
        arity(args, -3, "xsetid")?;
        let id = StreamId::parse_strict(arg(args, 2), 0)?;
        let mut r = Xsetid {
            id,
            entries_added: None,
            max_deleted: None,
        };
        let n = args.len();
        let mut i = 3;
        while i < n {
            let more = n - 1 - i;
            let o = arg(args, i);
            if is(o, "ENTRIESADDED") && more > 0 {
                let v = int(arg(args, i + 1))?;
                if v < 0 {
                    return Err(StreamError::Msg(msg::ENTRIES_ADDED_NEGATIVE));
                }
                r.entries_added = Some(v as u64);
                i += 2;
            } else if is(o, "MAXDELETEDID") && more > 0 {
                let m = StreamId::parse_strict(arg(args, i + 1), 0)?;
                if id < m {
                    return Err(StreamError::Msg(msg::XSETID_BELOW_MAXDELETED));
                }
                r.max_deleted = Some(m);
                i += 2;
            } else {
                return Err(StreamError::Syntax);
            }
        }
        Ok(r)
    }
}

/// Runs XSETID (`+OK`). Event: `xsetid`.
pub fn xsetid(key: KeyMut<'_>, a: &Xsetid) -> Result<Outcome<()>, StreamError> {
    match key {
        KeyMut::WrongType => Err(StreamError::WrongType),
        KeyMut::Slot(slot) => match slot.as_mut() {
            None => Err(StreamError::NoSuchKey),
            Some(s) => {
                s.set_id(a.id, a.entries_added, a.max_deleted)?;
                Ok(outcome((), vec!["xsetid"]))
            }
        },
    }
}

/// `XACK key group id [id ...]`, parsed (the IDs are checked after the
/// key and group, as in Redis).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Xack {
    /// The group.
    pub group: Vec<u8>,
    /// The ID words.
    pub ids: Vec<Vec<u8>>,
}

impl Xack {
    /// Parses XACK's words.
    pub fn parse(args: &[Vec<u8>]) -> Result<Xack, StreamError> {
        arity(args, -4, "xack")?;
        Ok(Xack {
            group: arg(args, 2).to_vec(),
            ids: args.get(3..).unwrap_or(&[]).to_vec(),
        })
    }
}

/// Runs XACK: how many IDs were pending (0 without the key or group).
pub fn xack(key: KeyMut<'_>, a: &Xack) -> Result<Outcome<u64>, StreamError> {
    let KeyMut::Slot(slot) = key else {
        return Err(StreamError::WrongType);
    };
    let Some(s) = slot.as_mut().filter(|s| s.group(&a.group).is_some()) else {
        return Ok(outcome(0, vec![]));
    };
    let ids = strict_ids(&a.ids)?;
    Ok(outcome(s.ack(&a.group, &ids).unwrap_or(0), vec![]))
}

/// `XPENDING key group [[IDLE ms] start end count [consumer]]`, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Xpending {
    /// The group.
    pub group: Vec<u8>,
    /// The extended form (`None`: the summary).
    pub range: Option<PendingRange>,
}

/// What XPENDING replies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum XpendingReply {
    /// The summary form.
    Summary(PendingSummary),
    /// The extended form.
    Entries(Vec<PendingEntry>),
}

impl XpendingReply {
    /// The RESP reply.
    pub fn to_reply(&self) -> Reply {
        match self {
            XpendingReply::Summary(s) => s.to_reply(),
            XpendingReply::Entries(e) => pending_entries_reply(e),
        }
    }
}

impl Xpending {
    /// Parses XPENDING's words.
    pub fn parse(args: &[Vec<u8>]) -> Result<Xpending, StreamError> {
        arity(args, -3, "xpending")?;
        let n = args.len();
        if n != 3 && !(6..=9).contains(&n) {
            return Err(StreamError::Syntax);
        }
        let mut range = None;
        if n >= 6 {
            let mut at = 3;
            let mut min_idle = 0;
            if is(arg(args, 3), "IDLE") {
                min_idle = int(arg(args, 4))?;
                if n < 8 {
                    return Err(StreamError::Syntax);
                }
                at += 2;
            }
            let count = int(arg(args, at + 2))?.max(0) as u64;
            let start = range_start(arg(args, at))?;
            let end = range_end(arg(args, at + 1))?;
            let consumer = args.get(at + 3).cloned();
            range = Some(PendingRange {
                min_idle,
                start,
                end,
                count,
                consumer,
            });
        }
        Ok(Xpending {
            group: arg(args, 2).to_vec(),
            range,
        })
    }
}

/// Runs XPENDING at `now_ms` (idle times); `key_name` for the NOGROUP
/// error.
pub fn xpending(
    key: Key<'_>,
    key_name: &[u8],
    a: &Xpending,
    now_ms: u64,
) -> Result<XpendingReply, StreamError> {
    let s = match key {
        Key::WrongType => return Err(StreamError::WrongType),
        Key::Missing => None,
        Key::Stream(s) => Some(s),
    };
    let err = || nogroup(key_name, &a.group, "");
    let s = s.filter(|s| s.group(&a.group).is_some()).ok_or_else(err)?;
    match &a.range {
        None => s
            .pending_summary(&a.group)
            .map(XpendingReply::Summary)
            .ok_or_else(err),
        Some(r) => s
            .pending_range(&a.group, r, now_ms)
            .map(XpendingReply::Entries)
            .ok_or_else(err),
    }
}

/// `XCLAIM key group consumer min-idle-time id [id ...] [IDLE ms] [TIME
/// ms] [RETRYCOUNT n] [FORCE] [JUSTID] [LASTID id]`, parsed (Redis reads
/// everything after the group check, so the words are kept).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Xclaim {
    /// The group.
    pub group: Vec<u8>,
    /// The consumer.
    pub consumer: Vec<u8>,
    /// min-idle-time, the IDs and the options, as words.
    pub rest: Vec<Vec<u8>>,
}

impl Xclaim {
    /// Parses XCLAIM's words (arity only).
    pub fn parse(args: &[Vec<u8>]) -> Result<Xclaim, StreamError> {
        arity(args, -6, "xclaim")?;
        Ok(Xclaim {
            group: arg(args, 2).to_vec(),
            consumer: arg(args, 3).to_vec(),
            rest: args.get(4..).unwrap_or(&[]).to_vec(),
        })
    }

    /// The min-idle-time, IDs and options (IDs are read until the first
    /// word that is not one; the rest must be options).
    pub fn options(&self) -> Result<(Vec<StreamId>, ClaimOptions), StreamError> {
        let mut o = ClaimOptions {
            min_idle: int_or(arg(&self.rest, 0), msg::XCLAIM_MIN_IDLE)?.max(0),
            ..ClaimOptions::default()
        };
        let words = self.rest.get(1..).unwrap_or(&[]);
        let mut ids = Vec::new();
        let mut j = 0;
        while j < words.len() {
            match StreamId::parse_strict(&words[j], 0) {
                Ok(id) => ids.push(id),
                Err(_) => break,
            }
            j += 1;
        }
        while j < words.len() {
            let more = words.len() - 1 - j;
            let w = &words[j];
            if is(w, "FORCE") {
                o.force = true;
            } else if is(w, "JUSTID") {
                o.just_id = true;
            } else if is(w, "IDLE") && more > 0 {
                j += 1;
                o.delivery = Some(ClaimDelivery::Idle(int_or(&words[j], msg::XCLAIM_IDLE)?));
            } else if is(w, "TIME") && more > 0 {
                j += 1;
                o.delivery = Some(ClaimDelivery::Time(int_or(&words[j], msg::XCLAIM_TIME)?));
            } else if is(w, "RETRYCOUNT") && more > 0 {
                j += 1;
                o.retry_count = Some(int_or(&words[j], msg::XCLAIM_RETRYCOUNT)?);
            } else if is(w, "LASTID") && more > 0 {
                j += 1;
                o.last_id = Some(StreamId::parse_strict(&words[j], 0)?);
            } else {
                return Err(StreamError::UnrecognizedXclaimOption(ctext(w, usize::MAX)));
            }
            j += 1;
        }
        Ok((ids, o))
    }
}

/// Runs XCLAIM at `now_ms`; `key_name` for the NOGROUP error. Event:
/// `xgroup-createconsumer` when the consumer was created.
pub fn xclaim(
    key: KeyMut<'_>,
    key_name: &[u8],
    a: &Xclaim,
    now_ms: u64,
) -> Result<Outcome<Claimed>, StreamError> {
    let KeyMut::Slot(slot) = key else {
        return Err(StreamError::WrongType);
    };
    let Some(s) = slot.as_mut().filter(|s| s.group(&a.group).is_some()) else {
        return Err(nogroup(key_name, &a.group, ""));
    };
    let (ids, o) = a.options()?;
    let r = s
        .claim(&a.group, &a.consumer, &ids, &o, now_ms)
        .ok_or_else(|| nogroup(key_name, &a.group, ""))?;
    let events = if r.consumer_created {
        vec!["xgroup-createconsumer"]
    } else {
        vec![]
    };
    Ok(outcome(r.claimed, events))
}

/// `XAUTOCLAIM key group consumer min-idle-time start [COUNT n]
/// [JUSTID]`, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Xautoclaim {
    /// The group.
    pub group: Vec<u8>,
    /// The consumer.
    pub consumer: Vec<u8>,
    /// min-idle-time (negative taken as 0).
    pub min_idle: i64,
    /// Where the PEL scan starts.
    pub start: StreamId,
    /// COUNT (default 100).
    pub count: u64,
    /// JUSTID.
    pub just_id: bool,
}

impl Xautoclaim {
    /// Parses XAUTOCLAIM's words.
    pub fn parse(args: &[Vec<u8>]) -> Result<Xautoclaim, StreamError> {
        arity(args, -6, "xautoclaim")?;
        let min_idle = int_or(arg(args, 4), msg::XAUTOCLAIM_MIN_IDLE)?.max(0);
        let start = range_start(arg(args, 5))?;
        let mut r = Xautoclaim {
            group: arg(args, 2).to_vec(),
            consumer: arg(args, 3).to_vec(),
            min_idle,
            start,
            count: 100,
            just_id: false,
        };
        let n = args.len();
        let mut j = 6;
        while j < n {
            let more = n - 1 - j;
            let o = arg(args, j);
            if is(o, "COUNT") && more > 0 {
                let max = i64::MAX / 16;
                let c = int_or(arg(args, j + 1), msg::XAUTOCLAIM_COUNT)?;
                if !(1..=max).contains(&c) {
                    return Err(StreamError::Msg(msg::XAUTOCLAIM_COUNT));
                }
                r.count = c as u64;
                j += 1;
            } else if is(o, "JUSTID") {
                r.just_id = true;
            } else {
                return Err(StreamError::Syntax);
            }
            j += 1;
        }
        Ok(r)
    }
}

/// Runs XAUTOCLAIM at `now_ms`; `key_name` for the NOGROUP error. Event:
/// `xgroup-createconsumer` when the consumer was created.
pub fn xautoclaim(
    key: KeyMut<'_>,
    key_name: &[u8],
    a: &Xautoclaim,
    now_ms: u64,
) -> Result<Outcome<AutoClaimOutcome>, StreamError> {
    let KeyMut::Slot(slot) = key else {
        return Err(StreamError::WrongType);
    };
    let Some(s) = slot.as_mut() else {
        return Err(nogroup(key_name, &a.group, ""));
    };
    let r = s
        .autoclaim(a, now_ms)
        .ok_or_else(|| nogroup(key_name, &a.group, ""))?;
    let events = if r.consumer_created {
        vec!["xgroup-createconsumer"]
    } else {
        vec![]
    };
    Ok(outcome(r, events))
}

/// `XINFO ...`, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Xinfo {
    /// `XINFO HELP`.
    Help,
    /// `XINFO STREAM key [FULL [COUNT n]]` (the option words, which Redis
    /// checks after the key).
    Stream {
        /// The key.
        key: Vec<u8>,
        /// The words after the key.
        options: Vec<Vec<u8>>,
        /// The subcommand as given (for the syntax error).
        sub: Vec<u8>,
    },
    /// `XINFO GROUPS key`.
    Groups {
        /// The key.
        key: Vec<u8>,
    },
    /// `XINFO CONSUMERS key group`.
    Consumers {
        /// The key.
        key: Vec<u8>,
        /// The group.
        group: Vec<u8>,
    },
}

impl Xinfo {
    /// Parses XINFO's words (the dispatcher's checks).
    pub fn parse(args: &[Vec<u8>]) -> Result<Xinfo, StreamError> {
        let sub = subcommand(
            args,
            "xinfo",
            "XINFO",
            &[
                ("stream", -3, "xinfo|stream"),
                ("groups", 3, "xinfo|groups"),
                ("consumers", 4, "xinfo|consumers"),
                ("help", 2, "xinfo|help"),
            ],
        )?;
        let key = arg(args, 2).to_vec();
        Ok(match sub {
            "help" => Xinfo::Help,
            "stream" => Xinfo::Stream {
                key,
                options: args.get(3..).unwrap_or(&[]).to_vec(),
                sub: arg(args, 1).to_vec(),
            },
            "groups" => Xinfo::Groups { key },
            _ => Xinfo::Consumers {
                key,
                group: arg(args, 3).to_vec(),
            },
        })
    }

    /// The key it names (`None` for HELP).
    pub fn key(&self) -> Option<&[u8]> {
        match self {
            Xinfo::Help => None,
            Xinfo::Stream { key, .. } | Xinfo::Groups { key } | Xinfo::Consumers { key, .. } => {
                Some(key)
            }
        }
    }
}

/// What XINFO replies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum XinfoReply {
    /// HELP's lines.
    Help(Vec<&'static str>),
    /// `XINFO STREAM key`.
    Stream(StreamInfo),
    /// `XINFO STREAM key FULL`.
    Full(StreamInfoFull),
    /// `XINFO GROUPS key`: an array of maps.
    Groups(Vec<GroupInfo>),
    /// `XINFO CONSUMERS key group`: an array of maps.
    Consumers(Vec<ConsumerInfo>),
}

impl XinfoReply {
    /// The RESP reply.
    pub fn to_reply(&self) -> Reply {
        match self {
            XinfoReply::Help(lines) => help_reply(lines),
            XinfoReply::Stream(i) => i.to_reply(),
            XinfoReply::Full(i) => i.to_reply(),
            XinfoReply::Groups(g) => {
                Reply::Array(Some(g.iter().map(GroupInfo::to_reply).collect()))
            }
            XinfoReply::Consumers(c) => {
                Reply::Array(Some(c.iter().map(ConsumerInfo::to_reply).collect()))
            }
        }
    }
}

/// Runs XINFO at `now_ms` (CONSUMERS' idle times).
pub fn xinfo(key: Key<'_>, a: &Xinfo, now_ms: u64) -> Result<XinfoReply, StreamError> {
    if *a == Xinfo::Help {
        return Ok(XinfoReply::Help(XINFO_HELP.to_vec()));
    }
    let s = match key {
        Key::WrongType => return Err(StreamError::WrongType),
        Key::Missing => return Err(StreamError::NoSuchKey),
        Key::Stream(s) => s,
    };
    match a {
        Xinfo::Help => Ok(XinfoReply::Help(XINFO_HELP.to_vec())),
        Xinfo::Groups { .. } => Ok(XinfoReply::Groups(s.info_groups())),
        Xinfo::Consumers { key, group } => s
            .info_consumers(group, now_ms)
            .map(XinfoReply::Consumers)
            .ok_or_else(|| nogroup_for_key(key, group)),
        Xinfo::Stream { options, sub, .. } => {
            let syntax = || StreamError::SubcommandSyntax {
                sub: ctext(sub, 128),
                cmd: "XINFO",
            };
            match options.len() {
                0 => Ok(XinfoReply::Stream(s.info())),
                1 | 3 => {
                    if !is(&options[0], "full") {
                        return Err(syntax());
                    }
                    let mut count = 10;
                    if options.len() == 3 {
                        if !is(&options[1], "count") {
                            return Err(syntax());
                        }
                        count = int(&options[2])?;
                        if count < 0 {
                            count = 10;
                        }
                    }
                    Ok(XinfoReply::Full(
                        s.info_full(usize::try_from(count).unwrap_or(usize::MAX)),
                    ))
                }
                _ => Err(syntax()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(ms: u64, seq: u64) -> StreamId {
        StreamId::new(ms, seq)
    }

    fn words(s: &str) -> Vec<Vec<u8>> {
        s.split(' ').map(|w| w.as_bytes().to_vec()).collect()
    }

    fn fields(pairs: &[(&str, &str)]) -> Vec<(Vec<u8>, Vec<u8>)> {
        pairs
            .iter()
            .map(|(f, v)| (f.as_bytes().to_vec(), v.as_bytes().to_vec()))
            .collect()
    }

    const MAX: u64 = u64::MAX;

    #[test]
    fn ids_parse_as_redis_does() {
        // (word, missing seq, strict, expected); the quirks on the right
        // are what redis-server 7.0.15 answered to XADD.
        let bad = Err(StreamError::InvalidId);
        type Row = (&'static [u8], u64, bool, Result<StreamId, StreamError>);
        let table: &[Row] = &[
            (b"5-1", 0, false, Ok(id(5, 1))),
            (b"5", 0, false, Ok(id(5, 0))),
            (b"5", MAX, false, Ok(id(5, MAX))),
            (b"-", 0, false, Ok(id(0, 0))),
            (b"+", 0, false, Ok(id(MAX, MAX))),
            (b"-", 0, true, bad.clone()),
            (b"+", 0, true, bad.clone()),
            (b" 5-1", 0, true, Ok(id(5, 1))),
            (b"+6", 0, true, Ok(id(6, 0))),
            (b"7-+1", 0, true, Ok(id(7, 1))),
            (b"8- 2", 0, true, Ok(id(8, 2))),
            (b"9-05", 0, true, Ok(id(9, 5))),
            (b"10--5", 0, true, bad.clone()),
            (b"11--05", 0, true, Ok(id(11, MAX - 4))),
            (b"12-0x1", 0, true, bad.clone()),
            (b"013-1", 0, true, Ok(id(13, 1))),
            (b"14-18446744073709551615", 0, true, Ok(id(14, MAX))),
            (b"15-18446744073709551616", 0, true, bad.clone()),
            (b"16-", 0, true, bad.clone()),
            (b"-17", 0, true, bad.clone()),
            (b"18-*", 0, true, bad.clone()),
            (b"20-1-2", 0, true, bad.clone()),
            (b"21.5", 0, true, bad.clone()),
            (b"30\0junk", 0, true, Ok(id(30, 0))),
            (b"", 0, false, bad.clone()),
            (b" ", 0, false, bad.clone()),
        ];
        for (w, missing, strict, want) in table {
            let got = if *strict {
                StreamId::parse_strict(w, *missing)
            } else {
                StreamId::parse(w, *missing)
            };
            assert_eq!(&got, want, "{:?}", String::from_utf8_lossy(w));
        }
        assert_eq!(
            StreamId::parse(&[b'1'; 128], 0),
            Err(StreamError::InvalidId)
        );
    }

    #[test]
    fn xadd_ids_parse() {
        for (w, want) in [
            ("*", Ok(XaddId::Auto)),
            ("5-*", Ok(XaddId::Ms(5))),
            ("5", Ok(XaddId::Explicit(id(5, 0)))),
            ("5-3", Ok(XaddId::Explicit(id(5, 3)))),
            ("*-1", Err(StreamError::InvalidId)),
            ("5-*x", Err(StreamError::InvalidId)),
            ("-", Err(StreamError::InvalidId)),
        ] {
            assert_eq!(XaddId::parse(w.as_bytes()), want, "{w}");
        }
    }

    #[test]
    fn ids_step_and_print() {
        assert_eq!(id(1, MAX).incr(), Some(id(2, 0)));
        assert_eq!(id(1, 1).incr(), Some(id(1, 2)));
        assert_eq!(StreamId::MAX.incr(), None);
        assert_eq!(id(2, 0).decr(), Some(id(1, MAX)));
        assert_eq!(StreamId::MIN.decr(), None);
        assert_eq!(id(12, 3).to_string(), "12-3");
        assert!(id(1, MAX) < id(2, 0));
    }

    #[test]
    fn range_bounds() {
        let table: &[(&str, bool, Result<StreamId, StreamError>)] = &[
            ("-", true, Ok(id(0, 0))),
            ("(5-1", true, Ok(id(5, 2))),
            ("(5", true, Ok(id(5, 1))),
            ("5", true, Ok(id(5, 0))),
            (
                "(18446744073709551615-18446744073709551615",
                true,
                Err(StreamError::InvalidStart),
            ),
            ("(-", true, Err(StreamError::InvalidId)),
            ("(", true, Err(StreamError::InvalidId)),
            ("+", false, Ok(StreamId::MAX)),
            ("5", false, Ok(id(5, MAX))),
            ("(5-1", false, Ok(id(5, 0))),
            ("(6", false, Ok(id(6, MAX - 1))),
            ("(6-0", false, Ok(id(5, MAX))),
            ("(0-0", false, Err(StreamError::InvalidEnd)),
            ("(+", false, Err(StreamError::InvalidId)),
        ];
        for (w, start, want) in table {
            let got = if *start {
                range_start(w.as_bytes())
            } else {
                range_end(w.as_bytes())
            };
            assert_eq!(&got, want, "{w}");
        }
    }

    #[test]
    fn listpack_element_sizes() {
        // (element, bytes with its back-length).
        for (s, n) in [
            ("0", 2),
            ("127", 2),
            ("128", 3),
            ("-4096", 3),
            ("4096", 4),
            ("-32768", 4),
            ("32768", 5),
            ("8388608", 6),
            ("2147483648", 10),
            ("-0", 4),
            ("007", 5),
            ("", 2),
            ("abc", 5),
            ("18446744073709551616", 22),
        ] {
            assert_eq!(lp_str(s.as_bytes()), n, "{s}");
        }
        assert_eq!(lp_str(&[b'a'; 63]), 65);
        assert_eq!(lp_str(&[b'a'; 64]), 66 + 1);
        assert_eq!(lp_str(&[b'a'; 4096]), 4101 + 2);
    }

    #[test]
    fn rax_node_counts() {
        let key = |b: &[(usize, u8)]| {
            let mut k = [0u8; 16];
            for &(i, v) in b {
                k[i] = v;
            }
            k
        };
        // (keys, nodes): a compressed run per stretch between branches,
        // a node per branch, a leaf per key.
        let table: Vec<(Vec<[u8; 16]>, u64)> = vec![
            (vec![key(&[])], 2),
            (vec![key(&[]), key(&[(15, 1)])], 4),
            (vec![key(&[]), key(&[(0, 1)])], 5),
            (vec![key(&[]), key(&[(8, 1)])], 6),
            (vec![key(&[]), key(&[(15, 1)]), key(&[(15, 2)])], 5),
            (vec![key(&[]), key(&[(14, 1)]), key(&[(14, 1), (15, 1)])], 7),
        ];
        for (keys, want) in table {
            assert_eq!(rax_nodes(&keys, 0), want, "{keys:?}");
        }
        assert_eq!(Stream::new().radix_tree_nodes(), 1);
    }

    #[test]
    fn xadd_ids_never_go_back() {
        let cfg = StreamConfig::default();
        let mut s = Stream::new();
        let f = || fields(&[("f", "v")]);
        // (id argument, clock, result).
        let table: &[(XaddId, u64, Result<StreamId, StreamError>)] = &[
            (XaddId::Auto, 1000, Ok(id(1000, 0))),
            (XaddId::Auto, 1000, Ok(id(1000, 1))),
            (XaddId::Auto, 900, Ok(id(1000, 2))),
            (XaddId::Auto, 1001, Ok(id(1001, 0))),
            (XaddId::Ms(1001), 0, Ok(id(1001, 1))),
            (XaddId::Ms(1000), 0, Err(StreamError::IdNotGreater)),
            (XaddId::Ms(2000), 0, Ok(id(2000, 0))),
            (
                XaddId::Explicit(id(2000, 0)),
                0,
                Err(StreamError::IdNotGreater),
            ),
            (XaddId::Explicit(id(0, 0)), 0, Err(StreamError::IdZero)),
            (XaddId::Explicit(id(2000, MAX)), 0, Ok(id(2000, MAX))),
            (XaddId::Ms(2000), 0, Err(StreamError::TooLarge)),
            (XaddId::Auto, 5, Ok(id(2001, 0))),
            (XaddId::Explicit(StreamId::MAX), 0, Ok(StreamId::MAX)),
            (XaddId::Auto, 5, Err(StreamError::Exhausted)),
        ];
        for (i, (arg, now, want)) in table.iter().enumerate() {
            assert_eq!(&s.add(*arg, f(), *now, &cfg), want, "row {i}");
        }
        assert_eq!(s.len(), 9);
        assert_eq!(s.entries_added(), 9);
        assert_eq!(s.first_id(), id(1000, 0));
    }

    #[test]
    fn trimming_exact_and_by_nodes() {
        let cfg = StreamConfig {
            node_max_entries: 3,
            node_max_bytes: 4096,
        };
        let filled = || {
            let mut s = Stream::new();
            for i in 1..=10 {
                s.add(XaddId::Explicit(id(i, 0)), fields(&[("f", "v")]), 0, &cfg)
                    .unwrap();
            }
            s
        };
        let s = filled();
        assert_eq!(s.radix_tree_keys(), 4);
        // (trim, removed, length after, nodes after).
        let mx = |n, approx, limit| Trim::new(TrimStrategy::MaxLen(n), approx, limit, &cfg);
        let mi = |m, approx, limit| Trim::new(TrimStrategy::MinId(id(m, 0)), approx, limit, &cfg);
        for (t, removed, len, nodes) in [
            (mx(5, true, None), 3, 7, 3),
            (mx(5, false, None), 5, 5, 3),
            (mx(0, true, None), 10, 0, 0),
            (mx(0, true, Some(5)), 3, 7, 3),
            (mx(0, true, Some(0)), 10, 0, 0),
            (mi(8, true, None), 6, 4, 2),
            (mi(8, false, None), 7, 3, 2),
            (mi(1, false, None), 0, 10, 4),
            (mx(20, false, None), 0, 10, 4),
        ] {
            let mut s = filled();
            assert_eq!(s.trim(&t), removed, "{t:?}");
            assert_eq!((s.len(), s.radix_tree_keys()), (len, nodes), "{t:?}");
            let first = s.iter().next().map_or(StreamId::MIN, |(k, _)| *k);
            assert_eq!(s.first_id(), first, "{t:?}");
        }
        // Flagged entries still fill their node: the next add opens a
        // new one only when the tail has 3 entries, deleted or not.
        let mut s = filled();
        assert_eq!(s.delete(&[id(10, 0), id(2, 0), id(99, 0)]), 2);
        assert_eq!(s.radix_tree_keys(), 3);
        assert_eq!(s.max_deleted_entry_id(), id(10, 0));
        assert_eq!(s.last_id(), id(10, 0));
        s.add(XaddId::Auto, fields(&[("f", "v")]), 0, &cfg).unwrap();
        assert_eq!(s.radix_tree_keys(), 4);
    }

    #[test]
    fn lag_follows_redis_7_0() {
        let cfg = StreamConfig::default();
        let mut s = Stream::new();
        let g = |s: &Stream| s.group(b"g").cloned().unwrap();
        assert!(s.create_group(b"g", StreamId::MIN, ENTRIES_READ_INVALID));
        assert_eq!(s.lag(&g(&s)), Some(0));
        for i in 1..=5 {
            s.add(XaddId::Explicit(id(i, 0)), fields(&[("f", "v")]), 0, &cfg)
                .unwrap();
        }
        // Before the first entry, no tombstone: entries_added - length.
        assert_eq!(s.lag(&g(&s)), Some(5));
        s.read_group(b"g", b"c", ReadFrom::New, 2, false, 7);
        assert_eq!((g(&s).entries_read, s.lag(&g(&s))), (2, Some(3)));
        // A tombstone ahead of the group: the lag is unknown...
        s.delete(&[id(4, 0)]);
        assert_eq!(s.lag(&g(&s)), None);
        // ...and reading past it re-estimates the counter.
        s.read_group(b"g", b"c", ReadFrom::New, 0, false, 8);
        assert_eq!(
            (g(&s).last_id, g(&s).entries_read, s.lag(&g(&s))),
            (id(5, 0), 5, Some(0))
        );
        // SETID without ENTRIESREAD: known only at the last ID.
        s.set_group_id(b"g", id(2, 0), ENTRIES_READ_INVALID);
        assert_eq!(s.lag(&g(&s)), None);
        s.set_group_id(b"g", id(5, 0), ENTRIES_READ_INVALID);
        assert_eq!(s.lag(&g(&s)), Some(0));
    }

    #[test]
    fn groups_deliver_claim_and_ack() {
        let cfg = StreamConfig::default();
        let mut s = Stream::new();
        for i in 1..=4 {
            s.add(XaddId::Explicit(id(i, 0)), fields(&[("f", "v")]), 0, &cfg)
                .unwrap();
        }
        s.create_group(b"g", StreamId::MIN, ENTRIES_READ_INVALID);
        let r = s
            .read_group(b"g", b"a", ReadFrom::New, 3, false, 100)
            .unwrap();
        assert!(r.consumer_created);
        assert_eq!(r.entries.unwrap().len(), 3);
        // History: the consumer's own pending entries, counted again.
        let r = s
            .read_group(b"g", b"a", ReadFrom::After(id(1, 0)), 0, false, 150)
            .unwrap();
        let ids: Vec<StreamId> = r.entries.unwrap().iter().map(|(i, _)| *i).collect();
        assert_eq!(ids, [id(2, 0), id(3, 0)]);
        assert_eq!(s.group(b"g").unwrap().pel[&id(2, 0)].delivery_count, 2);
        // Nothing new for another consumer: not served, not created.
        let r = s.read_group(b"g", b"b", ReadFrom::New, 0, false, 160);
        assert_eq!(r.map(|r| r.entries.map(|e| e.len())), Some(Some(1)));
        let r = s
            .read_group(b"g", b"c", ReadFrom::New, 0, false, 170)
            .unwrap();
        assert_eq!((r.entries, r.consumer_created), (None, false));
        // Claims: idle enough, then the deleted one leaves the PEL.
        s.delete(&[id(1, 0)]);
        let a = Xautoclaim {
            group: b"g".to_vec(),
            consumer: b"b".to_vec(),
            min_idle: 60,
            start: StreamId::MIN,
            count: 2,
            just_id: true,
        };
        // 2-0 and 3-0 were delivered again at 150, 4-0 at 160.
        let r = s.autoclaim(&a, 220).unwrap();
        assert_eq!(r.deleted, [id(1, 0)]);
        assert_eq!(r.claimed, Claimed::Ids(vec![id(2, 0)]));
        assert_eq!(r.next, id(3, 0));
        let o = ClaimOptions {
            force: true,
            retry_count: Some(5),
            delivery: Some(ClaimDelivery::Time(50)),
            ..ClaimOptions::default()
        };
        let r = s.claim(b"g", b"d", &[id(4, 0), id(9, 0)], &o, 300).unwrap();
        assert_eq!(r.claimed.len(), 1);
        let n = &s.group(b"g").unwrap().pel[&id(4, 0)];
        assert_eq!(
            (n.consumer.as_slice(), n.delivery_time, n.delivery_count),
            (&b"d"[..], 50, 5)
        );
        assert_eq!(s.ack(b"g", &[id(2, 0), id(2, 0), id(4, 0)]), Some(2));
        let sum = s.pending_summary(b"g").unwrap();
        assert_eq!((sum.count, sum.bounds), (1, Some((id(3, 0), id(3, 0)))));
        assert_eq!(sum.consumers, [(b"a".to_vec(), 1)]);
        assert_eq!(s.delete_consumer(b"g", b"b"), Some(0));
        assert_eq!(s.delete_consumer(b"g", b"a"), Some(1));
        assert_eq!(s.pending_summary(b"g").unwrap().count, 0);
    }

    #[test]
    fn parse_errors_are_redis_texts() {
        // (command, error text); every row checked against redis-server
        // 7.0.15 (the integration test replays them).
        let table: &[(&str, &str)] = &[
            ("XADD k", "ERR wrong number of arguments for 'xadd' command"),
            (
                "XADD k MAXLEN 1 1-1 f",
                "ERR wrong number of arguments for 'xadd' command",
            ),
            (
                "XADD k 0-0 f v",
                "ERR The ID specified in XADD must be greater than 0-0",
            ),
            ("XADD k MAXLEN 1 MINID 1 * f v", msg::MAXLEN_AND_MINID),
            ("XADD k MAXLEN -1 * f v", msg::MAXLEN_NEGATIVE),
            ("XADD k MAXLEN 1 LIMIT 1 * f v", msg::LIMIT_WITHOUT_APPROX),
            ("XADD k LIMIT 1 * f v", msg::LIMIT_WITHOUT_STRATEGY),
            ("XADD k MAXLEN ~ 1 LIMIT -1 * f v", msg::LIMIT_NEGATIVE),
            (
                "XADD k MAXLEN x * f v",
                "ERR value is not an integer or out of range",
            ),
            (
                "XADD k bad f v",
                "ERR Invalid stream ID specified as stream command argument",
            ),
            ("XTRIM k LIMIT 0 x", "ERR syntax error"),
            ("XTRIM k NOMKSTREAM MAXLEN 1", "ERR syntax error"),
            ("XTRIM k LIMIT 0 LIMIT 0", msg::XTRIM_WITHOUT_STRATEGY),
        ];
        for (cmd, want) in table {
            let w = words(cmd);
            let got = if cmd.starts_with("XADD") {
                Xadd::parse(&w).err()
            } else {
                Xtrim::parse(&w).err()
            };
            assert_eq!(got.map(|e| e.to_string()).as_deref(), Some(*want), "{cmd}");
        }
        let table: &[(&str, &str)] = &[
            ("XREAD STREAMS k j 0", msg::UNBALANCED),
            ("XREAD COUNT 1 k 0", "ERR syntax error"),
            ("XREAD GROUP g c STREAMS k >", msg::GROUP_IN_XREAD),
            ("XREAD BLOCK -1 STREAMS k 0", msg::TIMEOUT_NEGATIVE),
            ("XREAD BLOCK x STREAMS k 0", msg::TIMEOUT_NOT_INTEGER),
            ("XREADGROUP COUNT 1 NOACK STREAMS k >", msg::MISSING_GROUP),
        ];
        for (cmd, want) in table {
            let got = Xread::parse(&words(cmd), cmd.starts_with("XREADGROUP")).err();
            assert_eq!(got.map(|e| e.to_string()).as_deref(), Some(*want), "{cmd}");
        }
        let table: &[(&str, &str)] = &[
            (
                "XGROUP",
                "ERR wrong number of arguments for 'xgroup' command",
            ),
            (
                "XGROUP foo k",
                "ERR unknown subcommand 'foo'. Try XGROUP HELP.",
            ),
            (
                "XGROUP create k",
                "ERR wrong number of arguments for 'xgroup|create' command",
            ),
            (
                "XGROUP SETID k g 0 MKSTREAM",
                "ERR unknown subcommand or wrong number of arguments for 'SETID'. Try XGROUP HELP.",
            ),
            (
                "XGROUP CREATE k g 0 ENTRIESREAD -2",
                msg::ENTRIESREAD_NEGATIVE,
            ),
        ];
        for (cmd, want) in table {
            let got = Xgroup::parse(&words(cmd)).err();
            assert_eq!(got.map(|e| e.to_string()).as_deref(), Some(*want), "{cmd}");
        }
        let table: &[(&str, &str)] = &[
            ("XPENDING k g - +", "ERR syntax error"),
            ("XPENDING k g IDLE 1 - +", "ERR syntax error"),
            ("XAUTOCLAIM k g c 0 - COUNT 0", msg::XAUTOCLAIM_COUNT),
            ("XAUTOCLAIM k g c x -", msg::XAUTOCLAIM_MIN_IDLE),
            (
                "XSETID k 5-0 MAXDELETEDID 6-0",
                msg::XSETID_BELOW_MAXDELETED,
            ),
            ("XSETID k 5-0 ENTRIESADDED -1", msg::ENTRIES_ADDED_NEGATIVE),
            ("XINFO", "ERR wrong number of arguments for 'xinfo' command"),
            (
                "XINFO STREAM",
                "ERR wrong number of arguments for 'xinfo|stream' command",
            ),
        ];
        for (cmd, want) in table {
            let w = words(cmd);
            let got = match cmd.split(' ').next() {
                Some("XPENDING") => Xpending::parse(&w).err(),
                Some("XAUTOCLAIM") => Xautoclaim::parse(&w).err(),
                Some("XSETID") => Xsetid::parse(&w).err(),
                _ => Xinfo::parse(&w).err(),
            };
            assert_eq!(got.map(|e| e.to_string()).as_deref(), Some(*want), "{cmd}");
        }
    }

    #[test]
    fn commands_check_keys_in_redis_order() {
        let cfg = StreamConfig::default();
        // XACK and XDEL read their IDs only after the key.
        let mut none: Option<Stream> = None;
        let a = Xack::parse(&words("XACK k g bad")).unwrap();
        assert_eq!(xack(KeyMut::Slot(&mut none), &a).map(|o| o.reply), Ok(0));
        assert_eq!(xack(KeyMut::WrongType, &a), Err(StreamError::WrongType));
        let d = Xdel::parse(&words("XDEL k bad")).unwrap();
        assert_eq!(xdel(KeyMut::Slot(&mut none), &d).map(|o| o.reply), Ok(0));
        // XADD creates the key, NOMKSTREAM does not.
        let a = Xadd::parse(&words("XADD k NOMKSTREAM 1-1 f v")).unwrap();
        assert_eq!(
            xadd(KeyMut::Slot(&mut none), a, 0, &cfg).map(|o| o.reply),
            Ok(None)
        );
        assert!(none.is_none());
        let a = Xadd::parse(&words("XADD k MAXLEN 0 1-1 f v")).unwrap();
        let o = xadd(KeyMut::Slot(&mut none), a, 0, &cfg).unwrap();
        assert_eq!((o.reply, o.events), (Some(id(1, 1)), vec!["xadd", "xtrim"]));
        assert_eq!(none.as_ref().map(Stream::len), Some(0));
        // XGROUP CREATE MKSTREAM with a bad ID creates nothing.
        let mut slot: Option<Stream> = None;
        let g = Xgroup::parse(&words("XGROUP CREATE k g x MKSTREAM")).unwrap();
        assert_eq!(
            xgroup(KeyMut::Slot(&mut slot), &g, 0),
            Err(StreamError::InvalidId)
        );
        assert!(slot.is_none());
        let g = Xgroup::parse(&words("XGROUP CREATE k g $ MKSTREAM")).unwrap();
        let o = xgroup(KeyMut::Slot(&mut slot), &g, 0).unwrap();
        assert_eq!(
            (o.reply, o.events),
            (XgroupReply::Ok, vec!["xgroup-create"])
        );
        // XINFO STREAM checks its options after the key.
        let i = Xinfo::parse(&words("XINFO STREAM k FUL")).unwrap();
        assert_eq!(xinfo(Key::Missing, &i, 0), Err(StreamError::NoSuchKey));
        let s = slot.unwrap_or_default();
        assert_eq!(
            xinfo(Key::Stream(&s), &i, 0).map_err(|e| e.to_string()),
            Err(
                "ERR unknown subcommand or wrong number of arguments for 'STREAM'. Try XINFO HELP."
                    .into()
            )
        );
    }

    #[test]
    fn replies_have_redis_shapes() {
        let cfg = StreamConfig::default();
        let mut s = Stream::new();
        s.add(XaddId::Explicit(id(1, 1)), fields(&[("a", "1")]), 0, &cfg)
            .unwrap();
        s.create_group(b"g", StreamId::MIN, ENTRIES_READ_INVALID);
        let b = |x: &str| Reply::bulk(x.as_bytes().to_vec());
        let want = Reply::Array(Some(vec![Reply::Map(vec![
            (b("name"), b("g")),
            (b("consumers"), Reply::Integer(0)),
            (b("pending"), Reply::Integer(0)),
            (b("last-delivered-id"), b("0-0")),
            (b("entries-read"), Reply::nil()),
            (b("lag"), Reply::Integer(1)),
        ])]));
        assert_eq!(XinfoReply::Groups(s.info_groups()).to_reply(), want);
        assert_eq!(
            entries_reply(&s.range(StreamId::MIN, StreamId::MAX, 0, false)),
            Reply::Array(Some(vec![Reply::Array(Some(vec![
                b("1-1"),
                Reply::Array(Some(vec![b("a"), b("1")])),
            ]))]))
        );
        let empty = PendingSummary {
            count: 0,
            bounds: None,
            consumers: vec![],
        };
        assert_eq!(
            empty.to_reply(),
            Reply::Array(Some(vec![
                Reply::Integer(0),
                Reply::nil(),
                Reply::nil(),
                Reply::Array(None)
            ]))
        );
    }

    #[test]
    fn nodes_restore_to_an_equal_stream() {
        let cfg = StreamConfig {
            node_max_entries: 4,
            node_max_bytes: 4096,
        };
        let mut s = Stream::new();
        for i in 1..=30u64 {
            let f = if i % 3 == 0 {
                fields(&[("a", "1"), ("b", "x")])
            } else {
                fields(&[("f", "v")])
            };
            s.add(XaddId::Explicit(id(i * 1000, i)), f, 0, &cfg)
                .unwrap();
        }
        s.delete(&[id(2000, 2), id(7000, 7), id(8000, 8), id(30000, 30)]);
        s.trim(&Trim::new(
            TrimStrategy::MinId(id(10000, 0)),
            false,
            None,
            &cfg,
        ));
        s.create_group(b"g", StreamId::MIN, ENTRIES_READ_INVALID);
        s.read_group(b"g", b"c", ReadFrom::New, 3, false, 42);
        let mut r = Stream::new();
        for n in s.nodes() {
            let entries = n
                .entries
                .iter()
                .map(|(i, f, d)| (*i, f.to_vec(), *d))
                .collect();
            r.restore_node(n.master_fields.to_vec(), entries).unwrap();
        }
        r.restore_meta(s.meta());
        for (name, g) in s.groups().iter() {
            assert!(r.restore_group(name.clone(), g.clone()));
        }
        assert_eq!(r, s);
        let taken = r.nodes()[0].master_id;
        assert_eq!(
            r.restore_node(vec![], vec![(taken, vec![], false)]),
            Err(StreamError::Msg(ERR_BAD_PAYLOAD))
        );
        assert_eq!(
            r.restore_node(vec![], vec![]),
            Err(StreamError::Msg(ERR_BAD_PAYLOAD))
        );
    }

    #[test]
    fn clones_are_independent_snapshots() {
        let cfg = StreamConfig::default();
        let mut s = Stream::new();
        s.add(XaddId::Explicit(id(1, 0)), fields(&[("f", "v")]), 0, &cfg)
            .unwrap();
        s.create_group(b"g", StreamId::MIN, ENTRIES_READ_INVALID);
        let snap = s.clone();
        s.read_group(b"g", b"c", ReadFrom::New, 0, false, 5);
        s.add(XaddId::Explicit(id(2, 0)), fields(&[("f", "v")]), 0, &cfg)
            .unwrap();
        assert_eq!((snap.len(), s.len()), (1, 2));
        assert!(snap.group(b"g").unwrap().pel.is_empty());
        assert_ne!(snap, s);
        // The same ops on two copies give equal streams (determinism).
        let (mut a, mut b) = (snap.clone(), snap.clone());
        for x in [&mut a, &mut b] {
            x.read_group(b"g", b"c", ReadFrom::New, 0, false, 5);
            x.add(XaddId::Auto, fields(&[("f", "v")]), 9, &cfg).unwrap();
        }
        assert_eq!(a, b);
    }
}
