//! Which arguments of a command are keys, and how the command uses each
//! (read, write), as Redis 7.0 finds them for an ACL check: its key specs
//! (`src/commands/*.json` of Redis 7.0.15, in [`SPECS`]), and where those
//! are incomplete, ambiguous in their flags or do not fit the arguments,
//! the command's own key finder (`getkeys_proc`), as
//! `getKeysFromCommandWithSpecs` does.
//!
//! [`crate::cmd::keys_of`] gives positions only; an ACL check needs the
//! access as well (`%R~` / `%W~` patterns), hence this table.

use crate::cmd::table::CommandSpec;

/// The key is read (its value reaches the client: `ACCESS`).
pub(super) const R: u8 = 1;
/// The key is written (`INSERT`, `DELETE` or `UPDATE`).
pub(super) const W: u8 = 2;
/// Not a key (shard channels of `SPUBLISH`/`SSUBSCRIBE`).
const NOT_KEY: u8 = 4;
/// The spec may miss keys: the command's own finder decides.
const INCOMPLETE: u8 = 8;
/// The flags depend on the arguments: the command's own finder decides.
const VARIABLE: u8 = 16;

/// A key argument and what the command does with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyRef {
    /// Its index in the words (the command name is 0).
    pub pos: usize,
    /// Whether the command reads its value (needs `%R~` or `~`).
    pub read: bool,
    /// Whether the command writes it (needs `%W~` or `~`).
    pub write: bool,
}

impl KeyRef {
    /// Keys at `positions` (say from [`crate::cmd::keys_of`]) taken as
    /// read and written: the strictest check, for callers without the
    /// access of each key. [`key_refs`] gives Redis' exact access.
    pub fn read_write(positions: &[usize]) -> Vec<KeyRef> {
        positions
            .iter()
            .map(|&pos| KeyRef {
                pos,
                read: true,
                write: true,
            })
            .collect()
    }

    fn new(pos: usize, flags: u8) -> KeyRef {
        KeyRef {
            pos,
            read: flags & R != 0,
            write: flags & W != 0,
        }
    }
}

/// Where a key spec starts looking.
#[derive(Debug, Clone, Copy)]
pub(super) enum Bs {
    /// At this index.
    Index(i64),
    /// After this keyword (any case), searched from this index (negative:
    /// from the end, backwards).
    Keyword(&'static [u8], i64),
    /// Not expressible as a spec.
    Unknown,
}

/// How a key spec finds its keys from where it starts.
#[derive(Debug, Clone, Copy)]
pub(super) enum Fk {
    /// `last` relative to the start (negative: from the end), every
    /// `step`; with `limit`, the keys are the first 1/limit of the rest.
    Range { last: i64, step: i64, limit: i64 },
    /// A key count at `idx` from the start, the keys from `first` after
    /// the start, every `step`.
    Keynum { idx: i64, first: i64, step: i64 },
    /// Not expressible as a spec.
    Unknown,
}

/// One key spec.
#[derive(Debug, Clone, Copy)]
pub(super) struct Ks {
    pub(super) flags: u8,
    pub(super) bs: Bs,
    pub(super) fk: Fk,
}

/// A command's own key finder, used when its specs do not answer.
#[derive(Debug, Clone, Copy)]
pub(super) enum Proc {
    /// None: no keys when the specs fail.
    None,
    /// `numkeys` at `count`, keys from `first`, and a destination at
    /// `store` (0: none); flags not given.
    Generic {
        store: usize,
        count: usize,
        first: usize,
    },
    /// `SORT`: the key, and the `STORE` destination.
    Sort,
    /// `SORT_RO`: the key.
    SortRo,
    /// `MIGRATE`: the key, or the keys after `KEYS`.
    Migrate,
    /// `GEORADIUS[BYMEMBER]`: the key and a `STORE`/`STOREDIST` one.
    Georadius,
    /// `XREAD[GROUP]`: the keys after `STREAMS`.
    Xread,
    /// `SET`: read as well with `GET`.
    Set,
    /// `BITFIELD`: read only with only `GET`s.
    Bitfield,
}

/// The specs of command `name` (full name, lower case): none for a
/// command without keys.
fn specs_of(name: &str) -> Option<&'static (&'static str, &'static [Ks], Proc)> {
    SPECS
        .binary_search_by(|(n, _, _)| n.cmp(&name))
        .ok()
        .map(|i| &SPECS[i])
}

