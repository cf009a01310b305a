//! `xlane bench sven`: SVEN's evaluation (its Figs. 3 and 4) scaled to
//! this machine, against the SLO-aware admission control of
//! `xlane rpc router` ([`xlane_rpc::admission`]).
//!
//! One synthetic R2P2 server with `workers` worker ports (each its own
//! FIFO) serves requests of a fixed, exponential or bimodal service time of
//! the same mean S̄, behind an `xlane rpc router` core in this process with
//! the `random` policy (SVEN's random FIFO). The SLO is p99 = 30·S̄ unless
//! given.
//!
//! 1. **The curve** (Fig. 3): Poisson load at fractions of the capacity
//!    (workers / S̄), no admission control; the SLO's percentile against the
//!    achieved throughput gives the throughput at which the SLO breaks (the
//!    SLO-violating throughput), per distribution.
//! 2. **The steps** (Fig. 4): one run whose offered load steps through
//!    `steps` (0.6 → 1.15 of capacity), with no control (`none`), SVEN's
//!    AIAD loop (`aiad`) and xlane's default (`default`, the cap
//!    controller). Every second: offered and achieved throughput, goodput
//!    (answered within the SLO), drop rate and p99.
//!
//! Every run gets a fresh server and router, and the floor of each CPU per
//! second, so that a second spoiled by the machine shows as such.

mod plot;
mod seconds;

pub use plot::plot;
pub use seconds::{
    analyze, overshoot, slo_violating_rps, Analysis, CurveAt, RunData, Second, OVERLOAD,
};

use crate::interference::{Cores, FloorSet};
use crate::rpc_bench::{free_port, least_gap_of, RouterThread, SetAside, Target};
use serde::Serialize;
use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddrV4};
use xlane_lancet::{
    AgentKind, App, Arrival, ClientConfig, RateStep, ServeConfig, Server, ServiceDist, Transport,
};
use xlane_rpc::admission::{ControllerKind, Slo};
use xlane_rpc::router::{AdmissionConfig, Policy, RouterConfig};

/// A service-time distribution of mean S̄.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Shape {
    /// Every request takes S̄.
    Fixed,
    /// Exponential of mean S̄.
    Exp,
    /// 90 % take S̄/1.9, 10 % ten times that.
    Bimodal,
}

impl Shape {
    /// The distribution of mean `mean_ns`.
    pub fn dist(self, mean_ns: u64) -> ServiceDist {
        match self {
            Shape::Fixed => ServiceDist::Fixed(mean_ns),
            Shape::Exp => ServiceDist::Exp(mean_ns),
            Shape::Bimodal => ServiceDist::Bimodal((mean_ns as f64 / 1.9).round() as u64),
        }
    }

    /// `fixed`, `exp`, `bimodal`.
    pub fn name(self) -> &'static str {
        match self {
            Shape::Fixed => "fixed",
            Shape::Exp => "exp",
            Shape::Bimodal => "bimodal",
        }
    }
}

impl std::str::FromStr for Shape {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "fixed" => Ok(Shape::Fixed),
            "exp" => Ok(Shape::Exp),
            "bimodal" => Ok(Shape::Bimodal),
            _ => Err(format!(
                "unknown distribution {s:?}: expected fixed, exp or bimodal"
            )),
        }
    }
}

/// Admission control of a stepped run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Control {
    /// No admission control.
    None,
    /// SVEN's Listing 1 ([`ControllerKind::AIAD`]).
    Aiad,
    /// The router's default ([`ControllerKind::CAP`]).
    Default,
}

impl Control {
    /// `none`, `aiad`, `default`.
    pub fn name(self) -> &'static str {
        match self {
            Control::None => "none",
            Control::Aiad => "aiad",
            Control::Default => "default",
        }
    }

    fn controller(self) -> Option<ControllerKind> {
        match self {
            Control::None => None,
            Control::Aiad => Some(ControllerKind::AIAD),
            Control::Default => Some(ControllerKind::CAP),
        }
    }
}

