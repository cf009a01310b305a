//! The single-producer/single-consumer ring in a shared memfd.
//!
//! [`Ring`] creates or attaches the memfd; [`Producer`] and [`Consumer`] are
//! the two ends. Each end keeps its own index in private memory as the
//! authoritative copy and only *publishes* it to shared memory; it reads the
//! peer's index, checks that it is possible, and caches it, so the shared
//! cache lines are touched only when the cached view says full (producer) or
//! empty (consumer).

use std::ffi::CString;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::ptr;
use std::slice;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

use memmap2::{MmapOptions, MmapRaw};
use nix::fcntl::{fcntl, FcntlArg, SealFlag};
use nix::sys::memfd::{memfd_create, MemFdCreateFlag};

use super::error::{AttachError, CreateError, HeaderDefect, RecvError, SendError};
use super::layout::{
    field, Geometry, HeaderSnapshot, RingConfig, CONSUMER_CLOSED, HEADER_SIZE, MAX_MAP_LEN,
    PRODUCER_CLOSED,
};

/// The mapping both ends of one ring (in this process) share.
pub(crate) struct Shared {
    map: MmapRaw,
    geo: Geometry,
}

impl Shared {
    #[inline]
    fn base(&self) -> *mut u8 {
        self.map.as_mut_ptr()
    }

    #[inline]
    fn atomic_u64(&self, offset: usize) -> &AtomicU64 {
        // SAFETY: `offset` is one of the 8-aligned index fields inside the
        // header page, the mapping is page-aligned and lives as long as
        // `self`; atomics may be shared with other processes.
        unsafe { &*self.base().add(offset).cast::<AtomicU64>() }
    }

    #[inline]
    fn producer_index(&self) -> &AtomicU64 {
        self.atomic_u64(field::PRODUCER_INDEX)
    }

    #[inline]
    fn consumer_index(&self) -> &AtomicU64 {
        self.atomic_u64(field::CONSUMER_INDEX)
    }

    #[inline]
    fn flags(&self) -> &AtomicU32 {
        // SAFETY: as for `atomic_u64`; FLAGS is 4-aligned inside the header.
        unsafe { &*self.base().add(field::FLAGS).cast::<AtomicU32>() }
    }

    /// Sets a flag bit (`PRODUCER_CLOSED`, `CONSUMER_CLOSED`).
    pub(crate) fn mark(&self, bit: u32) {
        self.flags().fetch_or(bit, Ordering::Release);
    }

    /// Whether a flag bit is set.
    pub(crate) fn is_marked(&self, bit: u32) -> bool {
        self.flags().load(Ordering::Acquire) & bit != 0
    }

    /// Start of the slot for `index`; in bounds for every index.
    #[inline]
    fn slot(&self, index: u64) -> *mut u8 {
        // SAFETY: slot_offset(i) + stride <= map_len for every i (masked).
        unsafe { self.base().add(self.geo.slot_offset(index)) }
    }
}

/// One ring in a memfd: created here, or attached from another process.
///
/// Turn it into its [`Producer`] or its [`Consumer`] end (or both with
/// [`Ring::split`]). The single-producer/single-consumer contract across
/// processes is the caller's: hand the memfd to exactly one peer and keep
/// only the other end here.
pub struct Ring {
    shared: Arc<Shared>,
    fd: OwnedFd,
    producer: u64,
    consumer: u64,
}

impl std::fmt::Debug for Ring {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ring")
            .field("fd", &self.fd)
            .field("geometry", &self.shared.geo)
            .finish()
    }
}

