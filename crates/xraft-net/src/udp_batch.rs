//! Reading a plain UDP socket with one `recvmmsg` per call: the datagrams
//! that wait, up to [`UDP_BATCH`], with their senders (IPv4 or IPv6). A call
//! that returns fewer than a full batch found the socket empty, so a driver
//! turn reads its socket with one system call instead of a read that finds
//! nothing after the last datagram. Sending, [`SendQueue`] sends a Ready's
//! datagrams to every peer with one `sendmmsg`.

use std::mem::{size_of, MaybeUninit};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::RawFd;

/// Datagrams one [`UdpBatch::recv`] reads at most.
pub const UDP_BATCH: usize = 8;

/// Buffers and addresses for one `recvmmsg`, allocated once and reused.
pub struct UdpBatch {
    buf_len: usize,
    bufs: Vec<u8>,
    addrs: [MaybeUninit<libc::sockaddr_storage>; UDP_BATCH],
    lens: [usize; UDP_BATCH],
    n: usize,
}

impl UdpBatch {
    /// Room for [`UDP_BATCH`] datagrams of up to `buf_len` bytes each.
    pub fn new(buf_len: usize) -> UdpBatch {
        UdpBatch {
            buf_len,
            bufs: vec![0; buf_len * UDP_BATCH],
            addrs: [MaybeUninit::zeroed(); UDP_BATCH],
            lens: [0; UDP_BATCH],
            n: 0,
        }
    }

    /// Reads what waits on `fd` without blocking; returns how many datagrams
    /// (0 when none waited). An error (e.g. an ICMP error of an earlier send)
    /// is returned once and consumed by the kernel.
    pub fn recv(&mut self, fd: RawFd) -> std::io::Result<usize> {
        self.n = 0;
        let mut iov = [libc::iovec {
            iov_base: std::ptr::null_mut(),
            iov_len: 0,
        }; UDP_BATCH];
        // SAFETY: an all-zero mmsghdr is valid; the pointers are set below
        // to storage in `self`, which outlives the call.
        let mut hdrs: [libc::mmsghdr; UDP_BATCH] = unsafe { std::mem::zeroed() };
        for (i, chunk) in self.bufs.chunks_mut(self.buf_len).enumerate() {
            iov[i].iov_base = chunk.as_mut_ptr().cast();
            iov[i].iov_len = chunk.len();
            let h = &mut hdrs[i].msg_hdr;
            h.msg_name = self.addrs[i].as_mut_ptr().cast();
            h.msg_namelen = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
            h.msg_iov = &mut iov[i];
            h.msg_iovlen = 1;
        }
        // SAFETY: UDP_BATCH valid headers; MSG_DONTWAIT never blocks.
        let r = unsafe {
            libc::recvmmsg(
                fd,
                hdrs.as_mut_ptr(),
                UDP_BATCH as libc::c_uint,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
            )
        };
        if r < 0 {
            let e = std::io::Error::last_os_error();
            return match e.kind() {
                std::io::ErrorKind::WouldBlock => Ok(0),
                _ => Err(e),
            };
        }
        let n = r as usize;
        for (i, h) in hdrs.iter().enumerate().take(n) {
            self.lens[i] = (h.msg_len as usize).min(self.buf_len);
        }
        self.n = n;
        Ok(n)
    }

    /// Datagram `i` of the last call: its sender (`None`: not an IP
    /// address) and bytes.
    pub fn get(&self, i: usize) -> Option<(Option<SocketAddr>, &[u8])> {
        if i >= self.n {
            return None;
        }
        // SAFETY: recvmmsg wrote the address of message i (zeroed before
        // the first call, so always initialised).
        let addr = from_storage(unsafe { self.addrs[i].assume_init_ref() });
        let start = i * self.buf_len;
        Some((addr, &self.bufs[start..start + self.lens[i]]))
    }
}

/// Datagrams queued for one `sendmmsg` ([`SendQueue::flush`]): a Ready's
/// messages to every peer leave in one system call. The queue's storage is
/// kept between flushes.
#[derive(Default)]
pub struct SendQueue {
    queued: Vec<(SocketAddr, Vec<u8>)>,
}

impl SendQueue {
    /// Queues `bytes` for `to`.
    pub fn push(&mut self, to: SocketAddr, bytes: Vec<u8>) {
        self.queued.push((to, bytes));
    }

