//! `SORT` and `SORT_RO`: a list's, set's or sorted set's elements sorted
//! by their numeric value, as text (`ALPHA`) or by other keys (`BY`), with
//! `LIMIT`, `GET` patterns (`#`, `key*`, `hash*->field`), `ASC`/`DESC` and,
//! for `SORT`, `STORE` into a list.
//!
//! `BY` and `GET` read other keys: the result is a function of the store
//! alone, the same on every member. `SORT ... STORE` is a write (a list
//! replaces the destination); `SORT` without it changes nothing and is
//! answered like a read ([`Cmd::unchanged`]); `SORT_RO` is a read.
//!
//! Order where Redis leaves it open: a set's elements come in its
//! (ordered) iteration order when nothing sorts them (`BY` a constant),
//! and elements that compare equal (`ALPHA` with `BY` values that tie or
//! are missing) keep the order they were loaded in, as glibc's merge sort
//! keeps a list's.

use super::args::{eq, int, syntax};
use crate::notify::NotifyFlags;
use crate::resp::Reply;
use crate::store::Store;
use crate::value::{wrongtype, SplitMix, Value};
use imbl::Vector;
use std::cmp::Ordering;

pub(super) const NAMES: &[&str] = &["sort", "sort_ro"];

/// A parsed `SORT`/`SORT_RO`.
pub(super) struct Cmd<'a> {
    key: &'a [u8],
    desc: bool,
    alpha: bool,
    /// `LIMIT offset count` (0, -1 when not given).
    offset: i64,
    count: i64,
    /// The last `BY` pattern.
    by: Option<&'a [u8]>,
    /// Some `BY` pattern had no `*`: nothing is sorted.
    dont_sort: bool,
    gets: Vec<&'a [u8]>,
    store: Option<&'a [u8]>,
}

/// Parses `SORT key [BY pattern] [LIMIT offset count] [GET pattern ...]
/// [ASC|DESC] [ALPHA] [STORE destination]` (no `STORE` for `SORT_RO`), in
/// any order, as Redis 7.0 reads it: the last of each wins.
pub(super) fn parse<'a>(name: &str, a: &'a [Vec<u8>]) -> Result<Cmd<'a>, Reply> {
    let readonly = name == "sort_ro";
    let mut c = Cmd {
        key: &a[1],
        desc: false,
        alpha: false,
        offset: 0,
        count: -1,
        by: None,
        dont_sort: false,
        gets: Vec::new(),
        store: None,
    };
    let mut j = 2;
    while j < a.len() {
        let left = a.len() - j - 1;
        let w = &a[j];
        if eq(w, "asc") {
            c.desc = false;
        } else if eq(w, "desc") {
            c.desc = true;
        } else if eq(w, "alpha") {
            c.alpha = true;
        } else if eq(w, "limit") && left >= 2 {
            c.offset = int(&a[j + 1])?;
            c.count = int(&a[j + 2])?;
            j += 2;
        } else if !readonly && eq(w, "store") && left >= 1 {
            c.store = Some(&a[j + 1]);
            j += 1;
        } else if eq(w, "by") && left >= 1 {
            let p = a[j + 1].as_slice();
            if !p.contains(&b'*') {
                c.dont_sort = true;
            }
            c.by = Some(p);
            j += 1;
        } else if eq(w, "get") && left >= 1 {
            c.gets.push(&a[j + 1]);
            j += 1;
        } else {
            return Err(syntax());
        }
        j += 1;
    }
    Ok(c)
}