impl Ring {
    /// Creates a ring in a new, sealed memfd named `name` (visible in
    /// `/proc/<pid>/fd`), empty and with no end closed.
    pub fn create(name: &str, cfg: RingConfig) -> Result<Ring, CreateError> {
        let geo = cfg.geometry()?;
        let cname = CString::new(name).map_err(|_| CreateError::InvalidName(name.to_owned()))?;
        let os = |op: &'static str| {
            move |e: nix::Error| CreateError::Os {
                op,
                source: e.into(),
            }
        };
        let fd = memfd_create(
            &cname,
            MemFdCreateFlag::MFD_CLOEXEC | MemFdCreateFlag::MFD_ALLOW_SEALING,
        )
        .map_err(os("memfd_create"))?;
        // map_len <= MAX_MAP_LEN (1 GiB) fits in off_t.
        nix::unistd::ftruncate(&fd, geo.map_len as libc::off_t).map_err(os("ftruncate"))?;
        let map = MmapOptions::new()
            .len(geo.map_len)
            .map_raw(fd.as_raw_fd())
            .map_err(|source| CreateError::Os { op: "mmap", source })?;
        // SAFETY: a fresh mapping of map_len >= HEADER_SIZE bytes nobody else has.
        unsafe { HeaderSnapshot::fresh(&geo).write(map.as_mut_ptr()) };
        fcntl(
            fd.as_raw_fd(),
            FcntlArg::F_ADD_SEALS(
                SealFlag::F_SEAL_SHRINK | SealFlag::F_SEAL_GROW | SealFlag::F_SEAL_SEAL,
            ),
        )
        .map_err(os("fcntl(F_ADD_SEALS)"))?;
        Ok(Ring {
            shared: Arc::new(Shared { map, geo }),
            fd,
            producer: 0,
            consumer: 0,
        })
    }

    /// Maps a ring memfd another process created, after validating it: it
    /// must be sealed against shrinking, and its header must have the bridge
    /// magic, this build's [`LAYOUT_VERSION`](super::LAYOUT_VERSION), a
    /// matching checksum, a geometry that matches the memfd's size, and
    /// possible indices.
    pub fn attach(fd: OwnedFd) -> Result<Ring, AttachError> {
        let os = |op: &'static str| {
            move |e: nix::Error| AttachError::Os {
                op,
                source: e.into(),
            }
        };
        let seals =
            fcntl(fd.as_raw_fd(), FcntlArg::F_GET_SEALS).map_err(os("fcntl(F_GET_SEALS)"))?;
        if seals & libc::F_SEAL_SHRINK == 0 {
            return Err(AttachError::NotSealed);
        }
        let st = nix::sys::stat::fstat(fd.as_raw_fd()).map_err(os("fstat"))?;
        let len = u64::try_from(st.st_size).unwrap_or(0);
        if len < HEADER_SIZE as u64 {
            return Err(AttachError::CorruptHeader {
                what: HeaderDefect::Truncated {
                    len,
                    min: HEADER_SIZE as u64,
                },
            });
        }
        if len > MAX_MAP_LEN {
            return Err(AttachError::CorruptHeader {
                what: HeaderDefect::TooLarge {
                    len,
                    max: MAX_MAP_LEN,
                },
            });
        }
        let map = MmapOptions::new()
            .len(len as usize)
            .map_raw(fd.as_raw_fd())
            .map_err(|source| AttachError::Os { op: "mmap", source })?;
        // SAFETY: the mapping has at least HEADER_SIZE bytes (checked above)
        // and cannot shrink (F_SEAL_SHRINK).
        let header = unsafe { HeaderSnapshot::read(map.as_ptr()) };
        let geo = header.validate(len)?;
        Ok(Ring {
            shared: Arc::new(Shared { map, geo }),
            fd,
            producer: header.producer,
            consumer: header.consumer,
        })
    }

    /// The memfd, to hand to the peer (e.g. with SCM_RIGHTS).
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// The ring's geometry.
    pub fn geometry(&self) -> Geometry {
        self.shared.geo
    }

    /// The mapping, for the server's bookkeeping.
    pub(crate) fn shared(&self) -> Arc<Shared> {
        Arc::clone(&self.shared)
    }

    /// This process becomes the producer. The memfd is closed (the mapping stays).
    pub fn into_producer(self) -> Producer {
        Producer::new(self.shared, self.producer, self.consumer)
    }

    /// This process becomes the consumer. The memfd is closed (the mapping stays).
    pub fn into_consumer(self) -> Consumer {
        Consumer::new(self.shared, self.producer, self.consumer)
    }

    /// Both ends in this process (e.g. to pass messages between threads).
    /// The memfd is closed (the mapping stays).
    pub fn split(self) -> (Producer, Consumer) {
        let consumer = Consumer::new(Arc::clone(&self.shared), self.producer, self.consumer);
        (self.into_producer(), consumer)
    }
}

/// The writing end of a ring.
///
/// Every operation does bounded work: a few loads and stores, at most one
/// acquire load of the consumer's index, and an O(len) copy. No allocation,
/// no lock, no system call. Dropping it marks the ring `PRODUCER_CLOSED`.
pub struct Producer {
    shared: Arc<Shared>,
    head: u64,
    cached_tail: u64,
    slots: u64,
    max: usize,
}

impl std::fmt::Debug for Producer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Producer")
            .field("head", &self.head)
            .field("cached_tail", &self.cached_tail)
            .field("geometry", &self.shared.geo)
            .finish()
    }
}

impl Producer {
    fn new(shared: Arc<Shared>, producer: u64, consumer: u64) -> Self {
        let geo = shared.geo;
        Producer {
            shared,
            head: producer,
            cached_tail: consumer,
            slots: u64::from(geo.slots),
            max: geo.slot_size as usize,
        }
    }

    /// Largest message, in bytes.
    pub fn max_payload(&self) -> usize {
        self.max
    }

