//! The member table: every cluster member's addresses, as the replicated
//! state has them.
//!
//! A membership change that adds a member carries its addresses in the
//! change's context ([`encode_member`]); every replica records them when it
//! applies the change, and the state machine's snapshot carries the whole
//! table ([`encode_table`]), so a member restored from a snapshot (a new
//! member gets one from the leader) knows every other member. The table
//! ([`Members`]) is written by the state machine on the raft driver's thread
//! and read by the client loop (`-MOVED`, `RAFT.NODES`) and the transport,
//! which follows it.
//!
//! Binary forms (integers little-endian), each decoded with typed errors
//! ([`MemberDecodeError`]) and canonical (what decodes re-encodes to the
//! same bytes):
//! * a member: `version:u8 (1) | family:u8 (4 or 6) | ip (4 or 16 bytes) |
//!   raft port:u16 | len:u8 | client address (len bytes of UTF-8 ip:port)`;
//! * the table: `version:u8 (1) | count:u32 | count × (id:u64 | len:u16 |
//!   member)`, ids ascending.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, PoisonError, RwLock};

/// One member of the cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Peer {
    /// Raft address (UDP and TCP, same port).
    pub raft: SocketAddr,
    /// Client (RESP) address, `host:port`, sent in `MOVED` redirects.
    pub client: String,
}

/// Version byte of [`encode_member`].
const MEMBER_V1: u8 = 1;
/// Version byte of [`encode_table`].
const TABLE_V1: u8 = 1;
/// Longest client address encoded.
pub const MAX_CLIENT_ADDR: usize = u8::MAX as usize;

/// Why member addresses or a member table did not decode.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MemberDecodeError {
    /// A version this build does not know.
    #[error("unknown member format version {0}")]
    Version(u8),
    /// An address family other than 4 or 6.
    #[error("unknown address family {0}")]
    Family(u8),
    /// The bytes end early.
    #[error("member addresses truncated")]
    Truncated,
    /// Bytes are left after the end.
    #[error("{0} bytes after the member addresses")]
    Trailing(usize),
    /// The client address is not UTF-8 `ip:port`.
    #[error("client address is not ip:port")]
    ClientAddr,
    /// A table entry with id 0.
    #[error("member id 0 in the table")]
    ZeroId,
    /// Table ids not strictly ascending (a duplicate or out of order).
    #[error("member {0} out of order in the table")]
    Order(u64),
}

/// Why member addresses cannot be encoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MemberEncodeError {
    /// The client address is not `ip:port` (what the decoder accepts).
    #[error("client address {0:?} is not ip:port")]
    ClientAddr(String),
}

/// A little reader over a byte slice: every take checks the length.
struct Bytes<'a>(&'a [u8]);

impl<'a> Bytes<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], MemberDecodeError> {
        if self.0.len() < n {
            return Err(MemberDecodeError::Truncated);
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }
    fn u8(&mut self) -> Result<u8, MemberDecodeError> {
        Ok(self.take(1)?[0])
    }
    fn u16(&mut self) -> Result<u16, MemberDecodeError> {
        let b = self.take(2)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }
    fn u32(&mut self) -> Result<u32, MemberDecodeError> {
        let mut a = [0u8; 4];
        a.copy_from_slice(self.take(4)?);
        Ok(u32::from_le_bytes(a))
    }
    fn u64(&mut self) -> Result<u64, MemberDecodeError> {
        let mut a = [0u8; 8];
        a.copy_from_slice(self.take(8)?);
        Ok(u64::from_le_bytes(a))
    }
    fn end(&self) -> Result<(), MemberDecodeError> {
        match self.0.len() {
            0 => Ok(()),
            n => Err(MemberDecodeError::Trailing(n)),
        }
    }
}

