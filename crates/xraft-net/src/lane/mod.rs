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
//! * **Authenticated frames** ([`LaneKeys`]: a group key from a cluster
//!   key file, or each tree's own key from the controller): every frame of
//!   both trees carries a MAC trailer ([`xlane_auth`], sealed for any
//!   receiver: one frame goes to every peer), and a frame
//!   is opened before anything reads it: one that is forged, replayed,
//!   unkeyed, or sealed by another member than the one at its source
//!   address is counted ([`LaneStats::unauthenticated`]) and dropped, so
//!   neither the detector nor raft sees it. Frames are then at most
//!   [`SEALED_FRAME_LEN`] bytes, so that frame and trailer fit one
//!   datagram.
//!
//! Raft's regular traffic (snapshots, messages over the bulk threshold)
//! stays on TCP ([`crate::net`]). Tunnel ids: X-FD of node `i` is
//! `FD_TUNNEL_BASE + i`, replication from `i` to `j` is
//! `REPL_TUNNEL_BASE + i·4096 + j`, so node ids must be below 4096.

use crate::auth::NetAuth;
use crate::chunk_stream::{enqueue_all, StreamReassembler, StreamStats};
use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::os::fd::RawFd;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use xlane_auth::{Key, KeyRing, Opener, Sealer, ANY_RECEIVER, TRAILER_LEN};
use xlane_ctl::fabric::group_of;
use xlane_fd::{
    Anchor, Detector, DetectorConfig, EventKind, FixedTimeout, HeartbeatPayload, PeerSpec, Status,
    XFd, FD_PRODUCER,
};
use xlane_host::batch::{RecvBatch, RECV_BATCH};
use xlane_host::lane_loop::stamp_frame;
use xlane_host::socket::{realtime_ns, LaneSocket, SocketConfig, EXPRESS_PRIORITY};
use xlane_lane::{first_slot_after, TunnelParams, MAX_RECEIVERS};
use xlane_lane::{PeriodicMulticastSender, PeriodicReceiver, PeriodicSender, Replication};
use xlane_wire::{Frame, Schema, MAX_FRAME_LEN};
use xlane_xraft::{Input, Readiness, TrafficClass};

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

/// The keys a lane link seals and opens its frames with.
#[derive(Debug, Clone)]
pub struct LaneKeys {
    /// The keys accepted.
    pub ring: KeyRing,
    /// The key this member's X-FD tree seals with.
    pub fd: u32,
    /// The key its replication tree seals with.
    pub repl: u32,
}

impl LaneKeys {
    /// One group key for both trees (a cluster key file).
    pub fn group(a: &NetAuth) -> LaneKeys {
        LaneKeys {
            ring: a.ring.clone(),
            fd: a.key_id,
            repl: a.key_id,
        }
    }

    /// Each tree's own key, id = its tunnel id (the controller's
    /// `TunnelKey`): this member's two trees and every tree it receives.
    pub fn trees(own: TreeIds, keys: &[(u32, Key)]) -> LaneKeys {
        LaneKeys {
            ring: KeyRing::from_pairs(keys),
            fd: own.fd,
            repl: own.repl,
        }
    }
}

/// The MAC state of an authenticated link: a sealer per tree (each its
/// own sequence), an opener per socket (each its own replay windows).
struct LinkAuth {
    repl: Sealer,
    fd: Sealer,
    repl_open: Opener,
    fd_open: Opener,
}

/// Opens `bytes` with `o` (when sealed) as a frame of member `from`
/// (`None`: any member, checked by the caller): the payload, or `None`
/// when it must be dropped.
fn open_frame<'a>(o: Option<&mut Opener>, bytes: &'a [u8]) -> Option<(&'a [u8], Option<u64>)> {
    match o {
        None => Some((bytes, None)),
        Some(o) => o
            .open(bytes, ANY_RECEIVER)
            .ok()
            .map(|x| (x.payload, Some(u64::from(x.sender)))),
    }
}

