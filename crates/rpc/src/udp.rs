//! A Linux UDP driver around the cores: one `std::net::UdpSocket`, one
//! thread, no async runtime.
//!
//! [`RpcClient`] and [`RpcServer`] own a socket and a core each;
//! [`RpcRouter`] a socket, a raw socket to forward REQ0 as from its client,
//! and a router core. The caller
//! drives them from its own loop: [`RpcClient::poll`] (or
//! [`RpcClient::wait`], which sleeps in the socket until a datagram or the
//! core's next deadline) reads every datagram waiting, runs the core's
//! timers and sends what the core queued; completions and requests come out
//! of [`RpcClient::poll_completion`] and [`RpcServer::poll_request`].
//!
//! Time is the nanoseconds since the driver was made (`Instant`, monotonic).
//! UDP checksums are the kernel's (kept). IPv6 datagrams are not R2P2 here:
//! they are counted in `foreign` and dropped.

mod router;
pub use router::RpcRouter;

use crate::client::{Client, ClientConfig, Completion, RequestHandle, SendError};
use crate::server::{Incoming, Server, ServerConfig, ServerHandle};
use crate::wire::MAX_PACKET_LEN;
use crate::{Nanos, Transmit};
use nix::errno::Errno;
use nix::poll::{ppoll, PollFd, PollFlags};
use nix::sys::time::TimeSpec;
use std::io;
use std::net::{SocketAddr, SocketAddrV4, UdpSocket};
use std::os::fd::AsFd;
use std::time::{Duration, Instant};

/// Counters of a driver (beside its core's).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DriverStats {
    /// Datagrams read.
    pub received: u64,
    /// Datagrams sent.
    pub sent: u64,
    /// Sends the kernel refused (buffer full, unreachable): the packet is
    /// lost and the core's retransmission covers it.
    pub send_errors: u64,
    /// Datagrams from non-IPv4 sources.
    pub foreign: u64,
}

/// What the driver needs of a core, the client's or the server's: the same
/// turn serves both.
trait Core {
    fn datagram(&mut self, now: Nanos, from: SocketAddrV4, bytes: &[u8]);
    fn deadline(&self) -> Option<Nanos>;
    fn timeout(&mut self, now: Nanos);
    fn transmit(&mut self, buf: &mut [u8]) -> Option<Transmit>;
}

impl Core for Client {
    fn datagram(&mut self, now: Nanos, from: SocketAddrV4, bytes: &[u8]) {
        // Refused datagrams are counted by the core.
        let _ = self.handle_datagram(now, from, bytes);
    }
    fn deadline(&self) -> Option<Nanos> {
        self.poll_timeout()
    }
    fn timeout(&mut self, now: Nanos) {
        self.handle_timeout(now)
    }
    fn transmit(&mut self, buf: &mut [u8]) -> Option<Transmit> {
        self.poll_transmit(buf)
    }
}

impl Core for Server {
    fn datagram(&mut self, now: Nanos, from: SocketAddrV4, bytes: &[u8]) {
        // Refused datagrams are counted by the core.
        let _ = self.handle_datagram(now, from, bytes);
    }
    fn deadline(&self) -> Option<Nanos> {
        self.poll_timeout()
    }
    fn timeout(&mut self, now: Nanos) {
        self.handle_timeout(now)
    }
    fn transmit(&mut self, buf: &mut [u8]) -> Option<Transmit> {
        self.poll_transmit(buf)
    }
}

/// The socket half shared by both drivers.
#[derive(Debug)]
struct Io {
    sock: UdpSocket,
    local: SocketAddrV4,
    epoch: Instant,
    rx: Vec<u8>,
    tx: Vec<u8>,
    stats: DriverStats,
}

