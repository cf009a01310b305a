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
//!   ordinary threads, no pinning;
//! - `xlane-mac` (unless `mac` is off): the lane flow again, every frame
//!   sealed with a MAC (`xlane_auth`) by the sender and checked by every
//!   receiver before its core sees it, on the same lane loop: the cost of
//!   authenticated frames, in the same run. The report also times sealing
//!   and opening a frame of the flow's size in this process
//!   ([`MacCost`]).
//!
//! Latency is one-way, from the sender's stamp taken right before `sendto`
//! to the moment the receiving thread holds the packet. While the flows run,
//! a floor probe measures the time the machine takes away from each core.
//! Everything is torn down at the end, also on error.

use crate::budget::{LaneCoreBudget, LaneCoreUse};
use crate::flows::{run_flows, FlowPlan, FlowResult, Variant};
use crate::interference::{
    apply_host_measures, render_cross_traffic, restore_host_measures, switch_drops, BenchError,
    Floor, FloorSet, Interference, Stage,
};
use crate::stages::Stages;
use crate::stats::LatencySummary;
use crate::table::{fmt_ns, Table};
use serde::Serialize;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::atomic::AtomicBool;
use xlane_host::runtime::{lock_memory, WaitMode};
use xlane_host::socket::realtime_ns;
use xlane_host::xdp::PathMode;

/// Multicast group and port of the lane flow.
const LANE_GROUP: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(239, 77, 0, 1), 7100);
/// Multicast group and port of the plain flow.
const PLAIN_GROUP: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(239, 77, 0, 2), 7101);
/// Multicast group and port of the authenticated lane flow.
const MAC_GROUP: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(239, 77, 0, 3), 7102);

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
    /// Run the authenticated lane flow (`xlane-mac`) too.
    pub mac: bool,
    /// How the lane flows' receivers read: sockets, or AF_XDP rings fed
    /// by XDP steering.
    pub rx: PathMode,
    /// How the lane flows' senders send: sockets, or their host's AF_XDP
    /// transmit ring (with `rx` on the rings too).
    pub tx: PathMode,
}

impl Default for LaneBenchConfig {
    fn default() -> Self {
        let cpus = std::thread::available_parallelism()
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
            mac: true,
            rx: PathMode::Socket,
            tx: PathMode::Socket,
        }
    }
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
    /// Datagrams dropped at the receivers' sockets (buffer full) or AF_XDP
    /// rings.
    pub socket_drops: u64,
    /// Datagrams the receivers read from AF_XDP rings (`--rx xdp`).
    pub xdp_datagrams: u64,
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
    /// Where each configuration's median goes, part by part.
    pub stages: Vec<Stages>,
    /// The machine's floor during the run.
    pub floor: Floor,
    /// The lane core's budget during the run.
    pub lane_core: LaneCoreBudget,
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
    /// What authenticating the frames cost (with `mac`).
    pub mac: Option<MacCost>,
    /// What a stamp costs, and the clock used.
    pub clock: ClockCost,
}

/// The cost of authenticated frames.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct MacCost {
    /// Bytes of the frames sealed (the lane flow's frame).
    pub frame_bytes: usize,
    /// Sealing one frame in this process, ns (median of 9 rounds of
    /// 20 000).
    pub seal_ns: f64,
    /// Opening (checking) one sealed frame, ns (same).
    pub open_ns: f64,
    /// λ50 of `xlane-mac` − λ50 of `xlane`, ns (negative: within noise).
    pub p50_delta_ns: i64,
    /// That difference as a share of `xlane`'s λ50.
    pub p50_delta_share: f64,
}

/// Times sealing and opening a `len`-byte frame: the median over 9 rounds
/// of 20 000 each, ns per frame.
pub fn time_mac(len: usize) -> (f64, f64) {
    use std::time::Instant;
    use xlane_auth::{Key, KeyRing, Opener, Sealer, ANY_RECEIVER, TRAILER_LEN};
    const N: usize = 20_000;
    let key = Key::from_bytes([7; 16]);
    let mut buf = vec![0x5a_u8; len + TRAILER_LEN];
    let (mut seal, mut open) = (Vec::new(), Vec::new());
    for round in 0..9u64 {
        let mut s = Sealer::new(1, key.clone(), round as u32 + 1);
        let mut o = Opener::new(KeyRing::from_pairs(&[(1, key.clone())]));
        let t = Instant::now();
        for i in 0..N as u64 {
            let _ = std::hint::black_box(s.seal(&mut buf, len, ANY_RECEIVER, i + 1));
        }
        seal.push(t.elapsed().as_nanos() as f64 / N as f64);
        let sealed = buf.clone();
        let t = Instant::now();
        for _ in 0..N {
            // Every open after the first is a replay: the whole check runs
            // (the tag is computed before the window is looked at).
            let _ = std::hint::black_box(o.open(&sealed, ANY_RECEIVER));
        }
        open.push(t.elapsed().as_nanos() as f64 / N as f64);
    }
    (median_of_rounds(seal), median_of_rounds(open))
}

