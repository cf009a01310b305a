//! Access control as Redis 7.0 has it: users, their rules, the permission
//! check of a command, `AUTH`, the `ACL` command's replies, the ACL file
//! and the ACL log. Pure and deterministic: no I/O, no clock, no random
//! source (the caller passes the time and the random bytes).
//!
//! * [`UserTable`]: every user, and the `acl-pubsub-default` setting. A
//!   value type, replicated as a whole: every change is a pure function of
//!   it ([`UserTable::apply_setuser`], [`UserTable::apply_deluser`],
//!   [`UserTable::apply_load`], [`UserTable::set_requirepass`],
//!   [`UserTable::set_pubsub_default`]), and [`UserTable::encode`] /
//!   [`UserTable::decode`] give its canonical, versioned binary form for
//!   ops and snapshots.
//! * [`User`]: one user — on/off, passwords (SHA-256 digests, printed as
//!   Redis prints them: 64 lower-case hex digits), its root selector and
//!   extra selectors (`(...)`), each with command permissions (commands,
//!   subcommands, categories, first arguments), key patterns (`~`, `%R~`,
//!   `%W~`) and channel patterns (`&`). [`User::check`] is Redis'
//!   `ACLCheckAllUserCommandPerm`; [`Denied`] says what was denied, with
//!   Redis' `NOPERM` text.
//! * Rules are parsed as `ACL SETUSER` parses them, with Redis' error texts
//!   ([`AclError`]); a user is described back ([`User::describe`], `ACL
//!   LIST`, `ACL GETUSER`) with Redis 7.0's algorithm (`+@all`/`-@all`,
//!   then the best-fitting categories, then single commands). Redis prints
//!   the single commands in the order of its command hash table, which is
//!   seeded at random at each start: the same rules give them in a
//!   different order from one Redis process to the next. Here they come in
//!   the command table's order ([`crate::cmd::table::TABLE`], each
//!   container followed by its subcommands), the same on every member.
//! * [`AclCommand`]: the `ACL` command's words parsed, with Redis' errors;
//!   [`UserTable::apply`] runs the ones that change the table,
//!   [`UserTable::read`] answers the others.
//! * [`AclLog`]: the bounded log of denied commands and failed `AUTH`s
//!   (`ACL LOG`), with Redis' grouping of repeated entries. It belongs to a
//!   member (its own clients), not to the replicated state.
//!
//! The command universe is the command table: its categories decide what
//! `+@category` grants, and `ACL CAT` lists it. Key positions and their
//! access come from Redis 7.0's key specs ([`key_refs`]); channels from the
//! arguments of the pub/sub commands ([`channel_refs`]).

mod codec;
mod command;
mod keyspecs;
mod log;
mod selector;
mod sha256;
#[cfg(test)]
mod tests;
mod user;
mod users;

pub use codec::AclDecodeError;
pub use command::{cat_reply, genpass, help_reply, AclCommand, LogRequest, ReadContext};
pub use keyspecs::{key_refs, KeyRef};
pub use log::{AclLog, LogContext, LogEntry, LogReason};

use crate::cmd::table::{self, CommandSpec};
use crate::resp::{parse_i64_strict, Reply};
use std::collections::{BTreeMap, VecDeque};
use std::fmt;
use std::sync::OnceLock;

/// The ACL categories, in Redis' order (`ACL CAT`).
pub const CATEGORIES: [&str; 21] = [
    "keyspace",
    "read",
    "write",
    "set",
    "sortedset",
    "list",
    "hash",
    "string",
    "bitmap",
    "hyperloglog",
    "geo",
    "stream",
    "pubsub",
    "admin",
    "fast",
    "slow",
    "blocking",
    "dangerous",
    "connection",
    "transaction",
    "scripting",
];

/// The random bytes [`genpass`] takes: one per hex digit, for the largest
/// password (4096 bits).
pub const GENPASS_RANDOM_BYTES: usize = 1024;

/// `ACL LOAD` / `ACL SAVE` on a server without an ACL file.
pub const ERR_NO_ACL_FILE: &str = "ERR This Redis instance is not configured to use an ACL file. You may want to specify users via the ACL SETUSER command and then issue a CONFIG REWRITE (assuming you have a Redis configuration file set) in order to store users in the Redis configuration.";

