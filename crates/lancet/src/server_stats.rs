//! The counters of a running server (synthetic, echo or R2P2 workers):
//! bumped by every worker thread, read as a [`ServerStats`] snapshot.

use serde::Serialize;
use std::sync::atomic::{AtomicU64, Ordering};

/// Counters of a running server.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ServerStats {
    /// Well-formed requests received.
    pub requests: u64,
    /// Responses sent.
    pub responses: u64,
    /// Malformed requests (dropped).
    pub malformed: u64,
    /// Requests dropped because the queue was full.
    pub dropped: u64,
    /// Replies that could not be sent.
    pub send_errors: u64,
    /// TCP connections accepted.
    pub connections: u64,
    /// Threads refused `SCHED_FIFO` (they ran as normal threads).
    pub rt_denied: u64,
}

#[derive(Default)]
pub(crate) struct Counters {
    pub(crate) requests: AtomicU64,
    pub(crate) responses: AtomicU64,
    pub(crate) malformed: AtomicU64,
    pub(crate) dropped: AtomicU64,
    pub(crate) send_errors: AtomicU64,
    pub(crate) connections: AtomicU64,
    pub(crate) rt_denied: AtomicU64,
}

impl Counters {
    pub(crate) fn snapshot(&self) -> ServerStats {
        let g = |a: &AtomicU64| a.load(Ordering::Relaxed);
        ServerStats {
            requests: g(&self.requests),
            responses: g(&self.responses),
            malformed: g(&self.malformed),
            dropped: g(&self.dropped),
            send_errors: g(&self.send_errors),
            connections: g(&self.connections),
            rt_denied: g(&self.rt_denied),
        }
    }
}

pub(crate) fn bump(a: &AtomicU64) {
    a.fetch_add(1, Ordering::Relaxed);
}
