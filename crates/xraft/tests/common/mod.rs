//! Shared deterministic cluster simulator for the integration tests: an in-memory network
//! with seeded drops, duplicates, delays/reordering and partitions, and nodes on in-memory
//! logs ([`MemLog`]) that crash (the node dropped: what its log had not synced is lost) and
//! restart from what their log made durable (a new log on the same [`MemDisk`]). Messages cross a small-MTU endpoint
//! (fragmented). What a test does with the events of each node is its [`Scenario`].

// Each test binary uses a different subset of this module.
#![allow(dead_code)]

use std::collections::{BTreeMap, HashMap, HashSet};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use xlane_xraft::batch::{ReassemblyLimits, TrafficClass};
use xlane_xraft::{
    Event, LogStore, MemDisk, MemLog, MessageEndpoint, NodeConfig, RaftNode, StateMachine,
    Transport,
};

/// A simulated node: on an in-memory log.
pub type SimRaft<S> = RaftNode<S, MemLog>;

/// Simulated time per step.
pub const TICK_NS: u64 = 1_000_000;
/// Endpoint MTU: small, so that most messages are fragmented.
pub const MTU: usize = 200;

/// Encodes a list of byte strings as `u32` little-endian length + bytes each.
pub fn encode_frames<'a>(items: impl IntoIterator<Item = &'a Vec<u8>>) -> Vec<u8> {
    let mut v = Vec::new();
    for h in items {
        v.extend_from_slice(&(h.len() as u32).to_le_bytes());
        v.extend_from_slice(h);
    }
    v
}

/// Decodes [`encode_frames`] output; a truncated tail is ignored.
pub fn decode_frames(data: &[u8]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut at = 0;
    while at + 4 <= data.len() {
        let n = u32::from_le_bytes([data[at], data[at + 1], data[at + 2], data[at + 3]]) as usize;
        at += 4;
        if at + n > data.len() {
            break;
        }
        out.push(data[at..at + n].to_vec());
        at += n;
    }
    out
}

/// What a test scenario does with the outcome of each node's Ready, and with crashes.
pub trait Scenario<S: StateMachine> {
    /// Handles the events `node` (id `id`) produced at simulation step `step`.
    fn on_events(&mut self, seed: u64, step: u64, id: u64, node: &SimRaft<S>, events: Vec<Event>);
    /// Forgets whatever was in flight on the crashed node `id`.
    fn on_crash(&mut self, id: u64);
}

struct Outbox(Vec<(u64, Vec<u8>)>);
impl Transport for Outbox {
    fn send(&mut self, to: u64, _class: TrafficClass, bytes: Vec<u8>) {
        self.0.push((to, bytes));
    }

    fn flush(&mut self) {}
}

/// A datagram in flight.
pub struct Packet {
    pub at: u64,
    pub from: u64,
    pub to: u64,
    pub bytes: Vec<u8>,
}

/// One simulated machine: the node (None while crashed) and what its log made durable.
pub struct SimNode<S: StateMachine> {
    pub node: Option<SimRaft<S>>,
    pub ep: MessageEndpoint,
    pub disk: MemDisk,
    pub incarnation: u64,
}

/// Network fault rates.
#[derive(Clone, Copy)]
pub struct Faults {
    pub drop: f64,
    pub dup: f64,
    pub max_delay: u64,
}

/// The simulated cluster; `app` is the scenario's own state.
pub struct Sim<S: StateMachine, A> {
    pub seed: u64,
    pub rng: StdRng,
    pub step: u64,
    pub nodes: BTreeMap<u64, SimNode<S>>,
    pub voters: Vec<u64>,
    pub net: Vec<Packet>,
    pub isolated: HashSet<u64>,
    pub faults: Faults,
    /// term -> leader seen in that term.
    pub leaders: HashMap<u64, u64>,
    pub app: A,
}

