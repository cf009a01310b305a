//! Integration tests on real network namespaces. They need root; without it
//! each prints "skipped: needs root" and returns. Every test makes its own
//! testbed (unique prefix) and removes it.

use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use xlane_testbed::*;

fn need_root() -> bool {
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        println!("skipped: needs root");
        return false;
    }
    true
}

fn netns_left(prefix: &str) -> Vec<String> {
    let want = format!("{prefix}-");
    std::fs::read_dir("/run/netns")
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .filter_map(|e| e.file_name().to_str().map(str::to_string))
                .filter(|n| n.starts_with(&want))
                .collect()
        })
        .unwrap_or_default()
}

fn quick() -> TestbedConfig {
    TestbedConfig {
        measure_probes: 0,
        ..TestbedConfig::default()
    }
}

fn bind_in(h: &HostInfo, port: u16) -> UdpSocket {
    let s = in_netns(&h.netns, || {
        UdpSocket::bind(SocketAddrV4::new(h.addr, port))
    })
    .expect("enter netns")
    .expect("bind");
    s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    s
}

#[test]
fn hosts_reach_each_other_and_nothing_else() {
    if !need_root() {
        return;
    }
    let tb = Testbed::up(quick()).expect("up");
    assert_eq!(tb.hosts().len(), 4);
    let socks: Vec<UdpSocket> = tb.hosts().iter().map(|h| bind_in(h, 7000)).collect();
    let mut buf = [0u8; 64];
    for a in tb.hosts() {
        for b in tb.hosts() {
            if a.index == b.index {
                continue;
            }
            let msg = format!("ping {} {}", a.index, b.index);
            socks[a.index]
                .send_to(msg.as_bytes(), SocketAddrV4::new(b.addr, 7000))
                .unwrap();
            let (n, from) = socks[b.index].recv_from(&mut buf).expect("request arrives");
            assert_eq!(&buf[..n], msg.as_bytes());
            assert_eq!(from, SocketAddrV4::new(a.addr, 7000).into());
            socks[b.index].send_to(b"pong", from).unwrap();
            let (n, from) = socks[a.index].recv_from(&mut buf).expect("echo arrives");
            assert_eq!(&buf[..n], b"pong");
            assert_eq!(from, SocketAddrV4::new(b.addr, 7000).into());
        }
    }
    // No route out: connecting (which sends nothing for UDP) must fail.
    {
        let _g = enter_netns(&tb.hosts()[0].netns).unwrap();
        let s = UdpSocket::bind("0.0.0.0:0").unwrap();
        let e = s
            .connect("192.0.2.1:9")
            .expect_err("no route outside the testbed");
        assert_eq!(e.raw_os_error(), Some(libc::ENETUNREACH), "{e}");
    }
    // The guard put this thread back: the testbed address is not here.
    assert!(UdpSocket::bind(SocketAddrV4::new(tb.hosts()[0].addr, 0)).is_err());
}

#[test]
fn multicast_reaches_every_other_host() {
    if !need_root() {
        return;
    }
    let tb = Testbed::up(TestbedConfig {
        hosts: 4,
        ..quick()
    })
    .expect("up");
    let group = Ipv4Addr::new(239, 1, 2, 3);
    let receivers: Vec<UdpSocket> = tb.hosts()[1..]
        .iter()
        .map(|h| {
            let s = in_netns(&h.netns, || UdpSocket::bind("0.0.0.0:7001"))
                .unwrap()
                .unwrap();
            s.join_multicast_v4(&group, &h.addr).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
            s
        })
        .collect();
    let h0 = &tb.hosts()[0];
    let tx = bind_in(h0, 0);
    tx.send_to(b"hello group", SocketAddrV4::new(group, 7001))
        .unwrap();
    for (k, r) in receivers.iter().enumerate() {
        let mut buf = [0u8; 64];
        let (n, from) = r
            .recv_from(&mut buf)
            .unwrap_or_else(|e| panic!("h{} got nothing: {e}", k + 1));
        assert_eq!(&buf[..n], b"hello group");
        assert_eq!(from.ip(), std::net::IpAddr::V4(h0.addr));
    }
}

