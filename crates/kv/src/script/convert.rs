//! Values between Lua and Redis replies, with Redis 7.0's rules.
//!
//! A command's reply in Lua (RESP2, the default): integer → number, bulk →
//! string, nil bulk or nil array → `false`, status → `{ok=...}`, error →
//! `{err=...}`, array → table. After `redis.setresp(3)` the RESP3 types
//! keep their shape: map → `{map={...}}`, set → `{set={m=true}}`, double →
//! `{double=n}`, boolean → boolean, null → `nil`, big number →
//! `{big_number=...}`, verbatim → `{verbatim_string={format=, string=}}`.
//!
//! A script's value as a reply: string → bulk, number → integer (the
//! fraction dropped), `true` → 1, `false` and `nil` → nil (after
//! `redis.setresp(3)`: a boolean stays a boolean), a table with
//! `err` / `ok` / `double` / `map` / `set` / `big_number` /
//! `verbatim_string` → that reply, any other table → an array of its
//! elements 1, 2, ... up to the first `nil`. Tables are read raw
//! (metamethods are not called) and no deeper than [`MAX_DEPTH`].

use crate::resp::Reply;
use mlua::{Lua, Table, Value};

/// Nesting beyond which a returned table becomes an error.
pub const MAX_DEPTH: usize = 1000;

/// A Lua number as Lua 5.1 prints it (`%.14g`).
pub fn lua_number_text(n: f64) -> String {
    let mut buf = [0u8; 64];
    // SAFETY: snprintf writes at most buf.len() bytes, NUL included, and
    // the format takes exactly one double.
    let len = unsafe { libc::snprintf(buf.as_mut_ptr().cast(), buf.len(), c"%.14g".as_ptr(), n) };
    let len = usize::try_from(len).unwrap_or(0).min(buf.len() - 1);
    String::from_utf8_lossy(&buf[..len]).into_owned()
}

/// A double as Redis prints it in a reply (`%.17g`, `inf`, `-inf`).
fn double_text(n: f64) -> String {
    if n.is_infinite() {
        return if n > 0.0 { "inf".into() } else { "-inf".into() };
    }
    let mut buf = [0u8; 64];
    // SAFETY: as in lua_number_text.
    let len = unsafe { libc::snprintf(buf.as_mut_ptr().cast(), buf.len(), c"%.17g".as_ptr(), n) };
    let len = usize::try_from(len).unwrap_or(0).min(buf.len() - 1);
    String::from_utf8_lossy(&buf[..len]).into_owned()
}

/// A command's reply as a Lua value (RESP3 shapes when `resp3`).
pub fn to_lua(lua: &Lua, r: &Reply, resp3: bool) -> mlua::Result<Value> {
    let field = |name: &str, v: Value| -> mlua::Result<Value> {
        let t = lua.create_table()?;
        t.raw_set(name, v)?;
        Ok(Value::Table(t))
    };
    let string = |s: &[u8]| -> mlua::Result<Value> { Ok(Value::String(lua.create_string(s)?)) };
    let array = |items: &[Reply]| -> mlua::Result<Value> {
        let t = lua.create_table_with_capacity(items.len(), 0)?;
        for (i, it) in items.iter().enumerate() {
            t.raw_set(i + 1, to_lua(lua, it, resp3)?)?;
        }
        Ok(Value::Table(t))
    };
    match r {
        Reply::Simple(s) => field("ok", string(s.as_bytes())?),
        Reply::Error(e) => field("err", string(e.as_bytes())?),
        Reply::Integer(i) => Ok(Value::Number(*i as f64)),
        Reply::Bulk(Some(b)) => string(b),
        Reply::Bulk(None) | Reply::Array(None) => Ok(match resp3 {
            true => Value::Nil,
            false => Value::Boolean(false),
        }),
        Reply::Array(Some(items)) | Reply::Push(items) => array(items),
        Reply::Attribute(_, inner) => to_lua(lua, inner, resp3),
        Reply::Map(pairs) if resp3 => {
            let m = lua.create_table()?;
            for (k, v) in pairs {
                m.raw_set(to_lua(lua, k, resp3)?, to_lua(lua, v, resp3)?)?;
            }
            field("map", Value::Table(m))
        }
        Reply::Map(pairs) => {
            let t = lua.create_table_with_capacity(pairs.len() * 2, 0)?;
            for (i, (k, v)) in pairs.iter().enumerate() {
                t.raw_set(2 * i + 1, to_lua(lua, k, resp3)?)?;
                t.raw_set(2 * i + 2, to_lua(lua, v, resp3)?)?;
            }
            Ok(Value::Table(t))
        }
        Reply::Set(items) if resp3 => {
            let s = lua.create_table()?;
            for it in items {
                s.raw_set(to_lua(lua, it, resp3)?, true)?;
            }
            field("set", Value::Table(s))
        }
        Reply::Set(items) => array(items),
        Reply::Double(d) if resp3 => field("double", Value::Number(parse_double(d))),
        Reply::Double(d) => string(d.as_bytes()),
        Reply::Bool(b) if resp3 => Ok(Value::Boolean(*b)),
        Reply::Bool(b) => Ok(Value::Number(f64::from(u8::from(*b)))),
        Reply::Bignum(n) if resp3 => field("big_number", string(n.as_bytes())?),
        Reply::Bignum(n) => string(n.as_bytes()),
        Reply::Verbatim(format, text) if resp3 => {
            let t = lua.create_table()?;
            t.raw_set("format", format.as_str())?;
            t.raw_set("string", lua.create_string(text)?)?;
            field("verbatim_string", Value::Table(t))
        }
        Reply::Verbatim(_, text) => string(text.as_bytes()),
    }
}

