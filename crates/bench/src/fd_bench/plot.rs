//! Fig. 7: accuracy against Λ, one curve per detector.

use super::config::PHI;
use super::report::FdBenchReport;
use crate::plot::{axis_ns, ensure_font};
use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint, Ranged};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::ops::Range;
use std::path::{Path, PathBuf};

const W: u32 = 1200;
const H: u32 = 700;
const LEGEND_W: u32 = 300;
const FONT: &str = "sans-serif";
const COLORS: [RGBColor; 3] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(255, 127, 14),
];
const GRAY: RGBColor = RGBColor(90, 90, 90);

/// Log axis over ns with ticks at 1, 2, 5 × 10^k (1 × 10^k when wide).
#[derive(Clone)]
struct LogNs {
    lo: f64,
    hi: f64,
}

impl Ranged for LogNs {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;
    fn map(&self, v: &f64, limit: (i32, i32)) -> i32 {
        let f = (v.max(self.lo * 1e-3).ln() - self.lo.ln()) / (self.hi.ln() - self.lo.ln());
        (limit.0 as f64 + f * (limit.1 - limit.0) as f64)
            .round()
            .clamp(-1e6, 1e6) as i32
    }
    fn key_points<Hint: KeyPointHint>(&self, hint: Hint) -> Vec<f64> {
        let decades = (self.hi / self.lo).log10();
        let mant: &[f64] = if decades <= 4.0 {
            &[1.0, 2.0, 5.0]
        } else {
            &[1.0]
        };
        let mut v = Vec::new();
        let mut d = self.lo.log10().floor() as i32;
        while 10f64.powi(d) <= self.hi {
            for m in mant {
                let x = m * 10f64.powi(d);
                if x >= self.lo && x <= self.hi {
                    v.push(x);
                }
            }
            d += 1;
        }
        v.truncate(hint.max_num_points().max(2));
        v
    }
    fn range(&self) -> Range<f64> {
        self.lo..self.hi
    }
}

/// Accuracy as "nines": a ↦ −log10(1 − a), 100 % at `top`.
#[derive(Clone)]
struct Nines {
    top: f64,
}

impl Nines {
    fn y(&self, a: f64) -> f64 {
        if a >= 1.0 {
            self.top
        } else {
            (-(1.0 - a).log10()).clamp(0.0, self.top - 0.3)
        }
    }
    fn label(&self, y: f64) -> String {
        if y >= self.top - 1e-9 {
            return "100%".into();
        }
        let k = y.round() as i32;
        if k <= 0 {
            return "0%".into();
        }
        let nines = 100.0 * (1.0 - 10f64.powi(-k));
        format!("{nines:.*}%", (k - 2).max(0) as usize)
    }
}

impl Ranged for Nines {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;
    fn map(&self, v: &f64, limit: (i32, i32)) -> i32 {
        let f = v / (self.top + 0.25);
        (limit.0 as f64 + f * (limit.1 - limit.0) as f64).round() as i32
    }
    fn key_points<Hint: KeyPointHint>(&self, _hint: Hint) -> Vec<f64> {
        let mut v: Vec<f64> = (0..)
            .map(|k| k as f64)
            .take_while(|k| *k <= self.top - 0.5)
            .collect();
        v.push(self.top);
        v
    }
    fn range(&self) -> Range<f64> {
        0.0..self.top + 0.25
    }
}

struct Fig<'a> {
    report: &'a FdBenchReport,
    curves: &'a [Vec<(f64, f64)>],
    x: LogNs,
    y: Nines,
}

