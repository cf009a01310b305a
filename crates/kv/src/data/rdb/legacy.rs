//! The older compact encodings RDB payloads may still carry: ziplists
//! (lists, hashes and sorted sets before Redis 7), zipmaps (hashes before
//! Redis 2.6) and intsets (small sets of integers, still written by Redis
//! 7.0). Each reader applies the deep checks of Redis's
//! `*ValidateIntegrity` and returns `None` where Redis refuses.

use super::Entry;

fn le(bytes: &[u8]) -> u64 {
    bytes
        .iter()
        .rev()
        .fold(0u64, |acc, &b| (acc << 8) | u64::from(b))
}

fn sign_extend(v: u64, bits: u32) -> i64 {
    let shift = 64 - bits;
    ((v << shift) as i64) >> shift
}

/// The entries of ziplist `zl`, checked as Redis's
/// `ziplistValidateIntegrity(deep)`.
///
/// Layout: total bytes (u32 LE), offset of the last entry (u32 LE), number
/// of entries (u16 LE, 65535 when unknown), entries, 0xFF. An entry is the
/// previous entry's length (1 byte below 254, else 0xFE + u32 LE), then
/// the encoding: `00pppppp` / `01pppppp qqqqqqqq` / `10______` + u32 BE:
/// strings of 6/14/32-bit length; `0xC0`/`0xD0`/`0xE0`/`0xF0`/`0xFE`:
/// 16/32/64/24/8-bit signed little-endian integers; `0xF1..=0xFD`: the
/// integers 0..=12 with no data.
pub(crate) fn ziplist(zl: &[u8]) -> Option<Vec<Entry<'_>>> {
    const HDR: usize = 10;
    let size = zl.len();
    if size < HDR + 1 || le(zl.get(0..4)?) != size as u64 || zl.last() != Some(&0xff) {
        return None;
    }
    let last = size - 1;
    let tail = le(zl.get(4..8)?);
    if tail > last as u64 {
        return None;
    }
    let header_count = le(zl.get(8..10)?) as u16;
    let mut entries = Vec::new();
    let mut p = HDR;
    let mut prev: Option<usize> = None;
    let mut prev_raw: u64 = 0;
    while *zl.get(p)? != 0xff {
        let prevlen_size = if zl[p] < 0xfe { 1 } else { 5 };
        if p + prevlen_size > last {
            return None;
        }
        let e = zl[p + prevlen_size];
        let encoding = if e < 0xc0 { e & 0xc0 } else { e };
        let len_size = match encoding {
            0x00 => 1,
            0x40 => 2,
            0x80 => 5,
            0xc0 | 0xd0 | 0xe0 | 0xf0 | 0xfe | 0xf1..=0xfd => 1,
            _ => return None,
        };
        if p + prevlen_size + len_size > last {
            return None;
        }
        let prevlen = if prevlen_size == 1 {
            u64::from(zl[p])
        } else {
            le(zl.get(p + 1..p + 5)?)
        };
        let enc_at = p + prevlen_size;
        let data_len: u64 = match encoding {
            0x00 => u64::from(e & 0x3f),
            0x40 => (u64::from(e & 0x3f) << 8) | u64::from(*zl.get(enc_at + 1)?),
            0x80 => {
                let b = zl.get(enc_at + 1..enc_at + 5)?;
                b.iter().fold(0u64, |acc, &x| (acc << 8) | u64::from(x))
            }
            0xfe => 1,
            0xc0 => 2,
            0xf0 => 3,
            0xd0 => 4,
            0xe0 => 8,
            _ => 0,
        };
        let header = (prevlen_size + len_size) as u64;
        let end = (p as u64) + header + data_len;
        if end > last as u64 {
            return None;
        }
        if (p as u64) < HDR as u64 + prevlen || prevlen != prev_raw {
            return None;
        }
        let data = zl.get(p + header as usize..end as usize)?;
        let entry = match encoding {
            0x00 | 0x40 | 0x80 => Entry::Str(data),
            0xf1..=0xfd => Entry::Int(i64::from(encoding & 0x0f) - 1),
            0xfe => Entry::Int(sign_extend(le(data), 8)),
            0xc0 => Entry::Int(sign_extend(le(data), 16)),
            0xf0 => Entry::Int(sign_extend(le(data), 24)),
            0xd0 => Entry::Int(sign_extend(le(data), 32)),
            _ => Entry::Int(le(data) as i64),
        };
        entries.push(entry);
        prev_raw = header + data_len;
        prev = Some(p);
        p = end as usize;
    }
    if p != last {
        return None;
    }
    if let Some(prev) = prev {
        if prev as u64 != tail {
            return None;
        }
    }
    if header_count != u16::MAX && usize::from(header_count) != entries.len() {
        return None;
    }
    Some(entries)
}

