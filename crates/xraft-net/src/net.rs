//! [`NetTransport`]: the [`Transport`] between the members of an X-Raft
//! cluster, sent on and polled by each member's raft driver thread.
//!
//! Raft traffic of the *express* class (every message up to the bulk
//! threshold, fragmented by the driver's `MessageEndpoint` into datagrams of
//! at most the express MTU) goes either over one UDP socket bound to the
//! node's raft address, or over the lane ([`crate::lane::LaneLink`]). On UDP
//! the sender is identified by the datagram's source address, which must be a
//! peer's raft address. Both are read by the driver thread itself (no receive
//! thread, no hand-over).
//!
//! *Regular* traffic (snapshots and larger messages) goes over one TCP
//! connection per peer (to the same address/port): [`crate::tcp_side`],
//! whose connections are authenticated with the same group key.
//!
//! Both are fire-and-forget: a message that cannot be sent is dropped and
//! Raft retransmits. Packets and connections from unknown senders are ignored
//! and counted in [`TransportStats`].
//!
//! With [`NetConfig::auth`], every UDP datagram carries a MAC
//! ([`xlane_auth`]: the group's key id, the sending member's raft id, a
//! sequence number, a SipHash-2-4 tag) and every one received is checked
//! before anything reads it: a forged, replayed or unkeyed datagram, or
//! one sealed by another member than its source address belongs to, is
//! counted ([`TransportStats::udp_unauthenticated`]) and dropped, so
//! raft-rs's decoder only ever sees authenticated bytes. The driver must
//! then fragment to [`NetConfig::payload_mtu`].
//!
//! Without [`NetConfig::auth`], a member whose raft address is not a
//! loopback one says once, at open, that anyone who reaches the port can
//! speak for a member ([`xlane_auth::unkeyed_warning`]).

use crate::auth::NetAuth;
use crate::lane::{LaneControl, LaneError, LaneLink, LaneStats, LaneTiming, TreeIds};
pub use crate::stats::TransportStats;
use crate::tcp_side::{spawn_sender, SideKey};
pub use crate::tcp_side::{TcpSide, MAX_FRAME};
use std::collections::{BTreeMap, HashMap};
use std::net::{IpAddr, SocketAddr, TcpListener, UdpSocket};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{SyncSender, TrySendError};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::thread::JoinHandle;
use xlane_auth::{AuthStats, Opener, Sealer, TRAILER_LEN};
use xlane_host::batch::{RecvBatch, SendQueue};
use xlane_xraft::{Input, Readiness, TrafficClass, Transport};

/// Default express MTU: the largest UDP payload sent.
pub const EXPRESS_MTU: usize = 1400;
/// Default size above which a raft message goes over TCP instead of being
/// fragmented onto UDP.
pub const BULK_THRESHOLD: usize = 16 << 10;
/// Largest UDP datagram read.
const UDP_BUF: usize = 64 << 10;
/// Datagrams one read of the UDP socket takes at most.
const UDP_BATCH: usize = 8;

fn add(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

/// How to open a member's network.
#[derive(Debug, Clone)]
pub struct NetConfig {
    /// This node's raft id.
    pub me: u64,
    /// Address the UDP (or lane) socket and the TCP listener bind.
    pub bind: SocketAddr,
    /// Every member's raft address, this node included.
    pub peers: Vec<(u64, SocketAddr)>,
    /// Largest UDP datagram sent.
    pub express_mtu: usize,
    /// Express traffic over the lane with this timing instead of plain UDP.
    pub lane: Option<LaneTiming>,
    /// The members' lane tree ids (lane mode; those missing use
    /// [`TreeIds::default_for`]).
    pub trees: BTreeMap<u64, TreeIds>,
    /// Authenticated datagrams (UDP) or frames (lane mode, unless
    /// `lane_keys` is given).
    pub auth: Option<NetAuth>,
    /// Lane mode: each tree's own key (from the controller) instead of
    /// `auth`'s group key.
    pub lane_keys: Option<crate::lane::LaneKeys>,
}

impl NetConfig {
    /// The raft driver's message endpoint for this network: fragments of
    /// [`NetConfig::payload_mtu`], messages above `bulk_threshold` bytes
    /// on TCP, reassembly up to [`MAX_FRAME`]. Fragment ids start from the
    /// wall clock, so that they do not repeat across restarts (peers
    /// remember recently completed ids).
    pub fn message_endpoint(
        &self,
        bulk_threshold: usize,
    ) -> Result<xlane_xraft::MessageEndpoint, xlane_xraft::batch::FragmentError> {
        let first_msg_id = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64);
        let limits = xlane_xraft::batch::ReassemblyLimits {
            max_message_bytes: MAX_FRAME,
            ..xlane_xraft::batch::ReassemblyLimits::default()
        };
        xlane_xraft::MessageEndpoint::new(self.payload_mtu(), first_msg_id, bulk_threshold, limits)
    }

    /// The largest raft fragment a datagram carries: the express MTU, less
    /// the MAC trailer when datagrams are authenticated.
    pub fn payload_mtu(&self) -> usize {
        match self.auth {
            Some(_) => self.express_mtu.saturating_sub(TRAILER_LEN),
            None => self.express_mtu,
        }
    }

    /// Whether this member's network can reach member `id` at raft address
    /// `addr` (e.g. before a membership change adds it): the address family
    /// of the socket bound, and in lane mode what the lane needs
    /// ([`crate::lane::check_peer`]).
    pub fn check_peer(&self, id: u64, addr: SocketAddr) -> Result<(), NetError> {
        if addr.is_ipv4() != self.bind.is_ipv4() {
            return Err(NetError::Config(format!(
                "raft address {addr}: this member's raft socket is bound to {}",
                self.bind
            )));
        }
        if let Some(t) = &self.lane {
            let same_port = t.multicast.then_some(self.bind.port());
            crate::lane::check_peer(id, addr, same_port)?;
        }
        Ok(())
    }
}

