//! [`Stream`]: the entry log itself: adding, deleting, trimming, ranges
//! and the group counters (entries read, lag) that depend on it.

use super::entry::{Entry, Fields, StreamConfig};
use super::error::StreamError;
use super::group::{Group, ENTRIES_READ_INVALID};
use super::id::{StreamId, XaddId};
use super::listpack::{
    entry_bytes, flag_deleted, master_bytes, rax_nodes, same_fields, Ent, Node, LISTPACK_MAX_SIZE,
};
use imbl::{OrdMap, Vector};
use std::sync::Arc;

/// A stream value.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Stream {
    /// The listpack nodes by master ID (their first entry's ID), each
    /// with its entries in listpack order.
    pub(super) nodes: OrdMap<StreamId, Node>,
    /// Live entries.
    pub(super) length: u64,
    pub(super) last_id: StreamId,
    pub(super) first_id: StreamId,
    pub(super) max_deleted_entry_id: StreamId,
    pub(super) entries_added: u64,
    pub(super) groups: OrdMap<Vec<u8>, Group>,
}

/// A trimming strategy (`MAXLEN`/`MINID`) with its options.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Trim {
    /// What to keep.
    pub strategy: TrimStrategy,
    /// `~`: remove whole nodes only.
    pub approx: bool,
    /// The most entries to remove (0: no limit). Redis sets it from
    /// `LIMIT`, or for `~` without `LIMIT` to 100 × node_max_entries
    /// (see [`Trim::new`]); exact trimming has none.
    pub limit: i64,
}

/// MAXLEN or MINID.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TrimStrategy {
    /// Keep at most this many entries.
    MaxLen(u64),
    /// Keep no entry below this ID.
    MinId(StreamId),
}

impl Trim {
    /// A trim as XADD/XTRIM set it up: `limit` is the `LIMIT` given (if
    /// any); approximate trimming without one gets
    /// 100 × `node_max_entries`, kept within 1..=1,000,000 (10,000 when not
    /// positive).
    pub fn new(
        strategy: TrimStrategy,
        approx: bool,
        limit: Option<i64>,
        cfg: &StreamConfig,
    ) -> Trim {
        let limit = match limit {
            Some(l) => l,
            None if approx => {
                let l = cfg.node_max_entries.wrapping_mul(100);
                if l <= 0 {
                    10_000
                } else {
                    l.min(1_000_000)
                }
            }
            None => 0,
        };
        Trim {
            strategy,
            approx,
            limit,
        }
    }
}

/// `now_ms` as Redis's signed milliseconds.
pub(super) fn ms(now_ms: u64) -> i64 {
    i64::try_from(now_ms).unwrap_or(i64::MAX)
}

impl Stream {
    /// An empty stream.
    pub fn new() -> Stream {
        Stream::default()
    }

    /// Entries in the stream (`XLEN`).
    pub fn len(&self) -> u64 {
        self.length
    }

    /// True without entries (an empty stream is still a key).
    pub fn is_empty(&self) -> bool {
        self.length == 0
    }

    /// The last ID generated (`last-generated-id`; what `$` means).
    pub fn last_id(&self) -> StreamId {
        self.last_id
    }

    /// The first entry's ID as recorded (`recorded-first-entry-id`; 0-0
    /// when empty).
    pub fn first_id(&self) -> StreamId {
        self.first_id
    }

    /// The highest ID deleted by XDEL (`max-deleted-entry-id`).
    pub fn max_deleted_entry_id(&self) -> StreamId {
        self.max_deleted_entry_id
    }

    /// Entries ever added (`entries-added`).
    pub fn entries_added(&self) -> u64 {
        self.entries_added
    }

    /// The last entry present, as Redis finds it (`streamLastValidID`:
    /// the first live entry of a backward scan).
    pub fn last_entry_id(&self) -> Option<StreamId> {
        let mut last = None;
        self.scan(StreamId::MIN, StreamId::MAX, true, |_, _, e| {
            last = Some(e.id);
            false
        });
        last
    }

    /// The fields of entry `id` (Redis's lookup: a scan from `id` to
    /// `id`).
    pub fn get(&self, id: StreamId) -> Option<&Fields> {
        let mut at = None;
        self.scan(id, id, false, |k, i, _| {
            at = Some((k, i));
            false
        });
        let (k, i) = at?;
        self.nodes.get(&k)?.order.get(i).map(|e| &e.fields)
    }

