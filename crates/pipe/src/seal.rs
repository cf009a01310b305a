//! Authenticated 1Pipe datagrams on UDP: data, recalls, beacons, ACKs,
//! NAKs and the recovery protocol's control messages each carry
//! [`xlane_auth`]'s trailer (the group's key id, the sending socket's id,
//! a sequence number, a SipHash-2-4 tag) when the drivers are given the
//! group key, and one received is opened before anything parses it: a
//! forged, replayed or unkeyed datagram is dropped and counted
//! ([`crate::udp::DriverStats::unauthenticated`]).
//!
//! Sealing is link by link: a hop rewrites the barriers of what it
//! forwards, so it opens what comes in and seals what goes out with its
//! own sender id. The sender id is derived from the socket's address
//! ([`sender_id`]), which a restart keeps, so the sequence numbers of a
//! restarted process (the wall clock, ns) go on above its last ones.
//! Every member of the group holds the key: the MAC shuts out everyone
//! else, not a member speaking for another.
//!
//! A sealed datagram is [`TRAILER_LEN`] bytes longer: a full-size data
//! packet (`MAX_PAYLOAD`) then exceeds a 1 500-byte MTU and is fragmented
//! by IP.

use std::io;
use std::net::{SocketAddr, SocketAddrV4, UdpSocket};
use xlane_auth::{AuthStats, Key, KeyRing, Opener, Sealer, ANY_RECEIVER};

pub use xlane_auth::TRAILER_LEN;

/// The sender id of the socket at `addr`: 32 bits of a fixed PRF of its
/// address and port.
pub fn sender_id(addr: SocketAddrV4) -> u32 {
    let mut b = [0u8; 6];
    b[..4].copy_from_slice(&addr.ip().octets());
    b[4..].copy_from_slice(&addr.port().to_be_bytes());
    let k = Key::from_bytes([0; 16]).derive(&b);
    let x = k.bytes();
    u32::from_be_bytes([x[0], x[1], x[2], x[3]])
}

/// `CLOCK_REALTIME`, ns: the clock sequence numbers are taken from, so
/// that a restarted process's go on above its last ones.
fn wall_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// A driver's sealer and opener under the group key.
pub struct PipeSeal {
    sealer: Sealer,
    opener: Opener,
    scratch: Vec<u8>,
}

impl std::fmt::Debug for PipeSeal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PipeSeal")
            .field("sealer", &self.sealer)
            .field("stats", &self.opener.stats())
            .finish_non_exhaustive()
    }
}

/// The key id is not in the ring.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("key {0} is not in the key file")]
pub struct NoSuchKey(pub u32);

/// Why a seal could not be made for a socket.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    /// The key id is not in the ring.
    #[error(transparent)]
    NoSuchKey(NoSuchKey),
    /// The socket's address could not be read, or is not IPv4.
    #[error("the socket's address: {0}")]
    Socket(io::Error),
}

impl PipeSeal {
    /// [`PipeSeal::new`] as the (IPv4) socket `sock`.
    pub fn for_socket(ring: KeyRing, key_id: u32, sock: &UdpSocket) -> Result<PipeSeal, KeyError> {
        let local = local_v4(sock).map_err(KeyError::Socket)?;
        PipeSeal::new(ring, key_id, local).map_err(KeyError::NoSuchKey)
    }

    /// Seals with key `key_id` of `ring` as the socket at `local`; opens
    /// under every key of `ring`. Takes its room here.
    pub fn new(ring: KeyRing, key_id: u32, local: SocketAddrV4) -> Result<PipeSeal, NoSuchKey> {
        let key = ring.get(key_id).cloned().ok_or(NoSuchKey(key_id))?;
        Ok(PipeSeal {
            sealer: Sealer::new(key_id, key, sender_id(local)),
            opener: Opener::new(ring),
            scratch: vec![0u8; 64 << 10],
        })
    }

