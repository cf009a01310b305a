//! Table-driven tests of the stream commands' wiring: parsing, replies
//! (as redis-server 7.0.15 gave them for the same sessions), keyspace
//! events and versions, the time of `*` IDs, the blocking hooks
//! (`block_info`, `pin_block_ids`, `unchanged_reply`), replication and
//! snapshots.

use crate::exec::execute_local;
use crate::exec::Apply;
use crate::notify::NotifyFlags;
use crate::op::{WriteCmd, WriteOp};
use crate::resp::{split_inline, Reply};
use crate::store::Store;

const T0: u64 = 1_700_000_000_000;

fn i(v: i64) -> Reply {
    Reply::Integer(v)
}
fn b(s: &str) -> Reply {
    Reply::bulk(s)
}
fn e(s: &str) -> Reply {
    Reply::err(s)
}
fn arr(v: Vec<Reply>) -> Reply {
    Reply::Array(Some(v))
}
fn nil_arr() -> Reply {
    Reply::Array(None)
}
/// `[id, [f, v, ...]]`.
fn ent(id: &str, fv: &[&str]) -> Reply {
    arr(vec![b(id), arr(fv.iter().map(|s| b(s)).collect())])
}
fn words(l: &str) -> Vec<Vec<u8>> {
    split_inline(l.as_bytes()).expect("test line parses")
}

/// Runs each `(clock, line, reply)` in order on one store.
fn session(name: &str, s: &mut Store, table: &[(u64, &str, Reply)]) {
    for (n, (t, line, want)) in table.iter().enumerate() {
        let got = execute_local(s, &words(line), *t);
        assert_eq!(&got, want, "{name}: step {n}: {line}");
    }
}

#[test]
fn stream_basics_reply_as_redis() {
    let mut s = Store::new();
    let wrong = "WRONGTYPE Operation against a key holding the wrong kind of value";
    session(
        "basics",
        &mut s,
        &[
            (T0, "XADD s 1-1 a 1 b 2", b("1-1")),
            (
                T0,
                "XADD s 1-1 a 1",
                e("ERR The ID specified in XADD is equal or smaller than the target stream top item"),
            ),
            (T0, "XADD s 2 a 3", b("2-0")),
            (T0, "XLEN s", i(2)),
            (T0, "TYPE s", Reply::Simple("stream".into())),
            (T0, "OBJECT ENCODING s", b("stream")),
            (
                T0,
                "XRANGE s - +",
                arr(vec![ent("1-1", &["a", "1", "b", "2"]), ent("2-0", &["a", "3"])]),
            ),
            (T0, "XREVRANGE s + - COUNT 1", arr(vec![ent("2-0", &["a", "3"])])),
            (T0, "XRANGE s - + COUNT 0", nil_arr()),
            (T0, "XDEL s 1-1 9-9", i(1)),
            (T0, "XTRIM s MAXLEN 0", i(1)),
            (T0, "XLEN s", i(0)),
            // An empty stream stays a key.
            (T0, "EXISTS s", i(1)),
            (T0, "XADD s NOMKSTREAM 3 a 1", b("3-0")),
            (T0, "XADD nope NOMKSTREAM 3 a 1", Reply::nil()),
            (T0, "EXISTS nope", i(0)),
            (T0, "SET str x", Reply::ok()),
            (T0, "XADD str 1 a 1", e(wrong)),
            (T0, "XLEN str", e(wrong)),
            (T0, "XLEN nope", i(0)),
            (T0, "XREAD STREAMS s 0", arr(vec![arr(vec![b("s"), arr(vec![ent("3-0", &["a", "1"])])])])),
            (T0, "XADD s 5-0 f v", b("5-0")),
            (
                T0,
                "XREAD COUNT 1 STREAMS s nope 0 0",
                arr(vec![arr(vec![b("s"), arr(vec![ent("3-0", &["a", "1"])])])]),
            ),
            (T0, "XREAD STREAMS s $", nil_arr()),
            (T0, "XREAD STREAMS str 0", e(wrong)),
            (
                T0,
                "XADD s MAXLEN 1 MINID 1 * a 1",
                e("ERR syntax error, MAXLEN and MINID options at the same time are not compatible"),
            ),
            (
                T0,
                "XADD s a",
                e("ERR wrong number of arguments for 'xadd' command"),
            ),
        ],
    );
}

