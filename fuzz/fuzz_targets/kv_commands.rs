//! Every command parser of `xlane kv` (`xlane_kv::dispatch` and
//! `xlane_kv::cmd`): the input is a session of commands — a command per
//! line, words split at spaces, the first word picking a command of the
//! table by its first byte — run against one store at a moving clock, as
//! the single node runs them. Any words must be answered (a reply or a
//! typed error), never panic; the store then snapshots and restores to
//! the same store. Numbers are capped at 10 000 so that a command asking
//! for a gigabyte (`SETRANGE k 536870911 x`) does not eat the fuzzer's
//! memory: that bound is the protocol's, checked elsewhere.

#![no_main]

use libfuzzer_sys::fuzz_target;
use xlane_kv::cmd::table::TABLE;
use xlane_kv::exec::execute_local;
use xlane_kv::store::Store;

fn cap(w: &[u8]) -> Vec<u8> {
    match std::str::from_utf8(w).ok().and_then(|s| s.parse::<i64>().ok()) {
        Some(v) if v.abs() > 10_000 => (v.signum() * 10_000).to_string().into_bytes(),
        _ => w.to_vec(),
    }
}

fuzz_target!(|data: &[u8]| {
    let mut st = Store::default();
    let mut now = 1_700_000_000_000u64;
    for line in data.split(|b| *b == b'\n').take(64) {
        let Some((&pick, rest)) = line.split_first() else {
            continue;
        };
        let spec = &TABLE[usize::from(pick) % TABLE.len()];
        // DEBUG SLEEP and friends would only stall the fuzzer.
        if spec.name == "debug" || spec.name == "shutdown" {
            continue;
        }
        let mut args = vec![spec.name.as_bytes().to_vec()];
        args.extend(rest.split(|b| *b == b' ').filter(|w| !w.is_empty()).map(cap));
        let _ = execute_local(&mut st, &args, now);
        now += u64::from(pick % 7) * 100;
    }
    let snap = st.snapshot();
    let back = Store::restore(&snap).expect("a snapshot restores");
    assert_eq!(back.snapshot(), snap);
});
