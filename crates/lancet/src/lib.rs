//! `xlane-lancet`: an open-loop latency measuring tool in the spirit of
//! Lancet (Kogias et al., USENIX ATC 2019, and its UDP/R2P2 agents), usable
//! against any UDP or TCP request/response server.
//!
//! - [`client`]: agents (throughput, latency, symmetric) that send requests
//!   at scheduled times (Poisson or fixed spacing), count each latency from
//!   the *scheduled* send time, and stamp requests with kernel (or NIC)
//!   transmit and receive timestamps where the socket offers them.
//! - [`config`]: the settings of a run and their checks; [`sample`]: the
//!   latency sample the agents record and the analysis reads.
//! - [`analysis`]: the self-checks that decide whether the numbers can be
//!   trusted: achieved rate, Poisson send times (Anderson–Darling),
//!   independence of consecutive samples (Spearman, with thinning),
//!   stationarity (KPSS), and confidence intervals of every percentile
//!   narrower than asked (the run is lengthened until they are, up to a limit).
//! - [`server`]: the synthetic server (fixed, exponential or bimodal service
//!   times, `c` workers behind one FIFO queue) that gives M/M/c ground truth,
//!   and an echo server; [`server_stats`]: its counters.
//! - [`mmc`]: the agreement check of measured sojourn percentiles with M/M/c
//!   theory.
//! - [`sockperf`]: reading `sockperf ping-pong` output, for cross-checks.
//! - [`cross_check`]: `xlane lancet cross-check`, lancet against
//!   `sockperf ping-pong` on one real `sockperf server`, with the floor.
//! - [`proto`]: the wire formats (echo, sockperf, synthetic).
//! - [`r2p2`]: the R2P2 agent's framing and the R2P2 synthetic server's
//!   workers (one port and one FIFO each, for a router to pick from).
//! - [`tstamp`]: matching kernel transmit stamps to requests (datagram and
//!   stream numbering), and the stamping calls of a TCP connection.
//!
//! The statistics themselves come from `xlane-stats`.
#![warn(missing_docs)]

pub mod analysis;
pub mod client;
pub mod config;
pub mod cross_check;
pub mod dist;
pub mod mmc;
pub mod proto;
pub mod r2p2;
pub mod report;
pub mod rng;
pub mod sample;
pub mod sched;
pub mod server;
pub mod server_stats;
pub mod sockperf;
pub mod tstamp;

pub use analysis::{Check, CheckStatus};
pub use client::{run, run_traced, run_with_samples, RunError, RunOutput, TimelineBucket};
pub use config::{AgentKind, ClientConfig, ConfigError, RateStep};
pub use dist::{parse_duration_ns, Arrival, ServiceDist};
pub use proto::App;
pub use report::Report;
pub use sample::{Sample, StampTrace};
pub use server::{ServeConfig, ServeMode, Server, ServerStats};

use serde::Serialize;
use std::fmt;

/// The transport requests travel over.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Transport {
    /// One datagram per request and per response.
    Udp,
    /// A byte stream per connection.
    Tcp,
    /// R2P2 over UDP ([`r2p2`]): request-reply messages of one or more
    /// datagrams, through a router or straight to a server.
    R2p2,
}

impl std::str::FromStr for Transport {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "udp" => Ok(Transport::Udp),
            "tcp" => Ok(Transport::Tcp),
            "r2p2" => Ok(Transport::R2p2),
            _ => Err(format!(
                "unknown transport {s:?}: expected udp, tcp or r2p2"
            )),
        }
    }
}

impl fmt::Display for Transport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Transport::Udp => "udp",
            Transport::Tcp => "tcp",
            Transport::R2p2 => "r2p2",
        })
    }
}