fn eq_nocase(a: &[u8], b: &[u8]) -> bool {
    super::cstr(a).eq_ignore_ascii_case(b)
}

/// The keys of `args` (the words, name first) for command `spec` (the
/// subcommand's spec for a container), in Redis' order, with their access:
/// `getKeysFromCommandWithSpecs` of Redis 7.0.
pub fn key_refs(spec: &CommandSpec, args: &[Vec<u8>]) -> Vec<KeyRef> {
    let Some((_, specs, proc)) = specs_of(spec.name) else {
        return Vec::new();
    };
    let real = specs.iter().any(|k| k.flags & NOT_KEY == 0);
    let variable = specs.iter().any(|k| k.flags & VARIABLE != 0);
    if real && !variable {
        if let Some(keys) = by_specs(specs, spec.arity, args) {
            return keys;
        }
    }
    by_proc(*proc, args)
}

/// `getKeysUsingKeySpecs`: `None` when a spec does not answer (unknown,
/// incomplete, or out of the arguments' range).
fn by_specs(specs: &[Ks], arity: i64, args: &[Vec<u8>]) -> Option<Vec<KeyRef>> {
    let argc = args.len() as i64;
    let mut out = Vec::new();
    for k in specs {
        if k.flags & NOT_KEY != 0 {
            continue;
        }
        let mut first = match k.bs {
            Bs::Index(pos) => pos,
            Bs::Keyword(word, from) => {
                let start = if from > 0 { from } else { argc + from };
                let end = if from > 0 { argc - 1 } else { 1 };
                let mut found = 0;
                let mut i = start;
                while i != end {
                    if i >= argc || i < 1 {
                        break;
                    }
                    if eq_nocase(&args[i as usize], word) {
                        found = i + 1;
                        break;
                    }
                    i += if start <= end { 1 } else { -1 };
                }
                if found == 0 {
                    continue;
                }
                found
            }
            Bs::Unknown => return None,
        };
        let (last, step) = match k.fk {
            Fk::Range { last, step, limit } => {
                let end = if last >= 0 {
                    first + last
                } else if limit == 0 {
                    argc + last
                } else {
                    first + ((argc - first) / limit + last)
                };
                (end, step)
            }
            Fk::Keynum {
                idx,
                first: f,
                step,
            } => {
                if idx >= argc {
                    return None;
                }
                let at = usize::try_from(first + idx).ok()?;
                let n = crate::resp::parse_i64_strict(args.get(at)?)?;
                if n < 0 {
                    return None;
                }
                first += f;
                (first.checked_add(n)? - 1, step)
            }
            Fk::Unknown => return None,
        };
        if last >= argc || last < first || first >= argc {
            return None;
        }
        let mut i = first;
        while i <= last {
            if i >= argc || i < first {
                if arity < 0 {
                    i += step.max(1);
                    continue;
                }
                return None;
            }
            out.push(KeyRef::new(i as usize, k.flags));
            i += step.max(1);
        }
        if k.flags & INCOMPLETE != 0 {
            return None;
        }
    }
    Some(out)
}

/// C's `atoi` (as `genericGetKeys` reads `numkeys`): leading blanks, a
/// sign, digits up to the first other byte; wraps as a C `int` would.
fn atoi(b: &[u8]) -> i32 {
    let b = super::cstr(b);
    let mut i = 0;
    while i < b.len() && matches!(b[i], b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r') {
        i += 1;
    }
    let neg = match b.get(i) {
        Some(b'-') => {
            i += 1;
            true
        }
        Some(b'+') => {
            i += 1;
            false
        }
        _ => false,
    };
    let mut v: i64 = 0;
    while i < b.len() && b[i].is_ascii_digit() {
        v = v.saturating_mul(10).saturating_add(i64::from(b[i] - b'0'));
        i += 1;
    }
    let v = if neg { -v } else { v };
    v as i32
}

