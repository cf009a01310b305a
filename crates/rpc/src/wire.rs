//! The R2P2 header (the report's Fig. 3) as a packet view, and the small
//! payloads that have a fixed meaning (FEEDBACK, ACK, DROP).
//!
//! ```text
//!  0       1       2               3       4               6               8
//!  +-------+-------+-------+-------+-------+---------------+---------------+
//!  | magic | hsize | type  |policy | flags |    req_id     |  packet order |
//!  | 0xCC  |   8   | hi 4b | lo 4b | F L . |   u16 (BE)    |   u16 (BE)    |
//!  +-------+-------+-------+-------+-------+---------------+---------------+
//!  | payload: at most 1464 bytes (a 1500-byte MTU − IPv4 − UDP − 8)        |
//! ```
//!
//! * `flags`: `F` = 0x80 on the first packet of a message, `L` = 0x40 on the
//!   last; the other six bits are written as zero and ignored on receive.
//! * `packet order`: on the first packet (F) the number of packets of the
//!   message (≥ 1); on every later packet its index (1, 2, …).
//! * A single-packet message has F and L set and a packet order of 1.

use std::net::Ipv4Addr;

/// Bytes of the R2P2 header.
pub const HEADER_LEN: usize = 8;
/// The first byte of every R2P2 packet.
pub const MAGIC: u8 = 0xCC;
/// Most payload bytes one packet carries: 1500 − 20 (IPv4) − 8 (UDP) − 8.
pub const MAX_PAYLOAD: usize = 1464;
/// Longest R2P2 packet (header and payload): one UDP payload of a 1500-byte MTU.
pub const MAX_PACKET_LEN: usize = HEADER_LEN + MAX_PAYLOAD;
/// Payload bytes of the first packet (REQ0) of a multi-packet request: the
/// REQ0 that crosses the router fits a minimum-size 64-byte Ethernet frame
/// (64 − 14 − 20 − 8 − 8), as the C implementation sends it.
pub const REQ0_PAYLOAD: usize = 14;
/// Payload of the server's REQRDY (type ACK) that asks for the rest of a request.
pub const ACK_PAYLOAD: &[u8; 3] = b"ACK";
/// Payload of a DROP.
pub const DROP_PAYLOAD: &[u8; 4] = b"DROP";
/// Bytes of a FEEDBACK payload: rid (u16), port (u16), IPv4 (u32), all big-endian.
pub const FEEDBACK_LEN: usize = 8;

/// Byte offsets of the header fields (and of the FEEDBACK payload's fields,
/// counted from the start of the payload).
pub mod field {
    /// A byte range.
    pub type Field = core::ops::Range<usize>;
    /// [`crate::wire::MAGIC`].
    pub const MAGIC: usize = 0;
    /// Header size in bytes (8).
    pub const HEADER_SIZE: usize = 1;
    /// Message type (high nibble) and routing policy (low nibble).
    pub const TYPE_POLICY: usize = 2;
    /// Flag bits ([`crate::wire::flags`]).
    pub const FLAGS: usize = 3;
    /// Request id (u16, big-endian).
    pub const REQ_ID: Field = 4..6;
    /// Packet order (u16, big-endian): count on the first packet, index on later ones.
    pub const PACKET_ORDER: Field = 6..8;
    /// First payload byte.
    pub const PAYLOAD: usize = 8;
    /// In a FEEDBACK payload: the finished request's id (u16).
    pub const FEEDBACK_RID: Field = 0..2;
    /// In a FEEDBACK payload: the finished request's source port (u16).
    pub const FEEDBACK_PORT: Field = 2..4;
    /// In a FEEDBACK payload: the finished request's source IPv4 address (u32).
    pub const FEEDBACK_IP: Field = 4..8;
}

/// Flag bits of the header's flags byte.
pub mod flags {
    /// First packet of a message.
    pub const FIRST: u8 = 0x80;
    /// Last packet of a message.
    pub const LAST: u8 = 0x40;
}

