//! Fuzz the X-Raft wire decoders: proposal batches, fragment reassembly and the raft
//! message codec. None may panic; a decoded batch must re-encode to the same bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use xlane_xraft::batch::{
    decode_batch, decode_message, encode_batch, ReassemblyLimits, Reassembler,
};

fuzz_target!(|data: &[u8]| {
    if let Ok(ops) = decode_batch(data) {
        let owned: Vec<_> = ops.iter().map(|(id, op)| (*id, op.to_vec())).collect();
        let again = encode_batch(&owned).expect("re-encode");
        assert_eq!(again.as_slice(), data);
    }
    let _ = decode_message(data);
    // Split the input into datagrams at 0xFF bytes and feed them from two senders.
    let mut r = Reassembler::new(ReassemblyLimits {
        max_message_bytes: 1 << 16,
        max_pending_per_sender: 4,
        timeout_ns: 1000,
    });
    for (i, d) in data.split(|b| *b == 0xFF).enumerate() {
        let now = i as u64 * 100;
        if let Ok(Some(msg)) = r.accept((i % 2) as u64, now, d) {
            assert!(msg.len() <= 1 << 16);
        }
        r.expire(now);
        assert!(r.pending() <= 8);
    }
});