    /// Number of slots.
    pub fn capacity(&self) -> usize {
        self.slots as usize
    }

    /// Messages sent so far (this end's index).
    pub fn sent(&self) -> u64 {
        self.head
    }

    /// Whether the consumer has closed its end (or was marked gone by the server).
    pub fn is_peer_gone(&self) -> bool {
        self.shared.is_marked(CONSUMER_CLOSED)
    }

    /// Finds a free slot: `PeerGone`, `Full`, or an impossible consumer index.
    #[inline]
    fn reserve(&mut self) -> Result<*mut u8, SendError> {
        let sh = &*self.shared;
        if sh.flags().load(Ordering::Relaxed) & CONSUMER_CLOSED != 0 {
            return Err(SendError::PeerGone);
        }
        if self.head - self.cached_tail >= self.slots {
            // Acquire: the consumer is done reading every slot below `tail`.
            let tail = sh.consumer_index().load(Ordering::Acquire);
            if tail < self.cached_tail || tail > self.head || self.head - tail > self.slots {
                return Err(SendError::CorruptIndex {
                    producer: self.head,
                    consumer: tail,
                    slots: self.slots as u32,
                });
            }
            self.cached_tail = tail;
            if self.head - tail == self.slots {
                return Err(SendError::Full);
            }
        }
        Ok(sh.slot(self.head))
    }

    #[inline]
    fn publish(&mut self, slot: *mut u8, len: usize) {
        // SAFETY: `slot` came from `reserve`: in bounds, owned by us until published.
        unsafe { ptr::write(slot.cast::<u32>(), len as u32) };
        self.head += 1;
        // Release: the length and payload are visible before the new index.
        self.shared
            .producer_index()
            .store(self.head, Ordering::Release);
    }

    /// Copies `msg` into the next slot and publishes it.
    ///
    /// Bounded work: O(len) copy. Never blocks and never drops: a message
    /// that cannot be sent is reported (`Full`, `TooLarge`, `PeerGone`,
    /// `CorruptIndex`) and nothing is written.
    #[inline]
    pub fn try_send(&mut self, msg: &[u8]) -> Result<(), SendError> {
        if msg.len() > self.max {
            return Err(SendError::TooLarge {
                len: msg.len(),
                max: self.max,
            });
        }
        let slot = self.reserve()?;
        // SAFETY: the slot has 4 + max bytes and msg.len() <= max.
        unsafe {
            ptr::copy_nonoverlapping(msg.as_ptr(), slot.add(field::slot::PAYLOAD), msg.len())
        };
        self.publish(slot, msg.len());
        Ok(())
    }

    /// Zero-copy send: `fill` writes the message straight into the next
    /// slot (a buffer of [`max_payload`](Self::max_payload) bytes) and
    /// returns its length; the message is published when `fill` returns.
    ///
    /// Returns the length sent. If `fill` returns more than the slot holds,
    /// nothing is published and `TooLarge` is returned. Bounded work apart
    /// from `fill`. The buffer is in shared memory: a hostile consumer could
    /// read it while it is being written, never the other way round.
    #[inline]
    pub fn try_send_with<F: FnOnce(&mut [u8]) -> usize>(
        &mut self,
        fill: F,
    ) -> Result<usize, SendError> {
        let slot = self.reserve()?;
        // SAFETY: the slot's payload area has `max` bytes and is not
        // published, so a well-behaved consumer does not touch it.
        let buf = unsafe { slice::from_raw_parts_mut(slot.add(field::slot::PAYLOAD), self.max) };
        let len = fill(buf);
        if len > self.max {
            return Err(SendError::TooLarge { len, max: self.max });
        }
        self.publish(slot, len);
        Ok(len)
    }
}

impl Drop for Producer {
    fn drop(&mut self) {
        self.shared.mark(PRODUCER_CLOSED);
    }
}

/// The reading end of a ring.
///
/// Every operation does bounded work: a few loads and stores, at most two
/// acquire loads of shared words, and an O(len) copy. No allocation, no
/// lock, no system call. Every index and length read from shared memory is
/// checked before use, so a buggy or hostile producer causes a typed error,
/// never an out-of-bounds read. Dropping it marks the ring `CONSUMER_CLOSED`.
pub struct Consumer {
    shared: Arc<Shared>,
    tail: u64,
    cached_head: u64,
    slots: u64,
    max: u32,
}

impl std::fmt::Debug for Consumer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Consumer")
            .field("tail", &self.tail)
            .field("cached_head", &self.cached_head)
            .field("geometry", &self.shared.geo)
            .finish()
    }
}

impl Consumer {
    fn new(shared: Arc<Shared>, producer: u64, consumer: u64) -> Self {
        let geo = shared.geo;
        Consumer {
            shared,
            tail: consumer,
            cached_head: producer,
            slots: u64::from(geo.slots),
            max: geo.slot_size,
        }
    }

