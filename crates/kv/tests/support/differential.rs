//! The differential test's pieces: a seeded generator of command streams
//! over every data type, a connection that pipelines a stream in batches,
//! and the normalisation of replies whose order Redis leaves unspecified
//! (members of a hash or set, keys of `KEYS`/`SCAN`).
//!
//! Expiries without timing flakiness: the two servers run each batch at
//! different instants, so no command may run near a key's expiry. The
//! rule: an expiry is either
//! - far in the future (`EX 1000`, `PX 2000000`, `EXPIRE k 1000`,
//!   `PEXPIRE k 1000000`, `PEXPIREAT` in 2100): the
//!   key outlives the run; `TTL`/`PTTL` replies of at least 0 agree when
//!   within [`TTL_SLACK_MS`] (the servers set and read them at different
//!   instants), -1 and -2 exactly;
//! - in the past (`EXPIRE k 0`, `PEXPIRE k -5`, `PEXPIREAT k 1`): the key
//!   goes at once, on both alike;
//! - short (`PX`/`PEXPIRE` 1..1000 ms, `EXPIRE k 1`): drawn only outside
//!   transactions, always as the last command of a batch, followed by
//!   [`WAIT`]: the harness runs the batch on both servers, then waits the
//!   expiry plus [`WAIT_MARGIN_MS`] (a cluster leader's expiry cycle and
//!   commit) after the later one, so the key is gone on both before any
//!   command touches it again. The next batch starts with `EXISTS` of the
//!   key: Redis reclaims an expired key at once when it is read, but by
//!   its active cycle only when that reaches it, and `DBSIZE` counts it
//!   until then.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;
use xlane_kv::resp::{decode_reply, encode_command, Reply};
use xlane_kv::value::SplitMix;

/// The store's own seeded generator (SplitMix64), with the picks the
/// stream needs: a failing seed replays the same stream.
pub struct Rng(SplitMix);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(SplitMix::new(seed))
    }
    pub fn below(&mut self, n: usize) -> usize {
        self.0.below(n)
    }
    pub fn pick<'a>(&mut self, xs: &[&'a str]) -> &'a str {
        xs[self.below(xs.len())]
    }
}

/// A key, mostly of the type the command expects (prefix), sometimes of
/// another (WRONGTYPE).
fn key(r: &mut Rng, prefix: &str) -> String {
    let p = if r.below(12) == 0 {
        r.pick(&["s", "h", "l", "t", "z"])
    } else {
        prefix
    };
    format!("{p}{}", r.below(3))
}

/// The pseudo-command `[WAIT, ms]`: ends a batch, then waits `ms` plus
/// [`WAIT_MARGIN_MS`] (see the module docs). Not sent to a server.
pub const WAIT: &str = "__WAIT";

/// What a short expiry's wait adds.
pub const WAIT_MARGIN_MS: u64 = 200;

/// How far two `PTTL` replies (or `TTL` × 1000) may be apart.
pub const TTL_SLACK_MS: i64 = 120_000;

/// A short expiry (within 1 s), the wait after it, and a read of the key.
fn short_ttl(r: &mut Rng) -> [Vec<String>; 3] {
    let ms = 1 + r.below(1000);
    let c = match r.below(3) {
        0 => vec![
            "SET".into(),
            key(r, "s"),
            int_arg(r),
            "PX".into(),
            ms.to_string(),
        ],
        1 => vec!["PEXPIRE".into(), any_key(r), ms.to_string()],
        _ => vec!["EXPIRE".into(), any_key(r), "1".into()],
    };
    let wait = if c[0] == "EXPIRE" { 1000 } else { ms };
    // After the wait, a read of the key: Redis reclaims an expired key on
    // access at once, but by its active cycle only when that gets to it
    // (late on a loaded machine), and `DBSIZE` counts it until then.
    let touch = vec!["EXISTS".into(), c[1].clone()];
    [c, vec![WAIT.into(), wait.to_string()], touch]
}

fn any_key(r: &mut Rng) -> String {
    let p = r.pick(&["s", "h", "l", "t", "z"]);
    key(r, p)
}

fn member(r: &mut Rng) -> String {
    r.pick(&["a", "b", "c", "d", "e", "1", "10", "2"])
        .to_string()
}

fn int_arg(r: &mut Rng) -> String {
    r.pick(&["0", "1", "2", "-1", "-2", "3", "-3", "5", "10", "-100", "x"])
        .to_string()
}

fn score(r: &mut Rng) -> String {
    r.pick(&["1", "2", "2.5", "-1", "0.5", "0", "inf", "-inf", "3", "x"])
        .to_string()
}

fn score_bound(r: &mut Rng) -> String {
    r.pick(&["-inf", "+inf", "0", "1", "(1", "2", "(2.5", "3", "x"])
        .to_string()
}

/// A key for a lex range (`ZRANGEBYLEX`, `ZLEXCOUNT`, ...): a sorted set
/// whose members all score 0 (`y0`..`y2`, filled by [`lex_zadd`]), now and
/// then a string for WRONGTYPE. Redis answers a lex range over mixed scores
/// by walking its skiplist, whose levels are random (and `SORT` turns any
/// sorted set into one), so only equal scores have one right answer.
fn lex_key(r: &mut Rng) -> String {
    if r.below(12) == 0 {
        "s0".into()
    } else {
        format!("y{}", r.below(3))
    }
}

/// `ZADD yN 0 m ...`: the sets of [`lex_key`].
fn lex_zadd(r: &mut Rng) -> Vec<String> {
    let mut v = vec!["ZADD".into(), format!("y{}", r.below(3))];
    for _ in 0..1 + r.below(3) {
        v.extend(["0".into(), member(r)]);
    }
    v
}

fn lex_bound(r: &mut Rng) -> String {
    r.pick(&["-", "+", "[a", "(b", "[c", "(e", "x"]).to_string()
}

