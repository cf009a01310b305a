//! Durable Raft log implementing [`raft::Storage`] and the node's [`LogStore`].
//!
//! On-disk layout in one directory:
//! * `log-<seq:016x>.seg` — append-only segments of CRC-protected records. A *checkpoint*
//!   segment starts with a `Base` record (index and term of the last compacted entry) followed
//!   by the full live state (hard state, conf state, retained entries); later segments only
//!   append. Replay starts at the newest checkpoint segment; older segments are deleted.
//! * `snapshot` — the latest snapshot (protobuf `Snapshot` in one CRC record), replaced
//!   atomically (write temp file, fsync, rename, fsync dir).
//!
//! Record layout: `len u32 | crc32c u32 (over kind+payload) | kind u8 | payload[len]`.
//!
//! A torn or corrupt tail of the newest segment (crash while appending) is truncated on
//! open and reported in [`OpenReport::torn_tail`]. Corruption anywhere else is an error.
//!
//! Writes: the records of one Ready (entries, hard state, membership) are queued in memory
//! and reach the active segment in one `write` call, at [`DiskStorage::sync`] or
//! [`DiskStorage::flush`] (the node calls `sync` once per Ready, before sending messages
//! that acknowledge the persisted state, and `flush` before returning the Ready's output).
//! Records still queued when the storage is dropped were never acknowledged.
//!
//! Durability: [`FsyncPolicy::Always`] syncs after every write call, [`FsyncPolicy::Batch`]
//! only in [`DiskStorage::sync`], [`FsyncPolicy::EverySec`] at most once a second (in
//! [`DiskStorage::sync`] or [`DiskStorage::sync_due`], which the driver calls every turn,
//! and in [`DiskStorage::sync_now`] at a clean stop), [`FsyncPolicy::Never`] never (RAM
//! disk / tests). Every policy writes the records of a Ready before its messages and
//! replies leave, so a process crash loses nothing acknowledged; the policies differ on a
//! machine crash.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use protobuf::Message as PbMessage;
use raft::eraftpb::{ConfState, Entry, HardState, Snapshot, SnapshotMetadata};

use crate::log_state::LogState;
pub use crate::log_store::WriteError;
use crate::log_store::{LogStore, SnapshotWrite};

mod snapshot_file;
use snapshot_file::write_snapshot_to;
pub use snapshot_file::{PreparedSnapshot, SnapshotWriter};

/// CRC-32C, slice-by-16 (a record of a Ready is checksummed on the raft thread).
const CRC: crc::Crc<u32, crc::Table<16>> = crc::Crc::<u32, crc::Table<16>>::new(&crc::CRC_32_ISCSI);
const REC_HEADER: usize = 9;
/// Largest record accepted on replay; anything claiming more is treated as corruption.
pub const MAX_RECORD_BYTES: usize = 1 << 30;

const K_BASE: u8 = 1;
const K_ENTRY: u8 = 2;
const K_HARD: u8 = 3;
const K_CONF: u8 = 4;
const K_SNAP: u8 = 5;

/// When to fsync.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FsyncPolicy {
    /// After every write call.
    Always,
    /// Only when [`DiskStorage::sync`] is called (once per Ready).
    Batch,
    /// At most once a second (Redis' `appendfsync everysec`): a machine crash may lose
    /// about the last second of acknowledged writes, a process crash none.
    EverySec,
    /// Never (RAM disk, tests).
    Never,
}

/// An fsync policy name that is none of `always`, `batch`, `everysec`, `never`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown fsync policy {0:?} (always, batch, everysec, never)")]
pub struct UnknownFsyncPolicy(pub String);