#[test]
fn down_removes_everything_and_attach_does_not_own() {
    if !need_root() {
        return;
    }
    let tb = Testbed::up(TestbedConfig {
        express2_dscp: None,
        ..quick()
    })
    .expect("up");
    let prefix = tb.prefix().to_string();
    assert_eq!(netns_left(&prefix).len(), 5);
    assert!(state::state_path(&prefix).exists());
    {
        let other = Testbed::attach(&prefix).expect("attach");
        assert!(!other.is_owned());
        assert_eq!(other.hosts(), tb.hosts());
        assert_eq!(other.config(), tb.config());
        let st = other.qdisc_stats(0).expect("stats of an attached testbed");
        assert!(st.express2.is_none());
    } // dropping the attached view leaves the testbed alone
    assert_eq!(netns_left(&prefix).len(), 5);
    let removed = down(&prefix).expect("down");
    assert!(removed.contains(&format!("{prefix}-sw")), "{removed:?}");
    assert!(netns_left(&prefix).is_empty());
    assert!(!state::state_path(&prefix).exists());
    assert!(matches!(down(&prefix), Err(TestbedError::NoSuchTestbed(_))));
    drop(tb); // already gone: must not fail or panic
}

#[test]
fn drop_tears_down_during_a_panic() {
    if !need_root() {
        return;
    }
    let slot: Arc<Mutex<Option<String>>> = Arc::default();
    let s2 = slot.clone();
    let r = catch_unwind(AssertUnwindSafe(move || {
        let tb = Testbed::up(quick()).expect("up");
        *s2.lock().unwrap() = Some(tb.prefix().to_string());
        let _flood = tb
            .start_cross_traffic(CrossTraffic::udp(0, 1).rate(10_000_000))
            .unwrap();
        panic!("deliberate panic inside a testbed");
    }));
    assert!(r.is_err());
    let prefix = slot.lock().unwrap().clone().expect("testbed came up");
    assert!(netns_left(&prefix).is_empty(), "{:?}", netns_left(&prefix));
    assert!(!state::state_path(&prefix).exists());
}

#[test]
fn failed_up_leaves_nothing() {
    if !need_root() {
        return;
    }
    // Valid for xlane, refused by tc ("Illegal burst": 12.5 GB), so `up`
    // fails after the namespaces exist and must remove them again.
    let prefix = format!("tf{}", std::process::id() % 1_000_000);
    let r = Testbed::up(TestbedConfig {
        link_rate_bps: 100_000_000_000,
        burst_ns: 1_000_000_000,
        prefix: Some(prefix.clone()),
        ..quick()
    });
    match r {
        Err(TestbedError::Command(e)) => assert!(e.command.contains("tc"), "{e}"),
        other => panic!("expected a tc failure, got {other:?}"),
    }
    assert!(netns_left(&prefix).is_empty(), "{:?}", netns_left(&prefix));
    assert!(!state::state_path(&prefix).exists());
}

#[test]
fn down_all_removes_leaked_but_not_live() {
    if !need_root() {
        return;
    }
    let live = Testbed::up(quick()).expect("up live");
    let leaked = Testbed::up(quick())
        .expect("up leaked")
        .detach()
        .expect("detach");
    let st = status();
    let s = st
        .iter()
        .find(|s| s.prefix == leaked)
        .expect("status lists it");
    assert!(
        !s.owner_alive && s.switch_present && s.host_netns.len() == 4,
        "{s:?}"
    );
    let l = st
        .iter()
        .find(|s| s.prefix == live.prefix())
        .expect("status lists live");
    assert!(l.owner_alive, "{l:?}");
    let removed = down_all().expect("down_all");
    assert!(removed.contains(&leaked), "{removed:?}");
    assert!(!removed.iter().any(|p| p == live.prefix()), "{removed:?}");
    assert!(netns_left(&leaked).is_empty());
    assert_eq!(netns_left(live.prefix()).len(), 5);
}

#[test]
fn topology_is_measured_and_round_trips() {
    if !need_root() {
        return;
    }
    let tb = Testbed::up(TestbedConfig {
        hosts: 3,
        measure_probes: 500,
        ..TestbedConfig::default()
    })
    .expect("up");
    let t = tb.export_topology();
    assert_eq!(t.node.len(), 4);
    assert_eq!(t.link.len(), 6);
    for i in 0..3 {
        let h = format!("h{i}");
        for l in [
            t.link(&h, "sw").expect("uplink"),
            t.link("sw", &h).expect("downlink"),
        ] {
            assert!(l.measured && l.min_latency_ns > 0, "{l:?}");
            assert_eq!(l.bandwidth_bps, 1_000_000_000);
            assert_eq!(l.express_queue_pkts, 64);
        }
    }
    let text = t.to_toml().unwrap();
    println!("{text}");
    assert_eq!(Topology::from_toml(&text).unwrap(), t);
    let path = std::env::temp_dir().join(format!("{}-topology.toml", tb.prefix()));
    t.write_to(&path).unwrap();
    let back = Topology::read_from(&path).unwrap();
    let _ = std::fs::remove_file(&path);
    assert_eq!(back, t);
    // The state file carries the measurement for other processes.
    let attached = Testbed::attach(tb.prefix()).unwrap();
    assert_eq!(attached.export_topology(), t);
}

