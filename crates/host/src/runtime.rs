//! The lane thread's surroundings: placement, real-time scheduling,
//! timed waits, and the records its loop fills.
//!
//! A lane thread is placed once ([`place_current_thread`]: pinned to a core,
//! `SCHED_FIFO`), locks its memory ([`lock_memory`]), and then runs the lane
//! core's event loop ([`crate::lane_loop::LaneLoop`]), which serves every
//! tunnel end on that core. Two ways to wait ([`WaitMode`]):
//! - `Interrupt`: the thread sleeps until the earliest slot or until a
//!   packet's softirq makes a socket ready.
//! - `BusyPoll`: the thread spins; for a lane thread that owns its core.
//!
//! All times are `CLOCK_REALTIME` nanoseconds, the clock of the kernel's
//! packet timestamps, so send stamps, receive stamps and slot times compare
//! directly on one machine.

use crate::socket::realtime_ns;
use std::os::fd::{AsRawFd, FromRawFd, RawFd};

/// Why placing or running a lane thread failed.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// `sched_setaffinity` failed (core out of range or offline?).
    #[error("cannot pin the thread to core {core}: {source}")]
    Pin {
        /// The core asked for.
        core: usize,
        /// The OS error.
        source: std::io::Error,
    },
    /// `sched_setscheduler(SCHED_FIFO)` failed (not root?).
    #[error("cannot switch to SCHED_FIFO priority {prio}: {source}")]
    Fifo {
        /// The priority asked for.
        prio: i32,
        /// The OS error.
        source: std::io::Error,
    },
    /// `mlockall` failed.
    #[error("mlockall failed: {0}")]
    Lock(std::io::Error),
}

/// How a loop waits for its next event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaitMode {
    /// Sleep until the period or the packet (timer/interrupt driven).
    Interrupt,
    /// Spin on the clock or a non-blocking socket.
    BusyPoll,
}

impl std::str::FromStr for WaitMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "interrupt" | "irq" => Ok(WaitMode::Interrupt),
            "busy-poll" | "busypoll" | "poll" => Ok(WaitMode::BusyPoll),
            _ => Err(format!(
                "unknown wait mode {s:?} (use interrupt or busy-poll)"
            )),
        }
    }
}

/// Where and how a thread runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Placement {
    /// Pin to this core.
    pub core: Option<usize>,
    /// Run at this `SCHED_FIFO` priority (1..=99).
    pub fifo: Option<i32>,
}

/// Pin the calling thread and set its scheduling class.
pub fn place_current_thread(p: Placement) -> Result<(), RuntimeError> {
    if let Some(core) = p.core {
        // SAFETY: cpu_set_t is plain data; CPU_SET writes inside it.
        let r = unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            if core >= libc::CPU_SETSIZE as usize {
                return Err(RuntimeError::Pin {
                    core,
                    source: std::io::Error::from_raw_os_error(libc::EINVAL),
                });
            }
            libc::CPU_SET(core, &mut set);
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set)
        };
        if r != 0 {
            return Err(RuntimeError::Pin {
                core,
                source: std::io::Error::last_os_error(),
            });
        }
    }
    if let Some(prio) = p.fifo {
        let param = libc::sched_param {
            sched_priority: prio,
        };
        // SAFETY: valid param pointer; 0 = calling thread.
        let r = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) };
        if r != 0 {
            return Err(RuntimeError::Fifo {
                prio,
                source: std::io::Error::last_os_error(),
            });
        }
    }
    Ok(())
}

/// Keeps the calling thread, and every thread and process it starts while
/// the guard lives, on `cores` (their affinity is inherited); the old
/// affinity comes back on drop. A benchmark holds one on its main thread
/// so that its helpers (the controller, `tc`, the upcall watchers) stay
/// off the lane core, as an isolated lane core would keep them.
pub struct AffinityGuard {
    old: libc::cpu_set_t,
}

