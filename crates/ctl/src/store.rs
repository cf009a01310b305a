//! Durable controller state: an append-only journal of state transitions
//! plus a snapshot written by compaction.
//!
//! # Files (in the state directory)
//!
//! ```text
//! journal.log    "XLCTLJNL" | epoch: u64 BE | record*
//! snapshot.bin   "XLCTLSNP" | epoch: u64 BE | count: u32 BE | record*
//! record         len: u32 BE | crc32c(payload): u32 BE | payload (len bytes, ≤ MAX_RECORD)
//! ```
//!
//! A payload is one [`Record`]: a state transition of the controller
//! ([`crate::core::Controller::apply_record`] replays it). The journal is
//! replayed after the snapshot, in order, at [`Store::open`].
//!
//! # Damage
//!
//! A crash can leave the journal's last record incomplete; a bad disk can
//! leave a record whose CRC does not match. Replay stops at the first such
//! record, the journal is truncated there, and [`RecoveryReport::torn_tail`]
//! says where and why (the daemon prints it): nothing after a damaged
//! record is trusted, and nothing is dropped silently. The snapshot is only
//! ever replaced by rename, so a damaged snapshot is an error
//! ([`StoreError::CorruptSnapshot`]), never truncated.
//!
//! # Durability
//!
//! [`FsyncPolicy::Always`] syncs the journal after every [`Store::append`]
//! (before the daemon answers the request), [`FsyncPolicy::Never`] leaves it
//! to the kernel (a daemon crash loses nothing, a machine crash may lose the
//! last records). Compaction always syncs, because it must be atomic: write
//! `snapshot.tmp`, fsync it, rename it to `snapshot.bin`, fsync the
//! directory, then reset the journal with the snapshot's epoch. A journal
//! whose epoch is older than the snapshot's (a crash between the rename and
//! the reset) is already contained in the snapshot and is discarded.
//!
//! A failed append truncates the journal back to where it was, so a later
//! append never follows a partial record.

use crate::proto::{EncodeError, ProtoError, Reader, TunnelId, Writer, MAX_NAME, MAX_RECEIVERS};
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use xlane_te::Resources;

/// Largest record payload, bytes.
pub const MAX_RECORD: usize = 1 << 20;
const JOURNAL_MAGIC: &[u8; 8] = b"XLCTLJNL";
const SNAPSHOT_MAGIC: &[u8; 8] = b"XLCTLSNP";
const JOURNAL_HEADER: u64 = 16;
const CRC32C: crc::Crc<u32> = crc::Crc::<u32>::new(&crc::CRC_32_ISCSI);

/// When the journal is synced to disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FsyncPolicy {
    /// After every append.
    Always,
    /// Never (compaction still syncs).
    Never,
}

impl std::str::FromStr for FsyncPolicy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "always" => Ok(FsyncPolicy::Always),
            "never" => Ok(FsyncPolicy::Never),
            _ => Err(format!("`{s}`: expected `always` or `never`")),
        }
    }
}

/// One state transition of the controller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Record {
    /// The next new tunnel gets at least this id (written first in a
    /// snapshot).
    NextId {
        /// The id.
        next: u64,
    },
    /// A tunnel was granted (allocator `request`).
    Granted {
        /// Its id.
        tunnel: TunnelId,
        /// Sender (owner).
        sender: String,
        /// Receivers.
        receivers: Vec<String>,
        /// `σ`, bytes.
        load_bytes: u32,
        /// Requested period, ns.
        period_ns: u64,
        /// Sub-lane.
        sublane: u8,
        /// The resources granted (checked on replay).
        resources: Resources,
        /// The tree granted, as hops (from, to) in the order they were
        /// attached: replay re-admits the tunnel on it without searching.
        /// Empty in journals written before trees were recorded (replay
        /// searches again, as the grant did).
        hops: Vec<(String, String)>,
    },
    /// A tunnel's parameters changed (allocator `change`, or a re-admission
    /// of an unbounded tunnel).
    Changed {
        /// The tunnel.
        tunnel: TunnelId,
        /// New `σ`.
        load_bytes: u32,
        /// New requested period.
        period_ns: u64,
        /// The resources granted (checked on replay).
        resources: Resources,
    },
    /// Released by its owner.
    Released {
        /// The tunnel.
        tunnel: TunnelId,
    },
    /// Demoted (BW_EXCEEDED): out of the allocator, unbounded.
    Demoted {
        /// The tunnel.
        tunnel: TunnelId,
    },
    /// Terminated by the controller.
    Terminated {
        /// The tunnel.
        tunnel: TunnelId,
    },
    /// A live tunnel as a whole (snapshots only): granted at `period_ns`
    /// (which reproduces the period it has, whatever it was raised by),
    /// remembering the period its owner asked for. Its ranges are checked
    /// once the whole snapshot is replayed.
    Tunnel {
        /// Its id.
        tunnel: TunnelId,
        /// Sender (owner).
        sender: String,
        /// Receivers.
        receivers: Vec<String>,
        /// `σ`, bytes.
        load_bytes: u32,
        /// The period the owner asked for, ns.
        requested_period_ns: u64,
        /// The granted period, ns.
        period_ns: u64,
        /// Sub-lane.
        sublane: u8,
        /// Demoted (not in the allocator).
        unbounded: bool,
        /// Its resources.
        resources: Resources,
        /// Its tree (see [`Record::Granted`]); empty when demoted.
        hops: Vec<(String, String)>,
    },
}

