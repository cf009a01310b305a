//! A lane member's session with the controller (`xlane ctl serve`).
//!
//! Before its first packet a member asks for two trees to every other
//! member: its X-FD tree on the higher sub-lane (period T) and its
//! replication tree on the lower one (period π_r). σ follows the burst
//! policy ([`crate::lane::frame_sizes`]); a member starts as a follower, so
//! its replication tree is first sized for an append response. It then
//! waits until every other member holds its trees and learns their ids: the
//! lane frames carry the granted ids, so the controller's per-tunnel
//! classes and meters see every packet.
//!
//! While the member runs ([`Session::run`]):
//! * **Role**: when it becomes the leader its replication tree is resized
//!   (`changeBandwidth`) to carry a burst of appends to every follower, and
//!   back to a response's size when it stops leading. A punctual member
//!   thus uses the share of its σ the meters expect of it in either role
//!   and never sends more than σ per period (the lane sender caps frames).
//! * **Upcalls**: a `bandwidthChanged` of one of its trees is followed at
//!   once: the tree runs at the new period from its next free window, and
//!   X-FD's Λ follows the X-FD tree's announced maximum latency (up at
//!   once, down after the grace period, never below the configured Λ).
//! * **Peers**: the other members' trees are looked up again every second,
//!   so a member that restarted (and was granted new trees) is heard again.
//! * **Controller**: the session is given every address of the controller
//!   (a replicated one's replicas) and connects to whichever serves: it
//!   goes through the list in order, and a replica that refuses with
//!   `NotLeader` naming the serving one sends it there at once. When no
//!   replica serves (an election, replicas still starting) it goes
//!   through the list again after waits that double from 50 ms up to 2 s:
//!   at [`Session::open`] until [`SessionConfig::wait_for_controller`] has
//!   passed (then [`SessionError::NoController`]), and, when the
//!   connection of a running session ends (the serving replica died or
//!   stopped serving), for as long as it runs, the lane keeping its last
//!   grants meanwhile. Once connected again it subscribes, reconciles its
//!   trees (`ReconcileHost`: one the controller does not know comes back
//!   as `bandwidthTerminated`) and follows any change of its trees'
//!   resources it missed meanwhile (from the tunnel list).
//!
//! Every action is reported as a [`SessionEvent`].

use crate::lane::{frame_sizes, FrameSizes, LaneControl, LaneTiming, Retune, Tree, TreeIds};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use xlane_ctl::auth::Key;
use xlane_ctl::client::{Client, ClientError, Granted};
use xlane_ctl::proto::{
    Reason, RefusalCode, TerminateReason, TunnelId, TunnelInfo, TunnelState, Upcall,
};
use xlane_ctl::te::Resources;

/// UDP, IPv4 and Ethernet headers around a lane frame: the controller's σ
/// is what a queue counts for a packet.
pub const WIRE_OVERHEAD_BYTES: usize = 8 + 20 + 14;

/// σ as a queue counts it for a frame of `bytes`: the headers around it,
/// and when frames are sealed the MAC trailer (such frames are at most
/// [`crate::lane::SEALED_FRAME_LEN`]).
pub fn wire_bytes(bytes: usize, sealed: bool) -> u32 {
    let frame = if sealed {
        bytes.min(crate::lane::SEALED_FRAME_LEN) + xlane_auth::TRAILER_LEN
    } else {
        bytes
    };
    (frame + WIRE_OVERHEAD_BYTES) as u32
}
/// Sub-lane of the X-FD trees (the higher priority).
pub const FD_SUBLANE: u8 = 0;
/// Sub-lane of the replication trees.
pub const REPL_SUBLANE: u8 = 1;
/// How often the member's role is checked.
const ROLE_EVERY: Duration = Duration::from_millis(200);
/// How often the other members' trees are looked up.
const PEERS_EVERY: Duration = Duration::from_secs(1);
/// How long a refused resize waits before it is asked again.
const RESIZE_RETRY: Duration = Duration::from_secs(5);
/// The wait after the first pass through the controller list that found
/// no serving replica; it doubles after each such pass...
const RECONNECT_FIRST: Duration = Duration::from_millis(50);
/// ... up to this.
const RECONNECT_MAX: Duration = Duration::from_secs(2);
/// How long [`Session::open`] looks for a serving controller replica by
/// default ([`SessionConfig::wait_for_controller`]): an election takes
/// well under a second, replicas that are still starting a few.
pub const WAIT_FOR_CONTROLLER: Duration = Duration::from_secs(10);

/// How to open a session.
#[derive(Debug, Clone)]
pub struct SessionConfig {
    /// The controller's address, or a replicated controller's replicas':
    /// tried in order, the one that serves is used (and looked for again
    /// through the whole list when the connection ends).
    pub controllers: Vec<SocketAddr>,
    /// This member's controller key.
    pub key: Key,
    /// This member's raft id.
    pub me: u64,
    /// Every member's controller host name, by raft id (this one included).
    pub names: BTreeMap<u64, String>,
    /// Bytes of entries a leader's append to one follower may carry per
    /// period (the burst policy).
    pub burst_bytes: usize,
    /// How long to wait for the other members' trees.
    pub wait_for_peers: Duration,
    /// How long [`Session::open`] goes through `controllers` again while
    /// no replica serves (default [`WAIT_FOR_CONTROLLER`]; zero: one
    /// pass).
    pub wait_for_controller: Duration,
    /// Whether the link seals its frames (the trees are asked for with
    /// room for the MAC trailer).
    pub sealed: bool,
    /// Seal with each tree's own key from the controller (`TunnelKey`):
    /// the session fetches this member's trees' keys and those of every
    /// tree it receives, now and as members get new trees.
    pub tree_keys: bool,
}