impl std::str::FromStr for FsyncPolicy {
    type Err = UnknownFsyncPolicy;
    fn from_str(s: &str) -> Result<Self, UnknownFsyncPolicy> {
        match s {
            "always" => Ok(FsyncPolicy::Always),
            "batch" => Ok(FsyncPolicy::Batch),
            "everysec" => Ok(FsyncPolicy::EverySec),
            "never" => Ok(FsyncPolicy::Never),
            o => Err(UnknownFsyncPolicy(o.to_string())),
        }
    }
}

/// How long [`FsyncPolicy::EverySec`] waits between two fsyncs.
pub const EVERYSEC_INTERVAL: std::time::Duration = std::time::Duration::from_secs(1);

/// Storage configuration.
#[derive(Debug, Clone)]
pub struct StorageConfig {
    /// Directory holding segments and the snapshot.
    pub dir: PathBuf,
    /// Fsync policy.
    pub fsync: FsyncPolicy,
    /// Start a new segment once the active one exceeds this many bytes.
    pub segment_bytes: u64,
}

impl StorageConfig {
    /// A disk-backed configuration with batch fsync and 64 MiB segments.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self {
            dir: dir.into(),
            fsync: FsyncPolicy::Batch,
            segment_bytes: 64 << 20,
        }
    }

    /// RAM-disk mode: directory `/dev/shm/<name>`, no fsync (as in the paper's evaluation,
    /// where the log lives in a RAM disk).
    pub fn ram_disk(name: &str) -> Self {
        Self {
            dir: Path::new("/dev/shm").join(name),
            fsync: FsyncPolicy::Never,
            segment_bytes: 64 << 20,
        }
    }
}

/// Errors opening a storage directory.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// I/O failure.
    #[error("io on {path}: {source}")]
    Io {
        /// File concerned.
        path: PathBuf,
        /// Cause.
        source: io::Error,
    },
    /// A non-tail segment or the snapshot file is corrupt.
    #[error("corrupt {path} at offset {offset}: {what}")]
    Corrupt {
        /// File concerned.
        path: PathBuf,
        /// Byte offset of the bad record.
        offset: u64,
        /// Description.
        what: String,
    },
}

/// Where a torn tail was cut.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TornTail {
    /// Segment file truncated.
    pub segment: PathBuf,
    /// Offset the file was truncated to.
    pub offset: u64,
    /// Bytes discarded.
    pub dropped_bytes: u64,
}

/// What [`DiskStorage::open`] found.
#[derive(Debug, Clone, Default)]
pub struct OpenReport {
    /// Segments replayed.
    pub segments: usize,
    /// Records replayed.
    pub records: usize,
    /// A torn tail that was truncated, if any.
    pub torn_tail: Option<TornTail>,
    /// Stale segments (older than the newest checkpoint) removed.
    pub removed_segments: usize,
    /// Whether a snapshot file was loaded.
    pub snapshot_loaded: bool,
}

/// Durable raft log; the in-memory view mirrors the files.
#[derive(Debug)]
pub struct DiskStorage {
    cfg: StorageConfig,
    /// The log as the files hold it (their in-memory mirror).
    log: LogState,
    active: File,
    active_seq: u64,
    active_len: u64,
    dirty: bool,
    /// When the active segment was last fsynced ([`FsyncPolicy::EverySec`]).
    last_fsync: std::time::Instant,
    /// Records not yet written to `active` (one write call per flush).
    pending: Vec<u8>,
    /// Set when raft asked for a snapshot that is missing or staler than the conf state.
    snapshot_wanted: std::cell::Cell<bool>,
    /// Bytes of entries appended since the last snapshot (those replayed at
    /// open included): what the log holds in memory and on disk beyond it.
    appended_bytes: u64,
}

fn seg_name(seq: u64) -> String {
    format!("log-{seq:016x}.seg")
}

fn parse_seg_name(name: &str) -> Option<u64> {
    let hex = name.strip_prefix("log-")?.strip_suffix(".seg")?;
    u64::from_str_radix(hex, 16).ok()
}

