//! The figures of `xlane bench sven`, after SVEN's Figs. 3 and 4:
//! `sven-curve` (the SLO's percentile against achieved throughput without
//! control, with the SLO and each distribution's SLO-violating throughput)
//! and `sven-steps` (per distribution, the per-second throughput and p99
//! of each controller while the load steps up).

use std::path::{Path, PathBuf};

use plotters::coord::Shift;
use plotters::prelude::*;

use super::{Control, Shape, SvenReport};
use crate::plot::{
    axis_ns, de, draw_legend, font, palette, title_area, write_both, Figure, PlotError,
};

const SLO_RED: RGBColor = RGBColor(214, 39, 40);
const GREY: RGBColor = RGBColor(150, 150, 150);

/// Writes `<dir>/sven-curve.{png,svg}` and `<dir>/sven-steps.{png,svg}`;
/// returns the two PNGs.
pub fn plot(r: &SvenReport, dir: &Path) -> Result<[PathBuf; 2], PlotError> {
    let [curve, _] = write_both(&CurveFigure(r), &dir.join("sven-curve"))?;
    let [steps, _] = write_both(&StepsFigure(r), &dir.join("sven-steps"))?;
    Ok([curve, steps])
}

struct CurveFigure<'a>(&'a SvenReport);

fn lat_range(v: impl Iterator<Item = u64>, slo: u64) -> (f64, f64) {
    // At least 1 ns: a log axis from 0 has no bottom.
    let slo = slo.max(1) as f64;
    let (lo, hi) = v
        .filter(|&x| x > 0)
        .fold((slo, slo), |(a, b), x| (a.min(x as f64), b.max(x as f64)));
    (lo / 1.5, hi * 1.5)
}

impl Figure for CurveFigure<'_> {
    fn size(&self) -> (u32, u32) {
        (1200, 700)
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String> {
        let r = self.0;
        root.fill(&WHITE).map_err(de)?;
        let body = title_area(
            root,
            &format!(
                "Without admission control: {} vs throughput, {} workers, mean service {} (SLO {})",
                r.slo.split('=').next().unwrap_or("p99"),
                r.config.workers,
                axis_ns(r.config.service_ns as f64),
                r.slo
            ),
        )?;
        // A point without any request has no percentile to draw.
        let pts = || {
            r.curves
                .iter()
                .flat_map(|c| c.points.iter())
                .filter(|p| p.has_percentile())
        };
        let (lo, hi) = lat_range(pts().map(|p| p.slo_percentile_ns), r.slo_ns);
        // Not 0: the axis needs a width even without capacity or points.
        let xmax = pts()
            .map(|p| p.achieved_rps)
            .fold(r.capacity_rps, f64::max)
            .max(1.0)
            * 1.05;
        let mut chart = ChartBuilder::on(&body)
            .margin(20)
            .x_label_area_size(50)
            .y_label_area_size(90)
            .build_cartesian_2d(0.0..xmax, (lo..hi).log_scale())
            .map_err(de)?;
        chart
            .configure_mesh()
            .x_desc("achieved throughput (requests/s)")
            .y_desc("latency at the SLO's percentile (log scale)")
            .x_label_formatter(&|v| format!("{v:.0}"))
            .y_label_formatter(&|v| axis_ns(*v))
            .label_style(font(16.0))
            .axis_desc_style(font(18.0))
            .light_line_style(RGBColor(235, 235, 235))
            .draw()
            .map_err(de)?;
        chart
            .draw_series(LineSeries::new(
                [(0.0, r.slo_ns as f64), (xmax, r.slo_ns as f64)],
                SLO_RED.stroke_width(2),
            ))
            .map_err(de)?
            .label(format!("SLO {}", r.slo))
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 24, y)], SLO_RED.stroke_width(2)));
        for (i, c) in r.curves.iter().enumerate() {
            let col = palette(i);
            let line: Vec<(f64, f64)> = c
                .points
                .iter()
                .filter(|p| p.has_percentile())
                .map(|p| (p.achieved_rps, p.slo_percentile_ns.max(1) as f64))
                .collect();
            chart
                .draw_series(LineSeries::new(line.clone(), col.stroke_width(3)))
                .map_err(de)?
                .label(match c.slo_violating_rps {
                    Some(v) => format!("{}: SLO broken at {v:.0}/s", c.distribution.name()),
                    None => format!("{}: no point with a sample", c.distribution.name()),
                })
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 24, y)], col.stroke_width(3))
                });
            chart
                .draw_series(line.iter().map(|&p| Circle::new(p, 5, col.filled())))
                .map_err(de)?;
            if let Some(v) = c.slo_violating_rps {
                chart
                    .draw_series(DashedLineSeries::new(
                        [(v, lo), (v, hi)],
                        6,
                        4,
                        col.stroke_width(1),
                    ))
                    .map_err(de)?;
            }
        }
        draw_legend(&mut chart, SeriesLabelPosition::UpperLeft, 16.0)?;
        Ok(())
    }
}