/// Routing policies carried in the low nibble (the router reads them).
///
/// Every value but [`FIXED_ROUTE`](policy::FIXED_ROUTE) asks the router to
/// load-balance the request, and names the request's **class** (SVEN's
/// request types: "R2P2's policy field can encode request types"):
/// [`LB_ROUTE`](policy::LB_ROUTE) is class 0, and 2…15 are classes an
/// application defines, which the router's admission control keeps
/// apart (a latency histogram and a controller per class, some classes
/// never dropped).
pub mod policy {
    /// Load-balance the request across servers (the router picks one):
    /// class 0.
    pub const LB_ROUTE: u8 = 0;
    /// Send to the addressed server; replies, ACKs and DROPs use this.
    pub const FIXED_ROUTE: u8 = 1;
    /// Number of policy values (a nibble); the classes are those other
    /// than `FIXED_ROUTE`.
    pub const COUNT: usize = 16;

    /// Whether a REQ0 with this policy is load-balanced (has a class).
    pub const fn is_load_balanced(policy: u8) -> bool {
        policy != FIXED_ROUTE && (policy as usize) < COUNT
    }
}

/// The R2P2 message types this crate speaks (high nibble of byte 2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MsgType {
    /// A request packet (REQ0 when first, REQn after).
    Request,
    /// A reply packet.
    Response,
    /// Server to router: a request is finished.
    Feedback,
    /// REQRDY: the server took a multi-packet request and wants the rest. In
    /// xlane also a selective retransmission request (see the crate docs).
    Ack,
    /// The server refused the request.
    Drop,
}

impl MsgType {
    /// The nibble written on the wire.
    pub const fn as_u8(self) -> u8 {
        match self {
            MsgType::Request => 0,
            MsgType::Response => 1,
            MsgType::Feedback => 2,
            MsgType::Ack => 3,
            MsgType::Drop => 4,
        }
    }

    /// The type with wire nibble `v`, or `None`.
    pub const fn from_u8(v: u8) -> Option<Self> {
        match v {
            0 => Some(MsgType::Request),
            1 => Some(MsgType::Response),
            2 => Some(MsgType::Feedback),
            3 => Some(MsgType::Ack),
            4 => Some(MsgType::Drop),
            _ => None,
        }
    }
}

/// Why a datagram is not an R2P2 packet this crate accepts. The datagram is
/// dropped as a whole and counted by the core that received it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PacketError {
    /// Shorter than the header.
    #[error("datagram of {len} bytes is shorter than the 8-byte R2P2 header")]
    Truncated {
        /// Bytes received.
        len: usize,
    },
    /// The first byte is not 0xCC.
    #[error("bad magic 0x{0:02x}")]
    BadMagic(u8),
    /// The header-size byte is not 8.
    #[error("header size {0}, expected 8")]
    BadHeaderSize(u8),
    /// A type nibble this crate does not speak (the C code's exactly-once and
    /// Raft types 5..=10 among them).
    #[error("unsupported message type {0}")]
    UnknownType(u8),
    /// More than [`MAX_PAYLOAD`] payload bytes.
    #[error("payload of {len} bytes, at most {MAX_PAYLOAD}")]
    PayloadTooLong {
        /// Payload bytes.
        len: usize,
    },
    /// A first packet announcing zero packets, a single packet (F and L) not
    /// announcing one, or a later packet with index 0.
    #[error("packet order {order} impossible with flags 0x{flags:02x}")]
    BadOrder {
        /// The packet-order field.
        order: u16,
        /// The flags byte.
        flags: u8,
    },
}

#[inline]
fn be16(b: &[u8], r: field::Field) -> u16 {
    u16::from_be_bytes([b[r.start], b[r.start + 1]])
}

/// A validated R2P2 packet over a byte slice. Built only by
/// [`Packet::new_checked`]; its accessors never panic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Packet<'a> {
    bytes: &'a [u8],
}

