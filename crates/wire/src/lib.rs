//! # xlane-wire: the lane frame, sans I/O
//!
//! Codecs only: no sockets, no clock, no allocation on the parse/emit paths.
//!
//! A lane frame is one UDP payload that fits a 1500-byte MTU (≤ [`MAX_FRAME_LEN`] =
//! 1472 bytes): a 32-byte header followed by `chunk_count` fixed-size chunks. Many
//! small messages of several producers share one frame; every chunk carries its own
//! CRC, so a bit flip loses one chunk, not the frame (X-Lane paper §4.1).
//!
//! ## Schemata
//!
//! | schema | chunk | user bytes per chunk | max chunks | max frame |
//! |---|---|---|---|---|
//! | [`Schema::Chunk26`] | 26 B | 20 | 55 | 32 + 55·26 = 1462 B |
//! | [`Schema::Chunk36`] | 36 B | 30 | 40 | 32 + 40·36 = 1472 B |
//!
//! ## Header (32 bytes, big-endian; offsets in [`field`])
//!
//! ```text
//!  0      2   3   4   5   6      8          12                  20                  28       32
//!  +------+---+---+---+---+------+----------+-------------------+-------------------+--------+
//!  |magic |ver|sch|cnt|flg| rsvd |  tunnel  |        seq        |   send_time_ns    | hdrCRC |
//!  | "XL" | 1 |1/2|   |   | 0 0  |   u32    |        u64        |        u64        |  u32   |
//!  +------+---+---+---+---+------+----------+-------------------+-------------------+--------+
//! ```
//!
//! * `magic` = `"XL"` (0x58 0x4C), `ver` = [`VERSION`], `sch` = schema id
//!   (1 = [`Schema::Chunk26`], 2 = [`Schema::Chunk36`]), `cnt` = number of chunks,
//!   `flg` = [`flags`], `rsvd` written as zero and ignored on receive (covered by
//!   the header CRC).
//! * `hdrCRC` = CRC-32/AUTOSAR over bytes 0..28 (HD = 8 at this length).
//! * The frame is exactly `32 + cnt · chunk_len` bytes long; anything else is
//!   rejected ([`FrameError::LengthMismatch`]).
//!
//! ## Chunk (`chunk_len` bytes)
//!
//! ```text
//!  0          1        2                         chunk_len-4      chunk_len
//!  +----------+--------+-------------------------+----------------+
//!  | producer | length | data, zero-padded       |   chunk CRC    |
//!  +----------+--------+-------------------------+----------------+
//! ```
//!
//! `data_capacity = chunk_len - 2 - 4`. The CRC (big-endian) covers producer, length
//! and the padded data. The polynomial is chosen per chunk length, by exhaustive
//! Hamming-distance computation ([`crc_choice`]): CRC-32C for 26-byte chunks and
//! CRC-32/AUTOSAR for 36-byte chunks, both with HD = 8 (every error of up to 7 bits
//! in a chunk is detected). A chunk whose CRC, length or padding is bad is reported
//! on its own ([`ChunkError`]); the other chunks of the frame are still delivered.
//!
//! Under `cfg(fuzzing)` all CRC checks are skipped, so a fuzzer reaches the code
//! behind them.
//!
//! ## Use
//!
//! ```
//! use xlane_wire::{Frame, FrameBuilder, Schema, MAX_FRAME_LEN};
//! let mut buf = [0u8; MAX_FRAME_LEN];
//! let mut b = FrameBuilder::new(&mut buf, Schema::Chunk26).unwrap();
//! b.push_chunk(7, b"hello").unwrap();
//! let len = b.finish(42, 1, 1_000, 0).unwrap();
//! let frame = Frame::new_checked(&buf[..len]).unwrap();
//! assert_eq!(frame.header().tunnel, 42);
//! let c = frame.chunks().next().unwrap().unwrap();
//! assert_eq!((c.producer, c.data), (7, &b"hello"[..]));
//! ```
#![warn(missing_docs)]
#![forbid(unsafe_code)]

