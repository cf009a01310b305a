//! The lane's UDP socket: express marking, kernel timestamps, multicast.
//!
//! A [`LaneSocket`] is an IPv4 UDP socket set up the way the lane needs it:
//!
//! - **Marking.** Express packets carry a DSCP in the IP TOS byte (the switch
//!   classifies on it) and an `SO_PRIORITY` (the host's own qdiscs can use
//!   it). The TOS is set first and the priority second, because setting
//!   `IP_TOS` overwrites `SO_PRIORITY` on Linux; both are read back and a
//!   mismatch is an error.
//! - **Timestamps.** `SO_TIMESTAMPING` asks for hardware receive stamps
//!   (used when the NIC offers them) and software receive stamps (always);
//!   [`LaneSocket::recv`] returns the stamp with its source. Stamps are
//!   `CLOCK_REALTIME` nanoseconds, the clock the kernel uses for them.
//!   [`LaneSocket::enable_tx_timestamps`] adds transmit stamps (software, and
//!   hardware when the NIC is set up for them), read back from the error
//!   queue with [`LaneSocket::recv_tx_stamp`]; [`LaneSocket::recv_stamps`]
//!   returns the software and hardware receive stamps apart, because the
//!   hardware one is on the NIC's clock and only comparable with another
//!   hardware stamp.
//! - **Multicast.** Joining a group on an interface, choosing the outgoing
//!   multicast interface, and turning loopback of own packets off.
//! - **Receive mode.** Blocking (interrupt-driven: the thread sleeps until
//!   the packet's softirq wakes it) or non-blocking (the caller busy-polls).
//!
//! [`LaneSocket::recv`] does no allocation: the control-message buffer is
//! part of the socket value.

use crate::batch::{send_mmsg_all, stamps_of, timestamping_of, RecvBatch, CMSG_SPACE, SEND_BATCH};
use std::io;
use std::mem::{size_of, MaybeUninit};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

/// DSCP "expedited forwarding" (46), the default express class.
pub const DSCP_EXPRESS: u8 = 46;
/// The socket priority the lane marks express packets with.
pub const EXPRESS_PRIORITY: u32 = 6;
/// The TTL of the lane's multicast datagrams (a few routed hops at most).
pub const LANE_MULTICAST_TTL: u8 = 4;

/// Where a receive timestamp came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StampSource {
    /// Stamped by the NIC (raw hardware clock).
    Hardware,
    /// Stamped by the kernel when the packet entered the stack.
    Kernel,
    /// No kernel stamp arrived; the user-space time after `recvmsg` is used.
    User,
}

/// How the socket should be opened.
#[derive(Clone, Debug)]
pub struct SocketConfig {
    /// Local address and port to bind (`0.0.0.0:port` for multicast receivers).
    pub bind: SocketAddrV4,
    /// DSCP to mark outgoing packets with (0 = best effort).
    pub dscp: u8,
    /// `SO_PRIORITY` for outgoing packets.
    pub priority: u32,
    /// Request kernel/NIC receive timestamps.
    pub rx_timestamps: bool,
    /// Non-blocking socket, for a busy-polling caller.
    pub nonblocking: bool,
    /// Join this multicast group on the interface with this address.
    pub join: Option<(Ipv4Addr, Ipv4Addr)>,
    /// Send multicast out of the interface with this address.
    pub multicast_if: Option<Ipv4Addr>,
    /// Receive buffer size in bytes (0 = leave the default).
    pub rcvbuf: usize,
    /// Receive timeout for a blocking socket, in microseconds (0 = none).
    pub recv_timeout_us: u64,
}

impl SocketConfig {
    /// An express-marked socket bound to `bind`, blocking, with receive stamps.
    pub fn express(bind: SocketAddrV4) -> Self {
        SocketConfig {
            bind,
            dscp: DSCP_EXPRESS,
            priority: EXPRESS_PRIORITY,
            rx_timestamps: true,
            nonblocking: false,
            join: None,
            multicast_if: None,
            rcvbuf: 0,
            recv_timeout_us: 0,
        }
    }

    /// A plain best-effort socket bound to `bind` (DSCP 0, priority 0).
    pub fn plain(bind: SocketAddrV4) -> Self {
        SocketConfig {
            dscp: 0,
            priority: 0,
            ..SocketConfig::express(bind)
        }
    }
}

