use super::*;
use crate::value::SplitMix;

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// `obj` with a version-10 footer and its CRC.
fn with_footer(obj: &[u8]) -> Vec<u8> {
    let mut p = obj.to_vec();
    p.extend_from_slice(&RDB_VERSION.to_le_bytes());
    let c = crc64(&p);
    p.extend_from_slice(&c.to_le_bytes());
    p
}

/// Recomputes the CRC of a payload whose body was edited.
fn fix_crc(p: &mut [u8]) {
    let n = p.len();
    if n >= 8 {
        let c = crc64(&p[..n - 8]);
        p[n - 8..].copy_from_slice(&c.to_le_bytes());
    }
}

fn s(x: &str) -> Vec<u8> {
    x.as_bytes().to_vec()
}

fn list(items: &[&str]) -> Value {
    Value::List(items.iter().map(|x| s(x)).collect())
}

fn set(items: &[&str]) -> Value {
    Value::Set(items.iter().map(|x| s(x)).collect())
}

fn hash(pairs: &[(&str, &str)]) -> Value {
    Value::Hash(pairs.iter().map(|(f, v)| (s(f), s(v))).collect())
}

fn zset(pairs: &[(&str, f64)]) -> Value {
    let mut z = ZSet::default();
    for (m, sc) in pairs {
        z.insert(s(m), Score::new(*sc).unwrap());
    }
    Value::ZSet(z)
}

#[test]
fn crc64_is_redis_jones_variant() {
    // Redis's crc64.c self-test value.
    assert_eq!(crc64(b"123456789"), 0xe9c6_d914_c4b8_d9ca);
}

/// (what, Redis 7.0.15's DUMP in hex, the value, our dump is byte-equal).
fn fixtures() -> Vec<(&'static str, Vec<u8>, Value, bool)> {
    let x70 = "x".repeat(70);
    let y70 = "y".repeat(70);
    vec![
        ("SET i 12345", hex("00c139300a009d94ea2793fc08b9"), Value::Str(s("12345")), true),
        ("SET n -129", hex("00c17fff0a001760822854808480"), Value::Str(s("-129")), true),
        (
            "SET big 3000000000",
            hex("000a333030303030303030300a00e7076b7954bb7947"),
            Value::Str(s("3000000000")),
            true,
        ),
        (
            "SET z a*40",
            hex("00c30928016161e01b000161610a00cf092faaae25831d"),
            Value::Str(vec![b'a'; 40]),
            false,
        ),
        (
            "SADD si 1 5 -3",
            hex("0b0e0200000003000000fdff010005000a007e2b589563748fa4"),
            set(&["1", "5", "-3"]),
            true,
        ),
        ("SADD ss a b", hex("0202016201610a0075d99d835ef85f65"), set(&["a", "b"]), false),
        (
            "ZADD zl 1 a 2.5 b",
            hex("1114140000000400816102010181620283322e3504ff0a00d44c6ea4f644d9d7"),
            zset(&[("a", 1.0), ("b", 2.5)]),
            true,
        ),
        (
            "ZADD zs 1 x*70 -inf c",
            hex("0502c3094046017878e03900017878000000000000f03f0163000000000000f0ff0a00fcb5c292197cbc72"),
            zset(&[(&x70, 1.0), ("c", f64::NEG_INFINITY)]),
            false,
        ),
        (
            "HSET hl f v n 7",
            hex("1012120000000400816602817602816e020701ff0a00b82adea8407ffaa8"),
            hash(&[("f", "v"), ("n", "7")]),
            false, // Redis keeps insertion order (f, n); ours is field order
        ),
        (
            "HSET hh f y*70",
            hex("04010166c3094046017979e039000179790a00ee85cb01a5bbf409"),
            hash(&[("f", &y70)]),
            false,
        ),
        (
            "RPUSH l a b 1 2",
            hex("1201021111000000040081610281620201010201ff0a006d72713e9b43482b"),
            list(&["a", "b", "1", "2"]),
            true,
        ),
    ]
}

