//! Differential tests of `xlane_kv::data::stream` against a real
//! `redis-server` 7.0: the same seeded random commands go to both, and the
//! replies must be equal (wall-time fields, such as idle times and
//! delivery times, compared for presence and type only).
//!
//! The module is driven through a small dispatcher written here, as the
//! command layer would wire it: each command is parsed, its key looked up
//! (a string key stands for any other type) and the module's function
//! called.

mod support;

use std::collections::BTreeMap;
use std::time::{SystemTime, UNIX_EPOCH};
use support::real_redis::{RealRedis, Resp, Value};
use xlane_kv::data::rdb;
use xlane_kv::data::stream::*;
use xlane_kv::resp::Reply;
use xlane_kv::value::SplitMix;

// ---------------------------------------------------------------------
// The dispatcher
// ---------------------------------------------------------------------

enum Val {
    Stream(Stream),
    Str,
}

struct Model {
    keys: BTreeMap<Vec<u8>, Val>,
    cfg: StreamConfig,
}

fn err(e: StreamError) -> Reply {
    e.to_reply()
}

impl Model {
    fn new(cfg: StreamConfig) -> Model {
        Model {
            keys: BTreeMap::new(),
            cfg,
        }
    }

    fn stream(&self, k: &[u8]) -> Option<&Stream> {
        match self.keys.get(k) {
            Some(Val::Stream(s)) => Some(s),
            _ => None,
        }
    }

    fn key(&self, k: &[u8]) -> Key<'_> {
        match self.keys.get(k) {
            None => Key::Missing,
            Some(Val::Str) => Key::WrongType,
            Some(Val::Stream(s)) => Key::Stream(s),
        }
    }

    /// Runs `f` on the key's slot, storing the stream back.
    fn with_mut<R>(&mut self, k: &[u8], f: impl FnOnce(KeyMut<'_>) -> R) -> R {
        match self.keys.remove(k) {
            Some(Val::Str) => {
                self.keys.insert(k.to_vec(), Val::Str);
                f(KeyMut::WrongType)
            }
            Some(Val::Stream(s)) => {
                let mut slot = Some(s);
                let r = f(KeyMut::Slot(&mut slot));
                if let Some(s) = slot {
                    self.keys.insert(k.to_vec(), Val::Stream(s));
                }
                r
            }
            None => {
                let mut slot = None;
                let r = f(KeyMut::Slot(&mut slot));
                if let Some(s) = slot {
                    self.keys.insert(k.to_vec(), Val::Stream(s));
                }
                r
            }
        }
    }

    fn exec(&mut self, args: &[Vec<u8>], now: u64) -> Reply {
        let name = String::from_utf8_lossy(&args[0]).to_ascii_lowercase();
        let key = args.get(1).cloned().unwrap_or_default();
        let cfg = self.cfg;
        match name.as_str() {
            "del" => Reply::Integer(i64::from(self.keys.remove(&key).is_some())),
            "set" => {
                self.keys.insert(key, Val::Str);
                Reply::ok()
            }
            "xadd" => match Xadd::parse(args) {
                Err(e) => err(e),
                Ok(a) => match self.with_mut(&key, |k| xadd(k, a, now, &cfg)) {
                    Ok(o) => o.reply.map_or_else(Reply::nil, |id| id.to_reply()),
                    Err(e) => err(e),
                },
            },
            "xtrim" => match Xtrim::parse(args) {
                Err(e) => err(e),
                Ok(a) => match self.with_mut(&key, |k| xtrim(k, &a, &cfg)) {
                    Ok(o) => Reply::Integer(o.reply as i64),
                    Err(e) => err(e),
                },
            },
            "xdel" => match Xdel::parse(args) {
                Err(e) => err(e),
                Ok(a) => match self.with_mut(&key, |k| xdel(k, &a)) {
                    Ok(o) => Reply::Integer(o.reply as i64),
                    Err(e) => err(e),
                },
            },
            "xlen" => {
                if args.len() != 2 {
                    return Reply::err("ERR wrong number of arguments for 'xlen' command");
                }
                match xlen(self.key(&key)) {
                    Ok(n) => Reply::Integer(n as i64),
                    Err(e) => err(e),
                }
            }
            "xrange" | "xrevrange" => match Xrange::parse(args, name == "xrevrange") {
                Err(e) => err(e),
                Ok(a) => match xrange(self.key(&key), &a) {
                    Ok(Some(v)) => entries_reply(&v),
                    Ok(None) => Reply::Array(None),
                    Err(e) => err(e),
                },
            },
            "xread" => match Xread::parse(args, false) {
                Err(e) => err(e),
                Ok(a) => {
                    let keys: Vec<Key<'_>> = a.keys.iter().map(|k| self.key(k)).collect();
                    match xread(&a, &keys) {
                        Ok(v) => xread_reply(
                            v.into_iter().map(|(k, e)| (k, entries_reply(&e))).collect(),
                        ),
                        Err(e) => err(e),
                    }
                }
            },
            "xreadgroup" => match Xread::parse(args, true) {
                Err(e) => err(e),
                Ok(a) => {
                    let from = {
                        let keys: Vec<Key<'_>> = a.keys.iter().map(|k| self.key(k)).collect();
                        match xread_resolve(&a, &keys) {
                            Ok(f) => f,
                            Err(e) => return err(e),
                        }
                    };
                    let mut out = Vec::new();
                    for (k, f) in a.keys.iter().zip(from) {
                        match self.with_mut(k, |km| xreadgroup_key(km, &a, f, now)) {
                            Ok(o) => {
                                if let Some(e) = o.reply {
                                    out.push((k.clone(), group_entries_reply(&e)));
                                }
                            }
                            Err(e) => return err(e),
                        }
                    }
                    xread_reply(out)
                }
            },
            "xgroup" => match Xgroup::parse(args) {
                Err(e) => err(e),
                Ok(a) => {
                    let k = a.key().map(<[u8]>::to_vec).unwrap_or_default();
                    match self.with_mut(&k, |km| xgroup(km, &a, now)) {
                        Ok(o) => o.reply.to_reply(),
                        Err(e) => err(e),
                    }
                }
            },
            "xsetid" => match Xsetid::parse(args) {
                Err(e) => err(e),
                Ok(a) => match self.with_mut(&key, |k| xsetid(k, &a)) {
                    Ok(_) => Reply::ok(),
                    Err(e) => err(e),
                },
            },
            "xack" => match Xack::parse(args) {
                Err(e) => err(e),
                Ok(a) => match self.with_mut(&key, |k| xack(k, &a)) {
                    Ok(o) => Reply::Integer(o.reply as i64),
                    Err(e) => err(e),
                },
            },
            "xpending" => match Xpending::parse(args) {
                Err(e) => err(e),
                Ok(a) => match xpending(self.key(&key), &key, &a, now) {
                    Ok(r) => r.to_reply(),
                    Err(e) => err(e),
                },
            },
            "xclaim" => match Xclaim::parse(args) {
                Err(e) => err(e),
                Ok(a) => match self.with_mut(&key, |k| xclaim(k, &key, &a, now)) {
                    Ok(o) => o.reply.to_reply(),
                    Err(e) => err(e),
                },
            },
            "xautoclaim" => match Xautoclaim::parse(args) {
                Err(e) => err(e),
                Ok(a) => match self.with_mut(&key, |k| xautoclaim(k, &key, &a, now)) {
                    Ok(o) => o.reply.to_reply(),
                    Err(e) => err(e),
                },
            },
            "xinfo" => match Xinfo::parse(args) {
                Err(e) => err(e),
                Ok(a) => {
                    let k = a.key().map(<[u8]>::to_vec).unwrap_or_default();
                    match xinfo(self.key(&k), &a, now) {
                        Ok(r) => r.to_reply(),
                        Err(e) => err(e),
                    }
                }
            },
            other => panic!("dispatcher: no {other}"),
        }
    }
}

// ---------------------------------------------------------------------
// Reply comparison
// ---------------------------------------------------------------------

fn to_value(r: &Reply) -> Value {
    match r {
        Reply::Simple(s) => Value::Simple(s.clone()),
        Reply::Error(e) => Value::Error(e.clone()),
        Reply::Integer(n) => Value::Int(*n),
        Reply::Bulk(b) => Value::Bulk(b.clone()),
        Reply::Array(a) => Value::Array(a.as_ref().map(|v| v.iter().map(to_value).collect())),
        Reply::Map(m) => Value::Array(Some(
            m.iter()
                .flat_map(|(k, v)| [to_value(k), to_value(v)])
                .collect(),
        )),
        Reply::Set(v) => Value::Array(Some(v.iter().map(to_value).collect())),
        Reply::Double(d) => Value::Bulk(Some(d.clone().into_bytes())),
        // Kinds the module never builds.
        other => Value::Simple(format!("unexpected {other:?}")),
    }
}