/// One random command over strings, hashes, lists, sets, sorted sets and
/// the keyspace. Only commands whose reply is fully determined by the
/// stream (after [`normalize`]) are drawn: `SPOP`/`SRANDMEMBER` take a
/// count that reaches the whole set.
pub fn command(r: &mut Rng) -> Vec<String> {
    // The groups' own generators ([`GROUPS`]) take 6 draws in 96 each.
    let c = r.below(66 + 6 * GROUPS.len());
    if let Some(g) = c.checked_sub(66).and_then(|i| GROUPS.get(i / 6)) {
        return g(r);
    }
    let mut v: Vec<String> = match c {
        0 => vec!["SET".into(), key(r, "s"), int_arg(r)],
        1 => vec!["GET".into(), key(r, "s")],
        2 => vec!["INCR".into(), key(r, "s")],
        3 => vec!["APPEND".into(), key(r, "s"), member(r)],
        4 => vec!["STRLEN".into(), key(r, "s")],
        5 | 6 => {
            let mut v = vec!["HSET".into(), key(r, "h")];
            for _ in 0..=r.below(3) {
                v.push(member(r));
                v.push(int_arg(r));
            }
            v
        }
        7 => vec!["HGET".into(), key(r, "h"), member(r)],
        8 => vec!["HMGET".into(), key(r, "h"), member(r), member(r)],
        9 => vec!["HGETALL".into(), key(r, "h")],
        10 => vec!["HDEL".into(), key(r, "h"), member(r), member(r)],
        11 => vec!["HEXISTS".into(), key(r, "h"), member(r)],
        12 => vec!["HINCRBY".into(), key(r, "h"), member(r), int_arg(r)],
        13 => vec![
            "HINCRBYFLOAT".into(),
            key(r, "h"),
            member(r),
            r.pick(&["0.5", "1.25", "-2", "3", "x"]).into(),
        ],
        14 => vec![r.pick(&["HKEYS", "HVALS", "HLEN"]).into(), key(r, "h")],
        15 => vec!["HSETNX".into(), key(r, "h"), member(r), member(r)],
        16 => vec![
            "HSCAN".into(),
            key(r, "h"),
            "0".into(),
            "COUNT".into(),
            "1000".into(),
        ],
        17 | 18 => {
            let mut v = vec![
                r.pick(&["LPUSH", "RPUSH", "LPUSHX", "RPUSHX"]).into(),
                key(r, "l"),
            ];
            for _ in 0..=r.below(3) {
                v.push(member(r));
            }
            v
        }
        19 => {
            let mut v = vec![r.pick(&["LPOP", "RPOP"]).into(), key(r, "l")];
            if r.below(2) == 0 {
                v.push(r.pick(&["0", "1", "2", "5", "-1"]).into());
            }
            v
        }
        20 => vec!["LRANGE".into(), key(r, "l"), int_arg(r), int_arg(r)],
        21 => vec!["LLEN".into(), key(r, "l")],
        22 => vec!["LINDEX".into(), key(r, "l"), int_arg(r)],
        23 => vec!["LSET".into(), key(r, "l"), int_arg(r), member(r)],
        24 => vec!["LREM".into(), key(r, "l"), int_arg(r), member(r)],
        25 => vec!["LTRIM".into(), key(r, "l"), int_arg(r), int_arg(r)],
        26 => vec![
            "LINSERT".into(),
            key(r, "l"),
            r.pick(&["BEFORE", "AFTER", "x"]).into(),
            member(r),
            member(r),
        ],
        27 => {
            let mut v = vec!["LPOS".into(), key(r, "l"), member(r)];
            for _ in 0..r.below(3) {
                v.push(r.pick(&["RANK", "COUNT", "MAXLEN"]).into());
                v.push(int_arg(r));
            }
            v
        }
        28 => vec![
            "LMOVE".into(),
            key(r, "l"),
            key(r, "l"),
            r.pick(&["LEFT", "RIGHT"]).into(),
            r.pick(&["LEFT", "RIGHT"]).into(),
        ],
        29 | 30 => {
            let mut v = vec!["SADD".into(), key(r, "t")];
            for _ in 0..=r.below(3) {
                v.push(member(r));
            }
            v
        }
        31 => vec!["SREM".into(), key(r, "t"), member(r), member(r)],
        32 => vec!["SMEMBERS".into(), key(r, "t")],
        33 => vec!["SISMEMBER".into(), key(r, "t"), member(r)],
        34 => vec!["SMISMEMBER".into(), key(r, "t"), member(r), member(r)],
        35 => vec!["SCARD".into(), key(r, "t")],
        36 => vec![
            r.pick(&["SPOP", "SRANDMEMBER"]).into(),
            key(r, "t"),
            "100".into(),
        ],
        37 => vec![
            r.pick(&["SINTER", "SUNION", "SDIFF"]).into(),
            key(r, "t"),
            key(r, "t"),
        ],
        38 => vec![
            r.pick(&["SINTERSTORE", "SUNIONSTORE", "SDIFFSTORE"]).into(),
            key(r, "t"),
            key(r, "t"),
            key(r, "t"),
        ],
        39 => vec!["SMOVE".into(), key(r, "t"), key(r, "t"), member(r)],
        40 => vec![
            "SSCAN".into(),
            key(r, "t"),
            "0".into(),
            "COUNT".into(),
            "1000".into(),
        ],
        41..=43 => {
            let mut v = vec!["ZADD".into(), key(r, "z")];
            for _ in 0..r.below(3) {
                v.push(r.pick(&["NX", "XX", "GT", "LT", "CH", "INCR"]).into());
            }
            for _ in 0..=r.below(2) {
                v.push(score(r));
                v.push(member(r));
            }
            v
        }
        44 => vec!["ZREM".into(), key(r, "z"), member(r), member(r)],
        45 => vec!["ZSCORE".into(), key(r, "z"), member(r)],
        46 => vec!["ZINCRBY".into(), key(r, "z"), score(r), member(r)],
        47 => vec!["ZCARD".into(), key(r, "z")],
        48 => vec!["ZCOUNT".into(), key(r, "z"), score_bound(r), score_bound(r)],
        49 | 50 => {
            let by = r.below(3);
            let k = if by == 2 { lex_key(r) } else { key(r, "z") };
            let mut v = vec!["ZRANGE".into(), k];
            match by {
                0 => v.extend([int_arg(r), int_arg(r)]),
                1 => v.extend([score_bound(r), score_bound(r), "BYSCORE".into()]),
                _ => v.extend([lex_bound(r), lex_bound(r), "BYLEX".into()]),
            }
            if r.below(2) == 0 {
                v.push("REV".into());
            }
            if r.below(3) == 0 {
                v.extend(["LIMIT".into(), int_arg(r), int_arg(r)]);
            }
            if r.below(2) == 0 {
                v.push("WITHSCORES".into());
            }
            v
        }
        51 => vec![
            r.pick(&["ZRANK", "ZREVRANK"]).into(),
            key(r, "z"),
            member(r),
        ],
        52 => {
            let mut v = vec![r.pick(&["ZPOPMIN", "ZPOPMAX"]).into(), key(r, "z")];
            if r.below(2) == 0 {
                v.push(r.pick(&["0", "1", "2", "-1"]).into());
            }
            v
        }
        53 => vec![
            "ZRANGESTORE".into(),
            key(r, "z"),
            key(r, "z"),
            int_arg(r),
            int_arg(r),
        ],
        54 => vec![
            "ZSCAN".into(),
            key(r, "z"),
            "0".into(),
            "COUNT".into(),
            "1000".into(),
        ],
        55 => vec!["TYPE".into(), any_key(r)],
        56 => vec!["KEYS".into(), r.pick(&["*", "h*", "?1", "[st]*"]).into()],
        57 => vec![
            r.pick(&["RENAME", "RENAMENX", "COPY"]).into(),
            any_key(r),
            any_key(r),
        ],
        58 => vec![r.pick(&["DEL", "UNLINK", "EXISTS"]).into(), any_key(r)],
        59 => vec![
            "SCAN".into(),
            "0".into(),
            "COUNT".into(),
            "1000".into(),
            "TYPE".into(),
            r.pick(&["string", "hash", "list", "set", "zset"]).into(),
        ],
        60 => vec!["ZMSCORE".into(), key(r, "z"), member(r), member(r)],
        // Expiries far in the future or in the past (module docs).
        62 => {
            let mut v = vec!["SET".into(), key(r, "s"), int_arg(r)];
            v.extend(
                match r.below(3) {
                    0 => ["EX", "1000"],
                    1 => ["PX", "2000000"],
                    _ => ["KEEPTTL", ""],
                }
                .iter()
                .filter(|w| !w.is_empty())
                .map(|w| w.to_string()),
            );
            v
        }
        // In seconds for EXPIRE, milliseconds for PEXPIRE: far is at least
        // 1000 s either way (`PEXPIRE k 1000` would be a 1 s expiry, due
        // mid-stream at a different instant on each server).
        63 => match r.below(2) {
            0 => vec![
                "EXPIRE".into(),
                any_key(r),
                r.pick(&["1000", "2000000", "0", "-5"]).into(),
            ],
            _ => vec![
                "PEXPIRE".into(),
                any_key(r),
                r.pick(&["1000000", "2000000000", "0", "-5"]).into(),
            ],
        },
        64 => vec![
            "PEXPIREAT".into(),
            any_key(r),
            r.pick(&["1", "1000", "4102444800000"]).into(),
        ],
        65 => vec![r.pick(&["TTL", "PTTL", "PERSIST"]).into(), any_key(r)],
        _ => vec!["DBSIZE".into()],
    };
    if c == 57 && v[0] == "COPY" && r.below(2) == 0 {
        v.push("REPLACE".into());
    }
    v
}

