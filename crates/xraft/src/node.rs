//! The replication engine: a [`RaftNode`] drives `raft::RawNode` (the Rust port of etcd raft,
//! unmodified) through its Ready loop, with time passed in by the caller, proposals batched
//! into Raft entries, a pluggable [`StateMachine`], a raft log behind [`LogStore`] (the
//! durable [`DiskStorage`] by default, or the in-memory [`crate::mem_log::MemLog`]),
//! ReadIndex reads, membership changes, snapshots and log compaction.
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
use crate::log_store::{LogStore, WriteError};
use crate::storage::DiskStorage;

mod snapshot;

mod api;
pub use api::*;

struct Inflight {
    term: u64,
    ids: Vec<ProposalId>,
}

/// A Raft replica with a state machine and its raft log `L`.
pub struct RaftNode<S: StateMachine, L: LogStore = DiskStorage> {
    raw: RawNode<L>,
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
    rng: Option<xlane_stats::SplitMix64>,
    timeout_epoch: (u64, StateRole),
    /// The snapshot being serialized and written on its own thread.
    snapshotting: Option<mpsc::Receiver<Result<L::PreparedSnapshot, WriteError>>>,
    /// The commit index at the last Ready ([`crate::coalesce::tell_commit`]).
    commit_seen: u64,
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

impl<S: StateMachine, L: LogStore> RaftNode<S, L> {
    /// Creates a node over `storage`. If the storage is empty and `initial_voters` is not,
    /// the cluster is bootstrapped with those voters (a snapshot at index 1 holding the
    /// fresh state machine). An empty storage with no voters starts a node waiting to be
    /// added by a conf change (it will receive a snapshot from the leader). A non-empty
    /// storage restarts: the state machine is restored from the stored snapshot and the
    /// committed log after it is re-applied.
    pub fn new(
        cfg: NodeConfig,
        storage: L,
        sm: S,
        initial_voters: &[u64],
    ) -> Result<Self, NewNodeError> {
        let logger = slog::Logger::root(slog::Discard, slog::o!());
        Self::new_with_logger(cfg, storage, sm, initial_voters, &logger)
    }

