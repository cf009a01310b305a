//! Deterministic sans-IO cluster tests: an in-memory network with seeded drops, duplicates,
//! delays/reordering, partitions, and node crashes with restart from the durable storage
//! directory. Messages cross a small-MTU express class (fragmented) or the regular class.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::PathBuf;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use xlane_xraft::batch::{ReassemblyLimits, TrafficClass};
use xlane_xraft::raft::StateRole;
use xlane_xraft::{
    ConfChangeType, DiskStorage, Event, FsyncPolicy, MessageEndpoint, NodeConfig, ProposalId,
    RaftNode, ReadId, StateMachine, StorageConfig, Transport,
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
        let mut v = Vec::new();
        for h in &self.history {
            v.extend_from_slice(&(h.len() as u32).to_le_bytes());
            v.extend_from_slice(h);
        }
        v
    }
    fn restore(&mut self, data: &[u8]) {
        self.history.clear();
        let mut at = 0;
        while at + 4 <= data.len() {
            let n =
                u32::from_le_bytes([data[at], data[at + 1], data[at + 2], data[at + 3]]) as usize;
            at += 4;
            if at + n > data.len() {
                break;
            }
            self.history.push(data[at..at + n].to_vec());
            at += n;
        }
    }
}

const TICK_NS: u64 = 1_000_000;
const MTU: usize = 200;

struct Outbox(Vec<(u64, TrafficClass, Vec<u8>)>);
impl Transport for Outbox {
    fn send(&mut self, to: u64, class: TrafficClass, bytes: Vec<u8>) {
        self.0.push((to, class, bytes));
    }
}

struct Packet {
    at: u64,
    from: u64,
    to: u64,
    bytes: Vec<u8>,
}

struct SimNode {
    node: Option<RaftNode<Counter>>,
    ep: MessageEndpoint,
    dir: PathBuf,
    incarnation: u64,
}

struct Faults {
    drop: f64,
    dup: f64,
    max_delay: u64,
}

struct Sim {
    seed: u64,
    rng: StdRng,
    step: u64,
    nodes: BTreeMap<u64, SimNode>,
    voters0: Vec<u64>,
    net: Vec<Packet>,
    isolated: HashSet<u64>,
    faults: Faults,
    leaders: HashMap<u64, u64>,
    pending: HashMap<(u64, ProposalId), Vec<u8>>,
    acked: Vec<(Vec<u8>, u64)>,
    reads: HashMap<(u64, ReadId), usize>,
    reads_ok: usize,
    snapshots_installed: usize,
    next_op: u64,
    _tmp: tempfile::TempDir,
}

fn node_cfg(id: u64, seed: u64) -> NodeConfig {
    NodeConfig {
        election_seed: Some(seed),
        tick_ns: TICK_NS,
        election_ticks: 10,
        heartbeat_ticks: 1,
        snapshot_interval: 25,
        max_size_per_msg: 1024,
        max_batch_ops: 8,
        read_timeout_ticks: 60,
        ..NodeConfig::new(id)
    }
}

fn tmp_root() -> tempfile::TempDir {
    let shm = std::path::Path::new("/dev/shm");
    if shm.is_dir() {
        if let Ok(t) = tempfile::tempdir_in(shm) {
            return t;
        }
    }
    tempfile::tempdir().expect("tempdir")
}

impl Sim {
    fn new(seed: u64, n: u64, faults: Faults) -> Self {
        let tmp = tmp_root();
        let voters0: Vec<u64> = (1..=n).collect();
        let mut s = Sim {
            seed,
            rng: StdRng::seed_from_u64(seed),
            step: 0,
            nodes: BTreeMap::new(),
            voters0: voters0.clone(),
            net: Vec::new(),
            isolated: HashSet::new(),
            faults,
            leaders: HashMap::new(),
            pending: HashMap::new(),
            acked: Vec::new(),
            reads: HashMap::new(),
            reads_ok: 0,
            snapshots_installed: 0,
            next_op: 0,
            _tmp: tmp,
        };
        for id in voters0 {
            s.add_node(id, true);
        }
        s
    }

    fn add_node(&mut self, id: u64, bootstrap: bool) {
        let dir = self._tmp.path().join(format!("n{id}"));
        let mut sn = SimNode {
            node: None,
            ep: endpoint(0),
            dir,
            incarnation: 0,
        };
        let voters = if bootstrap {
            self.voters0.clone()
        } else {
            vec![]
        };
        sn.node = Some(open_node(id, &sn.dir, &voters, self.seed));
        self.nodes.insert(id, sn);
    }

    fn crash(&mut self, id: u64) {
        if let Some(sn) = self.nodes.get_mut(&id) {
            sn.node = None;
        }
        self.pending.retain(|(n, _), _| *n != id);
        self.reads.retain(|(n, _), _| *n != id);
    }

