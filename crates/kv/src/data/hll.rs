//! HyperLogLog exactly as Redis 7.0 keeps it: a *string* value whose bytes
//! are the sketch, so `GET`, `SET`, `DUMP`/`RESTORE` and every member see
//! the very bytes Redis would hold after the same `PFADD` / `PFMERGE` /
//! `PFCOUNT` sequence.
//!
//! # The format (facts of Redis's `hyperloglog.c`)
//!
//! A 16-byte header: `"HYLL"`, one encoding byte (0 dense, 1 sparse), three
//! unused bytes (kept as found), then the cached cardinality as 8 bytes
//! little endian whose top bit (bit 7 of byte 15) says "cache invalid".
//! Then the registers: 2^14 registers of 6 bits (`p` = 14).
//!
//! * Dense: 12288 bytes, register `i` in bits `6i .. 6i+6` counted from
//!   the least significant bit of byte 0 upwards (the value total length
//!   is [`DENSE_LEN`]).
//! * Sparse: run-length opcodes: `00xxxxxx` ZERO (1..=64 zero registers),
//!   `01xxxxxx yyyyyyyy` XZERO (1..=16384 zero registers), `1vvvvvxx` VAL
//!   (1..=4 registers of value 1..=32). A new key is one XZERO of 16384
//!   (see [`new_sparse`]). A sparse value is
//!   promoted to dense when a register must exceed 32 or when an in-place
//!   split would make the string longer than `hll-sparse-max-bytes`
//!   (passed in as `sparse_max`; Redis's default is
//!   [`DEFAULT_SPARSE_MAX_BYTES`]).
//!
//! An element is hashed with MurmurHash64A (seed [`MURMUR_SEED`]); the low
//! 14 bits pick the register, and the register's candidate value is the
//! number of trailing zero bits of the remaining 50 bits plus one (at most
//! 51), see [`pat_len`]. The estimate is Ertl's improved estimator over the
//! register histogram (Redis 7.0's `hllCount`).
//!
//! # Fidelity notes
//!
//! Redis edits a sparse string in place in a buffer that always has a zero
//! byte after the string's end; a truncated XZERO at the very end reads that
//! byte, and a split of such an opcode can write past the end. This module
//! models that buffer within one call (so the bytes after every command are
//! Redis's), starting each call with the terminating zero as Redis does for
//! a freshly `SET` value. Only a hidden byte that Redis leaves *past the
//! end of a string* between two commands (after splitting a truncated final
//! XZERO) is not carried over; nothing but a later `PFDEBUG DECODE` of that
//! corrupted value can observe it.
//!
//! The sparse-walking checks are those of the installed Redis 7.0.15
//! (Debian), which carries the CVE-2025-32023 fix: a sparse value is valid
//! only if its opcodes cover exactly 16384 registers, none of them beyond.
//!
//! # API by command
//!
//! * `PFADD`: [`pfadd`] (values in, reply and value to store out), or
//!   [`add`] on bytes.
//! * `PFCOUNT`: [`pfcount`]; on bytes [`count`] (one key, refreshes the
//!   cached cardinality) and [`count_union`] (several keys, read only).
//! * `PFMERGE`: [`pfmerge`]; on bytes [`merge`].
//! * `PFDEBUG GETREG|DECODE|ENCODING|TODENSE`: [`pfdebug`]; on bytes
//!   [`registers`], [`to_dense`], [`decode_sparse`], [`check`].
//! * The type checks: [`check`] / [`is_hll`]; a new empty sketch:
//!   [`new_sparse`]. `PFSELFTEST` is not provided.

use crate::value::Value;

/// Bits of the hash that pick the register (Redis's `HLL_P`).
pub const HLL_P: u32 = 14;
/// Bits of the hash that give the run of zeros (Redis's `HLL_Q`).
pub const HLL_Q: u32 = 64 - HLL_P;
/// Number of registers (16384).
pub const REGISTERS: usize = 1 << HLL_P;
/// Length of the header (magic, encoding, 3 unused, 8 cached-card bytes).
pub const HEADER_LEN: usize = 16;
/// Exact length of a dense HyperLogLog string (12304).
pub const DENSE_LEN: usize = HEADER_LEN + (REGISTERS * 6).div_ceil(8);
/// Redis's default `hll-sparse-max-bytes`.
pub const DEFAULT_SPARSE_MAX_BYTES: usize = 3000;
/// The MurmurHash64A seed Redis hashes elements with.
pub const MURMUR_SEED: u64 = 0xadc8_3b19;

const MAGIC: &[u8; 4] = b"HYLL";
const ENC_DENSE: u8 = 0;
const ENC_SPARSE: u8 = 1;
const REGISTER_MAX: u32 = 63;
const VAL_MAX_VALUE: u8 = 32;
const VAL_MAX_LEN: usize = 4;
const ZERO_MAX_LEN: usize = 64;
const XZERO_MAX_LEN: usize = 16384;
const ALPHA_INF: f64 = 0.721_347_520_444_481_7;
/// Largest histogram slot the estimator reads (`HLL_Q + 1` = 51).
const HIST_TOP: usize = HLL_Q as usize + 1;