impl<'a> Packet<'a> {
    /// Validates `bytes` once: length, magic, header size, type, payload
    /// length and the packet order against the F/L flags. O(1).
    pub fn new_checked(bytes: &'a [u8]) -> Result<Self, PacketError> {
        if bytes.len() < HEADER_LEN {
            return Err(PacketError::Truncated { len: bytes.len() });
        }
        if bytes[field::MAGIC] != MAGIC {
            return Err(PacketError::BadMagic(bytes[field::MAGIC]));
        }
        if bytes[field::HEADER_SIZE] as usize != HEADER_LEN {
            return Err(PacketError::BadHeaderSize(bytes[field::HEADER_SIZE]));
        }
        let t = bytes[field::TYPE_POLICY] >> 4;
        if MsgType::from_u8(t).is_none() {
            return Err(PacketError::UnknownType(t));
        }
        let len = bytes.len() - HEADER_LEN;
        if len > MAX_PAYLOAD {
            return Err(PacketError::PayloadTooLong { len });
        }
        let f = bytes[field::FLAGS];
        let order = be16(bytes, field::PACKET_ORDER);
        let first = f & flags::FIRST != 0;
        let last = f & flags::LAST != 0;
        if order == 0 || (first && last && order != 1) {
            return Err(PacketError::BadOrder { order, flags: f });
        }
        Ok(Packet { bytes })
    }

    /// The message type.
    pub fn msg_type(&self) -> MsgType {
        // Checked in new_checked; Request is never reached.
        MsgType::from_u8(self.bytes[field::TYPE_POLICY] >> 4).unwrap_or(MsgType::Request)
    }

    /// The routing policy (low nibble).
    pub fn policy(&self) -> u8 {
        self.bytes[field::TYPE_POLICY] & 0x0F
    }

    /// The raw flags byte.
    pub fn flags(&self) -> u8 {
        self.bytes[field::FLAGS]
    }

    /// F: the first packet of its message.
    pub fn is_first(&self) -> bool {
        self.flags() & flags::FIRST != 0
    }

    /// L: the last packet of its message.
    pub fn is_last(&self) -> bool {
        self.flags() & flags::LAST != 0
    }

    /// The request id.
    pub fn req_id(&self) -> u16 {
        be16(self.bytes, field::REQ_ID)
    }

    /// The raw packet-order field (see [`Packet::index`] and [`Packet::count`]).
    pub fn packet_order(&self) -> u16 {
        be16(self.bytes, field::PACKET_ORDER)
    }

    /// Index of this packet in its message: 0 for the first, else the order field.
    pub fn index(&self) -> u16 {
        if self.is_first() {
            0
        } else {
            self.packet_order()
        }
    }

    /// Packets in the message, if this packet says (the first one does).
    pub fn count(&self) -> Option<u16> {
        self.is_first().then(|| self.packet_order())
    }

    /// The payload (at most [`MAX_PAYLOAD`] bytes).
    pub fn payload(&self) -> &'a [u8] {
        &self.bytes[field::PAYLOAD..]
    }

    /// The whole packet.
    pub fn as_bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// The header as a value.
    pub fn repr(&self) -> Header {
        Header {
            msg_type: self.msg_type(),
            policy: self.policy(),
            first: self.is_first(),
            last: self.is_last(),
            req_id: self.req_id(),
            packet_order: self.packet_order(),
        }
    }
}

/// Why a packet cannot be built.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EmitError {
    /// The buffer cannot hold the packet.
    #[error("buffer of {have} bytes, need {need}")]
    BufferTooSmall {
        /// Bytes needed.
        need: usize,
        /// Bytes available.
        have: usize,
    },
    /// The payload is longer than one packet carries.
    #[error("payload of {len} bytes, at most {MAX_PAYLOAD}")]
    PayloadTooLong {
        /// Bytes offered.
        len: usize,
    },
    /// The policy does not fit a nibble.
    #[error("policy {0} does not fit 4 bits")]
    BadPolicy(u8),
    /// The packet order is impossible with the flags (see [`PacketError::BadOrder`]).
    #[error("packet order {0} impossible with these flags")]
    BadOrder(u16),
}

