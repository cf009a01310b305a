//! Listpacks (Redis 7's compact sequence), read with the deep checks of
//! Redis's `lpValidateIntegrity`, and written as Redis's `lpAppend` does.
//!
//! Layout: total bytes (u32 LE), number of entries (u16 LE, 65535 when
//! unknown), the entries, and a 0xFF terminator. An entry is its encoding
//! (with the data) then a "backlen": the entry's encoded length, written
//! big-endian-first in 7-bit groups, the high bit marking every byte but
//! the first, so that it can be read backwards.
//!
//! Encodings by first byte: `0xxxxxxx` 7-bit unsigned integer;
//! `10xxxxxx` string of up to 63 bytes; `110xxxxx yyyyyyyy` 13-bit signed
//! integer; `1110xxxx yyyyyyyy` string of up to 4095 bytes; `0xF0` + u32
//! LE length: longer string; `0xF1`/`0xF2`/`0xF3`/`0xF4`: 16/24/32/64-bit
//! signed little-endian integers. Any other byte is invalid.

use super::Entry;

/// Bytes of the header.
const HDR: usize = 6;
const EOF: u8 = 0xff;
/// The entry count of a listpack with 65535 entries or more.
const NUMELE_UNKNOWN: u16 = u16::MAX;

/// Bytes of the backlen of an entry of `l` bytes.
fn backlen_size(l: u64) -> u64 {
    match l {
        0..=127 => 1,
        128..=16382 => 2,
        16383..=2097150 => 3,
        2097151..=268435454 => 4,
        _ => 5,
    }
}

fn write_backlen(out: &mut Vec<u8>, l: u64) {
    let n = backlen_size(l);
    for i in (0..n).rev() {
        let group = ((l >> (7 * i)) & 127) as u8;
        // The first byte written (most significant group) has no flag.
        out.push(if i == n - 1 { group } else { group | 128 });
    }
}

/// Reads a backlen backwards from its last byte at `end`; `None` when it
/// runs over 5 bytes (Redis: "invalid").
fn read_backlen(lp: &[u8], end: usize) -> Option<u64> {
    let mut val: u64 = 0;
    let mut shift = 0;
    let mut i = end;
    loop {
        let b = *lp.get(i)?;
        val |= u64::from(b & 127) << shift;
        if b & 128 == 0 {
            return Some(val);
        }
        shift += 7;
        if shift > 28 {
            return None;
        }
        i = i.checked_sub(1)?;
    }
}

/// Bytes of the encoding and length part of the entry starting with `b`
/// (0: invalid encoding).
fn header_bytes(b: u8) -> usize {
    match b {
        0x00..=0x7f | 0x80..=0xbf | 0xc0..=0xdf | 0xf1..=0xf4 | EOF => 1,
        0xe0..=0xef => 2,
        0xf0 => 5,
        _ => 0,
    }
}

fn le(bytes: &[u8]) -> u64 {
    bytes
        .iter()
        .rev()
        .fold(0u64, |acc, &b| (acc << 8) | u64::from(b))
}

/// Sign-extends the low `bits` bits of `v`.
fn signed(v: u64, bits: u32) -> i64 {
    let shift = 64 - bits;
    ((v << shift) as i64) >> shift
}

