//! [`LogState`]: a raft log as the node sees it, in memory — the compacted
//! base, the live entries after it, the hard state, the membership and the
//! latest snapshot — with the rules every change to it follows and raft's
//! reads over it. Both logs keep one: [`crate::storage::DiskStorage`] mirrors
//! its files in it, and [`crate::mem_log::MemLog`] keeps a live one and a
//! durable one.

use raft::eraftpb::{ConfState, Entry, HardState, Snapshot};
use raft::{RaftState, StorageError as RaftStorageError};

use crate::log_store::WriteError;

/// A raft log's state in memory.
#[derive(Debug, Clone, Default)]
pub(crate) struct LogState {
    /// Index of the last compacted entry.
    pub(crate) base_index: u64,
    /// Term of the last compacted entry.
    pub(crate) base_term: u64,
    /// The entries after `base_index`, in order.
    pub(crate) entries: Vec<Entry>,
    /// Term, vote and commit index.
    pub(crate) hard: HardState,
    /// The membership.
    pub(crate) conf: ConfState,
    /// Index at which `conf` was applied.
    pub(crate) conf_index: u64,
    /// The latest snapshot.
    pub(crate) snapshot: Option<Snapshot>,
}

impl LogState {
    /// Index of the last entry (of the base if there is none).
    pub(crate) fn last_index(&self) -> u64 {
        self.entries.last().map_or(self.base_index, |e| e.index)
    }

    fn out_of_range(&self, index: u64) -> WriteError {
        WriteError::OutOfRange {
            index,
            first: self.base_index + 1,
            last: self.last_index(),
        }
    }

    /// `Gap` if `ents` do not follow the log, `OutOfRange` if they would
    /// overwrite compacted entries.
    pub(crate) fn check_append(&self, ents: &[Entry]) -> Result<(), WriteError> {
        let Some(first) = ents.first().map(|e| e.index) else {
            return Ok(());
        };
        let last = self.last_index();
        if first > last + 1 {
            return Err(WriteError::Gap { first, last });
        }
        if first <= self.base_index {
            return Err(self.out_of_range(first));
        }
        Ok(())
    }

    /// Appends `ents` (checked as [`LogState::check_append`]), replacing any
    /// entries from the first one's index on.
    pub(crate) fn append(&mut self, ents: &[Entry]) -> Result<(), WriteError> {
        self.check_append(ents)?;
        let Some(first) = ents.first().map(|e| e.index) else {
            return Ok(());
        };
        self.entries
            .truncate((first - self.base_index - 1) as usize);
        self.entries.extend_from_slice(ents);
        Ok(())
    }

    /// Records the membership applied at `index`.
    pub(crate) fn set_conf(&mut self, index: u64, cs: ConfState) {
        self.conf = cs;
        self.conf_index = index;
    }

    /// `OutOfRange` if `snap` is older than the compacted part.
    pub(crate) fn check_install(&self, snap: &Snapshot) -> Result<(), WriteError> {
        let index = snap.get_metadata().index;
        if index < self.base_index {
            return Err(self.out_of_range(index));
        }
        Ok(())
    }

    /// Replaces the whole log by a leader's snapshot (checked as
    /// [`LogState::check_install`]).
    pub(crate) fn install(&mut self, snap: Snapshot) -> Result<(), WriteError> {
        self.check_install(&snap)?;
        let meta = snap.get_metadata();
        self.entries.clear();
        self.base_index = meta.index;
        self.base_term = meta.term;
        self.hard.term = self.hard.term.max(meta.term);
        self.hard.commit = self.hard.commit.max(meta.index);
        if meta.index >= self.conf_index {
            self.set_conf(meta.index, meta.get_conf_state().clone());
        }
        self.snapshot = Some(snap);
        Ok(())
    }

    /// `OutOfRange` unless the log can be compacted up to `idx` (after the
    /// current base, not past the last entry).
    pub(crate) fn check_compactable(&self, idx: u64) -> Result<(), WriteError> {
        if idx <= self.base_index || idx > self.last_index() {
            return Err(self.out_of_range(idx));
        }
        Ok(())
    }

