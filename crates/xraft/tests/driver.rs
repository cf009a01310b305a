//! Threaded driver over an in-process transport: blocking propose / read_barrier.

mod common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{decode_frames, encode_frames};
use xlane_xraft::batch::{ReassemblyLimits, TrafficClass};
use xlane_xraft::driver::{Driver, DriverHandle, ReplicateError};
use xlane_xraft::{
    ConfChangeError, ConfChangeType, DiskStorage, FsyncPolicy, MessageEndpoint, NodeConfig,
    RaftNode, StateMachine, StorageConfig, Transport,
};

#[derive(Clone, Default)]
struct Shared(Arc<Mutex<Vec<Vec<u8>>>>);

impl StateMachine for Shared {
    fn apply(&mut self, _index: u64, op: &[u8]) -> Vec<u8> {
        let mut v = self.0.lock().expect("lock");
        v.push(op.to_vec());
        (v.len() as u64).to_le_bytes().to_vec()
    }
    fn snapshot(&self) -> Vec<u8> {
        encode_frames(self.0.lock().expect("lock").iter())
    }
    fn restore(&mut self, data: &[u8]) {
        *self.0.lock().expect("lock") = decode_frames(data);
    }
}

type Peers = Arc<Mutex<HashMap<u64, DriverHandle>>>;

struct ChanTransport {
    me: u64,
    peers: Peers,
}

impl Transport for ChanTransport {
    fn send(&mut self, to: u64, _class: TrafficClass, bytes: Vec<u8>) {
        if let Some(h) = self.peers.lock().expect("lock").get(&to) {
            h.deliver(self.me, bytes);
        }
    }

    fn flush(&mut self) {}
}

#[test]
fn three_threaded_nodes_propose_and_read() {
    let tmp = tempfile::tempdir().expect("tmp");
    let peers: Peers = Arc::default();
    let mut drivers = Vec::new();
    let mut sms = Vec::new();
    for id in 1..=3u64 {
        let (st, _) = DiskStorage::open(StorageConfig {
            dir: tmp.path().join(format!("n{id}")),
            fsync: FsyncPolicy::Never,
            segment_bytes: 1 << 20,
        })
        .expect("open");
        let sm = Shared::default();
        sms.push(sm.clone());
        let cfg = NodeConfig::from_bounds(id, 1_000_000, 200_000);
        let node = RaftNode::new(cfg, st, sm, &[1, 2, 3]).expect("node");
        let ep = MessageEndpoint::new(256, 0, 8192, ReassemblyLimits::default()).expect("ep");
        let d = Driver::spawn(
            node,
            ep,
            ChanTransport {
                me: id,
                peers: peers.clone(),
            },
        );
        peers.lock().expect("lock").insert(id, d.handle());
        drivers.push(d);
    }
    let handles: Vec<DriverHandle> = drivers.iter().map(|d| d.handle()).collect();
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut done = 0;
    let mut leader = None;
    while done < 50 {
        assert!(Instant::now() < deadline, "no progress");
        let i = leader.unwrap_or(done % 3);
        match handles[i].propose(format!("op{done}").into_bytes()) {
            Ok(r) => {
                leader = Some(i);
                done += 1;
                assert!(u64::from_le_bytes(r.try_into().expect("8")) >= done as u64);
            }
            Err(ReplicateError::NotLeader(l)) if l >= 1 => leader = Some(l as usize - 1),
            Err(_) => {
                leader = None;
                std::thread::sleep(Duration::from_millis(5));
            }
        }
    }
    // A follower's read barrier sees all 50 acknowledged writes.
    let f = (leader.expect("leader") + 1) % 3;
    loop {
        assert!(Instant::now() < deadline, "read barrier never succeeded");
        if handles[f].read_barrier().is_ok() {
            break;
        }
    }
    assert!(sms[f].0.lock().expect("lock").len() >= 50);
    // Membership through the blocking handle: refusals come back typed, a change
    // returns once applied (node 4 never runs; the other three keep a quorum).
    let l = &handles[leader.expect("leader")];
    assert_eq!(
        l.propose_conf_change(ConfChangeType::RemoveNode, 9, Vec::new()),
        Err(ReplicateError::ConfChange(ConfChangeError::NotMember(9)))
    );
    assert!(matches!(
        handles[f].propose_conf_change(ConfChangeType::AddNode, 4, Vec::new()),
        Err(ReplicateError::NotLeader(_))
    ));
    for change in [ConfChangeType::AddNode, ConfChangeType::RemoveNode] {
        loop {
            assert!(Instant::now() < deadline, "{change:?} never applied");
            match l.propose_conf_change(change, 4, b"ctx".to_vec()) {
                Ok(()) => break,
                // Right after an election raft still counts its log as pending.
                Err(ReplicateError::ConfChange(ConfChangeError::Pending)) => {
                    std::thread::sleep(Duration::from_millis(5))
                }
                Err(e) => panic!("{change:?}: {e}"),
            }
        }
    }
    for d in drivers {
        d.stop();
    }
}
