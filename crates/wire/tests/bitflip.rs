//! Bit-flip test: 10^6 chunks per schema, every bit of every frame flipped
//! independently with probability 10^-3; no corrupted chunk or header may be accepted.

use xlane_wire::{parse_chunk, Frame, FrameBuilder, Schema, HEADER_LEN, MAX_FRAME_LEN};

/// SplitMix64: tiny, seedable, good enough for test data.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in (0, 1].
    fn unit(&mut self) -> f64 {
        ((self.next() >> 11) + 1) as f64 / (1u64 << 53) as f64
    }
    /// Number of unflipped bits before the next flipped one (geometric, parameter p).
    fn gap(&mut self, ln_1mp: f64) -> usize {
        (self.unit().ln() / ln_1mp) as usize
    }
}

#[derive(Debug, Default)]
struct Tally {
    chunks: u64,
    corrupted: u64,
    detected: u64,
    accepted_corrupted: u64,
    max_flips_in_a_chunk: u32,
    frames: u64,
    headers_corrupted: u64,
    headers_accepted_corrupted: u64,
}

fn run(schema: Schema, chunks_wanted: u64, p: f64, seed: u64) -> Tally {
    let mut rng = SplitMix(seed);
    let ln_1mp = (1.0 - p).ln();
    let clen = schema.chunk_len();
    let mut t = Tally::default();
    let mut orig = [0u8; MAX_FRAME_LEN];
    let mut buf = [0u8; MAX_FRAME_LEN];
    let mut data = [0u8; 32];
    let mut next_flip = rng.gap(ln_1mp); // bit index into the stream of all frames
    while t.chunks < chunks_wanted {
        let mut b = FrameBuilder::new(&mut orig, schema).expect("buffer holds a header");
        while b.remaining() > 0 {
            let r = rng.next();
            let len = (r % (schema.data_capacity() as u64 + 1)) as usize;
            for (i, d) in data[..len].iter_mut().enumerate() {
                *d = (r >> (8 + (i % 7) * 8)) as u8 ^ i as u8;
            }
            b.push_chunk((r >> 56) as u8, &data[..len])
                .expect("room checked");
        }
        let len = b.finish(7, t.frames, t.frames * 1000, 0).expect("finish");
        buf[..len].copy_from_slice(&orig[..len]);
        // Flip bits of this frame: positions next_flip, next_flip + gap + 1, ...
        let bits = len * 8;
        while next_flip < bits {
            buf[next_flip / 8] ^= 1 << (next_flip % 8);
            next_flip += 1 + rng.gap(ln_1mp);
        }
        next_flip -= bits;
        t.frames += 1;

        let header_changed = buf[..HEADER_LEN] != orig[..HEADER_LEN];
        t.headers_corrupted += header_changed as u64;
        if header_changed && Frame::new_checked(&buf[..len]).is_ok() {
            t.headers_accepted_corrupted += 1;
        }
        for i in 0..schema.max_chunks() {
            let at = HEADER_LEN + i * clen;
            let (got, want) = (&buf[at..at + clen], &orig[at..at + clen]);
            let flips: u32 = got
                .iter()
                .zip(want)
                .map(|(a, b)| (a ^ b).count_ones())
                .sum();
            t.chunks += 1;
            t.max_flips_in_a_chunk = t.max_flips_in_a_chunk.max(flips);
            let ok = parse_chunk(schema, got).is_ok();
            if flips == 0 {
                assert!(
                    ok,
                    "intact chunk refused (seed {seed:#x}, frame {})",
                    t.frames
                );
            } else {
                t.corrupted += 1;
                if ok {
                    t.accepted_corrupted += 1;
                } else {
                    t.detected += 1;
                }
            }
        }
    }
    t
}

#[test]
fn no_corrupted_chunk_is_accepted() {
    let seed: u64 = std::env::var("XLANE_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x0B17_F11B);
    for schema in [Schema::Chunk26, Schema::Chunk36] {
        let t = run(schema, 1_000_000, 1e-3, seed);
        println!("{schema:?} seed {seed:#x}: {t:?}");
        assert!(t.corrupted > 100_000, "flip rate too low: {t:?}");
        assert_eq!(t.accepted_corrupted, 0, "seed {seed:#x}: {t:?}");
        assert_eq!(t.headers_accepted_corrupted, 0, "seed {seed:#x}: {t:?}");
        assert_eq!(t.detected, t.corrupted);
    }
}
