//! `data::bits` against a real `redis-server` 7.0: seeded random streams
//! of `SETBIT`, `GETBIT`, `BITCOUNT`, `BITPOS`, `BITOP`, `BITFIELD`,
//! `BITFIELD_RO`, `SETRANGE`, `GETRANGE`/`SUBSTR`, `LCS` (and `SET`, `DEL`,
//! a list key for the type errors) run on both; every reply and, every few
//! commands, every key's value (`GET`) must be equal. The server runs with
//! `proto-max-bulk-len 1mb` so that the size limits are reached cheaply; a
//! second test checks the limits at the default 512 MB without reaching
//! them.

mod support;

use std::collections::BTreeMap;
use support::real_redis::{RealRedis, Resp, Value};
use xlane_kv::data::bits::{
    bitfield, bitop, cmd_bitcount, cmd_bitfield_ro, cmd_bitpos, cmd_getbit, cmd_getrange, cmd_lcs,
    parse_bitfield, parse_bitop, parse_setbit, parse_setrange, setbit, setrange, BitsError,
    LcsReply, Lookup, DEFAULT_MAX_BYTES,
};
use xlane_kv::value::SplitMix;

/// The differential stream's seed (printed with any failure); the
/// environment's `DATA_BITS_SEED` (decimal) replaces it to explore.
const SEED: u64 = 0x0b17_5eed_2024_0007;
/// Commands in the differential stream (`DATA_BITS_STEPS` replaces it).
const STEPS: usize = 30_000;

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}
/// The `proto-max-bulk-len` the server runs with: 1 MiB (Redis's minimum).
const MAX: u64 = 1 << 20;

struct Rng(SplitMix);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0.next_u64() % n.max(1)
    }
    fn range(&mut self, lo: i64, hi: i64) -> i64 {
        lo + self.below((hi - lo + 1) as u64) as i64
    }
    fn chance(&mut self, num: u64, den: u64) -> bool {
        self.below(den) < num
    }
    fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.below(xs.len() as u64) as usize]
    }
    fn bytes(&mut self, len: usize) -> Vec<u8> {
        (0..len).map(|_| self.0.next_u64() as u8).collect()
    }
    /// Random case, as a client may send a keyword.
    fn case(&mut self, w: &str) -> Vec<u8> {
        match self.below(3) {
            0 => w.to_ascii_lowercase().into_bytes(),
            1 => w.to_ascii_uppercase().into_bytes(),
            _ => w
                .bytes()
                .map(|c| {
                    if self.chance(1, 2) {
                        c.to_ascii_uppercase()
                    } else {
                        c.to_ascii_lowercase()
                    }
                })
                .collect(),
        }
    }
}

/// What a key holds in the model.
#[derive(Debug, Clone)]
enum Held {
    Str(Vec<u8>),
    List,
}

const KEYS: &[&str] = &["k0", "k1", "k2", "k3", "l", "none"];
const LIST: &str = "l";

#[derive(Default)]
struct Model {
    keys: BTreeMap<Vec<u8>, Held>,
}

fn err(e: BitsError) -> Value {
    Value::Error(e.to_string())
}

fn lcs_value(r: LcsReply) -> Value {
    match r {
        LcsReply::Str(s) => Value::Bulk(Some(s)),
        LcsReply::Len(n) => Value::Int(n),
        LcsReply::Idx {
            matches,
            len,
            with_match_len,
        } => {
            let pair = |x: u64, y: u64| {
                Value::Array(Some(vec![Value::Int(x as i64), Value::Int(y as i64)]))
            };
            let ms = matches
                .iter()
                .map(|m| {
                    let mut v = vec![pair(m.a_start, m.a_end), pair(m.b_start, m.b_end)];
                    if with_match_len {
                        v.push(Value::Int(m.len as i64));
                    }
                    Value::Array(Some(v))
                })
                .collect();
            Value::Array(Some(vec![
                Value::Bulk(Some(b"matches".to_vec())),
                Value::Array(Some(ms)),
                Value::Bulk(Some(b"len".to_vec())),
                Value::Int(len),
            ]))
        }
    }
}

