//! Deterministic sans-IO cluster tests: an in-memory network with seeded drops, duplicates,
//! delays/reordering, partitions, and node crashes with restart from what the node's
//! in-memory log had synced. Messages cross a small-MTU express class (fragmented) or the regular class.

mod common;

use std::collections::{HashMap, HashSet};

use common::{decode_frames, encode_frames, Faults, Scenario, SimRaft};
use rand::Rng;
use xlane_xraft::node::ProposeError;
use xlane_xraft::raft::StateRole;
use xlane_xraft::{
    ConfChangeError, ConfChangeType, Event, LogStore, ProposalId, ReadId, StateMachine,
};

/// Replicated register log: the value is the number of applied ops; the full history is
/// kept so replicas can be compared exactly.
#[derive(Default, Debug)]
struct Counter {
    history: Vec<Vec<u8>>,
}

impl StateMachine for Counter {
    fn apply(&mut self, _index: u64, op: &[u8]) -> Vec<u8> {
        self.history.push(op.to_vec());
        (self.history.len() as u64).to_le_bytes().to_vec()
    }
    fn snapshot(&self) -> Vec<u8> {
        encode_frames(&self.history)
    }
    fn restore(&mut self, data: &[u8]) {
        self.history = decode_frames(data);
    }
    /// Membership changes join the history, so replicas (and snapshots) must agree on
    /// them and on their contexts too.
    fn apply_conf_change(&mut self, _index: u64, change: ConfChangeType, node: u64, ctx: &[u8]) {
        self.history.push(conf_record(change, node, ctx));
    }
}

fn conf_record(change: ConfChangeType, node: u64, ctx: &[u8]) -> Vec<u8> {
    let mut r = format!("conf {change:?} {node} ").into_bytes();
    r.extend_from_slice(ctx);
    r
}

/// Proposals and reads in flight, and what was acknowledged.
#[derive(Default)]
struct Tracker {
    pending: HashMap<(u64, ProposalId), Vec<u8>>,
    acked: Vec<(Vec<u8>, u64)>,
    reads: HashMap<(u64, ReadId), usize>,
    reads_ok: usize,
    snapshots_installed: usize,
    next_op: u64,
}

impl Scenario<Counter> for Tracker {
    fn on_events(
        &mut self,
        seed: u64,
        _step: u64,
        id: u64,
        node: &SimRaft<Counter>,
        events: Vec<Event>,
    ) {
        let history_len = node.state_machine().history.len();
        let history: Option<HashSet<Vec<u8>>> = None;
        let mut history = history;
        for ev in events {
            match ev {
                Event::Applied {
                    id: pid, result, ..
                } => {
                    if let Some(op) = self.pending.remove(&(id, pid)) {
                        let pos = u64::from_le_bytes(result.try_into().expect("8 bytes"));
                        self.acked.push((op, pos));
                    }
                }
                Event::Dropped { id: pid, .. } => {
                    self.pending.remove(&(id, pid));
                }
                Event::ReadReady { id: rid, .. } => {
                    if let Some(k) = self.reads.remove(&(id, rid)) {
                        let set = history.get_or_insert_with(|| {
                            node.state_machine().history.iter().cloned().collect()
                        });
                        for (op, _) in &self.acked[..k] {
                            assert!(
                                set.contains(op),
                                "seed {seed}: stale read on node {id}: misses acked op {} (len {history_len})",
                                String::from_utf8_lossy(op)
                            );
                        }
                        self.reads_ok += 1;
                    }
                }
                Event::ReadFailed { id: rid } => {
                    self.reads.remove(&(id, rid));
                }
                Event::SnapshotInstalled { .. } => self.snapshots_installed += 1,
                _ => {}
            }
        }
    }

    fn on_crash(&mut self, id: u64) {
        self.pending.retain(|(n, _), _| *n != id);
        self.reads.retain(|(n, _), _| *n != id);
    }
}

type Sim = common::Sim<Counter, Tracker>;

fn new_sim(seed: u64, n: u64, faults: Faults) -> Sim {
    Sim::new(seed, n, faults, Tracker::default())
}

impl Sim {
    fn propose(&mut self) {
        let Some(l) = self.leader() else { return };
        self.app.next_op += 1;
        let op = format!("s{}-op{}", self.seed, self.app.next_op).into_bytes();
        if let Some(node) = self.node_mut(l) {
            if let Ok(id) = node.propose(op.clone()) {
                self.app.pending.insert((l, id), op);
            }
        }
    }

    fn read(&mut self, on: u64) {
        let acked_now = self.app.acked.len();
        if let Some(node) = self.node_mut(on) {
            let id = node.read_index();
            self.app.reads.insert((on, id), acked_now);
        }
    }

    fn describe(&self) -> String {
        self.dump(|sm| format!("hist {}", sm.history.len()))
    }