#[test]
fn restores_what_redis_dumps_and_dumps_what_redis_does() {
    for (what, payload, value, exact) in fixtures() {
        assert_eq!(verify(&payload), Ok(10), "{what}");
        assert_eq!(restore(&payload).as_ref(), Ok(&value), "{what}");
        let ours = dump(&value);
        assert_eq!(restore(&ours).as_ref(), Ok(&value), "{what}: our dump");
        if exact {
            assert_eq!(ours, payload, "{what}: bytes");
        }
        // Uncompressed, the strings and skiplist zset are Redis's too.
        let plain = dump_with(
            &value,
            &DumpOptions {
                rdbcompression: false,
                ..DumpOptions::default()
            },
        );
        assert_eq!(restore(&plain).as_ref(), Ok(&value), "{what}: uncompressed");
    }
}

#[test]
fn footer_checks() {
    let good = dump(&Value::Str(s("hello")));
    let mut cases: Vec<(&str, Vec<u8>)> = vec![
        ("empty", vec![]),
        ("shorter than the footer", good[..9].to_vec()),
        ("truncated", good[..good.len() - 1].to_vec()),
    ];
    let mut b = good.clone();
    b[1] ^= 1;
    cases.push(("flipped body", b));
    let mut b = good.clone();
    let n = b.len();
    b[n - 1] ^= 0x80;
    cases.push(("flipped crc", b));
    let mut b = good.clone();
    b[n - 10] = 11;
    fix_crc(&mut b);
    cases.push(("version 11", b));
    for (what, p) in cases {
        assert_eq!(restore(&p), Err(RdbError::VersionOrChecksum), "{what}");
    }
    // Older versions are accepted.
    let mut b = good.clone();
    b[n - 10] = 7;
    fix_crc(&mut b);
    assert_eq!(verify(&b), Ok(7));
    assert_eq!(restore(&b), Ok(Value::Str(s("hello"))));
    assert_eq!(
        RdbError::VersionOrChecksum.to_string(),
        "ERR DUMP payload version or checksum are wrong"
    );
    assert_eq!(bad("x").to_string(), "ERR Bad data format");
}

fn lp(items: &[&str]) -> Vec<u8> {
    let mut w = listpack::Writer::new();
    for i in items {
        w.append(i.as_bytes());
    }
    w.finish()
}

fn blob(out: &mut Vec<u8>, b: &[u8]) {
    save_len(out, b.len() as u64);
    out.extend_from_slice(b);
}

fn obj(t: u8, parts: &[&[u8]]) -> Vec<u8> {
    let mut o = vec![t];
    for p in parts {
        o.extend_from_slice(p);
    }
    o
}

