//! `xlane-ctl-replica`: the X-Lane controller replicated through X-Raft.
//!
//! Three (or five) replicas each run the controller daemon
//! ([`xlane_ctl::server::Server::start_replicated`]) over one X-Raft log
//! (`xlane-xraft`, raft-rs underneath). The log carries the controller's
//! commands ([`xlane_ctl::replicated`]): every replica applies each
//! committed command to its own controller core, so every replica holds
//! the grants, the tunnels' trees and the key secret. The replica that
//! leads the log serves hosts; the others refuse them with `NotLeader`,
//! naming the serving replica, and hosts move on
//! ([`xlane_ctl::client::Client::connect_any`]).
//!
//! # Why X-Raft and not etcd
//!
//! The controller's state already is a deterministic state machine fed in
//! order (the journal replays it), X-Raft is the consensus xlane ships and
//! tests, and an etcd would add a second consensus system, a second
//! process to run and a network dependency to a core service. The raft
//! peers talk over plain UDP (express messages) and TCP (snapshots): the
//! controller comes up before any lane exists.
//!
//! # What a takeover keeps
//!
//! A request is answered only after its command is committed (on a
//! majority's disk) and applied, so every acknowledged grant survives the
//! loss of any minority of replicas. A request in flight when its replica
//! dies is unanswered: the host's connection closes and the host retries
//! or reports it. A new serving replica reprograms the fabric from its
//! state and hosts reconcile when they reconnect.
//!
//! # Tests
//!
//! The feature `testing` adds the module `testing`: three
//! replicas in one process and a host that connects to whichever serves,
//! for this crate's tests and those of crates that follow a takeover.
#![warn(missing_docs)]

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use xlane_ctl::auth::Keys;
use xlane_ctl::fabric::Fabric;
use xlane_ctl::replicated::ReplicatedState;
use xlane_ctl::server::{Log, LogError, Server, ServerConfig, ServerError};
use xlane_ctl::te::{TeConfig, Topology};
use xlane_ctl::Policy;
use xlane_xraft::driver::{DriverHandle, ReplicateError};
use xlane_xraft::StateMachine;
pub use xlane_xraft::{FsyncPolicy, NodeConfig, OpenReport, StorageConfig};
pub use xlane_xraft_net::NetAuth;
use xlane_xraft_net::{Group, GroupConfig, GroupError, NetConfig};

#[cfg(feature = "testing")]
pub mod testing;

/// Largest raft datagram on the plain UDP path.
pub const EXPRESS_MTU: usize = xlane_xraft_net::net::EXPRESS_MTU;

/// Raft tick of a controller replica: 10 ms. With
/// [`ELECTION_TICKS`], a follower starts an election after 100–200 ms
/// without hearing from the serving replica.
pub const TICK_NS: u64 = 10_000_000;

/// Election timeout in ticks (raft randomizes it up to twice this).
pub const ELECTION_TICKS: usize = 10;

/// One replica's addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplicaAddrs {
    /// Raft: UDP datagrams and the TCP listener for snapshots.
    pub raft: SocketAddr,
    /// Where hosts connect.
    pub client: SocketAddr,
}

/// A replica specification that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReplicaParseError {
    /// Not `ID=RAFT_ADDR/CLIENT_ADDR`.
    #[error("expected ID=RAFT_ADDR/CLIENT_ADDR, e.g. 1=10.0.0.1:7100/10.0.0.1:7070")]
    Shape,
    /// The id is not a positive integer.
    #[error("replica id `{0}` is not a positive integer")]
    Id(String),
    /// An address is not `IP:PORT`.
    #[error("`{0}` is not an IP:PORT address")]
    Addr(String),
}

/// Parses `ID=RAFT_ADDR/CLIENT_ADDR` (as `xlane kv`'s `--peer`), e.g.
/// `1=10.0.0.1:7100/10.0.0.1:7070`.
pub fn parse_replica(s: &str) -> Result<(u64, ReplicaAddrs), ReplicaParseError> {
    let (id, addrs) = s.split_once('=').ok_or(ReplicaParseError::Shape)?;
    let (raft, client) = addrs.split_once('/').ok_or(ReplicaParseError::Shape)?;
    let id = id.trim();
    let id = match id.parse::<u64>() {
        Ok(n) if n > 0 => n,
        _ => return Err(ReplicaParseError::Id(id.into())),
    };
    let addr = |a: &str| {
        a.trim()
            .parse::<SocketAddr>()
            .map_err(|_| ReplicaParseError::Addr(a.trim().into()))
    };
    Ok((
        id,
        ReplicaAddrs {
            raft: addr(raft)?,
            client: addr(client)?,
        },
    ))
}

