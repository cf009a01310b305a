//! # xlane-auth: authenticated datagrams, sans I/O
//!
//! Lane frames, X-FD heartbeats and raft datagrams are accepted by their
//! source address alone unless they carry a MAC: anyone on the network
//! could keep a dead peer "alive" with a spoofed heartbeat. This crate
//! seals a datagram with a trailer and opens it again, before any
//! decoding of the datagram itself:
//!
//! ```text
//! datagram = payload | key id: u32 | sender: u32 | seq: u64 | tag: u64   (big-endian)
//! tag      = SipHash-2-4(key, payload | key id | sender | seq | receiver: u32)
//! ```
//!
//! The receiver is in the tag but not on the wire: a datagram sealed for
//! one member opens at no other (a member's id; [`ANY_RECEIVER`] for what a
//! whole group receives, as multicast heartbeats).
//!
//! * **The MAC.** SipHash-2-4 (the `siphasher` crate) with a 128-bit key
//!   and a 64-bit tag. It was designed as a MAC for short inputs: on a
//!   100-byte datagram it costs tens of nanoseconds, where HMAC-SHA-256
//!   costs several hundred, and lane frames are 60–200 bytes. A 64-bit
//!   tag means one forgery in 2⁶⁴ tries, and every try is a datagram on
//!   the wire.
//! * **Keys.** A [`KeyRing`] maps key ids to keys: per tunnel or per group,
//!   handed out with the grant, or from a cluster key file
//!   ([`KeyRing::from_toml`]). A group's members share its key, so the MAC
//!   shuts out everyone outside the group; a member could still speak for
//!   another member of its group.
//! * **Replay.** `seq` grows strictly per sender and key: [`Sealer`] takes
//!   the larger of the last one plus one and the caller's clock (ns), so a
//!   sender that restarts goes on above where it was. [`Opener`] keeps a
//!   window of the last 64 sequence numbers per (key, sender) and refuses
//!   a datagram seen before or older than the window.
//! * **Counted and dropped.** [`Opener::open`] returns the payload or an
//!   [`AuthError`]; every refusal is counted by kind ([`AuthStats`]).
//!
//! No allocation after construction; bounded work per datagram (one
//! SipHash over it, one table lookup in at most [`MAX_SENDERS`] entries).
//!
//! TCP connections (X-Raft's side channel) use [`stream`]: a handshake on
//! a nonce of the accepting side, then frames whose length is
//! authenticated before their body is read.
#![warn(missing_docs)]
#![forbid(unsafe_code)]

mod keys;
mod replay;
pub mod stream;

pub use keys::{Key, KeyFileError, KeyRing, KEY_LEN};
pub use replay::{ReplayWindow, Verdict, WINDOW};

use std::hash::Hasher;

/// Bytes of the trailer: key id, sender, sequence, tag.
pub const TRAILER_LEN: usize = 24;
/// Most (key, sender) pairs an [`Opener`] tracks.
pub const MAX_SENDERS: usize = 1024;
/// The receiver of a datagram for every member of a group.
pub const ANY_RECEIVER: u32 = 0;

/// Why a datagram was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    /// Shorter than the trailer: no MAC at all.
    #[error("{0} bytes: too short to carry a MAC")]
    Unsealed(usize),
    /// A key id this ring does not hold.
    #[error("key {0} is not known here")]
    Unkeyed(u32),
    /// The tag does not match: forged, or corrupted.
    #[error("bad MAC (key {key}, sender {sender})")]
    Forged {
        /// The key id claimed.
        key: u32,
        /// The sender claimed.
        sender: u32,
    },
    /// Seen before, or older than the window.
    #[error("replayed (key {key}, sender {sender}, seq {seq})")]
    Replayed {
        /// The key id.
        key: u32,
        /// The sender.
        sender: u32,
        /// The sequence number.
        seq: u64,
    },
    /// A new sender while the table is full.
    #[error("more than {MAX_SENDERS} senders")]
    TooManySenders,
}

/// Refusals by kind, and datagrams accepted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AuthStats {
    /// Accepted.
    pub accepted: u64,
    /// Too short to carry a MAC.
    pub unsealed: u64,
    /// Unknown key id.
    pub unkeyed: u64,
    /// Bad tag.
    pub forged: u64,
    /// Replayed or too old.
    pub replayed: u64,
    /// A new sender with the table full.
    pub too_many_senders: u64,
}

