//! [`Group`]: one member of an X-Raft group, assembled in one place.
//!
//! A member is its network ([`NetTransport`]: raft's express datagrams on
//! plain UDP or the lane, the regular class on TCP), its raft log
//! ([`DiskStorage`]), the [`RaftNode`] with the caller's state machine, the
//! driver thread that runs them, and, in lane mode with a controller, the
//! controller session that resizes the member's trees with its role and
//! moves X-FD's threshold Λ inside the lane link. The kv server and the
//! controller replicas both start their raft through [`Group::start`]; what
//! differs between them is only the state machine, whether the member table
//! can change while the group runs ([`MemberTable`]), and whether the driver
//! thread also serves clients ([`Frontend`]).

use crate::lane::{LaneControl, LaneStats};
use crate::net::{NetConfig, NetError, NetTransport, TcpSide, TransportStats};
use crate::session::{Session, SessionEvent};
use std::net::SocketAddr;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use xlane_xraft::driver::{Driver, DriverHandle, Frontend};
use xlane_xraft::node::NewNodeError;
use xlane_xraft::storage::OpenError;
use xlane_xraft::{
    DiskStorage, Input, NodeConfig, OpenReport, RaftNode, Readiness, StateMachine, StorageConfig,
    TrafficClass, Transport,
};

/// How to start a [`Group`] member.
#[derive(Debug, Clone)]
pub struct GroupConfig {
    /// The network; `net.me` is this member's raft id and `net.peers`
    /// every member at start, this one included.
    pub net: NetConfig,
    /// The raft log.
    pub storage: StorageConfig,
    /// Raft timing and batching (its `id` is set to `net.me`).
    pub node: NodeConfig,
    /// Raft messages larger than this many bytes go over TCP.
    pub bulk_threshold: usize,
    /// Join a running group: a fresh log starts with no configuration and
    /// waits for the leader to add this member and send its snapshot.
    /// Otherwise a fresh log bootstraps the group with every member of
    /// `net.peers` as a voter. An existing log restarts as it is either way.
    pub join: bool,
}