/// The decoded header; [`Header::emit`] writes it back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// Message type.
    pub msg_type: MsgType,
    /// Routing policy (0..=15).
    pub policy: u8,
    /// F flag.
    pub first: bool,
    /// L flag.
    pub last: bool,
    /// Request id.
    pub req_id: u16,
    /// Packet count (first packet) or index (later packets).
    pub packet_order: u16,
}

impl Header {
    /// Header of packet `index` of a `count`-packet message.
    pub fn for_packet(msg_type: MsgType, policy: u8, req_id: u16, index: u16, count: u16) -> Self {
        Header {
            msg_type,
            policy,
            first: index == 0,
            last: index + 1 == count,
            req_id,
            packet_order: if index == 0 { count } else { index },
        }
    }

    /// Length of a packet with this header and `payload_len` payload bytes.
    pub const fn buffer_len(payload_len: usize) -> usize {
        HEADER_LEN + payload_len
    }

    /// Writes the header and `payload` into `buf`; returns the packet length.
    /// Reserved flag bits are written as zero.
    pub fn emit(&self, payload: &[u8], buf: &mut [u8]) -> Result<usize, EmitError> {
        if payload.len() > MAX_PAYLOAD {
            return Err(EmitError::PayloadTooLong { len: payload.len() });
        }
        if self.policy > 0x0F {
            return Err(EmitError::BadPolicy(self.policy));
        }
        if self.packet_order == 0 || (self.first && self.last && self.packet_order != 1) {
            return Err(EmitError::BadOrder(self.packet_order));
        }
        let need = Self::buffer_len(payload.len());
        if buf.len() < need {
            return Err(EmitError::BufferTooSmall {
                need,
                have: buf.len(),
            });
        }
        buf[field::MAGIC] = MAGIC;
        buf[field::HEADER_SIZE] = HEADER_LEN as u8;
        buf[field::TYPE_POLICY] = (self.msg_type.as_u8() << 4) | self.policy;
        let mut f = 0;
        if self.first {
            f |= flags::FIRST;
        }
        if self.last {
            f |= flags::LAST;
        }
        buf[field::FLAGS] = f;
        buf[field::REQ_ID].copy_from_slice(&self.req_id.to_be_bytes());
        buf[field::PACKET_ORDER].copy_from_slice(&self.packet_order.to_be_bytes());
        buf[field::PAYLOAD..need].copy_from_slice(payload);
        Ok(need)
    }
}

/// A FEEDBACK payload: the request a server finished.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Feedback {
    /// The finished request's id.
    pub req_id: u16,
    /// Its source port.
    pub port: u16,
    /// Its source address.
    pub ip: Ipv4Addr,
}

/// A FEEDBACK payload of the wrong length.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("FEEDBACK payload of {0} bytes, expected 8")]
pub struct FeedbackError(pub usize);

impl From<crate::Identity> for Feedback {
    fn from(id: crate::Identity) -> Self {
        Feedback {
            req_id: id.req_id,
            port: id.port,
            ip: id.ip,
        }
    }
}

impl From<Feedback> for crate::Identity {
    fn from(fb: Feedback) -> Self {
        crate::Identity {
            ip: fb.ip,
            port: fb.port,
            req_id: fb.req_id,
        }
    }
}

impl Feedback {
    /// Decodes a FEEDBACK packet's payload (exactly [`FEEDBACK_LEN`] bytes).
    pub fn parse(payload: &[u8]) -> Result<Self, FeedbackError> {
        if payload.len() != FEEDBACK_LEN {
            return Err(FeedbackError(payload.len()));
        }
        let ip = u32::from_be_bytes([payload[4], payload[5], payload[6], payload[7]]);
        Ok(Feedback {
            req_id: be16(payload, field::FEEDBACK_RID),
            port: be16(payload, field::FEEDBACK_PORT),
            ip: Ipv4Addr::from(ip),
        })
    }