impl Model {
    fn lookup(&self, k: &[u8]) -> Lookup<'_> {
        match self.keys.get(k) {
            None => Lookup::Missing,
            Some(Held::Str(s)) => Lookup::Str(s),
            Some(Held::List) => Lookup::WrongType,
        }
    }

    /// The string under `k` to write to (empty when missing), or
    /// WRONGTYPE.
    fn writable(&self, k: &[u8]) -> Result<Vec<u8>, Value> {
        match self.keys.get(k) {
            None => Ok(Vec::new()),
            Some(Held::Str(s)) => Ok(s.clone()),
            Some(Held::List) => Err(err(BitsError::WrongType)),
        }
    }

    fn exec(&mut self, w: &[Vec<u8>], max: u64) -> Value {
        let name = String::from_utf8_lossy(&w[0]).to_ascii_uppercase();
        let key = w.get(1).cloned().unwrap_or_default();
        match name.as_str() {
            "SET" => {
                self.keys.insert(key, Held::Str(w[2].clone()));
                Value::Simple("OK".into())
            }
            "DEL" => Value::Int(i64::from(self.keys.remove(&key).is_some())),
            "RPUSH" => {
                // Only ever sent right after DEL.
                self.keys.insert(key, Held::List);
                Value::Int(1)
            }
            "SETBIT" => {
                let args = match parse_setbit(w, max) {
                    Ok(a) => a,
                    Err(e) => return err(e),
                };
                let mut v = match self.writable(&key) {
                    Ok(v) => v,
                    Err(e) => return e,
                };
                let out = setbit(&mut v, &args);
                if out.changed {
                    self.keys.insert(key, Held::Str(v));
                }
                Value::Int(out.old)
            }
            "GETBIT" => match cmd_getbit(w, self.lookup(&key), max) {
                Ok(n) => Value::Int(n),
                Err(e) => err(e),
            },
            "BITCOUNT" => match cmd_bitcount(w, self.lookup(&key)) {
                Ok(n) => Value::Int(n),
                Err(e) => err(e),
            },
            "BITPOS" => match cmd_bitpos(w, self.lookup(&key)) {
                Ok(n) => Value::Int(n),
                Err(e) => err(e),
            },
            "BITOP" => {
                let args = match parse_bitop(w) {
                    Ok(a) => a,
                    Err(e) => return err(e),
                };
                let mut srcs: Vec<&[u8]> = Vec::new();
                for k in &args.sources {
                    match self.lookup(k) {
                        Lookup::Missing => srcs.push(&[]),
                        Lookup::Str(s) => srcs.push(s),
                        Lookup::WrongType => return err(BitsError::WrongType),
                    }
                }
                let out = bitop(args.op, &srcs);
                let n = out.len() as i64;
                if out.is_empty() {
                    self.keys.remove(&args.dest);
                } else {
                    self.keys.insert(args.dest, Held::Str(out));
                }
                Value::Int(n)
            }
            "BITFIELD" => {
                let bf = match parse_bitfield(w, false, max) {
                    Ok(b) => b,
                    Err(e) => return err(e),
                };
                let mut v = match self.writable(&key) {
                    Ok(v) => v,
                    Err(e) => return e,
                };
                let out = bitfield(&mut v, &bf);
                if out.changed {
                    self.keys.insert(key, Held::Str(v));
                }
                bitfield_value(&out.replies)
            }
            "BITFIELD_RO" => match cmd_bitfield_ro(w, self.lookup(&key), max) {
                Ok(r) => bitfield_value(&r),
                Err(e) => err(e),
            },
            "SETRANGE" => {
                let args = match parse_setrange(w) {
                    Ok(a) => a,
                    Err(e) => return err(e),
                };
                let mut v = match self.writable(&key) {
                    Ok(v) => v,
                    Err(e) => return e,
                };
                match setrange(&mut v, &args, max) {
                    Ok(out) => {
                        if out.changed {
                            self.keys.insert(key, Held::Str(v));
                        }
                        Value::Int(out.len)
                    }
                    Err(e) => err(e),
                }
            }
            "GETRANGE" | "SUBSTR" => match cmd_getrange(w, self.lookup(&key)) {
                Ok(s) => Value::Bulk(Some(s)),
                Err(e) => err(e),
            },
            "LCS" => {
                let b = w.get(2).cloned().unwrap_or_default();
                match cmd_lcs(w, self.lookup(&key), self.lookup(&b), max) {
                    Ok(r) => lcs_value(r),
                    Err(e) => err(e),
                }
            }
            other => panic!("model: unknown command {other}"),
        }
    }
}

