//! The replication engine: a [`RaftNode`] drives `raft::RawNode` (the Rust port of etcd raft,
//! unmodified) through its Ready loop, with time passed in by the caller, proposals batched
//! into Raft entries, a pluggable [`StateMachine`], durable [`DiskStorage`], ReadIndex reads,
//! membership changes, snapshots and log compaction.
//!
//! Driving loop (sans-IO; the caller owns clock and transport):
//! 1. feed received messages with [`RaftNode::step`];
//! 2. advance time with [`RaftNode::tick_to`] (one Raft tick per `tick_ns` of the caller's clock);
//! 3. submit work with [`RaftNode::propose`], [`RaftNode::read_index`], conf changes;
//! 4. call [`RaftNode::handle_ready`], send the returned messages, deliver the returned events.
//!
//! `handle_ready` persists entries, hard state and snapshots (and fsyncs per the storage
//! policy) *before* returning any message, so every message may be sent as soon as it is
//! returned.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::mpsc;

use protobuf::Message as PbMessage;
use raft::eraftpb::{
    ConfChange, ConfChangeType, ConfChangeV2, ConfState, Entry, EntryType, Message, MessageType,
    Snapshot,
};
use raft::{Config, RawNode, SnapshotStatus, StateRole};

use crate::batch::{decode_batch, encode_batch, ProposalId, BATCH_OP_OVERHEAD};
use crate::storage::{DiskStorage, PreparedSnapshot, WriteError};

mod snapshot;

/// Serializes a state taken earlier ([`StateMachine::snapshot_job`]); runs on its
/// own thread.
pub type SnapshotJob = Box<dyn FnOnce() -> Vec<u8> + Send>;

/// An application state machine replicated by Raft.
pub trait StateMachine {
    /// Applies one committed operation at log `index`; returns the result for the proposer.
    fn apply(&mut self, index: u64, op: &[u8]) -> Vec<u8>;
    /// Serializes the whole state (taken after the last applied index).
    fn snapshot(&self) -> Vec<u8>;
    /// The state as it is now (after the last applied index), to be serialized as
    /// [`StateMachine::snapshot`] does by a job the node runs on another thread, so
    /// that a large state does not stall the node's thread (and its heartbeats).
    /// A state machine that can take a copy cheaply (e.g. persistent maps) returns
    /// the copy; the default serializes now, on the node's thread.
    fn snapshot_job(&self) -> SnapshotJob {
        let bytes = self.snapshot();
        Box::new(move || bytes)
    }
    /// Replaces the state with a snapshot produced by [`StateMachine::snapshot`].
    fn restore(&mut self, data: &[u8]);
    /// Learns of a membership change committed at log `index`, after Raft applied it:
    /// `node` was added (`AddNode`, `AddLearnerNode`) or removed (`RemoveNode`), and
    /// `context` is what its proposer passed with it
    /// ([`RaftNode::propose_conf_change_with_context`]), e.g. the new member's
    /// addresses. Called on every replica in log order, like [`StateMachine::apply`], so
    /// what it records belongs in [`StateMachine::snapshot`]. A change Raft refused is
    /// not passed on. Does nothing by default.
    fn apply_conf_change(&mut self, index: u64, change: ConfChangeType, node: u64, context: &[u8]) {
        let _ = (index, change, node, context);
    }

    /// An empty entry of `term` was applied at `index` (a new leader's first entry, or
    /// a membership change Raft emptied): the leader of `term` is established, on every
    /// member alike. Nothing by default.
    fn leader_entry(&mut self, index: u64, term: u64) {
        let _ = (index, term);
    }
}

/// Derives Raft timing from a tunnel's announced bounds.
///
/// * `tick_ns` = the tunnel period (one Raft tick per period; at least 1 ns);
/// * `heartbeat_ticks` = 1: the leader heartbeats every period, matching X-Raft piggybacking
///   commit information on periodic lane messages;
/// * `election_ticks` = `3 * heartbeat_ticks + ceil(2 * max_latency_ns / tick_ns) + 1`: a
///   follower only times out after missing three consecutive heartbeats *and* allowing the
///   worst-case one-way latency for the last heartbeat plus its predecessor's jitter. Raft
///   randomizes the effective timeout in `[election_ticks, 2 * election_ticks)`.
///
/// Always returns `election_ticks > heartbeat_ticks >= 1` (Raft's validity requirement).
pub fn timeouts_from_bounds(period_ns: u64, max_latency_ns: u64) -> (usize, usize, u64) {
    let tick_ns = period_ns.max(1);
    let heartbeat = 1usize;
    let lat_ticks = (2 * max_latency_ns as u128).div_ceil(tick_ns as u128);
    let lat_ticks = usize::try_from(lat_ticks)
        .unwrap_or(usize::MAX / 4)
        .min(1 << 20);
    let election = 3 * heartbeat + lat_ticks + 1;
    (heartbeat, election, tick_ns)
}