#[test]
fn legacy_and_rare_encodings() {
    use legacy::tests::build_ziplist;
    use Entry::{Int, Str};
    let zl_list = build_ziplist(&[Str(b"a"), Int(-7), Int(3), Str(b"")]);
    let zl_hash = build_ziplist(&[Str(b"f"), Int(1), Int(2), Str(b"v")]);
    let zl_zset = build_ziplist(&[
        Str(b"m"),
        Str(b"1.5"),
        Int(9),
        Int(-2),
        Str(b"x"),
        Str(b" 3e1abc"),
    ]);
    let zl_dup = build_ziplist(&[Str(b"5"), Int(1), Int(5), Str(b"v")]);
    let zl_odd = build_ziplist(&[Str(b"f"), Int(1), Str(b"g")]);
    let zl_empty = build_ziplist(&[]);
    let zl_nan = build_ziplist(&[Str(b"m"), Str(b"nan")]);
    let zipmap = b"\x02\x03foo\x03\x00bar\x05hello\x05\x00world\xff".to_vec();
    let zipmap_dup = b"\x02\x01a\x01\x00b\x01a\x01\x00c\xff".to_vec();

    let b = |parts: &[&[u8]]| {
        let mut out = Vec::new();
        for p in parts {
            blob(&mut out, p);
        }
        out
    };
    let ok: Vec<(&str, Vec<u8>, Value)> = vec![
        (
            "linked list",
            obj(TYPE_LIST, &[b"\x02\x01a\xc0\x05"]),
            list(&["a", "5"]),
        ),
        (
            "list count with the encoded flag (Redis ignores the flag)",
            obj(TYPE_LIST, &[b"\xc1\x01a"]),
            list(&["a"]),
        ),
        (
            "zset with text scores",
            obj(
                TYPE_ZSET,
                &[b"\x04\x01a\x031.5\x01b\xfe\x01c\xff\x01d\x05 2abc"],
            ),
            zset(&[
                ("a", 1.5),
                ("b", f64::INFINITY),
                ("c", f64::NEG_INFINITY),
                ("d", 2.0),
            ]),
        ),
        (
            "zipmap hash",
            obj(TYPE_HASH_ZIPMAP, &[&b(&[&zipmap])]),
            hash(&[("foo", "bar"), ("hello", "world")]),
        ),
        (
            "ziplist list",
            obj(TYPE_LIST_ZIPLIST, &[&b(&[&zl_list])]),
            list(&["a", "-7", "3", ""]),
        ),
        (
            "ziplist hash",
            obj(TYPE_HASH_ZIPLIST, &[&b(&[&zl_hash])]),
            hash(&[("f", "1"), ("2", "v")]),
        ),
        (
            "ziplist zset",
            obj(TYPE_ZSET_ZIPLIST, &[&b(&[&zl_zset])]),
            zset(&[("m", 1.5), ("9", -2.0), ("x", 30.0)]),
        ),
        (
            "quicklist of ziplists, an empty one skipped",
            obj(TYPE_LIST_QUICKLIST, &[b"\x02", &b(&[&zl_empty, &zl_list])]),
            list(&["a", "-7", "3", ""]),
        ),
        (
            "quicklist 2 with a plain node",
            obj(
                TYPE_LIST_QUICKLIST_2,
                &[b"\x02\x01\x03big\x02", &b(&[&lp(&["x", "1"])])],
            ),
            list(&["big", "x", "1"]),
        ),
        (
            "plain node holding an integer-encoded string",
            obj(TYPE_LIST_QUICKLIST_2, &[b"\x01\x01\xc0\x07"]),
            list(&["7"]),
        ),
        (
            "listpack zset with odd text scores",
            obj(
                TYPE_ZSET_LISTPACK,
                &[&b(&[&lp(&["a", "junk", "b", "0x10", "c", "-inf"])])],
            ),
            zset(&[("a", 0.0), ("b", 16.0), ("c", f64::NEG_INFINITY)]),
        ),
        (
            "LZF string of length 0 (Redis accepts it)",
            obj(TYPE_STRING, &[b"\xc3\x02\x00\x00a"]),
            Value::Str(vec![]),
        ),
        (
            "plain set of integers",
            obj(TYPE_SET, &[b"\x02\xc0\x01\xc0\x02"]),
            set(&["1", "2"]),
        ),
    ];
    for (what, o, want) in ok {
        let p = with_footer(&o);
        assert_eq!(restore(&p), Ok(want), "{what}");
    }

    let refused: Vec<(&str, Vec<u8>, RdbError)> = vec![
        ("empty linked list", obj(TYPE_LIST, &[b"\x00"]), bad("")),
        ("empty set", obj(TYPE_SET, &[b"\x00"]), bad("")),
        (
            "duplicate set member",
            obj(TYPE_SET, &[b"\x02\x01a\x01a"]),
            bad(""),
        ),
        (
            "duplicate integer member",
            obj(TYPE_SET, &[b"\x02\xc0\x01\x011"]),
            bad(""),
        ),
        ("empty hash", obj(TYPE_HASH, &[b"\x00"]), bad("")),
        (
            "duplicate field",
            obj(TYPE_HASH, &[b"\x02\x01a\x01b\x01a\x01c"]),
            bad(""),
        ),
        ("empty zset", obj(TYPE_ZSET_2, &[b"\x00"]), bad("")),
        (
            "NaN text score",
            obj(TYPE_ZSET, &[b"\x01\x01a\xfd"]),
            bad(""),
        ),
        (
            "NaN spelled",
            obj(TYPE_ZSET, &[b"\x01\x01a\x03nan"]),
            bad(""),
        ),
        (
            "unreadable text score",
            obj(TYPE_ZSET, &[b"\x01\x01a\x01x"]),
            bad(""),
        ),
        (
            "empty text score",
            obj(TYPE_ZSET, &[b"\x01\x01a\x00"]),
            bad(""),
        ),
        (
            "NaN binary score",
            obj(TYPE_ZSET_2, &[b"\x01\x01a", &f64::NAN.to_le_bytes()]),
            bad(""),
        ),
        (
            "duplicate zset member",
            obj(
                TYPE_ZSET_2,
                &[
                    b"\x02\x01a",
                    &1f64.to_le_bytes(),
                    b"\x01a",
                    &2f64.to_le_bytes(),
                ],
            ),
            bad(""),
        ),
        (
            "zipmap with a duplicate field",
            obj(TYPE_HASH_ZIPMAP, &[&b(&[&zipmap_dup])]),
            bad(""),
        ),
        (
            "ziplist hash with a duplicate field",
            obj(TYPE_HASH_ZIPLIST, &[&b(&[&zl_dup])]),
            bad(""),
        ),
        (
            "ziplist hash with an odd count",
            obj(TYPE_HASH_ZIPLIST, &[&b(&[&zl_odd])]),
            bad(""),
        ),
        (
            "empty ziplist hash",
            obj(TYPE_HASH_ZIPLIST, &[&b(&[&zl_empty])]),
            bad(""),
        ),
        (
            "empty ziplist list",
            obj(TYPE_LIST_ZIPLIST, &[&b(&[&zl_empty])]),
            bad(""),
        ),
        (
            "ziplist zset with a NaN score",
            obj(TYPE_ZSET_ZIPLIST, &[&b(&[&zl_nan])]),
            bad(""),
        ),
        (
            "listpack hash with an odd count",
            obj(TYPE_HASH_LISTPACK, &[&b(&[&lp(&["f"])])]),
            bad(""),
        ),
        (
            "empty listpack hash",
            obj(TYPE_HASH_LISTPACK, &[&b(&[&lp(&[])])]),
            bad(""),
        ),
        (
            "empty listpack zset",
            obj(TYPE_ZSET_LISTPACK, &[&b(&[&lp(&[])])]),
            bad(""),
        ),
        (
            "listpack zset with a duplicate member",
            obj(TYPE_ZSET_LISTPACK, &[&b(&[&lp(&["a", "1", "a", "2"])])]),
            bad(""),
        ),
        (
            "quicklist with no node",
            obj(TYPE_LIST_QUICKLIST_2, &[b"\x00"]),
            bad(""),
        ),
        (
            "quicklist of empty listpacks",
            obj(TYPE_LIST_QUICKLIST_2, &[b"\x01\x02", &b(&[&lp(&[])])]),
            bad(""),
        ),
        (
            "quicklist container 3",
            obj(TYPE_LIST_QUICKLIST_2, &[b"\x01\x03\x01a"]),
            bad(""),
        ),
        (
            "quicklist empty plain node",
            obj(TYPE_LIST_QUICKLIST_2, &[b"\x01\x01\x00"]),
            bad(""),
        ),
        (
            "quicklist node not a listpack",
            obj(TYPE_LIST_QUICKLIST_2, &[b"\x01\x02\x03abc"]),
            bad(""),
        ),
        (
            "intset that is not one",
            obj(TYPE_SET_INTSET, &[b"\xc0\x05"]),
            bad(""),
        ),
        (
            "unknown string encoding",
            obj(TYPE_STRING, &[b"\xc4"]),
            bad(""),
        ),
        (
            "unknown length encoding",
            obj(TYPE_STRING, &[b"\x82"]),
            bad(""),
        ),
        (
            "LZF that decompresses short",
            obj(TYPE_STRING, &[b"\xc3\x02\x05\x00a"]),
            bad(""),
        ),
        (
            "LZF past its input",
            obj(TYPE_STRING, &[b"\xc3\x09\x05\x00a"]),
            bad(""),
        ),
        (
            "string longer than the payload",
            obj(TYPE_STRING, &[b"\x80\xff\xff\xff\xff"]),
            bad(""),
        ),
        (
            "huge 64-bit count",
            obj(TYPE_LIST, &[b"\x81\xff\xff\xff\xff\xff\xff\xff\xff"]),
            bad(""),
        ),
        ("module value", obj(TYPE_MODULE_2, &[b"\x01"]), bad("")),
        ("type 8", obj(8, &[b"\x00"]), bad("")),
        (
            "type 20 (Redis 7.2's listpack set)",
            obj(20, &[b"\x00"]),
            bad(""),
        ),
        ("stream", obj(TYPE_STREAM_LISTPACKS_2, &[b"\x00"]), bad("")),
        (
            "old stream",
            obj(TYPE_STREAM_LISTPACKS, &[b"\x00"]),
            bad(""),
        ),
        ("no object", vec![], bad("")),
    ];
    for (what, o, want) in refused {
        let p = with_footer(&o);
        let got = restore(&p);
        match (&got, &want) {
            (Err(RdbError::BadFormat(_)), RdbError::BadFormat(_)) => {}
            _ => assert_eq!(got, Err(want), "{what}"),
        }
    }
}

