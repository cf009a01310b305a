//! String commands that run in this layer: GET, MGET, STRLEN, SETNX,
//! SETEX, PSETEX, GETSET, GETDEL, GETEX, INCRBYFLOAT, MSETNX (GETRANGE,
//! SUBSTR and SETRANGE are in `cmd::bits`). `SET`, `MSET`, `INCR`... are typed ops
//! ([`crate::op::WriteCmd`]) applied by [`crate::exec`].
//!
//! A relative expiry (`SETEX 10`, `GETEX PX 500`) counts from the op's
//! logical instant, the same on every member.

use super::args::{eq, int, syntax};
use crate::notify::NotifyFlags;
use crate::resp::Reply;
use crate::store::Store;
use crate::value::{fmt_float, parse_double, wrongtype, Value};

pub(super) const NAMES: &[&str] = &[
    "get",
    "mget",
    "strlen",
    "setnx",
    "setex",
    "psetex",
    "getset",
    "getdel",
    "getex",
    "incrbyfloat",
    "msetnx",
];

/// What `GETEX` does to the expiry.
#[derive(Clone, Copy)]
pub(super) enum ExpireChange {
    /// Nothing.
    Keep,
    /// `PERSIST`.
    Persist,
    /// `EX`/`PX`: this many ms after the op's instant.
    After(u64),
    /// `EXAT`/`PXAT`: at this instant (ms since the epoch).
    At(u64),
}

impl ExpireChange {
    fn at(self, now: u64) -> Option<u64> {
        match self {
            ExpireChange::After(ms) => Some(now.saturating_add(ms)),
            ExpireChange::At(t) => Some(t),
            ExpireChange::Keep | ExpireChange::Persist => None,
        }
    }
}