/// An integer that depends on wall time: only its presence is compared.
fn timeless(v: &mut Value) {
    if let Value::Int(_) = v {
        *v = Value::Simple("<time>".into());
    }
}

fn arr(v: &mut Value) -> Option<&mut Vec<Value>> {
    match v {
        Value::Array(Some(a)) => Some(a),
        _ => None,
    }
}

/// In a flat map, applies `f` to the value of field `name`.
fn in_map(v: &mut Value, name: &str, f: &mut dyn FnMut(&mut Value)) {
    if let Some(a) = arr(v) {
        let mut i = 0;
        while i + 1 < a.len() {
            if a[i] == Value::Bulk(Some(name.as_bytes().to_vec())) {
                f(&mut a[i + 1]);
            }
            i += 2;
        }
    }
}

/// Blanks the wall-time fields of a reply to `args`.
fn normalize(args: &[Vec<u8>], v: &mut Value) {
    let name = String::from_utf8_lossy(&args[0]).to_ascii_lowercase();
    let sub = args
        .get(1)
        .map(|s| String::from_utf8_lossy(s).to_ascii_lowercase())
        .unwrap_or_default();
    match (name.as_str(), sub.as_str()) {
        ("xpending", _) if args.len() > 3 => {
            if let Some(a) = arr(v) {
                for line in a {
                    if let Some(l) = arr(line) {
                        if let Some(idle) = l.get_mut(2) {
                            timeless(idle);
                        }
                    }
                }
            }
        }
        ("xinfo", "consumers") => {
            if let Some(a) = arr(v) {
                for c in a {
                    in_map(c, "idle", &mut timeless);
                }
            }
        }
        ("xinfo", "stream") if args.len() > 3 => {
            in_map(v, "groups", &mut |groups| {
                if let Some(gs) = arr(groups) {
                    for g in gs {
                        in_map(g, "pending", &mut |p| {
                            if let Some(ps) = arr(p) {
                                for e in ps {
                                    if let Some(e) = arr(e) {
                                        if let Some(t) = e.get_mut(2) {
                                            timeless(t);
                                        }
                                    }
                                }
                            }
                        });
                        in_map(g, "consumers", &mut |cs| {
                            if let Some(cs) = arr(cs) {
                                for c in cs {
                                    in_map(c, "seen-time", &mut timeless);
                                    in_map(c, "pending", &mut |p| {
                                        if let Some(ps) = arr(p) {
                                            for e in ps {
                                                if let Some(e) = arr(e) {
                                                    if let Some(t) = e.get_mut(1) {
                                                        timeless(t);
                                                    }
                                                }
                                            }
                                        }
                                    });
                                }
                            }
                        });
                    }
                }
            });
        }
        _ => {}
    }
}

/// A reply, readable.
fn show(v: &Value) -> String {
    match v {
        Value::Simple(s) => format!("+{s}"),
        Value::Error(e) => format!("-{e}"),
        Value::Int(n) => format!(":{n}"),
        Value::Bulk(None) | Value::Array(None) => "nil".into(),
        Value::Bulk(Some(b)) => format!("{:?}", String::from_utf8_lossy(b)),
        Value::Array(Some(a)) => format!("[{}]", a.iter().map(show).collect::<Vec<_>>().join(", ")),
        Value::Double(d) => format!(",{d}"),
    }
}

fn words(args: &[Vec<u8>]) -> String {
    args.iter()
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect::<Vec<_>>()
        .join(" ")
}

fn wall_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Both sides run `args`; their replies (normalized) must agree.
struct Pair {
    model: Model,
    redis: Resp,
    clock: u64,
    seed: u64,
    step: usize,
}

impl Pair {
    fn run(&mut self, args: &[Vec<u8>]) -> Value {
        self.step += 1;
        // A fake clock that keeps up with the wall clock, so that the
        // huge idle thresholds the generator uses split entries alike.
        self.clock = (self.clock + 1).max(wall_ms());
        let ours = self.model.exec(args, self.clock);
        let refs: Vec<&[u8]> = args.iter().map(|a| a.as_slice()).collect();
        let mut theirs = self.redis.cmd(&refs);
        let mut ours = to_value(&ours);
        normalize(args, &mut ours);
        let raw = theirs.clone();
        normalize(args, &mut theirs);
        if ours != theirs {
            self.print_layout(args.get(1).map_or(&[][..], |k| k.as_slice()));
        }
        assert!(
            ours == theirs,
            "seed {} step {}: {}\n ours: {}\nredis: {}",
            self.seed,
            self.step,
            words(args),
            show(&ours),
            show(&raw)
        );
        raw
    }
}

// ---------------------------------------------------------------------
// The generator
// ---------------------------------------------------------------------

struct Gen {
    r: SplitMix,
}

impl Gen {
    fn below(&mut self, n: usize) -> usize {
        self.r.below(n.max(1))
    }
    fn chance(&mut self, one_in: usize) -> bool {
        self.below(one_in) == 0
    }
    fn pick<'a>(&mut self, xs: &[&'a str]) -> &'a str {
        xs[self.below(xs.len())]
    }
}

const KEYS: [&str; 3] = ["s0", "s1", "s2"];
const GROUPS: [&str; 3] = ["g1", "g2", "g3"];
const CONSUMERS: [&str; 3] = ["alice", "bob", "carol"];

fn w(s: impl Into<String>) -> Vec<u8> {
    s.into().into_bytes()
}

/// An ID near the stream's entries: an entry's, a neighbour, or beyond.
fn some_id(g: &mut Gen, m: &Model, key: &str) -> String {
    let ids: Vec<StreamId> = m
        .stream(key.as_bytes())
        .map(|s| s.iter().map(|(id, _)| *id).collect())
        .unwrap_or_default();
    if ids.is_empty() || g.chance(5) {
        return format!("{}-{}", g.below(40), g.below(4));
    }
    let id = ids[g.below(ids.len())];
    match g.below(6) {
        0 => format!("{}-{}", id.ms, id.seq + 1),
        1 => format!("{}", id.ms),
        2 if id.seq > 0 => format!("{}-{}", id.ms, id.seq - 1),
        _ => id.to_string(),
    }
}

fn range_bound(g: &mut Gen, m: &Model, key: &str, start: bool) -> String {
    match g.below(8) {
        0 => if start { "-" } else { "+" }.into(),
        1 => format!("({}", some_id(g, m, key)),
        2 => g.pick(&["-", "+", "(-", "(+", "x", "1-x", "(0-0"]).into(),
        3 if !start => "(18446744073709551615-18446744073709551615".into(),
        _ => some_id(g, m, key),
    }
}

fn value(g: &mut Gen) -> String {
    match g.below(10) {
        0 => "x".repeat(60 + g.below(200)),
        1 if g.chance(4) => "y".repeat(4100),
        2 => format!("{}", g.below(100_000)),
        3 => format!("-{}", g.below(5000)),
        4 => "007".into(),
        _ => g.pick(&["a", "bb", "hello", "1", "0", "-0", ""]).into(),
    }
}

fn xadd_cmd(g: &mut Gen, m: &Model) -> Vec<Vec<u8>> {
    let key = if g.chance(30) { "str" } else { g.pick(&KEYS) };
    let mut v = vec![w("XADD"), w(key)];
    if g.chance(15) {
        v.push(w("NOMKSTREAM"));
    }
    if g.chance(6) {
        trim_args(g, m, key, &mut v);
    }
    let last = m
        .stream(key.as_bytes())
        .map(|s| s.last_id())
        .unwrap_or_default();
    let id = match g.below(20) {
        0 => "0-0".to_string(),
        1 => format!("{}-{}", last.ms, last.seq),
        2 => format!("{}-*", last.ms),
        3 => format!("{}-*", last.ms + 1),
        4 => "bad".into(),
        5 => format!("{}", last.ms + 1 + g.below(3) as u64),
        _ => format!(
            "{}-{}",
            last.ms + g.below(3) as u64,
            g.below(3) + last.seq as usize % 2 + 1
        ),
    };
    v.push(w(id));
    let same = g.chance(2);
    let n = if same { 1 } else { 1 + g.below(3) };
    for i in 0..n {
        let f = if same {
            "f".to_string()
        } else {
            g.pick(&["f", "a", "b", "c", "12", "name"]).to_string()
        };
        let f = if i == 0 && !same && g.chance(3) {
            "f".into()
        } else {
            f
        };
        v.push(w(f));
        v.push(w(value(g)));
    }
    if g.chance(40) {
        v.pop();
    }
    v
}

