//! X-Raft over the lane: the express transport of a member when a cluster
//! runs with `--transport lane`.
//!
//! The [`LaneLink`] owns two express sockets, each both a tree's sender
//! and a receiver of one [`LaneLoop`] (the lane's one driver; the
//! sans-IO ends it drives are in `ends`), and is polled by the raft
//! driver's own thread ([`xlane_xraft::driver`]): the driver waits on the
//! two sockets until the loop's next deadline (a frame's window, an X-FD
//! heartbeat, a detector deadline), so a raft datagram crosses no thread
//! between the socket and the node, and a frame leaves at its slot from
//! the driver thread. Per poll the work is one turn of the loop over the
//! sockets the driver found readable (at most its budget of datagrams per
//! socket, one frame per tree) and nothing is
//! allocated on the receive and send paths except the datagrams raft
//! itself hands in.
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
use crate::chunk_stream::{enqueue_all, StreamReassembler};
use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::os::fd::RawFd;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use xlane_auth::{Key, KeyRing, Opener, Sealer};
use xlane_ctl::fabric::group_of;
use xlane_fd::{Anchor, Detector, DetectorConfig, EventKind, FixedTimeout, PeerSpec, Status};
use xlane_host::lane_loop::{
    LaneLoop, ReceiverEnd, ReceiverId, ReceiverSpec, SenderId, SenderSpec,
};
use xlane_host::socket::{realtime_ns, LaneSocket, SocketConfig, EXPRESS_PRIORITY};
use xlane_lane::{
    first_slot_after, Destinations, PeriodicReceiver, PeriodicSender, TunnelParams, MAX_RECEIVERS,
};
use xlane_wire::{Schema, MAX_FRAME_LEN};
use xlane_xraft::{Input, Readiness, TrafficClass};

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

mod control;
mod ends;
#[cfg(test)]
mod sim_tests;
#[cfg(test)]
mod tests;

pub use control::*;
use ends::{FdPeer, FdSink, Inbox, LinkFill, LinkSink, ReplPeer, ReplSink};

