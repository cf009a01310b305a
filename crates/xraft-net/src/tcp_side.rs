//! X-Raft's regular class on TCP: snapshots and messages over the bulk
//! threshold, one connection per peer (to its raft address and port),
//! written by one sender thread per peer and read by a
//! thread per accepted connection ([`TcpSide`]).
//!
//! **Without a key** a frame is `len: u32 LE | from: u64 LE | message`,
//! accepted when `from` is a peer and the connection comes from that
//! peer's IP.
//!
//! **With the group key** ([`crate::net::NetConfig::auth`]) the connection
//! starts with [`xlane_auth::stream`]'s handshake (the acceptor's nonce,
//! the connector's hello proving the key and naming its raft id) and every
//! frame is sealed: its declared length is authenticated before any room
//! is taken, and frames recorded from one connection open on no other. A
//! connection that does not say hello within [`HANDSHAKE`], or whose hello
//! or frame fails, is closed and counted
//! ([`TransportStats::tcp_unauthenticated`]).
//!
//! **Bounded either way.** A connection from an address that is no peer's
//! is closed at accept, before any thread starts for it; at most
//! [`MAX_CONNECTIONS`] are served at once (more are closed at accept); both
//! are counted ([`TransportStats::tcp_refused`]). A frame longer than
//! [`MAX_FRAME`] is refused at its header, and a body is read into room
//! that grows with what arrived ([`READ_CHUNK`] at a time), so a header
//! that declares much and sends little takes little.

use crate::stats::TransportStats;
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{IpAddr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{self, SyncSender};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use xlane_auth::stream::{
    self, FrameOpener, FrameSealer, BODY_TAG_LEN, HEADER_LEN, HELLO_LEN, NONCE_LEN,
};
use xlane_auth::{Key, KeyRing};

/// Largest TCP frame accepted (a snapshot; bounds memory per connection).
pub const MAX_FRAME: usize = 256 << 20;
/// Regular-class messages queued per peer before new ones are dropped.
const TCP_QUEUE: usize = 256;
/// How often blocked receive loops check for shutdown.
const POLL: Duration = Duration::from_millis(200);
/// Most connections a member serves at once on its raft port: a peer
/// keeps one, and one more while it reconnects.
pub const MAX_CONNECTIONS: usize = 32;
/// How long an accepted connection has to say hello (with a key).
pub const HANDSHAKE: Duration = Duration::from_secs(2);
/// A body's room grows by at most this much per read.
pub const READ_CHUNK: usize = 1 << 20;

/// The group key of the side channel.
#[derive(Debug, Clone)]
pub struct SideKey {
    /// The keys a hello may be under.
    pub ring: KeyRing,
    /// The key this member says hello with.
    pub key_id: u32,
    /// That key.
    pub key: Key,
}

fn add(c: &std::sync::atomic::AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

fn spawn(name: &str, f: impl FnOnce() + Send + 'static) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new().name(name.into()).spawn(f)
}

/// A TCP sender thread from member `me` to peer `to` at `addr`, and its
/// queue.
pub(crate) fn spawn_sender(
    me: u64,
    to: u64,
    addr: SocketAddr,
    key: Option<Arc<SideKey>>,
    stats: &Arc<TransportStats>,
) -> std::io::Result<(SyncSender<Vec<u8>>, JoinHandle<()>)> {
    let (tx, rx) = mpsc::sync_channel::<Vec<u8>>(TCP_QUEUE);
    let st = stats.clone();
    let t = spawn("raft-tcp-out", move || {
        tcp_sender(me, to, addr, key.as_deref(), &rx, &st)
    })?;
    Ok((tx, t))
}

/// Connects to `addr` and, with a key, says hello to peer `to`: the
/// stream and the sealer of its frames.
fn dial(
    me: u64,
    to: u64,
    addr: SocketAddr,
    key: Option<&SideKey>,
) -> Option<(TcpStream, Option<FrameSealer>)> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(1)).ok()?;
    let _ = s.set_nodelay(true);
    let _ = s.set_write_timeout(Some(Duration::from_secs(5)));
    let Some(k) = key else {
        return Some((s, None));
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(1)));
    let mut nonce = [0u8; NONCE_LEN];
    s.read_exact(&mut nonce).ok()?;
    let (hello, sealer) = stream::connect(k.key_id, &k.key, me, to, &nonce);
    s.write_all(&hello).ok()?;
    Some((s, Some(sealer)))
}