#[test]
fn truncated_object_reads_into_the_footer_as_redis_does() {
    // A string that claims 10 more bytes than the object has: Redis reads
    // them from the version and CRC that follow.
    let mut p = vec![TYPE_STRING, 10];
    p.extend_from_slice(&RDB_VERSION.to_le_bytes());
    p.extend_from_slice(&[0; 8]);
    fix_crc(&mut p);
    let got = restore(&p).unwrap();
    assert_eq!(got, Value::Str(p[2..12].to_vec()));
    // Bytes after the object are ignored.
    let mut o = vec![TYPE_STRING, 1, b'a', 0xde, 0xad];
    o = with_footer(&o);
    assert_eq!(restore(&o), Ok(Value::Str(s("a"))));
}

fn rand_bytes(r: &mut SplitMix, n: usize) -> Vec<u8> {
    (0..n).map(|_| r.next_u64() as u8).collect()
}

/// A random element: integers, integer-like strings, text, binary.
fn element(r: &mut SplitMix, max_len: usize) -> Vec<u8> {
    match r.below(8) {
        0 => (r.next_u64() as i64 >> r.below(64))
            .to_string()
            .into_bytes(),
        1 => (r.below(300) as i64 - 150).to_string().into_bytes(),
        2 => ["007", "-0", "+1", " 1", "1.0", "", "9223372036854775808"][r.below(7)].into(),
        3 => {
            let n = r.below(max_len + 1);
            rand_bytes(r, n)
        }
        4 => {
            let c = b'a' + r.below(3) as u8;
            vec![c; r.below(max_len + 1)]
        }
        _ => format!("e{}", r.below(1_000_000)).into_bytes(),
    }
}

