//! The commands on hashes, lists, sets and sorted sets, and the keyspace
//! commands that work on keys of any type, one module per type.
//!
//! Each module parses a command's words into its typed form (`parse`:
//! argument errors come out here, with Redis' texts, before anything is
//! replicated; the form borrows the words, so the leader's check copies
//! nothing and a replica copies a value once, into the store), then runs
//! it: reads against a store at the reader's clock,
//! writes inside [`Store::apply`] at the logical clock. A write travels as
//! [`crate::op::WriteCmd::Data`] — its words and a seed — and every
//! replica parses and runs it the same way.

mod hash;
mod keys;
mod list;
mod set;
mod zset;

use crate::commands::CommandSpec;
use crate::resp::{parse_i64_strict, Reply};
use crate::store::{Store, ERR_NOT_INTEGER};
use crate::value::{wrongtype, SplitMix, Value, ZSet};
use imbl::{OrdMap, OrdSet, Vector};

/// `ERR syntax error`.
const ERR_SYNTAX: &str = "ERR syntax error";

/// The specs of the commands of this module (`COMMAND` reports them with
/// [`crate::commands::COMMANDS`]).
pub fn specs() -> impl Iterator<Item = &'static CommandSpec> {
    hash::SPECS
        .iter()
        .chain(list::SPECS)
        .chain(set::SPECS)
        .chain(zset::SPECS)
        .chain(keys::SPECS)
}