/// Why [`Group::start`] failed.
#[derive(Debug, thiserror::Error)]
pub enum GroupError {
    /// Inconsistent configuration.
    #[error("bad raft configuration: {0}")]
    Config(String),
    /// The raft log could not be opened.
    #[error("raft log: {0}")]
    Open(#[from] OpenError),
    /// The raft node could not be created.
    #[error("raft node: {0}")]
    Node(#[from] NewNodeError),
    /// The network could not be opened.
    #[error(transparent)]
    Net(#[from] NetError),
}

/// A member table that changes while the group runs (membership changes
/// the state machine applies, a snapshot it restores): the network follows
/// it on the driver thread, before each send and poll.
pub trait MemberTable: Send + 'static {
    /// A number that changes whenever the table does.
    fn version(&self) -> u64;
    /// Every member's raft address.
    fn raft_addrs(&self) -> Vec<(u64, SocketAddr)>;
}

/// The controller session's thread and what ends it.
struct SessionThread {
    stop: Arc<AtomicBool>,
    join: JoinHandle<Session>,
}

/// One running member of an X-Raft group: the driver thread, the network's
/// threads and, once [`Group::follow_controller`] is called, the controller
/// session's. [`Group::shutdown`] (or dropping it) stops them all.
pub struct Group {
    id: u64,
    handle: DriverHandle,
    raft_addr: SocketAddr,
    stats: Arc<TransportStats>,
    lane: Option<Arc<LaneStats>>,
    lane_control: Option<Arc<LaneControl>>,
    driver: Mutex<Option<Driver>>,
    tcp: Mutex<Box<TcpSide>>,
    session: Mutex<Option<SessionThread>>,
}

impl Group {
    /// Opens the network and the raft log, creates the node over `sm` and
    /// starts the driver thread (serving `frontend` too, if given). A group
    /// of one voter elects itself at once. With `members`, the network's
    /// peers follow that table; without, they stay `cfg.net.peers`.
    /// Returns what opening the log found.
    pub fn start<S>(
        cfg: GroupConfig,
        sm: S,
        members: Option<Box<dyn MemberTable>>,
        frontend: Option<Box<dyn Frontend>>,
    ) -> Result<(Group, OpenReport), GroupError>
    where
        S: StateMachine + Send + 'static,
    {
        let id = cfg.net.me;
        if id == 0 || !cfg.net.peers.iter().any(|&(i, _)| i == id) {
            return Err(GroupError::Config(format!(
                "id {id} must be non-zero and in the peer list"
            )));
        }
        let (transport, mut tcp) = NetTransport::open(&cfg.net)?;
        let raft_addr = tcp.addr();
        let (storage, report) = DiskStorage::open(cfg.storage)?;
        let voters: Vec<u64> = if cfg.join {
            Vec::new()
        } else {
            cfg.net.peers.iter().map(|&(i, _)| i).collect()
        };
        let mut node_cfg = cfg.node;
        node_cfg.id = id;
        let mut node = RaftNode::new(node_cfg, storage, sm, &voters)?;
        // The only voter need not wait for an election timeout: it wins at once.
        if node.conf_state().voters == [id] && !node.is_leader() {
            let _ = node.campaign();
        }
        let endpoint = cfg
            .net
            .message_endpoint(cfg.bulk_threshold)
            .map_err(|e| GroupError::Config(e.to_string()))?;
        let stats = transport.stats();
        let lane = transport.lane_stats();
        let lane_control = transport.lane_control();
        let transport = Follow {
            net: transport,
            members,
            seen: 0,
        };
        let driver = Driver::spawn_with(node, endpoint, transport, frontend);
        let handle = driver.handle();
        tcp.serve(handle.clone()).map_err(NetError::Thread)?;
        Ok((
            Group {
                id,
                handle,
                raft_addr,
                stats,
                lane,
                lane_control,
                driver: Mutex::new(Some(driver)),
                tcp: Mutex::new(Box::new(tcp)),
                session: Mutex::new(None),
            },
            report,
        ))
    }

    /// Runs the controller session `session` on its own thread until
    /// [`Group::shutdown`]: the member's trees follow its role (the leader
    /// as this member sees it), and X-FD's threshold Λ in the lane link
    /// follows the granted latency bounds. `event` hears what the session
    /// did. Lane mode only (no lane link: an error).
    pub fn follow_controller(
        &self,
        session: Session,
        mut event: Box<dyn FnMut(SessionEvent) + Send>,
    ) -> std::io::Result<()> {
        let Some(control) = self.lane_control.clone() else {
            return Err(std::io::Error::other(
                "a controller session needs the lane transport",
            ));
        };
        let handle = self.handle.clone();
        let stop = Arc::new(AtomicBool::new(false));
        let thread_stop = stop.clone();
        let join = std::thread::Builder::new()
            .name("raft-ctl-session".into())
            .spawn(move || {
                let leader = || handle.leader_id();
                session.run(&control, &leader, &mut *event, &thread_stop)
            })?;
        if let Ok(mut s) = self.session.lock() {
            *s = Some(SessionThread { stop, join });
        }
        Ok(())
    }

    /// This member's raft id.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The bound raft address (UDP and TCP).
    pub fn raft_addr(&self) -> SocketAddr {
        self.raft_addr
    }

    /// The network's counters.
    pub fn stats(&self) -> &TransportStats {
        &self.stats
    }

    /// The lane link's counters (lane mode only).
    pub fn lane_stats(&self) -> Option<&LaneStats> {
        self.lane.as_deref()
    }

    /// The lane link's settings other threads may change (lane mode only).
    pub fn lane_control(&self) -> Option<&LaneControl> {
        self.lane_control.as_deref()
    }

    /// The driver handle: proposals, read barriers, the leader.
    pub fn handle(&self) -> &DriverHandle {
        &self.handle
    }

    /// The leader as this member last saw it (0: none known).
    pub fn leader_id(&self) -> u64 {
        self.handle.leader_id()
    }

    /// Whether the driver still runs (false after [`Group::shutdown`] or a
    /// raft log write failure).
    pub fn running(&self) -> bool {
        self.driver
            .lock()
            .is_ok_and(|d| d.as_ref().is_some_and(Driver::is_running))
    }

    /// Stops the controller session (giving the member's trees back to
    /// the controller), the driver and the network's threads, and waits for
    /// them. Returns how many trees the controller confirmed released, if a
    /// session ran; later calls do nothing and return `None`.
    pub fn shutdown(&self) -> Option<usize> {
        let session = self.session.lock().ok().and_then(|mut s| s.take());
        let released = session.and_then(|s| {
            s.stop.store(true, Ordering::Relaxed);
            s.join.join().ok().map(|session| session.release().run())
        });
        if let Some(d) = self.driver.lock().ok().and_then(|mut d| d.take()) {
            d.stop();
        }
        if let Ok(mut t) = self.tcp.lock() {
            t.shutdown();
        }
        released
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// The network, following a [`MemberTable`] when one is given: before each
/// send and poll (on the driver thread), if the table changed since it last
/// looked, the transport's peers become the table's members.
struct Follow {
    net: NetTransport,
    members: Option<Box<dyn MemberTable>>,
    seen: u64,
}

impl Follow {
    fn follow(&mut self) {
        let Some(m) = &self.members else {
            return;
        };
        let v = m.version();
        if v == self.seen {
            return;
        }
        self.seen = v;
        // A member the network cannot reach is counted by it
        // (`TransportStats::peer_errors`) and left out; raft sees it as down.
        let _ = self.net.set_peers(&m.raft_addrs());
    }
}

impl Transport for Follow {
    fn send(&mut self, to: u64, class: TrafficClass, bytes: Vec<u8>) {
        self.follow();
        self.net.send(to, class, bytes)
    }

    fn flush(&mut self) {
        self.net.flush()
    }

    fn fds(&self) -> &[RawFd] {
        self.net.fds()
    }

    fn next_deadline(&self) -> u64 {
        self.net.next_deadline()
    }

    fn poll(
        &mut self,
        now: u64,
        max: usize,
        ready: Readiness,
        input: &mut dyn FnMut(Input<'_>),
    ) -> usize {
        self.follow();
        self.net.poll(now, max, ready, input)
    }
}
