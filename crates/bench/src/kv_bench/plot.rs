//! Fig. 8 of X-Lane, one per scenario: write-visible latency and write
//! throughput against the replica count.

use std::path::{Path, PathBuf};

use super::report::label_of;
use super::{KvBenchError, System, SystemReport};
use crate::plot::ensure_font;
use crate::table::fmt_ns;

/// Fig. 8 of one scenario: mean write-visible latency (bars from p50 to
/// p99, log axis) and write throughput against the replica count, one line
/// per system. Writes `<stem>.png` and `<stem>.svg`.
pub fn plot(
    systems: &[SystemReport],
    scenario: &str,
    stem: &Path,
) -> Result<[PathBuf; 2], KvBenchError> {
    let err = |p: &Path, m: String| KvBenchError::Plot {
        path: p.display().to_string(),
        message: m,
    };
    ensure_font().map_err(|m| err(stem, m))?;
    if let Some(d) = stem.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(d).map_err(|e| err(d, e.to_string()))?;
    }
    let png = stem.with_extension("png");
    let svg = stem.with_extension("svg");
    {
        use plotters::prelude::*;
        let root = BitMapBackend::new(&png, (1200, 550)).into_drawing_area();
        draw(systems, scenario, &root).map_err(|m| err(&png, m))?;
        root.present().map_err(|e| err(&png, e.to_string()))?;
        let root = SVGBackend::new(&svg, (1200, 550)).into_drawing_area();
        draw(systems, scenario, &root).map_err(|m| err(&svg, m))?;
        root.present().map_err(|e| err(&svg, e.to_string()))?;
    }
    Ok([png, svg])
}

fn draw<DB: plotters::prelude::DrawingBackend>(
    systems: &[SystemReport],
    scenario: &str,
    root: &plotters::prelude::DrawingArea<DB, plotters::coord::Shift>,
) -> Result<(), String> {
    use plotters::prelude::*;
    let e = |x: DrawingAreaErrorKind<DB::ErrorType>| x.to_string();
    root.fill(&WHITE).map_err(e)?;
    let root = root
        .titled(
            &format!("Replicated writes, scenario {scenario}: time until visible on every member, and throughput"),
            ("sans-serif", 22),
        )
        .map_err(e)?;
    let (left, right) = root.split_horizontally(600);
    let ok: Vec<&SystemReport> = systems
        .iter()
        .filter(|s| s.available && s.scenario == scenario)
        .collect();
    let xs: Vec<usize> = ok.iter().map(|s| s.replicas).collect();
    let xmin = xs.iter().copied().min().unwrap_or(3) as f64 - 0.7;
    let xmax = xs.iter().copied().max().unwrap_or(3) as f64 + 0.7;
    // A system none of whose timed writes became visible has no latency to
    // plot (its legend says so), rather than a point at the axis' floor.
    let timed = || ok.iter().filter(|s| s.latency_writes > 0);
    let lo = timed().map(|s| s.p50_ns.max(1)).min().unwrap_or(1000) as f64 / 2.0;
    let hi = timed().map(|s| s.p99_ns.max(1)).max().unwrap_or(10_000) as f64 * 40.0;
    let names: Vec<&str> = System::ALL.iter().map(|s| s.name()).collect();
    let colors = [
        RED,
        BLUE,
        RGBColor(0, 140, 0),
        RGBColor(230, 140, 0),
        RGBColor(120, 0, 160),
    ];
    let mut lat = ChartBuilder::on(&left)
        .caption(
            "mean write-visible latency (bars: p50–p99)",
            ("sans-serif", 18),
        )
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(75)
        .build_cartesian_2d(xmin..xmax, (lo..hi).log_scale())
        .map_err(e)?;
    lat.configure_mesh()
        .x_desc("replicas")
        .y_desc("latency")
        .x_labels(((xmax - xmin) as usize + 1).max(2))
        .x_label_formatter(&|v| format!("{v:.0}"))
        .y_label_formatter(&|v| fmt_ns(*v as u64))
        .draw()
        .map_err(e)?;
    let tmax = ok.iter().map(|s| s.ops_per_s).fold(1.0, f64::max) * 1.6;
    let mut tp = ChartBuilder::on(&right)
        .caption("write throughput", ("sans-serif", 18))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(75)
        .build_cartesian_2d(xmin..xmax, 0.0..tmax)
        .map_err(e)?;
    tp.configure_mesh()
        .x_desc("replicas")
        .y_desc("writes/s")
        .x_labels(((xmax - xmin) as usize + 1).max(2))
        .x_label_formatter(&|v| format!("{v:.0}"))
        .y_label_formatter(&|v| format!("{v:.0}"))
        .draw()
        .map_err(e)?;
    for (k, name) in names.iter().enumerate() {
        let pts: Vec<&SystemReport> = ok.iter().copied().filter(|s| s.name == *name).collect();
        if pts.is_empty() {
            continue;
        }
        let c = colors[k % colors.len()];
        let off = (k as f64 - 1.0) * 0.08;
        let (lpts, untimed): (Vec<&SystemReport>, Vec<&SystemReport>) =
            pts.iter().partition(|s| s.latency_writes > 0);
        let label = if untimed.is_empty() {
            label_of(name).to_string()
        } else {
            let n: Vec<String> = untimed.iter().map(|s| s.replicas.to_string()).collect();
            format!(
                "{} (no write visible in time: {} members)",
                label_of(name),
                n.join(", ")
            )
        };
        let lp: Vec<(f64, f64)> = lpts
            .iter()
            .map(|s| (s.replicas as f64 + off, s.mean_ns.max(1) as f64))
            .collect();
        lat.draw_series(LineSeries::new(lp.clone(), c.stroke_width(2)))
            .map_err(e)?
            .label(label)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2)));
        lat.draw_series(lp.iter().map(|&p| Circle::new(p, 4, c.filled())))
            .map_err(e)?;
        lat.draw_series(lpts.iter().map(|s| {
            let x = s.replicas as f64 + off;
            PathElement::new(
                vec![(x, s.p50_ns.max(1) as f64), (x, s.p99_ns.max(1) as f64)],
                c.stroke_width(1),
            )
        }))
        .map_err(e)?;
        // A run without a throughput round has no writes/s (not 0).
        let tpts: Vec<(f64, f64)> = pts
            .iter()
            .filter(|s| s.throughput_ns > 0)
            .map(|s| (s.replicas as f64, s.ops_per_s))
            .collect();
        tp.draw_series(LineSeries::new(tpts.clone(), c.stroke_width(2)))
            .map_err(e)?
            .label(label_of(name).to_string())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2)));
        tp.draw_series(tpts.iter().map(|&p| Circle::new(p, 4, c.filled())))
            .map_err(e)?;
    }
    lat.configure_series_labels()
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .label_font(("sans-serif", 14))
        .draw()
        .map_err(e)?;
    tp.configure_series_labels()
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .label_font(("sans-serif", 14))
        .draw()
        .map_err(e)?;
    Ok(())
}