impl AuthStats {
    /// Every refusal.
    pub fn refused(&self) -> u64 {
        self.unsealed + self.unkeyed + self.forged + self.replayed + self.too_many_senders
    }
}

fn tag(key: &Key, payload: &[u8], header: &[u8; 16], to: u32) -> u64 {
    let mut h = siphasher::sip::SipHasher24::new_with_key(key.bytes());
    h.write(payload);
    h.write(header);
    h.write(&to.to_be_bytes());
    h.finish()
}

fn header(key: u32, sender: u32, seq: u64) -> [u8; 16] {
    let mut b = [0u8; 16];
    b[0..4].copy_from_slice(&key.to_be_bytes());
    b[4..8].copy_from_slice(&sender.to_be_bytes());
    b[8..16].copy_from_slice(&seq.to_be_bytes());
    b
}

/// Seals one sender's datagrams under one key.
#[derive(Clone)]
pub struct Sealer {
    key_id: u32,
    key: Key,
    sender: u32,
    seq: u64,
}

impl std::fmt::Debug for Sealer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sealer")
            .field("key_id", &self.key_id)
            .field("sender", &self.sender)
            .field("seq", &self.seq)
            .finish_non_exhaustive()
    }
}

/// The buffer has no room for the trailer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{have} bytes of buffer, {need} needed for the payload and its MAC")]
pub struct NoRoom {
    /// The buffer's length.
    pub have: usize,
    /// Payload plus trailer.
    pub need: usize,
}

impl Sealer {
    /// Sender `sender` sealing with key `key_id`.
    pub fn new(key_id: u32, key: Key, sender: u32) -> Sealer {
        Sealer {
            key_id,
            key,
            sender,
            seq: 0,
        }
    }

    /// The last sequence number used.
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// Appends the trailer to the `len`-byte payload at the start of `buf`
    /// for receiver `to` (or [`ANY_RECEIVER`]) at `now` (ns, any clock that
    /// does not go back across restarts, such as `CLOCK_REALTIME`); returns
    /// the sealed length.
    pub fn seal(&mut self, buf: &mut [u8], len: usize, to: u32, now: u64) -> Result<usize, NoRoom> {
        let need = len + TRAILER_LEN;
        if buf.len() < need {
            return Err(NoRoom {
                have: buf.len(),
                need,
            });
        }
        self.seq = (self.seq + 1).max(now);
        let h = header(self.key_id, self.sender, self.seq);
        let t = tag(&self.key, &buf[..len], &h, to);
        buf[len..len + 16].copy_from_slice(&h);
        buf[len + 16..need].copy_from_slice(&t.to_be_bytes());
        Ok(need)
    }
}

/// Seals the `len`-byte payload in `buf` with `sealer`, if there is one
/// (see [`Sealer::seal`]); returns the length to send: sealed, or `len`
/// as it was without a sealer. Callers size `buf` for the trailer; if it
/// has no room, the payload goes unsealed and receivers refuse it.
pub fn seal_if_keyed(
    sealer: Option<&mut Sealer>,
    buf: &mut [u8],
    len: usize,
    to: u32,
    now: u64,
) -> usize {
    sealer.map_or(len, |s| s.seal(buf, len, to, now).unwrap_or(len))
}

/// Opens datagrams sealed under the keys of its ring.
#[derive(Debug, Clone)]
pub struct Opener {
    ring: KeyRing,
    windows: Vec<((u32, u32), ReplayWindow)>,
    stats: AuthStats,
}

/// A datagram that opened: its payload, and who sealed it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Opened<'a> {
    /// The payload, without the trailer.
    pub payload: &'a [u8],
    /// The key id.
    pub key: u32,
    /// The sender.
    pub sender: u32,
    /// The sequence number.
    pub seq: u64,
}

impl Opener {
    /// An opener for `ring`'s keys. Allocates its sender table here.
    pub fn new(ring: KeyRing) -> Opener {
        Opener {
            ring,
            windows: Vec::with_capacity(MAX_SENDERS),
            stats: AuthStats::default(),
        }
    }

    /// The counters.
    pub fn stats(&self) -> AuthStats {
        self.stats
    }