/// How to start a replica.
#[derive(Debug, Clone)]
pub struct ReplicaConfig {
    /// This replica's raft id (non-zero, a key of `peers`).
    pub id: u64,
    /// Every replica, this one included.
    pub peers: BTreeMap<u64, ReplicaAddrs>,
    /// The raft log's directory and fsync policy.
    pub storage: StorageConfig,
    /// Raft timing and batching (defaults: [`TICK_NS`], [`ELECTION_TICKS`]).
    pub node: NodeConfig,
    /// The daemon's settings; `listen` is `peers[id].client`.
    pub server: ServerConfig,
    /// Authenticated raft datagrams (a group key every replica holds).
    pub auth: Option<NetAuth>,
}

impl ReplicaConfig {
    /// Defaults for replica `id` of `peers`, its log in `log_dir`.
    pub fn new(
        id: u64,
        peers: BTreeMap<u64, ReplicaAddrs>,
        log_dir: std::path::PathBuf,
    ) -> Result<ReplicaConfig, ReplicaError> {
        let me = peers
            .get(&id)
            .ok_or_else(|| ReplicaError::Config(format!("id {id} is not in the replica list")))?;
        let mut node = NodeConfig::new(id);
        node.tick_ns = TICK_NS;
        node.election_ticks = ELECTION_TICKS;
        let server = ServerConfig::new(me.client, log_dir.clone());
        Ok(ReplicaConfig {
            id,
            server,
            storage: StorageConfig::new(log_dir),
            node,
            auth: None,
            peers,
        })
    }
}

