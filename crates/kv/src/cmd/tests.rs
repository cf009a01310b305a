//! Table-driven tests of the data-type commands (Redis 7.0's replies, as
//! the differential test checks them against a real redis-server), and of
//! their replication: the same ops give the same state everywhere.

use crate::dispatch::{classify, Action};
use crate::exec::execute_local;
use crate::exec::Apply;
use crate::op::{WriteCmd, WriteOp};
use crate::resp::{split_inline, Reply};
use crate::store::Store;
use crate::value::ERR_WRONGTYPE;

const T0: u64 = 1_700_000_000_000;

fn ok() -> Reply {
    Reply::ok()
}
fn nil() -> Reply {
    Reply::nil()
}
fn i(v: i64) -> Reply {
    Reply::Integer(v)
}
fn b(s: &str) -> Reply {
    Reply::bulk(s)
}
fn e(s: &str) -> Reply {
    Reply::err(s)
}
fn arr(v: &[&str]) -> Reply {
    Reply::Array(Some(v.iter().map(|s| Reply::bulk(*s)).collect()))
}
fn st(s: &str) -> Reply {
    Reply::Simple(s.into())
}

fn run(name: &str, table: &[(&str, Reply)]) {
    let mut s = Store::new();
    for (n, (line, want)) in table.iter().enumerate() {
        let args = split_inline(line.as_bytes()).expect("test line parses");
        let got = execute_local(&mut s, &args, T0 + n as u64);
        assert_eq!(&got, want, "{name}: step {n}: {line}");
    }
}

#[test]
fn hashes() {
    run(
        "hashes",
        &[
            ("HSET h a 1 b 2", i(2)),
            ("HSET h a 3 c 4", i(1)),
            (
                "HSET h a",
                e("ERR wrong number of arguments for 'hset' command"),
            ),
            (
                "HSET h a 1 b",
                e("ERR wrong number of arguments for 'hset' command"),
            ),
            ("HMSET h d 5", ok()),
            ("HGET h a", b("3")),
            ("HGET h zz", nil()),
            (
                "HMGET h a zz b",
                Reply::Array(Some(vec![b("3"), nil(), b("2")])),
            ),
            ("HGETALL h", arr(&["a", "3", "b", "2", "c", "4", "d", "5"])),
            ("HLEN h", i(4)),
            ("HKEYS h", arr(&["a", "b", "c", "d"])),
            ("HVALS h", arr(&["3", "2", "4", "5"])),
            ("HEXISTS h a", i(1)),
            ("HSTRLEN h a", i(1)),
            ("HSETNX h a 9", i(0)),
            ("HSETNX h e 9", i(1)),
            ("HINCRBY h a 10", i(13)),
            (
                "HINCRBY h a x",
                e("ERR value is not an integer or out of range"),
            ),
            ("HSET h s abc", i(1)),
            ("HINCRBY h s 1", e("ERR hash value is not an integer")),
            ("HINCRBYFLOAT h f 1.5", b("1.5")),
            ("HINCRBYFLOAT h f x", e("ERR value is not a valid float")),
            ("HINCRBYFLOAT h s 1", e("ERR hash value is not a float")),
            ("HINCRBYFLOAT h f nan", e("ERR value is not a valid float")),
            ("HINCRBYFLOAT h s -inf", e("ERR value is NaN or Infinity")),
            ("HINCRBYFLOAT h f inf", e("ERR value is NaN or Infinity")),
            ("HSET h big 9223372036854775807", i(1)),
            (
                "HINCRBY h big 1",
                e("ERR increment or decrement would overflow"),
            ),
            ("HDEL h a b zz", i(2)),
            (
                "HSCAN h 0 MATCH c COUNT 100",
                Reply::Array(Some(vec![b("0"), arr(&["c", "4"])])),
            ),
            ("HSCAN h x", e("ERR invalid cursor")),
            ("HSCAN h 0 COUNT 0", e("ERR syntax error")),
            ("HDEL h c d e s f big", i(6)),
            ("EXISTS h", i(0)),
            ("SET str v", ok()),
            ("HGET str a", e(ERR_WRONGTYPE)),
            ("HSET str a 1", e(ERR_WRONGTYPE)),
            ("GET str", b("v")),
            (
                "HINCRBYFLOAT fresh f inf",
                e("ERR value is NaN or Infinity"),
            ),
            ("EXISTS fresh", i(0)),
        ],
    );
}

#[test]
fn lists() {
    run(
        "lists",
        &[
            ("LPUSHX l a", i(0)),
            ("RPUSH l a b c", i(3)),
            ("LPUSH l z", i(4)),
            ("LRANGE l 0 -1", arr(&["z", "a", "b", "c"])),
            ("LRANGE l -2 100", arr(&["b", "c"])),
            ("LRANGE l 3 1", arr(&[])),
            ("LRANGE l x 1", e("ERR value is not an integer or out of range")),
            ("LLEN l", i(4)),
            ("LINDEX l -1", b("c")),
            ("LINDEX l 9", nil()),
            ("LINDEX nope x", nil()),
            ("LSET l 1 A", ok()),
            ("LSET l 9 A", e("ERR index out of range")),
            ("LSET nope 0 A", e("ERR no such key")),
            ("LINSERT l BEFORE A y", i(5)),
            ("LINSERT l AFTER nope y", i(-1)),
            ("LINSERT l MIDDLE A y", e("ERR syntax error")),
            ("RPUSH l y y", i(7)),
            ("LREM l -2 y", i(2)),
            ("LRANGE l 0 -1", arr(&["z", "y", "A", "b", "c"])),
            ("LPOS l b", i(3)),
            ("LPOS l q", nil()),
            ("LPOS l b COUNT 0", Reply::Array(Some(vec![i(3)]))),
            ("LPOS l b RANK 0", e("ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list")),
            ("LPOS l b COUNT -1", e("ERR COUNT can't be negative")),
            ("LMOVE l m RIGHT LEFT", b("c")),
            ("LMOVE l m UP LEFT", e("ERR syntax error")),
            ("RPOPLPUSH l m", b("b")),
            ("LRANGE m 0 -1", arr(&["b", "c"])),
            ("LTRIM l 1 1", ok()),
            ("LRANGE l 0 -1", arr(&["y"])),
            ("LPOP l 5", arr(&["y"])),
            ("EXISTS l", i(0)),
            ("LPOP l", nil()),
            ("LPOP l 2", Reply::Array(None)),
            ("LPOP m -1", e("ERR value is out of range, must be positive")),
            ("RPOP m", b("c")),
            ("LPOP m 1 2", e("ERR wrong number of arguments for 'lpop' command")),
            ("HSET h f v", i(1)),
            ("LPUSH h x", e(ERR_WRONGTYPE)),
            ("LINDEX h x", e(ERR_WRONGTYPE)),
        ],
    );
}

