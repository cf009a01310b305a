//! The controller's wire protocol: framed binary messages over a byte
//! stream (TCP).
//!
//! # Framing
//!
//! ```text
//! +----------------+-----------+--------+------------------+
//! | length: u32 BE | version u8| kind u8| body             |
//! +----------------+-----------+--------+------------------+
//!                  \______ length bytes (2 ..= MAX_FRAME) __/
//! ```
//!
//! `length` counts everything after itself; it is at most [`MAX_FRAME`]
//! (64 KiB), so a reader never buffers more than that for one frame and can
//! reject an oversized frame from its first four bytes. `version` is
//! [`VERSION`]. Kinds `0x01..=0x7f` go from client to controller
//! ([`ClientMsg`]), kinds `0x81..=0xff` from controller to client
//! ([`ServerMsg`]).
//!
//! # Body encoding
//!
//! Integers are big-endian and fixed width; `bool` is one byte, 0 or 1;
//! strings are a `u16` byte length then UTF-8 (host names at most
//! [`MAX_NAME`] bytes, messages at most [`MAX_MESSAGE`]); lists are a `u16`
//! count then the items; nonces and MACs are 32 raw bytes; enums are one
//! byte (`u16` for [`RefusalCode`]). Every value has exactly one encoding,
//! so `encode(decode(b)) == b` for every `b` that decodes; the fuzz target
//! `ctl_proto` checks exactly that.
//!
//! Every decode failure is a typed [`ProtoError`]; the encoder refuses
//! ([`EncodeError`]) anything the decoder would refuse, so what one side
//! sends the other side accepts.
//!
//! # Conversation
//!
//! ```text
//! client                         controller
//! Hello{host, client_nonce}  ->
//!                            <-  Challenge{server_nonce}
//! Auth{mac}                  ->                    (see crate::auth)
//!                            <-  AuthOk | Refused{Unauthenticated} + close
//! RequestBandwidth{..}       ->
//!                            <-  Granted | Refused
//! TunnelKey{tunnel}          ->                    (its sender or a receiver)
//!                            <-  Key{tunnel, key} | Refused
//! Tagged{request_id, msg}    ->                    (answered at most once)
//!                            <-  msg's reply, or the first one again
//! Subscribe{after}           ->
//!                            <-  Upcall{seq > after, ..} ...  (a replica's replay)
//!                            <-  Subscribed{seq}
//!                            <-  Upcall{seq, BandwidthChanged | BandwidthTerminated}  (any time)
//! ```
//!
//! Each request gets exactly one reply, in order; upcalls may arrive between
//! them once the connection has subscribed. A frame that does not decode is
//! answered by `Refused{Malformed}` and the connection is closed.

mod codec;
mod frame;
mod msg;
mod wire;

pub(crate) use codec::{Reader, Writer};
pub use frame::{split_frame, FrameBuffer, Message, RawFrame};
pub use msg::*;

#[cfg(test)]
mod tests;
