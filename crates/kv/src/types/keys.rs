//! Keyspace commands on keys of any type: TYPE, KEYS, SCAN (MATCH, COUNT,
//! TYPE), RANDOMKEY, RENAME, RENAMENX, COPY.

use super::{eq, int, parse_scan, scan_reply, syntax, ScanOpts};
use crate::commands::{spec, CommandSpec, R, W};
use crate::pubsub::{glob_match, NotifyFlags};
use crate::resp::Reply;
use crate::store::Store;
use crate::value::{scan_page, SplitMix};

pub(super) const SPECS: &[CommandSpec] = &[
    spec("type", 2, R, 1, 1, 1),
    spec("keys", 2, &["readonly"], 0, 0, 0),
    spec("scan", -2, &["readonly"], 0, 0, 0),
    spec("randomkey", 1, &["readonly", "random"], 0, 0, 0),
    spec("rename", 3, &["write"], 1, 2, 1),
    spec("renamenx", 3, &["write", "fast"], 1, 2, 1),
    spec("copy", -3, W, 1, 2, 1),
];

pub(super) enum Cmd<'a> {
    Type(&'a [u8]),
    Keys(&'a [u8]),
    Scan(ScanOpts),
    RandomKey,
    Rename {
        src: &'a [u8],
        dst: &'a [u8],
        nx: bool,
    },
    Copy {
        src: &'a [u8],
        dst: &'a [u8],
        replace: bool,
    },
}

/// Parses command `name` of this module (its arity already checked).
pub(super) fn parse<'a>(name: &str, a: &'a [Vec<u8>]) -> Result<Cmd<'a>, Reply> {
    Ok(match name {
        "type" => Cmd::Type(&a[1]),
        "keys" => Cmd::Keys(&a[1]),
        "scan" => Cmd::Scan(parse_scan(a, 1, true)?),
        "randomkey" => Cmd::RandomKey,
        "rename" | "renamenx" => Cmd::Rename {
            src: &a[1],
            dst: &a[2],
            nx: name == "renamenx",
        },
        "copy" => {
            let mut replace = false;
            let mut i = 3;
            while i < a.len() {
                if eq(&a[i], "replace") {
                    replace = true;
                } else if eq(&a[i], "db") && i + 1 < a.len() {
                    if int(&a[i + 1])? != 0 {
                        return Err(Reply::err("ERR DB index is out of range"));
                    }
                    i += 1;
                } else {
                    return Err(syntax());
                }
                i += 1;
            }
            Cmd::Copy {
                src: &a[1],
                dst: &a[2],
                replace,
            }
        }
        _ => return Err(syntax()),
    })
}

impl Cmd<'_> {
    pub(super) fn apply(&self, st: &mut Store, now: u64) -> Reply {
        match self {
            Cmd::Rename { src, dst, nx } => {
                let Some((v, ttl)) = st.cur_entry(src).map(|(v, t)| (v.clone(), t)) else {
                    return Reply::err("ERR no such key");
                };
                if src == dst {
                    return if *nx { Reply::Integer(0) } else { Reply::ok() };
                }
                if *nx && st.cur(dst).is_some() {
                    return Reply::Integer(0);
                }
                st.delete(src);
                st.notify(NotifyFlags::GENERIC, "rename_from", src);
                st.put_value(dst, v, ttl);
                st.notify(NotifyFlags::GENERIC, "rename_to", dst);
                if *nx {
                    Reply::Integer(1)
                } else {
                    Reply::ok()
                }
            }
            Cmd::Copy { src, dst, replace } => {
                if src == dst {
                    return Reply::err("ERR source and destination objects are the same");
                }
                let Some((v, ttl)) = st.cur_entry(src).map(|(v, t)| (v.clone(), t)) else {
                    return Reply::Integer(0);
                };
                if !replace && st.cur(dst).is_some() {
                    return Reply::Integer(0);
                }
                st.put_value(dst, v, ttl);
                st.notify(NotifyFlags::GENERIC, "copy_to", dst);
                Reply::Integer(1)
            }
            _ => self.read(st, now, &mut SplitMix::new(0)),
        }
    }

    pub(super) fn read(&self, st: &Store, now: u64, rng: &mut SplitMix) -> Reply {
        match self {
            Cmd::Type(k) => Reply::Simple(
                st.value(k, now)
                    .map_or("none", |v| v.type_name())
                    .to_string(),
            ),
            Cmd::Keys(p) => Reply::Array(Some(
                st.keys(now)
                    .filter(|k| glob_match(p, k, false))
                    .map(|k| Reply::bulk(k.to_vec()))
                    .collect(),
            )),
            Cmd::Scan(o) => {
                let (next, page) = scan_page(st.keys(now), o.cursor, o.count);
                let items = page
                    .into_iter()
                    .filter(|k| o.pattern.as_ref().map_or(true, |p| glob_match(p, k, false)))
                    .filter(|k| {
                        o.type_name.as_ref().map_or(true, |t| {
                            st.value(k, now)
                                .is_some_and(|v| v.type_name().as_bytes() == t.as_slice())
                        })
                    })
                    .map(|k| Reply::bulk(k.to_vec()))
                    .collect();
                scan_reply(next, items)
            }
            Cmd::RandomKey => {
                let n = st.len(now);
                if n == 0 {
                    return Reply::nil();
                }
                let i = rng.below(n);
                Reply::Bulk(st.keys(now).nth(i).map(<[u8]>::to_vec))
            }
            Cmd::Rename { .. } | Cmd::Copy { .. } => syntax(),
        }
    }
}