impl Record {
    /// The payload bytes.
    pub fn encode(&self) -> Result<Vec<u8>, EncodeError> {
        let mut out = Vec::new();
        let mut w = Writer { out: &mut out };
        match self {
            Record::NextId { next } => {
                w.u8(1);
                w.u64(*next);
            }
            Record::Granted {
                tunnel,
                sender,
                receivers,
                load_bytes,
                period_ns,
                sublane,
                resources,
                hops,
            } => {
                // Without a tree: the form written before trees were.
                w.u8(if hops.is_empty() { 2 } else { 8 });
                w.u64(tunnel.0);
                w.str("sender", sender, MAX_NAME)?;
                w.strs("receivers", receivers, MAX_RECEIVERS)?;
                w.u32(*load_bytes);
                w.u64(*period_ns);
                w.u8(*sublane);
                w.resources(resources);
                if !hops.is_empty() {
                    w.hops(hops)?;
                }
            }
            Record::Tunnel {
                tunnel,
                sender,
                receivers,
                load_bytes,
                requested_period_ns,
                period_ns,
                sublane,
                unbounded,
                resources,
                hops,
            } => {
                w.u8(if hops.is_empty() { 7 } else { 9 });
                w.u64(tunnel.0);
                w.str("sender", sender, MAX_NAME)?;
                w.strs("receivers", receivers, MAX_RECEIVERS)?;
                w.u32(*load_bytes);
                w.u64(*requested_period_ns);
                w.u64(*period_ns);
                w.u8(*sublane);
                w.bool(*unbounded);
                w.resources(resources);
                if !hops.is_empty() {
                    w.hops(hops)?;
                }
            }
            Record::Changed {
                tunnel,
                load_bytes,
                period_ns,
                resources,
            } => {
                w.u8(3);
                w.u64(tunnel.0);
                w.u32(*load_bytes);
                w.u64(*period_ns);
                w.resources(resources);
            }
            Record::Released { tunnel } => {
                w.u8(4);
                w.u64(tunnel.0);
            }
            Record::Demoted { tunnel } => {
                w.u8(5);
                w.u64(tunnel.0);
            }
            Record::Terminated { tunnel } => {
                w.u8(6);
                w.u64(tunnel.0);
            }
        }
        Ok(out)
    }

