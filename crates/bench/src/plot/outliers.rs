//! Fig. 4: the outlier time series, one panel per configuration.

use super::axis::LogAxis;
use super::figure::{clamp_ns, write_both, Figure, OutlierPoint, PlotError};
use super::style::{
    axis_ns, bold, de, draw_no_data, fit_text, fmt_count, fmt_sig, font, title_area, HEIGHT,
    LEGEND_W, TEXT_GRAY, WIDTH,
};
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use plotters::coord::{CoordTranslate, Shift};
use plotters::prelude::*;

/// Fig. 4: latency of outlier packets over the run (x = send time, y =
/// latency on a log axis), one panel per configuration in order of first
/// appearance, each with its own y range; marker colour and shape show
/// the cause. Writes `<stem>.png` and `<stem>.svg`.
pub fn outlier_timeseries(
    points: &[OutlierPoint],
    title: &str,
    stem: &Path,
) -> Result<[PathBuf; 2], PlotError> {
    let fig = OutlierFigure::new(points, title);
    write_both(&fig, stem)
}

/// Marker shape of a cause.
#[derive(Clone, Copy)]
enum Shape {
    Circle,
    Square,
    Triangle,
    Cross,
    Diamond,
}

/// Known causes with fixed colour and shape; other causes get the
/// remaining styles in order of first appearance.
const KNOWN_CAUSES: [(&str, RGBColor, Shape); 5] = [
    ("queueing", RGBColor(31, 119, 180), Shape::Circle),
    ("host gap", RGBColor(148, 103, 189), Shape::Square),
    ("sender late", RGBColor(255, 127, 14), Shape::Triangle),
    ("loss", RGBColor(214, 39, 40), Shape::Cross),
    ("unexplained", RGBColor(60, 60, 60), Shape::Diamond),
];
const EXTRA_CAUSE_STYLES: [(RGBColor, Shape); 5] = [
    (RGBColor(44, 160, 44), Shape::Circle),
    (RGBColor(227, 119, 194), Shape::Square),
    (RGBColor(23, 190, 207), Shape::Triangle),
    (RGBColor(188, 189, 34), Shape::Diamond),
    (RGBColor(140, 86, 75), Shape::Cross),
];

fn marker<DB: DrawingBackend, CT: CoordTranslate>(
    area: &DrawingArea<DB, CT>,
    at: CT::From,
    color: RGBColor,
    shape: Shape,
    r: i32,
) -> Result<(), String>
where
    CT::From: Clone,
{
    let fill = color.mix(0.85).filled();
    let here = || EmptyElement::at(at.clone());
    match shape {
        Shape::Circle => area.draw(&(here() + Circle::new((0, 0), r, fill))),
        Shape::Square => area.draw(&(here() + Rectangle::new([(-r, -r), (r, r)], fill))),
        Shape::Triangle => area.draw(&(here() + TriangleMarker::new((0, 0), r + 1, fill))),
        Shape::Cross => {
            let s = color.stroke_width(2);
            area.draw(
                &(here()
                    + PathElement::new(vec![(-r, -r), (r, r)], s)
                    + PathElement::new(vec![(-r, r), (r, -r)], s)),
            )
        }
        Shape::Diamond => area.draw(
            &(here() + Polygon::new(vec![(0, -r - 1), (r + 1, 0), (0, r + 1), (-r - 1, 0)], fill)),
        ),
    }
    .map_err(de)
}

struct Panel {
    config: String,
    /// Points as (time in display unit, latency ns, cause index).
    points: Vec<(f64, f64, usize)>,
    total: usize,
    max_ns: f64,
    axis: LogAxis,
}

struct OutlierFigure {
    title: String,
    /// (cause name, colour, shape, count)
    causes: Vec<(String, RGBColor, Shape, usize)>,
    panels: Vec<Panel>,
    /// Time axis range in display unit and the unit's name.
    t_max: f64,
    t_unit: &'static str,
    height: u32,
}