impl std::str::FromStr for Control {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "none" => Ok(Control::None),
            "aiad" => Ok(Control::Aiad),
            "default" | "cap" => Ok(Control::Default),
            _ => Err(format!(
                "unknown controller {s:?}: expected none, aiad or default"
            )),
        }
    }
}

/// One step of the offered load.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Step {
    /// Offered load, a fraction of the capacity.
    pub load: f64,
    /// How long, whole seconds.
    pub seconds: u32,
}

impl std::str::FromStr for Step {
    type Err = String;
    /// `LOAD:SECONDS`, like `1.15:10`.
    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || format!("bad step {s:?}: expected LOAD:SECONDS like 1.15:10");
        let (l, t) = s.split_once(':').ok_or_else(bad)?;
        Ok(Step {
            load: l.trim().parse().map_err(|_| bad())?,
            seconds: t.trim().parse().map_err(|_| bad())?,
        })
    }
}

/// Settings of a run.
#[derive(Clone, Debug, Serialize)]
pub struct SvenBenchConfig {
    /// Worker ports of the server (each a FIFO).
    pub workers: usize,
    /// Mean service time S̄, ns.
    pub service_ns: u64,
    /// The SLO (`None`: p99 = 30·S̄).
    #[serde(serialize_with = "ser_slo")]
    pub slo: Option<Slo>,
    /// Distributions to run.
    pub distributions: Vec<Shape>,
    /// Loads of the curve without control, fractions of the capacity.
    pub curve_loads: Vec<f64>,
    /// Seconds per curve point (the first half-second is warm-up).
    pub curve_seconds: f64,
    /// The stepped load of the controller runs.
    pub steps: Vec<Step>,
    /// Seconds after the first overload step left out of the targets.
    pub settle_seconds: u32,
    /// Controllers to compare.
    pub controllers: Vec<Control>,
    /// Control period of the router's admission control, ns (SVEN: 20 ms).
    pub period_ns: u64,
    /// Seed of schedules, service times and random picks.
    pub seed: u64,
    /// A curve point during which a CPU's floor probe saw a gap longer
    /// than this runs again (at most `retries` times); the attempt with
    /// the shortest gap is kept, the others reported. Ns.
    pub max_gap_ns: u64,
    /// Most extra attempts of a curve point.
    pub retries: usize,
}

fn ser_slo<S: serde::Serializer>(slo: &Option<Slo>, s: S) -> Result<S::Ok, S::Error> {
    match slo {
        Some(v) => s.serialize_some(&v.to_string()),
        None => s.serialize_none(),
    }
}

impl Default for SvenBenchConfig {
    /// 4 workers, S̄ = 500 µs (capacity 8 000 req/s), SLO p99 = 15 ms,
    /// fixed, exp and bimodal; the curve at 0.5…1.0 of capacity, 3 s a
    /// point; steps 0.6, 0.8, 1.0 (4 s each), 1.1 (10 s), 1.15 (12 s);
    /// 1 s of settling; none, aiad and default; a 20 ms control period; a
    /// curve point again (twice at most) after a host gap over 10 ms.
    fn default() -> Self {
        SvenBenchConfig {
            workers: 4,
            service_ns: 500_000,
            slo: None,
            distributions: vec![Shape::Fixed, Shape::Exp, Shape::Bimodal],
            curve_loads: vec![0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95, 1.0],
            curve_seconds: 3.0,
            steps: vec![
                Step {
                    load: 0.6,
                    seconds: 4,
                },
                Step {
                    load: 0.8,
                    seconds: 4,
                },
                Step {
                    load: 1.0,
                    seconds: 4,
                },
                Step {
                    load: 1.1,
                    seconds: 10,
                },
                Step {
                    load: 1.15,
                    seconds: 12,
                },
            ],
            settle_seconds: 1,
            controllers: vec![Control::None, Control::Aiad, Control::Default],
            period_ns: 20_000_000,
            seed: 1,
            max_gap_ns: 10_000_000,
            retries: 2,
        }
    }
}

