//! Linearizability under faults (issue 6): concurrent simulated clients run get/put/incr/del
//! against a 3-node X-Raft cluster replicating an `xlane_kv::Store`, while the simulator
//! kills leaders, partitions nodes, crashes and restarts nodes from their storage, and
//! drops, duplicates and delays packets. Each recorded history is checked with
//! `xlane_lincheck` (Wing–Gong–Lowe search, per key). After healing, every replica must be
//! identical and contain every acknowledged write exactly once.
//!
//! `LIN_SEED=<n>` runs one seed only (both tests). A negative control serves reads from a
//! random replica's local state without ReadIndex and must be caught.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::Instant;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use xlane_kv::{Reply, SetCond, SetTtl, Store, WriteCmd, WriteOp};
use xlane_lincheck::{
    check, CheckOptions, HistoryRecorder, KvCall, KvInput, KvModel, KvOutput, OpHandle, Verdict,
};
use xlane_xraft::batch::{ReassemblyLimits, TrafficClass};
use xlane_xraft::{
    DiskStorage, DropReason, Event, FsyncPolicy, MessageEndpoint, NodeConfig, ProposalId, RaftNode,
    ReadId, StateMachine, StorageConfig, Transport,
};

const TICK_NS: u64 = 1_000_000;
const MTU: usize = 200;
const KEYS: usize = 3;
const CLIENTS: u64 = 8;
const CLIENT_TIMEOUT: u64 = 80;

/// The replicated state: an `xlane_kv::Store` plus the ids of the applied client ops (to
/// check exactly-once application of acknowledged writes).
#[derive(Default)]
struct KvSm {
    store: Store,
    applied_ids: Vec<u64>,
}

/// Result bytes handed back to the proposer.
fn encode_reply(r: &Reply) -> Vec<u8> {
    match r {
        Reply::Integer(i) => {
            let mut v = vec![1];
            v.extend_from_slice(&i.to_le_bytes());
            v
        }
        Reply::Error(_) => vec![2],
        _ => vec![0],
    }
}

impl StateMachine for KvSm {
    fn apply(&mut self, _index: u64, op: &[u8]) -> Vec<u8> {
        let (id, body) = op.split_at(8);
        let id = u64::from_le_bytes(id.try_into().expect("8-byte op id"));
        let wop = WriteOp::decode(body).expect("valid write op");
        self.applied_ids.push(id);
        encode_reply(&self.store.apply(&wop))
    }
    fn snapshot(&self) -> Vec<u8> {
        let mut v = (self.applied_ids.len() as u64).to_le_bytes().to_vec();
        for id in &self.applied_ids {
            v.extend_from_slice(&id.to_le_bytes());
        }
        v.extend_from_slice(&self.store.snapshot());
        v
    }
    fn restore(&mut self, data: &[u8]) {
        let u = |at: usize| u64::from_le_bytes(data[at..at + 8].try_into().expect("8 bytes"));
        let n = u(0) as usize;
        self.applied_ids = (0..n).map(|i| u(8 + 8 * i)).collect();
        self.store = Store::restore(&data[8 + 8 * n..]).expect("store snapshot");
    }
}

struct Outbox(Vec<(u64, Vec<u8>)>);
impl Transport for Outbox {
    fn send(&mut self, to: u64, _class: TrafficClass, bytes: Vec<u8>) {
        self.0.push((to, bytes));
    }
}

struct Packet {
    at: u64,
    from: u64,
    to: u64,
    bytes: Vec<u8>,
}

struct SimNode {
    node: Option<RaftNode<KvSm>>,
    ep: MessageEndpoint,
    dir: PathBuf,
    incarnation: u64,
}

#[derive(Clone, Copy)]
struct Faults {
    drop: f64,
    dup: f64,
    max_delay: u64,
}

struct PendingWrite {
    client: u64,
    handle: OpHandle,
    op_id: u64,
    call: KvCall,
}

struct PendingRead {
    client: u64,
    handle: OpHandle,
    key: Vec<u8>,
}

