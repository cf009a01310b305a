//! A lane member's constants (sub-lanes, tunnel ids, producers, sizes),
//! settings, counters and what other threads may change
//! while its [`super::LaneLink`] runs: timing, tree ids, the burst policy's
//! frame sizes, errors, [`LaneStats`] and [`LaneControl`].

use std::collections::BTreeMap;
use std::net::SocketAddrV4;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use xlane_auth::TRAILER_LEN;
use xlane_host::socket::SocketError;
use xlane_wire::{Schema, MAX_FRAME_LEN};

/// DSCP of the X-FD sub-lane (express sub-lane 1, highest priority).
pub const FD_DSCP: u8 = 46;
/// DSCP of the replication sub-lane (express sub-lane 2).
pub const REPL_DSCP: u8 = 40;
/// First X-FD tunnel id (plus the node id).
pub const FD_TUNNEL_BASE: u32 = 0x6B00_0000;
/// First replication tunnel id (plus `from·4096 + to`).
pub const REPL_TUNNEL_BASE: u32 = 0x6C00_0000;
/// Node ids must be below this in lane mode.
pub const MAX_NODE_ID: u64 = 4096;
/// Producer id of raft chunks on the replication sub-lane.
pub const RAFT_PRODUCER: u8 = 0x52;
/// Producer id of commit-notice chunks on the X-FD sub-lane.
pub const NOTICE_PRODUCER: u8 = 0x4E;
/// Chunks queued per replication tunnel (≈ 116 KiB of raft datagrams).
pub const REPL_QUEUE_CHUNKS: usize = 4096;
/// Longest datagram accepted from a stream (the raft express MTU is lower).
pub const MAX_DATAGRAM: usize = 64 << 10;
/// Largest frame when frames are sealed: the trailer fills the rest of
/// the datagram.
pub const SEALED_FRAME_LEN: usize = MAX_FRAME_LEN - TRAILER_LEN;

/// Lane timing and frame sizes of a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LaneTiming {
    /// Period π_r of the replication tree, ns.
    pub repl_period_ns: u64,
    /// X-FD heartbeat period T, ns (also the Raft tick).
    pub fd_period_ns: u64,
    /// X-FD threshold Λ: a peer is suspected after T + Λ of silence, ns.
    pub fd_lambda_ns: u64,
    /// σ of the replication tree: the largest frame, bytes.
    pub repl_frame_bytes: usize,
    /// σ of the X-FD tree: the largest frame, bytes.
    pub fd_frame_bytes: usize,
    /// Network replication: each tree's frame is sent once, to the tree's
    /// multicast group ([`xlane_ctl::fabric::group_of`]), and the network
    /// (a fabric the controller programmed) delivers it to every peer, who
    /// joined it. Needs the same raft port on every member. Otherwise the
    /// sender sends a copy to every peer.
    pub multicast: bool,
}

impl Default for LaneTiming {
    fn default() -> Self {
        LaneTiming {
            repl_period_ns: 50_000,
            fd_period_ns: 1_000_000,
            fd_lambda_ns: 20_000_000,
            repl_frame_bytes: MAX_FRAME_LEN,
            fd_frame_bytes: MAX_FRAME_LEN,
            multicast: false,
        }
    }
}

/// The tunnel ids of one member's two trees (each to every other member).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TreeIds {
    /// Its X-FD tree.
    pub fd: u32,
    /// Its replication tree.
    pub repl: u32,
}

impl TreeIds {
    /// The ids member `id` uses when no controller granted others:
    /// `FD_TUNNEL_BASE + id` and `REPL_TUNNEL_BASE + id`.
    pub fn default_for(id: u64) -> TreeIds {
        TreeIds {
            fd: FD_TUNNEL_BASE + id as u32,
            repl: REPL_TUNNEL_BASE + id as u32,
        }
    }
}

/// Largest commit notice the X-FD tree is sized for: a raft heartbeat or
/// heartbeat response as the driver sends it (one kind byte, the encoded
/// message with terms and indices below 2^35), bytes. Checked by a test
/// against the codec.
pub const NOTICE_BYTES: usize = 40;
/// Largest append response or vote (request or answer) the replication
/// tree of a follower is sized for, bytes (same terms as [`NOTICE_BYTES`]).
pub const RESPONSE_BYTES: usize = 48;
/// What an append costs besides its entries: kind byte and message
/// header, bytes (same terms as [`NOTICE_BYTES`]).
pub const APPEND_BASE_BYTES: usize = 48;
/// What one entry of an append costs besides its data (term, index,
/// framing), bytes.
pub const ENTRY_OVERHEAD_BYTES: usize = 24;

