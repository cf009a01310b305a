//! The replicated scripts as bytes from the network or a file: a
//! snapshot's `SCR1` section (`Scripts::decode`) and a `FUNCTION RESTORE`
//! payload (`admin::undump`). Any bytes decode or are refused, never panic
//! nor allocate beyond the input; what decodes encodes back to bytes that
//! decode to the same.

#![no_main]

use libfuzzer_sys::fuzz_target;
use xlane_kv::script::admin;
use xlane_kv::script::state::Scripts;

fuzz_target!(|data: &[u8]| {
    if let Ok((s, _)) = Scripts::decode(data) {
        let mut again = Vec::new();
        s.encode(&mut again);
        assert_eq!(Scripts::decode(&again).map(|(t, r)| (t, r.len())), Ok((s.clone(), 0)));
        let payload = admin::dump(&s);
        assert!(admin::undump(&payload).is_some());
    }
    let _ = admin::undump(data);
});
