//! What travels between the transaction proxy and the shard appliers: a
//! shard's part of a transaction inside a 1Pipe message, and the shard's
//! answer in a UDP datagram back to the proxy.
//!
//! Encoding (version 1), integers little-endian:
//! - [`SubTxn`]: `version:u8 | id:u64 | reply ip:4 | reply port:u16 |
//!   commands:u16 | each command: words:u16 | each word: len:u32 | bytes`;
//! - [`ShardReply`]: `version:u8 | id:u64 | shard:u32 | reply` with the
//!   reply in RESP2.
//!
//! Both decoders check every length against what is left and refuse
//! trailing bytes: a datagram from anywhere gets a typed error, never a
//! panic.

use crate::resp::{decode_reply, Command, Reply};
use std::net::{Ipv4Addr, SocketAddrV4};

/// Version byte of both encodings.
pub const MSG_VERSION: u8 = 1;

/// Most commands in one shard's part (and words in one command).
pub const MAX_ITEMS: usize = u16::MAX as usize;

/// Why a message was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MsgError {
    /// It ends before a length it announces.
    #[error("message truncated")]
    Truncated,
    /// An unknown version byte.
    #[error("unknown message version {0}")]
    Version(u8),
    /// Bytes after the end of the message.
    #[error("{0} bytes after the end of the message")]
    Trailing(usize),
    /// The reply is not valid RESP.
    #[error("the reply is not valid RESP")]
    Reply,
    /// More commands or words than the encoding holds.
    #[error("more than {MAX_ITEMS} commands or words")]
    TooMany,
}

/// One shard's part of a transaction: the commands it runs, in order, as
/// one atomic unit at the transaction's place in the total order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubTxn {
    /// The proxy's number for the transaction (unique per proxy).
    pub id: u64,
    /// Where the shard sends its [`ShardReply`].
    pub reply_to: SocketAddrV4,
    /// The commands.
    pub cmds: Vec<Command>,
}

/// A shard's answer to a [`SubTxn`].
#[derive(Debug, Clone, PartialEq)]
pub struct ShardReply {
    /// The transaction's [`SubTxn::id`].
    pub id: u64,
    /// The shard that ran it.
    pub shard: u32,
    /// One reply per command as an array, or one error for them all.
    pub reply: Reply,
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], MsgError> {
        if self.0.len() < n {
            return Err(MsgError::Truncated);
        }
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        Ok(a)
    }
    fn u8(&mut self) -> Result<u8, MsgError> {
        Ok(self.take(1)?[0])
    }
    fn u16(&mut self) -> Result<u16, MsgError> {
        Ok(u16::from_le_bytes(self.take(2)?.try_into().expect("2")))
    }
    fn u32(&mut self) -> Result<u32, MsgError> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().expect("4")))
    }
    fn u64(&mut self) -> Result<u64, MsgError> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into().expect("8")))
    }
    fn version(&mut self) -> Result<(), MsgError> {
        match self.u8()? {
            MSG_VERSION => Ok(()),
            v => Err(MsgError::Version(v)),
        }
    }
    fn end(&self) -> Result<(), MsgError> {
        match self.0.len() {
            0 => Ok(()),
            n => Err(MsgError::Trailing(n)),
        }
    }
}

