//! What a [`super::RaftNode`]'s user meets: the [`StateMachine`] it
//! replicates, its configuration, the events it delivers and its errors.

use raft::eraftpb::{ConfChangeType, ConfState, Message};
use raft::StateRole;

#[cfg(doc)]
use super::RaftNode;
use crate::batch::ProposalId;
use crate::log_store::WriteError;

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
    /// Take a snapshot and compact once the entries appended since the last one hold this
    /// many bytes, however few they are (0: no bound by size). The log is kept in memory:
    /// this bounds it where entries are large (batches of pipelined commands, big values).
    pub snapshot_log_bytes: u64,
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
            snapshot_log_bytes: 64 << 20,
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