fn trim_args(g: &mut Gen, m: &Model, key: &str, v: &mut Vec<Vec<u8>>) {
    if g.chance(2) {
        v.push(w(g.pick(&["MAXLEN", "maxlen"])));
        match g.below(3) {
            0 => v.push(w("~")),
            1 => v.push(w("=")),
            _ => {}
        }
        v.push(w(match g.below(12) {
            0 => "-1".to_string(),
            1 => "x".to_string(),
            2..=5 => format!("{}", g.below(300)),
            _ => near_len(g, m, key),
        }));
    } else {
        v.push(w("MINID"));
        if g.chance(2) {
            v.push(w("~"));
        }
        v.push(w(some_id(g, m, key)));
    }
    if g.chance(3) {
        v.push(w("LIMIT"));
        v.push(w(format!("{}", g.below(250) as i64 - 2)));
    }
}

/// IDs pending in a group of `key` (mostly), or others.
fn pel_ids(g: &mut Gen, m: &Model, key: &str, group: &str, n: usize) -> Vec<Vec<u8>> {
    let pending: Vec<StreamId> = m
        .stream(key.as_bytes())
        .and_then(|s| s.group(group.as_bytes()))
        .map(|gr| gr.pel.keys().copied().collect())
        .unwrap_or_default();
    (0..n)
        .map(|_| {
            if pending.is_empty() || g.chance(4) {
                ids_of(g, m, key, 1).remove(0)
            } else {
                w(pending[g.below(pending.len())].to_string())
            }
        })
        .collect()
}

/// A MAXLEN threshold near the stream's length.
fn near_len(g: &mut Gen, m: &Model, key: &str) -> String {
    let len = m.stream(key.as_bytes()).map_or(0, |s| s.len()) as usize;
    format!("{}", len.saturating_sub(g.below(len / 2 + 3)))
}

fn ids_of(g: &mut Gen, m: &Model, key: &str, n: usize) -> Vec<Vec<u8>> {
    (0..n)
        .map(|_| {
            if g.chance(25) {
                w("bad-id")
            } else {
                w(some_id(g, m, key))
            }
        })
        .collect()
}

fn command(g: &mut Gen, m: &Model) -> Vec<Vec<u8>> {
    let key = if g.chance(40) { "str" } else { g.pick(&KEYS) };
    let group = g.pick(&GROUPS);
    let consumer = g.pick(&CONSUMERS);
    let c = g.below(100);
    let mut v: Vec<Vec<u8>> = match c {
        0..=29 => return xadd_cmd(g, m),
        30..=33 => {
            let mut v = vec![w("XDEL"), w(key)];
            let n = 1 + g.below(3);
            v.extend(ids_of(g, m, key, n));
            v
        }
        34..=37 => {
            let mut v = vec![w("XTRIM"), w(key)];
            if g.chance(20) {
                v.push(w("LIMIT"));
                v.push(w("5"));
            } else {
                trim_args(g, m, key, &mut v);
            }
            v
        }
        38..=43 => {
            let rev = g.chance(2);
            let (a, b) = (range_bound(g, m, key, !rev), range_bound(g, m, key, rev));
            let mut v = vec![
                w(if rev { "XREVRANGE" } else { "XRANGE" }),
                w(key),
                w(a),
                w(b),
            ];
            if g.chance(2) {
                v.push(w("COUNT"));
                v.push(w(g.pick(&["0", "1", "2", "5", "-1", "100", "x"])));
            }
            v
        }
        44 => vec![w("XLEN"), w(key)],
        45..=48 => {
            let mut v = vec![w("XGROUP"), w("CREATE"), w(key), w(group)];
            v.push(w(match g.below(4) {
                0 => "$".to_string(),
                1 => "0".to_string(),
                _ => some_id(g, m, key),
            }));
            if g.chance(3) {
                v.push(w("MKSTREAM"));
            }
            if g.chance(4) {
                v.push(w("ENTRIESREAD"));
                v.push(w(g.pick(&["0", "3", "-1", "-2", "100"])));
            }
            v
        }
        49..=50 => {
            let mut v = vec![w("XGROUP"), w("SETID"), w(key), w(group)];
            v.push(w(match g.below(4) {
                0 => "$".to_string(),
                1 => "-".to_string(),
                _ => some_id(g, m, key),
            }));
            if g.chance(3) {
                v.push(w("ENTRIESREAD"));
                v.push(w(g.pick(&["0", "2", "-1", "50"])));
            }
            v
        }
        51 => vec![w("XGROUP"), w("DESTROY"), w(key), w(group)],
        52 => vec![
            w("XGROUP"),
            w("CREATECONSUMER"),
            w(key),
            w(group),
            w(consumer),
        ],
        53 => vec![w("XGROUP"), w("DELCONSUMER"), w(key), w(group), w(consumer)],
        54..=63 => {
            let mut v = vec![w("XREADGROUP"), w("GROUP"), w(group), w(consumer)];
            if g.chance(2) {
                v.push(w("COUNT"));
                v.push(w(g.pick(&["1", "2", "3", "10", "0", "-5"])));
            }
            if g.chance(5) {
                v.push(w("NOACK"));
            }
            v.push(w("STREAMS"));
            let two = g.chance(5);
            v.push(w(key));
            let key2 = g.pick(&KEYS);
            if two {
                v.push(w(key2));
            }
            for k in if two { vec![key, key2] } else { vec![key] } {
                v.push(w(match g.below(5) {
                    0..=2 => ">".to_string(),
                    3 => "0".to_string(),
                    _ => some_id(g, m, k),
                }));
            }
            v
        }
        64..=66 => {
            let mut v = vec![w("XREAD")];
            if g.chance(2) {
                v.push(w("COUNT"));
                v.push(w(g.pick(&["1", "2", "5", "0"])));
            }
            v.push(w("STREAMS"));
            let key2 = g.pick(&KEYS);
            v.push(w(key));
            v.push(w(key2));
            v.push(w(if g.chance(3) {
                "$".into()
            } else {
                some_id(g, m, key)
            }));
            v.push(w(if g.chance(3) {
                "0".into()
            } else {
                some_id(g, m, key2)
            }));
            v
        }
        67..=71 => {
            let mut v = vec![w("XACK"), w(key), w(group)];
            let n = 1 + g.below(3);
            v.extend(pel_ids(g, m, key, group, n));
            v
        }
        72..=75 => {
            let mut v = vec![w("XPENDING"), w(key), w(group)];
            if g.chance(3) {
                return v;
            }
            if g.chance(3) {
                v.push(w("IDLE"));
                v.push(w(g.pick(&["0", "1000000000000", "100000000000000"])));
            }
            v.push(w(range_bound(g, m, key, true)));
            v.push(w(range_bound(g, m, key, false)));
            v.push(w(g.pick(&["10", "1", "0", "-3", "100"])));
            if g.chance(2) {
                v.push(w(consumer));
            }
            v
        }
        76..=81 => {
            let mut v = vec![w("XCLAIM"), w(key), w(group), w(consumer)];
            v.push(w(g.pick(&[
                "0",
                "0",
                "1000000000000",
                "100000000000000",
                "-5",
                "x",
            ])));
            let n = 1 + g.below(3);
            v.extend(pel_ids(g, m, key, group, n));
            for _ in 0..g.below(3) {
                match g.below(7) {
                    0 => v.push(w("FORCE")),
                    1 => v.push(w("JUSTID")),
                    2 => {
                        v.push(w("IDLE"));
                        v.push(w(g.pick(&["0", "5000", "-5", "x"])));
                    }
                    3 => {
                        v.push(w("TIME"));
                        v.push(w(g.pick(&["1000", "2000", "-1", "99999999999999"])));
                    }
                    4 => {
                        v.push(w("RETRYCOUNT"));
                        v.push(w(g.pick(&["0", "7", "-1"])));
                    }
                    5 => {
                        v.push(w("LASTID"));
                        v.push(w(some_id(g, m, key)));
                    }
                    _ => v.push(w(g.pick(&["BOGUS", "5-5"]))),
                }
            }
            v
        }
        82..=85 => {
            let mut v = vec![w("XAUTOCLAIM"), w(key), w(group), w(consumer)];
            v.push(w(g.pick(&[
                "0",
                "0",
                "1000000000000",
                "100000000000000",
                "x",
            ])));
            v.push(w(range_bound(g, m, key, true)));
            if g.chance(2) {
                v.push(w("COUNT"));
                v.push(w(g.pick(&["1", "2", "3", "10", "0"])));
            }
            if g.chance(3) {
                v.push(w("JUSTID"));
            }
            v
        }
        86..=89 => {
            let mut v = vec![w("XINFO"), w("STREAM"), w(key)];
            match g.below(4) {
                0 => {}
                1 => v.push(w("FULL")),
                2 => {
                    v.push(w("FULL"));
                    v.push(w("COUNT"));
                    v.push(w(g.pick(&["0", "1", "3", "-1"])));
                }
                _ => v.push(w("FUL")),
            }
            v
        }
        90..=91 => vec![w("XINFO"), w("GROUPS"), w(key)],
        92..=93 => vec![w("XINFO"), w("CONSUMERS"), w(key), w(group)],
        94..=95 => {
            let last = m
                .stream(key.as_bytes())
                .map(|s| s.last_id())
                .unwrap_or_default();
            let mut v = vec![w("XSETID"), w(key)];
            v.push(w(match g.below(3) {
                0 => some_id(g, m, key),
                _ => format!("{}-{}", last.ms + g.below(2) as u64, last.seq + 1),
            }));
            if g.chance(2) {
                v.push(w("ENTRIESADDED"));
                v.push(w(g.pick(&["0", "5", "500", "-1"])));
            }
            if g.chance(2) {
                v.push(w("MAXDELETEDID"));
                v.push(w(some_id(g, m, key)));
            }
            v
        }
        96 if g.chance(3) => vec![w("DEL"), w(key)],
        _ => vec![w("XLEN"), w(key)],
    };
    if g.chance(60) && v.len() > 3 {
        v.truncate(2 + g.below(v.len() - 2));
    }
    v
}