#[test]
fn sets() {
    run(
        "sets",
        &[
            ("SADD s a b c", i(3)),
            ("SADD s a d", i(1)),
            ("SREM s d x", i(1)),
            ("SMEMBERS s", arr(&["a", "b", "c"])),
            ("SISMEMBER s a", i(1)),
            ("SMISMEMBER s a x", Reply::Array(Some(vec![i(1), i(0)]))),
            ("SCARD s", i(3)),
            ("SADD t b c d", i(3)),
            ("SINTER s t", arr(&["b", "c"])),
            ("SUNION s t", arr(&["a", "b", "c", "d"])),
            ("SDIFF s t", arr(&["a"])),
            ("SINTER s nope", arr(&[])),
            ("SINTERSTORE d s t", i(2)),
            ("SMEMBERS d", arr(&["b", "c"])),
            ("SDIFFSTORE d s s", i(0)),
            ("EXISTS d", i(0)),
            ("SMOVE s t a", i(1)),
            ("SMOVE s t a", i(0)),
            ("SPOP s 0", arr(&[])),
            (
                "SPOP s -1",
                e("ERR value is out of range, must be positive"),
            ),
            ("SPOP s 1 2", e("ERR syntax error")),
            ("SREM s c", i(1)),
            ("SPOP s 10", arr(&["b"])),
            ("EXISTS s", i(0)),
            ("SPOP s", nil()),
            ("SRANDMEMBER s", nil()),
            ("SRANDMEMBER t 0", arr(&[])),
            ("SRANDMEMBER nope 100", arr(&[])),
            (
                "SSCAN t 0 MATCH [ab]",
                Reply::Array(Some(vec![b("0"), arr(&["a", "b"])])),
            ),
            ("SET str v", ok()),
            ("SADD str a", e(ERR_WRONGTYPE)),
            ("SINTER t str", e(ERR_WRONGTYPE)),
            ("SINTER nope str", e(ERR_WRONGTYPE)),
        ],
    );
}

#[test]
fn sorted_sets() {
    let z = |v: &[&str]| arr(v);
    run(
        "sorted sets",
        &[
            ("ZADD z 1 a 2 b 3 c", i(3)),
            ("ZADD z NX 9 a 4 d", i(1)),
            ("ZADD z XX CH 5 a 9 e", i(1)),
            ("ZADD z GT 1 a", i(0)),
            ("ZADD z LT CH 0.5 a", i(1)),
            ("ZADD z NX XX 1 a", e("ERR XX and NX options at the same time are not compatible")),
            ("ZADD z GT LT 1 a", e("ERR GT, LT, and/or NX options at the same time are not compatible")),
            ("ZADD z INCR 1 a 2 b", e("ERR INCR option supports a single increment-element pair")),
            ("ZADD z x a", e("ERR value is not a valid float")),
            ("ZADD z NX 1", e("ERR syntax error")),
            ("ZADD z INCR 2 a", b("2.5")),
            ("ZADD z XX INCR 2 nope", nil()),
            ("ZINCRBY z 0.1 b", b("2.1000000000000001")),
            ("ZADD z inf i", i(1)),
            ("ZINCRBY z -inf i", e("ERR resulting score is not a number (NaN)")),
            ("ZREM z i b", i(2)),
            ("ZSCORE z a", b("2.5")),
            ("ZSCORE z nope", nil()),
            ("ZCARD z", i(3)),
            ("ZRANGE z 0 -1 WITHSCORES", z(&["a", "2.5", "c", "3", "d", "4"])),
            ("ZRANGE z 0 0 REV", z(&["d"])),
            ("ZRANGE z (2.5 +inf BYSCORE", z(&["c", "d"])),
            ("ZRANGE z +inf -inf BYSCORE REV LIMIT 1 1", z(&["c"])),
            ("ZRANGE z 0 1 LIMIT 0 1", e("ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX")),
            ("ZRANGE z - + BYLEX WITHSCORES", e("ERR syntax error, WITHSCORES not supported in combination with BYLEX")),
            ("ZRANGE z x 1 BYSCORE", e("ERR min or max is not a float")),
            ("ZRANGE z a b BYLEX", e("ERR min or max not valid string range item")),
            ("ZRANGEBYSCORE z 3 4", z(&["c", "d"])),
            ("ZREVRANGE z 0 0", z(&["d"])),
            ("ZCOUNT z (2.5 4", i(2)),
            ("ZRANK z c", i(1)),
            ("ZREVRANK z c", i(1)),
            ("ZRANK z nope", nil()),
            ("ZRANGESTORE dst z 0 0", i(1)),
            ("ZRANGE dst 0 -1", z(&["a"])),
            ("ZPOPMIN z", z(&["a", "2.5"])),
            ("ZPOPMAX z 5", z(&["d", "4", "c", "3"])),
            ("EXISTS z", i(0)),
            ("ZPOPMIN z", z(&[])),
            ("ZPOPMIN z -1", e("ERR value is out of range, must be positive")),
            ("ZADD w 0 a 0 b 0 c", i(3)),
            ("ZRANGEBYLEX w [b +", z(&["b", "c"])),
            ("ZRANGE w (c - BYLEX REV", z(&["b", "a"])),
            ("ZMSCORE w a x", Reply::Array(Some(vec![b("0"), nil()]))),
            // Mixed scores: Redis walks only if the first member at or
            // above min is also inside max (here `e` is not), whatever LIMIT.
            ("ZADD m 1 e 2 a 3 b 4 d", i(4)),
            ("ZRANGE m [a (e BYLEX LIMIT 1 -1", z(&[])),
            ("ZRANGE m [a + BYLEX LIMIT 1 -1", z(&["a", "b", "d"])),
            ("SET str v", ok()),
            ("ZADD str 1 a", e(ERR_WRONGTYPE)),
            ("ZRANGE str 0 1", e(ERR_WRONGTYPE)),
        ],
    );
}