/// Why a socket could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum SocketError {
    /// A system call failed.
    #[error("{what}: {source}")]
    Sys {
        /// Which step failed.
        what: &'static str,
        /// The OS error.
        source: io::Error,
    },
    /// A value written with setsockopt read back differently.
    #[error("{what} read back as {found}, expected {expected}")]
    ReadBack {
        /// The option.
        what: &'static str,
        /// The value read back.
        found: u32,
        /// The value set.
        expected: u32,
    },
    /// The DSCP does not fit in 6 bits.
    #[error("DSCP {0} is out of range 0..=63")]
    BadDscp(u8),
}

/// One received datagram.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Received {
    /// Bytes written into the caller's buffer.
    pub len: usize,
    /// The datagram was longer than the buffer and was cut.
    pub truncated: bool,
    /// Sender address.
    pub src: SocketAddrV4,
    /// Receive time, `CLOCK_REALTIME` ns (see `source`).
    pub rx_ns: u64,
    /// Where `rx_ns` came from.
    pub source: StampSource,
    /// `CLOCK_REALTIME` ns read right after `recvmsg` returned.
    pub user_ns: u64,
}

/// A UDP socket set up for the lane (see the module docs).
pub struct LaneSocket {
    fd: OwnedFd,
    cmsg: [u64; CMSG_SPACE / 8],
    rx_timestamps: bool,
    tx_timestamps: bool,
}

/// The receive stamps of one datagram, software and hardware kept apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RxStamps {
    /// The datagram as [`LaneSocket::recv`] reports it (best stamp in `rx_ns`).
    pub received: Received,
    /// The kernel's software receive stamp (`CLOCK_REALTIME` ns), if any.
    pub software_ns: Option<u64>,
    /// The NIC's raw hardware receive stamp (the NIC's clock), if any.
    pub hardware_ns: Option<u64>,
}

/// One datagram of [`LaneSocket::drain`].
#[derive(Debug, Clone, Copy)]
pub struct Datagram<'a> {
    /// Sender address.
    pub src: SocketAddrV4,
    /// Arrival, `CLOCK_REALTIME` ns: the kernel's software stamp, else the
    /// time `recvmsg` returned (a NIC stamp is on the NIC's clock, so it is
    /// not used here).
    pub rx_ns: u64,
    /// Whether `rx_ns` is the kernel's stamp.
    pub kernel_stamped: bool,
    /// Its bytes; `None` if it was longer than the buffer (cut).
    pub bytes: Option<&'a [u8]>,
}

/// `SO_MEMINFO` (not in every libc binding).
const SO_MEMINFO: libc::c_int = 55;

impl RecvBatch {
    /// Datagram `i` of the last read (`i < len()`), as
    /// [`LaneSocket::recv_stamps`] would have returned it: the lane's view
    /// of its stamps (the best in `received.rx_ns`) and its IPv4 source;
    /// its bytes are `&bytes[..received.len]`.
    pub fn get(&self, i: usize) -> Option<(RxStamps, &[u8])> {
        let m = self.meta(i)?;
        let (src, bytes) = self.datagram(i)?;
        let src = match src {
            Some(std::net::SocketAddr::V4(a)) => a,
            _ => SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0),
        };
        let (rx_ns, source) = best_stamp(m.hardware_ns, m.software_ns, m.user_ns);
        Some((
            RxStamps {
                received: Received {
                    len: m.len,
                    truncated: m.truncated,
                    src,
                    rx_ns,
                    source,
                    user_ns: m.user_ns,
                },
                software_ns: m.software_ns,
                hardware_ns: m.hardware_ns,
            },
            bytes,
        ))
    }
}

/// One transmit timestamp read from the socket's error queue.
///
/// With `SOF_TIMESTAMPING_OPT_ID` the kernel numbers the datagrams sent on a
/// socket from 0 (counted from [`LaneSocket::enable_tx_timestamps`]); `id`
/// is that number. A datagram can produce one software and one hardware
/// stamp, each in its own error-queue message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TxStamp {
    /// The kernel's per-socket datagram number (`ee_data`).
    pub id: u32,
    /// Software transmit stamp (`CLOCK_REALTIME` ns), if this message has one.
    pub software_ns: Option<u64>,
    /// Raw hardware transmit stamp (the NIC's clock), if this message has one.
    pub hardware_ns: Option<u64>,
}

