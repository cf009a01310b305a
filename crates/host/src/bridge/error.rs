//! Error types of the bridge: one enum per operation.

use std::fmt;
use std::io;
use std::path::PathBuf;

use thiserror::Error;

/// Which of the two rings of a bridge pair something is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Direction {
    /// The R-X ring: the application (regular lane) produces, the lane consumes.
    RegularToExpress,
    /// The X-R ring: the lane produces, the application consumes.
    ExpressToRegular,
}

impl fmt::Display for Direction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Direction::RegularToExpress => "R-X",
            Direction::ExpressToRegular => "X-R",
        })
    }
}

/// A [`RingConfig`](super::RingConfig) that cannot be built.
#[derive(Debug, Error, Clone, Copy, PartialEq, Eq)]
pub enum ConfigError {
    /// `slot_size` is zero.
    #[error("slot size must be at least 1 byte")]
    ZeroSlotSize,
    /// `slot_size` is above the maximum.
    #[error("slot size {size} exceeds the maximum {max}")]
    SlotSizeTooLarge {
        /// Requested slot size.
        size: usize,
        /// Largest accepted slot size.
        max: usize,
    },
    /// `slots` is zero or not a power of two.
    #[error("slot count {0} is not a power of two")]
    SlotsNotPowerOfTwo(usize),
    /// `slots` is above the maximum.
    #[error("slot count {slots} exceeds the maximum {max}")]
    TooManySlots {
        /// Requested slot count.
        slots: usize,
        /// Largest accepted slot count.
        max: usize,
    },
    /// The whole ring would be larger than the largest accepted mapping.
    #[error("a ring of {len} bytes exceeds the maximum mapping size {max}")]
    MappingTooLarge {
        /// Bytes the ring would need.
        len: u64,
        /// Largest accepted mapping.
        max: u64,
    },
}