    /// Parse a payload.
    pub fn decode(payload: &[u8]) -> Result<Record, ProtoError> {
        let mut r = Reader::new(payload);
        let tag = r.u8()?;
        let rec = match tag {
            1 => Record::NextId { next: r.u64()? },
            // 2 and 7: without a tree (written before trees were
            // recorded, or a demoted tunnel's snapshot record).
            2 | 8 => Record::Granted {
                tunnel: TunnelId(r.u64()?),
                sender: r.str("sender", MAX_NAME)?,
                receivers: r.strs("receivers", MAX_RECEIVERS)?,
                load_bytes: r.u32()?,
                period_ns: r.u64()?,
                sublane: r.u8()?,
                resources: r.resources()?,
                hops: if tag == 8 { hops(&mut r)? } else { Vec::new() },
            },
            7 | 9 => Record::Tunnel {
                tunnel: TunnelId(r.u64()?),
                sender: r.str("sender", MAX_NAME)?,
                receivers: r.strs("receivers", MAX_RECEIVERS)?,
                load_bytes: r.u32()?,
                requested_period_ns: r.u64()?,
                period_ns: r.u64()?,
                sublane: r.u8()?,
                unbounded: r.bool("unbounded")?,
                resources: r.resources()?,
                hops: if tag == 9 { hops(&mut r)? } else { Vec::new() },
            },
            3 => Record::Changed {
                tunnel: TunnelId(r.u64()?),
                load_bytes: r.u32()?,
                period_ns: r.u64()?,
                resources: r.resources()?,
            },
            4 => Record::Released {
                tunnel: TunnelId(r.u64()?),
            },
            5 => Record::Demoted {
                tunnel: TunnelId(r.u64()?),
            },
            6 => Record::Terminated {
                tunnel: TunnelId(r.u64()?),
            },
            t => return Err(ProtoError::UnknownKind(t)),
        };
        r.finish()?;
        Ok(rec)
    }
}

/// The most hops a recorded tree may have.
pub const MAX_HOPS: usize = 4096;

impl Writer<'_> {
    /// A tree's hops: a count, then each hop's two node names.
    fn hops(&mut self, hops: &[(String, String)]) -> Result<(), EncodeError> {
        self.count("hops", hops.len(), MAX_HOPS)?;
        for (from, to) in hops {
            self.str("hops", from, MAX_NAME)?;
            self.str("hops", to, MAX_NAME)?;
        }
        Ok(())
    }
}

/// The hops `Writer::hops` wrote: at least one (a record without a tree
/// has the older form, so that every record has one encoding).
fn hops(r: &mut Reader<'_>) -> Result<Vec<(String, String)>, ProtoError> {
    let n = r.count("hops", MAX_HOPS)?;
    if n == 0 {
        return Err(ProtoError::FieldOutOfRange { field: "hops" });
    }
    let mut v = Vec::with_capacity(n.min(64));
    for _ in 0..n {
        v.push((r.str("hops", MAX_NAME)?, r.str("hops", MAX_NAME)?));
    }
    Ok(v)
}

/// Why the store failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A file operation failed.
    #[error("{path}: {op}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What was being done.
        op: &'static str,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// The snapshot is damaged (it is never truncated: restore it or move
    /// it away to start from the journal alone).
    #[error("{path}: corrupt snapshot: {why}")]
    CorruptSnapshot {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        why: String,
    },
    /// The journal is not a journal (wrong magic).
    #[error("{path}: not a controller journal")]
    NotAJournal {
        /// The file.
        path: PathBuf,
    },
    /// A record could not be encoded.
    #[error("record too large: {0}")]
    Encode(#[from] EncodeError),
    /// Another process has the state directory open.
    #[error("{path}: state directory is in use by another controller")]
    Locked {
        /// The lock file.
        path: PathBuf,
    },
}

/// Where and why replay of the journal stopped early.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TornTail {
    /// Byte offset of the first damaged record (the journal's new length).
    pub offset: u64,
    /// Bytes discarded.
    pub discarded_bytes: u64,
    /// What was wrong.
    pub reason: String,
}

/// What [`Store::open`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    /// Records read from the snapshot.
    pub snapshot_records: usize,
    /// Records read from the journal.
    pub journal_records: usize,
    /// Damage truncated from the journal's end.
    pub torn_tail: Option<TornTail>,
    /// A journal older than the snapshot was discarded (crash during
    /// compaction; its records are in the snapshot).
    pub stale_journal_discarded: bool,
}

impl std::fmt::Display for RecoveryReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} snapshot record(s), {} journal record(s)",
            self.snapshot_records, self.journal_records
        )?;
        if let Some(t) = &self.torn_tail {
            write!(
                f,
                "; journal damaged at byte {} ({}): {} byte(s) discarded",
                t.offset, t.reason, t.discarded_bytes
            )?;
        }
        if self.stale_journal_discarded {
            write!(
                f,
                "; stale journal from before the last compaction discarded"
            )?;
        }
        Ok(())
    }
}

