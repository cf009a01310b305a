//! [`RaftReplicator`]: the [`Replicator`] seam backed by X-Raft
//! (`xlane-xraft`), with a real network transport between the nodes.
//!
//! * Every write is encoded ([`WriteOp::encode`]) and proposed to the Raft
//!   log; [`KvStateMachine`] decodes each committed entry, applies it to the
//!   [`SharedStore`] and returns the reply's RESP bytes, which `propose`
//!   decodes back into a [`Reply`].
//! * Reads call [`Replicator::read_barrier`] (Raft ReadIndex), which also works
//!   on followers (the read index is confirmed by the leader), so a follower
//!   serves linearizable reads from its own store once it has caught up.
//! * Writes on a follower fail with [`ReplicaError::NotLeader`] holding the
//!   leader's client (RESP) address from the member table: `-MOVED`.
//! * Membership changes (`RAFT.NODE ADD/REMOVE`, [`crate::client_loop`])
//!   carry the new member's addresses; the state machine keeps the member
//!   table ([`Members`]) and the transport follows it ([`MemberTable`]).
//!
//! The member is an `xlane-xraft-net` [`Group`]: its network
//! ([`NetTransport`]: plain UDP or the lane for express traffic, TCP for
//! snapshots, polled by the raft driver's own thread), raft log, node,
//! driver and controller session.

use crate::client_loop::ClientLoop;
/// The member table and the state machine, re-exported where they were.
pub use crate::members::{parse_peer, Members, Peer, PeerParseError};
use crate::op::WriteOp;
use crate::replicator::{
    replica_error, ReplicaError, Replicator, SharedStore, READ_RETRIES, READ_UNCONFIRMED,
};
use crate::resp::{decode_reply, Limits, Reply};
use crate::session::Stats;
pub use crate::state_machine::{KvStateMachine, SmStats};
use crate::store::Store;
use std::collections::BTreeMap;
use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::Ordering;
use std::sync::{Arc, RwLock};
use xlane_xraft::driver::{DriverHandle, Frontend, ReplicateError};
use xlane_xraft::NodeConfig;
/// The raft log's storage settings and fsync policy, re-exported for
/// callers that do not depend on `xlane-xraft` themselves.
pub use xlane_xraft::{timeouts_from_bounds, FsyncPolicy as LogFsync, OpenReport, StorageConfig};
/// The network's settings and counters, re-exported for callers that do
/// not depend on `xlane-xraft-net` themselves.
pub use xlane_xraft_net::net::{BULK_THRESHOLD, EXPRESS_MTU, MAX_FRAME};
pub use xlane_xraft_net::{
    frame_sizes, FrameSizes, Group, GroupConfig, GroupError, LaneControl, LaneKeys, LaneStats,
    LaneTiming, MemberTable, NetAuth, NetConfig, NetError, NetTransport, Retune, TcpSide,
    TransportStats, Tree, TreeIds,
};

/// How to start a [`RaftReplicator`].
#[derive(Debug, Clone)]
pub struct RaftConfig {
    /// This node's raft id (non-zero, a key of `peers`).
    pub id: u64,
    /// Every voter, this node included: id → addresses. With `join`, the
    /// members already running and this node.
    pub peers: BTreeMap<u64, Peer>,
    /// Join a running cluster instead of bootstrapping one: a fresh log
    /// starts with no configuration and waits for the leader (after
    /// `RAFT.NODE ADD` there) to send its snapshot and log. An existing
    /// log restarts as usual.
    pub join: bool,
    /// Address the raft UDP socket and TCP listener bind (normally
    /// `peers[id].raft`; may be a wildcard address with the same port).
    pub bind: SocketAddr,
    /// Raft log storage.
    pub storage: StorageConfig,
    /// Raft timing and batching ([`NodeConfig::from_bounds`]).
    pub node: NodeConfig,
    /// Largest UDP datagram sent.
    pub express_mtu: usize,
    /// Messages larger than this go over TCP.
    pub bulk_threshold: usize,
    /// Express traffic over the lane ([`xlane_xraft_net::lane`]) with
    /// this timing instead of plain UDP.
    pub lane: Option<LaneTiming>,
    /// The members' lane tree ids, e.g. granted by the controller (lane
    /// mode; those missing use [`TreeIds::default_for`]).
    pub trees: BTreeMap<u64, TreeIds>,
    /// Authenticated raft datagrams (UDP mode).
    pub auth: Option<NetAuth>,
    /// Lane mode: each tree's own key from the controller (instead of
    /// `auth`'s group key).
    pub lane_keys: Option<LaneKeys>,
    /// How the users start (`--requirepass`, `--aclfile`): the same on
    /// every member ([`crate::session::AclStart`]).
    pub acl: crate::session::AclStart,
    /// A TLS port served beside the RESP listener ([`RaftReplicator::start_serving`]
    /// only; `--tls-port`).
    pub tls: Option<crate::tls::TlsPort>,
}

