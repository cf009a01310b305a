//! Lists: LPUSH, RPUSH, LPUSHX, RPUSHX, LPOP, RPOP (with count), LRANGE,
//! LLEN, LINDEX, LSET, LREM, LTRIM, LINSERT, LPOS, LMOVE, RPOPLPUSH,
//! LMPOP, and the blocking pops BLPOP, BRPOP, BLMOVE, BRPOPLPUSH, BLMPOP
//! as they apply once the client loop serves them (see
//! `crate::client_loop`'s blocking module: the wait is there, the pop is an
//! op like any other).
//!
//! [`pop_first`] (the pop of `LMPOP`) and [`parse_mpop`] (its words) are
//! shared with the blocking pops and the sorted sets' `ZMPOP`.

use super::args::{eq, index_range, int, pos_count, syntax};
use super::typed::{typed, typed_mut};

use crate::notify::NotifyFlags;
use crate::resp::Reply;
use crate::store::Store;
use crate::value::Value;
use imbl::Vector;

pub(super) const NAMES: &[&str] = &[
    "lpush",
    "rpush",
    "lpushx",
    "rpushx",
    "lpop",
    "rpop",
    "lrange",
    "llen",
    "lindex",
    "lset",
    "lrem",
    "ltrim",
    "linsert",
    "lpos",
    "lmove",
    "rpoplpush",
    "lmpop",
    "blpop",
    "brpop",
    "blmove",
    "brpoplpush",
    "blmpop",
];

type List = Vector<Vec<u8>>;

pub(super) enum Cmd<'a> {
    Push {
        key: &'a [u8],
        left: bool,
        only_existing: bool,
        values: &'a [Vec<u8>],
    },
    Pop {
        key: &'a [u8],
        left: bool,
        count: Option<usize>,
    },
    /// The index is parsed after the key's lookup, as Redis does.
    Set(&'a [u8], &'a [u8], &'a [u8]),
    Rem(&'a [u8], i64, &'a [u8]),
    Trim(&'a [u8], i64, i64),
    Insert {
        key: &'a [u8],
        before: bool,
        pivot: &'a [u8],
        value: &'a [u8],
    },
    Move {
        src: &'a [u8],
        dst: &'a [u8],
        from_left: bool,
        to_left: bool,
    },
    Range(&'a [u8], i64, i64),
    Len(&'a [u8]),
    /// The index is parsed after the key's lookup, as Redis does.
    Index(&'a [u8], &'a [u8]),
    Pos {
        key: &'a [u8],
        elem: &'a [u8],
        rank: i64,
        count: Option<usize>,
        maxlen: usize,
    },
    /// `BLPOP`/`BRPOP key ... timeout` once applied: one element from
    /// the first list that has one (the wait itself is the client loop's).
    BPop {
        keys: &'a [Vec<u8>],
        left: bool,
    },
    /// `LMPOP numkeys key ... LEFT|RIGHT [COUNT count]` (and `BLMPOP`).
    MPop {
        keys: &'a [Vec<u8>],
        left: bool,
        count: usize,
    },
}

/// What a pop from the first of several keys took: the key and the items.
pub(super) type Popped<'k, T> = (&'k [u8], Vec<T>);

/// The keys, the end (`true`: left/min) and the count of an `*MPOP`.
pub(super) type MPopArgs<'a> = (&'a [Vec<u8>], bool, usize);

/// The words of `LMPOP`/`ZMPOP` (and their blocking forms) from the
/// `numkeys` at `a[numkeys_at]` on, as Redis 7.0 checks them: the keys,
/// the end named right after them (read by `end`: `None` is a syntax
/// error) and `COUNT` (1 when not given).
pub(super) fn parse_mpop<'a>(
    a: &'a [Vec<u8>],
    numkeys_at: usize,
    end: impl Fn(&[u8]) -> Option<bool>,
) -> Result<MPopArgs<'a>, Reply> {
    let numkeys = crate::resp::parse_i64_strict(&a[numkeys_at])
        .filter(|n| *n >= 1)
        .ok_or_else(|| Reply::err("ERR numkeys should be greater than 0"))?;
    // `numkeys` is at least 1, so the keys end past it.
    let where_at = usize::try_from(numkeys)
        .ok()
        .and_then(|n| n.checked_add(numkeys_at + 1))
        .filter(|w| *w < a.len())
        .ok_or_else(syntax)?;
    let from_first = end(&a[where_at]).ok_or_else(syntax)?;
    let mut count = None;
    let mut j = where_at + 1;
    while j < a.len() {
        if count.is_none() && eq(&a[j], "count") && j + 1 < a.len() {
            let c = crate::resp::parse_i64_strict(&a[j + 1])
                .filter(|c| *c >= 1)
                .ok_or_else(|| Reply::err("ERR count should be greater than 0"))?;
            count = Some(usize::try_from(c).unwrap_or(usize::MAX));
            j += 2;
        } else {
            return Err(syntax());
        }
    }
    Ok((&a[numkeys_at + 1..where_at], from_first, count.unwrap_or(1)))
}

