//! LZF, the compression of Redis's RDB strings (the liblzf format).
//!
//! A compressed stream is a sequence of items, each starting with a
//! control byte `c`:
//!
//! * `c < 32`: a literal run of `c + 1` bytes that follow.
//! * otherwise a back reference: length `(c >> 5) + 2`, where a 3-bit
//!   length of 7 is extended by the next byte (`7 + byte + 2`, so at most
//!   264); then the low byte of the distance. The distance minus one is
//!   `(c & 31) << 8 | low byte` (at most 8192 back). The bytes are copied
//!   one by one, so a reference may overlap its own output.
//!
//! The compressor here is this module's own greedy matcher (a hash of the
//! next three bytes to their last position): its output is valid LZF that
//! Redis decompresses, not necessarily the bytes Redis's compressor writes.

/// Longest literal run.
const MAX_LIT: usize = 32;
/// Longest back reference.
const MAX_REF: usize = 7 + 255 + 2;
/// Farthest back reference.
const MAX_DIST: usize = 1 << 13;
/// The most output bytes one input byte can produce (264 bytes from a
/// 3-byte reference).
pub(crate) const MAX_EXPANSION: u64 = 88;
const HASH_BITS: u32 = 14;

fn hash3(b: &[u8], i: usize) -> usize {
    let v = (u32::from(b[i]) << 16) | (u32::from(b[i + 1]) << 8) | u32::from(b[i + 2]);
    (v.wrapping_mul(0x9e37_79b1) >> (32 - HASH_BITS)) as usize
}

fn push_literals(out: &mut Vec<u8>, lits: &[u8]) {
    for run in lits.chunks(MAX_LIT) {
        out.push((run.len() - 1) as u8);
        out.extend_from_slice(run);
    }
}

/// Compresses `input`; `None` when the result would be longer than
/// `max_out` bytes (Redis asks for at most `len - 4`) or `input` is empty.
pub(crate) fn compress(input: &[u8], max_out: usize) -> Option<Vec<u8>> {
    let n = input.len();
    if n == 0 {
        return None;
    }
    let mut out = Vec::with_capacity(max_out.min(n) + 1);
    // Position + 1 of the last occurrence of each 3-byte hash (0: none).
    let mut table = vec![0usize; 1 << HASH_BITS];
    let mut lit_start = 0;
    let mut ip = 0;
    while ip + 2 < n {
        let h = hash3(input, ip);
        let cand = table[h];
        table[h] = ip + 1;
        if cand > 0 {
            let r = cand - 1;
            let dist = ip - r;
            if dist <= MAX_DIST && input[r..r + 3] == input[ip..ip + 3] {
                let max_len = (n - ip).min(MAX_REF);
                let mut len = 3;
                while len < max_len && input[r + len] == input[ip + len] {
                    len += 1;
                }
                push_literals(&mut out, &input[lit_start..ip]);
                let l = len - 2;
                let off = dist - 1;
                if l < 7 {
                    out.push(((l << 5) | (off >> 8)) as u8);
                } else {
                    out.push(((7 << 5) | (off >> 8)) as u8);
                    out.push((l - 7) as u8);
                }
                out.push((off & 0xff) as u8);
                if out.len() > max_out {
                    return None;
                }
                let end = ip + len;
                for p in ip + 1..end.min(n - 2) {
                    table[hash3(input, p)] = p + 1;
                }
                ip = end;
                lit_start = ip;
                continue;
            }
        }
        ip += 1;
        if out.len() + (ip - lit_start) > max_out {
            return None;
        }
    }
    push_literals(&mut out, &input[lit_start..]);
    if out.len() > max_out {
        return None;
    }
    Some(out)
}