    /// Like [`RaftNode::new`] with a `slog` logger for the raft crate's own logging.
    pub fn new_with_logger(
        cfg: NodeConfig,
        mut storage: L,
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
            .map(|s| xlane_stats::SplitMix64::new(s ^ cfg.id.wrapping_mul(0xA24B_AED4_963E_E407)));
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
        let Some(rng) = self.rng.as_mut() else {
            return;
        };
        let epoch = (self.raw.raft.term, self.raw.raft.state);
        if !force && epoch == self.timeout_epoch {
            return;
        }
        self.timeout_epoch = epoch;
        let min = self.raw.raft.election_timeout();
        let t = min + (rng.next_u64() % min.max(1) as u64) as usize;
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

    /// On the leader, every other member (voters and learners) with the
    /// highest index known to be in its log (raft's `matched`), in id
    /// order; empty on a follower, whose view of the others is stale.
    pub fn followers_matched(&self) -> Vec<(u64, u64)> {
        if !self.is_leader() {
            return Vec::new();
        }
        let mut out: Vec<(u64, u64)> = self
            .raw
            .raft
            .prs()
            .iter()
            .filter(|(id, _)| **id != self.cfg.id)
            .map(|(id, p)| (*id, p.matched))
            .collect();
        out.sort_unstable();
        out
    }

    /// The raft log.
    pub fn storage(&self) -> &L {
        self.raw.store()
    }

    /// Whether the local state machine may be read now, linearizably, without a read
    /// index: this node leads, it is the only voter, it has committed an entry of its own
    /// term, and every committed entry is applied.
    ///
    /// Why that is linearizable: with one voter, an entry commits as soon as this node
    /// has it, and no other node can win an election (it would need this node's vote,
    /// and voting for a newer term makes this node a follower first). So while it leads,
    /// no entry commits anywhere but here, and once an entry of its term is committed its
    /// commit index covers every entry committed before (Raft's leader completeness). A
    /// read served from the applied state then sees every write acknowledged before it
    /// started, which is all a read index would wait for. Adding a voter goes through
    /// this node's log, and the answer turns false once that change is applied.
    pub fn reads_local(&self) -> bool {
        let r = &self.raw.raft;
        r.state == StateRole::Leader
            && r.prs().is_singleton()
            && r.prs().conf().voters().contains(self.cfg.id)
            && r.raft_log.term(r.raft_log.committed).ok() == Some(r.term)
            && self.applied >= r.raft_log.committed
    }

    /// Fsyncs the log if [`crate::FsyncPolicy::EverySec`] says it is due
    /// ([`LogStore::sync_due`]); the driver calls it every turn.
    pub fn sync_due(&mut self) -> Result<(), WriteError> {
        self.raw.mut_store().sync_due()
    }

    /// Writes and fsyncs the log now under any policy but `Never`
    /// ([`LogStore::sync_now`]): a clean stop.
    pub fn sync_now(&mut self) -> Result<(), WriteError> {
        self.raw.mut_store().sync_now()
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
    pub fn raw(&self) -> &RawNode<L> {
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

    /// Moves the tick clock's origin `busy_ns` later: that much of the time since was
    /// this node's own (it ran, applying an entry that took long, instead of waiting
    /// for its peers), so it counts toward no election or quorum timeout. What arrived
    /// meanwhile is read before the next tick.
    pub fn skip_ticks(&mut self, busy_ns: u64) {
        if let Some(last) = self.last_tick_ns.as_mut() {
            *last = last.saturating_add(busy_ns);
        }
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
        let room = self.batch.len();
        let batch = std::mem::replace(&mut self.batch, Vec::with_capacity(room));
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
        self.handle_ready_sending(&mut |_| {})
    }

    /// [`RaftNode::handle_ready`], handing `send` a leader's messages that may leave at
    /// once (it takes what it sends out of the vector) before committed entries are applied:
    /// a leader's notice of a new commit index then reaches the followers before it
    /// applies an entry that takes long (a script), so they apply it alongside instead
    /// of after it, and their election timers are not left running meanwhile.
    pub fn handle_ready_sending(
        &mut self,
        send: &mut dyn FnMut(&mut Vec<Message>),
    ) -> Result<ReadyOutput, ReadyError> {
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
            // Only a leader's: they may leave before its own entries persist
            // (Raft thesis 10.2.1); a follower's wait for its sync below.
            let leads = self.raw.raft.state == StateRole::Leader;
            // Snapshots among what leaves early are reported with the rest below.
            let mut early_snapshots = Vec::new();
            if leads && !committed.is_empty() && !out.messages.is_empty() {
                early_snapshots.extend(
                    out.messages
                        .iter()
                        .filter(|m| m.get_msg_type() == MessageType::MsgSnapshot)
                        .map(|m| m.to),
                );
                send(&mut out.messages);
            }
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
            // probes the follower again; a lost snapshot is then simply resent. Those
            // sent early too: unreported, a follower's progress would stay in the
            // snapshot state, and the leader would send it nothing but heartbeats.
            let later = out
                .messages
                .iter()
                .filter(|m| m.get_msg_type() == MessageType::MsgSnapshot)
                .map(|m| m.to);
            for to in early_snapshots.into_iter().chain(later) {
                self.raw.report_snapshot(to, SnapshotStatus::Finish);
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
                        >= self.raw.store().compacted_index() + self.cfg.snapshot_interval)
                || (self.cfg.snapshot_log_bytes > 0
                    && self.raw.store().appended_bytes() >= self.cfg.snapshot_log_bytes))
        {
            self.start_snapshot()?;
        }
        // What the Ready wrote after its sync (the commit index the persisted entries
        // advanced) reaches the log before its messages leave.
        self.raw.mut_store().flush()?;
        crate::coalesce::subsume_commit_notices(&mut out.messages);
        // The next Ready's events start with this one's room (a Vec grown one
        // push at a time copies itself at every doubling).
        let room = self.events.len();
        out.events = std::mem::replace(&mut self.events, Vec::with_capacity(room));
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
                        // Our ids are the entry's, in its order: one step of
                        // a cursor each (a search only if they are not).
                        let mut next = 0;
                        for (id, op) in ops {
                            let result = self.sm.apply(e.index, op);
                            let ours = mine.as_ref().is_some_and(|m| {
                                if m.get(next) == Some(&id) {
                                    next += 1;
                                    true
                                } else {
                                    m.contains(&id)
                                }
                            });
                            if ours {
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
mod tests;
