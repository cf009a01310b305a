//! The AF_XDP receive path on a real veth in the testbed (needs root;
//! without it each test says "skipped: needs root"): lane frames reach the
//! AF_XDP rings with the program's stamp, while regular traffic on the same
//! interface (other ports, and the lane's port without the lane's DSCP)
//! still reaches its sockets; dropping the path detaches the program.

use std::net::{SocketAddrV4, UdpSocket};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use xlane_host::batch::{RecvBatch, RECV_BATCH};
use xlane_host::lane_loop::{FrameSink, LaneLoop, ReceiverSpec, SenderSpec, XdpId, XdpSend};
use xlane_host::runtime::{Sample, WaitMode};
use xlane_host::socket::{realtime_ns, LaneSocket, SocketConfig};
use xlane_host::xdp::neigh::interface_mac;
use xlane_host::xdp::{XdpConfig, XdpRings, FRAMES};
use xlane_lane::{PeriodicReceiver, PeriodicSender, TunnelParams};
use xlane_testbed::{enter_netns, in_netns, HostInfo, Testbed, TestbedConfig};
use xlane_wire::Schema;

const LANE_PORT: u16 = 7310;
const OTHER_PORT: u16 = 7311;
const LANE_FRAMES: usize = 200;
const REGULAR: usize = 50;
/// Lane frames sent before the test reads the rings.
const BURST: usize = 20;

fn need_root() -> bool {
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        println!("skipped: needs root");
        return false;
    }
    true
}

/// A testbed of two hosts (split by CPU with a lane core: two queues).
fn two_hosts(lane_core: Option<usize>) -> (Testbed, HostInfo, HostInfo) {
    let tb = Testbed::up(TestbedConfig {
        hosts: 2,
        measure_probes: 0,
        lane_core,
        ..TestbedConfig::default()
    })
    .expect("testbed up");
    let (h0, h1) = (tb.hosts()[0].clone(), tb.hosts()[1].clone());
    (tb, h0, h1)
}

/// The lane's rings on `h`'s interface (call inside its namespace),
/// steering DSCP 46.
fn rings(h: &HostInfo) -> XdpRings {
    XdpRings::open(&XdpConfig {
        iface: h.iface.clone(),
        dscp: 46,
        mode: None,
    })
    .expect("XDP path")
}

fn drain(s: &UdpSocket, want: usize) -> Vec<Vec<u8>> {
    let mut got = Vec::new();
    let mut buf = [0u8; 2048];
    s.set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let end = Instant::now() + Duration::from_secs(10);
    while got.len() < want && Instant::now() < end {
        if let Ok(n) = s.recv(&mut buf) {
            got.push(buf[..n].to_vec());
        }
    }
    // Anything more that is still coming.
    while let Ok(n) = s.recv(&mut buf) {
        got.push(buf[..n].to_vec());
    }
    got
}

