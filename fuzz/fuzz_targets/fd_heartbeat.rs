//! Fuzz target: X-FD heartbeat codecs and the detector fed arbitrary input.
//!
//! Byte 0 even: the rest goes to both payload decoders; whatever decodes must
//! re-encode to the same bytes.
//!
//! Byte 0 odd: the rest is a sequence of records
//! `[op: u8][dt: u16 LE][src: u8][len: u8][len bytes]` driving an X-FD and a
//! phi detector (4 known peers, plus unknown senders) with a fake clock:
//! op % 4 = 0 raw lane datagram, 1 the bytes wrapped as the heartbeat chunk of
//! a well-formed lane frame (seq and tunnel from the bytes), 2 plain UDP
//! heartbeat, 3 a poll. Checked: no panic, every datagram counted exactly
//! once, event numbers consecutive, deadlines never in the past of the
//! last arrival.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::net::{Ipv4Addr, SocketAddrV4};
use xlane_fd::{
    Anchor, Detector, DetectorConfig, FixedTimeout, HeartbeatPayload, PeerSpec, PhiFd, PhiParams,
    PlainHeartbeat, Status, FD_PRODUCER,
};
use xlane_wire::{FrameBuilder, Schema, MAX_FRAME_LEN};

fn src(b: u8) -> SocketAddrV4 {
    SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, b % 6), 4000 + (b / 6 % 2) as u16)
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    if mode % 2 == 0 {
        if let Ok(p) = HeartbeatPayload::decode(rest) {
            assert_eq!(&p.encode()[..], rest);
        }
        if let Ok(p) = PlainHeartbeat::decode(rest) {
            assert_eq!(&p.encode()[..], rest);
        }
        return;
    }
    let peers: Vec<PeerSpec> = (0..4u8)
        .map(|i| PeerSpec {
            addr: src(i),
            tunnel: i as u32 % 2,
        })
        .collect();
    let cfg = DetectorConfig {
        period_ns: 1000,
        threshold: (mode as f64) * 10.0,
        stall_periods: Some(1 + mode as u32 % 5),
        join_deadline: (mode & 2 != 0).then_some(5000),
    };
    let Ok(mut xfd) = Detector::new(cfg, FixedTimeout::new(1000, Anchor::Arrival), &peers) else {
        return;
    };
    let params = PhiParams {
        period_ns: 1000,
        window: 1 + mode as usize % 16,
        min_std_ns: 1.0 + mode as f64,
    };
    let Ok(mut phi) = PhiFd::phi(params, mode as f64 / 16.0, &peers) else {
        return;
    };
    let mut now = 0u64;
    let mut rest = rest;
    let mut datagrams = 0u64;
    let mut next_number = [0u64; 2];
    let mut frame = [0u8; MAX_FRAME_LEN];
    while rest.len() >= 5 {
        let op = rest[0];
        now += u16::from_le_bytes([rest[1], rest[2]]) as u64;
        let s = src(rest[3]);
        let len = (rest[4] as usize).min(rest.len() - 5);
        let bytes = &rest[5..5 + len];
        rest = &rest[5 + len..];
        match op % 4 {
            0 => {
                datagrams += 1;
                let _ = xfd.on_lane_datagram(now, s, bytes);
                let _ = phi.on_lane_datagram(now, s, bytes);
            }
            1 => {
                let Ok(mut b) = FrameBuilder::new(&mut frame, Schema::Chunk26) else {
                    continue;
                };
                let chunk = &bytes[..bytes.len().min(Schema::Chunk26.data_capacity())];
                if b.push_chunk(FD_PRODUCER, chunk).is_err() {
                    continue;
                }
                let seq = bytes.first().copied().unwrap_or(0) as u64;
                let Ok(n) = b.finish((op >> 2) as u32 % 2, seq, now, 0) else {
                    continue;
                };
                datagrams += 1;
                let _ = xfd.on_lane_datagram(now, s, &frame[..n]);
                let _ = phi.on_lane_datagram(now, s, &frame[..n]);
            }
            2 => {
                datagrams += 1;
                let _ = xfd.on_plain_datagram(now, s, bytes);
                let _ = phi.on_plain_datagram(now, s, bytes);
            }
            _ => {
                for e in xfd.poll(now) {
                    assert_eq!(e.number, next_number[0]);
                    next_number[0] += 1;
                }
                for e in phi.poll(now) {
                    assert_eq!(e.number, next_number[1]);
                    next_number[1] += 1;
                }
            }
        }
        for d in [xfd.stats(), phi.stats()] {
            let counted = d.accepted + d.unknown_sender + d.unknown_tunnel + d.replay + d.malformed;
            assert_eq!(counted, datagrams, "{d:?}");
        }
        for v in xfd.peers() {
            if let (Some(dl), Some(rx)) = (v.deadline_ns, v.last_rx_ns) {
                assert!(dl > rx || cfg.threshold < 0.0, "{v:?}");
            }
            if v.heartbeats == 0 {
                assert!(matches!(v.status, Status::Unknown | Status::Suspected(_)));
            }
        }
        let _ = xfd.next_deadline();
        let _ = phi.next_deadline();
    }
});
