//! A blocking RESP client of a Raft group: pipelined calls to one member,
//! following `-MOVED` to the leader and moving on to the next member when
//! one is unreachable or has no leader. For daemons that keep their state
//! in an `xlane kv` group (the shard appliers, the 1Pipe recovery
//! coordinator).

use crate::resp::{decode_reply, encode_command, Command, Reply};
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

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

/// A client of a group's members.
pub struct Client {
    members: Vec<SocketAddr>,
    next: usize,
    conn: Option<Conn>,
    timeout: Duration,
}

impl Client {
    /// A client of the members serving RESP on `members`; `timeout`
    /// bounds one connection attempt and one round trip.
    pub fn new(members: Vec<SocketAddr>, timeout: Duration) -> Self {
        Client {
            members,
            next: 0,
            conn: None,
            timeout,
        }
    }

    /// Sends `cmds` pipelined to the current member and reads one reply
    /// each. On an error the connection is dropped and the next call goes
    /// to the next member.
    pub fn call(&mut self, cmds: &[Command]) -> io::Result<Vec<Reply>> {
        if self.conn.is_none() {
            let addr = self.members[self.next % self.members.len().max(1)];
            self.conn = Some(Conn::open(addr, self.timeout)?);
        }
        let r = self.conn.as_mut().expect("connected").call(cmds);
        if r.is_err() {
            self.leave(None);
        }
        r
    }

    /// Leaves the current member: for `to` when a redirect names it, else
    /// for the next member in the list.
    fn leave(&mut self, to: Option<SocketAddr>) {
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
    pub fn redirected(&mut self, r: &Reply) -> bool {
        let Reply::Error(e) = r else { return false };
        if let Some(rest) = e.strip_prefix("MOVED ") {
            let to = rest.split(' ').nth(1).and_then(|a| a.parse().ok());
            self.leave(to);
            return true;
        }
        if e.starts_with("TRYAGAIN") || e.starts_with("ERR replication unavailable") {
            self.leave(None);
            return true;
        }
        false
    }
}
