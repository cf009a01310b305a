//! Shared memory between X-FD and local applications: the liveness counter
//! (application → X-FD) and the alive table with its event ring (X-FD →
//! applications). Both are small files mapped shared (under `/run/xlane/`, a
//! tmpfs, by default), so reading them is a few loads: no system call.
//!
//! Every word is a native-endian `u64` accessed atomically (the files never
//! leave the host). Layouts, in 8-byte words:
//!
//! **Liveness counter** (64 bytes, [`LivenessCounter`]):
//!
//! | word | field |
//! |---|---|
//! | 0 | magic `"XLFDCNT1"` |
//! | 1 | version (1) |
//! | 2 | counter — bumped by the application at least every T/3 |
//! | 3 | time of the last bump, ns (`CLOCK_REALTIME`, informative) |
//!
//! **Alive table** ([`TableWriter`] writes, [`AliveTable`] reads): a 4096-byte
//! header, `capacity` entries of 128 bytes, `event_capacity` event slots of
//! 64 bytes.
//!
//! | header word | field |
//! |---|---|
//! | 0 | magic `"XLFDTAB1"` |
//! | 1..=6 | version, header length, capacity, entry length, event capacity, event length |
//! | 7 | period T, ns |
//! | 8 | threshold (f64 bits; X-FD: Λ in ns) |
//! | 9 | stall periods k (0: off) |
//! | 10 | model ([`ModelKind::as_u32`]) |
//! | 11 | own heartbeat address (`1<<48 \| ip<<16 \| port`, 0: unknown) |
//! | 12 | writer PID |
//! | 13 | creation time, ns |
//! | 14 | CRC-64/XZ of words 0..=13 (little-endian bytes) |
//! | 16 | last update by the writer, ns (the writer's own liveness) |
//! | 17 | closed flag (1 after a clean exit) |
//! | 18 | entries in use |
//! | 19 | events published so far (next event number) |
//! | 20..=27 | counters: accepted, unknown sender, unknown tunnel, replay, malformed, events dropped, heartbeats sent, send errors |
//!
//! Entry `i` (a **seqlock**: word 0 is odd while the writer updates the
//! entry; a reader retries until it reads the same even value before and
//! after): 1 address (`ip<<16 | port`), 2 tunnel `| status<<32 | flags<<40`,
//! 3 heartbeats, 4 last arrival, 5 last send time, 6 last sequence number,
//! 7 incarnation, 8 counter, 9 arrival where the counter last changed,
//! 10 deadline, 11 max level (f64 bits), 12 suspicions. Status: 0 unknown,
//! 1 alive, 2 suspected silent, 3 suspected stalled. Flags mark which optional
//! fields are present (see [`entry_flags`]).
//!
//! Event slot `n % event_capacity` holds event `n`: word 0 is `n + 1` once
//! complete (`u64::MAX` while being written), 1 time, 2 peer index `| kind<<32`
//! (0 joined, 1 suspected silent, 2 suspected stalled, 3 recovered,
//! 4 restarted), 3 address. A reader that falls more than `event_capacity`
//! events behind is told how many it missed ([`EventItem::Missed`]).
//!
//! The writer creates a new file next to the path and renames it into place,
//! so a reader maps either the old table or a complete new one. A reader
//! checks the header (magic, version, CRC, geometry against the file size)
//! before use; afterwards every index it computes is within the mapping.
//! (A process that truncates the file under a reader can still make that
//! reader fault; only the writer should have write permission.)

use crate::detector::{DetectorStats, Event, EventKind, PeerView, Reason, Status};
use crate::model::ModelKind;
use crate::Nanos;
use memmap2::{MmapOptions, MmapRaw};
use std::fs::{File, OpenOptions};
use std::io;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::path::{Path, PathBuf};
use std::sync::atomic::{fence, AtomicU64, Ordering};

/// Default directory of the shared files.
pub const RUN_DIR: &str = "/run/xlane";
/// Magic word of the counter file.
pub const COUNTER_MAGIC: u64 = u64::from_le_bytes(*b"XLFDCNT1");
/// Magic word of the table file.
pub const TABLE_MAGIC: u64 = u64::from_le_bytes(*b"XLFDTAB1");
/// Layout version of both files.
pub const SHM_VERSION: u64 = 1;
/// Size of the counter file.
pub const COUNTER_LEN: usize = 64;
/// Size of the table header.
pub const TABLE_HEADER_LEN: usize = 4096;
/// Size of one table entry.
pub const ENTRY_LEN: usize = 128;
/// Size of one event slot.
pub const EVENT_LEN: usize = 64;
/// Largest entry count a table may declare.
pub const MAX_TABLE_CAPACITY: usize = crate::detector::MAX_PEERS;
/// Largest event-ring size a table may declare.
pub const MAX_EVENT_CAPACITY: usize = 1 << 20;
/// Seqlock read attempts before an entry is reported busy.
pub const SEQLOCK_RETRIES: u32 = 100_000;