/// `ACL SAVE` when writing the file failed.
pub const ERR_SAVE_FAILED: &str =
    "ERR There was an error trying to save the ACLs. Please check the server logs for more information";

/// The default length bound of the ACL log (`acllog-max-len`).
pub const ACLLOG_DEFAULT_MAX_LEN: usize = 128;

/// The bytes of `b` up to its first NUL: what Redis sees where it handles
/// an argument as a C string (`strcasecmp`, `%s`, `sdsnew`).
fn cstr(b: &[u8]) -> &[u8] {
    match b.iter().position(|&c| c == 0) {
        Some(i) => &b[..i],
        None => b,
    }
}

/// Text of bytes for a message (`%s`): up to the first NUL, lossy.
fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(cstr(b)).into_owned()
}

/// C's `isspace` in the C locale, or NUL: what usernames, key and channel
/// patterns may not contain.
fn has_spaces(b: &[u8]) -> bool {
    b.iter()
        .any(|&c| matches!(c, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r' | 0))
}

/// The index of category `name` (any case).
fn category(name: &[u8]) -> Option<usize> {
    let name = cstr(name);
    CATEGORIES
        .iter()
        .position(|c| c.as_bytes().eq_ignore_ascii_case(name))
}

// ---------------------------------------------------------------------------
// The command universe: every command and subcommand of the table, with an
// id (its bit in a selector's bitmap) and its categories.

/// Bits of a selector's command bitmap; the last one is the "future
/// commands" bit that only `+@all` sets (Redis' reserved bit).
const BITS: usize = 1024;
const WORDS: usize = BITS / 64;
const FUTURE: usize = BITS - 1;

struct Entry {
    spec: &'static CommandSpec,
    parent: Option<usize>,
    subs: Vec<usize>,
    cats: u32,
}

struct Universe {
    cmds: Vec<Entry>,
    top: Vec<usize>,
    /// Looked up on every command: a hash of one multiplication per word.
    by_name: fxhash::FxHashMap<&'static str, usize>,
    by_cat: Vec<Vec<usize>>,
}

fn cats_of(spec: &CommandSpec) -> u32 {
    spec.acl
        .iter()
        .filter_map(|c| CATEGORIES.iter().position(|k| k == c))
        .fold(0, |m, i| m | (1 << i))
}

fn universe() -> &'static Universe {
    static U: OnceLock<Universe> = OnceLock::new();
    U.get_or_init(|| {
        let mut u = Universe {
            cmds: Vec::new(),
            top: Vec::new(),
            by_name: Default::default(),
            by_cat: vec![Vec::new(); CATEGORIES.len()],
        };
        // Ids below the reserved bit only; the table is far smaller.
        for c in table::TABLE {
            if u.cmds.len() + 1 + c.subcommands.len() > FUTURE {
                break;
            }
            let id = u.cmds.len();
            u.top.push(id);
            u.cmds.push(Entry {
                spec: c,
                parent: None,
                subs: Vec::new(),
                cats: cats_of(c),
            });
            for s in c.subcommands {
                let sid = u.cmds.len();
                u.cmds.push(Entry {
                    spec: s,
                    parent: Some(id),
                    subs: Vec::new(),
                    cats: cats_of(s),
                });
                u.cmds[id].subs.push(sid);
            }
        }
        for (id, e) in u.cmds.iter().enumerate() {
            u.by_name.insert(e.spec.name, id);
            for (j, ids) in u.by_cat.iter_mut().enumerate() {
                if e.cats & (1 << j) != 0 {
                    ids.push(id);
                }
            }
        }
        u
    })
}

/// The id of a full name (`get`, `config|get`), lower case.
fn id_of_name(name: &str) -> Option<usize> {
    universe().by_name.get(name).copied()
}

/// `ACLLookupCommand`: a command (`get`) or a subcommand (`config|get`),
/// any case; not a deeper name, not a container followed by `|` and
/// nothing.
fn lookup(name: &[u8]) -> Option<usize> {
    if name.is_empty() {
        return None;
    }
    let parts: Vec<&[u8]> = name.split(|&b| b == b'|').collect();
    let top = |n: &[u8]| -> Option<usize> {
        let lower = std::str::from_utf8(n).ok()?.to_ascii_lowercase();
        if lower.contains('|') {
            return None;
        }
        id_of_name(&lower)
    };
    match parts.as_slice() {
        [one] => top(one),
        [base, sub] => {
            let b = top(base)?;
            let u = universe();
            if u.cmds[b].subs.is_empty() {
                return None;
            }
            let sub = std::str::from_utf8(sub).ok()?.to_ascii_lowercase();
            let id = id_of_name(&format!("{}|{}", u.cmds[b].spec.name, sub))?;
            (u.cmds[id].parent == Some(b)).then_some(id)
        }
        _ => None,
    }
}

/// The command `args` runs (Redis' `lookupCommand`): the container's
/// subcommand when the command has subcommands and a second word, the
/// command itself otherwise. `None` for an unknown command or subcommand.
pub fn resolve(args: &[Vec<u8>]) -> Option<&'static CommandSpec> {
    let base = table::spec(args.first()?)?;
    if args.len() == 1 || base.subcommands.is_empty() {
        return Some(base);
    }
    base.subcommand(&args[1])
}

