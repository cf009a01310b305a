//! What a receiving lane daemon puts in an X-R message: a fixed header
//! saying where a chunk came from and when, then the chunk's bytes.
//!
//! | offset | bytes | field |
//! |---|---|---|
//! | 0 | 1 | producer: the sending application's id (low byte) |
//! | 1 | 8 | seq: the chunk's sequence number in its frame's stream |
//! | 9 | 8 | send time: the sender's stamp, ns (`CLOCK_REALTIME`) |
//! | 17 | 8 | receive time: the receiver's stamp, ns |
//! | 25 | rest | the chunk's data |
//!
//! Every integer is big-endian. The lane daemon writes it
//! ([`DeliveryHeader::write`], no allocation: it fills the caller's
//! buffer); an application reads it ([`DeliveryHeader::parse`], which
//! checks the length before it reads a field).

/// Bytes before the chunk data.
pub const HEADER_LEN: usize = 25;

/// The fields of a delivery header.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DeliveryHeader {
    /// The sending application's id (low byte).
    pub producer: u8,
    /// The chunk's sequence number.
    pub seq: u64,
    /// The sender's send stamp, ns.
    pub send_time: u64,
    /// The receiver's receive stamp, ns.
    pub rx_time: u64,
}

/// Why a message or a buffer does not fit a delivery.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DeliveryError {
    /// The message is shorter than the header.
    #[error("an X-R message of {0} bytes is shorter than the {HEADER_LEN}-byte delivery header")]
    Short(usize),
    /// The buffer cannot hold the header and the data.
    #[error("a delivery of {needed} bytes does not fit a buffer of {have}")]
    NoRoom {
        /// Bytes the message needs.
        needed: usize,
        /// Bytes the buffer has.
        have: usize,
    },
}

impl DeliveryHeader {
    /// Writes the header and `data` at the start of `out`; returns the
    /// message's length.
    pub fn write(&self, data: &[u8], out: &mut [u8]) -> Result<usize, DeliveryError> {
        let n = HEADER_LEN + data.len();
        if out.len() < n {
            return Err(DeliveryError::NoRoom {
                needed: n,
                have: out.len(),
            });
        }
        out[0] = self.producer;
        out[1..9].copy_from_slice(&self.seq.to_be_bytes());
        out[9..17].copy_from_slice(&self.send_time.to_be_bytes());
        out[17..25].copy_from_slice(&self.rx_time.to_be_bytes());
        out[HEADER_LEN..n].copy_from_slice(data);
        Ok(n)
    }

    /// The header of `msg` and the data after it.
    pub fn parse(msg: &[u8]) -> Result<(DeliveryHeader, &[u8]), DeliveryError> {
        if msg.len() < HEADER_LEN {
            return Err(DeliveryError::Short(msg.len()));
        }
        let word = |at: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&msg[at..at + 8]);
            u64::from_be_bytes(b)
        };
        let h = DeliveryHeader {
            producer: msg[0],
            seq: word(1),
            send_time: word(9),
            rx_time: word(17),
        };
        Ok((h, &msg[HEADER_LEN..]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_written_parses_back() {
        let cases: &[(DeliveryHeader, &[u8])] = &[
            (DeliveryHeader::default(), b""),
            (
                DeliveryHeader {
                    producer: 7,
                    seq: 1,
                    send_time: 2,
                    rx_time: 3,
                },
                b"x",
            ),
            (
                DeliveryHeader {
                    producer: 0xff,
                    seq: u64::MAX,
                    send_time: 0x0102_0304_0506_0708,
                    rx_time: u64::MAX - 1,
                },
                &[0xa5; 1400],
            ),
        ];
        let mut buf = vec![0u8; HEADER_LEN + 1400];
        for &(h, data) in cases {
            let n = h.write(data, &mut buf).expect("room");
            assert_eq!(n, HEADER_LEN + data.len());
            let (back, rest) = DeliveryHeader::parse(&buf[..n]).expect("parse");
            assert_eq!((back, rest), (h, data));
        }
    }

    #[test]
    fn the_layout_is_big_endian_at_fixed_offsets() {
        let h = DeliveryHeader {
            producer: 9,
            seq: 0x0102_0304_0506_0708,
            send_time: 0x1112_1314_1516_1718,
            rx_time: 0x2122_2324_2526_2728,
        };
        let mut buf = [0u8; HEADER_LEN + 2];
        h.write(b"ab", &mut buf).expect("room");
        assert_eq!(buf[0], 9);
        assert_eq!(buf[1..9], [1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(buf[9..17], [0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18]);
        assert_eq!(
            buf[17..25],
            [0x21, 0x22, 0x23, 0x24, 0x25, 0x26, 0x27, 0x28]
        );
        assert_eq!(&buf[25..], b"ab");
    }

    #[test]
    fn short_messages_and_small_buffers_are_errors() {
        for len in [0, 1, HEADER_LEN - 1] {
            assert_eq!(
                DeliveryHeader::parse(&vec![0u8; len]),
                Err(DeliveryError::Short(len))
            );
        }
        let mut small = [0u8; HEADER_LEN + 2];
        assert_eq!(
            DeliveryHeader::default().write(b"abc", &mut small),
            Err(DeliveryError::NoRoom {
                needed: HEADER_LEN + 3,
                have: HEADER_LEN + 2
            })
        );
    }
}
