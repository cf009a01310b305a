//! Network configuration outside the emulated datacenter: what real hosts
//! and real switches run so that the controller's grants hold there as they
//! do in the testbed.
//!
//! - [`host`]: host mode. A host's agent polls the controller for the
//!   tunnels it sends on and enforces them on the host's own interface:
//!   the express classes the testbed gives every port (strict priority by
//!   DSCP), a class per tunnel at its granted rate with a one-packet burst
//!   of σ, and DSCP marking at the edge (a granted tunnel's packets get
//!   its sub-lane's DSCP, a demoted tunnel's get best effort's, so a
//!   switch that only reads DSCP keeps a demoted sender out of the
//!   express queues). Everything is removed again on exit.
//! - [`switch`]: the configuration of the switches in the controller's
//!   topology, written instead of applied: `tc` batch lines for
//!   Linux-based switches (the lines the testbed runs on its emulated
//!   switch), and `config_db` JSON for SONiC (DSCP → traffic class →
//!   queue maps, strict-priority schedulers for the express queues).
//!
//! Both use the testbed's `tc` line builders ([`xlane_testbed::shaping`],
//! [`xlane_testbed::policing`]): one description of a shaped port.

pub mod host;
pub mod switch;

use xlane_testbed::TunnelPolicy;

/// Smallest queue of a tunnel class, packets. The controller's model needs
/// one, but a queue drained by a software shaper (a host's or an emulated
/// switch's HTB) is emptied by a timer that a stalled CPU delays: a
/// punctual tunnel must not lose packets (and look over its rate) because
/// its host stalled for a few periods, while a sender at many times its
/// rate still overflows it within a few milliseconds.
pub const MIN_QUEUE_PKTS: u32 = 16;

/// The shaping of a port at the egress of `link` as the testbed configures
/// it: the link's queue lengths, the topology file's DSCPs and class
/// shares.
pub fn port_shaping(
    topo: &xlane_testbed::Topology,
    link: &xlane_testbed::Link,
) -> xlane_testbed::TestbedConfig {
    xlane_testbed::TestbedConfig {
        express_queue_pkts: link.express_queue_pkts,
        best_effort_queue_pkts: link.best_effort_queue_pkts,
        express_dscp: topo.express_dscp,
        express2_dscp: topo.express2_dscp,
        express_rate_percent: topo.express_rate_percent,
        burst_ns: topo.burst_ns,
        ..xlane_testbed::TestbedConfig::default()
    }
}

/// Why a grant could not be turned into configuration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NetcfgError {
    /// The lane header carries 32-bit tunnel ids.
    #[error("tunnel {0}: id beyond 32 bits (the lane header carries 32)")]
    TunnelId(u64),
    /// A node the controller named is not in the topology file.
    #[error("{0}")]
    Topology(String),
}

/// The class that enforces a grant: rate `rate_bps` (`⌈8·σ·10⁹/π⌉`),
/// burst `burst_bytes` (σ), its own queue of `queue_pkts` (at least
/// [`MIN_QUEUE_PKTS`]), on sub-lane `sublane`. `sender` and `ports` are
/// left empty (host index 0, no ports): only the testbed places policies
/// by host index.
pub fn tunnel_class(
    tunnel: u64,
    sublane: u8,
    rate_bps: u64,
    burst_bytes: u32,
    queue_pkts: u32,
) -> Result<TunnelPolicy, NetcfgError> {
    Ok(TunnelPolicy {
        tunnel: u32::try_from(tunnel).map_err(|_| NetcfgError::TunnelId(tunnel))?,
        sublane,
        rate_bps,
        burst_bytes,
        queue_pkts: queue_pkts.max(MIN_QUEUE_PKTS),
        sender: 0,
        ports: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grants_become_classes() {
        let p = tunnel_class(7, 1, 800_000, 100, 1).unwrap();
        assert_eq!((p.tunnel, p.sublane, p.rate_bps), (7, 1, 800_000));
        assert_eq!(p.burst_bytes, 100);
        assert_eq!(p.queue_pkts, MIN_QUEUE_PKTS, "raised to the minimum");
        assert_eq!(tunnel_class(7, 0, 1, 1, 40).unwrap().queue_pkts, 40);
        assert_eq!(
            tunnel_class(1 << 32, 0, 1, 1, 1),
            Err(NetcfgError::TunnelId(1 << 32))
        );
    }
}