    /// Largest message, in bytes.
    pub fn max_payload(&self) -> usize {
        self.max as usize
    }

    /// Number of slots.
    pub fn capacity(&self) -> usize {
        self.slots as usize
    }

    /// Messages received so far (this end's index).
    pub fn received(&self) -> u64 {
        self.tail
    }

    /// Whether the producer has closed its end (or was marked gone by the
    /// server). Messages it sent before may still be waiting.
    pub fn is_peer_gone(&self) -> bool {
        self.shared.is_marked(PRODUCER_CLOSED)
    }

    /// Reads and checks the producer's index.
    #[inline]
    fn load_head(&self) -> Result<u64, RecvError> {
        // Acquire: the slots below `head` are written.
        let head = self.shared.producer_index().load(Ordering::Acquire);
        if head < self.cached_head || head - self.tail > self.slots {
            return Err(RecvError::CorruptIndex {
                producer: head,
                consumer: self.tail,
                slots: self.slots as u32,
            });
        }
        Ok(head)
    }

    /// Learns about new messages; `Ok(false)` when there are none.
    fn refresh(&mut self) -> Result<bool, RecvError> {
        let head = self.load_head()?;
        if head != self.tail {
            self.cached_head = head;
            return Ok(true);
        }
        if self.shared.is_marked(PRODUCER_CLOSED) {
            // The producer may have published right before closing.
            let head = self.load_head()?;
            if head != self.tail {
                self.cached_head = head;
                return Ok(true);
            }
            return Err(RecvError::PeerGone);
        }
        Ok(false)
    }

    /// The next message in place: payload pointer and checked length.
    #[inline]
    fn peek(&mut self) -> Result<Option<(*const u8, usize)>, RecvError> {
        if self.tail == self.cached_head && !self.refresh()? {
            return Ok(None);
        }
        let slot = self.shared.slot(self.tail);
        // SAFETY: in bounds; read once (volatile) so the checked value is the used one.
        let len = unsafe { ptr::read_volatile(slot.cast::<u32>()) };
        if len > self.max {
            return Err(RecvError::BadLength {
                index: self.tail,
                len,
                max: self.max,
            });
        }
        // SAFETY: the payload area has `max` >= len bytes.
        Ok(Some((
            unsafe { slot.add(field::slot::PAYLOAD) },
            len as usize,
        )))
    }

    #[inline]
    fn advance(&mut self) {
        self.tail += 1;
        // Release: we are done reading the slot before the producer may reuse it.
        self.shared
            .consumer_index()
            .store(self.tail, Ordering::Release);
    }

    /// Copies the next message into `buf` and returns its length, or
    /// `Ok(None)` if the ring is empty.
    ///
    /// Bounded work: O(len) copy. If `buf` is too small the message stays
    /// in the ring (`BufferTooSmall`). `PeerGone` comes only once every
    /// message the producer published has been received.
    #[inline]
    pub fn try_recv(&mut self, buf: &mut [u8]) -> Result<Option<usize>, RecvError> {
        let Some((payload, len)) = self.peek()? else {
            return Ok(None);
        };
        if len > buf.len() {
            return Err(RecvError::BufferTooSmall {
                needed: len,
                capacity: buf.len(),
            });
        }
        // SAFETY: `payload` has `len` readable bytes; `buf` has room.
        unsafe { ptr::copy_nonoverlapping(payload, buf.as_mut_ptr(), len) };
        self.advance();
        Ok(Some(len))
    }

    /// Zero-copy receive: calls `f` with the next message in place, then
    /// frees its slot, and returns what `f` returned; `Ok(None)` if empty.
    ///
    /// Bounded work apart from `f`. The slice is in shared memory: its
    /// length has been checked, but a hostile producer could change its
    /// bytes while `f` reads them, so `f` must treat them as untrusted input.
    #[inline]
    pub fn try_recv_with<R, F: FnOnce(&[u8]) -> R>(
        &mut self,
        f: F,
    ) -> Result<Option<R>, RecvError> {
        let Some((payload, len)) = self.peek()? else {
            return Ok(None);
        };
        // SAFETY: `payload` has `len` readable bytes inside the mapping,
        // which outlives this call.
        let r = f(unsafe { slice::from_raw_parts(payload, len) });
        self.advance();
        Ok(Some(r))
    }
}

impl Drop for Consumer {
    fn drop(&mut self) {
        self.shared.mark(CONSUMER_CLOSED);
    }
}

#[cfg(test)]
mod tests {
    use std::fs::File;
    use std::io::Write;

    use super::super::layout::{checksum, stride_for, LAYOUT_VERSION, MAGIC};
    use super::*;

