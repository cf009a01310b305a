//! Batched datagram I/O: the one place that calls `recvmmsg` and
//! `sendmmsg`.
//!
//! - [`RecvBatch`] reads what waits on a UDP socket with one `recvmmsg`
//!   into storage allocated once: each datagram's bytes, its source (IPv4
//!   or IPv6) and the receive stamps in its control data. The lane reads
//!   its sockets into one ([`crate::socket::LaneSocket::recv_batch`], which
//!   adds the user-space time and the lane's view of the stamps) and its
//!   AF_XDP rings too; X-Raft's plain UDP transport reads its socket into
//!   one sized for Raft's datagrams.
//! - [`send_mmsg_all`] sends prepared messages with `sendmmsg`, going on
//!   past a message the kernel refuses; [`SendQueue`] queues datagrams to
//!   any addresses and sends them with it.
//!
//! A call that returns fewer datagrams than the batch holds found the
//! socket empty, so a driver's turn reads a socket with one system call
//! instead of ending on a read that finds nothing.

use std::io;
use std::mem::{size_of, MaybeUninit};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::RawFd;

/// Datagrams one [`RecvBatch::recv`] reads at most (and the lane's batch
/// size).
pub const RECV_BATCH: usize = 16;
/// Messages one `sendmmsg` of a [`SendQueue`] or of
/// [`crate::socket::LaneSocket::send_many`] carries.
pub const SEND_BATCH: usize = 8;
/// Bytes per datagram buffer of the lane's [`RecvBatch::new`]: one more
/// than the largest lane frame with its MAC trailer, so a longer datagram
/// shows as cut.
pub const BATCH_BUF_LEN: usize = xlane_wire::MAX_FRAME_LEN + xlane_auth::TRAILER_LEN + 1;
/// Room for one datagram's control data (its receive stamps).
pub(crate) const CMSG_SPACE: usize = 256;

/// What one read left about datagram `i` of a batch.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Meta {
    /// Bytes kept (at most the buffer's length).
    pub len: usize,
    /// The datagram was longer than the buffer.
    pub truncated: bool,
    /// The kernel's software receive stamp, if any.
    pub software_ns: Option<u64>,
    /// The NIC's hardware receive stamp, if any.
    pub hardware_ns: Option<u64>,
    /// `CLOCK_REALTIME` ns when the read returned (0 if nobody asked).
    pub user_ns: u64,
}

const NO_META: Meta = Meta {
    len: 0,
    truncated: false,
    software_ns: None,
    hardware_ns: None,
    user_ns: 0,
};

/// Storage for one `recvmmsg`: up to [`RECV_BATCH`] datagram buffers with
/// their control data and source addresses, allocated once and reused by
/// every read.
pub struct RecvBatch {
    buf_len: usize,
    bufs: Box<[u8]>,
    cmsgs: Box<[[u64; CMSG_SPACE / 8]]>,
    addrs: Box<[MaybeUninit<libc::sockaddr_storage>]>,
    meta: Box<[Meta]>,
    n: usize,
}

impl Default for RecvBatch {
    fn default() -> Self {
        RecvBatch::new()
    }
}

impl RecvBatch {
    /// The lane's batch: [`RECV_BATCH`] buffers of [`BATCH_BUF_LEN`] bytes
    /// (about 25 KiB).
    pub fn new() -> Self {
        RecvBatch::with_capacity(RECV_BATCH, BATCH_BUF_LEN)
    }

    /// Room for `slots` datagrams (1..=[`RECV_BATCH`]) of up to `buf_len`
    /// bytes each; a longer one is cut and marked.
    pub fn with_capacity(slots: usize, buf_len: usize) -> Self {
        let slots = slots.clamp(1, RECV_BATCH);
        RecvBatch {
            buf_len,
            bufs: vec![0; slots * buf_len].into_boxed_slice(),
            cmsgs: vec![[0; CMSG_SPACE / 8]; slots].into_boxed_slice(),
            addrs: vec![MaybeUninit::zeroed(); slots].into_boxed_slice(),
            meta: vec![NO_META; slots].into_boxed_slice(),
            n: 0,
        }
    }

