//! The figures of `xlane bench pipe`: `pipe-latency` (median latency
//! against processes, unordered, best effort and reliable, one panel per
//! condition, after 1Pipe's Figs. 9a and 12), `pipe-beacons` (CPU and
//! ordering delay against the beacon interval, Fig. 13) and
//! `pipe-failures` (deliveries per millisecond around a kill and a cut,
//! Fig. 10) and `pipe-lane` (the wait for the barrier with beacons on the
//! regular path and on lane tunnels, behind the same flows).

use std::path::{Path, PathBuf};

use plotters::coord::Shift;
use plotters::prelude::*;

use super::{Beacons, Condition, Mode, PipeReport, PointOut};
use crate::plot::{
    axis_ns, de, draw_legend, font, palette, title_area, write_both, Figure, PlotError,
};

/// Writes `<dir>/pipe-{latency,beacons,failures,lane}.{png,svg}` (the
/// last three when the run has those phases); returns the PNGs.
pub fn plot(r: &PipeReport, dir: &Path) -> Result<Vec<PathBuf>, PlotError> {
    let mut out = vec![write_both(&LatencyFigure(r), &dir.join("pipe-latency"))?[0].clone()];
    if r.points.iter().any(|p| p.phase == "beacons") {
        out.push(write_both(&BeaconFigure(r), &dir.join("pipe-beacons"))?[0].clone());
    }
    if r.points.iter().any(|p| !p.timeline_per_ms.is_empty()) {
        out.push(write_both(&FailureFigure(r), &dir.join("pipe-failures"))?[0].clone());
    }
    if r.points.iter().any(|p| p.phase == "lane") {
        out.push(write_both(&LaneFigure(r), &dir.join("pipe-lane"))?[0].clone());
    }
    Ok(out)
}

struct LaneFigure<'a>(&'a PipeReport);

const VARIANTS: [Beacons; 3] = [Beacons::Regular, Beacons::LaneIn, Beacons::Lane];

impl Figure for LaneFigure<'_> {
    fn size(&self) -> (u32, u32) {
        (1200, 600)
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String> {
        let r = self.0;
        root.fill(&WHITE).map_err(de)?;
        let body = title_area(
            root,
            "1Pipe: wait for the barrier (delivery − arrival) behind flows, by where beacons travel",
        )?;
        let pts: Vec<&PointOut> = r.points.iter().filter(|p| p.phase == "lane").collect();
        let hi = pts.iter().map(|p| p.wait_p99_ns).max().unwrap_or(1).max(1) as f64 * 2.0;
        let lo = pts.iter().map(|p| p.wait_p50_ns.max(1)).min().unwrap_or(1) as f64 / 2.0;
        let panels = body.split_evenly((1, 2));
        for (area, mode) in panels.iter().zip([Mode::BestEffort, Mode::Reliable]) {
            let mut chart = ChartBuilder::on(area)
                .margin(12)
                .caption(mode.name(), font(18.0))
                .x_label_area_size(40)
                .y_label_area_size(80)
                .build_cartesian_2d(-0.5..2.5, (lo..hi).log_scale())
                .map_err(de)?;
            chart
                .configure_mesh()
                .x_desc("beacons")
                .y_desc("wait (log)")
                .x_labels(3)
                .x_label_formatter(&|x: &f64| {
                    let i = x.round();
                    if (*x - i).abs() < 0.01 && (0.0..3.0).contains(&i) {
                        VARIANTS[i as usize].name().to_string()
                    } else {
                        String::new()
                    }
                })
                .y_label_formatter(&|v| axis_ns(*v))
                .label_style(font(13.0))
                .axis_desc_style(font(14.0))
                .light_line_style(RGBColor(235, 235, 235))
                .draw()
                .map_err(de)?;
            for (i, (name, p99)) in [("median", false), ("p99", true)].into_iter().enumerate() {
                let col = palette(i);
                let xs: Vec<(f64, f64)> = VARIANTS
                    .iter()
                    .enumerate()
                    .filter_map(|(x, b)| {
                        let p = pts.iter().find(|p| p.mode == mode && p.beacons == *b)?;
                        let v = if p99 { p.wait_p99_ns } else { p.wait_p50_ns };
                        Some((x as f64, v.max(1) as f64))
                    })
                    .collect();
                dotted_line(&mut chart, &xs, col, 5, name)?;
            }
            draw_legend(&mut chart, SeriesLabelPosition::UpperRight, 13.0)?;
        }
        Ok(())
    }
}

