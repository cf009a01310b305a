//! Kernel timestamps of requests: which request a transmit stamp belongs to
//! (sans-IO, [`TxMatch`]), and the stamping system calls of a TCP
//! connection (the UDP ones are `xlane_host::socket::LaneSocket`'s).
//!
//! With `SOF_TIMESTAMPING_OPT_ID` the kernel tags every transmit stamp it
//! queues on the socket's error queue with a 32-bit key (`ee_data`):
//!
//! - **datagram sockets**: the number of the datagram, counted from 0 since
//!   stamping was turned on ([`Numbering::Datagram`]);
//! - **stream sockets** (TCP): the stream offset of the *last byte of the
//!   send call*, counted from the first byte written after stamping was
//!   turned on ([`Numbering::Stream`]). The stamp is taken when the segment
//!   carrying that byte goes to the device (software) or leaves the NIC
//!   (hardware).
//!
//! On a stream, every request of an agent's connection has the same length,
//! so request `k` is bytes `[k·len, (k+1)·len)`. The measuring client makes
//! its send calls end at request boundaries, and — for requests longer than
//! one segment — also after the request's first `first_chunk` bytes (one
//! MSS): the first send call of a request then carries exactly the bytes of
//! its first segment, and that call's stamp is the **first transmit stamp
//! of the request**: when its first segment left. A key inside a request's
//! first chunk therefore names that request; a key past it belongs to a
//! later segment and is not used. A send call cut short by a full socket
//! buffer only moves the key earlier inside the same chunk; the first stamp
//! a request gets is kept, later ones (the rest of a cut-short chunk, a
//! retransmission) are ignored by the caller.
//!
//! Keys are 32 bits and wrap (after 4 GiB on a stream); [`TxMatch`] widens
//! them against its own 64-bit count of what was sent, which is exact as long
//! as a stamp is read within 2³² datagrams or bytes of its send.

use std::io;
use std::mem::size_of;
use std::os::fd::AsRawFd;
use xlane_host::socket::TxStamp;

/// What the kernel's transmit-stamp key counts (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Numbering {
    /// Datagrams: key n is the n-th datagram since stamping was turned on.
    Datagram,
    /// A byte stream of requests `request_len` bytes long each, whose first
    /// send call covers at most `first_chunk` bytes (`1..=request_len`).
    Stream {
        /// Bytes per request.
        request_len: u64,
        /// Bytes of a request's first send call (one segment).
        first_chunk: u64,
    },
}

const FREE: u64 = u64::MAX;

/// Matches the keys of transmit stamps to request ids (sans-IO).
///
/// The caller numbers requests in the order their bytes enter the socket
/// ([`TxMatch::push`]), reports what the kernel counted
/// ([`TxMatch::skip`] for a datagram numbered but not sent,
/// [`TxMatch::wrote`] for bytes a stream took), and asks
/// [`TxMatch::request_of`] for the id of a stamp's request. The last
/// `ring_len` requests are remembered; older ones are forgotten.
#[derive(Clone, Debug)]
pub struct TxMatch {
    numbering: Numbering,
    /// `(request number, request id)`, indexed by number modulo the length.
    ring: Vec<(u64, u64)>,
    /// Number of the next request pushed (datagram: of the next datagram).
    next: u64,
    /// Stream bytes written so far.
    written: u64,
    trusted: bool,
}

impl TxMatch {
    /// A matcher remembering the last `ring_len` requests (at least 1).
    /// A stream's `request_len` and `first_chunk` are raised to at least 1
    /// and `first_chunk` is capped at `request_len`.
    pub fn new(numbering: Numbering, ring_len: usize) -> Self {
        let numbering = match numbering {
            Numbering::Datagram => Numbering::Datagram,
            Numbering::Stream {
                request_len,
                first_chunk,
            } => {
                let request_len = request_len.max(1);
                Numbering::Stream {
                    request_len,
                    first_chunk: first_chunk.clamp(1, request_len),
                }
            }
        };
        TxMatch {
            numbering,
            ring: vec![(FREE, 0); ring_len.max(1)],
            next: 0,
            written: 0,
            trusted: true,
        }
    }

