//! Why a run could not be done.

use crate::config::ConfigError;
use std::io;
use std::net::SocketAddrV4;
use xlane_host::socket::SocketError;

/// Why a run could not be done (as opposed to a run whose checks failed,
/// which is a [`Report`](crate::report::Report) with verdicts).
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// Bad settings.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// A UDP socket could not be opened.
    #[error("opening a UDP socket: {0}")]
    Socket(#[from] SocketError),
    /// A TCP connection could not be made.
    #[error("connecting to {target}: {source}")]
    Connect {
        /// The server.
        target: SocketAddrV4,
        /// The OS error.
        source: io::Error,
    },
    /// Another system call failed.
    #[error("{what}: {source}")]
    Io {
        /// Which step.
        what: &'static str,
        /// The OS error.
        source: io::Error,
    },
    /// An agent thread died.
    #[error("agent thread failed: {0}")]
    Agent(String),
}
