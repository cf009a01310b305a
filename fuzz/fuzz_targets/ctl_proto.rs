//! Fuzz target: arbitrary bytes through every decoder of the controller's
//! network and disk input (xlane-ctl): client and server messages, journal
//! records, replicated log commands and snapshots, and the stream framer.
//!
//! Whatever decodes must re-encode to exactly the bytes it came from (the
//! encoding is canonical) and decode again to the same value. Each input is
//! also tried behind a valid header (length patched in, version 1, kind
//! from the first byte) so that the body decoders are reached without the
//! fuzzer having to find the framing first.
#![no_main]

use libfuzzer_sys::fuzz_target;
use xlane_ctl::proto::{
    ClientMsg, FrameBuffer, Message, ServerMsg, HEADER_LEN, MAX_FRAME, VERSION,
};
use xlane_ctl::replicated::{Command, ReplicatedState};
use xlane_ctl::store::Record;

fn round_trip<M: Message + PartialEq + std::fmt::Debug>(data: &[u8]) {
    if let Ok((m, n)) = M::decode(data) {
        assert!(n >= HEADER_LEN + 2 && n <= data.len() && n <= HEADER_LEN + MAX_FRAME);
        let again = m.to_frame().expect("a decoded message encodes");
        assert_eq!(&again[..], &data[..n], "canonical encoding");
        let (m2, n2) = M::decode(&again).expect("re-encoded bytes decode");
        assert_eq!(m2, m);
        assert_eq!(n2, again.len());
    }
}

fn check(data: &[u8]) {
    round_trip::<ClientMsg>(data);
    round_trip::<ServerMsg>(data);
    if let Ok(r) = Record::decode(data) {
        let b = r.encode().expect("a decoded record encodes");
        assert_eq!(&b[..], data, "canonical record encoding");
    }
    // A replicated controller's log entries are canonical too.
    if let Ok(c) = Command::decode(data) {
        let b = c.encode().expect("a decoded command encodes");
        assert_eq!(&b[..], data, "canonical command encoding");
    }
    // A snapshot a replica receives: restored or refused, never a panic;
    // a refused one leaves the replica answering `Internal`.
    if data.starts_with(b"XCS1") {
        let topo = xlane_ctl::te::gen::from_spec("leaf-spine:2,2,1").expect("topology");
        let st = ReplicatedState::new(
            topo,
            xlane_ctl::te::TeConfig::default(),
            xlane_ctl::Policy::default(),
        );
        let _ = st.restore(data);
    }
    // The stream framer: every frame it cuts is whole and makes progress.
    let mut fb = FrameBuffer::new();
    for chunk in data.chunks(7) {
        fb.push(chunk);
        loop {
            match fb.next_frame() {
                Ok(Some(f)) => {
                    assert!(f.len() >= HEADER_LEN + 2);
                    round_trip::<ClientMsg>(&f);
                }
                Ok(None) => break,
                Err(_) => return,
            }
        }
    }
}

fuzz_target!(|data: &[u8]| {
    check(data);
    if let Some((&kind, body)) = data.split_first() {
        let body = &body[..body.len().min(MAX_FRAME - 2)];
        let mut framed = Vec::with_capacity(body.len() + 6);
        framed.extend_from_slice(&((body.len() + 2) as u32).to_be_bytes());
        framed.push(VERSION);
        framed.push(kind);
        framed.extend_from_slice(body);
        check(&framed);
    }
});
