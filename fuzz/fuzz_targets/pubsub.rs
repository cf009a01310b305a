//! Fuzz target: xlane-kv's keyspace-notification parsers (`xlane_kv::notify`). The input is split into a glob
//! pattern and a subject: matching never panics (with and without case
//! folding, which may change a range's meaning, as in Redis), a pattern
//! matches itself when it has no special byte, and `*` matches everything.
//! The whole input also goes through the
//! `notify-keyspace-events` parser, whose printed form parses back to the
//! same classes and channels.
#![no_main]

use libfuzzer_sys::fuzz_target;
use xlane_kv::notify::{glob_match, NotifyFlags};

fuzz_target!(|input: &[u8]| {
    let cut = input
        .first()
        .map_or(0, |&c| c as usize % (input.len().max(1)));
    let (pattern, subject) = input.split_at(cut);
    let _ = glob_match(pattern, subject, false);
    let _ = glob_match(pattern, subject, true);
    if !pattern.iter().any(|b| b"*?[\\".contains(b)) {
        assert!(glob_match(pattern, pattern, false));
    }
    assert!(glob_match(b"*", subject, false));

    if let Ok(f) = NotifyFlags::parse(input) {
        let printed = f.to_string();
        let back = NotifyFlags::parse(printed.as_bytes()).expect("printed flags parse");
        assert_eq!(back.to_string(), printed, "printing is stable");
        // Every flag survives printing but `n` beside `A` (as in Redis).
        for c in b"KEg$lshzxetdm" {
            let one = NotifyFlags::parse(&[*c]).expect("a flag");
            assert_eq!(back.contains(one), f.contains(one), "flag {}", *c as char);
        }
    }
});
