//! `xlane kv txn-shard`: a shard's 1Pipe receiver and its applier, on two
//! threads. The receiver thread keeps the 1Pipe endpoint turning
//! (acknowledgements, beacons, delivery at the commit barrier) so that a
//! slow shard never silences the link; the applier thread runs what it
//! delivered, in order, and answers the proxies.

use super::applier::{Applier, ApplierStats};
use super::msg::{ShardReply, SubTxn};
use crate::resp::Reply;
use std::collections::HashMap;
use std::io;
use std::net::{SocketAddr, SocketAddrV4, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::Duration;
use xlane_auth::KeyRing;
use xlane_pipe::seal::{self, PipeSeal};
use xlane_pipe::udp::{Clock, UdpEndpoint};
use xlane_pipe::{ReceiverConfig, SenderConfig};

/// Settings of a shard's applier daemon.
#[derive(Debug, Clone)]
pub struct ShardConfig {
    /// The shard's index (its 1Pipe id is `shard + 1`).
    pub shard: u32,
    /// The 1Pipe endpoint's address.
    pub pipe: SocketAddrV4,
    /// The hop (`xlane pipe switchd`) it sends through.
    pub hop: SocketAddrV4,
    /// Every proxy's 1Pipe id and address (where ACKs go).
    pub proxies: HashMap<u32, SocketAddrV4>,
    /// The shard's members (RESP addresses).
    pub members: Vec<SocketAddr>,
    /// The 1Pipe beacon interval.
    pub beacon: Duration,
    /// One round trip to a member at most, before the applier looks for
    /// another.
    pub timeout: Duration,
    /// The 1Pipe recovery coordinators it obeys.
    pub coordinators: Vec<SocketAddrV4>,
    /// The clock the deployment stamps with.
    pub clock: Clock,
    /// The bound on clock skew between hosts: parts are run only once
    /// this host's clock passes their timestamp plus the bound, so that
    /// the order of transactions follows real time (strict
    /// serializability). `None`: serializable only.
    pub skew: Option<Duration>,
    /// The group key (ring, key id): 1Pipe datagrams and replies sealed,
    /// and those received that do not open dropped ([`xlane_pipe::seal`]).
    pub key: Option<(KeyRing, u32)>,
}

/// What a shard daemon counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ShardStats {
    /// Parts delivered by 1Pipe.
    pub delivered: u64,
    /// Delivered messages that were not a part (refused, counted).
    pub malformed: u64,
    /// Replies that could not be sent.
    pub reply_errors: u64,
    /// 1Pipe datagrams refused by the MAC check (with a key).
    pub unauthenticated: u64,
    /// The applier's counters.
    pub applier: ApplierStats,
}

/// Runs until `stop` (the process's termination flag); `ready` is called
/// once the sockets are bound.
pub fn run(
    cfg: &ShardConfig,
    stop: &'static AtomicBool,
    ready: impl FnOnce(),
) -> io::Result<ShardStats> {
    let mut ep = UdpEndpoint::bind(
        cfg.pipe,
        super::applier_id(cfg.shard),
        cfg.hop,
        cfg.proxies.clone(),
        cfg.beacon.as_nanos() as u64,
        (
            SenderConfig::default(),
            ReceiverConfig {
                skew_ns: cfg.skew.map(|d| d.as_nanos() as u64),
                ..ReceiverConfig::default()
            },
        ),
    )?;
    ep.set_coordinators(cfg.coordinators.clone());
    ep.set_clock(cfg.clock);
    let out = UdpSocket::bind(SocketAddrV4::new(*cfg.pipe.ip(), 0))?;
    let mut seal = None;
    if let Some((ring, id)) = &cfg.key {
        ep.set_key(ring.clone(), *id).map_err(io::Error::other)?;
        seal = Some(PipeSeal::for_socket(ring.clone(), *id, &out).map_err(io::Error::other)?);
    }
    ready();
    let (tx, rx) = mpsc::channel::<(u64, u32, Vec<u8>)>();
    let worker_cfg = cfg.clone();
    let worker = std::thread::Builder::new()
        .name("txn-apply".into())
        .spawn(move || apply_loop(&worker_cfg, &out, seal, rx, stop))?;
    let mut delivered = 0;
    while !stop.load(Ordering::Relaxed) {
        ep.wait(Duration::from_millis(1))?;
        // proc_fail: a proxy failed (its messages above the failure
        // timestamp are discarded, those below delivered: nothing to do
        // here), or this applier was declared failed and must stop.
        while let Some((p, t)) = ep.poll_proc_fail() {
            if p == super::applier_id(cfg.shard) {
                return Err(io::Error::other(format!(
                    "declared failed by the recovery coordinator at {t}"
                )));
            }
        }
        while let Some(d) = ep.poll_deliver() {
            delivered += 1;
            if tx.send((d.ts, d.src, d.payload)).is_err() {
                break;
            }
        }
    }
    drop(tx);
    let mut stats = worker
        .join()
        .map_err(|_| io::Error::other("the applier thread panicked"))?;
    stats.delivered = delivered;
    stats.unauthenticated = ep.stats().unauthenticated;
    Ok(stats)
}

fn apply_loop(
    cfg: &ShardConfig,
    out: &UdpSocket,
    mut seal: Option<PipeSeal>,
    rx: mpsc::Receiver<(u64, u32, Vec<u8>)>,
    stop: &AtomicBool,
) -> ShardStats {
    let mut applier = Applier::new(cfg.shard, cfg.members.clone(), cfg.timeout);
    let mut stats = ShardStats::default();
    let mut buf = Vec::new();
    for (ts, src, payload) in rx {
        let t = match SubTxn::decode(&payload) {
            Ok(t) => t,
            Err(_) => {
                stats.malformed += 1;
                continue;
            }
        };
        let tag = format!("{ts}-{src}");
        let mut reply = applier.apply(&t.cmds, tag.as_bytes(), stop);
        buf.clear();
        let mut r = ShardReply {
            id: t.id,
            shard: cfg.shard,
            reply,
        };
        r.encode(&mut buf);
        if buf.len() > MAX_REPLY {
            reply = Reply::err("ERR applied, but the shard's replies exceed one datagram");
            r.reply = reply;
            buf.clear();
            r.encode(&mut buf);
        }
        if seal::send(out, seal.as_mut(), &buf, t.reply_to).is_err() {
            stats.reply_errors += 1;
        }
    }
    stats.applier = applier.stats();
    stats
}

/// The largest reply datagram (UDP's limit, with room for headers).
pub const MAX_REPLY: usize = 65_000;
