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

/// Builds an Ethernet/IPv4/UDP frame around `payload` (for tests and the
/// fuzz target's seeds; the IPv4 checksum is computed, the UDP one left 0).
pub fn build(src: SocketAddrV4, dst: SocketAddrV4, dscp: u8, payload: &[u8], out: &mut Vec<u8>) {
    out.clear();
    out.extend_from_slice(&[0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1, 0x08, 0x00]);
    let total = (IPV4_LEN + UDP_LEN + payload.len()) as u16;
    let mut ip = [0u8; IPV4_LEN];
    ip[0] = 0x45;
    ip[1] = dscp << 2;
    ip[2..4].copy_from_slice(&total.to_be_bytes());
    ip[8] = 64;
    ip[9] = 17;
    ip[12..16].copy_from_slice(&src.ip().octets());
    ip[16..20].copy_from_slice(&dst.ip().octets());
    let mut sum = 0u32;
    for w in ip.chunks(2) {
        sum += u32::from(u16::from_be_bytes([w[0], w[1]]));
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    ip[10..12].copy_from_slice(&(!(sum as u16)).to_be_bytes());
    out.extend_from_slice(&ip);
    out.extend_from_slice(&src.port().to_be_bytes());
    out.extend_from_slice(&dst.port().to_be_bytes());
    out.extend_from_slice(&(total - IPV4_LEN as u16).to_be_bytes());
    out.extend_from_slice(&[0, 0]);
    out.extend_from_slice(payload);
}

#[cfg(test)]
mod tests {
    use super::*;

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