    fn restart(&mut self, id: u64) {
        let voters = self.voters0.clone();
        if let Some(sn) = self.nodes.get_mut(&id) {
            if sn.node.is_none() {
                sn.incarnation += 1;
                sn.ep = endpoint(sn.incarnation << 40);
                sn.node = Some(open_node(id, &sn.dir, &voters, self.seed + sn.incarnation));
            }
        }
    }

    fn live(&self) -> Vec<u64> {
        self.nodes
            .iter()
            .filter(|(_, s)| s.node.is_some())
            .map(|(id, _)| *id)
            .collect()
    }

    fn leader(&self) -> Option<u64> {
        self.nodes
            .iter()
            .filter_map(|(id, s)| s.node.as_ref().map(|n| (id, n)))
            .filter(|(id, n)| n.is_leader() && !self.isolated.contains(id))
            .max_by_key(|(_, n)| n.term())
            .map(|(id, _)| *id)
    }

    fn propose(&mut self) {
        let Some(l) = self.leader() else { return };
        self.next_op += 1;
        let op = format!("s{}-op{}", self.seed, self.next_op).into_bytes();
        let node = self.nodes.get_mut(&l).and_then(|s| s.node.as_mut());
        if let Some(node) = node {
            if let Ok(id) = node.propose(op.clone()) {
                self.pending.insert((l, id), op);
            }
        }
    }

    fn read(&mut self, on: u64) {
        let acked_now = self.acked.len();
        if let Some(node) = self.nodes.get_mut(&on).and_then(|s| s.node.as_mut()) {
            let id = node.read_index();
            self.reads.insert((on, id), acked_now);
        }
    }