/// σ of a member's trees by the burst policy (whole lane frames, bytes;
/// see [`frame_sizes`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameSizes {
    /// The X-FD tree: the heartbeat and one commit notice to every other
    /// member, in one frame.
    pub fd: usize,
    /// The replication tree of the leader: one append carrying a burst of
    /// `burst_bytes` of entries (each counted with its
    /// [`ENTRY_OVERHEAD_BYTES`]) to every follower, in one frame.
    pub repl_leader: usize,
    /// The replication tree of a follower: one append response (or vote)
    /// to the leader, in one frame.
    pub repl_follower: usize,
}

/// Chunks one datagram of `len` bytes with its `to` prefix takes.
fn stream_chunks(len: usize, schema: Schema) -> usize {
    crate::chunk_stream::chunks_needed(len + 2, schema.data_capacity())
}

/// The burst policy: what a member of a `members`-strong cluster asks σ of
/// its trees to be, so that one frame per period carries what raft sends in
/// a period at the replication rate — every follower's append of a burst of
/// `burst_bytes` of entries (the leader), an append response (a follower),
/// the heartbeat and a commit notice to everyone (X-FD). Whatever does not
/// fit waits for the next window, so the tree never exceeds σ. Capped at
/// the largest lane frame.
pub fn frame_sizes(members: usize, burst_bytes: usize) -> FrameSizes {
    let others = members.saturating_sub(1).max(1);
    let fd_chunks = 1 + others * stream_chunks(NOTICE_BYTES, Schema::Chunk26);
    let leader = others * stream_chunks(APPEND_BASE_BYTES + burst_bytes, Schema::Chunk36);
    let follower = stream_chunks(RESPONSE_BYTES, Schema::Chunk36);
    let cap = |schema: Schema, chunks: usize| schema.frame_len(chunks).min(MAX_FRAME_LEN);
    FrameSizes {
        fd: cap(Schema::Chunk26, fd_chunks),
        repl_leader: cap(Schema::Chunk36, leader),
        repl_follower: cap(Schema::Chunk36, follower),
    }
}

/// Why the lane link could not start.
#[derive(Debug, thiserror::Error)]
pub enum LaneError {
    /// A setting or peer address is unusable for the lane.
    #[error("{0}")]
    Config(String),
    /// An express socket could not be opened.
    #[error("lane socket {addr}: {source}")]
    Socket {
        /// The address.
        addr: SocketAddrV4,
        /// Why.
        source: SocketError,
    },
    /// The lane loop could not be set up (its epoll set or timer).
    #[error("lane loop: {0}")]
    Loop(#[source] std::io::Error),
}

/// Counters of the lane link (shared with the server for `INFO`).
#[derive(Debug, Default)]
pub struct LaneStats {
    /// Replication frames sent.
    pub repl_frames_sent: AtomicU64,
    /// Replication frames accepted.
    pub repl_frames_received: AtomicU64,
    /// X-FD heartbeat frames sent (each to every peer).
    pub fd_frames_sent: AtomicU64,
    /// Raft datagrams handed to the driver.
    pub delivered: AtomicU64,
    /// Commit notices sent.
    pub notices_sent: AtomicU64,
    /// Commit notices received for this node.
    pub notices_received: AtomicU64,
    /// Datagrams dropped: tunnel or heartbeat queue full, unknown peer (Raft retransmits).
    pub dropped: AtomicU64,
    /// Datagrams that waited for their tunnel's next window (the current
    /// one had carried a frame).
    pub deferred: AtomicU64,
    /// `sendto` failures.
    pub send_errors: AtomicU64,
    /// Frames refused: unknown sender, bad frame, duplicate, stale.
    pub refused_frames: AtomicU64,
    /// Partial datagrams abandoned after a lost frame.
    pub abandoned: AtomicU64,
    /// X-FD suspicions of a peer.
    pub suspicions: AtomicU64,
    /// Elections this node started because X-FD suspected the leader.
    pub campaigns: AtomicU64,
    /// Members seen restarting (new X-FD incarnation); their tunnels'
    /// sequence history was reset.
    pub restarts: AtomicU64,
    /// New periods or σ taken from the controller.
    pub retunes: AtomicU64,
    /// Frames refused by the MAC check (forged, replayed, unkeyed, or
    /// sealed by another member than the one at their source address).
    pub unauthenticated: AtomicU64,
}

impl LaneStats {
    pub(super) fn add(c: &AtomicU64, n: u64) {
        c.fetch_add(n, Ordering::Relaxed);
    }
}

/// Which of a member's trees.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tree {
    /// The X-FD tree.
    Fd,
    /// The replication tree.
    Repl,
}

