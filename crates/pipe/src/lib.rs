//! 1Pipe: totally ordered scattering (Li et al., SIGCOMM 2021), as
//! sans-IO cores with time passed in.
//!
//! A **scattering** is a set of ⟨receiver, message⟩ sent at once with one
//! timestamp from the sender's clock. Every receiver delivers the messages
//! it gets in one order, by timestamp and then by sender, so that any two
//! receivers of two scatterings see them in the same order. What makes
//! that possible without a sequencer is the **barrier**: each packet and
//! each beacon carries a lower bound on the timestamps still to come on
//! its link, every hop forwards the minimum over its input links
//! ([`Aggregator`]), and a receiver delivers what lies below the barrier
//! it last saw ([`Receiver`]).
//!
//! - [`wire`]: the header (message timestamp, best-effort barrier, commit
//!   barrier) as a packet view.
//! - [`Sender`]: stamping, ACKs, best-effort loss reports (`send_fail`),
//!   reliable retransmission and the sender's commit barrier, aborting a
//!   failed receiver's scatterings.
//! - [`Receiver`]: the priority queue, delivery below the barriers, NAK of
//!   late messages, discard of a failed sender's uncommitted messages.
//! - [`Aggregator`]: a hop's barriers, link removal after silent beacon
//!   intervals, admission of new links, beacons on idle outputs.
//! - [`ctl`]: the recovery protocol's messages (silent link, removal,
//!   `proc_fail` and its confirmation).
//! - [`Coordinator`]: the recovery coordinator, replicated by running
//!   several on one decision kept in a Raft group.
//! - [`lane`]: beacons on the express lane: the lane beacon, the cap that
//!   keeps it from overtaking regular data, and the port that sends and
//!   takes them on tunnels the controller granted.
//! - [`udp`]: the endpoint and the hop on UDP sockets.
//! - [`seal`]: their datagrams authenticated under a group key.
//!
//! The design, where it differs from the paper, and what is still to
//! come are in `docs/pipe.md`.

#![warn(missing_docs)]

pub mod aggregator;
pub mod coordinator;
pub mod ctl;
pub mod lane;
pub mod receiver;
pub mod seal;
pub mod sender;
pub mod udp;
pub mod wire;

pub use aggregator::{AggConfig, AggError, AggEvent, Aggregator, LinkId};
pub use coordinator::{CoordOut, CoordStats, Coordinator};
pub use ctl::{Ctl, CtlError};
pub use receiver::{Delivery, Receiver, ReceiverConfig, ReceiverStats, RecvError};
pub use sender::{FailReason, Outgoing, SendError, SendEvent, Sender, SenderConfig, SenderStats};

/// Time in nanoseconds (the caller's clock; timestamps are read from it).
pub type Nanos = u64;
