//! Hashes: HSET, HMSET, HSETNX, HGET, HMGET, HGETALL, HDEL, HEXISTS,
//! HINCRBY, HINCRBYFLOAT, HKEYS, HVALS, HLEN, HSTRLEN, HSCAN, HRANDFIELD.
//!
//! `HRANDFIELD` is a read: its picks come from the seed of the member that
//! answers ([`rand_picks`]).

use super::args::arity_error;
use super::args::{bulks, empty, int, parse_scan, scan_reply, syntax, ScanOpts};
use super::typed::{typed, typed_mut};
use crate::notify::{glob_match, NotifyFlags};
use crate::resp::Reply;
use crate::store::Store;
use crate::value::ERR_OVERFLOW;
use crate::value::{fmt_float, parse_double, scan_page, wrongtype, SplitMix, Value};
use imbl::OrdMap;

pub(super) const NAMES: &[&str] = &[
    "hset",
    "hmset",
    "hsetnx",
    "hget",
    "hmget",
    "hgetall",
    "hdel",
    "hexists",
    "hincrby",
    "hincrbyfloat",
    "hkeys",
    "hvals",
    "hlen",
    "hstrlen",
    "hscan",
    "hrandfield",
];

type Hash = OrdMap<Vec<u8>, Vec<u8>>;

