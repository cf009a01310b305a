//! The controller's wire protocol: framed binary messages over a byte
//! stream (TCP).
//!
//! # Framing
//!
//! ```text
//! +----------------+-----------+--------+------------------+
//! | length: u32 BE | version u8| kind u8| body             |
//! +----------------+-----------+--------+------------------+
//!                  \______ length bytes (2 ..= MAX_FRAME) __/
//! ```
//!
//! `length` counts everything after itself; it is at most [`MAX_FRAME`]
//! (64 KiB), so a reader never buffers more than that for one frame and can
//! reject an oversized frame from its first four bytes. `version` is
//! [`VERSION`]. Kinds `0x01..=0x7f` go from client to controller
//! ([`ClientMsg`]), kinds `0x81..=0xff` from controller to client
//! ([`ServerMsg`]).
//!
//! # Body encoding
//!
//! Integers are big-endian and fixed width; `bool` is one byte, 0 or 1;
//! strings are a `u16` byte length then UTF-8 (host names at most
//! [`MAX_NAME`] bytes, messages at most [`MAX_MESSAGE`]); lists are a `u16`
//! count then the items; nonces and MACs are 32 raw bytes; enums are one
//! byte (`u16` for [`RefusalCode`]). Every value has exactly one encoding,
//! so `encode(decode(b)) == b` for every `b` that decodes; the fuzz target
//! `ctl_proto` checks exactly that.
//!
//! Every decode failure is a typed [`ProtoError`]; the encoder refuses
//! ([`EncodeError`]) anything the decoder would refuse, so what one side
//! sends the other side accepts.
//!
//! # Conversation
//!
//! ```text
//! client                         controller
//! Hello{host, client_nonce}  ->
//!                            <-  Challenge{server_nonce}
//! Auth{mac}                  ->                    (see crate::auth)
//!                            <-  AuthOk | Refused{Unauthenticated} + close
//! RequestBandwidth{..}       ->
//!                            <-  Granted | Refused
//! TunnelKey{tunnel}          ->                    (its sender or a receiver)
//!                            <-  Key{tunnel, key} | Refused
//! Tagged{request_id, msg}    ->                    (answered at most once)
//!                            <-  msg's reply, or the first one again
//! Subscribe{after}           ->
//!                            <-  Upcall{seq > after, ..} ...  (a replica's replay)
//!                            <-  Subscribed{seq}
//!                            <-  Upcall{seq, BandwidthChanged | BandwidthTerminated}  (any time)
//! ```
//!
//! Each request gets exactly one reply, in order; upcalls may arrive between
//! them once the connection has subscribed. A frame that does not decode is
//! answered by `Refused{Malformed}` and the connection is closed.

use std::fmt;
use xlane_te::Resources;

/// Protocol version carried by every frame.
pub const VERSION: u8 = 1;
/// Largest value of a frame's length field (version + kind + body), bytes.
pub const MAX_FRAME: usize = 64 * 1024;
/// Bytes of the length field.
pub const HEADER_LEN: usize = 4;
/// Longest host name, bytes.
pub const MAX_NAME: usize = 255;
/// Longest human-readable message, bytes.
pub const MAX_MESSAGE: usize = 1024;
/// Most receivers in one request.
pub const MAX_RECEIVERS: usize = 1024;
/// Most meter readings in one report.
pub const MAX_READINGS: usize = 1024;
/// Most tunnel ids in one `ReconcileHost` or `Reconciled`.
pub const MAX_TUNNEL_IDS: usize = 4096;
/// `Resources::max_jitter_ns` of a demoted tunnel: its latency is no longer
/// bounded (the paper's `UNBOUNDED`).
pub const UNBOUNDED_NS: u64 = u64::MAX;

/// A nonce of the authentication handshake.
pub type Nonce = [u8; 32];
/// An HMAC-SHA256 tag.
pub type Mac = [u8; 32];

/// A tunnel, as the controller names it (stable across restarts).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TunnelId(pub u64);

impl fmt::Display for TunnelId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "tunnel {}", self.0)
    }
}

/// One interval of a tunnel's traffic as counted by its sending host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MeterReading {
    /// The tunnel.
    pub tunnel: TunnelId,
    /// Packets sent in the interval.
    pub packets: u64,
    /// Bytes sent in the interval.
    pub bytes: u64,
    /// Length of the interval, ns (> 0).
    pub interval_ns: u64,
}

/// Why resources changed (`enum Reason` of X-Lane List. 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Reason {
    /// Traffic engineering: another tunnel came, went or changed.
    Te,
    /// The tunnel sent more than allocated; it is demoted (unbounded).
    BwExceeded,
    /// The tunnel used much less than allocated; its period was raised.
    BwUnused,
}

/// Why a tunnel was terminated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TerminateReason {
    /// It kept exceeding its allocation after demotion.
    BwExceeded,
    /// It kept not using its allocation at the largest period.
    BwUnused,
    /// The host runs a tunnel the controller does not know (or that another
    /// host owns), found by `ReconcileHost`.
    Unknown,
}

/// Whether a tunnel currently has guarantees.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TunnelState {
    /// Allocated: its resources hold.
    Active,
    /// Demoted after exceeding its allocation: best effort, no bounds, until
    /// the owner re-admits it with `ChangeBandwidth` or releases it.
    Unbounded,
}

/// A row of `ListTunnels`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TunnelInfo {
    /// The tunnel.
    pub tunnel: TunnelId,
    /// Sending (and owning) host.
    pub sender: String,
    /// Receiving hosts.
    pub receivers: Vec<String>,
    /// Express sub-lane.
    pub sublane: u8,
    /// Active or unbounded.
    pub state: TunnelState,
    /// The period the owner asked for, ns.
    pub requested_period_ns: u64,
    /// Current resources (`max_jitter_ns == UNBOUNDED_NS` when unbounded).
    pub resources: Resources,
}