/// More command generators, one per group of commands added after the
/// first set (each in its own function below).
const GROUPS: &[fn(&mut Rng) -> Vec<String>] = &[
    collections_more,
    bits_and_ranges,
    geo,
    streams,
    publish,
    scripts,
];

/// `PUBLISH` and `SPUBLISH` (both through the log here; no connection of
/// the run subscribes, so both servers count 0 receivers) and their
/// errors.
fn publish(r: &mut Rng) -> Vec<String> {
    let cmd = r.pick(&["PUBLISH", "SPUBLISH"]).to_string();
    let ch = format!("ch{}", r.below(3));
    match r.below(8) {
        0 => vec![cmd, ch],
        _ => vec![cmd, ch, member(r)],
    }
}

type Script = (
    &'static str,
    &'static [&'static str],
    &'static [fn(&mut Rng) -> String],
);

/// The scripts of [`scripts`]: (body, the key prefixes of its `KEYS`,
/// the makers of its `ARGV`). None ends in `return redis.call(...)`: an
/// error raised in such a tail call names no line of the script here
/// (docs/kv-commands.md#scripts-and-functions). A prefix starting with `script:` is a key
/// only scripts write: what they store there (a draw of `math.random`,
/// the clock, a random member) differs from Redis's but not from member
/// to member, and no reply shows it.
const SCRIPTS: &[Script] = &[
    ("local v = redis.call('GET', KEYS[1]) return v", &["s"], &[]),
    (
        "local v = redis.call('INCRBY', KEYS[1], ARGV[1]) return v",
        &["s"],
        &[int_arg],
    ),
    (
        "local r = redis.pcall('RPUSH', KEYS[1], ARGV[1]) \
         if type(r) == 'table' and r.err then return 'caught: ' .. r.err end return r",
        &["l"],
        &[member],
    ),
    (
        "redis.call('HSET', KEYS[1], ARGV[1], ARGV[2]) return redis.call('HLEN', KEYS[1])",
        &["h"],
        &[member, int_arg],
    ),
    (
        "local t = redis.call('TIME') local d = math.random(1, 1000000) \
         redis.call('SET', KEYS[2], d .. ':' .. t[1] .. ':' .. math.random()) \
         local n = redis.call('SADD', KEYS[1], ARGV[1]) return n",
        &["t", "script:draw"],
        &[member],
    ),
    (
        "redis.call('SET', KEYS[2], tostring(redis.call('SRANDMEMBER', KEYS[1]))) \
         local n = redis.call('SCARD', KEYS[1]) return n",
        &["t", "script:pick"],
        &[],
    ),
    (
        "return {redis.call('EXISTS', KEYS[1]), 'two', {3, ARGV[1]}, false, 4.9}",
        &["z"],
        &[member],
    ),
    (
        "return redis.error_reply('MY_ERR ' .. ARGV[1])",
        &[],
        &[member],
    ),
    ("return {ok = 'FINE'}", &[], &[]),
    (
        "return cjson.encode({k = ARGV[1]}) .. #cmsgpack.pack({1, 2, ARGV[1]})",
        &[],
        &[member],
    ),
    ("local v = redis.call('NOSUCHCOMMAND') return v", &[], &[]),
    ("return nosuchglobal", &[], &[]),
    ("this is not lua", &[], &[]),
];

/// The library of [`scripts`]' `FUNCTION LOAD`.
const LIBRARY: &str = "#!lua name=difflib\n\
    redis.register_function('dget', function(keys, args) local v = redis.call('GET', keys[1]) return v end)\n\
    redis.register_function{function_name='dincr', flags={}, \
    callback=function(keys, args) local v = redis.call('INCRBY', keys[1], args[1]) return v end}\n\
    redis.register_function{function_name='dlen', flags={'no-writes'}, \
    callback=function(keys, args) local v = redis.call('LLEN', keys[1]) return v end}";

/// Scripts and functions: `EVAL`, `EVALSHA` (of a script loaded or not),
/// `EVAL_RO` (a write in it is refused), `SCRIPT LOAD|EXISTS`,
/// `FUNCTION LOAD [REPLACE]|DELETE`, `FCALL`, `FCALL_RO`. They read,
/// write, catch errors with `redis.pcall`, and use the clock and random
/// draws where Redis allows (see [`SCRIPTS`]).
fn scripts(r: &mut Rng) -> Vec<String> {
    let i = r.below(SCRIPTS.len());
    let (body, keys, args) = SCRIPTS[i];
    let mut words = vec![keys.len().to_string()];
    for k in keys.iter() {
        words.push(match k.strip_prefix("script:") {
            Some(_) => k.to_string(),
            None => key(r, k),
        });
    }
    for a in args.iter() {
        words.push(a(r));
    }
    let sha = || {
        String::from_utf8(xlane_kv::script::state::sha1_hex(body.as_bytes()).to_vec()).expect("hex")
    };
    let lead = |v: Vec<String>| v.into_iter().chain(words.clone()).collect::<Vec<_>>();
    match r.below(16) {
        0..=5 => lead(vec!["EVAL".into(), body.into()]),
        6 | 7 => lead(vec!["EVALSHA".into(), sha()]),
        8 => lead(vec!["EVAL_RO".into(), body.into()]),
        9 => vec!["SCRIPT".into(), "LOAD".into(), body.into()],
        10 => vec!["SCRIPT".into(), "EXISTS".into(), sha(), "0".repeat(40)],
        11 => {
            let mut v = vec!["FUNCTION".into(), "LOAD".into()];
            if r.below(4) != 0 {
                v.push("REPLACE".into());
            }
            v.push(LIBRARY.into());
            v
        }
        12 => vec!["FUNCTION".into(), "DELETE".into(), "difflib".into()],
        13 => vec![
            "FCALL".into(),
            "dincr".into(),
            "1".into(),
            key(r, "s"),
            int_arg(r),
        ],
        14 => vec!["FCALL".into(), "dget".into(), "1".into(), key(r, "s")],
        _ => vec![
            r.pick(&["FCALL_RO", "FCALL"]).into(),
            r.pick(&["dlen", "dincr"]).into(),
            "1".into(),
            key(r, "l"),
            "1".into(),
        ],
    }
}

// ---- Hashes, lists, sets and sorted sets: the multi-key commands,
// ---- random picks, removals by range, and SORT.

/// A sorted-set input of `ZUNION` and its kin: mostly a sorted set,
/// sometimes a set (scored 1).
fn zsrc(r: &mut Rng) -> String {
    if r.below(4) == 0 {
        key(r, "t")
    } else {
        key(r, "z")
    }
}

/// `numkeys` and that many keys from `pick` (sometimes a count that does
/// not match).
fn numkeys(r: &mut Rng, pick: fn(&mut Rng) -> String) -> (usize, Vec<String>) {
    let n = 1 + r.below(3);
    let mut v = vec![match r.below(20) {
        0 => "0".to_string(),
        1 => (n + 1).to_string(),
        _ => n.to_string(),
    }];
    for _ in 0..n {
        v.push(pick(r));
    }
    (n, v)
}