/// Appends the binary form of `peer` (see the module docs).
pub fn encode_member_into(peer: &Peer, out: &mut Vec<u8>) -> Result<(), MemberEncodeError> {
    let client = peer.client.as_bytes();
    if client.len() > MAX_CLIENT_ADDR || peer.client.parse::<SocketAddr>().is_err() {
        return Err(MemberEncodeError::ClientAddr(peer.client.clone()));
    }
    out.push(MEMBER_V1);
    match peer.raft.ip() {
        IpAddr::V4(ip) => {
            out.push(4);
            out.extend_from_slice(&ip.octets());
        }
        IpAddr::V6(ip) => {
            out.push(6);
            out.extend_from_slice(&ip.octets());
        }
    }
    out.extend_from_slice(&peer.raft.port().to_le_bytes());
    out.push(client.len() as u8);
    out.extend_from_slice(client);
    Ok(())
}

/// The binary form of `peer`: what a membership change that adds it
/// carries.
pub fn encode_member(peer: &Peer) -> Result<Vec<u8>, MemberEncodeError> {
    let mut out = Vec::with_capacity(24 + peer.client.len());
    encode_member_into(peer, &mut out)?;
    Ok(out)
}

fn member_from(r: &mut Bytes<'_>) -> Result<Peer, MemberDecodeError> {
    let v = r.u8()?;
    if v != MEMBER_V1 {
        return Err(MemberDecodeError::Version(v));
    }
    let ip = match r.u8()? {
        4 => {
            let mut a = [0u8; 4];
            a.copy_from_slice(r.take(4)?);
            IpAddr::V4(Ipv4Addr::from(a))
        }
        6 => {
            let mut a = [0u8; 16];
            a.copy_from_slice(r.take(16)?);
            IpAddr::V6(Ipv6Addr::from(a))
        }
        f => return Err(MemberDecodeError::Family(f)),
    };
    let port = r.u16()?;
    let len = r.u8()? as usize;
    let client = std::str::from_utf8(r.take(len)?).map_err(|_| MemberDecodeError::ClientAddr)?;
    if client.parse::<SocketAddr>().is_err() {
        return Err(MemberDecodeError::ClientAddr);
    }
    Ok(Peer {
        raft: SocketAddr::new(ip, port),
        client: client.to_string(),
    })
}

/// Decodes [`encode_member`]'s bytes (all of them).
pub fn decode_member(b: &[u8]) -> Result<Peer, MemberDecodeError> {
    let mut r = Bytes(b);
    let p = member_from(&mut r)?;
    r.end()?;
    Ok(p)
}

/// The binary form of a member table (see the module docs).
pub fn encode_table(table: &BTreeMap<u64, Peer>) -> Result<Vec<u8>, MemberEncodeError> {
    let mut out = vec![TABLE_V1];
    out.extend_from_slice(&(table.len() as u32).to_le_bytes());
    let mut one = Vec::new();
    for (id, p) in table {
        one.clear();
        encode_member_into(p, &mut one)?;
        out.extend_from_slice(&id.to_le_bytes());
        // A member is at most 2 + 16 + 2 + 1 + 255 bytes.
        out.extend_from_slice(&(one.len() as u16).to_le_bytes());
        out.extend_from_slice(&one);
    }
    Ok(out)
}

/// Decodes [`encode_table`]'s bytes (all of them).
pub fn decode_table(b: &[u8]) -> Result<BTreeMap<u64, Peer>, MemberDecodeError> {
    let mut r = Bytes(b);
    let v = r.u8()?;
    if v != TABLE_V1 {
        return Err(MemberDecodeError::Version(v));
    }
    let n = r.u32()?;
    let mut table = BTreeMap::new();
    let mut last = 0;
    for _ in 0..n {
        let id = r.u64()?;
        if id == 0 {
            return Err(MemberDecodeError::ZeroId);
        }
        if id <= last {
            return Err(MemberDecodeError::Order(id));
        }
        last = id;
        let len = r.u16()? as usize;
        table.insert(id, decode_member(r.take(len)?)?);
    }
    r.end()?;
    Ok(table)
}

