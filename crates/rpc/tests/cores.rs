//! The client and server cores, one situation at a time: DROP when full,
//! forgetting half-received requests, duplicate REQ0s, id reuse, replies from
//! the wrong source, selective retransmission, and what a C peer sends.

use std::net::{Ipv4Addr, SocketAddrV4};
use xlane_rpc::client::{ClientRecvError, SendError};
use xlane_rpc::server::{RespondError, ServerRecvError};
use xlane_rpc::wire::{Feedback, Header, MsgType, Packet, MAX_PACKET_LEN, MAX_PAYLOAD};
use xlane_rpc::{Client, ClientConfig, Identity, Outcome, Server, ServerConfig};

const C1: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), 4000);
const C2: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 9), 4000);
const S: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 2), 8000);
const MS: u64 = 1_000_000;

/// Every packet a core has queued, as (destination, bytes).
fn drain_client(c: &mut Client) -> Vec<(SocketAddrV4, Vec<u8>)> {
    let mut buf = [0u8; MAX_PACKET_LEN];
    let mut out = Vec::new();
    while let Some(t) = c.poll_transmit(&mut buf) {
        out.push((t.dst, buf[..t.len].to_vec()));
    }
    out
}

fn drain_server(s: &mut Server) -> Vec<(SocketAddrV4, Vec<u8>)> {
    let mut buf = [0u8; MAX_PACKET_LEN];
    let mut out = Vec::new();
    while let Some(t) = s.poll_transmit(&mut buf) {
        out.push((t.dst, buf[..t.len].to_vec()));
    }
    out
}

fn kinds(pkts: &[(SocketAddrV4, Vec<u8>)]) -> Vec<(MsgType, u16)> {
    pkts.iter()
        .map(|(_, b)| {
            let p = Packet::new_checked(b).unwrap();
            (p.msg_type(), p.index())
        })
        .collect()
}

fn packet(t: MsgType, rid: u16, index: u16, count: u16, payload: &[u8]) -> Vec<u8> {
    let mut b = vec![0u8; MAX_PACKET_LEN];
    let n = Header::for_packet(t, 0, rid, index, count)
        .emit(payload, &mut b)
        .unwrap();
    b.truncate(n);
    b
}

#[test]
fn server_drops_when_full_and_takes_work_again_after_the_hold() {
    let mut s = Server::new(ServerConfig {
        max_requests: 2,
        reply_hold_ns: 10 * MS,
        ..ServerConfig::default()
    });
    for rid in 0..2 {
        s.handle_datagram(0, C1, &packet(MsgType::Request, rid, 0, 1, b"x"))
            .unwrap();
    }
    let r = s.handle_datagram(0, C1, &packet(MsgType::Request, 2, 0, 1, b"x"));
    let id = Identity {
        ip: *C1.ip(),
        port: C1.port(),
        req_id: 2,
    };
    assert_eq!(r, Err(ServerRecvError::Full(id)));
    let out = drain_server(&mut s);
    assert_eq!(kinds(&out), vec![(MsgType::Drop, 0)]);
    assert_eq!(Packet::new_checked(&out[0].1).unwrap().payload(), b"DROP");
    // Answer both; after the hold the slots are free again.
    while let Some(inc) = s.poll_event() {
        s.respond(inc.handle, b"ok", MS).unwrap();
    }
    assert_eq!(s.handle_timeout_at(5 * MS), 2);
    assert_eq!(s.handle_timeout_at(11 * MS), 0);
    s.handle_datagram(12 * MS, C1, &packet(MsgType::Request, 2, 0, 1, b"x"))
        .unwrap();
    assert_eq!(s.stats().dropped_full, 1);
    assert_eq!(s.stats().expired, 2);
}

#[test]
fn a_declined_request_gets_drop_and_feedback_and_is_forgotten() {
    let router = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 3), 9000);
    let mut s = Server::new(ServerConfig {
        feedback_to: Some(router),
        ..ServerConfig::default()
    });
    s.handle_datagram(0, C1, &packet(MsgType::Request, 5, 0, 1, b"x"))
        .unwrap();
    let inc = s.poll_event().unwrap();
    s.decline(inc.handle).unwrap();
    assert_eq!(s.decline(inc.handle), Err(RespondError::StaleHandle));
    assert_eq!(
        s.respond(inc.handle, b"late", MS),
        Err(RespondError::StaleHandle)
    );
    let out = drain_server(&mut s);
    assert_eq!(
        kinds(&out),
        vec![(MsgType::Drop, 0), (MsgType::Feedback, 0)]
    );
    assert_eq!(out[0].0, C1);
    assert_eq!(out[1].0, router);
    let fb = Feedback::parse(Packet::new_checked(&out[1].1).unwrap().payload()).unwrap();
    assert_eq!((fb.port, fb.req_id), (C1.port(), 5));
    assert_eq!(s.held(), 0);
    assert_eq!(s.stats().declined, 1);
    // Not executed, so not held: the same request runs when sent again.
    s.handle_datagram(MS, C1, &packet(MsgType::Request, 5, 0, 1, b"x"))
        .unwrap();
    assert!(s.poll_event().is_some());
}

