//! Replacing a member of a running `xlane kv serve` cluster: three real
//! member processes on loopback, two clients writing all along; the leader
//! is killed (`kill -9` by PID), a new member with a new id starts with
//! `--join` and is added with `RAFT.NODE ADD`, and the dead one is removed
//! with `RAFT.NODE REMOVE`. Every acknowledged write must then be readable
//! on the new member, the writes must have gone on after the change, and
//! every live member must list the same members with their addresses
//! (`RAFT.NODES`): the new member learned them from the leader's snapshot,
//! the old ones from the change in the log. Run over plain UDP and over the
//! lane.

mod common;

use common::Conn;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use xlane_kv::resp::Reply;

const DEADLINE: Duration = Duration::from_secs(20);
const OP_TIMEOUT: Duration = Duration::from_millis(500);
const WRITERS: usize = 2;

/// Members 1..=4 (4 starts later), each a process.
struct Cluster {
    lane: bool,
    dir: PathBuf,
    raft: BTreeMap<usize, SocketAddr>,
    clients: BTreeMap<usize, SocketAddr>,
    children: BTreeMap<usize, Child>,
}

impl Cluster {
    fn new(lane: bool) -> Cluster {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let dir = std::env::temp_dir().join(format!(
            "xlane-kv-membership-{}-{nanos}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let (mut raft, mut clients) = (BTreeMap::new(), BTreeMap::new());
        for id in 1..=4 {
            // The next port is the member's X-FD port in lane mode.
            raft.insert(id, xlane_testports::raft_pair());
            clients.insert(id, xlane_testports::tcp());
        }
        Cluster {
            lane,
            dir,
            raft,
            clients,
            children: BTreeMap::new(),
        }
    }

    /// `RAFT/CLIENT` of member `id`.
    fn addrs(&self, id: usize) -> String {
        format!("{}/{}", self.raft[&id], self.clients[&id])
    }

    /// Starts member `id` with a --peer for each of `peers`, and waits for
    /// its ready line.
    fn start(&mut self, id: usize, peers: &[usize], join: bool) {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_xlane"));
        cmd.args(["kv", "serve", "--id", &id.to_string()]);
        for &p in peers {
            cmd.args(["--peer", &format!("{p}={}", self.addrs(p))]);
        }
        // A small snapshot interval: the leader's log is compacted well
        // before the new member is added, so it gets a snapshot over TCP.
        cmd.arg("--data")
            .arg(self.dir.join(format!("n{id}")))
            .args(["--fsync", "never", "--snapshot-interval", "50"]);
        if self.lane {
            cmd.args(["--transport", "lane"]);
        }
        if join {
            cmd.arg("--join");
        }
        let (child, _out, line) = common::spawn_until_ready(cmd.stderr(Stdio::inherit()));
        assert!(line.contains(&format!("\"join\":{join}")), "{line}");
        self.children.insert(id, child);
    }

    /// `kill -9` by PID (Child::kill sends SIGKILL) and reap.
    fn kill(&mut self, id: usize) {
        if let Some(mut c) = self.children.remove(&id) {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    fn node_of(&self, addr: &str) -> Option<usize> {
        self.clients
            .iter()
            .find(|(_, a)| a.to_string() == addr)
            .map(|(&id, _)| id)
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let ids: Vec<usize> = self.children.keys().copied().collect();
        for id in ids {
            self.kill(id);
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The member a `MOVED` error points to.
fn moved_to(cl: &Cluster, e: &str) -> Option<usize> {
    cl.node_of(e.strip_prefix("MOVED ")?.rsplit(' ').next()?)
}

/// Sends `cmd` to a member of `alive`, following `MOVED`, until the reply
/// is not a redirect, a retry hint or a timeout; returns it.
fn to_leader(cl: &Cluster, alive: &[usize], cmd: &[&str]) -> Reply {
    let start = Instant::now();
    let mut turn = 0;
    let mut at = alive[0];
    loop {
        assert!(start.elapsed() < DEADLINE, "{cmd:?}: no answer");
        match Conn::try_open(cl.clients[&at], OP_TIMEOUT).and_then(|mut c| c.try_cmd(cmd)) {
            Some(Reply::Error(e)) if e.starts_with("MOVED ") => {
                if let Some(l) = moved_to(cl, &e).filter(|l| alive.contains(l)) {
                    at = l;
                    std::thread::sleep(Duration::from_millis(5));
                    continue;
                }
            }
            // No leader yet, raft still counts a new leader's log as a
            // pending change, or leadership changed under the request:
            // try again (a change that was applied after all is then
            // refused as done, which the caller accepts).
            Some(Reply::Error(e))
                if e.starts_with("TRYAGAIN")
                    || e.contains("already in progress")
                    || e.contains("leadership changed") => {}
            Some(r) => return r,
            None => {}
        }
        turn += 1;
        at = alive[turn % alive.len()];
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Acknowledged writes: key → value.
type Acked = Arc<Mutex<BTreeMap<String, String>>>;

/// One writer: `SET w<t>:<n> <n>` without end, following `MOVED` among
/// the members in `targets` (which change), recording what is
/// acknowledged.
fn writer(
    t: usize,
    clients: BTreeMap<usize, SocketAddr>,
    targets: Arc<Mutex<Vec<usize>>>,
    acked: Acked,
    count: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
) {
    let mut at = 1;
    let mut conn: Option<Conn> = None;
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let alive = targets.lock().expect("targets").clone();
        if !alive.contains(&at) {
            at = alive[n as usize % alive.len()];
            conn = None;
        }
        let Some(c) = conn.as_mut() else {
            conn = Conn::try_open(clients[&at], OP_TIMEOUT);
            if conn.is_none() {
                at = alive[(n as usize + 1) % alive.len()];
                std::thread::sleep(Duration::from_millis(10));
            }
            continue;
        };
        n += 1;
        let (k, v) = (format!("w{t}:{n}"), n.to_string());
        match c.try_cmd(&["SET", &k, &v]) {
            Some(Reply::Simple(s)) if s == "OK" => {
                acked.lock().expect("acked").insert(k, v);
                count.fetch_add(1, Ordering::Relaxed);
            }
            Some(Reply::Error(e)) if e.starts_with("MOVED ") => {
                let to = e.rsplit(' ').next().unwrap_or_default();
                if let Some((&id, _)) = clients.iter().find(|(_, a)| a.to_string() == to) {
                    if alive.contains(&id) && id != at {
                        at = id;
                        conn = None;
                    }
                }
            }
            // No leader, a dropped proposal: outcome unknown or none;
            // only acknowledged writes are checked.
            Some(_) => std::thread::sleep(Duration::from_millis(5)),
            None => {
                conn = None;
                at = alive[(n as usize) % alive.len()];
            }
        }
    }
}

/// Waits until `count` passed `target`.
fn wait_count(count: &AtomicUsize, target: usize, what: &str) {
    let start = Instant::now();
    while count.load(Ordering::Relaxed) < target {
        assert!(
            start.elapsed() < DEADLINE,
            "{what}: {} of {target} writes acknowledged",
            count.load(Ordering::Relaxed)
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// `RAFT.NODES` of member `id`: id → `RAFT/CLIENT`.
fn nodes(cl: &Cluster, id: usize) -> BTreeMap<usize, String> {
    match Conn::open(cl.clients[&id]).cmd(&["RAFT.NODES"]) {
        Reply::Array(Some(rows)) => rows
            .into_iter()
            .map(|r| match r {
                Reply::Array(Some(f)) => match f.as_slice() {
                    [Reply::Integer(i), Reply::Bulk(Some(r)), Reply::Bulk(Some(c))] => (
                        *i as usize,
                        format!(
                            "{}/{}",
                            String::from_utf8_lossy(r),
                            String::from_utf8_lossy(c)
                        ),
                    ),
                    other => panic!("RAFT.NODES row {other:?}"),
                },
                other => panic!("RAFT.NODES row {other:?}"),
            })
            .collect(),
        other => panic!("RAFT.NODES: {other:?}"),
    }
}

#[test]
fn replace_a_killed_member_while_clients_write() {
    replace_a_killed_member(false);
}

#[test]
fn replace_a_killed_member_while_clients_write_over_the_lane() {
    replace_a_killed_member(true);
}

fn replace_a_killed_member(lane: bool) {
    let mut cl = Cluster::new(lane);
    for id in 1..=3 {
        cl.start(id, &[1, 2, 3], false);
    }
    let acked: Acked = Arc::default();
    let count = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let targets = Arc::new(Mutex::new(vec![1, 2, 3]));
    let writers: Vec<_> = (0..WRITERS)
        .map(|t| {
            let (clients, targets) = (cl.clients.clone(), targets.clone());
            let (acked, count, stop) = (acked.clone(), count.clone(), stop.clone());
            std::thread::spawn(move || writer(t, clients, targets, acked, count, stop))
        })
        .collect();
    // Enough writes that the leader has compacted its log (snapshot
    // interval 50) before the new member comes.
    wait_count(&count, 300, "before the kill");

    // The leader dies.
    let dead = leader_now(&cl, &[1, 2, 3]);
    cl.kill(dead);
    let alive: Vec<usize> = (1..=3).filter(|&i| i != dead).collect();
    *targets.lock().expect("targets") = alive.clone();
    let before = count.load(Ordering::Relaxed);
    wait_count(&count, before + 50, "after the kill");

    // The new member starts empty, knowing the members it was told of, and
    // is added; then the dead one is removed.
    cl.start(4, &[1, 2, 3, 4], true);
    let add = ["RAFT.NODE", "ADD", "4", &cl.addrs(4)].map(String::from);
    let add: Vec<&str> = add.iter().map(String::as_str).collect();
    match to_leader(&cl, &alive, &add) {
        Reply::Simple(s) if s == "OK" => {}
        // A retry after a lost answer finds it done.
        Reply::Error(e) if e == "ERR node 4 is already a member" => {}
        r => panic!("RAFT.NODE ADD: {r:?}"),
    }
    let mut live: Vec<usize> = alive.clone();
    live.push(4);
    *targets.lock().expect("targets") = live.clone();
    let dead_s = dead.to_string();
    match to_leader(&cl, &live, &["RAFT.NODE", "REMOVE", &dead_s]) {
        Reply::Simple(s) if s == "OK" => {}
        Reply::Error(e) if e == format!("ERR node {dead} is not a member") => {}
        r => panic!("RAFT.NODE REMOVE: {r:?}"),
    }
    // The writes go on in the new configuration.
    let before = count.load(Ordering::Relaxed);
    wait_count(&count, before + 200, "after the change");
    stop.store(true, Ordering::Relaxed);
    for w in writers {
        w.join().expect("writer");
    }

    // Every member lists the same members, with their addresses.
    let want: BTreeMap<usize, String> = live.iter().map(|&i| (i, cl.addrs(i))).collect();
    for &id in &live {
        let start = Instant::now();
        while nodes(&cl, id) != want {
            assert!(
                start.elapsed() < DEADLINE,
                "member {id} lists {:?}, not {want:?}",
                nodes(&cl, id)
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    // Every acknowledged write is readable on the new member
    // (linearizable reads: a read barrier through the leader).
    let acked = acked.lock().expect("acked").clone();
    let mut c4 = Conn::open(cl.clients[&4]);
    let keys: Vec<&String> = acked.keys().collect();
    for chunk in keys.chunks(500) {
        let cmds: Vec<Vec<&str>> = chunk.iter().map(|k| vec!["GET", k.as_str()]).collect();
        for (k, r) in chunk.iter().zip(c4.pipeline(&cmds)) {
            assert_eq!(r, Reply::bulk(acked[*k].clone()), "{k} on the new member");
        }
    }
    // The new member took a snapshot from the leader (or its own later).
    assert!(
        cl.dir.join("n4").join("snapshot").exists(),
        "no snapshot in the new member's log"
    );
}

/// The member that takes a write now.
fn leader_now(cl: &Cluster, alive: &[usize]) -> usize {
    let start = Instant::now();
    loop {
        assert!(start.elapsed() < DEADLINE, "no leader among {alive:?}");
        for &id in alive {
            if let Some(Reply::Simple(_)) = Conn::try_open(cl.clients[&id], OP_TIMEOUT)
                .and_then(|mut c| c.try_cmd(&["SET", "probe", "x"]))
            {
                return id;
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
