//! Keyspace commands on keys of any type: EXISTS, TOUCH, TTL, PTTL,
//! EXPIRETIME, PEXPIRETIME, EXPIRE, PEXPIRE, EXPIREAT, PEXPIREAT (with NX,
//! XX, GT, LT), PERSIST, DBSIZE, TYPE, OBJECT, KEYS, SCAN (MATCH, COUNT,
//! TYPE), RANDOMKEY, RENAME, RENAMENX, COPY.
//!
//! A relative expiry (`EXPIRE k 10`) counts from the op's logical instant,
//! the same on every member.

use super::args::{eq, int, parse_scan, scan_reply, syntax, ScanOpts};

use crate::notify::{glob_match, NotifyFlags};
use crate::resp::Reply;
use crate::store::Store;
use crate::value::{scan_page, SplitMix};

pub(super) const NAMES: &[&str] = &[
    "exists",
    "touch",
    "ttl",
    "pttl",
    "expiretime",
    "pexpiretime",
    "expire",
    "pexpire",
    "expireat",
    "pexpireat",
    "persist",
    "object",
    "memory",
    "dbsize",
    "type",
    "keys",
    "scan",
    "randomkey",
    "rename",
    "renamenx",
    "copy",
];

/// The conditions of `EXPIRE ... NX|XX|GT|LT` (XX combines with GT or
/// LT).
#[derive(Clone, Copy, Default)]
pub(super) struct ExpireIf {
    /// `NX`: only without an expiry.
    nx: bool,
    /// `XX`: only with one.
    xx: bool,
    /// `GT`: only later than the current one (none is infinitely late).
    gt: bool,
    /// `LT`: only earlier (any is earlier than none).
    lt: bool,
}

/// When an `EXPIRE`-family command sets the expiry.
#[derive(Clone, Copy)]
pub(super) enum When {
    /// This many ms after the op's instant.
    After(i64),
    /// At this instant, ms since the epoch.
    At(i64),
}