/// Helper trait: run `handle_timeout` and return how many requests are held.
trait At {
    fn handle_timeout_at(&mut self, now: u64) -> usize;
}
impl At for Server {
    fn handle_timeout_at(&mut self, now: u64) -> usize {
        self.handle_timeout(now);
        self.held()
    }
}

#[test]
fn server_drops_when_the_byte_budget_is_spent() {
    let mut s = Server::new(ServerConfig {
        max_buffered_bytes: 3 * MAX_PAYLOAD,
        ..ServerConfig::default()
    });
    // A 3-packet request fits the budget, a second one does not.
    s.handle_datagram(0, C1, &packet(MsgType::Request, 1, 0, 3, b"a"))
        .unwrap();
    assert!(matches!(
        s.handle_datagram(0, C1, &packet(MsgType::Request, 2, 0, 3, b"b")),
        Err(ServerRecvError::Full(_))
    ));
    assert_eq!(s.buffered_bytes(), 3 * MAX_PAYLOAD);
}

#[test]
fn half_received_requests_are_forgotten() {
    let mut s = Server::new(ServerConfig {
        reassembly_timeout_ns: 5 * MS,
        ..ServerConfig::default()
    });
    s.handle_datagram(0, C1, &packet(MsgType::Request, 7, 0, 3, b"head"))
        .unwrap();
    assert_eq!(kinds(&drain_server(&mut s)), vec![(MsgType::Ack, 0)]);
    assert_eq!(s.poll_timeout(), Some(5 * MS));
    s.handle_timeout(5 * MS);
    assert_eq!(s.held(), 0);
    assert_eq!(s.buffered_bytes(), 0);
    assert_eq!(s.stats().reassembly_timeouts, 1);
    // A REQn for the forgotten request is refused, typed.
    let r = s.handle_datagram(
        6 * MS,
        C1,
        &packet(MsgType::Request, 7, 1, 3, &[0; MAX_PAYLOAD]),
    );
    assert!(matches!(r, Err(ServerRecvError::Unknown(_))));
}

#[test]
fn duplicate_req0_is_answered_from_the_held_reply_not_executed_again() {
    let mut s = Server::new(ServerConfig::default());
    let req = packet(MsgType::Request, 3, 0, 1, b"incr");
    s.handle_datagram(0, C1, &req).unwrap();
    let inc = s.poll_event().unwrap();
    // While executing, a duplicate changes nothing.
    s.handle_datagram(1, C1, &req).unwrap();
    assert!(s.poll_event().is_none());
    assert!(drain_server(&mut s).is_empty());
    s.respond(inc.handle, b"1", 2).unwrap();
    assert_eq!(kinds(&drain_server(&mut s)), vec![(MsgType::Response, 0)]);
    // After the reply: answered again from the hold.
    s.handle_datagram(3, C1, &req).unwrap();
    assert!(s.poll_event().is_none());
    let again = drain_server(&mut s);
    assert_eq!(Packet::new_checked(&again[0].1).unwrap().payload(), b"1");
    // The same id from another client is another request.
    s.handle_datagram(4, C2, &req).unwrap();
    assert_eq!(s.poll_event().map(|i| i.id.ip), Some(*C2.ip()));
    // The same client reusing the id for other content: a new request.
    s.handle_datagram(5, C1, &packet(MsgType::Request, 3, 0, 1, b"get"))
        .unwrap();
    let inc = s.poll_event().unwrap();
    assert_eq!(s.request(inc.handle), Some(&b"get"[..]));
    assert_eq!(s.stats().executed, 3);
    assert_eq!(s.stats().duplicate_requests, 2);
}

