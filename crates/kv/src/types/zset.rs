//! Sorted sets: ZADD (NX/XX/GT/LT/CH/INCR), ZREM, ZSCORE, ZMSCORE,
//! ZINCRBY, ZCARD, ZCOUNT, ZRANGE (BYSCORE/BYLEX/REV/LIMIT/WITHSCORES) and
//! its older forms, ZRANK, ZREVRANK, ZPOPMIN, ZPOPMAX, ZRANGESTORE, ZSCAN.
//!
//! `ZPOPMIN`/`ZPOPMAX` need no seed: the members with the lowest (highest)
//! scores, ties by member bytes, are the same on every replica.

use super::{
    empty, eq, index_range, int, parse_scan, pos_count, scan_reply, syntax, typed, typed_mut,
    ScanOpts,
};
use crate::commands::{spec, CommandSpec, R, W, WF};
use crate::pubsub::{glob_match, NotifyFlags};
use crate::resp::Reply;
use crate::store::Store;
use crate::value::{fmt_score, parse_double, scan_page, wrongtype, Score, Value, ZSet};

pub(super) const SPECS: &[CommandSpec] = &[
    spec("zadd", -4, WF, 1, 1, 1),
    spec("zrem", -3, &["write", "fast"], 1, 1, 1),
    spec("zscore", 3, R, 1, 1, 1),
    spec("zmscore", -3, R, 1, 1, 1),
    spec("zincrby", 4, WF, 1, 1, 1),
    spec("zcard", 2, R, 1, 1, 1),
    spec("zcount", 4, R, 1, 1, 1),
    spec("zrange", -4, &["readonly"], 1, 1, 1),
    spec("zrangebyscore", -4, &["readonly"], 1, 1, 1),
    spec("zrevrange", -4, &["readonly"], 1, 1, 1),
    spec("zrevrangebyscore", -4, &["readonly"], 1, 1, 1),
    spec("zrangebylex", -4, &["readonly"], 1, 1, 1),
    spec("zrevrangebylex", -4, &["readonly"], 1, 1, 1),
    spec("zrank", 3, R, 1, 1, 1),
    spec("zrevrank", 3, R, 1, 1, 1),
    spec("zpopmin", -2, &["write", "fast"], 1, 1, 1),
    spec("zpopmax", -2, &["write", "fast"], 1, 1, 1),
    spec("zrangestore", -5, W, 1, 2, 1),
    spec("zscan", -3, &["readonly", "random"], 1, 1, 1),
];

const ERR_FLOAT: &str = "ERR value is not a valid float";

/// One end of a score range.
#[derive(Clone, Copy)]
pub(super) struct ScoreBound {
    v: f64,
    open: bool,
}

/// One end of a lex range.
#[derive(Clone)]
enum LexBound {
    Min,
    Max,
    Incl(Vec<u8>),
    Excl(Vec<u8>),
}

#[derive(Clone)]
enum Range {
    Rank(i64, i64),
    Score(ScoreBound, ScoreBound),
    Lex(LexBound, LexBound),
}

/// A parsed ZRANGE (any form).
pub(super) struct RangeSpec {
    range: Range,
    rev: bool,
    offset: i64,
    limit: i64,
    withscores: bool,
}

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
}

fn score_bound(b: &[u8]) -> Option<ScoreBound> {
    let (open, rest) = match b.strip_prefix(b"(") {
        Some(r) => (true, r),
        None => (false, b),
    };
    Some(ScoreBound {
        v: parse_double(rest)?,
        open,
    })
}

