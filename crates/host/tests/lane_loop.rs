//! One lane loop serves several tunnel ends over real loopback sockets:
//! every frame a sender emits reaches every receiver it addresses, ends
//! added and removed while the loop runs (from another thread) take part
//! only while they are in, and an embedding loop can drive it through its
//! descriptor, deadline and `poll`. Sealed frames reach the receivers that
//! hold their key and no other.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use xlane_host::batch::RecvBatch;
use xlane_host::lane_loop::{FrameSink, LaneLoop, ReceiverSpec, SenderSpec};
use xlane_host::runtime::{wait_readable, Sample, WaitMode};
use xlane_host::socket::{realtime_ns, LaneSocket, SocketConfig};
use xlane_lane::{Destinations, PeriodicReceiver, PeriodicSender, TunnelParams};
use xlane_wire::Schema;

const PERIOD: u64 = 1_000_000;

fn params(tunnel: u32) -> TunnelParams {
    TunnelParams {
        tunnel,
        period_ns: PERIOD,
        max_packet: Schema::Chunk26.frame_len(4),
        schema: Schema::Chunk26,
    }
}

fn socket() -> LaneSocket {
    let mut c = SocketConfig::express(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0));
    c.rcvbuf = 1 << 20;
    LaneSocket::open(&c).expect("socket")
}

/// Datagrams a receiver did not get to: still in its socket when the loop
/// stopped (a starved test thread), or dropped by the kernel at the socket.
fn unread(sock: &mut LaneSocket) -> u64 {
    let mut batch = RecvBatch::new();
    let mut n = 0;
    loop {
        let k = sock.recv_batch(&mut batch).expect("recv");
        if k == 0 {
            break;
        }
        n += k as u64;
    }
    n + sock.drops().expect("SO_MEMINFO")
}

/// Records the sequence numbers and the producer of every chunk.
#[derive(Clone, Default)]
struct Seen(Arc<Mutex<Vec<(u64, u8)>>>);

impl FrameSink for Seen {
    fn on_chunk(&mut self, d: xlane_lane::Delivery<'_>) {
        self.0.lock().unwrap().push((d.seq, d.producer));
    }
    fn on_frame(&mut self, _s: Sample) {}
}

type Fill = Box<dyn FnMut(&mut PeriodicSender, u64) + Send>;

fn fill(producer: u8) -> Fill {
    Box::new(move |c: &mut PeriodicSender, slot: u64| {
        let _ = c.enqueue(producer, &slot.to_be_bytes());
    })
}