#[test]
fn server_asks_for_the_missing_reqn_only() {
    let mut s = Server::new(ServerConfig::default());
    let req0 = packet(MsgType::Request, 5, 0, 4, b"0123456789abcd");
    s.handle_datagram(0, C1, &req0).unwrap();
    let first = drain_server(&mut s);
    // The first REQRDY is the plain "ACK" of the C implementation.
    assert_eq!(Packet::new_checked(&first[0].1).unwrap().payload(), b"ACK");
    s.handle_datagram(1, C1, &packet(MsgType::Request, 5, 2, 4, &[2; MAX_PAYLOAD]))
        .unwrap();
    // The client probes with REQ0 again: the REQRDY lists packets 1 and 3.
    s.handle_datagram(2, C1, &req0).unwrap();
    let ack = drain_server(&mut s);
    assert_eq!(
        Packet::new_checked(&ack[0].1).unwrap().payload(),
        b"ACK\x00\x01\x00\x03"
    );
    s.handle_datagram(3, C1, &packet(MsgType::Request, 5, 3, 4, b"end"))
        .unwrap();
    s.handle_datagram(4, C1, &packet(MsgType::Request, 5, 1, 4, &[1; MAX_PAYLOAD]))
        .unwrap();
    let inc = s.poll_event().unwrap();
    let msg = s.request(inc.handle).unwrap();
    assert_eq!(msg.len(), 14 + 2 * MAX_PAYLOAD + 3);
    assert_eq!(&msg[..14], b"0123456789abcd");
    assert!(msg[14..14 + MAX_PAYLOAD].iter().all(|&b| b == 1));
    assert_eq!(&msg[msg.len() - 3..], b"end");
}

#[test]
fn client_multi_packet_exchange_with_selective_reply_retransmission() {
    let mut c = Client::new(ClientConfig {
        rto_ns: MS,
        ..ClientConfig::new(C1)
    });
    let req: Vec<u8> = (0..3000u32).map(|i| i as u8).collect();
    let h = c.send_request(S, &req, 0).unwrap();
    let out = drain_client(&mut c);
    assert_eq!(kinds(&out), vec![(MsgType::Request, 0)]);
    let p0 = Packet::new_checked(&out[0].1).unwrap();
    assert_eq!((p0.count(), p0.payload().len()), (Some(4), 14));
    let rid = p0.req_id();
    // REQRDY from the server (not the router): the rest goes to it.
    let server = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 3), 9000);
    c.handle_datagram(1, server, &packet(MsgType::Ack, rid, 0, 1, b"ACK"))
        .unwrap();
    let rest = drain_client(&mut c);
    assert_eq!(
        kinds(&rest),
        vec![
            (MsgType::Request, 1),
            (MsgType::Request, 2),
            (MsgType::Request, 3)
        ]
    );
    assert!(rest.iter().all(|(d, _)| *d == server));
    // A 3-packet reply whose middle packet is lost.
    let reply: Vec<u8> = (0..2 * MAX_PAYLOAD + 10).map(|i| (i * 3) as u8).collect();
    let part = |i: usize| &reply[i * MAX_PAYLOAD..((i + 1) * MAX_PAYLOAD).min(reply.len())];
    c.handle_datagram(2, server, &packet(MsgType::Response, rid, 2, 3, part(2)))
        .unwrap();
    c.handle_datagram(2, server, &packet(MsgType::Response, rid, 0, 3, part(0)))
        .unwrap();
    // The same packets from another address are refused.
    assert!(matches!(
        c.handle_datagram(2, S, &packet(MsgType::Response, rid, 1, 3, part(1))),
        Err(ClientRecvError::WrongSource { .. })
    ));
    // On timeout the client asks the server for packet 1 only.
    let due = c.poll_timeout().unwrap();
    c.handle_timeout(due);
    let nack = drain_client(&mut c);
    assert_eq!(nack.len(), 1);
    assert_eq!(nack[0].0, server);
    let p = Packet::new_checked(&nack[0].1).unwrap();
    assert_eq!(
        (p.msg_type(), p.payload()),
        (MsgType::Ack, &b"ACK\x00\x01"[..])
    );
    c.handle_datagram(
        due + 1,
        server,
        &packet(MsgType::Response, rid, 1, 3, part(1)),
    )
    .unwrap();
    let done = c.poll_event().unwrap();
    assert_eq!((done.handle, done.outcome), (h, Outcome::Reply));
    assert_eq!(c.reply(h), Some(&reply[..]));
    assert!(c.poll_event().is_none());
    // Late duplicates of the finished exchange are refused, typed.
    assert_eq!(
        c.handle_datagram(
            due + 2,
            server,
            &packet(MsgType::Response, rid, 1, 3, part(1))
        ),
        Err(ClientRecvError::Unknown(rid))
    );
}

