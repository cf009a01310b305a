use super::*;

/// Builds a HyperLogLog string from a header (encoding byte, cache
/// bytes) and sparse opcode bytes.
fn sparse_with(ops: &[u8], card: [u8; 8]) -> Vec<u8> {
    let mut v = b"HYLL\x01\0\0\0".to_vec();
    v.extend_from_slice(&card);
    v.extend_from_slice(ops);
    v
}

fn dense_from(regs: &[u8]) -> Vec<u8> {
    let mut v = vec![0u8; DENSE_LEN];
    v[..4].copy_from_slice(MAGIC);
    v[15] = 0x80;
    for (i, r) in regs.iter().enumerate() {
        dense_put(&mut v, HEADER_LEN, i, *r);
    }
    v
}

const STALE: [u8; 8] = [0, 0, 0, 0, 0, 0, 0, 0x80];

#[test]
fn pat_len_matches_redis() {
    // (element, register, value), read from Redis 7.0.15 with
    // PFADD + PFDEBUG GETREG.
    let table: &[(&[u8], usize, u8)] = &[
        (b"", 5938, 2),
        (b"a", 12711, 2),
        (b"foo", 7348, 5),
        (b"hello world", 9399, 4),
        (b"12345678", 10579, 3),
        (b"123456789abcdef0x", 12038, 1),
    ];
    for (e, idx, val) in table {
        assert_eq!(pat_len(e), (*idx, *val), "element {e:?}");
    }
}

#[test]
fn new_sparse_is_one_xzero() {
    let h = new_sparse();
    assert_eq!(h, b"HYLL\x01\0\0\0\0\0\0\0\0\0\0\0\x7f\xff");
    assert_eq!(check(&h), Ok(Encoding::Sparse));
    assert_eq!(decode_sparse(&h).as_deref(), Ok("Z:16384"));
    assert_eq!(cached_cardinality(&h), Some(0));
}

#[test]
fn check_table() {
    let mut wrong_len = dense_from(&[]);
    wrong_len.pop();
    let mut enc2 = new_sparse();
    enc2[4] = 2;
    let cases: Vec<(Vec<u8>, Result<Encoding, HllError>)> = vec![
        (b"".to_vec(), Err(HllError::NotHll)),
        (
            b"HYLL\x01\0\0\0\0\0\0\0\0\0\0".to_vec(),
            Err(HllError::NotHll),
        ),
        (
            b"HYLL\x01\0\0\0\0\0\0\0\0\0\0\0".to_vec(),
            Ok(Encoding::Sparse),
        ),
        (
            b"HYLX\x01\0\0\0\0\0\0\0\0\0\0\0\x7f\xff".to_vec(),
            Err(HllError::NotHll),
        ),
        (enc2, Err(HllError::NotHll)),
        (wrong_len, Err(HllError::NotHll)),
        (dense_from(&[]), Ok(Encoding::Dense)),
        (
            b"HYLL\x00\0\0\0\0\0\0\0\0\0\0\0\x7f\xff".to_vec(),
            Err(HllError::NotHll),
        ),
    ];
    for (bytes, want) in cases {
        assert_eq!(check(&bytes), want, "{bytes:?}");
    }
}

#[test]
fn error_texts() {
    assert_eq!(HllError::WrongType.to_string(), crate::value::ERR_WRONGTYPE);
    assert_eq!(
        HllError::NotHll.to_string(),
        "WRONGTYPE Key is not a valid HyperLogLog string value."
    );
    assert_eq!(
        HllError::Corrupt.to_string(),
        "INVALIDOBJ Corrupted HLL object detected"
    );
    assert_eq!(
        HllError::UnknownSubcommand(error_text(b"fo\no\0x")).to_string(),
        "ERR Unknown PFDEBUG subcommand 'fo o'"
    );
}

