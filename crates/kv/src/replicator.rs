//! The replication seam: [`Replicator`], and [`LocalReplicator`], the single
//! node implementation with an optional append-only file.
//!
//! A replicated implementation (X-Raft) proposes the op's bytes
//! ([`WriteOp::encode`]) to the log, and its apply loop decodes each
//! committed entry and calls [`Store::apply`] on the [`SharedStore`] it
//! returns from [`Replicator::store`]; `propose` returns the reply of that
//! apply once the entry is committed and applied locally. Followers return
//! [`ReplicaError::NotLeader`], which the server turns into a `MOVED`
//! redirect.

use crate::op::{OpDecodeError, WriteOp};
use crate::resp::Reply;
use crate::store::Store;
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

/// The store as shared between the apply path and the readers.
pub type SharedStore = Arc<RwLock<Store>>;

/// Why a write or a read barrier did not complete.
#[derive(Debug, thiserror::Error)]
pub enum ReplicaError {
    /// This node is not the leader. `leader` is the leader's client address
    /// (`host:port`) when known.
    #[error("not the leader (leader: {})", leader.as_deref().unwrap_or("unknown"))]
    NotLeader {
        /// The leader's client-facing address, if known.
        leader: Option<String>,
    },
    /// The op could not be made durable / committed (I/O error, shutdown,
    /// timeout); it may or may not have been applied.
    #[error("replication unavailable: {0}")]
    Unavailable(String),
    /// Writing the local log failed; the op was not applied.
    #[error("log write failed: {0}")]
    Io(#[from] std::io::Error),
    /// The request was refused before anything changed (e.g. a membership
    /// change the configuration does not allow); the reason.
    #[error("{0}")]
    Refused(String),
}

/// The seam between the RESP front end and replication.
pub trait Replicator: Send + Sync {
    /// Replicates `op`; returns once it is committed and applied to
    /// [`Replicator::store`], with the reply [`Store::apply`] gave.
    fn propose(&self, op: WriteOp) -> Result<Reply, ReplicaError>;

    /// Returns once the local store reflects every write committed before
    /// the call (Raft read index), so a read that follows is linearizable.
    fn read_barrier(&self) -> Result<(), ReplicaError>;

    /// The state machine the committed ops are applied to.
    fn store(&self) -> &SharedStore;
}

/// `appendfsync`: when the append-only file is flushed to disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FsyncPolicy {
    /// Before every write is acknowledged.
    Always,
    /// Once a second, by a background thread (up to ~1 s of acknowledged
    /// writes can be lost on power failure; none on a process crash).
    EverySec,
    /// Left to the operating system.
    Never,
}

impl std::str::FromStr for FsyncPolicy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "always" => Ok(FsyncPolicy::Always),
            "everysec" => Ok(FsyncPolicy::EverySec),
            "never" | "no" => Ok(FsyncPolicy::Never),
            o => Err(format!(
                "unknown fsync policy {o:?} (always, everysec, never)"
            )),
        }
    }
}

/// Why the append-only file could not be opened or replayed.
#[derive(Debug, thiserror::Error)]
pub enum AofError {
    /// An I/O error on the file.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// The file does not start with the AOF header.
    #[error("{0}: not an xlane kv append-only file")]
    BadHeader(PathBuf),
    /// A record with a valid checksum holds an op this build cannot decode
    /// (a newer version?): refusing to truncate it.
    #[error("{path}: record at offset {offset}: {source}")]
    BadOp {
        /// The file.
        path: PathBuf,
        /// Byte offset of the record.
        offset: u64,
        /// The cause.
        source: OpDecodeError,
    },
}

/// What replaying the append-only file found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Replay {
    /// Ops applied.
    pub ops: u64,
    /// Bytes cut from the end (a torn or corrupt tail), 0 normally.
    pub truncated_bytes: u64,
}

/// File header: magic and format version.
pub const AOF_MAGIC: &[u8; 8] = b"XLKVAOF1";
const CRC32: crc::Crc<u32> = crc::Crc::<u32>::new(&crc::CRC_32_ISCSI);

/// Largest record the replay accepts (a bound on the length field).
const MAX_RECORD: u32 = (crate::op::MAX_OP_BYTES as u32).saturating_mul(2);

struct Aof {
    file: File,
    policy: FsyncPolicy,
    dirty: Arc<AtomicBool>,
    buf: Vec<u8>,
}

/// Single node: applies each op at once, appending it first to the
/// append-only file if there is one. Records are `len:u32 | crc32c:u32 |
/// op` after an 8-byte header; a torn tail is cut at start.
pub struct LocalReplicator {
    store: SharedStore,
    aof: Option<Mutex<Aof>>,
    stop: Arc<AtomicBool>,
}