fn lex_bound(b: &[u8]) -> Option<LexBound> {
    match b.first()? {
        b'-' if b.len() == 1 => Some(LexBound::Min),
        b'+' if b.len() == 1 => Some(LexBound::Max),
        b'[' => Some(LexBound::Incl(b[1..].to_vec())),
        b'(' => Some(LexBound::Excl(b[1..].to_vec())),
        _ => None,
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Auto,
    Rank,
    Score,
    Lex,
}

/// Redis' `zrangeGenericCommand` argument handling: options from
/// `a[opts..]`, the range from `a[lo]`, `a[hi]`.
fn parse_range(
    a: &[Vec<u8>],
    lo: usize,
    mut kind: Kind,
    mut rev: Option<bool>,
    store: bool,
) -> Result<RangeSpec, Reply> {
    let (mut offset, mut limit, mut withscores) = (0, -1, false);
    let mut j = lo + 2;
    while j < a.len() {
        let left = a.len() - j - 1;
        let o = &a[j];
        if !store && eq(o, "withscores") {
            withscores = true;
        } else if eq(o, "limit") && left >= 2 {
            offset = int(&a[j + 1])?;
            limit = int(&a[j + 2])?;
            j += 2;
        } else if rev.is_none() && eq(o, "rev") {
            rev = Some(true);
        } else if kind == Kind::Auto && eq(o, "bylex") {
            kind = Kind::Lex;
        } else if kind == Kind::Auto && eq(o, "byscore") {
            kind = Kind::Score;
        } else {
            return Err(syntax());
        }
        j += 1;
    }
    let rev = rev.unwrap_or(false);
    if kind == Kind::Auto {
        kind = Kind::Rank;
    }
    if limit != -1 && kind == Kind::Rank {
        return Err(Reply::err(
            "ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX",
        ));
    }
    if withscores && kind == Kind::Lex {
        return Err(Reply::err(
            "ERR syntax error, WITHSCORES not supported in combination with BYLEX",
        ));
    }
    let (mut min, mut max) = (&a[lo], &a[lo + 1]);
    if rev && kind != Kind::Rank {
        std::mem::swap(&mut min, &mut max);
    }
    let range = match kind {
        Kind::Score => match (score_bound(min), score_bound(max)) {
            (Some(x), Some(y)) => Range::Score(x, y),
            _ => return Err(Reply::err("ERR min or max is not a float")),
        },
        Kind::Lex => match (lex_bound(min), lex_bound(max)) {
            (Some(x), Some(y)) => Range::Lex(x, y),
            _ => return Err(Reply::err("ERR min or max not valid string range item")),
        },
        _ => Range::Rank(int(min)?, int(max)?),
    };
    Ok(RangeSpec {
        range,
        rev,
        offset,
        limit,
        withscores,
    })
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
        _ => return Err(syntax()),
    })
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

fn above_min(v: f64, b: ScoreBound) -> bool {
    if b.open {
        v > b.v
    } else {
        v >= b.v
    }
}

fn below_max(v: f64, b: ScoreBound) -> bool {
    if b.open {
        v < b.v
    } else {
        v <= b.v
    }
}

fn lex_above_min(m: &[u8], b: &LexBound) -> bool {
    match b {
        LexBound::Min => true,
        LexBound::Max => false,
        LexBound::Incl(x) => m >= x.as_slice(),
        LexBound::Excl(x) => m > x.as_slice(),
    }
}

fn lex_below_max(m: &[u8], b: &LexBound) -> bool {
    match b {
        LexBound::Min => false,
        LexBound::Max => true,
        LexBound::Incl(x) => m <= x.as_slice(),
        LexBound::Excl(x) => m < x.as_slice(),
    }
}

/// The (member, score) pairs a range selects, in reply order.
fn select(z: &ZSet, r: &RangeSpec) -> Vec<(Vec<u8>, f64)> {
    let items = z.order.iter().map(|(s, m)| (m.clone(), s.get()));
    let ordered: Box<dyn Iterator<Item = (Vec<u8>, f64)>> = if r.rev {
        Box::new(items.rev())
    } else {
        Box::new(items)
    };
    match &r.range {
        Range::Rank(s, e) => match index_range(*s, *e, z.len()) {
            None => Vec::new(),
            Some((s, e)) => ordered.skip(s).take(e + 1 - s).collect(),
        },
        Range::Score(min, max) => {
            let inside = ordered.filter(|(_, v)| above_min(*v, *min) && below_max(*v, *max));
            limit(inside, r)
        }
        Range::Lex(min, max) => {
            let all: Vec<(Vec<u8>, f64)> = ordered.collect();
            lex_walk(all, min, max, r)
        }
    }
}

/// Where a lex bound sorts: `-` first, `+` last.
fn lex_key(b: &LexBound) -> (u8, &[u8]) {
    match b {
        LexBound::Min => (0, &[]),
        LexBound::Incl(x) | LexBound::Excl(x) => (1, x),
        LexBound::Max => (2, &[]),
    }
}