#[test]
fn small_adds_and_counts_match_redis() {
    // From Redis 7.0.15: PFADD k a b c, GET k, PFDEBUG DECODE k, PFCOUNT.
    let mut h = new_sparse();
    assert_eq!(
        add(&mut h, &[b"a", b"b", b"c"], DEFAULT_SPARSE_MAX_BYTES),
        Ok(true)
    );
    assert_eq!(
        h,
        b"HYLL\x01\0\0\0\0\0\0\0\0\0\0\x80`\xf3\x80P\xb1\x84K\xfb\x80BZ".to_vec()
    );
    assert_eq!(
        decode_sparse(&h).as_deref(),
        Ok("Z:8436 v:1,1 Z:4274 v:2,1 Z:3068 v:1,1 Z:603")
    );
    assert_eq!(count(&mut h), Ok((3, true)));
    assert_eq!(&h[..HEADER_LEN], b"HYLL\x01\0\0\0\x03\0\0\0\0\0\0\0");
    assert_eq!(count(&mut h), Ok((3, false)));
    assert_eq!(add(&mut h, &[b"a"], DEFAULT_SPARSE_MAX_BYTES), Ok(false));
    assert_eq!(cached_cardinality(&h), Some(3));
}

#[test]
fn counts_of_integer_runs_match_redis() {
    // (n elements "0".."n-1", PFCOUNT, encoding, length) from Redis.
    let table: &[(usize, u64, Encoding, usize)] = &[
        (1, 1, Encoding::Sparse, 21),
        (10, 10, Encoding::Sparse, 48),
        (100, 100, Encoding::Sparse, 287),
        (1000, 1001, Encoding::Sparse, 1923),
        (5000, 4985, Encoding::Dense, DENSE_LEN),
        (20000, 19891, Encoding::Dense, DENSE_LEN),
    ];
    for (n, card, enc, len) in table {
        let mut h = new_sparse();
        let elems: Vec<String> = (0..*n).map(|i| i.to_string()).collect();
        for chunk in elems.chunks(1000) {
            let refs: Vec<&[u8]> = chunk.iter().map(|s| s.as_bytes()).collect();
            add(&mut h, &refs, DEFAULT_SPARSE_MAX_BYTES).unwrap();
        }
        assert_eq!(count(&mut h).map(|c| c.0), Ok(*card), "n={n}");
        assert_eq!(check(&h), Ok(*enc), "n={n}");
        assert_eq!(h.len(), *len, "n={n}");
    }
}

#[test]
fn estimator_edge_cases_match_redis() {
    // Dense sketches set with SET; PFCOUNT from Redis 7.0.15 (x86-64).
    let mut one50 = vec![63u8; REGISTERS];
    one50[0] = 50;
    let mut half51 = vec![51u8; REGISTERS];
    half51[8192..].fill(1);
    let mix: Vec<u8> = (0..REGISTERS).map(|i| (i % 64) as u8).collect();
    let mut ten51 = vec![0u8; REGISTERS];
    ten51[..10].fill(51);
    let table: &[(Vec<u8>, i64)] = &[
        (one50, i64::MIN),
        (vec![51; REGISTERS], i64::MIN),
        (vec![63; REGISTERS], i64::MIN),
        (half51, 47274),
        (mix, 375261),
        (ten51, 10),
        (vec![30; REGISTERS], 12690079782337),
        (vec![40; REGISTERS], 12994641697113596),
    ];
    for (regs, want) in table {
        let v = Value::Str(dense_from(regs));
        let out = pfcount(&[Some(&v)]);
        assert_eq!(out.reply, Ok(*want));
        assert_eq!(pfcount(&[Some(&v), Some(&v)]).reply, Ok(*want));
        assert_eq!(cardinality_of_registers(regs) as i64, *want);
    }
}