/// Which of Redis's two encodings a HyperLogLog string uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// 16384 packed 6-bit registers.
    Dense,
    /// Run-length opcodes (ZERO, XZERO, VAL).
    Sparse,
}

impl Encoding {
    /// The status `PFDEBUG ENCODING` replies with: `dense` or `sparse`.
    pub fn name(self) -> &'static str {
        match self {
            Encoding::Dense => "dense",
            Encoding::Sparse => "sparse",
        }
    }
}

/// An error of a HyperLogLog command, displayed as Redis's exact error text
/// (without the leading `-`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HllError {
    /// The key holds a value that is not a string (Redis's generic
    /// `WRONGTYPE`, the same text as [`crate::value::ERR_WRONGTYPE`]).
    #[error("WRONGTYPE Operation against a key holding the wrong kind of value")]
    WrongType,
    /// A string that is not a HyperLogLog: shorter than the header, wrong
    /// magic, unknown encoding, or a dense one of the wrong length.
    #[error("WRONGTYPE Key is not a valid HyperLogLog string value.")]
    NotHll,
    /// A sparse HyperLogLog whose opcodes do not cover exactly 16384
    /// registers (found while decoding it).
    #[error("INVALIDOBJ Corrupted HLL object detected")]
    Corrupt,
    /// `PFDEBUG` on a missing key.
    #[error("ERR The specified key does not exist")]
    NoSuchKey,
    /// `PFDEBUG DECODE` on a dense HyperLogLog.
    #[error("ERR HLL encoding is not sparse")]
    NotSparse,
    /// `PFDEBUG <other>`: the subcommand as Redis prints it (cut at a NUL
    /// byte, CR/LF as spaces, invalid UTF-8 replaced).
    #[error("ERR Unknown PFDEBUG subcommand '{0}'")]
    UnknownSubcommand(String),
}

/// What a command that may rewrite the key's value produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome<T> {
    /// The reply (or the error reply).
    pub reply: Result<T, HllError>,
    /// The key's new value, when the command changed it (or created the
    /// key); `None`: leave the key as it is. It can be `Some` together with
    /// an error: Redis edits a sparse value in place element by element,
    /// and keeps what it edited before it met the corruption.
    pub new_value: Option<Vec<u8>>,
}

/// A `PFDEBUG` reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DebugReply {
    /// `GETREG`: the 16384 register values (an array of integers).
    Registers(Vec<u8>),
    /// `DECODE`: the opcodes, as a bulk string (`Z:n`, `z:n`, `v:val,len`).
    Decoded(String),
    /// `ENCODING`: the status reply `dense` or `sparse`.
    Encoding(Encoding),
    /// `TODENSE`: integer reply 1 if it converted a sparse value, else 0.
    Converted(bool),
}

// ---------------------------------------------------------------- hashing

/// MurmurHash64A (MurmurHash2, 64-bit, as Redis computes it: words read
/// little endian on every host).
pub fn murmurhash64a(key: &[u8], seed: u64) -> u64 {
    const M: u64 = 0xc6a4_a793_5bd1_e995;
    const R: u32 = 47;
    let mut h = seed ^ (key.len() as u64).wrapping_mul(M);
    let mut words = key.chunks_exact(8);
    for w in &mut words {
        let mut k = w
            .iter()
            .enumerate()
            .fold(0u64, |acc, (i, b)| acc | (u64::from(*b) << (8 * i)));
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h ^= k;
        h = h.wrapping_mul(M);
    }
    let tail = words.remainder();
    if !tail.is_empty() {
        for (i, b) in tail.iter().enumerate() {
            h ^= u64::from(*b) << (8 * i);
        }
        h = h.wrapping_mul(M);
    }
    h ^= h >> R;
    h = h.wrapping_mul(M);
    h ^= h >> R;
    h
}

/// The register an element lands in and the value it offers it: the index
/// is the hash's low 14 bits; the value is one plus the number of trailing
/// zero bits of the other 50 (capped at 51 by a stop bit at bit 50).
pub fn pat_len(element: &[u8]) -> (usize, u8) {
    let hash = murmurhash64a(element, MURMUR_SEED);
    let index = (hash & (REGISTERS as u64 - 1)) as usize;
    let rest = (hash >> HLL_P) | (1u64 << HLL_Q);
    (index, (rest.trailing_zeros() + 1) as u8)
}

// ------------------------------------------------------------ validation

/// Redis's check that a string value is a HyperLogLog (`PFADD`, `PFCOUNT`,
/// `PFMERGE`, `PFDEBUG` all run it first): at least a header, magic
/// `HYLL`, encoding 0 or 1, and exactly [`DENSE_LEN`] bytes when dense.
/// The sparse opcodes are not looked at here.
pub fn check(bytes: &[u8]) -> Result<Encoding, HllError> {
    if bytes.len() < HEADER_LEN || &bytes[..4] != MAGIC {
        return Err(HllError::NotHll);
    }
    match bytes[4] {
        ENC_DENSE if bytes.len() == DENSE_LEN => Ok(Encoding::Dense),
        ENC_SPARSE => Ok(Encoding::Sparse),
        _ => Err(HllError::NotHll),
    }
}

