//! The controller daemon: [`crate::core`] behind a mutex, served over TCP.
//!
//! # Threads
//!
//! - **accept**: polls the listener; beyond [`ServerConfig::max_connections`]
//!   a new connection gets `Refused{Busy}` and is closed.
//! - **one reader per connection**: cuts frames ([`FrameBuffer`]), runs the
//!   handshake ([`Handshake`]), then hands each request to the core. It
//!   reads with a short timeout so that it notices [`Server::stop`] and
//!   enforces deadlines: the handshake must finish within
//!   [`ServerConfig::handshake_timeout`], and a frame once started must
//!   arrive whole within [`ServerConfig::frame_timeout`]; an oversized
//!   length is refused from the first four bytes. A frame that does not
//!   decode, a failed or out-of-order handshake, or a request before
//!   authentication is answered with `Refused` and the connection closed.
//! - **one writer per connection**, fed by a bounded queue
//!   ([`ServerConfig::outbox_frames`]): replies and upcalls are queued
//!   without blocking; a client that does not read and lets its queue fill
//!   up is disconnected, never waited for. Writes have a timeout too.
//! - **tick**: every [`ServerConfig::tick_interval`], ends due grace periods
//!   ([`Controller::tick`]) and feeds the fabric's meters to the core.
//!
//! # One step
//!
//! Under the state lock: clone the core (the rollback point), run the call,
//! append its records to the journal (a failure restores the clone and
//! answers `Refused{Internal}`, so no client is told something a restart
//! would not recover), apply its fabric operations (a failure is logged to
//! stderr and counted: the state stays, the next [`Server::start`] resyncs
//! the whole fabric), queue the reply, then queue the upcalls to every
//! subscribed connection of each owning host. The lock is held only for
//! this bounded work (no network I/O under it), so one client cannot stall
//! another. After every [`ServerConfig::compact_every`] journal records the
//! journal is compacted ([`Controller::compaction_records`]).
//!
//! # Restart
//!
//! [`Server::start`] opens the state directory (a torn journal tail is
//! truncated and reported in [`Server::recovery`]), replays it into a new
//! core, checks it, and reprograms the fabric from scratch
//! ([`Controller::resync`]) before accepting connections. Hosts then send
//! `ReconcileHost`.

use crate::auth::{random_bytes, Handshake, Keys};
use crate::core::{Controller, Outcome, Policy, Principal, ReplayError};
use crate::fabric::{Fabric, FabricOp};
use crate::proto::{
    ClientMsg, FrameBuffer, Message, ProtoError, RefusalCode, ServerMsg, TunnelInfo, Upcall,
};
use crate::replicated::{Command, ReplicatedState};
use crate::store::{FsyncPolicy, RecoveryReport, Store, StoreError};
use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use xlane_te::{TeConfig, Topology};

/// Daemon parameters.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Address to listen on (port 0: any free port).
    pub listen: SocketAddr,
    /// State directory (journal, snapshot).
    pub state_dir: PathBuf,
    /// Journal fsync policy.
    pub fsync: FsyncPolicy,
    /// Allocator configuration.
    pub te: TeConfig,
    /// Monitoring policy.
    pub policy: Policy,
    /// Tick period. Default 50 ms.
    pub tick_interval: Duration,
    /// Time to complete the handshake. Default 5 s.
    pub handshake_timeout: Duration,
    /// Time for a started frame to arrive whole. Default 5 s.
    pub frame_timeout: Duration,
    /// Close connections silent for this long (`None`: never). Default none.
    pub idle_timeout: Option<Duration>,
    /// Write timeout of a connection. Default 5 s.
    pub write_timeout: Duration,
    /// Most simultaneous connections. Default 256.
    pub max_connections: usize,
    /// Frames queued per connection before it counts as stuck. Default 1024.
    pub outbox_frames: usize,
    /// Compact after this many journal records. Default 1000.
    pub compact_every: u64,
}

impl ServerConfig {
    /// Defaults for `listen` and `state_dir`.
    pub fn new(listen: SocketAddr, state_dir: PathBuf) -> ServerConfig {
        ServerConfig {
            listen,
            state_dir,
            fsync: FsyncPolicy::Always,
            te: TeConfig::default(),
            policy: Policy::default(),
            tick_interval: Duration::from_millis(50),
            handshake_timeout: Duration::from_secs(5),
            frame_timeout: Duration::from_secs(5),
            idle_timeout: None,
            write_timeout: Duration::from_secs(5),
            max_connections: 256,
            outbox_frames: 1024,
            compact_every: 1000,
        }
    }
}