/// A line through `pts` with a dot of `radius` at each, named `name` in
/// the legend.
fn dotted_line<'a, DB, X, Y>(
    chart: &mut ChartContext<'a, DB, Cartesian2d<X, Y>>,
    pts: &[(f64, f64)],
    col: RGBColor,
    radius: u32,
    name: &str,
) -> Result<(), String>
where
    DB: DrawingBackend + 'a,
    X: Ranged<ValueType = f64>,
    Y: Ranged<ValueType = f64>,
{
    chart
        .draw_series(LineSeries::new(pts.to_vec(), col.stroke_width(3)))
        .map_err(de)?
        .label(name)
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], col.stroke_width(3)));
    chart
        .draw_series(pts.iter().map(|&p| Circle::new(p, radius, col.filled())))
        .map_err(de)?;
    Ok(())
}

/// The mesh every panel here draws: axis names, a label format for y.
macro_rules! mesh {
    ($chart:expr, $x:expr, $y:expr, $yfmt:expr) => {
        $chart
            .configure_mesh()
            .x_desc($x)
            .y_desc($y)
            .y_label_formatter($yfmt)
            .label_style(font(13.0))
            .axis_desc_style(font(14.0))
            .light_line_style(RGBColor(235, 235, 235))
            .draw()
            .map_err(de)
    };
}

struct LatencyFigure<'a>(&'a PipeReport);

impl Figure for LatencyFigure<'_> {
    fn size(&self) -> (u32, u32) {
        (1500, 600)
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String> {
        let r = self.0;
        root.fill(&WHITE).map_err(de)?;
        let body = title_area(
            root,
            &format!(
                "1Pipe: median latency of {}-receiver scatterings, beacons every {} µs (hop: xlane pipe switchd)",
                r.config.fanout, r.config.beacon_us
            ),
        )?;
        let lat: Vec<&PointOut> = r.points.iter().filter(|p| p.phase == "latency").collect();
        let conds: Vec<Condition> = [
            Condition::Idle,
            Condition::BackgroundRegular,
            Condition::BackgroundExpress,
        ]
        .into_iter()
        .filter(|c| lat.iter().any(|p| p.condition == *c))
        .collect();
        let panels = body.split_evenly((1, conds.len().max(1)));
        let vals = lat
            .iter()
            .flat_map(|p| [p.unordered_p50_ns, p.delivered_p50_ns])
            .filter(|&v| v > 0);
        let (lo, hi) = vals.fold((f64::MAX, 1.0f64), |(a, b), v| {
            (a.min(v as f64), b.max(v as f64))
        });
        let (lo, hi) = (lo.min(hi) / 1.5, hi * 1.5);
        let xmax = lat.iter().map(|p| p.procs).max().unwrap_or(2) as f64 + 1.0;
        for (area, c) in panels.iter().zip(&conds) {
            let mut chart = ChartBuilder::on(area)
                .margin(12)
                .caption(c.name(), font(18.0))
                .x_label_area_size(40)
                .y_label_area_size(80)
                .build_cartesian_2d(1.0..xmax, (lo..hi).log_scale())
                .map_err(de)?;
            mesh!(chart, "processes", "median latency (log)", &|v| axis_ns(*v))?;
            let series: [(&str, Mode, bool); 3] = [
                ("unordered (arrival)", Mode::BestEffort, false),
                ("best effort (delivery)", Mode::BestEffort, true),
                ("reliable (delivery)", Mode::Reliable, true),
            ];
            for (i, (name, mode, delivered)) in series.into_iter().enumerate() {
                let col = palette(i);
                let pts: Vec<(f64, f64)> = lat
                    .iter()
                    .filter(|p| p.condition == *c && p.mode == mode)
                    .map(|p| {
                        let v = if delivered {
                            p.delivered_p50_ns
                        } else {
                            p.unordered_p50_ns
                        };
                        (p.procs as f64, v.max(1) as f64)
                    })
                    .collect();
                dotted_line(&mut chart, &pts, col, 4, name)?;
            }
            draw_legend(&mut chart, SeriesLabelPosition::UpperLeft, 13.0)?;
        }
        Ok(())
    }
}

struct BeaconFigure<'a>(&'a PipeReport);