impl LocalReplicator {
    /// In memory only.
    pub fn in_memory() -> Self {
        LocalReplicator {
            store: Arc::new(RwLock::new(Store::new())),
            aof: None,
            stop: Arc::new(AtomicBool::new(false)),
        }
    }

    /// Flushes the append-only file to disk (no-op without one): what a
    /// graceful shutdown does whatever `appendfsync` says.
    pub fn sync(&self) -> std::io::Result<()> {
        match &self.aof {
            Some(aof) => match aof.lock() {
                Ok(a) => a.file.sync_data(),
                Err(_) => Err(std::io::Error::other("append-only file lock poisoned")),
            },
            None => Ok(()),
        }
    }

    /// Opens (or creates) the append-only file at `path`, replays it into a
    /// new store, truncating a torn tail, and appends from then on.
    pub fn with_aof(path: &Path, policy: FsyncPolicy) -> Result<(Self, Replay), AofError> {
        let io = |source| AofError::Io {
            path: path.to_path_buf(),
            source,
        };
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(io)?;
        let mut data = Vec::new();
        file.read_to_end(&mut data).map_err(io)?;
        let mut store = Store::new();
        let mut replay = Replay::default();
        let good_end = if data.len() < AOF_MAGIC.len() {
            if !AOF_MAGIC.starts_with(&data) {
                return Err(AofError::BadHeader(path.to_path_buf()));
            }
            // Empty, or a header torn while being written: start over.
            replay.truncated_bytes = data.len() as u64;
            file.set_len(0).map_err(io)?;
            file.seek(SeekFrom::Start(0)).map_err(io)?;
            file.write_all(AOF_MAGIC).map_err(io)?;
            file.sync_all().map_err(io)?;
            AOF_MAGIC.len()
        } else {
            if &data[..8] != AOF_MAGIC {
                return Err(AofError::BadHeader(path.to_path_buf()));
            }
            let mut pos = 8;
            while let Some((op_bytes, next)) = record_at(&data, pos) {
                let op = WriteOp::decode(op_bytes).map_err(|source| AofError::BadOp {
                    path: path.to_path_buf(),
                    offset: pos as u64,
                    source,
                })?;
                store.apply(&op);
                replay.ops += 1;
                pos = next;
            }
            if pos < data.len() {
                replay.truncated_bytes = (data.len() - pos) as u64;
                file.set_len(pos as u64).map_err(io)?;
                file.sync_all().map_err(io)?;
            }
            pos
        };
        file.seek(SeekFrom::Start(good_end as u64)).map_err(io)?;
        let dirty = Arc::new(AtomicBool::new(false));
        let stop = Arc::new(AtomicBool::new(false));
        if policy == FsyncPolicy::EverySec {
            let f = file.try_clone().map_err(io)?;
            let (d, s) = (dirty.clone(), stop.clone());
            std::thread::Builder::new()
                .name("kv-aof-fsync".into())
                .spawn(move || {
                    while !s.load(Ordering::Relaxed) {
                        std::thread::sleep(Duration::from_secs(1));
                        if d.swap(false, Ordering::AcqRel) {
                            // An fsync error here cannot be reported to a
                            // client; the next `always` policy would catch it.
                            let _ = f.sync_data();
                        }
                    }
                })
                .map_err(io)?;
        }
        Ok((
            LocalReplicator {
                store: Arc::new(RwLock::new(store)),
                aof: Some(Mutex::new(Aof {
                    file,
                    policy,
                    dirty,
                    buf: Vec::new(),
                })),
                stop,
            },
            replay,
        ))
    }
}

impl Drop for LocalReplicator {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.sync();
    }
}

/// The op bytes of a valid record at `pos` and the offset after it.
fn record_at(data: &[u8], pos: usize) -> Option<(&[u8], usize)> {
    let hdr = data.get(pos..pos + 8)?;
    let len = u32::from_le_bytes([hdr[0], hdr[1], hdr[2], hdr[3]]);
    let crc = u32::from_le_bytes([hdr[4], hdr[5], hdr[6], hdr[7]]);
    if len > MAX_RECORD {
        return None;
    }
    let body = data.get(pos + 8..pos + 8 + len as usize)?;
    (CRC32.checksum(body) == crc).then_some((body, pos + 8 + len as usize))
}