fn parse_double(d: &str) -> f64 {
    match d {
        "inf" => f64::INFINITY,
        "-inf" => f64::NEG_INFINITY,
        _ => d.parse().unwrap_or(f64::NAN),
    }
}

/// A script's value as a reply (see the module docs); `resp3`: the
/// script chose RESP3 (`redis.setresp(3)`), so a boolean stays a boolean.
pub fn from_lua(v: &Value, resp3: bool) -> Reply {
    from_lua_at(v, 0, resp3)
}

fn bytes_of(v: &Value) -> Option<Vec<u8>> {
    match v {
        Value::String(s) => Some(s.as_bytes().to_vec()),
        _ => None,
    }
}

fn from_lua_at(v: &Value, depth: usize, resp3: bool) -> Reply {
    if depth > MAX_DEPTH {
        return Reply::err("ERR reached lua stack limit");
    }
    match v {
        Value::String(s) => Reply::Bulk(Some(s.as_bytes().to_vec())),
        Value::Boolean(b) if resp3 => Reply::Bool(*b),
        Value::Boolean(true) => Reply::Integer(1),
        Value::Boolean(false) | Value::Nil => Reply::nil(),
        Value::Integer(i) => Reply::Integer(*i),
        Value::Number(n) => Reply::Integer(truncate(*n)),
        Value::Table(t) => table_reply(t, depth, resp3),
        _ => Reply::nil(),
    }
}

fn truncate(n: f64) -> i64 {
    if n.is_nan() {
        i64::MIN
    } else {
        n as i64
    }
}

fn table_reply(t: &Table, depth: usize, resp3: bool) -> Reply {
    let get = |k: &str| t.raw_get::<Value>(k).unwrap_or(Value::Nil);
    if let Some(e) = bytes_of(&get("err")) {
        let e = String::from_utf8_lossy(&e).into_owned();
        let e = e.strip_prefix('-').map(str::to_owned).unwrap_or(e);
        return Reply::err(if e.is_empty() {
            "ERR".into()
        } else {
            e.replace(['\r', '\n'], " ")
        });
    }
    if let Some(s) = bytes_of(&get("ok")) {
        return Reply::Simple(String::from_utf8_lossy(&s).replace(['\r', '\n'], " "));
    }
    match get("double") {
        Value::Number(n) => return Reply::Double(double_text(n)),
        Value::Integer(i) => return Reply::Double(double_text(i as f64)),
        _ => {}
    }
    if let Value::Table(m) = get("map") {
        let mut pairs = Vec::new();
        for (k, v) in m.pairs::<Value, Value>().flatten() {
            pairs.push((
                from_lua_at(&k, depth + 1, resp3),
                from_lua_at(&v, depth + 1, resp3),
            ));
        }
        return Reply::Map(pairs);
    }
    if let Value::Table(s) = get("set") {
        let items = s
            .pairs::<Value, Value>()
            .flatten()
            .map(|(k, _)| from_lua_at(&k, depth + 1, resp3))
            .collect();
        return Reply::Set(items);
    }
    if let Some(n) = bytes_of(&get("big_number")) {
        return Reply::Bignum(String::from_utf8_lossy(&n).replace(['\r', '\n'], " "));
    }
    if let Value::Table(v) = get("verbatim_string") {
        let format = v
            .raw_get::<Value>("format")
            .ok()
            .as_ref()
            .and_then(bytes_of);
        let text = v
            .raw_get::<Value>("string")
            .ok()
            .as_ref()
            .and_then(bytes_of);
        if let (Some(f), Some(s)) = (format, text) {
            return Reply::Verbatim(
                String::from_utf8_lossy(&f).into_owned(),
                String::from_utf8_lossy(&s).into_owned(),
            );
        }
    }
    let mut items = Vec::new();
    for i in 1.. {
        match t.raw_get::<Value>(i) {
            Ok(Value::Nil) | Err(_) => break,
            Ok(v) => items.push(from_lua_at(&v, depth + 1, resp3)),
        }
    }
    Reply::Array(Some(items))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_print_as_lua_prints_them() {
        let cases = [
            (1.0, "1"),
            (100.5, "100.5"),
            (0.1, "0.1"),
            (1e15, "1e+15"),
            (-3.0, "-3"),
        ];
        for (n, text) in cases {
            assert_eq!(lua_number_text(n), text);
        }
        assert_eq!(double_text(3.0), "3");
        assert_eq!(double_text(f64::NEG_INFINITY), "-inf");
    }

    #[test]
    fn replies_round_trip_through_lua_in_resp2() {
        let lua = Lua::new();
        let cases = [
            (Reply::Integer(7), Reply::Integer(7)),
            (Reply::bulk("x"), Reply::bulk("x")),
            (Reply::nil(), Reply::nil()),
            (Reply::ok(), Reply::ok()),
            (Reply::err("ERR boom"), Reply::err("ERR boom")),
            (
                Reply::Array(Some(vec![Reply::Integer(1), Reply::bulk("a")])),
                Reply::Array(Some(vec![Reply::Integer(1), Reply::bulk("a")])),
            ),
            // RESP2 flattens a map into an array.
            (
                Reply::Map(vec![(Reply::bulk("f"), Reply::Integer(1))]),
                Reply::Array(Some(vec![Reply::bulk("f"), Reply::Integer(1)])),
            ),
        ];
        for (reply, back) in cases {
            let v = to_lua(&lua, &reply, false).expect("converts");
            assert_eq!(from_lua(&v, false), back, "{reply:?}");
        }
    }
}