/// The open journal.
#[derive(Debug)]
pub struct Store {
    /// Held for the store's lifetime: an exclusive `flock` on `lock`.
    _lock: File,
    dir: PathBuf,
    journal: File,
    len: u64,
    epoch: u64,
    fsync: FsyncPolicy,
    records: u64,
}

/// An opened store and the records to replay (snapshot first).
#[derive(Debug)]
pub struct Opened {
    /// The store, ready for appends.
    pub store: Store,
    /// Every record to replay, in order.
    pub records: Vec<Record>,
    /// What was found.
    pub report: RecoveryReport,
}

fn io<'a>(path: &'a Path, op: &'static str) -> impl FnOnce(std::io::Error) -> StoreError + 'a {
    move |source| StoreError::Io {
        path: path.to_path_buf(),
        op,
        source,
    }
}

fn frame_record(rec: &Record, out: &mut Vec<u8>) -> Result<(), StoreError> {
    let payload = rec.encode()?;
    if payload.len() > MAX_RECORD {
        return Err(EncodeError::TooLong { field: "record" }.into());
    }
    out.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    out.extend_from_slice(&CRC32C.checksum(&payload).to_be_bytes());
    out.extend_from_slice(&payload);
    Ok(())
}

/// Parse records from `buf` until its end or the first damaged one:
/// returns the records, the offset after the last good one, and the damage.
fn parse_records(buf: &[u8]) -> (Vec<Record>, usize, Option<String>) {
    let mut at = 0;
    let mut out = Vec::new();
    while at < buf.len() {
        let Some(hdr) = buf.get(at..at + 8) else {
            return (out, at, Some("incomplete record header".into()));
        };
        let len = u32::from_be_bytes([hdr[0], hdr[1], hdr[2], hdr[3]]) as usize;
        let crc = u32::from_be_bytes([hdr[4], hdr[5], hdr[6], hdr[7]]);
        if len > MAX_RECORD {
            return (
                out,
                at,
                Some(format!("record length {len} exceeds {MAX_RECORD}")),
            );
        }
        let Some(payload) = buf.get(at + 8..at + 8 + len) else {
            return (out, at, Some("incomplete record".into()));
        };
        if CRC32C.checksum(payload) != crc {
            return (out, at, Some("CRC mismatch".into()));
        }
        match Record::decode(payload) {
            Ok(r) => out.push(r),
            Err(e) => return (out, at, Some(format!("undecodable record: {e}"))),
        }
        at += 8 + len;
    }
    (out, at, None)
}

/// Take an exclusive, non-blocking `flock` on `dir/lock` (released when the
/// file is closed, also when the process dies).
fn lock_dir(dir: &Path) -> Result<File, StoreError> {
    use std::os::fd::AsRawFd;
    let path = dir.join("lock");
    let f = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(io(&path, "open"))?;
    // SAFETY: flock on a file descriptor we own; no memory is involved.
    let rc = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if rc != 0 {
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
            return Err(StoreError::Locked { path });
        }
        return Err(io(&path, "flock")(e));
    }
    Ok(f)
}

fn sync_dir(dir: &Path) -> Result<(), StoreError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io(dir, "fsync directory"))
}

