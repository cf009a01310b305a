//! Bridges between the lanes (X-Lane §2.4): shared-memory rings between
//! the lane daemon and applications in other processes.
//!
//! An application talks to the lane through a *bridge pair* of two
//! lock-free single-producer/single-consumer rings:
//!
//! - the **R-X** ring (regular → express): the application produces, the
//!   lane thread consumes;
//! - the **X-R** ring (express → regular): the lane thread produces, the
//!   application consumes.
//!
//! # Rings
//!
//! A [`Ring`] is one memfd (`memfd_create`, sealed against shrinking and
//! growing) mapped shared by both processes: a 4096-byte header page, then
//! `slots` fixed-size slots, each a u32 length and up to `slot_size` bytes
//! of payload. The header holds the magic, the layout version, the
//! geometry, a checksum over those immutable fields, the producer and
//! consumer indices (free-running `AtomicU64`s on separate cache lines,
//! published with `Release` and read with `Acquire`), and the
//! closed flags. The full byte layout is in [`layout`], with every offset
//! in [`layout::field`].
//!
//! [`Producer::try_send`] and [`Consumer::try_recv`] (and the zero-copy
//! [`Producer::try_send_with`] / [`Consumer::try_recv_with`]) do bounded
//! work: an O(len) copy and a handful of loads and stores. They never
//! allocate, lock, make a system call, block, or drop a message silently:
//! `Full` and `TooLarge` are errors the caller sees.
//!
//! The other process may be buggy or hostile. Attaching ([`Ring::attach`])
//! refuses an unsealed memfd, a wrong magic, another layout version
//! ([`AttachError::VersionMismatch`]) and any inconsistency
//! ([`AttachError::CorruptHeader`]: checksum, sizes, geometry against the
//! memfd's size, impossible indices). At run time every index and length
//! read from shared memory is checked before use
//! ([`RecvError::CorruptIndex`], [`RecvError::BadLength`],
//! [`SendError::CorruptIndex`]); nothing is ever read or written outside
//! the mapping.
//!
//! # Handing bridges to applications
//!
//! The daemon runs a [`BridgeServer`] on a UNIX stream socket (e.g.
//! `/run/xlane/<name>.sock`), off the lane thread: its control thread calls
//! the non-blocking [`BridgeServer::poll_accept`], which creates a fresh
//! pair for each application, sends both memfds with `SCM_RIGHTS` (see
//! [`handshake`]) and returns the lane's ends ([`LaneEnd`]). The
//! application calls [`client::connect`] and gets a [`BridgeClient`].
//!
//! # Going away
//!
//! Dropping an end sets its closed flag; the peer then gets `PeerGone`
//! (a consumer only after draining what was sent before). A process that
//! dies sets no flag, so the socket stays open for the bridge's lifetime:
//! [`BridgeServer::poll_hangups`] sees the application's socket close and
//! marks its rings closed for the lane; the client's blocking helpers
//! ([`BridgeClient::recv_blocking`], [`BridgeClient::send_blocking`]) see
//! the daemon's socket close and return `PeerGone` instead of spinning
//! forever.

pub mod client;
pub mod delivery;
mod error;
pub mod handshake;
pub mod layout;
mod ring;
mod server;

pub use client::{connect, BridgeClient};
pub use delivery::{DeliveryError, DeliveryHeader};
pub use error::{
    AcceptError, AttachError, BindError, ConfigError, ConnectError, CreateError, Direction,
    HeaderDefect, RecvError, SendError,
};
pub use layout::{Geometry, RingConfig, LAYOUT_VERSION};
pub use ring::{Consumer, Producer, Ring};
pub use server::{BridgeServer, BridgeServerConfig, LaneEnd};
