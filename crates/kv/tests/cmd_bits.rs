//! The bitmap and string-range commands of the command layer (`SETBIT`,
//! `GETBIT`, `BITCOUNT`, `BITPOS`, `BITOP`, `BITFIELD`, `BITFIELD_RO`,
//! `SETRANGE`, `GETRANGE`, `SUBSTR`, `LCS`) against a real `redis-server`
//! 7.0: every command runs on both — on a store through
//! `exec::execute_local`, as a member applies it — and must give the
//! same reply and the same keyspace events (`KEA`, taken from a
//! `PSUBSCRIBE` connection on Redis's side), and the keys must hold the same
//! values. Each write the leader would answer without a log entry
//! (`cmd::unchanged_reply`) is also applied to a copy of the store, which
//! must give that reply and change nothing: no value, expiry, version,
//! tombstone or event.
//!
//! The sessions: a fixed one of the cases that matter (errors and their
//! order, missing keys, wrong types, empty results, the size limit), the
//! same at `proto-max-bulk-len 1mb`, and seeded random streams from the
//! differential test's generator (`XLANE_KV_BITS_SEED` replays one,
//! `XLANE_KV_BITS_STEPS` lengthens them).

mod support;

use support::differential::{self, Rng};
use support::real_redis::{RealRedis, Resp, Value};
use xlane_kv::exec::execute_local;
use xlane_kv::exec::Apply;
use xlane_kv::notify::NotifyFlags;
use xlane_kv::op::{WriteCmd, WriteOp};
use xlane_kv::resp::Reply;
use xlane_kv::store::Store;
use xlane_kv::Replicator;

const T0: u64 = 1_700_000_000_000;

/// The channel prefix of Redis's key-event notifications.
const KEYEVENT: &str = "__keyevent@0__:";

/// A reply as `Resp` reads it off a RESP2 wire.
fn wire(r: &Reply) -> Value {
    match r {
        Reply::Simple(s) => Value::Simple(s.clone()),
        Reply::Error(s) => Value::Error(s.clone()),
        Reply::Integer(n) => Value::Int(*n),
        Reply::Bulk(b) => Value::Bulk(b.clone()),
        Reply::Array(a) => Value::Array(a.as_ref().map(|v| v.iter().map(wire).collect())),
        Reply::Map(pairs) => Value::Array(Some(
            pairs.iter().flat_map(|(k, v)| [wire(k), wire(v)]).collect(),
        )),
        Reply::Set(v) | Reply::Push(v) => Value::Array(Some(v.iter().map(wire).collect())),
        Reply::Double(d) => Value::Bulk(Some(d.clone().into_bytes())),
        other => panic!("unexpected reply {other:?}"),
    }
}

/// A real Redis and a store, run side by side.
struct Pair {
    _server: RealRedis,
    redis: Resp,
    events: Resp,
    store: Store,
    now: u64,
    marks: u64,
    /// Writes answered by `unchanged_reply` (checked against a copy).
    unchanged: usize,
}

/// The length of the snapshot's header (magic, clock, applied count):
/// the applied count is the one thing an unchanged write moves.
fn header_len() -> usize {
    // An empty store's snapshot: header, map length, tombstone floor and
    // count, the three data settings.
    Store::new().snapshot().len() - 8 * 6
}

impl Pair {
    /// A fresh server with `extra` arguments and an empty store, both with
    /// keyspace events `KEA`.
    fn new(extra: &[&str]) -> Pair {
        let server = RealRedis::start_with(extra);
        let mut redis = server.conn();
        assert_eq!(
            redis.line("CONFIG SET notify-keyspace-events KEA"),
            Value::Simple("OK".into())
        );
        let mut events = server.conn();
        events.line(&format!("PSUBSCRIBE {KEYEVENT}*"));
        let mut store = Store::new();
        store.set_notifications(NotifyFlags::parse(b"KEA").expect("flags"));
        let mut p = Pair {
            _server: server,
            redis,
            events,
            store,
            now: T0,
            marks: 0,
            unchanged: 0,
        };
        // The store takes Redis's proto-max-bulk-len, as a member takes a
        // CONFIG SET (one op).
        let limit = match p.redis.line("CONFIG GET proto-max-bulk-len") {
            Value::Array(Some(v)) => v[1].bytes().expect("value").to_vec(),
            other => panic!("CONFIG GET: {other:?}"),
        };
        p.store.apply(&WriteOp::new(
            T0,
            WriteCmd::SetConfig {
                pairs: vec![(b"proto-max-bulk-len".to_vec(), limit)],
            },
        ));
        p.store.drain_events().for_each(drop);
        p
    }