    /// One step = one tick of simulated time.
    fn run_step(&mut self) {
        self.step += 1;
        let now = self.step * TICK_NS;
        // Deliver due packets.
        let mut due = Vec::new();
        let mut i = 0;
        while i < self.net.len() {
            if self.net[i].at <= self.step {
                due.push(self.net.swap_remove(i));
            } else {
                i += 1;
            }
        }
        due.sort_by_key(|p| (p.at, p.from, p.to));
        for p in due {
            if self.isolated.contains(&p.from) || self.isolated.contains(&p.to) {
                continue;
            }
            let Some(sn) = self.nodes.get_mut(&p.to) else {
                continue;
            };
            let Some(node) = sn.node.as_mut() else {
                continue;
            };
            if let Ok(Some(msg)) = sn.ep.receive(p.from, now, &p.bytes) {
                let _ = node.step(msg);
            }
        }
        let ids: Vec<u64> = self.nodes.keys().copied().collect();
        for id in ids {
            let sn = self.nodes.get_mut(&id).expect("node");
            let Some(node) = sn.node.as_mut() else {
                continue;
            };
            node.tick_to(now);
            sn.ep.expire(now);
            let out = node
                .handle_ready()
                .unwrap_or_else(|e| panic!("seed {}: node {id} ready: {e}", self.seed));
            let mut ob = Outbox(Vec::new());
            for m in &out.messages {
                sn.ep.send(m, &mut ob).expect("send");
            }
            if node.is_leader() {
                let prev = *self.leaders.entry(node.term()).or_insert(id);
                assert_eq!(
                    prev,
                    id,
                    "seed {}: two leaders in term {}",
                    self.seed,
                    node.term()
                );
            }
            let history_len = node.state_machine().history.len();
            let history: Option<HashSet<Vec<u8>>> = None;
            let mut history = history;
            for ev in out.events {
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
                                    "seed {}: stale read on node {id}: misses acked op {} (len {history_len})",
                                    self.seed,
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
            for (to, _class, bytes) in ob.0 {
                self.enqueue(id, to, bytes);
            }
        }
    }

    fn enqueue(&mut self, from: u64, to: u64, bytes: Vec<u8>) {
        if self.rng.gen_bool(self.faults.drop) {
            return;
        }
        let copies = if self.rng.gen_bool(self.faults.dup) {
            2
        } else {
            1
        };
        for _ in 0..copies {
            let delay = 1 + self.rng.gen_range(0..=self.faults.max_delay);
            self.net.push(Packet {
                at: self.step + delay,
                from,
                to,
                bytes: bytes.clone(),
            });
        }
    }

    fn dump(&self) -> String {
        let mut out = format!("step {} isolated {:?}\n", self.step, self.isolated);
        for (id, sn) in &self.nodes {
            match &sn.node {
                Some(n) => out += &format!(
                    "  n{id}: {:?} term {} lead {} commit {} applied {} last {} voters {:?} hist {}\n",
                    n.role(), n.term(), n.leader_id(), n.commit_index(), n.applied_index(),
                    n.storage().last_index_value(), n.voters(), n.state_machine().history.len()
                ),
                None => out += &format!("  n{id}: down\n"),
            }
        }
        out
    }

    fn converged(&self, members: &[u64]) -> bool {
        let nodes: Vec<&RaftNode<Counter>> = members
            .iter()
            .filter_map(|id| self.nodes.get(id).and_then(|s| s.node.as_ref()))
            .collect();
        if nodes.len() != members.len() || self.leader().is_none() {
            return false;
        }
        let c = nodes[0].commit_index();
        nodes
            .iter()
            .all(|n| n.commit_index() == c && n.applied_index() == c)
            && nodes
                .iter()
                .all(|n| n.state_machine().history == nodes[0].state_machine().history)
    }

    fn check_final(&self, members: &[u64]) {
        let seed = self.seed;
        let h0 = &self.nodes[&members[0]]
            .node
            .as_ref()
            .expect("live")
            .state_machine()
            .history;
        for id in members {
            let h = &self.nodes[id]
                .node
                .as_ref()
                .expect("live")
                .state_machine()
                .history;
            assert_eq!(h, h0, "seed {seed}: node {id} history differs");
        }
        let mut seen = HashSet::new();
        for op in h0 {
            assert!(seen.insert(op), "seed {seed}: duplicate op applied");
        }
        for (op, pos) in &self.acked {
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

fn endpoint(first_id: u64) -> MessageEndpoint {
    MessageEndpoint::new(
        MTU,
        first_id,
        4096,
        ReassemblyLimits {
            timeout_ns: 50 * TICK_NS,
            ..Default::default()
        },
    )
    .expect("endpoint")
}

fn open_node(id: u64, dir: &std::path::Path, voters: &[u64], seed: u64) -> RaftNode<Counter> {
    let (st, _report) = DiskStorage::open(StorageConfig {
        dir: dir.to_path_buf(),
        fsync: FsyncPolicy::Batch,
        segment_bytes: 16 << 10,
    })
    .expect("open storage");
    RaftNode::new(node_cfg(id, seed), st, Counter::default(), voters).expect("node")
}

/// Runs a chaotic phase then heals and checks the invariants.
fn chaos(seed: u64, n: u64, steps: u64) -> (usize, usize) {
    // Printed so that any panic (also inside raft) is attributable to its seed.
    eprintln!("running seed {seed} n={n}");
    let mut sim = Sim::new(
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
        let recovered: Vec<u64> = down
            .iter()
            .filter(|(_, t)| **t <= step)
            .map(|(id, _)| *id)
            .collect();
        for id in recovered {
            down.remove(&id);
            sim.isolated.remove(&id);
            sim.restart(id);
        }
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
    for id in down.keys().copied().collect::<Vec<_>>() {
        sim.isolated.remove(&id);
        sim.restart(id);
    }
    sim.faults = Faults {
        drop: 0.0,
        dup: 0.0,
        max_delay: 1,
    };
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
            sim.dump()
        );
    }
    sim.check_final(&members);
    let snaps: usize = sim.snapshots_installed;
    eprintln!(
        "seed {seed} n={n}: acked {} reads {} terms {} snapshots-installed {snaps} restarts {} log {}",
        sim.acked.len(),
        sim.reads_ok,
        sim.leaders.len(),
        sim.nodes.values().map(|s| s.incarnation).sum::<u64>(),
        sim.nodes[&1].node.as_ref().map_or(0, |n| n.commit_index()),
    );
    (sim.acked.len(), sim.reads_ok)
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
        sim.dump()
    );
}

#[test]
fn membership_add_and_remove() {
    for seed in [7u64, 8, 9] {
        let mut sim = Sim::new(
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
        let node = sim
            .nodes
            .get_mut(&l)
            .and_then(|s| s.node.as_mut())
            .expect("live");
        node.propose_conf_change(ConfChangeType::AddNode, 4)
            .expect("add");
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
        // Remove the current leader; the rest elects a new one and keeps committing.
        let l = sim.leader().expect("leader");
        let node = sim
            .nodes
            .get_mut(&l)
            .and_then(|s| s.node.as_mut())
            .expect("live");
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
        let before = sim.acked.len();
        for _ in 0..40 {
            sim.propose();
            sim.run_step();
        }
        run_until(&mut sim, 2000, |s| s.converged(&rest));
        assert!(
            sim.acked.len() > before,
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
    let mut sim = Sim::new(
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
        let n = sim
            .nodes
            .get_mut(id)
            .and_then(|s| s.node.as_mut())
            .expect("live");
        n.on_leader_suspected(old, i == 0);
    }
    // Well below the election timeout (10..20 ticks since the last heartbeat) a new
    // leader must exist.
    for _ in 0..6 {
        sim.run_step();
    }
    let new = sim
        .leader()
        .unwrap_or_else(|| panic!("no early leader\n{}", sim.dump()));
    assert_ne!(new, old);
    assert!(sim.nodes[&new].node.as_ref().expect("live").term() > term);
}