/// Why the bench could not run.
pub type SvenBenchError = crate::rpc_bench::RpcBenchError;

/// One point of a curve without control.
#[derive(Clone, Debug, Serialize)]
pub struct CurvePoint {
    /// Offered load, a fraction of the capacity.
    pub load: f64,
    /// Requests per second offered.
    pub offered_rps: f64,
    /// Replies per second received (after the warm-up).
    pub achieved_rps: f64,
    /// p99, lost requests counted as late as they waited, ns (0 when the
    /// point has neither samples nor lost requests: shown as "–").
    pub p99_ns: u64,
    /// The SLO's percentile, counted the same way, ns (0 likewise).
    pub slo_percentile_ns: u64,
    /// The percentile is a lower bound (it falls on a lost request).
    pub at_least: bool,
    /// Requests answered after the warm-up.
    pub samples: usize,
    /// Requests never answered.
    pub lost: u64,
    /// Longest floor gap of any CPU during the point, ns.
    pub floor_max_gap_ns: u64,
    /// Earlier attempts of this point, set aside for a floor gap above
    /// `max_gap_ns` (their gap and p99, ns).
    pub set_aside: Vec<SetAside>,
}

/// The curve of one distribution.
#[derive(Clone, Debug, Serialize)]
pub struct Curve {
    /// The distribution.
    pub distribution: Shape,
    /// In load order.
    pub points: Vec<CurvePoint>,
    /// The throughput at which the SLO breaks, requests/s, over the points
    /// with a percentile; `None` when no point has one.
    pub slo_violating_rps: Option<f64>,
    /// False when no point broke the SLO (the value is then the last
    /// point's throughput: a lower bound).
    pub crossed: bool,
}

/// One stepped run of one controller.
#[derive(Clone, Debug, Serialize)]
pub struct ControllerRun {
    /// `none`, `aiad` or `default`.
    pub name: String,
    /// The distribution.
    pub distribution: Shape,
    /// One row per second.
    pub seconds: Vec<Second>,
    /// The SLO's percentile over all requests of the settled overload
    /// seconds, ns (a lower bound if `settled_at_least`).
    pub settled_percentile_ns: Option<u64>,
    /// `settled_percentile_ns` falls on a lost request.
    pub settled_at_least: bool,
    /// Largest per-second SLO percentile over the SLO's bound; `None` when
    /// no second has a request.
    pub overshoot: Option<f64>,
    /// Requests the router's admission control refused.
    pub admission_drops: u64,
    /// Share of the run the busiest CPU's floor probe was held back.
    pub floor_stolen: f64,
}

/// The report.
#[derive(Clone, Debug, Serialize)]
pub struct SvenReport {
    /// The settings.
    pub config: SvenBenchConfig,
    /// The SLO, as `pQ=DURATION`.
    pub slo: String,
    /// Its latency bound, ns.
    pub slo_ns: u64,
    /// Workers / S̄, requests/s.
    pub capacity_rps: f64,
    /// The SLO-violating throughput per distribution, requests/s.
    pub slo_violating_rps: BTreeMap<String, f64>,
    /// The curves without control.
    pub curves: Vec<Curve>,
    /// The stepped runs.
    pub controllers: Vec<ControllerRun>,
    /// The targets on this run.
    pub targets: Vec<Target>,
    /// Worst floor over all runs: share stolen from a CPU.
    pub floor_stolen_max: f64,
    /// Wall time of the bench, s.
    pub duration_s: f64,
}

const LO: Ipv4Addr = Ipv4Addr::LOCALHOST;
const S: u64 = 1_000_000_000;
/// How long the client waits for replies after its last send.
const DRAIN_NS: u64 = 2 * S;