impl Figure for BeaconFigure<'_> {
    fn size(&self) -> (u32, u32) {
        (1200, 600)
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String> {
        let r = self.0;
        root.fill(&WHITE).map_err(de)?;
        let body = title_area(
            root,
            &format!(
                "1Pipe beacons: {} processes at {:.0} scatterings/s each, the beacon interval swept",
                r.config.procs_failures, r.config.sweep_rate
            ),
        )?;
        let pts: Vec<&PointOut> = r.points.iter().filter(|p| p.phase == "beacons").collect();
        let xs = pts.iter().map(|p| p.beacon_us as f64);
        let (xlo, xhi) = xs.fold((f64::MAX, 1.0f64), |(a, b), v| (a.min(v), b.max(v)));
        let (xlo, xhi) = (xlo.min(xhi) / 1.3, xhi * 1.3);
        let [left, right]: [DrawingArea<DB, Shift>; 2] = body
            .split_evenly((1, 2))
            .try_into()
            .map_err(|_| "split".to_string())?;
        let cpu_max = pts
            .iter()
            .map(|p| (p.hop_cpu + p.procs_cpu) * 100.0)
            .fold(1.0, f64::max)
            * 1.15;
        let mut chart = ChartBuilder::on(&left)
            .margin(12)
            .caption("CPU (share of one core)", font(18.0))
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d((xlo..xhi).log_scale(), 0.0..cpu_max)
            .map_err(de)?;
        mesh!(chart, "beacon interval (µs, log)", "% of a core", &|v| {
            format!("{v:.0} %")
        })?;
        type Line = (&'static str, fn(&PointOut) -> f64);
        let lines: [Line; 2] = [
            ("hop (switchd)", |p| p.hop_cpu * 100.0),
            ("processes, together", |p| p.procs_cpu * 100.0),
        ];
        for (i, (name, f)) in lines.into_iter().enumerate() {
            let col = palette(i);
            let v: Vec<(f64, f64)> = pts.iter().map(|p| (p.beacon_us as f64, f(p))).collect();
            dotted_line(&mut chart, &v, col, 4, name)?;
        }
        draw_legend(&mut chart, SeriesLabelPosition::UpperRight, 13.0)?;
        let ohi = pts
            .iter()
            .map(|p| p.overhead_p50_ns as f64)
            .fold(1_000.0, f64::max)
            * 1.15;
        let mut chart = ChartBuilder::on(&right)
            .margin(12)
            .caption("ordering delay (median delivered − unordered)", font(18.0))
            .x_label_area_size(40)
            .y_label_area_size(80)
            .build_cartesian_2d((xlo..xhi).log_scale(), 0.0..ohi)
            .map_err(de)?;
        mesh!(chart, "beacon interval (µs, log)", "delay", &|v| axis_ns(
            *v
        ))?;
        let col = palette(2);
        let v: Vec<(f64, f64)> = pts
            .iter()
            .map(|p| (p.beacon_us as f64, p.overhead_p50_ns as f64))
            .collect();
        chart
            .draw_series(LineSeries::new(v.clone(), col.stroke_width(3)))
            .map_err(de)?;
        chart
            .draw_series(v.iter().map(|&p| Circle::new(p, 4, col.filled())))
            .map_err(de)?;
        Ok(())
    }
}

struct FailureFigure<'a>(&'a PipeReport);

/// Milliseconds shown before and after each failure.
const BEFORE_MS: usize = 20;
const AFTER_MS: usize = 40;

impl Figure for FailureFigure<'_> {
    fn size(&self) -> (u32, u32) {
        (1200, 700)
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String> {
        let r = self.0;
        root.fill(&WHITE).map_err(de)?;
        let body = title_area(
            root,
            "1Pipe failures: deliveries per ms at the correct receivers, around each failure (red)",
        )?;
        let pts: Vec<&PointOut> = r
            .points
            .iter()
            .filter(|p| !p.timeline_per_ms.is_empty())
            .collect();
        let cols = pts
            .iter()
            .map(|p| p.failures.len())
            .max()
            .unwrap_or(1)
            .max(1);
        let panels = body.split_evenly((pts.len().max(1), cols));
        for (row, p) in pts.iter().enumerate() {
            for (col, f) in p.failures.iter().enumerate() {
                let area = &panels[row * cols + col];
                let at = (f.at_ns / 1_000_000) as usize;
                let lo = at.saturating_sub(BEFORE_MS);
                let hi = (at + AFTER_MS).min(p.timeline_per_ms.len());
                let window = &p.timeline_per_ms[lo.min(hi)..hi];
                let ymax = window.iter().copied().max().unwrap_or(1).max(1) as f64 * 1.2;
                let what = match f.failure {
                    super::Failure::Kill(q) => format!("kill process {q}"),
                    super::Failure::Cut(h) => format!("cut host {h}"),
                };
                let mut chart = ChartBuilder::on(area)
                    .margin(12)
                    .caption(format!("{}: {what}", p.mode.name()), font(16.0))
                    .x_label_area_size(36)
                    .y_label_area_size(50)
                    .build_cartesian_2d(lo as f64..hi.max(lo + 1) as f64, 0.0..ymax)
                    .map_err(de)?;
                mesh!(chart, "time (ms)", "deliveries/ms", &|v| format!("{v:.0}"))?;
                chart
                    .draw_series(window.iter().enumerate().map(|(i, &c)| {
                        let x = (lo + i) as f64;
                        Rectangle::new([(x, 0.0), (x + 0.9, f64::from(c))], palette(0).filled())
                    }))
                    .map_err(de)?;
                let x = f.at_ns as f64 / 1e6;
                chart
                    .draw_series(DashedLineSeries::new(
                        [(x, 0.0), (x, ymax)],
                        6,
                        4,
                        RGBColor(214, 39, 40).stroke_width(2),
                    ))
                    .map_err(de)?;
            }
        }
        Ok(())
    }
}
