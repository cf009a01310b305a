//! The shared-memory layout of one bridge ring, and its validation.
//!
//! A ring is one memfd, mapped `MAP_SHARED` by both processes:
//!
//! ```text
//! offset  size  field            written by   meaning
//! ------  ----  ---------------  -----------  ------------------------------------------
//!      0     8  MAGIC            creator      b"XLBRIDGE" read as a native-endian u64
//!      8     4  VERSION          creator      LAYOUT_VERSION; anything else is refused
//!     12     4  HEADER_SIZE      creator      HEADER_SIZE (4096): where slot 0 starts
//!     16     4  SLOT_SIZE        creator      largest payload a slot holds, in bytes
//!     20     4  SLOT_STRIDE      creator      bytes per slot = align_up(4 + SLOT_SIZE, 8)
//!     24     4  SLOTS            creator      number of slots, a power of two
//!     28     4  RESERVED         creator      zero
//!     32     8  CHECKSUM         creator      FNV-1a 64 over bytes 0..32 (the fields above)
//!    128     8  PRODUCER_INDEX   producer     messages ever published (AtomicU64, Release)
//!    256     8  CONSUMER_INDEX   consumer     messages ever consumed  (AtomicU64, Release)
//!    384     4  FLAGS            both         PRODUCER_CLOSED | CONSUMER_CLOSED (AtomicU32)
//!   4096     -  slot 0 .. slot SLOTS-1, each SLOT_STRIDE bytes:
//!                 +0  u32  payload length (<= SLOT_SIZE)
//!                 +4  ...  payload, then padding up to the stride
//! ```
//!
//! All integers are in native byte order: both ends live on one host, and the
//! magic read in the wrong byte order does not match. The two indices are on
//! cache lines of their own (128 bytes apart, so that adjacent-line
//! prefetching does not make them share either), and run freely: the slot of
//! index `i` is `i & (SLOTS - 1)`. A ring is consistent when
//! `CONSUMER_INDEX <= PRODUCER_INDEX <= CONSUMER_INDEX + SLOTS`.
//!
//! The memfd is sealed with `F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL` right
//! after creation, so no process holding the fd can shrink it under the other
//! side's mapping (which would turn every access into `SIGBUS`). Attaching
//! refuses a memfd without `F_SEAL_SHRINK`.

use std::ptr;

use super::error::{AttachError, ConfigError, HeaderDefect};

/// The layout version this build writes and accepts.
pub const LAYOUT_VERSION: u32 = 1;

/// `b"XLBRIDGE"` as a native-endian u64: the first 8 bytes of every ring.
pub const MAGIC: u64 = u64::from_ne_bytes(*b"XLBRIDGE");

/// Size of the header page; slot 0 starts here.
pub const HEADER_SIZE: usize = 4096;

/// Bytes in front of every payload (its u32 length).
pub const SLOT_LEN_PREFIX: usize = 4;

/// Largest accepted `slot_size` (largest payload per message).
pub const MAX_SLOT_SIZE: usize = 1 << 20;

/// Largest accepted slot count.
pub const MAX_SLOTS: usize = 1 << 24;

/// Largest accepted mapping (header plus slots), in bytes.
pub const MAX_MAP_LEN: u64 = 1 << 30;

/// Flag bit: the producer has closed its end (no more messages will come).
pub const PRODUCER_CLOSED: u32 = 1 << 0;

/// Flag bit: the consumer has closed its end (nobody reads any more).
pub const CONSUMER_CLOSED: u32 = 1 << 1;

/// Byte offsets of the header fields and of the parts of a slot.
pub mod field {
    /// A byte range inside the header.
    pub type Field = core::ops::Range<usize>;

