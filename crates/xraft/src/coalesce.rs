//! One append per follower and Ready, and no more commit notices than followers need.
//!
//! * A commit notice (an empty append that tells followers a new commit index) goes
//!   out only when no entry is in flight ([`tell_commit`]): while the leader's log holds
//!   uncommitted entries, the append that carries the next entries, or the notice sent
//!   once those are committed, or the next heartbeat, brings the commit index to the
//!   followers. Under a stream of writes a follower then wakes once per batch (entries
//!   and the commit index of the batch before) instead of twice, as a Redis replica
//!   wakes once per batch its primary propagates.
//! * A commit notice that a later append of the same Ready subsumes is dropped
//!   ([`subsume_commit_notices`]), so a Ready that commits and proposes sends one
//!   datagram per follower and gets one answer.

use raft::eraftpb::{Message, MessageType};
use raft::{Raft, StateRole, Storage};

/// Tells the followers the commit index (raft's `bcast_append`) when it advanced since
/// the last call (`seen`) and nothing is in flight: every entry of the leader's log is
/// committed. With entries in flight the notice waits (see the module docs); raft is
/// configured with `skip_bcast_commit`, so this is the only place commit notices come
/// from (but for pending membership changes, which raft still broadcasts). Called once
/// per Ready, after the turn's proposals joined the log. Bounded: one message per
/// follower.
pub(crate) fn tell_commit<T: Storage>(raft: &mut Raft<T>, seen: &mut u64) {
    let committed = raft.raft_log.committed;
    if raft.state == StateRole::Leader
        && committed > *seen
        && raft.raft_log.last_index() == committed
    {
        raft.bcast_append();
    }
    *seen = committed;
}

/// Drops each empty append (a commit notice) that a later append of the same Ready to
/// the same peer subsumes: same term, same place in the log (`index`, `log_term`), so
/// the follower checks the same thing and answers alike; the later one carries the
/// larger commit index (a follower caps it at the entries it holds). A turn that steps
/// the peers' answers (a new commit index) and proposes new entries then sends one
/// append per follower instead of two, and gets one answer. Bounded work, no
/// allocation.
pub(crate) fn subsume_commit_notices(msgs: &mut Vec<Message>) {
    let mut i = 0;
    while i < msgs.len() {
        let m = &msgs[i];
        let notice = m.get_msg_type() == MessageType::MsgAppend && m.entries.is_empty();
        let later = notice
            .then(|| {
                (i + 1..msgs.len()).find(|&j| {
                    let n = &msgs[j];
                    n.get_msg_type() == MessageType::MsgAppend
                        && (n.to, n.term, n.index, n.log_term)
                            == (m.to, m.term, m.index, m.log_term)
                })
            })
            .flatten();
        match later {
            Some(j) => {
                let commit = msgs[i].commit;
                if msgs[j].commit < commit {
                    msgs[j].commit = commit;
                }
                msgs.remove(i);
            }
            None => i += 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use raft::eraftpb::Entry;

    /// (to, type, term, index, log_term, commit, entries)
    type Msg = (u64, MessageType, u64, u64, u64, u64, usize);

    fn msg(&(to, ty, term, index, log_term, commit, ents): &Msg) -> Message {
        let mut m = Message::default();
        m.set_msg_type(ty);
        m.to = to;
        m.term = term;
        m.index = index;
        m.log_term = log_term;
        m.commit = commit;
        for _ in 0..ents {
            m.mut_entries().push(Entry::default());
        }
        m
    }

    fn fields(m: &Message) -> Msg {
        let (to, ty, term, index) = (m.to, m.get_msg_type(), m.term, m.index);
        (to, ty, term, index, m.log_term, m.commit, m.entries.len())
    }

    #[test]
    fn commit_notices_subsumed_by_a_later_append() {
        use MessageType::{MsgAppend as A, MsgHeartbeat as H};
        let rows: &[(&str, &[Msg], &[Msg])] = &[
            (
                "notice then entries from the same place: one append, larger commit",
                &[(2, A, 3, 10, 3, 9, 0), (2, A, 3, 10, 3, 8, 2)],
                &[(2, A, 3, 10, 3, 9, 2)],
            ),
            (
                "per peer",
                &[
                    (2, A, 3, 10, 3, 9, 0),
                    (3, A, 3, 7, 3, 9, 0),
                    (2, A, 3, 10, 3, 9, 1),
                    (3, A, 3, 7, 3, 9, 4),
                ],
                &[(2, A, 3, 10, 3, 9, 1), (3, A, 3, 7, 3, 9, 4)],
            ),
            (
                "entries first: the notice after them says more, both go",
                &[(2, A, 3, 10, 3, 8, 2), (2, A, 3, 12, 3, 9, 0)],
                &[(2, A, 3, 10, 3, 8, 2), (2, A, 3, 12, 3, 9, 0)],
            ),
            (
                "another place in the log: both go",
                &[(2, A, 3, 10, 3, 9, 0), (2, A, 3, 11, 3, 9, 1)],
                &[(2, A, 3, 10, 3, 9, 0), (2, A, 3, 11, 3, 9, 1)],
            ),
            (
                "another term: both go",
                &[(2, A, 3, 10, 3, 9, 0), (2, A, 4, 10, 3, 9, 1)],
                &[(2, A, 3, 10, 3, 9, 0), (2, A, 4, 10, 3, 9, 1)],
            ),
            (
                "heartbeats are left alone",
                &[(2, H, 3, 0, 0, 9, 0), (2, A, 3, 10, 3, 9, 1)],
                &[(2, H, 3, 0, 0, 9, 0), (2, A, 3, 10, 3, 9, 1)],
            ),
            (
                "two notices and entries: one append",
                &[
                    (2, A, 3, 10, 3, 8, 0),
                    (2, A, 3, 10, 3, 9, 0),
                    (2, A, 3, 10, 3, 7, 1),
                ],
                &[(2, A, 3, 10, 3, 9, 1)],
            ),
        ];
        for (name, input, want) in rows {
            let mut msgs: Vec<Message> = input.iter().map(msg).collect();
            subsume_commit_notices(&mut msgs);
            let got: Vec<Msg> = msgs.iter().map(fields).collect();
            assert_eq!(&got, want, "{name}");
        }
    }
}