    /// Redis's key events since the last call: a marker is published
    /// after the command, and every event the command fired comes before
    /// it.
    fn redis_events(&mut self) -> Vec<(String, Vec<u8>)> {
        self.marks += 1;
        let mark = format!("{KEYEVENT}zz-mark-{}", self.marks);
        self.redis.cmd(&[b"PUBLISH", mark.as_bytes(), b"x"]);
        let mut out = Vec::new();
        loop {
            let Value::Array(Some(m)) = self.events.read() else {
                panic!("not a pmessage");
            };
            let channel = String::from_utf8_lossy(m[2].bytes().expect("channel")).into_owned();
            if channel == mark {
                return out;
            }
            let event = channel.trim_start_matches(KEYEVENT).to_string();
            out.push((event, m[3].bytes().expect("key").to_vec()));
        }
    }

    /// Runs `words` on both and checks reply and events; `what` names the
    /// step in a failure.
    fn step(&mut self, words: &[Vec<u8>], what: &str) {
        let show = || {
            words
                .iter()
                .map(|w| String::from_utf8_lossy(w).into_owned())
                .collect::<Vec<_>>()
                .join(" ")
        };
        self.now += 1;
        if matches!(xlane_kv::cmd::check(words), Some(Ok((true, _)))) {
            if let Some(quiet) = xlane_kv::cmd::unchanged_reply(&self.store, words) {
                self.check_unchanged(words, &quiet, &show());
            }
        }
        let ours = execute_local(&mut self.store, &words.to_vec(), self.now);
        let our_events: Vec<(String, Vec<u8>)> = self
            .store
            .drain_events()
            .map(|e| (e.event.to_string(), e.key))
            .collect();
        let refs: Vec<&[u8]> = words.iter().map(|w| w.as_slice()).collect();
        let theirs = self.redis.cmd(&refs);
        assert_eq!(wire(&ours), theirs, "{what}: reply to {}", show());
        let their_events = self.redis_events();
        assert_eq!(our_events, their_events, "{what}: events of {}", show());
    }

    /// The write `words` would change nothing: applying it to a copy gives
    /// `quiet` and leaves the replicated state as it was.
    fn check_unchanged(&mut self, words: &[Vec<u8>], quiet: &Reply, shown: &str) {
        self.unchanged += 1;
        let mut copy = self.store.frozen();
        copy.set_notifications(NotifyFlags::parse(b"KEA").expect("flags"));
        let before = copy.snapshot();
        let got = execute_local(&mut copy, &words.to_vec(), self.now);
        assert_eq!(&got, quiet, "unchanged reply of {shown}");
        let after = copy.snapshot();
        // All but the clock and the applied count (an answer without a log
        // entry moves neither).
        let h = header_len();
        assert!(before[h..] == after[h..], "{shown} changed the store");
        assert_eq!(copy.drain_events().count(), 0, "{shown} fired events");
    }

    /// The same keys, each of the same type and (a string) value.
    fn same_keys(&mut self, what: &str) {
        let names = |v: Value| -> Vec<Vec<u8>> {
            let Value::Array(Some(v)) = v else {
                panic!("KEYS: {v:?}");
            };
            let mut v: Vec<Vec<u8>> = v
                .iter()
                .filter_map(|k| k.bytes().map(<[u8]>::to_vec))
                .collect();
            v.sort();
            v
        };
        let ours = names(wire(&execute_local(
            &mut self.store,
            &words("KEYS *"),
            self.now,
        )));
        let theirs = names(self.redis.line("KEYS *"));
        assert_eq!(ours, theirs, "{what}: keys");
        for k in ours {
            self.step(&[b"TYPE".to_vec(), k.clone()], what);
            let t = execute_local(
                &mut self.store,
                &vec![b"TYPE".to_vec(), k.clone()],
                self.now,
            );
            if t == Reply::Simple("string".into()) {
                self.step(&[b"GET".to_vec(), k.clone()], what);
                // The expiry: the same or none (the clocks differ).
                let pttl = vec![b"PTTL".to_vec(), k.clone()];
                let ours = execute_local(&mut self.store, &pttl, self.now);
                let theirs = self.redis.cmd(&[b"PTTL", &k]);
                match (wire(&ours), theirs) {
                    (Value::Int(a), Value::Int(b)) if a < 0 || b < 0 => {
                        assert_eq!(a, b, "{what}: PTTL {}", String::from_utf8_lossy(&k))
                    }
                    (Value::Int(a), Value::Int(b)) => assert!(
                        a.abs_diff(b) < 60_000,
                        "{what}: PTTL {}: {a} {b}",
                        String::from_utf8_lossy(&k)
                    ),
                    other => panic!("{what}: PTTL {other:?}"),
                }
            }
        }
    }
}

