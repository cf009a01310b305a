//! Sorted sets: ZADD (NX/XX/GT/LT/CH/INCR), ZREM, ZSCORE, ZMSCORE,
//! ZINCRBY, ZCARD, ZCOUNT, ZLEXCOUNT, ZRANGE (BYSCORE/BYLEX/REV/LIMIT/
//! WITHSCORES) and its older forms, ZRANK, ZREVRANK, ZPOPMIN, ZPOPMAX,
//! ZMPOP, ZRANGESTORE, ZREMRANGEBYRANK/BYSCORE/BYLEX, ZUNION, ZINTER,
//! ZDIFF and their STORE forms, ZINTERCARD, ZRANDMEMBER, ZSCAN.
//!
//! `ZPOPMIN`/`ZPOPMAX`/`ZMPOP` need no seed: the members with the lowest
//! (highest) scores, ties by member bytes, are the same on every replica
//! ([`pop_first`], shared with the blocking pops). `ZRANDMEMBER` is a read:
//! its picks come from the seed of the member that answers.

mod combine;
mod range;

use self::combine::{combine, parse_combine, Combine, ScoredMember, SetOp};
use self::range::{
    above_min, below_max, lex_spec, parse_range, plain, score_bound, select, Kind, Range,
    RangeSpec, ScoreBound, ERR_FLOAT,
};
use super::args::{
    empty, eq, int, parse_scan, pos_count, scan_reply, syntax, timeout_ms, ScanOpts,
};
use super::typed::{typed, typed_mut};
use crate::notify::{glob_match, NotifyFlags};
use crate::resp::Reply;
use crate::store::Store;
use crate::value::{fmt_score, parse_double, scan_page, wrongtype, Score, SplitMix, Value, ZSet};

pub(super) const NAMES: &[&str] = &[
    "zadd",
    "zrem",
    "zscore",
    "zmscore",
    "zincrby",
    "zcard",
    "zcount",
    "zrange",
    "zrangebyscore",
    "zrevrange",
    "zrevrangebyscore",
    "zrangebylex",
    "zrevrangebylex",
    "zrank",
    "zrevrank",
    "zpopmin",
    "zpopmax",
    "zrangestore",
    "zscan",
    "zlexcount",
    "zremrangebyrank",
    "zremrangebyscore",
    "zremrangebylex",
    "zrandmember",
    "zmpop",
    "bzpopmin",
    "bzpopmax",
    "bzmpop",
    "zunion",
    "zinter",
    "zdiff",
    "zintercard",
    "zunionstore",
    "zinterstore",
    "zdiffstore",
];

#[derive(Default, Clone, Copy)]
pub(super) struct AddFlags {
    nx: bool,
    xx: bool,
    gt: bool,
    lt: bool,
    ch: bool,
    incr: bool,
}