impl SvenBenchConfig {
    /// The SLO used: the configured one, or p99 = 30·S̄.
    pub fn slo(&self) -> Slo {
        self.slo.unwrap_or(Slo {
            quantile: 0.99,
            latency_ns: 30 * self.service_ns,
        })
    }

    /// Workers / S̄, requests/s.
    pub fn capacity_rps(&self) -> f64 {
        self.workers as f64 * 1e9 / self.service_ns as f64
    }

    /// The load of each second of the stepped run.
    pub fn loads_per_second(&self) -> Vec<f64> {
        self.steps
            .iter()
            .flat_map(|s| std::iter::repeat(s.load).take(s.seconds as usize))
            .collect()
    }

    fn validate(&self) -> Result<(), SvenBenchError> {
        let bad = |m: String| Err(SvenBenchError::Config(m));
        if !(1..=64).contains(&self.workers) {
            return bad(format!("--workers must be 1..=64, got {}", self.workers));
        }
        if !(10_000..=100_000_000).contains(&self.service_ns) {
            return bad("--service must be between 10µs and 100ms".into());
        }
        if self.capacity_rps() * 1.5 > 200_000.0 {
            return bad(format!(
                "capacity {:.0} req/s is beyond what one client and router here can offer; fewer --workers or a longer --service",
                self.capacity_rps()
            ));
        }
        if self.distributions.is_empty() {
            return bad("--distributions is empty".into());
        }
        if self.curve_loads.iter().any(|l| !(*l > 0.0 && *l <= 1.5)) {
            return bad(format!(
                "--curve-loads must each be in (0, 1.5], got {:?}",
                self.curve_loads
            ));
        }
        if !self.curve_loads.windows(2).all(|w| w[0] < w[1]) {
            return bad("--curve-loads must increase".into());
        }
        if !(self.curve_seconds >= 1.0 && self.curve_seconds <= 600.0) {
            return bad(format!(
                "--curve-seconds must be in [1, 600], got {}",
                self.curve_seconds
            ));
        }
        if self
            .steps
            .iter()
            .any(|s| !(s.load > 0.0 && s.load <= 3.0) || s.seconds == 0)
        {
            return bad(format!(
                "--steps: each load in (0, 3] for at least 1 s, got {:?}",
                self.steps
            ));
        }
        let total: u32 = self.steps.iter().map(|s| s.seconds).sum();
        if self.controllers.is_empty() != self.steps.is_empty() || total > 3600 {
            return bad("--steps and --controllers go together (at most an hour of steps)".into());
        }
        if !(1_000_000..=1_000_000_000).contains(&self.period_ns) {
            return bad("--period must be between 1ms and 1s".into());
        }
        if self.retries > 10 {
            return bad(format!(
                "--retries must be at most 10, got {}",
                self.retries
            ));
        }
        Ok(())
    }
}

/// A fresh server (and router with `admission`) for one run.
struct Rig {
    server: Server,
    router: RouterThread,
    addr: SocketAddrV4,
}

impl Rig {
    fn start(
        cfg: &SvenBenchConfig,
        shape: Shape,
        admission: Option<AdmissionConfig>,
        seed: u64,
    ) -> Result<Rig, SvenBenchError> {
        let addr = free_port()?;
        let dist = shape.dist(cfg.service_ns);
        let sc = ServeConfig {
            workers: cfg.workers,
            transport: Transport::R2p2,
            seed,
            feedback_to: Some(addr),
            ..ServeConfig::synthetic(SocketAddrV4::new(LO, 0), dist, cfg.workers)
        };
        let server = Server::start(&sc).map_err(|e| SvenBenchError::Start {
            what: "synthetic R2P2 server",
            message: e.to_string(),
        })?;
        let router = RouterThread::start(
            addr,
            RouterConfig {
                seed,
                admission,
                ..RouterConfig::new(server.addrs().to_vec(), Policy::Random)
            },
        )?;
        Ok(Rig {
            server,
            router,
            addr,
        })
    }

