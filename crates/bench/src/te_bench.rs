//! `xlane bench te`: the controller at datacenter scale, simulated.
//!
//! No testbed: the controller's sans-IO core ([`xlane_ctl::Controller`],
//! the allocator behind it) runs on a topology generated in memory
//! ([`xlane_te::gen`]: `fat-tree:K`, `leaf-spine:L,H,S`) and takes
//! requests as a deployment sends them, each host in turn, seeded:
//!
//! - an X-FD tree (sub-lane 0, σ 100 B, 1 ms) to the other members of its
//!   group of five hosts, one host per rack apart;
//! - replication tunnels (sub-lane 1, σ 300 B, 1 ms) to two to four of its
//!   group's members;
//! - QJump-level tunnels (sub-lane 1, σ 1500 B, 10 ms) to a random host,
//!   from one host in ten;
//! - churn, one operation in `1/churn`: a release, a change (new σ and
//!   period), or a host restart (all its tunnels released, asked for
//!   again).
//!
//! At each point (10³, 10⁴, 10⁵ tunnels, up to `--tunnels`) it reports the
//! time of the last requests before it (p50, p99, max), the process's
//! resident memory and the requests refused so far by reason. Then: the
//! time to fill, the time to replay the journal (every record the
//! controller would have written, through `Controller::recover`, which
//! re-admits every grant on its recorded tree), and the bounds' tightness: every tunnel's
//! announced range against a recomputation of the whole allocation from
//! scratch (`Allocator::verify`; equal by construction, checked).

use crate::plot::{axis_ns, de, draw_legend, font, palette, title_area, write_both, Figure};
use plotters::coord::Shift;
use plotters::prelude::*;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;
use xlane_ctl::core::Policy;
use xlane_ctl::proto::{ClientMsg, ServerMsg, TunnelId};
use xlane_ctl::store::Record;
use xlane_ctl::{Controller, Principal};
use xlane_lancet::rng::Rng;
use xlane_te::alloc::TeConfig;
use xlane_te::topology::NodeKind;

/// What `xlane bench te` runs.
#[derive(Debug, Clone, Serialize)]
pub struct TeBenchConfig {
    /// `fat-tree:K` or `leaf-spine:L,H,S`.
    pub topology: String,
    /// Tunnels to reach.
    pub tunnels: usize,
    /// Points to report at (tunnel counts, increasing; those above
    /// `tunnels` are left out).
    pub points: Vec<usize>,
    /// Requests timed before each point.
    pub window: usize,
    /// One churn operation per this many requests (0: none).
    pub churn: u64,
    /// Seed of the workload.
    pub seed: u64,
}

impl Default for TeBenchConfig {
    fn default() -> Self {
        TeBenchConfig {
            topology: "fat-tree:32".into(),
            tunnels: 100_000,
            points: vec![1_000, 10_000, 100_000],
            window: 1_000,
            churn: 20,
            seed: 1,
        }
    }
}

/// One point of the fill.
#[derive(Debug, Clone, Serialize)]
pub struct TePoint {
    /// Tunnels held when it was taken.
    pub tunnels: usize,
    /// Requests timed (the last ones before the point).
    pub requests: usize,
    /// Their median time, ns.
    pub p50_ns: u64,
    /// Their 99th percentile, ns.
    pub p99_ns: u64,
    /// Their longest, ns.
    pub max_ns: u64,
    /// How many of them asked for multicast trees.
    pub multicast: usize,
    /// 99th percentile of the unicast ones, ns (0: none).
    pub unicast_p99_ns: u64,
    /// 99th percentile of the multicast ones, ns (0: none).
    pub multicast_p99_ns: u64,
    /// Resident memory of the process, bytes.
    pub rss_bytes: u64,
    /// Seconds since the fill began.
    pub at_s: f64,
}