/// True if [`check`] accepts `bytes`.
pub fn is_hll(bytes: &[u8]) -> bool {
    check(bytes).is_ok()
}

/// The cached cardinality of a HyperLogLog string, if its header says the
/// cache is valid (top bit of byte 15 clear); `None` for a short string.
pub fn cached_cardinality(bytes: &[u8]) -> Option<u64> {
    let card: [u8; 8] = bytes.get(8..HEADER_LEN)?.try_into().ok()?;
    (card[7] & 0x80 == 0).then(|| u64::from_le_bytes(card))
}

/// A new, empty HyperLogLog as Redis creates it for `PFADD` / `PFMERGE` on
/// a missing key: sparse, cached cardinality 0 (valid), one XZERO of 16384.
pub fn new_sparse() -> Vec<u8> {
    let mut v = Vec::with_capacity(HEADER_LEN + 2);
    v.extend_from_slice(MAGIC);
    v.push(ENC_SPARSE);
    v.extend_from_slice(&[0; 11]);
    let mut left = REGISTERS;
    while left > 0 {
        let n = left.min(XZERO_MAX_LEN);
        v.extend_from_slice(&xzero_op(n));
        left -= n;
    }
    v
}

// ------------------------------------------------------- sparse opcodes

fn is_zero(b: u8) -> bool {
    b & 0xc0 == 0
}

fn is_xzero(b: u8) -> bool {
    b & 0xc0 == 0x40
}

fn is_val(b: u8) -> bool {
    b & 0x80 != 0
}

fn zero_len(b: u8) -> usize {
    usize::from(b & 0x3f) + 1
}

fn xzero_len(b0: u8, b1: u8) -> usize {
    ((usize::from(b0 & 0x3f) << 8) | usize::from(b1)) + 1
}

fn val_value(b: u8) -> u8 {
    ((b >> 2) & 0x1f) + 1
}

fn val_len(b: u8) -> usize {
    usize::from(b & 0x3) + 1
}

/// A VAL opcode (`value` in 1..=32, `len` in 1..=4).
fn val_op(value: u8, len: usize) -> u8 {
    0x80 | (value.wrapping_sub(1) << 2) | ((len.wrapping_sub(1) as u8) & 0x3)
}

/// A ZERO opcode (`len` in 1..=64).
fn zero_op(len: usize) -> u8 {
    (len.wrapping_sub(1) as u8) & 0x3f
}

/// An XZERO opcode (`len` in 1..=16384).
fn xzero_op(len: usize) -> [u8; 2] {
    let l = len.wrapping_sub(1);
    [0x40 | ((l >> 8) as u8 & 0x3f), l as u8]
}

/// One decoded opcode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Zero(usize),
    XZero(usize),
    Val(u8, usize),
}

impl Op {
    /// Registers it covers.
    fn span(self) -> usize {
        match self {
            Op::Zero(n) | Op::XZero(n) | Op::Val(_, n) => n,
        }
    }

    /// Bytes it takes.
    fn width(self) -> usize {
        match self {
            Op::XZero(_) => 2,
            _ => 1,
        }
    }
}

/// The opcode at `p`; the second byte of an XZERO at the very end is read
/// from past the end (`at` answers 0 there, like Redis's terminator).
fn op_at(at: impl Fn(usize) -> u8, p: usize) -> Op {
    let b = at(p);
    if is_zero(b) {
        Op::Zero(zero_len(b))
    } else if is_xzero(b) {
        Op::XZero(xzero_len(b, at(p + 1)))
    } else {
        Op::Val(val_value(b), val_len(b))
    }
}

/// Walks the sparse opcodes of the string `0..len` (read through `at`),
/// calling `visit(first_register, op)` for each; false if they do not
/// cover exactly 16384 registers (the walk stops at the first opcode that
/// would go past the last register).
fn walk_sparse(at: impl Fn(usize) -> u8, len: usize, mut visit: impl FnMut(usize, Op)) -> bool {
    let mut p = HEADER_LEN;
    let mut idx = 0usize;
    while p < len {
        let op = op_at(&at, p);
        if idx + op.span() > REGISTERS {
            return false;
        }
        visit(idx, op);
        idx += op.span();
        p += op.width();
    }
    idx == REGISTERS
}

fn slice_at(b: &[u8]) -> impl Fn(usize) -> u8 + '_ {
    move |i| b.get(i).copied().unwrap_or(0)
}

// ------------------------------------------------------- dense registers

/// Register `i` of the dense registers starting at byte `base`.
fn dense_get(at: impl Fn(usize) -> u8, base: usize, i: usize) -> u8 {
    let bit = i * 6;
    let byte = base + bit / 8;
    let fb = (bit & 7) as u32;
    let b0 = u32::from(at(byte));
    let b1 = u32::from(at(byte + 1));
    (((b0 >> fb) | (b1 << (8 - fb))) & REGISTER_MAX) as u8
}

