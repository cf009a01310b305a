//! The agent's UDP sockets: sending a datagram, reading the transmit stamps,
//! and taking responses.

use super::limits::RECV_BUDGET;
use super::tracker::Tracker;
use crate::tstamp::TxMatch;
use std::io;
use std::net::SocketAddrV4;
use xlane_host::socket::{LaneSocket, RxStamps};

pub(super) struct UdpConn {
    pub(super) sock: LaneSocket,
    /// Transmit stamps to requests (datagram numbering).
    pub(super) tx: TxMatch,
}

/// Sends one datagram of request `id` to `dst`, keeping the socket's
/// transmit-stamp numbering in step; with `drain`, takes the stamp queued
/// by now. Whether the kernel took it.
pub(super) fn udp_send(
    u: &mut UdpConn,
    tr: &mut Tracker,
    bytes: &[u8],
    dst: SocketAddrV4,
    id: u64,
    drain: bool,
) -> bool {
    match u.sock.send_to(bytes, dst) {
        Ok(_) => {
            if tr.measure {
                u.tx.push(id);
                // A software stamp is usually queued by now (the device
                // took the packet inside the call): take it before
                // sleeping, or the pending stamp would wake the agent's
                // next poll at once.
                if drain {
                    udp_drain_tx(u, tr);
                }
            }
            true
        }
        Err(e) => {
            // Past the socket buffer the kernel has numbered the datagram
            // even though it failed; before it, not.
            if tr.measure && e.kind() != io::ErrorKind::WouldBlock {
                u.tx.skip();
            }
            false
        }
    }
}

pub(super) fn udp_drain_tx(u: &mut UdpConn, tr: &mut Tracker) {
    tr.drain_tx_stamps(&mut u.tx, || u.sock.recv_tx_stamp());
}

/// The next whole datagram waiting on `u`, with its stamps; `None` when
/// none waits or the socket reports an error (counted in `recv_errors`:
/// e.g. ECONNREFUSED from an ICMP error, not fatal). Datagrams cut by the
/// buffer are counted malformed and skipped (at most [`RECV_BUDGET`]).
pub(super) fn udp_next(u: &mut UdpConn, tr: &mut Tracker, rbuf: &mut [u8]) -> Option<RxStamps> {
    for _ in 0..RECV_BUDGET {
        match u.sock.recv_stamps(rbuf) {
            Ok(Some(g)) if g.received.truncated => tr.counts.malformed += 1,
            Ok(Some(g)) => return Some(g),
            Ok(None) => return None,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => {
                tr.counts.recv_errors += 1;
                return None;
            }
        }
    }
    None
}

pub(super) fn udp_receive(u: &mut UdpConn, tr: &mut Tracker, rbuf: &mut [u8]) {
    for _ in 0..RECV_BUDGET {
        let Some(got) = udp_next(u, tr, rbuf) else {
            return;
        };
        let r = got.received;
        let resp = match tr.app.parse_response(&rbuf[..r.len], tr.size) {
            Ok(resp) => resp,
            Err(_) => {
                tr.counts.malformed += 1;
                continue;
            }
        };
        if tr.needs_tx_stamp(resp.id) {
            udp_drain_tx(u, tr);
        }
        tr.complete(
            resp.id,
            got.software_ns,
            got.hardware_ns,
            r.user_ns,
            resp.server_ns,
        );
    }
}
