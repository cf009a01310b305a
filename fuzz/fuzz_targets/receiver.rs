//! Fuzz target: a sequence of arbitrary datagrams through the periodic receiver.
//!
//! Input: repeated `[len: u16 LE][delta_t: u16 LE][len & 0x7FF bytes]` records. If
//! bit 15 of `len` is set, the datagram gets a plausible header (magic, version,
//! schema, tunnel 0, length cut to its chunk count), so sequence accounting and
//! chunk delivery are reached; otherwise it goes in as is.
#![no_main]

use libfuzzer_sys::fuzz_target;
use xlane_lane::{PeriodicReceiver, TunnelParams};
use xlane_wire::{field, Schema, HEADER_LEN, MAGIC, MAX_FRAME_LEN, VERSION};

fuzz_target!(|data: &[u8]| {
    let schema = Schema::Chunk26;
    let params = TunnelParams {
        tunnel: 0,
        period_ns: 1_000,
        max_packet: MAX_FRAME_LEN,
        schema,
    };
    let mut rx = PeriodicReceiver::new(params);
    let mut now = 0u64;
    let mut rest = data;
    let mut datagrams = 0u64;
    let mut buf = [0u8; 2048];
    while rest.len() >= 4 {
        datagrams += 1;
        let raw_len = u16::from_le_bytes([rest[0], rest[1]]);
        now += u16::from_le_bytes([rest[2], rest[3]]) as u64;
        rest = &rest[4..];
        let take = ((raw_len & 0x7FF) as usize).min(rest.len());
        let (dgram, tail) = rest.split_at(take);
        rest = tail;
        buf[..take].copy_from_slice(dgram);
        let mut len = take;
        if raw_len & 0x8000 != 0 && len >= HEADER_LEN {
            buf[field::MAGIC].copy_from_slice(&MAGIC);
            buf[field::VERSION] = VERSION;
            buf[field::SCHEMA] = schema.as_u8();
            buf[field::TUNNEL].fill(0);
            let count = buf[field::CHUNK_COUNT] as usize % (schema.max_chunks() + 1);
            buf[field::CHUNK_COUNT] = count as u8;
            len = len.min(schema.frame_len(count));
        }
        let mut n = 0usize;
        if let Ok(f) = rx.handle_datagram(now, &buf[..len], &mut |d| {
            assert!(d.data.len() <= schema.data_capacity());
            n += 1;
        }) {
            assert_eq!(f.chunks, n);
        }
    }
    // Every datagram lands in exactly one counter.
    let st = rx.stats();
    let counted = st.frames
        + st.malformed
        + st.oversized
        + st.wrong_tunnel
        + st.wrong_schema
        + st.duplicates
        + st.stale;
    assert_eq!(counted, datagrams);
});
