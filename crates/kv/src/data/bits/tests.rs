use super::*;
use crate::resp::Reply;
use crate::value::ERR_WRONGTYPE;

fn w(line: &str) -> Vec<Vec<u8>> {
    line.split_whitespace()
        .map(|x| x.as_bytes().to_vec())
        .collect()
}

fn text<T: std::fmt::Debug>(r: Result<T, BitsError>) -> String {
    match r {
        Ok(v) => format!("{v:?}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn parse_i64_is_string2ll() {
    let cases: &[(&[u8], Option<i64>)] = &[
        (b"0", Some(0)),
        (b"-0", None),
        (b"00", None),
        (b"01", None),
        (b"+1", None),
        (b" 1", None),
        (b"1 ", None),
        (b"", None),
        (b"-", None),
        (b"12", Some(12)),
        (b"-12", Some(-12)),
        (b"9223372036854775807", Some(i64::MAX)),
        (b"9223372036854775808", None),
        (b"-9223372036854775808", Some(i64::MIN)),
        (b"-9223372036854775809", None),
        (b"1\0", None),
    ];
    for (input, want) in cases {
        assert_eq!(
            parse_i64(input),
            *want,
            "{:?}",
            String::from_utf8_lossy(input)
        );
    }
}

#[test]
fn setbit_and_getbit() {
    let cases: &[(&str, &str)] = &[
        ("SETBIT k 7 1", "SetbitArgs { offset: 7, on: true }"),
        ("SETBIT k 7 0", "SetbitArgs { offset: 7, on: false }"),
        ("SETBIT k 7 2", "ERR bit is not an integer or out of range"),
        ("SETBIT k 7 -1", "ERR bit is not an integer or out of range"),
        ("SETBIT k 7 x", "ERR bit is not an integer or out of range"),
        (
            "SETBIT k -1 1",
            "ERR bit offset is not an integer or out of range",
        ),
        (
            "SETBIT k #1 1",
            "ERR bit offset is not an integer or out of range",
        ),
        (
            "SETBIT k 4294967296 1",
            "ERR bit offset is not an integer or out of range",
        ),
        (
            "SETBIT k 4294967295 1",
            "SetbitArgs { offset: 4294967295, on: true }",
        ),
        (
            "SETBIT k 1",
            "ERR wrong number of arguments for 'setbit' command",
        ),
    ];
    for (line, want) in cases {
        assert_eq!(
            text(parse_setbit(&w(line), DEFAULT_MAX_BYTES)),
            *want,
            "{line}"
        );
    }
    let mut v = Vec::new();
    let out = setbit(
        &mut v,
        &SetbitArgs {
            offset: 9,
            on: true,
        },
    );
    assert_eq!(
        out,
        SetbitOutcome {
            old: 0,
            changed: true
        }
    );
    assert_eq!(v, vec![0, 0x40]);
    let out = setbit(
        &mut v,
        &SetbitArgs {
            offset: 9,
            on: true,
        },
    );
    assert_eq!(
        out,
        SetbitOutcome {
            old: 1,
            changed: false
        }
    );
    let out = setbit(
        &mut v,
        &SetbitArgs {
            offset: 9,
            on: false,
        },
    );
    assert_eq!(
        out,
        SetbitOutcome {
            old: 1,
            changed: true
        }
    );
    assert_eq!(v, vec![0, 0]);
    let v = [0x80u8, 0x01];
    for (off, want) in [(0, 1), (1, 0), (15, 1), (16, 0), (u64::MAX, 0)] {
        assert_eq!(getbit(&v, off), want, "{off}");
    }
    assert_eq!(
        text(cmd_getbit(
            &w("GETBIT k x"),
            Lookup::WrongType,
            DEFAULT_MAX_BYTES
        )),
        "ERR bit offset is not an integer or out of range"
    );
    assert_eq!(
        text(cmd_getbit(
            &w("GETBIT k 1"),
            Lookup::WrongType,
            DEFAULT_MAX_BYTES
        )),
        ERR_WRONGTYPE
    );
    assert_eq!(text(cmd_getbit(&w("GETBIT k 1"), Lookup::Missing, 10)), "0");
}

#[test]
fn bitcount_cases() {
    // The examples of Redis's documentation, and edge cases.
    let v = b"foobar";
    let cases: &[(&str, &str)] = &[
        ("BITCOUNT k", "26"),
        ("BITCOUNT k 0 0", "4"),
        ("BITCOUNT k 1 1", "6"),
        ("BITCOUNT k 1 1 BYTE", "6"),
        ("BITCOUNT k 5 30 BIT", "17"),
        ("BITCOUNT k 0 -1 bit", "26"),
        ("BITCOUNT k -100 100", "26"),
        ("BITCOUNT k -1 -2 nonsense", "0"),
        ("BITCOUNT k -10 -20", "0"),
        ("BITCOUNT k 2 1", "0"),
        ("BITCOUNT k 100 200", "0"),
        ("BITCOUNT k 0 0 bits", "ERR syntax error"),
        ("BITCOUNT k 0", "ERR syntax error"),
        ("BITCOUNT k 0 1 bit x", "ERR syntax error"),
        (
            "BITCOUNT k a 1",
            "ERR value is not an integer or out of range",
        ),
    ];
    for (line, want) in cases {
        assert_eq!(
            text(cmd_bitcount(&w(line), Lookup::Str(v))),
            *want,
            "{line}"
        );
    }
    assert_eq!(
        text(cmd_bitcount(&w("BITCOUNT k a b c"), Lookup::Missing)),
        "0"
    );
    assert_eq!(
        text(cmd_bitcount(&w("BITCOUNT k"), Lookup::WrongType)),
        ERR_WRONGTYPE
    );
    // Without the both-negative shortcut the clamped range would be
    // byte 0.
    let r = BitRange {
        start: -5,
        end: -10,
        unit: BitUnit::Byte,
    };
    assert_eq!(bitcount(b"\xff\xff\xff", Some(r)), 0);
    assert_eq!(bitcount(b"", None), 0);
}

#[test]
fn bitpos_cases() {
    let cases: &[(&[u8], &str, &str)] = &[
        (b"\xff\xf0\x00", "BITPOS k 0", "12"),
        (b"\x00\xff\xf0", "BITPOS k 1 0", "8"),
        (b"\x00\xff\xf0", "BITPOS k 1 2", "16"),
        (b"\x00\xff\xf0", "BITPOS k 1 2 -1 BYTE", "16"),
        (b"\x00\xff\xf0", "BITPOS k 1 7 15 BIT", "8"),
        (b"\x00\x00\x00", "BITPOS k 1", "-1"),
        (b"\x00\x00\x00", "BITPOS k 1 7 -3 BIT", "-1"),
        (b"\x00\xff\xf0", "BITPOS k 1 7 -3 BIT", "8"),
        // Zeros past the end only without an explicit end.
        (b"\xff\xff", "BITPOS k 0", "16"),
        (b"\xff\xff", "BITPOS k 0 1", "16"),
        (b"\xff\xff", "BITPOS k 0 0 -1", "-1"),
        // A unit needs an end: "bit" is read as the end.
        (
            b"\xff\xff",
            "BITPOS k 0 3 bit",
            "ERR value is not an integer or out of range",
        ),
        (b"\xff\xff", "BITPOS k 0 3 15 bit", "-1"),
        (b"\xff\xfe", "BITPOS k 0 3 15 bit", "15"),
        (b"\xff\xff", "BITPOS k 0 5", "-1"),
        (b"", "BITPOS k 0", "-1"),
        (b"", "BITPOS k 1", "-1"),
        // No both-negative shortcut: both clamp to byte 0.
        (b"\x0f", "BITPOS k 1 -5 -10", "4"),
        (
            b"\x0f",
            "BITPOS k 2",
            "ERR The bit argument must be 1 or 0.",
        ),
        (
            b"\x0f",
            "BITPOS k x",
            "ERR value is not an integer or out of range",
        ),
        (
            b"\x0f",
            "BITPOS k 1 x 0 bad",
            "ERR value is not an integer or out of range",
        ),
        (b"\x0f", "BITPOS k 1 0 x bad", "ERR syntax error"),
        (
            b"\x0f",
            "BITPOS k 1 0 x bit",
            "ERR value is not an integer or out of range",
        ),
        (b"\x0f", "BITPOS k 1 0 1 bit x", "ERR syntax error"),
    ];
    for (v, line, want) in cases {
        assert_eq!(
            text(cmd_bitpos(&w(line), Lookup::Str(v))),
            *want,
            "{line} on {v:?}"
        );
    }
    assert_eq!(text(cmd_bitpos(&w("BITPOS k 0 x"), Lookup::Missing)), "0");
    assert_eq!(text(cmd_bitpos(&w("BITPOS k 1"), Lookup::Missing)), "-1");
    assert_eq!(
        text(cmd_bitpos(&w("BITPOS k 3"), Lookup::WrongType)),
        "ERR The bit argument must be 1 or 0."
    );
    assert_eq!(
        text(cmd_bitpos(&w("BITPOS k 1"), Lookup::WrongType)),
        ERR_WRONGTYPE
    );
}

#[test]
fn bitop_cases() {
    let cases: &[(&str, &str)] = &[
        ("BITOP AND d a b", "And"),
        ("BITOP or d a", "Or"),
        ("BITOP XoR d a b c", "Xor"),
        ("BITOP NOT d a", "Not"),
        (
            "BITOP NOT d a b",
            "ERR BITOP NOT must be called with a single source key.",
        ),
        ("BITOP NAND d a b", "ERR syntax error"),
        (
            "BITOP AND d",
            "ERR wrong number of arguments for 'bitop' command",
        ),
    ];
    for (line, want) in cases {
        let got = parse_bitop(&w(line)).map(|a| a.op);
        assert_eq!(text(got), *want, "{line}");
    }
    let a: &[u8] = b"\xf0\x0f\xff";
    let b: &[u8] = b"\x3c";
    assert_eq!(bitop(BitopKind::And, &[a, b]), b"\x30\x00\x00");
    assert_eq!(bitop(BitopKind::Or, &[a, b]), b"\xfc\x0f\xff");
    assert_eq!(bitop(BitopKind::Xor, &[a, b, b]), a);
    assert_eq!(bitop(BitopKind::Not, &[b]), b"\xc3");
    assert_eq!(bitop(BitopKind::Or, &[b"", b""]), b"");
    assert_eq!(bitop(BitopKind::And, &[b"", b"\xff"]), b"\x00");
}

fn run_bitfield(value: &mut Vec<u8>, line: &str) -> String {
    match parse_bitfield(&w(line), false, DEFAULT_MAX_BYTES) {
        Ok(bf) => format!("{:?}", bitfield(value, &bf).replies),
        Err(e) => e.to_string(),
    }
}

#[test]
fn bitfield_sequences() {
    // Each table runs on one string, in order.
    let tables: &[&[(&str, &str)]] = &[
        &[
            ("BITFIELD k INCRBY i5 100 1 GET u4 0", "[Some(1), Some(0)]"),
            ("BITFIELD k GET i5 100", "[Some(1)]"),
        ],
        &[
            ("BITFIELD k incrby u2 100 1 OVERFLOW SAT incrby u2 102 1", "[Some(1), Some(1)]"),
            ("BITFIELD k incrby u2 100 1 OVERFLOW SAT incrby u2 102 1", "[Some(2), Some(2)]"),
            ("BITFIELD k incrby u2 100 1 OVERFLOW SAT incrby u2 102 1", "[Some(3), Some(3)]"),
            ("BITFIELD k incrby u2 100 1 OVERFLOW SAT incrby u2 102 1", "[Some(0), Some(3)]"),
            ("BITFIELD k OVERFLOW FAIL incrby u2 102 1", "[None]"),
            ("BITFIELD k OVERFLOW FAIL incrby u2 102 -3 GET u2 102", "[Some(0), Some(0)]"),
            ("BITFIELD k OVERFLOW FAIL incrby u2 102 -1", "[None]"),
        ],
        &[
            ("BITFIELD k SET i8 0 -1 GET u8 0 GET i4 4", "[Some(0), Some(255), Some(-1)]"),
            ("BITFIELD k SET u8 #1 300", "[Some(0)]"),
            ("BITFIELD k GET u8 8", "[Some(44)]"),
            ("BITFIELD k OVERFLOW SAT SET u8 #1 -1", "[Some(44)]"),
            ("BITFIELD k GET u8 8", "[Some(255)]"),
            ("BITFIELD k OVERFLOW SAT SET i8 8 200 GET i8 8", "[Some(-1), Some(127)]"),
            ("BITFIELD k OVERFLOW WRAP INCRBY i8 8 1", "[Some(-128)]"),
            ("BITFIELD k OVERFLOW SAT INCRBY i8 8 -1", "[Some(-128)]"),
            (
                "BITFIELD k SET i64 16 9223372036854775807 INCRBY i64 16 1",
                "[Some(0), Some(-9223372036854775808)]",
            ),
            (
                "BITFIELD k OVERFLOW SAT INCRBY i64 16 -1 INCRBY i64 16 -9223372036854775808",
                "[Some(-9223372036854775808), Some(-9223372036854775808)]",
            ),
            (
                "BITFIELD k SET u63 0 -1 GET u63 0",
                "[Some(9205428007089471488), Some(9223372036854775807)]",
            ),
        ],
        &[
            ("BITFIELD k GET u8 0", "[Some(0)]"),
            ("BITFIELD k", "[]"),
            ("BITFIELD k GET u64 0", "ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is."),
            ("BITFIELD k GET i65 0", "ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is."),
            ("BITFIELD k GET I8 0", "ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is."),
            ("BITFIELD k GET i8 -1", "ERR bit offset is not an integer or out of range"),
            ("BITFIELD k GET i8 #-1", "ERR bit offset is not an integer or out of range"),
            ("BITFIELD k GET i8 4294967296", "ERR bit offset is not an integer or out of range"),
            ("BITFIELD k SET i8 0 x", "ERR value is not an integer or out of range"),
            ("BITFIELD k OVERFLOW WRAPS", "ERR Invalid OVERFLOW type specified"),
            ("BITFIELD k OVERFLOW", "ERR syntax error"),
            ("BITFIELD k GET i8", "ERR syntax error"),
            ("BITFIELD k SET i8 0", "ERR syntax error"),
            ("BITFIELD k PUT i8 0", "ERR syntax error"),
        ],
    ];
    for table in tables {
        let mut v = Vec::new();
        for (line, want) in *table {
            assert_eq!(run_bitfield(&mut v, line), *want, "{line}");
        }
    }
    // `#k` multiplies with 64-bit wrap-around, as Redis.
    let bf =
        parse_bitfield(&w("BITFIELD k GET i64 #288230376151711745"), false, 16).unwrap_or_default();
    assert_eq!(bf.ops.first().map(|o| o.offset), Some(64));
    // A write on a missing key creates it even if every write fails.
    let mut v = Vec::new();
    let bf =
        parse_bitfield(&w("BITFIELD k OVERFLOW FAIL INCRBY u2 9 7"), false, 16).unwrap_or_default();
    let out = bitfield(&mut v, &bf);
    assert_eq!(
        out,
        BitfieldOutcome {
            replies: vec![None],
            changed: true,
            notify: false,
        }
    );
    assert_eq!(v, vec![0, 0]);
    // Read-only: nothing created.
    let mut v = Vec::new();
    let bf = parse_bitfield(&w("BITFIELD k GET u2 90"), false, 16).unwrap_or_default();
    assert!(!bitfield(&mut v, &bf).changed);
    assert!(v.is_empty());
}

#[test]
fn bitfield_ro() {
    let cases: &[(&str, Lookup<'static>, &str)] = &[
        ("BITFIELD_RO k GET u8 0 GET i4 4", Lookup::Str(b"\xf7"), "[Some(247), Some(7)]"),
        ("BITFIELD_RO k GET u8 0", Lookup::Missing, "[Some(0)]"),
        ("BITFIELD_RO k GET u8 0", Lookup::WrongType, ERR_WRONGTYPE),
        ("BITFIELD_RO k GET u8 0 SET u8 0 1", Lookup::WrongType, "ERR BITFIELD_RO only supports the GET subcommand"),
        ("BITFIELD_RO k INCRBY u8 0 1", Lookup::Missing, "ERR BITFIELD_RO only supports the GET subcommand"),
        ("BITFIELD_RO k SET x8 0 1", Lookup::Missing, "ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is."),
        ("BITFIELD_RO k OVERFLOW SAT GET u8 0", Lookup::Missing, "[Some(0)]"),
    ];
    for (line, key, want) in cases {
        assert_eq!(
            text(cmd_bitfield_ro(&w(line), *key, DEFAULT_MAX_BYTES)),
            *want,
            "{line}"
        );
    }
    let bf = parse_bitfield(&w("BITFIELD k INCRBY u8 0 1 GET u8 0"), false, 16).unwrap_or_default();
    assert_eq!(bitfield_read(b"\x05", &bf), vec![Some(6), Some(6)]);
}

#[test]
fn setrange_and_getrange() {
    let cases: &[(&str, &str)] = &[
        (
            "SETRANGE k 6 Redis",
            "SetrangeArgs { offset: 6, value: [82, 101, 100, 105, 115] }",
        ),
        ("SETRANGE k -1 a", "ERR offset is out of range"),
        (
            "SETRANGE k x a",
            "ERR value is not an integer or out of range",
        ),
        (
            "SETRANGE k 1",
            "ERR wrong number of arguments for 'setrange' command",
        ),
    ];
    for (line, want) in cases {
        assert_eq!(text(parse_setrange(&w(line))), *want, "{line}");
    }
    let args = |offset: u64, value: &[u8]| SetrangeArgs {
        offset,
        value: value.to_vec(),
    };
    let mut v = b"Hello World".to_vec();
    let out = setrange(&mut v, &args(6, b"Redis"), 100);
    assert_eq!(
        out,
        Ok(SetrangeOutcome {
            len: 11,
            changed: true
        })
    );
    assert_eq!(v, b"Hello Redis");
    let mut v = Vec::new();
    assert_eq!(
        setrange(&mut v, &args(6, b"Redis"), 100).map(|o| o.len),
        Ok(11)
    );
    assert_eq!(v, b"\0\0\0\0\0\0Redis");
    let mut v = Vec::new();
    assert_eq!(
        setrange(&mut v, &args(1 << 40, b""), 100),
        Ok(SetrangeOutcome {
            len: 0,
            changed: false
        })
    );
    assert_eq!(
        setrange(&mut v, &args(96, b"abcde"), 100),
        Err(BitsError::TooBig)
    );
    assert_eq!(
        setrange(&mut v, &args(95, b"abcde"), 100).map(|o| o.len),
        Ok(100)
    );
    assert_eq!(
        setrange(&mut v, &args(u64::MAX >> 1, b"a"), u64::MAX),
        Err(BitsError::TooBig)
    );

    let s = b"This is a string";
    let cases: &[(i64, i64, &[u8])] = &[
        (0, 3, b"This"),
        (-3, -1, b"ing"),
        (0, -1, b"This is a string"),
        (10, 100, b"string"),
        (0, -100, b"T"),
        (-1, -5, b""),
        (5, 3, b""),
        (100, 200, b""),
        (i64::MIN, i64::MAX, b"This is a string"),
    ];
    for (start, end, want) in cases {
        assert_eq!(getrange(s, *start, *end), *want, "{start} {end}");
    }
    assert_eq!(getrange(b"", 0, -1), b"");
    assert_eq!(
        text(cmd_getrange(&w("GETRANGE k a 1"), Lookup::WrongType)),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(
        text(cmd_getrange(&w("GETRANGE k 0 1"), Lookup::WrongType)),
        ERR_WRONGTYPE
    );
    assert_eq!(
        text(cmd_getrange(&w("SUBSTR k 0 1"), Lookup::Missing)),
        "[]"
    );
}

#[test]
fn lcs_cases() {
    let a = Lookup::Str(b"ohmytext");
    let b = Lookup::Str(b"mynewtext");
    let m = |a: (u64, u64), b: (u64, u64)| LcsMatch {
        a_start: a.0,
        a_end: a.1,
        b_start: b.0,
        b_end: b.1,
        len: a.1 - a.0 + 1,
    };
    let cases: &[(&str, Result<LcsReply, BitsError>)] = &[
        ("LCS a b", Ok(LcsReply::Str(b"mytext".to_vec()))),
        ("LCS a b LEN", Ok(LcsReply::Len(6))),
        (
            "LCS a b IDX",
            Ok(LcsReply::Idx {
                matches: vec![m((4, 7), (5, 8)), m((2, 3), (0, 1))],
                len: 6,
                with_match_len: false,
            }),
        ),
        (
            "LCS a b IDX MINMATCHLEN 4 WITHMATCHLEN",
            Ok(LcsReply::Idx {
                matches: vec![m((4, 7), (5, 8))],
                len: 6,
                with_match_len: true,
            }),
        ),
        ("LCS a b LEN IDX", Err(BitsError::LcsLenAndIdx)),
        ("LCS a b MINMATCHLEN", Err(BitsError::Syntax)),
        ("LCS a b MINMATCHLEN x", Err(BitsError::NotInteger)),
        ("LCS a b FOO", Err(BitsError::Syntax)),
    ];
    for (line, want) in cases {
        assert_eq!(cmd_lcs(&w(line), a, b, DEFAULT_MAX_BYTES), *want, "{line}");
    }
    assert_eq!(
        cmd_lcs(&w("LCS a b FOO"), a, Lookup::WrongType, 1 << 20),
        Err(BitsError::LcsNotString)
    );
    assert_eq!(
        cmd_lcs(&w("LCS a b"), Lookup::Missing, b, 1 << 20),
        Ok(LcsReply::Str(Vec::new()))
    );
    // (8+1) * (9+1) cells of 4 bytes: 360 bytes.
    assert_eq!(
        cmd_lcs(&w("LCS a b LEN"), a, b, 359),
        Err(BitsError::LcsMemory)
    );
    assert_eq!(cmd_lcs(&w("LCS a b LEN"), a, b, 360), Ok(LcsReply::Len(6)));
    let reply = LcsReply::Idx {
        matches: vec![m((0, 1), (2, 3))],
        len: 2,
        with_match_len: true,
    }
    .to_reply();
    let pair = |x, y| Reply::Array(Some(vec![Reply::Integer(x), Reply::Integer(y)]));
    assert_eq!(
        reply,
        Reply::Map(vec![
            (
                Reply::Bulk(Some(b"matches".to_vec())),
                Reply::Array(Some(vec![Reply::Array(Some(vec![
                    pair(0, 1),
                    pair(2, 3),
                    Reply::Integer(2)
                ]))]))
            ),
            (Reply::Bulk(Some(b"len".to_vec())), Reply::Integer(2)),
        ])
    );
}

#[test]
fn errors_carry_redis_texts() {
    assert_eq!(BitsError::WrongType.to_reply(), Reply::err(ERR_WRONGTYPE));
    assert_eq!(
        BitsError::TooBig.to_string(),
        "ERR string exceeds maximum allowed size (proto-max-bulk-len)"
    );
    assert_eq!(
        arity_error(&w("BITFIELD_RO"), "x").to_string(),
        "ERR wrong number of arguments for 'bitfield_ro' command"
    );
}