    fn converged(&self, members: &[u64]) -> bool {
        self.committed_alike(members) && {
            let h0 = &self.node(members[0]).expect("live").state_machine().history;
            members
                .iter()
                .all(|id| &self.node(*id).expect("live").state_machine().history == h0)
        }
    }

    fn check_final(&self, members: &[u64]) {
        let seed = self.seed;
        let h0 = &self.node(members[0]).expect("live").state_machine().history;
        for id in members {
            let h = &self.node(*id).expect("live").state_machine().history;
            assert_eq!(h, h0, "seed {seed}: node {id} history differs");
        }
        let mut seen = HashSet::new();
        for op in h0 {
            assert!(seen.insert(op), "seed {seed}: duplicate op applied");
        }
        for (op, pos) in &self.app.acked {
            let at = (*pos as usize).checked_sub(1).expect("pos >= 1");
            assert_eq!(
                h0.get(at),
                Some(op),
                "seed {seed}: acknowledged op {} lost or misplaced",
                String::from_utf8_lossy(op)
            );
        }
    }
}

/// Runs a chaotic phase then heals and checks the invariants.
fn chaos(seed: u64, n: u64, steps: u64) -> (usize, usize) {
    // Printed so that any panic (also inside raft) is attributable to its seed.
    eprintln!("running seed {seed} n={n}");
    let mut sim = new_sim(
        seed,
        n,
        Faults {
            drop: 0.05,
            dup: 0.05,
            max_delay: 3,
        },
    );
    let max_faulty = ((n - 1) / 2) as usize;
    let mut down: HashMap<u64, u64> = HashMap::new(); // node -> step to recover
    for _ in 0..steps {
        // Fault injection.
        let step = sim.step;
        sim.recover_due(&mut down);
        if down.len() < max_faulty && sim.rng.gen_bool(0.01) {
            let victim = sim.rng.gen_range(1..=n);
            if let std::collections::hash_map::Entry::Vacant(e) = down.entry(victim) {
                let until = step + sim.rng.gen_range(20..120);
                e.insert(until);
                if sim.rng.gen_bool(0.5) {
                    sim.crash(victim);
                } else {
                    sim.isolated.insert(victim);
                }
            }
        }
        if sim.rng.gen_bool(0.3) {
            sim.propose();
        }
        if sim.rng.gen_bool(0.1) {
            let live = sim.live();
            let on = live[sim.rng.gen_range(0..live.len())];
            sim.read(on);
        }
        sim.run_step();
    }
    // Heal.
    sim.heal(&down);
    let members: Vec<u64> = (1..=n).collect();
    // A final proposal after healing makes the leader commit in its term.
    let mut extra = 0;
    while !sim.converged(&members) || extra < 30 {
        if extra == 10 {
            sim.propose();
        }
        sim.run_step();
        extra += 1;
        assert!(
            extra < 3000,
            "seed {seed}: no convergence after healing\n{}",
            sim.describe()
        );
    }
    sim.check_final(&members);
    let snaps: usize = sim.app.snapshots_installed;
    eprintln!(
        "seed {seed} n={n}: acked {} reads {} terms {} snapshots-installed {snaps} restarts {} log {}",
        sim.app.acked.len(),
        sim.app.reads_ok,
        sim.leaders.len(),
        sim.nodes.values().map(|s| s.incarnation).sum::<u64>(),
        sim.nodes[&1].node.as_ref().map_or(0, |n| n.commit_index()),
    );
    (sim.app.acked.len(), sim.app.reads_ok)
}

#[test]
fn chaos_three_nodes_many_seeds() {
    let mut acked = 0;
    let mut reads = 0;
    for seed in 0..20 {
        let (a, r) = chaos(seed, 3, 1500);
        acked += a;
        reads += r;
    }
    assert!(acked > 2000, "too little progress: {acked} acked");
    assert!(reads > 500, "too few reads: {reads}");
}

#[test]
fn chaos_five_nodes_many_seeds() {
    let mut acked = 0;
    for seed in 100..112 {
        let (a, _) = chaos(seed, 5, 1200);
        acked += a;
    }
    assert!(acked > 1000, "too little progress: {acked} acked");
}

fn run_until(sim: &mut Sim, max: u64, mut pred: impl FnMut(&Sim) -> bool) {
    for _ in 0..max {
        if pred(sim) {
            return;
        }
        sim.run_step();
    }
    panic!(
        "seed {}: condition not reached in {max} steps\n{}",
        sim.seed,
        sim.describe()
    );
}

