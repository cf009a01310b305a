//! The load generator and latency agents.
//!
//! Each agent is one thread with its own sockets (UDP) or connections (TCP)
//! and its own schedule: send times drawn in advance (Poisson or fixed
//! spacing) at the agent's share of the rate. The agent sends every request
//! at its scheduled time, whatever happened to earlier ones (open loop), and
//! receives responses in between. A request's latency is counted from its
//! **scheduled** send time:
//!
//! `latency = (t_send − t_sched) + (t_rx − t_tx)`
//!
//! where `t_send` is the monotonic clock right before the send call (so a
//! client that falls behind its schedule pays its lag in the latency: no
//! coordinated omission), `t_tx` the kernel's transmit stamp of the request
//! (`MSG_ERRQUEUE`; the user-space time before the send call when there is
//! none), and `t_rx` the kernel's receive stamp of the response
//! (`SO_TIMESTAMPING`; the user-space time after `recvmsg` when there is
//! none). When the NIC stamps both directions in hardware, `t_rx − t_tx`
//! uses the two hardware stamps (same clock). On TCP a message can span
//! several segments and reads: `t_tx` is the stamp of the request's first
//! segment (the client ends a send call after it, see [`crate::tstamp`])
//! and `t_rx` the stamp of the read that completes the response (each read
//! stops at the end of the response being assembled). Every sample records
//! which stamps it used; the report counts them.
//!
//! The agent kinds follow Lancet: *throughput* agents load and count
//! completions without stamping; a *latency* agent stamps every request of
//! its own (usually lower) rate, beside throughput agents carrying the rest;
//! *symmetric* agents all load and stamp.
//!
//! The hot path does not allocate: request template, receive buffer,
//! in-flight table, sample batch and the shared sample store are allocated
//! before the start; every loop iteration does bounded work (at most
//! [`SEND_BURST`] sends, [`RECV_BUDGET`] receives per socket).

use crate::analysis::{self, AnalysisParams, RunFacts};
use crate::dist::{Arrival, Schedule};
use crate::proto::{App, ProtoError, MAX_MESSAGE_LEN};
use crate::report::{Counts, Report};
use crate::rng::Rng;
use crate::tstamp::{self, CmsgBuf, Numbering, StampedRead, TxMatch, CMSG_WORDS};
use crate::Transport;

mod r2p2;
use serde::Serialize;
use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use xlane_host::socket::{
    monotonic_ns, realtime_ns, LaneSocket, RxStamps, SocketConfig, SocketError, TxStamp,
};

/// Most sends per loop iteration before the agent looks at responses.
pub const SEND_BURST: usize = 64;
/// Most datagrams (or reads) per socket per loop iteration.
pub const RECV_BUDGET: usize = 64;
/// Requests in flight per agent (a power of two); older ones are dropped
/// from the table and counted lost.
pub const INFLIGHT: usize = 1 << 16;
/// Requests remembered per socket for matching transmit stamps.
const TX_RING: usize = 4096;
/// Largest [`ClientConfig::stamp_trace`].
pub const MAX_STAMP_TRACE: usize = 1_000_000;
/// Generator stream of agent i's schedule: `CLIENT_STREAM + i` (the server
/// uses other streams, see [`crate::server`]).
pub const CLIENT_STREAM: u64 = 1000;
/// Generator stream of agent i's choice among several targets:
/// `TARGET_STREAM + i`.
pub const TARGET_STREAM: u64 = 2000;
const TCP_BUF: usize = 4 * MAX_MESSAGE_LEN;
const FLUSH_NS: u64 = 20_000_000;
/// Up to this many sockets, busy-polling tries each socket directly instead
/// of asking `ppoll` first.
const DIRECT_POLL_CONNS: usize = 4;
/// Largest floor below which send gaps are left out of the Poisson check, ns
/// (see [`gap_floor_ns`]).
pub const GAP_FLOOR_MAX_NS: f64 = 20_000.0;

/// The floor for an agent whose mean gap is `mean_gap_ns`: the smaller of
/// [`GAP_FLOOR_MAX_NS`] and a twentieth of the mean gap. A sender cannot put
/// two requests closer than one pass of its loop (a send system call, a few
/// µs), so gaps that short are rarer than in a Poisson process; by the
/// memorylessness of the exponential, the gaps above a floor δ, less δ, are
/// again exponential with the same mean, and that is what is tested.
pub fn gap_floor_ns(mean_gap_ns: f64) -> f64 {
    GAP_FLOOR_MAX_NS.min(mean_gap_ns / 20.0)
}

/// Inter-arrival gaps kept per agent for the Poisson check (evenly spread).
const GAPS_PER_AGENT: usize = 4000;

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
    /// Latency from the scheduled send time (see the module docs), ns.
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

/// The raw stamps of one answered request (see [`ClientConfig::stamp_trace`]).
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

/// What the agents of a run do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum AgentKind {
    /// One latency agent stamping every request at `--latency-rate` (default:
    /// the whole rate); throughput agents carry the rest of the rate.
    Latency,
    /// Load only: count completions, no stamps, no percentiles.
    Throughput,
    /// Every agent loads and stamps.
    Symmetric,
}

impl std::str::FromStr for AgentKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "latency" => Ok(AgentKind::Latency),
            "throughput" => Ok(AgentKind::Throughput),
            "symmetric" => Ok(AgentKind::Symmetric),
            _ => Err(format!(
                "unknown agent {s:?}: expected latency, throughput or symmetric"
            )),
        }
    }
}

impl std::fmt::Display for AgentKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            AgentKind::Latency => "latency",
            AgentKind::Throughput => "throughput",
            AgentKind::Symmetric => "symmetric",
        })
    }
}

/// Everything a run needs.
#[derive(Clone, Debug, Serialize)]
pub struct ClientConfig {
    /// The server.
    pub target: SocketAddrV4,
    /// UDP or TCP.
    pub transport: Transport,
    /// Request/response protocol.
    pub app: App,
    /// Total request rate, requests/s.
    pub rate: f64,
    /// Inter-arrival distribution.
    pub arrival: Arrival,
    /// UDP sockets or TCP connections of the loading agents (split over threads).
    pub conns: usize,
    /// Loading agent threads.
    pub threads: usize,
    /// Agent kind.
    pub agent: AgentKind,
    /// With [`AgentKind::Latency`]: the latency agent's own rate (the rest
    /// of `rate` is carried by throughput agents). `None`: all of `rate`.
    pub latency_rate: Option<f64>,
    /// Request size in bytes.
    pub size: usize,
    /// Run at least this long, ns.
    pub duration_ns: u64,
    /// Run at most this long while the confidence intervals are too wide, ns.
    pub max_duration_ns: u64,
    /// Samples scheduled in the first `warmup_ns` are discarded; `None`:
    /// 10 % of `duration_ns`, at most 1 s.
    pub warmup_ns: Option<u64>,
    /// Percentiles to report, in percent (e.g. 99.9).
    pub percentiles: Vec<f64>,
    /// Largest acceptable relative half-width of each percentile's
    /// confidence interval (0.05 = ±5 %).
    pub ci_width: f64,
    /// Confidence level of the intervals.
    pub confidence: f64,
    /// Seed of the schedules (agent i draws from stream `CLIENT_STREAM + i`
    /// of it, unrelated to the server's service times for the same seed).
    pub seed: u64,
    /// After the last send, wait this long for outstanding responses, ns.
    pub drain_ns: u64,
    /// Busy-poll this long before each send instead of sleeping, ns (a
    /// wake-up from sleep can be tens of µs late on a virtual machine; at
    /// least the inter-send gap: the agent never sleeps).
    pub spin_ns: u64,
    /// Most latency samples kept in memory (over all agents).
    pub max_samples: usize,
    /// Run the agent threads under `SCHED_FIFO` at this priority (needs
    /// root), so that other load on the machine does not delay them.
    pub rt_priority: Option<i32>,
    /// Keep the raw stamps of the first this many answered requests of each
    /// measuring agent ([`run_traced`]), to check the stamping; 0: none.
    pub stamp_trace: usize,
    /// More servers (UDP, R2P2): each request goes to one of `target` and
    /// these, picked uniformly at random from a seeded stream (R2P2's
    /// baseline without a router: the client picks a server at random).
    pub more_targets: Vec<SocketAddrV4>,
    /// Changes of the total rate during the run (`rate` is the first rate),
    /// in time order; every agent keeps its share. Empty: one rate.
    pub rate_steps: Vec<RateStep>,
    /// Count every request in [`RunOutput::timeline`] by its scheduled
    /// time, in buckets this long (ns); 0: no timeline.
    pub timeline_ns: u64,
}

