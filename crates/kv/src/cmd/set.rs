//! Sets: SADD, SREM, SMEMBERS, SISMEMBER, SMISMEMBER, SCARD, SPOP,
//! SRANDMEMBER, SINTER, SUNION, SDIFF and their STORE forms, SINTERCARD,
//! SMOVE, SSCAN.
//!
//! `SPOP` picks with the seed of its op and `SRANDMEMBER` with the seed
//! of its read: the members are drawn from the set in its (ordered)
//! iteration order, so every replica removes the same members.

use super::args::{bulks, empty, int, parse_scan, pos_count, scan_reply, syntax, ScanOpts};
use super::typed::{typed, typed_mut};

use crate::notify::{glob_match, NotifyFlags};
use crate::resp::Reply;
use crate::store::Store;
use crate::value::{scan_page, wrongtype, SplitMix, Value};
use imbl::OrdSet;

pub(super) const NAMES: &[&str] = &[
    "sadd",
    "srem",
    "smembers",
    "sismember",
    "smismember",
    "scard",
    "spop",
    "srandmember",
    "sinter",
    "sunion",
    "sdiff",
    "sinterstore",
    "sunionstore",
    "sdiffstore",
    "smove",
    "sscan",
    "sintercard",
];

type Set = OrdSet<Vec<u8>>;

#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Algebra {
    Inter,
    Union,
    Diff,
}

