//! The lane core's budget: what the lane threads themselves take from it,
//! and where the rest of its time went.
//!
//! - [`ThreadUsage`]: a thread's own CPU time and context switches, read
//!   from `/proc/thread-self/schedstat` and `/proc/thread-self/status` (so
//!   by the thread itself, at the start and the end of its run: nothing is
//!   read on the real-time path).
//! - [`CpuTimes`]: one CPU's line of `/proc/stat` (user, system, irq,
//!   softirq, idle, steal), so a report can say which share of the lane
//!   core went to the kernel's network work.
//!
//! - [`InstructionCounter`]: the instructions a thread retires (user and
//!   kernel), from the processor's counter through `perf_event_open`,
//!   where the machine offers one (many virtual machines do not).
//!
//! All are plain counters; differences of two readings are what reports use.

use serde::Serialize;

/// A thread's CPU time and context switches since it started.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ThreadUsage {
    /// Time spent on a CPU, ns (`schedstat`, first field).
    pub cpu_ns: u64,
    /// Voluntary context switches (the thread slept: one wake-up each).
    pub voluntary: u64,
    /// Involuntary context switches (the thread was preempted).
    pub involuntary: u64,
}

impl ThreadUsage {
    /// The calling thread's counters. Zeros where `/proc` cannot be read.
    /// No allocation (the files are read into stack buffers), so a lane
    /// loop can read it at its start and end.
    pub fn current() -> ThreadUsage {
        let mut buf = [0u8; 4096];
        let cpu_ns = read_small("/proc/thread-self/schedstat", &mut buf)
            .and_then(|s| s.split_whitespace().next()?.parse().ok())
            .unwrap_or(0);
        let (voluntary, involuntary) =
            parse_switches(read_small("/proc/thread-self/status", &mut buf).unwrap_or(""));
        ThreadUsage {
            cpu_ns,
            voluntary,
            involuntary,
        }
    }

    /// `self − earlier`, counter by counter (saturating).
    pub fn since(&self, earlier: &ThreadUsage) -> ThreadUsage {
        ThreadUsage {
            cpu_ns: self.cpu_ns.saturating_sub(earlier.cpu_ns),
            voluntary: self.voluntary.saturating_sub(earlier.voluntary),
            involuntary: self.involuntary.saturating_sub(earlier.involuntary),
        }
    }

    /// Times the thread woke from a sleep: every voluntary switch away
    /// (it blocked) is followed by one. Involuntary switches are
    /// preemptions of a thread that was still runnable, not wake-ups.
    pub fn wakeups(&self) -> u64 {
        self.voluntary
    }

    /// Sum of two readings' differences (several threads on one core).
    pub fn add(&self, o: &ThreadUsage) -> ThreadUsage {
        ThreadUsage {
            cpu_ns: self.cpu_ns + o.cpu_ns,
            voluntary: self.voluntary + o.voluntary,
            involuntary: self.involuntary + o.involuntary,
        }
    }
}

/// Reads a small text file into `buf` (no allocation); `None` on error.
fn read_small<'a>(path: &str, buf: &'a mut [u8]) -> Option<&'a str> {
    use std::io::Read;
    let mut f = std::fs::File::open(path).ok()?;
    let mut n = 0;
    while n < buf.len() {
        match f.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(_) => return None,
        }
    }
    std::str::from_utf8(&buf[..n]).ok()
}

fn parse_switches(status: &str) -> (u64, u64) {
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name)?.trim().parse::<u64>().ok())
            .unwrap_or(0)
    };
    (
        field("voluntary_ctxt_switches:"),
        field("nonvoluntary_ctxt_switches:"),
    )
}

/// One CPU's time by kind, in clock ticks (`/proc/stat`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct CpuTimes {
    /// User time (with nice).
    pub user: u64,
    /// System time.
    pub system: u64,
    /// Hard interrupts.
    pub irq: u64,
    /// Soft interrupts (the kernel's network receive and transmit work).
    pub softirq: u64,
    /// Idle and I/O wait.
    pub idle: u64,
    /// Taken by the hypervisor.
    pub steal: u64,
}

impl CpuTimes {
    /// CPU `cpu`'s line of `/proc/stat`; `None` if it cannot be read.
    pub fn read(cpu: usize) -> Option<CpuTimes> {
        let s = std::fs::read_to_string("/proc/stat").ok()?;
        parse_cpu_line(&s, cpu)
    }

    /// `self − earlier` (saturating).
    pub fn since(&self, e: &CpuTimes) -> CpuTimes {
        CpuTimes {
            user: self.user.saturating_sub(e.user),
            system: self.system.saturating_sub(e.system),
            irq: self.irq.saturating_sub(e.irq),
            softirq: self.softirq.saturating_sub(e.softirq),
            idle: self.idle.saturating_sub(e.idle),
            steal: self.steal.saturating_sub(e.steal),
        }
    }

    /// All ticks counted.
    pub fn total(&self) -> u64 {
        self.user + self.system + self.irq + self.softirq + self.idle + self.steal
    }

    /// Each kind's share of the total (zeros for an empty interval).
    pub fn shares(&self) -> CpuShares {
        let t = self.total().max(1) as f64;
        CpuShares {
            user: self.user as f64 / t,
            system: self.system as f64 / t,
            irq: self.irq as f64 / t,
            softirq: self.softirq as f64 / t,
            idle: self.idle as f64 / t,
            steal: self.steal as f64 / t,
        }
    }
}

