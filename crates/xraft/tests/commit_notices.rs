//! Commit notices wait for the entries in flight (`coalesce::tell_commit`): three nodes,
//! messages carried by hand, no ticks (so no heartbeat carries a commit index).

use xlane_xraft::raft::eraftpb::MessageType;
use xlane_xraft::raft::StateRole;
use xlane_xraft::{MemDisk, MemLog, Message, NodeConfig, RaftNode, StateMachine};

#[derive(Default)]
struct Count(u64);

impl StateMachine for Count {
    fn apply(&mut self, _index: u64, _op: &[u8]) -> Vec<u8> {
        self.0 += 1;
        Vec::new()
    }
    fn snapshot(&self) -> Vec<u8> {
        self.0.to_le_bytes().to_vec()
    }
    fn restore(&mut self, data: &[u8]) {
        self.0 = data.try_into().map_or(0, u64::from_le_bytes);
    }
}

struct Cluster {
    nodes: Vec<RaftNode<Count, MemLog>>,
}

impl Cluster {
    fn new() -> Cluster {
        let nodes = (1..=3)
            .map(|id| {
                let (st, _) = MemLog::open(&MemDisk::new());
                let cfg = NodeConfig {
                    snapshot_thread: false,
                    election_seed: Some(id),
                    ..NodeConfig::new(id)
                };
                RaftNode::new(cfg, st, Count::default(), &[1, 2, 3]).expect("node")
            })
            .collect();
        Cluster { nodes }
    }

    fn node(&mut self, id: u64) -> &mut RaftNode<Count, MemLog> {
        &mut self.nodes[id as usize - 1]
    }

    /// One Ready of node `id`: the messages it sends.
    fn ready(&mut self, id: u64) -> Vec<Message> {
        self.node(id).handle_ready().expect("ready").messages
    }

    fn deliver(&mut self, msgs: Vec<Message>) {
        for m in msgs {
            let to = m.to;
            self.node(to).step(m).expect("step");
        }
    }

    /// Delivers and readies until no node has anything to say.
    fn settle(&mut self, mut msgs: Vec<Message>) {
        for _ in 0..100 {
            self.deliver(std::mem::take(&mut msgs));
            for id in 1..=3 {
                msgs.extend(self.ready(id));
            }
            if msgs.is_empty() {
                return;
            }
        }
        panic!("the cluster did not settle");
    }
}

/// Empty appends (commit notices) among `msgs`: (to, commit).
fn notices(msgs: &[Message]) -> Vec<(u64, u64)> {
    msgs.iter()
        .filter(|m| m.get_msg_type() == MessageType::MsgAppend && m.entries.is_empty())
        .map(|m| (m.to, m.commit))
        .collect()
}

fn for_peer(msgs: &[Message], to: u64) -> Vec<Message> {
    msgs.iter().filter(|m| m.to == to).cloned().collect()
}

#[test]
fn a_commit_notice_waits_while_entries_are_in_flight() {
    let mut c = Cluster::new();
    c.node(1).campaign().expect("campaign");
    c.settle(Vec::new());
    assert_eq!(c.node(1).role(), StateRole::Leader);
    let settled = c.node(1).commit_index();
    assert!((2..=3).all(|id| c.nodes[id - 1].applied_index() == settled));

    // Two batches in flight: A, then B before A's answers came back.
    c.node(1).propose(b"a".to_vec()).expect("propose a");
    let append_a = c.ready(1);
    c.node(1).propose(b"b".to_vec()).expect("propose b");
    let append_b = c.ready(1);
    let (a, b) = (settled + 1, settled + 2);
    assert_eq!(c.node(1).raw().raft.raft_log.last_index(), b);

    // A is acknowledged: committed on the leader, but B is in flight, so the
    // followers hear of the commit with what comes next, not in a notice of its own.
    c.deliver(append_a);
    let acks_a: Vec<Message> = (2..=3).flat_map(|id| c.ready(id)).collect();
    c.deliver(acks_a);
    let after_a = c.ready(1);
    assert_eq!(c.node(1).commit_index(), a);
    assert_eq!(notices(&after_a), [], "{after_a:?}");
    assert_eq!(c.node(1).state_machine().0, 1, "A is applied on the leader");

    // B is acknowledged: nothing is in flight any more, so each follower gets one
    // notice with the last index.
    c.deliver(append_b);
    let acks_b: Vec<Message> = (2..=3).flat_map(|id| c.ready(id)).collect();
    c.deliver(acks_b);
    let after_b = c.ready(1);
    assert_eq!(c.node(1).commit_index(), b);
    assert_eq!(notices(&after_b), [(2, b), (3, b)], "{after_b:?}");

    // The notice is all a follower needs to apply both.
    assert_eq!(c.nodes[1].applied_index(), settled);
    c.deliver(for_peer(&after_b, 2));
    let _ = c.ready(2);
    assert_eq!(c.nodes[1].applied_index(), b);

    // A sequential write (nothing else in flight) is told at once.
    c.deliver(for_peer(&after_b, 3));
    c.settle(Vec::new());
    c.node(1).propose(b"c".to_vec()).expect("propose c");
    let append_c = c.ready(1);
    c.deliver(append_c);
    let acks_c: Vec<Message> = (2..=3).flat_map(|id| c.ready(id)).collect();
    c.deliver(acks_c);
    let after_c = c.ready(1);
    assert_eq!(notices(&after_c), [(2, b + 1), (3, b + 1)], "{after_c:?}");
}
