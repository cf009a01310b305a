//! Table-driven tests of every command against the store, with Redis 7's
//! replies. Each table is one session: (clock ms, inline request, reply).

use super::*;
use crate::exec::{execute_local, Apply};
use crate::members::Peer;
use crate::op::tests::arb_op;
use crate::resp::split_inline;
use proptest::prelude::*;

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
fn arr(v: Vec<Reply>) -> Reply {
    Reply::Array(Some(v))
}

const T0: u64 = 1_700_000_000_000;

fn run(name: &str, table: &[(u64, &str, Reply)]) {
    let mut s = Store::new();
    for (n, (dt, line, want)) in table.iter().enumerate() {
        let args = split_inline(line.as_bytes()).expect("test line parses");
        let got = execute_local(&mut s, &args, T0 + dt);
        assert_eq!(&got, want, "{name}: step {n}: {line}");
    }
}

#[test]
fn strings() {
    run(
        "strings",
        &[
            (0, "GET a", nil()),
            (0, "SET a 1", ok()),
            (0, "get a", b("1")),
            (0, "SET a 2 NX", nil()),
            (0, "SET b 2 XX", nil()),
            (0, "SET b 2 NX", ok()),
            (0, "SET b 3 XX", ok()),
            (0, "SET b 4 XX GET", b("3")),
            (0, "SET c 4 GET", nil()),
            (0, "SET a 1 NX XX", e(ERR_SYNTAX)),
            (0, "SET a 1 FOO", e(ERR_SYNTAX)),
            (0, "SET a 1 EX", e(ERR_SYNTAX)),
            (0, "SET a 1 EX 10 PX 100", e(ERR_SYNTAX)),
            (
                0,
                "SET a 1 EX x",
                e("ERR value is not an integer or out of range"),
            ),
            (
                0,
                "SET a 1 EX 0",
                e("ERR invalid expire time in 'set' command"),
            ),
            (
                0,
                "SET a 1 PX -5",
                e("ERR invalid expire time in 'set' command"),
            ),
            (
                0,
                "SET a 1 EX 9223372036854775807",
                e("ERR invalid expire time in 'set' command"),
            ),
            (
                0,
                "SET a",
                e("ERR wrong number of arguments for 'set' command"),
            ),
            (
                0,
                "GET",
                e("ERR wrong number of arguments for 'get' command"),
            ),
            (
                0,
                "GET a b",
                e("ERR wrong number of arguments for 'get' command"),
            ),
            (
                0,
                "MSET x 1 y",
                e("ERR wrong number of arguments for 'mset' command"),
            ),
            (0, "MSET x 1 y 2", ok()),
            (0, "MGET x nope y", arr(vec![b("1"), nil(), b("2")])),
            (0, "EXISTS x x nope y", i(3)),
            (0, "DEL x nope x", i(1)),
            (0, "APPEND x abc", i(3)),
            (0, "APPEND x de", i(5)),
            (0, "GET x", b("abcde")),
            (0, "STRLEN x", i(5)),
            (0, "STRLEN nope", i(0)),
            (0, "DBSIZE", i(5)),
            (0, "FLUSHDB", ok()),
            (0, "DBSIZE", i(0)),
            (0, "FLUSHDB bogus", e(ERR_SYNTAX)),
            (0, "SET \"\" empty", ok()),
            (0, "GET \"\"", b("empty")),
        ],
    );
}

#[test]
fn counters() {
    let max = i64::MAX.to_string();
    let set_max = format!("SET m {max}");
    run(
        "counters",
        &[
            (0, "INCR n", i(1)),
            (0, "INCR n", i(2)),
            (0, "DECR n", i(1)),
            (0, "INCRBY n 10", i(11)),
            (0, "INCRBY n -20", i(-9)),
            (0, "DECRBY n 1", i(-10)),
            (0, "DECR fresh", i(-1)),
            (
                0,
                "INCRBY n x",
                e("ERR value is not an integer or out of range"),
            ),
            (
                0,
                "INCRBY n 1.5",
                e("ERR value is not an integer or out of range"),
            ),
            (
                0,
                "DECRBY n -9223372036854775808",
                e("ERR decrement would overflow"),
            ),
            (0, "SET s abc", ok()),
            (
                0,
                "INCR s",
                e("ERR value is not an integer or out of range"),
            ),
            (0, "SET s \" 1\"", ok()),
            (
                0,
                "INCR s",
                e("ERR value is not an integer or out of range"),
            ),
            (0, "SET s 007", ok()),
            (
                0,
                "INCR s",
                e("ERR value is not an integer or out of range"),
            ),
            (0, &set_max, ok()),
            (0, "INCR m", e("ERR increment or decrement would overflow")),
            (0, "DECR m", i(i64::MAX - 1)),
            (0, "SET m -9223372036854775808", ok()),
            (0, "DECR m", e("ERR increment or decrement would overflow")),
            (
                0,
                "INCR a b",
                e("ERR wrong number of arguments for 'incr' command"),
            ),
        ],
    );
}

