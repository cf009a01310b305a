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

use super::args::{
    empty, eq, index_range, int, parse_scan, pos_count, scan_reply, syntax, timeout_ms, ScanOpts,
};
use super::typed::{typed, typed_mut};

use crate::notify::{glob_match, NotifyFlags};
use crate::resp::Reply;
use crate::store::Store;
use crate::value::{fmt_score, parse_double, scan_page, wrongtype, Score, SplitMix, Value, ZSet};
use imbl::OrdSet;

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

/// The set operation of `ZUNION`, `ZINTER`, `ZDIFF` and their kin.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum SetOp {
    Union,
    Inter,
    Diff,
}

/// How `ZUNION`/`ZINTER` combine a member's scores.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Aggregate {
    Sum,
    Min,
    Max,
}

/// The options after the keys of `ZUNION` and its kin.
pub(super) struct CombineOpts {
    /// One per key (1 when not given).
    weights: Vec<f64>,
    aggregate: Aggregate,
    withscores: bool,
    /// `ZINTERCARD`'s `LIMIT` (0: none).
    limit: usize,
}

/// A parsed `ZUNION`-family command.
pub(super) struct Combine<'a> {
    op: SetOp,
    /// The `STORE` forms' destination.
    dst: Option<&'a [u8]>,
    keys: &'a [Vec<u8>],
    /// `ZINTERCARD`: the count alone.
    card: bool,
    /// The options, or their error: Redis looks the keys up (a WRONGTYPE
    /// comes first) before it reads them.
    opts: Result<CombineOpts, Reply>,
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

/// A range with no `REV`, `LIMIT` or `WITHSCORES`.
fn plain(range: Range) -> RangeSpec {
    RangeSpec {
        range,
        rev: false,
        offset: 0,
        limit: -1,
        withscores: false,
    }
}

/// `ZLEXCOUNT`'s and `ZREMRANGEBYLEX`'s range.
fn lex_spec(min: &[u8], max: &[u8]) -> Result<RangeSpec, Reply> {
    match (lex_bound(min), lex_bound(max)) {
        (Some(x), Some(y)) => Ok(plain(Range::Lex(x, y))),
        _ => Err(Reply::err("ERR min or max not valid string range item")),
    }
}

/// Redis 7.0's `zunionInterDiffGenericCommand` argument handling: the
/// `numkeys` errors at once, the options' errors after the keys' types.
fn parse_combine<'a>(name: &str, a: &'a [Vec<u8>]) -> Result<Combine<'a>, Reply> {
    let store = name.ends_with("store");
    let at = if store { 2 } else { 1 };
    let op = if name.starts_with("zunion") {
        SetOp::Union
    } else if name.starts_with("zinter") {
        SetOp::Inter
    } else {
        SetOp::Diff
    };
    let card = name == "zintercard";
    let setnum = int(&a[at])?;
    if setnum < 1 {
        return Err(Reply::err(format!(
            "ERR at least 1 input key is needed for '{name}' command"
        )));
    }
    let end = usize::try_from(setnum)
        .ok()
        .filter(|n| *n <= a.len() - (at + 1))
        .map(|n| at + 1 + n)
        .ok_or_else(syntax)?;
    let keys = &a[at + 1..end];
    Ok(Combine {
        op,
        dst: store.then(|| a[1].as_slice()),
        keys,
        card,
        opts: combine_opts(op, store, card, keys.len(), &a[end..]),
    })
}

fn combine_opts(
    op: SetOp,
    store: bool,
    card: bool,
    setnum: usize,
    rest: &[Vec<u8>],
) -> Result<CombineOpts, Reply> {
    let mut o = CombineOpts {
        weights: vec![1.0; setnum],
        aggregate: Aggregate::Sum,
        withscores: false,
        limit: 0,
    };
    let mut j = 0;
    while j < rest.len() {
        let remaining = rest.len() - j;
        let w = &rest[j];
        if op != SetOp::Diff && !card && remaining > setnum && eq(w, "weights") {
            for (i, v) in rest[j + 1..=j + setnum].iter().enumerate() {
                o.weights[i] =
                    parse_double(v).ok_or_else(|| Reply::err("ERR weight value is not a float"))?;
            }
            j += 1 + setnum;
        } else if op != SetOp::Diff && !card && remaining >= 2 && eq(w, "aggregate") {
            let v = &rest[j + 1];
            o.aggregate = if eq(v, "sum") {
                Aggregate::Sum
            } else if eq(v, "min") {
                Aggregate::Min
            } else if eq(v, "max") {
                Aggregate::Max
            } else {
                return Err(syntax());
            };
            j += 2;
        } else if !store && !card && eq(w, "withscores") {
            o.withscores = true;
            j += 1;
        } else if card && remaining >= 2 && eq(w, "limit") {
            o.limit = crate::resp::parse_i64_strict(&rest[j + 1])
                .and_then(|l| usize::try_from(l).ok())
                .ok_or_else(|| Reply::err("ERR LIMIT can't be negative"))?;
            j += 2;
        } else {
            return Err(syntax());
        }
    }
    Ok(o)
}