#[test]
fn one_loop_serves_every_end_and_ends_come_and_go() {
    let mut lane: LaneLoop<Fill, Seen> = LaneLoop::new().expect("loop");
    // Tunnel 1: one sender to two receivers; tunnel 2: one sender to one.
    let (a, b, c) = (Seen::default(), Seen::default(), Seen::default());
    let mut addr = Vec::new();
    for (tunnel, sink) in [(1, a.clone()), (1, b.clone()), (2, c.clone())] {
        let s = socket();
        addr.push(s.local_addr().unwrap());
        lane.add_receiver(ReceiverSpec {
            sock: s,
            core: PeriodicReceiver::new(params(tunnel)),
            sink,
            open: None,
            xdp: None,
        })
        .unwrap();
    }
    let start = realtime_ns() + 10_000_000;
    let until = start + 200 * PERIOD;
    lane.add_sender(SenderSpec {
        sock: socket(),
        core: PeriodicSender::new(params(1), start).unwrap(),
        dsts: vec![addr[0], addr[1]],
        until_ns: until,
        fill: fill(1),
        seal: None,
        xdp: None,
    });
    lane.add_sender(SenderSpec {
        sock: socket(),
        core: PeriodicSender::new(params(2), start + PERIOD / 2).unwrap(),
        dsts: vec![addr[2]],
        until_ns: until,
        fill: fill(2),
        seal: None,
        xdp: None,
    });
    let control = lane.control().unwrap();
    let stop = AtomicBool::new(false);
    let late = Seen::default();
    let (lane, late_end) = std::thread::scope(|s| {
        let h = s.spawn(|| {
            lane.run(&stop, until + 100_000_000, WaitMode::Interrupt)
                .expect("run");
            lane
        });
        // A receiver of tunnel 2 joins while the loop runs, the sender
        // replicates to it from then on, and it leaves again.
        std::thread::sleep(std::time::Duration::from_millis(60));
        let s4 = socket();
        let a4 = s4.local_addr().unwrap();
        let id = control
            .add_receiver(ReceiverSpec {
                sock: s4,
                core: PeriodicReceiver::new(params(2)),
                sink: late.clone(),
                open: None,
                xdp: None,
            })
            .expect("add while running");
        let sid = control
            .add_sender(SenderSpec {
                sock: socket(),
                core: PeriodicSender::new(params(2), realtime_ns() + PERIOD).unwrap(),
                dsts: vec![a4],
                until_ns: u64::MAX,
                fill: fill(4),
                seal: None,
                xdp: None,
            })
            .expect("add sender while running");
        std::thread::sleep(std::time::Duration::from_millis(60));
        let sender = control.remove_sender(sid).expect("remove").expect("known");
        // Let the last frames land before the receiver leaves.
        std::thread::sleep(std::time::Duration::from_millis(20));
        let end = control.remove_receiver(id).expect("remove").expect("known");
        assert!(control.remove_receiver(id).expect("loop runs").is_none());
        assert!(sender.report.frames > 0, "the added sender sent nothing");
        (h.join().expect("loop thread"), (end, sender.report.frames))
    });
    let (senders, mut receivers) = lane.into_ends();
    assert_eq!(senders.len(), 2);
    assert_eq!(receivers.len(), 3);
    let sent1 = senders[0].report.frames;
    let sent2 = senders[1].report.frames;
    assert!(sent1 > 0 && sent2 > 0);
    // Every frame reached each receiver once, with its sender's producer id
    // and in order (loopback loses nothing but what a full socket drops,
    // which the kernel counts).
    let cases = [(&a, sent1, 1u8), (&b, sent1, 1), (&c, sent2, 2)];
    for ((sink, sent, producer), r) in cases.into_iter().zip(receivers.iter_mut()) {
        let v = sink.0.lock().unwrap();
        assert_eq!(
            v.len() as u64 + unread(&mut r.spec.sock),
            sent,
            "frames of producer {producer}"
        );
        assert!(v.iter().all(|&(_, p)| p == producer));
        assert!(v.windows(2).all(|w| w[0].0 < w[1].0), "in order");
    }
    // The late receiver got exactly what the late sender sent.
    let (mut end, frames) = late_end;
    let v = late.0.lock().unwrap();
    let rest = unread(&mut end.spec.sock);
    assert_eq!(v.len() as u64 + rest, frames);
    assert_eq!(end.report.datagrams + rest, frames);
    assert!(v.iter().all(|&(_, p)| p == 4));
}

#[test]
fn an_embedding_loop_drives_it_by_descriptor_and_deadline() {
    let mut lane: LaneLoop<Fill, Seen> = LaneLoop::new().expect("loop");
    let seen = Seen::default();
    let rx = socket();
    let dst = rx.local_addr().unwrap();
    lane.add_receiver(ReceiverSpec {
        sock: rx,
        core: PeriodicReceiver::new(params(5)),
        sink: seen.clone(),
        open: None,
        xdp: None,
    })
    .unwrap();
    let start = realtime_ns() + 2_000_000;
    let until = start + 20 * PERIOD;
    lane.add_sender(SenderSpec {
        sock: socket(),
        core: PeriodicSender::new(params(5), start).unwrap(),
        dsts: vec![dst],
        until_ns: until,
        fill: fill(5),
        seal: None,
        xdp: None,
    });
    assert_eq!(lane.next_deadline(), Some(start));
    // The embedding loop's own wait: the lane's descriptor beside its own.
    let deadline = until + 50_000_000;
    while realtime_ns() < deadline {
        let wake = lane.next_deadline().unwrap_or(deadline).min(deadline);
        wait_readable(&[lane.fd()], wake).expect("ppoll");
        lane.poll(realtime_ns()).expect("poll");
    }
    assert_eq!(
        lane.next_deadline(),
        None,
        "every slot before `until` passed"
    );
    let sent = lane.stats().frames;
    assert!(sent > 0);
    let (_, mut receivers) = lane.into_ends();
    assert_eq!(
        seen.0.lock().unwrap().len() as u64 + unread(&mut receivers[0].spec.sock),
        sent
    );
}