#[test]
fn expiry() {
    run(
        "expiry",
        &[
            (0, "TTL nope", i(-2)),
            (0, "SET k v", ok()),
            (0, "TTL k", i(-1)),
            (0, "SET k v EX 10", ok()),
            (0, "TTL k", i(10)),
            (0, "PTTL k", i(10_000)),
            (4_400, "TTL k", i(6)),
            (4_600, "TTL k", i(5)),
            (9_999, "GET k", b("v")),
            (10_000, "GET k", nil()),
            (10_000, "TTL k", i(-2)),
            (10_000, "EXISTS k", i(0)),
            (10_000, "DBSIZE", i(0)),
            // A relative expiry is absolute from the command's arrival.
            (20_000, "SET k v PX 1500", ok()),
            (21_000, "PTTL k", i(500)),
            (21_500, "GET k", nil()),
            // SET without KEEPTTL clears the TTL; INCR and APPEND keep it.
            (30_000, "SET k 1 EX 100", ok()),
            (30_000, "INCR k", i(2)),
            (30_000, "APPEND k 0", i(2)),
            (30_000, "TTL k", i(100)),
            (30_000, "SET k 5 KEEPTTL", ok()),
            (30_000, "TTL k", i(100)),
            (30_000, "SET k 5", ok()),
            (30_000, "TTL k", i(-1)),
            // EXPIRE.
            (30_000, "EXPIRE nope 10", i(0)),
            (30_000, "EXPIRE k 10", i(1)),
            (30_000, "TTL k", i(10)),
            (30_000, "PERSIST k", i(1)),
            (30_000, "PERSIST k", i(0)),
            (30_000, "TTL k", i(-1)),
            (30_000, "EXPIRE k 0", i(1)),
            (30_000, "EXISTS k", i(0)),
            (30_000, "SET k v", ok()),
            (30_000, "EXPIRE k -5", i(1)),
            (30_000, "GET k", nil()),
            (30_000, "SET k v", ok()),
            (30_000, "PEXPIRE k 250", i(1)),
            (30_000, "PTTL k", i(250)),
            (
                30_000,
                "EXPIRE k x",
                e("ERR value is not an integer or out of range"),
            ),
            (30_000, "EXPIRE k 10 NX", i(0)),
            (
                30_000,
                "EXPIRE k 10 NX XX",
                e("ERR NX and XX, GT or LT options at the same time are not compatible"),
            ),
            (
                30_000,
                "EXPIRE k 10 GT LT",
                e("ERR GT and LT options at the same time are not compatible"),
            ),
            (30_000, "EXPIRE k 10 FOO", e("ERR Unsupported option FOO")),
            (
                30_000,
                "EXPIRE k 9223372036854775807",
                e("ERR invalid expire time in 'expire' command"),
            ),
            (30_000, "EXPIREAT k 1", i(1)),
            (30_000, "EXISTS k", i(0)),
            // SET NX on an expired key succeeds.
            (40_000, "SET j v PX 10", ok()),
            (40_010, "SET j w NX", ok()),
            (40_010, "TTL j", i(-1)),
            // EXAT / PXAT are absolute.
            (50_000, "SET a v PXAT 1700000051000", ok()),
            (50_000, "PTTL a", i(1000)),
            (50_000, "SET a v EXAT 1", ok()),
            (50_000, "EXISTS a", i(0)),
            // INCR on an expired key starts from 0.
            (60_000, "SET c 41 PX 5", ok()),
            (60_005, "INCR c", i(1)),
        ],
    );
}