/// Why the network could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum NetError {
    /// Inconsistent configuration.
    #[error("{0}")]
    Config(String),
    /// A socket could not be bound or set up.
    #[error("raft transport on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The cause.
        source: std::io::Error,
    },
    /// The lane link could not start.
    #[error("lane: {0}")]
    Lane(#[from] LaneError),
    /// A thread could not be started.
    #[error("spawning a thread: {0}")]
    Thread(std::io::Error),
}

/// Where express datagrams go and come from.
enum Express {
    /// One plain UDP socket.
    Udp {
        sock: UdpSocket,
        fds: [RawFd; 1],
        to: HashMap<u64, SocketAddr>,
        from: HashMap<SocketAddr, u64>,
        batch: Box<RecvBatch>,
        out: SendQueue,
    },
    /// The lane link.
    Lane(Box<LaneLink>),
}

/// The [`Transport`] onto UDP or the lane (express) and TCP (regular).
///
/// Its peers may change while it runs ([`NetTransport::set_peers`], e.g.
/// when a membership change is applied): on UDP the addresses sent to and
/// accepted from, on the lane the tunnels and the X-FD detector's peers,
/// and on TCP the sender threads and the peers whose connections the
/// [`TcpSide`] accepts.
pub struct NetTransport {
    me: u64,
    /// Every peer's raft address (this node not included).
    addrs: BTreeMap<u64, SocketAddr>,
    express: Express,
    tcp: HashMap<u64, SyncSender<Vec<u8>>>,
    /// The peers whose TCP connections are accepted (shared with the [`TcpSide`]).
    accept: Arc<RwLock<BTreeMap<u64, IpAddr>>>,
    /// The TCP sender threads (shared with the [`TcpSide`], which joins them).
    threads: Arc<Mutex<Vec<JoinHandle<()>>>>,
    mtu: usize,
    stats: Arc<TransportStats>,
    auth: Option<(Sealer, Opener)>,
    /// The TCP side's key (with [`NetConfig::auth`], in both modes).
    side_key: Option<Arc<SideKey>>,
}

/// Binds the UDP socket and the TCP listener on one port. With port 0 (e.g. a single
/// node's raft socket), an ephemeral port free for both: the kernel's pick for UDP may be
/// taken for TCP, so that is retried a bounded number of times.
fn bind_udp_tcp(bind: SocketAddr) -> std::io::Result<(UdpSocket, TcpListener)> {
    let mut tries = 0;
    loop {
        let sock = UdpSocket::bind(bind)?;
        match TcpListener::bind(sock.local_addr()?) {
            Ok(l) => return Ok((sock, l)),
            Err(e)
                if bind.port() == 0 && e.kind() == std::io::ErrorKind::AddrInUse && tries < 64 =>
            {
                tries += 1;
            }
            Err(e) => return Err(e),
        }
    }
}

/// `CLOCK_REALTIME`, ns: sequence numbers of sealed datagrams go on above
/// a restart's.
fn wall_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

