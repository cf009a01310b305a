//! The sans-IO R2P2 server core.

use crate::reassembly::{Accepted, MsgError, Reassembly};
use crate::wire::{
    self, AckError, AckPayload, Feedback, Header, MsgType, Packet, PacketError, DROP_PAYLOAD,
    MAX_PACKET_LEN, MAX_PAYLOAD,
};
use crate::{Identity, Nanos, Transmit};
use std::collections::{HashMap, VecDeque};
use std::net::SocketAddrV4;

/// Settings of a [`Server`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ServerConfig {
    /// Requests held at once: being received, executing, or answered and kept
    /// for duplicates. A new request beyond this gets a DROP.
    pub max_requests: usize,
    /// Message bytes held at once (requests being received or executed,
    /// counted at their announced size, and held replies). A new request
    /// that would pass this gets a DROP. Replies are always kept (their
    /// requests ran), so the total can pass it by the replies of the
    /// requests executing.
    pub max_buffered_bytes: usize,
    /// Longest request and reply, in bytes.
    pub max_message_len: usize,
    /// A request not complete this long after its REQ0 came is forgotten.
    pub reassembly_timeout_ns: Nanos,
    /// How long an answered request's reply is kept, to answer duplicates
    /// and retransmission requests without executing again. Keep it at least
    /// the clients' request timeout.
    pub reply_hold_ns: Nanos,
    /// Where to send FEEDBACK after each reply (the router), if anywhere.
    pub feedback_to: Option<SocketAddrV4>,
}

impl Default for ServerConfig {
    /// 16 384 requests, 64 MiB of messages, 64 KiB messages, 100 ms
    /// reassembly timeout, replies held 1 s, no FEEDBACK.
    fn default() -> Self {
        ServerConfig {
            max_requests: 16 * 1024,
            max_buffered_bytes: 64 << 20,
            max_message_len: 64 * 1024,
            reassembly_timeout_ns: 100_000_000,
            reply_hold_ns: 1_000_000_000,
            feedback_to: None,
        }
    }
}

/// A request handed to the application; valid until it is answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ServerHandle {
    slot: u32,
    generation: u32,
}

/// A complete request for the application to execute (exactly one per
/// identity while the server remembers it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Incoming {
    /// Answer with [`Server::respond`]; read with [`Server::request`].
    pub handle: ServerHandle,
    /// Who asked.
    pub id: Identity,
}

/// Why a received datagram was dropped (each one is also counted in [`ServerStats`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ServerRecvError {
    /// Not an R2P2 packet.
    #[error("malformed packet: {0}")]
    Packet(#[from] PacketError),
    /// A type a server never receives (RESPONSE, FEEDBACK, DROP).
    #[error("unexpected {0:?} at a server")]
    UnexpectedType(MsgType),
    /// A REQn or retransmission request for no request the server holds.
    #[error("no request held for {0:?}")]
    Unknown(Identity),
    /// A different REQ0 under the identity of a request still in progress.
    #[error("{0:?} is in progress with other content")]
    IdInUse(Identity),
    /// The packet does not fit the request being reassembled.
    #[error("request packet refused: {0}")]
    Message(#[from] MsgError),
    /// A retransmission request whose payload is not `"ACK"` and u16 indices.
    #[error("{0}")]
    Ack(#[from] AckError),
    /// Every slot is taken: the request was answered with DROP.
    #[error("full: {0:?} dropped")]
    Full(Identity),
    /// REQ0 announces more packets than a `max_message_len` request has:
    /// the request was answered with DROP at once.
    #[error("{id:?} announces {count} packets, more than max_message_len allows: dropped")]
    TooLong {
        /// The request.
        id: Identity,
        /// Packets announced.
        count: u16,
    },
}

/// Why a reply was not accepted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RespondError {
    /// The handle is not a request awaiting its reply.
    #[error("no request awaits a reply under this handle")]
    StaleHandle,
    /// Longer than `max_message_len` (or than 65 535 packets).
    #[error("reply of {len} bytes, at most {max}")]
    TooLong {
        /// Bytes offered.
        len: usize,
        /// The limit.
        max: usize,
    },
}

/// Counters of a [`Server`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ServerStats {
    /// Requests handed to the application (executions).
    pub executed: u64,
    /// Replies accepted by `respond`.
    pub replied: u64,
    /// REQ0s of requests already held (retransmissions or network duplicates).
    pub duplicate_requests: u64,
    /// REQn packets received twice.
    pub duplicate_packets: u64,
    /// Reply packets sent again (whole replies or selected packets).
    pub reply_retransmissions: u64,
    /// Requests answered with DROP because the server was full.
    pub dropped_full: u64,
    /// Requests answered with DROP because REQ0 announced too many packets.
    pub dropped_too_long: u64,
    /// Requests the application refused with [`Server::decline`] (DROP).
    pub declined: u64,
    /// Half-received requests forgotten after the reassembly timeout.
    pub reassembly_timeouts: u64,
    /// Answered requests forgotten after the reply hold time.
    pub expired: u64,
    /// Datagrams dropped as malformed (`Packet`, `Ack`, `Message` errors).
    pub malformed: u64,
    /// Datagrams dropped as unmatched (`Unknown`, `IdInUse`, `UnexpectedType`).
    pub unmatched: u64,
    /// Packets built by `poll_transmit`.
    pub packets_sent: u64,
    /// Packets not queued because the transmit queue was full.
    pub tx_overflow: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Free,
    Receiving,
    Executing,
    Replied,
}