impl AffinityGuard {
    /// Moves the calling thread to `cores` (every core must exist).
    pub fn pin(cores: &[usize]) -> Result<AffinityGuard, RuntimeError> {
        // SAFETY: cpu_set_t is plain data; the calls write inside it.
        unsafe {
            let mut old: libc::cpu_set_t = std::mem::zeroed();
            let size = std::mem::size_of::<libc::cpu_set_t>();
            if libc::sched_getaffinity(0, size, &mut old) != 0 {
                return Err(RuntimeError::Pin {
                    core: cores.first().copied().unwrap_or(0),
                    source: std::io::Error::last_os_error(),
                });
            }
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            for &c in cores {
                if c >= libc::CPU_SETSIZE as usize {
                    return Err(RuntimeError::Pin {
                        core: c,
                        source: std::io::Error::from_raw_os_error(libc::EINVAL),
                    });
                }
                libc::CPU_SET(c, &mut set);
            }
            if libc::sched_setaffinity(0, size, &set) != 0 {
                return Err(RuntimeError::Pin {
                    core: cores.first().copied().unwrap_or(0),
                    source: std::io::Error::last_os_error(),
                });
            }
            Ok(AffinityGuard { old })
        }
    }
}

impl Drop for AffinityGuard {
    fn drop(&mut self) {
        // SAFETY: restores a set read from the kernel.
        unsafe {
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &self.old);
        }
    }
}

/// Sets the calling thread's nice value (threads it starts inherit it) and
/// puts the old one back on drop. A failure leaves it as it was.
pub struct NiceGuard(Option<i32>);

impl NiceGuard {
    /// Sets the calling thread's nice value to `nice`.
    pub fn set(nice: i32) -> NiceGuard {
        // SAFETY: plain get/setpriority on the calling thread (who = 0).
        unsafe {
            *libc::__errno_location() = 0;
            let old = libc::getpriority(libc::PRIO_PROCESS, 0);
            if *libc::__errno_location() != 0 {
                return NiceGuard(None);
            }
            if libc::setpriority(libc::PRIO_PROCESS, 0, nice) != 0 {
                return NiceGuard(None);
            }
            NiceGuard(Some(old))
        }
    }
}

impl Drop for NiceGuard {
    fn drop(&mut self) {
        if let Some(old) = self.0 {
            // SAFETY: as in `set`.
            unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, old) };
        }
    }
}

/// Online CPUs of the machine, whatever the calling thread's affinity.
pub fn online_cpus() -> usize {
    // SAFETY: plain sysconf.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    if n > 0 {
        n as usize
    } else {
        1
    }
}

/// Lock all current and future pages of the process into memory.
pub fn lock_memory() -> Result<(), RuntimeError> {
    // SAFETY: plain syscall.
    let r = unsafe { libc::mlockall(libc::MCL_CURRENT | libc::MCL_FUTURE) };
    if r != 0 {
        return Err(RuntimeError::Lock(std::io::Error::last_os_error()));
    }
    Ok(())
}

/// Sleep (or spin) until `CLOCK_REALTIME` reaches `t_ns`.
pub fn wait_until(t_ns: u64, mode: WaitMode) {
    match mode {
        WaitMode::BusyPoll => {
            while realtime_ns() < t_ns {
                std::hint::spin_loop();
            }
        }
        WaitMode::Interrupt => sleep_until(libc::CLOCK_REALTIME, t_ns),
    }
}