#[test]
fn auto_ids_come_from_the_op_clock_and_never_go_back() {
    let mut s = Store::new();
    session(
        "auto ids",
        &mut s,
        &[
            (T0, "XADD s * a 1", b(&format!("{T0}-0"))),
            (T0, "XADD s * a 2", b(&format!("{T0}-1"))),
            (T0 + 5, "XADD s * a 3", b(&format!("{}-0", T0 + 5))),
            // A leader whose clock is behind: the last ID's successor.
            (T0 - 1000, "XADD s * a 4", b(&format!("{}-1", T0 + 5))),
            (T0, "XADD s 9999999999999-5 a 5", b("9999999999999-5")),
            (T0 + 6, "XADD s * a 6", b("9999999999999-6")),
        ],
    );
}

#[test]
fn consumer_groups_reply_as_redis() {
    let mut s = Store::new();
    session(
        "groups",
        &mut s,
        &[
            (T0, "XADD s 3-0 a 1", b("3-0")),
            (T0, "XADD s 5-0 f v", b("5-0")),
            (T0, "XGROUP CREATE s g 0", Reply::ok()),
            (
                T0,
                "XGROUP CREATE s g 0",
                e("BUSYGROUP Consumer Group name already exists"),
            ),
            (
                T0,
                "XGROUP CREATE nokey g $",
                e("ERR The XGROUP subcommand requires the key to exist. Note that for CREATE you may want to use the MKSTREAM option to create an empty stream automatically."),
            ),
            (T0, "XGROUP CREATE mk g $ MKSTREAM", Reply::ok()),
            (T0, "TYPE mk", Reply::Simple("stream".into())),
            (
                T0 + 10,
                "XREADGROUP GROUP g c STREAMS s >",
                arr(vec![arr(vec![
                    b("s"),
                    arr(vec![ent("3-0", &["a", "1"]), ent("5-0", &["f", "v"])]),
                ])]),
            ),
            (T0 + 10, "XREADGROUP GROUP g c STREAMS s >", nil_arr()),
            (
                T0 + 10,
                "XREADGROUP GROUP nog c STREAMS s >",
                e("NOGROUP No such key 's' or consumer group 'nog' in XREADGROUP with GROUP option"),
            ),
            (
                T0 + 20,
                "XPENDING s g",
                arr(vec![
                    i(2),
                    b("3-0"),
                    b("5-0"),
                    arr(vec![arr(vec![b("c"), b("2")])]),
                ]),
            ),
            (
                T0 + 30,
                "XPENDING s g - + 10",
                arr(vec![
                    arr(vec![b("3-0"), b("c"), i(20), i(1)]),
                    arr(vec![b("5-0"), b("c"), i(20), i(1)]),
                ]),
            ),
            (
                T0 + 40,
                "XCLAIM s g d 15 3-0 JUSTID",
                arr(vec![b("3-0")]),
            ),
            (T0 + 40, "XACK s g 5-0 6-0", i(1)),
            (T0 + 40, "XACK s g 5-0", i(0)),
            (
                T0 + 40,
                "XAUTOCLAIM s g c 0 0 COUNT 10 JUSTID",
                arr(vec![b("0-0"), arr(vec![b("3-0")]), arr(vec![])]),
            ),
            (T0, "XGROUP CREATECONSUMER s g c", i(0)),
            (T0, "XGROUP CREATECONSUMER s g e", i(1)),
            (T0, "XGROUP DELCONSUMER s g c", i(1)),
            (T0, "XGROUP DESTROY s g", i(1)),
            (T0, "XGROUP DESTROY s g", i(0)),
            (T0, "XINFO GROUPS s", arr(vec![])),
            (T0, "XSETID s 9-0", Reply::ok()),
            (
                T0,
                "XSETID s 1-0",
                e("ERR The ID specified in XSETID is smaller than the target stream top item"),
            ),
            (
                T0,
                "XINFO STREAM nokey",
                e("ERR no such key"),
            ),
            (
                T0,
                "XGROUP FOO",
                e("ERR unknown subcommand 'FOO'. Try XGROUP HELP."),
            ),
        ],
    );
}