fn differential(seed: u64, steps: usize, extra: &[&str], cfg: StreamConfig) {
    let redis = RealRedis::start_with(extra);
    let mut p = Pair {
        model: Model::new(cfg),
        redis: redis.conn(),
        clock: wall_ms(),
        seed,
        step: 0,
    };
    p.run(&[w("SET"), w("str"), w("v")]);
    let mut g = Gen {
        r: SplitMix::new(seed),
    };
    let stop: Option<usize> = std::env::var("XLANE_STREAM_DEBUG_STEP")
        .ok()
        .and_then(|v| v.parse().ok());
    for i in 0..steps {
        let args = command(&mut g, &p.model);
        if stop == Some(p.step + 1) {
            let k = args.get(1).cloned().unwrap_or_default();
            eprintln!("next: {}", words(&args));
            if let Some(s) = p.model.stream(&k) {
                eprintln!(" ours: {:?}", our_nodes(s));
            }
            if let Value::Bulk(Some(d)) = p.redis.cmd(&[b"DUMP", &k]) {
                if d.first() == Some(&19) {
                    eprintln!("redis: {:?}", redis_nodes(&d));
                }
            }
        }
        p.run(&args);
        if i % 50 == 49 {
            for k in KEYS {
                p.run(&[w("XINFO"), w("STREAM"), w(k), w("FULL"), w("COUNT"), w("0")]);
                p.check_layout(k.as_bytes());
            }
        }
    }
}

/// The fixed seeds, plus `XLANE_STREAM_SEEDS` more from `base` when that
/// variable is set (for longer exploratory runs); `XLANE_STREAM_SEED=n`
/// runs seed `n` only (with `XLANE_STREAM_DEBUG_STEP=k`, the layout of the
/// key of step `k` and both servers' view of it are printed first).
fn seeds(fixed: &[u64], base: u64) -> Vec<u64> {
    let var = |name: &str| std::env::var(name).ok().and_then(|v| v.parse::<u64>().ok());
    if let Some(one) = var("XLANE_STREAM_SEED") {
        return vec![one];
    }
    let extra = var("XLANE_STREAM_SEEDS").unwrap_or(0);
    fixed.iter().copied().chain(base..base + extra).collect()
}

#[test]
fn random_commands_match_redis_default_nodes() {
    for seed in seeds(&[1, 2, 3], 1000) {
        differential(seed, 4000, &[], StreamConfig::default());
    }
}

#[test]
fn random_commands_match_redis_small_nodes() {
    for seed in seeds(&[11, 12, 13], 2000) {
        let cfg = StreamConfig {
            node_max_entries: 5,
            node_max_bytes: 300,
        };
        differential(
            seed,
            4000,
            &[
                "--stream-node-max-entries",
                "5",
                "--stream-node-max-bytes",
                "300",
            ],
            cfg,
        );
    }
}

// ---------------------------------------------------------------------
// The node model: approximate trimming and the radix tree
// ---------------------------------------------------------------------

/// A number whose listpack integer encoding is at an edge.
fn edge_number(g: &mut Gen) -> String {
    let n: i64 = *[
        0,
        127,
        128,
        -1,
        4095,
        4096,
        -4096,
        -4097,
        32767,
        32768,
        -32769,
        8_388_607,
        8_388_608,
        2_147_483_647,
        2_147_483_648,
        -2_147_483_649,
        i64::MAX,
        i64::MIN,
    ]
    .get(g.below(18))
    .unwrap_or(&0);
    n.to_string()
}

fn node_value(g: &mut Gen) -> String {
    match g.below(12) {
        0 => edge_number(g),
        1 => "v".repeat(60 + g.below(10)),
        2 => "w".repeat(4090 + g.below(10)),
        3 => "z".repeat(100 + g.below(400)),
        4 => "18446744073709551616".into(),
        5 => "-0".into(),
        _ => "x".repeat(g.below(12)),
    }
}

/// Long runs of XADD (IDs with small and huge gaps, fields like the
/// node's master entry or not, values of every listpack size class),
/// XDEL, and trims exact and approximate (with and without LIMIT), with
/// XLEN after each and XINFO STREAM often: node boundaries, approximate
/// trimming and the radix tree must come out as Redis's.
fn node_model(seed: u64, steps: usize, extra: &[&str], cfg: StreamConfig) {
    let redis = RealRedis::start_with(extra);
    let mut p = Pair {
        model: Model::new(cfg),
        redis: redis.conn(),
        clock: wall_ms(),
        seed,
        step: 0,
    };
    let mut g = Gen {
        r: SplitMix::new(seed),
    };
    for i in 0..steps {
        let s = p.model.stream(b"n");
        let last = s.map(|s| s.last_id()).unwrap_or_default();
        let len = s.map_or(0, |s| s.len()) as usize;
        let ids: Vec<StreamId> = s
            .map(|s| s.iter().map(|(id, _)| *id).collect())
            .unwrap_or_default();
        let mut v = match g.below(10) {
            0..=6 => {
                let mut v = vec![w("XADD"), w("n")];
                if g.chance(8) {
                    v.push(w("MAXLEN"));
                    v.push(w("~"));
                    v.push(w(format!("{}", len.saturating_sub(g.below(len + 1)))));
                    if g.chance(2) {
                        v.push(w("LIMIT"));
                        v.push(w(format!("{}", g.below(300))));
                    }
                }
                let (ms, seq) = match g.below(6) {
                    0 => (last.ms, last.seq + 1),
                    1 => (last.ms + 1, 0),
                    2 => (last.ms + 1 + g.below(5000) as u64, g.below(3) as u64),
                    3 => (
                        last.ms + 100_000 + g.below(10_000_000) as u64,
                        g.below(200_000) as u64,
                    ),
                    4 => (last.ms, last.seq + 1 + g.below(1 << 20) as u64),
                    _ => (last.ms + (1u64 << (20 + g.below(20))), 0),
                };
                v.push(w(format!("{ms}-{seq}")));
                let master = g.chance(2);
                let n = if master { 2 } else { 1 + g.below(4) };
                for k in 0..n {
                    let f = if master {
                        ["f1", "f2"][k].to_string()
                    } else {
                        g.pick(&["f1", "f2", "x", "123", "long-field-name-here"])
                            .to_string()
                    };
                    v.push(w(f));
                    v.push(w(node_value(&mut g)));
                }
                v
            }
            8 if !ids.is_empty() && g.chance(3) => {
                // Delete the top entries and lower the last ID below them:
                // Redis then appends below deleted entries in a listpack.
                let k = 1 + g.below(3).min(ids.len() - 1);
                let mut del = vec![w("XDEL"), w("n")];
                for id in &ids[ids.len() - k..] {
                    del.push(w(id.to_string()));
                }
                p.run(&del);
                let top = ids.len().checked_sub(k + 1).map(|i| ids[i]);
                vec![
                    w("XSETID"),
                    w("n"),
                    w(top.map_or("0-1".to_string(), |t| t.to_string())),
                ]
            }
            7 if !ids.is_empty() => {
                let mut v = vec![w("XDEL"), w("n")];
                for _ in 0..1 + g.below(6) {
                    v.push(w(ids[g.below(ids.len())].to_string()));
                }
                v
            }
            _ => {
                let mut v = vec![w("XTRIM"), w("n")];
                let approx = !g.chance(4);
                if g.chance(2) || ids.is_empty() {
                    v.push(w("MAXLEN"));
                    if approx {
                        v.push(w("~"));
                    }
                    v.push(w(format!("{}", len.saturating_sub(g.below(len / 3 + 2)))));
                } else {
                    v.push(w("MINID"));
                    if approx {
                        v.push(w("~"));
                    }
                    v.push(w(ids[g.below(ids.len())].to_string()));
                }
                if approx && g.chance(2) {
                    v.push(w("LIMIT"));
                    v.push(w(format!("{}", g.below(250))));
                }
                v
            }
        };
        p.run(&std::mem::take(&mut v));
        p.run(&[w("XLEN"), w("n")]);
        if i % 10 == 9 {
            p.run(&[w("XINFO"), w("STREAM"), w("n")]);
            p.check_layout(b"n");
        }
    }
    p.run(&[
        w("XINFO"),
        w("STREAM"),
        w("n"),
        w("FULL"),
        w("COUNT"),
        w("0"),
    ]);
}

