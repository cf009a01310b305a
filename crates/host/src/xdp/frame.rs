//! The view of an Ethernet frame the AF_XDP ring hands over: Ethernet II,
//! IPv4 without options or fragmentation, UDP. Validated once in
//! [`UdpFrame::new_checked`]; the accessors then read without checks.

use std::net::{Ipv4Addr, SocketAddrV4};

/// Ethernet II header length.
pub const ETH_LEN: usize = 14;
/// IPv4 header length without options.
pub const IPV4_LEN: usize = 20;
/// UDP header length.
pub const UDP_LEN: usize = 8;
/// Offset of the UDP payload in a frame this view accepts.
pub const PAYLOAD_OFFSET: usize = ETH_LEN + IPV4_LEN + UDP_LEN;

/// Why a frame is not a lane datagram this view can read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// Shorter than the three headers.
    #[error("frame of {0} bytes is shorter than Ethernet, IPv4 and UDP headers")]
    Short(usize),
    /// Not IPv4 (the EtherType).
    #[error("EtherType {0:#06x} is not IPv4")]
    NotIpv4(u16),
    /// IPv4 with options, or not version 4.
    #[error("IP version/header length byte {0:#04x} is not a plain IPv4 header")]
    IpHeader(u8),
    /// Not UDP.
    #[error("IP protocol {0} is not UDP")]
    NotUdp(u8),
    /// A fragment (more-fragments set or a non-zero offset).
    #[error("IPv4 fragment")]
    Fragment,
    /// The IPv4 total length disagrees with the frame.
    #[error("IPv4 total length {total} does not fit the frame's {frame} bytes")]
    IpLength {
        /// The header's total length.
        total: usize,
        /// Bytes after the Ethernet header.
        frame: usize,
    },
    /// The UDP length disagrees with the IPv4 total length.
    #[error("UDP length {udp} does not match the IPv4 payload of {ip} bytes")]
    UdpLength {
        /// The UDP header's length.
        udp: usize,
        /// The IPv4 payload length.
        ip: usize,
    },
}

/// A validated Ethernet/IPv4/UDP frame.
#[derive(Clone, Copy, Debug)]
pub struct UdpFrame<'a> {
    bytes: &'a [u8],
    payload_len: usize,
}

fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

impl<'a> UdpFrame<'a> {
    /// Checks every header once (lengths, version, protocol, fragments);
    /// Ethernet padding after the IPv4 packet is allowed and ignored.
    pub fn new_checked(bytes: &'a [u8]) -> Result<Self, FrameError> {
        if bytes.len() < PAYLOAD_OFFSET {
            return Err(FrameError::Short(bytes.len()));
        }
        let ether = be16(bytes, 12);
        if ether != 0x0800 {
            return Err(FrameError::NotIpv4(ether));
        }
        let vihl = bytes[ETH_LEN];
        if vihl != 0x45 {
            return Err(FrameError::IpHeader(vihl));
        }
        let proto = bytes[ETH_LEN + 9];
        if proto != 17 {
            return Err(FrameError::NotUdp(proto));
        }
        if be16(bytes, ETH_LEN + 6) & 0x3fff != 0 {
            return Err(FrameError::Fragment);
        }
        let total = be16(bytes, ETH_LEN + 2) as usize;
        let frame = bytes.len() - ETH_LEN;
        if total < IPV4_LEN + UDP_LEN || total > frame {
            return Err(FrameError::IpLength { total, frame });
        }
        let udp = be16(bytes, ETH_LEN + IPV4_LEN + 4) as usize;
        if udp != total - IPV4_LEN {
            return Err(FrameError::UdpLength {
                udp,
                ip: total - IPV4_LEN,
            });
        }
        Ok(UdpFrame {
            bytes,
            payload_len: udp - UDP_LEN,
        })
    }

    /// The DSCP of the IPv4 header.
    pub fn dscp(&self) -> u8 {
        self.bytes[ETH_LEN + 1] >> 2
    }

    /// Source address and port.
    pub fn src(&self) -> SocketAddrV4 {
        let b = self.bytes;
        let ip = Ipv4Addr::new(b[26], b[27], b[28], b[29]);
        SocketAddrV4::new(ip, be16(b, ETH_LEN + IPV4_LEN))
    }

    /// Destination address and port.
    pub fn dst(&self) -> SocketAddrV4 {
        let b = self.bytes;
        let ip = Ipv4Addr::new(b[30], b[31], b[32], b[33]);
        SocketAddrV4::new(ip, be16(b, ETH_LEN + IPV4_LEN + 2))
    }

