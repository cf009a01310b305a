//! [`Store`]: the deterministic state machine (strings, hashes, lists,
//! sets and sorted sets, each key with an optional expiry).
//!
//! Writes go only through `crate::exec::Apply::apply`, which takes its time from the
//! op (`WriteOp::ts_ms`) and keeps a logical clock, the maximum `ts_ms`
//! applied so far; keys whose expiry is not after that clock are removed
//! (in a deterministic order) before each op runs, and the leader removes
//! the others it finds expired with `WriteCmd::DelExpired` ops
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

use crate::keyhash::KeyHash;
use crate::notify::{KeyEvent, NotifyFlags};
use crate::value::Value;
use imbl::{GenericHashMap, OrdSet};

/// The key space's maps: hashed with [`KeyHash`].
type HashMap<K, V> = GenericHashMap<K, V, KeyHash, imbl::shared_ptr::DefaultSharedPtr>;
use std::collections::VecDeque;

/// Most keyspace events queued between two drains; later ones are dropped
/// and counted ([`Store::events_dropped`]).
pub const MAX_QUEUED_EVENTS: usize = 1 << 16;

/// Most bytes of keys and messages queued between two drains (a burst of
/// large `PUBLISH` applied in one turn); later events are dropped and
/// counted as past [`MAX_QUEUED_EVENTS`].
pub const MAX_QUEUED_EVENT_BYTES: usize = 64 << 20;

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
    /// The settings that shape replicated values.
    data_cfg: DataConfig,
    clock_ms: u64,
    applied: u64,
    /// Event classes to queue (this member's, not replicated).
    notify: NotifyFlags,
    events: VecDeque<KeyEvent>,
    /// Bytes of keys and messages in `events`.
    events_bytes: usize,
    events_dropped: u64,
    leader_term: u64,
    /// Keys removed because they expired, since start (`INFO`'s
    /// `expired_keys`; this member's count, not in snapshots).
    expired: u64,
    /// Changes signalled since start (`INFO`'s
    /// `rdb_changes_since_last_save`; this member's count, not in
    /// snapshots): one per key a write changed, as Redis counts its dirty.
    dirty: u64,
    /// Someone subscribes on this member: published messages are queued.
    subscribers: bool,
    /// Keys changed by applied ops, for client-side caching's
    /// invalidations (`CLIENT TRACKING`): kept only while `Some` (a member
    /// with tracking clients); `None` inside means "every key" (FLUSHALL).
    /// Each with the origin of the op that changed it.
    modified: Option<Vec<(u64, Option<Vec<u8>>)>>,
    /// The origin of the op being applied ([`crate::op::origin`]), while
    /// changes are kept.
    origin: u64,
    /// The users and their rules (replicated, in snapshots: see
    /// [`Store::users`]).
    users: crate::acl::UserTable,
    /// The `requirepass` value last applied (replicated).
    requirepass: Vec<u8>,
    /// Changes of the users applied since the client loop last took them
    /// ([`Store::take_acl_changes`]; this member's, not in snapshots).
    acl_changes: Vec<crate::acl::Changed>,
    /// The script cache and the function libraries (replicated, in
    /// snapshots).
    scripts: crate::script::Scripts,
}

/// The keys as they were before a script ran ([`Store::checkpoint`]): O(1)
/// to take, as the maps share their structure.
pub(crate) struct Checkpoint {
    map: HashMap<Vec<u8>, Entry>,
    expiries: OrdSet<(u64, Vec<u8>)>,
    tombs: Tombstones,
    events: usize,
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
/// Typed values, entry versions and tombstones, no data settings: still
/// restored.
const SNAP_MAGIC_V3: &[u8; 8] = b"XLKVSTO3";
/// Typed values, entry versions, tombstones and the data settings but
/// `stream-node-max-bytes`: still restored (it takes its default).
const SNAP_MAGIC_V4: &[u8; 8] = b"XLKVSTO4";
/// Typed values (streams included), entry versions, tombstones and every
/// data setting.
const SNAP_MAGIC: &[u8; 8] = b"XLKVSTO5";
/// The optional section of the users, after the data settings.
const SNAP_ACL: &[u8; 4] = b"ACL1";
/// The optional section of the scripts, last.
const SNAP_SCRIPTS: &[u8; 4] = b"SCR1";

/// The settings that shape replicated values (a sketch's bytes, where a
/// stream is trimmed): the same on every member, changed only by an op
/// (`CONFIG SET` of one of them, decided at the leader), part of
/// snapshots.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataConfig {
    /// `hll-sparse-max-bytes`: the largest sparse HyperLogLog.
    pub hll_sparse_max_bytes: u64,
    /// `stream-node-max-entries`: entries per node of a stream (where an
    /// approximate trim may cut).
    pub stream_node_max_entries: u64,
    /// `stream-node-max-bytes`: listpack bytes per node of a stream.
    pub stream_node_max_bytes: u64,
    /// `proto-max-bulk-len`: the largest string a command may make
    /// (`SETRANGE`, `SETBIT`, `APPEND`...).
    pub proto_max_bulk_len: u64,
}

