//! Snapshot files written beside a [`DiskStorage`] by another thread
//! ([`SnapshotWriter`]) and installed by the storage's owner
//! ([`DiskStorage::install_prepared`]).

use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};

use protobuf::Message as PbMessage;
use raft::eraftpb::Snapshot;

use super::{encode_record, DiskStorage, FsyncPolicy, WriteError, K_SNAP};

/// Writes `snap` as a snapshot file named `name` in `dir` (synced under any
/// policy but `Never`).
pub(super) fn write_snapshot_to(
    dir: &Path,
    fsync: FsyncPolicy,
    snap: &Snapshot,
    name: &str,
) -> Result<PathBuf, WriteError> {
    let mut buf = Vec::new();
    encode_record(K_SNAP, &snap.write_to_bytes()?, &mut buf);
    let path = dir.join(name);
    let mut f = File::create(&path)?;
    f.write_all(&buf)?;
    if fsync != FsyncPolicy::Never {
        f.sync_all()?;
    }
    Ok(path)
}

/// Writes snapshot files for a [`DiskStorage`] from another thread.
#[derive(Debug, Clone)]
pub struct SnapshotWriter {
    dir: PathBuf,
    fsync: FsyncPolicy,
}

impl SnapshotWriter {
    /// Writes `snap` beside the storage's files (not yet its snapshot: see
    /// [`DiskStorage::install_prepared`]).
    pub fn write(&self, snap: Snapshot) -> Result<PreparedSnapshot, WriteError> {
        let file = write_snapshot_to(&self.dir, self.fsync, &snap, "snapshot.next.tmp")?;
        Ok(PreparedSnapshot { snap, file })
    }
}

/// A snapshot written by [`SnapshotWriter::write`], to be installed.
#[derive(Debug)]
pub struct PreparedSnapshot {
    snap: Snapshot,
    file: PathBuf,
}

impl DiskStorage {
    /// How this storage writes snapshot files, for a thread of its own
    /// ([`SnapshotWriter::write`], then [`DiskStorage::install_prepared`]).
    pub fn snapshot_writer(&self) -> SnapshotWriter {
        SnapshotWriter {
            dir: self.cfg.dir.clone(),
            fsync: self.cfg.fsync,
        }
    }

    /// Installs a snapshot whose file [`SnapshotWriter::write`] wrote: it becomes
    /// the snapshot, and the log before it is compacted away (as
    /// [`DiskStorage::compact_with_snapshot`], without writing the state on this
    /// thread). `OutOfRange` (and the file removed) when the log moved past it
    /// meanwhile (e.g. a leader's snapshot was installed).
    pub fn install_prepared(&mut self, p: PreparedSnapshot) -> Result<(), WriteError> {
        if let Err(e) = self.log.check_compactable(p.snap.get_metadata().index) {
            let _ = fs::remove_file(&p.file);
            return Err(e);
        }
        self.make_snapshot_current(&p.file)?;
        self.compact_to(p.snap)
    }
}
