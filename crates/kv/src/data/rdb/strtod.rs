//! C's `strtod` on bytes (the C locale), for the scores Redis reads as
//! text: `rdbLoadDoubleValue` (`sscanf "%lg"`) and a listpack's string
//! scores (`zzlStrtod`). Leading white space, a sign, `inf`/`infinity`,
//! `nan`/`nan(chars)`, hexadecimal (`0x1.8p3`) and decimal numbers with an
//! optional exponent; the longest prefix that forms a number is taken.

/// C's `isspace` in the C locale.
fn is_c_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

fn starts_with_ci(s: &[u8], word: &[u8]) -> bool {
    s.len() >= word.len() && s[..word.len()].eq_ignore_ascii_case(word)
}

/// The value and the number of bytes `strtod` consumes from `s`, or `None`
/// when no conversion can be made (`strtod` then returns 0 and consumes
/// nothing). Overflow gives an infinity, underflow a zero or subnormal, as
/// in C.
pub(crate) fn strtod(s: &[u8]) -> Option<(f64, usize)> {
    let mut i = 0;
    while i < s.len() && is_c_space(s[i]) {
        i += 1;
    }
    let negative = match s.get(i) {
        Some(b'-') => {
            i += 1;
            true
        }
        Some(b'+') => {
            i += 1;
            false
        }
        _ => false,
    };
    let signed = |v: f64| if negative { -v } else { v };
    let rest = s.get(i..).unwrap_or_default();
    if starts_with_ci(rest, b"inf") {
        let n = if starts_with_ci(rest, b"infinity") {
            8
        } else {
            3
        };
        return Some((signed(f64::INFINITY), i + n));
    }
    if starts_with_ci(rest, b"nan") {
        let mut n = 3;
        if rest.get(3) == Some(&b'(') {
            let mut j = 4;
            while rest
                .get(j)
                .is_some_and(|b| b.is_ascii_alphanumeric() || *b == b'_')
            {
                j += 1;
            }
            if rest.get(j) == Some(&b')') {
                n = j + 1;
            }
        }
        return Some((f64::NAN, i + n));
    }
    if rest.len() > 2 && rest[0] == b'0' && (rest[1] | 0x20) == b'x' {
        if let Some((v, n)) = hex(&rest[2..]) {
            return Some((signed(v), i + 2 + n));
        }
        // "0x" not followed by a hexadecimal number: just the "0".
    }
    let (v, n) = decimal(rest)?;
    Some((signed(v), i + n))
}

/// glibc's `sscanf(s, "%lg")` (Redis's `rdbLoadDoubleValue`): the value,
/// or `None` when it matches no number. It is `strtod` except where
/// `scanf`, which reads ahead one character at a time and cannot put back
/// more than one, fails on a prefix `strtod` would accept: `0x` not
/// followed by a hexadecimal digit or a point, and `inf` followed by an
/// `i` that does not go on to spell `infinity`.
pub(crate) fn scanf_double(s: &[u8]) -> Option<f64> {
    let (v, _) = strtod(s)?;
    let mut i = 0;
    while i < s.len() && is_c_space(s[i]) {
        i += 1;
    }
    if matches!(s.get(i), Some(b'-' | b'+')) {
        i += 1;
    }
    let rest = s.get(i..).unwrap_or_default();
    if starts_with_ci(rest, b"inf")
        && matches!(rest.get(3), Some(b'i' | b'I'))
        && !starts_with_ci(rest, b"infinity")
    {
        return None;
    }
    if rest.len() >= 2
        && rest[0] == b'0'
        && (rest[1] | 0x20) == b'x'
        && !rest
            .get(2)
            .is_some_and(|c| c.is_ascii_hexdigit() || *c == b'.')
    {
        return None;
    }
    Some(v)
}

/// Digits of an exponent (after `e` or `p`, with an optional sign), or
/// `None` when no digit follows; the value saturates far beyond any
/// exponent that changes the result.
fn exponent(s: &[u8]) -> Option<(i64, usize)> {
    let mut j = 0;
    let neg = match s.first() {
        Some(b'-') => {
            j = 1;
            true
        }
        Some(b'+') => {
            j = 1;
            false
        }
        _ => false,
    };
    let start = j;
    let mut e: i64 = 0;
    while let Some(d) = s.get(j).filter(|b| b.is_ascii_digit()) {
        e = (e * 10 + i64::from(d - b'0')).min(1_000_000);
        j += 1;
    }
    if j == start {
        return None;
    }
    Some((if neg { -e } else { e }, j))
}

/// A decimal number: digits, an optional fraction, an optional exponent.
fn decimal(s: &[u8]) -> Option<(f64, usize)> {
    let mut j = 0;
    while s.get(j).is_some_and(u8::is_ascii_digit) {
        j += 1;
    }
    let int_part = &s[..j];
    let mut frac_part: &[u8] = &[];
    if s.get(j) == Some(&b'.') {
        let f0 = j + 1;
        let mut k = f0;
        while s.get(k).is_some_and(u8::is_ascii_digit) {
            k += 1;
        }
        if int_part.is_empty() && k == f0 {
            return None;
        }
        frac_part = &s[f0..k];
        j = k;
    } else if int_part.is_empty() {
        return None;
    }
    let mut exp = 0;
    if matches!(s.get(j), Some(b'e' | b'E')) {
        if let Some((e, n)) = exponent(&s[j + 1..]) {
            exp = e;
            j += 1 + n;
        }
    }
    // Rust's parser rounds correctly, as glibc's strtod does.
    let text = format!(
        "{}.{}e{}",
        if int_part.is_empty() {
            "0"
        } else {
            std::str::from_utf8(int_part).unwrap_or("0")
        },
        if frac_part.is_empty() {
            "0"
        } else {
            std::str::from_utf8(frac_part).unwrap_or("0")
        },
        exp
    );
    Some((text.parse::<f64>().unwrap_or(0.0), j))
}

