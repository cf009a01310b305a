//! Client-side caching (`CLIENT TRACKING`), on the member that holds the
//! connections.
//!
//! A tracking connection in the default mode has the keys it reads
//! remembered; when an applied op changes one of them (on any member's
//! say: the store names every key an applied op changed,
//! [`crate::store::Store::take_changes`]), the connection gets one
//! invalidation for it and forgets it. In `BCAST` mode it gets the changed
//! keys that match its prefixes, all of a turn's in one message. The
//! message is a RESP3 push `invalidate [keys]` on the connection itself,
//! or, with `REDIRECT id`, a `message` on channel `__redis__:invalidate`
//! (RESP2) or a push (RESP3) to that other connection; a flush of every
//! key invalidates with nil. `OPTIN`/`OPTOUT` with `CLIENT CACHING
//! yes|no` pick which reads are remembered. At most
//! `tracking-table-max-keys` keys are remembered; past that the oldest go,
//! invalidated.
//!
//! An invalidation goes out after the replies of every request the
//! connection sent before it ([`super::conn::Conn::push`]). The reads of a
//! transaction are remembered when its op's changes are known, as Redis
//! runs the commands in order (`remember_txn_reads`).

use super::ClientLoop;
use crate::resp::Reply;
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};

/// The channel a RESP2 connection gets redirected invalidations on.
pub(super) const INVALIDATE_CHANNEL: &[u8] = b"__redis__:invalidate";

/// A tracking connection's settings.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Tracker {
    /// `REDIRECT id`: the client id invalidations go to, and that
    /// client's connection key (keys are never reused: once it closes, the
    /// redirection is broken).
    pub(super) redirect: Option<(u64, u64)>,
    /// The redirection's connection is gone (`TRACKINGINFO`'s
    /// `broken_redirect`).
    pub(super) broken: bool,
    /// `BCAST`: every change under `prefixes`, not the keys read.
    pub(super) bcast: bool,
    /// `PREFIX`es (BCAST; none: every key).
    pub(super) prefixes: Vec<Vec<u8>>,
    /// `OPTIN`: only reads right after `CLIENT CACHING yes`.
    pub(super) optin: bool,
    /// `OPTOUT`: every read but those right after `CLIENT CACHING no`.
    pub(super) optout: bool,
    /// `NOLOOP`: the changes of its own writes are not sent ([`OwnOps`]).
    pub(super) noloop: bool,
    /// `CLIENT CACHING yes|no`, for the next command.
    pub(super) caching: Option<bool>,
}

impl Tracker {
    /// `CLIENT TRACKINGINFO`'s flags.
    pub(super) fn flags(&self) -> Vec<&'static str> {
        let mut f = vec!["on"];
        if self.bcast {
            f.push("bcast");
        }
        if self.optin {
            f.push("optin");
            if self.caching == Some(true) {
                f.push("caching-yes");
            }
        }
        if self.optout {
            f.push("optout");
            if self.caching == Some(false) {
                f.push("caching-no");
            }
        }
        if self.noloop {
            f.push("noloop");
        }
        if self.broken {
            f.push("broken_redirect");
        }
        f
    }
}

/// The tracking state of a member.
#[derive(Default)]
pub(super) struct Tracking {
    /// Tracking connections (by connection key).
    pub(super) clients: BTreeMap<u64, Tracker>,
    /// Keys read, and who read them (default mode).
    keys: BTreeMap<Vec<u8>, BTreeSet<u64>>,
    /// The order keys were first remembered in, for the table's limit.
    order: VecDeque<Vec<u8>>,
    /// The keys of the commands a connection queued inside `MULTI`, in
    /// order: remembered when the transaction runs, not when queued.
    queued: HashMap<u64, Vec<TxnKeys>>,
    /// Those of a transaction whose `EXEC` came, until its op is proposed
    /// (then `after_op`) or, answered without one, the next delivery.
    exec: HashMap<u64, Vec<TxnKeys>>,
    /// The reads of a transaction in flight, by the token of its op.
    after_op: HashMap<u64, TxnReads>,
    /// Those whose op has its outcome, for the next delivery.
    ready: Vec<TxnReads>,
}