/// A change of the total request rate at a time of the run.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct RateStep {
    /// From this time on, ns after the start...
    pub at_ns: u64,
    /// ...the total rate is this, requests/s.
    pub rate: f64,
}

/// What became of the requests scheduled in one stretch of a run
/// ([`ClientConfig::timeline_ns`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct TimelineBucket {
    /// Requests sent.
    pub sent: u64,
    /// Requests answered with a response.
    pub answered: u64,
    /// Requests refused with an R2P2 DROP.
    pub dropped: u64,
    /// Requests never answered (still outstanding when the run ended, or
    /// forgotten after [`INFLIGHT`] later ones).
    pub lost: u64,
}

impl TimelineBucket {
    fn add(&mut self, o: &TimelineBucket) {
        self.sent += o.sent;
        self.answered += o.answered;
        self.dropped += o.dropped;
        self.lost += o.lost;
    }
}

/// Most buckets of a timeline.
pub const MAX_TIMELINE_BUCKETS: u64 = 1 << 20;

impl ClientConfig {
    /// Defaults: UDP echo, 1000 req/s Poisson, 1 connection, 1 thread,
    /// symmetric, 64 B, 10 s (at most 60 s), p50/p99/p99.9, ±5 % at 95 %.
    pub fn new(target: SocketAddrV4) -> Self {
        ClientConfig {
            target,
            transport: Transport::Udp,
            app: App::Echo,
            rate: 1000.0,
            arrival: Arrival::Poisson,
            conns: 1,
            threads: 1,
            agent: AgentKind::Symmetric,
            latency_rate: None,
            size: 64,
            duration_ns: 10_000_000_000,
            max_duration_ns: 60_000_000_000,
            warmup_ns: None,
            percentiles: vec![50.0, 99.0, 99.9],
            ci_width: 0.05,
            confidence: 0.95,
            seed: 1,
            drain_ns: 500_000_000,
            spin_ns: 50_000,
            max_samples: 20_000_000,
            rt_priority: None,
            stamp_trace: 0,
            more_targets: Vec::new(),
            rate_steps: Vec::new(),
            timeline_ns: 0,
        }
    }

    /// The total rate at `t_ns` after the start (the steps applied).
    pub fn rate_at(&self, t_ns: u64) -> f64 {
        self.rate_steps
            .iter()
            .take_while(|s| s.at_ns <= t_ns)
            .last()
            .map_or(self.rate, |s| s.rate)
    }

    /// The mean scheduled rate over the first `window_ns` of the run.
    pub fn mean_rate(&self, window_ns: u64) -> f64 {
        if window_ns == 0 {
            return self.rate;
        }
        let mut total = 0.0;
        let mut from = 0u64;
        let mut rate = self.rate;
        for s in &self.rate_steps {
            if s.at_ns >= window_ns {
                break;
            }
            // Steps are strictly increasing after `validate`; in an unchecked
            // list with a step back, the rate before it gets no time (no panic).
            total += rate * s.at_ns.saturating_sub(from) as f64;
            from = s.at_ns;
            rate = s.rate;
        }
        total += rate * (window_ns - from) as f64; // from < window_ns: the loop breaks before
        total / window_ns as f64
    }

    /// The warm-up actually used, ns.
    pub fn warmup(&self) -> u64 {
        self.warmup_ns
            .unwrap_or((self.duration_ns / 10).min(1_000_000_000))
    }

    /// Check every setting; the error says what is wrong.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !(self.rate.is_finite() && self.rate > 0.0) {
            return Err(ConfigError::Rate(self.rate));
        }
        if self.rate > 5e6 {
            return Err(ConfigError::RateTooHigh(self.rate));
        }
        if let Some(lr) = self.latency_rate {
            if self.agent != AgentKind::Latency {
                return Err(ConfigError::LatencyRateAgent);
            }
            if !(lr.is_finite() && lr > 0.0 && lr <= self.rate) {
                return Err(ConfigError::LatencyRate {
                    latency: lr,
                    rate: self.rate,
                });
            }
        }
        if self.threads == 0 || self.threads > 64 {
            return Err(ConfigError::Threads(self.threads));
        }
        if self.conns == 0 || self.conns > 4096 {
            return Err(ConfigError::Conns(self.conns));
        }
        if self.conns < self.threads {
            return Err(ConfigError::ConnsBelowThreads {
                conns: self.conns,
                threads: self.threads,
            });
        }
        if self.percentiles.is_empty() {
            return Err(ConfigError::NoPercentiles);
        }
        for &p in &self.percentiles {
            if !(p > 0.0 && p < 100.0) {
                return Err(ConfigError::Percentile(p));
            }
        }
        if !(self.ci_width > 0.0 && self.ci_width < 1.0) {
            return Err(ConfigError::CiWidth(self.ci_width));
        }
        if !(self.confidence > 0.0 && self.confidence < 1.0) {
            return Err(ConfigError::Confidence(self.confidence));
        }
        if self.duration_ns == 0 {
            return Err(ConfigError::Duration);
        }
        if self.max_duration_ns < self.duration_ns {
            return Err(ConfigError::MaxDuration);
        }
        if self.warmup() >= self.duration_ns {
            return Err(ConfigError::Warmup);
        }
        if let Some(p) = self.rt_priority {
            if !crate::sched::RT_PRIORITY_RANGE.contains(&p) {
                return Err(ConfigError::RtPriority(p));
            }
        }
        if self.max_samples == 0 {
            return Err(ConfigError::MaxSamples);
        }
        if self.stamp_trace > MAX_STAMP_TRACE {
            return Err(ConfigError::StampTrace(self.stamp_trace));
        }
        self.app.check_size(self.size).map_err(ConfigError::Size)?;
        if self.transport == Transport::Tcp && !self.more_targets.is_empty() {
            return Err(ConfigError::TcpTargets);
        }
        let mut last = 0u64;
        for s in &self.rate_steps {
            if s.at_ns <= last || s.at_ns >= self.max_duration_ns {
                return Err(ConfigError::RateStepTime(s.at_ns));
            }
            if !(s.rate.is_finite() && s.rate > 0.0 && s.rate <= 5e6) {
                return Err(ConfigError::RateStepRate(s.rate));
            }
            last = s.at_ns;
        }
        if self.timeline_ns != 0
            && (self.timeline_ns < 1_000_000
                || self.max_duration_ns / self.timeline_ns >= MAX_TIMELINE_BUCKETS)
        {
            return Err(ConfigError::Timeline(self.timeline_ns));
        }
        Ok(())
    }
}