mod control;
#[cfg(test)]
mod tests;

pub use control::*;

struct PeerLink {
    id: u64,
    repl_addr: SocketAddrV4,
    trees: TreeIds,
    repl_rx: PeriodicReceiver,
    repl_stream: StreamReassembler,
    notice_stream: StreamReassembler,
}

/// The lane link of one node (see the module docs): a [`xlane_xraft::Transport`]'s
/// express half, polled by the raft driver's thread.
pub struct LaneLink {
    me: u64,
    /// In the detector's order: peer `i` is the detector's peer `i` and, with
    /// sender replication, destination `i` of both trees.
    peers: Vec<PeerLink>,
    repl_sock: LaneSocket,
    fd_sock: LaneSocket,
    fds: [RawFd; 2],
    repl_tx: PeriodicMulticastSender,
    fd_tx: PeriodicMulticastSender,
    /// Every peer's replication and X-FD address, in peer order.
    repl_dsts: Vec<SocketAddrV4>,
    fd_dsts: Vec<SocketAddrV4>,
    /// The destinations of one frame (reused).
    sendto: Vec<SocketAddrV4>,
    detector: XFd,
    incarnation: u64,
    /// The interface address multicast groups are joined on (network
    /// replication only).
    multicast_if: Option<Ipv4Addr>,
    stats: Arc<LaneStats>,
    control: Arc<LaneControl>,
    /// The earliest time the replication tree may send its backlog
    /// (`u64::MAX`: no backlog).
    repl_next: u64,
    /// With sender replication: the peers (bit = index) that datagrams
    /// queued since the replication queue was last empty are for. A frame
    /// goes to them only, so a member is not woken by frames that carry
    /// nothing for it; one that misses a frame sees a gap in the tree's
    /// sequence, which costs it nothing (its stream had no datagram in
    /// progress: that would have kept it in the set).
    repl_to: u64,
    buf: Vec<u8>,
    scratch: Vec<u8>,
    batch: Box<RecvBatch>,
    abandoned_seen: u64,
    auth: Option<LinkAuth>,
    /// Largest frame of either tree ([`SEALED_FRAME_LEN`] when sealed).
    frame_cap: usize,
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

/// A peer's replication tree as this member receives it: its tunnel, any
/// frame up to the largest (σ is the network's to police).
fn repl_rx_params(tunnel: u32, period_ns: u64) -> TunnelParams {
    TunnelParams {
        tunnel,
        period_ns,
        max_packet: MAX_FRAME_LEN,
        schema: Schema::Chunk36,
    }
}

/// An express socket on `addr`; with `multicast_if`, bound to the wildcard
/// address on `addr`'s port (to see the groups it joins) and sending
/// multicast from that interface.
fn open(
    addr: SocketAddrV4,
    dscp: u8,
    priority: u32,
    multicast_if: Option<Ipv4Addr>,
) -> Result<LaneSocket, LaneError> {
    let mut sc = SocketConfig::express(addr);
    if let Some(ifaddr) = multicast_if {
        sc.bind = SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, addr.port());
        sc.multicast_if = Some(ifaddr);
    }
    sc.dscp = dscp;
    sc.priority = priority;
    sc.nonblocking = true;
    sc.rx_timestamps = true;
    sc.rcvbuf = 4 << 20;
    LaneSocket::open(&sc).map_err(|source| LaneError::Socket { addr, source })
}

/// Whether the lane can serve member `id` at raft address `addr`: an id
/// in `1..MAX_NODE_ID`, an IPv4 address whose port leaves room for the X-FD
/// port, and, with network replication (`same_port`), this member's raft
/// port. What [`LaneLink::add_peer`] checks first; a member about to be
/// added to a running cluster can be checked the same way.
pub fn check_peer(id: u64, addr: SocketAddr, same_port: Option<u16>) -> Result<(), LaneError> {
    if id == 0 || id >= MAX_NODE_ID {
        return Err(LaneError::Config(format!(
            "node id {id}: lane mode needs ids in 1..{MAX_NODE_ID}"
        )));
    }
    fd_addr(v4(addr, "raft address")?)?;
    if let Some(port) = same_port.filter(|&p| p != addr.port()) {
        return Err(LaneError::Config(format!(
            "network replication sends one frame to every member's port: member {id} \
             uses raft port {}, this one {port}",
            addr.port()
        )));
    }
    Ok(())
}