/// A sealing sender: a receiver with its key gets every frame; one with
/// another key counts them all unauthenticated; one that checks no MAC
/// refuses them (too long for a bare frame). Nothing reaches the wrong
/// sinks.
#[test]
fn sealed_frames_reach_only_the_receivers_that_hold_the_key() {
    use xlane_auth::{Key, KeyRing, Opener, Sealer};
    let key = Key::from_bytes([1; 16]);
    let mut lane: LaneLoop<Fill, Seen> = LaneLoop::new().expect("loop");
    let sinks = [Seen::default(), Seen::default(), Seen::default()];
    let opens = [
        Some(Opener::new(KeyRing::from_pairs(&[(1, key.clone())]))),
        Some(Opener::new(KeyRing::from_pairs(&[(
            1,
            Key::from_bytes([2; 16]),
        )]))),
        None,
    ];
    let mut addr = Vec::new();
    let mut ids = Vec::new();
    for (sink, open) in sinks.iter().zip(opens) {
        let s = socket();
        addr.push(s.local_addr().unwrap());
        ids.push(
            lane.add_receiver(ReceiverSpec {
                sock: s,
                core: PeriodicReceiver::new(params(1)),
                sink: sink.clone(),
                open,
                xdp: None,
            })
            .unwrap(),
        );
    }
    let start = realtime_ns() + 10_000_000;
    let until = start + 50 * PERIOD;
    lane.add_sender(SenderSpec {
        sock: socket(),
        core: PeriodicSender::new(params(1), start).unwrap(),
        dsts: addr,
        until_ns: until,
        fill: fill(1),
        seal: Some(Sealer::new(1, key, 9)),
        xdp: None,
    });
    let stop = AtomicBool::new(false);
    lane.run(&stop, until + 50_000_000, WaitMode::Interrupt)
        .expect("run");
    let sent = lane.stats().frames;
    assert!(sent > 0);
    let ends: Vec<_> = ids
        .iter()
        .map(|&i| lane.remove_receiver(i).expect("known"))
        .collect();
    let keyed = &ends[0].report;
    assert_eq!((keyed.refused, keyed.unauthenticated), (0, 0));
    assert!(!sinks[0].0.lock().unwrap().is_empty());
    let wrong = &ends[1].report;
    assert_eq!(wrong.unauthenticated, wrong.datagrams);
    assert!(wrong.datagrams > 0);
    let plain = &ends[2].report;
    assert_eq!((plain.refused, plain.unauthenticated), (plain.datagrams, 0));
    assert!(sinks[1].0.lock().unwrap().is_empty());
    assert!(sinks[2].0.lock().unwrap().is_empty());
}

/// (source, bytes) of every datagram a [`Raw`] sink read.
type Datagrams = Arc<Mutex<Vec<(SocketAddrV4, Vec<u8>)>>>;

/// A sink that reads datagrams itself and keeps deadlines of its own.
#[derive(Clone, Default)]
struct Raw {
    /// Every datagram.
    got: Datagrams,
    /// Deadlines still to come, earliest first.
    due: Arc<Mutex<Vec<u64>>>,
    /// (deadline, checked_ns, drained) of every `on_timeout`.
    fired: Arc<Mutex<Vec<(u64, u64, bool)>>>,
    /// Set once the last deadline fired: the run's stop flag.
    done: Arc<AtomicBool>,
}

impl FrameSink for Raw {
    fn on_chunk(&mut self, _d: xlane_lane::Delivery<'_>) {
        panic!("the core never sees this sink's datagrams");
    }
    fn on_frame(&mut self, _s: Sample) {
        panic!("the core never sees this sink's datagrams");
    }
    fn on_datagram(
        &mut self,
        _core: &mut PeriodicReceiver,
        st: &xlane_host::socket::RxStamps,
        bytes: &[u8],
    ) -> bool {
        let mut got = self.got.lock().unwrap();
        got.push((st.received.src, bytes.to_vec()));
        // Refuse every other one, to see the loop count refusals.
        got.len() % 2 == 1
    }
    fn poll_timeout(&self) -> Option<u64> {
        self.due.lock().unwrap().first().copied()
    }
    fn on_timeout(&mut self, checked_ns: u64, drained: bool) {
        let mut due = self.due.lock().unwrap();
        let d = due.remove(0);
        self.fired.lock().unwrap().push((d, checked_ns, drained));
        if due.is_empty() {
            self.done.store(true, std::sync::atomic::Ordering::SeqCst);
        }
    }
}