/// A setting that cannot work.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ConfigError {
    /// The rate is not positive.
    #[error("--rate must be a positive number of requests/s, got {0}")]
    Rate(f64),
    /// The rate is beyond what one process can schedule.
    #[error("--rate {0} is above the 5000000 requests/s this tool can schedule")]
    RateTooHigh(f64),
    /// `--latency-rate` outside `(0, rate]`.
    #[error("--latency-rate must be in (0, --rate = {rate}], got {latency}")]
    LatencyRate {
        /// The latency agent's rate.
        latency: f64,
        /// The total rate.
        rate: f64,
    },
    /// `--latency-rate` without `--agent latency`.
    #[error("--latency-rate only applies to --agent latency")]
    LatencyRateAgent,
    /// Threads out of range.
    #[error("--threads must be in 1..=64, got {0}")]
    Threads(usize),
    /// Connections out of range.
    #[error("--conns must be in 1..=4096, got {0}")]
    Conns(usize),
    /// Fewer connections than threads.
    #[error(
        "--conns ({conns}) must be at least --threads ({threads}): every thread needs a connection"
    )]
    ConnsBelowThreads {
        /// Connections.
        conns: usize,
        /// Threads.
        threads: usize,
    },
    /// No percentile asked for.
    #[error("--percentiles is empty")]
    NoPercentiles,
    /// A percentile out of range.
    #[error("percentile {0} is outside (0, 100)")]
    Percentile(f64),
    /// CI width out of range.
    #[error("--ci-width must be in (0, 1) (0.05 = ±5 %), got {0}")]
    CiWidth(f64),
    /// Confidence out of range.
    #[error("--confidence must be in (0, 1), got {0}")]
    Confidence(f64),
    /// Zero duration.
    #[error("--duration must be more than 0")]
    Duration,
    /// Max duration below duration.
    #[error("--max-duration must be at least --duration")]
    MaxDuration,
    /// Warm-up not shorter than the run.
    #[error("--warmup must be shorter than --duration")]
    Warmup,
    /// RT priority out of range.
    #[error("--rt-priority must be in 1..=98, got {0}")]
    RtPriority(i32),
    /// No room for samples.
    #[error("--max-samples must be at least 1")]
    MaxSamples,
    /// Too many traced requests.
    #[error("stamp_trace must be at most {MAX_STAMP_TRACE}, got {0}")]
    StampTrace(usize),
    /// Request size does not fit the protocol.
    #[error("--size: {0}")]
    Size(ProtoError),
    /// Several targets over TCP.
    #[error(
        "several --target addresses need --proto udp or r2p2 (a TCP connection has one server)"
    )]
    TcpTargets,
    /// A rate step not after the previous one, at 0, or past the run.
    #[error("rate step at {0} ns: steps must come in increasing time order, after 0 and before --max-duration")]
    RateStepTime(u64),
    /// A rate step's rate is not a positive rate this tool can schedule.
    #[error("rate step to {0} req/s: must be positive and at most 5000000")]
    RateStepRate(f64),
    /// A timeline bucket shorter than 1 ms or too many buckets.
    #[error("timeline buckets of {0} ns: must be at least 1 ms, and at most {MAX_TIMELINE_BUCKETS} of them in --max-duration")]
    Timeline(u64),
}

/// Why a run could not be done (as opposed to a run whose checks failed,
/// which is a [`Report`] with verdicts).
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// Bad settings.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// A UDP socket could not be opened.
    #[error("opening a UDP socket: {0}")]
    Socket(#[from] SocketError),
    /// A TCP connection could not be made.
    #[error("connecting to {target}: {source}")]
    Connect {
        /// The server.
        target: SocketAddrV4,
        /// The OS error.
        source: io::Error,
    },
    /// Another system call failed.
    #[error("{what}: {source}")]
    Io {
        /// Which step.
        what: &'static str,
        /// The OS error.
        source: io::Error,
    },
    /// An agent thread died.
    #[error("agent thread failed: {0}")]
    Agent(String),
}

#[derive(Clone, Copy, Debug)]
struct AgentPlan {
    index: usize,
    rate: f64,
    conns: usize,
    measure: bool,
}

fn plan_agents(cfg: &ClientConfig) -> Vec<AgentPlan> {
    let mut out = Vec::new();
    let load = |rate: f64, measure: bool, out: &mut Vec<AgentPlan>| {
        let t = cfg.threads;
        for i in 0..t {
            let conns = cfg.conns / t + usize::from(i < cfg.conns % t);
            out.push(AgentPlan {
                index: out.len(),
                rate: rate / t as f64,
                conns,
                measure,
            });
        }
    };
    match cfg.agent {
        AgentKind::Throughput => load(cfg.rate, false, &mut out),
        AgentKind::Symmetric => load(cfg.rate, true, &mut out),
        AgentKind::Latency => {
            let lr = cfg.latency_rate.unwrap_or(cfg.rate);
            out.push(AgentPlan {
                index: 0,
                rate: lr,
                conns: 1,
                measure: true,
            });
            // The rest of the rate, if it matters (float leftovers do not).
            if cfg.rate - lr > cfg.rate * 1e-9 {
                load(cfg.rate - lr, false, &mut out);
            }
        }
    }
    out
}

#[derive(Clone, Copy)]
struct Slot {
    id: u64,
    sched_ns: u64,
    send_mono: u64,
    tx_user_rt: u64,
    tx_sw: u64,
    tx_hw: u64,
    /// R2P2: the rest of the request (REQ1…) waits for the server's REQRDY.
    rest_due: bool,
    /// R2P2: the reply packets seen.
    reply: crate::r2p2::ReplyProgress,
}

const EMPTY: u64 = u64::MAX;

impl Default for Slot {
    fn default() -> Self {
        Slot {
            id: EMPTY,
            sched_ns: 0,
            send_mono: 0,
            tx_user_rt: 0,
            tx_sw: 0,
            tx_hw: 0,
            rest_due: false,
            reply: Default::default(),
        }
    }
}

struct UdpConn {
    sock: LaneSocket,
    /// Transmit stamps to requests (datagram numbering).
    tx: TxMatch,
}

struct TcpConn {
    stream: TcpStream,
    out: Vec<u8>,
    out_at: usize,
    inb: Vec<u8>,
    have: usize,
    broken: bool,
    /// Kernel stamps, on the connections of measuring agents.
    stamps: Option<Box<TcpStamps>>,
}

/// The stamping state of a measured TCP connection.
struct TcpStamps {
    /// Transmit stamps to requests (stream numbering).
    tx: TxMatch,
    /// Control messages of `recvmsg`.
    cmsg: CmsgBuf,
    /// The length of a response ([`App::response_len`]): reads stop there.
    response_len: usize,
}

enum Conn {
    /// Boxed: the socket's control-message buffer makes it much larger than a TCP one.
    Udp(Box<UdpConn>),
    Tcp(TcpConn),
}

impl Conn {
    fn fd(&self) -> i32 {
        match self {
            Conn::Udp(u) => u.sock.as_raw_fd(),
            Conn::Tcp(t) => t.stream.as_raw_fd(),
        }
    }
}

