//! Thread scheduling helpers for agents and server threads.

use std::io;

/// Lowest and highest `SCHED_FIFO` priority accepted.
pub const RT_PRIORITY_RANGE: std::ops::RangeInclusive<i32> = 1..=98;

/// Put the calling thread under `SCHED_FIFO` at `priority`. Needs
/// `CAP_SYS_NICE` (root); the kernel's RT throttling still leaves other
/// tasks 5 % of each CPU.
pub fn set_realtime(priority: i32) -> io::Result<()> {
    if !RT_PRIORITY_RANGE.contains(&priority) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "SCHED_FIFO priority out of 1..=98",
        ));
    }
    let p = libc::sched_param {
        sched_priority: priority,
    };
    // SAFETY: pid 0 is the calling thread; p is a valid sched_param.
    let r = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &p) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}
