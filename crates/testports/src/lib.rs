//! `xlane-testports`: loopback ports for xlane's tests that nothing else
//! takes between the pick and the bind.
//!
//! A test that starts a daemon picks its port first, and the daemon binds
//! it later (and binds it again after a restart in the same test). Binding
//! port 0 and releasing the socket gives a port from the kernel's ephemeral
//! range (32768–60999 on Linux), and until the daemon binds it anything
//! else may get the same port: another test running at the same time in
//! the same binary, by its own port-0 pick, or any outgoing TCP connection
//! on the machine, as its source port. The daemon then fails with "Address
//! already in use". This crate hands out ports so that cannot happen:
//!
//! - the ports lie below the ephemeral range (10000–29999), where the
//!   kernel never picks a port for a port-0 bind or for an outgoing
//!   connection;
//! - each process takes its ports from a block of its own, 1000 ports from
//!   10000 + (PID mod 20) × 1000, so test binaries running at the same time
//!   (two `cargo test` runs) start from different blocks;
//! - inside the process an atomic counter walks the block, so concurrent
//!   tests of one binary never get the same port (the counter wraps around
//!   the block after 1000 ports);
//! - a port found bound right now (another program, a binary whose PID
//!   shares the block, a port from before the counter wrapped) is skipped.
//!
//! ```
//! let raft = xlane_testports::raft();
//! let client = xlane_testports::tcp();
//! assert_ne!(raft.port(), client.port());
//! assert!(raft.port() < 32768 && client.port() < 32768);
//! ```
#![warn(missing_docs)]

use std::io::ErrorKind;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, TcpListener, UdpSocket};
use std::sync::atomic::{AtomicU32, Ordering};

/// The first port of the first block.
const FIRST: u16 = 10_000;
/// Ports in a block, one block per process.
const BLOCK: u16 = 1_000;
/// Blocks: 10000..30000, below the ephemeral range.
const BLOCKS: u32 = 20;

/// The next candidate's offset in this process's block (modulo `BLOCK`).
static NEXT: AtomicU32 = AtomicU32::new(0);

/// The first port of this process's block.
fn block_base() -> u16 {
    FIRST + (std::process::id() % BLOCKS) as u16 * BLOCK
}

/// Whether `port` on `ip` can be bound now for UDP (if `udp`) and TCP (if
/// `tcp`): `false` if it is in use. Any other error (no such address: no
/// IPv6 loopback here) is a panic, as no other port would do better.
fn bindable(ip: IpAddr, port: u16, udp: bool, tcp: bool) -> bool {
    let at = SocketAddr::new(ip, port);
    let free = |r: std::io::Result<()>| match r {
        Ok(()) => true,
        Err(e) if e.kind() == ErrorKind::AddrInUse => false,
        Err(e) => panic!("xlane-testports: cannot bind {at}: {e}"),
    };
    (!udp || free(UdpSocket::bind(at).map(drop))) && (!tcp || free(TcpListener::bind(at).map(drop)))
}

/// Takes `step` ports at once from the block at `base` (`step` consecutive
/// ports, none of them handed out again until `next` wraps around the
/// block) and returns the first, once `free` accepts it. Candidates whose
/// ports would leave the block are passed over; panics when a whole
/// block's worth of candidates was busy.
fn take(next: &AtomicU32, base: u16, step: u32, free: impl Fn(u16) -> bool) -> u16 {
    let block = u32::from(BLOCK);
    let mut tried = 0;
    while tried < block {
        let off = next.fetch_add(step, Ordering::Relaxed) % block;
        tried += step;
        if off + step > block {
            continue;
        }
        let port = base + off as u16;
        if free(port) {
            return port;
        }
    }
    panic!(
        "xlane-testports: no free port in {base}..{}: every candidate was in use",
        u32::from(base) + block
    );
}

/// A port of this process's block that `free` accepts, taken alone.
fn one(free: impl Fn(u16) -> bool) -> u16 {
    take(&NEXT, block_base(), 1, free)
}

/// A loopback address (127.0.0.1) whose port is free for UDP now and is
/// handed out to no other caller in this process.
pub fn udp() -> SocketAddrV4 {
    let port = one(|p| bindable(Ipv4Addr::LOCALHOST.into(), p, true, false));
    SocketAddrV4::new(Ipv4Addr::LOCALHOST, port)
}

/// `n` loopback addresses as [`udp`] gives them, all different.
pub fn udp_n(n: usize) -> Vec<SocketAddrV4> {
    (0..n).map(|_| udp()).collect()
}

/// A loopback address (127.0.0.1) whose port is free for a TCP listener
/// now and is handed out to no other caller in this process.
pub fn tcp() -> SocketAddr {
    let port = one(|p| bindable(Ipv4Addr::LOCALHOST.into(), p, false, true));
    SocketAddr::from((Ipv4Addr::LOCALHOST, port))
}

/// A loopback address (127.0.0.1) whose port is free for both UDP and TCP
/// now (a raft address: raft datagrams over UDP, snapshots over TCP) and is
/// handed out to no other caller in this process. The next port is the
/// next caller's: a member on the lane (`--transport lane`, X-FD on the
/// next port) needs [`raft_pair`].
pub fn raft() -> SocketAddr {
    let port = one(|p| bindable(Ipv4Addr::LOCALHOST.into(), p, true, true));
    SocketAddr::from((Ipv4Addr::LOCALHOST, port))
}