pub(super) enum Cmd<'a> {
    Add(&'a [u8], &'a [Vec<u8>]),
    Rem(&'a [u8], &'a [Vec<u8>]),
    Pop(&'a [u8], Option<usize>),
    Store(Algebra, &'a [u8], &'a [Vec<u8>]),
    Move(&'a [u8], &'a [u8], &'a [u8]),
    Members(&'a [u8]),
    IsMember(&'a [u8], &'a [u8]),
    MIsMember(&'a [u8], &'a [Vec<u8>]),
    Card(&'a [u8]),
    RandMember(&'a [u8], Option<i64>),
    Combine(Algebra, &'a [Vec<u8>]),
    Scan(&'a [u8], ScanOpts),
    /// `SINTERCARD numkeys key ... [LIMIT limit]`: the keys and the limit
    /// (0: none).
    InterCard(&'a [Vec<u8>], usize),
}

fn algebra(name: &str) -> Algebra {
    if name.starts_with("sinter") {
        Algebra::Inter
    } else if name.starts_with("sunion") {
        Algebra::Union
    } else {
        Algebra::Diff
    }
}

/// Parses command `name` of this module (its arity already checked).
pub(super) fn parse<'a>(name: &str, a: &'a [Vec<u8>]) -> Result<Cmd<'a>, Reply> {
    let k = || a[1].as_slice();
    Ok(match name {
        "sadd" => Cmd::Add(k(), &a[2..]),
        "srem" => Cmd::Rem(k(), &a[2..]),
        "spop" => {
            if a.len() > 3 {
                return Err(syntax());
            }
            Cmd::Pop(k(), a.get(2).map(|c| pos_count(c)).transpose()?)
        }
        "srandmember" => {
            if a.len() > 3 {
                return Err(syntax());
            }
            let c = a.get(2).map(|c| int(c)).transpose()?;
            if c == Some(i64::MIN) {
                return Err(Reply::err(
                    "ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807",
                ));
            }
            Cmd::RandMember(k(), c)
        }
        "sinterstore" | "sunionstore" | "sdiffstore" => Cmd::Store(algebra(name), k(), &a[2..]),
        "sinter" | "sunion" | "sdiff" => Cmd::Combine(algebra(name), &a[1..]),
        "smove" => Cmd::Move(k(), &a[2], &a[3]),
        "smembers" => Cmd::Members(k()),
        "sismember" => Cmd::IsMember(k(), &a[2]),
        "smismember" => Cmd::MIsMember(k(), &a[2..]),
        "scard" => Cmd::Card(k()),
        "sscan" => Cmd::Scan(k(), parse_scan(a, 2, false)?),
        "sintercard" => {
            let numkeys = crate::resp::parse_i64_strict(&a[1])
                .filter(|n| *n >= 1)
                .ok_or_else(|| Reply::err("ERR numkeys should be greater than 0"))?;
            let end = usize::try_from(numkeys)
                .ok()
                .filter(|n| *n <= a.len() - 2)
                .map(|n| n + 2)
                .ok_or_else(|| {
                    Reply::err("ERR Number of keys can't be greater than number of args")
                })?;
            let mut limit = 0;
            let mut j = end;
            while j < a.len() {
                if super::args::eq(&a[j], "limit") && j + 1 < a.len() {
                    limit = crate::resp::parse_i64_strict(&a[j + 1])
                        .and_then(|l| usize::try_from(l).ok())
                        .ok_or_else(|| Reply::err("ERR LIMIT can't be negative"))?;
                    j += 2;
                } else {
                    return Err(syntax());
                }
            }
            Cmd::InterCard(&a[2..end], limit)
        }
        _ => return Err(syntax()),
    })
}

fn get(v: Option<&Value>) -> Result<Option<&Set>, Reply> {
    typed(v)
}

fn get_mut<'a>(st: &'a mut Store, key: &[u8], create: bool) -> Result<Option<&'a mut Set>, Reply> {
    typed_mut(st, key, create)
}

/// SINTER / SUNION / SDIFF of the sets at `keys` (every key's type is
/// checked first, as Redis 7.0 does).
fn combine<'a>(
    op: Algebra,
    keys: &[Vec<u8>],
    lookup: impl Fn(&[u8]) -> Option<&'a Value>,
) -> Result<Set, Reply> {
    let mut sets = Vec::with_capacity(keys.len());
    for k in keys {
        sets.push(get(lookup(k))?);
    }
    if op == Algebra::Inter && sets.iter().any(Option::is_none) {
        return Ok(Set::new());
    }
    let mut it = sets.into_iter();
    let first = it.next().flatten().cloned().unwrap_or_default();
    Ok(it.fold(first, |acc, s| match (op, s) {
        (Algebra::Inter, Some(s)) => acc.intersection(s.clone()),
        (Algebra::Union, Some(s)) => acc.union(s.clone()),
        (Algebra::Diff, Some(s)) => acc.relative_complement(s.clone()),
        (_, None) => acc,
    }))
}

/// `n` distinct members of `s` drawn with `rng` (all of them when `n`
/// reaches the size).
fn pick(s: &Set, n: usize, rng: &mut SplitMix) -> Vec<Vec<u8>> {
    let mut pool: Vec<&Vec<u8>> = s.iter().collect();
    let n = n.min(pool.len());
    // A partial Fisher-Yates shuffle: the first n slots are the picks.
    for i in 0..n {
        let j = i + rng.below(pool.len() - i);
        pool.swap(i, j);
    }
    pool.into_iter().take(n).cloned().collect()
}

impl Cmd<'_> {
    /// The reply of this write when running it on `st` would change
    /// nothing (see [`super::unchanged_reply`]); `None` when it might.
    pub(super) fn unchanged(&self, st: &Store) -> Option<Reply> {
        match self {
            Cmd::Add(k, ms) => match st.cur(k)? {
                Value::Set(s) => ms
                    .iter()
                    .all(|m| s.contains(m))
                    .then_some(Reply::Integer(0)),
                _ => None,
            },
            Cmd::Rem(k, ms) => match st.cur(k) {
                None => Some(Reply::Integer(0)),
                Some(Value::Set(s)) => ms
                    .iter()
                    .all(|m| !s.contains(m))
                    .then_some(Reply::Integer(0)),
                Some(_) => None,
            },
            Cmd::Pop(k, count) => st.cur(k).is_none().then(|| match count {
                None => Reply::nil(),
                Some(_) => empty(),
            }),
            _ => None,
        }
    }
}

impl Cmd<'_> {
    pub(super) fn apply(&self, st: &mut Store, now: u64, rng: &mut SplitMix) -> Reply {
        let r = match self {
            Cmd::Add(..) | Cmd::Rem(..) | Cmd::Pop(..) | Cmd::Store(..) | Cmd::Move(..) => {
                self.apply_inner(st, rng)
            }
            _ => return self.read(st, now, rng),
        };
        match self {
            Cmd::Move(src, dst, _) => {
                st.drop_if_empty(src);
                st.drop_if_empty(dst);
            }
            Cmd::Add(k, _) | Cmd::Rem(k, _) | Cmd::Pop(k, _) => st.drop_if_empty(k),
            _ => {}
        }
        r.unwrap_or_else(|e| e)
    }

    fn apply_inner(&self, st: &mut Store, rng: &mut SplitMix) -> Result<Reply, Reply> {
        Ok(match self {
            Cmd::Add(k, ms) => {
                let s = get_mut(st, k, true)?.ok_or_else(wrongtype)?;
                let n = ms
                    .iter()
                    .filter(|m| s.insert((*m).clone()).is_none())
                    .count();
                if n > 0 {
                    st.notify(NotifyFlags::SET, "sadd", k);
                }
                Reply::Integer(n as i64)
            }
            Cmd::Rem(k, ms) => {
                let Some(s) = get_mut(st, k, false)? else {
                    return Ok(Reply::Integer(0));
                };
                let n = ms.iter().filter(|m| s.remove(*m).is_some()).count();
                if n > 0 {
                    st.notify(NotifyFlags::SET, "srem", k);
                }
                Reply::Integer(n as i64)
            }
            Cmd::Pop(k, count) => {
                let Some(s) = get_mut(st, k, false)? else {
                    return Ok(match count {
                        None => Reply::nil(),
                        Some(_) => empty(),
                    });
                };
                let picked = pick(s, count.unwrap_or(1), rng);
                for m in &picked {
                    s.remove(m);
                }
                if !picked.is_empty() {
                    st.notify(NotifyFlags::SET, "spop", k);
                }
                match count {
                    None => Reply::Bulk(picked.into_iter().next()),
                    Some(_) => bulks(picked.iter().map(|m| m.as_slice())),
                }
            }
            Cmd::Store(op, dst, keys) => {
                let out = combine(*op, keys, |k| st.cur(k))?;
                let n = out.len();
                if n == 0 {
                    if st.delete(dst) {
                        st.notify(NotifyFlags::GENERIC, "del", dst);
                    }
                } else {
                    st.put_value(dst, Value::Set(out), None);
                    let ev = match op {
                        Algebra::Inter => "sinterstore",
                        Algebra::Union => "sunionstore",
                        Algebra::Diff => "sdiffstore",
                    };
                    st.notify(NotifyFlags::SET, ev, dst);
                }
                Reply::Integer(n as i64)
            }
            Cmd::Move(src, dst, m) => {
                let Some(s) = get(st.cur(src))? else {
                    return Ok(Reply::Integer(0));
                };
                get(st.cur(dst))?;
                if !s.contains(*m) {
                    return Ok(Reply::Integer(0));
                }
                if src == dst {
                    return Ok(Reply::Integer(1));
                }
                if let Some(s) = get_mut(st, src, false)? {
                    s.remove(*m);
                }
                st.notify(NotifyFlags::SET, "srem", src);
                st.drop_if_empty(src);
                // The destination changes (and is signalled) only when the
                // member was not there yet, as in Redis.
                let added = get_mut(st, dst, true)?.is_some_and(|d| d.insert(m.to_vec()).is_none());
                if added {
                    st.notify(NotifyFlags::SET, "sadd", dst);
                }
                Reply::Integer(1)
            }
            _ => return Err(syntax()),
        })
    }

    pub(super) fn read(&self, st: &Store, now: u64, rng: &mut SplitMix) -> Reply {
        self.read_inner(st, now, rng).unwrap_or_else(|e| e)
    }

    fn read_inner(&self, st: &Store, now: u64, rng: &mut SplitMix) -> Result<Reply, Reply> {
        let s = |k: &[u8]| get(st.value(k, now));
        Ok(match self {
            Cmd::Members(k) => bulks(
                s(k)?
                    .into_iter()
                    .flat_map(|s| s.iter().map(|m| m.as_slice())),
            ),
            Cmd::IsMember(k, m) => Reply::Integer(s(k)?.is_some_and(|s| s.contains(*m)) as i64),
            Cmd::MIsMember(k, ms) => {
                let set = s(k)?;
                Reply::Array(Some(
                    ms.iter()
                        .map(|m| Reply::Integer(set.is_some_and(|s| s.contains(m)) as i64))
                        .collect(),
                ))
            }
            Cmd::Card(k) => Reply::Integer(s(k)?.map_or(0, |s| s.len()) as i64),
            Cmd::RandMember(k, count) => {
                let set = s(k)?;
                match (set, count) {
                    (None, None) => Reply::nil(),
                    (None, Some(_)) => empty(),
                    (Some(set), None) => Reply::Bulk(pick(set, 1, rng).into_iter().next()),
                    (Some(set), Some(c)) if *c >= 0 => {
                        bulks(pick(set, *c as usize, rng).iter().map(|m| m.as_slice()))
                    }
                    (Some(set), Some(c)) => {
                        let all: Vec<&Vec<u8>> = set.iter().collect();
                        let n = c.unsigned_abs() as usize;
                        Reply::Array(Some(
                            (0..n)
                                .map(|_| Reply::bulk(all[rng.below(all.len())].clone()))
                                .collect(),
                        ))
                    }
                }
            }
            Cmd::Combine(op, keys) => {
                let out = combine(*op, keys, |k| st.value(k, now))?;
                bulks(out.iter().map(|m| m.as_slice()))
            }
            Cmd::InterCard(keys, limit) => {
                let mut sets = Vec::with_capacity(keys.len());
                for k in keys.iter() {
                    sets.push(s(k)?);
                }
                let Some(mut sets) = sets.into_iter().collect::<Option<Vec<&Set>>>() else {
                    return Ok(Reply::Integer(0));
                };
                sets.sort_by_key(|s| s.len());
                let (first, rest) = sets.split_first().ok_or_else(syntax)?;
                let limit = if *limit == 0 { usize::MAX } else { *limit };
                let n = first
                    .iter()
                    .filter(|m| rest.iter().all(|s| s.contains(*m)))
                    .take(limit)
                    .count();
                Reply::Integer(n as i64)
            }
            Cmd::Scan(k, o) => {
                let Some(set) = s(k)? else {
                    return Ok(scan_reply(0, Vec::new()));
                };
                let (next, page) = scan_page(set.iter().map(|m| m.as_slice()), o.cursor, o.count);
                let items = page
                    .into_iter()
                    .filter(|m| o.pattern.as_ref().map_or(true, |p| glob_match(p, m, false)))
                    .map(|m| Reply::bulk(m.to_vec()))
                    .collect();
                scan_reply(next, items)
            }
            _ => return Err(syntax()),
        })
    }
}
