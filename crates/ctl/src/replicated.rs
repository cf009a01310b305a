//! The controller as a replicated state machine: what a replicated log
//! (e.g. X-Raft, in `xlane-ctl-replica`) carries, and how every replica
//! applies it.
//!
//! # Commands, not records
//!
//! The log carries [`Command`]s: a host's request as the serving replica
//! received it (with the host it authenticated as and the serving replica's
//! clock), a tick (the clock and the fabric's meters), and the secret
//! tunnel keys derive from. Every replica applies every committed command
//! to its own [`Controller`] in log order. The core is deterministic (time
//! is passed in, the allocator breaks ties by id), so every replica holds
//! the same state, and the serving replica's reply is the one its own
//! apply returns: nothing is answered before it is committed.
//!
//! The clock a command carries is the serving replica's wall clock; the
//! state keeps the largest applied so far, so time never runs backwards
//! across a takeover.
//!
//! # Effects
//!
//! What a command asks of the world besides its reply, upcalls to hosts
//! and fabric operations, is queued by every replica
//! ([`ReplicatedState::take_effects`]). The serving replica delivers its
//! queue; the others drop theirs. A replica that starts serving reprograms
//! the whole fabric ([`Controller::resync`]) and hosts reconcile
//! (`ReconcileHost`) when they reconnect, so effects of commands applied
//! while no replica was serving are not lost.
//!
//! # Snapshots
//!
//! [`ReplicatedState::snapshot`] is the core's compaction records
//! ([`Controller::compaction_records`], the journal's snapshot format),
//! the key secret and the clock; [`ReplicatedState::restore`] replays them
//! ([`Controller::recover`]).

use crate::core::{Controller, Outcome, Policy, Principal};
use crate::fabric::{FabricOp, SwitchMeter};
use crate::proto::{
    ClientMsg, EncodeError, Message, ProtoError, Reader, RefusalCode, ServerMsg, TunnelId, Upcall,
    Writer, MAX_FRAME, MAX_NAME,
};
use crate::store::Record;
use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};
use xlane_auth::KEY_LEN;
use xlane_te::{TeConfig, Topology};

/// How many answers to [`ClientMsg::Tagged`] requests, and how many
/// upcalls, the state keeps per host: a retry of one of them gets its
/// first answer; a host that subscribes again after a takeover is sent
/// the upcalls it has not seen.
pub const REMEMBERED_PER_HOST: usize = 128;

/// The most meter readings one tick carries.
pub const MAX_TICK_METERS: usize = 65_535;

/// The most upcalls and fabric operations queued for delivery; beyond it
/// the oldest are dropped and counted ([`ReplicatedState::dropped_effects`]).
pub const MAX_QUEUED_EFFECTS: usize = 1 << 20;

const TAG_REQUEST: u8 = 1;
const TAG_TICK: u8 = 2;
const TAG_SECRET: u8 = 3;
const SNAPSHOT_MAGIC: &[u8; 4] = b"XCS1";

/// One entry of the replicated log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// A host's request.
    Request {
        /// The host the connection authenticated as.
        host: String,
        /// The serving replica's clock, ns since the Unix epoch.
        now_ns: u64,
        /// The request.
        msg: ClientMsg,
    },
    /// Grace deadlines and the fabric's meters.
    Tick {
        /// The serving replica's clock, ns since the Unix epoch.
        now_ns: u64,
        /// The switches' meters read since the last tick.
        meters: Vec<SwitchMeter>,
    },
    /// The secret tunnel keys are derived from (proposed once, by the
    /// first replica to serve).
    KeySecret([u8; KEY_LEN]),
}

impl Command {
    /// The command as log bytes.
    pub fn encode(&self) -> Result<Vec<u8>, EncodeError> {
        let mut out = Vec::new();
        let mut w = Writer { out: &mut out };
        match self {
            Command::Request { host, now_ns, msg } => {
                w.u8(TAG_REQUEST);
                w.str("host", host, MAX_NAME)?;
                w.u64(*now_ns);
                msg.encode(w.out)?;
            }
            Command::Tick { now_ns, meters } => {
                w.u8(TAG_TICK);
                w.u64(*now_ns);
                w.count("meters", meters.len(), MAX_TICK_METERS)?;
                for m in meters {
                    w.u64(m.tunnel.0);
                    w.u64(m.packets);
                    w.u64(m.bytes);
                    w.u64(m.dropped_packets);
                    w.u64(m.interval_ns);
                }
            }
            Command::KeySecret(k) => {
                w.u8(TAG_SECRET);
                w.out.extend_from_slice(k);
            }
        }
        Ok(out)
    }