/// Pops up to `count` elements from the head (`left`) or the tail of the
/// first of `keys` that exists, as `LMPOP` does (and the blocking pops once
/// a list has elements): the key and the elements in the order popped,
/// with the `lpop`/`rpop` event (and `del` when the list empties). `None`
/// when no key exists; WRONGTYPE when the first that exists is not a
/// list. A `count` of 0 pops nothing and fires nothing. Runs inside an op.
pub(super) fn pop_first<'k, K: AsRef<[u8]>>(
    st: &mut Store,
    keys: &'k [K],
    left: bool,
    count: usize,
) -> Result<Option<Popped<'k, Vec<u8>>>, Reply> {
    for k in keys {
        let k = k.as_ref();
        let Some(l) = get_mut(st, k, false)? else {
            continue;
        };
        if l.is_empty() {
            continue;
        }
        let take = count.min(l.len());
        let mut out = Vec::with_capacity(take);
        for _ in 0..take {
            out.extend(if left { l.pop_front() } else { l.pop_back() });
        }
        if take > 0 {
            st.notify(NotifyFlags::LIST, if left { "lpop" } else { "rpop" }, k);
            st.drop_if_empty(k);
        }
        return Ok(Some((k, out)));
    }
    Ok(None)
}

fn side(b: &[u8]) -> Result<bool, Reply> {
    if eq(b, "left") {
        Ok(true)
    } else if eq(b, "right") {
        Ok(false)
    } else {
        Err(syntax())
    }
}

