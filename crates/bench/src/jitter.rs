//! `xlane bench jitter`: the comparison of X-Lane §6.2–§6.3 in the
//! testbed — five configurations by default, more with `xlane-xdp` and
//! `xlane-xdp-rx`
//! ([`Variant`]), four scenarios
//! ([`Scenario`]), interleaved in short rounds so that every configuration
//! meets the same interference, with the machine's floor measured in the
//! same run and every outlier attributed to a cause.
//!
//! Per scenario: the testbed's interference is set (cross traffic, CPU
//! load, both or neither), the floor probes start, and then round after
//! round each configuration runs its periodic multicast flow from host 0 to
//! all other hosts for `round` seconds, in an order that rotates every
//! round. Samples of all rounds and receivers are merged per configuration
//! (percentiles of the merged samples, never averages of percentiles).

use crate::attribution::{attribute, Cause, GapIndex};
use crate::budget::{LaneCoreBudget, LaneCoreUse};
use crate::flows::{run_flows, FlowPlan, FlowResult, FlowSample, Variant};
use crate::interference::{switch_drops, BenchError, Cores, Floor, FloorSet, Interference, Stage};
use crate::qjump::QjumpLimiter;
use crate::stats::LatencySummary;
use crate::table::{fmt_ns, Table};
use serde::Serialize;
use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use xlane_host::runtime::{lock_memory, WaitMode};
use xlane_host::socket::realtime_ns;
use xlane_host::tuning::{HostTuning, TuningPlan};
use xlane_stats::{mean_variance, percentile_ci, violation_bound};

/// The interference a scenario runs under.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scenario {
    /// Nothing else runs.
    Idle,
    /// Best-effort cross traffic saturates the switch egress ports.
    Cross,
    /// CPU load on every core but the lane core.
    Cpu,
    /// Both.
    Both,
}

impl Scenario {
    /// All four, in report order.
    pub const ALL: [Scenario; 4] = [
        Scenario::Idle,
        Scenario::Cross,
        Scenario::Cpu,
        Scenario::Both,
    ];

    /// Name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Scenario::Idle => "idle",
            Scenario::Cross => "cross",
            Scenario::Cpu => "cpu",
            Scenario::Both => "both",
        }
    }

    /// Parse a name.
    pub fn from_name(s: &str) -> Option<Scenario> {
        Scenario::ALL.into_iter().find(|x| x.name() == s)
    }

    /// Whether cross traffic runs.
    pub fn cross(self) -> bool {
        matches!(self, Scenario::Cross | Scenario::Both)
    }

    /// Whether CPU load runs.
    pub fn cpu(self) -> bool {
        matches!(self, Scenario::Cpu | Scenario::Both)
    }
}

/// What to run.
#[derive(Clone, Debug)]
pub struct JitterConfig {
    /// Emulated hosts (host 0 sends, the others receive).
    pub hosts: usize,
    /// Link rate of every port, bits/s.
    pub link_rate_bps: u64,
    /// Best-effort queue length per port, packets.
    pub best_effort_queue_pkts: u32,
    /// Period π of every flow, ns.
    pub period_ns: u64,
    /// Payload bytes per message (8..=20).
    pub message_len: usize,
    /// Time each configuration runs per scenario, ns (split into rounds).
    pub per_config_ns: u64,
    /// Length of one round, ns.
    pub round_ns: u64,
    /// Scenarios to run.
    pub scenarios: Vec<Scenario>,
    /// Configurations to compare.
    pub variants: Vec<Variant>,
    /// The lane core.
    pub lane_core: usize,
    /// How the lane's threads wait.
    pub mode: WaitMode,
    /// Confidence of the percentile intervals.
    pub confidence: f64,
    /// Where plots go (none: no plots).
    pub plot_dir: Option<PathBuf>,
}