#[test]
fn node_model_matches_redis() {
    // (stream-node-max-entries, stream-node-max-bytes).
    let configs: [(i64, u64); 4] = [(100, 4096), (7, 0), (0, 700), (3, 4096)];
    for seed in seeds(&[21], 3000) {
        for (k, (entries, bytes)) in configs.iter().enumerate() {
            let (e, b) = (entries.to_string(), bytes.to_string());
            node_model(
                seed * 10 + k as u64,
                3000,
                &[
                    "--stream-node-max-entries",
                    &e,
                    "--stream-node-max-bytes",
                    &b,
                ],
                StreamConfig {
                    node_max_entries: *entries,
                    node_max_bytes: *bytes,
                },
            );
        }
    }
}

// ---------------------------------------------------------------------
// `*` IDs: the same structure, IDs from each side's clock
// ---------------------------------------------------------------------

/// Replaces each stream ID in a reply by its order of first appearance
/// on that side (IDs from `*` differ between the two clocks, their order
/// does not), and the radix tree's node count (it depends on the IDs'
/// bits) by a placeholder.
fn ordinals(v: &mut Value, seen: &mut BTreeMap<Vec<u8>, usize>) {
    match v {
        Value::Bulk(Some(b)) => {
            let t = String::from_utf8_lossy(b).into_owned();
            let is_id = t
                .split_once('-')
                .is_some_and(|(a, c)| a.parse::<u64>().is_ok() && c.parse::<u64>().is_ok());
            if is_id {
                let n = seen.len();
                let k = *seen.entry(b.clone()).or_insert(n);
                *v = Value::Simple(format!("#{k}"));
            }
        }
        Value::Array(Some(a)) => {
            let mut i = 0;
            while i < a.len() {
                if a[i] == Value::Bulk(Some(b"radix-tree-nodes".to_vec())) && i + 1 < a.len() {
                    a[i + 1] = Value::Simple("<nodes>".into());
                }
                ordinals(&mut a[i], seen);
                i += 1;
            }
        }
        _ => {}
    }
}

#[test]
fn auto_ids_match_redis_structurally() {
    let seed = 31;
    let redis = RealRedis::start();
    let mut conn = redis.conn();
    let mut model = Model::new(StreamConfig::default());
    let mut g = Gen {
        r: SplitMix::new(seed),
    };
    let (mut seen_ours, mut seen_theirs) = (BTreeMap::new(), BTreeMap::new());
    // Each side's IDs by ordinal, to address entries.
    let mut clock = wall_ms();
    for step in 0..3000 {
        // A fake clock: sometimes still, sometimes ahead, sometimes behind
        // the last ID (a clock that went back).
        clock = match g.below(4) {
            0 => clock,
            1 => clock.saturating_sub(5),
            _ => clock + g.below(3) as u64,
        };
        let len = model.stream(b"a").map_or(0, |s| s.len()) as usize;
        let template: Vec<String> = match g.below(10) {
            0..=5 => {
                let mut v = vec!["XADD".into(), "a".into()];
                if g.chance(5) {
                    v.extend([
                        "MAXLEN".into(),
                        "~".into(),
                        format!("{}", len.saturating_sub(g.below(50))),
                    ]);
                }
                v.extend(["*".into(), "f".into(), format!("{}", g.below(1000))]);
                v
            }
            6 => vec!["XLEN".into(), "a".into()],
            7 => vec![
                "XRANGE".into(),
                "a".into(),
                "-".into(),
                "+".into(),
                "COUNT".into(),
                format!("{}", 1 + g.below(3)),
            ],
            8 => vec!["XINFO".into(), "STREAM".into(), "a".into()],
            _ => vec![
                "XDEL".into(),
                "a".into(),
                format!("@{}", g.below(seen_ours.len().max(1))),
            ],
        };
        // `@k`: the k-th ID of each side.
        let side = |seen: &BTreeMap<Vec<u8>, usize>| -> Vec<Vec<u8>> {
            template
                .iter()
                .map(
                    |t| match t.strip_prefix('@').and_then(|k| k.parse::<usize>().ok()) {
                        Some(k) => seen
                            .iter()
                            .find(|(_, &n)| n == k)
                            .map_or(b"0-1".to_vec(), |(id, _)| id.clone()),
                        None => t.clone().into_bytes(),
                    },
                )
                .collect()
        };
        let (ours_args, theirs_args) = (side(&seen_ours), side(&seen_theirs));
        let mut ours = to_value(&model.exec(&ours_args, clock));
        let refs: Vec<&[u8]> = theirs_args.iter().map(|a| a.as_slice()).collect();
        let mut theirs = conn.cmd(&refs);
        ordinals(&mut ours, &mut seen_ours);
        ordinals(&mut theirs, &mut seen_theirs);
        assert!(
            ours == theirs,
            "seed {seed} step {step}: {}\n ours: {}\nredis: {}",
            words(&theirs_args),
            show(&ours),
            show(&theirs)
        );
    }
}

// ---------------------------------------------------------------------
// Hand-picked cases
// ---------------------------------------------------------------------