pub(super) enum Cmd<'a> {
    /// A key named twice counts twice (TOUCH too).
    Exists(&'a [Vec<u8>]),
    ExpireTime {
        key: &'a [u8],
        millis: bool,
    },
    Expire {
        key: &'a [u8],
        when: When,
        cond: ExpireIf,
        /// The command's name, for its error text.
        name: &'static str,
    },
    Persist(&'a [u8]),
    Object(&'a [Vec<u8>]),
    /// `MEMORY USAGE|DOCTOR|STATS|MALLOC-STATS|PURGE|HELP`.
    Memory(&'a [Vec<u8>]),
    Ttl {
        key: &'a [u8],
        millis: bool,
    },
    DbSize,
    Type(&'a [u8]),
    Keys(&'a [u8]),
    Scan(ScanOpts),
    RandomKey,
    Rename {
        src: &'a [u8],
        dst: &'a [u8],
        nx: bool,
    },
    Copy {
        src: &'a [u8],
        dst: &'a [u8],
        replace: bool,
    },
}

/// Parses command `name` of this module (its arity already checked).
pub(super) fn parse<'a>(name: &str, a: &'a [Vec<u8>]) -> Result<Cmd<'a>, Reply> {
    Ok(match name {
        "exists" | "touch" => Cmd::Exists(&a[1..]),
        "expiretime" | "pexpiretime" => Cmd::ExpireTime {
            key: &a[1],
            millis: name == "pexpiretime",
        },
        "expire" | "pexpire" | "expireat" | "pexpireat" => parse_expire(name, a)?,
        "persist" => Cmd::Persist(&a[1]),
        "object" => parse_object(a)?,
        "memory" => parse_memory(a)?,
        "ttl" | "pttl" => Cmd::Ttl {
            key: &a[1],
            millis: name == "pttl",
        },
        "dbsize" => Cmd::DbSize,
        "type" => Cmd::Type(&a[1]),
        "keys" => Cmd::Keys(&a[1]),
        "scan" => Cmd::Scan(parse_scan(a, 1, true)?),
        "randomkey" => Cmd::RandomKey,
        "rename" | "renamenx" => Cmd::Rename {
            src: &a[1],
            dst: &a[2],
            nx: name == "renamenx",
        },
        "copy" => {
            let mut replace = false;
            let mut i = 3;
            while i < a.len() {
                if eq(&a[i], "replace") {
                    replace = true;
                } else if eq(&a[i], "db") && i + 1 < a.len() {
                    if int(&a[i + 1])? != 0 {
                        return Err(Reply::err("ERR DB index is out of range"));
                    }
                    i += 1;
                } else {
                    return Err(syntax());
                }
                i += 1;
            }
            Cmd::Copy {
                src: &a[1],
                dst: &a[2],
                replace,
            }
        }
        _ => return Err(syntax()),
    })
}

/// `EXPIRE key n [NX|XX|GT|LT]` and its three siblings.
fn parse_expire<'a>(name: &str, a: &'a [Vec<u8>]) -> Result<Cmd<'a>, Reply> {
    let name: &'static str = match name {
        "expire" => "expire",
        "pexpire" => "pexpire",
        "expireat" => "expireat",
        _ => "pexpireat",
    };
    let mut cond = ExpireIf::default();
    for o in &a[3..] {
        if eq(o, "nx") {
            cond.nx = true;
        } else if eq(o, "xx") {
            cond.xx = true;
        } else if eq(o, "gt") {
            cond.gt = true;
        } else if eq(o, "lt") {
            cond.lt = true;
        } else {
            return Err(Reply::err(format!(
                "ERR Unsupported option {}",
                String::from_utf8_lossy(o)
            )));
        }
    }
    if cond.nx && (cond.xx || cond.gt || cond.lt) {
        return Err(Reply::err(
            "ERR NX and XX, GT or LT options at the same time are not compatible",
        ));
    }
    if cond.gt && cond.lt {
        return Err(Reply::err(
            "ERR GT and LT options at the same time are not compatible",
        ));
    }
    let v = int(&a[2])?;
    let invalid = || Reply::err(format!("ERR invalid expire time in '{name}' command"));
    let ms = match name {
        "expire" | "expireat" => v.checked_mul(1000).ok_or_else(invalid)?,
        _ => v,
    };
    let when = match name {
        "expire" | "pexpire" => When::After(ms),
        _ => When::At(ms),
    };
    Ok(Cmd::Expire {
        key: &a[1],
        when,
        cond,
        name,
    })
}

/// `OBJECT ENCODING|FREQ|IDLETIME|REFCOUNT key`, `OBJECT HELP`.
fn parse_object(a: &[Vec<u8>]) -> Result<Cmd<'_>, Reply> {
    let sub = &a[1];
    let known = ["encoding", "freq", "idletime", "refcount"]
        .iter()
        .any(|s| eq(sub, s));
    if eq(sub, "help") && a.len() == 2 {
        return Ok(Cmd::Object(a));
    }
    if !known {
        return Err(super::args::unknown_subcommand(a));
    }
    if a.len() != 3 {
        return Err(super::args::arity_error(&format!(
            "object|{}",
            String::from_utf8_lossy(sub).to_lowercase()
        )));
    }
    Ok(Cmd::Object(a))
}

/// `MEMORY` and its subcommands' arities and options.
fn parse_memory(a: &[Vec<u8>]) -> Result<Cmd<'_>, Reply> {
    let sub = a[1].to_ascii_lowercase();
    match (sub.as_slice(), a.len()) {
        (b"usage", n) if n >= 3 => {
            match &a[3..] {
                [] => {}
                [o, v] if eq(o, "samples") => {
                    int(v)?;
                }
                _ => return Err(syntax()),
            }
            Ok(Cmd::Memory(a))
        }
        (b"doctor" | b"stats" | b"malloc-stats" | b"purge" | b"help", 2) => Ok(Cmd::Memory(a)),
        (b"usage" | b"doctor" | b"stats" | b"malloc-stats" | b"purge" | b"help", _) => Err(
            super::args::arity_error(&format!("memory|{}", String::from_utf8_lossy(&sub))),
        ),
        _ => Err(super::args::unknown_subcommand(a)),
    }
}

