//! `RESTORE` payloads from the network (`xlane_kv::data::rdb`): any bytes,
//! as an object alone and as a payload with a valid footer, must decode
//! or be refused with a typed error, never panic nor allocate beyond the
//! input; a value that decodes must `DUMP` to a payload that restores to
//! the same value.

#![no_main]

use libfuzzer_sys::fuzz_target;
use xlane_kv::data::rdb;

fuzz_target!(|data: &[u8]| {
    let _ = rdb::load_object(data);
    let _ = rdb::restore(data);
    let mut payload = data.to_vec();
    payload.extend_from_slice(&rdb::RDB_VERSION.to_le_bytes());
    let crc = rdb::crc64(&payload);
    payload.extend_from_slice(&crc.to_le_bytes());
    if let Ok(v) = rdb::restore(&payload) {
        let again = rdb::dump(&v);
        assert_eq!(rdb::restore(&again), Ok(v));
    }
});