fn random_value(r: &mut SplitMix) -> Value {
    let n = [1, 3, 100, 127, 128, 129, 511, 512, 513, 2000][r.below(10)];
    let max_len = [4, 20, 64, 65, 300, 5000][r.below(6)];
    match r.below(5) {
        0 => Value::Str(element(r, max_len * 10)),
        1 => Value::List((0..n).map(|_| element(r, max_len)).collect()),
        2 => {
            let ints = r.below(2) == 0;
            Value::Set(
                (0..n)
                    .map(|i| {
                        if ints {
                            (i as i64 * 7919 - 3000).to_string().into_bytes()
                        } else {
                            element(r, max_len)
                        }
                    })
                    .collect(),
            )
        }
        3 => Value::Hash(
            (0..n)
                .map(|_| (element(r, max_len), element(r, max_len)))
                .collect(),
        ),
        _ => {
            let mut z = ZSet::default();
            for _ in 0..n {
                let score = match r.below(4) {
                    0 => r.below(1000) as f64 - 500.0,
                    1 => (r.next_u64() as f64) / 7.0,
                    2 => [f64::INFINITY, f64::NEG_INFINITY, 0.1, 1e300, 5e-324][r.below(5)],
                    _ => f64::from_bits(r.next_u64() >> 2),
                };
                z.insert(
                    element(r, max_len),
                    Score::new(score).unwrap_or(Score::new(1.0).unwrap()),
                );
            }
            Value::ZSet(z)
        }
    }
}