struct StepsFigure<'a>(&'a SvenReport);

const CONTROLS: [Control; 3] = [Control::None, Control::Aiad, Control::Default];

impl StepsFigure<'_> {
    fn shapes(&self) -> Vec<Shape> {
        self.0.config.distributions.clone()
    }

    /// The stepped runs of `shape`, and the longest one's seconds.
    fn runs(&self, shape: Shape) -> (Vec<&super::ControllerRun>, f64) {
        let runs: Vec<_> = self
            .0
            .controllers
            .iter()
            .filter(|c| c.distribution == shape)
            .collect();
        let tmax = runs
            .iter()
            .map(|c| c.seconds.len())
            .max()
            .unwrap_or(1)
            .max(1) as f64;
        (runs, tmax)
    }

    fn throughput<DB: DrawingBackend>(
        &self,
        area: &DrawingArea<DB, Shift>,
        shape: Shape,
    ) -> Result<(), String> {
        let r = self.0;
        let (runs, tmax) = self.runs(shape);
        let ymax = runs
            .iter()
            .flat_map(|c| c.seconds.iter().map(|s| s.offered_rps))
            .fold(r.capacity_rps, f64::max)
            * 1.1;
        let mut chart = ChartBuilder::on(area)
            .margin(12)
            .caption(format!("{}: throughput", shape.name()), font(18.0))
            .x_label_area_size(36)
            .y_label_area_size(70)
            .build_cartesian_2d(0.0..tmax, 0.0..ymax)
            .map_err(de)?;
        chart
            .configure_mesh()
            .x_desc("time (s)")
            .y_desc("requests/s")
            .y_label_formatter(&|v| format!("{v:.0}"))
            .label_style(font(13.0))
            .axis_desc_style(font(14.0))
            .light_line_style(RGBColor(235, 235, 235))
            .draw()
            .map_err(de)?;
        let hline = |y: f64| [(0.0, y), (tmax, y)];
        chart
            .draw_series(LineSeries::new(
                hline(r.capacity_rps),
                RGBColor(60, 60, 60).stroke_width(1),
            ))
            .map_err(de)?
            .label("capacity")
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], RGBColor(60, 60, 60)));
        if let Some(v) = r.slo_violating_rps.get(shape.name()) {
            chart
                .draw_series(DashedLineSeries::new(hline(*v), 6, 4, GREY.stroke_width(2)))
                .map_err(de)?
                .label("SLO-violating")
                .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], GREY.stroke_width(2)));
        }
        if let Some(c) = runs.first() {
            chart
                .draw_series(LineSeries::new(
                    c.seconds
                        .iter()
                        .map(|s| (s.t_s as f64 + 0.5, s.offered_rps)),
                    BLACK.stroke_width(2),
                ))
                .map_err(de)?
                .label("offered")
                .legend(|(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], BLACK.stroke_width(2))
                });
        }
        for (i, k) in CONTROLS.iter().enumerate() {
            let Some(c) = runs.iter().find(|c| c.name == k.name()) else {
                continue;
            };
            let col = palette(i);
            chart
                .draw_series(LineSeries::new(
                    c.seconds
                        .iter()
                        .map(|s| (s.t_s as f64 + 0.5, s.achieved_rps)),
                    col.stroke_width(2),
                ))
                .map_err(de)?
                .label(format!("{} achieved (goodput dashed)", k.name()))
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], col.stroke_width(2))
                });
            chart
                .draw_series(DashedLineSeries::new(
                    c.seconds
                        .iter()
                        .map(|s| (s.t_s as f64 + 0.5, s.goodput_rps)),
                    5,
                    3,
                    col.stroke_width(1),
                ))
                .map_err(de)?;
        }
        draw_legend(&mut chart, SeriesLabelPosition::LowerRight, 12.0)?;
        Ok(())
    }

    fn latency<DB: DrawingBackend>(
        &self,
        area: &DrawingArea<DB, Shift>,
        shape: Shape,
    ) -> Result<(), String> {
        let r = self.0;
        let (runs, tmax) = self.runs(shape);
        let (lo, hi) = lat_range(
            runs.iter().flat_map(|c| {
                c.seconds
                    .iter()
                    .filter(|s| s.has_percentile())
                    .map(|s| s.p99_ns)
            }),
            r.slo_ns,
        );
        let mut chart = ChartBuilder::on(area)
            .margin(12)
            .caption(format!("{}: p99 per second", shape.name()), font(18.0))
            .x_label_area_size(36)
            .y_label_area_size(80)
            .build_cartesian_2d(0.0..tmax, (lo..hi).log_scale())
            .map_err(de)?;
        chart
            .configure_mesh()
            .x_desc("time (s)")
            .y_desc("p99 (log scale)")
            .y_label_formatter(&|v| axis_ns(*v))
            .label_style(font(13.0))
            .axis_desc_style(font(14.0))
            .light_line_style(RGBColor(235, 235, 235))
            .draw()
            .map_err(de)?;
        chart
            .draw_series(LineSeries::new(
                [(0.0, r.slo_ns as f64), (tmax, r.slo_ns as f64)],
                SLO_RED.stroke_width(2),
            ))
            .map_err(de)?
            .label("SLO")
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], SLO_RED.stroke_width(2)));
        for (i, k) in CONTROLS.iter().enumerate() {
            let Some(c) = runs.iter().find(|c| c.name == k.name()) else {
                continue;
            };
            let col = palette(i);
            chart
                .draw_series(LineSeries::new(
                    c.seconds
                        .iter()
                        .filter(|s| s.has_percentile() && s.p99_ns > 0)
                        .map(|s| (s.t_s as f64 + 0.5, s.p99_ns as f64)),
                    col.stroke_width(2),
                ))
                .map_err(de)?
                .label(k.name())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], col.stroke_width(2))
                });
        }
        draw_legend(&mut chart, SeriesLabelPosition::UpperLeft, 12.0)?;
        Ok(())
    }
}