/// About the bytes a key and its value take in memory (`MEMORY USAGE`):
/// the bytes held, and per element the overhead of its node.
fn memory_usage(key: &[u8], v: &crate::value::Value) -> usize {
    use crate::value::Value;
    const NODE: usize = 16;
    let held = match v {
        Value::Str(s) => s.len(),
        Value::List(l) => l.iter().map(|x| x.len() + NODE).sum(),
        Value::Set(s) => s.iter().map(|x| x.len() + NODE).sum(),
        Value::Hash(h) => h.iter().map(|(f, x)| f.len() + x.len() + 2 * NODE).sum(),
        Value::ZSet(z) => z.scores.keys().map(|m| 2 * (m.len() + NODE) + 8).sum(),
        // The listpack nodes as Redis sizes them, and the groups' PELs.
        Value::Stream(s) => {
            let nodes: usize = s
                .nodes()
                .iter()
                .map(|n| n.lp_bytes as usize + 2 * NODE)
                .sum();
            let pels: usize = s
                .groups()
                .iter()
                .map(|(g, grp)| g.len() + NODE + grp.pel.len() * (NODE + 40))
                .sum();
            nodes + pels
        }
    };
    key.len() + 56 + held
}

/// Redis's name for the encoding it would hold `v` in, at its default
/// thresholds (xlane kv has one representation per type).
pub(super) fn encoding(v: &crate::value::Value) -> &'static str {
    use crate::value::Value;
    fn small(
        n: usize,
        mut items: impl Iterator<Item = usize>,
        entries: usize,
        value: usize,
    ) -> bool {
        n <= entries && items.all(|l| l <= value)
    }
    match v {
        Value::Str(s) => {
            let int = s.len() <= 20
                && crate::resp::parse_i64_strict(s)
                    .is_some_and(|i| i.to_string().as_bytes() == s.as_slice());
            if int {
                "int"
            } else if s.len() <= 44 {
                "embstr"
            } else {
                "raw"
            }
        }
        Value::List(l) => {
            if l.len() <= 128 && l.iter().map(Vec::len).sum::<usize>() < 8192 {
                "listpack"
            } else {
                "quicklist"
            }
        }
        Value::Hash(h) => {
            let sizes = h.iter().flat_map(|(k, v)| [k.len(), v.len()]);
            if small(h.len(), sizes, 512, 64) {
                "listpack"
            } else {
                "hashtable"
            }
        }
        Value::Set(s) => {
            let ints = s.iter().all(|m| {
                crate::resp::parse_i64_strict(m)
                    .is_some_and(|i| i.to_string().as_bytes() == m.as_slice())
            });
            if ints && s.len() <= 512 {
                "intset"
            } else {
                "hashtable"
            }
        }
        Value::ZSet(z) => {
            let sizes = z.scores.keys().map(Vec::len);
            if small(z.len(), sizes, 128, 64) {
                "listpack"
            } else {
                "skiplist"
            }
        }
        Value::Stream(_) => "stream",
    }
}

