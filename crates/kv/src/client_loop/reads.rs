//! Read groups: the reads of a connection's pipeline that share one read
//! barrier, the writes the store shows would change nothing answered among
//! them ([`Ask`]), and how a group is answered within a turn's
//! [`super::ANSWER_BUDGET`] (see the module docs of [`super`]).

use super::conn::{Ask, Conn, Pending, Query, Slot};
use super::{Deferred, Tokens};
use crate::dispatch::{classify, Action};
use crate::exec::Apply;
use crate::members::Members;
use crate::replicator::replica_error;
use crate::replicator::SharedStore;
use crate::resp::{Command, Reply};
use crate::session::{now_ms, replica_error_reply};
use xlane_xraft::driver::Submit;

/// Whether `op` would change nothing if applied now
/// ([`crate::store::Store::unchanged_reply`]).
pub(super) fn unchanged(store: &SharedStore, op: &crate::op::WriteOp) -> bool {
    store.read().is_ok_and(|s| s.unchanged_reply(op).is_some())
}

/// What `args` (arrived at `now`) asks of the store if it may join a read
/// group on `c`: a read, or (on the leader) a write that would change
/// nothing. `None` for anything else — commands about the connection or a
/// transaction, every command inside `MULTI` or of a subscriber, writes
/// that change something.
pub(super) fn quiet_ask(
    args: &Command,
    c: &Conn,
    subscribed: bool,
    store: &SharedStore,
    leader: bool,
    now: u64,
) -> Option<Ask> {
    const OWN: &[&[u8]] = &[
        b"hello",
        b"client",
        b"readonly",
        b"readwrite",
        b"multi",
        b"exec",
        b"discard",
        b"watch",
        b"unwatch",
    ];
    let name = args.first()?;
    if c.txn.in_multi() || subscribed || OWN.iter().any(|o| name.eq_ignore_ascii_case(o)) {
        return None;
    }
    match classify(args.to_vec(), now) {
        Action::Read(cmd) => Some(Ask::Read(cmd)),
        Action::Write(op) if leader && unchanged(store, &op) => Some(Ask::Write(op)),
        _ => None,
    }
}

/// What answering a read group needs of the loop, besides the connection.
pub(super) struct Answer<'a> {
    pub(super) store: &'a SharedStore,
    pub(super) tokens: &'a mut Tokens,
    pub(super) members: &'a Members,
    pub(super) facts: &'a crate::info::Facts,
    pub(super) me: u64,
    /// The connection's key.
    pub(super) id: u64,
    /// What is left of the turn's [`super::ANSWER_BUDGET`].
    pub(super) budget: &'a mut usize,
}

impl Answer<'_> {
    /// Starts `group` on connection `c` (nothing earlier is pending): at
    /// once from the store when none of it needs a barrier (`READONLY`
    /// reads, or a leader that is its group's only voter:
    /// [`Submit::reads_local`]), else after one read barrier for the whole
    /// group, which the requests already received may still join. True if
    /// the turn's budget left some of it for a later turn.
    pub(super) fn start(&mut self, c: &mut Conn, group: Vec<Query>, sub: &mut dyn Submit) -> bool {
        let readonly = c.session.readonly;
        let barrier = !sub.reads_local() && group.iter().any(|q| q.needs_barrier(readonly));
        let token = if barrier {
            self.tokens.issue(self.id)
        } else {
            0
        };
        c.queue.push_back(Pending {
            token,
            slot: Slot::Read {
                group,
                tries: 1,
                ready: false,
            },
            silent: false,
            shape: None,
        });
        c.read_waiting = true;
        if barrier {
            sub.read_barrier(token);
            c.joinable = true;
            return false;
        }
        let left = self.answer(c, c.queue.len() - 1, sub);
        c.release();
        left
    }

    /// Answers the read group at `c.queue[at]` (its barrier through) from
    /// the store, in order, within the turn's budget: what the budget leaves
    /// waits, ready, in the next pending for a later turn (true then). A
    /// write in it that would now change something is proposed there, and
    /// the requests after it wait for it as a new deferred group.
    pub(super) fn answer(&mut self, c: &mut Conn, at: usize, sub: &mut dyn Submit) -> bool {
        let slot = std::mem::replace(&mut c.queue[at].slot, Slot::Done(Vec::new()));
        let Slot::Read { group, tries, .. } = slot else {
            c.queue[at].slot = slot;
            return false;
        };
        let leader = sub.leader() == self.me;
        // At the head of the queue nothing is waiting to go out before it:
        // the replies go straight to the connection's output.
        let mut own = Vec::new();
        let out = if at == 0 { &mut c.out } else { &mut own };
        let mut rest = group.into_iter();
        let mut write = None;
        let mut left = None;
        match self.store.read() {
            Ok(s) => {
                let now = now_ms();
                for q in rest.by_ref() {
                    if *self.budget == 0 {
                        left = Some(q);
                        break;
                    }
                    let reply = match &q.ask {
                        Ask::Read(cmd) => cmd.execute(&s, now, self.facts),
                        Ask::Write(op) => match s.unchanged_reply(op) {
                            Some(r) if leader => r,
                            _ => {
                                write = Some(q);
                                break;
                            }
                        },
                    };
                    let before = out.len();
                    q.encode(reply, out);
                    *self.budget = self.budget.saturating_sub(out.len() - before);
                }
            }
            Err(_) => {
                for q in rest.by_ref() {
                    q.encode(Reply::err("ERR store lock poisoned"), out);
                }
            }
        }
        c.queue[at].slot = Slot::Done(own);
        if let Some(q) = left {
            let mut group = vec![q];
            group.extend(rest);
            let slot = Slot::Read {
                group,
                tries,
                ready: true,
            };
            c.queue.insert(
                at + 1,
                Pending {
                    token: 0,
                    slot,
                    silent: false,
                    shape: None,
                },
            );
            return true;
        }
        c.read_waiting = false;
        let Some(q) = write else {
            return false;
        };
        let Ask::Write(op) = &q.ask else {
            return false;
        };
        let token = self.tokens.issue(self.id);
        let pending = match sub.propose(op.encode(), token) {
            Ok(()) => Pending {
                token,
                slot: Slot::Write,
                silent: q.silent,
                shape: q.shape,
            },
            Err(e) => {
                self.tokens.take(token);
                let e = replica_error(e, |h| self.members.client_of(self.me, h));
                let mut b = Vec::new();
                q.encode(replica_error_reply(&e, op.cmd.first_key()), &mut b);
                Pending {
                    token: 0,
                    slot: Slot::Done(b),
                    silent: false,
                    shape: None,
                }
            }
        };
        c.queue.insert(at + 1, pending);
        let mut later: Vec<Query> = rest.collect();
        if later.is_empty() {
            return false;
        }
        // Nothing else is deferred behind a group but reads joining it.
        match c.deferred.take() {
            Some(Deferred::Reads(more)) => later.extend(more),
            Some(d @ (Deferred::Watch(_) | Deferred::Wait { .. })) => {
                for q in &later {
                    let mut b = Vec::new();
                    q.encode(Reply::err("ERR internal: request order lost"), &mut b);
                    c.emit_encoded(b);
                }
                c.deferred = Some(d);
                return false;
            }
            None => {}
        }
        c.deferred = Some(Deferred::Reads(later));
        false
    }
}

/// The same reply for each request of `slot` (one, or each of a read
/// group's).
pub(super) fn each(slot: &Slot, reply: Vec<u8>) -> Vec<u8> {
    match slot {
        Slot::Read { group, .. } => reply.repeat(group.len()),
        _ => reply,
    }
}