/// The entries of listpack `lp`, or `None` unless it passes Redis's deep
/// integrity check: header length equal to the blob's, terminator last,
/// every entry's encoding valid and inside the blob, every backlen equal
/// to its entry's length, the terminator right after the last entry, and
/// the header's count (unless 65535) equal to the number of entries.
pub(crate) fn parse(lp: &[u8]) -> Option<Vec<Entry<'_>>> {
    let size = lp.len();
    if size < HDR + 1 || le(lp.get(0..4)?) != size as u64 || lp.last() != Some(&EOF) {
        return None;
    }
    let numele = le(lp.get(4..6)?) as u16;
    let last = size - 1;
    let mut entries = Vec::new();
    let mut p = HDR;
    while *lp.get(p)? != EOF {
        let b = lp[p];
        let hb = header_bytes(b);
        if hb == 0 || p + hb > last {
            return None;
        }
        // Encoding + data length, before the backlen.
        let (enc_len, entry) = match b {
            0x00..=0x7f => (1u64, Entry::Int(i64::from(b))),
            0x80..=0xbf => {
                let n = u64::from(b & 0x3f);
                (1 + n, Entry::Str(&[]))
            }
            0xc0..=0xdf => {
                let v = (u64::from(b & 0x1f) << 8) | u64::from(*lp.get(p + 1)?);
                (2, Entry::Int(signed(v, 13)))
            }
            0xe0..=0xef => {
                let n = (u64::from(b & 0x0f) << 8) | u64::from(lp[p + 1]);
                (2 + n, Entry::Str(&[]))
            }
            0xf0 => (5 + le(&lp[p + 1..p + 5]), Entry::Str(&[])),
            0xf1 => (3, Entry::Int(0)),
            0xf2 => (4, Entry::Int(0)),
            0xf3 => (5, Entry::Int(0)),
            _ => (9, Entry::Int(0)),
        };
        let bl = backlen_size(enc_len);
        let total = enc_len + bl;
        let next = (p as u64).checked_add(total)?;
        if next > last as u64 {
            return None;
        }
        let next = next as usize;
        if read_backlen(lp, next - 1)? + bl != total {
            return None;
        }
        let body = lp.get(p + hb..p + enc_len as usize)?;
        let entry = match (entry, b) {
            (Entry::Str(_), _) => Entry::Str(body),
            (e, 0x00..=0xdf) => e,
            (_, 0xf1) => Entry::Int(signed(le(body), 16)),
            (_, 0xf2) => Entry::Int(signed(le(body), 24)),
            (_, 0xf3) => Entry::Int(signed(le(body), 32)),
            (_, _) => Entry::Int(le(body) as i64),
        };
        entries.push(entry);
        p = next;
    }
    if p != last {
        return None;
    }
    if numele != NUMELE_UNKNOWN && usize::from(numele) != entries.len() {
        return None;
    }
    Some(entries)
}

/// A listpack being built by appending, as Redis's `lpAppend`: an element
/// that is a canonical 64-bit integer is stored as an integer, in the
/// smallest encoding; anything else as a string.
pub(crate) struct Writer {
    buf: Vec<u8>,
    count: usize,
}

impl Writer {
    pub(crate) fn new() -> Writer {
        Writer {
            buf: vec![0; HDR],
            count: 0,
        }
    }

    /// The listpack's total bytes as it stands (terminator included).
    pub(crate) fn bytes(&self) -> usize {
        self.buf.len() + 1
    }

    /// Appends an element.
    pub(crate) fn append(&mut self, ele: &[u8]) {
        match super::string2ll(ele) {
            Some(v) => self.append_int(v),
            None => self.append_str(ele),
        }
    }

    /// Appends an integer element.
    pub(crate) fn append_int(&mut self, v: i64) {
        let start = self.buf.len();
        let b = &mut self.buf;
        if (0..=127).contains(&v) {
            b.push(v as u8);
        } else if (-4096..=4095).contains(&v) {
            let u = (v as u64) & 0x1fff;
            b.push(0xc0 | (u >> 8) as u8);
            b.push((u & 0xff) as u8);
        } else {
            let (tag, n) = if (-32768..=32767).contains(&v) {
                (0xf1, 2)
            } else if (-8_388_608..=8_388_607).contains(&v) {
                (0xf2, 3)
            } else if i32::try_from(v).is_ok() {
                (0xf3, 4)
            } else {
                (0xf4, 8)
            };
            b.push(tag);
            b.extend_from_slice(&v.to_le_bytes()[..n]);
        }
        let len = (self.buf.len() - start) as u64;
        write_backlen(&mut self.buf, len);
        self.count += 1;
    }

    /// Appends a string element as a string.
    fn append_str(&mut self, s: &[u8]) {
        let start = self.buf.len();
        let n = s.len();
        if n < 64 {
            self.buf.push(0x80 | n as u8);
        } else if n < 4096 {
            self.buf.push(0xe0 | (n >> 8) as u8);
            self.buf.push((n & 0xff) as u8);
        } else {
            self.buf.push(0xf0);
            self.buf.extend_from_slice(&(n as u32).to_le_bytes());
        }
        self.buf.extend_from_slice(s);
        let len = (self.buf.len() - start) as u64;
        write_backlen(&mut self.buf, len);
        self.count += 1;
    }

