//! Lancet's R2P2 agent and synthetic server (`--proto r2p2`).
//!
//! **Client.** A request is an R2P2 REQUEST message whose payload is the
//! application's request ([`crate::App`]); its request id is the low 16
//! bits of the agent's request number, which is also the request's slot
//! in the agent's in-flight table, so a reply or a DROP finds its request
//! from the header alone. A request that fits one packet goes out as one
//! datagram with both flags (F and L). A longer one sends REQ0 (the first
//! [`REQ0_PAYLOAD`](xlane_rpc::wire::REQ0_PAYLOAD) bytes) to the target (a router or a server), and the
//! rest, REQ1…REQn, to the server that answers REQ0 with its REQRDY; the
//! transmit stamp is REQ0's. A reply may span packets; the request
//! completes when every packet is in, at the receive stamp of the packet
//! that completed it (the last to arrive, whichever its index). Lancet's own
//! R2P2 latency agent stops the clock at the server's REQRDY and records
//! timeouts as samples; here a REQRDY only releases the rest of the request,
//! a DROP is counted (beside the goodput) and never a sample, and a request
//! never answered is counted lost.
//!
//! **Server.** R2P2 steers requests to worker queues: each of the `c`
//! workers has its own UDP port (the bind port, the next, …; all
//! ephemeral with port 0) and its own FIFO, and a router picks among the
//! workers' addresses. A worker is a [`xlane_rpc::udp::RpcServer`]: the
//! library's at-most-once server core, which sends FEEDBACK to the router
//! after every reply and DROP when it holds too many requests. A worker
//! *waits out* each request's service time asleep (a high-resolution
//! timer, the thread's timer slack at 1 ns) instead of spinning: R2P2
//! experiments run more workers than this machine has cores, and spinning
//! workers would share the cores and stretch each other's service. A
//! worker's wake-up delay is part of the sojourn it reports.

use crate::dist::ServiceDist;
use crate::proto::{self, SynKind};
use crate::rng::Rng;
use crate::server_stats::{bump, Counters};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use xlane_host::socket::monotonic_ns;
use xlane_rpc::udp::RpcServer;
use xlane_rpc::wire::{self, Header, MsgType, Packet};
use xlane_rpc::ServerHandle;

pub use xlane_rpc::wire::MAX_PACKET_LEN;

/// The request id of request number `id` (its in-flight slot).
pub fn req_id(id: u64) -> u16 {
    id as u16
}

/// Packets of a request of `len` application bytes.
pub fn request_packets(len: usize) -> u16 {
    wire::packet_count(MsgType::Request, len).unwrap_or(u16::MAX)
}

/// Writes packet `index` of the request `msg` (the whole application
/// request) under request id `rid` into `out`; returns its length.
/// `msg` is at most [`MAX_MESSAGE_LEN`](crate::proto::MAX_MESSAGE_LEN) bytes (what
/// [`crate::ClientConfig::validate`] allows).
pub fn emit_request_packet(msg: &[u8], rid: u16, index: u16, out: &mut [u8]) -> usize {
    let count = request_packets(msg.len());
    let h = Header::for_packet(MsgType::Request, wire::policy::LB_ROUTE, rid, index, count);
    let range = wire::packet_range(MsgType::Request, msg.len(), index);
    h.emit(&msg[range], out)
        .expect("request sizes are validated against the packet limits")
}

/// What a datagram from a server or router means to the client.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Incoming<'a> {
    /// A packet of a reply: `index` of `count` packets (`count` is only
    /// known from the first packet).
    Reply {
        /// Request id.
        rid: u16,
        /// Packet index.
        index: u16,
        /// Packet count, if this is the first packet.
        count: Option<u16>,
        /// The packet's payload.
        payload: &'a [u8],
    },
    /// The server's REQRDY: send the rest of request `rid`.
    Ready {
        /// Request id.
        rid: u16,
    },
    /// The request was refused (a full server or router).
    Drop {
        /// Request id.
        rid: u16,
    },
}

/// Why a datagram meant nothing to the client.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum IncomingError {
    /// Not an R2P2 packet.
    #[error("not an R2P2 packet: {0}")]
    Packet(#[from] wire::PacketError),
    /// A type a client never receives.
    #[error("unexpected {0:?} at a client")]
    Type(MsgType),
}

/// Reads one datagram (validated once, by the header view).
pub fn parse_incoming(bytes: &[u8]) -> Result<Incoming<'_>, IncomingError> {
    let p = Packet::new_checked(bytes)?;
    let rid = p.req_id();
    Ok(match p.msg_type() {
        MsgType::Response => Incoming::Reply {
            rid,
            index: p.index(),
            count: p.count(),
            payload: p.payload(),
        },
        MsgType::Ack => Incoming::Ready { rid },
        MsgType::Drop => Incoming::Drop { rid },
        t => return Err(IncomingError::Type(t)),
    })
}

