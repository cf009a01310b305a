//! Streams: every `X*` command of Redis 7.0 (XADD, XRANGE, XREVRANGE,
//! XLEN, XREAD, XREADGROUP, XGROUP and its subcommands, XACK, XPENDING,
//! XCLAIM, XAUTOCLAIM, XINFO, XTRIM, XDEL, XSETID), on the stream value
//! and command functions of [`crate::data::stream`].
//!
//! Time: `*` IDs, delivery and seen times and idle times come from the
//! `now` of the op (the leader's clock reading): every member computes the
//! same. A `*` ID is never below the stream's last ID (the data layer
//! takes the last ID's successor when the clock is not ahead of it), so
//! IDs go on rising across a leader change whose new leader's clock is
//! behind. The node shape (`stream-node-max-entries`,
//! `stream-node-max-bytes`) is the replicated
//! [`crate::store::DataConfig`].
//!
//! Writes: Redis's keyspace events (class `t`), and the key's version
//! (`WATCH`) moved where Redis signals the key modified ([`Outcome`]'s
//! `touched`: XADD, XDEL/XTRIM that removed entries, `XGROUP CREATE
//! MKSTREAM` that made the key); group and consumer changes fire their
//! events without touching the version, as in Redis 7.0.
//!
//! Blocking (`XREAD ... BLOCK`, `XREADGROUP ... BLOCK`): see
//! [`super::block_info`] and [`super::pin_block_ids`]. An `XREAD` with
//! `BLOCK` is a write here (it goes through the blocking path of the
//! leader); run it answers as a plain `XREAD` (`BLOCK` is what the client
//! loop waits on; inside `MULTI` it is ignored, as in Redis).

use crate::data::stream::{
    self as ds, Key, KeyMut, Outcome, ReadFrom, StreamError, Xack, Xadd, Xautoclaim, Xclaim, Xdel,
    Xgroup, Xinfo, Xpending, Xrange, Xread, Xsetid, Xtrim,
};
use crate::notify::NotifyFlags;
use crate::resp::Reply;
use crate::store::Store;
use crate::value::{SplitMix, Value};

pub(super) const NAMES: &[&str] = &[
    "xadd",
    "xrange",
    "xrevrange",
    "xlen",
    "xread",
    "xreadgroup",
    "xgroup",
    "xack",
    "xpending",
    "xclaim",
    "xautoclaim",
    "xinfo",
    "xtrim",
    "xdel",
    "xsetid",
];

