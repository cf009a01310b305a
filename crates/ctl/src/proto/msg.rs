//! The protocol's messages, limits, field types and errors.

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