    /// Parse log bytes (all of them).
    pub fn decode(buf: &[u8]) -> Result<Command, ProtoError> {
        let mut r = Reader::new(buf);
        let cmd = match r.u8()? {
            TAG_REQUEST => {
                let host = r.str("host", MAX_NAME)?;
                let now_ns = r.u64()?;
                let rest = r.rest();
                if rest.len() > MAX_FRAME + crate::proto::HEADER_LEN {
                    return Err(ProtoError::TooLong {
                        len: rest.len(),
                        max: MAX_FRAME,
                    });
                }
                let (msg, used) = ClientMsg::decode(rest)?;
                if used != rest.len() {
                    return Err(ProtoError::TrailingBytes(rest.len() - used));
                }
                return Ok(Command::Request { host, now_ns, msg });
            }
            TAG_TICK => {
                let now_ns = r.u64()?;
                let n = r.count("meters", MAX_TICK_METERS)?;
                let mut meters = Vec::with_capacity(n.min(1024));
                for _ in 0..n {
                    meters.push(SwitchMeter {
                        tunnel: TunnelId(r.u64()?),
                        packets: r.u64()?,
                        bytes: r.u64()?,
                        dropped_packets: r.u64()?,
                        interval_ns: r.u64()?,
                    });
                }
                Command::Tick { now_ns, meters }
            }
            TAG_SECRET => Command::KeySecret(secret(&mut r)?),
            _ => return Err(ProtoError::FieldOutOfRange { field: "command" }),
        };
        r.finish()?;
        Ok(cmd)
    }
}

/// Why a snapshot could not be restored.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    /// The bytes are not a snapshot.
    #[error("not a controller snapshot: {0}")]
    Format(#[from] ProtoError),
    /// The records do not replay.
    #[error("snapshot does not replay: {0}")]
    Replay(#[from] crate::core::ReplayError),
}

/// What applied commands ask of the world besides their replies.
#[derive(Debug, Default)]
pub struct Effects {
    /// Upcalls, each to the owning host with its number, in order.
    pub upcalls: Vec<(String, u64, Upcall)>,
    /// Fabric operations, in order.
    pub fabric: Vec<FabricOp>,
}

/// What a snapshot holds: the secret, the clock, the core, the answers,
/// the upcalls.
type Restored = (
    Option<[u8; KEY_LEN]>,
    u64,
    Controller,
    BTreeMap<String, BTreeMap<u64, Vec<u8>>>,
    BTreeMap<String, Sent>,
);

struct Inner {
    core: Controller,
    secret: Option<[u8; KEY_LEN]>,
    now_ns: u64,
    applied: u64,
    effects: Effects,
    dropped: u64,
    broken: Option<String>,
    /// Per host: the answers to its last tagged requests, by request id.
    answered: BTreeMap<String, BTreeMap<u64, Vec<u8>>>,
    /// Per host: its upcalls' highest number, and its last ones as frames.
    sent: BTreeMap<String, Sent>,
}

/// A host's numbered upcalls.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Sent {
    seq: u64,
    last: std::collections::VecDeque<(u64, Vec<u8>)>,
}

/// The replicated controller state (see the module docs). Shared between
/// the log's apply thread and the daemon's threads.
pub struct ReplicatedState {
    topo: Topology,
    te: TeConfig,
    policy: Policy,
    inner: Mutex<Inner>,
}

impl std::fmt::Debug for ReplicatedState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReplicatedState").finish_non_exhaustive()
    }
}