/// Creating a ring failed.
#[derive(Debug, Error)]
pub enum CreateError {
    /// The configuration is invalid.
    #[error("invalid ring configuration: {0}")]
    Config(#[from] ConfigError),
    /// The memfd name contains a NUL byte.
    #[error("ring name {0:?} contains a NUL byte")]
    InvalidName(String),
    /// A system call failed.
    #[error("{op} failed while creating a ring: {source}")]
    Os {
        /// The failing call.
        op: &'static str,
        /// The OS error.
        #[source]
        source: io::Error,
    },
}

/// What is wrong with a ring header that has the right magic and version.
#[derive(Debug, Error, Clone, Copy, PartialEq, Eq)]
pub enum HeaderDefect {
    /// The memfd is shorter than the header page.
    #[error("the memfd has {len} bytes, less than the {min}-byte header")]
    Truncated {
        /// Size of the memfd.
        len: u64,
        /// Size of the header.
        min: u64,
    },
    /// The checksum over the immutable fields does not match.
    #[error("header checksum {stored:#018x} does not match the computed {computed:#018x}")]
    Checksum {
        /// Checksum stored in the header.
        stored: u64,
        /// Checksum of the fields as found.
        computed: u64,
    },
    /// The header size field is not the one this layout uses.
    #[error("header size {found} is not {expected}")]
    HeaderSize {
        /// The size the header states.
        found: u32,
        /// The size of this layout's header.
        expected: u32,
    },
    /// The reserved field is not zero.
    #[error("reserved header field is {0:#x}, not zero")]
    Reserved(u32),
    /// The slot size is zero or too large.
    #[error("slot size {0} is out of range")]
    SlotSize(u32),
    /// The slot count is not a power of two, or too large.
    #[error("slot count {0} is not a power of two in range")]
    SlotCount(u32),
    /// The slot stride does not follow from the slot size.
    #[error("slot stride {found} does not match the {expected} the slot size calls for")]
    SlotStride {
        /// Stride in the header.
        found: u32,
        /// Stride the slot size calls for.
        expected: u32,
    },
    /// The ring (as the header or the memfd's size describes it) is larger
    /// than the largest accepted mapping.
    #[error("a ring of {len} bytes exceeds the maximum mapping size {max}")]
    TooLarge {
        /// Size described.
        len: u64,
        /// Largest accepted mapping.
        max: u64,
    },
    /// The memfd's size does not match slot size and count.
    #[error("the memfd has {mapping} bytes but the header describes {expected}")]
    MappingSize {
        /// Size of the memfd.
        mapping: u64,
        /// Size the header describes.
        expected: u64,
    },
    /// The indices are impossible (consumer ahead, or more than `slots` apart).
    #[error("indices out of range: producer {producer}, consumer {consumer}, {slots} slots")]
    Indices {
        /// Producer index found.
        producer: u64,
        /// Consumer index found.
        consumer: u64,
        /// Slot count.
        slots: u32,
    },
}

/// Attaching to a ring (mapping a memfd another process created) failed.
#[derive(Debug, Error)]
pub enum AttachError {
    /// A system call failed.
    #[error("{op} failed on the ring memfd: {source}")]
    Os {
        /// The failing call.
        op: &'static str,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// The memfd is not sealed against shrinking, so mapping it is unsafe.
    #[error("the ring memfd is not sealed against shrinking (F_SEAL_SHRINK); refusing to map it")]
    NotSealed,
    /// The first 8 bytes are not the bridge magic.
    #[error("bad magic {found:#018x}: not an xlane bridge ring")]
    BadMagic {
        /// The magic found.
        found: u64,
    },
    /// The ring was written by a build with another layout version.
    #[error("ring layout version {found}, this build speaks version {expected}")]
    VersionMismatch {
        /// Version in the header.
        found: u32,
        /// Version this build speaks.
        expected: u32,
    },
    /// The header is inconsistent.
    #[error("corrupt ring header: {what}")]
    CorruptHeader {
        /// What is wrong.
        what: HeaderDefect,
    },
}

/// A message could not be sent; nothing was written and nothing was dropped silently.
#[derive(Debug, Error, Clone, Copy, PartialEq, Eq)]
pub enum SendError {
    /// Every slot is in use; retry after the consumer has caught up.
    #[error("the ring is full")]
    Full,
    /// The message does not fit in a slot.
    #[error("a message of {len} bytes exceeds the slot size {max}")]
    TooLarge {
        /// Length of the message.
        len: usize,
        /// Largest payload per slot.
        max: usize,
    },
    /// The consumer has closed its end or its process is gone.
    #[error("the consumer is gone")]
    PeerGone,
    /// The consumer published an impossible index: the peer is buggy or hostile.
    /// The ring is unusable.
    #[error("impossible consumer index {consumer} (producer at {producer}, {slots} slots)")]
    CorruptIndex {
        /// This producer's index.
        producer: u64,
        /// The consumer index read from shared memory.
        consumer: u64,
        /// Slot count.
        slots: u32,
    },
}

/// A message could not be received.
#[derive(Debug, Error, Clone, Copy, PartialEq, Eq)]
pub enum RecvError {
    /// The producer has closed its end or its process is gone, and every
    /// message it published has been received.
    #[error("the producer is gone and the ring is drained")]
    PeerGone,
    /// The caller's buffer is smaller than the next message, which stays in the ring.
    #[error("a buffer of {capacity} bytes is too small for the next message of {needed} bytes")]
    BufferTooSmall {
        /// Length of the next message.
        needed: usize,
        /// Length of the caller's buffer.
        capacity: usize,
    },
    /// A slot claims a length above the slot size: the peer is buggy or hostile.
    /// The ring is unusable.
    #[error("slot of index {index} claims {len} bytes, more than the slot size {max}")]
    BadLength {
        /// Index of the message.
        index: u64,
        /// Length found in the slot.
        len: u32,
        /// Largest payload per slot.
        max: u32,
    },
    /// The producer published an impossible index: the peer is buggy or hostile.
    /// The ring is unusable.
    #[error("impossible producer index {producer} (consumer at {consumer}, {slots} slots)")]
    CorruptIndex {
        /// The producer index read from shared memory.
        producer: u64,
        /// This consumer's index.
        consumer: u64,
        /// Slot count.
        slots: u32,
    },
}

/// Starting a [`BridgeServer`](super::BridgeServer) failed.
#[derive(Debug, Error)]
pub enum BindError {
    /// A ring configuration is invalid.
    #[error("invalid {direction} ring configuration: {source}")]
    Config {
        /// Which ring.
        direction: Direction,
        /// What is wrong.
        #[source]
        source: ConfigError,
    },
    /// The socket's directory could not be created.
    #[error("cannot create the directory {path}: {source}")]
    CreateDir {
        /// The directory.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// Another live server already listens on this path.
    #[error("another bridge server is listening on {path}")]
    AddrInUse {
        /// The socket path.
        path: PathBuf,
    },
    /// Binding or configuring the listening socket failed.
    #[error("cannot listen on {path}: {source}")]
    Listen {
        /// The socket path.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },
}

/// Accepting one application failed. The server stays usable; the
/// connection in question (if any) has been closed.
#[derive(Debug, Error)]
pub enum AcceptError {
    /// `accept` failed (e.g. out of file descriptors).
    #[error("accept failed: {0}")]
    Accept(#[source] io::Error),
    /// The server already serves its maximum number of applications.
    #[error("refused a client: already serving the maximum of {max}")]
    TooManyClients {
        /// The configured maximum.
        max: usize,
    },
    /// Creating the rings for the new client failed.
    #[error("cannot create the {direction} ring: {source}")]
    CreateRing {
        /// Which ring.
        direction: Direction,
        /// Why.
        #[source]
        source: CreateError,
    },
    /// Sending the hello with the memfds failed (the client may be gone).
    #[error("cannot hand the rings to the client: {0}")]
    Handshake(#[source] io::Error),
}

/// Connecting an application to a bridge server failed.
#[derive(Debug, Error)]
pub enum ConnectError {
    /// The UNIX socket could not be connected.
    #[error("cannot connect to {path}: {source}")]
    Connect {
        /// The socket path.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// Receiving the hello failed (including a timeout: the server did not answer).
    #[error("no hello from the bridge server: {0}")]
    Handshake(#[source] io::Error),
    /// The server closed the connection without a hello (e.g. too many clients).
    #[error("the bridge server closed the connection without handing out a bridge")]
    ServerClosed,
    /// The hello is malformed.
    #[error("malformed hello from the bridge server: {what}")]
    BadHello {
        /// What is wrong.
        what: &'static str,
    },
    /// The server speaks another handshake protocol version.
    #[error("bridge handshake version {found}, this build speaks {expected}")]
    ProtocolMismatch {
        /// Version the server sent.
        found: u32,
        /// Version this build speaks.
        expected: u32,
    },
    /// The hello carried the wrong number of file descriptors.
    #[error("the hello carried {got} file descriptors, expected 2")]
    WrongFdCount {
        /// File descriptors received (all closed again).
        got: usize,
    },
    /// One of the rings was refused.
    #[error("refused the {direction} ring: {source}")]
    Attach {
        /// Which ring.
        direction: Direction,
        /// Why.
        #[source]
        source: AttachError,
    },
}
