//! `xlane lancet cross-check`: lancet and `sockperf ping-pong` measure the
//! same `sockperf server` on 127.0.0.1, in alternating rounds, and their
//! pooled round-trip percentiles are compared.
//!
//! This is a measurement, not a test: on a shared machine its outcome
//! depends on what else runs (docs/design.md, "Principles"). The test suite only
//! checks that both tools work against a real sockperf server
//! (`crates/lancet/tests/sockperf.rs`); the comparison is this command's.
//!
//! The procedure, and why (measured on the 2-vCPU Firecracker VM this is
//! built on):
//!
//! - **Fixed placement** ([`Placement`]). The server runs on one CPU (the
//!   last by default), both clients on another (CPU 0). A round trip between
//!   vCPUs includes the hypervisor waking the other vCPU; where the
//!   scheduler happens to put the threads changed sockperf's own p50 from
//!   17 µs to 63 µs between consecutive runs.
//! - **Both clients poll.** sockperf paces its sends by spinning and, with
//!   `--nonblocked`, spins on `recvfrom`; lancet busy-polls for its whole
//!   inter-send gap. A client that sleeps pays a vCPU wake-up (≈ 10 µs
//!   there) on every reply, a property of the client, not of the path.
//! - **A vCPU that does not halt.** With a placement, a `SCHED_IDLE` thread
//!   spins on the server's CPU (it runs only when nothing else wants that
//!   CPU). Without it, whether the server's vCPU had halted between
//!   requests switched whole rounds of either tool between ≈ 23 µs and
//!   ≈ 44 µs.
//! - **A real-time server.** `sockperf server` runs under `chrt -f 10`
//!   ([`CrossCheckConfig::server_priority`]): other work then cannot stall
//!   it for milliseconds. Such stalls hit the tools differently — sockperf
//!   is closed-loop (one late request per stall), lancet open-loop (every
//!   request scheduled during the stall) — and would compare their
//!   scheduling models rather than their clocks.
//! - **Turns, not together.** Run at once, the clients would compete for
//!   their CPU. They take turns in short rounds, which also spreads slow
//!   drift and busy moments of the machine over both; each tool's
//!   observations are pooled over its rounds (sockperf's from its
//!   `--full-log`) and one percentile is taken over each pool (never an
//!   average of percentiles).
//!
//! sockperf times a round trip in user space, from before its send call to
//! after its receive call; lancet's comparable figure is
//! [`Sample::user_rtt_ns`](crate::Sample::user_rtt_ns) (the same two
//! points), printed beside its kernel-stamped latency. sockperf does no
//! thinning, so lancet's pool is all its post-warm-up samples.
//!
//! **The floor.** After each lancet round, every CPU in play is watched
//! for [`CrossCheckConfig::floor_ns`] by [`xlane_host::floor`]'s spinning
//! probe at normal priority (as `xlane doctor` runs it): the time a normal
//! thread could not run there, in gaps above 10 µs. That is what the
//! clients (normal priority, spinning) lose on their CPU, and an upper
//! bound of what the `SCHED_FIFO` server loses on its own. The probes run
//! between the rounds, not during them: a probe on the clients' CPU would
//! take that CPU from the spinning clients and lengthen the round trips it
//! is meant to explain. The report gives each CPU's stolen share, its
//! longest gap, and the share of median-length round trips its gaps would
//! touch, to set beside the tail beyond the highest percentile.
//!
//! Needs the Debian package `sockperf` (3.x), `taskset` and `chrt`
//! (util-linux), two CPUs for the placement, and root (`CAP_SYS_NICE`) for
//! the real-time server.

mod report;
mod tools;

pub use report::{CpuFloor, CrossCheckReport, LancetRound, Row, SockperfRound};
pub use tools::sockperf_version;