fn lock(m: &Mutex<Inner>) -> MutexGuard<'_, Inner> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl ReplicatedState {
    /// An empty state over `topo`.
    pub fn new(topo: Topology, te: TeConfig, policy: Policy) -> ReplicatedState {
        let core = Controller::new(topo.clone(), te.clone(), policy.clone());
        ReplicatedState {
            topo,
            te,
            policy,
            inner: Mutex::new(Inner {
                core,
                secret: None,
                now_ns: 0,
                applied: 0,
                effects: Effects::default(),
                dropped: 0,
                broken: None,
                answered: BTreeMap::new(),
                sent: BTreeMap::new(),
            }),
        }
    }

    /// Applies the committed command at log `index`; returns the reply's
    /// frame (empty for commands without one). A command that does not
    /// decode is skipped alike on every replica and answered `Malformed`.
    pub fn apply(&self, index: u64, op: &[u8]) -> Vec<u8> {
        let mut g = lock(&self.inner);
        g.applied = g.applied.max(index);
        if let Some(why) = &g.broken {
            return frame(&ServerMsg::Refused {
                code: RefusalCode::Internal,
                message: format!("the controller state is broken: {why}"),
            });
        }
        let cmd = match Command::decode(op) {
            Ok(c) => c,
            Err(e) => {
                return frame(&ServerMsg::Refused {
                    code: RefusalCode::Malformed,
                    message: format!("log entry {index} does not decode: {e}"),
                })
            }
        };
        let out = match cmd {
            Command::Request {
                host,
                now_ns,
                msg: ClientMsg::Tagged { request_id, msg },
            } => {
                g.now_ns = g.now_ns.max(now_ns);
                let now = g.now_ns;
                let seen = g.answered.get(&host);
                if let Some(first) = seen.and_then(|m| m.get(&request_id)) {
                    return first.clone();
                }
                if seen.is_some_and(|m| {
                    m.len() >= REMEMBERED_PER_HOST
                        && m.first_key_value().is_some_and(|(&k, _)| request_id < k)
                }) {
                    return frame(&ServerMsg::Refused {
                        code: RefusalCode::OutOfRange,
                        message: format!(
                            "request id {request_id} is older than the last \
                             {REMEMBERED_PER_HOST} this host tagged: whether it was applied is \
                             not known here (list the tunnels)"
                        ),
                    });
                }
                let out = g.core.handle(&Principal::Host(host.clone()), &msg, now);
                let reply = out.reply.as_ref().map(frame).unwrap_or_default();
                let m = g.answered.entry(host).or_default();
                m.insert(request_id, reply);
                while m.len() > REMEMBERED_PER_HOST {
                    m.pop_first();
                }
                out
            }
            Command::Request { host, now_ns, msg } => {
                g.now_ns = g.now_ns.max(now_ns);
                let now = g.now_ns;
                g.core.handle(&Principal::Host(host), &msg, now)
            }
            Command::Tick { now_ns, meters } => {
                g.now_ns = g.now_ns.max(now_ns);
                let now = g.now_ns;
                let mut out = g.core.tick(now);
                if !meters.is_empty() {
                    let more = g.core.on_switch_meters(&meters, now);
                    out.upcalls.extend(more.upcalls);
                    out.fabric.extend(more.fabric);
                }
                out
            }
            Command::KeySecret(k) => {
                // The first secret stays: a second proposal (two replicas
                // that both saw none) must not change every key.
                if g.secret.is_none() {
                    g.secret = Some(k);
                    g.core.set_key_secret(xlane_auth::Key::from_bytes(k));
                }
                Outcome::default()
            }
        };
        let Outcome {
            reply,
            upcalls,
            fabric,
            ..
        } = out;
        let queued = g.effects.upcalls.len() + g.effects.fabric.len();
        if queued + upcalls.len() + fabric.len() > MAX_QUEUED_EFFECTS {
            g.dropped += queued as u64;
            g.effects = Effects::default();
        }
        for (host, up) in upcalls {
            let s = g.sent.entry(host.clone()).or_default();
            s.seq += 1;
            let seq = s.seq;
            s.last.push_back((
                seq,
                frame(&ServerMsg::Upcall {
                    seq,
                    upcall: up.clone(),
                }),
            ));
            while s.last.len() > REMEMBERED_PER_HOST {
                s.last.pop_front();
            }
            g.effects.upcalls.push((host, seq, up));
        }
        g.effects.fabric.extend(fabric);
        reply.map(|r| frame(&r)).unwrap_or_default()
    }

    /// Takes the queued upcalls and fabric operations.
    pub fn take_effects(&self) -> Effects {
        std::mem::take(&mut lock(&self.inner).effects)
    }

    /// Effects dropped because nobody took them ([`MAX_QUEUED_EFFECTS`]).
    pub fn dropped_effects(&self) -> u64 {
        lock(&self.inner).dropped
    }

    /// `host`'s upcalls numbered above `after` that are still held, as
    /// frames in order, and its highest number.
    pub fn upcalls_after(&self, host: &str, after: u64) -> (Vec<Vec<u8>>, u64) {
        let g = lock(&self.inner);
        match g.sent.get(host) {
            None => (Vec::new(), 0),
            Some(s) => (
                s.last
                    .iter()
                    .filter(|(n, _)| after > 0 && *n > after)
                    .map(|(_, f)| f.clone())
                    .collect(),
                s.seq,
            ),
        }
    }

    /// Whether the key secret has been set.
    pub fn has_key_secret(&self) -> bool {
        lock(&self.inner).secret.is_some()
    }

    /// The last applied log index.
    pub fn applied(&self) -> u64 {
        lock(&self.inner).applied
    }

    /// Runs `f` on the core (read-only).
    pub fn with_controller<R>(&self, f: impl FnOnce(&Controller) -> R) -> R {
        f(&lock(&self.inner).core)
    }

    /// The whole state as bytes (see the module docs).
    pub fn snapshot(&self) -> Vec<u8> {
        let g = lock(&self.inner);
        let mut out = Vec::new();
        out.extend_from_slice(SNAPSHOT_MAGIC);
        let mut w = Writer { out: &mut out };
        match &g.secret {
            Some(k) => {
                w.u8(1);
                w.out.extend_from_slice(k);
            }
            None => w.u8(0),
        }
        w.u64(g.now_ns);
        let records = match g.core.compaction_records() {
            Ok(r) => r,
            Err(e) => {
                // Only a state that cannot be compacted (a tunnel without
                // a tree) ends here; the log is kept whole meanwhile.
                tracing::error!("controller snapshot: {e}");
                Vec::new()
            }
        };
        let encoded: Vec<Vec<u8>> = records.iter().filter_map(|r| r.encode().ok()).collect();
        w.u32(encoded.len() as u32);
        for e in &encoded {
            w.u32(e.len() as u32);
            w.out.extend_from_slice(e);
        }
        w.u32(g.answered.len() as u32);
        for (host, m) in &g.answered {
            // Host names were checked when the requests decoded.
            let _ = w.str("host", host, MAX_NAME);
            w.u32(m.len() as u32);
            for (id, reply) in m {
                w.u64(*id);
                w.u32(reply.len() as u32);
                w.out.extend_from_slice(reply);
            }
        }
        w.u32(g.sent.len() as u32);
        for (host, sent) in &g.sent {
            let _ = w.str("host", host, MAX_NAME);
            w.u64(sent.seq);
            w.u32(sent.last.len() as u32);
            for (n, f) in &sent.last {
                w.u64(*n);
                w.u32(f.len() as u32);
                w.out.extend_from_slice(f);
            }
        }
        out
    }

    /// Replaces the state with a [`ReplicatedState::snapshot`]. On error
    /// the replica marks its state broken and answers every request
    /// `Internal` rather than serve a state the others do not hold.
    pub fn restore(&self, data: &[u8]) -> Result<(), SnapshotError> {
        let r = self.decode_snapshot(data);
        let mut g = lock(&self.inner);
        match r {
            Ok((secret, now_ns, core, answered, sent)) => {
                g.core = core;
                g.answered = answered;
                g.sent = sent;
                g.secret = secret;
                g.now_ns = now_ns;
                g.broken = None;
                g.effects = Effects::default();
                Ok(())
            }
            Err(e) => {
                g.broken = Some(e.to_string());
                Err(e)
            }
        }
    }

    fn decode_snapshot(&self, data: &[u8]) -> Result<Restored, SnapshotError> {
        if data.is_empty() {
            // Raft's initial (empty) snapshot.
            let core = Controller::new(self.topo.clone(), self.te.clone(), self.policy.clone());
            return Ok((None, 0, core, BTreeMap::new(), BTreeMap::new()));
        }
        let body = data
            .strip_prefix(SNAPSHOT_MAGIC)
            .ok_or(ProtoError::FieldOutOfRange { field: "magic" })?;
        let mut r = Reader::new(body);
        let secret = match r.u8()? {
            0 => None,
            1 => Some(secret(&mut r)?),
            _ => return Err(ProtoError::FieldOutOfRange { field: "secret" }.into()),
        };
        let now_ns = r.u64()?;
        let n = r.u32()? as usize;
        let mut records = Vec::with_capacity(n.min(1 << 16));
        for _ in 0..n {
            let len = r.u32()? as usize;
            records.push(Record::decode(r.take_bytes(len)?)?);
        }
        let mut answered: BTreeMap<String, BTreeMap<u64, Vec<u8>>> = BTreeMap::new();
        for _ in 0..r.u32()? {
            let host = r.str("host", MAX_NAME)?;
            let n = r.u32()? as usize;
            if n > REMEMBERED_PER_HOST {
                return Err(ProtoError::FieldOutOfRange { field: "answers" }.into());
            }
            let m = answered.entry(host).or_default();
            for _ in 0..n {
                let id = r.u64()?;
                let len = r.u32()? as usize;
                m.insert(id, r.take_bytes(len)?.to_vec());
            }
        }
        let mut sent: BTreeMap<String, Sent> = BTreeMap::new();
        for _ in 0..r.u32()? {
            let host = r.str("host", MAX_NAME)?;
            let s = sent.entry(host).or_default();
            s.seq = r.u64()?;
            let n = r.u32()? as usize;
            if n > REMEMBERED_PER_HOST {
                return Err(ProtoError::FieldOutOfRange { field: "upcalls" }.into());
            }
            for _ in 0..n {
                let seq = r.u64()?;
                let len = r.u32()? as usize;
                s.last.push_back((seq, r.take_bytes(len)?.to_vec()));
            }
        }
        r.finish()?;
        let mut core = Controller::recover(
            self.topo.clone(),
            self.te.clone(),
            self.policy.clone(),
            &records,
        )?;
        if let Some(k) = secret {
            core.set_key_secret(xlane_auth::Key::from_bytes(k));
        }
        Ok((secret, now_ns, core, answered, sent))
    }
}