/// The keys of one command queued inside `MULTI`.
#[derive(Debug, Clone)]
pub(super) struct TxnKeys {
    keys: Vec<Vec<u8>>,
    /// A write (its keys may change), else a read-only command.
    write: bool,
    /// The `CLIENT CACHING` choice in force.
    caching: Option<bool>,
}

/// A transaction's reads, to remember once its op's changes are known
/// (Redis runs the commands in order: a change the transaction made
/// before a read invalidates nothing; one after it does).
#[derive(Debug, Clone)]
pub(super) struct TxnReads {
    conn: u64,
    /// [`crate::op::origin`] of the transaction's op (`None`: answered
    /// without one, or not proposed).
    origin: Option<u64>,
    txn: Vec<TxnKeys>,
}

/// The ops this member proposed for `NOLOOP` tracking connections, by
/// origin ([`crate::op::origin`]), until their changes are delivered.
#[derive(Default)]
pub(super) struct OwnOps {
    /// Origin → connection.
    by_origin: HashMap<u64, u64>,
    /// Token → origin, while the op is in flight.
    by_token: HashMap<u64, u64>,
    /// Origins of ops completed since the last delivery.
    done: Vec<u64>,
}

impl OwnOps {
    /// Connection `conn` proposed the op `encoded` under `token`.
    pub(super) fn proposed(&mut self, conn: u64, token: u64, encoded: &[u8]) {
        let origin = crate::op::origin(encoded);
        self.by_origin.insert(origin, conn);
        self.by_token.insert(token, origin);
    }

    /// The op of `token` has its outcome: its changes are applied.
    pub(super) fn completed(&mut self, token: u64) {
        if let Some(o) = self.by_token.remove(&token) {
            self.done.push(o);
        }
    }
}

/// An invalidation to send: to a connection (its key), and the keys
/// (`None`: every key, a flush).
pub(super) type Invalidation = (u64, Option<Vec<Vec<u8>>>);

impl Tracking {
    /// Whether any connection tracks.
    pub(super) fn active(&self) -> bool {
        !self.clients.is_empty()
    }

    /// Keys remembered now (`INFO`'s `tracking_total_keys`).
    pub(super) fn keys(&self) -> usize {
        self.keys.len()
    }

    /// Connection `conn` starts (or changes) tracking.
    pub(super) fn on(&mut self, conn: u64, t: Tracker) {
        self.clients.insert(conn, t);
    }

    /// Connection `conn` stops tracking (or closed): its keys are
    /// forgotten.
    pub(super) fn off(&mut self, conn: u64) {
        self.queued.remove(&conn);
        self.exec.remove(&conn);
        if self.clients.remove(&conn).is_none() {
            return;
        }
        self.keys.retain(|_, who| {
            who.remove(&conn);
            !who.is_empty()
        });
        let keys = &self.keys;
        self.order.retain(|k| keys.contains_key(k));
    }

    /// The `CLIENT CACHING` choice that applies to connection `conn`'s
    /// command now: taken, unless `keep` (inside `MULTI`, it lasts to
    /// `EXEC`).
    pub(super) fn caching(&mut self, conn: u64, keep: bool) -> Option<bool> {
        let t = self.clients.get_mut(&conn)?;
        match keep {
            true => t.caching,
            false => t.caching.take(),
        }
    }

    /// The op of `token` was not proposed: its transaction's reads are
    /// remembered at the next delivery, as if answered without an op.
    pub(super) fn forget_exec(&mut self, token: u64) {
        if let Some(r) = self.after_op.remove(&token) {
            self.ready.push(TxnReads { origin: None, ..r });
        }
    }

    /// Whether connection `conn`'s reads under the `CLIENT CACHING`
    /// choice `caching` are remembered (default mode, as `OPTIN`/`OPTOUT`
    /// allow).
    fn remembers(&self, conn: u64, caching: Option<bool>) -> bool {
        self.clients.get(&conn).is_some_and(|t| {
            !t.bcast
                && match (t.optin, t.optout) {
                    (true, _) => caching == Some(true),
                    (_, true) => caching != Some(false),
                    _ => true,
                }
        })
    }