impl OutlierFigure {
    fn new(points: &[OutlierPoint], title: &str) -> Self {
        let mut causes: Vec<(String, RGBColor, Shape, usize)> = KNOWN_CAUSES
            .iter()
            .map(|(n, c, s)| (n.to_string(), *c, *s, 0))
            .collect();
        let mut cause_idx: HashMap<String, usize> = causes
            .iter()
            .enumerate()
            .map(|(i, c)| (c.0.clone(), i))
            .collect();
        let t_max_ns = points.iter().map(|p| p.t_ns).max().unwrap_or(0) as f64;
        let (t_div, t_unit) = if t_max_ns >= 2e9 {
            (1e9, "s")
        } else if t_max_ns >= 2e6 {
            (1e6, "ms")
        } else {
            (1e3, "µs")
        };
        let mut order: Vec<String> = Vec::new();
        let mut by_config: HashMap<&str, Vec<&OutlierPoint>> = HashMap::new();
        for p in points {
            if !by_config.contains_key(p.config.as_str()) {
                order.push(p.config.clone());
            }
            by_config.entry(p.config.as_str()).or_default().push(p);
            if !cause_idx.contains_key(&p.cause) {
                let extra = causes.len() - KNOWN_CAUSES.len();
                let (c, s) = EXTRA_CAUSE_STYLES[extra % EXTRA_CAUSE_STYLES.len()];
                cause_idx.insert(p.cause.clone(), causes.len());
                causes.push((p.cause.clone(), c, s, 0));
            }
        }
        let mut panels = Vec::new();
        for config in order {
            let pts = by_config.get(config.as_str()).cloned().unwrap_or_default();
            let min_ns = pts
                .iter()
                .map(|p| clamp_ns(p.latency_ns))
                .fold(f64::INFINITY, f64::min);
            let max_ns = pts
                .iter()
                .map(|p| clamp_ns(p.latency_ns))
                .fold(1.0, f64::max);
            let axis = LogAxis::covering(min_ns.min(max_ns), max_ns);
            // Draw each (pixel, cause) once: bucket time into 2000 columns
            // and log latency into 1000 rows.
            let (ll, lh) = (axis.lo.ln(), axis.hi.ln());
            let mut seen = HashSet::new();
            let mut kept = Vec::new();
            for p in &pts {
                let ci = cause_idx.get(&p.cause).copied().unwrap_or(0);
                if let Some(c) = causes.get_mut(ci) {
                    c.3 += 1;
                }
                let t = p.t_ns as f64 / t_div;
                let lat = clamp_ns(p.latency_ns);
                let bx = if t_max_ns > 0.0 {
                    (p.t_ns as f64 / t_max_ns * 2000.0) as u32
                } else {
                    0
                };
                let by = ((lat.ln() - ll) / (lh - ll) * 1000.0) as u32;
                if seen.insert((bx, by, ci)) {
                    kept.push((t, lat, ci));
                }
            }
            panels.push(Panel {
                config,
                total: pts.len(),
                points: kept,
                max_ns,
                axis,
            });
        }
        // Draw frequent causes first so rare ones stay visible on top.
        let counts: Vec<usize> = causes.iter().map(|c| c.3).collect();
        for p in &mut panels {
            p.points
                .sort_by_key(|&(_, _, ci)| std::cmp::Reverse(counts.get(ci).copied().unwrap_or(0)));
        }
        let cols = if panels.len() <= 2 { 1 } else { 2 };
        let rows = panels.len().div_ceil(cols).max(1);
        let height = HEIGHT.max(60 + 290 * rows as u32);
        let t_max = (t_max_ns / t_div).max(1.0);
        OutlierFigure {
            title: title.to_string(),
            causes,
            panels,
            t_max,
            t_unit,
            height,
        }
    }
}

impl Figure for OutlierFigure {
    fn size(&self) -> (u32, u32) {
        (WIDTH, self.height)
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String> {
        root.fill(&WHITE).map_err(de)?;
        let body = title_area(root, &self.title)?;
        let (plots, legend) = body.split_horizontally(WIDTH - LEGEND_W + 60);
        if self.panels.is_empty() {
            draw_no_data(&plots, "no outliers")?;
        }
        let cols = if self.panels.len() <= 2 { 1 } else { 2 };
        let rows = self.panels.len().div_ceil(cols).max(1);
        let areas = plots.split_evenly((rows, cols));
        let x_desc = format!("send time since run start ({})", self.t_unit);
        let t_range = 0f64..self.t_max * 1.02;
        for (panel, area) in self.panels.iter().zip(areas.iter()) {
            let caption = format!(
                "{} — {} outliers, max {}",
                panel.config,
                fmt_count(panel.total),
                axis_ns(panel.max_ns)
            );
            let caption = fit_text(area, &caption, &bold(16.0), area.dim_in_pixel().0 - 20);
            let mut chart = ChartBuilder::on(area)
                .caption(&caption, bold(16.0))
                .margin(8)
                .margin_right(16)
                .x_label_area_size(48)
                .y_label_area_size(80)
                .build_cartesian_2d(t_range.clone(), panel.axis.clone())
                .map_err(de)?;
            chart
                .configure_mesh()
                .x_labels(8)
                .y_labels(6)
                .x_label_formatter(&|v| fmt_sig(*v, 4))
                .y_label_formatter(&|v| axis_ns(*v))
                .x_desc(x_desc.as_str())
                .y_desc("latency (log)")
                .label_style(font(14.0))
                .axis_desc_style(font(15.0))
                .light_line_style(RGBColor(238, 238, 238))
                .bold_line_style(RGBColor(205, 205, 205))
                .draw()
                .map_err(de)?;
            let plot_area = chart.plotting_area();
            for &(t, lat, ci) in &panel.points {
                let Some(&(_, color, shape, _)) = self.causes.get(ci) else {
                    continue;
                };
                marker(plot_area, (t, lat), color, shape, 4)?;
            }
        }
        // Legend column: causes that occur, with counts.
        let mut y = 20;
        legend
            .draw_text("cause (count)", &font(14.0).color(&TEXT_GRAY), (10, y))
            .map_err(de)?;
        y += 28;
        let text_style = font(15.0);
        for (name, color, shape, count) in self.causes.iter().filter(|c| c.3 > 0) {
            marker(&legend, (22, y + 8), *color, *shape, 6)?;
            let label = fit_text(
                &legend,
                &format!("{name} ({})", fmt_count(*count)),
                &text_style,
                LEGEND_W - 100,
            );
            legend.draw_text(&label, &text_style, (40, y)).map_err(de)?;
            y += 28;
        }
        if self.panels.len() > 1 {
            y += 8;
            let note = font(13.0).color(&TEXT_GRAY);
            for text in ["Each panel has its own", "latency axis."] {
                legend.draw_text(text, &note, (10, y)).map_err(de)?;
                y += 17;
            }
        }
        Ok(())
    }
}