pub mod crc_choice;

use crc::{Crc, CRC_32_AUTOSAR, CRC_32_ISCSI};

/// Length of the frame header in bytes.
pub const HEADER_LEN: usize = 32;
/// Largest frame: the UDP payload of a 1500-byte MTU (1500 − 20 IPv4 − 8 UDP).
pub const MAX_FRAME_LEN: usize = 1472;
/// Wire format version written and accepted.
pub const VERSION: u8 = 1;
/// The two magic bytes at the start of every frame ("XL").
pub const MAGIC: [u8; 2] = *b"XL";
/// Bytes of CRC at the end of every chunk.
pub const CHUNK_CRC_LEN: usize = 4;
/// Bytes of a chunk that are not user data (producer, length, CRC).
pub const CHUNK_OVERHEAD: usize = 2 + CHUNK_CRC_LEN;

/// Byte offsets of the header fields and of the fields inside a chunk.
pub mod field {
    /// A byte range inside the header or a chunk.
    pub type Field = core::ops::Range<usize>;
    /// Magic bytes `"XL"`.
    pub const MAGIC: Field = 0..2;
    /// Format version.
    pub const VERSION: usize = 2;
    /// Schema id (1 = 26-byte chunks, 2 = 36-byte chunks).
    pub const SCHEMA: usize = 3;
    /// Number of chunks that follow the header.
    pub const CHUNK_COUNT: usize = 4;
    /// Flag bits ([`crate::flags`]).
    pub const FLAGS: usize = 5;
    /// Reserved, written as zero.
    pub const RESERVED: Field = 6..8;
    /// Tunnel id (u32).
    pub const TUNNEL: Field = 8..12;
    /// Sequence number (u64).
    pub const SEQ: Field = 12..20;
    /// Send time in nanoseconds (u64), stamped right before the send syscall.
    pub const SEND_TIME: Field = 20..28;
    /// CRC over bytes `0..28` of the header (u32).
    pub const HEADER_CRC: Field = 28..32;
    /// Bytes covered by the header CRC.
    pub const HEADER_CRC_COVERS: Field = 0..28;
    /// Offset of the first chunk.
    pub const CHUNKS: usize = 32;
    /// In a chunk: producer id.
    pub const CHUNK_PRODUCER: usize = 0;
    /// In a chunk: number of valid data bytes.
    pub const CHUNK_LENGTH: usize = 1;
    /// In a chunk: first data byte.
    pub const CHUNK_DATA: usize = 2;
}

/// Header flag bits.
pub mod flags {
    /// The frame is a heartbeat: sent in its slot although no chunk was pending.
    pub const HEARTBEAT: u8 = 0x01;
}

/// CRC engines (table-driven, 1 KiB table each, built at compile time).
static CRC_CHUNK26: Crc<u32> = Crc::<u32>::new(&CRC_32_ISCSI);
static CRC_CHUNK36: Crc<u32> = Crc::<u32>::new(&CRC_32_AUTOSAR);
static CRC_HEADER: Crc<u32> = Crc::<u32>::new(&CRC_32_AUTOSAR);

/// `true` if a received CRC is to be accepted. Always under `cfg(fuzzing)`.
#[inline]
fn crc_matches(received: u32, computed: u32) -> bool {
    cfg!(fuzzing) || received == computed
}

#[inline]
fn be32(b: &[u8], at: usize) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[at..at + 4]);
    u32::from_be_bytes(a)
}

#[inline]
fn be64(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_be_bytes(a)
}

/// The chunk layout of a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Schema {
    /// 26-byte chunks, 20 user bytes each, up to 55 per frame.
    Chunk26,
    /// 36-byte chunks, 30 user bytes each, up to 40 per frame.
    Chunk36,
}

/// A schema id that this version does not know.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown schema id {0}")]
pub struct UnknownSchema(pub u8);