/// The median of a timing's rounds (ns per operation; at least one round).
fn median_of_rounds(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// What a stamp costs: the clock the lane stamps with against the
/// processor's time-stamp counter.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct ClockCost {
    /// One `clock_gettime(CLOCK_REALTIME)` (the vDSO's), ns: the lane's
    /// stamps, comparable across hosts whose clocks PTP keeps together.
    pub realtime_ns: f64,
    /// One `rdtsc`, ns (`None` off x86-64): cheaper, but a count per
    /// processor that must be calibrated against a shared clock before two
    /// hosts' stamps can be compared.
    pub tsc_ns: Option<f64>,
}

/// Times the two clocks: the median over 9 rounds of 200 000 reads each.
pub fn time_clocks() -> ClockCost {
    use std::time::Instant;
    const N: u32 = 200_000;
    let median = |f: &dyn Fn() -> u64| {
        let v: Vec<f64> = (0..9)
            .map(|_| {
                let t = Instant::now();
                let mut acc = 0u64;
                for _ in 0..N {
                    acc = acc.wrapping_add(std::hint::black_box(f()));
                }
                std::hint::black_box(acc);
                t.elapsed().as_nanos() as f64 / f64::from(N)
            })
            .collect();
        median_of_rounds(v)
    };
    #[cfg(target_arch = "x86_64")]
    // SAFETY: rdtsc has no preconditions on x86-64.
    let tsc_ns = Some(median(&|| unsafe { core::arch::x86_64::_rdtsc() }));
    #[cfg(not(target_arch = "x86_64"))]
    let tsc_ns = None;
    ClockCost {
        realtime_ns: median(&realtime_ns),
        tsc_ns,
    }
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

/// Run the benchmark. `progress` gets one line per step.
pub fn run(
    cfg: &LaneBenchConfig,
    progress: &mut dyn FnMut(&str),
) -> Result<LaneBenchReport, BenchError> {
    if cfg.hosts < 2 {
        return Err(BenchError::Config("need at least 2 hosts".into()));
    }
    if cfg.period_ns < 10_000 {
        return Err(BenchError::Config("period below 10 µs".into()));
    }
    let lane = match (cfg.rx, cfg.tx) {
        (PathMode::Socket, PathMode::Socket) => Variant::Xlane,
        (PathMode::Xdp, PathMode::Socket) => Variant::XlaneXdpRx,
        (PathMode::Xdp, PathMode::Xdp) => Variant::XlaneXdp,
        (PathMode::Socket, PathMode::Xdp) => {
            return Err(BenchError::Config(
                "--tx xdp goes with --rx xdp (the lane on its own rings)".into(),
            ))
        }
    };
    let stage = Stage::up(
        cfg.hosts,
        cfg.link_rate_bps,
        None,
        cfg.best_effort_queue_pkts,
        cfg.lane_core,
        progress,
    )?;
    let (tb, cores) = (&stage.tb, &stage.cores);
    let (tuning, host_measures) = apply_host_measures(cfg.tuning, cfg.lane_core, progress)?;
    // Lock memory for the whole process: lane threads never page-fault.
    let _ = lock_memory();

    let drops_before = switch_drops(tb);
    let interference = Interference::start(tb, cores, cfg.cross_traffic, cfg.cpu_load)?;
    if cfg.cross_traffic {
        progress(&format!(
            "cross traffic: {} saturating best-effort flows",
            interference.flows()
        ));
    }
    if cfg.cpu_load {
        progress(&format!("CPU load on cores {:?}", cores.regular));
    }
    // The run, its 300 ms lead and the receivers' grace.
    let floor_probes = FloorSet::start(cores, cfg.duration_ns + 5_000_000_000)?;

    let start_ns = realtime_ns() + 300_000_000;
    let until_ns = start_ns + cfg.duration_ns;
    progress(&format!(
        "running {} s: period {}, {} B per message, {} receivers per flow",
        cfg.duration_ns as f64 / 1e9,
        fmt_ns(cfg.period_ns),
        cfg.message_len,
        cfg.hosts - 1
    ));
    let plan =
        |variant: Variant, name: &str, tunnel: u32, group: SocketAddrV4, offset: u64| FlowPlan {
            variant,
            name: name.to_string(),
            tunnel,
            group,
            period_ns: cfg.period_ns,
            message_len: cfg.message_len,
            lane_core: cfg.lane_core,
            regular_core: cores.regular.first().copied(),
            lane_mode: cfg.mode,
            sender: tb.hosts()[0].clone(),
            receivers: tb.hosts()[1..].to_vec(),
            first_slot_ns: start_ns + offset,
            until_ns,
            grace_ns: 300_000_000,
            qjump: None,
            mac: None,
            tx_stamps: true,
            dscp: None,
        };
    // The plain flow sends half a period after the lane flow, the
    // authenticated one a quarter.
    let mut plans = vec![
        plan(lane, "xlane", 1, LANE_GROUP, 0),
        plan(
            Variant::Plain,
            "plain-udp",
            2,
            PLAIN_GROUP,
            cfg.period_ns / 2,
        ),
    ];
    if cfg.mac {
        plans.push(FlowPlan {
            mac: Some(xlane_auth::Key::random().map_err(|e| BenchError::Config(e.to_string()))?),
            ..plan(lane, "xlane-mac", 3, MAC_GROUP, cfg.period_ns / 4)
        });
    }
    let stop = AtomicBool::new(false);
    let result = run_flows(&plans, &stop);

    let (floor, _) = floor_probes.stop();
    let cross_bps = interference.stop();
    let drops = switch_drops(tb).saturating_sub(drops_before);
    restore_host_measures(tuning, progress);
    stage.tear_down(progress);

    let run = result?;
    let lane_core = LaneCoreUse::of_run(&run, cfg.lane_core).budget(floor.stolen_fraction);
    let (configs, kernel_configs, counters) = tables(&run.flows);
    let mac = cfg.mac.then(|| {
        let frame_bytes = xlane_wire::HEADER_LEN + xlane_wire::Schema::Chunk26.chunk_len();
        let (seal_ns, open_ns) = time_mac(frame_bytes);
        mac_cost(&configs, frame_bytes, seal_ns, open_ns)
    });
    Ok(LaneBenchReport {
        clock: time_clocks(),
        mac,
        configs,
        kernel_configs,
        stages: run.flows.iter().map(Stages::of).collect(),
        floor,
        lane_core,
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

/// Per configuration: latency to the receiving thread, to the kernel's
/// receive stamp, and the flow's counters.
fn tables(flows: &[FlowResult]) -> (Vec<LatencySummary>, Vec<LatencySummary>, Vec<FlowCounters>) {
    let configs = flows
        .iter()
        .map(|f| summary(f, |s| s.latency_ns()))
        .collect();
    let kernel = flows
        .iter()
        .map(|f| summary(f, |s| s.network_ns()))
        .collect();
    let counters = flows
        .iter()
        .map(|f| FlowCounters {
            frames_sent: f.sent.frames,
            slots: f.slots,
            send_errors: f.sent.send_errors,
            sender_late_max_ns: f.sent.late_max_ns,
            refused: f.refused,
            socket_drops: f.socket_drops,
            xdp_datagrams: f.xdp_datagrams,
        })
        .collect();
    (configs, kernel, counters)
}

/// The MAC's cost: `xlane-mac`'s λ50 (the third configuration) against
/// `xlane`'s (the first); a missing one counts as no samples.
fn mac_cost(configs: &[LatencySummary], frame_bytes: usize, seal_ns: f64, open_ns: f64) -> MacCost {
    let p50 = |i: usize| configs.get(i).map_or(0, |c| c.p50_ns);
    let (lane, with) = (p50(0), p50(2));
    let delta = crate::stats::signed_diff(with, lane);
    MacCost {
        frame_bytes,
        seal_ns,
        open_ns,
        p50_delta_ns: delta,
        p50_delta_share: delta as f64 / lane.max(1) as f64,
    }
}

fn summary(f: &FlowResult, measure: impl Fn(&crate::flows::FlowSample) -> u64) -> LatencySummary {
    let mut v: Vec<u64> = f.samples.iter().map(measure).collect();
    LatencySummary::from_samples(&f.name, &mut v, f.lost())
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
        out.push('\n');
        out.push_str(&crate::stages::render(&self.stages));
        if let [lane, plain, ..] = &self.configs[..] {
            if lane.p9999_ns > 0 {
                out.push_str(&format!(
                    "\nλ99.99 plain-udp / xlane = {:.1}×   λ50 plain-udp / xlane = {:.1}×\n",
                    plain.p9999_ns as f64 / lane.p9999_ns as f64,
                    plain.p50_ns as f64 / lane.p50_ns.max(1) as f64
                ));
            }
        }
        if let Some(m) = &self.mac {
            out.push_str(&format!(
                "MAC (SipHash-2-4, 24-byte trailer) on a {} B frame: seal {:.0} ns + open {:.0} ns; λ50 xlane-mac − xlane = {} ({:+.1} % of xlane's λ50)\n",
                m.frame_bytes,
                m.seal_ns,
                m.open_ns,
                if m.p50_delta_ns < 0 {
                    format!("−{}", fmt_ns(m.p50_delta_ns.unsigned_abs()))
                } else {
                    fmt_ns(m.p50_delta_ns as u64)
                },
                100.0 * m.p50_delta_share
            ));
        }
        out.push_str(&format!(
            "stamps: clock_gettime(CLOCK_REALTIME), {:.0} ns a read{}\n",
            self.clock.realtime_ns,
            self.clock.tsc_ns.map_or(String::new(), |t| format!(
                "; a TSC read costs {t:.0} ns but counts per processor, to be calibrated before hosts can compare stamps"
            ))
        ));
        for (c, k) in self.configs.iter().zip(&self.counters) {
            out.push_str(&format!(
                "{}: sender emitted {} frames in {} periods (worst lateness {}), {} send errors, {} datagrams refused, {} dropped at the receivers' sockets{}\n",
                c.name,
                k.frames_sent,
                k.slots,
                fmt_ns(k.sender_late_max_ns),
                k.send_errors,
                k.refused,
                k.socket_drops,
                if k.xdp_datagrams > 0 {
                    format!(" or rings; {} read from AF_XDP rings", k.xdp_datagrams)
                } else {
                    String::new()
                }
            ));
        }
        out.push_str(&self.floor.render(self.params.lane_core));
        out.push_str(&self.lane_core.render(self.params.lane_core));
        out.push_str(&render_cross_traffic(
            &self.cross_traffic_bps,
            self.switch_best_effort_drops,
            self.params.link_rate_bps,
        ));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flows::flow_for_tests as flow;

    /// A run whose flows received nothing, lost everything, got one
    /// frame, or saw a receive stamp before the send stamp: the tables
    /// say what each had and the render shows no ratio it cannot take.
    #[test]
    fn degenerate_flows_are_summarised_and_rendered() {
        // (flows, want samples per config, want lost, want ratio line)
        type Case = (Vec<FlowResult>, &'static [u64], &'static [u64], bool);
        let cases: Vec<Case> = vec![
            (vec![], &[], &[], false),
            (
                vec![
                    flow("xlane", 0, &[]),
                    flow("plain-udp", 0, &[]),
                    flow("xlane-mac", 0, &[]),
                ],
                &[0, 0, 0],
                &[0, 0, 0],
                false,
            ),
            (
                vec![flow("xlane", 5, &[]), flow("plain-udp", 5, &[])],
                &[0, 0],
                &[5, 5],
                false,
            ),
            (
                vec![
                    flow("xlane", 1, &[(100, 90, 80)]),
                    flow("plain-udp", 1, &[(100, 150, 200)]),
                ],
                &[1, 1],
                &[0, 0],
                false,
            ),
            (
                vec![
                    flow("xlane", 1, &[(100, 110, 120)]),
                    flow("plain-udp", 2, &[(100, 150, 200)]),
                ],
                &[1, 1],
                &[0, 1],
                true,
            ),
        ];
        for (flows, samples, lost, ratio) in cases {
            let (configs, kernel, counters) = tables(&flows);
            let got: Vec<u64> = configs.iter().map(|c| c.samples).collect();
            assert_eq!(got, samples);
            let got: Vec<u64> = configs.iter().map(|c| c.lost).collect();
            assert_eq!(got, lost);
            assert_eq!((kernel.len(), counters.len()), (flows.len(), flows.len()));
            // A receive stamp before the send stamp is 0, not a wrap.
            assert!(configs.iter().all(|c| c.max_ns < 1_000), "{configs:?}");
            let mac = mac_cost(&configs, 64, 10.0, 10.0);
            assert!(mac.p50_delta_ns.unsigned_abs() < 1_000, "{mac:?}");
            let report = LaneBenchReport {
                stages: flows.iter().map(Stages::of).collect(),
                configs,
                kernel_configs: kernel,
                floor: Floor {
                    stolen_fraction: 0.0,
                    max_gap_ns: 0,
                    cores: Vec::new(),
                },
                lane_core: LaneCoreBudget::default(),
                counters,
                host_measures: Vec::new(),
                cross_traffic_bps: Vec::new(),
                switch_best_effort_drops: 0,
                params: RunParams {
                    hosts: 4,
                    link_rate_bps: 1_000_000_000,
                    period_ns: 100_000,
                    duration_ns: 0,
                    lane_core: 1,
                    mode: "Sleep".into(),
                    cross_traffic: false,
                    cpu_load: false,
                },
                mac: Some(mac),
                clock: ClockCost {
                    realtime_ns: 20.0,
                    tsc_ns: None,
                },
            };
            let text = report.render();
            assert_eq!(text.contains("plain-udp / xlane"), ratio, "{text}");
            for (c, lost) in report.configs.iter().zip(lost) {
                if c.samples + lost == 0 {
                    assert!(
                        text.lines()
                            .any(|l| l.starts_with(&c.name) && l.contains(" - ")),
                        "{text}"
                    );
                }
            }
        }
    }
}
