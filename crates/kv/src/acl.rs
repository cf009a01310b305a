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
mod sha256;
#[cfg(test)]
mod tests;

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

impl Selector {
    /// An empty selector: no commands, keys or channels; all channels when
    /// `acl-pubsub-default` is `allchannels`.
    fn new(pubsub_all: bool) -> Selector {
        Selector {
            allkeys: false,
            allchannels: pubsub_all,
            allcommands: false,
            bits: Bits([0; WORDS]),
            firstargs: BTreeMap::new(),
            keys: Vec::new(),
            channels: Vec::new(),
        }
    }

    fn set_bit(&mut self, id: usize, v: bool) {
        self.bits.set(id, v);
        if !v {
            self.allcommands = false;
        }
    }

    /// `ACLChangeSelectorPerm`: a command and its subcommands.
    fn change_perm(&mut self, id: usize, v: bool) {
        self.set_bit(id, v);
        self.firstargs.remove(&id);
        for &s in &universe().cmds[id].subs {
            self.set_bit(s, v);
        }
    }

    /// `+@cat` / `-@cat`: every command of the category (a container with
    /// all its subcommands), then every subcommand of the category.
    fn apply_category(&mut self, cat: usize, v: bool) {
        let u = universe();
        for &t in &u.top {
            if u.cmds[t].cats & (1 << cat) != 0 {
                self.change_perm(t, v);
            }
            for &s in &u.cmds[t].subs {
                if u.cmds[s].cats & (1 << cat) != 0 {
                    self.change_perm(s, v);
                }
            }
        }
    }

    /// Commands of the category allowed and denied.
    fn count_category(&self, cat: usize) -> (u64, u64) {
        let ids = &universe().by_cat[cat];
        let on = ids.iter().filter(|&&i| self.bits.get(i)).count() as u64;
        (on, ids.len() as u64 - on)
    }

    fn all_commands(&mut self) {
        self.bits = Bits([u64::MAX; WORDS]);
        self.allcommands = true;
        self.firstargs.clear();
    }

    fn no_commands(&mut self) {
        self.bits = Bits([0; WORDS]);
        self.allcommands = false;
        self.firstargs.clear();
    }

    /// `ACLSetSelector`: one rule about commands, keys or channels.
    fn apply_rule(&mut self, op: &[u8]) -> Result<(), RuleError> {
        let c = cstr(op);
        let is = |w: &str| c.eq_ignore_ascii_case(w.as_bytes());
        let first = op.first().copied().unwrap_or(0);
        if is("allkeys") || is("~*") {
            self.allkeys = true;
            self.keys.clear();
        } else if is("resetkeys") {
            self.allkeys = false;
            self.keys.clear();
        } else if is("allchannels") || is("&*") {
            self.allchannels = true;
            self.channels.clear();
        } else if is("resetchannels") {
            self.allchannels = false;
            self.channels.clear();
        } else if is("allcommands") || is("+@all") {
            self.all_commands();
        } else if is("nocommands") || is("-@all") {
            self.no_commands();
        } else if first == b'~' || first == b'%' {
            if self.allkeys {
                return Err(RuleError::KeyAfterAll);
            }
            let mut perm = 0;
            let mut at = 1;
            if first == b'%' {
                while at < op.len() {
                    let ch = op[at];
                    if ch.eq_ignore_ascii_case(&b'R') && perm & PERM_R == 0 {
                        perm |= PERM_R;
                    } else if ch.eq_ignore_ascii_case(&b'W') && perm & PERM_W == 0 {
                        perm |= PERM_W;
                    } else if ch == b'~' && perm != 0 {
                        at += 1;
                        break;
                    } else {
                        return Err(RuleError::Syntax);
                    }
                    at += 1;
                }
                if perm == 0 {
                    return Err(RuleError::Syntax);
                }
            } else {
                perm = PERM_R | PERM_W;
            }
            let pattern = &op[at..];
            if has_spaces(pattern) {
                return Err(RuleError::Syntax);
            }
            match self.keys.iter_mut().find(|k| k.pattern == pattern) {
                Some(k) => k.perm |= perm,
                None => self.keys.push(KeyPattern {
                    pattern: pattern.to_vec(),
                    perm,
                }),
            }
            self.allkeys = false;
        } else if first == b'&' {
            if self.allchannels {
                return Err(RuleError::ChannelAfterAll);
            }
            let pattern = &op[1..];
            if has_spaces(pattern) {
                return Err(RuleError::Syntax);
            }
            if !self.channels.iter().any(|p| p == pattern) {
                self.channels.push(pattern.to_vec());
            }
            self.allchannels = false;
        } else if c.first() == Some(&b'+') && c.get(1) != Some(&b'@') {
            let name = &c[1..];
            match name.iter().rposition(|&b| b == b'|') {
                None => {
                    let id = lookup(name).ok_or(RuleError::UnknownCommand)?;
                    self.change_perm(id, true);
                }
                Some(bar) => {
                    let (base, sub) = (&name[..bar], &name[bar + 1..]);
                    let id = lookup(base).ok_or(RuleError::UnknownCommand)?;
                    let u = universe();
                    if u.cmds[id].parent.is_some() {
                        return Err(RuleError::FirstArgOfSubcommand);
                    }
                    if sub.is_empty() {
                        return Err(RuleError::Syntax);
                    }
                    if !u.cmds[id].subs.is_empty() {
                        let sid = lookup(name).ok_or(RuleError::UnknownCommand)?;
                        self.change_perm(sid, true);
                    } else {
                        let list = self.firstargs.entry(id).or_default();
                        if !list.iter().any(|a| a.eq_ignore_ascii_case(sub)) {
                            list.push(sub.to_vec());
                        }
                    }
                }
            }
        } else if c.first() == Some(&b'-') && c.get(1) != Some(&b'@') {
            let id = lookup(&c[1..]).ok_or(RuleError::UnknownCommand)?;
            self.change_perm(id, false);
        } else if matches!(c.first(), Some(b'+' | b'-')) && c.get(1) == Some(&b'@') {
            let cat = category(&c[2..]).ok_or(RuleError::UnknownCommand)?;
            self.apply_category(cat, c[0] == b'+');
        } else {
            return Err(RuleError::Syntax);
        }
        Ok(())
    }