const RX_STAMP_FLAGS: libc::c_uint = libc::SOF_TIMESTAMPING_RX_SOFTWARE
    | libc::SOF_TIMESTAMPING_SOFTWARE
    | libc::SOF_TIMESTAMPING_RX_HARDWARE
    | libc::SOF_TIMESTAMPING_RAW_HARDWARE;

const TX_STAMP_FLAGS: libc::c_uint = libc::SOF_TIMESTAMPING_TX_SOFTWARE
    | libc::SOF_TIMESTAMPING_TX_HARDWARE
    | libc::SOF_TIMESTAMPING_SOFTWARE
    | libc::SOF_TIMESTAMPING_RAW_HARDWARE
    | libc::SOF_TIMESTAMPING_OPT_ID
    | libc::SOF_TIMESTAMPING_OPT_TSONLY;

/// `ee_info` of a stamp taken when the packet left through the device.
const SCM_TSTAMP_SND: u32 = 0;

/// Error-queue messages looked at per [`LaneSocket::recv_tx_stamp`] call.
const ERRQUEUE_BUDGET: usize = 8;

fn sys<T: PartialOrd + Default>(what: &'static str, r: T) -> Result<T, SocketError> {
    if r < T::default() {
        Err(SocketError::Sys {
            what,
            source: io::Error::last_os_error(),
        })
    } else {
        Ok(r)
    }
}

fn setopt<T>(
    fd: RawFd,
    level: i32,
    name: i32,
    val: &T,
    what: &'static str,
) -> Result<(), SocketError> {
    // SAFETY: `val` points to a live T of the size passed.
    let r = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            val as *const T as *const libc::c_void,
            size_of::<T>() as libc::socklen_t,
        )
    };
    sys(what, r).map(|_| ())
}

fn getopt_u32(fd: RawFd, level: i32, name: i32, what: &'static str) -> Result<u32, SocketError> {
    let mut v: libc::c_int = 0;
    let mut len = size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: v and len are valid for writes of their sizes.
    let r = unsafe {
        libc::getsockopt(
            fd,
            level,
            name,
            &mut v as *mut _ as *mut libc::c_void,
            &mut len,
        )
    };
    sys(what, r)?;
    Ok(v as u32)
}

fn in_addr(a: Ipv4Addr) -> libc::in_addr {
    libc::in_addr {
        s_addr: u32::from_ne_bytes(a.octets()),
    }
}

fn sockaddr(a: SocketAddrV4) -> libc::sockaddr_in {
    libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: a.port().to_be(),
        sin_addr: in_addr(*a.ip()),
        sin_zero: [0; 8],
    }
}

/// `CLOCK_REALTIME` now, in nanoseconds.
pub fn realtime_ns() -> u64 {
    clock_ns(libc::CLOCK_REALTIME)
}

/// `CLOCK_MONOTONIC` now, in nanoseconds.
pub fn monotonic_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// The CPU time the calling thread has run, in nanoseconds
/// (`CLOCK_THREAD_CPUTIME_ID`): time it was descheduled does not count.
pub fn thread_cpu_ns() -> u64 {
    clock_ns(libc::CLOCK_THREAD_CPUTIME_ID)
}

fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid timespec; the clock ids used are always present.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

