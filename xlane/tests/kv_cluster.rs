//! A 3-node replicated `xlane kv serve` cluster of real processes on
//! loopback: leader discovery through `MOVED`, 200 pipelined writes,
//! linearizable reads on the leader and a follower, `kill -9` of the leader,
//! failover with every acknowledged write present, and catch-up of the
//! restarted node from its data directory. Run twice: raft over plain UDP,
//! and X-Raft over the lane (`--transport lane`: replication sub-lane,
//! commit notices on X-FD heartbeats, elections started by X-FD).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use xlane_kv::resp::{decode_reply, encode_command, Reply};

const DEADLINE: Duration = Duration::from_secs(20);

/// A port free for both UDP and TCP (raft uses both).
fn free_raft_addr() -> SocketAddr {
    loop {
        let u = UdpSocket::bind("127.0.0.1:0").expect("bind udp");
        let a = u.local_addr().expect("addr");
        if TcpListener::bind(a).is_ok() {
            return a;
        }
    }
}

fn free_tcp_addr() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind tcp");
    l.local_addr().expect("addr")
}

/// A raft port whose next port is free for UDP too (the X-FD port in lane
/// mode), not next to any port in `taken`.
fn free_lane_addr(taken: &[SocketAddr]) -> SocketAddr {
    loop {
        let a = free_raft_addr();
        let mut b = a;
        b.set_port(a.port().wrapping_add(1));
        let near = taken.iter().any(|t| t.port().abs_diff(a.port()) <= 1);
        if a.port() < u16::MAX && !near && UdpSocket::bind(b).is_ok() {
            return a;
        }
    }
}

struct Cluster {
    lane: bool,
    dir: PathBuf,
    peers: Vec<String>,
    clients: Vec<SocketAddr>,
    children: Vec<Option<Child>>,
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
        let mut rafts = Vec::new();
        for id in 1..=3 {
            let raft = if lane {
                free_lane_addr(&rafts)
            } else {
                free_raft_addr()
            };
            rafts.push(raft);
            let client = free_tcp_addr();
            peers.push(format!("{id}={raft}/{client}"));
            clients.push(client);
        }
        Cluster {
            lane,
            dir,
            peers,
            clients,
            children: vec![None, None, None],
        }
    }

    /// Starts node `id` (1-based) and waits for its ready line.
    fn start(&mut self, id: usize) {
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
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn xlane kv serve");
        let out = child.stdout.take().expect("stdout");
        let mut line = String::new();
        BufReader::new(out)
            .read_line(&mut line)
            .expect("ready line");
        assert!(line.contains("\"event\":\"ready\""), "node {id}: {line}");
        self.children[id - 1] = Some(child);
    }

    /// `kill -9` by PID (Child::kill sends SIGKILL) and reap.
    fn kill(&mut self, id: usize) {
        if let Some(mut c) = self.children[id - 1].take() {
            let _ = c.kill();
            let _ = c.wait();
        }
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

/// A minimal pipelining RESP client.
struct Conn {
    s: TcpStream,
    buf: Vec<u8>,
}

impl Conn {
    fn open(addr: SocketAddr) -> Conn {
        let s = TcpStream::connect(addr).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        Conn { s, buf: Vec::new() }
    }

    fn pipeline(&mut self, cmds: &[Vec<&str>]) -> Vec<Reply> {
        let mut out = Vec::new();
        for c in cmds {
            let args: Vec<Vec<u8>> = c.iter().map(|a| a.as_bytes().to_vec()).collect();
            encode_command(&args, &mut out);
        }
        self.s.write_all(&out).expect("write");
        let mut replies = Vec::new();
        let mut chunk = [0u8; 16 << 10];
        while replies.len() < cmds.len() {
            match decode_reply(&self.buf).expect("bad reply") {
                Some((r, n)) => {
                    self.buf.drain(..n);
                    replies.push(r);
                }
                None => {
                    let n = self.s.read(&mut chunk).expect("read");
                    assert!(n > 0, "connection closed");
                    self.buf.extend_from_slice(&chunk[..n]);
                }
            }
        }
        replies
    }

    fn cmd(&mut self, c: &[&str]) -> Reply {
        self.pipeline(&[c.to_vec()]).remove(0)
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