/// Refusal codes: te's [`xlane_te::Refusal`] variants one to one (1..=15),
/// then the controller's own (32..).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u16)]
pub enum RefusalCode {
    /// `Refusal::ZeroLoad`.
    ZeroLoad = 1,
    /// `Refusal::LoadTooLarge`.
    LoadTooLarge = 2,
    /// `Refusal::UnknownSublane`.
    UnknownSublane = 3,
    /// `Refusal::PeriodTooSmall`.
    PeriodTooSmall = 4,
    /// `Refusal::PeriodTooLarge`.
    PeriodTooLarge = 5,
    /// `Refusal::UnknownHost`.
    UnknownHost = 6,
    /// `Refusal::NotAHost`.
    NotAHost = 7,
    /// `Refusal::NoReceivers`.
    NoReceivers = 8,
    /// `Refusal::DuplicateReceiver`.
    DuplicateReceiver = 9,
    /// `Refusal::ReceiverIsSender`.
    ReceiverIsSender = 10,
    /// `Refusal::NoPath`.
    NoPath = 11,
    /// `Refusal::QueueOverflow`.
    QueueOverflow = 12,
    /// `Refusal::Bandwidth`.
    Bandwidth = 13,
    /// `Refusal::PeriodUnattainable`.
    PeriodUnattainable = 14,
    /// `Refusal::WouldInvalidate`.
    WouldInvalidate = 15,
    /// Not authenticated (or authentication failed).
    Unauthenticated = 32,
    /// Authenticated, but not allowed (another host's tunnel or sender).
    Forbidden = 33,
    /// The frame did not decode, or is not a request.
    Malformed = 34,
    /// A field is outside what the controller accepts.
    OutOfRange = 35,
    /// No such tunnel.
    UnknownTunnel = 36,
    /// The controller could not save the change; nothing changed.
    Internal = 37,
    /// Too many connections; try later.
    Busy = 38,
    /// This replica does not serve (a replicated controller's follower);
    /// the message names the serving replica's address when it is known
    /// ([`not_leader_hint`]).
    NotLeader = 39,
}

/// What a `NotLeader` refusal's message says before the serving
/// replica's address.
const SERVING_AT: &str = "; the serving one is at ";

/// The message of a [`RefusalCode::NotLeader`] refusal: names the serving
/// replica's client address when it is known, so that a host goes there
/// next ([`not_leader_hint`] reads it back).
pub fn not_leader_message(serving: Option<std::net::SocketAddr>) -> String {
    match serving {
        Some(a) => format!("this controller replica does not serve{SERVING_AT}{a}"),
        None => "this controller replica does not serve, and no serving one is known yet".into(),
    }
}

/// The serving replica a [`RefusalCode::NotLeader`] refusal's message
/// names ([`not_leader_message`]), if it names one.
pub fn not_leader_hint(message: &str) -> Option<std::net::SocketAddr> {
    message.rsplit_once(SERVING_AT)?.1.trim().parse().ok()
}

impl RefusalCode {
    /// Every code, in numeric order.
    pub const ALL: [RefusalCode; 23] = [
        RefusalCode::ZeroLoad,
        RefusalCode::LoadTooLarge,
        RefusalCode::UnknownSublane,
        RefusalCode::PeriodTooSmall,
        RefusalCode::PeriodTooLarge,
        RefusalCode::UnknownHost,
        RefusalCode::NotAHost,
        RefusalCode::NoReceivers,
        RefusalCode::DuplicateReceiver,
        RefusalCode::ReceiverIsSender,
        RefusalCode::NoPath,
        RefusalCode::QueueOverflow,
        RefusalCode::Bandwidth,
        RefusalCode::PeriodUnattainable,
        RefusalCode::WouldInvalidate,
        RefusalCode::Unauthenticated,
        RefusalCode::Forbidden,
        RefusalCode::Malformed,
        RefusalCode::OutOfRange,
        RefusalCode::UnknownTunnel,
        RefusalCode::Internal,
        RefusalCode::Busy,
        RefusalCode::NotLeader,
    ];

    /// The code of a te refusal.
    pub fn of(r: &xlane_te::Refusal) -> RefusalCode {
        use xlane_te::Refusal as R;
        match r {
            R::ZeroLoad => RefusalCode::ZeroLoad,
            R::LoadTooLarge { .. } => RefusalCode::LoadTooLarge,
            R::UnknownSublane { .. } => RefusalCode::UnknownSublane,
            R::PeriodTooSmall { .. } => RefusalCode::PeriodTooSmall,
            R::PeriodTooLarge { .. } => RefusalCode::PeriodTooLarge,
            R::UnknownHost(_) => RefusalCode::UnknownHost,
            R::NotAHost(_) => RefusalCode::NotAHost,
            R::NoReceivers => RefusalCode::NoReceivers,
            R::DuplicateReceiver(_) => RefusalCode::DuplicateReceiver,
            R::ReceiverIsSender(_) => RefusalCode::ReceiverIsSender,
            R::NoPath { .. } | R::NotATree(_) => RefusalCode::NoPath,
            R::QueueOverflow { .. } => RefusalCode::QueueOverflow,
            R::Bandwidth { .. } => RefusalCode::Bandwidth,
            R::PeriodUnattainable { .. } => RefusalCode::PeriodUnattainable,
            R::WouldInvalidate { .. } => RefusalCode::WouldInvalidate,
        }
    }

    /// The code with this number.
    pub fn from_u16(v: u16) -> Option<RefusalCode> {
        RefusalCode::ALL.iter().copied().find(|c| *c as u16 == v)
    }

    /// A short lower-case name (`"bandwidth"`, `"forbidden"`, …).
    pub fn name(self) -> &'static str {
        match self {
            RefusalCode::ZeroLoad => "zero-load",
            RefusalCode::LoadTooLarge => "load-too-large",
            RefusalCode::UnknownSublane => "unknown-sublane",
            RefusalCode::PeriodTooSmall => "period-too-small",
            RefusalCode::PeriodTooLarge => "period-too-large",
            RefusalCode::UnknownHost => "unknown-host",
            RefusalCode::NotAHost => "not-a-host",
            RefusalCode::NoReceivers => "no-receivers",
            RefusalCode::DuplicateReceiver => "duplicate-receiver",
            RefusalCode::ReceiverIsSender => "receiver-is-sender",
            RefusalCode::NoPath => "no-path",
            RefusalCode::QueueOverflow => "queue-overflow",
            RefusalCode::Bandwidth => "bandwidth",
            RefusalCode::PeriodUnattainable => "period-unattainable",
            RefusalCode::WouldInvalidate => "would-invalidate",
            RefusalCode::Unauthenticated => "unauthenticated",
            RefusalCode::Forbidden => "forbidden",
            RefusalCode::Malformed => "malformed",
            RefusalCode::OutOfRange => "out-of-range",
            RefusalCode::UnknownTunnel => "unknown-tunnel",
            RefusalCode::Internal => "internal",
            RefusalCode::Busy => "busy",
            RefusalCode::NotLeader => "not the serving replica",
        }
    }
}