impl Default for JitterConfig {
    fn default() -> Self {
        JitterConfig {
            hosts: 4,
            link_rate_bps: 100_000_000,
            best_effort_queue_pkts: 1000,
            period_ns: 200_000,
            message_len: 16,
            per_config_ns: 10_000_000_000,
            round_ns: 2_000_000_000,
            scenarios: Scenario::ALL.to_vec(),
            // Every configuration on the socket path; the AF_XDP ones on
            // request.
            variants: Variant::ALL
                .into_iter()
                .filter(|v| v.rx() == xlane_host::xdp::PathMode::Socket)
                .collect(),
            lane_core: Cores::online() - 1,
            mode: WaitMode::Interrupt,
            confidence: 0.95,
            plot_dir: None,
        }
    }
}

/// A percentile's confidence interval, `[lower, upper]` ns, or `None` when
/// there are too few samples for it.
pub type Ci = Option<[u64; 2]>;

/// One configuration's results in one scenario.
#[derive(Clone, Debug, Serialize)]
pub struct ConfigReport {
    /// Name, samples, lost, λmin, λ50, λ99, λ99.9, λ99.99, λmax, mean and
    /// δmax (flattened into this object in JSON).
    #[serde(flatten)]
    pub latency: LatencySummary,
    /// δmax without the packets explained by host gaps.
    pub delta_max_excl_gaps_ns: u64,
    /// (λmax − λmin) / λavg.
    pub relative_jitter: f64,
    /// X-Lane §6.3: P that one of the next 100 000 packets exceeds 10 × λ99
    /// (Chebyshev, i.i.d. assumption).
    pub p_bound: f64,
    /// Confidence interval per percentile ("p50", "p99", "p99.9", "p99.99").
    pub ci: BTreeMap<String, Ci>,
    /// Outliers (above λ99) per cause.
    pub outliers: BTreeMap<String, u64>,
    /// Frames the sender emitted.
    pub frames_sent: u64,
    /// Periods in the measured rounds.
    pub slots: u64,
    /// Slots the QJump limiter held back.
    pub rate_limited: u64,
    /// Datagrams the kernel dropped at the receivers' sockets or AF_XDP
    /// rings (part of the loss, by cause).
    pub receiver_drops: u64,
    /// Datagrams read from AF_XDP rings (all of them, for `xlane-xdp` and
    /// `xlane-xdp-rx`).
    pub xdp_datagrams: u64,
    /// Median time from the send stamp to the receive stamp (the kernel's
    /// as the packet entered the stack, or the XDP program's), ns: the
    /// part of λ50 before the receiving host's lane thread.
    pub p50_to_stamp_ns: u64,
}

/// One scenario's report: the object `--json` prints per scenario.
#[derive(Clone, Debug, Serialize)]
pub struct ScenarioReport {
    /// Scenario name.
    pub scenario: String,
    /// One entry per configuration.
    pub configs: Vec<ConfigReport>,
    /// The machine's floor during the scenario.
    pub floor: Floor,
    /// The lane core's budget over the rounds of the configurations on it.
    pub lane_core: LaneCoreBudget,
    /// Cross traffic achieved, bits/s per flow.
    pub cross_traffic_bps: Vec<u64>,
    /// Best-effort drops at the switch during the scenario.
    pub switch_best_effort_drops: u64,
    /// Confidence of the intervals.
    pub confidence: f64,
    /// Plot files written.
    pub plots: Vec<String>,
}

const GROUP: Ipv4Addr = Ipv4Addr::new(239, 77, 1, 1);

/// The percentiles reported, with their names.
pub const PERCENTILES: [(f64, &str); 4] = [
    (0.5, "p50"),
    (0.99, "p99"),
    (0.999, "p99.9"),
    (0.9999, "p99.99"),
];