    fn client(&self, rate: f64, secs: u64, seed: u64) -> ClientConfig {
        ClientConfig {
            transport: Transport::R2p2,
            app: App::Synthetic,
            rate,
            arrival: Arrival::Poisson,
            agent: AgentKind::Symmetric,
            size: 64,
            duration_ns: secs,
            max_duration_ns: secs,
            warmup_ns: Some(0),
            seed,
            drain_ns: DRAIN_NS,
            spin_ns: 10_000,
            ..ClientConfig::new(self.addr)
        }
    }
}

/// Longest floor gap per second of a run that started at `start_rt`
/// (realtime, ns), over every CPU.
fn gaps_per_second(
    reports: &[xlane_host::floor::FloorReport],
    start_rt: u64,
    n: usize,
) -> Vec<u64> {
    let mut out = vec![0u64; n];
    for r in reports {
        for g in &r.gaps {
            let Some(t) = g.start_realtime_ns.checked_sub(start_rt) else {
                continue;
            };
            if let Some(v) = out.get_mut((t / S) as usize) {
                *v = (*v).max(g.len_ns);
            }
        }
    }
    out
}

fn stolen_max(f: &crate::interference::Floor) -> f64 {
    f.cores
        .iter()
        .map(|c| c.stolen_fraction)
        .fold(0.0, f64::max)
}

/// One curve point: no admission control, one load.
fn run_curve_point(
    cfg: &SvenBenchConfig,
    shape: Shape,
    load: f64,
    seed: u64,
    cores: &Cores,
) -> Result<(CurvePoint, f64), SvenBenchError> {
    let rig = Rig::start(cfg, shape, None, seed)?;
    let secs = (cfg.curve_seconds * 1e9) as u64;
    let warmup = S / 2;
    let rate = load * cfg.capacity_rps();
    let client = ClientConfig {
        warmup_ns: Some(warmup),
        ..rig.client(rate, secs, seed)
    };
    let probes = FloorSet::start(cores, secs + DRAIN_NS + S).ok();
    let out = xlane_lancet::run_traced(&client);
    let floor = probes.map(|p| p.stop().0);
    rig.router.stop();
    rig.server.stop();
    let out = out.map_err(|e| SvenBenchError::Start {
        what: "lancet r2p2 agent",
        message: e.to_string(),
    })?;
    let mut lat: Vec<u64> = out.samples.iter().map(|s| s.latency_ns).collect();
    lat.sort_unstable();
    // Lost requests waited at least from the end of sending to the end of
    // the drain.
    let lost = out.report.counts.lost;
    let slo = cfg.slo();
    let q = |q: f64| seconds::quantile_with_lost(&lat, lost, DRAIN_NS, q).unwrap_or((0, false));
    let (p99, a) = q(0.99);
    let (ps, b) = q(slo.quantile);
    // validate(): curve_seconds ≥ 1, so secs ≥ 1 s > the ½ s warm-up.
    let window_s = (secs - warmup) as f64 / 1e9;
    Ok((
        CurvePoint {
            load,
            offered_rps: rate,
            achieved_rps: lat.len() as f64 / window_s,
            p99_ns: p99,
            slo_percentile_ns: ps,
            at_least: a || b,
            samples: lat.len(),
            lost,
            floor_max_gap_ns: floor.as_ref().map_or(0, |f| {
                f.cores.iter().map(|c| c.max_gap_ns).max().unwrap_or(0)
            }),
            set_aside: Vec::new(),
        },
        floor.as_ref().map_or(f64::NAN, stolen_max),
    ))
}

