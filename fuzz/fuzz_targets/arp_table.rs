//! Fuzz target: the parser of the kernel's neighbour table
//! (`/proc/net/arp`), read when a sender is set up on the AF_XDP transmit
//! ring.
//!
//! Any text either parses or gives a typed error; every resolved entry it
//! parses is found again as a next hop on its interface.
#![no_main]

use libfuzzer_sys::fuzz_target;
use xlane_host::xdp::neigh::{next_hop_in, parse_arp};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(entries) = parse_arp(text) else {
        return;
    };
    for e in entries.iter().filter(|e| e.flags & 0x2 != 0) {
        assert!(next_hop_in(text, e.dev, e.ip).is_ok(), "{e:?}");
    }
});