#[test]
fn client_ids_are_not_reused_during_quarantine() {
    const Q: u64 = 1_000_000;
    let mut c = Client::new(ClientConfig {
        max_in_flight: 4,
        rid_quarantine_ns: Q,
        ..ClientConfig::new(C1)
    });
    let h = c.send_request(S, b"a", 0).unwrap();
    let rid = c.identity_of(h).unwrap().req_id;
    c.handle_datagram(1, S, &packet(MsgType::Drop, rid, 0, 1, b"DROP"))
        .unwrap();
    assert_eq!(c.poll_event().unwrap().outcome, Outcome::Dropped);
    assert!(c.release(h, 1));
    assert!(!c.release(h, 1), "a handle is released once");
    // Use up every other id (abandoned requests are quarantined too).
    for _ in 0..u16::MAX {
        let h = c.send_request(S, b"b", 2).unwrap();
        assert_ne!(c.identity_of(h).unwrap().req_id, rid);
        assert!(c.release(h, 2));
    }
    assert_eq!(c.send_request(S, b"c", 3), Err(SendError::NoFreeId));
    // The first id's quarantine ends first, and only it is free then.
    let h = c.send_request(S, b"d", 1 + Q).unwrap();
    assert_eq!(c.identity_of(h).unwrap().req_id, rid);
    assert!(c.release(h, 1 + Q));
    assert_eq!(c.send_request(S, b"e", 1 + Q), Err(SendError::NoFreeId));
}

#[test]
fn client_times_out_and_says_so_once() {
    let mut c = Client::new(ClientConfig {
        rto_ns: MS,
        request_timeout_ns: 10 * MS,
        ..ClientConfig::new(C1)
    });
    let h = c.send_request(S, b"q", 0).unwrap();
    let mut now = 0;
    let mut sends = drain_client(&mut c).len();
    while let Some(t) = c.poll_timeout() {
        now = t;
        c.handle_timeout(now);
        sends += drain_client(&mut c).len();
    }
    assert_eq!(now, 10 * MS);
    // REQ0 at 0, then retransmissions at 1, 3 and 7 ms (doubling).
    assert_eq!(sends, 4);
    let e = c.poll_event().unwrap();
    assert_eq!((e.handle, e.outcome), (h, Outcome::TimedOut));
    assert!(c.poll_event().is_none());
    assert_eq!(c.reply(h), None);
}

#[test]
fn wrong_direction_types_are_refused_typed() {
    let mut c = Client::new(ClientConfig::new(C1));
    let mut s = Server::new(ServerConfig::default());
    assert_eq!(
        c.handle_datagram(0, S, &packet(MsgType::Request, 1, 0, 1, b"")),
        Err(ClientRecvError::UnexpectedType(MsgType::Request))
    );
    assert_eq!(
        s.handle_datagram(0, C1, &packet(MsgType::Response, 1, 0, 1, b"")),
        Err(ServerRecvError::UnexpectedType(MsgType::Response))
    );
    assert!(matches!(
        s.handle_datagram(0, C1, &[0xCC, 8, 0x70, 0xC0, 0, 1, 0, 1]),
        Err(ServerRecvError::Packet(_))
    ));
    assert_eq!(s.stats().unmatched + s.stats().malformed, 2);
    assert_eq!(c.stats().unmatched, 1);
}

#[test]
fn a_req0_announcing_too_much_is_dropped_at_once() {
    let mut s = Server::new(ServerConfig {
        max_message_len: 3000,
        ..ServerConfig::default()
    });
    // 3000 bytes split as 14 + 1464 + 1464 + 58: at most 4 packets.
    s.handle_datagram(0, C1, &packet(MsgType::Request, 1, 0, 4, b"ok"))
        .unwrap();
    let r = s.handle_datagram(0, C1, &packet(MsgType::Request, 2, 0, 5, b"big"));
    assert!(matches!(r, Err(ServerRecvError::TooLong { count: 5, .. })));
    let out = drain_server(&mut s);
    assert_eq!(kinds(&out), vec![(MsgType::Ack, 0), (MsgType::Drop, 0)]);
    assert_eq!(s.stats().dropped_too_long, 1);
    assert_eq!(s.held(), 1);
}
