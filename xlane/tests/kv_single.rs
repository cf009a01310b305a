//! `xlane kv serve` without `--peer`: a single node (a one-member raft
//! group) whose raft log in `--data` is its append-only file. A clean stop
//! (SIGTERM) and a restart on the same directory keep the data; so does a
//! `kill -9` under `--fsync always` for every acknowledged write.

mod common;

use common::{spawn_until_ready, Conn};
use std::net::SocketAddr;
use std::process::{Child, Command};
use xlane_kv::resp::Reply;

/// A fresh directory under the system's temporary directory, removed on drop.
struct Scratch(std::path::PathBuf);

impl Scratch {
    fn new(what: &str) -> Scratch {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let p = std::env::temp_dir().join(format!(
            "xlane-kv-single-{what}-{}-{nanos}",
            std::process::id()
        ));
        std::fs::create_dir_all(&p).expect("scratch dir");
        Scratch(p)
    }

    fn path(&self) -> &std::path::Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Starts a single node on `dir` and waits for its ready line.
fn start(dir: &std::path::Path, fsync: &str) -> (Child, SocketAddr) {
    let addr = xlane_testports::tcp();
    let (child, _out, line) = spawn_until_ready(
        Command::new(env!("CARGO_BIN_EXE_xlane"))
            .args(["kv", "serve", "--bind", &addr.to_string(), "--data"])
            .arg(dir)
            .args(["--fsync", fsync]),
    );
    assert!(line.contains("\"mode\":\"single\""), "{line}");
    (child, addr)
}

fn sigterm(child: &mut Child) {
    // Only the process this test started, by its PID.
    let pid = child.id() as libc::pid_t;
    // SAFETY: kill(2) on our own child's PID.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    let status = child.wait().expect("wait");
    assert!(status.success(), "clean stop: {status:?}");
}

#[test]
fn sigterm_and_restart_keep_the_data() {
    let dir = Scratch::new("sigterm");
    let (mut child, addr) = start(dir.path(), "everysec");
    let mut c = Conn::open(addr);
    let writes: Vec<Vec<String>> = (0..200)
        .map(|i| vec!["SET".into(), format!("k{i}"), format!("v{i}")])
        .collect();
    let replies = c.try_pipeline(&writes).expect("writes");
    assert!(replies.iter().all(|r| *r == Reply::ok()));
    drop(c);
    sigterm(&mut child);
    let (mut child, addr) = start(dir.path(), "everysec");
    let mut c = Conn::open(addr);
    assert_eq!(c.try_cmd(&["GET", "k199"]), Some(Reply::bulk("v199")));
    assert_eq!(c.try_cmd(&["DBSIZE"]), Some(Reply::Integer(200)));
    drop(c);
    sigterm(&mut child);
}

#[test]
fn kill_9_under_fsync_always_loses_nothing_acknowledged() {
    let dir = Scratch::new("kill9");
    let (mut child, addr) = start(dir.path(), "always");
    let mut c = Conn::open(addr);
    let mut acked = 0;
    for i in 0..300 {
        if c.try_cmd(&["INCR", "n"]) == Some(Reply::Integer(i + 1)) {
            acked = i + 1;
        }
    }
    assert_eq!(acked, 300);
    // Only the process this test started.
    child.kill().expect("kill -9");
    let _ = child.wait();
    let (mut child, addr) = start(dir.path(), "always");
    let mut c = Conn::open(addr);
    assert_eq!(c.try_cmd(&["GET", "n"]), Some(Reply::bulk("300")));
    drop(c);
    sigterm(&mut child);
}
