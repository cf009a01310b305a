//! The lane loops allocate nothing: a counting global allocator watches the
//! sender and receiver threads while they move frames over a real socket.
//!
//! Only allocations made by a thread that has armed the counter are counted,
//! so the test harness's own threads do not disturb the count. Everything
//! the loops need is allocated before arming.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use xlane_host::runtime::{ReceiverLane, SampleLog, SenderLane, WaitMode};
use xlane_host::socket::{realtime_ns, LaneSocket, SocketConfig};
use xlane_lane::{PeriodicReceiver, PeriodicSender, TunnelParams};
use xlane_wire::Schema;

struct Counting;

static ALLOCS: AtomicU64 = AtomicU64::new(0);

thread_local! {
    static ARMED: Cell<bool> = const { Cell::new(false) };
}

fn counting() -> bool {
    ARMED.try_with(|a| a.get()).unwrap_or(false)
}

// SAFETY: forwards to the system allocator; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        if counting() {
            ALLOCS.fetch_add(1, Ordering::Relaxed);
        }
        System.alloc(l)
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        System.dealloc(p, l)
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        if counting() {
            ALLOCS.fetch_add(1, Ordering::Relaxed);
        }
        System.realloc(p, l, n)
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        if counting() {
            ALLOCS.fetch_add(1, Ordering::Relaxed);
        }
        System.alloc_zeroed(l)
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn arm(on: bool) {
    ARMED.with(|a| a.set(on));
}

#[test]
fn lane_loops_do_not_allocate() {
    let params = TunnelParams {
        tunnel: 9,
        period_ns: 200_000,
        max_packet: Schema::Chunk26.frame_len(8),
        schema: Schema::Chunk26,
    };
    let mut rcfg = SocketConfig::express(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0));
    rcfg.recv_timeout_us = 10_000;
    let mut rx = LaneSocket::open(&rcfg).expect("receiver socket");
    let dst = [rx.local_addr().expect("addr")];
    let tx = LaneSocket::open(&SocketConfig::express(SocketAddrV4::new(
        Ipv4Addr::LOCALHOST,
        0,
    )))
    .expect("sender socket");
    let stop = AtomicBool::new(false);
    let frames = 500u64;
    let start = realtime_ns() + 20_000_000;
    let until = start + frames * params.period_ns;
    let mut log = SampleLog::with_capacity(frames as usize + 10);
    let mut delivered = 0u64;

    let (sent, got) = std::thread::scope(|s| {
        let rx_thread = s.spawn(|| {
            let mut lane = ReceiverLane::new(&mut rx, PeriodicReceiver::new(params));
            let mut deliver = |_d: xlane_lane::Delivery<'_>| delivered += 1;
            arm(true);
            let r = lane.run(&stop, until + 100_000_000, &mut log, &mut deliver);
            arm(false);
            r.expect("receive loop")
        });
        let tx_thread = s.spawn(|| {
            let core = PeriodicSender::new(params, start).expect("params");
            let mut lane = SenderLane::new(&tx, core, &dst);
            let msg = [0xabu8; 16];
            let mut fill = |c: &mut PeriodicSender, _slot: u64| {
                c.enqueue(1, &msg).expect("enqueue");
                c.enqueue(2, &msg[..5]).expect("enqueue");
            };
            arm(true);
            let r = lane.run(&stop, until, WaitMode::Interrupt, &mut fill);
            arm(false);
            r.expect("send loop")
        });
        (
            tx_thread.join().expect("sender"),
            rx_thread.join().expect("receiver"),
        )
    });
    // How many slots a busy machine lets the sender keep is timing, not
    // what this test checks; it needs frames on both sides.
    assert!(sent.frames > 0, "the sender sent nothing");
    assert!(got.datagrams > 0 && log.samples().len() as u64 == got.datagrams - got.refused);
    assert_eq!(
        delivered,
        2 * log.samples().len() as u64,
        "two chunks per frame"
    );
    assert_eq!(
        ALLOCS.load(Ordering::Relaxed),
        0,
        "allocations inside the lane loops"
    );
}
