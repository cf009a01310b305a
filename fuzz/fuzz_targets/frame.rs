//! Fuzz target: arbitrary bytes through the lane frame parser.
//!
//! CRC checks are skipped under `cfg(fuzzing)`, so the fuzzer reaches the
//! version/schema/count/length checks and the per-chunk length/padding checks.
//! Each input is parsed twice: as is, and with a plausible header prefix (magic,
//! version, schema, length cut to the announced chunk count) so that the chunk
//! parser is reached without the fuzzer having to discover the magic first.
#![no_main]

use libfuzzer_sys::fuzz_target;
use xlane_wire::{
    field, parse_chunk, stamp_send_time, Frame, Schema, HEADER_LEN, MAGIC, MAX_FRAME_LEN, VERSION,
};

fn check(data: &[u8]) {
    if let Ok(frame) = Frame::new_checked(data) {
        let h = frame.header();
        assert_eq!(frame.len(), h.frame_len());
        assert!(frame.len() <= MAX_FRAME_LEN);
        let mut n = 0;
        for c in frame.chunks().flatten() {
            assert!(c.data.len() <= h.schema.data_capacity());
            n += 1;
        }
        assert!(n <= h.chunk_count as usize);
        assert_eq!(frame.chunks().count(), h.chunk_count as usize);
    }
    for s in [Schema::Chunk26, Schema::Chunk36] {
        if data.len() >= s.chunk_len() {
            let _ = parse_chunk(s, &data[..s.chunk_len()]);
        }
    }
    let mut copy = [0u8; 64];
    let n = data.len().min(copy.len());
    copy[..n].copy_from_slice(&data[..n]);
    let _ = stamp_send_time(&mut copy[..n], 42);
}

fuzz_target!(|data: &[u8]| {
    check(data);
    if data.len() >= HEADER_LEN {
        let mut buf = [0u8; MAX_FRAME_LEN];
        let n = data.len().min(MAX_FRAME_LEN);
        buf[..n].copy_from_slice(&data[..n]);
        buf[field::MAGIC].copy_from_slice(&MAGIC);
        buf[field::VERSION] = VERSION;
        let schema = if buf[field::SCHEMA] & 1 == 0 {
            Schema::Chunk26
        } else {
            Schema::Chunk36
        };
        buf[field::SCHEMA] = schema.as_u8();
        let count = buf[field::CHUNK_COUNT] as usize % (schema.max_chunks() + 1);
        buf[field::CHUNK_COUNT] = count as u8;
        let len = n.min(schema.frame_len(count));
        check(&buf[..len]);
    }
});
