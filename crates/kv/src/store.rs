//! [`Store`]: the deterministic state machine (strings, hashes, lists,
//! sets and sorted sets, each key with an optional expiry).
//!
//! Writes go only through [`Store::apply`], which takes its time from the
//! op ([`WriteOp::ts_ms`]) and keeps a logical clock, the maximum `ts_ms`
//! applied so far; keys whose expiry is not after that clock are removed
//! (in a deterministic order) before each op runs, and the leader removes
//! the others it finds expired with [`WriteCmd::DelExpired`] ops
//! ([`crate::expiry`]).
//!
//! Reads judge existence by the applied state alone — a key exists while it
//! is in the map, whatever the reader's clock — so every member that has
//! applied the same ops gives the same answer: a linearizable read (after
//! a ReadIndex round) on a follower and on the leader agree, and a key the
//! leader expired is gone everywhere at the same log position. The reader's
//! clock only says how much time a key has left (`TTL`, never below 0).
//!
//! Beside the replicated state a store keeps this member's own: the event
//! classes to report ([`Store::set_notifications`]) and a bounded queue of
//! the [`KeyEvent`]s of applied writes ([`Store::drain_events`]), and the
//! term of the last leader whose first entry was applied
//! ([`Store::leader_term`]). None of it is in a snapshot.

use crate::op::{SetCond, SetTtl, WriteCmd, WriteOp, MAX_OP_BYTES};
use crate::pubsub::{KeyEvent, NotifyFlags};
use crate::resp::{parse_i64_strict, Reply};
use crate::value::{wrongtype, Value};
use imbl::{HashMap, OrdSet};
use std::collections::VecDeque;

/// Most keyspace events queued between two drains; later ones are dropped
/// and counted ([`Store::events_dropped`]).
pub const MAX_QUEUED_EVENTS: usize = 1 << 16;

/// `ERR value is not an integer or out of range`.
pub const ERR_NOT_INTEGER: &str = "ERR value is not an integer or out of range";
/// `ERR increment or decrement would overflow`.
pub const ERR_OVERFLOW: &str = "ERR increment or decrement would overflow";
/// The reply to an `APPEND` that would exceed [`MAX_OP_BYTES`].
pub const ERR_TOO_BIG: &str = "ERR string exceeds maximum allowed size (proto-max-bulk-len)";

#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    value: Value,
    expire_at: Option<u64>,
    /// [`Store::applied`] when the entry was last written (what `WATCH`
    /// compares).
    version: u64,
}

/// The key space. See the module docs.
#[derive(Debug, Default, Clone)]
pub struct Store {
    /// Persistent (structure-sharing) maps: a snapshot copies them in O(1)
    /// and encodes the copy on another thread while writes go on. The key
    /// space is hashed (a write walks a few 32-way levels and compares one
    /// key, where a B-tree compared keys at every level); the expiries are
    /// ordered, the earliest first.
    map: HashMap<Vec<u8>, Entry>,
    /// (expire_at, key) for every key with an expiry.
    expiries: OrdSet<(u64, Vec<u8>)>,
    /// What `WATCH` sees of absent keys: see [`Tombstones`].
    tombs: Tombstones,
    clock_ms: u64,
    applied: u64,
    /// Event classes to queue (this member's, not replicated).
    notify: NotifyFlags,
    events: VecDeque<KeyEvent>,
    events_dropped: u64,
    leader_term: u64,
}

/// Why a snapshot could not be restored.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SnapshotError {
    /// Not a snapshot of this version.
    #[error("bad snapshot header")]
    BadHeader,
    /// The bytes end inside an entry, or have bytes left over.
    #[error("snapshot truncated or with trailing bytes")]
    Truncated,
}

/// Strings only (before data types): still restored.
const SNAP_MAGIC_V1: &[u8; 8] = b"XLKVSNP1";
/// Typed values and entry versions, no tombstones: still restored.
const SNAP_MAGIC_V2: &[u8; 8] = b"XLKVSTO2";
/// Typed values, entry versions and tombstones.
const SNAP_MAGIC: &[u8; 8] = b"XLKVSTO3";