/// What the run measured.
#[derive(Debug, Clone, Serialize)]
pub struct TeReport {
    /// The configuration.
    pub config: TeBenchConfig,
    /// Hosts, switches, directed links of the topology.
    pub hosts: usize,
    /// Switches.
    pub switches: usize,
    /// Directed links.
    pub links: usize,
    /// Time to generate and validate the topology, s.
    pub topology_s: f64,
    /// The points.
    pub points: Vec<TePoint>,
    /// Time to reach `tunnels`, s (`None`: not reached).
    pub fill_s: Option<f64>,
    /// Tunnels held at the end.
    pub tunnels: usize,
    /// Requests made, granted, refused; releases, changes, restarts.
    pub requests: u64,
    /// Requests granted.
    pub granted: u64,
    /// Refused requests by reason (the controller's refusal code).
    pub refused: BTreeMap<String, u64>,
    /// Releases of the churn.
    pub releases: u64,
    /// Changes of the churn (granted or refused).
    pub changes: u64,
    /// Host restarts of the churn.
    pub restarts: u64,
    /// Journal records the run produced.
    pub journal_records: usize,
    /// Time to replay them into a fresh controller, s.
    pub replay_s: f64,
    /// Whether the replayed controller holds the same state.
    pub replay_same: bool,
    /// Tunnels whose announced range was checked against a recomputation
    /// from scratch.
    pub bounds_checked: usize,
    /// Whether every announced range equals the recomputed one.
    pub bounds_equal: bool,
    /// Time of that recomputation, s.
    pub verify_s: f64,
}

/// Why the bench could not run.
#[derive(Debug, thiserror::Error)]
pub enum TeBenchError {
    /// A bad configuration.
    #[error("{0}")]
    Config(String),
    /// The topology spec.
    #[error(transparent)]
    Spec(#[from] xlane_te::gen::SpecError),
    /// Replaying the journal failed (a bug).
    #[error("journal replay: {0}")]
    Replay(String),
}

/// Resident memory of this process, bytes (0 if unknown).
pub fn rss_bytes() -> u64 {
    let pages = std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .unwrap_or(0);
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    pages * page.max(0) as u64
}

/// The nearest-rank percentile of `sorted`, 0 for none.
fn percentile(sorted: &[u64], q: f64) -> u64 {
    xlane_stats::percentile(sorted, q).unwrap_or(0)
}

/// The run: the controller, the hosts, what they hold.
struct Sim {
    ctl: Controller,
    hosts: Vec<String>,
    /// Tunnels each host holds (by controller id).
    held: Vec<Vec<TunnelId>>,
    records: Vec<Record>,
    rng: Rng,
    refused: BTreeMap<String, u64>,
    requests: u64,
    granted: u64,
    /// Times of requests, ns, in order, and whether each was multicast.
    times: Vec<(u64, bool)>,
    now_ns: u64,
}

impl Sim {
    fn call(&mut self, host: usize, msg: &ClientMsg) -> Option<ServerMsg> {
        self.now_ns += 1_000_000;
        let who = Principal::Host(self.hosts[host].clone());
        let out = self.ctl.handle(&who, msg, self.now_ns);
        self.records.extend(out.records);
        out.reply
    }

    fn request(&mut self, host: usize, to: &[usize], load: u32, period_ns: u64, sublane: u8) {
        let msg = ClientMsg::RequestBandwidth {
            sender: self.hosts[host].clone(),
            receivers: to.iter().map(|&r| self.hosts[r].clone()).collect(),
            load_bytes: load,
            period_ns,
            sublane,
        };
        let t = Instant::now();
        let reply = self.call(host, &msg);
        self.times
            .push((t.elapsed().as_nanos() as u64, to.len() > 1));
        self.requests += 1;
        match reply {
            Some(ServerMsg::Granted { tunnel, .. }) => {
                self.granted += 1;
                self.held[host].push(tunnel);
            }
            Some(ServerMsg::Refused { code, .. }) => {
                *self.refused.entry(code.name().to_string()).or_default() += 1;
            }
            other => {
                *self
                    .refused
                    .entry(format!("unexpected reply {other:?}"))
                    .or_default() += 1;
            }
        }
    }

    fn pick(&mut self, n: usize) -> usize {
        (self.rng.next_u64() % n as u64) as usize
    }

    /// The members of `h`'s group of five: one host per `stride` apart.
    fn group(&self, h: usize, stride: usize) -> Vec<usize> {
        let n = self.hosts.len();
        (1..5).map(|i| (h + i * stride) % n).collect()
    }

    /// One host's turn: its next service's tunnels.
    fn turn(&mut self, h: usize, round: u64, stride: usize) {
        let group = self.group(h, stride);
        match round % 3 {
            0 => self.request(h, &group, 100, 1_000_000, 0),
            1 => {
                let peers = 2 + self.pick(3);
                for &p in group.iter().take(peers) {
                    self.request(h, &[p], 300, 1_000_000, 1);
                }
            }
            _ => {
                if self.pick(10) == 0 {
                    let n = self.hosts.len();
                    let mut to = self.pick(n);
                    if to == h {
                        to = (to + 1) % n;
                    }
                    self.request(h, &[to], 1500, 10_000_000, 1);
                }
            }
        }
    }

