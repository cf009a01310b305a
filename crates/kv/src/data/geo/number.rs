//! Parsing of numbers and keywords as Redis does (`strtod` over the whole
//! argument), and C's double-to-integer conversions.

pub(super) const TWO_POW_63: f64 = 9_223_372_036_854_775_808.0;

/// Parses a double exactly as Redis 7.0's `getDoubleFromObject`
/// (`string2d`: C's `strtod` over the whole argument): decimal or `0x`
/// hexadecimal, optional sign and exponent, `inf`/`infinity` in any case;
/// refused: NaN, leading or trailing spaces, junk, a value that overflows
/// to infinity or underflows to zero.
pub fn parse_double(b: &[u8]) -> Option<f64> {
    let (neg, rest) = match b.first() {
        Some(b'-') => (true, &b[1..]),
        Some(b'+') => (false, &b[1..]),
        _ => (false, b),
    };
    let sign = |v: f64| if neg { -v } else { v };
    if rest.eq_ignore_ascii_case(b"inf") || rest.eq_ignore_ascii_case(b"infinity") {
        return Some(sign(f64::INFINITY));
    }
    if rest.len() > 2 && rest[0] == b'0' && (rest[1] | 0x20) == b'x' {
        return parse_hex_double(&rest[2..]).map(sign);
    }
    // Decimal: digits [. digits] (at least one digit) [e [sign] digits].
    let mut i = 0;
    let mut digits = 0;
    let mut nonzero = false;
    while i < rest.len() && rest[i].is_ascii_digit() {
        nonzero |= rest[i] != b'0';
        digits += 1;
        i += 1;
    }
    if i < rest.len() && rest[i] == b'.' {
        i += 1;
        while i < rest.len() && rest[i].is_ascii_digit() {
            nonzero |= rest[i] != b'0';
            digits += 1;
            i += 1;
        }
    }
    if digits == 0 {
        return None;
    }
    if i < rest.len() && (rest[i] | 0x20) == b'e' {
        i += 1;
        if i < rest.len() && (rest[i] == b'+' || rest[i] == b'-') {
            i += 1;
        }
        let start = i;
        while i < rest.len() && rest[i].is_ascii_digit() {
            i += 1;
        }
        if i == start {
            return None;
        }
    }
    if i != rest.len() {
        return None;
    }
    let text = std::str::from_utf8(rest).ok()?;
    let v: f64 = text.parse().ok()?;
    if v.is_infinite() || (v == 0.0 && nonzero) {
        return None; // strtod's ERANGE with HUGE_VAL or zero
    }
    Some(sign(v))
}

/// The magnitude of a C hexadecimal float after its `0x`, rounded to
/// nearest-even as `strtod` does; `None` for bad syntax, overflow or
/// underflow to zero.
pub(super) fn parse_hex_double(s: &[u8]) -> Option<f64> {
    let mut mant: u64 = 0;
    let mut sticky = false;
    let mut exp: i64 = 0;
    let mut any_digit = false;
    let mut seen_dot = false;
    let mut i = 0;
    while i < s.len() {
        let c = s[i];
        let d = match c {
            b'0'..=b'9' => c - b'0',
            b'a'..=b'f' => c - b'a' + 10,
            b'A'..=b'F' => c - b'A' + 10,
            b'.' if !seen_dot => {
                seen_dot = true;
                i += 1;
                continue;
            }
            _ => break,
        };
        any_digit = true;
        if mant >> 60 == 0 {
            mant = mant * 16 + u64::from(d);
            if seen_dot {
                exp -= 4;
            }
        } else {
            sticky |= d != 0;
            if !seen_dot {
                exp += 4;
            }
        }
        i += 1;
    }
    if !any_digit {
        return None;
    }
    if i < s.len() && (s[i] | 0x20) == b'p' {
        i += 1;
        let mut eneg = false;
        if i < s.len() && (s[i] == b'+' || s[i] == b'-') {
            eneg = s[i] == b'-';
            i += 1;
        }
        let start = i;
        let mut e: i64 = 0;
        while i < s.len() && s[i].is_ascii_digit() {
            e = (e * 10 + i64::from(s[i] - b'0')).min(1_000_000);
            i += 1;
        }
        if i == start {
            return None;
        }
        exp += if eneg { -e } else { e };
    }
    if i != s.len() {
        return None;
    }
    if mant == 0 {
        return Some(0.0);
    }
    let lz = mant.leading_zeros();
    let m = mant << lz;
    let e2 = exp - i64::from(lz); // value = m * 2^e2, m in [2^63, 2^64)
    let top = e2 + 63;
    if top > 1023 {
        return None;
    }
    let keep: i64 = if top >= -1022 { 53 } else { 53 - (-1022 - top) };
    let shift = 64 - keep; // >= 11
    let r: u64 = if shift > 64 {
        0
    } else {
        let (kept, rem) = if shift == 64 {
            (0, m)
        } else {
            (m >> shift, m & ((1u64 << shift) - 1))
        };
        let half = 1u64 << (shift - 1);
        let up = rem > half || (rem == half && (sticky || kept & 1 == 1));
        kept + u64::from(up)
    };
    if r == 0 {
        return None;
    }
    let k = e2 + shift; // value = r * 2^k
    let f = r as f64;
    let v = if k >= -1022 {
        f * pow2(k.min(1023))
    } else {
        f * pow2(k + 64) * pow2(-64)
    };
    if v.is_infinite() {
        return None;
    }
    Some(v)
}

/// 2^k for k in [-1022, 1023].
pub(super) fn pow2(k: i64) -> f64 {
    f64::from_bits(((k + 1023) as u64) << 52)
}

/// True when `arg` equals `word` ignoring ASCII case, compared as C's
/// `strcasecmp` does (the argument ends at its first NUL byte).
pub(super) fn keyword(arg: &[u8], word: &str) -> bool {
    let end = arg.iter().position(|&c| c == 0).unwrap_or(arg.len());
    arg[..end].eq_ignore_ascii_case(word.as_bytes())
}

/// C's `(uint64_t)d` as x86-64 code computes it (also for the values C
/// leaves undefined: negative, too large, infinite), which is how Redis
/// turns any score into geohash bits.
pub fn c_double_to_u64(d: f64) -> u64 {
    if d.is_nan() {
        return 1 << 63;
    }
    if d < TWO_POW_63 {
        c_double_to_i64(d) as u64
    } else {
        (c_double_to_i64(d - TWO_POW_63) as u64) ^ (1 << 63)
    }
}

/// C's `(long long)d` on x86-64 (`cvttsd2si`): truncation, and `i64::MIN`
/// for anything out of range (`WITHHASH` prints a score so).
pub fn c_double_to_i64(d: f64) -> i64 {
    if (-TWO_POW_63..TWO_POW_63).contains(&d) {
        d as i64
    } else {
        i64::MIN
    }
}