// ---------------------------------------------------------------------------
// Selectors.

#[derive(Clone, Copy, PartialEq, Eq)]
struct Bits([u64; WORDS]);

impl Bits {
    fn get(&self, i: usize) -> bool {
        self.0[i / 64] & (1 << (i % 64)) != 0
    }

    fn set(&mut self, i: usize, v: bool) {
        if v {
            self.0[i / 64] |= 1 << (i % 64);
        } else {
            self.0[i / 64] &= !(1 << (i % 64));
        }
    }
}

impl fmt::Debug for Bits {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let on: Vec<&str> = universe()
            .cmds
            .iter()
            .enumerate()
            .filter(|(i, _)| self.get(*i))
            .map(|(_, e)| e.spec.name)
            .collect();
        write!(f, "future={} {:?}", self.get(FUTURE), on)
    }
}

/// Read permission of a key pattern.
const PERM_R: u8 = 1;
/// Write permission of a key pattern.
const PERM_W: u8 = 2;

#[derive(Clone, Debug, PartialEq, Eq)]
struct KeyPattern {
    pattern: Vec<u8>,
    /// [`PERM_R`] | [`PERM_W`], never 0.
    perm: u8,
}

impl KeyPattern {
    fn describe(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(match self.perm {
            PERM_R => b"%R~",
            PERM_W => b"%W~",
            _ => b"~",
        });
        out.extend_from_slice(&self.pattern);
    }
}

/// A set of permissions: the user's root one, or a selector `(...)`.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Selector {
    allkeys: bool,
    allchannels: bool,
    allcommands: bool,
    bits: Bits,
    /// First arguments allowed for a command whose bit is off, by id, in
    /// the order they were added.
    firstargs: BTreeMap<usize, Vec<Vec<u8>>>,
    keys: Vec<KeyPattern>,
    channels: Vec<Vec<u8>>,
}

/// Why a rule is refused (the text after the colon in Redis' error).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleError {
    /// A command or category name that does not exist.
    UnknownCommand,
    /// A rule that does not parse, or a pattern with spaces.
    Syntax,
    /// A key pattern after `allkeys`.
    KeyAfterAll,
    /// A channel pattern after `allchannels`.
    ChannelAfterAll,
    /// `<` or `!` of a password the user does not have.
    NoSuchPassword,
    /// `#` or `!` with something else than 64 lower-case hex digits.
    BadHash,
    /// `+cmd|sub|arg`: first arguments of a subcommand.
    FirstArgOfSubcommand,
}

