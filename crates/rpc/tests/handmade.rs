//! Bytes written by hand from the R2P2 header description (Fig. 3 of the
//! Lancet R2P2 report; magic 0xCC, header size 8, type in the high and
//! policy in the low nibble, flags F = 0x80 and L = 0x40, request id and
//! packet order big-endian, the first packet carrying the packet count and
//! later ones their index). Our parser accepts them and our emitter
//! produces exactly them.

use std::net::Ipv4Addr;
use xlane_rpc::wire::{packet_count, packet_range, Feedback, Header, MsgType, Packet};

/// (name, the bytes, type, policy, first, last, req_id, order, payload)
type Case = (
    &'static str,
    &'static [u8],
    MsgType,
    u8,
    bool,
    bool,
    u16,
    u16,
    &'static [u8],
);

const CASES: &[Case] = &[
    (
        "single-packet request, rid 0x0102, load-balanced, payload 'hi'",
        &[0xCC, 0x08, 0x00, 0xC0, 0x01, 0x02, 0x00, 0x01, b'h', b'i'],
        MsgType::Request,
        0,
        true,
        true,
        0x0102,
        1,
        b"hi",
    ),
    (
        "REQ0 of a 3-packet request, rid 7, fixed route",
        &[0xCC, 0x08, 0x01, 0x80, 0x00, 0x07, 0x00, 0x03, b'x'],
        MsgType::Request,
        1,
        true,
        false,
        7,
        3,
        b"x",
    ),
    (
        "REQn: packet 1 of that request",
        &[0xCC, 0x08, 0x01, 0x00, 0x00, 0x07, 0x00, 0x01, b'y'],
        MsgType::Request,
        1,
        false,
        false,
        7,
        1,
        b"y",
    ),
    (
        "REQn: last packet (index 2)",
        &[0xCC, 0x08, 0x01, 0x40, 0x00, 0x07, 0x00, 0x02, b'z'],
        MsgType::Request,
        1,
        false,
        true,
        7,
        2,
        b"z",
    ),
    (
        "REQRDY (type 3) with 'ACK', rid 0xFFFF",
        &[
            0xCC, 0x08, 0x31, 0xC0, 0xFF, 0xFF, 0x00, 0x01, b'A', b'C', b'K',
        ],
        MsgType::Ack,
        1,
        true,
        true,
        0xFFFF,
        1,
        b"ACK",
    ),
    (
        "single-packet reply (type 1), rid 0x0102",
        &[0xCC, 0x08, 0x11, 0xC0, 0x01, 0x02, 0x00, 0x01, b'o', b'k'],
        MsgType::Response,
        1,
        true,
        true,
        0x0102,
        1,
        b"ok",
    ),
    (
        "first packet of a 258-packet reply (count 0x0102)",
        &[0xCC, 0x08, 0x11, 0x80, 0x00, 0x09, 0x01, 0x02],
        MsgType::Response,
        1,
        true,
        false,
        9,
        0x0102,
        b"",
    ),
    (
        "DROP (type 4) with 'DROP'",
        &[
            0xCC, 0x08, 0x41, 0xC0, 0x12, 0x34, 0x00, 0x01, b'D', b'R', b'O', b'P',
        ],
        MsgType::Drop,
        1,
        true,
        true,
        0x1234,
        1,
        b"DROP",
    ),
    (
        "FEEDBACK (type 2) for rid 0x1234 from 10.0.0.7:8000",
        &[
            0xCC, 0x08, 0x21, 0xC0, 0x12, 0x34, 0x00, 0x01, 0x12, 0x34, 0x1F, 0x40, 10, 0, 0, 7,
        ],
        MsgType::Feedback,
        1,
        true,
        true,
        0x1234,
        1,
        &[0x12, 0x34, 0x1F, 0x40, 10, 0, 0, 7],
    ),
];