/// A command's words: split on spaces, `""` is an empty word, `\xHH` a
/// byte, `{N*c}` N times the character c.
fn words(line: &str) -> Vec<Vec<u8>> {
    line.split_whitespace()
        .map(|w| {
            if w == "\"\"" {
                return Vec::new();
            }
            if let Some(rep) = w.strip_prefix('{').and_then(|w| w.strip_suffix('}')) {
                let (n, c) = rep.split_once('*').expect("{N*c}");
                return c.repeat(n.parse().expect("count")).into_bytes();
            }
            let mut out = Vec::new();
            let b = w.as_bytes();
            let mut i = 0;
            while i < b.len() {
                if b[i] == b'\\' && b.get(i + 1) == Some(&b'x') && i + 4 <= b.len() {
                    let hex = std::str::from_utf8(&b[i + 2..i + 4]).expect("hex");
                    out.push(u8::from_str_radix(hex, 16).expect("hex byte"));
                    i += 4;
                } else {
                    out.push(b[i]);
                    i += 1;
                }
            }
            out
        })
        .collect()
}

/// The fixed session: each case Redis's order of checks or a special
/// reply depends on.
const SESSION: &[&str] = &[
    // Keys of other types.
    "RPUSH l a",
    "HSET h f v",
    // SETBIT / GETBIT.
    "SETBIT b 1 1",
    "SETBIT b 1 1",
    "GETBIT b 1",
    "GETBIT b 0",
    "GETBIT b 100",
    "SETBIT b 7 1",
    "SETBIT b 1 0",
    "SETBIT b 1 0",
    "GET b",
    "SETBIT b 100 0",
    "STRLEN b",
    "SETBIT b 95 0",
    "SETBIT b -1 1",
    "SETBIT b x 1",
    "SETBIT b 01 1",
    "SETBIT b 4294967296 1",
    "SETBIT b 4294967296 2",
    "SETBIT b 0 2",
    "SETBIT b 0 -1",
    "SETBIT b 0 x",
    "SETBIT l 0 1",
    "SETBIT l x 1",
    "SETBIT l 0 5",
    "GETBIT l 0",
    "GETBIT l x",
    "GETBIT nokey 0",
    "GETBIT nokey x",
    "GETBIT nokey 4294967296",
    "SET num 1",
    "SETBIT num 6 1",
    "GET num",
    "SET num2 -1",
    "GETBIT num2 2",
    "EXPIRE b 1000",
    "SETBIT b 0 1",
    "TTL b",
    // BITCOUNT.
    "BITCOUNT nokey",
    "BITCOUNT nokey x y",
    "BITCOUNT nokey 0 1 NOPE",
    "BITCOUNT l",
    "BITCOUNT l x y",
    "SET s foobar",
    "BITCOUNT s",
    "BITCOUNT s 0 0",
    "BITCOUNT s 1 1",
    "BITCOUNT s 1 -1",
    "BITCOUNT s -2 -1",
    "BITCOUNT s -1 -2",
    "BITCOUNT s 5 30 BIT",
    "BITCOUNT s 5 30 BYTE",
    "BITCOUNT s 5 30 bit",
    "BITCOUNT s 5 30 NOPE",
    "BITCOUNT s 0",
    "BITCOUNT s 0 1 2",
    "BITCOUNT s x 1",
    "BITCOUNT s 0 x",
    "BITCOUNT s -1 -2 NOPE",
    "BITCOUNT s -9223372036854775808 9223372036854775807",
    "BITCOUNT s 100 200",
    // BITPOS.
    "BITPOS nokey 0",
    "BITPOS nokey 1",
    "BITPOS nokey 2",
    "BITPOS nokey x",
    "BITPOS l 0",
    "BITPOS l 2",
    "BITPOS s 1",
    "BITPOS s 0",
    "BITPOS s 1 2",
    "BITPOS s 1 2 -1",
    "BITPOS s 1 2 -1 BIT",
    "BITPOS s 1 7 15 BIT",
    "BITPOS s 0 -1 -2",
    "BITPOS s 1 x",
    "BITPOS s 1 0 x",
    "BITPOS s 1 0 -1 NOPE",
    "BITPOS s 1 0 -1 BIT 5",
    "SETRANGE ones 0 \\xff\\xff\\xff",
    "BITPOS ones 0",
    "BITPOS ones 0 0",
    "BITPOS ones 0 0 -1",
    "BITPOS ones 0 0 -1 BIT",
    "SETRANGE zeros 0 \\x00\\x00",
    "BITPOS zeros 1",
    "BITPOS zeros 0",
    // BITOP.
    "SET a \\x55\\xff",
    "SET c \\x0f",
    "BITOP AND dest a c",
    "GET dest",
    "BITOP OR dest a c nokey",
    "GET dest",
    "BITOP XOR dest a c",
    "GET dest",
    "BITOP NOT dest a",
    "GET dest",
    "BITOP not dest c",
    "BITOP NOT dest a c",
    "BITOP NAND dest a",
    "BITOP NAND dest a c",
    "BITOP AND dest a l",
    "BITOP AND l a",
    "TYPE l",
    "EXPIRE dest 1000",
    "BITOP AND dest a",
    "TTL dest",
    "BITOP AND a a c",
    "GET a",
    "BITOP OR dest nokey",
    "EXISTS dest",
    "BITOP OR dest nokey",
    "SET empty \"\"",
    "BITOP XOR dest2 empty nokey",
    "BITOP NOT h nokey",
    "TYPE h",
    "HSET h f v",
    "BITOP OR h a",
    "TYPE h",
    "SET num 123",
    "BITOP OR dest num",
    "GET dest",
    // BITFIELD.
    "BITFIELD bf",
    "BITFIELD bf SET i8 0 -100",
    "BITFIELD bf GET i8 0 GET u8 0",
    "BITFIELD bf SET u8 0 255 GET u8 0",
    "BITFIELD bf SET i8 0 -100 SET i8 0 -100",
    "BITFIELD bf INCRBY u2 100 1 OVERFLOW SAT INCRBY u2 102 1",
    "BITFIELD bf SET u8 #1 200 GET u8 8 GET u8 #1",
    "BITFIELD bf OVERFLOW WRAP INCRBY u8 0 257 OVERFLOW SAT INCRBY u8 0 300 OVERFLOW FAIL INCRBY u8 0 1",
    "BITFIELD bf OVERFLOW FAIL SET i4 0 100 INCRBY i4 0 -100",
    "BITFIELD bf SET i64 0 -9223372036854775808 INCRBY i64 0 -1",
    "BITFIELD bf OVERFLOW SAT INCRBY i64 0 -1 INCRBY u63 64 -1",
    "BITFIELD bf GET u64 0",
    "BITFIELD bf GET i65 0",
    "BITFIELD bf GET i0 0",
    "BITFIELD bf GET x8 0",
    "BITFIELD bf GET u8 -1",
    "BITFIELD bf GET u8 #-1",
    "BITFIELD bf GET u8 4294967296",
    "BITFIELD bf SET u8 0 x",
    "BITFIELD bf SET u8 0",
    "BITFIELD bf GET u8",
    "BITFIELD bf OVERFLOW",
    "BITFIELD bf OVERFLOW NOPE GET u8 0",
    "BITFIELD bf NOPE",
    "BITFIELD bf GET u8 0 NOPE",
    "BITFIELD bf SET u8 4294967296 1 SET u64 0 1",
    "BITFIELD l GET u8 0",
    "BITFIELD l SET u8 0 1",
    "BITFIELD l SET u64 0 1",
    "BITFIELD nobf GET u8 0 GET i4 100",
    "EXISTS nobf",
    "BITFIELD nobf2 OVERFLOW FAIL INCRBY u2 0 10",
    "EXISTS nobf2",
    "GET nobf2",
    "BITFIELD nobf2 OVERFLOW FAIL INCRBY u2 20 10",
    "STRLEN nobf2",
    "BITFIELD nobf2 SET u2 0 0",
    "BITFIELD nobf2 SET u2 0 1",
    "EXPIRE bf 1000",
    "BITFIELD bf SET u8 100 1",
    "TTL bf",
    // A long string: the leader learns a write changes nothing from the
    // bytes the operations touch.
    "SETBIT big 80000 1",
    "BITFIELD big SET u8 10000 0",
    "BITFIELD big SET u4 80000 8 GET u8 80010 GET i16 79990",
    "BITFIELD big OVERFLOW FAIL INCRBY u1 80000 1 SET u8 #1250 128",
    "BITFIELD big SET u8 0 0 SET u8 9000 0",
    "BITFIELD big SET u8 0 0 SET u8 79000 0",
    "BITFIELD big SET u8 0 0 SET u8 79999 0",
    "BITFIELD big SET u8 80001 0",
    "BITFIELD big SET u8 79999 1",
    "STRLEN big",
    "BITFIELD_RO bf",
    "BITFIELD_RO bf GET u8 0 GET i8 #1",
    "BITFIELD_RO bf GET u8 0 SET u8 0 1",
    "BITFIELD_RO bf INCRBY u8 0 1",
    "BITFIELD_RO bf GET u64 0 SET u8 0 1",
    "BITFIELD_RO l GET u8 0",
    "BITFIELD_RO l SET u8 0 1",
    "BITFIELD_RO nokey GET u8 0",
    "BITFIELD num GET u8 0 SET u8 0 65",
    "GET num",
    // SETRANGE / GETRANGE / SUBSTR.
    "SETRANGE sr 0 \"\"",
    "EXISTS sr",
    "SETRANGE sr 5 \"\"",
    "SETRANGE sr 1 foo",
    "GET sr",
    "SETRANGE sr 0 bar",
    "SETRANGE sr 0 bar",
    "SETRANGE sr 10 \"\"",
    "SETRANGE sr 10 x",
    "GET sr",
    "SETRANGE sr -1 x",
    "SETRANGE sr x x",
    "SETRANGE sr 536870911 xx",
    "SETRANGE sr 536870912 x",
    "SETRANGE sr 536870912 \"\"",
    "SETRANGE sr 9223372036854775807 x",
    "SETRANGE nosr 536870912 x",
    "SETRANGE nosr 536870912 \"\"",
    "SETRANGE l 0 x",
    "SETRANGE l 0 \"\"",
    "SETRANGE l 536870912 x",
    "SETRANGE l -1 x",
    "SET num 1234",
    "SETRANGE num 1 x",
    "GET num",
    "EXPIRE sr 1000",
    "SETRANGE sr 0 z",
    "TTL sr",
    "SET gr Hello_World",
    "GETRANGE gr 0 3",
    "GETRANGE gr 0 -1",
    "GETRANGE gr -4 -1",
    "GETRANGE gr 5 3",
    "GETRANGE gr 5 5000",
    "GETRANGE gr -5000 10000",
    "GETRANGE gr 0 -100",
    "GETRANGE gr 1 -100",
    "GETRANGE gr -1 -5",
    "GETRANGE gr -1 -100",
    "GETRANGE gr 100 200",
    "GETRANGE gr 0 -9223372036854775808",
    "GETRANGE gr -9223372036854775808 9223372036854775807",
    "GETRANGE gr x 1",
    "GETRANGE gr 0 x",
    "GETRANGE nokey 0 -1",
    "GETRANGE nokey x 1",
    "GETRANGE l 0 -1",
    "GETRANGE l x 1",
    "SUBSTR gr 1 3",
    "SUBSTR l 1 3",
    "SUBSTR gr x 3",
    "SET num 1234",
    "GETRANGE num 1 2",
    "GETRANGE empty 0 -1",
    // LCS.
    "SET rna1 CACCTTCCCAGGTAACAAACCAACCAACTTTCGATCTCTTGTAGATCTGTTCTCTAAACGAACTTTAAAATCTGTGTGGCTGTCACTCGGCTGCATGCTTAGTGCACTCACGCAGTATAATTAATAACTAATTACTGTCGTTGACAGGACACGAGTAACTCGTCTATCTTCTGCAGGCTGCTTACGGTTTCGTCCGTGTTGCAGCCGATCATCAGCACATCTAGGTTTCGTCCGGGTGTG",
    "SET rna2 ATTAAAGGTTTATACCTTCCCAGGTAACAAACCAACCAACTTTCGATCTCTTGTAGATCTGTTCTCTAAACGAACTTTAAAATCTGTGTGGCTGTCACTCGGCTGCATGCTTAGTGCACTCACGCAGTATAATTAATAACTAATTACTGTCGTTGACAGGACACGAGTAACTCGTCTATCTTCTGCAGGCTGCTTACGGTTTCGTCCGTGTTGCAGCCGATCATCAGCACATCTAGGTTT",
    "LCS rna1 rna2",
    "LCS rna1 rna2 LEN",
    "LCS rna1 rna2 IDX",
    "LCS rna1 rna2 IDX WITHMATCHLEN",
    "LCS rna1 rna2 IDX MINMATCHLEN 5 WITHMATCHLEN",
    "LCS rna1 rna2 IDX MINMATCHLEN -5",
    "SET k1 ohmytext",
    "SET k2 mynewtext",
    "LCS k1 k2",
    "LCS k1 k2 LEN",
    "LCS k1 k2 IDX",
    "LCS k1 k2 IDX MINMATCHLEN 4 WITHMATCHLEN",
    "LCS k1 k2 idx len",
    "LCS k1 k2 LEN IDX",
    "LCS k1 k2 LEN LEN",
    "LCS k1 k2 MINMATCHLEN",
    "LCS k1 k2 MINMATCHLEN x",
    "LCS k1 k2 NOPE",
    "LCS k1 nokey",
    "LCS nokey nokey IDX",
    "LCS k1 l",
    "LCS l k1 NOPE",
    "LCS k1 k1",
    "LCS k1 empty IDX WITHMATCHLEN",
];

