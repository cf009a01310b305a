//! Authenticated byte streams (TCP), sans I/O: a handshake that proves
//! the connecting side holds a group key, then frames whose header is
//! checked before the body's room is taken.
//!
//! ```text
//! acceptor  -> connector:  nonce: [u8; 16]                      (fresh per connection)
//! connector -> acceptor:   key id: u32 | sender: u64 | tag: u64  (HELLO_LEN bytes)
//!     tag = SipHash-2-4(key, "xlane stream hello" | nonce | key id | sender | receiver)
//! then, both ways the connector writes:
//!     frame = len: u32 | header tag: u64 | body (len bytes) | body tag: u64
//!     header tag = SipHash-2-4(session key, n | "H" | len)
//!     body tag   = SipHash-2-4(session key, n | "B" | len | body)
//!     session key = key.derive("xlane stream" | nonce | key id | sender | receiver)
//! ```
//!
//! `n` counts the connection's frames from 0. Because the nonce is the
//! acceptor's and new on every connection, a hello or frames recorded from
//! one connection open on no other; because `n` is in every tag, a frame
//! dropped, repeated or moved within a connection fails. The header tag
//! lets the acceptor refuse a declared length before it takes any room
//! for the body: without the key, nobody makes it allocate.
//!
//! As with datagrams, every member of a group holds its key, so the
//! handshake shuts out everyone outside the group; a member could still
//! claim another member's id.

use crate::{Key, KeyRing};
use std::hash::Hasher;

/// Bytes of the acceptor's nonce.
pub const NONCE_LEN: usize = 16;
/// Bytes of the connector's hello.
pub const HELLO_LEN: usize = 20;
/// Bytes of a frame's header: length and header tag.
pub const HEADER_LEN: usize = 12;
/// Bytes of a frame's body tag.
pub const BODY_TAG_LEN: usize = 8;

/// Why a stream was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum StreamError {
    /// The hello names a key id the ring does not hold.
    #[error("hello under key {0}, which is not known here")]
    Unkeyed(u32),
    /// The hello's tag does not match: no key, or replayed from another
    /// connection.
    #[error("forged hello (key {key}, sender {sender})")]
    ForgedHello {
        /// The key id claimed.
        key: u32,
        /// The sender claimed.
        sender: u64,
    },
    /// A frame's header or body tag does not match.
    #[error("forged frame {frame} of the connection")]
    ForgedFrame {
        /// The frame's number on the connection.
        frame: u64,
    },
    /// An authenticated header declares more than the receiver takes.
    #[error("frame of {len} bytes, more than the {max} taken")]
    TooLong {
        /// The declared length.
        len: u32,
        /// The limit.
        max: u32,
    },
}

fn hello_tag(key: &Key, nonce: &[u8; NONCE_LEN], key_id: u32, sender: u64, to: u64) -> u64 {
    let mut h = siphasher::sip::SipHasher24::new_with_key(key.bytes());
    h.write(b"xlane stream hello\0");
    h.write(nonce);
    h.write(&key_id.to_be_bytes());
    h.write(&sender.to_be_bytes());
    h.write(&to.to_be_bytes());
    h.finish()
}

fn session_key(key: &Key, nonce: &[u8; NONCE_LEN], key_id: u32, sender: u64, to: u64) -> Key {
    let mut ctx = [0u8; 12 + NONCE_LEN + 4 + 8 + 8];
    ctx[..12].copy_from_slice(b"xlane stream");
    ctx[12..28].copy_from_slice(nonce);
    ctx[28..32].copy_from_slice(&key_id.to_be_bytes());
    ctx[32..40].copy_from_slice(&sender.to_be_bytes());
    ctx[40..48].copy_from_slice(&to.to_be_bytes());
    key.derive(&ctx)
}

fn header_tag(key: &Key, n: u64, len: u32) -> u64 {
    let mut h = siphasher::sip::SipHasher24::new_with_key(key.bytes());
    h.write(&n.to_be_bytes());
    h.write(b"H");
    h.write(&len.to_be_bytes());
    h.finish()
}

fn body_tag(key: &Key, n: u64, body: &[u8]) -> u64 {
    let mut h = siphasher::sip::SipHasher24::new_with_key(key.bytes());
    h.write(&n.to_be_bytes());
    h.write(b"B");
    h.write(&(body.len() as u64).to_be_bytes());
    h.write(body);
    h.finish()
}

/// A fresh nonce from the kernel's random source.
pub fn nonce() -> std::io::Result<[u8; NONCE_LEN]> {
    Ok(*Key::random()?.bytes())
}

/// The connector's side: its hello for the acceptor's `nonce`, and the
/// sealer of the frames it writes on that connection.
pub fn connect(
    key_id: u32,
    key: &Key,
    sender: u64,
    to: u64,
    nonce: &[u8; NONCE_LEN],
) -> ([u8; HELLO_LEN], FrameSealer) {
    let mut hello = [0u8; HELLO_LEN];
    hello[..4].copy_from_slice(&key_id.to_be_bytes());
    hello[4..12].copy_from_slice(&sender.to_be_bytes());
    hello[12..].copy_from_slice(&hello_tag(key, nonce, key_id, sender, to).to_be_bytes());
    let sealer = FrameSealer {
        key: session_key(key, nonce, key_id, sender, to),
        n: 0,
    };
    (hello, sealer)
}