/// Completes the record whose header space starts at `at` in `out` and
/// whose payload follows it to the end of `out`: its length (u32 LE), the
/// CRC of kind and payload (u32 LE) and its kind. A payload encoded in
/// place behind the header is not copied again.
fn seal_record(kind: u8, out: &mut [u8], at: usize) {
    let payload_at = at + REC_HEADER;
    let mut d = CRC.digest();
    d.update(&[kind]);
    d.update(&out[payload_at..]);
    let len = (out.len() - payload_at) as u32;
    out[at..at + 4].copy_from_slice(&len.to_le_bytes());
    out[at + 4..at + 8].copy_from_slice(&d.finalize().to_le_bytes());
    out[at + 8] = kind;
}

fn encode_record(kind: u8, payload: &[u8], out: &mut Vec<u8>) {
    let at = out.len();
    out.resize(at + REC_HEADER, 0);
    out.extend_from_slice(payload);
    seal_record(kind, out, at);
}

/// Outcome of parsing one record from a buffer.
enum Parsed<'a> {
    Record {
        kind: u8,
        payload: &'a [u8],
        next: usize,
    },
    End,
    Bad(&'static str),
}

fn parse_record(buf: &[u8], at: usize) -> Parsed<'_> {
    if at == buf.len() {
        return Parsed::End;
    }
    if buf.len() - at < REC_HEADER {
        return Parsed::Bad("truncated header");
    }
    let h = &buf[at..at + REC_HEADER];
    let len = u32::from_le_bytes([h[0], h[1], h[2], h[3]]) as usize;
    let crc = u32::from_le_bytes([h[4], h[5], h[6], h[7]]);
    let kind = h[8];
    if len > MAX_RECORD_BYTES {
        return Parsed::Bad("record length too large");
    }
    if buf.len() - at - REC_HEADER < len {
        return Parsed::Bad("truncated payload");
    }
    let payload = &buf[at + REC_HEADER..at + REC_HEADER + len];
    let mut d = CRC.digest();
    d.update(&[kind]);
    d.update(payload);
    if d.finalize() != crc {
        return Parsed::Bad("crc mismatch");
    }
    Parsed::Record {
        kind,
        payload,
        next: at + REC_HEADER + len,
    }
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> OpenError + '_ {
    move |source| OpenError::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

