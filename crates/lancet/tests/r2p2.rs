//! Lancet's R2P2 agent against the crate's R2P2 synthetic and echo servers
//! on 127.0.0.1: every request answered exactly once, across several
//! worker ports picked at random; requests and replies of several packets
//! (REQ0, the server's REQRDY, REQ1…REQn to the server, a reply in 4
//! packets); DROPs from a full worker counted beside the goodput and never
//! taken as samples. Kernel stamps on both ends, by the F/L flags.
//!
//! No time is asserted: only counts, and the order of stamps.

use std::net::{Ipv4Addr, SocketAddrV4};
use xlane_lancet::client::stamp;
use xlane_lancet::{
    run_traced, App, Arrival, ClientConfig, RunOutput, ServeConfig, ServeMode, Server, ServiceDist,
    Transport,
};

fn lo() -> SocketAddrV4 {
    SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0)
}

fn r2p2_server(mode: ServeMode, workers: usize, queue_cap: usize) -> Server {
    let cfg = ServeConfig {
        transport: Transport::R2p2,
        mode,
        workers,
        queue_cap,
        ..ServeConfig::echo(lo())
    };
    Server::start(&cfg).expect("r2p2 server starts")
}

fn client(srv: &Server, app: App, size: usize, rate: f64) -> ClientConfig {
    let (&first, more) = srv.addrs().split_first().unwrap();
    ClientConfig {
        transport: Transport::R2p2,
        app,
        size,
        rate,
        arrival: Arrival::Poisson,
        duration_ns: 1_000_000_000,
        max_duration_ns: 1_000_000_000,
        warmup_ns: Some(0),
        percentiles: vec![50.0],
        stamp_trace: 100_000,
        // A safety net for the last replies on a busy machine, not a bound.
        drain_ns: 5_000_000_000,
        more_targets: more.to_vec(),
        ..ClientConfig::new(first)
    }
}

fn run(cfg: &ClientConfig) -> RunOutput {
    run_traced(cfg).expect("the run completes")
}

/// Every request answered once, each sample kernel-stamped both ways with
/// the stamps in order.
fn all_answered(name: &str, out: &RunOutput) {
    let c = &out.report.counts;
    assert!(c.sent > 100, "{name}: {c:?}");
    assert_eq!(c.received, c.sent, "{name}: {c:?}");
    assert_eq!(
        (c.lost, c.dropped, c.unmatched, c.malformed, c.send_errors),
        (0, 0, 0, 0, 0),
        "{name}: {c:?}"
    );
    assert_eq!(out.samples.len() as u64, c.received, "{name}");
    let stamped = out
        .samples
        .iter()
        .filter(|s| s.stamps & stamp::TX_KERNEL != 0 && s.stamps & stamp::RX_KERNEL != 0)
        .count();
    assert!(
        stamped * 100 >= out.samples.len() * 95,
        "{name}: {stamped} of {} samples kernel-stamped both ways",
        out.samples.len()
    );
    for t in &out.trace {
        if let (Some(tx), Some(rx)) = (t.tx_kernel_ns, t.rx_kernel_ns) {
            assert!(
                t.tx_user_ns <= tx && tx <= rx && rx <= t.rx_user_ns,
                "{name}: {t:?}"
            );
        }
    }
}

#[test]
fn synthetic_requests_spread_over_worker_ports_are_each_answered_once() {
    let srv = r2p2_server(ServeMode::Synthetic(ServiceDist::Fixed(0)), 3, 1 << 16);
    assert_eq!(srv.addrs().len(), 3);
    let out = run(&client(&srv, App::Synthetic, 64, 1000.0));
    all_answered("synthetic", &out);
    // The synthetic reply carries the server's sojourn.
    assert!(out.samples.iter().all(|s| s.server_ns != u32::MAX));
    let st = srv.stop();
    assert_eq!(st.requests, out.report.counts.sent);
    assert_eq!(st.responses, st.requests);
    assert_eq!((st.malformed, st.dropped, st.send_errors), (0, 0, 0));
    assert!(out.report.render().contains("targets: 3 servers"));
}

#[test]
fn multi_packet_requests_and_replies_complete() {
    // 5000 B: REQ0 (14 B) and 4 REQn after the REQRDY; the echo is a
    // 4-packet reply.
    let srv = r2p2_server(ServeMode::Echo, 1, 1 << 16);
    let out = run(&client(&srv, App::Echo, 5000, 300.0));
    all_answered("echo 5000 B", &out);
    let st = srv.stop();
    assert_eq!(st.responses, out.report.counts.sent);
}