    /// Connection `conn` read `keys` (a read-only command, under the
    /// `CLIENT CACHING` choice `caching`): remembered in the default mode,
    /// as `OPTIN`/`OPTOUT` allow. Returns the invalidations of keys pushed
    /// out past `max_keys`.
    pub(super) fn read(
        &mut self,
        conn: u64,
        keys: &[Vec<u8>],
        caching: Option<bool>,
        max_keys: usize,
    ) -> Vec<Invalidation> {
        if !self.remembers(conn, caching) {
            return Vec::new();
        }
        for k in keys {
            let who = self.keys.entry(k.clone()).or_default();
            if who.is_empty() {
                self.order.push_back(k.clone());
            }
            who.insert(conn);
        }
        self.limit(max_keys)
    }

    /// Pushes out the oldest remembered keys past `max_keys` (after
    /// `CONFIG SET tracking-table-max-keys`), invalidated.
    pub(super) fn limit(&mut self, max_keys: usize) -> Vec<Invalidation> {
        let mut out = Vec::new();
        while self.keys.len() > max_keys.max(1) {
            let Some(old) = self.order.pop_front() else {
                break;
            };
            if let Some(who) = self.keys.remove(&old) {
                out.extend(who.into_iter().map(|c| (c, Some(vec![old.clone()]))));
            }
        }
        out
    }

    /// The invalidations for keys changed by applied ops, each with the
    /// origin of its op ([`crate::op::origin`]; `None` key: every key).
    /// `own` names the connection of this member that proposed an op
    /// (known only for `NOLOOP` connections' ops): a `NOLOOP` connection
    /// is not told of its own changes. Default-mode keys are forgotten
    /// once changed; a `BCAST` connection gets one message per prefix.
    pub(super) fn changed(
        &mut self,
        changed: &[(u64, Option<Vec<u8>>)],
        own: &dyn Fn(u64) -> Option<u64>,
    ) -> Vec<Invalidation> {
        let mut out = Vec::new();
        if changed.is_empty() {
            return out;
        }
        if changed.iter().any(|(_, k)| k.is_none()) {
            self.keys.clear();
            self.order.clear();
            out.extend(self.clients.keys().map(|&c| (c, None)));
            return out;
        }
        // Each key once, with the origin of its last change.
        let mut last: BTreeMap<&[u8], u64> = BTreeMap::new();
        for (origin, k) in changed {
            if let Some(k) = k {
                last.insert(k.as_slice(), *origin);
            }
        }
        let skip = |c: u64, origin: u64, t: Option<&Tracker>| {
            t.is_some_and(|t| t.noloop) && own(origin) == Some(c)
        };
        for (origin, k) in changed {
            let Some(k) = k else { continue };
            if let Some(who) = self.keys.remove(k.as_slice()) {
                out.extend(
                    who.into_iter()
                        .filter(|&c| !skip(c, *origin, self.clients.get(&c)))
                        .map(|c| (c, Some(vec![k.clone()]))),
                );
            }
        }
        let keys = &self.keys;
        self.order.retain(|k| keys.contains_key(k));
        for (&c, t) in self.clients.iter().filter(|(_, t)| t.bcast) {
            let all = [Vec::new()];
            let prefixes = match t.prefixes.is_empty() {
                true => &all[..],
                false => &t.prefixes[..],
            };
            for p in prefixes {
                let hit: Vec<Vec<u8>> = last
                    .iter()
                    .filter(|(k, &o)| k.starts_with(p) && !skip(c, o, Some(t)))
                    .map(|(k, _)| k.to_vec())
                    .collect();
                if !hit.is_empty() {
                    out.push((c, Some(hit)));
                }
            }
        }
        out
    }

    /// The prefix collision error of `CLIENT TRACKING ... BCAST PREFIX`,
    /// if `new` overlaps the connection's prefixes or each other.
    pub(super) fn prefix_collision(&self, conn: u64, new: &[Vec<u8>]) -> Option<String> {
        let overlap = |a: &[u8], b: &[u8]| a.starts_with(b) || b.starts_with(a);
        let old = self
            .clients
            .get(&conn)
            .map(|t| &t.prefixes[..])
            .unwrap_or(&[]);
        for (i, p) in new.iter().enumerate() {
            if let Some(o) = old.iter().find(|o| overlap(p, o)) {
                return Some(format!(
                    "ERR Prefix '{}' overlaps with an existing prefix '{}'. \
                     Prefixes for a single client must not overlap.",
                    String::from_utf8_lossy(p),
                    String::from_utf8_lossy(o)
                ));
            }
            if let Some(q) = new[i + 1..].iter().find(|q| overlap(p, q)) {
                return Some(format!(
                    "ERR Prefix '{}' overlaps with another provided prefix '{}'. \
                     Prefixes for a single client must not overlap.",
                    String::from_utf8_lossy(p),
                    String::from_utf8_lossy(q)
                ));
            }
        }
        None
    }
}