impl Schema {
    /// Bytes per chunk, including producer, length and CRC.
    pub const fn chunk_len(self) -> usize {
        match self {
            Schema::Chunk26 => 26,
            Schema::Chunk36 => 36,
        }
    }

    /// User bytes one chunk can carry.
    pub const fn data_capacity(self) -> usize {
        self.chunk_len() - CHUNK_OVERHEAD
    }

    /// Most chunks a frame of this schema may carry (fits [`MAX_FRAME_LEN`]).
    pub const fn max_chunks(self) -> usize {
        (MAX_FRAME_LEN - HEADER_LEN) / self.chunk_len()
    }

    /// Length of a frame with `chunks` chunks (not checked against [`Self::max_chunks`]).
    pub const fn frame_len(self, chunks: usize) -> usize {
        HEADER_LEN + chunks * self.chunk_len()
    }

    /// Most chunks that fit a frame of at most `max_frame` bytes (and the schema limit).
    pub const fn chunks_within(self, max_frame: usize) -> usize {
        if max_frame < HEADER_LEN {
            return 0;
        }
        let n = (max_frame - HEADER_LEN) / self.chunk_len();
        if n < self.max_chunks() {
            n
        } else {
            self.max_chunks()
        }
    }

    /// The id written in the header.
    pub const fn as_u8(self) -> u8 {
        match self {
            Schema::Chunk26 => 1,
            Schema::Chunk36 => 2,
        }
    }

    /// The schema with header id `v`.
    pub fn from_u8(v: u8) -> Result<Self, UnknownSchema> {
        match v {
            1 => Ok(Schema::Chunk26),
            2 => Ok(Schema::Chunk36),
            other => Err(UnknownSchema(other)),
        }
    }

    #[inline]
    fn chunk_crc(self, covered: &[u8]) -> u32 {
        match self {
            Schema::Chunk26 => CRC_CHUNK26.checksum(covered),
            Schema::Chunk36 => CRC_CHUNK36.checksum(covered),
        }
    }
}

/// The decoded header of a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameHeader {
    /// Chunk layout.
    pub schema: Schema,
    /// Tunnel id.
    pub tunnel: u32,
    /// Sequence number (one per frame, per tunnel).
    pub seq: u64,
    /// Send time in nanoseconds on the sender's clock.
    pub send_time_ns: u64,
    /// Number of chunks after the header.
    pub chunk_count: u8,
    /// Flag bits ([`flags`]).
    pub flags: u8,
}

impl FrameHeader {
    /// Length of the frame this header describes.
    pub const fn frame_len(&self) -> usize {
        self.schema.frame_len(self.chunk_count as usize)
    }
}

/// Why a datagram is not a lane frame. The whole datagram is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// Shorter than the header.
    #[error("datagram of {len} bytes is shorter than the {HEADER_LEN}-byte header")]
    Truncated {
        /// Bytes received.
        len: usize,
    },
    /// The first two bytes are not `"XL"`.
    #[error("bad magic")]
    BadMagic,
    /// Unknown format version.
    #[error("unsupported version {0}")]
    BadVersion(u8),
    /// Unknown schema id.
    #[error("unknown schema id {0}")]
    BadSchema(u8),
    /// The header CRC does not match: the header was corrupted.
    #[error("header CRC mismatch")]
    HeaderCrc,
    /// More chunks than the schema allows.
    #[error("{count} chunks, at most {max} allowed")]
    TooManyChunks {
        /// Chunk count in the header.
        count: usize,
        /// Schema limit.
        max: usize,
    },
    /// The datagram length differs from the length the header announces.
    #[error("frame announces {expected} bytes, datagram has {actual}")]
    LengthMismatch {
        /// `32 + chunk_count · chunk_len`.
        expected: usize,
        /// Bytes received.
        actual: usize,
    },
}

