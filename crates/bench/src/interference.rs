//! What the benchmarks run beside the flows they measure: saturating
//! best-effort cross traffic, CPU load, and the floor probes that measure
//! the time the machine takes away from each core.

use serde::Serialize;
use xlane_host::floor::{FloorConfig, FloorError, FloorProbe, FloorReport};
use xlane_host::tuning::{AppliedTuning, HostTuning, TuningPlan};
use xlane_testbed::{CpuLoadHandle, CrossTraffic, Testbed, TestbedError, TrafficHandle};

/// Why a benchmark could not run.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
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
    /// A flow failed.
    #[error("{0}")]
    Flow(#[from] crate::flows::FlowError),
    /// A plot could not be written.
    #[error("plot: {0}")]
    Plot(#[from] crate::plot::PlotError),
    /// A thread could not be placed.
    #[error("placement: {0}")]
    Placement(#[from] xlane_host::runtime::RuntimeError),
    /// The output directory could not be made.
    #[error("cannot create {path}: {source}")]
    Output {
        /// The directory.
        path: String,
        /// Cause.
        source: std::io::Error,
    },
}

/// Bring up the emulated datacenter the benchmarks run in, saying so. Its
/// ports are split by CPU around `lane_core`
/// ([`xlane_testbed::TestbedConfig::lane_core`]); the hosts' NICs send at
/// `host_rate_bps` (`None`: the link rate).
pub fn bring_up(
    hosts: usize,
    link_rate_bps: u64,
    host_rate_bps: Option<u64>,
    best_effort_queue_pkts: u32,
    lane_core: usize,
    progress: &mut dyn FnMut(&str),
) -> Result<Testbed, TestbedError> {
    progress(&format!(
        "bringing up the testbed: {hosts} hosts, one switch"
    ));
    let tb = Testbed::up(xlane_testbed::TestbedConfig {
        hosts,
        link_rate_bps,
        host_rate_bps,
        best_effort_queue_pkts,
        lane_core: Some(lane_core),
        ..xlane_testbed::TestbedConfig::default()
    })?;
    progress(&format!("testbed {} is up", tb.prefix()));
    Ok(tb)
}

/// What a lane benchmark stands on while it runs: the machine's cores split
/// around the lane core, the calling thread (and what it starts) kept off
/// the lane core, and the emulated datacenter up ([`bring_up`]). Dropping
/// it tears the datacenter down ([`Stage::tear_down`] says so first).
pub struct Stage {
    /// The emulated datacenter.
    pub tb: Testbed,
    /// The cores.
    pub cores: Cores,
    _off_lane: xlane_host::runtime::AffinityGuard,
}

impl Stage {
    /// Splits the cores around `lane_core`, moves this thread off it, and
    /// brings up `hosts` hosts behind one switch ([`bring_up`]'s settings).
    pub fn up(
        hosts: usize,
        link_rate_bps: u64,
        host_rate_bps: Option<u64>,
        best_effort_queue_pkts: u32,
        lane_core: usize,
        progress: &mut dyn FnMut(&str),
    ) -> Result<Stage, BenchError> {
        let cores = Cores::new(Cores::online(), lane_core).map_err(BenchError::Config)?;
        let off_lane = cores.keep_off_lane_core()?;
        let tb = bring_up(
            hosts,
            link_rate_bps,
            host_rate_bps,
            best_effort_queue_pkts,
            cores.lane,
            progress,
        )?;
        Ok(Stage {
            tb,
            cores,
            _off_lane: off_lane,
        })
    }

    /// Tears the datacenter down, saying so.
    pub fn tear_down(self, progress: &mut dyn FnMut(&str)) {
        progress(&format!("tearing down testbed {}", self.tb.prefix()));
    }
}

/// Applies every host measure for a lane core at `lane_core` when `on`
/// ([`xlane_host::tuning::TuningPlan::all`]), naming each in `progress`;
/// [`restore_host_measures`] undoes them. Returns the applied tuning and
/// the measures' names.
pub fn apply_host_measures(
    on: bool,
    lane_core: usize,
    progress: &mut dyn FnMut(&str),
) -> Result<(Option<AppliedTuning>, Vec<String>), BenchError> {
    if !on {
        return Ok((None, Vec::new()));
    }
    let t = HostTuning::apply(&TuningPlan::all(lane_core))?;
    let measures = t.summary();
    for m in &measures {
        progress(&format!("host measure: {m}"));
    }
    Ok((Some(t), measures))
}

/// Restores what [`apply_host_measures`] changed, saying whether every
/// setting came back.
pub fn restore_host_measures(tuning: Option<AppliedTuning>, progress: &mut dyn FnMut(&str)) {
    let Some(t) = tuning else {
        return;
    };
    let rep = t.restore();
    if rep.is_clean() {
        progress(&format!(
            "host measures restored ({} settings)",
            rep.entries.len()
        ));
    } else {
        progress(&format!("could not restore every host measure: {rep:?}"));
    }
}

/// The cores of this machine split into the lane core and the rest.
#[derive(Clone, Debug)]
pub struct Cores {
    /// Online CPUs.
    pub ncpu: usize,
    /// The lane core.
    pub lane: usize,
    /// Every other core.
    pub regular: Vec<usize>,
}

impl Cores {
    /// Split `ncpu` CPUs around `lane` (which must exist).
    pub fn new(ncpu: usize, lane: usize) -> Result<Self, String> {
        if lane >= ncpu {
            return Err(format!(
                "lane core {lane} does not exist (this machine has {ncpu} CPUs)"
            ));
        }
        Ok(Cores {
            ncpu,
            lane,
            regular: (0..ncpu).filter(|&c| c != lane).collect(),
        })
    }

    /// The CPUs of this machine.
    pub fn online() -> usize {
        xlane_host::runtime::online_cpus()
    }

    /// Keeps the calling thread and what it starts (threads, `tc` and
    /// other processes) on the regular cores until the guard drops; the
    /// lane loop and the lane core's floor probe place themselves.
    pub fn keep_off_lane_core(&self) -> Result<xlane_host::runtime::AffinityGuard, BenchError> {
        Ok(xlane_host::runtime::AffinityGuard::pin(
            &self.regular_or_all(),
        )?)
    }

    /// Where ordinary threads go: the regular cores, or every core on a
    /// one-CPU machine.
    pub fn regular_or_all(&self) -> Vec<usize> {
        if self.regular.is_empty() {
            vec![self.lane]
        } else {
            self.regular.clone()
        }
    }
}

/// Running cross traffic and CPU load; stopped by [`Interference::stop`]
/// (or on drop).
pub struct Interference {
    traffic: Vec<TrafficHandle>,
    cpu_load: Option<CpuLoadHandle>,
}

impl Interference {
    /// Start what is asked. Cross traffic: every receiver's switch port
    /// (hosts 1..n) gets two unpaced best-effort flows, one from another
    /// receiver and one from host 0 (whose uplink the measured flows
    /// share), the one into host 1 from host 0 over TCP; all on the regular
    /// cores. CPU load: one spinning thread on every regular core.
    pub fn start(
        tb: &Testbed,
        cores: &Cores,
        cross: bool,
        cpu: bool,
    ) -> Result<Self, TestbedError> {
        let mut specs = Vec::new();
        if cross {
            let n = tb.hosts().len();
            for r in 1..n {
                let other = if n > 2 { (r % (n - 1)) + 1 } else { 0 };
                specs.push(CrossTraffic::udp(other, r));
                if other != 0 {
                    specs.push(if r == 1 {
                        CrossTraffic::tcp(0, r)
                    } else {
                        CrossTraffic::udp(0, r)
                    });
                }
            }
        }
        Self::launch(tb, cores, specs, cpu)
    }

    /// Like [`Interference::start`], but every switch port (towards hosts
    /// 0..n, when any host may be a receiver, e.g. a store's leader)
    /// gets two unpaced best-effort UDP flows from the two hosts after it
    /// (one from the host after it when there are only two hosts), all on
    /// the regular cores. No TCP: a TCP flow backs off under the drops and
    /// left its port below the link rate.
    pub fn start_all_ports(
        tb: &Testbed,
        cores: &Cores,
        cross: bool,
        cpu: bool,
    ) -> Result<Self, TestbedError> {
        let mut specs = Vec::new();
        if cross {
            let n = tb.hosts().len();
            for r in 0..n {
                specs.push(CrossTraffic::udp((r + 1) % n, r));
                if n > 2 {
                    specs.push(CrossTraffic::udp((r + 2) % n, r));
                }
            }
        }
        Self::launch(tb, cores, specs, cpu)
    }

    /// Saturating best-effort UDP flows between `hosts` only, each to the
    /// next around the ring (both ways between two): on links slower than
    /// the generators (which run out of CPU at a few hundred Mbit/s on a
    /// two-CPU machine) their uplinks' queues fill up, and the rest of the
    /// testbed stays idle.
    pub fn start_between(
        tb: &Testbed,
        cores: &Cores,
        hosts: &[usize],
    ) -> Result<Self, TestbedError> {
        let specs = hosts
            .iter()
            .enumerate()
            .map(|(i, &h)| CrossTraffic::udp(h, hosts[(i + 1) % hosts.len()]))
            .filter(|c| c.from != c.to)
            .collect();
        Self::launch(tb, cores, specs, false)
    }

    /// Starts `specs` on the regular cores, and the CPU load if `cpu`.
    fn launch(
        tb: &Testbed,
        cores: &Cores,
        specs: Vec<CrossTraffic>,
        cpu: bool,
    ) -> Result<Self, TestbedError> {
        let mut traffic = Vec::new();
        for spec in specs {
            traffic.push(tb.start_cross_traffic(spec.cpus(cores.regular_or_all()))?);
        }
        let cpu_load = if cpu && !cores.regular.is_empty() {
            Some(xlane_testbed::start_cpu_load(&cores.regular, 1)?)
        } else {
            None
        };
        Ok(Interference { traffic, cpu_load })
    }

    /// Cross-traffic flows running.
    pub fn flows(&self) -> usize {
        self.traffic.len()
    }

    /// Stop everything; the received rate of every cross-traffic flow, bits/s.
    pub fn stop(self) -> Vec<u64> {
        let rates = self
            .traffic
            .into_iter()
            .map(|t| t.stop().received_rate_bps as u64)
            .collect();
        if let Some(l) = self.cpu_load {
            l.stop();
        }
        rates
    }
}

/// The floor of one core during a run.
#[derive(Clone, Debug, Serialize)]
pub struct CoreFloor {
    /// CPU number.
    pub core: usize,
    /// "lane" or "regular".
    pub role: String,
    /// Fraction of the run the probe was held back (sum of its lateness).
    pub stolen_fraction: f64,
    /// Longest gap, ns.
    pub max_gap_ns: u64,
    /// Wake-ups more than the threshold late.
    pub gaps: usize,
    /// Of those, not kept (the probe's storage was full): time they took
    /// cannot explain any packet, so a report with some is incomplete.
    pub gaps_dropped: u64,
    /// Hypervisor steal ticks (`/proc/stat`, 1/100 s each) during the run.
    pub steal_ticks: u64,
}

/// The floor of a run: headline numbers of the lane core, every core.
#[derive(Clone, Debug, Serialize)]
pub struct Floor {
    /// Fraction of the run the lane core's probe was held back.
    pub stolen_fraction: f64,
    /// Longest gap on the lane core, ns.
    pub max_gap_ns: u64,
    /// Per core.
    pub cores: Vec<CoreFloor>,
}

/// The floor probes of every core: a `cyclictest`-style thread per core,
/// waking on a 100 µs timer at a `SCHED_FIFO` priority above the lane
/// threads; every wake-up more than 20 µs late is a gap. So it measures
/// what the machine (hypervisor, interrupts, softirqs, kernel threads)
/// takes from the highest real-time thread, at a cost of a few µs per
/// wake-up.
pub struct FloorSet {
    lane: usize,
    probes: Vec<FloorProbe>,
}

/// Wake-ups later than this are gaps.
pub const FLOOR_THRESHOLD_NS: u64 = 20_000;

/// How often the floor probes wake.
pub const FLOOR_INTERVAL_NS: u64 = 100_000;

/// The most gaps a probe keeps, whatever the run's length (16 B each).
const FLOOR_MAX_GAPS: usize = 1 << 23;

/// Gaps a probe keeps for a run of `run_ns`: one per wake-up, and some
/// over for the wake-ups before and after the run.
fn floor_capacity(run_ns: u64) -> usize {
    usize::try_from(run_ns / FLOOR_INTERVAL_NS)
        .unwrap_or(usize::MAX)
        .saturating_add(4096)
        .min(FLOOR_MAX_GAPS)
}

impl FloorSet {
    /// Start one probe per core, with room for every gap of a run of up to
    /// `run_ns`: a probe wakes every [`FLOOR_INTERVAL_NS`] and records at
    /// most one gap per wake-up, so the storage never fills in such a run
    /// (gaps beyond it would go unrecorded, and the packets they delayed
    /// unexplained). Longer runs than `FLOOR_MAX_GAPS` wake-ups report
    /// the gaps they could not keep in [`CoreFloor::gaps_dropped`].
    pub fn start(cores: &Cores, run_ns: u64) -> Result<Self, FloorError> {
        let cfg = FloorConfig {
            threshold_ns: FLOOR_THRESHOLD_NS,
            fifo_priority: Some(crate::flows::FLOOR_PRIORITY),
            timer_interval_ns: Some(FLOOR_INTERVAL_NS),
            max_gaps: floor_capacity(run_ns),
        };
        let probes = (0..cores.ncpu)
            .map(|c| FloorProbe::start(c, cfg))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(FloorSet {
            lane: cores.lane,
            probes,
        })
    }

    /// Stop the probes: the summary and the raw reports (for attribution).
    pub fn stop(self) -> (Floor, Vec<FloorReport>) {
        let reports: Vec<FloorReport> = self.probes.into_iter().map(|p| p.stop()).collect();
        let cores: Vec<CoreFloor> = reports
            .iter()
            .map(|f| CoreFloor {
                core: f.core,
                role: if f.core == self.lane {
                    "lane"
                } else {
                    "regular"
                }
                .into(),
                stolen_fraction: f.stolen_fraction,
                max_gap_ns: f.max_gap_ns,
                gaps: f.gaps.len() + f.gaps_dropped as usize,
                gaps_dropped: f.gaps_dropped,
                steal_ticks: f.steal_ticks_delta,
            })
            .collect();
        let lane = cores.iter().find(|c| c.core == self.lane);
        let floor = Floor {
            stolen_fraction: lane.map(|c| c.stolen_fraction).unwrap_or(0.0),
            max_gap_ns: lane.map(|c| c.max_gap_ns).unwrap_or(0),
            cores,
        };
        (floor, reports)
    }
}

impl Floor {
    /// The floor lines of a report.
    pub fn render(&self, lane_core: usize) -> String {
        use crate::table::fmt_ns;
        let mut out = format!(
            "time the machine took away from a real-time thread on the lane core {}: {:.3}% of the run, longest gap {}\n",
            lane_core,
            100.0 * self.stolen_fraction,
            fmt_ns(self.max_gap_ns)
        );
        for c in &self.cores {
            out.push_str(&format!(
                "  core {} ({}): {:.3}% in {} wake-ups over {} late, longest {}; hypervisor steal {} ticks\n",
                c.core,
                c.role,
                100.0 * c.stolen_fraction,
                c.gaps,
                fmt_ns(FLOOR_THRESHOLD_NS),
                fmt_ns(c.max_gap_ns),
                c.steal_ticks
            ));
            if c.gaps_dropped > 0 {
                out.push_str(&format!(
                    "  core {}: {} gaps NOT KEPT (storage full): packets they delayed count as unexplained\n",
                    c.core, c.gaps_dropped
                ));
            }
        }
        out
    }
}

/// Best-effort drops at every switch port so far.
pub fn switch_drops(tb: &Testbed) -> u64 {
    (0..tb.hosts().len())
        .filter_map(|i| tb.qdisc_stats(i).ok())
        .map(|q| q.best_effort.dropped)
        .sum()
}

/// The report line on cross traffic: each flow's received rate, the
/// best-effort drops at the switch, the link rate.
pub fn render_cross_traffic(rates_bps: &[u64], drops: u64, link_rate_bps: u64) -> String {
    let mbps: Vec<String> = rates_bps
        .iter()
        .map(|b| format!("{:.0}", *b as f64 / 1e6))
        .collect();
    format!(
        "cross traffic: {} flows at [{}] Mbit/s, {drops} best-effort drops at the switch; link rate {} Mbit/s\n",
        rates_bps.len(),
        mbps.join(", "),
        link_rate_bps / 1_000_000
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floor_storage_holds_one_gap_per_wake_up() {
        // (run, gaps kept): a 62.5 s bounds run needs 625 000, far over
        // the 65 536 a fixed size used to keep.
        let table: [(u64, usize); 4] = [
            (0, 4096),
            (1_000_000_000, 10_000 + 4096),
            (62_500_000_000, 625_000 + 4096),
            (u64::MAX, FLOOR_MAX_GAPS),
        ];
        for (run_ns, want) in table {
            assert_eq!(floor_capacity(run_ns), want, "run of {run_ns} ns");
        }
    }
}