    /// One churn operation.
    fn churn(&mut self, counts: &mut (u64, u64, u64)) {
        let n = self.hosts.len();
        let h = self.pick(n);
        if self.held[h].is_empty() {
            return;
        }
        let k = self.pick(self.held[h].len());
        match self.pick(10) {
            0..=4 => {
                let t = self.held[h].swap_remove(k);
                self.call(h, &ClientMsg::ReleaseBandwidth { tunnel: t });
                counts.0 += 1;
            }
            5..=8 => {
                let t = self.held[h][k];
                let load = 100 + self.pick(1400) as u32;
                let period = 1_000_000 * (1 + self.pick(10) as u64);
                self.call(
                    h,
                    &ClientMsg::ChangeBandwidth {
                        tunnel: t,
                        load_bytes: load,
                        period_ns: period,
                    },
                );
                counts.1 += 1;
            }
            _ => {
                // A restart: everything released, then asked for again.
                let gone = std::mem::take(&mut self.held[h]);
                for t in &gone {
                    self.call(h, &ClientMsg::ReleaseBandwidth { tunnel: *t });
                }
                let stride = self.stride();
                for round in 0..3 {
                    self.turn(h, round, stride);
                }
                counts.2 += 1;
            }
        }
    }

    fn stride(&self) -> usize {
        (self.hosts.len() / 5).max(1)
    }