    fn cfg(slot_size: usize, slots: usize) -> RingConfig {
        RingConfig { slot_size, slots }
    }

    fn pair(slot_size: usize, slots: usize) -> (Producer, Consumer, Arc<Shared>) {
        let ring = Ring::create("xlane-test", cfg(slot_size, slots)).expect("create ring");
        let sh = ring.shared();
        let (p, c) = ring.split();
        (p, c, sh)
    }

    #[test]
    fn empty_then_one_message() {
        let (mut p, mut c, _) = pair(16, 4);
        let mut buf = [0u8; 16];
        assert_eq!(c.try_recv(&mut buf), Ok(None));
        p.try_send(b"hello").expect("send");
        assert_eq!(c.try_recv(&mut buf), Ok(Some(5)));
        assert_eq!(&buf[..5], b"hello");
        assert_eq!(c.try_recv(&mut buf), Ok(None));
    }

    #[test]
    fn full_then_drain_and_wraparound() {
        let (mut p, mut c, _) = pair(8, 4);
        let mut buf = [0u8; 8];
        // Many laps around a 4-slot ring, filling it completely each time.
        for lap in 0u64..50 {
            for i in 0..4u64 {
                p.try_send(&(lap * 4 + i).to_le_bytes()).expect("room");
            }
            assert_eq!(p.try_send(b"x"), Err(SendError::Full), "lap {lap}");
            for i in 0..4u64 {
                assert_eq!(c.try_recv(&mut buf), Ok(Some(8)));
                assert_eq!(u64::from_le_bytes(buf), lap * 4 + i);
            }
            assert_eq!(c.try_recv(&mut buf), Ok(None));
        }
        assert_eq!(p.sent(), 200);
        assert_eq!(c.received(), 200);
    }

    #[test]
    fn interleaved_wraparound_with_varying_lengths() {
        let (mut p, mut c, _) = pair(13, 2);
        let mut buf = [0u8; 13];
        for i in 0..1000usize {
            let len = i % 14;
            let msg: Vec<u8> = (0..len).map(|j| (i + j) as u8).collect();
            p.try_send(&msg).expect("room");
            if i % 2 == 1 {
                p.try_send(&[]).expect("room for an empty message");
                assert_eq!(p.try_send(b"x"), Err(SendError::Full));
            }
            assert_eq!(c.try_recv(&mut buf), Ok(Some(len)));
            assert_eq!(&buf[..len], &msg[..]);
            if i % 2 == 1 {
                assert_eq!(c.try_recv(&mut buf), Ok(Some(0)));
            }
        }
    }

    #[test]
    fn too_large_and_buffer_too_small() {
        let (mut p, mut c, _) = pair(8, 4);
        assert_eq!(
            p.try_send(&[0; 9]),
            Err(SendError::TooLarge { len: 9, max: 8 })
        );
        assert_eq!(
            p.try_send_with(|_| 9),
            Err(SendError::TooLarge { len: 9, max: 8 })
        );
        p.try_send(&[7; 8]).expect("fits exactly");
        let mut small = [0u8; 4];
        assert_eq!(
            c.try_recv(&mut small),
            Err(RecvError::BufferTooSmall {
                needed: 8,
                capacity: 4
            })
        );
        // The message is still there.
        let mut buf = [0u8; 8];
        assert_eq!(c.try_recv(&mut buf), Ok(Some(8)));
        assert_eq!(buf, [7; 8]);
        assert_eq!(c.try_recv(&mut buf), Ok(None));
    }

    #[test]
    fn zero_copy_variants() {
        let (mut p, mut c, _) = pair(32, 8);
        let n = p
            .try_send_with(|buf| {
                assert_eq!(buf.len(), 32);
                buf[..3].copy_from_slice(b"abc");
                3
            })
            .expect("send");
        assert_eq!(n, 3);
        let got = c.try_recv_with(|m| m.to_vec()).expect("recv");
        assert_eq!(got.as_deref(), Some(&b"abc"[..]));
        assert_eq!(c.try_recv_with(|m| m.len()), Ok(None));
    }

    #[test]
    fn producer_close_drains_then_peer_gone() {
        let (mut p, mut c, _) = pair(8, 4);
        p.try_send(b"a").expect("send");
        p.try_send(b"b").expect("send");
        assert!(!c.is_peer_gone());
        drop(p);
        assert!(c.is_peer_gone());
        let mut buf = [0u8; 8];
        assert_eq!(c.try_recv(&mut buf), Ok(Some(1)));
        assert_eq!(c.try_recv(&mut buf), Ok(Some(1)));
        assert_eq!(c.try_recv(&mut buf), Err(RecvError::PeerGone));
        assert_eq!(c.try_recv(&mut buf), Err(RecvError::PeerGone));
    }

