//! A blocking controller client for one host.
//!
//! [`Client::connect`] authenticates; every call then sends one request and
//! waits (at most [`Client::set_timeout`], default 10 s) for its reply.
//! Upcalls that arrive meanwhile are queued and returned by
//! [`Client::next_upcall`], which subscribes the connection on first use
//! (call [`Client::subscribe`] early to not miss any).

use crate::auth::{mac, random_bytes, Key};
use crate::proto::{
    ClientMsg, EncodeError, FrameBuffer, Message, MeterReading, ProtoError, RefusalCode, ServerMsg,
    TunnelId, TunnelInfo, Upcall,
};
use std::collections::VecDeque;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};
use xlane_te::Resources;

/// Why a call failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// Socket error.
    #[error("controller connection: {0}")]
    Io(#[from] std::io::Error),
    /// The controller sent bytes that do not decode.
    #[error("controller sent a malformed frame: {0}")]
    Proto(#[from] ProtoError),
    /// The request cannot be encoded (too long).
    #[error("request cannot be encoded: {0}")]
    Encode(#[from] EncodeError),
    /// The controller refused.
    #[error("refused ({code}): {message}")]
    Refused {
        /// Why.
        code: RefusalCode,
        /// Detail.
        message: String,
    },
    /// A reply of the wrong kind.
    #[error("unexpected reply from the controller: {0}")]
    Unexpected(String),
    /// The controller closed the connection.
    #[error("the controller closed the connection")]
    Closed,
    /// No reply in time.
    #[error("no reply from the controller within {0:?}")]
    Timeout(Duration),
}

impl ClientError {
    /// The serving replica a `NotLeader` refusal names, if this is one
    /// that names it ([`crate::proto::not_leader_hint`]).
    pub fn serving_hint(&self) -> Option<SocketAddr> {
        match self {
            ClientError::Refused {
                code: RefusalCode::NotLeader,
                message,
            } => crate::proto::not_leader_hint(message),
            _ => None,
        }
    }
}

/// A granted (or changed) tunnel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Granted {
    /// The tunnel.
    pub tunnel: TunnelId,
    /// Its resources.
    pub resources: Resources,
    /// Whether the period is larger than requested.
    pub period_raised: bool,
}

/// The answer to [`Client::reconcile`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reconciled {
    /// Tunnels to keep running.
    pub kept: Vec<TunnelId>,
    /// Tunnels to stop.
    pub terminated: Vec<TunnelId>,
}

/// An authenticated connection to the controller.
#[derive(Debug)]
pub struct Client {
    stream: TcpStream,
    fb: FrameBuffer,
    upcalls: VecDeque<Upcall>,
    host: String,
    addr: SocketAddr,
    subscribed: bool,
    timeout: Duration,
    /// The highest upcall number seen (a replicated controller's).
    last_seq: u64,
    /// Numbered upcalls skipped over (seen missing).
    missed: u64,
}

/// How long connecting to a controller (replica) may take before it
/// counts as unreachable. A datacenter answers a connection in well under
/// a millisecond; a replica whose host died never answers, and the kernel
/// alone would retry for about two minutes before a client went on to the
/// next replica of its list.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);