#[test]
fn keyspace() {
    run(
        "keyspace",
        &[
            ("SET s v", ok()),
            ("HSET h f v", i(1)),
            ("RPUSH l a", i(1)),
            ("SADD t a", i(1)),
            ("ZADD z 1 a", i(1)),
            ("TYPE s", st("string")),
            ("TYPE h", st("hash")),
            ("TYPE l", st("list")),
            ("TYPE t", st("set")),
            ("TYPE z", st("zset")),
            ("TYPE nope", st("none")),
            ("KEYS [h]*", arr(&["h"])),
            (
                "SCAN 0 COUNT 100 TYPE zset",
                Reply::Array(Some(vec![b("0"), arr(&["z"])])),
            ),
            ("SCAN x", e("ERR invalid cursor")),
            ("RENAME nope x", e("ERR no such key")),
            ("PEXPIRE h 100000", i(1)),
            ("RENAME h h2", ok()),
            ("TYPE h2", st("hash")),
            ("PTTL h2", i(100_000 - 3)),
            ("RENAMENX h2 l", i(0)),
            ("COPY l l2", i(1)),
            ("COPY l l2", i(0)),
            ("COPY l l2 REPLACE", i(1)),
            (
                "COPY l l",
                e("ERR source and destination objects are the same"),
            ),
            ("COPY l l3 DB 1", e("ERR DB index is out of range")),
            ("LRANGE l2 0 -1", arr(&["a"])),
            ("UNLINK l l2 nope", i(2)),
            ("GET h2", e(ERR_WRONGTYPE)),
            ("STRLEN h2", e(ERR_WRONGTYPE)),
            ("INCR h2", e(ERR_WRONGTYPE)),
            ("APPEND h2 x", e(ERR_WRONGTYPE)),
            ("SET h2 x GET", e(ERR_WRONGTYPE)),
            ("MGET h2 s", Reply::Array(Some(vec![nil(), b("v")]))),
            ("SET h2 x", ok()),
            ("TYPE h2", st("string")),
            ("DBSIZE", i(4)),
            ("FLUSHALL", ok()),
            ("RANDOMKEY", nil()),
        ],
    );
}

/// A write's words are what is replicated: the op decodes to the same
/// command, and applying the same ops in order to two stores gives the
/// same state, `SPOP`'s picks included (drawn from the op's seed).
#[test]
fn data_writes_replicate_by_seeded_ops() {
    let (mut a, mut b) = (Store::new(), Store::new());
    let mut ops = Vec::new();
    for (n, line) in [
        "SADD s a b c d e f g h",
        "SPOP s 3",
        "SPOP s",
        "ZADD z 1 a 2 b",
        "ZPOPMIN z",
        "RPUSH l x y",
        "LMOVE l l RIGHT LEFT",
    ]
    .iter()
    .enumerate()
    {
        let args = split_inline(line.as_bytes()).expect("parses");
        let Action::Write(op) = classify(args.clone(), T0 + n as u64) else {
            panic!("{line} is a write");
        };
        assert!(matches!(op.cmd, WriteCmd::Data { .. }), "{line}");
        let wire = op.encode();
        assert_eq!(WriteOp::decode(&wire).as_ref(), Ok(&op));
        ops.push(op);
    }
    for op in &ops {
        assert_eq!(a.apply(op), b.apply(op));
    }
    assert_eq!(a.snapshot(), b.snapshot());
    // The seed decides: the same pop with another seed picks otherwise
    // for some seed (8 members, 3 picked).
    let pops: std::collections::BTreeSet<Vec<u8>> = (0..20u64)
        .map(|seed| {
            let mut s = Store::new();
            s.apply(&ops[0]);
            let op = WriteOp::new(
                T0,
                WriteCmd::Data {
                    args: ["SPOP", "s", "3"].map(|w| w.as_bytes().to_vec()).to_vec(),
                    seed,
                },
            );
            s.apply(&op).to_bytes()
        })
        .collect();
    assert!(pops.len() > 1);
}

/// Bad words never change the store: such an op (which no leader makes:
/// classify answers them) applies as its error on every member.
#[test]
fn malformed_data_ops_change_nothing() {
    for (args, want) in [
        (
            vec!["HSET", "h", "a"],
            "ERR wrong number of arguments for 'hset' command",
        ),
        (
            vec!["NOPE", "x"],
            "ERR unknown command 'NOPE', with args beginning with: 'x' ",
        ),
        (
            vec!["ZADD", "z", "x", "m"],
            "ERR value is not a valid float",
        ),
    ] {
        let op = WriteOp::new(
            T0,
            WriteCmd::Data {
                args: args.iter().map(|w| w.as_bytes().to_vec()).collect(),
                seed: 0,
            },
        );
        let op = WriteOp::decode(&op.encode()).expect("well-formed structure");
        let mut st = Store::new();
        execute_local(&mut st, &split_inline(b"SET k v").unwrap(), T0);
        let before = st.snapshot();
        assert_eq!(st.apply(&op), Reply::err(want), "{args:?}");
        // Only the applied count moved.
        let mut again = Store::restore(&before).unwrap();
        again.apply(&WriteOp::new(
            T0,
            WriteCmd::Del {
                keys: vec![b"absent".to_vec()],
            },
        ));
        assert_eq!(st.snapshot(), again.snapshot(), "{args:?}");
    }
    // No words at all is refused by the op's structure.
    let op = WriteOp::new(
        T0,
        WriteCmd::Data {
            args: vec![],
            seed: 0,
        },
    );
    assert!(WriteOp::decode(&op.encode()).is_err());
}

/// `INFO section` gives that section alone; no section, every one.
#[test]
fn info_sections() {
    let mut s = Store::new();
    let text = |s: &mut Store, line: &str| match execute_local(
        s,
        &split_inline(line.as_bytes()).expect("parses"),
        T0,
    ) {
        Reply::Verbatim(_, t) => t,
        other => panic!("{line}: {other:?}"),
    };
    execute_local(&mut s, &split_inline(b"SET k v").expect("parses"), T0);
    let all = text(&mut s, "INFO");
    for h in ["# Server", "# Replication", "# Stats", "# Keyspace"] {
        assert!(all.contains(h), "{all}");
    }
    let every = text(&mut s, "INFO everything");
    assert!(every.contains("# Commandstats") && !all.contains("# Commandstats"));
    let ks = text(&mut s, "INFO KEYSPACE");
    assert_eq!(ks, "# Keyspace\r\ndb0:keys=1,expires=0,avg_ttl=0\r\n");
    let two = text(&mut s, "INFO server keyspace");
    assert!(
        two.starts_with("# Server\r\n") && two.ends_with(&ks),
        "{two}"
    );
    assert!(!two.contains("# Stats"));
    assert_eq!(text(&mut s, "INFO nosuch"), "");
}