    #[test]
    fn consumer_close_is_peer_gone_for_producer() {
        let (mut p, c, _) = pair(8, 4);
        p.try_send(b"a").expect("send");
        drop(c);
        assert!(p.is_peer_gone());
        assert_eq!(p.try_send(b"b"), Err(SendError::PeerGone));
    }

    #[test]
    fn hostile_producer_index_is_reported() {
        let cases: &[(&str, u64, u64)] = &[
            // (what, tail after consuming, head written by the "peer")
            ("more than slots ahead", 0, 5),
            ("far ahead", 0, u64::MAX),
            ("behind the consumer", 2, 1),
        ];
        for &(what, consumed, bogus) in cases {
            let (mut p, mut c, sh) = pair(8, 4);
            let mut buf = [0u8; 8];
            for _ in 0..consumed {
                p.try_send(b"m").expect("send");
                assert_eq!(c.try_recv(&mut buf), Ok(Some(1)));
            }
            sh.producer_index().store(bogus, Ordering::Release);
            assert_eq!(
                c.try_recv(&mut buf),
                Err(RecvError::CorruptIndex {
                    producer: bogus,
                    consumer: consumed,
                    slots: 4
                }),
                "{what}"
            );
        }
    }

    #[test]
    fn hostile_consumer_index_is_reported() {
        let cases: &[(&str, u64)] = &[("ahead of the producer", 5), ("far ahead", u64::MAX)];
        for &(what, bogus) in cases {
            let (mut p, _c, sh) = pair(8, 4);
            for _ in 0..4 {
                p.try_send(b"m").expect("send");
            }
            sh.consumer_index().store(bogus, Ordering::Release);
            assert_eq!(
                p.try_send(b"m"),
                Err(SendError::CorruptIndex {
                    producer: 4,
                    consumer: bogus,
                    slots: 4
                }),
                "{what}"
            );
        }
        // A consumer index that goes backwards is impossible too.
        let (mut p, mut c, sh) = pair(8, 2);
        let mut buf = [0u8; 8];
        for _ in 0..2 {
            p.try_send(b"m").expect("send");
        }
        assert_eq!(c.try_recv(&mut buf), Ok(Some(1)));
        p.try_send(b"m").expect("send"); // producer caches tail = 1
        sh.consumer_index().store(0, Ordering::Release);
        assert_eq!(
            p.try_send(b"m"),
            Err(SendError::CorruptIndex {
                producer: 3,
                consumer: 0,
                slots: 2
            })
        );
    }

    #[test]
    fn hostile_slot_length_is_reported() {
        let (mut p, mut c, sh) = pair(8, 4);
        p.try_send(b"ok").expect("send");
        // SAFETY: test-only write of slot 0's length field.
        unsafe { ptr::write_volatile(sh.slot(0).cast::<u32>(), 9) };
        let mut buf = [0u8; 64];
        let err = Err(RecvError::BadLength {
            index: 0,
            len: 9,
            max: 8,
        });
        assert_eq!(c.try_recv(&mut buf), err);
        assert_eq!(c.try_recv_with(|m| m.len()), err);
    }

    // ---- header validation over real memfds ----

    fn forge(image: &[u8], seal: bool) -> OwnedFd {
        let flags = MemFdCreateFlag::MFD_CLOEXEC | MemFdCreateFlag::MFD_ALLOW_SEALING;
        let fd = memfd_create(c"xlane-forged", flags).expect("memfd");
        let mut f = File::from(fd);
        f.write_all(image).expect("write image");
        let fd = OwnedFd::from(f);
        if seal {
            fcntl(
                fd.as_raw_fd(),
                FcntlArg::F_ADD_SEALS(SealFlag::F_SEAL_SHRINK | SealFlag::F_SEAL_GROW),
            )
            .expect("seal");
        }
        fd
    }

    fn valid_image(geo: &Geometry) -> Vec<u8> {
        let mut img = vec![0u8; geo.map_len];
        let h = HeaderSnapshot::fresh(geo);
        img[field::CHECKSUMMED].copy_from_slice(&h.immutable_bytes());
        img[field::CHECKSUM].copy_from_slice(&h.checksum.to_ne_bytes());
        img
    }

    fn put_u32(img: &mut [u8], f: field::Field, v: u32) {
        img[f].copy_from_slice(&v.to_ne_bytes());
    }

    fn put_u64(img: &mut [u8], at: usize, v: u64) {
        img[at..at + 8].copy_from_slice(&v.to_ne_bytes());
    }

    fn reseal(img: &mut [u8]) {
        let sum = checksum(&img[field::CHECKSUMMED]);
        put_u64(img, field::CHECKSUM.start, sum);
    }

    type Corrupt = fn(&mut Vec<u8>);

