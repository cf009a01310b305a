//! Per-tunnel policing on real namespaces. Needs root; without it the test
//! prints "skipped: needs root" and returns. The testbed has its own
//! prefix and is torn down when the test ends (also on failure).

use std::collections::BTreeMap;
use std::net::{SocketAddrV4, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use xlane_testbed::policing::{IP_OFFSET_MAGIC, IP_OFFSET_TUNNEL, XLANE_MAGIC};
use xlane_testbed::*;
use xlane_wire::{field, Frame, FrameBuilder, Schema, HEADER_LEN, MAGIC};

/// Tunnel A: legitimate, paced.
const TUN_A: u32 = 0xa1;
/// Tunnel B: rogue, ~9× its allocation.
const TUN_B: u32 = 0xb2;
const RX_PORT: u16 = 9100;
/// Frame: header + 6 chunks of 26 bytes = 188 bytes of UDP payload.
const CHUNKS: usize = 6;
/// What HTB counts per packet: payload + UDP 8 + IP 20 + Ethernet 14.
const WIRE_BYTES: u64 = (HEADER_LEN + CHUNKS * 26) as u64 + 8 + 20 + 14;
const EF_TOS: u32 = 46 << 2;

fn need_root() -> bool {
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        println!("skipped: needs root");
        return false;
    }
    true
}

fn frame(tunnel: u32, seq: u64) -> Vec<u8> {
    let mut buf = vec![0u8; Schema::Chunk26.frame_len(CHUNKS)];
    let mut b = FrameBuilder::new(&mut buf, Schema::Chunk26).expect("buffer");
    for i in 0..CHUNKS {
        b.push_chunk(i as u8, b"policing test chunk!")
            .expect("chunk");
    }
    let n = b.finish(tunnel, seq, 0, 0).expect("finish");
    buf.truncate(n);
    buf
}

fn sender(tb: &Testbed, host: usize, port: u16) -> UdpSocket {
    let h = tb.host(host).expect("host");
    let s = in_netns(&h.netns, || {
        UdpSocket::bind(SocketAddrV4::new(h.addr, port))
    })
    .expect("enter netns")
    .expect("bind");
    socket2::SockRef::from(&s).set_tos(EF_TOS).expect("tos");
    s
}