    /// Datagrams one read takes at most.
    pub fn capacity(&self) -> usize {
        self.meta.len()
    }

    /// Reads what waits on `fd` with one `recvmmsg` (never blocks),
    /// replacing what the batch held; returns how many datagrams (0 when
    /// none waited). An error (e.g. an ICMP error of an earlier send) is
    /// returned once and consumed by the kernel. No allocation; bounded
    /// work (one system call, one pass over each datagram's control data).
    pub fn recv(&mut self, fd: RawFd) -> io::Result<usize> {
        self.recv_with_clock(fd, None)
    }

    /// [`Self::recv`], reading `clock` once right after the call returned
    /// (each datagram's user-space time).
    pub(crate) fn recv_with_clock(
        &mut self,
        fd: RawFd,
        clock: Option<fn() -> u64>,
    ) -> io::Result<usize> {
        self.n = 0;
        let slots = self.capacity();
        let mut iov: [libc::iovec; RECV_BATCH] = [libc::iovec {
            iov_base: std::ptr::null_mut(),
            iov_len: 0,
        }; RECV_BATCH];
        // SAFETY: an all-zero mmsghdr is valid; every pointer is set below
        // to storage in `self`, which outlives the call.
        let mut hdrs: [libc::mmsghdr; RECV_BATCH] = unsafe { std::mem::zeroed() };
        for (i, buf) in self.bufs.chunks_mut(self.buf_len).enumerate().take(slots) {
            iov[i].iov_base = buf.as_mut_ptr().cast();
            iov[i].iov_len = buf.len();
            let h = &mut hdrs[i].msg_hdr;
            h.msg_name = self.addrs[i].as_mut_ptr().cast();
            h.msg_namelen = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
            h.msg_iov = &mut iov[i];
            h.msg_iovlen = 1;
            h.msg_control = self.cmsgs[i].as_mut_ptr().cast();
            h.msg_controllen = CMSG_SPACE as _;
        }
        // SAFETY: `slots` valid headers; MSG_DONTWAIT never blocks.
        let r = unsafe {
            libc::recvmmsg(
                fd,
                hdrs.as_mut_ptr(),
                slots as libc::c_uint,
                libc::MSG_DONTWAIT | libc::MSG_TRUNC,
                std::ptr::null_mut(),
            )
        };
        let user_ns = clock.map_or(0, |c| c());
        if r < 0 {
            let e = io::Error::last_os_error();
            return match e.kind() {
                io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(0),
                _ => Err(e),
            };
        }
        let n = r as usize;
        for (i, h) in hdrs.iter().enumerate().take(n) {
            let (software_ns, hardware_ns) = stamps_of(&h.msg_hdr);
            let full = h.msg_len as usize;
            self.meta[i] = Meta {
                len: full.min(self.buf_len),
                truncated: full > self.buf_len || h.msg_hdr.msg_flags & libc::MSG_TRUNC != 0,
                software_ns,
                hardware_ns,
                user_ns,
            };
        }
        self.n = n;
        Ok(n)
    }

    /// Empties the batch (the next reader fills it from the start).
    pub(crate) fn clear(&mut self) {
        self.n = 0;
    }

    /// Appends one datagram read by another path than `recvmmsg` (the
    /// AF_XDP ring): its bytes (cut to the buffer), source, kernel stamp
    /// and the user-space time. Returns false when the batch is full.
    pub(crate) fn push(
        &mut self,
        bytes: &[u8],
        src: SocketAddrV4,
        software_ns: Option<u64>,
        user_ns: u64,
    ) -> bool {
        let i = self.n;
        if i >= self.capacity() {
            return false;
        }
        let len = bytes.len().min(self.buf_len);
        let start = i * self.buf_len;
        self.bufs[start..start + len].copy_from_slice(&bytes[..len]);
        to_storage(SocketAddr::V4(src), &mut self.addrs[i]);
        self.meta[i] = Meta {
            len,
            truncated: bytes.len() > self.buf_len,
            software_ns,
            hardware_ns: None,
            user_ns,
        };
        self.n += 1;
        true
    }

    /// Datagrams the last read took.
    pub fn len(&self) -> usize {
        self.n
    }