/// Sets register `i` of the dense registers starting at `base` in `buf`
/// (bytes past `buf` are not written: for the last register the second
/// byte's update is a no-op anyway).
fn dense_put(buf: &mut [u8], base: usize, i: usize, val: u8) {
    let bit = i * 6;
    let byte = base + bit / 8;
    let fb = (bit & 7) as u32;
    let v = u32::from(val);
    if let Some(b) = buf.get_mut(byte) {
        *b = ((u32::from(*b) & !(REGISTER_MAX << fb)) | (v << fb)) as u8;
    }
    if let Some(b) = buf.get_mut(byte + 1) {
        *b = ((u32::from(*b) & !(REGISTER_MAX >> (8 - fb))) | (v >> (8 - fb))) as u8;
    }
}

/// Raises register `i` to `count` if it is lower; true if it changed.
fn dense_raise(buf: &mut [u8], base: usize, i: usize, count: u8) -> bool {
    let old = dense_get(slice_at(buf), base, i);
    if count > old {
        dense_put(buf, base, i, count);
        true
    } else {
        false
    }
}

// ------------------------------------------------------------ estimator

fn sigma(mut x: f64) -> f64 {
    if x == 1.0 {
        return f64::INFINITY;
    }
    let mut y = 1.0;
    let mut z = x;
    // Converges in well under a hundred rounds; the bound only guards
    // against a non-terminating loop on impossible inputs.
    for _ in 0..100_000 {
        x *= x;
        let prev = z;
        z += x * y;
        y += y;
        if prev == z {
            break;
        }
    }
    z
}

fn tau(mut x: f64) -> f64 {
    if x == 0.0 || x == 1.0 {
        return 0.0;
    }
    let mut y = 1.0;
    let mut z = 1.0 - x;
    for _ in 0..100_000 {
        x = x.sqrt();
        let prev = z;
        y *= 0.5;
        z -= (1.0 - x) * (1.0 - x) * y;
        if prev == z {
            break;
        }
    }
    z / 3.0
}

/// The estimate from the register histogram (`hist[v]` = registers of
/// value `v`), computed as Redis 7.0 does in doubles, including its result
/// on degenerate sketches (no finite estimate: 2^63, which Redis replies as
/// the integer -9223372036854775808).
fn estimate(hist: &[u64; 64]) -> u64 {
    let m = REGISTERS as f64;
    let mut z = m * tau((m - hist[HIST_TOP] as f64) / m);
    for j in (1..HIST_TOP).rev() {
        z += hist[j] as f64;
        z *= 0.5;
    }
    z += m * sigma(hist[0] as f64 / m);
    let v = ALPHA_INF * m * m / z;
    // llroundl: half away from zero; out of range (or NaN) gives LLONG_MIN
    // on x86-64, which the conversion to uint64_t turns into 2^63.
    if v.is_nan() || v.abs() >= 9_223_372_036_854_775_808.0 {
        return 1u64 << 63;
    }
    // z >= 0, so the rounded value is never negative.
    (v.round() as i64 as f64) as u64
}

/// The cardinality estimate of 16384 raw register values (one byte each,
/// values above 63 are ignored), as `PFCOUNT` computes it.
pub fn cardinality_of_registers(regs: &[u8]) -> u64 {
    let mut hist = [0u64; 64];
    for r in regs.iter().take(REGISTERS) {
        if let Some(h) = hist.get_mut(usize::from(*r)) {
            *h += 1;
        }
    }
    estimate(&hist)
}

fn dense_histogram(at: impl Fn(usize) -> u8) -> [u64; 64] {
    let mut hist = [0u64; 64];
    for i in 0..REGISTERS {
        hist[usize::from(dense_get(&at, HEADER_LEN, i))] += 1;
    }
    hist
}

fn sparse_histogram(at: impl Fn(usize) -> u8, len: usize) -> Option<[u64; 64]> {
    let mut hist = [0u64; 64];
    let valid = walk_sparse(at, len, |_, op| match op {
        Op::Zero(n) | Op::XZero(n) => hist[0] += n as u64,
        Op::Val(v, n) => hist[usize::from(v)] += n as u64,
    });
    valid.then_some(hist)
}

// ------------------------------------------------------- the sds buffer

/// The string being edited, as Redis's sds: `buf[..len]` is the value,
/// `buf[len]` its terminator (0 unless a split wrote past the end), with
/// spare room after it.
struct Sds {
    buf: Vec<u8>,
    len: usize,
}

impl Sds {
    fn new(mut bytes: Vec<u8>) -> Sds {
        let len = bytes.len();
        bytes.push(0);
        Sds { buf: bytes, len }
    }

    fn into_vec(mut self) -> Vec<u8> {
        self.buf.truncate(self.len);
        self.buf
    }

    fn at(&self, i: usize) -> u8 {
        self.buf.get(i).copied().unwrap_or(0)
    }

    fn put(&mut self, i: usize, v: u8) {
        if let Some(b) = self.buf.get_mut(i) {
            *b = v;
        }
    }

    fn encoding(&self) -> u8 {
        self.at(4)
    }

    /// Room for `n` more bytes after the terminator.
    fn make_room(&mut self, n: usize) {
        let need = self.len + 1 + n;
        if self.buf.len() < need {
            self.buf.resize(need, 0);
        }
    }

