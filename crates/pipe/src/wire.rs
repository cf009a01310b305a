//! The 1Pipe header as a packet view: every packet carries the message's
//! timestamp and the two barriers (best effort and commit) the hops
//! rewrite.
//!
//! ```text
//!  0       1       2       3       4               8              12              16
//!  +-------+-------+-------+-------+---------------+---------------+---------------+
//!  | magic |version| kind  | flags |  src (u32)    |  dst (u32)    |  seq (u32)    |
//!  +-------+-------+-------+-------+---------------+---------------+---------------+
//!  | ts (u64)                      | barrier (u64)                 | commit (u64)  ...
//!  +-------------------------------+-------------------------------+---------------+
//!  16                              24                              32              40
//!  | payload (Data only): at most MAX_PAYLOAD bytes                                |
//! ```
//!
//! All integers big-endian. `ts` is the message timestamp (the sender's
//! clock, ns), never changed in flight; `barrier` and `commit` are lower
//! bounds on the timestamps still to come on the link the packet arrives
//! on: every hop replaces them with its own ([`crate::Aggregator`]).
//! `flags` bit 0 marks a reliable message (delivered at the commit
//! barrier); the other bits are written as zero and ignored on receive.

/// Bytes of the header.
pub const HEADER_LEN: usize = 40;
/// The first byte of every 1Pipe packet.
pub const MAGIC: u8 = 0x1E;
/// The version this crate speaks.
pub const VERSION: u8 = 1;
/// Most payload bytes of one packet: a 1500-byte MTU less IPv4, UDP and
/// the header.
pub const MAX_PAYLOAD: usize = 1500 - 20 - 8 - HEADER_LEN;

/// Flag bits.
pub mod flags {
    /// A reliable message: delivered once the commit barrier passes it.
    pub const RELIABLE: u8 = 0x01;
}

/// Byte offsets of the header fields.
pub mod field {
    /// A byte range.
    pub type Field = core::ops::Range<usize>;
    /// [`crate::wire::MAGIC`].
    pub const MAGIC: usize = 0;
    /// [`crate::wire::VERSION`].
    pub const VERSION: usize = 1;
    /// [`crate::wire::Kind`].
    pub const KIND: usize = 2;
    /// [`crate::wire::flags`].
    pub const FLAGS: usize = 3;
    /// Sending process.
    pub const SRC: Field = 4..8;
    /// Receiving process (0 on a beacon).
    pub const DST: Field = 8..12;
    /// Per (src, dst) sequence number of a message (and of its ACK/NAK).
    pub const SEQ: Field = 12..16;
    /// Message timestamp.
    pub const TS: Field = 16..24;
    /// Best-effort barrier.
    pub const BARRIER: Field = 24..32;
    /// Commit barrier.
    pub const COMMIT: Field = 32..40;
}

/// What a packet is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// A message (or the only packet of one) with its payload.
    Data,
    /// Barriers only, on an idle link (one hop).
    Beacon,
    /// Receiver to sender: message `seq` (timestamp `ts`) is held.
    Ack,
    /// Receiver to sender: message `seq` came below the barrier already
    /// used for delivery and was refused.
    Nak,
    /// Sender to receiver: drop message `seq` (its scattering is aborted).
    Recall,
}

impl Kind {
    fn code(self) -> u8 {
        match self {
            Kind::Data => 1,
            Kind::Beacon => 2,
            Kind::Ack => 3,
            Kind::Nak => 4,
            Kind::Recall => 5,
        }
    }

    fn from_code(c: u8) -> Option<Kind> {
        Some(match c {
            1 => Kind::Data,
            2 => Kind::Beacon,
            3 => Kind::Ack,
            4 => Kind::Nak,
            5 => Kind::Recall,
            _ => return None,
        })
    }
}

