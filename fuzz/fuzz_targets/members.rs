//! Fuzz the member-address decoders of xlane-kv: the addresses a membership
//! change carries, the member table, and the state machine's snapshot that
//! holds it. None may panic; what decodes re-encodes to the same bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use xlane_kv::members::{decode_member, decode_table, encode_member, encode_table};
use xlane_kv::state_machine::decode_snapshot;

fuzz_target!(|data: &[u8]| {
    if let Ok(p) = decode_member(data) {
        let again = encode_member(&p).expect("a decoded member encodes");
        assert_eq!(again.as_slice(), data, "member encoding is canonical");
    }
    if let Ok(t) = decode_table(data) {
        let again = encode_table(&t).expect("a decoded table encodes");
        assert_eq!(again.as_slice(), data, "table encoding is canonical");
    }
    let _ = decode_snapshot(data);
});