impl RaftConfig {
    /// A configuration with the default MTU and threshold, binding
    /// `peers[id].raft`, with `NodeConfig::from_bounds(id, period, latency)`.
    pub fn new(
        id: u64,
        peers: BTreeMap<u64, Peer>,
        storage: StorageConfig,
        period_ns: u64,
        max_latency_ns: u64,
    ) -> Result<Self, RaftStartError> {
        let me = peers
            .get(&id)
            .ok_or_else(|| RaftStartError::Config(format!("id {id} is not in the peer list")))?;
        Ok(RaftConfig {
            id,
            bind: me.raft,
            storage,
            node: NodeConfig::from_bounds(id, period_ns, max_latency_ns),
            express_mtu: EXPRESS_MTU,
            bulk_threshold: BULK_THRESHOLD,
            lane: None,
            trees: BTreeMap::new(),
            auth: None,
            lane_keys: None,
            peers,
            join: false,
            acl: Default::default(),
            tls: None,
        })
    }
}

/// The raft id of a single node ([`RaftConfig::single`]).
pub const SINGLE_ID: u64 = 1;

impl RaftConfig {
    /// A single node: a group of one member (id [`SINGLE_ID`]) serving
    /// clients at `client`, its raft log in `storage`. Its raft socket
    /// binds an ephemeral loopback port (`127.0.0.1:0`): a group of one
    /// sends no raft messages, and this keeps the single node on the very
    /// code path of a member (no second transport to maintain) without
    /// asking the user for an address or exposing a port beyond the host.
    /// A one-member group elects itself at start, and its reads need no
    /// read index ([`xlane_xraft::RaftNode::reads_local`]).
    pub fn single(
        client: String,
        storage: StorageConfig,
        period_ns: u64,
        max_latency_ns: u64,
    ) -> Result<Self, RaftStartError> {
        let raft = SocketAddr::from(([127, 0, 0, 1], 0));
        let peers = [(SINGLE_ID, Peer { raft, client })].into_iter().collect();
        Self::new(SINGLE_ID, peers, storage, period_ns, max_latency_ns)
    }
}

/// Why [`RaftReplicator::start`] failed.
#[derive(Debug, thiserror::Error)]
pub enum RaftStartError {
    /// Inconsistent configuration.
    #[error("bad raft configuration: {0}")]
    Config(String),
    /// The raft group (network, log, node) could not be started.
    #[error(transparent)]
    Group(#[from] GroupError),
    /// The client listener could not be set up for the event loop.
    #[error("client listener: {0}")]
    Clients(std::io::Error),
}

/// A replicated key-value store node: an X-Raft [`Group`] member whose
/// state machine is the store.
pub struct RaftReplicator {
    group: Group,
    store: SharedStore,
    members: Members,
    client_addr: Option<SocketAddr>,
    sm_stats: Arc<SmStats>,
}

impl RaftReplicator {
    /// Opens the raft log, binds the transport and starts the node. A fresh
    /// log bootstraps the cluster with every id in `cfg.peers` as a voter
    /// (or, with `cfg.join`, waits to be added); an existing one restarts (the store is rebuilt from the log's
    /// snapshot and committed entries). Returns what opening the log found.
    pub fn start(cfg: RaftConfig) -> Result<(Self, OpenReport), RaftStartError> {
        Self::start_inner(cfg, None)
    }

