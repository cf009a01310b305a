//! The command layer: the table of every command ([`table`]) and the
//! commands that run against the store, one module per group.
//!
//! Each module parses a command's words into its typed form (`parse`:
//! argument errors come out here, with Redis' texts, before anything is
//! replicated; the form borrows the words, so the leader's check copies
//! nothing and a replica copies a value once, into the store), then runs
//! it: reads against a store at the reader's clock, writes against the
//! store at the logical clock of the op being applied. A write travels as
//! [`crate::op::WriteCmd::Data`] — its words and a seed — and every
//! member parses and runs it the same way ([`apply`]).
//!
//! This layer knows the store and the values, never the ops, the
//! connections or the network.

pub mod args;
mod bits;
mod dump;
mod geo;
mod hash;
mod hll;
mod keys;
mod list;
mod run;
mod set;
mod sort;
mod stream;
mod string;
pub mod table;
mod typed;
mod zset;

use crate::resp::parse_i64_strict;
use crate::resp::Reply;
use crate::store::Store;
use crate::value::{SplitMix, Value};
use args::{arity_error, eq, timeout_ms, unknown_command};
use run::Run;
use table::CommandSpec;

/// The modules: each has `NAMES` (the commands it runs), `parse(name,
/// words) -> Result<Cmd, Reply>` and a `Cmd` implementing [`Run`]. One
/// line per module here; every dispatch below is generated from it.
macro_rules! modules {
    ($($variant:ident => $module:ident),* $(,)?) => {
        /// A parsed command of one of the modules.
        enum Cmd<'a> {
            $($variant($module::Cmd<'a>),)*
        }

        /// The module a command belongs to.
        #[derive(Clone, Copy)]
        enum Module {
            $($variant,)*
        }

        /// Every module's names.
        const MODULES: &[(&[&str], Module)] = &[$(($module::NAMES, Module::$variant),)*];

        fn parse_in<'a>(m: Module, name: &str, args: &'a [Vec<u8>]) -> Result<Cmd<'a>, Reply> {
            match m {
                $(Module::$variant => $module::parse(name, args).map(Cmd::$variant),)*
            }
        }

        impl Cmd<'_> {
            fn run(&self) -> &dyn Run {
                match self {
                    $(Cmd::$variant(c) => c,)*
                }
            }
        }
    };
}

impl Run for hash::Cmd<'_> {
    fn apply(&self, st: &mut Store, now: u64, rng: &mut SplitMix) -> Reply {
        hash::Cmd::apply(self, st, now, rng)
    }
    fn read(&self, st: &Store, now: u64, rng: &mut SplitMix) -> Reply {
        hash::Cmd::read(self, st, now, rng)
    }
    fn unchanged(&self, st: &Store) -> Option<Reply> {
        hash::Cmd::unchanged(self, st)
    }
}

impl Run for list::Cmd<'_> {
    fn apply(&self, st: &mut Store, now: u64, _rng: &mut SplitMix) -> Reply {
        list::Cmd::apply(self, st, now)
    }
    fn read(&self, st: &Store, now: u64, _rng: &mut SplitMix) -> Reply {
        list::Cmd::read(self, st, now)
    }
    fn unchanged(&self, st: &Store) -> Option<Reply> {
        list::Cmd::unchanged(self, st)
    }
}

impl Run for set::Cmd<'_> {
    fn apply(&self, st: &mut Store, now: u64, rng: &mut SplitMix) -> Reply {
        set::Cmd::apply(self, st, now, rng)
    }
    fn read(&self, st: &Store, now: u64, rng: &mut SplitMix) -> Reply {
        set::Cmd::read(self, st, now, rng)
    }
    fn unchanged(&self, st: &Store) -> Option<Reply> {
        set::Cmd::unchanged(self, st)
    }
}

impl Run for zset::Cmd<'_> {
    fn apply(&self, st: &mut Store, now: u64, rng: &mut SplitMix) -> Reply {
        zset::Cmd::apply(self, st, now, rng)
    }
    fn read(&self, st: &Store, now: u64, rng: &mut SplitMix) -> Reply {
        zset::Cmd::read(self, st, now, rng)
    }
    fn unchanged(&self, st: &Store) -> Option<Reply> {
        zset::Cmd::unchanged(self, st)
    }
}