impl Default for DataConfig {
    fn default() -> Self {
        DataConfig {
            hll_sparse_max_bytes: 3000,
            stream_node_max_entries: 100,
            stream_node_max_bytes: 4096,
            proto_max_bulk_len: 512 << 20,
        }
    }
}

impl DataConfig {
    /// The parameters it holds, by their `CONFIG` names.
    pub const NAMES: [&'static str; 4] = [
        "hll-sparse-max-bytes",
        "stream-node-max-entries",
        "stream-node-max-bytes",
        "proto-max-bulk-len",
    ];

    /// The stream settings as [`crate::data::stream`] takes them.
    pub fn stream(&self) -> crate::data::stream::StreamConfig {
        crate::data::stream::StreamConfig {
            node_max_entries: i64::try_from(self.stream_node_max_entries).unwrap_or(i64::MAX),
            node_max_bytes: self.stream_node_max_bytes,
        }
    }

    /// The value of parameter `name`, if it is one of [`Self::NAMES`].
    pub fn get(&self, name: &str) -> Option<u64> {
        match name {
            "hll-sparse-max-bytes" => Some(self.hll_sparse_max_bytes),
            "stream-node-max-entries" => Some(self.stream_node_max_entries),
            "stream-node-max-bytes" => Some(self.stream_node_max_bytes),
            "proto-max-bulk-len" => Some(self.proto_max_bulk_len),
            _ => None,
        }
    }