impl fmt::Display for RefusalCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A message from a client (a host's agent) to the controller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClientMsg {
    /// Start of the handshake.
    Hello {
        /// The host this connection speaks for.
        host: String,
        /// Fresh random bytes.
        client_nonce: Nonce,
    },
    /// Answer to the challenge: HMAC-SHA256 (see [`crate::auth::mac`]).
    Auth {
        /// The tag.
        mac: Mac,
    },
    /// `requestBandwidth`.
    RequestBandwidth {
        /// Sending host: must be the authenticated host.
        sender: String,
        /// Receiving hosts.
        receivers: Vec<String>,
        /// `σ`, bytes.
        load_bytes: u32,
        /// Requested period, ns.
        period_ns: u64,
        /// Express sub-lane.
        sublane: u8,
    },
    /// `releaseBandwidth`.
    ReleaseBandwidth {
        /// The tunnel (owned by the host).
        tunnel: TunnelId,
    },
    /// `changeBandwidth`; also re-admits an unbounded tunnel.
    ChangeBandwidth {
        /// The tunnel (owned by the host).
        tunnel: TunnelId,
        /// New `σ`, bytes.
        load_bytes: u32,
        /// New requested period, ns.
        period_ns: u64,
    },
    /// The host's counters of its tunnels, one interval each.
    ReportMeters {
        /// The readings.
        readings: Vec<MeterReading>,
    },
    /// After a host restart: the tunnels the host is running.
    ReconcileHost {
        /// Tunnel ids.
        tunnels: Vec<TunnelId>,
    },
    /// List all tunnels.
    ListTunnels,
    /// Receive upcalls for this host's tunnels on this connection. A
    /// replicated controller first replays the host's upcalls numbered
    /// above `after` that it still holds (see [`ServerMsg::Upcall`]).
    Subscribe {
        /// The highest upcall number the host has seen (0: none).
        after: u64,
    },
    /// The MAC key of a tunnel the host sends or receives on.
    TunnelKey {
        /// The tunnel.
        tunnel: TunnelId,
    },
    /// A request a replicated controller answers at most once: a retry
    /// with the same `request_id` from the same host (after a lost
    /// connection or a takeover) gets the first answer instead of being
    /// applied again. Ids are the host's to choose (e.g. a counter); the
    /// controller remembers each host's last [`crate::replicated::REMEMBERED_PER_HOST`].
    /// A single (journal) daemon applies the inner request as it is.
    Tagged {
        /// The host's id for the request.
        request_id: u64,
        /// The request: not `Hello`, `Auth`, `Subscribe` or `Tagged`.
        msg: Box<ClientMsg>,
    },
}

/// An unsolicited message to the owner of a tunnel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Upcall {
    /// `bandwidthChanged(resources, reason)`: the old resources hold for
    /// `grace_ns` more, then the new ones.
    BandwidthChanged {
        /// The tunnel.
        tunnel: TunnelId,
        /// Resources before.
        old: Resources,
        /// Resources after the grace period.
        new: Resources,
        /// Why.
        reason: Reason,
        /// How long the old resources still hold, ns.
        grace_ns: u64,
    },
    /// `bandwidthTerminated`: the tunnel no longer exists.
    BandwidthTerminated {
        /// The tunnel.
        tunnel: TunnelId,
        /// Why.
        reason: TerminateReason,
    },
}

impl Upcall {
    /// The tunnel the upcall is about.
    pub fn tunnel(&self) -> TunnelId {
        match self {
            Upcall::BandwidthChanged { tunnel, .. }
            | Upcall::BandwidthTerminated { tunnel, .. } => *tunnel,
        }
    }
}

/// A message from the controller to a client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerMsg {
    /// Answer to `Hello`.
    Challenge {
        /// Fresh random bytes.
        server_nonce: Nonce,
    },
    /// The MAC was right.
    AuthOk,
    /// Answer to `RequestBandwidth`.
    Granted {
        /// The new tunnel.
        tunnel: TunnelId,
        /// Its resources.
        resources: Resources,
        /// Whether the period is larger than requested.
        period_raised: bool,
    },
    /// Any request refused; nothing changed.
    Refused {
        /// Why.
        code: RefusalCode,
        /// Human-readable detail.
        message: String,
    },
    /// Answer to `ReleaseBandwidth`.
    Released {
        /// The tunnel.
        tunnel: TunnelId,
    },
    /// Answer to `TunnelKey`: the key its sender seals with and its
    /// receivers check (`xlane_auth`).
    Key {
        /// The tunnel.
        tunnel: TunnelId,
        /// The 128-bit key.
        key: [u8; 16],
    },
    /// Answer to `ChangeBandwidth`.
    Changed {
        /// The tunnel.
        tunnel: TunnelId,
        /// Its new resources.
        resources: Resources,
        /// Whether the period is larger than requested.
        period_raised: bool,
    },
    /// Answer to `ListTunnels`.
    Tunnels {
        /// The tunnels, by increasing id.
        list: Vec<TunnelInfo>,
        /// Whether more tunnels exist than fit in one frame.
        truncated: bool,
    },
    /// Answer to `ReconcileHost`.
    Reconciled {
        /// Tunnels the controller knows for this host and keeps.
        kept: Vec<TunnelId>,
        /// Tunnels the host must stop (also sent as upcalls).
        terminated: Vec<TunnelId>,
    },
    /// Answer to `ReportMeters`.
    Ack,
    /// Answer to `Subscribe`: the highest number among this host's
    /// upcalls so far (0 from a single daemon, which does not number
    /// them). Upcalls numbered above the `Subscribe`'s `after` and up to
    /// it were replayed before this answer.
    Subscribed {
        /// The host's highest upcall number.
        seq: u64,
    },
    /// An upcall. A replicated controller numbers each host's upcalls
    /// 1, 2, 3, ... in log order, the same on every replica, so a host
    /// drops one it has seen (a replay after a takeover) and notices one
    /// it missed (a gap); a single (journal) daemon sends `seq` 0.
    Upcall {
        /// The upcall's number among its host's (0: not numbered).
        seq: u64,
        /// The upcall.
        upcall: Upcall,
    },
}