    /// Like [`RaftReplicator::start`], and serves RESP clients on
    /// `listener` from the raft driver's own thread
    /// ([`crate::client_loop`]), counting them in `stats`.
    pub fn start_serving(
        cfg: RaftConfig,
        listener: TcpListener,
        limits: Limits,
        stats: Arc<Stats>,
    ) -> Result<(Self, OpenReport), RaftStartError> {
        Self::start_inner(cfg, Some((listener, limits, stats)))
    }

    fn start_inner(
        cfg: RaftConfig,
        clients: Option<(TcpListener, Limits, Arc<Stats>)>,
    ) -> Result<(Self, OpenReport), RaftStartError> {
        // The network: express on UDP or the lane (polled by the driver
        // thread), regular on TCP.
        let net = NetConfig {
            me: cfg.id,
            bind: cfg.bind,
            peers: cfg.peers.iter().map(|(&i, p)| (i, p.raft)).collect(),
            express_mtu: cfg.express_mtu,
            lane: cfg.lane,
            trees: cfg.trees.clone(),
            auth: cfg.auth.clone(),
            lane_keys: cfg.lane_keys.clone(),
        };
        // The users from the start settings, before the log replays on
        // top of them (identical on every member started alike).
        let (users, requirepass) = cfg.acl.initial().map_err(RaftStartError::Config)?;
        let mut initial = Store::new();
        initial.set_users(users, requirepass);
        let store: SharedStore = Arc::new(RwLock::new(initial));
        let sm_stats = Arc::new(SmStats::default());
        // The members given at start, until the log or a snapshot says
        // otherwise (restoring the log's snapshot happens in RaftNode::new).
        let members = Members::new(cfg.peers.clone());
        let sm = KvStateMachine::new(store.clone(), members.clone(), sm_stats.clone());
        let (client_addr, frontend) = match clients {
            None => (None, None),
            Some((listener, limits, stats)) => {
                let addr = listener.local_addr().map_err(RaftStartError::Clients)?;
                let l = ClientLoop::new(
                    listener,
                    limits,
                    store.clone(),
                    members.clone(),
                    cfg.id,
                    stats,
                )
                .map_err(RaftStartError::Clients)?
                .with_acl(cfg.acl.clone());
                let l = match &cfg.tls {
                    Some(port) => l.with_tls(port).map_err(RaftStartError::Clients)?,
                    None => l,
                };
                let check = net.clone();
                let l = l.check_peers_with(Box::new(move |id, p| {
                    check.check_peer(id, p.raft).map_err(|e| e.to_string())
                }));
                (Some(addr), Some(Box::new(l) as Box<dyn Frontend>))
            }
        };
        let group_cfg = GroupConfig {
            net,
            storage: cfg.storage,
            node: cfg.node,
            bulk_threshold: cfg.bulk_threshold,
            join: cfg.join,
        };
        let table = Box::new(members.clone()) as Box<dyn MemberTable>;
        let (group, report) = Group::start(group_cfg, sm, Some(table), frontend)?;
        Ok((
            RaftReplicator {
                group,
                store,
                members,
                client_addr,
                sm_stats,
            },
            report,
        ))
    }

    /// This node's raft group membership: network, driver, controller
    /// session.
    pub fn group(&self) -> &Group {
        &self.group
    }

    /// This node's raft id.
    pub fn id(&self) -> u64 {
        self.group.id()
    }

    /// The bound raft address (UDP and TCP).
    pub fn raft_addr(&self) -> SocketAddr {
        self.group.raft_addr()
    }

    /// The address RESP clients connect to ([`Self::start_serving`] only).
    pub fn client_addr(&self) -> Option<SocketAddr> {
        self.client_addr
    }

    /// The transport's counters.
    pub fn stats(&self) -> &TransportStats {
        self.group.stats()
    }

    /// The lane link's counters (lane mode only).
    pub fn lane_stats(&self) -> Option<&LaneStats> {
        self.group.lane_stats()
    }

    /// The raft log index of the last entry applied to the store (0 until
    /// the first entry after start or the last snapshot).
    pub fn applied_index(&self) -> u64 {
        self.sm_stats.applied_index.load(Ordering::Acquire)
    }

