//! Wire formats of X-Raft: proposal batches, raft message codec, fragmentation for small-MTU
//! transports, and the [`Transport`] abstraction with its two traffic classes.
//!
//! * A **batch** packs many concurrent client proposals into the data of one Raft entry
//!   (X-Raft "batches parallel consensus instances", paper §5.2). Each op carries its
//!   [`ProposalId`] so the proposer can match the applied result to its waiting client.
//! * A **raft message** is serialized with the `raft` crate's protobuf codec and, when it is
//!   larger than the express lane's packet, split into fragments of at most `mtu` bytes that
//!   a [`Reassembler`] puts back together (tolerating duplicates, reordering; dropping
//!   incomplete messages after a timeout). Snapshots and other bulky messages may instead be
//!   sent whole over the *regular* (bulk) class.
//!
//! Batch layout (little endian):
//! `magic 0xB7 | count u32 | count × (node u64 | seq u64 | len u32 | op[len])`.
//!
//! Datagram layout: first byte is the kind.
//! * `0x01` fragment: `msg_id u64 | index u16 | count u16 | total_len u32 | chunk`
//! * `0x02` whole message: `raft protobuf bytes`

use std::collections::{BTreeMap, HashMap, VecDeque};

use protobuf::Message as PbMessage;
use raft::eraftpb::{Message, MessageType};

/// Identifies one client proposal: the proposing node and a per-node sequence number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ProposalId {
    /// Raft id of the node that accepted the proposal.
    pub node: u64,
    /// Sequence number, unique per node incarnation.
    pub seq: u64,
}

/// Magic byte that starts every encoded batch.
pub const BATCH_MAGIC: u8 = 0xB7;
/// Bytes of the batch header (magic + count).
pub const BATCH_HEADER_LEN: usize = 5;
/// Bytes of per-op overhead in a batch (node + seq + len).
pub const BATCH_OP_OVERHEAD: usize = 20;

/// Errors while decoding a batch.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BatchDecodeError {
    /// The buffer ends before the structure it announces.
    #[error("batch truncated: need {need} bytes at offset {at}, have {have}")]
    Truncated {
        /// Offset where the missing field starts.
        at: usize,
        /// Bytes needed.
        need: usize,
        /// Bytes available from `at`.
        have: usize,
    },
    /// The first byte is not [`BATCH_MAGIC`].
    #[error("bad batch magic {0:#04x}")]
    BadMagic(u8),
    /// The announced op count cannot fit in the buffer.
    #[error("batch announces {count} ops, impossible in {len} bytes")]
    ImpossibleCount {
        /// Announced op count.
        count: u32,
        /// Buffer length.
        len: usize,
    },
    /// Bytes remain after the last op.
    #[error("{0} trailing bytes after batch")]
    TrailingBytes(usize),
}

/// Errors while encoding a batch.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BatchEncodeError {
    /// More than `u32::MAX` ops.
    #[error("too many ops in batch: {0}")]
    TooManyOps(usize),
    /// One op is larger than `u32::MAX` bytes.
    #[error("op of {0} bytes too large")]
    OpTooLarge(usize),
}

/// Exact encoded size of a batch holding ops of the given lengths.
pub fn batch_encoded_len<'a>(ops: impl IntoIterator<Item = &'a [u8]>) -> usize {
    BATCH_HEADER_LEN
        + ops
            .into_iter()
            .map(|o| BATCH_OP_OVERHEAD + o.len())
            .sum::<usize>()
}

/// Encodes a batch of `(id, op)` pairs.
pub fn encode_batch(ops: &[(ProposalId, Vec<u8>)]) -> Result<Vec<u8>, BatchEncodeError> {
    let count = u32::try_from(ops.len()).map_err(|_| BatchEncodeError::TooManyOps(ops.len()))?;
    let mut out = Vec::with_capacity(batch_encoded_len(ops.iter().map(|(_, o)| o.as_slice())));
    out.push(BATCH_MAGIC);
    out.extend_from_slice(&count.to_le_bytes());
    for (id, op) in ops {
        let len = u32::try_from(op.len()).map_err(|_| BatchEncodeError::OpTooLarge(op.len()))?;
        out.extend_from_slice(&id.node.to_le_bytes());
        out.extend_from_slice(&id.seq.to_le_bytes());
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(op);
    }
    Ok(out)
}

