//! `WAIT` and `ROLE`: what the member's raft log tells of the other
//! members.
//!
//! `WAIT numreplicas timeout` starts once every earlier request of its
//! connection is answered. Each of that connection's writes is then
//! applied here, so committed, so at or below this member's commit index.
//! The reply counts the other members whose log holds that index (raft's
//! `matched`, which the leader learns from their acknowledgements): Redis's
//! count of the replicas that acknowledged the connection's writes. With
//! fewer than `numreplicas` the connection blocks until enough hold it or
//! the timeout passes (0: no limit), then answers the count. A committed
//! write is already on a majority, so in a group of three `WAIT 1 0`
//! answers at least 1 at once; a single node has no other member and
//! answers 0, as a Redis without replicas. A follower answers Redis's
//! error for a replica; a leader that loses its leadership while clients
//! wait answers each the count it last knew. Inside `MULTI` it is refused:
//! its count is this member's, not an op's.
//!
//! `ROLE` answers in Redis's shape: the leader is `master` with its
//! applied index as the offset and, per other member, its client address
//! and `matched` index; a follower is `slave` of the leader's client
//! address, `connected` (`connect` while it knows no leader) at its
//! applied index.

use super::blocking::{ReplicaWait, Waiter};
use super::conn::Slot;
use super::ClientLoop;
use crate::resp::Reply;
use std::time::{Duration, Instant};
use xlane_xraft::driver::Submit;

/// `WAIT` on a follower (Redis's text for a replica).
pub(super) const ERR_WAIT_REPLICA: &str = "ERR WAIT cannot be used with replica instances. \
     Please also note that since Redis 4.0 if a replica is configured to be writable (which \
     is not the default) writes to replicas are just local and are not propagated.";

impl ClientLoop {
    /// Connection `id`'s `WAIT`, its earlier requests all answered: the
    /// count now, or the connection blocks for more.
    pub(super) fn wait_start(&mut self, id: u64, needed: i64, timeout_ms: u64, sub: &dyn Submit) {
        let pos = sub.positions();
        let Some(c) = self.conns.get_mut(&id) else {
            return;
        };
        let acked = pos.holding(pos.commit) as i64;
        if acked >= needed {
            c.emit(&Reply::Integer(acked));
            return;
        }
        c.wait(0, Slot::Blocked);
        c.blocked = true;
        let deadline = (timeout_ms > 0).then(|| Instant::now() + Duration::from_millis(timeout_ms));
        self.waiters.block(
            id,
            Waiter {
                args: Vec::new(),
                keys: Vec::new(),
                deadline,
                timeout_reply: Reply::Integer(acked),
                in_flight: None,
                replicas: Some(ReplicaWait {
                    needed,
                    index: pos.commit,
                }),
            },
        );
    }

    /// The `WAIT`s to answer now, with their replies: those enough members
    /// hold, and all of them off the leader (with the count each last
    /// knew). The others' timeout replies are brought up to date.
    pub(super) fn replica_waits_done(
        &mut self,
        sub: &dyn Submit,
        leader: bool,
    ) -> Vec<(u64, Reply)> {
        let waits = self.waiters.replica_waits();
        if waits.is_empty() {
            return Vec::new();
        }
        let pos = sub.positions();
        let mut done = Vec::new();
        for (conn, w) in waits {
            let Some(waiter) = self.waiters.get_mut(conn) else {
                continue;
            };
            if !leader {
                done.push((conn, waiter.timeout_reply.clone()));
                continue;
            }
            let acked = pos.holding(w.index) as i64;
            waiter.timeout_reply = Reply::Integer(acked);
            if acked >= w.needed {
                done.push((conn, Reply::Integer(acked)));
            }
        }
        done
    }

    /// `ROLE`'s reply.
    pub(super) fn role_reply(&self, sub: &dyn Submit) -> Reply {
        let pos = sub.positions();
        let leader = sub.leader();
        let int = |n: u64| Reply::Integer(n as i64);
        if leader == self.me || self.members.count() <= 1 {
            let others = pos
                .matched
                .iter()
                .map(|&(id, matched)| {
                    let (host, port) = split_addr(self.members.client_of(self.me, id));
                    Reply::Array(Some(vec![
                        Reply::bulk(host),
                        Reply::bulk(port),
                        Reply::bulk(matched.to_string()),
                    ]))
                })
                .collect();
            return Reply::Array(Some(vec![
                Reply::bulk("master"),
                int(pos.applied),
                Reply::Array(Some(others)),
            ]));
        }
        let (host, port) = split_addr(self.members.client_of(self.me, leader));
        let state = if leader == 0 { "connect" } else { "connected" };
        Reply::Array(Some(vec![
            Reply::bulk("slave"),
            Reply::bulk(host),
            Reply::Integer(port.parse().unwrap_or(-1)),
            Reply::bulk(state),
            int(pos.applied),
        ]))
    }
}

/// `host` and `port` of a member's client address (`?` and `0` when
/// unknown).
fn split_addr(addr: Option<String>) -> (String, String) {
    match addr.as_deref().and_then(|a| a.rsplit_once(':')) {
        Some((h, p)) => (h.trim_matches(['[', ']']).to_string(), p.to_string()),
        None => ("?".to_string(), "0".to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::split_addr;

    #[test]
    fn addresses_split_into_host_and_port() {
        let cases = [
            (Some("10.0.0.1:6379"), ("10.0.0.1", "6379")),
            (Some("[::1]:7000"), ("::1", "7000")),
            (None, ("?", "0")),
            (Some("nocolon"), ("?", "0")),
        ];
        for (addr, (h, p)) in cases {
            assert_eq!(
                split_addr(addr.map(str::to_string)),
                (h.to_string(), p.to_string()),
                "{addr:?}"
            );
        }
    }
}
