//! A threaded driver around [`RaftNode`] with blocking `propose` / `read_barrier` calls, the
//! shape a front end (e.g. a key-value store's `Replicator`) needs. The driver thread owns
//! the node, ticks it from a monotonic clock, feeds inbound datagrams, and sends outbound
//! messages through a [`MessageEndpoint`] onto a [`Transport`].
//!
//! The thread sleeps in one `ppoll` on an eventfd (woken by every command from a
//! [`DriverHandle`]) and on the [`Transport`]'s own descriptors, until the earlier of
//! the next tick and the transport's [`Transport::next_deadline`] (e.g. the lane's
//! next slot): datagrams from peers are read, and frames leave at their slot, from
//! the driver thread itself, so a message costs no hand-over between a network thread
//! and the driver (on a virtual machine each hand-over is a cross-vCPU wake-up of tens
//! of µs).
//!
//! A [`Frontend`] (e.g. a key-value store's client connections) can run on the driver
//! thread too: its descriptor joins the same `ppoll`, its requests join the same Ready, and
//! their outcomes come back to it on the same thread, so a client request crosses no thread
//! at all on its way through the node.
//!
//! The state machine lives inside the node (on the driver thread); applications that read
//! it from other threads share it themselves (e.g. `Arc<Mutex<_>>` inside their
//! [`StateMachine`] impl) and read after [`DriverHandle::read_barrier`] returns.

use fxhash::FxHashMap as HashMap;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::Instant;

use xlane_host::runtime::{tighten_timer_slack, wait_readable, Waker};
use xlane_host::socket::{realtime_ns, thread_cpu_ns};

use crate::batch::{Input, MessageEndpoint, ProposalId, Readiness, Transport};
use crate::log_store::LogStore;
use crate::node::{ConfChangeError, Event, ProposeError, RaftNode, ReadId, StateMachine};
use raft::eraftpb::ConfChangeType;

/// Errors of blocking driver calls.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReplicateError {
    /// This node is not the leader; `leader` is the known leader (0 = unknown).
    #[error("not leader (leader hint {0})")]
    NotLeader(u64),
    /// The proposal was dropped; it may or may not have been applied if `indeterminate`.
    #[error("proposal dropped (indeterminate: {indeterminate})")]
    Dropped {
        /// Outcome unknown (covered by a snapshot) rather than definitely not applied.
        indeterminate: bool,
    },
    /// The read barrier could not be confirmed in time; retry.
    #[error("read barrier failed")]
    ReadFailed,
    /// The driver stopped (storage error or shutdown).
    #[error("driver stopped")]
    Stopped,
    /// The membership change was refused before it was proposed.
    #[error("{0}")]
    ConfChange(ConfChangeError),
}

enum Cmd {
    Propose(Vec<u8>, mpsc::Sender<Result<Vec<u8>, ReplicateError>>),
    Read(mpsc::Sender<Result<(), ReplicateError>>),
    Inbound(u64, Vec<u8>),
    Stop,
    ConfChange(
        ConfChangeType,
        u64,
        Vec<u8>,
        mpsc::Sender<Result<Vec<u8>, ReplicateError>>,
    ),
}

/// The outcome of a [`Frontend`]'s proposal or read barrier.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The proposal was committed and applied; the state machine's result.
    Applied(Vec<u8>),
    /// The read barrier holds: the local state machine is at or past the read index.
    ReadReady,
    /// It failed (the proposal was dropped, the read barrier timed out, ...).
    Failed(ReplicateError),
}

/// Where this node's log stands, for a frontend's `WAIT` and `ROLE`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Positions {
    /// The commit index known here.
    pub commit: u64,
    /// The index of the last entry applied here.
    pub applied: u64,
    /// On the leader, each other member and the highest index known to be
    /// in its log ([`RaftNode::followers_matched`]); empty on a follower.
    pub matched: Vec<(u64, u64)>,
}