/// Why a session could not open.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// Bad configuration.
    #[error("{0}")]
    Config(String),
    /// A call to the serving controller replica failed or was refused.
    #[error("controller {addr}: {what}: {source}")]
    Controller {
        /// The serving replica's address.
        addr: SocketAddr,
        /// The call.
        what: String,
        /// Why.
        source: ClientError,
    },
    /// No controller replica served within
    /// [`SessionConfig::wait_for_controller`].
    #[error("no controller replica served within {waited:?} (tried {}): {last}", addr_list(.tried))]
    NoController {
        /// Every address tried, in the order first tried: the list, and
        /// any serving replica a refusal named.
        tried: Vec<SocketAddr>,
        /// How long the session tried.
        waited: Duration,
        /// The last refusal or connection error.
        #[source]
        last: ClientError,
    },
    /// Some members did not hold their trees in time.
    #[error("members {missing:?} held no trees at the controller after {waited:?} (are they started with the same --controller?)")]
    PeersMissing {
        /// Their host names.
        missing: Vec<String>,
        /// How long this member waited.
        waited: Duration,
    },
}

/// One tree the controller granted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    /// Which tree.
    pub tree: Tree,
    /// Its tunnel id (carried in every frame).
    pub tunnel: u32,
    /// Its receivers' host names.
    pub to: Vec<String>,
    /// Granted period, ns.
    pub period_ns: u64,
    /// Whether the period is above the one asked for.
    pub period_raised: bool,
    /// σ, lane frame bytes.
    pub frame_bytes: usize,
    /// Announced minimum latency, ns.
    pub min_latency_ns: u64,
    /// Announced maximum latency, ns.
    pub max_latency_ns: u64,
}

/// What a running session did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionEvent {
    /// A `bandwidthChanged` of one of this member's trees, followed.
    BandwidthChanged {
        /// The tree.
        tree: Tree,
        /// Its tunnel.
        tunnel: u32,
        /// Why the controller changed it.
        reason: Reason,
        /// How long the old resources hold, ns.
        grace_ns: u64,
        /// The new and old periods, ns.
        period_ns: u64,
        /// The period before.
        old_period_ns: u64,
        /// The new and old announced maximum latencies, ns.
        max_latency_ns: u64,
        /// The maximum latency before.
        old_max_latency_ns: u64,
        /// X-FD's Λ from now (or after the grace period), for the X-FD tree.
        fd_lambda_ns: Option<u64>,
        /// The largest announced maximum latency of this member's trees now.
        bound_ns: u64,
    },
    /// One of this member's trees was terminated.
    BandwidthTerminated {
        /// The tree.
        tree: Tree,
        /// Its tunnel.
        tunnel: u32,
        /// Why.
        reason: TerminateReason,
    },
    /// The replication tree was resized for a new role.
    Resized {
        /// Whether this member now leads.
        leader: bool,
        /// Granted period, ns.
        period_ns: u64,
        /// New σ, lane frame bytes.
        frame_bytes: usize,
        /// Announced maximum latency, ns.
        max_latency_ns: u64,
    },
    /// The controller refused a resize (asked again later).
    ResizeRefused {
        /// Why.
        detail: String,
    },
    /// Another member's trees changed (it restarted).
    PeerTrees {
        /// Its raft id.
        member: u64,
        /// Its trees now.
        trees: TreeIds,
    },
    /// The controller connection ended; the lane keeps its last grants
    /// while the session looks for the serving replica again.
    ControllerLost {
        /// Why (naming the controller address).
        detail: String,
    },
    /// A pass through the controller list found no replica that serves
    /// (tried again after a wait); reported when the reason changes, not
    /// at every pass.
    ControllerUnreachable {
        /// Why (naming every address tried).
        detail: String,
    },
    /// The session is connected again, subscribed, and its trees
    /// reconciled.
    Reconnected {
        /// The controller (replica) that serves it now.
        controller: SocketAddr,
        /// This member's trees the controller still holds (a tree it does
        /// not know is reported as [`SessionEvent::BandwidthTerminated`]).
        kept: Vec<u32>,
        /// Trees whose resources changed while the session was away:
        /// followed now, as a `bandwidthChanged` whose grace period is over.
        resynced: Vec<u32>,
    },
}

/// `a,b,c`: addresses as an error message names them.
fn addr_list(addrs: &[SocketAddr]) -> String {
    let v: Vec<String> = addrs.iter().map(ToString::to_string).collect();
    v.join(",")
}

