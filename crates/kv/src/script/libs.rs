//! The libraries Redis gives scripts beside Lua's own: `bit` (LuaBitOp's
//! 32-bit operations), `cjson` (JSON), `cmsgpack` (MessagePack) and
//! `struct` (binary packing). Written here in Rust with the behaviour
//! scripts rely on; every function is pure, so members agree.

use mlua::{LightUserData, Lua, MultiValue, Table, Value, Variadic};

fn rt(msg: impl Into<String>) -> mlua::Error {
    mlua::Error::runtime(msg.into())
}

/// LuaBitOp's normalisation: the number modulo 2^32 as a signed 32-bit
/// integer.
fn tobit(n: f64) -> i32 {
    if !n.is_finite() {
        return 0;
    }
    let m = n.trunc().rem_euclid(4_294_967_296.0);
    (m as u64 as u32) as i32
}

fn num(v: &Value, what: &str) -> mlua::Result<f64> {
    match v {
        Value::Integer(i) => Ok(*i as f64),
        Value::Number(n) => Ok(*n),
        Value::String(s) => std::str::from_utf8(&s.as_bytes())
            .ok()
            .and_then(|t| t.trim().parse::<f64>().ok())
            .ok_or_else(|| rt(format!("bad argument to '{what}' (number expected)"))),
        _ => Err(rt(format!("bad argument to '{what}' (number expected)"))),
    }
}

/// The `bit` table.
pub fn bit(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.set(
        "tobit",
        lua.create_function(|_, x: Value| Ok(f64::from(tobit(num(&x, "tobit")?))))?,
    )?;
    t.set(
        "bnot",
        lua.create_function(|_, x: Value| Ok(f64::from(!tobit(num(&x, "bnot")?))))?,
    )?;
    type Fold = fn(i32, i32) -> i32;
    let folds: [(&str, Fold); 3] = [
        ("band", |a, b| a & b),
        ("bor", |a, b| a | b),
        ("bxor", |a, b| a ^ b),
    ];
    for (name, f) in folds {
        t.set(
            name,
            lua.create_function(move |_, xs: Variadic<Value>| {
                let mut it = xs.iter();
                let first = it
                    .next()
                    .ok_or_else(|| rt(format!("bad argument #1 to '{name}'")))?;
                let mut acc = tobit(num(first, name)?);
                for x in it {
                    acc = f(acc, tobit(num(x, name)?));
                }
                Ok(f64::from(acc))
            })?,
        )?;
    }
    type Shift = fn(i32, u32) -> i32;
    let shifts: [(&str, Shift); 5] = [
        ("lshift", |a, n| ((a as u32) << n) as i32),
        ("rshift", |a, n| ((a as u32) >> n) as i32),
        ("arshift", |a, n| a >> n),
        ("rol", |a, n| (a as u32).rotate_left(n) as i32),
        ("ror", |a, n| (a as u32).rotate_right(n) as i32),
    ];
    for (name, f) in shifts {
        t.set(
            name,
            lua.create_function(move |_, (x, n): (Value, Value)| {
                let n = (tobit(num(&n, name)?) & 31) as u32;
                Ok(f64::from(f(tobit(num(&x, name)?), n)))
            })?,
        )?;
    }
    t.set(
        "bswap",
        lua.create_function(|_, x: Value| Ok(f64::from(tobit(num(&x, "bswap")?).swap_bytes())))?,
    )?;
    t.set(
        "tohex",
        lua.create_function(|_, (x, n): (Value, Option<Value>)| {
            let x = tobit(num(&x, "tohex")?) as u32;
            let n = match n {
                Some(n) => tobit(num(&n, "tohex")?),
                None => 8,
            };
            let (upper, width) = (n < 0, n.unsigned_abs().min(8) as usize);
            let s = match upper {
                true => format!("{x:08X}"),
                false => format!("{x:08x}"),
            };
            Ok(s[8 - width..].to_string())
        })?,
    )?;
    Ok(t)
}

fn null() -> Value {
    Value::LightUserData(LightUserData(std::ptr::null_mut()))
}

/// Nesting allowed in JSON and MessagePack, both ways.
const MAX_NESTING: usize = 1000;