fn bitfield_value(r: &[Option<i64>]) -> Value {
    Value::Array(Some(
        r.iter()
            .map(|x| match x {
                Some(n) => Value::Int(*n),
                None => Value::Bulk(None),
            })
            .collect(),
    ))
}

fn int_word(g: &mut Rng, lo: i64, hi: i64) -> Vec<u8> {
    match g.below(40) {
        0 => b"abc".to_vec(),
        1 => i64::MIN.to_string().into_bytes(),
        2 => i64::MAX.to_string().into_bytes(),
        3 => b"+1".to_vec(),
        4 => b"01".to_vec(),
        5 => (i64::MIN + 1).to_string().into_bytes(),
        _ => g.range(lo, hi).to_string().into_bytes(),
    }
}

fn key(g: &mut Rng) -> Vec<u8> {
    g.pick(KEYS).as_bytes().to_vec()
}

/// Mostly string keys: LCS's type error needs only a few.
fn lcs_key(g: &mut Rng) -> Vec<u8> {
    if g.chance(1, 15) {
        key(g)
    } else {
        g.pick(&KEYS[..4]).as_bytes().to_vec()
    }
}

fn unit(g: &mut Rng) -> Vec<u8> {
    match g.below(9) {
        0 => b"bits".to_vec(),
        1..=4 => g.case("bit"),
        _ => g.case("byte"),
    }
}

fn bf_type(g: &mut Rng) -> Vec<u8> {
    match g.below(120) {
        0 => b"u64".to_vec(),
        1 => b"i65".to_vec(),
        2 => b"i0".to_vec(),
        3 => b"x8".to_vec(),
        4 => b"I8".to_vec(),
        5 => b"u".to_vec(),
        6 => b"i08".to_vec(),
        7 => b"u8\0junk".to_vec(),
        _ => {
            let signed = g.chance(1, 2);
            let bits = match g.below(4) {
                0 => g.range(1, 8),
                1 => g.range(9, 32),
                _ => g.range(33, if signed { 64 } else { 63 }),
            };
            format!("{}{}", if signed { 'i' } else { 'u' }, bits).into_bytes()
        }
    }
}

fn bf_offset(g: &mut Rng) -> Vec<u8> {
    match g.below(100) {
        0 => b"-1".to_vec(),
        1 => b"x".to_vec(),
        2 => b"#".to_vec(),
        3 => b"#-1".to_vec(),
        4 => (MAX * 8).to_string().into_bytes(),
        5 => (MAX * 8 - 1).to_string().into_bytes(),
        6 => b"#288230376151711745".to_vec(),
        7 => format!("#{}", MAX).into_bytes(),
        8..=25 => format!("#{}", g.range(0, 12)).into_bytes(),
        _ => g.range(0, 120).to_string().into_bytes(),
    }
}

fn bf_value(g: &mut Rng) -> Vec<u8> {
    let v: i64 = match g.below(12) {
        0 => i64::MIN,
        1 => i64::MAX,
        2 => i64::MIN + 1,
        3 => i64::MAX - 1,
        4 => g.0.next_u64() as i64,
        5 => {
            let k = g.range(0, 63);
            (1i64 << k).wrapping_add(g.range(-2, 1))
        }
        6 => {
            let k = g.range(0, 63);
            (1i64 << k).wrapping_neg().wrapping_add(g.range(-1, 2))
        }
        _ => g.range(-300, 300),
    };
    if g.chance(1, 150) {
        return b"notint".to_vec();
    }
    v.to_string().into_bytes()
}

fn bitfield_words(g: &mut Rng, ro: bool) -> Vec<Vec<u8>> {
    let mut w = vec![
        if ro {
            g.case("bitfield_ro")
        } else {
            g.case("bitfield")
        },
        key(g),
    ];
    let n = g.below(6);
    for _ in 0..n {
        match g.below(if ro { 40 } else { 30 }) {
            0 | 1 => {
                w.push(g.case("overflow"));
                w.push(match g.below(13) {
                    0 => b"saturate".to_vec(),
                    1..=4 => g.case("wrap"),
                    5..=8 => g.case("sat"),
                    _ => g.case("fail"),
                });
            }
            2..=8 => {
                w.push(g.case("set"));
                w.push(bf_type(g));
                w.push(bf_offset(g));
                w.push(bf_value(g));
            }
            9..=16 => {
                w.push(g.case("incrby"));
                w.push(bf_type(g));
                w.push(bf_offset(g));
                w.push(bf_value(g));
            }
            17 => {
                // Unknown subcommand.
                w.push(b"put".to_vec());
                w.push(b"i8".to_vec());
                w.push(b"0".to_vec());
            }
            _ => {
                w.push(g.case("get"));
                w.push(bf_type(g));
                w.push(bf_offset(g));
            }
        }
    }
    // Now and then a truncated last subcommand (syntax error).
    if g.chance(1, 60) {
        let sub = g_pick_sub(g);
        w.push(g.case(sub));
    }
    w
}