/// Edge cases, each compared with Redis: ID forms (C-string and
/// `strtoull` quirks included), bounds, errors of every command in
/// Redis's order, NUL bytes and newlines in names, lag and entries-read
/// through deletions and SETID.
#[test]
fn edge_cases_match_redis() {
    let redis = RealRedis::start();
    let mut p = Pair {
        model: Model::new(StreamConfig::default()),
        redis: redis.conn(),
        clock: wall_ms(),
        seed: 0,
        step: 0,
    };
    let lines: &[&[&str]] = &[
        &["SET", "str", "x"],
        &["XADD", "e", " 5-1", "f", "v"],
        &["XADD", "e", "+6", "f", "v"],
        &["XADD", "e", "7-+1", "f", "v"],
        &["XADD", "e", "8- 2", "f", "v"],
        &["XADD", "e", "9-05", "f", "v"],
        &["XADD", "e", "10--5", "f", "v"],
        &["XADD", "e", "11--05", "f", "v"],
        &["XADD", "e", "12-0x1", "f", "v"],
        &["XADD", "e", "013-1", "f", "v"],
        &["XADD", "e", "15-18446744073709551616", "f", "v"],
        &["XADD", "e", "16-", "f", "v"],
        &["XADD", "e", "-17", "f", "v"],
        &["XADD", "e", "18-*", "f", "v"],
        &["XADD", "e", "18-*", "f", "v"],
        &["XADD", "e", "17-*", "f", "v"],
        &["XADD", "e", "19-*x", "f", "v"],
        &["XADD", "e", "*-1", "f", "v"],
        &["XADD", "e", "20-1-2", "f", "v"],
        &["XADD", "e", "21.5", "f", "v"],
        &["XADD", "e", "30\0junk", "f", "v"],
        &["XADD", "e", "-", "f", "v"],
        &["XADD", "e", "+", "f", "v"],
        &["XADD", "e", "0-0", "f", "v"],
        &["XADD", "e", "0", "f", "v"],
        &["XADD", "e", "MAXLEN", "f", "v"],
        &["XADD", "e", "MAXLEN", "1", "MINID", "1", "*", "f", "v"],
        &["XADD", "e", "LIMIT", "5", "*", "f", "v"],
        &["XADD", "e", "LIMIT", "0", "40", "f", "v"],
        &["XADD", "e", "MAXLEN", "~", "1", "LIMIT", "x", "*", "f", "v"],
        &["XADD", "e", "MAXLEN", "1", "LIMIT", "1", "*", "f", "v"],
        &["XADD", "e", "NOMKSTREAM", "41", "f"],
        &["XADD", "missing", "NOMKSTREAM", "1-1", "f", "v"],
        &["XADD", "str", "1-1", "f", "v"],
        &["XADD", "str", "0-0", "f", "v"],
        &["XADD", "str", "bad", "f", "v"],
        &["XADD", "e", "41", "a", "1", "a", "2"],
        &["XRANGE", "e", "-", "+"],
        &["XRANGE", "e", "(", "+"],
        &["XRANGE", "e", "(-", "+"],
        &["XRANGE", "e", "-", "(+"],
        &["XRANGE", "e", "(9-5", "(41"],
        &["XRANGE", "e", "9", "9"],
        &["XRANGE", "e", "+", "-"],
        &["XRANGE", "e", "-", "+", "COUNT"],
        &["XRANGE", "e", "-", "+", "COUNT", "0"],
        &["XRANGE", "e", "-", "+", "COUNT", "-3"],
        &["XRANGE", "e", "-", "+", "COUNT", "2", "COUNT", "1"],
        &["XREVRANGE", "e", "+", "-", "COUNT", "2"],
        &["XREVRANGE", "e", "(41", "(5-1"],
        &[
            "XRANGE",
            "e",
            "(18446744073709551615-18446744073709551615",
            "+",
        ],
        &["XRANGE", "e", "-", "(0-0"],
        &["XRANGE", "str", "x", "+"],
        &["XRANGE", "str", "-", "+"],
        &["XRANGE", "nokey", "-", "+"],
        &["XLEN", "e"],
        &["XLEN", "str"],
        &["XDEL", "nokey", "bad"],
        &["XDEL", "str", "bad"],
        &["XDEL", "e", "5-1", "bad"],
        &["XDEL", "e", "5-1", "5-1", "6"],
        &["XINFO", "STREAM", "e"],
        &["XTRIM", "e"],
        &["XTRIM", "e", "LIMIT", "1"],
        &["XTRIM", "e", "MAXLEN", "~"],
        &["XTRIM", "e", "MAXLEN", "=", "5"],
        &["XTRIM", "e", "NOMKSTREAM", "MAXLEN", "5"],
        &["XTRIM", "nokey", "MAXLEN", "x"],
        &["XTRIM", "nokey", "MAXLEN", "1"],
        &["XTRIM", "e", "MINID", "-"],
        &["XTRIM", "e", "MINID", "10"],
        // Groups: lag and entries-read through the 7.0 rules.
        &["XGROUP", "CREATE", "e", "g", "0"],
        &["XGROUP", "CREATE", "e", "g", "0"],
        &["XGROUP", "CREATE", "e", "h", "$", "ENTRIESREAD", "3"],
        &["XGROUP", "CREATE", "e", "i\r\nj", "-"],
        &["XGROUP", "CREATE", "e", "i\r\nj", "0"],
        &["XINFO", "CONSUMERS", "e", "zz\r\nq"],
        &["XPENDING", "k\0x", "a\nb"],
        &["XREADGROUP", "GROUP", "a\rb", "c", "STREAMS", "e", ">"],
        &["XGROUP", "SETID", "e", "a\r\nb\0c", "0"],
        &["XINFO", "GROUPS", "e"],
        &[
            "XGROUP",
            "CREATE",
            "nokey",
            "g",
            "$",
            "MKSTREAM",
            "ENTRIESREAD",
            "-2",
        ],
        &["XGROUP", "CREATE", "nokey", "g", "x", "MKSTREAM"],
        &["XGROUP", "CREATE", "nokey", "g", "0"],
        &["XGROUP", "CREATE", "str", "g", "0", "MKSTREAM"],
        &[
            "XGROUP", "CREATE", "e", "g", "0", "MKSTREAM", "MKSTREAM", "MKSTREAM", "MKSTREAM",
        ],
        &["XGROUP", "CREATE", "e", "g", "0", "FOO"],
        &["XGROUP", "SETID", "e", "zz", "0"],
        &["XGROUP", "SETID", "e", "g", "0", "MKSTREAM"],
        &["XGROUP", "SETID", "e", "g", "0", "ENTRIESREAD"],
        &[
            "XGROUP",
            "SETID",
            "e",
            "g",
            "0",
            "ENTRIESREAD",
            "1",
            "ENTRIESREAD",
            "2",
        ],
        &["XGROUP", "CREATECONSUMER", "e", "zz", "c"],
        &["XGROUP", "DESTROY", "nokey", "g"],
        &["XGROUP", "FOO", "e", "g"],
        &["XGROUP"],
        &["XGROUP", "HELP"],
        &["XGROUP", "HELP", "x"],
        &["XGROUP", "create"],
        &["XINFO", "GROUPS", "e"],
        &[
            "XREADGROUP",
            "GROUP",
            "g",
            "c1",
            "COUNT",
            "2",
            "STREAMS",
            "e",
            ">",
        ],
        &["XINFO", "GROUPS", "e"],
        &["XDEL", "e", "13-1"],
        &["XINFO", "GROUPS", "e"],
        &["XREADGROUP", "GROUP", "g", "c1", "STREAMS", "e", ">"],
        &["XINFO", "GROUPS", "e"],
        &["XREADGROUP", "GROUP", "g", "c2", "STREAMS", "e", ">"],
        &["XREADGROUP", "GROUP", "g", "c2", "STREAMS", "e", "0"],
        &[
            "XREADGROUP",
            "GROUP",
            "g",
            "c1",
            "COUNT",
            "1",
            "STREAMS",
            "e",
            "0",
        ],
        &[
            "XREADGROUP",
            "GROUP",
            "g",
            "c1",
            "STREAMS",
            "e",
            "18446744073709551615-18446744073709551615",
        ],
        &["XREADGROUP", "GROUP", "g", "c1", "STREAMS", "e", "$"],
        &["XREADGROUP", "GROUP", "zz", "c1", "STREAMS", "e", ">"],
        &["XREADGROUP", "GROUP", "g", "c1", "STREAMS", "nokey", ">"],
        &["XREADGROUP", "GROUP", "g", "c1", "STREAMS", "str", ">"],
        &[
            "XREADGROUP",
            "GROUP",
            "g",
            "c1",
            "STREAMS",
            "e",
            "nokey",
            ">",
        ],
        &["XREADGROUP", "GROUP", "g", "STREAMS", "e", ">"],
        &["XREADGROUP", "COUNT", "1", "STREAMS", "e", ">"],
        &[
            "XREADGROUP",
            "GROUP",
            "g",
            "c1",
            "BLOCK",
            "-1",
            "STREAMS",
            "e",
            ">",
        ],
        &[
            "XREADGROUP",
            "GROUP",
            "g",
            "c1",
            "BLOCK",
            "x",
            "STREAMS",
            "e",
            ">",
        ],
        &["XREAD", "GROUP", "g", "c", "STREAMS", "e", ">"],
        &["XREAD", "NOACK", "STREAMS", "e", ">"],
        &["XREAD", "STREAMS", "e", ">"],
        &["XREAD", "STREAMS", "e", "$"],
        &["XREAD", "STREAMS", "e", "nokey", "0", "0"],
        &["XREAD", "COUNT", "2", "STREAMS", "e", "nokey", "0", "$"],
        &["XREAD", "STREAMS", "e", "-"],
        &["XREAD", "BLOCK", "0", "COUNT", "1", "STREAMS", "e", "0"],
        &["XREAD", "STREAMS", "e"],
        &["XREAD", "STREAMS"],
        &["XREAD", "COUNT", "1", "e", "0"],
        &["XDEL", "e", "41-0"],
        &["XREADGROUP", "GROUP", "g", "c1", "STREAMS", "e", "0"],
        &["XPENDING", "e", "g"],
        &["XPENDING", "e", "g", "-", "+", "10"],
        &["XPENDING", "e", "g", "-", "+", "10", "c2"],
        &["XPENDING", "e", "g", "-", "+", "10", "nobody"],
        &["XPENDING", "e", "g", "-", "+", "10", "c1", "extra"],
        &["XPENDING", "e", "g", "IDLE", "0", "-", "+", "10"],
        &["XPENDING", "e", "g", "IDLE", "x", "-", "+", "10"],
        &["XPENDING", "e", "g", "IDLE", "10", "-", "+"],
        &["XPENDING", "e", "g", "-", "+"],
        &["XPENDING", "e", "g", "-", "+", "x"],
        &["XPENDING", "e", "g", "x", "+", "1"],
        &["XPENDING", "e", "g", "(+", "+", "1"],
        &["XPENDING", "e", "zz"],
        &["XPENDING", "str", "g"],
        &["XPENDING", "nokey", "g", "x", "+", "1"],
        &["XPENDING", "e", "h"],
        &["XCLAIM", "e", "g", "c3", "0", "7-1", "8-2", "JUSTID"],
        &[
            "XCLAIM",
            "e",
            "g",
            "c3",
            "0",
            "7-1",
            "RETRYCOUNT",
            "9",
            "TIME",
            "1000",
        ],
        &["XCLAIM", "e", "g", "c3", "0", "41-0"],
        &["XCLAIM", "e", "g", "c3", "0", "9-5", "FORCE"],
        &[
            "XCLAIM", "e", "g", "c3", "0", "9-5", "18-0", "FORCE", "JUSTID", "LASTID", "100-0",
        ],
        &["XCLAIM", "e", "g", "c3", "x", "9-5"],
        &["XCLAIM", "e", "g", "c3", "0", "9-5", "IDLE"],
        &["XCLAIM", "e", "g", "c3", "0", "9-5", "BOGUS\r\nx"],
        &["XCLAIM", "e", "g", "c3", "0", "9-5", "JUSTID", "9-5"],
        &["XCLAIM", "e", "zz", "c3", "x", "bad"],
        &["XCLAIM", "str", "zz", "c3", "x", "bad"],
        &["XCLAIM", "e", "g", "c3", "100000000000000", "7-1"],
        &[
            "XCLAIM",
            "e",
            "g",
            "c3",
            "1000000000000",
            "7-1",
            "IDLE",
            "5000",
        ],
        &[
            "XPENDING",
            "e",
            "g",
            "IDLE",
            "1000000000000",
            "-",
            "+",
            "10",
        ],
        &["XINFO", "STREAM", "e", "FULL"],
        &["XAUTOCLAIM", "e", "g", "c4", "0", "0", "COUNT", "1"],
        &[
            "XAUTOCLAIM",
            "e",
            "g",
            "c4",
            "0",
            "0",
            "COUNT",
            "2",
            "JUSTID",
        ],
        &["XAUTOCLAIM", "e", "g", "c4", "0", "(9-5"],
        &["XAUTOCLAIM", "e", "g", "c4", "0", "-", "COUNT", "0"],
        &[
            "XAUTOCLAIM",
            "e",
            "g",
            "c4",
            "0",
            "-",
            "COUNT",
            "576460752303423488",
        ],
        &["XAUTOCLAIM", "e", "g", "c4", "x", "-"],
        &["XAUTOCLAIM", "e", "zz", "c4", "0", "-"],
        &["XAUTOCLAIM", "str", "zz", "c4", "0", "-", "BOGUS"],
        &["XAUTOCLAIM", "str", "zz", "c4", "0", "-"],
        &["XAUTOCLAIM", "e", "g", "c4", "1000000000000", "-"],
        &["XDEL", "e", "7-1", "8-2"],
        &["XAUTOCLAIM", "e", "g", "c5", "0", "-", "COUNT", "1"],
        &["XAUTOCLAIM", "e", "g", "c5", "0", "-"],
        &["XACK", "e", "g", "9-5", "bad"],
        &["XACK", "nokey", "g", "bad"],
        &["XACK", "e", "zz", "bad"],
        &["XACK", "str", "g", "bad"],
        &["XACK", "e", "g", "9-5", "9-5", "18-0"],
        &["XINFO", "CONSUMERS", "e", "g"],
        &["XINFO", "CONSUMERS", "e", "zz\0x"],
        &["XGROUP", "DELCONSUMER", "e", "g", "c4"],
        &["XGROUP", "DELCONSUMER", "e", "g", "nobody"],
        &["XGROUP", "CREATECONSUMER", "e", "g", "c9"],
        &["XGROUP", "CREATECONSUMER", "e", "g", "c9"],
        &["XGROUP", "SETID", "e", "g", "+", "ENTRIESREAD", "2"],
        &["XINFO", "GROUPS", "e"],
        &["XGROUP", "SETID", "e", "g", "$"],
        &["XINFO", "GROUPS", "e"],
        &["XGROUP", "DESTROY", "e", "h"],
        &["XGROUP", "DESTROY", "e", "h"],
        &["XINFO", "STREAM", "e", "FULL", "COUNT", "1"],
        &["XINFO", "STREAM", "e", "FULL", "COUNT", "-5"],
        &["XINFO", "STREAM", "e", "FULL", "COUNT"],
        &["XINFO", "STREAM", "e", "FULL", "LIMIT", "1"],
        &["XINFO", "STREAM", "nokey", "FULL", "LIMIT", "1"],
        &["XINFO", "STREAM", "str"],
        &["XINFO", "FOO", "e"],
        &["XINFO", "HELP"],
        &["XINFO"],
        &["XINFO", "GROUPS"],
        // XSETID.
        &["XSETID", "e", "1-1"],
        &["XSETID", "e", "100-0", "ENTRIESADDED", "1"],
        &["XSETID", "e", "100-0", "ENTRIESADDED", "-1"],
        &["XSETID", "e", "100-0", "MAXDELETEDID", "200-0"],
        &["XSETID", "e", "100-0", "MAXDELETEDID", "-"],
        &["XSETID", "e", "100-0", "FOO"],
        &["XSETID", "e", "+"],
        &["XSETID", "nokey", "100-0"],
        &["XSETID", "str", "100-0"],
        &[
            "XSETID",
            "e",
            "100-0",
            "ENTRIESADDED",
            "50",
            "MAXDELETEDID",
            "99-0",
        ],
        &["XINFO", "STREAM", "e"],
        &["XINFO", "GROUPS", "e"],
        &["XADD", "e", "100-*", "f", "v"],
        &["XSETID", "e", "18446744073709551615-18446744073709551615"],
        &["XADD", "e", "*", "f", "v"],
        &["XADD", "e", "NOMKSTREAM", "*", "f", "v"],
        // Empty streams stay, with their groups.
        &["XADD", "one", "1-1", "f", "v"],
        &["XGROUP", "CREATE", "one", "g", "0"],
        &["XDEL", "one", "1-1"],
        &["XINFO", "STREAM", "one"],
        &["XINFO", "GROUPS", "one"],
        &["XREADGROUP", "GROUP", "g", "c", "STREAMS", "one", ">"],
        &["XREADGROUP", "GROUP", "g", "c", "STREAMS", "one", "0"],
        &["XINFO", "CONSUMERS", "one", "g"],
        &["XADD", "one", "MINID", "5", "2-1", "f", "v"],
        &["XADD", "one", "MAXLEN", "0", "3-1", "f", "v"],
        &["XINFO", "STREAM", "one", "FULL"],
    ];
    for l in lines {
        let args: Vec<Vec<u8>> = l.iter().map(|s| s.as_bytes().to_vec()).collect();
        p.run(&args);
    }
}