    /// `sdsIncrLen`: the new length, and a terminator after it.
    fn set_len(&mut self, len: usize) {
        self.len = len;
        if self.buf.len() <= len {
            self.buf.resize(len + 1, 0);
        }
        self.put(len, 0);
    }

    /// `memmove(dst, src, n)` within the buffer.
    fn move_bytes(&mut self, dst: usize, src: usize, n: usize) {
        let need = dst.max(src) + n;
        if self.buf.len() < need {
            self.buf.resize(need, 0);
        }
        self.buf.copy_within(src..src + n, dst);
    }

    fn write(&mut self, p: usize, bytes: &[u8]) {
        let need = p + bytes.len();
        if self.buf.len() < need {
            self.buf.resize(need, 0);
        }
        self.buf[p..need].copy_from_slice(bytes);
    }

    fn invalidate_cache(&mut self) {
        let b = self.at(15) | 0x80;
        self.put(15, b);
    }

    /// `hllSparseToDense`: a no-op on a dense value; Err (and nothing
    /// changed) if the sparse opcodes are corrupt.
    fn make_dense(&mut self) -> Result<bool, HllError> {
        if self.encoding() == ENC_DENSE {
            return Ok(false);
        }
        let mut dense = vec![0u8; DENSE_LEN + 1];
        for (i, d) in dense.iter_mut().take(HEADER_LEN).enumerate() {
            *d = self.at(i);
        }
        dense[4] = ENC_DENSE;
        let valid = walk_sparse(
            |i| self.at(i),
            self.len,
            |first, op| {
                if let Op::Val(v, n) = op {
                    for r in first..first + n {
                        dense_put(&mut dense, HEADER_LEN, r, v);
                    }
                }
            },
        );
        if !valid {
            return Err(HllError::Corrupt);
        }
        dense[DENSE_LEN] = 0;
        self.buf = dense;
        self.len = DENSE_LEN;
        Ok(true)
    }

    /// `hllDenseSet` on a dense value.
    fn dense_raise(&mut self, index: usize, count: u8) -> bool {
        dense_raise(&mut self.buf, HEADER_LEN, index, count)
    }

    /// `hllSparseSet`: raises register `index` to `count` in a sparse
    /// value, editing the opcodes in place, or promoting the value to
    /// dense. Ok(true) if the register changed.
    fn sparse_raise(
        &mut self,
        index: usize,
        count: u8,
        sparse_max: usize,
    ) -> Result<bool, HllError> {
        if count > VAL_MAX_VALUE {
            return self.promote(index, count);
        }
        self.make_room(3);

        // Step 1: the opcode that covers `index`.
        let sparse = HEADER_LEN;
        let mut end = self.len;
        let mut p = sparse;
        let mut first = 0usize;
        let mut prev: Option<usize> = None;
        let mut found: Option<Op> = None;
        while p < end {
            let op = op_at(|i| self.at(i), p);
            if index < first + op.span() {
                found = Some(op);
                break;
            }
            prev = Some(p);
            p += op.width();
            first += op.span();
        }
        let op = match found {
            Some(op) if p < end => op,
            _ => return Err(HllError::Corrupt),
        };
        let next = Some(p + op.width()).filter(|n| *n < end);
        let span = op.span();

        // Step 2: trivial in-place updates.
        let mut trivial = false;
        if let Op::Val(old, runlen) = op {
            if old >= count {
                return Ok(false);
            }
            if runlen == 1 {
                self.put(p, val_op(count, 1));
                trivial = true;
            }
        }
        if op == Op::Zero(1) {
            self.put(p, val_op(count, 1));
            trivial = true;
        }

        if !trivial {
            // The general case: split the opcode into up to three.
            let mut seq: Vec<u8> = Vec::with_capacity(5);
            let last = first + span - 1;
            match op {
                Op::Zero(_) | Op::XZero(_) => {
                    let zeros = |len: usize, seq: &mut Vec<u8>| {
                        if len > ZERO_MAX_LEN {
                            seq.extend_from_slice(&xzero_op(len));
                        } else {
                            seq.push(zero_op(len));
                        }
                    };
                    if index != first {
                        zeros(index - first, &mut seq);
                    }
                    seq.push(val_op(count, 1));
                    if index != last {
                        zeros(last - index, &mut seq);
                    }
                }
                Op::Val(cur, _) => {
                    if index != first {
                        seq.push(val_op(cur, index - first));
                    }
                    seq.push(val_op(count, 1));
                    if index != last {
                        seq.push(val_op(cur, last - index));
                    }
                }
            }

            // Step 3: put the new sequence in place of the old opcode.
            let oldlen = op.width();
            let seqlen = seq.len();
            if seqlen > oldlen && self.len + (seqlen - oldlen) > sparse_max {
                return self.promote(index, count);
            }
            if seqlen != oldlen {
                if let Some(nx) = next {
                    let dst = nx + seqlen - oldlen;
                    self.move_bytes(dst, nx, end - nx);
                }
            }
            let new_len = self.len + seqlen - oldlen;
            self.set_len(new_len);
            self.write(p, &seq);
            end = end + seqlen - oldlen;
        }

        // Step 4: merge adjacent VAL opcodes of equal value, looking at up
        // to five opcodes from the one before the edited one.
        let mut q = prev.unwrap_or(sparse);
        let mut scanlen: i32 = 5;
        while q < end {
            let go = scanlen != 0;
            scanlen -= 1;
            if !go {
                break;
            }
            let b = self.at(q);
            if is_xzero(b) {
                q += 2;
                continue;
            } else if is_zero(b) {
                q += 1;
                continue;
            }
            let b1 = self.at(q + 1);
            if q + 1 < end && is_val(b1) {
                let v1 = val_value(b);
                if v1 == val_value(b1) {
                    let len = val_len(b) + val_len(b1);
                    if len <= VAL_MAX_LEN {
                        self.put(q + 1, val_op(v1, len));
                        self.move_bytes(q, q + 1, end - q);
                        let new_len = self.len - 1;
                        self.set_len(new_len);
                        end -= 1;
                        continue;
                    }
                }
            }
            q += 1;
        }
        self.invalidate_cache();
        Ok(true)
    }

