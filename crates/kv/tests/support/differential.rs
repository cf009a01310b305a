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

fn lex_bound(r: &mut Rng) -> String {
    r.pick(&["-", "+", "[a", "(b", "[c", "(e", "x"]).to_string()
}

/// One random command over strings, hashes, lists, sets, sorted sets and
/// the keyspace. Only commands whose reply is fully determined by the
/// stream (after [`normalize`]) are drawn: `SPOP`/`SRANDMEMBER` take a
/// count that reaches the whole set.
pub fn command(r: &mut Rng) -> Vec<String> {
    let c = r.below(66);
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
            let mut v = vec!["ZRANGE".into(), key(r, "z")];
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
                }
            }
        }
    }
    (compared, n, lines)
}