/// Run the benchmark; `progress` gets a line per step, `on_report` each
/// scenario's report as soon as it is done.
pub fn run(
    cfg: &JitterConfig,
    progress: &mut dyn FnMut(&str),
    on_report: &mut dyn FnMut(&ScenarioReport),
) -> Result<Vec<ScenarioReport>, BenchError> {
    if cfg.hosts < 2 {
        return Err(BenchError::Config("need at least 2 hosts".into()));
    }
    if cfg.period_ns < 10_000 || cfg.round_ns < 10 * cfg.period_ns {
        return Err(BenchError::Config(
            "period below 10 µs, or a round shorter than 10 periods".into(),
        ));
    }
    if cfg.variants.is_empty() || cfg.scenarios.is_empty() {
        return Err(BenchError::Config("nothing to run".into()));
    }
    let stage = Stage::up(
        cfg.hosts,
        cfg.link_rate_bps,
        None,
        cfg.best_effort_queue_pkts,
        cfg.lane_core,
        progress,
    )?;
    let (tb, cores) = (&stage.tb, &stage.cores);
    let _ = lock_memory();
    let rounds = cfg.per_config_ns.div_ceil(cfg.round_ns).max(1);
    let epoch = QjumpLimiter::epoch_ns(cfg.hosts as u32, 1500, cfg.link_rate_bps);
    let qjump = QjumpLimiter::new(epoch, QjumpLimiter::factor_for_period(epoch, cfg.period_ns));
    let mut reports = Vec::new();
    for &scenario in &cfg.scenarios {
        progress(&format!(
            "scenario {}: {} configurations × {rounds} rounds of {}",
            scenario.name(),
            cfg.variants.len(),
            fmt_ns(cfg.round_ns)
        ));
        let drops_before = switch_drops(tb);
        let interference = Interference::start(tb, cores, scenario.cross(), scenario.cpu())?;
        // Every configuration's rounds, plus their leads and graces.
        let floor_probes = FloorSet::start(
            cores,
            (rounds * cfg.variants.len() as u64 + 2).saturating_mul(cfg.round_ns + 1_000_000_000),
        )?;
        let t0 = realtime_ns();
        let mut results: Vec<FlowResult> = cfg
            .variants
            .iter()
            .map(|v| FlowResult {
                name: v.name().to_string(),
                receivers: (cfg.hosts - 1) as u64,
                ..FlowResult::default()
            })
            .collect();
        let mut outcome = Ok(());
        let mut lane_use = LaneCoreUse::default();
        'rounds: for round in 0..rounds {
            for k in 0..cfg.variants.len() {
                let vi = (k + round as usize) % cfg.variants.len();
                let v = cfg.variants[vi];
                let first = realtime_ns() + 50_000_000;
                let plan = FlowPlan {
                    variant: v,
                    name: v.name().to_string(),
                    tunnel: 10 + vi as u32,
                    group: SocketAddrV4::new(GROUP, 7200 + vi as u16),
                    period_ns: cfg.period_ns,
                    message_len: cfg.message_len,
                    lane_core: cfg.lane_core,
                    regular_core: cores.regular.first().copied(),
                    lane_mode: cfg.mode,
                    sender: tb.hosts()[0].clone(),
                    receivers: tb.hosts()[1..].to_vec(),
                    first_slot_ns: first,
                    until_ns: first + cfg.round_ns,
                    // Long enough for a full best-effort queue to drain.
                    grace_ns: queue_drain_ns(cfg) + 50_000_000,
                    qjump: (v == Variant::Qjump).then_some(qjump),
                    mac: None,
                    tx_stamps: false,
                    dscp: None,
                };
                let tuning = if v.host_measures() {
                    match HostTuning::apply(&TuningPlan::all(cfg.lane_core)) {
                        Ok(t) => Some(t),
                        Err(e) => {
                            outcome = Err(BenchError::from(e));
                            break 'rounds;
                        }
                    }
                } else {
                    None
                };
                let stop = AtomicBool::new(false);
                let r = run_flows(std::slice::from_ref(&plan), &stop);
                if let Some(t) = tuning {
                    t.restore();
                }
                match r {
                    Ok(mut run) => {
                        if run.start_shift_ns > 0 {
                            progress(&format!(
                                "  {}: set-up took {} longer than its lead; slots started that much later",
                                v.name(),
                                fmt_ns(run.start_shift_ns)
                            ));
                        }
                        if v.on_lane_core() {
                            lane_use.add(&LaneCoreUse::of_run(&run, cfg.lane_core));
                        }
                        merge(&mut results[vi], run.flows.remove(0))
                    }
                    Err(e) => {
                        outcome = Err(e.into());
                        break 'rounds;
                    }
                }
            }
            progress(&format!("  round {}/{rounds} done", round + 1));
        }
        let (floor, floor_reports) = floor_probes.stop();
        let cross_bps = interference.stop();
        let drops = switch_drops(tb).saturating_sub(drops_before);
        outcome?;
        let mut configs = Vec::new();
        let mut series: Vec<(String, Vec<u64>)> = Vec::new();
        let mut outlier_points = Vec::new();
        for (res, v) in results.iter().zip(&cfg.variants) {
            // A packet is explained by host gaps only on the cores its
            // configuration's threads run on.
            let on_lane = v.on_lane_core();
            let gaps = GapIndex::new(
                floor_reports
                    .iter()
                    .filter(|r| (r.core == cores.lane) == on_lane)
                    .flat_map(|r| r.gaps.iter()),
            );
            let (report, sorted, points) = summarize(res, &gaps, cfg.confidence, t0);
            configs.push(report);
            series.push((res.name.clone(), sorted));
            outlier_points.extend(points);
        }
        let plots = match &cfg.plot_dir {
            Some(dir) => write_plots(dir, scenario, &series, &outlier_points)?,
            None => Vec::new(),
        };
        let report = ScenarioReport {
            scenario: scenario.name().to_string(),
            configs,
            lane_core: lane_use.budget(floor.stolen_fraction),
            floor,
            cross_traffic_bps: cross_bps,
            switch_best_effort_drops: drops,
            confidence: cfg.confidence,
            plots,
        };
        on_report(&report);
        reports.push(report);
    }
    stage.tear_down(progress);
    Ok(reports)
}