    /// The promotion path of `hllSparseSet`: convert, then set.
    fn promote(&mut self, index: usize, count: u8) -> Result<bool, HllError> {
        self.make_dense()?;
        // The register was below `count` (sparse values are <= 32), so
        // this always changes it, as Redis asserts.
        Ok(self.dense_raise(index, count))
    }

    /// `hllAdd` of one element.
    fn add(&mut self, element: &[u8], sparse_max: usize) -> Result<bool, HllError> {
        let (index, count) = pat_len(element);
        match self.encoding() {
            ENC_DENSE => Ok(self.dense_raise(index, count)),
            ENC_SPARSE => self.sparse_raise(index, count, sparse_max),
            _ => Err(HllError::Corrupt),
        }
    }
}

// ------------------------------------------------------ byte-level API

/// `PFADD` on an existing HyperLogLog string: adds `elements` in order
/// (sparse values are edited in place and promoted to dense when a register
/// exceeds 32 or the string would exceed `sparse_max` bytes). Ok(true) if a
/// register changed; then the cached cardinality is marked invalid.
///
/// For a missing key use [`pfadd`] (or start from [`new_sparse`] and set
/// the stale-cache bit: Redis counts the creation as an update).
///
/// Err([`HllError::NotHll`]) leaves `bytes` untouched. On
/// Err([`HllError::Corrupt`]) `bytes` holds what Redis keeps: the edits of
/// the elements before the one that met the corruption.
pub fn add(bytes: &mut Vec<u8>, elements: &[&[u8]], sparse_max: usize) -> Result<bool, HllError> {
    check(bytes)?;
    let mut s = Sds::new(std::mem::take(bytes));
    let mut updated = false;
    let mut result = Ok(());
    for e in elements {
        match s.add(e, sparse_max) {
            Ok(changed) => updated |= changed,
            Err(err) => {
                result = Err(err);
                break;
            }
        }
    }
    if result.is_ok() && updated {
        s.invalidate_cache();
    }
    *bytes = s.into_vec();
    result.map(|()| updated)
}

/// `PFCOUNT` of one key: the cached cardinality if the header's cache is
/// valid (then `bytes` is untouched and the flag is false), else the
/// estimate, written into the header as the new cache (flag true: Redis
/// then counts the key as modified and propagates it, without a keyspace
/// event). A corrupt sparse value is an error and is left untouched.
pub fn count(bytes: &mut [u8]) -> Result<(u64, bool), HllError> {
    let enc = check(bytes)?;
    if let Some(card) = cached_cardinality(bytes) {
        return Ok((card, false));
    }
    let hist = match enc {
        Encoding::Dense => dense_histogram(slice_at(bytes)),
        Encoding::Sparse => {
            sparse_histogram(slice_at(bytes), bytes.len()).ok_or(HllError::Corrupt)?
        }
    };
    let card = estimate(&hist);
    bytes[8..HEADER_LEN].copy_from_slice(&card.to_le_bytes());
    Ok((card, true))
}

/// Raises `max[i]` to register `i` of the (already checked) HyperLogLog
/// `bytes` (`hllMerge`).
fn merge_registers(max: &mut [u8], bytes: &[u8], enc: Encoding) -> Result<(), HllError> {
    match enc {
        Encoding::Dense => {
            for (i, m) in max.iter_mut().enumerate().take(REGISTERS) {
                let v = dense_get(slice_at(bytes), HEADER_LEN, i);
                if v > *m {
                    *m = v;
                }
            }
            Ok(())
        }
        Encoding::Sparse => {
            let valid = walk_sparse(slice_at(bytes), bytes.len(), |first, op| {
                if let Op::Val(v, n) = op {
                    for m in max.iter_mut().skip(first).take(n) {
                        if v > *m {
                            *m = v;
                        }
                    }
                }
            });
            if valid {
                Ok(())
            } else {
                Err(HllError::Corrupt)
            }
        }
    }
}

/// `PFCOUNT` of several keys: the estimate of the union of `hlls` (missing
/// keys left out by the caller), checking and merging them in order (the
/// first failing one gives the error); nothing is modified.
pub fn count_union(hlls: &[&[u8]]) -> Result<u64, HllError> {
    let mut max = vec![0u8; REGISTERS];
    for b in hlls {
        let enc = check(b)?;
        merge_registers(&mut max, b, enc)?;
    }
    Ok(cardinality_of_registers(&max))
}

