//! Heartbeat payload codecs.
//!
//! Two encodings, both fixed-size and big-endian, parsed without allocation:
//!
//! * [`HeartbeatPayload`] — the 20 data bytes of one lane chunk (producer
//!   [`FD_PRODUCER`]) inside a periodic multicast frame. The frame header
//!   already carries the tunnel, the sequence number and the send time.
//!
//!   ```text
//!    0     1     2       3      4               12              20
//!    +-----+-----+-------+------+---------------+---------------+
//!    | 'H' | ver | flags | rsvd |  incarnation  |    counter    |
//!    +-----+-----+-------+------+---------------+---------------+
//!   ```
//!
//! * [`PlainHeartbeat`] — a whole plain UDP datagram (the fixed-timeout and
//!   phi-accrual baselines run without the lane), carrying what the lane
//!   header would:
//!
//!   ```text
//!    0    2     3       4        8        16              24        32
//!    +----+-----+-------+--------+--------+---------------+---------+
//!    |"XH"| ver | flags | tunnel |  seq   |  incarnation  | counter |
//!    +----+-----+-------+--------+--------+---------------+---------+
//!   ```
//!
//! `flags` bit 0 ([`FLAG_COUNTER`]): `counter` holds the application's
//! liveness counter (otherwise no application counter is attached and the
//! receiver does not check progress). Other flag bits and `rsvd` must be 0.
//! `incarnation` identifies one run of the sender (its start time); a larger
//! incarnation means the sender restarted.

/// Producer id of heartbeat chunks inside lane frames.
pub const FD_PRODUCER: u8 = 0xFD;
/// Magic byte of [`HeartbeatPayload`].
pub const PAYLOAD_MAGIC: u8 = b'H';
/// Magic bytes of [`PlainHeartbeat`].
pub const PLAIN_MAGIC: [u8; 2] = *b"XH";
/// Codec version of both encodings.
pub const PAYLOAD_VERSION: u8 = 1;
/// Flag: the counter field is the application's liveness counter.
pub const FLAG_COUNTER: u8 = 0x01;
/// Length of [`HeartbeatPayload`] (fits a 26-byte chunk's 20 data bytes).
pub const PAYLOAD_LEN: usize = 20;
/// Length of [`PlainHeartbeat`].
pub const PLAIN_LEN: usize = 32;

/// Field offsets of both encodings.
pub mod field {
    /// Offsets inside [`super::HeartbeatPayload`].
    pub mod lane {
        /// Magic byte.
        pub const MAGIC: usize = 0;
        /// Version byte.
        pub const VERSION: usize = 1;
        /// Flags byte.
        pub const FLAGS: usize = 2;
        /// Reserved byte (0).
        pub const RESERVED: usize = 3;
        /// Incarnation, u64.
        pub const INCARNATION: core::ops::Range<usize> = 4..12;
        /// Counter, u64.
        pub const COUNTER: core::ops::Range<usize> = 12..20;
    }
    /// Offsets inside [`super::PlainHeartbeat`].
    pub mod plain {
        /// Magic bytes.
        pub const MAGIC: core::ops::Range<usize> = 0..2;
        /// Version byte.
        pub const VERSION: usize = 2;
        /// Flags byte.
        pub const FLAGS: usize = 3;
        /// Tunnel id, u32.
        pub const TUNNEL: core::ops::Range<usize> = 4..8;
        /// Sequence number, u64.
        pub const SEQ: core::ops::Range<usize> = 8..16;
        /// Incarnation, u64.
        pub const INCARNATION: core::ops::Range<usize> = 16..24;
        /// Counter, u64.
        pub const COUNTER: core::ops::Range<usize> = 24..32;
    }
}

/// Why bytes are not a heartbeat.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// Wrong length (both encodings have one fixed length).
    #[error("heartbeat of {len} B, expected {want} B")]
    Length {
        /// Length given.
        len: usize,
        /// The encoding's length.
        want: usize,
    },
    /// Wrong magic.
    #[error("bad heartbeat magic")]
    Magic,
    /// Unknown codec version.
    #[error("heartbeat version {0}, expected {PAYLOAD_VERSION}")]
    Version(u8),
    /// Flag bits this version does not define.
    #[error("unknown heartbeat flags {0:#04x}")]
    Flags(u8),
    /// A reserved byte is not zero.
    #[error("reserved heartbeat byte is {0:#04x}, must be 0")]
    Reserved(u8),
    /// A non-zero counter field without [`FLAG_COUNTER`] (not canonical).
    #[error("counter field set without the counter flag")]
    StrayCounter,
}

