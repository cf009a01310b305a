//! A raft group of xlane kv members on loopback, for the end-to-end tests:
//! start one and find its leader.

use std::collections::BTreeMap;
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};
use xlane_kv::raft::{LogFsync, StorageConfig};
use xlane_kv::resp::{decode_reply, encode_command, Limits, Reply};
use xlane_kv::{Peer, RaftConfig, RaftReplicator};

/// Raft bounds of the test groups: a 10 ms tick and a latency bound of
/// 250 ms, so that an election takes 0.5–1 s. A CI machine under load
/// stalls a member's thread for tens of ms; the tests that are not about
/// failover must not see leaders change then.
pub const TEST_PERIOD_NS: u64 = 10_000_000;
/// See [`TEST_PERIOD_NS`].
pub const TEST_LATENCY_NS: u64 = 250_000_000;

/// Sends one command on a fresh connection and returns its reply.
pub fn call(addr: &str, words: &[&str]) -> std::io::Result<Reply> {
    use std::io::{Read, Write};
    let mut s = TcpStream::connect(addr)?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut out = Vec::new();
    let args: Vec<Vec<u8>> = words.iter().map(|w| w.as_bytes().to_vec()).collect();
    encode_command(&args, &mut out);
    s.write_all(&out)?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        if let Ok(Some((r, _))) = decode_reply(&buf) {
            return Ok(r);
        }
        let n = s.read(&mut chunk)?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// Members 1..=n, their addresses and log directories.
pub struct Cluster {
    peers: BTreeMap<u64, Peer>,
    nodes: Vec<RaftReplicator>,
    dirs: Vec<tempfile::TempDir>,
}

impl Cluster {
    /// Starts `n` members and returns once one of them leads (a write
    /// through it succeeds).
    pub fn start(n: u64) -> Cluster {
        let listeners: Vec<TcpListener> = (0..n)
            .map(|_| TcpListener::bind("127.0.0.1:0").expect("listen"))
            .collect();
        let peers: BTreeMap<u64, Peer> = (1..=n)
            .map(|id| {
                let client = listeners[id as usize - 1].local_addr().expect("addr");
                let peer = Peer {
                    raft: xlane_testports::raft(),
                    client: client.to_string(),
                };
                (id, peer)
            })
            .collect();
        let dirs: Vec<_> = (0..n).map(|_| tempfile::tempdir().expect("dir")).collect();
        let mut c = Cluster {
            peers,
            nodes: Vec::new(),
            dirs,
        };
        c.nodes = listeners
            .into_iter()
            .zip(1..=n)
            .map(|(l, id)| c.member(id, l))
            .collect();
        c.wait_leader();
        c
    }

    fn member(&self, id: u64, listener: TcpListener) -> RaftReplicator {
        let mut st = StorageConfig::new(self.dirs[id as usize - 1].path());
        st.fsync = LogFsync::Never;
        let cfg = RaftConfig::new(id, self.peers.clone(), st, TEST_PERIOD_NS, TEST_LATENCY_NS)
            .expect("cfg");
        let stats = Arc::new(xlane_kv::session::Stats::default());
        RaftReplicator::start_serving(cfg, listener, Limits::default(), stats)
            .expect("start")
            .0
    }

    /// Member `id`'s client address.
    pub fn addr(&self, id: u64) -> String {
        self.peers[&id].client.clone()
    }

    /// The leader as the running members see it, once they agree and it
    /// takes a write; panics after 30 s.
    pub fn wait_leader(&self) -> u64 {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let seen: Vec<u64> = self.nodes.iter().map(|n| n.leader_id()).collect();
            let l = seen[0];
            if l != 0
                && seen.iter().all(|&s| s == l)
                && matches!(call(&self.addr(l), &["del", "up"]), Ok(Reply::Integer(_)))
            {
                return l;
            }
            assert!(Instant::now() < deadline, "no leader: {seen:?}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// A member that does not lead.
    pub fn follower(&self) -> u64 {
        let l = self.wait_leader();
        (1..=self.nodes.len() as u64)
            .find(|&i| i != l)
            .expect("a follower")
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for n in &self.nodes {
            n.shutdown();
        }
    }
}
