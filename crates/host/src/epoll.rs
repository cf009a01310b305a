//! An epoll set: the one wrapper over `epoll_create1`/`epoll_ctl`/
//! `epoll_wait` that the house's event loops wait on (the lane loop, the kv
//! server's RESP loop and its transaction proxy). Level-triggered unless the
//! caller asks otherwise in the event mask; each registration carries a
//! 64-bit key that comes back with its events.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

/// An epoll set.
#[derive(Debug)]
pub struct Epoll(OwnedFd);

impl Epoll {
    /// A new, empty set (close-on-exec).
    pub fn new() -> io::Result<Epoll> {
        // SAFETY: no pointers; the returned descriptor is checked.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` is a fresh descriptor owned by nobody else.
        Ok(Epoll(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    /// `epoll_ctl(op, fd)` with the event mask `events` and the key `key`
    /// (`op` is `EPOLL_CTL_ADD` or `EPOLL_CTL_MOD`; see [`Epoll::remove`]).
    pub fn ctl(&self, op: libc::c_int, fd: RawFd, events: u32, key: u64) -> io::Result<()> {
        let mut ev = libc::epoll_event { events, u64: key };
        // SAFETY: a valid epoll descriptor and event struct.
        if unsafe { libc::epoll_ctl(self.0.as_raw_fd(), op, fd, &mut ev) } < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Takes `fd` out of the set (a descriptor not in it is ignored).
    pub fn remove(&self, fd: RawFd) {
        // SAFETY: a valid epoll descriptor; a null event is allowed for DEL.
        unsafe {
            libc::epoll_ctl(
                self.0.as_raw_fd(),
                libc::EPOLL_CTL_DEL,
                fd,
                std::ptr::null_mut(),
            )
        };
    }

    /// Waits up to `timeout_ms` (`-1`: until an event, `0`: not at all)
    /// and fills `out` with the ready registrations; returns how many. A
    /// signal that interrupted the wait is an error of kind
    /// [`io::ErrorKind::Interrupted`].
    pub fn wait(&self, out: &mut [libc::epoll_event], timeout_ms: i32) -> io::Result<usize> {
        let max = out.len().min(libc::c_int::MAX as usize) as libc::c_int;
        // SAFETY: `out` has room for `max` events.
        let n = unsafe { libc::epoll_wait(self.0.as_raw_fd(), out.as_mut_ptr(), max, timeout_ms) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(n as usize)
    }

    /// The ready registrations, without waiting (an error reads as none).
    pub fn poll(&self, out: &mut [libc::epoll_event]) -> usize {
        self.wait(out, 0).unwrap_or(0)
    }
}

impl AsRawFd for Epoll {
    fn as_raw_fd(&self) -> RawFd {
        self.0.as_raw_fd()
    }
}

impl AsFd for Epoll {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.0.as_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixDatagram;

    /// A registration reports its key once its descriptor is readable,
    /// and nothing after it is removed.
    #[test]
    fn readiness_follows_the_set() {
        let ep = Epoll::new().unwrap();
        let (a, b) = UnixDatagram::pair().unwrap();
        let mut out = [libc::epoll_event { events: 0, u64: 0 }; 4];
        ep.ctl(libc::EPOLL_CTL_ADD, b.as_raw_fd(), libc::EPOLLIN as u32, 7)
            .unwrap();
        assert_eq!(ep.poll(&mut out), 0, "nothing sent yet");
        a.send(b"x").unwrap();
        assert_eq!(ep.wait(&mut out, -1).unwrap(), 1);
        let key = out[0].u64;
        assert_eq!(key, 7);
        ep.remove(b.as_raw_fd());
        assert_eq!(ep.poll(&mut out), 0, "removed: no event though readable");
        assert!(ep
            .ctl(libc::EPOLL_CTL_MOD, b.as_raw_fd(), libc::EPOLLIN as u32, 7)
            .is_err());
    }
}