#[test]
fn xinfo_stream_is_a_map() {
    let mut s = Store::new();
    for l in [
        "XADD s 1-1 a 1 b 2",
        "XADD s 2 a 3",
        "XDEL s 1-1",
        "XSETID s 9-0",
    ] {
        execute_local(&mut s, &words(l), T0);
    }
    let got = execute_local(&mut s, &words("XINFO STREAM s"), T0);
    let want = Reply::Map(vec![
        (b("length"), i(1)),
        (b("radix-tree-keys"), i(1)),
        (b("radix-tree-nodes"), i(2)),
        (b("last-generated-id"), b("9-0")),
        (b("max-deleted-entry-id"), b("1-1")),
        (b("entries-added"), i(2)),
        (b("recorded-first-entry-id"), b("2-0")),
        (b("groups"), i(0)),
        (b("first-entry"), ent("2-0", &["a", "3"])),
        (b("last-entry"), ent("2-0", &["a", "3"])),
    ]);
    assert_eq!(got, want);
}

/// Each write's keyspace events (class `t`) and whether it moves the
/// key's version (what `WATCH` sees), as Redis 7.0.
#[test]
fn events_and_versions_follow_redis() {
    let mut s = Store::new();
    s.set_notifications(NotifyFlags::parse(b"KEA").expect("flags"));
    s.set_subscribers(true);
    let table: &[(&str, &[&str], bool)] = &[
        ("XADD s 1 a 1", &["xadd"], true),
        ("XADD s MAXLEN 1 2 a 1", &["xadd", "xtrim"], true),
        ("XGROUP CREATE s g 0", &["xgroup-create"], false),
        (
            "XREADGROUP GROUP g c STREAMS s >",
            &["xgroup-createconsumer"],
            false,
        ),
        ("XREADGROUP GROUP g c STREAMS s >", &[], false),
        ("XACK s g 2-0", &[], false),
        (
            "XGROUP CREATECONSUMER s g d",
            &["xgroup-createconsumer"],
            false,
        ),
        ("XGROUP DELCONSUMER s g d", &["xgroup-delconsumer"], false),
        ("XGROUP SETID s g 0", &["xgroup-setid"], false),
        ("XGROUP DESTROY s g", &["xgroup-destroy"], false),
        ("XDEL s 2-0", &["xdel"], true),
        ("XDEL s 2-0", &[], false),
        ("XADD s 3 a 1", &["xadd"], true),
        ("XTRIM s MAXLEN 0", &["xtrim"], true),
        ("XSETID s 5", &["xsetid"], false),
        ("XGROUP CREATE t g $ MKSTREAM", &["xgroup-create"], true),
    ];
    for (n, (line, events, moves)) in table.iter().enumerate() {
        let key: &[u8] = if line.contains(" t ") { b"t" } else { b"s" };
        let before = s.version(key, T0);
        let r = execute_local(&mut s, &words(line), T0 + n as u64);
        assert!(!r.is_error(), "{line}: {r:?}");
        let got: Vec<String> = s
            .drain_events()
            .filter(|ev| ev.key.as_slice() == key)
            .map(|ev| ev.event.to_string())
            .collect();
        assert_eq!(got, *events, "step {n}: {line}");
        assert_eq!(
            s.version(key, T0) != before,
            *moves,
            "step {n}: {line} version"
        );
    }
}