/// Why bytes did not decode.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProtoError {
    /// The bytes end inside the frame or a field.
    #[error("truncated frame")]
    Truncated,
    /// The length field exceeds [`MAX_FRAME`].
    #[error("frame of {len} bytes exceeds the maximum of {max}")]
    TooLong {
        /// Announced length.
        len: usize,
        /// The maximum.
        max: usize,
    },
    /// The length field is below 2 (no room for version and kind).
    #[error("frame length {0} is too short")]
    TooShort(usize),
    /// Unsupported protocol version.
    #[error("unsupported protocol version {0} (expected {VERSION})")]
    BadVersion(u8),
    /// Unknown message kind (for this direction).
    #[error("unknown message kind {0:#04x}")]
    UnknownKind(u8),
    /// A string is not UTF-8.
    #[error("field `{field}` is not UTF-8")]
    BadUtf8 {
        /// The field.
        field: &'static str,
    },
    /// A value is outside its allowed range (enum tag, bool, length, count).
    #[error("field `{field}` is out of range")]
    FieldOutOfRange {
        /// The field.
        field: &'static str,
    },
    /// The body is longer than its message.
    #[error("{0} trailing bytes after the message")]
    TrailingBytes(usize),
}

/// Why a message could not be encoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EncodeError {
    /// A string, list or the whole frame is too long for the protocol.
    #[error("field `{field}` is too long for the protocol")]
    TooLong {
        /// The field (`"frame"` for the whole frame).
        field: &'static str,
    },
    /// A message that may not be wrapped in `Tagged` (a connection
    /// message, or another `Tagged`).
    #[error("a {0} message cannot be tagged")]
    NotTaggable(&'static str),
}

// ---------------------------------------------------------------------------
// Primitive codec (also used by crate::store for journal records).

/// Appends big-endian fields to a buffer.
pub(crate) struct Writer<'a> {
    pub(crate) out: &'a mut Vec<u8>,
}

impl Writer<'_> {
    pub(crate) fn u8(&mut self, v: u8) {
        self.out.push(v);
    }
    pub(crate) fn u16(&mut self, v: u16) {
        self.out.extend_from_slice(&v.to_be_bytes());
    }
    pub(crate) fn u32(&mut self, v: u32) {
        self.out.extend_from_slice(&v.to_be_bytes());
    }
    pub(crate) fn u64(&mut self, v: u64) {
        self.out.extend_from_slice(&v.to_be_bytes());
    }
    pub(crate) fn bool(&mut self, v: bool) {
        self.out.push(u8::from(v));
    }
    pub(crate) fn bytes32(&mut self, v: &[u8; 32]) {
        self.out.extend_from_slice(v);
    }
    pub(crate) fn str(
        &mut self,
        field: &'static str,
        v: &str,
        max: usize,
    ) -> Result<(), EncodeError> {
        if v.len() > max {
            return Err(EncodeError::TooLong { field });
        }
        self.u16(v.len() as u16);
        self.out.extend_from_slice(v.as_bytes());
        Ok(())
    }
    pub(crate) fn count(
        &mut self,
        field: &'static str,
        n: usize,
        max: usize,
    ) -> Result<(), EncodeError> {
        if n > max || n > u16::MAX as usize {
            return Err(EncodeError::TooLong { field });
        }
        self.u16(n as u16);
        Ok(())
    }
    pub(crate) fn strs(
        &mut self,
        field: &'static str,
        v: &[String],
        max: usize,
    ) -> Result<(), EncodeError> {
        self.count(field, v.len(), max)?;
        for s in v {
            self.str(field, s, MAX_NAME)?;
        }
        Ok(())
    }
    pub(crate) fn resources(&mut self, r: &Resources) {
        self.u32(r.load_bytes);
        self.u64(r.period_ns);
        self.u64(r.min_latency_ns);
        self.u64(r.max_jitter_ns);
    }
}

/// Reads big-endian fields from a slice; every read is bounds-checked.
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Reader<'a> {
        Reader { buf, pos: 0 }
    }
    /// The bytes not read yet (all consumed).
    pub(crate) fn rest(&mut self) -> &'a [u8] {
        let r = &self.buf[self.pos.min(self.buf.len())..];
        self.pos = self.buf.len();
        r
    }
    /// The next `n` bytes.
    pub(crate) fn take_bytes(&mut self, n: usize) -> Result<&'a [u8], ProtoError> {
        self.take(n)
    }
    fn take(&mut self, n: usize) -> Result<&'a [u8], ProtoError> {
        let end = self.pos.checked_add(n).ok_or(ProtoError::Truncated)?;
        let s = self.buf.get(self.pos..end).ok_or(ProtoError::Truncated)?;
        self.pos = end;
        Ok(s)
    }
    fn array<const N: usize>(&mut self) -> Result<[u8; N], ProtoError> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }
    pub(crate) fn u8(&mut self) -> Result<u8, ProtoError> {
        Ok(self.array::<1>()?[0])
    }
    pub(crate) fn u16(&mut self) -> Result<u16, ProtoError> {
        Ok(u16::from_be_bytes(self.array()?))
    }
    pub(crate) fn u32(&mut self) -> Result<u32, ProtoError> {
        Ok(u32::from_be_bytes(self.array()?))
    }
    pub(crate) fn u64(&mut self) -> Result<u64, ProtoError> {
        Ok(u64::from_be_bytes(self.array()?))
    }
    pub(crate) fn bool(&mut self, field: &'static str) -> Result<bool, ProtoError> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(ProtoError::FieldOutOfRange { field }),
        }
    }
    pub(crate) fn bytes32(&mut self) -> Result<[u8; 32], ProtoError> {
        self.array()
    }
    pub(crate) fn str(&mut self, field: &'static str, max: usize) -> Result<String, ProtoError> {
        let n = self.u16()? as usize;
        if n > max {
            return Err(ProtoError::FieldOutOfRange { field });
        }
        let b = self.take(n)?;
        std::str::from_utf8(b)
            .map(str::to_string)
            .map_err(|_| ProtoError::BadUtf8 { field })
    }
    pub(crate) fn count(&mut self, field: &'static str, max: usize) -> Result<usize, ProtoError> {
        let n = self.u16()? as usize;
        if n > max {
            return Err(ProtoError::FieldOutOfRange { field });
        }
        Ok(n)
    }
    pub(crate) fn strs(
        &mut self,
        field: &'static str,
        max: usize,
    ) -> Result<Vec<String>, ProtoError> {
        let n = self.count(field, max)?;
        let mut v = Vec::with_capacity(n.min(64));
        for _ in 0..n {
            v.push(self.str(field, MAX_NAME)?);
        }
        Ok(v)
    }
    pub(crate) fn resources(&mut self) -> Result<Resources, ProtoError> {
        Ok(Resources {
            load_bytes: self.u32()?,
            period_ns: self.u64()?,
            min_latency_ns: self.u64()?,
            max_jitter_ns: self.u64()?,
        })
    }
    pub(crate) fn finish(&self) -> Result<(), ProtoError> {
        match self.buf.len() - self.pos {
            0 => Ok(()),
            n => Err(ProtoError::TrailingBytes(n)),
        }
    }
}

