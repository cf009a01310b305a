//! 1Pipe's control messages from the network (the recovery protocol, and
//! the lane beacon): each parser refuses with a typed error or accepts,
//! and what it accepts encodes to the same bytes; any recovery message is
//! fed to a coordinator, which must not panic.

#![no_main]

use libfuzzer_sys::fuzz_target;
use std::net::SocketAddrV4;
use xlane_pipe::lane::LaneBeacon;
use xlane_pipe::{Coordinator, Ctl};

fuzz_target!(|data: &[u8]| {
    let procs: Vec<(u32, SocketAddrV4)> = (1..=3)
        .map(|p| (p, SocketAddrV4::new([10, 0, 0, p as u8].into(), 7400)))
        .collect();
    let mut c = Coordinator::new(&procs, 10);
    // Datagrams, each prefixed by its length; the coordinator decides
    // every proposal as made.
    let mut rest = data;
    let mut now = 0;
    while let Some((&len, tail)) = rest.split_first() {
        let n = (len as usize).min(tail.len());
        let (bytes, more) = tail.split_at(n);
        rest = more;
        now += 7;
        if let Ok(b) = LaneBeacon::decode(bytes) {
            assert_eq!(&b.encode()[..], bytes);
        }
        let Ok(m) = Ctl::parse(bytes) else { continue };
        let mut out = Vec::new();
        m.emit(&mut out);
        assert_eq!(out, bytes);
        let from = SocketAddrV4::new([10, 0, 0, len % 4].into(), 7400);
        c.on_ctl(from, m, now);
        c.handle_timeout(now);
        while let Some(o) = c.poll() {
            if let xlane_pipe::CoordOut::Decide { proc, t_fail } = o {
                c.on_decided(proc, t_fail, now);
            }
        }
    }
});