impl DiskStorage {
    /// Opens (creating if needed) the storage directory and replays it.
    pub fn open(cfg: StorageConfig) -> Result<(Self, OpenReport), OpenError> {
        fs::create_dir_all(&cfg.dir).map_err(io_err(&cfg.dir))?;
        let mut report = OpenReport::default();
        let mut segs: Vec<(u64, PathBuf)> = Vec::new();
        for ent in fs::read_dir(&cfg.dir).map_err(io_err(&cfg.dir))? {
            let ent = ent.map_err(io_err(&cfg.dir))?;
            let name = ent.file_name();
            let name = name.to_string_lossy();
            if name.ends_with(".tmp") {
                // Unfinished checkpoint or snapshot: never renamed, so never live.
                let _ = fs::remove_file(ent.path());
                continue;
            }
            if let Some(seq) = parse_seg_name(&name) {
                segs.push((seq, ent.path()));
            }
        }
        segs.sort();
        // Read all segments; find newest checkpoint (first record is Base).
        let mut bufs = Vec::with_capacity(segs.len());
        for (_, p) in &segs {
            let mut b = Vec::new();
            File::open(p)
                .and_then(|mut f| f.read_to_end(&mut b))
                .map_err(io_err(p))?;
            bufs.push(b);
        }
        let mut start = 0;
        for (i, b) in bufs.iter().enumerate() {
            if let Parsed::Record { kind: K_BASE, .. } = parse_record(b, 0) {
                start = i;
            }
        }
        for (_, p) in &segs[..start] {
            fs::remove_file(p).map_err(io_err(p))?;
            report.removed_segments += 1;
        }
        let mut st = DiskState::default();
        let last = segs.len().saturating_sub(1);
        for (i, b) in bufs.iter().enumerate().skip(start) {
            let path = &segs[i].1;
            let mut at = 0;
            loop {
                match parse_record(b, at) {
                    Parsed::End => break,
                    Parsed::Record {
                        kind,
                        payload,
                        next,
                    } => match st.replay(kind, payload) {
                        Ok(()) => {
                            report.records += 1;
                            at = next;
                        }
                        Err(what) if i == last => {
                            let _ = what;
                            report.torn_tail = Some(truncate_tail(path, at, b.len())?);
                            break;
                        }
                        Err(what) => {
                            return Err(OpenError::Corrupt {
                                path: path.clone(),
                                offset: at as u64,
                                what: what.to_string(),
                            })
                        }
                    },
                    Parsed::Bad(_) if i == last => {
                        report.torn_tail = Some(truncate_tail(path, at, b.len())?);
                        break;
                    }
                    Parsed::Bad(what) => {
                        return Err(OpenError::Corrupt {
                            path: path.clone(),
                            offset: at as u64,
                            what: what.to_string(),
                        })
                    }
                }
            }
            report.segments += 1;
        }
        // Snapshot file.
        let snap_path = cfg.dir.join("snapshot");
        let mut snapshot = None;
        if snap_path.exists() {
            let mut b = Vec::new();
            File::open(&snap_path)
                .and_then(|mut f| f.read_to_end(&mut b))
                .map_err(io_err(&snap_path))?;
            let corrupt = |what: &str| OpenError::Corrupt {
                path: snap_path.clone(),
                offset: 0,
                what: what.to_string(),
            };
            match parse_record(&b, 0) {
                Parsed::Record {
                    kind: K_SNAP,
                    payload,
                    ..
                } => {
                    let s =
                        Snapshot::parse_from_bytes(payload).map_err(|e| corrupt(&e.to_string()))?;
                    snapshot = Some(s);
                }
                _ => return Err(corrupt("bad snapshot record")),
            }
            report.snapshot_loaded = true;
        }
        if let Some(s) = &snapshot {
            st.install_snapshot_meta(s.get_metadata());
        }
        // Open the active segment (newest), or create the first checkpoint.
        let (active_seq, active_path) = match segs.last() {
            Some((seq, p)) if start < segs.len() => (*seq, p.clone()),
            _ => (0, cfg.dir.join(seg_name(0))),
        };
        let fresh = !active_path.exists();
        let active = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&active_path)
            .map_err(io_err(&active_path))?;
        let active_len = active.metadata().map_err(io_err(&active_path))?.len();
        let appended_bytes = st.log.entries.iter().map(|e| e.data.len() as u64).sum();
        let mut me = Self {
            cfg,
            log: LogState { snapshot, ..st.log },
            active,
            active_seq,
            active_len,
            dirty: false,
            last_fsync: std::time::Instant::now(),
            pending: Vec::new(),
            snapshot_wanted: std::cell::Cell::new(false),
            appended_bytes,
        };
        if fresh || st.snapshot_advanced {
            // Fresh directory, or a snapshot newer than the log's base (crash between the
            // snapshot rename and the checkpoint): write a checkpoint now.
            me.checkpoint().map_err(|e| OpenError::Io {
                path: me.cfg.dir.clone(),
                source: io::Error::other(e.to_string()),
            })?;
        }
        Ok((me, report))
    }

    /// The configuration.
    pub fn config(&self) -> &StorageConfig {
        &self.cfg
    }

    /// Persisted hard state.
    pub fn hard_state(&self) -> &HardState {
        &self.log.hard
    }

    /// Persisted conf state.
    pub fn conf_state(&self) -> &ConfState {
        &self.log.conf
    }

    /// Latest snapshot held, if any.
    pub fn latest_snapshot(&self) -> Option<&Snapshot> {
        self.log.snapshot.as_ref()
    }

    /// Whether raft asked for a fresh snapshot since the last call (clears the flag). The
    /// node answers by taking one ([`crate::node::RaftNode`] does this automatically).
    pub fn take_snapshot_wanted(&self) -> bool {
        self.snapshot_wanted.replace(false)
    }

    /// Index of the last compacted entry (0 if none).
    pub fn compacted_index(&self) -> u64 {
        self.log.base_index
    }

    /// Index of the last entry (or of the snapshot if the log is empty).
    pub fn last_index_value(&self) -> u64 {
        self.log.last_index()
    }

    /// Number of live entries.
    pub fn entry_count(&self) -> usize {
        self.log.entries.len()
    }

    /// Bytes of entries appended since the last snapshot: a snapshot is due
    /// when they pass a bound, however few entries they are (a batch of
    /// pipelined commands is one entry).
    pub fn appended_bytes(&self) -> u64 {
        self.appended_bytes
    }

    /// Whether the storage holds any state (bootstrapped or joined).
    pub fn is_initialized(&self) -> bool {
        self.log.base_index > 0 || !self.log.entries.is_empty() || !self.log.conf.voters.is_empty()
    }

    /// Writes the queued records to the active segment in one call (synced under
    /// [`FsyncPolicy::Always`]). The in-memory view already holds them.
    pub fn flush(&mut self) -> Result<(), WriteError> {
        if self.pending.is_empty() {
            return Ok(());
        }
        if self.active_len > self.cfg.segment_bytes {
            self.rotate()?;
        }
        self.active.write_all(&self.pending)?;
        self.active_len += self.pending.len() as u64;
        self.pending.clear();
        if self.cfg.fsync == FsyncPolicy::Always {
            self.active.sync_data()?;
        } else {
            self.dirty = true;
        }
        Ok(())
    }

    fn rotate(&mut self) -> Result<(), WriteError> {
        if self.cfg.fsync != FsyncPolicy::Never {
            self.active.sync_data()?;
        }
        let seq = self.active_seq + 1;
        let path = self.cfg.dir.join(seg_name(seq));
        self.active = OpenOptions::new().create(true).append(true).open(&path)?;
        if self.cfg.fsync != FsyncPolicy::Never {
            sync_dir(&self.cfg.dir)?;
        }
        self.active_seq = seq;
        self.active_len = 0;
        Ok(())
    }

    /// Appends entries (raft semantics: entries at or after the first appended index that
    /// conflict are replaced); their records are written at the next flush.
    pub fn append(&mut self, ents: &[Entry]) -> Result<(), WriteError> {
        self.log.check_append(ents)?;
        for e in ents {
            self.appended_bytes += e.data.len() as u64;
            // Encoded in place behind a header filled in after (one copy).
            let at = self.pending.len();
            self.pending.resize(at + REC_HEADER, 0);
            e.write_to_vec(&mut self.pending)?;
            seal_record(K_ENTRY, &mut self.pending, at);
        }
        self.log.append(ents)
    }

    /// Persists the hard state (no-op if unchanged) at the next flush.
    pub fn set_hard_state(&mut self, hs: &HardState) -> Result<(), WriteError> {
        if *hs == self.log.hard {
            return Ok(());
        }
        encode_record(K_HARD, &hs.write_to_bytes()?, &mut self.pending);
        self.log.hard = hs.clone();
        Ok(())
    }

    /// Persists the conf state applied at `index`, at the next flush.
    pub fn set_conf_state(&mut self, index: u64, cs: &ConfState) -> Result<(), WriteError> {
        let mut p = index.to_le_bytes().to_vec();
        p.extend_from_slice(&cs.write_to_bytes()?);
        encode_record(K_CONF, &p, &mut self.pending);
        self.log.conf = cs.clone();
        self.log.conf_index = index;
        Ok(())
    }

    /// Writes the queued records ([`DiskStorage::flush`]) and fsyncs unless the policy
    /// is `Never`.
    /// (Under [`FsyncPolicy::EverySec`] only if the last fsync is a second old.)
    pub fn sync(&mut self) -> Result<(), WriteError> {
        self.flush()?;
        match self.cfg.fsync {
            FsyncPolicy::EverySec => self.sync_due(),
            FsyncPolicy::Never => {
                self.dirty = false;
                Ok(())
            }
            FsyncPolicy::Always | FsyncPolicy::Batch => self.fsync_dirty(),
        }
    }

    /// Under [`FsyncPolicy::EverySec`]: fsyncs what was written since the last fsync if
    /// that was [`EVERYSEC_INTERVAL`] ago. Nothing under the other policies. Call it
    /// regularly (the driver does, every turn) so a write is synced within about a second
    /// even if no other write follows.
    pub fn sync_due(&mut self) -> Result<(), WriteError> {
        if self.cfg.fsync == FsyncPolicy::EverySec
            && self.dirty
            && self.last_fsync.elapsed() >= EVERYSEC_INTERVAL
        {
            self.fsync_dirty()?;
        }
        Ok(())
    }

    /// Writes the queued records and fsyncs them now under any policy but
    /// [`FsyncPolicy::Never`] (a clean stop).
    pub fn sync_now(&mut self) -> Result<(), WriteError> {
        self.flush()?;
        if self.cfg.fsync == FsyncPolicy::Never {
            self.dirty = false;
            return Ok(());
        }
        self.fsync_dirty()
    }

    fn fsync_dirty(&mut self) -> Result<(), WriteError> {
        if self.dirty {
            self.active.sync_data()?;
            self.last_fsync = std::time::Instant::now();
        }
        self.dirty = false;
        Ok(())
    }

    fn write_snapshot_file(&mut self, snap: &Snapshot) -> Result<(), WriteError> {
        let tmp = write_snapshot_to(&self.cfg.dir, self.cfg.fsync, snap, "snapshot.tmp")?;
        self.make_snapshot_current(&tmp)
    }
}