impl RuleError {
    /// Redis' text for it.
    pub fn message(self) -> &'static str {
        match self {
            RuleError::UnknownCommand => "Unknown command or category name in ACL",
            RuleError::Syntax => "Syntax error",
            RuleError::KeyAfterAll => "Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and does not have any effect. Try 'resetkeys' to start with an empty list of patterns",
            RuleError::ChannelAfterAll => "Adding a pattern after the * pattern (or the 'allchannels' flag) is not valid and does not have any effect. Try 'resetchannels' to start with an empty list of channels",
            RuleError::NoSuchPassword => {
                "The password you are trying to remove from the user does not exist"
            }
            RuleError::BadHash => "The password hash must be exactly 64 characters and contain only lowercase hexadecimal characters",
            RuleError::FirstArgOfSubcommand => "Allowing first-arg of a subcommand is not supported",
        }
    }
}

/// `sdssplitargs`: the words of a selector's body (or a library's
/// shebang line), with quotes and
/// escapes; `None` on unbalanced quotes. Reads up to the first NUL.
pub(crate) fn split_args(line: &[u8]) -> Option<Vec<Vec<u8>>> {
    let line = cstr(line);
    let at = |i: usize| line.get(i).copied().unwrap_or(0);
    let is_space = |c: u8| matches!(c, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r');
    let hex = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
    let mut out = Vec::new();
    let mut p = 0;
    loop {
        while p < line.len() && is_space(line[p]) {
            p += 1;
        }
        if p >= line.len() {
            return Some(out);
        }
        let (mut inq, mut insq, mut done) = (false, false, false);
        let mut cur = Vec::new();
        while !done {
            let c = at(p);
            if inq {
                if c == b'\\'
                    && at(p + 1) == b'x'
                    && hex(at(p + 2)).is_some()
                    && hex(at(p + 3)).is_some()
                {
                    cur.push(hex(at(p + 2))? * 16 + hex(at(p + 3))?);
                    p += 3;
                } else if c == b'\\' && at(p + 1) != 0 {
                    p += 1;
                    cur.push(match at(p) {
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'b' => 0x08,
                        b'a' => 0x07,
                        other => other,
                    });
                } else if c == b'"' {
                    if at(p + 1) != 0 && !is_space(at(p + 1)) {
                        return None;
                    }
                    done = true;
                } else if c == 0 {
                    return None;
                } else {
                    cur.push(c);
                }
            } else if insq {
                if c == b'\\' && at(p + 1) == b'\'' {
                    p += 1;
                    cur.push(b'\'');
                } else if c == b'\'' {
                    if at(p + 1) != 0 && !is_space(at(p + 1)) {
                        return None;
                    }
                    done = true;
                } else if c == 0 {
                    return None;
                } else {
                    cur.push(c);
                }
            } else {
                match c {
                    b' ' | b'\n' | b'\r' | b'\t' | 0 => done = true,
                    b'"' => inq = true,
                    b'\'' => insq = true,
                    _ => cur.push(c),
                }
            }
            if at(p) != 0 {
                p += 1;
            }
        }
        out.push(cur);
    }
}

/// `ACLMergeSelectorArguments` (Redis 7.0.15): a selector written over
/// several words (`(~a`, `+get)`) becomes one word; a new `(` word that
/// does not close restarts the selector. `Err(index)` of the last opening
/// word when a selector is not closed.
fn merge_selector_args<T: AsRef<[u8]>>(args: &[T]) -> Result<Vec<Vec<u8>>, usize> {
    let mut out = Vec::new();
    let mut open: Option<(usize, Vec<u8>)> = None;
    for (j, op) in args.iter().enumerate() {
        let op = op.as_ref();
        // An empty word never closes (Redis reads the byte before it,
        // its string header, never a ')').
        let closes = op.last() == Some(&b')');
        if op.first() == Some(&b'(') && !closes {
            open = Some((j, op.to_vec()));
            continue;
        }
        if let Some((_, sel)) = open.as_mut() {
            sel.push(b' ');
            sel.extend_from_slice(cstr(op));
            if closes {
                if let Some((_, sel)) = open.take() {
                    out.push(sel);
                }
            }
            continue;
        }
        out.push(op.to_vec());
    }
    match open {
        Some((j, _)) => Err(j),
        None => Ok(out),
    }
}

// ---------------------------------------------------------------------------
// Users.

/// The RESTORE payload flag of a user.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PayloadFlag {
    /// Neither flag: the server's `sanitize-dump-payload` decides.
    Unset,
    /// `sanitize-payload`.
    Sanitize,
    /// `skip-sanitize-payload`.
    Skip,
}