/// A parsed stream command (the data layer's parsed forms; the key
/// borrowed from the words).
pub(super) enum Cmd<'a> {
    Add(&'a [u8], Xadd),
    Trim(&'a [u8], Xtrim),
    Del(&'a [u8], Xdel),
    Range(&'a [u8], Xrange),
    Len(&'a [u8]),
    /// XREAD.
    Read(Xread),
    /// XREADGROUP, and whether its client already waited on it (its
    /// `BLOCK` word is [`WAITED`]).
    ReadGroup(Xread, bool),
    Group(Xgroup),
    SetId(&'a [u8], Xsetid),
    Ack(&'a [u8], Xack),
    Pending(&'a [u8], Xpending),
    Claim(&'a [u8], Xclaim),
    AutoClaim(&'a [u8], Xautoclaim),
    Info(Xinfo),
}

fn err(e: StreamError) -> Reply {
    e.to_reply()
}

/// The `BLOCK` word of an `XREADGROUP` whose client waits on it
/// ([`pin_ids`]): `BLOCK` as Redis reads it (a word is a C string to
/// Redis: it ends at the NUL), marked for this layer, which then answers
/// as Redis answers a waiting client when its key or group goes.
pub(super) const WAITED: &[u8] = b"BLOCK\0waited";

/// Redis 7.0's reply to a waiting `XREADGROUP` whose key was deleted or
/// now holds another type.
const ERR_KEY_GONE: &str = "UNBLOCKED the stream key no longer exists";

/// Redis 7.0's reply to a waiting `XREADGROUP` whose group was destroyed.
const ERR_GROUP_GONE: &str =
    "NOGROUP the consumer group this client was blocked on no longer exists";

/// Why a waiting `XREADGROUP` can no longer wait: its first key that is
/// not a stream, or not one with the group.
fn gone(a: &Xread, st: &Store) -> Option<Reply> {
    let (group, _) = a.group.as_ref()?;
    a.keys.iter().find_map(|k| match key_cur(st, k) {
        Key::Stream(s) if s.group(group).is_some() => None,
        Key::Stream(_) => Some(Reply::err(ERR_GROUP_GONE)),
        _ => Some(Reply::err(ERR_KEY_GONE)),
    })
}

/// Parses command `name` of this module (its arity already checked).
pub(super) fn parse<'a>(name: &str, a: &'a [Vec<u8>]) -> Result<Cmd<'a>, Reply> {
    let key = || a.get(1).map_or(&[][..], |k| k.as_slice());
    Ok(match name {
        "xadd" => Cmd::Add(key(), Xadd::parse(a).map_err(err)?),
        "xtrim" => Cmd::Trim(key(), Xtrim::parse(a).map_err(err)?),
        "xdel" => Cmd::Del(key(), Xdel::parse(a).map_err(err)?),
        "xrange" => Cmd::Range(key(), Xrange::parse(a, false).map_err(err)?),
        "xrevrange" => Cmd::Range(key(), Xrange::parse(a, true).map_err(err)?),
        "xlen" => Cmd::Len(key()),
        "xread" => Cmd::Read(Xread::parse(a, false).map_err(err)?),
        "xreadgroup" => Cmd::ReadGroup(
            Xread::parse(a, true).map_err(err)?,
            a.iter().any(|w| w.as_slice() == WAITED),
        ),
        "xgroup" => Cmd::Group(Xgroup::parse(a).map_err(err)?),
        "xsetid" => Cmd::SetId(key(), Xsetid::parse(a).map_err(err)?),
        "xack" => Cmd::Ack(key(), Xack::parse(a).map_err(err)?),
        "xpending" => Cmd::Pending(key(), Xpending::parse(a).map_err(err)?),
        "xclaim" => Cmd::Claim(key(), Xclaim::parse(a).map_err(err)?),
        "xautoclaim" => Cmd::AutoClaim(key(), Xautoclaim::parse(a).map_err(err)?),
        "xinfo" => Cmd::Info(Xinfo::parse(a).map_err(err)?),
        _ => return Err(super::args::syntax()),
    })
}

/// `key` as a read finds it at `now`.
fn key_at<'s>(st: &'s Store, key: &[u8], now: u64) -> Key<'s> {
    match st.value(key, now) {
        None => Key::Missing,
        Some(Value::Stream(s)) => Key::Stream(s),
        Some(_) => Key::WrongType,
    }
}

/// `key` inside an op (every key there alive).
fn key_cur<'s>(st: &'s Store, key: &[u8]) -> Key<'s> {
    match st.cur(key) {
        None => Key::Missing,
        Some(Value::Stream(s)) => Key::Stream(s),
        Some(_) => Key::WrongType,
    }
}

/// Runs `f` on `key`'s slot inside an op: the stream is taken out of the
/// store for the call (an O(1) move) and put back after; one the call
/// creates is stored as a new key.
fn with_slot<R>(st: &mut Store, key: &[u8], f: impl FnOnce(KeyMut<'_>) -> R) -> R {
    match st.cur_mut(key) {
        Some(Value::Stream(s)) => {
            let mut slot = Some(std::mem::take(s));
            let r = f(KeyMut::Slot(&mut slot));
            if let Some(n) = slot {
                *s = n;
            }
            r
        }
        Some(_) => f(KeyMut::WrongType),
        None => {
            let mut slot = None;
            let r = f(KeyMut::Slot(&mut slot));
            if let Some(s) = slot {
                st.put_value(key, Value::Stream(s), None);
            }
            r
        }
    }
}

/// Runs `f` on a scratch copy of `key`'s slot (an O(1) clone): what a
/// write would reply, without changing the store.
fn on_copy<R>(st: &Store, key: &[u8], f: impl FnOnce(KeyMut<'_>) -> R) -> R {
    match st.cur(key) {
        Some(Value::Stream(s)) => f(KeyMut::Slot(&mut Some(s.clone()))),
        Some(_) => f(KeyMut::WrongType),
        None => f(KeyMut::Slot(&mut None)),
    }
}

/// Announces a write's outcome: its events (class stream), the first
/// moving the key's version when Redis signals the key modified.
fn announce<R>(st: &mut Store, key: &[u8], o: &Outcome<R>) {
    let mut touched = o.touched;
    for e in &o.events {
        if touched {
            st.notify(NotifyFlags::STREAM, e, key);
            touched = false;
        } else {
            st.emit(NotifyFlags::STREAM, e, key);
        }
    }
    if touched {
        st.touch(key);
    }
}

/// A write's reply, its outcome announced.
fn finish<R>(
    st: &mut Store,
    key: &[u8],
    r: Result<Outcome<R>, StreamError>,
    reply: impl FnOnce(R) -> Reply,
) -> Reply {
    match r {
        Err(e) => err(e),
        Ok(o) => {
            announce(st, key, &o);
            reply(o.reply)
        }
    }
}

fn int(n: u64) -> Reply {
    Reply::Integer(i64::try_from(n).unwrap_or(i64::MAX))
}

/// `XREAD`'s reply from the streams it found at `keys`.
fn xread_reply(a: &Xread, keys: &[Key<'_>]) -> Reply {
    match ds::xread(a, keys) {
        Err(e) => err(e),
        Ok(found) => ds::xread_reply(
            found
                .into_iter()
                .map(|(k, e)| (k, ds::entries_reply(&e)))
                .collect(),
        ),
    }
}

impl Cmd<'_> {
    /// XREADGROUP inside an op: checks every key first, then serves each
    /// in order.
    fn read_group(a: &Xread, waited: bool, st: &mut Store, now: u64) -> Reply {
        if waited {
            if let Some(r) = gone(a, st) {
                return r;
            }
        }
        let from = {
            let keys: Vec<Key<'_>> = a.keys.iter().map(|k| key_cur(st, k)).collect();
            match ds::xread_resolve(a, &keys) {
                Ok(f) => f,
                Err(e) => return err(e),
            }
        };
        let mut served = Vec::new();
        for (k, f) in a.keys.iter().zip(from) {
            let r = with_slot(st, k, |slot| ds::xreadgroup_key(slot, a, f, now));
            match r {
                Err(e) => return err(e),
                Ok(o) => {
                    announce(st, k, &o);
                    if let Some(entries) = o.reply {
                        served.push((k.clone(), ds::group_entries_reply(&entries)));
                    }
                }
            }
        }
        ds::xread_reply(served)
    }

    /// XREADGROUP's reply when it would serve no stream (the nil array;
    /// or its error), `None` when it would serve one. For a waiting client
    /// (`waited`) whose key is gone, of another type or without the group,
    /// `None` too: it is then served (with Redis's error) instead of
    /// waiting on.
    fn read_group_unchanged(a: &Xread, waited: bool, st: &Store) -> Option<Reply> {
        if waited && gone(a, st).is_some() {
            return None;
        }
        let keys: Vec<Key<'_>> = a.keys.iter().map(|k| key_cur(st, k)).collect();
        let from = match ds::xread_resolve(a, &keys) {
            Ok(f) => f,
            Err(e) => return Some(err(e)),
        };
        let (group, consumer) = a.group.as_ref()?;
        for (k, f) in keys.iter().zip(from) {
            let Key::Stream(s) = k else {
                continue;
            };
            if matches!(f, ReadFrom::After(_)) {
                return None;
            }
            let mut copy = (*s).clone();
            let r = copy.read_group(group, consumer, f, 1, true, 0);
            if r.is_some_and(|r| r.entries.is_some()) {
                return None;
            }
        }
        Some(Reply::Array(None))
    }

    /// The reply when running it would change nothing (see
    /// [`super::unchanged_reply`]).
    fn unchanged_reply(&self, st: &Store) -> Option<Reply> {
        let zero = |r: Result<Outcome<u64>, StreamError>| match r {
            Err(e) => Some(err(e)),
            Ok(o) if o.reply == 0 && o.events.is_empty() && !o.touched => Some(Reply::Integer(0)),
            Ok(_) => None,
        };
        match self {
            Cmd::Read(a) => {
                let keys: Vec<Key<'_>> = a.keys.iter().map(|k| key_cur(st, k)).collect();
                match xread_reply(a, &keys) {
                    // Something to give: proposed, so that a waiting
                    // client is served (an XREAD changes nothing).
                    Reply::Array(Some(_)) => None,
                    r => Some(r),
                }
            }
            Cmd::ReadGroup(a, waited) => Self::read_group_unchanged(a, *waited, st),
            Cmd::Ack(k, a) => zero(on_copy(st, k, |s| ds::xack(s, a))),
            Cmd::Del(k, a) => zero(on_copy(st, k, |s| ds::xdel(s, a))),
            Cmd::Trim(k, a) => {
                let cfg = st.data_config().stream();
                zero(on_copy(st, k, |s| ds::xtrim(s, a, &cfg)))
            }
            Cmd::Add(k, a) if a.no_mkstream => match st.cur(k) {
                None => Some(Reply::nil()),
                Some(Value::Stream(_)) => None,
                Some(_) => Some(crate::value::wrongtype()),
            },
            Cmd::Group(g @ (Xgroup::Destroy { .. } | Xgroup::CreateConsumer { .. })) => {
                let key = g.key()?;
                match on_copy(st, key, |s| ds::xgroup(s, g, 0)) {
                    Err(e) => Some(err(e)),
                    Ok(o) if o.events.is_empty() && !o.touched => Some(o.reply.to_reply()),
                    Ok(_) => None,
                }
            }
            _ => None,
        }
    }
}

impl super::run::Run for Cmd<'_> {
    fn apply(&self, st: &mut Store, now: u64, rng: &mut SplitMix) -> Reply {
        let cfg = st.data_config().stream();
        match self {
            Cmd::Add(k, a) => {
                let r = with_slot(st, k, |s| ds::xadd(s, a.clone(), now, &cfg));
                finish(st, k, r, |id| {
                    id.map_or_else(Reply::nil, |id| id.to_reply())
                })
            }
            Cmd::Trim(k, a) => {
                let r = with_slot(st, k, |s| ds::xtrim(s, a, &cfg));
                finish(st, k, r, int)
            }
            Cmd::Del(k, a) => {
                let r = with_slot(st, k, |s| ds::xdel(s, a));
                finish(st, k, r, int)
            }
            Cmd::ReadGroup(a, waited) => Self::read_group(a, *waited, st, now),
            Cmd::Group(g) => match g.key() {
                None => ds::xgroup(KeyMut::Slot(&mut None), g, now)
                    .map_or_else(err, |o| o.reply.to_reply()),
                Some(k) => {
                    let r = with_slot(st, k, |s| ds::xgroup(s, g, now));
                    finish(st, k, r, |r| r.to_reply())
                }
            },
            Cmd::SetId(k, a) => {
                let r = with_slot(st, k, |s| ds::xsetid(s, a));
                finish(st, k, r, |()| Reply::ok())
            }
            Cmd::Ack(k, a) => {
                let r = with_slot(st, k, |s| ds::xack(s, a));
                finish(st, k, r, int)
            }
            Cmd::Claim(k, a) => {
                let r = with_slot(st, k, |s| ds::xclaim(s, k, a, now));
                finish(st, k, r, |c| c.to_reply())
            }
            Cmd::AutoClaim(k, a) => {
                let r = with_slot(st, k, |s| ds::xautoclaim(s, k, a, now));
                finish(st, k, r, |c| c.to_reply())
            }
            Cmd::Read(a) => {
                let keys: Vec<Key<'_>> = a.keys.iter().map(|k| key_cur(st, k)).collect();
                xread_reply(a, &keys)
            }
            Cmd::Range(..) | Cmd::Len(_) | Cmd::Pending(..) | Cmd::Info(_) => {
                self.read(st, now, rng)
            }
        }
    }

    fn read(&self, st: &Store, now: u64, _rng: &mut SplitMix) -> Reply {
        match self {
            Cmd::Range(k, a) => match ds::xrange(key_at(st, k, now), a) {
                Err(e) => err(e),
                Ok(None) => Reply::Array(None),
                Ok(Some(e)) => ds::entries_reply(&e),
            },
            Cmd::Len(k) => ds::xlen(key_at(st, k, now)).map_or_else(err, int),
            Cmd::Read(a) => {
                let keys: Vec<Key<'_>> = a.keys.iter().map(|k| key_at(st, k, now)).collect();
                xread_reply(a, &keys)
            }
            Cmd::Pending(k, a) => {
                ds::xpending(key_at(st, k, now), k, a, now).map_or_else(err, |r| r.to_reply())
            }
            Cmd::Info(a) => {
                let key = match a.key() {
                    Some(k) => key_at(st, k, now),
                    None => Key::Missing,
                };
                ds::xinfo(key, a, now).map_or_else(err, |r| r.to_reply())
            }
            // Writes given as reads (never by this layer's callers).
            _ => super::args::syntax(),
        }
    }

    fn unchanged(&self, st: &Store) -> Option<Reply> {
        self.unchanged_reply(st)
    }

    /// `XREAD ... BLOCK` (the blocking path of the leader) and every
    /// `XGROUP` subcommand but HELP.
    fn writes(&self) -> bool {
        match self {
            Cmd::Read(a) => a.block_ms.is_some(),
            Cmd::Group(g) => g.key().is_some(),
            _ => false,
        }
    }
}

/// `XREAD`/`XREADGROUP` with `BLOCK`: the keys, the timeout in ms (0:
/// forever) and whether it can block at all (an `XREADGROUP` reading only
/// history never does).
pub(super) fn blocking(args: &[Vec<u8>]) -> Option<(Vec<Vec<u8>>, u64)> {
    let name = args.first()?;
    let group = name.eq_ignore_ascii_case(b"xreadgroup");
    if !group && !name.eq_ignore_ascii_case(b"xread") {
        return None;
    }
    let a = Xread::parse(args, group).ok()?;
    let ms = u64::try_from(a.block_ms?).ok()?;
    if group && !a.ids.iter().any(|w| w.as_slice() == b">") {
        return None;
    }
    Some((a.keys, ms))
}

/// Fixes a blocking command's words as its client blocks: each `$` ID of
/// an `XREAD ... BLOCK` becomes the stream's last ID as `st` holds it now
/// (`0-0` for a missing key), so that the command, run again later to
/// serve the waiting client, reads what was added since it blocked; the
/// `BLOCK` word of an `XREADGROUP ... BLOCK` that would wait (every key a
/// stream with the group, nothing new) becomes [`WAITED`], so that when
/// its key or group goes the client is served with Redis's error. Other
/// commands are left as they are.
pub(super) fn pin_ids(st: &Store, args: &mut [Vec<u8>]) {
    let Some(name) = args.first() else {
        return;
    };
    if name.eq_ignore_ascii_case(b"xreadgroup") {
        let Ok(a) = Xread::parse(args, true) else {
            return;
        };
        if a.block_ms.is_none()
            || Cmd::read_group_unchanged(&a, false, st) != Some(Reply::Array(None))
        {
            return;
        }
        if let Some(at) = block_word(args) {
            args[at] = WAITED.to_vec();
        }
        return;
    }
    if !name.eq_ignore_ascii_case(b"xread") {
        return;
    }
    let Ok(a) = Xread::parse(args, false) else {
        return;
    };
    if a.block_ms.is_none() {
        return;
    }
    let n = a.keys.len();
    let Some(first) = args.len().checked_sub(n) else {
        return;
    };
    let now = st.clock_ms();
    for (i, key) in a.keys.iter().enumerate() {
        let Some(w) = args.get_mut(first + i) else {
            continue;
        };
        if w.as_slice() != b"$" {
            continue;
        }
        match key_at(st, key, now) {
            Key::Stream(s) => *w = s.last_id().to_bytes(),
            Key::Missing => *w = b"0-0".to_vec(),
            Key::WrongType => {}
        }
    }
}

/// The position of the `BLOCK` option word among `XREAD`/`XREADGROUP`'s
/// options (read as Redis reads them: a group or consumer named "block"
/// is not it).
fn block_word(args: &[Vec<u8>]) -> Option<usize> {
    let is = |w: &[u8], o: &str| w.eq_ignore_ascii_case(o.as_bytes());
    let mut i = 1;
    while i < args.len() {
        let w = args[i].as_slice();
        if is(w, "streams") {
            return None;
        }
        if is(w, "block") {
            return Some(i);
        }
        i += if is(w, "group") {
            3
        } else if is(w, "noack") {
            1
        } else {
            2
        };
    }
    None
}
