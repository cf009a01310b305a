//! X-Raft over the lane: the express transport of a member when a cluster
//! runs with `--transport lane`.
//!
//! The [`LaneLink`] owns two express sockets and is polled by the raft
//! driver's own thread ([`xlane_xraft::driver`]): the driver waits on its
//! sockets until its next deadline (a frame's slot, an X-FD heartbeat, a
//! detector deadline), so a raft datagram crosses no thread between the
//! socket and the node, and a frame leaves at its slot from the driver
//! thread. Per poll the work is bounded (at most `max` datagrams per
//! socket, one frame per tunnel, one heartbeat) and nothing is allocated
//! on the receive and send paths except the datagrams raft itself hands in.
//!
//! * **Replication sub-lane** (DSCP [`REPL_DSCP`], express sub-lane 2, the
//!   raft address's UDP port): one periodic lane tunnel per peer with a short
//!   period π_r. Raft's express datagrams (appends, votes, read-index
//!   heartbeats and their answers) are cut into 30-byte chunks
//!   ([`crate::chunk_stream`]) and packed into at most one frame per period
//!   per peer; a datagram that arrives while the current window is free
//!   goes out at once. Frames are validated by a [`PeriodicReceiver`] per
//!   peer (tunnel, sequence, duplicates); a lost frame resets that peer's
//!   stream, and Raft retransmits what it cost.
//! * **X-FD sub-lane** (DSCP [`FD_DSCP`], express sub-lane 1, raft port + 1):
//!   a heartbeat frame to every peer each period T carrying the X-FD chunk
//!   and this node's **commit notices** — Raft's heartbeats, which hold the
//!   leader's commit index, and their responses (class
//!   [`TrafficClass::Notice`]). A node learns of commits at the latest one T
//!   after the leader's heartbeat tick, on the low-jitter lane.
//! * **Elections from suspicion**: the X-FD detector watches every peer with
//!   threshold Λ; when it suspects one, the driver hears of it
//!   ([`Input::Suspected`]). If the suspect is the leader, the live node
//!   with the lowest id campaigns at once and the others stand back for
//!   it, instead of all waiting for Raft's election timeout.
//!
//! Raft's regular traffic (snapshots, messages over the bulk threshold)
//! stays on TCP ([`crate::net`]). Tunnel ids: X-FD of node `i` is
//! `FD_TUNNEL_BASE + i`, replication from `i` to `j` is
//! `REPL_TUNNEL_BASE + i·4096 + j`, so node ids must be below 4096.

use crate::chunk_stream::{enqueue_all, StreamReassembler, StreamStats};
use std::net::{SocketAddr, SocketAddrV4};
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use xlane_fd::{
    Anchor, Detector, DetectorConfig, EventKind, FixedTimeout, HeartbeatPayload, PeerSpec, Status,
    XFd, FD_PRODUCER,
};
use xlane_host::socket::{
    realtime_ns, LaneSocket, RecvBatch, SocketConfig, SocketError, EXPRESS_PRIORITY, RECV_BATCH,
};
use xlane_lane::{PeriodicMulticastSender, PeriodicReceiver, PeriodicSender, Replication};
use xlane_lane::{TunnelParams, MAX_RECEIVERS};
use xlane_wire::{Frame, Schema, MAX_FRAME_LEN};
use xlane_xraft::{Input, TrafficClass};

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

/// Lane timing of a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LaneTiming {
    /// Period π_r of the replication tunnels, ns.
    pub repl_period_ns: u64,
    /// X-FD heartbeat period T, ns (also the Raft tick).
    pub fd_period_ns: u64,
    /// X-FD threshold Λ: a peer is suspected after T + Λ of silence, ns.
    pub fd_lambda_ns: u64,
}

impl Default for LaneTiming {
    fn default() -> Self {
        LaneTiming {
            repl_period_ns: 50_000,
            fd_period_ns: 1_000_000,
            fd_lambda_ns: 20_000_000,
        }
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
}

impl LaneStats {
    fn add(c: &AtomicU64, n: u64) {
        c.fetch_add(n, Ordering::Relaxed);
    }
}

/// What another thread may change in a running [`LaneLink`] (e.g. when the
/// controller announces a new bound): the link takes it on its next poll.
#[derive(Debug)]
pub struct LaneControl {
    fd_lambda_ns: AtomicU64,
}

impl LaneControl {
    /// X-FD's threshold Λ, ns.
    pub fn fd_lambda_ns(&self) -> u64 {
        self.fd_lambda_ns.load(Ordering::Acquire)
    }