    /// Whether the last read took nothing.
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// Datagram `i` of the last read: its source (`None`: not an IP
    /// address) and bytes (cut to the buffer).
    pub fn datagram(&self, i: usize) -> Option<(Option<SocketAddr>, &[u8])> {
        if i >= self.n {
            return None;
        }
        // SAFETY: recvmmsg or `push` wrote the address of message i
        // (zeroed before the first read, so always initialised).
        let src = from_storage(unsafe { self.addrs[i].assume_init_ref() });
        let start = i * self.buf_len;
        Some((src, &self.bufs[start..start + self.meta[i].len]))
    }

    /// What the last read left about datagram `i` (`i < len()`).
    pub(crate) fn meta(&self, i: usize) -> Option<Meta> {
        (i < self.n).then(|| self.meta[i])
    }
}

/// Sends every message of `hdrs` on `fd` with `sendmmsg`, going on past a
/// message the kernel refuses (e.g. `ENOBUFS`, or an ICMP error of an
/// earlier send); returns how many it took.
///
/// # Safety
/// Every header's name, iovec and buffer pointers must be valid for reads
/// for the call.
pub unsafe fn send_mmsg_all(fd: RawFd, hdrs: &mut [libc::mmsghdr], flags: libc::c_int) -> usize {
    let (mut sent, mut off) = (0, 0);
    while off < hdrs.len() {
        // SAFETY: the caller vouches for the headers; the kernel only reads
        // what they point to.
        let r = unsafe {
            libc::sendmmsg(
                fd,
                hdrs[off..].as_mut_ptr(),
                (hdrs.len() - off) as libc::c_uint,
                flags,
            )
        };
        if r <= 0 {
            // This one was refused; go on with the next.
            off += 1;
            continue;
        }
        sent += r as usize;
        off += r as usize;
    }
    sent
}

/// Datagrams queued for `sendmmsg` ([`SendQueue::flush`]): a turn's
/// messages to every peer leave in as few system calls as [`SEND_BATCH`]
/// allows. The queue's storage is kept between flushes.
#[derive(Default)]
pub struct SendQueue {
    queued: Vec<(SocketAddr, Vec<u8>)>,
}

impl SendQueue {
    /// Queues `bytes` for `to`.
    pub fn push(&mut self, to: SocketAddr, bytes: Vec<u8>) {
        self.queued.push((to, bytes));
    }

    /// Sends what is queued on `fd` ([`SEND_BATCH`] datagrams per
    /// `sendmmsg`); returns how many the kernel took and how many it
    /// refused (e.g. a full send buffer: dropped like lost datagrams).
    pub fn flush(&mut self, fd: RawFd) -> (usize, usize) {
        let (mut sent, mut refused) = (0, 0);
        for group in self.queued.chunks(SEND_BATCH) {
            let mut addrs = [MaybeUninit::<libc::sockaddr_storage>::zeroed(); SEND_BATCH];
            let mut iov = [libc::iovec {
                iov_base: std::ptr::null_mut(),
                iov_len: 0,
            }; SEND_BATCH];
            // SAFETY: an all-zero mmsghdr is valid; pointers are set below.
            let mut hdrs: [libc::mmsghdr; SEND_BATCH] = unsafe { std::mem::zeroed() };
            for (i, (to, bytes)) in group.iter().enumerate() {
                let len = to_storage(*to, &mut addrs[i]);
                iov[i].iov_base = bytes.as_ptr() as *mut libc::c_void;
                iov[i].iov_len = bytes.len();
                let h = &mut hdrs[i].msg_hdr;
                h.msg_name = addrs[i].as_mut_ptr().cast();
                h.msg_namelen = len;
                h.msg_iov = &mut iov[i];
                h.msg_iovlen = 1;
            }
            // SAFETY: the headers point to the queued buffers and `addrs`,
            // alive for the call.
            let took = unsafe { send_mmsg_all(fd, &mut hdrs[..group.len()], libc::MSG_DONTWAIT) };
            sent += took;
            refused += group.len() - took;
        }
        self.queued.clear();
        (sent, refused)
    }
}