impl ClientLoop {
    /// Before connection `id` runs `args`: the `CLIENT CACHING` choice is
    /// used up, and a read-only command's keys are remembered.
    pub(super) fn track_command(&mut self, id: u64, args: &crate::resp::Command, in_multi: bool) {
        if !self.tracking.clients.contains_key(&id) {
            return;
        }
        let word = |w: &str| args[0].eq_ignore_ascii_case(w.as_bytes());
        if in_multi && (word("exec") || word("discard")) {
            let txn = self.tracking.queued.remove(&id).unwrap_or_default();
            if word("exec") {
                self.tracking.exec.insert(id, txn);
            }
            return;
        }
        let caching = self.tracking.caching(id, in_multi);
        let readonly = crate::cmd::table::spec(&args[0]).is_some_and(|s| s.has("readonly"));
        let queue = in_multi && !word("multi");
        if !queue && !readonly {
            return;
        }
        let keys: Vec<Vec<u8>> = crate::cmd::keys_of(args)
            .unwrap_or_default()
            .into_iter()
            .filter_map(|i| args.get(i).cloned())
            .collect();
        if queue {
            // Bounded by the transaction's own length.
            let q = self.tracking.queued.entry(id).or_default();
            q.push(TxnKeys {
                keys,
                write: !readonly,
                caching,
            });
            return;
        }
        if keys.is_empty() {
            return;
        }
        let max = self.config.number("tracking-table-max-keys") as usize;
        let out = self.tracking.read(id, &keys, caching, max);
        self.invalidations.extend(out);
    }

    /// Connection `id` proposed its transaction's op `encoded` under
    /// `token`: its reads wait for the op's outcome.
    pub(super) fn track_exec(&mut self, id: u64, token: u64, encoded: &[u8]) {
        if let Some(txn) = self.tracking.exec.remove(&id) {
            let r = TxnReads {
                conn: id,
                origin: Some(crate::op::origin(encoded)),
                txn,
            };
            self.tracking.after_op.insert(token, r);
        }
    }

    /// The op of `token` has its outcome (applied, or refused).
    pub(super) fn exec_done(&mut self, token: u64) {
        if let Some(r) = self.tracking.after_op.remove(&token) {
            self.tracking.ready.push(r);
        }
    }

    /// The reads of the transactions that ran (`ready`, and those answered
    /// without an op), against this delivery's `changes` (in apply
    /// order): a key a later command of the same transaction writes, or
    /// that an op applied after the transaction's changed, is invalidated
    /// at once and not remembered; the others are remembered.
    fn remember_txn_reads(
        &mut self,
        changes: &[(u64, Option<Vec<u8>>)],
        max: usize,
    ) -> Vec<Invalidation> {
        let mut runs = std::mem::take(&mut self.tracking.ready);
        for (conn, txn) in std::mem::take(&mut self.tracking.exec) {
            // Answered without an op: nothing of it is in `changes`.
            runs.push(TxnReads {
                conn,
                origin: None,
                txn,
            });
        }
        let mut out = Vec::new();
        for r in runs {
            let Some(noloop) = self.tracking.clients.get(&r.conn).map(|t| t.noloop) else {
                continue;
            };
            // Changes after the transaction's own (all of them when its op
            // changed nothing or its changes went out earlier).
            let from = changes
                .iter()
                .rposition(|(o, _)| Some(*o) == r.origin)
                .map_or(0, |i| i + 1);
            let later = &changes[from..];
            let flush_later = later.iter().any(|(_, k)| k.is_none());
            for (i, cmd) in r.txn.iter().enumerate() {
                if cmd.write {
                    continue;
                }
                let mut keep = Vec::new();
                let mut gone = Vec::new();
                for k in &cmd.keys {
                    let own_later = r.txn[i + 1..].iter().any(|w| w.write && w.keys.contains(k));
                    let others_later =
                        flush_later || later.iter().any(|(_, c)| c.as_deref() == Some(k));
                    match (own_later && !noloop) || others_later {
                        true => gone.push(k.clone()),
                        false if own_later => {}
                        false => keep.push(k.clone()),
                    }
                }
                if !gone.is_empty() && self.tracking.remembers(r.conn, cmd.caching) {
                    out.push((r.conn, Some(gone)));
                }
                if !keep.is_empty() {
                    out.extend(self.tracking.read(r.conn, &keep, cmd.caching, max));
                }
            }
        }
        out
    }