/// Why one chunk of an otherwise valid frame is refused. Only this chunk is lost.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ChunkError {
    /// The chunk CRC does not match: the chunk was corrupted.
    #[error("chunk CRC mismatch")]
    Crc,
    /// The length byte exceeds the chunk's data capacity.
    #[error("chunk length {len} exceeds capacity {max}")]
    BadLength {
        /// Length byte.
        len: usize,
        /// Capacity of the schema.
        max: usize,
    },
    /// Padding after the data is not zero.
    #[error("nonzero chunk padding")]
    BadPadding,
    /// The slice handed to [`parse_chunk`] is not one chunk long.
    #[error("chunk slice of {len} bytes, expected {expected}")]
    WrongSize {
        /// Bytes given.
        len: usize,
        /// `chunk_len` of the schema.
        expected: usize,
    },
}

/// Why a frame cannot be built.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EmitError {
    /// The buffer cannot even hold the header.
    #[error("buffer of {have} bytes, need at least {need}")]
    BufferTooSmall {
        /// Bytes needed.
        need: usize,
        /// Bytes available.
        have: usize,
    },
    /// No room for another chunk (schema limit or end of the buffer).
    #[error("frame full")]
    Full,
    /// The data is longer than one chunk carries.
    #[error("{len} data bytes, a chunk carries at most {max}")]
    DataTooLong {
        /// Bytes offered.
        len: usize,
        /// Data capacity of the schema.
        max: usize,
    },
}

/// Builds a frame in a caller-supplied buffer, chunk by chunk; never allocates.
///
/// Call order: [`FrameBuilder::new`], any number of [`FrameBuilder::push_chunk`],
/// then [`FrameBuilder::finish`], which writes the header. The frame is the first
/// `finish()` bytes of the buffer. To cap a frame at σ bytes, hand in
/// `&mut buf[..σ]`: `push_chunk` then says [`EmitError::Full`] at σ.
#[derive(Debug)]
pub struct FrameBuilder<'a> {
    buf: &'a mut [u8],
    schema: Schema,
    count: usize,
    limit: usize,
}

impl<'a> FrameBuilder<'a> {
    /// Starts a frame of `schema` in `buf` (at least [`HEADER_LEN`] bytes).
    pub fn new(buf: &'a mut [u8], schema: Schema) -> Result<Self, EmitError> {
        if buf.len() < HEADER_LEN {
            return Err(EmitError::BufferTooSmall {
                need: HEADER_LEN,
                have: buf.len(),
            });
        }
        let limit = schema.chunks_within(buf.len());
        Ok(FrameBuilder {
            buf,
            schema,
            count: 0,
            limit,
        })
    }

    /// Appends one chunk. Bounded work: one chunk copy and one CRC over
    /// `chunk_len − 4` bytes; no allocation.
    pub fn push_chunk(&mut self, producer: u8, data: &[u8]) -> Result<(), EmitError> {
        let cap = self.schema.data_capacity();
        if data.len() > cap {
            return Err(EmitError::DataTooLong {
                len: data.len(),
                max: cap,
            });
        }
        if self.count >= self.limit {
            return Err(EmitError::Full);
        }
        let clen = self.schema.chunk_len();
        let start = HEADER_LEN + self.count * clen;
        let chunk = &mut self.buf[start..start + clen];
        chunk[field::CHUNK_PRODUCER] = producer;
        // data.len() <= cap <= 30, so it fits a byte.
        chunk[field::CHUNK_LENGTH] = data.len() as u8;
        let (body, crc) = chunk.split_at_mut(clen - CHUNK_CRC_LEN);
        let (d, pad) = body[field::CHUNK_DATA..].split_at_mut(data.len());
        d.copy_from_slice(data);
        pad.fill(0);
        crc.copy_from_slice(&self.schema.chunk_crc(body).to_be_bytes());
        self.count += 1;
        Ok(())
    }

    /// Chunks pushed so far.
    pub fn chunks(&self) -> usize {
        self.count
    }

    /// More chunks that still fit.
    pub fn remaining(&self) -> usize {
        self.limit - self.count
    }