fn g_pick_sub(g: &mut Rng) -> &'static str {
    const SUBS: [&str; 4] = ["get", "set", "incrby", "overflow"];
    SUBS[g.below(4) as usize]
}

fn lcs_string(g: &mut Rng) -> Vec<u8> {
    let n = g.below(14) as usize;
    let alpha: &[u8] = if g.chance(1, 2) { b"ab" } else { b"abcd" };
    (0..n).map(|_| *g.pick(alpha)).collect()
}

/// One random command's words.
fn command(g: &mut Rng) -> Vec<Vec<u8>> {
    let s = |x: &str| x.as_bytes().to_vec();
    match g.below(100) {
        0..=4 => vec![s("SET"), key(g), {
            let n = g.below(12) as usize;
            g.bytes(n)
        }],
        5..=8 => vec![s("SET"), key(g), lcs_string(g)],
        // Integers: Redis keeps these int-encoded.
        9 => vec![
            s("SET"),
            key(g),
            g.range(-99999, 99999).to_string().into_bytes(),
        ],
        10 => vec![s("DEL"), key(g)],
        11..=18 => {
            let off = match g.below(60) {
                0 => b"-1".to_vec(),
                1 => b"#3".to_vec(),
                2 => (MAX * 8).to_string().into_bytes(),
                3 => (MAX * 8 - 1).to_string().into_bytes(),
                4 => b"x".to_vec(),
                _ => g.range(0, 300).to_string().into_bytes(),
            };
            let v = match g.below(20) {
                0 => s("2"),
                1 => s("-1"),
                2 => s("x"),
                3..=11 => s("1"),
                _ => s("0"),
            };
            vec![g.case("setbit"), key(g), off, v]
        }
        19..=22 => {
            let off = match g.below(20) {
                0 => b"-1".to_vec(),
                1 => (MAX * 8).to_string().into_bytes(),
                2 => b"y".to_vec(),
                _ => g.range(0, 300).to_string().into_bytes(),
            };
            vec![g.case("getbit"), key(g), off]
        }
        23..=31 => {
            let mut w = vec![g.case("bitcount"), key(g)];
            let n = match g.below(12) {
                0 => 1,
                1 => 4,
                2..=4 => 0,
                5..=8 => 2,
                _ => 3,
            };
            if n >= 1 {
                w.push(int_word(g, -30, 30));
            }
            if n >= 2 {
                w.push(int_word(g, -30, 30));
            }
            if n >= 3 {
                w.push(unit(g));
            }
            if n >= 4 {
                w.push(s("x"));
            }
            w
        }
        32..=42 => {
            let bit = match g.below(20) {
                0 => s("2"),
                1 => s("-1"),
                2 => s("x"),
                3..=11 => s("1"),
                _ => s("0"),
            };
            let mut w = vec![g.case("bitpos"), key(g), bit];
            let n = g.below(6);
            if n >= 1 {
                w.push(int_word(g, -30, 30));
            }
            if n >= 2 {
                w.push(int_word(g, -30, 30));
            }
            if n >= 3 {
                w.push(unit(g));
            }
            if n >= 5 {
                w.push(s("x"));
            }
            w
        }
        43..=50 => {
            let op = match g.below(14) {
                0 => s("nand"),
                1 => s("and\0x"),
                2..=4 => g.case("and"),
                5..=7 => g.case("or"),
                8..=10 => g.case("xor"),
                _ => g.case("not"),
            };
            let mut w = vec![g.case("bitop"), op, key(g)];
            let n = if g.chance(3, 4) && w[1].eq_ignore_ascii_case(b"not") {
                1
            } else {
                g.range(1, 4)
            };
            for _ in 0..n {
                w.push(key(g));
            }
            w
        }
        51..=64 => bitfield_words(g, false),
        65..=68 => bitfield_words(g, true),
        69..=76 => {
            let off = match g.below(40) {
                0 => s("-1"),
                1 => s("x"),
                2 => MAX.to_string().into_bytes(),
                3 => i64::MAX.to_string().into_bytes(),
                4 => (MAX - 1).to_string().into_bytes(),
                _ => g.range(0, 40).to_string().into_bytes(),
            };
            let n = match g.below(5) {
                0 => 0,
                _ => g.below(10) as usize,
            };
            vec![g.case("setrange"), key(g), off, g.bytes(n)]
        }
        77..=84 => {
            let name = if g.chance(1, 5) {
                g.case("substr")
            } else {
                g.case("getrange")
            };
            vec![name, key(g), int_word(g, -20, 20), int_word(g, -20, 20)]
        }
        _ => {
            let mut w = vec![g.case("lcs"), lcs_key(g), lcs_key(g)];
            let n = g.below(5);
            for _ in 0..n {
                match g.below(14) {
                    0..=2 => w.push(g.case("idx")),
                    3 | 4 => w.push(g.case("len")),
                    5..=7 => w.push(g.case("withmatchlen")),
                    8..=10 => {
                        w.push(g.case("minmatchlen"));
                        w.push(int_word(g, -1, 4));
                    }
                    11 => w.push(g.case("minmatchlen")),
                    12 => w.push(s("idxx")),
                    _ => w.push(g.case("idx")),
                }
            }
            w
        }
    }
}