/// The (field, value) pairs of zipmap `zm`, checked as Redis's
/// `zipmapValidateIntegrity(deep)`.
///
/// Layout: a count byte (254: unknown), then per pair: the field's length
/// (1 byte below 254, else 0xFE + u32 LE), the field, the value's length,
/// one "free" byte `f`, the value and `f` unused bytes; then 0xFF.
///
/// Stricter than Redis in one case: a length written in 5 bytes although
/// it is below 254 is refused (Redis validates such a zipmap but then
/// walks it with the 1-byte form, reading the wrong bytes).
pub(crate) fn zipmap(zm: &[u8]) -> Option<Vec<(&[u8], &[u8])>> {
    let size = zm.len();
    if size < 2 || zm.last() != Some(&0xff) {
        return None;
    }
    let last = size as u64 - 1;
    let out_of_range = |p: u64| p < 2 || p > last;
    // The length at `p`: (bytes of the length, length).
    let length = |p: usize| -> Option<(u64, u64)> {
        let b = *zm.get(p)?;
        if b < 0xfe {
            return Some((1, u64::from(b)));
        }
        if out_of_range(p as u64 + 5) {
            return None;
        }
        let l = le(zm.get(p + 1..p + 5)?);
        if l < 0xfe {
            return None;
        }
        Some((5, l))
    };
    let mut pairs = Vec::new();
    let mut p: u64 = 1;
    while *zm.get(p as usize)? != 0xff {
        let (s, l) = length(p as usize)?;
        if out_of_range(p + s) {
            return None;
        }
        let field_at = p + s;
        p = field_at + l;
        if out_of_range(p) {
            return None;
        }
        let field = zm.get(field_at as usize..p as usize)?;
        let (s, l) = length(p as usize)?;
        if out_of_range(p + s) {
            return None;
        }
        p += s;
        let free = u64::from(*zm.get(p as usize)?);
        p += 1;
        let value_at = p;
        p += l + free;
        if out_of_range(p) {
            return None;
        }
        let value = zm.get(value_at as usize..(value_at + l) as usize)?;
        pairs.push((field, value));
    }
    if pairs.is_empty() {
        return None;
    }
    if zm[0] != 0xfe && usize::from(zm[0]) != pairs.len() {
        return None;
    }
    Some(pairs)
}

/// The members of intset `is`, checked as Redis's
/// `intsetValidateIntegrity(deep)`: encoding (u32 LE: 2, 4 or 8 bytes per
/// member), count (u32 LE, not 0), exactly that many little-endian members,
/// strictly ascending.
pub(crate) fn intset(is: &[u8]) -> Option<Vec<i64>> {
    let width = match le(is.get(0..4)?) {
        2 => 2usize,
        4 => 4,
        8 => 8,
        _ => return None,
    };
    let count = le(is.get(4..8)?);
    if 8 + count * width as u64 != is.len() as u64 || count == 0 {
        return None;
    }
    let mut out: Vec<i64> = Vec::with_capacity(count as usize);
    for chunk in is.get(8..)?.chunks_exact(width) {
        let v = sign_extend(le(chunk), 8 * width as u32);
        if out.last().is_some_and(|&prev| v <= prev) {
            return None;
        }
        out.push(v);
    }
    Some(out)
}