fn take<'a>(buf: &'a [u8], at: &mut usize, n: usize) -> Result<&'a [u8], BatchDecodeError> {
    let have = buf.len().saturating_sub(*at);
    if have < n {
        return Err(BatchDecodeError::Truncated {
            at: *at,
            need: n,
            have,
        });
    }
    let s = &buf[*at..*at + n];
    *at += n;
    Ok(s)
}

fn le_u64(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[..8]);
    u64::from_le_bytes(a)
}

fn le_u32(b: &[u8]) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[..4]);
    u32::from_le_bytes(a)
}

fn le_u16(b: &[u8]) -> u16 {
    u16::from_le_bytes([b[0], b[1]])
}

/// Decodes a batch; ops borrow from `buf`.
pub fn decode_batch(buf: &[u8]) -> Result<Vec<(ProposalId, &[u8])>, BatchDecodeError> {
    let mut at = 0;
    let magic = take(buf, &mut at, 1)?[0];
    if magic != BATCH_MAGIC {
        return Err(BatchDecodeError::BadMagic(magic));
    }
    let count = le_u32(take(buf, &mut at, 4)?);
    let max_ops = (buf.len() - at) / BATCH_OP_OVERHEAD;
    if count as usize > max_ops {
        return Err(BatchDecodeError::ImpossibleCount {
            count,
            len: buf.len(),
        });
    }
    let mut ops = Vec::with_capacity(count as usize);
    for _ in 0..count {
        let node = le_u64(take(buf, &mut at, 8)?);
        let seq = le_u64(take(buf, &mut at, 8)?);
        let len = le_u32(take(buf, &mut at, 4)?) as usize;
        let op = take(buf, &mut at, len)?;
        ops.push((ProposalId { node, seq }, op));
    }
    if at != buf.len() {
        return Err(BatchDecodeError::TrailingBytes(buf.len() - at));
    }
    Ok(ops)
}

// ---------------------------------------------------------------------------------------------
// Raft message codec
// ---------------------------------------------------------------------------------------------

/// Errors of the raft message codec.
#[derive(Debug, thiserror::Error)]
pub enum MessageCodecError {
    /// Protobuf (de)serialization failed.
    #[error("protobuf: {0}")]
    Protobuf(#[from] protobuf::ProtobufError),
}

/// Serializes a raft message with the crate's protobuf codec.
pub fn encode_message(msg: &Message) -> Result<Vec<u8>, MessageCodecError> {
    Ok(msg.write_to_bytes()?)
}

/// Parses a raft message serialized by [`encode_message`].
pub fn decode_message(bytes: &[u8]) -> Result<Message, MessageCodecError> {
    Ok(Message::parse_from_bytes(bytes)?)
}

// ---------------------------------------------------------------------------------------------
// Transport
// ---------------------------------------------------------------------------------------------

/// The two traffic classes X-Raft uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TrafficClass {
    /// Small, latency-critical datagrams (at most the express MTU): the X-Lane.
    Express,
    /// Bulk traffic (snapshots, big appends): a regular, best-effort channel.
    Regular,
    /// Commit notices: Raft heartbeats (which carry the leader's commit index) and their
    /// responses, small and periodic. A lane transport piggybacks them on the failure
    /// detector's heartbeats; other transports treat them as [`TrafficClass::Express`].
    Notice,
}

/// What a [`Transport`] hands the driver when it is polled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Input<'a> {
    /// A datagram from peer `from`.
    Datagram {
        /// The peer it came from.
        from: u64,
        /// Its bytes.
        bytes: &'a [u8],
    },
    /// The transport's failure detector suspects `peer`: if that is the leader, an
    /// election starts now (`campaign`) or this node stands back for the campaigner
    /// ([`crate::RaftNode::on_leader_suspected`]).
    Suspected {
        /// The suspected peer.
        peer: u64,
        /// Whether this node campaigns.
        campaign: bool,
    },
}

/// Which of a transport's descriptors ([`Transport::fds`]) were readable
/// when the driver woke, and when it looked: a transport need not read a
/// descriptor that was not readable then (one system call fewer per turn),
/// and knows that it was empty at `at_ns`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Readiness {
    /// Bit `i` set: `fds()[i]` was readable.
    pub mask: u32,
    /// When the mask was taken (`CLOCK_REALTIME` ns).
    pub at_ns: u64,
}