    /// The numbering in use (after the adjustments of [`TxMatch::new`]).
    pub fn numbering(&self) -> Numbering {
        self.numbering
    }

    /// Request `id` is next to enter the socket (datagram: it was sent).
    pub fn push(&mut self, id: u64) {
        let n = self.next;
        let len = self.ring.len() as u64;
        self.ring[(n % len) as usize] = (n, id);
        self.next += 1;
    }

    /// Datagrams: the kernel numbered a datagram that was not sent (a send
    /// that failed past the socket buffer).
    pub fn skip(&mut self) {
        self.next += 1;
    }

    /// Streams: a send call took `bytes` bytes.
    pub fn wrote(&mut self, bytes: u64) {
        self.written += bytes;
    }

    /// How many of `pending` bytes (starting at the next unwritten stream
    /// byte) the next send call may take: up to the end of the current
    /// request's first chunk, or else of the request. Datagrams: all.
    pub fn write_limit(&self, pending: usize) -> usize {
        match self.numbering {
            Numbering::Datagram => pending,
            Numbering::Stream {
                request_len,
                first_chunk,
            } => {
                let at = self.written % request_len;
                let end = if at < first_chunk {
                    first_chunk
                } else {
                    request_len
                };
                // at < request_len and at < first_chunk picks first_chunk,
                // so end > at.
                pending.min((end - at) as usize)
            }
        }
    }

    /// The id of the request a stamp with kernel key `key` belongs to:
    /// `None` for a key of no remembered request, for a stream key past its
    /// request's first chunk, and once numbering is no longer trusted.
    pub fn request_of(&self, key: u32) -> Option<u64> {
        if !self.trusted {
            return None;
        }
        let count = match self.numbering {
            Numbering::Datagram => self.next,
            Numbering::Stream { .. } => self.written,
        };
        // The key is of something already counted: `back` ≥ 1 behind it.
        let back = u64::from((count as u32).wrapping_sub(key));
        if back == 0 {
            return None;
        }
        let full = count.checked_sub(back)?;
        let number = match self.numbering {
            Numbering::Datagram => full,
            Numbering::Stream {
                request_len,
                first_chunk,
            } => {
                if full % request_len >= first_chunk {
                    return None;
                }
                full / request_len
            }
        };
        let len = self.ring.len() as u64;
        let (n, id) = self.ring[(number % len) as usize];
        (n == number).then_some(id)
    }

    /// A stamp contradicted its request: the kernel's count and ours
    /// disagree, so no later stamp of this socket is matched.
    pub fn distrust(&mut self) {
        self.trusted = false;
    }

    /// Stamps are still matched (see [`TxMatch::distrust`]).
    pub fn trusted(&self) -> bool {
        self.trusted
    }
}

/// 64-bit words of a control-message buffer (room for the stamps and an
/// extended error).
pub const CMSG_WORDS: usize = 32;

/// A control-message buffer, aligned for `cmsghdr`.
pub type CmsgBuf = [u64; CMSG_WORDS];

/// `ee_info` of a stamp taken when the packet went to the device.
const TSTAMP_SND: u32 = 0;

/// Error-queue messages looked at per [`recv_tx_stamp`] call.
const ERRQUEUE_BUDGET: usize = 8;

/// `SO_TIMESTAMPING` flags of a measured TCP connection: software transmit
/// and receive stamps, hardware ones when the NIC is set up for them (they
/// are simply absent otherwise), keys on transmit stamps (`OPT_ID`), and
/// stamps without a copy of the packet (`OPT_TSONLY`).
pub const STREAM_STAMP_FLAGS: libc::c_uint = libc::SOF_TIMESTAMPING_TX_SOFTWARE
    | libc::SOF_TIMESTAMPING_RX_SOFTWARE
    | libc::SOF_TIMESTAMPING_SOFTWARE
    | libc::SOF_TIMESTAMPING_TX_HARDWARE
    | libc::SOF_TIMESTAMPING_RX_HARDWARE
    | libc::SOF_TIMESTAMPING_RAW_HARDWARE
    | libc::SOF_TIMESTAMPING_OPT_ID
    | libc::SOF_TIMESTAMPING_OPT_TSONLY;

