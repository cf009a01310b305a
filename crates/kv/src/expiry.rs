//! Expiry decided by the leader, sans I/O: which expired keys to remove,
//! as a replicated [`WriteCmd::DelExpired`] op carrying the keys and the
//! leader's clock.
//!
//! The rule (see also [`crate::store`]):
//!
//! - A key exists for every read while it is in the applied state; no
//!   member consults its own clock to hide a key. Two members that have
//!   applied the same log prefix answer a read the same, so a linearizable
//!   read (ReadIndex: the member waits until it has applied everything
//!   committed before the read began) gives the same answer on a follower
//!   as on the leader.
//! - A key leaves the state only at a log position: a `DelExpired` op the
//!   leader proposed (the active cycle, [`ExpiryCycle`], a bounded batch of
//!   [`BATCH_KEYS`] per driver turn, as Redis' active expiry samples a
//!   bounded number of keys per cycle), or any other op, whose `ts_ms` (the
//!   leader's clock when the command arrived) removes every key due at it
//!   before the op runs (lazy expiry on the write path).
//! - So a key stays readable after its expiry time until the leader's
//!   cycle has seen it and the op has committed (a driver turn plus one
//!   commit; on the single node, not at all: it runs [`due`] before each
//!   read). `TTL`/`PTTL` of such a key answer 0.
//!
//! [`ExpiryCycle::poll`] is called by the member's driver each turn with
//! the member's clock; on a follower the proposal is refused (not the
//! leader) and nothing happens.

use crate::op::{WriteCmd, WriteOp};
use crate::store::Store;

/// Most keys one [`WriteCmd::DelExpired`] op removes.
pub const BATCH_KEYS: usize = 64;

/// How long the cycle waits for a batch it proposed to be applied before
/// proposing the same keys again (a proposal lost to a leader change).
pub const RETRY_MS: u64 = 100;

/// The op that removes up to [`BATCH_KEYS`] keys due at `now_ms`, stamped
/// `now_ms`; `None` when none is due.
pub fn due(store: &Store, now_ms: u64) -> Option<WriteOp> {
    let keys = store.due(now_ms, BATCH_KEYS);
    (!keys.is_empty()).then(|| WriteOp::new(now_ms, WriteCmd::DelExpired { keys }))
}

/// The leader's active expiry: one bounded batch per turn, not proposed
/// again while the previous one is in flight. See the module docs.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ExpiryCycle {
    /// The first key of the batch in flight and when it was proposed.
    pending: Option<(Vec<u8>, u64)>,
}