impl Readiness {
    /// Nothing known: every descriptor may be readable (read them all).
    pub const UNKNOWN: Readiness = Readiness {
        mask: u32::MAX,
        at_ns: 0,
    };

    /// Whether descriptor `i` may have input.
    pub fn readable(&self, i: usize) -> bool {
        i >= 32 || self.mask & (1 << i) != 0
    }
}

/// A datagram transport between raft nodes. Delivery may drop, duplicate or reorder;
/// Raft's retransmissions and the [`Reassembler`] tolerate that.
///
/// A transport with sockets of its own is driven by the driver thread itself: the
/// driver waits on [`Transport::fds`] until [`Transport::next_deadline`], then calls
/// [`Transport::poll`], so a datagram crosses no thread between the socket and the
/// node. A transport without (e.g. in memory) keeps the defaults and hands datagrams
/// in through [`crate::driver::DriverHandle::deliver`].
pub trait Transport {
    /// Sends one datagram to node `to` over the given class. Must not block for long.
    fn send(&mut self, to: u64, class: TrafficClass, bytes: Vec<u8>);

    /// Sends what [`Transport::send`] queued (the driver calls it after every
    /// Ready's messages were handed over, so that one Ready's messages to
    /// several peers can leave together, e.g. in one lane frame). Required,
    /// so that a wrapper cannot forget to pass it on.
    fn flush(&mut self);

    /// Descriptors that are readable while input waits (at most 4).
    fn fds(&self) -> &[std::os::fd::RawFd] {
        &[]
    }

    /// When [`Transport::poll`] must run next even without input (`CLOCK_REALTIME`
    /// ns; `u64::MAX`: no such time).
    fn next_deadline(&self) -> u64 {
        u64::MAX
    }

    /// Does what is due at `now` (`CLOCK_REALTIME` ns): sends what waited for its
    /// time, reads at most `max` waiting datagrams without blocking and hands each,
    /// and every detector verdict, to `input`. `ready` tells which descriptors had
    /// input when the driver woke (a descriptor not readable then may be left
    /// unread: the next wait reports it). Returns how many datagrams it read.
    fn poll(
        &mut self,
        now: u64,
        max: usize,
        ready: Readiness,
        input: &mut dyn FnMut(Input<'_>),
    ) -> usize {
        let _ = (now, max, ready, input);
        0
    }
}

/// Datagram kind byte: a fragment.
pub const KIND_FRAGMENT: u8 = 0x01;
/// Datagram kind byte: a whole (unfragmented) message.
pub const KIND_WHOLE: u8 = 0x02;
/// Bytes of a fragment header including the kind byte.
pub const FRAGMENT_HEADER_LEN: usize = 1 + 8 + 2 + 2 + 4;

/// Errors while fragmenting.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FragmentError {
    /// The MTU leaves no room for payload.
    #[error("mtu {0} too small (header is {FRAGMENT_HEADER_LEN} bytes)")]
    MtuTooSmall(usize),
    /// The message would need more than `u16::MAX` fragments or exceeds `u32::MAX` bytes.
    #[error("message of {0} bytes too large to fragment")]
    TooLarge(usize),
}

/// Splits messages into datagrams of at most `mtu` bytes.
#[derive(Debug, Clone)]
pub struct Fragmenter {
    mtu: usize,
    next_id: u64,
}

impl Fragmenter {
    /// Creates a fragmenter; `first_msg_id` should differ across restarts of the sender
    /// (e.g. derived from a clock or random) so stale partial messages at receivers don't mix.
    pub fn new(mtu: usize, first_msg_id: u64) -> Result<Self, FragmentError> {
        if mtu <= FRAGMENT_HEADER_LEN {
            return Err(FragmentError::MtuTooSmall(mtu));
        }
        Ok(Self {
            mtu,
            next_id: first_msg_id,
        })
    }

    /// The MTU in bytes.
    pub fn mtu(&self) -> usize {
        self.mtu
    }