fn tcp_sender(
    me: u64,
    to: u64,
    addr: SocketAddr,
    key: Option<&SideKey>,
    rx: &mpsc::Receiver<Vec<u8>>,
    stats: &TransportStats,
) {
    let mut conn: Option<(TcpStream, Option<FrameSealer>)> = None;
    let mut frame = Vec::new();
    while let Ok(msg) = rx.recv() {
        if conn.is_none() {
            conn = dial(me, to, addr, key);
        }
        let Some((s, sealer)) = conn.as_mut() else {
            add(&stats.tcp_dropped);
            continue;
        };
        if msg.len() > MAX_FRAME {
            add(&stats.tcp_dropped);
            continue;
        }
        match sealer {
            Some(sealer) => sealer.seal(&msg, &mut frame),
            None => {
                frame.clear();
                frame.extend_from_slice(&(msg.len() as u32).to_le_bytes());
                frame.extend_from_slice(&me.to_le_bytes());
                frame.extend_from_slice(&msg);
            }
        }
        if s.write_all(&frame).is_ok() {
            add(&stats.tcp_sent);
        } else {
            add(&stats.tcp_dropped);
            conn = None;
        }
    }
}

/// Where accepted frames go: the sending member's id and the message.
pub type Deliver = Arc<dyn Fn(u64, Vec<u8>) + Send + Sync>;

/// The TCP half that receives: an acceptor and a reader per connection,
/// delivering to the driver. Its threads end on [`TcpSide::shutdown`] (the
/// senders when the transport, with the driver, is gone).
pub struct TcpSide {
    pub(crate) me: u64,
    pub(crate) addr: SocketAddr,
    pub(crate) listener: Option<TcpListener>,
    /// The peers accepted (the transport changes them).
    pub(crate) peers: Arc<RwLock<BTreeMap<u64, IpAddr>>>,
    pub(crate) key: Option<Arc<SideKey>>,
    pub(crate) stats: Arc<TransportStats>,
    pub(crate) stop: Arc<AtomicBool>,
    /// Every thread of the network (the transport adds senders).
    pub(crate) threads: Arc<Mutex<Vec<JoinHandle<()>>>>,
}

/// What every connection's thread shares.
struct Served {
    me: u64,
    peers: Arc<RwLock<BTreeMap<u64, IpAddr>>>,
    key: Option<Arc<SideKey>>,
    deliver: Deliver,
    stats: Arc<TransportStats>,
    stop: Arc<AtomicBool>,
    live: AtomicUsize,
}

impl Served {
    /// Whether `from` is a peer (not this member) at `ip` now: a peer
    /// removed meanwhile is refused from then on.
    fn is_peer(&self, from: u64, ip: IpAddr) -> bool {
        from != self.me
            && self
                .peers
                .read()
                .unwrap_or_else(PoisonError::into_inner)
                .get(&from)
                .is_some_and(|p| *p == ip)
    }

    fn any_peer_at(&self, ip: IpAddr) -> bool {
        self.peers
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .any(|p| *p == ip)
    }
}

impl TcpSide {
    /// The bound raft address (UDP or lane, and TCP).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Accepts peers' connections, delivering their frames to `driver`.
    pub fn serve(&mut self, driver: xlane_xraft::driver::DriverHandle) -> std::io::Result<()> {
        self.serve_to(Arc::new(move |from, bytes| driver.deliver(from, bytes)))
    }

