//! Settings of `xlane bench fd`: the failure kinds, the plan, the config, and
//! the heartbeat addresses and constants both parts share.

use crate::interference::Cores;
use serde::Serialize;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::path::PathBuf;
use xlane_fd::Reason;
use xlane_host::runtime::WaitMode;
use xlane_testbed::HostInfo;

/// Detector names in reports.
pub const XFD: &str = "x-fd";
/// X-FD on a polling lane core, in a run that compares both ways of
/// waiting ([`LaneModes::Both`]).
pub const XFD_POLL: &str = "x-fd-poll";
/// The plain-UDP fixed-timeout baseline.
pub const PLAIN_TIMEOUT: &str = "plain-timeout";
/// The plain-UDP phi-accrual baseline.
pub const PHI: &str = "phi-accrual";

/// Heartbeat port of the runners in the failure experiment.
pub(super) const RUNNER_PORT: u16 = 7400;
/// Their multicast group.
pub(super) const RUNNER_GROUP: Ipv4Addr = Ipv4Addr::new(239, 77, 3, 1);
/// `SCHED_FIFO` priority of the runners (the lane receivers' level).
pub(super) const RUNNER_FIFO: i32 = crate::flows::LANE_PRIORITY - 1;
/// `SCHED_FIFO` priority of the stand-in applications: above the CPU load
/// and the cross-traffic generators, below the lane.
pub(super) const APP_FIFO: i32 = 50;
/// False suspicions listed in the report at most.
pub const MAX_FALSE_LISTED: usize = 50;
/// The runners' Λ in part 2 when part 1 did not run and none was given.
pub const DEFAULT_FAILURE_LAMBDA_NS: u64 = 10_000_000;
/// Event slots in each runner's table.
pub(super) const RUNNER_EVENTS: usize = 65_536;

/// The lane heartbeat flow of host `h`.
pub(super) fn lane_group(h: usize) -> SocketAddrV4 {
    SocketAddrV4::new(Ipv4Addr::new(239, 77, 1, (h + 1) as u8), 7200 + h as u16)
}

/// The plain heartbeat flow of host `h`.
pub(super) fn plain_group(h: usize) -> SocketAddrV4 {
    SocketAddrV4::new(Ipv4Addr::new(239, 77, 2, (h + 1) as u8), 7300 + h as u16)
}

/// A kind of real failure.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FailureKind {
    /// `kill -9` of the victim's X-FD runner (by PID), restarted afterwards.
    KillRunner,
    /// The victim's link cut at the switch port, then restored.
    LinkDown,
    /// `SIGSTOP` of the victim's application, then `SIGCONT`.
    StopApp,
}

impl FailureKind {
    /// All three, in report order.
    pub const ALL: [FailureKind; 3] = [
        FailureKind::KillRunner,
        FailureKind::LinkDown,
        FailureKind::StopApp,
    ];

    /// Name in reports.
    pub fn name(self) -> &'static str {
        match self {
            FailureKind::KillRunner => "kill-runner",
            FailureKind::LinkDown => "link-down",
            FailureKind::StopApp => "stop-app",
        }
    }

    /// What it does, for the table.
    pub fn describe(self) -> &'static str {
        match self {
            FailureKind::KillRunner => "kill -9 of the X-FD runner",
            FailureKind::LinkDown => "link cut at the switch port",
            FailureKind::StopApp => "SIGSTOP of the application",
        }
    }

    /// The reason the others should suspect the victim for.
    pub fn expected_reason(self) -> Reason {
        match self {
            FailureKind::KillRunner | FailureKind::LinkDown => Reason::Silent,
            FailureKind::StopApp => Reason::Stalled,
        }
    }
}

