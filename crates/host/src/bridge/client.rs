//! The application side: connect to the daemon's bridge socket, receive
//! and validate the two rings, then exchange messages with the lane.
//!
//! ```no_run
//! use xlane_host::bridge::client;
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let mut bridge = client::connect("/run/xlane/fd.sock")?;
//! bridge.send_blocking(b"hello lane", None)?;
//! let mut buf = [0u8; 256];
//! if let Some(n) = bridge.recv_blocking(&mut buf, Some(std::time::Duration::from_secs(1)))? {
//!     println!("lane said {:?}", &buf[..n]);
//! }
//! # Ok(())
//! # }
//! ```

use std::hint;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::thread;
use std::time::{Duration, Instant};

use super::error::{ConnectError, Direction, RecvError, SendError};
use super::handshake;
use super::ring::{Consumer, Producer, Ring};

/// How long [`connect`] waits for the server's hello.
pub const DEFAULT_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);

/// How often the blocking helpers check that the daemon is still there.
const LIVENESS_INTERVAL: Duration = Duration::from_millis(5);

/// Spins before the blocking helpers start yielding the CPU.
const SPINS_BEFORE_YIELD: u32 = 64;

/// Connects to the bridge server listening at `path`, waiting up to
/// [`DEFAULT_HANDSHAKE_TIMEOUT`] for its hello.
pub fn connect(path: impl AsRef<Path>) -> Result<BridgeClient, ConnectError> {
    connect_with_timeout(path, DEFAULT_HANDSHAKE_TIMEOUT)
}

/// Connects to the bridge server listening at `path`, waiting up to
/// `timeout` for its hello. Both rings are validated before use; a ring
/// with another layout version or a corrupt header is refused with
/// [`ConnectError::Attach`].
pub fn connect_with_timeout(
    path: impl AsRef<Path>,
    timeout: Duration,
) -> Result<BridgeClient, ConnectError> {
    let path = path.as_ref();
    let stream = UnixStream::connect(path).map_err(|source| ConnectError::Connect {
        path: path.to_path_buf(),
        source,
    })?;
    let timeout = timeout.max(Duration::from_millis(1));
    stream
        .set_read_timeout(Some(timeout))
        .map_err(ConnectError::Handshake)?;
    let hello = handshake::recv_hello(&stream)?;
    let to_lane = Ring::attach(hello.to_lane)
        .map_err(|source| ConnectError::Attach {
            direction: Direction::RegularToExpress,
            source,
        })?
        .into_producer();
    let from_lane = Ring::attach(hello.to_app)
        .map_err(|source| ConnectError::Attach {
            direction: Direction::ExpressToRegular,
            source,
        })?
        .into_consumer();
    stream
        .set_read_timeout(None)
        .map_err(ConnectError::Handshake)?;
    Ok(BridgeClient {
        id: hello.id,
        stream,
        to_lane,
        from_lane,
    })
}

/// An application's connection to the lane: the producing end of the R-X
/// ring, the consuming end of the X-R ring, and the socket whose closing
/// tells either side that the other is gone.
///
/// `send`/`try_recv` (and their `_with` forms) are the ring operations:
/// bounded work, no system call. The `_blocking` helpers wait by spinning
/// and yielding, and check every few milliseconds (one `recv` system call)
/// that the daemon is still there, so they return `PeerGone` instead of
/// waiting forever.
#[derive(Debug)]
pub struct BridgeClient {
    id: u64,
    stream: UnixStream,
    to_lane: Producer,
    from_lane: Consumer,
}

impl BridgeClient {
    /// The connection id the server assigned.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Largest message [`send`](Self::send) accepts.
    pub fn max_send(&self) -> usize {
        self.to_lane.max_payload()
    }

    /// Largest message the lane can send back.
    pub fn max_recv(&self) -> usize {
        self.from_lane.max_payload()
    }

    /// Sends one message to the lane without waiting: `Full` if the R-X
    /// ring has no free slot. Bounded work: O(len) copy.
    pub fn send(&mut self, msg: &[u8]) -> Result<(), SendError> {
        self.to_lane.try_send(msg)
    }