/// Largest reply the agent reassembles, packets (more than a message of
/// [`MAX_MESSAGE_LEN`](crate::proto::MAX_MESSAGE_LEN) bytes takes).
pub const MAX_REPLY_PACKETS: u16 = 64;

/// The reply packets of one request seen so far (a bit per index).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReplyProgress {
    seen: u64,
    count: u16,
}

/// What one reply packet did to its request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Progress {
    /// More packets are due.
    Partial,
    /// Every packet is in.
    Complete,
    /// A second copy of a packet.
    Duplicate,
    /// An index past the count, or a count above [`MAX_REPLY_PACKETS`].
    Invalid,
}

impl ReplyProgress {
    /// Records packet `index` (with the count if it is the first packet).
    pub fn add(&mut self, index: u16, count: Option<u16>) -> Progress {
        if let Some(c) = count {
            if c == 0 || c > MAX_REPLY_PACKETS {
                return Progress::Invalid;
            }
            self.count = c;
        }
        if index >= MAX_REPLY_PACKETS || (self.count != 0 && index >= self.count) {
            return Progress::Invalid;
        }
        let bit = 1u64 << index;
        if self.seen & bit != 0 {
            return Progress::Duplicate;
        }
        self.seen |= bit;
        if self.count != 0 {
            // count is in 1..=MAX_REPLY_PACKETS (64), checked when it was set.
            let all = u64::MAX >> (64 - u32::from(self.count));
            if self.seen & all == all {
                return Progress::Complete;
            }
            if count.is_some() && self.seen & !all != 0 {
                // A packet seen before the count was past it.
                return Progress::Invalid;
            }
        }
        Progress::Partial
    }
}

/// One worker: its port, its FIFO, its service times.
pub(crate) struct Worker {
    pub srv: RpcServer,
    pub echo: bool,
    pub service: Option<ServiceDist>,
    pub rng: Rng,
    pub queue_cap: usize,
}

/// A request waiting in a worker's FIFO or being served.
struct Job {
    handle: ServerHandle,
    id: u64,
    arrived_ns: u64,
    service_ns: u64,
}

/// How long a worker sleeps at most before looking at the stop flag.
const STOP_POLL: Duration = Duration::from_millis(50);

impl Worker {
    /// Serve until `stop`; counts into `c` (requests, responses, malformed,
    /// dropped, send errors).
    pub fn run(mut self, stop: &AtomicBool, c: &Counters) {
        let mut fifo: VecDeque<Job> = VecDeque::with_capacity(self.queue_cap.min(1 << 16));
        let mut busy: Option<(Job, u64)> = None;
        let mut reported_send_errors = 0;
        let mut reported_drops = 0;
        while !stop.load(Ordering::Relaxed) {
            let now = monotonic_ns();
            let max = match &busy {
                Some((_, done)) => Duration::from_nanos(done.saturating_sub(now)).min(STOP_POLL),
                None => STOP_POLL,
            };
            if self.srv.wait(max).is_err() {
                bump(&c.send_errors);
                std::thread::sleep(Duration::from_millis(1));
            }
            while let Some(inc) = self.srv.poll_request() {
                let arrived_ns = monotonic_ns();
                let req = self.srv.request(inc.handle).unwrap_or(&[]);
                if self.echo {
                    let body = req.to_vec();
                    bump(&c.requests);
                    self.reply(inc.handle, &body, c);
                    continue;
                }
                match proto::parse_synthetic(req) {
                    Ok(h) if h.kind == SynKind::Request && fifo.len() < self.queue_cap => {
                        bump(&c.requests);
                        let service_ns = self.service.map_or(0, |s| s.sample(&mut self.rng));
                        fifo.push_back(Job {
                            handle: inc.handle,
                            id: h.id,
                            arrived_ns,
                            service_ns,
                        });
                    }
                    Ok(h) if h.kind == SynKind::Request => {
                        // The FIFO is full: DROP (and FEEDBACK to the router).
                        bump(&c.dropped);
                        self.decline(inc.handle, c);
                    }
                    _ => {
                        bump(&c.malformed);
                        self.decline(inc.handle, c);
                    }
                }
            }
            let now = monotonic_ns();
            if let Some((job, done)) = &busy {
                if now >= *done {
                    let resp = proto::syn_response(job.id, now.saturating_sub(job.arrived_ns));
                    let h = job.handle;
                    busy = None;
                    self.reply(h, &resp, c);
                }
            }
            if busy.is_none() {
                if let Some(job) = fifo.pop_front() {
                    let done = now.saturating_add(job.service_ns);
                    busy = Some((job, done));
                }
            }
            // The driver's counters only grow and `reported_*` are earlier
            // readings of the same counters, so the differences are >= 0.
            let st = self.srv.stats();
            let drops = self.srv.core().stats().dropped_full;
            c.send_errors
                .fetch_add(st.send_errors - reported_send_errors, Ordering::Relaxed);
            c.dropped
                .fetch_add(drops - reported_drops, Ordering::Relaxed);
            reported_send_errors = st.send_errors;
            reported_drops = drops;
        }
    }

