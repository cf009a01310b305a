//! Stream command errors with Redis's exact texts, and the small word
//! helpers (case-insensitive keywords, integers, arity) every parser uses.

use crate::resp::{parse_i64_strict, Reply};

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
pub(super) fn ctext(b: &[u8], max: usize) -> String {
    let b = cstr(b);
    let b = &b[..b.len().min(max)];
    String::from_utf8_lossy(b)
        .chars()
        .map(|c| if c == '\r' || c == '\n' { ' ' } else { c })
        .collect()
}

/// A word as C code sees it: up to its first NUL byte.
pub(super) fn cstr(b: &[u8]) -> &[u8] {
    match b.iter().position(|&c| c == 0) {
        Some(i) => &b[..i],
        None => b,
    }
}

/// `strcasecmp(word, w) == 0`.
pub(super) fn is(word: &[u8], w: &str) -> bool {
    cstr(word).eq_ignore_ascii_case(w.as_bytes())
}

/// `strcmp(word, w) == 0`.
pub(super) fn is_exact(word: &[u8], w: &str) -> bool {
    cstr(word) == w.as_bytes()
}

/// `getLongLongFromObjectOrReply` with Redis's default message.
pub(super) fn int(b: &[u8]) -> Result<i64, StreamError> {
    parse_i64_strict(b).ok_or(StreamError::NotInteger)
}

/// `getLongLongFromObjectOrReply` with a message of its own.
pub(super) fn int_or(b: &[u8], m: &'static str) -> Result<i64, StreamError> {
    parse_i64_strict(b).ok_or(StreamError::Msg(m))
}

pub(super) fn nogroup(key: &[u8], group: &[u8], suffix: &'static str) -> StreamError {
    StreamError::NoGroup {
        key: ctext(key, usize::MAX),
        group: ctext(group, usize::MAX),
        suffix,
    }
}

pub(super) fn nogroup_for_key(key: &[u8], group: &[u8]) -> StreamError {
    StreamError::NoGroupForKey {
        group: ctext(group, usize::MAX),
        key: ctext(key, usize::MAX),
    }
}

pub(super) fn arity(args: &[Vec<u8>], n: i64, name: &'static str) -> Result<(), StreamError> {
    let len = args.len() as i64;
    if (n > 0 && len != n) || (n < 0 && len < -n) {
        Err(StreamError::Arity(name))
    } else {
        Ok(())
    }
}

pub(super) fn arg(args: &[Vec<u8>], i: usize) -> &[u8] {
    args.get(i).map_or(&[][..], |a| a.as_slice())
}
