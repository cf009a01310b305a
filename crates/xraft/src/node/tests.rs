use super::*;

#[test]
fn timeouts_table() {
    // (period, max latency) -> (heartbeat, election, tick)
    let cases = [
        (10_000u64, 5_000u64, (1usize, 5usize, 10_000u64)),
        (10_000, 0, (1, 4, 10_000)),
        (1_000, 20_000, (1, 44, 1_000)),
        (0, 0, (1, 4, 1)),
    ];
    for (p, l, want) in cases {
        let got = timeouts_from_bounds(p, l);
        assert_eq!(got, want, "period {p} latency {l}");
        assert!(got.1 > got.0);
        // Election timeout covers 3 heartbeats plus twice the latency bound.
        assert!(got.1 as u64 * got.2 >= 3 * got.0 as u64 * got.2 + 2 * l);
    }
}

/// Which single changes are accepted from which configuration.
#[test]
fn conf_change_checks() {
    use ConfChangeType::{AddLearnerNode as Learn, AddNode as Add, RemoveNode as Remove};
    let conf = |voters: &[u64], learners: &[u64], outgoing: &[u64]| ConfState {
        voters: voters.to_vec(),
        learners: learners.to_vec(),
        voters_outgoing: outgoing.to_vec(),
        ..Default::default()
    };
    type Row<'a> = (
        &'a str,
        &'a ConfState,
        ConfChangeType,
        u64,
        Result<(), ConfChangeError>,
    );
    let three = conf(&[1, 2, 3], &[], &[]);
    let with_learner = conf(&[1, 2, 3], &[5], &[]);
    let one = conf(&[1], &[], &[]);
    let joint = conf(&[1, 2, 4], &[], &[1, 2, 3]);
    let rows: &[Row] = &[
        ("add a new voter", &three, Add, 4, Ok(())),
        ("add id 0", &three, Add, 0, Err(ConfChangeError::ZeroId)),
        (
            "remove id 0",
            &three,
            Remove,
            0,
            Err(ConfChangeError::ZeroId),
        ),
        (
            "add a voter twice",
            &three,
            Add,
            2,
            Err(ConfChangeError::AlreadyMember(2)),
        ),
        ("promote a learner", &with_learner, Add, 5, Ok(())),
        ("add a learner", &three, Learn, 5, Ok(())),
        (
            "add a learner twice",
            &with_learner,
            Learn,
            5,
            Err(ConfChangeError::AlreadyMember(5)),
        ),
        (
            "a voter as learner",
            &three,
            Learn,
            1,
            Err(ConfChangeError::AlreadyMember(1)),
        ),
        ("remove a voter", &three, Remove, 3, Ok(())),
        ("remove a learner", &with_learner, Remove, 5, Ok(())),
        (
            "remove a stranger",
            &three,
            Remove,
            9,
            Err(ConfChangeError::NotMember(9)),
        ),
        (
            "remove the last voter",
            &one,
            Remove,
            1,
            Err(ConfChangeError::LastVoter(1)),
        ),
        (
            "anything while joint",
            &joint,
            Add,
            7,
            Err(ConfChangeError::Joint),
        ),
    ];
    for (name, conf, change, node, want) in rows {
        assert_eq!(check_conf_change(conf, *change, *node), *want, "{name}");
    }
}

#[test]
fn id_codec() {
    let id = ProposalId { node: 3, seq: 77 };
    assert_eq!(decode_id(&encode_id(id)), Some(id));
    assert_eq!(decode_id(&[1, 2]), None);
}

/// Counts the operations applied.
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

/// Runs Readys (ticking) until the single voter `node` leads.
fn lead<L: LogStore>(node: &mut RaftNode<Count, L>) {
    let tick = node.config().tick_ns;
    let mut now = 0;
    while !node.is_leader() {
        now += tick;
        node.tick_to(now);
        node.handle_ready().unwrap();
        assert!(now < 1000 * tick, "a single voter never led");
    }
}

/// A node on an in-memory log takes its snapshots through the same path as on
/// disk (a thread of their own), and restarts from what its log made durable:
/// the latest snapshot, then the committed entries after it.
#[test]
fn a_node_on_a_mem_log_restarts_from_its_disk() {
    use crate::mem_log::{MemDisk, MemLog};
    let disk = MemDisk::new();
    let cfg = NodeConfig {
        max_batch_ops: 1,
        snapshot_interval: 4,
        election_seed: Some(3),
        ..NodeConfig::new(1)
    };
    let (log, _) = MemLog::open(&disk);
    let mut node = RaftNode::new(cfg.clone(), log, Count::default(), &[1]).unwrap();
    lead(&mut node);
    for _ in 0..10 {
        node.propose(b"op".to_vec()).unwrap();
        node.handle_ready().unwrap();
    }
    let mut turns = 0;
    while node.snapshot_in_progress() {
        std::thread::sleep(std::time::Duration::from_millis(1));
        node.handle_ready().unwrap();
        turns += 1;
        assert!(turns < 10_000, "the snapshot was never installed");
    }
    assert_eq!(node.state_machine().0, 10);
    let compacted = node.storage().compacted_index();
    assert!(compacted > 1, "no snapshot taken");
    drop(node);
    let (log, report) = MemLog::open(&disk);
    assert!(report.snapshot_loaded);
    assert_eq!(log.compacted_index(), compacted);
    let mut node = RaftNode::new(cfg, log, Count::default(), &[1]).unwrap();
    lead(&mut node);
    node.handle_ready().unwrap();
    assert_eq!(node.state_machine().0, 10);
}