/// The same cases, and the size limit's, at `proto-max-bulk-len 1mb`
/// (Redis's smallest): offsets, `SETRANGE`'s result and `LCS`'s table.
const SMALL_LIMIT_SESSION: &[&str] = &[
    "SETBIT b 8388608 1",
    "SETBIT b 8388608 2",
    "SETBIT b 8388607 0",
    "STRLEN b",
    "SETBIT b 8388607 0",
    "GETBIT b 8388608",
    "GETBIT b 8388607",
    "BITFIELD b GET u8 8388608",
    "BITFIELD b GET u8 8388600",
    "BITFIELD b SET u8 8388608 1",
    "BITFIELD b SET u8 #1048576 1",
    "BITFIELD b SET u8 #1048575 1",
    "BITFIELD b SET u8 8388601 255 GET u8 8388600",
    "STRLEN b",
    "BITFIELD_RO b GET u8 8388608",
    "BITFIELD nob GET u8 8388608 SET u8 0 x",
    "BITFIELD nob SET u8 0 x GET u8 8388608",
    "EXISTS nob",
    "SETRANGE sr 1048575 x",
    "SETRANGE sr 1048575 xy",
    "SETRANGE sr 1048576 \"\"",
    "STRLEN sr",
    "DEL b sr",
    "SET a {600*a}",
    "SET c {600*a}",
    "LCS a c LEN",
    "SET c {300*a}",
    "LCS a c LEN",
    "SET a {511*a}",
    "SET c {511*a}",
    "LCS a c LEN",
    "SET c {512*a}",
    "LCS a c LEN",
    "LCS a nokey LEN",
];

