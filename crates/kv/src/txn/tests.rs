//! Transactions, table-driven: each row is a request on one connection and
//! the reply it gets (EXEC's from a store that applies the op).

use super::*;
use crate::exec::Apply;
use crate::resp::split_inline;
use crate::store::Store;
use crate::value::ERR_WRONGTYPE;

fn ok() -> Reply {
    Reply::ok()
}
fn q() -> Reply {
    Reply::Simple("QUEUED".into())
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
fn arr(v: Vec<Reply>) -> Reply {
    Reply::Array(Some(v))
}

/// One connection (`c` 0) and another (`c` 1) on one store.
fn run(name: &str, table: &[(usize, &str, Reply)]) {
    let mut store = Store::new();
    let mut txns = [Txn::default(), Txn::default()];
    for (n, (c, line, want)) in table.iter().enumerate() {
        let args = split_inline(line.as_bytes()).expect("parses");
        let now = 1_700_000_000_000 + n as u64;
        let got = match txns[*c].step(&args, now) {
            Step::Pass => crate::exec::execute_local(&mut store, &args, now),
            Step::Reply(r) => r,
            Step::Watch(keys) => {
                let v = keys
                    .into_iter()
                    .map(|k| {
                        let v = store.version(&k, now);
                        (k, v)
                    })
                    .collect();
                txns[*c].watch(v);
                ok()
            }
            Step::Exec(op) => {
                let wire = op.encode();
                assert_eq!(WriteOp::decode(&wire).as_ref(), Ok(&op), "{name}: {line}");
                store.apply(&op)
            }
        };
        assert_eq!(&got, want, "{name}: step {n}: {line}");
    }
}

#[test]
fn multi_exec_discard() {
    run(
        "multi",
        &[
            (0, "EXEC", e("ERR EXEC without MULTI")),
            (0, "DISCARD", e("ERR DISCARD without MULTI")),
            (0, "MULTI", ok()),
            (0, "MULTI", e("ERR MULTI calls can not be nested")),
            (0, "SET a 1", q()),
            (0, "INCR a", q()),
            (0, "GET a", q()),
            (0, "HSET a f v", q()),
            (0, "PING", q()),
            (
                0,
                "EXEC",
                arr(vec![
                    ok(),
                    i(2),
                    b("2"),
                    e(ERR_WRONGTYPE),
                    Reply::Simple("PONG".into()),
                ]),
            ),
            (0, "MULTI", ok()),
            (0, "SET a 5", q()),
            (0, "DISCARD", ok()),
            (0, "GET a", b("2")),
            (0, "MULTI", ok()),
            (0, "EXEC", arr(vec![])),
        ],
    );
}

#[test]
fn errors_before_exec_abort_it() {
    run(
        "execabort",
        &[
            (0, "MULTI", ok()),
            (0, "SET a 1", q()),
            (
                0,
                "NOPE x",
                e("ERR unknown command 'NOPE', with args beginning with: 'x' "),
            ),
            (
                0,
                "GET",
                e("ERR wrong number of arguments for 'get' command"),
            ),
            (0, "ZADD z NX XX 1 a", q()),
            (
                0,
                "SUBSCRIBE ch",
                e("ERR Command not allowed inside a transaction"),
            ),
            (0, "SAVE", e("ERR Command not allowed inside a transaction")),
            (
                0,
                "SHUTDOWN",
                e("ERR Command not allowed inside a transaction"),
            ),
            (0, "EXEC", e(ERR_EXECABORT)),
            (0, "GET a", Reply::nil()),
            (0, "MULTI", ok()),
            (0, "WATCH a", e("ERR WATCH inside MULTI is not allowed")),
            (0, "EXEC", arr(vec![])),
        ],
    );
}

#[test]
fn watch_aborts_when_a_watched_key_changes() {
    run(
        "watch",
        &[
            (0, "SET a 1", ok()),
            (0, "WATCH a b", ok()),
            (1, "SET a 2", ok()),
            (0, "MULTI", ok()),
            (0, "SET a 3", q()),
            (0, "EXEC", Reply::Array(None)),
            (0, "GET a", b("2")),
            // The watch is gone after EXEC.
            (0, "MULTI", ok()),
            (0, "SET a 3", q()),
            (0, "EXEC", arr(vec![ok()])),
            // A key that appears aborts too; UNWATCH forgets.
            (0, "WATCH b", ok()),
            (1, "SET b 1", ok()),
            (0, "UNWATCH", ok()),
            (0, "MULTI", ok()),
            (0, "GET b", q()),
            (0, "EXEC", arr(vec![b("1")])),
            (0, "WATCH b", ok()),
            (1, "DEL b", i(1)),
            (0, "MULTI", ok()),
            (0, "UNWATCH", q()),
            (0, "EXEC", Reply::Array(None)),
            // Unchanged keys let it through.
            (0, "WATCH a", ok()),
            (1, "GET a", b("3")),
            (0, "MULTI", ok()),
            (0, "INCR a", q()),
            (0, "SET a 1 NX XX", q()),
            (0, "INCRBY a x", q()),
            (
                0,
                "EXEC",
                arr(vec![
                    i(4),
                    e("ERR syntax error"),
                    e("ERR value is not an integer or out of range"),
                ]),
            ),
        ],
    );
}

/// Redis marks a watched key touched by any change, even one that leaves
/// it as it was (created then deleted, deleted then recreated, expired);
/// a command that changes nothing touches nothing. Each row: the steps
/// between `WATCH k` (connection 0) and `EXEC` of `MULTI; SET w 1`, and
/// whether `EXEC` aborts.
#[test]
fn watch_sees_every_touch_of_its_key() {
    let rows: &[(&str, &[&str], &[&str], bool)] = &[
        ("untouched, absent", &[], &[], false),
        ("untouched, present", &["SET k 1"], &[], false),
        ("created", &[], &["SET k 1"], true),
        ("created then deleted", &[], &["SET k 1", "DEL k"], true),
        (
            "deleted then recreated",
            &["SET k 1"],
            &["DEL k", "SET k 1"],
            true,
        ),
        ("set to the same value", &["SET k 1"], &["SET k 1"], true),
        ("another key deleted", &["SET x 1"], &["DEL x"], false),
        (
            "collection created and emptied",
            &[],
            &["SADD k a", "SREM k a"],
            true,
        ),
        ("member already there", &["SADD k a"], &["SADD k a"], false),
        ("delete of an absent key", &[], &["DEL k"], false),
        ("flush, key absent", &["SET x 1"], &["FLUSHDB"], false),
        ("flush, key present", &["SET k 1"], &["FLUSHDB"], true),
        // Each step is 1 ms later: PX 1 expires before the next.
        ("expires", &["SET k 1 PX 2"], &["SET x 1", "SET x 2"], true),
        ("expiry set", &["SET k 1"], &["PEXPIRE k 100000"], true),
        (
            "created with an expiry that passes",
            &[],
            &["SET k 1 PX 1", "SET x 1"],
            true,
        ),
        // "+n": n ms pass with no op (the clock of the applied state stays
        // behind the watcher's): Redis's "stale" watched keys.
        (
            "watched already expired, removed by its expiry",
            &["SET k 1 PX 1", "+3"],
            &["SET x 1"],
            false,
        ),
        (
            "watched already expired, then a flush",
            &["SET k 1 PX 1", "+3"],
            &["FLUSHDB"],
            false,
        ),
        (
            "watched already expired, then set again",
            &["SET k 1 PX 1", "+3"],
            &["SET k 2"],
            true,
        ),
        (
            "watched alive, expires before EXEC",
            &["SET k 1 PX 3"],
            &["+5"],
            true,
        ),
    ];
    for (name, before, between, aborts) in rows {
        let mut store = Store::new();
        let mut now = 1_700_000_000_000u64;
        let exec = |store: &mut Store, line: &str, now: &mut u64| {
            if let Some(ms) = line.strip_prefix('+') {
                *now += ms.parse::<u64>().expect("a wait in ms");
                return;
            }
            *now += 1;
            let args = split_inline(line.as_bytes()).expect("parses");
            crate::exec::execute_local(store, &args, *now);
        };
        for l in *before {
            exec(&mut store, l, &mut now);
        }
        let mut txn = Txn::default();
        txn.watch(vec![(b"k".to_vec(), store.version(b"k", now))]);
        for l in *between {
            exec(&mut store, l, &mut now);
        }
        now += 1;
        for l in ["MULTI", "SET w 1"] {
            txn.step(&split_inline(l.as_bytes()).expect("parses"), now);
        }
        let Step::Exec(op) = txn.step(&split_inline(b"EXEC").expect("parses"), now) else {
            panic!("{name}: EXEC is an op");
        };
        let want = match aborts {
            true => Reply::Array(None),
            false => arr(vec![ok()]),
        };
        assert_eq!(store.apply(&op), want, "{name}");
    }
}

/// `maxmemory` exceeded: commands that may grow memory are refused, queued
/// ones fail `EXEC`, and an `EXEC` holding one is refused (Redis'
/// `noeviction`); reads pass.
#[test]
fn oom_refuses_what_may_grow_memory() {
    const OOM: &str = "OOM command not allowed when used memory > 'maxmemory'.";
    let words = |s: &str| -> Command { s.split(' ').map(|w| w.as_bytes().to_vec()).collect() };
    // (command, over maxmemory, refused with)
    let table: &[(&str, bool, Option<String>)] = &[
        ("SET a 1", false, None),
        ("SET a 1", true, Some(OOM.to_string())),
        ("GET a", true, None),
        ("DEL a", true, None),
        ("LPUSH l x", true, Some(OOM.to_string())),
    ];
    for (cmd, over, want) in table {
        let mut t = Txn::default();
        let got = t.oom_gate(&words(cmd), *over);
        assert_eq!(
            got,
            want.as_ref().map(|m| Reply::err(m.clone())),
            "{cmd} over={over}"
        );
    }
    // Queued while over: EXEC aborts.
    let mut t = Txn::default();
    assert_eq!(t.step(&words("MULTI"), 0), Step::Reply(ok()));
    assert_eq!(t.oom_gate(&words("SET a 1"), true), Some(Reply::err(OOM)));
    assert!(matches!(t.step(&words("EXEC"), 0), Step::Reply(r) if r == e(ERR_EXECABORT)));
    // Queued before, EXEC while over: refused, the transaction discarded.
    let mut t = Txn::default();
    assert_eq!(t.step(&words("MULTI"), 0), Step::Reply(ok()));
    assert_eq!(t.step(&words("SET a 1"), 0), Step::Reply(q()));
    assert_eq!(t.oom_gate(&words("GET a"), true), None);
    assert_eq!(
        t.oom_gate(&words("EXEC"), true),
        Some(Reply::err(format!(
            "EXECABORT Transaction discarded because of: {OOM}"
        )))
    );
    assert!(!t.in_multi());
    // Only reads queued: EXEC runs while over.
    let mut t = Txn::default();
    assert_eq!(t.step(&words("MULTI"), 0), Step::Reply(ok()));
    assert_eq!(t.step(&words("GET a"), 0), Step::Reply(q()));
    assert_eq!(t.oom_gate(&words("EXEC"), true), None);
}

/// A `CONFIG SET` that cannot succeed is queued and fails inside `EXEC`
/// (Redis runs it there); the other commands run.
#[test]
fn config_set_error_inside_exec() {
    run(
        "config",
        &[
            (0, "MULTI", ok()),
            (0, "SET foo bar", q()),
            (0, "CONFIG SET maxmemory bla", q()),
            (
                0,
                "EXEC",
                arr(vec![
                    ok(),
                    e("ERR CONFIG SET failed (possibly related to argument 'maxmemory') - argument must be a memory value"),
                ]),
            ),
            (0, "GET foo", b("bar")),
        ],
    );
}