#[test]
fn lane_frames_take_the_ring_and_the_rest_reaches_sockets() {
    if !need_root() {
        return;
    }
    // Two receive queues per host interface.
    let (_tb, h0, h1) = two_hosts(Some(1));
    // The receiver: the lane's socket, a regular socket, and the XDP path.
    let (lane_sock, regular, mut xdp) = {
        let _ns = enter_netns(&h1.netns).unwrap();
        let lane_sock = UdpSocket::bind(SocketAddrV4::new(h1.addr, LANE_PORT)).unwrap();
        let regular = UdpSocket::bind(SocketAddrV4::new(h1.addr, OTHER_PORT)).unwrap();
        let xdp = rings(&h1);
        xdp.add_port(LANE_PORT).unwrap();
        (lane_sock, regular, xdp)
    };
    assert!(xdp.queues() >= 2, "one AF_XDP socket per receive queue");
    println!("XDP {} mode, {} queues", xdp.mode().name(), xdp.queues());
    let (express, plain) = in_netns(&h0.netns, || {
        let mut c = SocketConfig::express(SocketAddrV4::new(h0.addr, 0));
        c.rx_timestamps = false;
        let e = LaneSocket::open(&c).unwrap();
        let p = UdpSocket::bind(SocketAddrV4::new(h0.addr, 0)).unwrap();
        (e, p)
    })
    .unwrap();
    let lane_dst = SocketAddrV4::new(h1.addr, LANE_PORT);
    let other_dst = SocketAddrV4::new(h1.addr, OTHER_PORT);
    let t0 = realtime_ns();
    let mut batch = RecvBatch::new();
    let mut ports = [0u16; RECV_BATCH];
    let mut lane = Vec::new();
    // Bursts well inside the ring, each read before the next.
    for burst in 0..LANE_FRAMES / BURST {
        for i in burst * BURST..(burst + 1) * BURST {
            express
                .send_to(format!("lane {i}").as_bytes(), lane_dst)
                .unwrap();
            if i < REGULAR {
                plain
                    .send_to(format!("regular {i}").as_bytes(), other_dst)
                    .unwrap();
                // The lane's port, but not the lane's DSCP: regular traffic.
                plain
                    .send_to(format!("unmarked {i}").as_bytes(), lane_dst)
                    .unwrap();
            }
        }
        let end = Instant::now() + Duration::from_secs(10);
        while lane.len() < (burst + 1) * BURST && Instant::now() < end {
            for q in 0..xdp.queues() {
                let n = xdp.recv_batch(q, &mut batch, &mut ports);
                assert!(ports[..n].iter().all(|&p| p == LANE_PORT));
                for j in 0..n {
                    let (st, bytes) = batch.get(j).unwrap();
                    assert_eq!(st.received.src.ip(), &h0.addr);
                    let stamp = st.software_ns.expect("the program stamps each frame");
                    // The clock's domain, not a latency: CLOCK_MONOTONIC
                    // would be decades away from CLOCK_REALTIME.
                    assert!(
                        stamp.abs_diff(t0) < 60_000_000_000,
                        "stamp mapped to CLOCK_REALTIME"
                    );
                    lane.push(String::from_utf8(bytes.to_vec()).unwrap());
                }
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    lane.sort();
    let mut want: Vec<String> = (0..LANE_FRAMES).map(|i| format!("lane {i}")).collect();
    want.sort();
    assert_eq!(lane, want, "every lane frame, once, through AF_XDP");
    let stats = xdp.stats();
    assert_eq!(stats.frames, LANE_FRAMES as u64);
    assert_eq!(stats.stamped, LANE_FRAMES as u64);
    assert_eq!((stats.malformed, stats.ring_drops), (0, 0));
    // Regular traffic on the same interface reached its sockets.
    let got = drain(&regular, REGULAR);
    assert_eq!(got.len(), REGULAR, "regular datagrams to another port");
    let got = drain(&lane_sock, REGULAR);
    assert_eq!(got.len(), REGULAR, "unmarked datagrams to the lane's port");
    assert!(got.iter().all(|g| g.starts_with(b"unmarked")));
    // A burst three rings long, read only after it has all arrived: every
    // frame is read or counted as a ring drop, none reaches the socket.
    let sent = 3 * FRAMES as usize;
    for i in 0..sent {
        express
            .send_to(format!("burst {i}").as_bytes(), lane_dst)
            .unwrap();
    }
    std::thread::sleep(Duration::from_millis(200));
    let mut read = 0;
    for q in 0..xdp.queues() {
        loop {
            let n = xdp.recv_batch(q, &mut batch, &mut ports);
            if n == 0 {
                break;
            }
            read += n;
        }
    }
    let stats = xdp.stats();
    assert!(read <= FRAMES as usize * xdp.queues(), "{read} frames read");
    assert_eq!(
        read as u64 + stats.ring_drops,
        sent as u64,
        "{read} read, {} counted as ring drops",
        stats.ring_drops
    );
    // A port taken off the path goes back to the stack.
    xdp.remove_port(LANE_PORT);
    express.send_to(b"removed", lane_dst).unwrap();
    let got = drain(&lane_sock, 1);
    assert_eq!(got, vec![b"removed".to_vec()]);
    xdp.add_port(LANE_PORT).unwrap();
    // Dropping the path detaches the program: lane frames go to the socket.
    drop(xdp);
    express.send_to(b"after", lane_dst).unwrap();
    let got = drain(&lane_sock, 1);
    assert_eq!(got, vec![b"after".to_vec()]);
}

/// Counts accepted frames and their receive stamps.
#[derive(Clone, Default)]
struct Count(Arc<Mutex<Vec<Sample>>>);

impl FrameSink for Count {
    fn on_chunk(&mut self, _d: xlane_lane::Delivery<'_>) {}
    fn on_frame(&mut self, s: Sample) {
        self.0.lock().unwrap().push(s);
    }
}

type Fill = fn(&mut PeriodicSender, u64);

/// Both ways a lane loop waits: sleeping in `epoll_wait`, and polling,
/// where the rings are looked at directly every turn.
#[test]
fn a_lane_loop_receives_two_tunnels_through_one_xdp_path() {
    if !need_root() {
        return;
    }
    for mode in [WaitMode::Interrupt, WaitMode::BusyPoll] {
        two_tunnels_through_one_xdp_path(mode);
    }
}

fn two_tunnels_through_one_xdp_path(mode: WaitMode) {
    let (_tb, h0, h1) = two_hosts(None);
    const PERIOD: u64 = 1_000_000;
    const FRAMES: u64 = 100;
    let params = |tunnel| TunnelParams {
        tunnel,
        period_ns: PERIOD,
        max_packet: Schema::Chunk26.frame_len(4),
        schema: Schema::Chunk26,
    };
    let mut lane: LaneLoop<Fill, Count> = LaneLoop::new().unwrap();
    let sinks = [Count::default(), Count::default()];
    let mut dsts = Vec::new();
    let mut ids = Vec::new();
    {
        let _ns = enter_netns(&h1.netns).unwrap();
        // A path opened right after another closed on the same interface
        // (the kernel frees the old queues a moment later).
        let x = rings(&h1);
        drop(x);
        let path = lane.add_xdp(rings(&h1)).unwrap();
        for (k, sink) in sinks.iter().enumerate() {
            let mut c = SocketConfig::express(SocketAddrV4::new(h1.addr, LANE_PORT + k as u16));
            c.rcvbuf = 1 << 20;
            let sock = LaneSocket::open(&c).unwrap();
            dsts.push(sock.local_addr().unwrap());
            ids.push(
                lane.add_receiver(ReceiverSpec {
                    sock,
                    core: PeriodicReceiver::new(params(k as u32 + 1)),
                    sink: sink.clone(),
                    open: None,
                    xdp: Some(path),
                })
                .unwrap(),
            );
        }
    }
    // Tunnel 2's sender writes its frames into h0's transmit ring.
    let tx_path = {
        let _ns = enter_netns(&h0.netns).unwrap();
        let rings = rings(&h0);
        lane.add_xdp(rings).unwrap()
    };
    let start = realtime_ns() + 20_000_000;
    let until = start + FRAMES * PERIOD;
    for (k, dst) in dsts.iter().enumerate() {
        let (sock, xdp) = in_netns(&h0.netns, || {
            let sock =
                LaneSocket::open(&SocketConfig::express(SocketAddrV4::new(h0.addr, 0))).unwrap();
            let xdp = (k == 1).then(|| XdpSend {
                path: tx_path,
                addrs: lane
                    .xdp(tx_path)
                    .unwrap()
                    .frame_addrs(sock.local_addr().unwrap(), &[*dst], 46)
                    .expect("the testbed's permanent neighbour entry"),
            });
            (sock, xdp)
        })
        .unwrap();
        lane.add_sender(SenderSpec {
            sock,
            core: PeriodicSender::new(params(k as u32 + 1), start + k as u64 * PERIOD / 2).unwrap(),
            dsts: vec![*dst],
            until_ns: until,
            fill: |c: &mut PeriodicSender, slot: u64| {
                let _ = c.enqueue(0, &slot.to_be_bytes());
            },
            seal: None,
            xdp,
        });
    }
    let stop = AtomicBool::new(false);
    lane.run(&stop, until + 200_000_000, mode).expect("run");
    let st = lane.stats();
    if mode == WaitMode::BusyPoll {
        // It spun: most turns found nothing, and it never slept.
        assert!(st.idle_turns > 0 && st.idle_turns < st.turns, "{st:?}");
        assert_eq!(st.sleeps, 0);
    } else {
        assert_eq!(st.idle_turns, 0, "{st:?}");
    }
    for (k, id) in ids.iter().enumerate() {
        let r = lane.receiver(*id).unwrap();
        let got = sinks[k].0.lock().unwrap().len() as u64;
        // Every datagram through the ring, none through the socket (every
        // frame sent arrived: checked below against the senders' counts).
        assert!(got > 0 && got <= FRAMES, "receiver {k}: {got} frames");
        assert_eq!(r.report.xdp, r.report.datagrams, "receiver {k}");
        assert_eq!(r.report.kernel_stamps, r.report.datagrams, "stamped by XDP");
        assert_eq!(r.report.refused, 0);
    }
    let tx = lane.xdp(tx_path).unwrap().stats();
    let (senders, _) = {
        let path = lane.xdp(XdpId(0)).unwrap();
        let st = path.stats();
        assert_eq!((st.malformed, st.unclaimed, st.ring_drops), (0, 0, 0));
        lane.into_ends()
    };
    for (k, s) in senders.iter().enumerate() {
        let got = sinks[k].0.lock().unwrap().len() as u64;
        assert_eq!(got, s.report.frames, "tunnel {k}: every frame sent arrived");
        assert_eq!(s.report.send_errors, 0);
    }
    // Tunnel 2 went through the ring (its frames carried the lane's DSCP
    // and port: h1's program steered them), tunnel 1 did not.
    assert_eq!(tx.sent, senders[1].report.frames);
    assert_eq!(tx.send_refused, 0);
    // The kernel was woken only when the ring asked (`need_wakeup`).
    assert!(tx.tx_wakeups <= tx.sent, "{tx:?}");
}

#[test]
fn frames_sent_through_the_ring_pass_the_receivers_checks() {
    if !need_root() {
        return;
    }
    let (_tb, h0, h1) = two_hosts(Some(1));
    // No program on h1: its kernel checks every checksum and length.
    let rx = in_netns(&h1.netns, || {
        UdpSocket::bind(SocketAddrV4::new(h1.addr, OTHER_PORT)).unwrap()
    })
    .unwrap();
    rx.set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let dst = SocketAddrV4::new(h1.addr, OTHER_PORT);
    let (_sock, mut rings, addrs) = in_netns(&h0.netns, || {
        let sock = LaneSocket::open(&SocketConfig::express(SocketAddrV4::new(h0.addr, 0))).unwrap();
        let rings = rings(&h0);
        let addrs = rings
            .frame_addrs(sock.local_addr().unwrap(), &[dst], 46)
            .unwrap();
        assert_eq!(addrs[0].src_mac, interface_mac(&h0.iface).unwrap());
        (sock, rings, addrs)
    })
    .unwrap();
    // Three rings' worth, in bursts the receiver drains: transmit frames
    // come back and are reused.
    let total = 3 * FRAMES as usize;
    let mut got = Vec::new();
    let mut buf = [0u8; 2048];
    let q = rings.tx_queue();
    for burst in (0..total).collect::<Vec<_>>().chunks(BURST) {
        for i in burst {
            rings
                .send(q, &addrs[0], format!("sent {i}").as_bytes())
                .expect("a free transmit frame");
        }
        let end = Instant::now() + Duration::from_secs(10);
        while got.len() < burst[burst.len() - 1] + 1 && Instant::now() < end {
            if let Ok((n, from)) = rx.recv_from(&mut buf) {
                assert_eq!(from, std::net::SocketAddr::V4(addrs[0].src));
                got.push(String::from_utf8(buf[..n].to_vec()).unwrap());
            }
        }
    }
    let want: Vec<String> = (0..total).map(|i| format!("sent {i}")).collect();
    assert_eq!(got, want, "every datagram, in order, intact");
    let st = rings.stats();
    assert_eq!((st.sent, st.send_refused), (total as u64, 0));
    // An unresolvable destination is a typed error, not a guess.
    let stranger = SocketAddrV4::new(std::net::Ipv4Addr::new(10, 254, 0, 9), 1);
    let e = in_netns(&h0.netns, || {
        rings
            .frame_addrs(addrs[0].src, &[stranger], 46)
            .unwrap_err()
    })
    .unwrap();
    assert!(e.to_string().contains("no resolved neighbour entry"), "{e}");
}