    /// Drops the log up to `snap` and keeps `snap` (checked as
    /// [`LogState::check_compactable`]).
    pub(crate) fn compact_to(&mut self, snap: Snapshot) -> Result<(), WriteError> {
        let meta = snap.get_metadata();
        self.check_compactable(meta.index)?;
        let drop = (meta.index - self.base_index) as usize;
        self.entries.drain(..drop);
        self.base_index = meta.index;
        self.base_term = meta.term;
        if meta.index >= self.conf_index {
            self.set_conf(meta.index, meta.get_conf_state().clone());
        }
        self.snapshot = Some(snap);
        Ok(())
    }

    /// Raft's initial state: the hard state and the membership.
    pub(crate) fn raft_state(&self) -> RaftState {
        RaftState::new(self.hard.clone(), self.conf.clone())
    }

    /// The entries `[low, high)`, at most `max_size` bytes (at least one).
    pub(crate) fn entries(
        &self,
        low: u64,
        high: u64,
        max_size: Option<u64>,
    ) -> raft::Result<Vec<Entry>> {
        if low <= self.base_index {
            return Err(raft::Error::Store(RaftStorageError::Compacted));
        }
        if high > self.last_index() + 1 || low > high {
            return Err(raft::Error::Store(RaftStorageError::Unavailable));
        }
        let lo = (low - self.base_index - 1) as usize;
        let hi = (high - self.base_index - 1) as usize;
        let mut v = self.entries[lo..hi].to_vec();
        raft::util::limit_size(&mut v, max_size);
        Ok(v)
    }

    /// The term of the entry at `idx` (the base's included).
    pub(crate) fn term(&self, idx: u64) -> raft::Result<u64> {
        if idx == self.base_index {
            return Ok(self.base_term);
        }
        if idx < self.base_index {
            return Err(raft::Error::Store(RaftStorageError::Compacted));
        }
        match self.entries.get((idx - self.base_index - 1) as usize) {
            Some(e) => Ok(e.term),
            None => Err(raft::Error::Store(RaftStorageError::Unavailable)),
        }
    }

    /// The snapshot to send a follower that needs the log from
    /// `request_index` on, if the one held serves: not older than that, nor
    /// than the latest membership change (a snapshot before it could lack
    /// the requesting peer, and a newly added member would reject it).
    /// `None`: the node should take a new one.
    pub(crate) fn snapshot_for(&self, request_index: u64) -> Option<Snapshot> {
        self.snapshot
            .as_ref()
            .filter(|s| {
                let i = s.get_metadata().index;
                i >= request_index && i >= self.conf_index
            })
            .cloned()
    }
}

/// `raft::Storage` for a log type that keeps its [`LogState`] in field
/// `$state` and a `snapshot_wanted: Cell<bool>`: raft reads the log state,
/// and a snapshot raft asks for before one is ready is noted as wanted
/// (the node makes one) and refused as temporarily unavailable. The disk
/// log and the in-memory log are both this.
macro_rules! raft_storage_over_log_state {
    ($ty:ty, $state:ident) => {
        impl raft::Storage for $ty {
            fn initial_state(&self) -> raft::Result<raft::RaftState> {
                Ok(self.$state.raft_state())
            }

            fn entries(
                &self,
                low: u64,
                high: u64,
                max_size: impl Into<Option<u64>>,
                _context: raft::GetEntriesContext,
            ) -> raft::Result<Vec<raft::eraftpb::Entry>> {
                self.$state.entries(low, high, max_size.into())
            }

            fn term(&self, idx: u64) -> raft::Result<u64> {
                self.$state.term(idx)
            }

            fn first_index(&self) -> raft::Result<u64> {
                Ok(self.$state.base_index + 1)
            }

            fn last_index(&self) -> raft::Result<u64> {
                Ok(self.$state.last_index())
            }

            fn snapshot(
                &self,
                request_index: u64,
                _to: u64,
            ) -> raft::Result<raft::eraftpb::Snapshot> {
                self.$state.snapshot_for(request_index).ok_or_else(|| {
                    self.snapshot_wanted.set(true);
                    raft::Error::Store(raft::StorageError::SnapshotTemporarilyUnavailable)
                })
            }
        }
    };
}
pub(crate) use raft_storage_over_log_state;