/// The acceptor's side: checks `hello` (for receiver `me`, after sending
/// `nonce`); returns the sender it proves and the opener of its frames.
pub fn accept(
    ring: &KeyRing,
    me: u64,
    nonce: &[u8; NONCE_LEN],
    hello: &[u8; HELLO_LEN],
) -> Result<(u64, FrameOpener), StreamError> {
    let mut k = [0u8; 4];
    k.copy_from_slice(&hello[..4]);
    let key_id = u32::from_be_bytes(k);
    let mut s = [0u8; 8];
    s.copy_from_slice(&hello[4..12]);
    let sender = u64::from_be_bytes(s);
    let mut t = [0u8; 8];
    t.copy_from_slice(&hello[12..]);
    let key = ring.get(key_id).ok_or(StreamError::Unkeyed(key_id))?;
    if hello_tag(key, nonce, key_id, sender, me) != u64::from_be_bytes(t) {
        return Err(StreamError::ForgedHello {
            key: key_id,
            sender,
        });
    }
    let opener = FrameOpener {
        key: session_key(key, nonce, key_id, sender, me),
        n: 0,
    };
    Ok((sender, opener))
}

/// Seals one connection's frames, in order.
pub struct FrameSealer {
    key: Key,
    n: u64,
}

impl std::fmt::Debug for FrameSealer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FrameSealer")
            .field("n", &self.n)
            .finish_non_exhaustive()
    }
}

impl FrameSealer {
    /// Writes the next frame of `body` into `out` (cleared first): header,
    /// body, body tag. `body` is at most `u32::MAX` bytes (callers bound
    /// it far lower).
    pub fn seal(&mut self, body: &[u8], out: &mut Vec<u8>) {
        let len = u32::try_from(body.len()).unwrap_or(u32::MAX);
        out.clear();
        out.reserve(HEADER_LEN + body.len() + BODY_TAG_LEN);
        out.extend_from_slice(&len.to_be_bytes());
        out.extend_from_slice(&header_tag(&self.key, self.n, len).to_be_bytes());
        out.extend_from_slice(body);
        out.extend_from_slice(&body_tag(&self.key, self.n, body).to_be_bytes());
        self.n += 1;
    }
}

/// Opens one connection's frames, in order: [`FrameOpener::header`]
/// before the body is read, [`FrameOpener::body`] after.
pub struct FrameOpener {
    key: Key,
    n: u64,
}

impl std::fmt::Debug for FrameOpener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FrameOpener")
            .field("n", &self.n)
            .finish_non_exhaustive()
    }
}

impl FrameOpener {
    /// The body length the next frame's `header` declares, once its tag
    /// holds and the length is at most `max`.
    pub fn header(&self, header: &[u8; HEADER_LEN], max: u32) -> Result<u32, StreamError> {
        let mut l = [0u8; 4];
        l.copy_from_slice(&header[..4]);
        let len = u32::from_be_bytes(l);
        let mut t = [0u8; 8];
        t.copy_from_slice(&header[4..]);
        if header_tag(&self.key, self.n, len) != u64::from_be_bytes(t) {
            return Err(StreamError::ForgedFrame { frame: self.n });
        }
        if len > max {
            return Err(StreamError::TooLong { len, max });
        }
        Ok(len)
    }

