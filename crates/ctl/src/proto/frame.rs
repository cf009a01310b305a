//! Framing: finding frames in a byte stream ([`split_frame`],
//! [`FrameBuffer`]), writing one, and the [`Message`] trait with each
//! message kind's number.

use super::codec::Writer;
use super::msg::*;

/// A complete frame found at the start of a buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawFrame<'a> {
    /// Message kind.
    pub kind: u8,
    /// Body (after version and kind).
    pub body: &'a [u8],
    /// Bytes of the buffer the frame takes, header included.
    pub len: usize,
}

/// Look for one frame at the start of `buf`. `Ok(None)`: more bytes are
/// needed. Errors as soon as the header shows the frame cannot be valid
/// (too long, too short, bad version), without waiting for the body.
pub fn split_frame(buf: &[u8]) -> Result<Option<RawFrame<'_>>, ProtoError> {
    let Some(hdr) = buf.get(..HEADER_LEN) else {
        return Ok(None);
    };
    let len = u32::from_be_bytes([hdr[0], hdr[1], hdr[2], hdr[3]]) as usize;
    if len > MAX_FRAME {
        return Err(ProtoError::TooLong {
            len,
            max: MAX_FRAME,
        });
    }
    if len < 2 {
        return Err(ProtoError::TooShort(len));
    }
    if let Some(&v) = buf.get(HEADER_LEN) {
        if v != VERSION {
            return Err(ProtoError::BadVersion(v));
        }
    }
    let Some(frame) = buf.get(HEADER_LEN..HEADER_LEN + len) else {
        return Ok(None);
    };
    Ok(Some(RawFrame {
        kind: frame[1],
        body: &frame[2..],
        len: HEADER_LEN + len,
    }))
}

pub(super) fn frame(
    kind: u8,
    out: &mut Vec<u8>,
    body: impl FnOnce(&mut Writer<'_>) -> Result<(), EncodeError>,
) -> Result<(), EncodeError> {
    let start = out.len();
    out.extend_from_slice(&[0, 0, 0, 0, VERSION, kind]);
    let r = body(&mut Writer { out });
    let len = out.len() - start - HEADER_LEN;
    if r.is_err() || len > MAX_FRAME {
        out.truncate(start);
        return r.and(Err(EncodeError::TooLong { field: "frame" }));
    }
    out[start..start + HEADER_LEN].copy_from_slice(&(len as u32).to_be_bytes());
    Ok(())
}

/// A message type of one direction of the protocol.
pub trait Message: Sized {
    /// Append the message as one frame to `out` (unchanged on error).
    fn encode(&self, out: &mut Vec<u8>) -> Result<(), EncodeError>;
    /// Decode one complete frame from the start of `buf`; returns the
    /// message and the bytes consumed. `Truncated` if `buf` ends first.
    fn decode(buf: &[u8]) -> Result<(Self, usize), ProtoError>;
    /// The message as a new frame.
    fn to_frame(&self) -> Result<Vec<u8>, EncodeError> {
        let mut v = Vec::new();
        self.encode(&mut v)?;
        Ok(v)
    }
}

pub(super) mod kind {
    pub const HELLO: u8 = 0x01;
    pub const AUTH: u8 = 0x02;
    pub const REQUEST: u8 = 0x03;
    pub const RELEASE: u8 = 0x04;
    pub const CHANGE: u8 = 0x05;
    pub const METERS: u8 = 0x06;
    pub const RECONCILE: u8 = 0x07;
    pub const LIST: u8 = 0x08;
    pub const SUBSCRIBE: u8 = 0x09;
    pub const TUNNEL_KEY: u8 = 0x0a;
    pub const TAGGED: u8 = 0x0b;

    pub const CHALLENGE: u8 = 0x81;
    pub const AUTH_OK: u8 = 0x82;
    pub const GRANTED: u8 = 0x83;
    pub const REFUSED: u8 = 0x84;
    pub const RELEASED: u8 = 0x85;
    pub const CHANGED: u8 = 0x86;
    pub const TUNNELS: u8 = 0x87;
    pub const RECONCILED: u8 = 0x88;
    pub const ACK: u8 = 0x89;
    pub const BW_CHANGED: u8 = 0x8a;
    pub const BW_TERMINATED: u8 = 0x8b;
    pub const KEY: u8 = 0x8c;
    pub const SUBSCRIBED: u8 = 0x8d;
}

/// Accumulates bytes from a stream and cuts them into frames (sans-IO: the
/// caller does the reading). Never holds more than one frame plus what was
/// pushed at once.
#[derive(Debug, Default)]
pub struct FrameBuffer {
    buf: Vec<u8>,
}

impl FrameBuffer {
    /// An empty buffer.
    pub fn new() -> FrameBuffer {
        FrameBuffer::default()
    }

    /// Append received bytes.
    pub fn push(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// Bytes buffered and not yet returned as a frame.
    pub fn pending(&self) -> usize {
        self.buf.len()
    }

    /// The next complete frame (header included), if any. An error means
    /// the stream cannot be resynchronized: close it.
    pub fn next_frame(&mut self) -> Result<Option<Vec<u8>>, ProtoError> {
        match split_frame(&self.buf)? {
            None => Ok(None),
            Some(f) => {
                let n = f.len;
                let rest = self.buf.split_off(n);
                Ok(Some(std::mem::replace(&mut self.buf, rest)))
            }
        }
    }
}
