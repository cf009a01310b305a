//! The hello a bridge server sends on a freshly accepted UNIX stream
//! connection, carrying the two ring memfds with `SCM_RIGHTS`.
//!
//! ```text
//! offset  size  field
//!      0     8  HELLO_MAGIC (b"XLBHELLO" as a native-endian u64)
//!      8     4  PROTOCOL_VERSION
//!     12     4  number of fds (2)
//!     16     8  connection id (chosen by the server)
//! ancillary: SCM_RIGHTS [R-X ring memfd, X-R ring memfd]
//! ```
//!
//! After the hello nothing more is sent: the connection stays open only so
//! that each side learns when the other process is gone (EOF / hangup).

use std::io::{self, IoSlice};
use std::mem;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::ptr;

use nix::sys::socket::{sendmsg, ControlMessage, MsgFlags, UnixAddr};

use super::error::ConnectError;

/// `b"XLBHELLO"` as a native-endian u64.
pub const HELLO_MAGIC: u64 = u64::from_ne_bytes(*b"XLBHELLO");

/// The handshake version this build speaks.
pub const PROTOCOL_VERSION: u32 = 1;

/// Bytes of a hello.
pub const HELLO_LEN: usize = 24;

/// File descriptors a hello carries.
pub const HELLO_FDS: usize = 2;

/// Most descriptors a client accepts in one hello before declaring it
/// malformed (the extra ones are closed).
const MAX_FDS: usize = 8;

/// Encodes a hello.
pub fn encode_hello(version: u32, nfds: u32, id: u64) -> [u8; HELLO_LEN] {
    let mut b = [0u8; HELLO_LEN];
    b[0..8].copy_from_slice(&HELLO_MAGIC.to_ne_bytes());
    b[8..12].copy_from_slice(&version.to_ne_bytes());
    b[12..16].copy_from_slice(&nfds.to_ne_bytes());
    b[16..24].copy_from_slice(&id.to_ne_bytes());
    b
}

/// Sends a raw hello `bytes` with `fds` attached, without blocking and without SIGPIPE.
pub fn send_raw(stream: &UnixStream, bytes: &[u8], fds: &[RawFd]) -> io::Result<()> {
    let iov = [IoSlice::new(bytes)];
    let cmsg = [ControlMessage::ScmRights(fds)];
    let cmsgs: &[ControlMessage] = if fds.is_empty() { &[] } else { &cmsg };
    let n = sendmsg::<UnixAddr>(
        stream.as_raw_fd(),
        &iov,
        cmsgs,
        MsgFlags::MSG_NOSIGNAL | MsgFlags::MSG_DONTWAIT,
        None,
    )?;
    if n != bytes.len() {
        return Err(io::Error::new(
            io::ErrorKind::WriteZero,
            "short write of the bridge hello",
        ));
    }
    Ok(())
}

/// Hands a bridge pair to the application at the other end of `stream`:
/// the hello with connection `id`, the R-X memfd `to_lane` and the X-R
/// memfd `to_app`. Never blocks.
///
/// [`BridgeServer`](super::BridgeServer) calls this; it is public for
/// daemons that run their own accept loop (and for tests).
pub fn offer(
    stream: &UnixStream,
    id: u64,
    to_lane: BorrowedFd<'_>,
    to_app: BorrowedFd<'_>,
) -> io::Result<()> {
    let hello = encode_hello(PROTOCOL_VERSION, HELLO_FDS as u32, id);
    send_raw(stream, &hello, &[to_lane.as_raw_fd(), to_app.as_raw_fd()])
}

/// A received and checked hello.
pub(crate) struct Hello {
    pub id: u64,
    pub to_lane: OwnedFd,
    pub to_app: OwnedFd,
}