fn run_session(p: &mut Pair, name: &str, session: &[&str]) {
    for (i, line) in session.iter().enumerate() {
        p.step(&words(line), &format!("{name} step {i}"));
    }
    p.same_keys(name);
}

#[test]
fn fixed_session_matches_redis() {
    let mut p = Pair::new(&[]);
    run_session(&mut p, "session", SESSION);
    assert!(
        p.unchanged >= 15,
        "only {} writes answered unchanged",
        p.unchanged
    );
}

#[test]
fn size_limit_matches_redis() {
    let mut p = Pair::new(&["--proto-max-bulk-len", "1mb"]);
    run_session(&mut p, "1mb", SMALL_LIMIT_SESSION);
}

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Seeded streams of the differential test's bit commands, among writes
/// of whole strings and keys of other types.
#[test]
fn random_streams_match_redis() {
    let seed = env_or("XLANE_KV_BITS_SEED", 0xb175_0001);
    let steps = env_or("XLANE_KV_BITS_STEPS", 6000) as usize;
    let mut p = Pair::new(&[]);
    for i in 0..3 {
        for setup in [
            format!("HSET h{i} f v"),
            format!("RPUSH l{i} a"),
            format!("SADD t{i} a"),
            format!("ZADD z{i} 1 a"),
        ] {
            p.step(&words(&setup), "setup");
        }
    }
    let mut r = Rng::new(seed);
    for i in 0..steps {
        let c: Vec<Vec<u8>> = match r.below(20) {
            0 => {
                let k = format!("s{}", r.below(3));
                let v = r.pick(&["7", "-1", "hello", "\u{1}\u{2}", "123456789012"]);
                vec![b"SET".to_vec(), k.into_bytes(), v.as_bytes().to_vec()]
            }
            1 => vec![b"DEL".to_vec(), format!("s{}", r.below(3)).into_bytes()],
            _ => differential::bits_and_ranges(&mut r)
                .into_iter()
                .map(String::into_bytes)
                .collect(),
        };
        p.step(&c, &format!("seed {seed} step {i}"));
        if i % 1000 == 999 {
            p.same_keys(&format!("seed {seed} step {i}"));
        }
    }
    p.same_keys(&format!("seed {seed} end"));
    println!(
        "seed {seed}: {steps} commands, {} answered unchanged",
        p.unchanged
    );
    assert!(
        p.unchanged > steps / 50,
        "too few unchanged: {}",
        p.unchanged
    );
}

