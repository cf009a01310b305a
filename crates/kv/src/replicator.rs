//! The replication seam: [`Replicator`], implemented by
//! [`crate::raft::RaftReplicator`] (a single node is a group of one member).
//!
//! The implementation proposes the op's bytes
//! ([`WriteOp::encode`]) to the log, and its apply loop decodes each
//! committed entry and calls [`crate::exec::Apply::apply`] on the [`SharedStore`] it
//! returns from [`Replicator::store`]; `propose` returns the reply of that
//! apply once the entry is committed and applied locally. Followers return
//! [`ReplicaError::NotLeader`], which the server turns into a `MOVED`
//! redirect.

use crate::op::WriteOp;
use crate::resp::Reply;
use crate::store::Store;
use std::sync::{Arc, RwLock};
use xlane_xraft::driver::ReplicateError;

/// The store as shared between the apply path and the readers.
pub type SharedStore = Arc<RwLock<Store>>;

/// Why a write or a read barrier did not complete.
#[derive(Debug, thiserror::Error)]
pub enum ReplicaError {
    /// This node is not the leader. `leader` is the leader's client address
    /// (`host:port`) when known.
    #[error("not the leader (leader: {})", leader.as_deref().unwrap_or("unknown"))]
    NotLeader {
        /// The leader's client-facing address, if known.
        leader: Option<String>,
    },
    /// The op could not be made durable / committed (I/O error, shutdown,
    /// timeout); it may or may not have been applied.
    #[error("replication unavailable: {0}")]
    Unavailable(String),
    /// The request was refused before anything changed (e.g. a membership
    /// change the configuration does not allow); the reason.
    #[error("{0}")]
    Refused(String),
}

/// The seam between the RESP front end and replication.
pub trait Replicator: Send + Sync {
    /// Replicates `op`; returns once it is committed and applied to
    /// [`Replicator::store`], with the reply [`crate::exec::Apply::apply`] gave.
    fn propose(&self, op: WriteOp) -> Result<Reply, ReplicaError>;

    /// Returns once the local store reflects every write committed before
    /// the call (Raft read index), so a read that follows is linearizable.
    fn read_barrier(&self) -> Result<(), ReplicaError>;

    /// The state machine the committed ops are applied to.
    fn store(&self) -> &SharedStore;
}

/// How many times a failed read barrier is retried before giving up.
pub const READ_RETRIES: usize = 3;

/// What a read barrier that failed every retry tells the client.
pub const READ_UNCONFIRMED: &str = "read barrier not confirmed (no leader reachable?)";

/// The store's view of a driver error; `leader` maps a leader hint to its
/// client address.
pub fn replica_error(
    e: ReplicateError,
    leader: impl FnOnce(u64) -> Option<String>,
) -> ReplicaError {
    match e {
        ReplicateError::NotLeader(hint) => ReplicaError::NotLeader {
            leader: leader(hint),
        },
        ReplicateError::Dropped { indeterminate } => ReplicaError::Unavailable(if indeterminate {
            "leadership changed; the write may or may not have been applied".into()
        } else {
            "leadership changed; the write was not applied".into()
        }),
        e @ (ReplicateError::ReadFailed | ReplicateError::Stopped) => {
            ReplicaError::Unavailable(e.to_string())
        }
        ReplicateError::ConfChange(c) => ReplicaError::Refused(c.to_string()),
    }
}