/// Receives the hello (blocking, subject to the socket's read timeout).
/// Every received descriptor is owned at once, so none leaks on error.
pub(crate) fn recv_hello(stream: &UnixStream) -> Result<Hello, ConnectError> {
    let mut buf = [0u8; HELLO_LEN];
    // Room for MAX_FDS descriptors; u64 elements keep the buffer aligned for cmsghdr.
    let mut control = [0u64; 16];
    // SAFETY: CMSG_SPACE is a pure computation.
    let space = unsafe { libc::CMSG_SPACE((MAX_FDS * mem::size_of::<RawFd>()) as u32) } as usize;
    let space = space.min(mem::size_of_val(&control));
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // SAFETY: msghdr is plain data; all-zero is a valid empty header.
    let mut msg: libc::msghdr = unsafe { mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = space as _;

    let n = loop {
        // SAFETY: msg points at live buffers of the declared sizes.
        let r = unsafe { libc::recvmsg(stream.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC) };
        if r >= 0 {
            break r as usize;
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(ConnectError::Handshake(e));
        }
    };

    let mut fds: Vec<OwnedFd> = Vec::new();
    // SAFETY: walking the control buffer the kernel filled, with the libc macros.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            let hdr = ptr::read_unaligned(c);
            if hdr.cmsg_level == libc::SOL_SOCKET && hdr.cmsg_type == libc::SCM_RIGHTS {
                let data = libc::CMSG_DATA(c);
                let data_len = (hdr.cmsg_len as usize).saturating_sub(data as usize - c as usize);
                let count = data_len / mem::size_of::<RawFd>();
                for i in 0..count {
                    let raw: RawFd = ptr::read_unaligned(data.cast::<RawFd>().add(i));
                    if raw >= 0 {
                        fds.push(OwnedFd::from_raw_fd(raw));
                    }
                }
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
    }
    if msg.msg_flags & libc::MSG_CTRUNC != 0 {
        return Err(ConnectError::BadHello {
            what: "too many file descriptors (control data truncated)",
        });
    }
    if n == 0 && fds.is_empty() {
        return Err(ConnectError::ServerClosed);
    }
    if n != HELLO_LEN {
        return Err(ConnectError::BadHello {
            what: "wrong length",
        });
    }
    let u64_at = |at: usize| {
        let mut b = [0u8; 8];
        b.copy_from_slice(&buf[at..at + 8]);
        u64::from_ne_bytes(b)
    };
    let u32_at = |at: usize| {
        let mut b = [0u8; 4];
        b.copy_from_slice(&buf[at..at + 4]);
        u32::from_ne_bytes(b)
    };
    if u64_at(0) != HELLO_MAGIC {
        return Err(ConnectError::BadHello { what: "bad magic" });
    }
    let version = u32_at(8);
    if version != PROTOCOL_VERSION {
        return Err(ConnectError::ProtocolMismatch {
            found: version,
            expected: PROTOCOL_VERSION,
        });
    }
    if u32_at(12) as usize != HELLO_FDS || fds.len() != HELLO_FDS {
        return Err(ConnectError::WrongFdCount { got: fds.len() });
    }
    let id = u64_at(16);
    let to_app = fds.pop();
    let to_lane = fds.pop();
    match (to_lane, to_app) {
        (Some(to_lane), Some(to_app)) => Ok(Hello {
            id,
            to_lane,
            to_app,
        }),
        _ => Err(ConnectError::WrongFdCount { got: 0 }),
    }
}

/// Whether the process at the other end of `stream` is still there: one
/// non-blocking `recv`. EOF or a socket error means gone. Bytes the peer
/// sent (the protocol has none after the hello) are read and discarded.
pub(crate) fn peer_alive(stream: &UnixStream) -> bool {
    let mut scratch = [0u8; 64];
    // SAFETY: scratch is a live buffer of the given length.
    let r = unsafe {
        libc::recv(
            stream.as_raw_fd(),
            scratch.as_mut_ptr().cast(),
            scratch.len(),
            libc::MSG_DONTWAIT,
        )
    };
    if r > 0 {
        return true;
    }
    if r == 0 {
        return false;
    }
    matches!(
        io::Error::last_os_error().kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
    )
}