impl Cmd<'_> {
    /// The reply when running it would change nothing: an expiry of an
    /// absent key, or one its condition refuses; `PERSIST` of a key
    /// without one.
    pub(super) fn unchanged(&self, st: &Store, now: u64) -> Option<Reply> {
        match self {
            Cmd::Expire {
                key, when, cond, ..
            } => match st.cur_entry(key) {
                None => Some(Reply::Integer(0)),
                Some((_, ttl)) => {
                    let at = expire_at(*when, now).ok()?;
                    (!allowed(*cond, ttl, at)).then_some(Reply::Integer(0))
                }
            },
            Cmd::Persist(key) => match st.cur_entry(key) {
                Some((_, Some(_))) => None,
                _ => Some(Reply::Integer(0)),
            },
            _ => None,
        }
    }

    pub(super) fn apply(&self, st: &mut Store, now: u64) -> Reply {
        match self {
            Cmd::Expire {
                key,
                when,
                cond,
                name,
            } => {
                let Some((_, ttl)) = st.cur_entry(key) else {
                    return Reply::Integer(0);
                };
                let at = match expire_at(*when, now) {
                    Ok(at) => at,
                    Err(()) => {
                        return Reply::err(format!("ERR invalid expire time in '{name}' command"))
                    }
                };
                if !allowed(*cond, ttl, at) {
                    return Reply::Integer(0);
                }
                if at <= now as i64 {
                    st.delete_with_event(key);
                } else {
                    st.set_expire(key, Some(at as u64));
                    st.emit(NotifyFlags::GENERIC, "expire", key);
                }
                Reply::Integer(1)
            }
            Cmd::Persist(key) => match st.cur_entry(key) {
                Some((_, Some(_))) => {
                    st.set_expire(key, None);
                    st.emit(NotifyFlags::GENERIC, "persist", key);
                    Reply::Integer(1)
                }
                _ => Reply::Integer(0),
            },
            Cmd::Rename { src, dst, nx } => {
                let Some((v, ttl)) = st.cur_entry(src).map(|(v, t)| (v.clone(), t)) else {
                    return Reply::err("ERR no such key");
                };
                if src == dst {
                    return if *nx { Reply::Integer(0) } else { Reply::ok() };
                }
                if *nx && st.cur(dst).is_some() {
                    return Reply::Integer(0);
                }
                st.delete(src);
                st.notify(NotifyFlags::GENERIC, "rename_from", src);
                st.put_value(dst, v, ttl);
                st.notify(NotifyFlags::GENERIC, "rename_to", dst);
                if *nx {
                    Reply::Integer(1)
                } else {
                    Reply::ok()
                }
            }
            Cmd::Copy { src, dst, replace } => {
                if src == dst {
                    return Reply::err("ERR source and destination objects are the same");
                }
                let Some((v, ttl)) = st.cur_entry(src).map(|(v, t)| (v.clone(), t)) else {
                    return Reply::Integer(0);
                };
                if !replace && st.cur(dst).is_some() {
                    return Reply::Integer(0);
                }
                st.put_value(dst, v, ttl);
                st.notify(NotifyFlags::GENERIC, "copy_to", dst);
                Reply::Integer(1)
            }
            _ => self.read(st, now, &mut SplitMix::new(0)),
        }
    }

    pub(super) fn read(&self, st: &Store, now: u64, rng: &mut SplitMix) -> Reply {
        match self {
            Cmd::ExpireTime { key, millis } => match st.expiry(key, now) {
                None => Reply::Integer(-2),
                Some(None) => Reply::Integer(-1),
                Some(Some(at)) => Reply::Integer(if *millis { at } else { at / 1000 } as i64),
            },
            Cmd::Memory(a) => {
                let sub = a[1].to_ascii_lowercase();
                match sub.as_slice() {
                    b"usage" => st.value(&a[2], now).map_or(Reply::nil(), |v| {
                        Reply::Integer(memory_usage(&a[2], v) as i64)
                    }),
                    b"doctor" => Reply::bulk("xlane kv: no memory problem to report."),
                    b"malloc-stats" => Reply::bulk("Stats not supported for the current allocator"),
                    b"purge" => Reply::ok(),
                    b"stats" => {
                        let keys = st.len(now);
                        let bytes: usize = st
                            .keys(now)
                            .filter_map(|k| st.value(k, now).map(|v| memory_usage(k, v)))
                            .sum();
                        Reply::Map(vec![
                            (Reply::bulk("keys.count"), Reply::Integer(keys as i64)),
                            (Reply::bulk("dataset.bytes"), Reply::Integer(bytes as i64)),
                        ])
                    }
                    _ => Reply::Array(Some(
                        [
                            "MEMORY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                            "DOCTOR",
                            "MALLOC-STATS",
                            "PURGE",
                            "STATS",
                            "USAGE <key> [SAMPLES <count>]",
                            "HELP",
                        ]
                        .iter()
                        .map(|l| Reply::Simple((*l).into()))
                        .collect(),
                    )),
                }
            }
            Cmd::Object(a) => {
                let sub = &a[1];
                if eq(sub, "help") {
                    return Reply::Array(Some(
                        [
                            "OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                            "ENCODING <key>",
                            "    Return the kind of internal representation used in order to store the value",
                            "    associated with a <key>.",
                            "FREQ <key>",
                            "    Return the access frequency index of the <key>. The returned integer is",
                            "    proportional to the logarithm of the recent access frequency of the key.",
                            "IDLETIME <key>",
                            "    Return the idle time of the <key>, that is the approximated number of",
                            "    seconds elapsed since the last access to the key.",
                            "REFCOUNT <key>",
                            "    Return the number of references of the value associated with the specified",
                            "    <key>.",
                            "HELP",
                            "    Print this help.",
                        ]
                        .iter()
                        .map(|l| Reply::Simple((*l).into()))
                        .collect(),
                    ));
                }
                let Some(v) = st.value(&a[2], now) else {
                    return Reply::nil();
                };
                if eq(sub, "encoding") {
                    Reply::bulk(encoding(v))
                } else if eq(sub, "refcount") {
                    Reply::Integer(1)
                } else if eq(sub, "idletime") {
                    // Accesses are not tracked (reads change no state).
                    Reply::Integer(0)
                } else {
                    Reply::err(
                        "ERR An LFU maxmemory policy is not selected, access frequency not tracked. \
                         Please note that when switching between policies at runtime LRU and LFU data \
                         will take some time to adjust.",
                    )
                }
            }
            Cmd::Exists(ks) => {
                Reply::Integer(ks.iter().filter(|k| st.value(k, now).is_some()).count() as i64)
            }
            Cmd::Ttl { key, millis } => match st.expiry(key, now) {
                None => Reply::Integer(-2),
                Some(None) => Reply::Integer(-1),
                Some(Some(at)) => {
                    // Counted down with the reader's clock, never below 0.
                    let left = at.saturating_sub(now.max(st.clock_ms()));
                    let v = if *millis { left } else { (left + 500) / 1000 };
                    Reply::Integer(v as i64)
                }
            },
            Cmd::DbSize => Reply::Integer(st.len(now) as i64),
            Cmd::Type(k) => Reply::Simple(
                st.value(k, now)
                    .map_or("none", |v| v.type_name())
                    .to_string(),
            ),
            Cmd::Keys(p) => Reply::Array(Some(
                st.keys(now)
                    .filter(|k| glob_match(p, k, false))
                    .map(|k| Reply::bulk(k.to_vec()))
                    .collect(),
            )),
            Cmd::Scan(o) => {
                let (next, page) = scan_page(st.keys(now), o.cursor, o.count);
                let items = page
                    .into_iter()
                    .filter(|k| o.pattern.as_ref().map_or(true, |p| glob_match(p, k, false)))
                    .filter(|k| {
                        o.type_name.as_ref().map_or(true, |t| {
                            st.value(k, now)
                                .is_some_and(|v| v.type_name().as_bytes() == t.as_slice())
                        })
                    })
                    .map(|k| Reply::bulk(k.to_vec()))
                    .collect();
                scan_reply(next, items)
            }
            Cmd::RandomKey => {
                let n = st.len(now);
                if n == 0 {
                    return Reply::nil();
                }
                let i = rng.below(n);
                Reply::Bulk(st.keys(now).nth(i).map(<[u8]>::to_vec))
            }
            Cmd::Rename { .. } | Cmd::Copy { .. } | Cmd::Expire { .. } | Cmd::Persist(_) => {
                syntax()
            }
        }
    }
}

/// The absolute expiry `when` means at `now`, or an overflow.
fn expire_at(when: When, now: u64) -> Result<i64, ()> {
    match when {
        When::At(t) => Ok(t),
        When::After(ms) => ms.checked_add(now as i64).ok_or(()),
    }
}

/// Whether condition `cond` lets the expiry become `at` when it is `ttl`.
fn allowed(cond: ExpireIf, ttl: Option<u64>, at: i64) -> bool {
    let cur = ttl.map(|t| t as i64);
    !((cond.nx && cur.is_some())
        || (cond.xx && cur.is_none())
        || (cond.gt && cur.map_or(true, |t| at <= t))
        || (cond.lt && cur.is_some_and(|t| at >= t)))
}