    /// Accept `key` under `id` from now on (e.g. a tunnel granted since;
    /// replaces a key of the same id).
    pub fn add_key(&mut self, id: u32, key: Key) {
        self.ring.insert(id, key);
    }

    /// Checks the trailer of `bytes` received by `me` (a datagram sealed
    /// for [`ANY_RECEIVER`] opens only where `me` is that too): a known
    /// key, the tag, a sequence number not seen before. Nothing of the payload is read but by the
    /// MAC. No allocation: the sender table's room was taken in
    /// [`Opener::new`].
    pub fn open<'a>(&mut self, bytes: &'a [u8], me: u32) -> Result<Opened<'a>, AuthError> {
        let r = self.check(bytes, me);
        match r {
            Ok(_) => self.stats.accepted += 1,
            Err(AuthError::Unsealed(_)) => self.stats.unsealed += 1,
            Err(AuthError::Unkeyed(_)) => self.stats.unkeyed += 1,
            Err(AuthError::Forged { .. }) => self.stats.forged += 1,
            Err(AuthError::Replayed { .. }) => self.stats.replayed += 1,
            Err(AuthError::TooManySenders) => self.stats.too_many_senders += 1,
        }
        r
    }

    fn check<'a>(&mut self, bytes: &'a [u8], me: u32) -> Result<Opened<'a>, AuthError> {
        let Some(len) = bytes.len().checked_sub(TRAILER_LEN) else {
            return Err(AuthError::Unsealed(bytes.len()));
        };
        let (payload, t) = bytes.split_at(len);
        let be32 = |i: usize| u32::from_be_bytes([t[i], t[i + 1], t[i + 2], t[i + 3]]);
        let be64 = |i: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&t[i..i + 8]);
            u64::from_be_bytes(b)
        };
        let (key, sender, seq, got) = (be32(0), be32(4), be64(8), be64(16));
        let k = self.ring.get(key).ok_or(AuthError::Unkeyed(key))?;
        if tag(k, payload, &header(key, sender, seq), me) != got {
            return Err(AuthError::Forged { key, sender });
        }
        let i = match self.windows.iter().position(|(id, _)| *id == (key, sender)) {
            Some(i) => i,
            None if self.windows.len() < MAX_SENDERS => {
                self.windows.push(((key, sender), ReplayWindow::default()));
                self.windows.len() - 1
            }
            None => return Err(AuthError::TooManySenders),
        };
        match self.windows[i].1.check_and_record(seq) {
            Verdict::Fresh => Ok(Opened {
                payload,
                key,
                sender,
                seq,
            }),
            Verdict::Seen | Verdict::TooOld => Err(AuthError::Replayed { key, sender, seq }),
        }
    }
}

