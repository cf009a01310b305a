//! The testbed's error type.

use crate::config::ConfigError;
use crate::exec::CommandError;
use std::path::PathBuf;

/// Why a testbed operation failed.
#[derive(Debug, thiserror::Error)]
pub enum TestbedError {
    /// Creating or changing namespaces needs root.
    #[error("the testbed needs root (network namespaces, veth and tc): run as root or with sudo")]
    NotRoot,
    /// The configuration was refused.
    #[error("invalid testbed config: {0}")]
    Config(#[from] ConfigError),
    /// An `ip`/`tc` command failed.
    #[error(transparent)]
    Command(#[from] CommandError),
    /// A file or socket operation failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// Entering or leaving a network namespace failed.
    #[error("network namespace {name:?}: {what}: {source}")]
    Netns {
        /// The namespace name.
        name: String,
        /// What was being done.
        what: &'static str,
        /// The underlying error.
        #[source]
        source: nix::Error,
    },
    /// A state file could not be read or written.
    #[error("state file {path}: {reason}")]
    State {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// No testbed with this prefix exists.
    #[error("no testbed with prefix {0:?} (see `xlane testbed status`)")]
    NoSuchTestbed(String),
    /// A host index out of range.
    #[error("host index {index} out of range (testbed has {hosts} hosts)")]
    BadHost {
        /// The index given.
        index: usize,
        /// Number of hosts.
        hosts: usize,
    },
    /// A bad argument (CPU number, traffic spec, ...).
    #[error("invalid argument: {0}")]
    Invalid(String),
    /// Output of a tool could not be understood.
    #[error("could not parse {what}: {detail}")]
    Parse {
        /// What was parsed.
        what: String,
        /// What went wrong.
        detail: String,
    },
    /// A generator or probe thread failed.
    #[error("{0}")]
    Thread(String),
}

impl TestbedError {
    /// An `Io` error with context.
    pub(crate) fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        TestbedError::Io {
            context: context.into(),
            source,
        }
    }
}