    /// Sends the invalidations of the keys changed by the ops applied so
    /// far, and of keys pushed out of the table; keeps the store recording
    /// changes while anyone tracks.
    pub(super) fn deliver_invalidations(&mut self) {
        let active = self.tracking.active();
        let changes = match self.store.write() {
            Ok(mut s) if active || s.tracks_changes() => {
                let ch = s.take_changes();
                s.track_changes(active);
                ch
            }
            _ => Vec::new(),
        };
        let mut out = std::mem::take(&mut self.invalidations);
        if active {
            let own = &self.own_ops.by_origin;
            out.extend(self.tracking.changed(&changes, &|o| own.get(&o).copied()));
            let max = self.config.number("tracking-table-max-keys") as usize;
            out.extend(self.remember_txn_reads(&changes, max));
            out.extend(self.tracking.limit(max));
        }
        for o in std::mem::take(&mut self.own_ops.done) {
            self.own_ops.by_origin.remove(&o);
        }
        for (conn, keys) in out {
            self.send_invalidation(conn, keys);
        }
    }

    /// One invalidation for tracking connection `conn`: a push on it
    /// (RESP3), or to its redirection — a push (RESP3) or a `message` on
    /// `__redis__:invalidate` (RESP2, subscribed). A redirection whose
    /// connection is gone is reported to `conn` (`tracking-redir-broken`,
    /// RESP3).
    fn send_invalidation(&mut self, conn: u64, keys: Option<Vec<Vec<u8>>>) {
        let Some(t) = self.tracking.clients.get_mut(&conn) else {
            return;
        };
        let target = match t.redirect {
            Some((_, key)) if self.conns.contains_key(&key) => key,
            Some((cid, _)) => {
                t.broken = true;
                if let Some(c) = self.conns.get_mut(&conn) {
                    if c.session.resp3 {
                        let mut b = Vec::new();
                        Reply::Push(vec![
                            Reply::bulk("tracking-redir-broken"),
                            Reply::Integer(cid as i64),
                        ])
                        .encode_resp3(&mut b);
                        c.push(b);
                        self.mark(conn);
                    }
                }
                return;
            }
            None => conn,
        };
        let redirected = target != conn;
        let subscribed = self.subs.subscribed(target);
        let Some(c) = self.conns.get_mut(&target) else {
            return;
        };
        let keys = match keys {
            Some(k) => Reply::Array(Some(k.into_iter().map(|k| Reply::Bulk(Some(k))).collect())),
            None => Reply::nil(),
        };
        let mut b = Vec::new();
        if c.session.resp3 {
            Reply::Push(vec![Reply::bulk("invalidate"), keys]).encode_resp3(&mut b);
        } else if redirected && subscribed {
            Reply::Array(Some(vec![
                Reply::bulk("message"),
                Reply::Bulk(Some(INVALIDATE_CHANNEL.to_vec())),
                keys,
            ]))
            .encode(&mut b);
        } else {
            // RESP2 has no pushes on a connection that is not subscribed.
            return;
        }
        c.push(b);
        self.mark(target);
    }