/// What a daemon that receives `what` on `bind` without a key file says at
/// start: that anyone who reaches the port can `risk`, and to give every
/// `peer` the same key file. `None` on a loopback address (nothing outside
/// the host reaches it).
pub fn unkeyed_warning(
    what: &str,
    bind: std::net::SocketAddr,
    risk: &str,
    peer: &str,
) -> Option<String> {
    (!bind.ip().is_loopback()).then(|| {
        format!(
            "{what} on {bind}: not authenticated, so anyone who reaches this port can {risk}; \
             give every {peer} the same key file (--key-file)"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ring() -> KeyRing {
        KeyRing::from_pairs(&[(1, Key::from_bytes([7; 16])), (2, Key::from_bytes([9; 16]))])
    }

    #[test]
    fn a_sealed_datagram_opens_once_and_every_tampering_is_refused() {
        let mut s = Sealer::new(1, Key::from_bytes([7; 16]), 42);
        let mut o = Opener::new(ring());
        let mut buf = [0u8; 64];
        buf[..5].copy_from_slice(b"hello");
        let n = s.seal(&mut buf, 5, 3, 1_000).unwrap();
        assert_eq!(n, 5 + TRAILER_LEN);
        let sealed = buf[..n].to_vec();
        assert_eq!(
            o.open(&sealed, 4),
            Err(AuthError::Forged { key: 1, sender: 42 }),
            "sealed for 3, opened at 4"
        );
        let ok = o.open(&sealed, 3).unwrap();
        assert_eq!(
            (ok.payload, ok.key, ok.sender, ok.seq),
            (&b"hello"[..], 1, 42, 1_000)
        );
        // (what is done to the sealed bytes, what the opener says)
        type Case = (&'static str, Box<dyn Fn(&mut Vec<u8>)>, AuthError);
        let cases: Vec<Case> = vec![
            (
                "replayed as is",
                Box::new(|_| {}),
                AuthError::Replayed {
                    key: 1,
                    sender: 42,
                    seq: 1_000,
                },
            ),
            (
                "payload flipped",
                Box::new(|b| b[0] ^= 1),
                AuthError::Forged { key: 1, sender: 42 },
            ),
            (
                "sender changed",
                Box::new(|b| b[5 + 7] = 43),
                AuthError::Forged { key: 1, sender: 43 },
            ),
            (
                "seq moved on",
                Box::new(|b| b[5 + 15] ^= 0x40),
                AuthError::Forged { key: 1, sender: 42 },
            ),
            (
                "tag flipped",
                Box::new(|b| b[5 + 23] ^= 1),
                AuthError::Forged { key: 1, sender: 42 },
            ),
            (
                "other key id",
                Box::new(|b| b[5 + 3] = 2),
                AuthError::Forged { key: 2, sender: 42 },
            ),
            (
                "unknown key id",
                Box::new(|b| b[5 + 3] = 3),
                AuthError::Unkeyed(3),
            ),
            (
                "no trailer",
                Box::new(|b| b.truncate(5)),
                AuthError::Unsealed(5),
            ),
            ("empty", Box::new(|b| b.clear()), AuthError::Unsealed(0)),
        ];
        for (what, f, want) in cases {
            let mut b = sealed.clone();
            f(&mut b);
            assert_eq!(o.open(&b, 3), Err(want), "{what}");
        }
        let st = o.stats();
        assert_eq!(
            (st.accepted, st.replayed, st.forged, st.unkeyed, st.unsealed),
            (1, 1, 6, 1, 2)
        );
        assert_eq!(st.refused(), 10);
        // The next datagram opens; so does one from another sender.
        let n = s.seal(&mut buf, 5, 3, 999).unwrap();
        assert_eq!(
            o.open(&buf[..n], 3).unwrap().seq,
            1_001,
            "never below the last + 1"
        );
    }

    /// Which addresses get the start-up warning without a key.
    #[test]
    fn a_daemon_without_a_key_off_loopback_is_warned_about() {
        for (bind, warned) in [
            ("127.0.0.1:9000", false),
            ("127.0.0.2:9000", false),
            ("[::1]:9000", false),
            ("0.0.0.0:9000", true),
            ("10.0.0.1:9000", true),
            ("[::]:9000", true),
        ] {
            let w = unkeyed_warning("1Pipe datagrams", bind.parse().unwrap(), "lie", "peer");
            assert_eq!(w.is_some(), warned, "{bind}");
            assert!(
                w.is_none_or(|w| w.contains("1Pipe datagrams on ")
                    && w.contains(bind)
                    && w.contains("can lie;")
                    && w.contains("every peer")
                    && w.contains("--key-file")),
                "{bind}"
            );
        }
    }

    #[test]
    fn no_room_for_the_trailer_is_an_error() {
        let mut s = Sealer::new(1, Key::from_bytes([7; 16]), 1);
        let mut buf = [0u8; 30];
        assert_eq!(
            s.seal(&mut buf, 10, ANY_RECEIVER, 1),
            Err(NoRoom { have: 30, need: 34 })
        );
        assert_eq!(s.seal(&mut buf, 6, ANY_RECEIVER, 1), Ok(30));
    }

    #[test]
    fn the_sender_table_is_bounded() {
        let key = Key::from_bytes([7; 16]);
        let mut o = Opener::new(ring());
        let mut buf = [0u8; TRAILER_LEN];
        for sender in 0..MAX_SENDERS as u32 + 1 {
            let mut s = Sealer::new(1, key.clone(), sender);
            let n = s.seal(&mut buf, 0, ANY_RECEIVER, 1).unwrap();
            let r = o.open(&buf[..n], ANY_RECEIVER);
            if (sender as usize) < MAX_SENDERS {
                assert!(r.is_ok(), "sender {sender}");
            } else {
                assert_eq!(r, Err(AuthError::TooManySenders));
            }
        }
    }
}