    /// Zero-copy [`send`](Self::send); see [`Producer::try_send_with`].
    pub fn send_with<F: FnOnce(&mut [u8]) -> usize>(
        &mut self,
        fill: F,
    ) -> Result<usize, SendError> {
        self.to_lane.try_send_with(fill)
    }

    /// Receives one message from the lane without waiting: `Ok(None)` if
    /// the X-R ring is empty. Bounded work: O(len) copy.
    pub fn try_recv(&mut self, buf: &mut [u8]) -> Result<Option<usize>, RecvError> {
        self.from_lane.try_recv(buf)
    }

    /// Zero-copy [`try_recv`](Self::try_recv); see [`Consumer::try_recv_with`].
    pub fn try_recv_with<R, F: FnOnce(&[u8]) -> R>(
        &mut self,
        f: F,
    ) -> Result<Option<R>, RecvError> {
        self.from_lane.try_recv_with(f)
    }

    /// Whether the daemon is still there (one non-blocking `recv`).
    pub fn peer_alive(&self) -> bool {
        handshake::peer_alive(&self.stream)
    }

    /// Sends, waiting while the ring is full. `timeout: None` waits until
    /// the message is sent or the daemon is gone; on timeout the result is
    /// `Err(SendError::Full)`.
    pub fn send_blocking(
        &mut self,
        msg: &[u8],
        timeout: Option<Duration>,
    ) -> Result<(), SendError> {
        let mut backoff = Backoff::new(timeout);
        loop {
            match self.to_lane.try_send(msg) {
                Err(SendError::Full) => {}
                done => return done,
            }
            match backoff.snooze(|| handshake::peer_alive(&self.stream)) {
                Snooze::Again => {}
                Snooze::TimedOut => return Err(SendError::Full),
                Snooze::PeerGone => return Err(SendError::PeerGone),
            }
        }
    }

    /// Receives, waiting while the ring is empty. `timeout: None` waits
    /// until a message arrives or the daemon is gone; on timeout the result
    /// is `Ok(None)`. Messages the daemon sent before it went away are
    /// still delivered before `PeerGone`.
    pub fn recv_blocking(
        &mut self,
        buf: &mut [u8],
        timeout: Option<Duration>,
    ) -> Result<Option<usize>, RecvError> {
        let mut backoff = Backoff::new(timeout);
        loop {
            if let Some(n) = self.from_lane.try_recv(buf)? {
                return Ok(Some(n));
            }
            match backoff.snooze(|| handshake::peer_alive(&self.stream)) {
                Snooze::Again => {}
                Snooze::TimedOut => return Ok(None),
                Snooze::PeerGone => {
                    return match self.from_lane.try_recv(buf)? {
                        Some(n) => Ok(Some(n)),
                        None => Err(RecvError::PeerGone),
                    }
                }
            }
        }
    }

    /// The parts, e.g. to send and receive from different threads. Keep
    /// the socket open as long as the rings are used: closing it tells the
    /// daemon that the application is gone.
    pub fn into_parts(self) -> (Producer, Consumer, UnixStream) {
        (self.to_lane, self.from_lane, self.stream)
    }
}

enum Snooze {
    Again,
    TimedOut,
    PeerGone,
}

/// Spin, then yield; check the deadline and the peer now and then.
struct Backoff {
    spins: u32,
    timeout: Option<Duration>,
    start: Option<Instant>,
    next_check: Option<Instant>,
}

impl Backoff {
    fn new(timeout: Option<Duration>) -> Self {
        Backoff {
            spins: 0,
            timeout,
            start: None,
            next_check: None,
        }
    }

    fn snooze(&mut self, alive: impl FnOnce() -> bool) -> Snooze {
        if self.spins < SPINS_BEFORE_YIELD {
            self.spins += 1;
            hint::spin_loop();
            if self.timeout != Some(Duration::ZERO) {
                return Snooze::Again;
            }
        } else {
            thread::yield_now();
        }
        let now = Instant::now();
        let start = *self.start.get_or_insert(now);
        if self.timeout.is_some_and(|t| now.duration_since(start) >= t) {
            return Snooze::TimedOut;
        }
        let next_check = *self.next_check.get_or_insert(now);
        if now >= next_check {
            self.next_check = Some(now + LIVENESS_INTERVAL);
            if !alive() {
                return Snooze::PeerGone;
            }
        }
        Snooze::Again
    }
}