#[test]
fn connection_and_meta() {
    let many: String = (0..60).map(|n| format!("arg{n} ")).collect();
    let unknown = format!("FOO {many}");
    let mut want = String::from("ERR unknown command 'FOO', with args beginning with: ");
    let mut args = String::new();
    for n in 0..60 {
        if args.len() >= 128 {
            break;
        }
        let a = format!("arg{n}");
        let room = 128 - args.len();
        args.push_str(&format!("'{}' ", &a[..a.len().min(room)]));
    }
    want.push_str(&args);
    run(
        "meta",
        &[
            (0, "PING", Reply::Simple("PONG".into())),
            (0, "ping hi", b("hi")),
            (
                0,
                "PING a b",
                e("ERR wrong number of arguments for 'ping' command"),
            ),
            (0, "ECHO x", b("x")),
            (
                0,
                "ECHO",
                e("ERR wrong number of arguments for 'echo' command"),
            ),
            (
                0,
                "foo",
                e("ERR unknown command 'foo', with args beginning with: "),
            ),
            (
                0,
                "foo a b",
                e("ERR unknown command 'foo', with args beginning with: 'a' 'b' "),
            ),
            (0, &unknown, e(&want)),
            (0, "SELECT 0", ok()),
            (0, "SELECT 1", e("ERR DB index is out of range")),
            (0, "CONFIG GET save", arr(vec![b("save"), b("")])),
            (
                0,
                "CONFIG GET appendonly",
                arr(vec![b("appendonly"), b("no")]),
            ),
            (0, "CONFIG GET nothing", arr(vec![])),
            (
                0,
                "CONFIG GET",
                e("ERR wrong number of arguments for 'config|get' command"),
            ),
            (
                0,
                "CONFIG",
                e("ERR wrong number of arguments for 'config' command"),
            ),
            (
                0,
                "CONFIG bad",
                e("ERR unknown subcommand 'bad'. Try CONFIG HELP."),
            ),
            (0, "COMMAND COUNT", i(all_commands().count() as i64)),
            (
                0,
                "COMMAND DOCS get nope",
                Reply::Map(vec![(
                    b("get"),
                    Reply::Map(vec![
                        (b("summary"), b("")),
                        (b("since"), b("1.0.0")),
                        (b("group"), b("string")),
                    ]),
                )]),
            ),
            (
                0,
                "COMMAND INFO get nope",
                arr(vec![
                    arr(vec![
                        b("get"),
                        i(2),
                        arr(vec![
                            Reply::Simple("readonly".into()),
                            Reply::Simple("fast".into()),
                        ]),
                        i(1),
                        i(1),
                        i(1),
                        arr(vec![
                            Reply::Simple("@read".into()),
                            Reply::Simple("@string".into()),
                            Reply::Simple("@fast".into()),
                        ]),
                        arr(vec![]),
                        arr(vec![]),
                        arr(vec![]),
                    ]),
                    Reply::Array(None),
                ]),
            ),
            (0, "HELLO 3", e("NOPROTO unsupported protocol version")),
            (0, "QUIT", ok()),
        ],
    );
    let mut s = Store::new();
    let full = execute_local(&mut s, &vec![b"COMMAND".to_vec()], T0);
    assert!(matches!(full, Reply::Array(Some(ref v)) if v.len() == all_commands().count()));
    let info = execute_local(&mut s, &vec![b"INFO".to_vec()], T0);
    assert!(
        matches!(info, Reply::Verbatim(_, ref v) if v.starts_with("# Server\r\nredis_version:"))
    );
}