    fn held(&self) -> usize {
        self.held.iter().map(Vec::len).sum()
    }
}

/// Runs the bench; `progress` gets a line per point.
pub fn run(cfg: &TeBenchConfig, progress: &mut dyn FnMut(&str)) -> Result<TeReport, TeBenchError> {
    if cfg.tunnels == 0 {
        return Err(TeBenchError::Config("--tunnels must be at least 1".into()));
    }
    if cfg.window == 0 {
        return Err(TeBenchError::Config("--window must be at least 1".into()));
    }
    let t0 = Instant::now();
    let topo = xlane_te::gen::from_spec(&cfg.topology)?;
    let topology_s = t0.elapsed().as_secs_f64();
    let hosts: Vec<String> = topo
        .nodes()
        .iter()
        .filter(|n| n.kind == NodeKind::Host)
        .map(|n| n.name.clone())
        .collect();
    let (switches, links) = (topo.nodes().len() - hosts.len(), topo.links().len());
    progress(&format!(
        "{}: {} hosts, {switches} switches, {links} links (built in {topology_s:.2} s)",
        cfg.topology,
        hosts.len()
    ));
    let (te, policy) = (TeConfig::default(), Policy::default());
    let mut sim = Sim {
        ctl: Controller::new(topo.clone(), te.clone(), policy.clone()),
        held: vec![Vec::new(); hosts.len()],
        hosts,
        records: Vec::new(),
        rng: Rng::new(cfg.seed),
        refused: BTreeMap::new(),
        requests: 0,
        granted: 0,
        times: Vec::new(),
        now_ns: 0,
    };
    let mut points: Vec<usize> = cfg
        .points
        .iter()
        .copied()
        .filter(|&p| p <= cfg.tunnels)
        .collect();
    points.sort_unstable();
    points.dedup();
    let mut out = Vec::new();
    let mut counts = (0u64, 0u64, 0u64);
    let stride = sim.stride();
    let start = Instant::now();
    let mut fill_s = None;
    let mut round = 0u64;
    let mut idle_rounds = 0;
    'fill: loop {
        let before = sim.held();
        let n = sim.hosts.len();
        for h in 0..n {
            sim.turn(h, round, stride);
            if cfg.churn > 0 && sim.pick(cfg.churn as usize) == 0 {
                sim.churn(&mut counts);
            }
            let held = sim.held();
            while points.first().is_some_and(|&p| held >= p) {
                let p = points.remove(0);
                let from = sim.times.len().saturating_sub(cfg.window);
                let win = &sim.times[from..];
                let sorted = |multi: Option<bool>| {
                    let mut v: Vec<u64> = win
                        .iter()
                        .filter(|(_, m)| multi.map_or(true, |x| x == *m))
                        .map(|(t, _)| *t)
                        .collect();
                    v.sort_unstable();
                    v
                };
                let w = sorted(None);
                let pt = TePoint {
                    tunnels: held,
                    requests: w.len(),
                    p50_ns: percentile(&w, 0.50),
                    p99_ns: percentile(&w, 0.99),
                    max_ns: w.last().copied().unwrap_or(0),
                    multicast: win.iter().filter(|(_, m)| *m).count(),
                    unicast_p99_ns: percentile(&sorted(Some(false)), 0.99),
                    multicast_p99_ns: percentile(&sorted(Some(true)), 0.99),
                    rss_bytes: rss_bytes(),
                    at_s: start.elapsed().as_secs_f64(),
                };
                progress(&format!(
                    "{p} tunnels: request p50 {} p99 {} max {} ({} multicast: p99 {}; unicast p99 {}), {} MB resident, {:.1} s",
                    axis_ns(pt.p50_ns as f64),
                    axis_ns(pt.p99_ns as f64),
                    axis_ns(pt.max_ns as f64),
                    pt.multicast,
                    fmt_opt(pt.multicast_p99_ns),
                    fmt_opt(pt.unicast_p99_ns),
                    pt.rss_bytes >> 20,
                    pt.at_s
                ));
                out.push(pt);
            }
            if held >= cfg.tunnels {
                fill_s = Some(start.elapsed().as_secs_f64());
                break 'fill;
            }
        }
        round += 1;
        // Three rounds without growth: the fabric is full for this mix.
        if sim.held() <= before {
            idle_rounds += 1;
            if idle_rounds >= 3 {
                progress(&format!(
                    "the fabric took no more tunnels at {} (refusals: {:?})",
                    sim.held(),
                    sim.refused
                ));
                break;
            }
        } else {
            idle_rounds = 0;
        }
    }
    let tunnels = sim.held();
    let t = Instant::now();
    let bounds = sim.ctl.allocator().verify();
    let verify_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let replayed = Controller::recover(topo, te, policy, &sim.records)
        .map_err(|e| TeBenchError::Replay(e.to_string()))?;
    let replay_s = t.elapsed().as_secs_f64();
    let replay_same = replayed.same_state(&sim.ctl).is_ok();
    progress(&format!(
        "journal of {} records replayed in {replay_s:.2} s; bounds recomputed in {verify_s:.2} s",
        sim.records.len()
    ));
    Ok(TeReport {
        config: cfg.clone(),
        hosts: sim.hosts.len(),
        switches,
        links,
        topology_s,
        points: out,
        fill_s,
        tunnels,
        requests: sim.requests,
        granted: sim.granted,
        refused: sim.refused,
        releases: counts.0,
        changes: counts.1,
        restarts: counts.2,
        journal_records: sim.records.len(),
        replay_s,
        replay_same,
        bounds_checked: sim.ctl.allocator().tunnels().count(),
        bounds_equal: bounds.is_ok(),
        verify_s,
    })
}

/// A time, or `-` for none.
fn fmt_opt(ns: u64) -> String {
    if ns == 0 {
        "-".to_string()
    } else {
        axis_ns(ns as f64)
    }
}

/// The report as a table.
pub fn render(r: &TeReport) -> String {
    let mut s = format!(
        "xlane bench te: {} ({} hosts, {} switches, {} links), seed {}\n\n",
        r.config.topology, r.hosts, r.switches, r.links, r.config.seed
    );
    s += "  tunnels   requests   p50        p99        max        multicast  p99 unicast  p99 multicast  resident\n";
    for p in &r.points {
        s += &format!(
            "  {:<9} {:<10} {:<10} {:<10} {:<10} {:<10} {:<12} {:<14} {} MB\n",
            p.tunnels,
            p.requests,
            fmt_opt(p.p50_ns),
            fmt_opt(p.p99_ns),
            fmt_opt(p.max_ns),
            p.multicast,
            fmt_opt(p.unicast_p99_ns),
            fmt_opt(p.multicast_p99_ns),
            p.rss_bytes >> 20
        );
    }
    s += &format!(
        "\nfill: {} tunnels in {}; {} requests, {} granted, refused {:?}\n",
        r.tunnels,
        r.fill_s
            .map(|f| format!("{f:.1} s"))
            .unwrap_or_else(|| "(not reached)".into()),
        r.requests,
        r.granted,
        r.refused
    );
    s += &format!(
        "churn: {} releases, {} changes, {} host restarts\n",
        r.releases, r.changes, r.restarts
    );
    s += &format!(
        "journal: {} records replayed in {:.2} s ({})\n",
        r.journal_records,
        r.replay_s,
        if r.replay_same {
            "same state"
        } else {
            "STATE DIFFERS"
        }
    );
    s += &format!(
        "bounds: {} tunnels' announced ranges {} a recomputation from scratch ({:.2} s)\n",
        r.bounds_checked,
        if r.bounds_equal {
            "equal"
        } else {
            "DIFFER FROM"
        },
        r.verify_s
    );
    s
}

