//! [`KeyHash`]: how the key space hashes a key — SipHash-1-2 over the
//! whole key in one pass, keyed with 128 random bits chosen once per
//! process, as Redis hashes its dictionaries.
//!
//! A client chooses the keys, so the hash must be keyed: with a known
//! function it could send keys that all collide and make every lookup a
//! scan. SipHash keeps that out of reach; one compression round per
//! 8 bytes and two final rounds (Redis's choice) cost about half of the
//! standard library's SipHash-1-3 through its buffering `Hasher`, which
//! the key space's profile showed at a quarter of a `GET`.
//!
//! The order of a map's keys depends on the process's random key, so
//! nothing replicated may depend on it (no member's key is another's):
//! what needs an order sorts, as before.

use std::hash::{BuildHasher, Hasher};
use std::sync::OnceLock;

/// Builds [`KeyHasher`]s, all with the process's key.
#[derive(Clone, Copy, Debug)]
pub struct KeyHash {
    k0: u64,
    k1: u64,
}

impl Default for KeyHash {
    fn default() -> KeyHash {
        static KEY: OnceLock<KeyHash> = OnceLock::new();
        *KEY.get_or_init(|| {
            // The standard library's per-process random source.
            let s = std::collections::hash_map::RandomState::new();
            KeyHash {
                k0: s.hash_one(0x6b65_7930_u64),
                k1: s.hash_one(0x6b65_7931_u64),
            }
        })
    }
}

impl BuildHasher for KeyHash {
    type Hasher = KeyHasher;
    fn build_hasher(&self) -> KeyHasher {
        KeyHasher {
            k0: self.k0,
            k1: self.k1,
            acc: 0,
        }
    }
}

/// Hashes what is written to it: each `write` of bytes is one SipHash-1-2
/// of them, keyed with the process's key and what was written before
/// (a key is written as its length, then its bytes).
#[derive(Clone, Debug)]
pub struct KeyHasher {
    k0: u64,
    k1: u64,
    acc: u64,
}

impl Hasher for KeyHasher {
    fn write(&mut self, bytes: &[u8]) {
        self.acc = sip12(self.k0 ^ self.acc, self.k1, bytes);
    }
    fn write_usize(&mut self, n: usize) {
        // A length: folded into the next write's key (SipHash's last
        // block holds the length too).
        self.acc = self.acc.rotate_left(29) ^ n as u64;
    }
    fn finish(&self) -> u64 {
        self.acc
    }
}

#[inline(always)]
fn round(v: &mut [u64; 4]) {
    v[0] = v[0].wrapping_add(v[1]);
    v[1] = v[1].rotate_left(13) ^ v[0];
    v[0] = v[0].rotate_left(32);
    v[2] = v[2].wrapping_add(v[3]);
    v[3] = v[3].rotate_left(16) ^ v[2];
    v[0] = v[0].wrapping_add(v[3]);
    v[3] = v[3].rotate_left(21) ^ v[0];
    v[2] = v[2].wrapping_add(v[1]);
    v[1] = v[1].rotate_left(17) ^ v[2];
    v[2] = v[2].rotate_left(32);
}

/// SipHash-1-2 of `data` under the key (`k0`, `k1`): the SipHash
/// construction with one compression round per 8-byte word and two
/// finalization rounds.
pub fn sip12(k0: u64, k1: u64, data: &[u8]) -> u64 {
    let mut v = [
        k0 ^ 0x736f_6d65_7073_6575,
        k1 ^ 0x646f_7261_6e64_6f6d,
        k0 ^ 0x6c79_6765_6e65_7261,
        k1 ^ 0x7465_6462_7974_6573,
    ];
    let mut words = data.chunks_exact(8);
    for w in words.by_ref() {
        let m = u64::from_le_bytes(w.try_into().expect("8 bytes"));
        v[3] ^= m;
        round(&mut v);
        v[0] ^= m;
    }
    let tail = words.remainder();
    let mut last = [0u8; 8];
    last[..tail.len()].copy_from_slice(tail);
    let m = u64::from_le_bytes(last) | ((data.len() as u64) << 56);
    v[3] ^= m;
    round(&mut v);
    v[0] ^= m;
    v[2] ^= 0xff;
    round(&mut v);
    round(&mut v);
    v[0] ^ v[1] ^ v[2] ^ v[3]
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::BuildHasher;

    /// SipHash-1-2 is SipHash-2-4 with fewer rounds; with 2 and 4 rounds
    /// the same construction gives the published test vectors, so the
    /// construction is checked there and the round counts here.
    fn sip(c: usize, d: usize, k0: u64, k1: u64, data: &[u8]) -> u64 {
        let mut v = [
            k0 ^ 0x736f_6d65_7073_6575,
            k1 ^ 0x646f_7261_6e64_6f6d,
            k0 ^ 0x6c79_6765_6e65_7261,
            k1 ^ 0x7465_6462_7974_6573,
        ];
        let block = |v: &mut [u64; 4], m: u64| {
            v[3] ^= m;
            (0..c).for_each(|_| round(v));
            v[0] ^= m;
        };
        let mut words = data.chunks_exact(8);
        for w in words.by_ref() {
            block(&mut v, u64::from_le_bytes(w.try_into().unwrap()));
        }
        let mut last = [0u8; 8];
        last[..words.remainder().len()].copy_from_slice(words.remainder());
        block(
            &mut v,
            u64::from_le_bytes(last) | ((data.len() as u64) << 56),
        );
        v[2] ^= 0xff;
        (0..d).for_each(|_| round(&mut v));
        v[0] ^ v[1] ^ v[2] ^ v[3]
    }

    #[test]
    fn the_construction_gives_siphash_2_4s_published_vectors() {
        // Key 00 01 .. 0f; messages 00 01 .. (n-1) (the SipHash paper's
        // appendix and its reference vectors).
        let k0 = u64::from_le_bytes([0, 1, 2, 3, 4, 5, 6, 7]);
        let k1 = u64::from_le_bytes([8, 9, 10, 11, 12, 13, 14, 15]);
        let msg: Vec<u8> = (0u8..64).collect();
        for (n, want) in [
            (0, 0x726f_db47_dd0e_0e31u64),
            (1, 0x74f8_39c5_93dc_67fd),
            (8, 0x93f5_f579_9a93_2462),
            (15, 0xa129_ca61_49be_45e5),
        ] {
            assert_eq!(sip(2, 4, k0, k1, &msg[..n]), want, "n={n}");
        }
        for n in 0..64 {
            #[allow(deprecated)]
            let mut std24 = std::hash::SipHasher::new_with_keys(k0, k1);
            std24.write(&msg[..n]);
            assert_eq!(sip(2, 4, k0, k1, &msg[..n]), std24.finish(), "n={n}");
        }
        for n in [0, 1, 7, 8, 9, 16, 17, 63] {
            assert_eq!(sip12(k0, k1, &msg[..n]), sip(1, 2, k0, k1, &msg[..n]));
        }
    }

    #[test]
    fn keys_hash_alike_within_a_process_and_apart_by_content() {
        let (a, b) = (KeyHash::default(), KeyHash::default());
        let key = b"key:000000000123".to_vec();
        assert_eq!(a.hash_one(&key), b.hash_one(&key));
        assert_ne!(a.hash_one(&key), a.hash_one(b"key:000000000124".to_vec()));
        // The length counts: a key and its zero-padded twin differ.
        assert_ne!(a.hash_one(b"ab".to_vec()), a.hash_one(b"ab\0".to_vec()));
        assert_ne!(a.hash_one(Vec::<u8>::new()), a.hash_one(vec![0u8]));
    }
}