/// `RAFT.NODE` and `RAFT.NODES`: what parses, and every refusal's text.
#[test]
fn membership_requests() {
    let peer = |raft: &str, client: &str| Peer {
        raft: raft.parse().expect("addr"),
        client: client.into(),
    };
    let member = |m| Ok(Action::Member(m));
    let err = |s: &str| Err(e(s));
    let rows: &[(&str, Result<Action, Reply>)] = &[
        (
            "RAFT.NODE ADD 4 127.0.0.1:7004/127.0.0.1:6384",
            member(MemberCmd::Add {
                id: 4,
                peer: peer("127.0.0.1:7004", "127.0.0.1:6384"),
            }),
        ),
        (
            "raft.node add 9 [::1]:7009/[::1]:6389",
            member(MemberCmd::Add {
                id: 9,
                peer: peer("[::1]:7009", "[::1]:6389"),
            }),
        ),
        ("RAFT.NODE REMOVE 3", member(MemberCmd::Remove { id: 3 })),
        ("RAFT.NODES", member(MemberCmd::List)),
        (
            "RAFT.TRANSFER_LEADER 2",
            member(MemberCmd::Transfer { id: 2 }),
        ),
        ("raft.transfer_leader 0", err("ERR invalid node id '0'")),
        (
            "RAFT.TRANSFER_LEADER",
            err("ERR wrong number of arguments for 'raft.transfer_leader' command"),
        ),
        (
            "CLUSTER SLOTS",
            member(MemberCmd::Cluster(crate::cluster::ClusterCmd::Slots)),
        ),
        (
            "RAFT.NODE ADD 0 127.0.0.1:7004/127.0.0.1:6384",
            err("ERR invalid node id '0'"),
        ),
        (
            "RAFT.NODE ADD -1 127.0.0.1:7004/127.0.0.1:6384",
            err("ERR invalid node id '-1'"),
        ),
        (
            "RAFT.NODE ADD 9223372036854775808 127.0.0.1:1/127.0.0.1:2",
            err("ERR invalid node id '9223372036854775808'"),
        ),
        ("RAFT.NODE REMOVE x", err("ERR invalid node id 'x'")),
        (
            "RAFT.NODE ADD 4 127.0.0.1:7004",
            err("ERR invalid address '127.0.0.1:7004' (RAFT_IP:PORT/CLIENT_IP:PORT)"),
        ),
        (
            "RAFT.NODE ADD 4 host:7004/127.0.0.1:6384",
            err("ERR invalid address 'host:7004/127.0.0.1:6384' (RAFT_IP:PORT/CLIENT_IP:PORT)"),
        ),
        (
            "RAFT.NODE ADD 4",
            err("ERR wrong number of arguments for 'raft.node|add' command"),
        ),
        (
            "RAFT.NODE REMOVE 3 4",
            err("ERR wrong number of arguments for 'raft.node|remove' command"),
        ),
        (
            "RAFT.NODE",
            err("ERR wrong number of arguments for 'raft.node' command"),
        ),
        (
            "RAFT.NODE JOIN 4",
            err("ERR unknown subcommand 'JOIN'. Try RAFT.NODE HELP."),
        ),
        (
            "RAFT.NODES all",
            err("ERR wrong number of arguments for 'raft.nodes' command"),
        ),
    ];
    for (line, want) in rows {
        let args = split_inline(line.as_bytes()).expect("test line parses");
        let got = match classify(args.clone(), T0) {
            Action::Reply(r) => Err(r),
            a => Ok(a),
        };
        assert_eq!(&got, want, "{line}");
    }
    // Without a cluster there is nobody to change.
    run(
        "membership outside a cluster",
        &[(0, "RAFT.NODES", e(ERR_NOT_CLUSTER))],
    );
}

#[test]
fn writes_are_absolute() {
    let args = split_inline(b"SET k v EX 10").unwrap();
    match classify(args.clone(), 1000) {
        Action::Write(op) => {
            assert_eq!(op.ts_ms, 1000);
            assert!(matches!(
                op.cmd,
                WriteCmd::Set {
                    ttl: SetTtl::At(11_000),
                    ..
                }
            ));
        }
        other => panic!("{other:?}"),
    }
    // A relative expiry travels as the command: every member counts it
    // from the op's logical instant, so it lands at the same absolute time.
    let args = split_inline(b"EXPIRE k 5").unwrap();
    let Action::Write(op) = classify(args.clone(), 1000) else {
        panic!("EXPIRE is a write");
    };
    assert!(matches!(&op.cmd, WriteCmd::Data { args: a, .. } if *a == args));
    let (mut a, mut b) = (Store::new(), Store::new());
    for st in [&mut a, &mut b] {
        execute_local(st, &split_inline(b"SET k v").unwrap(), 1000);
        st.apply(&op);
    }
    assert_eq!(a.expiry(b"k", 1000), Some(Some(6000)));
    assert_eq!(a.snapshot(), b.snapshot());
    assert!(matches!(
        classify(split_inline(b"GET k").unwrap(), 0),
        Action::Read(ReadCmd::Data { .. })
    ));
}