/// The lane link of one node (see the module docs): a [`xlane_xraft::Transport`]'s
/// express half, polled by the raft driver's thread. Its two trees and two
/// sockets are the ends of one [`LaneLoop`] the driver's thread embeds.
pub struct LaneLink {
    me: u64,
    lane: LaneLoop<LinkFill, LinkSink>,
    repl_tx: SenderId,
    fd_tx: SenderId,
    repl_rx: ReceiverId,
    fd_rx: ReceiverId,
    /// The two sockets (replication, X-FD): the driver waits on them and
    /// says which were readable, so a turn reads them without asking epoll.
    fds: [RawFd; 2],
    /// The interface address multicast groups are joined on (network
    /// replication only).
    multicast_if: Option<Ipv4Addr>,
    stats: Arc<LaneStats>,
    control: Arc<LaneControl>,
    scratch: Vec<u8>,
    abandoned_seen: u64,
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

/// Joins the group of tree `tunnel` on `sock` (its port `port`, for the
/// error) on interface `ifaddr`.
fn join(sock: &LaneSocket, tunnel: u32, port: u16, ifaddr: Ipv4Addr) -> Result<(), LaneError> {
    let group = group_of(tunnel as u64);
    sock.join_group(group, ifaddr)
        .map_err(|source| LaneError::Socket {
            addr: SocketAddrV4::new(group, port),
            source,
        })
}

/// The sealer of a tree whose frames carry key `id` of `k`, for member
/// `me` (below [`MAX_NODE_ID`]).
fn sealer(k: &LaneKeys, id: u32, me: u64) -> Result<Sealer, LaneError> {
    let key = k.ring.get(id).cloned();
    let key = key.ok_or_else(|| LaneError::Config(format!("no key {id} to seal with")))?;
    Ok(Sealer::new(id, key, me.min(MAX_NODE_ID) as u32))
}

/// Both sinks of a link's loop at once (for what changes a peer in both).
fn sinks(
    lane: &mut LaneLoop<LinkFill, LinkSink>,
    repl: ReceiverId,
    fd: ReceiverId,
) -> Option<(&mut ReplSink, &mut FdSink)> {
    match lane.receiver_pair_mut(repl, fd)? {
        (
            ReceiverEnd {
                spec:
                    ReceiverSpec {
                        sink: LinkSink::Repl(r),
                        ..
                    },
                ..
            },
            ReceiverEnd {
                spec:
                    ReceiverSpec {
                        sink: LinkSink::Fd(f),
                        ..
                    },
                ..
            },
        ) => Some((r, f)),
        _ => None,
    }
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
        // A sealer per tree (each its own sequence), an opener per socket
        // (each its own replay windows).
        let (repl_seal, fd_seal) = match keys {
            None => (None, None),
            Some(k) => (Some(sealer(k, k.repl, me)?), Some(sealer(k, k.fd, me)?)),
        };
        let opener = || keys.map(|k| Opener::new(k.ring.clone()));
        let frame_cap = if keys.is_some() {
            SEALED_FRAME_LEN
        } else {
            MAX_FRAME_LEN
        };
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
        let stats = Arc::new(LaneStats::default());
        let (mut repl_peers, mut fd_peers, mut specs) = (Vec::new(), Vec::new(), Vec::new());
        let (mut repl_dsts, mut fd_dsts) = (Vec::new(), Vec::new());
        for &(id, addr) in peers.iter().filter(|(id, _)| *id != me) {
            let repl_addr = v4(addr, "raft address")?;
            let fd = fd_addr(repl_addr)?;
            let t = ids(id);
            repl_peers.push(ReplPeer {
                id,
                addr: repl_addr,
                trees: t,
                rx: PeriodicReceiver::new(repl_rx_params(t.repl, timing.repl_period_ns)),
                stream: StreamReassembler::new(MAX_DATAGRAM),
            });
            fd_peers.push(FdPeer {
                id,
                ip: *repl_addr.ip(),
                notices: StreamReassembler::new(MAX_DATAGRAM),
            });
            specs.push(PeerSpec {
                addr: fd,
                tunnel: t.fd,
            });
            repl_dsts.push(repl_addr);
            fd_dsts.push(fd);
        }
        if repl_peers.is_empty() {
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
        let tree = |tunnel, period_ns, max_packet: usize, schema, what: &str| {
            let capacity = if schema == Schema::Chunk36 {
                REPL_QUEUE_CHUNKS
            } else {
                PeriodicSender::DEFAULT_QUEUE_CAPACITY
            };
            let params = TunnelParams {
                tunnel,
                period_ns,
                max_packet: max_packet.min(frame_cap),
                schema,
            };
            PeriodicSender::with_capacity(params, first_slot_after(now, period_ns), capacity)
                .map_err(|e| LaneError::Config(format!("{what} tree: {e}")))
        };
        let fd_core = tree(
            mine.fd,
            timing.fd_period_ns,
            timing.fd_frame_bytes,
            Schema::Chunk26,
            "X-FD",
        )?;
        let repl_core = tree(
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
            for p in &repl_peers {
                join(&repl_sock, p.trees.repl, bind.port(), ifaddr)?;
                join(&fd_sock, p.trees.fd, fd_bind.port(), ifaddr)?;
            }
        }
        // Each tree sends from the socket its peers receive from (their
        // sinks know a member by the source address).
        let dup = |sock: &LaneSocket, addr| {
            sock.try_clone().map_err(|source| LaneError::Socket {
                addr,
                source: xlane_host::socket::SocketError::Sys {
                    what: "dup",
                    source,
                },
            })
        };
        let (repl_send, fd_send) = (dup(&repl_sock, bind)?, dup(&fd_sock, fd_bind)?);
        let mut lane = LaneLoop::new().map_err(LaneError::Loop)?;
        let repl_tx = lane.add_sender(SenderSpec {
            sock: repl_send,
            core: repl_core,
            dsts: repl_dsts,
            until_ns: u64::MAX,
            fill: LinkFill::Repl {
                // With network replication the group is the one destination.
                to: if multicast_if.is_some() {
                    Destinations::ALL
                } else {
                    Destinations::NONE
                },
                stats: stats.clone(),
                errors: 0,
            },
            seal: repl_seal,
            xdp: None,
        });
        let fd_tx = lane.add_sender(SenderSpec {
            sock: fd_send,
            core: fd_core,
            dsts: fd_dsts,
            until_ns: u64::MAX,
            fill: LinkFill::Fd {
                incarnation: now,
                stats: stats.clone(),
                errors: 0,
            },
            seal: fd_seal,
            xdp: None,
        });
        // The sinks take whole datagrams; the loop's own core for the
        // socket is not used.
        let idle_core = || PeriodicReceiver::new(repl_rx_params(0, timing.repl_period_ns));
        let receiver = |lane: &mut LaneLoop<LinkFill, LinkSink>, sock, sink| {
            lane.add_receiver(ReceiverSpec {
                sock,
                core: idle_core(),
                sink,
                open: None,
                xdp: None,
            })
            .map_err(LaneError::Loop)
        };
        let repl_sink = LinkSink::Repl(ReplSink {
            me,
            peers: repl_peers,
            open: opener(),
            inbox: Inbox::new(),
            stats: stats.clone(),
        });
        let (repl_fd, fd_fd) = (repl_sock.as_raw_fd(), fd_sock.as_raw_fd());
        let repl_rx = receiver(&mut lane, repl_sock, repl_sink)?;
        let fd_sink = LinkSink::Fd(Box::new(FdSink {
            me,
            detector,
            peers: fd_peers,
            open: opener(),
            inbox: Inbox::new(),
            stats: stats.clone(),
        }));
        let fd_rx = receiver(&mut lane, fd_sock, fd_sink)?;
        let fds = [repl_fd, fd_fd];
        Ok(LaneLink {
            me,
            lane,
            repl_tx,
            fd_tx,
            repl_rx,
            fd_rx,
            fds,
            multicast_if,
            stats,
            control: Arc::new(LaneControl::new(&timing)),
            scratch: vec![0u8; MAX_DATAGRAM + 64],
            abandoned_seen: 0,
            frame_cap,
        })
    }

    /// The replication sink (its peers: the link's, in the detector's order).
    fn repl_sink(&mut self) -> Option<&mut ReplSink> {
        match &mut self.lane.receiver_mut(self.repl_rx)?.spec.sink {
            LinkSink::Repl(r) => Some(r),
            LinkSink::Fd(_) => None,
        }
    }

    /// The X-FD sink (its detector).
    fn fd_sink(&mut self) -> Option<&mut FdSink> {
        match &mut self.lane.receiver_mut(self.fd_rx)?.spec.sink {
            LinkSink::Fd(f) => Some(f),
            LinkSink::Repl(_) => None,
        }
    }

    /// Starts serving a member that joined, `id` at raft address `addr`:
    /// both trees reach it from now on (with network replication: its trees'
    /// groups are joined), its replication tree is received and its X-FD
    /// heartbeats watched (it is `Unknown` to the detector until the first).
    /// Its trees have [`TreeIds::default_for`] ids until
    /// [`LaneControl::set_peer_trees`] says otherwise. Allocates (not for the
    /// hot path).
    pub fn add_peer(&mut self, id: u64, addr: SocketAddr) -> Result<(), LaneError> {
        if id == self.me || self.peer_ids().any(|p| p == id) {
            return Err(LaneError::Config(format!("node {id} is already linked")));
        }
        let same_port = match self.multicast_if {
            Some(_) => self.repl_port(),
            None => None,
        };
        check_peer(id, addr, same_port)?;
        if self.peer_ids().count() >= MAX_RECEIVERS {
            return Err(LaneError::Config(format!(
                "the lane link serves at most {} members",
                MAX_RECEIVERS + 1
            )));
        }
        let repl_addr = v4(addr, "raft address")?;
        let fd = fd_addr(repl_addr)?;
        let t = TreeIds::default_for(id);
        if let (Some(ifaddr), Some((repl_sock, fd_sock))) = (self.multicast_if, self.sockets()) {
            join(repl_sock, t.repl, repl_addr.port(), ifaddr)?;
            if let Err(e) = join(fd_sock, t.fd, fd.port(), ifaddr) {
                let _ = repl_sock.leave_group(group_of(t.repl as u64), ifaddr);
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
        let added = match self.fd_sink() {
            Some(f) => f.detector.add_peer(spec, model).map_err(|e| e.to_string()),
            None => Err("no X-FD sink".into()),
        };
        if let Err(e) = added {
            self.leave_groups(t);
            return Err(LaneError::Config(format!("X-FD peer {id}: {e}")));
        }
        if let Some((repl, f)) = sinks(&mut self.lane, self.repl_rx, self.fd_rx) {
            repl.peers.push(ReplPeer {
                id,
                addr: repl_addr,
                trees: t,
                rx: PeriodicReceiver::new(repl_rx_params(t.repl, repl_period)),
                stream: StreamReassembler::new(MAX_DATAGRAM),
            });
            f.peers.push(FdPeer {
                id,
                ip: *repl_addr.ip(),
                notices: StreamReassembler::new(MAX_DATAGRAM),
            });
        }
        if self.multicast_if.is_none() {
            for (tx, a) in [(self.repl_tx, repl_addr), (self.fd_tx, fd)] {
                if let Some(s) = self.lane.sender_mut(tx) {
                    s.spec.dsts.push(a);
                }
            }
        }
        // Indices moved: what is queued goes to everyone.
        self.set_repl_to(Destinations::ALL);
        Ok(())
    }

    /// Stops serving member `id` (one that left): the trees no longer reach
    /// it (with network replication: its groups are left) and its frames are
    /// refused; what is queued for it is still sent (to the others, who drop
    /// it). False if it was not linked.
    pub fn remove_peer(&mut self, id: u64) -> bool {
        let Some(i) = self.peer_ids().position(|p| p == id) else {
            return false;
        };
        let Some((repl, f)) = sinks(&mut self.lane, self.repl_rx, self.fd_rx) else {
            return false;
        };
        let gone = repl.peers.remove(i);
        f.peers.remove(i);
        f.detector.remove_peer(i);
        if self.multicast_if.is_some() {
            self.leave_groups(gone.trees);
        } else {
            for tx in [self.repl_tx, self.fd_tx] {
                if let Some(s) = self.lane.sender_mut(tx) {
                    s.spec.dsts.remove(i);
                }
            }
        }
        // Indices moved: what is queued goes to everyone.
        self.set_repl_to(Destinations::ALL);
        true
    }

    /// The replication and X-FD sockets (the receivers'; the trees send
    /// from duplicates of them). Both receivers are added in `new` and
    /// never removed, so `None` is not seen.
    fn sockets(&self) -> Option<(&LaneSocket, &LaneSocket)> {
        let sock = |id| self.lane.receiver(id).map(|r| &r.spec.sock);
        Some((sock(self.repl_rx)?, sock(self.fd_rx)?))
    }

    /// The raft port the replication socket is bound to.
    fn repl_port(&self) -> Option<u16> {
        self.sockets()?.0.local_addr().map(|a| a.port()).ok()
    }

    /// Leaves the groups of a peer's trees (network replication only).
    fn leave_groups(&self, t: TreeIds) {
        if let (Some(ifaddr), Some((repl, fd))) = (self.multicast_if, self.sockets()) {
            let _ = repl.leave_group(group_of(t.repl as u64), ifaddr);
            let _ = fd.leave_group(group_of(t.fd as u64), ifaddr);
        }
    }

    /// The linked members' ids, in the detector's order.
    pub fn peer_ids(&self) -> impl Iterator<Item = u64> + '_ {
        let peers = match self.lane.receiver(self.repl_rx).map(|r| &r.spec.sink) {
            Some(LinkSink::Repl(r)) => &r.peers[..],
            _ => &[],
        };
        peers.iter().map(|p| p.id)
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
        self.lane.next_deadline().unwrap_or(u64::MAX)
    }

    /// Queues one raft datagram to `to`: a commit notice waits for the next
    /// X-FD heartbeat; anything else goes on the replication tree at the
    /// next [`LaneLink::flush`] if its window is free, else at the next
    /// window (the driver's next poll). A full queue, or an unknown `to`,
    /// drops the datagram (Raft retransmits).
    pub fn send(&mut self, to: u64, class: TrafficClass, bytes: &[u8]) {
        let Some(i) = self.peer_ids().position(|p| p == to) else {
            LaneStats::add(&self.stats.dropped, 1);
            return;
        };
        let notice = class == TrafficClass::Notice;
        let (tx, producer, keep) = if notice {
            (self.fd_tx, NOTICE_PRODUCER, 1)
        } else {
            (self.repl_tx, RAFT_PRODUCER, 0)
        };
        let Some(s) = self.lane.sender_mut(tx) else {
            return;
        };
        // With network replication `to` stays ALL (the group), which
        // already holds every index.
        if let LinkFill::Repl { to, .. } = &mut s.spec.fill {
            to.insert(i);
        }
        if !enqueue_to(
            &mut s.spec.core,
            producer,
            to,
            bytes,
            keep,
            &mut self.scratch,
        ) {
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
        self.send_due(realtime_ns());
        let waiting = self
            .lane
            .sender(self.repl_tx)
            .map_or(0, |s| s.spec.core.pending());
        if waiting > 0 {
            LaneStats::add(&self.stats.deferred, 1);
        }
    }

    /// The loop's sending half: the replication tree's backlog if its
    /// window is free, the heartbeat if due. Once the replication queue is
    /// empty, the peers its next datagrams are for start from none.
    fn send_due(&mut self, now: u64) {
        self.lane.send_due(now);
        if self
            .lane
            .sender(self.repl_tx)
            .is_some_and(|s| s.spec.core.pending() == 0)
        {
            self.set_repl_to(Destinations::NONE);
        }
    }

    /// Sets the peers the replication tree's next frame goes to.
    fn set_repl_to(&mut self, peers: Destinations) {
        if let Some(LinkFill::Repl { to, .. }) =
            self.lane.sender_mut(self.repl_tx).map(|s| &mut s.spec.fill)
        {
            // With network replication the group is the one destination.
            *to = if self.multicast_if.is_some() {
                Destinations::ALL
            } else {
                peers
            };
        }
    }

    /// One poll at `now`: one turn of the lane loop — reads what waits on
    /// the sockets `ready` says were readable (at most the loop's budget
    /// per socket; replication first, it is what a write waits for),
    /// judges the detector's deadlines, hands raft datagrams and X-FD
    /// verdicts to `input`, then sends the backlog whose window came and
    /// the heartbeat if due. Returns the datagrams read (`max` when a
    /// socket had more than the loop's budget: the driver should not
    /// sleep).
    pub fn poll(
        &mut self,
        now: u64,
        max: usize,
        ready: Readiness,
        input: &mut dyn FnMut(Input<'_>),
    ) -> usize {
        let lambda = self.control.fd_lambda_ns() as f64;
        if let Some(f) = self.fd_sink() {
            if lambda != f.detector.threshold() {
                let _ = f.detector.set_threshold(lambda);
            }
        }
        if self.control.changed.swap(false, Ordering::AcqRel) {
            self.apply_changes(now);
        }
        let before = self.lane.stats();
        // A socket that was not readable when the driver woke is left
        // unread: it was empty at `ready.at_ns`, and deadlines are judged
        // then; with both read, at the time before the reads.
        let (repl_rx, fd_rx) = (self.repl_rx, self.fd_rx);
        let readable = |id: ReceiverId| {
            (id == repl_rx && ready.readable(0)) || (id == fd_rx && ready.readable(1))
        };
        let checked = if ready.readable(0) && ready.readable(1) {
            realtime_ns()
        } else {
            ready.at_ns
        };
        // A read error ends this turn's reads, as before the loop; the
        // next turn reads again.
        let _ = self.lane.recv_ready(checked, &readable);
        let after = self.lane.stats();
        if let Some(r) = self.repl_sink() {
            r.inbox
                .drain(&mut |from, bytes| input(Input::Datagram { from, bytes }));
        }
        if let Some(f) = self.fd_sink() {
            f.inbox
                .drain(&mut |from, bytes| input(Input::Datagram { from, bytes }));
        }
        self.handle_events(input);
        self.send_due(now.max(realtime_ns()));
        self.sync_abandoned();
        if after.budget_hits > before.budget_hits {
            max
        } else {
            (after.datagrams - before.datagrams) as usize
        }
    }

    /// Takes what [`LaneControl`] was told (rare; may allocate).
    fn apply_changes(&mut self, now: u64) {
        let pending = match self.control.pending.lock() {
            Ok(mut p) => std::mem::take(&mut *p),
            Err(_) => return,
        };
        for r in pending.retunes {
            let (tx, now_of) = match r.tree {
                Tree::Fd => (self.fd_tx, &self.control.fd_now),
                Tree::Repl => (self.repl_tx, &self.control.repl_now),
            };
            let Some(s) = self.lane.sender_mut(tx) else {
                continue;
            };
            let from = first_slot_after(now, r.period_ns).max(s.spec.core.clock().next_free());
            if s.spec
                .core
                .retune(r.period_ns, r.frame_bytes.min(self.frame_cap), from)
                .is_ok()
            {
                now_of.0.store(r.period_ns, Ordering::Release);
                now_of.1.store(r.frame_bytes as u64, Ordering::Release);
                LaneStats::add(&self.stats.retunes, 1);
            }
        }
        if let Some((repl, f)) = sinks(&mut self.lane, self.repl_rx, self.fd_rx) {
            for (id, key) in pending.keys {
                if let Some(o) = repl.open.as_mut() {
                    o.add_key(id, key.clone());
                }
                if let Some(o) = f.open.as_mut() {
                    o.add_key(id, key);
                }
            }
        }
        let Some(trees) = pending.peer_trees else {
            return;
        };
        // (old, new) trees of the peers whose groups move.
        let mut moves = Vec::new();
        if let Some((repl, f)) = sinks(&mut self.lane, self.repl_rx, self.fd_rx) {
            for (i, p) in repl.peers.iter_mut().enumerate() {
                let Some(&t) = trees.get(&p.id) else {
                    continue;
                };
                if t.repl != p.trees.repl {
                    let period = p.rx.params().period_ns;
                    p.rx = PeriodicReceiver::new(repl_rx_params(t.repl, period));
                    p.stream.restart();
                }
                if t.fd != p.trees.fd {
                    f.detector.set_peer_tunnel(i, t.fd);
                    if let Some(fp) = f.peers.get_mut(i) {
                        fp.notices.restart();
                    }
                }
                moves.push((p.trees, t));
                p.trees = t;
            }
        }
        let Some((repl_sock, fd_sock)) = self.sockets() else {
            return;
        };
        for (old, new) in moves {
            let moved = (old.repl == new.repl
                || move_group(repl_sock, self.multicast_if, old.repl, new.repl))
                && (old.fd == new.fd || move_group(fd_sock, self.multicast_if, old.fd, new.fd));
            if !moved {
                LaneStats::add(&self.stats.send_errors, 1);
            }
        }
    }

    fn handle_events(&mut self, input: &mut dyn FnMut(Input<'_>)) {
        let me = self.me;
        let Some((repl, f)) = sinks(&mut self.lane, self.repl_rx, self.fd_rx) else {
            return;
        };
        while let Some(ev) = f.detector.next_event() {
            if ev.kind == EventKind::Restarted {
                // A new incarnation numbers its frames from 0 again: forget
                // the old sequence history, or every frame of the restarted
                // member would be refused as stale.
                if let (Some(p), Some(fp)) = (repl.peers.get_mut(ev.peer), f.peers.get_mut(ev.peer))
                {
                    p.rx.reset_sequence();
                    p.stream.restart();
                    fp.notices.restart();
                    LaneStats::add(&self.stats.restarts, 1);
                }
                continue;
            }
            let EventKind::Suspected(_) = ev.kind else {
                continue;
            };
            let Some(suspect) = repl.peers.get(ev.peer).map(|p| p.id) else {
                continue;
            };
            LaneStats::add(&self.stats.suspicions, 1);
            // The lowest live id campaigns; a peer counts as live unless
            // suspected. Nodes that do not suspect the leader keep refusing
            // votes until their own timeout (Raft's guard against a single
            // wrong detector).
            let live_lower = repl.peers.iter().enumerate().any(|(i, p)| {
                p.id < me
                    && p.id != suspect
                    && f.detector
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
        let Some((repl, f)) = sinks(&mut self.lane, self.repl_rx, self.fd_rx) else {
            return;
        };
        let streams = repl.peers.iter().map(|p| p.stream.stats());
        let notices = f.peers.iter().map(|p| p.notices.stats());
        let total: u64 = streams.chain(notices).map(|s| s.abandoned).sum();
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
    tx: &mut PeriodicSender,
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
    let free = (capacity - keep).saturating_sub(tx.pending());
    let (head, rest) = scratch.split_at_mut(len);
    head[..2].copy_from_slice(&(to as u16).to_le_bytes());
    head[2..].copy_from_slice(bytes);
    let schema = tx.params().schema;
    enqueue_all(head, schema.data_capacity(), free, rest, &mut |c| {
        tx.enqueue(producer, c).is_ok()
    })
}
