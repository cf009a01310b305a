//! The figure of `--workload redis-benchmark`: per default test, the two
//! ratios the issue states (xlane-1 / redis with redis-benchmark, xlane-3 /
//! redis-wait with the driver, write tests only) as bars, with their
//! targets as horizontal lines. Drawn through the crate's figure
//! scaffolding (`crate::plot`).

use std::path::{Path, PathBuf};

use plotters::coord::Shift;
use plotters::prelude::*;

use super::report::{RbReport, RATIOS};
use crate::plot::{de, font, palette, title_area, write_both, Figure, PlotError};

const W: u32 = 1400;
const H: u32 = 650;

struct RatioFigure {
    title: String,
    tests: Vec<String>,
    /// Per ratio of [`RATIOS`]: its label, target and per test the ratio.
    series: Vec<(String, f64, Vec<Option<f64>>)>,
}

/// Writes `<stem>.png` and `<stem>.svg`: the ratios of `report` per test.
pub fn plot(report: &RbReport, stem: &Path) -> Result<[PathBuf; 2], PlotError> {
    let tests: Vec<String> = report.tests.iter().map(|t| t.name.clone()).collect();
    let series = RATIOS
        .iter()
        // The ratios of systems that did not run (`--systems`) are not drawn.
        .filter(|&&(_, a, b, _, _)| {
            report
                .ratios
                .iter()
                .any(|r| r.system == a.name() && r.versus == b.name())
        })
        .map(|&(client, a, b, target, _)| {
            let v = tests
                .iter()
                .map(|t| {
                    report
                        .ratios
                        .iter()
                        .find(|r| &r.test == t && r.system == a.name() && r.versus == b.name())
                        .and_then(|r| r.ratio)
                })
                .collect();
            (
                format!(
                    "{} / {} ({}; target {target})",
                    a.name(),
                    b.name(),
                    client.name()
                ),
                target,
                v,
            )
        })
        .collect();
    let fig = RatioFigure {
        title: format!(
            "redis-benchmark default tests: requests/s ratios, median of {} rounds' ratios (-P {} -c {})",
            report.rounds, report.pipeline, report.connections
        ),
        tests,
        series,
    };
    write_both(&fig, stem)
}

/// A short label: the test's first word (`LRANGE_100`, `LPUSH`), marked
/// `*` when the name goes on (`LPUSH (needed to benchmark LRANGE)`).
fn short(name: &str) -> String {
    match name.split_once(' ') {
        Some((w, _)) if !w.starts_with("LRANGE") && !w.starts_with("MSET") => format!("{w}*"),
        Some((w, _)) => w.to_string(),
        None => name.to_string(),
    }
}

impl Figure for RatioFigure {
    fn size(&self) -> (u32, u32) {
        (W, H)
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String> {
        root.fill(&WHITE).map_err(de)?;
        let body = title_area(root, &self.title)?;
        let n = self.tests.len().max(1);
        let top = self
            .series
            .iter()
            .flat_map(|(_, t, v)| v.iter().flatten().copied().chain([*t]))
            .fold(1.5f64, f64::max)
            * 1.1;
        let mut chart = ChartBuilder::on(&body)
            .margin(10)
            .margin_bottom(60)
            .y_label_area_size(70)
            .build_cartesian_2d(-0.5f64..n as f64 - 0.5, 0f64..top)
            .map_err(de)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(0)
            .y_desc("ratio of requests/s")
            .label_style(font(15.0))
            .axis_desc_style(font(17.0))
            .light_line_style(RGBColor(235, 235, 235))
            .bold_line_style(RGBColor(200, 200, 200))
            .draw()
            .map_err(de)?;
        let k = self.series.len().max(1) as f64;
        let bar = 0.8 / k;
        for (si, (label, target, values)) in self.series.iter().enumerate() {
            let color = palette(si);
            let x0 = -0.4 + si as f64 * bar;
            chart
                .draw_series(values.iter().enumerate().filter_map(|(i, v)| {
                    v.map(|y| {
                        let x = i as f64 + x0;
                        Rectangle::new([(x, 0.0), (x + bar * 0.9, y)], color.filled())
                    })
                }))
                .map_err(de)?
                .label(label.clone())
                .legend(move |(x, y)| {
                    Rectangle::new([(x, y - 6), (x + 14, y + 6)], color.filled())
                });
            let t = *target;
            chart
                .draw_series(LineSeries::new(
                    [(-0.5, t), (n as f64 - 0.5, t)],
                    color.stroke_width(2),
                ))
                .map_err(de)?;
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .label_font(font(15.0))
            .background_style(WHITE.mix(0.85))
            .border_style(RGBColor(200, 200, 200))
            .draw()
            .map_err(de)?;
        // Test names under the bars, in two staggered rows.
        for (i, name) in self.tests.iter().enumerate() {
            let (px, py) = chart.backend_coord(&(i as f64, 0.0));
            let dy = if i % 2 == 0 { 8 } else { 30 };
            let style = font(13.0).pos(plotters::style::text_anchor::Pos::new(
                plotters::style::text_anchor::HPos::Center,
                plotters::style::text_anchor::VPos::Top,
            ));
            root.draw_text(&short(name), &style, (px, py + dy))
                .map_err(de)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_labels() {
        assert_eq!(short("SET"), "SET");
        assert_eq!(short("LPUSH (needed to benchmark LRANGE)"), "LPUSH*");
        assert_eq!(short("LRANGE_100 (first 100 elements)"), "LRANGE_100");
        assert_eq!(short("MSET (10 keys)"), "MSET");
    }
}