/// A hexadecimal number after its `0x`: hex digits with an optional
/// fraction and an optional binary exponent (`p`).
fn hex(s: &[u8]) -> Option<(f64, usize)> {
    let mut mant: u64 = 0;
    let mut exp2: i64 = 0;
    let mut sticky = false;
    let mut digits = 0;
    let mut j = 0;
    let mut after_point = false;
    loop {
        match s.get(j) {
            Some(b'.') if !after_point => after_point = true,
            Some(&b) if b.is_ascii_hexdigit() => {
                let d = u64::from((b as char).to_digit(16).unwrap_or(0));
                digits += 1;
                if mant < (1 << 60) {
                    mant = mant * 16 + d;
                    if after_point {
                        exp2 -= 4;
                    }
                } else {
                    sticky |= d != 0;
                    if !after_point {
                        exp2 += 4;
                    }
                }
            }
            _ => break,
        }
        j += 1;
    }
    if digits == 0 {
        return None;
    }
    if matches!(s.get(j), Some(b'p' | b'P')) {
        if let Some((e, n)) = exponent(&s[j + 1..]) {
            exp2 += e;
            j += 1 + n;
        }
    }
    if sticky {
        mant |= 1;
    }
    let mut v = mant as f64;
    // Scale by 2^exp2 in steps that cannot overflow the multiplier.
    let mut e = exp2.clamp(-4000, 4000);
    while e != 0 {
        let step = e.clamp(-1000, 1000);
        v *= 2f64.powi(step as i32);
        e -= step;
    }
    Some((v, j))
}

#[cfg(test)]
mod tests {
    use super::{scanf_double, strtod};

    #[test]
    fn scans_as_glibc_sscanf_does() {
        // The right column is what glibc's sscanf("%lg") gave (None: it
        // returned 0).
        let cases: &[(&[u8], Option<f64>)] = &[
            (b"0xqp-2", None),
            (b"0x", None),
            (b"0x.", Some(0.0)),
            (b"0x1p", Some(1.0)),
            (b"0x1p-", Some(1.0)),
            (b"1.=", Some(1.0)),
            (b"1e", Some(1.0)),
            (b"1e+", Some(1.0)),
            (b"infin", None),
            (b"infinity", Some(f64::INFINITY)),
            (b"-", None),
            (b"+.", None),
            (b"  5", Some(5.0)),
            (b"0x1.8p1", Some(3.0)),
            (b".e5", None),
            (b"1.5e", Some(1.5)),
            (b"INF", Some(f64::INFINITY)),
            (b"-Inf", Some(f64::NEG_INFINITY)),
            (b"in", None),
            (b"0xg", None),
            (b"0x1g", Some(1.0)),
            (b"00x1", Some(0.0)),
            (b"", None),
        ];
        for (s, want) in cases {
            assert_eq!(scanf_double(s), *want, "{:?}", String::from_utf8_lossy(s));
        }
        for s in [&b"nanx"[..], b"nan(", b"nan(ab)"] {
            assert!(scanf_double(s).unwrap().is_nan());
        }
    }

    #[test]
    fn parses_as_c_strtod_does() {
        type Case<'a> = (&'a [u8], Option<(f64, usize)>);
        let cases: &[Case] = &[
            (b"1", Some((1.0, 1))),
            (b"-2.5", Some((-2.5, 4))),
            (b"  +3e2xyz", Some((300.0, 6))),
            (b"1e", Some((1.0, 1))),
            (b"1e+", Some((1.0, 1))),
            (b".5", Some((0.5, 2))),
            (b"5.", Some((5.0, 2))),
            (b".", None),
            (b"", None),
            (b"abc", None),
            (b"-", None),
            (b"inf", Some((f64::INFINITY, 3))),
            (b"-Infinity!", Some((f64::NEG_INFINITY, 9))),
            (b"infin", Some((f64::INFINITY, 3))),
            (b"0x10", Some((16.0, 4))),
            (b"0x1.8p1", Some((3.0, 7))),
            (b"0xg", Some((0.0, 1))),
            (b"1e400", Some((f64::INFINITY, 5))),
            (b"1e-400", Some((0.0, 6))),
            (b"0.1", Some((0.1, 3))),
            (b"3\x004", Some((3.0, 1))),
        ];
        for (s, want) in cases {
            assert_eq!(strtod(s), *want, "{:?}", String::from_utf8_lossy(s));
        }
        let (v, n) = strtod(b"nan(abc)x").unwrap();
        assert!(v.is_nan());
        assert_eq!(n, 8);
        let (v, n) = strtod(b"NaN(").unwrap();
        assert!(v.is_nan());
        assert_eq!(n, 3);
    }
}
