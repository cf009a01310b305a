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
//! connection per peer (to the same address/port), as length-prefixed frames
//! `len:u32 LE | from:u64 LE | datagram`, written by one thread per peer and
//! read by one thread per connection ([`TcpSide`]); a frame is accepted only
//! if `from` is a peer and the connection comes from that peer's IP.
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

use crate::lane::{LaneControl, LaneError, LaneLink, LaneStats, LaneTiming, TreeIds};
use crate::udp_batch::{SendQueue, UdpBatch, UDP_BATCH};
use std::collections::{BTreeMap, HashMap};
use std::io::{Read, Write};
use std::net::{IpAddr, Shutdown, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, SyncSender, TrySendError};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::thread::JoinHandle;
use std::time::Duration;
use xlane_auth::{AuthStats, KeyRing, Opener, Sealer, TRAILER_LEN};
use xlane_xraft::driver::DriverHandle;
use xlane_xraft::{Input, Readiness, TrafficClass, Transport};

/// Default express MTU: the largest UDP payload sent.
pub const EXPRESS_MTU: usize = 1400;
/// Default size above which a raft message goes over TCP instead of being
/// fragmented onto UDP.
pub const BULK_THRESHOLD: usize = 16 << 10;
/// Largest TCP frame accepted (bounds memory per connection).
pub const MAX_FRAME: usize = 256 << 20;
/// Regular-class messages queued per peer before new ones are dropped.
const TCP_QUEUE: usize = 256;
/// How often blocked receive loops check for shutdown.
const POLL: Duration = Duration::from_millis(200);
/// Largest UDP datagram read.
const UDP_BUF: usize = 64 << 10;

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
    /// TCP connections or frames refused (unknown sender, bad frame).
    pub tcp_unknown: AtomicU64,
    /// Regular-class messages dropped (queue full, connect or write failed).
    pub tcp_dropped: AtomicU64,
    /// Peers [`NetTransport::set_peers`] could not set up (left out).
    pub peer_errors: AtomicU64,
    /// UDP datagrams from peers' addresses refused by the MAC check
    /// (forged, replayed, unkeyed, or sealed by another member).
    pub udp_unauthenticated: AtomicU64,
}

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

/// The group key of authenticated raft datagrams.
#[derive(Debug, Clone)]
pub struct NetAuth {
    /// The keys accepted.
    pub ring: KeyRing,
    /// The key this member seals with (the group's, in `ring`).
    pub key_id: u32,
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
        batch: Box<UdpBatch>,
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
}