impl Run for keys::Cmd<'_> {
    fn apply(&self, st: &mut Store, now: u64, _rng: &mut SplitMix) -> Reply {
        keys::Cmd::apply(self, st, now)
    }
    fn read(&self, st: &Store, now: u64, rng: &mut SplitMix) -> Reply {
        keys::Cmd::read(self, st, now, rng)
    }
    fn unchanged(&self, st: &Store) -> Option<Reply> {
        keys::Cmd::unchanged(self, st, st.clock_ms())
    }
}

impl Run for string::Cmd<'_> {
    fn apply(&self, st: &mut Store, now: u64, _rng: &mut SplitMix) -> Reply {
        string::Cmd::apply(self, st, now)
    }
    fn read(&self, st: &Store, now: u64, _rng: &mut SplitMix) -> Reply {
        string::Cmd::read(self, st, now)
    }
    fn unchanged(&self, st: &Store) -> Option<Reply> {
        string::Cmd::unchanged(self, st)
    }
}

impl Run for hll::Cmd<'_> {
    fn apply(&self, st: &mut Store, now: u64, _rng: &mut SplitMix) -> Reply {
        hll::Cmd::apply(self, st, now)
    }
    fn read(&self, st: &Store, now: u64, _rng: &mut SplitMix) -> Reply {
        hll::Cmd::read(self, st, now)
    }
    fn unchanged(&self, st: &Store) -> Option<Reply> {
        hll::Cmd::unchanged(self, st)
    }
    fn writes(&self) -> bool {
        hll::Cmd::writes(self)
    }
}

modules! {
    Hash => hash,
    List => list,
    Set => set,
    ZSet => zset,
    Keys => keys,
    String => string,
    Hll => hll,
    Bits => bits,
    Geo => geo,
    Stream => stream,
    Dump => dump,
    Sort => sort,
}

/// The spec and module of command `name` (any case): one hash lookup, as
/// every request of this layer takes this path several times.
fn lookup(name: &[u8]) -> Option<(&'static CommandSpec, Module)> {
    type Index = fxhash::FxHashMap<(u128, u64), (&'static CommandSpec, Module)>;
    static INDEX: std::sync::OnceLock<Index> = std::sync::OnceLock::new();
    let index = INDEX.get_or_init(|| {
        MODULES
            .iter()
            .flat_map(|(names, m)| {
                names.iter().filter_map(move |n| {
                    let spec = table::spec(n.as_bytes())?;
                    Some((table::name_key(n.as_bytes())?, (spec, *m)))
                })
            })
            .collect()
    });
    index.get(&table::name_key(name)?).copied()
}

/// Whether this layer runs command `name` (any case).
pub fn runs(name: &[u8]) -> bool {
    lookup(name).is_some()
}

fn parse(args: &[Vec<u8>]) -> Result<(Cmd<'_>, bool), Reply> {
    let known = Known::of_words(args)?;
    parse_as(known.spec, known.module, args)
}

/// [`parse`] for the command `lookup` found.
fn parse_as<'a>(
    spec: &'static CommandSpec,
    module: Module,
    args: &'a [Vec<u8>],
) -> Result<(Cmd<'a>, bool), Reply> {
    if !spec.arity_ok(args.len()) {
        return Err(arity_error(spec.name));
    }
    let cmd = parse_in(module, spec.name, args)?;
    let run = cmd.run();
    let write = (spec.has("write") && !run.reads_only()) || run.writes();
    Ok((cmd, write))
}

/// A command this layer runs, as its table lookup found it: carried from
/// [`check`] to [`read`] so that a request is looked up once.
#[derive(Clone, Copy)]
pub struct Known {
    spec: &'static CommandSpec,
    module: Module,
}

impl std::fmt::Debug for Known {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Known({})", self.spec.name)
    }
}

/// The same command (its module follows from its table entry).
impl PartialEq for Known {
    fn eq(&self, other: &Known) -> bool {
        std::ptr::eq(self.spec, other.spec)
    }
}

impl Eq for Known {}

impl Known {
    /// The command named `name` (any case), if this layer runs it.
    pub fn of(name: &[u8]) -> Option<Known> {
        let (spec, module) = lookup(name)?;
        Some(Known { spec, module })
    }