/// One user.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct User {
    name: Vec<u8>,
    enabled: bool,
    nopass: bool,
    payload: PayloadFlag,
    passwords: Vec<[u8; 32]>,
    root: Selector,
    selectors: Vec<Selector>,
}

/// What denied a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum DenyReason {
    /// The command (or subcommand) is not allowed.
    Command,
    /// A key the command names is not allowed.
    Key,
    /// A channel the command names is not allowed.
    Channel,
}

/// A denied command: why, and what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denied {
    /// What was denied.
    pub reason: DenyReason,
    /// The index of the key or channel in the words (0 for the command).
    pub pos: usize,
    /// The command's full name (`config|get`), the key or the channel.
    pub object: Vec<u8>,
}

impl Denied {
    /// Redis' error text (without a leading `-`).
    pub fn error_text(&self) -> String {
        match self.reason {
            DenyReason::Command => format!(
                "NOPERM this user has no permissions to run the '{}' command",
                text(&self.object)
            ),
            DenyReason::Key => {
                "NOPERM this user has no permissions to access one of the keys used as arguments"
                    .into()
            }
            DenyReason::Channel => {
                "NOPERM this user has no permissions to access one of the channels used as arguments"
                    .into()
            }
        }
    }

    /// The error reply.
    pub fn reply(&self) -> Reply {
        Reply::err(self.error_text())
    }

    /// `ACL DRYRUN`'s text for it.
    pub fn dryrun_text(&self) -> Vec<u8> {
        let (what, obj) = match self.reason {
            DenyReason::Command => ("run the '", " command"),
            DenyReason::Key => ("access the '", " key"),
            DenyReason::Channel => ("access the '", " channel"),
        };
        let mut out = b"This user has no permissions to ".to_vec();
        out.extend_from_slice(what.as_bytes());
        out.extend_from_slice(cstr(&self.object));
        out.push(b'\'');
        out.extend_from_slice(obj.as_bytes());
        out
    }
}

/// A channel argument of a pub/sub command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChannelRef {
    /// Its index in the words.
    pub pos: usize,
    /// A pattern (`PSUBSCRIBE`): matched literally against the user's
    /// channel patterns; a channel is matched as a glob.
    pub pattern: bool,
}

/// The channels an ACL check looks at: those of `PUBLISH`/`SPUBLISH`
/// (the first argument), `SUBSCRIBE`/`SSUBSCRIBE` (all) and `PSUBSCRIBE`
/// (all, as patterns). Unsubscribing is never checked.
pub fn channel_refs(spec: &CommandSpec, args: &[Vec<u8>]) -> Vec<ChannelRef> {
    let (pattern, all) = match spec.name {
        "publish" | "spublish" => (false, false),
        "subscribe" | "ssubscribe" => (false, true),
        "psubscribe" => (true, true),
        _ => return Vec::new(),
    };
    let end = if all { args.len() } else { args.len().min(2) };
    (1..end).map(|pos| ChannelRef { pos, pattern }).collect()
}

/// 64 lower-case hex digits: the digest they spell.
fn parse_hash(h: &[u8]) -> Option<[u8; 32]> {
    if h.len() != 64 {
        return None;
    }
    let digit = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    };
    let mut out = [0u8; 32];
    for (i, pair) in h.chunks_exact(2).enumerate() {
        out[i] = digit(pair[0])? << 4 | digit(pair[1])?;
    }
    Some(out)
}

/// Whether `new` (the user after a change) may have lost channels that
/// `old` granted: Redis' test before it disconnects subscribers.
fn channels_revoked(new: &User, old: &User) -> bool {
    if new.all_selectors().any(|s| s.allchannels) {
        return false;
    }
    let upcoming: Vec<&Vec<u8>> = new.all_selectors().flat_map(|s| &s.channels).collect();
    old.all_selectors()
        .any(|s| s.allchannels || s.channels.iter().any(|c| !upcoming.contains(&c)))
}

// ---------------------------------------------------------------------------
// Errors.