    /// Sets X-FD's threshold Λ (ns) from the link's next poll on.
    pub fn set_fd_lambda_ns(&self, ns: u64) {
        self.fd_lambda_ns.store(ns, Ordering::Release);
    }
}

struct PeerLink {
    id: u64,
    repl_addr: SocketAddrV4,
    repl_tx: PeriodicSender,
    repl_rx: PeriodicReceiver,
    repl_stream: StreamReassembler,
    notice_stream: StreamReassembler,
}

/// The lane link of one node (see the module docs): a [`xlane_xraft::Transport`]'s
/// express half, polled by the raft driver's thread.
pub struct LaneLink {
    me: u64,
    peers: Vec<PeerLink>,
    repl_sock: LaneSocket,
    fd_sock: LaneSocket,
    fds: [RawFd; 2],
    fd_tx: PeriodicMulticastSender,
    /// Every peer's X-FD address, in peer order.
    fd_dsts: Vec<SocketAddrV4>,
    /// The destinations of one heartbeat (reused).
    fd_sendto: Vec<SocketAddrV4>,
    detector: XFd,
    incarnation: u64,
    stats: Arc<LaneStats>,
    control: Arc<LaneControl>,
    /// The earliest time a replication tunnel with a backlog may send
    /// (`u64::MAX`: no backlog).
    repl_next: u64,
    buf: Vec<u8>,
    scratch: Vec<u8>,
    batch: Box<RecvBatch>,
    abandoned_seen: u64,
}

fn v4(a: SocketAddr, what: &str) -> Result<SocketAddrV4, LaneError> {
    match a {
        SocketAddr::V4(v) => Ok(v),
        SocketAddr::V6(_) => Err(LaneError::Config(format!(
            "{what} {a}: the lane is IPv4 only"
        ))),
    }
}

/// The X-FD address of a node whose raft address is `raft`: port + 1.
pub fn fd_addr(raft: SocketAddrV4) -> Result<SocketAddrV4, LaneError> {
    let port = raft.port().checked_add(1).ok_or_else(|| {
        LaneError::Config(format!(
            "raft port {} leaves no room for the X-FD port (raft port + 1)",
            raft.port()
        ))
    })?;
    Ok(SocketAddrV4::new(*raft.ip(), port))
}

fn repl_params(from: u64, to: u64, period_ns: u64) -> TunnelParams {
    TunnelParams {
        tunnel: REPL_TUNNEL_BASE + (from as u32) * MAX_NODE_ID as u32 + to as u32,
        period_ns,
        max_packet: MAX_FRAME_LEN,
        schema: Schema::Chunk36,
    }
}

fn open(addr: SocketAddrV4, dscp: u8, priority: u32) -> Result<LaneSocket, LaneError> {
    let mut sc = SocketConfig::express(addr);
    sc.dscp = dscp;
    sc.priority = priority;
    sc.nonblocking = true;
    sc.rx_timestamps = true;
    sc.rcvbuf = 4 << 20;
    LaneSocket::open(&sc).map_err(|source| LaneError::Socket { addr, source })
}

impl LaneLink {
    /// Opens the two sockets of node `me` (binding `bind`, its raft address,
    /// and `bind` port + 1) and sets up a tunnel pair per peer. `peers`: every
    /// member's raft address, this node included.
    pub fn new(
        me: u64,
        bind: SocketAddr,
        peers: &[(u64, SocketAddr)],
        timing: LaneTiming,
    ) -> Result<Self, LaneError> {
        if timing.repl_period_ns == 0 || timing.fd_period_ns == 0 {
            return Err(LaneError::Config("lane periods must be > 0".into()));
        }
        if let Some((id, _)) = peers.iter().find(|(id, _)| *id == 0 || *id >= MAX_NODE_ID) {
            return Err(LaneError::Config(format!(
                "node id {id}: lane mode needs ids in 1..{MAX_NODE_ID}"
            )));
        }
        if peers.len() > MAX_RECEIVERS + 1 {
            return Err(LaneError::Config(format!(
                "{} members; the lane link serves at most {}",
                peers.len(),
                MAX_RECEIVERS + 1
            )));
        }
        let bind = v4(bind, "raft bind address")?;
        let now = realtime_ns();
        let mut links = Vec::new();
        let mut specs = Vec::new();
        let mut fd_dsts = Vec::new();
        for &(id, addr) in peers.iter().filter(|(id, _)| *id != me) {
            let repl_addr = v4(addr, "raft address")?;
            let fd = fd_addr(repl_addr)?;
            let first = (now / timing.repl_period_ns + 1) * timing.repl_period_ns;
            let repl_tx = PeriodicSender::with_capacity(
                repl_params(me, id, timing.repl_period_ns),
                first,
                REPL_QUEUE_CHUNKS,
            )
            .map_err(|e| LaneError::Config(format!("replication tunnel to {id}: {e}")))?;
            let repl_rx = PeriodicReceiver::new(repl_params(id, me, timing.repl_period_ns));
            links.push(PeerLink {
                id,
                repl_addr,
                repl_tx,
                repl_rx,
                repl_stream: StreamReassembler::new(MAX_DATAGRAM),
                notice_stream: StreamReassembler::new(MAX_DATAGRAM),
            });
            specs.push(PeerSpec {
                addr: fd,
                tunnel: FD_TUNNEL_BASE + id as u32,
            });
            fd_dsts.push(fd);
        }
        if links.is_empty() {
            return Err(LaneError::Config(
                "lane mode needs at least one other member".into(),
            ));
        }
        let detector = Detector::new(
            DetectorConfig {
                period_ns: timing.fd_period_ns,
                threshold: timing.fd_lambda_ns as f64,
                stall_periods: None,
                join_deadline: None,
            },
            FixedTimeout::new(timing.fd_period_ns, Anchor::Arrival),
            &specs,
        )
        .map_err(|e| LaneError::Config(format!("X-FD: {e}")))?;
        let first = (now / timing.fd_period_ns + 1) * timing.fd_period_ns;
        let fd_tx = PeriodicMulticastSender::new(
            TunnelParams {
                tunnel: FD_TUNNEL_BASE + me as u32,
                period_ns: timing.fd_period_ns,
                max_packet: MAX_FRAME_LEN,
                schema: Schema::Chunk26,
            },
            first,
            Replication::Sender {
                receivers: links.len(),
            },
        )
        .map_err(|e| LaneError::Config(format!("X-FD tunnel: {e}")))?;
        let repl_sock = open(bind, REPL_DSCP, EXPRESS_PRIORITY - 1)?;
        let fd_sock = open(fd_addr(bind)?, FD_DSCP, EXPRESS_PRIORITY)?;
        let fds = [repl_sock.as_raw_fd(), fd_sock.as_raw_fd()];
        let n = links.len();
        Ok(LaneLink {
            me,
            peers: links,
            repl_sock,
            fd_sock,
            fds,
            fd_tx,
            fd_dsts,
            fd_sendto: Vec::with_capacity(n),
            detector,
            incarnation: now,
            stats: Arc::new(LaneStats::default()),
            control: Arc::new(LaneControl {
                fd_lambda_ns: AtomicU64::new(timing.fd_lambda_ns),
            }),
            repl_next: u64::MAX,
            buf: vec![0u8; MAX_FRAME_LEN],
            scratch: vec![0u8; MAX_DATAGRAM + 64],
            batch: Box::new(RecvBatch::new()),
            abandoned_seen: 0,
        })
    }

