//! Authenticated datagrams from the network, and cluster key files: the
//! opener refuses with a typed error or returns a payload that a sealer
//! with the same key produced (so the tag checked out), never panics, and
//! never accepts the same datagram twice; the key file parser refuses
//! with a typed error or yields a ring that writes back to an equal ring.

#![no_main]

use libfuzzer_sys::fuzz_target;
use xlane_auth::{Key, KeyRing, Opener, Sealer};

fuzz_target!(|data: &[u8]| {
    let ring = KeyRing::from_pairs(&[(1, Key::from_bytes([3; 16])), (2, Key::from_bytes([5; 16]))]);
    let mut o = Opener::new(ring.clone());
    // Datagrams, each prefixed by its length.
    let mut rest = data;
    while let Some((&len, tail)) = rest.split_first() {
        let n = (len as usize).min(tail.len());
        let (bytes, more) = tail.split_at(n);
        rest = more;
        if let Ok(x) = o.open(bytes, 0) {
            assert!(x.payload.len() + xlane_auth::TRAILER_LEN == bytes.len());
            assert!(o.open(bytes, 0).is_err(), "accepted twice");
        }
    }
    // A datagram sealed here always opens once.
    let mut s = Sealer::new(2, Key::from_bytes([5; 16]), 9);
    let mut buf = vec![0u8; data.len() + xlane_auth::TRAILER_LEN];
    buf[..data.len()].copy_from_slice(data);
    let n = s.seal(&mut buf, data.len(), 0, u64::MAX / 2).unwrap();
    assert_eq!(o.open(&buf[..n], 0).map(|x| x.payload), Ok(data));
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(r) = KeyRing::from_toml(text) {
            assert_eq!(KeyRing::from_toml(&r.to_toml()), Ok(r));
        }
    }
});