fn secret(r: &mut Reader<'_>) -> Result<[u8; KEY_LEN], ProtoError> {
    let mut k = [0u8; KEY_LEN];
    k.copy_from_slice(r.take_bytes(KEY_LEN)?);
    Ok(k)
}

fn frame(msg: &ServerMsg) -> Vec<u8> {
    msg.frame_or_refusal()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::TunnelState;

    fn star() -> Topology {
        let p = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../te/tests/data/testbed_star4.toml"
        );
        Topology::from_file(p.as_ref()).expect("fixture topology")
    }

    fn state() -> ReplicatedState {
        ReplicatedState::new(star(), TeConfig::default(), Policy::default())
    }

    fn request(host: &str, to: &[&str], now_ns: u64) -> Command {
        Command::Request {
            host: host.into(),
            now_ns,
            msg: ClientMsg::RequestBandwidth {
                sender: host.into(),
                receivers: to.iter().map(|s| s.to_string()).collect(),
                load_bytes: 100,
                period_ns: 100_000,
                sublane: 0,
            },
        }
    }

    fn commands() -> Vec<Command> {
        vec![
            Command::KeySecret([7; KEY_LEN]),
            request("h0", &["h1"], 1_000),
            request("h1", &["h0", "h2"], 2_000),
            request("h2", &["h0"], 3_000),
            Command::Tick {
                now_ns: 4_000,
                meters: vec![SwitchMeter {
                    tunnel: TunnelId(1),
                    packets: 10,
                    bytes: 1000,
                    dropped_packets: 0,
                    interval_ns: 1_000_000,
                }],
            },
            Command::Request {
                host: "h0".into(),
                now_ns: 5_000,
                msg: ClientMsg::ReleaseBandwidth {
                    tunnel: TunnelId(1),
                },
            },
            // A clock behind the state's: time does not run backwards.
            request("h0", &["h2"], 10),
        ]
    }

    #[test]
    fn commands_round_trip() {
        for c in commands() {
            let b = c.encode().unwrap();
            assert_eq!(Command::decode(&b).unwrap(), c);
            for cut in 0..b.len() {
                assert!(Command::decode(&b[..cut]).is_err(), "{c:?} cut at {cut}");
            }
            let mut long = b.clone();
            long.push(0);
            assert!(Command::decode(&long).is_err());
        }
        assert!(Command::decode(&[9]).is_err());
    }

    /// Replicas applying the same log hold the same state and give the
    /// same replies; a snapshot restores it on a fresh replica.
    #[test]
    fn replicas_agree_and_snapshots_restore() {
        let a = state();
        let b = state();
        let mut replies = Vec::new();
        for (i, c) in commands().iter().enumerate() {
            let op = c.encode().unwrap();
            let ra = a.apply(i as u64 + 1, &op);
            let rb = b.apply(i as u64 + 1, &op);
            assert_eq!(ra, rb, "entry {i}");
            replies.push(ra);
        }
        // Three grants, one release: the third request's reply is a grant.
        let (last, _) = ServerMsg::decode(replies.last().unwrap()).unwrap();
        assert!(matches!(last, ServerMsg::Granted { .. }), "{last:?}");
        a.with_controller(|ca| b.with_controller(|cb| ca.same_state(cb)))
            .unwrap();
        let tunnels = a.with_controller(|c| c.tunnels());
        assert_eq!(tunnels.len(), 3);
        assert!(tunnels.iter().all(|t| t.state == TunnelState::Active));
        // Upcalls and fabric operations were queued, once.
        let fx = a.take_effects();
        assert!(!fx.fabric.is_empty());
        assert!(a.take_effects().fabric.is_empty());

        let c = state();
        c.restore(&a.snapshot()).unwrap();
        a.with_controller(|ca| c.with_controller(|cc| ca.same_state(cc)))
            .unwrap();
        assert!(c.has_key_secret());
        // The upcalls' numbers and the last ones travel in the snapshot.
        let mut numbered = 0;
        for h in ["h0", "h1", "h2", "h3"] {
            assert_eq!(a.upcalls_after(h, 1), c.upcalls_after(h, 1), "{h}");
            numbered += a.upcalls_after(h, 1).1;
        }
        assert!(numbered > 0, "the log made upcalls");
        // The restored replica goes on like the others.
        let op = request("h2", &["h1"], 20_000).encode().unwrap();
        assert_eq!(a.apply(9, &op), c.apply(9, &op));
        a.with_controller(|ca| c.with_controller(|cc| ca.same_state(cc)))
            .unwrap();
    }

    fn tagged(id: u64, to: &str) -> Vec<u8> {
        let Command::Request { host, now_ns, msg } = request("h0", &[to], 1_000) else {
            unreachable!()
        };
        Command::Request {
            host,
            now_ns,
            msg: ClientMsg::Tagged {
                request_id: id,
                msg: Box::new(msg),
            },
        }
        .encode()
        .unwrap()
    }

    /// A tagged request is applied once: its retry (here and on a replica
    /// restored from a snapshot) gets the first answer; ids too old to
    /// tell are refused.
    #[test]
    fn tagged_requests_apply_at_most_once() {
        let a = state();
        let first = a.apply(1, &tagged(7, "h1"));
        assert!(matches!(
            ServerMsg::decode(&first).unwrap().0,
            ServerMsg::Granted { .. }
        ));
        assert_eq!(a.apply(2, &tagged(7, "h1")), first);
        assert_eq!(a.with_controller(|c| c.tunnels()).len(), 1);
        let b = state();
        b.restore(&a.snapshot()).unwrap();
        assert_eq!(b.apply(3, &tagged(7, "h1")), first);
        assert_eq!(b.with_controller(|c| c.tunnels()).len(), 1);
        // Another id is another request.
        let other = a.apply(3, &tagged(8, "h2"));
        assert_ne!(other, first);
        assert_eq!(a.with_controller(|c| c.tunnels()).len(), 2);
        // Once the table is full, an id below every remembered one is
        // refused rather than applied again.
        for id in 100..100 + REMEMBERED_PER_HOST as u64 {
            a.apply(id, &tagged(id, "h3"));
        }
        let n = a.with_controller(|c| c.tunnels()).len();
        let (old, _) = ServerMsg::decode(&a.apply(999, &tagged(7, "h1"))).unwrap();
        assert!(
            matches!(
                old,
                ServerMsg::Refused {
                    code: RefusalCode::OutOfRange,
                    ..
                }
            ),
            "{old:?}"
        );
        assert_eq!(a.with_controller(|c| c.tunnels()).len(), n);
    }

    #[test]
    fn bad_entries_and_snapshots_are_refused_not_applied() {
        let a = state();
        let (reply, _) = ServerMsg::decode(&a.apply(1, &[0xff, 1, 2])).unwrap();
        assert!(matches!(
            reply,
            ServerMsg::Refused {
                code: RefusalCode::Malformed,
                ..
            }
        ));
        assert!(a.with_controller(|c| c.tunnels()).is_empty());
        let mut snap = a.snapshot();
        snap.truncate(snap.len() - 1);
        assert!(a.restore(&snap).is_err());
        let (reply, _) =
            ServerMsg::decode(&a.apply(2, &request("h0", &["h1"], 1).encode().unwrap())).unwrap();
        assert!(matches!(
            reply,
            ServerMsg::Refused {
                code: RefusalCode::Internal,
                ..
            }
        ));
        // A good snapshot mends it.
        a.restore(&state().snapshot()).unwrap();
        let (reply, _) =
            ServerMsg::decode(&a.apply(3, &request("h0", &["h1"], 1).encode().unwrap())).unwrap();
        assert!(matches!(reply, ServerMsg::Granted { .. }), "{reply:?}");
    }
}
