//! Access-control input from a file, the network and the log
//! (`xlane_kv::acl`): any bytes as an ACL file (`--aclfile`, `ACL LOAD`),
//! as `ACL SETUSER` rules (split at spaces) and as the replicated user
//! table's binary form must be applied or refused with a typed error,
//! never panic; a table that decodes encodes back to the same bytes'
//! meaning (decode of its encoding gives it again).

#![no_main]

use libfuzzer_sys::fuzz_target;
use xlane_kv::acl::UserTable;

fuzz_target!(|data: &[u8]| {
    let mut t = UserTable::new();
    let _ = t.load_text(data, "fuzz.acl");
    let words: Vec<&[u8]> = data.split(|b| *b == b' ').collect();
    if let Some((name, rules)) = words.split_first() {
        if t.apply_setuser(name, rules).is_ok() {
            let again = UserTable::decode(&t.encode());
            assert_eq!(again.as_ref(), Ok(&t));
        }
    }
    if let Ok(d) = UserTable::decode(data) {
        assert_eq!(UserTable::decode(&d.encode()).as_ref(), Ok(&d));
    }
});