/// What pattern `pat` names for element `sub` (Redis'
/// `lookupKeyByPattern`): `#` is the element itself; otherwise the first
/// `*` is replaced by it, and the key found must hold a string, or with
/// `->field` after the `*`, a hash with that field. `None` when there is
/// no `*` or nothing there.
fn by_pattern<'v>(
    pat: &[u8],
    sub: &'v [u8],
    lookup: &impl Fn(&[u8]) -> Option<&'v Value>,
) -> Option<&'v [u8]> {
    if pat == b"#" {
        return Some(sub);
    }
    let star = pat.iter().position(|&b| b == b'*')?;
    let after = &pat[star + 1..];
    let arrow = after
        .windows(2)
        .position(|w| w == b"->")
        .filter(|&i| i + 2 < after.len());
    let (tail, field) = match arrow {
        Some(i) => (&after[..i], Some(&after[i + 2..])),
        None => (after, None),
    };
    let mut key = Vec::with_capacity(star + sub.len() + tail.len());
    key.extend_from_slice(&pat[..star]);
    key.extend_from_slice(sub);
    key.extend_from_slice(tail);
    match (lookup(&key)?, field) {
        (Value::Hash(h), Some(f)) => h.get(f).map(|v| v.as_slice()),
        (Value::Str(s), None) => Some(s.as_slice()),
        _ => None,
    }
}

/// C's `strtod` over the whole of `b` as `SORT` uses it (up to a NUL
/// byte, leading white space skipped, an empty text is 0): the value and
/// whether it was out of range (`ERANGE`); `None` when text is left over.
pub(super) fn strtod(b: &[u8]) -> Option<(f64, bool)> {
    let b = match b.iter().position(|&x| x == 0) {
        Some(i) => &b[..i],
        None => b,
    };
    if b.is_empty() {
        return Some((0.0, false));
    }
    let start = b
        .iter()
        .position(|x| !matches!(x, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r'))?;
    let t = std::str::from_utf8(&b[start..]).ok()?;
    let (neg, body) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let lower = body.to_ascii_lowercase();
    let v = if lower == "inf" || lower == "infinity" {
        f64::INFINITY
    } else if lower == "nan" || lower.starts_with("nan(") {
        f64::NAN
    } else if let Some(hex) = lower.strip_prefix("0x") {
        if hex.is_empty() || !hex.bytes().all(|c| c.is_ascii_hexdigit()) {
            return None;
        }
        let v = hex.bytes().fold(0.0f64, |acc, c| {
            acc * 16.0 + f64::from((c as char).to_digit(16).unwrap_or(0))
        });
        if v.is_infinite() {
            return Some((if neg { -v } else { v }, true));
        }
        v
    } else {
        // Digits, one dot, an exponent: what Rust reads is what C reads.
        let ok = body.starts_with(|c: char| c.is_ascii_digit() || c == '.')
            && body.bytes().any(|c| c.is_ascii_digit())
            && body
                .bytes()
                .all(|c| c.is_ascii_digit() || matches!(c, b'.' | b'e' | b'E' | b'+' | b'-'));
        if !ok {
            return None;
        }
        let v: f64 = body.parse().ok()?;
        let mantissa = body.split(['e', 'E']).next().unwrap_or("");
        let nonzero = mantissa.bytes().any(|c| matches!(c, b'1'..=b'9'));
        let erange = v.is_infinite() || (nonzero && (v == 0.0 || v.is_subnormal()));
        return Some((if neg { -v } else { v }, erange));
    };
    Some((if neg { -v } else { v }, false))
}

/// One element to sort: the element, its numeric weight and its `ALPHA`
/// `BY` value.
struct Item<'v> {
    el: &'v [u8],
    score: f64,
    cmp: Option<&'v [u8]>,
}

impl Cmd<'_> {
    /// The result: the elements (after `LIMIT`), or each element's `GET`
    /// values (`None`: nothing there), in order.
    fn run<'v>(
        &self,
        lookup: impl Fn(&[u8]) -> Option<&'v Value>,
    ) -> Result<Vec<Option<&'v [u8]>>, Reply> {
        let value = lookup(self.key);
        let mut dont_sort = self.dont_sort;
        let mut alpha = self.alpha;
        let mut by = self.by;
        let elems: Vec<&'v [u8]> = match value {
            None => Vec::new(),
            Some(Value::List(l)) => l.iter().map(|e| e.as_slice()).collect(),
            Some(Value::Set(s)) => {
                // Redis sorts a set it stores (its order is its own).
                if dont_sort && self.store.is_some() {
                    dont_sort = false;
                    alpha = true;
                    by = None;
                }
                s.iter().map(|e| e.as_slice()).collect()
            }
            Some(Value::ZSet(z)) => z.order.iter().map(|(_, m)| m.as_slice()).collect(),
            Some(_) => return Err(wrongtype()),
        };
        let native = matches!(value, Some(Value::List(_)) | Some(Value::ZSet(_)));
        let len = elems.len() as i64;
        // Redis' LIMIT clamping.
        let mut start = self.offset.clamp(0, len);
        let count = self.count.clamp(-1, len);
        let mut end = if count < 0 {
            len - 1
        } else {
            start + count - 1
        };
        if start >= len {
            start = len - 1;
            end = len - 2;
        }
        if end >= len {
            end = len - 1;
        }
        let mut items: Vec<Item<'v>> = elems
            .into_iter()
            .map(|el| Item {
                el,
                score: 0.0,
                cmp: None,
            })
            .collect();
        if dont_sort && native && self.desc {
            // A list or sorted set unsorted but DESC: its own order, reversed.
            items.reverse();
        }
        if !dont_sort {
            let mut bad = false;
            for it in items.iter_mut() {
                let w = match by {
                    Some(p) => match by_pattern(p, it.el, &lookup) {
                        Some(w) => w,
                        None => continue,
                    },
                    None => it.el,
                };
                if alpha {
                    if by.is_some() {
                        it.cmp = Some(w);
                    }
                } else {
                    match strtod(w) {
                        Some((v, false)) if !v.is_nan() => it.score = v,
                        _ => bad = true,
                    }
                }
            }
            if bad {
                return Err(Reply::err(
                    "ERR One or more scores can't be converted into double",
                ));
            }
            let by_pattern = by.is_some();
            items.sort_by(|x, y| {
                let c = if !alpha {
                    x.score
                        .partial_cmp(&y.score)
                        .unwrap_or(Ordering::Equal)
                        .then_with(|| x.el.cmp(y.el))
                } else if by_pattern {
                    match (x.cmp, y.cmp) {
                        (Some(a), Some(b)) => a.cmp(b),
                        (None, None) => Ordering::Equal,
                        (None, Some(_)) => Ordering::Less,
                        (Some(_), None) => Ordering::Greater,
                    }
                } else {
                    x.el.cmp(y.el)
                };
                if self.desc {
                    c.reverse()
                } else {
                    c
                }
            });
        }
        let mut out = Vec::new();
        if end < start {
            return Ok(out);
        }
        for it in &items[start as usize..=end as usize] {
            if self.gets.is_empty() {
                out.push(Some(it.el));
            }
            for g in &self.gets {
                out.push(by_pattern(g, it.el, &lookup));
            }
        }
        Ok(out)
    }

    /// The reply of `SORT` without `STORE` (it changes nothing), or `None`
    /// for a `STORE` or an error.
    pub(super) fn unchanged(&self, st: &Store) -> Option<Reply> {
        if self.store.is_some() {
            return None;
        }
        self.run(|k| st.cur(k)).ok().map(reply)
    }
}