#[test]
fn random_values_round_trip_under_every_option() {
    let seed = 0x5eed_0001;
    let mut r = SplitMix::new(seed);
    let opts = [
        DumpOptions::default(),
        DumpOptions {
            rdbcompression: false,
            list_max_listpack_size: 5,
            ..DumpOptions::default()
        },
        DumpOptions {
            list_max_listpack_size: -5,
            hash_max_listpack_entries: 0,
            zset_max_listpack_entries: 0,
            set_max_intset_entries: 0,
            ..DumpOptions::default()
        },
        DumpOptions {
            list_max_listpack_size: 0,
            hash_max_listpack_value: 100_000,
            zset_max_listpack_value: 100_000,
            hash_max_listpack_entries: 100_000,
            zset_max_listpack_entries: 100_000,
            ..DumpOptions::default()
        },
    ];
    for i in 0..300 {
        let v = random_value(&mut r);
        if v.is_empty_collection() {
            continue;
        }
        let o = &opts[i % opts.len()];
        let p = dump_with(&v, o);
        assert_eq!(restore(&p).as_ref(), Ok(&v), "seed {seed:#x} value {i}");
    }
}

#[test]
fn dump_picks_redis_encodings() {
    let ints: Vec<String> = (0..513).map(|i| i.to_string()).collect();
    let set_of = |n: usize| Value::Set(ints[..n].iter().map(|x| s(x)).collect());
    let hash_of = |n: usize, vlen: usize| {
        Value::Hash(
            (0..n)
                .map(|i| (format!("f{i}").into_bytes(), vec![b'v'; vlen]))
                .collect(),
        )
    };
    let zset_of = |n: usize, mlen: usize| {
        let mut z = ZSet::default();
        for i in 0..n {
            let m = format!("m{i:0>w$}", w = mlen - 1).into_bytes();
            z.insert(m, Score::new(i as f64).unwrap());
        }
        Value::ZSet(z)
    };
    let cases: Vec<(&str, Value, u8)> = vec![
        ("string", Value::Str(s("x")), TYPE_STRING),
        ("list", list(&["a"]), TYPE_LIST_QUICKLIST_2),
        ("512 integers", set_of(512), TYPE_SET_INTSET),
        ("513 integers", set_of(513), TYPE_SET),
        ("a non-integer", set(&["1", "x"]), TYPE_SET),
        ("non-canonical integer", set(&["1", "01"]), TYPE_SET),
        ("512 pairs", hash_of(512, 64), TYPE_HASH_LISTPACK),
        ("513 pairs", hash_of(513, 1), TYPE_HASH),
        ("65-byte value", hash_of(3, 65), TYPE_HASH),
        ("128 members", zset_of(128, 10), TYPE_ZSET_LISTPACK),
        ("129 members", zset_of(129, 10), TYPE_ZSET_2),
        ("65-byte member", zset_of(2, 65), TYPE_ZSET_2),
    ];
    for (what, v, t) in cases {
        assert_eq!(dump(&v)[0], t, "{what}");
        assert_eq!(restore(&dump(&v)), Ok(v), "{what}");
    }
}

#[test]
fn list_nodes_split_as_rpush_does() {
    // 8 KiB nodes: 1000 elements of 100 bytes, 8192 / (100 + 2 + 8).
    let l: Vector<Vec<u8>> = (0..1000).map(|_| vec![b'q'; 100]).collect();
    let nodes = list_nodes(&l, -2);
    let sizes: Vec<usize> = nodes
        .iter()
        .map(|n| match n {
            Node::Packed(lp) => listpack::parse(lp).unwrap().len(),
            Node::Plain(_) => 1,
        })
        .collect();
    assert_eq!(sizes.iter().sum::<usize>(), 1000);
    assert!(sizes[..sizes.len() - 1].iter().all(|&n| n == sizes[0]));
    for n in &nodes {
        if let Node::Packed(lp) = n {
            assert!(lp.len() <= 8192);
        }
    }
    // Count-limited nodes.
    let nodes = list_nodes(&l, 3);
    assert_eq!(nodes.len(), 334);
}

#[test]
fn hostile_payloads_never_panic() {
    let mut payloads: Vec<Vec<u8>> = fixtures().into_iter().map(|f| f.1).collect();
    let mut r = SplitMix::new(42);
    for _ in 0..40 {
        let v = random_value(&mut r);
        if !v.is_empty_collection() {
            let p = dump(&v);
            if p.len() < 4000 {
                payloads.push(p);
            }
        }
    }
    for p in &payloads {
        // Every truncation, with and without a fixed-up CRC.
        for n in 0..p.len() {
            let mut t = p[..n].to_vec();
            let _ = restore(&t);
            fix_crc(&mut t);
            let _ = restore(&t);
            let _ = load_object(&p[..n]);
        }
        // Random byte changes with a fixed-up CRC.
        for _ in 0..300 {
            let mut t = p.clone();
            for _ in 0..1 + r.below(3) {
                let i = r.below(t.len() - 10);
                t[i] = r.next_u64() as u8;
            }
            fix_crc(&mut t);
            match restore(&t) {
                Ok(v) => assert!(!v.is_empty_collection()),
                Err(RdbError::BadFormat(_)) => {}
                Err(e) => panic!("unexpected {e:?}"),
            }
        }
    }
}