impl Positions {
    /// How many other members hold every entry up to `index`.
    pub fn holding(&self, index: u64) -> usize {
        self.matched.iter().filter(|(_, m)| *m >= index).count()
    }
}

/// What a [`Frontend`] may ask of the node; each call's [`Outcome`] comes back later
/// through [`Frontend::complete`] with the same `token`.
pub trait Submit {
    /// Proposes `op`. Fails at once with [`ReplicateError::NotLeader`] on a follower.
    fn propose(&mut self, op: Vec<u8>, token: u64) -> Result<(), ReplicateError>;
    /// Starts a linearizable read barrier (ReadIndex).
    fn read_barrier(&mut self, token: u64);
    /// The leader as this node knows it now (0: none known).
    fn leader(&self) -> u64;
    /// Asks this node, the leader, to hand leadership to `to` (raft's
    /// leader transfer: `to` is brought up to date, then told to campaign
    /// at once). Fails at once with [`ReplicateError::NotLeader`] on a
    /// follower; whether the transfer happens shows in [`Submit::leader`]
    /// later (it is abandoned after an election timeout).
    fn transfer_leader(&mut self, to: u64) -> Result<(), ReplicateError>;
    /// Whether a read may be served from the local state machine now, with no read
    /// barrier, and stay linearizable ([`RaftNode::reads_local`]: a leader that is its
    /// group's only voter).
    fn reads_local(&self) -> bool;
    /// Where the log stands now (commit and applied index; on the leader,
    /// what each other member holds).
    fn positions(&self) -> Positions;
    /// Proposes a membership change with `context`
    /// ([`RaftNode::propose_conf_change_with_context`]); its outcome is
    /// [`Outcome::Applied`] with no bytes once the change is applied here. Fails at once
    /// with [`ReplicateError::NotLeader`] on a follower and
    /// [`ReplicateError::ConfChange`] for a change the configuration refuses.
    fn propose_conf_change(
        &mut self,
        change: ConfChangeType,
        node: u64,
        context: Vec<u8>,
        token: u64,
    ) -> Result<(), ReplicateError>;
}

/// Requests served on the driver thread itself (see the module docs). All calls are made
/// by the driver thread and must not block.
pub trait Frontend: Send + 'static {
    /// A descriptor that is readable while the frontend has I/O to do (e.g. an epoll set).
    fn fd(&self) -> RawFd;
    /// Does the frontend's waiting input without blocking and submits what it asks for.
    /// Called every turn before the node's Ready is handled, so what is submitted joins
    /// that Ready. `readable`: [`Frontend::fd`] was readable when the driver woke (if
    /// not, only work left from earlier turns is due). Returns true if work is left
    /// for another turn right away.
    fn turn(&mut self, submit: &mut dyn Submit, readable: bool) -> bool;
    /// The outcome of an earlier submission.
    fn complete(&mut self, token: u64, outcome: Outcome, submit: &mut dyn Submit);
    /// End of the turn: sends what is ready to go. Returns true if work is left for
    /// another turn right away.
    fn flush(&mut self) -> bool;
}

/// Who waits for a proposal or a read: a blocking caller or a frontend's token(s).
enum Waiter<T> {
    Caller(mpsc::Sender<Result<T, ReplicateError>>),
    Token(u64),
    /// Reads of one frontend turn that share one read index.
    Tokens(Vec<u64>),
}

/// Outcomes held back during the events pass, for the frontend after it.
type Completions = Vec<(u64, Outcome)>;

impl<T: Clone> Waiter<T> {
    /// Answers a blocking caller at once; a frontend's outcome is queued in `done`.
    fn finish(self, r: Result<T, ReplicateError>, done: &mut Completions, ok: fn(T) -> Outcome) {
        match self {
            Waiter::Caller(tx) => {
                let _ = tx.send(r);
            }
            Waiter::Token(t) => done.push((t, r.map_or_else(Outcome::Failed, ok))),
            Waiter::Tokens(ts) => {
                for t in ts {
                    done.push((t, r.clone().map_or_else(Outcome::Failed, ok)));
                }
            }
        }
    }
}