#[test]
fn parser_accepts_and_emitter_produces_hand_made_bytes() {
    for &(name, bytes, t, pol, f, l, rid, order, payload) in CASES {
        let p = Packet::new_checked(bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
        let want = Header {
            msg_type: t,
            policy: pol,
            first: f,
            last: l,
            req_id: rid,
            packet_order: order,
        };
        assert_eq!(p.repr(), want, "{name}");
        assert_eq!(p.payload(), payload, "{name}");
        let mut buf = [0u8; 64];
        let n = want.emit(payload, &mut buf).unwrap();
        assert_eq!(&buf[..n], bytes, "{name}");
    }
}

#[test]
fn feedback_payload_by_hand() {
    let p = Packet::new_checked(CASES[8].1).unwrap();
    let fb = Feedback::parse(p.payload()).unwrap();
    assert_eq!(
        fb,
        Feedback {
            req_id: 0x1234,
            port: 8000,
            ip: Ipv4Addr::new(10, 0, 0, 7)
        }
    );
}

#[test]
fn a_3000_byte_request_splits_as_described() {
    // REQ0 carries 14 bytes, then full 1464-byte packets: 14 + 1464 + 1464 + 58.
    assert_eq!(packet_count(MsgType::Request, 3000), Some(4));
    assert_eq!(packet_range(MsgType::Request, 3000, 0), 0..14);
    assert_eq!(packet_range(MsgType::Request, 3000, 1), 14..1478);
    assert_eq!(packet_range(MsgType::Request, 3000, 2), 1478..2942);
    assert_eq!(packet_range(MsgType::Request, 3000, 3), 2942..3000);
    assert_eq!(packet_count(MsgType::Request, 2942), Some(3));
    assert_eq!(packet_count(MsgType::Request, 2943), Some(4));
}

/// A C client's multi-packet request, written by hand: REQ0 carries 14
/// bytes and the count (2), REQ1 the remaining 1451 bytes with L. Our server
/// answers with exactly the hand-written REQRDY, reply and FEEDBACK bytes.
#[test]
fn our_server_speaks_to_a_c_layout_client_byte_for_byte() {
    use std::net::SocketAddrV4;
    use xlane_rpc::{Server, ServerConfig};

    let client = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), 4000);
    let router = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 254), 9999);
    let mut server = Server::new(ServerConfig {
        feedback_to: Some(router),
        ..ServerConfig::default()
    });
    let mut req0 = vec![0xCC, 0x08, 0x00, 0x80, 0x0A, 0x0B, 0x00, 0x02];
    req0.extend_from_slice(b"abcdefghijklmn");
    let mut req1 = vec![0xCC, 0x08, 0x00, 0x40, 0x0A, 0x0B, 0x00, 0x01];
    req1.extend((0..1451u32).map(|i| i as u8));

    let mut buf = [0u8; 1472];
    server.handle_datagram(0, client, &req0).unwrap();
    let t = server.poll_transmit(&mut buf).unwrap();
    assert_eq!(t.dst, client);
    assert_eq!(
        &buf[..t.len],
        &[0xCC, 0x08, 0x31, 0xC0, 0x0A, 0x0B, 0x00, 0x01, b'A', b'C', b'K']
    );
    assert!(server.poll_transmit(&mut buf).is_none());

    server.handle_datagram(1, client, &req1).unwrap();
    let inc = server.poll_event().unwrap();
    let msg = server.request(inc.handle).unwrap();
    assert_eq!(msg.len(), 14 + 1451);
    assert_eq!(&msg[..14], b"abcdefghijklmn");
    assert_eq!(&msg[14..], &req1[8..]);

    server.respond(inc.handle, b"ok", 2).unwrap();
    let t = server.poll_transmit(&mut buf).unwrap();
    assert_eq!(t.dst, client);
    assert_eq!(
        &buf[..t.len],
        &[0xCC, 0x08, 0x11, 0xC0, 0x0A, 0x0B, 0x00, 0x01, b'o', b'k']
    );
    let t = server.poll_transmit(&mut buf).unwrap();
    assert_eq!(t.dst, router);
    assert_eq!(
        &buf[..t.len],
        &[
            0xCC, 0x08, 0x21, 0xC0, 0x0A, 0x0B, 0x00, 0x01, // header
            0x0A, 0x0B, 0x0F, 0xA0, 10, 0, 0, 1, // rid, port 4000, 10.0.0.1
        ]
    );
    assert!(server.poll_transmit(&mut buf).is_none());
}

/// Our client's REQ0 and REQn for a 1465-byte request are the bytes a C
/// server expects, and it takes a hand-written C reply.
#[test]
fn our_client_speaks_to_a_c_layout_server_byte_for_byte() {
    use std::net::SocketAddrV4;
    use xlane_rpc::{Client, ClientConfig, Outcome};

    let me = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), 4000);
    let server = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 2), 8000);
    let mut client = Client::new(ClientConfig {
        policy: 1,
        ..ClientConfig::new(me)
    });
    let req: Vec<u8> = (0..1465u32).map(|i| (i % 251) as u8).collect();
    let h = client.send_request(server, &req, 0).unwrap();
    let rid = client.identity_of(h).unwrap().req_id.to_be_bytes();
    let mut buf = [0u8; 1472];
    let t = client.poll_transmit(&mut buf).unwrap();
    let mut want = vec![0xCC, 0x08, 0x01, 0x80, rid[0], rid[1], 0x00, 0x02];
    want.extend_from_slice(&req[..14]);
    assert_eq!(&buf[..t.len], &want[..]);
    assert!(client.poll_transmit(&mut buf).is_none());

    let ack = [
        0xCC, 0x08, 0x31, 0xC0, rid[0], rid[1], 0x00, 0x01, b'A', b'C', b'K',
    ];
    client.handle_datagram(1, server, &ack).unwrap();
    let t = client.poll_transmit(&mut buf).unwrap();
    let mut want = vec![0xCC, 0x08, 0x01, 0x40, rid[0], rid[1], 0x00, 0x01];
    want.extend_from_slice(&req[14..]);
    assert_eq!(&buf[..t.len], &want[..]);

    let reply = [
        0xCC, 0x08, 0x11, 0xC0, rid[0], rid[1], 0x00, 0x01, b'h', b'i',
    ];
    client.handle_datagram(2, server, &reply).unwrap();
    assert_eq!(client.poll_event().unwrap().outcome, Outcome::Reply);
    assert_eq!(client.reply(h), Some(&b"hi"[..]));
}