    /// Writes the header and returns the frame length.
    pub fn finish(
        self,
        tunnel: u32,
        seq: u64,
        send_time_ns: u64,
        flags: u8,
    ) -> Result<usize, EmitError> {
        let h = &mut self.buf[..HEADER_LEN];
        h[field::MAGIC].copy_from_slice(&MAGIC);
        h[field::VERSION] = VERSION;
        h[field::SCHEMA] = self.schema.as_u8();
        // count <= max_chunks <= 55.
        h[field::CHUNK_COUNT] = self.count as u8;
        h[field::FLAGS] = flags;
        h[field::RESERVED].fill(0);
        h[field::TUNNEL].copy_from_slice(&tunnel.to_be_bytes());
        h[field::SEQ].copy_from_slice(&seq.to_be_bytes());
        h[field::SEND_TIME].copy_from_slice(&send_time_ns.to_be_bytes());
        write_header_crc(h);
        Ok(self.schema.frame_len(self.count))
    }
}

fn header_crc(h: &[u8]) -> u32 {
    CRC_HEADER.checksum(&h[field::HEADER_CRC_COVERS])
}

fn write_header_crc(h: &mut [u8]) {
    let c = header_crc(h);
    h[field::HEADER_CRC].copy_from_slice(&c.to_be_bytes());
}

/// Rewrites the send timestamp of a built frame in place and updates the header
/// CRC (the runtime stamps right before `sendmsg`). Checks the magic and the old
/// header CRC first, so a corrupted buffer is not made valid. Bounded work: two CRCs
/// over 28 bytes; no allocation.
pub fn stamp_send_time(frame: &mut [u8], send_time_ns: u64) -> Result<(), FrameError> {
    if frame.len() < HEADER_LEN {
        return Err(FrameError::Truncated { len: frame.len() });
    }
    let h = &mut frame[..HEADER_LEN];
    if h[field::MAGIC] != MAGIC {
        return Err(FrameError::BadMagic);
    }
    if !crc_matches(be32(h, field::HEADER_CRC.start), header_crc(h)) {
        return Err(FrameError::HeaderCrc);
    }
    h[field::SEND_TIME].copy_from_slice(&send_time_ns.to_be_bytes());
    write_header_crc(h);
    Ok(())
}

/// A received frame whose header was validated once; its accessors never panic.
///
/// Chunks are checked one by one while iterating ([`Frame::chunks`]), so one
/// corrupted chunk does not cost the others.
#[derive(Clone, Copy, Debug)]
pub struct Frame<'a> {
    bytes: &'a [u8],
    header: FrameHeader,
}

impl<'a> Frame<'a> {
    /// Validates magic, header CRC, version, schema, chunk count and exact length.
    /// Bounded work (one CRC over 28 bytes); no allocation.
    pub fn new_checked(bytes: &'a [u8]) -> Result<Self, FrameError> {
        if bytes.len() < HEADER_LEN {
            return Err(FrameError::Truncated { len: bytes.len() });
        }
        let h = &bytes[..HEADER_LEN];
        if h[field::MAGIC] != MAGIC {
            return Err(FrameError::BadMagic);
        }
        if !crc_matches(be32(h, field::HEADER_CRC.start), header_crc(h)) {
            return Err(FrameError::HeaderCrc);
        }
        if h[field::VERSION] != VERSION {
            return Err(FrameError::BadVersion(h[field::VERSION]));
        }
        let schema = Schema::from_u8(h[field::SCHEMA])
            .map_err(|UnknownSchema(v)| FrameError::BadSchema(v))?;
        let count = h[field::CHUNK_COUNT] as usize;
        if count > schema.max_chunks() {
            return Err(FrameError::TooManyChunks {
                count,
                max: schema.max_chunks(),
            });
        }
        let expected = schema.frame_len(count);
        if bytes.len() != expected {
            return Err(FrameError::LengthMismatch {
                expected,
                actual: bytes.len(),
            });
        }
        let header = FrameHeader {
            schema,
            tunnel: be32(h, field::TUNNEL.start),
            seq: be64(h, field::SEQ.start),
            send_time_ns: be64(h, field::SEND_TIME.start),
            chunk_count: h[field::CHUNK_COUNT],
            flags: h[field::FLAGS],
        };
        Ok(Frame { bytes, header })
    }