// ---------------------------------------------------------------------------
// Framing.

/// A complete frame found at the start of a buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawFrame<'a> {
    /// Message kind.
    pub kind: u8,
    /// Body (after version and kind).
    pub body: &'a [u8],
    /// Bytes of the buffer the frame takes, header included.
    pub len: usize,
}

/// Look for one frame at the start of `buf`. `Ok(None)`: more bytes are
/// needed. Errors as soon as the header shows the frame cannot be valid
/// (too long, too short, bad version), without waiting for the body.
pub fn split_frame(buf: &[u8]) -> Result<Option<RawFrame<'_>>, ProtoError> {
    let Some(hdr) = buf.get(..HEADER_LEN) else {
        return Ok(None);
    };
    let len = u32::from_be_bytes([hdr[0], hdr[1], hdr[2], hdr[3]]) as usize;
    if len > MAX_FRAME {
        return Err(ProtoError::TooLong {
            len,
            max: MAX_FRAME,
        });
    }
    if len < 2 {
        return Err(ProtoError::TooShort(len));
    }
    if let Some(&v) = buf.get(HEADER_LEN) {
        if v != VERSION {
            return Err(ProtoError::BadVersion(v));
        }
    }
    let Some(frame) = buf.get(HEADER_LEN..HEADER_LEN + len) else {
        return Ok(None);
    };
    Ok(Some(RawFrame {
        kind: frame[1],
        body: &frame[2..],
        len: HEADER_LEN + len,
    }))
}