/// A point of the plot: (tunnels, p99 unicast, p99 multicast, max), ns
/// (0: no request of that kind in the window).
type TimePoint = (f64, f64, f64, f64);

/// Which value of a point a line draws.
type Pick = fn(&TimePoint) -> f64;

struct TimeFigure {
    title: String,
    pts: Vec<TimePoint>,
}

/// Request time against tunnel count: `<stem>.png` and `<stem>.svg`.
pub fn plot(r: &TeReport, stem: &Path) -> Result<[PathBuf; 2], crate::plot::PlotError> {
    let fig = TimeFigure {
        title: format!(
            "xlane bench te: request time vs tunnels held, {} ({} hosts), last {} requests",
            r.config.topology, r.hosts, r.config.window
        ),
        pts: r
            .points
            .iter()
            .map(|p| {
                (
                    p.tunnels.max(1) as f64,
                    p.unicast_p99_ns as f64,
                    p.multicast_p99_ns as f64,
                    p.max_ns as f64,
                )
            })
            .collect(),
    };
    write_both(&fig, stem)
}

impl Figure for TimeFigure {
    fn size(&self) -> (u32, u32) {
        (1100, 650)
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String> {
        root.fill(&WHITE).map_err(de)?;
        let body = title_area(root, &self.title)?;
        let xmax = self.pts.iter().map(|p| p.0).fold(10.0, f64::max) * 2.0;
        let xmin = self.pts.iter().map(|p| p.0).fold(xmax, f64::min) / 2.0;
        // Times of 0 are windows without a request of that kind: no point,
        // and no part of the axis.
        let lo = self
            .pts
            .iter()
            .flat_map(|p| [p.1, p.2, p.3])
            .filter(|&v| v > 0.0)
            .fold(f64::INFINITY, f64::min);
        let hi = self.pts.iter().map(|p| p.3).fold(0.0, f64::max);
        let (lo, hi) = if hi > 0.0 && lo.is_finite() {
            (lo / 2.0, hi * 2.0)
        } else {
            (1e3, 1e6)
        };
        let mut chart = ChartBuilder::on(&body)
            .margin(20)
            .x_label_area_size(50)
            .y_label_area_size(90)
            .build_cartesian_2d((xmin.max(1.0)..xmax).log_scale(), (lo..hi).log_scale())
            .map_err(de)?;
        chart
            .configure_mesh()
            .x_desc("tunnels held (log scale)")
            .y_desc("request time (log scale)")
            .x_label_formatter(&|v| format!("{v:.0}"))
            .y_label_formatter(&|v| axis_ns(*v))
            .label_style(font(16.0))
            .axis_desc_style(font(18.0))
            .light_line_style(RGBColor(235, 235, 235))
            .draw()
            .map_err(de)?;
        // A window may hold no request of a kind (0): no point there.
        let lines: [(&str, Pick); 3] = [
            ("p99 unicast", |p| p.1),
            ("p99 multicast", |p| p.2),
            ("max, all", |p| p.3),
        ];
        for (i, (name, f)) in lines.into_iter().enumerate() {
            let c = palette(i);
            let pts: Vec<(f64, f64)> = self
                .pts
                .iter()
                .map(|p| (p.0, f(p)))
                .filter(|p| p.1 > 0.0)
                .collect();
            chart
                .draw_series(LineSeries::new(pts.iter().copied(), c.stroke_width(3)))
                .map_err(de)?
                .label(name)
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 24, y)], c.stroke_width(3))
                });
            chart
                .draw_series(pts.iter().map(|&p| Circle::new(p, 5, c.filled())))
                .map_err(de)?;
        }
        draw_legend(&mut chart, SeriesLabelPosition::UpperLeft, 16.0)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small fabric filled with churn: every point reported in order,
    /// the journal replays to the same state, the bounds equal a
    /// recomputation, and the plot is written.
    #[test]
    fn a_small_fabric_fills_replays_and_verifies() {
        let cfg = TeBenchConfig {
            topology: "fat-tree:4".into(),
            tunnels: 150,
            points: vec![10, 100, 150, 100_000],
            window: 50,
            churn: 5,
            seed: 7,
        };
        let r = run(&cfg, &mut |_| {}).unwrap();
        assert_eq!(r.hosts, 16);
        let at: Vec<usize> = r.points.iter().map(|p| p.tunnels).collect();
        assert!(
            at.len() <= 3 && at.windows(2).all(|w| w[0] <= w[1]),
            "{at:?}"
        );
        assert!(r
            .points
            .iter()
            .all(|p| p.p50_ns <= p.p99_ns && p.p99_ns <= p.max_ns));
        assert!(r.points.iter().all(|p| p.multicast <= p.requests));
        assert!(r
            .points
            .iter()
            .any(|p| p.multicast > 0 && p.multicast_p99_ns > 0));
        assert!(r.releases + r.changes + r.restarts > 0, "churn ran");
        assert!(r.replay_same, "the journal replays to the same state");
        assert!(r.bounds_equal);
        assert_eq!(r.bounds_checked, r.tunnels);
        assert!(r.granted > 0 && r.granted <= r.requests);
        let dir = std::env::temp_dir().join(format!("xlane-te-plot-{}", std::process::id()));
        let [png, svg] = plot(&r, &dir.join("te")).unwrap();
        assert!(png.exists() && svg.exists());
        let _ = std::fs::remove_dir_all(&dir);
        let text = render(&r);
        assert!(
            text.contains("same state") && text.contains("equal"),
            "{text}"
        );
    }

    /// A report with no point, and points whose window held no request
    /// of a kind: rendered with `-` where nothing was timed, and plotted.
    #[test]
    fn degenerate_reports_render_and_plot() {
        let point = |requests: usize, multicast: usize, p99: u64, max: u64| TePoint {
            tunnels: 10,
            requests,
            p50_ns: p99,
            p99_ns: p99,
            max_ns: max,
            multicast,
            unicast_p99_ns: if requests > multicast { p99 } else { 0 },
            multicast_p99_ns: if multicast > 0 { p99 } else { 0 },
            rss_bytes: 0,
            at_s: 0.0,
        };
        let cases: Vec<(Vec<TePoint>, usize)> = vec![
            (vec![], 0),
            (vec![point(0, 0, 0, 0)], 5),
            (vec![point(3, 3, 0, 7_000)], 4),
            (vec![point(3, 0, 5_000, 7_000), point(0, 0, 0, 0)], 6),
        ];
        let dir = std::env::temp_dir().join(format!("xlane-te-degenerate-{}", std::process::id()));
        for (points, dashes) in cases {
            let r = TeReport {
                config: TeBenchConfig::default(),
                hosts: 0,
                switches: 0,
                links: 0,
                topology_s: 0.0,
                points,
                fill_s: None,
                tunnels: 0,
                requests: 0,
                granted: 0,
                refused: BTreeMap::new(),
                releases: 0,
                changes: 0,
                restarts: 0,
                journal_records: 0,
                replay_s: 0.0,
                replay_same: true,
                bounds_checked: 0,
                bounds_equal: true,
                verify_s: 0.0,
            };
            let text = render(&r);
            let untimed = text
                .lines()
                .skip(3)
                .take(r.points.len())
                .flat_map(str::split_whitespace)
                .filter(|c| *c == "-")
                .count();
            assert_eq!(untimed, dashes, "{text}");
            assert!(text.contains("(not reached)"), "{text}");
            let [png, _] = plot(&r, &dir.join("te")).expect("plot");
            assert!(png.exists());
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn bad_configurations_are_refused() {
        let bad = TeBenchConfig {
            topology: "ring:3".into(),
            ..TeBenchConfig::default()
        };
        assert!(run(&bad, &mut |_| {}).is_err());
        let zero = TeBenchConfig {
            tunnels: 0,
            ..TeBenchConfig::default()
        };
        assert!(run(&zero, &mut |_| {}).is_err());
    }
}
