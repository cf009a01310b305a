//! Fuzz target: arbitrary bytes through every parser of network input in
//! xlane-lancet: the synthetic header (as a datagram and as a byte stream
//! cut into messages), the client's response parsers for echo, sockperf and
//! synthetic, the sockperf output parser, and the R2P2 agent's reading of
//! a datagram (the input as one packet, and as a run of 4-byte records
//! `[index hi, index lo, count or 0, _]` through one reply's progress: it
//! completes at most once, and only when every index below its count came).
//!
//! Each input is also tried with a valid synthetic header prefix (magic,
//! version, kind, length patched in) so that the length and reserved-field
//! checks are reached without the fuzzer finding the magic first.
#![no_main]

use libfuzzer_sys::fuzz_target;
use xlane_lancet::proto::{self, App, MAX_MESSAGE_LEN, SYN_HEADER_LEN, SYN_MAGIC, SYN_VERSION};
use xlane_lancet::r2p2;

fn check(data: &[u8]) {
    if let Ok(h) = proto::parse_synthetic(data) {
        assert_eq!(h.len as usize, data.len());
        assert!(data.len() >= SYN_HEADER_LEN && data.len() <= MAX_MESSAGE_LEN);
    }
    for app in [App::Echo, App::Sockperf, App::Synthetic] {
        for request_len in [8usize, 14, 32, 64, data.len()] {
            if let Ok(r) = app.parse_response(data, request_len) {
                assert_eq!(r.server_ns.is_some(), app == App::Synthetic);
            }
            // Cut the input as a stream: every message must fit and progress.
            let mut at = 0;
            let mut steps = 0;
            while let Ok(Some(n)) = app.frame_len(&data[at..], request_len) {
                assert!(n > 0 && n <= MAX_MESSAGE_LEN.max(request_len));
                assert!(at + n <= data.len());
                let _ = app.parse_response(&data[at..at + n], request_len);
                at += n;
                steps += 1;
                assert!(steps <= data.len());
            }
        }
    }
    if let Ok(s) = std::str::from_utf8(data) {
        let _ = xlane_lancet::sockperf::parse(s);
    }
    if let Ok(r2p2::Incoming::Reply { payload, .. }) = r2p2::parse_incoming(data) {
        assert!(payload.len() + 8 == data.len());
    }
    let mut p = r2p2::ReplyProgress::default();
    let mut count = None;
    let mut seen = std::collections::BTreeSet::new();
    let mut done = false;
    for rec in data.chunks_exact(4) {
        let index = u16::from_be_bytes([rec[0], rec[1]]);
        let c = (rec[2] != 0).then_some(u16::from(rec[2]));
        match p.add(index, c) {
            r2p2::Progress::Complete => {
                assert!(!done, "a reply completes once");
                done = true;
            }
            r2p2::Progress::Duplicate => assert!(seen.contains(&index)),
            _ => {}
        }
        if c.is_some_and(|c| c <= r2p2::MAX_REPLY_PACKETS) {
            count = c;
        }
        if index < r2p2::MAX_REPLY_PACKETS {
            seen.insert(index);
        }
        if done {
            let n = count.expect("completion needs the first packet");
            assert!((0..n).all(|i| seen.contains(&i)));
            return;
        }
    }
}

fuzz_target!(|data: &[u8]| {
    check(data);
    if data.len() >= SYN_HEADER_LEN {
        let mut buf = data.to_vec();
        buf[8..12].copy_from_slice(&SYN_MAGIC);
        buf[12] = SYN_VERSION;
        buf[13] = 1 + (buf[13] & 1);
        let len = buf.len().min(MAX_MESSAGE_LEN) as u32;
        buf[16..20].copy_from_slice(&len.to_be_bytes());
        check(&buf);
    }
});
