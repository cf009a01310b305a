//! What a controller call produces ([`Outcome`]) and why a replay or a
//! compaction fails.

use crate::fabric::FabricOp;
use crate::proto::{RefusalCode, ServerMsg, TunnelId, Upcall};
use crate::store::Record;
use xlane_te::{Refusal, Resources};

/// Everything one call produced.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Outcome {
    /// The answer to the request (`None` for ticks and fabric meters).
    pub reply: Option<ServerMsg>,
    /// Upcalls, each to the owning host.
    pub upcalls: Vec<(String, Upcall)>,
    /// Fabric operations, in order.
    pub fabric: Vec<FabricOp>,
    /// Journal records, in order (persist before anything else).
    pub records: Vec<Record>,
}

impl Outcome {
    pub(super) fn refused(code: RefusalCode, message: impl Into<String>) -> Outcome {
        Outcome {
            reply: Some(ServerMsg::Refused {
                code,
                message: message.into(),
            }),
            ..Outcome::default()
        }
    }
}

/// Why a journal record could not be replayed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReplayError {
    /// The allocator answered differently than when the record was written
    /// (a different topology, configuration or allocator version).
    #[error("record #{index}: {tunnel} was granted {expected:?} but replay gives {got:?}")]
    Diverged {
        /// Record index.
        index: usize,
        /// The tunnel.
        tunnel: TunnelId,
        /// Resources in the record.
        expected: Resources,
        /// Resources on replay.
        got: Resources,
    },
    /// The allocator refused what it once granted.
    #[error("record #{index}: {tunnel} refused on replay: {refusal}")]
    Refused {
        /// Record index.
        index: usize,
        /// The tunnel.
        tunnel: TunnelId,
        /// Why.
        refusal: Refusal,
    },
    /// The record names a tunnel that does not exist (or is in the wrong
    /// state for it).
    #[error("record #{index}: {tunnel} does not exist or is not {expected}")]
    BadTunnel {
        /// Record index.
        index: usize,
        /// The tunnel.
        tunnel: TunnelId,
        /// The state the record needs.
        expected: &'static str,
    },
    /// The record reuses an id.
    #[error("record #{index}: {tunnel} id is already used")]
    DuplicateId {
        /// Record index.
        index: usize,
        /// The tunnel.
        tunnel: TunnelId,
    },
    /// The rebuilt allocation fails the allocator's invariants.
    #[error("rebuilt allocation is invalid: {0}")]
    Invalid(String),
}

/// Why no compacted snapshot could be produced.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CompactError {
    /// Replaying only the live tunnels does not reproduce the current state
    /// exactly (history matters for this allocation): keep the journal.
    #[error("the live tunnels alone do not reproduce the state: {0}")]
    NotReproducible(String),
}
