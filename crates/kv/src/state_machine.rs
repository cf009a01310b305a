//! [`KvStateMachine`]: what X-Raft replicates for `xlane kv`: the key
//! space ([`Store`]) and the member table ([`Members`]).
//!
//! Each committed write op is decoded and applied to the store; each
//! committed membership change updates the member table (an added member's
//! addresses come in the change's context). A snapshot holds both, so that a
//! member restored from one knows every member's addresses.
//!
//! Snapshot format, version 2: `XLKVSNP2 | len:u32 LE | member table
//! ([`encode_table`], len bytes) | store snapshot ([`Store::snapshot`])`.
//! Version 1, the store snapshot alone (it starts with `XLKVSNP1`), is still
//! read: the store is restored and the member table left as it was (the
//! members given at start, then the changes applied after the snapshot).

use crate::exec::Apply;
use crate::members::{decode_member, decode_table, encode_table, MemberDecodeError, Members, Peer};
use crate::op::WriteOp;
use crate::replicator::SharedStore;
use crate::resp::Reply;
use crate::store::{SnapshotError, Store};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, PoisonError};
use xlane_xraft::{ConfChangeType, SnapshotJob, StateMachine};

/// Magic of a version 2 snapshot (store and member table).
const SNAP_V2: &[u8; 8] = b"XLKVSNP2";
/// Magic of a version 1 snapshot (the store alone).
const SNAP_V1: &[u8; 8] = b"XLKVSNP1";