/// `cjson`'s settings. A script may change them, but only for its own
/// run ([`reset`]): a member must not carry one script's settings into
/// another's.
#[derive(Clone, Copy)]
struct CjsonCfg {
    encode_max_depth: usize,
    decode_max_depth: usize,
    encode_invalid_numbers: bool,
}

const CJSON_DEFAULT: CjsonCfg = CjsonCfg {
    encode_max_depth: MAX_NESTING,
    decode_max_depth: MAX_NESTING,
    encode_invalid_numbers: false,
};

thread_local! {
    static CJSON: std::cell::Cell<CjsonCfg> = const { std::cell::Cell::new(CJSON_DEFAULT) };
}

/// Puts the libraries' settings back to their defaults (before each run).
pub fn reset() {
    CJSON.with(|c| c.set(CJSON_DEFAULT));
}

fn cjson_cfg() -> CjsonCfg {
    CJSON.with(|c| c.get())
}

fn set_cjson(f: impl FnOnce(&mut CjsonCfg)) {
    CJSON.with(|c| {
        let mut v = c.get();
        f(&mut v);
        c.set(v);
    });
}

fn depth_arg(v: Option<Value>) -> mlua::Result<Option<usize>> {
    match v {
        None | Some(Value::Nil) => Ok(None),
        Some(v) => {
            let n = num(&v, "depth")?;
            if !(1.0..=2_147_483_647.0).contains(&n) {
                return Err(rt("bad argument #1 to 'encode_max_depth' (expected integer between 1 and 2147483647)"));
            }
            Ok(Some((n as usize).min(MAX_NESTING)))
        }
    }
}

fn bool_arg(v: Option<Value>) -> Option<bool> {
    match v {
        Some(Value::Boolean(b)) => Some(b),
        Some(Value::String(s)) => Some(&*s.as_bytes() == b"on"),
        Some(Value::Integer(i)) => Some(i != 0),
        _ => None,
    }
}

/// The `cjson` table.
pub fn cjson(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.set("null", null())?;
    t.set(
        "encode",
        lua.create_function(|lua, v: Value| {
            let mut out = Vec::new();
            json_encode(&v, &mut out, 0, &cjson_cfg())?;
            lua.create_string(out)
        })?,
    )?;
    t.set(
        "decode",
        lua.create_function(|lua, s: mlua::String| {
            let text = s.as_bytes();
            let v: serde_json::Value = serde_json::from_slice(&text)
                .map_err(|e| rt(format!("Expected value but found invalid token: {e}")))?;
            json_to_lua(lua, &v, 0, cjson_cfg().decode_max_depth)
        })?,
    )?;
    t.set(
        "encode_max_depth",
        lua.create_function(|_, v: Option<Value>| {
            if let Some(d) = depth_arg(v)? {
                set_cjson(|c| c.encode_max_depth = d);
            }
            Ok(cjson_cfg().encode_max_depth as f64)
        })?,
    )?;
    t.set(
        "decode_max_depth",
        lua.create_function(|_, v: Option<Value>| {
            if let Some(d) = depth_arg(v)? {
                set_cjson(|c| c.decode_max_depth = d);
            }
            Ok(cjson_cfg().decode_max_depth as f64)
        })?,
    )?;
    t.set(
        "encode_invalid_numbers",
        lua.create_function(|_, v: Option<Value>| {
            if let Some(b) = bool_arg(v) {
                set_cjson(|c| c.encode_invalid_numbers = b);
            }
            Ok(cjson_cfg().encode_invalid_numbers)
        })?,
    )?;
    // Settings without an effect here: accepted and answered.
    for name in [
        "encode_keep_buffer",
        "encode_number_precision",
        "decode_invalid_numbers",
        "encode_sparse_array",
    ] {
        t.set(name, lua.create_function(|_, args: MultiValue| Ok(args))?)?;
    }
    Ok(t)
}