#[test]
fn membership_add_and_remove() {
    for seed in [7u64, 8, 9] {
        let mut sim = new_sim(
            seed,
            3,
            Faults {
                drop: 0.02,
                dup: 0.02,
                max_delay: 2,
            },
        );
        run_until(&mut sim, 500, |s| s.leader().is_some());
        for _ in 0..60 {
            sim.propose();
            sim.run_step();
        }
        // Add node 4 (empty storage; it catches up by snapshot since the log is compacted).
        sim.add_node(4, false);
        let l = sim.leader().expect("leader");
        let follower = sim.live().into_iter().find(|&x| x != l && x != 4);
        let follower = follower.expect("a follower");
        let refused = sim
            .node_mut(follower)
            .expect("live")
            .propose_conf_change(ConfChangeType::AddNode, 4);
        assert!(
            matches!(refused, Err(ProposeError::NotLeader { .. })),
            "seed {seed}: {refused:?}"
        );
        let node = sim.node_mut(l).expect("live");
        // Refused from the configuration, before anything is proposed.
        let rows = [
            (
                ConfChangeType::AddNode,
                2,
                ConfChangeError::AlreadyMember(2),
            ),
            (ConfChangeType::RemoveNode, 9, ConfChangeError::NotMember(9)),
            (ConfChangeType::AddNode, 0, ConfChangeError::ZeroId),
        ];
        for (change, id, want) in rows {
            let got = node.propose_conf_change_with_context(change, id, b"x".to_vec());
            assert_eq!(got, Err(ProposeError::ConfChange(want)), "seed {seed}");
        }
        node.propose_conf_change_with_context(ConfChangeType::AddNode, 4, b"addr4".to_vec())
            .expect("add");
        // One change at a time.
        let second = node.propose_conf_change(ConfChangeType::RemoveNode, 3);
        assert_eq!(
            second,
            Err(ProposeError::ConfChange(ConfChangeError::Pending)),
            "seed {seed}"
        );
        run_until(&mut sim, 1000, |s| {
            s.nodes[&4]
                .node
                .as_ref()
                .is_some_and(|n| n.voters().contains(&4))
        });
        for _ in 0..40 {
            sim.propose();
            sim.run_step();
        }
        run_until(&mut sim, 2000, |s| s.converged(&[1, 2, 3, 4]));
        assert!(
            sim.nodes[&4]
                .node
                .as_ref()
                .expect("live")
                .storage()
                .latest_snapshot()
                .is_some(),
            "seed {seed}: node 4 should have received a snapshot"
        );
        sim.check_final(&[1, 2, 3, 4]);
        // Every member, node 4 through its snapshot, holds the change with its context.
        let added = conf_record(ConfChangeType::AddNode, 4, b"addr4");
        for id in [1, 2, 3, 4] {
            let h = &sim.node(id).expect("live").state_machine().history;
            assert!(
                h.contains(&added),
                "seed {seed}: node {id} lacks the change"
            );
        }
        // Remove the current leader; the rest elects a new one and keeps committing.
        let l = sim.leader().expect("leader");
        let node = sim.node_mut(l).expect("live");
        node.propose_conf_change(ConfChangeType::RemoveNode, l)
            .expect("remove");
        let rest: Vec<u64> = [1, 2, 3, 4].into_iter().filter(|x| *x != l).collect();
        let r0 = rest[0];
        run_until(&mut sim, 1000, |s| {
            s.nodes[&r0]
                .node
                .as_ref()
                .is_some_and(|n| !n.voters().contains(&l))
        });
        sim.crash(l);
        sim.nodes.remove(&l);
        run_until(&mut sim, 1000, |s| s.leader().is_some_and(|x| x != l));
        let before = sim.app.acked.len();
        for _ in 0..40 {
            sim.propose();
            sim.run_step();
        }
        run_until(&mut sim, 2000, |s| s.converged(&rest));
        assert!(
            sim.app.acked.len() > before,
            "seed {seed}: no progress after removal"
        );
        for id in &rest {
            let n = sim.nodes[id].node.as_ref().expect("live");
            assert_eq!(n.voters().len(), 3);
            assert_eq!(n.role() == StateRole::Leader, sim.leader() == Some(*id));
        }
        sim.check_final(&rest);
    }
}

#[test]
fn failure_detector_suspicion_triggers_early_election() {
    let mut sim = new_sim(
        42,
        3,
        Faults {
            drop: 0.0,
            dup: 0.0,
            max_delay: 0,
        },
    );
    run_until(&mut sim, 500, |s| s.leader().is_some());
    for _ in 0..20 {
        sim.run_step();
    }
    let old = sim.leader().expect("leader");
    let term = sim.nodes[&old].node.as_ref().expect("live").term();
    sim.crash(old);
    // Let heartbeats already in flight drain, as a detector would only suspect after them.
    for _ in 0..3 {
        sim.run_step();
    }
    // Every survivor's detector suspects the old leader; one campaigns.
    let rest: Vec<u64> = sim.live();
    for (i, id) in rest.iter().enumerate() {
        let n = sim.node_mut(*id).expect("live");
        n.on_leader_suspected(old, i == 0);
    }
    // Well below the election timeout (10..20 ticks since the last heartbeat) a new
    // leader must exist.
    for _ in 0..6 {
        sim.run_step();
    }
    let new = sim
        .leader()
        .unwrap_or_else(|| panic!("no early leader\n{}", sim.describe()));
    assert_ne!(new, old);
    assert!(sim.nodes[&new].node.as_ref().expect("live").term() > term);
}
