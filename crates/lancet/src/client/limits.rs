//! The client's fixed sizes and budgets: sends and receives per loop pass,
//! the in-flight table, the transmit-stamp ring, and the generator streams
//! of the agents.

use crate::proto::MAX_MESSAGE_LEN;

/// Most sends per loop iteration before the agent looks at responses.
pub const SEND_BURST: usize = 64;
/// Most datagrams (or reads) per socket per loop iteration.
pub const RECV_BUDGET: usize = 64;
/// Requests in flight per agent (a power of two); older ones are dropped
/// from the table and counted lost.
pub const INFLIGHT: usize = 1 << 16;
/// Requests remembered per socket for matching transmit stamps.
pub(super) const TX_RING: usize = 4096;
/// Generator stream of agent i's schedule: `CLIENT_STREAM + i` (the server
/// uses other streams, see [`crate::server`]).
pub const CLIENT_STREAM: u64 = 1000;
/// Generator stream of agent i's choice among several targets:
/// `TARGET_STREAM + i`.
pub const TARGET_STREAM: u64 = 2000;
pub(super) const TCP_BUF: usize = 4 * MAX_MESSAGE_LEN;
pub(super) const FLUSH_NS: u64 = 20_000_000;
/// Up to this many sockets, busy-polling tries each socket directly instead
/// of asking `ppoll` first.
pub(super) const DIRECT_POLL_CONNS: usize = 4;
/// Inter-arrival gaps kept per agent for the Poisson check (evenly spread).
pub(super) const GAPS_PER_AGENT: usize = 4000;