/// A TCP sender thread for the peer at `addr`, and its queue.
fn spawn_sender(
    me: u64,
    addr: SocketAddr,
    stats: &Arc<TransportStats>,
) -> Result<(SyncSender<Vec<u8>>, JoinHandle<()>), NetError> {
    let (tx, rx) = mpsc::sync_channel::<Vec<u8>>(TCP_QUEUE);
    let st = stats.clone();
    let t = spawn("raft-tcp-out", move || tcp_sender(me, addr, &rx, &st))?;
    Ok((tx, t))
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

fn spawn(name: &str, f: impl FnOnce() + Send + 'static) -> Result<JoinHandle<()>, NetError> {
    std::thread::Builder::new()
        .name(name.into())
        .spawn(f)
        .map_err(NetError::Thread)
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
                    batch: Box::new(UdpBatch::new(UDP_BUF)),
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
        let stats = Arc::new(TransportStats::default());
        let mut threads = Vec::new();
        let mut tcp = HashMap::new();
        for &(pid, peer) in others() {
            let (tx, t) = spawn_sender(cfg.me, peer, &stats)?;
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
        let (tx, t) = spawn_sender(self.me, addr, &self.stats)?;
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
                let Some((src, bytes)) = batch.get(i) else {
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

/// The TCP half that receives: an acceptor and a reader per connection,
/// delivering to the driver. Its threads end on [`TcpSide::shutdown`] (the
/// senders when the transport, with the driver, is gone).
pub struct TcpSide {
    me: u64,
    addr: SocketAddr,
    listener: Option<TcpListener>,
    /// The peers accepted (the transport changes them).
    peers: Arc<RwLock<BTreeMap<u64, IpAddr>>>,
    stats: Arc<TransportStats>,
    stop: Arc<AtomicBool>,
    /// Every thread of the network (the transport adds senders).
    threads: Arc<Mutex<Vec<JoinHandle<()>>>>,
}

impl TcpSide {
    /// The bound raft address (UDP or lane, and TCP).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Accepts peers' connections, delivering their frames to `driver`.
    pub fn serve(&mut self, driver: DriverHandle) -> Result<(), NetError> {
        let Some(listener) = self.listener.take() else {
            return Ok(());
        };
        let (me, peers, st, s) = (
            self.me,
            self.peers.clone(),
            self.stats.clone(),
            self.stop.clone(),
        );
        let t = spawn("raft-tcp-in", move || {
            tcp_acceptor(listener, me, &peers, &driver, &st, &s)
        })?;
        self.threads
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(t);
        Ok(())
    }

    /// Stops the acceptor and readers and waits for every thread (call it
    /// after the driver stopped, so that the senders' queues are closed).
    pub fn shutdown(&mut self) {
        self.stop.store(true, Ordering::Release);
        // Wake the acceptor.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_millis(200));
        let threads =
            std::mem::take(&mut *self.threads.lock().unwrap_or_else(PoisonError::into_inner));
        for t in threads {
            let _ = t.join();
        }
    }
}

impl Drop for TcpSide {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn tcp_sender(me: u64, addr: SocketAddr, rx: &mpsc::Receiver<Vec<u8>>, stats: &TransportStats) {
    let mut conn: Option<TcpStream> = None;
    let mut frame = Vec::new();
    while let Ok(msg) = rx.recv() {
        if conn.is_none() {
            conn = TcpStream::connect_timeout(&addr, Duration::from_secs(1))
                .ok()
                .inspect(|s| {
                    let _ = s.set_nodelay(true);
                    let _ = s.set_write_timeout(Some(Duration::from_secs(5)));
                });
        }
        let Some(s) = conn.as_mut() else {
            add(&stats.tcp_dropped);
            continue;
        };
        let Ok(len) = u32::try_from(msg.len()) else {
            add(&stats.tcp_dropped);
            continue;
        };
        frame.clear();
        frame.extend_from_slice(&len.to_le_bytes());
        frame.extend_from_slice(&me.to_le_bytes());
        frame.extend_from_slice(&msg);
        if s.write_all(&frame).is_ok() {
            add(&stats.tcp_sent);
        } else {
            add(&stats.tcp_dropped);
            conn = None;
        }
    }
}

fn tcp_acceptor(
    listener: TcpListener,
    me: u64,
    peers: &Arc<RwLock<BTreeMap<u64, IpAddr>>>,
    handle: &DriverHandle,
    stats: &Arc<TransportStats>,
    stop: &Arc<AtomicBool>,
) {
    for conn in listener.incoming() {
        if stop.load(Ordering::Acquire) {
            break;
        }
        let Ok(s) = conn else { continue };
        let (peers, h, st, sp) = (peers.clone(), handle.clone(), stats.clone(), stop.clone());
        let spawned = std::thread::Builder::new()
            .name("raft-tcp-conn".into())
            .spawn(move || tcp_connection(s, me, &peers, &h, &st, &sp));
        if spawned.is_err() {
            add(&stats.tcp_dropped);
        }
    }
}

/// Reads exactly `buf.len()` bytes, polling `stop` on timeouts. False on
/// EOF, error or stop.
fn read_full(s: &mut TcpStream, buf: &mut [u8], stop: &AtomicBool) -> bool {
    let mut got = 0;
    while got < buf.len() {
        if stop.load(Ordering::Acquire) {
            return false;
        }
        match s.read(&mut buf[got..]) {
            Ok(0) => return false,
            Ok(n) => got += n,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock
                        | std::io::ErrorKind::TimedOut
                        | std::io::ErrorKind::Interrupted
                ) => {}
            Err(_) => return false,
        }
    }
    true
}

fn tcp_connection(
    mut s: TcpStream,
    me: u64,
    peers: &RwLock<BTreeMap<u64, IpAddr>>,
    handle: &DriverHandle,
    stats: &TransportStats,
    stop: &AtomicBool,
) {
    let Ok(remote) = s.peer_addr() else { return };
    let _ = s.set_read_timeout(Some(POLL));
    let mut hdr = [0u8; 12];
    while read_full(&mut s, &mut hdr, stop) {
        let mut l = [0u8; 4];
        l.copy_from_slice(&hdr[..4]);
        let len = u32::from_le_bytes(l) as usize;
        let mut f = [0u8; 8];
        f.copy_from_slice(&hdr[4..]);
        let from = u64::from_le_bytes(f);
        // Checked per frame: a peer removed meanwhile is refused from then on.
        let known = from != me
            && peers
                .read()
                .unwrap_or_else(PoisonError::into_inner)
                .get(&from)
                .is_some_and(|ip| *ip == remote.ip());
        if !known || len > MAX_FRAME {
            add(&stats.tcp_unknown);
            break;
        }
        let mut body = vec![0u8; len];
        if !read_full(&mut s, &mut body, stop) {
            break;
        }
        add(&stats.tcp_received);
        handle.deliver(from, body);
    }
    let _ = s.shutdown(Shutdown::Both);
}

#[cfg(test)]
mod tests {
    use super::*;
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
}