/// Parses command `name` of this module (its arity already checked).
pub(super) fn parse<'a>(name: &str, a: &'a [Vec<u8>]) -> Result<Cmd<'a>, Reply> {
    let k = || a[1].as_slice();
    {
        Ok(match name {
            "lpush" | "rpush" | "lpushx" | "rpushx" => Cmd::Push {
                key: k(),
                left: name.starts_with('l'),
                only_existing: name.ends_with('x'),
                values: &a[2..],
            },
            "lpop" | "rpop" => {
                if a.len() > 3 {
                    return Err(crate::cmd::args::arity_error(name));
                }
                Cmd::Pop {
                    key: k(),
                    left: name == "lpop",
                    count: a.get(2).map(|c| pos_count(c)).transpose()?,
                }
            }
            "lset" => Cmd::Set(k(), &a[2], &a[3]),
            "lrem" => Cmd::Rem(k(), int(&a[2])?, &a[3]),
            "ltrim" => Cmd::Trim(k(), int(&a[2])?, int(&a[3])?),
            "linsert" => {
                let before = if eq(&a[2], "before") {
                    true
                } else if eq(&a[2], "after") {
                    false
                } else {
                    return Err(syntax());
                };
                Cmd::Insert {
                    key: k(),
                    before,
                    pivot: &a[3],
                    value: &a[4],
                }
            }
            "lmove" => Cmd::Move {
                src: k(),
                dst: &a[2],
                from_left: side(&a[3])?,
                to_left: side(&a[4])?,
            },
            "rpoplpush" => Cmd::Move {
                src: k(),
                dst: &a[2],
                from_left: false,
                to_left: true,
            },
            "lmpop" => {
                let (keys, left, count) = parse_mpop(a, 1, |w| side(w).ok())?;
                Cmd::MPop { keys, left, count }
            }
            "blmpop" => {
                super::args::timeout_ms(&a[1])?;
                let (keys, left, count) = parse_mpop(a, 2, |w| side(w).ok())?;
                Cmd::MPop { keys, left, count }
            }
            "blpop" | "brpop" => {
                super::args::timeout_ms(&a[a.len() - 1])?;
                Cmd::BPop {
                    keys: &a[1..a.len() - 1],
                    left: name == "blpop",
                }
            }
            "blmove" => {
                let (from_left, to_left) = (side(&a[3])?, side(&a[4])?);
                super::args::timeout_ms(&a[5])?;
                Cmd::Move {
                    src: k(),
                    dst: &a[2],
                    from_left,
                    to_left,
                }
            }
            "brpoplpush" => {
                super::args::timeout_ms(&a[3])?;
                Cmd::Move {
                    src: k(),
                    dst: &a[2],
                    from_left: false,
                    to_left: true,
                }
            }
            "lrange" => Cmd::Range(k(), int(&a[2])?, int(&a[3])?),
            "llen" => Cmd::Len(k()),
            "lindex" => Cmd::Index(k(), &a[2]),
            "lpos" => {
                let (mut rank, mut count, mut maxlen) = (1, None, 0);
                let mut i = 3;
                while i < a.len() {
                    let v = a.get(i + 1).ok_or_else(syntax)?;
                    if eq(&a[i], "rank") {
                        rank = int(v)?;
                        if rank == 0 {
                            return Err(Reply::err(
                                "ERR RANK can't be zero: use 1 to start from the first match, \
                                 2 from the second ... or use negative to start from the end \
                                 of the list",
                            ));
                        }
                    } else if eq(&a[i], "count") {
                        // Any value but a non-negative integer gets this text.
                        count = Some(
                            pos_count(v).map_err(|_| Reply::err("ERR COUNT can't be negative"))?,
                        );
                    } else if eq(&a[i], "maxlen") {
                        maxlen =
                            pos_count(v).map_err(|_| Reply::err("ERR MAXLEN can't be negative"))?;
                    } else {
                        return Err(syntax());
                    }
                    i += 2;
                }
                if rank == i64::MIN {
                    return Err(Reply::err(
                        "ERR value is out of range, value must between -9223372036854775807 \
                         and 9223372036854775807",
                    ));
                }
                Cmd::Pos {
                    key: k(),
                    elem: &a[2],
                    rank,
                    count,
                    maxlen,
                }
            }
            _ => return Err(syntax()),
        })
    }
}

fn get(v: Option<&Value>) -> Result<Option<&List>, Reply> {
    typed(v)
}

/// The list at `key` to change (created empty when absent and `create`).
fn get_mut<'a>(st: &'a mut Store, key: &[u8], create: bool) -> Result<Option<&'a mut List>, Reply> {
    typed_mut(st, key, create)
}

/// The index of `i` (negative: from the end) in a list of `len`.
fn at(i: i64, len: usize) -> Option<usize> {
    let i = if i < 0 { len as i64 + i } else { i };
    (0..len as i64).contains(&i).then_some(i as usize)
}

impl Cmd<'_> {
    /// The reply of this write when running it on `st` would change
    /// nothing (see [`super::unchanged_reply`]); `None` when it might.
    pub(super) fn unchanged(&self, st: &Store) -> Option<Reply> {
        match self {
            Cmd::Pop { key, count, .. } => st.cur(key).is_none().then(|| match count {
                None => Reply::nil(),
                Some(_) => Reply::Array(None),
            }),
            Cmd::Rem(key, ..) => st.cur(key).is_none().then_some(Reply::Integer(0)),
            Cmd::MPop { keys, .. } | Cmd::BPop { keys, .. } => keys
                .iter()
                .all(|k| st.cur(k).is_none())
                .then_some(Reply::Array(None)),
            Cmd::Move { src, .. } => st.cur(src).is_none().then(Reply::nil),
            _ => None,
        }
    }
}