    /// Splits `payload` into fragment datagrams (each `<= mtu` bytes).
    pub fn fragment(&mut self, payload: &[u8]) -> Result<Vec<Vec<u8>>, FragmentError> {
        let chunk = self.mtu - FRAGMENT_HEADER_LEN;
        let total =
            u32::try_from(payload.len()).map_err(|_| FragmentError::TooLarge(payload.len()))?;
        let n = payload.len().div_ceil(chunk).max(1);
        let count = u16::try_from(n).map_err(|_| FragmentError::TooLarge(payload.len()))?;
        let id = self.next_id;
        self.next_id = self.next_id.wrapping_add(1);
        let mut out = Vec::with_capacity(n);
        for i in 0..n {
            let part = payload
                .get(i * chunk..((i + 1) * chunk).min(payload.len()))
                .unwrap_or(&[]);
            let mut d = Vec::with_capacity(FRAGMENT_HEADER_LEN + part.len());
            d.push(KIND_FRAGMENT);
            d.extend_from_slice(&id.to_le_bytes());
            d.extend_from_slice(&(i as u16).to_le_bytes());
            d.extend_from_slice(&count.to_le_bytes());
            d.extend_from_slice(&total.to_le_bytes());
            d.extend_from_slice(part);
            out.push(d);
        }
        Ok(out)
    }
}

/// Limits of a [`Reassembler`].
#[derive(Debug, Clone, Copy)]
pub struct ReassemblyLimits {
    /// Largest message accepted (bytes).
    pub max_message_bytes: usize,
    /// Most incomplete messages kept per sender; the oldest is evicted beyond that.
    pub max_pending_per_sender: usize,
    /// Incomplete messages older than this (ns since first fragment) are dropped.
    pub timeout_ns: u64,
}

impl Default for ReassemblyLimits {
    fn default() -> Self {
        Self {
            max_message_bytes: 64 << 20,
            max_pending_per_sender: 64,
            timeout_ns: 1_000_000_000,
        }
    }
}

/// Errors for one received datagram (the datagram is discarded; state stays consistent).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReassemblyError {
    /// Empty datagram.
    #[error("empty datagram")]
    Empty,
    /// Unknown kind byte.
    #[error("unknown datagram kind {0:#04x}")]
    UnknownKind(u8),
    /// Fragment shorter than its header.
    #[error("fragment header truncated ({0} bytes)")]
    Truncated(usize),
    /// Header fields are inconsistent (index >= count, zero count, chunk overflow...).
    #[error("malformed fragment: {0}")]
    Malformed(&'static str),
    /// Announced size above the limit.
    #[error("message of {0} bytes exceeds limit")]
    TooLarge(usize),
    /// Fragment disagrees with earlier fragments of the same message id (count/total).
    #[error("fragment inconsistent with message {0}")]
    Inconsistent(u64),
}

#[derive(Debug)]
struct Partial {
    first_ns: u64,
    count: u16,
    total: u32,
    got: BTreeMap<u16, Vec<u8>>,
    bytes: usize,
}

#[derive(Debug, Default)]
struct SenderState {
    partial: HashMap<u64, Partial>,
    /// Recently completed ids, to drop late duplicates instead of starting a new partial.
    done: VecDeque<u64>,
}

/// Reassembles fragmented messages, per sender.
#[derive(Debug, Default)]
pub struct Reassembler {
    limits: ReassemblyLimits,
    senders: HashMap<u64, SenderState>,
    /// Counters for observability.
    pub stats: ReassemblyStats,
}

/// Counters kept by a [`Reassembler`].
#[derive(Debug, Default, Clone, Copy)]
pub struct ReassemblyStats {
    /// Messages completed.
    pub completed: u64,
    /// Duplicate fragments ignored.
    pub duplicates: u64,
    /// Incomplete messages dropped (timeout or eviction).
    pub expired: u64,
}

const DONE_MEMORY: usize = 256;

impl Reassembler {
    /// Creates a reassembler with the given limits.
    pub fn new(limits: ReassemblyLimits) -> Self {
        Self {
            limits,
            senders: HashMap::new(),
            stats: ReassemblyStats::default(),
        }
    }

    /// Number of incomplete messages held.
    pub fn pending(&self) -> usize {
        self.senders.values().map(|s| s.partial.len()).sum()
    }