    /// Snapshots that could not be decoded (the store was reset to empty).
    pub fn restore_errors(&self) -> u64 {
        self.sm_stats.restore_errors.load(Ordering::Relaxed)
    }

    /// Added members whose addresses did not decode.
    pub fn member_errors(&self) -> u64 {
        self.sm_stats.member_errors.load(Ordering::Relaxed)
    }

    /// The member table as this node has applied it.
    pub fn members(&self) -> BTreeMap<u64, Peer> {
        self.members.table()
    }

    /// What other threads may change in the lane link (lane mode only).
    pub fn lane_control(&self) -> Option<&LaneControl> {
        self.group.lane_control()
    }

    /// Whether the raft driver still runs (false after [`Self::shutdown`] or
    /// a raft log write failure).
    pub fn running(&self) -> bool {
        self.group.running()
    }

    /// The leader as this member last saw it (0: none known).
    pub fn leader_id(&self) -> u64 {
        self.group.leader_id()
    }

    /// The driver handle (for tools and tests).
    pub fn driver(&self) -> &DriverHandle {
        self.group.handle()
    }

    /// Stops the controller session (if one runs), the driver and the
    /// transport threads and waits for them ([`Group::shutdown`] also says
    /// how many lane trees the controller took back).
    pub fn shutdown(&self) {
        self.group.shutdown();
    }

    fn leader_client(&self, hint: u64) -> Option<String> {
        self.members.client_of(self.id(), hint)
    }
}

/// The network follows the member table the state machine keeps.
impl MemberTable for Members {
    fn version(&self) -> u64 {
        Members::version(self)
    }

    fn raft_addrs(&self) -> Vec<(u64, SocketAddr)> {
        self.table().iter().map(|(&id, p)| (id, p.raft)).collect()
    }
}

impl Replicator for RaftReplicator {
    fn propose(&self, op: WriteOp) -> Result<Reply, ReplicaError> {
        match self.group.handle().propose(op.encode()) {
            Ok(bytes) => match decode_reply(&bytes) {
                Ok(Some((r, n))) if n == bytes.len() => Ok(r),
                _ => Err(ReplicaError::Unavailable(
                    "undecodable reply from the state machine".into(),
                )),
            },
            Err(e) => Err(replica_error(e, |h| self.leader_client(h))),
        }
    }

    fn read_barrier(&self) -> Result<(), ReplicaError> {
        for _ in 0..READ_RETRIES {
            match self.group.handle().read_barrier() {
                Ok(()) => return Ok(()),
                Err(ReplicateError::ReadFailed) => continue,
                Err(e) => return Err(replica_error(e, |h| self.leader_client(h))),
            }
        }
        Err(ReplicaError::Unavailable(READ_UNCONFIRMED.into()))
    }

