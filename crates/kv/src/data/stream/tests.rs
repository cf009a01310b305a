use super::listpack::{lp_str, rax_nodes};
use super::*;
use crate::resp::Reply;

fn id(ms: u64, seq: u64) -> StreamId {
    StreamId::new(ms, seq)
}

fn words(s: &str) -> Vec<Vec<u8>> {
    s.split(' ').map(|w| w.as_bytes().to_vec()).collect()
}

fn fields(pairs: &[(&str, &str)]) -> Vec<(Vec<u8>, Vec<u8>)> {
    pairs
        .iter()
        .map(|(f, v)| (f.as_bytes().to_vec(), v.as_bytes().to_vec()))
        .collect()
}

const MAX: u64 = u64::MAX;

#[test]
fn ids_parse_as_redis_does() {
    // (word, missing seq, strict, expected); the quirks on the right
    // are what redis-server 7.0.15 answered to XADD.
    let bad = Err(StreamError::InvalidId);
    type Row = (&'static [u8], u64, bool, Result<StreamId, StreamError>);
    let table: &[Row] = &[
        (b"5-1", 0, false, Ok(id(5, 1))),
        (b"5", 0, false, Ok(id(5, 0))),
        (b"5", MAX, false, Ok(id(5, MAX))),
        (b"-", 0, false, Ok(id(0, 0))),
        (b"+", 0, false, Ok(id(MAX, MAX))),
        (b"-", 0, true, bad.clone()),
        (b"+", 0, true, bad.clone()),
        (b" 5-1", 0, true, Ok(id(5, 1))),
        (b"+6", 0, true, Ok(id(6, 0))),
        (b"7-+1", 0, true, Ok(id(7, 1))),
        (b"8- 2", 0, true, Ok(id(8, 2))),
        (b"9-05", 0, true, Ok(id(9, 5))),
        (b"10--5", 0, true, bad.clone()),
        (b"11--05", 0, true, Ok(id(11, MAX - 4))),
        (b"12-0x1", 0, true, bad.clone()),
        (b"013-1", 0, true, Ok(id(13, 1))),
        (b"14-18446744073709551615", 0, true, Ok(id(14, MAX))),
        (b"15-18446744073709551616", 0, true, bad.clone()),
        (b"16-", 0, true, bad.clone()),
        (b"-17", 0, true, bad.clone()),
        (b"18-*", 0, true, bad.clone()),
        (b"20-1-2", 0, true, bad.clone()),
        (b"21.5", 0, true, bad.clone()),
        (b"30\0junk", 0, true, Ok(id(30, 0))),
        (b"", 0, false, bad.clone()),
        (b" ", 0, false, bad.clone()),
    ];
    for (w, missing, strict, want) in table {
        let got = if *strict {
            StreamId::parse_strict(w, *missing)
        } else {
            StreamId::parse(w, *missing)
        };
        assert_eq!(&got, want, "{:?}", String::from_utf8_lossy(w));
    }
    assert_eq!(
        StreamId::parse(&[b'1'; 128], 0),
        Err(StreamError::InvalidId)
    );
}

#[test]
fn xadd_ids_parse() {
    for (w, want) in [
        ("*", Ok(XaddId::Auto)),
        ("5-*", Ok(XaddId::Ms(5))),
        ("5", Ok(XaddId::Explicit(id(5, 0)))),
        ("5-3", Ok(XaddId::Explicit(id(5, 3)))),
        ("*-1", Err(StreamError::InvalidId)),
        ("5-*x", Err(StreamError::InvalidId)),
        ("-", Err(StreamError::InvalidId)),
    ] {
        assert_eq!(XaddId::parse(w.as_bytes()), want, "{w}");
    }
}

#[test]
fn ids_step_and_print() {
    assert_eq!(id(1, MAX).incr(), Some(id(2, 0)));
    assert_eq!(id(1, 1).incr(), Some(id(1, 2)));
    assert_eq!(StreamId::MAX.incr(), None);
    assert_eq!(id(2, 0).decr(), Some(id(1, MAX)));
    assert_eq!(StreamId::MIN.decr(), None);
    assert_eq!(id(12, 3).to_string(), "12-3");
    assert!(id(1, MAX) < id(2, 0));
}

#[test]
fn range_bounds() {
    let table: &[(&str, bool, Result<StreamId, StreamError>)] = &[
        ("-", true, Ok(id(0, 0))),
        ("(5-1", true, Ok(id(5, 2))),
        ("(5", true, Ok(id(5, 1))),
        ("5", true, Ok(id(5, 0))),
        (
            "(18446744073709551615-18446744073709551615",
            true,
            Err(StreamError::InvalidStart),
        ),
        ("(-", true, Err(StreamError::InvalidId)),
        ("(", true, Err(StreamError::InvalidId)),
        ("+", false, Ok(StreamId::MAX)),
        ("5", false, Ok(id(5, MAX))),
        ("(5-1", false, Ok(id(5, 0))),
        ("(6", false, Ok(id(6, MAX - 1))),
        ("(6-0", false, Ok(id(5, MAX))),
        ("(0-0", false, Err(StreamError::InvalidEnd)),
        ("(+", false, Err(StreamError::InvalidId)),
    ];
    for (w, start, want) in table {
        let got = if *start {
            range_start(w.as_bytes())
        } else {
            range_end(w.as_bytes())
        };
        assert_eq!(&got, want, "{w}");
    }
}

#[test]
fn listpack_element_sizes() {
    // (element, bytes with its back-length).
    for (s, n) in [
        ("0", 2),
        ("127", 2),
        ("128", 3),
        ("-4096", 3),
        ("4096", 4),
        ("-32768", 4),
        ("32768", 5),
        ("8388608", 6),
        ("2147483648", 10),
        ("-0", 4),
        ("007", 5),
        ("", 2),
        ("abc", 5),
        ("18446744073709551616", 22),
    ] {
        assert_eq!(lp_str(s.as_bytes()), n, "{s}");
    }
    assert_eq!(lp_str(&[b'a'; 63]), 65);
    assert_eq!(lp_str(&[b'a'; 64]), 66 + 1);
    assert_eq!(lp_str(&[b'a'; 4096]), 4101 + 2);
}

#[test]
fn rax_node_counts() {
    let key = |b: &[(usize, u8)]| {
        let mut k = [0u8; 16];
        for &(i, v) in b {
            k[i] = v;
        }
        k
    };
    // (keys, nodes): a compressed run per stretch between branches,
    // a node per branch, a leaf per key.
    let table: Vec<(Vec<[u8; 16]>, u64)> = vec![
        (vec![key(&[])], 2),
        (vec![key(&[]), key(&[(15, 1)])], 4),
        (vec![key(&[]), key(&[(0, 1)])], 5),
        (vec![key(&[]), key(&[(8, 1)])], 6),
        (vec![key(&[]), key(&[(15, 1)]), key(&[(15, 2)])], 5),
        (vec![key(&[]), key(&[(14, 1)]), key(&[(14, 1), (15, 1)])], 7),
    ];
    for (keys, want) in table {
        assert_eq!(rax_nodes(&keys, 0), want, "{keys:?}");
    }
    assert_eq!(Stream::new().radix_tree_nodes(), 1);
}

#[test]
fn xadd_ids_never_go_back() {
    let cfg = StreamConfig::default();
    let mut s = Stream::new();
    let f = || fields(&[("f", "v")]);
    // (id argument, clock, result).
    let table: &[(XaddId, u64, Result<StreamId, StreamError>)] = &[
        (XaddId::Auto, 1000, Ok(id(1000, 0))),
        (XaddId::Auto, 1000, Ok(id(1000, 1))),
        (XaddId::Auto, 900, Ok(id(1000, 2))),
        (XaddId::Auto, 1001, Ok(id(1001, 0))),
        (XaddId::Ms(1001), 0, Ok(id(1001, 1))),
        (XaddId::Ms(1000), 0, Err(StreamError::IdNotGreater)),
        (XaddId::Ms(2000), 0, Ok(id(2000, 0))),
        (
            XaddId::Explicit(id(2000, 0)),
            0,
            Err(StreamError::IdNotGreater),
        ),
        (XaddId::Explicit(id(0, 0)), 0, Err(StreamError::IdZero)),
        (XaddId::Explicit(id(2000, MAX)), 0, Ok(id(2000, MAX))),
        (XaddId::Ms(2000), 0, Err(StreamError::TooLarge)),
        (XaddId::Auto, 5, Ok(id(2001, 0))),
        (XaddId::Explicit(StreamId::MAX), 0, Ok(StreamId::MAX)),
        (XaddId::Auto, 5, Err(StreamError::Exhausted)),
    ];
    for (i, (arg, now, want)) in table.iter().enumerate() {
        assert_eq!(&s.add(*arg, f(), *now, &cfg), want, "row {i}");
    }
    assert_eq!(s.len(), 9);
    assert_eq!(s.entries_added(), 9);
    assert_eq!(s.first_id(), id(1000, 0));
}

#[test]
fn trimming_exact_and_by_nodes() {
    let cfg = StreamConfig {
        node_max_entries: 3,
        node_max_bytes: 4096,
    };
    let filled = || {
        let mut s = Stream::new();
        for i in 1..=10 {
            s.add(XaddId::Explicit(id(i, 0)), fields(&[("f", "v")]), 0, &cfg)
                .unwrap();
        }
        s
    };
    let s = filled();
    assert_eq!(s.radix_tree_keys(), 4);
    // (trim, removed, length after, nodes after).
    let mx = |n, approx, limit| Trim::new(TrimStrategy::MaxLen(n), approx, limit, &cfg);
    let mi = |m, approx, limit| Trim::new(TrimStrategy::MinId(id(m, 0)), approx, limit, &cfg);
    for (t, removed, len, nodes) in [
        (mx(5, true, None), 3, 7, 3),
        (mx(5, false, None), 5, 5, 3),
        (mx(0, true, None), 10, 0, 0),
        (mx(0, true, Some(5)), 3, 7, 3),
        (mx(0, true, Some(0)), 10, 0, 0),
        (mi(8, true, None), 6, 4, 2),
        (mi(8, false, None), 7, 3, 2),
        (mi(1, false, None), 0, 10, 4),
        (mx(20, false, None), 0, 10, 4),
    ] {
        let mut s = filled();
        assert_eq!(s.trim(&t), removed, "{t:?}");
        assert_eq!((s.len(), s.radix_tree_keys()), (len, nodes), "{t:?}");
        let first = s.iter().next().map_or(StreamId::MIN, |(k, _)| *k);
        assert_eq!(s.first_id(), first, "{t:?}");
    }
    // Flagged entries still fill their node: the next add opens a
    // new one only when the tail has 3 entries, deleted or not.
    let mut s = filled();
    assert_eq!(s.delete(&[id(10, 0), id(2, 0), id(99, 0)]), 2);
    assert_eq!(s.radix_tree_keys(), 3);
    assert_eq!(s.max_deleted_entry_id(), id(10, 0));
    assert_eq!(s.last_id(), id(10, 0));
    s.add(XaddId::Auto, fields(&[("f", "v")]), 0, &cfg).unwrap();
    assert_eq!(s.radix_tree_keys(), 4);
}

#[test]
fn lag_follows_redis_7_0() {
    let cfg = StreamConfig::default();
    let mut s = Stream::new();
    let g = |s: &Stream| s.group(b"g").cloned().unwrap();
    assert!(s.create_group(b"g", StreamId::MIN, ENTRIES_READ_INVALID));
    assert_eq!(s.lag(&g(&s)), Some(0));
    for i in 1..=5 {
        s.add(XaddId::Explicit(id(i, 0)), fields(&[("f", "v")]), 0, &cfg)
            .unwrap();
    }
    // Before the first entry, no tombstone: entries_added - length.
    assert_eq!(s.lag(&g(&s)), Some(5));
    s.read_group(b"g", b"c", ReadFrom::New, 2, false, 7);
    assert_eq!((g(&s).entries_read, s.lag(&g(&s))), (2, Some(3)));
    // A tombstone ahead of the group: the lag is unknown...
    s.delete(&[id(4, 0)]);
    assert_eq!(s.lag(&g(&s)), None);
    // ...and reading past it re-estimates the counter.
    s.read_group(b"g", b"c", ReadFrom::New, 0, false, 8);
    assert_eq!(
        (g(&s).last_id, g(&s).entries_read, s.lag(&g(&s))),
        (id(5, 0), 5, Some(0))
    );
    // SETID without ENTRIESREAD: known only at the last ID.
    s.set_group_id(b"g", id(2, 0), ENTRIES_READ_INVALID);
    assert_eq!(s.lag(&g(&s)), None);
    s.set_group_id(b"g", id(5, 0), ENTRIES_READ_INVALID);
    assert_eq!(s.lag(&g(&s)), Some(0));
}

#[test]
fn groups_deliver_claim_and_ack() {
    let cfg = StreamConfig::default();
    let mut s = Stream::new();
    for i in 1..=4 {
        s.add(XaddId::Explicit(id(i, 0)), fields(&[("f", "v")]), 0, &cfg)
            .unwrap();
    }
    s.create_group(b"g", StreamId::MIN, ENTRIES_READ_INVALID);
    let r = s
        .read_group(b"g", b"a", ReadFrom::New, 3, false, 100)
        .unwrap();
    assert!(r.consumer_created);
    assert_eq!(r.entries.unwrap().len(), 3);
    // History: the consumer's own pending entries, counted again.
    let r = s
        .read_group(b"g", b"a", ReadFrom::After(id(1, 0)), 0, false, 150)
        .unwrap();
    let ids: Vec<StreamId> = r.entries.unwrap().iter().map(|(i, _)| *i).collect();
    assert_eq!(ids, [id(2, 0), id(3, 0)]);
    assert_eq!(s.group(b"g").unwrap().pel[&id(2, 0)].delivery_count, 2);
    // Nothing new for another consumer: not served, not created.
    let r = s.read_group(b"g", b"b", ReadFrom::New, 0, false, 160);
    assert_eq!(r.map(|r| r.entries.map(|e| e.len())), Some(Some(1)));
    let r = s
        .read_group(b"g", b"c", ReadFrom::New, 0, false, 170)
        .unwrap();
    assert_eq!((r.entries, r.consumer_created), (None, false));
    // Claims: idle enough, then the deleted one leaves the PEL.
    s.delete(&[id(1, 0)]);
    let a = Xautoclaim {
        group: b"g".to_vec(),
        consumer: b"b".to_vec(),
        min_idle: 60,
        start: StreamId::MIN,
        count: 2,
        just_id: true,
    };
    // 2-0 and 3-0 were delivered again at 150, 4-0 at 160.
    let r = s.autoclaim(&a, 220).unwrap();
    assert_eq!(r.deleted, [id(1, 0)]);
    assert_eq!(r.claimed, Claimed::Ids(vec![id(2, 0)]));
    assert_eq!(r.next, id(3, 0));
    let o = ClaimOptions {
        force: true,
        retry_count: Some(5),
        delivery: Some(ClaimDelivery::Time(50)),
        ..ClaimOptions::default()
    };
    let r = s.claim(b"g", b"d", &[id(4, 0), id(9, 0)], &o, 300).unwrap();
    assert_eq!(r.claimed.len(), 1);
    let n = &s.group(b"g").unwrap().pel[&id(4, 0)];
    assert_eq!(
        (n.consumer.as_slice(), n.delivery_time, n.delivery_count),
        (&b"d"[..], 50, 5)
    );
    assert_eq!(s.ack(b"g", &[id(2, 0), id(2, 0), id(4, 0)]), Some(2));
    let sum = s.pending_summary(b"g").unwrap();
    assert_eq!((sum.count, sum.bounds), (1, Some((id(3, 0), id(3, 0)))));
    assert_eq!(sum.consumers, [(b"a".to_vec(), 1)]);
    assert_eq!(s.delete_consumer(b"g", b"b"), Some(0));
    assert_eq!(s.delete_consumer(b"g", b"a"), Some(1));
    assert_eq!(s.pending_summary(b"g").unwrap().count, 0);
}

#[test]
fn parse_errors_are_redis_texts() {
    // (command, error text); every row checked against redis-server
    // 7.0.15 (the integration test replays them).
    let table: &[(&str, &str)] = &[
        ("XADD k", "ERR wrong number of arguments for 'xadd' command"),
        (
            "XADD k MAXLEN 1 1-1 f",
            "ERR wrong number of arguments for 'xadd' command",
        ),
        (
            "XADD k 0-0 f v",
            "ERR The ID specified in XADD must be greater than 0-0",
        ),
        ("XADD k MAXLEN 1 MINID 1 * f v", msg::MAXLEN_AND_MINID),
        ("XADD k MAXLEN -1 * f v", msg::MAXLEN_NEGATIVE),
        ("XADD k MAXLEN 1 LIMIT 1 * f v", msg::LIMIT_WITHOUT_APPROX),
        ("XADD k LIMIT 1 * f v", msg::LIMIT_WITHOUT_STRATEGY),
        ("XADD k MAXLEN ~ 1 LIMIT -1 * f v", msg::LIMIT_NEGATIVE),
        (
            "XADD k MAXLEN x * f v",
            "ERR value is not an integer or out of range",
        ),
        (
            "XADD k bad f v",
            "ERR Invalid stream ID specified as stream command argument",
        ),
        ("XTRIM k LIMIT 0 x", "ERR syntax error"),
        ("XTRIM k NOMKSTREAM MAXLEN 1", "ERR syntax error"),
        ("XTRIM k LIMIT 0 LIMIT 0", msg::XTRIM_WITHOUT_STRATEGY),
    ];
    for (cmd, want) in table {
        let w = words(cmd);
        let got = if cmd.starts_with("XADD") {
            Xadd::parse(&w).err()
        } else {
            Xtrim::parse(&w).err()
        };
        assert_eq!(got.map(|e| e.to_string()).as_deref(), Some(*want), "{cmd}");
    }
    let table: &[(&str, &str)] = &[
        ("XREAD STREAMS k j 0", msg::UNBALANCED),
        ("XREAD COUNT 1 k 0", "ERR syntax error"),
        ("XREAD GROUP g c STREAMS k >", msg::GROUP_IN_XREAD),
        ("XREAD BLOCK -1 STREAMS k 0", msg::TIMEOUT_NEGATIVE),
        ("XREAD BLOCK x STREAMS k 0", msg::TIMEOUT_NOT_INTEGER),
        ("XREADGROUP COUNT 1 NOACK STREAMS k >", msg::MISSING_GROUP),
    ];
    for (cmd, want) in table {
        let got = Xread::parse(&words(cmd), cmd.starts_with("XREADGROUP")).err();
        assert_eq!(got.map(|e| e.to_string()).as_deref(), Some(*want), "{cmd}");
    }
    let table: &[(&str, &str)] = &[
        (
            "XGROUP",
            "ERR wrong number of arguments for 'xgroup' command",
        ),
        (
            "XGROUP foo k",
            "ERR unknown subcommand 'foo'. Try XGROUP HELP.",
        ),
        (
            "XGROUP create k",
            "ERR wrong number of arguments for 'xgroup|create' command",
        ),
        (
            "XGROUP SETID k g 0 MKSTREAM",
            "ERR unknown subcommand or wrong number of arguments for 'SETID'. Try XGROUP HELP.",
        ),
        (
            "XGROUP CREATE k g 0 ENTRIESREAD -2",
            msg::ENTRIESREAD_NEGATIVE,
        ),
    ];
    for (cmd, want) in table {
        let got = Xgroup::parse(&words(cmd)).err();
        assert_eq!(got.map(|e| e.to_string()).as_deref(), Some(*want), "{cmd}");
    }
    let table: &[(&str, &str)] = &[
        ("XPENDING k g - +", "ERR syntax error"),
        ("XPENDING k g IDLE 1 - +", "ERR syntax error"),
        ("XAUTOCLAIM k g c 0 - COUNT 0", msg::XAUTOCLAIM_COUNT),
        ("XAUTOCLAIM k g c x -", msg::XAUTOCLAIM_MIN_IDLE),
        (
            "XSETID k 5-0 MAXDELETEDID 6-0",
            msg::XSETID_BELOW_MAXDELETED,
        ),
        ("XSETID k 5-0 ENTRIESADDED -1", msg::ENTRIES_ADDED_NEGATIVE),
        ("XINFO", "ERR wrong number of arguments for 'xinfo' command"),
        (
            "XINFO STREAM",
            "ERR wrong number of arguments for 'xinfo|stream' command",
        ),
    ];
    for (cmd, want) in table {
        let w = words(cmd);
        let got = match cmd.split(' ').next() {
            Some("XPENDING") => Xpending::parse(&w).err(),
            Some("XAUTOCLAIM") => Xautoclaim::parse(&w).err(),
            Some("XSETID") => Xsetid::parse(&w).err(),
            _ => Xinfo::parse(&w).err(),
        };
        assert_eq!(got.map(|e| e.to_string()).as_deref(), Some(*want), "{cmd}");
    }
}

#[test]
fn commands_check_keys_in_redis_order() {
    let cfg = StreamConfig::default();
    // XACK and XDEL read their IDs only after the key.
    let mut none: Option<Stream> = None;
    let a = Xack::parse(&words("XACK k g bad")).unwrap();
    assert_eq!(xack(KeyMut::Slot(&mut none), &a).map(|o| o.reply), Ok(0));
    assert_eq!(xack(KeyMut::WrongType, &a), Err(StreamError::WrongType));
    let d = Xdel::parse(&words("XDEL k bad")).unwrap();
    assert_eq!(xdel(KeyMut::Slot(&mut none), &d).map(|o| o.reply), Ok(0));
    // XADD creates the key, NOMKSTREAM does not.
    let a = Xadd::parse(&words("XADD k NOMKSTREAM 1-1 f v")).unwrap();
    assert_eq!(
        xadd(KeyMut::Slot(&mut none), a, 0, &cfg).map(|o| o.reply),
        Ok(None)
    );
    assert!(none.is_none());
    let a = Xadd::parse(&words("XADD k MAXLEN 0 1-1 f v")).unwrap();
    let o = xadd(KeyMut::Slot(&mut none), a, 0, &cfg).unwrap();
    assert_eq!((o.reply, o.events), (Some(id(1, 1)), vec!["xadd", "xtrim"]));
    assert_eq!(none.as_ref().map(Stream::len), Some(0));
    // XGROUP CREATE MKSTREAM with a bad ID creates nothing.
    let mut slot: Option<Stream> = None;
    let g = Xgroup::parse(&words("XGROUP CREATE k g x MKSTREAM")).unwrap();
    assert_eq!(
        xgroup(KeyMut::Slot(&mut slot), &g, 0),
        Err(StreamError::InvalidId)
    );
    assert!(slot.is_none());
    let g = Xgroup::parse(&words("XGROUP CREATE k g $ MKSTREAM")).unwrap();
    let o = xgroup(KeyMut::Slot(&mut slot), &g, 0).unwrap();
    assert_eq!(
        (o.reply, o.events),
        (XgroupReply::Ok, vec!["xgroup-create"])
    );
    // XINFO STREAM checks its options after the key.
    let i = Xinfo::parse(&words("XINFO STREAM k FUL")).unwrap();
    assert_eq!(xinfo(Key::Missing, &i, 0), Err(StreamError::NoSuchKey));
    let s = slot.unwrap_or_default();
    assert_eq!(
        xinfo(Key::Stream(&s), &i, 0).map_err(|e| e.to_string()),
        Err(
            "ERR unknown subcommand or wrong number of arguments for 'STREAM'. Try XINFO HELP."
                .into()
        )
    );
}

#[test]
fn replies_have_redis_shapes() {
    let cfg = StreamConfig::default();
    let mut s = Stream::new();
    s.add(XaddId::Explicit(id(1, 1)), fields(&[("a", "1")]), 0, &cfg)
        .unwrap();
    s.create_group(b"g", StreamId::MIN, ENTRIES_READ_INVALID);
    let b = |x: &str| Reply::bulk(x.as_bytes().to_vec());
    let want = Reply::Array(Some(vec![Reply::Map(vec![
        (b("name"), b("g")),
        (b("consumers"), Reply::Integer(0)),
        (b("pending"), Reply::Integer(0)),
        (b("last-delivered-id"), b("0-0")),
        (b("entries-read"), Reply::nil()),
        (b("lag"), Reply::Integer(1)),
    ])]));
    assert_eq!(XinfoReply::Groups(s.info_groups()).to_reply(), want);
    assert_eq!(
        entries_reply(&s.range(StreamId::MIN, StreamId::MAX, 0, false)),
        Reply::Array(Some(vec![Reply::Array(Some(vec![
            b("1-1"),
            Reply::Array(Some(vec![b("a"), b("1")])),
        ]))]))
    );
    let empty = PendingSummary {
        count: 0,
        bounds: None,
        consumers: vec![],
    };
    assert_eq!(
        empty.to_reply(),
        Reply::Array(Some(vec![
            Reply::Integer(0),
            Reply::nil(),
            Reply::nil(),
            Reply::Array(None)
        ]))
    );
}

#[test]
fn nodes_restore_to_an_equal_stream() {
    let cfg = StreamConfig {
        node_max_entries: 4,
        node_max_bytes: 4096,
    };
    let mut s = Stream::new();
    for i in 1..=30u64 {
        let f = if i % 3 == 0 {
            fields(&[("a", "1"), ("b", "x")])
        } else {
            fields(&[("f", "v")])
        };
        s.add(XaddId::Explicit(id(i * 1000, i)), f, 0, &cfg)
            .unwrap();
    }
    s.delete(&[id(2000, 2), id(7000, 7), id(8000, 8), id(30000, 30)]);
    s.trim(&Trim::new(
        TrimStrategy::MinId(id(10000, 0)),
        false,
        None,
        &cfg,
    ));
    s.create_group(b"g", StreamId::MIN, ENTRIES_READ_INVALID);
    s.read_group(b"g", b"c", ReadFrom::New, 3, false, 42);
    let mut r = Stream::new();
    for n in s.nodes() {
        let entries = n
            .entries
            .iter()
            .map(|(i, f, d)| (*i, f.to_vec(), *d))
            .collect();
        r.restore_node(n.master_fields.to_vec(), entries).unwrap();
    }
    r.restore_meta(s.meta());
    for (name, g) in s.groups().iter() {
        assert!(r.restore_group(name.clone(), g.clone()));
    }
    assert_eq!(r, s);
    let taken = r.nodes()[0].master_id;
    assert_eq!(
        r.restore_node(vec![], vec![(taken, vec![], false)]),
        Err(StreamError::Msg(ERR_BAD_PAYLOAD))
    );
    assert_eq!(
        r.restore_node(vec![], vec![]),
        Err(StreamError::Msg(ERR_BAD_PAYLOAD))
    );
}

#[test]
fn clones_are_independent_snapshots() {
    let cfg = StreamConfig::default();
    let mut s = Stream::new();
    s.add(XaddId::Explicit(id(1, 0)), fields(&[("f", "v")]), 0, &cfg)
        .unwrap();
    s.create_group(b"g", StreamId::MIN, ENTRIES_READ_INVALID);
    let snap = s.clone();
    s.read_group(b"g", b"c", ReadFrom::New, 0, false, 5);
    s.add(XaddId::Explicit(id(2, 0)), fields(&[("f", "v")]), 0, &cfg)
        .unwrap();
    assert_eq!((snap.len(), s.len()), (1, 2));
    assert!(snap.group(b"g").unwrap().pel.is_empty());
    assert_ne!(snap, s);
    // The same ops on two copies give equal streams (determinism).
    let (mut a, mut b) = (snap.clone(), snap.clone());
    for x in [&mut a, &mut b] {
        x.read_group(b"g", b"c", ReadFrom::New, 0, false, 5);
        x.add(XaddId::Auto, fields(&[("f", "v")]), 9, &cfg).unwrap();
    }
    assert_eq!(a, b);
}