/// Writes `a` into `ss`; returns the length the kernel is to read.
pub(crate) fn to_storage(
    a: SocketAddr,
    ss: &mut MaybeUninit<libc::sockaddr_storage>,
) -> libc::socklen_t {
    match a {
        SocketAddr::V4(v4) => {
            // SAFETY: sockaddr_storage is large enough for a sockaddr_in.
            let sin = unsafe { &mut *ss.as_mut_ptr().cast::<libc::sockaddr_in>() };
            sin.sin_family = libc::AF_INET as libc::sa_family_t;
            sin.sin_port = v4.port().to_be();
            sin.sin_addr = libc::in_addr {
                s_addr: u32::from(*v4.ip()).to_be(),
            };
            size_of::<libc::sockaddr_in>() as libc::socklen_t
        }
        SocketAddr::V6(v6) => {
            // SAFETY: sockaddr_storage is large enough for a sockaddr_in6.
            let sin6 = unsafe { &mut *ss.as_mut_ptr().cast::<libc::sockaddr_in6>() };
            sin6.sin6_family = libc::AF_INET6 as libc::sa_family_t;
            sin6.sin6_port = v6.port().to_be();
            sin6.sin6_flowinfo = v6.flowinfo();
            sin6.sin6_addr = libc::in6_addr {
                s6_addr: v6.ip().octets(),
            };
            sin6.sin6_scope_id = v6.scope_id();
            size_of::<libc::sockaddr_in6>() as libc::socklen_t
        }
    }
}

/// A socket address from the kernel's storage.
pub(crate) fn from_storage(ss: &libc::sockaddr_storage) -> Option<SocketAddr> {
    match ss.ss_family as libc::c_int {
        libc::AF_INET => {
            // SAFETY: the family says it holds a sockaddr_in.
            let a = unsafe { &*(ss as *const libc::sockaddr_storage).cast::<libc::sockaddr_in>() };
            let ip = Ipv4Addr::from(u32::from_be(a.sin_addr.s_addr));
            Some(SocketAddr::V4(SocketAddrV4::new(
                ip,
                u16::from_be(a.sin_port),
            )))
        }
        libc::AF_INET6 => {
            // SAFETY: the family says it holds a sockaddr_in6.
            let a = unsafe { &*(ss as *const libc::sockaddr_storage).cast::<libc::sockaddr_in6>() };
            let ip = Ipv6Addr::from(a.sin6_addr.s6_addr);
            Some(SocketAddr::V6(SocketAddrV6::new(
                ip,
                u16::from_be(a.sin6_port),
                a.sin6_flowinfo,
                a.sin6_scope_id,
            )))
        }
        _ => None,
    }
}

/// The software and hardware receive stamps in a message's control data.
pub(crate) fn stamps_of(msg: &libc::msghdr) -> (Option<u64>, Option<u64>) {
    let (mut software_ns, mut hardware_ns) = (None, None);
    // SAFETY: the CMSG_* macros walk the control buffer the kernel filled
    // (msg_controllen says how much of it).
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_TIMESTAMPING {
                let (sw, hw) = timestamping_of(c);
                software_ns = sw.or(software_ns);
                hardware_ns = hw.or(hardware_ns);
            }
            c = libc::CMSG_NXTHDR(msg, c);
        }
    }
    (software_ns, hardware_ns)
}

/// The software and hardware stamps of one `SCM_TIMESTAMPING` control
/// message (`None` where the kernel left a stamp zero).
///
/// # Safety
/// `c` points to a valid `SCM_TIMESTAMPING` control message.
pub(crate) unsafe fn timestamping_of(c: *const libc::cmsghdr) -> (Option<u64>, Option<u64>) {
    let data = libc::CMSG_DATA(c) as *const libc::timespec;
    let nonzero = |t: libc::timespec| (t.tv_sec != 0 || t.tv_nsec != 0).then(|| ts_ns(&t));
    (
        nonzero(std::ptr::read_unaligned(data)),
        nonzero(std::ptr::read_unaligned(data.add(2))),
    )
}

/// A `timespec` in nanoseconds.
fn ts_ns(t: &libc::timespec) -> u64 {
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

#[cfg(test)]
mod tests;
