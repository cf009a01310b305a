use super::*;
use crate::proto::App;
use std::net::Ipv4Addr;

fn cfg() -> ClientConfig {
    ClientConfig::new(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 9))
}

#[test]
fn agent_plans() {
    let mut c = cfg();
    c.rate = 1000.0;
    c.threads = 2;
    c.conns = 5;
    let p = plan_agents(&c);
    assert_eq!(p.len(), 2);
    assert_eq!((p[0].conns, p[1].conns), (3, 2));
    assert!(p.iter().all(|a| a.measure && a.rate == 500.0));
    c.agent = AgentKind::Throughput;
    assert!(plan_agents(&c).iter().all(|a| !a.measure));
    c.agent = AgentKind::Latency;
    let p = plan_agents(&c);
    assert_eq!(p.len(), 1);
    assert!(p[0].measure && p[0].rate == 1000.0);
    c.latency_rate = Some(100.0);
    let p = plan_agents(&c);
    assert_eq!(p.len(), 3);
    assert!(p[0].measure && p[0].rate == 100.0 && p[0].conns == 1);
    assert!(!p[1].measure && p[1].rate == 450.0);
    let idx: Vec<_> = p.iter().map(|a| a.index).collect();
    assert_eq!(idx, vec![0, 1, 2]);
}

fn tracker() -> Tracker {
    Tracker {
        measure: true,
        t0: 0,
        app: App::Echo,
        size: 64,
        inflight: vec![Slot::default(); INFLIGHT],
        outstanding: 0,
        counts: Counts::default(),
        batch: Vec::with_capacity(8),
        shared: Arc::new(Mutex::new(Vec::new())),
        shared_cap: 8,
        trace: Vec::new(),
        trace_cap: 0,
        timeline_ns: 0,
        timeline: Vec::new(),
    }
}

/// A response stamped before its request (a realtime clock step) is
/// answered but not a sample, and counted; never a latency of 0.
#[test]
fn receive_before_transmit_is_counted_not_sampled() {
    // (case, tx user, tx kernel, tx hw, rx kernel, rx hw, rx user, wire time)
    type Case = (
        &'static str,
        u64,
        u64,
        u64,
        Option<u64>,
        Option<u64>,
        u64,
        Option<u64>,
    );
    let table: &[Case] = &[
        (
            "kernel stamps",
            1000,
            1100,
            0,
            Some(5100),
            None,
            5200,
            Some(4000),
        ),
        ("user stamps", 1000, 0, 0, None, None, 5200, Some(4200)),
        (
            "hardware stamps",
            1000,
            1100,
            2000,
            Some(5100),
            Some(4500),
            5200,
            Some(2500),
        ),
        (
            "kernel rx before kernel tx",
            1000,
            1100,
            0,
            Some(1050),
            None,
            5200,
            None,
        ),
        ("user rx before user tx", 1000, 0, 0, None, None, 900, None),
        (
            "hardware rx before hardware tx",
            1000,
            1100,
            2000,
            Some(5100),
            Some(1500),
            5200,
            None,
        ),
        (
            "user rtt backwards",
            1000,
            1100,
            0,
            Some(5100),
            None,
            999,
            None,
        ),
    ];
    for &(case, tx_user, tx_sw, tx_hw, rx_sw, rx_hw, rx_user, wire) in table {
        let mut t = tracker();
        t.inflight[Tracker::slot_of(5)] = Slot {
            id: 5,
            sched_ns: 0,
            send_mono: 10,
            tx_user_rt: tx_user,
            tx_sw,
            tx_hw,
            ..Slot::default()
        };
        t.outstanding = 1;
        t.complete(5, rx_sw, rx_hw, rx_user, None);
        t.flush();
        let samples = lock(&t.shared).clone();
        assert_eq!((t.counts.received, t.outstanding), (1, 0), "{case}");
        match wire {
            Some(w) => {
                assert_eq!(t.counts.rx_before_tx, 0, "{case}");
                assert_eq!(samples.len(), 1, "{case}");
                assert_eq!(samples[0].latency_ns, 10 + w, "{case}");
            }
            None => {
                assert_eq!(t.counts.rx_before_tx, 1, "{case}");
                assert!(samples.is_empty(), "{case}: {samples:?}");
            }
        }
    }
}