/// With sender replication, makes destinations `0..n` of a tree (sized for
/// [`MAX_RECEIVERS`]) the active ones; with network replication there is
/// one destination, the group, whoever joined it.
fn set_receivers(tx: &mut PeriodicMulticastSender, n: usize) {
    set_receiver_mask(tx, u64::MAX, n);
}

/// With sender replication, makes the destinations among `0..n` whose bit
/// is set in `mask` the active ones, and every other one inactive; with
/// network replication, nothing (the group is the one destination).
fn set_receiver_mask(tx: &mut PeriodicMulticastSender, mask: u64, n: usize) {
    if tx.mode() == Replication::Network {
        return;
    }
    for i in 0..MAX_RECEIVERS {
        // Every index is inside the tree's receiver set.
        let _ = tx.set_receiver(i, i < n && mask & (1 << i) != 0);
    }
}

/// Leaves the group of tree `old` and joins that of tree `new` on `sock`
/// (network replication, `multicast_if` set; otherwise nothing). False if
/// the join failed.
fn move_group(sock: &LaneSocket, multicast_if: Option<Ipv4Addr>, old: u32, new: u32) -> bool {
    let Some(ifaddr) = multicast_if else {
        return true;
    };
    let _ = sock.leave_group(group_of(old as u64), ifaddr);
    sock.join_group(group_of(new as u64), ifaddr).is_ok()
}

