//! The lane's own rings: an XDP program on the interface steers the
//! lane's frames (its DSCP, and the UDP ports its receivers listen on) to
//! AF_XDP sockets that the lane core reads, and passes everything else to
//! the regular stack; the same sockets' transmit rings send the lane's
//! frames without the kernel's UDP and IP output path. One [`XdpRings`]
//! serves every lane receiver and sender on its interface: receivers add
//! their ports ([`XdpRings::add_port`]), each frame read comes with its
//! destination port for the caller to hand on, and senders write whole
//! frames ([`XdpRings::send`]).
//!
//! - [`prog`]: the steering program (assembled here; see there why).
//! - [`bpf`]: the `XSKMAP`, loading, and attaching through a BPF link
//!   (closing it, or the process ending, detaches the program).
//! - [`frame`]: the Ethernet/IPv4/UDP view of a received frame, and the
//!   writer of a frame to send.
//! - [`neigh`]: the MACs a sent frame needs (the interface's, and the next
//!   hop's from the kernel's neighbour table).
//! - [`XdpRings`]: one AF_XDP socket per receive queue of the interface
//!   (the [`xdpilone`] crate: rings and UMEM without libbpf), read by
//!   [`XdpRings::recv_batch`] into the same [`RecvBatch`] the socket path
//!   fills, so the lane loop treats both alike.
//!
//! **Receive stamps.** The program writes `bpf_ktime_get_ns()`
//! (`CLOCK_MONOTONIC`) into 8 bytes of metadata in front of each lane
//! frame; [`XdpRings::recv_batch`] maps it to `CLOCK_REALTIME`, the lane's
//! clock, with the offset between the two clocks read at that call. A frame
//! without metadata (a driver that offers none) is stamped when it is read.
//!
//! **Fallback.** Without AF_XDP or XDP the lane receives on its socket, as
//! before; [`probe`] says which path a host can use, in one line. The
//! socket stays open on the XDP path too: it holds the multicast
//! membership, and it gets the lane frames of a receive queue without an
//! AF_XDP socket, so none is lost.

pub mod bpf;
pub mod frame;
pub mod neigh;
pub mod prog;

use crate::batch::{RecvBatch, RECV_BATCH};
use crate::socket::{monotonic_ns, realtime_ns};
use bpf::{BpfError, Link, Program, U32Set, XdpMode, XskMap};
use frame::FrameAddrs;
use std::ffi::CString;
use std::num::NonZeroU32;
use std::os::fd::RawFd;
use std::ptr::NonNull;
use xdpilone::xdp::XdpDesc;
use xdpilone::{DeviceQueue, IfInfo, RingRx, RingTx, Socket, SocketConfig, Umem, UmemConfig};

/// Receive queues looked for on an interface.
pub const MAX_QUEUES: u32 = 16;
/// Frames per receive queue (ring and UMEM). Small on purpose: the kernel
/// takes frames from the fill ring in order, so every frame of the UMEM is
/// written once per `FRAMES` packets, and on a virtual machine a write to a
/// page not written for a while can stall the vCPU for 100 µs or more
/// (`cargo run --release -p xlane-host --example page_writes` measures
/// it). 64 frames are 32 pages, a set as small as the socket path's, and
/// still hold 12.8 ms of a 200 µs lane flow, four times the longest gaps
/// seen on the test machine. A burst beyond that is counted in
/// [`XdpStats::ring_drops`].
pub const FRAMES: u32 = 64;
/// Bytes per UMEM frame.
pub const FRAME_SIZE: u32 = 2048;
/// How long [`XdpRings::open`] waits for a queue that a closed AF_XDP socket
/// still holds.
const BUSY_WAIT_NS: u64 = 2_000_000_000;
/// Lane ports one interface's program can match.
pub const MAX_PORTS: u32 = 1024;
/// Bytes of metadata the program puts in front of a frame (the stamp).
const META_LEN: usize = 8;

/// Which path the lane's frames take (receiving: `--rx`; sending:
/// `--tx`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum PathMode {
    /// The socket (the kernel's UDP path).
    Socket,
    /// AF_XDP rings (received: steered by XDP; sent: written whole).
    Xdp,
}