/// [`CpuTimes`] as fractions of an interval.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct CpuShares {
    /// User time.
    pub user: f64,
    /// System time.
    pub system: f64,
    /// Hard interrupts.
    pub irq: f64,
    /// Soft interrupts.
    pub softirq: f64,
    /// Idle.
    pub idle: f64,
    /// Hypervisor steal.
    pub steal: f64,
}

fn parse_cpu_line(stat: &str, cpu: usize) -> Option<CpuTimes> {
    let name = format!("cpu{cpu}");
    let line = stat
        .lines()
        .find(|l| l.split_whitespace().next() == Some(name.as_str()))?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(|x| x.parse().unwrap_or(0))
        .collect();
    let g = |i: usize| v.get(i).copied().unwrap_or(0);
    // user nice system idle iowait irq softirq steal ...
    Some(CpuTimes {
        user: g(0) + g(1),
        system: g(2),
        idle: g(3) + g(4),
        irq: g(5),
        softirq: g(6),
        steal: g(7),
    })
}

/// The instructions the calling thread retires from now on, user and
/// kernel, counted by the processor (`perf_event_open`,
/// `PERF_COUNT_HW_INSTRUCTIONS`). Unlike time, the count does not move
/// with the machine's noise.
#[derive(Debug)]
pub struct InstructionCounter {
    fd: std::os::fd::OwnedFd,
}

/// `struct perf_event_attr` as of its first version (64 bytes), the part
/// a counting event needs; the kernel takes the size from `size`.
#[repr(C)]
#[derive(Default)]
struct PerfEventAttr {
    kind: u32,
    size: u32,
    config: u64,
    sample_period: u64,
    sample_type: u64,
    read_format: u64,
    /// Bit flags (`disabled`, `inherit`, …): all clear, so the counter
    /// counts from its creation, kernel included.
    flags: u64,
    wakeup_events: u32,
    bp_type: u32,
    config1: u64,
}

impl InstructionCounter {
    /// Starts counting for the calling thread. Fails where the machine has
    /// no such counter (`perf stat -e instructions` says "not supported"
    /// there too) or the caller may not open one.
    pub fn start() -> std::io::Result<InstructionCounter> {
        use std::os::fd::FromRawFd;
        const PERF_TYPE_HARDWARE: u32 = 0;
        const PERF_COUNT_HW_INSTRUCTIONS: u64 = 1;
        const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 8;
        let attr = PerfEventAttr {
            kind: PERF_TYPE_HARDWARE,
            size: std::mem::size_of::<PerfEventAttr>() as u32,
            config: PERF_COUNT_HW_INSTRUCTIONS,
            ..PerfEventAttr::default()
        };
        // SAFETY: a valid attribute struct of the size it names; this
        // thread (pid 0) on any CPU (-1), no group.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_perf_event_open,
                &attr as *const PerfEventAttr,
                0,
                -1,
                -1,
                PERF_FLAG_FD_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: a fresh descriptor we own.
        Ok(InstructionCounter {
            fd: unsafe { std::os::fd::OwnedFd::from_raw_fd(fd as i32) },
        })
    }

    /// Instructions retired since [`Self::start`].
    pub fn read(&self) -> std::io::Result<u64> {
        use std::os::fd::AsRawFd;
        let mut v = 0u64;
        // SAFETY: reads 8 bytes into a u64.
        let n = unsafe { libc::read(self.fd.as_raw_fd(), (&mut v as *mut u64).cast(), 8) };
        if n != 8 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_proc_stat_lines() {
        let stat = "cpu  10 1 20 300 4 5 6 7 0 0\n\
                    cpu0 1 0 2 30 0 0 1 0 0 0\n\
                    cpu1 9 1 18 270 4 5 5 7 0 0\n\
                    intr 1 2 3\n";
        let cases = [
            (
                0,
                Some(CpuTimes {
                    user: 1,
                    system: 2,
                    irq: 0,
                    softirq: 1,
                    idle: 30,
                    steal: 0,
                }),
            ),
            (
                1,
                Some(CpuTimes {
                    user: 10,
                    system: 18,
                    irq: 5,
                    softirq: 5,
                    idle: 274,
                    steal: 7,
                }),
            ),
            (2, None),
        ];
        for (cpu, want) in cases {
            assert_eq!(parse_cpu_line(stat, cpu), want, "cpu{cpu}");
        }
        let a = parse_cpu_line(stat, 1).unwrap();
        let s = a.since(&CpuTimes::default()).shares();
        assert!((s.softirq - 5.0 / 319.0).abs() < 1e-12);
    }

    #[test]
    fn parses_context_switches() {
        let status = "Name:\tx\nvoluntary_ctxt_switches:\t42\nnonvoluntary_ctxt_switches:\t7\n";
        assert_eq!(parse_switches(status), (42, 7));
        assert_eq!(parse_switches("Name: x\n"), (0, 0));
    }

    #[test]
    fn a_sleeping_thread_counts_its_wakeups() {
        let before = ThreadUsage::current();
        for _ in 0..5 {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        let d = ThreadUsage::current().since(&before);
        assert!(d.voluntary >= 5, "{d:?}");
    }

    /// Where the machine has the counter, work shows in it; where it has
    /// none, starting fails with the kernel's reason (never a count of 0).
    #[test]
    fn instruction_counter_counts_work_or_says_why_not() {
        match InstructionCounter::start() {
            Ok(c) => {
                let a = c.read().expect("read");
                let mut x = 0u64;
                for i in 0..100_000u64 {
                    x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(i));
                }
                let b = c.read().expect("read");
                assert!(b - a >= 100_000, "{a} → {b}");
            }
            Err(e) => assert!(e.raw_os_error().is_some(), "{e}"),
        }
    }
}