#[test]
fn restore_options_as_redis_parses_them() {
    let o = |args: &[&str]| {
        let a: Vec<&[u8]> = args.iter().map(|x| x.as_bytes()).collect();
        parse_restore_options(&a)
    };
    let def = RestoreOptions::default();
    let cases: Vec<(&[&str], Result<RestoreOptions, RdbError>)> = vec![
        (&[], Ok(def)),
        (
            &["REPLACE"],
            Ok(RestoreOptions {
                replace: true,
                ..def
            }),
        ),
        (
            &["absttl", "replace"],
            Ok(RestoreOptions {
                replace: true,
                absttl: true,
                ..def
            }),
        ),
        (
            &["IDLETIME", "10"],
            Ok(RestoreOptions {
                idletime: Some(10),
                ..def
            }),
        ),
        (
            &["FREQ", "255"],
            Ok(RestoreOptions {
                freq: Some(255),
                ..def
            }),
        ),
        (&["FREQ", "256"], Err(RdbError::InvalidFreq)),
        (&["FREQ", "-1"], Err(RdbError::InvalidFreq)),
        (&["IDLETIME", "-1"], Err(RdbError::InvalidIdleTime)),
        (&["IDLETIME", "x"], Err(RdbError::NotAnInteger)),
        (&["IDLETIME"], Err(RdbError::Syntax)),
        (&["IDLETIME", "1", "FREQ", "1"], Err(RdbError::Syntax)),
        (&["FREQ", "1", "IDLETIME", "1"], Err(RdbError::Syntax)),
        (&["NX"], Err(RdbError::Syntax)),
    ];
    for (args, want) in cases {
        assert_eq!(o(args), want, "{args:?}");
    }
    assert_eq!(parse_restore_ttl(b"0"), Ok(0));
    assert_eq!(parse_restore_ttl(b"-1"), Err(RdbError::InvalidTtl));
    assert_eq!(parse_restore_ttl(b"1.5"), Err(RdbError::NotAnInteger));
    assert_eq!(restore_expiry(0, false, 1000), RestoreExpiry::Persist);
    assert_eq!(restore_expiry(500, false, 1000), RestoreExpiry::At(1500));
    assert_eq!(
        restore_expiry(500, true, 1000),
        RestoreExpiry::AlreadyExpired
    );
    assert_eq!(
        restore_expiry(1000, true, 1000),
        RestoreExpiry::AlreadyExpired
    );
    assert_eq!(restore_expiry(1001, true, 1000), RestoreExpiry::At(1001));
    assert_eq!(
        RdbError::BusyKey.to_string(),
        "BUSYKEY Target key name already exists."
    );
}

#[test]
fn integers_as_redis_reads_them() {
    let cases: &[(&str, Option<i64>)] = &[
        ("0", Some(0)),
        ("-1", Some(-1)),
        ("9223372036854775807", Some(i64::MAX)),
        ("-9223372036854775808", Some(i64::MIN)),
        ("9223372036854775808", None),
        ("-0", None),
        ("01", None),
        ("+1", None),
        (" 1", None),
        ("", None),
        ("-", None),
        ("1a", None),
    ];
    for (x, want) in cases {
        assert_eq!(string2ll(x.as_bytes()), *want, "{x}");
    }
    assert_eq!(double2ll(3.0), Some(3));
    assert_eq!(double2ll(-0.0), Some(0));
    assert_eq!(double2ll(0.5), None);
    assert_eq!(double2ll(4611686018427387904.0), Some(1 << 62));
    assert_eq!(double2ll(1e19), None);
    assert_eq!(double2ll(f64::INFINITY), None);
}