// ---------------------------------------------------------------------
// Node layout against Redis's DUMP payload
// ---------------------------------------------------------------------

/// One listpack element.
#[derive(Debug, Clone, PartialEq)]
enum Elem {
    Int(i64),
    Str(Vec<u8>),
}

impl Elem {
    fn int(&self) -> i64 {
        match self {
            Elem::Int(n) => *n,
            Elem::Str(s) => String::from_utf8_lossy(s).parse().unwrap_or(i64::MIN),
        }
    }
    fn bytes(&self) -> Vec<u8> {
        match self {
            Elem::Int(n) => n.to_string().into_bytes(),
            Elem::Str(s) => s.clone(),
        }
    }
}

/// A node as Redis's payload has it: master ID, master fields,
/// `(id, deleted, fields)` in listpack order, and the listpack's bytes.
type RedisNode = (
    StreamId,
    Vec<Vec<u8>>,
    Vec<(StreamId, bool, Vec<(Vec<u8>, Vec<u8>)>)>,
    u64,
);

struct Payload<'a> {
    b: &'a [u8],
    pos: usize,
}

impl Payload<'_> {
    fn byte(&mut self) -> u8 {
        let v = self.b[self.pos];
        self.pos += 1;
        v
    }
    fn take(&mut self, n: usize) -> &[u8] {
        let s = &self.b[self.pos..self.pos + n];
        self.pos += n;
        s
    }
    /// An RDB length, or (for `11xxxxxx`) the string encoding.
    fn len(&mut self) -> (u64, bool) {
        let f = self.byte();
        match f >> 6 {
            0 => (u64::from(f & 0x3f), false),
            1 => ((u64::from(f & 0x3f) << 8) | u64::from(self.byte()), false),
            2 if f == 0x80 => (
                u64::from(u32::from_be_bytes(self.take(4).try_into().unwrap())),
                false,
            ),
            2 => (u64::from_be_bytes(self.take(8).try_into().unwrap()), false),
            _ => (u64::from(f & 0x3f), true),
        }
    }
    fn string(&mut self) -> Vec<u8> {
        let (l, enc) = self.len();
        if !enc {
            return self.take(l as usize).to_vec();
        }
        assert_eq!(l, 3, "only LZF strings expected");
        let clen = self.len().0 as usize;
        let olen = self.len().0 as usize;
        lzf(self.take(clen), olen)
    }
}

fn lzf(inp: &[u8], olen: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(olen);
    let mut i = 0;
    while i < inp.len() {
        let c = inp[i] as usize;
        i += 1;
        if c < 32 {
            out.extend_from_slice(&inp[i..i + c + 1]);
            i += c + 1;
        } else {
            let mut l = c >> 5;
            if l == 7 {
                l += inp[i] as usize;
                i += 1;
            }
            let back = ((c & 0x1f) << 8) + inp[i] as usize + 1;
            i += 1;
            let from = out.len() - back;
            for k in 0..l + 2 {
                out.push(out[from + k]);
            }
        }
    }
    assert_eq!(out.len(), olen);
    out
}