/// Completion bookkeeping of one agent (split from the sockets so that both
/// can be borrowed at once).
struct Tracker {
    measure: bool,
    t0: u64,
    app: App,
    size: usize,
    inflight: Vec<Slot>,
    outstanding: u64,
    counts: Counts,
    batch: Vec<Sample>,
    shared: Arc<Mutex<Vec<Sample>>>,
    shared_cap: usize,
    /// Raw stamps of the first `trace_cap` answered requests.
    trace: Vec<StampTrace>,
    trace_cap: usize,
    /// [`ClientConfig::timeline_ns`] and the buckets (allocated up front).
    timeline_ns: u64,
    timeline: Vec<TimelineBucket>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Tracker {
    fn slot_of(id: u64) -> usize {
        (id as usize) & (INFLIGHT - 1)
    }

    /// Give a transmit stamp to its request. The first stamp of each kind a
    /// request gets is kept (a TCP request can get more: the rest of a send
    /// call cut short, a retransmission).
    fn apply_tx_stamp(&mut self, tx: &mut TxMatch, ts: TxStamp) {
        let Some(id) = tx.request_of(ts.id) else {
            return; // too old (forgotten), not a first segment, or distrusted
        };
        let slot = &mut self.inflight[Self::slot_of(id)];
        if slot.id != id {
            return; // already answered (stamp read late) or dropped
        }
        if let Some(sw) = ts.software_ns {
            if sw < slot.tx_user_rt {
                // A stamp earlier than its own send call: the numbering is off.
                tx.distrust();
                self.counts.tx_stamp_mismatch += 1;
                return;
            }
            if slot.tx_sw == 0 {
                slot.tx_sw = sw;
            }
        }
        if let Some(hw) = ts.hardware_ns {
            if slot.tx_hw == 0 {
                slot.tx_hw = hw;
            }
        }
    }

    /// Read the queued transmit stamps of a socket (`read` fetches one).
    fn drain_tx_stamps(
        &mut self,
        tx: &mut TxMatch,
        mut read: impl FnMut() -> io::Result<Option<TxStamp>>,
    ) {
        for _ in 0..4 * RECV_BUDGET {
            match read() {
                Ok(Some(ts)) => self.apply_tx_stamp(tx, ts),
                Ok(None) => return,
                Err(_) => {
                    self.counts.recv_errors += 1;
                    return;
                }
            }
        }
    }

    /// A response to `id` is in but its request has no transmit stamp yet:
    /// the stamp may still sit in the error queue, to be read first.
    fn needs_tx_stamp(&self, id: u64) -> bool {
        let slot = &self.inflight[Self::slot_of(id)];
        self.measure && slot.id == id && slot.tx_sw == 0 && slot.tx_hw == 0
    }

    /// The timeline bucket of a request scheduled at `sched_ns`, if any.
    fn bucket(&mut self, sched_ns: u64) -> Option<&mut TimelineBucket> {
        if self.timeline_ns == 0 {
            return None;
        }
        self.timeline
            .get_mut((sched_ns / self.timeline_ns) as usize)
    }

    /// Request `id` was refused with an R2P2 DROP: answered, counted in
    /// `dropped`, never a sample.
    fn refused(&mut self, id: u64) {
        if let Some(s) = self.take(id) {
            self.counts.dropped += 1;
            if let Some(b) = self.bucket(s.sched_ns) {
                b.dropped += 1;
            }
        }
    }

    /// Every request still outstanding is lost (the run is over).
    fn lose_outstanding(&mut self) {
        self.counts.lost += self.outstanding;
        self.outstanding = 0;
        if self.timeline_ns == 0 {
            return;
        }
        for i in 0..self.inflight.len() {
            if self.inflight[i].id != EMPTY {
                let t = self.inflight[i].sched_ns;
                self.inflight[i].id = EMPTY;
                if let Some(b) = self.bucket(t) {
                    b.lost += 1;
                }
            }
        }
    }

    /// Request `id` is answered: its slot, freed (`None`, counted
    /// unmatched, if it holds another request or none).
    fn take(&mut self, id: u64) -> Option<Slot> {
        let si = Self::slot_of(id);
        let s = self.inflight[si];
        if s.id != id {
            self.counts.unmatched += 1;
            return None;
        }
        self.inflight[si].id = EMPTY;
        self.outstanding = self.outstanding.saturating_sub(1);
        Some(s)
    }

    /// A response to `id` arrived (counted unmatched if it matches nothing).
    fn complete(
        &mut self,
        id: u64,
        rx_sw: Option<u64>,
        rx_hw: Option<u64>,
        user_rx_rt: u64,
        server_ns: Option<u64>,
    ) {
        let Some(s) = self.take(id) else {
            return;
        };
        self.counts.received += 1;
        if let Some(b) = self.bucket(s.sched_ns) {
            b.answered += 1;
        }
        if !self.measure {
            return;
        }
        // A request is sent once due (`t0 + sched <= now` before the send),
        // so this does not saturate; it is the same monotonic clock.
        let lag = s.send_mono.saturating_sub(self.t0 + s.sched_ns);
        let mut stamps = 0u8;
        // Receive and transmit times are realtime stamps taken at different
        // moments (the NIC's, the kernel's or ours): a clock step between
        // them puts the receive first, and then there is no latency to tell.
        let wire = match (rx_hw, s.tx_hw) {
            (Some(rh), th) if th != 0 => {
                stamps |= stamp::TX_HARDWARE | stamp::RX_HARDWARE;
                rh.checked_sub(th)
            }
            _ => {
                let tx = if s.tx_sw != 0 {
                    stamps |= stamp::TX_KERNEL;
                    s.tx_sw
                } else {
                    s.tx_user_rt
                };
                let rx = match rx_sw {
                    Some(v) => {
                        stamps |= stamp::RX_KERNEL;
                        v
                    }
                    None => user_rx_rt,
                };
                rx.checked_sub(tx)
            }
        };
        let user_rtt = user_rx_rt.checked_sub(s.tx_user_rt);
        let (Some(wire), Some(user_rtt)) = (wire, user_rtt) else {
            self.counts.rx_before_tx += 1;
            return;
        };
        let c = &mut self.counts;
        // `apply_tx_stamp` refuses a software stamp before its send call, so
        // tx_sw >= tx_user_rt here.
        if s.tx_sw != 0 {
            c.tx_delay_max_ns = c.tx_delay_max_ns.max(s.tx_sw.saturating_sub(s.tx_user_rt));
        }
        if stamps & stamp::TX_HARDWARE != 0 {
            c.tx_hardware += 1;
        } else if stamps & stamp::TX_KERNEL != 0 {
            c.tx_kernel += 1;
        } else {
            c.tx_user += 1;
        }
        if stamps & stamp::RX_HARDWARE != 0 {
            c.rx_hardware += 1;
        } else if stamps & stamp::RX_KERNEL != 0 {
            c.rx_kernel += 1;
        } else {
            c.rx_user += 1;
        }
        let sat = |v: u64| v.min(u32::MAX as u64) as u32;
        let sample = Sample {
            sched_ns: s.sched_ns,
            latency_ns: lag + wire,
            lag_ns: sat(lag),
            user_rtt_ns: sat(user_rtt),
            server_ns: server_ns.map_or(u32::MAX, |v| sat(v).min(u32::MAX - 1)),
            stamps,
        };
        if self.batch.len() == self.batch.capacity() {
            self.flush();
        }
        self.batch.push(sample);
        if self.trace.len() < self.trace_cap {
            let nz = |v: u64| (v != 0).then_some(v);
            self.trace.push(StampTrace {
                id,
                sched_ns: s.sched_ns,
                tx_user_ns: s.tx_user_rt,
                tx_kernel_ns: nz(s.tx_sw),
                tx_hardware_ns: nz(s.tx_hw),
                rx_kernel_ns: rx_sw,
                rx_hardware_ns: rx_hw,
                rx_user_ns: user_rx_rt,
            });
        }
    }

    fn flush(&mut self) {
        if self.batch.is_empty() {
            return;
        }
        let mut shared = lock(&self.shared);
        let room = self.shared_cap.saturating_sub(shared.len());
        let n = room.min(self.batch.len());
        shared.extend_from_slice(&self.batch[..n]);
        drop(shared);
        self.counts.samples_dropped += (self.batch.len() - n) as u64; // n <= len
        self.batch.clear();
    }
}

struct Agent {
    plan: AgentPlan,
    /// The servers (or router) requests go to; more than one: picked at
    /// random by `pick`.
    targets: Vec<SocketAddrV4>,
    pick: Rng,
    /// R2P2 framing: the packet buffer (empty without R2P2).
    pkt: Vec<u8>,
    conns: Vec<Conn>,
    pollfds: Vec<libc::pollfd>,
    tracker: Tracker,
    req: Vec<u8>,
    rbuf: Vec<u8>,
    schedule: Schedule,
    stop_at: Arc<AtomicU64>,
    drain_ns: u64,
    spin_ns: u64,
    gaps: Vec<f64>,
    gap_every: u64,
    next_conn: usize,
    seq: u64,
    rt_priority: Option<i32>,
}

/// What an agent thread hands back.
struct AgentResult {
    rate: f64,
    counts: Counts,
    gaps: Vec<f64>,
    stopped_at: u64,
    trace: Vec<StampTrace>,
    timeline: Vec<TimelineBucket>,
}

impl Agent {
    fn run(mut self) -> AgentResult {
        xlane_host::runtime::tighten_timer_slack();
        if let Some(p) = self.rt_priority {
            if crate::sched::set_realtime(p).is_err() {
                self.tracker.counts.rt_denied += 1;
            }
        }
        let t0 = self.tracker.t0;
        let mut next = self.schedule.next_ns();
        let mut last_send_mono = 0u64;
        let mut last_flush = monotonic_ns();
        let mut stopped_at;
        loop {
            let stop_at = self.stop_at.load(Ordering::Relaxed);
            let now = monotonic_ns();
            if t0 + next >= stop_at {
                stopped_at = stop_at.min(now.max(t0));
                break;
            }
            let mut burst = 0;
            while t0 + next <= now && t0 + next < stop_at && burst < SEND_BURST {
                let send_mono = self.send_one(next);
                if let Some(m) = send_mono {
                    let n = self.tracker.counts.sent;
                    if last_send_mono != 0
                        && n % self.gap_every == 0
                        && self.gaps.len() < self.gaps.capacity()
                    {
                        // In units of the first rate's gaps (a stepped
                        // schedule changes the mean gap).
                        let g = m.saturating_sub(last_send_mono) as f64;
                        self.gaps.push(g * self.schedule.rate_factor());
                    }
                    last_send_mono = m;
                }
                next = self.schedule.next_ns();
                burst += 1;
            }
            let now = monotonic_ns();
            let due = t0 + next;
            let timeout = if due > now + self.spin_ns {
                due - now - self.spin_ns
            } else {
                0
            };
            self.poll_and_receive(timeout);
            if now.saturating_sub(last_flush) > FLUSH_NS {
                self.tracker.flush();
                last_flush = now;
            }
        }
        // Sending is over: collect what is still coming, for a bounded time.
        stopped_at = stopped_at.max(t0);
        let end = monotonic_ns().saturating_add(self.drain_ns);
        while self.tracker.outstanding > 0 {
            let now = monotonic_ns();
            if now >= end {
                break;
            }
            self.poll_and_receive((end - now).min(1_000_000));
        }
        self.tracker.flush();
        self.tracker.lose_outstanding();
        AgentResult {
            rate: self.plan.rate,
            counts: self.tracker.counts.clone(),
            gaps: self.gaps,
            stopped_at,
            trace: std::mem::take(&mut self.tracker.trace),
            timeline: std::mem::take(&mut self.tracker.timeline),
        }
    }

