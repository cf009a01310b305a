//! The router on Linux sockets: [`RpcRouter`].
//!
//! REQ0s and FEEDBACKs come in on one UDP socket. A forwarded REQ0 leaves
//! on a raw IPv4 socket as a UDP datagram from the client's address and
//! port to the server, so the server answers the client directly, as
//! behind the C implementation's router (which rewrites only the
//! destination); the UDP checksum is computed, not zeroed. DROPs leave on
//! the UDP socket. The raw socket needs `CAP_NET_RAW` (root), and the
//! network must let a packet with the client's source address through
//! (loopback does; so does a namespace without strict reverse-path
//! filtering).

use super::{DriverStats, Io};
use crate::router::{Router, RouterConfig};
use crate::wire::MAX_PACKET_LEN;
use socket2::{Domain, Protocol, SockAddr, Socket, Type};
use std::io;
use std::net::{SocketAddr, SocketAddrV4};
use std::time::Duration;

/// IPv4 (20 bytes, no options) and UDP (8 bytes) headers.
const HEADERS: usize = 28;

/// An R2P2 router: a UDP socket for REQ0, FEEDBACK and DROP, a raw socket
/// for forwarding, and a [`Router`] core.
pub struct RpcRouter {
    io: Io,
    raw: Socket,
    core: Router,
    out: Vec<u8>,
}

impl RpcRouter {
    /// Binds `addr` (port 0 for an ephemeral one) and opens the raw socket.
    /// Fails with `PermissionDenied` without `CAP_NET_RAW`.
    pub fn bind(addr: SocketAddrV4, cfg: RouterConfig) -> io::Result<Self> {
        let raw = Socket::new(Domain::IPV4, Type::RAW, Some(Protocol::from(255))).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("raw IPv4 socket for forwarding (needs CAP_NET_RAW): {e}"),
            )
        })?;
        Ok(RpcRouter {
            io: Io::bind(addr)?,
            raw,
            core: Router::new(cfg),
            out: vec![0; HEADERS + MAX_PACKET_LEN],
        })
    }

    /// The bound address (where clients send REQ0 and servers FEEDBACK).
    pub fn local_addr(&self) -> SocketAddrV4 {
        self.io.local
    }

    /// The core (its counters, the servers' outstanding requests).
    pub fn core(&self) -> &Router {
        &self.core
    }

    /// The driver's counters (`send_errors` counts refused forwards too).
    pub fn stats(&self) -> DriverStats {
        self.io.stats
    }

    /// One turn without sleeping: every waiting datagram into the core, its
    /// due timers, then what it queued out.
    pub fn poll(&mut self) -> io::Result<()> {
        let core = &mut self.core;
        self.io.drain(|now, from, b| {
            // Refused datagrams are counted by the core.
            let _ = core.handle_datagram(now, from, b);
        })?;
        let now = self.io.now();
        if self.core.poll_timeout().is_some_and(|t| t <= now) {
            self.core.handle_timeout(now);
        }
        self.flush();
        Ok(())
    }

    /// Sleeps until a datagram comes, the core's next deadline or `max`
    /// passes, then one [`poll`](Self::poll).
    pub fn wait(&mut self, max: Duration) -> io::Result<()> {
        self.io.sleep_for(self.core.poll_timeout(), max)?;
        self.poll()
    }

    fn flush(&mut self) {
        while let Some(f) = self.core.poll_transmit(&mut self.io.tx) {
            if !f.forwarded {
                self.io.send(f.dst, f.len);
                continue;
            }
            let n = udp_datagram(f.origin, f.dst, &self.io.tx[..f.len], &mut self.out);
            let to = SockAddr::from(SocketAddr::V4(SocketAddrV4::new(*f.dst.ip(), 0)));
            match self.raw.send_to(&self.out[..n], &to) {
                Ok(_) => self.io.stats.sent += 1,
                Err(_) => self.io.stats.send_errors += 1,
            }
        }
    }
}

