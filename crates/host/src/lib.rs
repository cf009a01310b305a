//! The endhost runtime of xlane: the pinned lane thread and its sockets,
//! the host measures against jitter (applied at start, restored on exit),
//! the shared-memory bridges between applications and the lane, the
//! machine's own noise floor, and `doctor`.

#![warn(missing_docs)]

pub mod batch;
pub mod bridge;
pub mod budget;
pub mod doctor;
pub mod epoll;
pub mod floor;
pub mod lane_loop;
pub mod level;
pub mod runtime;
pub mod socket;
pub mod tuning;
pub mod xdp;