    /// The payload bytes.
    pub fn to_bytes(&self) -> [u8; FEEDBACK_LEN] {
        let mut b = [0u8; FEEDBACK_LEN];
        b[field::FEEDBACK_RID].copy_from_slice(&self.req_id.to_be_bytes());
        b[field::FEEDBACK_PORT].copy_from_slice(&self.port.to_be_bytes());
        b[field::FEEDBACK_IP].copy_from_slice(&u32::from(self.ip).to_be_bytes());
        b
    }
}

/// An ACK payload: `"ACK"` then zero or more packet indices (u16, big-endian)
/// that the sender of the ACK is missing. The C implementation sends and
/// expects exactly `"ACK"`; the index list is xlane's selective retransmission
/// request (see the crate docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AckPayload<'a> {
    indices: &'a [u8],
}

/// An ACK payload that is not `"ACK"` followed by whole u16 indices.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("malformed ACK payload of {0} bytes")]
pub struct AckError(pub usize);

/// Most indices one ACK carries.
pub const MAX_ACK_INDICES: usize = (MAX_PAYLOAD - ACK_PAYLOAD.len()) / 2;

impl<'a> AckPayload<'a> {
    /// Checks an ACK packet's payload.
    pub fn parse(payload: &'a [u8]) -> Result<Self, AckError> {
        if payload.len() < ACK_PAYLOAD.len()
            || &payload[..ACK_PAYLOAD.len()] != ACK_PAYLOAD
            || (payload.len() - ACK_PAYLOAD.len()) % 2 != 0
        {
            return Err(AckError(payload.len()));
        }
        Ok(AckPayload {
            indices: &payload[ACK_PAYLOAD.len()..],
        })
    }

    /// The missing packet indices listed (none in a plain REQRDY).
    pub fn missing(&self) -> impl Iterator<Item = u16> + 'a {
        self.indices
            .chunks_exact(2)
            .map(|c| u16::from_be_bytes([c[0], c[1]]))
    }

    /// Writes `"ACK"` and up to [`MAX_ACK_INDICES`] of `missing` into `buf`;
    /// returns the payload length. `buf` must hold [`MAX_PAYLOAD`] bytes.
    pub fn emit(missing: impl Iterator<Item = u16>, buf: &mut [u8]) -> usize {
        buf[..ACK_PAYLOAD.len()].copy_from_slice(ACK_PAYLOAD);
        let mut at = ACK_PAYLOAD.len();
        for i in missing.take(MAX_ACK_INDICES) {
            if at + 2 > buf.len() {
                break;
            }
            buf[at..at + 2].copy_from_slice(&i.to_be_bytes());
            at += 2;
        }
        at
    }
}

/// Packets of a message of `len` payload bytes. A request longer than one
/// packet sends [`REQ0_PAYLOAD`] bytes in REQ0 and the rest in full packets;
/// a reply fills every packet but the last. `None` above 65 535 packets.
pub fn packet_count(msg_type: MsgType, len: usize) -> Option<u16> {
    let n = if len <= MAX_PAYLOAD {
        1
    } else if msg_type == MsgType::Request {
        1 + (len - REQ0_PAYLOAD).div_ceil(MAX_PAYLOAD)
    } else {
        len.div_ceil(MAX_PAYLOAD)
    };
    u16::try_from(n).ok()
}