    /// Send the request scheduled at `sched_ns`; returns the send time.
    fn send_one(&mut self, sched_ns: u64) -> Option<u64> {
        let n = self.conns.len();
        let mut ci = None;
        for k in 0..n {
            let i = (self.next_conn + k) % n;
            if !matches!(&self.conns[i], Conn::Tcp(t) if t.broken) {
                ci = Some(i);
                break;
            }
        }
        self.next_conn = (self.next_conn + 1) % n.max(1);
        let Some(ci) = ci else {
            self.tracker.counts.send_errors += 1;
            return None;
        };
        let id = self.seq;
        self.seq += 1;
        let si = Tracker::slot_of(id);
        if self.tracker.inflight[si].id != EMPTY {
            // Unanswered for INFLIGHT requests: give up on it.
            self.tracker.counts.lost += 1;
            self.tracker.outstanding = self.tracker.outstanding.saturating_sub(1);
            self.tracker.inflight[si].id = EMPTY;
            let t = self.tracker.inflight[si].sched_ns;
            if let Some(b) = self.tracker.bucket(t) {
                b.lost += 1;
            }
        }
        self.tracker.app.set_id(&mut self.req, id);
        let send_mono = monotonic_ns();
        let tx_user_rt = realtime_ns();
        // The slot is filled before the send so that a transmit stamp read
        // right after it finds its request.
        self.tracker.inflight[si] = Slot {
            id,
            sched_ns,
            send_mono,
            tx_user_rt,
            ..Slot::default()
        };
        let target = match self.targets.len() {
            1 => self.targets[0],
            n => self.targets[(self.pick.next_u64() % n as u64) as usize],
        };
        let ok = match &mut self.conns[ci] {
            Conn::Udp(u) if !self.pkt.is_empty() => {
                r2p2::send_first(u, &mut self.tracker, &self.req, &mut self.pkt, id, target)
            }
            Conn::Udp(u) => udp_send(u, &mut self.tracker, &self.req, target, id, true),
            Conn::Tcp(t) => tcp_queue(t, &mut self.tracker, &self.req, id),
        };
        if !ok {
            self.tracker.inflight[si].id = EMPTY;
            self.tracker.counts.send_errors += 1;
            return None;
        }
        self.tracker.outstanding += 1;
        self.tracker.counts.sent += 1;
        if let Some(b) = self.tracker.bucket(sched_ns) {
            b.sent += 1;
        }
        let lag = send_mono.saturating_sub(self.tracker.t0 + sched_ns);
        self.tracker.counts.max_lag_ns = self.tracker.counts.max_lag_ns.max(lag);
        Some(send_mono)
    }