/// The failure experiment's settings.
#[derive(Clone, Debug)]
pub struct FailurePlan {
    /// The `xlane` binary (runs `xlane fd run` and `xlane fd bump`).
    pub xlane_bin: PathBuf,
    /// Injections per kind.
    pub repetitions: usize,
    /// The runners' Λ, ns (`None`: derived, see the module docs).
    pub lambda_ns: Option<u64>,
    /// Stall threshold in periods (`None`: derived).
    pub stall_periods: Option<u32>,
    /// Which failures.
    pub kinds: Vec<FailureKind>,
    /// Let the runners lock their memory (`mlockall`). Off by default: the
    /// runner locks its memory after it has switched to `SCHED_FIFO` on the
    /// lane core, and locking a whole (debug) binary there holds the core
    /// for tens of ms, which every other runner on it sees as silence.
    pub lock_runner_memory: bool,
}

/// How part 1's lane loop waits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LaneModes {
    /// Every round in this mode.
    One(WaitMode),
    /// The rounds take turns, interrupt then busy-poll: X-FD ([`XFD`])
    /// and X-FD on the polling core ([`XFD_POLL`]) under the same
    /// interference, floor and plain-UDP baselines, in one run.
    Both,
}

impl LaneModes {
    /// How round `round` (from 0) waits.
    pub fn of_round(self, round: usize) -> WaitMode {
        match self {
            LaneModes::One(m) => m,
            LaneModes::Both if round % 2 == 0 => WaitMode::Interrupt,
            LaneModes::Both => WaitMode::BusyPoll,
        }
    }

    /// Whether round `round`'s X-FD is the polling one of a comparison.
    pub fn polling_round(self, round: usize) -> bool {
        self == LaneModes::Both && self.of_round(round) == WaitMode::BusyPoll
    }
}

impl std::str::FromStr for LaneModes {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "both" => Ok(LaneModes::Both),
            _ => s
                .parse::<WaitMode>()
                .map(LaneModes::One)
                .map_err(|_| format!("unknown mode {s:?} (use interrupt, busy-poll or both)")),
        }
    }
}

/// What to run.
#[derive(Clone, Debug)]
pub struct FdBenchConfig {
    /// Emulated hosts (each sends to all others).
    pub hosts: usize,
    /// Link rate of every port, bits/s.
    pub link_rate_bps: u64,
    /// Best-effort queue length per switch port, packets.
    pub best_effort_queue_pkts: u32,
    /// Heartbeat period T, ns.
    pub period_ns: u64,
    /// Heartbeat receptions each detector needs at least (part 1).
    pub heartbeats: u64,
    /// Rounds at most to reach them.
    pub max_rounds: usize,
    /// Saturating best-effort cross traffic.
    pub cross_traffic: bool,
    /// CPU load on every core but the lane core.
    pub cpu_load: bool,
    /// The lane core.
    pub lane_core: usize,
    /// Apply the host measures of the lane core.
    pub tuning: bool,
    /// How part 1's lane loop waits: interrupt, busy-poll (the lane core
    /// polls), or both in turns. Part 2's runners always sleep when idle,
    /// since they share the lane core.
    pub lane_mode: LaneModes,
    /// Run part 1 (accuracy against the threshold).
    pub accuracy: bool,
    /// Run part 2 (real failures) with these settings.
    pub failures: Option<FailurePlan>,
    /// Write the plot here.
    pub plot_dir: Option<PathBuf>,
}

impl Default for FdBenchConfig {
    fn default() -> Self {
        FdBenchConfig {
            hosts: 4,
            link_rate_bps: 100_000_000,
            best_effort_queue_pkts: 1000,
            period_ns: 1_000_000,
            heartbeats: 1_000_000,
            max_rounds: 4,
            cross_traffic: true,
            cpu_load: true,
            lane_core: Cores::online().saturating_sub(1),
            tuning: true,
            lane_mode: LaneModes::One(WaitMode::Interrupt),
            accuracy: true,
            failures: None,
            plot_dir: None,
        }
    }
}

/// Host index of a heartbeat address.
pub(super) fn host_of(hosts: &[HostInfo], a: SocketAddrV4) -> Option<usize> {
    hosts.iter().position(|h| h.addr == *a.ip())
}