    /// `ACLDescribeSelectorCommandRules`: `+@all` or `-@all`, the
    /// categories that fit best, then single commands and first
    /// arguments, so that applying it to an empty selector gives the same
    /// bitmap.
    fn describe_commands(&self) -> Vec<u8> {
        let additive = !self.bits.get(FUTURE);
        let mut rules = Vec::new();
        let mut fake = Selector::new(false);
        if additive {
            rules.extend_from_slice(b"-@all ");
            fake.no_commands();
        } else {
            rules.extend_from_slice(b"+@all ");
            fake.all_commands();
        }
        let mut temp = Selector::new(false);
        temp.bits = self.bits;
        let mut applied = [false; CATEGORIES.len()];
        loop {
            let mut best = None;
            let (mut mindiff, mut maxsame) = (i32::MAX as u64, 0u64);
            for (j, done) in applied.iter().enumerate() {
                if *done {
                    continue;
                }
                let (on, off) = temp.count_category(j);
                let (diff, same) = if additive { (off, on) } else { (on, off) };
                if same > diff && (diff < mindiff || (diff == mindiff && same > maxsame)) {
                    best = Some(j);
                    mindiff = diff;
                    maxsame = same;
                }
            }
            let Some(j) = best else { break };
            fake.apply_category(j, additive);
            temp.apply_category(j, !additive);
            rules.extend_from_slice(if additive { b"+@" } else { b"-@" });
            rules.extend_from_slice(CATEGORIES[j].as_bytes());
            rules.push(b' ');
            applied[j] = true;
        }
        let u = universe();
        for &t in &u.top {
            self.describe_single(&mut fake, t, &mut rules);
        }
        rules.pop();
        rules
    }

    fn describe_single(&self, fake: &mut Selector, id: usize, rules: &mut Vec<u8>) {
        let e = &universe().cmds[id];
        let mine = self.bits.get(id);
        if mine != fake.bits.get(id) {
            rules.push(if mine { b'+' } else { b'-' });
            rules.extend_from_slice(e.spec.name.as_bytes());
            rules.push(b' ');
            fake.change_perm(id, mine);
        }
        for &s in &e.subs {
            self.describe_single(fake, s, rules);
        }
        if !mine {
            for a in self.firstargs.get(&id).into_iter().flatten() {
                rules.push(b'+');
                rules.extend_from_slice(e.spec.name.as_bytes());
                rules.push(b'|');
                rules.extend_from_slice(a);
                rules.push(b' ');
            }
        }
    }

