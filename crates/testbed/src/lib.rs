//! xlane-testbed: the emulated datacenter in network namespaces.
//!
//! Real kernels, real sockets, real queues. A testbed is `hosts` network
//! namespaces `<prefix>-h<i>` and one switch namespace `<prefix>-sw`; each
//! host is joined to the switch by a veth pair (`<prefix>-h<i>` in the host,
//! `<prefix>-p<i>` in the switch), and a Linux bridge `<prefix>-br` joins the
//! switch ports (no STP, multicast snooping off so IP multicast floods,
//! static forwarding entries for the host MACs so unicast never floods,
//! learning on for anything else). Host `i` has 198.18.0.(i+1)/24 (RFC 2544 benchmark range),
//! a multicast route `224.0.0.0/4`, permanent neighbour entries for every
//! other host, and no default route: nothing can leave the testbed.
//!
//! Every egress (switch port towards a host, host NIC towards the switch) is
//! shaped by HTB to a link rate with strict-priority express classes above
//! best effort, classified by DSCP (see [`shaping`]). So an express packet
//! overtakes bulk traffic the way it does in a datacenter switch.
//! Individual tunnels can be policed to their allocation, metered and
//! demoted to best effort (see [`policing`]).
//!
//! ```no_run
//! use xlane_testbed::{Testbed, TestbedConfig, CrossTraffic, enter_netns};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let tb = Testbed::up(TestbedConfig::default())?;      // needs root
//! let flood = tb.start_cross_traffic(CrossTraffic::udp(1, 2))?;
//! {
//!     let _in_h0 = enter_netns(&tb.hosts()[0].netns)?;   // this thread is now host 0
//!     // ... create sockets here; they stay in h0 ...
//! }
//! let report = flood.stop();
//! println!("{} Mbit/s", report.received_rate_bps / 1e6);
//! # Ok(()) }                                              // drop tears everything down
//! ```
//!
//! Teardown always runs: dropping a `Testbed` (also during a panic) removes
//! it; [`down`] and [`down_all`] remove testbeds left by other or crashed
//! processes, found by name (`xl` + 6 hex digits) and by their state files
//! in `/run/xlane/<prefix>.toml`.
#![warn(missing_docs)]

pub mod config;
pub mod error;
pub mod exec;
pub mod measurement;
pub mod netns;
pub mod policing;
pub mod probe;
pub mod shaping;
pub mod state;
pub mod testbed;
pub mod topology;
pub mod traffic;

pub use config::{
    dscp_to_tos, format_rate, parse_rate, ConfigError, ParseRateError, TestbedConfig, DSCP_CS5,
    DSCP_EF,
};
pub use error::TestbedError;
pub use exec::CommandError;
pub use measurement::{LinkMeasurement, PathMeasurement};
pub use netns::{enter_netns, in_netns, NetnsGuard};
pub use policing::{
    Counts, InstalledTunnel, Place, PolicyError, TunnelMeter, TunnelPolicy, TunnelSlot,
};
pub use probe::{ClassSamples, ProbeResult, ProbeSpec};
pub use shaping::{ClassStats, QdiscStats};
pub use state::{GeneratorRecord, HostInfo, StateFile};
pub use testbed::{
    down, down_all, down_all_force, status, GeneratorStatus, Testbed, TestbedStatus,
};
pub use topology::{Link, Node, NodeKind, Topology, TopologyError};
pub use traffic::{
    pin_current_thread, start_cpu_load, CpuLoadHandle, CpuLoadReport, CrossTraffic, Proto,
    TrafficHandle, TrafficReport,
};
