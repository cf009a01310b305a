//! Fig. 6: the percentile ladder (tail latency at p50 … p99.999).

use super::axis::{CategoryAxis, LogAxis};
use super::figure::{clamp_ns, percentile, write_both, Figure, PlotError, Series};
use super::style::{
    axis_ns, bold, de, draw_no_data, fit_text, fmt_count, font, palette, title_area, HEIGHT,
    LEGEND_W, TEXT_GRAY, WIDTH,
};
use std::path::{Path, PathBuf};

use plotters::coord::Shift;
use plotters::prelude::*;

/// Fig. 6: latency at p50, p90, p99, p99.9, p99.99 and p99.999 per
/// configuration (log latency axis), points joined by lines. A percentile
/// is left out for a configuration with fewer than 1/(1−q) samples.
/// Writes `<stem>.png` and `<stem>.svg`.
pub fn percentile_ladder(
    series: &[Series<'_>],
    title: &str,
    stem: &Path,
) -> Result<[PathBuf; 2], PlotError> {
    let fig = LadderFigure::new(series, title);
    write_both(&fig, stem)
}

/// (label, numerator, denominator) of each percentile on the ladder.
const LADDER: [(&str, u64, u64); 6] = [
    ("p50", 1, 2),
    ("p90", 9, 10),
    ("p99", 99, 100),
    ("p99.9", 999, 1_000),
    ("p99.99", 9_999, 10_000),
    ("p99.999", 99_999, 100_000),
];

struct LadderLine {
    name: String,
    color: RGBColor,
    n: usize,
    /// (category index, latency ns)
    points: Vec<(f64, f64)>,
}

struct LadderFigure {
    title: String,
    lines: Vec<LadderLine>,
    axis: Option<LogAxis>,
}

impl LadderFigure {
    fn new(series: &[Series<'_>], title: &str) -> Self {
        let mut lo = f64::INFINITY;
        let mut hi = 0f64;
        let lines = series
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let n = s.sorted_ns.len();
                let points: Vec<(f64, f64)> = LADDER
                    .iter()
                    .enumerate()
                    .filter(|(_, (_, _, den))| n as u64 >= *den)
                    .filter_map(|(k, (_, num, den))| {
                        percentile(s.sorted_ns, *num, *den).map(|v| (k as f64, clamp_ns(v)))
                    })
                    .collect();
                for &(_, v) in &points {
                    lo = lo.min(v);
                    hi = hi.max(v);
                }
                LadderLine {
                    name: s.name.to_string(),
                    color: palette(i),
                    n,
                    points,
                }
            })
            .collect();
        let axis = (hi > 0.0).then(|| LogAxis::covering(lo, hi));
        LadderFigure {
            title: title.to_string(),
            lines,
            axis,
        }
    }
}

impl Figure for LadderFigure {
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
            .y_label_area_size(90)
            .build_cartesian_2d(CategoryAxis { n: LADDER.len() }, axis)
            .map_err(de)?;
        chart
            .configure_mesh()
            .x_labels(LADDER.len())
            .y_labels(10)
            .x_label_formatter(&|v| {
                let k = v.round();
                if k >= 0.0 && (k as usize) < LADDER.len() {
                    LADDER[k as usize].0.to_string()
                } else {
                    String::new()
                }
            })
            .y_label_formatter(&|v| axis_ns(*v))
            .x_desc("percentile (number of nines)")
            .y_desc("latency (log scale)")
            .label_style(font(16.0))
            .axis_desc_style(font(18.0))
            .light_line_style(RGBColor(235, 235, 235))
            .bold_line_style(RGBColor(200, 200, 200))
            .draw()
            .map_err(de)?;
        if self.axis.is_none() {
            draw_no_data(&plot, "not enough samples for any percentile")?;
        }
        for line in &self.lines {
            chart
                .draw_series(LineSeries::new(
                    line.points.iter().copied(),
                    line.color.stroke_width(2),
                ))
                .map_err(de)?;
            chart
                .draw_series(
                    line.points
                        .iter()
                        .map(|&p| Circle::new(p, 5, line.color.filled())),
                )
                .map_err(de)?;
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
            legend
                .draw(&Circle::new((26, y + 9), 5, line.color.filled()))
                .map_err(de)?;
            let name = fit_text(&legend, &line.name, &name_style, LEGEND_W - 70);
            legend.draw_text(&name, &name_style, (50, y)).map_err(de)?;
            let info = match line.points.last() {
                Some(&(k, v)) => format!(
                    "n={}  {} = {}",
                    fmt_count(line.n),
                    LADDER[(k as usize).min(LADDER.len() - 1)].0,
                    axis_ns(v)
                ),
                None if line.n == 0 => "no samples".to_string(),
                None => format!("n={} (too few samples)", fmt_count(line.n)),
            };
            legend
                .draw_text(&info, &info_style, (50, y + 21))
                .map_err(de)?;
            y += 50;
        }
        y += 6;
        let note_style = font(13.0).color(&TEXT_GRAY);
        for text in [
            "A percentile is shown only when",
            "there are ≥ 1/(1−q) samples.",
        ] {
            legend.draw_text(text, &note_style, (10, y)).map_err(de)?;
            y += 17;
        }
        Ok(())
    }
}