#[test]
fn corrupt_sparse_table() {
    let x16384 = xzero_op(16384);
    let mut trailing_val = x16384.to_vec();
    trailing_val.push(0x80);
    let mut short = xzero_op(16000).to_vec();
    short.push(zero_op(10));
    // (ops, single count, union count, GETREG)
    let cases: Vec<(Vec<u8>, bool)> = vec![
        (x16384.to_vec(), true),
        (trailing_val, false),
        (short, false),
        (vec![], false),
        // XZERO 255, then a truncated XZERO reading the terminator:
        // 255 + 16129 = 16384, valid.
        (vec![0x40, 0xfe, 0x7f], true),
    ];
    for (ops, valid) in cases {
        let v = Value::Str(sparse_with(&ops, STALE));
        let want = if valid { Ok(0) } else { Err(HllError::Corrupt) };
        assert_eq!(pfcount(&[Some(&v)]).reply, want, "{ops:?}");
        assert_eq!(pfcount(&[Some(&v), None]).reply, want, "{ops:?}");
        let getreg = pfdebug(b"GETREG", Some(&v)).reply.map(|_| 0);
        assert_eq!(getreg, want, "{ops:?}");
    }
}

#[test]
fn redis_edits_of_corrupt_sparse() {
    // Observed on Redis 7.0.15: PFADD x y into "XZERO 16384, VAL 1"
    // edits in place (no validation) ...
    let mut a = sparse_with(&[0x7f, 0xff, 0x80], STALE);
    assert_eq!(
        add(&mut a, &[b"x", b"y"], DEFAULT_SPARSE_MAX_BYTES),
        Ok(true)
    );
    assert_eq!(a, sparse_with(b"zS\x88E\xa0\x84\x08\x80", STALE));
    // ... and PFADD a into "XZERO 255, truncated XZERO" writes past
    // the end: the last byte of the split is cut off.
    let mut d = sparse_with(&[0x40, 0xfe, 0x7f], [0; 8]);
    assert_eq!(add(&mut d, &[b"a"], DEFAULT_SPARSE_MAX_BYTES), Ok(true));
    assert_eq!(d, sparse_with(b"@\xfep\xa7\x84N", STALE));
}

#[test]
fn pfadd_and_pfmerge_outcomes() {
    let created = pfadd(None, &[], DEFAULT_SPARSE_MAX_BYTES);
    assert_eq!(created.reply, Ok(true));
    let mut stale = new_sparse();
    stale[15] = 0x80;
    assert_eq!(created.new_value, Some(stale));
    let v = Value::Str(new_sparse());
    let same = pfadd(Some(&v), &[], DEFAULT_SPARSE_MAX_BYTES);
    assert_eq!(
        same,
        Outcome {
            reply: Ok(false),
            new_value: None
        }
    );
    let list = Value::List(Default::default());
    assert_eq!(
        pfadd(Some(&list), &[b"a"], 3000).reply,
        Err(HllError::WrongType)
    );
    let s = Value::Str(b"not an hll".to_vec());
    assert_eq!(pfadd(Some(&s), &[b"a"], 3000).reply, Err(HllError::NotHll));
    // Order of the checks in a multi-key PFCOUNT.
    assert_eq!(
        pfcount(&[Some(&s), Some(&list)]).reply,
        Err(HllError::NotHll)
    );
    assert_eq!(
        pfcount(&[Some(&list), Some(&s)]).reply,
        Err(HllError::WrongType)
    );
    // PFMERGE of nothing into a new key: an empty sparse, stale cache.
    let mut want = new_sparse();
    want[15] = 0x80;
    assert_eq!(pfmerge(&[None], 3000), Ok(want));
}

