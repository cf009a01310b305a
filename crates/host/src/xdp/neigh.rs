//! Link-layer addresses for frames the lane writes itself: the sending
//! interface's MAC, and each destination's next-hop MAC (a multicast
//! group's MAC, or the kernel's neighbour entry for a host on the link).
//! Read once, when a sender is set up, never on the real-time path, in the
//! calling thread's network namespace.

use super::frame::FrameAddrs;
use std::net::{Ipv4Addr, SocketAddrV4};

/// `ATF_COM` in `/proc/net/arp`: the entry is resolved.
const ATF_COM: u32 = 0x2;

/// Why a destination has no next-hop MAC.
#[derive(Debug, thiserror::Error)]
pub enum NeighError {
    /// The neighbour table could not be read.
    #[error("reading the neighbour table: {0}")]
    Read(std::io::Error),
    /// The interface's IPv4 address (for an unspecified source) could not
    /// be read.
    #[error("IPv4 address of {0}: {1}")]
    Address(String, std::io::Error),
    /// No resolved entry: the destination is not on the link, or nothing
    /// has talked to it yet.
    #[error("no resolved neighbour entry for {ip} on {iface}: the lane's own send ring reaches hosts on the link whose address the kernel has resolved (send anything to it first, or add a permanent entry)")]
    Unresolved {
        /// The destination.
        ip: Ipv4Addr,
        /// The interface.
        iface: String,
    },
    /// A line of the table this parser does not understand.
    #[error("neighbour table line {line}: {why}")]
    Parse {
        /// Line number (1-based).
        line: usize,
        /// What was wrong.
        why: &'static str,
    },
}

/// The MAC of IPv4 multicast group `ip` (RFC 1112: 01:00:5e and the low
/// 23 bits of the group).
pub fn multicast_mac(ip: Ipv4Addr) -> [u8; 6] {
    let o = ip.octets();
    [0x01, 0x00, 0x5e, o[1] & 0x7f, o[2], o[3]]
}

/// One resolved entry of `/proc/net/arp`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ArpEntry<'a> {
    /// The neighbour's address.
    pub ip: Ipv4Addr,
    /// Its MAC.
    pub mac: [u8; 6],
    /// The interface.
    pub dev: &'a str,
    /// The entry's flags (`ATF_*`).
    pub flags: u32,
}

fn parse_mac(s: &str) -> Option<[u8; 6]> {
    let mut mac = [0u8; 6];
    let mut parts = s.split(':');
    for b in &mut mac {
        let p = parts.next()?;
        if p.len() != 2 {
            return None;
        }
        *b = u8::from_str_radix(p, 16).ok()?;
    }
    parts.next().is_none().then_some(mac)
}

/// Parses the text of `/proc/net/arp` (a header line, then one entry per
/// line: address, hardware type, flags, MAC, mask, device).
pub fn parse_arp(text: &str) -> Result<Vec<ArpEntry<'_>>, NeighError> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate().skip(1) {
        let err = |why| NeighError::Parse { line: i + 1, why };
        if line.trim().is_empty() {
            continue;
        }
        let f: Vec<&str> = line.split_whitespace().collect();
        let [ip, _hw, flags, mac, _mask, dev] = f[..] else {
            return Err(err("not six fields"));
        };
        let ip = ip.parse().map_err(|_| err("bad address"))?;
        let flags = u32::from_str_radix(flags.trim_start_matches("0x"), 16)
            .map_err(|_| err("bad flags"))?;
        let mac = parse_mac(mac).ok_or_else(|| err("bad MAC"))?;
        out.push(ArpEntry {
            ip,
            mac,
            dev,
            flags,
        });
    }
    Ok(out)
}

/// The next-hop MAC of `ip` on `iface`, from `table` (the text of
/// `/proc/net/arp`) for a unicast address.
pub fn next_hop_in(table: &str, iface: &str, ip: Ipv4Addr) -> Result<[u8; 6], NeighError> {
    if ip.is_multicast() {
        return Ok(multicast_mac(ip));
    }
    parse_arp(table)?
        .into_iter()
        .find(|e| e.ip == ip && e.dev == iface && e.flags & ATF_COM != 0)
        .map(|e| e.mac)
        .ok_or_else(|| NeighError::Unresolved {
            ip,
            iface: iface.to_string(),
        })
}

/// `ioctl(request)` on an `ifreq` naming `iface`, through a datagram
/// socket of the calling thread's network namespace.
fn ifreq_ioctl(iface: &str, request: libc::Ioctl) -> Result<libc::ifreq, std::io::Error> {
    let name = iface.as_bytes();
    if name.is_empty() || name.len() >= libc::IFNAMSIZ || name.contains(&0) {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not an interface name",
        ));
    }
    // SAFETY: plain socket call, checked; closed below.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: an all-zero ifreq is valid.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (d, s) in req.ifr_name.iter_mut().zip(name) {
        *d = *s as libc::c_char;
    }
    // SAFETY: `req` is a valid ifreq with a NUL-terminated name, large
    // enough for the interface requests this module makes.
    let r = unsafe { libc::ioctl(fd, request, &mut req) };
    let e = std::io::Error::last_os_error();
    // SAFETY: the descriptor made above.
    unsafe { libc::close(fd) };
    if r < 0 {
        return Err(e);
    }
    Ok(req)
}