/// Header word indices of the table.
pub mod word {
    /// Magic.
    pub const MAGIC: usize = 0;
    /// Layout version.
    pub const VERSION: usize = 1;
    /// Header length in bytes.
    pub const HEADER_LEN: usize = 2;
    /// Entry count.
    pub const CAPACITY: usize = 3;
    /// Entry length in bytes.
    pub const ENTRY_LEN: usize = 4;
    /// Event slot count.
    pub const EVENT_CAPACITY: usize = 5;
    /// Event slot length in bytes.
    pub const EVENT_LEN: usize = 6;
    /// Period, ns.
    pub const PERIOD: usize = 7;
    /// Threshold, f64 bits.
    pub const THRESHOLD: usize = 8;
    /// Stall periods (0: off).
    pub const STALL: usize = 9;
    /// Model id.
    pub const MODEL: usize = 10;
    /// Own address.
    pub const SELF_ADDR: usize = 11;
    /// Writer PID.
    pub const WRITER_PID: usize = 12;
    /// Creation time.
    pub const CREATED: usize = 13;
    /// CRC-64 of words 0..=13.
    pub const CHECKSUM: usize = 14;
    /// Last update, ns.
    pub const UPDATED: usize = 16;
    /// Closed flag.
    pub const CLOSED: usize = 17;
    /// Entries in use.
    pub const PEERS: usize = 18;
    /// Next event number.
    pub const EVENT_NEXT: usize = 19;
    /// First of the eight counters.
    pub const STATS: usize = 20;
    /// Entry words.
    pub mod entry {
        /// Seqlock word.
        pub const SEQ: usize = 0;
        /// Address.
        pub const ADDR: usize = 1;
        /// Tunnel, status, flags.
        pub const TUNNEL_STATUS: usize = 2;
        /// Heartbeats.
        pub const HEARTBEATS: usize = 3;
        /// Last arrival.
        pub const LAST_RX: usize = 4;
        /// Last send time.
        pub const LAST_SEND: usize = 5;
        /// Last sequence number.
        pub const LAST_SEQ: usize = 6;
        /// Incarnation.
        pub const INCARNATION: usize = 7;
        /// Counter.
        pub const COUNTER: usize = 8;
        /// Counter change time.
        pub const COUNTER_CHANGED: usize = 9;
        /// Deadline.
        pub const DEADLINE: usize = 10;
        /// Max level bits.
        pub const MAX_LEVEL: usize = 11;
        /// Suspicions.
        pub const SUSPICIONS: usize = 12;
    }
    /// Event slot words.
    pub mod event {
        /// Completion stamp (`n + 1`).
        pub const STAMP: usize = 0;
        /// Time.
        pub const AT: usize = 1;
        /// Peer and kind.
        pub const PEER_KIND: usize = 2;
        /// Address.
        pub const ADDR: usize = 3;
    }
}

/// Presence flags of an entry's optional fields.
pub mod entry_flags {
    /// `counter` present.
    pub const COUNTER: u64 = 1;
    /// `last_rx_ns` present.
    pub const RX: u64 = 2;
    /// `last_send_ns` present.
    pub const SEND: u64 = 4;
    /// `last_seq` and `incarnation` present.
    pub const SEQ: u64 = 8;
    /// `deadline_ns` present.
    pub const DEADLINE: u64 = 16;
    /// `max_level` present.
    pub const MAX_LEVEL: u64 = 32;
    /// `counter_changed_ns` present.
    pub const CHANGED: u64 = 64;
}

const CRC64: crc::Crc<u64> = crc::Crc::<u64>::new(&crc::CRC_64_XZ);

/// Why a shared file could not be created or opened.
#[derive(Debug, thiserror::Error)]
pub enum ShmError {
    /// A file operation failed.
    #[error("{path}: {error}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error (in the message, so not also a `source`).
        error: io::Error,
    },
    /// Smaller than its header or than the geometry it declares.
    #[error("{path}: {len} bytes, need {need}")]
    TooSmall {
        /// The file.
        path: PathBuf,
        /// Its size.
        len: u64,
        /// Size needed.
        need: u64,
    },
    /// Not an xlane-fd file of this kind.
    #[error("{path}: bad magic")]
    Magic {
        /// The file.
        path: PathBuf,
    },
    /// Another layout version.
    #[error("{path}: layout version {found}, expected {SHM_VERSION}")]
    Version {
        /// The file.
        path: PathBuf,
        /// Version found.
        found: u64,
    },
    /// Header checksum or geometry wrong.
    #[error("{path}: corrupt header ({what})")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        what: &'static str,
    },
    /// A table with more entries than allowed was asked for.
    #[error("table capacity {0} outside 0..={MAX_TABLE_CAPACITY}")]
    Capacity(usize),
    /// An event ring size outside 1..=MAX_EVENT_CAPACITY was asked for.
    #[error("event capacity {0} outside 1..={MAX_EVENT_CAPACITY}")]
    EventCapacity(usize),
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> ShmError + '_ {
    move |error| ShmError::Io {
        path: path.to_path_buf(),
        error,
    }
}