fn list_key(r: &mut Rng) -> String {
    key(r, "l")
}

fn set_key(r: &mut Rng) -> String {
    key(r, "t")
}

/// `HRANDFIELD`, `LMPOP`, `SINTERCARD`, `ZUNION`/`ZINTER`/`ZDIFF` (and
/// `STORE`, `ZINTERCARD`), `ZLEXCOUNT`, `ZREMRANGEBY*`, `ZMPOP`,
/// `ZRANDMEMBER`, the older `ZRANGEBY*` forms, `ZRANGESTORE` by score or
/// lex, and `SORT`/`SORT_RO`. Random picks only with counts that reach the
/// whole collection (their order is then Redis' for a small sorted set,
/// and normalised for a hash); `SORT` only where the order is specified
/// (no `BY` constant without `STORE`, no `ALPHA` with `BY`).
fn collections_more(r: &mut Rng) -> Vec<String> {
    let s = |x: &str| x.to_string();
    match r.below(16) {
        0 => {
            let mut v = vec![s("HRANDFIELD"), key(r, "h")];
            match r.below(4) {
                0 => v.push(s("0")),
                1 => v.extend([s("100"), s("WITHVALUES")]),
                2 => v.push(r.pick(&["100", "x", "-0"]).into()),
                _ => v.extend([s("100"), r.pick(&["WITHVALUES", "x"]).into()]),
            }
            v
        }
        1 => {
            let (_, keys) = numkeys(r, list_key);
            let mut v = vec![s("LMPOP")];
            v.extend(keys);
            v.push(r.pick(&["LEFT", "RIGHT", "x"]).into());
            if r.below(2) == 0 {
                v.extend([s("COUNT"), r.pick(&["1", "2", "10", "0", "-1"]).into()]);
            }
            v
        }
        2 => {
            let (_, keys) = numkeys(r, set_key);
            let mut v = vec![s("SINTERCARD")];
            v.extend(keys);
            if r.below(2) == 0 {
                v.extend([s("LIMIT"), r.pick(&["0", "1", "2", "-1"]).into()]);
            }
            v
        }
        3 | 4 => {
            let name = r.pick(&[
                "ZUNION",
                "ZINTER",
                "ZDIFF",
                "ZINTERCARD",
                "ZUNIONSTORE",
                "ZINTERSTORE",
                "ZDIFFSTORE",
            ]);
            let mut v = vec![s(name)];
            if name.ends_with("STORE") {
                v.push(key(r, "z"));
            }
            let (n, keys) = numkeys(r, zsrc);
            v.extend(keys);
            if r.below(2) == 0 {
                v.push(s("WEIGHTS"));
                for _ in 0..n {
                    v.push(r.pick(&["1", "2", "-1", "0.5", "0", "inf", "x"]).into());
                }
            }
            if r.below(2) == 0 {
                v.extend([s("AGGREGATE"), r.pick(&["SUM", "MIN", "MAX", "x"]).into()]);
            }
            if r.below(2) == 0 {
                v.push(s("WITHSCORES"));
            }
            if name == "ZINTERCARD" && r.below(2) == 0 {
                v.retain(|w| w != "WITHSCORES");
                v.extend([s("LIMIT"), r.pick(&["0", "1", "2", "-1"]).into()]);
            }
            v
        }
        5 => match r.below(2) {
            0 => vec![s("ZLEXCOUNT"), lex_key(r), lex_bound(r), lex_bound(r)],
            _ => lex_zadd(r),
        },
        6 => match r.below(3) {
            0 => vec![s("ZREMRANGEBYRANK"), key(r, "z"), int_arg(r), int_arg(r)],
            1 => vec![
                s("ZREMRANGEBYSCORE"),
                key(r, "z"),
                score_bound(r),
                score_bound(r),
            ],
            _ => vec![s("ZREMRANGEBYLEX"), lex_key(r), lex_bound(r), lex_bound(r)],
        },
        7 => {
            let (_, keys) = numkeys(r, |r| key(r, "z"));
            let mut v = vec![s("ZMPOP")];
            v.extend(keys);
            v.push(r.pick(&["MIN", "MAX", "x"]).into());
            if r.below(2) == 0 {
                v.extend([s("COUNT"), r.pick(&["1", "2", "10", "0"]).into()]);
            }
            v
        }
        8 => {
            let mut v = vec![s("ZRANDMEMBER"), key(r, "z")];
            match r.below(3) {
                0 => v.push(r.pick(&["0", "100", "x"]).into()),
                1 => v.extend([s("100"), s("WITHSCORES")]),
                _ => v.extend([s("0"), r.pick(&["WITHSCORES", "x"]).into()]),
            }
            v
        }
        9 | 10 => {
            let name = r.pick(&[
                "ZRANGEBYSCORE",
                "ZREVRANGEBYSCORE",
                "ZRANGEBYLEX",
                "ZREVRANGEBYLEX",
                "ZREVRANGE",
            ]);
            let k = if name.ends_with("LEX") {
                lex_key(r)
            } else {
                key(r, "z")
            };
            let mut v = vec![s(name), k];
            match name {
                "ZREVRANGE" => v.extend([int_arg(r), int_arg(r)]),
                n if n.ends_with("SCORE") => v.extend([score_bound(r), score_bound(r)]),
                _ => v.extend([lex_bound(r), lex_bound(r)]),
            }
            if r.below(2) == 0 {
                v.push(s("WITHSCORES"));
            }
            if r.below(3) == 0 {
                v.extend([s("LIMIT"), int_arg(r), int_arg(r)]);
            }
            if r.below(15) == 0 {
                v.push(s("REV"));
            }
            v
        }
        11 => {
            let mut v = vec![s("ZRANGESTORE"), key(r, "z")];
            if r.below(2) == 0 {
                v.extend([key(r, "z"), score_bound(r), score_bound(r), s("BYSCORE")]);
            } else {
                v.extend([lex_key(r), lex_bound(r), lex_bound(r), s("BYLEX")]);
            }
            if r.below(2) == 0 {
                v.push(s("REV"));
            }
            if r.below(2) == 0 {
                v.extend([s("LIMIT"), int_arg(r), int_arg(r)]);
            }
            v
        }
        _ => {
            let ro = r.below(3) == 0;
            let src = r.pick(&["l", "l", "t", "z"]);
            let mut v = vec![s(if ro { "SORT_RO" } else { "SORT" }), key(r, src)];
            let store = !ro && r.below(3) == 0;
            let mut alpha = false;
            let mut by = false;
            for _ in 0..r.below(4) {
                match r.below(6) {
                    0 => v.push(r.pick(&["ASC", "DESC"]).into()),
                    1 => {
                        v.push(s("ALPHA"));
                        alpha = true;
                    }
                    2 => v.extend([s("LIMIT"), int_arg(r), int_arg(r)]),
                    3 => {
                        let p = r.pick(&["s*", "h*->a", "nosort"]);
                        // Any key may hold a set (RENAME, COPY), whose
                        // own order Redis leaves open: unsorted only when
                        // stored (Redis then sorts a set).
                        if p != "nosort" || store {
                            v.extend([s("BY"), s(p)]);
                            by = true;
                        }
                    }
                    _ => v.extend([s("GET"), r.pick(&["#", "s*", "h*->a", "h*->", "k"]).into()]),
                }
            }
            if alpha && by {
                v.retain(|w| w != "ALPHA");
            }
            if store {
                v.extend([s("STORE"), key(r, "l")]);
            }
            v
        }
    }
}

// ---- Bitmaps, bit fields and string ranges (`cmd::bits`).