#[test]
fn byte_level_merge_and_union_agree_with_commands() {
    let mut a = new_sparse();
    let mut b = new_sparse();
    add(&mut a, &[b"x", b"y", b"z"], 3000).unwrap();
    add(&mut b, &[b"y", b"w"], 3000).unwrap();
    let (va, vb) = (Value::Str(a.clone()), Value::Str(b.clone()));
    let merged = merge(Some(&a), &[&b], 3000).unwrap();
    assert_eq!(Ok(merged.clone()), pfmerge(&[Some(&va), Some(&vb)], 3000));
    assert_eq!(check(&merged), Ok(Encoding::Sparse));
    assert_eq!(count_union(&[&a, &b]), Ok(4));
    assert_eq!(pfcount(&[Some(&va), Some(&vb)]).reply, Ok(4));
    let mut m = merged;
    assert_eq!(count(&mut m), Ok((4, true)));
    // A dense source makes the destination dense.
    let mut d = dense_from(&[]);
    add(&mut d, &[b"q"], 3000).unwrap();
    let md = merge(None, &[&a, &d], 3000).unwrap();
    assert_eq!(check(&md), Ok(Encoding::Dense));
    assert_eq!(count_union(&[&md]), Ok(4));
    assert_eq!(merge(None, &[b"junk"], 3000), Err(HllError::NotHll));
}

#[test]
fn pfdebug_table() {
    let mut h = new_sparse();
    add(&mut h, &[b"a"], 3000).unwrap();
    let v = Value::Str(h.clone());
    let dense = Value::Str(dense_from(&[]));
    assert_eq!(pfdebug(b"getreg", None).reply, Err(HllError::NoSuchKey));
    assert_eq!(
        pfdebug(b"foo", Some(&v)).reply,
        Err(HllError::UnknownSubcommand("foo".into()))
    );
    assert_eq!(
        pfdebug(b"DECODE", Some(&dense)).reply,
        Err(HllError::NotSparse)
    );
    assert_eq!(
        pfdebug(b"Encoding", Some(&v)).reply,
        Ok(DebugReply::Encoding(Encoding::Sparse))
    );
    let td = pfdebug(b"todense", Some(&v));
    assert_eq!(td.reply, Ok(DebugReply::Converted(true)));
    let conv = td.new_value.unwrap();
    assert_eq!(conv.len(), DENSE_LEN);
    let mut header = h[..HEADER_LEN].to_vec();
    header[4] = 0;
    assert_eq!(&conv[..HEADER_LEN], &header[..]);
    assert_eq!(
        pfdebug(b"todense", Some(&dense)),
        Outcome {
            reply: Ok(DebugReply::Converted(false)),
            new_value: None
        }
    );
    match pfdebug(b"GETREG", Some(&v)).reply {
        Ok(DebugReply::Registers(r)) => {
            assert_eq!(r.len(), REGISTERS);
            assert_eq!(r[12711], 2);
            assert_eq!(r.iter().filter(|x| **x != 0).count(), 1);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn sparse_and_dense_agree() {
    // Every add through the sparse path equals the same adds on a
    // dense sketch, register by register.
    let mut rng = crate::value::SplitMix::new(7);
    let mut sparse = new_sparse();
    let mut dense = dense_from(&[]);
    dense[15] = 0;
    for round in 0..300 {
        let batch: Vec<Vec<u8>> = (0..rng.below(20))
            .map(|_| rng.next_u64().to_string().into_bytes())
            .collect();
        let refs: Vec<&[u8]> = batch.iter().map(|b| b.as_slice()).collect();
        let a = add(&mut sparse, &refs, usize::MAX).unwrap();
        let b = add(&mut dense, &refs, usize::MAX).unwrap();
        assert_eq!(a, b, "round {round}");
        assert_eq!(registers(&sparse), registers(&dense), "round {round}");
    }
    assert_eq!(
        count(&mut sparse).map(|c| c.0),
        count(&mut dense).map(|c| c.0)
    );
}

#[test]
fn murmur_tail_lengths() {
    // Every tail length 0..=7 after a full word goes through the same
    // code as Redis's fall-through switch: lengths differ in hash.
    let data = b"0123456789abcdef";
    let hashes: Vec<u64> = (0..=16)
        .map(|n| murmurhash64a(&data[..n], MURMUR_SEED))
        .collect();
    let mut uniq = hashes.clone();
    uniq.sort_unstable();
    uniq.dedup();
    assert_eq!(uniq.len(), hashes.len());
}