fn u64_at(b: &[u8], r: core::ops::Range<usize>) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[r]);
    u64::from_be_bytes(a)
}

fn u32_at(b: &[u8], r: core::ops::Range<usize>) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[r]);
    u32::from_be_bytes(a)
}

fn check_flags(flags: u8) -> Result<Option<()>, DecodeError> {
    if flags & !FLAG_COUNTER != 0 {
        return Err(DecodeError::Flags(flags));
    }
    Ok((flags & FLAG_COUNTER != 0).then_some(()))
}

/// The heartbeat carried in one lane chunk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HeartbeatPayload {
    /// The sender's run (its start time, ns); larger = newer.
    pub incarnation: u64,
    /// The application's liveness counter, if an application is attached.
    pub counter: Option<u64>,
}

impl HeartbeatPayload {
    /// Encodes into exactly [`PAYLOAD_LEN`] bytes. A `None` counter is sent as 0
    /// with [`FLAG_COUNTER`] clear.
    pub fn encode(&self) -> [u8; PAYLOAD_LEN] {
        use field::lane as f;
        let mut b = [0u8; PAYLOAD_LEN];
        b[f::MAGIC] = PAYLOAD_MAGIC;
        b[f::VERSION] = PAYLOAD_VERSION;
        b[f::FLAGS] = if self.counter.is_some() {
            FLAG_COUNTER
        } else {
            0
        };
        b[f::INCARNATION].copy_from_slice(&self.incarnation.to_be_bytes());
        b[f::COUNTER].copy_from_slice(&self.counter.unwrap_or(0).to_be_bytes());
        b
    }

    /// Decodes exactly [`PAYLOAD_LEN`] bytes. Never panics.
    pub fn decode(b: &[u8]) -> Result<Self, DecodeError> {
        use field::lane as f;
        if b.len() != PAYLOAD_LEN {
            return Err(DecodeError::Length {
                len: b.len(),
                want: PAYLOAD_LEN,
            });
        }
        if b[f::MAGIC] != PAYLOAD_MAGIC {
            return Err(DecodeError::Magic);
        }
        if b[f::VERSION] != PAYLOAD_VERSION {
            return Err(DecodeError::Version(b[f::VERSION]));
        }
        let has = check_flags(b[f::FLAGS])?;
        if b[f::RESERVED] != 0 {
            return Err(DecodeError::Reserved(b[f::RESERVED]));
        }
        let counter = u64_at(b, f::COUNTER);
        if has.is_none() && counter != 0 {
            // Canonical form only: without the flag the counter must be 0.
            return Err(DecodeError::StrayCounter);
        }
        Ok(HeartbeatPayload {
            incarnation: u64_at(b, f::INCARNATION),
            counter: has.map(|_| counter),
        })
    }
}

/// A heartbeat sent as a whole plain UDP datagram (the baselines).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PlainHeartbeat {
    /// Tunnel (here: heartbeat stream) id.
    pub tunnel: u32,
    /// Sequence number, increasing per datagram within an incarnation.
    pub seq: u64,
    /// The sender's run.
    pub incarnation: u64,
    /// The application's liveness counter, if an application is attached.
    pub counter: Option<u64>,
}

impl PlainHeartbeat {
    /// Encodes into exactly [`PLAIN_LEN`] bytes.
    pub fn encode(&self) -> [u8; PLAIN_LEN] {
        use field::plain as f;
        let mut b = [0u8; PLAIN_LEN];
        b[f::MAGIC].copy_from_slice(&PLAIN_MAGIC);
        b[f::VERSION] = PAYLOAD_VERSION;
        b[f::FLAGS] = if self.counter.is_some() {
            FLAG_COUNTER
        } else {
            0
        };
        b[f::TUNNEL].copy_from_slice(&self.tunnel.to_be_bytes());
        b[f::SEQ].copy_from_slice(&self.seq.to_be_bytes());
        b[f::INCARNATION].copy_from_slice(&self.incarnation.to_be_bytes());
        b[f::COUNTER].copy_from_slice(&self.counter.unwrap_or(0).to_be_bytes());
        b
    }