#[derive(Default)]
struct Stats {
    leader_kills: u64,
    partitions: u64,
    restarts: u64,
}

struct Sim {
    seed: u64,
    rng: StdRng,
    step: u64,
    clock: u64,
    nodes: BTreeMap<u64, SimNode>,
    voters: Vec<u64>,
    net: Vec<Packet>,
    isolated: HashSet<u64>,
    faults: Faults,
    leaders: HashMap<u64, u64>,
    writes: HashMap<(u64, ProposalId), PendingWrite>,
    reads: HashMap<(u64, ReadId), PendingRead>,
    /// client -> (op, step invoked)
    busy: HashMap<u64, (OpHandle, u64)>,
    rec: HistoryRecorder<KvInput, KvOutput>,
    acked: Vec<u64>,
    next_op: u64,
    stats: Stats,
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

fn open_node(id: u64, dir: &Path, voters: &[u64], seed: u64) -> RaftNode<KvSm> {
    let (st, _report) = DiskStorage::open(StorageConfig {
        dir: dir.to_path_buf(),
        fsync: FsyncPolicy::Batch,
        segment_bytes: 16 << 10,
    })
    .expect("open storage");
    RaftNode::new(node_cfg(id, seed), st, KvSm::default(), voters).expect("node")
}

fn tmp_root() -> tempfile::TempDir {
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        if let Ok(t) = tempfile::tempdir_in(shm) {
            return t;
        }
    }
    tempfile::tempdir().expect("tempdir")
}

fn key_name(i: usize) -> Vec<u8> {
    format!("key{i}").into_bytes()
}

impl Sim {
    fn new(seed: u64, n: u64, faults: Faults) -> Self {
        let tmp = tmp_root();
        let voters: Vec<u64> = (1..=n).collect();
        let mut nodes = BTreeMap::new();
        for &id in &voters {
            let dir = tmp.path().join(format!("n{id}"));
            let node = open_node(id, &dir, &voters, seed);
            nodes.insert(
                id,
                SimNode {
                    node: Some(node),
                    ep: endpoint(0),
                    dir,
                    incarnation: 0,
                },
            );
        }
        Sim {
            seed,
            rng: StdRng::seed_from_u64(seed),
            step: 0,
            clock: 0,
            nodes,
            voters,
            net: Vec::new(),
            isolated: HashSet::new(),
            faults,
            leaders: HashMap::new(),
            writes: HashMap::new(),
            reads: HashMap::new(),
            busy: HashMap::new(),
            rec: HistoryRecorder::new(),
            acked: Vec::new(),
            next_op: 0,
            stats: Stats::default(),
            _tmp: tmp,
        }
    }