pub(super) enum Cmd<'a> {
    Set {
        key: &'a [u8],
        /// Field, value, field, value, ...
        pairs: &'a [Vec<u8>],
        /// HMSET: reply +OK.
        ok: bool,
    },
    SetNx(&'a [u8], &'a [u8], &'a [u8]),
    Del(&'a [u8], &'a [Vec<u8>]),
    IncrBy(&'a [u8], &'a [u8], i64),
    IncrByFloat(&'a [u8], &'a [u8], f64),
    Get(&'a [u8], &'a [u8]),
    MGet(&'a [u8], &'a [Vec<u8>]),
    GetAll(&'a [u8]),
    Exists(&'a [u8], &'a [u8]),
    Keys(&'a [u8]),
    Vals(&'a [u8]),
    Len(&'a [u8]),
    StrLen(&'a [u8], &'a [u8]),
    Scan(&'a [u8], ScanOpts),
    /// `HRANDFIELD key [count [WITHVALUES]]`.
    RandField(&'a [u8], Option<i64>, bool),
}

/// Parses command `name` of this module (its arity already checked).
pub(super) fn parse<'a>(name: &str, a: &'a [Vec<u8>]) -> Result<Cmd<'a>, Reply> {
    let k = || a[1].as_slice();
    Ok(match name {
        "hset" | "hmset" => {
            if a.len() % 2 != 0 {
                return Err(arity_error(name));
            }
            let pairs = &a[2..];
            Cmd::Set {
                key: k(),
                pairs,
                ok: name == "hmset",
            }
        }
        "hsetnx" => Cmd::SetNx(k(), &a[2], &a[3]),
        "hdel" => Cmd::Del(k(), &a[2..]),
        "hincrby" => match int(&a[3]) {
            Ok(d) => Cmd::IncrBy(k(), &a[2], d),
            Err(e) => return Err(e),
        },
        "hincrbyfloat" => match parse_double(&a[3]) {
            Some(d) if !d.is_finite() => return Err(Reply::err("ERR value is NaN or Infinity")),
            Some(d) => Cmd::IncrByFloat(k(), &a[2], d),
            None => return Err(Reply::err("ERR value is not a valid float")),
        },
        "hget" => Cmd::Get(k(), &a[2]),
        "hmget" => Cmd::MGet(k(), &a[2..]),
        "hgetall" => Cmd::GetAll(k()),
        "hexists" => Cmd::Exists(k(), &a[2]),
        "hkeys" => Cmd::Keys(k()),
        "hvals" => Cmd::Vals(k()),
        "hlen" => Cmd::Len(k()),
        "hstrlen" => Cmd::StrLen(k(), &a[2]),
        "hrandfield" => {
            let (count, withvalues) = parse_rand_count(a, "withvalues")?;
            Cmd::RandField(k(), count, withvalues)
        }
        "hscan" => match parse_scan(a, 2, false) {
            Ok(o) => Cmd::Scan(k(), o),
            Err(e) => return Err(e),
        },
        _ => return Err(syntax()),
    })
}

/// Most elements a random pick with a negative count returns (Redis
/// would build any size; a bound keeps one request's reply finite).
pub(super) const MAX_RAND_PICKS: u64 = 1 << 20;

/// The `count` and the `WITHVALUES`/`WITHSCORES` (`word`) of
/// `HRANDFIELD`/`ZRANDMEMBER key [count [word]]`, with Redis 7.0's errors.
pub(super) fn parse_rand_count(a: &[Vec<u8>], word: &str) -> Result<(Option<i64>, bool), Reply> {
    let Some(c) = a.get(2) else {
        return Ok((None, false));
    };
    let l = int(c)?;
    if l == i64::MIN {
        return Err(Reply::err(
            "ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807",
        ));
    }
    if a.len() > 4 || (a.len() == 4 && !super::args::eq(&a[3], word)) {
        return Err(syntax());
    }
    let with = a.len() == 4;
    if with && !(-(i64::MAX / 2)..=i64::MAX / 2).contains(&l) {
        return Err(Reply::err("ERR value is out of range"));
    }
    Ok((Some(l), with))
}

/// The positions (in `0..n`, `n > 0`) a random pick of `count` takes, as
/// Redis picks them: a negative count draws `-count` positions that may
/// repeat; a positive one distinct positions, every one (in order) when
/// `count` reaches `n`. Drawn with `rng`.
pub(super) fn rand_picks(n: usize, count: i64, rng: &mut SplitMix) -> Result<Vec<usize>, Reply> {
    if n == 0 || count == 0 {
        return Ok(Vec::new());
    }
    if count < 0 {
        let m = count.unsigned_abs();
        if m > MAX_RAND_PICKS {
            return Err(Reply::err("ERR value is out of range"));
        }
        return Ok((0..m).map(|_| rng.below(n)).collect());
    }
    let count = usize::try_from(count).unwrap_or(usize::MAX);
    let mut pool: Vec<usize> = (0..n).collect();
    if count >= n {
        return Ok(pool);
    }
    // A partial Fisher-Yates shuffle: the first `count` slots are the picks.
    for i in 0..count {
        let j = i + rng.below(n - i);
        pool.swap(i, j);
    }
    pool.truncate(count);
    Ok(pool)
}

fn get(v: Option<&Value>) -> Result<Option<&Hash>, Reply> {
    typed(v)
}

/// The hash at `key` to change, created empty when absent.
fn get_mut<'a>(st: &'a mut Store, key: &[u8]) -> Result<&'a mut Hash, Reply> {
    typed_mut(st, key, true)?.ok_or_else(wrongtype)
}

impl Cmd<'_> {
    /// The reply of this write when running it on `st` would change
    /// nothing (see [`super::unchanged_reply`]); `None` when it might.
    pub(super) fn unchanged(&self, st: &Store) -> Option<Reply> {
        match self {
            Cmd::Del(key, fields) => match st.cur(key) {
                None => Some(Reply::Integer(0)),
                Some(Value::Hash(h)) => fields
                    .iter()
                    .all(|f| !h.contains_key(f))
                    .then_some(Reply::Integer(0)),
                Some(_) => None,
            },
            Cmd::SetNx(key, field, _) => match st.cur(key)? {
                Value::Hash(h) => h.contains_key(*field).then_some(Reply::Integer(0)),
                _ => None,
            },
            _ => None,
        }
    }
}

impl Cmd<'_> {
    pub(super) fn apply(&self, st: &mut Store, now: u64, rng: &mut SplitMix) -> Reply {
        match self {
            Cmd::Set { .. }
            | Cmd::SetNx(..)
            | Cmd::Del(..)
            | Cmd::IncrBy(..)
            | Cmd::IncrByFloat(..) => {}
            _ => return self.read(st, now, rng),
        }
        let r = self.apply_inner(st);
        match self {
            Cmd::Set { key, .. }
            | Cmd::SetNx(key, ..)
            | Cmd::Del(key, _)
            | Cmd::IncrBy(key, ..)
            | Cmd::IncrByFloat(key, ..) => st.drop_if_empty(key),
            _ => {}
        }
        r.unwrap_or_else(|e| e)
    }

    fn apply_inner(&self, st: &mut Store) -> Result<Reply, Reply> {
        Ok(match self {
            Cmd::Set { key, pairs, ok } => {
                let h = get_mut(st, key)?;
                let mut added = 0;
                for p in pairs.chunks_exact(2) {
                    if h.insert(p[0].clone(), p[1].clone()).is_none() {
                        added += 1;
                    }
                }
                st.notify(NotifyFlags::HASH, "hset", key);
                if *ok {
                    Reply::ok()
                } else {
                    Reply::Integer(added)
                }
            }
            Cmd::SetNx(key, f, v) => {
                let h = get_mut(st, key)?;
                if h.contains_key(*f) {
                    Reply::Integer(0)
                } else {
                    h.insert(f.to_vec(), v.to_vec());
                    st.notify(NotifyFlags::HASH, "hset", key);
                    Reply::Integer(1)
                }
            }
            Cmd::Del(key, fields) => {
                if get(st.cur(key))?.is_none() {
                    return Ok(Reply::Integer(0));
                }
                let h = get_mut(st, key)?;
                let n = fields.iter().filter(|f| h.remove(*f).is_some()).count();
                if n > 0 {
                    st.notify(NotifyFlags::HASH, "hdel", key);
                }
                Reply::Integer(n as i64)
            }
            Cmd::IncrBy(key, f, d) => {
                let h = get_mut(st, key)?;
                let cur = match h.get(*f) {
                    None => 0,
                    Some(v) => crate::resp::parse_i64_strict(v)
                        .ok_or_else(|| Reply::err("ERR hash value is not an integer"))?,
                };
                let new = cur
                    .checked_add(*d)
                    .ok_or_else(|| Reply::err(ERR_OVERFLOW))?;
                h.insert(f.to_vec(), new.to_string().into_bytes());
                st.notify(NotifyFlags::HASH, "hincrby", key);
                Reply::Integer(new)
            }
            Cmd::IncrByFloat(key, f, d) => {
                let h = get_mut(st, key)?;
                let cur = match h.get(*f) {
                    None => 0.0,
                    Some(v) => parse_double(v)
                        .ok_or_else(|| Reply::err("ERR hash value is not a float"))?,
                };
                let new = cur + d;
                if !new.is_finite() {
                    return Err(Reply::err("ERR increment would produce NaN or Infinity"));
                }
                let text = fmt_float(new).into_bytes();
                h.insert(f.to_vec(), text.clone());
                st.notify(NotifyFlags::HASH, "hincrbyfloat", key);
                Reply::bulk(text)
            }
            _ => return Err(syntax()),
        })
    }

    pub(super) fn read(&self, st: &Store, now: u64, rng: &mut SplitMix) -> Reply {
        self.read_inner(st, now, rng).unwrap_or_else(|e| e)
    }

    fn read_inner(&self, st: &Store, now: u64, rng: &mut SplitMix) -> Result<Reply, Reply> {
        let h = |k: &[u8]| get(st.value(k, now));
        Ok(match self {
            Cmd::RandField(k, count, withvalues) => {
                let Some(h) = h(k)? else {
                    return Ok(match count {
                        None => Reply::nil(),
                        Some(_) => empty(),
                    });
                };
                let fields: Vec<(&Vec<u8>, &Vec<u8>)> = h.iter().collect();
                let Some(count) = count else {
                    return Ok(match fields.get(rng.below(fields.len().max(1))) {
                        Some((f, _)) => Reply::bulk(f.to_vec()),
                        None => Reply::nil(),
                    });
                };
                let picks = rand_picks(fields.len(), *count, rng)?;
                let mut out = Vec::with_capacity(picks.len() * (1 + *withvalues as usize));
                for i in picks {
                    let (f, v) = fields[i];
                    out.push(Reply::bulk(f.to_vec()));
                    if *withvalues {
                        out.push(Reply::bulk(v.to_vec()));
                    }
                }
                Reply::Array(Some(out))
            }
            Cmd::Get(k, f) => Reply::Bulk(h(k)?.and_then(|h| h.get(*f)).cloned()),
            Cmd::MGet(k, fs) => {
                let h = h(k)?;
                Reply::Array(Some(
                    fs.iter()
                        .map(|f| Reply::Bulk(h.and_then(|h| h.get(f)).cloned()))
                        .collect(),
                ))
            }
            Cmd::GetAll(k) => match h(k)? {
                None => empty(),
                Some(h) => bulks(h.iter().flat_map(|(f, v)| [f.as_slice(), v.as_slice()])),
            },
            Cmd::Exists(k, f) => Reply::Integer(h(k)?.is_some_and(|h| h.contains_key(*f)) as i64),
            Cmd::Keys(k) => bulks(
                h(k)?
                    .into_iter()
                    .flat_map(|h| h.keys().map(|f| f.as_slice())),
            ),
            Cmd::Vals(k) => bulks(
                h(k)?
                    .into_iter()
                    .flat_map(|h| h.values().map(|v| v.as_slice())),
            ),
            Cmd::Len(k) => Reply::Integer(h(k)?.map_or(0, |h| h.len()) as i64),
            Cmd::StrLen(k, f) => {
                Reply::Integer(h(k)?.and_then(|h| h.get(*f)).map_or(0, |v| v.len()) as i64)
            }
            Cmd::Scan(k, o) => {
                let Some(h) = h(k)? else {
                    return Ok(scan_reply(0, Vec::new()));
                };
                let (next, page) = scan_page(h.keys().map(|f| f.as_slice()), o.cursor, o.count);
                let mut out = Vec::new();
                for f in page {
                    if o.pattern.as_ref().is_some_and(|p| !glob_match(p, f, false)) {
                        continue;
                    }
                    out.push(Reply::bulk(f.to_vec()));
                    out.push(Reply::Bulk(h.get(f).cloned()));
                }
                scan_reply(next, out)
            }
            _ => return Err(syntax()),
        })
    }
}
