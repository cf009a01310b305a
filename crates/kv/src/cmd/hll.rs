//! HyperLogLog: PFADD, PFCOUNT, PFMERGE, PFDEBUG, on the sketches of
//! [`crate::data::hll`] (Redis's own bytes, kept in a string value).
//!
//! `PFCOUNT` of one key may refresh the cached count in the sketch's
//! header, and `PFDEBUG GETREG`/`TODENSE` may turn a sparse sketch dense:
//! as in Redis, these change the key, so here they are writes (one
//! replicated op; the leader answers one that would change nothing like a
//! read). The sparse limit is the replicated
//! [`crate::store::DataConfig::hll_sparse_max_bytes`], so every member
//! writes the same bytes.

use crate::data::hll::{self, DebugReply, HllError};
use crate::notify::NotifyFlags;
use crate::resp::Reply;
use crate::store::Store;
use crate::value::Value;

pub(super) const NAMES: &[&str] = &["pfadd", "pfcount", "pfmerge", "pfdebug", "pfselftest"];

pub(super) enum Cmd<'a> {
    Add(&'a [u8], &'a [Vec<u8>]),
    Count(&'a [Vec<u8>]),
    Merge(&'a [Vec<u8>]),
    Debug(&'a [u8], &'a [u8]),
    SelfTest,
}

/// Parses command `name` of this module (its arity already checked).
pub(super) fn parse<'a>(name: &str, a: &'a [Vec<u8>]) -> Result<Cmd<'a>, Reply> {
    Ok(match name {
        "pfadd" => Cmd::Add(&a[1], &a[2..]),
        "pfcount" => Cmd::Count(&a[1..]),
        "pfmerge" => Cmd::Merge(&a[1..]),
        "pfdebug" => Cmd::Debug(&a[1], &a[2]),
        "pfselftest" => Cmd::SelfTest,
        _ => return Err(super::args::syntax()),
    })
}

fn err(e: HllError) -> Reply {
    Reply::err(e.to_string())
}

impl Cmd<'_> {
    /// Whether it may change the key (beyond the table's `write` flag):
    /// `PFCOUNT` of one key, `PFDEBUG GETREG`/`TODENSE`.
    pub(super) fn writes(&self) -> bool {
        match self {
            Cmd::Count(keys) => keys.len() == 1,
            Cmd::Debug(sub, _) => {
                sub.eq_ignore_ascii_case(b"getreg") || sub.eq_ignore_ascii_case(b"todense")
            }
            _ => false,
        }
    }

    /// The reply when running it would change nothing (see
    /// [`super::unchanged_reply`]).
    pub(super) fn unchanged(&self, st: &Store) -> Option<Reply> {
        let sparse_max = st.data_config().hll_sparse_max_bytes as usize;
        match self {
            Cmd::Add(key, elements) => {
                let els: Vec<&[u8]> = elements.iter().map(|e| e.as_slice()).collect();
                let out = hll::pfadd(st.cur(key), &els, sparse_max);
                match (out.reply, out.new_value) {
                    (Ok(false), None) => Some(Reply::Integer(0)),
                    _ => None,
                }
            }
            Cmd::Count(keys) if keys.len() == 1 => {
                let out = hll::pfcount(&[st.cur(&keys[0])]);
                match (out.reply, out.new_value) {
                    (Ok(n), None) => Some(Reply::Integer(n)),
                    _ => None,
                }
            }
            _ => None,
        }
    }

    pub(super) fn apply(&self, st: &mut Store, now: u64) -> Reply {
        let sparse_max = st.data_config().hll_sparse_max_bytes as usize;
        match self {
            Cmd::Add(key, elements) => {
                let els: Vec<&[u8]> = elements.iter().map(|e| e.as_slice()).collect();
                let out = hll::pfadd(st.cur(key), &els, sparse_max);
                if let Some(v) = out.new_value {
                    store(st, key, v);
                }
                match out.reply {
                    Ok(changed) => {
                        if changed {
                            st.notify(NotifyFlags::STRING, "pfadd", key);
                        }
                        Reply::Integer(i64::from(changed))
                    }
                    Err(e) => err(e),
                }
            }
            Cmd::Count(keys) if keys.len() == 1 => {
                let out = hll::pfcount(&[st.cur(&keys[0])]);
                if let Some(v) = out.new_value {
                    store(st, &keys[0], v);
                    // A modification for WATCH, with no keyspace event.
                    st.touch(&keys[0]);
                }
                out.reply.map_or_else(err, Reply::Integer)
            }
            Cmd::Merge(keys) => {
                let values: Vec<Option<&Value>> = keys.iter().map(|k| st.cur(k)).collect();
                match hll::pfmerge(&values, sparse_max) {
                    Ok(v) => {
                        store(st, &keys[0], v);
                        st.notify(NotifyFlags::STRING, "pfadd", &keys[0]);
                        Reply::ok()
                    }
                    Err(e) => err(e),
                }
            }
            Cmd::Debug(sub, key) => {
                let out = hll::pfdebug(sub, st.cur(key));
                if let Some(v) = out.new_value {
                    store(st, key, v);
                    st.touch(key);
                }
                out.reply.map_or_else(err, debug_reply)
            }
            _ => self.read(st, now),
        }
    }

    pub(super) fn read(&self, st: &Store, now: u64) -> Reply {
        match self {
            Cmd::Count(keys) => {
                let values: Vec<Option<&Value>> = keys.iter().map(|k| st.value(k, now)).collect();
                hll::pfcount(&values).reply.map_or_else(err, Reply::Integer)
            }
            Cmd::Debug(sub, key) => hll::pfdebug(sub, st.value(key, now))
                .reply
                .map_or_else(err, debug_reply),
            Cmd::SelfTest => Reply::ok(),
            Cmd::Add(..) | Cmd::Merge(_) => super::args::syntax(),
        }
    }
}

/// Sets `key` to the sketch `bytes`, keeping its expiry.
fn store(st: &mut Store, key: &[u8], bytes: Vec<u8>) {
    match st.cur_mut(key) {
        Some(Value::Str(s)) => *s = bytes,
        _ => st.put_value(key, Value::Str(bytes), None),
    }
}

fn debug_reply(d: DebugReply) -> Reply {
    match d {
        DebugReply::Registers(r) => Reply::Array(Some(
            r.into_iter()
                .map(|v| Reply::Integer(i64::from(v)))
                .collect(),
        )),
        DebugReply::Decoded(s) => Reply::bulk(s),
        DebugReply::Encoding(e) => Reply::Simple(e.name().into()),
        DebugReply::Converted(c) => Reply::Integer(i64::from(c)),
    }
}