    /// Checks the frame's `body` (as long as its header said) and its
    /// `tag`; the next frame is expected after it.
    pub fn body(&mut self, body: &[u8], tag: &[u8; BODY_TAG_LEN]) -> Result<(), StreamError> {
        if body_tag(&self.key, self.n, body) != u64::from_be_bytes(*tag) {
            return Err(StreamError::ForgedFrame { frame: self.n });
        }
        self.n += 1;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const K: [u8; 16] = [7; 16];

    fn ring() -> KeyRing {
        KeyRing::from_pairs(&[(1, Key::from_bytes(K))])
    }

    /// Opens one whole frame as a receiver would: header, then body.
    fn open(o: &mut FrameOpener, f: &[u8]) -> Result<Vec<u8>, StreamError> {
        let mut h = [0u8; HEADER_LEN];
        h.copy_from_slice(&f[..HEADER_LEN]);
        let len = o.header(&h, 1 << 20)? as usize;
        let body = &f[HEADER_LEN..HEADER_LEN + len];
        let mut t = [0u8; BODY_TAG_LEN];
        t.copy_from_slice(&f[HEADER_LEN + len..]);
        o.body(body, &t)?;
        Ok(body.to_vec())
    }

    #[test]
    fn a_hello_opens_only_at_its_connection_and_receiver() {
        let key = Key::from_bytes(K);
        let nonce = [3u8; NONCE_LEN];
        let (hello, _) = connect(1, &key, 2, 1, &nonce);
        assert_eq!(accept(&ring(), 1, &nonce, &hello).unwrap().0, 2);
        // (what differs, what the acceptor says)
        let other_nonce = [4u8; NONCE_LEN];
        let (wrong_key, _) = connect(1, &Key::from_bytes([8; 16]), 2, 1, &nonce);
        let mut claimed = hello;
        claimed[11] = 3;
        let (unknown, _) = connect(9, &key, 2, 1, &nonce);
        // (what differs, receiver, nonce, hello, refusal)
        type Case = (
            &'static str,
            u64,
            [u8; NONCE_LEN],
            [u8; HELLO_LEN],
            StreamError,
        );
        let cases: [Case; 5] = [
            (
                "another connection's nonce (a replay)",
                1,
                other_nonce,
                hello,
                StreamError::ForgedHello { key: 1, sender: 2 },
            ),
            (
                "meant for member 3",
                3,
                nonce,
                hello,
                StreamError::ForgedHello { key: 1, sender: 2 },
            ),
            (
                "without the group's key",
                1,
                nonce,
                wrong_key,
                StreamError::ForgedHello { key: 1, sender: 2 },
            ),
            (
                "sender changed",
                1,
                nonce,
                claimed,
                StreamError::ForgedHello { key: 1, sender: 3 },
            ),
            ("unknown key id", 1, nonce, unknown, StreamError::Unkeyed(9)),
        ];
        for (what, me, n, h, want) in cases {
            assert_eq!(accept(&ring(), me, &n, &h).err(), Some(want), "{what}");
        }
    }

    #[test]
    fn frames_open_in_order_and_every_change_is_refused() {
        let key = Key::from_bytes(K);
        let nonce = [5u8; NONCE_LEN];
        let (hello, mut s) = connect(1, &key, 2, 1, &nonce);
        let (_, mut o) = accept(&ring(), 1, &nonce, &hello).unwrap();
        let mut f0 = Vec::new();
        s.seal(b"snapshot", &mut f0);
        let mut f1 = Vec::new();
        s.seal(b"message", &mut f1);
        assert_eq!(f0.len(), HEADER_LEN + 8 + BODY_TAG_LEN);
        // (what is done to frame 1, what the opener says), each on a fresh
        // opener that has opened frame 0.
        type Case = (
            &'static str,
            Box<dyn Fn(&[u8], &[u8]) -> Vec<u8>>,
            StreamError,
        );
        let cases: Vec<Case> = vec![
            (
                "frame 0 again (a repeat)",
                Box::new(|f0, _| f0.to_vec()),
                StreamError::ForgedFrame { frame: 1 },
            ),
            (
                "body flipped",
                Box::new(|_, f1| {
                    let mut b = f1.to_vec();
                    b[HEADER_LEN] ^= 1;
                    b
                }),
                StreamError::ForgedFrame { frame: 1 },
            ),
            (
                "length grown",
                Box::new(|_, f1| {
                    let mut b = f1.to_vec();
                    b[0] = 0x0c;
                    b
                }),
                StreamError::ForgedFrame { frame: 1 },
            ),
            (
                "body tag flipped",
                Box::new(|_, f1| {
                    let mut b = f1.to_vec();
                    let last = b.len() - 1;
                    b[last] ^= 1;
                    b
                }),
                StreamError::ForgedFrame { frame: 1 },
            ),
        ];
        for (what, f, want) in cases {
            let (_, mut o) = accept(&ring(), 1, &nonce, &hello).unwrap();
            assert_eq!(open(&mut o, &f0).unwrap(), b"snapshot");
            let b = f(&f0, &f1);
            // A grown length fails at the header, before any body is read.
            let got = open(&mut o, &b);
            assert_eq!(got, Err(want), "{what}");
        }
        // Skipping frame 0 fails too; in order, both open.
        let (_, mut skip) = accept(&ring(), 1, &nonce, &hello).unwrap();
        assert_eq!(
            open(&mut skip, &f1),
            Err(StreamError::ForgedFrame { frame: 0 })
        );
        assert_eq!(open(&mut o, &f0).unwrap(), b"snapshot");
        assert_eq!(open(&mut o, &f1).unwrap(), b"message");
    }

    #[test]
    fn a_long_frame_is_refused_at_its_header() {
        let key = Key::from_bytes(K);
        let nonce = [6u8; NONCE_LEN];
        let (hello, mut s) = connect(1, &key, 2, 1, &nonce);
        let (_, o) = accept(&ring(), 1, &nonce, &hello).unwrap();
        let mut f = Vec::new();
        s.seal(&[0u8; 100], &mut f);
        let mut h = [0u8; HEADER_LEN];
        h.copy_from_slice(&f[..HEADER_LEN]);
        assert_eq!(
            o.header(&h, 99),
            Err(StreamError::TooLong { len: 100, max: 99 })
        );
        assert_eq!(o.header(&h, 100), Ok(100));
    }
}