/// Why the daemon could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// The state directory could not be opened.
    #[error("state: {0}")]
    Store(#[from] StoreError),
    /// The journal does not replay on this topology/configuration.
    #[error("recovering the state: {0}")]
    Recovery(#[from] ReplayError),
    /// The listen address could not be bound.
    #[error("listening on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// Another socket or thread error.
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// Counters of a running daemon.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Connections accepted.
    pub connections: u64,
    /// Connections open now.
    pub open_connections: u64,
    /// Frames that did not decode.
    pub malformed: u64,
    /// Failed handshakes.
    pub auth_failures: u64,
    /// Fabric operations that failed.
    pub fabric_errors: u64,
    /// Journal appends that failed (and were rolled back).
    pub store_errors: u64,
    /// Compactions done.
    pub compactions: u64,
    /// Connections dropped because their outbox was full.
    pub slow_clients: u64,
    /// Upcalls queued to subscribed connections.
    pub upcalls: u64,
    /// Requests left unanswered because the replicated log failed them
    /// (their connection was closed).
    pub unanswered: u64,
}

struct Daemon {
    core: Controller,
    store: Store,
    fabric: Box<dyn Fabric>,
    next_compact: u64,
}

struct Subscriber {
    host: String,
    tx: SyncSender<Vec<u8>>,
    stream: TcpStream,
}

#[derive(Default)]
struct Counters {
    connections: AtomicU64,
    open: AtomicUsize,
    malformed: AtomicU64,
    auth_failures: AtomicU64,
    fabric_errors: AtomicU64,
    store_errors: AtomicU64,
    compactions: AtomicU64,
    slow_clients: AtomicU64,
    upcalls: AtomicU64,
    unanswered: AtomicU64,
}

/// Why fabric operations are applied: only the log line differs.
#[derive(Clone, Copy)]
enum FabricPass {
    /// The operations of applied calls (a step, or a replica's effects).
    Changes,
    /// The whole fabric reprogrammed from the state (a start, a takeover).
    Resync,
}

impl Counters {
    /// Applies `ops` to `fabric` in order. An operation that fails is
    /// logged and counted in `fabric_errors`, and the rest are still
    /// applied: the state stays as it is, and the next resync (a restart or
    /// a takeover) programs the whole fabric again.
    fn apply_fabric(&self, fabric: &mut dyn Fabric, ops: &[FabricOp], pass: FabricPass) {
        for op in ops {
            if let Err(e) = fabric.apply(op) {
                match pass {
                    FabricPass::Changes => {
                        tracing::error!("fabric operation on {} failed: {e}", op.tunnel())
                    }
                    FabricPass::Resync => tracing::error!("resync of {} failed: {e}", op.tunnel()),
                }
                self.fabric_errors.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// The serving side of a replicated log: implemented over X-Raft by
/// `xlane-ctl-replica`, whose state machine applies each committed entry
/// to a [`ReplicatedState`].
pub trait Log: Send + Sync + 'static {
    /// Appends `command`, waits until it is committed and applied on this
    /// replica, and returns what [`ReplicatedState::apply`] returned.
    fn propose(&self, command: Vec<u8>) -> Result<Vec<u8>, LogError>;
    /// Whether this replica serves now (it leads the log).
    fn is_leader(&self) -> bool;
    /// The serving replica's client address, when one is known.
    fn leader_addr(&self) -> Option<SocketAddr>;
}

/// Why a [`Log::propose`] did not apply.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    /// This replica does not lead: nothing was appended.
    #[error("not the serving replica")]
    NotLeader,
    /// The entry may or may not be committed later (e.g. leadership was
    /// lost while it was in flight): the request is unanswered.
    #[error("replication failed: {0}")]
    Failed(String),
}

/// A replicated daemon's state and log.
struct Replica {
    state: Arc<ReplicatedState>,
    log: Arc<dyn Log>,
    /// Also serializes effect delivery, so upcalls keep their log order.
    fabric: Mutex<Box<dyn Fabric>>,
    serving: AtomicBool,
}

/// Where the daemon's state lives.
enum Backing {
    /// One process, its own journal.
    Journal(Box<Mutex<Daemon>>),
    /// A replicated log.
    Replicated(Replica),
}

struct Shared {
    backing: Backing,
    subscribers: Mutex<HashMap<u64, Subscriber>>,
    keys: Keys,
    cfg: ServerConfig,
    stop: AtomicBool,
    start: Instant,
    counters: Counters,
    conns: Mutex<Vec<JoinHandle<()>>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panicking thread must not take the daemon down with it.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Shared {
    /// Whether this daemon answers hosts now (always, unless it is a
    /// replica that does not lead).
    fn serves(&self) -> bool {
        match &self.backing {
            Backing::Journal(_) => true,
            Backing::Replicated(r) => r.log.is_leader(),
        }
    }

    /// The message of a `NotLeader` refusal.
    fn not_serving(&self) -> String {
        let hint = match &self.backing {
            Backing::Replicated(r) => r.log.leader_addr(),
            Backing::Journal(_) => None,
        };
        crate::proto::not_leader_message(hint)
    }

    /// Delivers what applied commands queued: on the leading replica,
    /// fabric operations and upcalls in log order; elsewhere they are
    /// dropped (a new serving replica resyncs and hosts reconcile). The
    /// first delivery after this replica took the lead does the takeover
    /// (see [`Shared::take_over`]), whether a request or the tick gets
    /// there first: a host may connect, and its request commit, before
    /// the tick has seen the lead.
    fn deliver_effects(&self, r: &Replica) {
        let mut fabric = lock(&r.fabric);
        let fx = r.state.take_effects();
        if !r.log.is_leader() {
            r.serving.store(false, Ordering::Relaxed);
            return;
        }
        if !self.take_over(r, fabric.as_mut()) {
            self.counters
                .apply_fabric(fabric.as_mut(), &fx.fabric, FabricPass::Changes);
        }
        drop(fabric);
        self.deliver(&fx.upcalls);
    }

    /// Called with the fabric lock held while this replica leads: if it
    /// did not serve yet, it does now and reprograms the whole fabric from
    /// its state (which covers every fabric operation applied so far);
    /// returns whether it did. Upcalls queued meanwhile are still
    /// delivered by the caller: they are numbered, and a host drops
    /// doubles.
    fn take_over(&self, r: &Replica, fabric: &mut dyn Fabric) -> bool {
        if r.serving.swap(true, Ordering::Relaxed) {
            return false;
        }
        let ops = r.state.with_controller(Controller::resync);
        self.counters.apply_fabric(fabric, &ops, FabricPass::Resync);
        tracing::info!("this controller replica serves now; fabric resynced");
        true
    }

    fn with_controller<R>(&self, f: impl FnOnce(&Controller) -> R) -> R {
        match &self.backing {
            Backing::Journal(d) => f(&lock(d).core),
            Backing::Replicated(r) => r.state.with_controller(f),
        }
    }

    fn now_ns(&self) -> u64 {
        u64::try_from(self.start.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    /// One step (see the module docs). `reply_to` gets the reply before any
    /// upcall is queued; returns false if it could not (its outbox is full
    /// or closed: the connection is stuck).
    fn step(
        &self,
        may_write: bool,
        reply_to: Option<&SyncSender<Vec<u8>>>,
        f: impl FnOnce(&mut Daemon, u64) -> Outcome,
    ) -> bool {
        let Backing::Journal(daemon) = &self.backing else {
            return true;
        };
        let mut d = lock(daemon);
        let backup = may_write.then(|| d.core.clone());
        let now = self.now_ns();
        let mut out = f(&mut d, now);
        if !out.records.is_empty() {
            if let Err(e) = d.store.append(&out.records) {
                tracing::error!("journal append failed, change undone: {e}");
                self.counters.store_errors.fetch_add(1, Ordering::Relaxed);
                if let Some(b) = backup {
                    d.core = b;
                }
                out = Outcome {
                    reply: out.reply.map(|_| ServerMsg::Refused {
                        code: RefusalCode::Internal,
                        message: format!("the controller could not save the change: {e}"),
                    }),
                    ..Outcome::default()
                };
            } else if d.store.journal_records() >= d.next_compact {
                self.compact(&mut d);
            }
        }
        self.counters
            .apply_fabric(d.fabric.as_mut(), &out.fabric, FabricPass::Changes);
        let mut replied = true;
        if let (Some(tx), Some(reply)) = (reply_to, &out.reply) {
            replied = tx.try_send(reply.frame_or_refusal()).is_ok();
        }
        let upcalls: Vec<_> = out.upcalls.into_iter().map(|(h, u)| (h, 0, u)).collect();
        self.deliver(&upcalls);
        replied
    }

    fn compact(&self, d: &mut Daemon) {
        let every = self.cfg.compact_every.max(1);
        match d.core.compaction_records() {
            Ok(recs) => match d.store.compact(&recs) {
                Ok(()) => {
                    self.counters.compactions.fetch_add(1, Ordering::Relaxed);
                    d.next_compact = every;
                }
                Err(e) => {
                    tracing::warn!("compaction failed (journal kept): {e}");
                    d.next_compact = d.store.journal_records() + every;
                }
            },
            Err(e) => {
                tracing::warn!("not compacting (journal kept): {e}");
                d.next_compact = d.store.journal_records() + every;
            }
        }
    }

    /// Queue upcalls on every subscribed connection of their hosts; a
    /// connection whose queue is full is shut down.
    fn deliver(&self, upcalls: &[(String, u64, Upcall)]) {
        if upcalls.is_empty() {
            return;
        }
        let mut subs = lock(&self.subscribers);
        let mut dead = Vec::new();
        for (host, seq, up) in upcalls {
            self.counters.upcalls.fetch_add(1, Ordering::Relaxed);
            let frame = ServerMsg::Upcall {
                seq: *seq,
                upcall: up.clone(),
            }
            .frame_or_refusal();
            for (id, s) in subs.iter() {
                if &s.host != host {
                    continue;
                }
                match s.tx.try_send(frame.clone()) {
                    Ok(()) => {}
                    Err(TrySendError::Full(_)) => {
                        self.counters.slow_clients.fetch_add(1, Ordering::Relaxed);
                        dead.push(*id);
                    }
                    Err(TrySendError::Disconnected(_)) => dead.push(*id),
                }
            }
        }
        for id in dead {
            if let Some(s) = subs.remove(&id) {
                let _ = s.stream.shutdown(Shutdown::Both);
            }
        }
    }
}

/// A running daemon. Dropping it stops it.
pub struct Server {
    addr: SocketAddr,
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
    recovery: RecoveryReport,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("addr", &self.addr)
            .field("recovery", &self.recovery)
            .finish_non_exhaustive()
    }
}

impl Server {
    /// Open the state, recover, resync the fabric, listen, and start the
    /// threads.
    pub fn start(
        cfg: ServerConfig,
        topo: Topology,
        keys: Keys,
        mut fabric: Box<dyn Fabric>,
    ) -> Result<Server, ServerError> {
        let opened = Store::open(&cfg.state_dir, cfg.fsync)?;
        let mut core =
            Controller::recover(topo, cfg.te.clone(), cfg.policy.clone(), &opened.records)?;
        core.set_key_secret(key_secret(&cfg.state_dir)?);
        // Counted from here on: the resync comes before the server exists.
        let counters = Counters::default();
        counters.apply_fabric(fabric.as_mut(), &core.resync(), FabricPass::Resync);
        let next_compact = opened.store.journal_records() + cfg.compact_every.max(1);
        let backing = Backing::Journal(Box::new(Mutex::new(Daemon {
            core,
            store: opened.store,
            fabric,
            next_compact,
        })));
        Self::spawn(backing, cfg, keys, opened.report, counters)
    }

    /// Serve a replicated controller: `state` is what `log`'s state
    /// machine applies to. Only the replica that leads the log accepts
    /// hosts (the others refuse `Hello` with `NotLeader`, naming the
    /// serving replica when known); every request is proposed to the log
    /// and answered once applied. `cfg.state_dir`, `cfg.fsync` and
    /// `cfg.compact_every` are the log's business and unused here.
    pub fn start_replicated(
        cfg: ServerConfig,
        keys: Keys,
        fabric: Box<dyn Fabric>,
        state: Arc<ReplicatedState>,
        log: Arc<dyn Log>,
    ) -> Result<Server, ServerError> {
        let backing = Backing::Replicated(Replica {
            state,
            log,
            fabric: Mutex::new(fabric),
            serving: AtomicBool::new(false),
        });
        Self::spawn(
            backing,
            cfg,
            keys,
            RecoveryReport::default(),
            Counters::default(),
        )
    }

    /// Listen on `cfg.listen` and start the accept and tick threads;
    /// `counters` holds what happened before (a start's resync).
    fn spawn(
        backing: Backing,
        cfg: ServerConfig,
        keys: Keys,
        recovery: RecoveryReport,
        counters: Counters,
    ) -> Result<Server, ServerError> {
        let listener = TcpListener::bind(cfg.listen).map_err(|source| ServerError::Bind {
            addr: cfg.listen,
            source,
        })?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            backing,
            subscribers: Mutex::new(HashMap::new()),
            keys,
            cfg,
            stop: AtomicBool::new(false),
            start: Instant::now(),
            counters,
            conns: Mutex::new(Vec::new()),
        });
        let mut threads = Vec::new();
        let s = shared.clone();
        threads.push(
            std::thread::Builder::new()
                .name("ctl-accept".into())
                .spawn(move || accept_loop(s, listener))?,
        );
        let s = shared.clone();
        threads.push(
            std::thread::Builder::new()
                .name("ctl-tick".into())
                .spawn(move || tick_loop(s))?,
        );
        Ok(Server {
            addr,
            shared,
            threads,
            recovery,
        })
    }

    /// Whether this daemon answers hosts now: always for a journal
    /// daemon; for a replica, while it leads the log.
    pub fn serves(&self) -> bool {
        self.shared.serves()
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// What opening the state directory found.
    pub fn recovery(&self) -> &RecoveryReport {
        &self.recovery
    }

    /// The tunnels now.
    pub fn tunnels(&self) -> Vec<TunnelInfo> {
        self.shared.with_controller(Controller::tunnels)
    }

    /// Run `f` on the core (read-only), under the state lock.
    pub fn with_controller<R>(&self, f: impl FnOnce(&Controller) -> R) -> R {
        self.shared.with_controller(f)
    }

    /// Counters.
    pub fn stats(&self) -> Stats {
        stats_of(&self.shared)
    }

    /// A handle that reads the counters and the tunnels from another
    /// thread (a metrics endpoint).
    pub fn stats_handle(&self) -> StatsHandle {
        StatsHandle(self.shared.clone())
    }

    /// Whether [`Server::stop`] was called (or the daemon is stopping).
    pub fn is_stopping(&self) -> bool {
        self.shared.stop.load(Ordering::Relaxed)
    }

    /// A handle that stops the server from another thread (e.g. a signal
    /// watcher).
    pub fn stop_flag(&self) -> StopHandle {
        StopHandle(self.shared.clone())
    }

    /// Block until stopped through a [`StopHandle`], then shut down.
    pub fn wait(mut self) {
        while !self.shared.stop.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(100));
        }
        self.shutdown();
    }

    /// Stop accepting, close every connection, join every thread. The
    /// journal is already durable (per the fsync policy).
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        let conns: Vec<_> = lock(&self.shared.conns).drain(..).collect();
        for t in conns {
            let _ = t.join();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// The file of the secret tunnel keys are derived from, in the state
/// directory.
pub const KEY_SECRET_FILE: &str = "tunnel-key.secret";

/// The secret tunnel keys are derived from: read from the state
/// directory, or made there (mode 0600) on the first start, so that every
/// tunnel keeps its key across restarts.
fn key_secret(dir: &std::path::Path) -> std::io::Result<xlane_auth::Key> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let p = dir.join(KEY_SECRET_FILE);
    match std::fs::read_to_string(&p) {
        Ok(text) => xlane_auth::Key::from_hex(&text)
            .ok_or_else(|| std::io::Error::other(format!("{}: not 32 hex digits", p.display()))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let k = xlane_auth::Key::random()?;
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&p)?;
            f.write_all(format!("{}\n", k.to_hex()).as_bytes())?;
            f.sync_all()?;
            Ok(k)
        }
        Err(e) => Err(e),
    }
}

fn stats_of(shared: &Shared) -> Stats {
    let c = &shared.counters;
    Stats {
        connections: c.connections.load(Ordering::Relaxed),
        open_connections: c.open.load(Ordering::Relaxed) as u64,
        malformed: c.malformed.load(Ordering::Relaxed),
        auth_failures: c.auth_failures.load(Ordering::Relaxed),
        fabric_errors: c.fabric_errors.load(Ordering::Relaxed),
        store_errors: c.store_errors.load(Ordering::Relaxed),
        compactions: c.compactions.load(Ordering::Relaxed),
        slow_clients: c.slow_clients.load(Ordering::Relaxed),
        upcalls: c.upcalls.load(Ordering::Relaxed),
        unanswered: c.unanswered.load(Ordering::Relaxed),
    }
}

/// Reads a running server's counters and tunnels from another thread.
pub struct StatsHandle(Arc<Shared>);

impl StatsHandle {
    /// The counters.
    pub fn stats(&self) -> Stats {
        stats_of(&self.0)
    }

    /// The tunnels now.
    pub fn tunnels(&self) -> Vec<TunnelInfo> {
        self.0.with_controller(Controller::tunnels)
    }

    /// Whether the daemon answers hosts now ([`Server::serves`]).
    pub fn serves(&self) -> bool {
        self.0.serves()
    }
}

impl std::fmt::Debug for StatsHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StatsHandle")
    }
}