    /// `bytes` sealed (in the seal's own room); `None` if they do not fit
    /// a datagram.
    pub fn seal(&mut self, bytes: &[u8], now: u64) -> Option<&[u8]> {
        let room = self.scratch.get_mut(..bytes.len() + TRAILER_LEN)?;
        room[..bytes.len()].copy_from_slice(bytes);
        let n = self
            .sealer
            .seal(room, bytes.len(), ANY_RECEIVER, now)
            .ok()?;
        Some(&self.scratch[..n])
    }

    /// The payload length of the sealed datagram `bytes` (its payload is
    /// its first bytes), or `None` if it does not open (counted).
    pub fn open(&mut self, bytes: &[u8]) -> Option<usize> {
        self.opener
            .open(bytes, ANY_RECEIVER)
            .ok()
            .map(|o| o.payload.len())
    }

    /// The opener's counters by kind.
    pub fn stats(&self) -> AuthStats {
        self.opener.stats()
    }
}

/// The IPv4 address `sock` is bound to (an IPv6 one is an error).
pub(crate) fn local_v4(sock: &UdpSocket) -> io::Result<SocketAddrV4> {
    match sock.local_addr()? {
        SocketAddr::V4(a) => Ok(a),
        SocketAddr::V6(_) => Err(io::Error::other("an IPv6 socket")),
    }
}

/// Sends `bytes` to `to` on `sock`, sealed first if there is a seal (a
/// datagram too long to seal is an error, as one too long to send).
pub fn send(
    sock: &UdpSocket,
    seal: Option<&mut PipeSeal>,
    bytes: &[u8],
    to: SocketAddrV4,
) -> io::Result<usize> {
    match seal {
        None => sock.send_to(bytes, to),
        Some(s) => match s.seal(bytes, wall_ns()) {
            Some(b) => sock.send_to(b, to),
            None => Err(io::Error::other("too long to seal")),
        },
    }
}

/// The payload length of the received datagram `bytes`: all of it without
/// a seal; with one, its payload's if it opens, `None` if not (counted by
/// the seal).
pub fn opened(seal: Option<&mut PipeSeal>, bytes: &[u8]) -> Option<usize> {
    match seal {
        None => Some(bytes.len()),
        Some(s) => s.open(bytes),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ring() -> KeyRing {
        KeyRing::from_pairs(&[(1, Key::from_bytes([4; 16]))])
    }

    #[test]
    fn what_one_seals_the_other_opens_once() {
        let a: SocketAddrV4 = "10.0.0.1:9000".parse().unwrap();
        let b: SocketAddrV4 = "10.0.0.2:9000".parse().unwrap();
        assert_ne!(sender_id(a), sender_id(b));
        assert_eq!(sender_id(a), sender_id(a));
        let mut s = PipeSeal::new(ring(), 1, a).unwrap();
        let mut r = PipeSeal::new(ring(), 1, b).unwrap();
        let sealed = s.seal(b"1pipe datagram", 5).unwrap().to_vec();
        assert_eq!(sealed.len(), 14 + TRAILER_LEN);
        assert_eq!(r.open(&sealed), Some(14));
        // (what is received, why it is refused)
        let mut flipped = sealed.clone();
        flipped[0] ^= 1;
        let other = KeyRing::from_pairs(&[(1, Key::from_bytes([5; 16]))]);
        let forged = PipeSeal::new(other, 1, a)
            .unwrap()
            .seal(b"x", 6)
            .unwrap()
            .to_vec();
        for (bytes, what) in [
            (&sealed, "replayed"),
            (&flipped, "changed"),
            (&forged, "another key"),
            (&b"1pipe datagram".to_vec(), "unsealed"),
        ] {
            assert_eq!(r.open(bytes), None, "{what}");
        }
        let st = r.stats();
        assert_eq!((st.accepted, st.refused()), (1, 4), "{st:?}");
        assert_eq!(PipeSeal::new(ring(), 2, a).err(), Some(NoSuchKey(2)));
    }
}
