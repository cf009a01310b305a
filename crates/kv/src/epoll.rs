//! An epoll set, level-triggered, polled without waiting: the RESP
//! event loop's ([`crate::client_loop`]) and the transaction proxy's
//! ([`crate::xshard::proxy`]).

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// An epoll set (level-triggered).
pub(crate) struct Epoll(OwnedFd);

impl Epoll {
    pub(crate) fn new() -> std::io::Result<Epoll> {
        // SAFETY: no pointers; the returned descriptor is checked.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: `fd` is a fresh descriptor owned by nobody else.
        Ok(Epoll(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    pub(crate) fn ctl(
        &self,
        op: libc::c_int,
        fd: RawFd,
        events: u32,
        key: u64,
    ) -> std::io::Result<()> {
        let mut ev = libc::epoll_event { events, u64: key };
        // SAFETY: a valid epoll descriptor and event struct.
        if unsafe { libc::epoll_ctl(self.0.as_raw_fd(), op, fd, &mut ev) } < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    }

    /// The ready descriptors, without waiting.
    pub(crate) fn poll(&self, out: &mut [libc::epoll_event]) -> usize {
        // SAFETY: `out` has room for `out.len()` events.
        let n = unsafe {
            libc::epoll_wait(
                self.0.as_raw_fd(),
                out.as_mut_ptr(),
                out.len() as libc::c_int,
                0,
            )
        };
        n.max(0) as usize
    }
}

impl AsRawFd for Epoll {
    fn as_raw_fd(&self) -> RawFd {
        self.0.as_raw_fd()
    }
}