/// The command's own finder (`getkeys_proc`).
fn by_proc(proc: Proc, args: &[Vec<u8>]) -> Vec<KeyRef> {
    let argc = args.len();
    let word = |i: usize, w: &str| args.get(i).is_some_and(|a| eq_nocase(a, w.as_bytes()));
    match proc {
        Proc::None => Vec::new(),
        Proc::Generic {
            store,
            count,
            first,
        } => {
            let Some(n) = args.get(count).map(|a| atoi(a)) else {
                return Vec::new();
            };
            if n < 1 || n as i64 > argc as i64 - first as i64 {
                return Vec::new();
            }
            let mut out: Vec<KeyRef> = (0..n as usize).map(|i| KeyRef::new(first + i, 0)).collect();
            if store != 0 {
                out.push(KeyRef::new(store, 0));
            }
            out
        }
        Proc::SortRo => vec![KeyRef::new(1, R)],
        Proc::Sort => {
            let mut store = None;
            let mut i = 2;
            while i < argc {
                // The skip list is tried in order; `STORE` is checked at
                // every step of it, as Redis' loop does.
                for (name, skip) in [("limit", 2), ("get", 1), ("by", 1)] {
                    if word(i, name) {
                        i += skip;
                        break;
                    } else if word(i, "store") && i + 1 < argc {
                        store = Some(i + 1);
                        break;
                    }
                }
                i += 1;
            }
            let mut out = vec![KeyRef::new(1, R)];
            if let Some(s) = store {
                out.push(KeyRef::new(s, W));
            }
            out
        }
        Proc::Migrate => {
            let (mut first, mut num) = (3, 1);
            if argc > 6 {
                let mut i = 6;
                while i < argc {
                    if word(i, "keys") {
                        if !args[3].is_empty() {
                            num = 0;
                        } else {
                            first = i + 1;
                            num = argc - first;
                        }
                        break;
                    }
                    for (name, skip) in [("copy", 0), ("replace", 0), ("auth", 1), ("auth2", 2)] {
                        if word(i, name) {
                            i += skip;
                            break;
                        }
                    }
                    i += 1;
                }
            }
            (first..first + num)
                .filter(|&p| p < argc)
                .map(|p| KeyRef::new(p, R | W))
                .collect()
        }
        Proc::Georadius => {
            let mut stored = None;
            let mut i = 5;
            while i < argc {
                if (word(i, "store") || word(i, "storedist")) && i + 1 < argc {
                    stored = Some(i + 1);
                    i += 1;
                }
                i += 1;
            }
            let mut out = vec![KeyRef::new(1, 0)];
            if let Some(s) = stored {
                out.push(KeyRef::new(s, 0));
            }
            out
        }
        Proc::Xread => {
            let mut streams = None;
            let mut i = 1;
            while i < argc {
                if word(i, "block") || word(i, "count") {
                    i += 1;
                } else if word(i, "group") {
                    i += 2;
                } else if word(i, "noack") {
                } else if word(i, "streams") {
                    streams = Some(i);
                    break;
                } else {
                    break;
                }
                i += 1;
            }
            let Some(s) = streams else {
                return Vec::new();
            };
            let num = argc - s - 1;
            if num == 0 || num % 2 != 0 {
                return Vec::new();
            }
            (s + 1..s + 1 + num / 2)
                .map(|p| KeyRef::new(p, 0))
                .collect()
        }
        Proc::Set => {
            // `GET` exactly (three letters, any case), among the options.
            let get = args.iter().skip(3).any(|a| {
                let a = super::cstr(a);
                a.len() == 3 && a.eq_ignore_ascii_case(b"get")
            });
            vec![KeyRef::new(1, if get { R | W } else { W })]
        }
        Proc::Bitfield => {
            let mut readonly = true;
            let mut i = 2;
            while i < argc {
                let rem = argc - i - 1;
                if word(i, "get") && rem >= 2 {
                    i += 2;
                } else if (word(i, "set") || word(i, "incrby")) && rem >= 3 {
                    readonly = false;
                    break;
                } else if word(i, "overflow") && rem >= 1 {
                    i += 1;
                } else {
                    readonly = false;
                    break;
                }
                i += 1;
            }
            vec![KeyRef::new(1, if readonly { R } else { R | W })]
        }
    }
}