fn json_string(s: &[u8], out: &mut Vec<u8>) {
    out.push(b'"');
    for &c in s {
        match c {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'/' => out.extend_from_slice(b"\\/"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x0c => out.extend_from_slice(b"\\f"),
            c if c < 0x20 || c == 0x7f => out.extend_from_slice(format!("\\u{c:04x}").as_bytes()),
            c => out.push(c),
        }
    }
    out.push(b'"');
}

fn json_number(n: f64, out: &mut Vec<u8>, cfg: &CjsonCfg) -> mlua::Result<()> {
    if !n.is_finite() {
        if !cfg.encode_invalid_numbers {
            return Err(rt("Cannot serialise number: must not be NaN or Inf"));
        }
        let text: &[u8] = if n.is_nan() {
            b"nan"
        } else if n > 0.0 {
            b"inf"
        } else {
            b"-inf"
        };
        out.extend_from_slice(text);
        return Ok(());
    }
    out.extend_from_slice(super::convert::lua_number_text(n).as_bytes());
    Ok(())
}

/// The array length of `t` when every key is a positive integer, else
/// `None`.
fn array_len(t: &Table) -> mlua::Result<Option<usize>> {
    let mut max = 0usize;
    let mut count = 0usize;
    for pair in t.pairs::<Value, Value>() {
        let (k, _) = pair?;
        let i = match k {
            Value::Integer(i) if i >= 1 => i as usize,
            Value::Number(n) if n >= 1.0 && n.fract() == 0.0 => n as usize,
            _ => return Ok(None),
        };
        max = max.max(i);
        count += 1;
    }
    if max > count.saturating_mul(2).max(10) {
        return Err(rt("Cannot serialise table: excessively sparse array"));
    }
    Ok(Some(max))
}

fn json_encode(v: &Value, out: &mut Vec<u8>, depth: usize, cfg: &CjsonCfg) -> mlua::Result<()> {
    if depth >= cfg.encode_max_depth.max(1) && matches!(v, Value::Table(_)) {
        return Err(rt(format!(
            "Cannot serialise, excessive nesting ({})",
            depth + 1
        )));
    }
    match v {
        Value::Nil => out.extend_from_slice(b"null"),
        Value::LightUserData(p) if p.0.is_null() => out.extend_from_slice(b"null"),
        Value::Boolean(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        Value::Integer(i) => out.extend_from_slice(i.to_string().as_bytes()),
        Value::Number(n) => json_number(*n, out, cfg)?,
        Value::String(s) => json_string(&s.as_bytes(), out),
        Value::Table(t) => match array_len(t)? {
            Some(n) if n > 0 => {
                out.push(b'[');
                for i in 1..=n {
                    if i > 1 {
                        out.push(b',');
                    }
                    json_encode(&t.raw_get::<Value>(i)?, out, depth + 1, cfg)?;
                }
                out.push(b']');
            }
            _ => {
                out.push(b'{');
                let mut first = true;
                for pair in t.pairs::<Value, Value>() {
                    let (k, v) = pair?;
                    if !first {
                        out.push(b',');
                    }
                    first = false;
                    match &k {
                        Value::String(s) => json_string(&s.as_bytes(), out),
                        Value::Integer(i) => json_string(i.to_string().as_bytes(), out),
                        Value::Number(n) => {
                            json_string(super::convert::lua_number_text(*n).as_bytes(), out)
                        }
                        _ => {
                            return Err(rt(
                                "Cannot serialise table: table key must be a number or string",
                            ))
                        }
                    }
                    out.push(b':');
                    json_encode(&v, out, depth + 1, cfg)?;
                }
                out.push(b'}');
            }
        },
        other => {
            return Err(rt(format!(
                "Cannot serialise {}: type not supported",
                other.type_name()
            )))
        }
    }
    Ok(())
}

fn json_to_lua(lua: &Lua, v: &serde_json::Value, depth: usize, max: usize) -> mlua::Result<Value> {
    let nested = matches!(
        v,
        serde_json::Value::Array(_) | serde_json::Value::Object(_)
    );
    if nested && depth >= max {
        return Err(rt(format!(
            "Found too many nested data structures ({}) at character 1",
            depth + 1
        )));
    }
    Ok(match v {
        serde_json::Value::Null => null(),
        serde_json::Value::Bool(b) => Value::Boolean(*b),
        serde_json::Value::Number(n) => Value::Number(n.as_f64().unwrap_or(0.0)),
        serde_json::Value::String(s) => Value::String(lua.create_string(s)?),
        serde_json::Value::Array(items) => {
            let t = lua.create_table_with_capacity(items.len(), 0)?;
            for (i, it) in items.iter().enumerate() {
                t.raw_set(i + 1, json_to_lua(lua, it, depth + 1, max)?)?;
            }
            Value::Table(t)
        }
        serde_json::Value::Object(m) => {
            let t = lua.create_table()?;
            for (k, it) in m {
                t.raw_set(lua.create_string(k)?, json_to_lua(lua, it, depth + 1, max)?)?;
            }
            Value::Table(t)
        }
    })
}

/// The `cmsgpack` table.
pub fn cmsgpack(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.set(
        "pack",
        lua.create_function(|lua, vs: Variadic<Value>| {
            let mut out = Vec::new();
            for v in vs.iter() {
                mp_pack(v, &mut out, 0)?;
            }
            lua.create_string(out)
        })?,
    )?;
    t.set(
        "unpack",
        lua.create_function(|lua, s: mlua::String| {
            let b = s.as_bytes();
            let mut at = 0usize;
            let mut vals = Vec::new();
            while at < b.len() {
                vals.push(mp_unpack(lua, &b, &mut at, 0)?);
            }
            Ok(MultiValue::from_iter(vals))
        })?,
    )?;
    t.set(
        "unpack_one",
        lua.create_function(|lua, (s, offset): (mlua::String, Option<i64>)| {
            mp_unpack_limit(lua, &s.as_bytes(), 1, offset.unwrap_or(0))
        })?,
    )?;
    t.set(
        "unpack_limit",
        lua.create_function(
            |lua, (s, limit, offset): (mlua::String, i64, Option<i64>)| {
                mp_unpack_limit(lua, &s.as_bytes(), limit, offset.unwrap_or(0))
            },
        )?,
    )?;
    Ok(t)
}

/// Nesting `cmsgpack.pack` follows; deeper tables pack as nil (so a
/// table that holds itself packs to this depth).
const MP_MAX_DEPTH: usize = 16;

fn mp_pack(v: &Value, out: &mut Vec<u8>, depth: usize) -> mlua::Result<()> {
    if depth >= MP_MAX_DEPTH && matches!(v, Value::Table(_)) {
        // As the C library: too deep packs as nil.
        out.push(0xc0);
        return Ok(());
    }
    match v {
        Value::Nil => out.push(0xc0),
        Value::Boolean(b) => out.push(if *b { 0xc3 } else { 0xc2 }),
        Value::Integer(i) => mp_int(*i, out),
        Value::Number(n) if n.fract() == 0.0 && n.abs() < 9.2e18 => mp_int(*n as i64, out),
        Value::Number(n) if (*n as f32) as f64 == *n => {
            out.push(0xca);
            out.extend_from_slice(&(*n as f32).to_be_bytes());
        }
        Value::Number(n) => {
            out.push(0xcb);
            out.extend_from_slice(&n.to_be_bytes());
        }
        Value::String(s) => {
            let b = s.as_bytes();
            let n = b.len();
            if n < 32 {
                out.push(0xa0 | n as u8);
            } else if n <= 0xff {
                out.extend_from_slice(&[0xd9, n as u8]);
            } else if n <= 0xffff {
                out.push(0xda);
                out.extend_from_slice(&(n as u16).to_be_bytes());
            } else {
                out.push(0xdb);
                out.extend_from_slice(&(n as u32).to_be_bytes());
            }
            out.extend_from_slice(&b);
        }
        Value::Table(t) => match array_len(t).ok().flatten() {
            Some(n) if n > 0 => {
                mp_header(n, 0x90, 0xdc, out);
                for i in 1..=n {
                    mp_pack(&t.raw_get::<Value>(i)?, out, depth + 1)?;
                }
            }
            _ => {
                // Counted first, then packed pair by pair: a big table is
                // never held as a list of Lua references.
                let mut n = 0usize;
                for pair in t.pairs::<Value, Value>() {
                    pair?;
                    n += 1;
                }
                mp_header(n, 0x80, 0xde, out);
                for pair in t.pairs::<Value, Value>() {
                    let (k, v) = pair?;
                    mp_pack(&k, out, depth + 1)?;
                    mp_pack(&v, out, depth + 1)?;
                }
            }
        },
        _ => out.push(0xc0),
    }
    Ok(())
}

/// `unpack_limit`: up to `limit` values (0: all) from byte `offset`;
/// returns the offset after them (-1 at the end) and the values.
fn mp_unpack_limit(lua: &Lua, b: &[u8], limit: i64, offset: i64) -> mlua::Result<MultiValue> {
    let mut at = usize::try_from(offset)
        .ok()
        .filter(|o| *o <= b.len())
        .ok_or_else(|| rt("Start offset greater than input length"))?;
    let mut vals = Vec::new();
    while at < b.len() && (limit <= 0 || (vals.len() as i64) < limit) {
        vals.push(mp_unpack(lua, b, &mut at, 0)?);
    }
    let next = if at >= b.len() { -1.0 } else { at as f64 };
    vals.insert(0, Value::Number(next));
    Ok(MultiValue::from_iter(vals))
}

fn mp_header(n: usize, fix: u8, big: u8, out: &mut Vec<u8>) {
    if n < 16 {
        out.push(fix | n as u8);
    } else if n <= 0xffff {
        out.push(big);
        out.extend_from_slice(&(n as u16).to_be_bytes());
    } else {
        out.push(big + 1);
        out.extend_from_slice(&(n as u32).to_be_bytes());
    }
}

fn mp_int(i: i64, out: &mut Vec<u8>) {
    if (0..128).contains(&i) {
        out.push(i as u8);
    } else if (-32..0).contains(&i) {
        out.push(i as i8 as u8);
    } else if i >= 0 {
        if i <= 0xff {
            out.extend_from_slice(&[0xcc, i as u8]);
        } else if i <= 0xffff {
            out.push(0xcd);
            out.extend_from_slice(&(i as u16).to_be_bytes());
        } else if i <= 0xffff_ffff {
            out.push(0xce);
            out.extend_from_slice(&(i as u32).to_be_bytes());
        } else {
            out.push(0xcf);
            out.extend_from_slice(&(i as u64).to_be_bytes());
        }
    } else if i >= -128 {
        out.extend_from_slice(&[0xd0, i as i8 as u8]);
    } else if i >= -32768 {
        out.push(0xd1);
        out.extend_from_slice(&(i as i16).to_be_bytes());
    } else if i >= i64::from(i32::MIN) {
        out.push(0xd2);
        out.extend_from_slice(&(i as i32).to_be_bytes());
    } else {
        out.push(0xd3);
        out.extend_from_slice(&i.to_be_bytes());
    }
}

fn take<'a>(b: &'a [u8], at: &mut usize, n: usize) -> mlua::Result<&'a [u8]> {
    let end = at
        .checked_add(n)
        .filter(|e| *e <= b.len())
        .ok_or_else(|| rt("Missing bytes in input."))?;
    let s = &b[*at..end];
    *at = end;
    Ok(s)
}