/// `Store::unchanged_reply` against `Store::apply`: over seeded random
/// stores and writes (every type, TTLs that fall due), whenever it gives a
/// reply, applying the write gives the same reply and changes nothing — no
/// value, expiry, version or tombstone (the snapshot past its clock and
/// applied count) and no keyspace event.
#[test]
fn unchanged_reply_matches_apply() {
    use crate::notify::NotifyFlags;
    use crate::value::SplitMix;
    const WRITES: &[&str] = &[
        "SADD {k} {m}",
        "SADD {k} {m} {n}",
        "SREM {k} {m}",
        "SPOP {k}",
        "SPOP {k} 2",
        "ZADD {k} {s} {m}",
        "ZADD {k} NX {s} {m}",
        "ZADD {k} XX {s} {m}",
        "ZADD {k} GT CH {s} {m}",
        "ZADD {k} LT {s} {m} {s} {n}",
        "ZADD {k} XX INCR {s} {m}",
        "ZREM {k} {m} {n}",
        "ZPOPMIN {k}",
        "ZPOPMAX {k} 2",
        "LPOP {k}",
        "RPOP {k} 2",
        "LREM {k} 0 {m}",
        "RPUSH {k} {m}",
        "HSET {k} {m} {s}",
        "HSETNX {k} {m} {s}",
        "HDEL {k} {m} {n}",
        "DEL {k}",
        "DEL {k} {m}",
        "SET {k} {s}",
        "PEXPIRE {k} {s}",
        "INCR {k}",
        "LMPOP 2 {k} {m} LEFT",
        "ZMPOP 2 {m} {k} MIN COUNT 2",
        "ZREMRANGEBYSCORE {k} {s} 3",
        "ZREMRANGEBYRANK {k} {s} 1",
        "ZREMRANGEBYLEX {k} [{m} +",
        "SORT {k} ALPHA",
        "SORT {k} BY nosort LIMIT 0 {s}",
        "SORT {k} STORE {m}",
    ];
    let mut rng = SplitMix::new(7);
    let (mut quiet, mut total) = (0, 0);
    for round in 0..40u64 {
        let mut s = Store::new();
        for step in 0..400u64 {
            let pick = |rng: &mut SplitMix, from: &[&str]| from[rng.below(from.len())].to_string();
            let line = pick(&mut rng, WRITES)
                .replace("{k}", &pick(&mut rng, &["a", "b", "c"]))
                .replace("{m}", &pick(&mut rng, &["x", "y", "z"]))
                .replace("{n}", &pick(&mut rng, &["x", "y", "w"]))
                .replace("{s}", &pick(&mut rng, &["1", "2", "3"]));
            let args = split_inline(line.as_bytes()).expect("test line parses");
            let now = T0 + round * 1_000_000 + step;
            let Action::Write(op) = classify(args.clone(), now) else {
                panic!("{line}: not a write");
            };
            let predicted = s.unchanged_reply(&op);
            let before = s.snapshot();
            s.set_notifications(NotifyFlags::ALL);
            let got = s.apply(&op);
            let events = s.drain_events().count();
            s.set_notifications(NotifyFlags::NONE);
            total += 1;
            if let Some(want) = predicted {
                quiet += 1;
                assert_eq!(got, want, "round {round} step {step}: {line}: reply");
                assert_eq!(events, 0, "round {round} step {step}: {line}: events");
                assert_eq!(
                    s.snapshot()[24..],
                    before[24..],
                    "round {round} step {step}: {line}: the store changed"
                );
            }
        }
    }
    // The check is not vacuous: a good share of the writes change nothing.
    assert!(
        quiet * 10 > total,
        "{quiet} of {total} writes were unchanged"
    );
}

/// Every command of these modules is found by its name in any case, and
/// nothing else is.
#[test]
fn lookup_finds_every_command_by_name() {
    let names = [
        super::hash::NAMES,
        super::list::NAMES,
        super::set::NAMES,
        super::zset::NAMES,
        super::keys::NAMES,
        super::string::NAMES,
        super::sort::NAMES,
    ];
    for spec in names
        .concat()
        .iter()
        .filter_map(|n| super::table::spec(n.as_bytes()))
    {
        let upper = spec.name.to_ascii_uppercase();
        assert!(super::lookup(upper.as_bytes()).is_some(), "{}", spec.name);
        assert!(
            super::lookup(spec.name.as_bytes()).is_some(),
            "{}",
            spec.name
        );
    }
    for other in ["set", "zaddd", "", "zrangebyscorezrangebyscorez"] {
        assert!(super::lookup(other.as_bytes()).is_none(), "{other}");
    }
}

// ---- LMPOP, SINTERCARD, the sorted-set additions, random picks and SORT
// (the replies are redis-server 7.0.15's).

/// `LMPOP`: the first list that exists, its errors in Redis' order.
#[test]
fn lmpop_pops_from_the_first_list() {
    run(
        "lmpop_pops_from_the_first_list",
        &[
            ("LMPOP 2 l1 l2 LEFT", Reply::Array(None)),
            ("RPUSH l2 a b c d e", i(5)),
            (
                "LMPOP 2 l1 l2 LEFT",
                Reply::Array(Some(vec![b("l2"), arr(&["a"])])),
            ),
            (
                "LMPOP 2 l1 l2 RIGHT COUNT 2",
                Reply::Array(Some(vec![b("l2"), arr(&["e", "d"])])),
            ),
            (
                "LMPOP 2 l1 l2 RIGHT COUNT 10",
                Reply::Array(Some(vec![b("l2"), arr(&["c", "b"])])),
            ),
            ("EXISTS l2", i(0)),
            ("LMPOP 0 l1 LEFT", e("ERR numkeys should be greater than 0")),
            (
                "LMPOP -1 l1 LEFT",
                e("ERR numkeys should be greater than 0"),
            ),
            ("LMPOP x l1 LEFT", e("ERR numkeys should be greater than 0")),
            ("LMPOP 2 l1 LEFT", e("ERR syntax error")),
            ("LMPOP 1 l1 MIDDLE", e("ERR syntax error")),
            (
                "LMPOP 1 l1 LEFT COUNT 0",
                e("ERR count should be greater than 0"),
            ),
            (
                "LMPOP 1 l1 LEFT COUNT -1",
                e("ERR count should be greater than 0"),
            ),
            (
                "LMPOP 1 l1 LEFT COUNT x",
                e("ERR count should be greater than 0"),
            ),
            ("LMPOP 1 l1 LEFT COUNT 1 COUNT 1", e("ERR syntax error")),
            ("LMPOP 1 l1 LEFT COUNT", e("ERR syntax error")),
            ("LMPOP 1 l1 LEFT FOO", e("ERR syntax error")),
            ("SET s v", ok()),
            ("RPUSH l1 x", i(1)),
            ("LMPOP 2 s l1 LEFT", e(ERR_WRONGTYPE)),
            (
                "LMPOP 2 l1 s LEFT",
                Reply::Array(Some(vec![b("l1"), arr(&["x"])])),
            ),
            ("LMPOP 2 nokey s RIGHT", e(ERR_WRONGTYPE)),
            ("LMPOP 9223372036854775807 l1 LEFT", e("ERR syntax error")),
        ],
    );
}