impl DiskStorage {
    /// Installs a snapshot received from the leader: the whole log is replaced.
    pub fn apply_snapshot(&mut self, snap: Snapshot) -> Result<(), WriteError> {
        self.log.check_install(&snap)?;
        self.write_snapshot_file(&snap)?;
        self.appended_bytes = 0;
        self.log.install(snap)?;
        self.checkpoint()
    }

    /// Stores a locally taken snapshot (at an applied index) and compacts the log up to it.
    pub fn compact_with_snapshot(&mut self, snap: Snapshot) -> Result<(), WriteError> {
        self.log.check_compactable(snap.get_metadata().index)?;
        self.write_snapshot_file(&snap)?;
        self.compact_to(snap)
    }

    /// Makes the snapshot file `file` (written beside the storage's files)
    /// the current one (synced under any policy but `Never`).
    fn make_snapshot_current(&self, file: &Path) -> Result<(), WriteError> {
        fs::rename(file, self.cfg.dir.join("snapshot"))?;
        if self.cfg.fsync != FsyncPolicy::Never {
            sync_dir(&self.cfg.dir)?;
        }
        Ok(())
    }

    /// Drops the log up to `snap` (whose file is written) and keeps `snap`.
    fn compact_to(&mut self, snap: Snapshot) -> Result<(), WriteError> {
        self.log.compact_to(snap)?;
        // Those left (not applied yet) are not counted again: a backlog that
        // cannot be applied must not start a snapshot at every Ready.
        self.appended_bytes = 0;
        self.checkpoint()
    }