impl Io {
    fn bind(addr: SocketAddrV4) -> io::Result<Self> {
        let sock = UdpSocket::bind(addr)?;
        sock.set_nonblocking(true)?;
        let local = match sock.local_addr()? {
            SocketAddr::V4(a) => a,
            SocketAddr::V6(_) => return Err(io::Error::other("bound to IPv6")),
        };
        Ok(Io {
            sock,
            local,
            epoch: Instant::now(),
            rx: vec![0; 64 * 1024],
            tx: vec![0; MAX_PACKET_LEN],
            stats: DriverStats::default(),
        })
    }

    fn now(&self) -> Nanos {
        self.epoch.elapsed().as_nanos() as Nanos
    }

    /// Reads every datagram waiting (non-blocking) into `f`.
    fn drain(&mut self, mut f: impl FnMut(Nanos, SocketAddrV4, &[u8])) -> io::Result<()> {
        loop {
            match self.sock.recv_from(&mut self.rx) {
                Ok((n, SocketAddr::V4(from))) => {
                    self.stats.received += 1;
                    let now = self.epoch.elapsed().as_nanos() as Nanos;
                    f(now, from, &self.rx[..n]);
                }
                Ok((_, SocketAddr::V6(_))) => self.stats.foreign += 1,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                // ICMP errors of earlier sends (port unreachable) surface here.
                Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// Sends every packet `core` has queued.
    fn flush(&mut self, core: &mut impl Core) {
        while let Some(t) = core.transmit(&mut self.tx) {
            self.send(t.dst, t.len);
        }
    }

    /// One turn without sleeping: every waiting datagram into `core`, its
    /// due timers, then what it queued out.
    fn turn(&mut self, core: &mut impl Core) -> io::Result<()> {
        self.drain(|now, from, b| core.datagram(now, from, b))?;
        let now = self.now();
        if core.deadline().is_some_and(|t| t <= now) {
            core.timeout(now);
        }
        self.flush(core);
        Ok(())
    }

    /// Sleeps until a datagram comes, `core`'s next deadline or `max`
    /// passes, then one [`Io::turn`].
    fn wait(&mut self, core: &mut impl Core, max: Duration) -> io::Result<()> {
        self.sleep_for(core.deadline(), max)?;
        self.turn(core)
    }

    /// Sleeps until a datagram is readable, `deadline` (a core's next
    /// timer, ns) or `max` from now, whichever comes first.
    fn sleep_for(&mut self, deadline: Option<Nanos>, max: Duration) -> io::Result<()> {
        let limit = self.now().saturating_add(max.as_nanos() as Nanos);
        self.sleep_until(deadline.map_or(limit, |t| t.min(limit)))
    }

    fn send(&mut self, dst: SocketAddrV4, len: usize) {
        match self.sock.send_to(&self.tx[..len], dst) {
            Ok(_) => self.stats.sent += 1,
            Err(_) => self.stats.send_errors += 1,
        }
    }

    /// Sleeps until a datagram is readable or `until` (ns) passes: one
    /// `ppoll`, whose timer is the kernel's high-resolution one (a socket
    /// receive timeout would round up to the scheduler tick, milliseconds).
    /// The thread's timer slack still applies: drivers of sub-millisecond
    /// timers set it low (`prctl(PR_SET_TIMERSLACK)`).
    fn sleep_until(&mut self, until: Nanos) -> io::Result<()> {
        let now = self.now();
        if until <= now {
            return Ok(());
        }
        let wait = Duration::from_nanos(until - now);
        let mut fds = [PollFd::new(self.sock.as_fd(), PollFlags::POLLIN)];
        match ppoll(&mut fds, Some(TimeSpec::from_duration(wait)), None) {
            Ok(_) | Err(Errno::EINTR) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}

/// An R2P2 client on a UDP socket.
#[derive(Debug)]
pub struct RpcClient {
    io: Io,
    core: Client,
}

impl RpcClient {
    /// Binds `addr` (port 0 for an ephemeral one) and makes a client core with
    /// `cfg`, whose `local` is set to the bound address. Bind a specific
    /// address (not 0.0.0.0) for completions to carry the identity the
    /// server sees.
    pub fn bind(addr: SocketAddrV4, cfg: ClientConfig) -> io::Result<Self> {
        let io = Io::bind(addr)?;
        let core = Client::new(ClientConfig {
            local: io.local,
            ..cfg
        });
        Ok(RpcClient { io, core })
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddrV4 {
        self.io.local
    }

    /// The core (its counters, identities).
    pub fn core(&self) -> &Client {
        &self.core
    }

    /// The driver's counters.
    pub fn stats(&self) -> DriverStats {
        self.io.stats
    }

    /// Sends a request to `dest` now (REQ0 leaves before this returns).
    pub fn send(&mut self, dest: SocketAddrV4, payload: &[u8]) -> Result<RequestHandle, SendError> {
        let now = self.io.now();
        let h = self.core.send_request(dest, payload, now)?;
        self.flush();
        Ok(h)
    }

    fn flush(&mut self) {
        self.io.flush(&mut self.core);
    }

    /// One turn without sleeping: reads every waiting datagram, runs due
    /// timers, sends what the core queued.
    pub fn poll(&mut self) -> io::Result<()> {
        self.io.turn(&mut self.core)
    }

    /// Sleeps until a datagram comes, the core's next deadline, or `max`
    /// passes (whichever is first), then runs one [`poll`](Self::poll).
    pub fn wait(&mut self, max: Duration) -> io::Result<()> {
        self.io.wait(&mut self.core, max)
    }

    /// The next completed request (each completes exactly once).
    pub fn poll_completion(&mut self) -> Option<Completion> {
        self.core.poll_event()
    }

    /// The reply of a request that completed with a reply.
    pub fn reply(&self, h: RequestHandle) -> Option<&[u8]> {
        self.core.reply(h)
    }

    /// Gives the request's slot back (see [`Client::release`]).
    pub fn release(&mut self, h: RequestHandle) -> bool {
        let now = self.io.now();
        self.core.release(h, now)
    }
}

/// An R2P2 server on a UDP socket.
#[derive(Debug)]
pub struct RpcServer {
    io: Io,
    core: Server,
}

impl RpcServer {
    /// Binds `addr` (port 0 for an ephemeral one) with a server core of `cfg`.
    pub fn bind(addr: SocketAddrV4, cfg: ServerConfig) -> io::Result<Self> {
        Ok(RpcServer {
            io: Io::bind(addr)?,
            core: Server::new(cfg),
        })
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddrV4 {
        self.io.local
    }

    /// The core (its counters).
    pub fn core(&self) -> &Server {
        &self.core
    }

    /// The driver's counters.
    pub fn stats(&self) -> DriverStats {
        self.io.stats
    }

    fn flush(&mut self) {
        self.io.flush(&mut self.core);
    }

    /// One turn without sleeping: reads every waiting datagram, runs due
    /// timers, sends what the core queued.
    pub fn poll(&mut self) -> io::Result<()> {
        self.io.turn(&mut self.core)
    }

    /// Sleeps until a datagram comes, the core's next deadline, or `max`
    /// passes, then runs one [`poll`](Self::poll).
    pub fn wait(&mut self, max: Duration) -> io::Result<()> {
        self.io.wait(&mut self.core, max)
    }

    /// The next request to execute.
    pub fn poll_request(&mut self) -> Option<Incoming> {
        self.core.poll_event()
    }

    /// The request behind `h`, while it awaits its reply.
    pub fn request(&self, h: ServerHandle) -> Option<&[u8]> {
        self.core.request(h)
    }

    /// Refuses `h` with a DROP ([`Server::decline`]) and sends it now.
    pub fn decline(&mut self, h: ServerHandle) -> Result<(), crate::server::RespondError> {
        self.core.decline(h)?;
        self.flush();
        Ok(())
    }

    /// Answers `h` and sends the reply now.
    pub fn respond(
        &mut self,
        h: ServerHandle,
        payload: &[u8],
    ) -> Result<(), crate::server::RespondError> {
        let now = self.io.now();
        self.core.respond(h, payload, now)?;
        self.flush();
        Ok(())
    }
}
