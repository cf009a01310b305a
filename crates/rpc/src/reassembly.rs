//! Reassembly of one multi-packet message, in any arrival order.

use crate::wire::{MsgType, Packet, MAX_PAYLOAD};

/// Why a packet does not fit the message it names. The packet is dropped and
/// counted; the message keeps what it had.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MsgError {
    /// The packet's index is not below the message's packet count.
    #[error("packet {index} of a {count}-packet message")]
    IndexOutOfRange {
        /// Index of the packet.
        index: u16,
        /// Packet count of the message.
        count: u16,
    },
    /// A first packet announces a count other than the one already known.
    #[error("count {got}, the message has {known}")]
    CountMismatch {
        /// Known count.
        known: u16,
        /// Count in this packet.
        got: u16,
    },
    /// A packet other than the last (and other than a request's REQ0) is not full.
    #[error("packet {index} carries {len} bytes, every packet but the last carries 1464")]
    ShortPacket {
        /// Index of the packet.
        index: u16,
        /// Its payload bytes.
        len: usize,
    },
    /// The message would be longer than the core accepts.
    #[error("message longer than {max} bytes")]
    TooLong {
        /// The core's limit.
        max: usize,
    },
}

/// Whether an accepted packet was news.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Accepted {
    /// Stored.
    New,
    /// Already had it; nothing changed.
    Duplicate,
}

/// One message being put together. Packets are stored at their offsets as they
/// come; a bitmap says which are in. The buffer grows to the message's length
/// and keeps its capacity when reset, so a reused slot stops allocating.
#[derive(Debug)]
pub(crate) struct Reassembly {
    msg_type: MsgType,
    max_len: usize,
    buf: Vec<u8>,
    have: Vec<u64>,
    count: Option<u16>,
    /// Payload length of packet 0 (requests: REQ0 may be short).
    first_len: Option<usize>,
    /// Index of the packet with L, once seen.
    last: Option<u16>,
    /// Total length, once the last packet is in.
    len: Option<usize>,
    received: u32,
    highest: u16,
}

impl Reassembly {
    pub(crate) fn new(msg_type: MsgType, max_len: usize) -> Self {
        Reassembly {
            msg_type,
            max_len,
            buf: Vec::new(),
            have: Vec::new(),
            count: None,
            first_len: None,
            last: None,
            len: None,
            received: 0,
            highest: 0,
        }
    }

    pub(crate) fn reset(&mut self) {
        self.buf.clear();
        self.have.clear();
        self.count = None;
        self.first_len = None;
        self.last = None;
        self.len = None;
        self.received = 0;
        self.highest = 0;
    }

    /// Forgets the message; gives its buffer back if it grew past `keep` bytes.
    pub(crate) fn release(&mut self, keep: usize) {
        self.reset();
        if self.buf.capacity() > keep {
            self.buf = Vec::new();
        }
    }

    /// Packets received so far.
    pub(crate) fn received(&self) -> u32 {
        self.received
    }

    /// Packet count, if the first packet (or a consistent last one) told.
    pub(crate) fn count(&self) -> Option<u16> {
        self.count.or(self.last.map(|l| l + 1))
    }

    fn offset(&self, index: u16) -> Option<usize> {
        if index == 0 {
            return Some(0);
        }
        let base = match self.msg_type {
            // REQ0's length is learnt from REQ0, which opens every request.
            MsgType::Request => self.first_len?,
            _ => MAX_PAYLOAD,
        };
        Some(base + (index as usize - 1) * MAX_PAYLOAD)
    }

    fn has(&self, i: u16) -> bool {
        let (w, b) = (i as usize / 64, i as usize % 64);
        self.have.get(w).is_some_and(|x| x & (1 << b) != 0)
    }

    /// Stores `p` (already checked to belong to this message).
    pub(crate) fn accept(&mut self, p: &Packet<'_>) -> Result<Accepted, MsgError> {
        let index = p.index();
        let payload = p.payload();
        if let Some(c) = p.count() {
            match self.count() {
                Some(k) if k != c => return Err(MsgError::CountMismatch { known: k, got: c }),
                _ => {}
            }
            if let Some(h) = (self.received > 0).then_some(self.highest) {
                if h >= c {
                    return Err(MsgError::IndexOutOfRange { index: h, count: c });
                }
            }
        }
        if let Some(c) = self.count() {
            if index >= c {
                return Err(MsgError::IndexOutOfRange { index, count: c });
            }
            if p.is_last() && index + 1 != c {
                return Err(MsgError::CountMismatch {
                    known: c,
                    got: index + 1,
                });
            }
        }
        if self.has(index) {
            return Ok(Accepted::Duplicate);
        }
        let first_is_short = index == 0 && self.msg_type == MsgType::Request;
        if !p.is_last() && !first_is_short && payload.len() != MAX_PAYLOAD {
            return Err(MsgError::ShortPacket {
                index,
                len: payload.len(),
            });
        }
        let Some(off) = (if index == 0 {
            Some(0)
        } else {
            self.offset(index)
        }) else {
            // A REQn before REQ0: the cores never create a request without REQ0.
            return Err(MsgError::IndexOutOfRange { index, count: 0 });
        };
        let end = off + payload.len();
        if end > self.max_len {
            return Err(MsgError::TooLong { max: self.max_len });
        }
        if let Some(len) = self.len {
            if end > len {
                return Err(MsgError::TooLong { max: len });
            }
        }
        if self.buf.len() < end {
            // Grow once to the announced size (bounded by the limit), not by
            // doubling: a slot reused for messages of that size stays put.
            let c = p.count().or(self.count()).unwrap_or(0) as usize;
            let target = (c * MAX_PAYLOAD).min(self.max_len).max(end);
            if self.buf.capacity() < target {
                self.buf.reserve_exact(target - self.buf.len());
            }
            self.buf.resize(end, 0);
        }
        self.buf[off..end].copy_from_slice(payload);
        let w = index as usize / 64;
        if self.have.len() <= w {
            self.have.resize(w + 1, 0);
        }
        self.have[w] |= 1 << (index as usize % 64);
        self.received += 1;
        self.highest = self.highest.max(index);
        if let Some(c) = p.count() {
            self.count = Some(c);
        }
        if index == 0 {
            self.first_len = Some(payload.len());
        }
        if p.is_last() {
            self.last = Some(index);
            self.len = Some(end);
        }
        Ok(Accepted::New)
    }