    /// Writes a new checkpoint segment with the live state and removes older segments.
    fn checkpoint(&mut self) -> Result<(), WriteError> {
        let mut buf = Vec::new();
        let mut base = self.log.base_index.to_le_bytes().to_vec();
        base.extend_from_slice(&self.log.base_term.to_le_bytes());
        encode_record(K_BASE, &base, &mut buf);
        encode_record(K_HARD, &self.log.hard.write_to_bytes()?, &mut buf);
        let mut p = self.log.conf_index.to_le_bytes().to_vec();
        p.extend_from_slice(&self.log.conf.write_to_bytes()?);
        encode_record(K_CONF, &p, &mut buf);
        for e in &self.log.entries {
            encode_record(K_ENTRY, &e.write_to_bytes()?, &mut buf);
        }
        let seq = self.active_seq + 1;
        let fin = self.cfg.dir.join(seg_name(seq));
        let tmp = self.cfg.dir.join(format!("{}.tmp", seg_name(seq)));
        {
            let mut f = File::create(&tmp)?;
            f.write_all(&buf)?;
            if self.cfg.fsync != FsyncPolicy::Never {
                f.sync_all()?;
            }
        }
        fs::rename(&tmp, &fin)?;
        if self.cfg.fsync != FsyncPolicy::Never {
            sync_dir(&self.cfg.dir)?;
        }
        self.active = OpenOptions::new().append(true).open(&fin)?;
        self.active_len = buf.len() as u64;
        let old = self.active_seq;
        self.active_seq = seq;
        self.dirty = false;
        // The checkpoint holds the live state, queued records included.
        self.pending.clear();
        for ent in fs::read_dir(&self.cfg.dir)? {
            let ent = ent?;
            if let Some(s) = parse_seg_name(&ent.file_name().to_string_lossy()) {
                if s <= old {
                    fs::remove_file(ent.path())?;
                }
            }
        }
        Ok(())
    }
}