fn int_opt(s: &impl AsRawFd, level: i32, name: i32, set: Option<libc::c_int>) -> io::Result<u32> {
    let fd = s.as_raw_fd();
    let mut v: libc::c_int = set.unwrap_or(0);
    let mut len = size_of::<libc::c_int>() as libc::socklen_t;
    let p = &mut v as *mut libc::c_int as *mut libc::c_void;
    let r = match set {
        // SAFETY: p points to a live c_int of the length passed.
        Some(_) => unsafe { libc::setsockopt(fd, level, name, p, len) },
        // SAFETY: p and len are valid for writes of their sizes.
        None => unsafe { libc::getsockopt(fd, level, name, p, &mut len) },
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(v as u32)
}

/// Turn on [`STREAM_STAMP_FLAGS`] on a connected TCP socket, before anything
/// is written on it: keys then count from its first byte.
pub fn enable_stream_stamps(s: &impl AsRawFd) -> io::Result<()> {
    int_opt(
        s,
        libc::SOL_SOCKET,
        libc::SO_TIMESTAMPING,
        Some(STREAM_STAMP_FLAGS as libc::c_int),
    )
    .map(|_| ())
}

/// The connection's current maximum segment size (`TCP_MAXSEG`), bytes.
pub fn segment_size(s: &impl AsRawFd) -> io::Result<u32> {
    int_opt(s, libc::IPPROTO_TCP, libc::TCP_MAXSEG, None)
}

/// What the control messages of one `recvmsg` carried.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Cmsgs {
    software_ns: Option<u64>,
    hardware_ns: Option<u64>,
    /// The key of a transmit stamp taken at the device.
    tx_key: Option<u32>,
}

fn nonzero_ns(t: &libc::timespec) -> Option<u64> {
    let ns = t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64;
    (ns != 0).then_some(ns)
}

/// Walk the control messages the kernel wrote into `msg`.
fn cmsgs(msg: &libc::msghdr) -> Cmsgs {
    let mut out = Cmsgs::default();
    // SAFETY: msg's control buffer was filled by recvmsg; the CMSG_* helpers
    // stay inside msg_controllen, and the payloads are read unaligned.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(msg);
        while let Some(h) = c.as_ref() {
            let data = libc::CMSG_DATA(c);
            match (h.cmsg_level, h.cmsg_type) {
                (libc::SOL_SOCKET, libc::SCM_TIMESTAMPING) => {
                    // struct scm_timestamping: software, (legacy), raw hardware.
                    let ts = std::ptr::read_unaligned(data as *const [libc::timespec; 3]);
                    out.software_ns = nonzero_ns(&ts[0]);
                    out.hardware_ns = nonzero_ns(&ts[2]);
                }
                (libc::SOL_IP, libc::IP_RECVERR) | (libc::SOL_IPV6, libc::IPV6_RECVERR) => {
                    let e = std::ptr::read_unaligned(data as *const libc::sock_extended_err);
                    let stamp = e.ee_errno == libc::ENOMSG as u32
                        && e.ee_origin == libc::SO_EE_ORIGIN_TIMESTAMPING;
                    if stamp && e.ee_info == TSTAMP_SND {
                        out.tx_key = Some(e.ee_data);
                    }
                }
                _ => {}
            }
            c = libc::CMSG_NXTHDR(msg, c);
        }
    }
    out
}

