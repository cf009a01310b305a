//! Request/response formats the client speaks, and the synthetic protocol
//! the server parses. Parsers take untrusted bytes; they never panic, never
//! allocate, and look at a bounded number of bytes.
//!
//! - **echo**: the request is `--size` bytes, the first 8 of which carry the
//!   request id (big-endian); any server that sends the datagram (or the byte
//!   stream) back unchanged answers it.
//! - **sockperf**: the header of `sockperf` (version 3), so that its own
//!   `sockperf server` answers: sequence number (u64), flags (u16: 1 = from
//!   the client, 2 = reply wanted), message length (u32), all big-endian, in
//!   the first 14 bytes; the server clears the client flag and returns the
//!   message. The sequence number is our request id.
//! - **synthetic**: our own 32-byte header, below. The request asks the
//!   synthetic server for one unit of service; the reply carries the time
//!   the server held the request (its sojourn: queue plus service).
//!
//! Synthetic header (all fields big-endian):
//!
//! | bytes  | field                                                   |
//! |--------|---------------------------------------------------------|
//! | 0..8   | request id                                              |
//! | 8..12  | magic `LNCT`                                            |
//! | 12     | version (1)                                             |
//! | 13     | kind: 1 request, 2 response                             |
//! | 14..16 | reserved, zero                                          |
//! | 16..20 | total message length in bytes (32..=65507)              |
//! | 20..24 | reserved, zero                                          |
//! | 24..32 | response: server sojourn in ns; request: zero           |

use serde::Serialize;
use std::fmt;

/// Largest message (request or response) the tool sends or accepts: the
/// largest UDP payload over IPv4.
pub const MAX_MESSAGE_LEN: usize = 65_507;
/// Bytes of the request id at the start of every message.
pub const ID_LEN: usize = 8;
/// Length of the sockperf header.
pub const SOCKPERF_HEADER_LEN: usize = 14;
/// Length of the synthetic header (and of every synthetic response).
pub const SYN_HEADER_LEN: usize = 32;
/// Magic of the synthetic header.
pub const SYN_MAGIC: [u8; 4] = *b"LNCT";
/// Version of the synthetic header.
pub const SYN_VERSION: u8 = 1;

const SOCKPERF_FLAG_CLIENT: u16 = 1;
const SOCKPERF_FLAG_PONG_REQUEST: u16 = 2;

/// Why a message was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ProtoError {
    /// Fewer bytes than the format's header.
    #[error("message of {got} bytes is shorter than the {need}-byte header")]
    Short {
        /// Bytes present.
        got: usize,
        /// Bytes needed.
        need: usize,
    },
    /// The message length differs from the one announced or expected.
    #[error("message length {got} differs from the expected {expected}")]
    Length {
        /// Length seen.
        got: usize,
        /// Length announced or expected.
        expected: usize,
    },
    /// An announced length is outside the allowed range.
    #[error("announced length {0} is outside {min}..={MAX_MESSAGE_LEN}", min = SYN_HEADER_LEN)]
    BadLength(u32),
    /// Wrong magic bytes.
    #[error("bad magic")]
    Magic,
    /// Unknown version.
    #[error("unknown version {0}")]
    Version(u8),
    /// Unknown or unexpected kind.
    #[error("unexpected message kind {0}")]
    Kind(u8),
    /// A reserved field is not zero.
    #[error("reserved field not zero")]
    Reserved,
    /// A sockperf message without the server's reply flags.
    #[error("sockperf flags {0:#x} are not a server reply")]
    NotAReply(u16),
    /// The requested message size cannot carry the format's header.
    #[error("a {app} request needs at least {need} bytes, {got} requested")]
    SizeTooSmall {
        /// The protocol.
        app: App,
        /// Bytes needed.
        need: usize,
        /// Bytes requested.
        got: usize,
    },
    /// The requested message size is larger than [`MAX_MESSAGE_LEN`].
    #[error("message size {0} is larger than {MAX_MESSAGE_LEN}")]
    SizeTooLarge(usize),
}