/// A bit offset: mostly within the first few hundred bytes, sometimes one
/// Redis refuses (negative, not a number, past `proto-max-bulk-len`).
/// Never a valid offset far out: the stream keeps its strings short.
fn bit_offset(r: &mut Rng) -> String {
    match r.below(20) {
        0 => r
            .pick(&["-1", "x", "4294967296", "9223372036854775807", "01"])
            .into(),
        1..=4 => r.below(8 * 300).to_string(),
        _ => r.below(64).to_string(),
    }
}

/// A `start`/`end` index of `BITCOUNT`, `BITPOS`, `GETRANGE`.
fn range_index(r: &mut Rng) -> String {
    match r.below(12) {
        0 => r
            .pick(&["x", "-9223372036854775808", "9223372036854775807", "1000"])
            .into(),
        1..=3 => format!("-{}", r.below(20)),
        _ => r.below(20).to_string(),
    }
}

/// A `BITFIELD` type, sometimes one Redis refuses.
fn bitfield_type(r: &mut Rng) -> String {
    match r.below(15) {
        0 => r.pick(&["u64", "i65", "i0", "x8", "u", "I8"]).into(),
        1 => r.pick(&["i64", "u63", "i1", "u1"]).into(),
        _ => format!("{}{}", r.pick(&["i", "u"]), 1 + r.below(16)),
    }
}

/// A `BITFIELD` value or increment.
fn bitfield_value(r: &mut Rng) -> String {
    r.pick(&[
        "0",
        "1",
        "-1",
        "7",
        "-8",
        "100",
        "-100",
        "255",
        "127",
        "-128",
        "65535",
        "9223372036854775807",
        "-9223372036854775808",
        "x",
    ])
    .into()
}

/// `BITFIELD`'s operations (`ro`: GETs only, as `BITFIELD_RO` takes them,
/// but for a rare SET that it refuses).
fn bitfield_ops(r: &mut Rng, v: &mut Vec<String>, ro: bool) {
    for _ in 0..r.below(4) {
        let ty = bitfield_type(r);
        let off = match r.below(6) {
            0 => format!("#{}", r.below(8)),
            _ => bit_offset(r),
        };
        let which = if ro {
            usize::from(r.below(15) == 0)
        } else {
            r.below(5)
        };
        match which {
            0 => v.extend(["GET".into(), ty, off]),
            1 => v.extend(["SET".into(), ty, off, bitfield_value(r)]),
            2 => v.extend(["INCRBY".into(), ty, off, bitfield_value(r)]),
            3 => v.extend([
                "OVERFLOW".into(),
                r.pick(&["WRAP", "SAT", "FAIL", "fail", "NOPE"]).into(),
            ]),
            _ => v.push(r.pick(&["GET", "SET", "BOGUS"]).into()),
        }
    }
}

/// `SETBIT`, `GETBIT`, `BITCOUNT`, `BITPOS`, `BITOP`, `BITFIELD`,
/// `BITFIELD_RO`, `SETRANGE`, `GETRANGE`, `SUBSTR` and `LCS` over the
/// string keys (sometimes another type), with short strings and offsets.
pub fn bits_and_ranges(r: &mut Rng) -> Vec<String> {
    let s = |x: &str| x.to_string();
    match r.below(12) {
        0 | 1 => vec![
            s("SETBIT"),
            key(r, "s"),
            bit_offset(r),
            r.pick(&["0", "1", "1", "0", "2", "-1", "x"]).into(),
        ],
        2 => vec![s("GETBIT"), key(r, "s"), bit_offset(r)],
        3 => {
            let mut v = vec![s("BITCOUNT"), key(r, "s")];
            match r.below(4) {
                0 => {}
                1 => v.push(range_index(r)),
                _ => v.extend([range_index(r), range_index(r)]),
            }
            if v.len() == 4 && r.below(2) == 0 {
                v.push(r.pick(&["BYTE", "BIT", "bit", "NOPE"]).into());
            }
            v
        }
        4 => {
            let mut v = vec![
                s("BITPOS"),
                key(r, "s"),
                r.pick(&["0", "1", "1", "0", "2", "x"]).into(),
            ];
            for _ in 0..r.below(3) {
                v.push(range_index(r));
            }
            if v.len() == 5 && r.below(2) == 0 {
                v.push(r.pick(&["BYTE", "BIT", "bit", "NOPE"]).into());
            }
            v
        }
        5 => {
            let mut v = vec![
                s("BITOP"),
                r.pick(&["AND", "OR", "XOR", "NOT", "not", "NAND"]).into(),
                key(r, "s"),
            ];
            for _ in 0..1 + r.below(3) {
                v.push(match r.below(8) {
                    0 => s("nosuch"),
                    _ => key(r, "s"),
                });
            }
            v
        }
        6 | 7 => {
            let mut v = vec![s("BITFIELD"), key(r, "s")];
            let ro = r.below(4) == 0;
            bitfield_ops(r, &mut v, ro);
            v
        }
        8 => {
            let mut v = vec![s("BITFIELD_RO"), key(r, "s")];
            bitfield_ops(r, &mut v, true);
            v
        }
        9 => vec![
            s("SETRANGE"),
            key(r, "s"),
            match r.below(10) {
                // Past `proto-max-bulk-len` with any value but "".
                0 => r
                    .pick(&["-1", "x", "536870912", "9223372036854775807"])
                    .into(),
                _ => r.below(40).to_string(),
            },
            r.pick(&["", "a", "xyz", "\u{0}\u{ff}", "hello world"])
                .into(),
        ],
        10 => vec![
            r.pick(&["GETRANGE", "SUBSTR"]).into(),
            key(r, "s"),
            range_index(r),
            range_index(r),
        ],
        _ => {
            let mut v = vec![s("LCS"), key(r, "s"), key(r, "s")];
            match r.below(6) {
                0 => v.push(s("LEN")),
                1 | 2 => {
                    v.push(s("IDX"));
                    if r.below(2) == 0 {
                        v.extend([s("MINMATCHLEN"), r.pick(&["0", "1", "2", "-3", "x"]).into()]);
                    }
                    if r.below(2) == 0 {
                        v.push(s("WITHMATCHLEN"));
                    }
                }
                3 => match r.below(3) {
                    0 => v.extend([s("LEN"), s("IDX")]),
                    _ => v.push(r.pick(&["NOPE", "MINMATCHLEN"]).into()),
                },
                _ => {}
            }
            v
        }
    }
}

// ---- Geo: GEO* commands over the sorted-set keys.

/// A longitude: mostly one of a few places within a few hundred km of
/// each other (searches find something), sometimes far, out of range or
/// not a number.
fn geo_lon(r: &mut Rng) -> String {
    match r.below(40) {
        0 => r.pick(&["x", "180.5", "-181", "inf"]).into(),
        1 => r.pick(&["180", "-180", "-122.27652", "2.3522"]).into(),
        _ => r
            .pick(&[
                "13.361389",
                "15.087269",
                "13.5",
                "12.9",
                "13.583333",
                "14.2",
            ])
            .into(),
    }
}

/// A latitude, as [`geo_lon`].
fn geo_lat(r: &mut Rng) -> String {
    match r.below(40) {
        0 => r.pick(&["x", "85.06", "-90", "nan"]).into(),
        1 => r
            .pick(&["85.05112878", "-85.05112878", "37.80574", "48.8566"])
            .into(),
        _ => r
            .pick(&[
                "38.115556",
                "37.502669",
                "38.0",
                "37.9",
                "37.316667",
                "38.2",
            ])
            .into(),
    }
}

