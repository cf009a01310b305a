//! [`Value`]: what a key holds — a string, a hash, a list, a set, a
//! sorted set or a stream — and the pieces the data-type commands share: the WRONGTYPE
//! error, the sorted set's score ([`Score`]), a seeded PRNG for the
//! commands that pick at random ([`SplitMix`]), and the cursor of the
//! `SCAN` family ([`scan_page`]).
//!
//! Every collection is a persistent (structure-sharing) `imbl` map, set or
//! vector, ordered (never hashed with a per-process seed): iteration order
//! is the same on every replica, so a seeded pick (`SPOP`) or a cursor
//! (`HSCAN`) means the same thing everywhere, and a snapshot copy is O(1).

use crate::resp::Reply;
use imbl::{OrdMap, OrdSet, Vector};
use std::cmp::Ordering;

/// `ERR value is not an integer or out of range`.
pub const ERR_NOT_INTEGER: &str = "ERR value is not an integer or out of range";
/// `ERR increment or decrement would overflow`.
pub const ERR_OVERFLOW: &str = "ERR increment or decrement would overflow";
/// The reply to an `APPEND` that would exceed `MAX_OP_BYTES` (`crate::op`).
pub const ERR_TOO_BIG: &str = "ERR string exceeds maximum allowed size (proto-max-bulk-len)";
/// `WRONGTYPE Operation against a key holding the wrong kind of value`.
pub const ERR_WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

/// The WRONGTYPE error reply.
pub fn wrongtype() -> Reply {
    Reply::err(ERR_WRONGTYPE)
}

/// A sorted set's score: a double that is never NaN, `-0` stored as `0`,
/// totally ordered.
#[derive(Debug, Clone, Copy)]
pub struct Score(f64);

impl Score {
    /// `None` for NaN.
    pub fn new(v: f64) -> Option<Score> {
        if v.is_nan() {
            None
        } else if v == 0.0 {
            Some(Score(0.0))
        } else {
            Some(Score(v))
        }
    }

    /// The double.
    pub fn get(self) -> f64 {
        self.0
    }
}

impl PartialEq for Score {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o) == Ordering::Equal
    }
}
impl Eq for Score {}
impl PartialOrd for Score {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Score {
    fn cmp(&self, o: &Self) -> Ordering {
        self.0.total_cmp(&o.0)
    }
}

/// A sorted set: member → score, and (score, member) in order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ZSet {
    /// Member → score.
    pub scores: OrdMap<Vec<u8>, Score>,
    /// (score, member), ascending: Redis' order (ties by member bytes).
    pub order: OrdSet<(Score, Vec<u8>)>,
}

impl ZSet {
    /// Number of members.
    pub fn len(&self) -> usize {
        self.scores.len()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.scores.is_empty()
    }

    /// Sets `member`'s score; returns the old one.
    pub fn insert(&mut self, member: Vec<u8>, score: Score) -> Option<Score> {
        let old = self.scores.insert(member.clone(), score);
        if let Some(o) = old {
            self.order.remove(&(o, member.clone()));
        }
        self.order.insert((score, member));
        old
    }

    /// Removes `member`; returns its score.
    pub fn remove(&mut self, member: &[u8]) -> Option<Score> {
        let old = self.scores.remove(member)?;
        self.order.remove(&(old, member.to_vec()));
        Some(old)
    }

    /// 0-based rank of `member` in ascending order.
    pub fn rank(&self, member: &[u8]) -> Option<usize> {
        let s = *self.scores.get(member)?;
        Some(self.order.range(..(s, member.to_vec())).count())
    }
}

/// What a key holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    /// A string.
    Str(Vec<u8>),
    /// A hash: field → value.
    Hash(OrdMap<Vec<u8>, Vec<u8>>),
    /// A list.
    List(Vector<Vec<u8>>),
    /// A set.
    Set(OrdSet<Vec<u8>>),
    /// A sorted set.
    ZSet(ZSet),
    /// A stream ([`crate::data::stream`]).
    Stream(crate::data::stream::Stream),
}

impl Value {
    /// The name `TYPE` replies with.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Str(_) => "string",
            Value::Hash(_) => "hash",
            Value::List(_) => "list",
            Value::Set(_) => "set",
            Value::ZSet(_) => "zset",
            Value::Stream(_) => "stream",
        }
    }

    /// True for a collection with no element (such a key is deleted).
    pub fn is_empty_collection(&self) -> bool {
        match self {
            Value::Str(_) => false,
            Value::Hash(h) => h.is_empty(),
            Value::List(l) => l.is_empty(),
            Value::Set(s) => s.is_empty(),
            Value::ZSet(z) => z.is_empty(),
            // An empty stream is a key (Redis keeps it).
            Value::Stream(_) => false,
        }
    }
}

/// A small seeded PRNG (SplitMix64): the random picks of `SPOP` and
/// `SRANDMEMBER` are drawn from the seed their op carries, so every
/// replica draws the same.
#[derive(Debug, Clone)]
pub struct SplitMix(xlane_stats::SplitMix64);

impl SplitMix {
    /// A generator from `seed`.
    pub fn new(seed: u64) -> Self {
        SplitMix(xlane_stats::SplitMix64::new(seed))
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }

    /// A number in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
}