fn be(b: &[u8]) -> u64 {
    b.iter().fold(0u64, |acc, &x| (acc << 8) | u64::from(x))
}

fn mp_unpack(lua: &Lua, b: &[u8], at: &mut usize, depth: usize) -> mlua::Result<Value> {
    if depth > MAX_NESTING {
        return Err(rt("Too many nested data structures."));
    }
    let tag = take(b, at, 1)?[0];
    let int = |v: i64| Ok(Value::Number(v as f64));
    let string = |lua: &Lua, s: &[u8]| Ok(Value::String(lua.create_string(s)?));
    match tag {
        0x00..=0x7f => int(i64::from(tag)),
        0xe0..=0xff => int(i64::from(tag as i8)),
        0x80..=0x8f => mp_map(lua, b, at, usize::from(tag & 0x0f), depth),
        0x90..=0x9f => mp_array(lua, b, at, usize::from(tag & 0x0f), depth),
        0xa0..=0xbf => {
            let s = take(b, at, usize::from(tag & 0x1f))?;
            string(lua, s)
        }
        0xc0 => Ok(Value::Nil),
        0xc2 => Ok(Value::Boolean(false)),
        0xc3 => Ok(Value::Boolean(true)),
        0xc4 | 0xd9 => {
            let n = be(take(b, at, 1)?) as usize;
            string(lua, take(b, at, n)?)
        }
        0xc5 | 0xda => {
            let n = be(take(b, at, 2)?) as usize;
            string(lua, take(b, at, n)?)
        }
        0xc6 | 0xdb => {
            let n = be(take(b, at, 4)?) as usize;
            string(lua, take(b, at, n)?)
        }
        0xca => {
            let v = f32::from_be_bytes(take(b, at, 4)?.try_into().expect("4 bytes"));
            Ok(Value::Number(f64::from(v)))
        }
        0xcb => {
            let v = f64::from_be_bytes(take(b, at, 8)?.try_into().expect("8 bytes"));
            Ok(Value::Number(v))
        }
        0xcc => int(be(take(b, at, 1)?) as i64),
        0xcd => int(be(take(b, at, 2)?) as i64),
        0xce => int(be(take(b, at, 4)?) as i64),
        0xcf => Ok(Value::Number(be(take(b, at, 8)?) as f64)),
        0xd0 => int(i64::from(take(b, at, 1)?[0] as i8)),
        0xd1 => int(i64::from(be(take(b, at, 2)?) as u16 as i16)),
        0xd2 => int(i64::from(be(take(b, at, 4)?) as u32 as i32)),
        0xd3 => int(be(take(b, at, 8)?) as i64),
        0xdc => {
            let n = be(take(b, at, 2)?) as usize;
            mp_array(lua, b, at, n, depth)
        }
        0xdd => {
            let n = be(take(b, at, 4)?) as usize;
            mp_array(lua, b, at, n, depth)
        }
        0xde => {
            let n = be(take(b, at, 2)?) as usize;
            mp_map(lua, b, at, n, depth)
        }
        0xdf => {
            let n = be(take(b, at, 4)?) as usize;
            mp_map(lua, b, at, n, depth)
        }
        _ => Err(rt("Bad data format in input.")),
    }
}