pub(super) enum Cmd<'a> {
    Add(&'a [u8], AddFlags, Vec<(f64, &'a [u8])>),
    Rem(&'a [u8], &'a [Vec<u8>]),
    Pop(&'a [u8], bool, Option<usize>),
    RangeStore(&'a [u8], &'a [u8], RangeSpec),
    Score(&'a [u8], &'a [u8]),
    MScore(&'a [u8], &'a [Vec<u8>]),
    Card(&'a [u8]),
    Count(&'a [u8], ScoreBound, ScoreBound),
    Range(&'a [u8], RangeSpec),
    Rank(&'a [u8], &'a [u8], bool),
    Scan(&'a [u8], ScanOpts),
    LexCount(&'a [u8], RangeSpec),
    /// `ZREMRANGEBY*`: the range (in ascending order, no `LIMIT`) and the
    /// event.
    RemRange(&'a [u8], RangeSpec, &'static str),
    /// `ZRANDMEMBER key [count [WITHSCORES]]`.
    RandMember(&'a [u8], Option<i64>, bool),
    /// `ZMPOP numkeys key ... MIN|MAX [COUNT count]`: keys, max, count.
    MPop(&'a [Vec<u8>], bool, usize),
    /// `BZPOPMIN`/`BZPOPMAX key ... timeout` once applied (the wait is the
    /// client loop's): one member from the first set that has one.
    BPop(&'a [Vec<u8>], bool),
    /// `ZUNION`/`ZINTER`/`ZDIFF`/`ZINTERCARD` and the `STORE` forms.
    Combine(Combine<'a>),
}

/// Parses command `name` of this module (its arity already checked).
pub(super) fn parse<'a>(name: &str, a: &'a [Vec<u8>]) -> Result<Cmd<'a>, Reply> {
    let k = || a[1].as_slice();
    Ok(match name {
        "zadd" => {
            let mut f = AddFlags::default();
            let mut i = 2;
            while i < a.len() {
                let o = &a[i];
                let flag = if eq(o, "nx") {
                    &mut f.nx
                } else if eq(o, "xx") {
                    &mut f.xx
                } else if eq(o, "gt") {
                    &mut f.gt
                } else if eq(o, "lt") {
                    &mut f.lt
                } else if eq(o, "ch") {
                    &mut f.ch
                } else if eq(o, "incr") {
                    &mut f.incr
                } else {
                    break;
                };
                *flag = true;
                i += 1;
            }
            let rest = &a[i..];
            if rest.is_empty() || rest.len() % 2 != 0 {
                return Err(syntax());
            }
            if f.nx && f.xx {
                return Err(Reply::err(
                    "ERR XX and NX options at the same time are not compatible",
                ));
            }
            if (f.nx && (f.gt || f.lt)) || (f.gt && f.lt) {
                return Err(Reply::err(
                    "ERR GT, LT, and/or NX options at the same time are not compatible",
                ));
            }
            if f.incr && rest.len() > 2 {
                return Err(Reply::err(
                    "ERR INCR option supports a single increment-element pair",
                ));
            }
            let mut pairs = Vec::with_capacity(rest.len() / 2);
            for p in rest.chunks_exact(2) {
                let s = parse_double(&p[0]).ok_or_else(|| Reply::err(ERR_FLOAT))?;
                pairs.push((s, p[1].as_slice()));
            }
            Cmd::Add(k(), f, pairs)
        }
        "zincrby" => {
            // Redis reads ZINCRBY's words as ZADD's: an option word where
            // the increment goes leaves an odd number of words.
            if ["nx", "xx", "ch", "incr", "gt", "lt"]
                .iter()
                .any(|w| eq(&a[2], w))
            {
                return Err(syntax());
            }
            let s = parse_double(&a[2]).ok_or_else(|| Reply::err(ERR_FLOAT))?;
            let f = AddFlags {
                incr: true,
                ..AddFlags::default()
            };
            Cmd::Add(k(), f, vec![(s, &a[3])])
        }
        "zrem" => Cmd::Rem(k(), &a[2..]),
        "zpopmin" | "zpopmax" => {
            if a.len() > 3 {
                return Err(syntax());
            }
            Cmd::Pop(
                k(),
                name == "zpopmax",
                a.get(2).map(|c| pos_count(c)).transpose()?,
            )
        }
        "zrangestore" => Cmd::RangeStore(k(), &a[2], parse_range(a, 3, Kind::Auto, None, true)?),
        "zscore" => Cmd::Score(k(), &a[2]),
        "zmscore" => Cmd::MScore(k(), &a[2..]),
        "zcard" => Cmd::Card(k()),
        "zcount" => match (score_bound(&a[2]), score_bound(&a[3])) {
            (Some(x), Some(y)) => Cmd::Count(k(), x, y),
            _ => return Err(Reply::err("ERR min or max is not a float")),
        },
        "zrange" => Cmd::Range(k(), parse_range(a, 2, Kind::Auto, None, false)?),
        "zrangebyscore" => Cmd::Range(k(), parse_range(a, 2, Kind::Score, Some(false), false)?),
        "zrevrangebyscore" => Cmd::Range(k(), parse_range(a, 2, Kind::Score, Some(true), false)?),
        "zrevrange" => Cmd::Range(k(), parse_range(a, 2, Kind::Rank, Some(true), false)?),
        "zrangebylex" => Cmd::Range(k(), parse_range(a, 2, Kind::Lex, Some(false), false)?),
        "zrevrangebylex" => Cmd::Range(k(), parse_range(a, 2, Kind::Lex, Some(true), false)?),
        "zrank" | "zrevrank" => Cmd::Rank(k(), &a[2], name == "zrevrank"),
        "zscan" => Cmd::Scan(k(), parse_scan(a, 2, false)?),
        "zlexcount" => Cmd::LexCount(k(), lex_spec(&a[2], &a[3])?),
        "zremrangebylex" => Cmd::RemRange(k(), lex_spec(&a[2], &a[3])?, "zremrangebylex"),
        "zremrangebyscore" => match (score_bound(&a[2]), score_bound(&a[3])) {
            (Some(x), Some(y)) => Cmd::RemRange(k(), plain(Range::Score(x, y)), "zremrangebyscore"),
            _ => return Err(Reply::err("ERR min or max is not a float")),
        },
        "zremrangebyrank" => Cmd::RemRange(
            k(),
            plain(Range::Rank(int(&a[2])?, int(&a[3])?)),
            "zremrangebyrank",
        ),
        "zrandmember" => {
            let (count, withscores) = super::hash::parse_rand_count(a, "withscores")?;
            Cmd::RandMember(k(), count, withscores)
        }
        "bzpopmin" | "bzpopmax" => {
            timeout_ms(&a[a.len() - 1])?;
            Cmd::BPop(&a[1..a.len() - 1], name == "bzpopmax")
        }
        "zmpop" | "bzmpop" => {
            let end = |w: &[u8]| {
                if eq(w, "min") {
                    Some(false)
                } else if eq(w, "max") {
                    Some(true)
                } else {
                    None
                }
            };
            let at = if name == "bzmpop" {
                timeout_ms(&a[1])?;
                2
            } else {
                1
            };
            let (keys, max, count) = super::list::parse_mpop(a, at, end)?;
            Cmd::MPop(keys, max, count)
        }
        "zunion" | "zinter" | "zdiff" | "zintercard" | "zunionstore" | "zinterstore"
        | "zdiffstore" => Cmd::Combine(parse_combine(name, a)?),
        _ => return Err(syntax()),
    })
}

/// Pops up to `count` members with the lowest (`max`: highest) scores from
/// the first of `keys` that exists, as `ZMPOP` does (and the blocking pops
/// once a sorted set has members): the key and the (member, score) pairs
/// in the order popped, with the `zpopmin`/`zpopmax` event (and `del` when
/// it empties). `None` when no key exists; WRONGTYPE when the first that
/// exists is not a sorted set. A `count` of 0 pops nothing and fires
/// nothing. Runs inside an op.
pub(super) fn pop_first<'k, K: AsRef<[u8]>>(
    st: &mut Store,
    keys: &'k [K],
    max: bool,
    count: usize,
) -> Result<Option<super::list::Popped<'k, ScoredMember>>, Reply> {
    for k in keys {
        let k = k.as_ref();
        let Some(z) = get_mut(st, k, false)? else {
            continue;
        };
        let n = count.min(z.len());
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            let first = if max {
                z.order.get_max().cloned()
            } else {
                z.order.get_min().cloned()
            };
            if let Some((s, m)) = first {
                z.remove(&m);
                out.push((m, s.get()));
            }
        }
        if n > 0 {
            st.notify(
                NotifyFlags::ZSET,
                if max { "zpopmax" } else { "zpopmin" },
                k,
            );
            st.drop_if_empty(k);
        }
        return Ok(Some((k, out)));
    }
    Ok(None)
}

fn get(v: Option<&Value>) -> Result<Option<&ZSet>, Reply> {
    typed(v)
}

fn get_mut<'a>(st: &'a mut Store, key: &[u8], create: bool) -> Result<Option<&'a mut ZSet>, Reply> {
    typed_mut(st, key, create)
}

fn score_reply(s: f64) -> Reply {
    Reply::bulk(fmt_score(s))
}

fn pairs_reply(items: &[(Vec<u8>, f64)], withscores: bool) -> Reply {
    let mut out = Vec::with_capacity(items.len() * 2);
    for (m, s) in items {
        out.push(Reply::bulk(m.clone()));
        if withscores {
            out.push(score_reply(*s));
        }
    }
    Reply::Array(Some(out))
}

impl Cmd<'_> {
    /// The reply of this write when running it on `st` would change
    /// nothing (see [`super::unchanged_reply`]); `None` when it might.
    pub(super) fn unchanged(&self, st: &Store) -> Option<Reply> {
        match self {
            // INCR changes a score (or adds); NX/XX/GT/LT and equal scores
            // can leave every member as it was.
            Cmd::Add(k, f, pairs) if !f.incr => {
                let z = match st.cur(k) {
                    None if f.xx => return Some(Reply::Integer(0)),
                    Some(Value::ZSet(z)) => z,
                    _ => return None,
                };
                let still = pairs.iter().all(|(score, m)| match z.scores.get(*m) {
                    Some(cur) => {
                        let cur = cur.get();
                        f.nx || (f.gt && *score <= cur) || (f.lt && *score >= cur) || *score == cur
                    }
                    None => f.xx,
                });
                still.then_some(Reply::Integer(0))
            }
            Cmd::Rem(k, ms) => match st.cur(k) {
                None => Some(Reply::Integer(0)),
                Some(Value::ZSet(z)) => ms
                    .iter()
                    .all(|m| z.scores.get(m).is_none())
                    .then_some(Reply::Integer(0)),
                Some(_) => None,
            },
            Cmd::Pop(k, ..) => st.cur(k).is_none().then(empty),
            Cmd::MPop(keys, ..) | Cmd::BPop(keys, _) => keys
                .iter()
                .all(|k| st.cur(k).is_none())
                .then_some(Reply::Array(None)),
            Cmd::RemRange(k, r, _) => match st.cur(k) {
                None => Some(Reply::Integer(0)),
                Some(Value::ZSet(z)) => select(z, r).is_empty().then_some(Reply::Integer(0)),
                Some(_) => None,
            },
            _ => None,
        }
    }
}

impl Cmd<'_> {
    pub(super) fn apply(&self, st: &mut Store, now: u64, rng: &mut SplitMix) -> Reply {
        let r = match self {
            Cmd::Add(..)
            | Cmd::Rem(..)
            | Cmd::Pop(..)
            | Cmd::RangeStore(..)
            | Cmd::RemRange(..)
            | Cmd::MPop(..)
            | Cmd::BPop(..)
            | Cmd::Combine(Combine { dst: Some(_), .. }) => self.apply_inner(st),
            _ => return self.read(st, now, rng),
        };
        match self {
            Cmd::Add(k, ..) | Cmd::Rem(k, _) | Cmd::RemRange(k, ..) => st.drop_if_empty(k),
            _ => {}
        }
        r.unwrap_or_else(|e| e)
    }

    fn apply_inner(&self, st: &mut Store) -> Result<Reply, Reply> {
        Ok(match self {
            Cmd::Add(k, f, pairs) => {
                let exists = get(st.cur(k))?.is_some();
                if !exists && f.xx {
                    return Ok(if f.incr {
                        Reply::nil()
                    } else {
                        Reply::Integer(0)
                    });
                }
                let z = get_mut(st, k, true)?.ok_or_else(wrongtype)?;
                let (mut added, mut updated, mut processed) = (0, 0, 0);
                let mut last = 0.0;
                for (score, m) in pairs {
                    match z.scores.get(*m).map(|s| s.get()) {
                        Some(cur) => {
                            if f.nx {
                                continue;
                            }
                            let new = if f.incr { cur + score } else { *score };
                            let Some(new_s) = Score::new(new) else {
                                return Err(Reply::err(
                                    "ERR resulting score is not a number (NaN)",
                                ));
                            };
                            if (f.gt && new <= cur) || (f.lt && new >= cur) {
                                continue;
                            }
                            if new != cur {
                                z.insert(m.to_vec(), new_s);
                                updated += 1;
                            }
                            processed += 1;
                            last = new;
                        }
                        None => {
                            if f.xx {
                                continue;
                            }
                            let Some(s) = Score::new(*score) else {
                                return Err(Reply::err(
                                    "ERR resulting score is not a number (NaN)",
                                ));
                            };
                            z.insert(m.to_vec(), s);
                            added += 1;
                            processed += 1;
                            last = *score;
                        }
                    }
                }
                if added + updated > 0 {
                    st.notify(NotifyFlags::ZSET, if f.incr { "zincr" } else { "zadd" }, k);
                }
                if f.incr {
                    if processed > 0 {
                        score_reply(last)
                    } else {
                        Reply::nil()
                    }
                } else if f.ch {
                    Reply::Integer(added + updated)
                } else {
                    Reply::Integer(added)
                }
            }
            Cmd::Rem(k, ms) => {
                let Some(z) = get_mut(st, k, false)? else {
                    return Ok(Reply::Integer(0));
                };
                let n = ms.iter().filter(|m| z.remove(m).is_some()).count();
                if n > 0 {
                    st.notify(NotifyFlags::ZSET, "zrem", k);
                }
                Reply::Integer(n as i64)
            }
            Cmd::Pop(k, max, count) => {
                let keys = std::slice::from_ref(k);
                let popped = pop_first(st, keys, *max, count.unwrap_or(1))?;
                let mut out = Vec::new();
                for (m, s) in popped.map(|(_, p)| p).unwrap_or_default() {
                    out.push(Reply::bulk(m));
                    out.push(score_reply(s));
                }
                Reply::Array(Some(out))
            }
            Cmd::BPop(keys, max) => match pop_first(st, keys, *max, 1)? {
                Some((k, mut popped)) if !popped.is_empty() => {
                    let (m, s) = popped.remove(0);
                    Reply::Array(Some(vec![
                        Reply::bulk(k.to_vec()),
                        Reply::bulk(m),
                        score_reply(s),
                    ]))
                }
                _ => Reply::Array(None),
            },
            Cmd::MPop(keys, max, count) => match pop_first(st, keys, *max, *count)? {
                None => Reply::Array(None),
                Some((k, popped)) => Reply::Array(Some(vec![
                    Reply::bulk(k.to_vec()),
                    Reply::Array(Some(
                        popped
                            .into_iter()
                            .map(|(m, s)| Reply::Array(Some(vec![Reply::bulk(m), score_reply(s)])))
                            .collect(),
                    )),
                ])),
            },
            Cmd::RemRange(k, r, event) => {
                let Some(z) = get_mut(st, k, false)? else {
                    return Ok(Reply::Integer(0));
                };
                let gone = select(z, r);
                for (m, _) in &gone {
                    z.remove(m);
                }
                if !gone.is_empty() {
                    st.notify(NotifyFlags::ZSET, event, k);
                }
                Reply::Integer(gone.len() as i64)
            }
            Cmd::Combine(c) => {
                let Some(dst) = c.dst else {
                    return Err(syntax());
                };
                let (items, _) = combine(c, |k| st.cur(k))?;
                let mut z = ZSet::default();
                for (m, s) in items {
                    if let Some(s) = Score::new(s) {
                        z.insert(m, s);
                    }
                }
                let n = z.len();
                if n == 0 {
                    st.delete_with_event(dst);
                } else {
                    st.put_value(dst, Value::ZSet(z), None);
                    let ev = match c.op {
                        SetOp::Union => "zunionstore",
                        SetOp::Inter => "zinterstore",
                        SetOp::Diff => "zdiffstore",
                    };
                    st.notify(NotifyFlags::ZSET, ev, dst);
                }
                Reply::Integer(n as i64)
            }
            Cmd::RangeStore(dst, src, r) => {
                let items = get(st.cur(src))?.map(|z| select(z, r)).unwrap_or_default();
                let n = items.len();
                if n == 0 {
                    if st.delete(dst) {
                        st.notify(NotifyFlags::GENERIC, "del", dst);
                    }
                } else {
                    let mut z = ZSet::default();
                    for (m, s) in items {
                        if let Some(s) = Score::new(s) {
                            z.insert(m, s);
                        }
                    }
                    st.put_value(dst, Value::ZSet(z), None);
                    st.notify(NotifyFlags::ZSET, "zrangestore", dst);
                }
                Reply::Integer(n as i64)
            }
            _ => return Err(syntax()),
        })
    }

    pub(super) fn read(&self, st: &Store, now: u64, rng: &mut SplitMix) -> Reply {
        self.read_inner(st, now, rng).unwrap_or_else(|e| e)
    }

    fn read_inner(&self, st: &Store, now: u64, rng: &mut SplitMix) -> Result<Reply, Reply> {
        let z = |k: &[u8]| get(st.value(k, now));
        Ok(match self {
            Cmd::LexCount(k, r) => Reply::Integer(z(k)?.map_or(0, |z| select(z, r).len()) as i64),
            Cmd::RandMember(k, count, withscores) => {
                let Some(z) = z(k)? else {
                    return Ok(match count {
                        None => Reply::nil(),
                        Some(_) => empty(),
                    });
                };
                // Redis walks a sorted set from its highest score down.
                let items: Vec<&(Score, Vec<u8>)> = z.order.iter().rev().collect();
                let Some(count) = count else {
                    return Ok(match items.get(rng.below(items.len().max(1))) {
                        Some((_, m)) => Reply::bulk(m.clone()),
                        None => Reply::nil(),
                    });
                };
                let picks = super::hash::rand_picks(items.len(), *count, rng)?;
                let mut out = Vec::with_capacity(picks.len() * (1 + *withscores as usize));
                for i in picks {
                    let (s, m) = items[i];
                    out.push(Reply::bulk(m.clone()));
                    if *withscores {
                        out.push(score_reply(s.get()));
                    }
                }
                Reply::Array(Some(out))
            }
            Cmd::Combine(c) => {
                let (items, count) = combine(c, |k| st.value(k, now))?;
                if c.card {
                    return Ok(Reply::Integer(count as i64));
                }
                let withscores = c.opts.as_ref().is_ok_and(|o| o.withscores);
                let mut out = Vec::with_capacity(items.len() * (1 + withscores as usize));
                for (m, s) in items {
                    out.push(Reply::bulk(m));
                    if withscores {
                        // Redis replies from a set it built, where a -0
                        // stays -0.
                        out.push(if s == 0.0 && s.is_sign_negative() {
                            Reply::bulk("-0")
                        } else {
                            score_reply(s)
                        });
                    }
                }
                Reply::Array(Some(out))
            }
            Cmd::Score(k, m) => match z(k)?.and_then(|z| z.scores.get(*m)) {
                Some(s) => score_reply(s.get()),
                None => Reply::nil(),
            },
            Cmd::MScore(k, ms) => {
                let z = z(k)?;
                Reply::Array(Some(
                    ms.iter()
                        .map(|m| match z.and_then(|z| z.scores.get(m)) {
                            Some(s) => score_reply(s.get()),
                            None => Reply::nil(),
                        })
                        .collect(),
                ))
            }
            Cmd::Card(k) => Reply::Integer(z(k)?.map_or(0, |z| z.len()) as i64),
            Cmd::Count(k, min, max) => Reply::Integer(z(k)?.map_or(0, |z| {
                z.order
                    .iter()
                    .filter(|(s, _)| above_min(s.get(), *min) && below_max(s.get(), *max))
                    .count()
            }) as i64),
            Cmd::Range(k, r) => match z(k)? {
                None => empty(),
                Some(z) => pairs_reply(&select(z, r), r.withscores),
            },
            Cmd::Rank(k, m, rev) => match z(k)?.and_then(|z| z.rank(m).map(|r| (r, z.len()))) {
                Some((r, n)) => Reply::Integer(if *rev { n - 1 - r } else { r } as i64),
                None => Reply::nil(),
            },
            Cmd::Scan(k, o) => {
                let Some(z) = z(k)? else {
                    return Ok(scan_reply(0, Vec::new()));
                };
                let (next, page) =
                    scan_page(z.scores.keys().map(|m| m.as_slice()), o.cursor, o.count);
                let mut out = Vec::new();
                for m in page {
                    if o.pattern.as_ref().is_some_and(|p| !glob_match(p, m, false)) {
                        continue;
                    }
                    out.push(Reply::bulk(m.to_vec()));
                    if let Some(s) = z.scores.get(m) {
                        out.push(score_reply(s.get()));
                    }
                }
                scan_reply(next, out)
            }
            _ => return Err(syntax()),
        })
    }
}
