//! Styling of every figure: its size, palette, fonts, number formats, and the
//! title, legend and "no data" drawing.

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, VPos};
use plotters::style::FontStyle;

/// Width in pixels of every figure.
pub const WIDTH: u32 = 1200;
/// Height in pixels of [`latency_cdf`] and [`percentile_ladder`] figures,
/// and the minimum height of [`outlier_timeseries`] (which grows with the
/// number of configurations).
///
/// [`latency_cdf`]: crate::plot::latency_cdf
/// [`percentile_ladder`]: crate::plot::percentile_ladder
/// [`outlier_timeseries`]: crate::plot::outlier_timeseries
pub const HEIGHT: u32 = 700;

/// Width of the legend column on the right of every figure.
pub(super) const LEGEND_W: u32 = 290;
/// Font family name used for every text; registered to the embedded font.
/// "sans-serif" also makes SVG viewers pick a sans font for the text.
pub(super) const FONT: &str = "sans-serif";

/// Fixed configuration palette (Tableau 10), used in the order of the input.
const PALETTE: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

pub(crate) fn palette(i: usize) -> RGBColor {
    PALETTE[i % PALETTE.len()]
}

pub(super) const TEXT_GRAY: RGBColor = RGBColor(90, 90, 90);

pub(crate) fn font(size: f64) -> TextStyle<'static> {
    (FONT, size).into_font().into()
}

pub(super) fn bold(size: f64) -> TextStyle<'static> {
    (FONT, size, FontStyle::Bold).into_font().into()
}

/// Formats `x` with at most `sig` significant digits, trailing zeros removed.
pub(super) fn fmt_sig(x: f64, sig: i32) -> String {
    if !x.is_finite() {
        return format!("{x}");
    }
    if x == 0.0 {
        return "0".to_string();
    }
    let mag = x.abs().log10().floor() as i32;
    let decimals = (sig - 1 - mag).clamp(0, 9) as usize;
    let s = format!("{x:.decimals$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// An axis label for nanoseconds given as a float (negative too), with
/// three or four significant digits and a spaced unit: `850 ns`, `12.35 µs`.
pub(crate) fn axis_ns(ns: f64) -> String {
    let a = ns.abs();
    if a < 999.5 {
        format!("{} ns", fmt_sig(ns, 3))
    } else if a < 999_500.0 {
        format!("{} µs", fmt_sig(ns / 1e3, 4))
    } else if a < 999_500_000.0 {
        format!("{} ms", fmt_sig(ns / 1e6, 4))
    } else if a < 9_999.5e9 {
        format!("{} s", fmt_sig(ns / 1e9, 4))
    } else {
        format!("{:.2e} s", ns / 1e9)
    }
}

/// Formats a count with thousands separators: 1000000 → "1,000,000".
pub(super) fn fmt_count(n: usize) -> String {
    let digits = n.to_string();
    let mut groups = Vec::new();
    let mut rest = digits.as_str();
    while rest.len() > 3 {
        let (head, tail) = rest.split_at(rest.len() - 3);
        groups.push(tail);
        rest = head;
    }
    groups.push(rest);
    groups.reverse();
    groups.join(",")
}

/// Shortens `text` with "…" until it fits `max_px` at `style`.
pub(super) fn fit_text<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    text: &str,
    style: &TextStyle<'_>,
    max_px: u32,
) -> String {
    let fits = |t: &str| {
        area.estimate_text_size(t, style)
            .map(|(w, _)| w <= max_px)
            .unwrap_or(true)
    };
    if fits(text) {
        return text.to_string();
    }
    let chars: Vec<char> = text.chars().collect();
    for keep in (1..chars.len()).rev() {
        let t: String = chars[..keep].iter().collect::<String>() + "…";
        if fits(&t) {
            return t;
        }
    }
    "…".to_string()
}

/// Draws the figure title centred at the top and returns the area below it.
pub(crate) fn title_area<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    title: &str,
) -> Result<DrawingArea<DB, Shift>, String> {
    let (w, _) = root.dim_in_pixel();
    let style = bold(24.0).pos(plotters::style::text_anchor::Pos::new(
        HPos::Center,
        VPos::Top,
    ));
    let title = fit_text(root, title, &style, w.saturating_sub(40));
    root.draw_text(&title, &style, ((w / 2) as i32, 12))
        .map_err(de)?;
    Ok(root.margin(48, 0, 0, 0))
}

/// Draws "no data" in the middle of `area`.
pub(super) fn draw_no_data<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    msg: &str,
) -> Result<(), String> {
    let (w, h) = area.dim_in_pixel();
    let style = font(22.0)
        .color(&TEXT_GRAY)
        .pos(plotters::style::text_anchor::Pos::new(
            plotters::style::text_anchor::HPos::Center,
            plotters::style::text_anchor::VPos::Center,
        ));
    area.draw_text(msg, &style, ((w / 2) as i32, (h / 2) as i32))
        .map_err(de)
}

/// Draws a chart's legend at `pos` in `size`-point type, on a light box.
pub(crate) fn draw_legend<'a, DB: DrawingBackend + 'a, CT: plotters::coord::CoordTranslate>(
    chart: &mut ChartContext<'a, DB, CT>,
    pos: SeriesLabelPosition,
    size: f64,
) -> Result<(), String> {
    chart
        .configure_series_labels()
        .position(pos)
        .label_font(font(size))
        .background_style(WHITE.mix(0.9))
        .border_style(RGBColor(200, 200, 200))
        .draw()
        .map_err(de)
}

/// Turns a plotters error into a message.
pub(crate) fn de<E: std::error::Error + Send + Sync>(e: DrawingAreaErrorKind<E>) -> String {
    e.to_string()
}
