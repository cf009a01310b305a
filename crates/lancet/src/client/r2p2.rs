//! The agent's R2P2 half: sending a request as packets and taking replies,
//! REQRDYs and DROPs (the framing is [`crate::r2p2`]'s).

use super::limits::RECV_BUDGET;
use super::tracker::{Tracker, EMPTY};
use super::udp::{udp_drain_tx, udp_next, udp_send, UdpConn};
use crate::r2p2::{self as frame, Incoming, Progress};
use std::net::SocketAddrV4;

/// Sends REQ0 of request `id` (the whole request if it fits one packet) to
/// `target`. `req` is the application request with `id` written in it.
pub(super) fn send_first(
    u: &mut UdpConn,
    tr: &mut Tracker,
    req: &[u8],
    pkt: &mut [u8],
    id: u64,
    target: SocketAddrV4,
) -> bool {
    let n = frame::emit_request_packet(req, frame::req_id(id), 0, pkt);
    let sent = udp_send(u, tr, &pkt[..n], target, id, true);
    if sent {
        tr.inflight[Tracker::slot_of(id)].rest_due = frame::request_packets(req.len()) > 1;
    }
    sent
}

/// The server's REQRDY for `id`: REQ1…REQn go to the server that sent it.
/// Their transmit stamps are numbered under `id` too, and ignored (the
/// request keeps REQ0's).
fn send_rest(
    u: &mut UdpConn,
    tr: &mut Tracker,
    req: &mut [u8],
    pkt: &mut [u8],
    id: u64,
    server: SocketAddrV4,
) {
    tr.app.set_id(req, id);
    for index in 1..frame::request_packets(req.len()) {
        let n = frame::emit_request_packet(req, frame::req_id(id), index, pkt);
        if !udp_send(u, tr, &pkt[..n], server, id, false) {
            tr.counts.send_errors += 1;
        }
    }
}

/// Reads up to [`RECV_BUDGET`] datagrams of one socket.
pub(super) fn receive(
    u: &mut UdpConn,
    tr: &mut Tracker,
    rbuf: &mut [u8],
    req: &mut [u8],
    pkt: &mut [u8],
) {
    for _ in 0..RECV_BUDGET {
        let Some(got) = udp_next(u, tr, rbuf) else {
            return;
        };
        let r = got.received;
        let msg = match frame::parse_incoming(&rbuf[..r.len]) {
            Ok(m) => m,
            Err(_) => {
                tr.counts.malformed += 1;
                continue;
            }
        };
        let rid = match msg {
            Incoming::Reply { rid, .. } | Incoming::Ready { rid } | Incoming::Drop { rid } => rid,
        };
        let si = rid as usize;
        let id = tr.inflight[si].id;
        if id == EMPTY {
            tr.counts.unmatched += 1;
            continue;
        }
        match msg {
            Incoming::Drop { .. } => tr.refused(id),
            Incoming::Ready { .. } => {
                if tr.inflight[si].rest_due {
                    tr.inflight[si].rest_due = false;
                    send_rest(u, tr, req, pkt, id, r.src);
                } else {
                    // A REQRDY for a one-packet request, or a second one.
                    tr.counts.unmatched += 1;
                }
            }
            Incoming::Reply {
                index,
                count,
                payload,
                ..
            } => {
                let server_ns = if count == Some(1) {
                    // A one-packet reply is the application's whole response.
                    match tr.app.parse_response(payload, tr.size) {
                        Ok(resp) if resp.id == id => resp.server_ns,
                        _ => {
                            tr.counts.malformed += 1;
                            continue;
                        }
                    }
                } else {
                    None
                };
                match tr.inflight[si].reply.add(index, count) {
                    Progress::Complete => {
                        if tr.needs_tx_stamp(id) {
                            udp_drain_tx(u, tr);
                        }
                        tr.complete(id, got.software_ns, got.hardware_ns, r.user_ns, server_ns);
                    }
                    Progress::Partial => {}
                    Progress::Duplicate => tr.counts.unmatched += 1,
                    Progress::Invalid => tr.counts.malformed += 1,
                }
            }
        }
    }
}