/// The node as a frontend sees it during one call.
struct NodeSubmit<'a, S: StateMachine, L: LogStore> {
    node: &'a mut RaftNode<S, L>,
    proposals: &'a mut HashMap<ProposalId, Waiter<Vec<u8>>>,
    reads: &'a mut HashMap<ReadId, Waiter<()>>,
    /// Submissions made (the driver must not sleep before the next Ready).
    count: usize,
    /// Read barriers share one read index (see [`Pass::frontend_turn`]).
    coalesce: bool,
    /// The read index shared so far.
    shared_read: Option<ReadId>,
    /// [`RaftNode::reads_local`] as last asked, with the `count` of
    /// submissions it was asked at: good until the next submission (it is
    /// asked once per read group).
    local: std::cell::Cell<Option<(usize, bool)>>,
}

impl<S: StateMachine, L: LogStore> Submit for NodeSubmit<'_, S, L> {
    fn leader(&self) -> u64 {
        self.node.leader_id()
    }

    fn transfer_leader(&mut self, to: u64) -> Result<(), ReplicateError> {
        if !self.node.is_leader() {
            return Err(ReplicateError::NotLeader(self.node.leader_id()));
        }
        self.node.transfer_leader(to);
        self.count += 1;
        Ok(())
    }

    fn propose(&mut self, op: Vec<u8>, token: u64) -> Result<(), ReplicateError> {
        let id = propose(self.node, op)?;
        self.proposals.insert(id, Waiter::Token(token));
        self.count += 1;
        Ok(())
    }

    fn read_barrier(&mut self, token: u64) {
        self.count += 1;
        if let Some(Waiter::Tokens(ts)) = self.shared_read.and_then(|id| self.reads.get_mut(&id)) {
            ts.push(token);
            return;
        }
        let id = self.node.read_index();
        let w = if self.coalesce {
            self.shared_read = Some(id);
            Waiter::Tokens(vec![token])
        } else {
            Waiter::Token(token)
        };
        self.reads.insert(id, w);
    }

    fn reads_local(&self) -> bool {
        match self.local.get() {
            Some((at, l)) if at == self.count => l,
            _ => {
                let l = self.node.reads_local();
                self.local.set(Some((self.count, l)));
                l
            }
        }
    }

    fn positions(&self) -> Positions {
        Positions {
            commit: self.node.commit_index(),
            applied: self.node.applied_index(),
            matched: self.node.followers_matched(),
        }
    }

    fn propose_conf_change(
        &mut self,
        change: ConfChangeType,
        node: u64,
        context: Vec<u8>,
        token: u64,
    ) -> Result<(), ReplicateError> {
        let id = propose_conf_change(self.node, change, node, context)?;
        self.proposals.insert(id, Waiter::Token(token));
        self.count += 1;
        Ok(())
    }
}

/// Hands a datagram from peer `from` to the endpoint and, once it completes a
/// message, the message to the node (what does not decode is dropped; raft
/// retransmits).
fn step_datagram<S: StateMachine, L: LogStore>(
    endpoint: &mut MessageEndpoint,
    node: &mut RaftNode<S, L>,
    from: u64,
    now: u64,
    d: &[u8],
) {
    if let Ok(Some(m)) = endpoint.receive(from, now, d) {
        let _ = node.step(m);
    }
}

/// [`RaftNode::propose`] with the driver's errors.
fn propose<S: StateMachine, L: LogStore>(
    node: &mut RaftNode<S, L>,
    op: Vec<u8>,
) -> Result<ProposalId, ReplicateError> {
    node.propose(op).map_err(|e| match e {
        crate::node::ProposeError::NotLeader { leader } => ReplicateError::NotLeader(leader),
        _ => ReplicateError::Dropped {
            indeterminate: false,
        },
    })
}