impl SubTxn {
    /// Appends the encoding to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) -> Result<(), MsgError> {
        if self.cmds.len() > MAX_ITEMS || self.cmds.iter().any(|c| c.len() > MAX_ITEMS) {
            return Err(MsgError::TooMany);
        }
        out.push(MSG_VERSION);
        out.extend_from_slice(&self.id.to_le_bytes());
        out.extend_from_slice(&self.reply_to.ip().octets());
        out.extend_from_slice(&self.reply_to.port().to_le_bytes());
        out.extend_from_slice(&(self.cmds.len() as u16).to_le_bytes());
        for c in &self.cmds {
            out.extend_from_slice(&(c.len() as u16).to_le_bytes());
            for w in c {
                out.extend_from_slice(&(w.len() as u32).to_le_bytes());
                out.extend_from_slice(w);
            }
        }
        Ok(())
    }

    /// Decodes one message, all of `b`.
    pub fn decode(b: &[u8]) -> Result<SubTxn, MsgError> {
        let mut r = Reader(b);
        r.version()?;
        let id = r.u64()?;
        let ip: [u8; 4] = r.take(4)?.try_into().expect("4");
        let port = r.u16()?;
        let n = r.u16()? as usize;
        // Every command takes at least two bytes: no allocation beyond
        // what the message can hold.
        let mut cmds = Vec::with_capacity(n.min(r.0.len() / 2));
        for _ in 0..n {
            let words = r.u16()? as usize;
            let mut c = Vec::with_capacity(words.min(r.0.len() / 4));
            for _ in 0..words {
                let len = r.u32()? as usize;
                c.push(r.take(len)?.to_vec());
            }
            cmds.push(c);
        }
        r.end()?;
        Ok(SubTxn {
            id,
            reply_to: SocketAddrV4::new(Ipv4Addr::from(ip), port),
            cmds,
        })
    }
}

impl ShardReply {
    /// Appends the encoding to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.push(MSG_VERSION);
        out.extend_from_slice(&self.id.to_le_bytes());
        out.extend_from_slice(&self.shard.to_le_bytes());
        self.reply.encode(out);
    }

    /// Decodes one datagram, all of `b`.
    pub fn decode(b: &[u8]) -> Result<ShardReply, MsgError> {
        let mut r = Reader(b);
        r.version()?;
        let id = r.u64()?;
        let shard = r.u32()?;
        let (reply, used) = match decode_reply(r.0) {
            Ok(Some(x)) => x,
            Ok(None) => return Err(MsgError::Truncated),
            Err(_) => return Err(MsgError::Reply),
        };
        r.take(used)?;
        r.end()?;
        Ok(ShardReply { id, shard, reply })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(s: &str) -> Vec<u8> {
        s.as_bytes().to_vec()
    }

    #[test]
    fn round_trips() {
        let t = SubTxn {
            id: 7,
            reply_to: "10.0.0.3:7500".parse().unwrap(),
            cmds: vec![vec![w("SET"), w("a"), w("1")], vec![w("GET"), w("")]],
        };
        let mut b = Vec::new();
        t.encode(&mut b).unwrap();
        assert_eq!(SubTxn::decode(&b), Ok(t));
        let r = ShardReply {
            id: 9,
            shard: 2,
            reply: Reply::Array(Some(vec![Reply::ok(), Reply::nil()])),
        };
        let mut b = Vec::new();
        r.encode(&mut b);
        assert_eq!(ShardReply::decode(&b), Ok(r));
    }

    #[test]
    fn refusals_table() {
        let mut good = Vec::new();
        SubTxn {
            id: 1,
            reply_to: "1.2.3.4:5".parse().unwrap(),
            cmds: vec![vec![w("GET"), w("k")]],
        }
        .encode(&mut good)
        .unwrap();
        let mut extra = good.clone();
        extra.push(0);
        let mut badver = good.clone();
        badver[0] = 9;
        let cases: Vec<(&str, Vec<u8>, MsgError)> = vec![
            ("empty", vec![], MsgError::Truncated),
            ("version", badver, MsgError::Version(9)),
            ("cut", good[..good.len() - 1].to_vec(), MsgError::Truncated),
            ("trailing", extra, MsgError::Trailing(1)),
        ];
        for (name, b, want) in cases {
            assert_eq!(SubTxn::decode(&b), Err(want), "{name}");
        }
        let mut r = vec![MSG_VERSION];
        r.extend_from_slice(&[0; 12]);
        r.extend_from_slice(b"?x\r\n");
        assert_eq!(ShardReply::decode(&r), Err(MsgError::Reply));
    }
}