/// Sleep until `clock` reaches `t_ns` (an absolute timer). A signal may end
/// the sleep early: callers re-check the time.
pub fn sleep_until(clock: libc::clockid_t, t_ns: u64) {
    let ts = libc::timespec {
        tv_sec: (t_ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (t_ns % 1_000_000_000) as libc::c_long,
    };
    // SAFETY: valid timespec; EINTR just returns early.
    unsafe { libc::clock_nanosleep(clock, libc::TIMER_ABSTIME, &ts, std::ptr::null_mut()) };
}

/// Sets this thread's timer slack to 1 ns, so timed sleeps (`ppoll`,
/// `clock_nanosleep`) of a non-real-time thread end on time instead of up
/// to the default 50 µs late.
pub fn tighten_timer_slack() {
    // SAFETY: plain prctl on the calling thread.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) };
}

/// Sleeps until one of `fds` is readable or `CLOCK_REALTIME` reaches
/// `wake_ns` (at most 8 descriptors). Returns a bit mask of the readable
/// ones (bit `i` for `fds[i]`; 0 on timeout or a signal).
pub fn wait_readable(fds: &[RawFd], wake_ns: u64) -> std::io::Result<u32> {
    const MAX: usize = 8;
    if fds.len() > MAX {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("wait_readable: {} descriptors, at most {MAX}", fds.len()),
        ));
    }
    let now = realtime_ns();
    let d = wake_ns.saturating_sub(now);
    let ts = libc::timespec {
        tv_sec: (d / 1_000_000_000) as libc::time_t,
        tv_nsec: (d % 1_000_000_000) as libc::c_long,
    };
    let mut pfds = [libc::pollfd {
        fd: -1,
        events: 0,
        revents: 0,
    }; MAX];
    for (p, &fd) in pfds.iter_mut().zip(fds) {
        p.fd = fd;
        p.events = libc::POLLIN;
    }
    // SAFETY: `fds.len()` valid pollfds, a valid timespec, no signal mask change.
    let r = unsafe {
        libc::ppoll(
            pfds.as_mut_ptr(),
            fds.len() as libc::nfds_t,
            &ts,
            std::ptr::null(),
        )
    };
    if r < 0 {
        let e = std::io::Error::last_os_error();
        if e.kind() == std::io::ErrorKind::Interrupted {
            return Ok(0);
        }
        return Err(e);
    }
    let mut mask = 0u32;
    for (i, p) in pfds.iter().take(fds.len()).enumerate() {
        if p.revents != 0 {
            mask |= 1 << i;
        }
    }
    Ok(mask)
}

/// Wakes a thread sleeping in [`wait_readable`] from another thread (an
/// `eventfd`): the sleeper includes [`Waker::fd`] in its set and calls
/// [`Waker::clear`] when woken.
#[derive(Debug)]
pub struct Waker {
    fd: std::os::fd::OwnedFd,
}

impl Waker {
    /// A non-blocking eventfd.
    pub fn new() -> std::io::Result<Self> {
        // SAFETY: plain syscall; the result is checked before use.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: `fd` is a fresh descriptor that nothing else owns.
        Ok(Waker {
            fd: unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) },
        })
    }

    /// Makes the descriptor readable (never blocks).
    pub fn wake(&self) {
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a valid u64; a full counter (EAGAIN) is
        // already readable, which is all a wake needs.
        unsafe { libc::write(self.fd.as_raw_fd(), (&one as *const u64).cast(), 8) };
    }

    /// Makes it unreadable again.
    pub fn clear(&self) {
        let mut v: u64 = 0;
        // SAFETY: reads at most 8 bytes into a valid u64; EAGAIN when not set.
        unsafe { libc::read(self.fd.as_raw_fd(), (&mut v as *mut u64).cast(), 8) };
    }

    /// The descriptor to poll.
    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

/// One latency sample as the receiver saw it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Sample {
    /// Sequence number of the frame.
    pub seq: u64,
    /// Sender's stamp, taken right before `sendto`.
    pub send_ns: u64,
    /// Kernel (or NIC) receive stamp.
    pub kernel_rx_ns: u64,
    /// Time the receiving thread had the packet (after `recvmsg`).
    pub user_rx_ns: u64,
}

impl Sample {
    /// One-way latency to the receiving thread.
    pub fn latency_ns(&self) -> u64 {
        self.user_rx_ns.saturating_sub(self.send_ns)
    }
}

/// A fixed-capacity log of samples: allocated once, never grows.
#[derive(Debug)]
pub struct SampleLog {
    samples: Vec<Sample>,
    overflow: u64,
}

impl SampleLog {
    /// Room for `capacity` samples, allocated now.
    pub fn with_capacity(capacity: usize) -> Self {
        SampleLog {
            samples: Vec::with_capacity(capacity),
            overflow: 0,
        }
    }
    /// Record a sample; beyond capacity it is counted, not stored (no allocation).
    pub fn push(&mut self, s: Sample) {
        if self.samples.len() < self.samples.capacity() {
            self.samples.push(s);
        } else {
            self.overflow += 1;
        }
    }
    /// The stored samples.
    pub fn samples(&self) -> &[Sample] {
        &self.samples
    }
    /// Samples that did not fit.
    pub fn overflow(&self) -> u64 {
        self.overflow
    }
    /// Take the samples out.
    pub fn into_samples(self) -> Vec<Sample> {
        self.samples
    }
}