/// Why bytes are not a 1Pipe packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    /// Fewer bytes than a header.
    #[error("{0} bytes: shorter than the {HEADER_LEN}-byte 1Pipe header")]
    Short(usize),
    /// The first byte is not [`MAGIC`].
    #[error("magic {0:#04x}, not a 1Pipe packet")]
    Magic(u8),
    /// Another version.
    #[error("version {0}, this build speaks {VERSION}")]
    Version(u8),
    /// An unknown kind.
    #[error("unknown packet kind {0}")]
    Kind(u8),
    /// A payload on a packet that has none, or a data packet's payload
    /// longer than [`MAX_PAYLOAD`].
    #[error("{kind:?} packet with {len} payload bytes")]
    Payload {
        /// The kind.
        kind: Kind,
        /// Its payload length.
        len: usize,
    },
    /// The commit barrier above the best-effort barrier (a commit never
    /// passes what may still be sent).
    #[error("commit barrier {commit} above the barrier {barrier}")]
    CommitAboveBarrier {
        /// Best-effort barrier.
        barrier: u64,
        /// Commit barrier.
        commit: u64,
    },
    /// A buffer too small to write into.
    #[error("buffer of {have} bytes, {need} needed")]
    Buffer {
        /// Needed.
        need: usize,
        /// Given.
        have: usize,
    },
}

/// The header's fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Header {
    /// What the packet is.
    pub kind: Kind,
    /// A reliable message (or the ACK/NAK/recall of one).
    pub reliable: bool,
    /// Sending process.
    pub src: u32,
    /// Receiving process (0 on a beacon).
    pub dst: u32,
    /// Per (src, dst) sequence number.
    pub seq: u32,
    /// Message timestamp.
    pub ts: u64,
    /// Best-effort barrier.
    pub barrier: u64,
    /// Commit barrier.
    pub commit: u64,
}

impl Header {
    /// A beacon from `src` (0 for a hop) with these barriers.
    pub fn beacon(src: u32, barrier: u64, commit: u64) -> Header {
        Header {
            kind: Kind::Beacon,
            reliable: false,
            src,
            dst: 0,
            seq: 0,
            ts: 0,
            barrier,
            commit,
        }
    }

    /// Writes the header and `payload` into `buf`; returns the length.
    pub fn emit(&self, payload: &[u8], buf: &mut [u8]) -> Result<usize, WireError> {
        self.check(payload.len())?;
        let need = HEADER_LEN + payload.len();
        if buf.len() < need {
            return Err(WireError::Buffer {
                need,
                have: buf.len(),
            });
        }
        buf[field::MAGIC] = MAGIC;
        buf[field::VERSION] = VERSION;
        buf[field::KIND] = self.kind.code();
        buf[field::FLAGS] = if self.reliable { flags::RELIABLE } else { 0 };
        buf[field::SRC].copy_from_slice(&self.src.to_be_bytes());
        buf[field::DST].copy_from_slice(&self.dst.to_be_bytes());
        buf[field::SEQ].copy_from_slice(&self.seq.to_be_bytes());
        buf[field::TS].copy_from_slice(&self.ts.to_be_bytes());
        buf[field::BARRIER].copy_from_slice(&self.barrier.to_be_bytes());
        buf[field::COMMIT].copy_from_slice(&self.commit.to_be_bytes());
        buf[HEADER_LEN..need].copy_from_slice(payload);
        Ok(need)
    }

    fn check(&self, payload: usize) -> Result<(), WireError> {
        let ok = match self.kind {
            Kind::Data => payload <= MAX_PAYLOAD,
            _ => payload == 0,
        };
        if !ok {
            return Err(WireError::Payload {
                kind: self.kind,
                len: payload,
            });
        }
        if self.commit > self.barrier {
            return Err(WireError::CommitAboveBarrier {
                barrier: self.barrier,
                commit: self.commit,
            });
        }
        Ok(())
    }
}

/// A validated 1Pipe packet: checked once, read without further checks.
#[derive(Clone, Copy, Debug)]
pub struct Packet<'a> {
    header: Header,
    payload: &'a [u8],
}

fn be32(b: &[u8], f: field::Field) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[f]);
    u32::from_be_bytes(a)
}

fn be64(b: &[u8], f: field::Field) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[f]);
    u64::from_be_bytes(a)
}

impl<'a> Packet<'a> {
    /// Checks `bytes` (one datagram) and returns the view.
    pub fn new_checked(bytes: &'a [u8]) -> Result<Self, WireError> {
        if bytes.len() < HEADER_LEN {
            return Err(WireError::Short(bytes.len()));
        }
        if bytes[field::MAGIC] != MAGIC {
            return Err(WireError::Magic(bytes[field::MAGIC]));
        }
        if bytes[field::VERSION] != VERSION {
            return Err(WireError::Version(bytes[field::VERSION]));
        }
        let kind =
            Kind::from_code(bytes[field::KIND]).ok_or(WireError::Kind(bytes[field::KIND]))?;
        let header = Header {
            kind,
            reliable: bytes[field::FLAGS] & flags::RELIABLE != 0,
            src: be32(bytes, field::SRC),
            dst: be32(bytes, field::DST),
            seq: be32(bytes, field::SEQ),
            ts: be64(bytes, field::TS),
            barrier: be64(bytes, field::BARRIER),
            commit: be64(bytes, field::COMMIT),
        };
        let payload = &bytes[HEADER_LEN..];
        header.check(payload.len())?;
        Ok(Packet { header, payload })
    }