/// A shared mapping viewed as atomic words.
struct Words {
    map: MmapRaw,
    len: usize,
}

impl Words {
    fn map(file: &File, len: usize, writable: bool, path: &Path) -> Result<Words, ShmError> {
        let mut opts = MmapOptions::new();
        opts.len(len);
        let map = if writable {
            opts.map_raw(file)
        } else {
            opts.map_raw_read_only(file)
        }
        .map_err(io_err(path))?;
        Ok(Words { map, len })
    }

    /// Word at byte offset `off`. Offsets are computed from a validated
    /// geometry, so an out-of-range offset is a bug in this module.
    fn at(&self, off: usize) -> &AtomicU64 {
        assert!(
            off % 8 == 0 && off + 8 <= self.len,
            "offset {off} outside mapping"
        );
        // SAFETY: in bounds (checked above), 8-aligned (page-aligned mapping,
        // offset multiple of 8), and the memory lives as long as `self.map`.
        // Read-only mappings are only ever loaded from.
        unsafe { &*self.map.as_ptr().add(off).cast::<AtomicU64>() }
    }

    fn w(&self, i: usize) -> &AtomicU64 {
        self.at(i * 8)
    }
}

fn file_len(f: &File, path: &Path) -> Result<u64, ShmError> {
    Ok(f.metadata().map_err(io_err(path))?.len())
}

fn tmp_path(path: &Path) -> PathBuf {
    let mut s = path.as_os_str().to_os_string();
    s.push(format!(".tmp.{}", std::process::id()));
    PathBuf::from(s)
}

fn ensure_parent(path: &Path) -> Result<(), ShmError> {
    if let Some(dir) = path.parent() {
        if !dir.as_os_str().is_empty() {
            std::fs::create_dir_all(dir).map_err(io_err(dir))?;
        }
    }
    Ok(())
}

// ---------------------------------------------------------------- counter

/// The application's liveness counter (see the module docs).
pub struct LivenessCounter {
    words: Words,
}

impl LivenessCounter {
    /// Opens the counter at `path`, creating it (zero) if it does not exist.
    /// Two processes racing to create it end up with the same file.
    pub fn open_or_create(path: impl AsRef<Path>) -> Result<Self, ShmError> {
        let path = path.as_ref();
        match Self::open(path) {
            Err(ShmError::Io { error, .. }) if error.kind() == io::ErrorKind::NotFound => {}
            other => return other,
        }
        ensure_parent(path)?;
        let tmp = tmp_path(path);
        let f = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&tmp)
            .map_err(io_err(&tmp))?;
        let init = (|| {
            f.set_len(COUNTER_LEN as u64).map_err(io_err(&tmp))?;
            let w = Words::map(&f, COUNTER_LEN, true, &tmp)?;
            w.w(1).store(SHM_VERSION, Ordering::Relaxed);
            w.w(0).store(COUNTER_MAGIC, Ordering::Release);
            // hard_link never replaces: whoever links first wins.
            match std::fs::hard_link(&tmp, path) {
                Ok(()) => Ok(()),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
                Err(e) => Err(ShmError::Io {
                    path: path.to_path_buf(),
                    error: e,
                }),
            }
        })();
        let _ = std::fs::remove_file(&tmp);
        init?;
        Self::open(path)
    }

    /// Opens an existing counter (read-write) and checks its header.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, ShmError> {
        let path = path.as_ref();
        let f = OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(io_err(path))?;
        let len = file_len(&f, path)?;
        if len < COUNTER_LEN as u64 {
            return Err(ShmError::TooSmall {
                path: path.to_path_buf(),
                len,
                need: COUNTER_LEN as u64,
            });
        }
        let words = Words::map(&f, COUNTER_LEN, true, path)?;
        if words.w(0).load(Ordering::Acquire) != COUNTER_MAGIC {
            return Err(ShmError::Magic {
                path: path.to_path_buf(),
            });
        }
        let v = words.w(1).load(Ordering::Relaxed);
        if v != SHM_VERSION {
            return Err(ShmError::Version {
                path: path.to_path_buf(),
                found: v,
            });
        }
        Ok(LivenessCounter { words })
    }

    /// Application side: one more sign of life; returns the new value. Two
    /// stores, no system call.
    pub fn bump(&self, now_ns: Nanos) -> u64 {
        let v = self
            .words
            .w(2)
            .fetch_add(1, Ordering::Release)
            .wrapping_add(1);
        self.words.w(3).store(now_ns, Ordering::Relaxed);
        v
    }

    /// X-FD side: the current value (one load).
    pub fn read(&self) -> u64 {
        self.words.w(2).load(Ordering::Acquire)
    }

    /// When the application last bumped, ns (0: never).
    pub fn last_bump_ns(&self) -> Nanos {
        self.words.w(3).load(Ordering::Relaxed)
    }
}