    /// The finished listpack.
    pub(crate) fn finish(mut self) -> Vec<u8> {
        self.buf.push(EOF);
        let total = self.buf.len() as u32;
        self.buf[0..4].copy_from_slice(&total.to_le_bytes());
        let numele = u16::try_from(self.count)
            .ok()
            .filter(|&c| c != NUMELE_UNKNOWN)
            .unwrap_or(NUMELE_UNKNOWN);
        self.buf[4..6].copy_from_slice(&numele.to_le_bytes());
        self.buf
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn build(items: &[&[u8]]) -> Vec<u8> {
        let mut w = Writer::new();
        for i in items {
            w.append(i);
        }
        w.finish()
    }

    #[test]
    fn writes_what_redis_writes() {
        // The listpack inside Redis 7.0.15's DUMP of `RPUSH l a b 1 2`.
        assert_eq!(
            build(&[b"a", b"b", b"1", b"2"]),
            b"\x11\x00\x00\x00\x04\x00\x81a\x02\x81b\x02\x01\x01\x02\x01\xff"
        );
        // `ZADD zl 1 a 2.5 b`.
        assert_eq!(
            build(&[b"a", b"1", b"b", b"2.5"]),
            b"\x14\x00\x00\x00\x04\x00\x81a\x02\x01\x01\x81b\x02\x832.5\x04\xff"
        );
    }

    #[test]
    fn integers_round_trip_in_every_encoding() {
        let vals: Vec<i64> = vec![
            0,
            127,
            128,
            -1,
            -4096,
            4095,
            4096,
            -4097,
            32767,
            -32768,
            32768,
            8_388_607,
            -8_388_608,
            8_388_608,
            i32::MAX as i64,
            i32::MIN as i64,
            1 << 40,
            i64::MAX,
            i64::MIN,
        ];
        let mut w = Writer::new();
        for v in &vals {
            w.append(v.to_string().as_bytes());
        }
        let lp = w.finish();
        let got: Vec<i64> = parse(&lp)
            .unwrap()
            .into_iter()
            .map(|e| match e {
                Entry::Int(i) => i,
                Entry::Str(s) => panic!("string {s:?}"),
            })
            .collect();
        assert_eq!(got, vals);
    }

    #[test]
    fn strings_round_trip_in_every_encoding() {
        let items: Vec<Vec<u8>> = [0usize, 1, 63, 64, 127, 128, 4095, 4096, 20000]
            .iter()
            .map(|&n| vec![b'x'; n])
            .chain([
                b"-0".to_vec(),
                b"007".to_vec(),
                b"9223372036854775808".to_vec(),
            ])
            .collect();
        let refs: Vec<&[u8]> = items.iter().map(|v| v.as_slice()).collect();
        let lp = build(&refs);
        let got: Vec<Vec<u8>> = parse(&lp)
            .unwrap()
            .into_iter()
            .map(Entry::to_bytes)
            .collect();
        assert_eq!(got, items);
        for e in parse(&lp).unwrap() {
            assert!(matches!(e, Entry::Str(_)));
        }
    }

    #[test]
    fn refuses_corrupt_listpacks() {
        let good = build(&[b"a", b"b", b"1", b"2"]);
        assert!(parse(&good).is_some());
        let mut bad: Vec<Vec<u8>> = Vec::new();
        let mut b = good.clone();
        b[0] = 0x12; // total bytes
        bad.push(b);
        let mut b = good.clone();
        b[4] = 3; // count
        bad.push(b);
        let mut b = good.clone();
        b[8] = 0x03; // backlen of "a"
        bad.push(b);
        let mut b = good.clone();
        b[6] = 0xf5; // invalid encoding
        bad.push(b);
        let mut b = good.clone();
        b[6] = 0x85; // string longer than the listpack
        bad.push(b);
        let mut b = good.clone();
        b[12] = 0xff; // early terminator
        bad.push(b);
        let mut b = good.clone();
        *b.last_mut().unwrap() = 0;
        bad.push(b);
        bad.push(good[..6].to_vec());
        for (i, b) in bad.iter().enumerate() {
            assert!(parse(b).is_none(), "case {i}");
        }
        // Unknown count is accepted.
        let mut b = good.clone();
        b[4] = 0xff;
        b[5] = 0xff;
        assert_eq!(parse(&b).map(|e| e.len()), Some(4));
        // Every truncation and every single-byte change: no panic.
        for n in 0..good.len() {
            let _ = parse(&good[..n]);
        }
        for i in 0..good.len() {
            for v in 0..=255u8 {
                let mut b = good.clone();
                b[i] = v;
                let _ = parse(&b);
            }
        }
    }
}