fn mp_array(lua: &Lua, b: &[u8], at: &mut usize, n: usize, depth: usize) -> mlua::Result<Value> {
    if n > b.len() - *at {
        return Err(rt("Missing bytes in input."));
    }
    let t = lua.create_table_with_capacity(n, 0)?;
    for i in 1..=n {
        t.raw_set(i, mp_unpack(lua, b, at, depth + 1)?)?;
    }
    Ok(Value::Table(t))
}

fn mp_map(lua: &Lua, b: &[u8], at: &mut usize, n: usize, depth: usize) -> mlua::Result<Value> {
    if n.saturating_mul(2) > b.len() - *at {
        return Err(rt("Missing bytes in input."));
    }
    let t = lua.create_table()?;
    for _ in 0..n {
        let k = mp_unpack(lua, b, at, depth + 1)?;
        let v = mp_unpack(lua, b, at, depth + 1)?;
        if !matches!(k, Value::Nil) {
            t.raw_set(k, v)?;
        }
    }
    Ok(Value::Table(t))
}

/// One item of a `struct` format.
enum Item {
    Int {
        size: usize,
        signed: bool,
    },
    Float,
    Double,
    /// `s`: a zero-terminated string.
    Zstr,
    /// `cN`: N bytes (`c0`: the length is the previous number).
    Chars(usize),
    Pad,
}