    /// `ACLDescribeSelector`: keys, channels, commands.
    fn describe(&self) -> Vec<u8> {
        let mut out = Vec::new();
        if self.allkeys {
            out.extend_from_slice(b"~* ");
        } else {
            for k in &self.keys {
                k.describe(&mut out);
                out.push(b' ');
            }
        }
        if self.allchannels {
            out.extend_from_slice(b"&* ");
        } else {
            out.extend_from_slice(b"resetchannels ");
            for c in &self.channels {
                out.push(b'&');
                out.extend_from_slice(c);
                out.push(b' ');
            }
        }
        out.extend(self.describe_commands());
        out
    }

    /// `ACL GETUSER`'s `keys` field.
    fn keys_field(&self) -> Vec<u8> {
        if self.allkeys {
            return b"~*".to_vec();
        }
        let mut out = Vec::new();
        for (i, k) in self.keys.iter().enumerate() {
            if i > 0 {
                out.push(b' ');
            }
            k.describe(&mut out);
        }
        out
    }

    /// `ACL GETUSER`'s `channels` field.
    fn channels_field(&self) -> Vec<u8> {
        if self.allchannels {
            return b"&*".to_vec();
        }
        let mut out = Vec::new();
        for (i, c) in self.channels.iter().enumerate() {
            if i > 0 {
                out.push(b' ');
            }
            out.push(b'&');
            out.extend_from_slice(c);
        }
        out
    }

    fn getuser_fields(&self) -> Vec<(Reply, Reply)> {
        vec![
            (
                Reply::bulk("commands"),
                Reply::bulk(self.describe_commands()),
            ),
            (Reply::bulk("keys"), Reply::bulk(self.keys_field())),
            (Reply::bulk("channels"), Reply::bulk(self.channels_field())),
        ]
    }

    fn key_ok(&self, key: &[u8], need: u8) -> bool {
        self.allkeys
            || self
                .keys
                .iter()
                .any(|p| p.perm & need == need && crate::notify::glob_match(&p.pattern, key, false))
    }

    fn channel_ok(&self, channel: &[u8], pattern: bool) -> bool {
        self.allchannels
            || self.channels.iter().any(|p| {
                if pattern {
                    cstr(p) == cstr(channel)
                } else {
                    crate::notify::glob_match(p, channel, false)
                }
            })
    }

    /// `ACLSelectorCheckCmd`: `Err((reason, argument index))`.
    fn check(
        &self,
        id: usize,
        args: &[Vec<u8>],
        keys: &[KeyRef],
        channels: &[ChannelRef],
    ) -> Result<(), (DenyReason, usize)> {
        let e = &universe().cmds[id];
        if !self.allcommands && !e.spec.has("no_auth") && !self.bits.get(id) {
            let at = if e.parent.is_some() { 2 } else { 1 };
            let allowed = args.len() >= 2
                && self.firstargs.get(&id).is_some_and(|list| {
                    args.get(at)
                        .is_some_and(|a| list.iter().any(|f| cstr(a).eq_ignore_ascii_case(cstr(f))))
                });
            if !allowed {
                return Err((DenyReason::Command, 0));
            }
        }
        if !self.allkeys {
            for k in keys {
                let Some(key) = args.get(k.pos) else { continue };
                let need = if k.read { PERM_R } else { 0 } | if k.write { PERM_W } else { 0 };
                if !self.key_ok(key, need) {
                    return Err((DenyReason::Key, k.pos));
                }
            }
        }
        if !self.allchannels {
            for c in channels {
                let Some(ch) = args.get(c.pos) else { continue };
                if !self.channel_ok(ch, c.pattern) {
                    return Err((DenyReason::Channel, c.pos));
                }
            }
        }
        Ok(())
    }