impl LaneSocket {
    /// Open and configure a socket (see [`SocketConfig`]).
    pub fn open(cfg: &SocketConfig) -> Result<Self, SocketError> {
        if cfg.dscp > 63 {
            return Err(SocketError::BadDscp(cfg.dscp));
        }
        let mut ty = libc::SOCK_DGRAM | libc::SOCK_CLOEXEC;
        if cfg.nonblocking {
            ty |= libc::SOCK_NONBLOCK;
        }
        // SAFETY: plain socket(2) call.
        let raw = sys("socket", unsafe { libc::socket(libc::AF_INET, ty, 0) })?;
        // SAFETY: raw is a fresh descriptor we own.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let one: libc::c_int = 1;
        setopt(
            raw,
            libc::SOL_SOCKET,
            libc::SO_REUSEADDR,
            &one,
            "SO_REUSEADDR",
        )?;
        // TOS first: setting it overwrites SO_PRIORITY.
        let tos: libc::c_int = (cfg.dscp as libc::c_int) << 2;
        setopt(raw, libc::IPPROTO_IP, libc::IP_TOS, &tos, "IP_TOS")?;
        let prio = cfg.priority as libc::c_int;
        setopt(
            raw,
            libc::SOL_SOCKET,
            libc::SO_PRIORITY,
            &prio,
            "SO_PRIORITY",
        )?;
        let got_tos = getopt_u32(raw, libc::IPPROTO_IP, libc::IP_TOS, "IP_TOS")?;
        if got_tos != tos as u32 {
            return Err(SocketError::ReadBack {
                what: "IP_TOS",
                found: got_tos,
                expected: tos as u32,
            });
        }
        let got_prio = getopt_u32(raw, libc::SOL_SOCKET, libc::SO_PRIORITY, "SO_PRIORITY")?;
        if got_prio != cfg.priority {
            return Err(SocketError::ReadBack {
                what: "SO_PRIORITY",
                found: got_prio,
                expected: cfg.priority,
            });
        }
        if cfg.rx_timestamps {
            let flags = RX_STAMP_FLAGS as libc::c_int;
            setopt(
                raw,
                libc::SOL_SOCKET,
                libc::SO_TIMESTAMPING,
                &flags,
                "SO_TIMESTAMPING",
            )?;
        }
        if cfg.rcvbuf > 0 {
            let v = cfg.rcvbuf as libc::c_int;
            setopt(raw, libc::SOL_SOCKET, libc::SO_RCVBUF, &v, "SO_RCVBUF")?;
        }
        if cfg.recv_timeout_us > 0 {
            let tv = libc::timeval {
                tv_sec: (cfg.recv_timeout_us / 1_000_000) as libc::time_t,
                tv_usec: (cfg.recv_timeout_us % 1_000_000) as libc::suseconds_t,
            };
            setopt(raw, libc::SOL_SOCKET, libc::SO_RCVTIMEO, &tv, "SO_RCVTIMEO")?;
        }
        if let Some(ifaddr) = cfg.multicast_if {
            let a = in_addr(ifaddr);
            setopt(
                raw,
                libc::IPPROTO_IP,
                libc::IP_MULTICAST_IF,
                &a,
                "IP_MULTICAST_IF",
            )?;
            let zero: libc::c_int = 0;
            setopt(
                raw,
                libc::IPPROTO_IP,
                libc::IP_MULTICAST_LOOP,
                &zero,
                "IP_MULTICAST_LOOP",
            )?;
            let ttl = libc::c_int::from(LANE_MULTICAST_TTL);
            setopt(
                raw,
                libc::IPPROTO_IP,
                libc::IP_MULTICAST_TTL,
                &ttl,
                "IP_MULTICAST_TTL",
            )?;
        }
        let sa = sockaddr(cfg.bind);
        // SAFETY: sa is a valid sockaddr_in of the size passed.
        let r = unsafe {
            libc::bind(
                raw,
                &sa as *const _ as *const libc::sockaddr,
                size_of::<libc::sockaddr_in>() as libc::socklen_t,
            )
        };
        sys("bind", r)?;
        if let Some((group, ifaddr)) = cfg.join {
            let mreq = libc::ip_mreq {
                imr_multiaddr: in_addr(group),
                imr_interface: in_addr(ifaddr),
            };
            setopt(
                raw,
                libc::IPPROTO_IP,
                libc::IP_ADD_MEMBERSHIP,
                &mreq,
                "IP_ADD_MEMBERSHIP",
            )?;
        }
        Ok(LaneSocket {
            fd,
            cmsg: [0; CMSG_SPACE / 8],
            rx_timestamps: cfg.rx_timestamps,
            tx_timestamps: false,
        })
    }

