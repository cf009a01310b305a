//! Datagrams carried as a stream of lane chunks, sans I/O.
//!
//! A lane frame carries fixed-size chunks (X-Lane's R-X bridge unit: 20 or 30
//! user bytes). A raft datagram is longer, so [`split`] cuts it into chunk
//! payloads, each starting with one flag byte:
//!
//! ```text
//! chunk data = flags:u8 | part        flags: bit 0 FIRST, bit 1 LAST
//! ```
//!
//! The sender queues the chunks of one datagram back to back under one
//! producer id (the lane queue is FIFO per producer), so a receiver sees them
//! in order unless a frame is lost. [`StreamReassembler`] rebuilds datagrams
//! and resynchronizes on the next FIRST chunk after a loss: a frame lost in
//! the middle of a datagram costs that datagram only (Raft retransmits).

/// Flag: this chunk starts a datagram.
pub const FIRST: u8 = 0x01;
/// Flag: this chunk ends a datagram.
pub const LAST: u8 = 0x02;

/// Why [`split`] refused a datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SplitError {
    /// The chunk capacity leaves no room after the flag byte.
    #[error("chunk capacity {0} is too small (need at least 2 bytes)")]
    CapacityTooSmall(usize),
    /// Empty datagrams are not sent.
    #[error("empty datagram")]
    Empty,
}

/// How many chunks of `capacity` user bytes a datagram of `len` bytes takes.
pub fn chunks_needed(len: usize, capacity: usize) -> usize {
    if capacity < 2 {
        return usize::MAX;
    }
    len.div_ceil(capacity - 1).max(1)
}

/// Cuts `datagram` into chunk payloads of at most `capacity` bytes and hands
/// each to `emit` (in order). Uses `scratch` (≥ `capacity` bytes) for the
/// chunk being built; no allocation.
pub fn split(
    datagram: &[u8],
    capacity: usize,
    scratch: &mut [u8],
    emit: &mut dyn FnMut(&[u8]),
) -> Result<usize, SplitError> {
    if capacity < 2 || scratch.len() < capacity {
        return Err(SplitError::CapacityTooSmall(capacity.min(scratch.len())));
    }
    if datagram.is_empty() {
        return Err(SplitError::Empty);
    }
    let part = capacity - 1;
    let n = datagram.len().div_ceil(part);
    for (i, piece) in datagram.chunks(part).enumerate() {
        let mut flags = 0;
        if i == 0 {
            flags |= FIRST;
        }
        if i + 1 == n {
            flags |= LAST;
        }
        scratch[0] = flags;
        scratch[1..=piece.len()].copy_from_slice(piece);
        emit(&scratch[..=piece.len()]);
    }
    Ok(n)
}

/// Hands the chunks of `datagram` to `enqueue`, all or nothing as far as
/// room goes: `false` without enqueuing anything when it needs more than
/// `free` chunks (or cannot be split); `false` too if `enqueue` refused one.
pub fn enqueue_all(
    datagram: &[u8],
    capacity: usize,
    free: usize,
    scratch: &mut [u8],
    enqueue: &mut dyn FnMut(&[u8]) -> bool,
) -> bool {
    if chunks_needed(datagram.len(), capacity) > free {
        return false;
    }
    let mut ok = true;
    let r = split(datagram, capacity, scratch, &mut |c| ok &= enqueue(c));
    ok && r.is_ok()
}

/// Why a chunk was not (or not fully) accepted. The reassembler stays usable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum StreamError {
    /// A chunk without its flag byte.
    #[error("empty chunk")]
    EmptyChunk,
    /// Unknown flag bits.
    #[error("unknown chunk flags {0:#04x}")]
    BadFlags(u8),
    /// A continuation arrived with no datagram in progress (its start was lost).
    #[error("continuation without a start")]
    Orphan,
    /// A datagram grew beyond the limit; it was dropped.
    #[error("datagram longer than {0} bytes")]
    TooLong(usize),
}

/// Counters of a [`StreamReassembler`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StreamStats {
    /// Datagrams completed.
    pub datagrams: u64,
    /// Partial datagrams abandoned (a new start, a reset after a lost frame, or too long).
    pub abandoned: u64,
    /// Chunks refused (empty, bad flags, orphan continuation).
    pub refused: u64,
}