/// The bit that marks the [`Store::version`] of an absent key.
pub const ABSENT: u64 = 1 << 63;

/// Most tombstones a store keeps ([`Tombstones`]).
pub const MAX_TOMBSTONES: usize = 1 << 16;

/// The applied count at which each recently removed key was removed, so
/// that `WATCH` of an absent key sees it created and removed again. At
/// most [`MAX_TOMBSTONES`] are kept; when one more is needed the oldest
/// goes and `floor` rises to its stamp: a key without a tombstone reads
/// as removed at `floor`. That can abort an `EXEC` whose watched key was
/// absent throughout (after that many removals of other keys) — never
/// let one through that a change should have aborted. Replicated state
/// (a deterministic function of the applied ops, in the snapshot), so
/// every member decides an `EXEC` the same way.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Tombstones {
    stamps: HashMap<Vec<u8>, u64>,
    /// (stamp, key), the oldest first.
    order: OrdSet<(u64, Vec<u8>)>,
    floor: u64,
}

impl Tombstones {
    /// The applied count at which `key` was last removed, as far as kept.
    pub fn stamp(&self, key: &[u8]) -> u64 {
        self.stamps.get(key).copied().unwrap_or(self.floor)
    }

    /// Records that `key` was removed at applied count `at`.
    pub fn bury(&mut self, key: &[u8], at: u64) {
        if let Some(old) = self.stamps.insert(key.to_vec(), at) {
            self.order.remove(&(old, key.to_vec()));
        }
        self.order.insert((at, key.to_vec()));
        while self.stamps.len() > MAX_TOMBSTONES {
            let Some((t, k)) = self.order.remove_min() else {
                break;
            };
            self.stamps.remove(&k);
            self.floor = self.floor.max(t);
        }
    }

    /// How many are kept.
    pub fn len(&self) -> usize {
        self.stamps.len()
    }

    /// True when none is kept.
    pub fn is_empty(&self) -> bool {
        self.stamps.is_empty()
    }
}

impl Store {
    /// An empty store with its clock at 0.
    pub fn new() -> Self {
        Store::default()
    }

    /// The logical clock: the largest `ts_ms` applied.
    pub fn clock_ms(&self) -> u64 {
        self.clock_ms
    }

    /// How many ops were applied since creation (or the snapshot).
    pub fn applied(&self) -> u64 {
        self.applied
    }

    /// Queue events of these classes from now on (`NONE`: none, and the
    /// queue is emptied). A member sets the classes its subscribers can
    /// receive, so a store with no subscriber queues nothing.
    pub fn set_notifications(&mut self, classes: NotifyFlags) {
        self.notify = classes;
        if classes.is_empty() {
            self.events.clear();
        }
    }

    /// The classes queued.
    pub fn notifications(&self) -> NotifyFlags {
        self.notify
    }