/// What a send loop did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SendReport {
    /// Frames sent.
    pub frames: u64,
    /// Frames the socket refused (e.g. `ENOBUFS`).
    pub send_errors: u64,
    /// Sum of (actual send − scheduled slot), ns.
    pub late_total_ns: u64,
    /// Worst (actual send − scheduled slot), ns.
    pub late_max_ns: u64,
    /// Sequence number of the last frame sent.
    pub last_seq: u64,
    /// When the last frame's send system call returned (`CLOCK_REALTIME`
    /// ns): on veth that call carries the frame through the emulated
    /// network to the receivers' sockets.
    pub last_returned_ns: u64,
}

/// What a receive loop saw, beyond the core's own counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RecvReport {
    /// Datagrams read (from the socket and the AF_XDP rings).
    pub datagrams: u64,
    /// Datagrams the core refused (malformed, wrong tunnel, …).
    pub refused: u64,
    /// Datagrams cut because they were larger than a lane frame.
    pub truncated: u64,
    /// Datagrams that carried a hardware stamp.
    pub hw_stamps: u64,
    /// Datagrams that carried a kernel software stamp.
    pub kernel_stamps: u64,
    /// Datagrams refused by the MAC check before the core saw them
    /// (forged, replayed, unkeyed).
    pub unauthenticated: u64,
    /// Of `datagrams`, those read from the AF_XDP rings.
    pub xdp: u64,
}

/// The default lane core: the last CPU of the NUMA node the NIC `iface` is
/// attached to, when the kernel knows it (`/sys/class/net/IF/device/numa_node`),
/// else the last online CPU. Reads sysfs under `root` (`/` on a machine).
pub fn default_lane_core(root: &std::path::Path, iface: Option<&str>, ncpu: usize) -> usize {
    let last = ncpu.saturating_sub(1);
    let Some(iface) = iface else { return last };
    let read = |p: String| std::fs::read_to_string(root.join(p)).ok();
    let node = match read(format!("sys/class/net/{iface}/device/numa_node"))
        .and_then(|s| s.trim().parse::<i64>().ok())
    {
        Some(n) if n >= 0 => n,
        _ => return last,
    };
    read(format!("sys/devices/system/node/node{node}/cpulist"))
        .and_then(|l| last_cpu_in_list(&l))
        .filter(|&c| c < ncpu)
        .unwrap_or(last)
}

/// The highest CPU in a kernel CPU list such as `0-3,8-11`.
fn last_cpu_in_list(list: &str) -> Option<usize> {
    list.trim()
        .split(',')
        .filter_map(|part| part.rsplit('-').next()?.trim().parse::<usize>().ok())
        .max()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists() {
        let cases = [
            ("0-3,8-11", Some(11)),
            ("5", Some(5)),
            ("0,2,4", Some(4)),
            ("", None),
            ("x", None),
        ];
        for (l, want) in cases {
            assert_eq!(last_cpu_in_list(l), want, "{l:?}");
        }
    }

    #[test]
    fn lane_core_follows_the_nic_numa_node() {
        let dir = std::env::temp_dir().join(format!("xlane-numa-{}", std::process::id()));
        let w = |p: &str, v: &str| {
            let f = dir.join(p);
            std::fs::create_dir_all(f.parent().unwrap()).unwrap();
            std::fs::write(f, v).unwrap();
        };
        w("sys/class/net/eth0/device/numa_node", "1\n");
        w("sys/class/net/veth0/device/numa_node", "-1\n");
        w("sys/devices/system/node/node1/cpulist", "4-7\n");
        let cases = [
            (Some("eth0"), 16, 7),   // last CPU of node 1
            (Some("veth0"), 16, 15), // no node: last CPU
            (Some("nope"), 16, 15),  // unknown NIC
            (None, 16, 15),
            (Some("eth0"), 6, 5), // node's CPU beyond what is online: fall back
        ];
        for (iface, ncpu, want) in cases {
            assert_eq!(
                default_lane_core(&dir, iface, ncpu),
                want,
                "{iface:?} {ncpu}"
            );
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