/// Decompresses `input` into exactly `out_len` bytes, with Redis's check
/// (`lzf_decompress(...) == out_len`): `None` on a malformed stream (a
/// truncated item, a reference before the start, output past `out_len`)
/// or when the stream ends short of `out_len`. As in Redis, an `out_len`
/// of 0 always gives the empty string (liblzf reports its errors as a
/// length of 0). Memory grows with the bytes actually produced, never
/// with `out_len` alone.
pub(crate) fn decompress(input: &[u8], out_len: u64) -> Option<Vec<u8>> {
    if out_len == 0 {
        return Some(Vec::new());
    }
    if out_len > (input.len() as u64).saturating_mul(MAX_EXPANSION) {
        return None;
    }
    let out_len = usize::try_from(out_len).ok()?;
    let mut out: Vec<u8> = Vec::with_capacity(out_len.min(input.len().saturating_mul(4)));
    let mut ip = 0;
    while let Some(&c) = input.get(ip) {
        ip += 1;
        let ctrl = usize::from(c);
        if ctrl < 32 {
            let run = ctrl + 1;
            if out.len() + run > out_len {
                return None;
            }
            out.extend_from_slice(input.get(ip..ip + run)?);
            ip += run;
        } else {
            let mut len = ctrl >> 5;
            if len == 7 {
                len += usize::from(*input.get(ip)?);
                ip += 1;
            }
            let low = usize::from(*input.get(ip)?);
            ip += 1;
            let dist = ((ctrl & 0x1f) << 8) + low + 1;
            let len = len + 2;
            if out.len() + len > out_len || dist > out.len() {
                return None;
            }
            let start = out.len() - dist;
            for i in start..start + len {
                let b = *out.get(i)?;
                out.push(b);
            }
        }
    }
    (out.len() == out_len).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decompresses_redis_output() {
        // The LZF part of Redis 7.0.15's DUMP of a string of 40 'a'.
        let z = b"\x01aa\xe0\x1b\x00\x01aa";
        assert_eq!(decompress(z, 40), Some(vec![b'a'; 40]));
        assert_eq!(decompress(z, 39), None);
        assert_eq!(decompress(z, 41), None);
        assert_eq!(decompress(&z[..8], 40), None);
        assert_eq!(decompress(z, 0), Some(vec![]));
    }

    #[test]
    fn refuses_malformed_streams() {
        let cases: &[(&[u8], u64)] = &[
            (b"\x20\x00", 3),        // reference before the start
            (b"\x00a\x20", 3),       // truncated reference
            (b"\x00a\xe0", 300),     // truncated long reference
            (b"\x00a\xe0\x01", 300), // missing distance byte
            (b"\x05ab", 6),          // truncated literal run
            (b"\x01ab", 1),          // output past the length
            (b"", 1),
        ];
        for (z, len) in cases {
            assert_eq!(decompress(z, *len), None, "{z:?}");
        }
        // A length the input cannot possibly produce.
        assert_eq!(decompress(b"\x00a", 1 << 40), None);
    }

    #[test]
    fn round_trips() {
        let mut seed = 7u64;
        let mut rnd = || {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) as u8
        };
        let mut inputs: Vec<Vec<u8>> = vec![
            vec![b'a'; 10_000],
            b"abcabcabcabcabcabcabcabcabcabcabcabc".to_vec(),
            (0..70_000u32).map(|i| (i % 251) as u8).collect(),
        ];
        inputs.push((0..5000).map(|_| rnd() % 4).collect());
        inputs.push((0..5000).map(|_| rnd()).collect());
        for input in &inputs {
            match compress(input, input.len() - 4) {
                Some(z) => {
                    assert!(z.len() <= input.len() - 4);
                    assert_eq!(
                        decompress(&z, input.len() as u64).as_deref(),
                        Some(&input[..])
                    );
                }
                None => assert!(input.len() == 5000, "only random bytes are incompressible"),
            }
        }
        assert_eq!(compress(b"", 10), None);
        let z = compress(b"xyz", 10).unwrap();
        assert_eq!(decompress(&z, 3).unwrap(), b"xyz");
    }
}
