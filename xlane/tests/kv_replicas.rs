//! `WAIT`, `ROLE`, `MONITOR` and sharded pub/sub on real processes: a
//! single node (no replicas: `WAIT` counts 0) and a three-member group
//! (`WAIT` counts the followers holding the connection's writes, and one
//! fewer once a follower is killed; `ROLE` as Redis shapes it; `SPUBLISH`
//! on the leader reaches a shard subscriber of a follower and no one
//! else; `MONITOR` shows another client's commands). No time is asserted:
//! a `WAIT` that times out is checked by its count only.

mod common;

use common::procs::{Procs, Shard};
use common::Conn;
use std::process::Command;
use xlane_kv::resp::Reply;

fn bulk(s: &str) -> Reply {
    Reply::bulk(s.to_string())
}

fn words(v: &[&str]) -> Reply {
    Reply::Array(Some(v.iter().map(|s| bulk(s)).collect()))
}

/// A (un)subscription reply: `[kind, name, count]`.
fn subscribed(kind: &str, name: &str, count: i64) -> Reply {
    Reply::Array(Some(vec![bulk(kind), bulk(name), Reply::Integer(count)]))
}

fn err_text(r: &Reply) -> String {
    match r {
        Reply::Error(e) => e.clone(),
        other => panic!("expected an error, got {other:?}"),
    }
}