    #[test]
    fn attach_validation_table() {
        let geo = cfg(24, 8).geometry().expect("valid");
        let len = geo.map_len as u64;
        let stride = stride_for(24);
        // (case, corruption, expected outcome: None = attaches, Some(defect) = CorruptHeader)
        let corrupt_cases: Vec<(&str, Corrupt, Option<HeaderDefect>)> = vec![
            ("valid", |_| {}, None),
            (
                "valid with messages in flight",
                |i| {
                    put_u64(i, field::PRODUCER_INDEX, 11);
                    put_u64(i, field::CONSUMER_INDEX, 5);
                },
                None,
            ),
            (
                "valid and full",
                |i| put_u64(i, field::PRODUCER_INDEX, 8),
                None,
            ),
            (
                "slot size changed, checksum stale",
                |i| put_u32(i, field::SLOT_SIZE, 25),
                Some(HeaderDefect::Checksum {
                    stored: 0,
                    computed: 0,
                }),
            ),
            (
                "checksum flipped",
                |i| i[field::CHECKSUM.start] ^= 1,
                Some(HeaderDefect::Checksum {
                    stored: 0,
                    computed: 0,
                }),
            ),
            (
                "header size",
                |i| {
                    put_u32(i, field::HEADER_SIZE, 8192);
                    reseal(i)
                },
                Some(HeaderDefect::HeaderSize {
                    found: 8192,
                    expected: 4096,
                }),
            ),
            (
                "reserved",
                |i| {
                    put_u32(i, field::RESERVED, 1);
                    reseal(i)
                },
                Some(HeaderDefect::Reserved(1)),
            ),
            (
                "slot size zero",
                |i| {
                    put_u32(i, field::SLOT_SIZE, 0);
                    reseal(i)
                },
                Some(HeaderDefect::SlotSize(0)),
            ),
            (
                "slot size huge",
                |i| {
                    put_u32(i, field::SLOT_SIZE, u32::MAX);
                    reseal(i)
                },
                Some(HeaderDefect::SlotSize(u32::MAX)),
            ),
            (
                "slot size beyond the stride",
                |i| {
                    put_u32(i, field::SLOT_SIZE, 40);
                    reseal(i)
                },
                Some(HeaderDefect::SlotStride {
                    found: 32,
                    expected: 48,
                }),
            ),
            (
                "slot count not a power of two",
                |i| {
                    put_u32(i, field::SLOTS, 6);
                    reseal(i)
                },
                Some(HeaderDefect::SlotCount(6)),
            ),
            (
                "slot count zero",
                |i| {
                    put_u32(i, field::SLOTS, 0);
                    reseal(i)
                },
                Some(HeaderDefect::SlotCount(0)),
            ),
            (
                "slot count larger than the mapping",
                |i| {
                    put_u32(i, field::SLOTS, 16);
                    reseal(i)
                },
                Some(HeaderDefect::MappingSize {
                    mapping: 0,
                    expected: 0,
                }),
            ),
            (
                "slots describe more than the maximum mapping",
                |i| {
                    put_u32(i, field::SLOT_SIZE, 1 << 20);
                    put_u32(i, field::SLOT_STRIDE, (1 << 20) + 8);
                    put_u32(i, field::SLOTS, 1 << 20);
                    reseal(i)
                },
                Some(HeaderDefect::TooLarge {
                    len: 0,
                    max: MAX_MAP_LEN,
                }),
            ),
            (
                "truncated by one byte",
                |i| {
                    i.pop();
                },
                Some(HeaderDefect::MappingSize {
                    mapping: 0,
                    expected: 0,
                }),
            ),
            (
                "one page too long",
                |i| i.extend_from_slice(&[0; 4096]),
                Some(HeaderDefect::MappingSize {
                    mapping: 0,
                    expected: 0,
                }),
            ),
            (
                "truncated inside the header",
                |i| i.truncate(100),
                Some(HeaderDefect::Truncated {
                    len: 100,
                    min: 4096,
                }),
            ),
            (
                "empty memfd",
                |i| i.clear(),
                Some(HeaderDefect::Truncated { len: 0, min: 4096 }),
            ),
            (
                "consumer ahead of producer",
                |i| put_u64(i, field::CONSUMER_INDEX, 1),
                Some(HeaderDefect::Indices {
                    producer: 0,
                    consumer: 1,
                    slots: 8,
                }),
            ),
            (
                "producer more than slots ahead",
                |i| put_u64(i, field::PRODUCER_INDEX, 9),
                Some(HeaderDefect::Indices {
                    producer: 9,
                    consumer: 0,
                    slots: 8,
                }),
            ),
            (
                "indices near overflow",
                |i| {
                    put_u64(i, field::PRODUCER_INDEX, u64::MAX);
                    put_u64(i, field::CONSUMER_INDEX, u64::MAX);
                },
                Some(HeaderDefect::Indices {
                    producer: u64::MAX,
                    consumer: u64::MAX,
                    slots: 8,
                }),
            ),
        ];
        for (name, corrupt, want) in corrupt_cases {
            let mut img = valid_image(&geo);
            corrupt(&mut img);
            let got = Ring::attach(forge(&img, true));
            match (got, want) {
                (Ok(ring), None) => assert_eq!(ring.geometry(), geo, "{name}"),
                (Err(AttachError::CorruptHeader { what }), Some(want)) => {
                    // Checksums and sizes are compared by kind only where the
                    // exact numbers are incidental (zeroes in the table).
                    let same = match (what, want) {
                        (
                            HeaderDefect::Checksum { stored, computed },
                            HeaderDefect::Checksum { .. },
                        ) => stored != computed,
                        (
                            HeaderDefect::MappingSize { mapping, expected },
                            HeaderDefect::MappingSize { .. },
                        ) => mapping != expected && (mapping == img.len() as u64),
                        (HeaderDefect::TooLarge { len: l, max }, HeaderDefect::TooLarge { .. }) => {
                            l > max
                        }
                        (a, b) => a == b,
                    };
                    assert!(same, "{name}: got {what:?}, want {want:?}");
                }
                (got, want) => panic!("{name}: got {got:?}, want {want:?}"),
            }
        }
        // Sanity of the table's own assumptions.
        assert_eq!(stride, 32);
        assert_eq!(len, 4096 + 8 * 32);
    }

