//! Test support (feature `testing`): three controller replicas in one
//! process, and a host that connects to whichever replica serves.
//!
//! [`Group::start`] runs three replicas on 127.0.0.1 (ports from
//! `xlane-testports`, which no other test takes meanwhile) on
//! [`TOPOLOGY`], with a key for each of its hosts, no fabric and a 20 ms
//! tick; their raft logs live in a temporary directory that lasts as long
//! as the [`Group`]. [`connect`] is the host side and also serves tests
//! whose replicas are processes of their own.
//!
//! Every wait here is bounded and panics when its bound passes, with what
//! it waited for: a bound against hanging, never a measurement.
//!
//! ```no_run
//! use std::time::Duration;
//! use xlane_ctl_replica::testing::{connect, Group};
//!
//! let mut g = Group::start();
//! let serving = g.wait_serving(Duration::from_secs(20));
//! let mut c = connect(&g.addrs, "h0", &g.keys, Duration::from_secs(20));
//! c.request(&["h1".to_string()], 64, 1_000_000, 0).unwrap();
//! // The serving replica goes away; another one takes over.
//! g.rs[serving].take().unwrap().stop();
//! let next = g.wait_serving(Duration::from_secs(20));
//! assert_ne!(next, serving);
//! ```

use crate::{ControllerReplica, ReplicaAddrs, ReplicaConfig};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};
use xlane_ctl::auth::Keys;
use xlane_ctl::client::Client;
use xlane_ctl::te::{gen, TeConfig, Topology};
use xlane_ctl::{NoFabric, Policy};

/// The replicas' topology: 16 hosts, `h0`..`h15` (`h0`..`h3` share pod 0).
pub const TOPOLOGY: &str = "fat-tree:4";

/// How many replicas a [`Group`] runs (ids 1 to 3).
pub const REPLICAS: u64 = 3;

/// A replica's tick: ends grace periods and reads meters.
pub const TICK: Duration = Duration::from_millis(20);

/// Between two passes through the replicas in [`connect`].
const RETRY: Duration = Duration::from_millis(20);

/// [`TOPOLOGY`].
pub fn topology() -> Topology {
    gen::from_spec(TOPOLOGY).expect("the test topology")
}

/// The host names of `t`.
pub fn hosts(t: &Topology) -> Vec<String> {
    t.hosts().map(|h| t.node(h).name.clone()).collect()
}

/// Starts replica `id` of `peers` on [`topology`], its raft log in
/// `dir/r{id}` (a restart finds it there), ticking every `tick`, with no
/// fabric. Panics if it does not start.
pub fn start(
    id: u64,
    peers: &BTreeMap<u64, ReplicaAddrs>,
    dir: &Path,
    keys: &Keys,
    tick: Duration,
) -> ControllerReplica {
    let mut cfg = ReplicaConfig::new(id, peers.clone(), dir.join(format!("r{id}")))
        .unwrap_or_else(|e| panic!("replica {id}: {e}"));
    cfg.server.tick_interval = tick;
    ControllerReplica::start(
        cfg,
        topology(),
        TeConfig::default(),
        Policy::default(),
        keys.clone(),
        Box::new(NoFabric),
    )
    .unwrap_or_else(|e| panic!("replica {id} does not start: {e}"))
}

/// The index in `rs` of a running replica that serves, as soon as one
/// does; panics after `limit`.
pub fn wait_serving(rs: &[Option<ControllerReplica>], limit: Duration) -> usize {
    let t0 = Instant::now();
    loop {
        if let Some(i) = rs
            .iter()
            .position(|r| r.as_ref().is_some_and(|r| r.serves()))
        {
            return i;
        }
        assert!(t0.elapsed() < limit, "no replica serves after {limit:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Connects as `host` (its key from `keys`) to whichever of `addrs`
/// serves ([`Client::connect_any`]), going through them again every
/// 20 ms while none does (an election, replicas still starting); panics
/// with the last error after `patience`. The client's calls wait its
/// default 10 s.
pub fn connect(addrs: &[SocketAddr], host: &str, keys: &Keys, patience: Duration) -> Client {
    let key = keys
        .get(host)
        .unwrap_or_else(|| panic!("no key for {host}"));
    let t0 = Instant::now();
    loop {
        match Client::connect_any(addrs, host, key) {
            Ok(c) => return c,
            Err(e) => assert!(
                t0.elapsed() < patience,
                "{host}: no serving replica after {patience:?}: {e}"
            ),
        }
        std::thread::sleep(RETRY);
    }
}

/// Three replicas on 127.0.0.1 (see the module docs). Index `i` of
/// `addrs` and `rs` is replica `i + 1`.
pub struct Group {
    /// Holds every replica's raft log (`r1`, `r2`, `r3`).
    pub dir: tempfile::TempDir,
    /// The hosts of [`TOPOLOGY`].
    pub names: Vec<String>,
    /// A key for each host.
    pub keys: Keys,
    /// Every replica's addresses, by id.
    pub peers: BTreeMap<u64, ReplicaAddrs>,
    /// Where hosts connect, by index.
    pub addrs: Vec<SocketAddr>,
    /// The replicas; `None` for one stopped (take it out to stop it).
    pub rs: Vec<Option<ControllerReplica>>,
    /// The replicas' tick ([`TICK`] unless [`Group::start_ticking`]).
    pub tick: Duration,
}

impl Group {
    /// Picks the addresses, makes the keys and starts the three replicas
    /// (one of them serves once they have elected: [`Group::wait_serving`]).
    pub fn start() -> Group {
        Group::start_ticking(TICK)
    }

    /// [`Group::start`] with replicas that tick every `tick`: a long one
    /// leaves everything to the requests (a replica that took the lead
    /// serves before its tick has seen it).
    pub fn start_ticking(tick: Duration) -> Group {
        let mut g = Group::unstarted();
        g.tick = tick;
        for i in 0..g.rs.len() {
            g.start_replica(i);
        }
        g
    }

    /// Picks the addresses and makes the keys, and starts no replica
    /// ([`Group::start_replica`]): hosts given `addrs` find nothing there
    /// yet.
    pub fn unstarted() -> Group {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let names = hosts(&topology());
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        let keys = Keys::generate(&refs).expect("host keys");
        let peers: BTreeMap<u64, ReplicaAddrs> = (1..=REPLICAS)
            .map(|i| {
                let a = ReplicaAddrs {
                    raft: xlane_testports::raft(),
                    client: xlane_testports::tcp(),
                };
                (i, a)
            })
            .collect();
        let addrs = peers.values().map(|p| p.client).collect();
        let rs = (1..=REPLICAS).map(|_| None).collect();
        Group {
            dir,
            names,
            keys,
            peers,
            addrs,
            rs,
            tick: TICK,
        }
    }

    /// [`wait_serving`] over this group's replicas.
    pub fn wait_serving(&self, limit: Duration) -> usize {
        wait_serving(&self.rs, limit)
    }

    /// Starts replica `i + 1`, which does not run: afresh, or after a stop
    /// from its raft log.
    pub fn start_replica(&mut self, i: usize) {
        assert!(self.rs[i].is_none(), "replica {} still runs", i + 1);
        self.rs[i] = Some(start(
            i as u64 + 1,
            &self.peers,
            self.dir.path(),
            &self.keys,
            self.tick,
        ));
    }
}