use crate::client::{run_with_samples, ClientConfig, RunError};
use crate::dist::Arrival;
use crate::proto::App;
use crate::sockperf::SockperfParseError;
use serde::Serialize;
use std::io;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::path::PathBuf;
use std::process::ExitStatus;
use std::time::Duration;
use tools::{free_udp_port, sockperf_round, start_server, AffinityGuard, IdleSpinner};
use xlane_host::floor::{FloorConfig, FloorError, FloorProbe, FloorReport};
use xlane_stats::percentile;

/// Where the server and the clients run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Placement {
    /// The CPU of both clients (sockperf ping-pong and lancet's agent).
    pub client_cpu: usize,
    /// The CPU of `sockperf server` and of the `SCHED_IDLE` spinner.
    pub server_cpu: usize,
}

/// Settings of the cross-check.
#[derive(Clone, Debug, Serialize)]
pub struct CrossCheckConfig {
    /// Message size, bytes (≥ 14: sockperf's header).
    pub size: usize,
    /// Messages per second of each tool, fixed spacing.
    pub rate: u32,
    /// Length of one round of one tool, seconds.
    pub round_seconds: u64,
    /// Rounds of each tool (they alternate: sockperf, lancet, sockperf, …).
    pub rounds: usize,
    /// Percentiles (percent) compared, each in (0, 100).
    pub percentiles: Vec<f64>,
    /// Largest relative difference `|lancet / sockperf − 1|` that agrees.
    pub tolerance: f64,
    /// Fixed placement (`taskset`, the caller's thread pinned for lancet,
    /// the `SCHED_IDLE` spinner); `None` leaves it to the scheduler.
    pub placement: Option<Placement>,
    /// Run `sockperf server` under `chrt -f` at this priority (1..=98,
    /// needs `CAP_SYS_NICE`); `None`: normal scheduling.
    pub server_priority: Option<i32>,
    /// Floor probe after each lancet round, per CPU, ns (0: no floor).
    pub floor_ns: u64,
    /// After a lancet round's last send, how long to wait for its
    /// outstanding replies, ns (a safety net; unanswered requests count as
    /// lost).
    pub drain_ns: u64,
    /// Seed of lancet's rounds (round r uses `seed + r`).
    pub seed: u64,
}

impl Default for CrossCheckConfig {
    /// 64 B at 1000/s, 16 rounds of 1 s each, p50 and p99 within 20 %,
    /// no placement, normal scheduling, 250 ms of floor per round.
    fn default() -> Self {
        CrossCheckConfig {
            size: 64,
            rate: 1000,
            round_seconds: 1,
            rounds: 16,
            percentiles: vec![50.0, 99.0],
            tolerance: 0.20,
            placement: None,
            server_priority: None,
            floor_ns: 250_000_000,
            drain_ns: 1_000_000_000,
            seed: 1,
        }
    }
}

