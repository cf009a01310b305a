//! The per-packet paths allocate nothing once the slots are warm: a counting
//! global allocator watches a client and a server core exchange single- and
//! multi-packet requests (with a lost reply packet recovered selectively)
//! after every slot has carried messages of those sizes once.
//!
//! Only allocations of the thread that armed the counter are counted.

use std::net::{Ipv4Addr, SocketAddrV4};
use xlane_rpc::wire::MAX_PACKET_LEN;
use xlane_rpc::{Client, ClientConfig, Outcome, Server, ServerConfig};

#[global_allocator]
static GLOBAL: xlane_alloc_count::Counting = xlane_alloc_count::Counting;

const C: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), 4000);
const S: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 2), 8000);

/// One exchange of a `req_len` request and a `rep_len` reply; the second
/// reply packet (if any) is lost once and recovered by the client's
/// selective retransmission request. Returns the time after it.
fn exchange(
    c: &mut Client,
    s: &mut Server,
    buf: &mut [u8],
    req: &[u8],
    rep: &[u8],
    mut now: u64,
) -> u64 {
    let h = c.send_request(S, req, now).unwrap();
    let mut lost_one = false;
    loop {
        now += 1_000;
        while let Some(t) = c.poll_transmit(buf) {
            s.handle_datagram(now, C, &buf[..t.len]).unwrap();
        }
        while let Some(inc) = s.poll_event() {
            s.respond(inc.handle, rep, now).unwrap();
        }
        let mut k = 0;
        while let Some(t) = s.poll_transmit(buf) {
            k += 1;
            if k == 2 && !lost_one {
                lost_one = true;
                continue;
            }
            c.handle_datagram(now, S, &buf[..t.len]).unwrap();
        }
        if let Some(e) = c.poll_event() {
            assert_eq!(e.outcome, Outcome::Reply);
            assert_eq!(c.reply(h).map(|r| r.len()), Some(rep.len()));
            assert!(c.release(h, now));
            break;
        }
        if let Some(t) = c.poll_timeout() {
            now = now.max(t);
            c.handle_timeout(now);
        }
    }
    // Let the server's hold run out so that its slots are reused.
    now += 1_000_000;
    s.handle_timeout(now);
    now
}

#[test]
fn exchanges_do_not_allocate_once_warm() {
    let mut c = Client::new(ClientConfig {
        max_in_flight: 4,
        rid_quarantine_ns: 0,
        ..ClientConfig::new(C)
    });
    let mut s = Server::new(ServerConfig {
        max_requests: 4,
        reply_hold_ns: 500_000,
        ..ServerConfig::default()
    });
    let mut buf = vec![0u8; MAX_PACKET_LEN];
    let small = vec![7u8; 100];
    let big = vec![9u8; 4000];
    let cases: [(&[u8], &[u8]); 3] = [(&small, &small), (&big, &small), (&small, &big)];
    let mut now = 0;
    // Warm every slot with every size, for longer than the reassembly
    // timeout (100 ms), so the server's deadline queue has its steady size.
    for _ in 0..100 {
        for (q, r) in cases {
            now = exchange(&mut c, &mut s, &mut buf, q, r, now);
        }
    }
    let ((), allocs) = xlane_alloc_count::counted(|| {
        for _ in 0..200 {
            for (q, r) in cases {
                now = exchange(&mut c, &mut s, &mut buf, q, r, now);
            }
        }
    });
    assert_eq!(allocs, 0);
    assert_eq!(c.stats().replies, 3 * 300);
    assert!(c.stats().retransmissions > 0);
    assert!(s.stats().reply_retransmissions > 0);
}