proptest! {
    /// Replicas applying the same ops agree (state and replies), even when
    /// their own clocks disagree for reads in between; the op log survives
    /// encoding; snapshots restore the same state.
    #[test]
    fn replicas_agree(ops in proptest::collection::vec(arb_op(), 0..40)) {
        let mut a = Store::new();
        let mut b = Store::new();
        for op in &ops {
            let ra = a.apply(op);
            let Action::Read(dbsize) = classify(vec![b"dbsize".to_vec()], 0) else {
                panic!("DBSIZE is a read");
            };
            let _ = dbsize.execute(&a, op.ts_ms.wrapping_add(12345), &Default::default());
            let decoded = WriteOp::decode(&op.encode()).unwrap();
            let rb = b.apply(&decoded);
            prop_assert_eq!(ra, rb);
        }
        prop_assert_eq!(a.snapshot(), b.snapshot());
        let c = Store::restore(&a.snapshot()).unwrap();
        prop_assert_eq!(c.snapshot(), a.snapshot());
        prop_assert_eq!(c.len(0), a.len(0));
    }

    /// A frozen copy keeps the state it was taken at while the store goes
    /// on (what a snapshot thread encodes).
    #[test]
    fn frozen_copies_do_not_move(
        before in proptest::collection::vec(arb_op(), 0..30),
        after in proptest::collection::vec(arb_op(), 1..30),
    ) {
        let mut a = Store::new();
        for op in &before {
            a.apply(op);
        }
        let frozen = a.frozen();
        let at_freeze = a.snapshot();
        for op in &after {
            a.apply(op);
        }
        prop_assert_eq!(frozen.snapshot(), at_freeze);
    }
}

/// The keyspace events each write queues on the store (all classes on),
/// as Redis names them: (clock ms, request, events as "class:event:key").
#[test]
fn applied_writes_queue_redis_event_names() {
    use crate::notify::NotifyFlags;
    let table: &[(u64, &str, &[&str])] = &[
        (0, "SET a 1", &["n:new:a", "$:set:a"]),
        (0, "SET a 2", &["$:set:a"]),
        (0, "SET a 3 NX", &[]),
        (0, "SET b 1 PX 100", &["n:new:b", "$:set:b", "g:expire:b"]),
        (0, "MSET a 1 c 2", &["$:set:a", "n:new:c", "$:set:c"]),
        (0, "INCR n", &["n:new:n", "$:incrby:n"]),
        (0, "DECRBY n 5", &["$:incrby:n"]),
        (0, "APPEND a x", &["$:append:a"]),
        (0, "APPEND z x", &["n:new:z", "$:append:z"]),
        (0, "EXPIRE a 100", &["g:expire:a"]),
        (0, "PERSIST a", &["g:persist:a"]),
        (0, "PERSIST a", &[]),
        (0, "EXPIRE nope 100", &[]),
        (0, "DEL a nope c", &["g:del:a", "g:del:c"]),
        (0, "PEXPIREAT z 1", &["g:del:z"]),
        // b expires at +100 ms: the next write removes it first.
        (200, "SET d 1", &["x:expired:b", "n:new:d", "$:set:d"]),
        (200, "GET d", &[]),
        (200, "FLUSHDB", &[]),
    ];
    let mut s = Store::new();
    s.set_notifications(NotifyFlags::ALL.union(NotifyFlags::NEW));
    for (n, (dt, line, want)) in table.iter().enumerate() {
        let args = split_inline(line.as_bytes()).expect("test line parses");
        let _ = execute_local(&mut s, &args, T0 + dt);
        let got: Vec<String> = s
            .drain_events()
            .map(|e| {
                let f = e.class.to_string();
                format!("{}:{}:{}", f, e.event, String::from_utf8_lossy(&e.key))
            })
            .collect();
        assert_eq!(got, *want, "step {n}: {line}");
    }
    // Only the classes asked for, and nothing at all when off.
    s.set_notifications(NotifyFlags::STRING);
    let _ = execute_local(
        &mut s,
        &split_inline(b"SET q 1 EX 5").expect("line"),
        T0 + 300,
    );
    assert_eq!(s.drain_events().count(), 1);
    s.set_notifications(NotifyFlags::NONE);
    let _ = execute_local(&mut s, &split_inline(b"SET q 2").expect("line"), T0 + 300);
    assert_eq!(s.drain_events().count(), 0);
}

