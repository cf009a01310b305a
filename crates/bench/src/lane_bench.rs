//! `xlane bench lane`: the express lane beside a plain UDP socket, in one
//! run, under the same interference.
//!
//! The run brings up the emulated datacenter, applies the host measures for
//! the lane core, starts saturating best-effort cross traffic into every
//! receiver's switch port and CPU load on every other core, and then sends
//! two periodic multicast flows from host 0 to all other hosts at the same
//! period and size:
//!
//! - `xlane`: express DSCP, lane threads pinned to the lane core at
//!   `SCHED_FIFO`, memory locked, host measures applied;
//! - `plain-udp`: the same frames on a default socket (DSCP 0, no priority),
//!   ordinary threads, no pinning.
//!
//! Latency is one-way, from the sender's stamp taken right before `sendto`
//! to the moment the receiving thread holds the packet. While the flows run,
//! a floor probe measures the time the machine takes away from each core.
//! Everything is torn down at the end, also on error.

use crate::stats::LatencySummary;
use crate::table::{fmt_ns, Table};
use serde::Serialize;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use xlane_host::floor::{FloorConfig, FloorProbe, FloorReport};
use xlane_host::runtime::{
    lock_memory, place_current_thread, Placement, ReceiverLane, RecvReport, Sample, SampleLog,
    SendReport, SenderLane, WaitMode,
};
use xlane_host::socket::{realtime_ns, LaneSocket, SocketConfig};
use xlane_host::tuning::{AppliedTuning, HostTuning, TuningPlan};
use xlane_lane::{PeriodicReceiver, PeriodicSender, TunnelParams};
use xlane_testbed::{CrossTraffic, Proto, Testbed, TestbedConfig};
use xlane_wire::Schema;

/// SCHED_FIFO priorities: lane sender, lane receivers, floor probe.
const SENDER_PRIORITY: i32 = 81;
const RECEIVER_PRIORITY: i32 = 80;
const FLOOR_PRIORITY: i32 = 79;

/// Multicast group and port of the lane flow.
const LANE_GROUP: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(239, 77, 0, 1), 7100);
/// Multicast group and port of the plain flow.
const PLAIN_GROUP: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(239, 77, 0, 2), 7101);

/// What to run.
#[derive(Clone, Debug)]
pub struct LaneBenchConfig {
    /// Emulated hosts (host 0 sends, the others receive).
    pub hosts: usize,
    /// Link rate of every port, bits/s.
    pub link_rate_bps: u64,
    /// Best-effort queue length per switch port, packets.
    pub best_effort_queue_pkts: u32,
    /// Lane period π, ns.
    pub period_ns: u64,
    /// How long the flows run, ns.
    pub duration_ns: u64,
    /// Bytes of payload per message (one chunk per period).
    pub message_len: usize,
    /// Saturating best-effort cross traffic.
    pub cross_traffic: bool,
    /// CPU load on every core but the lane core.
    pub cpu_load: bool,
    /// The lane core (default: the last CPU).
    pub lane_core: usize,
    /// How lane threads wait.
    pub mode: WaitMode,
    /// Apply the host measures of the lane core.
    pub tuning: bool,
}

impl Default for LaneBenchConfig {
    fn default() -> Self {
        let cpus = thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1);
        LaneBenchConfig {
            hosts: 4,
            link_rate_bps: 100_000_000,
            best_effort_queue_pkts: 1000,
            period_ns: 200_000,
            duration_ns: 10_000_000_000,
            message_len: 16,
            cross_traffic: true,
            cpu_load: true,
            lane_core: cpus - 1,
            mode: WaitMode::Interrupt,
            tuning: true,
        }
    }
}