// ---------------------------------------------------------------- table

/// Immutable header fields of a table.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct TableInfo {
    /// Entries.
    pub capacity: usize,
    /// Event slots.
    pub event_capacity: usize,
    /// Heartbeat period T, ns.
    pub period_ns: Nanos,
    /// Threshold (X-FD: Λ, ns).
    pub threshold: f64,
    /// Stall detection after k periods.
    pub stall_periods: Option<u32>,
    /// The model (None: an id this version does not know).
    pub model: Option<ModelKind>,
    /// The writer's own heartbeat address.
    pub self_addr: Option<SocketAddrV4>,
    /// The writer's PID.
    pub writer_pid: u32,
    /// Creation time, ns.
    pub created_ns: Nanos,
}

impl TableInfo {
    fn byte_len(&self) -> usize {
        TABLE_HEADER_LEN + self.capacity * ENTRY_LEN + self.event_capacity * EVENT_LEN
    }
}

/// The table's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct TableStats {
    /// Heartbeats accepted.
    pub accepted: u64,
    /// Ignored: unknown sender.
    pub unknown_sender: u64,
    /// Ignored: unknown tunnel.
    pub unknown_tunnel: u64,
    /// Ignored: replay.
    pub replay: u64,
    /// Ignored: malformed.
    pub malformed: u64,
    /// Events the detector dropped.
    pub events_dropped: u64,
    /// Heartbeats this X-FD sent.
    pub heartbeats_sent: u64,
    /// Heartbeats the socket refused.
    pub send_errors: u64,
}

impl TableStats {
    /// The detector's part, with the sender's counters.
    pub fn from_detector(d: &DetectorStats, heartbeats_sent: u64, send_errors: u64) -> Self {
        TableStats {
            accepted: d.accepted,
            unknown_sender: d.unknown_sender,
            unknown_tunnel: d.unknown_tunnel,
            replay: d.replay,
            malformed: d.malformed,
            events_dropped: d.events_dropped,
            heartbeats_sent,
            send_errors,
        }
    }

    fn to_words(self) -> [u64; 8] {
        [
            self.accepted,
            self.unknown_sender,
            self.unknown_tunnel,
            self.replay,
            self.malformed,
            self.events_dropped,
            self.heartbeats_sent,
            self.send_errors,
        ]
    }

    fn from_words(w: [u64; 8]) -> Self {
        TableStats {
            accepted: w[0],
            unknown_sender: w[1],
            unknown_tunnel: w[2],
            replay: w[3],
            malformed: w[4],
            events_dropped: w[5],
            heartbeats_sent: w[6],
            send_errors: w[7],
        }
    }
}

fn addr_word(a: SocketAddrV4) -> u64 {
    ((u32::from(*a.ip()) as u64) << 16) | a.port() as u64
}

fn word_addr(w: u64) -> SocketAddrV4 {
    SocketAddrV4::new(Ipv4Addr::from((w >> 16) as u32), w as u16)
}

fn status_code(s: Status) -> u64 {
    match s {
        Status::Unknown => 0,
        Status::Alive => 1,
        Status::Suspected(Reason::Silent) => 2,
        Status::Suspected(Reason::Stalled) => 3,
    }
}

fn code_status(c: u64) -> Option<Status> {
    Some(match c {
        0 => Status::Unknown,
        1 => Status::Alive,
        2 => Status::Suspected(Reason::Silent),
        3 => Status::Suspected(Reason::Stalled),
        _ => return None,
    })
}

fn kind_code(k: EventKind) -> u64 {
    match k {
        EventKind::Joined => 0,
        EventKind::Suspected(Reason::Silent) => 1,
        EventKind::Suspected(Reason::Stalled) => 2,
        EventKind::Recovered => 3,
        EventKind::Restarted => 4,
    }
}

fn code_kind(c: u64) -> Option<EventKind> {
    Some(match c {
        0 => EventKind::Joined,
        1 => EventKind::Suspected(Reason::Silent),
        2 => EventKind::Suspected(Reason::Stalled),
        3 => EventKind::Recovered,
        4 => EventKind::Restarted,
        _ => return None,
    })
}

fn header_crc(w: &[u64; 14]) -> u64 {
    let mut d = CRC64.digest();
    for x in w {
        d.update(&x.to_le_bytes());
    }
    d.finalize()
}