#[test]
fn config_and_pubsub_commands() {
    run(
        "config",
        &[
            (0, "CONFIG GET notify-keyspace-events", arr(vec![b("notify-keyspace-events"), b("")])),
            (0, "CONFIG GET NOTIFY*", arr(vec![b("notify-keyspace-events"), b("")])),
            (0, "CONFIG GET appendonl?", arr(vec![b("appendonly"), b("no")])),
            (
                0,
                "CONFIG SET notify-keyspace-events Kq",
                e("ERR CONFIG SET failed (possibly related to argument 'notify-keyspace-events') - \
                   Invalid event class character. Use 'Ag$lshzxeKEtmdn'."),
            ),
            (
                0,
                "CONFIG SET save x",
                e("ERR CONFIG SET failed (possibly related to argument 'save') - Invalid save parameters"),
            ),
            (
                0,
                "CONFIG SET notify-keyspace-events",
                e("ERR wrong number of arguments for 'config|set' command"),
            ),
            // A store alone has no member to keep them.
            (0, "CONFIG SET notify-keyspace-events KEA", ok()),
            (0, "SUBSCRIBE a", e(ERR_NEEDS_MEMBER)),
            (
                0,
                "SUBSCRIBE",
                e("ERR wrong number of arguments for 'subscribe' command"),
            ),
            (
                0,
                "PUBLISH a",
                e("ERR wrong number of arguments for 'publish' command"),
            ),
        ],
    );
    let c = |l: &str| classify(split_inline(l.as_bytes()).expect("line"), T0);
    assert_eq!(
        c("CONFIG SET notify-keyspace-events K$"),
        Action::Setting(SettingCmd::ConfigSet(vec![
            b"notify-keyspace-events".to_vec(),
            b"K$".to_vec()
        ]))
    );
    use crate::pubsub::Kind;
    let cases = [
        (
            "PSUBSCRIBE a* b?",
            Action::PubSub(PubSubCmd::Subscribe(
                vec![b"a*".to_vec(), b"b?".to_vec()],
                Kind::Pattern,
            )),
        ),
        (
            "UNSUBSCRIBE",
            Action::PubSub(PubSubCmd::Unsubscribe(vec![], Kind::Channel)),
        ),
        (
            "punsubscribe",
            Action::PubSub(PubSubCmd::Unsubscribe(vec![], Kind::Pattern)),
        ),
        (
            "SSUBSCRIBE x",
            Action::PubSub(PubSubCmd::Subscribe(vec![b"x".to_vec()], Kind::Shard)),
        ),
        (
            "SUNSUBSCRIBE x",
            Action::PubSub(PubSubCmd::Unsubscribe(vec![b"x".to_vec()], Kind::Shard)),
        ),
        (
            "SUBSCRIBE x",
            Action::PubSub(PubSubCmd::Subscribe(vec![b"x".to_vec()], Kind::Channel)),
        ),
        (
            "WAIT 2 100",
            Action::Wait {
                replicas: 2,
                timeout_ms: 100,
            },
        ),
        (
            "WAIT 1 -1",
            Action::Reply(Reply::err("ERR timeout is negative")),
        ),
        (
            "WAIT 1 x",
            Action::Reply(Reply::err("ERR timeout is not an integer or out of range")),
        ),
        (
            "WAIT x 0",
            Action::Reply(Reply::err("ERR value is not an integer or out of range")),
        ),
        ("ROLE", Action::Role),
        ("monitor", Action::Monitor),
    ];
    for (line, want) in cases {
        assert_eq!(c(line), want, "{line}");
    }
    match c("SPUBLISH ch m") {
        Action::Write(op) => assert_eq!(
            op.cmd,
            WriteCmd::SPublish {
                channel: b"ch".to_vec(),
                message: b"m".to_vec()
            }
        ),
        other => panic!("SPUBLISH: {other:?}"),
    }
}

/// Every command the dispatch answers itself is in the table, and
/// `COMMAND` lists exactly the served ones.
#[test]
fn every_command_answered_here_is_in_the_table() {
    for n in HERE {
        assert!(crate::cmd::table::spec(n.as_bytes()).is_some(), "{n}");
        assert!(implemented(n.to_uppercase().as_bytes()), "{n}");
    }
    assert!(implemented(b"eval") && implemented(b"FCALL_RO"));
    assert_eq!(
        all_commands().count(),
        crate::cmd::table::TABLE
            .iter()
            .filter(|c| implemented(c.name.as_bytes()))
            .count()
    );
}
