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

mod agent;
mod conn;
mod error;
mod limits;
mod plan;
mod r2p2;
mod tcp;
mod tracker;
mod udp;

pub use crate::analysis::{gap_floor_ns, GAP_FLOOR_MAX_NS};
pub use crate::config::{
    AgentKind, ClientConfig, ConfigError, RateStep, MAX_STAMP_TRACE, MAX_TIMELINE_BUCKETS,
};
pub use crate::sample::{stamp, Sample, StampTrace};
pub use error::RunError;
pub use limits::{CLIENT_STREAM, INFLIGHT, RECV_BUDGET, SEND_BURST, TARGET_STREAM};
pub use tracker::TimelineBucket;

use crate::analysis::{self, AnalysisParams, RunFacts};
use crate::dist::Schedule;
use crate::proto::MAX_MESSAGE_LEN;
use crate::report::{Counts, Report};
use crate::rng::Rng;
use crate::Transport;
use agent::Agent;
use conn::open_conns;
use limits::GAPS_PER_AGENT;
use plan::plan_agents;
use std::net::SocketAddrV4;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tracker::{lock, Slot, Tracker};
use xlane_host::socket::{monotonic_ns, realtime_ns};

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
mod tests;