/// What a new table declares (see [`TableWriter::create`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TableConfig {
    /// Entries (the detector's peers).
    pub capacity: usize,
    /// Event slots.
    pub event_capacity: usize,
    /// Heartbeat period T, ns.
    pub period_ns: Nanos,
    /// Threshold.
    pub threshold: f64,
    /// Stall periods.
    pub stall_periods: Option<u32>,
    /// Model.
    pub model: ModelKind,
    /// Own heartbeat address.
    pub self_addr: Option<SocketAddrV4>,
    /// Creation time, ns.
    pub created_ns: Nanos,
}

/// The writing end of the alive table (one per X-FD; `&mut self` keeps it single-writer).
pub struct TableWriter {
    words: Words,
    info: TableInfo,
    path: PathBuf,
    next_event: u64,
}

impl TableWriter {
    /// Creates the table at `path` (replacing an old one atomically), with
    /// every entry empty. Allocates and makes system calls; the update
    /// methods afterwards do neither.
    pub fn create(path: impl AsRef<Path>, cfg: &TableConfig) -> Result<Self, ShmError> {
        let path = path.as_ref();
        if cfg.capacity > MAX_TABLE_CAPACITY {
            return Err(ShmError::Capacity(cfg.capacity));
        }
        if cfg.event_capacity == 0 || cfg.event_capacity > MAX_EVENT_CAPACITY {
            return Err(ShmError::EventCapacity(cfg.event_capacity));
        }
        let info = TableInfo {
            capacity: cfg.capacity,
            event_capacity: cfg.event_capacity,
            period_ns: cfg.period_ns,
            threshold: cfg.threshold,
            stall_periods: cfg.stall_periods,
            model: Some(cfg.model),
            self_addr: cfg.self_addr,
            writer_pid: std::process::id(),
            created_ns: cfg.created_ns,
        };
        ensure_parent(path)?;
        let tmp = tmp_path(path);
        let _ = std::fs::remove_file(&tmp);
        let f = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&tmp)
            .map_err(io_err(&tmp))?;
        let len = info.byte_len();
        let made = (|| {
            f.set_len(len as u64).map_err(io_err(&tmp))?;
            let words = Words::map(&f, len, true, &tmp)?;
            let h: [u64; 14] = [
                TABLE_MAGIC,
                SHM_VERSION,
                TABLE_HEADER_LEN as u64,
                info.capacity as u64,
                ENTRY_LEN as u64,
                info.event_capacity as u64,
                EVENT_LEN as u64,
                info.period_ns,
                info.threshold.to_bits(),
                info.stall_periods.unwrap_or(0) as u64,
                cfg.model.as_u32() as u64,
                info.self_addr.map_or(0, |a| (1 << 48) | addr_word(a)),
                info.writer_pid as u64,
                info.created_ns,
            ];
            for (i, v) in h.iter().enumerate() {
                words.w(i).store(*v, Ordering::Relaxed);
            }
            words
                .w(word::CHECKSUM)
                .store(header_crc(&h), Ordering::Release);
            std::fs::rename(&tmp, path).map_err(io_err(path))?;
            Ok(words)
        })();
        let words = match made {
            Ok(w) => w,
            Err(e) => {
                let _ = std::fs::remove_file(&tmp);
                return Err(e);
            }
        };
        Ok(TableWriter {
            words,
            info,
            path: path.to_path_buf(),
            next_event: 0,
        })
    }

    /// The header fields.
    pub fn info(&self) -> &TableInfo {
        &self.info
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn entry_word(&self, i: usize, w: usize) -> &AtomicU64 {
        self.words.at(TABLE_HEADER_LEN + i * ENTRY_LEN + w * 8)
    }

    /// Publishes one peer's state (seqlock write; no allocation, no system
    /// call). Returns `false` if `v.index` is outside the table.
    pub fn set_peer(&mut self, v: &PeerView) -> bool {
        let i = v.index;
        if i >= self.info.capacity {
            return false;
        }
        use entry_flags as fl;
        use word::entry as e;
        let mut flags = 0;
        let mut opt = |o: Option<u64>, f: u64| {
            if o.is_some() {
                flags |= f;
            }
            o.unwrap_or(0)
        };
        let mut vals: [(usize, u64); 12] = [
            (e::ADDR, addr_word(v.addr)),
            (e::HEARTBEATS, v.heartbeats),
            (e::LAST_RX, opt(v.last_rx_ns, fl::RX)),
            (e::LAST_SEND, opt(v.last_send_ns, fl::SEND)),
            (e::LAST_SEQ, opt(v.last_seq, fl::SEQ)),
            (e::INCARNATION, v.incarnation.unwrap_or(0)),
            (e::COUNTER, opt(v.counter, fl::COUNTER)),
            (e::COUNTER_CHANGED, opt(v.counter_changed_ns, fl::CHANGED)),
            (e::DEADLINE, opt(v.deadline_ns, fl::DEADLINE)),
            (
                e::MAX_LEVEL,
                opt(v.max_level.map(f64::to_bits), fl::MAX_LEVEL),
            ),
            (e::SUSPICIONS, v.suspicions),
            (e::TUNNEL_STATUS, 0),
        ];
        vals[11].1 = v.tunnel as u64 | (status_code(v.status) << 32) | (flags << 40);
        let seq = self.entry_word(i, e::SEQ);
        let s = seq.load(Ordering::Relaxed) & !1;
        seq.store(s.wrapping_add(1), Ordering::Relaxed);
        fence(Ordering::Release);
        for (w, x) in vals {
            self.entry_word(i, w).store(x, Ordering::Relaxed);
        }
        self.entry_word(i, e::SEQ)
            .store(s.wrapping_add(2), Ordering::Release);
        let used = self.words.w(word::PEERS);
        if used.load(Ordering::Relaxed) < (i + 1) as u64 {
            used.store((i + 1) as u64, Ordering::Release);
        }
        true
    }

    /// Appends an event to the ring; returns its number in the table.
    /// No allocation, no system call.
    pub fn push_event(&mut self, ev: &Event) -> u64 {
        use word::event as e;
        let n = self.next_event;
        let slot = (n % self.info.event_capacity as u64) as usize;
        let base = TABLE_HEADER_LEN + self.info.capacity * ENTRY_LEN + slot * EVENT_LEN;
        let w = |k: usize| self.words.at(base + k * 8);
        w(e::STAMP).store(u64::MAX, Ordering::Relaxed);
        fence(Ordering::Release);
        w(e::AT).store(ev.at_ns, Ordering::Relaxed);
        w(e::PEER_KIND).store(
            (ev.peer as u64 & 0xffff_ffff) | (kind_code(ev.kind) << 32),
            Ordering::Relaxed,
        );
        w(e::ADDR).store(addr_word(ev.addr), Ordering::Relaxed);
        w(e::STAMP).store(n + 1, Ordering::Release);
        self.next_event = n + 1;
        self.words
            .w(word::EVENT_NEXT)
            .store(n + 1, Ordering::Release);
        n
    }

    /// Publishes the counters.
    pub fn set_stats(&mut self, s: &TableStats) {
        for (k, v) in s.to_words().into_iter().enumerate() {
            self.words.w(word::STATS + k).store(v, Ordering::Relaxed);
        }
    }

    /// Marks the writer alive at `now_ns` (readers see how fresh the table is).
    pub fn touch(&mut self, now_ns: Nanos) {
        self.words.w(word::UPDATED).store(now_ns, Ordering::Release);
    }

    /// Marks the table closed (the writer exits cleanly).
    pub fn close(self) {
        // Drop does it.
    }
}

