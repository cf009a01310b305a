//! The UDP drivers over real sockets on 127.0.0.1 (ephemeral ports): a
//! server thread answers every request with its bytes reversed; the client
//! sends single- and multi-packet requests and checks every reply.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use xlane_rpc::udp::{RpcClient, RpcServer};
use xlane_rpc::{ClientConfig, Outcome, ServerConfig};

const ANY: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0);

#[test]
fn requests_over_loopback_sockets() {
    // Timeouts far beyond any stall of a loaded machine: every request must
    // end as a reply, whatever the scheduler does (no timing is tested).
    let server_cfg = ServerConfig {
        reassembly_timeout_ns: 60_000_000_000,
        reply_hold_ns: 120_000_000_000,
        ..ServerConfig::default()
    };
    let mut server = RpcServer::bind(ANY, server_cfg).unwrap();
    let server_addr = server.local_addr();
    let stop = Arc::new(AtomicBool::new(false));
    let stop2 = stop.clone();
    let t = std::thread::spawn(move || {
        let mut served = 0u64;
        while !stop2.load(Ordering::Relaxed) {
            server.wait(Duration::from_millis(20)).unwrap();
            while let Some(inc) = server.poll_request() {
                let mut reply = server.request(inc.handle).unwrap().to_vec();
                reply.reverse();
                server.respond(inc.handle, &reply).unwrap();
                served += 1;
            }
        }
        (served, server.core().stats())
    });

    let client_cfg = ClientConfig {
        request_timeout_ns: 60_000_000_000,
        rid_quarantine_ns: 120_000_000_000,
        ..ClientConfig::new(ANY)
    };
    let mut client = RpcClient::bind(ANY, client_cfg).unwrap();
    assert_eq!(client.core().config().local, client.local_addr());
    let sizes = [0usize, 1, 100, 1464, 1465, 3000, 10_000, 40_000];
    let mut pending = std::collections::HashMap::new();
    for round in 0..5usize {
        for &n in &sizes {
            let req: Vec<u8> = (0..n).map(|i| (i * 13 + round) as u8).collect();
            let h = client.send(server_addr, &req).unwrap();
            pending.insert(h, req);
        }
    }
    let total = pending.len();
    let mut done = 0;
    // Bounded by the requests' own timeouts: every request completes one
    // way or another.
    while done < total {
        client.wait(Duration::from_millis(50)).unwrap();
        while let Some(c) = client.poll_completion() {
            let mut want = pending.remove(&c.handle).expect("completes once");
            want.reverse();
            assert_eq!(c.outcome, Outcome::Reply);
            assert!(client.reply(c.handle) == Some(&want[..]));
            assert!(client.release(c.handle));
            done += 1;
        }
    }
    stop.store(true, Ordering::Relaxed);
    let (served, sstats) = t.join().unwrap();
    assert_eq!(served, total as u64);
    assert_eq!(sstats.executed, total as u64);
    assert_eq!(client.core().stats().replies, total as u64);
    assert!(client.stats().sent >= total as u64);
}