    /// The command `args` names, or Redis's error for an empty request or
    /// a command this layer does not run.
    fn of_words(args: &[Vec<u8>]) -> Result<Known, Reply> {
        let first = args
            .first()
            .ok_or_else(|| Reply::err("ERR empty command"))?;
        Known::of(first).ok_or_else(|| unknown_command(args))
    }
}

/// Checks the words of a command this layer runs: `Ok(true)` for a write,
/// `Ok(false)` for a read, or the error reply Redis gives before touching
/// any key; `None` for a command it does not run ([`runs`] false). One
/// table lookup for both questions, and the command as found.
///
/// A command the table calls a read and that never writes is not parsed
/// here: [`read`] parses it where it runs and answers the same error
/// there, so a read's words are parsed once.
pub fn check(args: &[Vec<u8>]) -> Option<Result<(bool, Known), Reply>> {
    let known = Known::of(args.first()?)?;
    // PFCOUNT and a blocking XREAD write although flagged `readonly`; a
    // container's flags are its subcommands'.
    let read = known.spec.has("readonly")
        && known.spec.subcommands.is_empty()
        && !matches!(known.module, Module::Hll | Module::Stream);
    if read {
        return Some(match known.spec.arity_ok(args.len()) {
            true => Ok((false, known)),
            false => Err(arity_error(known.spec.name)),
        });
    }
    Some(parse_as(known.spec, known.module, args).map(|(_, w)| (w, known)))
}

/// Runs a write inside [`crate::exec::Apply::apply`] (the store's logical clock is
/// `now`); a read command given here is answered at `now` too.
pub fn apply(st: &mut Store, args: &[Vec<u8>], seed: u64, now: u64) -> Reply {
    let mut rng = SplitMix::new(seed);
    match parse(args) {
        Err(r) => r,
        Ok((cmd, _)) => cmd.run().apply(st, now, &mut rng),
    }
}

/// The reply of write `args` when running it on `st` would change
/// nothing: a member already there (`SADD`, `ZADD` with the same score or
/// held back by NX/XX/GT/LT, `HSETNX`), nothing there to remove (`SREM`,
/// `ZREM`, `HDEL`, `LREM`) or a pop from an absent key. `None` when it
/// might change something, for a wrong type, or for a command not checked
/// here. The caller makes sure no key is due to expire at the store's
/// clock (every key is then alive as [`crate::exec::Apply::apply`] would see it);
/// `Store::unchanged_reply` is the entry point.
pub fn unchanged_reply(st: &Store, args: &[Vec<u8>]) -> Option<Reply> {
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
            | "pfadd"
            | "pfcount"
            | "getex"
            | "setnx"
            | "msetnx"
            | "getdel"
            | "setrange"
            | "setbit"
            | "bitfield"
            | "bitop"
            | "expire"
            | "pexpire"
            | "expireat"
            | "pexpireat"
            | "persist"
            | "lmpop"
            | "zmpop"
            | "lmove"
            | "rpoplpush"
            | "blpop"
            | "brpop"
            | "blmove"
            | "brpoplpush"
            | "blmpop"
            | "bzpopmin"
            | "bzpopmax"
            | "bzmpop"
            | "zremrangebyrank"
            | "zremrangebyscore"
            | "zremrangebylex"
            | "sort"
            | "geoadd"
            | "georadius"
            | "georadiusbymember"
            | "geosearchstore"
            | "xread"
            | "xreadgroup"
            | "xack"
            | "xdel"
            | "xtrim"
            | "xadd"
            | "xgroup"
    );
    if !maybe {
        return None;
    }
    match parse_as(spec, module, args).ok()? {
        (_, false) => None,
        (cmd, true) => cmd.run().unchanged(st),
    }
}

/// Answers a read of command `known` at `now_ms`; `seed` drives random
/// picks (`SRANDMEMBER`, `RANDOMKEY`).
pub fn read(st: &Store, known: Known, args: &[Vec<u8>], seed: u64, now_ms: u64) -> Reply {
    let mut rng = SplitMix::new(seed);
    match parse_as(known.spec, known.module, args) {
        Err(r) => r,
        Ok((cmd, _)) => cmd.run().read(st, now_ms, &mut rng),
    }
}