/// Stops a [`Server`] from another thread.
#[derive(Clone)]
pub struct StopHandle(Arc<Shared>);

impl StopHandle {
    /// Ask the server to stop.
    pub fn stop(&self) {
        self.0.stop.store(true, Ordering::Relaxed);
    }
}

impl std::fmt::Debug for StopHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StopHandle")
    }
}

fn accept_loop(shared: Arc<Shared>, listener: TcpListener) {
    let mut next_id = 0u64;
    while !shared.stop.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((stream, _)) => {
                lock(&shared.conns).retain(|t| !t.is_finished());
                shared.counters.connections.fetch_add(1, Ordering::Relaxed);
                if shared.counters.open.load(Ordering::Relaxed) >= shared.cfg.max_connections {
                    refuse_busy(stream);
                    continue;
                }
                next_id += 1;
                let id = next_id;
                let s = shared.clone();
                shared.counters.open.fetch_add(1, Ordering::Relaxed);
                let spawned = std::thread::Builder::new()
                    .name(format!("ctl-conn-{id}"))
                    .spawn(move || {
                        connection(&s, stream, id);
                        s.counters.open.fetch_sub(1, Ordering::Relaxed);
                    });
                match spawned {
                    Ok(h) => lock(&shared.conns).push(h),
                    Err(e) => {
                        shared.counters.open.fetch_sub(1, Ordering::Relaxed);
                        tracing::error!("cannot start a connection thread: {e}");
                    }
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(e) => {
                tracing::warn!("accept: {e}");
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
}

fn refuse_busy(mut stream: TcpStream) {
    let _ = stream.set_nonblocking(false);
    let _ = stream.set_write_timeout(Some(Duration::from_millis(100)));
    let busy = ServerMsg::Refused {
        code: RefusalCode::Busy,
        message: "too many connections; try again later".into(),
    };
    let _ = stream.write_all(&busy.frame_or_refusal());
    let _ = stream.shutdown(Shutdown::Both);
}

fn tick_loop(shared: Arc<Shared>) {
    let mut next = Instant::now();
    while !shared.stop.load(Ordering::Relaxed) {
        next += shared.cfg.tick_interval.max(Duration::from_millis(1));
        loop {
            let now = Instant::now();
            if now >= next || shared.stop.load(Ordering::Relaxed) {
                break;
            }
            std::thread::sleep((next - now).min(Duration::from_millis(20)));
        }
        if Instant::now() > next + shared.cfg.tick_interval {
            next = Instant::now();
        }
        // Read the meters and see whether anything is due before paying
        // for a rollback point.
        let Backing::Journal(daemon) = &shared.backing else {
            replicated_tick(&shared);
            continue;
        };
        let (meters, due) = {
            let mut d = lock(daemon);
            let meters = match d.fabric.meters() {
                Ok(m) => m,
                Err(e) => {
                    tracing::warn!("reading fabric meters: {e}");
                    Vec::new()
                }
            };
            let now = shared.now_ns();
            (meters, d.core.next_deadline().is_some_and(|t| t <= now))
        };
        if meters.is_empty() && !due {
            continue;
        }
        shared.step(true, None, |d, now| {
            let mut out = d.core.tick(now);
            if !meters.is_empty() {
                let more = d.core.on_switch_meters(&meters, now);
                out.upcalls.extend(more.upcalls);
                out.fabric.extend(more.fabric);
                out.records.extend(more.records);
            }
            out
        });
    }
}

/// The clock replicated commands carry: ns since the Unix epoch.
fn wall_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// One tick of a replicated daemon: on taking over, reprogram the fabric
/// and make sure keys have a secret; then propose a tick when meters were
/// read or a grace period is due.
fn replicated_tick(shared: &Shared) {
    let Backing::Replicated(r) = &shared.backing else {
        return;
    };
    if !r.log.is_leader() {
        // Not serving: what the log applied is someone else's to deliver.
        r.serving.store(false, Ordering::Relaxed);
        drop(r.state.take_effects());
        return;
    }
    // Takes over if no request did yet, and delivers what was applied since.
    shared.deliver_effects(r);
    if !r.state.has_key_secret() {
        match xlane_auth::Key::random() {
            Ok(k) => {
                if let Ok(b) = Command::KeySecret(*k.bytes()).encode() {
                    if let Err(e) = r.log.propose(b) {
                        tracing::warn!("proposing the key secret: {e}");
                    }
                }
            }
            Err(e) => tracing::error!("no random key secret: {e}"),
        }
    }
    let meters = match lock(&r.fabric).meters() {
        Ok(m) => m,
        Err(e) => {
            tracing::warn!("reading fabric meters: {e}");
            Vec::new()
        }
    };
    let now = wall_ns();
    let due = r
        .state
        .with_controller(|c| c.next_deadline().is_some_and(|t| t <= now));
    if meters.is_empty() && !due {
        return;
    }
    match (Command::Tick {
        now_ns: now,
        meters,
    })
    .encode()
    {
        Ok(b) => match r.log.propose(b) {
            Ok(_) => shared.deliver_effects(r),
            Err(e) => tracing::warn!("tick not replicated: {e}"),
        },
        Err(e) => tracing::error!("tick: {e}"),
    }
}

fn writer(mut stream: TcpStream, rx: Receiver<Vec<u8>>) {
    for frame in rx {
        if stream.write_all(&frame).is_err() {
            let _ = stream.shutdown(Shutdown::Both);
            // Drain so that senders see a disconnect rather than a block.
            return;
        }
    }
}

/// Whether the connection goes on after a message.
enum Next {
    Continue,
    Close,
}

struct Conn<'a> {
    shared: &'a Shared,
    id: u64,
    tx: SyncSender<Vec<u8>>,
    stream: TcpStream,
    handshake: Handshake,
    principal: Principal,
    subscribed: bool,
}

impl Conn<'_> {
    fn send(&self, msg: &ServerMsg) -> Next {
        match self.tx.try_send(msg.frame_or_refusal()) {
            Ok(()) => Next::Continue,
            Err(_) => Next::Close,
        }
    }

    fn refuse(&self, code: RefusalCode, message: impl Into<String>) -> Next {
        let _ = self.send(&ServerMsg::Refused {
            code,
            message: message.into(),
        });
        Next::Close
    }

    fn on_frame(&mut self, frame: &[u8]) -> Next {
        let msg = match ClientMsg::decode(frame) {
            Ok((m, _)) => m,
            Err(e) => return self.malformed(&e),
        };
        match (&self.principal, msg) {
            (Principal::Anonymous, ClientMsg::Hello { .. }) if !self.shared.serves() => {
                self.refuse(RefusalCode::NotLeader, self.shared.not_serving())
            }
            (Principal::Anonymous, ClientMsg::Hello { host, client_nonce }) => {
                match self.handshake.hello(&host, client_nonce) {
                    Ok(n) => self.send(&ServerMsg::Challenge { server_nonce: n }),
                    Err(e) => self.refuse(RefusalCode::Unauthenticated, e.to_string()),
                }
            }
            (Principal::Anonymous, ClientMsg::Auth { mac }) => {
                match self.handshake.auth(&self.shared.keys, &mac) {
                    Ok(host) => {
                        self.principal = Principal::Host(host);
                        self.send(&ServerMsg::AuthOk)
                    }
                    Err(e) => {
                        self.shared
                            .counters
                            .auth_failures
                            .fetch_add(1, Ordering::Relaxed);
                        self.refuse(RefusalCode::Unauthenticated, e.to_string())
                    }
                }
            }
            (Principal::Anonymous, _) => self.refuse(
                RefusalCode::Unauthenticated,
                "not authenticated: send Hello and Auth first",
            ),
            (Principal::Host(_), ClientMsg::Hello { .. } | ClientMsg::Auth { .. }) => {
                self.refuse(RefusalCode::Malformed, "already authenticated")
            }
            (Principal::Host(host), ClientMsg::Subscribe { after }) => {
                let host = host.clone();
                if !self.subscribed {
                    if let Ok(stream) = self.stream.try_clone() {
                        lock(&self.shared.subscribers).insert(
                            self.id,
                            Subscriber {
                                host: host.clone(),
                                tx: self.tx.clone(),
                                stream,
                            },
                        );
                        self.subscribed = true;
                    }
                }
                // A replica replays the host's numbered upcalls it has not
                // seen (a takeover in between); the client drops doubles.
                let seq = match &self.shared.backing {
                    Backing::Journal(_) => 0,
                    Backing::Replicated(r) => {
                        let (replay, seq) = r.state.upcalls_after(&host, after);
                        for f in replay {
                            if self.tx.try_send(f).is_err() {
                                return Next::Close;
                            }
                        }
                        seq
                    }
                };
                self.send(&ServerMsg::Subscribed { seq })
            }
            (Principal::Host(host), req)
                if matches!(self.shared.backing, Backing::Replicated(_)) =>
            {
                let host = host.clone();
                self.replicated_request(host, req)
            }
            (Principal::Host(_), req) => {
                let principal = self.principal.clone();
                let may_write = !matches!(req, ClientMsg::ListTunnels);
                let tx = self.tx.clone();
                let replied = self.shared.step(may_write, Some(&tx), |d, now| {
                    d.core.handle(&principal, &req, now)
                });
                self.after_reply(replied)
            }
        }
    }

    /// A request on a replicated daemon: proposed, answered with what its
    /// commit applied; a lost leadership closes the connection unanswered
    /// (the entry may still commit: the host reconciles on its next
    /// connection).
    fn replicated_request(&mut self, host: String, req: ClientMsg) -> Next {
        let Backing::Replicated(r) = &self.shared.backing else {
            return Next::Close;
        };
        let cmd = Command::Request {
            host,
            now_ns: wall_ns(),
            msg: req,
        };
        let bytes = match cmd.encode() {
            Ok(b) => b,
            Err(e) => return self.refuse(RefusalCode::Malformed, format!("request: {e}")),
        };
        match r.log.propose(bytes) {
            Ok(reply) => {
                let next = self.after_reply(reply.is_empty() || self.tx.try_send(reply).is_ok());
                self.shared.deliver_effects(r);
                next
            }
            Err(LogError::NotLeader) => {
                self.refuse(RefusalCode::NotLeader, self.shared.not_serving())
            }
            Err(LogError::Failed(e)) => {
                tracing::warn!("request unanswered: {e}");
                self.shared
                    .counters
                    .unanswered
                    .fetch_add(1, Ordering::Relaxed);
                Next::Close
            }
        }
    }

    /// Goes on if the reply was queued; a connection whose outbox is full
    /// is stuck and closed.
    fn after_reply(&self, queued: bool) -> Next {
        if queued {
            return Next::Continue;
        }
        self.shared
            .counters
            .slow_clients
            .fetch_add(1, Ordering::Relaxed);
        Next::Close
    }

    fn malformed(&self, e: &ProtoError) -> Next {
        self.shared
            .counters
            .malformed
            .fetch_add(1, Ordering::Relaxed);
        self.refuse(RefusalCode::Malformed, format!("malformed frame: {e}"))
    }
}

fn connection(shared: &Shared, stream: TcpStream, id: u64) {
    let cfg = &shared.cfg;
    let _ = stream.set_nonblocking(false);
    let _ = stream.set_nodelay(true);
    let _ = stream.set_read_timeout(Some(Duration::from_millis(100)));
    let _ = stream.set_write_timeout(Some(cfg.write_timeout));
    let (tx, rx) = sync_channel::<Vec<u8>>(cfg.outbox_frames.max(4));
    let Ok(wstream) = stream.try_clone() else {
        return;
    };
    let Ok(writer_thread) = std::thread::Builder::new()
        .name(format!("ctl-write-{id}"))
        .spawn(move || writer(wstream, rx))
    else {
        return;
    };
    let nonce = match random_bytes::<32>() {
        Ok(n) => n,
        Err(e) => {
            tracing::error!("no random nonce: {e}");
            let _ = stream.shutdown(Shutdown::Both);
            drop(tx);
            let _ = writer_thread.join();
            return;
        }
    };
    let mut conn = Conn {
        shared,
        id,
        tx,
        stream,
        handshake: Handshake::new(nonce),
        principal: Principal::Anonymous,
        subscribed: false,
    };
    let opened = Instant::now();
    let mut last_input = Instant::now();
    let mut frame_started: Option<Instant> = None;
    let mut fb = FrameBuffer::new();
    let mut buf = [0u8; 8192];
    'conn: while !shared.stop.load(Ordering::Relaxed) {
        match conn.stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                last_input = Instant::now();
                fb.push(&buf[..n]);
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock
                        | std::io::ErrorKind::TimedOut
                        | std::io::ErrorKind::Interrupted
                ) => {}
            Err(_) => break,
        }
        loop {
            match fb.next_frame() {
                Ok(None) => break,
                Ok(Some(frame)) => {
                    if let Next::Close = conn.on_frame(&frame) {
                        break 'conn;
                    }
                }
                Err(e) => {
                    conn.malformed(&e);
                    break 'conn;
                }
            }
        }
        let now = Instant::now();
        frame_started = match (fb.pending(), frame_started) {
            (0, _) => None,
            (_, Some(t)) => Some(t),
            (_, None) => Some(now),
        };
        if conn.principal == Principal::Anonymous && now - opened > cfg.handshake_timeout {
            conn.refuse(RefusalCode::Unauthenticated, "handshake timed out");
            break;
        }
        if frame_started.is_some_and(|t| now - t > cfg.frame_timeout) {
            conn.shared
                .counters
                .malformed
                .fetch_add(1, Ordering::Relaxed);
            conn.refuse(RefusalCode::Malformed, "incomplete frame timed out");
            break;
        }
        if cfg.idle_timeout.is_some_and(|t| now - last_input > t) {
            break;
        }
    }
    lock(&shared.subscribers).remove(&id);
    let stream = conn.stream.try_clone();
    drop(conn);
    // The writer flushes what is queued (e.g. the last refusal), then ends.
    let _ = writer_thread.join();
    if let Ok(s) = stream {
        let _ = s.shutdown(Shutdown::Both);
    }
}

#[cfg(test)]
mod tests;