impl Client {
    /// Connect and authenticate as `host` with `key`. Each address `addr`
    /// resolves to gets [`CONNECT_TIMEOUT`] to take the connection.
    pub fn connect<A: ToSocketAddrs>(
        addr: A,
        host: &str,
        key: &Key,
    ) -> Result<Client, ClientError> {
        let mut last = std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "the address resolves to nothing",
        );
        let mut stream = None;
        for a in addr.to_socket_addrs()? {
            match TcpStream::connect_timeout(&a, CONNECT_TIMEOUT) {
                Ok(s) => {
                    stream = Some(s);
                    break;
                }
                Err(e) => last = e,
            }
        }
        let stream = stream.ok_or(last)?;
        stream.set_nodelay(true)?;
        let addr = stream.peer_addr()?;
        let mut c = Client {
            stream,
            fb: FrameBuffer::new(),
            upcalls: VecDeque::new(),
            host: host.to_string(),
            addr,
            subscribed: false,
            timeout: Duration::from_secs(10),
            last_seq: 0,
            missed: 0,
        };
        let client_nonce = random_bytes::<32>()?;
        let server_nonce = match c.call(&ClientMsg::Hello {
            host: host.to_string(),
            client_nonce,
        })? {
            ServerMsg::Challenge { server_nonce } => server_nonce,
            m => return Err(ClientError::Unexpected(format!("{m:?}"))),
        };
        match c.call(&ClientMsg::Auth {
            mac: mac(key, &server_nonce, &client_nonce, host),
        })? {
            ServerMsg::AuthOk => Ok(c),
            m => Err(ClientError::Unexpected(format!("{m:?}"))),
        }
    }

    /// Connect to whichever of a replicated controller's replicas serves:
    /// tries `addrs` in order, skipping replicas that refuse with
    /// `NotLeader` or cannot be reached. Returns the last error when none
    /// serves (e.g. during an election: try again shortly).
    pub fn connect_any(addrs: &[SocketAddr], host: &str, key: &Key) -> Result<Client, ClientError> {
        let mut last = ClientError::Closed;
        for a in addrs {
            match Client::connect(a, host, key) {
                Ok(c) => return Ok(c),
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    /// The host this client speaks for.
    pub fn host(&self) -> &str {
        &self.host
    }

    /// The controller (replica) this client is connected to.
    pub fn peer_addr(&self) -> SocketAddr {
        self.addr
    }

    /// How long calls wait for a reply.
    pub fn set_timeout(&mut self, t: Duration) {
        self.timeout = t;
    }

    /// Send raw bytes (tests of malformed input).
    pub fn send_raw(&mut self, bytes: &[u8]) -> Result<(), ClientError> {
        self.stream.write_all(bytes)?;
        Ok(())
    }

    /// Send a message without waiting.
    pub fn send(&mut self, msg: &ClientMsg) -> Result<(), ClientError> {
        let f = msg.to_frame()?;
        self.send_raw(&f)
    }

    /// The next message from the controller (upcalls included), waiting at
    /// most `timeout`; `Ok(None)` on timeout.
    pub fn recv(&mut self, timeout: Duration) -> Result<Option<ServerMsg>, ClientError> {
        let deadline = Instant::now() + timeout;
        let mut buf = [0u8; 8192];
        loop {
            if let Some(f) = self.fb.next_frame()? {
                return Ok(Some(ServerMsg::decode(&f)?.0));
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(None);
            }
            self.stream
                .set_read_timeout(Some((deadline - now).max(Duration::from_millis(1))))?;
            match self.stream.read(&mut buf) {
                Ok(0) => return Err(ClientError::Closed),
                Ok(n) => self.fb.push(&buf[..n]),
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock
                            | std::io::ErrorKind::TimedOut
                            | std::io::ErrorKind::Interrupted
                    ) => {}
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {
                    return Err(ClientError::Closed)
                }
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// Send a request and wait for its reply (queueing upcalls). A
    /// `Refused` reply is returned as [`ClientError::Refused`].
    pub fn call(&mut self, msg: &ClientMsg) -> Result<ServerMsg, ClientError> {
        self.send(msg)?;
        loop {
            match self.recv(self.timeout)? {
                None => return Err(ClientError::Timeout(self.timeout)),
                Some(ServerMsg::Upcall { seq, upcall }) => {
                    if let Some(u) = self.numbered(seq, upcall) {
                        self.upcalls.push_back(u);
                    }
                }
                Some(ServerMsg::Refused { code, message }) => {
                    return Err(ClientError::Refused { code, message })
                }
                Some(m) => return Ok(m),
            }
        }
    }

    /// `requestBandwidth` with this host as sender.
    pub fn request(
        &mut self,
        receivers: &[String],
        load_bytes: u32,
        period_ns: u64,
        sublane: u8,
    ) -> Result<Granted, ClientError> {
        match self.call(&ClientMsg::RequestBandwidth {
            sender: self.host.clone(),
            receivers: receivers.to_vec(),
            load_bytes,
            period_ns,
            sublane,
        })? {
            ServerMsg::Granted {
                tunnel,
                resources,
                period_raised,
            } => Ok(Granted {
                tunnel,
                resources,
                period_raised,
            }),
            m => Err(ClientError::Unexpected(format!("{m:?}"))),
        }
    }

    /// The MAC key of a tunnel this host sends or receives on (the
    /// controller derives it from its secret; the same for every caller).
    pub fn tunnel_key(&mut self, tunnel: TunnelId) -> Result<xlane_auth::Key, ClientError> {
        match self.call(&ClientMsg::TunnelKey { tunnel })? {
            ServerMsg::Key { tunnel: t, key } if t == tunnel => {
                Ok(xlane_auth::Key::from_bytes(key))
            }
            m => Err(ClientError::Unexpected(format!("{m:?}"))),
        }
    }

    /// `releaseBandwidth`.
    pub fn release(&mut self, tunnel: TunnelId) -> Result<(), ClientError> {
        match self.call(&ClientMsg::ReleaseBandwidth { tunnel })? {
            ServerMsg::Released { tunnel: t } if t == tunnel => Ok(()),
            m => Err(ClientError::Unexpected(format!("{m:?}"))),
        }
    }

    /// `changeBandwidth` (also re-admits an unbounded tunnel).
    pub fn change(
        &mut self,
        tunnel: TunnelId,
        load_bytes: u32,
        period_ns: u64,
    ) -> Result<Granted, ClientError> {
        match self.call(&ClientMsg::ChangeBandwidth {
            tunnel,
            load_bytes,
            period_ns,
        })? {
            ServerMsg::Changed {
                tunnel,
                resources,
                period_raised,
            } => Ok(Granted {
                tunnel,
                resources,
                period_raised,
            }),
            m => Err(ClientError::Unexpected(format!("{m:?}"))),
        }
    }

    /// Report this host's meter readings.
    pub fn report_meters(&mut self, readings: &[MeterReading]) -> Result<(), ClientError> {
        match self.call(&ClientMsg::ReportMeters {
            readings: readings.to_vec(),
        })? {
            ServerMsg::Ack => Ok(()),
            m => Err(ClientError::Unexpected(format!("{m:?}"))),
        }
    }

    /// Tell the controller which tunnels this host runs.
    pub fn reconcile(&mut self, running: &[TunnelId]) -> Result<Reconciled, ClientError> {
        match self.call(&ClientMsg::ReconcileHost {
            tunnels: running.to_vec(),
        })? {
            ServerMsg::Reconciled { kept, terminated } => Ok(Reconciled { kept, terminated }),
            m => Err(ClientError::Unexpected(format!("{m:?}"))),
        }
    }

    /// All tunnels (and whether the list was cut to fit one frame).
    pub fn list(&mut self) -> Result<(Vec<TunnelInfo>, bool), ClientError> {
        match self.call(&ClientMsg::ListTunnels)? {
            ServerMsg::Tunnels { list, truncated } => Ok((list, truncated)),
            m => Err(ClientError::Unexpected(format!("{m:?}"))),
        }
    }

    /// Receive upcalls for this host's tunnels on this connection (after
    /// those numbered up to [`Client::last_upcall_seq`]).
    pub fn subscribe(&mut self) -> Result<(), ClientError> {
        self.subscribe_after(self.last_seq)
    }

    /// Receive upcalls for this host's tunnels on this connection, after
    /// those numbered up to `after`: the last one an earlier connection
    /// saw ([`Client::last_upcall_seq`]), so that a replicated controller's
    /// serving replica replays what was missed across a reconnection or a
    /// takeover, and this client drops what was seen.
    pub fn subscribe_after(&mut self, after: u64) -> Result<(), ClientError> {
        self.last_seq = self.last_seq.max(after);
        if self.subscribed {
            return Ok(());
        }
        match self.call(&ClientMsg::Subscribe {
            after: self.last_seq,
        })? {
            ServerMsg::Subscribed { seq } => {
                // A fresh subscriber starts from now; one that saw
                // upcalls before was just sent those it missed.
                if self.last_seq == 0 {
                    self.last_seq = seq;
                }
                self.subscribed = true;
                Ok(())
            }
            m => Err(ClientError::Unexpected(format!("{m:?}"))),
        }
    }

    /// The highest upcall number seen (0: none, or a single daemon, whose
    /// upcalls are not numbered).
    pub fn last_upcall_seq(&self) -> u64 {
        self.last_seq
    }

    /// How many numbered upcalls were skipped over: the controller no
    /// longer held them when this client subscribed. Reconcile
    /// ([`Client::reconcile`], [`Client::list`]) when it is not 0.
    pub fn missed_upcalls(&self) -> u64 {
        self.missed
    }

    /// An upcall as received: `None` if numbered and already seen.
    fn numbered(&mut self, seq: u64, upcall: Upcall) -> Option<Upcall> {
        if seq == 0 {
            return Some(upcall);
        }
        if seq <= self.last_seq {
            return None;
        }
        self.missed += seq - self.last_seq - 1;
        self.last_seq = seq;
        Some(upcall)
    }

    /// The next upcall, waiting at most `timeout` (`Ok(None)`: none came).
    pub fn next_upcall(&mut self, timeout: Duration) -> Result<Option<Upcall>, ClientError> {
        self.subscribe()?;
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(u) = self.upcalls.pop_front() {
                return Ok(Some(u));
            }
            let left = deadline.saturating_duration_since(Instant::now());
            match self.recv(left)? {
                None => return Ok(None),
                Some(ServerMsg::Upcall { seq, upcall }) => {
                    if let Some(u) = self.numbered(seq, upcall) {
                        return Ok(Some(u));
                    }
                }
                Some(m) => return Err(ClientError::Unexpected(format!("{m:?}"))),
            }
        }
    }
}