/// The max-merge of already read inputs into the destination value (the
/// tail of `PFMERGE`).
fn merge_into_dest(
    dest: Option<&[u8]>,
    max: &[u8],
    use_dense: bool,
    sparse_max: usize,
) -> Result<Vec<u8>, HllError> {
    let mut s = Sds::new(dest.map_or_else(new_sparse, <[u8]>::to_vec));
    if use_dense {
        s.make_dense()?;
    }
    for (j, m) in max.iter().enumerate().take(REGISTERS) {
        if *m == 0 {
            continue;
        }
        match s.encoding() {
            ENC_DENSE => {
                s.dense_raise(j, *m);
            }
            ENC_SPARSE => {
                // Redis ignores a failure here (the destination was
                // validated as a source); a failed set changes nothing.
                let _ = s.sparse_raise(j, *m, sparse_max);
            }
            _ => {}
        }
    }
    s.invalidate_cache();
    Ok(s.into_vec())
}

/// `PFMERGE` on bytes: the destination's new value. `dest` is the
/// destination's current value (`None`: missing key), which Redis merges as
/// the first source; `sources` are the other existing keys, in order. The
/// result stays sparse when the destination is sparse (or new), every
/// source is sparse and the registers fit (values <= 32 within
/// `sparse_max`); otherwise it is dense. Its cache is marked invalid.
pub fn merge(
    dest: Option<&[u8]>,
    sources: &[&[u8]],
    sparse_max: usize,
) -> Result<Vec<u8>, HllError> {
    let mut max = vec![0u8; REGISTERS];
    let mut use_dense = false;
    for b in dest.iter().chain(sources.iter()) {
        let enc = check(b)?;
        use_dense |= enc == Encoding::Dense;
        merge_registers(&mut max, b, enc)?;
    }
    merge_into_dest(dest, &max, use_dense, sparse_max)
}

/// The 16384 register values of a HyperLogLog string (sparse decoded;
/// corrupt sparse: Err), without changing it.
pub fn registers(bytes: &[u8]) -> Result<Vec<u8>, HllError> {
    let enc = check(bytes)?;
    let mut regs = vec![0u8; REGISTERS];
    merge_registers(&mut regs, bytes, enc)?;
    Ok(regs)
}

/// `PFDEBUG TODENSE` (and the first step of `GETREG`): converts a sparse
/// value to dense in place; Ok(true) if it converted, Ok(false) if it was
/// dense already. The header (unused bytes, cached cardinality) is kept.
pub fn to_dense(bytes: &mut Vec<u8>) -> Result<bool, HllError> {
    check(bytes)?;
    let mut s = Sds::new(std::mem::take(bytes));
    let r = s.make_dense();
    *bytes = s.into_vec();
    r
}

/// `PFDEBUG DECODE`: the opcodes of a sparse value as Redis prints them
/// (`Z:n` XZERO, `z:n` ZERO, `v:value,len` VAL, space separated), without
/// checking that they cover 16384 registers.
pub fn decode_sparse(bytes: &[u8]) -> Result<String, HllError> {
    if check(bytes)? != Encoding::Sparse {
        return Err(HllError::NotSparse);
    }
    let mut out = Vec::new();
    let mut p = HEADER_LEN;
    while p < bytes.len() {
        let op = op_at(slice_at(bytes), p);
        out.push(match op {
            Op::Zero(n) => format!("z:{n}"),
            Op::XZero(n) => format!("Z:{n}"),
            Op::Val(v, n) => format!("v:{v},{n}"),
        });
        p += op.width();
    }
    Ok(out.join(" "))
}

// --------------------------------------------------- command-level API

/// The bytes of a key's value for the HyperLogLog commands: `None` for a
/// missing key, [`HllError::WrongType`] for a non-string.
fn string_of(v: Option<&Value>) -> Result<Option<&[u8]>, HllError> {
    match v {
        None => Ok(None),
        Some(Value::Str(b)) => Ok(Some(b)),
        Some(_) => Err(HllError::WrongType),
    }
}

/// `PFADD key [element ...]`: `current` is the key's value. The reply is
/// Ok(true) (integer 1) when the key was created or a register changed —
/// then Redis signals the key and fires the `pfadd` keyspace event — and
/// Ok(false) (0) otherwise. `new_value` is the value to store (also on a
/// `Corrupt` error, if elements before the bad one changed it).
pub fn pfadd(current: Option<&Value>, elements: &[&[u8]], sparse_max: usize) -> Outcome<bool> {
    let (mut bytes, created) = match string_of(current) {
        Err(e) => {
            return Outcome {
                reply: Err(e),
                new_value: None,
            }
        }
        Ok(None) => (new_sparse(), true),
        Ok(Some(b)) => {
            if let Err(e) = check(b) {
                return Outcome {
                    reply: Err(e),
                    new_value: None,
                };
            }
            (b.to_vec(), false)
        }
    };
    let reply = add(&mut bytes, elements, sparse_max).map(|changed| changed || created);
    if created {
        // Creating the key counts as an update: the cache is marked stale.
        if let Some(b) = bytes.get_mut(15) {
            *b |= 0x80;
        }
    }
    let changed = created || current.is_some_and(|v| !matches!(v, Value::Str(b) if *b == bytes));
    Outcome {
        reply,
        new_value: changed.then_some(bytes),
    }
}