/// The request/response protocol spoken by the client.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum App {
    /// The server echoes the request; the id is in the first 8 bytes.
    Echo,
    /// The synthetic server's protocol (32-byte header).
    Synthetic,
    /// sockperf's header, answered by `sockperf server`.
    Sockperf,
}

impl fmt::Display for App {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            App::Echo => "echo",
            App::Synthetic => "synthetic",
            App::Sockperf => "sockperf",
        })
    }
}

impl std::str::FromStr for App {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "echo" => Ok(App::Echo),
            "synthetic" => Ok(App::Synthetic),
            "sockperf" => Ok(App::Sockperf),
            _ => Err(format!(
                "unknown protocol {s:?}: expected echo, synthetic or sockperf"
            )),
        }
    }
}

/// What the client needs from a response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Response {
    /// The request id it answers.
    pub id: u64,
    /// The server's own sojourn time (synthetic protocol only), ns.
    pub server_ns: Option<u64>,
}

fn be_u64(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_be_bytes(a)
}

fn be_u32(b: &[u8], at: usize) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[at..at + 4]);
    u32::from_be_bytes(a)
}

fn be_u16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

impl App {
    /// Smallest request this protocol can send.
    pub fn min_len(self) -> usize {
        match self {
            App::Echo => ID_LEN,
            App::Synthetic => SYN_HEADER_LEN,
            App::Sockperf => SOCKPERF_HEADER_LEN,
        }
    }

    /// Check that requests of `size` bytes are possible.
    pub fn check_size(self, size: usize) -> Result<(), ProtoError> {
        if size < self.min_len() {
            return Err(ProtoError::SizeTooSmall {
                app: self,
                need: self.min_len(),
                got: size,
            });
        }
        if size > MAX_MESSAGE_LEN {
            return Err(ProtoError::SizeTooLarge(size));
        }
        Ok(())
    }

    /// Fill `buf` (the whole request, `buf.len()` bytes) as a template: the
    /// header with id 0 and a fixed filler. [`App::set_id`] then only has to
    /// write the id for each request.
    pub fn write_template(self, buf: &mut [u8]) -> Result<(), ProtoError> {
        self.check_size(buf.len())?;
        for (i, b) in buf.iter_mut().enumerate() {
            *b = (i % 251) as u8;
        }
        buf[..ID_LEN].fill(0);
        match self {
            App::Echo => {}
            App::Sockperf => {
                buf[8..10].copy_from_slice(
                    &(SOCKPERF_FLAG_CLIENT | SOCKPERF_FLAG_PONG_REQUEST).to_be_bytes(),
                );
                let len = buf.len() as u32;
                buf[10..14].copy_from_slice(&len.to_be_bytes());
            }
            App::Synthetic => {
                let len = buf.len() as u32;
                write_syn(&mut buf[..SYN_HEADER_LEN], 0, SynKind::Request, len, 0);
            }
        }
        Ok(())
    }

    /// Write the request id into a request made by [`App::write_template`].
    pub fn set_id(self, buf: &mut [u8], id: u64) {
        if let Some(b) = buf.get_mut(..ID_LEN) {
            b.copy_from_slice(&id.to_be_bytes());
        }
    }