/// The receive side's two hooks: a sink takes its datagrams as they came
/// (source and bytes, the core left out, its refusals counted), and the
/// loop wakes for the sink's own deadlines, calling it once per deadline
/// with the time taken before the turn's reads, after those reads emptied
/// the socket.
#[test]
fn a_sink_reads_raw_datagrams_and_keeps_its_own_deadlines() {
    let mut lane: LaneLoop<Fill, Raw> = LaneLoop::new().expect("loop");
    let raw = Raw::default();
    let rx = socket();
    let dst = rx.local_addr().unwrap();
    let id = lane
        .add_receiver(ReceiverSpec {
            sock: rx,
            core: PeriodicReceiver::new(params(6)),
            sink: raw.clone(),
            open: None,
            xdp: None,
        })
        .unwrap();
    let start = realtime_ns();
    *raw.due.lock().unwrap() = vec![start + 10_000_000, start + 30_000_000];
    assert_eq!(lane.next_deadline(), Some(start + 10_000_000));
    let tx = std::net::UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    let sent: Vec<Vec<u8>> = (0..6u8).map(|i| vec![i; 3 + i as usize]).collect();
    for d in &sent {
        tx.send_to(d, dst).unwrap();
    }
    // Until the last deadline fired (the bound only ends a broken run).
    lane.run(&raw.done, start + 60_000_000_000, WaitMode::Interrupt)
        .expect("run");
    let from = match tx.local_addr().unwrap() {
        std::net::SocketAddr::V4(a) => a,
        _ => unreachable!(),
    };
    let got = raw.got.lock().unwrap().clone();
    assert_eq!(
        got,
        sent.iter().map(|d| (from, d.clone())).collect::<Vec<_>>()
    );
    let end = lane.receiver(id).unwrap();
    assert_eq!((end.report.datagrams, end.report.refused), (6, 3));
    let fired = raw.fired.lock().unwrap().clone();
    assert_eq!(fired.len(), 2, "one call per deadline: {fired:?}");
    for (deadline, checked, drained) in fired {
        assert!(checked >= deadline, "called at or after its deadline");
        assert!(drained, "nothing else waited in the socket");
    }
    assert_eq!(lane.next_deadline(), None);
}

/// An event-driven fill: the sender sends when chunks wait and its window
/// is free, to the destinations `to`.
struct WhenFree {
    to: Destinations,
}

impl xlane_host::lane_loop::SlotFill for WhenFree {
    fn fill(&mut self, _core: &mut PeriodicSender, _slot_ns: u64) {}
    fn send_when_free(&self) -> bool {
        true
    }
    fn to(&self) -> Destinations {
        self.to
    }
}

/// A sender that sends when its window is free has no deadline while
/// nothing waits, sends at once what is queued in a free window (to the
/// destinations its fill names: receivers 0 and 2 of 3), and holds what is
/// queued in a window already used until the next one.
#[test]
fn an_event_driven_sender_sends_when_its_window_is_free() {
    let mut lane: LaneLoop<WhenFree, Seen> = LaneLoop::new().expect("loop");
    let mut to = Destinations::NONE;
    to.insert(0);
    to.insert(2);
    let seen: Vec<Seen> = (0..3).map(|_| Seen::default()).collect();
    let mut dsts = Vec::new();
    for s in &seen {
        let rx = socket();
        dsts.push(rx.local_addr().unwrap());
        lane.add_receiver(ReceiverSpec {
            sock: rx,
            core: PeriodicReceiver::new(params(9)),
            sink: s.clone(),
            open: None,
            xdp: None,
        })
        .unwrap();
    }
    // The sends below are given their time (the window's start), so what
    // they do does not depend on how fast this thread runs.
    let start = realtime_ns();
    let tx = lane.add_sender(SenderSpec {
        sock: socket(),
        core: PeriodicSender::new(params(9), start).unwrap(),
        dsts,
        until_ns: u64::MAX,
        fill: WhenFree { to },
        seal: None,
        xdp: None,
    });
    assert_eq!(lane.next_deadline(), None, "nothing waits");
    let enqueue = |lane: &mut LaneLoop<WhenFree, Seen>, b: u8| {
        let s = lane.sender_mut(tx).expect("sender");
        s.spec.core.enqueue(1, &[b; 8]).expect("queued");
    };
    enqueue(&mut lane, 1);
    assert_eq!(
        lane.next_deadline(),
        Some(start),
        "the first window is free"
    );
    lane.send_due(start);
    assert_eq!(lane.stats().frames, 1);
    // The window is used: the next chunk waits for the next one.
    enqueue(&mut lane, 2);
    lane.send_due(start + PERIOD / 2);
    assert_eq!(lane.stats().frames, 1);
    assert_eq!(
        lane.next_deadline(),
        Some(start + PERIOD),
        "the next window"
    );
    // Turn until the second frame left and both frames were read (a slow
    // machine only takes more turns).
    for _ in 0..10_000 {
        let wake = lane.next_deadline().unwrap_or(u64::MAX);
        wait_readable(&[lane.fd()], wake.min(realtime_ns() + 5_000_000)).expect("ppoll");
        lane.poll(realtime_ns()).expect("poll");
        let (a, c) = (
            seen[0].0.lock().unwrap().len(),
            seen[2].0.lock().unwrap().len(),
        );
        if lane.stats().frames == 2 && a == 2 && c == 2 {
            break;
        }
    }
    assert_eq!(lane.stats().frames, 2);
    assert_eq!(lane.next_deadline(), None, "nothing waits");
    for (i, want) in [(0, 2), (1, 0), (2, 2)] {
        assert_eq!(seen[i].0.lock().unwrap().len(), want, "receiver {i}");
    }
}