    fn poll_and_receive(&mut self, timeout_ns: u64) {
        if timeout_ns == 0 && self.conns.len() <= DIRECT_POLL_CONNS {
            // Busy-polling a few sockets: one non-blocking receive each is
            // cheaper than a ppoll and then the receive (one system call
            // per socket per pass, as a `recvfrom` loop).
            for c in &mut self.conns {
                match c {
                    Conn::Udp(u) if !self.pkt.is_empty() => r2p2::receive(
                        u,
                        &mut self.tracker,
                        &mut self.rbuf,
                        &mut self.req,
                        &mut self.pkt,
                    ),
                    Conn::Udp(u) => udp_receive(u, &mut self.tracker, &mut self.rbuf),
                    Conn::Tcp(t) => {
                        if t.out_at < t.out.len() {
                            tcp_flush(t, &mut self.tracker);
                        }
                        tcp_receive(t, &mut self.tracker);
                    }
                }
            }
            return;
        }
        for (p, c) in self.pollfds.iter_mut().zip(&self.conns) {
            p.events = libc::POLLIN;
            p.fd = c.fd();
            if let Conn::Tcp(t) = c {
                if t.broken {
                    p.fd = -1; // ignored by ppoll: a dead connection must not spin us
                } else if t.out_at < t.out.len() {
                    p.events |= libc::POLLOUT;
                }
            }
            p.revents = 0;
        }
        let ts = libc::timespec {
            tv_sec: (timeout_ns / 1_000_000_000) as libc::time_t,
            tv_nsec: (timeout_ns % 1_000_000_000) as libc::c_long,
        };
        // SAFETY: pollfds is a valid array of the length passed; ts lives.
        let r = unsafe {
            libc::ppoll(
                self.pollfds.as_mut_ptr(),
                self.pollfds.len() as libc::nfds_t,
                &ts,
                std::ptr::null(),
            )
        };
        if r <= 0 {
            return;
        }
        for ci in 0..self.conns.len() {
            let rev = self.pollfds[ci].revents;
            if rev == 0 {
                continue;
            }
            match &mut self.conns[ci] {
                Conn::Udp(u) => {
                    if self.tracker.measure && rev & libc::POLLERR != 0 {
                        udp_drain_tx(u, &mut self.tracker);
                    }
                    if rev & libc::POLLIN != 0 && !self.pkt.is_empty() {
                        r2p2::receive(
                            u,
                            &mut self.tracker,
                            &mut self.rbuf,
                            &mut self.req,
                            &mut self.pkt,
                        );
                    } else if rev & libc::POLLIN != 0 {
                        udp_receive(u, &mut self.tracker, &mut self.rbuf);
                    }
                }
                Conn::Tcp(t) => {
                    if rev & libc::POLLOUT != 0 {
                        tcp_flush(t, &mut self.tracker);
                    }
                    if rev & libc::POLLERR != 0 {
                        tcp_drain_tx(t, &mut self.tracker);
                    }
                    if rev & (libc::POLLIN | libc::POLLHUP | libc::POLLERR) != 0 {
                        tcp_receive(t, &mut self.tracker);
                    }
                }
            }
        }
    }
}

/// Sends one datagram of request `id` to `dst`, keeping the socket's
/// transmit-stamp numbering in step; with `drain`, takes the stamp queued
/// by now. Whether the kernel took it.
fn udp_send(
    u: &mut UdpConn,
    tr: &mut Tracker,
    bytes: &[u8],
    dst: SocketAddrV4,
    id: u64,
    drain: bool,
) -> bool {
    match u.sock.send_to(bytes, dst) {
        Ok(_) => {
            if tr.measure {
                u.tx.push(id);
                // A software stamp is usually queued by now (the device
                // took the packet inside the call): take it before
                // sleeping, or the pending stamp would wake the agent's
                // next poll at once.
                if drain {
                    udp_drain_tx(u, tr);
                }
            }
            true
        }
        Err(e) => {
            // Past the socket buffer the kernel has numbered the datagram
            // even though it failed; before it, not.
            if tr.measure && e.kind() != io::ErrorKind::WouldBlock {
                u.tx.skip();
            }
            false
        }
    }
}

fn udp_drain_tx(u: &mut UdpConn, tr: &mut Tracker) {
    tr.drain_tx_stamps(&mut u.tx, || u.sock.recv_tx_stamp());
}

/// The next whole datagram waiting on `u`, with its stamps; `None` when
/// none waits or the socket reports an error (counted in `recv_errors`:
/// e.g. ECONNREFUSED from an ICMP error, not fatal). Datagrams cut by the
/// buffer are counted malformed and skipped (at most [`RECV_BUDGET`]).
fn udp_next(u: &mut UdpConn, tr: &mut Tracker, rbuf: &mut [u8]) -> Option<RxStamps> {
    for _ in 0..RECV_BUDGET {
        match u.sock.recv_stamps(rbuf) {
            Ok(Some(g)) if g.received.truncated => tr.counts.malformed += 1,
            Ok(Some(g)) => return Some(g),
            Ok(None) => return None,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => {
                tr.counts.recv_errors += 1;
                return None;
            }
        }
    }
    None
}

fn udp_receive(u: &mut UdpConn, tr: &mut Tracker, rbuf: &mut [u8]) {
    for _ in 0..RECV_BUDGET {
        let Some(got) = udp_next(u, tr, rbuf) else {
            return;
        };
        let r = got.received;
        let resp = match tr.app.parse_response(&rbuf[..r.len], tr.size) {
            Ok(resp) => resp,
            Err(_) => {
                tr.counts.malformed += 1;
                continue;
            }
        };
        if tr.needs_tx_stamp(resp.id) {
            udp_drain_tx(u, tr);
        }
        tr.complete(
            resp.id,
            got.software_ns,
            got.hardware_ns,
            r.user_ns,
            resp.server_ns,
        );
    }
}

/// Queue request `id` on a TCP connection and push what the socket takes.
fn tcp_queue(t: &mut TcpConn, tr: &mut Tracker, req: &[u8], id: u64) -> bool {
    if t.out.len() + req.len() > t.out.capacity() {
        t.out.drain(..t.out_at);
        t.out_at = 0;
        if t.out.len() + req.len() > t.out.capacity() {
            return false; // the server does not keep up: refuse, do not grow
        }
    }
    t.out.extend_from_slice(req);
    if let Some(s) = &mut t.stamps {
        s.tx.push(id);
    }
    tcp_flush(t, tr);
    true
}

/// Write what is queued. On a stamped connection every send call ends at a
/// request boundary or after a request's first segment
/// ([`TxMatch::write_limit`]), and the stamps of what was sent are read.
fn tcp_flush(t: &mut TcpConn, tr: &mut Tracker) {
    if t.broken {
        return;
    }
    let mut wrote = false;
    while t.out_at < t.out.len() {
        let pending = t.out.len() - t.out_at;
        let n = t
            .stamps
            .as_ref()
            .map_or(pending, |s| s.tx.write_limit(pending));
        match t.stream.write(&t.out[t.out_at..t.out_at + n]) {
            Ok(0) => {
                t.broken = true;
                break;
            }
            Ok(n) => {
                t.out_at += n;
                wrote = true;
                if let Some(s) = &mut t.stamps {
                    s.tx.wrote(n as u64);
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(_) => {
                t.broken = true;
                break;
            }
        }
    }
    if t.out_at == t.out.len() {
        t.out.clear();
        t.out_at = 0;
    }
    if wrote {
        // As on UDP: the software stamps are usually queued by now.
        tcp_drain_tx(t, tr);
    }
}

fn tcp_drain_tx(t: &mut TcpConn, tr: &mut Tracker) {
    let stream = &t.stream;
    if let Some(TcpStamps { tx, cmsg, .. }) = t.stamps.as_deref_mut() {
        tr.drain_tx_stamps(tx, || tstamp::recv_tx_stamp(stream, cmsg));
    }
}

/// One read: on a stamped connection with the stamps of the last segment
/// read, and never past the end of the response being assembled (so that
/// the read completing a response carries that response's stamp).
fn tcp_read(t: &mut TcpConn) -> io::Result<Option<StampedRead>> {
    // have <= inb.len(): `have` only grows by what a read put into
    // `inb[have..]`, and the caller stops at a full buffer.
    let room = t.inb.len() - t.have;
    match t.stamps.as_deref_mut() {
        Some(s) => {
            let want = match s.response_len.saturating_sub(t.have) {
                0 => room,
                w => w.min(room),
            };
            let buf = &mut t.inb[t.have..t.have + want];
            tstamp::recv_stamped(&t.stream, buf, &mut s.cmsg)
        }
        None => match t.stream.read(&mut t.inb[t.have..]) {
            Ok(len) => Ok(Some(StampedRead {
                len,
                software_ns: None,
                hardware_ns: None,
            })),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(None),
            Err(e) => Err(e),
        },
    }
}

fn tcp_receive(t: &mut TcpConn, tr: &mut Tracker) {
    if t.broken {
        return;
    }
    for _ in 0..RECV_BUDGET {
        if t.have == t.inb.len() {
            // A whole buffer without one complete message cannot happen with
            // valid framing (messages are at most MAX_MESSAGE_LEN).
            t.broken = true;
            tr.counts.malformed += 1;
            return;
        }
        let r = match tcp_read(t) {
            Ok(Some(r)) if r.len == 0 => {
                t.broken = true;
                return;
            }
            Ok(Some(r)) => r,
            Ok(None) => return,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => {
                t.broken = true;
                tr.counts.recv_errors += 1;
                return;
            }
        };
        let user_rx = realtime_ns();
        t.have += r.len;
        let mut at = 0;
        loop {
            match tr.app.frame_len(&t.inb[at..t.have], tr.size) {
                Ok(Some(len)) => {
                    match tr.app.parse_response(&t.inb[at..at + len], tr.size) {
                        Ok(resp) => {
                            if tr.needs_tx_stamp(resp.id) {
                                tcp_drain_tx(t, tr);
                            }
                            tr.complete(
                                resp.id,
                                r.software_ns,
                                r.hardware_ns,
                                user_rx,
                                resp.server_ns,
                            )
                        }
                        Err(_) => tr.counts.malformed += 1,
                    }
                    at += len;
                }
                Ok(None) => break,
                Err(_) => {
                    // A byte stream cannot be resynchronised.
                    tr.counts.malformed += 1;
                    t.broken = true;
                    return;
                }
            }
        }
        t.inb.copy_within(at..t.have, 0);
        t.have -= at; // at <= have: every frame parsed lies in inb[..have]
    }
}

/// Kernel stamps on a new connection of a measuring agent, before anything
/// is written: transmit keys count from its first byte.
fn tcp_stamps(stream: &TcpStream, cfg: &ClientConfig) -> Result<TcpStamps, RunError> {
    let io = |what| move |source| RunError::Io { what, source };
    tstamp::enable_stream_stamps(stream).map_err(io("SO_TIMESTAMPING (tcp)"))?;
    let mss = tstamp::segment_size(stream).map_err(io("TCP_MAXSEG"))?;
    Ok(TcpStamps {
        tx: TxMatch::new(
            Numbering::Stream {
                request_len: cfg.size as u64,
                first_chunk: u64::from(mss),
            },
            TX_RING,
        ),
        cmsg: [0; CMSG_WORDS],
        response_len: cfg.app.response_len(cfg.size),
    })
}

fn open_conns(cfg: &ClientConfig, plan: &AgentPlan) -> Result<Vec<Conn>, RunError> {
    let mut out = Vec::with_capacity(plan.conns);
    for _ in 0..plan.conns {
        match cfg.transport {
            Transport::Udp | Transport::R2p2 => {
                let mut sc = SocketConfig::plain(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0));
                sc.nonblocking = true;
                sc.rx_timestamps = plan.measure;
                sc.rcvbuf = 4 << 20;
                let sock = LaneSocket::open(&sc)?;
                if plan.measure {
                    sock.enable_tx_timestamps()?;
                }
                out.push(Conn::Udp(Box::new(UdpConn {
                    sock,
                    tx: TxMatch::new(Numbering::Datagram, TX_RING),
                })));
            }
            Transport::Tcp => {
                let stream =
                    TcpStream::connect_timeout(&SocketAddr::V4(cfg.target), Duration::from_secs(3))
                        .map_err(|source| RunError::Connect {
                            target: cfg.target,
                            source,
                        })?;
                let io = |what| move |source| RunError::Io { what, source };
                stream.set_nodelay(true).map_err(io("TCP_NODELAY"))?;
                stream
                    .set_nonblocking(true)
                    .map_err(io("set_nonblocking"))?;
                let stamps = if plan.measure {
                    Some(Box::new(tcp_stamps(&stream, cfg)?))
                } else {
                    None
                };
                out.push(Conn::Tcp(TcpConn {
                    stream,
                    out: Vec::with_capacity(TCP_BUF),
                    out_at: 0,
                    inb: vec![0u8; TCP_BUF],
                    have: 0,
                    broken: false,
                    stamps,
                }));
            }
        }
    }
    Ok(out)
}

/// Run a measurement and analyse it. Lengthens the run (up to
/// `max_duration_ns`) while a percentile's confidence interval is wider
/// than asked. A run whose checks fail still returns `Ok` — a [`Report`]
/// whose `valid` is false and whose `verdicts` say what to change.
pub fn run(cfg: &ClientConfig) -> Result<Report, RunError> {
    run_with_samples(cfg).map(|(r, _)| r)
}

/// [`run`], also returning the latency samples used by the analysis (after
/// the warm-up, before thinning, in scheduled-time order).
pub fn run_with_samples(cfg: &ClientConfig) -> Result<(Report, Vec<Sample>), RunError> {
    run_traced(cfg).map(|o| (o.report, o.samples))
}

/// Everything [`run_traced`] returns.
#[derive(Clone, Debug)]
pub struct RunOutput {
    /// The report.
    pub report: Report,
    /// The samples of [`run_with_samples`].
    pub samples: Vec<Sample>,
    /// The raw stamps of the first [`ClientConfig::stamp_trace`] answered
    /// requests of each measuring agent (all of the run, warm-up included).
    pub trace: Vec<StampTrace>,
    /// With [`ClientConfig::timeline_ns`]: what became of the requests
    /// scheduled in each bucket, all agents together (empty otherwise).
    pub timeline: Vec<TimelineBucket>,
    /// The start of the run (scheduled time 0) on `CLOCK_REALTIME`, ns.
    pub start_realtime_ns: u64,
}

/// [`run_with_samples`], also returning the raw stamps of
/// [`ClientConfig::stamp_trace`] requests per measuring agent.
pub fn run_traced(cfg: &ClientConfig) -> Result<RunOutput, RunError> {
    cfg.validate()?;
    let plans = plan_agents(cfg);
    let measuring: Vec<bool> = plans.iter().map(|p| p.measure).collect();
    let n_measuring = measuring.iter().filter(|m| **m).count().max(1);
    let stop_at = Arc::new(AtomicU64::new(u64::MAX));
    let dur_s = cfg.duration_ns as f64 / 1e9;
    let max_s = cfg.max_duration_ns as f64 / 1e9;
    let mut agents = Vec::new();
    let mut stores = Vec::new();
    for plan in &plans {
        let conns = open_conns(cfg, plan)?;
        let shared_cap = if plan.measure {
            // Room for the highest rate of a stepped schedule.
            let peak = cfg.rate_steps.iter().fold(cfg.rate, |m, s| m.max(s.rate));
            ((plan.rate * peak / cfg.rate * max_s * 1.1) as usize + 4096)
                .min(cfg.max_samples / n_measuring + 1)
        } else {
            0
        };
        let store = Arc::new(Mutex::new(Vec::with_capacity(shared_cap)));
        stores.push((plan.measure, store.clone()));
        let mut req = vec![0u8; cfg.size];
        cfg.app
            .write_template(&mut req)
            .map_err(ConfigError::Size)?;
        let pollfds = conns
            .iter()
            .map(|c| libc::pollfd {
                fd: c.fd(),
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        let gap_every = ((plan.rate * dur_s / GAPS_PER_AGENT as f64) as u64).max(1);
        let targets: Vec<SocketAddrV4> = std::iter::once(cfg.target)
            .chain(cfg.more_targets.iter().copied())
            .collect();
        agents.push(Agent {
            plan: *plan,
            targets,
            pick: Rng::stream(cfg.seed, TARGET_STREAM + plan.index as u64),
            pkt: if cfg.transport == Transport::R2p2 {
                vec![0u8; crate::r2p2::MAX_PACKET_LEN]
            } else {
                Vec::new()
            },
            conns,
            pollfds,
            tracker: Tracker {
                measure: plan.measure,
                t0: 0,
                app: cfg.app,
                size: cfg.size,
                inflight: vec![Slot::default(); INFLIGHT],
                outstanding: 0,
                counts: Counts::default(),
                batch: Vec::with_capacity(1024),
                shared: store,
                shared_cap,
                trace: Vec::with_capacity(if plan.measure { cfg.stamp_trace } else { 0 }),
                trace_cap: if plan.measure { cfg.stamp_trace } else { 0 },
                timeline_ns: cfg.timeline_ns,
                timeline: match cfg.max_duration_ns.checked_div(cfg.timeline_ns) {
                    None => Vec::new(),
                    Some(n) => vec![TimelineBucket::default(); n as usize + 1],
                },
            },
            req,
            rbuf: vec![0u8; MAX_MESSAGE_LEN + 1],
            schedule: Schedule::with_rng(
                cfg.arrival,
                plan.rate,
                Rng::stream(cfg.seed, CLIENT_STREAM + plan.index as u64),
            )
            .with_steps(
                &cfg.rate_steps
                    .iter()
                    .map(|s| (s.at_ns, plan.rate * s.rate / cfg.rate))
                    .collect::<Vec<_>>(),
            ),
            stop_at: stop_at.clone(),
            drain_ns: cfg.drain_ns,
            spin_ns: cfg.spin_ns,
            gaps: Vec::with_capacity(GAPS_PER_AGENT * 2),
            gap_every,
            next_conn: 0,
            seq: 0,
            rt_priority: cfg.rt_priority,
        });
    }
    // A common start a little ahead, so every thread is up before it.
    let t0 = monotonic_ns() + 50_000_000;
    // The realtime clock at t0: `realtime + (t0 - monotonic)`, with both
    // read now. The machine can hold this thread up for more than 50 ms
    // between the two monotonic reads, so t0 may have passed already;
    // adding first keeps it exact either way (realtime ≫ monotonic, no
    // overflow before the year 2500).
    let rt = realtime_ns();
    let start_realtime_ns = (rt + t0).saturating_sub(monotonic_ns());
    stop_at.store(t0 + cfg.max_duration_ns, Ordering::Relaxed);
    let mut handles = Vec::new();
    for mut a in agents {
        a.tracker.t0 = t0;
        let h = std::thread::Builder::new()
            .name(format!("lancet-agent-{}", a.plan.index))
            .spawn(move || a.run())
            .map_err(|source| RunError::Io {
                what: "spawn agent",
                source,
            })?;
        handles.push(h);
    }
    let mut params = AnalysisParams::from_config(cfg);
    let warmup = cfg.warmup();
    // The coordinator: after --duration, look at the samples; keep going
    // while some confidence interval is too wide and time remains.
    let measuring_run = plans.iter().any(|p| p.measure);
    sleep_until(t0 + cfg.duration_ns);
    if measuring_run {
        loop {
            let now = monotonic_ns();
            if now >= t0 + cfg.max_duration_ns {
                break;
            }
            let samples = collect(&stores, warmup);
            let elapsed = now - t0; // now >= t0 + duration: slept until then
            let sample_rate =
                samples.len() as f64 / ((elapsed.saturating_sub(warmup)) as f64 / 1e9).max(1e-3);
            let need = analysis::samples_needed(&samples, &params);
            let Some(need) = need else { break };
            let missing = need.saturating_sub(samples.len()) as f64;
            let wait_ns = (missing / sample_rate.max(1e-3) * 1e9 * 1.1) as u64;
            let wait_ns =
                wait_ns.clamp(500_000_000, (t0 + cfg.max_duration_ns).saturating_sub(now));
            sleep_until(now + wait_ns);
        }
    }
    let stop = monotonic_ns().min(t0 + cfg.max_duration_ns);
    stop_at.store(stop, Ordering::Relaxed);
    let mut counts = Counts::default();
    let mut gaps = Vec::new();
    let mut gap_floor = 0.0f64;
    let mut stopped = t0;
    let mut trace = Vec::new();
    let mut timeline: Vec<TimelineBucket> = Vec::new();
    for h in handles {
        let r = h
            .join()
            .map_err(|_| RunError::Agent("an agent thread panicked".into()))?;
        counts.add(&r.counts);
        // Above the floor, shifted down by it, in units of the agent's mean
        // gap: every agent's gaps then pool as unit exponentials.
        let mean = 1e9 / r.rate;
        let floor = gap_floor_ns(mean);
        gap_floor = gap_floor.max(floor);
        gaps.extend(
            r.gaps
                .iter()
                .filter(|&&g| g > floor)
                .map(|g| (g - floor) / mean),
        );
        stopped = stopped.max(r.stopped_at);
        trace.extend_from_slice(&r.trace);
        if timeline.len() < r.timeline.len() {
            timeline.resize(r.timeline.len(), TimelineBucket::default());
        }
        for (t, b) in timeline.iter_mut().zip(&r.timeline) {
            t.add(b);
        }
    }
    // Buckets after the end of sending hold nothing.
    if cfg.timeline_ns != 0 {
        let n = (stopped.saturating_sub(t0)).div_ceil(cfg.timeline_ns) as usize;
        timeline.truncate(n);
    }
    let samples = collect(&stores, warmup);
    let collected: usize = stores.iter().map(|(_, s)| lock(s).len()).sum();
    let facts = RunFacts {
        sent: counts.sent,
        lost: counts.lost,
        dropped: counts.dropped,
        window_ns: stopped.saturating_sub(t0).max(1),
        gaps: &gaps,
        gap_floor_ns: gap_floor,
        measuring: measuring_run,
    };
    // The rate check compares with what the (stepped) schedule asked for.
    params.rate = cfg.mean_rate(facts.window_ns);
    let a = analysis::analyze(&samples, &facts, &params);
    let report = Report::build(cfg, counts, collected, samples.len(), &facts, a);
    Ok(RunOutput {
        report,
        samples,
        trace,
        timeline,
        start_realtime_ns,
    })
}

/// All samples of the measuring agents scheduled after the warm-up, in
/// scheduled-time order.
fn collect(stores: &[(bool, Arc<Mutex<Vec<Sample>>>)], warmup: u64) -> Vec<Sample> {
    let mut all = Vec::new();
    for (measure, s) in stores {
        if *measure {
            all.extend(lock(s).iter().filter(|x| x.sched_ns >= warmup).copied());
        }
    }
    all.sort_unstable_by_key(|s| s.sched_ns);
    all
}

fn sleep_until(mono_ns: u64) {
    loop {
        let now = monotonic_ns();
        if now >= mono_ns {
            return;
        }
        std::thread::sleep(Duration::from_nanos((mono_ns - now).min(100_000_000)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> ClientConfig {
        ClientConfig::new(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 9))
    }

    #[test]
    fn bad_settings_are_refused() {
        type Edit = fn(&mut ClientConfig);
        let table: &[(&str, Edit)] = &[
            ("rate", |c| c.rate = 0.0),
            ("rate", |c| c.rate = f64::NAN),
            ("rate", |c| c.rate = -5.0),
            ("5000000", |c| c.rate = 1e9),
            ("threads", |c| c.threads = 0),
            ("conns", |c| c.conns = 0),
            ("at least --threads", |c| c.threads = 4),
            ("percentile 100", |c| c.percentiles = vec![50.0, 100.0]),
            ("percentile 0", |c| c.percentiles = vec![0.0]),
            ("empty", |c| c.percentiles.clear()),
            ("ci-width", |c| c.ci_width = 0.0),
            ("confidence", |c| c.confidence = 1.0),
            ("max-duration", |c| c.max_duration_ns = 1),
            ("duration", |c| c.duration_ns = 0),
            ("rt-priority", |c| c.rt_priority = Some(99)),
            ("warmup", |c| c.warmup_ns = Some(20_000_000_000)),
            ("only applies", |c| c.latency_rate = Some(10.0)),
            ("latency-rate", |c| {
                c.agent = AgentKind::Latency;
                c.latency_rate = Some(1e6);
            }),
            ("at least 32", |c| {
                c.app = App::Synthetic;
                c.size = 16;
            }),
        ];
        for (want, edit) in table {
            let mut c = cfg();
            edit(&mut c);
            let e = c.validate().expect_err(want).to_string();
            assert!(e.contains(want), "{want:?} not in {e:?}");
        }
        assert!(cfg().validate().is_ok());
    }

    #[test]
    fn agent_plans() {
        let mut c = cfg();
        c.rate = 1000.0;
        c.threads = 2;
        c.conns = 5;
        let p = plan_agents(&c);
        assert_eq!(p.len(), 2);
        assert_eq!((p[0].conns, p[1].conns), (3, 2));
        assert!(p.iter().all(|a| a.measure && a.rate == 500.0));
        c.agent = AgentKind::Throughput;
        assert!(plan_agents(&c).iter().all(|a| !a.measure));
        c.agent = AgentKind::Latency;
        let p = plan_agents(&c);
        assert_eq!(p.len(), 1);
        assert!(p[0].measure && p[0].rate == 1000.0);
        c.latency_rate = Some(100.0);
        let p = plan_agents(&c);
        assert_eq!(p.len(), 3);
        assert!(p[0].measure && p[0].rate == 100.0 && p[0].conns == 1);
        assert!(!p[1].measure && p[1].rate == 450.0);
        let idx: Vec<_> = p.iter().map(|a| a.index).collect();
        assert_eq!(idx, vec![0, 1, 2]);
    }

    fn tracker() -> Tracker {
        Tracker {
            measure: true,
            t0: 0,
            app: App::Echo,
            size: 64,
            inflight: vec![Slot::default(); INFLIGHT],
            outstanding: 0,
            counts: Counts::default(),
            batch: Vec::with_capacity(8),
            shared: Arc::new(Mutex::new(Vec::new())),
            shared_cap: 8,
            trace: Vec::new(),
            trace_cap: 0,
            timeline_ns: 0,
            timeline: Vec::new(),
        }
    }

    /// A response stamped before its request (a realtime clock step) is
    /// answered but not a sample, and counted; never a latency of 0.
    #[test]
    fn receive_before_transmit_is_counted_not_sampled() {
        // (case, tx user, tx kernel, tx hw, rx kernel, rx hw, rx user, wire time)
        type Case = (
            &'static str,
            u64,
            u64,
            u64,
            Option<u64>,
            Option<u64>,
            u64,
            Option<u64>,
        );
        let table: &[Case] = &[
            (
                "kernel stamps",
                1000,
                1100,
                0,
                Some(5100),
                None,
                5200,
                Some(4000),
            ),
            ("user stamps", 1000, 0, 0, None, None, 5200, Some(4200)),
            (
                "hardware stamps",
                1000,
                1100,
                2000,
                Some(5100),
                Some(4500),
                5200,
                Some(2500),
            ),
            (
                "kernel rx before kernel tx",
                1000,
                1100,
                0,
                Some(1050),
                None,
                5200,
                None,
            ),
            ("user rx before user tx", 1000, 0, 0, None, None, 900, None),
            (
                "hardware rx before hardware tx",
                1000,
                1100,
                2000,
                Some(5100),
                Some(1500),
                5200,
                None,
            ),
            (
                "user rtt backwards",
                1000,
                1100,
                0,
                Some(5100),
                None,
                999,
                None,
            ),
        ];
        for &(case, tx_user, tx_sw, tx_hw, rx_sw, rx_hw, rx_user, wire) in table {
            let mut t = tracker();
            t.inflight[Tracker::slot_of(5)] = Slot {
                id: 5,
                sched_ns: 0,
                send_mono: 10,
                tx_user_rt: tx_user,
                tx_sw,
                tx_hw,
                ..Slot::default()
            };
            t.outstanding = 1;
            t.complete(5, rx_sw, rx_hw, rx_user, None);
            t.flush();
            let samples = lock(&t.shared).clone();
            assert_eq!((t.counts.received, t.outstanding), (1, 0), "{case}");
            match wire {
                Some(w) => {
                    assert_eq!(t.counts.rx_before_tx, 0, "{case}");
                    assert_eq!(samples.len(), 1, "{case}");
                    assert_eq!(samples[0].latency_ns, 10 + w, "{case}");
                }
                None => {
                    assert_eq!(t.counts.rx_before_tx, 1, "{case}");
                    assert!(samples.is_empty(), "{case}: {samples:?}");
                }
            }
        }
    }

    #[test]
    fn mean_rate_of_degenerate_windows() {
        let mut c = cfg();
        c.rate = 1000.0;
        assert_eq!(c.mean_rate(0), 1000.0);
        c.rate_steps = vec![RateStep {
            at_ns: 500,
            rate: 3000.0,
        }];
        assert_eq!(c.mean_rate(1000), 2000.0);
        assert_eq!(c.mean_rate(500), 1000.0);
        // Unvalidated steps out of order: no panic; the rate before the step
        // back (3000) gets no time.
        c.rate_steps = vec![
            RateStep {
                at_ns: 600,
                rate: 3000.0,
            },
            RateStep {
                at_ns: 200,
                rate: 5000.0,
            },
        ];
        assert!(c.validate().is_err());
        assert_eq!(
            c.mean_rate(1000),
            (1000.0 * 600.0 + 5000.0 * 800.0) / 1000.0
        );
    }
}