    /// Parse one whole response (a datagram, or a message cut from a stream
    /// by [`App::frame_len`]). `request_len` is the size of the requests
    /// sent: an echo must have exactly that length.
    pub fn parse_response(self, msg: &[u8], request_len: usize) -> Result<Response, ProtoError> {
        match self {
            App::Echo => {
                if msg.len() < ID_LEN {
                    return Err(ProtoError::Short {
                        got: msg.len(),
                        need: ID_LEN,
                    });
                }
                if msg.len() != request_len {
                    return Err(ProtoError::Length {
                        got: msg.len(),
                        expected: request_len,
                    });
                }
                Ok(Response {
                    id: be_u64(msg, 0),
                    server_ns: None,
                })
            }
            App::Sockperf => {
                if msg.len() < SOCKPERF_HEADER_LEN {
                    return Err(ProtoError::Short {
                        got: msg.len(),
                        need: SOCKPERF_HEADER_LEN,
                    });
                }
                let flags = be_u16(msg, 8);
                if flags & SOCKPERF_FLAG_CLIENT != 0 {
                    return Err(ProtoError::NotAReply(flags));
                }
                let len = be_u32(msg, 10) as usize;
                if len != msg.len() {
                    return Err(ProtoError::Length {
                        got: msg.len(),
                        expected: len,
                    });
                }
                Ok(Response {
                    id: be_u64(msg, 0),
                    server_ns: None,
                })
            }
            App::Synthetic => {
                let h = parse_synthetic(msg)?;
                if h.kind != SynKind::Response {
                    return Err(ProtoError::Kind(h.kind as u8));
                }
                Ok(Response {
                    id: h.id,
                    server_ns: Some(h.sojourn_ns),
                })
            }
        }
    }

    /// The length a well-behaved server's response to a request of
    /// `request_len` bytes has: the request's own length (echo, sockperf) or
    /// the bare synthetic header.
    pub fn response_len(self, request_len: usize) -> usize {
        match self {
            App::Echo | App::Sockperf => request_len,
            App::Synthetic => SYN_HEADER_LEN,
        }
    }

    /// For a byte stream (TCP): the length of the response at the start of
    /// `stream`, `Ok(None)` if more bytes are needed to know or to have it
    /// whole. Never more than [`MAX_MESSAGE_LEN`].
    pub fn frame_len(self, stream: &[u8], request_len: usize) -> Result<Option<usize>, ProtoError> {
        if request_len > MAX_MESSAGE_LEN {
            return Err(ProtoError::SizeTooLarge(request_len));
        }
        let (need, len) = match self {
            App::Echo => {
                // An echo is as long as the request; a request shorter than
                // the id would frame empty messages forever.
                if request_len < ID_LEN {
                    return Err(ProtoError::SizeTooSmall {
                        app: self,
                        need: ID_LEN,
                        got: request_len,
                    });
                }
                (request_len, request_len)
            }
            App::Sockperf => {
                if stream.len() < SOCKPERF_HEADER_LEN {
                    return Ok(None);
                }
                let len = be_u32(stream, 10);
                if (len as usize) < SOCKPERF_HEADER_LEN || len as usize > MAX_MESSAGE_LEN {
                    return Err(ProtoError::BadLength(len));
                }
                (len as usize, len as usize)
            }
            App::Synthetic => {
                if stream.len() < SYN_HEADER_LEN {
                    return Ok(None);
                }
                let h = parse_syn_fields(&stream[..SYN_HEADER_LEN])?;
                (h.len as usize, h.len as usize)
            }
        };
        Ok((stream.len() >= need).then_some(len))
    }
}

/// Kind of a synthetic message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum SynKind {
    /// Client to server.
    Request = 1,
    /// Server to client.
    Response = 2,
}

/// A parsed synthetic header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SynHeader {
    /// Request id.
    pub id: u64,
    /// Request or response.
    pub kind: SynKind,
    /// Total message length announced.
    pub len: u32,
    /// Server sojourn (responses), ns.
    pub sojourn_ns: u64,
}