/// `SINTERCARD`: counts, limits and errors.
#[test]
fn sintercard_counts_up_to_its_limit() {
    run(
        "sintercard_counts_up_to_its_limit",
        &[
            ("SADD s1 a b c d", i(4)),
            ("SADD s2 b c d e", i(4)),
            ("SINTERCARD 2 s1 s2", i(3)),
            ("SINTERCARD 2 s1 s2 LIMIT 2", i(2)),
            ("SINTERCARD 2 s1 s2 LIMIT 0", i(3)),
            ("SINTERCARD 2 s1 s2 LIMIT 10", i(3)),
            ("SINTERCARD 3 s1 s2 nokey", i(0)),
            ("SINTERCARD 1 s1", i(4)),
            ("SINTERCARD 0 s1", e("ERR numkeys should be greater than 0")),
            ("SINTERCARD x s1", e("ERR numkeys should be greater than 0")),
            (
                "SINTERCARD 3 s1 s2",
                e("ERR Number of keys can't be greater than number of args"),
            ),
            (
                "SINTERCARD 2 s1 s2 LIMIT -1",
                e("ERR LIMIT can't be negative"),
            ),
            (
                "SINTERCARD 2 s1 s2 LIMIT x",
                e("ERR LIMIT can't be negative"),
            ),
            ("SINTERCARD 2 s1 s2 LIMIT", e("ERR syntax error")),
            ("SINTERCARD 2 s1 s2 FOO 1", e("ERR syntax error")),
            ("SINTERCARD 2 s1 s2 LIMIT 1 LIMIT 3", i(3)),
            ("SET str v", ok()),
            ("SINTERCARD 2 nokey str", e(ERR_WRONGTYPE)),
            ("SINTERCARD 2 s1 str", e(ERR_WRONGTYPE)),
        ],
    );
}