impl NetTransport {
    /// Binds the express socket(s) and the TCP listener and starts a TCP
    /// sender per peer. The returned [`TcpSide`] accepts peers' connections
    /// once [`TcpSide::serve`] is given the driver to deliver to.
    pub fn open(cfg: &NetConfig) -> Result<(NetTransport, TcpSide), NetError> {
        let bind_err = |source| NetError::Bind {
            addr: cfg.bind,
            source,
        };
        let others = || cfg.peers.iter().filter(|(pid, _)| *pid != cfg.me);
        let auth = match &cfg.auth {
            None => None,
            // The lane link seals its frames itself.
            Some(_) if cfg.lane.is_some() => None,
            Some(a) => {
                let key = a.ring.get(a.key_id).ok_or_else(|| {
                    NetError::Config(format!("key {} is not in the key file", a.key_id))
                })?;
                let me = u32::try_from(cfg.me).map_err(|_| {
                    NetError::Config(format!(
                        "raft id {} too large for authenticated datagrams (at most {})",
                        cfg.me,
                        u32::MAX
                    ))
                })?;
                Some((
                    Sealer::new(a.key_id, key.clone(), me),
                    Opener::new(a.ring.clone()),
                ))
            }
        };
        let (express, addr, listener) = match cfg.lane {
            None => {
                let (sock, listener) = bind_udp_tcp(cfg.bind).map_err(bind_err)?;
                let addr = sock.local_addr().map_err(bind_err)?;
                // Read between the driver's turns; a send that finds the
                // buffer full is dropped like a lost datagram (raft resends).
                sock.set_nonblocking(true).map_err(bind_err)?;
                let express = Express::Udp {
                    fds: [sock.as_raw_fd()],
                    sock,
                    to: others().copied().collect(),
                    from: others().map(|&(pid, a)| (a, pid)).collect(),
                    batch: Box::new(RecvBatch::with_capacity(UDP_BATCH, UDP_BUF)),
                    out: SendQueue::default(),
                };
                (express, addr, Some(listener))
            }
            Some(timing) => {
                if cfg.bind.port() == 0 {
                    return Err(NetError::Config(
                        "lane mode needs a fixed raft port (peers address it)".into(),
                    ));
                }
                let link = LaneLink::new(
                    cfg.me,
                    cfg.bind,
                    &cfg.peers,
                    timing,
                    &cfg.trees,
                    cfg.lane_keys
                        .clone()
                        .or_else(|| cfg.auth.as_ref().map(crate::lane::LaneKeys::group))
                        .as_ref(),
                )?;
                (Express::Lane(Box::new(link)), cfg.bind, None)
            }
        };
        let listener = match listener {
            Some(l) => l,
            None => TcpListener::bind(addr).map_err(bind_err)?,
        };
        let side_key = match &cfg.auth {
            Some(a) => Some(Arc::new(SideKey {
                ring: a.ring.clone(),
                key_id: a.key_id,
                key: a.ring.get(a.key_id).cloned().ok_or_else(|| {
                    NetError::Config(format!("key {} is not in the key file", a.key_id))
                })?,
            })),
            None => {
                let risk = "speak for a member or send it a snapshot";
                if let Some(w) = xlane_auth::unkeyed_warning("raft traffic", addr, risk, "member") {
                    tracing::warn!("{w}");
                }
                None
            }
        };
        let stats = Arc::new(TransportStats::default());
        let mut threads = Vec::new();
        let mut tcp = HashMap::new();
        for &(pid, peer) in others() {
            let (tx, t) = spawn_sender(cfg.me, pid, peer, side_key.clone(), &stats)
                .map_err(NetError::Thread)?;
            tcp.insert(pid, tx);
            threads.push(t);
        }
        let threads = Arc::new(Mutex::new(threads));
        let accept = Arc::new(RwLock::new(
            others().map(|&(pid, a)| (pid, a.ip())).collect(),
        ));
        let side = TcpSide {
            me: cfg.me,
            addr,
            listener: Some(listener),
            peers: accept.clone(),
            key: side_key.clone(),
            stats: stats.clone(),
            stop: Arc::new(AtomicBool::new(false)),
            threads: threads.clone(),
        };
        Ok((
            NetTransport {
                me: cfg.me,
                addrs: others().copied().collect(),
                express,
                tcp,
                accept,
                threads,
                mtu: cfg.express_mtu,
                stats,
                auth,
                side_key,
            },
            side,
        ))
    }

    /// The MAC check's counters by kind (`None`: not authenticated).
    pub fn auth_stats(&self) -> Option<AuthStats> {
        self.auth.as_ref().map(|(_, o)| o.stats())
    }

    /// The peers' raft addresses now (this node not included).
    pub fn peers(&self) -> &BTreeMap<u64, SocketAddr> {
        &self.addrs
    }