/// How long a full best-effort queue takes to drain at the link rate.
fn queue_drain_ns(cfg: &JitterConfig) -> u64 {
    (cfg.best_effort_queue_pkts as u128 * 1500 * 8 * 1_000_000_000
        / cfg.link_rate_bps.max(1) as u128) as u64
}

fn merge(into: &mut FlowResult, r: FlowResult) {
    into.samples.extend(r.samples);
    into.sent.frames += r.sent.frames;
    into.sent.send_errors += r.sent.send_errors;
    into.sent.late_max_ns = into.sent.late_max_ns.max(r.sent.late_max_ns);
    into.slots += r.slots;
    into.rate_limited += r.rate_limited;
    into.refused += r.refused;
    into.socket_drops += r.socket_drops;
    into.xdp_datagrams += r.xdp_datagrams;
}

/// The report of one configuration, its sorted latencies, and its
/// outliers as plot points (the 2000 worst).
fn summarize(
    res: &FlowResult,
    gaps: &GapIndex,
    confidence: f64,
    t0: u64,
) -> (ConfigReport, Vec<u64>, Vec<crate::plot::OutlierPoint>) {
    let mut sorted: Vec<u64> = res.samples.iter().map(FlowSample::latency_ns).collect();
    let latency = LatencySummary::from_samples(&res.name, &mut sorted, res.lost());
    let (mean, var) = mean_variance(&sorted);
    let p99 = latency.p99_ns;
    let bound = violation_bound(mean, var, 10.0 * p99 as f64, 100_000);
    let att = attribute(&res.samples, gaps);
    let mut outliers: BTreeMap<String, u64> = Cause::ALL
        .iter()
        .map(|c| (c.name().to_string(), att.count(*c)))
        .collect();
    outliers.insert("lost".into(), res.lost());
    let ci = PERCENTILES
        .iter()
        .map(|&(q, name)| {
            let c = percentile_ci(&sorted, q, confidence).map(|c| [c.lower, c.upper]);
            (name.to_string(), c)
        })
        .collect();
    let mut worst = att.outliers.clone();
    worst.sort_unstable_by_key(|(i, _)| std::cmp::Reverse(res.samples[*i].latency_ns()));
    worst.truncate(2000);
    let points = worst
        .into_iter()
        .map(|(i, cause)| {
            let s = &res.samples[i];
            crate::plot::OutlierPoint {
                config: res.name.clone(),
                t_ns: s.sample.send_ns.saturating_sub(t0),
                latency_ns: s.latency_ns(),
                cause: cause.name().to_string(),
            }
        })
        .collect();
    let report = ConfigReport {
        relative_jitter: if mean > 0.0 {
            latency.delta_max_ns as f64 / mean
        } else {
            0.0
        },
        latency,
        delta_max_excl_gaps_ns: att.delta_max_excl_gaps_ns,
        p_bound: bound.pn,
        ci,
        outliers,
        frames_sent: res.sent.frames,
        slots: res.slots,
        rate_limited: res.rate_limited,
        receiver_drops: res.socket_drops,
        xdp_datagrams: res.xdp_datagrams,
        p50_to_stamp_ns: {
            let mut v: Vec<u64> = res.samples.iter().map(FlowSample::network_ns).collect();
            v.sort_unstable();
            xlane_stats::percentile(&v, 0.5).unwrap_or(0)
        },
    };
    (report, sorted, points)
}