/// One pass through `addrs` for the controller replica that serves: each
/// is tried in order, and one whose `NotLeader` refusal names the serving
/// replica is followed there at once (no address twice in a pass). Every
/// address tried is added to `tried` (once). The error is the last one.
fn connect_pass(
    addrs: &[SocketAddr],
    host: &str,
    key: &Key,
    tried: &mut Vec<SocketAddr>,
) -> Result<Client, ClientError> {
    let mut seen = Vec::new();
    let mut last = ClientError::Closed;
    for &first in addrs {
        let mut next = Some(first);
        while let Some(a) = next.take() {
            if seen.contains(&a) {
                break;
            }
            seen.push(a);
            if !tried.contains(&a) {
                tried.push(a);
            }
            match Client::connect(a, host, key) {
                Ok(c) => return Ok(c),
                Err(e) => {
                    next = e.serving_hint();
                    last = e;
                }
            }
        }
    }
    Err(last)
}

/// Connects to whichever of `cfg.controllers` serves ([`connect_pass`]),
/// going through them again after waits that double from
/// [`RECONNECT_FIRST`] to [`RECONNECT_MAX`] until
/// `cfg.wait_for_controller` has passed. `failed` hears the last error of
/// every pass that found none.
fn connect_first(
    cfg: &SessionConfig,
    host: &str,
    failed: &mut dyn FnMut(&ClientError),
) -> Result<Client, SessionError> {
    let start = Instant::now();
    let deadline = start + cfg.wait_for_controller;
    let mut wait = RECONNECT_FIRST;
    let mut tried = Vec::new();
    loop {
        let last = match connect_pass(&cfg.controllers, host, &cfg.key, &mut tried) {
            Ok(c) => return Ok(c),
            Err(e) => e,
        };
        failed(&last);
        let now = Instant::now();
        if now >= deadline {
            return Err(SessionError::NoController {
                tried,
                waited: now - start,
                last,
            });
        }
        std::thread::sleep(wait.min(deadline - now));
        wait = (wait * 2).min(RECONNECT_MAX);
    }
}

/// Whether a call's error means the connection is gone (or useless: the
/// replica no longer serves, and it closes the connection after saying
/// so), rather than the controller refusing this one request.
fn connection_lost(e: &ClientError) -> bool {
    match e {
        ClientError::Refused { code, .. } => *code == RefusalCode::NotLeader,
        ClientError::Encode(_) => false,
        _ => true,
    }
}

/// When Λ moves to a new X-FD bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LambdaStep {
    /// It grows: at once (a larger Λ is the safe side).
    Now,
    /// It shrinks: when the grace period ends, while the old range holds.
    AfterGrace,
    /// It stays.
    Keep,
}

/// The Λ for an X-FD tree whose announced maximum latency is now
/// `bound_ns` (never below `floor_ns`, the configured one), and when it
/// takes over from `lambda_ns`. A demoted tree has no bound
/// ([`xlane_ctl::proto::UNBOUNDED_NS`]): its heartbeats go best effort and
/// Λ falls back to the configured one, so that a member that stops is
/// still suspected.
pub fn lambda_step(bound_ns: u64, floor_ns: u64, lambda_ns: u64) -> (u64, LambdaStep) {
    let want = if bound_ns == xlane_ctl::proto::UNBOUNDED_NS {
        floor_ns
    } else {
        bound_ns.max(floor_ns)
    };
    let step = match want.cmp(&lambda_ns) {
        std::cmp::Ordering::Greater => LambdaStep::Now,
        std::cmp::Ordering::Less => LambdaStep::AfterGrace,
        std::cmp::Ordering::Equal => LambdaStep::Keep,
    };
    (want, step)
}

/// The trees every member holds at the controller: per sender name, the
/// newest (highest id) tunnel on each sub-lane.
fn trees_of(list: &[xlane_ctl::proto::TunnelInfo]) -> BTreeMap<String, (Option<u32>, Option<u32>)> {
    let mut m: BTreeMap<String, (Option<u32>, Option<u32>)> = BTreeMap::new();
    for t in list {
        if t.state != TunnelState::Active && t.state != TunnelState::Unbounded {
            continue;
        }
        let e = m.entry(t.sender.clone()).or_default();
        let id = t.tunnel.0 as u32;
        let slot = match t.sublane {
            FD_SUBLANE => &mut e.0,
            REPL_SUBLANE => &mut e.1,
            _ => continue,
        };
        *slot = Some(slot.map_or(id, |x| x.max(id)));
    }
    m
}

/// A running member's session.
pub struct Session {
    /// `None` while no controller replica serves the session.
    conn: Option<Client>,
    cfg: SessionConfig,
    /// This member's controller host name.
    host: String,
    own: TreeIds,
    sizes: FrameSizes,
    /// Each own tree's announced maximum latency, ns.
    max_ns: BTreeMap<u32, u64>,
    peers: BTreeMap<u64, TreeIds>,
    /// The configured Λ: Λ never goes below it.
    fd_floor_ns: u64,
    /// The highest upcall number seen on a lost connection: the next one
    /// subscribes after it, so a replicated controller's serving replica
    /// sends what was missed and nothing twice.
    last_upcall: u64,
}

/// A session just opened.
pub struct Opened {
    /// The session, to [`Session::run`].
    pub session: Session,
    /// What the controller granted.
    pub grants: Vec<Grant>,
    /// Every member's tree ids (this one's included).
    pub trees: BTreeMap<u64, TreeIds>,
    /// With [`SessionConfig::tree_keys`], the keys of all those trees.
    pub keys: Option<crate::lane::LaneKeys>,
}

