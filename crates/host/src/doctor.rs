//! `xlane doctor`: checks every jitter source of the X-Lane paper (§4.3) on
//! this host and says, for each, whether it is `ok`, `fixable now` (with the
//! shell command that fixes it now), or `needs reboot` (with the kernel boot
//! parameter to add); `info`/`unknown` where it cannot tell, and `warn` for
//! what no setting can fix (the time the hypervisor takes away).
//!
//! Every check is a function of a [`SysSource`] (the files of `/proc`,
//! `/sys`, `/boot`, `/dev`, `/run` under some root) and a [`Context`] (the
//! lane core, the interfaces, and what was measured during the measurement
//! window), so the decisions can be tested against a directory tree.
//! [`run`] takes the measurements on the real machine and runs every check.
//!
//! # Thresholds of the floor verdict
//!
//! The floor probe ([`crate::floor`]) spins on every online core during the
//! window. A core is `ok` when it lost at most
//! [`FLOOR_OK_STOLEN_FRACTION`] (0.1 %) of the window in gaps longer than
//! the probe threshold (10 µs) *and* its longest gap was at most
//! [`FLOOR_OK_MAX_GAP_NS`] (100 µs), roughly what a tuned bare-metal core
//! shows with timer ticks still on; otherwise `warn`: no software bound
//! tighter than the longest gap can hold on that core. The hypervisor's own
//! steal accounting (`/proc/stat`) is `ok` at zero ticks, `warn` otherwise.

mod checks;
mod model;
mod report;
mod sys;

pub use checks::*;
pub use model::*;
pub use report::*;
pub use sys::*;

#[cfg(test)]
mod tests;