#[test]
fn generators_run_report_and_stop_with_the_testbed() {
    if !need_root() {
        return;
    }
    let tb = Testbed::up(TestbedConfig {
        hosts: 2,
        link_rate_bps: 100_000_000,
        ..quick()
    })
    .expect("up");
    let tcp = tb
        .start_cross_traffic(CrossTraffic::tcp(0, 1).rate(20_000_000))
        .expect("tcp");
    let udp = tb
        .start_cross_traffic(CrossTraffic::udp(1, 0))
        .expect("udp");
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(tb.generators_running(), 2);
    let rec = state::read_state(tb.prefix()).unwrap().unwrap();
    assert_eq!(rec.generators.len(), 2, "{:?}", rec.generators);
    let r = tcp.stop();
    println!("{r:?}");
    assert!(r.error.is_none(), "{r:?}");
    assert!(
        r.bytes_received > 0 && r.bytes_sent >= r.bytes_received,
        "{r:?}"
    );
    let stats = tb.host_qdisc_stats(1).unwrap();
    assert!(stats.best_effort.sent_packets > 0, "{stats:?}");
    // Dropping the testbed stops the generator it still runs.
    let prefix = tb.prefix().to_string();
    drop(tb);
    assert!(!udp.is_running());
    let r = udp.stop();
    println!("{r:?}");
    assert!(r.packets_received > 0, "{r:?}");
    assert!(netns_left(&prefix).is_empty());
}

#[test]
fn express_class_keeps_its_probes_through_a_saturating_flood() {
    if !need_root() {
        return;
    }
    // Switch ports at 100 Mbit/s, host NICs at 200 Mbit/s: one unpaced
    // sender h1 -> h2 overloads the switch port towards h2 two to one.
    let tb = Testbed::up(TestbedConfig {
        hosts: 3,
        link_rate_bps: 100_000_000,
        host_rate_bps: Some(200_000_000),
        best_effort_queue_pkts: 100,
        ..quick()
    })
    .expect("up");
    let flood = tb
        .start_cross_traffic(CrossTraffic::udp(1, 2))
        .expect("flood");
    std::thread::sleep(Duration::from_millis(200));
    let res = tb
        .probe(&ProbeSpec {
            from: 0,
            to: 2,
            tos: vec![dscp_to_tos(DSCP_EF), 0x00],
            count: 600,
            interval: Duration::from_micros(1000),
            timeout: Duration::from_millis(200),
        })
        .expect("probe");
    let stats = tb.qdisc_stats(2).expect("stats");
    let report = flood.stop();
    let (ex, be) = (&res.classes[0], &res.classes[1]);
    let q = |c: &ClassSamples, x: f64| c.quantile(x).unwrap_or(u64::MAX);
    println!(
        "express: n={} lost={} p50={}ns p99={}ns | best effort: n={} lost={} p50={}ns p99={}ns",
        ex.one_way_ns.len(),
        ex.lost(),
        q(ex, 0.5),
        q(ex, 0.99),
        be.one_way_ns.len(),
        be.lost(),
        q(be, 0.5),
        q(be, 0.99)
    );
    println!("flood: {report:?}\nswitch port h2: {stats:?}");
    assert!(report.error.is_none(), "{report:?}");
    assert!(
        stats.best_effort.dropped > 0,
        "the flood must overflow the port: {stats:?}"
    );
    assert!(
        ex.one_way_ns.len() * 10 >= ex.sent * 9,
        "express lost probes: {}",
        ex.lost()
    );
    assert!(
        !be.one_way_ns.is_empty(),
        "no best-effort probe got through"
    );
    // Strict priority, shown by the queues rather than by timing the probes
    // (how much sooner express arrives depends on how busy the machine is;
    // `xlane bench jitter` and `xlane bench lane` report that as a ratio):
    // the flood overflows the best-effort queue while the express class,
    // which carried every express probe, drops nothing.
    assert_eq!(
        stats.express.dropped, 0,
        "the express class dropped packets under the flood: {stats:?}"
    );
    assert!(
        stats.express.sent_packets >= ex.one_way_ns.len() as u64,
        "express probes did not leave through the express class: {stats:?}"
    );
}
