//! The figure of `xlane bench rpc`: p99 latency against load, one line per
//! policy (log latency axis), p50 as a thin dashed line of the same colour.

use std::path::{Path, PathBuf};

use plotters::coord::Shift;
use plotters::prelude::*;

use super::RpcReport;
use crate::plot::{
    axis_ns, de, draw_legend, font, palette, title_area, write_both, Figure, PlotError,
};

const W: u32 = 1200;
const H: u32 = 700;

/// One policy's line: its name and (load, p50, p99) points.
type Line = (String, Vec<(f64, f64, f64)>);

struct LoadFigure {
    title: String,
    lines: Vec<Line>,
}

/// Writes `<stem>.png` and `<stem>.svg`.
pub fn plot(r: &RpcReport, stem: &Path) -> Result<[PathBuf; 2], PlotError> {
    let lines = r
        .policies
        .iter()
        .map(|p| {
            let pts = p
                .points
                .iter()
                .filter(|q| q.samples > 0)
                .map(|q| (q.load, q.p50_ns.max(1) as f64, q.p99_ns.max(1) as f64))
                .collect();
            (p.name.clone(), pts)
        })
        .collect();
    let fig = LoadFigure {
        title: format!(
            "R2P2 p99 (solid), p50 (dashed) vs load: {}×{} workers, bimodal, mean {}",
            r.config.servers,
            r.config.workers,
            axis_ns(r.mean_service_ns)
        ),
        lines,
    };
    write_both(&fig, stem)
}

impl Figure for LoadFigure {
    fn size(&self) -> (u32, u32) {
        (W, H)
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String> {
        root.fill(&WHITE).map_err(de)?;
        let body = title_area(root, &self.title)?;
        let all = || self.lines.iter().flat_map(|(_, p)| p.iter());
        let lo = all().map(|p| p.1).fold(f64::INFINITY, f64::min);
        let hi = all().map(|p| p.2).fold(0.0, f64::max);
        let (lo, hi) = if hi > 0.0 {
            (lo / 1.5, hi * 1.5)
        } else {
            (1e3, 1e6)
        };
        let mut chart = ChartBuilder::on(&body)
            .margin(20)
            .x_label_area_size(50)
            .y_label_area_size(90)
            .build_cartesian_2d(0.0f64..1.0f64, (lo..hi).log_scale())
            .map_err(de)?;
        chart
            .configure_mesh()
            .x_labels(11)
            .y_labels(10)
            .x_desc("offered load (fraction of the workers' capacity)")
            .y_desc("latency (log scale)")
            .x_label_formatter(&|v| format!("{v:.1}"))
            .y_label_formatter(&|v| axis_ns(*v))
            .label_style(font(16.0))
            .axis_desc_style(font(18.0))
            .light_line_style(RGBColor(235, 235, 235))
            .draw()
            .map_err(de)?;
        for (i, (name, pts)) in self.lines.iter().enumerate() {
            let c = palette(i);
            chart
                .draw_series(LineSeries::new(
                    pts.iter().map(|p| (p.0, p.2)),
                    c.stroke_width(3),
                ))
                .map_err(de)?
                .label(name.clone())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 24, y)], c.stroke_width(3))
                });
            chart
                .draw_series(pts.iter().map(|p| Circle::new((p.0, p.2), 5, c.filled())))
                .map_err(de)?;
            chart
                .draw_series(DashedLineSeries::new(
                    pts.iter().map(|p| (p.0, p.1)),
                    6,
                    4,
                    c.stroke_width(1),
                ))
                .map_err(de)?;
        }
        draw_legend(&mut chart, SeriesLabelPosition::UpperLeft, 16.0)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::{PolicyRun, RpcBenchConfig, RpcReport};
    use super::*;

    #[test]
    fn plots_a_report_with_an_empty_policy() {
        let mut p = super::super::tests_point(0.5, 2_000_000);
        p.p50_ns = 500_000;
        let r = RpcReport {
            config: RpcBenchConfig::default(),
            mean_service_ns: 760_000.0,
            capacity_rps: 10_000.0,
            policies: vec![
                PolicyRun {
                    name: "random".into(),
                    points: vec![p],
                },
                PolicyRun {
                    name: "jsq".into(),
                    points: vec![],
                },
            ],
            targets: vec![],
            floor_stolen_max: 0.0,
        };
        let dir = std::env::temp_dir().join(format!("xlane-rpc-plot-{}", std::process::id()));
        let [png, svg] = plot(&r, &dir.join("rpc")).unwrap();
        assert!(std::fs::metadata(&png).unwrap().len() > 1000);
        let s = std::fs::read_to_string(&svg).unwrap();
        assert!(s.contains("random") && s.contains("jsq"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