fn struct_format(fmt: &[u8]) -> mlua::Result<Vec<(Item, bool)>> {
    let mut little = true;
    let mut items = Vec::new();
    let mut i = 0;
    let number = |i: &mut usize| {
        let start = *i;
        while *i < fmt.len() && fmt[*i].is_ascii_digit() {
            *i += 1;
        }
        std::str::from_utf8(&fmt[start..*i])
            .ok()
            .and_then(|s| s.parse::<usize>().ok())
    };
    while i < fmt.len() {
        let c = fmt[i];
        i += 1;
        let item = match c {
            b' ' => continue,
            b'<' => {
                little = true;
                continue;
            }
            b'>' => {
                little = false;
                continue;
            }
            b'!' => {
                number(&mut i);
                continue;
            }
            b'=' => continue,
            b'b' | b'B' => Item::Int {
                size: 1,
                signed: c == b'b',
            },
            b'h' | b'H' => Item::Int {
                size: 2,
                signed: c == b'h',
            },
            b'i' | b'I' => {
                let size = number(&mut i).unwrap_or(4);
                if !(1..=8).contains(&size) {
                    return Err(rt(format!(
                        "integral size {size} is larger than limit of 8"
                    )));
                }
                Item::Int {
                    size,
                    signed: c == b'i',
                }
            }
            b'l' | b'L' | b'T' => Item::Int {
                size: 8,
                signed: c == b'l',
            },
            b'f' => Item::Float,
            b'd' => Item::Double,
            b's' => Item::Zstr,
            b'c' => Item::Chars(number(&mut i).unwrap_or(1)),
            b'x' => Item::Pad,
            other => {
                return Err(rt(format!("invalid format option '{}'", other as char)));
            }
        };
        items.push((item, little));
    }
    Ok(items)
}