impl Cmd<'_> {
    pub(super) fn apply(&self, st: &mut Store, now: u64) -> Reply {
        let r = match self {
            Cmd::Push { .. }
            | Cmd::Pop { .. }
            | Cmd::Set(..)
            | Cmd::Rem(..)
            | Cmd::Trim(..)
            | Cmd::Insert { .. }
            | Cmd::Move { .. }
            | Cmd::BPop { .. }
            | Cmd::MPop { .. } => self.apply_inner(st),
            _ => return self.read(st, now),
        };
        match self {
            Cmd::Move { src, dst, .. } => {
                st.drop_if_empty(src);
                st.drop_if_empty(dst);
            }
            Cmd::Push { key, .. }
            | Cmd::Pop { key, .. }
            | Cmd::Set(key, ..)
            | Cmd::Rem(key, ..)
            | Cmd::Trim(key, ..)
            | Cmd::Insert { key, .. } => st.drop_if_empty(key),
            _ => {}
        }
        r.unwrap_or_else(|e| e)
    }

    fn apply_inner(&self, st: &mut Store) -> Result<Reply, Reply> {
        Ok(match self {
            Cmd::BPop { keys, left } => match pop_first(st, keys, *left, 1)? {
                None => Reply::Array(None),
                Some((k, mut items)) => Reply::Array(Some(vec![
                    Reply::bulk(k.to_vec()),
                    Reply::Bulk(items.pop()),
                ])),
            },
            Cmd::MPop { keys, left, count } => match pop_first(st, keys, *left, *count)? {
                None => Reply::Array(None),
                Some((k, items)) => Reply::Array(Some(vec![
                    Reply::bulk(k.to_vec()),
                    Reply::Array(Some(items.into_iter().map(Reply::bulk).collect())),
                ])),
            },
            Cmd::Push {
                key,
                left,
                only_existing,
                values,
            } => {
                let Some(l) = get_mut(st, key, !only_existing)? else {
                    return Ok(Reply::Integer(0));
                };
                for v in values.iter() {
                    if *left {
                        l.push_front(v.clone());
                    } else {
                        l.push_back(v.clone());
                    }
                }
                let n = l.len();
                st.notify(
                    NotifyFlags::LIST,
                    if *left { "lpush" } else { "rpush" },
                    key,
                );
                Reply::Integer(n as i64)
            }
            Cmd::Pop { key, left, count } => {
                let Some(l) = get_mut(st, key, false)? else {
                    return Ok(match count {
                        None => Reply::nil(),
                        Some(_) => Reply::Array(None),
                    });
                };
                let take = count.unwrap_or(1).min(l.len());
                let mut out = Vec::with_capacity(take);
                for _ in 0..take {
                    let v = if *left { l.pop_front() } else { l.pop_back() };
                    out.extend(v.map(Reply::bulk));
                }
                if take > 0 {
                    st.notify(NotifyFlags::LIST, if *left { "lpop" } else { "rpop" }, key);
                }
                match count {
                    None => out.pop().unwrap_or(Reply::nil()),
                    Some(_) => Reply::Array(Some(out)),
                }
            }
            Cmd::Set(key, i, v) => {
                let l = get_mut(st, key, false)?.ok_or_else(|| Reply::err("ERR no such key"))?;
                let i = at(int(i)?, l.len()).ok_or_else(|| Reply::err("ERR index out of range"))?;
                l.set(i, v.to_vec());
                st.notify(NotifyFlags::LIST, "lset", key);
                Reply::ok()
            }
            Cmd::Rem(key, count, v) => {
                let Some(l) = get_mut(st, key, false)? else {
                    return Ok(Reply::Integer(0));
                };
                let limit = if *count == 0 {
                    usize::MAX
                } else {
                    count.unsigned_abs() as usize
                };
                let mut idx: Vec<usize> = Vec::new();
                let n = l.len();
                for j in 0..n {
                    let i = if *count < 0 { n - 1 - j } else { j };
                    if idx.len() < limit && l[i] == **v {
                        idx.push(i);
                    }
                }
                idx.sort_unstable();
                for i in idx.iter().rev() {
                    l.remove(*i);
                }
                if !idx.is_empty() {
                    st.notify(NotifyFlags::LIST, "lrem", key);
                }
                Reply::Integer(idx.len() as i64)
            }
            Cmd::Trim(key, s, e) => {
                if let Some(l) = get_mut(st, key, false)? {
                    match index_range(*s, *e, l.len()) {
                        None => l.clear(),
                        Some((s, e)) => {
                            *l = l.clone().slice(s..e + 1);
                        }
                    }
                    st.notify(NotifyFlags::LIST, "ltrim", key);
                }
                Reply::ok()
            }
            Cmd::Insert {
                key,
                before,
                pivot,
                value,
            } => {
                let Some(l) = get_mut(st, key, false)? else {
                    return Ok(Reply::Integer(0));
                };
                let Some(p) = l.iter().position(|x| x == pivot) else {
                    return Ok(Reply::Integer(-1));
                };
                l.insert(if *before { p } else { p + 1 }, value.to_vec());
                let n = l.len();
                st.notify(NotifyFlags::LIST, "linsert", key);
                Reply::Integer(n as i64)
            }
            Cmd::Move {
                src,
                dst,
                from_left,
                to_left,
            } => {
                if get(st.cur(src))?.is_none() {
                    return Ok(Reply::nil());
                }
                get(st.cur(dst))?;
                let v = {
                    let Some(l) = get_mut(st, src, false)? else {
                        return Ok(Reply::nil());
                    };
                    let v = if *from_left {
                        l.pop_front()
                    } else {
                        l.pop_back()
                    };
                    v.unwrap_or_default()
                };
                st.notify(
                    NotifyFlags::LIST,
                    if *from_left { "lpop" } else { "rpop" },
                    src,
                );
                if let Some(d) = get_mut(st, dst, true)? {
                    if *to_left {
                        d.push_front(v.clone());
                    } else {
                        d.push_back(v.clone());
                    }
                }
                st.notify(
                    NotifyFlags::LIST,
                    if *to_left { "lpush" } else { "rpush" },
                    dst,
                );
                Reply::bulk(v)
            }
            _ => return Err(syntax()),
        })
    }

    pub(super) fn read(&self, st: &Store, now: u64) -> Reply {
        self.read_inner(st, now).unwrap_or_else(|e| e)
    }

    fn read_inner(&self, st: &Store, now: u64) -> Result<Reply, Reply> {
        let l = |k: &[u8]| get(st.value(k, now));
        Ok(match self {
            Cmd::Range(k, s, e) => {
                let Some(l) = l(k)? else {
                    return Ok(super::args::empty());
                };
                match index_range(*s, *e, l.len()) {
                    None => super::args::empty(),
                    Some((s, e)) => {
                        super::args::bulks(l.iter().skip(s).take(e + 1 - s).map(|v| v.as_slice()))
                    }
                }
            }
            Cmd::Len(k) => Reply::Integer(l(k)?.map_or(0, |l| l.len()) as i64),
            Cmd::Index(k, i) => match l(k)? {
                None => Reply::nil(),
                Some(l) => Reply::Bulk(at(int(i)?, l.len()).map(|i| l[i].clone())),
            },
            Cmd::Pos {
                key,
                elem,
                rank,
                count,
                maxlen,
            } => {
                let list = l(key)?;
                let mut found = Vec::new();
                if let Some(list) = list {
                    let n = list.len();
                    let limit = if *maxlen == 0 { n } else { (*maxlen).min(n) };
                    let want = match count {
                        Some(0) => usize::MAX,
                        Some(c) => *c,
                        None => 1,
                    };
                    let mut skip = rank.unsigned_abs() - 1;
                    for j in 0..limit {
                        let i = if *rank < 0 { n - 1 - j } else { j };
                        if list[i] == *elem {
                            if skip > 0 {
                                skip -= 1;
                                continue;
                            }
                            found.push(Reply::Integer(i as i64));
                            if found.len() >= want {
                                break;
                            }
                        }
                    }
                }
                match count {
                    Some(_) => Reply::Array(Some(found)),
                    None => found.pop().unwrap_or(Reply::nil()),
                }
            }
            _ => return Err(syntax()),
        })
    }
}