/// Ticks between the attempts of a suspicion-started campaign while no
/// leader is known: the other members' detectors may suspect the old leader
/// a little later than the campaigner's, and reject its first (pre-)vote.
pub const CAMPAIGN_RETRY_TICKS: u64 = 10;

/// Configuration of a [`RaftNode`].
#[derive(Debug, Clone)]
pub struct NodeConfig {
    /// Raft id (non-zero).
    pub id: u64,
    /// Heartbeat interval in ticks.
    pub heartbeat_ticks: usize,
    /// Base election timeout in ticks (must exceed `heartbeat_ticks`).
    pub election_ticks: usize,
    /// Nanoseconds per tick of the caller's clock.
    pub tick_ns: u64,
    /// Leaders step down without hearing from a quorum for an election timeout, and
    /// followers ignore votes while their leader's lease holds.
    pub check_quorum: bool,
    /// Pre-vote phase (prevents disruption by rejoining partitioned nodes).
    pub pre_vote: bool,
    /// Flush a batch once it holds this many ops.
    pub max_batch_ops: usize,
    /// Flush a batch once its encoding reaches this many bytes.
    pub max_batch_bytes: usize,
    /// Take a snapshot and compact once this many entries were applied since the last one
    /// (0 disables automatic snapshots).
    pub snapshot_interval: u64,
    /// Serialize and write automatic snapshots on a thread of their own (the state
    /// machine's [`StateMachine::snapshot_job`]), installed by a later Ready, so that
    /// the node's thread does not stall for the size of the state. Off: on the
    /// node's thread, within the Ready that takes them (reproducible, for
    /// simulations).
    pub snapshot_thread: bool,
    /// Max bytes of entries per append message.
    pub max_size_per_msg: u64,
    /// Max in-flight append messages per follower.
    pub max_inflight_msgs: usize,
    /// A pending read-index request fails after this many ticks without an answer.
    pub read_timeout_ticks: u64,
    /// If set, the randomized election timeout (in `[election_ticks, 2*election_ticks)`) is
    /// drawn from a generator seeded with this value instead of the raft crate's thread
    /// RNG, making a simulated cluster fully reproducible.
    pub election_seed: Option<u64>,
}

impl NodeConfig {
    /// Defaults: heartbeat 1 tick, election 10 ticks, 1 ms ticks.
    pub fn new(id: u64) -> Self {
        Self {
            id,
            heartbeat_ticks: 1,
            election_ticks: 10,
            tick_ns: 1_000_000,
            check_quorum: true,
            pre_vote: true,
            max_batch_ops: 1024,
            max_batch_bytes: 256 << 10,
            snapshot_interval: 10_000,
            snapshot_thread: true,
            max_size_per_msg: 64 << 10,
            max_inflight_msgs: 256,
            read_timeout_ticks: 40,
            election_seed: None,
        }
    }

    /// Defaults with timing from [`timeouts_from_bounds`].
    pub fn from_bounds(id: u64, period_ns: u64, max_latency_ns: u64) -> Self {
        let (h, e, t) = timeouts_from_bounds(period_ns, max_latency_ns);
        Self {
            heartbeat_ticks: h,
            election_ticks: e,
            tick_ns: t,
            read_timeout_ticks: 4 * e as u64,
            ..Self::new(id)
        }
    }
}

/// Identifies one read-index request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ReadId(pub u64);

/// Why a proposal did not (knowingly) get applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DropReason {
    /// This node was not (or stopped being) leader before the batch entered the log.
    NotLeader,
    /// The entry was replaced by another leader's entry: definitely not applied.
    Overwritten,
    /// A snapshot covered the entry before it was seen applied: outcome unknown.
    Indeterminate,
    /// Raft refused it when it was committed (a membership change that was invalid by
    /// then): definitely not applied.
    Refused,
}

/// Something the application must learn about.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// A proposal was committed and applied at `index`; `result` is the state machine's.
    Applied {
        /// Proposal.
        id: ProposalId,
        /// Log index of the batch entry.
        index: u64,
        /// Result of [`StateMachine::apply`].
        result: Vec<u8>,
    },
    /// A proposal will not be reported applied.
    Dropped {
        /// Proposal.
        id: ProposalId,
        /// Why.
        reason: DropReason,
    },
    /// A read-index request is satisfied: the local state machine has applied at least
    /// `index`, so reading it now is linearizable.
    ReadReady {
        /// Request.
        id: ReadId,
        /// Read index confirmed by a quorum.
        index: u64,
    },
    /// A read-index request got no answer in time (leader change, lost message): retry.
    ReadFailed {
        /// Request.
        id: ReadId,
    },
    /// A membership change was applied.
    ConfChanged {
        /// The local proposal, if this node proposed it.
        id: Option<ProposalId>,
        /// Log index of the change.
        index: u64,
        /// Resulting configuration.
        conf: ConfState,
    },
    /// Leader or role changed.
    RoleChanged {
        /// Current leader id (0 = unknown).
        leader: u64,
        /// This node's role.
        role: StateRole,
        /// Current term.
        term: u64,
    },
    /// The state machine was replaced by a snapshot received from the leader.
    SnapshotInstalled {
        /// Snapshot index.
        index: u64,
    },
}

