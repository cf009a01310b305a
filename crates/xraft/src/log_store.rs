//! What a [`crate::node::RaftNode`] needs of its raft log beyond [`raft::Storage`]
//! (which raft itself reads): the [`LogStore`] trait, its error [`WriteError`], and
//! [`SnapshotWrite`], how a snapshot is written away from the node's thread.
//!
//! Two logs implement it: [`crate::storage::DiskStorage`], the durable segment log,
//! and [`crate::mem_log::MemLog`], an in-memory log whose durable part outlives it
//! (the deterministic cluster simulator's).
//!
//! The contract both keep (the node relies on it): writes of one Ready (entries,
//! hard state, membership) are visible at once through [`raft::Storage`], and are
//! durable once [`LogStore::sync`] (or [`LogStore::sync_now`]) returned, as far as
//! the log's durability policy goes; installing a snapshot or compacting the log up
//! to one makes the whole live state durable. A crash loses only what was never
//! made durable, and a log reopened after it holds a prefix of what was written.

use std::io;

use raft::eraftpb::{ConfState, Entry, HardState, Snapshot};

/// Errors writing to a log.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// I/O failure.
    #[error("io: {0}")]
    Io(#[from] io::Error),
    /// Protobuf encoding failure.
    #[error("encode: {0}")]
    Encode(#[from] protobuf::ProtobufError),
    /// Entries appended leave a gap after the last index.
    #[error("append at {first} leaves a gap after last index {last}")]
    Gap {
        /// First index of the appended entries.
        first: u64,
        /// Current last index.
        last: u64,
    },
    /// Tried to overwrite compacted (snapshotted) entries, or compact beyond the log.
    #[error("index {index} outside the live log (first {first}, last {last})")]
    OutOfRange {
        /// Offending index.
        index: u64,
        /// First live index.
        first: u64,
        /// Last live index.
        last: u64,
    },
}

/// Writes a snapshot for a [`LogStore`] on a thread of its own; the result is
/// installed by the log's owner ([`LogStore::install_prepared`]).
pub trait SnapshotWrite: Send + 'static {
    /// A written snapshot, not yet the log's.
    type Prepared: Send + 'static;

    /// Writes `snap` where the log will find it (not yet its snapshot).
    fn write(&self, snap: Snapshot) -> Result<Self::Prepared, WriteError>;
}

/// A raft log a [`crate::node::RaftNode`] can run on: raft's own reads
/// ([`raft::Storage`]) plus the writes, durability points and snapshot handling
/// the node makes around each Ready.
pub trait LogStore: raft::Storage {
    /// How this log writes snapshots away from the node's thread.
    type SnapshotWriter: SnapshotWrite<Prepared = Self::PreparedSnapshot>;
    /// A snapshot written by [`LogStore::SnapshotWriter`], to be installed.
    type PreparedSnapshot: Send + 'static;

    /// Whether the log holds any state (bootstrapped or joined).
    fn is_initialized(&self) -> bool;
    /// The persisted hard state (term, vote, commit).
    fn hard_state(&self) -> &HardState;
    /// The persisted membership.
    fn conf_state(&self) -> &ConfState;
    /// The latest snapshot held, if any.
    fn latest_snapshot(&self) -> Option<&Snapshot>;
    /// Index of the last compacted entry (0 if none).
    fn compacted_index(&self) -> u64;
    /// Index of the last entry (or of the snapshot if the log is empty).
    fn last_index_value(&self) -> u64;
    /// Bytes of entries appended since the last snapshot: a snapshot is due when
    /// they pass a bound.
    fn appended_bytes(&self) -> u64;
    /// Whether raft asked for a fresh snapshot since the last call (clears the flag).
    fn take_snapshot_wanted(&self) -> bool;

    /// Appends entries (raft semantics: entries at or after the first appended index
    /// that conflict are replaced). `Gap` if they do not follow the log,
    /// `OutOfRange` if they would overwrite compacted entries.
    fn append(&mut self, ents: &[Entry]) -> Result<(), WriteError>;
    /// Records the hard state.
    fn set_hard_state(&mut self, hs: &HardState) -> Result<(), WriteError>;
    /// Records the membership applied at log `index`.
    fn set_conf_state(&mut self, index: u64, cs: &ConfState) -> Result<(), WriteError>;
    /// Hands what was recorded since the last call to the medium in one go; not
    /// necessarily durable (see [`LogStore::sync`]).
    fn flush(&mut self) -> Result<(), WriteError>;
    /// Makes what was recorded durable, as the log's policy says; the node calls it
    /// once per Ready, before any message acknowledging the Ready's state leaves.
    fn sync(&mut self) -> Result<(), WriteError>;
    /// A durability point a time-based policy may owe now; the driver calls it every
    /// turn.
    fn sync_due(&mut self) -> Result<(), WriteError>;
    /// Makes everything recorded durable now, whatever the policy's schedule (a
    /// clean stop).
    fn sync_now(&mut self) -> Result<(), WriteError>;

    /// Installs a snapshot received from the leader: the whole log is replaced.
    /// `OutOfRange` if it is older than the compacted part.
    fn apply_snapshot(&mut self, snap: Snapshot) -> Result<(), WriteError>;
    /// Stores a snapshot taken locally at an applied index and compacts the log up
    /// to it. `OutOfRange` unless that index is after the compacted part and in the log.
    fn compact_with_snapshot(&mut self, snap: Snapshot) -> Result<(), WriteError>;
    /// How to write a snapshot for this log from another thread.
    fn snapshot_writer(&self) -> Self::SnapshotWriter;
    /// Installs a snapshot its writer prepared, as [`LogStore::compact_with_snapshot`]
    /// does. `OutOfRange` (and the snapshot dropped) when the log moved past it
    /// meanwhile (e.g. a leader's snapshot was installed).
    fn install_prepared(&mut self, p: Self::PreparedSnapshot) -> Result<(), WriteError>;
}