/// `PFCOUNT key [key ...]`: `values` are the keys' values in order. With
/// one key, a stale cache is recomputed and the refreshed value comes back
/// in `new_value` (Redis treats this as a modification of the key: it
/// touches `WATCH` and is propagated, but fires no keyspace event). With
/// several keys nothing is modified. The reply is the integer Redis sends
/// (an estimate of 2^63 from a degenerate dense sketch is sent as
/// -9223372036854775808).
pub fn pfcount(values: &[Option<&Value>]) -> Outcome<i64> {
    if let [single] = values {
        return match string_of(*single) {
            Err(e) => Outcome {
                reply: Err(e),
                new_value: None,
            },
            Ok(None) => Outcome {
                reply: Ok(0),
                new_value: None,
            },
            Ok(Some(b)) => {
                let mut bytes = b.to_vec();
                match count(&mut bytes) {
                    Ok((card, refreshed)) => Outcome {
                        reply: Ok(card as i64),
                        new_value: refreshed.then_some(bytes),
                    },
                    Err(e) => Outcome {
                        reply: Err(e),
                        new_value: None,
                    },
                }
            }
        };
    }
    let run = || -> Result<i64, HllError> {
        let mut max = vec![0u8; REGISTERS];
        for v in values {
            if let Some(b) = string_of(*v)? {
                let enc = check(b)?;
                merge_registers(&mut max, b, enc)?;
            }
        }
        Ok(cardinality_of_registers(&max) as i64)
    };
    Outcome {
        reply: run(),
        new_value: None,
    }
}

/// `PFMERGE destkey [sourcekey ...]`: `values[0]` is the destination's
/// current value and `values[1..]` the sources' (Redis reads the
/// destination as the first source). Ok: the destination's new value, to
/// store (reply `OK`; Redis signals the key and fires `pfadd`); Err: the
/// error reply, nothing changed.
pub fn pfmerge(values: &[Option<&Value>], sparse_max: usize) -> Result<Vec<u8>, HllError> {
    let mut max = vec![0u8; REGISTERS];
    let mut use_dense = false;
    for v in values {
        if let Some(b) = string_of(*v)? {
            let enc = check(b)?;
            use_dense |= enc == Encoding::Dense;
            merge_registers(&mut max, b, enc)?;
        }
    }
    let dest = match values.first() {
        Some(v) => string_of(*v)?,
        None => None,
    };
    merge_into_dest(dest, &max, use_dense, sparse_max)
}

/// How Redis prints a client's bytes with `%s` in an error: cut at a NUL,
/// CR and LF as spaces.
fn error_text(b: &[u8]) -> String {
    let b = b.split(|c| *c == 0).next().unwrap_or(&[]);
    String::from_utf8_lossy(b).replace(['\r', '\n'], " ")
}

/// `PFDEBUG subcommand key` (the command's arity is exactly 3, checked by
/// the command table): `value` is the key's value. `GETREG` and `TODENSE`
/// convert a sparse value to dense in place, returned in `new_value` (Redis
/// propagates it; no keyspace event). The key is looked up and checked
/// before the subcommand is: a missing key or a wrong type wins over an
/// unknown subcommand.
pub fn pfdebug(subcommand: &[u8], value: Option<&Value>) -> Outcome<DebugReply> {
    let fail = |e| Outcome {
        reply: Err(e),
        new_value: None,
    };
    let bytes = match string_of(value) {
        Err(e) => return fail(e),
        Ok(None) => return fail(HllError::NoSuchKey),
        Ok(Some(b)) => b,
    };
    let enc = match check(bytes) {
        Err(e) => return fail(e),
        Ok(enc) => enc,
    };
    let sub = subcommand.to_ascii_lowercase();
    match sub.as_slice() {
        b"getreg" | b"todense" => {
            let mut v = bytes.to_vec();
            let converted = match to_dense(&mut v) {
                Err(e) => return fail(e),
                Ok(c) => c,
            };
            let reply = if sub == b"getreg" {
                DebugReply::Registers(
                    (0..REGISTERS)
                        .map(|i| dense_get(slice_at(&v), HEADER_LEN, i))
                        .collect(),
                )
            } else {
                DebugReply::Converted(converted)
            };
            Outcome {
                reply: Ok(reply),
                new_value: converted.then_some(v),
            }
        }
        b"decode" => match decode_sparse(bytes) {
            Ok(s) => Outcome {
                reply: Ok(DebugReply::Decoded(s)),
                new_value: None,
            },
            Err(e) => fail(e),
        },
        b"encoding" => Outcome {
            reply: Ok(DebugReply::Encoding(enc)),
            new_value: None,
        },
        _ => fail(HllError::UnknownSubcommand(error_text(subcommand))),
    }
}

#[cfg(test)]
mod tests;
