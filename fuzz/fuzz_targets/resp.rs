//! Fuzz target: arbitrary bytes through the RESP2 request parser of
//! xlane-kv, whole and split at points taken from the input: both must give
//! the same commands and the same error. Every parsed command then runs
//! against a store (no panics), and the bytes also go through the reply
//! decoder and the write-op decoder (which must be canonical), and a decoded op is applied twice
//! from the same state with the same result (data-type ops included).
#![no_main]

use libfuzzer_sys::fuzz_target;
use xlane_kv::exec::execute_local;
use xlane_kv::exec::Apply;
use xlane_kv::resp::{decode_reply, Command, Limits, Parser, RespError};
use xlane_kv::{Store, WriteOp};

const LIMITS: Limits = Limits {
    max_bulk: 4096,
    max_array: 64,
    max_inline: 256,
    max_command: 16384,
};

fn drain(p: &mut Parser, out: &mut Vec<Command>) -> Option<RespError> {
    loop {
        match p.next_command() {
            Ok(Some(c)) => out.push(c),
            Ok(None) => return None,
            Err(e) => return Some(e),
        }
    }
}

fuzz_target!(|input: &[u8]| {
    let (cuts, data) = input.split_at(input.len().min(4));
    let mut whole = Parser::new(LIMITS);
    whole.feed(data);
    let mut cmds = Vec::new();
    let err = drain(&mut whole, &mut cmds);

    let mut points: Vec<usize> = cuts
        .iter()
        .map(|&c| (c as usize * data.len()) / 255)
        .collect();
    points.sort_unstable();
    let mut split = Parser::new(LIMITS);
    let mut cmds2 = Vec::new();
    let mut err2 = None;
    let mut last = 0;
    for p in points.into_iter().chain(std::iter::once(data.len())) {
        split.feed(&data[last..p]);
        last = p;
        err2 = drain(&mut split, &mut cmds2);
        if err2.is_some() {
            break;
        }
    }
    assert_eq!(cmds, cmds2, "split changed the commands");
    assert_eq!(err, err2, "split changed the error");

    let mut store = Store::new();
    for (i, c) in cmds.iter().enumerate() {
        let _ = execute_local(&mut store, c, 1_700_000_000_000 + i as u64 * 700);
    }

    let _ = decode_reply(data);
    if let Ok(op) = WriteOp::decode(data) {
        assert_eq!(op.encode(), data, "op encoding is canonical");
        // Whatever decodes applies without a panic, and deterministically.
        let (mut a, mut b) = (store.clone(), store);
        assert_eq!(a.apply(&op), b.apply(&op), "apply is deterministic");
        assert_eq!(a.snapshot(), b.snapshot(), "apply is deterministic");
    }
});
