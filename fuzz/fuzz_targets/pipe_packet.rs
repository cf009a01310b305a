//! 1Pipe packets from the network: the view either refuses the bytes with
//! a typed error or re-emits them byte for byte (unknown flag bits
//! cleared); any packet it accepts is fed to a receiver, a hop and a
//! sender, none of which may panic, and the hop's barriers never go back.

#![no_main]

use libfuzzer_sys::fuzz_target;
use xlane_pipe::wire::{field, Packet, HEADER_LEN};
use xlane_pipe::{AggConfig, Aggregator, Receiver, ReceiverConfig, Sender, SenderConfig};

fuzz_target!(|data: &[u8]| {
    let mut receiver = Receiver::new(
        1,
        ReceiverConfig {
            max_held: 16,
            max_bytes: 4096,
            skew_ns: Some(500),
        },
    );
    let mut hop = Aggregator::new(AggConfig::default());
    hop.add_input(0, 0).unwrap();
    hop.add_input(1, 0).unwrap();
    let mut sender = Sender::new(1, SenderConfig::default());
    let _ = sender.scatter(5, &[(2, b"a"), (3, b"b")], true);
    // The input is a series of datagrams, each prefixed by its length.
    let mut rest = data;
    let mut now = 0u64;
    let mut last = (0u64, 0u64);
    while let Some((&len, tail)) = rest.split_first() {
        let n = (len as usize).min(tail.len());
        let (bytes, more) = tail.split_at(n);
        rest = more;
        now += 1_000;
        let Ok(p) = Packet::new_checked(bytes) else {
            continue;
        };
        let mut out = vec![0u8; bytes.len()];
        let w = p.header().emit(p.payload(), &mut out).unwrap();
        assert_eq!(w, bytes.len());
        let mut want = bytes.to_vec();
        want[field::FLAGS] &= 0x01;
        assert_eq!(out, want);
        assert!(bytes.len() >= HEADER_LEN);
        let h = *p.header();
        let _ = receiver.on_packet(&h, p.payload(), now);
        while receiver.poll_deliver(now).is_some() {}
        while receiver.poll_reply().is_some() {}
        if let Ok(b) = hop.on_packet(u32::from(len & 1), h.barrier, h.commit, now) {
            assert!(b.0 >= last.0 && b.1 >= last.1 && b.1 <= b.0);
            last = b;
        }
        hop.handle_timeout(now);
        sender.on_reply(&h);
        sender.handle_timeout(now);
        while sender.poll_transmit().is_some() {}
    }
});