/// What a blocking command waits for: its keys, its timeout (`None`:
/// forever) and its reply when it has nothing to take.
pub struct BlockInfo {
    /// The keys it takes from.
    pub keys: Vec<Vec<u8>>,
    /// How long it waits; `None` for a timeout of 0 (forever).
    pub timeout: Option<std::time::Duration>,
    /// Its reply with nothing to take (and on timeout).
    pub nothing: Reply,
}

/// The [`BlockInfo`] of a blocking pop (`BLPOP`, `BRPOP`, `BLMOVE`,
/// `BRPOPLPUSH`, `BLMPOP`, `BZPOPMIN`, `BZPOPMAX`, `BZMPOP`) or of an
/// `XREAD`/`XREADGROUP` with `BLOCK ms` (milliseconds, 0: forever; an
/// `XREADGROUP` reading only history never blocks) whose words parse;
/// `None` for any other command.
pub fn block_info(args: &[Vec<u8>]) -> Option<BlockInfo> {
    let spec = table::spec(args.first()?)?;
    if !spec.has("blocking") || parse(args).is_err() {
        return None;
    }
    if let "xread" | "xreadgroup" = spec.name {
        let (keys, ms) = stream::blocking(args)?;
        return Some(BlockInfo {
            keys,
            timeout: (ms > 0).then(|| std::time::Duration::from_millis(ms)),
            nothing: Reply::Array(None),
        });
    }
    let n = args.len();
    let (keys, at, nothing): (Vec<usize>, usize, Reply) = match spec.name {
        "blpop" | "brpop" | "bzpopmin" | "bzpopmax" => {
            ((1..n - 1).collect(), n - 1, Reply::Array(None))
        }
        "brpoplpush" | "blmove" => (vec![1], n - 1, Reply::Bulk(None)),
        "blmpop" | "bzmpop" => (keys_of(args)?, 1, Reply::Array(None)),
        _ => return None,
    };
    let ms = timeout_ms(args.get(at)?).ok()?;
    let timeout = (ms > 0).then(|| std::time::Duration::from_millis(ms));
    Some(BlockInfo {
        keys: keys.into_iter().map(|i| args[i].clone()).collect(),
        timeout,
        nothing,
    })
}

/// Fixes a blocking command's words as it blocks, so that running them
/// again later to serve the waiting client means what they meant now:
/// each `$` of an `XREAD ... BLOCK` becomes the stream's current last ID
/// (`0-0` for a missing key). The client loop calls it on the leader,
/// with the applied state, before the command first runs or waits.
pub fn pin_block_ids(st: &Store, args: &mut [Vec<u8>]) {
    stream::pin_ids(st, args);
}

/// Whether blocking command `args`, waiting, may now be served: one of
/// its keys holds a value of the type it takes from, with something in it
/// (Redis wakes a blocked client only for a key of its type: a key
/// deleted and set to a string in between leaves it blocked). For a
/// command that is not a blocking pop: whether running it would change
/// something.
pub fn block_ready(st: &Store, args: &[Vec<u8>]) -> bool {
    let Some(info) = block_info(args) else {
        return unchanged_reply(st, args).is_none();
    };
    let name = table::spec(&args[0]).map_or("", |s| s.name);
    let ready = |v: &Value| match v {
        Value::List(l) => (name.starts_with("bl") || name.starts_with("br")) && !l.is_empty(),
        Value::ZSet(z) => name.starts_with("bz") && !z.is_empty(),
        _ => false,
    };
    if name.starts_with('x') {
        return unchanged_reply(st, args).is_none();
    }
    info.keys.iter().any(|k| st.cur(k).is_some_and(ready))
}

/// Redis's name for the encoding it would hold `v` in (`OBJECT ENCODING`,
/// `DEBUG OBJECT`): xlane kv has one representation per type, and names
/// the one Redis would pick at its default thresholds.
pub fn encoding_name(v: &Value) -> &'static str {
    keys::encoding(v)
}