fn recvmsg(
    s: &impl AsRawFd,
    buf: &mut [u8],
    cmsg: &mut CmsgBuf,
    flags: libc::c_int,
) -> io::Result<(usize, Cmsgs)> {
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr() as *mut libc::c_void,
        iov_len: buf.len(),
    };
    // SAFETY: an all-zero msghdr is valid; its pointers are set below.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    if !buf.is_empty() {
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
    }
    msg.msg_control = cmsg.as_mut_ptr() as *mut libc::c_void;
    msg.msg_controllen = size_of::<CmsgBuf>() as _;
    // SAFETY: msg points to buffers that outlive the call.
    let r = unsafe { libc::recvmsg(s.as_raw_fd(), &mut msg, flags) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((r as usize, cmsgs(&msg)))
}

/// One read of a stamped TCP connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StampedRead {
    /// Bytes read (0: the peer closed the connection).
    pub len: usize,
    /// The kernel's software receive stamp (`CLOCK_REALTIME` ns) of the last
    /// segment this read took bytes from, if any.
    pub software_ns: Option<u64>,
    /// The NIC's raw hardware receive stamp of that segment, if any.
    pub hardware_ns: Option<u64>,
}

/// Read into `buf` (non-blocking if the socket is) with the receive stamps
/// of the last segment the read took bytes from (what TCP reports). `Ok(None)`
/// when nothing is there. No allocation.
pub fn recv_stamped(
    s: &impl AsRawFd,
    buf: &mut [u8],
    cmsg: &mut CmsgBuf,
) -> io::Result<Option<StampedRead>> {
    match recvmsg(s, buf, cmsg, 0) {
        Ok((len, c)) => Ok(Some(StampedRead {
            len,
            software_ns: c.software_ns,
            hardware_ns: c.hardware_ns,
        })),
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(None),
        Err(e) => Err(e),
    }
}

