//! Why `xlane bench fd` failed.

use crate::interference::BenchError;
use std::path::PathBuf;

/// Why `xlane bench fd` failed.
#[derive(Debug, thiserror::Error)]
pub enum FdBenchError {
    /// The testbed, tuning, flows, floor probe or output failed.
    #[error("{0}")]
    Bench(#[from] BenchError),
    /// A process could not be started.
    #[error("cannot start {what}: {source}")]
    Spawn {
        /// What.
        what: String,
        /// Cause.
        source: std::io::Error,
    },
    /// A file of the failure experiment could not be made.
    #[error("{path}: {source}")]
    File {
        /// The file or directory.
        path: PathBuf,
        /// Cause.
        source: std::io::Error,
    },
    /// A runner or application did not come up.
    #[error("host {host}: {detail}")]
    NotReady {
        /// Host index.
        host: usize,
        /// What was seen.
        detail: String,
    },
    /// The detectors did not recover after a failure was undone.
    #[error("{kind} on host {host}: not recovered: {detail}")]
    NotRecovered {
        /// Failure kind.
        kind: &'static str,
        /// Victim.
        host: usize,
        /// What was seen.
        detail: String,
    },
    /// A signal could not be sent.
    #[error("signal {signal} to pid {pid}: {source}")]
    Signal {
        /// Signal name.
        signal: &'static str,
        /// Target.
        pid: u32,
        /// Cause.
        source: std::io::Error,
    },
    /// Setting a link down or up failed.
    #[error("link {port}: {detail}")]
    Link {
        /// The switch port.
        port: String,
        /// What went wrong.
        detail: String,
    },
    /// The plot could not be written.
    #[error("plot: {0}")]
    Plot(String),
}
