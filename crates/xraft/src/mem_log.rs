//! An in-memory raft log ([`MemLog`]) for simulations and tests, whose durable part
//! lives in a [`MemDisk`] that outlives it.
//!
//! Durability is modelled on [`crate::storage::DiskStorage`] under
//! [`crate::FsyncPolicy::Batch`] and a machine crash: what the node records
//! (entries, hard state, membership) is visible at once to raft, but reaches the
//! [`MemDisk`] only at [`LogStore::sync`] or [`LogStore::sync_now`]; installing or
//! taking a snapshot writes the whole live state to it at once (as the disk log's
//! checkpoint does). [`LogStore::flush`] and [`LogStore::sync_due`] change nothing:
//! there is no page cache between the two, and no clock.
//!
//! A crash is dropping the [`MemLog`]: what was recorded but not synced is lost. A
//! restart is [`MemLog::open`] on the same [`MemDisk`]. Snapshots are "written" by a
//! [`MemSnapshotWriter`], on whichever thread, into memory.

use std::cell::Cell;
use std::sync::{Arc, Mutex, PoisonError};

use raft::eraftpb::{ConfState, Entry, HardState, Snapshot};

use crate::log_state::LogState;
use crate::log_store::{LogStore, SnapshotWrite, WriteError};

/// What a [`MemLog`] keeps across a crash: the state it last made durable. Clones
/// share it; keep one beside the node and open a new [`MemLog`] on it to restart.
#[derive(Debug, Clone, Default)]
pub struct MemDisk {
    state: Arc<Mutex<LogState>>,
}

impl MemDisk {
    /// An empty disk (a node on it starts uninitialized).
    pub fn new() -> Self {
        Self::default()
    }

    /// Runs `f` on the durable state. A poisoned lock (a panic while it was
    /// held) still holds the state written before.
    fn with<R>(&self, f: impl FnOnce(&mut LogState) -> R) -> R {
        let mut st = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        f(&mut st)
    }
}

/// What [`MemLog::open`] found on its [`MemDisk`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MemOpenReport {
    /// Entries after the compacted part.
    pub entries: usize,
    /// Whether a snapshot was found.
    pub snapshot_loaded: bool,
}

/// A record made since the last sync, not yet on the [`MemDisk`].
#[derive(Debug)]
enum Unsynced {
    Entries(Vec<Entry>),
    Hard(HardState),
    Conf(u64, ConfState),
}

/// An in-memory raft log over a [`MemDisk`] (see the module docs for what
/// survives a crash).
#[derive(Debug)]
pub struct MemLog {
    disk: MemDisk,
    live: LogState,
    /// Recorded into `live` since the last sync, in order.
    unsynced: Vec<Unsynced>,
    /// Set when raft asked for a snapshot that is missing or staler than the conf state.
    snapshot_wanted: Cell<bool>,
    /// Bytes of entries appended since the last snapshot (those found at open included).
    appended_bytes: u64,
}

impl MemLog {
    /// Opens the log held by `disk`: its durable state, nothing of what a former
    /// log on it had not synced.
    pub fn open(disk: &MemDisk) -> (Self, MemOpenReport) {
        let live = disk.with(|st| st.clone());
        let report = MemOpenReport {
            entries: live.entries.len(),
            snapshot_loaded: live.snapshot.is_some(),
        };
        let appended_bytes = live.entries.iter().map(|e| e.data.len() as u64).sum();
        let log = Self {
            disk: disk.clone(),
            live,
            unsynced: Vec::new(),
            snapshot_wanted: Cell::new(false),
            appended_bytes,
        };
        (log, report)
    }

    /// The disk this log makes its state durable on.
    pub fn disk(&self) -> &MemDisk {
        &self.disk
    }

    /// Number of live entries.
    pub fn entry_count(&self) -> usize {
        self.live.entries.len()
    }

    /// Writes the whole live state to the disk (a checkpoint): what was recorded
    /// before it is durable too.
    fn checkpoint(&mut self) {
        self.unsynced.clear();
        let live = self.live.clone();
        self.disk.with(|st| *st = live);
    }
}

impl LogStore for MemLog {
    type SnapshotWriter = MemSnapshotWriter;
    type PreparedSnapshot = MemPreparedSnapshot;

