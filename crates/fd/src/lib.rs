//! # xlane-fd: X-FD, the failure detector on the express lane
//!
//! X-Lane paper §5.1 and §6.4. Every host runs one X-FD. Each period T it
//! reads its application's **liveness counter** (shared memory, bumped by
//! the application at least every T/3) and sends it in a heartbeat over the
//! periodic multicast lane. Receivers stamp each arrival first (kernel or NIC
//! stamp), then update the **alive table** — sender address and port, last
//! heartbeat time, counter — that lives in shared memory, so any local
//! application reads it without a system call. A peer is **suspected** when
//! no heartbeat arrives within `T + Λ` (silent), or when its counter stops
//! advancing for `k` periods (host alive, application stuck). Suspicions and
//! recoveries are also published as **events** in a ring in the same shared
//! memory.
//!
//! ## Pieces
//!
//! * [`payload`]: heartbeat codecs (lane chunk and plain UDP), typed errors.
//! * [`model`]: suspicion models — [`FixedTimeout`] (X-FD and the
//!   fixed-timeout baseline) and [`PhiAccrual`] (the phi-accrual baseline) —
//!   behind one trait, [`SuspicionModel`], plus [`replay`] for benchmarks:
//!   one pass over recorded arrivals gives the accuracy at every threshold
//!   and the smallest threshold without false suspicion, exactly.
//! * [`detector`]: the sans-IO [`Detector`] (time passed in, fixed peer
//!   table, no allocation per heartbeat) and the object-safe
//!   [`FailureDetector`] trait all three detectors implement.
//! * [`shm`]: the liveness counter, the alive table (a seqlock per entry)
//!   and its event ring; [`AliveTable::open`] is the reader library.
//! * `service` (feature `service`, on by default): the runner behind
//!   `xlane fd run` — one thread, one socket, sending and receiving.
#![warn(missing_docs)]

pub mod detector;
pub mod model;
pub mod payload;
#[cfg(feature = "service")]
pub mod service;
pub mod shm;

pub use detector::{
    ConfigError, Detector, DetectorConfig, DetectorStats, Event, EventKind, FailureDetector,
    Heartbeat, HeartbeatError, MalformedError, PeerSpec, PeerView, PhiFd, Reason, Status, XFd,
};
pub use model::{
    replay, Anchor, Arrival, FixedTimeout, ModelKind, PhiAccrual, PhiParams, ReplaySummary,
    SuspicionModel,
};
pub use payload::{DecodeError, HeartbeatPayload, PlainHeartbeat, FD_PRODUCER};
pub use shm::{
    AliveTable, EventCursor, EventItem, LivenessCounter, ShmError, TableConfig, TableSnapshot,
    TableWriter,
};

/// Nanoseconds (`CLOCK_REALTIME`, the clock of kernel packet stamps).
pub type Nanos = u64;