    fn reply(&mut self, h: ServerHandle, body: &[u8], c: &Counters) {
        match self.srv.respond(h, body) {
            Ok(()) => bump(&c.responses),
            Err(_) => bump(&c.send_errors),
        }
    }

    fn decline(&mut self, h: ServerHandle, c: &Counters) {
        if self.srv.decline(h).is_err() {
            bump(&c.send_errors);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::MAX_MESSAGE_LEN;
    use xlane_rpc::wire::{MAX_PAYLOAD, REQ0_PAYLOAD};

    #[test]
    fn reply_progress_by_table() {
        // (packets as (index, count on the first), outcome of each)
        use Progress::*;
        // (packets as (index, count on the first), outcome of each)
        type Case = (&'static [(u16, Option<u16>)], &'static [Progress]);
        let cases: &[Case] = &[
            (&[(0, Some(1))], &[Complete]),
            (
                &[(0, Some(3)), (2, None), (1, None)],
                &[Partial, Partial, Complete],
            ),
            // Out of order: the first packet last.
            (
                &[(2, None), (1, None), (0, Some(3))],
                &[Partial, Partial, Complete],
            ),
            (&[(0, Some(2)), (0, Some(2))], &[Partial, Duplicate]),
            (&[(0, Some(2)), (2, None)], &[Partial, Invalid]),
            // An index past the count, seen before the count was known:
            // flagged when it is, and the message still completes.
            (
                &[(5, None), (0, Some(2)), (1, None)],
                &[Partial, Invalid, Complete],
            ),
            (&[(63, None), (0, Some(64))], &[Partial, Partial]),
            (&[(0, Some(0))], &[Invalid]),
            (&[(0, Some(MAX_REPLY_PACKETS + 1))], &[Invalid]),
            (&[(MAX_REPLY_PACKETS, None)], &[Invalid]),
        ];
        for (pkts, want) in cases {
            let mut p = ReplyProgress::default();
            let got: Vec<Progress> = pkts.iter().map(|&(i, c)| p.add(i, c)).collect();
            assert_eq!(&got, want, "{pkts:?}");
        }
    }

    #[test]
    fn requests_split_into_packets_that_parse_back() {
        for len in [32, MAX_PAYLOAD, MAX_PAYLOAD + 1, 5000, MAX_MESSAGE_LEN] {
            let msg: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
            let n = request_packets(len);
            let mut back = Vec::new();
            let mut buf = [0u8; MAX_PACKET_LEN];
            for i in 0..n {
                let k = emit_request_packet(&msg, 0xBEEF, i, &mut buf);
                let p = Packet::new_checked(&buf[..k]).unwrap();
                assert_eq!(p.msg_type(), MsgType::Request);
                assert_eq!(p.req_id(), 0xBEEF);
                assert_eq!(p.is_first(), i == 0);
                assert_eq!(p.is_last(), i + 1 == n);
                if i == 0 {
                    assert_eq!(p.count(), Some(n));
                    if n > 1 {
                        // REQ0 is small, for the router.
                        assert_eq!(p.payload().len(), REQ0_PAYLOAD);
                    }
                }
                back.extend_from_slice(p.payload());
            }
            assert_eq!(back, msg, "{len}");
        }
        assert!(
            wire::packet_count(MsgType::Response, MAX_MESSAGE_LEN).unwrap() <= MAX_REPLY_PACKETS
        );
    }

    #[test]
    fn incoming_types_are_told_apart_and_others_refused() {
        let mut buf = [0u8; MAX_PACKET_LEN];
        let mut emit = |t: MsgType, index: u16, count: u16, payload: &[u8]| {
            let n = Header::for_packet(t, 1, 7, index, count)
                .emit(payload, &mut buf)
                .unwrap();
            buf[..n].to_vec()
        };
        let reply = emit(MsgType::Response, 0, 2, b"abc");
        assert_eq!(
            parse_incoming(&reply),
            Ok(Incoming::Reply {
                rid: 7,
                index: 0,
                count: Some(2),
                payload: b"abc"
            })
        );
        let later = emit(MsgType::Response, 1, 2, b"d");
        assert!(matches!(
            parse_incoming(&later),
            Ok(Incoming::Reply {
                index: 1,
                count: None,
                ..
            })
        ));
        let ack = emit(MsgType::Ack, 0, 1, b"ACK");
        assert_eq!(parse_incoming(&ack), Ok(Incoming::Ready { rid: 7 }));
        let drop = emit(MsgType::Drop, 0, 1, b"DROP");
        assert_eq!(parse_incoming(&drop), Ok(Incoming::Drop { rid: 7 }));
        for t in [MsgType::Request, MsgType::Feedback] {
            let b = emit(t, 0, 1, &[0; 8]);
            assert_eq!(parse_incoming(&b), Err(IncomingError::Type(t)));
        }
        assert!(matches!(
            parse_incoming(&[0xCC, 8, 0x10]),
            Err(IncomingError::Packet(_))
        ));
    }
}