impl Replicator for LocalReplicator {
    fn propose(&self, op: WriteOp) -> Result<Reply, ReplicaError> {
        let Some(aof) = &self.aof else {
            let mut s = self
                .store
                .write()
                .map_err(|_| ReplicaError::Unavailable("store lock poisoned".into()))?;
            return Ok(s.apply(&op));
        };
        // The AOF lock orders the log and the applies the same way.
        let mut a = aof
            .lock()
            .map_err(|_| ReplicaError::Unavailable("log lock poisoned".into()))?;
        let a = &mut *a;
        a.buf.clear();
        a.buf.extend_from_slice(&[0; 8]);
        op.encode_into(&mut a.buf);
        let body_len = (a.buf.len() - 8) as u32;
        let crc = CRC32.checksum(&a.buf[8..]);
        a.buf[..4].copy_from_slice(&body_len.to_le_bytes());
        a.buf[4..8].copy_from_slice(&crc.to_le_bytes());
        let start = a.file.stream_position()?;
        if let Err(e) = a.file.write_all(&a.buf) {
            // Cut a partial record so later appends stay readable.
            let _ = a.file.set_len(start);
            let _ = a.file.seek(SeekFrom::Start(start));
            return Err(e.into());
        }
        match a.policy {
            FsyncPolicy::Always => a.file.sync_data()?,
            FsyncPolicy::EverySec => a.dirty.store(true, Ordering::Release),
            FsyncPolicy::Never => {}
        }
        let mut s = self
            .store
            .write()
            .map_err(|_| ReplicaError::Unavailable("store lock poisoned".into()))?;
        Ok(s.apply(&op))
    }

    fn read_barrier(&self) -> Result<(), ReplicaError> {
        Ok(())
    }

    fn store(&self) -> &SharedStore {
        &self.store
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::op::WriteCmd;

    fn set(ts: u64, k: &str, v: &str) -> WriteOp {
        WriteOp::new(
            ts,
            WriteCmd::Set {
                key: k.into(),
                value: v.into(),
                cond: crate::op::SetCond::Always,
                ttl: crate::op::SetTtl::Persist,
                get: false,
            },
        )
    }

    fn get(r: &LocalReplicator, k: &str) -> Option<Vec<u8>> {
        r.store()
            .read()
            .ok()
            .and_then(|s| s.get(k.as_bytes(), 0).map(<[u8]>::to_vec))
    }

    #[test]
    fn aof_tails() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("a.aof");
        {
            let (r, rep) = LocalReplicator::with_aof(&path, FsyncPolicy::Never).expect("open");
            assert_eq!(rep, Replay::default());
            for i in 0..3 {
                r.propose(set(i, &format!("k{i}"), "v")).expect("propose");
            }
        }
        let full = std::fs::read(&path).expect("read");
        let rec = (full.len() - 8) / 3;
        // Table: (bytes of the file, ops replayed, bytes cut).
        let mut flipped = full.clone();
        let last = flipped.len() - 1;
        flipped[last] ^= 0xff;
        let table: Vec<(Vec<u8>, u64, u64)> = vec![
            (full.clone(), 3, 0),
            (full[..full.len() - 1].to_vec(), 2, (rec - 1) as u64),
            (flipped, 2, rec as u64),
            (full[..8 + rec + 3].to_vec(), 1, 3),
            (full[..5].to_vec(), 0, 5),
            (Vec::new(), 0, 0),
        ];
        for (i, (bytes, ops, cut)) in table.into_iter().enumerate() {
            std::fs::write(&path, &bytes).expect("write");
            let (r, rep) = LocalReplicator::with_aof(&path, FsyncPolicy::Always)
                .unwrap_or_else(|e| panic!("case {i}: {e}"));
            assert_eq!(
                rep,
                Replay {
                    ops,
                    truncated_bytes: cut
                },
                "case {i}"
            );
            // Appending after a cut tail gives a readable file.
            r.propose(set(10, "after", "x")).expect("propose");
            drop(r);
            let (r2, rep2) = LocalReplicator::with_aof(&path, FsyncPolicy::Never).expect("reopen");
            assert_eq!(
                rep2,
                Replay {
                    ops: ops + 1,
                    truncated_bytes: 0
                },
                "case {i}"
            );
            assert_eq!(get(&r2, "after"), Some(b"x".to_vec()));
        }
        std::fs::write(&path, b"NOTANAOFFILE").expect("write");
        assert!(matches!(
            LocalReplicator::with_aof(&path, FsyncPolicy::Never),
            Err(AofError::BadHeader(_))
        ));
        // A record with a good checksum but an unknown op version: refuse.
        let mut bad = AOF_MAGIC.to_vec();
        let body = [9u8, 1, 0, 0, 0, 0, 0, 0, 0, 0];
        bad.extend_from_slice(&(body.len() as u32).to_le_bytes());
        bad.extend_from_slice(&CRC32.checksum(&body).to_le_bytes());
        bad.extend_from_slice(&body);
        std::fs::write(&path, &bad).expect("write");
        assert!(matches!(
            LocalReplicator::with_aof(&path, FsyncPolicy::Never),
            Err(AofError::BadOp { offset: 8, .. })
        ));
    }
}