    /// Takes the queued events, oldest first.
    pub fn drain_events(&mut self) -> std::collections::vec_deque::Drain<'_, KeyEvent> {
        self.events.drain(..)
    }

    /// Events not queued because the queue held [`MAX_QUEUED_EVENTS`].
    pub fn events_dropped(&self) -> u64 {
        self.events_dropped
    }

    /// The term of the last leader whose first entry this member applied
    /// (0 before any); every member reports the same once it has caught up.
    pub fn leader_term(&self) -> u64 {
        self.leader_term
    }

    /// Records that the first entry of a leader of `term` was applied.
    pub fn set_leader_term(&mut self, term: u64) {
        self.leader_term = self.leader_term.max(term);
    }

    /// The replicated state alone, as it is now, in O(1) (the maps share
    /// their structure with this store's until either changes): what a
    /// snapshot encodes, for another thread to encode.
    pub fn frozen(&self) -> Store {
        Store {
            map: self.map.clone(),
            expiries: self.expiries.clone(),
            tombs: self.tombs.clone(),
            clock_ms: self.clock_ms,
            applied: self.applied,
            ..Store::new()
        }
    }

    /// Replaces the replicated state with `new`'s (a restored snapshot),
    /// keeping this member's own (notifications, leader term).
    pub fn replace(&mut self, new: Store) {
        let Store {
            map,
            expiries,
            tombs,
            clock_ms,
            applied,
            ..
        } = new;
        self.map = map;
        self.expiries = expiries;
        self.tombs = tombs;
        self.clock_ms = clock_ms;
        self.applied = applied;
    }

    fn event(&mut self, class: NotifyFlags, event: &'static str, key: &[u8]) {
        if !self.notify.contains(class) || self.notify.is_empty() {
            return;
        }
        if self.events.len() >= MAX_QUEUED_EVENTS {
            self.events_dropped += 1;
            return;
        }
        self.events.push_back(KeyEvent {
            class,
            event,
            key: key.to_vec(),
        });
    }

    /// The instant existence is judged at: the logical clock, never the
    /// reader's `now_ms` (see the module docs).
    fn now(&self, _now_ms: u64) -> u64 {
        self.clock_ms
    }

    fn live(&self, key: &[u8], now: u64) -> Option<&Entry> {
        self.map
            .get(key)
            .filter(|e| e.expire_at.map_or(true, |t| t > now))
    }

    /// The string value of `key` at `now_ms` (`None` when it does not
    /// exist or holds another type).
    pub fn get(&self, key: &[u8], now_ms: u64) -> Option<&[u8]> {
        match self.value(key, now_ms) {
            Some(Value::Str(v)) => Some(v.as_slice()),
            _ => None,
        }
    }

    /// The value of `key` at `now_ms`, of any type.
    pub fn value(&self, key: &[u8], now_ms: u64) -> Option<&Value> {
        self.live(key, self.now(now_ms)).map(|e| &e.value)
    }

    /// The version of `key` at `now_ms`, what `WATCH` records and `EXEC`
    /// compares: for a key that exists, the applied count of its last
    /// change (below [`ABSENT`]); for an absent one, [`ABSENT`] plus the
    /// applied count of its last removal (delete, expiry, emptied
    /// collection) as its tombstone remembers it (see [`Tombstones`]).
    /// Any change to a key between two reads — including one that leaves
    /// it as it was, such as a create then a delete — moves its version.
    pub fn version(&self, key: &[u8], now_ms: u64) -> u64 {
        match self.live(key, self.now(now_ms)) {
            Some(e) => e.version,
            None => ABSENT | self.tombs.stamp(key),
        }
    }

    /// `None` when `key` does not exist at `now_ms`, else its absolute
    /// expiry time if it has one.
    pub fn expiry(&self, key: &[u8], now_ms: u64) -> Option<Option<u64>> {
        self.live(key, self.now(now_ms)).map(|e| e.expire_at)
    }

    /// Keys alive at `now_ms`, in no particular order.
    pub fn keys(&self, now_ms: u64) -> impl Iterator<Item = &[u8]> {
        let now = self.now(now_ms);
        self.map
            .iter()
            .filter(move |(_, e)| e.expire_at.map_or(true, |t| t > now))
            .map(|(k, _)| k.as_slice())
    }

    /// Keys alive at `now_ms`.
    pub fn len(&self, now_ms: u64) -> usize {
        let now = self.now(now_ms);
        let dead = self.expiries.range(..(now + 1, Vec::new())).count();
        self.map.len() - dead.min(self.map.len())
    }

    /// True when no key is alive at `now_ms`.
    pub fn is_empty(&self, now_ms: u64) -> bool {
        self.len(now_ms) == 0
    }

    /// Keys alive at `now_ms` with an expiry.
    pub fn expiring(&self, now_ms: u64) -> usize {
        let now = self.now(now_ms);
        self.expiries.range((now + 1, Vec::new())..).count()
    }

    fn remove(&mut self, key: &[u8]) -> Option<Entry> {
        let e = self.map.remove(key)?;
        if let Some(t) = e.expire_at {
            self.expiries.remove(&(t, key.to_vec()));
        }
        self.tombs.bury(key, self.applied);
        Some(e)
    }

    fn set_expiry(&mut self, key: &[u8], at: Option<u64>) {
        let version = self.applied;
        if let Some(e) = self.map.get_mut(key) {
            if let Some(old) = e.expire_at {
                self.expiries.remove(&(old, key.to_vec()));
            }
            e.expire_at = at;
            e.version = version;
            if let Some(t) = at {
                self.expiries.insert((t, key.to_vec()));
            }
        }
    }

    /// Sets `key` in one walk of the map (the insert hands back the entry
    /// it replaced, whose expiry, if any, leaves the expiry index).
    fn put(&mut self, key: &[u8], value: Value, expire_at: Option<u64>) {
        let entry = Entry {
            value,
            expire_at,
            version: self.applied,
        };
        match self.map.insert(key.to_vec(), entry) {
            None => self.event(NotifyFlags::NEW, "new", key),
            Some(Entry {
                expire_at: Some(old),
                ..
            }) => {
                self.expiries.remove(&(old, key.to_vec()));
            }
            Some(_) => {}
        }
        if let Some(t) = expire_at {
            self.expiries.insert((t, key.to_vec()));
        }
    }

    /// Inside [`Store::apply`]: the value of `key` (every key left is
    /// alive at the logical clock).
    pub(crate) fn cur(&self, key: &[u8]) -> Option<&Value> {
        self.map.get(key).map(|e| &e.value)
    }

    /// Inside [`Store::apply`]: the value and expiry of `key`.
    pub(crate) fn cur_entry(&self, key: &[u8]) -> Option<(&Value, Option<u64>)> {
        self.map.get(key).map(|e| (&e.value, e.expire_at))
    }

    /// Inside [`Store::apply`]: `key`'s value to change. The change counts
    /// for `WATCH` once announced with [`Store::notify`] (Redis signals a
    /// modified key where it fires its keyspace event: a command that
    /// changes nothing, such as `SADD` of a member already there, touches
    /// no watch).
    pub(crate) fn cur_mut(&mut self, key: &[u8]) -> Option<&mut Value> {
        self.map.get_mut(key).map(|e| &mut e.value)
    }

    /// Inside [`Store::apply`]: sets `key` to `value` with this expiry
    /// (replacing whatever it held).
    pub(crate) fn put_value(&mut self, key: &[u8], value: Value, expire_at: Option<u64>) {
        self.put(key, value, expire_at);
    }

    /// Inside [`Store::apply`]: deletes `key`; true if it existed.
    pub(crate) fn delete(&mut self, key: &[u8]) -> bool {
        self.remove(key).is_some()
    }

    /// Inside [`Store::apply`]: deletes `key` if it holds an empty
    /// collection (Redis never keeps one).
    pub(crate) fn drop_if_empty(&mut self, key: &[u8]) {
        if self.cur(key).is_some_and(Value::is_empty_collection) {
            self.remove(key);
            self.event(NotifyFlags::GENERIC, "del", key);
        }
    }

    /// Inside [`Store::apply`]: `key` was changed — its version moves (what
    /// `WATCH` sees) and its keyspace event is queued.
    pub(crate) fn notify(&mut self, class: NotifyFlags, event: &'static str, key: &[u8]) {
        let version = self.applied;
        if let Some(e) = self.map.get_mut(key) {
            e.version = version;
        }
        self.event(class, event, key);
    }

    /// Removes every key whose expiry is not after `now`.
    fn purge(&mut self, now: u64) {
        while let Some((t, _)) = self.expiries.get_min() {
            if *t > now {
                break;
            }
            if let Some((_, k)) = self.expiries.remove_min() {
                self.map.remove(&k);
                self.tombs.bury(&k, self.applied);
                self.event(NotifyFlags::EXPIRED, "expired", &k);
            }
        }
    }

    /// Up to `limit` keys whose expiry is not after `now_ms`, the earliest
    /// first (what the leader removes with [`WriteCmd::DelExpired`]).
    pub fn due(&self, now_ms: u64, limit: usize) -> Vec<Vec<u8>> {
        self.expiries
            .range(..(now_ms.saturating_add(1), Vec::new()))
            .take(limit)
            .map(|(_, k)| k.clone())
            .collect()
    }

    /// [`WriteCmd::DelExpired`]: removes each key still due at `at`.
    fn del_expired(&mut self, keys: &[Vec<u8>], at: u64) -> Reply {
        let mut n = 0;
        for k in keys {
            let due = self
                .map
                .get(k.as_slice())
                .and_then(|e| e.expire_at)
                .is_some_and(|t| t <= at);
            if due {
                self.remove(k);
                self.event(NotifyFlags::EXPIRED, "expired", k);
                n += 1;
            }
        }
        Reply::Integer(n)
    }

    /// The reply `op` would get from [`Store::apply`] now if applying it
    /// changes nothing in the store — no value, expiry, version or event
    /// (a member already in its set, a pop from an absent key: see
    /// `types::unchanged_reply`; `DEL` of absent keys). Such a
    /// write can be answered like a linearizable read, without a log entry,
    /// as Redis neither propagates it nor touches a `WATCH`. `None` when it
    /// might change something, and whenever some key is due to expire at
    /// the op's time (applying would remove it first).
    pub fn unchanged_reply(&self, op: &WriteOp) -> Option<Reply> {
        let now = self.clock_ms.max(op.ts_ms);
        if self.expiries.get_min().is_some_and(|(t, _)| *t <= now) {
            return None;
        }
        match &op.cmd {
            WriteCmd::Data { args, .. } => crate::types::unchanged_reply(self, args),
            WriteCmd::Del { keys } => keys
                .iter()
                .all(|k| !self.map.contains_key(k.as_slice()))
                .then_some(Reply::Integer(0)),
            _ => None,
        }
    }

    /// Applies one write and returns its reply. Deterministic: depends only
    /// on the store and the op.
    pub fn apply(&mut self, op: &WriteOp) -> Reply {
        self.applied += 1;
        if let WriteCmd::DelExpired { keys } = &op.cmd {
            return self.del_expired(keys, op.ts_ms);
        }
        self.clock_ms = self.clock_ms.max(op.ts_ms);
        let now = self.clock_ms;
        self.purge(now);
        self.apply_cmd(&op.cmd, now)
    }

    fn apply_cmd(&mut self, cmd: &WriteCmd, now: u64) -> Reply {
        match cmd {
            WriteCmd::Set {
                key,
                value,
                cond,
                ttl,
                get,
            } => {
                // A plain SET needs nothing of the old entry: `put` is then
                // the only walk of the map.
                let plain =
                    matches!(cond, SetCond::Always) && !*get && !matches!(ttl, SetTtl::Keep);
                let (exists, old_expiry, old_value) = match plain {
                    true => (false, None, None),
                    false => match self.map.get(key.as_slice()) {
                        Some(e) => {
                            let old = match (&e.value, *get) {
                                (Value::Str(v), true) => Some(v.clone()),
                                (_, true) => return wrongtype(),
                                _ => None,
                            };
                            (true, e.expire_at, old)
                        }
                        None => (false, None, None),
                    },
                };
                let proceed = match cond {
                    SetCond::Always => true,
                    SetCond::IfAbsent => !exists,
                    SetCond::IfPresent => exists,
                };
                let reply = if *get {
                    Reply::Bulk(old_value)
                } else if proceed {
                    Reply::ok()
                } else {
                    Reply::nil()
                };
                if proceed {
                    let expire_at = match ttl {
                        SetTtl::Persist => None,
                        SetTtl::Keep => old_expiry,
                        SetTtl::At(t) => Some(*t),
                    };
                    if expire_at.is_some_and(|t| t <= now) {
                        if self.remove(key).is_some() {
                            self.event(NotifyFlags::GENERIC, "del", key);
                        }
                    } else {
                        self.put(key, Value::Str(value.clone()), expire_at);
                        self.event(NotifyFlags::STRING, "set", key);
                        if matches!(ttl, SetTtl::At(_)) {
                            self.event(NotifyFlags::GENERIC, "expire", key);
                        }
                    }
                }
                reply
            }
            WriteCmd::MSet { pairs } => {
                for (k, v) in pairs {
                    self.put(k, Value::Str(v.clone()), None);
                    self.event(NotifyFlags::STRING, "set", k);
                }
                Reply::ok()
            }
            WriteCmd::Del { keys } => {
                let mut n = 0;
                for k in keys {
                    if self.remove(k).is_some() {
                        self.event(NotifyFlags::GENERIC, "del", k);
                        n += 1;
                    }
                }
                Reply::Integer(n)
            }
            WriteCmd::IncrBy { key, delta } => {
                let (cur, exp) = match self.map.get(key.as_slice()) {
                    None => (0, None),
                    Some(Entry {
                        value: Value::Str(v),
                        expire_at,
                        ..
                    }) => match parse_i64_strict(v) {
                        Some(v) => (v, *expire_at),
                        None => return Reply::err(ERR_NOT_INTEGER),
                    },
                    Some(_) => return wrongtype(),
                };
                let Some(new) = cur.checked_add(*delta) else {
                    return Reply::err(ERR_OVERFLOW);
                };
                self.put(key, Value::Str(new.to_string().into_bytes()), exp);
                self.event(NotifyFlags::STRING, "incrby", key);
                Reply::Integer(new)
            }
            WriteCmd::Append { key, value } => {
                let len = match self.cur_mut(key) {
                    Some(Value::Str(v)) => {
                        if v.len() + value.len() > MAX_OP_BYTES {
                            return Reply::err(ERR_TOO_BIG);
                        }
                        v.extend_from_slice(value);
                        v.len()
                    }
                    Some(_) => return wrongtype(),
                    None => {
                        self.put(key, Value::Str(value.clone()), None);
                        value.len()
                    }
                };
                self.notify(NotifyFlags::STRING, "append", key);
                Reply::Integer(len as i64)
            }
            WriteCmd::ExpireAt { key, at_ms } => {
                if !self.map.contains_key(key.as_slice()) {
                    return Reply::Integer(0);
                }
                if *at_ms <= now {
                    self.remove(key);
                    self.event(NotifyFlags::GENERIC, "del", key);
                } else {
                    self.set_expiry(key, Some(*at_ms));
                    self.event(NotifyFlags::GENERIC, "expire", key);
                }
                Reply::Integer(1)
            }
            WriteCmd::Persist { key } => match self.map.get(key.as_slice()) {
                Some(e) if e.expire_at.is_some() => {
                    self.set_expiry(key, None);
                    self.event(NotifyFlags::GENERIC, "persist", key);
                    Reply::Integer(1)
                }
                _ => Reply::Integer(0),
            },
            WriteCmd::FlushDb => {
                self.map.clear();
                self.expiries.clear();
                Reply::ok()
            }
            WriteCmd::Data { args, seed } => crate::types::apply(self, args, *seed, now),
            WriteCmd::Query { args, seed } => crate::commands::query(self, args, *seed, now),
            // Only at the top (`apply`); a decoded op never has it here.
            WriteCmd::DelExpired { keys } => self.del_expired(keys, now),
            WriteCmd::Exec { watched, cmds } => {
                if watched.iter().any(|(k, v)| self.version(k, now) != *v) {
                    return Reply::Array(None);
                }
                Reply::Array(Some(cmds.iter().map(|c| self.apply_cmd(c, now)).collect()))
            }
        }
    }

    /// A canonical serialization of the whole state (entries sorted by
    /// key): equal stores give equal bytes, so it doubles as a replica
    /// comparison. For Raft snapshots (encoded from a [`Store::frozen`]
    /// copy, off the member's thread: the sort is paid there).
    pub fn snapshot(&self) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(SNAP_MAGIC);
        out.extend_from_slice(&self.clock_ms.to_le_bytes());
        out.extend_from_slice(&self.applied.to_le_bytes());
        out.extend_from_slice(&(self.map.len() as u64).to_le_bytes());
        let mut sorted: Vec<(&Vec<u8>, &Entry)> = self.map.iter().collect();
        sorted.sort_unstable_by(|a, b| a.0.cmp(b.0));
        for (k, e) in sorted {
            snap::put_bytes(&mut out, k);
            snap::put_value(&mut out, &e.value);
            out.extend_from_slice(&e.expire_at.map_or(u64::MAX, |t| t).to_le_bytes());
            out.extend_from_slice(&e.version.to_le_bytes());
        }
        out.extend_from_slice(&self.tombs.floor.to_le_bytes());
        out.extend_from_slice(&(self.tombs.order.len() as u64).to_le_bytes());
        for (t, k) in &self.tombs.order {
            snap::put_bytes(&mut out, k);
            out.extend_from_slice(&t.to_le_bytes());
        }
        out
    }

    /// Rebuilds a store from [`Store::snapshot`] bytes (or a snapshot of
    /// an earlier format: strings only, or without tombstones).
    pub fn restore(b: &[u8]) -> Result<Store, SnapshotError> {
        let (typed, tombs, rest) = if let Some(r) = b.strip_prefix(SNAP_MAGIC) {
            (true, true, r)
        } else if let Some(r) = b.strip_prefix(SNAP_MAGIC_V2) {
            (true, false, r)
        } else if let Some(r) = b.strip_prefix(SNAP_MAGIC_V1) {
            (false, false, r)
        } else {
            return Err(SnapshotError::BadHeader);
        };
        let mut r = snap::Reader(rest);
        let clock_ms = r.u64()?;
        let applied = r.u64()?;
        let n = r.u64()?;
        let mut s = Store {
            clock_ms,
            applied,
            ..Store::default()
        };
        for _ in 0..n {
            let k = r.bytes()?;
            let v = if typed {
                r.value()?
            } else {
                Value::Str(r.bytes()?)
            };
            let t = r.u64()?;
            let version = if typed { r.u64()? } else { 0 };
            s.applied = version;
            s.put(&k, v, (t != u64::MAX).then_some(t));
        }
        s.applied = applied;
        if tombs {
            let floor = r.u64()?;
            for _ in 0..r.u64()? {
                let k = r.bytes()?;
                let t = r.u64()?;
                s.tombs.bury(&k, t);
            }
            s.tombs.floor = floor;
        }
        if !r.0.is_empty() {
            return Err(SnapshotError::Truncated);
        }
        Ok(s)
    }
}