/// Why a replica could not start.
#[derive(Debug, thiserror::Error)]
pub enum ReplicaError {
    /// Inconsistent configuration.
    #[error("bad replica configuration: {0}")]
    Config(String),
    /// The raft group (network, log, node) could not be started.
    #[error(transparent)]
    Group(#[from] GroupError),
    /// The daemon could not start.
    #[error(transparent)]
    Server(#[from] ServerError),
}

/// The state machine X-Raft drives: the controller state.
struct Machine(Arc<ReplicatedState>);

impl StateMachine for Machine {
    fn apply(&mut self, index: u64, op: &[u8]) -> Vec<u8> {
        self.0.apply(index, op)
    }

    fn snapshot(&self) -> Vec<u8> {
        self.0.snapshot()
    }

    fn restore(&mut self, data: &[u8]) {
        if let Err(e) = self.0.restore(data) {
            tracing::error!("controller snapshot does not restore: {e}");
        }
    }
}

/// The daemon's [`Log`]: the raft driver.
struct RaftLog {
    id: u64,
    handle: DriverHandle,
    clients: BTreeMap<u64, SocketAddr>,
}

impl Log for RaftLog {
    fn propose(&self, command: Vec<u8>) -> Result<Vec<u8>, LogError> {
        match self.handle.propose(command) {
            Ok(r) => Ok(r),
            Err(ReplicateError::NotLeader(_)) => Err(LogError::NotLeader),
            Err(e) => Err(LogError::Failed(e.to_string())),
        }
    }

    fn is_leader(&self) -> bool {
        self.handle.leader_id() == self.id
    }

    fn leader_addr(&self) -> Option<SocketAddr> {
        self.clients.get(&self.handle.leader_id()).copied()
    }
}

/// A running replica: the raft driver, its network, and the daemon.
/// Dropping it stops it (a stop hands nothing over: the others elect).
pub struct ControllerReplica {
    id: u64,
    server: Option<Server>,
    group: Group,
    state: Arc<ReplicatedState>,
    report: OpenReport,
}

impl std::fmt::Debug for ControllerReplica {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ControllerReplica")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

impl ControllerReplica {
    /// Opens the raft log (a fresh one bootstraps the group with every id
    /// in `cfg.peers`; an existing one restarts from its snapshot and
    /// committed entries), opens the raft network, and starts the daemon.
    pub fn start(
        cfg: ReplicaConfig,
        topo: Topology,
        te: TeConfig,
        policy: Policy,
        keys: Keys,
        fabric: Box<dyn Fabric>,
    ) -> Result<ControllerReplica, ReplicaError> {
        let me = *cfg.peers.get(&cfg.id).ok_or_else(|| {
            ReplicaError::Config(format!("id {} is not in the replica list", cfg.id))
        })?;
        if cfg.id == 0 {
            return Err(ReplicaError::Config("replica ids start at 1".into()));
        }
        let net = NetConfig {
            me: cfg.id,
            bind: me.raft,
            peers: cfg.peers.iter().map(|(&i, p)| (i, p.raft)).collect(),
            express_mtu: EXPRESS_MTU,
            lane: None,
            trees: BTreeMap::new(),
            auth: cfg.auth.clone(),
            lane_keys: None,
        };
        let state = Arc::new(ReplicatedState::new(topo, te, policy));
        let group_cfg = GroupConfig {
            net,
            storage: cfg.storage.clone(),
            node: cfg.node.clone(),
            bulk_threshold: xlane_xraft_net::net::BULK_THRESHOLD,
            join: false,
        };
        let (group, report) = Group::start(group_cfg, Machine(state.clone()), None, None)?;
        let log = Arc::new(RaftLog {
            id: cfg.id,
            handle: group.handle().clone(),
            clients: cfg.peers.iter().map(|(&i, p)| (i, p.client)).collect(),
        });
        let mut scfg = cfg.server.clone();
        scfg.listen = me.client;
        let server = Server::start_replicated(scfg, keys, fabric, state.clone(), log)?;
        Ok(ControllerReplica {
            id: cfg.id,
            server: Some(server),
            group,
            state,
            report,
        })
    }

    /// This replica's raft id.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The raft id of the serving replica as this one knows it (0: none).
    pub fn leader_id(&self) -> u64 {
        self.group.leader_id()
    }

    /// Whether this replica serves hosts now.
    pub fn serves(&self) -> bool {
        self.server.as_ref().is_some_and(Server::serves)
    }

    /// Where hosts connect.
    pub fn client_addr(&self) -> Option<SocketAddr> {
        self.server.as_ref().map(Server::local_addr)
    }

    /// The daemon (counters, tunnels).
    pub fn server(&self) -> Option<&Server> {
        self.server.as_ref()
    }

    /// The replicated state.
    pub fn state(&self) -> &Arc<ReplicatedState> {
        &self.state
    }

    /// What opening the raft log found.
    pub fn open_report(&self) -> &OpenReport {
        &self.report
    }

    /// Stops the raft driver, then the daemon.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        // The driver first: requests waiting on it then fail at once, and
        // the daemon's threads end.
        self.group.shutdown();
        if let Some(s) = self.server.take() {
            s.stop();
        }
    }
}

impl Drop for ControllerReplica {
    fn drop(&mut self) {
        self.shutdown();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replica_specs() {
        let ok = parse_replica("2=127.0.0.1:7100/127.0.0.1:7070").unwrap();
        assert_eq!(ok.0, 2);
        assert_eq!(ok.1.raft, "127.0.0.1:7100".parse().unwrap());
        assert_eq!(ok.1.client, "127.0.0.1:7070".parse().unwrap());
        let v6 = parse_replica("1=[::1]:7100/[::1]:7070").unwrap();
        assert_eq!(v6.1.client, "[::1]:7070".parse().unwrap());
        for (bad, want) in [
            ("", ReplicaParseError::Shape),
            ("1=127.0.0.1:7100", ReplicaParseError::Shape),
            (
                "0=127.0.0.1:1/127.0.0.1:2",
                ReplicaParseError::Id("0".into()),
            ),
            (
                "x=127.0.0.1:1/127.0.0.1:2",
                ReplicaParseError::Id("x".into()),
            ),
            (
                "1=host:1/127.0.0.1:2",
                ReplicaParseError::Addr("host:1".into()),
            ),
            (
                "1=127.0.0.1:1/127.0.0.1",
                ReplicaParseError::Addr("127.0.0.1".into()),
            ),
        ] {
            assert_eq!(parse_replica(bad).unwrap_err(), want, "{bad:?}");
        }
    }
}