    /// Whether the selector grants `need` on every key (`~*`, `%R~*`...).
    fn unrestricted(&self, need: u8) -> bool {
        self.allkeys
            || self
                .keys
                .iter()
                .any(|p| p.perm & need == need && cstr(&p.pattern) == b"*")
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

impl User {
    /// A new user as `ACL SETUSER` creates it: off, no password, no
    /// permissions (all channels when `pubsub_all`).
    fn new(name: &[u8], pubsub_all: bool) -> User {
        User {
            name: name.to_vec(),
            enabled: false,
            nopass: false,
            payload: PayloadFlag::Unset,
            passwords: Vec::new(),
            root: Selector::new(pubsub_all),
            selectors: Vec::new(),
        }
    }

    /// The `default` user as a server starts with it: on, nopass, all
    /// commands, keys and channels.
    fn default_user(pubsub_all: bool) -> User {
        let mut u = User::new(b"default", pubsub_all);
        u.root.all_commands();
        u.root.allkeys = true;
        u.root.allchannels = true;
        u.enabled = true;
        u.nopass = true;
        u
    }

    /// Its name.
    pub fn name(&self) -> &[u8] {
        &self.name
    }

    /// `on`: it can authenticate.
    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// `nopass`: any password authenticates it.
    pub fn nopass(&self) -> bool {
        self.nopass
    }

    /// Its RESTORE payload flag.
    pub fn payload_flag(&self) -> PayloadFlag {
        self.payload
    }

    /// Its passwords' SHA-256 digests, in hex, in the order added.
    pub fn password_hashes(&self) -> Vec<String> {
        self.passwords.iter().map(|p| sha256::hex(p)).collect()
    }

    fn all_selectors(&self) -> impl Iterator<Item = &Selector> {
        std::iter::once(&self.root).chain(&self.selectors)
    }

    /// `ACLSetUser`: one rule.
    fn apply_rule(&mut self, op: &[u8], pubsub_all: bool) -> Result<(), RuleError> {
        if op.is_empty() {
            return Ok(());
        }
        let c = cstr(op);
        let is = |w: &str| c.eq_ignore_ascii_case(w.as_bytes());
        let first = op[0];
        if is("on") {
            self.enabled = true;
        } else if is("off") {
            self.enabled = false;
        } else if is("skip-sanitize-payload") {
            self.payload = PayloadFlag::Skip;
        } else if is("sanitize-payload") {
            self.payload = PayloadFlag::Sanitize;
        } else if is("nopass") {
            self.nopass = true;
            self.passwords.clear();
        } else if is("resetpass") {
            self.nopass = false;
            self.passwords.clear();
        } else if first == b'>' || first == b'#' {
            let hash = if first == b'>' {
                sha256::digest(&op[1..])
            } else {
                parse_hash(&op[1..]).ok_or(RuleError::BadHash)?
            };
            if !self.passwords.contains(&hash) {
                self.passwords.push(hash);
            }
            self.nopass = false;
        } else if first == b'<' || first == b'!' {
            let hash = if first == b'<' {
                sha256::digest(&op[1..])
            } else {
                parse_hash(&op[1..]).ok_or(RuleError::BadHash)?
            };
            let at = self
                .passwords
                .iter()
                .position(|p| *p == hash)
                .ok_or(RuleError::NoSuchPassword)?;
            self.passwords.remove(at);
        } else if first == b'(' && op.last() == Some(&b')') {
            let body = &op[1..op.len() - 1];
            let mut sel = Selector::new(pubsub_all);
            for word in split_args(body).unwrap_or_default() {
                sel.apply_rule(&word)?;
            }
            self.selectors.push(sel);
        } else if is("clearselectors") {
            self.selectors.clear();
        } else if is("reset") {
            self.nopass = false;
            self.passwords.clear();
            self.root.allkeys = false;
            self.root.keys.clear();
            self.root.allchannels = pubsub_all;
            self.root.channels.clear();
            self.enabled = false;
            self.payload = PayloadFlag::Sanitize;
            self.selectors.clear();
            self.root.no_commands();
        } else {
            self.root.apply_rule(op)?;
        }
        Ok(())
    }

    /// What `ACL LIST` prints after `user <name> `: flags, passwords, the
    /// root selector, then each selector in parentheses.
    pub fn describe(&self) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(if self.enabled { b"on " } else { b"off " });
        if self.nopass {
            out.extend_from_slice(b"nopass ");
        }
        match self.payload {
            PayloadFlag::Skip => out.extend_from_slice(b"skip-sanitize-payload "),
            PayloadFlag::Sanitize => out.extend_from_slice(b"sanitize-payload "),
            PayloadFlag::Unset => {}
        }
        for p in &self.passwords {
            out.push(b'#');
            out.extend_from_slice(sha256::hex(p).as_bytes());
            out.push(b' ');
        }
        out.extend(self.root.describe());
        for s in &self.selectors {
            out.extend_from_slice(b" (");
            out.extend(s.describe());
            out.push(b')');
        }
        out
    }

    /// Its `ACL LIST` line.
    pub fn list_line(&self) -> Vec<u8> {
        let mut out = b"user ".to_vec();
        out.extend_from_slice(&self.name);
        out.push(b' ');
        out.extend(self.describe());
        out
    }

    /// The `ACL GETUSER` reply.
    pub fn getuser_reply(&self) -> Reply {
        let mut flags = vec![Reply::bulk(if self.enabled { "on" } else { "off" })];
        if self.nopass {
            flags.push(Reply::bulk("nopass"));
        }
        match self.payload {
            PayloadFlag::Skip => flags.push(Reply::bulk("skip-sanitize-payload")),
            PayloadFlag::Sanitize => flags.push(Reply::bulk("sanitize-payload")),
            PayloadFlag::Unset => {}
        }
        let mut fields = vec![
            (Reply::bulk("flags"), Reply::Set(flags)),
            (
                Reply::bulk("passwords"),
                Reply::Array(Some(
                    self.password_hashes()
                        .into_iter()
                        .map(Reply::bulk)
                        .collect(),
                )),
            ),
        ];
        fields.extend(self.root.getuser_fields());
        fields.push((
            Reply::bulk("selectors"),
            Reply::Array(Some(
                self.selectors
                    .iter()
                    .map(|s| Reply::Map(s.getuser_fields()))
                    .collect(),
            )),
        ));
        Reply::Map(fields)
    }

    /// Whether the password authenticates this user (on, and nopass or a
    /// matching password).
    pub fn password_ok(&self, password: &[u8]) -> bool {
        if !self.enabled {
            return false;
        }
        if self.nopass {
            return true;
        }
        let h = sha256::digest(password);
        // Every password compared in full, without an early exit.
        self.passwords.iter().fold(false, |ok, p| {
            ok | (p.iter().zip(&h).fold(0u8, |d, (a, b)| d | (a ^ b)) == 0)
        })
    }

    /// Redis' `ACLCheckAllUserCommandPerm`: may this user run `args` (the
    /// words, name first), the command `spec` (the subcommand's spec for a
    /// container, see [`resolve`]), naming `keys` ([`key_refs`]) and
    /// `channels` ([`channel_refs`])? Each selector is tried in turn; when
    /// none allows it, the reported denial is a channel over a key over the
    /// command, and the one with the highest argument index.
    pub fn check(
        &self,
        spec: &CommandSpec,
        args: &[Vec<u8>],
        keys: &[KeyRef],
        channels: &[ChannelRef],
    ) -> Result<(), Denied> {
        let Some(id) = id_of_name(spec.name) else {
            return Err(Denied {
                reason: DenyReason::Command,
                pos: 0,
                object: spec.name.as_bytes().to_vec(),
            });
        };
        let rank = |r: DenyReason| match r {
            DenyReason::Command => 1,
            DenyReason::Key => 2,
            DenyReason::Channel => 4,
        };
        let (mut reason, mut pos) = (DenyReason::Command, 0);
        for s in self.all_selectors() {
            match s.check(id, args, keys, channels) {
                Ok(()) => return Ok(()),
                Err((r, p)) => {
                    if rank(r) > rank(reason) || (r == reason && p > pos) {
                        reason = r;
                        pos = p;
                    }
                }
            }
        }
        let object = match reason {
            DenyReason::Command => spec.name.as_bytes().to_vec(),
            _ => args.get(pos).cloned().unwrap_or_default(),
        };
        Err(Denied {
            reason,
            pos,
            object,
        })
    }

    /// [`User::check`] with the keys and channels Redis finds in `args`.
    /// A user whose selector allows every command, key and channel (the
    /// `default` user as a server starts) is let through without looking
    /// at the arguments.
    pub fn check_command(&self, spec: &CommandSpec, args: &[Vec<u8>]) -> Result<(), Denied> {
        if self.allows_everything() && id_of_name(spec.name).is_some() {
            return Ok(());
        }
        self.check(spec, args, &key_refs(spec, args), &channel_refs(spec, args))
    }

    /// Whether a selector allows every command, key and channel (the
    /// `default` user as a server starts).
    pub fn allows_everything(&self) -> bool {
        self.all_selectors()
            .any(|s| s.allcommands && s.allkeys && s.allchannels)
    }

    /// `ACLUserCheckKeyPerm`: may any selector touch `key` so?
    pub fn check_key(&self, key: &[u8], read: bool, write: bool) -> bool {
        let need = if read { PERM_R } else { 0 } | if write { PERM_W } else { 0 };
        self.all_selectors().any(|s| s.key_ok(key, need))
    }

    /// `ACLUserCheckChannelPerm`: may any selector use `channel` (a
    /// pattern, matched literally, when `pattern`)? The check of live
    /// subscriptions after [`SetUserOutcome::recheck_subscriptions`].
    pub fn check_channel(&self, channel: &[u8], pattern: bool) -> bool {
        self.all_selectors().any(|s| s.channel_ok(channel, pattern))
    }

    /// `ACLUserCheckCmdWithUnrestrictedKeyAccess`: may a selector run the
    /// command and also `read`/`write` every key? (`SORT ... BY/GET`.)
    pub fn check_unrestricted(
        &self,
        spec: &CommandSpec,
        args: &[Vec<u8>],
        read: bool,
        write: bool,
    ) -> bool {
        let Some(id) = id_of_name(spec.name) else {
            return false;
        };
        let need = if read { PERM_R } else { 0 } | if write { PERM_W } else { 0 };
        let keys = key_refs(spec, args);
        let channels = channel_refs(spec, args);
        self.all_selectors()
            .any(|s| s.check(id, args, &keys, &channels).is_ok() && s.unrestricted(need))
    }
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

impl UserTable {
    /// The table a server starts with: the `default` user (on, nopass, all
    /// commands, keys and channels), `acl-pubsub-default resetchannels`.
    pub fn new() -> UserTable {
        let mut users = BTreeMap::new();
        users.insert(b"default".to_vec(), User::default_user(false));
        UserTable {
            users,
            pubsub_all: false,
        }
    }

    /// The user `name`.
    pub fn user(&self, name: &[u8]) -> Option<&User> {
        self.users.get(name)
    }

    /// The `default` user (always there).
    pub fn default_user(&self) -> Option<&User> {
        self.users.get(&b"default"[..])
    }

    /// Every user, by name.
    pub fn users(&self) -> impl Iterator<Item = &User> {
        self.users.values()
    }

    /// `acl-pubsub-default`: `true` for `allchannels`.
    pub fn pubsub_default_all(&self) -> bool {
        self.pubsub_all
    }

    /// Sets `acl-pubsub-default` (`allchannels` when `all`): the channels
    /// of users (and selectors) created or reset from now on.
    pub fn set_pubsub_default(&mut self, all: bool) {
        self.pubsub_all = all;
    }

    /// `requirepass`: the `default` user's only password (`resetpass`
    /// then `>password`), or `nopass` for an empty one. Redis applies it
    /// when the configured value changes only: `CONFIG SET requirepass`
    /// of the value already configured leaves the user as it is (it may
    /// have been changed by `ACL SETUSER default` since).
    pub fn set_requirepass(&mut self, password: &[u8]) {
        let pubsub_all = self.pubsub_all;
        let user = self
            .users
            .entry(b"default".to_vec())
            .or_insert_with(|| User::default_user(pubsub_all));
        user.nopass = false;
        user.passwords.clear();
        if password.is_empty() {
            user.nopass = true;
        } else {
            user.passwords.push(sha256::digest(password));
        }
    }

    /// `ACL SETUSER name rules...`: every rule applies, or none.
    pub fn apply_setuser<T: AsRef<[u8]>>(
        &mut self,
        name: &[u8],
        rules: &[T],
    ) -> Result<SetUserOutcome, AclError> {
        if has_spaces(name) {
            return Err(AclError::BadUsername);
        }
        let merged = merge_selector_args(rules).map_err(|i| AclError::Unmatched {
            arg: rules[i].as_ref().to_vec(),
        })?;
        let old = self.users.get(name);
        let mut user = match old {
            Some(u) => u.clone(),
            None => User::new(name, self.pubsub_all),
        };
        for op in &merged {
            user.apply_rule(op, self.pubsub_all)
                .map_err(|error| AclError::Rule {
                    rule: op.clone(),
                    error,
                })?;
        }
        let outcome = SetUserOutcome {
            created: old.is_none(),
            recheck_subscriptions: old.is_some_and(|o| channels_revoked(&user, o)),
        };
        self.users.insert(name.to_vec(), user);
        Ok(outcome)
    }

    /// `ACL DELUSER names...`: the users deleted (the reply is their
    /// count).
    pub fn apply_deluser<T: AsRef<[u8]>>(&mut self, names: &[T]) -> Result<Vec<Vec<u8>>, AclError> {
        if names.iter().any(|n| cstr(n.as_ref()) == b"default") {
            return Err(AclError::DeleteDefault);
        }
        Ok(names
            .iter()
            .filter_map(|n| self.users.remove(n.as_ref()).map(|u| u.name))
            .collect())
    }

    /// `ACL LOAD` of an ACL file's text: the whole table replaced, or
    /// nothing changed and every problem reported (`filename` is named in
    /// the messages, as Redis names its `aclfile`).
    pub fn apply_load(&mut self, file: &[u8], filename: &str) -> Result<(), AclError> {
        *self = self.load_text(file, filename)?;
        Ok(())
    }

    /// The table an ACL file describes (Redis' `ACLLoadFromFile`): lines
    /// `user <name> <rules...>`, blank lines allowed; the `default` user
    /// as a server starts with it when the file has none. This table's
    /// `acl-pubsub-default` applies to the users created.
    pub fn load_text(&self, file: &[u8], filename: &str) -> Result<UserTable, AclError> {
        let pubsub_all = self.pubsub_all;
        let mut errors = String::new();
        let mut users: BTreeMap<Vec<u8>, User> = BTreeMap::new();
        for (i, raw) in file.split(|&b| b == b'\n').enumerate() {
            let linenum = i + 1;
            let line = trim(raw, b" \t\r\n");
            if line.is_empty() {
                continue;
            }
            let argv: Vec<&[u8]> = line.split(|&b| b == b' ').collect();
            if cstr(argv[0]) != b"user" || argv.len() < 2 {
                errors.push_str(&format!(
                    "{filename}:{linenum} should start with user keyword followed by the username. "
                ));
                continue;
            }
            let name = argv[1];
            if has_spaces(name) {
                errors.push_str(&format!(
                    "'{filename}:{linenum}: username '{}' contains invalid characters. ",
                    text(name)
                ));
                continue;
            }
            if users.contains_key(name) {
                errors.push_str(&format!(
                    "WARNING: Duplicate user '{}' found on line {linenum}. ",
                    text(name)
                ));
                continue;
            }
            let mut user = User::new(name, pubsub_all);
            match merge_selector_args(&argv[2..]) {
                Err(_) => errors.push_str(&format!(
                    "{filename}:{linenum}: Unmatched parenthesis in selector definition."
                )),
                Ok(ops) => {
                    let mut syntax_error = false;
                    for op in ops {
                        let op = trim(&op, b"\t\r\n");
                        match user.apply_rule(op, pubsub_all) {
                            Ok(()) => {}
                            Err(RuleError::UnknownCommand) => errors.push_str(&format!(
                                "{filename}:{linenum}: Error in applying operation '{}': {}. ",
                                text(op),
                                RuleError::UnknownCommand.message()
                            )),
                            Err(e) if !syntax_error => {
                                errors
                                    .push_str(&format!("{filename}:{linenum}: {}. ", e.message()));
                                syntax_error = true;
                            }
                            Err(_) => {}
                        }
                    }
                }
            }
            users.insert(name.to_vec(), user);
        }
        if !errors.is_empty() {
            errors.push_str(
                "WARNING: ACL errors detected, no change to the previously active ACL rules was performed",
            );
            return Err(AclError::Load(errors));
        }
        users
            .entry(b"default".to_vec())
            .or_insert_with(|| User::default_user(pubsub_all));
        Ok(UserTable { users, pubsub_all })
    }

    /// `ACL SAVE`: the ACL file's text, a `user` line per user.
    pub fn save_text(&self) -> Vec<u8> {
        let mut out = Vec::new();
        for u in self.users.values() {
            out.extend(u.list_line());
            out.push(b'\n');
        }
        out
    }

    /// `AUTH`'s check (`ACLCheckUserCredentials`).
    pub fn authenticate(&self, name: &[u8], password: &[u8]) -> Result<(), AuthError> {
        match self.users.get(name) {
            Some(u) if u.password_ok(password) => Ok(()),
            _ => Err(AuthError),
        }
    }

    /// The `AUTH` command (`AUTH password` or `AUTH username password`).
    pub fn auth_command(&self, args: &[Vec<u8>]) -> AuthOutcome {
        if args.len() > 3 {
            return AuthOutcome::Error(Reply::err("ERR syntax error"));
        }
        let (name, password): (&[u8], &[u8]) = match args {
            [_, pass] => {
                if self.default_user().map_or(true, |d| d.nopass) {
                    return AuthOutcome::Error(Reply::err(
                        "ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?",
                    ));
                }
                (b"default", pass)
            }
            [_, name, pass] => (name, pass),
            _ => return AuthOutcome::Error(crate::cmd::args::arity_error("auth")),
        };
        match self.authenticate(name, password) {
            Ok(()) => AuthOutcome::Ok {
                user: name.to_vec(),
            },
            Err(_) => AuthOutcome::Failed {
                user: name.to_vec(),
            },
        }
    }

    /// `ACL LIST`.
    pub fn list_reply(&self) -> Reply {
        Reply::Array(Some(
            self.users
                .values()
                .map(|u| Reply::bulk(u.list_line()))
                .collect(),
        ))
    }

    /// `ACL USERS`.
    pub fn users_reply(&self) -> Reply {
        Reply::Array(Some(
            self.users.keys().map(|n| Reply::bulk(n.clone())).collect(),
        ))
    }

    /// `ACL GETUSER name`: nil for no such user.
    pub fn getuser_reply(&self, name: &[u8]) -> Reply {
        match self.users.get(name) {
            Some(u) => u.getuser_reply(),
            None => Reply::nil(),
        }
    }

    /// `ACL DRYRUN user command args...` (`args`: the command's words).
    pub fn dryrun_reply(&self, user: &[u8], args: &[Vec<u8>]) -> Reply {
        let Some(u) = self.users.get(user) else {
            return Reply::err(format!("ERR User '{}' not found", text(user)));
        };
        let not_found = || {
            let name = args.first().map(|a| text(a)).unwrap_or_default();
            Reply::err(format!("ERR Command '{name}' not found"))
        };
        let Some(spec) = resolve(args) else {
            return not_found();
        };
        if !spec.arity_ok(args.len()) {
            return crate::cmd::args::arity_error(spec.name);
        }
        match u.check_command(spec, args) {
            Ok(()) => Reply::ok(),
            Err(d) => Reply::bulk(d.dryrun_text()),
        }
    }

    /// Runs a write of the `ACL` command (`SETUSER`, `DELUSER`, `LOAD`):
    /// its reply and what changed. `file` is the ACL file's text and name
    /// for `LOAD` (the caller reads it; `None`: no ACL file configured).
    /// Another command gets `None`.
    pub fn apply(
        &mut self,
        cmd: &AclCommand<'_>,
        file: Option<(&[u8], &str)>,
    ) -> Option<(Reply, Changed)> {
        Some(match cmd {
            AclCommand::SetUser { name, rules } => match self.apply_setuser(name, rules) {
                Ok(outcome) => (
                    Reply::ok(),
                    Changed::User {
                        name: name.to_vec(),
                        outcome,
                    },
                ),
                Err(e) => (e.reply(), Changed::Nothing),
            },
            AclCommand::DelUser(names) => match self.apply_deluser(names) {
                Ok(gone) => (
                    Reply::Integer(gone.len() as i64),
                    if gone.is_empty() {
                        Changed::Nothing
                    } else {
                        Changed::Deleted(gone)
                    },
                ),
                Err(e) => (e.reply(), Changed::Nothing),
            },
            AclCommand::Load => match file {
                None => (Reply::err(ERR_NO_ACL_FILE), Changed::Nothing),
                Some((text, name)) => match self.apply_load(text, name) {
                    Ok(()) => (Reply::ok(), Changed::Reloaded),
                    Err(e) => (e.reply(), Changed::Nothing),
                },
            },
            _ => return None,
        })
    }

    /// Answers a command of `ACL` that changes nothing replicated (every
    /// one but `SETUSER`, `DELUSER`, `LOAD`, `SAVE` and `LOG RESET`, which
    /// get `None`).
    pub fn read(&self, cmd: &AclCommand<'_>, ctx: &ReadContext<'_>) -> Option<Reply> {
        Some(match cmd {
            AclCommand::Cat(c) => cat_reply(*c),
            AclCommand::DryRun { user, command } => self.dryrun_reply(user, command),
            AclCommand::GenPass { bits } => genpass(*bits, ctx.random),
            AclCommand::GetUser(name) => self.getuser_reply(name),
            AclCommand::Help => help_reply(),
            AclCommand::List => self.list_reply(),
            AclCommand::Users => self.users_reply(),
            AclCommand::WhoAmI => match ctx.whoami {
                Some(n) => Reply::bulk(n.to_vec()),
                None => Reply::nil(),
            },
            AclCommand::Log(LogRequest::Show(n)) => ctx.log.reply(*n, ctx.now_ms),
            _ => return None,
        })
    }
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