/// Counts received frames per tunnel until stopped.
struct Receiver {
    counts: Arc<Mutex<BTreeMap<u32, u64>>>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Receiver {
    fn start(tb: &Testbed, host: usize) -> Receiver {
        let h = tb.host(host).expect("host");
        let s = in_netns(&h.netns, || {
            UdpSocket::bind(SocketAddrV4::new(h.addr, RX_PORT))
        })
        .expect("enter netns")
        .expect("bind");
        socket2::SockRef::from(&s)
            .set_recv_buffer_size(4 << 20)
            .expect("rcvbuf");
        s.set_read_timeout(Some(Duration::from_millis(20)))
            .expect("timeout");
        let counts = Arc::new(Mutex::new(BTreeMap::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (c, st) = (counts.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            let mut buf = [0u8; 2048];
            while !st.load(Ordering::Relaxed) {
                if let Ok(n) = s.recv(&mut buf) {
                    if let Ok(f) = Frame::new_checked(&buf[..n]) {
                        *c.lock().unwrap().entry(f.header().tunnel).or_insert(0) += 1;
                    }
                }
            }
        });
        Receiver {
            counts,
            stop,
            thread: Some(thread),
        }
    }

    fn count(&self, tunnel: u32) -> u64 {
        self.counts
            .lock()
            .unwrap()
            .get(&tunnel)
            .copied()
            .unwrap_or(0)
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn meter(tb: &Testbed, tunnel: u32, place: Place) -> TunnelMeter {
    tb.tunnel_meters()
        .expect("meters")
        .into_iter()
        .find(|m| m.tunnel == tunnel && m.place == place)
        .unwrap_or_else(|| panic!("no meter for tunnel {tunnel} at {place:?}"))
}

/// Send `n` frames of `tunnel`, `per_ms` per millisecond (open loop:
/// behind schedule it catches up at once). Returns the number sent.
fn send_paced(s: &UdpSocket, to: SocketAddrV4, tunnel: u32, n: u64, per_ms: u64) -> u64 {
    let start = Instant::now();
    let mut sent = 0;
    while sent < n {
        let due = ((start.elapsed().as_micros() as u64 / 1000) + 1) * per_ms;
        while sent < due.min(n) {
            if s.send_to(&frame(tunnel, sent), to).is_ok() {
                sent += 1;
            }
        }
        std::thread::sleep(Duration::from_micros(300));
    }
    sent
}

fn tc_out(ns: &str, args: &[&str]) -> String {
    let out = std::process::Command::new("tc")
        .args(["-n", ns])
        .args(args)
        .output()
        .expect("tc");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn filter_offsets_match_the_wire_format() {
    // IP header (IHL 5) + UDP header, then the xlane header.
    assert_eq!(IP_OFFSET_MAGIC as usize, 28 + field::MAGIC.start);
    assert_eq!(IP_OFFSET_TUNNEL as usize, 28 + field::TUNNEL.start);
    assert_eq!(XLANE_MAGIC.to_be_bytes(), MAGIC);
    let f = frame(0x0102_0304, 9);
    assert_eq!(&f[field::TUNNEL], &[1, 2, 3, 4]);
    assert_eq!(f.len() as u64 + 42, WIRE_BYTES);
}

#[test]
fn rogue_tunnel_is_policed_metered_and_demoted() {
    if !need_root() {
        return;
    }
    let tb = Testbed::up(TestbedConfig {
        hosts: 2,
        measure_probes: 0,
        ..TestbedConfig::default()
    })
    .expect("up");
    let ns_h0 = tb.host(0).unwrap().netns.clone();
    let ns_sw = tb.switch_netns().to_string();
    let to = SocketAddrV4::new(tb.host(1).unwrap().addr, RX_PORT);

    // A: 1 frame/ms = 1.84 Mbit/s on the wire, allocated 4 Mbit/s with a
    // generous burst. B: allocated 1 Mbit/s, 2 frames of burst, sends
    // 5 frames/ms = 9.2 Mbit/s.
    let pol_a = TunnelPolicy {
        tunnel: TUN_A,
        sublane: 0,
        rate_bps: 4_000_000,
        burst_bytes: 32_000,
        queue_pkts: 64,
        sender: 0,
        ports: vec![1],
    };
    let pol_b = TunnelPolicy {
        tunnel: TUN_B,
        rate_bps: 1_000_000,
        burst_bytes: 3028,
        queue_pkts: 16,
        ..pol_a.clone()
    };
    tb.install_tunnel_policy(&pol_a).expect("install A");
    tb.install_tunnel_policy(&pol_b).expect("install B");

    // Refusals.
    assert!(tb.install_tunnel_policy(&pol_a).is_err(), "installed twice");
    assert!(matches!(
        tb.install_tunnel_policy(&TunnelPolicy {
            tunnel: 7,
            ports: vec![5],
            ..pol_a.clone()
        }),
        Err(TestbedError::BadHost { index: 5, .. })
    ));
    assert!(tb.demote_tunnel(7).is_err());
    assert!(tb.remove_tunnel_policy(7).is_err());
    assert_eq!(tb.tunnel_policies().len(), 2);

    let classes = tc_out(
        &ns_h0,
        &["class", "show", "dev", &tb.host(0).unwrap().iface],
    );
    for t in [TUN_A, TUN_B] {
        let id = TunnelSlot::preferred(t).class_id();
        assert!(classes.contains(&format!("class htb {id} ")), "{classes}");
    }

    // Phase 1: A paced, B rogue, both marked EF.
    let rx = Receiver::start(&tb, 1);
    let (sa, sb) = (sender(&tb, 0, 9001), sender(&tb, 0, 9002));
    let t0 = Instant::now();
    let (a_sent, b_sent, b_secs) = std::thread::scope(|sc| {
        let ha = sc.spawn(|| send_paced(&sa, to, TUN_A, 1000, 1));
        let hb = sc.spawn(|| {
            let t = Instant::now();
            let n = send_paced(&sb, to, TUN_B, 5000, 5);
            (n, t.elapsed().as_secs_f64())
        });
        let a = ha.join().expect("A sender");
        let (b, secs) = hb.join().expect("B sender");
        (a, b, secs)
    });
    // B's queue (16 frames at 1 Mbit/s) drains in ~30 ms.
    std::thread::sleep(Duration::from_millis(200));
    let elapsed = t0.elapsed().as_secs_f64();
    let (a_rx, b_rx) = (rx.count(TUN_A), rx.count(TUN_B));

    let a_h = meter(&tb, TUN_A, Place::Host(0));
    let a_p = meter(&tb, TUN_A, Place::SwitchPort(1));
    let b_h = meter(&tb, TUN_B, Place::Host(0));
    let b_p = meter(&tb, TUN_B, Place::SwitchPort(1));
    let express = tb.host_qdisc_stats(0).expect("h0 stats").express;
    println!(
        "A sent {a_sent} rx {a_rx}; B sent {b_sent} in {b_secs:.2} s, rx {b_rx}\n\
         A host {:?}\nA port {:?}\nB host {:?}\nB port {:?}\nh0 1:10 {express:?}",
        a_h.class, a_p.class, b_h.class, b_p.class
    );
    assert_eq!(a_rx, a_sent, "A lost frames");
    for m in [&a_h, &a_p] {
        assert_eq!(m.class.sent_packets, a_sent, "{m:?}");
        assert_eq!(m.class.dropped, 0, "{m:?}");
        assert_eq!(m.class.overlimits, 0, "{m:?}");
        assert!(!m.demoted && m.demoted_traffic.is_none());
    }
    assert!(b_h.class.dropped > 0, "{b_h:?}");
    assert!(b_h.class.overlimits > 0, "{b_h:?}");
    assert_eq!(
        b_h.class.sent_packets + b_h.class.dropped + b_h.class.backlog_packets,
        b_sent,
        "{b_h:?}"
    );
    assert_eq!(b_p.class.dropped, 0, "the host already policed B: {b_p:?}");
    // B got at most its allocation (plus burst), and a fair part of it.
    let allowed = (1_000_000.0 / 8.0 * elapsed + 3028.0) / WIRE_BYTES as f64;
    assert!(
        (b_rx as f64) <= allowed * 1.05 + 2.0,
        "B received {b_rx}, allowed {allowed:.0}"
    );
    let fair = 1_000_000.0 / 8.0 * b_secs / WIRE_BYTES as f64;
    assert!(
        (b_rx as f64) >= 0.5 * fair,
        "B received {b_rx}, expected about {fair:.0}"
    );
    // Tunnel filters come before the DSCP filter: 1:10 saw (almost) none.
    assert!(express.sent_packets < 10, "{express:?}");

    // Phase 2: demote B; its frames go to best effort and are counted.
    tb.demote_tunnel(TUN_B).expect("demote");
    tb.demote_tunnel(TUN_B).expect("demote again is a no-op");
    let be_h0 = tb.host_qdisc_stats(0).unwrap().best_effort;
    let be_p1 = tb.qdisc_stats(1).unwrap().best_effort;
    let b_rx0 = rx.count(TUN_B);
    let n = send_paced(&sb, to, TUN_B, 300, 5);
    std::thread::sleep(Duration::from_millis(100));
    let be_h0_d = tb.host_qdisc_stats(0).unwrap().best_effort.sent_packets - be_h0.sent_packets;
    let be_p1_d = tb.qdisc_stats(1).unwrap().best_effort.sent_packets - be_p1.sent_packets;
    let b_h2 = meter(&tb, TUN_B, Place::Host(0));
    let b_p2 = meter(&tb, TUN_B, Place::SwitchPort(1));
    println!("demoted: BE +{be_h0_d} (h0) +{be_p1_d} (p1)\nB host {b_h2:?}\nB port {b_p2:?}");
    assert!(be_h0_d >= n && be_p1_d >= n, "{be_h0_d} {be_p1_d} < {n}");
    assert_eq!(rx.count(TUN_B) - b_rx0, n, "demoted B frames lost");
    for (before, after) in [(&b_h, &b_h2), (&b_p, &b_p2)] {
        assert!(after.demoted, "{after:?}");
        assert_eq!(
            after.class.sent_packets, before.class.sent_packets,
            "class frozen"
        );
        assert_eq!(
            after.demoted_traffic,
            Some(Counts {
                packets: n,
                bytes: n * WIRE_BYTES
            }),
            "{after:?}"
        );
    }
    assert!(!meter(&tb, TUN_A, Place::Host(0)).demoted);
    assert!(tb
        .tunnel_policies()
        .iter()
        .any(|t| t.policy.tunnel == TUN_B && t.demoted));

    // Promote again: B's frames are back in its class.
    tb.promote_tunnel(TUN_B).expect("promote");
    let sent_before = meter(&tb, TUN_B, Place::Host(0)).class.sent_packets;
    let n2 = send_paced(&sb, to, TUN_B, 10, 1);
    std::thread::sleep(Duration::from_millis(100));
    let b_h3 = meter(&tb, TUN_B, Place::Host(0));
    assert!(!b_h3.demoted && b_h3.demoted_traffic.is_none(), "{b_h3:?}");
    assert_eq!(b_h3.class.sent_packets - sent_before, n2, "{b_h3:?}");
    drop(rx);

    // Express queue fitting.
    tb.set_express_queue(1, 0, 7).expect("set queue");
    tb.set_express_queue(1, 1, 300).expect("set queue 2");
    let q = tc_out(
        &ns_sw,
        &["qdisc", "show", "dev", tb.switch_port(1).unwrap()],
    );
    assert!(q.contains("qdisc pfifo 10: parent 1:10 limit 7p"), "{q}");
    assert!(q.contains("qdisc pfifo 20: parent 1:20 limit 300p"), "{q}");
    assert!(tb.set_express_queue(5, 0, 7).is_err());
    assert!(tb.set_express_queue(1, 2, 7).is_err());
    assert!(tb.set_express_queue(1, 0, 0).is_err());

    // Removal leaves the shaping as it was.
    tb.remove_tunnel_policy(TUN_A).expect("remove A");
    tb.remove_tunnel_policy(TUN_B).expect("remove B");
    assert!(tb.tunnel_meters().expect("meters").is_empty());
    let dev0 = tb.host(0).unwrap().iface.clone();
    for (ns, dev) in [
        (&ns_h0, dev0.as_str()),
        (&ns_sw, tb.switch_port(1).unwrap()),
    ] {
        let classes = tc_out(ns, &["class", "show", "dev", dev]);
        let filters = tc_out(ns, &["filter", "show", "dev", dev]);
        assert_eq!(classes.lines().count(), 4, "{classes}");
        for t in [TUN_A, TUN_B] {
            let id = TunnelSlot::preferred(t).class_id();
            assert!(!filters.contains(&format!("flowid {id}")), "{filters}");
        }
        assert!(!filters.contains("mirred"), "{filters}");
    }
    tb.down().expect("down");
}