    /// Every packet is in.
    pub(crate) fn is_complete(&self) -> bool {
        matches!(self.count(), Some(c) if self.received == c as u32) && self.len.is_some()
    }

    /// The message (complete or not: the bytes stored so far).
    pub(crate) fn message(&self) -> &[u8] {
        &self.buf[..self.len.unwrap_or(self.buf.len()).min(self.buf.len())]
    }

    /// Indices still missing below the known bound (the count, else one past
    /// the highest index seen), in increasing order.
    pub(crate) fn missing(&self) -> impl Iterator<Item = u16> + '_ {
        let bound = self.count().unwrap_or(if self.received == 0 {
            0
        } else {
            self.highest + 1
        });
        (0..bound).filter(move |&i| !self.has(i))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{packet_count, packet_range, Header, MAX_PACKET_LEN};

    fn packets(t: MsgType, msg: &[u8]) -> Vec<Vec<u8>> {
        let n = packet_count(t, msg.len()).unwrap();
        (0..n)
            .map(|i| {
                let mut b = vec![0u8; MAX_PACKET_LEN];
                let h = Header::for_packet(t, 0, 9, i, n);
                let len = h.emit(&msg[packet_range(t, msg.len(), i)], &mut b).unwrap();
                b.truncate(len);
                b
            })
            .collect()
    }

    #[test]
    fn every_order_reassembles() {
        let msg: Vec<u8> = (0..5000u32).map(|i| (i * 7) as u8).collect();
        for t in [MsgType::Request, MsgType::Response] {
            let ps = packets(t, &msg);
            let n = ps.len();
            // Requests always start with REQ0; replies in any order.
            let orders: Vec<Vec<usize>> = match t {
                MsgType::Request => vec![(0..n).collect(), [0, 4, 2, 3, 1].to_vec()],
                _ => vec![
                    (0..n).collect(),
                    (0..n).rev().collect(),
                    [2, 0, 3, 1].to_vec(),
                ],
            };
            for order in orders {
                let mut r = Reassembly::new(t, 1 << 16);
                for (k, &i) in order.iter().enumerate() {
                    let p = Packet::new_checked(&ps[i]).unwrap();
                    assert_eq!(r.accept(&p), Ok(Accepted::New));
                    assert_eq!(r.accept(&p), Ok(Accepted::Duplicate));
                    assert_eq!(r.is_complete(), k + 1 == n, "{t:?} {order:?}");
                }
                assert!(r.message() == &msg[..], "{t:?} {order:?}");
                assert_eq!(r.missing().count(), 0);
            }
        }
    }

    #[test]
    fn missing_lists_the_holes() {
        let msg = vec![1u8; 4 * MAX_PAYLOAD];
        let ps = packets(MsgType::Response, &msg);
        let mut r = Reassembly::new(MsgType::Response, 1 << 16);
        r.accept(&Packet::new_checked(&ps[2]).unwrap()).unwrap();
        assert_eq!(r.missing().collect::<Vec<_>>(), vec![0, 1]);
        r.accept(&Packet::new_checked(&ps[0]).unwrap()).unwrap();
        assert_eq!(r.missing().collect::<Vec<_>>(), vec![1, 3]);
    }

    #[test]
    fn inconsistent_packets_are_refused() {
        let msg = vec![1u8; 3 * MAX_PAYLOAD];
        let ps = packets(MsgType::Response, &msg);
        let mut buf = [0u8; MAX_PACKET_LEN];
        let mut r = Reassembly::new(MsgType::Response, 1 << 16);
        r.accept(&Packet::new_checked(&ps[0]).unwrap()).unwrap();
        // Index past the count.
        let h = Header::for_packet(MsgType::Response, 0, 9, 5, 9);
        let n = h.emit(&[0; 10], &mut buf).unwrap();
        assert_eq!(
            r.accept(&Packet::new_checked(&buf[..n]).unwrap()),
            Err(MsgError::IndexOutOfRange { index: 5, count: 3 })
        );
        // A short middle packet.
        let h = Header::for_packet(MsgType::Response, 0, 9, 1, 3);
        let n = h.emit(&[0; 10], &mut buf).unwrap();
        assert_eq!(
            r.accept(&Packet::new_checked(&buf[..n]).unwrap()),
            Err(MsgError::ShortPacket { index: 1, len: 10 })
        );
        // Another count.
        let h = Header::for_packet(MsgType::Response, 0, 9, 0, 4);
        let n = h.emit(&[0; MAX_PAYLOAD], &mut buf).unwrap();
        assert_eq!(
            r.accept(&Packet::new_checked(&buf[..n]).unwrap()),
            Err(MsgError::CountMismatch { known: 3, got: 4 })
        );
        // Longer than allowed.
        let mut small = Reassembly::new(MsgType::Response, 2000);
        assert_eq!(
            small.accept(&Packet::new_checked(&ps[1]).unwrap()),
            Err(MsgError::TooLong { max: 2000 })
        );
        assert!(!r.is_complete());
    }
}
