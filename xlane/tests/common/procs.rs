//! Real processes for the multi-process tests: a set of started processes
//! ended by PID, and an `xlane kv serve` group (ports from
//! `xlane_testports`).

use super::{spawn_until_ready, Conn};
use std::io::BufRead;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use xlane_kv::resp::Reply;

/// The processes this test started, ended by PID when it ends.
#[derive(Default)]
pub struct Procs {
    /// Name and process, `None` once ended.
    pub children: Vec<(String, Option<Child>)>,
}

impl Procs {
    /// Starts `cmd` and waits for its ready line.
    pub fn start(&mut self, name: &str, cmd: &mut Command) -> usize {
        let (child, out, _) = spawn_until_ready(cmd.stderr(Stdio::inherit()));
        // Keep the pipe drained; the last line (the `stopped` one) is kept.
        let last = Arc::new(Mutex::new(String::new()));
        let keep = last.clone();
        std::thread::spawn(move || {
            for l in out.lines().map_while(Result::ok) {
                *keep.lock().expect("lock") = l;
            }
        });
        LAST.lock().expect("lock").push((name.to_string(), last));
        self.children.push((name.to_string(), Some(child)));
        self.children.len() - 1
    }

    pub fn kill(&mut self, i: usize) {
        if let Some(mut c) = self.children[i].1.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Sends `sig` to process `i` by PID (`SIGSTOP`, `SIGCONT`); nothing
    /// once it has ended.
    pub fn signal(&self, i: usize, sig: libc::c_int) {
        if let Some(c) = &self.children[i].1 {
            // SAFETY: a plain syscall on the PID of a child this test
            // started and has not reaped.
            unsafe { libc::kill(c.id() as libc::pid_t, sig) };
        }
    }

    /// Process `i`'s PID while it runs.
    pub fn pid(&self, i: usize) -> Option<u32> {
        self.children[i].1.as_ref().map(Child::id)
    }

    /// SIGTERM by PID and wait; the process's last stdout line.
    pub fn terminate(&mut self, i: usize) -> serde_json::Value {
        let name = self.children[i].0.clone();
        let mut c = self.children[i].1.take().expect("running");
        // SAFETY: a plain syscall on the PID of a child this test started.
        unsafe { libc::kill(c.id() as libc::pid_t, libc::SIGTERM) };
        let status = c.wait().expect("wait");
        assert!(status.success(), "{name}: {status}");
        std::thread::sleep(Duration::from_millis(100));
        let last = LAST.lock().expect("lock");
        let line = last
            .iter()
            .rev()
            .find(|(n, _)| *n == name)
            .map(|(_, l)| l.lock().expect("lock").clone())
            .unwrap_or_default();
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{name}: {e}: {line}"))
    }
}

type LastLines = Vec<(String, Arc<Mutex<String>>)>;
static LAST: Mutex<LastLines> = Mutex::new(Vec::new());

impl Drop for Procs {
    fn drop(&mut self) {
        for i in 0..self.children.len() {
            self.kill(i);
        }
    }
}

/// An `xlane kv serve` group of three members (a shard).
pub struct Shard {
    /// Each member's `--peer` entry.
    pub peers: Vec<String>,
    /// Each member's RESP address.
    pub clients: Vec<SocketAddr>,
    dirs: Vec<PathBuf>,
    /// Each member's index in [`Procs`].
    pub procs: Vec<usize>,
}

impl Shard {
    pub fn new(root: &std::path::Path, s: u32) -> Shard {
        let mut peers = Vec::new();
        let mut clients = Vec::new();
        let mut dirs = Vec::new();
        for id in 1..=3 {
            let client = xlane_testports::tcp();
            // A pair: with `--transport lane` the next port is the
            // member's X-FD port.
            peers.push(format!("{id}={}/{client}", xlane_testports::raft_pair()));
            clients.push(client);
            dirs.push(root.join(format!("s{s}n{id}")));
        }
        Shard {
            peers,
            clients,
            dirs,
            procs: Vec::new(),
        }
    }

    pub fn command(&self, id: usize) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_xlane"));
        cmd.args(["kv", "serve", "--id", &id.to_string()]);
        for p in &self.peers {
            cmd.args(["--peer", p]);
        }
        cmd.arg("--data")
            .arg(&self.dirs[id - 1])
            .args(["--fsync", "never"]);
        cmd
    }

    /// Member `i`'s raft address (index from 0).
    pub fn raft_addr(&self, i: usize) -> SocketAddr {
        let (_, rest) = self.peers[i].split_once('=').expect("ID=RAFT/CLIENT");
        rest.split_once('/')
            .expect("RAFT/CLIENT")
            .0
            .parse()
            .expect("raft address")
    }

    /// The member that leads now (a write through it succeeds), by index.
    pub fn leader(&self) -> Option<usize> {
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            for (i, a) in self.clients.iter().enumerate() {
                let Some(mut c) = Conn::try_open(*a, Duration::from_millis(500)) else {
                    continue;
                };
                if c.try_cmd(&["SET", "probe", "1"]) == Some(Reply::ok()) {
                    return Some(i);
                }
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        None
    }
}

/// Writes a cluster key file with one fresh key (id 1) under `root`: the
/// `--key-file` of a keyed group.
pub fn key_file(root: &std::path::Path) -> PathBuf {
    let ring = xlane_auth::KeyRing::from_pairs(&[(1, xlane_auth::Key::random().unwrap())]);
    let keys = root.join("keys.toml");
    std::fs::write(&keys, ring.to_toml()).unwrap();
    keys
}