#[test]
fn xread_block_is_a_blocking_write() {
    let mut s = Store::new();
    execute_local(&mut s, &words("XADD s 1-0 a 1"), T0);
    execute_local(&mut s, &words("XGROUP CREATE s g $"), T0);
    // Classified: a write (the leader's blocking path) only with BLOCK.
    for (line, want) in [
        ("XREAD STREAMS s 0", Ok(false)),
        ("XREAD BLOCK 0 STREAMS s 0", Ok(true)),
        ("XREADGROUP GROUP g c STREAMS s >", Ok(true)),
        ("XGROUP HELP", Ok(false)),
        ("XGROUP DESTROY s g", Ok(true)),
        ("XINFO STREAM s", Ok(false)),
    ] {
        assert_eq!(
            super::check(&words(line))
                .expect("runs here")
                .map(|(write, _)| write),
            want,
            "{line}"
        );
    }

    let bi = super::block_info(&words("XREAD COUNT 2 BLOCK 1500 STREAMS s t $ 0")).expect("blocks");
    assert_eq!(bi.keys, vec![b"s".to_vec(), b"t".to_vec()]);
    assert_eq!(bi.timeout, Some(std::time::Duration::from_millis(1500)));
    assert_eq!(bi.nothing, nil_arr());
    let bi = super::block_info(&words("XREADGROUP GROUP streams c BLOCK 0 STREAMS s >"))
        .expect("blocks");
    assert_eq!(bi.keys, vec![b"s".to_vec()]);
    assert_eq!(bi.timeout, None);
    assert!(super::block_info(&words("XREAD STREAMS s 0")).is_none());
    // History never blocks.
    assert!(super::block_info(&words("XREADGROUP GROUP g c BLOCK 0 STREAMS s 0")).is_none());
    assert_eq!(
        super::keys_of(&words("XREADGROUP GROUP streams streams STREAMS a b > >")),
        Some(vec![5, 6])
    );

    // `$` pinned to the last ID as the client blocks (0-0 for a missing key).
    let mut w = words("XREAD BLOCK 0 STREAMS s nokey s $ $ 0");
    super::pin_block_ids(&s, &mut w);
    assert_eq!(w, words("XREAD BLOCK 0 STREAMS s nokey s 1-0 0-0 0"));
    let mut w = words("XREAD STREAMS s $");
    super::pin_block_ids(&s, &mut w);
    assert_eq!(w, words("XREAD STREAMS s $"));

    // Nothing to give: the nothing reply without a log entry; something:
    // proposed.
    let un = |s: &Store, l: &str| super::unchanged_reply(s, &words(l));
    assert_eq!(un(&s, "XREAD BLOCK 0 STREAMS s 1-0"), Some(nil_arr()));
    assert_eq!(un(&s, "XREAD BLOCK 0 STREAMS s 0"), None);
    assert_eq!(
        un(&s, "XREADGROUP GROUP g c BLOCK 0 STREAMS s >"),
        Some(nil_arr())
    );
    assert_eq!(un(&s, "XREADGROUP GROUP g c STREAMS s >"), Some(nil_arr()));
    assert_eq!(un(&s, "XREADGROUP GROUP g c STREAMS s 0"), None);
    assert_eq!(un(&s, "XACK s g 1-0"), Some(i(0)));
    assert_eq!(un(&s, "XDEL s 7-0"), Some(i(0)));
    assert_eq!(un(&s, "XDEL s 1-0"), None);
    assert_eq!(un(&s, "XGROUP DESTROY s nog"), Some(i(0)));
    assert_eq!(un(&s, "XADD nokey NOMKSTREAM 1 a 1"), Some(Reply::nil()));

    // An XREADGROUP that would wait gets its BLOCK word marked; one that
    // errs or has something to take does not.
    let waiting = |s: &Store, l: &str| {
        let mut w = words(l);
        super::pin_block_ids(s, &mut w);
        w
    };
    let marked = waiting(&s, "XREADGROUP GROUP g block block 0 STREAMS s >");
    assert_eq!(marked[4], super::stream::WAITED.to_vec());
    assert_eq!(marked[3], b"block".to_vec());
    assert_eq!(
        super::block_info(&marked).map(|b| b.keys),
        Some(vec![b"s".to_vec()])
    );
    let unmarked = words("XREADGROUP GROUP nog c BLOCK 0 STREAMS s >");
    assert_eq!(
        waiting(&s, "XREADGROUP GROUP nog c BLOCK 0 STREAMS s >"),
        unmarked
    );
    execute_local(&mut s, &words("XADD s 2-0 a 1"), T0);
    assert_eq!(un(&s, "XREAD BLOCK 0 STREAMS s 1-0"), None);
    assert_eq!(un(&s, "XREADGROUP GROUP g c BLOCK 0 STREAMS s >"), None);
    let unmarked = words("XREADGROUP GROUP g c BLOCK 0 STREAMS s >");
    assert_eq!(
        waiting(&s, "XREADGROUP GROUP g c BLOCK 0 STREAMS s >"),
        unmarked
    );

    // A waiting XREADGROUP whose group or key went is served, with
    // Redis's errors; a new one gets the usual NOGROUP at once.
    let mut s2 = s.frozen();
    execute_local(&mut s2, &words("XGROUP DESTROY s g"), T0);
    assert_eq!(super::unchanged_reply(&s2, &marked), None);
    assert_eq!(
        execute_local(&mut s2, &marked, T0),
        e("NOGROUP the consumer group this client was blocked on no longer exists")
    );
    execute_local(&mut s, &words("DEL s"), T0);
    assert_eq!(super::unchanged_reply(&s, &marked), None);
    assert_eq!(
        execute_local(&mut s, &marked, T0),
        e("UNBLOCKED the stream key no longer exists")
    );
    assert_eq!(
        un(&s, "XREADGROUP GROUP g c BLOCK 0 STREAMS s >"),
        Some(e(
            "NOGROUP No such key 's' or consumer group 'g' in XREADGROUP with GROUP option"
        ))
    );
    // Run (as a waiter served, or inside MULTI): a plain read.
    assert_eq!(
        execute_local(&mut s, &words("XREAD BLOCK 0 STREAMS nokey 0"), T0),
        nil_arr()
    );
}