fn reply(items: Vec<Option<&[u8]>>) -> Reply {
    Reply::Array(Some(
        items
            .into_iter()
            .map(|v| Reply::Bulk(v.map(<[u8]>::to_vec)))
            .collect(),
    ))
}

impl super::run::Run for Cmd<'_> {
    fn apply(&self, st: &mut Store, now: u64, rng: &mut SplitMix) -> Reply {
        let Some(dst) = self.store else {
            return self.read(st, now, rng);
        };
        let items = match self.run(|k| st.cur(k)) {
            Ok(items) => items
                .into_iter()
                .map(|v| v.unwrap_or_default().to_vec())
                .collect::<Vector<Vec<u8>>>(),
            Err(e) => return e,
        };
        let n = items.len();
        if n == 0 {
            st.delete_with_event(dst);
        } else {
            st.put_value(dst, Value::List(items), None);
            st.notify(NotifyFlags::LIST, "sortstore", dst);
        }
        Reply::Integer(n as i64)
    }

    fn read(&self, st: &Store, now: u64, _rng: &mut SplitMix) -> Reply {
        match self.run(|k| st.value(k, now)) {
            Ok(items) => reply(items),
            Err(e) => e,
        }
    }

    fn unchanged(&self, st: &Store) -> Option<Reply> {
        Cmd::unchanged(self, st)
    }
}