/// Rebuilds datagrams from one sender's chunk stream.
#[derive(Debug)]
pub struct StreamReassembler {
    buf: Vec<u8>,
    active: bool,
    last_frame: Option<u64>,
    max_len: usize,
    stats: StreamStats,
}

impl StreamReassembler {
    /// A reassembler for datagrams of at most `max_len` bytes (allocates once).
    pub fn new(max_len: usize) -> Self {
        StreamReassembler {
            buf: Vec::with_capacity(max_len),
            active: false,
            last_frame: None,
            max_len,
            stats: StreamStats::default(),
        }
    }

    /// Drops a datagram in progress (call when a frame of this stream was lost).
    pub fn reset(&mut self) {
        if self.active {
            self.stats.abandoned += 1;
        }
        self.active = false;
        self.buf.clear();
    }

    /// Notes the sequence number of the frame the next chunks come from. A
    /// gap (a lost frame) drops the datagram in progress; the same number
    /// again (the next chunk of the same frame) changes nothing.
    pub fn frame(&mut self, seq: u64) {
        if self.last_frame == Some(seq) {
            return;
        }
        if self.last_frame.is_some_and(|s| seq != s.wrapping_add(1)) {
            self.reset();
        }
        self.last_frame = Some(seq);
    }

    /// Forgets the datagram in progress and the frame sequence (the sender
    /// restarted and numbers its frames from 0 again).
    pub fn restart(&mut self) {
        self.reset();
        self.last_frame = None;
    }

    /// Feeds one chunk's data; `Ok(Some(datagram))` when it completes one.
    pub fn push(&mut self, chunk: &[u8]) -> Result<Option<&[u8]>, StreamError> {
        let Some((&flags, part)) = chunk.split_first() else {
            self.stats.refused += 1;
            return Err(StreamError::EmptyChunk);
        };
        if flags & !(FIRST | LAST) != 0 {
            self.stats.refused += 1;
            self.reset();
            return Err(StreamError::BadFlags(flags));
        }
        if flags & FIRST != 0 {
            self.reset();
            self.active = true;
        } else if !self.active {
            self.stats.refused += 1;
            return Err(StreamError::Orphan);
        }
        if self.buf.len() + part.len() > self.max_len {
            // The datagram is active here, so reset() counts it abandoned.
            self.reset();
            return Err(StreamError::TooLong(self.max_len));
        }
        self.buf.extend_from_slice(part);
        if flags & LAST != 0 {
            self.active = false;
            self.stats.datagrams += 1;
            return Ok(Some(&self.buf));
        }
        Ok(None)
    }

    /// Counters.
    pub fn stats(&self) -> StreamStats {
        self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunks_of(d: &[u8], cap: usize) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        let mut scratch = vec![0u8; cap];
        split(d, cap, &mut scratch, &mut |c| out.push(c.to_vec())).unwrap();
        out
    }

    #[test]
    fn split_table() {
        // (datagram length, capacity, chunks, last chunk length)
        let cases = [
            (1, 30, 1, 2),
            (29, 30, 1, 30),
            (30, 30, 2, 2),
            (58, 30, 2, 30),
            (59, 30, 3, 2),
            (100, 20, 6, 6),
            (1400, 30, 49, 9),
        ];
        for (len, cap, n, last) in cases {
            let d: Vec<u8> = (0..len).map(|i| i as u8).collect();
            let c = chunks_of(&d, cap);
            assert_eq!(c.len(), n, "len {len} cap {cap}");
            assert_eq!(chunks_needed(len, cap), n);
            assert_eq!(c.last().unwrap().len(), last);
            assert!(c.iter().all(|x| x.len() <= cap));
            assert_eq!(c[0][0] & FIRST, FIRST);
            assert_eq!(c[n - 1][0] & LAST, LAST);
            let mut r = StreamReassembler::new(4096);
            let mut got = None;
            for x in &c {
                if let Some(g) = r.push(x).unwrap() {
                    got = Some(g.to_vec());
                }
            }
            assert_eq!(got.as_deref(), Some(&d[..]));
        }
    }

