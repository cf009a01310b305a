//! Cluster-aware client libraries, unmodified, against a three-member
//! group: Python's `RedisCluster` and the Rust `redis` crate's
//! `ClusterClient` learn the group from `CLUSTER SLOTS` (asking a
//! follower) and send each command to the leader; after the leader hands
//! leadership to another member (`RAFT.TRANSFER_LEADER`), their next write
//! meets `-MOVED` at the old leader and follows it, with nothing lost.
//!
//! (A leader that dies instead is found by these libraries only by
//! rebuilding the client: the Rust crate's synchronous cluster connection
//! retries a refused address without asking for the slots again, and
//! Python's redis 4.3.4, Debian's, fails to re-read the slots after a
//! connection error — `cannot pickle '_thread.lock' object` — against any
//! cluster, a real Redis Cluster included.)

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use xlane_kv::resp::Reply;

mod support;
use support::cluster::{call, Cluster};

/// The Debian interpreter with the `redis` package (`python3-redis`).
const PYTHON: &str = "/usr/bin/python3";

/// Learns the group from one follower, uses a hash, a list and a
/// transaction on the key's node, says `phase1`, waits for a line on stdin
/// (the test moves the leadership meanwhile), then writes once — through
/// the old leader's `-MOVED` — and reads everything back. Prints `ok`, or
/// raises.
const PY_CLUSTER: &str = r#"
import sys, redis
from redis.cluster import RedisCluster, ClusterNode
host, port = sys.argv[1].rsplit(":", 1)
rc = RedisCluster(startup_nodes=[ClusterNode(host, int(port))])
assert len(rc.get_nodes()) == 3, rc.get_nodes()
assert rc.set("k", "v")
assert rc.get("k") == b"v"
assert rc.hset("h", mapping={"a": "1", "b": "2"}) == 2
assert rc.hgetall("h") == {b"a": b"1", b"b": b"2"}
assert rc.rpush("l", "x", "y") == 2
assert rc.lrange("l", 0, -1) == [b"x", b"y"]
r = rc.get_redis_connection(rc.get_node_from_key("n"))
p = r.pipeline(transaction=True)
p.incr("n").hincrby("h", "a", 1)
assert p.execute() == [1, 2]
print("phase1", flush=True)
sys.stdin.readline()
assert rc.reinitialize_counter == 0
assert rc.set("after", "1")
# The write met MOVED once (this version counts MOVED replies there).
assert rc.reinitialize_counter == 1, rc.reinitialize_counter
assert rc.get("k") == b"v"
assert rc.hgetall("h") == {b"a": b"2", b"b": b"2"}
assert rc.lrange("l", 0, -1) == [b"x", b"y"]
assert rc.get("after") == b"1"
print("ok", flush=True)
"#;

/// Hands the leadership from the current leader to another member and
/// returns (old, new) once every member agrees.
fn move_leader(c: &Cluster) -> (u64, u64) {
    let old = c.wait_leader();
    let new = c.follower();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let r = call(&c.addr(old), &["raft.transfer_leader", &new.to_string()]).expect("call");
        assert_eq!(r, Reply::ok());
        let t = Instant::now() + Duration::from_secs(2);
        while Instant::now() < t {
            if c.wait_leader() == new {
                return (old, new);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(Instant::now() < deadline, "the leadership never moved");
    }
}

#[test]
fn python_redis_cluster_follows_moved() {
    let c = Cluster::start(3);
    let follower = c.follower();
    let mut py = Command::new(PYTHON)
        .args(["-c", PY_CLUSTER, &c.addr(follower)])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{PYTHON}: {e} (apt-get install -y python3-redis)"));
    let mut out = BufReader::new(py.stdout.take().expect("stdout"));
    let mut line = String::new();
    out.read_line(&mut line).expect("read");
    if line != "phase1\n" {
        let o = py.wait_with_output().expect("wait");
        panic!(
            "before the leader moved: {line:?}\n{}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    move_leader(&c);
    py.stdin
        .as_mut()
        .expect("stdin")
        .write_all(b"go\n")
        .expect("write");
    line.clear();
    out.read_line(&mut line).expect("read");
    let o = py.wait_with_output().expect("wait");
    assert_eq!(line, "ok\n", "{}", String::from_utf8_lossy(&o.stderr));
}

#[test]
fn rust_cluster_client_follows_moved() {
    use redis::Commands;
    let c = Cluster::start(3);
    let follower = c.follower();
    let url = format!("redis://{}/", c.addr(follower));
    let client = redis::cluster::ClusterClient::new(vec![url]).expect("client");
    let mut conn = client.get_connection().expect("connect through a follower");
    let _: () = conn.set("k", "v").expect("set");
    assert_eq!(conn.get::<_, String>("k").expect("get"), "v");
    let _: () = conn
        .hset_multiple("h", &[("a", "1"), ("b", "2")])
        .expect("hset");
    assert_eq!(
        conn.hincr::<_, _, _, i64>("h", "a", 41).expect("hincrby"),
        42
    );
    assert_eq!(conn.rpush::<_, _, i64>("l", &["x", "y"]).expect("rpush"), 2);

    let (old, new) = move_leader(&c);
    // The old leader, now a follower, redirects to the new one.
    let Reply::Integer(slot) = call(&c.addr(old), &["cluster", "keyslot", "after"]).expect("call")
    else {
        panic!("CLUSTER KEYSLOT")
    };
    assert_eq!(
        call(&c.addr(old), &["set", "after", "0"]).expect("call"),
        Reply::err(format!("MOVED {slot} {}", c.addr(new)))
    );
    // The client still sends writes to the old leader; it follows MOVED.
    let _: () = conn.set("after", "1").expect("write after the move");
    assert_eq!(conn.get::<_, String>("after").expect("get"), "1");
    assert_eq!(conn.get::<_, String>("k").expect("get"), "v");
    assert_eq!(conn.hget::<_, _, i64>("h", "a").expect("hget"), 42);
    assert_eq!(
        conn.lrange::<_, Vec<String>>("l", 0, -1).expect("lrange"),
        ["x", "y"]
    );
}
