//! Authenticated datagrams from the network, and cluster key files: the
//! opener refuses with a typed error or returns a payload that a sealer
//! with the same key produced (so the tag checked out), never panics, and
//! never accepts the same datagram twice; the key file parser refuses
//! with a typed error or yields a ring that writes back to an equal ring.
//! The same bytes as a TCP stream's hello and frames
//! (`xlane_auth::stream`): refused with a typed error, a declared length
//! never trusted before its tag, and what a sealer of the connection wrote
//! opens in order.

#![no_main]

use libfuzzer_sys::fuzz_target;
use xlane_auth::stream::{self, BODY_TAG_LEN, HEADER_LEN, HELLO_LEN, NONCE_LEN};
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
    // A stream: the bytes as a hello, then as frames on a real connection.
    let nonce = [7u8; NONCE_LEN];
    if let Some(h) = data.get(..HELLO_LEN) {
        let mut hello = [0u8; HELLO_LEN];
        hello.copy_from_slice(h);
        let _ = stream::accept(&ring, 1, &nonce, &hello);
    }
    let (hello, mut sealer) = stream::connect(2, &Key::from_bytes([5; 16]), 9, 1, &nonce);
    let (sender, mut opener) = stream::accept(&ring, 1, &nonce, &hello).expect("a real hello");
    assert_eq!(sender, 9);
    let mut rest = data;
    while rest.len() >= HEADER_LEN {
        let mut h = [0u8; HEADER_LEN];
        h.copy_from_slice(&rest[..HEADER_LEN]);
        let Ok(len) = opener.header(&h, 1 << 16) else { break };
        let len = len as usize;
        let Some(body) = rest.get(HEADER_LEN..HEADER_LEN + len) else { break };
        let Some(t) = rest.get(HEADER_LEN + len..HEADER_LEN + len + BODY_TAG_LEN) else { break };
        let mut tag = [0u8; BODY_TAG_LEN];
        tag.copy_from_slice(t);
        if opener.body(body, &tag).is_err() {
            break;
        }
        rest = &rest[HEADER_LEN + len + BODY_TAG_LEN..];
    }
    // Frames sealed on the connection open in order on a fresh opener.
    let (_, mut fresh) = stream::accept(&ring, 1, &nonce, &hello).expect("a real hello");
    let mut frame = Vec::new();
    for part in data.chunks(64).take(4) {
        sealer.seal(part, &mut frame);
        let mut h = [0u8; HEADER_LEN];
        h.copy_from_slice(&frame[..HEADER_LEN]);
        assert_eq!(fresh.header(&h, 1 << 16), Ok(part.len() as u32));
        let mut tag = [0u8; BODY_TAG_LEN];
        tag.copy_from_slice(&frame[HEADER_LEN + part.len()..]);
        assert_eq!(fresh.body(&frame[HEADER_LEN..HEADER_LEN + part.len()], &tag), Ok(()));
    }
});
