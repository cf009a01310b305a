//! Clients blocked on keys (`BLPOP`, `BLMOVE`, `BZPOPMIN`, ...), on a
//! timer (`DEBUG SLEEP`) or on the other members' logs (`WAIT`, see
//! `super::replicas`), on the member that holds their connections.
//!
//! A blocking command is a write. When the leader meets one whose keys
//! hold nothing to take, it does not propose it: the connection blocks
//! (nothing later of it runs) and waits in the [`Waiters`] queue of each of
//! its keys, in arrival order. After every turn that applied ops, the
//! first waiter of each key whose command would now take something is
//! served by proposing its command as a write: the pop is a replicated
//! op, decided once in the log, so an element is taken by exactly one
//! client whatever happens to leaders. If another op took the element
//! first, the command applies as "nothing" and the waiter blocks again,
//! still first in its queues. A waiter leaves when served, at its timeout
//! (with the command's timeout reply), by `CLIENT UNBLOCK`, when its
//! connection closes, or when this member stops being the leader (with a
//! `-MOVED` to the new one, so the client retries there; never a silent
//! timeout).
//!
//! Sans I/O: time and the store are passed in.

use crate::resp::{Command, Reply};
use std::collections::{BTreeMap, VecDeque};
use std::time::Instant;

/// What a blocked connection waits for.
pub(super) struct Waiter {
    /// The blocking command's words (proposed again to serve it).
    pub(super) args: Command,
    /// Its keys (empty for a timer).
    pub(super) keys: Vec<Vec<u8>>,
    /// When it gives up (`None`: never).
    pub(super) deadline: Option<Instant>,
    /// Its reply on timeout (what the command answers with nothing to
    /// take; `DEBUG SLEEP`'s `+OK`).
    pub(super) timeout_reply: Reply,
    /// The token of the write serving it, while in flight.
    pub(super) in_flight: Option<u64>,
    /// `WAIT`: what it waits for of the other members.
    pub(super) replicas: Option<ReplicaWait>,
}

/// A `WAIT`: `needed` other members holding every entry up to `index`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct ReplicaWait {
    /// Members asked for.
    pub(super) needed: i64,
    /// The log index they must hold (this member's commit index when the
    /// connection's earlier writes were all applied).
    pub(super) index: u64,
}

/// The blocked connections of a member. See the module docs.
#[derive(Default)]
pub(super) struct Waiters {
    by_conn: fxhash::FxHashMap<u64, Waiter>,
    /// Per key, the connections waiting on it, first blocked first.
    by_key: BTreeMap<Vec<u8>, VecDeque<u64>>,
    /// The store's applied count when the queues were last looked at.
    pub(super) checked: u64,
}

impl Waiters {
    /// True when nobody waits.
    pub(super) fn is_empty(&self) -> bool {
        self.by_conn.is_empty()
    }

    /// Connection `conn` blocks on `w`.
    pub(super) fn block(&mut self, conn: u64, w: Waiter) {
        for k in &w.keys {
            self.by_key.entry(k.clone()).or_default().push_back(conn);
        }
        self.by_conn.insert(conn, w);
        // A new waiter is looked at in the next pass, whatever was applied.
        self.checked = 0;
    }

    /// The waiter of `conn`.
    pub(super) fn get_mut(&mut self, conn: u64) -> Option<&mut Waiter> {
        self.by_conn.get_mut(&conn)
    }

    /// `conn` leaves its queues.
    pub(super) fn unblock(&mut self, conn: u64) -> Option<Waiter> {
        let w = self.by_conn.remove(&conn)?;
        for k in &w.keys {
            if let Some(q) = self.by_key.get_mut(k) {
                q.retain(|c| *c != conn);
                if q.is_empty() {
                    self.by_key.remove(k);
                }
            }
        }
        Some(w)
    }

    /// Waiters whose deadline passed at `now` and that nothing serves now.
    pub(super) fn timed_out(&self, now: Instant) -> Vec<u64> {
        self.by_conn
            .iter()
            .filter(|(_, w)| w.in_flight.is_none() && w.deadline.is_some_and(|d| d <= now))
            .map(|(c, _)| *c)
            .collect()
    }

    /// The `WAIT`s, by connection.
    pub(super) fn replica_waits(&self) -> Vec<(u64, ReplicaWait)> {
        self.by_conn
            .iter()
            .filter_map(|(c, w)| w.replicas.map(|r| (*c, r)))
            .collect()
    }

    /// Every waiter nothing serves now.
    pub(super) fn idle(&self) -> Vec<u64> {
        self.by_conn
            .iter()
            .filter(|(_, w)| w.in_flight.is_none())
            .map(|(c, _)| *c)
            .collect()
    }

    /// The waiters to serve now: per key, the first waiter — unless one
    /// ahead of it is being served — if `ready(args)` says its command
    /// would take something. Each connection once.
    pub(super) fn ready(&self, ready: &mut dyn FnMut(&Command) -> bool) -> Vec<u64> {
        let mut out: Vec<u64> = Vec::new();
        for q in self.by_key.values() {
            let Some(first) = q.front() else { continue };
            let Some(w) = self.by_conn.get(first) else {
                continue;
            };
            if w.in_flight.is_some() || out.contains(first) {
                continue;
            }
            if ready(&w.args) {
                out.push(*first);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn waiter(keys: &[&str]) -> Waiter {
        Waiter {
            args: vec![b"blpop".to_vec()],
            keys: keys.iter().map(|k| k.as_bytes().to_vec()).collect(),
            deadline: None,
            timeout_reply: Reply::Array(None),
            in_flight: None,
            replicas: None,
        }
    }

    #[test]
    fn first_blocked_first_served_per_key() {
        let mut w = Waiters::default();
        w.block(1, waiter(&["a", "b"]));
        w.block(2, waiter(&["a"]));
        w.block(3, waiter(&["b"]));
        // Key a: 1 first; key b: 1 first: served once.
        assert_eq!(w.ready(&mut |_| true), vec![1]);
        w.get_mut(1).unwrap().in_flight = Some(9);
        // While 1 is served, nobody behind it on a or b is.
        assert!(w.ready(&mut |_| true).is_empty());
        assert!(w.unblock(1).is_some());
        let mut r = w.ready(&mut |_| true);
        r.sort_unstable();
        assert_eq!(r, vec![2, 3]);
        assert!(w.unblock(1).is_none());
        assert_eq!(w.idle().len(), 2);
    }

    #[test]
    fn deadlines() {
        let mut w = Waiters::default();
        let now = Instant::now();
        let mut a = waiter(&["a"]);
        a.deadline = Some(now);
        w.block(1, a);
        w.block(2, waiter(&["a"]));
        assert_eq!(w.timed_out(now), vec![1]);
        w.get_mut(1).unwrap().in_flight = Some(4);
        assert!(w.timed_out(now).is_empty(), "served now: not timed out");
    }
}