/// Errors creating a node.
#[derive(Debug, thiserror::Error)]
pub enum NewNodeError {
    /// Raft rejected the configuration or storage.
    #[error("raft: {0}")]
    Raft(#[from] raft::Error),
    /// Bootstrapping the storage failed.
    #[error("storage: {0}")]
    Storage(#[from] WriteError),
}

/// Errors proposing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProposeError {
    /// Only the leader accepts proposals; `leader` is the known leader (0 = unknown).
    #[error("not leader (leader hint {leader})")]
    NotLeader {
        /// Known leader id, 0 if unknown.
        leader: u64,
    },
    /// Raft refused the proposal (e.g. a conf change is already pending, transfer ongoing).
    #[error("proposal dropped by raft")]
    Dropped,
    /// The membership change cannot be made from the current configuration.
    #[error("{0}")]
    ConfChange(#[from] ConfChangeError),
}

/// Why a membership change was refused before it was proposed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ConfChangeError {
    /// Raft ids are non-zero.
    #[error("node id 0 is not a valid raft id")]
    ZeroId,
    /// An earlier change is not applied yet (Raft makes one change at a time). Also
    /// reported for a while after an election, until the new leader has applied its log.
    #[error("a membership change is already in progress")]
    Pending,
    /// The node to add is already a member (a voter, or a learner for a learner).
    #[error("node {0} is already a member")]
    AlreadyMember(u64),
    /// The node to remove is not a member.
    #[error("node {0} is not a member")]
    NotMember(u64),
    /// Removing the only voter would leave no one to commit.
    #[error("node {0} is the last voter")]
    LastVoter(u64),
    /// The configuration is joint (only single changes are made here).
    #[error("the configuration is joint")]
    Joint,
}

/// Checks a single membership change against configuration `conf`: `Ok` if Raft will
/// apply it.
pub fn check_conf_change(
    conf: &ConfState,
    change: ConfChangeType,
    node: u64,
) -> Result<(), ConfChangeError> {
    if node == 0 {
        return Err(ConfChangeError::ZeroId);
    }
    if !conf.voters_outgoing.is_empty() {
        return Err(ConfChangeError::Joint);
    }
    let voter = conf.voters.contains(&node);
    let learner = conf.learners.contains(&node);
    match change {
        ConfChangeType::AddNode if voter => Err(ConfChangeError::AlreadyMember(node)),
        ConfChangeType::AddLearnerNode if voter || learner => {
            Err(ConfChangeError::AlreadyMember(node))
        }
        ConfChangeType::RemoveNode if !voter && !learner => Err(ConfChangeError::NotMember(node)),
        ConfChangeType::RemoveNode if voter && conf.voters.len() == 1 => {
            Err(ConfChangeError::LastVoter(node))
        }
        _ => Ok(()),
    }
}

/// Errors stepping a received message.
#[derive(Debug, thiserror::Error)]
pub enum StepError {
    /// The message is a local message type and cannot come from the network.
    #[error("local message type from network")]
    LocalMessage,
    /// The sender is not a known peer (e.g. a response from a removed node).
    #[error("unknown peer")]
    PeerNotFound,
    /// Other raft error.
    #[error("raft: {0}")]
    Raft(raft::Error),
}

/// Errors handling a Ready.
#[derive(Debug, thiserror::Error)]
pub enum ReadyError {
    /// Persisting failed; the node must not continue (restart it from its storage).
    #[error("storage: {0}")]
    Storage(#[from] WriteError),
    /// Raft rejected an operation while applying (e.g. an invalid conf change).
    #[error("raft: {0}")]
    Raft(#[from] raft::Error),
}

/// Output of [`RaftNode::handle_ready`].
#[derive(Debug, Default)]
pub struct ReadyOutput {
    /// Messages to send (each has `to` set); safe to send immediately.
    pub messages: Vec<Message>,
    /// Events for the application, in order.
    pub events: Vec<Event>,
}

struct Inflight {
    term: u64,
    ids: Vec<ProposalId>,
}

/// A Raft replica with a state machine and durable storage.
pub struct RaftNode<S: StateMachine> {
    raw: RawNode<DiskStorage>,
    sm: S,
    cfg: NodeConfig,
    next_seq: u64,
    batch: Vec<(ProposalId, Vec<u8>)>,
    batch_bytes: usize,
    inflight: BTreeMap<u64, Inflight>,
    read_seq: u64,
    reads_requested: HashMap<ReadId, u64>,
    reads_confirmed: VecDeque<(ReadId, u64)>,
    ticks: u64,
    last_tick_ns: Option<u64>,
    /// After a suspicion-started campaign: the tick of the next attempt while
    /// no leader is known (see [`RaftNode::on_leader_suspected`]).
    campaign_retry_at: Option<u64>,
    applied: u64,
    events: Vec<Event>,
    role: (u64, StateRole),
    rng: Option<u64>,
    timeout_epoch: (u64, StateRole),
    /// The snapshot being serialized and written on its own thread.
    snapshotting: Option<mpsc::Receiver<Result<PreparedSnapshot, WriteError>>>,
    /// The commit index at the last Ready ([`crate::coalesce::tell_commit`]).
    commit_seen: u64,
}

fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The error of a conf change entry that does not decode (skipped on every replica).
fn bad_cc() -> raft::Error {
    raft::Error::ConfChangeError("undecodable conf change entry".into())
}

fn encode_id(id: ProposalId) -> Vec<u8> {
    let mut v = id.node.to_le_bytes().to_vec();
    v.extend_from_slice(&id.seq.to_le_bytes());
    v
}

fn decode_id(b: &[u8]) -> Option<ProposalId> {
    if b.len() != 16 {
        return None;
    }
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[..8]);
    let node = u64::from_le_bytes(a);
    a.copy_from_slice(&b[8..]);
    Some(ProposalId {
        node,
        seq: u64::from_le_bytes(a),
    })
}

impl<S: StateMachine> RaftNode<S> {
    /// Creates a node over `storage`. If the storage is empty and `initial_voters` is not,
    /// the cluster is bootstrapped with those voters (a snapshot at index 1 holding the
    /// fresh state machine). An empty storage with no voters starts a node waiting to be
    /// added by a conf change (it will receive a snapshot from the leader). A non-empty
    /// storage restarts: the state machine is restored from the stored snapshot and the
    /// committed log after it is re-applied.
    pub fn new(
        cfg: NodeConfig,
        storage: DiskStorage,
        sm: S,
        initial_voters: &[u64],
    ) -> Result<Self, NewNodeError> {
        let logger = slog::Logger::root(slog::Discard, slog::o!());
        Self::new_with_logger(cfg, storage, sm, initial_voters, &logger)
    }