impl Drop for TableWriter {
    fn drop(&mut self) {
        self.words.w(word::CLOSED).store(1, Ordering::Release);
    }
}

/// Why one entry could not be read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EntryError {
    /// Index beyond the entries in use.
    #[error("no entry {0}")]
    OutOfRange(usize),
    /// The writer kept the entry locked for all retries (it died mid-update?).
    #[error("entry {0} is being written (retried {SEQLOCK_RETRIES} times)")]
    Busy(usize),
    /// The entry holds an unknown status code.
    #[error("entry {0} has an unknown status code")]
    Corrupt(usize),
}

/// A consistent copy of the whole table (allocates; for tools).
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct TableSnapshot {
    /// Header.
    pub info: TableInfo,
    /// The writer's last update, ns.
    pub updated_ns: Nanos,
    /// The writer exited cleanly.
    pub closed: bool,
    /// Counters.
    pub stats: TableStats,
    /// Entries in use (those that could be read).
    pub peers: Vec<PeerView>,
    /// Entries that could not be read.
    pub unreadable: Vec<usize>,
    /// Events published so far.
    pub events_published: u64,
}

/// The reading end of the alive table: any local process, no system call per read.
pub struct AliveTable {
    words: Words,
    info: TableInfo,
    path: PathBuf,
}

