//! Fuzz target: the Ethernet/IPv4/UDP view of frames from the AF_XDP ring.
//!
//! Any input either is refused with a typed error or gives a payload inside
//! the frame whose length the UDP header names; a frame built around an
//! accepted frame's payload and addresses reads back the same.
#![no_main]

use libfuzzer_sys::fuzz_target;
use xlane_host::xdp::frame::{build, UdpFrame, PAYLOAD_OFFSET};

fuzz_target!(|data: &[u8]| {
    let Ok(f) = UdpFrame::new_checked(data) else {
        return;
    };
    let p = f.payload();
    assert!(PAYLOAD_OFFSET + p.len() <= data.len());
    assert_eq!(&data[PAYLOAD_OFFSET..PAYLOAD_OFFSET + p.len()], p);
    let mut again = Vec::new();
    build(f.src(), f.dst(), f.dscp(), p, &mut again);
    let g = UdpFrame::new_checked(&again).expect("a built frame reads back");
    assert_eq!((g.src(), g.dst(), g.dscp(), g.payload()), (f.src(), f.dst(), f.dscp(), p));
});