    /// Like [`RaftNode::new`] with a `slog` logger for the raft crate's own logging.
    pub fn new_with_logger(
        cfg: NodeConfig,
        mut storage: DiskStorage,
        mut sm: S,
        initial_voters: &[u64],
        logger: &slog::Logger,
    ) -> Result<Self, NewNodeError> {
        if !storage.is_initialized() && !initial_voters.is_empty() {
            let mut snap = Snapshot::default();
            snap.mut_metadata().index = 1;
            snap.mut_metadata().term = 1;
            snap.mut_metadata().mut_conf_state().voters = initial_voters.to_vec();
            snap.data = sm.snapshot().into();
            storage.apply_snapshot(snap)?;
            storage.sync()?;
        }
        let applied = match storage.latest_snapshot() {
            Some(s) => {
                sm.restore(&s.data);
                s.get_metadata().index
            }
            None => 0,
        };
        let rc = Config {
            id: cfg.id,
            election_tick: cfg.election_ticks,
            heartbeat_tick: cfg.heartbeat_ticks,
            max_size_per_msg: cfg.max_size_per_msg,
            max_inflight_msgs: cfg.max_inflight_msgs,
            check_quorum: cfg.check_quorum,
            pre_vote: cfg.pre_vote,
            applied,
            // Commit notices are the node's to send ([`crate::coalesce::tell_commit`]).
            skip_bcast_commit: true,
            ..Default::default()
        };
        let raw = RawNode::new(&rc, storage, logger)?;
        let role = (raw.raft.leader_id, raw.raft.state);
        let timeout_epoch = (raw.raft.term, raw.raft.state);
        let rng = cfg
            .election_seed
            .map(|s| s ^ cfg.id.wrapping_mul(0xA24B_AED4_963E_E407));
        let mut me = Self {
            raw,
            sm,
            cfg,
            next_seq: 1,
            batch: Vec::new(),
            batch_bytes: 0,
            inflight: BTreeMap::new(),
            read_seq: 0,
            reads_requested: HashMap::new(),
            reads_confirmed: VecDeque::new(),
            snapshotting: None,
            ticks: 0,
            last_tick_ns: None,
            campaign_retry_at: None,
            applied,
            events: Vec::new(),
            role,
            rng,
            timeout_epoch,
            commit_seen: 0,
        };
        me.reseed_timeout(true);
        Ok(me)
    }

    /// With `election_seed`, replaces raft's randomized election timeout after each reset
    /// (raft resets it whenever term or role changes).
    fn reseed_timeout(&mut self, force: bool) {
        let Some(state) = self.rng.as_mut() else {
            return;
        };
        let epoch = (self.raw.raft.term, self.raw.raft.state);
        if !force && epoch == self.timeout_epoch {
            return;
        }
        self.timeout_epoch = epoch;
        let min = self.raw.raft.election_timeout();
        let t = min + (splitmix64(state) % min.max(1) as u64) as usize;
        self.raw.raft.set_randomized_election_timeout(t);
    }

