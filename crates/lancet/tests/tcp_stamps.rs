//! Kernel stamps on TCP: the client against the crate's own server on
//! 127.0.0.1, with messages longer than one segment (65 507 B; the loopback
//! MSS at connect is about 32 741 B, checked): echo (64 KiB each way, two
//! connections) and the synthetic protocol (64 KiB requests, 32 B
//! responses). Nearly every sample must carry kernel transmit and receive
//! stamps, the report must say so, and every traced request's stamps must
//! be in order and inside the run's wall-clock window. The two tests run
//! side by side in about 2 s.
//!
//! No absolute times are asserted: only the order of stamps and shares.

use std::net::{Ipv4Addr, SocketAddrV4, TcpStream};
use xlane_host::socket::realtime_ns;
use xlane_lancet::client::stamp;
use xlane_lancet::proto::MAX_MESSAGE_LEN;
use xlane_lancet::{
    run_traced, App, Arrival, ClientConfig, ServeConfig, ServeMode, Server, ServiceDist, Transport,
};

/// Smallest share of samples (and traced requests) with kernel stamps: the
/// kernel turns receive stamping on lazily, so the very first responses may
/// come unstamped.
const MIN_SHARE: f64 = 0.95;

fn lo() -> SocketAddrV4 {
    SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0)
}

/// The percentage printed right after `what` in the report.
fn share_after(text: &str, what: &str) -> Option<u32> {
    let rest = &text[text.find(what)? + what.len()..];
    rest[..rest.find('%')?].parse().ok()
}

fn check(name: &str, serve: ServeConfig, app: App, conns: usize) {
    let srv = Server::start(&serve).expect("server starts");
    let target = srv.local_addr();
    // The messages must really be longer than one segment.
    let probe = TcpStream::connect(target).expect("probe connection");
    let mss = xlane_lancet::tstamp::segment_size(&probe).expect("TCP_MAXSEG");
    drop(probe);
    assert!(
        MAX_MESSAGE_LEN > mss as usize,
        "{name}: MSS {mss} is not below the {MAX_MESSAGE_LEN}-byte messages"
    );
    let cfg = ClientConfig {
        transport: Transport::Tcp,
        app,
        size: MAX_MESSAGE_LEN,
        rate: 200.0,
        arrival: Arrival::Poisson,
        conns,
        duration_ns: 1_500_000_000,
        max_duration_ns: 1_500_000_000,
        percentiles: vec![50.0],
        stamp_trace: 100_000,
        // A safety net for the last responses on a busy machine, not a bound.
        drain_ns: 5_000_000_000,
        ..ClientConfig::new(target)
    };
    let before = realtime_ns();
    let out = run_traced(&cfg).expect("the run completes");
    let after = realtime_ns();
    srv.stop();
    let rep = &out.report;
    let text = rep.render();
    println!("{name} (MSS {mss}):\n{text}");
    let k = &rep.counts;
    assert!(
        k.received as f64 >= 0.95 * k.sent as f64 && k.sent > 100,
        "{name}: {k:?}"
    );
    assert_eq!(k.tx_stamp_mismatch, 0, "{name}: {k:?}");
    let stamped = (k.tx_kernel + k.tx_hardware + k.tx_user) as f64;
    assert!(
        k.tx_kernel as f64 >= MIN_SHARE * stamped,
        "{name}: kernel tx stamps on too few samples: {k:?}"
    );
    assert!(
        k.rx_kernel as f64 >= MIN_SHARE * stamped,
        "{name}: kernel rx stamps on too few samples: {k:?}"
    );
    for what in ["stamps: tx kernel ", "; rx kernel "] {
        let share = share_after(&text, what);
        assert!(
            share.is_some_and(|p| p as f64 >= MIN_SHARE * 100.0),
            "{name}: the report does not say kernel stamps were used ({what:?}: {share:?})"
        );
    }
    // The samples carry the same marks.
    let both = stamp::TX_KERNEL | stamp::RX_KERNEL;
    let marked = out
        .samples
        .iter()
        .filter(|s| s.stamps & both == both)
        .count();
    assert!(
        marked as f64 >= MIN_SHARE * out.samples.len() as f64 && !out.samples.is_empty(),
        "{name}: {marked} of {} samples kernel-stamped both ways",
        out.samples.len()
    );
    // Raw stamps: in order, and within the run.
    assert_eq!(
        out.trace.len() as u64,
        k.received,
        "{name}: every answer traced"
    );
    let mut kernel = 0usize;
    for t in &out.trace {
        let (Some(tx), Some(rx)) = (t.tx_kernel_ns, t.rx_kernel_ns) else {
            continue;
        };
        kernel += 1;
        assert!(tx <= rx, "{name}: tx stamp after rx stamp: {t:?}");
        assert!(
            tx >= before && rx <= after,
            "{name}: stamps outside the run [{before}, {after}]: {t:?}"
        );
    }
    assert!(
        kernel as f64 >= MIN_SHARE * out.trace.len() as f64,
        "{name}: {kernel} of {} traced requests have both kernel stamps",
        out.trace.len()
    );
}

#[test]
fn tcp_echo_multi_segment_messages_get_kernel_stamps() {
    let serve = ServeConfig {
        transport: Transport::Tcp,
        ..ServeConfig::echo(lo())
    };
    check("tcp echo", serve, App::Echo, 2);
}

#[test]
fn tcp_synthetic_multi_segment_requests_get_kernel_stamps() {
    let serve = ServeConfig {
        transport: Transport::Tcp,
        mode: ServeMode::Synthetic(ServiceDist::Fixed(0)),
        ..ServeConfig::echo(lo())
    };
    check("tcp synthetic", serve, App::Synthetic, 1);
}
