//! Fuzz target: arbitrary bytes through every parser of network input in
//! xlane-lancet: the synthetic header (as a datagram and as a byte stream
//! cut into messages), the client's response parsers for echo, sockperf and
//! synthetic, and the sockperf output parser.
//!
//! Each input is also tried with a valid synthetic header prefix (magic,
//! version, kind, length patched in) so that the length and reserved-field
//! checks are reached without the fuzzer finding the magic first.
#![no_main]

use libfuzzer_sys::fuzz_target;
use xlane_lancet::proto::{self, App, MAX_MESSAGE_LEN, SYN_HEADER_LEN, SYN_MAGIC, SYN_VERSION};

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