    /// Raft id.
    pub fn id(&self) -> u64 {
        self.cfg.id
    }

    /// The configuration.
    pub fn config(&self) -> &NodeConfig {
        &self.cfg
    }

    /// Current term.
    pub fn term(&self) -> u64 {
        self.raw.raft.term
    }

    /// Known leader (0 = unknown).
    pub fn leader_id(&self) -> u64 {
        self.raw.raft.leader_id
    }

    /// Whether this node is the leader.
    pub fn is_leader(&self) -> bool {
        self.raw.raft.state == StateRole::Leader
    }

    /// This node's role.
    pub fn role(&self) -> StateRole {
        self.raw.raft.state
    }

    /// Index of the last entry applied to the state machine.
    pub fn applied_index(&self) -> u64 {
        self.applied
    }

    /// Commit index known locally.
    pub fn commit_index(&self) -> u64 {
        self.raw.raft.raft_log.committed
    }

    /// The state machine (read-only: mutate only through proposals).
    pub fn state_machine(&self) -> &S {
        &self.sm
    }

    /// The durable storage.
    pub fn storage(&self) -> &DiskStorage {
        self.raw.store()
    }

    /// Current voters.
    pub fn voters(&self) -> Vec<u64> {
        self.raw.store().conf_state().voters.clone()
    }

    /// The configuration as applied so far (voters, learners).
    pub fn conf_state(&self) -> ConfState {
        self.raw.raft.prs().conf().to_conf_state()
    }

    /// The wrapped raw node (for inspection).
    pub fn raw(&self) -> &RawNode<DiskStorage> {
        &self.raw
    }

    /// Advances one Raft tick.
    pub fn tick(&mut self) {
        self.raw.tick();
        self.reseed_timeout(false);
        self.ticks += 1;
        let now = self.ticks;
        if let Some(at) = self.campaign_retry_at {
            if self.raw.raft.leader_id != 0 || !self.raw.raft.promotable() {
                self.campaign_retry_at = None;
            } else if now >= at {
                let _ = self.campaign();
                self.campaign_retry_at = Some(now + CAMPAIGN_RETRY_TICKS);
            }
        }
        let timeout = self.cfg.read_timeout_ticks;
        let mut failed: Vec<ReadId> = self
            .reads_requested
            .iter()
            .filter(|(_, t)| now.saturating_sub(**t) > timeout)
            .map(|(id, _)| *id)
            .collect();
        failed.sort();
        for id in failed {
            self.reads_requested.remove(&id);
            self.events.push(Event::ReadFailed { id });
        }
    }

    /// Ticks as many times as `tick_ns` units elapsed on the caller's clock since the last
    /// call (the first call only sets the origin). At most `2 * election_ticks` ticks are
    /// run per call so that a long stall does not fire a burst of elections.
    pub fn tick_to(&mut self, now_ns: u64) {
        let tick_ns = self.cfg.tick_ns.max(1);
        let Some(last) = self.last_tick_ns else {
            self.last_tick_ns = Some(now_ns);
            return;
        };
        let n = now_ns.saturating_sub(last) / tick_ns;
        let cap = 2 * self.cfg.election_ticks as u64;
        for _ in 0..n.min(cap) {
            self.tick();
        }
        self.last_tick_ns = Some(if n > cap { now_ns } else { last + n * tick_ns });
    }

    /// Starts an election now.
    pub fn campaign(&mut self) -> Result<(), raft::Error> {
        let r = self.raw.campaign();
        self.reseed_timeout(false);
        r
    }

    /// Failure-detector hook (X-FD suspicion → election): if `suspect` is the current
    /// leader, forget its lease (so this node grants votes at once despite `check_quorum`)
    /// and, if `campaign`, start an election without waiting for the election timeout;
    /// otherwise push this node's own election timer to its latest point so it does not
    /// compete with the campaigner. Returns whether an election was started. Typically the
    /// detector of exactly one follower (e.g. the lowest live id) passes `campaign = true`. Nodes whose detector does not suspect the
    /// leader keep rejecting votes until their own election timeout, which is Raft's
    /// protection against a single faulty detector deposing a healthy leader. The
    /// campaigner tries again every [`CAMPAIGN_RETRY_TICKS`] while it knows no leader
    /// (the others' detectors may suspect a little later than its own).
    pub fn on_leader_suspected(&mut self, suspect: u64, campaign: bool) -> bool {
        if suspect == 0 || suspect != self.raw.raft.leader_id || suspect == self.cfg.id {
            return false;
        }
        let timeout = self.raw.raft.election_timeout();
        if self.raw.raft.election_elapsed < timeout {
            self.raw.raft.election_elapsed = timeout;
        }
        if campaign && self.raw.raft.promotable() {
            // The others may not suspect the leader yet and reject this
            // (pre-)vote; it is retried while no leader is known.
            self.campaign_retry_at = Some(self.ticks + CAMPAIGN_RETRY_TICKS);
            return self.campaign().is_ok();
        }
        // Not campaigning: defer our own timeout as far as raft allows so that the
        // designated campaigner is not met by a competing candidacy (split vote).
        self.raw
            .raft
            .set_randomized_election_timeout(2 * timeout - 1);
        false
    }

