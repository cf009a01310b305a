//! QJump's application figure: each application's latency by scenario and
//! mode (bars from p50 to p99, a cross at the maximum, log axis).

use std::path::{Path, PathBuf};

use super::{AppRun, AppsBenchError, AppsReport};
use crate::plot::ensure_font;
use crate::table::fmt_ns;

/// Writes `<stem>.png` and `<stem>.svg`.
pub fn plot(r: &AppsReport, stem: &Path) -> Result<[PathBuf; 2], AppsBenchError> {
    let err = |p: &Path, m: String| AppsBenchError::Plot {
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
        let root = BitMapBackend::new(&png, (1100, 550)).into_drawing_area();
        draw(r, &root).map_err(|m| err(&png, m))?;
        root.present().map_err(|e| err(&png, e.to_string()))?;
        let root = SVGBackend::new(&svg, (1100, 550)).into_drawing_area();
        draw(r, &root).map_err(|m| err(&svg, m))?;
        root.present().map_err(|e| err(&svg, e.to_string()))?;
    }
    Ok([png, svg])
}

fn label(a: &AppRun) -> String {
    let s = match (a.scenario.as_str(), a.mode.as_str()) {
        ("idle", _) => "free",
        (_, "level") => "level",
        _ => "interfered",
    };
    if a.available && a.samples > 0 {
        format!("{} {s}", a.name)
    } else {
        format!("{} {s}: none", a.name)
    }
}

fn draw<DB: plotters::prelude::DrawingBackend>(
    r: &AppsReport,
    root: &plotters::prelude::DrawingArea<DB, plotters::coord::Shift>,
) -> Result<(), String> {
    use plotters::prelude::*;
    let e = |x: DrawingAreaErrorKind<DB::ErrorType>| x.to_string();
    root.fill(&WHITE).map_err(e)?;
    // Every run has its place on the axis; one without samples is
    // labelled "none" and has no bar (the caption says so).
    let runs: Vec<&AppRun> = r.apps.iter().collect();
    let sampled = || runs.iter().filter(|a| a.available && a.samples > 0);
    let lo = sampled().map(|a| a.p50_ns.max(1)).min().unwrap_or(1_000) as f64 / 2.0;
    // The highest of every figure drawn (a sockperf run may miss its max),
    // and above `lo`: a log axis needs lo < hi.
    let hi = sampled()
        .map(|a| a.max_ns.max(a.p99_ns).max(a.p50_ns).max(1))
        .max()
        .unwrap_or(1_000_000) as f64
        * 2.0;
    let hi = hi.max(lo * 4.0);
    let n = runs.len().max(1);
    let mut chart = ChartBuilder::on(root)
        .caption(
            format!(
                "Under cross traffic and CPU load: default (red), on QJump level {} (blue), interference-free (green); bars p50–p99, × max; none: no sample",
                r.level.level
            ),
            ("sans-serif", 16),
        )
        .margin(15)
        .x_label_area_size(40)
        .y_label_area_size(80)
        .build_cartesian_2d(-0.5f64..(n as f64 - 0.5), (lo..hi).log_scale())
        .map_err(e)?;
    let labels: Vec<String> = runs.iter().map(|a| label(a)).collect();
    chart
        .configure_mesh()
        .x_labels(n)
        .x_label_formatter(&|v| {
            let i = v.round();
            if (v - i).abs() < 1e-6 && i >= 0.0 {
                labels.get(i as usize).cloned().unwrap_or_default()
            } else {
                String::new()
            }
        })
        .x_label_style(("sans-serif", 12))
        .y_desc("latency")
        .y_label_formatter(&|v| fmt_ns(*v as u64))
        .draw()
        .map_err(e)?;
    let color = |a: &AppRun| match (a.scenario.as_str(), a.mode.as_str()) {
        ("idle", _) => RGBColor(0, 140, 0),
        (_, "level") => BLUE,
        _ => RED,
    };
    chart
        .draw_series(
            runs.iter()
                .enumerate()
                .filter(|(_, a)| a.available && a.samples > 0)
                .map(|(i, a)| {
                    let x = i as f64;
                    Rectangle::new(
                        [
                            (x - 0.3, a.p50_ns.max(1) as f64),
                            (x + 0.3, a.p99_ns.max(1) as f64),
                        ],
                        color(a).filled(),
                    )
                }),
        )
        .map_err(e)?;
    chart
        .draw_series(
            runs.iter()
                .enumerate()
                // No cross for a run that did not report its maximum.
                .filter(|(_, a)| a.available && a.samples > 0 && a.max_ns > 0)
                .map(|(i, a)| {
                    Cross::new((i as f64, a.max_ns.max(1) as f64), 6, BLACK.stroke_width(2))
                }),
        )
        .map_err(e)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apps_bench::{empty_run_for_tests, LevelInfo};

    #[test]
    fn plots_runs_with_and_without_samples() {
        let mut ok = empty_run_for_tests("sockperf", "level", "both");
        ok.available = true;
        ok.samples = 10;
        ok.p50_ns = 60_000;
        ok.p99_ns = 190_000;
        ok.max_ns = 650_000;
        let none = empty_run_for_tests("etcd", "default", "both");
        let r = AppsReport {
            apps: vec![none, ok],
            ratios: Vec::new(),
            level: LevelInfo {
                level: 2,
                hosts: 3,
                link_rate_bps: 40_000_000,
                rate_bps: 6_666_666,
                bound_ns: 1_800_000,
            },
            floor: crate::interference::Floor {
                stolen_fraction: 0.0,
                max_gap_ns: 0,
                cores: Vec::new(),
            },
            cross_traffic_bps: Vec::new(),
            placement: String::new(),
            plots: Vec::new(),
        };
        let dir = std::env::temp_dir().join(format!("xlane-apps-plot-{}", std::process::id()));
        let files = plot(&r, &dir.join("apps")).unwrap();
        assert!(files.iter().all(|f| f.is_file()));
        // The run without samples keeps its place, labelled as such.
        let svg = files
            .iter()
            .find(|f| f.extension().is_some_and(|x| x == "svg"))
            .map(|f| std::fs::read_to_string(f).unwrap())
            .expect("an SVG");
        assert!(
            svg.contains("etcd interfered: none"),
            "no label for the empty run"
        );
        assert!(
            svg.contains("sockperf level"),
            "no label for the sampled run"
        );
        let _ = std::fs::remove_dir_all(dir);
    }
}