impl Fig<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String> {
        let de = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
        root.fill(&WHITE).map_err(de)?;
        let title = format!(
            "X-FD and baselines: accuracy against Λ (T = {}, {} hosts, cross traffic{})",
            axis_ns(self.report.params.period_ns as f64),
            self.report.params.hosts,
            if self.report.params.cpu_load {
                " + CPU load"
            } else {
                ""
            }
        );
        let tstyle = TextStyle::from((FONT, 22, FontStyle::Bold).into_font())
            .pos(Pos::new(HPos::Center, VPos::Top));
        root.draw_text(&title, &tstyle, ((W / 2) as i32, 12))
            .map_err(de)?;
        let body = root.margin(48, 0, 0, 0);
        let (plot, legend) = body.split_horizontally(W - LEGEND_W);
        let y = self.y.clone();
        let mut chart = ChartBuilder::on(&plot)
            .margin(10)
            .margin_right(20)
            .x_label_area_size(60)
            .y_label_area_size(90)
            .build_cartesian_2d(self.x.clone(), self.y.clone())
            .map_err(de)?;
        chart
            .configure_mesh()
            .x_labels(12)
            .x_label_formatter(&|v| axis_ns(*v))
            .y_label_formatter(&|v| y.label(*v))
            .x_desc("Λ: suspected after T + Λ without a heartbeat (log scale)")
            .y_desc("accuracy: heartbeats without a false suspicion")
            .label_style((FONT, 15))
            .axis_desc_style((FONT, 17))
            .light_line_style(RGBColor(235, 235, 235))
            .bold_line_style(RGBColor(205, 205, 205))
            .draw()
            .map_err(de)?;
        let mut ly = 20;
        legend
            .draw_text(
                "detector (heartbeat path)",
                &TextStyle::from((FONT, 14).into_font()).color(&GRAY),
                (10, ly),
            )
            .map_err(de)?;
        ly += 26;
        for (i, (d, pts)) in self.report.detectors.iter().zip(self.curves).enumerate() {
            let color = COLORS[i % COLORS.len()];
            // Staircase: the accuracy at Λ holds until the next level.
            let mut steps = Vec::new();
            let mut prev = self.y.y(0.0);
            let first_in = pts
                .iter()
                .rev()
                .find(|(x, _)| *x <= self.x.lo)
                .map(|(_, a)| *a);
            if let Some(a) = first_in {
                prev = self.y.y(a);
            }
            steps.push((self.x.lo, prev));
            for &(x, a) in pts.iter().filter(|(x, _)| *x > self.x.lo) {
                let yv = self.y.y(a);
                steps.push((x, prev));
                steps.push((x, yv));
                prev = yv;
            }
            steps.push((self.x.hi, prev));
            chart
                .draw_series(LineSeries::new(steps, color.stroke_width(2)))
                .map_err(de)?;
            if let Some(m) = d.min_perfect_threshold_ns.filter(|m| *m > 0) {
                let p = (m as f64, self.y.top);
                chart
                    .draw_series([Circle::new(p, 6, color.filled())])
                    .map_err(de)?;
                chart
                    .draw_series([Circle::new(p, 6, BLACK.stroke_width(1))])
                    .map_err(de)?;
            }
            legend
                .draw(&PathElement::new(
                    vec![(10, ly + 9), (42, ly + 9)],
                    color.stroke_width(3),
                ))
                .map_err(de)?;
            legend
                .draw_text(
                    &format!("{} ({})", d.name, d.path),
                    &TextStyle::from((FONT, 16, FontStyle::Bold).into_font()),
                    (50, ly),
                )
                .map_err(de)?;
            let mut info = vec![
                format!("{} heartbeats", d.heartbeats),
                format!(
                    "100% from Λ = {}",
                    d.min_perfect_threshold_ns
                        .map_or("-".into(), |m| axis_ns(m as f64))
                ),
            ];
            if d.name == PHI {
                if let Some(p) = &d.phi {
                    info.push(format!(
                        "φ* = {:.1}; Λ: its mean timeout − T",
                        p.min_perfect_phi
                    ));
                }
            }
            for (k, s) in info.iter().enumerate() {
                legend
                    .draw_text(
                        s,
                        &TextStyle::from((FONT, 13).into_font()).color(&GRAY),
                        (50, ly + 21 + 16 * k as i32),
                    )
                    .map_err(de)?;
            }
            ly += 24 + 16 * info.len() as i32 + 12;
        }
        if let Some(r) = self.report.ratio_plain_over_xfd {
            legend
                .draw_text(
                    &format!("plain-timeout / x-fd: {r:.1}×"),
                    &TextStyle::from((FONT, 14).into_font()),
                    (10, ly + 6),
                )
                .map_err(de)?;
        }
        Ok(())
    }
}

/// The y tick labels of a nines axis up to `top`.
#[cfg(test)]
pub(super) fn nines_labels(top: f64) -> Vec<String> {
    let n = Nines { top };
    n.key_points(20usize).iter().map(|&y| n.label(y)).collect()
}

fn with_ext(stem: &Path, ext: &str) -> PathBuf {
    let mut s = stem.as_os_str().to_owned();
    s.push(".");
    s.push(ext);
    PathBuf::from(s)
}

/// Writes `<stem>.png` and `<stem>.svg`.
pub(super) fn write(
    report: &FdBenchReport,
    curves: &[Vec<(f64, f64)>],
    stem: &Path,
) -> Result<Vec<PathBuf>, String> {
    ensure_font()?;
    let hi = report
        .detectors
        .iter()
        .filter_map(|d| d.min_perfect_threshold_ns)
        .map(|m| m as f64)
        .fold(10_000.0, f64::max)
        * 2.0;
    let n = report
        .detectors
        .iter()
        .map(|d| d.intervals)
        .max()
        .unwrap_or(1)
        .max(10);
    let fig = Fig {
        report,
        curves,
        x: LogNs { lo: 1_000.0, hi },
        y: Nines {
            top: (n as f64).log10().ceil() + 0.6,
        },
    };
    let png = with_ext(stem, "png");
    let svg = with_ext(stem, "svg");
    {
        let root = BitMapBackend::new(&png, (W, H)).into_drawing_area();
        fig.draw(&root)?;
        root.present()
            .map_err(|e| format!("{}: {e}", png.display()))?;
    }
    {
        let root = SVGBackend::new(&svg, (W, H)).into_drawing_area();
        fig.draw(&root)?;
        root.present()
            .map_err(|e| format!("{}: {e}", svg.display()))?;
    }
    Ok(vec![png, svg])
}