/// `ZUNION`/`ZINTER`/`ZDIFF` (and `STORE`, `ZINTERCARD`), `ZLEXCOUNT`, `ZREMRANGEBY*`, `ZMPOP`, `ZRANDMEMBER` over whole sets, and their errors.
#[test]
fn sorted_set_algebra_ranges_and_pops() {
    run(
        "sorted_set_algebra_ranges_and_pops",
        &[
            ("ZADD z1 1 a 2 b 3 c 4 d", i(4)),
            ("ZADD z2 10 b 20 c 30 e", i(3)),
            ("SADD s1 a e f", i(3)),
            ("ZUNION 2 z1 z2", arr(&["a", "d", "b", "c", "e"])),
            (
                "ZUNION 2 z1 z2 WITHSCORES",
                arr(&["a", "1", "d", "4", "b", "12", "c", "23", "e", "30"]),
            ),
            (
                "ZUNION 2 z1 z2 WEIGHTS 2 0.5 WITHSCORES",
                arr(&["a", "2", "d", "8", "b", "9", "e", "15", "c", "16"]),
            ),
            (
                "ZUNION 2 z1 z2 AGGREGATE MIN WITHSCORES",
                arr(&["a", "1", "b", "2", "c", "3", "d", "4", "e", "30"]),
            ),
            (
                "ZUNION 2 z1 z2 AGGREGATE max WITHSCORES",
                arr(&["a", "1", "d", "4", "b", "10", "c", "20", "e", "30"]),
            ),
            (
                "ZUNION 3 z1 z2 s1 WITHSCORES",
                arr(&[
                    "f", "1", "a", "2", "d", "4", "b", "12", "c", "23", "e", "31",
                ]),
            ),
            ("ZINTER 2 z1 z2 WITHSCORES", arr(&["b", "12", "c", "23"])),
            (
                "ZINTER 2 z1 z2 WEIGHTS 1 -1 AGGREGATE SUM WITHSCORES",
                arr(&["c", "-17", "b", "-8"]),
            ),
            ("ZINTER 3 z1 z2 nokey", arr(&[])),
            ("ZINTER 2 z1 s1 WITHSCORES", arr(&["a", "2"])),
            ("ZINTERCARD 2 z1 z2", i(2)),
            ("ZINTERCARD 2 z1 z2 LIMIT 1", i(1)),
            (
                "ZINTERCARD 2 z1 z2 LIMIT -1",
                e("ERR LIMIT can't be negative"),
            ),
            ("ZINTERCARD 2 z1 z2 WITHSCORES", e("ERR syntax error")),
            (
                "ZINTERCARD 0 z1",
                e("ERR at least 1 input key is needed for 'zintercard' command"),
            ),
            ("ZDIFF 2 z1 z2 WITHSCORES", arr(&["a", "1", "d", "4"])),
            ("ZDIFF 3 z1 z2 s1", arr(&["d"])),
            (
                "ZDIFF 1 s1 WITHSCORES",
                arr(&["a", "1", "e", "1", "f", "1"]),
            ),
            ("ZDIFF 2 z1 z2 WEIGHTS 1 2", e("ERR syntax error")),
            ("ZDIFF 2 z1 z1", arr(&[])),
            ("ZUNIONSTORE dst 2 z1 z2 WEIGHTS 1 2", i(5)),
            (
                "ZRANGE dst 0 -1 WITHSCORES",
                arr(&["a", "1", "d", "4", "b", "22", "c", "43", "e", "60"]),
            ),
            ("ZINTERSTORE dst 2 z1 z2 AGGREGATE MAX", i(2)),
            ("ZRANGE dst 0 -1 WITHSCORES", arr(&["b", "10", "c", "20"])),
            ("ZDIFFSTORE dst 2 z1 z1", i(0)),
            ("EXISTS dst", i(0)),
            ("ZDIFFSTORE dst 2 z1 z2", i(2)),
            ("ZRANGE dst 0 -1 WITHSCORES", arr(&["a", "1", "d", "4"])),
            ("ZUNIONSTORE dst 2 z1 z2 WITHSCORES", e("ERR syntax error")),
            (
                "ZUNION 0 z1",
                e("ERR at least 1 input key is needed for 'zunion' command"),
            ),
            (
                "ZUNIONSTORE dst 0 z1",
                e("ERR at least 1 input key is needed for 'zunionstore' command"),
            ),
            (
                "ZUNION x z1",
                e("ERR value is not an integer or out of range"),
            ),
            ("ZUNION 3 z1 z2", e("ERR syntax error")),
            ("ZUNION 2 z1 z2 WEIGHTS 1", e("ERR syntax error")),
            (
                "ZUNION 2 z1 z2 WEIGHTS 1 x",
                e("ERR weight value is not a float"),
            ),
            ("ZUNION 2 z1 z2 AGGREGATE avg", e("ERR syntax error")),
            ("ZUNION 2 z1 z2 AGGREGATE", e("ERR syntax error")),
            ("SET str v", ok()),
            ("ZUNION 2 z1 str WEIGHTS x y", e(ERR_WRONGTYPE)),
            ("ZUNIONSTORE dst 2 z1 str", e(ERR_WRONGTYPE)),
            ("ZADD zi 1 a", i(1)),
            ("ZADD zi2 inf a", i(1)),
            ("ZADD zi3 -inf a", i(1)),
            ("ZUNION 2 zi2 zi3 WITHSCORES", arr(&["a", "0"])),
            ("ZUNION 2 zi2 zi WEIGHTS 0 1 WITHSCORES", arr(&["a", "1"])),
            ("ZADD zu 0 a 1 b", i(2)),
            (
                "ZUNION 1 zu WEIGHTS -1 WITHSCORES",
                arr(&["b", "-1", "a", "-0"]),
            ),
            ("ZUNIONSTORE zd 1 zu WEIGHTS -1", i(2)),
            ("ZRANGE zd 0 -1 WITHSCORES", arr(&["b", "-1", "a", "0"])),
            (
                "ZUNION 2 zu zu WEIGHTS -1 0 AGGREGATE MIN WITHSCORES",
                arr(&["b", "-1", "a", "-0"]),
            ),
            (
                "ZUNION 2 zu zu WEIGHTS 0 -1 AGGREGATE MAX WITHSCORES",
                arr(&["a", "0", "b", "0"]),
            ),
            (
                "ZINTER 2 zi2 zi3 AGGREGATE min WITHSCORES",
                arr(&["a", "-inf"]),
            ),
            ("ZLEXCOUNT z1 - +", i(4)),
            ("ZLEXCOUNT z1 [b (d", i(2)),
            (
                "ZLEXCOUNT z1 b d",
                e("ERR min or max not valid string range item"),
            ),
            ("ZLEXCOUNT nokey - +", i(0)),
            ("ZLEXCOUNT str - +", e(ERR_WRONGTYPE)),
            (
                "ZREMRANGEBYRANK z1 x 1",
                e("ERR value is not an integer or out of range"),
            ),
            (
                "ZREMRANGEBYSCORE z1 x 1",
                e("ERR min or max is not a float"),
            ),
            (
                "ZREMRANGEBYLEX z1 x 1",
                e("ERR min or max not valid string range item"),
            ),
            ("ZREMRANGEBYRANK nokey 0 -1", i(0)),
            ("ZREMRANGEBYRANK z1 5 10", i(0)),
            ("ZREMRANGEBYRANK z1 -2 -1", i(2)),
            ("ZRANGE z1 0 -1", arr(&["a", "b"])),
            ("ZREMRANGEBYSCORE z1 (1 +inf", i(1)),
            ("ZRANGE z1 0 -1", arr(&["a"])),
            ("ZADD z3 0 a 0 b 0 c 0 d", i(4)),
            ("ZREMRANGEBYLEX z3 [b (d", i(2)),
            ("ZRANGE z3 0 -1", arr(&["a", "d"])),
            ("ZREMRANGEBYLEX z3 - +", i(2)),
            ("EXISTS z3", i(0)),
            ("ZREMRANGEBYSCORE str 0 1", e(ERR_WRONGTYPE)),
            ("ZMPOP 1 nokey MIN", Reply::Array(None)),
            ("ZADD zp 1 a 2 b 3 c", i(3)),
            (
                "ZMPOP 2 nokey zp MIN",
                Reply::Array(Some(vec![
                    b("zp"),
                    Reply::Array(Some(vec![arr(&["a", "1"])])),
                ])),
            ),
            (
                "ZMPOP 2 nokey zp MAX COUNT 10",
                Reply::Array(Some(vec![
                    b("zp"),
                    Reply::Array(Some(vec![arr(&["c", "3"]), arr(&["b", "2"])])),
                ])),
            ),
            ("EXISTS zp", i(0)),
            ("ZMPOP 1 zp MID", e("ERR syntax error")),
            ("ZMPOP 0 zp MIN", e("ERR numkeys should be greater than 0")),
            (
                "ZMPOP 1 zp MIN COUNT 0",
                e("ERR count should be greater than 0"),
            ),
            ("ZMPOP 2 str zp MIN", e(ERR_WRONGTYPE)),
            ("ZRANDMEMBER nokey", nil()),
            ("ZRANDMEMBER nokey 5", arr(&[])),
            ("ZADD zr 1 a 2 b", i(2)),
            ("ZRANDMEMBER zr 5 WITHSCORES", arr(&["b", "2", "a", "1"])),
            ("ZRANDMEMBER zr 0", arr(&[])),
            ("ZRANDMEMBER zr 1 withscore", e("ERR syntax error")),
            (
                "ZRANDMEMBER zr -9223372036854775807 WITHSCORES",
                e("ERR value is out of range"),
            ),
            ("ZRANDMEMBER str", e(ERR_WRONGTYPE)),
            ("ZINCRBY zr nx a", e("ERR syntax error")),
            ("ZINCRBY zr 1 a", b("2")),
        ],
    );
}

