//! Linearizability under faults (issue 6): concurrent simulated clients run get/put/incr/del
//! against a 3-node X-Raft cluster replicating an `xlane_kv::Store`, while the simulator
//! kills leaders, partitions nodes, crashes and restarts nodes from their synced log, and
//! drops, duplicates and delays packets. Each recorded history is checked with
//! `xlane_lincheck` (Wing–Gong–Lowe search, per key). After healing, every replica must be
//! identical and contain every acknowledged write exactly once.
//!
//! `LIN_SEED=<n>` runs one seed only (both tests). A negative control serves reads from a
//! random replica's local state without ReadIndex and must be caught.

mod common;

use std::collections::{HashMap, HashSet};
use std::time::Instant;

use common::{Faults, Scenario, SimRaft};
use rand::Rng;
use xlane_kv::exec::Apply;
use xlane_kv::{Reply, SetCond, SetTtl, Store, WriteCmd, WriteOp};
use xlane_lincheck::{
    check, CheckOptions, HistoryRecorder, KvCall, KvInput, KvModel, KvOutput, OpHandle, Verdict,
};
use xlane_xraft::{DropReason, Event, ProposalId, ReadId, StateMachine};

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

/// The clients' side: calls in flight, the recorded history, acknowledged writes.
#[derive(Default)]
struct Clients {
    clock: u64,
    writes: HashMap<(u64, ProposalId), PendingWrite>,
    reads: HashMap<(u64, ReadId), PendingRead>,
    /// client -> (op, step invoked)
    busy: HashMap<u64, (OpHandle, u64)>,
    rec: HistoryRecorder<KvInput, KvOutput>,
    acked: Vec<u64>,
    next_op: u64,
    stats: Stats,
}

type Sim = common::Sim<KvSm, Clients>;

fn key_name(i: usize) -> Vec<u8> {
    format!("key{i}").into_bytes()
}

impl Clients {
    /// Logical history time: strictly increasing in simulation order.
    fn now(&mut self) -> u64 {
        self.clock += 1;
        self.clock
    }
}

