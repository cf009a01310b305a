//! # xlane-rpc: R2P2 request-reply RPCs on the regular lane, sans I/O
//!
//! R2P2 (the Lancet R2P2 report, `001_…`, Fig. 2 and Fig. 3) carries every
//! RPC as a request-reply pair over UDP, identified by
//! ⟨client IP, client port, request id⟩ ([`Identity`]). This crate holds the
//! wire format ([`wire`]: the 8-byte header as a packet view) and, in later
//! modules, the sans-IO client and server cores.
//!
//! The wire format is the C implementation's (epfl-dcsl/r2p2): magic 0xCC,
//! header size 8, type and policy nibbles, F/L flags, a big-endian request id
//! and packet order. See `docs/rpc.md` for how this crate's behaviour differs
//! from the C implementation and why.
#![warn(missing_docs)]
#![forbid(unsafe_code)]

pub mod client;
mod reassembly;
pub mod server;
pub mod wire;

pub use client::{Client, ClientConfig, Completion, Outcome, RequestHandle};
pub use reassembly::MsgError;
pub use server::{Incoming, Server, ServerConfig, ServerHandle};

use std::net::Ipv4Addr;

/// Nanoseconds on the caller's clock; every input that needs time takes one.
pub type Nanos = u64;

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