/// Byte range of packet `index` in a message of `len` bytes split as
/// [`packet_count`] says (empty range past the end).
pub fn packet_range(msg_type: MsgType, len: usize, index: u16) -> core::ops::Range<usize> {
    let i = index as usize;
    let start = if len <= MAX_PAYLOAD {
        if i == 0 {
            0
        } else {
            len
        }
    } else if msg_type == MsgType::Request {
        if i == 0 {
            0
        } else {
            REQ0_PAYLOAD + (i - 1) * MAX_PAYLOAD
        }
    } else {
        i * MAX_PAYLOAD
    };
    let start = start.min(len);
    let end = if len <= MAX_PAYLOAD {
        if i == 0 {
            len
        } else {
            start
        }
    } else if msg_type == MsgType::Request && i == 0 {
        REQ0_PAYLOAD
    } else {
        (start + MAX_PAYLOAD).min(len)
    };
    start..end
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hdr(t: MsgType, first: bool, last: bool, rid: u16, order: u16) -> Header {
        Header {
            msg_type: t,
            policy: policy::LB_ROUTE,
            first,
            last,
            req_id: rid,
            packet_order: order,
        }
    }

    #[test]
    fn round_trip_every_type_and_flag_combination() {
        let types = [
            MsgType::Request,
            MsgType::Response,
            MsgType::Feedback,
            MsgType::Ack,
            MsgType::Drop,
        ];
        let cases: &[(bool, bool, u16)] = &[
            (true, true, 1),
            (true, false, 2),
            (true, false, 65535),
            (false, false, 1),
            (false, true, 7),
            (false, true, 65535),
        ];
        let mut buf = [0u8; MAX_PACKET_LEN];
        for &t in &types {
            for &(f, l, o) in cases {
                for pol in [0u8, 1, 15] {
                    let h = Header {
                        policy: pol,
                        ..hdr(t, f, l, 0xBEEF, o)
                    };
                    let payload = [0x5Au8; 17];
                    let n = h.emit(&payload, &mut buf).unwrap();
                    assert_eq!(n, 8 + 17);
                    let p = Packet::new_checked(&buf[..n]).unwrap();
                    assert_eq!(p.repr(), h);
                    assert_eq!(p.payload(), &payload);
                    assert_eq!(p.index(), if f { 0 } else { o });
                    assert_eq!(p.count(), f.then_some(o));
                }
            }
        }
    }

    #[test]
    fn malformed_inputs_get_typed_errors() {
        let good = [0xCC, 8, 0x00, 0xC0, 0, 1, 0, 1];
        assert!(Packet::new_checked(&good).is_ok());
        let mut too_long = vec![0u8; MAX_PACKET_LEN + 1];
        too_long[..8].copy_from_slice(&good);
        let table: &[(&[u8], PacketError)] = &[
            (&[], PacketError::Truncated { len: 0 }),
            (&good[..7], PacketError::Truncated { len: 7 }),
            (&[0xCD, 8, 0, 0xC0, 0, 1, 0, 1], PacketError::BadMagic(0xCD)),
            (
                &[0xCC, 9, 0, 0xC0, 0, 1, 0, 1],
                PacketError::BadHeaderSize(9),
            ),
            (
                &[0xCC, 0, 0, 0xC0, 0, 1, 0, 1],
                PacketError::BadHeaderSize(0),
            ),
            (
                &[0xCC, 8, 0x50, 0xC0, 0, 1, 0, 1],
                PacketError::UnknownType(5),
            ),
            (
                &[0xCC, 8, 0xF1, 0xC0, 0, 1, 0, 1],
                PacketError::UnknownType(15),
            ),
            (
                &[0xCC, 8, 0x00, 0xC0, 0, 1, 0, 2],
                PacketError::BadOrder {
                    order: 2,
                    flags: 0xC0,
                },
            ),
            (
                &[0xCC, 8, 0x00, 0x80, 0, 1, 0, 0],
                PacketError::BadOrder {
                    order: 0,
                    flags: 0x80,
                },
            ),
            (
                &[0xCC, 8, 0x10, 0x00, 0, 1, 0, 0],
                PacketError::BadOrder { order: 0, flags: 0 },
            ),
            (&too_long, PacketError::PayloadTooLong { len: 1465 }),
        ];
        for (bytes, want) in table {
            assert_eq!(Packet::new_checked(bytes), Err(*want), "{bytes:02x?}");
        }
    }

    #[test]
    fn emit_refuses_what_parse_refuses() {
        let mut buf = [0u8; MAX_PACKET_LEN];
        let h = hdr(MsgType::Request, true, true, 1, 1);
        assert_eq!(
            h.emit(&[0; MAX_PAYLOAD + 1], &mut buf),
            Err(EmitError::PayloadTooLong { len: 1465 })
        );
        assert_eq!(
            h.emit(&[0; 4], &mut buf[..11]),
            Err(EmitError::BufferTooSmall { need: 12, have: 11 })
        );
        let bad = Header { policy: 16, ..h };
        assert_eq!(bad.emit(&[], &mut buf), Err(EmitError::BadPolicy(16)));
        let bad = hdr(MsgType::Request, true, true, 1, 3);
        assert_eq!(bad.emit(&[], &mut buf), Err(EmitError::BadOrder(3)));
        let bad = hdr(MsgType::Request, false, false, 1, 0);
        assert_eq!(bad.emit(&[], &mut buf), Err(EmitError::BadOrder(0)));
    }

    #[test]
    fn reserved_flag_bits_are_ignored_on_receive() {
        let p = Packet::new_checked(&[0xCC, 8, 0x10, 0xFF, 0, 9, 0, 1]).unwrap();
        assert!(p.is_first() && p.is_last());
        assert_eq!(p.count(), Some(1));
    }

    #[test]
    fn feedback_and_ack_payloads() {
        let fb = Feedback {
            req_id: 0x1234,
            port: 8000,
            ip: Ipv4Addr::new(10, 0, 0, 7),
        };
        let b = fb.to_bytes();
        assert_eq!(b, [0x12, 0x34, 0x1F, 0x40, 10, 0, 0, 7]);
        assert_eq!(Feedback::parse(&b), Ok(fb));
        assert_eq!(Feedback::parse(&b[..7]), Err(FeedbackError(7)));

        let mut buf = [0u8; MAX_PAYLOAD];
        let n = AckPayload::emit([3u16, 700].into_iter(), &mut buf);
        assert_eq!(&buf[..n], b"ACK\x00\x03\x02\xbc");
        let a = AckPayload::parse(&buf[..n]).unwrap();
        assert_eq!(a.missing().collect::<Vec<_>>(), vec![3, 700]);
        assert_eq!(AckPayload::parse(b"ACK").unwrap().missing().count(), 0);
        for bad in [&b"AC"[..], b"ACX", b"ACK\x00", b"DROP"] {
            assert_eq!(AckPayload::parse(bad), Err(AckError(bad.len())));
        }
        let n = AckPayload::emit(0..u16::MAX, &mut buf);
        assert_eq!(n, 3 + 2 * MAX_ACK_INDICES);
    }

    #[test]
    fn message_split_table() {
        use MsgType::{Request as Q, Response as R};
        // (type, len, count, ranges (index, start, end) of some packets)
        type Row = (MsgType, usize, u16, &'static [(u16, usize, usize)]);
        let table: &[Row] = &[
            (Q, 0, 1, &[(0, 0, 0)]),
            (Q, 1464, 1, &[(0, 0, 1464)]),
            (Q, 1465, 2, &[(0, 0, 14), (1, 14, 1465)]),
            (Q, 14 + 1464, 2, &[(0, 0, 14), (1, 14, 1478)]),
            (Q, 14 + 1465, 3, &[(1, 14, 1478), (2, 1478, 1479)]),
            (R, 1465, 2, &[(0, 0, 1464), (1, 1464, 1465)]),
            (R, 2928, 2, &[(0, 0, 1464), (1, 1464, 2928)]),
            (R, 2929, 3, &[(2, 2928, 2929)]),
        ];
        for &(t, len, count, ranges) in table {
            assert_eq!(packet_count(t, len), Some(count), "{t:?} {len}");
            for &(i, s, e) in ranges {
                assert_eq!(packet_range(t, len, i), s..e, "{t:?} {len} {i}");
            }
            let covered: usize = (0..count).map(|i| packet_range(t, len, i).len()).sum();
            assert_eq!(covered, len);
        }
        assert_eq!(packet_count(R, 65535 * 1464), Some(65535));
        assert_eq!(packet_count(R, 65535 * 1464 + 1), None);
    }
}