    /// The decoded header.
    pub fn header(&self) -> FrameHeader {
        self.header
    }

    /// The chunks, each validated when reached (CRC, length, padding).
    pub fn chunks(&self) -> Chunks<'a> {
        Chunks {
            schema: self.header.schema,
            rest: &self.bytes[HEADER_LEN..],
        }
    }

    /// Frame length in bytes.
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// `true` if the frame carries no chunk (a heartbeat or an empty slot).
    pub fn is_empty(&self) -> bool {
        self.header.chunk_count == 0
    }

    /// The frame bytes.
    pub fn as_bytes(&self) -> &'a [u8] {
        self.bytes
    }
}

/// One chunk's content.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChunkView<'a> {
    /// Producer id (which application/bridge slot wrote it).
    pub producer: u8,
    /// The user bytes (padding removed).
    pub data: &'a [u8],
}

/// Validates one chunk of `schema` (exactly `chunk_len` bytes): CRC, length byte,
/// zero padding. No allocation.
pub fn parse_chunk(schema: Schema, chunk: &[u8]) -> Result<ChunkView<'_>, ChunkError> {
    let clen = schema.chunk_len();
    if chunk.len() != clen {
        return Err(ChunkError::WrongSize {
            len: chunk.len(),
            expected: clen,
        });
    }
    let (body, crc) = chunk.split_at(clen - CHUNK_CRC_LEN);
    if !crc_matches(be32(crc, 0), schema.chunk_crc(body)) {
        return Err(ChunkError::Crc);
    }
    let len = body[field::CHUNK_LENGTH] as usize;
    let max = schema.data_capacity();
    if len > max {
        return Err(ChunkError::BadLength { len, max });
    }
    let (data, pad) = body[field::CHUNK_DATA..].split_at(len);
    if pad.iter().any(|&b| b != 0) {
        return Err(ChunkError::BadPadding);
    }
    Ok(ChunkView {
        producer: body[field::CHUNK_PRODUCER],
        data,
    })
}

/// Iterator over the chunks of a [`Frame`]: one `Result` per chunk slot.
#[derive(Clone, Debug)]
pub struct Chunks<'a> {
    schema: Schema,
    rest: &'a [u8],
}

impl<'a> Iterator for Chunks<'a> {
    type Item = Result<ChunkView<'a>, ChunkError>;

    fn next(&mut self) -> Option<Self::Item> {
        let clen = self.schema.chunk_len();
        if self.rest.len() < clen {
            return None;
        }
        let (chunk, rest) = self.rest.split_at(clen);
        self.rest = rest;
        Some(parse_chunk(self.schema, chunk))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.rest.len() / self.schema.chunk_len();
        (n, Some(n))
    }
}

