//! The lane loop allocates nothing: a counting global allocator watches its
//! thread while it moves frames between its sender and receivers over real
//! sockets.
//!
//! Only allocations made by a thread that has armed the counter are counted,
//! so the test harness's own threads do not disturb the count. Everything
//! the loops need is allocated before arming.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use xlane_host::lane_loop::{FrameSink, LaneLoop, ReceiverSpec, SenderSpec};
use xlane_host::runtime::{Sample, WaitMode};
use xlane_host::socket::{realtime_ns, LaneSocket, SocketConfig};
use xlane_lane::{PeriodicReceiver, PeriodicSender, TunnelParams};
use xlane_wire::Schema;

#[global_allocator]
static GLOBAL: xlane_alloc_count::Counting = xlane_alloc_count::Counting;

struct Count<'a>(&'a AtomicU64, &'a AtomicU64);

impl FrameSink for Count<'_> {
    fn on_chunk(&mut self, _d: xlane_lane::Delivery<'_>) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
    fn on_frame(&mut self, _s: Sample) {
        self.1.fetch_add(1, Ordering::Relaxed);
    }
}

#[test]
fn the_lane_loop_does_not_allocate() {
    let params = TunnelParams {
        tunnel: 9,
        period_ns: 200_000,
        max_packet: Schema::Chunk26.frame_len(8),
        schema: Schema::Chunk26,
    };
    let frames = 500u64;
    let start = realtime_ns() + 20_000_000;
    let until = start + frames * params.period_ns;
    let (chunks, accepted) = (AtomicU64::new(0), AtomicU64::new(0));
    let msg = [0xabu8; 16];
    let fill = |c: &mut PeriodicSender, _slot: u64| {
        c.enqueue(1, &msg).expect("enqueue");
        c.enqueue(2, &msg[..5]).expect("enqueue");
    };
    let mut lane = LaneLoop::new().expect("loop");
    // Two receivers (one per "host"), one sender replicating to both.
    let mut dsts = Vec::new();
    for _ in 0..2 {
        let rx = LaneSocket::open(&SocketConfig::express(SocketAddrV4::new(
            Ipv4Addr::LOCALHOST,
            0,
        )))
        .expect("receiver socket");
        dsts.push(rx.local_addr().expect("addr"));
        lane.add_receiver(ReceiverSpec {
            sock: rx,
            core: PeriodicReceiver::new(params),
            sink: Count(&chunks, &accepted),
            // Authenticated frames: the MAC check allocates nothing either.
            open: Some(xlane_auth::Opener::new(xlane_auth::KeyRing::from_pairs(&[
                (1, xlane_auth::Key::from_bytes([7; 16])),
            ]))),
            xdp: None,
        })
        .expect("add receiver");
    }
    let tx = LaneSocket::open(&SocketConfig::express(SocketAddrV4::new(
        Ipv4Addr::LOCALHOST,
        0,
    )))
    .expect("sender socket");
    lane.add_sender(SenderSpec {
        sock: tx,
        core: PeriodicSender::new(params, start).expect("params"),
        dsts,
        until_ns: until,
        fill,
        seal: Some(xlane_auth::Sealer::new(
            1,
            xlane_auth::Key::from_bytes([7; 16]),
            1,
        )),
        xdp: None,
    });
    let stop = AtomicBool::new(false);
    let (r, allocs) =
        xlane_alloc_count::counted(|| lane.run(&stop, until + 50_000_000, WaitMode::Interrupt));
    r.expect("lane loop");
    let st = lane.stats();
    // How many slots a busy machine lets the loop keep is timing, not what
    // this test checks; it needs frames on both sides.
    assert!(st.frames > 0, "the sender sent nothing");
    let (senders, receivers) = lane.into_ends();
    let got: u64 = receivers
        .iter()
        .map(|r| r.report.datagrams - r.report.refused)
        .sum();
    assert_eq!(got, accepted.load(Ordering::Relaxed));
    assert!(got > 0, "nothing received");
    assert_eq!(senders[0].report.frames, st.frames);
    assert_eq!(
        chunks.load(Ordering::Relaxed),
        2 * accepted.load(Ordering::Relaxed),
        "two chunks per frame"
    );
    assert_eq!(allocs, 0, "allocations inside the lane loop");
}