    /// Ask for transmit stamps as well: `SO_TIMESTAMPING` with
    /// `TX_SOFTWARE | TX_HARDWARE | OPT_ID | OPT_TSONLY` (plus the receive
    /// flags if the socket was opened with `rx_timestamps`). The kernel then
    /// numbers the datagrams sent from here on from 0 and queues one stamp
    /// per datagram (two with a stamping NIC) on the error queue; read them
    /// with [`LaneSocket::recv_tx_stamp`]. Unread stamps count against the
    /// receive buffer, so a caller that enables them must drain them.
    pub fn enable_tx_timestamps(&mut self) -> Result<(), SocketError> {
        let mut flags = TX_STAMP_FLAGS;
        if self.rx_timestamps {
            flags |= RX_STAMP_FLAGS;
        }
        setopt(
            self.fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_TIMESTAMPING,
            &(flags as libc::c_int),
            "SO_TIMESTAMPING (tx)",
        )?;
        self.tx_timestamps = true;
        Ok(())
    }

    /// Whether [`Self::enable_tx_timestamps`] was called: the socket's
    /// error queue then fills with transmit stamps to drain.
    pub fn tx_timestamps(&self) -> bool {
        self.tx_timestamps
    }

    /// Read one transmit stamp from the error queue (`MSG_ERRQUEUE`, never
    /// blocks). `Ok(None)` when no stamp is queued. Error-queue messages that
    /// are not transmit stamps are consumed and skipped (at most a few per
    /// call: bounded work). No allocation.
    pub fn recv_tx_stamp(&mut self) -> io::Result<Option<TxStamp>> {
        for _ in 0..ERRQUEUE_BUDGET {
            // SAFETY: an all-zero msghdr is valid; no payload is asked for
            // (OPT_TSONLY), only the control buffer owned by `self`.
            let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
            msg.msg_control = self.cmsg.as_mut_ptr() as *mut libc::c_void;
            msg.msg_controllen = CMSG_SPACE as _;
            // SAFETY: msg points to valid buffers that outlive the call.
            let r = unsafe {
                libc::recvmsg(
                    self.fd.as_raw_fd(),
                    &mut msg,
                    libc::MSG_ERRQUEUE | libc::MSG_DONTWAIT,
                )
            };
            if r < 0 {
                let e = io::Error::last_os_error();
                return match e.kind() {
                    io::ErrorKind::WouldBlock => Ok(None),
                    _ => Err(e),
                };
            }
            let (mut sw, mut hw, mut id) = (None, None, None);
            // SAFETY: the CMSG_* macros walk the control buffer the kernel filled.
            unsafe {
                let mut c = libc::CMSG_FIRSTHDR(&msg);
                while !c.is_null() {
                    let (level, ty) = ((*c).cmsg_level, (*c).cmsg_type);
                    if level == libc::SOL_SOCKET && ty == libc::SCM_TIMESTAMPING {
                        let (s, h) = timestamping_of(c);
                        sw = s.or(sw);
                        hw = h.or(hw);
                    } else if (level == libc::SOL_IP && ty == libc::IP_RECVERR)
                        || (level == libc::SOL_IPV6 && ty == libc::IPV6_RECVERR)
                    {
                        let e = std::ptr::read_unaligned(
                            libc::CMSG_DATA(c) as *const libc::sock_extended_err
                        );
                        if e.ee_errno == libc::ENOMSG as u32
                            && e.ee_origin == libc::SO_EE_ORIGIN_TIMESTAMPING
                            && e.ee_info == SCM_TSTAMP_SND
                        {
                            id = Some(e.ee_data);
                        }
                    }
                    c = libc::CMSG_NXTHDR(&msg, c);
                }
            }
            if let Some(id) = id {
                if sw.is_some() || hw.is_some() {
                    return Ok(Some(TxStamp {
                        id,
                        software_ns: sw,
                        hardware_ns: hw,
                    }));
                }
            }
        }
        Ok(None)
    }

    /// The bound local address.
    pub fn local_addr(&self) -> Result<SocketAddrV4, SocketError> {
        let mut sa = MaybeUninit::<libc::sockaddr_in>::zeroed();
        let mut len = size_of::<libc::sockaddr_in>() as libc::socklen_t;
        // SAFETY: sa/len are valid for writes.
        let r = unsafe {
            libc::getsockname(
                self.fd.as_raw_fd(),
                sa.as_mut_ptr() as *mut libc::sockaddr,
                &mut len,
            )
        };
        sys("getsockname", r)?;
        // SAFETY: getsockname filled it in.
        let sa = unsafe { sa.assume_init() };
        Ok(from_sockaddr(&sa))
    }