/// A fill that keeps the transmit stamps the loop reads back for it, and
/// each frame's send stamp by sequence number.
struct Stamped {
    stamps: Arc<Mutex<Vec<xlane_host::socket::TxStamp>>>,
    sent: Arc<Mutex<Vec<(u64, u64)>>>,
}

impl xlane_host::lane_loop::SlotFill for Stamped {
    fn fill(&mut self, c: &mut PeriodicSender, slot: u64) {
        let _ = c.enqueue(1, &slot.to_be_bytes());
    }
    fn sent(&mut self, r: &xlane_host::runtime::SendReport) {
        self.sent
            .lock()
            .unwrap()
            .push((r.last_seq, r.last_returned_ns));
    }
    fn tx_stamp(&mut self, st: xlane_host::socket::TxStamp) {
        self.stamps.lock().unwrap().push(st);
    }
}

/// With transmit stamps on its socket, a sender's fill gets each earlier
/// frame's stamp, numbered as the frames are, taken between the frame's
/// send stamp and its send call's return; without, none.
#[test]
fn a_sender_with_transmit_stamps_gets_them_back_frame_by_frame() {
    for on in [true, false] {
        let mut lane: LaneLoop<Stamped, Seen> = LaneLoop::new().expect("loop");
        let rx = socket();
        let dst = rx.local_addr().unwrap();
        lane.add_receiver(ReceiverSpec {
            sock: rx,
            core: PeriodicReceiver::new(params(1)),
            sink: Seen::default(),
            open: None,
            xdp: None,
        })
        .unwrap();
        let mut tx = socket();
        if on {
            tx.enable_tx_timestamps().unwrap();
        }
        let (stamps, sent) = (Arc::default(), Arc::default());
        let start = realtime_ns() + 10_000_000;
        let until = start + 20 * PERIOD;
        lane.add_sender(SenderSpec {
            sock: tx,
            core: PeriodicSender::new(params(1), start).unwrap(),
            dsts: vec![dst],
            until_ns: until,
            fill: Stamped {
                stamps: Arc::clone(&stamps),
                sent: Arc::clone(&sent),
            },
            seal: None,
            xdp: None,
        });
        let stop = AtomicBool::new(false);
        lane.run(&stop, until + 10_000_000, WaitMode::Interrupt)
            .expect("run");
        let stamps = stamps.lock().unwrap();
        let sent = sent.lock().unwrap();
        if !on {
            assert!(stamps.is_empty());
            continue;
        }
        // Every frame but the last is read back before the next one.
        assert!(sent.len() >= 2, "{} frames", sent.len());
        assert_eq!(stamps.len(), sent.len() - 1, "{stamps:?}");
        for (k, st) in stamps.iter().enumerate() {
            assert_eq!(st.id as u64, sent[k].0, "numbered as the frames");
            let ns = st.software_ns.expect("a software stamp");
            assert!(ns <= sent[k].1, "taken before the call returned");
        }
    }
}