    /// Feeds one datagram from `from`. Returns the complete message payload when this
    /// datagram completes one (or is a whole message).
    pub fn accept(
        &mut self,
        from: u64,
        now_ns: u64,
        datagram: &[u8],
    ) -> Result<Option<Vec<u8>>, ReassemblyError> {
        let kind = *datagram.first().ok_or(ReassemblyError::Empty)?;
        match kind {
            KIND_WHOLE => {
                let body = &datagram[1..];
                if body.len() > self.limits.max_message_bytes {
                    return Err(ReassemblyError::TooLarge(body.len()));
                }
                self.stats.completed += 1;
                Ok(Some(body.to_vec()))
            }
            KIND_FRAGMENT => self.accept_fragment(from, now_ns, datagram),
            k => Err(ReassemblyError::UnknownKind(k)),
        }
    }

    fn accept_fragment(
        &mut self,
        from: u64,
        now_ns: u64,
        d: &[u8],
    ) -> Result<Option<Vec<u8>>, ReassemblyError> {
        if d.len() < FRAGMENT_HEADER_LEN {
            return Err(ReassemblyError::Truncated(d.len()));
        }
        let id = le_u64(&d[1..9]);
        let index = le_u16(&d[9..11]);
        let count = le_u16(&d[11..13]);
        let total = le_u32(&d[13..17]);
        let chunk = &d[FRAGMENT_HEADER_LEN..];
        if count == 0 {
            return Err(ReassemblyError::Malformed("zero fragment count"));
        }
        if index >= count {
            return Err(ReassemblyError::Malformed("index >= count"));
        }
        if total as usize > self.limits.max_message_bytes {
            return Err(ReassemblyError::TooLarge(total as usize));
        }
        if chunk.len() > total as usize {
            return Err(ReassemblyError::Malformed("chunk larger than message"));
        }
        let limits = self.limits;
        let st = self.senders.entry(from).or_default();
        if st.done.contains(&id) {
            self.stats.duplicates += 1;
            return Ok(None);
        }
        if count == 1 {
            if chunk.len() != total as usize {
                return Err(ReassemblyError::Malformed(
                    "single fragment length mismatch",
                ));
            }
            remember_done(st, id);
            self.stats.completed += 1;
            return Ok(Some(chunk.to_vec()));
        }
        if !st.partial.contains_key(&id) && st.partial.len() >= limits.max_pending_per_sender {
            // Evict the oldest incomplete message of this sender.
            if let Some(old) = st
                .partial
                .iter()
                .min_by_key(|(_, p)| p.first_ns)
                .map(|(k, _)| *k)
            {
                st.partial.remove(&old);
                self.stats.expired += 1;
            }
        }
        let p = st.partial.entry(id).or_insert_with(|| Partial {
            first_ns: now_ns,
            count,
            total,
            got: BTreeMap::new(),
            bytes: 0,
        });
        if p.count != count || p.total != total {
            return Err(ReassemblyError::Inconsistent(id));
        }
        if p.got.contains_key(&index) {
            self.stats.duplicates += 1;
            return Ok(None);
        }
        if p.bytes + chunk.len() > total as usize {
            return Err(ReassemblyError::Inconsistent(id));
        }
        p.bytes += chunk.len();
        p.got.insert(index, chunk.to_vec());
        if p.got.len() < count as usize {
            return Ok(None);
        }
        let Some(p) = st.partial.remove(&id) else {
            return Ok(None);
        };
        remember_done(st, id);
        if p.bytes != p.total as usize {
            return Err(ReassemblyError::Inconsistent(id));
        }
        let mut out = Vec::with_capacity(p.bytes);
        for (_, c) in p.got {
            out.extend_from_slice(&c);
        }
        self.stats.completed += 1;
        Ok(Some(out))
    }

    /// Drops incomplete messages older than the timeout; returns how many were dropped.
    pub fn expire(&mut self, now_ns: u64) -> usize {
        let timeout = self.limits.timeout_ns;
        let mut n = 0;
        for st in self.senders.values_mut() {
            let before = st.partial.len();
            st.partial
                .retain(|_, p| now_ns.saturating_sub(p.first_ns) < timeout);
            n += before - st.partial.len();
        }
        self.stats.expired += n as u64;
        n
    }

