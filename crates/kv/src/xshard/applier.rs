//! A shard's applier: it takes the shard's parts of transactions in the
//! order 1Pipe delivers them and runs each on the shard's Raft group as
//! one `MULTI`/`EXEC`, exactly once, following the leader.
//!
//! Exactly once across leader changes: every part also writes the
//! applier's **marker key** (`__xlane:pipe:<shard>`) with the part's tag
//! (its 1Pipe timestamp and sender), under a `WATCH` of the marker taken
//! in the same pipeline. When a reply is lost (the leader died, a
//! redirect, a timeout) the applier reconnects, reads the marker under a
//! fresh `WATCH`, and either finds its tag (the part ran; its replies are
//! gone, and the client hears `TRYAGAIN applied`) or runs the part again.
//! A stale `EXEC` still in flight from before cannot apply later, because
//! the marker it watched has moved on: Raft applies the `WATCH` check with
//! the `EXEC`, in log order.
//!
//! A part is never given up: the others of its transaction may have run
//! on their shards already. While its shard has no leader the applier
//! keeps trying (every 20 ms), and the shard's later parts wait, as
//! writes to a Raft group without a majority do; only a stop (SIGTERM)
//! ends the wait, and the stopped applier's shard then misses the part
//! (the restart of an applier is still to come, docs/pipe.md).

use crate::client::Client;
use crate::resp::{Command, Reply};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// The reply of a part that ran but whose replies were lost.
pub const APPLIED_REPLY_LOST: &str =
    "TRYAGAIN applied, but its replies were lost in a leader change";

/// What the applier counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ApplierStats {
    /// Parts run.
    pub applied: u64,
    /// Attempts that lost their reply or met a redirect, and were resolved
    /// through the marker.
    pub retries: u64,
    /// Parts that ran but whose replies were lost.
    pub replies_lost: u64,
}

/// Runs one shard's parts on its Raft group.
pub struct Applier {
    client: Client,
    marker: Vec<u8>,
    stats: ApplierStats,
}

fn words(ws: &[&[u8]]) -> Command {
    ws.iter().map(|w| w.to_vec()).collect()
}

impl Applier {
    /// The applier of shard `shard`, whose members serve RESP on
    /// `members`; `timeout` bounds one round trip.
    pub fn new(shard: u32, members: Vec<SocketAddr>, timeout: Duration) -> Self {
        Applier {
            client: Client::new(members, timeout),
            marker: format!("__xlane:pipe:{shard}").into_bytes(),
            stats: ApplierStats::default(),
        }
    }

    /// The counters.
    pub fn stats(&self) -> ApplierStats {
        self.stats
    }

    fn call(&mut self, cmds: &[Command]) -> std::io::Result<Vec<Reply>> {
        self.client.call(cmds)
    }

    fn redirected(&mut self, r: &Reply) -> bool {
        self.client.redirected(r)
    }

    /// Runs `cmds` once on the shard, tagged `tag` (unique per part):
    /// one reply per command, or one error for them all. It keeps trying
    /// while the shard has no leader, until `stop` is set: then the part
    /// may or may not have run, and the reply says so.
    pub fn apply(&mut self, cmds: &[Command], tag: &[u8], stop: &AtomicBool) -> Reply {
        let m = self.marker.clone();
        let mut body = vec![words(&[b"MULTI"])];
        body.extend(cmds.iter().cloned());
        body.push(words(&[b"SET", &m, tag]));
        body.push(words(&[b"EXEC"]));
        let mut first = true;
        loop {
            if stop.load(Ordering::Relaxed) {
                return Reply::err("TRYAGAIN the applier is stopping: the part may not have run");
            }
            let batch = if first {
                // The tag is new: WATCH the marker and run, one pipeline.
                first = false;
                let mut b = vec![words(&[b"WATCH", &m])];
                b.extend(body.iter().cloned());
                b
            } else {
                // After a lost reply: WATCH and read the marker first, so
                // nothing that committed before the WATCH runs twice.
                self.stats.retries += 1;
                std::thread::sleep(Duration::from_millis(20));
                let Ok(rs) = self.call(&[words(&[b"WATCH", &m]), words(&[b"GET", &m])]) else {
                    continue;
                };
                if rs.iter().any(|r| self.redirected(r)) {
                    continue;
                }
                if rs[1] == Reply::bulk(tag) {
                    let _ = self.call(&[words(&[b"UNWATCH"])]);
                    self.stats.replies_lost += 1;
                    return Reply::err(APPLIED_REPLY_LOST);
                }
                body.clone()
            };
            let Ok(rs) = self.call(&batch) else { continue };
            // A redirect anywhere (MULTI on a follower, say): not applied.
            if rs.iter().any(|r| self.redirected(r)) {
                continue;
            }
            match rs.last() {
                Some(Reply::Array(Some(items))) if items.len() == cmds.len() + 1 => {
                    self.stats.applied += 1;
                    return Reply::Array(Some(items[..cmds.len()].to_vec()));
                }
                // The WATCH fired: a stale EXEC moved the marker. Look again.
                Some(Reply::Array(None)) => {}
                // EXECABORT and the like: the part did not run, and will
                // not if sent again.
                Some(Reply::Error(e)) => return Reply::Error(e.clone()),
                _ => {}
            }
        }
    }
}