/// Parses member addresses `RAFT_ADDR/CLIENT_ADDR`, e.g.
/// `127.0.0.1:7001/127.0.0.1:6381`.
pub fn parse_addrs(s: &str) -> Result<Peer, PeerParseError> {
    let (raft, client) = s.split_once('/').ok_or(PeerParseError::Shape)?;
    let raft: SocketAddr = raft
        .trim()
        .parse()
        .map_err(|_| PeerParseError::Addr(raft.into()))?;
    let client = client.trim();
    if client.is_empty() || client.parse::<SocketAddr>().is_err() {
        return Err(PeerParseError::Addr(client.into()));
    }
    Ok(Peer {
        raft,
        client: client.into(),
    })
}

/// Parses a peer specification `ID=RAFT_ADDR/CLIENT_ADDR`, e.g.
/// `1=127.0.0.1:7001/127.0.0.1:6381`.
pub fn parse_peer(s: &str) -> Result<(u64, Peer), PeerParseError> {
    let (id, rest) = s.split_once('=').ok_or(PeerParseError::Shape)?;
    if !rest.contains('/') {
        return Err(PeerParseError::Shape);
    }
    Ok((parse_id(id)?, parse_addrs(rest)?))
}

/// Parses a member id: a positive integer.
pub fn parse_id(s: &str) -> Result<u64, PeerParseError> {
    match s.trim().parse::<u64>() {
        Ok(id) if id > 0 => Ok(id),
        _ => Err(PeerParseError::Id(s.into())),
    }
}

/// Why a peer specification did not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PeerParseError {
    /// Not `ID=RAFT/CLIENT` (or `RAFT/CLIENT`).
    #[error("expected ID=RAFT_HOST:PORT/CLIENT_HOST:PORT")]
    Shape,
    /// The id is not a positive integer.
    #[error("bad peer id {0:?} (a positive integer)")]
    Id(String),
    /// An address is not `ip:port`.
    #[error("bad address {0:?} (ip:port)")]
    Addr(String),
}

#[derive(Debug, Default)]
struct Shared {
    table: RwLock<BTreeMap<u64, Peer>>,
    version: AtomicU64,
}

/// The member table, shared: written by the state machine as changes and
/// snapshots are applied, read by everyone else. Every write bumps
/// [`Members::version`], so a reader can tell it changed.
#[derive(Debug, Clone, Default)]
pub struct Members(Arc<Shared>);

impl Members {
    /// A table holding `table` (e.g. the members given at start).
    pub fn new(table: BTreeMap<u64, Peer>) -> Members {
        Members(Arc::new(Shared {
            table: RwLock::new(table),
            version: AtomicU64::new(1),
        }))
    }

    /// How many members there are.
    pub fn count(&self) -> usize {
        self.read(|t| t.len())
    }

    /// A copy of the table.
    pub fn table(&self) -> BTreeMap<u64, Peer> {
        self.read(|t| t.clone())
    }

    /// Member `id`'s addresses.
    pub fn get(&self, id: u64) -> Option<Peer> {
        self.read(|t| t.get(&id).cloned())
    }

    /// How many writes the table has seen (changes whenever it does).
    pub fn version(&self) -> u64 {
        self.0.version.load(Ordering::Acquire)
    }

    /// The client address of member `hint` as seen from member `me` (`None`
    /// for unknown, 0, or `me` itself): where `-MOVED` sends a client.
    pub fn client_of(&self, me: u64, hint: u64) -> Option<String> {
        if hint == 0 || hint == me {
            return None;
        }
        self.read(|t| t.get(&hint).map(|p| p.client.clone()))
    }