impl Figure for StepsFigure<'_> {
    fn size(&self) -> (u32, u32) {
        (1400, 380 * self.shapes().len().max(1) as u32 + 60)
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String> {
        let r = self.0;
        root.fill(&WHITE).map_err(de)?;
        let body = title_area(
            root,
            &format!(
                "Load stepped past capacity: no control, SVEN's AIAD, xlane's default (SLO {})",
                r.slo
            ),
        )?;
        let shapes = self.shapes();
        let rows = body.split_evenly((shapes.len().max(1), 2));
        for (i, shape) in shapes.iter().enumerate() {
            self.throughput(&rows[2 * i], *shape)?;
            self.latency(&rows[2 * i + 1], *shape)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::*;
    use super::*;

    #[test]
    fn plots_a_report_with_a_missing_run() {
        let cfg = SvenBenchConfig {
            distributions: vec![Shape::Exp, Shape::Fixed],
            ..SvenBenchConfig::default()
        };
        let second = |t: u32, p: u64| Second {
            t_s: t,
            load: 1.15,
            offered_rps: 9_000.0,
            achieved_rps: 7_000.0,
            goodput_rps: 6_900.0,
            drop_rate: 0.2,
            p99_ns: p,
            slo_percentile_ns: p,
            at_least: false,
            samples: 100,
            lost: 0,
            floor_max_gap_ns: 0,
            settled: true,
        };
        let r = SvenReport {
            config: cfg,
            slo: "p99=15ms".into(),
            slo_ns: 15_000_000,
            capacity_rps: 8_000.0,
            slo_violating_rps: [("exp".to_string(), 7_000.0)].into(),
            curves: vec![Curve {
                distribution: Shape::Exp,
                points: vec![],
                slo_violating_rps: Some(7_000.0),
                crossed: true,
            }],
            controllers: vec![ControllerRun {
                name: "aiad".into(),
                distribution: Shape::Exp,
                seconds: vec![second(0, 10_000_000), second(1, 0), second(2, 40_000_000)],
                settled_percentile_ns: None,
                settled_at_least: false,
                overshoot: Some(2.7),
                admission_drops: 0,
                floor_stolen: 0.0,
            }],
            targets: vec![],
            floor_stolen_max: 0.0,
            duration_s: 1.0,
        };
        let dir = std::env::temp_dir().join(format!("xlane-sven-plot-{}", std::process::id()));
        let [curve, steps] = plot(&r, &dir).unwrap();
        assert!(std::fs::metadata(&curve).unwrap().len() > 1000);
        assert!(std::fs::metadata(&steps).unwrap().len() > 1000);
        let s = std::fs::read_to_string(dir.join("sven-steps.svg")).unwrap();
        assert!(s.contains("aiad") && s.contains("fixed"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