    /// All entries, in Redis's order (ascending IDs, but for Redis's own
    /// corner cases: see [`Stream::nodes`]).
    pub fn iter(&self) -> impl Iterator<Item = (&StreamId, &Fields)> + '_ {
        self.nodes.values().flat_map(|n| {
            n.order
                .iter()
                .filter(|e| !e.deleted)
                .map(|e| (&e.id, &e.fields))
        })
    }

    /// Redis's stream iterator (`streamIteratorStart`/`GetID`, deleted
    /// entries skipped): forward, from the node at or before `start` (or
    /// the first), nodes in key order and each node's entries in listpack
    /// order, it passes the live entries at or above `start` and stops at
    /// the first above `end`; backward, from the node at or before `end`
    /// (or the last), the mirror. `f` gets each entry with its node and
    /// index, and returns whether to go on.
    pub(super) fn scan(
        &self,
        start: StreamId,
        end: StreamId,
        rev: bool,
        mut f: impl FnMut(StreamId, usize, &Ent) -> bool,
    ) {
        if !rev {
            let seek = if start.is_zero() {
                None
            } else {
                self.nodes.get_prev(&start).map(|(k, _)| *k)
            };
            let nodes = match seek {
                Some(k) => self.nodes.range(k..),
                None => self.nodes.range(..),
            };
            for (k, node) in nodes {
                for (i, e) in node.order.iter().enumerate() {
                    if e.deleted || e.id < start {
                        continue;
                    }
                    if e.id > end || !f(*k, i, e) {
                        return;
                    }
                }
            }
        } else {
            let seek = if end.is_zero() {
                None
            } else {
                self.nodes.get_prev(&end).map(|(k, _)| *k)
            };
            let nodes = match seek {
                Some(k) => self.nodes.range(..=k),
                None => self.nodes.range(..),
            };
            for (k, node) in nodes.rev() {
                for i in (0..node.order.len()).rev() {
                    let Some(e) = node.order.get(i) else {
                        continue;
                    };
                    if e.deleted || e.id > end {
                        continue;
                    }
                    if e.id < start || !f(*k, i, e) {
                        return;
                    }
                }
            }
        }
    }

    /// The first live entry of a forward scan (Redis's
    /// `streamGetEdgeID(first, skip tombstones)`).
    pub fn first_live(&self) -> StreamId {
        let mut first = StreamId::MAX;
        self.scan(StreamId::MIN, StreamId::MAX, false, |_, _, e| {
            first = e.id;
            false
        });
        first
    }

    /// The consumer groups by name.
    pub fn groups(&self) -> &OrdMap<Vec<u8>, Group> {
        &self.groups
    }

    /// Group `name`.
    pub fn group(&self, name: &[u8]) -> Option<&Group> {
        self.groups.get(name)
    }

    /// Nodes of Redis's radix tree (`radix-tree-keys`).
    pub fn radix_tree_keys(&self) -> u64 {
        self.nodes.len() as u64
    }

    /// Nodes of the radix tree itself (`radix-tree-nodes`): those of a
    /// compressed radix tree over the nodes' 128-bit big-endian master IDs,
    /// as Redis's rax keeps it.
    pub fn radix_tree_nodes(&self) -> u64 {
        let keys: Vec<[u8; 16]> = self
            .nodes
            .keys()
            .map(|id| {
                let mut k = [0u8; 16];
                k[..8].copy_from_slice(&id.ms.to_be_bytes());
                k[8..].copy_from_slice(&id.seq.to_be_bytes());
                k
            })
            .collect();
        if keys.is_empty() {
            1
        } else {
            rax_nodes(&keys, 0)
        }
    }

    // -- adding -------------------------------------------------------

    /// XADD's append (trimming is [`Stream::trim`]): the ID from `id`
    /// (`*` from `now_ms`, or the last ID's successor when the clock is not
    /// ahead of it, so IDs never go back), the entry into the tail node or
    /// a new one (by `cfg`), counters updated. Errors as Redis's, in its
    /// order: `0-0`, exhausted stream, `ms-*` at the maximum sequence, ID
    /// not above the last, elements over 1 GiB.
    pub fn add(
        &mut self,
        id: XaddId,
        fields: Vec<(Vec<u8>, Vec<u8>)>,
        now_ms: u64,
        cfg: &StreamConfig,
    ) -> Result<StreamId, StreamError> {
        if id == XaddId::Explicit(StreamId::MIN) {
            return Err(StreamError::IdZero);
        }
        if self.last_id == StreamId::MAX {
            return Err(StreamError::Exhausted);
        }
        let new_id = match id {
            XaddId::Explicit(i) => i,
            XaddId::Ms(m) => {
                if self.last_id.ms == m {
                    if self.last_id.seq == u64::MAX {
                        return Err(StreamError::TooLarge);
                    }
                    StreamId::new(m, self.last_id.seq + 1)
                } else {
                    StreamId::new(m, 0)
                }
            }
            XaddId::Auto => {
                if now_ms > self.last_id.ms {
                    StreamId::new(now_ms, 0)
                } else {
                    self.last_id.incr().unwrap_or(StreamId::MIN)
                }
            }
        };
        if new_id <= self.last_id {
            return Err(StreamError::IdNotGreater);
        }
        let total: u64 = fields.iter().map(|(f, v)| (f.len() + v.len()) as u64).sum();
        if total > LISTPACK_MAX_SIZE {
            return Err(StreamError::TooLarge);
        }
        self.append(new_id, fields, total, cfg);
        Ok(new_id)
    }

    /// Appends an entry whose ID is above the last.
    pub(super) fn append(
        &mut self,
        id: StreamId,
        fields: Vec<(Vec<u8>, Vec<u8>)>,
        total: u64,
        cfg: &StreamConfig,
    ) {
        let max_bytes = if cfg.node_max_bytes == 0 || cfg.node_max_bytes > LISTPACK_MAX_SIZE {
            LISTPACK_MAX_SIZE
        } else {
            cfg.node_max_bytes
        };
        let tail = self.nodes.get_max().map(|(k, n)| {
            let full = n.lp_bytes() + total >= max_bytes
                || (cfg.node_max_entries != 0
                    && (n.live + n.deleted) as i64 >= cfg.node_max_entries);
            (*k, full)
        });
        let (master, same) = match tail {
            Some((k, false)) => {
                let same = self
                    .nodes
                    .get(&k)
                    .is_some_and(|node| same_fields(&node.master_fields, &fields));
                (k, same)
            }
            // A node keyed by this very ID can exist only in Redis's
            // corner of corners (XSETID below a deleted master); Redis would
            // lose the old node, this keeps filling it.
            Some((_, true)) if self.nodes.contains_key(&id) => {
                let same = self
                    .nodes
                    .get(&id)
                    .is_some_and(|node| same_fields(&node.master_fields, &fields));
                (id, same)
            }
            _ => {
                let names: Vec<Vec<u8>> = fields.iter().map(|(f, _)| f.clone()).collect();
                let bytes = master_bytes(&names);
                self.nodes.insert(
                    id,
                    Node {
                        master_fields: Arc::new(names),
                        live: 0,
                        deleted: 0,
                        bytes,
                        order: Vector::new(),
                    },
                );
                (id, true)
            }
        };
        let entry = entry_bytes(master, id, &fields, same);
        if let Some(node) = self.nodes.get_mut(&master) {
            node.bytes += entry;
            node.live += 1;
            node.order.push_back(Ent {
                id,
                fields: Arc::new(fields),
                deleted: false,
            });
        }
        self.length += 1;
        self.entries_added += 1;
        self.last_id = id;
        if self.length == 1 {
            self.first_id = id;
        }
    }

    // -- removing -----------------------------------------------------

    /// Removes live entry `id` from the entries and flags it in its node
    /// (the node goes when it was its last live entry).
    pub(super) fn remove_entry(&mut self, id: StreamId) -> bool {
        let mut at = None;
        self.scan(id, id, false, |k, i, _| {
            at = Some((k, i));
            false
        });
        let Some((k, i)) = at else {
            return false;
        };
        let drop_node = match self.nodes.get_mut(&k) {
            Some(node) if node.live <= 1 => true,
            Some(node) => {
                node.live -= 1;
                node.deleted += 1;
                flag_deleted(node, i);
                false
            }
            None => false,
        };
        if drop_node {
            self.nodes.remove(&k);
        }
        self.length = self.length.saturating_sub(1);
        true
    }

    /// XDEL: deletes the entries of `ids` present (each counts once) and
    /// returns how many; updates the first ID and `max-deleted-entry-id`.
    pub fn delete(&mut self, ids: &[StreamId]) -> u64 {
        let mut deleted = 0;
        let mut first_entry = false;
        for &id in ids {
            if self.remove_entry(id) {
                if id == self.first_id {
                    first_entry = true;
                }
                if id > self.max_deleted_entry_id {
                    self.max_deleted_entry_id = id;
                }
                deleted += 1;
            }
        }
        if deleted > 0 {
            if self.length == 0 {
                self.first_id = StreamId::MIN;
            } else if first_entry {
                self.first_id = self.first_live();
            }
        }
        deleted
    }

    /// XTRIM / XADD's trimming, as Redis's `streamTrim`: from the oldest
    /// node, removes whole nodes while the strategy allows (and the limit,
    /// counted in whole nodes' entries, is not passed); then, unless
    /// approximate, flags entries inside the next node. Returns the number
    /// of entries removed.
    pub fn trim(&mut self, t: &Trim) -> u64 {
        let mut deleted: u64 = 0;
        let mut cursor = StreamId::MIN;
        while let Some((master, live, last)) = self
            .nodes
            .get_next(&cursor)
            .map(|(k, n)| (*k, n.live, n.last().unwrap_or(*k)))
        {
            let len = self.len();
            if let TrimStrategy::MaxLen(max) = t.strategy {
                if len <= max {
                    break;
                }
            }
            if t.limit != 0 && (deleted + live) as i64 > t.limit {
                break;
            }
            let remove_node = match t.strategy {
                TrimStrategy::MaxLen(max) => len.saturating_sub(live) >= max,
                TrimStrategy::MinId(min) => last < min,
            };
            if remove_node {
                self.nodes.remove(&master);
                self.length = self.length.saturating_sub(live);
                deleted += live;
                match master.incr() {
                    Some(c) => cursor = c,
                    None => break,
                }
                continue;
            }
            if t.approx {
                break;
            }
            if let Some(node) = self.nodes.get_mut(&master) {
                for i in 0..node.order.len() {
                    let Some((id, was_deleted)) = node.order.get(i).map(|e| (e.id, e.deleted))
                    else {
                        break;
                    };
                    let stop = match t.strategy {
                        TrimStrategy::MaxLen(max) => self.length <= max,
                        TrimStrategy::MinId(min) => id >= min,
                    };
                    if stop {
                        break;
                    }
                    if !was_deleted {
                        flag_deleted(node, i);
                        node.live = node.live.saturating_sub(1);
                        node.deleted += 1;
                        self.length = self.length.saturating_sub(1);
                        deleted += 1;
                    }
                }
            }
            break;
        }
        if self.length == 0 {
            self.first_id = StreamId::MIN;
        } else if deleted > 0 {
            self.first_id = self.first_live();
        }
        deleted
    }

    // -- reading ------------------------------------------------------

    /// XRANGE (`rev` false) / XREVRANGE (`rev` true): entries with IDs in
    /// `start..=end`, at most `count` (0: all), from the end when `rev`.
    pub fn range(&self, start: StreamId, end: StreamId, count: usize, rev: bool) -> Vec<Entry> {
        let take = if count == 0 { usize::MAX } else { count };
        let mut out = Vec::new();
        self.scan(start, end, rev, |_, _, e| {
            out.push((e.id, e.fields.clone()));
            out.len() < take
        });
        out
    }

    /// XREAD's part for one stream: the entries after `after` (at most
    /// `count`, 0: all); `None` when there is none (Redis then leaves the
    /// stream out of the reply). The caller resolves `$` to
    /// [`Stream::last_id`].
    pub fn read_after(&self, after: StreamId, count: usize) -> Option<Vec<Entry>> {
        let last = self.last_entry_id()?;
        if last <= after {
            return None;
        }
        let start = after.incr().unwrap_or(StreamId::MIN);
        Some(self.range(start, StreamId::MAX, count, false))
    }

    // -- consumer groups: counters ------------------------------------

    /// Redis's `streamRangeHasTombstones(start, +inf)`.
    pub(super) fn tombstones_from(&self, start: StreamId) -> bool {
        if self.length == 0 || self.max_deleted_entry_id.is_zero() {
            return false;
        }
        if self.first_id > self.max_deleted_entry_id {
            return false;
        }
        start <= self.max_deleted_entry_id
    }

    /// Redis's `streamEstimateDistanceFromFirstEverEntry`: the logical
    /// read counter of `id`, or [`ENTRIES_READ_INVALID`].
    pub fn estimate_distance(&self, id: StreamId) -> i64 {
        let added = self.entries_added as i64;
        if self.entries_added == 0 {
            return 0;
        }
        if self.length == 0 && id <= self.last_id {
            return added;
        }
        if id == self.last_id {
            return added;
        }
        if id > self.last_id {
            return ENTRIES_READ_INVALID;
        }
        if self.max_deleted_entry_id.is_zero() || self.max_deleted_entry_id < self.first_id {
            let len = self.len() as i64;
            if id < self.first_id {
                return added.wrapping_sub(len);
            }
            if id == self.first_id {
                return added.wrapping_sub(len).wrapping_add(1);
            }
        }
        ENTRIES_READ_INVALID
    }

    /// A group's lag (XINFO GROUPS / FULL): entries not yet delivered,
    /// `None` where Redis 7.0 replies null (the counter cannot be known).
    pub fn lag(&self, g: &Group) -> Option<i64> {
        let added = self.entries_added as i64;
        if self.entries_added == 0 {
            return Some(0);
        }
        if g.entries_read != ENTRIES_READ_INVALID && !self.tombstones_from(g.last_id) {
            return Some(added.wrapping_sub(g.entries_read));
        }
        match self.estimate_distance(g.last_id) {
            ENTRIES_READ_INVALID => None,
            read => Some(added.wrapping_sub(read)),
        }
    }

    // -- consumer groups: XGROUP --------------------------------------
}
