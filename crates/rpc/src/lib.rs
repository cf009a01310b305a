//! # xlane-rpc: R2P2 request-reply RPCs on the regular lane, sans I/O
//!
//! R2P2 (the Lancet R2P2 report, Fig. 2 and Fig. 3) carries every
//! RPC as a request-reply pair over UDP, identified by
//! ⟨client IP, client port, request id⟩ ([`Identity`]). This crate holds
//!
//! * [`wire`]: the 8-byte header as a packet view ([`wire::Packet::new_checked`],
//!   [`wire::Header::emit`], one [`wire::field`] module), the FEEDBACK and
//!   ACK payloads, and how a message splits into packets;
//! * [`Client`] and [`Server`]: the two ends as sans-IO cores. Datagrams and
//!   the time (u64 ns) go in; packets to send ([`Client::poll_transmit`]),
//!   events ([`Client::poll_event`], [`Server::poll_event`]) and the next
//!   deadline (`poll_timeout`) come out;
//! * [`admission`]: SLO-aware admission control (SVEN): a latency
//!   histogram and the control loops that turn it into a drop rate;
//! * [`router::Router`]: where REQ0 goes: a server picked by policy
//!   (`random`, `round-robin`, `jsq`, `jbsq:N`), kept for retransmissions,
//!   freed by the server's FEEDBACK;
//! * [`udp`]: a Linux UDP driver (one non-blocking `std` socket, one thread)
//!   with a small library API: [`udp::RpcClient`] (send a request, poll a
//!   completion) and [`udp::RpcServer`] (poll a request, respond).
//!
//! The wire format is the C implementation's (epfl-dcsl/r2p2). The behaviour
//! is better where the C code is weak; in short (details and reasons in
//! `docs/rpc.md`):
//!
//! * **retransmission**: the C code retransmits nothing. Our client sends
//!   REQ0 again on timeout and, once part of the reply is in, asks for the
//!   missing reply packets only (an ACK listing their indices); a server
//!   asked again answers with a REQRDY listing the REQn packets it lacks, or
//!   with the held reply;
//! * **reordering**: the C code drops a message on one packet out of order;
//!   we reassemble in any order;
//! * **at most once**: a server runs a request only if its identity is not
//!   held, and holds it with its reply for `reply_hold_ns` to answer
//!   duplicates;
//! * **identity**: the C client matches replies on port and id only and
//!   wraps its 16-bit ids freely; we use the full ⟨ip, port, rid⟩, accept
//!   replies only from the server that took the request, and quarantine ids
//!   after use;
//! * **bounded memory**: the C server never collects half-received requests
//!   and asserts when its pools are full; ours forgets them after a timeout
//!   and answers DROP when slots or buffered bytes run out;
//! * **malformed input** gets a typed error and a counter, never an assert.
//!
//! The first REQRDY is the C implementation's plain `ACK`, so a C client
//! works with our server, and a C server with our client (without
//! retransmission, as in C).
//!
//! ```
//! use std::net::{Ipv4Addr, SocketAddrV4};
//! use xlane_rpc::{Client, ClientConfig, Outcome, Server, ServerConfig};
//!
//! let (c_addr, s_addr) = (
//!     SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), 4000),
//!     SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 2), 8000),
//! );
//! let mut client = Client::new(ClientConfig::new(c_addr));
//! let mut server = Server::new(ServerConfig::default());
//! let mut buf = [0u8; xlane_rpc::wire::MAX_PACKET_LEN];
//!
//! let h = client.send_request(s_addr, b"ping", 0).unwrap();
//! while let Some(t) = client.poll_transmit(&mut buf) {
//!     server.handle_datagram(1, c_addr, &buf[..t.len]).unwrap();
//! }
//! let req = server.poll_event().unwrap();
//! assert_eq!(server.request(req.handle), Some(&b"ping"[..]));
//! server.respond(req.handle, b"pong", 2).unwrap();
//! while let Some(t) = server.poll_transmit(&mut buf) {
//!     assert_eq!(t.dst, c_addr);
//!     client.handle_datagram(3, s_addr, &buf[..t.len]).unwrap();
//! }
//! let done = client.poll_event().unwrap();
//! assert_eq!(done.outcome, Outcome::Reply);
//! assert_eq!(client.reply(h), Some(&b"pong"[..]));
//! client.release(h, 4);
//! ```
#![warn(missing_docs)]
#![forbid(unsafe_code)]

pub mod admission;
pub mod client;
mod reassembly;
pub mod router;
pub mod server;
pub mod udp;
pub mod wire;

pub use client::{Client, ClientConfig, Completion, Outcome, RequestHandle};
pub use reassembly::MsgError;
pub use server::{Incoming, Server, ServerConfig, ServerHandle};

use std::net::{Ipv4Addr, SocketAddrV4};

/// Nanoseconds on the caller's clock; every input that needs time takes one.
pub type Nanos = u64;

/// One packet a core built into the caller's buffer
/// ([`Client::poll_transmit`], [`Server::poll_transmit`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transmit {
    /// Where to send it.
    pub dst: SocketAddrV4,
    /// Send `buf[..len]`.
    pub len: usize,
}

/// The identity of one RPC: the client's address and port and the request id
/// it chose. Two requests are the same request exactly when all three match.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Identity {
    /// The client's IPv4 address (the request's source).
    pub ip: Ipv4Addr,
    /// The client's UDP port.
    pub port: u16,
    /// The request id.
    pub req_id: u16,
}

impl Identity {
    /// Request `req_id` of the client at `addr`.
    pub fn of(addr: SocketAddrV4, req_id: u16) -> Self {
        Identity {
            ip: *addr.ip(),
            port: addr.port(),
            req_id,
        }
    }
}