    /// The UDP payload.
    pub fn payload(&self) -> &'a [u8] {
        &self.bytes[PAYLOAD_OFFSET..PAYLOAD_OFFSET + self.payload_len]
    }
}

/// The addresses of a frame to send: link layer, network and transport.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameAddrs {
    /// The sending interface's MAC.
    pub src_mac: [u8; 6],
    /// The next hop's MAC (for a multicast group, the group's MAC).
    pub dst_mac: [u8; 6],
    /// Source address and port (the lane socket's).
    pub src: SocketAddrV4,
    /// Destination address and port.
    pub dst: SocketAddrV4,
    /// The DSCP to mark.
    pub dscp: u8,
}

/// Bytes of frame around a payload of `len` bytes.
pub const fn frame_len(len: usize) -> usize {
    PAYLOAD_OFFSET + len
}

/// One's-complement sum of `b` (an odd last byte padded with zero) added
/// to `sum`, not yet folded.
fn sum16(mut sum: u32, b: &[u8]) -> u32 {
    let mut it = b.chunks_exact(2);
    for w in &mut it {
        sum += u32::from(u16::from_be_bytes([w[0], w[1]]));
    }
    if let [last] = it.remainder() {
        sum += u32::from(*last) << 8;
    }
    sum
}

fn fold(mut sum: u32) -> u16 {
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// Writes an Ethernet/IPv4/UDP frame carrying `payload` to the front of
/// `out` and returns its length, or `None` when `out` is too short or the
/// payload too long for one IPv4 datagram. Both checksums are computed; the
/// IPv4 header says don't-fragment, identification `ident`, TTL 64 (the
/// lane sockets' multicast TTL for a multicast destination). No
/// allocation.
pub fn write(out: &mut [u8], a: &FrameAddrs, ident: u16, payload: &[u8]) -> Option<usize> {
    let len = frame_len(payload.len());
    let ip_total = u16::try_from(IPV4_LEN + UDP_LEN + payload.len()).ok()?;
    if out.len() < len {
        return None;
    }
    let f = &mut out[..len];
    f[0..6].copy_from_slice(&a.dst_mac);
    f[6..12].copy_from_slice(&a.src_mac);
    f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    let ip = &mut f[ETH_LEN..ETH_LEN + IPV4_LEN];
    ip[0] = 0x45;
    ip[1] = a.dscp << 2;
    ip[2..4].copy_from_slice(&ip_total.to_be_bytes());
    ip[4..6].copy_from_slice(&ident.to_be_bytes());
    ip[6..8].copy_from_slice(&0x4000u16.to_be_bytes());
    ip[8] = if a.dst.ip().is_multicast() {
        crate::socket::LANE_MULTICAST_TTL
    } else {
        64
    };
    ip[9] = 17;
    ip[10..12].fill(0);
    ip[12..16].copy_from_slice(&a.src.ip().octets());
    ip[16..20].copy_from_slice(&a.dst.ip().octets());
    let c = fold(sum16(0, ip));
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    let udp_len = ip_total - IPV4_LEN as u16;
    let u = ETH_LEN + IPV4_LEN;
    f[u..u + 2].copy_from_slice(&a.src.port().to_be_bytes());
    f[u + 2..u + 4].copy_from_slice(&a.dst.port().to_be_bytes());
    f[u + 4..u + 6].copy_from_slice(&udp_len.to_be_bytes());
    f[u + 6..u + 8].fill(0);
    f[PAYLOAD_OFFSET..].copy_from_slice(payload);
    // The pseudo-header, then the UDP header and payload.
    let mut sum = sum16(0, &a.src.ip().octets());
    sum = sum16(sum, &a.dst.ip().octets());
    sum += 17 + u32::from(udp_len);
    sum = sum16(sum, &f[u..]);
    // A computed zero is sent as all ones (zero means "no checksum").
    let c = match fold(sum) {
        0 => 0xffff,
        c => c,
    };
    f[u + 6..u + 8].copy_from_slice(&c.to_be_bytes());
    Some(len)
}

/// Builds a frame around `payload` into `out` with fixed locally
/// administered MACs (for tests and the fuzz target); see [`write()`].
pub fn build(src: SocketAddrV4, dst: SocketAddrV4, dscp: u8, payload: &[u8], out: &mut Vec<u8>) {
    let a = FrameAddrs {
        src_mac: [0x02, 0, 0, 0, 0, 1],
        dst_mac: [0x02, 0, 0, 0, 0, 2],
        src,
        dst,
        dscp,
    };
    out.clear();
    out.resize(frame_len(payload.len()), 0);
    let n = write(out, &a, 0, payload).unwrap_or(0);
    out.truncate(n);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::socket::LANE_MULTICAST_TTL;

    fn good() -> Vec<u8> {
        let mut v = Vec::new();
        build(
            "10.0.0.1:4000".parse().unwrap(),
            "239.1.2.3:7200".parse().unwrap(),
            46,
            b"hello lane",
            &mut v,
        );
        v
    }

    #[test]
    fn reads_a_built_frame() {
        let v = good();
        let f = UdpFrame::new_checked(&v).unwrap();
        assert_eq!(f.payload(), b"hello lane");
        assert_eq!(f.src(), "10.0.0.1:4000".parse().unwrap());
        assert_eq!(f.dst(), "239.1.2.3:7200".parse().unwrap());
        assert_eq!(f.dscp(), 46);
        // Ethernet padding is ignored.
        let mut p = v.clone();
        p.extend_from_slice(&[0; 8]);
        assert_eq!(UdpFrame::new_checked(&p).unwrap().payload(), b"hello lane");
    }

    #[test]
    fn written_frames_carry_valid_checksums() {
        let a = FrameAddrs {
            src_mac: [2, 1, 2, 3, 4, 5],
            dst_mac: [1, 0, 0x5e, 1, 2, 3],
            src: "10.0.0.1:4000".parse().unwrap(),
            dst: "239.1.2.3:7200".parse().unwrap(),
            dscp: 46,
        };
        // Even, odd and empty payloads, unicast and multicast.
        let unicast = FrameAddrs {
            dst: "10.0.0.2:7200".parse().unwrap(),
            ..a
        };
        let cases: [(&FrameAddrs, &[u8], u8); 4] = [
            (&a, b"hello lane", LANE_MULTICAST_TTL),
            (&a, b"odd", LANE_MULTICAST_TTL),
            (&unicast, b"", 64),
            (&unicast, &[0xff; 301], 64),
        ];
        for (addrs, payload, ttl) in cases {
            let mut out = [0u8; 400];
            let n = write(&mut out, addrs, 7, payload).unwrap();
            let f = &out[..n];
            assert_eq!(n, frame_len(payload.len()));
            assert_eq!(
                (&f[0..6], &f[6..12]),
                (&addrs.dst_mac[..], &addrs.src_mac[..])
            );
            assert_eq!(f[ETH_LEN + 8], ttl);
            // A header with its checksum sums to all ones.
            assert_eq!(fold(sum16(0, &f[ETH_LEN..ETH_LEN + IPV4_LEN])), 0);
            let u = &f[ETH_LEN + IPV4_LEN..];
            let mut sum = sum16(0, &addrs.src.ip().octets());
            sum = sum16(sum, &addrs.dst.ip().octets());
            sum += 17 + u.len() as u32;
            assert_eq!(fold(sum16(sum, u)), 0, "UDP checksum of {payload:?}");
            let v = UdpFrame::new_checked(f).unwrap();
            assert_eq!(
                (v.src(), v.dst(), v.dscp(), v.payload()),
                (addrs.src, addrs.dst, 46, payload)
            );
        }
    }

    #[test]
    fn write_refuses_what_does_not_fit() {
        let a = FrameAddrs {
            src_mac: [0; 6],
            dst_mac: [0; 6],
            src: "10.0.0.1:1".parse().unwrap(),
            dst: "10.0.0.2:2".parse().unwrap(),
            dscp: 0,
        };
        let mut small = [0u8; PAYLOAD_OFFSET + 3];
        assert_eq!(write(&mut small, &a, 0, b"four"), None);
        assert_eq!(write(&mut small, &a, 0, b"abc"), Some(PAYLOAD_OFFSET + 3));
        let huge = vec![0u8; 70_000];
        let mut out = vec![0u8; 71_000];
        assert_eq!(write(&mut out, &a, 0, &huge), None);
    }

    #[test]
    fn refuses_what_it_cannot_read() {
        type Edit = fn(&mut Vec<u8>);
        let cases: [(Edit, FrameError); 7] = [
            (|v| v.truncate(41), FrameError::Short(41)),
            (|v| v[12] = 0x86, FrameError::NotIpv4(0x8600)),
            (|v| v[14] = 0x46, FrameError::IpHeader(0x46)),
            (|v| v[23] = 6, FrameError::NotUdp(6)),
            (|v| v[20] = 0x20, FrameError::Fragment),
            (
                |v| v[17] = 200,
                FrameError::IpLength {
                    total: 200,
                    frame: 38,
                },
            ),
            (|v| v[39] = 9, FrameError::UdpLength { udp: 9, ip: 18 }),
        ];
        for (edit, want) in cases {
            let mut v = good();
            edit(&mut v);
            assert_eq!(UdpFrame::new_checked(&v).unwrap_err(), want);
        }
    }
}