/// The snapshot's records and epoch (none and 0 without a snapshot).
fn read_snapshot(dir: &Path) -> Result<(Vec<Record>, u64), StoreError> {
    let spath = Store::snapshot_path(dir);
    match std::fs::read(&spath) {
        Ok(buf) => {
            let bad = |why: String| StoreError::CorruptSnapshot {
                path: spath.clone(),
                why,
            };
            if buf.len() < 20 || &buf[..8] != SNAPSHOT_MAGIC {
                return Err(bad("bad header".into()));
            }
            let mut e = [0u8; 8];
            e.copy_from_slice(&buf[8..16]);
            let epoch = u64::from_be_bytes(e);
            let count = u32::from_be_bytes([buf[16], buf[17], buf[18], buf[19]]) as usize;
            let (recs, _, damage) = parse_records(&buf[20..]);
            if let Some(d) = damage {
                return Err(bad(d));
            }
            if recs.len() != count {
                return Err(bad(format!("{} records, header says {count}", recs.len())));
            }
            Ok((recs, epoch))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok((Vec::new(), 0)),
        Err(e) => Err(io(&spath, "read")(e)),
    }
}

impl Store {
    /// The journal's path in `dir`.
    pub fn journal_path(dir: &Path) -> PathBuf {
        dir.join("journal.log")
    }

    /// The snapshot's path in `dir`.
    pub fn snapshot_path(dir: &Path) -> PathBuf {
        dir.join("snapshot.bin")
    }

    /// Open (creating `dir` and the journal if needed), read the snapshot
    /// and the journal, and truncate a damaged journal tail.
    pub fn open(dir: &Path, fsync: FsyncPolicy) -> Result<Opened, StoreError> {
        std::fs::create_dir_all(dir).map_err(io(dir, "create directory"))?;
        let lock = lock_dir(dir)?;
        let mut report = RecoveryReport::default();
        let mut records = Vec::new();
        let spath = Store::snapshot_path(dir);
        let (snap, epoch) = read_snapshot(dir)?;
        report.snapshot_records = snap.len();
        records.extend(snap);
        // Journal.
        let jpath = Store::journal_path(dir);
        let mut journal = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&jpath)
            .map_err(io(&jpath, "open"))?;
        let mut buf = Vec::new();
        journal.read_to_end(&mut buf).map_err(io(&jpath, "read"))?;
        let mut store = Store {
            _lock: lock,
            dir: dir.to_path_buf(),
            journal,
            len: 0,
            epoch,
            fsync,
            records: 0,
        };
        let header_ok = buf.len() >= JOURNAL_HEADER as usize;
        if !header_ok {
            if !buf.is_empty() {
                report.torn_tail = Some(TornTail {
                    offset: 0,
                    discarded_bytes: buf.len() as u64,
                    reason: "incomplete journal header".into(),
                });
            }
            store.reset_journal()?;
            return Ok(Opened {
                store,
                records,
                report,
            });
        }
        if &buf[..8] != JOURNAL_MAGIC {
            return Err(StoreError::NotAJournal { path: jpath });
        }
        let mut e = [0u8; 8];
        e.copy_from_slice(&buf[8..16]);
        let jepoch = u64::from_be_bytes(e);
        if jepoch < epoch {
            report.stale_journal_discarded = true;
            store.reset_journal()?;
            return Ok(Opened {
                store,
                records,
                report,
            });
        }
        if jepoch > epoch {
            // A journal newer than the snapshot means the snapshot that
            // covered it is gone: replaying it alone would be wrong.
            return Err(StoreError::CorruptSnapshot {
                path: spath,
                why: format!("journal epoch {jepoch} is newer than the snapshot's {epoch} (snapshot missing?)"),
            });
        }
        let body = &buf[JOURNAL_HEADER as usize..];
        let (recs, good, damage) = parse_records(body);
        let good_len = JOURNAL_HEADER + good as u64;
        if let Some(reason) = damage {
            report.torn_tail = Some(TornTail {
                offset: good_len,
                discarded_bytes: buf.len() as u64 - good_len,
                reason,
            });
            store
                .journal
                .set_len(good_len)
                .map_err(io(&jpath, "truncate"))?;
            store.journal.sync_all().map_err(io(&jpath, "fsync"))?;
        }
        store
            .journal
            .seek(SeekFrom::Start(good_len))
            .map_err(io(&jpath, "seek"))?;
        store.len = good_len;
        store.records = recs.len() as u64;
        report.journal_records = recs.len();
        records.extend(recs);
        Ok(Opened {
            store,
            records,
            report,
        })
    }

    /// The records of the state in `dir`, read without taking it (no
    /// lock, nothing truncated): for tools that look while the daemon
    /// runs. A journal tail that does not parse (a write in progress, or
    /// damage the daemon truncates at its next start) is left out.
    pub fn read(dir: &Path) -> Result<Vec<Record>, StoreError> {
        let (mut records, epoch) = read_snapshot(dir)?;
        let jpath = Store::journal_path(dir);
        let buf = match std::fs::read(&jpath) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && !records.is_empty() => {
                return Ok(records)
            }
            Err(e) => return Err(io(&jpath, "read")(e)),
        };
        if buf.len() < JOURNAL_HEADER as usize {
            return Ok(records);
        }
        if &buf[..8] != JOURNAL_MAGIC {
            return Err(StoreError::NotAJournal { path: jpath });
        }
        let mut e = [0u8; 8];
        e.copy_from_slice(&buf[8..16]);
        let jepoch = u64::from_be_bytes(e);
        if jepoch == epoch {
            records.extend(parse_records(&buf[JOURNAL_HEADER as usize..]).0);
        } else if jepoch > epoch {
            return Err(StoreError::CorruptSnapshot {
                path: Store::snapshot_path(dir),
                why: format!("journal epoch {jepoch} is newer than the snapshot's {epoch} (snapshot missing?)"),
            });
        }
        Ok(records)
    }

    /// Empty the journal and write its header with the current epoch.
    fn reset_journal(&mut self) -> Result<(), StoreError> {
        let jpath = Store::journal_path(&self.dir);
        let mut hdr = Vec::with_capacity(16);
        hdr.extend_from_slice(JOURNAL_MAGIC);
        hdr.extend_from_slice(&self.epoch.to_be_bytes());
        self.journal.set_len(0).map_err(io(&jpath, "truncate"))?;
        self.journal
            .seek(SeekFrom::Start(0))
            .map_err(io(&jpath, "seek"))?;
        self.journal.write_all(&hdr).map_err(io(&jpath, "write"))?;
        self.journal.sync_all().map_err(io(&jpath, "fsync"))?;
        self.len = JOURNAL_HEADER;
        self.records = 0;
        Ok(())
    }

    /// Append records (one write; one fsync under [`FsyncPolicy::Always`]).
    /// On error the journal is as before.
    pub fn append(&mut self, records: &[Record]) -> Result<(), StoreError> {
        if records.is_empty() {
            return Ok(());
        }
        let mut buf = Vec::new();
        for r in records {
            frame_record(r, &mut buf)?;
        }
        let jpath = Store::journal_path(&self.dir);
        let mut res = self.journal.write_all(&buf).map_err(io(&jpath, "write"));
        if res.is_ok() && self.fsync == FsyncPolicy::Always {
            res = self.journal.sync_data().map_err(io(&jpath, "fsync"));
        }
        if let Err(e) = res {
            // Roll back so that no later record follows a partial one.
            let _ = self.journal.set_len(self.len);
            let _ = self.journal.seek(SeekFrom::Start(self.len));
            return Err(e);
        }
        self.len += buf.len() as u64;
        self.records += records.len() as u64;
        Ok(())
    }

    /// Replace snapshot + journal by a snapshot of `records` (which must
    /// reproduce the current state) and an empty journal.
    pub fn compact(&mut self, records: &[Record]) -> Result<(), StoreError> {
        let mut buf = Vec::new();
        buf.extend_from_slice(SNAPSHOT_MAGIC);
        buf.extend_from_slice(&(self.epoch + 1).to_be_bytes());
        let count = u32::try_from(records.len())
            .map_err(|_| StoreError::Encode(EncodeError::TooLong { field: "snapshot" }))?;
        buf.extend_from_slice(&count.to_be_bytes());
        for r in records {
            frame_record(r, &mut buf)?;
        }
        let tmp = self.dir.join("snapshot.tmp");
        let dst = Store::snapshot_path(&self.dir);
        {
            let mut f = File::create(&tmp).map_err(io(&tmp, "create"))?;
            f.write_all(&buf).map_err(io(&tmp, "write"))?;
            f.sync_all().map_err(io(&tmp, "fsync"))?;
        }
        std::fs::rename(&tmp, &dst).map_err(io(&dst, "rename"))?;
        sync_dir(&self.dir)?;
        self.epoch += 1;
        self.reset_journal()
    }

    /// Records in the journal since the last compaction.
    pub fn journal_records(&self) -> u64 {
        self.records
    }

    /// Bytes in the journal (header included).
    pub fn journal_len(&self) -> u64 {
        self.len
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn res(n: u64) -> Resources {
        Resources {
            load_bytes: 100,
            period_ns: n,
            min_latency_ns: 1,
            max_jitter_ns: 2,
        }
    }

    fn sample() -> Vec<Record> {
        vec![
            Record::Granted {
                tunnel: TunnelId(1),
                sender: "h0".into(),
                receivers: vec!["h1".into()],
                load_bytes: 100,
                period_ns: 1000,
                sublane: 0,
                resources: res(1000),
                hops: vec![("h0".into(), "s0".into()), ("s0".into(), "h1".into())],
            },
            Record::Changed {
                tunnel: TunnelId(1),
                load_bytes: 10,
                period_ns: 2000,
                resources: res(2000),
            },
            Record::Demoted {
                tunnel: TunnelId(1),
            },
            Record::Released {
                tunnel: TunnelId(1),
            },
            Record::Terminated {
                tunnel: TunnelId(2),
            },
            Record::NextId { next: 5 },
            Record::Tunnel {
                tunnel: TunnelId(4),
                sender: "h3".into(),
                receivers: vec!["h1".into(), "h2".into()],
                load_bytes: 9,
                requested_period_ns: 10,
                period_ns: 20,
                sublane: 1,
                unbounded: true,
                resources: res(20),
                hops: Vec::new(),
            },
        ]
    }

    /// A record with a tree has the new form (tags 8 and 9), one without
    /// the older form (2 and 7, as journals written before trees were
    /// recorded): each record has one encoding. The new form with no hop
    /// is refused.
    #[test]
    fn records_with_and_without_trees() {
        for r in sample() {
            let (tree, hops) = match &r {
                Record::Granted { hops, .. } => ([8u8, 2], hops.clone()),
                Record::Tunnel { hops, .. } => ([9u8, 7], hops.clone()),
                _ => continue,
            };
            let mut bare = r.clone();
            if let Record::Granted { hops, .. } | Record::Tunnel { hops, .. } = &mut bare {
                hops.clear();
            }
            let b = bare.encode().unwrap();
            assert_eq!(b[0], tree[1]);
            assert_eq!(Record::decode(&b).unwrap(), bare);
            let mut with = bare.clone();
            if let Record::Granted { hops, .. } | Record::Tunnel { hops, .. } = &mut with {
                *hops = vec![("h0".into(), "sw".into()), ("sw".into(), "h1".into())];
            }
            let w = with.encode().unwrap();
            assert_eq!(w[0], tree[0]);
            assert_eq!(Record::decode(&w).unwrap(), with);
            // The new form with an empty hop list.
            let mut empty = b.clone();
            empty[0] = tree[0];
            empty.extend_from_slice(&[0, 0]);
            assert!(Record::decode(&empty).is_err(), "{hops:?}");
        }
    }

    #[test]
    fn records_round_trip() {
        for r in sample() {
            assert_eq!(Record::decode(&r.encode().unwrap()).unwrap(), r);
        }
    }

    #[test]
    fn append_reopen_and_torn_tail_at_every_cut() {
        let dir = tempfile::tempdir().unwrap();
        let recs = sample();
        let full_len;
        {
            let o = Store::open(dir.path(), FsyncPolicy::Always).unwrap();
            assert!(o.records.is_empty());
            let mut s = o.store;
            for r in &recs {
                s.append(std::slice::from_ref(r)).unwrap();
            }
            full_len = s.journal_len();
        }
        let jpath = Store::journal_path(dir.path());
        let full = std::fs::read(&jpath).unwrap();
        assert_eq!(full.len() as u64, full_len);
        // Record boundaries.
        let mut bounds = vec![16usize];
        for r in &recs {
            bounds.push(bounds.last().unwrap() + 8 + r.encode().unwrap().len());
        }
        for cut in 0..=full.len() {
            std::fs::write(&jpath, &full[..cut]).unwrap();
            let o = Store::open(dir.path(), FsyncPolicy::Never).unwrap();
            let whole = bounds
                .iter()
                .filter(|&&b| b <= cut)
                .count()
                .saturating_sub(1);
            assert_eq!(o.records, recs[..whole].to_vec(), "cut {cut}");
            let on_boundary = cut == 0 || bounds.contains(&cut);
            assert_eq!(o.report.torn_tail.is_none(), on_boundary, "cut {cut}");
            // The file was truncated to the good prefix (or re-headed).
            let now = std::fs::metadata(&jpath).unwrap().len() as usize;
            assert_eq!(now, bounds[whole], "cut {cut}");
        }
    }

    #[test]
    fn crc_damage_is_reported_and_truncated() {
        let dir = tempfile::tempdir().unwrap();
        let recs = sample();
        {
            let mut s = Store::open(dir.path(), FsyncPolicy::Never).unwrap().store;
            s.append(&recs).unwrap();
        }
        let jpath = Store::journal_path(dir.path());
        let mut b = std::fs::read(&jpath).unwrap();
        let second = 16 + 8 + recs[0].encode().unwrap().len();
        b[second + 9] ^= 0x40; // inside record 2's payload
        std::fs::write(&jpath, &b).unwrap();
        let o = Store::open(dir.path(), FsyncPolicy::Never).unwrap();
        assert_eq!(o.records, recs[..1].to_vec());
        let t = o.report.torn_tail.unwrap();
        assert_eq!(t.offset, second as u64);
        assert_eq!(t.reason, "CRC mismatch");
        assert_eq!(t.discarded_bytes, (b.len() - second) as u64);
    }

    #[test]
    fn compaction_replaces_journal_and_survives_stale_journal() {
        let dir = tempfile::tempdir().unwrap();
        let recs = sample();
        let mut s = Store::open(dir.path(), FsyncPolicy::Always).unwrap().store;
        s.append(&recs).unwrap();
        let old_journal = std::fs::read(Store::journal_path(dir.path())).unwrap();
        s.compact(&recs[..2]).unwrap();
        assert_eq!(s.journal_records(), 0);
        s.append(&recs[2..3]).unwrap();
        drop(s);
        let o = Store::open(dir.path(), FsyncPolicy::Always).unwrap();
        assert_eq!(o.records, recs[..3].to_vec());
        assert_eq!(o.report.snapshot_records, 2);
        assert_eq!(o.report.journal_records, 1);
        drop(o);
        // Crash between rename and journal reset: the old journal is back.
        std::fs::write(Store::journal_path(dir.path()), &old_journal).unwrap();
        let o = Store::open(dir.path(), FsyncPolicy::Always).unwrap();
        assert!(o.report.stale_journal_discarded);
        assert_eq!(o.records, recs[..2].to_vec());
    }

    #[test]
    fn a_reader_sees_the_state_of_an_open_store() {
        let dir = tempfile::tempdir().unwrap();
        let recs = sample();
        assert!(Store::read(dir.path()).is_err(), "no state yet");
        let mut s = Store::open(dir.path(), FsyncPolicy::Never).unwrap().store;
        s.append(&recs).unwrap();
        // The daemon holds the lock; the reader does not need it.
        assert_eq!(Store::read(dir.path()).unwrap(), recs);
        s.compact(&recs[..2]).unwrap();
        s.append(&recs[2..3]).unwrap();
        assert_eq!(Store::read(dir.path()).unwrap(), recs[..3].to_vec());
        // A write in progress (half a record) is left out, not cut.
        let jpath = Store::journal_path(dir.path());
        let full = std::fs::read(&jpath).unwrap();
        std::fs::write(&jpath, &full[..full.len() - 3]).unwrap();
        assert_eq!(Store::read(dir.path()).unwrap(), recs[..2].to_vec());
        assert_eq!(
            std::fs::metadata(&jpath).unwrap().len() as usize,
            full.len() - 3
        );
    }

    #[test]
    fn a_second_open_of_the_same_dir_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let a = Store::open(dir.path(), FsyncPolicy::Never).unwrap();
        assert!(matches!(
            Store::open(dir.path(), FsyncPolicy::Never),
            Err(StoreError::Locked { .. })
        ));
        drop(a);
        Store::open(dir.path(), FsyncPolicy::Never).unwrap();
    }

    #[test]
    fn damaged_snapshot_is_an_error_not_a_truncation() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Store::open(dir.path(), FsyncPolicy::Never).unwrap().store;
        s.compact(&sample()).unwrap();
        drop(s);
        let p = Store::snapshot_path(dir.path());
        let mut b = std::fs::read(&p).unwrap();
        let n = b.len();
        b[n - 1] ^= 1;
        std::fs::write(&p, &b).unwrap();
        assert!(matches!(
            Store::open(dir.path(), FsyncPolicy::Never),
            Err(StoreError::CorruptSnapshot { .. })
        ));
        std::fs::write(Store::journal_path(dir.path()), b"garbage-garbage-garbage").unwrap();
        std::fs::remove_file(&p).unwrap();
        assert!(matches!(
            Store::open(dir.path(), FsyncPolicy::Never),
            Err(StoreError::NotAJournal { .. })
        ));
    }
}