    fn store(&self) -> &SharedStore {
        &self.store
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Raft bounds of the in-process test groups: a 10 ms tick and a
    /// latency bound of 250 ms, so that an election takes 0.5–1 s. A CI
    /// machine under load stalls a member's thread for tens of ms; the
    /// tests that are not about failover must not see leaders change then.
    pub(crate) const TEST_PERIOD_NS: u64 = 10_000_000;
    /// See [`TEST_PERIOD_NS`].
    pub(crate) const TEST_LATENCY_NS: u64 = 250_000_000;
    use crate::op::{SetCond, SetTtl, WriteCmd};
    use std::sync::atomic::AtomicU64;
    use std::time::Duration;

    /// A `SET k v` write.
    pub(crate) fn set(k: &str, v: &str) -> WriteOp {
        WriteOp::new(
            1,
            WriteCmd::Set {
                key: k.into(),
                value: v.into(),
                cond: SetCond::Always,
                ttl: SetTtl::Persist,
                get: false,
            },
        )
    }

    /// Three members on loopback: a data directory each and the peer table
    /// (raft ports from `port`, client addresses from `client_base + id`).
    fn three_members(
        port: fn() -> SocketAddr,
        client_base: u16,
    ) -> (Vec<tempfile::TempDir>, BTreeMap<u64, Peer>) {
        let dirs = (0..3)
            .map(|_| tempfile::tempdir().expect("tempdir"))
            .collect();
        let peers = (1..=3u64)
            .map(|id| {
                let client = format!("127.0.0.1:{}", client_base + id as u16);
                (
                    id,
                    Peer {
                        raft: port(),
                        client,
                    },
                )
            })
            .collect();
        (dirs, peers)
    }

    /// Three in-process nodes over loopback: a write through the leader is
    /// readable on every node after a read barrier; followers redirect.
    #[test]
    fn three_nodes_in_process() {
        let (dirs, peers) = three_members(xlane_testports::raft, 6000);
        let nodes: Vec<RaftReplicator> = (1..=3u64)
            .map(|id| {
                let mut st = StorageConfig::new(dirs[id as usize - 1].path());
                st.fsync = LogFsync::Never;
                let cfg = RaftConfig::new(id, peers.clone(), st, TEST_PERIOD_NS, TEST_LATENCY_NS)
                    .expect("cfg");
                RaftReplicator::start(cfg).expect("start").0
            })
            .collect();
        let leader = wait_leader(&nodes.iter().collect::<Vec<_>>(), "first election");
        let lead = &nodes[leader as usize - 1];
        for i in 0..20 {
            let r = lead.propose(set(&format!("k{i}"), "v")).expect("propose");
            assert_eq!(r, Reply::ok());
        }
        for n in &nodes {
            if n.id() != leader {
                // A follower that has not heard from the leader yet (on a
                // loaded machine its election timer may have fired) knows
                // no leader for a moment: that is liveness, so wait for it.
                let deadline = std::time::Instant::now() + Duration::from_secs(30);
                loop {
                    match n.propose(set("z", "z")) {
                        Err(ReplicaError::NotLeader { leader: Some(c) }) => {
                            assert_eq!(c, peers[&leader].client);
                            break;
                        }
                        Err(ReplicaError::NotLeader { leader: None })
                            if std::time::Instant::now() < deadline =>
                        {
                            std::thread::sleep(Duration::from_millis(5));
                        }
                        other => panic!("follower {}: {other:?}", n.id()),
                    }
                }
            }
            n.read_barrier().expect("barrier");
            let s = n.store().read().expect("lock");
            assert_eq!(s.get(b"k19", 0), Some(&b"v"[..]), "node {}", n.id());
        }
        for n in &nodes {
            assert_eq!(n.stats().udp_unknown.load(Ordering::Relaxed), 0);
            n.shutdown();
        }
    }

    fn wait_leader(nodes: &[&RaftReplicator], what: &str) -> u64 {
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        loop {
            assert!(std::time::Instant::now() < deadline, "{what}: no leader");
            for n in nodes {
                if n.propose(set("probe", "x")).is_ok() {
                    return n.id();
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Three in-process nodes over the lane: writes replicate on the
    /// replication sub-lane, commit notices ride the X-FD heartbeats, and
    /// when the leader stops, X-FD's suspicion starts the election. Raft's
    /// own election timeout is set to minutes, so a new leader within the
    /// test's wait can only come from the detector.
    #[test]
    fn three_nodes_over_the_lane_and_xfd_election() {
        let (dirs, peers) = three_members(xlane_testports::raft_pair, 6100);
        let timing = LaneTiming {
            repl_period_ns: 50_000,
            fd_period_ns: 1_000_000,
            fd_lambda_ns: 50_000_000,
            ..LaneTiming::default()
        };
        let start = |id: u64, election_ticks: usize| {
            let mut st = StorageConfig::new(dirs[id as usize - 1].path());
            st.fsync = LogFsync::Never;
            let mut cfg =
                RaftConfig::new(id, peers.clone(), st, 1_000_000, 1_000_000).expect("cfg");
            cfg.lane = Some(timing);
            cfg.node.election_ticks = election_ticks;
            cfg.node.read_timeout_ticks = 2_000;
            RaftReplicator::start(cfg).expect("start").0
        };
        // Node 1 may time out normally (to elect the first leader); 2 and 3
        // only through X-FD.
        let mut nodes: Vec<Option<RaftReplicator>> = vec![
            Some(start(1, 200)),
            Some(start(2, 600_000)),
            Some(start(3, 600_000)),
        ];
        let all: Vec<&RaftReplicator> = nodes.iter().flatten().collect();
        let leader = wait_leader(&all, "first election");
        let lead = all[leader as usize - 1];
        // Enough writes that each tunnel's sequence runs far past the
        // receivers' reorder window (checked at the restart below).
        for i in 0..600 {
            let r = lead.propose(set(&format!("k{i}"), "v")).expect("propose");
            assert_eq!(r, Reply::ok());
        }
        for n in &all {
            n.read_barrier().expect("barrier");
            let s = n.store().read().expect("lock");
            assert_eq!(s.get(b"k49", 0), Some(&b"v"[..]), "node {}", n.id());
            let ls = n.lane_stats().expect("lane mode");
            assert!(ls.repl_frames_received.load(Ordering::Relaxed) > 0);
            assert!(ls.fd_frames_sent.load(Ordering::Relaxed) > 0);
            if n.id() != leader {
                // Raft heartbeats (commit notices) arrived on the X-FD lane.
                assert!(
                    ls.notices_received.load(Ordering::Relaxed) > 0,
                    "node {}",
                    n.id()
                );
            }
            assert_eq!(n.stats().udp_received.load(Ordering::Relaxed), 0);
        }
        drop(all);
        // Stop the leader: its heartbeats stop, the others suspect it.
        let old = nodes[leader as usize - 1].take().expect("leader");
        old.shutdown();
        drop(old);
        let rest: Vec<&RaftReplicator> = nodes.iter().flatten().collect();
        let new_leader = wait_leader(&rest, "after the leader stopped");
        assert_ne!(new_leader, leader);
        let campaigns: u64 = rest
            .iter()
            .map(|n| {
                n.lane_stats()
                    .expect("lane")
                    .campaigns
                    .load(Ordering::Relaxed)
            })
            .sum();
        assert!(campaigns >= 1, "no X-FD-started election");
        for n in &rest {
            let ls = n.lane_stats().expect("lane");
            assert!(
                ls.suspicions.load(Ordering::Relaxed) >= 1,
                "node {}",
                n.id()
            );
            n.read_barrier().expect("barrier after failover");
            assert_eq!(
                n.store().read().expect("lock").get(b"k49", 0),
                Some(&b"v"[..])
            );
        }
        let newl = rest[rest.iter().position(|n| n.id() == new_leader).expect("new")];
        assert_eq!(
            newl.propose(set("after", "failover")).expect("write"),
            Reply::ok()
        );
        // A lane counter summed over the members other than the old leader.
        let others = |nodes: &[Option<RaftReplicator>], f: fn(&LaneStats) -> &AtomicU64| -> u64 {
            nodes
                .iter()
                .flatten()
                .filter(|n| n.id() != leader)
                .map(|n| f(n.lane_stats().expect("lane")).load(Ordering::Relaxed))
                .sum()
        };
        let refused = |nodes: &[Option<RaftReplicator>]| others(nodes, |s| &s.refused_frames);
        drop(rest);
        let refused_before = refused(&nodes);
        // The old leader restarts from its log: its tunnels number frames
        // from 0 again, which the others must accept (X-FD sees the new
        // incarnation), so it catches up and confirms reads.
        nodes[leader as usize - 1] = Some(start(leader, 600_000));
        let back = nodes[leader as usize - 1].as_ref().expect("restarted");
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        loop {
            let caught_up = back.read_barrier().is_ok()
                && back.store().read().expect("lock").get(b"after", 0) == Some(&b"failover"[..]);
            if caught_up {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "restarted node did not catch up"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        let restarts = others(&nodes, |s| &s.restarts);
        assert!(restarts >= 1, "no restart seen by X-FD");
        // Only frames sent before its first heartbeat arrived may be refused,
        // not the hundreds an old sequence history would reject.
        let refused_after = refused(&nodes) - refused_before;
        assert!(
            refused_after < 64,
            "{refused_after} frames of the restarted node refused"
        );
        for n in nodes.into_iter().flatten() {
            n.shutdown();
        }
    }
}