    /// Asks the leader to hand leadership to `to`.
    pub fn transfer_leader(&mut self, to: u64) {
        self.raw.transfer_leader(to);
    }

    /// Feeds a message received from a peer.
    pub fn step(&mut self, msg: Message) -> Result<(), StepError> {
        let r = self.raw.step(msg);
        self.reseed_timeout(false);
        match r {
            Ok(()) => Ok(()),
            Err(raft::Error::StepLocalMsg) => Err(StepError::LocalMessage),
            Err(raft::Error::StepPeerNotFound) => Err(StepError::PeerNotFound),
            Err(e) => Err(StepError::Raft(e)),
        }
    }

    fn check_leader(&self) -> Result<(), ProposeError> {
        if self.raw.raft.state != StateRole::Leader || self.raw.raft.lead_transferee.is_some() {
            return Err(ProposeError::NotLeader {
                leader: self.raw.raft.leader_id,
            });
        }
        Ok(())
    }

    /// Queues an operation; it joins the current batch, proposed as one Raft entry at the
    /// next [`RaftNode::handle_ready`] (or earlier when the batch is full). The outcome is
    /// reported as [`Event::Applied`] or [`Event::Dropped`] with the returned id.
    pub fn propose(&mut self, op: Vec<u8>) -> Result<ProposalId, ProposeError> {
        self.check_leader()?;
        let id = ProposalId {
            node: self.cfg.id,
            seq: self.next_seq,
        };
        self.next_seq += 1;
        self.batch_bytes += BATCH_OP_OVERHEAD + op.len();
        self.batch.push((id, op));
        if self.batch.len() >= self.cfg.max_batch_ops
            || self.batch_bytes >= self.cfg.max_batch_bytes
        {
            self.flush_batch();
        }
        Ok(id)
    }

    /// Proposes the queued batch now (called by `handle_ready`).
    pub fn flush_batch(&mut self) {
        if self.batch.is_empty() {
            return;
        }
        let batch = std::mem::take(&mut self.batch);
        self.batch_bytes = 0;
        let ids: Vec<ProposalId> = batch.iter().map(|(id, _)| *id).collect();
        let data = match encode_batch(&batch) {
            Ok(d) => d,
            Err(_) => {
                self.drop_all(ids, DropReason::NotLeader);
                return;
            }
        };
        if self.check_leader().is_err() {
            self.drop_all(ids, DropReason::NotLeader);
            return;
        }
        match self.raw.propose(vec![], data) {
            Ok(()) => {
                let index = self.raw.raft.raft_log.last_index();
                let term = self.raw.raft.term;
                self.track(index, term, ids);
            }
            Err(_) => self.drop_all(ids, DropReason::NotLeader),
        }
    }

    fn track(&mut self, index: u64, term: u64, ids: Vec<ProposalId>) {
        if let Some(old) = self.inflight.insert(index, Inflight { term, ids }) {
            self.drop_all(old.ids, DropReason::Overwritten);
        }
    }

    fn drop_all(&mut self, ids: Vec<ProposalId>, reason: DropReason) {
        for id in ids {
            self.events.push(Event::Dropped { id, reason });
        }
    }

    /// Proposes a single membership change (ConfChange V1, no joint consensus): add or
    /// remove a voter, or add a learner.
    pub fn propose_conf_change(
        &mut self,
        change: ConfChangeType,
        node: u64,
    ) -> Result<ProposalId, ProposeError> {
        self.propose_conf_change_with_context(change, node, Vec::new())
    }

    /// Like [`RaftNode::propose_conf_change`], with `context` carried in the log entry and
    /// handed to every replica's [`StateMachine::apply_conf_change`]. Refused at once
    /// ([`ProposeError::ConfChange`]) if the change is invalid in the current
    /// configuration ([`check_conf_change`]) or another change is not applied yet. The
    /// outcome is [`Event::ConfChanged`] with the returned id, or [`Event::Dropped`].
    pub fn propose_conf_change_with_context(
        &mut self,
        change: ConfChangeType,
        node: u64,
        context: Vec<u8>,
    ) -> Result<ProposalId, ProposeError> {
        self.check_leader()?;
        // Raft would turn a second change into an empty entry and never say so.
        if self.raw.raft.has_pending_conf() {
            return Err(ConfChangeError::Pending.into());
        }
        check_conf_change(&self.conf_state(), change, node)?;
        self.flush_batch();
        let id = ProposalId {
            node: self.cfg.id,
            seq: self.next_seq,
        };
        self.next_seq += 1;
        let mut cc = ConfChange::default();
        cc.set_change_type(change);
        cc.node_id = node;
        cc.context = context.into();
        match self.raw.propose_conf_change(encode_id(id), cc) {
            Ok(()) => {
                let index = self.raw.raft.raft_log.last_index();
                let term = self.raw.raft.term;
                self.track(index, term, vec![id]);
                Ok(id)
            }
            Err(_) => Err(ProposeError::Dropped),
        }
    }