    /// The header.
    pub fn header(&self) -> &Header {
        &self.header
    }

    /// The payload (empty but on data packets).
    pub fn payload(&self) -> &'a [u8] {
        self.payload
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(kind: Kind) -> Header {
        Header {
            kind,
            reliable: true,
            src: 7,
            dst: 9,
            seq: 0xDEAD_BEEF,
            ts: 1_000_000_007,
            barrier: 1_000_000_000,
            commit: 999_999_000,
        }
    }

    #[test]
    fn every_kind_round_trips() {
        for kind in [Kind::Data, Kind::Beacon, Kind::Ack, Kind::Nak, Kind::Recall] {
            let payload: &[u8] = if kind == Kind::Data { b"hello" } else { b"" };
            let mut buf = [0u8; 128];
            let n = h(kind).emit(payload, &mut buf).unwrap();
            assert_eq!(n, HEADER_LEN + payload.len());
            let p = Packet::new_checked(&buf[..n]).unwrap();
            assert_eq!(*p.header(), h(kind));
            assert_eq!(p.payload(), payload);
        }
    }

    #[test]
    fn the_layout_is_as_documented() {
        let mut buf = [0u8; 64];
        let n = h(Kind::Ack).emit(b"", &mut buf).unwrap();
        let want: [u8; HEADER_LEN] = [
            0x1E, 1, 3, 1, 0, 0, 0, 7, 0, 0, 0, 9, 0xDE, 0xAD, 0xBE, 0xEF, //
            0, 0, 0, 0, 0x3B, 0x9A, 0xCA, 0x07, //
            0, 0, 0, 0, 0x3B, 0x9A, 0xCA, 0x00, //
            0, 0, 0, 0, 0x3B, 0x9A, 0xC6, 0x18,
        ];
        assert_eq!(&buf[..n], &want);
    }

    #[test]
    fn malformed_packets_get_their_error() {
        let mut good = [0u8; 64];
        let n = h(Kind::Data).emit(b"x", &mut good).unwrap();
        let good = &good[..n];
        let with = |i: usize, v: u8| {
            let mut b = good.to_vec();
            b[i] = v;
            b
        };
        let mut commit_high = good.to_vec();
        commit_high[field::COMMIT].copy_from_slice(&u64::MAX.to_be_bytes());
        let mut beacon_payload = with(field::KIND, 2);
        beacon_payload.push(0);
        let cases: Vec<(Vec<u8>, WireError)> = vec![
            (good[..39].to_vec(), WireError::Short(39)),
            (with(0, 0x45), WireError::Magic(0x45)),
            (with(1, 2), WireError::Version(2)),
            (with(2, 0), WireError::Kind(0)),
            (with(2, 6), WireError::Kind(6)),
            (
                beacon_payload,
                WireError::Payload {
                    kind: Kind::Beacon,
                    len: 2,
                },
            ),
            (
                commit_high,
                WireError::CommitAboveBarrier {
                    barrier: 1_000_000_000,
                    commit: u64::MAX,
                },
            ),
        ];
        for (bytes, want) in cases {
            assert_eq!(Packet::new_checked(&bytes).unwrap_err(), want, "{bytes:?}");
        }
        // Unknown flag bits are ignored.
        assert!(
            Packet::new_checked(&with(3, 0xFF))
                .unwrap()
                .header()
                .reliable
        );
        let big = vec![0u8; MAX_PAYLOAD + 1];
        assert!(matches!(
            h(Kind::Data).emit(&big, &mut [0u8; 2000]),
            Err(WireError::Payload { .. })
        ));
        assert!(matches!(
            h(Kind::Data).emit(b"abc", &mut [0u8; 42]),
            Err(WireError::Buffer { need: 43, have: 42 })
        ));
    }
}