/// New resources of one of this member's trees.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retune {
    /// Which tree.
    pub tree: Tree,
    /// Its period, ns.
    pub period_ns: u64,
    /// Its σ, bytes.
    pub frame_bytes: usize,
}

#[derive(Debug, Default)]
pub(super) struct Pending {
    pub(super) retunes: Vec<Retune>,
    pub(super) peer_trees: Option<BTreeMap<u64, TreeIds>>,
    pub(super) keys: Vec<(u32, xlane_auth::Key)>,
}

/// What another thread may change in a running [`super::LaneLink`] (e.g. when the
/// controller announces a new bound or period): the link takes it on its
/// next poll (a flag is checked per poll; the lock is taken only when
/// something changed).
#[derive(Debug)]
pub struct LaneControl {
    pub(super) fd_lambda_ns: AtomicU64,
    pub(super) changed: AtomicBool,
    pub(super) pending: Mutex<Pending>,
    /// Each tree's current period and σ, as the link runs them.
    pub(super) fd_now: (AtomicU64, AtomicU64),
    pub(super) repl_now: (AtomicU64, AtomicU64),
}

impl LaneControl {
    pub(crate) fn new(timing: &LaneTiming) -> Self {
        LaneControl {
            fd_lambda_ns: AtomicU64::new(timing.fd_lambda_ns),
            changed: AtomicBool::new(false),
            pending: Mutex::new(Pending::default()),
            fd_now: (
                AtomicU64::new(timing.fd_period_ns),
                AtomicU64::new(timing.fd_frame_bytes as u64),
            ),
            repl_now: (
                AtomicU64::new(timing.repl_period_ns),
                AtomicU64::new(timing.repl_frame_bytes as u64),
            ),
        }
    }

    /// X-FD's threshold Λ, ns.
    pub fn fd_lambda_ns(&self) -> u64 {
        self.fd_lambda_ns.load(Ordering::Acquire)
    }

    /// Sets X-FD's threshold Λ (ns) from the link's next poll on.
    pub fn set_fd_lambda_ns(&self, ns: u64) {
        self.fd_lambda_ns.store(ns, Ordering::Release);
    }

    /// A tree's period and σ as the link runs them now.
    pub fn tree(&self, tree: Tree) -> (u64, usize) {
        let (p, b) = match tree {
            Tree::Fd => &self.fd_now,
            Tree::Repl => &self.repl_now,
        };
        (
            p.load(Ordering::Acquire),
            b.load(Ordering::Acquire) as usize,
        )
    }

    /// Runs one of this member's trees at a new period and σ from its next
    /// free window after the next poll (the controller granted them).
    pub fn retune(&self, r: Retune) {
        if let Ok(mut p) = self.pending.lock() {
            p.retunes.push(r);
            self.changed.store(true, Ordering::Release);
        }
    }

    /// Frames sealed under these keys (id = tunnel id) open from now on:
    /// the keys of trees granted to other members since the link started.
    /// Tell it before [`LaneControl::set_peer_trees`] names the trees.
    pub fn add_keys(&self, keys: Vec<(u32, xlane_auth::Key)>) {
        if let Ok(mut p) = self.pending.lock() {
            p.keys.extend(keys);
            self.changed.store(true, Ordering::Release);
        }
    }

    /// The other members' tree ids from now on (e.g. a member restarted and
    /// was granted new trees). Members left out keep theirs.
    pub fn set_peer_trees(&self, trees: BTreeMap<u64, TreeIds>) {
        if let Ok(mut p) = self.pending.lock() {
            p.peer_trees = Some(trees);
            self.changed.store(true, Ordering::Release);
        }
    }
}