    /// Sends what is queued on `fd` ([`UDP_BATCH`] datagrams per
    /// `sendmmsg`); returns how many the kernel took and how many it
    /// refused (e.g. a full send buffer: dropped like lost datagrams).
    pub fn flush(&mut self, fd: RawFd) -> (usize, usize) {
        let (mut sent, mut refused) = (0, 0);
        for group in self.queued.chunks(UDP_BATCH) {
            let mut addrs = [MaybeUninit::<libc::sockaddr_storage>::zeroed(); UDP_BATCH];
            let mut iov = [libc::iovec {
                iov_base: std::ptr::null_mut(),
                iov_len: 0,
            }; UDP_BATCH];
            // SAFETY: an all-zero mmsghdr is valid; pointers are set below.
            let mut hdrs: [libc::mmsghdr; UDP_BATCH] = unsafe { std::mem::zeroed() };
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
            let took = unsafe {
                xlane_host::socket::send_mmsg_all(fd, &mut hdrs[..group.len()], libc::MSG_DONTWAIT)
            };
            sent += took;
            refused += group.len() - took;
        }
        self.queued.clear();
        (sent, refused)
    }
}

/// Writes `a` into `ss`; returns the length the kernel is to read.
fn to_storage(a: SocketAddr, ss: &mut MaybeUninit<libc::sockaddr_storage>) -> libc::socklen_t {
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
fn from_storage(ss: &libc::sockaddr_storage) -> Option<SocketAddr> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::UdpSocket;
    use std::os::fd::AsRawFd;

    #[test]
    fn reads_what_waits_with_senders_v4_and_v6() {
        for (bind, peer) in [("127.0.0.1:0", "127.0.0.1:0"), ("[::1]:0", "[::1]:0")] {
            let Ok(rx) = UdpSocket::bind(bind) else {
                continue; // no IPv6 loopback here
            };
            let tx = UdpSocket::bind(peer).unwrap();
            let to = rx.local_addr().unwrap();
            let mut b = UdpBatch::new(64);
            assert_eq!(b.recv(rx.as_raw_fd()).unwrap(), 0, "{bind}: empty");
            assert!(b.get(0).is_none());
            let sent: Vec<Vec<u8>> = (0..UDP_BATCH + 3).map(|i| vec![i as u8; i + 1]).collect();
            for d in &sent {
                tx.send_to(d, to).unwrap();
            }
            // Loopback delivers at once; read until all came (two batches).
            let mut got = Vec::new();
            for _ in 0..1000 {
                let n = b.recv(rx.as_raw_fd()).unwrap();
                for i in 0..n {
                    let (src, bytes) = b.get(i).unwrap();
                    assert_eq!(src, Some(tx.local_addr().unwrap()), "{bind}");
                    got.push(bytes.to_vec());
                }
                if got.len() == sent.len() {
                    break;
                }
            }
            assert_eq!(got, sent, "{bind}");
            // A datagram longer than a buffer is cut to it.
            tx.send_to(&[7u8; 100], to).unwrap();
            let mut n = 0;
            for _ in 0..1000 {
                n = b.recv(rx.as_raw_fd()).unwrap();
                if n > 0 {
                    break;
                }
            }
            assert_eq!(n, 1);
            assert_eq!(b.get(0).unwrap().1.len(), 64);
        }
    }

    #[test]
    fn a_queue_leaves_in_order_to_each_address() {
        for bind in ["127.0.0.1:0", "[::1]:0"] {
            let Ok(tx) = UdpSocket::bind(bind) else {
                continue; // no IPv6 loopback here
            };
            let rx: Vec<UdpSocket> = (0..3).map(|_| UdpSocket::bind(bind).unwrap()).collect();
            let mut q = SendQueue::default();
            // More than one sendmmsg's worth, spread over three receivers.
            for i in 0..(UDP_BATCH + 4) {
                q.push(rx[i % 3].local_addr().unwrap(), vec![i as u8; i + 1]);
            }
            assert_eq!(q.flush(tx.as_raw_fd()), (UDP_BATCH + 4, 0), "{bind}");
            assert_eq!(q.flush(tx.as_raw_fd()), (0, 0), "{bind}: emptied");
            for (r, sock) in rx.iter().enumerate() {
                let mut b = UdpBatch::new(64);
                let mut got = Vec::new();
                for _ in 0..1000 {
                    let n = b.recv(sock.as_raw_fd()).unwrap();
                    got.extend((0..n).map(|i| b.get(i).unwrap().1.to_vec()));
                    if n == 0 && !got.is_empty() {
                        break;
                    }
                }
                let want: Vec<Vec<u8>> = (0..(UDP_BATCH + 4))
                    .filter(|i| i % 3 == r)
                    .map(|i| vec![i as u8; i + 1])
                    .collect();
                assert_eq!(got, want, "{bind}: receiver {r}");
            }
        }
    }
}