    /// Makes `peers` (every member's raft address; this node's own entry is
    /// ignored) the transport's peers: the members not in it are dropped, the
    /// new ones (and those whose address changed) set up. Called on the
    /// driver thread between polls. A peer that cannot be set up (e.g. an
    /// address the lane cannot use) is left out, counted
    /// ([`TransportStats::peer_errors`]) and reported; the others are set up
    /// all the same.
    pub fn set_peers(&mut self, peers: &[(u64, SocketAddr)]) -> Result<(), NetError> {
        let want: BTreeMap<u64, SocketAddr> = peers
            .iter()
            .filter(|(id, _)| *id != self.me)
            .copied()
            .collect();
        let gone: Vec<u64> = self
            .addrs
            .iter()
            .filter(|(id, a)| want.get(id) != Some(a))
            .map(|(id, _)| *id)
            .collect();
        for id in gone {
            self.remove_peer(id);
        }
        let mut first_err = None;
        for (&id, &a) in &want {
            if !self.addrs.contains_key(&id) {
                if let Err(e) = self.add_peer(id, a) {
                    add(&self.stats.peer_errors);
                    first_err.get_or_insert(e);
                }
            }
        }
        first_err.map_or(Ok(()), Err)
    }

    /// Adds peer `id` at raft address `addr` (a member that joined).
    pub fn add_peer(&mut self, id: u64, addr: SocketAddr) -> Result<(), NetError> {
        if id == self.me || self.addrs.contains_key(&id) {
            return Err(NetError::Config(format!("peer {id} is already known")));
        }
        if let Some((other, _)) = self.addrs.iter().find(|(_, a)| **a == addr) {
            return Err(NetError::Config(format!(
                "peer {id}: raft address {addr} is peer {other}'s"
            )));
        }
        match &mut self.express {
            Express::Udp { to, from, .. } => {
                to.insert(id, addr);
                from.insert(addr, id);
            }
            Express::Lane(link) => link.add_peer(id, addr)?,
        }
        let (tx, t) = spawn_sender(self.me, id, addr, self.side_key.clone(), &self.stats)
            .map_err(NetError::Thread)?;
        self.tcp.insert(id, tx);
        self.threads
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(t);
        self.accept
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(id, addr.ip());
        self.addrs.insert(id, addr);
        Ok(())
    }

    /// Removes peer `id` (a member that left): nothing more is sent to it or
    /// accepted from it, and its TCP sender ends. False if it was no peer.
    pub fn remove_peer(&mut self, id: u64) -> bool {
        let Some(addr) = self.addrs.remove(&id) else {
            return false;
        };
        match &mut self.express {
            Express::Udp { to, from, .. } => {
                to.remove(&id);
                from.remove(&addr);
            }
            Express::Lane(link) => {
                link.remove_peer(id);
            }
        }
        // Its queue closes: the sender thread ends (joined by the TcpSide).
        self.tcp.remove(&id);
        self.accept
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&id);
        true
    }

    /// The transport's counters.
    pub fn stats(&self) -> Arc<TransportStats> {
        self.stats.clone()
    }

    /// The lane link's counters (lane mode only).
    pub fn lane_stats(&self) -> Option<Arc<LaneStats>> {
        match &self.express {
            Express::Lane(l) => Some(l.stats()),
            Express::Udp { .. } => None,
        }
    }

    /// What other threads may change in the lane link (lane mode only).
    pub fn lane_control(&self) -> Option<Arc<LaneControl>> {
        match &self.express {
            Express::Lane(l) => Some(l.control()),
            Express::Udp { .. } => None,
        }
    }
}

impl Transport for NetTransport {
    fn send(&mut self, to: u64, class: TrafficClass, bytes: Vec<u8>) {
        match class {
            TrafficClass::Express | TrafficClass::Notice => match &mut self.express {
                Express::Lane(link) => link.send(to, class, &bytes),
                Express::Udp { to: peers, out, .. } => {
                    let mut bytes = bytes;
                    if let Some((s, _)) = self.auth.as_mut() {
                        let len = bytes.len();
                        bytes.resize(len + TRAILER_LEN, 0);
                        // Room made just above.
                        // For this peer alone (`to` is in the tag); raft ids
                        // fit 32 bits (checked at open for this member, at
                        // the peers' for theirs).
                        let _ = s.seal(&mut bytes, len, to as u32, wall_ns());
                    }
                    // Queued: the Ready's datagrams leave together at flush.
                    match peers.get(&to) {
                        Some(addr) if bytes.len() <= self.mtu => out.push(*addr, bytes),
                        _ => add(&self.stats.udp_send_errors),
                    }
                }
            },
            TrafficClass::Regular => match self.tcp.get(&to).map(|q| q.try_send(bytes)) {
                Some(Ok(())) => {}
                Some(Err(TrySendError::Full(_) | TrySendError::Disconnected(_))) | None => {
                    add(&self.stats.tcp_dropped);
                }
            },
        }
    }