impl LaneLink {
    /// Opens the two sockets of node `me` (binding `bind`, its raft address,
    /// and `bind` port + 1) and sets up its two trees and a receiver per
    /// peer. `peers`: every member's raft address, this node included;
    /// `trees`: the members' tree ids (those missing use
    /// [`TreeIds::default_for`]); `keys`: what seals and opens every
    /// frame (see the module docs).
    pub fn new(
        me: u64,
        bind: SocketAddr,
        peers: &[(u64, SocketAddr)],
        timing: LaneTiming,
        trees: &BTreeMap<u64, TreeIds>,
        keys: Option<&LaneKeys>,
    ) -> Result<Self, LaneError> {
        let auth = match keys {
            None => None,
            Some(k) => {
                let key = |id: u32| {
                    k.ring
                        .get(id)
                        .cloned()
                        .ok_or_else(|| LaneError::Config(format!("no key {id} to seal with")))
                };
                // Node ids are below MAX_NODE_ID (checked next).
                let sender = me.min(MAX_NODE_ID) as u32;
                Some(LinkAuth {
                    repl: Sealer::new(k.repl, key(k.repl)?, sender),
                    fd: Sealer::new(k.fd, key(k.fd)?, sender),
                    repl_open: Opener::new(k.ring.clone()),
                    fd_open: Opener::new(k.ring.clone()),
                })
            }
        };
        let frame_cap = if auth.is_some() {
            SEALED_FRAME_LEN
        } else {
            MAX_FRAME_LEN
        };
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
        let ids = |id: u64| trees.get(&id).copied().unwrap_or(TreeIds::default_for(id));
        let bind = v4(bind, "raft bind address")?;
        let multicast_if = if timing.multicast {
            if bind.ip().is_unspecified() {
                return Err(LaneError::Config(
                    "network replication needs the member's own address to bind, not 0.0.0.0"
                        .into(),
                ));
            }
            if let Some((id, a)) = peers.iter().find(|(_, a)| a.port() != bind.port()) {
                return Err(LaneError::Config(format!(
                    "network replication sends one frame to every member's port: member {id} \
                     uses raft port {}, this one {}",
                    a.port(),
                    bind.port()
                )));
            }
            Some(*bind.ip())
        } else {
            None
        };
        let now = realtime_ns();
        let mut links = Vec::new();
        let mut specs = Vec::new();
        let (mut repl_dsts, mut fd_dsts) = (Vec::new(), Vec::new());
        for &(id, addr) in peers.iter().filter(|(id, _)| *id != me) {
            let repl_addr = v4(addr, "raft address")?;
            let fd = fd_addr(repl_addr)?;
            let t = ids(id);
            links.push(PeerLink {
                id,
                repl_addr,
                trees: t,
                repl_rx: PeriodicReceiver::new(repl_rx_params(t.repl, timing.repl_period_ns)),
                repl_stream: StreamReassembler::new(MAX_DATAGRAM),
                notice_stream: StreamReassembler::new(MAX_DATAGRAM),
            });
            specs.push(PeerSpec {
                addr: fd,
                tunnel: t.fd,
            });
            repl_dsts.push(repl_addr);
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
        let mine = ids(me);
        // Sender replication: room for every member there may be (they
        // change at run time); the members there are now are the active ones.
        let mode = if multicast_if.is_some() {
            Replication::Network
        } else {
            Replication::Sender {
                receivers: MAX_RECEIVERS,
            }
        };
        let tree = |tunnel, period_ns, max_packet: usize, schema, what: &str| {
            let capacity = if schema == Schema::Chunk36 {
                REPL_QUEUE_CHUNKS
            } else {
                PeriodicSender::DEFAULT_QUEUE_CAPACITY
            };
            PeriodicMulticastSender::with_capacity(
                TunnelParams {
                    tunnel,
                    period_ns,
                    max_packet: max_packet.min(frame_cap),
                    schema,
                },
                first_slot_after(now, period_ns),
                mode,
                capacity,
            )
            .map(|mut tx| {
                set_receivers(&mut tx, links.len());
                tx
            })
            .map_err(|e| LaneError::Config(format!("{what} tree: {e}")))
        };
        let fd_tx = tree(
            mine.fd,
            timing.fd_period_ns,
            timing.fd_frame_bytes,
            Schema::Chunk26,
            "X-FD",
        )?;
        let repl_tx = tree(
            mine.repl,
            timing.repl_period_ns,
            timing.repl_frame_bytes,
            Schema::Chunk36,
            "replication",
        )?;
        let repl_sock = open(bind, REPL_DSCP, EXPRESS_PRIORITY - 1, multicast_if)?;
        let fd_bind = fd_addr(bind)?;
        let fd_sock = open(fd_bind, FD_DSCP, EXPRESS_PRIORITY, multicast_if)?;
        if let Some(ifaddr) = multicast_if {
            // One frame per tree to its group; the peers' groups joined.
            repl_dsts = vec![SocketAddrV4::new(group_of(mine.repl as u64), bind.port())];
            fd_dsts = vec![SocketAddrV4::new(group_of(mine.fd as u64), fd_bind.port())];
            for p in &links {
                let join = |sock: &LaneSocket, tunnel: u32| {
                    sock.join_group(group_of(tunnel as u64), ifaddr)
                        .map_err(|source| LaneError::Socket {
                            addr: SocketAddrV4::new(group_of(tunnel as u64), bind.port()),
                            source,
                        })
                };
                join(&repl_sock, p.trees.repl)?;
                join(&fd_sock, p.trees.fd)?;
            }
        }
        let fds = [repl_sock.as_raw_fd(), fd_sock.as_raw_fd()];
        let n = links.len();
        Ok(LaneLink {
            me,
            peers: links,
            repl_sock,
            fd_sock,
            fds,
            repl_tx,
            fd_tx,
            repl_dsts,
            fd_dsts,
            sendto: Vec::with_capacity(n),
            detector,
            incarnation: now,
            multicast_if,
            stats: Arc::new(LaneStats::default()),
            control: Arc::new(LaneControl::new(&timing)),
            repl_next: u64::MAX,
            repl_to: 0,
            buf: vec![0u8; MAX_FRAME_LEN],
            scratch: vec![0u8; MAX_DATAGRAM + 64],
            batch: Box::new(RecvBatch::new()),
            abandoned_seen: 0,
            auth,
            frame_cap,
        })
    }

    /// Starts serving a member that joined, `id` at raft address `addr`:
    /// both trees reach it from now on (with network replication: its trees'
    /// groups are joined), its replication tree is received and its X-FD
    /// heartbeats watched (it is `Unknown` to the detector until the first).
    /// Its trees have [`TreeIds::default_for`] ids until
    /// [`LaneControl::set_peer_trees`] says otherwise. Allocates (not for the
    /// hot path).
    pub fn add_peer(&mut self, id: u64, addr: SocketAddr) -> Result<(), LaneError> {
        if id == self.me || self.peers.iter().any(|p| p.id == id) {
            return Err(LaneError::Config(format!("node {id} is already linked")));
        }
        let same_port = match self.multicast_if {
            Some(_) => self.repl_sock.local_addr().map(|a| a.port()).ok(),
            None => None,
        };
        check_peer(id, addr, same_port)?;
        if self.peers.len() >= MAX_RECEIVERS {
            return Err(LaneError::Config(format!(
                "the lane link serves at most {} members",
                MAX_RECEIVERS + 1
            )));
        }
        let repl_addr = v4(addr, "raft address")?;
        let fd = fd_addr(repl_addr)?;
        let t = TreeIds::default_for(id);
        if let Some(ifaddr) = self.multicast_if {
            let join = |sock: &LaneSocket, tunnel: u32, port: u16| {
                sock.join_group(group_of(tunnel as u64), ifaddr)
                    .map_err(|source| LaneError::Socket {
                        addr: SocketAddrV4::new(group_of(tunnel as u64), port),
                        source,
                    })
            };
            join(&self.repl_sock, t.repl, repl_addr.port())?;
            if let Err(e) = join(&self.fd_sock, t.fd, fd.port()) {
                let _ = self.repl_sock.leave_group(group_of(t.repl as u64), ifaddr);
                return Err(e);
            }
        }
        let (repl_period, _) = self.control.tree(Tree::Repl);
        let (fd_period, _) = self.control.tree(Tree::Fd);
        let spec = PeerSpec {
            addr: fd,
            tunnel: t.fd,
        };
        let model = FixedTimeout::new(fd_period, Anchor::Arrival);
        if let Err(e) = self.detector.add_peer(spec, model) {
            self.leave_groups(t);
            return Err(LaneError::Config(format!("X-FD peer {id}: {e}")));
        }
        self.peers.push(PeerLink {
            id,
            repl_addr,
            trees: t,
            repl_rx: PeriodicReceiver::new(repl_rx_params(t.repl, repl_period)),
            repl_stream: StreamReassembler::new(MAX_DATAGRAM),
            notice_stream: StreamReassembler::new(MAX_DATAGRAM),
        });
        if self.multicast_if.is_none() {
            self.repl_dsts.push(repl_addr);
            self.fd_dsts.push(fd);
        }
        let n = self.peers.len();
        set_receivers(&mut self.repl_tx, n);
        set_receivers(&mut self.fd_tx, n);
        // Indices moved: what is queued goes to everyone.
        self.repl_to = u64::MAX;
        Ok(())
    }

    /// Stops serving member `id` (one that left): the trees no longer reach
    /// it (with network replication: its groups are left) and its frames are
    /// refused; what is queued for it is still sent (to the others, who drop
    /// it). False if it was not linked.
    pub fn remove_peer(&mut self, id: u64) -> bool {
        let Some(i) = self.peers.iter().position(|p| p.id == id) else {
            return false;
        };
        let gone = self.peers.remove(i);
        if self.multicast_if.is_some() {
            self.leave_groups(gone.trees);
        } else {
            self.repl_dsts.remove(i);
            self.fd_dsts.remove(i);
        }
        self.detector.remove_peer(i);
        let n = self.peers.len();
        set_receivers(&mut self.repl_tx, n);
        set_receivers(&mut self.fd_tx, n);
        // Indices moved: what is queued goes to everyone.
        self.repl_to = u64::MAX;
        true
    }

    /// Leaves the groups of a peer's trees (network replication only).
    fn leave_groups(&self, t: TreeIds) {
        if let Some(ifaddr) = self.multicast_if {
            let _ = self.repl_sock.leave_group(group_of(t.repl as u64), ifaddr);
            let _ = self.fd_sock.leave_group(group_of(t.fd as u64), ifaddr);
        }
    }

    /// The linked members' ids, in the detector's order.
    pub fn peer_ids(&self) -> impl Iterator<Item = u64> + '_ {
        self.peers.iter().map(|p| p.id)
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
    /// deadline or free window of the replication tree while it has a
    /// backlog (`CLOCK_REALTIME` ns).
    pub fn next_deadline(&self) -> u64 {
        self.fd_tx
            .poll_timeout()
            .min(self.detector.next_deadline().unwrap_or(u64::MAX))
            .min(self.repl_next)
    }

    /// Queues one raft datagram to `to`: a commit notice waits for the next
    /// X-FD heartbeat; anything else goes on the replication tree at the
    /// next [`LaneLink::flush`] if its window is free, else at the next
    /// window (the driver's next poll). A full queue, or an unknown `to`,
    /// drops the datagram (Raft retransmits).
    pub fn send(&mut self, to: u64, class: TrafficClass, bytes: &[u8]) {
        let Some(i) = self.peers.iter().position(|p| p.id == to) else {
            LaneStats::add(&self.stats.dropped, 1);
            return;
        };
        let notice = class == TrafficClass::Notice;
        if !notice {
            self.repl_to |= 1 << i;
        }
        let queued = if notice {
            enqueue_to(
                &mut self.fd_tx,
                NOTICE_PRODUCER,
                to,
                bytes,
                1,
                &mut self.scratch,
            )
        } else {
            enqueue_to(
                &mut self.repl_tx,
                RAFT_PRODUCER,
                to,
                bytes,
                0,
                &mut self.scratch,
            )
        };
        if !queued {
            LaneStats::add(&self.stats.dropped, 1);
            return;
        }
        if notice {
            LaneStats::add(&self.stats.notices_sent, 1);
        }
    }

    /// Sends the replication tree's frame if its window is free: what one
    /// Ready queued for several peers leaves in one frame. What does not go
    /// now waits for the next window (counted as deferred).
    pub fn flush(&mut self) {
        self.flush_repl(realtime_ns());
        if self.repl_tx.sender().pending() > 0 {
            LaneStats::add(&self.stats.deferred, 1);
        }
    }

    /// One poll at `now`: reads at most `max` datagrams from each socket
    /// (replication first: it is what a write waits for), sends the backlog
    /// whose window came and the heartbeat if due, and hands raft datagrams
    /// and X-FD verdicts to `input`. Returns the datagrams read.
    pub fn poll(
        &mut self,
        now: u64,
        max: usize,
        ready: Readiness,
        input: &mut dyn FnMut(Input<'_>),
    ) -> usize {
        let lambda = self.control.fd_lambda_ns() as f64;
        if lambda != self.detector.threshold() {
            let _ = self.detector.set_threshold(lambda);
        }
        if self.control.changed.swap(false, Ordering::AcqRel) {
            self.apply_changes(now);
        }
        // A socket that was not readable when the driver woke is left
        // unread: it was empty at `ready.at_ns`.
        let mut read = 0;
        if ready.readable(0) {
            read += self.receive_repl(max, input);
        }
        let (checked, fd_empty) = if ready.readable(1) {
            let checked = realtime_ns();
            let (n, empty) = self.receive_fd(max, input);
            read += n;
            (checked, empty)
        } else {
            (ready.at_ns, true)
        };
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

    /// Takes what [`LaneControl`] was told (rare; may allocate).
    fn apply_changes(&mut self, now: u64) {
        let pending = match self.control.pending.lock() {
            Ok(mut p) => std::mem::take(&mut *p),
            Err(_) => return,
        };
        for r in pending.retunes {
            let (tx, now_of) = match r.tree {
                Tree::Fd => (&mut self.fd_tx, &self.control.fd_now),
                Tree::Repl => (&mut self.repl_tx, &self.control.repl_now),
            };
            let from = first_slot_after(now, r.period_ns).max(tx.sender().clock().next_free());
            if tx
                .sender_mut()
                .retune(r.period_ns, r.frame_bytes.min(self.frame_cap), from)
                .is_ok()
            {
                now_of.0.store(r.period_ns, Ordering::Release);
                now_of.1.store(r.frame_bytes as u64, Ordering::Release);
                LaneStats::add(&self.stats.retunes, 1);
            }
        }
        if let Some(a) = self.auth.as_mut() {
            for (id, key) in pending.keys {
                a.repl_open.add_key(id, key.clone());
                a.fd_open.add_key(id, key);
            }
        }
        if let Some(trees) = pending.peer_trees {
            for (i, p) in self.peers.iter_mut().enumerate() {
                let Some(&t) = trees.get(&p.id) else {
                    continue;
                };
                if t.repl != p.trees.repl {
                    let period = p.repl_rx.params().period_ns;
                    p.repl_rx = PeriodicReceiver::new(repl_rx_params(t.repl, period));
                    p.repl_stream.restart();
                    if !move_group(&self.repl_sock, self.multicast_if, p.trees.repl, t.repl) {
                        LaneStats::add(&self.stats.send_errors, 1);
                    }
                }
                if t.fd != p.trees.fd {
                    self.detector.set_peer_tunnel(i, t.fd);
                    p.notice_stream.restart();
                    if !move_group(&self.fd_sock, self.multicast_if, p.trees.fd, t.fd) {
                        LaneStats::add(&self.stats.send_errors, 1);
                    }
                }
                p.trees = t;
            }
        }
    }

    /// Sends the replication tree's frame if its window is free and it has
    /// chunks pending, and notes when the backlog may go next.
    fn flush_repl(&mut self, now: u64) {
        let tx = &mut self.repl_tx;
        if tx.sender().pending() == 0 {
            self.repl_next = u64::MAX;
            return;
        }
        if now >= tx.sender().clock().next_free() {
            set_receiver_mask(tx, self.repl_to, self.repl_dsts.len());
            if let Ok(t) = tx.transmit_now(now, &mut self.buf) {
                self.sendto.clear();
                for d in t.destinations.iter() {
                    if let Some(&a) = self.repl_dsts.get(d) {
                        self.sendto.push(a);
                    }
                }
                // Frames leave room for the trailer (`frame_cap`).
                let sealer = self.auth.as_mut().map(|a| &mut a.repl);
                let len = stamp_frame(&mut self.buf, t.transmit.len, sealer);
                let ok = self.repl_sock.send_many(&self.buf[..len], &self.sendto);
                LaneStats::add(&self.stats.send_errors, (self.sendto.len() - ok) as u64);
                LaneStats::add(&self.stats.repl_frames_sent, 1);
            }
        }
        self.repl_next = if tx.sender().pending() > 0 {
            tx.sender().clock().next_free()
        } else {
            self.repl_to = 0;
            u64::MAX
        };
    }

    /// Reads the replication socket (at most `max` datagrams).
    fn receive_repl(&mut self, max: usize, input: &mut dyn FnMut(Input<'_>)) -> usize {
        let me = self.me;
        let (stats, peers, batch) = (&self.stats, &mut self.peers, &mut self.batch);
        let mut opener = self.auth.as_mut().map(|a| &mut a.repl_open);
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
                // The MAC before anything reads the frame.
                let bytes = match open_frame(opener.as_deref_mut(), bytes) {
                    Some((b, None)) => b,
                    Some((b, Some(sender))) if sender == p.id => b,
                    _ => {
                        LaneStats::add(&stats.unauthenticated, 1);
                        continue;
                    }
                };
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
                        // to:u16 LE | raft datagram; the frame goes to every
                        // peer, each keeps its own.
                        if dg.len() > 2 && u16::from_le_bytes([dg[0], dg[1]]) as u64 == me {
                            LaneStats::add(&stats.delivered, 1);
                            input(Input::Datagram {
                                from: *id,
                                bytes: &dg[2..],
                            });
                        }
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
        let mut opener = self.auth.as_mut().map(|a| &mut a.fd_open);
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
                // The MAC before anything reads the frame: the detector
                // sees only frames a member sealed from its own address.
                let bytes = match open_frame(opener.as_deref_mut(), bytes) {
                    Some((b, None)) => b,
                    Some((b, Some(sender)))
                        if peers
                            .iter()
                            .any(|p| p.id == sender && p.repl_addr.ip() == got.src.ip()) =>
                    {
                        b
                    }
                    _ => {
                        LaneStats::add(&stats.unauthenticated, 1);
                        continue;
                    }
                };
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
                    // Notice = to:u16 LE | raft datagram.
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

    /// Sends this period's X-FD frame (the caller checked it is due).
    fn send_fd(&mut self, now: u64) {
        if self.fd_tx.sender().pending_for(FD_PRODUCER) == 0 {
            let p = HeartbeatPayload {
                incarnation: self.incarnation,
                counter: None,
            };
            // One 20-byte chunk; the queue keeps room for it (notices are
            // refused before the last slot).
            let _ = self.fd_tx.enqueue(FD_PRODUCER, &p.encode());
        }
        let Ok(Some(tx)) = self.fd_tx.poll_transmit(now, &mut self.buf) else {
            return;
        };
        self.sendto.clear();
        for d in tx.destinations.iter() {
            if let Some(&a) = self.fd_dsts.get(d) {
                self.sendto.push(a);
            }
        }
        let sealer = self.auth.as_mut().map(|a| &mut a.fd);
        let len = stamp_frame(&mut self.buf, tx.transmit.len, sealer);
        let ok = self.fd_sock.send_many(&self.buf[..len], &self.sendto);
        LaneStats::add(&self.stats.send_errors, (self.sendto.len() - ok) as u64);
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

/// Chunks one datagram for `to` (`to:u16 LE | datagram`) into a tree's
/// queue under `producer`, all or nothing, leaving `keep` slots free (the
/// X-FD tree keeps one for its heartbeat).
fn enqueue_to(
    tx: &mut PeriodicMulticastSender,
    producer: u8,
    to: u64,
    bytes: &[u8],
    keep: usize,
    scratch: &mut [u8],
) -> bool {
    let len = bytes.len() + 2;
    if bytes.is_empty() || len > MAX_DATAGRAM || scratch.len() < len + 64 {
        return false;
    }
    let capacity = if producer == RAFT_PRODUCER {
        REPL_QUEUE_CHUNKS
    } else {
        PeriodicSender::DEFAULT_QUEUE_CAPACITY
    };
    let free = (capacity - keep).saturating_sub(tx.sender().pending());
    let (head, rest) = scratch.split_at_mut(len);
    head[..2].copy_from_slice(&(to as u16).to_le_bytes());
    head[2..].copy_from_slice(bytes);
    let schema = tx.sender().params().schema;
    enqueue_all(head, schema.data_capacity(), free, rest, &mut |c| {
        tx.enqueue(producer, c).is_ok()
    })
}