/// A WATCH sees what Redis's does: a key changed (or created) moves its
/// version, a write that changes nothing does not.
#[test]
fn versions_move_only_with_changes() {
    let mut now = T0;
    let mut run = |st: &mut Store, line: &str| -> u64 {
        now += 1;
        execute_local(st, &words(line), now);
        now
    };
    let cases: &[(&str, &str, bool)] = &[
        // (setup, command, moves the version of k)
        ("SETBIT k 3 1", "SETBIT k 3 1", false),
        ("SETBIT k 3 1", "SETBIT k 3 0", true),
        ("SETBIT k 3 1", "SETBIT k 20 0", true),
        ("SETBIT k 3 1", "BITFIELD k SET u4 0 1", false),
        ("SETBIT k 3 1", "BITFIELD k SET u4 0 2", true),
        ("SETBIT k 3 1", "BITFIELD k GET u4 0 GET u8 100", false),
        (
            "SETBIT k 3 1",
            "BITFIELD k OVERFLOW FAIL INCRBY u4 0 100",
            false,
        ),
        // Grown by a write that fails: Redis signals nothing.
        (
            "SETBIT k 3 1",
            "BITFIELD k OVERFLOW FAIL INCRBY u4 100 100",
            false,
        ),
        ("SETBIT k 3 1", "BITFIELD k INCRBY u4 0 0", false),
        ("SETBIT k 3 1", "SETRANGE k 0 \"\"", false),
        ("SETBIT k 3 1", "SETRANGE k 0 \\x10", true),
        ("SETBIT k 3 1", "BITOP AND k k", true),
        ("SETBIT k 3 1", "BITOP AND k nokey", true),
        ("SETBIT k 3 1", "GETBIT k 3", false),
        ("SETBIT k 3 1", "SETBIT k 99999999999 1", false),
    ];
    for (setup, cmd, moves) in cases {
        let mut st = Store::new();
        let t = run(&mut st, setup);
        let v0 = st.version(b"k", t);
        let t = run(&mut st, cmd);
        let v1 = st.version(b"k", t);
        assert_eq!(v0 != v1, *moves, "{setup}; {cmd}");
    }
}