/// Why the benchmark could not run.
#[derive(Debug, thiserror::Error)]
pub enum LaneBenchError {
    /// Bad configuration.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// The testbed failed.
    #[error("testbed: {0}")]
    Testbed(#[from] xlane_testbed::TestbedError),
    /// Host tuning failed.
    #[error("host tuning: {0}")]
    Tuning(#[from] xlane_host::tuning::TuningError),
    /// The floor probe failed.
    #[error("floor probe: {0}")]
    Floor(#[from] xlane_host::floor::FloorError),
    /// A socket could not be set up.
    #[error("socket on host {host}: {source}")]
    Socket {
        /// Which host.
        host: usize,
        /// Cause.
        source: xlane_host::socket::SocketError,
    },
    /// A lane thread failed.
    #[error("{role} thread on host {host}: {msg}")]
    Thread {
        /// sender/receiver and flow.
        role: String,
        /// Which host.
        host: usize,
        /// What went wrong.
        msg: String,
    },
}

/// The floor: time the machine took away during the run, as a real-time
/// probe thread on each core saw it (wake-ups on a 100 µs timer at a
/// priority just below the lane threads; every wake-up more than 20 µs late
/// counts, for as long as it was late).
#[derive(Clone, Debug, Serialize)]
pub struct FloorJson {
    /// Fraction of the lane core's time lost in gaps.
    pub stolen_fraction: f64,
    /// Longest gap on the lane core, ns.
    pub max_gap_ns: u64,
    /// Per core.
    pub cores: Vec<CoreFloor>,
}

/// The floor of one core.
#[derive(Clone, Debug, Serialize)]
pub struct CoreFloor {
    /// CPU number.
    pub core: usize,
    /// Role: "lane" or "regular".
    pub role: String,
    /// Fraction of time lost in gaps.
    pub stolen_fraction: f64,
    /// Longest gap, ns.
    pub max_gap_ns: u64,
    /// Gaps seen.
    pub gaps: usize,
    /// Hypervisor steal ticks (`/proc/stat`, 1/100 s each) during the run.
    pub steal_ticks: u64,
}

/// Counters of one flow beyond its latency summary.
#[derive(Clone, Debug, Default, Serialize)]
pub struct FlowCounters {
    /// Frames the sender emitted.
    pub frames_sent: u64,
    /// Periods in the run (one frame each if the sender was never late).
    pub slots: u64,
    /// Sends the socket refused.
    pub send_errors: u64,
    /// Worst sender lateness (actual send − slot), ns.
    pub sender_late_max_ns: u64,
    /// Datagrams the receivers refused.
    pub refused: u64,
}

/// The report of one run.
#[derive(Clone, Debug, Serialize)]
pub struct LaneBenchReport {
    /// One summary per configuration: latency until the receiving thread
    /// holds the packet.
    pub configs: Vec<LatencySummary>,
    /// The same samples measured only until the kernel's receive stamp
    /// (the network part of the latency).
    pub kernel_configs: Vec<LatencySummary>,
    /// The machine's floor during the run.
    pub floor: FloorJson,
    /// Per-configuration counters, same order as `configs`.
    pub counters: Vec<FlowCounters>,
    /// Host measures applied (name: status).
    pub host_measures: Vec<String>,
    /// Cross traffic achieved, bits/s per flow.
    pub cross_traffic_bps: Vec<u64>,
    /// Best-effort drops at the switch ports during the run.
    pub switch_best_effort_drops: u64,
    /// The parameters of the run.
    pub params: RunParams,
}

/// Parameters echoed into the report.
#[derive(Clone, Debug, Serialize)]
pub struct RunParams {
    /// Hosts in the testbed.
    pub hosts: usize,
    /// Link rate, bits/s.
    pub link_rate_bps: u64,
    /// Period, ns.
    pub period_ns: u64,
    /// Duration, ns.
    pub duration_ns: u64,
    /// Lane core.
    pub lane_core: usize,
    /// Wait mode.
    pub mode: String,
    /// Cross traffic on.
    pub cross_traffic: bool,
    /// CPU load on.
    pub cpu_load: bool,
}

struct FlowSpec {
    name: &'static str,
    tunnel: u32,
    group: SocketAddrV4,
    express: bool,
}

/// What a flow's threads need, copied into each of them.
#[derive(Clone, Copy)]
struct FlowSetup {
    express: bool,
    mode: WaitMode,
    lane_core: usize,
    regular_core: Option<usize>,
    params: TunnelParams,
    group: SocketAddrV4,
}

impl FlowSetup {
    fn new(flow: &FlowSpec, cfg: &LaneBenchConfig, regular_core: Option<usize>) -> Self {
        FlowSetup {
            express: flow.express,
            // The plain flow's threads always sleep: they are ordinary threads.
            mode: if flow.express {
                cfg.mode
            } else {
                WaitMode::Interrupt
            },
            lane_core: cfg.lane_core,
            regular_core,
            params: tunnel_params(flow.tunnel, cfg.period_ns),
            group: flow.group,
        }
    }

    /// Express marking for the lane, default socket for the plain flow.
    fn socket(&self, bind: SocketAddrV4) -> SocketConfig {
        if self.express {
            SocketConfig::express(bind)
        } else {
            SocketConfig::plain(bind)
        }
    }

    /// Lane threads: the lane core at `SCHED_FIFO` `prio`; plain threads: a
    /// regular core, normal policy.
    fn place(&self, prio: i32) -> Result<(), xlane_host::runtime::RuntimeError> {
        place_current_thread(if self.express {
            Placement {
                core: Some(self.lane_core),
                fifo: Some(prio),
            }
        } else {
            Placement {
                core: self.regular_core,
                fifo: None,
            }
        })
    }
}

struct RecvOut {
    samples: Vec<Sample>,
    report: RecvReport,
    lost: u64,
}

fn thread_err(role: &str, host: usize, msg: impl ToString) -> LaneBenchError {
    LaneBenchError::Thread {
        role: role.to_string(),
        host,
        msg: msg.to_string(),
    }
}

/// Run the benchmark. `progress` gets one line per step.
pub fn run(
    cfg: &LaneBenchConfig,
    progress: &mut dyn FnMut(&str),
) -> Result<LaneBenchReport, LaneBenchError> {
    if cfg.hosts < 2 {
        return Err(LaneBenchError::Config("need at least 2 hosts".into()));
    }
    if cfg.period_ns < 10_000 {
        return Err(LaneBenchError::Config("period below 10 µs".into()));
    }
    let ncpu = thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    if cfg.lane_core >= ncpu {
        return Err(LaneBenchError::Config(format!(
            "lane core {} does not exist (this machine has {ncpu} CPUs)",
            cfg.lane_core
        )));
    }
    let regular: Vec<usize> = (0..ncpu).filter(|&c| c != cfg.lane_core).collect();
    let regular_or_all = if regular.is_empty() {
        vec![cfg.lane_core]
    } else {
        regular.clone()
    };

    progress(&format!(
        "bringing up the testbed: {} hosts, one switch",
        cfg.hosts
    ));
    let tb_cfg = TestbedConfig {
        hosts: cfg.hosts,
        link_rate_bps: cfg.link_rate_bps,
        best_effort_queue_pkts: cfg.best_effort_queue_pkts,
        ..TestbedConfig::default()
    };
    let tb = Testbed::up(tb_cfg)?;
    progress(&format!("testbed {} is up", tb.prefix()));

    let tuning: Option<AppliedTuning> = if cfg.tuning {
        let t = HostTuning::apply(&TuningPlan::all(cfg.lane_core))?;
        Some(t)
    } else {
        None
    };
    let host_measures: Vec<String> = tuning.as_ref().map(|t| t.summary()).unwrap_or_default();
    for m in &host_measures {
        progress(&format!("host measure: {m}"));
    }
    // Lock memory for the whole process: lane threads never page-fault.
    let _ = lock_memory();

    let drops_before = switch_drops(&tb);
    let mut traffic = Vec::new();
    if cfg.cross_traffic {
        // Every receiver's switch port gets two best-effort flows: one from
        // the next receiver and one from host 0 (whose uplink the lane shares).
        let n = cfg.hosts;
        for r in 1..n {
            let other = if n > 2 { (r % (n - 1)) + 1 } else { 0 };
            for (from, proto) in [
                (other, Proto::Udp),
                (0, if r == 1 { Proto::Tcp } else { Proto::Udp }),
            ] {
                if from == r {
                    continue;
                }
                let spec = match proto {
                    Proto::Udp => CrossTraffic::udp(from, r),
                    Proto::Tcp => CrossTraffic::tcp(from, r),
                };
                traffic.push(tb.start_cross_traffic(spec.cpus(regular_or_all.clone()))?);
            }
        }
        progress(&format!(
            "cross traffic: {} saturating best-effort flows",
            traffic.len()
        ));
    }
    let cpu_load = if cfg.cpu_load && !regular.is_empty() {
        progress(&format!("CPU load on cores {regular:?}"));
        Some(xlane_testbed::start_cpu_load(&regular, 1)?)
    } else {
        None
    };

    // Floor probes: one per core, for the whole measurement window.
    let mut probes = Vec::new();
    for core in 0..ncpu {
        // A cyclictest-style probe just below the lane threads' priority:
        // what the machine takes away from a real-time thread on each core.
        let fcfg = FloorConfig {
            threshold_ns: 20_000,
            fifo_priority: Some(FLOOR_PRIORITY),
            timer_interval_ns: Some(100_000),
            ..FloorConfig::default()
        };
        probes.push((core, FloorProbe::start(core, fcfg)?));
    }

    let flows = [
        FlowSpec {
            name: "xlane",
            tunnel: 1,
            group: LANE_GROUP,
            express: true,
        },
        FlowSpec {
            name: "plain-udp",
            tunnel: 2,
            group: PLAIN_GROUP,
            express: false,
        },
    ];
    let stop = Arc::new(AtomicBool::new(false));
    let start_ns = realtime_ns() + 300_000_000;
    let until_ns = start_ns + cfg.duration_ns;
    let expected_frames = (cfg.duration_ns / cfg.period_ns) as usize + 16;
    progress(&format!(
        "running {} s: period {}, {} B per message, {} receivers per flow",
        cfg.duration_ns as f64 / 1e9,
        fmt_ns(cfg.period_ns),
        cfg.message_len,
        cfg.hosts - 1
    ));

    let result = thread::scope(|s| -> Result<_, LaneBenchError> {
        let mut recv_handles = Vec::new();
        for (fi, flow) in flows.iter().enumerate() {
            let setup = FlowSetup::new(flow, cfg, regular.first().copied());
            for r in 1..cfg.hosts {
                let host = tb.hosts()[r].clone();
                let stop = stop.clone();
                recv_handles.push((
                    fi,
                    r,
                    s.spawn(move || -> Result<RecvOut, LaneBenchError> {
                        let _ns = xlane_testbed::enter_netns(&host.netns)?;
                        let bind = SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, setup.group.port());
                        let mut sc = setup.socket(bind);
                        sc.join = Some((*setup.group.ip(), host.addr));
                        sc.nonblocking = setup.mode == WaitMode::BusyPoll;
                        sc.recv_timeout_us = 20_000;
                        sc.rcvbuf = 1 << 20;
                        let mut sock = LaneSocket::open(&sc)
                            .map_err(|e| LaneBenchError::Socket { host: r, source: e })?;
                        setup
                            .place(RECEIVER_PRIORITY)
                            .map_err(|e| thread_err("receiver", r, e))?;
                        let mut log = SampleLog::with_capacity(expected_frames);
                        let core = PeriodicReceiver::new(setup.params);
                        let mut lane = ReceiverLane::new(&mut sock, core);
                        let report = lane
                            .run(&stop, until_ns + 200_000_000, &mut log, &mut |_| {})
                            .map_err(|e| thread_err("receiver", r, e))?;
                        let lost = lane.core().stats().lost;
                        let samples = log
                            .samples()
                            .iter()
                            .filter(|x| x.send_ns >= start_ns)
                            .copied()
                            .collect();
                        Ok(RecvOut {
                            samples,
                            report,
                            lost,
                        })
                    }),
                ));
            }
        }
        // Senders start after the receivers have joined their groups.
        thread::sleep(std::time::Duration::from_millis(100));
        let mut send_handles = Vec::new();
        for (fi, flow) in flows.iter().enumerate() {
            let host = tb.hosts()[0].clone();
            let stop = stop.clone();
            let setup = FlowSetup::new(flow, cfg, regular.first().copied());
            let msg_len = cfg.message_len;
            // The plain flow sends half a period after the lane flow.
            let first = start_ns + if flow.express { 0 } else { cfg.period_ns / 2 };
            send_handles.push((
                fi,
                s.spawn(move || -> Result<SendReport, LaneBenchError> {
                    let _ns = xlane_testbed::enter_netns(&host.netns)?;
                    let mut sc = setup.socket(SocketAddrV4::new(host.addr, 0));
                    sc.multicast_if = Some(host.addr);
                    sc.rx_timestamps = false;
                    let sock = LaneSocket::open(&sc)
                        .map_err(|e| LaneBenchError::Socket { host: 0, source: e })?;
                    setup
                        .place(SENDER_PRIORITY)
                        .map_err(|e| thread_err("sender", 0, e))?;
                    let core = PeriodicSender::new(setup.params, first)
                        .map_err(|e| thread_err("sender", 0, e))?;
                    let dsts = [setup.group];
                    let mut lane = SenderLane::new(&sock, core, &dsts);
                    let mut msg = [0u8; 32];
                    let mut n: u64 = 0;
                    lane.run(&stop, until_ns, setup.mode, &mut |c, _slot| {
                        n += 1;
                        msg[..8].copy_from_slice(&n.to_be_bytes());
                        let _ = c.enqueue(0, &msg[..msg_len.min(msg.len())]);
                    })
                    .map_err(|e| thread_err("sender", 0, e))
                }),
            ));
        }
        let mut sent = [SendReport::default(), SendReport::default()];
        let mut first_err = None;
        for (fi, h) in send_handles {
            match h.join() {
                Ok(Ok(r)) => sent[fi] = r,
                Ok(Err(e)) => {
                    stop.store(true, Ordering::Relaxed);
                    first_err.get_or_insert(e);
                }
                Err(_) => {
                    stop.store(true, Ordering::Relaxed);
                    first_err.get_or_insert(thread_err("sender", 0, "panicked"));
                }
            }
        }
        let mut outs: Vec<Vec<RecvOut>> = vec![Vec::new(), Vec::new()];
        for (fi, r, h) in recv_handles {
            match h.join() {
                Ok(Ok(o)) => outs[fi].push(o),
                Ok(Err(e)) => {
                    first_err.get_or_insert(e);
                }
                Err(_) => {
                    first_err.get_or_insert(thread_err("receiver", r, "panicked"));
                }
            }
        }
        match first_err {
            Some(e) => Err(e),
            None => Ok((sent, outs)),
        }
    });

    let floors: Vec<(usize, FloorReport)> =
        probes.into_iter().map(|(c, p)| (c, p.stop())).collect();
    let mut cross_bps = Vec::new();
    for t in traffic {
        cross_bps.push(t.stop().received_rate_bps as u64);
    }
    drop(cpu_load);
    let drops = switch_drops(&tb).saturating_sub(drops_before);
    if let Some(t) = tuning {
        let rep = t.restore();
        let failed: Vec<String> = rep
            .entries
            .iter()
            .filter(|e| matches!(e.outcome, xlane_host::tuning::RestoreOutcome::Failed(_)))
            .map(|e| format!("{} ({})", e.name, e.target))
            .collect();
        if failed.is_empty() {
            progress(&format!(
                "host measures restored ({} settings)",
                rep.entries.len()
            ));
        } else {
            progress(&format!("could not restore: {}", failed.join(", ")));
        }
    }
    progress(&format!("tearing down testbed {}", tb.prefix()));
    drop(tb);

    let (sent, outs) = result?;
    let receivers = (cfg.hosts - 1) as u64;
    let mut configs = Vec::new();
    let mut kernel_configs = Vec::new();
    let mut counters = Vec::new();
    for (fi, flow) in flows.iter().enumerate() {
        let all: Vec<&Sample> = outs[fi].iter().flat_map(|o| o.samples.iter()).collect();
        let expected = sent[fi].frames * receivers;
        let lost = expected.saturating_sub(all.len() as u64);
        let mut to_thread: Vec<u64> = all.iter().map(|x| x.latency_ns()).collect();
        let mut to_kernel: Vec<u64> = all
            .iter()
            .map(|x| x.kernel_rx_ns.saturating_sub(x.send_ns))
            .collect();
        configs.push(LatencySummary::from_samples(
            flow.name,
            &mut to_thread,
            lost,
        ));
        kernel_configs.push(LatencySummary::from_samples(
            flow.name,
            &mut to_kernel,
            lost,
        ));
        counters.push(FlowCounters {
            frames_sent: sent[fi].frames,
            slots: cfg.duration_ns / cfg.period_ns,
            send_errors: sent[fi].send_errors,
            sender_late_max_ns: sent[fi].late_max_ns,
            refused: outs[fi].iter().map(|o| o.report.refused).sum(),
        });
        let _ = outs[fi].iter().map(|o| o.lost).sum::<u64>();
    }
    let cores: Vec<CoreFloor> = floors
        .iter()
        .map(|(c, f)| CoreFloor {
            core: *c,
            role: if *c == cfg.lane_core {
                "lane".into()
            } else {
                "regular".into()
            },
            stolen_fraction: f.stolen_fraction,
            max_gap_ns: f.max_gap_ns,
            gaps: f.gaps.len() + f.gaps_dropped as usize,
            steal_ticks: f.steal_ticks_delta,
        })
        .collect();
    let lane_floor = cores.iter().find(|c| c.core == cfg.lane_core);
    let floor = FloorJson {
        stolen_fraction: lane_floor.map(|c| c.stolen_fraction).unwrap_or(0.0),
        max_gap_ns: lane_floor.map(|c| c.max_gap_ns).unwrap_or(0),
        cores,
    };
    Ok(LaneBenchReport {
        configs,
        kernel_configs,
        floor,
        counters,
        host_measures,
        cross_traffic_bps: cross_bps,
        switch_best_effort_drops: drops,
        params: RunParams {
            hosts: cfg.hosts,
            link_rate_bps: cfg.link_rate_bps,
            period_ns: cfg.period_ns,
            duration_ns: cfg.duration_ns,
            lane_core: cfg.lane_core,
            mode: format!("{:?}", cfg.mode),
            cross_traffic: cfg.cross_traffic,
            cpu_load: cfg.cpu_load,
        },
    })
}

fn tunnel_params(tunnel: u32, period_ns: u64) -> TunnelParams {
    TunnelParams {
        tunnel,
        period_ns,
        max_packet: Schema::Chunk26.frame_len(4),
        schema: Schema::Chunk26,
    }
}

fn switch_drops(tb: &Testbed) -> u64 {
    (0..tb.hosts().len())
        .filter_map(|i| tb.qdisc_stats(i).ok())
        .map(|q| q.best_effort.dropped)
        .sum()
}

impl LaneBenchReport {
    /// The table a person reads.
    pub fn render(&self) -> String {
        let mut t = Table::new(&[
            "config", "λmin", "λ50", "λ99", "λ99.99", "λmax", "δmax", "loss", "samples",
        ]);
        let kernel_rows = self.kernel_configs.iter().map(|k| LatencySummary {
            name: format!("{} (to kernel stamp)", k.name),
            ..k.clone()
        });
        for c in self.configs.iter().cloned().chain(kernel_rows) {
            let expected = c.samples + c.lost;
            let loss = if expected == 0 {
                "-".to_string()
            } else {
                format!("{:.3}%", 100.0 * c.lost as f64 / expected as f64)
            };
            t.row(vec![
                c.name.clone(),
                fmt_ns(c.min_ns),
                fmt_ns(c.p50_ns),
                fmt_ns(c.p99_ns),
                fmt_ns(c.p9999_ns),
                fmt_ns(c.max_ns),
                fmt_ns(c.delta_max_ns),
                loss,
                c.samples.to_string(),
            ]);
        }
        let mut out = t.render();
        if let [lane, plain, ..] = &self.configs[..] {
            if lane.p9999_ns > 0 {
                out.push_str(&format!(
                    "\nλ99.99 plain-udp / xlane = {:.1}×   λ50 plain-udp / xlane = {:.1}×\n",
                    plain.p9999_ns as f64 / lane.p9999_ns as f64,
                    plain.p50_ns as f64 / lane.p50_ns.max(1) as f64
                ));
            }
        }
        for (c, k) in self.configs.iter().zip(&self.counters) {
            out.push_str(&format!(
                "{}: sender emitted {} frames in {} periods (worst lateness {}), {} send errors, {} datagrams refused\n",
                c.name,
                k.frames_sent,
                k.slots,
                fmt_ns(k.sender_late_max_ns),
                k.send_errors,
                k.refused
            ));
        }
        out.push_str(&format!(
            "time the machine took away from a real-time thread on the lane core {}: {:.3}% of the run, longest gap {}\n",
            self.params.lane_core,
            100.0 * self.floor.stolen_fraction,
            fmt_ns(self.floor.max_gap_ns)
        ));
        for c in &self.floor.cores {
            out.push_str(&format!(
                "  core {} ({}): {:.3}% in {} wake-ups over 20µs late, longest {}; hypervisor steal {} ticks\n",
                c.core,
                c.role,
                100.0 * c.stolen_fraction,
                c.gaps,
                fmt_ns(c.max_gap_ns),
                c.steal_ticks
            ));
        }
        let gbps: Vec<String> = self
            .cross_traffic_bps
            .iter()
            .map(|b| format!("{:.0}", *b as f64 / 1e6))
            .collect();
        out.push_str(&format!(
            "cross traffic: {} flows at [{}] Mbit/s, {} best-effort drops at the switch; link rate {} Mbit/s\n",
            self.cross_traffic_bps.len(),
            gbps.join(", "),
            self.switch_best_effort_drops,
            self.params.link_rate_bps / 1_000_000
        ));
        out
    }
}