fn node_cfg(id: u64, seed: u64) -> NodeConfig {
    NodeConfig {
        election_seed: Some(seed),
        tick_ns: TICK_NS,
        election_ticks: 10,
        heartbeat_ticks: 1,
        snapshot_interval: 25,
        // Reproducible: snapshots within the Ready that takes them.
        snapshot_thread: false,
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

fn open_node<S: StateMachine + Default>(
    id: u64,
    disk: &MemDisk,
    voters: &[u64],
    seed: u64,
) -> SimRaft<S> {
    let (log, _report) = MemLog::open(disk);
    RaftNode::new(node_cfg(id, seed), log, S::default(), voters).expect("node")
}

impl<S: StateMachine + Default, A: Scenario<S>> Sim<S, A> {
    /// A cluster of voters `1..=n`, all bootstrapped with the same configuration.
    pub fn new(seed: u64, n: u64, faults: Faults, app: A) -> Self {
        let mut s = Sim {
            seed,
            rng: StdRng::seed_from_u64(seed),
            step: 0,
            nodes: BTreeMap::new(),
            voters: (1..=n).collect(),
            net: Vec::new(),
            isolated: HashSet::new(),
            faults,
            leaders: HashMap::new(),
            app,
        };
        for id in 1..=n {
            s.add_node(id, true);
        }
        s
    }

    /// Adds node `id` with fresh storage; `bootstrap` gives it the initial voters.
    pub fn add_node(&mut self, id: u64, bootstrap: bool) {
        let disk = MemDisk::new();
        let voters = if bootstrap {
            self.voters.clone()
        } else {
            vec![]
        };
        let node = Some(open_node(id, &disk, &voters, self.seed));
        let sn = SimNode {
            node,
            ep: endpoint(0),
            disk,
            incarnation: 0,
        };
        self.nodes.insert(id, sn);
    }

    /// Crashes node `id` (volatile state and unsynced log records lost, the durable log kept).
    pub fn crash(&mut self, id: u64) {
        if let Some(sn) = self.nodes.get_mut(&id) {
            sn.node = None;
        }
        self.app.on_crash(id);
    }

    /// Restarts a crashed node from its durable log, as a new incarnation.
    pub fn restart(&mut self, id: u64) {
        let voters = self.voters.clone();
        let seed = self.seed;
        if let Some(sn) = self.nodes.get_mut(&id) {
            if sn.node.is_none() {
                sn.incarnation += 1;
                sn.ep = endpoint(sn.incarnation << 40);
                sn.node = Some(open_node(id, &sn.disk, &voters, seed + sn.incarnation));
            }
        }
    }

    /// Brings back (restart + reconnect) every node in `down` whose recovery step is due.
    pub fn recover_due(&mut self, down: &mut HashMap<u64, u64>) {
        let step = self.step;
        let back: Vec<u64> = down
            .iter()
            .filter(|(_, t)| **t <= step)
            .map(|(id, _)| *id)
            .collect();
        for id in back {
            down.remove(&id);
            self.isolated.remove(&id);
            self.restart(id);
        }
    }

    /// Brings back every node in `down` and calms the network (no loss, delay <= 1).
    pub fn heal(&mut self, down: &HashMap<u64, u64>) {
        for id in down.keys().copied().collect::<Vec<_>>() {
            self.isolated.remove(&id);
            self.restart(id);
        }
        self.faults = Faults {
            drop: 0.0,
            dup: 0.0,
            max_delay: 1,
        };
    }

    /// The live node `id`, if it is up.
    pub fn node(&self, id: u64) -> Option<&SimRaft<S>> {
        self.nodes.get(&id).and_then(|s| s.node.as_ref())
    }

    /// The live node `id`, mutably, if it is up.
    pub fn node_mut(&mut self, id: u64) -> Option<&mut SimRaft<S>> {
        self.nodes.get_mut(&id).and_then(|s| s.node.as_mut())
    }

    /// Ids of the nodes that are up.
    pub fn live(&self) -> Vec<u64> {
        self.nodes
            .iter()
            .filter(|(_, s)| s.node.is_some())
            .map(|(id, _)| *id)
            .collect()
    }

    /// The non-isolated leader of the highest term, if any.
    pub fn leader(&self) -> Option<u64> {
        self.nodes
            .iter()
            .filter_map(|(id, s)| s.node.as_ref().map(|n| (id, n)))
            .filter(|(id, n)| n.is_leader() && !self.isolated.contains(id))
            .max_by_key(|(_, n)| n.term())
            .map(|(id, _)| *id)
    }

    /// One step = one tick of simulated time: deliver due packets, tick every live node,
    /// hand its events to the scenario and put its messages on the network. Asserts that
    /// no term ever has two leaders.
    pub fn run_step(&mut self) {
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
        let seed = self.seed;
        let ids: Vec<u64> = self.nodes.keys().copied().collect();
        for id in ids {
            let sn = self.nodes.get_mut(&id).expect("node");
            let Some(node) = sn.node.as_mut() else {
                continue;
            };
            node.tick_to(now);
            sn.ep.expire(now);
            // As the driver does: what the node hands over early leaves first.
            let mut early = Vec::new();
            let out = node
                .handle_ready_sending(&mut |msgs| early.append(msgs))
                .unwrap_or_else(|e| panic!("seed {seed}: node {id} ready: {e}"));
            let mut ob = Outbox(Vec::new());
            for m in early.iter().chain(&out.messages) {
                sn.ep.send(m, &mut ob).expect("send");
            }
            if node.is_leader() {
                let prev = *self.leaders.entry(node.term()).or_insert(id);
                assert_eq!(prev, id, "seed {seed}: two leaders in term {}", node.term());
            }
            self.app.on_events(seed, self.step, id, node, out.events);
            for (to, bytes) in ob.0 {
                self.enqueue(id, to, bytes);
            }
        }
    }

    /// Puts a packet on the network, subject to the current faults.
    pub fn enqueue(&mut self, from: u64, to: u64, bytes: Vec<u8>) {
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

    /// All of `members` are up, a leader exists, and every member has applied the same
    /// commit index.
    pub fn committed_alike(&self, members: &[u64]) -> bool {
        let nodes: Vec<&SimRaft<S>> = members.iter().filter_map(|id| self.node(*id)).collect();
        if nodes.len() != members.len() || self.leader().is_none() {
            return false;
        }
        let c = nodes[0].commit_index();
        nodes
            .iter()
            .all(|n| n.commit_index() == c && n.applied_index() == c)
    }

    /// A one-line-per-node description; `sm` summarizes a state machine.
    pub fn dump(&self, sm: impl Fn(&S) -> String) -> String {
        let mut out = format!("step {} isolated {:?}\n", self.step, self.isolated);
        for (id, sn) in &self.nodes {
            match &sn.node {
                Some(n) => {
                    out += &format!(
                    "  n{id}: {:?} term {} lead {} commit {} applied {} last {} voters {:?} {}\n",
                    n.role(),
                    n.term(),
                    n.leader_id(),
                    n.commit_index(),
                    n.applied_index(),
                    n.storage().last_index_value(),
                    n.voters(),
                    sm(n.state_machine())
                )
                }
                None => out += &format!("  n{id}: down\n"),
            }
        }
        out
    }
}
