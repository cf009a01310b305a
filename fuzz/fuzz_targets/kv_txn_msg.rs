//! The cross-shard transaction messages (`xlane_kv::xshard::msg`) from the
//! network: a shard's part of a transaction (inside a 1Pipe message) and a
//! shard's reply (a datagram to the proxy). Each decoder refuses with a
//! typed error or accepts; a part it accepts encodes back to the same
//! bytes, and a reply to bytes that decode again.

#![no_main]

use libfuzzer_sys::fuzz_target;
use xlane_kv::xshard::msg::{ShardReply, SubTxn};

fuzz_target!(|data: &[u8]| {
    if let Ok(t) = SubTxn::decode(data) {
        let mut out = Vec::new();
        t.encode(&mut out).unwrap();
        assert_eq!(out, data);
    }
    if let Ok(r) = ShardReply::decode(data) {
        let mut out = Vec::new();
        r.encode(&mut out);
        // Replies are sent in RESP2, which flattens RESP3's maps and sets
        // into arrays: what is sent must decode again, with the same id.
        let again = ShardReply::decode(&out).unwrap();
        assert_eq!((again.id, again.shard), (r.id, r.shard));
    }
});