/// Why a snapshot could not be restored.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KvSnapshotError {
    /// Neither version's magic.
    #[error("not an xlane kv snapshot")]
    BadHeader,
    /// The member table's length runs past the end.
    #[error("snapshot truncated in its member table")]
    Truncated,
    /// The member table does not decode.
    #[error("snapshot member table: {0}")]
    Members(#[from] MemberDecodeError),
    /// The store does not decode.
    #[error("snapshot store: {0}")]
    Store(#[from] SnapshotError),
}

/// Encodes a version 2 snapshot of `store` and `members`.
pub fn encode_snapshot(store: &Store, members: &Members) -> Vec<u8> {
    encode_snapshot_of(store, &members.table())
}

/// [`encode_snapshot`] of a member table taken earlier.
fn encode_snapshot_of(store: &Store, members: &BTreeMap<u64, Peer>) -> Vec<u8> {
    let table = encode_table(members).unwrap_or_else(|_| {
        // Every address in the table came through `decode_member` or
        // `parse_peer`, both of which only accept what encodes; an empty
        // table keeps the snapshot readable if that ever changes.
        encode_table(&Default::default()).unwrap_or_default()
    });
    let store = store.snapshot();
    let mut out = Vec::with_capacity(12 + table.len() + store.len());
    out.extend_from_slice(SNAP_V2);
    out.extend_from_slice(&(table.len() as u32).to_le_bytes());
    out.extend_from_slice(&table);
    out.extend_from_slice(&store);
    out
}

/// What a snapshot holds: the store, and the member table if it has one
/// (version 2).
pub type Decoded = (
    Store,
    Option<std::collections::BTreeMap<u64, crate::members::Peer>>,
);

/// Decodes a snapshot of either version.
pub fn decode_snapshot(b: &[u8]) -> Result<Decoded, KvSnapshotError> {
    if b.starts_with(SNAP_V1) {
        return Ok((Store::restore(b)?, None));
    }
    let rest = b.strip_prefix(SNAP_V2).ok_or(KvSnapshotError::BadHeader)?;
    let len = rest.get(..4).ok_or(KvSnapshotError::Truncated)?;
    let len = u32::from_le_bytes([len[0], len[1], len[2], len[3]]) as usize;
    let table = rest.get(4..4 + len).ok_or(KvSnapshotError::Truncated)?;
    let table = decode_table(table)?;
    let store = Store::restore(&rest[4 + len..])?;
    Ok((store, Some(table)))
}

/// What the state machine counts (shared with the replicator).
#[derive(Debug, Default)]
pub struct SmStats {
    /// The raft log index of the last write op applied.
    pub applied_index: AtomicU64,
    /// Snapshots that could not be decoded (the store was reset to empty).
    pub restore_errors: AtomicU64,
    /// Added members whose addresses did not decode (the table keeps what
    /// it had for them).
    pub member_errors: AtomicU64,
}

/// The Raft state machine: the key-value [`Store`] behind a lock, and the
/// member table.
pub struct KvStateMachine {
    store: SharedStore,
    members: Members,
    stats: Arc<SmStats>,
}

impl KvStateMachine {
    /// A state machine over `store` and `members`, counting in `stats`.
    pub fn new(store: SharedStore, members: Members, stats: Arc<SmStats>) -> Self {
        KvStateMachine {
            store,
            members,
            stats,
        }
    }
}

impl StateMachine for KvStateMachine {
    fn apply(&mut self, index: u64, op_bytes: &[u8]) -> Vec<u8> {
        self.stats.applied_index.store(index, Ordering::Release);
        let mut resp3 = false;
        let reply = match WriteOp::decode(op_bytes) {
            // Deterministic on every replica: the same bytes give the same error.
            Err(e) => Reply::err(format!("ERR undecodable replicated op: {e}")),
            Ok(op) => match self.store.write() {
                Ok(mut s) => {
                    if s.tracks_changes() {
                        s.set_origin(crate::op::origin(op_bytes));
                    }
                    resp3 = matches!(&op.cmd, crate::op::WriteCmd::Eval { call, .. } if call.resp3);
                    s.apply(&op)
                }
                Err(_) => Reply::err("ERR store lock poisoned"),
            },
        };
        // A script's reply to a RESP3 caller keeps its RESP3 types (the
        // caller's connection reads either form).
        if resp3 {
            let mut out = Vec::new();
            reply.encode_resp3(&mut out);
            return out;
        }
        reply.to_bytes()
    }

    fn snapshot(&self) -> Vec<u8> {
        // A poisoned lock still holds a consistent store (apply does not
        // panic midway in practice); take it anyway.
        let s = self.store.read().unwrap_or_else(PoisonError::into_inner);
        encode_snapshot(&s, &self.members)
    }

    fn snapshot_job(&self) -> SnapshotJob {
        // O(1): the frozen store shares its maps with the live one, which
        // copies what a later write changes.
        let store = self
            .store
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .frozen();
        let members = self.members.table();
        Box::new(move || encode_snapshot_of(&store, &members))
    }

    fn restore(&mut self, data: &[u8]) {
        let new = match decode_snapshot(data) {
            Ok((store, table)) => {
                if let Some(t) = table {
                    self.members.replace(t);
                }
                store
            }
            Err(_) => {
                self.stats.restore_errors.fetch_add(1, Ordering::Relaxed);
                Store::new()
            }
        };
        self.store
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .replace(new);
    }

    fn leader_entry(&mut self, _index: u64, term: u64) {
        self.store
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .set_leader_term(term);
    }

    fn apply_conf_change(&mut self, _index: u64, change: ConfChangeType, node: u64, ctx: &[u8]) {
        match change {
            ConfChangeType::AddNode | ConfChangeType::AddLearnerNode => {
                // No context (e.g. a learner promoted): keep what is known.
                if ctx.is_empty() {
                    return;
                }
                match decode_member(ctx) {
                    Ok(p) => self.members.insert(node, p),
                    Err(_) => {
                        self.stats.member_errors.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
            ConfChangeType::RemoveNode => self.members.remove(node),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::members::{encode_member, Peer};
    use crate::raft::tests::set;
    use crate::resp::decode_reply;
    use std::collections::BTreeMap;
    use std::sync::RwLock;

    fn peer(n: u16) -> Peer {
        Peer {
            raft: format!("127.0.0.1:{}", 7000 + n).parse().expect("addr"),
            client: format!("127.0.0.1:{}", 6300 + n),
        }
    }

    struct Sm {
        sm: KvStateMachine,
        store: SharedStore,
        members: Members,
        stats: Arc<SmStats>,
    }

    fn sm(members: &[u16]) -> Sm {
        let store: SharedStore = Arc::new(RwLock::new(Store::new()));
        let members = Members::new(members.iter().map(|&i| (i as u64, peer(i))).collect());
        let stats = Arc::new(SmStats::default());
        let sm = KvStateMachine::new(store.clone(), members.clone(), stats.clone());
        Sm {
            sm,
            store,
            members,
            stats,
        }
    }

    fn get(s: &SharedStore, k: &str) -> Option<Vec<u8>> {
        s.read()
            .expect("lock")
            .get(k.as_bytes(), 0)
            .map(<[u8]>::to_vec)
    }

    #[test]
    fn writes_and_garbage() {
        let mut a = sm(&[1]);
        let r = a.sm.apply(5, &set("a", "1").encode());
        assert_eq!(
            decode_reply(&r).ok().flatten().map(|x| x.0),
            Some(Reply::ok())
        );
        let bad = a.sm.apply(6, &[0xff, 0, 1]);
        assert!(matches!(decode_reply(&bad), Ok(Some((Reply::Error(_), _)))));
        a.sm.restore(b"garbage");
        assert_eq!(a.stats.restore_errors.load(Ordering::Relaxed), 1);
        assert!(a.store.read().expect("lock").is_empty(0));
    }

    /// Changes move the table; a snapshot carries it to a member that
    /// started knowing only some of the others.
    #[test]
    fn members_follow_changes_and_snapshots() {
        let mut a = sm(&[1, 2, 3]);
        a.sm.apply(5, &set("a", "1").encode());
        let ctx = encode_member(&peer(4)).expect("encode");
        a.sm.apply_conf_change(6, ConfChangeType::AddNode, 4, &ctx);
        a.sm.apply_conf_change(7, ConfChangeType::RemoveNode, 3, &[]);
        // Garbage addresses are counted and change nothing.
        a.sm.apply_conf_change(8, ConfChangeType::AddNode, 5, b"\x01\x09");
        // A promotion without context keeps the addresses.
        a.sm.apply_conf_change(9, ConfChangeType::AddNode, 4, &[]);
        assert_eq!(a.stats.member_errors.load(Ordering::Relaxed), 1);
        let want: BTreeMap<u64, Peer> = [1, 2, 4].map(|i| (i as u64, peer(i))).into();
        assert_eq!(a.members.table(), want);

        let mut b = sm(&[1, 4]);
        b.sm.restore(&a.sm.snapshot());
        assert_eq!(b.members.table(), want);
        assert_eq!(get(&b.store, "a"), Some(b"1".to_vec()));
        assert_eq!(b.stats.restore_errors.load(Ordering::Relaxed), 0);
    }

    /// A version 1 snapshot (the store alone) restores the store and
    /// leaves the table as it was.
    #[test]
    fn old_snapshots_still_read() {
        // The strings-only store encoding of that version, by hand:
        // clock, applied, count, then key, value, expiry (none).
        let mut v1 = SNAP_V1.to_vec();
        for n in [5u64, 1, 1] {
            v1.extend_from_slice(&n.to_le_bytes());
        }
        for b in [&b"old"[..], b"v1"] {
            v1.extend_from_slice(&(b.len() as u64).to_le_bytes());
            v1.extend_from_slice(b);
        }
        v1.extend_from_slice(&u64::MAX.to_le_bytes());
        let mut b = sm(&[1, 2]);
        b.sm.restore(&v1);
        assert_eq!(get(&b.store, "old"), Some(b"v1".to_vec()));
        assert_eq!(b.members.table().len(), 2);
        assert_eq!(b.stats.restore_errors.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn bad_snapshots() {
        let good = encode_snapshot(&Store::new(), &Members::new([(1, peer(1))].into()));
        let mut short_table = good[..12].to_vec();
        short_table[8..12].copy_from_slice(&1000u32.to_le_bytes());
        let mut bad_table = good.clone();
        bad_table[12] = 9; // the table's version byte
        let rows: &[(&str, &[u8], KvSnapshotError)] = &[
            ("no magic", b"XLKVSNP9....", KvSnapshotError::BadHeader),
            ("no length", &good[..10], KvSnapshotError::Truncated),
            (
                "table past the end",
                &short_table,
                KvSnapshotError::Truncated,
            ),
            (
                "table of another version",
                &bad_table,
                KvSnapshotError::Members(MemberDecodeError::Version(9)),
            ),
            (
                "store missing",
                &good[..good.len() - Store::new().snapshot().len() + 2],
                KvSnapshotError::Store(SnapshotError::BadHeader),
            ),
        ];
        for (name, bytes, want) in rows {
            assert_eq!(decode_snapshot(bytes).err().as_ref(), Some(want), "{name}");
        }
    }
}
