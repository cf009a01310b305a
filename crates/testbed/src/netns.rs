//! Moving the current thread into a named network namespace and back.
//!
//! A network namespace is a per-thread attribute, so one process can run the
//! lane threads of several emulated hosts: each thread enters its host's
//! namespace. Sockets stay in the namespace they were created in, even after
//! the thread leaves it.

use crate::error::TestbedError;
use nix::sched::{setns, CloneFlags};
use std::fs::File;
use std::marker::PhantomData;
use std::os::fd::AsFd;

/// Directory where `ip netns` keeps its namespace handles.
pub const NETNS_DIR: &str = "/run/netns";

/// While alive, the current thread is in another network namespace; on drop
/// the thread returns to the namespace it was in before. Not `Send`: it
/// belongs to the thread that entered.
#[must_use = "the thread leaves the namespace when the guard is dropped"]
pub struct NetnsGuard {
    name: String,
    orig: File,
    _not_send: PhantomData<*const ()>,
}

impl NetnsGuard {
    /// Name of the namespace entered.
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl std::fmt::Debug for NetnsGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NetnsGuard")
            .field("name", &self.name)
            .finish()
    }
}

impl Drop for NetnsGuard {
    fn drop(&mut self) {
        if let Err(e) = setns(self.orig.as_fd(), CloneFlags::CLONE_NEWNET) {
            // Cannot happen with a valid fd of a namespace we were in; if it
            // does, the thread is in the wrong namespace and must not go on.
            eprintln!(
                "xlane-testbed: could not leave network namespace {:?}: {e}; aborting",
                self.name
            );
            std::process::abort();
        }
    }
}

/// Check that `name` can be a file name in `/run/netns`.
fn check_name(name: &str) -> Result<(), TestbedError> {
    if name.is_empty() || name == "." || name == ".." || name.contains('/') || name.contains('\0') {
        return Err(TestbedError::Invalid(format!(
            "bad network namespace name {name:?}"
        )));
    }
    Ok(())
}

/// Move the current thread into the network namespace `/run/netns/<name>`
/// (as made by `ip netns add` or `Testbed::up`); the returned guard moves it
/// back when dropped.
pub fn enter_netns(name: &str) -> Result<NetnsGuard, TestbedError> {
    check_name(name)?;
    let orig = File::open("/proc/thread-self/ns/net")
        .map_err(|e| TestbedError::io("open /proc/thread-self/ns/net", e))?;
    let path = format!("{NETNS_DIR}/{name}");
    let target = File::open(&path).map_err(|e| TestbedError::io(format!("open {path}"), e))?;
    setns(target.as_fd(), CloneFlags::CLONE_NEWNET).map_err(|source| TestbedError::Netns {
        name: name.to_string(),
        what: "setns",
        source,
    })?;
    Ok(NetnsGuard {
        name: name.to_string(),
        orig,
        _not_send: PhantomData,
    })
}

/// Run `f` with the current thread inside namespace `name`, then return.
/// Sockets created by `f` stay in that namespace.
pub fn in_netns<T>(name: &str, f: impl FnOnce() -> T) -> Result<T, TestbedError> {
    let _guard = enter_netns(name)?;
    Ok(f())
}

/// Write a sysctl (`path` relative to `/proc/sys`, e.g.
/// `net/ipv6/conf/all/disable_ipv6`) inside namespace `name`. Network
/// sysctls belong to the namespace of the thread that opens them.
pub fn write_sysctl_in(name: &str, path: &str, value: &str) -> Result<(), TestbedError> {
    let full = format!("/proc/sys/{path}");
    in_netns(name, || std::fs::write(&full, value))?
        .map_err(|e| TestbedError::io(format!("write {full} in netns {name}"), e))
}

/// Read a sysctl inside namespace `name` (trimmed).
pub fn read_sysctl_in(name: &str, path: &str) -> Result<String, TestbedError> {
    let full = format!("/proc/sys/{path}");
    in_netns(name, || std::fs::read_to_string(&full))?
        .map(|s| s.trim().to_string())
        .map_err(|e| TestbedError::io(format!("read {full} in netns {name}"), e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked() {
        for bad in ["", ".", "..", "a/b", "../x"] {
            assert!(
                matches!(enter_netns(bad), Err(TestbedError::Invalid(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn missing_namespace_is_an_io_error() {
        let e = enter_netns("xlane-no-such-namespace-here").unwrap_err();
        assert!(matches!(e, TestbedError::Io { .. }), "{e}");
    }
}