impl ExactSizeIterator for Chunks<'_> {}
impl core::iter::FusedIterator for Chunks<'_> {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schema_numbers_match_the_paper() {
        assert_eq!(Schema::Chunk26.max_chunks(), 55);
        assert_eq!(Schema::Chunk36.max_chunks(), 40);
        assert_eq!(Schema::Chunk26.frame_len(55), 1462);
        assert_eq!(Schema::Chunk36.frame_len(40), 1472);
        assert_eq!(Schema::Chunk26.data_capacity(), 20);
        assert_eq!(Schema::Chunk36.data_capacity(), 30);
        for s in [Schema::Chunk26, Schema::Chunk36] {
            assert_eq!(Schema::from_u8(s.as_u8()), Ok(s));
        }
        assert_eq!(Schema::from_u8(0), Err(UnknownSchema(0)));
    }

    /// Bitwise reference CRC (reflected, init/xorout all ones) to pin the engines
    /// to the polynomials chosen in `crc_choice`.
    fn reference_crc(poly: u32, data: &[u8]) -> u32 {
        let rpoly = poly.reverse_bits();
        let mut c = u32::MAX;
        for &b in data {
            c ^= b as u32;
            for _ in 0..8 {
                c = if c & 1 != 0 { (c >> 1) ^ rpoly } else { c >> 1 };
            }
        }
        !c
    }

    #[test]
    fn crc_engines_use_the_chosen_polynomials() {
        let data: Vec<u8> = (0u8..40).map(|i| i.wrapping_mul(37) ^ 0x5A).collect();
        for choice in crc_choice::CHOSEN {
            let covered = &data[..choice.bytes - 4];
            let ours = match choice.bytes {
                26 => Schema::Chunk26.chunk_crc(covered),
                36 => Schema::Chunk36.chunk_crc(covered),
                HEADER_LEN => CRC_HEADER.checksum(covered),
                other => panic!("unexpected choice length {other}"),
            };
            assert_eq!(
                ours,
                reference_crc(choice.candidate.poly, covered),
                "{}",
                choice.what
            );
        }
    }

    #[test]
    fn stamp_rewrites_time_and_keeps_frame_valid() {
        let mut buf = [0u8; MAX_FRAME_LEN];
        let mut b = FrameBuilder::new(&mut buf, Schema::Chunk36).unwrap();
        b.push_chunk(1, b"x").unwrap();
        let len = b.finish(9, 3, 100, flags::HEARTBEAT).unwrap();
        stamp_send_time(&mut buf[..len], 12345).unwrap();
        let f = Frame::new_checked(&buf[..len]).unwrap();
        assert_eq!(f.header().send_time_ns, 12345);
        assert_eq!(f.header().flags, flags::HEARTBEAT);
        // A corrupted header is not laundered by re-stamping.
        buf[field::TUNNEL.start] ^= 1;
        assert_eq!(
            stamp_send_time(&mut buf[..len], 1),
            Err(FrameError::HeaderCrc)
        );
        assert_eq!(
            stamp_send_time(&mut buf[..10], 1),
            Err(FrameError::Truncated { len: 10 })
        );
    }

    #[test]
    fn builder_respects_buffer_limit() {
        let mut buf = [0u8; HEADER_LEN + 2 * 26 + 10];
        let mut b = FrameBuilder::new(&mut buf, Schema::Chunk26).unwrap();
        assert_eq!(b.remaining(), 2);
        b.push_chunk(0, &[]).unwrap();
        b.push_chunk(0, &[1; 20]).unwrap();
        assert_eq!(b.push_chunk(0, &[1]), Err(EmitError::Full));
        assert_eq!(
            b.push_chunk(0, &[1; 21]),
            Err(EmitError::DataTooLong { len: 21, max: 20 })
        );
        assert_eq!(b.finish(0, 0, 0, 0), Ok(HEADER_LEN + 52));
        let mut small = [0u8; 31];
        assert!(matches!(
            FrameBuilder::new(&mut small, Schema::Chunk26),
            Err(EmitError::BufferTooSmall { need: 32, have: 31 })
        ));
    }

    #[test]
    fn corrupt_chunk_does_not_cost_the_others() {
        let mut buf = [0u8; MAX_FRAME_LEN];
        let mut b = FrameBuilder::new(&mut buf, Schema::Chunk26).unwrap();
        for i in 0..3u8 {
            b.push_chunk(i, &[i; 5]).unwrap();
        }
        let len = b.finish(1, 1, 1, 0).unwrap();
        buf[HEADER_LEN + 26 + 4] ^= 0x10;
        let f = Frame::new_checked(&buf[..len]).unwrap();
        let r: Vec<_> = f.chunks().collect();
        assert_eq!(r.len(), 3);
        assert!(r[0].is_ok() && r[2].is_ok());
        assert_eq!(r[1], Err(ChunkError::Crc));
    }
}