fn truncate_tail(path: &Path, at: usize, len: usize) -> Result<TornTail, OpenError> {
    let f = OpenOptions::new()
        .write(true)
        .open(path)
        .map_err(io_err(path))?;
    f.set_len(at as u64).map_err(io_err(path))?;
    f.sync_all().map_err(io_err(path))?;
    Ok(TornTail {
        segment: path.to_path_buf(),
        offset: at as u64,
        dropped_bytes: (len - at) as u64,
    })
}

#[derive(Default)]
struct DiskState {
    /// The log replayed so far (its snapshot is read apart).
    log: LogState,
    snapshot_advanced: bool,
}

impl DiskState {
    fn replay(&mut self, kind: u8, p: &[u8]) -> Result<(), &'static str> {
        match kind {
            K_BASE => {
                if p.len() != 16 {
                    return Err("bad base record");
                }
                let mut a = [0u8; 8];
                a.copy_from_slice(&p[..8]);
                self.log.base_index = u64::from_le_bytes(a);
                a.copy_from_slice(&p[8..16]);
                self.log.base_term = u64::from_le_bytes(a);
                self.log.entries.clear();
            }
            K_ENTRY => {
                let e = Entry::parse_from_bytes(p).map_err(|_| "bad entry")?;
                self.log
                    .append(std::slice::from_ref(&e))
                    .map_err(|_| "entry index out of sequence")?;
            }
            K_HARD => {
                self.log.hard = HardState::parse_from_bytes(p).map_err(|_| "bad hard state")?;
            }
            K_CONF => {
                if p.len() < 8 {
                    return Err("bad conf record");
                }
                let mut a = [0u8; 8];
                a.copy_from_slice(&p[..8]);
                self.log.conf_index = u64::from_le_bytes(a);
                self.log.conf =
                    ConfState::parse_from_bytes(&p[8..]).map_err(|_| "bad conf state")?;
            }
            _ => return Err("unknown record kind"),
        }
        Ok(())
    }

    /// Reconciles a snapshot file newer than the log base (Raft Fig. 13 rule).
    fn install_snapshot_meta(&mut self, m: &SnapshotMetadata) {
        if m.index <= self.log.base_index {
            return;
        }
        let pos = m
            .index
            .checked_sub(self.log.base_index + 1)
            .map(|p| p as usize);
        match pos.and_then(|p| self.log.entries.get(p).map(|e| (p, e.term))) {
            Some((p, t)) if t == m.term => {
                self.log.entries.drain(..=p);
            }
            _ => self.log.entries.clear(),
        }
        self.log.base_index = m.index;
        self.log.base_term = m.term;
        self.log.hard.term = self.log.hard.term.max(m.term);
        self.log.hard.commit = self.log.hard.commit.max(m.index);
        if m.index >= self.log.conf_index {
            self.log.conf = m.get_conf_state().clone();
            self.log.conf_index = m.index;
        }
        self.snapshot_advanced = true;
    }
}

