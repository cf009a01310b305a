//! A 3-node replicated `xlane kv serve` cluster of real processes on
//! loopback: leader discovery through `MOVED`, 200 pipelined writes,
//! linearizable reads on the leader and a follower, `kill -9` of the leader,
//! failover with every acknowledged write present, and catch-up of the
//! restarted node from its data directory. Run twice: raft over plain UDP,
//! and X-Raft over the lane (`--transport lane`: replication sub-lane,
//! commit notices on X-FD heartbeats, elections started by X-FD).

mod common;

use common::Conn;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use xlane_kv::resp::Reply;

const DEADLINE: Duration = Duration::from_secs(20);

struct Cluster {
    lane: bool,
    dir: PathBuf,
    peers: Vec<String>,
    clients: Vec<SocketAddr>,
    children: Vec<Option<Child>>,
    /// More arguments for every `xlane kv serve`.
    extra: Vec<String>,
    /// Each node's last ready line.
    ready: Vec<String>,
    /// Each node's later stdout lines (JSON events), as they come.
    events: Vec<Option<std::sync::mpsc::Receiver<String>>>,
}

impl Cluster {
    fn new(lane: bool) -> Cluster {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let dir =
            std::env::temp_dir().join(format!("xlane-kv-cluster-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let mut peers = Vec::new();
        let mut clients = Vec::new();
        for id in 1..=3 {
            // On the lane the next port is the member's X-FD port.
            let raft = if lane {
                xlane_testports::raft_pair()
            } else {
                xlane_testports::raft()
            };
            let client = xlane_testports::tcp();
            peers.push(format!("{id}={raft}/{client}"));
            clients.push(client);
        }
        Cluster {
            lane,
            dir,
            peers,
            clients,
            children: vec![None, None, None],
            extra: Vec::new(),
            ready: vec![String::new(); 3],
            events: vec![None, None, None],
        }
    }

    /// Starts node `id` (1-based) and waits for its ready line.
    fn start(&mut self, id: usize) {
        self.start_all(&[id]);
    }

    /// Starts the nodes `ids` (1-based) at once and waits for their ready
    /// lines (under a controller each waits for the others' trees).
    fn start_all(&mut self, ids: &[usize]) {
        let cmds: Vec<(usize, Command)> = ids.iter().map(|&id| (id, self.command(id))).collect();
        let started: Vec<_> = std::thread::scope(|s| {
            let hs: Vec<_> = cmds
                .into_iter()
                .map(|(id, mut cmd)| {
                    s.spawn(move || (id, common::spawn_until_ready(cmd.stderr(Stdio::inherit()))))
                })
                .collect();
            hs.into_iter().map(|h| h.join().expect("start")).collect()
        });
        for (id, (child, out, line)) in started {
            self.ready[id - 1] = line;
            self.children[id - 1] = Some(child);
            let (tx, rx) = std::sync::mpsc::channel();
            std::thread::spawn(move || {
                for l in out.lines().map_while(Result::ok) {
                    if tx.send(l).is_err() {
                        return;
                    }
                }
            });
            self.events[id - 1] = Some(rx);
        }
    }

    fn command(&self, id: usize) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_xlane"));
        cmd.args(["kv", "serve", "--id", &id.to_string()]);
        for p in &self.peers {
            cmd.args(["--peer", p]);
        }
        let data = self.dir.join(format!("n{id}"));
        // A small snapshot interval so the restarted node is sent a
        // snapshot (over TCP) instead of the compacted log.
        cmd.arg("--data")
            .arg(&data)
            .args(["--fsync", "never", "--snapshot-interval", "20"]);
        if self.lane {
            cmd.args(["--transport", "lane"]);
        }
        cmd.args(&self.extra);
        cmd
    }

    /// The next event line of node `id` that satisfies `want`, waiting at
    /// most `timeout` in all.
    fn event(
        &self,
        id: usize,
        timeout: Duration,
        want: impl Fn(&serde_json::Value) -> bool,
    ) -> Option<serde_json::Value> {
        let rx = self.events[id - 1].as_ref()?;
        let end = Instant::now() + timeout;
        loop {
            let left = end.checked_duration_since(Instant::now())?;
            let l = rx.recv_timeout(left).ok()?;
            let v: serde_json::Value = serde_json::from_str(&l).expect("JSON event line");
            if want(&v) {
                return Some(v);
            }
        }
    }

    /// `kill -9` by PID (Child::kill sends SIGKILL) and reap.
    fn kill(&mut self, id: usize) {
        if let Some(mut c) = self.children[id - 1].take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// SIGTERM by PID, then wait: the exit status.
    fn terminate(&mut self, id: usize) -> std::process::ExitStatus {
        let mut c = self.children[id - 1].take().expect("running");
        // SAFETY: plain syscall on the PID of a child we started.
        let r = unsafe { libc::kill(c.id() as libc::pid_t, libc::SIGTERM) };
        assert_eq!(r, 0, "kill: {}", std::io::Error::last_os_error());
        c.wait().expect("wait")
    }

    /// Node (1-based) whose client address is `addr`.
    fn node_of(&self, addr: &str) -> usize {
        self.clients
            .iter()
            .position(|c| c.to_string() == addr)
            .map(|i| i + 1)
            .unwrap_or_else(|| panic!("unknown address {addr}"))
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for id in 1..=3 {
            self.kill(id);
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Finds the leader among `alive` nodes: a write succeeds there; the others
/// answer MOVED to it.
fn find_leader(cl: &Cluster, alive: &[usize]) -> usize {
    let start = Instant::now();
    while start.elapsed() < DEADLINE {
        for &id in alive {
            let mut c = Conn::open(cl.clients[id - 1]);
            match c.cmd(&["SET", "probe", &id.to_string()]) {
                Reply::Simple(s) if s == "OK" => return id,
                Reply::Error(e) if e.starts_with("MOVED ") => {
                    let to = e.rsplit(' ').next().unwrap_or_default();
                    let l = cl.node_of(to);
                    if alive.contains(&l) {
                        let mut lc = Conn::open(cl.clients[l - 1]);
                        if lc.cmd(&["SET", "probe", "x"]) == Reply::ok() {
                            return l;
                        }
                    }
                }
                _ => {}
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("no leader among {alive:?} within {DEADLINE:?}");
}

fn key(i: usize) -> String {
    format!("key:{i:04}")
}

fn val(i: usize) -> String {
    format!("value-{i}")
}

/// Reads every key on node `id` (linearizable: read barrier then local
/// store), retrying while the node has no leader yet.
fn assert_all_keys(cl: &Cluster, id: usize, n: usize) {
    let start = Instant::now();
    let cmds: Vec<Vec<String>> = (0..n).map(|i| vec!["GET".into(), key(i)]).collect();
    let cmds: Vec<Vec<&str>> = cmds
        .iter()
        .map(|c| c.iter().map(String::as_str).collect())
        .collect();
    loop {
        let replies = Conn::open(cl.clients[id - 1]).pipeline(&cmds);
        let bad: Vec<(usize, &Reply)> = replies
            .iter()
            .enumerate()
            .filter(|(i, r)| **r != Reply::bulk(val(*i)))
            .collect();
        if bad.is_empty() {
            return;
        }
        assert!(
            start.elapsed() < DEADLINE,
            "node {id}: {} keys wrong, first {:?}",
            bad.len(),
            bad[0]
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn three_node_failover_and_catch_up() {
    failover_and_catch_up(false);
}

#[test]
fn three_node_failover_and_catch_up_over_the_lane() {
    failover_and_catch_up(true);
}

fn failover_and_catch_up(lane: bool) {
    let mut cl = Cluster::new(lane);
    for id in 1..=3 {
        cl.start(id);
    }
    let leader = find_leader(&cl, &[1, 2, 3]);
    let follower = (1..=3).find(|&i| i != leader).expect("follower");

    // 200 writes, pipelined in chunks of 50.
    const N: usize = 200;
    let mut lc = Conn::open(cl.clients[leader - 1]);
    for chunk in (0..N).collect::<Vec<_>>().chunks(50) {
        let cmds: Vec<Vec<String>> = chunk
            .iter()
            .map(|&i| vec!["SET".into(), key(i), val(i)])
            .collect();
        let cmds: Vec<Vec<&str>> = cmds
            .iter()
            .map(|c| c.iter().map(String::as_str).collect())
            .collect();
        for r in lc.pipeline(&cmds) {
            assert_eq!(r, Reply::ok());
        }
    }
    assert_all_keys(&cl, leader, N);
    // A 40 KB value: raft messages over 16 KiB travel over TCP.
    let big = "b".repeat(40_000);
    assert_eq!(lc.cmd(&["SET", "big", &big]), Reply::ok());
    assert_eq!(lc.cmd(&["GET", "big"]), Reply::bulk(big.clone()));

    // A follower redirects writes to the leader and serves linearizable reads.
    let leader_addr = cl.clients[leader - 1].to_string();
    match Conn::open(cl.clients[follower - 1]).cmd(&["SET", "foo", "x"]) {
        Reply::Error(e) => assert_eq!(e, format!("MOVED 12182 {leader_addr}")),
        other => panic!("follower answered {other:?}"),
    }
    assert_all_keys(&cl, follower, N);

    // kill -9 the leader; a new one takes over with every acknowledged write.
    cl.kill(leader);
    let alive: Vec<usize> = (1..=3).filter(|&i| i != leader).collect();
    let new_leader = find_leader(&cl, &alive);
    assert_ne!(new_leader, leader);
    assert_all_keys(&cl, new_leader, N);
    let mut nc = Conn::open(cl.clients[new_leader - 1]);
    // Unpipelined writes: one log entry each, several snapshot intervals.
    for i in 0..60 {
        assert_eq!(nc.cmd(&["SET", "more", &i.to_string()]), Reply::ok());
    }
    assert_eq!(nc.cmd(&["SET", "after", "failover"]), Reply::ok());

    // The killed node restarts from its data dir and catches up.
    cl.start(leader);
    assert_all_keys(&cl, leader, N);
    let start = Instant::now();
    loop {
        let r = Conn::open(cl.clients[leader - 1]).cmd(&["GET", "after"]);
        if r == Reply::bulk("failover") {
            break;
        }
        assert!(start.elapsed() < DEADLINE, "restarted node: {r:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(
        Conn::open(cl.clients[leader - 1]).cmd(&["GET", "big"]),
        Reply::bulk(big)
    );
    let new_addr = cl.clients[new_leader - 1].to_string();
    match Conn::open(cl.clients[leader - 1]).cmd(&["SET", "foo", "y"]) {
        Reply::Error(e) => assert!(e.ends_with(&new_addr), "{e}"),
        other => panic!("restarted node answered {other:?}"),
    }
    assert_eq!(
        nc.cmd(&["DBSIZE"]),
        Conn::open(cl.clients[leader - 1]).cmd(&["DBSIZE"])
    );
}

/// `xlane ctl serve` on a free port of 127.0.0.1 with a star topology of
/// the three members (`kv1`..`kv3`, 10 Gbit/s links) and a key per member.
struct ControllerProc {
    addr: SocketAddr,
    keys: PathBuf,
    child: Child,
}

impl ControllerProc {
    fn start(dir: &std::path::Path) -> ControllerProc {
        let hosts = ["kv1", "kv2", "kv3"];
        let mut topo = String::from("schema = 1\n");
        for h in hosts {
            topo += &format!("[[node]]\nname = \"{h}\"\nkind = \"host\"\n");
        }
        topo += "[[node]]\nname = \"sw\"\nkind = \"switch\"\n";
        for h in hosts {
            for (a, b) in [(h, "sw"), ("sw", h)] {
                topo += &format!(
                    "[[link]]\nfrom = \"{a}\"\nto = \"{b}\"\nbandwidth_bps = 10000000000\n\
                     express_queue_pkts = 64\nbest_effort_queue_pkts = 1000\n\
                     min_latency_ns = 5000\nmax_jitter_ns = 50000\n"
                );
            }
        }
        let topo_path = dir.join("topo.toml");
        std::fs::write(&topo_path, topo).expect("write topology");
        let keys = dir.join("keys.toml");
        let st = Command::new(env!("CARGO_BIN_EXE_xlane"))
            .args(["ctl", "keygen", "--hosts", "kv1,kv2,kv3", "--out"])
            .arg(&keys)
            .status()
            .expect("xlane ctl keygen");
        assert!(st.success());
        let addr = xlane_testports::tcp();
        let mut child = Command::new(env!("CARGO_BIN_EXE_xlane"))
            .args(["ctl", "serve", "--topology"])
            .arg(&topo_path)
            .arg("--keys")
            .arg(&keys)
            .arg("--state")
            .arg(dir.join("ctl-state"))
            .args(["--listen", &addr.to_string()])
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn xlane ctl serve");
        let err = child.stderr.take().expect("stderr");
        let mut line = String::new();
        BufReader::new(err).read_line(&mut line).expect("ctl line");
        assert!(line.contains("listening on"), "controller: {line}");
        ControllerProc { addr, keys, child }
    }

    /// Every tunnel the controller holds: (id, sender, receivers, period).
    fn tunnels(&self) -> Vec<(u64, String, Vec<String>, u64)> {
        let keys = xlane_ctl::auth::Keys::from_file(&self.keys).expect("keys");
        let mut c = xlane_ctl::client::Client::connect(self.addr, "kv1", keys.get("kv1").unwrap())
            .expect("connect to the controller");
        let (list, _) = c.list().expect("list");
        list.into_iter()
            .map(|t| (t.tunnel.0, t.sender, t.receivers, t.resources.period_ns))
            .collect()
    }
}

impl Drop for ControllerProc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// With `--controller`, every member asks the controller for its lane
/// tunnels before its first packet, runs the lane at the granted periods
/// and takes its timeouts from the announced ranges; a restarted member
/// gives back the tunnels of its earlier run. Frames are sealed with each
/// tree's key from the controller (`--tree-keys`): a restarted member's new
/// trees' keys are fetched by the others as they learn the trees.
#[test]
fn lane_tunnels_and_timeouts_come_from_the_controller() {
    let mut cl = Cluster::new(true);
    let ctl = ControllerProc::start(&cl.dir);
    cl.extra = vec![
        "--controller".into(),
        ctl.addr.to_string(),
        "--ctl-keys".into(),
        ctl.keys.display().to_string(),
        "--lane-period-us".into(),
        "200".into(),
        "--tree-keys".into(),
    ];
    cl.start_all(&[1, 2, 3]);
    for (i, line) in cl.ready.iter().enumerate() {
        let v: serde_json::Value = serde_json::from_str(line).expect("ready JSON");
        let tunnels = v["tunnels"].as_array().expect("tunnels");
        let of = |what: &str| -> Vec<&serde_json::Value> {
            tunnels.iter().filter(|t| t["what"] == what).collect()
        };
        let (repl, fd) = (of("replication"), of("x-fd"));
        assert_eq!((repl.len(), fd.len()), (1, 1), "node {}: {line}", i + 1);
        let n = |t: &serde_json::Value, k: &str| t[k].as_u64().expect(k);
        for t in repl.iter().chain(&fd) {
            assert_eq!(
                t["to"].as_array().map(Vec::len),
                Some(2),
                "a tree to both others"
            );
            assert!(n(t, "min_latency_ns") > 0 && n(t, "min_latency_ns") < n(t, "max_latency_ns"));
            assert!(n(t, "frame_bytes") < 1500, "σ by the burst policy: {t}");
        }
        assert!(n(repl[0], "period_ns") >= 200_000, "{}", repl[0]);
        let lane = &v["lane"];
        assert_eq!(n(lane, "repl_period_ns"), n(repl[0], "period_ns"), "{line}");
        assert_eq!(n(lane, "fd_period_ns"), n(fd[0], "period_ns"), "{line}");
        assert_eq!(
            n(lane, "repl_frame_bytes"),
            n(repl[0], "frame_bytes"),
            "{line}"
        );
        assert!(
            n(lane, "fd_lambda_ns") >= n(fd[0], "max_latency_ns"),
            "{line}"
        );
        let announced = tunnels
            .iter()
            .map(|t| n(t, "max_latency_ns"))
            .max()
            .unwrap();
        assert_eq!(
            n(&v, "max_latency_ns"),
            announced,
            "raft's bound is the announced one"
        );
    }
    let before = ctl.tunnels();
    assert_eq!(before.len(), 6, "two trees per member: {before:?}");

    // The member whose X-FD tree was granted first (the lowest id; the
    // members ask at once): the trees granted after it share its links, so
    // the controller announced it new ranges (bandwidthChanged), which it
    // follows: Λ covers its X-FD tree's new bound.
    let fd_tree = |i: usize| -> u64 {
        let v: serde_json::Value = serde_json::from_str(&cl.ready[i]).expect("ready JSON");
        v["tunnels"]
            .as_array()
            .expect("tunnels")
            .iter()
            .find(|t| t["what"] == "x-fd")
            .and_then(|t| t["tunnel"].as_u64())
            .expect("x-fd tree")
    };
    let first = (0..3).min_by_key(|&i| fd_tree(i)).expect("members") + 1;
    let changed = cl
        .event(first, Duration::from_secs(10), |v| {
            v["event"] == "bandwidth_changed" && v["what"] == "x-fd"
        })
        .unwrap_or_else(|| panic!("member {first} reports its X-FD tree's new range"));
    assert_eq!(
        changed["tunnel"].as_u64(),
        Some(fd_tree(first - 1)),
        "{changed}"
    );
    assert_eq!(changed["reason"], "Te", "{changed}");
    let (max, lambda) = (
        changed["max_latency_ns"].as_u64().expect("max"),
        changed["fd_lambda_ns"].as_u64().expect("fd_lambda_ns"),
    );
    assert!(lambda >= max, "{changed}");
    assert!(changed["election_timeout_holds"].is_boolean(), "{changed}");

    // The cluster works over the granted lane.
    let leader = find_leader(&cl, &[1, 2, 3]);
    let mut c = Conn::open(cl.clients[leader - 1]);
    let n = 50;
    let cmds: Vec<Vec<String>> = (0..n).map(|i| vec!["SET".into(), key(i), val(i)]).collect();
    let cmds: Vec<Vec<&str>> = cmds
        .iter()
        .map(|c| c.iter().map(String::as_str).collect())
        .collect();
    assert!(c.pipeline(&cmds).iter().all(|r| *r == Reply::ok()));
    for id in 1..=3 {
        assert_all_keys(&cl, id, n);
    }

    // A restarted member releases its old tunnels and gets new ones.
    let follower = (1..=3).find(|&i| i != leader).unwrap();
    let name = format!("kv{follower}");
    let old: Vec<u64> = before.iter().filter(|t| t.1 == name).map(|t| t.0).collect();
    cl.kill(follower);
    cl.start(follower);
    let after = ctl.tunnels();
    assert_eq!(after.len(), 6, "{after:?}");
    let new: Vec<u64> = after.iter().filter(|t| t.1 == name).map(|t| t.0).collect();
    assert_eq!(new.len(), 2);
    assert!(
        new.iter().all(|t| !old.contains(t)),
        "old {old:?} new {new:?}"
    );
    assert_all_keys(&cl, follower, n);

    // The leader opens the restarted member's frames, sealed under its new
    // trees' keys: with the third member down, its acknowledgements make
    // the quorum.
    let third = (1..=3).find(|&i| i != leader && i != follower).unwrap();
    cl.kill(third);
    assert_eq!(c.cmd(&["SET", "after-restart", "1"]), Reply::ok());
    cl.start(third);

    // A member stopped with SIGTERM gives its tunnels back and exits 0.
    let status = cl.terminate(follower);
    assert!(status.success(), "{status}");
    let left = ctl.tunnels();
    assert_eq!(left.len(), 4, "{left:?}");
    assert!(left.iter().all(|t| t.1 != name), "{left:?}");
}

/// A one-member cluster on the RAM disk, started in the background; its
/// ready line.
fn start_ram_disk_member(raft: SocketAddr, client: SocketAddr) -> (Child, serde_json::Value) {
    let (child, _, line) = common::spawn_until_ready(
        Command::new(env!("CARGO_BIN_EXE_xlane"))
            .args(["kv", "serve", "--id", "1", "--ram-disk", "--peer"])
            .arg(format!("1={raft}/{client}"))
            .stderr(Stdio::inherit()),
    );
    (child, serde_json::from_str(&line).expect("ready JSON"))
}

/// `--ram-disk` keeps one log per member id and raft port: a member of
/// another cluster with the same id does not replay it, the same member
/// restarted does.
#[test]
fn ram_disk_logs_are_per_member_and_raft_port() {
    let (raft_a, raft_b) = (xlane_testports::raft(), xlane_testports::raft());
    let client = xlane_testports::tcp();
    let dir_of = |v: &serde_json::Value| PathBuf::from(v["data"].as_str().expect("data"));
    let stop = |mut c: Child| {
        let _ = c.kill();
        let _ = c.wait();
    };
    let (a, v) = start_ram_disk_member(raft_a, client);
    let dir_a = dir_of(&v);
    assert!(
        dir_a.ends_with(format!("xlane-kv-1-{}", raft_a.port())),
        "{v}"
    );
    let deadline = Instant::now() + DEADLINE;
    while Conn::open(client).cmd(&["SET", "only-in", "a"]) != Reply::ok() {
        assert!(Instant::now() < deadline, "the member never led");
        std::thread::sleep(Duration::from_millis(20));
    }
    stop(a);
    let (b, v) = start_ram_disk_member(raft_b, client);
    let dir_b = dir_of(&v);
    assert_ne!(dir_a, dir_b);
    assert_eq!(v["log_records_replayed"].as_u64(), Some(0), "{v}");
    stop(b);
    let (a, v) = start_ram_disk_member(raft_a, client);
    assert!(v["log_records_replayed"].as_u64() > Some(0), "{v}");
    stop(a);
    for d in [dir_a, dir_b] {
        let _ = std::fs::remove_dir_all(d);
    }
}