impl ExpiryCycle {
    /// The op to propose now, if any: the keys due at `now_ms`, unless the
    /// same batch was proposed less than [`RETRY_MS`] ago. Bounded work:
    /// O([`BATCH_KEYS`] · log n).
    pub fn poll(&mut self, store: &Store, now_ms: u64) -> Option<WriteOp> {
        let Some(op) = due(store, now_ms) else {
            self.pending = None;
            return None;
        };
        let WriteCmd::DelExpired { keys } = &op.cmd else {
            return None;
        };
        if let Some((first, at)) = &self.pending {
            if *first == keys[0] && now_ms < at.saturating_add(RETRY_MS) {
                return None;
            }
        }
        self.pending = Some((keys[0].clone(), now_ms));
        Some(op)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::execute_local;
    use crate::exec::Apply;
    use crate::resp::{split_inline, Reply};

    const T0: u64 = 1_700_000_000_000;

    fn run(store: &mut Store, line: &str, now: u64) -> Reply {
        let args = split_inline(line.as_bytes()).expect("parses");
        match crate::dispatch::classify(args.clone(), now) {
            // Reads straight from the state, as a cluster member reads.
            crate::dispatch::Action::Read(r) => r.execute(store, now, &Default::default()),
            _ => execute_local(store, &args, now),
        }
    }

    /// Two members apply the same ops; reads at any member clock agree,
    /// and a key past its expiry stays until the leader's op removes it.
    #[test]
    fn members_agree_whatever_their_clocks() {
        let mut leader = Store::new();
        let mut follower = Store::new();
        let mut ops = Vec::new();
        for (i, l) in ["SET a 1 PX 10", "SET b 1 PX 20", "SET c 1"]
            .iter()
            .enumerate()
        {
            let args = split_inline(l.as_bytes()).expect("parses");
            let crate::dispatch::Action::Write(op) =
                crate::dispatch::classify(args.clone(), T0 + i as u64)
            else {
                panic!("{l} writes");
            };
            ops.push(op);
        }
        for op in &ops {
            leader.apply(op);
            follower.apply(op);
        }
        // Rows: (leader clock, follower clock, key, reply on both).
        let rows: &[(u64, u64, &str, Reply)] = &[
            (T0 + 5, T0 + 500, "GET a", Reply::bulk("1")),
            (T0 + 500, T0 + 5, "GET a", Reply::bulk("1")),
            (T0 + 500, T0 + 5, "PTTL a", Reply::Integer(0)),
            (T0 + 5, T0 + 5, "PTTL a", Reply::Integer(5)),
            (T0 + 5, T0 + 500, "DBSIZE", Reply::Integer(3)),
        ];
        for (lc, fc, line, want) in rows {
            assert_eq!(&run(&mut leader, line, *lc), want, "leader {line}");
            let got = run(&mut follower, line, *fc);
            if !line.starts_with("PTTL") {
                assert_eq!(&got, want, "follower {line}");
            }
        }
        // The leader's cycle at T0+15 removes `a` only; both apply it.
        let mut cycle = ExpiryCycle::default();
        let op = cycle.poll(&leader, T0 + 15).expect("a is due");
        assert_eq!(
            op.cmd,
            WriteCmd::DelExpired {
                keys: vec![b"a".to_vec()]
            }
        );
        // In flight: not proposed again until RETRY_MS passed.
        assert_eq!(cycle.poll(&leader, T0 + 16), None);
        assert!(cycle.poll(&leader, T0 + 15 + RETRY_MS).is_some());
        let wire = WriteOp::decode(&op.encode()).expect("decodes");
        assert_eq!(leader.apply(&wire), Reply::Integer(1));
        assert_eq!(follower.apply(&wire), Reply::Integer(1));
        assert_eq!(leader.snapshot(), follower.snapshot());
        for s in [&mut leader, &mut follower] {
            assert_eq!(run(s, "EXISTS a b c", T0 + 15), Reply::Integer(2));
        }
        // Applied again (a retry): nothing left to remove.
        assert_eq!(leader.apply(&wire), Reply::Integer(0));
    }

    /// A key given a later expiry (or none) after the leader picked it is
    /// kept; a batch is at most BATCH_KEYS keys, the earliest first.
    #[test]
    fn batches_are_bounded_and_rechecked() {
        let mut s = Store::new();
        for i in 0..BATCH_KEYS + 5 {
            let line = format!("SET k{i:03} v PX {}", 10 + i);
            run(&mut s, &line, T0);
        }
        let op = due(&s, T0 + 1000).expect("due");
        let WriteCmd::DelExpired { keys } = &op.cmd else {
            panic!("a DelExpired op");
        };
        assert_eq!(keys.len(), BATCH_KEYS);
        assert_eq!(keys[0], b"k000".to_vec());
        run(&mut s, "PERSIST k000", T0 + 5);
        run(&mut s, "PEXPIRE k001 100000", T0 + 5);
        assert_eq!(s.apply(&op), Reply::Integer(BATCH_KEYS as i64 - 2));
        assert_eq!(run(&mut s, "DBSIZE", T0 + 5), Reply::Integer(7));
        // Lazy on writes: any op removes every key due at its time.
        run(&mut s, "SET x 1", T0 + 1000);
        assert_eq!(run(&mut s, "DBSIZE", T0 + 1000), Reply::Integer(3));
        assert_eq!(due(&s, T0 + 1000), None);
    }
}