/// A key spec.
const fn ks(flags: u8, bs: Bs, fk: Fk) -> Ks {
    Ks { flags, bs, fk }
}

/// Starts at index `pos`.
const fn at(pos: i64) -> Bs {
    Bs::Index(pos)
}

/// Starts after `word`, searched from `from`.
const fn kw(word: &'static [u8], from: i64) -> Bs {
    Bs::Keyword(word, from)
}

/// Keys up to `last`, every `step`, `limit`.
const fn range(last: i64, step: i64, limit: i64) -> Fk {
    Fk::Range { last, step, limit }
}

/// One key, where the spec starts.
const ONE: Fk = range(0, 1, 0);

/// A key count at `idx`, keys from `first`, every `step`.
const fn keynum(idx: i64, first: i64, step: i64) -> Fk {
    Fk::Keynum { idx, first, step }
}

/// No finder of its own.
const NONE: Proc = Proc::None;

/// `genericGetKeys` with a destination at `store`, the count at `count`,
/// keys from `first`.
const fn generic(store: usize, count: usize, first: usize) -> Proc {
    Proc::Generic {
        store,
        count,
        first,
    }
}

// Generated from Redis 7.0.15's `src/commands/*.json`: every command with
// key specs or a key finder, sorted by full name. `R`: ACCESS; `W`:
// INSERT, DELETE or UPDATE.
pub(super) static SPECS: &[(&str, &[Ks], Proc)] = &[
    ("append", &[ks(W, at(1), ONE)], NONE),
    ("bitcount", &[ks(R, at(1), ONE)], NONE),
    (
        "bitfield",
        &[ks(R | W | VARIABLE, at(1), ONE)],
        Proc::Bitfield,
    ),
    ("bitfield_ro", &[ks(R, at(1), ONE)], NONE),
    (
        "bitop",
        &[ks(W, at(2), ONE), ks(R, at(3), range(-1, 1, 0))],
        NONE,
    ),
    ("bitpos", &[ks(R, at(1), ONE)], NONE),
    ("blmove", &[ks(R | W, at(1), ONE), ks(W, at(2), ONE)], NONE),
    (
        "blmpop",
        &[ks(R | W, at(2), keynum(0, 1, 1))],
        generic(0, 2, 3),
    ),
    ("blpop", &[ks(R | W, at(1), range(-2, 1, 0))], NONE),
    ("brpop", &[ks(R | W, at(1), range(-2, 1, 0))], NONE),
    (
        "brpoplpush",
        &[ks(R | W, at(1), ONE), ks(W, at(2), ONE)],
        NONE,
    ),
    (
        "bzmpop",
        &[ks(R | W, at(2), keynum(0, 1, 1))],
        generic(0, 2, 3),
    ),
    ("bzpopmax", &[ks(R | W, at(1), range(-2, 1, 0))], NONE),
    ("bzpopmin", &[ks(R | W, at(1), range(-2, 1, 0))], NONE),
    ("copy", &[ks(R, at(1), ONE), ks(W, at(2), ONE)], NONE),
    ("decr", &[ks(R | W, at(1), ONE)], NONE),
    ("decrby", &[ks(R | W, at(1), ONE)], NONE),
    ("del", &[ks(W, at(1), range(-1, 1, 0))], NONE),
    ("dump", &[ks(R, at(1), ONE)], NONE),
    (
        "eval",
        &[ks(R | W, at(2), keynum(0, 1, 1))],
        generic(0, 2, 3),
    ),
    (
        "eval_ro",
        &[ks(R, at(2), keynum(0, 1, 1))],
        generic(0, 2, 3),
    ),
    (
        "evalsha",
        &[ks(R | W, at(2), keynum(0, 1, 1))],
        generic(0, 2, 3),
    ),
    (
        "evalsha_ro",
        &[ks(R, at(2), keynum(0, 1, 1))],
        generic(0, 2, 3),
    ),
    ("exists", &[ks(0, at(1), range(-1, 1, 0))], NONE),
    ("expire", &[ks(W, at(1), ONE)], NONE),
    ("expireat", &[ks(W, at(1), ONE)], NONE),
    ("expiretime", &[ks(R, at(1), ONE)], NONE),
    (
        "fcall",
        &[ks(R | W, at(2), keynum(0, 1, 1))],
        generic(0, 2, 3),
    ),
    (
        "fcall_ro",
        &[ks(R, at(2), keynum(0, 1, 1))],
        generic(0, 2, 3),
    ),
    ("geoadd", &[ks(W, at(1), ONE)], NONE),
    ("geodist", &[ks(R, at(1), ONE)], NONE),
    ("geohash", &[ks(R, at(1), ONE)], NONE),
    ("geopos", &[ks(R, at(1), ONE)], NONE),
    (
        "georadius",
        &[
            ks(R, at(1), ONE),
            ks(W, kw(b"store", 6), ONE),
            ks(W, kw(b"storedist", 6), ONE),
        ],
        Proc::Georadius,
    ),
    ("georadius_ro", &[ks(R, at(1), ONE)], NONE),
    (
        "georadiusbymember",
        &[
            ks(R, at(1), ONE),
            ks(W, kw(b"store", 5), ONE),
            ks(W, kw(b"storedist", 5), ONE),
        ],
        Proc::Georadius,
    ),
    ("georadiusbymember_ro", &[ks(R, at(1), ONE)], NONE),
    ("geosearch", &[ks(R, at(1), ONE)], NONE),
    (
        "geosearchstore",
        &[ks(W, at(1), ONE), ks(R, at(2), ONE)],
        NONE,
    ),
    ("get", &[ks(R, at(1), ONE)], NONE),
    ("getbit", &[ks(R, at(1), ONE)], NONE),
    ("getdel", &[ks(R | W, at(1), ONE)], NONE),
    ("getex", &[ks(R | W, at(1), ONE)], NONE),
    ("getrange", &[ks(R, at(1), ONE)], NONE),
    ("getset", &[ks(R | W, at(1), ONE)], NONE),
    ("hdel", &[ks(W, at(1), ONE)], NONE),
    ("hexists", &[ks(0, at(1), ONE)], NONE),
    ("hget", &[ks(R, at(1), ONE)], NONE),
    ("hgetall", &[ks(R, at(1), ONE)], NONE),
    ("hincrby", &[ks(R | W, at(1), ONE)], NONE),
    ("hincrbyfloat", &[ks(R | W, at(1), ONE)], NONE),
    ("hkeys", &[ks(R, at(1), ONE)], NONE),
    ("hlen", &[ks(0, at(1), ONE)], NONE),
    ("hmget", &[ks(R, at(1), ONE)], NONE),
    ("hmset", &[ks(W, at(1), ONE)], NONE),
    ("hrandfield", &[ks(R, at(1), ONE)], NONE),
    ("hscan", &[ks(R, at(1), ONE)], NONE),
    ("hset", &[ks(W, at(1), ONE)], NONE),
    ("hsetnx", &[ks(W, at(1), ONE)], NONE),
    ("hstrlen", &[ks(0, at(1), ONE)], NONE),
    ("hvals", &[ks(R, at(1), ONE)], NONE),
    ("incr", &[ks(R | W, at(1), ONE)], NONE),
    ("incrby", &[ks(R | W, at(1), ONE)], NONE),
    ("incrbyfloat", &[ks(R | W, at(1), ONE)], NONE),
    ("lcs", &[ks(R, at(1), range(1, 1, 0))], NONE),
    ("lindex", &[ks(R, at(1), ONE)], NONE),
    ("linsert", &[ks(W, at(1), ONE)], NONE),
    ("llen", &[ks(0, at(1), ONE)], NONE),
    ("lmove", &[ks(R | W, at(1), ONE), ks(W, at(2), ONE)], NONE),
    (
        "lmpop",
        &[ks(R | W, at(1), keynum(0, 1, 1))],
        generic(0, 1, 2),
    ),
    ("lpop", &[ks(R | W, at(1), ONE)], NONE),
    ("lpos", &[ks(R, at(1), ONE)], NONE),
    ("lpush", &[ks(W, at(1), ONE)], NONE),
    ("lpushx", &[ks(W, at(1), ONE)], NONE),
    ("lrange", &[ks(R, at(1), ONE)], NONE),
    ("lrem", &[ks(W, at(1), ONE)], NONE),
    ("lset", &[ks(W, at(1), ONE)], NONE),
    ("ltrim", &[ks(W, at(1), ONE)], NONE),
    ("memory|usage", &[ks(0, at(2), ONE)], NONE),
    ("mget", &[ks(R, at(1), range(-1, 1, 0))], NONE),
    (
        "migrate",
        &[
            ks(R | W, at(3), ONE),
            ks(R | W | INCOMPLETE, kw(b"keys", -2), range(-1, 1, 0)),
        ],
        Proc::Migrate,
    ),
    ("move", &[ks(R | W, at(1), ONE)], NONE),
    ("mset", &[ks(W, at(1), range(-1, 2, 0))], NONE),
    ("msetnx", &[ks(W, at(1), range(-1, 2, 0))], NONE),
    ("object|encoding", &[ks(0, at(2), ONE)], NONE),
    ("object|freq", &[ks(0, at(2), ONE)], NONE),
    ("object|idletime", &[ks(0, at(2), ONE)], NONE),
    ("object|refcount", &[ks(0, at(2), ONE)], NONE),
    ("persist", &[ks(W, at(1), ONE)], NONE),
    ("pexpire", &[ks(W, at(1), ONE)], NONE),
    ("pexpireat", &[ks(W, at(1), ONE)], NONE),
    ("pexpiretime", &[ks(R, at(1), ONE)], NONE),
    ("pfadd", &[ks(W, at(1), ONE)], NONE),
    ("pfcount", &[ks(R, at(1), range(-1, 1, 0))], NONE),
    ("pfdebug", &[ks(R, at(2), ONE)], NONE),
    (
        "pfmerge",
        &[ks(R | W, at(1), ONE), ks(R, at(2), range(-1, 1, 0))],
        NONE,
    ),
    ("psetex", &[ks(W, at(1), ONE)], NONE),
    ("pttl", &[ks(R, at(1), ONE)], NONE),
    ("rename", &[ks(R | W, at(1), ONE), ks(W, at(2), ONE)], NONE),
    (
        "renamenx",
        &[ks(R | W, at(1), ONE), ks(W, at(2), ONE)],
        NONE,
    ),
    ("restore", &[ks(W, at(1), ONE)], NONE),
    ("restore-asking", &[ks(W, at(1), ONE)], NONE),
    ("rpop", &[ks(R | W, at(1), ONE)], NONE),
    (
        "rpoplpush",
        &[ks(R | W, at(1), ONE), ks(W, at(2), ONE)],
        NONE,
    ),
    ("rpush", &[ks(W, at(1), ONE)], NONE),
    ("rpushx", &[ks(W, at(1), ONE)], NONE),
    ("sadd", &[ks(W, at(1), ONE)], NONE),
    ("scard", &[ks(0, at(1), ONE)], NONE),
    ("sdiff", &[ks(R, at(1), range(-1, 1, 0))], NONE),
    (
        "sdiffstore",
        &[ks(W, at(1), ONE), ks(R, at(2), range(-1, 1, 0))],
        NONE,
    ),
    ("set", &[ks(R | W | VARIABLE, at(1), ONE)], Proc::Set),
    ("setbit", &[ks(R | W, at(1), ONE)], NONE),
    ("setex", &[ks(W, at(1), ONE)], NONE),
    ("setnx", &[ks(W, at(1), ONE)], NONE),
    ("setrange", &[ks(W, at(1), ONE)], NONE),
    ("sinter", &[ks(R, at(1), range(-1, 1, 0))], NONE),
    (
        "sintercard",
        &[ks(R, at(1), keynum(0, 1, 1))],
        generic(0, 1, 2),
    ),
    (
        "sinterstore",
        &[ks(W, at(1), ONE), ks(R, at(2), range(-1, 1, 0))],
        NONE,
    ),
    ("sismember", &[ks(0, at(1), ONE)], NONE),
    ("smembers", &[ks(R, at(1), ONE)], NONE),
    ("smismember", &[ks(R, at(1), ONE)], NONE),
    ("smove", &[ks(R | W, at(1), ONE), ks(W, at(2), ONE)], NONE),
    (
        "sort",
        &[
            ks(R, at(1), ONE),
            ks(R, Bs::Unknown, Fk::Unknown),
            ks(W, Bs::Unknown, Fk::Unknown),
        ],
        Proc::Sort,
    ),
    (
        "sort_ro",
        &[ks(R, at(1), ONE), ks(R, Bs::Unknown, Fk::Unknown)],
        Proc::SortRo,
    ),
    ("spop", &[ks(R | W, at(1), ONE)], NONE),
    ("spublish", &[ks(NOT_KEY, at(1), ONE)], NONE),
    ("srandmember", &[ks(R, at(1), ONE)], NONE),
    ("srem", &[ks(W, at(1), ONE)], NONE),
    ("sscan", &[ks(R, at(1), ONE)], NONE),
    ("ssubscribe", &[ks(NOT_KEY, at(1), range(-1, 1, 0))], NONE),
    ("strlen", &[ks(0, at(1), ONE)], NONE),
    ("substr", &[ks(R, at(1), ONE)], NONE),
    ("sunion", &[ks(R, at(1), range(-1, 1, 0))], NONE),
    (
        "sunionstore",
        &[ks(W, at(1), ONE), ks(R, at(2), range(-1, 1, 0))],
        NONE,
    ),
    ("sunsubscribe", &[ks(NOT_KEY, at(1), range(-1, 1, 0))], NONE),
    ("touch", &[ks(0, at(1), range(-1, 1, 0))], NONE),
    ("ttl", &[ks(R, at(1), ONE)], NONE),
    ("type", &[ks(0, at(1), ONE)], NONE),
    ("unlink", &[ks(W, at(1), range(-1, 1, 0))], NONE),
    ("watch", &[ks(0, at(1), range(-1, 1, 0))], NONE),
    ("xack", &[ks(W, at(1), ONE)], NONE),
    ("xadd", &[ks(W, at(1), ONE)], NONE),
    ("xautoclaim", &[ks(W, at(1), ONE)], NONE),
    ("xclaim", &[ks(W, at(1), ONE)], NONE),
    ("xdel", &[ks(W, at(1), ONE)], NONE),
    ("xgroup|create", &[ks(W, at(2), ONE)], NONE),
    ("xgroup|createconsumer", &[ks(W, at(2), ONE)], NONE),
    ("xgroup|delconsumer", &[ks(W, at(2), ONE)], NONE),
    ("xgroup|destroy", &[ks(W, at(2), ONE)], NONE),
    ("xgroup|setid", &[ks(W, at(2), ONE)], NONE),
    ("xinfo|consumers", &[ks(R, at(2), ONE)], NONE),
    ("xinfo|groups", &[ks(R, at(2), ONE)], NONE),
    ("xinfo|stream", &[ks(R, at(2), ONE)], NONE),
    ("xlen", &[ks(0, at(1), ONE)], NONE),
    ("xpending", &[ks(R, at(1), ONE)], NONE),
    ("xrange", &[ks(R, at(1), ONE)], NONE),
    (
        "xread",
        &[ks(R, kw(b"streams", 1), range(-1, 1, 2))],
        Proc::Xread,
    ),
    (
        "xreadgroup",
        &[ks(R, kw(b"streams", 4), range(-1, 1, 2))],
        Proc::Xread,
    ),
    ("xrevrange", &[ks(R, at(1), ONE)], NONE),
    ("xsetid", &[ks(W, at(1), ONE)], NONE),
    ("xtrim", &[ks(W, at(1), ONE)], NONE),
    ("zadd", &[ks(W, at(1), ONE)], NONE),
    ("zcard", &[ks(0, at(1), ONE)], NONE),
    ("zcount", &[ks(R, at(1), ONE)], NONE),
    ("zdiff", &[ks(R, at(1), keynum(0, 1, 1))], generic(0, 1, 2)),
    (
        "zdiffstore",
        &[ks(W, at(1), ONE), ks(R, at(2), keynum(0, 1, 1))],
        generic(1, 2, 3),
    ),
    ("zincrby", &[ks(R | W, at(1), ONE)], NONE),
    ("zinter", &[ks(R, at(1), keynum(0, 1, 1))], generic(0, 1, 2)),
    (
        "zintercard",
        &[ks(R, at(1), keynum(0, 1, 1))],
        generic(0, 1, 2),
    ),
    (
        "zinterstore",
        &[ks(W, at(1), ONE), ks(R, at(2), keynum(0, 1, 1))],
        generic(1, 2, 3),
    ),
    ("zlexcount", &[ks(R, at(1), ONE)], NONE),
    (
        "zmpop",
        &[ks(R | W, at(1), keynum(0, 1, 1))],
        generic(0, 1, 2),
    ),
    ("zmscore", &[ks(R, at(1), ONE)], NONE),
    ("zpopmax", &[ks(R | W, at(1), ONE)], NONE),
    ("zpopmin", &[ks(R | W, at(1), ONE)], NONE),
    ("zrandmember", &[ks(R, at(1), ONE)], NONE),
    ("zrange", &[ks(R, at(1), ONE)], NONE),
    ("zrangebylex", &[ks(R, at(1), ONE)], NONE),
    ("zrangebyscore", &[ks(R, at(1), ONE)], NONE),
    ("zrangestore", &[ks(W, at(1), ONE), ks(R, at(2), ONE)], NONE),
    ("zrank", &[ks(R, at(1), ONE)], NONE),
    ("zrem", &[ks(W, at(1), ONE)], NONE),
    ("zremrangebylex", &[ks(W, at(1), ONE)], NONE),
    ("zremrangebyrank", &[ks(W, at(1), ONE)], NONE),
    ("zremrangebyscore", &[ks(W, at(1), ONE)], NONE),
    ("zrevrange", &[ks(R, at(1), ONE)], NONE),
    ("zrevrangebylex", &[ks(R, at(1), ONE)], NONE),
    ("zrevrangebyscore", &[ks(R, at(1), ONE)], NONE),
    ("zrevrank", &[ks(R, at(1), ONE)], NONE),
    ("zscan", &[ks(R, at(1), ONE)], NONE),
    ("zscore", &[ks(R, at(1), ONE)], NONE),
    ("zunion", &[ks(R, at(1), keynum(0, 1, 1))], generic(0, 1, 2)),
    (
        "zunionstore",
        &[ks(W, at(1), ONE), ks(R, at(2), keynum(0, 1, 1))],
        generic(1, 2, 3),
    ),
];
