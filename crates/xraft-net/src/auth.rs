//! The group key of a member's raft traffic, shared by the plain network
//! ([`crate::net`]) and the lane link ([`crate::lane`]).

use xlane_auth::KeyRing;

/// The group key of authenticated raft datagrams.
#[derive(Debug, Clone)]
pub struct NetAuth {
    /// The keys accepted.
    pub ring: KeyRing,
    /// The key this member seals with (the group's, in `ring`).
    pub key_id: u32,
}