/// A distance unit, sometimes one Redis refuses.
fn geo_unit(r: &mut Rng) -> String {
    match r.below(20) {
        0 => r.pick(&["x", "meters", ""]).into(),
        _ => r
            .pick(&["m", "km", "KM", "mi", "ft", "km", "km", "km"])
            .into(),
    }
}

/// A radius (or box side), sometimes one Redis refuses.
fn geo_extent(r: &mut Rng) -> String {
    match r.below(30) {
        0 => r.pick(&["-1", "x", "inf"]).into(),
        _ => r
            .pick(&["0", "1", "50", "100", "200", "500", "1000", "20000"])
            .into(),
    }
}

/// A search's options: `WITH*` (not with a store target, but rarely, to
/// meet Redis's refusal), `ASC`/`DESC`, `COUNT n [ANY]`, odd words.
fn geo_options(r: &mut Rng, v: &mut Vec<String>, stores: bool) {
    for _ in 0..r.below(4) {
        match r.below(12) {
            0..=2 if !stores || r.below(10) == 0 => v.push(
                r.pick(&["WITHDIST", "WITHHASH", "WITHCOORD", "withdist"])
                    .into(),
            ),
            3 | 4 => v.push(r.pick(&["ASC", "DESC"]).into()),
            5 | 6 => {
                v.push("COUNT".into());
                v.push(match r.below(10) {
                    0 => r.pick(&["0", "-1", "x"]).into(),
                    _ => r.pick(&["1", "2", "3", "10", "2"]).into(),
                });
                if r.below(3) == 0 {
                    v.push("ANY".into());
                }
            }
            7 if r.below(8) == 0 => v.push(r.pick(&["ANY", "NOPE", "STORE"]).into()),
            _ => {}
        }
    }
}

/// `GEOADD` (with `NX`/`XX`/`CH`), `GEOPOS`, `GEOHASH`, `GEODIST`,
/// `GEORADIUS`/`GEORADIUSBYMEMBER` (and `_RO`, `STORE`, `STOREDIST`),
/// `GEOSEARCH` and `GEOSEARCHSTORE` over the sorted-set keys (geo sets
/// and the other sorted sets of the stream, whose scores decode to
/// points too; sometimes a key of another type). The points sit close
/// together (several at the same place: ties in distance), so searches
/// find, sort and cut with `COUNT`.
pub fn geo(r: &mut Rng) -> Vec<String> {
    let s = |x: &str| x.to_string();
    match r.below(16) {
        0..=3 => {
            let mut v = vec![s("GEOADD"), key(r, "z")];
            if r.below(3) == 0 {
                v.push(r.pick(&["NX", "XX", "CH", "ch", "NX", "XX"]).into());
                if r.below(3) == 0 {
                    v.push(r.pick(&["CH", "XX", "NX"]).into());
                }
            }
            for _ in 0..1 + r.below(3) {
                v.extend([geo_lon(r), geo_lat(r), member(r)]);
            }
            if r.below(20) == 0 {
                v.pop();
            }
            v
        }
        4 | 5 => {
            let mut v = vec![r.pick(&["GEOPOS", "GEOHASH"]).into(), key(r, "z")];
            for _ in 0..1 + r.below(3) {
                v.push(member(r));
            }
            v
        }
        6 => {
            let mut v = vec![s("GEODIST"), key(r, "z"), member(r), member(r)];
            match r.below(6) {
                0 | 1 => {}
                2 => v.extend([geo_unit(r), s("km")]),
                _ => v.push(geo_unit(r)),
            }
            v
        }
        7..=9 => {
            let name = r.pick(&["GEORADIUS", "GEORADIUS", "GEORADIUS_RO"]);
            let mut v = vec![s(name), key(r, "z"), geo_lon(r), geo_lat(r)];
            v.extend([geo_extent(r), geo_unit(r)]);
            radius_tail(r, name, v)
        }
        10 | 11 => {
            let name = r.pick(&["GEORADIUSBYMEMBER", "GEORADIUSBYMEMBER_RO"]);
            let mut v = vec![s(name), key(r, "z"), member(r)];
            v.extend([geo_extent(r), geo_unit(r)]);
            radius_tail(r, name, v)
        }
        _ => {
            let store = r.below(2) == 0;
            let mut v = if store {
                vec![s("GEOSEARCHSTORE"), key(r, "z"), key(r, "z")]
            } else {
                vec![s("GEOSEARCH"), key(r, "z")]
            };
            let mut from = match r.below(2) {
                0 => vec![s("FROMMEMBER"), member(r)],
                _ => vec![s("FROMLONLAT"), geo_lon(r), geo_lat(r)],
            };
            let mut by = match r.below(2) {
                0 => vec![s("BYRADIUS"), geo_extent(r), geo_unit(r)],
                _ => vec![s("BYBOX"), geo_extent(r), geo_extent(r), geo_unit(r)],
            };
            // Sometimes one missing, or given twice.
            match r.below(60) {
                0 => from.clear(),
                1 => by.clear(),
                2..=4 => from.extend([s("FROMLONLAT"), s("13.5"), s("38")]),
                _ => {}
            }
            if r.below(2) == 0 {
                v.extend(from);
                v.extend(by);
            } else {
                v.extend(by);
                v.extend(from);
            }
            geo_options(r, &mut v, store);
            if store && r.below(3) == 0 {
                v.push(s("STOREDIST"));
            }
            v
        }
    }
}

// ---- Streams: only what the stream of commands determines. IDs are
// ---- explicit (`*` takes each server's clock); delivery and seen times
// ---- are never read back (no extended XPENDING, XINFO CONSUMERS or
// ---- FULL); claims take a min-idle-time of 0.

fn stream_id(r: &mut Rng) -> String {
    match r.below(8) {
        0 => r.pick(&["0", "0-0", "1", "x"]).into(),
        1 => format!("{}-*", 1 + r.below(30)),
        _ => format!("{}-{}", 1 + r.below(30), r.below(3)),
    }
}

fn stream_bound(r: &mut Rng, end: bool) -> String {
    match r.below(6) {
        0 => if end { "+" } else { "-" }.into(),
        1 => format!("({}-{}", 1 + r.below(30), r.below(3)),
        2 => (1 + r.below(30)).to_string(),
        _ => format!("{}-{}", 1 + r.below(30), r.below(3)),
    }
}

fn xgroup_name(r: &mut Rng) -> String {
    r.pick(&["g1", "g2", "g3"]).into()
}

fn xconsumer(r: &mut Rng) -> String {
    r.pick(&["c1", "c2"]).into()
}