    /// Requests a linearizable read barrier (Raft ReadIndex, safe mode: the leader confirms
    /// leadership with a heartbeat quorum). [`Event::ReadReady`] with the returned id tells
    /// when the local state machine may be read; [`Event::ReadFailed`] when to retry.
    /// Works on followers too (the request is forwarded to the leader).
    pub fn read_index(&mut self) -> ReadId {
        self.read_seq += 1;
        let id = ReadId(self.read_seq);
        let mut ctx = self.cfg.id.to_le_bytes().to_vec();
        ctx.extend_from_slice(&id.0.to_le_bytes());
        self.reads_requested.insert(id, self.ticks);
        self.raw.read_index(ctx);
        id
    }

    /// Processes Raft's Ready: persists the snapshot, entries and hard state, applies
    /// committed entries, advances, and returns messages to send plus application events.
    pub fn handle_ready(&mut self) -> Result<ReadyOutput, ReadyError> {
        self.flush_batch();
        crate::coalesce::tell_commit(&mut self.raw.raft, &mut self.commit_seen);
        let mut out = ReadyOutput::default();
        if self.raw.has_ready() {
            let mut rd = self.raw.ready();
            // Leader messages may be sent before persisting (Raft thesis 10.2.1); we
            // return everything after persisting, which is also correct.
            out.messages.extend(rd.take_messages());
            if !rd.snapshot().is_empty() {
                let snap = rd.snapshot().clone();
                self.install_snapshot(snap)?;
            }
            let committed = rd.take_committed_entries();
            self.apply_entries(committed)?;
            if !rd.entries().is_empty() {
                self.raw.mut_store().append(rd.entries())?;
            }
            if let Some(hs) = rd.hs() {
                let hs = hs.clone();
                self.raw.mut_store().set_hard_state(&hs)?;
            }
            self.raw.mut_store().sync()?;
            out.messages.extend(rd.take_persisted_messages());
            for rs in rd.take_read_states() {
                self.on_read_state(&rs.request_ctx, rs.index);
            }
            let mut light = self.raw.advance(rd);
            if let Some(commit) = light.commit_index() {
                let mut hs = self.raw.store().hard_state().clone();
                hs.commit = commit;
                self.raw.mut_store().set_hard_state(&hs)?;
            }
            out.messages.extend(light.take_messages());
            let committed = light.take_committed_entries();
            self.apply_entries(committed)?;
            self.raw.advance_apply();
            // The transport is fire-and-forget: report snapshots as sent so the leader
            // probes the follower again; a lost snapshot is then simply resent.
            for m in &out.messages {
                if m.get_msg_type() == MessageType::MsgSnapshot {
                    self.raw.report_snapshot(m.to, SnapshotStatus::Finish);
                }
            }
        }
        self.reseed_timeout(false);
        self.note_role();
        self.serve_reads();
        self.install_finished_snapshot()?;
        let wanted = self.raw.store().take_snapshot_wanted();
        if self.snapshotting.is_none()
            && (wanted
                || (self.cfg.snapshot_interval > 0
                    && self.applied
                        >= self.raw.store().compacted_index() + self.cfg.snapshot_interval))
        {
            self.start_snapshot()?;
        }
        // What the Ready wrote after its sync (the commit index the persisted entries
        // advanced) reaches the log before its messages leave.
        self.raw.mut_store().flush()?;
        crate::coalesce::subsume_commit_notices(&mut out.messages);
        out.events = std::mem::take(&mut self.events);
        Ok(out)
    }

    fn note_role(&mut self) {
        let now = (self.raw.raft.leader_id, self.raw.raft.state);
        if now != self.role {
            let was_leader = self.role.1 == StateRole::Leader;
            self.role = now;
            if was_leader && now.1 != StateRole::Leader && !self.batch.is_empty() {
                let ids = self.batch.drain(..).map(|(id, _)| id).collect();
                self.batch_bytes = 0;
                self.drop_all(ids, DropReason::NotLeader);
            }
            self.events.push(Event::RoleChanged {
                leader: now.0,
                role: now.1,
                term: self.raw.raft.term,
            });
        }
    }