crate::log_state::raft_storage_over_log_state!(DiskStorage, log);

/// The node's view of the disk log: every method is the inherent one of the same
/// name.
impl LogStore for DiskStorage {
    type SnapshotWriter = SnapshotWriter;
    type PreparedSnapshot = PreparedSnapshot;

    fn is_initialized(&self) -> bool {
        DiskStorage::is_initialized(self)
    }
    fn hard_state(&self) -> &HardState {
        DiskStorage::hard_state(self)
    }
    fn conf_state(&self) -> &ConfState {
        DiskStorage::conf_state(self)
    }
    fn latest_snapshot(&self) -> Option<&Snapshot> {
        DiskStorage::latest_snapshot(self)
    }
    fn compacted_index(&self) -> u64 {
        DiskStorage::compacted_index(self)
    }
    fn last_index_value(&self) -> u64 {
        DiskStorage::last_index_value(self)
    }
    fn appended_bytes(&self) -> u64 {
        DiskStorage::appended_bytes(self)
    }
    fn take_snapshot_wanted(&self) -> bool {
        DiskStorage::take_snapshot_wanted(self)
    }
    fn append(&mut self, ents: &[Entry]) -> Result<(), WriteError> {
        DiskStorage::append(self, ents)
    }
    fn set_hard_state(&mut self, hs: &HardState) -> Result<(), WriteError> {
        DiskStorage::set_hard_state(self, hs)
    }
    fn set_conf_state(&mut self, index: u64, cs: &ConfState) -> Result<(), WriteError> {
        DiskStorage::set_conf_state(self, index, cs)
    }
    fn flush(&mut self) -> Result<(), WriteError> {
        DiskStorage::flush(self)
    }
    fn sync(&mut self) -> Result<(), WriteError> {
        DiskStorage::sync(self)
    }
    fn sync_due(&mut self) -> Result<(), WriteError> {
        DiskStorage::sync_due(self)
    }
    fn sync_now(&mut self) -> Result<(), WriteError> {
        DiskStorage::sync_now(self)
    }
    fn apply_snapshot(&mut self, snap: Snapshot) -> Result<(), WriteError> {
        DiskStorage::apply_snapshot(self, snap)
    }
    fn compact_with_snapshot(&mut self, snap: Snapshot) -> Result<(), WriteError> {
        DiskStorage::compact_with_snapshot(self, snap)
    }
    fn snapshot_writer(&self) -> SnapshotWriter {
        DiskStorage::snapshot_writer(self)
    }
    fn install_prepared(&mut self, p: PreparedSnapshot) -> Result<(), WriteError> {
        DiskStorage::install_prepared(self, p)
    }
}

/// Snapshot files written beside the disk log ([`SnapshotWriter::write`]).
impl SnapshotWrite for SnapshotWriter {
    type Prepared = PreparedSnapshot;

    fn write(&self, snap: Snapshot) -> Result<PreparedSnapshot, WriteError> {
        SnapshotWriter::write(self, snap)
    }
}

#[cfg(test)]
#[allow(clippy::field_reassign_with_default)] // protobuf structs are built field by field
mod tests;