/// A lex range as Redis walks a small sorted set (its listpack form),
/// over `items` in reply order: meaningful when all scores are equal (what
/// `BYLEX` is for), and otherwise the same members Redis returns — from
/// the first member at or above `min` (at or below `max`, reversed), if it
/// is inside the other bound too, past `LIMIT`'s offset (skipped
/// unchecked), while the members stay inside.
fn lex_walk(
    items: Vec<(Vec<u8>, f64)>,
    min: &LexBound,
    max: &LexBound,
    r: &RangeSpec,
) -> Vec<(Vec<u8>, f64)> {
    let rev = r.rev;
    let excl = |b: &LexBound| matches!(b, LexBound::Excl(_));
    let c = lex_key(min).cmp(&lex_key(max));
    if c.is_gt() || (c.is_eq() && (excl(min) || excl(max))) {
        return Vec::new();
    }
    // In ascending order, the tail must reach min and the head max.
    let (head, tail) = match (items.first(), items.last()) {
        (Some(f), Some(l)) if rev => (l, f),
        (Some(f), Some(l)) => (f, l),
        _ => return Vec::new(),
    };
    if !lex_above_min(&tail.0, min) || !lex_below_max(&head.0, max) {
        return Vec::new();
    }
    let enter = |m: &[u8]| {
        if rev {
            lex_below_max(m, max)
        } else {
            lex_above_min(m, min)
        }
    };
    let stay = |m: &[u8]| {
        if rev {
            lex_above_min(m, min)
        } else {
            lex_below_max(m, max)
        }
    };
    let Some(start) = items.iter().position(|(m, _)| enter(m)) else {
        return Vec::new();
    };
    // Redis' walk starts only if that first member is inside at both ends.
    if !stay(&items[start].0) {
        return Vec::new();
    }
    if r.offset < 0 {
        return Vec::new();
    }
    let inside = items
        .into_iter()
        .skip(start)
        .skip(r.offset as usize)
        .take_while(|(m, _)| stay(m));
    if r.limit < 0 {
        inside.collect()
    } else {
        inside.take(r.limit as usize).collect()
    }
}

fn limit(it: impl Iterator<Item = (Vec<u8>, f64)>, r: &RangeSpec) -> Vec<(Vec<u8>, f64)> {
    if r.offset < 0 {
        return Vec::new();
    }
    let it = it.skip(r.offset as usize);
    if r.limit < 0 {
        it.collect()
    } else {
        it.take(r.limit as usize).collect()
    }
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
            _ => None,
        }
    }
}

impl Cmd<'_> {
    pub(super) fn apply(&self, st: &mut Store, now: u64) -> Reply {
        let r = match self {
            Cmd::Add(..) | Cmd::Rem(..) | Cmd::Pop(..) | Cmd::RangeStore(..) => {
                self.apply_inner(st)
            }
            _ => return self.read(st, now),
        };
        match self {
            Cmd::Add(k, ..) | Cmd::Rem(k, _) | Cmd::Pop(k, ..) => st.drop_if_empty(k),
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
                let Some(z) = get_mut(st, k, false)? else {
                    return Ok(empty());
                };
                let n = count.unwrap_or(1).min(z.len());
                let mut out = Vec::with_capacity(n * 2);
                for _ in 0..n {
                    let first = if *max {
                        z.order.get_max().cloned()
                    } else {
                        z.order.get_min().cloned()
                    };
                    if let Some((s, m)) = first {
                        z.remove(&m);
                        out.push(Reply::bulk(m));
                        out.push(score_reply(s.get()));
                    }
                }
                if n > 0 {
                    st.notify(
                        NotifyFlags::ZSET,
                        if *max { "zpopmax" } else { "zpopmin" },
                        k,
                    );
                }
                Reply::Array(Some(out))
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

    pub(super) fn read(&self, st: &Store, now: u64) -> Reply {
        self.read_inner(st, now).unwrap_or_else(|e| e)
    }

    fn read_inner(&self, st: &Store, now: u64) -> Result<Reply, Reply> {
        let z = |k: &[u8]| get(st.value(k, now));
        Ok(match self {
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