fn show(w: &[Vec<u8>]) -> String {
    w.iter()
        .map(|x| format!("{:?}", String::from_utf8_lossy(x)))
        .collect::<Vec<_>>()
        .join(" ")
}

fn run(c: &mut Resp, w: &[Vec<u8>]) -> Value {
    let refs: Vec<&[u8]> = w.iter().map(Vec::as_slice).collect();
    c.cmd(&refs)
}

fn compare_keys(c: &mut Resp, m: &Model, seed: u64, step: usize) {
    for k in KEYS {
        let got = c.cmd(&[b"TYPE", k.as_bytes()]);
        let want = match m.keys.get(k.as_bytes()) {
            None => "none",
            Some(Held::Str(_)) => "string",
            Some(Held::List) => "list",
        };
        assert_eq!(
            got,
            Value::Simple(want.into()),
            "seed {seed:#x} step {step}: TYPE {k}"
        );
        if let Some(Held::Str(v)) = m.keys.get(k.as_bytes()) {
            let got = c.cmd(&[b"GET", k.as_bytes()]);
            assert!(
                got == Value::Bulk(Some(v.clone())),
                "seed {seed:#x} step {step}: GET {k}: redis {} bytes, model {} bytes",
                got.bytes().map_or(0, <[u8]>::len),
                v.len()
            );
        }
    }
}

#[test]
fn differential_against_redis() {
    let r = RealRedis::start_with(&["--proto-max-bulk-len", "1mb"]);
    let mut c = r.conn();
    let mut m = Model::default();
    let seed = env_or("DATA_BITS_SEED", SEED);
    let steps = env_or("DATA_BITS_STEPS", STEPS);
    let mut g = Rng(SplitMix::new(seed));
    let mut counts: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    for step in 0..steps {
        // Keep a list under "l" most of the time, for the type errors.
        if step % 200 == 0 {
            for w in [
                vec![b"DEL".to_vec(), LIST.as_bytes().to_vec()],
                vec![b"RPUSH".to_vec(), LIST.as_bytes().to_vec(), b"x".to_vec()],
            ] {
                let want = m.exec(&w, MAX);
                let got = run(&mut c, &w);
                if w[0] == b"RPUSH" {
                    assert_eq!(got, want, "seed {seed:#x} step {step}: {}", show(&w));
                }
            }
        }
        // A 1 MiB string now and then is fine, but not for long.
        if step % 500 == 250 {
            for k in KEYS {
                if let Some(Held::Str(v)) = m.keys.get(k.as_bytes()) {
                    if v.len() > 4096 {
                        let w = vec![b"DEL".to_vec(), k.as_bytes().to_vec()];
                        assert_eq!(run(&mut c, &w), m.exec(&w, MAX));
                    }
                }
            }
        }
        let w = command(&mut g);
        let want = m.exec(&w, MAX);
        let got = run(&mut c, &w);
        assert_eq!(got, want, "seed {seed:#x} step {step}: {}", show(&w));
        let e = counts
            .entry(String::from_utf8_lossy(&w[0]).to_ascii_uppercase())
            .or_default();
        e.0 += 1;
        if matches!(got, Value::Error(_)) {
            e.1 += 1;
        }
        if step % 50 == 49 {
            compare_keys(&mut c, &m, seed, step);
        }
    }
    compare_keys(&mut c, &m, seed, steps);
    // The stream must have exercised every command, both ways.
    for name in [
        "SETBIT",
        "GETBIT",
        "BITCOUNT",
        "BITPOS",
        "BITOP",
        "BITFIELD",
        "BITFIELD_RO",
        "SETRANGE",
        "GETRANGE",
        "SUBSTR",
        "LCS",
    ] {
        let (n, errors) = counts.get(name).copied().unwrap_or_default();
        assert!(n > 100, "{name}: only {n} commands");
        assert!(errors > 0 && errors < n, "{name}: {errors} errors of {n}");
    }
    eprintln!("seed {seed:#x}, {steps} commands: {counts:?}");
}