#[test]
fn drops_are_counted_beside_the_goodput_and_never_sampled() {
    // One worker, a FIFO of one, 20 ms per request, 300 requests/s:
    // most requests find the FIFO full.
    let srv = r2p2_server(ServeMode::Synthetic(ServiceDist::Fixed(20_000_000)), 1, 1);
    let out = run(&client(&srv, App::Synthetic, 64, 300.0));
    let c = &out.report.counts;
    assert!(c.dropped > c.sent / 2, "{c:?}");
    assert!(c.received > 0, "{c:?}");
    assert_eq!(c.received + c.dropped + c.lost, c.sent, "{c:?}");
    assert_eq!(c.lost, 0, "{c:?}");
    assert_eq!(out.samples.len() as u64, c.received);
    assert!(!out.report.valid, "drops must fail the responses check");
    let text = out.report.render();
    assert!(
        text.contains(&format!("r2p2: {} requests refused with DROP", c.dropped)),
        "{text}"
    );
    let st = srv.stop();
    assert_eq!(st.dropped, c.dropped);
}

#[test]
fn several_targets_over_tcp_are_refused() {
    let t = SocketAddrV4::new(Ipv4Addr::LOCALHOST, 9);
    let tcp_many = ClientConfig {
        transport: Transport::Tcp,
        more_targets: vec![t],
        ..ClientConfig::new(t)
    };
    assert_eq!(
        tcp_many.validate(),
        Err(xlane_lancet::ConfigError::TcpTargets)
    );
}

/// A stepped rate and a timeline: each bucket counts the requests
/// scheduled in it (at the step's rate), and every request is in exactly
/// one bucket as answered, dropped or lost. One worker with a FIFO of one
/// and 5 ms per request refuses most of the faster stretch.
#[test]
fn a_stepped_rate_is_counted_per_bucket() {
    let srv = r2p2_server(ServeMode::Synthetic(ServiceDist::Fixed(5_000_000)), 1, 1);
    let cfg = ClientConfig {
        duration_ns: 2_000_000_000,
        max_duration_ns: 2_000_000_000,
        rate_steps: vec![xlane_lancet::RateStep {
            at_ns: 1_000_000_000,
            rate: 2000.0,
        }],
        timeline_ns: 250_000_000,
        ..client(&srv, App::Synthetic, 64, 100.0)
    };
    let out = run(&cfg);
    let c = &out.report.counts;
    let tl = &out.timeline;
    assert_eq!(tl.len(), 8, "{tl:?}");
    let sum = |f: fn(&xlane_lancet::TimelineBucket) -> u64| tl.iter().map(f).sum::<u64>();
    assert_eq!(sum(|b| b.sent), c.sent, "{tl:?} {c:?}");
    assert_eq!(sum(|b| b.answered), c.received, "{tl:?} {c:?}");
    assert_eq!(sum(|b| b.dropped), c.dropped, "{tl:?} {c:?}");
    assert_eq!(sum(|b| b.lost), c.lost, "{tl:?} {c:?}");
    for b in tl {
        assert_eq!(b.sent, b.answered + b.dropped + b.lost, "{b:?}");
    }
    // The schedule (not the clock) decides the buckets: 25 expected per
    // bucket at 100/s, 500 at 2000/s (Poisson: well within these bounds).
    for (i, b) in tl.iter().enumerate() {
        let (lo, hi) = if i < 4 { (5, 60) } else { (380, 620) };
        assert!((lo..=hi).contains(&b.sent), "bucket {i}: {b:?}");
    }
    // At 2000/s against one 5 ms worker, most are refused.
    let fast: u64 = tl[4..].iter().map(|b| b.dropped).sum();
    let fast_sent: u64 = tl[4..].iter().map(|b| b.sent).sum();
    assert!(fast * 2 > fast_sent, "{tl:?}");
    // The rate check compares with the stepped schedule's mean over the
    // run (1050/s over 2 s), not with the first rate (100/s).
    let rate = out.report.checks.iter().find(|c| c.name == "rate").unwrap();
    let th = rate.threshold.unwrap();
    assert!(th > 500.0 && th <= cfg.mean_rate(2_000_000_000), "{th}");
    srv.stop();
}

#[test]
fn bad_rate_steps_and_timelines_are_refused() {
    let t = SocketAddrV4::new(Ipv4Addr::LOCALHOST, 9);
    let step = |at_ns, rate| xlane_lancet::RateStep { at_ns, rate };
    let base = ClientConfig::new(t);
    let cases: Vec<(Vec<xlane_lancet::RateStep>, u64, bool)> = vec![
        (vec![step(1_000_000_000, 10.0)], 0, true),
        (vec![step(0, 10.0)], 0, false),
        (vec![step(2, 10.0), step(1, 10.0)], 0, false),
        (vec![step(base.max_duration_ns, 10.0)], 0, false),
        (vec![step(5, 0.0)], 0, false),
        (vec![step(5, f64::NAN)], 0, false),
        (vec![], 1_000_000, true),
        (vec![], 999_999, false),
    ];
    for (steps, timeline_ns, ok) in cases {
        let cfg = ClientConfig {
            rate_steps: steps.clone(),
            timeline_ns,
            ..base.clone()
        };
        assert_eq!(cfg.validate().is_ok(), ok, "{steps:?} {timeline_ns}");
    }
}