/// The snapshot encoding of values: byte strings `len:u64 | bytes`,
/// a value `kind:u8 | count:u64 | items` (a sorted set's items are
/// member and score bits).
mod snap {
    use super::SnapshotError;
    use crate::value::{Score, Value, ZSet};

    pub(super) fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
        out.extend_from_slice(&(b.len() as u64).to_le_bytes());
        out.extend_from_slice(b);
    }

    pub(super) fn put_value(out: &mut Vec<u8>, v: &Value) {
        let count = |out: &mut Vec<u8>, n: usize| out.extend_from_slice(&(n as u64).to_le_bytes());
        match v {
            Value::Str(s) => {
                out.push(0);
                put_bytes(out, s);
            }
            Value::Hash(h) => {
                out.push(1);
                count(out, h.len());
                for (f, v) in h {
                    put_bytes(out, f);
                    put_bytes(out, v);
                }
            }
            Value::List(l) => {
                out.push(2);
                count(out, l.len());
                for x in l {
                    put_bytes(out, x);
                }
            }
            Value::Set(s) => {
                out.push(3);
                count(out, s.len());
                for x in s {
                    put_bytes(out, x);
                }
            }
            Value::ZSet(z) => {
                out.push(4);
                count(out, z.len());
                for (m, sc) in &z.scores {
                    put_bytes(out, m);
                    out.extend_from_slice(&sc.get().to_bits().to_le_bytes());
                }
            }
        }
    }

    pub(super) struct Reader<'a>(pub(super) &'a [u8]);

    impl Reader<'_> {
        pub(super) fn u64(&mut self) -> Result<u64, SnapshotError> {
            let (h, t) = self
                .0
                .split_first_chunk::<8>()
                .ok_or(SnapshotError::Truncated)?;
            self.0 = t;
            Ok(u64::from_le_bytes(*h))
        }

        pub(super) fn bytes(&mut self) -> Result<Vec<u8>, SnapshotError> {
            let n = self.u64()?;
            if (self.0.len() as u64) < n {
                return Err(SnapshotError::Truncated);
            }
            let (h, t) = self.0.split_at(n as usize);
            self.0 = t;
            Ok(h.to_vec())
        }

        /// A count of items of at least 8 bytes each.
        fn count(&mut self) -> Result<usize, SnapshotError> {
            let n = self.u64()?;
            if n.saturating_mul(8) > self.0.len() as u64 {
                return Err(SnapshotError::Truncated);
            }
            Ok(n as usize)
        }

        pub(super) fn value(&mut self) -> Result<Value, SnapshotError> {
            let (&kind, t) = self.0.split_first().ok_or(SnapshotError::Truncated)?;
            self.0 = t;
            Ok(match kind {
                0 => Value::Str(self.bytes()?),
                1 => {
                    let mut h = imbl::OrdMap::new();
                    for _ in 0..self.count()? {
                        let f = self.bytes()?;
                        h.insert(f, self.bytes()?);
                    }
                    Value::Hash(h)
                }
                2 => {
                    let mut l = imbl::Vector::new();
                    for _ in 0..self.count()? {
                        l.push_back(self.bytes()?);
                    }
                    Value::List(l)
                }
                3 => {
                    let mut s = imbl::OrdSet::new();
                    for _ in 0..self.count()? {
                        s.insert(self.bytes()?);
                    }
                    Value::Set(s)
                }
                4 => {
                    let mut z = ZSet::default();
                    for _ in 0..self.count()? {
                        let m = self.bytes()?;
                        let sc = Score::new(f64::from_bits(self.u64()?))
                            .ok_or(SnapshotError::Truncated)?;
                        z.insert(m, sc);
                    }
                    Value::ZSet(z)
                }
                _ => return Err(SnapshotError::Truncated),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::{Score, ZSet};

    #[test]
    fn snapshot_round_trips_every_type() {
        let mut s = Store::new();
        let mut z = ZSet::default();
        z.insert(b"m".to_vec(), Score::new(1.5).unwrap());
        let values = [
            Value::Str(b"v".to_vec()),
            Value::Hash([(b"f".to_vec(), b"x".to_vec())].into_iter().collect()),
            Value::List([b"a".to_vec(), b"b".to_vec()].into_iter().collect()),
            Value::Set([b"a".to_vec()].into_iter().collect()),
            Value::ZSet(z),
        ];
        for (i, v) in values.iter().enumerate() {
            s.applied = i as u64 + 1;
            s.put(&[b'k', i as u8], v.clone(), (i == 2).then_some(99));
        }
        s.applied += 1;
        s.put(b"gone", Value::Str(b"x".to_vec()), None);
        s.applied += 1;
        s.remove(b"gone");
        let b = s.snapshot();
        let r = Store::restore(&b).expect("restore");
        assert_eq!(r.snapshot(), b);
        // The tombstone travels: WATCH of the removed key reads the same.
        assert_eq!(r.version(b"gone", 0), s.version(b"gone", 0));
        assert_eq!(r.version(b"gone", 0), ABSENT | s.applied);
        for (i, v) in values.iter().enumerate() {
            assert_eq!(r.value(&[b'k', i as u8], 0), Some(v));
            assert_eq!(r.version(&[b'k', i as u8], 0), i as u64 + 1);
        }
        for cut in 0..b.len() {
            assert!(Store::restore(&b[..cut]).is_err());
        }
    }
}

#[cfg(test)]
mod tomb_tests {
    use super::*;

    /// Past the cap the oldest tombstones go and the floor rises: a key
    /// whose tombstone went reads as removed at the floor (a possible
    /// spurious abort, never a missed change).
    #[test]
    fn tombstones_are_bounded() {
        let mut t = Tombstones::default();
        for i in 0..MAX_TOMBSTONES as u64 + 2 {
            t.bury(&i.to_le_bytes(), i + 1);
        }
        assert_eq!(t.len(), MAX_TOMBSTONES);
        assert_eq!(t.stamp(&0u64.to_le_bytes()), 2);
        assert_eq!(t.stamp(&1u64.to_le_bytes()), 2);
        assert_eq!(t.stamp(&2u64.to_le_bytes()), 3);
        assert_eq!(t.stamp(b"never"), 2);
        // Burying again moves a key's stamp without growing the set.
        t.bury(&2u64.to_le_bytes(), 1_000_000);
        assert_eq!(t.len(), MAX_TOMBSTONES);
        assert_eq!(t.stamp(&2u64.to_le_bytes()), 1_000_000);
    }
}