/// LCS with long strings: the results, and the transient-memory limit at
/// 1 MiB (`(len(a)+1) * (len(b)+1) * 4` bytes).
#[test]
fn lcs_long_strings_and_memory_limit() {
    let r = RealRedis::start_with(&["--proto-max-bulk-len", "1mb"]);
    let mut c = r.conn();
    let mut m = Model::default();
    let mut g = Rng(SplitMix::new(SEED ^ 0x1c5));
    for round in 0..40 {
        let la = g.range(0, 700) as usize;
        let lb = g.range(0, 700) as usize;
        let a: Vec<u8> = (0..la).map(|_| *g.pick(b"acgt")).collect();
        let b: Vec<u8> = (0..lb).map(|_| *g.pick(b"acgt")).collect();
        for w in [
            vec![b"SET".to_vec(), b"a".to_vec(), a],
            vec![b"SET".to_vec(), b"b".to_vec(), b],
        ] {
            assert_eq!(run(&mut c, &w), m.exec(&w, MAX));
        }
        for opts in [
            &[][..],
            &[&b"LEN"[..]][..],
            &[&b"IDX"[..]][..],
            &[&b"IDX"[..], b"MINMATCHLEN", b"3", b"WITHMATCHLEN"][..],
        ] {
            let mut w = vec![b"LCS".to_vec(), b"a".to_vec(), b"b".to_vec()];
            w.extend(opts.iter().map(|o| o.to_vec()));
            let want = m.exec(&w, MAX);
            let got = run(&mut c, &w);
            assert_eq!(got, want, "round {round} {la}x{lb}: {}", show(&w));
        }
    }
}