    /// `INFO`'s tracking figures: clients, keys, items (key-reader pairs),
    /// prefixes.
    pub(super) fn tracking_facts(&self) -> (usize, usize, usize, usize) {
        let t = &self.tracking;
        let prefixes: BTreeSet<&[u8]> = t
            .clients
            .values()
            .filter(|c| c.bcast)
            .flat_map(|c| c.prefixes.iter().map(Vec::as_slice))
            .collect();
        (
            t.clients.len(),
            t.keys(),
            t.keys.values().map(BTreeSet::len).sum(),
            prefixes.len(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(s: &str) -> Vec<u8> {
        s.as_bytes().to_vec()
    }

    #[test]
    fn default_mode_invalidates_each_read_key_once() {
        let mut t = Tracking::default();
        t.on(1, Tracker::default());
        t.read(1, &[k("a")], None, 100);
        let none = |_| None;
        let inv = t.changed(
            &[(0, Some(k("b"))), (0, Some(k("a"))), (0, Some(k("a")))],
            &none,
        );
        assert_eq!(inv, vec![(1, Some(vec![k("a")]))]);
        assert!(
            t.changed(&[(0, Some(k("a")))], &none).is_empty(),
            "forgotten once invalidated"
        );
        t.read(1, &[k("a")], None, 100);
        assert_eq!(t.changed(&[(0, None)], &none), vec![(1, None)]);
        assert_eq!(t.keys(), 0);
    }

    #[test]
    fn bcast_prefixes_and_optin() {
        let mut t = Tracking::default();
        t.on(
            1,
            Tracker {
                bcast: true,
                prefixes: vec![k("a:"), k("b:")],
                ..Tracker::default()
            },
        );
        let changes = [
            (0, Some(k("a:1"))),
            (0, Some(k("c:1"))),
            (0, Some(k("b:2"))),
        ];
        let inv = t.changed(&changes, &|_| None);
        assert_eq!(
            inv,
            vec![(1, Some(vec![k("a:1")])), (1, Some(vec![k("b:2")]))]
        );
        t.on(
            2,
            Tracker {
                optin: true,
                ..Tracker::default()
            },
        );
        t.read(2, &[k("x")], t.clients[&2].caching, 100);
        assert_eq!(t.keys(), 0, "OPTIN without CACHING yes");
        t.clients.get_mut(&2).unwrap().caching = Some(true);
        t.read(2, &[k("x")], t.clients[&2].caching, 100);
        assert_eq!(t.keys(), 1);
    }

    #[test]
    fn the_table_is_bounded() {
        let mut t = Tracking::default();
        t.on(1, Tracker::default());
        assert!(t.read(1, &[k("a"), k("b")], None, 2).is_empty());
        let out = t.read(1, &[k("c")], None, 2);
        assert_eq!(out, vec![(1, Some(vec![k("a")]))]);
        assert_eq!(t.keys(), 2);
        t.off(1);
        assert_eq!(t.keys(), 0);
        t.on(1, Tracker::default());
        t.read(1, &[k("a"), k("b"), k("c")], None, 10);
        assert_eq!(t.limit(1).len(), 2, "the oldest two go");
    }

    #[test]
    fn noloop_skips_a_connections_own_changes() {
        let mut t = Tracking::default();
        let noloop = Tracker {
            noloop: true,
            ..Tracker::default()
        };
        t.on(1, noloop.clone());
        t.read(1, &[k("mine"), k("theirs")], None, 100);
        // Origin 7 is connection 1's op; 9 someone else's.
        let own = |o| (o == 7).then_some(1);
        let inv = t.changed(&[(7, Some(k("mine"))), (9, Some(k("theirs")))], &own);
        assert_eq!(inv, vec![(1, Some(vec![k("theirs")]))]);
        t.on(
            2,
            Tracker {
                bcast: true,
                ..noloop
            },
        );
        let inv = t.changed(&[(9, Some(k("x"))), (7, Some(k("y")))], &|o| {
            (o == 7).then_some(2)
        });
        assert_eq!(inv, vec![(2, Some(vec![k("x")]))]);
    }

    #[test]
    fn overlapping_prefixes_are_refused() {
        let mut t = Tracking::default();
        assert!(t.prefix_collision(1, &[k("FOO"), k("BAR")]).is_none());
        let e = t.prefix_collision(1, &[k("FOO"), k("FOOBAR")]).unwrap();
        assert!(e.starts_with("ERR Prefix 'FOO' overlaps with another provided prefix 'FOOBAR'"));
        t.on(
            1,
            Tracker {
                bcast: true,
                prefixes: vec![k("BAR")],
                ..Tracker::default()
            },
        );
        let e = t.prefix_collision(1, &[k("BARB")]).unwrap();
        assert!(e.starts_with("ERR Prefix 'BARB' overlaps with an existing prefix 'BAR'"));
        assert!(
            t.prefix_collision(1, &[k("BAR")]).is_some(),
            "the same one again, as Redis"
        );
    }
}