    /// Accepts peers' connections, handing their frames to `deliver`.
    pub fn serve_to(&mut self, deliver: Deliver) -> std::io::Result<()> {
        let Some(listener) = self.listener.take() else {
            return Ok(());
        };
        let served = Arc::new(Served {
            me: self.me,
            peers: self.peers.clone(),
            key: self.key.clone(),
            deliver,
            stats: self.stats.clone(),
            stop: self.stop.clone(),
            live: AtomicUsize::new(0),
        });
        let t = spawn("raft-tcp-in", move || tcp_acceptor(&listener, &served))?;
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

/// Counts a connection's thread while it lives.
struct Live<'a>(&'a AtomicUsize);

impl Drop for Live<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

fn tcp_acceptor(listener: &TcpListener, served: &Arc<Served>) {
    for conn in listener.incoming() {
        if served.stop.load(Ordering::Acquire) {
            break;
        }
        let Ok(s) = conn else { continue };
        let known = s.peer_addr().is_ok_and(|a| served.any_peer_at(a.ip()));
        if !known || served.live.load(Ordering::Acquire) >= MAX_CONNECTIONS {
            add(&served.stats.tcp_refused);
            let _ = s.shutdown(Shutdown::Both);
            continue;
        }
        served.live.fetch_add(1, Ordering::AcqRel);
        let sv = served.clone();
        let spawned = spawn("raft-tcp-conn", move || {
            let _live = Live(&sv.live);
            tcp_connection(s, &sv);
        });
        if spawned.is_err() {
            served.live.fetch_sub(1, Ordering::AcqRel);
            add(&served.stats.tcp_refused);
        }
    }
}

/// Reads exactly `buf.len()` bytes, polling `stop` on timeouts, until
/// `deadline` if there is one. False on EOF, error, stop or deadline.
fn read_full(
    s: &mut TcpStream,
    buf: &mut [u8],
    stop: &AtomicBool,
    deadline: Option<Instant>,
) -> bool {
    let mut got = 0;
    while got < buf.len() {
        if stop.load(Ordering::Acquire) || deadline.is_some_and(|d| Instant::now() >= d) {
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

/// Reads a body of `len` bytes into room that grows with what arrived.
fn read_body(s: &mut TcpStream, len: usize, stop: &AtomicBool) -> Option<Vec<u8>> {
    let mut body = Vec::new();
    while body.len() < len {
        let at = body.len();
        body.resize(at + (len - at).min(READ_CHUNK), 0);
        if !read_full(s, &mut body[at..], stop, None) {
            return None;
        }
    }
    Some(body)
}

fn tcp_connection(mut s: TcpStream, sv: &Served) {
    let Ok(remote) = s.peer_addr() else { return };
    let _ = s.set_read_timeout(Some(POLL));
    match sv.key.as_deref() {
        Some(k) => keyed(&mut s, remote.ip(), k, sv),
        None => unkeyed(&mut s, remote.ip(), sv),
    }
    let _ = s.shutdown(Shutdown::Both);
}

fn unkeyed(s: &mut TcpStream, ip: IpAddr, sv: &Served) {
    let mut hdr = [0u8; 12];
    while read_full(s, &mut hdr, &sv.stop, None) {
        let mut l = [0u8; 4];
        l.copy_from_slice(&hdr[..4]);
        let len = u32::from_le_bytes(l) as usize;
        let mut f = [0u8; 8];
        f.copy_from_slice(&hdr[4..]);
        let from = u64::from_le_bytes(f);
        if !sv.is_peer(from, ip) || len > MAX_FRAME {
            add(&sv.stats.tcp_unknown);
            return;
        }
        let Some(body) = read_body(s, len, &sv.stop) else {
            return;
        };
        add(&sv.stats.tcp_received);
        (sv.deliver)(from, body);
    }
}

/// The handshake: the sender it proves and the opener of its frames.
fn handshake(s: &mut TcpStream, k: &SideKey, sv: &Served) -> Option<(u64, FrameOpener)> {
    let nonce = stream::nonce().ok()?;
    s.write_all(&nonce).ok()?;
    let mut hello = [0u8; HELLO_LEN];
    if !read_full(s, &mut hello, &sv.stop, Some(Instant::now() + HANDSHAKE)) {
        return None;
    }
    stream::accept(&k.ring, sv.me, &nonce, &hello).ok()
}

fn keyed(s: &mut TcpStream, ip: IpAddr, k: &SideKey, sv: &Served) {
    let Some((from, mut opener)) = handshake(s, k, sv).filter(|(f, _)| sv.is_peer(*f, ip)) else {
        if !sv.stop.load(Ordering::Acquire) {
            add(&sv.stats.tcp_unauthenticated);
        }
        return;
    };
    let mut hdr = [0u8; HEADER_LEN];
    let mut tag = [0u8; BODY_TAG_LEN];
    while read_full(s, &mut hdr, &sv.stop, None) {
        let Ok(len) = opener.header(&hdr, MAX_FRAME as u32) else {
            add(&sv.stats.tcp_unauthenticated);
            return;
        };
        let Some(body) = read_body(s, len as usize, &sv.stop) else {
            return;
        };
        if !read_full(s, &mut tag, &sv.stop, None) {
            return;
        }
        if opener.body(&body, &tag).is_err() {
            add(&sv.stats.tcp_unauthenticated);
            return;
        }
        if !sv.is_peer(from, ip) {
            add(&sv.stats.tcp_unknown);
            return;
        }
        add(&sv.stats.tcp_received);
        (sv.deliver)(from, body);
    }
}