/// `HRANDFIELD` where it draws nothing at random, and its errors.
#[test]
fn hrandfield_whole_hash_and_errors() {
    run(
        "hrandfield_whole_hash_and_errors",
        &[
            ("HRANDFIELD h", nil()),
            ("HRANDFIELD h 3", arr(&[])),
            ("HSET h a 1 b 2 c 3", i(3)),
            ("HRANDFIELD h 0", arr(&[])),
            ("HRANDFIELD h 5", arr(&["a", "b", "c"])),
            ("HRANDFIELD h 5 WITHVALUES", arr(&["a", "1", "b", "2", "c", "3"])),
            ("HRANDFIELD h 5 withvalue", e("ERR syntax error")),
            ("HRANDFIELD h x", e("ERR value is not an integer or out of range")),
            ("HRANDFIELD h -9223372036854775808", e("ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807")),
            ("HRANDFIELD h -9223372036854770000 WITHVALUES", e("ERR value is out of range")),
            ("HRANDFIELD h 1 WITHVALUES x", e("ERR syntax error")),
            ("SET s v", ok()),
            ("HRANDFIELD s 0", e(ERR_WRONGTYPE)),
            ("HRANDFIELD s", e(ERR_WRONGTYPE)),
        ],
    );
}

/// `SORT`/`SORT_RO`: numeric, `ALPHA`, `BY` (keys, hash fields, `nosort`), `LIMIT`, `GET`, `STORE`.
#[test]
fn sort_and_sort_ro() {
    run(
        "sort_and_sort_ro",
        &[
            ("RPUSH l 3 1 2 10", i(4)),
            ("SORT l", arr(&["1", "2", "3", "10"])),
            ("SORT l DESC", arr(&["10", "3", "2", "1"])),
            ("SORT l ALPHA", arr(&["1", "10", "2", "3"])),
            ("SORT l LIMIT 1 2", arr(&["2", "3"])),
            ("SORT l LIMIT -5 2", arr(&["1", "2"])),
            ("SORT l LIMIT 2 -1", arr(&["3", "10"])),
            ("SORT l LIMIT 10 1", arr(&[])),
            ("SORT l LIMIT 1 0", arr(&[])),
            (
                "SORT l LIMIT x 1",
                e("ERR value is not an integer or out of range"),
            ),
            ("SORT l LIMIT 1", e("ERR syntax error")),
            ("SORT l FOO", e("ERR syntax error")),
            ("SET w_3 30", ok()),
            ("SET w_1 100", ok()),
            ("SET w_2 20", ok()),
            ("HSET h_3 f 5", i(1)),
            ("HSET h_1 f 1", i(1)),
            ("HSET h_10 f 9", i(1)),
            ("SORT l BY w_*", arr(&["10", "2", "3", "1"])),
            ("SORT l BY w_* DESC", arr(&["1", "3", "2", "10"])),
            ("SORT l BY h_*->f", arr(&["2", "1", "3", "10"])),
            ("SORT l BY w_* ALPHA", arr(&["10", "1", "2", "3"])),
            ("SORT l BY nosort", arr(&["3", "1", "2", "10"])),
            ("SORT l BY nosort DESC", arr(&["10", "2", "1", "3"])),
            ("SORT l BY nosort LIMIT 1 2", arr(&["1", "2"])),
            ("SORT l BY nosort DESC LIMIT 1 2", arr(&["2", "1"])),
            ("SORT l GET #", arr(&["1", "2", "3", "10"])),
            (
                "SORT l GET w_* GET # GET h_*->f",
                Reply::Array(Some(vec![
                    b("100"),
                    b("1"),
                    b("1"),
                    b("20"),
                    b("2"),
                    nil(),
                    b("30"),
                    b("3"),
                    b("5"),
                    nil(),
                    b("10"),
                    b("9"),
                ])),
            ),
            (
                "SORT l GET nostar",
                Reply::Array(Some(vec![nil(), nil(), nil(), nil()])),
            ),
            (
                "SORT l GET h_*->",
                Reply::Array(Some(vec![nil(), nil(), nil(), nil()])),
            ),
            (
                "SORT l BY nosort GET w_*",
                Reply::Array(Some(vec![b("30"), b("100"), b("20"), nil()])),
            ),
            ("SORT l STORE dst", i(4)),
            ("LRANGE dst 0 -1", arr(&["1", "2", "3", "10"])),
            ("SORT l GET w_* STORE dst", i(4)),
            ("LRANGE dst 0 -1", arr(&["100", "20", "30", ""])),
            ("SORT nokey STORE dst", i(0)),
            ("EXISTS dst", i(0)),
            ("SORT_RO l STORE dst", e("ERR syntax error")),
            ("SORT_RO l DESC", arr(&["10", "3", "2", "1"])),
            ("RPUSH bad 1 x 2", i(3)),
            (
                "SORT bad",
                e("ERR One or more scores can't be converted into double"),
            ),
            ("SORT bad ALPHA", arr(&["1", "2", "x"])),
            ("SORT bad BY nosort", arr(&["1", "x", "2"])),
            ("SET str v", ok()),
            ("SORT str", e(ERR_WRONGTYPE)),
            (
                "SORT str LIMIT x 1",
                e("ERR value is not an integer or out of range"),
            ),
            ("SADD s c a b", i(3)),
            ("SORT s ALPHA", arr(&["a", "b", "c"])),
            ("SORT s BY nosort STORE dst", i(3)),
            ("LRANGE dst 0 -1", arr(&["a", "b", "c"])),
            ("SORT s BY nosort DESC STORE dst", i(3)),
            ("LRANGE dst 0 -1", arr(&["c", "b", "a"])),
            ("ZADD z 1 c 2 a 3 b", i(3)),
            ("SORT z BY nosort", arr(&["c", "a", "b"])),
            ("SORT z BY nosort DESC", arr(&["b", "a", "c"])),
            ("SORT z BY nosort LIMIT 1 5", arr(&["a", "b"])),
            ("SORT z ALPHA DESC", arr(&["c", "b", "a"])),
            ("RPUSH f 1.5 -2 1e2 inf -inf 0x10", i(6)),
            ("SORT f", arr(&["-inf", "-2", "1.5", "0x10", "1e2", "inf"])),
            ("RPUSH g \" 3\" \"\" 1", i(3)),
            ("SORT g", arr(&["", "1", " 3"])),
            ("RPUSH e 1e400", i(1)),
            (
                "SORT e",
                e("ERR One or more scores can't be converted into double"),
            ),
            ("RPUSH e2 nan", i(1)),
            (
                "SORT e2",
                e("ERR One or more scores can't be converted into double"),
            ),
            ("RPUSH u 1e-400", i(1)),
            (
                "SORT u",
                e("ERR One or more scores can't be converted into double"),
            ),
            ("RPUSH a b a c", i(3)),
            ("SET wa 1", ok()),
            ("SORT a BY w* ALPHA", arr(&["b", "c", "a"])),
            ("SORT a BY w*", arr(&["b", "c", "a"])),
            ("SORT a BY w* ALPHA DESC", arr(&["a", "b", "c"])),
            ("SORT a BY w* DESC", arr(&["a", "c", "b"])),
        ],
    );
}