/// One stream command.
pub fn streams(r: &mut Rng) -> Vec<String> {
    let x = key(r, "x");
    match r.below(20) {
        0..=4 => {
            let mut v = vec!["XADD".into(), x];
            if r.below(8) == 0 {
                v.push("NOMKSTREAM".into());
            }
            if r.below(6) == 0 {
                v.push(r.pick(&["MAXLEN", "MINID"]).into());
                v.push(r.pick(&["=", "~", "5"]).into());
                if !v.last().is_some_and(|w| w == "5") {
                    v.push((r.below(6)).to_string());
                }
            }
            let id = match r.below(4) {
                0 => format!("{}-*", 1 + r.below(40)),
                _ => format!("{}-{}", 1 + r.below(40), r.below(4)),
            };
            v.push(id);
            for _ in 0..=r.below(2) {
                v.push(r.pick(&["f", "g", "1"]).into());
                v.push(member(r));
            }
            v
        }
        5 => vec![
            r.pick(&["XRANGE", "XREVRANGE"]).into(),
            x,
            stream_bound(r, false),
            stream_bound(r, true),
            "COUNT".into(),
            r.pick(&["1", "3", "100", "0", "-1"]).into(),
        ],
        6 => vec!["XLEN".into(), x],
        7 => {
            let mut v = vec!["XREAD".into()];
            if r.below(2) == 0 {
                v.extend(["COUNT".into(), r.pick(&["1", "2", "10"]).into()]);
            }
            v.push("STREAMS".into());
            let k2 = key(r, "x");
            v.extend([x, k2, stream_id(r), r.pick(&["$", "0", "5-0"]).into()]);
            v
        }
        8 => {
            let sub = r.pick(&[
                "CREATE",
                "CREATE",
                "SETID",
                "DESTROY",
                "CREATECONSUMER",
                "DELCONSUMER",
            ]);
            let mut v = vec!["XGROUP".into(), sub.into(), x, xgroup_name(r)];
            match sub {
                "CREATE" | "SETID" => {
                    v.push(r.pick(&["$", "0", "3-0", "10-1"]).into());
                    if sub == "CREATE" && r.below(3) == 0 {
                        v.push("MKSTREAM".into());
                    }
                    if r.below(4) == 0 {
                        v.extend(["ENTRIESREAD".into(), r.pick(&["0", "2", "-1"]).into()]);
                    }
                }
                "CREATECONSUMER" | "DELCONSUMER" => v.push(xconsumer(r)),
                _ => {}
            }
            v
        }
        9..=11 => {
            let mut v = vec![
                "XREADGROUP".into(),
                "GROUP".into(),
                xgroup_name(r),
                xconsumer(r),
            ];
            if r.below(2) == 0 {
                v.extend(["COUNT".into(), r.pick(&["1", "2"]).into()]);
            }
            if r.below(5) == 0 {
                v.push("NOACK".into());
            }
            v.extend(["STREAMS".into(), x, r.pick(&[">", ">", "0", "5-0"]).into()]);
            v
        }
        12 => {
            let mut v = vec!["XACK".into(), x, xgroup_name(r)];
            for _ in 0..=r.below(2) {
                v.push(stream_id(r));
            }
            v
        }
        13 => vec!["XPENDING".into(), x, xgroup_name(r)],
        14 => {
            let mut v = vec!["XCLAIM".into(), x, xgroup_name(r), xconsumer(r), "0".into()];
            for _ in 0..=r.below(2) {
                v.push(stream_id(r));
            }
            if r.below(2) == 0 {
                v.push("JUSTID".into());
            }
            if r.below(4) == 0 {
                v.push("FORCE".into());
            }
            v
        }
        15 => {
            let mut v = vec![
                "XAUTOCLAIM".into(),
                x,
                xgroup_name(r),
                xconsumer(r),
                "0".into(),
                stream_bound(r, false),
                "COUNT".into(),
                r.pick(&["1", "2", "100"]).into(),
            ];
            if r.below(2) == 0 {
                v.push("JUSTID".into());
            }
            v
        }
        16 => {
            let mut v = vec!["XDEL".into(), x];
            for _ in 0..=r.below(2) {
                v.push(stream_id(r));
            }
            v
        }
        17 => vec![
            "XTRIM".into(),
            x,
            r.pick(&["MAXLEN", "MINID"]).into(),
            r.pick(&["=", "~"]).into(),
            r.pick(&["0", "2", "5", "10-0"]).into(),
        ],
        18 => {
            let mut v = vec![
                "XSETID".into(),
                x,
                format!("{}-{}", 1 + r.below(50), r.below(3)),
            ];
            if r.below(3) == 0 {
                v.extend(["ENTRIESADDED".into(), r.pick(&["0", "5", "100"]).into()]);
            }
            v
        }
        _ => match r.below(2) {
            0 => vec!["XINFO".into(), "STREAM".into(), x],
            _ => vec!["XINFO".into(), "GROUPS".into(), x],
        },
    }
}

/// The options of `GEORADIUS*` after the unit, with `STORE`/`STOREDIST`
/// sometimes (also on the `_RO` forms, which refuse them).
fn radius_tail(r: &mut Rng, name: &str, mut v: Vec<String>) -> Vec<String> {
    let store = r.below(if name.ends_with("_RO") { 12 } else { 3 }) == 0;
    geo_options(r, &mut v, store);
    if store {
        v.extend([r.pick(&["STORE", "STOREDIST"]).into(), key(r, "z")]);
    }
    v
}

/// `n` commands (and a [`WAIT`] after each short expiry): [`command`]s, with about one in 20 starting a
/// transaction — an optional `WATCH` of a key (which the stream may then
/// change), `MULTI`, a few commands (sometimes one Redis refuses before
/// `EXEC`, which aborts it), then `EXEC` or `DISCARD`.
pub fn stream(r: &mut Rng, n: usize) -> Vec<Vec<String>> {
    let mut out = Vec::with_capacity(n + 8);
    let mut waits = 0;
    while out.len() - waits < n {
        if r.below(10_000) == 0 {
            out.extend(short_ttl(r));
            waits += 1;
            continue;
        }
        if r.below(20) != 0 {
            out.push(command(r));
            continue;
        }
        if r.below(2) == 0 {
            out.push(vec!["WATCH".into(), any_key(r)]);
            for _ in 0..r.below(2) {
                out.push(command(r));
            }
        }
        out.push(vec!["MULTI".into()]);
        for _ in 0..r.below(5) {
            out.push(match r.below(15) {
                0 => vec!["NOPE".into(), "x".into()],
                1 => vec!["GET".into()],
                2 => vec!["UNWATCH".into()],
                _ => command(r),
            });
        }
        out.push(vec![r.pick(&["EXEC", "EXEC", "EXEC", "DISCARD"]).into()]);
    }
    out
}

fn sorted(mut items: Vec<Reply>) -> Vec<Reply> {
    items.sort_by_key(|r| format!("{r:?}"));
    items
}

fn sorted_pairs(items: Vec<Reply>) -> Vec<Reply> {
    let mut pairs: Vec<Vec<Reply>> = items.chunks(2).map(|c| c.to_vec()).collect();
    pairs.sort_by_key(|p| format!("{p:?}"));
    pairs.into_iter().flatten().collect()
}

/// Whether two normalised replies to `cmd` agree: equal, or for
/// `TTL`/`PTTL` both at least 0 and within [`TTL_SLACK_MS`].
fn agree(cmd: &[String], a: &Reply, b: &Reply) -> bool {
    let name = cmd[0].to_ascii_lowercase();
    match (name.as_str(), a, b) {
        ("ttl", Reply::Integer(x), Reply::Integer(y)) if *x >= 0 && *y >= 0 => {
            (x - y).abs() * 1000 <= TTL_SLACK_MS
        }
        ("pttl", Reply::Integer(x), Reply::Integer(y)) if *x >= 0 && *y >= 0 => {
            (x - y).abs() <= TTL_SLACK_MS
        }
        // Servers describe themselves differently; the protocol must agree.
        ("hello", Reply::Map(x), Reply::Map(y)) => {
            let proto = |m: &[(Reply, Reply)]| {
                m.iter()
                    .find(|(k, _)| *k == Reply::bulk("proto"))
                    .map(|(_, v)| v.clone())
            };
            proto(x) == proto(y)
        }
        _ => a == b,
    }
}