    #[test]
    fn attach_refuses_magic_and_version() {
        let geo = cfg(24, 8).geometry().expect("valid");
        let mut img = valid_image(&geo);
        put_u64(&mut img, field::MAGIC.start, 0xdead_beef);
        assert!(matches!(
            Ring::attach(forge(&img, true)),
            Err(AttachError::BadMagic { found: 0xdead_beef })
        ));
        for version in [0, LAYOUT_VERSION + 1, u32::MAX] {
            let mut img = valid_image(&geo);
            put_u32(&mut img, field::VERSION, version);
            // Even with a stale checksum the version is what is reported.
            assert!(
                matches!(
                    Ring::attach(forge(&img, true)),
                    Err(AttachError::VersionMismatch { found, expected })
                        if found == version && expected == LAYOUT_VERSION
                ),
                "version {version}"
            );
        }
        assert_eq!(
            u64::from_ne_bytes(valid_image(&geo)[field::MAGIC].try_into().expect("8 bytes")),
            MAGIC
        );
    }

    #[test]
    fn attach_refuses_unsealed_memfd() {
        let geo = cfg(24, 8).geometry().expect("valid");
        let img = valid_image(&geo);
        assert!(matches!(
            Ring::attach(forge(&img, false)),
            Err(AttachError::NotSealed)
        ));
    }

    #[test]
    fn created_ring_attaches_and_talks_across_mappings() {
        let ring = Ring::create("xlane-test", cfg(16, 8)).expect("create");
        let fd = ring.fd().try_clone_to_owned().expect("dup");
        let mut p = ring.into_producer();
        p.try_send(b"before attach").expect("send");
        let mut c = Ring::attach(fd).expect("attach").into_consumer();
        p.try_send(b"after attach").expect("send");
        let mut buf = [0u8; 16];
        assert_eq!(c.try_recv(&mut buf), Ok(Some(13)));
        assert_eq!(&buf[..13], b"before attach");
        assert_eq!(c.try_recv(&mut buf), Ok(Some(12)));
        assert_eq!(c.try_recv(&mut buf), Ok(None));
        drop(p);
        assert_eq!(c.try_recv(&mut buf), Err(RecvError::PeerGone));
    }

    #[test]
    fn created_memfd_is_sealed() {
        let ring = Ring::create("xlane-test", cfg(16, 8)).expect("create");
        let seals = fcntl(ring.fd().as_raw_fd(), FcntlArg::F_GET_SEALS).expect("seals");
        for s in [libc::F_SEAL_SHRINK, libc::F_SEAL_GROW, libc::F_SEAL_SEAL] {
            assert_ne!(seals & s, 0, "seal {s:#x}");
        }
        assert!(nix::unistd::ftruncate(ring.fd(), 0).is_err());
    }

    #[test]
    fn create_rejects_bad_config_and_name() {
        assert!(matches!(
            Ring::create("x", cfg(0, 8)),
            Err(CreateError::Config(super::super::ConfigError::ZeroSlotSize))
        ));
        assert!(matches!(
            Ring::create("bad\0name", cfg(8, 8)),
            Err(CreateError::InvalidName(_))
        ));
    }
}
