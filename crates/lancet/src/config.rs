//! The settings of a run ([`ClientConfig`]: target, rate, agents, length,
//! percentiles and their intervals) and their checks ([`ConfigError`]).

use crate::dist::Arrival;
use crate::proto::{App, ProtoError};
use crate::Transport;
use serde::Serialize;
use std::net::SocketAddrV4;

/// Largest [`ClientConfig::stamp_trace`].
pub const MAX_STAMP_TRACE: usize = 1_000_000;

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
    /// measuring agent (`client::run_traced`), to check the stamping; 0: none.
    pub stamp_trace: usize,
    /// More servers (UDP, R2P2): each request goes to one of `target` and
    /// these, picked uniformly at random from a seeded stream (R2P2's
    /// baseline without a router: the client picks a server at random).
    pub more_targets: Vec<SocketAddrV4>,
    /// Changes of the total rate during the run (`rate` is the first rate),
    /// in time order; every agent keeps its share. Empty: one rate.
    pub rate_steps: Vec<RateStep>,
    /// Count every request in `client::RunOutput::timeline` by its scheduled
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

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