impl PathMode {
    /// Name on command lines and in reports.
    pub fn name(self) -> &'static str {
        match self {
            PathMode::Socket => "socket",
            PathMode::Xdp => "xdp",
        }
    }

    /// Parses `socket` or `xdp`.
    pub fn from_name(s: &str) -> Option<Self> {
        match s {
            "socket" => Some(PathMode::Socket),
            "xdp" => Some(PathMode::Xdp),
            _ => None,
        }
    }
}

impl std::str::FromStr for PathMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        PathMode::from_name(s).ok_or_else(|| format!("unknown path {s:?} (xdp, socket)"))
    }
}

/// Why the XDP path could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum XdpError {
    /// No such interface in this network namespace.
    #[error("no interface {0:?} here")]
    NoInterface(String),
    /// A BPF step failed.
    #[error(transparent)]
    Bpf(#[from] BpfError),
    /// An AF_XDP step failed.
    #[error("AF_XDP {what}: {errno}")]
    Xsk {
        /// Which step.
        what: &'static str,
        /// The kernel's error number.
        errno: i32,
    },
    /// Memory for the frames.
    #[error("UMEM of {0} bytes: {1}")]
    Memory(usize, std::io::Error),
    /// The interface's MAC could not be read.
    #[error("MAC of {0}: {1}")]
    Mac(String, std::io::Error),
}

fn xsk(what: &'static str) -> impl Fn(xdpilone::Errno) -> XdpError {
    move |e| XdpError::Xsk {
        what,
        errno: e.get_raw().abs(),
    }
}

/// Where the rings go.
#[derive(Clone, Debug)]
pub struct XdpConfig {
    /// The interface (in the calling thread's network namespace).
    pub iface: String,
    /// The lane's DSCP.
    pub dscp: u8,
    /// How the program runs (`None`: native, else generic).
    pub mode: Option<XdpMode>,
}

/// What the XDP path counted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct XdpStats {
    /// Frames read from the AF_XDP rings.
    pub frames: u64,
    /// Frames whose port no receiver claims any more (read after the
    /// receiver left).
    pub unclaimed: u64,
    /// Frames that carried the program's stamp.
    pub stamped: u64,
    /// Frames the view refused (never expected: the program checked them).
    pub malformed: u64,
    /// Frames the kernel dropped at the rings (ring full, no free frame),
    /// from the sockets' statistics when last read.
    pub ring_drops: u64,
    /// Datagrams put on a transmit ring.
    pub sent: u64,
    /// Sends whose wake-up the kernel answered "busy": the frame waited in
    /// the ring for the next one.
    pub send_busy: u64,
    /// Sends refused before the ring (no free frame, too long).
    pub send_refused: u64,
    /// Sends after which the transmit ring's `need_wakeup` flag asked for
    /// a system call (on a copy-mode driver such as veth: every send).
    pub tx_wakeups: u64,
    /// Refills of a fill ring whose `need_wakeup` flag asked for a
    /// system call.
    pub fill_wakeups: u64,
}

/// Why [`XdpRings::send`] did not put a datagram on the ring.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum XdpSendError {
    /// No such queue.
    #[error("no queue {0}")]
    NoQueue(usize),
    /// Every transmit frame is still with the kernel.
    #[error("every transmit frame of the queue is in flight")]
    NoFrame,
    /// The payload does not fit one frame.
    #[error("a payload of {0} bytes does not fit a {FRAME_SIZE}-byte frame")]
    TooLong(usize),
    /// The kernel refused the wake-up.
    #[error("AF_XDP transmit: errno {0}")]
    Kick(i32),
}

/// A page-aligned anonymous mapping for one queue's frames.
struct Area {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is plain memory owned by this value; nothing else in
// the process refers to it.
unsafe impl Send for Area {}

impl Area {
    fn new(len: usize) -> Result<Self, XdpError> {
        // SAFETY: an anonymous private mapping; the result is checked.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(XdpError::Memory(len, std::io::Error::last_os_error()));
        }
        Ok(Area {
            ptr: NonNull::new(p.cast()).expect("mmap succeeded"),
            len,
        })
    }