    /// The member other than `id` that already uses one of `peer`'s
    /// addresses, and that address.
    pub fn address_taken(&self, id: u64, peer: &Peer) -> Option<(u64, String)> {
        self.read(|t| {
            t.iter().filter(|(&i, _)| i != id).find_map(|(&i, p)| {
                if p.raft == peer.raft {
                    Some((i, peer.raft.to_string()))
                } else if p.client == peer.client {
                    Some((i, peer.client.clone()))
                } else {
                    None
                }
            })
        })
    }

    /// Records member `id`'s addresses.
    pub fn insert(&self, id: u64, peer: Peer) {
        self.write(|t| {
            t.insert(id, peer);
        });
    }

    /// Forgets member `id`.
    pub fn remove(&self, id: u64) {
        self.write(|t| {
            t.remove(&id);
        });
    }

    /// Replaces the whole table (from a snapshot).
    pub fn replace(&self, table: BTreeMap<u64, Peer>) {
        self.write(|t| *t = table);
    }

    fn read<R>(&self, f: impl FnOnce(&BTreeMap<u64, Peer>) -> R) -> R {
        // A writer never panics midway; a poisoned table is still whole.
        f(&self.0.table.read().unwrap_or_else(PoisonError::into_inner))
    }

    fn write(&self, f: impl FnOnce(&mut BTreeMap<u64, Peer>)) {
        f(&mut self.0.table.write().unwrap_or_else(PoisonError::into_inner));
        self.0.version.fetch_add(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer(raft: &str, client: &str) -> Peer {
        Peer {
            raft: raft.parse().expect("addr"),
            client: client.into(),
        }
    }

    #[test]
    fn peer_specs() {
        let ok = parse_peer("2=127.0.0.1:7002/127.0.0.1:6382").expect("parse");
        assert_eq!(ok, (2, peer("127.0.0.1:7002", "127.0.0.1:6382")));
        let table: &[(&str, PeerParseError)] = &[
            ("2=127.0.0.1:7002", PeerParseError::Shape),
            ("127.0.0.1:7002/127.0.0.1:1", PeerParseError::Shape),
            ("0=127.0.0.1:1/127.0.0.1:2", PeerParseError::Id("0".into())),
            ("x=127.0.0.1:1/127.0.0.1:2", PeerParseError::Id("x".into())),
            (
                "1=host:1/127.0.0.1:2",
                PeerParseError::Addr("host:1".into()),
            ),
            ("1=127.0.0.1:1/", PeerParseError::Addr("".into())),
        ];
        for (s, want) in table {
            assert_eq!(parse_peer(s).as_ref().err(), Some(want), "{s}");
        }
    }

    #[test]
    fn members_round_trip() {
        for p in [
            peer("127.0.0.1:7001", "127.0.0.1:6381"),
            peer("[::1]:7001", "[::1]:6381"),
            peer("10.0.0.9:0", "10.0.0.9:65535"),
        ] {
            let b = encode_member(&p).expect("encode");
            assert_eq!(decode_member(&b), Ok(p));
        }
        let t: BTreeMap<u64, Peer> = [
            (1, peer("127.0.0.1:7001", "127.0.0.1:6381")),
            (9, peer("[::1]:7009", "127.0.0.1:6389")),
        ]
        .into_iter()
        .collect();
        let b = encode_table(&t).expect("encode");
        assert_eq!(decode_table(&b), Ok(t));
        assert_eq!(
            decode_table(&encode_table(&BTreeMap::new()).expect("empty")),
            Ok(BTreeMap::new())
        );
        assert_eq!(
            encode_member(&peer("127.0.0.1:1", "somehost:6379")),
            Err(MemberEncodeError::ClientAddr("somehost:6379".into()))
        );
    }

    /// Every way member bytes can be bad gives its own error.
    #[test]
    fn bad_member_bytes() {
        use MemberDecodeError::*;
        let good = encode_member(&peer("127.0.0.1:7001", "127.0.0.1:6381")).expect("encode");
        let with = |i: usize, b: u8| {
            let mut v = good.clone();
            v[i] = b;
            v
        };
        let mut long = good.clone();
        long.push(0);
        let mut not_utf8 = good[..8].to_vec();
        not_utf8.extend_from_slice(&[2, 0xff, 0xfe]);
        let mut not_addr = good[..8].to_vec();
        not_addr.extend_from_slice(&[4, b'h', b'o', b's', b't']);
        let rows: &[(&str, Vec<u8>, MemberDecodeError)] = &[
            ("empty", vec![], Truncated),
            ("version 2", with(0, 2), Version(2)),
            ("family 5", with(1, 5), Family(5)),
            ("cut in the ip", good[..4].to_vec(), Truncated),
            (
                "cut in the client",
                good[..good.len() - 1].to_vec(),
                Truncated,
            ),
            ("a byte too many", long, Trailing(1)),
            ("client not UTF-8", not_utf8, ClientAddr),
            ("client not ip:port", not_addr, ClientAddr),
        ];
        for (name, bytes, want) in rows {
            assert_eq!(decode_member(bytes).as_ref(), Err(want), "{name}");
        }
    }

    #[test]
    fn bad_table_bytes() {
        use MemberDecodeError::*;
        let m = encode_member(&peer("127.0.0.1:7001", "127.0.0.1:6381")).expect("encode");
        let table = |ids: &[u64], count: u32, member: &[u8]| {
            let mut v = vec![TABLE_V1];
            v.extend_from_slice(&count.to_le_bytes());
            for id in ids {
                v.extend_from_slice(&id.to_le_bytes());
                v.extend_from_slice(&(member.len() as u16).to_le_bytes());
                v.extend_from_slice(member);
            }
            v
        };
        let rows: &[(&str, Vec<u8>, MemberDecodeError)] = &[
            ("version 0", vec![0, 0, 0, 0, 0], Version(0)),
            ("no count", vec![TABLE_V1, 0], Truncated),
            ("fewer entries than counted", table(&[1], 2, &m), Truncated),
            (
                "more entries than counted",
                table(&[1, 2], 1, &m),
                Trailing(8 + 2 + m.len()),
            ),
            ("id 0", table(&[0], 1, &m), ZeroId),
            ("id twice", table(&[3, 3], 2, &m), Order(3)),
            ("ids descending", table(&[4, 2], 2, &m), Order(2)),
            ("bad member", table(&[1], 1, &m[1..]), Version(4)),
        ];
        for (name, bytes, want) in rows {
            assert_eq!(decode_table(bytes).as_ref(), Err(want), "{name}");
        }
    }

    #[test]
    fn shared_table() {
        let a = peer("127.0.0.1:7001", "127.0.0.1:6381");
        let b = peer("127.0.0.1:7002", "127.0.0.1:6382");
        let m = Members::new([(1, a.clone())].into_iter().collect());
        let v0 = m.version();
        m.insert(2, b.clone());
        assert!(m.version() > v0);
        assert_eq!(m.client_of(1, 2).as_deref(), Some("127.0.0.1:6382"));
        assert_eq!(m.client_of(2, 2), None);
        assert_eq!(m.client_of(1, 0), None);
        assert_eq!(m.client_of(1, 7), None);
        let clash = peer("127.0.0.1:7001", "127.0.0.1:6399");
        assert_eq!(
            m.address_taken(4, &clash),
            Some((1, "127.0.0.1:7001".into()))
        );
        assert_eq!(m.address_taken(1, &clash), None);
        let clash = peer("127.0.0.1:7009", "127.0.0.1:6382");
        assert_eq!(
            m.address_taken(4, &clash),
            Some((2, "127.0.0.1:6382".into()))
        );
        m.remove(1);
        assert_eq!(m.table().keys().copied().collect::<Vec<_>>(), [2]);
        m.replace(BTreeMap::new());
        assert_eq!(m.get(2), None);
    }
}