/// One stepped run of one controller.
fn run_steps(
    cfg: &SvenBenchConfig,
    shape: Shape,
    control: Control,
    seed: u64,
    cores: &Cores,
) -> Result<(ControllerRun, Analysis), SvenBenchError> {
    let slo = cfg.slo();
    let admission = control.controller().map(|controller| AdmissionConfig {
        period_ns: cfg.period_ns,
        ..AdmissionConfig::new(slo, controller)
    });
    let rig = Rig::start(cfg, shape, admission, seed)?;
    let cap = cfg.capacity_rps();
    let total_s: u64 = cfg.steps.iter().map(|s| u64::from(s.seconds)).sum();
    let mut at = 0u64;
    let mut rate_steps = Vec::new();
    for s in &cfg.steps {
        if at > 0 {
            rate_steps.push(RateStep {
                at_ns: at * S,
                rate: s.load * cap,
            });
        }
        at += u64::from(s.seconds);
    }
    let client = ClientConfig {
        rate_steps,
        timeline_ns: S,
        ..rig.client(cfg.steps[0].load * cap, total_s * S, seed)
    };
    let probes = FloorSet::start(cores, (total_s + 4) * S).ok();
    let out = xlane_lancet::run_traced(&client);
    let floor = probes.map(|p| p.stop());
    let counts = rig.router.stop();
    rig.server.stop();
    let out = out.map_err(|e| SvenBenchError::Start {
        what: "lancet r2p2 agent",
        message: e.to_string(),
    })?;
    let samples: Vec<(u64, u64)> = out
        .samples
        .iter()
        .map(|s| (s.sched_ns, s.latency_ns))
        .collect();
    let loads = cfg.loads_per_second();
    let gaps = floor.as_ref().map_or_else(Vec::new, |(_, r)| {
        gaps_per_second(r, out.start_realtime_ns, loads.len())
    });
    let sent_until = (out.report.elapsed_s * 1e9) as u64;
    let a = analyze(&RunData {
        timeline: &out.timeline,
        samples: &samples,
        loads: &loads,
        slo,
        gave_up_ns: sent_until + DRAIN_NS,
        floor_gaps: &gaps,
        settle_s: cfg.settle_seconds,
    });
    let run = ControllerRun {
        name: control.name().into(),
        distribution: shape,
        seconds: a.seconds.clone(),
        settled_percentile_ns: a.settled_percentile.map(|p| p.0),
        settled_at_least: a.settled_percentile.is_some_and(|p| p.1),
        overshoot: overshoot(&a, slo),
        admission_drops: counts.admission_drops,
        floor_stolen: floor.as_ref().map_or(f64::NAN, |(f, _)| stolen_max(f)),
    };
    Ok((run, a))
}

impl CurvePoint {
    /// Whether the point has a percentile: a request was answered or lost.
    pub fn has_percentile(&self) -> bool {
        self.samples > 0 || self.lost > 0
    }
}

/// The curve of `shape` from its points: the SLO-violating throughput over
/// the points that have a percentile (a point without any request says
/// nothing of the SLO; its 0 would read as within it).
fn curve_of(shape: Shape, points: Vec<CurvePoint>, slo: Slo) -> Curve {
    let at: Vec<CurveAt> = points
        .iter()
        .filter(|p| p.has_percentile())
        .map(|p| CurveAt {
            achieved_rps: p.achieved_rps,
            percentile_ns: p.slo_percentile_ns,
        })
        .collect();
    let v = slo_violating_rps(&at, slo.latency_ns);
    Curve {
        distribution: shape,
        points,
        slo_violating_rps: v.map(|v| v.0),
        crossed: v.is_some_and(|v| v.1),
    }
}