/// Three members on loopback, serving clients; the first leader's client
/// address once a write through it succeeds.
struct Group {
    nodes: Vec<xlane_kv::RaftReplicator>,
    _dirs: Vec<tempfile::TempDir>,
}

impl Group {
    fn start() -> Group {
        use std::net::TcpListener;
        use support::cluster::{TEST_LATENCY_NS, TEST_PERIOD_NS};
        use xlane_kv::raft::{LogFsync, StorageConfig};
        let listeners: Vec<TcpListener> = (0..3)
            .map(|_| TcpListener::bind("127.0.0.1:0").expect("listen"))
            .collect();
        let peers: std::collections::BTreeMap<u64, xlane_kv::Peer> = (1..=3u64)
            .map(|id| {
                let client = listeners[id as usize - 1].local_addr().expect("addr");
                let peer = xlane_kv::Peer {
                    raft: xlane_testports::raft(),
                    client: client.to_string(),
                };
                (id, peer)
            })
            .collect();
        let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().expect("dir")).collect();
        let nodes = listeners
            .into_iter()
            .zip(1..=3u64)
            .map(|(l, id)| {
                let mut st = StorageConfig::new(dirs[id as usize - 1].path());
                st.fsync = LogFsync::Never;
                let cfg = xlane_kv::RaftConfig::new(
                    id,
                    peers.clone(),
                    st,
                    TEST_PERIOD_NS,
                    TEST_LATENCY_NS,
                )
                .expect("cfg");
                let stats = std::sync::Arc::new(xlane_kv::session::Stats::default());
                xlane_kv::RaftReplicator::start_serving(
                    cfg,
                    l,
                    xlane_kv::resp::Limits::default(),
                    stats,
                )
                .expect("start")
                .0
            })
            .collect();
        Group { nodes, _dirs: dirs }
    }

    /// The leader's client address, once it takes a write.
    fn leader(&self) -> std::net::SocketAddr {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        loop {
            let l = self.nodes[0].leader_id();
            if let Some(n) = self.nodes.iter().find(|n| n.id() == l) {
                let addr = n.client_addr().expect("serving");
                let up = support::cluster::call(&addr.to_string(), &["del", "up"]);
                if matches!(up, Ok(Reply::Integer(_))) {
                    return addr;
                }
            }
            assert!(std::time::Instant::now() < deadline, "no leader");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    /// Waits until every member applied as much as the others; their
    /// stores' canonical bytes must be equal.
    fn assert_identical(&self) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        loop {
            let applied: Vec<u64> = self.nodes.iter().map(|n| n.applied_index()).collect();
            if applied.iter().all(|a| *a == applied[0]) {
                break;
            }
            assert!(std::time::Instant::now() < deadline, "{applied:?}");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let snaps: Vec<Vec<u8>> = self
            .nodes
            .iter()
            .map(|n| n.store().read().expect("store").snapshot())
            .collect();
        for (i, s) in snaps.iter().enumerate() {
            assert!(*s == snaps[0], "member {} differs from member 1", i + 1);
        }
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        for n in &self.nodes {
            n.shutdown();
        }
    }
}

/// The bit commands through a three-member group's leader (RESP2, then
/// RESP3), with transactions (`WATCH` of a key the stream changes or
/// not), reply by reply as a real Redis answers them; the members end
/// byte-identical.
#[test]
fn cluster_streams_match_redis_and_replicas_agree() {
    let seed = env_or("XLANE_KV_BITS_SEED", 0xb175_0002);
    let steps = env_or("XLANE_KV_BITS_STEPS", 6000) as usize;
    let redis = RealRedis::start();
    let redis_addr: std::net::SocketAddr =
        format!("127.0.0.1:{}", redis.port).parse().expect("addr");
    let group = Group::start();
    let s = |w: &str| w.to_string();
    for (run, resp3) in [(0u64, false), (1, true)] {
        let mut r = Rng::new(seed + run);
        let mut cmds: Vec<Vec<String>> = vec![vec![s("FLUSHALL")]];
        if resp3 {
            cmds.insert(0, vec![s("HELLO"), s("3")]);
        }
        for i in 0..3 {
            cmds.push(vec![s("RPUSH"), format!("l{i}"), s("a")]);
            cmds.push(vec![s("HSET"), format!("h{i}"), s("f"), s("v")]);
        }
        while cmds.len() < steps {
            if r.below(15) != 0 {
                cmds.push(differential::bits_and_ranges(&mut r));
                continue;
            }
            if r.below(2) == 0 {
                cmds.push(vec![s("WATCH"), format!("s{}", r.below(3))]);
                for _ in 0..r.below(2) {
                    cmds.push(differential::bits_and_ranges(&mut r));
                }
            }
            cmds.push(vec![s("MULTI")]);
            for _ in 0..1 + r.below(4) {
                cmds.push(differential::bits_and_ranges(&mut r));
            }
            cmds.push(vec![s(r.pick(&["EXEC", "EXEC", "DISCARD"]))]);
        }
        for i in 0..3 {
            cmds.push(vec![s("GET"), format!("s{i}")]);
        }
        let (compared, bad, lines) = differential::compare(redis_addr, group.leader(), &cmds, 20);
        println!("run {run} (resp3 {resp3}): {compared} compared, {bad} differ");
        assert!(
            bad == 0,
            "seed {seed}: {bad} replies differ:\n{}",
            lines.join("\n")
        );
        group.assert_identical();
    }
}

/// Which writes the leader answers without a log entry, and with what.
#[test]
fn writes_answered_unchanged() {
    let mut st = Store::new();
    for (t, line) in ["SETBIT big 80000 1", "SET s abc", "RPUSH l a"]
        .iter()
        .enumerate()
    {
        execute_local(&mut st, &words(line), T0 + t as u64);
    }
    let int = |n: i64| Some(Reply::Integer(n));
    let arr = |v: Vec<Reply>| Some(Reply::Array(Some(v)));
    let offset_err = Some(Reply::err(
        "ERR bit offset is not an integer or out of range",
    ));
    let cases: Vec<(&str, Option<Reply>)> = vec![
        ("SETBIT big 80000 1", int(1)),
        ("SETBIT big 80000 0", None),
        ("SETBIT big 80008 0", None),
        ("SETBIT nokey 0 0", None),
        ("SETBIT l 0 0", None),
        ("SETBIT s 4294967296 1", offset_err.clone()),
        ("SETBIT l 4294967296 1", offset_err.clone()),
        ("BITFIELD big SET u8 10000 0", arr(vec![Reply::Integer(0)])),
        ("BITFIELD big SET u8 10000 1", None),
        ("BITFIELD big SET u8 0 0 SET u8 79000 0", None),
        (
            "BITFIELD big SET u8 0 0 SET u8 9000 0",
            arr(vec![Reply::Integer(0), Reply::Integer(0)]),
        ),
        ("BITFIELD big SET u8 80001 0", None),
        (
            "BITFIELD big GET u8 80000 GET u8 4000000",
            arr(vec![Reply::Integer(128), Reply::Integer(0)]),
        ),
        ("BITFIELD nokey GET u8 0", arr(vec![Reply::Integer(0)])),
        ("BITFIELD nokey SET u8 0 0", None),
        ("BITFIELD l GET u8 0", None),
        ("BITFIELD s GET u8 4294967296", offset_err),
        ("SETRANGE s 1 \"\"", int(3)),
        ("SETRANGE nokey 1 \"\"", int(0)),
        ("SETRANGE s 0 a", None),
        (
            "SETRANGE s 536870912 a",
            Some(Reply::err(
                "ERR string exceeds maximum allowed size (proto-max-bulk-len)",
            )),
        ),
        ("SETRANGE l 0 \"\"", None),
        ("BITOP AND nokey nokey2", int(0)),
        ("BITOP AND s nokey", None),
        ("BITOP AND nokey s", None),
    ];
    for (line, want) in cases {
        assert_eq!(
            xlane_kv::cmd::unchanged_reply(&st, &words(line)),
            want,
            "{line}"
        );
    }
}