/// Why the cross-check could not run (a disagreement is not an error: it
/// is in the report).
#[derive(Debug, thiserror::Error)]
pub enum CrossCheckError {
    /// Bad settings.
    #[error("{0}")]
    Config(String),
    /// A program is missing.
    #[error("`{program}` is not installed: {hint}")]
    NotInstalled {
        /// The program.
        program: &'static str,
        /// How to get it.
        hint: &'static str,
    },
    /// A program could not be started.
    #[error("starting `{command}`: {source}")]
    Spawn {
        /// The command line.
        command: String,
        /// The OS error.
        source: io::Error,
    },
    /// `sockperf server` exited before answering.
    #[error("`{command}` exited ({status}) before answering: {stderr}")]
    ServerExited {
        /// The command line.
        command: String,
        /// Its exit status.
        status: ExitStatus,
        /// What it printed on stderr.
        stderr: String,
    },
    /// `sockperf server` did not answer.
    #[error("`{command}` did not answer within {timeout_s} s")]
    ServerSilent {
        /// The command line.
        command: String,
        /// How long it was given.
        timeout_s: u64,
    },
    /// `sockperf ping-pong` failed.
    #[error("`{command}` failed ({status}):\n{output}")]
    PingPong {
        /// The command line.
        command: String,
        /// Its exit status.
        status: ExitStatus,
        /// What it printed.
        output: String,
    },
    /// sockperf's output did not parse.
    #[error("{source}; sockperf printed:\n{output}")]
    Parse {
        /// What was missing.
        source: SockperfParseError,
        /// What it printed.
        output: String,
    },
    /// sockperf's `--full-log` could not be read.
    #[error("reading sockperf's --full-log {path}: {source}")]
    FullLog {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// A tool produced no round trips at all.
    #[error("{tool} produced no round trips")]
    NoObservations {
        /// Which tool.
        tool: &'static str,
    },
    /// Pinning a thread failed.
    #[error("pinning a thread to CPU {cpu}: {source}")]
    Pin {
        /// The CPU.
        cpu: usize,
        /// The OS error.
        source: io::Error,
    },
    /// The `SCHED_IDLE` spinner could not start.
    #[error("the SCHED_IDLE spinner on CPU {cpu}: {source}")]
    Spinner {
        /// The CPU.
        cpu: usize,
        /// The OS error.
        source: io::Error,
    },
    /// A lancet round could not run.
    #[error("lancet: {0}")]
    Lancet(#[from] RunError),
    /// A floor probe could not start.
    #[error("floor probe: {0}")]
    Floor(#[from] FloorError),
}

/// The client settings of a lancet round against `port`.
pub fn lancet_config(cfg: &CrossCheckConfig, port: u16, round: usize) -> ClientConfig {
    let duration_ns = cfg.round_seconds.saturating_mul(1_000_000_000);
    ClientConfig {
        app: App::Sockperf,
        size: cfg.size,
        rate: cfg.rate as f64,
        arrival: Arrival::Fixed,
        duration_ns,
        max_duration_ns: duration_ns,
        percentiles: cfg.percentiles.clone(),
        // Poll for the whole gap between sends, as sockperf does.
        spin_ns: 1_000_000_000 / u64::from(cfg.rate.max(1)),
        drain_ns: cfg.drain_ns,
        seed: cfg.seed.wrapping_add(round as u64),
        ..ClientConfig::new(SocketAddrV4::new(Ipv4Addr::LOCALHOST, port))
    }
}

/// A CPU's floor summed over the slices.
#[derive(Clone, Copy, Default)]
struct FloorSum {
    duration_ns: u64,
    stolen_ns: u64,
    max_gap_ns: u64,
    gaps: u64,
    threshold_ns: u64,
}

impl FloorSum {
    fn add(&mut self, r: &FloorReport) {
        self.duration_ns += r.duration_ns;
        self.stolen_ns += r.stolen_ns;
        self.max_gap_ns = self.max_gap_ns.max(r.max_gap_ns);
        self.gaps += r.gaps.len() as u64 + r.gaps_dropped;
        self.threshold_ns = r.threshold_ns;
    }
}

/// One floor slice: a probe on each CPU, started together. Each is
/// [`xlane_host::floor`]'s spinning probe at normal priority (its default,
/// as `xlane doctor` runs it): the time a normal thread could not run
/// there, gaps above 10 µs.
fn floor_slice(
    cfg: &CrossCheckConfig,
    cpus: &[usize],
    sums: &mut [FloorSum],
) -> Result<(), CrossCheckError> {
    let mut probes = Vec::new();
    for &cpu in cpus {
        probes.push(FloorProbe::start(cpu, FloorConfig::default())?);
    }
    std::thread::sleep(Duration::from_nanos(cfg.floor_ns));
    for (p, sum) in probes.into_iter().zip(sums.iter_mut()) {
        sum.add(&p.stop());
    }
    Ok(())
}

impl CrossCheckConfig {
    /// Check the settings; the error says what is wrong.
    pub fn validate(&self) -> Result<(), CrossCheckError> {
        let bad = |m: String| Err(CrossCheckError::Config(m));
        if self.size < 14 || self.size > 65_507 {
            return bad(format!(
                "the message size must be in 14..=65507 bytes (sockperf's header is 14), got {}",
                self.size
            ));
        }
        if !(1..=1_000_000).contains(&self.rate) {
            return bad(format!(
                "the rate must be in 1..=1000000 messages/s, got {}",
                self.rate
            ));
        }
        if !(1..=3600).contains(&self.round_seconds) {
            return bad(format!(
                "a round must last 1..=3600 s, got {}",
                self.round_seconds
            ));
        }
        if !(1..=1000).contains(&self.rounds) {
            return bad(format!("rounds must be in 1..=1000, got {}", self.rounds));
        }
        if self.percentiles.is_empty()
            || self
                .percentiles
                .iter()
                .any(|p| !(p.is_finite() && *p > 0.0 && *p < 100.0))
        {
            return bad("every percentile must be in (0, 100)".into());
        }
        if !(self.tolerance.is_finite() && self.tolerance > 0.0 && self.tolerance < 10.0) {
            return bad(format!(
                "the tolerance must be in (0, 10), got {}",
                self.tolerance
            ));
        }
        if let Some(p) = self.placement {
            if p.client_cpu == p.server_cpu {
                return bad(format!(
                    "the server and the clients need different CPUs, both are {}",
                    p.client_cpu
                ));
            }
        }
        if self
            .server_priority
            .is_some_and(|p| !crate::sched::RT_PRIORITY_RANGE.contains(&p))
        {
            return bad("the server's SCHED_FIFO priority must be in 1..=98".into());
        }
        if self.floor_ns > 60_000_000_000 {
            return bad("the floor slice must be at most 60 s".into());
        }
        Ok(())
    }

    /// The CPUs the floor probes watch, with who runs there.
    fn floor_cpus(&self) -> Vec<(usize, &'static str)> {
        match self.placement {
            Some(p) => vec![(p.client_cpu, "clients"), (p.server_cpu, "server")],
            None => {
                let n = std::thread::available_parallelism().map_or(1, |n| n.get());
                (0..n).map(|c| (c, "any")).collect()
            }
        }
    }
}

/// Run the cross-check: about `2 · rounds · round_seconds` plus
/// `rounds · floor_ns`, plus start-up and drain.
///
/// With a placement, the calling thread is pinned to the clients' CPU for
/// the duration (lancet's agent threads inherit it) and restored after.
pub fn run(cfg: &CrossCheckConfig) -> Result<CrossCheckReport, CrossCheckError> {
    cfg.validate()?;
    let version = sockperf_version()?;
    let port = free_udp_port()?;
    let server = start_server(cfg, port)?;
    let spinner = match cfg.placement {
        Some(p) => Some(IdleSpinner::start(p.server_cpu)?),
        None => None,
    };
    let pinned = match cfg.placement {
        Some(p) => Some(AffinityGuard::pin(p.client_cpu)?),
        None => None,
    };
    let floor_cpus = if cfg.floor_ns > 0 {
        cfg.floor_cpus()
    } else {
        Vec::new()
    };
    let cpus: Vec<usize> = floor_cpus.iter().map(|&(c, _)| c).collect();
    let mut floor_sums = vec![FloorSum::default(); cpus.len()];

    let (mut sp_pool, mut user, mut kern) = (Vec::new(), Vec::new(), Vec::new());
    let mut sockperf_rounds = Vec::new();
    let mut lancet_rounds = Vec::new();
    let mut lancet_lost = 0;
    for round in 0..cfg.rounds {
        let (rec, rtts) = sockperf_round(cfg, port, round)?;
        sp_pool.extend_from_slice(&rtts);
        sockperf_rounds.push(rec);

        let lc = lancet_config(cfg, port, round);
        let (rep, samples) = run_with_samples(&lc)?;
        let mut u: Vec<u64> = samples.iter().map(|s| u64::from(s.user_rtt_ns)).collect();
        u.sort_unstable();
        let k = &rep.counts;
        lancet_lost += k.lost;
        lancet_rounds.push(LancetRound {
            round,
            sent: k.sent,
            received: k.received,
            lost: k.lost,
            malformed: k.malformed,
            unmatched: k.unmatched,
            send_errors: k.send_errors,
            samples: samples.len(),
            after_warmup: rep.samples.after_warmup,
            user_rtt_ns: cfg
                .percentiles
                .iter()
                .filter_map(|&p| percentile(&u, p / 100.0).map(|v| (p, v)))
                .collect(),
        });
        user.extend_from_slice(&u);
        kern.extend(samples.iter().map(|s| s.latency_ns));

        if !cpus.is_empty() {
            floor_slice(cfg, &cpus, &mut floor_sums)?;
        }
    }
    drop(pinned);
    drop(spinner);
    drop(server);
    for v in [&mut sp_pool, &mut user, &mut kern] {
        v.sort_unstable();
    }
    let rows = compare_pools(cfg, &sp_pool, &user, &kern)?;
    // The pool is not empty (compare_pools checked).
    let median = percentile(&sp_pool, 0.5).unwrap_or(0);
    let floor = floor_cpus
        .iter()
        .zip(floor_sums)
        .map(|(&(cpu, role), f)| cpu_floor(cpu, role, &f, median))
        .collect();
    let silent = sockperf_rounds.iter().filter(|r| r.no_replies).count();
    // No row is no agreement.
    let agree = !rows.is_empty() && rows.iter().all(|r| r.agree) && lancet_lost == 0 && silent == 0;
    let verdict = verdict(cfg, &rows, lancet_lost, silent);
    Ok(CrossCheckReport {
        config: cfg.clone(),
        sockperf_version: version,
        port,
        sockperf_rounds,
        lancet_rounds,
        sockperf_pool: sp_pool.len(),
        lancet_pool: user.len(),
        rows,
        floor,
        lancet_lost,
        agree,
        verdict,
    })
}

/// The compared percentiles of the pooled round trips (each sorted): an
/// error if a tool produced none.
fn compare_pools(
    cfg: &CrossCheckConfig,
    sockperf: &[u64],
    user: &[u64],
    kernel: &[u64],
) -> Result<Vec<Row>, CrossCheckError> {
    if sockperf.is_empty() {
        return Err(CrossCheckError::NoObservations { tool: "sockperf" });
    }
    if user.is_empty() {
        return Err(CrossCheckError::NoObservations { tool: "lancet" });
    }
    let mut rows = Vec::new();
    for &p in &cfg.percentiles {
        let q = p / 100.0;
        let (Some(s), Some(l), Some(k)) = (
            percentile(sockperf, q),
            percentile(user, q),
            percentile(kernel, q),
        ) else {
            continue;
        };
        let ratio = l as f64 / s.max(1) as f64;
        rows.push(Row {
            percentile: p,
            sockperf_ns: s,
            lancet_user_rtt_ns: l,
            ratio,
            lancet_kernel_ns: k,
            agree: (ratio - 1.0).abs() <= cfg.tolerance,
        });
    }
    Ok(rows)
}

/// One CPU's floor over the slices, with the share of `median`-long round
/// trips its gaps would touch. A probe that ran for no time has no
/// fractions: NaN (`null` in JSON, "not measured" in the text), not 0.
fn cpu_floor(cpu: usize, role: &'static str, f: &FloorSum, median: u64) -> CpuFloor {
    let (stolen_fraction, touch_share) = if f.duration_ns == 0 {
        (f64::NAN, f64::NAN)
    } else {
        let d = f.duration_ns as f64;
        (
            f.stolen_ns as f64 / d,
            ((f.gaps as f64 * median as f64 + f.stolen_ns as f64) / d).min(1.0),
        )
    };
    CpuFloor {
        cpu,
        role,
        duration_ns: f.duration_ns,
        stolen_ns: f.stolen_ns,
        stolen_fraction,
        max_gap_ns: f.max_gap_ns,
        gaps: f.gaps,
        threshold_ns: f.threshold_ns,
        touch_share,
    }
}

fn verdict(cfg: &CrossCheckConfig, rows: &[Row], lost: u64, silent: usize) -> String {
    let ratios: Vec<String> = rows
        .iter()
        .map(|r| {
            format!(
                "{} {:.3}",
                crate::analysis::label(r.percentile / 100.0),
                r.ratio
            )
        })
        .collect();
    let tol = cfg.tolerance * 100.0;
    if rows.is_empty() {
        "verdict: NOT COMPARABLE: no percentile could be compared".to_string()
    } else if silent > 0 {
        format!(
            "verdict: NOT COMPARABLE: the server answered none of sockperf's requests in \
             {silent} round(s), a stall that the closed-loop sockperf does not record ({})",
            ratios.join(", ")
        )
    } else if lost > 0 {
        format!(
            "verdict: NOT COMPARABLE: lancet lost {lost} requests, its pool misses their round trips ({})",
            ratios.join(", ")
        )
    } else if rows.iter().all(|r| r.agree) {
        format!(
            "verdict: lancet and sockperf agree within {tol:.0} % ({})",
            ratios.join(", ")
        )
    } else {
        let bad: Vec<String> = rows
            .iter()
            .filter(|r| !r.agree)
            .map(|r| crate::analysis::label(r.percentile / 100.0))
            .collect();
        format!(
            "verdict: DISAGREE by more than {tol:.0} % at {} ({})",
            bad.join(", "),
            ratios.join(", ")
        )
    }
}

#[cfg(test)]
mod tests {
    use super::tools::placed;
    use super::*;

    #[test]
    fn settings_are_checked() {
        assert!(CrossCheckConfig::default().validate().is_ok());
        type Case = (&'static str, fn(&mut CrossCheckConfig));
        let cases: [Case; 8] = [
            ("size", |c| c.size = 13),
            ("rate", |c| c.rate = 0),
            ("round", |c| c.round_seconds = 0),
            ("rounds", |c| c.rounds = 0),
            ("percentile", |c| c.percentiles = vec![50.0, 100.0]),
            ("tolerance", |c| c.tolerance = f64::NAN),
            ("different CPUs", |c| {
                c.placement = Some(Placement {
                    client_cpu: 1,
                    server_cpu: 1,
                })
            }),
            ("priority", |c| c.server_priority = Some(99)),
        ];
        for (want, f) in cases {
            let mut c = CrossCheckConfig::default();
            f(&mut c);
            match c.validate() {
                Err(CrossCheckError::Config(m)) => assert!(m.contains(want), "{want}: {m}"),
                r => panic!("{want}: {r:?}"),
            }
        }
    }

    #[test]
    fn commands_are_placed() {
        let args = ["sockperf".to_string(), "server".to_string()];
        assert_eq!(placed(None, None, &args), args);
        assert_eq!(
            placed(Some(1), Some(10), &args).join(" "),
            "taskset -c 1 chrt -f 10 sockperf server"
        );
        assert_eq!(placed(Some(0), None, &args)[..3], ["taskset", "-c", "0"]);
    }

    fn row(p: f64, ratio: f64) -> Row {
        Row {
            percentile: p,
            sockperf_ns: 1000,
            lancet_user_rtt_ns: (1000.0 * ratio) as u64,
            ratio,
            lancet_kernel_ns: 900,
            agree: (ratio - 1.0).abs() <= 0.2,
        }
    }

    #[test]
    fn verdict_lines() {
        let c = CrossCheckConfig::default();
        let ok = [row(50.0, 1.05), row(99.0, 0.9)];
        assert_eq!(
            verdict(&c, &ok, 0, 0),
            "verdict: lancet and sockperf agree within 20 % (p50 1.050, p99 0.900)"
        );
        let bad = [row(50.0, 1.05), row(99.0, 1.25)];
        assert!(verdict(&c, &bad, 0, 0).starts_with("verdict: DISAGREE by more than 20 % at p99 ("));
        assert!(verdict(&c, &ok, 3, 0).contains("NOT COMPARABLE: lancet lost 3"));
        assert!(verdict(&c, &ok, 0, 2).contains("NOT COMPARABLE: the server answered none"));
    }

    #[test]
    fn lancet_rounds_poll_for_the_whole_gap() {
        let c = CrossCheckConfig::default();
        let lc = lancet_config(&c, 5000, 3);
        assert!(lc.validate().is_ok());
        assert_eq!(lc.spin_ns, 1_000_000);
        assert_eq!(lc.duration_ns, lc.max_duration_ns);
        assert_eq!(
            (lc.app, lc.arrival, lc.seed),
            (App::Sockperf, Arrival::Fixed, 4)
        );
    }

    #[test]
    fn a_tool_that_produced_nothing() {
        let c = CrossCheckConfig::default();
        let some = [1000u64, 2000, 3000];
        // (sockperf pool, lancet pool, the tool named in the error)
        let table: &[(&[u64], &[u64], Option<&str>)] = &[
            (&[], &some, Some("sockperf")),
            (&some, &[], Some("lancet")),
            (&[], &[], Some("sockperf")),
            (&[0], &[0], None),
            (&[1000], &[1100], None),
        ];
        for &(sp, user, want) in table {
            match (compare_pools(&c, sp, user, user), want) {
                (Err(CrossCheckError::NoObservations { tool }), Some(w)) => assert_eq!(tool, w),
                (Ok(rows), None) => {
                    assert_eq!(rows.len(), c.percentiles.len());
                    assert!(rows.iter().all(|r| r.ratio.is_finite()), "{rows:?}");
                }
                (r, w) => panic!("{sp:?} {user:?}: {r:?}, wanted {w:?}"),
            }
        }
        assert_eq!(
            verdict(&c, &[], 0, 0),
            "verdict: NOT COMPARABLE: no percentile could be compared"
        );
    }

    #[test]
    fn a_floor_that_ran_for_no_time_is_not_measured() {
        let f = cpu_floor(1, "any", &FloorSum::default(), 50_000);
        assert!(
            f.stolen_fraction.is_nan() && f.touch_share.is_nan(),
            "{f:?}"
        );
        let ran = FloorSum {
            duration_ns: 1_000_000,
            stolen_ns: 10_000,
            max_gap_ns: 10_000,
            gaps: 1,
            threshold_ns: 10_000,
        };
        let g = cpu_floor(0, "any", &ran, 0);
        assert_eq!((g.stolen_fraction, g.touch_share), (0.01, 0.01));
        let c = CrossCheckConfig::default();
        let report = CrossCheckReport {
            config: c.clone(),
            sockperf_version: None,
            port: 0,
            sockperf_rounds: vec![SockperfRound {
                round: 0,
                observations: Some(0),
                logged: 0,
                no_replies: true,
                dropped: None,
                printed: Vec::new(),
            }],
            lancet_rounds: vec![LancetRound {
                round: 0,
                sent: 0,
                received: 0,
                lost: 0,
                malformed: 0,
                unmatched: 0,
                send_errors: 0,
                samples: 0,
                after_warmup: 0,
                user_rtt_ns: Vec::new(),
            }],
            sockperf_pool: 0,
            lancet_pool: 0,
            rows: Vec::new(),
            floor: vec![f, g],
            lancet_lost: 0,
            agree: false,
            verdict: verdict(&c, &[], 0, 1),
        };
        let text = report.render();
        for want in [
            "CPU 1 (any): not measured",
            "CPU 0 (any): 1.000 % lost",
            "NO REPLIES",
            "NOT COMPARABLE",
            "sockperf 0 round trips, lancet 0 samples",
        ] {
            assert!(text.contains(want), "{want:?} not in\n{text}");
        }
        assert!(!text.contains("NaN"), "{text}");
    }
}
