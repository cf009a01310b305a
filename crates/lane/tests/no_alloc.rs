//! The hot-path functions never allocate: checked with a counting global allocator.

use xlane_lane::{PeriodicReceiver, PeriodicSender, TunnelParams};
use xlane_wire::{stamp_send_time, Schema, MAX_FRAME_LEN};

#[global_allocator]
static GLOBAL: xlane_alloc_count::Counting = xlane_alloc_count::Counting;

#[test]
fn hot_paths_do_not_allocate() {
    let params = TunnelParams {
        tunnel: 1,
        period_ns: 1_000,
        max_packet: MAX_FRAME_LEN,
        schema: Schema::Chunk26,
    };
    let mut tx = PeriodicSender::with_capacity(params, 0, 512).unwrap();
    let mut rx = PeriodicReceiver::new(params);
    let mut buf = [0u8; MAX_FRAME_LEN];
    let mut delivered = 0u64;

    // The counter works: a Vec allocates.
    let (v, n) = xlane_alloc_count::counted(|| std::hint::black_box(vec![1u8; 10]));
    assert!(n > 0 && v.len() == 10);

    let ((), allocs) = xlane_alloc_count::counted(|| {
        for round in 0..2_000u64 {
            let now = round * 1_000 + (round % 7) * 10;
            for p in 0..(round % 90) as u8 {
                let _ = tx.enqueue(p, &[p; 13]);
            }
            let _ = tx.enqueue(1, &[0; 99]); // TooLarge path
            if let Ok(Some(t)) = tx.poll_transmit(now, &mut buf) {
                let _ = stamp_send_time(&mut buf[..t.len], now + 1);
                let _ = rx.handle_datagram(now + 500, &buf[..t.len], &mut |d| {
                    delivered += d.data.len() as u64
                });
                // duplicate, corrupted, truncated
                let _ = rx.handle_datagram(now + 501, &buf[..t.len], &mut |_| {});
                buf[40] ^= 1;
                let _ = rx.handle_datagram(now + 502, &buf[..t.len], &mut |_| {});
                let _ = rx.handle_datagram(now + 503, &buf[..7], &mut |_| {});
            }
            let _ = tx.transmit_now(now + 10, &mut buf);
            let _ = tx.stats();
            let _ = rx.stats();
        }
    });
    assert!(delivered > 0);
    assert_eq!(allocs, 0, "hot path allocated {allocs} times");
}