fn parse_syn_fields(h: &[u8]) -> Result<SynHeader, ProtoError> {
    if h.len() < SYN_HEADER_LEN {
        return Err(ProtoError::Short {
            got: h.len(),
            need: SYN_HEADER_LEN,
        });
    }
    if h[8..12] != SYN_MAGIC {
        return Err(ProtoError::Magic);
    }
    if h[12] != SYN_VERSION {
        return Err(ProtoError::Version(h[12]));
    }
    let kind = match h[13] {
        1 => SynKind::Request,
        2 => SynKind::Response,
        k => return Err(ProtoError::Kind(k)),
    };
    if h[14..16] != [0, 0] || h[20..24] != [0; 4] {
        return Err(ProtoError::Reserved);
    }
    let len = be_u32(h, 16);
    if (len as usize) < SYN_HEADER_LEN || len as usize > MAX_MESSAGE_LEN {
        return Err(ProtoError::BadLength(len));
    }
    let sojourn_ns = be_u64(h, 24);
    if kind == SynKind::Request && sojourn_ns != 0 {
        return Err(ProtoError::Reserved);
    }
    Ok(SynHeader {
        id: be_u64(h, 0),
        kind,
        len,
        sojourn_ns,
    })
}

/// Parse a whole synthetic message (datagram or framed): the header must be
/// valid and its length field must equal `msg.len()`.
pub fn parse_synthetic(msg: &[u8]) -> Result<SynHeader, ProtoError> {
    let h = parse_syn_fields(msg)?;
    if h.len as usize != msg.len() {
        return Err(ProtoError::Length {
            got: msg.len(),
            expected: h.len as usize,
        });
    }
    Ok(h)
}

/// Write a synthetic header into `out` (at least [`SYN_HEADER_LEN`] bytes;
/// shorter buffers are left untouched).
pub fn write_syn(out: &mut [u8], id: u64, kind: SynKind, len: u32, sojourn_ns: u64) {
    let Some(h) = out.get_mut(..SYN_HEADER_LEN) else {
        return;
    };
    h[0..8].copy_from_slice(&id.to_be_bytes());
    h[8..12].copy_from_slice(&SYN_MAGIC);
    h[12] = SYN_VERSION;
    h[13] = kind as u8;
    h[14..16].fill(0);
    h[16..20].copy_from_slice(&len.to_be_bytes());
    h[20..24].fill(0);
    h[24..32].copy_from_slice(&sojourn_ns.to_be_bytes());
}