#[test]
fn a_single_node_has_no_replicas_and_shows_its_commands() {
    let dir = std::env::temp_dir().join(format!("xlane-kv-replicas-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let addr = xlane_testports::tcp();
    let mut procs = Procs::default();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_xlane"));
    cmd.args(["kv", "serve", "--bind", &addr.to_string(), "--data"])
        .arg(&dir)
        .args(["--fsync", "never"]);
    procs.start("single", &mut cmd);
    let mut c = Conn::open(addr);
    assert_eq!(c.cmd(&["SET", "k", "v"]), Reply::ok());
    let cases: &[(&[&str], Reply)] = &[
        (&["WAIT", "0", "0"], Reply::Integer(0)),
        // Nobody else to hold it: the timeout's count, 0.
        (&["WAIT", "1", "50"], Reply::Integer(0)),
        (&["WAIT", "1", "-1"], Reply::err("ERR timeout is negative")),
        (
            &["WAIT", "one", "0"],
            Reply::err("ERR value is not an integer or out of range"),
        ),
    ];
    for (cmd, want) in cases {
        assert_eq!(&c.cmd(cmd), want, "{cmd:?}");
    }
    match c.cmd(&["ROLE"]) {
        Reply::Array(Some(v)) => {
            assert_eq!(v[0], bulk("master"));
            assert!(matches!(v[1], Reply::Integer(n) if n > 0), "{v:?}");
            assert_eq!(v[2], Reply::Array(Some(vec![])));
        }
        other => panic!("ROLE: {other:?}"),
    }
    // Inside MULTI they answer from one member: refused, and EXEC aborts.
    assert_eq!(c.cmd(&["MULTI"]), Reply::ok());
    assert!(err_text(&c.cmd(&["WAIT", "0", "0"])).contains("not allowed"));
    assert_eq!(c.cmd(&["DISCARD"]), Reply::ok());

    // MONITOR: another client's commands, in Redis's format; CONFIG
    // (admin) is not shown, AUTH's password is redacted.
    let mut m = Conn::open(addr);
    assert_eq!(m.cmd(&["MONITOR"]), Reply::ok());
    let mut other = Conn::open(addr);
    assert!(matches!(
        other.cmd(&["CONFIG", "GET", "maxmemory"]),
        Reply::Array(_)
    ));
    assert!(matches!(other.cmd(&["AUTH", "secret"]), Reply::Error(_)));
    assert_eq!(other.cmd(&["SET", "a b", "x\"y"]), Reply::ok());
    let mut lines = Vec::new();
    for _ in 0..2 {
        match m.try_read() {
            Some(Reply::Simple(l)) => lines.push(l),
            other => panic!("monitor line: {other:?}"),
        }
    }
    assert!(lines[0].ends_with(r#"] "AUTH" "(redacted)""#), "{lines:?}");
    assert!(lines[1].ends_with(r#"] "SET" "a b" "x\"y""#), "{lines:?}");
    for l in &lines {
        assert!(l.contains(" [0 127.0.0.1:"), "{l}");
    }
    let list = match c.cmd(&["CLIENT", "LIST"]) {
        Reply::Bulk(Some(b)) => String::from_utf8(b).expect("utf-8"),
        other => panic!("CLIENT LIST: {other:?}"),
    };
    assert!(list.lines().any(|l| l.contains(" flags=O ")), "{list}");
    assert_eq!(m.cmd(&["RESET"]), Reply::Simple("RESET".into()));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn wait_role_and_sharded_pubsub_in_a_group_of_three() {
    let root = std::env::temp_dir().join(format!("xlane-kv-replicas3-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).expect("root");
    let mut shard = Shard::new(&root, 0);
    let mut procs = Procs::default();
    for id in 1..=3 {
        let mut cmd = shard.command(id);
        shard.procs.push(procs.start(&format!("n{id}"), &mut cmd));
    }
    let leader = shard.leader().expect("a leader");
    let followers: Vec<usize> = (0..3).filter(|&i| i != leader).collect();
    let mut c = Conn::open(shard.clients[leader]);
    assert_eq!(c.cmd(&["SET", "k", "v"]), Reply::ok());
    // A committed write is on a majority: one follower at once; both
    // followers hold it once they acknowledge (no limit: 0).
    let one = c.cmd(&["WAIT", "1", "0"]);
    assert!(
        matches!(one, Reply::Integer(1) | Reply::Integer(2)),
        "{one:?}"
    );
    assert_eq!(c.cmd(&["WAIT", "2", "0"]), Reply::Integer(2));

    // ROLE: the leader lists both followers, each follower names the
    // leader's client port.
    match c.cmd(&["ROLE"]) {
        Reply::Array(Some(v)) => {
            assert_eq!(v[0], bulk("master"), "{v:?}");
            match &v[2] {
                Reply::Array(Some(r)) => {
                    assert_eq!(r.len(), 2, "{r:?}");
                    let mut ports: Vec<Reply> = r
                        .iter()
                        .map(|e| match e {
                            Reply::Array(Some(t)) => t[1].clone(),
                            other => panic!("{other:?}"),
                        })
                        .collect();
                    ports.sort_by_key(|p| format!("{p:?}"));
                    let mut want: Vec<Reply> = followers
                        .iter()
                        .map(|&f| bulk(&shard.clients[f].port().to_string()))
                        .collect();
                    want.sort_by_key(|p| format!("{p:?}"));
                    assert_eq!(ports, want);
                }
                other => panic!("{other:?}"),
            }
        }
        other => panic!("ROLE: {other:?}"),
    }
    let mut f = Conn::open(shard.clients[followers[0]]);
    match f.cmd(&["ROLE"]) {
        Reply::Array(Some(v)) => {
            assert_eq!(v[0], bulk("slave"), "{v:?}");
            assert_eq!(
                v[2],
                Reply::Integer(shard.clients[leader].port() as i64),
                "{v:?}"
            );
            assert_eq!(v[3], bulk("connected"), "{v:?}");
        }
        other => panic!("ROLE: {other:?}"),
    }
    assert!(
        err_text(&f.cmd(&["WAIT", "1", "0"])).starts_with("ERR WAIT cannot be used with replica")
    );

    // Sharded pub/sub: SSUBSCRIBE on a follower, SPUBLISH on the leader.
    let mut s = Conn::open(shard.clients[followers[0]]);
    assert_eq!(
        s.cmd(&["SSUBSCRIBE", "orders"]),
        subscribed("ssubscribe", "orders", 1)
    );
    let mut plain = Conn::open(shard.clients[followers[0]]);
    assert_eq!(
        plain.cmd(&["SUBSCRIBE", "orders"]),
        subscribed("subscribe", "orders", 1)
    );
    assert_eq!(
        plain.cmd(&["PSUBSCRIBE", "ord*"]),
        subscribed("psubscribe", "ord*", 2)
    );
    // The leader has no shard subscriber of its own: its reply counts 0.
    assert_eq!(c.cmd(&["SPUBLISH", "orders", "o1"]), Reply::Integer(0));
    assert_eq!(c.cmd(&["PUBLISH", "orders", "p1"]), Reply::Integer(0));
    assert_eq!(s.try_read(), Some(words(&["smessage", "orders", "o1"])));
    // The plain subscriber gets only PUBLISH's message (and its pattern's).
    assert_eq!(plain.try_read(), Some(words(&["message", "orders", "p1"])));
    assert_eq!(
        plain.try_read(),
        Some(words(&["pmessage", "ord*", "orders", "p1"]))
    );
    assert_eq!(
        f.cmd(&["PUBSUB", "SHARDNUMSUB", "orders", "none"]),
        Reply::Array(Some(vec![
            bulk("orders"),
            Reply::Integer(1),
            bulk("none"),
            Reply::Integer(0)
        ]))
    );
    assert_eq!(f.cmd(&["PUBSUB", "SHARDCHANNELS"]), words(&["orders"]));
    assert_eq!(f.cmd(&["PUBSUB", "CHANNELS"]), words(&["orders"]));

    // One follower killed: WAIT 2 ends at its timeout with the one left.
    procs.kill(shard.procs[followers[1]]);
    assert_eq!(c.cmd(&["SET", "k", "w"]), Reply::ok());
    assert_eq!(c.cmd(&["WAIT", "2", "300"]), Reply::Integer(1));

    // MONITOR on the leader shows a write sent to it.
    let mut m = Conn::open(shard.clients[leader]);
    assert_eq!(m.cmd(&["MONITOR"]), Reply::ok());
    assert_eq!(c.cmd(&["INCR", "n"]), Reply::Integer(1));
    match m.try_read() {
        Some(Reply::Simple(l)) => assert!(l.ends_with(r#"] "INCR" "n""#), "{l}"),
        other => panic!("monitor line: {other:?}"),
    }
    let _ = std::fs::remove_dir_all(&root);
}
