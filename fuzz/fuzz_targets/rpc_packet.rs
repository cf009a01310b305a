//! Fuzz target: arbitrary bytes through the R2P2 packet parser and the
//! client, server and router cores.
//!
//! Byte 0 even: the rest is one datagram. Whatever `Packet::new_checked`
//! accepts must emit back to the same bytes (reserved flag bits cleared),
//! and the FEEDBACK and ACK payload parsers must round-trip what they accept.
//!
//! Byte 0 odd: the rest is a sequence of records
//! `[op: u8][dt: u8][len: u8][len bytes]`; op % 4 picks the target (0, 1 the
//! server, from one of two clients; 2 the client, from the server; 3 a
//! timeout poll on both). The bytes get a valid header prefix half of the
//! time (op bit 2) so the reassembly paths are reached. Checked: no panic,
//! every refused datagram counted exactly once, the client never reports
//! more completions than requests, the server never more executions than
//! requests it held. Every record's bytes also reach a `jbsq:1` router
//! over two servers (with admission control), from a client or (op bit 3)
//! the first server: every
//! refusal counted once, every packet it sends parses, no server ever has
//! more than one request outstanding.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::net::{Ipv4Addr, SocketAddrV4};
use xlane_rpc::wire::{field, AckPayload, Feedback, Packet, HEADER_LEN, MAGIC, MAX_PACKET_LEN};
use xlane_rpc::admission::{ControllerKind, Slo};
use xlane_rpc::router::{AdmissionConfig, Policy, Router, RouterConfig};
use xlane_rpc::{Client, ClientConfig, Server, ServerConfig};

const SERVER: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 2), 8000);

fn client_addr(b: u8) -> SocketAddrV4 {
    SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), 4000 + (b & 1) as u16)
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    if mode % 2 == 0 {
        // The SLO of `xlane rpc router --slo`: what parses prints back to
        // the same objective.
        if let Ok(slo) = std::str::from_utf8(rest).map(str::parse::<Slo>) {
            if let Ok(slo) = slo {
                assert_eq!(slo.to_string().parse::<Slo>(), Ok(slo));
            }
        }
        if let Ok(p) = Packet::new_checked(rest) {
            let mut buf = [0u8; MAX_PACKET_LEN];
            let n = p
                .repr()
                .emit(p.payload(), &mut buf)
                .expect("accepted packets emit");
            let mut want = rest.to_vec();
            want[field::FLAGS] &= 0xC0;
            assert_eq!(&buf[..n], &want[..]);
            if let Ok(f) = Feedback::parse(p.payload()) {
                assert_eq!(&f.to_bytes()[..], p.payload());
            }
            if let Ok(a) = AckPayload::parse(p.payload()) {
                let mut b = [0u8; 1464];
                let n = AckPayload::emit(a.missing(), &mut b);
                assert_eq!(&b[..n], p.payload());
            }
        }
        return;
    }
    let mut client = Client::new(ClientConfig {
        max_in_flight: 4,
        max_message_len: 8000,
        ..ClientConfig::new(client_addr(0))
    });
    let mut server = Server::new(ServerConfig {
        max_requests: 4,
        max_buffered_bytes: 16_000,
        max_message_len: 8000,
        ..ServerConfig::default()
    });
    let mut router = Router::new(RouterConfig {
        max_tracked: 8,
        max_queued: 2,
        feedback_timeout_ns: 1_000_000,
        sticky_ns: 2_000_000,
        // Admission control on: its bound and periods run on fuzzed time.
        admission: Some(AdmissionConfig {
            slo: Slo {
                quantile: 0.99,
                latency_ns: 100_000,
            },
            controller: ControllerKind::CAP,
            period_ns: 50_000,
            // Fuzzed REQ0s carry any class; class 2 is never dropped.
            never_drop: 1 << 2,
        }),
        ..RouterConfig::new(vec![SERVER, client_addr(1)], Policy::Jbsq(1))
    });
    let mut router_err = 0u64;
    let mut now = 0u64;
    let mut sent = 0u64;
    let (mut client_err, mut server_err) = (0u64, 0u64);
    let mut buf = [0u8; MAX_PACKET_LEN];
    let mut rest = rest;
    while rest.len() >= 3 {
        let op = rest[0];
        now += rest[1] as u64 * 100_000;
        let len = (rest[2] as usize).min(rest.len() - 3);
        let mut bytes = rest[3..3 + len].to_vec();
        rest = &rest[3 + len..];
        if op & 4 != 0 && bytes.len() >= HEADER_LEN {
            bytes[field::MAGIC] = MAGIC;
            bytes[field::HEADER_SIZE] = HEADER_LEN as u8;
            bytes[field::TYPE_POLICY] %= 0x50;
            bytes[field::REQ_ID.start] = 0;
            bytes[field::REQ_ID.start + 1] %= 4;
        }
        let from = if op & 8 != 0 { SERVER } else { client_addr(op) };
        if router.handle_datagram(now, from, &bytes).is_err() {
            router_err += 1;
        }
        router.handle_timeout(now);
        while let Some(f) = router.poll_transmit(&mut buf) {
            assert!(Packet::new_checked(&buf[..f.len]).is_ok());
        }
        assert_eq!(router.stats().refused, router_err);
        assert!(router.outstanding().iter().all(|&o| o <= 1));
        match op % 4 {
            0 | 1 => {
                if server
                    .handle_datagram(now, client_addr(op), &bytes)
                    .is_err()
                {
                    server_err += 1;
                }
            }
            2 => {
                if op & 8 != 0 && client.send_request(SERVER, &bytes, now).is_ok() {
                    sent += 1;
                } else if client.handle_datagram(now, SERVER, &bytes).is_err() {
                    client_err += 1;
                }
            }
            _ => {
                client.handle_timeout(now);
                server.handle_timeout(now);
            }
        }
        while let Some(inc) = server.poll_event() {
            let reply = server
                .request(inc.handle)
                .map(|r| r.to_vec())
                .unwrap_or_default();
            let _ = server.respond(inc.handle, &reply, now);
        }
        let mut done = 0;
        while let Some(c) = client.poll_event() {
            done += 1;
            assert!(client.release(c.handle, now));
        }
        assert!(done <= sent);
        while let Some(t) = client.poll_transmit(&mut buf) {
            assert!(Packet::new_checked(&buf[..t.len]).is_ok());
        }
        while let Some(t) = server.poll_transmit(&mut buf) {
            assert!(Packet::new_checked(&buf[..t.len]).is_ok());
        }
        let (c, s) = (client.stats(), server.stats());
        assert_eq!(c.malformed + c.unmatched, client_err);
        assert_eq!(
            s.malformed + s.unmatched + s.dropped_full + s.dropped_too_long,
            server_err
        );
    }
});