    /// Magic number, u64.
    pub const MAGIC: Field = 0..8;
    /// Layout version, u32.
    pub const VERSION: Field = 8..12;
    /// Header size (offset of slot 0), u32.
    pub const HEADER_SIZE: Field = 12..16;
    /// Largest payload per slot, u32.
    pub const SLOT_SIZE: Field = 16..20;
    /// Bytes per slot, u32.
    pub const SLOT_STRIDE: Field = 20..24;
    /// Number of slots, u32.
    pub const SLOTS: Field = 24..28;
    /// Reserved, must be zero, u32.
    pub const RESERVED: Field = 28..32;
    /// The bytes the checksum covers: every immutable field above.
    pub const CHECKSUMMED: Field = 0..32;
    /// FNV-1a 64 of [`CHECKSUMMED`], u64.
    pub const CHECKSUM: Field = 32..40;
    /// Producer index, AtomicU64 on its own cache line.
    pub const PRODUCER_INDEX: usize = 128;
    /// Consumer index, AtomicU64 on its own cache line.
    pub const CONSUMER_INDEX: usize = 256;
    /// Flags ([`super::PRODUCER_CLOSED`], [`super::CONSUMER_CLOSED`]), AtomicU32.
    pub const FLAGS: usize = 384;

    /// Offsets inside one slot.
    pub mod slot {
        /// Payload length, u32.
        pub const LEN: super::Field = 0..4;
        /// Start of the payload.
        pub const PAYLOAD: usize = 4;
    }
}

/// The requested shape of a ring: how big a message may be and how many fit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct RingConfig {
    /// Largest payload of one message, in bytes (1 ..= [`MAX_SLOT_SIZE`]).
    pub slot_size: usize,
    /// Number of slots: a power of two (1 ..= [`MAX_SLOTS`]).
    pub slots: usize,
}

impl Default for RingConfig {
    /// 256-byte messages, 1024 slots (about 260 KiB).
    fn default() -> Self {
        RingConfig {
            slot_size: 256,
            slots: 1024,
        }
    }
}

impl RingConfig {
    /// Checks the configuration and computes the ring's geometry.
    pub fn geometry(&self) -> Result<Geometry, ConfigError> {
        if self.slot_size == 0 {
            return Err(ConfigError::ZeroSlotSize);
        }
        if self.slot_size > MAX_SLOT_SIZE {
            return Err(ConfigError::SlotSizeTooLarge {
                size: self.slot_size,
                max: MAX_SLOT_SIZE,
            });
        }
        if !self.slots.is_power_of_two() {
            return Err(ConfigError::SlotsNotPowerOfTwo(self.slots));
        }
        if self.slots > MAX_SLOTS {
            return Err(ConfigError::TooManySlots {
                slots: self.slots,
                max: MAX_SLOTS,
            });
        }
        // Both fit in u32 after the checks above.
        let slot_size = self.slot_size as u32;
        let slots = self.slots as u32;
        let stride = stride_for(slot_size);
        let map_len = map_len_for(stride, slots);
        if map_len > MAX_MAP_LEN {
            return Err(ConfigError::MappingTooLarge {
                len: map_len,
                max: MAX_MAP_LEN,
            });
        }
        Ok(Geometry {
            slot_size,
            stride,
            slots,
            map_len: map_len as usize,
        })
    }
}

/// The validated shape of a ring, as both ends compute it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Geometry {
    /// Largest payload per slot.
    pub slot_size: u32,
    /// Bytes per slot (length prefix, payload, padding).
    pub stride: u32,
    /// Number of slots (a power of two).
    pub slots: u32,
    /// Bytes of the whole mapping (header plus slots).
    pub map_len: usize,
}

impl Geometry {
    /// The configuration this geometry was made from.
    pub fn config(&self) -> RingConfig {
        RingConfig {
            slot_size: self.slot_size as usize,
            slots: self.slots as usize,
        }
    }

    /// Byte offset of slot `index & (slots - 1)` from the start of the mapping.
    #[inline]
    pub fn slot_offset(&self, index: u64) -> usize {
        let i = (index & (u64::from(self.slots) - 1)) as usize;
        HEADER_SIZE + i * self.stride as usize
    }
}

/// Bytes per slot for a given slot size: the u32 length, the payload, padding to 8.
pub fn stride_for(slot_size: u32) -> u32 {
    let raw = SLOT_LEN_PREFIX as u64 + u64::from(slot_size);
    // slot_size <= u32::MAX, so this never overflows a u64; clamp for the u32.
    u32::try_from((raw + 7) & !7).unwrap_or(u32::MAX)
}