    /// The counters (shared).
    pub fn stats(&self) -> Arc<LaneStats> {
        self.stats.clone()
    }

    /// What other threads may change while the link runs.
    pub fn control(&self) -> Arc<LaneControl> {
        self.control.clone()
    }

    /// The two sockets (replication, X-FD): the driver waits on them.
    pub fn fds(&self) -> &[RawFd] {
        &self.fds
    }

    /// When [`LaneLink::poll`] must run next: the next heartbeat, detector
    /// deadline or free window of a tunnel with a backlog (`CLOCK_REALTIME` ns).
    pub fn next_deadline(&self) -> u64 {
        self.fd_tx
            .poll_timeout()
            .min(self.detector.next_deadline().unwrap_or(u64::MAX))
            .min(self.repl_next)
    }

    /// Sends one raft datagram to `to`: a commit notice waits for the next
    /// X-FD heartbeat; anything else goes on the replication tunnel, now if
    /// its window is free, else at the next one (the driver's next poll). A
    /// full queue drops the datagram (Raft retransmits).
    pub fn send(&mut self, to: u64, class: TrafficClass, bytes: &[u8]) {
        let queued = if class == TrafficClass::Notice {
            let ok = self.enqueue_notice(to, bytes);
            if ok {
                LaneStats::add(&self.stats.notices_sent, 1);
            }
            ok
        } else {
            self.enqueue_repl(to, bytes)
        };
        if !queued {
            LaneStats::add(&self.stats.dropped, 1);
            return;
        }
        if class != TrafficClass::Notice {
            self.flush_repl(realtime_ns());
            if self
                .peers
                .iter()
                .any(|p| p.id == to && p.repl_tx.pending() > 0)
            {
                LaneStats::add(&self.stats.deferred, 1);
            }
        }
    }