impl AliveTable {
    /// Maps the table at `path` read-only and validates its header.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, ShmError> {
        let path = path.as_ref();
        let f = File::open(path).map_err(io_err(path))?;
        let len = file_len(&f, path)?;
        let corrupt = |what| ShmError::Corrupt {
            path: path.to_path_buf(),
            what,
        };
        if len < TABLE_HEADER_LEN as u64 {
            return Err(ShmError::TooSmall {
                path: path.to_path_buf(),
                len,
                need: TABLE_HEADER_LEN as u64,
            });
        }
        let hdr = Words::map(&f, TABLE_HEADER_LEN, false, path)?;
        let mut h = [0u64; 14];
        for (i, x) in h.iter_mut().enumerate() {
            *x = hdr.w(i).load(Ordering::Acquire);
        }
        if h[word::MAGIC] != TABLE_MAGIC {
            return Err(ShmError::Magic {
                path: path.to_path_buf(),
            });
        }
        if h[word::VERSION] != SHM_VERSION {
            return Err(ShmError::Version {
                path: path.to_path_buf(),
                found: h[word::VERSION],
            });
        }
        if hdr.w(word::CHECKSUM).load(Ordering::Acquire) != header_crc(&h) {
            return Err(corrupt("checksum"));
        }
        if h[word::HEADER_LEN] != TABLE_HEADER_LEN as u64
            || h[word::ENTRY_LEN] != ENTRY_LEN as u64
            || h[word::EVENT_LEN] != EVENT_LEN as u64
        {
            return Err(corrupt("lengths"));
        }
        if h[word::CAPACITY] > MAX_TABLE_CAPACITY as u64 {
            return Err(corrupt("capacity"));
        }
        if h[word::EVENT_CAPACITY] == 0 || h[word::EVENT_CAPACITY] > MAX_EVENT_CAPACITY as u64 {
            return Err(corrupt("event capacity"));
        }
        let sa = h[word::SELF_ADDR];
        let info = TableInfo {
            capacity: h[word::CAPACITY] as usize,
            event_capacity: h[word::EVENT_CAPACITY] as usize,
            period_ns: h[word::PERIOD],
            threshold: f64::from_bits(h[word::THRESHOLD]),
            stall_periods: match h[word::STALL] {
                0 => None,
                k => Some(u32::try_from(k).map_err(|_| corrupt("stall periods"))?),
            },
            model: u32::try_from(h[word::MODEL])
                .ok()
                .and_then(ModelKind::from_u32),
            self_addr: (sa >> 48 == 1).then(|| word_addr(sa & ((1 << 48) - 1))),
            writer_pid: h[word::WRITER_PID] as u32,
            created_ns: h[word::CREATED],
        };
        let need = info.byte_len() as u64;
        if len < need {
            return Err(ShmError::TooSmall {
                path: path.to_path_buf(),
                len,
                need,
            });
        }
        drop(hdr);
        let words = Words::map(&f, info.byte_len(), false, path)?;
        Ok(AliveTable {
            words,
            info,
            path: path.to_path_buf(),
        })
    }

    /// Header fields.
    pub fn info(&self) -> &TableInfo {
        &self.info
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Entries in use.
    pub fn len(&self) -> usize {
        (self.words.w(word::PEERS).load(Ordering::Acquire) as usize).min(self.info.capacity)
    }

    /// `true` with no entry in use.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The writer's last update, ns.
    pub fn updated_ns(&self) -> Nanos {
        self.words.w(word::UPDATED).load(Ordering::Acquire)
    }

    /// The writer exited cleanly.
    pub fn is_closed(&self) -> bool {
        self.words.w(word::CLOSED).load(Ordering::Acquire) != 0
    }

    /// Counters (each read atomically; not one consistent cut).
    pub fn stats(&self) -> TableStats {
        let mut w = [0u64; 8];
        for (k, x) in w.iter_mut().enumerate() {
            *x = self.words.w(word::STATS + k).load(Ordering::Relaxed);
        }
        TableStats::from_words(w)
    }

    /// Events published so far (the next event's number).
    pub fn events_published(&self) -> u64 {
        self.words.w(word::EVENT_NEXT).load(Ordering::Acquire)
    }

    fn entry_word(&self, i: usize, w: usize) -> &AtomicU64 {
        self.words.at(TABLE_HEADER_LEN + i * ENTRY_LEN + w * 8)
    }

    /// A consistent copy of entry `i` (seqlock read; no allocation, no system
    /// call; bounded retries).
    pub fn entry(&self, i: usize) -> Result<PeerView, EntryError> {
        use entry_flags as fl;
        use word::entry as e;
        if i >= self.len() {
            return Err(EntryError::OutOfRange(i));
        }
        for _ in 0..SEQLOCK_RETRIES {
            let s1 = self.entry_word(i, e::SEQ).load(Ordering::Acquire);
            if s1 & 1 == 1 {
                std::hint::spin_loop();
                continue;
            }
            let mut w = [0u64; 13];
            for (k, x) in w.iter_mut().enumerate().skip(1) {
                *x = self.entry_word(i, k).load(Ordering::Relaxed);
            }
            fence(Ordering::Acquire);
            let s2 = self.entry_word(i, e::SEQ).load(Ordering::Relaxed);
            if s1 != s2 {
                std::hint::spin_loop();
                continue;
            }
            let ts = w[e::TUNNEL_STATUS];
            let flags = ts >> 40;
            let has = |f: u64| flags & f != 0;
            let opt = |f: u64, v: u64| has(f).then_some(v);
            let status = code_status((ts >> 32) & 0xff).ok_or(EntryError::Corrupt(i))?;
            return Ok(PeerView {
                index: i,
                addr: word_addr(w[e::ADDR]),
                tunnel: ts as u32,
                status,
                heartbeats: w[e::HEARTBEATS],
                last_rx_ns: opt(fl::RX, w[e::LAST_RX]),
                last_send_ns: opt(fl::SEND, w[e::LAST_SEND]),
                last_seq: opt(fl::SEQ, w[e::LAST_SEQ]),
                incarnation: opt(fl::SEQ, w[e::INCARNATION]),
                counter: opt(fl::COUNTER, w[e::COUNTER]),
                counter_changed_ns: opt(fl::CHANGED, w[e::COUNTER_CHANGED]),
                deadline_ns: opt(fl::DEADLINE, w[e::DEADLINE]),
                max_level: opt(fl::MAX_LEVEL, w[e::MAX_LEVEL]).map(f64::from_bits),
                suspicions: w[e::SUSPICIONS],
            });
        }
        Err(EntryError::Busy(i))
    }

    /// The entry whose heartbeat address is `addr` (linear scan).
    pub fn find(&self, addr: SocketAddrV4) -> Option<PeerView> {
        (0..self.len())
            .filter_map(|i| self.entry(i).ok())
            .find(|p| p.addr == addr)
    }

    /// Copies everything (allocates).
    pub fn snapshot(&self) -> TableSnapshot {
        let mut peers = Vec::with_capacity(self.len());
        let mut unreadable = Vec::new();
        for i in 0..self.len() {
            match self.entry(i) {
                Ok(p) => peers.push(p),
                Err(_) => unreadable.push(i),
            }
        }
        TableSnapshot {
            info: self.info,
            updated_ns: self.updated_ns(),
            closed: self.is_closed(),
            stats: self.stats(),
            peers,
            unreadable,
            events_published: self.events_published(),
        }
    }

    /// Reads event `n` if it is still in the ring.
    fn event(&self, n: u64) -> Option<Event> {
        use word::event as e;
        let slot = (n % self.info.event_capacity as u64) as usize;
        let base = TABLE_HEADER_LEN + self.info.capacity * ENTRY_LEN + slot * EVENT_LEN;
        let w = |k: usize| self.words.at(base + k * 8);
        if w(e::STAMP).load(Ordering::Acquire) != n.wrapping_add(1) {
            return None;
        }
        let at = w(e::AT).load(Ordering::Relaxed);
        let pk = w(e::PEER_KIND).load(Ordering::Relaxed);
        let addr = w(e::ADDR).load(Ordering::Relaxed);
        fence(Ordering::Acquire);
        if w(e::STAMP).load(Ordering::Relaxed) != n.wrapping_add(1) {
            return None;
        }
        Some(Event {
            number: n,
            peer: (pk & 0xffff_ffff) as usize,
            addr: word_addr(addr),
            at_ns: at,
            kind: code_kind(pk >> 32)?,
        })
    }

    /// A cursor at the next event to be published (sees only new events).
    pub fn subscribe(&self) -> EventCursor {
        EventCursor {
            next: self.events_published(),
        }
    }

    /// A cursor at event number `next` (0: from the oldest still kept).
    pub fn subscribe_from(&self, next: u64) -> EventCursor {
        EventCursor { next }
    }
}