#[derive(Debug)]
struct Slot {
    generation: u32,
    state: State,
    id: Identity,
    src: SocketAddrV4,
    fingerprint: u64,
    /// Bytes of [`ServerConfig::max_buffered_bytes`] this slot holds.
    charged: usize,
    /// A REQRDY has been built for this request.
    acked: bool,
    request: Reassembly,
    reply: Vec<u8>,
    reply_count: u16,
    /// Receiving: last progress + reassembly timeout; Replied: end of the hold.
    expires: Nanos,
}

#[derive(Clone, Copy, Debug)]
enum TxKind {
    /// REQRDY listing the missing REQn packets (none on the first one).
    Ack,
    /// Packet `index` of the reply.
    Reply(u16),
    /// FEEDBACK for the slot's request, to the configured router.
    Feedback,
}

#[derive(Clone, Copy, Debug)]
enum Tx {
    Slot {
        slot: u32,
        generation: u32,
        kind: TxKind,
    },
    Drop {
        dst: SocketAddrV4,
        req_id: u16,
    },
    /// FEEDBACK for a request refused with DROP: the router stops counting
    /// it against this server at once.
    DropFeedback(Identity),
}

/// FNV-1a over the packet count and REQ0's payload: tells a retransmitted
/// REQ0 from a new request that reuses an identity.
fn fingerprint(count: u16, payload: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in count.to_be_bytes().iter().chain(payload) {
        h ^= b as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// The server end of R2P2, without I/O.
///
/// Call order: feed every received datagram to
/// [`handle_datagram`](Self::handle_datagram); call
/// [`handle_timeout`](Self::handle_timeout) when
/// [`poll_timeout`](Self::poll_timeout) is due; drain
/// [`poll_event`](Self::poll_event) (each request to execute, once), read it
/// with [`request`](Self::request) and answer with
/// [`respond`](Self::respond); drain [`poll_transmit`](Self::poll_transmit)
/// after each call and send every packet.
///
/// At most once: a request is handed out only when its identity is not held;
/// it stays held, with its reply, for `reply_hold_ns` after the reply. A REQ0
/// for a held identity is a duplicate (answered from the held state), unless
/// its content differs from the held REQ0 and the held request is answered:
/// then the client has reused the id, and it is a new request.
///
/// Memory: `max_requests` slots; the message bytes they hold are bounded by
/// `max_buffered_bytes` (plus the replies of executing requests); a freed
/// slot keeps buffers of up to 16 KiB, so such messages stop allocating once
/// every slot has been used; a table of identities; a transmit queue of at
/// most `8 · max_requests + 64` entries (beyond it packets are counted in
/// `tx_overflow` and recovered by the client's retransmissions).
#[derive(Debug)]
pub struct Server {
    cfg: ServerConfig,
    slots: Vec<Slot>,
    free: Vec<u32>,
    by_id: HashMap<Identity, u32>,
    tx: VecDeque<Tx>,
    tx_cap: usize,
    events: VecDeque<Incoming>,
    stats: ServerStats,
    scratch: Vec<u8>,
    buffered: usize,
    /// (deadline, slot, generation) of requests being received, oldest first.
    recv_deadlines: VecDeque<(Nanos, u32, u32)>,
    /// (deadline, slot, generation) of held replies, oldest first.
    hold_deadlines: VecDeque<(Nanos, u32, u32)>,
}

/// A freed slot keeps buffers up to this capacity (messages up to about 11
/// packets then never allocate again); larger ones are given back.
const KEEP_BUFFER: usize = 16 * 1024;

impl Server {
    /// A server with `cfg`. Allocates (only here and in buffer growth).
    pub fn new(cfg: ServerConfig) -> Self {
        let n = cfg.max_requests.max(1);
        let slots = (0..n)
            .map(|_| Slot {
                generation: 0,
                state: State::Free,
                id: Identity {
                    ip: std::net::Ipv4Addr::UNSPECIFIED,
                    port: 0,
                    req_id: 0,
                },
                src: SocketAddrV4::new(std::net::Ipv4Addr::UNSPECIFIED, 0),
                fingerprint: 0,
                charged: 0,
                acked: false,
                request: Reassembly::new(MsgType::Request, cfg.max_message_len),
                reply: Vec::new(),
                reply_count: 0,
                expires: 0,
            })
            .collect();
        let tx_cap = 8 * n + 64;
        Server {
            cfg,
            slots,
            free: (0..n as u32).rev().collect(),
            by_id: HashMap::with_capacity(2 * n),
            tx: VecDeque::with_capacity(tx_cap),
            tx_cap,
            events: VecDeque::with_capacity(n),
            stats: ServerStats::default(),
            scratch: vec![0; MAX_PAYLOAD],
            buffered: 0,
            recv_deadlines: VecDeque::with_capacity(n),
            hold_deadlines: VecDeque::with_capacity(n),
        }
    }

    /// The settings.
    pub fn config(&self) -> &ServerConfig {
        &self.cfg
    }

    /// The counters.
    pub fn stats(&self) -> ServerStats {
        self.stats
    }

    /// Requests held (being received, executing, or answered and kept).
    pub fn held(&self) -> usize {
        self.by_id.len()
    }

    /// DROP for a new request `req_id` of `client`, and its FEEDBACK to the
    /// router if there is one.
    fn refuse(&mut self, client: SocketAddrV4, req_id: u16) {
        self.push_tx(Tx::Drop {
            dst: client,
            req_id,
        });
        if self.cfg.feedback_to.is_some() {
            self.push_tx(Tx::DropFeedback(Identity::of(client, req_id)));
        }
    }

    fn push_tx(&mut self, tx: Tx) {
        if self.tx.len() >= self.tx_cap {
            self.stats.tx_overflow += 1;
        } else {
            self.tx.push_back(tx);
        }
    }

    fn push_slot_tx(&mut self, slot: u32, kind: TxKind) {
        let generation = self.slots[slot as usize].generation;
        self.push_tx(Tx::Slot {
            slot,
            generation,
            kind,
        });
    }

    /// Message bytes held (see [`ServerConfig::max_buffered_bytes`]).
    pub fn buffered_bytes(&self) -> usize {
        self.buffered
    }

    fn free_slot(&mut self, slot: u32) {
        let s = &mut self.slots[slot as usize];
        self.by_id.remove(&s.id);
        self.buffered -= s.charged;
        s.charged = 0;
        s.request.release(KEEP_BUFFER);
        if s.reply.capacity() > KEEP_BUFFER {
            s.reply = Vec::new();
        }
        s.state = State::Free;
        s.generation = s.generation.wrapping_add(1);
        self.free.push(slot);
    }

    /// Takes one datagram from `from`. Bounded work: one header check, one
    /// table look-up, one packet copy; a duplicate REQ0 of an answered
    /// request queues the reply again (one queue entry per reply packet).
    pub fn handle_datagram(
        &mut self,
        now: Nanos,
        from: SocketAddrV4,
        bytes: &[u8],
    ) -> Result<(), ServerRecvError> {
        let r = self.datagram(now, from, bytes);
        match r {
            Err(ServerRecvError::Packet(_))
            | Err(ServerRecvError::Ack(_))
            | Err(ServerRecvError::Message(_)) => self.stats.malformed += 1,
            Err(ServerRecvError::Full(_)) => self.stats.dropped_full += 1,
            Err(ServerRecvError::TooLong { .. }) => self.stats.dropped_too_long += 1,
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
    ) -> Result<(), ServerRecvError> {
        let p = Packet::new_checked(bytes)?;
        let id = Identity::of(from, p.req_id());
        match p.msg_type() {
            MsgType::Request => self.on_request(now, from, id, &p),
            MsgType::Ack => {
                // A client's request for the reply packets it lacks.
                let ack = AckPayload::parse(p.payload())?;
                let Some(&slot) = self.by_id.get(&id) else {
                    return Err(ServerRecvError::Unknown(id));
                };
                let s = &self.slots[slot as usize];
                if s.state != State::Replied {
                    return Ok(());
                }
                let count = s.reply_count;
                for i in ack.missing().filter(|&i| i < count) {
                    self.push_slot_tx(slot, TxKind::Reply(i));
                    self.stats.reply_retransmissions += 1;
                }
                Ok(())
            }
            t => Err(ServerRecvError::UnexpectedType(t)),
        }
    }

    fn on_request(
        &mut self,
        now: Nanos,
        from: SocketAddrV4,
        id: Identity,
        p: &Packet<'_>,
    ) -> Result<(), ServerRecvError> {
        if let Some(&slot) = self.by_id.get(&id) {
            let s = &mut self.slots[slot as usize];
            if p.is_first() {
                let fp = fingerprint(p.packet_order(), p.payload());
                if fp != s.fingerprint {
                    if s.state != State::Replied {
                        return Err(ServerRecvError::IdInUse(id));
                    }
                    // The client reused the id for a new request.
                    self.free_slot(slot);
                    return self.new_request(now, from, id, p);
                }
                self.stats.duplicate_requests += 1;
                match s.state {
                    State::Receiving => self.push_slot_tx(slot, TxKind::Ack),
                    State::Replied => {
                        for i in 0..s.reply_count {
                            self.push_slot_tx(slot, TxKind::Reply(i));
                            self.stats.reply_retransmissions += 1;
                        }
                    }
                    _ => {}
                }
                return Ok(());
            }
            if s.state != State::Receiving {
                self.stats.duplicate_packets += 1;
                return Ok(());
            }
            match s.request.accept(p)? {
                Accepted::Duplicate => self.stats.duplicate_packets += 1,
                Accepted::New => {
                    if s.request.is_complete() {
                        self.execute(slot);
                    }
                }
            }
            return Ok(());
        }
        if !p.is_first() {
            return Err(ServerRecvError::Unknown(id));
        }
        self.new_request(now, from, id, p)
    }

    fn new_request(
        &mut self,
        now: Nanos,
        from: SocketAddrV4,
        id: Identity,
        p: &Packet<'_>,
    ) -> Result<(), ServerRecvError> {
        let count = p.packet_order();
        let max_count = wire::packet_count(MsgType::Request, self.cfg.max_message_len);
        if max_count.is_some_and(|m| count > m) {
            self.refuse(from, id.req_id);
            return Err(ServerRecvError::TooLong { id, count });
        }
        // Announced size: what the request may occupy once all of it is in.
        let need = (p.packet_order() as usize * MAX_PAYLOAD).min(self.cfg.max_message_len);
        let over = |s: &Self| s.buffered + need > s.cfg.max_buffered_bytes;
        if self.free.is_empty() || over(self) {
            self.expire(now);
        }
        let slot = if over(self) { None } else { self.free.pop() };
        let Some(slot) = slot else {
            self.refuse(from, id.req_id);
            return Err(ServerRecvError::Full(id));
        };
        let s = &mut self.slots[slot as usize];
        s.request.reset();
        if let Err(e) = s.request.accept(p) {
            self.free.push(slot);
            return Err(e.into());
        }
        s.state = State::Receiving;
        s.id = id;
        s.src = from;
        s.fingerprint = fingerprint(p.packet_order(), p.payload());
        s.acked = false;
        s.charged = need;
        self.buffered += need;
        s.expires = now.saturating_add(self.cfg.reassembly_timeout_ns);
        let entry = (s.expires, slot, s.generation);
        self.by_id.insert(id, slot);
        if s.request.is_complete() {
            self.execute(slot);
        } else {
            // Only a request that waits for more packets needs the deadline.
            self.recv_deadlines.push_back(entry);
            self.push_slot_tx(slot, TxKind::Ack);
        }
        Ok(())
    }

    fn execute(&mut self, slot: u32) {
        let s = &mut self.slots[slot as usize];
        s.state = State::Executing;
        self.stats.executed += 1;
        self.events.push_back(Incoming {
            handle: ServerHandle {
                slot,
                generation: s.generation,
            },
            id: s.id,
        });
    }

    /// The next request to execute.
    pub fn poll_event(&mut self) -> Option<Incoming> {
        self.events.pop_front()
    }

    fn executing(&self, h: ServerHandle) -> Option<&Slot> {
        self.slots
            .get(h.slot as usize)
            .filter(|s| s.generation == h.generation && s.state == State::Executing)
    }

    /// The request behind `h`, while it awaits its reply.
    pub fn request(&self, h: ServerHandle) -> Option<&[u8]> {
        self.executing(h).map(|s| s.request.message())
    }

    /// Answers the request behind `h` with `payload`: queues every reply
    /// packet (and a FEEDBACK to `feedback_to`), and keeps the reply for
    /// `reply_hold_ns`.
    pub fn respond(
        &mut self,
        h: ServerHandle,
        payload: &[u8],
        now: Nanos,
    ) -> Result<(), RespondError> {
        if self.executing(h).is_none() {
            return Err(RespondError::StaleHandle);
        }
        let count = match wire::packet_count(MsgType::Response, payload.len()) {
            Some(c) if payload.len() <= self.cfg.max_message_len => c,
            _ => {
                return Err(RespondError::TooLong {
                    len: payload.len(),
                    max: self.cfg.max_message_len,
                })
            }
        };
        let s = &mut self.slots[h.slot as usize];
        // The request is done with: hold the reply instead.
        s.request.release(KEEP_BUFFER);
        self.buffered = self.buffered - s.charged + payload.len();
        s.charged = payload.len();
        s.reply.clear();
        s.reply.extend_from_slice(payload);
        s.reply_count = count;
        s.state = State::Replied;
        s.expires = now.saturating_add(self.cfg.reply_hold_ns);
        let entry = (s.expires, h.slot, s.generation);
        self.hold_deadlines.push_back(entry);
        for i in 0..count {
            self.push_slot_tx(h.slot, TxKind::Reply(i));
        }
        if self.cfg.feedback_to.is_some() {
            self.push_slot_tx(h.slot, TxKind::Feedback);
        }
        self.stats.replied += 1;
        Ok(())
    }

    /// Refuses the request behind `h` instead of answering it (the
    /// application's queue is full): the client gets a DROP, the router
    /// its FEEDBACK, and the identity is forgotten at once, so the
    /// request counts as never executed and may be sent again.
    pub fn decline(&mut self, h: ServerHandle) -> Result<(), RespondError> {
        let Some(s) = self.executing(h) else {
            return Err(RespondError::StaleHandle);
        };
        let (src, rid) = (s.src, s.id.req_id);
        self.free_slot(h.slot);
        self.refuse(src, rid);
        self.stats.declined += 1;
        Ok(())
    }

    fn expire(&mut self, now: Nanos) {
        // Both queues are in deadline order (one constant added to a clock
        // that does not go back); entries of slots that moved on are skipped.
        while let Some(&(at, slot, generation)) = self.recv_deadlines.front() {
            if at > now {
                break;
            }
            self.recv_deadlines.pop_front();
            let s = &self.slots[slot as usize];
            if s.generation == generation && s.state == State::Receiving {
                self.stats.reassembly_timeouts += 1;
                self.free_slot(slot);
            }
        }
        while let Some(&(at, slot, generation)) = self.hold_deadlines.front() {
            if at > now {
                break;
            }
            self.hold_deadlines.pop_front();
            let s = &self.slots[slot as usize];
            if s.generation == generation && s.state == State::Replied && s.expires == at {
                self.stats.expired += 1;
                self.free_slot(slot);
            }
        }
    }

    /// The earliest time [`handle_timeout`](Self::handle_timeout) may have
    /// work (a half-received request to forget, a held reply to let go); it
    /// may find that the request moved on meanwhile and do nothing. O(1).
    pub fn poll_timeout(&self) -> Option<Nanos> {
        let a = self.recv_deadlines.front().map(|e| e.0);
        let b = self.hold_deadlines.front().map(|e| e.0);
        a.into_iter().chain(b).min()
    }

    /// Forgets half-received requests past the reassembly timeout and
    /// answered ones past the hold time. Amortised O(1) per request.
    pub fn handle_timeout(&mut self, now: Nanos) {
        self.expire(now);
    }

    /// Builds the next queued packet into `buf` (at least
    /// [`MAX_PACKET_LEN`] bytes, else `None` and the packet stays queued).
    /// Packets of slots reused meanwhile are skipped. No allocation.
    pub fn poll_transmit(&mut self, buf: &mut [u8]) -> Option<Transmit> {
        if buf.len() < MAX_PACKET_LEN {
            return None;
        }
        while let Some(tx) = self.tx.pop_front() {
            let (dst, len) = match tx {
                Tx::Drop { dst, req_id } => {
                    let h =
                        Header::for_packet(MsgType::Drop, wire::policy::FIXED_ROUTE, req_id, 0, 1);
                    (dst, h.emit(DROP_PAYLOAD, buf))
                }
                Tx::DropFeedback(id) => {
                    let Some(router) = self.cfg.feedback_to else {
                        continue;
                    };
                    (router, emit_feedback(id, buf))
                }
                Tx::Slot {
                    slot,
                    generation,
                    kind,
                } => {
                    let s = &self.slots[slot as usize];
                    if s.generation != generation || s.state == State::Free {
                        continue;
                    }
                    let rid = s.id.req_id;
                    let fixed = wire::policy::FIXED_ROUTE;
                    match kind {
                        TxKind::Ack => {
                            if s.state != State::Receiving {
                                continue;
                            }
                            // The first REQRDY is the plain "ACK" the C client
                            // expects; later ones list what is missing.
                            let n = if s.acked {
                                AckPayload::emit(
                                    s.request.missing().filter(|&i| i > 0),
                                    &mut self.scratch,
                                )
                            } else {
                                AckPayload::emit(core::iter::empty(), &mut self.scratch)
                            };
                            let h = Header::for_packet(MsgType::Ack, fixed, rid, 0, 1);
                            let dst = s.src;
                            self.slots[slot as usize].acked = true;
                            (dst, h.emit(&self.scratch[..n], buf))
                        }
                        TxKind::Reply(i) => {
                            if s.state != State::Replied {
                                continue;
                            }
                            let r = wire::packet_range(MsgType::Response, s.reply.len(), i);
                            let h =
                                Header::for_packet(MsgType::Response, fixed, rid, i, s.reply_count);
                            (s.src, h.emit(&s.reply[r], buf))
                        }
                        TxKind::Feedback => {
                            let Some(router) = self.cfg.feedback_to else {
                                continue;
                            };
                            (router, emit_feedback(s.id, buf))
                        }
                    }
                }
            };
            if let Ok(len) = len {
                self.stats.packets_sent += 1;
                return Some(Transmit { dst, len });
            }
        }
        None
    }
}

/// The FEEDBACK naming request `id`, built into `buf`.
fn emit_feedback(id: Identity, buf: &mut [u8]) -> Result<usize, wire::EmitError> {
    let h = Header::for_packet(
        MsgType::Feedback,
        wire::policy::FIXED_ROUTE,
        id.req_id,
        0,
        1,
    );
    h.emit(&Feedback::from(id).to_bytes(), buf)
}