fn map_len_for(stride: u32, slots: u32) -> u64 {
    HEADER_SIZE as u64 + u64::from(stride) * u64::from(slots)
}

/// FNV-1a 64 over the immutable header bytes ([`field::CHECKSUMMED`]).
pub fn checksum(immutable: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in immutable {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// A copy of every header field, read once from the mapping.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HeaderSnapshot {
    /// [`field::MAGIC`].
    pub magic: u64,
    /// [`field::VERSION`].
    pub version: u32,
    /// [`field::HEADER_SIZE`].
    pub header_size: u32,
    /// [`field::SLOT_SIZE`].
    pub slot_size: u32,
    /// [`field::SLOT_STRIDE`].
    pub slot_stride: u32,
    /// [`field::SLOTS`].
    pub slots: u32,
    /// [`field::RESERVED`].
    pub reserved: u32,
    /// [`field::CHECKSUM`].
    pub checksum: u64,
    /// [`field::PRODUCER_INDEX`].
    pub producer: u64,
    /// [`field::CONSUMER_INDEX`].
    pub consumer: u64,
    /// [`field::FLAGS`].
    pub flags: u32,
}

impl HeaderSnapshot {
    /// The header a fresh ring of this geometry starts with (indices and flags zero).
    pub fn fresh(geo: &Geometry) -> Self {
        let mut h = HeaderSnapshot {
            magic: MAGIC,
            version: LAYOUT_VERSION,
            header_size: HEADER_SIZE as u32,
            slot_size: geo.slot_size,
            slot_stride: geo.stride,
            slots: geo.slots,
            reserved: 0,
            checksum: 0,
            producer: 0,
            consumer: 0,
            flags: 0,
        };
        h.checksum = h.computed_checksum();
        h
    }

    /// The immutable fields as the bytes [`field::CHECKSUMMED`] holds.
    pub fn immutable_bytes(&self) -> [u8; 32] {
        let mut b = [0u8; 32];
        b[field::MAGIC].copy_from_slice(&self.magic.to_ne_bytes());
        b[field::VERSION].copy_from_slice(&self.version.to_ne_bytes());
        b[field::HEADER_SIZE].copy_from_slice(&self.header_size.to_ne_bytes());
        b[field::SLOT_SIZE].copy_from_slice(&self.slot_size.to_ne_bytes());
        b[field::SLOT_STRIDE].copy_from_slice(&self.slot_stride.to_ne_bytes());
        b[field::SLOTS].copy_from_slice(&self.slots.to_ne_bytes());
        b[field::RESERVED].copy_from_slice(&self.reserved.to_ne_bytes());
        b
    }

    /// The checksum the immutable fields call for.
    pub fn computed_checksum(&self) -> u64 {
        checksum(&self.immutable_bytes())
    }

    /// Reads every field from a mapping of at least [`HEADER_SIZE`] bytes.
    ///
    /// # Safety
    /// `base` must point to a readable, page-aligned mapping of at least
    /// [`HEADER_SIZE`] bytes.
    pub(crate) unsafe fn read(base: *const u8) -> Self {
        unsafe fn rd<T: Copy>(base: *const u8, off: usize) -> T {
            ptr::read_volatile(base.add(off).cast::<T>())
        }
        HeaderSnapshot {
            magic: rd(base, field::MAGIC.start),
            version: rd(base, field::VERSION.start),
            header_size: rd(base, field::HEADER_SIZE.start),
            slot_size: rd(base, field::SLOT_SIZE.start),
            slot_stride: rd(base, field::SLOT_STRIDE.start),
            slots: rd(base, field::SLOTS.start),
            reserved: rd(base, field::RESERVED.start),
            checksum: rd(base, field::CHECKSUM.start),
            producer: rd(base, field::PRODUCER_INDEX),
            consumer: rd(base, field::CONSUMER_INDEX),
            flags: rd(base, field::FLAGS),
        }
    }

    /// Writes every field into a mapping of at least [`HEADER_SIZE`] bytes.
    ///
    /// # Safety
    /// `base` must point to a writable, page-aligned mapping of at least
    /// [`HEADER_SIZE`] bytes that nobody else uses yet.
    pub(crate) unsafe fn write(&self, base: *mut u8) {
        unsafe fn wr<T: Copy>(base: *mut u8, off: usize, v: T) {
            ptr::write_volatile(base.add(off).cast::<T>(), v)
        }
        wr(base, field::MAGIC.start, self.magic);
        wr(base, field::VERSION.start, self.version);
        wr(base, field::HEADER_SIZE.start, self.header_size);
        wr(base, field::SLOT_SIZE.start, self.slot_size);
        wr(base, field::SLOT_STRIDE.start, self.slot_stride);
        wr(base, field::SLOTS.start, self.slots);
        wr(base, field::RESERVED.start, self.reserved);
        wr(base, field::CHECKSUM.start, self.checksum);
        wr(base, field::PRODUCER_INDEX, self.producer);
        wr(base, field::CONSUMER_INDEX, self.consumer);
        wr(base, field::FLAGS, self.flags);
    }

    /// Validates the header against the size of the mapping it was read from.
    ///
    /// Checks, in order: magic, version, checksum, header size, reserved
    /// field, slot size, slot count, stride, mapping size, indices. The
    /// version is checked before the checksum so that a ring of another
    /// layout version is reported as such, not as corrupt.
    pub fn validate(&self, map_len: u64) -> Result<Geometry, AttachError> {
        let corrupt = |what| Err(AttachError::CorruptHeader { what });
        if self.magic != MAGIC {
            return Err(AttachError::BadMagic { found: self.magic });
        }
        if self.version != LAYOUT_VERSION {
            return Err(AttachError::VersionMismatch {
                found: self.version,
                expected: LAYOUT_VERSION,
            });
        }
        let computed = self.computed_checksum();
        if self.checksum != computed {
            return corrupt(HeaderDefect::Checksum {
                stored: self.checksum,
                computed,
            });
        }
        if self.header_size as usize != HEADER_SIZE {
            return corrupt(HeaderDefect::HeaderSize {
                found: self.header_size,
                expected: HEADER_SIZE as u32,
            });
        }
        if self.reserved != 0 {
            return corrupt(HeaderDefect::Reserved(self.reserved));
        }
        if self.slot_size == 0 || self.slot_size as usize > MAX_SLOT_SIZE {
            return corrupt(HeaderDefect::SlotSize(self.slot_size));
        }
        if !self.slots.is_power_of_two() || self.slots as usize > MAX_SLOTS {
            return corrupt(HeaderDefect::SlotCount(self.slots));
        }
        let expected_stride = stride_for(self.slot_size);
        if self.slot_stride != expected_stride {
            return corrupt(HeaderDefect::SlotStride {
                found: self.slot_stride,
                expected: expected_stride,
            });
        }
        let expected_len = map_len_for(self.slot_stride, self.slots);
        if expected_len > MAX_MAP_LEN {
            return corrupt(HeaderDefect::TooLarge {
                len: expected_len,
                max: MAX_MAP_LEN,
            });
        }
        if map_len != expected_len {
            return corrupt(HeaderDefect::MappingSize {
                mapping: map_len,
                expected: expected_len,
            });
        }
        if !indices_consistent(self.producer, self.consumer, self.slots) {
            return corrupt(HeaderDefect::Indices {
                producer: self.producer,
                consumer: self.consumer,
                slots: self.slots,
            });
        }
        Ok(Geometry {
            slot_size: self.slot_size,
            stride: self.slot_stride,
            slots: self.slots,
            map_len: expected_len as usize,
        })
    }
}

/// Largest index accepted when attaching (2^62: more than a century of
/// messages at 10^9 per second), so that incrementing never overflows.
pub const MAX_INDEX: u64 = 1 << 62;

/// `consumer <= producer <= consumer + slots` and `producer <= MAX_INDEX`.
#[inline]
pub fn indices_consistent(producer: u64, consumer: u64, slots: u32) -> bool {
    producer <= MAX_INDEX && producer >= consumer && producer - consumer <= u64::from(slots)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_validation_table() {
        type Case = (usize, usize, Result<(u32, u32, usize), ConfigError>);
        let cases: &[Case] = &[
            (1, 1, Ok((1, 8, HEADER_SIZE + 8))),
            (4, 2, Ok((4, 8, HEADER_SIZE + 16))),
            (5, 4, Ok((5, 16, HEADER_SIZE + 64))),
            (60, 1024, Ok((60, 64, HEADER_SIZE + 64 * 1024))),
            (0, 8, Err(ConfigError::ZeroSlotSize)),
            (
                MAX_SLOT_SIZE + 1,
                8,
                Err(ConfigError::SlotSizeTooLarge {
                    size: MAX_SLOT_SIZE + 1,
                    max: MAX_SLOT_SIZE,
                }),
            ),
            (8, 0, Err(ConfigError::SlotsNotPowerOfTwo(0))),
            (8, 3, Err(ConfigError::SlotsNotPowerOfTwo(3))),
            (
                8,
                MAX_SLOTS * 2,
                Err(ConfigError::TooManySlots {
                    slots: MAX_SLOTS * 2,
                    max: MAX_SLOTS,
                }),
            ),
            (
                MAX_SLOT_SIZE,
                MAX_SLOTS,
                Err(ConfigError::MappingTooLarge {
                    len: HEADER_SIZE as u64 + (MAX_SLOT_SIZE as u64 + 8) * MAX_SLOTS as u64,
                    max: MAX_MAP_LEN,
                }),
            ),
        ];
        for (slot_size, slots, want) in cases {
            let got = RingConfig {
                slot_size: *slot_size,
                slots: *slots,
            }
            .geometry()
            .map(|g| (g.slot_size, g.stride, g.map_len));
            assert_eq!(&got, want, "slot_size {slot_size} slots {slots}");
        }
    }

    #[test]
    fn fresh_header_validates_and_round_trips_config() {
        let cfg = RingConfig {
            slot_size: 32,
            slots: 16,
        };
        let geo = cfg.geometry().expect("valid config");
        let h = HeaderSnapshot::fresh(&geo);
        assert_eq!(h.validate(geo.map_len as u64).expect("fresh header"), geo);
        assert_eq!(geo.config(), cfg);
    }

    #[test]
    fn slot_offsets_wrap() {
        let geo = RingConfig {
            slot_size: 8,
            slots: 4,
        }
        .geometry()
        .expect("valid config");
        assert_eq!(geo.slot_offset(0), HEADER_SIZE);
        assert_eq!(geo.slot_offset(3), HEADER_SIZE + 3 * 16);
        assert_eq!(geo.slot_offset(4), HEADER_SIZE);
        assert_eq!(geo.slot_offset(u64::MAX), HEADER_SIZE + 3 * 16);
    }

    #[test]
    fn header_fields_do_not_overlap_and_fit() {
        let mut fields = [
            field::MAGIC,
            field::VERSION,
            field::HEADER_SIZE,
            field::SLOT_SIZE,
            field::SLOT_STRIDE,
            field::SLOTS,
            field::RESERVED,
            field::CHECKSUM,
            field::PRODUCER_INDEX..field::PRODUCER_INDEX + 8,
            field::CONSUMER_INDEX..field::CONSUMER_INDEX + 8,
            field::FLAGS..field::FLAGS + 4,
        ];
        fields.sort_by_key(|f| f.start);
        for w in fields.windows(2) {
            assert!(w[0].end <= w[1].start, "{:?} overlaps {:?}", w[0], w[1]);
        }
        assert!(fields.iter().all(|f| f.end <= HEADER_SIZE));
        // The two indices are on different 128-byte blocks.
        assert_ne!(field::PRODUCER_INDEX / 128, field::CONSUMER_INDEX / 128);
    }
}