/// A raft address as [`raft`] gives it whose next port is free for UDP and
/// TCP too (a member on the lane uses it as its X-FD port). Both ports are
/// taken at once: neither is handed out to another caller in this process.
pub fn raft_pair() -> SocketAddr {
    let lo = IpAddr::from(Ipv4Addr::LOCALHOST);
    let port = take(&NEXT, block_base(), 2, |p| {
        bindable(lo, p, true, true) && bindable(lo, p + 1, true, true)
    });
    SocketAddr::new(lo, port)
}

/// A port free for both TCP and UDP now on the IPv6 loopback (::1) if `v6`,
/// else on 127.0.0.1, handed out to no other caller in this process.
/// Panics if there is no such loopback address here.
pub fn port(v6: bool) -> u16 {
    let ip: IpAddr = if v6 {
        Ipv6Addr::LOCALHOST.into()
    } else {
        Ipv4Addr::LOCALHOST.into()
    };
    one(|p| bindable(ip, p, true, true))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    /// Every port a thread got from one round of each picker.
    fn round() -> Vec<u16> {
        let pair = raft_pair().port();
        vec![
            udp().port(),
            tcp().port(),
            raft().port(),
            pair,
            pair + 1,
            port(false),
        ]
    }

    #[test]
    fn distinct_across_calls_and_threads_and_below_the_ephemeral_range() {
        // 8 × 10 rounds of 6 ports: fewer than a block, so no wrap.
        let threads: Vec<_> = (0..8)
            .map(|_| std::thread::spawn(|| (0..10).flat_map(|_| round()).collect::<Vec<u16>>()))
            .collect();
        let all: Vec<u16> = threads
            .into_iter()
            .flat_map(|t| t.join().expect("thread"))
            .collect();
        let set: HashSet<u16> = all.iter().copied().collect();
        assert_eq!(set.len(), all.len(), "a port handed out twice: {all:?}");
        let base = block_base();
        for p in all {
            assert!(p < 32768, "{p} is in the ephemeral range");
            assert!((base..base + BLOCK).contains(&p), "{p} outside {base}+");
        }
    }

    #[test]
    fn udp_n_gives_distinct_addresses() {
        let a = udp_n(5);
        let set: HashSet<SocketAddrV4> = a.iter().copied().collect();
        assert_eq!(set.len(), 5, "{a:?}");
        assert!(a.iter().all(|a| *a.ip() == Ipv4Addr::LOCALHOST));
    }

    #[test]
    fn busy_candidates_are_skipped() {
        let next = AtomicU32::new(0);
        let busy = [20_000, 20_001];
        let p = take(&next, 20_000, 1, |p| !busy.contains(&p));
        assert_eq!(p, 20_002);
        // The skipped ones are not offered again either.
        assert_eq!(take(&next, 20_000, 1, |_| true), 20_003);
    }

    #[test]
    fn ports_really_bound_are_skipped() {
        // Ports this process holds (taken from the counter, so no other test
        // here probes them): a walk starting at them must pass them over.
        let u = udp();
        let _held_u = UdpSocket::bind(u).expect("hold udp");
        let t = tcp();
        let _held_t = TcpListener::bind(t).expect("hold tcp");
        let lo = IpAddr::from(Ipv4Addr::LOCALHOST);
        let got = take(&AtomicU32::new(0), u.port(), 1, |p| {
            bindable(lo, p, true, false)
        });
        assert_ne!(got, u.port());
        let got = take(&AtomicU32::new(0), t.port(), 1, |p| {
            bindable(lo, p, false, true)
        });
        assert_ne!(got, t.port());
    }

    #[test]
    fn a_pair_never_leaves_the_block() {
        // Offset 999 would put the pair's second port in the next block.
        let next = AtomicU32::new(u32::from(BLOCK) - 1);
        assert_eq!(take(&next, 20_000, 2, |_| true), 20_001);
    }

    #[test]
    #[should_panic(expected = "every candidate was in use")]
    fn a_full_block_panics() {
        take(&AtomicU32::new(0), 20_000, 1, |_| false);
    }

    #[test]
    fn raft_pair_ports_are_both_bindable() {
        let a = raft_pair();
        let b = SocketAddr::new(a.ip(), a.port() + 1);
        let _held = (
            UdpSocket::bind(a).expect("udp a"),
            TcpListener::bind(a).expect("tcp a"),
            UdpSocket::bind(b).expect("udp b"),
            TcpListener::bind(b).expect("tcp b"),
        );
        // Neither is handed out again while the block lasts.
        for _ in 0..20 {
            let p = raft().port();
            assert!(p != a.port() && p != b.port());
        }
    }

    #[test]
    fn port_on_ipv6_loopback() {
        if UdpSocket::bind("[::1]:0").is_err() {
            return; // no IPv6 loopback here
        }
        let p = port(true);
        let _held = (
            UdpSocket::bind(("::1", p)).expect("udp"),
            TcpListener::bind(("::1", p)).expect("tcp"),
        );
    }
}