    #[test]
    fn refuses_bad_input() {
        let mut s = [0u8; 1];
        assert_eq!(
            split(b"x", 1, &mut s, &mut |_| {}),
            Err(SplitError::CapacityTooSmall(1))
        );
        let mut s = [0u8; 8];
        assert_eq!(split(b"", 8, &mut s, &mut |_| {}), Err(SplitError::Empty));
        let mut r = StreamReassembler::new(10);
        assert_eq!(r.push(&[]), Err(StreamError::EmptyChunk));
        assert_eq!(r.push(&[0x80, 1]), Err(StreamError::BadFlags(0x80)));
        assert_eq!(r.push(&[0, 1]), Err(StreamError::Orphan));
        assert_eq!(r.push(&[FIRST, 1, 2, 3, 4, 5, 6]), Ok(None));
        assert_eq!(r.push(&[0, 7, 8, 9, 10, 11]), Err(StreamError::TooLong(10)));
        // One datagram dropped, counted once.
        assert_eq!(r.stats().abandoned, 1);
        // Still usable.
        assert_eq!(r.push(&[FIRST | LAST, 42]).unwrap(), Some(&[42u8][..]));
        assert_eq!(r.stats().datagrams, 1);
        assert_eq!(r.stats().refused, 3);
    }

    #[test]
    fn loss_costs_one_datagram_and_resyncs() {
        let a: Vec<u8> = (0..70).collect();
        let b: Vec<u8> = (100..150).collect();
        let (ca, cb) = (chunks_of(&a, 30), chunks_of(&b, 30));
        let mut r = StreamReassembler::new(4096);
        // The middle chunk of `a` is lost: reset (the frame gap), then `b` arrives whole.
        assert_eq!(r.push(&ca[0]).unwrap(), None);
        r.reset();
        assert_eq!(r.push(&ca[2]), Err(StreamError::Orphan));
        let mut got = None;
        for x in &cb {
            if let Some(g) = r.push(x).unwrap() {
                got = Some(g.to_vec());
            }
        }
        assert_eq!(got.as_deref(), Some(&b[..]));
        assert_eq!(r.stats().abandoned, 1);
        // A new start while one is in progress abandons the old one.
        assert_eq!(r.push(&ca[0]).unwrap(), None);
        assert_eq!(r.push(&cb[0]).unwrap(), None);
        assert_eq!(r.stats().abandoned, 2);
    }

    #[test]
    fn frame_gaps_reset_and_restart_forgets() {
        let a: Vec<u8> = (0..70).collect();
        let c = chunks_of(&a, 30);
        // (frame of each chunk, datagram completed, abandoned after)
        let cases: [([u64; 3], bool, u64); 4] = [
            ([7, 7, 8], true, 0),  // same frame twice, then the next: fine
            ([7, 8, 9], true, 0),  // one chunk per frame
            ([7, 9, 9], false, 1), // frame 8 lost: the start is dropped
            ([7, 7, 7], true, 0),  // all in one frame
        ];
        for (frames, done, abandoned) in cases {
            let mut r = StreamReassembler::new(4096);
            let mut got = false;
            for (f, x) in frames.iter().zip(&c) {
                r.frame(*f);
                got |= matches!(r.push(x), Ok(Some(_)));
            }
            assert_eq!((got, r.stats().abandoned), (done, abandoned), "{frames:?}");
        }
        // After a restart the sequence begins again without a reset.
        let mut r = StreamReassembler::new(4096);
        r.frame(1000);
        r.push(&c[0]).unwrap();
        r.restart();
        r.frame(0);
        assert_eq!(r.stats().abandoned, 1);
        r.push(&c[0]).unwrap();
        r.frame(1);
        r.push(&c[1]).unwrap();
        r.frame(1);
        assert_eq!(r.push(&c[2]).unwrap(), Some(&a[..]));
        assert_eq!(r.stats().abandoned, 1);
        // All or nothing: too little room enqueues nothing.
        let mut scratch = [0u8; 30];
        let mut n = 0;
        assert!(!enqueue_all(&a, 30, 2, &mut scratch, &mut |_| {
            n += 1;
            true
        }));
        assert_eq!(n, 0);
        assert!(enqueue_all(&a, 30, 3, &mut scratch, &mut |_| {
            n += 1;
            true
        }));
        assert_eq!(n, 3);
        assert!(!enqueue_all(&a, 30, 3, &mut scratch, &mut |_| false));
    }
}