/// The synthetic server's response to request `id`: a bare 32-byte header.
pub fn syn_response(id: u64, sojourn_ns: u64) -> [u8; SYN_HEADER_LEN] {
    let mut b = [0u8; SYN_HEADER_LEN];
    write_syn(
        &mut b,
        id,
        SynKind::Response,
        SYN_HEADER_LEN as u32,
        sojourn_ns,
    );
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(app: App, id: u64, size: usize) -> Vec<u8> {
        let mut b = vec![0u8; size];
        app.write_template(&mut b).unwrap();
        app.set_id(&mut b, id);
        b
    }

    #[test]
    fn sizes() {
        let table = [
            (App::Echo, 7, false),
            (App::Echo, 8, true),
            (App::Sockperf, 13, false),
            (App::Sockperf, 14, true),
            (App::Synthetic, 31, false),
            (App::Synthetic, 32, true),
            (App::Echo, MAX_MESSAGE_LEN, true),
            (App::Echo, MAX_MESSAGE_LEN + 1, false),
        ];
        for (app, size, ok) in table {
            assert_eq!(app.check_size(size).is_ok(), ok, "{app} {size}");
        }
    }

    #[test]
    fn echo_round_trip() {
        let req = request(App::Echo, 0x0102_0304_0506_0708, 64);
        assert_eq!(&req[..8], &[1, 2, 3, 4, 5, 6, 7, 8]);
        let r = App::Echo.parse_response(&req, 64).unwrap();
        assert_eq!(r.id, 0x0102_0304_0506_0708);
        assert!(matches!(
            App::Echo.parse_response(&req[..63], 64),
            Err(ProtoError::Length { .. })
        ));
        assert!(matches!(
            App::Echo.parse_response(&req[..3], 3),
            Err(ProtoError::Short { .. })
        ));
    }

    #[test]
    fn sockperf_header_matches_sockperf() {
        // What sockperf 3.7 sends for message 1 of 64 bytes, and what its
        // server returns (captured on loopback, first 14 bytes).
        let req = request(App::Sockperf, 1, 64);
        assert_eq!(&req[..14], &[0, 0, 0, 0, 0, 0, 0, 1, 0, 3, 0, 0, 0, 0x40]);
        let mut reply = req.clone();
        reply[9] = 2;
        assert_eq!(App::Sockperf.parse_response(&reply, 64).unwrap().id, 1);
        assert_eq!(
            App::Sockperf.parse_response(&req, 64),
            Err(ProtoError::NotAReply(3))
        );
        assert!(App::Sockperf.parse_response(&reply[..40], 64).is_err());
    }

    #[test]
    fn synthetic_round_trip_and_refusals() {
        let req = request(App::Synthetic, 42, 100);
        let h = parse_synthetic(&req).unwrap();
        assert_eq!(
            (h.id, h.kind, h.len, h.sojourn_ns),
            (42, SynKind::Request, 100, 0)
        );
        let resp = syn_response(42, 12345);
        let r = App::Synthetic.parse_response(&resp, 100).unwrap();
        assert_eq!(
            r,
            Response {
                id: 42,
                server_ns: Some(12345)
            }
        );
        // A request is not a response.
        assert_eq!(
            App::Synthetic.parse_response(&req, 100),
            Err(ProtoError::Kind(1))
        );
        let mutate = |at: usize, v: u8| {
            let mut b = resp;
            b[at] = v;
            parse_synthetic(&b)
        };
        assert_eq!(mutate(8, b'X'), Err(ProtoError::Magic));
        assert_eq!(mutate(12, 9), Err(ProtoError::Version(9)));
        assert_eq!(mutate(13, 7), Err(ProtoError::Kind(7)));
        assert_eq!(mutate(15, 1), Err(ProtoError::Reserved));
        assert_eq!(mutate(21, 1), Err(ProtoError::Reserved));
        assert_eq!(mutate(19, 31), Err(ProtoError::BadLength(31)));
        assert!(matches!(mutate(19, 33), Err(ProtoError::Length { .. })));
        assert_eq!(mutate(16, 0xff), Err(ProtoError::BadLength(0xff00_0020)));
    }

    #[test]
    fn framing_a_stream() {
        let mut stream = Vec::new();
        stream.extend_from_slice(&syn_response(1, 10));
        stream.extend_from_slice(&syn_response(2, 20));
        let mut at = 0;
        let mut ids = Vec::new();
        while let Some(n) = App::Synthetic.frame_len(&stream[at..], 64).unwrap() {
            ids.push(
                App::Synthetic
                    .parse_response(&stream[at..at + n], 64)
                    .unwrap()
                    .id,
            );
            at += n;
        }
        assert_eq!(ids, vec![1, 2]);
        for (app, want) in [
            (App::Echo, 100),
            (App::Sockperf, 100),
            (App::Synthetic, SYN_HEADER_LEN),
        ] {
            assert_eq!(app.response_len(100), want, "{app}");
        }
        assert_eq!(App::Synthetic.frame_len(&stream[..31], 64), Ok(None));
        assert_eq!(App::Echo.frame_len(&stream[..63], 64), Ok(None));
        assert_eq!(App::Echo.frame_len(&stream, 64), Ok(Some(64)));
        assert!(App::Echo.frame_len(&stream, 0).is_err());
        assert!(App::Echo.frame_len(&stream, MAX_MESSAGE_LEN + 1).is_err());
        let sp = request(App::Sockperf, 5, 20);
        assert_eq!(App::Sockperf.frame_len(&sp[..13], 20), Ok(None));
        assert_eq!(App::Sockperf.frame_len(&sp, 20), Ok(Some(20)));
        let mut bad = sp.clone();
        bad[10..14].copy_from_slice(&3u32.to_be_bytes());
        assert_eq!(
            App::Sockperf.frame_len(&bad, 20),
            Err(ProtoError::BadLength(3))
        );
    }
}