/// Answers a command queued in a transaction that writes nothing, at its
/// place in `EXEC` (the logical clock `now`): a read of this layer, or
/// `TIME`.
pub fn query(st: &Store, args: &[Vec<u8>], seed: u64, now: u64) -> Reply {
    if args
        .first()
        .is_some_and(|n| n.eq_ignore_ascii_case(b"time"))
    {
        return time_reply(now);
    }
    match Known::of_words(args) {
        Ok(known) => read(st, known, args, seed, now),
        Err(r) => r,
    }
}

/// `TIME` at `now_ms`: seconds and microseconds.
pub fn time_reply(now_ms: u64) -> Reply {
    Reply::Array(Some(vec![
        Reply::bulk((now_ms / 1000).to_string()),
        Reply::bulk(((now_ms % 1000) * 1000).to_string()),
    ]))
}

/// The positions of the keys command `args` names (routing, ACL key
/// patterns, `COMMAND GETKEYS`): by the table's (first, last, step), and
/// for commands whose keys move (a `numkeys` count, `STREAMS`, `STORE`),
/// by their own rule. `None` for a command the table does not know.
pub fn keys_of(args: &[Vec<u8>]) -> Option<Vec<usize>> {
    let spec = table::spec(args.first()?)?;
    let n = args.len();
    let count = |at: usize| -> usize {
        args.get(at)
            .and_then(|v| parse_i64_strict(v))
            .and_then(|c| usize::try_from(c).ok())
            .unwrap_or(0)
    };
    // `numkeys` at `at`, the keys right after it.
    let counted = |at: usize| -> Vec<usize> { (at + 1..(at + 1 + count(at)).min(n)).collect() };
    let word = |w: &str| args.iter().position(|a| eq(a, w));
    let keys = match spec.name {
        "zunionstore" | "zinterstore" | "zdiffstore" => {
            let mut v = vec![1];
            v.extend(counted(2));
            v
        }
        "zunion" | "zinter" | "zdiff" | "zintercard" | "sintercard" | "lmpop" | "zmpop" => {
            counted(1)
        }
        "blmpop" | "bzmpop" | "eval" | "evalsha" | "eval_ro" | "evalsha_ro" | "fcall"
        | "fcall_ro" => counted(2),
        "sort" | "sort_ro" => {
            let mut v = vec![1];
            if let Some(i) = (2..n).rev().find(|&i| eq(&args[i - 1], "store")) {
                v.push(i);
            }
            v
        }
        "georadius" | "georadiusbymember" => {
            let mut v = vec![1];
            for (i, w) in args.iter().enumerate().take(n.saturating_sub(1)).skip(2) {
                if eq(w, "store") || eq(w, "storedist") {
                    v.push(i + 1);
                }
            }
            v
        }
        "xread" | "xreadgroup" => {
            // The options before STREAMS, as Redis reads them (a group or
            // consumer named "streams" is not the keyword).
            let mut i = 1;
            let mut at = None;
            while i < n {
                if eq(&args[i], "streams") {
                    at = Some(i);
                    break;
                }
                i += if eq(&args[i], "group") {
                    3
                } else if eq(&args[i], "noack") {
                    1
                } else {
                    2
                };
            }
            match at {
                Some(s) => {
                    let rest = n - s - 1;
                    (s + 1..s + 1 + rest / 2).collect()
                }
                None => Vec::new(),
            }
        }
        "migrate" => match word("keys") {
            Some(s) => (s + 1..n).collect(),
            None if n > 3 && !args[3].is_empty() => vec![3],
            None => Vec::new(),
        },
        "xgroup" | "xinfo" | "object" | "memory" => match args.get(1) {
            Some(_) if n > 2 => vec![2],
            _ => Vec::new(),
        },
        _ => {
            let (first, last, step) = spec.keys;
            if first <= 0 {
                return Some(Vec::new());
            }
            let last = if last < 0 { n as i64 + last } else { last };
            (first as usize..=last.max(0) as usize)
                .step_by(step.max(1) as usize)
                .filter(|&i| i < n)
                .collect()
        }
    };
    Some(keys)
}

/// The first key a command names (by its spec), for redirects.
pub fn first_key(args: &[Vec<u8>]) -> Option<&[u8]> {
    let (spec, _) = lookup(args.first()?)?;
    match spec.first_key() {
        0 => None,
        i => args.get(i as usize).map(|k| k.as_slice()),
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod stream_tests;