/// An `ACL` command, `ACL LOAD` or ACL-file error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AclError {
    /// A rule of `ACL SETUSER` refused (the rule as Redis prints it: a
    /// selector merged into one word).
    Rule {
        /// The rule.
        rule: Vec<u8>,
        /// Why.
        error: RuleError,
    },
    /// A selector `(` not closed; the word that opened it.
    Unmatched {
        /// The opening word.
        arg: Vec<u8>,
    },
    /// A username with a space or a NUL.
    BadUsername,
    /// `ACL DELUSER default`.
    DeleteDefault,
    /// `ACL LOAD`: every problem found, on one line.
    Load(String),
}

impl fmt::Display for AclError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AclError::Rule { rule, error } => write!(
                f,
                "Error in ACL SETUSER modifier '{}': {}",
                text(rule),
                error.message()
            ),
            AclError::Unmatched { arg } => write!(
                f,
                "Unmatched parenthesis in acl selector starting at '{}'.",
                text(arg)
            ),
            AclError::BadUsername => {
                f.write_str("Usernames can't contain spaces or null characters")
            }
            AclError::DeleteDefault => f.write_str("The 'default' user cannot be removed"),
            AclError::Load(s) => f.write_str(s),
        }
    }
}

impl std::error::Error for AclError {}

impl AclError {
    /// The error reply (`ERR ...`; line breaks become spaces, as Redis'
    /// `addReplyErrorSdsSafe` does).
    pub fn reply(&self) -> Reply {
        Reply::err(format!("ERR {}", self).replace(['\r', '\n'], " "))
    }
}

/// A failed authentication: the only text Redis gives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AuthError;

impl fmt::Display for AuthError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("WRONGPASS invalid username-password pair or user is disabled.")
    }
}

impl std::error::Error for AuthError {}

impl AuthError {
    /// The error reply.
    pub fn reply(&self) -> Reply {
        Reply::err(self.to_string())
    }
}

// ---------------------------------------------------------------------------
// The user table.

/// Every user, and `acl-pubsub-default`: the replicated ACL state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UserTable {
    users: BTreeMap<Vec<u8>, User>,
    pubsub_all: bool,
}

impl Default for UserTable {
    fn default() -> Self {
        UserTable::new()
    }
}

/// What [`UserTable::apply_setuser`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SetUserOutcome {
    /// The user did not exist before.
    pub created: bool,
    /// The user may have lost channels: its subscribed clients must be
    /// checked ([`User::check_channel`] on each channel and pattern they
    /// hold) and those failing disconnected, as Redis does.
    pub recheck_subscriptions: bool,
}

/// What a write of the `ACL` command changed, for the caller to act on
/// its connections.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Changed {
    /// Nothing (an error, or no user deleted).
    Nothing,
    /// `ACL SETUSER` of this user.
    User {
        /// Its name.
        name: Vec<u8>,
        /// See [`SetUserOutcome`].
        outcome: SetUserOutcome,
    },
    /// `ACL DELUSER`: these users are gone; their clients must be
    /// disconnected.
    Deleted(Vec<Vec<u8>>),
    /// `ACL LOAD`: a new table; Redis disconnects every client
    /// authenticated as another user than `default`.
    Reloaded,
    /// A snapshot replaced the table (a member catching up): the clients
    /// of users that no longer exist are disconnected.
    Restored,
}

/// What `AUTH` came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuthOutcome {
    /// Authenticated as this user: reply `+OK`.
    Ok {
        /// The user.
        user: Vec<u8>,
    },
    /// Wrong user, password, or a disabled user: reply [`AuthError`] and
    /// log it ([`LogEntry::auth`]).
    Failed {
        /// The user tried.
        user: Vec<u8>,
    },
    /// An error before any check (syntax, no password configured).
    Error(Reply),
}

fn trim<'a>(b: &'a [u8], set: &[u8]) -> &'a [u8] {
    let start = b.iter().position(|c| !set.contains(c)).unwrap_or(b.len());
    let end = b
        .iter()
        .rposition(|c| !set.contains(c))
        .map_or(start, |i| i + 1);
    &b[start..end.max(start)]
}