/// A parsed command of one of the type modules.
enum Cmd<'a> {
    Hash(hash::Cmd<'a>),
    List(list::Cmd<'a>),
    Set(set::Cmd<'a>),
    ZSet(zset::Cmd<'a>),
    Keys(keys::Cmd<'a>),
}

/// The module a command belongs to.
#[derive(Clone, Copy)]
enum Module {
    Hash,
    List,
    Set,
    ZSet,
    Keys,
}

/// The spec and module of command `name` (any case): one hash lookup, as
/// every request of these types takes this path several times.
fn lookup(name: &[u8]) -> Option<(&'static CommandSpec, Module)> {
    type Table = fxhash::FxHashMap<(u128, u64), (&'static CommandSpec, Module)>;
    static TABLE: std::sync::OnceLock<Table> = std::sync::OnceLock::new();
    let table = TABLE.get_or_init(|| {
        let of = |specs: &'static [CommandSpec], m: Module| {
            specs
                .iter()
                .filter_map(move |s| Some((crate::commands::name_key(s.name.as_bytes())?, (s, m))))
        };
        of(hash::SPECS, Module::Hash)
            .chain(of(list::SPECS, Module::List))
            .chain(of(set::SPECS, Module::Set))
            .chain(of(zset::SPECS, Module::ZSet))
            .chain(of(keys::SPECS, Module::Keys))
            .collect()
    });
    table.get(&crate::commands::name_key(name)?).copied()
}

fn parse(args: &[Vec<u8>]) -> Result<(Cmd<'_>, bool), Reply> {
    let Some(first) = args.first() else {
        return Err(Reply::err("ERR empty command"));
    };
    let (spec, module) =
        lookup(first).ok_or_else(|| crate::commands::unknown_command(&args.to_vec()))?;
    parse_as(spec, module, args)
}

/// [`parse`] for the command `lookup` found.
fn parse_as<'a>(
    spec: &'static CommandSpec,
    module: Module,
    args: &'a [Vec<u8>],
) -> Result<(Cmd<'a>, bool), Reply> {
    let n = args.len() as i64;
    if (spec.arity > 0 && n != spec.arity) || (spec.arity < 0 && n < -spec.arity) {
        return Err(crate::commands::arity_error(spec.name));
    }
    let write = spec.flags.contains(&"write");
    let name = spec.name;
    let cmd = match module {
        Module::Hash => hash::parse(name, args).map(Cmd::Hash),
        Module::List => list::parse(name, args).map(Cmd::List),
        Module::Set => set::parse(name, args).map(Cmd::Set),
        Module::ZSet => zset::parse(name, args).map(Cmd::ZSet),
        Module::Keys => keys::parse(name, args).map(Cmd::Keys),
    };
    Ok((cmd?, write))
}

/// Checks a command's words: `Ok(true)` for a write, `Ok(false)` for a
/// read, or the error reply Redis gives before touching any key.
pub fn check(args: &[Vec<u8>]) -> Result<bool, Reply> {
    parse(args).map(|(_, w)| w)
}

/// Runs a write inside [`Store::apply`] (the store's logical clock is
/// `now`); a read command given here is answered at `now` too.
pub(crate) fn apply(st: &mut Store, args: &[Vec<u8>], seed: u64, now: u64) -> Reply {
    let mut rng = SplitMix::new(seed);
    match parse(args) {
        Err(r) => r,
        Ok((cmd, _)) => match cmd {
            Cmd::Hash(c) => c.apply(st, now),
            Cmd::List(c) => c.apply(st, now),
            Cmd::Set(c) => c.apply(st, now, &mut rng),
            Cmd::ZSet(c) => c.apply(st, now),
            Cmd::Keys(c) => c.apply(st, now),
        },
    }
}

/// The reply of write `args` when running it on `st` would change
/// nothing: a member already there (`SADD`, `ZADD` with the same score or
/// held back by NX/XX/GT/LT, `HSETNX`), nothing there to remove (`SREM`,
/// `ZREM`, `HDEL`, `LREM`) or a pop from an absent key. `None` when it
/// might change something, for a wrong type, or for a command not checked
/// here. The caller makes sure no key is due to expire at the store's
/// clock (every key is then alive as [`Store::apply`] would see it);
/// [`Store::unchanged_reply`] is the entry point.
pub(crate) fn unchanged_reply(st: &Store, args: &[Vec<u8>]) -> Option<Reply> {
    let (spec, module) = lookup(args.first()?)?;
    // The others cannot leave the store as it was: not worth a parse.
    let maybe = matches!(
        spec.name,
        "sadd"
            | "srem"
            | "spop"
            | "zadd"
            | "zrem"
            | "zpopmin"
            | "zpopmax"
            | "lpop"
            | "rpop"
            | "lrem"
            | "hdel"
            | "hsetnx"
    );
    if !maybe {
        return None;
    }
    match parse_as(spec, module, args).ok()? {
        (_, false) => None,
        (Cmd::Hash(c), true) => c.unchanged(st),
        (Cmd::List(c), true) => c.unchanged(st),
        (Cmd::Set(c), true) => c.unchanged(st),
        (Cmd::ZSet(c), true) => c.unchanged(st),
        (Cmd::Keys(_), true) => None,
    }
}

/// Answers a read at `now_ms`; `seed` drives random picks
/// (`SRANDMEMBER`, `RANDOMKEY`).
pub fn read(st: &Store, args: &[Vec<u8>], seed: u64, now_ms: u64) -> Reply {
    let mut rng = SplitMix::new(seed);
    match parse(args) {
        Err(r) => r,
        Ok((cmd, _)) => match cmd {
            Cmd::Hash(c) => c.read(st, now_ms),
            Cmd::List(c) => c.read(st, now_ms),
            Cmd::Set(c) => c.read(st, now_ms, &mut rng),
            Cmd::ZSet(c) => c.read(st, now_ms),
            Cmd::Keys(c) => c.read(st, now_ms, &mut rng),
        },
    }
}

/// The first key a command names (by its spec), for redirects.
pub fn first_key(args: &[Vec<u8>]) -> Option<&[u8]> {
    let (spec, _) = lookup(args.first()?)?;
    match spec.first_key {
        0 => None,
        i => args.get(i as usize).map(|k| k.as_slice()),
    }
}

fn int(b: &[u8]) -> Result<i64, Reply> {
    parse_i64_strict(b).ok_or_else(|| Reply::err(ERR_NOT_INTEGER))
}

fn eq(a: &[u8], b: &str) -> bool {
    a.eq_ignore_ascii_case(b.as_bytes())
}

fn syntax() -> Reply {
    Reply::err(ERR_SYNTAX)
}

fn bulks<'a>(items: impl IntoIterator<Item = &'a [u8]>) -> Reply {
    Reply::Array(Some(
        items.into_iter().map(|b| Reply::bulk(b.to_vec())).collect(),
    ))
}

fn empty() -> Reply {
    Reply::Array(Some(Vec::new()))
}

/// `count` of `LPOP key count` and friends: non-negative.
fn pos_count(b: &[u8]) -> Result<usize, Reply> {
    match parse_i64_strict(b) {
        Some(n) if n >= 0 => Ok(n as usize),
        _ => Err(Reply::err("ERR value is out of range, must be positive")),
    }
}

/// The options of the `SCAN` family after the cursor.
struct ScanOpts {
    cursor: u64,
    pattern: Option<Vec<u8>>,
    count: usize,
    type_name: Option<Vec<u8>>,
}

fn parse_scan(args: &[Vec<u8>], cursor_at: usize, allow_type: bool) -> Result<ScanOpts, Reply> {
    let cursor = std::str::from_utf8(&args[cursor_at])
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
        .ok_or_else(|| Reply::err("ERR invalid cursor"))?;
    let mut o = ScanOpts {
        cursor,
        pattern: None,
        count: 10,
        type_name: None,
    };
    let mut i = cursor_at + 1;
    while i < args.len() {
        let v = args.get(i + 1).ok_or_else(syntax)?;
        if eq(&args[i], "match") {
            o.pattern = Some(v.clone());
        } else if eq(&args[i], "count") {
            let c = int(v)?;
            if c < 1 {
                return Err(syntax());
            }
            o.count = c as usize;
        } else if allow_type && eq(&args[i], "type") {
            o.type_name = Some(v.to_ascii_lowercase());
        } else {
            return Err(syntax());
        }
        i += 2;
    }
    Ok(o)
}

fn scan_reply(next: u64, items: Vec<Reply>) -> Reply {
    Reply::Array(Some(vec![
        Reply::bulk(next.to_string()),
        Reply::Array(Some(items)),
    ]))
}

/// Normalises `start`/`stop` of `LRANGE`/`ZRANGE` against `len`: the
/// inclusive range of indexes, or `None` when empty.
fn index_range(start: i64, stop: i64, len: usize) -> Option<(usize, usize)> {
    let len = len as i64;
    let s = if start < 0 {
        (len + start).max(0)
    } else {
        start
    };
    let e = if stop < 0 {
        len + stop
    } else {
        stop.min(len - 1)
    };
    if s > e || s >= len || e < 0 {
        None
    } else {
        Some((s as usize, e as usize))
    }
}

#[cfg(test)]
mod tests;

/// A collection type a key can hold, as it sits in a [`Value`]: what
/// [`typed`] and [`typed_mut`] need to find it or make it.
trait Typed: Default {
    fn of(v: &Value) -> Option<&Self>;
    fn of_mut(v: &mut Value) -> Option<&mut Self>;
    fn wrap(self) -> Value;
}

macro_rules! typed {
    ($t:ty, $variant:ident) => {
        impl Typed for $t {
            fn of(v: &Value) -> Option<&Self> {
                match v {
                    Value::$variant(x) => Some(x),
                    _ => None,
                }
            }
            fn of_mut(v: &mut Value) -> Option<&mut Self> {
                match v {
                    Value::$variant(x) => Some(x),
                    _ => None,
                }
            }
            fn wrap(self) -> Value {
                Value::$variant(self)
            }
        }
    };
}

typed!(OrdMap<Vec<u8>, Vec<u8>>, Hash);
typed!(Vector<Vec<u8>>, List);
typed!(OrdSet<Vec<u8>>, Set);
typed!(ZSet, ZSet);

/// The `T` a key holds: `None` for no key, WRONGTYPE for another type.
fn typed<T: Typed>(v: Option<&Value>) -> Result<Option<&T>, Reply> {
    match v {
        None => Ok(None),
        Some(v) => T::of(v).map(Some).ok_or_else(wrongtype),
    }
}

/// The `T` at `key` to change, created empty first when absent and
/// `create`; `None` for no key, WRONGTYPE for another type.
fn typed_mut<'a, T: Typed>(
    st: &'a mut Store,
    key: &[u8],
    create: bool,
) -> Result<Option<&'a mut T>, Reply> {
    match st.cur(key) {
        None if create => st.put_value(key, T::default().wrap(), None),
        None => return Ok(None),
        Some(v) if T::of(v).is_none() => return Err(wrongtype()),
        Some(_) => {}
    }
    st.cur_mut(key)
        .and_then(T::of_mut)
        .map(Some)
        .ok_or_else(wrongtype)
}
