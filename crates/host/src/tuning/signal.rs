//! An async-signal-safe termination flag for SIGTERM and SIGINT.

use nix::sys::signal::{sigaction, SaFlags, SigAction, SigHandler, SigSet, Signal};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Once;

static TERMINATE: AtomicBool = AtomicBool::new(false);
static INSTALL: Once = Once::new();

extern "C" fn on_signal(sig: libc::c_int) {
    // Only async-signal-safe operations: an atomic swap, and on a second
    // signal, signal(2) and raise(3).
    if TERMINATE.swap(true, Ordering::SeqCst) {
        // SAFETY: signal and raise are async-signal-safe.
        unsafe {
            libc::signal(sig, libc::SIG_DFL);
            libc::raise(sig);
        }
    }
}

/// Installs handlers for SIGTERM and SIGINT that only set the returned flag
/// (once per process; later calls return the same flag).
///
/// The daemon's loops poll the flag and return normally, so that every
/// [`AppliedTuning`](super::AppliedTuning) is dropped and restores the
/// machine. The handlers are installed without `SA_RESTART`, so a blocking
/// system call returns `EINTR` and the loop gets to see the flag. A second
/// signal while the flag is already set ends the process the default way
/// (without restoring: the journal stays for `xlane doctor`). SIGKILL cannot
/// be caught at all; see [`restore_from_journal`](super::restore_from_journal).
pub fn install_termination_flag() -> &'static AtomicBool {
    INSTALL.call_once(|| {
        let action = SigAction::new(
            SigHandler::Handler(on_signal),
            SaFlags::empty(),
            SigSet::empty(),
        );
        for sig in [Signal::SIGTERM, Signal::SIGINT] {
            // SAFETY: the handler only performs async-signal-safe
            // operations. Installing a handler for these signals cannot
            // fail with valid arguments; if it did, the flag simply never
            // gets set.
            let _ = unsafe { sigaction(sig, &action) };
        }
    });
    &TERMINATE
}
