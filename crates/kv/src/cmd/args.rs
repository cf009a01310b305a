//! What the command modules share to read their words and shape their
//! replies: Redis's argument errors, number and option parsing, and the
//! small reply builders. Below every command module; knows no store.

use crate::resp::{parse_i64_strict, Reply};
use crate::value::ERR_NOT_INTEGER;

/// `ERR syntax error`.
pub const ERR_SYNTAX: &str = "ERR syntax error";

/// `ERR wrong number of arguments for '<name>' command`.
pub fn arity_error(name: &str) -> Reply {
    Reply::err(format!(
        "ERR wrong number of arguments for '{name}' command"
    ))
}

/// Redis' unknown-command error: the name and the first arguments, each
/// quoted and followed by a space, up to 128 bytes of arguments.
pub fn unknown_command(args: &[Vec<u8>]) -> Reply {
    let name = String::from_utf8_lossy(&args[0][..args[0].len().min(128)]).into_owned();
    let mut rest = Vec::<u8>::new();
    for a in &args[1..] {
        if rest.len() >= 128 {
            break;
        }
        let room = 128 - rest.len();
        rest.push(b'\'');
        rest.extend_from_slice(&a[..a.len().min(room)]);
        rest.extend_from_slice(b"' ");
    }
    Reply::err(format!(
        "ERR unknown command '{name}', with args beginning with: {}",
        String::from_utf8_lossy(&rest)
    ))
}

/// `ERR unknown subcommand '<sub>'. Try <CMD> HELP.`
pub fn unknown_subcommand(args: &[Vec<u8>]) -> Reply {
    let sub = args.get(1).map_or(&[][..], |s| s.as_slice());
    let sub = String::from_utf8_lossy(&sub[..sub.len().min(128)]).into_owned();
    let cmd = String::from_utf8_lossy(&args[0]).to_uppercase();
    Reply::err(format!("ERR unknown subcommand '{sub}'. Try {cmd} HELP."))
}

/// The timeout of a blocking command, in seconds as a float (`0`:
/// forever), in whole milliseconds rounded up, with Redis's errors.
pub(crate) fn timeout_ms(b: &[u8]) -> Result<u64, Reply> {
    let bad = || Reply::err("ERR timeout is not a float or out of range");
    let s = std::str::from_utf8(b).map_err(|_| bad())?;
    if s.is_empty() || s.starts_with(|c: char| c.is_ascii_whitespace()) {
        return Err(bad());
    }
    let secs: f64 = s.parse().map_err(|_| bad())?;
    if secs.is_nan() {
        return Err(bad());
    }
    let ms = (secs * 1000.0).ceil();
    // Redis adds the timeout to its clock in a signed 64-bit count of
    // milliseconds: what could overflow there is out of range here.
    if ms > (i64::MAX / 2) as f64 {
        return Err(Reply::err("ERR timeout is out of range"));
    }
    if ms < 0.0 {
        return Err(Reply::err(crate::data::stream::msg::TIMEOUT_NEGATIVE));
    }
    Ok(ms as u64)
}

pub(crate) fn int(b: &[u8]) -> Result<i64, Reply> {
    parse_i64_strict(b).ok_or_else(|| Reply::err(ERR_NOT_INTEGER))
}

pub(crate) fn eq(a: &[u8], b: &str) -> bool {
    a.eq_ignore_ascii_case(b.as_bytes())
}

pub(crate) fn syntax() -> Reply {
    Reply::err(ERR_SYNTAX)
}

pub(crate) fn bulks<'a>(items: impl IntoIterator<Item = &'a [u8]>) -> Reply {
    Reply::Array(Some(
        items.into_iter().map(|b| Reply::bulk(b.to_vec())).collect(),
    ))
}

pub(crate) fn empty() -> Reply {
    Reply::Array(Some(Vec::new()))
}

/// `count` of `LPOP key count` and friends: non-negative.
pub(crate) fn pos_count(b: &[u8]) -> Result<usize, Reply> {
    match parse_i64_strict(b) {
        Some(n) if n >= 0 => Ok(n as usize),
        _ => Err(Reply::err("ERR value is out of range, must be positive")),
    }
}

/// The options of the `SCAN` family after the cursor.
pub(crate) struct ScanOpts {
    pub(crate) cursor: u64,
    pub(crate) pattern: Option<Vec<u8>>,
    pub(crate) count: usize,
    pub(crate) type_name: Option<Vec<u8>>,
}

pub(crate) fn parse_scan(
    args: &[Vec<u8>],
    cursor_at: usize,
    allow_type: bool,
) -> Result<ScanOpts, Reply> {
    let cursor = std::str::from_utf8(&args[cursor_at])
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
        .ok_or_else(|| Reply::err("ERR invalid cursor"))?;
    let mut o = ScanOpts {
        cursor,
        pattern: None,
        count: 10,
        type_name: None,
    };
    let mut i = cursor_at + 1;
    while i < args.len() {
        let v = args.get(i + 1).ok_or_else(syntax)?;
        if eq(&args[i], "match") {
            o.pattern = Some(v.clone());
        } else if eq(&args[i], "count") {
            let c = int(v)?;
            if c < 1 {
                return Err(syntax());
            }
            o.count = c as usize;
        } else if allow_type && eq(&args[i], "type") {
            o.type_name = Some(v.to_ascii_lowercase());
        } else {
            return Err(syntax());
        }
        i += 2;
    }
    Ok(o)
}

pub(crate) fn scan_reply(next: u64, items: Vec<Reply>) -> Reply {
    Reply::Array(Some(vec![
        Reply::bulk(next.to_string()),
        Reply::Array(Some(items)),
    ]))
}

/// Normalises `start`/`stop` of `LRANGE`/`ZRANGE` against `len`: the
/// inclusive range of indexes, or `None` when empty.
pub(crate) fn index_range(start: i64, stop: i64, len: usize) -> Option<(usize, usize)> {
    let len = len as i64;
    let s = if start < 0 {
        (len + start).max(0)
    } else {
        start
    };
    let e = if stop < 0 {
        len + stop
    } else {
        stop.min(len - 1)
    };
    if s > e || s >= len || e < 0 {
        None
    } else {
        Some((s as usize, e as usize))
    }
}
