//! Scripts on a three-member `xlane kv serve` group of real processes.
//!
//! * A locking library built on Lua scripts, unmodified: redis-py's `Lock`
//!   (Debian's `python3-redis`) guards a job loop of four workers
//!   (`tests/py/lock_jobs.py`) while the leader is killed (`kill -9`) and
//!   later restarted from its data directory: every job runs exactly once,
//!   in order, and the members end with the same data and script cache.
//! * A script that never ends: the instruction budget ends it on every
//!   member, its writes are undone everywhere, a client that wrote
//!   meanwhile is served once it ends, and the group goes on.

mod common;

use common::procs::{Procs, Shard};
use common::Conn;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use xlane_kv::resp::Reply;

/// The Debian interpreter with the `redis` package (`python3-redis`).
const PYTHON: &str = "/usr/bin/python3";

fn root(name: &str) -> std::path::PathBuf {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let root = std::env::temp_dir().join(format!("xlane-kv-{name}-{}-{nanos}", std::process::id()));
    std::fs::create_dir_all(&root).expect("dir");
    root
}

/// Starts the three members of `shard`.
fn start(procs: &mut Procs, shard: &mut Shard) {
    for id in 1..=3 {
        let p = procs.start(&format!("n{id}"), &mut shard.command(id));
        shard.procs.push(p);
    }
}

/// One command on a fresh connection to this member's own copy
/// (`READONLY`: a follower answers a read itself), `None` when it does not
/// answer.
fn ask(a: SocketAddr, words: &[&str]) -> Option<Reply> {
    let mut c = Conn::try_open(a, Duration::from_millis(500))?;
    c.try_cmd(&["READONLY"])?;
    c.try_cmd(words)
}

/// Waits until every member answers `words` alike and returns the answer
/// (the members have then applied the same log).
fn agreed(members: &[SocketAddr], words: &[&str]) -> Reply {
    agreed_on(members, words, Some)
}