/// `HRANDFIELD`/`ZRANDMEMBER` draw from the read's seed: the same seed
/// gives the same picks, a positive count distinct members (with their own
/// values or scores), a negative one that many (repeats allowed), and over
/// seeds every member comes up.
#[test]
fn random_picks_follow_the_seed() {
    use std::collections::BTreeSet;
    let mut s = Store::new();
    for line in ["HSET h a 1 b 2 c 3 d 4 e 5", "ZADD z 1 a 2 b 3 c 4 d 5 e"] {
        execute_local(&mut s, &split_inline(line.as_bytes()).expect("parses"), T0);
    }
    let read = |line: &str, seed: u64| {
        let args = split_inline(line.as_bytes()).expect("parses");
        let known = crate::cmd::Known::of(&args[0]).expect("runs");
        match crate::cmd::read(&s, known, &args, seed, T0) {
            Reply::Bulk(Some(m)) => vec![m],
            Reply::Array(Some(items)) => items
                .into_iter()
                .map(|r| match r {
                    Reply::Bulk(Some(m)) => m,
                    other => panic!("{line}: {other:?}"),
                })
                .collect(),
            other => panic!("{line}: {other:?}"),
        }
    };
    // (command, members per pick, picks per reply, distinct).
    for (line, step, n, distinct) in [
        ("HRANDFIELD h", 1, 1, true),
        ("HRANDFIELD h 3", 1, 3, true),
        ("HRANDFIELD h 4 WITHVALUES", 2, 4, true),
        ("HRANDFIELD h -8 WITHVALUES", 2, 8, false),
        ("ZRANDMEMBER z", 1, 1, true),
        ("ZRANDMEMBER z 2 WITHSCORES", 2, 2, true),
        ("ZRANDMEMBER z -7", 1, 7, false),
    ] {
        assert_eq!(read(line, 9), read(line, 9), "{line}");
        let mut seen = BTreeSet::new();
        for seed in 0..200 {
            let got = read(line, seed);
            assert_eq!(got.len(), n * step, "{line}");
            let members: Vec<&Vec<u8>> = got.iter().step_by(step).collect();
            if step == 2 {
                for p in got.chunks(2) {
                    // a=1, b=2, ... in both.
                    assert_eq!(p[1], vec![b'1' + (p[0][0] - b'a')], "{line}");
                }
            }
            if distinct {
                let set: BTreeSet<_> = members.iter().collect();
                assert_eq!(set.len(), n, "{line}");
            }
            seen.extend(members.into_iter().cloned());
        }
        assert_eq!(seen.len(), 5, "{line}");
    }
    assert_eq!(
        read("HRANDFIELD h 9", 1),
        ["a", "b", "c", "d", "e"].map(|m| m.as_bytes().to_vec())
    );
}

/// The new writes replicate: the same ops give the same replies and the
/// same state on two stores.
#[test]
fn multi_key_and_sort_writes_replicate() {
    let (mut a, mut b) = (Store::new(), Store::new());
    for (n, line) in [
        "RPUSH l 3 1 2",
        "ZADD z 1 a 2 b 3 c",
        "SADD s a d",
        "SET w_1 9",
        "LMPOP 2 none l RIGHT COUNT 2",
        "ZMPOP 1 z MAX",
        "ZUNIONSTORE u 2 z s WEIGHTS 2 3 AGGREGATE MAX",
        "ZINTERSTORE i 2 z s",
        "ZDIFFSTORE d 2 z s",
        "ZREMRANGEBYSCORE u 0 2",
        "ZREMRANGEBYRANK z 0 0",
        "ZREMRANGEBYLEX u - +",
        "SORT l BY w_* STORE sorted",
        "SORT s BY nosort STORE sorted2",
    ]
    .iter()
    .enumerate()
    {
        let args = split_inline(line.as_bytes()).expect("parses");
        let Action::Write(op) = classify(args, T0 + n as u64) else {
            panic!("{line} is a write");
        };
        let wire = op.encode();
        assert_eq!(WriteOp::decode(&wire).as_ref(), Ok(&op));
        assert_eq!(a.apply(&op), b.apply(&op), "{line}");
    }
    assert_eq!(a.snapshot(), b.snapshot());
    let lrange = |s: &mut Store, k: &str| {
        execute_local(
            s,
            &split_inline(format!("LRANGE {k} 0 -1").as_bytes()).expect("parses"),
            T0 + 99,
        )
    };
    assert_eq!(lrange(&mut a, "sorted"), arr(&["3"]));
    assert_eq!(lrange(&mut a, "sorted2"), arr(&["a", "d"]));
}

/// `SMOVE` signals (and fires `sadd` on) the destination only when the
/// member was not there yet, as Redis does: a `WATCH` of it stays quiet.
#[test]
fn smove_to_a_set_holding_the_member_leaves_it_unchanged() {
    let mut s = Store::new();
    let run = |s: &mut Store, line: &str, n: u64| {
        execute_local(s, &split_inline(line.as_bytes()).expect("parses"), T0 + n)
    };
    run(&mut s, "SADD src a b", 0);
    run(&mut s, "SADD dst a", 1);
    let before = s.version(b"dst", T0 + 2);
    assert_eq!(run(&mut s, "SMOVE src dst a", 3), i(1));
    assert_eq!(s.version(b"dst", T0 + 4), before);
    assert_eq!(run(&mut s, "SMOVE src dst b", 5), i(1));
    assert_ne!(s.version(b"dst", T0 + 6), before);
    assert_eq!(run(&mut s, "EXISTS src", 7), i(0));
}
