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
//! writes to a Raft group without a majority do.

use crate::resp::{decode_reply, encode_command, Command, Reply};
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// The reply of a part that ran but whose replies were lost.
pub const APPLIED_REPLY_LOST: &str =
    "TRYAGAIN applied, but its replies were lost in a leader change";

/// A blocking RESP connection to one member.
struct Conn {
    s: TcpStream,
    buf: Vec<u8>,
}

impl Conn {
    fn open(addr: SocketAddr, timeout: Duration) -> io::Result<Conn> {
        let s = TcpStream::connect_timeout(&addr, timeout)?;
        s.set_read_timeout(Some(timeout))?;
        s.set_write_timeout(Some(timeout))?;
        s.set_nodelay(true)?;
        Ok(Conn { s, buf: Vec::new() })
    }

    /// Sends `cmds` pipelined and reads one reply each.
    fn call(&mut self, cmds: &[Command]) -> io::Result<Vec<Reply>> {
        let mut out = Vec::new();
        for c in cmds {
            encode_command(c, &mut out);
        }
        self.s.write_all(&out)?;
        let mut replies = Vec::with_capacity(cmds.len());
        let mut chunk = [0u8; 16 << 10];
        while replies.len() < cmds.len() {
            match decode_reply(&self.buf) {
                Ok(Some((r, used))) => {
                    self.buf.drain(..used);
                    replies.push(r);
                    continue;
                }
                Ok(None) => {}
                Err(e) => return Err(io::Error::new(io::ErrorKind::InvalidData, e.to_string())),
            }
            let n = self.s.read(&mut chunk)?;
            if n == 0 {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
            self.buf.extend_from_slice(&chunk[..n]);
        }
        Ok(replies)
    }
}

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
    members: Vec<SocketAddr>,
    next: usize,
    conn: Option<Conn>,
    timeout: Duration,
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
            members,
            next: 0,
            conn: None,
            timeout,
            marker: format!("__xlane:pipe:{shard}").into_bytes(),
            stats: ApplierStats::default(),
        }
    }

    /// The counters.
    pub fn stats(&self) -> ApplierStats {
        self.stats
    }

    fn call(&mut self, cmds: &[Command]) -> io::Result<Vec<Reply>> {
        if self.conn.is_none() {
            let addr = self.members[self.next % self.members.len().max(1)];
            self.conn = Some(Conn::open(addr, self.timeout)?);
        }
        let r = self.conn.as_mut().expect("connected").call(cmds);
        if r.is_err() {
            self.drop_conn(None);
        }
        r
    }

    /// Leaves the current member: for `to` when a redirect names it, else
    /// for the next member in the list.
    fn drop_conn(&mut self, to: Option<SocketAddr>) {
        self.conn = None;
        match to.and_then(|a| self.members.iter().position(|m| *m == a)) {
            Some(i) => self.next = i,
            None => {
                if let Some(a) = to {
                    self.members.push(a);
                    self.next = self.members.len() - 1;
                } else {
                    self.next += 1;
                }
            }
        }
    }

    /// Whether `r` says to go elsewhere or wait (a redirect, no leader, an
    /// unavailable group): follows it and returns true.
    fn redirected(&mut self, r: &Reply) -> bool {
        let Reply::Error(e) = r else { return false };
        if let Some(rest) = e.strip_prefix("MOVED ") {
            let to = rest.split(' ').nth(1).and_then(|a| a.parse().ok());
            self.drop_conn(to);
            return true;
        }
        if e.starts_with("TRYAGAIN") || e.starts_with("ERR replication unavailable") {
            self.drop_conn(None);
            return true;
        }
        false
    }

    /// Runs `cmds` once on the shard, tagged `tag` (unique per part):
    /// one reply per command, or one error for them all.
    pub fn apply(&mut self, cmds: &[Command], tag: &[u8]) -> Reply {
        let m = self.marker.clone();
        let mut body = vec![words(&[b"MULTI"])];
        body.extend(cmds.iter().cloned());
        body.push(words(&[b"SET", &m, tag]));
        body.push(words(&[b"EXEC"]));
        let mut first = true;
        loop {
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