/// Read one transmit stamp from the connection's error queue (never
/// blocks); `Ok(None)` when none is queued. Other error-queue messages are
/// skipped (a few per call: bounded work). No allocation.
pub fn recv_tx_stamp(s: &impl AsRawFd, cmsg: &mut CmsgBuf) -> io::Result<Option<TxStamp>> {
    for _ in 0..ERRQUEUE_BUDGET {
        let c = match recvmsg(s, &mut [], cmsg, libc::MSG_ERRQUEUE | libc::MSG_DONTWAIT) {
            Ok((_, c)) => c,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(None),
            Err(e) => return Err(e),
        };
        if let Some(id) = c.tx_key {
            if c.software_ns.is_some() || c.hardware_ns.is_some() {
                return Ok(Some(TxStamp {
                    id,
                    software_ns: c.software_ns,
                    hardware_ns: c.hardware_ns,
                }));
            }
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One step of a matcher's life, and what `request_of` must answer.
    #[derive(Debug)]
    enum Step {
        Push(u64),
        Skip,
        Wrote(u64),
        /// `write_limit(pending)` must be the second value.
        Limit(usize, usize),
        /// `request_of(key)` must be the second value.
        Key(u32, Option<u64>),
        Distrust,
    }
    use Step::*;

    fn run(name: &str, numbering: Numbering, ring: usize, start: u64, steps: &[Step]) {
        let mut m = TxMatch::new(numbering, ring);
        // Start deep into the stream/numbering (wrap-around cases).
        m.next = start;
        if let Numbering::Stream { request_len, .. } = m.numbering {
            m.written = start * request_len;
        }
        for (i, s) in steps.iter().enumerate() {
            match *s {
                Push(id) => m.push(id),
                Skip => m.skip(),
                Wrote(n) => m.wrote(n),
                Limit(p, want) => assert_eq!(m.write_limit(p), want, "{name}: step {i} {s:?}"),
                Key(k, want) => assert_eq!(m.request_of(k), want, "{name}: step {i} {s:?}"),
                Distrust => m.distrust(),
            }
        }
    }

    const STREAM_100_40: Numbering = Numbering::Stream {
        request_len: 100,
        first_chunk: 40,
    };
    const STREAM_100: Numbering = Numbering::Stream {
        request_len: 100,
        first_chunk: 100,
    };

    #[test]
    fn stream_keys_name_the_request_whose_first_chunk_they_end() {
        type Case = (&'static str, Numbering, usize, u64, &'static [Step]);
        let table: &[Case] = &[
            (
                "one call per request",
                STREAM_100,
                16,
                0,
                &[
                    Push(7),
                    Push(8),
                    Limit(200, 100),
                    Key(99, None), // not written yet
                    Wrote(100),
                    Key(99, Some(7)),
                    Key(0, Some(7)),
                    Key(100, None), // beyond what was written
                    Limit(100, 100),
                    Wrote(100),
                    Key(199, Some(8)),
                ],
            ),
            (
                "first chunk, then the rest",
                STREAM_100_40,
                16,
                0,
                &[
                    Push(1),
                    Push(2),
                    Limit(200, 40),
                    Wrote(40),
                    Limit(160, 60),
                    Wrote(60),
                    Limit(100, 40),
                    Wrote(40),
                    Limit(60, 60),
                    Wrote(60),
                    Key(39, Some(1)),  // the first segment of request 1
                    Key(99, None),     // its later segments
                    Key(139, Some(2)), // request 2's first segment
                    Key(199, None),
                ],
            ),
            (
                "send calls cut short by a full buffer",
                STREAM_100_40,
                16,
                0,
                &[
                    Push(1),
                    Wrote(25),
                    Limit(75, 15),
                    Key(24, Some(1)),
                    Wrote(15),
                    Key(39, Some(1)), // a second stamp of the same chunk (caller keeps the first)
                    Limit(60, 60),
                    Wrote(30),
                    Key(69, None),
                    Limit(30, 30),
                ],
            ),
            (
                "a short pending tail",
                STREAM_100_40,
                16,
                0,
                &[Push(1), Limit(10, 10), Limit(0, 0)],
            ),
            (
                "forgotten requests",
                STREAM_100,
                2,
                0,
                &[
                    Push(1),
                    Push(2),
                    Push(3),
                    Wrote(300),
                    Key(99, None), // its ring slot now holds request 3
                    Key(199, Some(2)),
                    Key(299, Some(3)),
                ],
            ),
            (
                "keys wrap at 4 GiB",
                STREAM_100,
                16,
                // Request numbers from here on start just below 2^32 bytes.
                (1u64 << 32) / 100 - 1,
                &[
                    Push(50),
                    Push(51),
                    Push(52),
                    Wrote(300),
                    // Requests at offsets 4294967100, 4294967200 (it
                    // spans 2^32 = 4294967296) and 4294967300.
                    Key(4_294_967_100, Some(50)),
                    Key(4_294_967_199, Some(50)),
                    Key(4_294_967_295, Some(51)),
                    Key(3, Some(51)),   // 4294967299 mod 2^32
                    Key(4, Some(52)),   // 4294967300 mod 2^32
                    Key(103, Some(52)), // 4294967399 mod 2^32
                    Key(104, None),     // 4294967400: not written yet
                ],
            ),
            (
                "distrusted",
                STREAM_100,
                16,
                0,
                &[
                    Push(1),
                    Wrote(100),
                    Key(99, Some(1)),
                    Distrust,
                    Key(99, None),
                ],
            ),
        ];
        for (name, numbering, ring, start, steps) in table {
            run(name, *numbering, *ring, *start, steps);
        }
    }

    #[test]
    fn datagram_keys_count_datagrams() {
        type Case = (&'static str, u64, &'static [Step]);
        let table: &[Case] = &[
            (
                "in order",
                0,
                &[
                    Push(10),
                    Push(11),
                    Key(0, Some(10)),
                    Key(1, Some(11)),
                    Key(2, None),
                    Limit(64, 64),
                ],
            ),
            (
                "a numbered failure",
                0,
                &[Push(10), Skip, Push(12), Key(1, None), Key(2, Some(12))],
            ),
            (
                "wrap",
                u32::MAX as u64,
                &[
                    Push(10),
                    Push(11),
                    Key(u32::MAX, Some(10)),
                    Key(0, Some(11)),
                    Key(1, None),
                ],
            ),
        ];
        for (name, start, steps) in table {
            run(name, Numbering::Datagram, 16, *start, steps);
        }
    }

    use std::net::TcpStream;

    /// A connected pair on loopback: (client, server side).
    fn pair() -> (TcpStream, TcpStream) {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s, _) = l.accept().unwrap();
        c.set_nodelay(true).unwrap();
        s.set_nodelay(true).unwrap();
        (c, s)
    }

    /// Read the error queue until `n` stamps came (bounded wait).
    fn tx_stamps(c: &TcpStream, n: usize) -> Vec<TxStamp> {
        let mut cmsg = [0u64; CMSG_WORDS];
        let mut out = Vec::new();
        for _ in 0..1000 {
            match recv_tx_stamp(c, &mut cmsg).unwrap() {
                Some(ts) => out.push(ts),
                None if out.len() >= n => break,
                None => std::thread::sleep(std::time::Duration::from_millis(1)),
            }
        }
        out
    }

    #[test]
    fn tcp_tx_keys_are_the_last_byte_of_each_send_call() {
        use std::io::Write;
        let (mut c, _s) = pair();
        enable_stream_stamps(&c).unwrap();
        let calls = [10usize, 1000, 1, 20_000];
        for n in calls {
            c.write_all(&vec![7u8; n]).unwrap();
        }
        let got = tx_stamps(&c, calls.len());
        let keys: Vec<u32> = got.iter().map(|t| t.id).collect();
        assert_eq!(keys, vec![9, 1009, 1010, 21_010], "{got:?}");
        let sw: Vec<u64> = got.iter().filter_map(|t| t.software_ns).collect();
        assert_eq!(sw.len(), calls.len(), "{got:?}");
        assert!(sw.windows(2).all(|w| w[0] <= w[1]), "{got:?}");
    }

    #[test]
    fn tcp_rx_stamp_is_the_last_segment_read() {
        use std::io::Write;
        let (c, mut s) = pair();
        enable_stream_stamps(&c).unwrap();
        // The sender's own transmit stamps tell when each segment left.
        enable_stream_stamps(&s).unwrap();
        let mut cmsg = [0u64; CMSG_WORDS];
        let mut buf = [0u8; 64];
        // Receive stamping is switched on lazily by the kernel: the first
        // segments may come unstamped. Within a few tries one is stamped.
        let mut checked = false;
        for _ in 0..100 {
            s.write_all(&[1u8; 10]).unwrap();
            std::thread::sleep(std::time::Duration::from_millis(2));
            s.write_all(&[2u8; 10]).unwrap();
            std::thread::sleep(std::time::Duration::from_millis(2));
            let tx = tx_stamps(&s, 2);
            let r = recv_stamped(&c, &mut buf, &mut cmsg).unwrap().unwrap();
            assert_eq!(r.len, 20, "both segments in one read");
            let second_left = tx.last().and_then(|t| t.software_ns).expect("tx stamps");
            if let Some(sw) = r.software_ns {
                assert!(
                    sw >= second_left,
                    "rx stamp {sw} is not the second segment's (it left at {second_left})"
                );
                checked = true;
                break;
            }
        }
        assert!(checked, "loopback offers software receive stamps on TCP");
    }

    #[test]
    fn new_normalises_the_stream_chunk() {
        let table = [
            ((100, 0), (100, 1)),
            ((100, 500), (100, 100)),
            ((0, 0), (1, 1)),
            ((64, 32), (64, 32)),
        ];
        for ((len, chunk), (want_len, want_chunk)) in table {
            let m = TxMatch::new(
                Numbering::Stream {
                    request_len: len,
                    first_chunk: chunk,
                },
                0,
            );
            assert_eq!(
                m.numbering(),
                Numbering::Stream {
                    request_len: want_len,
                    first_chunk: want_chunk
                }
            );
        }
    }
}
