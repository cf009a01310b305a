//! The records of answered requests: the latency sample the analysis reads
//! (with the bits saying which stamps it used) and the raw stamps of a traced
//! request.

use serde::Serialize;

/// Bits of [`Sample::stamps`].
pub mod stamp {
    /// The transmit time is the kernel's software stamp.
    pub const TX_KERNEL: u8 = 1;
    /// The transmit time is the NIC's hardware stamp.
    pub const TX_HARDWARE: u8 = 2;
    /// The receive time is the kernel's software stamp.
    pub const RX_KERNEL: u8 = 4;
    /// The receive time is the NIC's hardware stamp.
    pub const RX_HARDWARE: u8 = 8;
}

/// One latency sample (32 bytes).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Sample {
    /// Scheduled send time, ns after the start of the run.
    pub sched_ns: u64,
    /// Latency from the scheduled send time (see the `client` module docs), ns.
    pub latency_ns: u64,
    /// How late the send call started after its scheduled time, ns (saturating).
    pub lag_ns: u32,
    /// User-space send call to user-space receipt of the response, ns
    /// (saturating): what a user-space tool such as sockperf sees.
    pub user_rtt_ns: u32,
    /// The server's own sojourn (synthetic protocol), ns; `u32::MAX` if none.
    pub server_ns: u32,
    /// Which stamps were used ([`stamp`] bits).
    pub stamps: u8,
}

/// The raw stamps of one answered request (see [`ClientConfig::stamp_trace`](crate::config::ClientConfig::stamp_trace)).
/// Stamps are `CLOCK_REALTIME` ns, hardware ones on the NIC's clock.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct StampTrace {
    /// The request id.
    pub id: u64,
    /// Scheduled send time, ns after the start of the run.
    pub sched_ns: u64,
    /// User-space time before the send call.
    pub tx_user_ns: u64,
    /// The kernel's software transmit stamp (TCP: of the first segment).
    pub tx_kernel_ns: Option<u64>,
    /// The NIC's hardware transmit stamp.
    pub tx_hardware_ns: Option<u64>,
    /// The kernel's software receive stamp (TCP: of the read completing the
    /// response).
    pub rx_kernel_ns: Option<u64>,
    /// The NIC's hardware receive stamp.
    pub rx_hardware_ns: Option<u64>,
    /// User-space time after the receive call.
    pub rx_user_ns: u64,
}