    /// One poll at `now`: reads at most `max` datagrams from each socket
    /// (replication first: it is what a write waits for), sends the backlog
    /// whose window came and the heartbeat if due, and hands raft datagrams
    /// and X-FD verdicts to `input`. Returns the datagrams read.
    pub fn poll(&mut self, now: u64, max: usize, input: &mut dyn FnMut(Input<'_>)) -> usize {
        let lambda = self.control.fd_lambda_ns() as f64;
        if lambda != self.detector.threshold() {
            let _ = self.detector.set_threshold(lambda);
        }
        let mut read = self.receive_repl(max, input);
        let checked = realtime_ns();
        let (n, fd_empty) = self.receive_fd(max, input);
        read += n;
        let now = now.max(checked);
        if self.repl_next <= now {
            self.flush_repl(now);
        }
        if now >= self.fd_tx.poll_timeout() {
            self.send_fd(now);
        }
        // Deadlines are checked only with every heartbeat that arrived by
        // `checked` read: a full socket is no silence.
        if fd_empty {
            self.detector.check_deadlines(checked);
        }
        self.handle_events(input);
        self.sync_abandoned();
        read
    }

    /// Chunks one datagram into its tunnel's queue, all or nothing.
    fn enqueue_repl(&mut self, to: u64, bytes: &[u8]) -> bool {
        if bytes.is_empty() || bytes.len() > MAX_DATAGRAM {
            return false;
        }
        let Some(p) = self.peers.iter_mut().find(|p| p.id == to) else {
            return false;
        };
        let free = REPL_QUEUE_CHUNKS - p.repl_tx.pending();
        let tx = &mut p.repl_tx;
        enqueue_all(
            bytes,
            Schema::Chunk36.data_capacity(),
            free,
            &mut self.scratch,
            &mut |c| tx.enqueue(RAFT_PRODUCER, c).is_ok(),
        )
    }

    /// Sends a frame on every tunnel with chunks pending whose current
    /// window is free, and notes when the backlog may go next.
    fn flush_repl(&mut self, now: u64) {
        let mut next = u64::MAX;
        for p in &mut self.peers {
            if p.repl_tx.pending() == 0 {
                continue;
            }
            if now >= p.repl_tx.clock().next_free() {
                if let Ok(t) = p.repl_tx.transmit_now(now, &mut self.buf) {
                    let frame = &mut self.buf[..t.len];
                    let _ = xlane_wire::stamp_send_time(frame, realtime_ns());
                    match self.repl_sock.send_to(frame, p.repl_addr) {
                        Ok(_) => LaneStats::add(&self.stats.repl_frames_sent, 1),
                        Err(_) => LaneStats::add(&self.stats.send_errors, 1),
                    }
                }
            }
            if p.repl_tx.pending() > 0 {
                next = next.min(p.repl_tx.clock().next_free());
            }
        }
        self.repl_next = next;
    }

    /// Reads the replication socket (at most `max` datagrams).
    fn receive_repl(&mut self, max: usize, input: &mut dyn FnMut(Input<'_>)) -> usize {
        let (stats, peers, batch) = (&self.stats, &mut self.peers, &mut self.batch);
        let mut read = 0;
        while read < max {
            let n = match self.repl_sock.recv_batch(batch) {
                Ok(n) => n,
                Err(_) => break,
            };
            read += n;
            for j in 0..n {
                let Some((st, bytes)) = batch.get(j) else {
                    break;
                };
                let got = st.received;
                let Some(p) = peers.iter_mut().find(|p| p.repl_addr == got.src) else {
                    LaneStats::add(&stats.refused_frames, 1);
                    continue;
                };
                if got.truncated {
                    LaneStats::add(&stats.refused_frames, 1);
                    continue;
                }
                let PeerLink {
                    id,
                    repl_rx,
                    repl_stream,
                    ..
                } = p;
                let res = repl_rx.handle_datagram(got.rx_ns, bytes, &mut |c| {
                    repl_stream.frame(c.seq);
                    if c.producer != RAFT_PRODUCER {
                        return;
                    }
                    if let Ok(Some(dg)) = repl_stream.push(c.data) {
                        LaneStats::add(&stats.delivered, 1);
                        input(Input::Datagram {
                            from: *id,
                            bytes: dg,
                        });
                    }
                });
                match res {
                    Ok(_) => LaneStats::add(&stats.repl_frames_received, 1),
                    Err(_) => LaneStats::add(&stats.refused_frames, 1),
                }
            }
            if n < RECV_BATCH {
                break;
            }
        }
        read
    }

    /// Reads the X-FD socket (at most `max` datagrams); also whether it is
    /// now empty.
    fn receive_fd(&mut self, max: usize, input: &mut dyn FnMut(Input<'_>)) -> (usize, bool) {
        let me = self.me;
        let (stats, detector, peers, batch) = (
            &self.stats,
            &mut self.detector,
            &mut self.peers,
            &mut self.batch,
        );
        let mut read = 0;
        while read < max {
            let n = match self.fd_sock.recv_batch(batch) {
                Ok(n) => n,
                Err(_) => return (read, true),
            };
            read += n;
            for j in 0..n {
                let Some((st, bytes)) = batch.get(j) else {
                    break;
                };
                let got = st.received;
                if got.truncated {
                    detector.note_malformed();
                    LaneStats::add(&stats.refused_frames, 1);
                    continue;
                }
                // Validated once. The heartbeat first (arrival stamped before
                // anything else is done), then the notices of an accepted frame
                // only: replays and strangers are refused by the detector.
                let Ok(frame) = Frame::new_checked(bytes) else {
                    // The detector counts it as it counts any bad heartbeat.
                    let _ = detector.on_lane_datagram(got.rx_ns, got.src, bytes);
                    LaneStats::add(&stats.refused_frames, 1);
                    continue;
                };
                let Ok(i) = detector.on_lane_frame(got.rx_ns, got.src, &frame) else {
                    LaneStats::add(&stats.refused_frames, 1);
                    continue;
                };
                let Some(p) = peers.get_mut(i) else {
                    continue;
                };
                p.notice_stream.frame(frame.header().seq);
                for c in frame.chunks().flatten() {
                    if c.producer != NOTICE_PRODUCER {
                        continue;
                    }
                    let Ok(Some(n)) = p.notice_stream.push(c.data) else {
                        continue;
                    };
                    // Notice = to:u16 LE | raft datagram; the frame goes to
                    // every peer, each keeps its own.
                    if n.len() > 2 && u16::from_le_bytes([n[0], n[1]]) as u64 == me {
                        LaneStats::add(&stats.notices_received, 1);
                        LaneStats::add(&stats.delivered, 1);
                        input(Input::Datagram {
                            from: p.id,
                            bytes: &n[2..],
                        });
                    }
                }
            }
            if n < RECV_BATCH {
                return (read, true);
            }
        }
        (read, false)
    }

    /// Chunks one notice (`to:u16 LE | datagram`) into the X-FD queue, all or
    /// nothing, keeping room for the heartbeat chunk.
    fn enqueue_notice(&mut self, to: u64, bytes: &[u8]) -> bool {
        let len = bytes.len() + 2;
        if bytes.is_empty() || len > MAX_DATAGRAM {
            return false;
        }
        let free = (PeriodicSender::DEFAULT_QUEUE_CAPACITY - 1)
            .saturating_sub(self.fd_tx.sender().pending());
        let (head, rest) = self.scratch.split_at_mut(len);
        head[..2].copy_from_slice(&(to as u16).to_le_bytes());
        head[2..].copy_from_slice(bytes);
        let fd_tx = &mut self.fd_tx;
        enqueue_all(
            head,
            Schema::Chunk26.data_capacity(),
            free,
            rest,
            &mut |c| fd_tx.enqueue(NOTICE_PRODUCER, c).is_ok(),
        )
    }

    /// Sends this period's X-FD frame (the caller checked it is due).
    fn send_fd(&mut self, now: u64) {
        if self.fd_tx.sender().pending_for(FD_PRODUCER) == 0 {
            let p = HeartbeatPayload {
                incarnation: self.incarnation,
                counter: None,
            };
            // One 20-byte chunk; the queue keeps room for it (notices are
            // refused before the last slots).
            let _ = self.fd_tx.enqueue(FD_PRODUCER, &p.encode());
        }
        let Ok(Some(tx)) = self.fd_tx.poll_transmit(now, &mut self.buf) else {
            return;
        };
        self.fd_sendto.clear();
        for d in tx.destinations.iter() {
            if let Some(&a) = self.fd_dsts.get(d) {
                self.fd_sendto.push(a);
            }
        }
        let frame = &mut self.buf[..tx.transmit.len];
        let _ = xlane_wire::stamp_send_time(frame, realtime_ns());
        let ok = self.fd_sock.send_many(frame, &self.fd_sendto);
        LaneStats::add(&self.stats.send_errors, (self.fd_sendto.len() - ok) as u64);
        LaneStats::add(&self.stats.fd_frames_sent, 1);
    }

    fn handle_events(&mut self, input: &mut dyn FnMut(Input<'_>)) {
        while let Some(ev) = self.detector.next_event() {
            if ev.kind == EventKind::Restarted {
                // A new incarnation numbers its frames from 0 again: forget
                // the old sequence history, or every frame of the restarted
                // member would be refused as stale.
                if let Some(p) = self.peers.get_mut(ev.peer) {
                    p.repl_rx.reset_sequence();
                    p.repl_stream.restart();
                    p.notice_stream.restart();
                    LaneStats::add(&self.stats.restarts, 1);
                }
                continue;
            }
            let EventKind::Suspected(_) = ev.kind else {
                continue;
            };
            let Some(suspect) = self.peers.get(ev.peer).map(|p| p.id) else {
                continue;
            };
            LaneStats::add(&self.stats.suspicions, 1);
            // The lowest live id campaigns; a peer counts as live unless
            // suspected. Nodes that do not suspect the leader keep refusing
            // votes until their own timeout (Raft's guard against a single
            // wrong detector).
            let live_lower = self.peers.iter().enumerate().any(|(i, p)| {
                p.id < self.me
                    && p.id != suspect
                    && self
                        .detector
                        .peer(i)
                        .is_some_and(|v| v.status == Status::Alive)
            });
            let campaign = !live_lower;
            if campaign {
                LaneStats::add(&self.stats.campaigns, 1);
            }
            input(Input::Suspected {
                peer: suspect,
                campaign,
            });
        }
    }

    fn sync_abandoned(&mut self) {
        let total: u64 = self
            .peers
            .iter()
            .map(|p| {
                let (a, b): (StreamStats, StreamStats) =
                    (p.repl_stream.stats(), p.notice_stream.stats());
                a.abandoned + b.abandoned
            })
            .sum();
        if total > self.abandoned_seen {
            LaneStats::add(&self.stats.abandoned, total - self.abandoned_seen);
            self.abandoned_seen = total;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tunnel_ids_are_distinct_per_direction() {
        let a = repl_params(1, 2, 1000).tunnel;
        let b = repl_params(2, 1, 1000).tunnel;
        assert_ne!(a, b);
        assert_eq!(
            repl_params(4095, 4095, 1).tunnel,
            REPL_TUNNEL_BASE + 4095 * 4096 + 4095
        );
        const { assert!(FD_TUNNEL_BASE + 4095 < REPL_TUNNEL_BASE) };
    }

    #[test]
    fn bad_configurations_are_refused() {
        let a: SocketAddr = "127.0.0.1:7001".parse().unwrap();
        let b: SocketAddr = "127.0.0.1:7003".parse().unwrap();
        let t = LaneTiming::default();
        let err =
            |r: Result<LaneLink, LaneError>| r.err().map(|e| e.to_string()).unwrap_or_default();
        assert!(err(LaneLink::new(1, a, &[(1, a)], t)).contains("at least one other"));
        assert!(err(LaneLink::new(1, a, &[(1, a), (5000, b)], t)).contains("1..4096"));
        let v6: SocketAddr = "[::1]:7005".parse().unwrap();
        assert!(err(LaneLink::new(1, a, &[(1, a), (2, v6)], t)).contains("IPv4"));
        let top: SocketAddr = "127.0.0.1:65535".parse().unwrap();
        assert!(err(LaneLink::new(1, a, &[(1, a), (2, top)], t)).contains("port"));
        let zero = LaneTiming {
            repl_period_ns: 0,
            ..t
        };
        assert!(err(LaneLink::new(1, a, &[(1, a), (2, b)], zero)).contains("> 0"));
    }
}