    /// Logical history time: strictly increasing in simulation order.
    fn now(&mut self) -> u64 {
        self.clock += 1;
        self.clock
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

    fn crash(&mut self, id: u64) {
        if let Some(sn) = self.nodes.get_mut(&id) {
            sn.node = None;
        }
        // The client loses the connection: writes in flight have unknown outcome, reads
        // simply failed.
        let lost: Vec<(u64, ProposalId)> = self
            .writes
            .keys()
            .filter(|(n, _)| *n == id)
            .copied()
            .collect();
        for k in lost {
            if let Some(w) = self.writes.remove(&k) {
                self.rec.abandon(w.handle).expect("open");
                self.busy.remove(&w.client);
            }
        }
        let lost: Vec<(u64, ReadId)> = self
            .reads
            .keys()
            .filter(|(n, _)| *n == id)
            .copied()
            .collect();
        for k in lost {
            if let Some(r) = self.reads.remove(&k) {
                self.rec.fail(r.handle).expect("open");
                self.busy.remove(&r.client);
            }
        }
    }

    fn restart(&mut self, id: u64) {
        let voters = self.voters.clone();
        let seed = self.seed;
        if let Some(sn) = self.nodes.get_mut(&id) {
            if sn.node.is_none() {
                sn.incarnation += 1;
                sn.ep = endpoint(sn.incarnation << 40);
                sn.node = Some(open_node(id, &sn.dir, &voters, seed + sn.incarnation));
            }
        }
    }

    /// Client `c` issues one random operation.
    fn client_op(&mut self, c: u64, broken_reads: bool) {
        let key = key_name(self.rng.gen_range(0..KEYS));
        let r = self.rng.gen_range(0..100);
        let live = self.live();
        if r < 40 {
            let on = live[self.rng.gen_range(0..live.len())];
            let at = self.now();
            let h = self.rec.invoke(c, KvInput::get(key.clone()), at);
            let node = self.nodes[&on].node.as_ref().expect("live");
            if broken_reads {
                // Negative control: local read, no ReadIndex.
                let v = node
                    .state_machine()
                    .store
                    .get(&key, self.step)
                    .map(<[u8]>::to_vec);
                let at = self.now();
                self.rec.complete(h, KvOutput::Value(v), at).expect("open");
                return;
            }
            let node = self.nodes.get_mut(&on).and_then(|s| s.node.as_mut());
            let rid = node.expect("live").read_index();
            self.reads.insert(
                (on, rid),
                PendingRead {
                    client: c,
                    handle: h,
                    key,
                },
            );
            self.busy.insert(c, (h, self.step));
            return;
        }
        self.next_op += 1;
        let op_id = self.next_op;
        let (call, cmd) = if r < 65 {
            // Unique values (integers, so INCR applies to them too).
            let v = (op_id * 1000).to_string().into_bytes();
            (
                KvCall::Put(v.clone()),
                WriteCmd::Set {
                    key: key.clone(),
                    value: v,
                    cond: SetCond::Always,
                    ttl: SetTtl::Persist,
                    get: false,
                },
            )
        } else if r < 90 {
            let d = self.rng.gen_range(1..5);
            (
                KvCall::Incr(d),
                WriteCmd::IncrBy {
                    key: key.clone(),
                    delta: d,
                },
            )
        } else {
            (
                KvCall::Delete,
                WriteCmd::Del {
                    keys: vec![key.clone()],
                },
            )
        };
        // Mostly the true leader; sometimes whoever a random node believes leads (which
        // may be a deposed leader behind a partition).
        let target = if self.rng.gen_bool(0.7) {
            self.leader()
        } else {
            let v = live[self.rng.gen_range(0..live.len())];
            let l = self.nodes[&v].node.as_ref().expect("live").leader_id();
            self.nodes.get(&l).and_then(|s| s.node.as_ref()).map(|_| l)
        };
        let Some(target) = target else { return };
        let at = self.now();
        let h = self.rec.invoke(
            c,
            KvInput {
                key,
                call: call.clone(),
            },
            at,
        );
        let mut payload = op_id.to_le_bytes().to_vec();
        payload.extend_from_slice(&WriteOp::new(self.step, cmd).encode());
        let node = self.nodes.get_mut(&target).and_then(|s| s.node.as_mut());
        match node.expect("live").propose(payload) {
            Ok(pid) => {
                self.writes.insert(
                    (target, pid),
                    PendingWrite {
                        client: c,
                        handle: h,
                        op_id,
                        call,
                    },
                );
                self.busy.insert(c, (h, self.step));
            }
            Err(_) => self.rec.fail(h).expect("open"),
        }
    }

    /// Clients whose call takes too long give up (writes: unknown outcome).
    fn expire_clients(&mut self) {
        let step = self.step;
        let late: HashSet<OpHandle> = self
            .busy
            .values()
            .filter(|(_, s)| step - s > CLIENT_TIMEOUT)
            .map(|(h, _)| *h)
            .collect();
        if late.is_empty() {
            return;
        }
        self.busy.retain(|_, (h, _)| !late.contains(h));
        let rec = &mut self.rec;
        self.writes.retain(|_, w| {
            let keep = !late.contains(&w.handle);
            if !keep {
                rec.abandon(w.handle).expect("open");
            }
            keep
        });
        self.reads.retain(|_, r| {
            let keep = !late.contains(&r.handle);
            if !keep {
                rec.fail(r.handle).expect("open");
            }
            keep
        });
    }

    fn run_step(&mut self) {
        self.step += 1;
        let now_ns = self.step * TICK_NS;
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
            if let Ok(Some(msg)) = sn.ep.receive(p.from, now_ns, &p.bytes) {
                let _ = node.step(msg);
            }
        }
        let ids: Vec<u64> = self.nodes.keys().copied().collect();
        for id in ids {
            let seed = self.seed;
            let sn = self.nodes.get_mut(&id).expect("node");
            let Some(node) = sn.node.as_mut() else {
                continue;
            };
            node.tick_to(now_ns);
            sn.ep.expire(now_ns);
            let out = node
                .handle_ready()
                .unwrap_or_else(|e| panic!("seed {seed}: node {id} ready: {e}"));
            let mut ob = Outbox(Vec::new());
            for m in &out.messages {
                sn.ep.send(m, &mut ob).expect("send");
            }
            if node.is_leader() {
                let prev = *self.leaders.entry(node.term()).or_insert(id);
                assert_eq!(prev, id, "seed {seed}: two leaders in term {}", node.term());
            }
            for ev in out.events {
                self.clock += 1;
                let at = self.clock;
                match ev {
                    Event::Applied {
                        id: pid, result, ..
                    } => {
                        let Some(w) = self.writes.remove(&(id, pid)) else {
                            continue;
                        };
                        let output = match (&w.call, result.first()) {
                            (KvCall::Put(_), Some(0)) => KvOutput::Ok,
                            (_, Some(2)) => KvOutput::Error,
                            (KvCall::Incr(_), Some(1)) => KvOutput::Int(int(&result)),
                            (KvCall::Delete, Some(1)) => KvOutput::Count(int(&result) as u64),
                            other => panic!("seed {seed}: unexpected result {other:?}"),
                        };
                        self.rec.complete(w.handle, output, at).expect("open");
                        self.busy.remove(&w.client);
                        self.acked.push(w.op_id);
                    }
                    Event::Dropped { id: pid, reason } => {
                        let Some(w) = self.writes.remove(&(id, pid)) else {
                            continue;
                        };
                        if reason == DropReason::Indeterminate {
                            self.rec.abandon(w.handle).expect("open");
                        } else {
                            self.rec.fail(w.handle).expect("open");
                        }
                        self.busy.remove(&w.client);
                    }
                    Event::ReadReady { id: rid, .. } => {
                        let Some(r) = self.reads.remove(&(id, rid)) else {
                            continue;
                        };
                        let v = node
                            .state_machine()
                            .store
                            .get(&r.key, self.step)
                            .map(<[u8]>::to_vec);
                        self.rec
                            .complete(r.handle, KvOutput::Value(v), at)
                            .expect("open");
                        self.busy.remove(&r.client);
                    }
                    Event::ReadFailed { id: rid } => {
                        if let Some(r) = self.reads.remove(&(id, rid)) {
                            self.rec.fail(r.handle).expect("open");
                            self.busy.remove(&r.client);
                        }
                    }
                    _ => {}
                }
            }
            for (to, bytes) in ob.0 {
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

    fn converged(&self) -> bool {
        let nodes: Vec<&RaftNode<KvSm>> = self
            .nodes
            .values()
            .filter_map(|s| s.node.as_ref())
            .collect();
        if nodes.len() != self.nodes.len() || self.leader().is_none() {
            return false;
        }
        let c = nodes[0].commit_index();
        nodes
            .iter()
            .all(|n| n.commit_index() == c && n.applied_index() == c)
    }

    /// All replicas identical; every acknowledged write applied exactly once everywhere.
    fn check_replicas(&self) {
        let seed = self.seed;
        let sms: Vec<(u64, &KvSm)> = self
            .nodes
            .iter()
            .map(|(id, s)| (*id, s.node.as_ref().expect("live").state_machine()))
            .collect();
        let (id0, sm0) = sms[0];
        let snap0 = sm0.store.snapshot();
        for (id, sm) in &sms[1..] {
            assert_eq!(
                sm.applied_ids, sm0.applied_ids,
                "seed {seed}: node {id} applied a different op sequence than node {id0}"
            );
            assert!(
                sm.store.snapshot() == snap0,
                "seed {seed}: node {id} store differs from node {id0}"
            );
        }
        let mut seen = HashSet::new();
        for op in &sm0.applied_ids {
            assert!(seen.insert(*op), "seed {seed}: op {op} applied twice");
        }
        for op in &self.acked {
            assert!(
                seen.contains(op),
                "seed {seed}: acknowledged write {op} lost"
            );
        }
    }
}

fn int(result: &[u8]) -> i64 {
    i64::from_le_bytes(result[1..9].try_into().expect("8 bytes"))
}

struct RunResult {
    verdict: Verdict<Vec<u8>, KvInput, KvOutput>,
    ops: usize,
    unknown: usize,
    acked: usize,
    steps_checked: u64,
    check_ms: u128,
    overlap: usize,
}

/// Largest number of completed operations on one key whose intervals overlap a common
/// instant: how much concurrency the checker had to resolve.
fn max_overlap(h: &[xlane_lincheck::Operation<KvInput, KvOutput>]) -> usize {
    let mut per_key: HashMap<&[u8], Vec<(u64, i32)>> = HashMap::new();
    for op in h {
        if let Some(at) = op.returned_at() {
            let ev = per_key.entry(op.input.key.as_slice()).or_default();
            ev.push((op.call, 1));
            ev.push((at + 1, -1));
        }
    }
    let mut best = 0;
    for ev in per_key.values_mut() {
        ev.sort_unstable();
        let mut cur = 0i32;
        for (_, d) in ev.iter() {
            cur += d;
            best = best.max(cur as usize);
        }
    }
    best
}

fn run(seed: u64, broken_reads: bool, chaos_steps: u64) -> RunResult {
    eprintln!("seed {seed}: start (broken_reads={broken_reads}; rerun with LIN_SEED={seed})");
    let nodes = if seed % 3 == 2 { 5 } else { 3 };
    let mut sim = Sim::new(
        seed,
        nodes,
        Faults {
            drop: 0.05,
            dup: 0.05,
            max_delay: 4,
        },
    );
    let n = sim.voters.len() as u64;
    let max_faulty = ((n - 1) / 2) as usize;
    let mut down: HashMap<u64, u64> = HashMap::new();
    for _ in 0..chaos_steps {
        let step = sim.step;
        let back: Vec<u64> = down
            .iter()
            .filter(|(_, t)| **t <= step)
            .map(|(id, _)| *id)
            .collect();
        for id in back {
            down.remove(&id);
            sim.isolated.remove(&id);
            sim.restart(id);
        }
        if down.len() < max_faulty {
            let r: f64 = sim.rng.gen();
            if r < 0.006 {
                // Kill the leader; it restarts from its storage later.
                if let Some(l) = sim.leader() {
                    down.insert(l, step + sim.rng.gen_range(30..150));
                    sim.crash(l);
                    sim.stats.leader_kills += 1;
                }
            } else if r < 0.012 {
                // Partition one node (possibly the leader) away from everyone.
                let v = sim.rng.gen_range(1..=n);
                down.insert(v, step + sim.rng.gen_range(30..150));
                sim.isolated.insert(v);
                sim.stats.partitions += 1;
            } else if r < 0.016 {
                // Quick crash-restart of any node.
                let v = sim.rng.gen_range(1..=n);
                down.insert(v, step + sim.rng.gen_range(3..30));
                sim.crash(v);
                sim.stats.restarts += 1;
            }
        }
        sim.expire_clients();
        for c in 0..CLIENTS {
            if !sim.busy.contains_key(&c) && sim.rng.gen_bool(0.3) {
                sim.client_op(c, broken_reads);
            }
        }
        sim.run_step();
    }
    // Heal: everything back, clean network; outstanding calls may still finish.
    for id in down.keys().copied().collect::<Vec<_>>() {
        sim.isolated.remove(&id);
        sim.restart(id);
    }
    sim.faults = Faults {
        drop: 0.0,
        dup: 0.0,
        max_delay: 1,
    };
    let mut extra = 0;
    while !sim.converged() || extra < 30 {
        sim.expire_clients();
        sim.run_step();
        extra += 1;
        assert!(extra < 3000, "seed {seed}: no convergence after healing");
    }
    // Final linearizable reads of every key through the leader.
    let leader = sim.leader().expect("leader after healing");
    for k in 0..KEYS {
        let c = 100 + k as u64;
        let key = key_name(k);
        let at = sim.now();
        let h = sim.rec.invoke(c, KvInput::get(key.clone()), at);
        let node = sim.nodes.get_mut(&leader).and_then(|s| s.node.as_mut());
        let rid = node.expect("live").read_index();
        sim.reads.insert(
            (leader, rid),
            PendingRead {
                client: c,
                handle: h,
                key,
            },
        );
    }
    let mut extra = 0;
    while !sim.reads.is_empty() {
        sim.run_step();
        extra += 1;
        assert!(extra < 500, "seed {seed}: final reads did not complete");
    }
    sim.check_replicas();
    eprintln!(
        "seed {seed}: {} leader kills, {} partitions, {} crash-restarts, {} terms, {} acked writes",
        sim.stats.leader_kills,
        sim.stats.partitions,
        sim.stats.restarts,
        sim.leaders.len(),
        sim.acked.len()
    );
    let acked = sim.acked.len();
    let history = std::mem::take(&mut sim.rec).finish();
    let overlap = max_overlap(&history);
    let t0 = Instant::now();
    let report = check(&KvModel, &history, &CheckOptions::default()).expect("well-formed");
    RunResult {
        verdict: report.verdict,
        ops: report.ops,
        unknown: report.unknown_ops,
        acked,
        steps_checked: report.steps,
        check_ms: t0.elapsed().as_millis(),
        overlap,
    }
}

fn seeds(default: std::ops::Range<u64>) -> Vec<u64> {
    match std::env::var("LIN_SEED") {
        Ok(s) => vec![s.trim().parse().expect("LIN_SEED must be a u64")],
        Err(_) => default.collect(),
    }
}

#[test]
fn histories_under_faults_are_linearizable() {
    let seeds = seeds(0..12);
    let mut total_ops = 0;
    for &seed in &seeds {
        let r = run(seed, false, 2000);
        eprintln!(
            "seed {seed}: history {} ops ({} unknown outcome, max {} overlapping per key), {} acked writes, checker {} steps in {} ms: {}",
            r.ops,
            r.unknown,
            r.overlap,
            r.acked,
            r.steps_checked,
            r.check_ms,
            match &r.verdict {
                Verdict::Linearizable => "linearizable".to_string(),
                v => v.to_string(),
            }
        );
        assert!(
            r.verdict.is_linearizable(),
            "seed {seed}: history not proven linearizable: {}",
            r.verdict
        );
        total_ops += r.ops;
    }
    assert!(
        total_ops > 200 * seeds.len(),
        "too few operations recorded: {total_ops}"
    );
}

#[test]
fn negative_control_local_follower_reads_are_caught() {
    let mut caught = Vec::new();
    for seed in seeds(0..12) {
        let r = run(seed, true, 1200);
        match &r.verdict {
            Verdict::NotLinearizable(v) => {
                eprintln!(
                    "seed {seed}: broken reads caught ({} ops, checker {} ms):\n{v}",
                    r.ops, r.check_ms
                );
                caught.push(seed);
                break;
            }
            other => eprintln!("seed {seed}: broken reads not caught: {other}"),
        }
    }
    assert!(
        !caught.is_empty(),
        "the checker never flagged reads served from local replica state"
    );
}
