//! Fuzz target: X-Raft's chunk stream (raft datagrams carried as lane
//! chunks). Arbitrary chunk sequences, with resets where the input says,
//! never panic the reassembler, never yield more than its limit, and any
//! datagram split and fed back whole comes out unchanged, even after
//! garbage.
#![no_main]

use libfuzzer_sys::fuzz_target;
use xlane_xraft_net::chunk_stream::{split, StreamReassembler};

const MAX: usize = 512;

fuzz_target!(|input: &[u8]| {
    // Garbage chunks: each input byte pair = (length, flags); data follows.
    let mut r = StreamReassembler::new(MAX);
    let mut rest = input;
    while let [len, flags, tail @ ..] = rest {
        let n = (*len as usize % 31).min(tail.len());
        let mut chunk = vec![*flags];
        chunk.extend_from_slice(&tail[..n]);
        if *len == 0xFF {
            r.reset();
        }
        if let Ok(Some(d)) = r.push(&chunk) {
            assert!(d.len() <= MAX);
        }
        rest = &tail[n..];
    }
    // Then a real datagram made of the input: it must come back intact.
    let d = &input[..input.len().min(MAX)];
    if d.is_empty() {
        return;
    }
    let cap = 2 + input.first().map_or(0, |b| *b as usize % 29);
    let mut scratch = vec![0u8; cap];
    let mut chunks = Vec::new();
    split(d, cap, &mut scratch, &mut |c| chunks.push(c.to_vec())).expect("split");
    let mut out = None;
    for c in &chunks {
        assert!(c.len() <= cap);
        if let Some(g) = r.push(c).expect("valid chunk") {
            out = Some(g.to_vec());
        }
    }
    assert_eq!(out.as_deref(), Some(d));
});