    fn flush(&mut self) {
        match &mut self.express {
            Express::Lane(l) => l.flush(),
            Express::Udp { sock, out, .. } => {
                let (sent, refused) = out.flush(sock.as_raw_fd());
                self.stats
                    .udp_sent
                    .fetch_add(sent as u64, Ordering::Relaxed);
                self.stats
                    .udp_send_errors
                    .fetch_add(refused as u64, Ordering::Relaxed);
            }
        }
    }

    fn fds(&self) -> &[RawFd] {
        match &self.express {
            Express::Udp { fds, .. } => fds,
            Express::Lane(l) => l.fds(),
        }
    }

    fn next_deadline(&self) -> u64 {
        match &self.express {
            Express::Udp { .. } => u64::MAX,
            Express::Lane(l) => l.next_deadline(),
        }
    }

    fn poll(
        &mut self,
        now: u64,
        max: usize,
        ready: Readiness,
        input: &mut dyn FnMut(Input<'_>),
    ) -> usize {
        let mut opener = self.auth.as_mut().map(|(_, o)| o);
        let me = self.me as u32;
        let (sock, from, batch) = match &mut self.express {
            Express::Lane(l) => return l.poll(now, max, ready, input),
            Express::Udp {
                sock, from, batch, ..
            } => (sock, from, batch),
        };
        if !ready.readable(0) {
            return 0;
        }
        let mut read = 0;
        while read < max {
            let n = match batch.recv(sock.as_raw_fd()) {
                Ok(n) => n,
                // ICMP errors from dead peers, EINTR: try the next one.
                Err(_) => {
                    read += 1;
                    continue;
                }
            };
            read += n;
            for i in 0..n {
                let Some((src, bytes)) = batch.datagram(i) else {
                    break;
                };
                let Some(&id) = src.and_then(|a| from.get(&a)) else {
                    add(&self.stats.udp_unknown);
                    continue;
                };
                // The MAC before anything reads the datagram.
                let bytes = match opener.as_deref_mut().map(|o| o.open(bytes, me)) {
                    None => bytes,
                    Some(Ok(x)) if u64::from(x.sender) == id => x.payload,
                    Some(_) => {
                        add(&self.stats.udp_unauthenticated);
                        continue;
                    }
                };
                add(&self.stats.udp_received);
                input(Input::Datagram { from: id, bytes });
            }
            // A short batch found the socket empty.
            if n < UDP_BATCH {
                break;
            }
        }
        read
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;
    use std::time::Duration;
    use xlane_auth::KeyRing;
    use xlane_auth::TRAILER_LEN;

    fn udp() -> UdpSocket {
        let s = UdpSocket::bind("127.0.0.1:0").expect("bind");
        s.set_read_timeout(Some(Duration::from_secs(5)))
            .expect("timeout");
        s
    }

    /// Polls until a datagram came through (or a few seconds passed);
    /// returns the peers it came from.
    fn poll_from(t: &mut NetTransport) -> Vec<u64> {
        let mut got = Vec::new();
        for _ in 0..500 {
            t.poll(0, 16, Readiness::UNKNOWN, &mut |i| {
                if let Input::Datagram { from, .. } = i {
                    got.push(from)
                }
            });
            if !got.is_empty() {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        got
    }

    /// Which members a network can take on, by mode.
    #[test]
    fn peers_a_network_can_reach() {
        let a = |s: &str| -> SocketAddr { s.parse().expect("addr") };
        let cfg = |lane: Option<LaneTiming>| NetConfig {
            me: 1,
            bind: a("10.0.0.1:7001"),
            peers: vec![(1, a("10.0.0.1:7001"))],
            express_mtu: EXPRESS_MTU,
            lane,
            trees: Default::default(),
            auth: None,
            lane_keys: None,
        };
        let (udp, lane) = (cfg(None), cfg(Some(LaneTiming::default())));
        let multicast = cfg(Some(LaneTiming {
            multicast: true,
            ..LaneTiming::default()
        }));
        // (network, id, raft address, refused because)
        let rows: &[(&NetConfig, u64, &str, Option<&str>)] = &[
            (&udp, 4, "10.0.0.4:7004", None),
            (&udp, 9000, "10.0.0.4:65535", None),
            (&udp, 4, "[::1]:7004", Some("bound to")),
            (&lane, 4, "10.0.0.4:7004", None),
            (&lane, 4096, "10.0.0.4:7004", Some("1..4096")),
            (&lane, 4, "10.0.0.4:65535", Some("X-FD port")),
            (&multicast, 4, "10.0.0.4:7001", None),
            (&multicast, 4, "10.0.0.4:7004", Some("raft port 7004")),
        ];
        for (net, id, addr, why) in rows {
            let got = net.check_peer(*id, a(addr)).err().map(|e| e.to_string());
            match (why, &got) {
                (None, None) => {}
                (Some(w), Some(e)) if e.contains(w) => {}
                _ => panic!("{id} {addr}: {got:?}, expected {why:?}"),
            }
        }
    }

    /// Peers change at run time: a removed peer is neither sent to nor
    /// heard from; an added one is both.
    #[test]
    fn peers_change_at_run_time() {
        let (two, three) = (udp(), udp());
        let a2 = two.local_addr().expect("addr");
        let a3 = three.local_addr().expect("addr");
        let me: SocketAddr = "127.0.0.1:0".parse().expect("addr");
        let cfg = NetConfig {
            me: 1,
            bind: me,
            peers: vec![(1, me), (2, a2)],
            express_mtu: EXPRESS_MTU,
            lane: None,
            trees: Default::default(),
            auth: None,
            lane_keys: None,
        };
        // The UDP port the kernel picks may be taken for TCP: pick again.
        let (mut t, mut side) = (0..50)
            .find_map(|_| NetTransport::open(&cfg).ok())
            .expect("open");
        let mine = side.addr();
        t.set_peers(&[(1, mine), (3, a3)]).expect("set");
        assert_eq!(t.peers().iter().collect::<Vec<_>>(), [(&3, &a3)]);
        t.send(2, TrafficClass::Express, b"to two".to_vec());
        t.send(3, TrafficClass::Express, b"to three".to_vec());
        // Queued until the flush, which sends the Ready's datagrams together.
        t.flush();
        let mut buf = [0u8; 64];
        let (n, from) = three.recv_from(&mut buf).expect("three hears");
        assert_eq!((&buf[..n], from), (&b"to three"[..], mine));
        assert_eq!(t.stats().udp_send_errors.load(Ordering::Relaxed), 1);
        two.send_to(b"from two", mine).expect("send");
        three.send_to(b"from three", mine).expect("send");
        // On loopback both wait in the socket once sent: one poll reads both.
        assert_eq!(poll_from(&mut t), [3]);
        assert_eq!(t.stats().udp_unknown.load(Ordering::Relaxed), 1);
        // Refused: a second peer at a taken address, and this node itself.
        assert!(t.add_peer(4, a3).is_err());
        assert!(t.add_peer(1, a2).is_err());
        assert!(t.remove_peer(3));
        assert!(!t.remove_peer(3));
        drop(t);
        side.shutdown();
    }

    /// Authenticated datagrams: what member 2 sealed reaches member 1 once
    /// as its payload; the same bytes again (a replay), bytes sealed for
    /// another member (a redirect), a flipped byte and bare raft bytes, all
    /// from member 2's own address once it is gone, never reach raft.
    #[test]
    fn forged_replayed_and_redirected_datagrams_never_reach_raft() {
        let ring = KeyRing::from_pairs(&[(1, xlane_auth::Key::random().expect("key"))]);
        let auth = Some(NetAuth { ring, key_id: 1 });
        let tap = udp();
        let tap_addr = tap.local_addr().expect("addr");
        let any: SocketAddr = "127.0.0.1:0".parse().expect("addr");
        // Member 2 sends "to 1" and "to 3" to the tap, which records them.
        let cfg2 = NetConfig {
            me: 2,
            bind: any,
            peers: vec![(2, any), (1, tap_addr), (3, tap_addr)],
            express_mtu: EXPRESS_MTU,
            lane: None,
            trees: Default::default(),
            auth: auth.clone(),
            lane_keys: None,
        };
        let (mut t2, mut side2) = (0..50)
            .find_map(|_| NetTransport::open(&cfg2).ok())
            .expect("open");
        let a2 = side2.addr();
        let cfg1 = NetConfig {
            me: 1,
            bind: any,
            peers: vec![(1, any), (2, a2)],
            ..cfg2.clone()
        };
        let (mut t1, mut side1) = (0..50)
            .find_map(|_| NetTransport::open(&cfg1).ok())
            .expect("open");
        let a1 = side1.addr();
        assert_eq!(cfg1.payload_mtu(), EXPRESS_MTU - TRAILER_LEN);
        t2.send(1, TrafficClass::Express, b"for one".to_vec());
        t2.send(3, TrafficClass::Express, b"for three".to_vec());
        t2.flush();
        let mut buf = [0u8; 256];
        let mut recorded = Vec::new();
        for _ in 0..2 {
            let n = tap.recv(&mut buf).expect("the tap records");
            recorded.push(buf[..n].to_vec());
        }
        assert!(recorded.iter().all(|r| r.len() > TRAILER_LEN));
        drop(t2);
        side2.shutdown();
        // The attacker takes member 2's address.
        let x = UdpSocket::bind(a2).expect("member 2's address is free");
        let (for_one, for_three) = (&recorded[0], &recorded[1]);
        let mut flipped = for_one.clone();
        flipped[0] ^= 1;
        let sends: [&[u8]; 5] = [for_one, for_one, for_three, &flipped, b"bare raft bytes"];
        for d in sends {
            x.send_to(d, a1).expect("send");
        }
        let mut got = Vec::new();
        for _ in 0..200 {
            t1.poll(0, 16, Readiness::UNKNOWN, &mut |i| {
                if let Input::Datagram { from, bytes } = i {
                    got.push((from, bytes.to_vec()));
                }
            });
            let refused = t1.stats().udp_unauthenticated.load(Ordering::Relaxed);
            if got.len() + refused as usize == sends.len() {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(got, vec![(2, b"for one".to_vec())]);
        let st = t1.auth_stats().expect("authenticated");
        assert_eq!((st.accepted, st.replayed, st.forged), (1, 1, 2), "{st:?}");
        assert_eq!(st.unkeyed + st.unsealed, 1, "{st:?}");
        assert_eq!(t1.stats().udp_unauthenticated.load(Ordering::Relaxed), 4);
        drop(t1);
        side1.shutdown();
    }

    /// Opens member `me` of `peers` (raft ids on 127.0.0.1) with `auth`,
    /// its TCP side serving into a channel.
    fn open_tcp(
        me: u64,
        peers: Vec<(u64, SocketAddr)>,
        auth: Option<NetAuth>,
    ) -> (NetTransport, TcpSide, mpsc::Receiver<(u64, Vec<u8>)>) {
        let any: SocketAddr = "127.0.0.1:0".parse().expect("addr");
        let cfg = NetConfig {
            me,
            bind: peers.iter().find(|p| p.0 == me).map_or(any, |p| p.1),
            peers,
            express_mtu: EXPRESS_MTU,
            lane: None,
            trees: Default::default(),
            auth,
            lane_keys: None,
        };
        let (t, mut side) = (0..50)
            .find_map(|_| NetTransport::open(&cfg).ok())
            .expect("open");
        let (tx, rx) = mpsc::channel();
        let tx = Mutex::new(tx);
        side.serve_to(Arc::new(move |from, bytes| {
            let _ = tx.lock().unwrap().send((from, bytes));
        }))
        .expect("serve");
        (t, side, rx)
    }

    /// Waits until `count` reaches `want` (a bound against hanging).
    fn until(count: &AtomicU64, want: u64) {
        for _ in 0..1000 {
            if count.load(Ordering::Relaxed) >= want {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        panic!(
            "counter at {}, waited for {want}",
            count.load(Ordering::Relaxed)
        );
    }

    /// The side channel with the group key: member 2's snapshot reaches
    /// member 1; a connection that claims to be member 2 without the key
    /// (a hello under another key, one made for another connection's
    /// nonce, or bare unkeyed frames) is closed and counted, its snapshot
    /// never delivered; one from an address that is no peer's is closed at
    /// accept.
    #[test]
    fn a_forged_snapshot_over_the_side_channel_is_refused() {
        use std::io::{Read, Write};
        use std::net::TcpStream;
        use xlane_auth::stream::{self, NONCE_LEN};
        let key = xlane_auth::Key::random().expect("key");
        let ring = KeyRing::from_pairs(&[(1, key.clone())]);
        let auth = Some(NetAuth { ring, key_id: 1 });
        // Free for UDP and TCP both, and handed to no other test here.
        let free = xlane_testports::raft;
        // Member 1 listens; member 2 only sends (its address is where
        // member 1 expects it).
        let a2 = free();
        let (t1, mut side1, rx) = open_tcp(1, vec![(1, free()), (2, a2)], auth.clone());
        let a1 = side1.addr();
        let (mut t2, mut side2, _) = open_tcp(2, vec![(1, a1), (2, a2)], auth);
        t2.send(1, TrafficClass::Regular, b"snapshot from 2".to_vec());
        let got = rx.recv_timeout(Duration::from_secs(20)).expect("delivered");
        assert_eq!(got, (2, b"snapshot from 2".to_vec()));
        let st = t1.stats();
        let claim = |hello: &dyn Fn(&[u8; NONCE_LEN]) -> Vec<u8>| {
            let mut s = TcpStream::connect(a1).expect("connect");
            s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
            let mut nonce = [0u8; NONCE_LEN];
            s.read_exact(&mut nonce).expect("a nonce first");
            let mut out = hello(&nonce);
            let mut frame = (200u32 << 20).to_le_bytes().to_vec();
            frame.extend_from_slice(&2u64.to_le_bytes());
            frame.extend_from_slice(b"forged snapshot");
            out.extend_from_slice(&frame);
            let _ = s.write_all(&out);
            // Closed by member 1: the read ends (EOF or reset).
            let mut rest = Vec::new();
            let _ = s.read_to_end(&mut rest);
        };
        let other = xlane_auth::Key::random().expect("key");
        type Hello = Box<dyn Fn(&[u8; NONCE_LEN]) -> Vec<u8>>;
        let hellos: Vec<(&str, Hello)> = vec![
            (
                "another key",
                Box::new(move |n| stream::connect(1, &other, 2, 1, n).0.to_vec()),
            ),
            (
                "another connection's nonce",
                Box::new(move |_| stream::connect(1, &key, 2, 1, &[9; NONCE_LEN]).0.to_vec()),
            ),
            ("no hello, an unkeyed frame", Box::new(|_| Vec::new())),
        ];
        for (i, (what, hello)) in hellos.iter().enumerate() {
            claim(hello.as_ref());
            until(&st.tcp_unauthenticated, i as u64 + 1);
            assert!(rx.try_recv().is_err(), "{what}: delivered");
        }
        // From 127.0.0.2, no peer's address: closed at accept.
        let s = socket_from(std::net::Ipv4Addr::new(127, 0, 0, 2), a1);
        until(&st.tcp_refused, 1);
        drop(s);
        // Member 2 is still heard.
        t2.send(1, TrafficClass::Regular, b"more".to_vec());
        let got = rx.recv_timeout(Duration::from_secs(20)).expect("delivered");
        assert_eq!(got, (2, b"more".to_vec()));
        assert_eq!(st.tcp_received.load(Ordering::Relaxed), 2);
        drop((t1, t2));
        side2.shutdown();
        side1.shutdown();
    }

    /// A TCP connection to `to` from address `from` (port chosen by the
    /// kernel).
    fn socket_from(from: std::net::Ipv4Addr, to: SocketAddr) -> std::net::TcpStream {
        let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0) };
        assert!(fd >= 0);
        let s = unsafe { <std::net::TcpStream as std::os::fd::FromRawFd>::from_raw_fd(fd) };
        let sa = |ip: std::net::Ipv4Addr, port: u16| libc::sockaddr_in {
            sin_family: libc::AF_INET as libc::sa_family_t,
            sin_port: port.to_be(),
            sin_addr: libc::in_addr {
                s_addr: u32::from(ip).to_be(),
            },
            sin_zero: [0; 8],
        };
        let SocketAddr::V4(to) = to else {
            panic!("v4 only")
        };
        let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
        let me = sa(from, 0);
        let there = sa(*to.ip(), to.port());
        unsafe {
            assert_eq!(
                libc::bind(fd, (&me as *const libc::sockaddr_in).cast(), len),
                0
            );
            assert_eq!(
                libc::connect(fd, (&there as *const libc::sockaddr_in).cast(), len),
                0
            );
        }
        s
    }

    /// Without a key: at most MAX_CONNECTIONS are served at once, the rest
    /// closed at accept and counted; a frame declaring 200 MiB that sends
    /// little takes little (the member stays up and hears its peer).
    #[test]
    fn the_side_channel_serves_a_bounded_number_of_connections() {
        use crate::tcp_side::MAX_CONNECTIONS;
        use std::io::Write;
        use std::net::TcpStream;
        // Free for UDP and TCP both, and handed to no other test here.
        let free = xlane_testports::raft;
        let a2 = free();
        let (t1, mut side1, rx) = open_tcp(1, vec![(1, free()), (2, a2)], None);
        let a1 = side1.addr();
        let st = t1.stats();
        let mut held = Vec::new();
        for _ in 0..MAX_CONNECTIONS {
            let mut s = TcpStream::connect(a1).expect("connect");
            // Member 2's id, 200 MiB declared, a few bytes sent.
            let mut f = (200u32 << 20).to_le_bytes().to_vec();
            f.extend_from_slice(&2u64.to_le_bytes());
            f.extend_from_slice(&[0; 64]);
            s.write_all(&f).expect("write");
            held.push(s);
        }
        for _ in 0..5 {
            held.push(TcpStream::connect(a1).expect("connect"));
        }
        until(&st.tcp_refused, 5);
        assert_eq!(st.tcp_refused.load(Ordering::Relaxed), 5);
        assert!(rx.try_recv().is_err());
        drop((held, t1));
        side1.shutdown();
    }
}