    /// Forgets all state about a sender (e.g. it was removed from the cluster).
    pub fn forget(&mut self, from: u64) {
        self.senders.remove(&from);
    }
}

fn remember_done(st: &mut SenderState, id: u64) {
    if st.done.len() >= DONE_MEMORY {
        st.done.pop_front();
    }
    st.done.push_back(id);
}

// ---------------------------------------------------------------------------------------------
// Message endpoint: codec + class selection + fragmentation
// ---------------------------------------------------------------------------------------------

/// Errors when sending a raft message.
#[derive(Debug, thiserror::Error)]
pub enum SendError {
    /// Encoding failed.
    #[error(transparent)]
    Codec(#[from] MessageCodecError),
    /// Fragmentation failed.
    #[error(transparent)]
    Fragment(#[from] FragmentError),
}

/// Errors when receiving a datagram.
#[derive(Debug, thiserror::Error)]
pub enum RecvError {
    /// Bad datagram.
    #[error(transparent)]
    Reassembly(#[from] ReassemblyError),
    /// Reassembled bytes are not a raft message.
    #[error(transparent)]
    Codec(#[from] MessageCodecError),
}

/// Encodes raft messages onto a [`Transport`] and decodes datagrams back into messages.
///
/// Snapshots (and any message whose encoding exceeds `bulk_threshold`) go whole over the
/// [`TrafficClass::Regular`] class; heartbeats and their responses without a read-index
/// context over [`TrafficClass::Notice`]; everything else over [`TrafficClass::Express`], both
/// fragmented to the express MTU when needed.
#[derive(Debug)]
pub struct MessageEndpoint {
    fragmenter: Fragmenter,
    reassembler: Reassembler,
    bulk_threshold: usize,
}

impl MessageEndpoint {
    /// Creates an endpoint. `bulk_threshold = usize::MAX` fragments everything onto express.
    pub fn new(
        express_mtu: usize,
        first_msg_id: u64,
        bulk_threshold: usize,
        limits: ReassemblyLimits,
    ) -> Result<Self, FragmentError> {
        Ok(Self {
            fragmenter: Fragmenter::new(express_mtu, first_msg_id)?,
            reassembler: Reassembler::new(limits),
            bulk_threshold,
        })
    }

    /// Serializes and sends `msg` to `msg.to`.
    pub fn send<T: Transport + ?Sized>(
        &mut self,
        msg: &Message,
        t: &mut T,
    ) -> Result<(), SendError> {
        let bytes = encode_message(msg)?;
        let bulk =
            msg.get_msg_type() == MessageType::MsgSnapshot || bytes.len() > self.bulk_threshold;
        if bulk {
            let mut d = Vec::with_capacity(bytes.len() + 1);
            d.push(KIND_WHOLE);
            d.extend_from_slice(&bytes);
            t.send(msg.to, TrafficClass::Regular, d);
        } else {
            // Plain heartbeats are commit notices; those of a read-index
            // round (with a context) are waited for, so they go express.
            let class = match msg.get_msg_type() {
                MessageType::MsgHeartbeat | MessageType::MsgHeartbeatResponse
                    if msg.context.is_empty() =>
                {
                    TrafficClass::Notice
                }
                _ => TrafficClass::Express,
            };
            for f in self.fragmenter.fragment(&bytes)? {
                t.send(msg.to, class, f);
            }
        }
        Ok(())
    }

    /// Feeds a received datagram; returns a complete raft message when one is ready.
    pub fn receive(
        &mut self,
        from: u64,
        now_ns: u64,
        datagram: &[u8],
    ) -> Result<Option<Message>, RecvError> {
        match self.reassembler.accept(from, now_ns, datagram)? {
            Some(bytes) => Ok(Some(decode_message(&bytes)?)),
            None => Ok(None),
        }
    }

    /// Expires stale partial messages (call periodically).
    pub fn expire(&mut self, now_ns: u64) -> usize {
        self.reassembler.expire(now_ns)
    }

    /// Reassembly counters.
    pub fn stats(&self) -> ReassemblyStats {
        self.reassembler.stats
    }
}

#[cfg(test)]
#[allow(clippy::field_reassign_with_default)] // protobuf structs are built field by field
mod tests {
    use super::*;

    fn id(n: u64, s: u64) -> ProposalId {
        ProposalId { node: n, seq: s }
    }

    #[test]
    fn batch_roundtrip_table() {
        let cases: Vec<Vec<(ProposalId, Vec<u8>)>> = vec![
            vec![],
            vec![(id(1, 1), vec![])],
            vec![(id(1, 1), b"a".to_vec()), (id(2, 9), vec![7; 300])],
        ];
        for ops in cases {
            let enc = encode_batch(&ops).unwrap();
            assert_eq!(
                enc.len(),
                batch_encoded_len(ops.iter().map(|(_, o)| o.as_slice()))
            );
            let dec = decode_batch(&enc).unwrap();
            assert_eq!(dec.len(), ops.len());
            for ((a, b), (c, d)) in dec.iter().zip(ops.iter()) {
                assert_eq!(a, c);
                assert_eq!(*b, d.as_slice());
            }
        }
    }

    #[test]
    fn batch_decode_errors_table() {
        let good = encode_batch(&[(id(1, 2), b"xyz".to_vec())]).unwrap();
        let mut trailing = good.clone();
        trailing.push(0);
        let mut bad_magic = good.clone();
        bad_magic[0] = 0;
        let mut huge = good.clone();
        huge[1..5].copy_from_slice(&u32::MAX.to_le_bytes());
        type Pred = fn(&BatchDecodeError) -> bool;
        let cases: Vec<(&[u8], Pred)> = vec![
            (&[], |e| matches!(e, BatchDecodeError::Truncated { .. })),
            (&bad_magic, |e| matches!(e, BatchDecodeError::BadMagic(0))),
            (&trailing, |e| {
                matches!(e, BatchDecodeError::TrailingBytes(1))
            }),
            (&huge, |e| {
                matches!(e, BatchDecodeError::ImpossibleCount { .. })
            }),
            (&good[..good.len() - 1], |e| {
                matches!(e, BatchDecodeError::Truncated { .. })
            }),
        ];
        for (buf, pred) in cases {
            let e = decode_batch(buf).unwrap_err();
            assert!(pred(&e), "{e:?}");
        }
        // Every strict prefix fails.
        for k in 0..good.len() {
            assert!(decode_batch(&good[..k]).is_err(), "prefix {k}");
        }
    }

    #[test]
    fn fragment_reassemble_shuffled_with_duplicates() {
        use rand::{rngs::StdRng, seq::SliceRandom, SeedableRng};
        for seed in 0..20u64 {
            let mut rng = StdRng::seed_from_u64(seed);
            let mut f = Fragmenter::new(40, seed * 1000).unwrap();
            let mut r = Reassembler::new(ReassemblyLimits::default());
            let payload: Vec<u8> = (0..(seed as usize * 37)).map(|i| i as u8).collect();
            let mut frags = f.fragment(&payload).unwrap();
            assert!(frags.iter().all(|d| d.len() <= 40));
            let dup = frags.clone();
            frags.extend(dup);
            frags.shuffle(&mut rng);
            let mut got = Vec::new();
            for d in &frags {
                if let Some(m) = r.accept(7, 0, d).unwrap() {
                    got.push(m);
                }
            }
            assert_eq!(got, vec![payload], "seed {seed}");
            assert_eq!(r.pending(), 0);
        }
    }

    #[test]
    fn lost_fragment_expires() {
        let mut f = Fragmenter::new(30, 0).unwrap();
        let mut r = Reassembler::new(ReassemblyLimits {
            timeout_ns: 100,
            ..Default::default()
        });
        let frags = f.fragment(&[1u8; 100]).unwrap();
        for d in &frags[1..] {
            assert_eq!(r.accept(1, 10, d).unwrap(), None);
        }
        assert_eq!(r.pending(), 1);
        assert_eq!(r.expire(50), 0);
        assert_eq!(r.expire(110), 1);
        assert_eq!(r.pending(), 0);
    }

    #[test]
    fn reassembly_errors_table() {
        let mut f = Fragmenter::new(30, 5).unwrap();
        let frags = f.fragment(&[1u8; 50]).unwrap();
        let mut bad_index = frags[0].clone();
        bad_index[9..11].copy_from_slice(&9u16.to_le_bytes());
        let mut zero_count = frags[0].clone();
        zero_count[11..13].copy_from_slice(&0u16.to_le_bytes());
        let mut big = frags[0].clone();
        big[13..17].copy_from_slice(&u32::MAX.to_le_bytes());
        let mut other_total = frags[1].clone();
        other_total[13..17].copy_from_slice(&49u32.to_le_bytes());
        let limits = ReassemblyLimits {
            max_message_bytes: 1000,
            ..Default::default()
        };
        let mut r = Reassembler::new(limits);
        assert_eq!(r.accept(1, 0, &[]), Err(ReassemblyError::Empty));
        assert_eq!(r.accept(1, 0, &[9]), Err(ReassemblyError::UnknownKind(9)));
        assert_eq!(r.accept(1, 0, &[1, 2]), Err(ReassemblyError::Truncated(2)));
        assert!(matches!(
            r.accept(1, 0, &bad_index),
            Err(ReassemblyError::Malformed(_))
        ));
        assert!(matches!(
            r.accept(1, 0, &zero_count),
            Err(ReassemblyError::Malformed(_))
        ));
        assert!(matches!(
            r.accept(1, 0, &big),
            Err(ReassemblyError::TooLarge(_))
        ));
        assert_eq!(r.accept(1, 0, &frags[0]), Ok(None));
        assert_eq!(
            r.accept(1, 0, &other_total),
            Err(ReassemblyError::Inconsistent(5))
        );
        assert!(Fragmenter::new(FRAGMENT_HEADER_LEN, 0).is_err());
    }

    #[test]
    fn endpoint_classes() {
        struct Rec(Vec<(u64, TrafficClass, Vec<u8>)>);
        impl Transport for Rec {
            fn send(&mut self, to: u64, class: TrafficClass, bytes: Vec<u8>) {
                self.0.push((to, class, bytes));
            }

            fn flush(&mut self) {}
        }
        let mut ep = MessageEndpoint::new(64, 0, 10_000, ReassemblyLimits::default()).unwrap();
        let mut m = Message::default();
        m.set_msg_type(MessageType::MsgAppend);
        m.to = 2;
        m.from = 1;
        let mut e = raft::eraftpb::Entry::default();
        e.data = vec![3u8; 500].into();
        m.mut_entries().push(e);
        let mut t = Rec(Vec::new());
        ep.send(&m, &mut t).unwrap();
        assert!(
            t.0.len() > 1
                && t.0
                    .iter()
                    .all(|(to, c, b)| *to == 2 && *c == TrafficClass::Express && b.len() <= 64)
        );
        let mut rx = MessageEndpoint::new(64, 0, 10_000, ReassemblyLimits::default()).unwrap();
        let mut out = None;
        for (_, _, b) in t.0.iter().rev() {
            if let Some(msg) = rx.receive(1, 0, b).unwrap() {
                out = Some(msg);
            }
        }
        assert_eq!(out, Some(m.clone()));
        let mut s = Message::default();
        s.set_msg_type(MessageType::MsgSnapshot);
        s.to = 3;
        let mut t = Rec(Vec::new());
        ep.send(&s, &mut t).unwrap();
        assert_eq!(t.0.len(), 1);
        assert_eq!(t.0[0].1, TrafficClass::Regular);
        assert_eq!(rx.receive(1, 0, &t.0[0].2).unwrap(), Some(s));
        for ty in [MessageType::MsgHeartbeat, MessageType::MsgHeartbeatResponse] {
            let mut h = Message::default();
            h.set_msg_type(ty);
            h.to = 2;
            h.commit = 7;
            let mut t = Rec(Vec::new());
            ep.send(&h, &mut t).unwrap();
            assert_eq!(t.0.len(), 1);
            assert_eq!(t.0[0].1, TrafficClass::Notice, "{ty:?}");
            assert_eq!(rx.receive(1, 0, &t.0[0].2).unwrap(), Some(h.clone()));
            // A read-index round's heartbeat carries a context: express.
            h.context = vec![1, 2, 3].into();
            let mut t = Rec(Vec::new());
            ep.send(&h, &mut t).unwrap();
            assert_eq!(t.0[0].1, TrafficClass::Express, "{ty:?} with context");
        }
    }
}