    fn bytes(&self) -> &[u8] {
        // SAFETY: the mapping is `len` bytes, readable, alive with `self`.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: as above, and `&mut self` makes this the only reference.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for Area {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`; the kernel keeps its own pin on
        // pages a socket still uses.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

/// One queue's AF_XDP socket: a receive ring fed from the first
/// [`FRAMES`] frames of its UMEM, a transmit ring sending from the next
/// [`FRAMES`].
struct Queue {
    id: u32,
    rx: RingRx,
    tx: RingTx,
    fq: DeviceQueue,
    /// Transmit frames not in the kernel's hands, as a stack: the frame
    /// sent last is reused first, so sending keeps writing one page.
    tx_free: [u64; FRAMES as usize],
    tx_free_len: usize,
    area: Area,
}

impl Queue {
    fn open(info: &IfInfo, id: u32) -> Result<Self, XdpError> {
        let mut area = Area::new((2 * FRAMES * FRAME_SIZE) as usize)?;
        let cfg = UmemConfig {
            fill_size: FRAMES,
            complete_size: FRAMES,
            frame_size: FRAME_SIZE,
            headroom: 0,
            flags: 0,
        };
        let region = NonNull::from(area.bytes_mut());
        // SAFETY: `area` is page aligned, `2 * FRAMES * FRAME_SIZE` bytes, and
        // lives as long as the queue (it is dropped after the rings).
        let umem = unsafe { Umem::new(cfg, region) }.map_err(xsk("UMEM registration"))?;
        let mut info = *info;
        info.set_queue(id);
        let sock = Socket::with_shared(&info, &umem).map_err(xsk("socket"))?;
        let mut fq = umem
            .fq_cq(&sock)
            .map_err(xsk("fill and completion rings"))?;
        let user = umem
            .rx_tx(
                &sock,
                &SocketConfig {
                    rx_size: NonZeroU32::new(FRAMES),
                    tx_size: NonZeroU32::new(FRAMES),
                    // The kernel says when it must be woken (a copy-mode
                    // driver such as veth: for every send, never for the
                    // fill ring), so a polling loop makes no needless call.
                    bind_flags: SocketConfig::XDP_BIND_NEED_WAKEUP,
                },
            )
            .map_err(xsk("rings"))?;
        let rx = user.map_rx().map_err(xsk("receive ring mapping"))?;
        let tx = user.map_tx().map_err(xsk("transmit ring mapping"))?;
        umem.bind(&user).map_err(xsk("bind"))?;
        {
            let mut w = fq.fill(FRAMES);
            w.insert((0..FRAMES).map(|i| u64::from(i * FRAME_SIZE)));
            w.commit();
        }
        let mut tx_free = [0u64; FRAMES as usize];
        for (i, f) in tx_free.iter_mut().enumerate() {
            // Highest first, so the first frame sent is the lowest.
            *f = u64::from((2 * FRAMES - 1 - i as u32) * FRAME_SIZE);
        }
        Ok(Queue {
            id,
            rx,
            tx,
            fq,
            tx_free,
            tx_free_len: FRAMES as usize,
            area,
        })
    }

    /// Takes back the transmit frames the kernel has finished with.
    fn reclaim(&mut self) {
        let mut c = self.fq.complete(FRAMES);
        while let Some(addr) = c.read() {
            if self.tx_free_len < self.tx_free.len() {
                self.tx_free[self.tx_free_len] = addr;
                self.tx_free_len += 1;
            }
        }
        c.release();
    }
}

/// The lane's AF_XDP rings on one interface (see the module docs).
pub struct XdpRings {
    // Detach first, then close the sockets, then free the frames.
    link: Link,
    _map: XskMap,
    ports: U32Set,
    _prog: Program,
    queues: Vec<Queue>,
    stats: XdpStats,
    recycle: [u64; RECV_BATCH],
    iface: String,
    mac: [u8; 6],
    ident: u16,
}

impl XdpRings {
    /// Opens one AF_XDP socket per receive queue of `cfg.iface`, loads the
    /// steering program and attaches it, with no lane port yet (everything
    /// passes). Everything is undone when the value is dropped (or the
    /// process ends).
    pub fn open(cfg: &XdpConfig) -> Result<Self, XdpError> {
        let name = CString::new(cfg.iface.clone())
            .map_err(|_| XdpError::NoInterface(cfg.iface.clone()))?;
        let mut info = IfInfo::invalid();
        info.from_name(&name)
            .map_err(|_| XdpError::NoInterface(cfg.iface.clone()))?;
        let mut queues = Vec::new();
        let mut busy_until = None;
        let mut id = 0;
        while id < MAX_QUEUES {
            match Queue::open(&info, id) {
                Ok(q) => queues.push(q),
                // A socket closed a moment ago still holds the queue until
                // the kernel's deferred clean-up runs: wait for it.
                Err(XdpError::Xsk {
                    what: "bind",
                    errno: libc::EBUSY,
                }) if *busy_until.get_or_insert_with(|| monotonic_ns() + BUSY_WAIT_NS)
                    > monotonic_ns() =>
                {
                    std::thread::sleep(std::time::Duration::from_millis(2));
                    continue;
                }
                // Past the last queue, bind says EINVAL.
                Err(XdpError::Xsk {
                    what: "bind",
                    errno: libc::EINVAL,
                }) if id > 0 => break,
                Err(e) => return Err(e),
            }
            id += 1;
        }
        let mac =
            neigh::interface_mac(&cfg.iface).map_err(|e| XdpError::Mac(cfg.iface.clone(), e))?;
        let map = XskMap::new(MAX_QUEUES)?;
        for q in &queues {
            map.set(q.id, q.rx.as_raw_fd())?;
        }
        let ports = U32Set::new(MAX_PORTS)?;
        let prog = Program::load_xdp(
            "xlane_steer",
            &prog::steering(cfg.dscp, ports.raw_fd(), map.raw_fd()),
        )?;
        let ifindex = info.ifindex();
        let link = match cfg.mode {
            Some(m) => prog.attach(ifindex, m)?,
            None => prog
                .attach(ifindex, XdpMode::Native)
                .or_else(|_| prog.attach(ifindex, XdpMode::Generic))?,
        };
        Ok(XdpRings {
            link,
            _map: map,
            ports,
            _prog: prog,
            queues,
            stats: XdpStats::default(),
            recycle: [0; RECV_BATCH],
            iface: cfg.iface.clone(),
            mac,
            ident: 0,
        })
    }

    /// The addresses of frames from `src` (a lane socket's address) to
    /// each of `dsts` through these rings: the interface's MAC, and each
    /// destination's next hop from the kernel's neighbour table
    /// ([`neigh::frame_addrs`]). Call it in the rings' network namespace;
    /// set-up work, not for the real-time path.
    pub fn frame_addrs(
        &self,
        src: std::net::SocketAddrV4,
        dsts: &[std::net::SocketAddrV4],
        dscp: u8,
    ) -> Result<Vec<FrameAddrs>, neigh::NeighError> {
        neigh::frame_addrs(&self.iface, self.mac, src, dsts, dscp)
    }

    /// The queue the lane sends on: the last one (on a testbed split by
    /// CPU, the lane core's).
    pub fn tx_queue(&self) -> usize {
        self.queues.len().saturating_sub(1)
    }

    /// Sends one datagram from queue `q`'s transmit ring: the frame is
    /// written into a free transmit frame and the kernel woken if the ring asks (`need_wakeup`). On a
    /// driver without zero-copy (veth) the kernel copies it into a packet
    /// and hands that straight to the driver: it skips the interface's
    /// queueing discipline, as a NIC queue of the lane's own would. No
    /// allocation; bounded work.
    pub fn send(
        &mut self,
        q: usize,
        addrs: &FrameAddrs,
        payload: &[u8],
    ) -> Result<(), XdpSendError> {
        let r = self.send_inner(q, addrs, payload);
        match r {
            Ok(()) => self.stats.sent += 1,
            Err(XdpSendError::Kick(e)) if e == libc::EAGAIN || e == libc::EBUSY => {
                self.stats.sent += 1;
                self.stats.send_busy += 1;
                return Ok(());
            }
            Err(_) => self.stats.send_refused += 1,
        }
        r
    }

    fn send_inner(
        &mut self,
        q: usize,
        addrs: &FrameAddrs,
        payload: &[u8],
    ) -> Result<(), XdpSendError> {
        let ident = self.ident;
        self.ident = self.ident.wrapping_add(1);
        let queue = self.queues.get_mut(q).ok_or(XdpSendError::NoQueue(q))?;
        queue.reclaim();
        if queue.tx_free_len == 0 {
            return Err(XdpSendError::NoFrame);
        }
        let addr = queue.tx_free[queue.tx_free_len - 1];
        let at = addr as usize;
        let room = &mut queue.area.bytes_mut()[at..at + FRAME_SIZE as usize];
        let len = frame::write(room, addrs, ident, payload)
            .ok_or(XdpSendError::TooLong(payload.len()))?;
        {
            let mut w = queue.tx.transmit(1);
            // As many ring slots as transmit frames: a free frame has one.
            if !w.insert_once(XdpDesc {
                addr,
                len: len as u32,
                options: 0,
            }) {
                return Err(XdpSendError::NoFrame);
            }
            w.commit();
        }
        queue.tx_free_len -= 1;
        if !queue.tx.needs_wakeup() {
            return Ok(());
        }
        self.stats.tx_wakeups += 1;
        // SAFETY: a zero-length sendto on the socket's own descriptor: the
        // kernel's wake-up for the transmit ring.
        let r = unsafe {
            libc::sendto(
                queue.tx.as_raw_fd(),
                std::ptr::null(),
                0,
                libc::MSG_DONTWAIT,
                std::ptr::null(),
                0,
            )
        };
        if r < 0 {
            let e = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
            return Err(XdpSendError::Kick(e));
        }
        Ok(())
    }

    /// Lane frames to UDP port `port` take the ring from now on.
    pub fn add_port(&self, port: u16) -> Result<(), XdpError> {
        Ok(self.ports.insert(prog::port_key(port))?)
    }

    /// Frames to `port` go to the regular stack again.
    pub fn remove_port(&self, port: u16) {
        self.ports.remove(prog::port_key(port));
    }

    /// Sends that woke the kernel so far ([`XdpStats::tx_wakeups`]),
    /// without reading the kernel's counters.
    pub fn tx_wakeups(&self) -> u64 {
        self.stats.tx_wakeups
    }

    /// Counts a frame read for a port nobody claims.
    pub fn count_unclaimed(&mut self) {
        self.stats.unclaimed += 1;
    }

    /// How the program runs on the interface.
    pub fn mode(&self) -> XdpMode {
        self.link.mode()
    }

    /// Receive queues with an AF_XDP socket.
    pub fn queues(&self) -> usize {
        self.queues.len()
    }

    /// The descriptor of queue `q`'s socket: readable when frames wait.
    pub fn fd(&self, q: usize) -> Option<RawFd> {
        self.queues.get(q).map(|x| x.rx.as_raw_fd())
    }

    /// What the path counted; the kernel's ring drops are read now.
    pub fn stats(&mut self) -> XdpStats {
        let mut drops = 0;
        for q in &self.queues {
            if let Ok(s) = q.fq.statistics_v2() {
                // A frame that found no free frame in the fill ring is
                // counted in `rx_dropped`; `rx_fill_ring_empty_descs` counts
                // the same event again, so it is left out.
                drops += s.rx_dropped + s.rx_ring_full;
            }
        }
        self.stats.ring_drops = drops;
        self.stats
    }

    /// Reads up to [`RECV_BATCH`] frames of queue `q` into `batch` (replacing
    /// what it held): each frame's UDP payload, source, and receive stamp,
    /// and in `ports[i]` datagram `i`'s destination port. Never blocks; no
    /// allocation; the frames go straight back to the kernel's fill ring.
    pub fn recv_batch(
        &mut self,
        q: usize,
        batch: &mut RecvBatch,
        ports: &mut [u16; RECV_BATCH],
    ) -> usize {
        batch.clear();
        let Some(queue) = self.queues.get_mut(q) else {
            return 0;
        };
        let mut got = queue.rx.receive(RECV_BATCH as u32);
        if got.capacity() == 0 {
            return 0;
        }
        let (user_ns, offset) = clock_offset();
        let mut n = 0;
        while let Some(d) = got.read() {
            let at = d.addr as usize;
            let end = at + d.len as usize;
            let base = d.addr - d.addr % u64::from(FRAME_SIZE);
            self.recycle[n] = base;
            n += 1;
            self.stats.frames += 1;
            let area = queue.area.bytes_mut();
            if at < META_LEN || end > area.len() || (at - META_LEN) < base as usize {
                self.stats.malformed += 1;
                continue;
            }
            let mut m = [0u8; META_LEN];
            m.copy_from_slice(&area[at - META_LEN..at]);
            // Zero it for the frame's next use: no stale stamp is ever read.
            area[at - META_LEN..at].fill(0);
            let mono = u64::from_ne_bytes(m);
            let stamp = (mono != 0).then(|| mono.wrapping_add(offset));
            if stamp.is_some() {
                self.stats.stamped += 1;
            }
            match frame::UdpFrame::new_checked(&queue.area.bytes()[at..end]) {
                Ok(f) => {
                    ports[batch.len()] = f.dst().port();
                    // At most RECV_BATCH frames were taken: always room.
                    batch.push(f.payload(), f.src(), stamp, user_ns);
                }
                Err(_) => self.stats.malformed += 1,
            }
        }
        got.release();
        drop(got);
        let mut w = queue.fq.fill(n as u32);
        // The fill ring holds every frame, so there is always room.
        w.insert(self.recycle[..n].iter().copied());
        w.commit();
        drop(w);
        if queue.fq.needs_wakeup() {
            self.stats.fill_wakeups += 1;
            queue.fq.wake();
        }
        batch.len()
    }
}

/// A bracket of clock readings wider than this was interrupted.
const CLOCK_BRACKET_NS: u64 = 1_000;

/// `CLOCK_REALTIME` now, and `CLOCK_REALTIME − CLOCK_MONOTONIC`: a
/// monotonic reading bracketed by two real-time ones, read again (up to
/// three times in all) when an interrupt widened the bracket, since that
/// would skew the offset by the interrupt's length.
fn clock_offset() -> (u64, u64) {
    let mut best = (u64::MAX, 0, 0);
    for _ in 0..3 {
        let a = realtime_ns();
        let m = monotonic_ns();
        let b = realtime_ns();
        let gap = b.wrapping_sub(a);
        if gap < best.0 {
            best = (gap, a + gap / 2, m);
        }
        if gap <= CLOCK_BRACKET_NS {
            break;
        }
    }
    let (_, rt, mono) = best;
    (rt, rt.wrapping_sub(mono))
}

/// Which receive path this host can give the lane, checked without
/// touching any interface: an AF_XDP socket can be made and the kernel's
/// verifier accepts the steering program.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RxPathProbe {
    /// AF_XDP with XDP steering.
    Xdp,
    /// The socket path, and why not XDP.
    Socket(String),
}

/// Checks [`RxPathProbe`] on this host.
pub fn probe() -> RxPathProbe {
    // SAFETY: plain socket call; the descriptor is closed right away.
    let fd = unsafe { libc::socket(libc::AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return RxPathProbe::Socket(format!(
            "no AF_XDP sockets: {}",
            std::io::Error::last_os_error()
        ));
    }
    // SAFETY: the descriptor made above.
    unsafe { libc::close(fd) };
    let maps = XskMap::new(1).and_then(|x| Ok((x, U32Set::new(1)?)));
    let (map, ports) = match maps {
        Ok(m) => m,
        Err(e) => return RxPathProbe::Socket(e.to_string()),
    };
    let insns = prog::steering(46, ports.raw_fd(), map.raw_fd());
    match Program::load_xdp("xlane_probe", &insns) {
        Ok(_) => RxPathProbe::Xdp,
        Err(e) => RxPathProbe::Socket(e.to_string()),
    }
}
