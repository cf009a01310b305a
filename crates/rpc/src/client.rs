//! The sans-IO R2P2 client core.

use crate::reassembly::{Accepted, MsgError, Reassembly};
use crate::wire::{
    self, AckError, AckPayload, Header, MsgType, Packet, PacketError, MAX_PACKET_LEN, MAX_PAYLOAD,
};
use crate::{Identity, Nanos, Transmit};
use std::collections::VecDeque;
use std::net::SocketAddrV4;

/// Settings of a [`Client`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClientConfig {
    /// The address replies come back to (the socket's); the first two parts
    /// of every request's [`Identity`].
    pub local: SocketAddrV4,
    /// Requests in flight (and completed but not yet released) at most.
    pub max_in_flight: usize,
    /// Longest request and reply, in bytes.
    pub max_message_len: usize,
    /// First retransmission timeout; doubled after each retransmission.
    pub rto_ns: Nanos,
    /// Cap of the doubled timeout.
    pub max_rto_ns: Nanos,
    /// A request unanswered this long after it was sent completes as
    /// [`Outcome::TimedOut`]. Keep it below the servers' reply hold time.
    pub request_timeout_ns: Nanos,
    /// A request id is not reused for this long after its request completed,
    /// so that a late packet of the old exchange cannot be taken for the new
    /// one. Keep it at least the servers' reply hold time.
    pub rid_quarantine_ns: Nanos,
    /// Routing policy written into requests ([`wire::policy`]).
    pub policy: u8,
}

impl ClientConfig {
    /// Defaults for a client at `local`: 256 requests in flight, 64 KiB
    /// messages, RTO 2 ms doubling up to 64 ms, requests time out after
    /// 500 ms, ids quarantined for 2 s, load-balanced routing.
    pub fn new(local: SocketAddrV4) -> Self {
        ClientConfig {
            local,
            max_in_flight: 256,
            max_message_len: 64 * 1024,
            rto_ns: 2_000_000,
            max_rto_ns: 64_000_000,
            request_timeout_ns: 500_000_000,
            rid_quarantine_ns: 2_000_000_000,
            policy: wire::policy::LB_ROUTE,
        }
    }
}

/// A request of this client; valid until [`Client::release`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RequestHandle {
    slot: u32,
    generation: u32,
}

/// How a request ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The whole reply is in: read it with [`Client::reply`].
    Reply,
    /// The server answered DROP: it refused the request. A copy of REQ0
    /// still in the network (a duplicate, a retransmission) may yet reach a
    /// server with room and run there, at most once.
    Dropped,
    /// No complete reply within the request timeout. The request may or may
    /// not have been executed (at most once).
    TimedOut,
}

/// What the client tells its user.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Completion {
    /// The request.
    pub handle: RequestHandle,
    /// Its identity on the wire.
    pub id: Identity,
    /// How it ended.
    pub outcome: Outcome,
}

/// Why a request was not sent. Nothing was queued.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SendError {
    /// Longer than `max_message_len` (or than 65 535 packets).
    #[error("request of {len} bytes, at most {max}")]
    TooLong {
        /// Bytes offered.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// `max_in_flight` requests are in flight or not yet released.
    #[error("{0} requests in flight")]
    Full(usize),
    /// Every request id is in use or in quarantine.
    #[error("no request id free")]
    NoFreeId,
}