/// Runs the bench; `log` gets a line per point and run.
pub fn run(cfg: &SvenBenchConfig, log: &mut dyn FnMut(&str)) -> Result<SvenReport, SvenBenchError> {
    cfg.validate()?;
    let started = std::time::Instant::now();
    let ncpu = Cores::online();
    // online() is at least 1.
    let cores = Cores::new(ncpu, ncpu - 1).map_err(SvenBenchError::Config)?;
    let slo = cfg.slo();
    let cap = cfg.capacity_rps();
    let total_s: u32 = cfg.steps.iter().map(|s| s.seconds).sum();
    log(&format!(
        "{} workers, mean service {}, capacity {cap:.0} req/s, SLO {slo}; per distribution: {} curve points × {} s, {} controllers × {total_s} s of steps",
        cfg.workers,
        crate::table::fmt_ns(cfg.service_ns),
        cfg.curve_loads.len(),
        cfg.curve_seconds,
        cfg.controllers.len(),
    ));
    let mut curves = Vec::new();
    let mut controllers = Vec::new();
    let mut analyses: Vec<(Shape, Control, Analysis)> = Vec::new();
    let mut floor_max = 0.0f64;
    let mut violating = BTreeMap::new();
    for (di, &shape) in cfg.distributions.iter().enumerate() {
        let mut points = Vec::new();
        for (li, &load) in cfg.curve_loads.iter().enumerate() {
            let seed = cfg.seed.wrapping_add((di * 100 + li) as u64);
            let ((mut p, stolen), aside) = least_gap_of(
                cfg.max_gap_ns,
                cfg.retries,
                &format!("{} curve {load:.2}", shape.name()),
                |(p, _): &(CurvePoint, f64)| (p.floor_max_gap_ns, p.p99_ns),
                || run_curve_point(cfg, shape, load, seed, &cores),
                log,
            )?;
            p.set_aside = aside;
            if stolen.is_finite() {
                floor_max = floor_max.max(stolen);
            }
            log(&format!(
                "{} curve {load:.2}: {:.0}/s achieved, p99 {}{}, lost {}, floor gap {}",
                shape.name(),
                p.achieved_rps,
                if p.at_least { "≥ " } else { "" },
                crate::table::fmt_ns(p.p99_ns),
                p.lost,
                crate::table::fmt_ns(p.floor_max_gap_ns)
            ));
            points.push(p);
        }
        let curve = curve_of(shape, points, slo);
        match curve.slo_violating_rps {
            Some(v) => {
                log(&format!(
                    "{}: SLO-violating throughput {}{v:.0}/s ({:.2} of capacity)",
                    shape.name(),
                    if curve.crossed { "" } else { "≥ " },
                    v / cap
                ));
                violating.insert(shape.name().to_string(), v);
            }
            None if curve.points.is_empty() => {}
            None => log(&format!(
                "{}: no curve point has a sample: no SLO-violating throughput",
                shape.name()
            )),
        }
        if !curve.points.is_empty() {
            curves.push(curve);
        }
        // The controllers' order rotates from distribution to distribution.
        let n = cfg.controllers.len();
        for k in 0..n {
            let control = cfg.controllers[(k + di) % n];
            let seed = cfg.seed.wrapping_add((di * 100 + 50) as u64);
            let (r, a) = run_steps(cfg, shape, control, seed, &cores)?;
            if r.floor_stolen.is_finite() {
                floor_max = floor_max.max(r.floor_stolen);
            }
            let settled: Vec<&Second> = r.seconds.iter().filter(|s| s.settled).collect();
            let goodput =
                settled.iter().map(|s| s.goodput_rps).sum::<f64>() / settled.len().max(1) as f64;
            log(&format!(
                "{} {}: overshoot {}× SLO, settled overload: percentile {}{}, goodput {goodput:.0}/s, admission drops {}",
                shape.name(),
                r.name,
                r.overshoot.map_or("-".into(), |o| format!("{o:.2}")),
                if r.settled_at_least { "≥ " } else { "" },
                r.settled_percentile_ns.map_or("-".into(), crate::table::fmt_ns),
                r.admission_drops
            ));
            controllers.push(r);
            analyses.push((shape, control, a));
        }
    }
    let mut targets = Vec::new();
    for &shape in &cfg.distributions {
        let find = |c: Control| {
            analyses
                .iter()
                .find(|(s, k, _)| *s == shape && *k == c)
                .map(|x| &x.2)
        };
        targets.extend(seconds::targets(
            &seconds::DistResult {
                name: shape.name(),
                slo_violating_rps: violating.get(shape.name()).copied(),
                none: find(Control::None),
                aiad: find(Control::Aiad),
                default: find(Control::Default),
            },
            slo,
        ));
    }
    Ok(SvenReport {
        config: cfg.clone(),
        slo: slo.to_string(),
        slo_ns: slo.latency_ns,
        capacity_rps: cap,
        slo_violating_rps: violating,
        curves,
        controllers,
        targets,
        floor_stolen_max: floor_max,
        duration_s: started.elapsed().as_secs_f64(),
    })
}