/// One item of an event subscription.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventItem {
    /// The next event.
    Event(Event),
    /// The reader fell behind the ring: this many events were overwritten
    /// unread (the cursor moved past them).
    Missed(u64),
}

/// A position in a table's event ring. Cheap to copy; keeps no reference.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EventCursor {
    next: u64,
}

impl EventCursor {
    /// The number of the next event this cursor returns.
    pub fn position(&self) -> u64 {
        self.next
    }

    /// The next item, or `None` when caught up (call again later). No
    /// allocation, no system call; bounded work.
    pub fn next_item(&mut self, t: &AliveTable) -> Option<EventItem> {
        for _ in 0..4 {
            let published = t.events_published();
            if self.next >= published {
                return None;
            }
            let oldest = published.saturating_sub(t.info.event_capacity as u64);
            if self.next < oldest {
                let missed = oldest - self.next;
                self.next = oldest;
                return Some(EventItem::Missed(missed));
            }
            if let Some(ev) = t.event(self.next) {
                self.next += 1;
                return Some(EventItem::Event(ev));
            }
            // Overwritten (or being written) while we looked: re-check the head.
        }
        None
    }

    /// An iterator over the items available now.
    pub fn iter<'a>(&'a mut self, t: &'a AliveTable) -> impl Iterator<Item = EventItem> + 'a {
        std::iter::from_fn(move || self.next_item(t))
    }

    /// Calls `f` for every event available now; returns how many were missed.
    pub fn for_each(&mut self, t: &AliveTable, mut f: impl FnMut(&Event)) -> u64 {
        let mut missed = 0;
        while let Some(item) = self.next_item(t) {
            match item {
                EventItem::Event(e) => f(&e),
                EventItem::Missed(n) => missed += n,
            }
        }
        missed
    }
}