/// Why a received datagram was dropped (each one is also counted in [`ClientStats`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ClientRecvError {
    /// Not an R2P2 packet.
    #[error("malformed packet: {0}")]
    Packet(#[from] PacketError),
    /// A type a client never receives (REQUEST, FEEDBACK).
    #[error("unexpected {0:?} at a client")]
    UnexpectedType(MsgType),
    /// No request in flight has this id (late, duplicate or forged).
    #[error("no request in flight with id {0}")]
    Unknown(u16),
    /// The request's server is known and this came from elsewhere.
    #[error("packet for id {req_id} from {from}, the request's server is {server}")]
    WrongSource {
        /// Request id.
        req_id: u16,
        /// Sender of the packet.
        from: SocketAddrV4,
        /// The server that took the request.
        server: SocketAddrV4,
    },
    /// The packet does not fit the reply being reassembled.
    #[error("reply packet refused: {0}")]
    Message(#[from] MsgError),
    /// An ACK whose payload is not `"ACK"` and u16 indices.
    #[error("{0}")]
    Ack(#[from] AckError),
}

/// Counters of a [`Client`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClientStats {
    /// Requests accepted by `send_request`.
    pub requests: u64,
    /// Completions with a reply.
    pub replies: u64,
    /// Completions by DROP.
    pub dropped: u64,
    /// Completions by timeout.
    pub timed_out: u64,
    /// Packets built by `poll_transmit`.
    pub packets_sent: u64,
    /// Retransmission timeouts that sent something again.
    pub retransmissions: u64,
    /// Reply packets received twice.
    pub duplicate_packets: u64,
    /// Datagrams dropped as malformed (`Packet`, `Ack`, `Message` errors).
    pub malformed: u64,
    /// Datagrams dropped because no request matched (`Unknown`, `WrongSource`,
    /// `UnexpectedType`).
    pub unmatched: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Free,
    /// Waiting for REQRDY (multi-packet request, REQ0 sent).
    AwaitAck,
    /// The whole request has been sent; waiting for the reply.
    AwaitReply,
    Done(Outcome),
}

#[derive(Debug)]
struct Slot {
    generation: u32,
    state: State,
    req_id: u16,
    dest: SocketAddrV4,
    server: Option<SocketAddrV4>,
    request: Vec<u8>,
    count: u16,
    reply: Reassembly,
    deadline: Nanos,
    next_rto: Nanos,
    rto: Nanos,
}

#[derive(Clone, Copy, Debug)]
enum TxKind {
    /// Packet `index` of the request.
    Request(u16),
    /// A selective retransmission request for the reply's missing packets.
    Nack,
}

#[derive(Clone, Copy, Debug)]
struct Tx {
    slot: u32,
    generation: u32,
    kind: TxKind,
    dst: SocketAddrV4,
}

const NO_SLOT: u32 = u32::MAX;
const IN_FLIGHT: Nanos = Nanos::MAX;

/// The client end of R2P2, without I/O.
///
/// Call order: [`send_request`](Self::send_request) any time; feed every
/// received datagram to [`handle_datagram`](Self::handle_datagram); call
/// [`handle_timeout`](Self::handle_timeout) when
/// [`poll_timeout`](Self::poll_timeout) is due; after each of these drain
/// [`poll_transmit`](Self::poll_transmit) (send each packet) and
/// [`poll_event`](Self::poll_event) (each request completes exactly once),
/// then read a reply with [`reply`](Self::reply) and give its slot back with
/// [`release`](Self::release).
///
/// Memory is fixed at construction except that each slot's request and reply
/// buffers grow to the longest message they have held (at most
/// `max_message_len` each); the request-id table is 65 536 entries.
#[derive(Debug)]
pub struct Client {
    cfg: ClientConfig,
    slots: Vec<Slot>,
    free: Vec<u32>,
    by_rid: Vec<u32>,
    rid_free_at: Vec<Nanos>,
    next_rid: u16,
    tx: VecDeque<Tx>,
    events: VecDeque<Completion>,
    stats: ClientStats,
    scratch: Vec<u8>,
}

impl Client {
    /// A client with `cfg`. Allocates (only here and in buffer growth).
    pub fn new(cfg: ClientConfig) -> Self {
        let n = cfg.max_in_flight.max(1);
        let slots = (0..n)
            .map(|_| Slot {
                generation: 0,
                state: State::Free,
                req_id: 0,
                dest: cfg.local,
                server: None,
                request: Vec::new(),
                count: 0,
                reply: Reassembly::new(MsgType::Response, cfg.max_message_len),
                deadline: 0,
                next_rto: 0,
                rto: cfg.rto_ns,
            })
            .collect();
        Client {
            cfg,
            slots,
            free: (0..n as u32).rev().collect(),
            by_rid: vec![NO_SLOT; 1 << 16],
            rid_free_at: vec![0; 1 << 16],
            next_rid: 0,
            tx: VecDeque::with_capacity(4 * n),
            events: VecDeque::with_capacity(n),
            stats: ClientStats::default(),
            scratch: vec![0; MAX_PAYLOAD],
        }
    }

    /// The settings.
    pub fn config(&self) -> &ClientConfig {
        &self.cfg
    }

    /// The counters.
    pub fn stats(&self) -> ClientStats {
        self.stats
    }

    fn identity(&self, req_id: u16) -> Identity {
        Identity::of(self.cfg.local, req_id)
    }

    /// Sends `payload` as a request to `dest` (a server or a router): queues
    /// REQ0; a longer request sends the rest once the server's REQRDY comes.
    /// Picks the next request id that is neither in flight nor in quarantine
    /// (O(1) unless many are: at most 65 536 looks).
    pub fn send_request(
        &mut self,
        dest: SocketAddrV4,
        payload: &[u8],
        now: Nanos,
    ) -> Result<RequestHandle, SendError> {
        let count = wire::packet_count(MsgType::Request, payload.len());
        let count = match count {
            Some(c) if payload.len() <= self.cfg.max_message_len => c,
            _ => {
                return Err(SendError::TooLong {
                    len: payload.len(),
                    max: self.cfg.max_message_len,
                })
            }
        };
        let Some(&slot) = self.free.last() else {
            return Err(SendError::Full(self.slots.len()));
        };
        let mut rid = None;
        for k in 0..=u16::MAX {
            let r = self.next_rid.wrapping_add(k);
            if self.rid_free_at[r as usize] <= now {
                rid = Some(r);
                break;
            }
        }
        let rid = rid.ok_or(SendError::NoFreeId)?;
        self.next_rid = rid.wrapping_add(1);
        self.free.pop();
        self.by_rid[rid as usize] = slot;
        self.rid_free_at[rid as usize] = IN_FLIGHT;
        let s = &mut self.slots[slot as usize];
        s.state = if count > 1 {
            State::AwaitAck
        } else {
            State::AwaitReply
        };
        s.req_id = rid;
        s.dest = dest;
        s.server = None;
        s.request.clear();
        s.request.extend_from_slice(payload);
        s.count = count;
        s.reply.reset();
        s.deadline = now.saturating_add(self.cfg.request_timeout_ns);
        s.rto = self.cfg.rto_ns;
        s.next_rto = now.saturating_add(s.rto);
        let generation = s.generation;
        self.tx.push_back(Tx {
            slot,
            generation,
            kind: TxKind::Request(0),
            dst: dest,
        });
        self.stats.requests += 1;
        Ok(RequestHandle { slot, generation })
    }

    fn slot_of(&self, h: RequestHandle) -> Option<&Slot> {
        self.slots
            .get(h.slot as usize)
            .filter(|s| s.generation == h.generation && s.state != State::Free)
    }

    /// The request id a request was sent with.
    pub fn identity_of(&self, h: RequestHandle) -> Option<Identity> {
        self.slot_of(h).map(|s| self.identity(s.req_id))
    }

    /// The reply of a request that completed with [`Outcome::Reply`].
    pub fn reply(&self, h: RequestHandle) -> Option<&[u8]> {
        self.slot_of(h)
            .filter(|s| s.state == State::Done(Outcome::Reply))
            .map(|s| s.reply.message())
    }

    /// Gives a request's slot back. A request still in flight is abandoned:
    /// it produces no completion, later packets for it are dropped, and its id
    /// goes into quarantine. Returns `false` for a stale handle.
    pub fn release(&mut self, h: RequestHandle, now: Nanos) -> bool {
        let Some(s) = self.slot_of(h) else {
            return false;
        };
        if !matches!(s.state, State::Done(_)) {
            let rid = s.req_id;
            self.retire_rid(rid, now);
        }
        let s = &mut self.slots[h.slot as usize];
        s.state = State::Free;
        s.generation = s.generation.wrapping_add(1);
        self.free.push(h.slot);
        true
    }

    fn retire_rid(&mut self, rid: u16, now: Nanos) {
        self.by_rid[rid as usize] = NO_SLOT;
        self.rid_free_at[rid as usize] = now.saturating_add(self.cfg.rid_quarantine_ns).max(1);
    }

    fn complete(&mut self, slot: u32, outcome: Outcome, now: Nanos) {
        let s = &mut self.slots[slot as usize];
        s.state = State::Done(outcome);
        let (rid, generation) = (s.req_id, s.generation);
        self.retire_rid(rid, now);
        match outcome {
            Outcome::Reply => self.stats.replies += 1,
            Outcome::Dropped => self.stats.dropped += 1,
            Outcome::TimedOut => self.stats.timed_out += 1,
        }
        self.events.push_back(Completion {
            handle: RequestHandle { slot, generation },
            id: self.identity(rid),
            outcome,
        });
    }

    fn queue_rest_of_request(&mut self, slot: u32, dst: SocketAddrV4, which: &[u16]) {
        let generation = self.slots[slot as usize].generation;
        for &i in which {
            self.tx.push_back(Tx {
                slot,
                generation,
                kind: TxKind::Request(i),
                dst,
            });
        }
    }

    /// Takes one received datagram from `from`. Bounded work: one header
    /// check, one table look-up, one packet copy (a REQRDY queues the rest of
    /// the request: one entry per packet).
    pub fn handle_datagram(
        &mut self,
        now: Nanos,
        from: SocketAddrV4,
        bytes: &[u8],
    ) -> Result<(), ClientRecvError> {
        let r = self.datagram(now, from, bytes);
        match r {
            Err(ClientRecvError::Packet(_))
            | Err(ClientRecvError::Ack(_))
            | Err(ClientRecvError::Message(_)) => self.stats.malformed += 1,
            Err(_) => self.stats.unmatched += 1,
            Ok(()) => {}
        }
        r
    }

    fn datagram(
        &mut self,
        now: Nanos,
        from: SocketAddrV4,
        bytes: &[u8],
    ) -> Result<(), ClientRecvError> {
        let p = Packet::new_checked(bytes)?;
        let t = p.msg_type();
        if matches!(t, MsgType::Request | MsgType::Feedback) {
            return Err(ClientRecvError::UnexpectedType(t));
        }
        let rid = p.req_id();
        let slot = self.by_rid[rid as usize];
        if slot == NO_SLOT {
            return Err(ClientRecvError::Unknown(rid));
        }
        let s = &mut self.slots[slot as usize];
        if let Some(server) = s.server {
            if server != from {
                return Err(ClientRecvError::WrongSource {
                    req_id: rid,
                    from,
                    server,
                });
            }
        }
        match t {
            MsgType::Ack => {
                let ack = AckPayload::parse(p.payload())?;
                s.server = Some(from);
                let count = s.count;
                if s.state == State::AwaitAck {
                    s.state = State::AwaitReply;
                    s.rto = self.cfg.rto_ns;
                    s.next_rto = now.saturating_add(s.rto);
                    let generation = s.generation;
                    for i in 1..count {
                        self.tx.push_back(Tx {
                            slot,
                            generation,
                            kind: TxKind::Request(i),
                            dst: from,
                        });
                    }
                } else {
                    // The server lists the REQn packets it lacks.
                    let mut list = [0u16; 64];
                    let mut n = 0;
                    for i in ack.missing().filter(|&i| i >= 1 && i < count) {
                        list[n] = i;
                        n += 1;
                        if n == list.len() {
                            self.queue_rest_of_request(slot, from, &list[..n]);
                            n = 0;
                        }
                    }
                    self.queue_rest_of_request(slot, from, &list[..n]);
                }
                Ok(())
            }
            MsgType::Drop => {
                self.complete(slot, Outcome::Dropped, now);
                Ok(())
            }
            _ => {
                // A reply packet: the server has the whole request.
                s.server = Some(from);
                s.state = State::AwaitReply;
                match s.reply.accept(&p)? {
                    Accepted::Duplicate => self.stats.duplicate_packets += 1,
                    Accepted::New => {
                        s.rto = self.cfg.rto_ns;
                        s.next_rto = now.saturating_add(s.rto);
                    }
                }
                if s.reply.is_complete() {
                    self.complete(slot, Outcome::Reply, now);
                }
                Ok(())
            }
        }
    }

    /// The earliest time [`handle_timeout`](Self::handle_timeout) has work:
    /// a retransmission or a request timeout. O(`max_in_flight`).
    pub fn poll_timeout(&self) -> Option<Nanos> {
        self.slots
            .iter()
            .filter(|s| matches!(s.state, State::AwaitAck | State::AwaitReply))
            .map(|s| s.next_rto.min(s.deadline))
            .min()
    }

    /// Times requests out and retransmits what is due: REQ0 again while no
    /// REQRDY or reply packet came (to the server once it is known, else to
    /// the first destination), or a selective request for the reply packets
    /// still missing. O(`max_in_flight`).
    pub fn handle_timeout(&mut self, now: Nanos) {
        for slot in 0..self.slots.len() as u32 {
            let s = &mut self.slots[slot as usize];
            if !matches!(s.state, State::AwaitAck | State::AwaitReply) {
                continue;
            }
            if now >= s.deadline {
                self.complete(slot, Outcome::TimedOut, now);
                continue;
            }
            if now < s.next_rto {
                continue;
            }
            s.rto = (s.rto.saturating_mul(2)).min(self.cfg.max_rto_ns.max(self.cfg.rto_ns));
            s.next_rto = now.saturating_add(s.rto);
            let dst = s.server.unwrap_or(s.dest);
            let kind = if s.reply.received() > 0 {
                TxKind::Nack
            } else {
                TxKind::Request(0)
            };
            let generation = s.generation;
            self.tx.push_back(Tx {
                slot,
                generation,
                kind,
                dst,
            });
            self.stats.retransmissions += 1;
        }
    }

    /// Builds the next queued packet into `buf` (at least
    /// [`MAX_PACKET_LEN`] bytes, else `None` and the packet stays queued).
    /// Packets of requests that completed or were released meanwhile are
    /// skipped. No allocation.
    pub fn poll_transmit(&mut self, buf: &mut [u8]) -> Option<Transmit> {
        if buf.len() < MAX_PACKET_LEN {
            return None;
        }
        while let Some(tx) = self.tx.pop_front() {
            let s = &self.slots[tx.slot as usize];
            if s.generation != tx.generation
                || !matches!(s.state, State::AwaitAck | State::AwaitReply)
            {
                continue;
            }
            let len = match tx.kind {
                TxKind::Request(i) => {
                    let range = wire::packet_range(MsgType::Request, s.request.len(), i);
                    let h =
                        Header::for_packet(MsgType::Request, self.cfg.policy, s.req_id, i, s.count);
                    h.emit(&s.request[range], buf)
                }
                TxKind::Nack => {
                    let n = AckPayload::emit(s.reply.missing(), &mut self.scratch);
                    let h =
                        Header::for_packet(MsgType::Ack, wire::policy::FIXED_ROUTE, s.req_id, 0, 1);
                    h.emit(&self.scratch[..n], buf)
                }
            };
            // Emit cannot fail: payload ranges are ≤ 1464 and buf is long enough.
            if let Ok(len) = len {
                self.stats.packets_sent += 1;
                return Some(Transmit { dst: tx.dst, len });
            }
        }
        None
    }

    /// The next completion (each request completes exactly once).
    pub fn poll_event(&mut self) -> Option<Completion> {
        self.events.pop_front()
    }

    /// Requests in flight (sent, not completed).
    pub fn in_flight(&self) -> usize {
        self.slots
            .iter()
            .filter(|s| matches!(s.state, State::AwaitAck | State::AwaitReply))
            .count()
    }
}