pub(super) enum Cmd<'a> {
    Get(&'a [u8]),
    MGet(&'a [Vec<u8>]),
    StrLen(&'a [u8]),
    SetNx(&'a [u8], &'a [u8]),
    /// `SETEX`/`PSETEX`: key, ms from now, value.
    SetEx(&'a [u8], u64, &'a [u8]),
    GetSet(&'a [u8], &'a [u8]),
    GetDel(&'a [u8]),
    GetEx(&'a [u8], ExpireChange),
    IncrByFloat(&'a [u8], f64),
    MSetNx(&'a [Vec<u8>]),
}

fn invalid_expire(cmd: &str) -> Reply {
    Reply::err(format!("ERR invalid expire time in '{cmd}' command"))
}

/// A positive expiry of `cmd` in its unit, as ms.
fn expire_ms(cmd: &str, v: &[u8], unit: u64) -> Result<u64, Reply> {
    let n = int(v)?;
    if n <= 0 {
        return Err(invalid_expire(cmd));
    }
    (n as u64)
        .checked_mul(unit)
        .filter(|ms| *ms < i64::MAX as u64 / 2)
        .ok_or_else(|| invalid_expire(cmd))
}

/// Parses command `name` of this module (its arity already checked).
pub(super) fn parse<'a>(name: &str, a: &'a [Vec<u8>]) -> Result<Cmd<'a>, Reply> {
    Ok(match name {
        "get" => Cmd::Get(&a[1]),
        "mget" => Cmd::MGet(&a[1..]),
        "strlen" => Cmd::StrLen(&a[1]),
        "setnx" => Cmd::SetNx(&a[1], &a[2]),
        "setex" => Cmd::SetEx(&a[1], expire_ms(name, &a[2], 1000)?, &a[3]),
        "psetex" => Cmd::SetEx(&a[1], expire_ms(name, &a[2], 1)?, &a[3]),
        "getset" => Cmd::GetSet(&a[1], &a[2]),
        "getdel" => Cmd::GetDel(&a[1]),
        "getex" => Cmd::GetEx(&a[1], parse_getex(&a[2..])?),
        // An infinite increment parses (Redis reads it as a long double)
        // and is refused by the sum: "would produce NaN or Infinity".
        "incrbyfloat" => match parse_double(&a[2]) {
            Some(d) => Cmd::IncrByFloat(&a[1], d),
            _ => return Err(Reply::err("ERR value is not a valid float")),
        },
        "msetnx" => {
            if a.len() % 2 == 0 {
                return Err(super::args::arity_error("msetnx"));
            }
            Cmd::MSetNx(&a[1..])
        }
        _ => return Err(syntax()),
    })
}

/// `GETEX`'s options: at most one of EX, PX, EXAT, PXAT, PERSIST.
fn parse_getex(opts: &[Vec<u8>]) -> Result<ExpireChange, Reply> {
    match opts {
        [] => Ok(ExpireChange::Keep),
        [p] if eq(p, "persist") => Ok(ExpireChange::Persist),
        [o, v] => {
            let (unit, abs) = if eq(o, "ex") {
                (1000, false)
            } else if eq(o, "px") {
                (1, false)
            } else if eq(o, "exat") {
                (1000, true)
            } else if eq(o, "pxat") {
                (1, true)
            } else {
                return Err(syntax());
            };
            let ms = expire_ms("getex", v, unit)?;
            Ok(match abs {
                true => ExpireChange::At(ms),
                false => ExpireChange::After(ms),
            })
        }
        _ => Err(syntax()),
    }
}

/// The string at `key` (alive inside an op); WRONGTYPE for another type.
fn string_of<'a>(st: &'a Store, key: &[u8]) -> Result<Option<&'a Vec<u8>>, Reply> {
    match st.cur(key) {
        None => Ok(None),
        Some(Value::Str(s)) => Ok(Some(s)),
        Some(_) => Err(wrongtype()),
    }
}

impl Cmd<'_> {
    /// The reply when running it would change nothing: `GETEX` without an
    /// option, `SETNX`/`MSETNX` of a key there, `GETDEL` of an absent key.
    pub(super) fn unchanged(&self, st: &Store) -> Option<Reply> {
        match self {
            Cmd::GetEx(_, ExpireChange::Keep) => Some(self.read(st, st.clock_ms())),
            Cmd::SetNx(k, _) => st.cur(k).is_some().then_some(Reply::Integer(0)),
            Cmd::MSetNx(pairs) => pairs
                .chunks_exact(2)
                .any(|p| st.cur(&p[0]).is_some())
                .then_some(Reply::Integer(0)),
            Cmd::GetDel(k) => st.cur(k).is_none().then(Reply::nil),
            _ => None,
        }
    }

    pub(super) fn apply(&self, st: &mut Store, now: u64) -> Reply {
        match self.apply_inner(st, now) {
            Ok(r) | Err(r) => r,
        }
    }

    fn apply_inner(&self, st: &mut Store, now: u64) -> Result<Reply, Reply> {
        Ok(match self {
            Cmd::SetNx(k, v) => {
                if st.cur(k).is_some() {
                    return Ok(Reply::Integer(0));
                }
                st.put_value(k, Value::Str(v.to_vec()), None);
                st.emit(NotifyFlags::STRING, "set", k);
                Reply::Integer(1)
            }
            Cmd::SetEx(k, ms, v) => {
                st.put_value(k, Value::Str(v.to_vec()), Some(now.saturating_add(*ms)));
                st.emit(NotifyFlags::STRING, "set", k);
                st.emit(NotifyFlags::GENERIC, "expire", k);
                Reply::ok()
            }
            Cmd::GetSet(k, v) => {
                let old = string_of(st, k)?.cloned();
                st.put_value(k, Value::Str(v.to_vec()), None);
                st.emit(NotifyFlags::STRING, "set", k);
                Reply::Bulk(old)
            }
            Cmd::GetDel(k) => {
                let old = string_of(st, k)?.cloned();
                if old.is_some() {
                    st.delete_with_event(k);
                }
                Reply::Bulk(old)
            }
            Cmd::GetEx(k, change) => {
                let Some(v) = string_of(st, k)?.cloned() else {
                    return Ok(Reply::nil());
                };
                match change {
                    ExpireChange::Keep => {}
                    ExpireChange::Persist => {
                        if st.cur_entry(k).is_some_and(|(_, t)| t.is_some()) {
                            st.set_expire(k, None);
                            st.emit(NotifyFlags::GENERIC, "persist", k);
                        }
                    }
                    c => match c.at(now) {
                        Some(t) if t <= now => {
                            st.delete_with_event(k);
                        }
                        t => {
                            st.set_expire(k, t);
                            st.emit(NotifyFlags::GENERIC, "expire", k);
                        }
                    },
                }
                Reply::bulk(v)
            }
            Cmd::IncrByFloat(k, d) => {
                let cur = match string_of(st, k)? {
                    None => 0.0,
                    Some(s) => parse_double(s)
                        .filter(|v| v.is_finite())
                        .ok_or_else(|| Reply::err("ERR value is not a valid float"))?,
                };
                let new = cur + d;
                if !new.is_finite() {
                    return Err(Reply::err("ERR increment would produce NaN or Infinity"));
                }
                let text = fmt_float(new).into_bytes();
                match st.cur_mut(k) {
                    Some(Value::Str(s)) => *s = text.clone(),
                    _ => st.put_value(k, Value::Str(text.clone()), None),
                }
                st.notify(NotifyFlags::STRING, "incrbyfloat", k);
                Reply::bulk(text)
            }
            Cmd::MSetNx(pairs) => {
                if pairs.chunks_exact(2).any(|p| st.cur(&p[0]).is_some()) {
                    return Ok(Reply::Integer(0));
                }
                for p in pairs.chunks_exact(2) {
                    st.put_value(&p[0], Value::Str(p[1].clone()), None);
                    st.emit(NotifyFlags::STRING, "set", &p[0]);
                }
                Reply::Integer(1)
            }
            _ => self.read(st, now),
        })
    }

    pub(super) fn read(&self, st: &Store, now: u64) -> Reply {
        let string = |k: &[u8]| match st.value(k, now) {
            None => Ok(None),
            Some(Value::Str(v)) => Ok(Some(v)),
            Some(_) => Err(wrongtype()),
        };
        match self {
            Cmd::Get(k) | Cmd::GetEx(k, _) => match string(k) {
                Ok(v) => Reply::Bulk(v.cloned()),
                Err(e) => e,
            },
            Cmd::MGet(ks) => Reply::Array(Some(
                ks.iter()
                    .map(|k| Reply::Bulk(st.get(k, now).map(<[u8]>::to_vec)))
                    .collect(),
            )),
            Cmd::StrLen(k) => match string(k) {
                Ok(v) => Reply::Integer(v.map_or(0, |v| v.len() as i64)),
                Err(e) => e,
            },
            _ => syntax(),
        }
    }
}