    fn install_snapshot(&mut self, snap: Snapshot) -> Result<(), ReadyError> {
        let index = snap.get_metadata().index;
        self.sm.restore(&snap.data);
        self.raw.mut_store().apply_snapshot(snap)?;
        self.applied = index;
        let covered: Vec<u64> = self.inflight.range(..=index).map(|(k, _)| *k).collect();
        for k in covered {
            if let Some(inf) = self.inflight.remove(&k) {
                self.drop_all(inf.ids, DropReason::Indeterminate);
            }
        }
        self.events.push(Event::SnapshotInstalled { index });
        Ok(())
    }

    fn apply_entries(&mut self, entries: Vec<Entry>) -> Result<(), ReadyError> {
        for e in entries {
            if e.index <= self.applied {
                continue;
            }
            let mine = match self.inflight.remove(&e.index) {
                Some(inf) if inf.term == e.term => Some(inf.ids),
                Some(inf) => {
                    self.drop_all(inf.ids, DropReason::Overwritten);
                    None
                }
                None => None,
            };
            match e.get_entry_type() {
                EntryType::EntryNormal => {
                    if e.data.is_empty() {
                        // Leader's no-op entry, or a conf change raft emptied at
                        // proposal: nothing of ours was applied.
                        self.sm.leader_entry(e.index, e.term);
                        if let Some(ids) = mine {
                            self.drop_all(ids, DropReason::Refused);
                        }
                    } else if let Ok(ops) = decode_batch(&e.data) {
                        for (id, op) in ops {
                            let result = self.sm.apply(e.index, op);
                            if mine.as_ref().is_some_and(|m| m.contains(&id)) {
                                self.events.push(Event::Applied {
                                    id,
                                    index: e.index,
                                    result,
                                });
                            }
                        }
                    }
                    // An undecodable entry is skipped identically on every replica.
                }
                EntryType::EntryConfChange => match ConfChange::parse_from_bytes(&e.data) {
                    Ok(cc) => {
                        let changes = [(cc.get_change_type(), cc.node_id)];
                        let applied = self.raw.apply_conf_change(&cc);
                        self.conf_applied(&e, applied, &changes, &cc.context, mine)?;
                    }
                    Err(_) => self.conf_applied(&e, Err(bad_cc()), &[], &[], mine)?,
                },
                EntryType::EntryConfChangeV2 => match ConfChangeV2::parse_from_bytes(&e.data) {
                    Ok(cc) => {
                        let changes: Vec<_> = cc
                            .changes
                            .iter()
                            .map(|c| (c.get_change_type(), c.node_id))
                            .collect();
                        let applied = self.raw.apply_conf_change(&cc);
                        self.conf_applied(&e, applied, &changes, &cc.context, mine)?;
                    }
                    Err(_) => self.conf_applied(&e, Err(bad_cc()), &[], &[], mine)?,
                },
            }
            self.applied = e.index;
        }
        Ok(())
    }

    /// After raft applied (or refused) the membership change of entry `e`: persists the
    /// new configuration, tells the state machine and reports the outcome. A change
    /// raft refuses (invalid by the time it is committed) is skipped the same way on
    /// every replica; it does not stop the node.
    fn conf_applied(
        &mut self,
        e: &Entry,
        applied: Result<ConfState, raft::Error>,
        changes: &[(ConfChangeType, u64)],
        context: &[u8],
        mine: Option<Vec<ProposalId>>,
    ) -> Result<(), ReadyError> {
        let cs = match applied {
            Ok(cs) => cs,
            Err(_) => {
                if let Some(ids) = mine {
                    self.drop_all(ids, DropReason::Refused);
                }
                return Ok(());
            }
        };
        self.raw.mut_store().set_conf_state(e.index, &cs)?;
        for &(change, node) in changes {
            self.sm.apply_conf_change(e.index, change, node, context);
        }
        let id = mine.and_then(|_| decode_id(&e.context));
        self.events.push(Event::ConfChanged {
            id,
            index: e.index,
            conf: cs,
        });
        Ok(())
    }

    fn on_read_state(&mut self, ctx: &[u8], index: u64) {
        if ctx.len() != 16 {
            return;
        }
        let mut a = [0u8; 8];
        a.copy_from_slice(&ctx[..8]);
        if u64::from_le_bytes(a) != self.cfg.id {
            return;
        }
        a.copy_from_slice(&ctx[8..]);
        let id = ReadId(u64::from_le_bytes(a));
        if self.reads_requested.remove(&id).is_some() {
            self.reads_confirmed.push_back((id, index));
        }
    }

    fn serve_reads(&mut self) {
        let applied = self.applied;
        let mut keep = VecDeque::new();
        while let Some((id, index)) = self.reads_confirmed.pop_front() {
            if index <= applied {
                self.events.push(Event::ReadReady { id, index });
            } else {
                keep.push_back((id, index));
            }
        }
        self.reads_confirmed = keep;
    }
}

#[cfg(test)]
mod tests {
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
}