/// The limits at the default `proto-max-bulk-len` (512 MB), without
/// allocating anywhere near it, and a few words Redis reads as C strings.
#[test]
fn limits_at_default_size() {
    let r = RealRedis::start();
    let mut c = r.conn();
    let mut m = Model::default();
    let max = DEFAULT_MAX_BYTES;
    let lines: &[&[&[u8]]] = &[
        &[b"SETBIT", b"k", b"4294967296", b"1"],
        &[b"SETBIT", b"k", b"9223372036854775807", b"1"],
        &[b"SETBIT", b"k", b"9223372036854775808", b"1"],
        &[b"SETBIT", b"k", b"100", b"1"],
        &[b"GETBIT", b"k", b"4294967296"],
        &[b"GETBIT", b"k", b"4294967295"],
        &[b"GETBIT", b"k", b"100"],
        &[b"SETRANGE", b"k", b"536870912", b"a"],
        &[b"SETRANGE", b"k", b"536870912", b""],
        &[b"SETRANGE", b"new", b"536870912", b""],
        &[b"SETRANGE", b"k", b"9223372036854775807", b"a"],
        &[b"SETRANGE", b"k", b"-1", b"a"],
        &[b"BITFIELD", b"k", b"GET", b"u8", b"4294967288"],
        &[b"BITFIELD", b"k", b"GET", b"u8", b"4294967296"],
        &[b"BITFIELD", b"k", b"GET", b"i64", b"#67108863"],
        &[b"BITFIELD", b"k", b"GET", b"i64", b"#67108864"],
        &[
            b"BITFIELD",
            b"k",
            b"SET",
            b"i64",
            b"#288230376151711745",
            b"-5",
        ],
        &[
            b"BITFIELD",
            b"k",
            b"GET",
            b"i64",
            b"64",
            b"GET",
            b"u8\0x",
            b"0",
        ],
        &[b"BITFIELD", b"k", b"get\0x", b"u8", b"0"],
        &[b"BITFIELD", b"k", b"GET", b"u8", b"0", b"OVERFLOW"],
        &[b"BITFIELD", b"k", b"GET", b"u8"],
        &[
            b"BITFIELD",
            b"k",
            b"OVERFLOW",
            b"SAT",
            b"SET",
            b"i8",
            b"0",
            b"-9223372036854775808",
        ],
        &[
            b"BITFIELD",
            b"k",
            b"OVERFLOW",
            b"SAT",
            b"SET",
            b"u8",
            b"0",
            b"-1",
        ],
        &[
            b"BITFIELD",
            b"k",
            b"OVERFLOW",
            b"FAIL",
            b"INCRBY",
            b"u2",
            b"200",
            b"10",
        ],
        &[
            b"BITFIELD",
            b"nokey",
            b"OVERFLOW",
            b"FAIL",
            b"INCRBY",
            b"u2",
            b"0",
            b"10",
        ],
        &[b"BITFIELD", b"nokey2"],
        &[
            b"BITFIELD_RO",
            b"k",
            b"GET",
            b"u8",
            b"0",
            b"SET",
            b"x8",
            b"0",
            b"1",
        ],
        &[
            b"BITFIELD_RO",
            b"k",
            b"GET",
            b"u8",
            b"0",
            b"SET",
            b"i8",
            b"0",
            b"1",
        ],
        &[b"BITOP", b"and\0x", b"d", b"k"],
        &[b"BITOP", b"not", b"d", b"k", b"k"],
        &[b"BITOP", b"and", b"d", b"nokey3"],
        &[b"BITCOUNT", b"k", b"0", b"-1", b"bit\0x"],
        &[b"BITCOUNT", b"k", b"-1", b"-2", b"nonsense"],
        &[b"BITCOUNT", b"nokey4", b"a", b"b", b"c", b"d"],
        &[b"BITPOS", b"nokey4", b"1", b"x"],
        &[b"BITPOS", b"nokey4", b"0"],
        &[b"BITPOS", b"k", b"0", b"0", b"-1", b"bit", b"extra"],
        &[b"BITPOS", b"k", b"0", b"x", b"-1", b"bad"],
        &[b"BITPOS", b"k", b"0", b"0", b"x", b"bad"],
        &[b"SET", b"e", b""],
        &[b"BITPOS", b"e", b"0"],
        &[b"BITPOS", b"e", b"1"],
        &[b"BITCOUNT", b"e", b"0", b"-1"],
        &[b"GETRANGE", b"e", b"0", b"-1"],
        &[b"GETRANGE", b"k", b"0", b"-100"],
        &[
            b"GETRANGE",
            b"k",
            b"-9223372036854775808",
            b"9223372036854775807",
        ],
        &[b"LCS", b"k", b"e", b"LEN", b"IDX"],
        &[b"LCS", b"k", b"e", b"MINMATCHLEN"],
        &[
            b"LCS",
            b"k",
            b"e",
            b"MINMATCHLEN",
            b"-5",
            b"IDX",
            b"WITHMATCHLEN",
        ],
        &[b"LCS", b"k", b"e", b"idx\0zz"],
    ];
    for (i, line) in lines.iter().enumerate() {
        let w: Vec<Vec<u8>> = line.iter().map(|x| x.to_vec()).collect();
        let want = m.exec(&w, max);
        let got = run(&mut c, &w);
        assert_eq!(got, want, "line {i}: {}", show(&w));
    }
    compare_keys_named(
        &mut c,
        &m,
        &[b"k", b"d", b"e", b"nokey", b"nokey2", b"nokey3", b"new"],
    );
}

fn compare_keys_named(c: &mut Resp, m: &Model, keys: &[&[u8]]) {
    for k in keys {
        let want = match m.keys.get(*k) {
            None => Value::Bulk(None),
            Some(Held::Str(v)) => Value::Bulk(Some(v.clone())),
            Some(Held::List) => unreachable!(),
        };
        assert_eq!(
            c.cmd(&[b"GET", k]),
            want,
            "GET {}",
            String::from_utf8_lossy(k)
        );
    }
}