/// An intset of `members` (ascending, distinct), in the narrowest
/// encoding that holds them all, as Redis keeps it.
pub(crate) fn write_intset(members: &[i64]) -> Vec<u8> {
    let width: usize = if members.iter().all(|&v| i16::try_from(v).is_ok()) {
        2
    } else if members.iter().all(|&v| i32::try_from(v).is_ok()) {
        4
    } else {
        8
    };
    let mut out = Vec::with_capacity(8 + width * members.len());
    out.extend_from_slice(&(width as u32).to_le_bytes());
    out.extend_from_slice(&(members.len() as u32).to_le_bytes());
    for v in members {
        out.extend_from_slice(&v.to_le_bytes()[..width]);
    }
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A ziplist of `items` (a test helper: strings stay strings unless
    /// given as integers).
    pub(crate) fn build_ziplist(items: &[Entry<'_>]) -> Vec<u8> {
        let mut body = Vec::new();
        let mut prev_len = 0usize;
        let mut tail = 10;
        for it in items {
            let start = body.len();
            tail = 10 + start;
            if prev_len < 254 {
                body.push(prev_len as u8);
            } else {
                body.push(0xfe);
                body.extend_from_slice(&(prev_len as u32).to_le_bytes());
            }
            match *it {
                Entry::Str(s) => {
                    let n = s.len();
                    if n <= 0x3f {
                        body.push(n as u8);
                    } else if n <= 0x3fff {
                        body.push(0x40 | (n >> 8) as u8);
                        body.push(n as u8);
                    } else {
                        body.push(0x80);
                        body.extend_from_slice(&(n as u32).to_be_bytes());
                    }
                    body.extend_from_slice(s);
                }
                Entry::Int(v) => {
                    if (0..=12).contains(&v) {
                        body.push(0xf1 + v as u8);
                    } else if i8::try_from(v).is_ok() {
                        body.push(0xfe);
                        body.push(v as u8);
                    } else if i16::try_from(v).is_ok() {
                        body.push(0xc0);
                        body.extend_from_slice(&(v as i16).to_le_bytes());
                    } else if (-(1 << 23)..(1 << 23)).contains(&v) {
                        body.push(0xf0);
                        body.extend_from_slice(&v.to_le_bytes()[..3]);
                    } else if i32::try_from(v).is_ok() {
                        body.push(0xd0);
                        body.extend_from_slice(&(v as i32).to_le_bytes());
                    } else {
                        body.push(0xe0);
                        body.extend_from_slice(&v.to_le_bytes());
                    }
                }
            }
            prev_len = body.len() - start;
        }
        let mut zl = Vec::new();
        let total = 10 + body.len() + 1;
        zl.extend_from_slice(&(total as u32).to_le_bytes());
        zl.extend_from_slice(&(tail as u32).to_le_bytes());
        zl.extend_from_slice(&(items.len().min(65535) as u16).to_le_bytes());
        zl.extend_from_slice(&body);
        zl.push(0xff);
        zl
    }

    #[test]
    fn ziplists_round_trip() {
        let long = vec![b'z'; 300];
        let huge = vec![b'h'; 20000];
        let items = [
            Entry::Str(b"a"),
            Entry::Int(0),
            Entry::Int(12),
            Entry::Int(13),
            Entry::Int(-128),
            Entry::Int(1000),
            Entry::Int(-5_000_000),
            Entry::Int(2_000_000_000),
            Entry::Int(i64::MIN),
            Entry::Str(&long),
            Entry::Str(b""),
            Entry::Str(&huge),
            Entry::Str(b"end"),
        ];
        let zl = build_ziplist(&items);
        assert_eq!(ziplist(&zl).unwrap(), items.to_vec());
    }

    #[test]
    fn refuses_corrupt_ziplists() {
        let zl = build_ziplist(&[Entry::Str(b"ab"), Entry::Int(7), Entry::Str(b"c")]);
        assert!(ziplist(&zl).is_some());
        let edits: &[(usize, u8)] = &[
            (0, 0x20),  // total bytes
            (4, 0x0b),  // tail offset: not the last entry
            (4, 0xff),  // tail offset outside
            (8, 2),     // count
            (10, 1),    // first prevlen not 0
            (11, 0x3f), // string longer than the ziplist
            (14, 0xff), // early end
            (15, 0xc1), // invalid encoding
        ];
        for &(i, v) in edits {
            let mut b = zl.clone();
            b[i] = v;
            assert!(ziplist(&b).is_none(), "byte {i} = {v:#x}");
        }
        for n in 0..zl.len() {
            assert!(ziplist(&zl[..n]).is_none());
        }
        for i in 0..zl.len() {
            for v in 0..=255u8 {
                let mut b = zl.clone();
                b[i] = v;
                let _ = ziplist(&b);
            }
        }
    }

    #[test]
    fn zipmaps() {
        // Redis's own example: "foo" => "bar", "hello" => "world".
        let zm = b"\x02\x03foo\x03\x00bar\x05hello\x05\x00world\xff";
        let want: Vec<(&[u8], &[u8])> = vec![(b"foo", b"bar"), (b"hello", b"world")];
        assert_eq!(zipmap(zm).unwrap(), want);
        // Free bytes after a value are skipped; count 254 means unknown.
        let zm = b"\xfe\x01a\x01\x02bxy\xff";
        assert_eq!(zipmap(zm).unwrap(), vec![(&b"a"[..], &b"b"[..])]);
        // A 5-byte length.
        let mut zm = vec![1u8, 0xfe];
        zm.extend_from_slice(&300u32.to_le_bytes());
        zm.extend_from_slice(&[b'k'; 300]);
        zm.extend_from_slice(&[1, 0, b'v', 0xff]);
        assert_eq!(zipmap(&zm).unwrap()[0].0.len(), 300);
        for bad in [
            &b"\x00\xff"[..],                          // empty
            b"\x02\x01a\x01\x00b\xff",                 // wrong count
            b"\x01\x01a\x05\x00b\xff",                 // value past the end
            b"\x01\x01a\x01\x09b\xff",                 // free bytes past the end
            b"\x01\x01a\x01\x00b",                     // no terminator
            b"\x01\xfe\x01\x00\x00\x00a\x01\x00b\xff", // non-canonical length
        ] {
            assert!(zipmap(bad).is_none(), "{bad:?}");
        }
    }

    #[test]
    fn intsets() {
        for members in [
            vec![-3i64, 1, 5],
            vec![-40000, 7],
            vec![i64::MIN, 0, i64::MAX],
        ] {
            let is = write_intset(&members);
            assert_eq!(intset(&is).unwrap(), members);
        }
        // What Redis 7.0.15 wrote for `SADD si 1 5 -3`.
        let redis = b"\x02\x00\x00\x00\x03\x00\x00\x00\xfd\xff\x01\x00\x05\x00";
        assert_eq!(write_intset(&[-3, 1, 5]), redis);
        let mut unsorted = redis.to_vec();
        unsorted.swap(8, 10);
        unsorted.swap(9, 11);
        for bad in [
            &b"\x02\x00\x00\x00\x00\x00\x00\x00"[..],
            b"\x03\x00\x00\x00\x01\x00\x00\x00\x01\x00\x00",
            b"\x02\x00\x00\x00\x02\x00\x00\x00\x01\x00",
            b"\x02\x00\x00\x00\x02\x00\x00\x00\x01\x00\x01\x00",
            &unsorted,
        ] {
            assert!(intset(bad).is_none(), "{bad:?}");
        }
    }
}