/// The same ops on two stores give the same bytes; a snapshot with
/// streams reads back equal; DUMP/RESTORE moves a stream whole.
#[test]
fn streams_replicate_and_snapshot() {
    let script = [
        "XADD s * a 1 b 2",
        "XADD s * a 3",
        "XADD s * c 4",
        "XGROUP CREATE s g 0",
        "XREADGROUP GROUP g alice COUNT 2 STREAMS s >",
        "XGROUP CREATE s h $ ENTRIESREAD 3",
        "XDEL s 0-1",
        "XADD s MAXLEN ~ 1 * d 5",
        "XCLAIM s g bob 0 0-1",
        "XGROUP CREATECONSUMER s g carol",
        "XADD s * e 6",
        "XADD s * e 7",
    ];
    let mut a = Store::new();
    let mut c = Store::new();
    let cfg = WriteOp::new(
        T0,
        WriteCmd::SetConfig {
            pairs: vec![(b"stream-node-max-entries".to_vec(), b"2".to_vec())],
        },
    );
    a.apply(&cfg);
    c.apply(&cfg);
    for (n, l) in script.iter().enumerate() {
        let op = WriteOp::new(
            T0 + n as u64,
            WriteCmd::Data {
                args: words(l),
                seed: n as u64,
            },
        );
        let bytes = op.encode();
        let decoded = WriteOp::decode(&bytes).expect("op decodes");
        let ra = a.apply(&op);
        let rc = c.apply(&decoded);
        assert_eq!(ra, rc, "{l}");
    }
    assert_eq!(a.snapshot(), c.snapshot());
    assert_eq!(a.data_config().stream_node_max_entries, 2);
    let back = Store::restore(&a.snapshot()).expect("snapshot restores");
    assert_eq!(back.snapshot(), a.snapshot());
    assert_eq!(back.value(b"s", T0), a.value(b"s", T0));

    let dump = execute_local(&mut a, &words("DUMP s"), T0);
    let Reply::Bulk(Some(payload)) = dump else {
        panic!("DUMP: {dump:?}");
    };
    let mut args = words("RESTORE t 0 x");
    args[3] = payload;
    assert_eq!(execute_local(&mut a, &args, T0), Reply::ok());
    assert_eq!(a.value(b"t", T0), a.value(b"s", T0));
    assert_eq!(
        execute_local(&mut a, &words("XINFO STREAM t FULL"), T0 + 99),
        execute_local(&mut a, &words("XINFO STREAM s FULL"), T0 + 99)
    );
}