/// [`agreed`] on the part `pick` takes of each answer.
fn agreed_on<T: PartialEq + Clone + std::fmt::Debug>(
    members: &[SocketAddr],
    words: &[&str],
    pick: impl Fn(Reply) -> Option<T>,
) -> T {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let seen: Vec<Option<T>> = members
            .iter()
            .map(|a| ask(*a, words).and_then(&pick))
            .collect();
        if let Some(Some(first)) = seen.first() {
            if seen.iter().all(|s| s.as_ref() == Some(first)) {
                return first.clone();
            }
        }
        assert!(
            Instant::now() < deadline,
            "members never agreed on {words:?}: {seen:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn redis_py_lock_runs_every_job_once_across_a_leader_kill() {
    const JOBS: usize = 120;
    let dir = root("lock");
    let mut procs = Procs::default();
    let mut shard = Shard::new(&dir, 0);
    start(&mut procs, &mut shard);
    let leader = shard.leader().expect("a leader");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/py/lock_jobs.py");
    let mut py = Command::new(PYTHON);
    py.arg(script).args([JOBS.to_string(), "4".into()]);
    for a in &shard.clients {
        py.arg(a.to_string());
    }
    let mut py = py
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{PYTHON}: {e} (apt-get install -y python3-redis)"));
    let out = BufReader::new(py.stdout.take().expect("stdout"));
    let mut killed = None;
    let mut last = String::new();
    for line in out.lines().map_while(Result::ok) {
        let done: usize = line
            .strip_prefix("progress ")
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        // A third of the way: the leader dies with the workers mid-job.
        if killed.is_none() && done >= JOBS / 3 {
            procs.kill(shard.procs[leader]);
            println!("killed the leader, member {}, after job {done}", leader + 1);
            killed = Some(leader);
        }
        last = line;
    }
    let o = py.wait_with_output().expect("python");
    assert!(
        o.status.success() && last.starts_with("done"),
        "the workers failed: {last}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    println!("{last}");
    let killed = killed.expect("the leader was killed mid-run");
    // The killed member comes back from its data directory and catches up.
    procs.start(&format!("n{}", killed + 1), &mut shard.command(killed + 1));
    let l = shard.leader().expect("a leader after the restart");
    let mut c = Conn::open(shard.clients[l]);
    let expected: Vec<Reply> = (0..JOBS).map(|n| Reply::bulk(n.to_string())).collect();
    assert_eq!(
        c.cmd(&["LRANGE", "done", "0", "-1"]),
        Reply::Array(Some(expected)),
        "every job once, in order"
    );
    assert_eq!(c.cmd(&["GET", "next"]), Reply::bulk(JOBS.to_string()));
    // The same data and the same script cache on every member (the lock's
    // scripts were loaded by EVALSHA's fallback or SCRIPT LOAD before the
    // kill, and are known to the restarted member too).
    let digest = agreed(&shard.clients, &["DEBUG", "DIGEST"]);
    assert!(
        matches!(digest, Reply::Simple(ref d) if d.len() == 40),
        "{digest:?}"
    );
    let scripts = agreed_on(&shard.clients, &["INFO", "memory"], |r| match r {
        Reply::Bulk(Some(info)) => String::from_utf8_lossy(&info).lines().find_map(|l| {
            l.strip_prefix("number_of_cached_scripts:")
                .and_then(|n| n.trim().parse::<u32>().ok())
        }),
        _ => None,
    });
    // Release, extend and reacquire.
    assert_eq!(scripts, 3);
    drop(procs);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_script_that_never_ends_is_ended_by_its_budget_on_every_member() {
    let dir = root("runaway");
    let mut procs = Procs::default();
    let mut shard = Shard::new(&dir, 0);
    start(&mut procs, &mut shard);
    let leader = shard.leader().expect("a leader");
    let at = shard.clients[leader];
    let mut c = Conn::open(at);
    assert_eq!(c.cmd(&["SET", "k", "before"]), Reply::ok());
    // It writes, then loops for ever.
    let runaway = std::thread::spawn(move || {
        let mut c = Conn::open(at);
        c.cmd(&[
            "EVAL",
            "redis.call('SET', KEYS[1], 'during') while true do redis.call('INCR', KEYS[2]) end",
            "2",
            "k",
            "n",
        ])
    });
    std::thread::sleep(Duration::from_millis(100));
    // Another client writes meanwhile: served once the script has ended
    // (through whichever member leads then, as a client following the
    // group does).
    let mut other = Conn::open(at);
    let mut r = other.cmd(&["SET", "other", "1"]);
    let deadline = Instant::now() + Duration::from_secs(30);
    while r != Reply::ok() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
        let l = shard.leader().expect("a leader");
        r = Conn::open(shard.clients[l]).cmd(&["SET", "other", "1"]);
    }
    assert_eq!(r, Reply::ok());
    let r = runaway.join().expect("runaway client");
    assert!(
        matches!(&r, Reply::Error(e) if e.contains("budget")),
        "{r:?}"
    );
    // Undone on every member: the script's writes are nowhere.
    assert_eq!(agreed(&shard.clients, &["GET", "n"]), Reply::nil());
    let l = shard.leader().expect("the group goes on");
    let mut c = Conn::open(shard.clients[l]);
    assert_eq!(c.cmd(&["GET", "k"]), Reply::bulk("before"));
    assert_eq!(c.cmd(&["GET", "other"]), Reply::bulk("1"));
    assert_eq!(c.cmd(&["INCR", "after"]), Reply::Integer(1));
    agreed(&shard.clients, &["DEBUG", "DIGEST"]);
    // A library whose loading never ends is refused alike.
    let r = c.cmd(&[
        "FUNCTION",
        "LOAD",
        "#!lua name=spin\nwhile true do end\nredis.register_function('f', function() return 1 end)",
    ]);
    assert!(matches!(&r, Reply::Error(_)), "{r:?}");
    assert_eq!(
        agreed(&shard.clients, &["FUNCTION", "LIST"]),
        Reply::Array(Some(Vec::new()))
    );
    drop(procs);
    let _ = std::fs::remove_dir_all(&dir);
}