fn frame(
    kind: u8,
    out: &mut Vec<u8>,
    body: impl FnOnce(&mut Writer<'_>) -> Result<(), EncodeError>,
) -> Result<(), EncodeError> {
    let start = out.len();
    out.extend_from_slice(&[0, 0, 0, 0, VERSION, kind]);
    let r = body(&mut Writer { out });
    let len = out.len() - start - HEADER_LEN;
    if r.is_err() || len > MAX_FRAME {
        out.truncate(start);
        return r.and(Err(EncodeError::TooLong { field: "frame" }));
    }
    out[start..start + HEADER_LEN].copy_from_slice(&(len as u32).to_be_bytes());
    Ok(())
}

/// A message type of one direction of the protocol.
pub trait Message: Sized {
    /// Append the message as one frame to `out` (unchanged on error).
    fn encode(&self, out: &mut Vec<u8>) -> Result<(), EncodeError>;
    /// Decode one complete frame from the start of `buf`; returns the
    /// message and the bytes consumed. `Truncated` if `buf` ends first.
    fn decode(buf: &[u8]) -> Result<(Self, usize), ProtoError>;
    /// The message as a new frame.
    fn to_frame(&self) -> Result<Vec<u8>, EncodeError> {
        let mut v = Vec::new();
        self.encode(&mut v)?;
        Ok(v)
    }
}

mod kind {
    pub const HELLO: u8 = 0x01;
    pub const AUTH: u8 = 0x02;
    pub const REQUEST: u8 = 0x03;
    pub const RELEASE: u8 = 0x04;
    pub const CHANGE: u8 = 0x05;
    pub const METERS: u8 = 0x06;
    pub const RECONCILE: u8 = 0x07;
    pub const LIST: u8 = 0x08;
    pub const SUBSCRIBE: u8 = 0x09;
    pub const TUNNEL_KEY: u8 = 0x0a;
    pub const TAGGED: u8 = 0x0b;

    pub const CHALLENGE: u8 = 0x81;
    pub const AUTH_OK: u8 = 0x82;
    pub const GRANTED: u8 = 0x83;
    pub const REFUSED: u8 = 0x84;
    pub const RELEASED: u8 = 0x85;
    pub const CHANGED: u8 = 0x86;
    pub const TUNNELS: u8 = 0x87;
    pub const RECONCILED: u8 = 0x88;
    pub const ACK: u8 = 0x89;
    pub const BW_CHANGED: u8 = 0x8a;
    pub const BW_TERMINATED: u8 = 0x8b;
    pub const KEY: u8 = 0x8c;
    pub const SUBSCRIBED: u8 = 0x8d;
}

impl Message for ClientMsg {
    fn encode(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        match self {
            ClientMsg::Hello { host, client_nonce } => frame(kind::HELLO, out, |w| {
                w.str("host", host, MAX_NAME)?;
                w.bytes32(client_nonce);
                Ok(())
            }),
            ClientMsg::Auth { mac } => frame(kind::AUTH, out, |w| {
                w.bytes32(mac);
                Ok(())
            }),
            ClientMsg::RequestBandwidth {
                sender,
                receivers,
                load_bytes,
                period_ns,
                sublane,
            } => frame(kind::REQUEST, out, |w| {
                w.str("sender", sender, MAX_NAME)?;
                w.strs("receivers", receivers, MAX_RECEIVERS)?;
                w.u32(*load_bytes);
                w.u64(*period_ns);
                w.u8(*sublane);
                Ok(())
            }),
            ClientMsg::ReleaseBandwidth { tunnel } => frame(kind::RELEASE, out, |w| {
                w.u64(tunnel.0);
                Ok(())
            }),
            ClientMsg::ChangeBandwidth {
                tunnel,
                load_bytes,
                period_ns,
            } => frame(kind::CHANGE, out, |w| {
                w.u64(tunnel.0);
                w.u32(*load_bytes);
                w.u64(*period_ns);
                Ok(())
            }),
            ClientMsg::ReportMeters { readings } => frame(kind::METERS, out, |w| {
                w.count("readings", readings.len(), MAX_READINGS)?;
                for r in readings {
                    w.u64(r.tunnel.0);
                    w.u64(r.packets);
                    w.u64(r.bytes);
                    w.u64(r.interval_ns);
                }
                Ok(())
            }),
            ClientMsg::ReconcileHost { tunnels } => frame(kind::RECONCILE, out, |w| {
                w.count("tunnels", tunnels.len(), MAX_TUNNEL_IDS)?;
                for t in tunnels {
                    w.u64(t.0);
                }
                Ok(())
            }),
            ClientMsg::ListTunnels => frame(kind::LIST, out, |_| Ok(())),
            ClientMsg::Subscribe { after } => frame(kind::SUBSCRIBE, out, |w| {
                w.u64(*after);
                Ok(())
            }),
            ClientMsg::Tagged { request_id, msg } => {
                let inner = match **msg {
                    ClientMsg::Hello { .. } => Some("Hello"),
                    ClientMsg::Auth { .. } => Some("Auth"),
                    ClientMsg::Subscribe { .. } => Some("Subscribe"),
                    ClientMsg::Tagged { .. } => Some("Tagged"),
                    _ => None,
                };
                if let Some(what) = inner {
                    return Err(EncodeError::NotTaggable(what));
                }
                frame(kind::TAGGED, out, |w| {
                    w.u64(*request_id);
                    msg.encode(w.out)
                })
            }
            ClientMsg::TunnelKey { tunnel } => frame(kind::TUNNEL_KEY, out, |w| {
                w.u64(tunnel.0);
                Ok(())
            }),
        }
    }

    fn decode(buf: &[u8]) -> Result<(Self, usize), ProtoError> {
        let f = split_frame(buf)?.ok_or(ProtoError::Truncated)?;
        let mut r = Reader::new(f.body);
        let msg = match f.kind {
            kind::HELLO => ClientMsg::Hello {
                host: r.str("host", MAX_NAME)?,
                client_nonce: r.bytes32()?,
            },
            kind::AUTH => ClientMsg::Auth { mac: r.bytes32()? },
            kind::REQUEST => ClientMsg::RequestBandwidth {
                sender: r.str("sender", MAX_NAME)?,
                receivers: r.strs("receivers", MAX_RECEIVERS)?,
                load_bytes: r.u32()?,
                period_ns: r.u64()?,
                sublane: r.u8()?,
            },
            kind::RELEASE => ClientMsg::ReleaseBandwidth {
                tunnel: TunnelId(r.u64()?),
            },
            kind::CHANGE => ClientMsg::ChangeBandwidth {
                tunnel: TunnelId(r.u64()?),
                load_bytes: r.u32()?,
                period_ns: r.u64()?,
            },
            kind::METERS => {
                let n = r.count("readings", MAX_READINGS)?;
                let mut readings = Vec::with_capacity(n.min(64));
                for _ in 0..n {
                    readings.push(MeterReading {
                        tunnel: TunnelId(r.u64()?),
                        packets: r.u64()?,
                        bytes: r.u64()?,
                        interval_ns: r.u64()?,
                    });
                }
                ClientMsg::ReportMeters { readings }
            }
            kind::RECONCILE => ClientMsg::ReconcileHost {
                tunnels: ids(&mut r, "tunnels")?,
            },
            kind::LIST => ClientMsg::ListTunnels,
            kind::SUBSCRIBE => ClientMsg::Subscribe { after: r.u64()? },
            kind::TUNNEL_KEY => ClientMsg::TunnelKey {
                tunnel: TunnelId(r.u64()?),
            },
            kind::TAGGED => {
                let request_id = r.u64()?;
                let rest = r.rest();
                let (msg, used) = ClientMsg::decode(rest)?;
                if used != rest.len() {
                    return Err(ProtoError::TrailingBytes(rest.len() - used));
                }
                if matches!(
                    msg,
                    ClientMsg::Hello { .. }
                        | ClientMsg::Auth { .. }
                        | ClientMsg::Subscribe { .. }
                        | ClientMsg::Tagged { .. }
                ) {
                    return Err(ProtoError::FieldOutOfRange {
                        field: "tagged message",
                    });
                }
                ClientMsg::Tagged {
                    request_id,
                    msg: Box::new(msg),
                }
            }
            k => return Err(ProtoError::UnknownKind(k)),
        };
        r.finish()?;
        Ok((msg, f.len))
    }
}

fn ids(r: &mut Reader<'_>, field: &'static str) -> Result<Vec<TunnelId>, ProtoError> {
    let n = r.count(field, MAX_TUNNEL_IDS)?;
    let mut v = Vec::with_capacity(n.min(64));
    for _ in 0..n {
        v.push(TunnelId(r.u64()?));
    }
    Ok(v)
}

fn put_ids(w: &mut Writer<'_>, field: &'static str, v: &[TunnelId]) -> Result<(), EncodeError> {
    w.count(field, v.len(), MAX_TUNNEL_IDS)?;
    for t in v {
        w.u64(t.0);
    }
    Ok(())
}

impl Reason {
    fn to_u8(self) -> u8 {
        match self {
            Reason::Te => 1,
            Reason::BwExceeded => 2,
            Reason::BwUnused => 3,
        }
    }
    fn from_u8(v: u8) -> Result<Reason, ProtoError> {
        match v {
            1 => Ok(Reason::Te),
            2 => Ok(Reason::BwExceeded),
            3 => Ok(Reason::BwUnused),
            _ => Err(ProtoError::FieldOutOfRange { field: "reason" }),
        }
    }
}

impl TerminateReason {
    fn to_u8(self) -> u8 {
        match self {
            TerminateReason::BwExceeded => 1,
            TerminateReason::BwUnused => 2,
            TerminateReason::Unknown => 3,
        }
    }
    fn from_u8(v: u8) -> Result<TerminateReason, ProtoError> {
        match v {
            1 => Ok(TerminateReason::BwExceeded),
            2 => Ok(TerminateReason::BwUnused),
            3 => Ok(TerminateReason::Unknown),
            _ => Err(ProtoError::FieldOutOfRange { field: "reason" }),
        }
    }
}

impl TunnelState {
    pub(crate) fn to_u8(self) -> u8 {
        match self {
            TunnelState::Active => 1,
            TunnelState::Unbounded => 2,
        }
    }
    pub(crate) fn from_u8(v: u8) -> Result<TunnelState, ProtoError> {
        match v {
            1 => Ok(TunnelState::Active),
            2 => Ok(TunnelState::Unbounded),
            _ => Err(ProtoError::FieldOutOfRange { field: "state" }),
        }
    }
}

impl ServerMsg {
    /// The message as a frame; a message too long to encode becomes an
    /// `Internal` refusal that says so (only over-long messages fail).
    pub fn frame_or_refusal(&self) -> Vec<u8> {
        match self.to_frame() {
            Ok(f) => f,
            Err(e) => ServerMsg::Refused {
                code: RefusalCode::Internal,
                message: format!("reply could not be encoded: {e}"),
            }
            .to_frame()
            .unwrap_or_default(),
        }
    }
}

impl Message for ServerMsg {
    fn encode(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        match self {
            ServerMsg::Challenge { server_nonce } => frame(kind::CHALLENGE, out, |w| {
                w.bytes32(server_nonce);
                Ok(())
            }),
            ServerMsg::AuthOk => frame(kind::AUTH_OK, out, |_| Ok(())),
            ServerMsg::Granted {
                tunnel,
                resources,
                period_raised,
            } => frame(kind::GRANTED, out, |w| {
                w.u64(tunnel.0);
                w.resources(resources);
                w.bool(*period_raised);
                Ok(())
            }),
            ServerMsg::Refused { code, message } => frame(kind::REFUSED, out, |w| {
                w.u16(*code as u16);
                w.str("message", message, MAX_MESSAGE)
            }),
            ServerMsg::Released { tunnel } => frame(kind::RELEASED, out, |w| {
                w.u64(tunnel.0);
                Ok(())
            }),
            ServerMsg::Key { tunnel, key } => frame(kind::KEY, out, |w| {
                w.u64(tunnel.0);
                w.u64(u64::from_be_bytes(key[..8].try_into().expect("8 bytes")));
                w.u64(u64::from_be_bytes(key[8..].try_into().expect("8 bytes")));
                Ok(())
            }),
            ServerMsg::Changed {
                tunnel,
                resources,
                period_raised,
            } => frame(kind::CHANGED, out, |w| {
                w.u64(tunnel.0);
                w.resources(resources);
                w.bool(*period_raised);
                Ok(())
            }),
            ServerMsg::Tunnels { list, truncated } => frame(kind::TUNNELS, out, |w| {
                w.count("list", list.len(), u16::MAX as usize)?;
                for t in list {
                    w.u64(t.tunnel.0);
                    w.str("sender", &t.sender, MAX_NAME)?;
                    w.strs("receivers", &t.receivers, MAX_RECEIVERS)?;
                    w.u8(t.sublane);
                    w.u8(t.state.to_u8());
                    w.u64(t.requested_period_ns);
                    w.resources(&t.resources);
                }
                w.bool(*truncated);
                Ok(())
            }),
            ServerMsg::Reconciled { kept, terminated } => frame(kind::RECONCILED, out, |w| {
                put_ids(w, "kept", kept)?;
                put_ids(w, "terminated", terminated)
            }),
            ServerMsg::Ack => frame(kind::ACK, out, |_| Ok(())),
            ServerMsg::Subscribed { seq } => frame(kind::SUBSCRIBED, out, |w| {
                w.u64(*seq);
                Ok(())
            }),
            ServerMsg::Upcall {
                seq,
                upcall:
                    Upcall::BandwidthChanged {
                        tunnel,
                        old,
                        new,
                        reason,
                        grace_ns,
                    },
            } => frame(kind::BW_CHANGED, out, |w| {
                w.u64(*seq);
                w.u64(tunnel.0);
                w.resources(old);
                w.resources(new);
                w.u8(reason.to_u8());
                w.u64(*grace_ns);
                Ok(())
            }),
            ServerMsg::Upcall {
                seq,
                upcall: Upcall::BandwidthTerminated { tunnel, reason },
            } => frame(kind::BW_TERMINATED, out, |w| {
                w.u64(*seq);
                w.u64(tunnel.0);
                w.u8(reason.to_u8());
                Ok(())
            }),
        }
    }

    fn decode(buf: &[u8]) -> Result<(Self, usize), ProtoError> {
        let f = split_frame(buf)?.ok_or(ProtoError::Truncated)?;
        let mut r = Reader::new(f.body);
        let msg = match f.kind {
            kind::CHALLENGE => ServerMsg::Challenge {
                server_nonce: r.bytes32()?,
            },
            kind::AUTH_OK => ServerMsg::AuthOk,
            kind::GRANTED => ServerMsg::Granted {
                tunnel: TunnelId(r.u64()?),
                resources: r.resources()?,
                period_raised: r.bool("period_raised")?,
            },
            kind::REFUSED => {
                let code = RefusalCode::from_u16(r.u16()?)
                    .ok_or(ProtoError::FieldOutOfRange { field: "code" })?;
                ServerMsg::Refused {
                    code,
                    message: r.str("message", MAX_MESSAGE)?,
                }
            }
            kind::RELEASED => ServerMsg::Released {
                tunnel: TunnelId(r.u64()?),
            },
            kind::KEY => {
                let tunnel = TunnelId(r.u64()?);
                let mut key = [0u8; 16];
                key[..8].copy_from_slice(&r.u64()?.to_be_bytes());
                key[8..].copy_from_slice(&r.u64()?.to_be_bytes());
                ServerMsg::Key { tunnel, key }
            }
            kind::CHANGED => ServerMsg::Changed {
                tunnel: TunnelId(r.u64()?),
                resources: r.resources()?,
                period_raised: r.bool("period_raised")?,
            },
            kind::TUNNELS => {
                let n = r.count("list", u16::MAX as usize)?;
                let mut list = Vec::with_capacity(n.min(64));
                for _ in 0..n {
                    list.push(TunnelInfo {
                        tunnel: TunnelId(r.u64()?),
                        sender: r.str("sender", MAX_NAME)?,
                        receivers: r.strs("receivers", MAX_RECEIVERS)?,
                        sublane: r.u8()?,
                        state: TunnelState::from_u8(r.u8()?)?,
                        requested_period_ns: r.u64()?,
                        resources: r.resources()?,
                    });
                }
                ServerMsg::Tunnels {
                    list,
                    truncated: r.bool("truncated")?,
                }
            }
            kind::RECONCILED => ServerMsg::Reconciled {
                kept: ids(&mut r, "kept")?,
                terminated: ids(&mut r, "terminated")?,
            },
            kind::ACK => ServerMsg::Ack,
            kind::SUBSCRIBED => ServerMsg::Subscribed { seq: r.u64()? },
            kind::BW_CHANGED => ServerMsg::Upcall {
                seq: r.u64()?,
                upcall: Upcall::BandwidthChanged {
                    tunnel: TunnelId(r.u64()?),
                    old: r.resources()?,
                    new: r.resources()?,
                    reason: Reason::from_u8(r.u8()?)?,
                    grace_ns: r.u64()?,
                },
            },
            kind::BW_TERMINATED => ServerMsg::Upcall {
                seq: r.u64()?,
                upcall: Upcall::BandwidthTerminated {
                    tunnel: TunnelId(r.u64()?),
                    reason: TerminateReason::from_u8(r.u8()?)?,
                },
            },
            k => return Err(ProtoError::UnknownKind(k)),
        };
        r.finish()?;
        Ok((msg, f.len))
    }
}

/// Accumulates bytes from a stream and cuts them into frames (sans-IO: the
/// caller does the reading). Never holds more than one frame plus what was
/// pushed at once.
#[derive(Debug, Default)]
pub struct FrameBuffer {
    buf: Vec<u8>,
}

impl FrameBuffer {
    /// An empty buffer.
    pub fn new() -> FrameBuffer {
        FrameBuffer::default()
    }

    /// Append received bytes.
    pub fn push(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// Bytes buffered and not yet returned as a frame.
    pub fn pending(&self) -> usize {
        self.buf.len()
    }

    /// The next complete frame (header included), if any. An error means
    /// the stream cannot be resynchronized: close it.
    pub fn next_frame(&mut self) -> Result<Option<Vec<u8>>, ProtoError> {
        match split_frame(&self.buf)? {
            None => Ok(None),
            Some(f) => {
                let n = f.len;
                let rest = self.buf.split_off(n);
                Ok(Some(std::mem::replace(&mut self.buf, rest)))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn res() -> Resources {
        Resources {
            load_bytes: 100,
            period_ns: 200_000,
            min_latency_ns: 5,
            max_jitter_ns: 6,
        }
    }

    #[test]
    fn examples_round_trip_and_are_canonical() {
        let msgs = vec![
            ClientMsg::Hello {
                host: "h0".into(),
                client_nonce: [7; 32],
            },
            ClientMsg::ListTunnels,
            ClientMsg::RequestBandwidth {
                sender: "h0".into(),
                receivers: vec!["h1".into(), "h2".into()],
                load_bytes: 64,
                period_ns: 200_000,
                sublane: 1,
            },
            ClientMsg::TunnelKey {
                tunnel: TunnelId(9),
            },
        ];
        for m in msgs {
            let b = m.to_frame().unwrap();
            let (d, n) = ClientMsg::decode(&b).unwrap();
            assert_eq!(d, m);
            assert_eq!(n, b.len());
        }
        let key = ServerMsg::Key {
            tunnel: TunnelId(9),
            key: std::array::from_fn(|i| i as u8 * 17),
        };
        let b = key.to_frame().unwrap();
        assert_eq!(ServerMsg::decode(&b).unwrap(), (key, b.len()));
    }

    #[test]
    fn decode_errors_are_typed() {
        let ok = ServerMsg::Granted {
            tunnel: TunnelId(3),
            resources: res(),
            period_raised: true,
        }
        .to_frame()
        .unwrap();
        let table: Vec<(Vec<u8>, ProtoError)> = vec![
            (vec![], ProtoError::Truncated),
            (ok[..ok.len() - 1].to_vec(), ProtoError::Truncated),
            (
                vec![0, 1, 0, 1, VERSION, 0x83],
                ProtoError::TooLong {
                    len: 65537,
                    max: MAX_FRAME,
                },
            ),
            (vec![0, 0, 0, 1, VERSION], ProtoError::TooShort(1)),
            (vec![0, 0, 0, 2, 9, 0x82], ProtoError::BadVersion(9)),
            (vec![0, 0, 0, 2, VERSION, 0x01], ProtoError::UnknownKind(1)),
            (
                vec![0, 0, 0, 3, VERSION, 0x82, 0],
                ProtoError::TrailingBytes(1),
            ),
            (
                {
                    let mut b = ok.clone();
                    *b.last_mut().unwrap() = 2;
                    b
                },
                ProtoError::FieldOutOfRange {
                    field: "period_raised",
                },
            ),
            (
                vec![0, 0, 0, 6, VERSION, 0x84, 0, 99, 0, 0],
                ProtoError::FieldOutOfRange { field: "code" },
            ),
            (
                vec![0, 0, 0, 7, VERSION, 0x84, 0, 1, 0, 1, 0xff],
                ProtoError::BadUtf8 { field: "message" },
            ),
        ];
        for (i, (bytes, want)) in table.into_iter().enumerate() {
            assert_eq!(ServerMsg::decode(&bytes).unwrap_err(), want, "case {i}");
        }
    }

    #[test]
    fn encoder_refuses_what_decoder_would() {
        let m = ClientMsg::Hello {
            host: "x".repeat(MAX_NAME + 1),
            client_nonce: [0; 32],
        };
        let mut out = vec![1, 2, 3];
        assert_eq!(
            m.encode(&mut out).unwrap_err(),
            EncodeError::TooLong { field: "host" }
        );
        assert_eq!(out, vec![1, 2, 3], "buffer unchanged on error");
        let big = ServerMsg::Tunnels {
            list: (0..2000)
                .map(|i| TunnelInfo {
                    tunnel: TunnelId(i),
                    sender: "h".repeat(20),
                    receivers: vec!["r".repeat(20)],
                    sublane: 0,
                    state: TunnelState::Active,
                    requested_period_ns: 1,
                    resources: res(),
                })
                .collect(),
            truncated: false,
        };
        assert_eq!(
            big.to_frame().unwrap_err(),
            EncodeError::TooLong { field: "frame" }
        );
    }

    #[test]
    fn frame_buffer_cuts_a_stream_at_any_split() {
        let a = ClientMsg::ListTunnels.to_frame().unwrap();
        let b = ClientMsg::ReleaseBandwidth {
            tunnel: TunnelId(9),
        }
        .to_frame()
        .unwrap();
        let all: Vec<u8> = a.iter().chain(b.iter()).copied().collect();
        for cut in 0..=all.len() {
            let mut fb = FrameBuffer::new();
            let mut got = Vec::new();
            for part in [&all[..cut], &all[cut..]] {
                fb.push(part);
                while let Some(f) = fb.next_frame().unwrap() {
                    got.push(ClientMsg::decode(&f).unwrap().0);
                }
            }
            assert_eq!(got.len(), 2, "cut {cut}");
            assert_eq!(fb.pending(), 0);
        }
    }

    #[test]
    fn refusal_codes_round_trip() {
        for c in RefusalCode::ALL {
            assert_eq!(RefusalCode::from_u16(c as u16), Some(c));
        }
        assert_eq!(RefusalCode::from_u16(0), None);
    }

    /// A `NotLeader` refusal's serving replica is read back from its
    /// message, IPv4 or IPv6; one that names none gives none.
    #[test]
    fn not_leader_hints() {
        for a in ["10.0.0.2:7070", "[::1]:7071"] {
            let a: std::net::SocketAddr = a.parse().unwrap();
            assert_eq!(not_leader_hint(&not_leader_message(Some(a))), Some(a));
        }
        assert_eq!(not_leader_hint(&not_leader_message(None)), None);
        assert_eq!(not_leader_hint("the serving one is at nowhere"), None);
    }
}