/// One input of `ZUNION` and its kin: a sorted set, or a set (every
/// member scored 1), or nothing.
enum Src<'v> {
    None,
    Z(&'v ZSet),
    S(&'v OrdSet<Vec<u8>>),
}

impl<'v> Src<'v> {
    fn of(v: Option<&'v Value>) -> Result<Src<'v>, Reply> {
        match v {
            None => Ok(Src::None),
            Some(Value::ZSet(z)) => Ok(Src::Z(z)),
            Some(Value::Set(s)) => Ok(Src::S(s)),
            Some(_) => Err(wrongtype()),
        }
    }

    fn len(&self) -> usize {
        match self {
            Src::None => 0,
            Src::Z(z) => z.len(),
            Src::S(s) => s.len(),
        }
    }

    /// Members and scores, a sorted set's in score order.
    fn items(&self) -> Box<dyn Iterator<Item = (&'v [u8], f64)> + 'v> {
        match *self {
            Src::None => Box::new(std::iter::empty()),
            Src::Z(z) => Box::new(z.order.iter().map(|(s, m)| (m.as_slice(), s.get()))),
            Src::S(s) => Box::new(s.iter().map(|m| (m.as_slice(), 1.0))),
        }
    }

    fn score(&self, m: &[u8]) -> Option<f64> {
        match self {
            Src::None => None,
            Src::Z(z) => z.scores.get(m).map(|s| s.get()),
            Src::S(s) => s.contains(m).then_some(1.0),
        }
    }
}

/// Redis' aggregation of one more score `v` into `t` (a sum that is NaN,
/// `inf + -inf`, is 0).
fn aggregate(t: f64, v: f64, how: Aggregate) -> f64 {
    match how {
        Aggregate::Sum => {
            let s = t + v;
            if s.is_nan() {
                0.0
            } else {
                s
            }
        }
        Aggregate::Min => {
            if v < t {
                v
            } else {
                t
            }
        }
        Aggregate::Max => {
            if v > t {
                v
            } else {
                t
            }
        }
    }
}

/// A member with its score.
type ScoredMember = (Vec<u8>, f64);

/// Members with their scores, in order.
type Scored = Vec<ScoredMember>;

/// A weighted score (NaN, `0 * inf`, is 0).
fn weighted(w: f64, s: f64) -> f64 {
    let v = w * s;
    if v.is_nan() {
        0.0
    } else {
        v
    }
}

/// The result of a `ZUNION`-family command over `keys` (looked up with
/// `lookup`; every key's type is checked before the options' errors come
/// out): the members and scores in order, and for `ZINTERCARD` the count.
fn combine<'v>(
    c: &Combine<'_>,
    lookup: impl Fn(&[u8]) -> Option<&'v Value>,
) -> Result<(Scored, usize), Reply> {
    let mut srcs = Vec::with_capacity(c.keys.len());
    for k in c.keys {
        srcs.push(Src::of(lookup(k))?);
    }
    let o = c.opts.as_ref().map_err(Clone::clone)?;
    // Smallest first, as Redis orders them (stable: equal sizes keep the
    // order given, as glibc's merge sort does): it decides which scores a
    // sum adds first.
    let mut srcs: Vec<(Src<'v>, f64)> = srcs.into_iter().zip(o.weights.iter().copied()).collect();
    if c.op != SetOp::Diff {
        srcs.sort_by_key(|(s, _)| s.len());
    }
    let mut out: Vec<(Vec<u8>, f64)> = Vec::new();
    let mut count = 0;
    match c.op {
        SetOp::Inter => {
            let Some(((first, w0), rest)) = srcs.split_first() else {
                return Ok((Vec::new(), 0));
            };
            let limit = if o.limit == 0 { usize::MAX } else { o.limit };
            'members: for (m, s) in first.items() {
                let mut score = weighted(*w0, s);
                for (src, w) in rest {
                    let Some(v) = src.score(m) else {
                        continue 'members;
                    };
                    // Only the first set's weighted score has NaN made
                    // 0 (Redis): `inf + 0 * inf` sums to NaN, then 0.
                    score = aggregate(score, *w * v, o.aggregate);
                }
                count += 1;
                if c.card {
                    if count >= limit {
                        break;
                    }
                } else {
                    out.push((m.to_vec(), score));
                }
            }
        }
        SetOp::Union => {
            let mut acc: std::collections::BTreeMap<&[u8], f64> = Default::default();
            for (src, w) in &srcs {
                for (m, s) in src.items() {
                    let v = weighted(*w, s);
                    acc.entry(m)
                        .and_modify(|t| *t = aggregate(*t, v, o.aggregate))
                        .or_insert(v);
                }
            }
            out = acc.into_iter().map(|(m, s)| (m.to_vec(), s)).collect();
        }
        SetOp::Diff => {
            if let Some(((first, _), rest)) = srcs.split_first() {
                out = first
                    .items()
                    .filter(|(m, _)| rest.iter().all(|(s, _)| s.score(m).is_none()))
                    .map(|(m, s)| (m.to_vec(), s))
                    .collect();
            }
        }
    }
    // Redis' order: by score (-0 and 0 tie), then member; each keeps the
    // score computed, a -0 included (a reply shows it, a stored set not).
    out.sort_by(|(ma, sa), (mb, sb)| {
        Score::new(*sa)
            .cmp(&Score::new(*sb))
            .then_with(|| ma.cmp(mb))
    });
    Ok((out, count))
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
