//! [`TransportStats`]: the counters of a member's raft network.

use std::sync::atomic::AtomicU64;

/// Transport counters (shared between the threads).
#[derive(Debug, Default)]
pub struct TransportStats {
    /// UDP datagrams sent.
    pub udp_sent: AtomicU64,
    /// UDP datagrams received from peers and delivered.
    pub udp_received: AtomicU64,
    /// UDP datagrams from unknown source addresses, ignored.
    pub udp_unknown: AtomicU64,
    /// UDP send errors and oversize datagrams (dropped).
    pub udp_send_errors: AtomicU64,
    /// TCP frames sent.
    pub tcp_sent: AtomicU64,
    /// TCP frames received from peers and delivered.
    pub tcp_received: AtomicU64,
    /// TCP frames refused without a key (unknown sender, too long).
    pub tcp_unknown: AtomicU64,
    /// TCP connections closed at accept: from an address that is no
    /// peer's, or past [`crate::tcp_side::MAX_CONNECTIONS`].
    pub tcp_refused: AtomicU64,
    /// TCP connections closed for their handshake (none in time, forged)
    /// or a frame that failed its MAC (with a key).
    pub tcp_unauthenticated: AtomicU64,
    /// Regular-class messages dropped (queue full, connect or write failed).
    pub tcp_dropped: AtomicU64,
    /// Peers `NetTransport::set_peers` could not set up (left out).
    pub peer_errors: AtomicU64,
    /// UDP datagrams from peers' addresses refused by the MAC check
    /// (forged, replayed, unkeyed, or sealed by another member).
    pub udp_unauthenticated: AtomicU64,
}