/// Writes an IPv4 + UDP datagram from `src` to `dst` carrying `payload`
/// into `out` (at least [`HEADERS`] + its length); returns its length.
/// Both checksums are computed (the kernel fills the IPv4 one again).
fn udp_datagram(src: SocketAddrV4, dst: SocketAddrV4, payload: &[u8], out: &mut [u8]) -> usize {
    let udp_len = 8 + payload.len();
    let total = 20 + udp_len;
    let ip = &mut out[..20];
    ip[0] = 0x45;
    ip[1] = 0;
    ip[2..4].copy_from_slice(&(total as u16).to_be_bytes());
    ip[4..6].copy_from_slice(&[0, 0]);
    ip[6..8].copy_from_slice(&0x4000u16.to_be_bytes()); // DF
    ip[8] = 64;
    ip[9] = 17;
    ip[10..12].copy_from_slice(&[0, 0]);
    ip[12..16].copy_from_slice(&src.ip().octets());
    ip[16..20].copy_from_slice(&dst.ip().octets());
    let c = !fold(sum(&out[..20]));
    out[10..12].copy_from_slice(&c.to_be_bytes());
    let udp = &mut out[20..total];
    udp[0..2].copy_from_slice(&src.port().to_be_bytes());
    udp[2..4].copy_from_slice(&dst.port().to_be_bytes());
    udp[4..6].copy_from_slice(&(udp_len as u16).to_be_bytes());
    udp[6..8].copy_from_slice(&[0, 0]);
    udp[8..].copy_from_slice(payload);
    let mut pseudo = [0u8; 12];
    pseudo[0..4].copy_from_slice(&src.ip().octets());
    pseudo[4..8].copy_from_slice(&dst.ip().octets());
    pseudo[9] = 17;
    pseudo[10..12].copy_from_slice(&(udp_len as u16).to_be_bytes());
    let c = match !fold(sum(&pseudo) + sum(udp)) {
        0 => 0xFFFF,
        c => c,
    };
    udp[6..8].copy_from_slice(&c.to_be_bytes());
    total
}

/// The one's-complement sum of `b` as 16-bit big-endian words (an odd
/// last byte padded with zero), not yet folded.
fn sum(b: &[u8]) -> u64 {
    let mut s = 0u64;
    for w in b.chunks(2) {
        s += u64::from(u16::from_be_bytes([w[0], *w.get(1).unwrap_or(&0)]));
    }
    s
}

fn fold(mut s: u64) -> u16 {
    while s > 0xFFFF {
        s = (s & 0xFFFF) + (s >> 16);
    }
    s as u16
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    /// A datagram whose checksums verify: the sum over each header (and the
    /// UDP pseudo-header and payload) with its checksum folds to 0xFFFF.
    #[test]
    fn datagram_checksums_verify() {
        let src = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), 4000);
        let dst = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 2), 8000);
        for payload in [&b""[..], b"x", b"odd length!", &[0xFF; 1472]] {
            let mut out = vec![0u8; HEADERS + payload.len()];
            let n = udp_datagram(src, dst, payload, &mut out);
            assert_eq!(n, HEADERS + payload.len());
            assert_eq!(fold(sum(&out[..20])), 0xFFFF);
            let mut pseudo = [0u8; 12];
            pseudo[0..4].copy_from_slice(&src.ip().octets());
            pseudo[4..8].copy_from_slice(&dst.ip().octets());
            pseudo[9] = 17;
            pseudo[10..12].copy_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
            assert_eq!(fold(sum(&pseudo) + sum(&out[20..n])), 0xFFFF);
            assert_eq!(&out[28..n], payload);
            assert_eq!(u16::from_be_bytes([out[20], out[21]]), 4000);
            assert_eq!(u16::from_be_bytes([out[22], out[23]]), 8000);
        }
    }
}