/// The MAC of `iface` in the calling thread's network namespace.
pub fn interface_mac(iface: &str) -> Result<[u8; 6], std::io::Error> {
    let req = ifreq_ioctl(iface, libc::SIOCGIFHWADDR)?;
    // SAFETY: SIOCGIFHWADDR filled the hardware address member.
    let sa = unsafe { req.ifr_ifru.ifru_hwaddr };
    let mut mac = [0u8; 6];
    for (d, s) in mac.iter_mut().zip(sa.sa_data.iter()) {
        *d = *s as u8;
    }
    Ok(mac)
}

/// The first IPv4 address of `iface` in the calling thread's network
/// namespace.
pub fn interface_ipv4(iface: &str) -> Result<Ipv4Addr, std::io::Error> {
    let req = ifreq_ioctl(iface, libc::SIOCGIFADDR)?;
    // SAFETY: SIOCGIFADDR filled the address member with a sockaddr_in.
    let sa = unsafe { req.ifr_ifru.ifru_addr };
    // SAFETY: an AF_INET address is a sockaddr_in.
    let sin: libc::sockaddr_in = unsafe { std::mem::transmute_copy(&sa) };
    Ok(Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr)))
}

/// The addresses of frames from `src` (a lane socket's address; an
/// unspecified address becomes the interface's) and `src_mac` (the
/// interface's MAC) to each of `dsts` through `iface`, marked `dscp`,
/// resolved in the calling thread's network namespace.
pub fn frame_addrs(
    iface: &str,
    src_mac: [u8; 6],
    src: SocketAddrV4,
    dsts: &[SocketAddrV4],
    dscp: u8,
) -> Result<Vec<FrameAddrs>, NeighError> {
    let src = if src.ip().is_unspecified() {
        let ip = interface_ipv4(iface).map_err(|e| NeighError::Address(iface.to_string(), e))?;
        SocketAddrV4::new(ip, src.port())
    } else {
        src
    };
    // The thread's own view: a thread that entered a namespace sees its
    // table there, where /proc/self/net would show the process's.
    let table = std::fs::read_to_string("/proc/thread-self/net/arp").map_err(NeighError::Read)?;
    dsts.iter()
        .map(|d| {
            Ok(FrameAddrs {
                src_mac,
                dst_mac: next_hop_in(&table, iface, *d.ip())?,
                src,
                dst: *d,
                dscp,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const TABLE: &str = "\
IP address       HW type     Flags       HW address            Mask     Device
10.0.0.2         0x1         0x6         02:00:00:00:00:02     *        xl1-h0
10.0.0.3         0x1         0x0         00:00:00:00:00:00     *        xl1-h0
10.0.0.4         0x1         0x2         02:00:00:00:00:04     *        other
";

    #[test]
    fn next_hops() {
        type Want = Result<[u8; 6], &'static str>;
        let cases: [(&str, Want); 5] = [
            ("10.0.0.2", Ok([2, 0, 0, 0, 0, 2])),
            // Incomplete entry.
            ("10.0.0.3", Err("unresolved")),
            // Resolved, but on another interface.
            ("10.0.0.4", Err("unresolved")),
            ("10.0.0.9", Err("unresolved")),
            ("239.129.2.3", Ok([1, 0, 0x5e, 1, 2, 3])),
        ];
        for (ip, want) in cases {
            let got = next_hop_in(TABLE, "xl1-h0", ip.parse().unwrap());
            match (got, want) {
                (Ok(m), Ok(w)) => assert_eq!(m, w, "{ip}"),
                (Err(NeighError::Unresolved { .. }), Err("unresolved")) => {}
                (g, w) => panic!("{ip}: {g:?}, want {w:?}"),
            }
        }
    }

    #[test]
    fn bad_tables_are_typed_errors() {
        let cases = [
            (
                "h\n10.0.0.2 0x1 0x2 02:00:00:00:00:02 *\n",
                "not six fields",
            ),
            ("h\nten 0x1 0x2 02:00:00:00:00:02 * d\n", "bad address"),
            ("h\n10.0.0.2 0x1 zz 02:00:00:00:00:02 * d\n", "bad flags"),
            ("h\n10.0.0.2 0x1 0x2 02:00:00:00:00 * d\n", "bad MAC"),
            ("h\n10.0.0.2 0x1 0x2 02:00:00:00:00:002 * d\n", "bad MAC"),
        ];
        for (text, want) in cases {
            match parse_arp(text) {
                Err(NeighError::Parse { line: 2, why }) => assert_eq!(why, want),
                other => panic!("{text:?}: {other:?}"),
            }
        }
        assert_eq!(parse_arp("header only\n").unwrap(), vec![]);
    }

    #[test]
    fn the_loopback_has_a_mac_and_an_address() {
        assert_eq!(interface_ipv4("lo").unwrap(), Ipv4Addr::LOCALHOST);
        assert_eq!(interface_mac("lo").unwrap(), [0; 6]);
        assert!(interface_mac("").is_err());
        assert!(interface_mac("no-such-if0").is_err());
    }
}