/// [`agree`] for an `EXEC` reply, item by item with the queued commands.
fn agree_exec(queued: &[Vec<String>], a: &Reply, b: &Reply) -> bool {
    match (a, b) {
        (Reply::Array(Some(x)), Reply::Array(Some(y)))
            if x.len() == queued.len() && y.len() == queued.len() =>
        {
            queued
                .iter()
                .zip(x.iter().zip(y))
                .all(|(c, (x, y))| agree(c, x, y))
        }
        _ => a == b,
    }
}

/// The reply with Redis' unspecified orders made canonical (an `EXEC`'s
/// replies each as its command's, given the commands it ran).
pub fn normalize(cmd: &[String], reply: Reply) -> Reply {
    let name = cmd[0].to_ascii_lowercase();
    match (name.as_str(), reply) {
        ("hgetall", Reply::Array(Some(a))) => Reply::Array(Some(sorted_pairs(a))),
        // RESP3 (`HELLO 3`): a map's pairs and a set's members in no order.
        (_, Reply::Map(mut m)) => {
            m.sort_by_key(|p| format!("{p:?}"));
            Reply::Map(m)
        }
        (_, Reply::Set(a)) => Reply::Set(sorted(a)),
        (
            "hkeys" | "hvals" | "smembers" | "sinter" | "sunion" | "sdiff" | "keys" | "spop"
            | "srandmember",
            Reply::Array(Some(a)),
        ) => Reply::Array(Some(sorted(a))),
        // RESP3's `HRANDFIELD ... WITHVALUES`: pairs as two-element arrays.
        ("hrandfield", Reply::Array(Some(a)))
            if a.iter()
                .all(|p| matches!(p, Reply::Array(Some(x)) if x.len() == 2)) =>
        {
            Reply::Array(Some(sorted(a)))
        }
        // A whole hash, in its own order: RESP2 pairs flat, or fields.
        ("hrandfield", Reply::Array(Some(a))) => {
            if cmd.iter().any(|w| w.eq_ignore_ascii_case("withvalues")) {
                Reply::Array(Some(sorted_pairs(a)))
            } else {
                Reply::Array(Some(sorted(a)))
            }
        }
        ("hscan" | "zscan" | "sscan" | "scan", Reply::Array(Some(mut a))) if a.len() == 2 => {
            if let Reply::Array(Some(items)) = a.pop().unwrap_or(Reply::nil()) {
                let items = if name == "hscan" || name == "zscan" {
                    sorted_pairs(items)
                } else {
                    sorted(items)
                };
                a.push(Reply::Array(Some(items)));
            }
            Reply::Array(Some(a))
        }
        (_, r) => r,
    }
}

/// A connection that pipelines commands in batches.
pub struct Conn {
    s: TcpStream,
    buf: Vec<u8>,
}

impl Conn {
    pub fn new(addr: SocketAddr) -> Conn {
        let s = TcpStream::connect(addr).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(30)))
            .expect("timeout");
        let _ = s.set_nodelay(true);
        Conn { s, buf: Vec::new() }
    }

    /// Sends `cmds` and reads one reply each.
    pub fn run(&mut self, cmds: &[Vec<String>]) -> Vec<Reply> {
        let mut wire = Vec::new();
        for c in cmds {
            let args: Vec<Vec<u8>> = c.iter().map(|a| a.as_bytes().to_vec()).collect();
            encode_command(&args, &mut wire);
        }
        self.s.write_all(&wire).expect("send");
        let mut out = Vec::with_capacity(cmds.len());
        let mut chunk = vec![0u8; 64 << 10];
        while out.len() < cmds.len() {
            while let Some((r, used)) = decode_reply(&self.buf).expect("valid reply") {
                out.push(r);
                self.buf.drain(..used);
                if out.len() == cmds.len() {
                    break;
                }
            }
            if out.len() == cmds.len() {
                break;
            }
            let k = self.s.read(&mut chunk).expect("read");
            assert!(k > 0, "connection closed after {} replies", out.len());
            self.buf.extend_from_slice(&chunk[..k]);
        }
        out
    }
}

/// Runs `cmds` against both servers, batch by batch (a batch ends at 500
/// commands or at a [`WAIT`]); the number of replies compared and the
/// differences, as lines to print (at most `max`).
pub fn compare(
    redis: SocketAddr,
    ours: SocketAddr,
    cmds: &[Vec<String>],
    max: usize,
) -> (usize, usize, Vec<String>) {
    let (mut a, mut b) = (Conn::new(redis), Conn::new(ours));
    let (mut n, mut compared) = (0, 0);
    let mut lines = Vec::new();
    // The commands queued since MULTI (to normalise EXEC's replies).
    let mut queued: Option<Vec<Vec<String>>> = None;
    // An EXEC's commands, for the report of a difference.
    let mut ran: Vec<Vec<String>> = Vec::new();
    let mut batches = Vec::new();
    let mut start = 0;
    for (i, c) in cmds.iter().enumerate() {
        if c[0] == WAIT || i + 1 - start == 500 || i + 1 == cmds.len() {
            batches.push((start, i + 1));
            start = i + 1;
        }
    }
    for (from, to) in batches {
        let (batch, wait) = match cmds[to - 1][0] == WAIT {
            true => (&cmds[from..to - 1], cmds[to - 1][1].parse::<u64>().ok()),
            false => (&cmds[from..to], None),
        };
        let want = a.run(batch);
        let got = b.run(batch);
        if let Some(ms) = wait {
            std::thread::sleep(Duration::from_millis(ms + WAIT_MARGIN_MS));
        }
        compared += batch.len();
        for (i, c) in batch.iter().enumerate() {
            let name = c[0].to_ascii_lowercase();
            let same = match (name.as_str(), &mut queued) {
                ("multi", q) if q.is_none() => {
                    *q = Some(Vec::new());
                    want[i] == got[i]
                }
                ("exec", q) if q.is_some() => {
                    let qs = q.take().unwrap_or_default();
                    ran.clone_from(&qs);
                    let each = |r: &Reply| match r {
                        Reply::Array(Some(items)) if items.len() == qs.len() => Reply::Array(Some(
                            qs.iter()
                                .zip(items)
                                .map(|(c, r)| normalize(c, r.clone()))
                                .collect(),
                        )),
                        other => other.clone(),
                    };
                    agree_exec(&qs, &each(&want[i]), &each(&got[i]))
                }
                ("discard", q) => {
                    *q = None;
                    want[i] == got[i]
                }
                (_, Some(q)) => {
                    q.push(c.clone());
                    want[i] == got[i]
                }
                _ => agree(
                    c,
                    &normalize(c, want[i].clone()),
                    &normalize(c, got[i].clone()),
                ),
            };
            if !same {
                n += 1;
                if lines.len() < max {
                    let inner: Vec<String> = match name.as_str() {
                        "exec" => ran.iter().map(|c| c.join(" ")).collect(),
                        _ => Vec::new(),
                    };
                    lines.push(format!(
                        "#{} {} {inner:?}\n   redis: {:?}\n   ours:  {:?}",
                        from + i,
                        c.join(" "),
                        want[i],
                        got[i]
                    ));
                    // XLANE_KV_DIFF_CONTEXT=n: the n commands before it,
                    // with Redis's replies (the same as ours, or reported).
                    let context = std::env::var("XLANE_KV_DIFF_CONTEXT")
                        .ok()
                        .and_then(|v| v.parse::<usize>().ok())
                        .unwrap_or(0);
                    for j in i.saturating_sub(context)..i {
                        lines.push(format!(
                            "   before: {} -> {:?}",
                            batch[j].join(" "),
                            want[j]
                        ));
                    }
                }
            }
        }
    }
    (compared, n, lines)
}