impl Scenario<KvSm> for Clients {
    fn on_crash(&mut self, id: u64) {
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

    fn on_events(
        &mut self,
        seed: u64,
        step: u64,
        id: u64,
        node: &SimRaft<KvSm>,
        events: Vec<Event>,
    ) {
        for ev in events {
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
                        .get(&r.key, step)
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
    }
}

impl Sim {
    /// Client `c` issues one random operation.
    fn client_op(&mut self, c: u64, broken_reads: bool) {
        let key = key_name(self.rng.gen_range(0..KEYS));
        let r = self.rng.gen_range(0..100);
        let live = self.live();
        if r < 40 {
            let on = live[self.rng.gen_range(0..live.len())];
            let at = self.app.now();
            let h = self.app.rec.invoke(c, KvInput::get(key.clone()), at);
            let node = self.nodes[&on].node.as_ref().expect("live");
            if broken_reads {
                // Negative control: local read, no ReadIndex.
                let v = node
                    .state_machine()
                    .store
                    .get(&key, self.step)
                    .map(<[u8]>::to_vec);
                let at = self.app.now();
                self.app
                    .rec
                    .complete(h, KvOutput::Value(v), at)
                    .expect("open");
                return;
            }
            let rid = self.node_mut(on).expect("live").read_index();
            self.app.reads.insert(
                (on, rid),
                PendingRead {
                    client: c,
                    handle: h,
                    key,
                },
            );
            self.app.busy.insert(c, (h, self.step));
            return;
        }
        self.app.next_op += 1;
        let op_id = self.app.next_op;
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
            self.node(l).map(|_| l)
        };
        let Some(target) = target else { return };
        let at = self.app.now();
        let h = self.app.rec.invoke(
            c,
            KvInput {
                key,
                call: call.clone(),
            },
            at,
        );
        let mut payload = op_id.to_le_bytes().to_vec();
        payload.extend_from_slice(&WriteOp::new(self.step, cmd).encode());
        match self.node_mut(target).expect("live").propose(payload) {
            Ok(pid) => {
                self.app.writes.insert(
                    (target, pid),
                    PendingWrite {
                        client: c,
                        handle: h,
                        op_id,
                        call,
                    },
                );
                self.app.busy.insert(c, (h, self.step));
            }
            Err(_) => self.app.rec.fail(h).expect("open"),
        }
    }

    /// Clients whose call takes too long give up (writes: unknown outcome).
    fn expire_clients(&mut self) {
        let step = self.step;
        let late: HashSet<OpHandle> = self
            .app
            .busy
            .values()
            .filter(|(_, s)| step - s > CLIENT_TIMEOUT)
            .map(|(h, _)| *h)
            .collect();
        if late.is_empty() {
            return;
        }
        self.app.busy.retain(|_, (h, _)| !late.contains(h));
        let rec = &mut self.app.rec;
        self.app.writes.retain(|_, w| {
            let keep = !late.contains(&w.handle);
            if !keep {
                rec.abandon(w.handle).expect("open");
            }
            keep
        });
        self.app.reads.retain(|_, r| {
            let keep = !late.contains(&r.handle);
            if !keep {
                rec.fail(r.handle).expect("open");
            }
            keep
        });
    }

    fn converged(&self) -> bool {
        let all: Vec<u64> = self.nodes.keys().copied().collect();
        self.committed_alike(&all)
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
        for op in &self.app.acked {
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
        Clients::default(),
    );
    let n = sim.voters.len() as u64;
    let max_faulty = ((n - 1) / 2) as usize;
    let mut down: HashMap<u64, u64> = HashMap::new();
    for _ in 0..chaos_steps {
        let step = sim.step;
        sim.recover_due(&mut down);
        if down.len() < max_faulty {
            let r: f64 = sim.rng.gen();
            if r < 0.006 {
                // Kill the leader; it restarts from its storage later.
                if let Some(l) = sim.leader() {
                    down.insert(l, step + sim.rng.gen_range(30..150));
                    sim.crash(l);
                    sim.app.stats.leader_kills += 1;
                }
            } else if r < 0.012 {
                // Partition one node (possibly the leader) away from everyone.
                let v = sim.rng.gen_range(1..=n);
                down.insert(v, step + sim.rng.gen_range(30..150));
                sim.isolated.insert(v);
                sim.app.stats.partitions += 1;
            } else if r < 0.016 {
                // Quick crash-restart of any node.
                let v = sim.rng.gen_range(1..=n);
                down.insert(v, step + sim.rng.gen_range(3..30));
                sim.crash(v);
                sim.app.stats.restarts += 1;
            }
        }
        sim.expire_clients();
        for c in 0..CLIENTS {
            if !sim.app.busy.contains_key(&c) && sim.rng.gen_bool(0.3) {
                sim.client_op(c, broken_reads);
            }
        }
        sim.run_step();
    }
    // Heal: everything back, clean network; outstanding calls may still finish.
    sim.heal(&down);
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
        let at = sim.app.now();
        let h = sim.app.rec.invoke(c, KvInput::get(key.clone()), at);
        let rid = sim.node_mut(leader).expect("live").read_index();
        sim.app.reads.insert(
            (leader, rid),
            PendingRead {
                client: c,
                handle: h,
                key,
            },
        );
    }
    let mut extra = 0;
    while !sim.app.reads.is_empty() {
        sim.run_step();
        extra += 1;
        assert!(extra < 500, "seed {seed}: final reads did not complete");
    }
    sim.check_replicas();
    eprintln!(
        "seed {seed}: {} leader kills, {} partitions, {} crash-restarts, {} terms, {} acked writes",
        sim.app.stats.leader_kills,
        sim.app.stats.partitions,
        sim.app.stats.restarts,
        sim.leaders.len(),
        sim.app.acked.len()
    );
    let acked = sim.app.acked.len();
    let history = std::mem::take(&mut sim.app.rec).finish();
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
