//! `ZUNION`, `ZINTER`, `ZDIFF` and their `STORE` forms: their options
//! (weights, aggregate) and combining the sources.

use crate::cmd::args::{eq, int, syntax};
use crate::resp::Reply;
use crate::value::{parse_double, wrongtype, Score, Value, ZSet};
use imbl::OrdSet;

/// The set operation of `ZUNION`, `ZINTER`, `ZDIFF` and their kin.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(in crate::cmd) enum SetOp {
    Union,
    Inter,
    Diff,
}

/// How `ZUNION`/`ZINTER` combine a member's scores.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(in crate::cmd) enum Aggregate {
    Sum,
    Min,
    Max,
}

/// The options after the keys of `ZUNION` and its kin.
pub(in crate::cmd) struct CombineOpts {
    /// One per key (1 when not given).
    pub(super) weights: Vec<f64>,
    pub(super) aggregate: Aggregate,
    pub(super) withscores: bool,
    /// `ZINTERCARD`'s `LIMIT` (0: none).
    pub(super) limit: usize,
}

/// A parsed `ZUNION`-family command.
pub(in crate::cmd) struct Combine<'a> {
    pub(super) op: SetOp,
    /// The `STORE` forms' destination.
    pub(super) dst: Option<&'a [u8]>,
    pub(super) keys: &'a [Vec<u8>],
    /// `ZINTERCARD`: the count alone.
    pub(super) card: bool,
    /// The options, or their error: Redis looks the keys up (a WRONGTYPE
    /// comes first) before it reads them.
    pub(super) opts: Result<CombineOpts, Reply>,
}

/// Redis 7.0's `zunionInterDiffGenericCommand` argument handling: the
/// `numkeys` errors at once, the options' errors after the keys' types.
pub(super) fn parse_combine<'a>(name: &str, a: &'a [Vec<u8>]) -> Result<Combine<'a>, Reply> {
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

pub(super) fn combine_opts(
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
pub(super) enum Src<'v> {
    None,
    Z(&'v ZSet),
    S(&'v OrdSet<Vec<u8>>),
}

impl<'v> Src<'v> {
    pub(super) fn of(v: Option<&'v Value>) -> Result<Src<'v>, Reply> {
        match v {
            None => Ok(Src::None),
            Some(Value::ZSet(z)) => Ok(Src::Z(z)),
            Some(Value::Set(s)) => Ok(Src::S(s)),
            Some(_) => Err(wrongtype()),
        }
    }

    pub(super) fn len(&self) -> usize {
        match self {
            Src::None => 0,
            Src::Z(z) => z.len(),
            Src::S(s) => s.len(),
        }
    }

    /// Members and scores, a sorted set's in score order.
    pub(super) fn items(&self) -> Box<dyn Iterator<Item = (&'v [u8], f64)> + 'v> {
        match *self {
            Src::None => Box::new(std::iter::empty()),
            Src::Z(z) => Box::new(z.order.iter().map(|(s, m)| (m.as_slice(), s.get()))),
            Src::S(s) => Box::new(s.iter().map(|m| (m.as_slice(), 1.0))),
        }
    }

    pub(super) fn score(&self, m: &[u8]) -> Option<f64> {
        match self {
            Src::None => None,
            Src::Z(z) => z.scores.get(m).map(|s| s.get()),
            Src::S(s) => s.contains(m).then_some(1.0),
        }
    }
}

/// Redis' aggregation of one more score `v` into `t` (a sum that is NaN,
/// `inf + -inf`, is 0).
pub(super) fn aggregate(t: f64, v: f64, how: Aggregate) -> f64 {
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
pub(super) type ScoredMember = (Vec<u8>, f64);

/// Members with their scores, in order.
pub(super) type Scored = Vec<ScoredMember>;

/// A weighted score (NaN, `0 * inf`, is 0).
pub(super) fn weighted(w: f64, s: f64) -> f64 {
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
pub(super) fn combine<'v>(
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