/// The report as text: the curves, a per-second table per stepped run,
/// and the targets.
pub fn render(r: &SvenReport) -> String {
    use std::fmt::Write;
    let f = crate::table::fmt_ns;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "SVEN on 127.0.0.1: {} workers behind `random`, mean service {}, capacity {:.0} req/s, SLO {}; worst floor {:.2} % of a CPU; {:.0} s",
        r.config.workers,
        f(r.config.service_ns),
        r.capacity_rps,
        r.slo,
        r.floor_stolen_max * 100.0,
        r.duration_s
    );
    for c in &r.curves {
        let v = match c.slo_violating_rps {
            Some(v) => format!(
                "{}{v:.0}/s ({:.2} of capacity)",
                if c.crossed { "" } else { "≥ " },
                v / r.capacity_rps
            ),
            None => "– (no point has a sample)".into(),
        };
        let _ = writeln!(
            s,
            "\n{} without control: SLO-violating throughput {v}",
            c.distribution.name()
        );
        let _ = writeln!(
            s,
            "  load  offered/s  achieved/s         p99   lost  floor gap"
        );
        for p in &c.points {
            let _ = writeln!(
                s,
                "  {:.2}  {:>9.0}  {:>10.0}  {:>10}  {:>5}  {:>9}{}",
                p.load,
                p.offered_rps,
                p.achieved_rps,
                if p.has_percentile() {
                    format!("{}{}", if p.at_least { "≥" } else { "" }, f(p.p99_ns))
                } else {
                    "–".into()
                },
                p.lost,
                f(p.floor_max_gap_ns),
                crate::rpc_bench::set_aside_note(&p.set_aside)
            );
        }
    }
    for c in &r.controllers {
        let _ = writeln!(
            s,
            "\n{} {}: overshoot {}, admission drops {}",
            c.distribution.name(),
            c.name,
            c.overshoot
                .map_or("– (no second with a request)".into(), |o| format!(
                    "{o:.2}× SLO"
                )),
            c.admission_drops
        );
        let _ = writeln!(
            s,
            "     t  load  offered/s  achieved/s  goodput/s   drop         p99   lost  floor gap"
        );
        for x in &c.seconds {
            let _ = writeln!(
                s,
                "  {}{:>3}  {:.2}  {:>9.0}  {:>10.0}  {:>9.0}  {:>4.0} %  {:>10}  {:>5}  {:>9}",
                if x.settled { "*" } else { " " },
                x.t_s,
                x.load,
                x.offered_rps,
                x.achieved_rps,
                x.goodput_rps,
                x.drop_rate * 100.0,
                if x.has_percentile() {
                    format!("{}{}", if x.at_least { "≥" } else { "" }, f(x.p99_ns))
                } else {
                    "–".into()
                },
                x.lost,
                f(x.floor_max_gap_ns)
            );
        }
    }
    let _ = writeln!(
        s,
        "\n(* a settled overload second: the targets look at these)"
    );
    let _ = writeln!(s, "\ntargets:");
    for t in &r.targets {
        let v = match t.holds {
            Some(true) => "HOLDS",
            Some(false) => "FAILS",
            None => "n/a",
        };
        let _ = writeln!(s, "  {v:<5}  {}: {}", t.claim, t.detail);
    }
    s
}

#[cfg(test)]
mod tests;
