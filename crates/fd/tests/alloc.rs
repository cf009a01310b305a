//! The hot path allocates nothing: heartbeats in (lane frames), polls, table
//! and event publication, table reads and event subscription.

use std::net::{Ipv4Addr, SocketAddrV4};
use xlane_fd::{
    AliveTable, HeartbeatPayload, ModelKind, PeerSpec, PhiFd, PhiParams, TableConfig, TableWriter,
    XFd, FD_PRODUCER,
};
use xlane_wire::{FrameBuilder, Schema, MAX_FRAME_LEN};

#[global_allocator]
static GLOBAL: xlane_alloc_count::Counting = xlane_alloc_count::Counting;

use xlane_alloc_count::counted;

#[test]
fn no_allocation_per_heartbeat() {
    // The counter itself works.
    let (b, n) = counted(|| std::hint::black_box(Box::new(7u64)));
    assert_eq!((*b, n), (7, 1));
    let peers: Vec<PeerSpec> = (0..16)
        .map(|i| PeerSpec {
            addr: SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, i + 1), 4000),
            tunnel: 5,
        })
        .collect();
    let frames: Vec<Vec<u8>> = (0..64u64)
        .map(|seq| {
            let mut buf = vec![0u8; MAX_FRAME_LEN];
            let mut b = FrameBuilder::new(&mut buf, Schema::Chunk26).expect("builder");
            let p = HeartbeatPayload {
                incarnation: 1,
                counter: Some(seq / 8),
            };
            b.push_chunk(FD_PRODUCER, &p.encode()).expect("chunk");
            let n = b.finish(5, seq, seq * 1000, 0).expect("finish");
            buf.truncate(n);
            buf
        })
        .collect();
    let dir = std::env::temp_dir().join(format!("xlane-fd-alloc-{}", std::process::id()));
    let path = dir.join("t");
    let mut table = TableWriter::create(
        &path,
        &TableConfig {
            capacity: peers.len(),
            event_capacity: 64,
            period_ns: 1000,
            threshold: 300.0,
            stall_periods: Some(3),
            model: ModelKind::TimeoutArrival,
            self_addr: None,
            created_ns: 0,
        },
    )
    .expect("table");
    let reader = AliveTable::open(&path).expect("reader");
    let mut cursor = reader.subscribe_from(0);
    let mut xfd = XFd::x_fd(1000, 300, Some(3), &peers).expect("x-fd");
    let mut phi = PhiFd::phi(PhiParams::for_period(1000), 8.0, &peers).expect("phi");

    let ((events, seen), allocs) = counted(|| {
        let mut events = 0u64;
        let mut seen = 0u64;
        for (k, f) in frames.iter().enumerate() {
            for (i, p) in peers.iter().enumerate() {
                // Peer 3 falls silent halfway; everyone else is on time.
                if i == 3 && k > 32 {
                    continue;
                }
                let rx = k as u64 * 1000 + i as u64;
                if let Ok(j) = xfd.on_lane_datagram(rx, p.addr, f) {
                    if let Some(v) = xfd.peer(j) {
                        table.set_peer(&v);
                    }
                }
                let _ = phi.on_lane_datagram(rx, p.addr, f);
                let _ = xfd.on_lane_datagram(rx, p.addr, b"garbage garbage garbage garbage!");
            }
            let now = k as u64 * 1000 + 500;
            xfd.check_deadlines(now);
            while let Some(e) = xfd.next_event() {
                table.push_event(&e);
                events += 1;
            }
            events += phi.poll(now).count() as u64;
            let _ = xfd.next_deadline();
            for i in 0..peers.len() {
                let _ = reader.entry(i);
            }
            while cursor.next_item(&reader).is_some() {
                seen += 1;
            }
        }
        (events, seen)
    });
    let _ = std::fs::remove_dir_all(&dir);
    assert!(events > 16, "{events} events");
    assert!(seen > 0);
    assert_eq!(allocs, 0, "{allocs} allocations on the hot path");
}