/// The `struct` table.
pub fn structlib(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.set(
        "pack",
        lua.create_function(|lua, (fmt, args): (mlua::String, Variadic<Value>)| {
            let mut out = Vec::new();
            let mut it = args.iter();
            let mut arg = |what: &str| {
                it.next()
                    .cloned()
                    .ok_or_else(|| rt(format!("bad argument to 'pack' ({what} expected)")))
            };
            for (item, little) in struct_format(&fmt.as_bytes())? {
                match item {
                    Item::Int { size, .. } => {
                        let v = num(&arg("number")?, "pack")? as i64 as u64;
                        let bytes = v.to_le_bytes();
                        let mut b = bytes[..size].to_vec();
                        if !little {
                            b.reverse();
                        }
                        out.extend_from_slice(&b);
                    }
                    Item::Float => {
                        let v = num(&arg("number")?, "pack")? as f32;
                        out.extend_from_slice(&if little {
                            v.to_le_bytes()
                        } else {
                            v.to_be_bytes()
                        });
                    }
                    Item::Double => {
                        let v = num(&arg("number")?, "pack")?;
                        out.extend_from_slice(&if little {
                            v.to_le_bytes()
                        } else {
                            v.to_be_bytes()
                        });
                    }
                    Item::Zstr => {
                        let Value::String(s) = arg("string")? else {
                            return Err(rt("bad argument to 'pack' (string expected)"));
                        };
                        out.extend_from_slice(&s.as_bytes());
                        out.push(0);
                    }
                    Item::Chars(n) => {
                        let Value::String(s) = arg("string")? else {
                            return Err(rt("bad argument to 'pack' (string expected)"));
                        };
                        let b = s.as_bytes();
                        let n = if n == 0 { b.len() } else { n };
                        if b.len() < n {
                            return Err(rt("bad argument to 'pack' (string too short)"));
                        }
                        out.extend_from_slice(&b[..n]);
                    }
                    Item::Pad => out.push(0),
                }
            }
            lua.create_string(out)
        })?,
    )?;
    t.set(
        "unpack",
        lua.create_function(
            |lua, (fmt, data, init): (mlua::String, mlua::String, Option<i64>)| {
                let b = data.as_bytes();
                let mut at = usize::try_from(init.unwrap_or(1).max(1) - 1).unwrap_or(0);
                let mut vals: Vec<Value> = Vec::new();
                let mut last_num: Option<usize> = None;
                for (item, little) in struct_format(&fmt.as_bytes())? {
                    match item {
                        Item::Int { size, signed } => {
                            let mut raw = take(&b, &mut at, size)
                                .map_err(|_| {
                                    rt("bad argument #2 to 'unpack' (data string too short)")
                                })?
                                .to_vec();
                            if !little {
                                raw.reverse();
                            }
                            let mut v = 0u64;
                            for (k, x) in raw.iter().enumerate() {
                                v |= u64::from(*x) << (8 * k);
                            }
                            let n = if signed && size < 8 && v >> (size * 8 - 1) & 1 == 1 {
                                (v | (!0u64 << (size * 8))) as i64 as f64
                            } else if signed {
                                v as i64 as f64
                            } else {
                                v as f64
                            };
                            last_num = Some(n as usize);
                            vals.push(Value::Number(n));
                        }
                        Item::Float => {
                            let r: [u8; 4] = take(&b, &mut at, 4)?.try_into().expect("4 bytes");
                            let v = if little {
                                f32::from_le_bytes(r)
                            } else {
                                f32::from_be_bytes(r)
                            };
                            vals.push(Value::Number(f64::from(v)));
                        }
                        Item::Double => {
                            let r: [u8; 8] = take(&b, &mut at, 8)?.try_into().expect("8 bytes");
                            let v = if little {
                                f64::from_le_bytes(r)
                            } else {
                                f64::from_be_bytes(r)
                            };
                            vals.push(Value::Number(v));
                        }
                        Item::Zstr => {
                            let end = b[at.min(b.len())..]
                                .iter()
                                .position(|&x| x == 0)
                                .ok_or_else(|| rt("unfinished string in data"))?;
                            let s = take(&b, &mut at, end)?;
                            vals.push(Value::String(lua.create_string(s)?));
                            at += 1;
                        }
                        Item::Chars(n) => {
                            let n = if n == 0 {
                                last_num.take().unwrap_or(0)
                            } else {
                                n
                            };
                            let s = take(&b, &mut at, n).map_err(|_| {
                                rt("bad argument #2 to 'unpack' (data string too short)")
                            })?;
                            vals.push(Value::String(lua.create_string(s)?));
                        }
                        Item::Pad => at += 1,
                    }
                }
                vals.push(Value::Number((at + 1) as f64));
                Ok(MultiValue::from_iter(vals))
            },
        )?,
    )?;
    t.set(
        "size",
        lua.create_function(|_, fmt: mlua::String| {
            let mut n = 0usize;
            for (item, _) in struct_format(&fmt.as_bytes())? {
                n += match item {
                    Item::Int { size, .. } => size,
                    Item::Float => 4,
                    Item::Double => 8,
                    Item::Chars(k) => k,
                    Item::Pad => 1,
                    Item::Zstr => return Err(rt("options 's' has no fixed size")),
                };
            }
            Ok(n as f64)
        })?,
    )?;
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bit_ops_follow_luabitop() {
        let lua = Lua::new();
        lua.globals().set("bit", bit(&lua).unwrap()).unwrap();
        let cases: [(&str, f64); 8] = [
            ("bit.tobit(0xffffffff)", -1.0),
            ("bit.tobit(2^32 + 5)", 5.0),
            ("bit.band(12, 10)", 8.0),
            ("bit.bor(1,2,4,8,16,32,64,128)", 255.0),
            ("bit.bxor(1, 2)", 3.0),
            ("bit.lshift(1, 31)", -2147483648.0),
            ("bit.rshift(-1, 28)", 15.0),
            ("bit.arshift(-256, 4)", -16.0),
        ];
        for (expr, want) in cases {
            let got: f64 = lua.load(format!("return {expr}")).eval().unwrap();
            assert_eq!(got, want, "{expr}");
        }
        let hex: String = lua.load("return bit.tohex(255)").eval().unwrap();
        assert_eq!(hex, "000000ff");
    }

    #[test]
    fn json_and_msgpack_round_trip() {
        let lua = Lua::new();
        lua.globals().set("cjson", cjson(&lua).unwrap()).unwrap();
        lua.globals()
            .set("cmsgpack", cmsgpack(&lua).unwrap())
            .unwrap();
        lua.globals()
            .set("struct", structlib(&lua).unwrap())
            .unwrap();
        let checks = [
            "return cjson.encode({1,2,'x'}) == '[1,2,\"x\"]'",
            "return cjson.decode('[1,{\"a\":true}]')[2].a == true",
            "return cjson.decode('null') == cjson.null",
            "local t = cmsgpack.unpack(cmsgpack.pack({1,2,{a=3}})) return t[3].a == 3",
            "return cmsgpack.unpack(cmsgpack.pack(-5000000000)) == -5000000000",
            "return cmsgpack.unpack(cmsgpack.pack(1.5)) == 1.5",
            "local a, b = struct.unpack('>hB', struct.pack('>hB', -2, 200)) return a == -2 and b == 200",
            "return struct.size('>iB') == 5",
        ];
        for c in checks {
            let ok: bool = lua.load(c).eval().unwrap_or_else(|e| panic!("{c}: {e}"));
            assert!(ok, "{c}");
        }
    }
}