    /// Send one datagram to `dst`. No allocation.
    pub fn send_to(&self, buf: &[u8], dst: SocketAddrV4) -> io::Result<usize> {
        let sa = sockaddr(dst);
        // SAFETY: buf and sa are valid for the lengths passed.
        let r = unsafe {
            libc::sendto(
                self.fd.as_raw_fd(),
                buf.as_ptr() as *const libc::c_void,
                buf.len(),
                0,
                &sa as *const _ as *const libc::sockaddr,
                size_of::<libc::sockaddr_in>() as libc::socklen_t,
            )
        };
        if r < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(r as usize)
        }
    }

    /// Receive one datagram with its timestamp. Returns `Ok(None)` when a
    /// non-blocking socket has nothing (or a blocking one timed out).
    /// No allocation; bounded work (one `recvmsg`, one pass over its cmsgs).
    pub fn recv(&mut self, buf: &mut [u8]) -> io::Result<Option<Received>> {
        Ok(self.recv_stamps(buf)?.map(|r| r.received))
    }

    /// Reads up to `max` waiting datagrams (a non-blocking socket) and hands
    /// each to `f` as a [`Datagram`]; `Ok(true)` once the socket is empty,
    /// `Ok(false)` after `max` datagrams or an interrupted call (more may
    /// wait). The one receive loop of the lane's event loops: bounded work,
    /// no allocation.
    pub fn drain(
        &mut self,
        buf: &mut [u8],
        max: usize,
        f: &mut dyn FnMut(Datagram<'_>),
    ) -> io::Result<bool> {
        for _ in 0..max {
            let got = match self.recv_stamps(buf) {
                Ok(Some(g)) => g,
                Ok(None) => return Ok(true),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => return Ok(false),
                Err(e) => return Err(e),
            };
            let r = got.received;
            f(Datagram {
                src: r.src,
                rx_ns: got.software_ns.unwrap_or(r.user_ns),
                kernel_stamped: got.software_ns.is_some(),
                bytes: if r.truncated {
                    None
                } else {
                    Some(&buf[..r.len])
                },
            });
        }
        Ok(false)
    }

    /// Like [`LaneSocket::recv`], and also returns the software and hardware
    /// receive stamps apart (`received.rx_ns` holds the best of the two).
    pub fn recv_stamps(&mut self, buf: &mut [u8]) -> io::Result<Option<RxStamps>> {
        let mut src = MaybeUninit::<libc::sockaddr_in>::zeroed();
        let mut iov = libc::iovec {
            iov_base: buf.as_mut_ptr() as *mut libc::c_void,
            iov_len: buf.len(),
        };
        // SAFETY: an all-zero msghdr is valid; fields are filled below.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_name = src.as_mut_ptr() as *mut libc::c_void;
        msg.msg_namelen = size_of::<libc::sockaddr_in>() as libc::socklen_t;
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = self.cmsg.as_mut_ptr() as *mut libc::c_void;
        msg.msg_controllen = CMSG_SPACE as _;
        // SAFETY: msg points to valid buffers that outlive the call.
        let r = unsafe { libc::recvmsg(self.fd.as_raw_fd(), &mut msg, libc::MSG_TRUNC) };
        let user_ns = realtime_ns();
        if r < 0 {
            let e = io::Error::last_os_error();
            return match e.kind() {
                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => Ok(None),
                _ => Err(e),
            };
        }
        let full = r as usize;
        let (software_ns, hardware_ns) = stamps_of(&msg);
        let (rx_ns, source) = best_stamp(hardware_ns, software_ns, user_ns);
        // SAFETY: recvmsg wrote the source address.
        let src = from_sockaddr(unsafe { &src.assume_init() });
        Ok(Some(RxStamps {
            received: Received {
                len: full.min(buf.len()),
                truncated: full > buf.len(),
                src,
                rx_ns,
                source,
                user_ns,
            },
            software_ns,
            hardware_ns,
        }))
    }

    /// Reads the waiting datagrams (at most the batch's capacity) with one
    /// `recvmmsg` (never blocks) into `batch`, replacing what it held;
    /// returns how many. Each keeps its software and hardware receive
    /// stamps; the user-space time is read once, when the call returned.
    /// No allocation; bounded work ([`RecvBatch::recv`]).
    pub fn recv_batch(&mut self, batch: &mut RecvBatch) -> io::Result<usize> {
        batch.recv_with_clock(self.fd.as_raw_fd(), Some(realtime_ns))
    }

    /// Sends `buf` to every address of `dsts` with one `sendmmsg` per
    /// [`SEND_BATCH`] addresses. Returns how many copies the kernel took
    /// (the rest were refused, e.g. `ENOBUFS`). No allocation.
    pub fn send_many(&self, buf: &[u8], dsts: &[SocketAddrV4]) -> usize {
        let mut sent = 0;
        for group in dsts.chunks(SEND_BATCH) {
            let mut sa = [sockaddr(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0)); SEND_BATCH];
            let mut iov = [libc::iovec {
                iov_base: buf.as_ptr() as *mut libc::c_void,
                iov_len: buf.len(),
            }; SEND_BATCH];
            // SAFETY: an all-zero mmsghdr is valid; pointers set below.
            let mut hdrs: [libc::mmsghdr; SEND_BATCH] = unsafe { std::mem::zeroed() };
            for (i, d) in group.iter().enumerate() {
                sa[i] = sockaddr(*d);
                let h = &mut hdrs[i].msg_hdr;
                h.msg_name = &mut sa[i] as *mut _ as *mut libc::c_void;
                h.msg_namelen = size_of::<libc::sockaddr_in>() as libc::socklen_t;
                h.msg_iov = &mut iov[i];
                h.msg_iovlen = 1;
            }
            // SAFETY: the headers point to live buffers and addresses.
            sent += unsafe { send_mmsg_all(self.fd.as_raw_fd(), &mut hdrs[..group.len()], 0) };
        }
        sent
    }

    /// Datagrams the kernel dropped at this socket because its receive
    /// buffer was full (or for another reason counted in `sk_drops`),
    /// since it was opened (`SO_MEMINFO`).
    pub fn drops(&self) -> io::Result<u64> {
        let mut v = [0u32; 16];
        let mut len = std::mem::size_of_val(&v) as libc::socklen_t;
        // SAFETY: v and len are valid for writes of their sizes.
        let r = unsafe {
            libc::getsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_SOCKET,
                SO_MEMINFO,
                v.as_mut_ptr() as *mut libc::c_void,
                &mut len,
            )
        };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        let i = libc::SK_MEMINFO_DROPS as usize;
        if (len as usize) < (i + 1) * 4 {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "SO_MEMINFO has no drop counter on this kernel",
            ));
        }
        Ok(v[i] as u64)
    }

    /// Switches the socket to non-blocking mode (the lane loop polls its
    /// receiving sockets through epoll).
    pub fn set_nonblocking(&self) -> io::Result<()> {
        let fd = self.fd.as_raw_fd();
        // SAFETY: plain fcntl calls on a descriptor we own.
        let fl = unsafe { libc::fcntl(fd, libc::F_GETFL) };
        if fl < 0 || unsafe { libc::fcntl(fd, libc::F_SETFL, fl | libc::O_NONBLOCK) } < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Receives multicast `group` on the interface with address `ifaddr`
    /// from now on (`IP_ADD_MEMBERSHIP`; the socket must be bound to the
    /// wildcard address or the group to see the group's datagrams).
    pub fn join_group(&self, group: Ipv4Addr, ifaddr: Ipv4Addr) -> Result<(), SocketError> {
        self.membership(group, ifaddr, libc::IP_ADD_MEMBERSHIP, "IP_ADD_MEMBERSHIP")
    }

    /// Stops receiving multicast `group` (`IP_DROP_MEMBERSHIP`).
    pub fn leave_group(&self, group: Ipv4Addr, ifaddr: Ipv4Addr) -> Result<(), SocketError> {
        self.membership(
            group,
            ifaddr,
            libc::IP_DROP_MEMBERSHIP,
            "IP_DROP_MEMBERSHIP",
        )
    }

    fn membership(
        &self,
        group: Ipv4Addr,
        ifaddr: Ipv4Addr,
        op: libc::c_int,
        name: &'static str,
    ) -> Result<(), SocketError> {
        let mreq = libc::ip_mreq {
            imr_multiaddr: in_addr(group),
            imr_interface: in_addr(ifaddr),
        };
        setopt(self.fd.as_raw_fd(), libc::IPPROTO_IP, op, &mreq, name)
    }

    /// A second handle on the same socket (`dup`): one thread can send on
    /// it while another receives on the original. Settings are shared.
    pub fn try_clone(&self) -> io::Result<LaneSocket> {
        Ok(LaneSocket {
            fd: self.fd.try_clone()?,
            cmsg: [0; CMSG_SPACE / 8],
            rx_timestamps: self.rx_timestamps,
            tx_timestamps: self.tx_timestamps,
        })
    }

    /// The raw descriptor (for polling).
    pub fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

impl AsFd for LaneSocket {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// The best receive stamp of a datagram and where it came from: the NIC's,
/// else the kernel's, else the user-space time.
fn best_stamp(hw: Option<u64>, sw: Option<u64>, user_ns: u64) -> (u64, StampSource) {
    match (hw, sw) {
        (Some(h), _) => (h, StampSource::Hardware),
        (None, Some(s)) => (s, StampSource::Kernel),
        (None, None) => (user_ns, StampSource::User),
    }
}

fn from_sockaddr(sa: &libc::sockaddr_in) -> SocketAddrV4 {
    SocketAddrV4::new(
        Ipv4Addr::from(sa.sin_addr.s_addr.to_ne_bytes()),
        u16::from_be(sa.sin_port),
    )
}

/// Why a NIC could not be set to stamp in hardware.
#[derive(Debug, thiserror::Error)]
pub enum HwStampError {
    /// The interface name is empty or longer than `IFNAMSIZ - 1`.
    #[error("bad interface name {0:?}")]
    BadName(String),
    /// The driver refused (`EOPNOTSUPP`/`EINVAL`: it cannot stamp; `ENODEV`:
    /// no such interface; `EPERM`: needs `CAP_NET_ADMIN`).
    #[error("{iface} cannot stamp every packet in hardware")]
    Refused {
        /// The interface.
        iface: String,
        /// The driver's answer.
        source: io::Error,
    },
}

/// Ask the NIC `iface` (in the current network namespace) to stamp every
/// transmitted and every received packet in hardware (`SIOCSHWTSTAMP` with
/// `HWTSTAMP_TX_ON` and `HWTSTAMP_FILTER_ALL`). Sockets then get raw
/// hardware stamps with `SOF_TIMESTAMPING_RAW_HARDWARE`. The setting is the
/// NIC's, not the socket's: it stays until changed (other programs on the
/// machine see it too). Virtual devices (veth, virtio, loopback) refuse.
pub fn enable_hw_timestamping(iface: &str) -> Result<(), HwStampError> {
    if iface.is_empty() || iface.len() >= libc::IFNAMSIZ || iface.contains('\0') {
        return Err(HwStampError::BadName(iface.to_string()));
    }
    let refused = |source| HwStampError::Refused {
        iface: iface.to_string(),
        source,
    };
    // SAFETY: a plain socket(2) call; the result is checked.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(refused(io::Error::last_os_error()));
    }
    // SAFETY: fd is a fresh descriptor we own.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut cfg = libc::hwtstamp_config {
        flags: 0,
        tx_type: libc::HWTSTAMP_TX_ON as libc::c_int,
        rx_filter: libc::HWTSTAMP_FILTER_ALL as libc::c_int,
    };
    // SAFETY: ifreq is plain old data; all-zero is a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (d, s) in req.ifr_name.iter_mut().zip(iface.bytes()) {
        *d = s as libc::c_char;
    }
    req.ifr_ifru.ifru_data = (&mut cfg as *mut libc::hwtstamp_config).cast();
    // SAFETY: SIOCSHWTSTAMP reads and writes `cfg` through the pointer in
    // `req`, both alive for the call.
    let r = unsafe { libc::ioctl(fd.as_raw_fd(), libc::SIOCSHWTSTAMP as _, &mut req) };
    if r < 0 {
        return Err(refused(io::Error::last_os_error()));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
