//! Fig. 5: the latency CDF of each configuration.

use super::axis::LogAxis;
use super::figure::{clamp_ns, percentile, write_both, Figure, PlotError, Series};
use super::style::{
    axis_ns, bold, de, draw_no_data, fit_text, fmt_count, font, palette, title_area, HEIGHT,
    LEGEND_W, TEXT_GRAY, WIDTH,
};
use std::path::{Path, PathBuf};

use plotters::coord::Shift;
use plotters::prelude::*;

/// Fig. 5: latency CDF per configuration on a log latency axis (µs/ms tick
/// labels), y = fraction of packets with latency ≤ x. p50 (circle) and p99
/// (triangle) are marked on each curve; the legend on the right lists each
/// configuration with n, p50, p99 and max. Writes `<stem>.png` and
/// `<stem>.svg`.
pub fn latency_cdf(
    series: &[Series<'_>],
    title: &str,
    stem: &Path,
) -> Result<[PathBuf; 2], PlotError> {
    let fig = CdfFigure::new(series, title);
    write_both(&fig, stem)
}

/// Number of order statistics a CDF is drawn from.
pub(super) const CDF_POINTS: usize = 2000;

/// Indices of the order statistics a CDF is drawn from.
pub(super) fn cdf_indices(n: usize) -> Vec<usize> {
    if n <= 2 * CDF_POINTS {
        return (0..n).collect();
    }
    let mut idx: Vec<usize> = (0..CDF_POINTS)
        .map(|i| ((i as u128 * (n as u128 - 1)) / (CDF_POINTS as u128 - 1)) as usize)
        .collect();
    let mut den = 100u64;
    while (den as usize) <= n {
        let rank = ((den - 1) as u128 * n as u128).div_ceil(den as u128) as usize;
        idx.push(rank.saturating_sub(1));
        den *= 10;
    }
    idx.push(n - 1);
    idx.sort_unstable();
    idx.dedup();
    idx
}

struct CdfLine {
    name: String,
    color: RGBColor,
    n: usize,
    /// Staircase through (latency ns, F).
    steps: Vec<(f64, f64)>,
    p50: Option<f64>,
    p99: Option<f64>,
    max: Option<f64>,
}

struct CdfFigure {
    title: String,
    lines: Vec<CdfLine>,
    axis: Option<LogAxis>,
}

impl CdfFigure {
    fn new(series: &[Series<'_>], title: &str) -> Self {
        let mut lo = f64::INFINITY;
        let mut hi = 0f64;
        let lines = series
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let v = s.sorted_ns;
                let n = v.len();
                let mut steps = Vec::new();
                let mut prev_f = 0.0;
                for j in cdf_indices(n) {
                    let x = clamp_ns(v[j]);
                    let f = (j + 1) as f64 / n as f64;
                    steps.push((x, prev_f));
                    steps.push((x, f));
                    prev_f = f;
                }
                if let (Some(&a), Some(&b)) = (v.first(), v.last()) {
                    lo = lo.min(clamp_ns(a));
                    hi = hi.max(clamp_ns(b));
                }
                CdfLine {
                    name: s.name.to_string(),
                    color: palette(i),
                    n,
                    steps,
                    p50: percentile(v, 1, 2).map(clamp_ns),
                    p99: percentile(v, 99, 100).map(clamp_ns),
                    max: v.last().copied().map(clamp_ns),
                }
            })
            .collect();
        let axis = (hi > 0.0).then(|| LogAxis::covering(lo, hi));
        CdfFigure {
            title: title.to_string(),
            lines,
            axis,
        }
    }
}