/// A stable 63-bit hash of `b` (FNV-1a), the order of the `SCAN` family.
pub fn scan_hash(b: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &x in b {
        h ^= u64::from(x);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h >> 1
}

/// One page of a `SCAN`-family iteration over `items` (in any order).
///
/// Items are visited in the order of ([`scan_hash`], bytes); the cursor is
/// the hash to resume at plus one (0: start, and 0 again at the end). An
/// item present from the first call to the last is returned at least once
/// whatever is added or removed in between; items of equal hash are
/// returned in the same page. Cost: O(n) per page.
pub fn scan_page<'a>(
    items: impl Iterator<Item = &'a [u8]>,
    cursor: u64,
    count: usize,
) -> (u64, Vec<&'a [u8]>) {
    let from = cursor.saturating_sub(1);
    let mut all: Vec<(u64, &[u8])> = items
        .map(|b| (scan_hash(b), b))
        .filter(|(h, _)| cursor == 0 || *h >= from)
        .collect();
    all.sort_unstable();
    let count = count.max(1);
    let mut end = all.len().min(count);
    while end < all.len() && end > 0 && all[end].0 == all[end - 1].0 {
        end += 1;
    }
    let next = if end < all.len() { all[end].0 + 1 } else { 0 };
    (next, all[..end].iter().map(|(_, b)| *b).collect())
}

/// Redis 7.0's text of a sorted-set score (`ZSCORE`, `WITHSCORES`):
/// C's `%.17g`, `inf`/`-inf` for infinities.
pub fn fmt_score(v: f64) -> String {
    if v.is_infinite() {
        return if v > 0.0 { "inf".into() } else { "-inf".into() };
    }
    if v == 0.0 {
        return "0".into();
    }
    // 17 significant digits: d.dddddddddddddddde±X.
    let e = format!("{v:.16e}");
    let Some((mant, exp)) = e.split_once('e') else {
        return e;
    };
    let x: i32 = exp.parse().unwrap_or(0);
    let trim = |s: String| -> String {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s
        }
    };
    if !(-4..17).contains(&x) {
        let m = trim(mant.to_string());
        let sign = if x < 0 { '-' } else { '+' };
        format!("{m}e{sign}{:02}", x.abs())
    } else {
        let decimals = (16 - x).max(0) as usize;
        trim(format!("{v:.decimals$}"))
    }
}

/// The text of an `HINCRBYFLOAT` result: the shortest decimal that reads
/// back as the same double, never with an exponent (Redis prints its long
/// double with `%.17Lf` and strips trailing zeros; the two agree for every
/// value a double holds exactly, such as halves and quarters).
pub fn fmt_float(v: f64) -> String {
    format!("{v}")
}

/// Parses a double as Redis does (`inf`, `-inf`, `+inf` accepted; NaN and
/// trailing junk refused).
pub fn parse_double(b: &[u8]) -> Option<f64> {
    let s = std::str::from_utf8(b).ok()?;
    if s.is_empty() || s.starts_with(char::is_whitespace) || s.ends_with(char::is_whitespace) {
        return None;
    }
    let v = match s.to_ascii_lowercase().as_str() {
        "inf" | "+inf" | "infinity" | "+infinity" => f64::INFINITY,
        "-inf" | "-infinity" => f64::NEG_INFINITY,
        l if l.contains("nan") || l.contains("inf") => return None,
        _ => s.parse::<f64>().ok()?,
    };
    Some(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scores_print_as_redis_7_0_does() {
        // The right column is what redis-server 7.0.15 replied.
        for (v, want) in [
            (1.0, "1"),
            (-0.0, "0"),
            (3.0, "3"),
            (-2.5, "-2.5"),
            (0.1, "0.10000000000000001"),
            (0.1 + 0.2, "0.30000000000000004"),
            (f64::INFINITY, "inf"),
            (f64::NEG_INFINITY, "-inf"),
            (1e20, "1e+20"),
            (1.5e-7, "1.4999999999999999e-07"),
        ] {
            assert_eq!(fmt_score(v), want, "{v}");
        }
        assert_eq!(fmt_float(1e20), "100000000000000000000");
        assert_eq!(fmt_float(10.5), "10.5");
    }

    #[test]
    fn doubles_parse_as_redis_does() {
        for (s, want) in [
            ("1", Some(1.0)),
            ("-2.5", Some(-2.5)),
            ("inf", Some(f64::INFINITY)),
            ("-inf", Some(f64::NEG_INFINITY)),
            ("+inf", Some(f64::INFINITY)),
            ("nan", None),
            ("1x", None),
            (" 1", None),
            ("", None),
        ] {
            assert_eq!(parse_double(s.as_bytes()), want, "{s}");
        }
    }

    #[test]
    fn scan_visits_every_item_once_across_pages() {
        let items: Vec<Vec<u8>> = (0..100).map(|i| format!("k{i}").into_bytes()).collect();
        let mut seen = Vec::new();
        let mut cursor = 0;
        loop {
            let (next, page) = scan_page(items.iter().map(|v| v.as_slice()), cursor, 7);
            assert!(page.len() <= 8 || next == 0);
            seen.extend(page.into_iter().map(<[u8]>::to_vec));
            cursor = next;
            if cursor == 0 {
                break;
            }
        }
        seen.sort();
        let mut want = items.clone();
        want.sort();
        assert_eq!(seen, want);
    }

    #[test]
    fn zset_orders_by_score_then_member() {
        let mut z = ZSet::default();
        for (m, s) in [("b", 1.0), ("a", 1.0), ("c", 0.5)] {
            z.insert(m.into(), Score::new(s).unwrap());
        }
        let order: Vec<&[u8]> = z.order.iter().map(|(_, m)| m.as_slice()).collect();
        assert_eq!(order, [&b"c"[..], b"a", b"b"]);
        assert_eq!(z.rank(b"b"), Some(2));
        assert_eq!(z.remove(b"a").map(Score::get), Some(1.0));
        assert_eq!(z.rank(b"b"), Some(1));
    }
}
