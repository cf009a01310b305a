//! `xlane bench fd`: the failure detector experiment of X-Lane §6.4 (Fig. 7)
//! with two baselines on the regular path, and real failures.
//!
//! ## Part 1: accuracy against the threshold
//!
//! The emulated datacenter (4 hosts, 100 Mbit/s ports) runs under saturating
//! best-effort cross traffic into **every** host's switch port and CPU load
//! on the regular cores, with the floor probes on. Every host sends a
//! heartbeat to all other hosts every `T` (1 ms), twice, in the same run:
//!
//! * on the lane ([`Variant::Xlane`]: express class, multicast, lane threads
//!   pinned to the lane core at `SCHED_FIFO`, host measures applied) — the
//!   heartbeat path of X-FD;
//! * on plain UDP ([`Variant::Plain`]: default socket, DSCP 0, ordinary
//!   threads) — the heartbeat path of both baselines.
//!
//! Each receiving thread records every heartbeat (send stamp, kernel receive
//! stamp, the instant the thread holds it). The run lasts until every
//! detector has seen at least `--heartbeats` receptions (hosts × (hosts − 1)
//! per period; the plain path has fewer: its ordinary sender threads miss
//! periods under CPU load and the saturated switch ports drop some, so the
//! run is lengthened in further rounds until it has enough too).
//!
//! Then the arrival sequence of every (receiver, sender) pair and round is
//! replayed through the suspicion models of `xlane-fd` ([`replay`]; each
//! round starts the models afresh, the first heartbeat of a pair in a round
//! only starts its history). They give for every inter-arrival interval the
//! level just before the heartbeat that ended it, so the accuracy at every
//! threshold is exact:
//!
//! | detector | heartbeats | model |
//! |---|---|---|
//! | `x-fd` | lane | [`FixedTimeout`] anchored at the last arrival, as [`xlane_fd::XFd::x_fd`] builds it: suspect after `T + Λ` without a heartbeat |
//! | `plain-timeout` | plain UDP | the same fixed timeout |
//! | `phi-accrual` | plain UDP | [`PhiAccrual`] (Hayashibara et al.; what Cassandra and Akka use), window 1000, σ floor T/10 ([`PhiParams::for_period`]) |
//!
//! The detector's clock is the receiving thread's (`user_rx_ns`): that is
//! when a detector process learns of a heartbeat. The same replay with the
//! kernel's receive stamps is reported beside it (the runner of
//! `xlane fd run` uses those).
//!
//! **Accuracy** follows the paper's Fig. 7: an alive process is wrongly
//! suspected when its heartbeat comes later than the threshold allows, so
//! the accuracy at Λ is the fraction of heartbeats (inter-arrival intervals,
//! each ended by one received heartbeat) during which the detector would not
//! have suspected the sender. Λ excludes T, as in the paper ("we omitted T
//! in the computation of the threshold"). A lost heartbeat makes a longer
//! interval, so the timeout needed to tolerate it grows by T. The paper's
//! own metric — each heartbeat's latency, i.e. the timeout anchored at the
//! sender's send time (the emulated hosts share one clock) — is reported as
//! `send_anchor_min_perfect_threshold_ns`.
//!
//! **Host gaps.** The floor probes of the same run record when the machine
//! took each core away (hypervisor, interrupts). Every emulated host shares
//! this machine's two cores, so one such gap silences several hosts at
//! once. Beside the raw numbers, each detector's smallest perfect Λ is also
//! given outside host gaps, by the strict rule of `bench bounds`
//! ([`crate::fd_gaps`]): at Λ, an interval counts as explained when the gap
//! time recorded inside it, on the cores its path runs on (the lane core
//! for X-FD, the regular cores for plain UDP and phi: the ports are split
//! by CPU), covers its excess over T + Λ; the smallest such Λ keeps whatever part of a silence
//! its gap time does not cover. The intervals above that Λ (each explained)
//! are counted as set aside, and both ratios plain timeout / X-FD, over
//! all intervals and outside host gaps, are reported.
//!
//! **Phi on the same axis.** Phi-accrual's threshold is a φ value, not a
//! time. Its smallest perfect φ* is exact (the highest φ a live peer
//! reached). To place it on the Λ axis, a φ is converted to the timeout it
//! implies under the run's *average* estimates: `Λ(φ) = μ̄ + z(φ)·σ̄ − T`,
//! where `z(φ)` is the standard-normal quantile with `−log10 P(Z > z) = φ`
//! and `μ̄`, `σ̄` are the mean and standard deviation phi estimated, averaged
//! over every interval of the run (over all pairs). This is monotone in φ,
//! so the curve keeps its shape; it is an average, not what phi did at each
//! instant: its timeout moved with its estimates, and the longest timeout it
//! applied at φ* (`max over intervals of μᵢ + z(φ*)·σᵢ − T`) is reported as
//! `timeout_at_min_perfect_max_ns` — that, not the average, bounds its
//! detection time.
//!
//! ## Part 2: real failures
//!
//! Every host runs the real X-FD — `xlane fd run` (the crate's runner, a
//! separate process per host in the host's namespace, on the lane core at
//! `SCHED_FIFO`, multicast heartbeats every T) — with a stand-in application
//! `xlane fd bump` bumping its liveness counter every T/3. Then, `R` times
//! each, on a rotating victim host:
//!
//! * `kill-runner`: `kill -9` of the victim's runner by its PID (then it is
//!   restarted, and the others see it restart);
//! * `link-down`: the victim's link is cut at the switch (its veth peer, the
//!   switch port, is set down, and up again afterwards). Cutting the switch
//!   side keeps the host's routes, as a pulled cable would;
//! * `stop-app`: `SIGSTOP` of the victim's application (its host keeps
//!   sending heartbeats; the counter stops), then `SIGCONT`.
//!
//! The injection instant is taken right before `kill(2)` or the
//! `SIOCSIFFLAGS` request (issued from a thread inside the switch's
//! namespace; the veth pair loses its carrier before the call returns).
//! Each runner publishes its events in the shared alive table; the
//! benchmark follows every table's event ring ([`xlane_fd::AliveTable`]).
//! An injection lasts from that instant until every runner trusts every
//! host again after the failure was undone. The detection time at a host is
//! its first `Suspected` event for the victim during the injection (reason
//! `Silent` for the first two kinds, `Stalled` for the third) minus the
//! injection instant. Every other suspicion counts as a **false
//! suspicion**, except the cut host suspecting its peers while cut (a
//! partition looks the same from both sides; counted apart). The floor
//! probes run in part 2 too, and a false suspicion is put down to a host
//! gap when the lane core (where every runner runs) was away for at least
//! half of the silence `[t − T − Λ, t]` behind it.
//!
//! The runners' Λ is by default `max(2 × X-FD's smallest perfect Λ of part 1
//! (kernel stamps, which the runner uses), 2 × the longest host gap the
//! floor probes saw in part 1, 1 ms)` ([`DEFAULT_FAILURE_LAMBDA_NS`] without
//! part 1): the failure part is meant to show detection without false
//! suspicions, so Λ is set from what this machine showed it needs. The
//! stall threshold is `max(10, ⌈Λ/T⌉ + 2)` periods. Suspicions before every
//! runner first trusts every host are counted apart (start-up).
//!
//! The runners run with `--no-mlock` unless
//! [`FailurePlan::lock_runner_memory`]: `xlane fd run` locks its memory after
//! switching to `SCHED_FIFO` on the lane core, and all emulated hosts share
//! that core, so each (re)start would hold it for tens of ms and every other
//! runner would be suspected.
//!
//! Everything (processes, link state, host measures, namespaces, files) is
//! restored or removed on every path, also on error.
//!
//! [`Variant::Xlane`]: crate::flows::Variant::Xlane
//! [`Variant::Plain`]: crate::flows::Variant::Plain
//! [`replay`]: xlane_fd::replay
//! [`FixedTimeout`]: xlane_fd::FixedTimeout
//! [`PhiAccrual`]: xlane_fd::PhiAccrual
//! [`PhiParams::for_period`]: xlane_fd::PhiParams::for_period

mod accuracy;
mod analysis;
mod classify;
mod config;
mod error;
mod failure;
mod fleet;
mod plot;
mod recorder;
mod replay;
mod report;
mod run;
#[cfg(test)]
mod tests;
mod text;

pub use config::{
    FailureKind, FailurePlan, FdBenchConfig, LaneModes, DEFAULT_FAILURE_LAMBDA_NS,
    MAX_FALSE_LISTED, PHI, PLAIN_TIMEOUT, XFD, XFD_POLL,
};
pub use error::FdBenchError;
pub use report::{
    DetectorReport, FailureReport, FailureRun, FalseSuspicion, FdBenchReport, FdRunParams,
    PhiDetail, RoundReport, Window,
};
pub use run::run;