    fn is_initialized(&self) -> bool {
        let l = &self.live;
        l.base_index > 0 || !l.entries.is_empty() || !l.conf.voters.is_empty()
    }

    fn hard_state(&self) -> &HardState {
        &self.live.hard
    }

    fn conf_state(&self) -> &ConfState {
        &self.live.conf
    }

    fn latest_snapshot(&self) -> Option<&Snapshot> {
        self.live.snapshot.as_ref()
    }

    fn compacted_index(&self) -> u64 {
        self.live.base_index
    }

    fn last_index_value(&self) -> u64 {
        self.live.last_index()
    }

    fn appended_bytes(&self) -> u64 {
        self.appended_bytes
    }

    fn take_snapshot_wanted(&self) -> bool {
        self.snapshot_wanted.replace(false)
    }

    fn append(&mut self, ents: &[Entry]) -> Result<(), WriteError> {
        self.live.append(ents)?;
        if !ents.is_empty() {
            self.appended_bytes += ents.iter().map(|e| e.data.len() as u64).sum::<u64>();
            self.unsynced.push(Unsynced::Entries(ents.to_vec()));
        }
        Ok(())
    }

    fn set_hard_state(&mut self, hs: &HardState) -> Result<(), WriteError> {
        if *hs != self.live.hard {
            self.live.hard = hs.clone();
            self.unsynced.push(Unsynced::Hard(hs.clone()));
        }
        Ok(())
    }

    fn set_conf_state(&mut self, index: u64, cs: &ConfState) -> Result<(), WriteError> {
        self.live.set_conf(index, cs.clone());
        self.unsynced.push(Unsynced::Conf(index, cs.clone()));
        Ok(())
    }

    /// Nothing: records reach the disk only at a sync.
    fn flush(&mut self) -> Result<(), WriteError> {
        Ok(())
    }

    /// Replays what was recorded since the last sync onto the disk.
    fn sync(&mut self) -> Result<(), WriteError> {
        if self.unsynced.is_empty() {
            return Ok(());
        }
        let records = std::mem::take(&mut self.unsynced);
        self.disk.with(|st| {
            for r in records {
                match r {
                    Unsynced::Entries(ents) => st.append(&ents)?,
                    Unsynced::Hard(hs) => st.hard = hs,
                    Unsynced::Conf(index, cs) => st.set_conf(index, cs),
                }
            }
            Ok(())
        })
    }

    /// Nothing: no policy here depends on time.
    fn sync_due(&mut self) -> Result<(), WriteError> {
        Ok(())
    }

    fn sync_now(&mut self) -> Result<(), WriteError> {
        self.sync()
    }

    fn apply_snapshot(&mut self, snap: Snapshot) -> Result<(), WriteError> {
        self.live.install(snap)?;
        self.appended_bytes = 0;
        self.checkpoint();
        Ok(())
    }

    fn compact_with_snapshot(&mut self, snap: Snapshot) -> Result<(), WriteError> {
        self.live.compact_to(snap)?;
        // Those left (not applied yet) are not counted again, as on disk.
        self.appended_bytes = 0;
        self.checkpoint();
        Ok(())
    }

    fn snapshot_writer(&self) -> MemSnapshotWriter {
        MemSnapshotWriter
    }

    fn install_prepared(&mut self, p: MemPreparedSnapshot) -> Result<(), WriteError> {
        self.compact_with_snapshot(p.0)
    }
}

/// "Writes" a [`MemLog`]'s snapshots: keeps them in memory, on any thread.
#[derive(Debug, Clone, Copy, Default)]
pub struct MemSnapshotWriter;

/// A snapshot [`MemSnapshotWriter`] prepared, to be installed by
/// [`LogStore::install_prepared`].
#[derive(Debug)]
pub struct MemPreparedSnapshot(Snapshot);

impl SnapshotWrite for MemSnapshotWriter {
    type Prepared = MemPreparedSnapshot;

    fn write(&self, snap: Snapshot) -> Result<MemPreparedSnapshot, WriteError> {
        Ok(MemPreparedSnapshot(snap))
    }
}

crate::log_state::raft_storage_over_log_state!(MemLog, live);

#[cfg(test)]
mod tests;