/// [`RaftNode::propose_conf_change_with_context`] with the driver's errors.
fn propose_conf_change<S: StateMachine, L: LogStore>(
    node: &mut RaftNode<S, L>,
    change: ConfChangeType,
    id: u64,
    context: Vec<u8>,
) -> Result<ProposalId, ReplicateError> {
    node.propose_conf_change_with_context(change, id, context)
        .map_err(|e| match e {
            ProposeError::NotLeader { leader } => ReplicateError::NotLeader(leader),
            ProposeError::ConfChange(c) => ReplicateError::ConfChange(c),
            ProposeError::Dropped => ReplicateError::Dropped {
                indeterminate: false,
            },
        })
}

/// The driver thread's state for one turn's Ready passes.
struct Pass<'a, S: StateMachine, T: Transport, L: LogStore> {
    node: &'a mut RaftNode<S, L>,
    endpoint: &'a mut MessageEndpoint,
    transport: &'a mut T,
    proposals: &'a mut HashMap<ProposalId, Waiter<Vec<u8>>>,
    reads: &'a mut HashMap<ReadId, Waiter<()>>,
    /// A frontend's outcomes, for it after the pass.
    done: &'a mut Completions,
}

impl<S: StateMachine, T: Transport, L: LogStore> Pass<'_, S, T, L> {
    /// Handles the node's Ready: sends its messages, answers blocking callers and
    /// queues a frontend's outcomes.
    fn ready(&mut self) -> Result<(), crate::node::ReadyError> {
        let (endpoint, transport) = (&mut *self.endpoint, &mut *self.transport);
        let mut send = |msgs: &mut Vec<raft::eraftpb::Message>| {
            for m in msgs.drain(..) {
                let _ = endpoint.send(&m, transport);
            }
            transport.flush();
        };
        let mut out = self.node.handle_ready_sending(&mut send)?;
        if !out.messages.is_empty() {
            send(&mut out.messages);
        }
        let (proposals, reads, done) = (&mut *self.proposals, &mut *self.reads, &mut *self.done);
        for ev in out.events {
            match ev {
                Event::Applied { id, result, .. } => {
                    if let Some(w) = proposals.remove(&id) {
                        w.finish(Ok(result), done, Outcome::Applied);
                    }
                }
                Event::Dropped { id, reason } => {
                    if let Some(w) = proposals.remove(&id) {
                        let indeterminate = reason == crate::node::DropReason::Indeterminate;
                        let e = ReplicateError::Dropped { indeterminate };
                        w.finish(Err(e), done, Outcome::Applied);
                    }
                }
                Event::ConfChanged { id: Some(id), .. } => {
                    if let Some(w) = proposals.remove(&id) {
                        w.finish(Ok(Vec::new()), done, Outcome::Applied);
                    }
                }
                Event::ReadReady { id, .. } => {
                    if let Some(w) = reads.remove(&id) {
                        w.finish(Ok(()), done, |()| Outcome::ReadReady);
                    }
                }
                Event::ReadFailed { id } => {
                    if let Some(w) = reads.remove(&id) {
                        w.finish(Err(ReplicateError::ReadFailed), done, |()| {
                            Outcome::ReadReady
                        });
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }

    fn submit(&mut self, coalesce: bool) -> NodeSubmit<'_, S, L> {
        NodeSubmit {
            node: self.node,
            proposals: self.proposals,
            reads: self.reads,
            count: 0,
            coalesce,
            shared_read: None,
            local: std::cell::Cell::new(None),
        }
    }

    /// Hands the queued outcomes to `f`; true if that submitted new work.
    fn frontend_outcomes(&mut self, f: &mut dyn Frontend) -> bool {
        let mut done = std::mem::take(self.done);
        let mut sub = self.submit(false);
        for (token, outcome) in done.drain(..) {
            f.complete(token, outcome, &mut sub);
        }
        let submitted = sub.count > 0;
        // The emptied queue goes back with its room: a pipelined load queues
        // about as many outcomes every pass.
        if self.done.is_empty() {
            *self.done = done;
        }
        submitted
    }

    /// Hands the queued outcomes to `f`, then its turn (`busy` set if it has work
    /// left). What they submit joins the turn's Ready.
    ///
    /// The read barriers of one turn share a single read index: every one of them
    /// arrived before the turn, and the index is taken during it, after the peers'
    /// messages of the turn were stepped and before the turn's Ready. A write
    /// acknowledged before any of those reads was sent was acknowledged at the end
    /// of an earlier turn, so it was committed before this one: the index covers it.
    fn frontend_turn(&mut self, f: &mut dyn Frontend, readable: bool, busy: &mut bool) {
        self.frontend_outcomes(f);
        let mut sub = self.submit(true);
        *busy |= f.turn(&mut sub, readable);
    }
}

/// Cloneable handle to a running driver.
#[derive(Clone)]
pub struct DriverHandle {
    tx: mpsc::Sender<Cmd>,
    waker: Arc<Waker>,
    leader: Arc<AtomicU64>,
}

impl DriverHandle {
    fn send(&self, cmd: Cmd) -> Result<(), ReplicateError> {
        self.tx.send(cmd).map_err(|_| ReplicateError::Stopped)?;
        self.waker.wake();
        Ok(())
    }

    /// Replicates `op`; returns the state machine's result once committed and applied
    /// locally.
    pub fn propose(&self, op: Vec<u8>) -> Result<Vec<u8>, ReplicateError> {
        let (tx, rx) = mpsc::channel();
        self.send(Cmd::Propose(op, tx))?;
        rx.recv().map_err(|_| ReplicateError::Stopped)?
    }

    /// Linearizable read barrier (ReadIndex): returns once the local state machine has
    /// applied everything committed before the call; reading it then is linearizable.
    pub fn read_barrier(&self) -> Result<(), ReplicateError> {
        let (tx, rx) = mpsc::channel();
        self.send(Cmd::Read(tx))?;
        rx.recv().map_err(|_| ReplicateError::Stopped)?
    }

    /// The leader as the node saw it at the end of its last turn (0: none
    /// known).
    pub fn leader_id(&self) -> u64 {
        self.leader.load(Ordering::Relaxed)
    }

    /// Proposes a membership change with `context`
    /// ([`RaftNode::propose_conf_change_with_context`]); returns once it is committed and
    /// applied locally.
    pub fn propose_conf_change(
        &self,
        change: ConfChangeType,
        node: u64,
        context: Vec<u8>,
    ) -> Result<(), ReplicateError> {
        let (tx, rx) = mpsc::channel();
        self.send(Cmd::ConfChange(change, node, context, tx))?;
        rx.recv().map_err(|_| ReplicateError::Stopped)?.map(drop)
    }

    /// Hands a datagram received from peer `from` to the node.
    pub fn deliver(&self, from: u64, datagram: Vec<u8>) {
        let _ = self.send(Cmd::Inbound(from, datagram));
    }
}

/// A turn of the driver longer than this many ticks, busy for at least half of it, is
/// skipped by the tick clock ([`RaftNode::skip_ticks`]): an entry that was long to
/// apply. Shorter ones (a loaded machine's turns) count as they are.
const LONG_TURN_TICKS: u64 = 5;

/// A running driver thread.
pub struct Driver {
    handle: DriverHandle,
    join: Option<JoinHandle<()>>,
}

impl Driver {
    /// Starts the driver thread for `node`, sending through `endpoint` onto `transport`
    /// (which it also polls, see the module docs); datagrams may also arrive through
    /// [`DriverHandle::deliver`].
    pub fn spawn<S, T, L>(node: RaftNode<S, L>, endpoint: MessageEndpoint, transport: T) -> Self
    where
        S: StateMachine + Send + 'static,
        L: LogStore + Send + 'static,
        T: Transport + Send + 'static,
    {
        Self::spawn_with(node, endpoint, transport, None)
    }

    /// Like [`Driver::spawn`], and the driver thread also serves `frontend`.
    ///
    /// # Panics
    /// If no eventfd can be made (the process is out of descriptors).
    pub fn spawn_with<S, T, L>(
        mut node: RaftNode<S, L>,
        mut endpoint: MessageEndpoint,
        mut transport: T,
        mut frontend: Option<Box<dyn Frontend>>,
    ) -> Self
    where
        S: StateMachine + Send + 'static,
        T: Transport + Send + 'static,
        L: LogStore + Send + 'static,
    {
        let (tx, rx) = mpsc::channel::<Cmd>();
        let waker = Arc::new(Waker::new().expect("eventfd for the raft driver"));
        let wake_fd = waker.fd();
        let thread_waker = waker.clone();
        let leader = Arc::new(AtomicU64::new(0));
        let thread_leader = leader.clone();
        let join = std::thread::spawn(move || {
            // Lane slots and heartbeats are µs apart: wake-ups must not be coalesced.
            tighten_timer_slack();
            let start = Instant::now();
            let tick = node.config().tick_ns.max(1);
            let mut proposals: HashMap<ProposalId, Waiter<Vec<u8>>> = HashMap::default();
            let mut reads: HashMap<ReadId, Waiter<()>> = HashMap::default();
            let mut done: Completions = Vec::new();
            // Commands and datagrams that arrive together are handled together: every
            // proposal waiting joins the same Ready (one log entry batch, one fsync)
            // instead of one Ready each. At most DRAIN_MAX of each per turn; with more
            // waiting the next turn does not sleep.
            const DRAIN_MAX: usize = 256;
            let mut busy = false;
            'run: loop {
                // The eventfd, the transport's descriptors (at most 4), the frontend's.
                let mut fds = [wake_fd; 6];
                let tfds = transport.fds();
                let k = tfds.len().min(4);
                fds[1..1 + k].copy_from_slice(&tfds[..k]);
                fds[1 + k] = frontend.as_ref().map_or(wake_fd, |f| f.fd());
                let fds = &fds[..2 + k];
                let wake_at = if busy {
                    0
                } else {
                    (realtime_ns() + tick).min(transport.next_deadline())
                };
                // Only what was readable is read (a descriptor left unread stays
                // readable for the next wait). An error here leaves nothing known:
                // everything is read.
                let mask = wait_readable(fds, wake_at).unwrap_or(u32::MAX);
                let seen = realtime_ns();
                if mask & 1 != 0 {
                    thread_waker.clear();
                }
                let ready = Readiness {
                    mask: (mask >> 1) & ((1u32 << k) - 1),
                    at_ns: seen,
                };
                let frontend_readable = mask & (1 << (1 + k)) != 0;
                let now = start.elapsed().as_nanos() as u64;
                let turn_cpu = thread_cpu_ns();
                let mut drained = 0;
                loop {
                    let c = match rx.try_recv() {
                        Ok(c) => c,
                        Err(mpsc::TryRecvError::Empty) => break,
                        Err(mpsc::TryRecvError::Disconnected) => break 'run,
                    };
                    match c {
                        Cmd::Propose(op, reply) => match propose(&mut node, op) {
                            Ok(id) => {
                                proposals.insert(id, Waiter::Caller(reply));
                            }
                            Err(e) => {
                                let _ = reply.send(Err(e));
                            }
                        },
                        Cmd::Read(reply) if node.reads_local() => {
                            let _ = reply.send(Ok(()));
                        }
                        Cmd::Read(reply) => {
                            let id = node.read_index();
                            reads.insert(id, Waiter::Caller(reply));
                        }
                        Cmd::Inbound(from, d) => {
                            step_datagram(&mut endpoint, &mut node, from, now, &d)
                        }
                        Cmd::Stop => break 'run,
                        Cmd::ConfChange(change, id, context, reply) => {
                            match propose_conf_change(&mut node, change, id, context) {
                                Ok(pid) => {
                                    proposals.insert(pid, Waiter::Caller(reply));
                                }
                                Err(e) => {
                                    let _ = reply.send(Err(e));
                                }
                            }
                        }
                    }
                    drained += 1;
                    if drained >= DRAIN_MAX {
                        break;
                    }
                }
                busy = drained >= DRAIN_MAX;
                let n = transport.poll(realtime_ns(), DRAIN_MAX, ready, &mut |input| match input {
                    Input::Datagram { from, bytes } => {
                        step_datagram(&mut endpoint, &mut node, from, now, bytes)
                    }
                    Input::Suspected { peer, campaign } => {
                        node.on_leader_suspected(peer, campaign);
                    }
                });
                busy |= n >= DRAIN_MAX;
                node.tick_to(now);
                endpoint.expire(now);
                let mut pass = Pass {
                    node: &mut node,
                    endpoint: &mut endpoint,
                    transport: &mut transport,
                    proposals: &mut proposals,
                    reads: &mut reads,
                    done: &mut done,
                };
                // The frontend's new requests join this turn's one Ready, with what
                // the peers' messages set off: new entries travel in the append that
                // carries the commit index they advanced (one datagram per follower).
                if let Some(f) = frontend.as_mut() {
                    pass.frontend_turn(f.as_mut(), frontend_readable, &mut busy);
                }
                if let Err(e) = pass
                    .ready()
                    .map_err(|e| e.to_string())
                    .and_then(|()| pass.node.sync_due().map_err(|e| format!("storage: {e}")))
                {
                    // Storage failure (a full disk, a failed fsync): stop
                    // before acknowledging anything more; waiters see Stopped.
                    tracing::error!("raft driver stopped: {e}");
                    break;
                }
                // A turn that ran longer than LONG_TURN_TICKS ticks, busy for at least half of it
                // (an entry that was long to apply, sharing the cores with the other
                // members applying it too), was this member's own time, not its
                // peers' silence. A turn that took long but ran little was starved:
                // its time still counts, so a starved member's timers keep running.
                let ran = thread_cpu_ns().saturating_sub(turn_cpu);
                let took = (start.elapsed().as_nanos() as u64).saturating_sub(now);
                if took > LONG_TURN_TICKS * tick && ran.saturating_mul(2) >= took {
                    pass.node.skip_ticks(took - tick);
                }
                thread_leader.store(pass.node.leader_id(), Ordering::Relaxed);
                if let Some(f) = frontend.as_mut() {
                    // What these outcomes set off joins the next turn's Ready.
                    busy |= pass.frontend_outcomes(f.as_mut());
                    busy |= f.flush();
                }
            }
            // A clean stop (or a failed write, which this retries): what was written
            // reaches the disk under every policy but `Never`.
            let _ = node.sync_now();
        });
        Self {
            handle: DriverHandle { tx, waker, leader },
            join: Some(join),
        }
    }

    /// A handle for proposing, reading and delivering datagrams.
    pub fn handle(&self) -> DriverHandle {
        self.handle.clone()
    }

    /// Whether the driver thread still runs (it ends on [`Driver::stop`] or when the
    /// log cannot be written).
    pub fn is_running(&self) -> bool {
        self.join.as_ref().is_some_and(|j| !j.is_finished())
    }

    /// Stops the thread and waits for it (as dropping the driver does).
    pub fn stop(self) {
        drop(self);
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.handle.send(Cmd::Stop);
        if let Some(j) = self.join.take() {
            let _ = j.join();
        }
    }
}