impl Figure for CdfFigure {
    fn size(&self) -> (u32, u32) {
        (WIDTH, HEIGHT)
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String> {
        root.fill(&WHITE).map_err(de)?;
        let body = title_area(root, &self.title)?;
        let (plot, legend) = body.split_horizontally(WIDTH - LEGEND_W);
        let axis = self.axis.clone().unwrap_or(LogAxis::covering(1e3, 1e6));
        let mut chart = ChartBuilder::on(&plot)
            .margin_left(10)
            .margin_right(20)
            .margin_top(10)
            .margin_bottom(10)
            .x_label_area_size(60)
            .y_label_area_size(80)
            .build_cartesian_2d(axis, 0f64..1.0)
            .map_err(de)?;
        chart
            .configure_mesh()
            .x_labels(10)
            .y_labels(11)
            .x_label_formatter(&|v| axis_ns(*v))
            .y_label_formatter(&|v| format!("{v:.1}"))
            .x_desc("latency (log scale)")
            .y_desc("fraction of packets with latency ≤ x")
            .label_style(font(16.0))
            .axis_desc_style(font(18.0))
            .light_line_style(RGBColor(235, 235, 235))
            .bold_line_style(RGBColor(200, 200, 200))
            .draw()
            .map_err(de)?;
        if self.axis.is_none() {
            draw_no_data(&plot, "no samples")?;
        }
        for line in &self.lines {
            let style = line.color.stroke_width(2);
            chart
                .draw_series(LineSeries::new(line.steps.iter().copied(), style))
                .map_err(de)?;
        }
        // Markers on top of every line.
        for line in &self.lines {
            if let Some(x) = line.p50 {
                chart
                    .draw_series(std::iter::once(Circle::new(
                        (x, 0.5),
                        6,
                        line.color.filled(),
                    )))
                    .map_err(de)?;
                chart
                    .draw_series(std::iter::once(Circle::new(
                        (x, 0.5),
                        6,
                        BLACK.stroke_width(1),
                    )))
                    .map_err(de)?;
            }
            if let Some(x) = line.p99 {
                chart
                    .draw_series(std::iter::once(TriangleMarker::new(
                        (x, 0.99),
                        7,
                        line.color.filled(),
                    )))
                    .map_err(de)?;
                chart
                    .draw_series(std::iter::once(TriangleMarker::new(
                        (x, 0.99),
                        7,
                        BLACK.stroke_width(1),
                    )))
                    .map_err(de)?;
            }
        }
        // Legend column.
        let mut y = 20;
        let name_style = bold(16.0);
        let info_style = font(13.0).color(&TEXT_GRAY);
        legend
            .draw_text("configuration", &font(14.0).color(&TEXT_GRAY), (10, y))
            .map_err(de)?;
        y += 26;
        for line in &self.lines {
            legend
                .draw(&PathElement::new(
                    vec![(10, y + 9), (42, y + 9)],
                    line.color.stroke_width(3),
                ))
                .map_err(de)?;
            let name = fit_text(&legend, &line.name, &name_style, LEGEND_W - 70);
            legend.draw_text(&name, &name_style, (50, y)).map_err(de)?;
            let info = match (line.p50, line.p99, line.max) {
                (Some(a), Some(b), Some(m)) => {
                    vec![
                        format!("n={}  max {}", fmt_count(line.n), axis_ns(m)),
                        format!("p50 {}  p99 {}", axis_ns(a), axis_ns(b)),
                    ]
                }
                _ => vec!["no samples".to_string()],
            };
            for (k, text) in info.iter().enumerate() {
                legend
                    .draw_text(text, &info_style, (50, y + 21 + 16 * k as i32))
                    .map_err(de)?;
            }
            y += 24 + 16 * info.len() as i32 + 10;
        }
        y += 10;
        legend
            .draw(&Circle::new((26, y + 8), 6, BLACK.stroke_width(1)))
            .map_err(de)?;
        legend
            .draw_text("p50 (median)", &font(14.0), (50, y))
            .map_err(de)?;
        y += 24;
        legend
            .draw(&TriangleMarker::new((26, y + 8), 7, BLACK.stroke_width(1)))
            .map_err(de)?;
        legend.draw_text("p99", &font(14.0), (50, y)).map_err(de)?;
        Ok(())
    }
}