/// Gives a member's trees back when it stops.
pub struct Release {
    controllers: Vec<SocketAddr>,
    host: String,
    key: Key,
    tunnels: Vec<TunnelId>,
}

impl Release {
    /// Releases every tree (a fresh connection to whichever replica serves:
    /// the session's may be gone); returns how many the controller
    /// confirmed.
    pub fn run(self) -> usize {
        let Ok(mut c) = Client::connect_any(&self.controllers, &self.host, &self.key) else {
            return 0;
        };
        self.tunnels
            .into_iter()
            .filter(|&t| c.release(t).is_ok())
            .count()
    }
}

impl Session {
    /// Connects to whichever of `cfg.controllers` serves (while none does,
    /// going through them again for up to `cfg.wait_for_controller`, see
    /// the module docs; then [`SessionError::NoController`]), subscribes,
    /// gives back the trees of an earlier run of this member, asks for its
    /// two trees, sets `timing` to the grants (periods, σ, Λ at least the
    /// X-FD tree's announced maximum), and waits until every other member
    /// holds its trees.
    pub fn open(cfg: SessionConfig, timing: &mut LaneTiming) -> Result<Opened, SessionError> {
        Self::open_with(cfg, timing, &mut |_| {})
    }

    /// [`Session::open`]; `unreachable` hears every pass through the
    /// controller list that found no serving replica.
    fn open_with(
        cfg: SessionConfig,
        timing: &mut LaneTiming,
        unreachable: &mut dyn FnMut(&ClientError),
    ) -> Result<Opened, SessionError> {
        if cfg.controllers.is_empty() {
            return Err(SessionError::Config("no controller address".into()));
        }
        let host =
            cfg.names.get(&cfg.me).cloned().ok_or_else(|| {
                SessionError::Config(format!("no host name for member {}", cfg.me))
            })?;
        let others: Vec<String> = cfg
            .names
            .iter()
            .filter(|(&i, _)| i != cfg.me)
            .map(|(_, n)| n.clone())
            .collect();
        if others.is_empty() {
            return Err(SessionError::Config(
                "the lane needs at least one other member".into(),
            ));
        }
        let mut conn = connect_first(&cfg, &host, unreachable)?;
        let addr = conn.peer_addr();
        let err = |what: &str| {
            let what = what.to_string();
            move |source| SessionError::Controller { addr, what, source }
        };
        // Upcalls from here on are kept for `run`, including those that
        // the requests below set off.
        conn.subscribe().map_err(err("subscribe"))?;
        let (held, _) = conn.list().map_err(err("list"))?;
        for t in held.iter().filter(|t| t.sender == host) {
            conn.release(t.tunnel)
                .map_err(err(&format!("release tunnel {}", t.tunnel.0)))?;
        }
        let sizes = frame_sizes(cfg.names.len(), cfg.burst_bytes);
        let ask = |conn: &mut Client, tree: Tree, bytes: usize, period: u64| {
            let (sublane, what) = match tree {
                Tree::Fd => (FD_SUBLANE, "the X-FD tree"),
                Tree::Repl => (REPL_SUBLANE, "the replication tree"),
            };
            conn.request(&others, wire_bytes(bytes, cfg.sealed), period, sublane)
                .map_err(err(&format!("request {what}")))
        };
        let fd = ask(&mut conn, Tree::Fd, sizes.fd, timing.fd_period_ns)?;
        let repl = ask(
            &mut conn,
            Tree::Repl,
            sizes.repl_follower,
            timing.repl_period_ns,
        )?;
        let fd_floor_ns = timing.fd_lambda_ns;
        timing.fd_period_ns = fd.resources.period_ns;
        timing.fd_frame_bytes = sizes.fd;
        timing.fd_lambda_ns = timing.fd_lambda_ns.max(fd.resources.max_latency_ns());
        timing.repl_period_ns = repl.resources.period_ns;
        timing.repl_frame_bytes = sizes.repl_follower;
        let grant = |tree, g: &Granted, frame_bytes| Grant {
            tree,
            tunnel: g.tunnel.0 as u32,
            to: others.clone(),
            period_ns: g.resources.period_ns,
            period_raised: g.period_raised,
            frame_bytes,
            min_latency_ns: g.resources.min_latency_ns,
            max_latency_ns: g.resources.max_latency_ns(),
        };
        let grants = vec![
            grant(Tree::Fd, &fd, sizes.fd),
            grant(Tree::Repl, &repl, sizes.repl_follower),
        ];
        let own = TreeIds {
            fd: fd.tunnel.0 as u32,
            repl: repl.tunnel.0 as u32,
        };
        let max_ns = grants
            .iter()
            .map(|g| (g.tunnel, g.max_latency_ns))
            .collect();
        let mut s = Session {
            conn: Some(conn),
            cfg,
            host,
            own,
            sizes,
            max_ns,
            peers: BTreeMap::new(),
            fd_floor_ns,
            last_upcall: 0,
        };
        let start = Instant::now();
        loop {
            let missing = s.look_up_peers().map_err(err("list"))?;
            if missing.is_empty() {
                break;
            }
            if start.elapsed() >= s.cfg.wait_for_peers {
                return Err(SessionError::PeersMissing {
                    missing,
                    waited: s.cfg.wait_for_peers,
                });
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let mut trees = s.peers.clone();
        trees.insert(s.cfg.me, own);
        let keys = if s.cfg.tree_keys {
            let all: Vec<TreeIds> = trees.values().copied().collect();
            let k = s.keys_of(&all).map_err(err("tunnel key"))?;
            Some(crate::lane::LaneKeys::trees(own, &k))
        } else {
            None
        };
        Ok(Opened {
            session: s,
            grants,
            trees,
            keys,
        })
    }

    /// This member's trees.
    pub fn own(&self) -> TreeIds {
        self.own
    }

    /// The largest announced maximum latency of this member's trees, ns.
    pub fn bound_ns(&self) -> u64 {
        self.max_ns.values().copied().max().unwrap_or(0)
    }

    /// The controller (replica) the session is connected to; `None` while
    /// it looks for one that serves.
    pub fn controller(&self) -> Option<SocketAddr> {
        self.conn.as_ref().map(Client::peer_addr)
    }

    /// What gives the trees back when the member stops.
    pub fn release(&self) -> Release {
        Release {
            controllers: self.cfg.controllers.clone(),
            host: self.host.clone(),
            key: self.cfg.key.clone(),
            tunnels: vec![TunnelId(self.own.fd as u64), TunnelId(self.own.repl as u64)],
        }
    }

    /// The connection, or `Closed` while there is none.
    fn conn(&mut self) -> Result<&mut Client, ClientError> {
        self.conn.as_mut().ok_or(ClientError::Closed)
    }

    /// The keys of `trees`' tunnels (key id = tunnel id).
    fn keys_of(&mut self, trees: &[TreeIds]) -> Result<Vec<(u32, xlane_auth::Key)>, ClientError> {
        let mut v = Vec::with_capacity(2 * trees.len());
        for t in trees {
            for id in [t.fd, t.repl] {
                v.push((id, self.conn()?.tunnel_key(TunnelId(id as u64))?));
            }
        }
        Ok(v)
    }

    /// Looks the other members' trees up; returns the names of those that
    /// hold none yet. Updates `self.peers` with those that do.
    fn look_up_peers(&mut self) -> Result<Vec<String>, ClientError> {
        let (list, _) = self.conn()?.list()?;
        let held = trees_of(&list);
        let mut missing = Vec::new();
        for (&id, name) in self.cfg.names.iter().filter(|(&i, _)| i != self.cfg.me) {
            match held.get(name) {
                Some(&(Some(fd), Some(repl))) => {
                    self.peers.insert(id, TreeIds { fd, repl });
                }
                _ => missing.push(name.clone()),
            }
        }
        Ok(missing)
    }

    /// Until `stop` is set: follows upcalls, resizes the replication tree
    /// when `leader()` (the raft leader's id) says this member's role
    /// changed, and learns other members' new trees; tells `control` and
    /// reports every action to `event`. When the controller connection
    /// ends it connects again to whichever replica serves (see the module
    /// docs). Returns the session.
    pub fn run(
        mut self,
        control: &LaneControl,
        leader: &dyn Fn() -> u64,
        event: &mut dyn FnMut(SessionEvent),
        stop: &AtomicBool,
    ) -> Session {
        let mut lower: Option<(Instant, u64)> = None;
        let (mut role_at, mut peers_at) = (Instant::now(), Instant::now() + PEERS_EVERY);
        let mut retry_at: Option<Instant> = None;
        // While disconnected: when to go through the list again, the wait
        // after that, and the last reason reported.
        let mut reconnect_at = Instant::now();
        let mut backoff = RECONNECT_FIRST;
        let mut unreachable: Option<String> = None;
        while !stop.load(Ordering::Relaxed) {
            let now = Instant::now();
            if let Some((at, l)) = lower {
                if now >= at {
                    control.set_fd_lambda_ns(l);
                    lower = None;
                }
            }
            if self.conn.is_none() {
                if now >= reconnect_at {
                    match self.reconnect(control, &mut lower) {
                        Ok(e) => {
                            event(e);
                            backoff = RECONNECT_FIRST;
                            unreachable = None;
                            // A resize cut short is asked again, and the
                            // peers are looked up, at once.
                            retry_at = None;
                            (role_at, peers_at) = (now, now);
                        }
                        Err(detail) => {
                            reconnect_at = Instant::now() + backoff;
                            backoff = (backoff * 2).min(RECONNECT_MAX);
                            if unreachable.as_ref() != Some(&detail) {
                                unreachable = Some(detail.clone());
                                event(SessionEvent::ControllerUnreachable { detail });
                            }
                        }
                    }
                }
                if self.conn.is_none() {
                    let wait = reconnect_at.saturating_duration_since(Instant::now());
                    std::thread::sleep(wait.min(Duration::from_millis(100)));
                    continue;
                }
            }
            if now >= role_at && retry_at.map_or(true, |t| now >= t) {
                role_at = now + ROLE_EVERY;
                match self.follow_role(control, leader() == self.cfg.me, event) {
                    Ok(r) => retry_at = r,
                    Err(e) => {
                        retry_at = None;
                        self.lose(&e, event);
                        (reconnect_at, backoff) = (Instant::now(), RECONNECT_FIRST);
                        continue;
                    }
                }
            }
            if now >= peers_at {
                peers_at = now + PEERS_EVERY;
                if let Err(e) = self.follow_peers(control, event) {
                    if connection_lost(&e) {
                        self.lose(&e, event);
                        (reconnect_at, backoff) = (Instant::now(), RECONNECT_FIRST);
                        continue;
                    }
                }
            }
            let u = match self
                .conn()
                .and_then(|c| c.next_upcall(Duration::from_millis(100)))
            {
                Ok(Some(u)) => u,
                Ok(None) => continue,
                Err(e) => {
                    self.lose(&e, event);
                    (reconnect_at, backoff) = (Instant::now(), RECONNECT_FIRST);
                    continue;
                }
            };
            match u {
                Upcall::BandwidthChanged {
                    tunnel,
                    old,
                    new,
                    reason,
                    grace_ns,
                } => {
                    let Some(tree) = self.tree_of(tunnel) else {
                        continue;
                    };
                    let fd_lambda_ns =
                        self.follow(tree, tunnel, &new, grace_ns, control, &mut lower);
                    event(SessionEvent::BandwidthChanged {
                        tree,
                        tunnel: tunnel.0 as u32,
                        reason,
                        grace_ns,
                        period_ns: new.period_ns,
                        old_period_ns: old.period_ns,
                        max_latency_ns: new.max_latency_ns(),
                        old_max_latency_ns: old.max_latency_ns(),
                        fd_lambda_ns,
                        bound_ns: self.bound_ns(),
                    });
                }
                Upcall::BandwidthTerminated { tunnel, reason } => {
                    if let Some(tree) = self.tree_of(tunnel) {
                        event(SessionEvent::BandwidthTerminated {
                            tree,
                            tunnel: tunnel.0 as u32,
                            reason,
                        });
                    }
                }
            }
        }
        self
    }

    /// Drops the connection after `e` and reports it.
    fn lose(&mut self, e: &ClientError, event: &mut dyn FnMut(SessionEvent)) {
        let detail = match self.conn.take() {
            Some(c) => {
                self.last_upcall = self.last_upcall.max(c.last_upcall_seq());
                format!("controller {}: {e}", c.peer_addr())
            }
            None => e.to_string(),
        };
        event(SessionEvent::ControllerLost { detail });
    }

    /// Connects to whichever controller replica serves, subscribes,
    /// reconciles this member's trees and follows what changed in their
    /// resources meanwhile. The error names every address tried.
    fn reconnect(
        &mut self,
        control: &LaneControl,
        lower: &mut Option<(Instant, u64)>,
    ) -> Result<SessionEvent, String> {
        let mut tried = Vec::new();
        let mut c = connect_pass(&self.cfg.controllers, &self.host, &self.cfg.key, &mut tried)
            .map_err(|e| format!("controller {}: {e}", addr_list(&tried)))?;
        let addr = c.peer_addr();
        let fail = |what: &'static str| move |e| format!("controller {addr}: {what}: {e}");
        // Subscribed first: a tree the reconciliation terminates comes
        // back as an upcall on this connection.
        c.subscribe_after(self.last_upcall)
            .map_err(fail("subscribe"))?;
        let own = [TunnelId(self.own.fd as u64), TunnelId(self.own.repl as u64)];
        let r = c.reconcile(&own).map_err(fail("reconcile"))?;
        let (list, _) = c.list().map_err(fail("list"))?;
        self.conn = Some(c);
        let mut resynced = Vec::new();
        for (tree, t) in [(Tree::Fd, self.own.fd), (Tree::Repl, self.own.repl)] {
            let Some(info) = list.iter().find(|i| i.tunnel.0 == t as u64) else {
                continue;
            };
            if self.missed_change(tree, info, control) {
                self.follow(tree, info.tunnel, &info.resources, 0, control, lower);
                resynced.push(t);
            }
        }
        Ok(SessionEvent::Reconnected {
            controller: addr,
            kept: r.kept.iter().map(|t| t.0 as u32).collect(),
            resynced,
        })
    }

    /// Whether own tree `tree`'s resources at the controller (`info`)
    /// differ from those the lane runs.
    fn missed_change(&self, tree: Tree, info: &TunnelInfo, control: &LaneControl) -> bool {
        let (period_ns, _) = control.tree(tree);
        period_ns != info.resources.period_ns
            || self.max_ns.get(&(info.tunnel.0 as u32)) != Some(&info.resources.max_latency_ns())
    }

    /// Follows new resources of one of this member's trees: the tree runs
    /// at the new period from its next free window (a longer one is the
    /// safe side at once; σ is this member's), and for the X-FD tree Λ
    /// follows the announced maximum latency (up at once, down after
    /// `grace_ns`). Returns the X-FD tree's Λ.
    fn follow(
        &mut self,
        tree: Tree,
        tunnel: TunnelId,
        new: &Resources,
        grace_ns: u64,
        control: &LaneControl,
        lower: &mut Option<(Instant, u64)>,
    ) -> Option<u64> {
        let max = new.max_latency_ns();
        self.max_ns.insert(tunnel.0 as u32, max);
        let (_, bytes) = control.tree(tree);
        control.retune(Retune {
            tree,
            period_ns: new.period_ns,
            frame_bytes: bytes,
        });
        if tree != Tree::Fd {
            return None;
        }
        let (want, step) = lambda_step(max, self.fd_floor_ns, control.fd_lambda_ns());
        match step {
            LambdaStep::Now => {
                control.set_fd_lambda_ns(want);
                *lower = None;
            }
            LambdaStep::AfterGrace => {
                *lower = Some((Instant::now() + Duration::from_nanos(grace_ns), want))
            }
            LambdaStep::Keep => *lower = None,
        }
        Some(want)
    }

    /// Looks the other members' trees up; tells `control` of those that
    /// changed (and their keys, with tree keys). On an error nothing
    /// changes (asked again at the next look-up).
    fn follow_peers(
        &mut self,
        control: &LaneControl,
        event: &mut dyn FnMut(SessionEvent),
    ) -> Result<(), ClientError> {
        let before = self.peers.clone();
        if let Err(e) = self.look_up_peers() {
            self.peers = before;
            return Err(e);
        }
        if self.peers == before {
            return Ok(());
        }
        let new: Vec<(u64, TreeIds)> = self
            .peers
            .iter()
            .filter(|(m, t)| before.get(m) != Some(t))
            .map(|(&m, &t)| (m, t))
            .collect();
        if self.cfg.tree_keys {
            let trees: Vec<TreeIds> = new.iter().map(|(_, t)| *t).collect();
            match self.keys_of(&trees) {
                Ok(k) => control.add_keys(k),
                Err(e) => {
                    // Frames of the new trees would not open: keep the
                    // old ones and ask again.
                    self.peers = before;
                    return Err(e);
                }
            }
        }
        for (member, trees) in new {
            event(SessionEvent::PeerTrees { member, trees });
        }
        control.set_peer_trees(self.peers.clone());
        Ok(())
    }

    fn tree_of(&self, t: TunnelId) -> Option<Tree> {
        if t.0 == self.own.fd as u64 {
            Some(Tree::Fd)
        } else if t.0 == self.own.repl as u64 {
            Some(Tree::Repl)
        } else {
            None
        }
    }

    /// Resizes the replication tree if the role asks for another σ; the
    /// time to ask again if the controller refused. An error: the
    /// connection is lost (asked again once connected).
    fn follow_role(
        &mut self,
        control: &LaneControl,
        leading: bool,
        event: &mut dyn FnMut(SessionEvent),
    ) -> Result<Option<Instant>, ClientError> {
        let want = if leading {
            self.sizes.repl_leader
        } else {
            self.sizes.repl_follower
        };
        let (period, bytes) = control.tree(Tree::Repl);
        if bytes == want {
            return Ok(None);
        }
        let tunnel = TunnelId(self.own.repl as u64);
        let sigma = wire_bytes(want, self.cfg.sealed);
        match self.conn()?.change(tunnel, sigma, period) {
            Ok(g) => {
                control.retune(Retune {
                    tree: Tree::Repl,
                    period_ns: g.resources.period_ns,
                    frame_bytes: want,
                });
                let max = g.resources.max_latency_ns();
                self.max_ns.insert(self.own.repl, max);
                event(SessionEvent::Resized {
                    leader: leading,
                    period_ns: g.resources.period_ns,
                    frame_bytes: want,
                    max_latency_ns: max,
                });
                Ok(None)
            }
            Err(e) if connection_lost(&e) => Err(e),
            Err(e) => {
                event(SessionEvent::ResizeRefused {
                    detail: e.to_string(),
                });
                Ok(Some(Instant::now() + RESIZE_RETRY))
            }
        }
    }
}

#[cfg(test)]
mod takeover_tests;

#[cfg(test)]
mod tests {
    use super::*;

    /// Λ follows the X-FD tree's bound: up at once, down after the grace
    /// period, never below the configured one.
    #[test]
    fn lambda_steps() {
        use LambdaStep::*;
        // (bound, floor, Λ now) -> (Λ, when)
        let rows = [
            ("bound grows past Λ", (140, 20, 100), (140, Now)),
            ("bound shrinks", (100, 20, 140), (100, AfterGrace)),
            ("bound under the floor", (40, 500, 500), (500, Keep)),
            (
                "bound shrinks to the floor",
                (40, 500, 800),
                (500, AfterGrace),
            ),
            ("bound equal to Λ", (100, 20, 100), (100, Keep)),
            (
                "tree demoted: no bound",
                (u64::MAX, 500, 800),
                (500, AfterGrace),
            ),
            (
                "tree demoted, Λ at the floor",
                (u64::MAX, 500, 500),
                (500, Keep),
            ),
        ];
        for (name, (bound, floor, now), want) in rows {
            assert_eq!(lambda_step(bound, floor, now), want, "{name}");
        }
    }

    fn info(id: u64, sender: &str, sublane: u8, state: TunnelState) -> TunnelInfo {
        TunnelInfo {
            tunnel: TunnelId(id),
            sender: sender.into(),
            receivers: vec!["x".into()],
            sublane,
            state,
            requested_period_ns: 1,
            resources: Resources {
                load_bytes: 100,
                period_ns: 1,
                min_latency_ns: 1,
                max_jitter_ns: 1,
            },
        }
    }

    /// Every member's newest tree per sub-lane; other sub-lanes ignored.
    #[test]
    fn trees_per_sender() {
        use TunnelState::*;
        let list = [
            info(5, "kv1", FD_SUBLANE, Active),
            info(6, "kv1", REPL_SUBLANE, Active),
            // kv2 restarted: its newer trees win.
            info(7, "kv2", FD_SUBLANE, Active),
            info(8, "kv2", REPL_SUBLANE, Unbounded),
            info(11, "kv2", FD_SUBLANE, Active),
            info(12, "kv2", REPL_SUBLANE, Active),
            // kv3 holds only an X-FD tree so far, and one on a third sub-lane.
            info(9, "kv3", FD_SUBLANE, Active),
            info(10, "kv3", 2, Active),
        ];
        let t = trees_of(&list);
        assert_eq!(t.get("kv1"), Some(&(Some(5), Some(6))));
        assert_eq!(t.get("kv2"), Some(&(Some(11), Some(12))));
        assert_eq!(t.get("kv3"), Some(&(Some(9), None)));
        assert_eq!(t.len(), 3);
    }

    /// A controller that refuses every host's `Hello` with `refusal`.
    struct Refusing {
        addr: SocketAddr,
        stop: std::sync::Arc<AtomicBool>,
        thread: Option<std::thread::JoinHandle<()>>,
    }

    impl Refusing {
        fn start(
            refusal: impl Fn(SocketAddr) -> xlane_ctl::proto::ServerMsg + Send + 'static,
        ) -> Refusing {
            use std::io::{Read, Write};
            use xlane_ctl::proto::{FrameBuffer, Message};
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            listener.set_nonblocking(true).unwrap();
            let addr = listener.local_addr().unwrap();
            let stop = std::sync::Arc::new(AtomicBool::new(false));
            let halt = stop.clone();
            let thread = std::thread::spawn(move || {
                while !halt.load(Ordering::Relaxed) {
                    let Ok((mut s, _)) = listener.accept() else {
                        std::thread::sleep(Duration::from_millis(5));
                        continue;
                    };
                    s.set_nonblocking(false).unwrap();
                    // The whole Hello first, then the refusal, then close.
                    let (mut fb, mut buf) = (FrameBuffer::new(), [0u8; 512]);
                    while let Ok(None) = fb.next_frame() {
                        match s.read(&mut buf) {
                            Ok(0) | Err(_) => break,
                            Ok(n) => fb.push(&buf[..n]),
                        }
                    }
                    let _ = s.write_all(&refusal(addr).to_frame().unwrap());
                }
            });
            Refusing {
                addr,
                stop,
                thread: Some(thread),
            }
        }
    }

    impl Drop for Refusing {
        fn drop(&mut self) {
            self.stop.store(true, Ordering::Relaxed);
            if let Some(t) = self.thread.take() {
                let _ = t.join();
            }
        }
    }

    fn not_leader(serving: Option<SocketAddr>) -> xlane_ctl::proto::ServerMsg {
        xlane_ctl::proto::ServerMsg::Refused {
            code: RefusalCode::NotLeader,
            message: xlane_ctl::proto::not_leader_message(serving),
        }
    }

    /// A `NotLeader` refusal naming the serving replica sends the pass
    /// there at once, before the rest of the list; no address is tried
    /// twice in a pass. When none serves by the deadline (here: one pass)
    /// the error names every address tried and the last refusal.
    #[test]
    fn the_first_connect_follows_not_leader_and_names_what_it_tried() {
        // c is "the serving one" a and b name; it is busy.
        let c = Refusing::start(|_| xlane_ctl::proto::ServerMsg::Refused {
            code: RefusalCode::Busy,
            message: "too many connections".into(),
        });
        let to_c = c.addr;
        let a = Refusing::start(move |_| not_leader(Some(to_c)));
        let b = Refusing::start(move |_| not_leader(Some(to_c)));
        // d knows no serving replica; e names itself.
        let d = Refusing::start(|_| not_leader(None));
        let e = Refusing::start(|me| not_leader(Some(me)));
        let keys = xlane_ctl::auth::Keys::generate(&["h0", "h1"]).unwrap();
        let cfg = SessionConfig {
            controllers: vec![a.addr, b.addr, d.addr, e.addr],
            key: keys.get("h0").unwrap().clone(),
            me: 1,
            names: [(1, "h0".to_string()), (2, "h1".to_string())].into(),
            burst_bytes: 256,
            wait_for_peers: Duration::ZERO,
            wait_for_controller: Duration::ZERO,
            sealed: false,
            tree_keys: false,
        };
        let mut passes = Vec::new();
        let err = Session::open_with(cfg, &mut LaneTiming::default(), &mut |e| {
            passes.push(e.to_string())
        })
        .err()
        .expect("no controller serves");
        let SessionError::NoController { tried, last, .. } = &err else {
            panic!("{err}");
        };
        assert_eq!(tried, &[a.addr, c.addr, b.addr, d.addr, e.addr]);
        assert!(
            matches!(
                last,
                ClientError::Refused {
                    code: RefusalCode::NotLeader,
                    ..
                }
            ),
            "{last}"
        );
        assert_eq!(last.serving_hint(), Some(e.addr));
        assert_eq!(passes.len(), 1, "{passes:?}");
        let said = err.to_string();
        for addr in tried {
            assert!(said.contains(&addr.to_string()), "{said}");
        }
    }
}