    /// Sets parameter `name` (one of [`Self::NAMES`]; others are ignored).
    pub fn set(&mut self, name: &str, v: u64) {
        match name {
            "hll-sparse-max-bytes" => self.hll_sparse_max_bytes = v,
            "stream-node-max-entries" => self.stream_node_max_entries = v,
            "stream-node-max-bytes" => self.stream_node_max_bytes = v,
            "proto-max-bulk-len" => self.proto_max_bulk_len = v,
            _ => {}
        }
    }
}

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
        if classes.is_empty() && !self.subscribers {
            self.events.clear();
            self.events_bytes = 0;
        }
    }

    /// The classes queued.
    pub fn notifications(&self) -> NotifyFlags {
        self.notify
    }

    /// Inside an op: queues a published message for this member's
    /// subscribers (of the shard channel `channel` when `shard`: `SPUBLISH`),
    /// in order with the keyspace events (none queued while nobody
    /// subscribes; dropped and counted past [`MAX_QUEUED_EVENTS`]).
    pub(crate) fn publish(&mut self, channel: &[u8], message: &[u8], shard: bool) {
        if !self.subscribers {
            return;
        }
        if !self.room_for_event(channel.len() + message.len()) {
            return;
        }
        self.events.push_back(KeyEvent {
            class: NotifyFlags::NONE,
            event: if shard {
                crate::notify::SHARD_MESSAGE
            } else {
                crate::notify::MESSAGE
            },
            key: channel.to_vec(),
            message: Some(message.to_vec()),
        });
    }

    /// Whether someone subscribes on this member (published messages are
    /// queued only then).
    pub fn set_subscribers(&mut self, any: bool) {
        self.subscribers = any;
        if !any && self.notify.is_empty() {
            self.events.clear();
            self.events_bytes = 0;
        }
    }

    /// Takes the queued events, oldest first.
    pub fn drain_events(&mut self) -> std::collections::vec_deque::Drain<'_, KeyEvent> {
        self.events_bytes = 0;
        self.events.drain(..)
    }

    /// Whether one more event of `bytes` fits the queue's bounds (counted
    /// in); if not, it is counted as dropped.
    fn room_for_event(&mut self, bytes: usize) -> bool {
        if self.events.len() >= MAX_QUEUED_EVENTS
            || self.events_bytes + bytes > MAX_QUEUED_EVENT_BYTES
        {
            self.events_dropped += 1;
            return false;
        }
        self.events_bytes += bytes;
        true
    }

    /// Keys removed because they expired, since this store started.
    pub fn expired_count(&self) -> u64 {
        self.expired
    }

    /// Changes signalled since this store started (see the field).
    pub fn dirty(&self) -> u64 {
        self.dirty
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
            data_cfg: self.data_cfg,
            clock_ms: self.clock_ms,
            applied: self.applied,
            users: self.users.clone(),
            requirepass: self.requirepass.clone(),
            scripts: self.scripts.clone(),
            ..Store::new()
        }
    }

    /// The script cache and the function libraries.
    pub fn scripts(&self) -> &crate::script::Scripts {
        &self.scripts
    }

    /// Inside an op: the scripts, to change.
    pub(crate) fn scripts_mut(&mut self) -> &mut crate::script::Scripts {
        &mut self.scripts
    }

    /// Inside an op: the keys as they are, for [`Store::rollback`].
    pub(crate) fn checkpoint(&self) -> Checkpoint {
        Checkpoint {
            map: self.map.clone(),
            expiries: self.expiries.clone(),
            tombs: self.tombs.clone(),
            events: self.events.len(),
        }
    }

    /// Inside an op: puts the keys back as `cp` took them and drops the
    /// events queued since (a script stopped by its budget: as if it never
    /// ran). Tracking clients are told every key may have changed.
    pub(crate) fn rollback(&mut self, cp: Checkpoint) {
        self.map = cp.map;
        self.expiries = cp.expiries;
        self.tombs = cp.tombs;
        self.events.truncate(cp.events);
        self.changed(None);
    }

    /// Replaces the replicated state with `new`'s (a restored snapshot),
    /// keeping this member's own (notifications, leader term).
    pub fn replace(&mut self, new: Store) {
        let Store {
            map,
            expiries,
            tombs,
            data_cfg,
            clock_ms,
            applied,
            users,
            requirepass,
            scripts,
            ..
        } = new;
        self.scripts = scripts;
        if users != self.users {
            self.acl_changed(crate::acl::Changed::Restored);
        }
        self.users = users;
        self.requirepass = requirepass;
        self.map = map;
        self.expiries = expiries;
        self.tombs = tombs;
        self.data_cfg = data_cfg;
        self.clock_ms = clock_ms;
        self.applied = applied;
        // Whatever a tracking client read may differ now.
        self.changed(None);
    }

    fn event(&mut self, class: NotifyFlags, event: &'static str, key: &[u8]) {
        if !self.notify.contains(class) || self.notify.is_empty() {
            return;
        }
        if !self.room_for_event(key.len()) {
            return;
        }
        self.events.push_back(KeyEvent {
            class,
            event,
            key: key.to_vec(),
            message: None,
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
    ///
    /// A key present but already expired — at the logical clock or at the
    /// reader's `now_ms`, whichever is later — reads as the tombstone its
    /// expiry will leave (stamped with the entry's own version, see
    /// `purge`): as in Redis, a key that was expired when watched and is
    /// then removed by its expiry (or a `FLUSHDB`) has logically not
    /// changed. Inside an op `now_ms` is the op's own time, never after the
    /// clock, so every member compares alike.
    pub fn version(&self, key: &[u8], now_ms: u64) -> u64 {
        match self.live(key, self.now(now_ms).max(now_ms)) {
            Some(e) => e.version,
            None => match self.map.get(key) {
                Some(e) => ABSENT | e.version,
                None => ABSENT | self.tombs.stamp(key),
            },
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

    /// Records that `key` changed (or, for `None`, every key).
    fn changed(&mut self, key: Option<&[u8]>) {
        if let Some(m) = &mut self.modified {
            if m.len() < MAX_QUEUED_EVENTS {
                m.push((self.origin, key.map(<[u8]>::to_vec)));
            } else if m.last().map_or(true, |(_, k)| k.is_some()) {
                // Too many to name: every key counts as changed.
                m.push((self.origin, None));
            }
        }
    }

    /// Keep the keys changed by applied ops from now on (`true`), or stop
    /// and forget them.
    pub fn track_changes(&mut self, on: bool) {
        match (on, &self.modified) {
            (true, None) => self.modified = Some(Vec::new()),
            (false, Some(_)) => self.modified = None,
            _ => {}
        }
    }

    /// Whether changed keys are kept ([`Store::track_changes`]).
    pub fn tracks_changes(&self) -> bool {
        self.modified.is_some()
    }

    /// The origin of the op applied next ([`crate::op::origin`] of its
    /// bytes), kept with the keys it changes.
    pub fn set_origin(&mut self, origin: u64) {
        self.origin = origin;
    }

    /// Takes the keys changed since the last call (`None`: every key),
    /// each with the origin of the op that changed it.
    pub fn take_changes(&mut self) -> Vec<(u64, Option<Vec<u8>>)> {
        self.modified
            .as_mut()
            .map(std::mem::take)
            .unwrap_or_default()
    }

    fn remove(&mut self, key: &[u8]) -> Option<Entry> {
        self.changed(Some(key));
        let e = self.map.remove(key)?;
        if let Some(t) = e.expire_at {
            self.expiries.remove(&(t, key.to_vec()));
        }
        self.tombs.bury(key, self.applied);
        Some(e)
    }

    fn set_expiry(&mut self, key: &[u8], at: Option<u64>) {
        self.changed(Some(key));
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
        self.changed(Some(key));
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

    /// Inside [`crate::exec::Apply::apply`]: the value of `key` (every key left is
    /// alive at the logical clock).
    pub(crate) fn cur(&self, key: &[u8]) -> Option<&Value> {
        self.map.get(key).map(|e| &e.value)
    }

    /// Inside [`crate::exec::Apply::apply`]: the value and expiry of `key`.
    pub(crate) fn cur_entry(&self, key: &[u8]) -> Option<(&Value, Option<u64>)> {
        self.map.get(key).map(|e| (&e.value, e.expire_at))
    }

    /// Inside [`crate::exec::Apply::apply`]: `key`'s value to change. The change counts
    /// for `WATCH` once announced with [`Store::notify`] (Redis signals a
    /// modified key where it fires its keyspace event: a command that
    /// changes nothing, such as `SADD` of a member already there, touches
    /// no watch).
    pub(crate) fn cur_mut(&mut self, key: &[u8]) -> Option<&mut Value> {
        self.map.get_mut(key).map(|e| &mut e.value)
    }

    /// Inside [`crate::exec::Apply::apply`]: sets `key` to `value` with this expiry
    /// (replacing whatever it held).
    pub(crate) fn put_value(&mut self, key: &[u8], value: Value, expire_at: Option<u64>) {
        self.put(key, value, expire_at);
    }

    /// Inside [`crate::exec::Apply::apply`]: deletes `key`; true if it existed.
    pub(crate) fn delete(&mut self, key: &[u8]) -> bool {
        self.remove(key).is_some()
    }

    /// Inside [`crate::exec::Apply::apply`]: deletes `key` if it holds an empty
    /// collection (Redis never keeps one).
    pub(crate) fn drop_if_empty(&mut self, key: &[u8]) {
        if self.cur(key).is_some_and(Value::is_empty_collection) {
            self.remove(key);
            self.event(NotifyFlags::GENERIC, "del", key);
        }
    }

    /// Inside an op: `key` was changed without a keyspace event (a
    /// sketch's cached count refreshed) — its version moves, what `WATCH`
    /// sees.
    pub(crate) fn touch(&mut self, key: &[u8]) {
        self.changed(Some(key));
        let version = self.applied;
        if let Some(e) = self.map.get_mut(key) {
            e.version = version;
        }
    }

    /// Inside [`crate::exec::Apply::apply`]: `key` was changed — its version moves (what
    /// `WATCH` sees) and its keyspace event is queued.
    pub(crate) fn notify(&mut self, class: NotifyFlags, event: &'static str, key: &[u8]) {
        self.changed(Some(key));
        self.dirty += 1;
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
                self.expired += 1;
                self.changed(Some(&k));
                // Stamped with its own version: see `version`.
                let stamp = self.map.remove(&k).map_or(self.applied, |e| e.version);
                self.tombs.bury(&k, stamp);
                self.event(NotifyFlags::EXPIRED, "expired", &k);
            }
        }
    }

    /// Up to `limit` keys whose expiry is not after `now_ms`, the earliest
    /// first (what the leader removes with `WriteCmd::DelExpired`).
    pub fn due(&self, now_ms: u64, limit: usize) -> Vec<Vec<u8>> {
        self.expiries
            .range(..(now_ms.saturating_add(1), Vec::new()))
            .take(limit)
            .map(|(_, k)| k.clone())
            .collect()
    }

    /// Removes each of `keys` still due to expire at `at` (each an
    /// `expired` event); how many went. The leader's expiry decision
    /// ([`crate::op::WriteCmd::DelExpired`]).
    pub(crate) fn del_expired(&mut self, keys: &[Vec<u8>], at: u64) -> i64 {
        let mut n = 0;
        for k in keys {
            let due = self
                .map
                .get(k.as_slice())
                .and_then(|e| e.expire_at)
                .is_some_and(|t| t <= at);
            if due {
                // Stamped with its own version, as `purge` does: see
                // `version`.
                let stamp = self.map.get(k.as_slice()).map(|e| e.version);
                self.remove(k);
                if let Some(v) = stamp {
                    self.tombs.bury(k, v);
                }
                self.expired += 1;
                self.event(NotifyFlags::EXPIRED, "expired", k);
                n += 1;
            }
        }
        n
    }

    /// Starts applying an op: counts it, moves the logical clock to
    /// `ts_ms` (never back) and removes the keys due at it. The instant the
    /// op runs at.
    pub(crate) fn begin_op(&mut self, ts_ms: u64) -> u64 {
        self.applied += 1;
        self.clock_ms = self.clock_ms.max(ts_ms);
        let now = self.clock_ms;
        self.purge(now);
        now
    }

    /// Starts applying an op that neither moves the clock nor purges
    /// (the leader's expiry batch).
    pub(crate) fn begin_bounded_op(&mut self) {
        self.applied += 1;
    }

    /// Whether some key is due to expire at `now` (an op at `now` would
    /// remove it first).
    pub(crate) fn some_due(&self, now: u64) -> bool {
        self.expiries.get_min().is_some_and(|(t, _)| *t <= now)
    }

    /// Whether `key` is in the map (inside an op every key there is
    /// alive).
    pub(crate) fn contains(&self, key: &[u8]) -> bool {
        self.map.contains_key(key)
    }

    /// Inside an op: sets `key`'s expiry (`None`: none); its version moves.
    pub(crate) fn set_expire(&mut self, key: &[u8], at: Option<u64>) {
        self.set_expiry(key, at);
    }

    /// Inside an op: deletes `key` with its `del` event; true if it existed.
    pub(crate) fn delete_with_event(&mut self, key: &[u8]) -> bool {
        let gone = self.remove(key).is_some();
        if gone {
            self.event(NotifyFlags::GENERIC, "del", key);
        }
        gone
    }

    /// Inside an op: queues an event without touching a version.
    pub(crate) fn emit(&mut self, class: NotifyFlags, event: &'static str, key: &[u8]) {
        self.event(class, event, key);
    }

    /// The settings that shape replicated values.
    pub fn data_config(&self) -> DataConfig {
        self.data_cfg
    }

    /// Inside an op: changes a setting that shapes replicated values.
    pub(crate) fn set_data_config(&mut self, name: &str, v: u64) {
        self.data_cfg.set(name, v);
    }

    /// The users and their rules: replicated state, changed only by
    /// [`crate::op::WriteCmd::Acl`] ops (and set before the log is
    /// replayed, from the server's start settings: [`Store::set_users`]).
    pub fn users(&self) -> &crate::acl::UserTable {
        &self.users
    }

    /// The `requirepass` value last applied (`CONFIG GET requirepass`).
    pub fn requirepass(&self) -> &[u8] {
        &self.requirepass
    }

    /// The users a member starts with, before any op (every member of a
    /// group from the same settings).
    pub fn set_users(&mut self, users: crate::acl::UserTable, requirepass: Vec<u8>) {
        self.users = users;
        self.requirepass = requirepass;
    }

    /// Inside an op: the users and the `requirepass` value, to change.
    pub(crate) fn acl_mut(&mut self) -> (&mut crate::acl::UserTable, &mut Vec<u8>) {
        (&mut self.users, &mut self.requirepass)
    }

    /// Inside an op: records a change of the users for this member's
    /// connections (bounded: past 1024 unread changes they read as one
    /// reload).
    pub(crate) fn acl_changed(&mut self, c: crate::acl::Changed) {
        if self.acl_changes.len() >= 1024 {
            self.acl_changes.clear();
            self.acl_changes.push(crate::acl::Changed::Reloaded);
        }
        self.acl_changes.push(c);
    }

    /// Takes the changes of the users applied since the last call.
    pub fn take_acl_changes(&mut self) -> Vec<crate::acl::Changed> {
        std::mem::take(&mut self.acl_changes)
    }

    /// Inside an op: removes every key (`FLUSHDB`).
    pub(crate) fn clear(&mut self) {
        self.changed(None);
        self.map.clear();
        self.expiries.clear();
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
        out.extend_from_slice(&self.data_cfg.hll_sparse_max_bytes.to_le_bytes());
        out.extend_from_slice(&self.data_cfg.stream_node_max_entries.to_le_bytes());
        out.extend_from_slice(&self.data_cfg.proto_max_bulk_len.to_le_bytes());
        out.extend_from_slice(&self.data_cfg.stream_node_max_bytes.to_le_bytes());
        // The users, when they differ from a fresh server's: `ACL1 |
        // requirepass | table` (a snapshot without them restores the
        // fresh table).
        if self.users != crate::acl::UserTable::new() || !self.requirepass.is_empty() {
            out.extend_from_slice(SNAP_ACL);
            snap::put_bytes(&mut out, &self.requirepass);
            snap::put_bytes(&mut out, &self.users.encode());
        }
        // The script cache and libraries, when there are any: `SCR1 |
        // scripts` (a snapshot without them restores none).
        if !self.scripts.is_empty() {
            out.extend_from_slice(SNAP_SCRIPTS);
            self.scripts.encode(&mut out);
        }
        out
    }

    /// Rebuilds a store from [`Store::snapshot`] bytes (or a snapshot of
    /// an earlier format: strings only, without tombstones, or without the
    /// data settings, which then take their defaults).
    pub fn restore(b: &[u8]) -> Result<Store, SnapshotError> {
        let (typed, tombs, cfg, v5, rest) = if let Some(r) = b.strip_prefix(SNAP_MAGIC) {
            (true, true, true, true, r)
        } else if let Some(r) = b.strip_prefix(SNAP_MAGIC_V4) {
            (true, true, true, false, r)
        } else if let Some(r) = b.strip_prefix(SNAP_MAGIC_V3) {
            (true, true, false, false, r)
        } else if let Some(r) = b.strip_prefix(SNAP_MAGIC_V2) {
            (true, false, false, false, r)
        } else if let Some(r) = b.strip_prefix(SNAP_MAGIC_V1) {
            (false, false, false, false, r)
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
        if cfg {
            s.data_cfg.hll_sparse_max_bytes = r.u64()?;
            s.data_cfg.stream_node_max_entries = r.u64()?;
            s.data_cfg.proto_max_bulk_len = r.u64()?;
        }
        if v5 {
            s.data_cfg.stream_node_max_bytes = r.u64()?;
            if let Some(rest) = r.0.strip_prefix(SNAP_ACL) {
                r.0 = rest;
                s.requirepass = r.bytes()?;
                s.users = crate::acl::UserTable::decode(&r.bytes()?)
                    .map_err(|_| SnapshotError::Truncated)?;
            }
            if let Some(rest) = r.0.strip_prefix(SNAP_SCRIPTS) {
                let (scripts, rest) =
                    crate::script::Scripts::decode(rest).map_err(|_| SnapshotError::Truncated)?;
                s.scripts = scripts;
                r.0 = rest;
            }
        }
        if !r.0.is_empty() {
            return Err(SnapshotError::Truncated);
        }
        Ok(s)
    }
}

/// The snapshot encoding of values: byte strings `len:u64 | bytes`,
/// a value `kind:u8 | count:u64 | items` (a sorted set's items are
/// member and score bits); a stream is `5 | bytes` (its RDB object).
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
            // A stream as its uncompressed RDB object (type byte
            // included): it carries every node, counter, group, PEL and
            // consumer, and reads back to an equal stream.
            Value::Stream(_) => {
                out.push(5);
                let o = crate::data::rdb::DumpOptions {
                    rdbcompression: false,
                    ..Default::default()
                };
                let mut b = Vec::new();
                crate::data::rdb::encode_object(v, &o, &mut b);
                put_bytes(out, &b);
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
                5 => {
                    let b = self.bytes()?;
                    match crate::data::rdb::load_object(&b) {
                        Ok((v @ Value::Stream(_), used)) if used == b.len() => v,
                        _ => return Err(SnapshotError::Truncated),
                    }
                }
                _ => return Err(SnapshotError::Truncated),
            })
        }
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod tomb_tests;