    /// Decodes exactly [`PLAIN_LEN`] bytes. Never panics.
    pub fn decode(b: &[u8]) -> Result<Self, DecodeError> {
        use field::plain as f;
        if b.len() != PLAIN_LEN {
            return Err(DecodeError::Length {
                len: b.len(),
                want: PLAIN_LEN,
            });
        }
        if b[f::MAGIC] != PLAIN_MAGIC {
            return Err(DecodeError::Magic);
        }
        if b[f::VERSION] != PAYLOAD_VERSION {
            return Err(DecodeError::Version(b[f::VERSION]));
        }
        let has = check_flags(b[f::FLAGS])?;
        let counter = u64_at(b, f::COUNTER);
        if has.is_none() && counter != 0 {
            return Err(DecodeError::StrayCounter);
        }
        Ok(PlainHeartbeat {
            tunnel: u32_at(b, f::TUNNEL),
            seq: u64_at(b, f::SEQ),
            incarnation: u64_at(b, f::INCARNATION),
            counter: has.map(|_| counter),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lane_round_trip() {
        for p in [
            HeartbeatPayload {
                incarnation: 0,
                counter: None,
            },
            HeartbeatPayload {
                incarnation: u64::MAX,
                counter: Some(0),
            },
            HeartbeatPayload {
                incarnation: 1_700_000_000_000_000_000,
                counter: Some(u64::MAX),
            },
        ] {
            let b = p.encode();
            assert_eq!(HeartbeatPayload::decode(&b), Ok(p));
        }
    }

    #[test]
    fn plain_round_trip() {
        let p = PlainHeartbeat {
            tunnel: 0xdead_beef,
            seq: 42,
            incarnation: 7,
            counter: Some(9),
        };
        assert_eq!(PlainHeartbeat::decode(&p.encode()), Ok(p));
        let q = PlainHeartbeat { counter: None, ..p };
        assert_eq!(PlainHeartbeat::decode(&q.encode()), Ok(q));
    }

    #[test]
    fn lane_refusals_table() {
        let good = HeartbeatPayload {
            incarnation: 5,
            counter: Some(3),
        }
        .encode();
        let with = |i: usize, v: u8| {
            let mut b = good;
            b[i] = v;
            b
        };
        let no_flag_nonzero_counter = {
            let mut b = good;
            b[field::lane::FLAGS] = 0;
            b
        };
        let cases: Vec<(&str, Vec<u8>, DecodeError)> = vec![
            (
                "empty",
                vec![],
                DecodeError::Length {
                    len: 0,
                    want: PAYLOAD_LEN,
                },
            ),
            (
                "short",
                good[..19].to_vec(),
                DecodeError::Length {
                    len: 19,
                    want: PAYLOAD_LEN,
                },
            ),
            (
                "long",
                [&good[..], &[0]].concat(),
                DecodeError::Length {
                    len: 21,
                    want: PAYLOAD_LEN,
                },
            ),
            ("magic", with(0, b'X').to_vec(), DecodeError::Magic),
            ("version", with(1, 2).to_vec(), DecodeError::Version(2)),
            ("flags", with(2, 0x81).to_vec(), DecodeError::Flags(0x81)),
            ("reserved", with(3, 1).to_vec(), DecodeError::Reserved(1)),
            (
                "counter without flag",
                no_flag_nonzero_counter.to_vec(),
                DecodeError::StrayCounter,
            ),
        ];
        for (name, bytes, want) in cases {
            assert_eq!(HeartbeatPayload::decode(&bytes), Err(want), "{name}");
        }
    }

    #[test]
    fn plain_refusals_table() {
        let good = PlainHeartbeat {
            tunnel: 1,
            seq: 2,
            incarnation: 3,
            counter: Some(4),
        }
        .encode();
        let with = |i: usize, v: u8| {
            let mut b = good;
            b[i] = v;
            b.to_vec()
        };
        let cases: Vec<(&str, Vec<u8>, DecodeError)> = vec![
            (
                "short",
                good[..31].to_vec(),
                DecodeError::Length {
                    len: 31,
                    want: PLAIN_LEN,
                },
            ),
            ("magic0", with(0, 0), DecodeError::Magic),
            ("magic1", with(1, 0), DecodeError::Magic),
            ("version", with(2, 0), DecodeError::Version(0)),
            ("flags", with(3, 2), DecodeError::Flags(2)),
            (
                "counter without flag",
                with(3, 0),
                DecodeError::StrayCounter,
            ),
        ];
        for (name, bytes, want) in cases {
            assert_eq!(PlainHeartbeat::decode(&bytes), Err(want), "{name}");
        }
    }

    #[test]
    fn fits_one_chunk() {
        assert!(PAYLOAD_LEN <= xlane_wire::Schema::Chunk26.data_capacity());
    }
}