fn listpack(lp: &[u8]) -> Vec<Elem> {
    let mut i = 6;
    let mut out = Vec::new();
    while lp[i] != 0xff {
        let c = lp[i];
        let le = |a: usize, n: usize| {
            let mut v: u64 = 0;
            for k in (0..n).rev() {
                v = (v << 8) | u64::from(lp[a + k]);
            }
            let shift = 64 - 8 * n as u32;
            ((v << shift) as i64) >> shift
        };
        let (e, n) = if c < 0x80 {
            (Elem::Int(i64::from(c)), 1)
        } else if c & 0xc0 == 0x80 {
            let l = usize::from(c & 0x3f);
            (Elem::Str(lp[i + 1..i + 1 + l].to_vec()), 1 + l)
        } else if c & 0xe0 == 0xc0 {
            let v = (i64::from(c & 0x1f) << 8) | i64::from(lp[i + 1]);
            (Elem::Int(if v >= 4096 { v - 8192 } else { v }), 2)
        } else if c & 0xf0 == 0xe0 {
            let l = (usize::from(c & 0xf) << 8) | usize::from(lp[i + 1]);
            (Elem::Str(lp[i + 2..i + 2 + l].to_vec()), 2 + l)
        } else {
            match c {
                0xf1 => (Elem::Int(le(i + 1, 2)), 3),
                0xf2 => (Elem::Int(le(i + 1, 3)), 4),
                0xf3 => (Elem::Int(le(i + 1, 4)), 5),
                0xf4 => (Elem::Int(le(i + 1, 8)), 9),
                0xf0 => {
                    let l = le(i + 1, 4) as u32 as usize;
                    (Elem::Str(lp[i + 5..i + 5 + l].to_vec()), 5 + l)
                }
                _ => panic!("listpack byte {c:#x}"),
            }
        };
        let back = match n {
            0..=127 => 1,
            128..=16382 => 2,
            16383..=2_097_150 => 3,
            _ => 4,
        };
        out.push(e);
        i += n + back;
    }
    out
}

/// The nodes of a stream DUMP payload (RDB_TYPE_STREAM_LISTPACKS_2).
fn redis_nodes(dump: &[u8]) -> Vec<RedisNode> {
    let mut p = Payload { b: dump, pos: 0 };
    assert_eq!(p.byte(), 19, "stream payload type");
    let n = p.len().0;
    let mut out = Vec::new();
    for _ in 0..n {
        let key = p.string();
        let lp = p.string();
        let master = StreamId::new(
            u64::from_be_bytes(key[..8].try_into().unwrap()),
            u64::from_be_bytes(key[8..16].try_into().unwrap()),
        );
        let e = listpack(&lp);
        let (count, deleted, nf) = (e[0].int(), e[1].int(), e[2].int() as usize);
        let mf: Vec<Vec<u8>> = e[3..3 + nf].iter().map(Elem::bytes).collect();
        let mut i = 3 + nf + 1;
        let mut entries = Vec::new();
        while i < e.len() {
            let flags = e[i].int();
            let id = StreamId::new(
                master.ms.wrapping_add(e[i + 1].int() as u64),
                master.seq.wrapping_add(e[i + 2].int() as u64),
            );
            i += 3;
            let fields: Vec<(Vec<u8>, Vec<u8>)> = if flags & 2 != 0 {
                let v = mf
                    .iter()
                    .enumerate()
                    .map(|(k, f)| (f.clone(), e[i + k].bytes()))
                    .collect();
                i += nf;
                v
            } else {
                let n = e[i].int() as usize;
                i += 1;
                let v = (0..n)
                    .map(|k| (e[i + 2 * k].bytes(), e[i + 2 * k + 1].bytes()))
                    .collect();
                i += 2 * n;
                v
            };
            i += 1; // lp-count
            entries.push((id, flags & 1 != 0, fields));
        }
        let live = entries.iter().filter(|e| !e.1).count() as i64;
        assert_eq!((live, entries.len() as i64 - live), (count, deleted));
        out.push((master, mf, entries, lp.len() as u64));
    }
    out
}

fn our_nodes(s: &Stream) -> Vec<RedisNode> {
    s.nodes()
        .into_iter()
        .map(|n| {
            let entries = n
                .entries
                .iter()
                .map(|(id, f, d)| (*id, *d, f.to_vec()))
                .collect();
            (n.master_id, n.master_fields.to_vec(), entries, n.lp_bytes)
        })
        .collect()
}

impl Pair {
    /// Prints both layouts of `key` (on a failure).
    fn print_layout(&mut self, key: &[u8]) {
        if let Some(s) = self.model.stream(key) {
            eprintln!("layout  ours: {:?}", our_nodes(s));
        }
        if let Value::Bulk(Some(d)) = self.redis.cmd(&[b"DUMP", key]) {
            if d.first() == Some(&19) {
                eprintln!("layout redis: {:?}", redis_nodes(&d));
            }
        }
    }

    /// Our node layout of `key` must be Redis's (from DUMP), bytes
    /// included; and a stream rebuilt from it must equal ours.
    fn check_layout(&mut self, key: &[u8]) {
        let Some(s) = self.model.stream(key) else {
            return;
        };
        let Value::Bulk(Some(d)) = self.redis.cmd(&[b"DUMP", key]) else {
            panic!("seed {} step {}: no DUMP of a stream", self.seed, self.step);
        };
        let (ours, theirs) = (our_nodes(s), redis_nodes(&d));
        assert!(
            ours == theirs,
            "seed {} step {}: layout of {}\n ours: {ours:?}\nredis: {theirs:?}",
            self.seed,
            self.step,
            String::from_utf8_lossy(key)
        );
        let mut r = Stream::new();
        for n in s.nodes() {
            let entries = n
                .entries
                .iter()
                .map(|(i, f, d)| (*i, f.to_vec(), *d))
                .collect();
            r.restore_node(n.master_fields.to_vec(), entries).unwrap();
        }
        r.restore_meta(s.meta());
        for (name, g) in s.groups().iter() {
            r.restore_group(name.clone(), g.clone());
        }
        assert!(
            r == *s,
            "seed {} step {}: restore differs",
            self.seed,
            self.step
        );
        self.check_rdb(key, &d);
    }

    /// DUMP/RESTORE both ways: Redis's payload read by `rdb::restore` is
    /// our stream (but for the delivery and seen times, which are each
    /// server's clock); our `rdb::dump` is taken by Redis's RESTORE (with
    /// `sanitize-dump-payload yes`) and comes back from its DUMP as our
    /// stream exactly.
    fn check_rdb(&mut self, key: &[u8], theirs: &[u8]) {
        let Some(s) = self.model.stream(key).cloned() else {
            return;
        };
        let at = format!("seed {} step {}", self.seed, self.step);
        match rdb::restore(theirs) {
            Ok(xlane_kv::value::Value::Stream(got)) => {
                assert!(
                    timeless_stream(&got) == timeless_stream(&s),
                    "{at}: RESTORE of Redis's DUMP differs"
                )
            }
            other => panic!("{at}: RESTORE of Redis's DUMP: {other:?}"),
        }
        let ours = rdb::dump(&xlane_kv::value::Value::Stream(s.clone()));
        self.redis
            .cmd(&[b"CONFIG", b"SET", b"sanitize-dump-payload", b"yes"]);
        let r = self
            .redis
            .cmd(&[b"RESTORE", b"rdb-rt", b"0", &ours, b"REPLACE"]);
        assert!(
            matches!(&r, Value::Simple(s) if s == "OK"),
            "{at}: Redis RESTORE of our DUMP: {r:?}"
        );
        let Value::Bulk(Some(back)) = self.redis.cmd(&[b"DUMP", b"rdb-rt"]) else {
            panic!("{at}: no DUMP of the restored key");
        };
        self.redis.cmd(&[b"DEL", b"rdb-rt"]);
        match rdb::restore(&back) {
            Ok(xlane_kv::value::Value::Stream(got)) => {
                assert!(got == s, "{at}: our DUMP through Redis differs")
            }
            other => panic!("{at}: RESTORE of Redis's DUMP of ours: {other:?}"),
        }
    }
}

/// `s` with every delivery and seen time 0.
fn timeless_stream(s: &Stream) -> Stream {
    let mut r = Stream::new();
    for n in s.nodes() {
        let entries = n
            .entries
            .iter()
            .map(|(i, f, d)| (*i, f.to_vec(), *d))
            .collect();
        r.restore_node(n.master_fields.to_vec(), entries).unwrap();
    }
    r.restore_meta(s.meta());
    for (name, g) in s.groups().iter() {
        let mut g = g.clone();
        let ids: Vec<StreamId> = g.pel.keys().copied().collect();
        for id in ids {
            if let Some(n) = g.pel.get_mut(&id) {
                n.delivery_time = 0;
            }
        }
        let names: Vec<Vec<u8>> = g.consumers.keys().cloned().collect();
        for name in names {
            if let Some(c) = g.consumers.get_mut(&name) {
                c.seen_time = 0;
            }
        }
        r.restore_group(name.clone(), g);
    }
    r
}