fn write_plots(
    dir: &Path,
    scenario: Scenario,
    series: &[(String, Vec<u64>)],
    outliers: &[crate::plot::OutlierPoint],
) -> Result<Vec<String>, BenchError> {
    std::fs::create_dir_all(dir).map_err(|source| BenchError::Output {
        path: dir.display().to_string(),
        source,
    })?;
    let s: Vec<crate::plot::Series> = series
        .iter()
        .map(|(name, v)| crate::plot::Series { name, sorted_ns: v })
        .collect();
    let name = scenario.name();
    let mut files = Vec::new();
    for paths in [
        crate::plot::latency_cdf(
            &s,
            &format!("Latency CDF, scenario {name}"),
            &dir.join(format!("jitter-{name}-cdf")),
        )?,
        crate::plot::percentile_ladder(
            &s,
            &format!("Tail latency by percentile, scenario {name}"),
            &dir.join(format!("jitter-{name}-ladder")),
        )?,
        crate::plot::outlier_timeseries(
            outliers,
            &format!("Outliers above λ99 over time, scenario {name}"),
            &dir.join(format!("jitter-{name}-outliers")),
        )?,
    ] {
        files.extend(paths.iter().map(|p| p.display().to_string()));
    }
    Ok(files)
}

impl ScenarioReport {
    /// The tables a person reads.
    pub fn render(&self) -> String {
        let mut out = format!("== scenario {} ==\n", self.scenario);
        let mut t = Table::new(&[
            "config",
            "sent",
            "samples",
            "loss",
            "λmin",
            "λ50",
            "λ99",
            "λ99.9",
            "λ99.99",
            "λmax",
            "δmax",
            "δmax¬gap",
            "rel.jit",
            "P",
        ]);
        for c in &self.configs {
            let l = &c.latency;
            let expected = l.samples + l.lost;
            t.row(vec![
                l.name.clone(),
                format!(
                    "{:.0}%",
                    100.0 * c.frames_sent as f64 / c.slots.max(1) as f64
                ),
                l.samples.to_string(),
                if expected == 0 {
                    "-".into()
                } else {
                    format!("{:.2}%", 100.0 * l.lost as f64 / expected as f64)
                },
                fmt_ns(l.min_ns),
                fmt_ns(l.p50_ns),
                fmt_ns(l.p99_ns),
                fmt_ns(l.p999_ns),
                fmt_ns(l.p9999_ns),
                fmt_ns(l.max_ns),
                fmt_ns(l.delta_max_ns),
                fmt_ns(c.delta_max_excl_gaps_ns),
                format!("{:.3}", c.relative_jitter),
                format!("{:.3}", c.p_bound),
            ]);
        }
        out.push_str(&t.render());
        out.push_str(
            "sent: frames sent per period (an ordinary sender misses periods); loss: of frames sent; \
             δmax¬gap: δmax without packets explained by host gaps; P: §6.3 bound for 10×λ99 over 100 000 packets\n",
        );
        out.push_str(&format!(
            "\n{:.0}% confidence intervals (order statistics):\n",
            100.0 * self.confidence
        ));
        let mut t = Table::new(&["config", "λ50", "λ99", "λ99.9", "λ99.99"]);
        for c in &self.configs {
            let mut row = vec![c.latency.name.clone()];
            for (_, name) in PERCENTILES {
                row.push(match c.ci.get(name).copied().flatten() {
                    Some([lo, hi]) => format!("[{}, {}]", fmt_ns(lo), fmt_ns(hi)),
                    None => "too few samples".into(),
                });
            }
            t.row(row);
        }
        out.push_str(&t.render());
        out.push_str("\noutliers above λ99 by cause:\n");
        let mut header = vec!["config".to_string()];
        header.extend(Cause::ALL.iter().map(|c| c.name().to_string()));
        header.push("lost".into());
        let mut t = Table::new(&header);
        for c in &self.configs {
            let mut row = vec![c.latency.name.clone()];
            for h in &header[1..] {
                row.push(c.outliers.get(h).copied().unwrap_or(0).to_string());
            }
            t.row(row);
        }
        out.push_str(&t.render());
        out.push('\n');
        let lane_core = self
            .floor
            .cores
            .iter()
            .find(|c| c.role == "lane")
            .map(|c| c.core)
            .unwrap_or(0);
        out.push_str(&self.floor.render(lane_core));
        out.push_str(&self.lane_core.render(lane_core));
        if !self.cross_traffic_bps.is_empty() {
            let mbps: Vec<String> = self
                .cross_traffic_bps
                .iter()
                .map(|b| format!("{:.0}", *b as f64 / 1e6))
                .collect();
            out.push_str(&format!(
                "cross traffic: {} flows at [{}] Mbit/s, {} best-effort drops at the switch\n",
                mbps.len(),
                mbps.join(", "),
                self.switch_best_effort_drops
            ));
        }
        for c in self.configs.iter().filter(|c| c.xdp_datagrams > 0) {
            out.push_str(&format!(
                "{}: {} of {} datagrams through the AF_XDP rings, {} dropped at receivers\n",
                c.latency.name, c.xdp_datagrams, c.latency.samples, c.receiver_drops
            ));
        }
        let xlane = self.configs.iter().find(|c| c.latency.name == "xlane");
        // Ratios only between configurations that both have samples: a
        // ratio of nothing is neither 0× nor infinite.
        let xlane = xlane.filter(|c| c.latency.samples > 0);
        let xdp_configs = self
            .configs
            .iter()
            .filter(|c| c.latency.name.starts_with("xlane-xdp") && c.latency.samples > 0);
        for (x, xdp) in xdp_configs.filter_map(|c| Some((xlane?, c))) {
            let r = |a: u64, b: u64| a as f64 / b.max(1) as f64;
            out.push_str(&format!(
                "{n} / xlane: λ50 {:.2}×, λ99.99 {:.2}×, λmin {:.2}×; λ50 split at the receive stamp: xlane {} + {}, {n} {} + {} (the kernel stamps as the stack takes the packet, XDP before it)\n",
                r(xdp.latency.p50_ns, x.latency.p50_ns),
                r(xdp.latency.p9999_ns, x.latency.p9999_ns),
                r(xdp.latency.min_ns, x.latency.min_ns),
                fmt_ns(x.p50_to_stamp_ns),
                fmt_ns(x.latency.p50_ns.saturating_sub(x.p50_to_stamp_ns)),
                fmt_ns(xdp.p50_to_stamp_ns),
                fmt_ns(xdp.latency.p50_ns.saturating_sub(xdp.p50_to_stamp_ns)),
                n = xdp.latency.name,
            ));
        }
        if let (Some(x), Some(pl)) = (
            xlane,
            self.configs
                .iter()
                .find(|c| c.latency.name == "plain" && c.latency.samples > 0),
        ) {
            let r = |a: u64, b: u64| a as f64 / b.max(1) as f64;
            out.push_str(&format!(
                "plain / xlane: λ99.99 {:.1}×, δmax without host gaps {:.1}×, λ50 {:.1}×\n",
                r(pl.latency.p9999_ns, x.latency.p9999_ns),
                r(pl.delta_max_excl_gaps_ns, x.delta_max_excl_gaps_ns),
                r(pl.latency.p50_ns, x.latency.p50_ns)
            ));
        }
        for p in &self.plots {
            if p.ends_with(".png") {
                out.push_str(&format!("plot: {p}\n"));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flows::flow_for_tests as flow;

    /// Configurations that received nothing, lost everything, got one
    /// frame or saw a receive stamp before the send stamp: each is
    /// summarised, rendered and plotted; no ratio is taken of nothing,
    /// and an interval that cannot be had says so.
    #[test]
    fn degenerate_configurations_are_summarised_rendered_and_plotted() {
        let gaps = GapIndex::new(&[]);
        // (flows, want samples, want a plain/xlane ratio line)
        type Case = (Vec<FlowResult>, &'static [u64], bool);
        let cases: Vec<Case> = vec![
            (
                vec![flow("xlane", 0, &[]), flow("plain", 0, &[])],
                &[0, 0],
                false,
            ),
            (
                vec![flow("xlane", 9, &[]), flow("plain", 9, &[(5, 6, 7)])],
                &[0, 1],
                false,
            ),
            (
                vec![
                    flow("xlane", 1, &[(100, 90, 80)]),
                    flow("plain", 1, &[(100, 150, 200)]),
                ],
                &[1, 1],
                true,
            ),
            (vec![flow("xlane-xdp", 1, &[(10, 20, 30)])], &[1], false),
        ];
        let dir =
            std::env::temp_dir().join(format!("xlane-jitter-degenerate-{}", std::process::id()));
        for (flows, samples, ratio) in cases {
            let mut configs = Vec::new();
            let mut series = Vec::new();
            let mut outliers = Vec::new();
            for f in &flows {
                // t0 after every send stamp: offsets clamp, never wrap.
                let (c, sorted, points) = summarize(f, &gaps, 0.95, 1_000);
                assert!(c.latency.max_ns < 1_000, "{c:?}");
                assert!(points.iter().all(|p| p.t_ns == 0));
                series.push((c.latency.name.clone(), sorted));
                outliers.extend(points);
                configs.push(c);
            }
            let got: Vec<u64> = configs.iter().map(|c| c.latency.samples).collect();
            assert_eq!(got, samples);
            let r = ScenarioReport {
                scenario: "idle".into(),
                configs,
                floor: Floor {
                    stolen_fraction: 0.0,
                    max_gap_ns: 0,
                    cores: Vec::new(),
                },
                lane_core: LaneCoreBudget::default(),
                cross_traffic_bps: Vec::new(),
                switch_best_effort_drops: 0,
                confidence: 0.95,
                plots: Vec::new(),
            };
            let text = r.render();
            assert_eq!(text.contains("plain / xlane"), ratio, "{text}");
            assert!(!text.contains("xlane-xdp / xlane"), "{text}");
            assert!(text.contains("too few samples"), "{text}");
            let files = write_plots(&dir, Scenario::Idle, &series, &outliers).expect("plots");
            assert_eq!(files.len(), 6, "{files:?}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
