//! Sorted-set ranges: score and lex bounds, their parsing, and selecting
//! a range's members (`ZRANGE` and its kin, `ZCOUNT`, `ZREMRANGEBY*`).

use crate::cmd::args::{eq, index_range, int, syntax};
use crate::resp::Reply;
use crate::value::{parse_double, ZSet};

pub(super) const ERR_FLOAT: &str = "ERR value is not a valid float";

/// One end of a score range.
#[derive(Clone, Copy)]
pub(in crate::cmd) struct ScoreBound {
    pub(super) v: f64,
    pub(super) open: bool,
}

/// One end of a lex range.
#[derive(Clone)]
pub(super) enum LexBound {
    Min,
    Max,
    Incl(Vec<u8>),
    Excl(Vec<u8>),
}

#[derive(Clone)]
pub(super) enum Range {
    Rank(i64, i64),
    Score(ScoreBound, ScoreBound),
    Lex(LexBound, LexBound),
}

/// A parsed ZRANGE (any form).
pub(in crate::cmd) struct RangeSpec {
    pub(super) range: Range,
    pub(super) rev: bool,
    pub(super) offset: i64,
    pub(super) limit: i64,
    pub(super) withscores: bool,
}

pub(super) fn score_bound(b: &[u8]) -> Option<ScoreBound> {
    let (open, rest) = match b.strip_prefix(b"(") {
        Some(r) => (true, r),
        None => (false, b),
    };
    Some(ScoreBound {
        v: parse_double(rest)?,
        open,
    })
}

pub(super) fn lex_bound(b: &[u8]) -> Option<LexBound> {
    match b.first()? {
        b'-' if b.len() == 1 => Some(LexBound::Min),
        b'+' if b.len() == 1 => Some(LexBound::Max),
        b'[' => Some(LexBound::Incl(b[1..].to_vec())),
        b'(' => Some(LexBound::Excl(b[1..].to_vec())),
        _ => None,
    }
}

#[derive(Clone, Copy, PartialEq)]
pub(super) enum Kind {
    Auto,
    Rank,
    Score,
    Lex,
}

/// Redis' `zrangeGenericCommand` argument handling: options from
/// `a[opts..]`, the range from `a[lo]`, `a[hi]`.
pub(super) fn parse_range(
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

/// A range with no `REV`, `LIMIT` or `WITHSCORES`.
pub(super) fn plain(range: Range) -> RangeSpec {
    RangeSpec {
        range,
        rev: false,
        offset: 0,
        limit: -1,
        withscores: false,
    }
}

/// `ZLEXCOUNT`'s and `ZREMRANGEBYLEX`'s range.
pub(super) fn lex_spec(min: &[u8], max: &[u8]) -> Result<RangeSpec, Reply> {
    match (lex_bound(min), lex_bound(max)) {
        (Some(x), Some(y)) => Ok(plain(Range::Lex(x, y))),
        _ => Err(Reply::err("ERR min or max not valid string range item")),
    }
}

pub(super) fn above_min(v: f64, b: ScoreBound) -> bool {
    if b.open {
        v > b.v
    } else {
        v >= b.v
    }
}

pub(super) fn below_max(v: f64, b: ScoreBound) -> bool {
    if b.open {
        v < b.v
    } else {
        v <= b.v
    }
}

pub(super) fn lex_above_min(m: &[u8], b: &LexBound) -> bool {
    match b {
        LexBound::Min => true,
        LexBound::Max => false,
        LexBound::Incl(x) => m >= x.as_slice(),
        LexBound::Excl(x) => m > x.as_slice(),
    }
}

pub(super) fn lex_below_max(m: &[u8], b: &LexBound) -> bool {
    match b {
        LexBound::Min => false,
        LexBound::Max => true,
        LexBound::Incl(x) => m <= x.as_slice(),
        LexBound::Excl(x) => m < x.as_slice(),
    }
}

/// The (member, score) pairs a range selects, in reply order.
pub(super) fn select(z: &ZSet, r: &RangeSpec) -> Vec<(Vec<u8>, f64)> {
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
pub(super) fn lex_key(b: &LexBound) -> (u8, &[u8]) {
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
pub(super) fn lex_walk(
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

pub(super) fn limit(
    it: impl Iterator<Item = (Vec<u8>, f64)>,
    r: &RangeSpec,
) -> Vec<(Vec<u8>, f64)> {
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
