//! Figures of the evaluation (X-Lane §6.2–6.3) as PNG and SVG files that
//! read without the JSON next to them.
//!
//! * [`latency_cdf`] — Fig. 5: the latency distribution of each
//!   configuration as a CDF on a logarithmic latency axis, with p50 and p99
//!   marked.
//! * [`percentile_ladder`] — Fig. 6: tail latency at p50, p90, p99, …,
//!   p99.999 (the "number of nines").
//! * [`outlier_timeseries`] — Fig. 4: the worst packets over the run, one
//!   panel per configuration, marker colour and shape by diagnosed cause.
//!
//! Every function writes `<stem>.png` and `<stem>.svg` and returns both
//! paths. Text is rendered with DejaVu Sans, embedded in the binary (crate
//! `dejavu`), so nothing has to be installed on the machine. Large inputs
//! are reduced before drawing (a CDF is drawn from about 2000 order
//! statistics plus the exact minimum, maximum and tail percentiles; scatter
//! points that fall on the same pixel are drawn once), so plotting 10^6
//! samples stays fast. Latencies of 0 ns are drawn at 1 ns (log axis).
//!
//! Percentiles use the nearest-rank definition of the crate: the p-th
//! percentile of n sorted samples is the sample at rank ⌈p·n⌉ (1-based).

use std::collections::{HashMap, HashSet};
use std::ffi::OsString;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint, KeyPointWeight, Ranged};
use plotters::coord::{CoordTranslate, Shift};
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, VPos};
use plotters::style::{register_font, FontStyle};
use plotters_backend::{BackendColor, BackendCoord, BackendTextStyle, DrawingErrorKind};

use ab_glyph::{Font, FontRef, PxScale, ScaleFont};

/// Width in pixels of every figure.
pub const WIDTH: u32 = 1200;
/// Height in pixels of [`latency_cdf`] and [`percentile_ladder`] figures,
/// and the minimum height of [`outlier_timeseries`] (which grows with the
/// number of configurations).
pub const HEIGHT: u32 = 700;

/// Width of the legend column on the right of every figure.
const LEGEND_W: u32 = 290;
/// Number of order statistics a CDF is drawn from.
const CDF_POINTS: usize = 2000;
/// Font family name used for every text; registered to the embedded font.
/// "sans-serif" also makes SVG viewers pick a sans font for the text.
const FONT: &str = "sans-serif";

/// One configuration's latency samples.
#[derive(Debug, Clone, Copy)]
pub struct Series<'a> {
    /// Configuration name, shown in the legend.
    pub name: &'a str,
    /// Latencies in nanoseconds, sorted ascending.
    pub sorted_ns: &'a [u64],
}

/// One outlier packet for [`outlier_timeseries`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutlierPoint {
    /// Configuration the packet belongs to (one panel each).
    pub config: String,
    /// Send time since the start of the run, in nanoseconds.
    pub t_ns: u64,
    /// Measured latency in nanoseconds.
    pub latency_ns: u64,
    /// Diagnosed cause: "host gap", "sender late", "queueing", "loss",
    /// "unexplained" (other strings get their own marker as well).
    pub cause: String,
}

/// Why a figure could not be written.
#[derive(Debug, thiserror::Error)]
pub enum PlotError {
    /// The embedded font could not be parsed or registered.
    #[error("font for plot text unavailable: {0}")]
    Font(String),
    /// The directory for the output files could not be created.
    #[error("cannot create directory {path}: {source}")]
    Io {
        /// Directory that could not be created.
        path: PathBuf,
        /// Underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The output stem has no file name (e.g. empty or `..`).
    #[error("output stem {0:?} has no file name")]
    BadStem(PathBuf),
    /// The drawing backend failed (includes failures to write the file).
    #[error("drawing {path} failed: {message}")]
    Backend {
        /// File being drawn.
        path: PathBuf,
        /// Backend error message.
        message: String,
    },
}

// ---------------------------------------------------------------------------
// Public entry points

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

// ---------------------------------------------------------------------------
// Output plumbing

/// A figure that can be drawn on any plotters backend (the experiments'
/// own figures implement it and go through [`write_both`]).
pub(crate) trait Figure {
    fn size(&self) -> (u32, u32);
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String>;
}

/// Registers DejaVu Sans (regular and bold) as `sans-serif` for every
/// figure of the crate, once per process.
pub(crate) fn ensure_font() -> Result<(), String> {
    static REGISTERED: OnceLock<Result<(), String>> = OnceLock::new();
    REGISTERED
        .get_or_init(|| {
            register_font(FONT, FontStyle::Normal, dejavu::sans::regular())
                .map_err(|_| "DejaVu Sans (regular) is not a valid font".to_string())?;
            register_font(FONT, FontStyle::Bold, dejavu::sans::bold())
                .map_err(|_| "DejaVu Sans (bold) is not a valid font".to_string())
        })
        .clone()
}

fn with_suffix(stem: &Path, ext: &str) -> PathBuf {
    let mut s: OsString = stem.as_os_str().to_owned();
    s.push(".");
    s.push(ext);
    PathBuf::from(s)
}

/// Writes `fig` as `<stem>.png` and `<stem>.svg` (the font registered,
/// the directory created).
pub(crate) fn write_both<F: Figure>(fig: &F, stem: &Path) -> Result<[PathBuf; 2], PlotError> {
    ensure_font().map_err(PlotError::Font)?;
    if stem.file_name().is_none() {
        return Err(PlotError::BadStem(stem.to_path_buf()));
    }
    if let Some(dir) = stem.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|source| PlotError::Io {
            path: dir.to_path_buf(),
            source,
        })?;
    }
    let png = with_suffix(stem, "png");
    let svg = with_suffix(stem, "svg");
    let backend_err = |path: &Path| {
        let path = path.to_path_buf();
        move |message: String| PlotError::Backend { path, message }
    };
    {
        let root = PngBackend {
            inner: BitMapBackend::new(&png, fig.size()),
        }
        .into_drawing_area();
        fig.draw(&root).map_err(backend_err(&png))?;
        root.present()
            .map_err(|e| e.to_string())
            .map_err(backend_err(&png))?;
    }
    {
        let root = SVGBackend::new(&svg, fig.size()).into_drawing_area();
        fig.draw(&root).map_err(backend_err(&svg))?;
        root.present()
            .map_err(|e| e.to_string())
            .map_err(backend_err(&svg))?;
    }
    Ok([png, svg])
}

// ---------------------------------------------------------------------------
// PNG text rendering
//
// plotters' own ab_glyph text path drops each glyph's left bearing and
// truncates positions per glyph, which gives uneven letter spacing and
// raised decimal points. The PNG backend below delegates all drawing to
// `BitMapBackend` except text, which it lays out on a common baseline with
// sub-pixel pen positions and kerning.

/// Regular and bold DejaVu Sans, parsed once.
fn glyph_fonts() -> Option<&'static (FontRef<'static>, FontRef<'static>)> {
    static FONTS: OnceLock<Option<(FontRef<'static>, FontRef<'static>)>> = OnceLock::new();
    FONTS
        .get_or_init(|| {
            let regular = FontRef::try_from_slice(dejavu::sans::regular()).ok()?;
            let bold = FontRef::try_from_slice(dejavu::sans::bold()).ok()?;
            Some((regular, bold))
        })
        .as_ref()
}

/// Glyphs of `text` positioned on a baseline at y = ascent, x from 0.
struct TextLayout {
    glyphs: Vec<ab_glyph::Glyph>,
    width: f32,
    height: f32,
}

fn layout_text(font: &FontRef<'static>, size: f32, text: &str) -> TextLayout {
    let scale = PxScale::from(size.max(1.0));
    let sf = font.as_scaled(scale);
    let ascent = sf.ascent();
    let mut x = 0f32;
    let mut prev = None;
    let mut glyphs = Vec::with_capacity(text.len());
    for c in text.chars() {
        let id = sf.glyph_id(c);
        if let Some(p) = prev {
            x += sf.kern(p, id);
        }
        glyphs.push(id.with_scale_and_position(scale, ab_glyph::point(x, ascent)));
        x += sf.h_advance(id);
        prev = Some(id);
    }
    TextLayout {
        glyphs,
        width: x,
        height: ascent - sf.descent(),
    }
}

fn font_for<S: BackendTextStyle>(style: &S) -> Option<&'static FontRef<'static>> {
    let (regular, bold) = glyph_fonts()?;
    Some(match style.style() {
        plotters_backend::FontStyle::Bold => bold,
        _ => regular,
    })
}

/// `BitMapBackend` with better text rendering.
struct PngBackend<'a> {
    inner: BitMapBackend<'a>,
}

impl DrawingBackend for PngBackend<'_> {
    type ErrorType = <BitMapBackend<'static> as DrawingBackend>::ErrorType;

    fn get_size(&self) -> (u32, u32) {
        self.inner.get_size()
    }

    fn ensure_prepared(&mut self) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.inner.ensure_prepared()
    }

    fn present(&mut self) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.inner.present()
    }

    fn draw_pixel(
        &mut self,
        point: BackendCoord,
        color: BackendColor,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.inner.draw_pixel(point, color)
    }

    fn draw_line<S: plotters_backend::BackendStyle>(
        &mut self,
        from: BackendCoord,
        to: BackendCoord,
        style: &S,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.inner.draw_line(from, to, style)
    }

    fn draw_rect<S: plotters_backend::BackendStyle>(
        &mut self,
        upper_left: BackendCoord,
        bottom_right: BackendCoord,
        style: &S,
        fill: bool,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.inner.draw_rect(upper_left, bottom_right, style, fill)
    }

    fn blit_bitmap(
        &mut self,
        pos: BackendCoord,
        (iw, ih): (u32, u32),
        src: &[u8],
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.inner.blit_bitmap(pos, (iw, ih), src)
    }

    fn estimate_text_size<S: BackendTextStyle>(
        &self,
        text: &str,
        style: &S,
    ) -> Result<(u32, u32), DrawingErrorKind<Self::ErrorType>> {
        let Some(font) = font_for(style) else {
            return self.inner.estimate_text_size(text, style);
        };
        let l = layout_text(font, style.size() as f32, text);
        Ok((l.width.ceil() as u32, l.height.ceil() as u32))
    }

    fn draw_text<S: BackendTextStyle>(
        &mut self,
        text: &str,
        style: &S,
        pos: BackendCoord,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        let color = style.color();
        if color.alpha == 0.0 {
            return Ok(());
        }
        let Some(font) = font_for(style) else {
            return self.inner.draw_text(text, style, pos);
        };
        let l = layout_text(font, style.size() as f32, text);
        let (w, h) = (l.width.round() as i32, l.height.round() as i32);
        let dx = match style.anchor().h_pos {
            HPos::Left => 0,
            HPos::Right => -w,
            HPos::Center => -w / 2,
        };
        let dy = match style.anchor().v_pos {
            VPos::Top => 0,
            VPos::Center => -h / 2,
            VPos::Bottom => -h,
        };
        let trans = style.transform();
        let (bw, bh) = self.get_size();
        let mut pixels = Vec::new();
        for g in l.glyphs {
            if let Some(outline) = font.outline_glyph(g) {
                let b = outline.px_bounds();
                let (ox, oy) = (b.min.x as i32, b.min.y as i32);
                outline.draw(|x, y, cov| {
                    if cov > 0.0 {
                        pixels.push((ox + x as i32, oy + y as i32, cov));
                    }
                });
            }
        }
        for (x, y, cov) in pixels {
            let (x, y) = trans.transform(x + dx, y + dy);
            let (x, y) = (pos.0 + x, pos.1 + y);
            if x >= 0 && y >= 0 && x < bw as i32 && y < bh as i32 {
                let c = BackendColor {
                    alpha: color.alpha * f64::from(cov.min(1.0)),
                    rgb: color.rgb,
                };
                self.inner.draw_pixel((x, y), c)?;
            }
        }
        Ok(())
    }
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

// ---------------------------------------------------------------------------
// Styling helpers

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

const TEXT_GRAY: RGBColor = RGBColor(90, 90, 90);

pub(crate) fn font(size: f64) -> TextStyle<'static> {
    (FONT, size).into_font().into()
}

fn bold(size: f64) -> TextStyle<'static> {
    (FONT, size, FontStyle::Bold).into_font().into()
}

/// Formats `x` with at most `sig` significant digits, trailing zeros removed.
fn fmt_sig(x: f64, sig: i32) -> String {
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
fn fmt_count(n: usize) -> String {
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
fn fit_text<DB: DrawingBackend>(
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
fn draw_no_data<DB: DrawingBackend>(
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

// ---------------------------------------------------------------------------
// Axes

/// Logarithmic axis over nanoseconds with readable ticks (1-2-5 per
/// decade, or evenly spaced ticks when the range is narrow).
#[derive(Clone, Debug)]
struct LogAxis {
    lo: f64,
    hi: f64,
}

impl LogAxis {
    /// Axis covering `[min, max]` (ns, clamped to ≥ 1) with a little room.
    fn covering(min: f64, max: f64) -> Self {
        let min = min.max(1.0);
        let max = max.max(min);
        let (l, h) = (min.ln(), max.ln());
        let span = (h - l).max(1.1f64.ln());
        let center = (l + h) / 2.0;
        let half = span / 2.0 * 1.08;
        LogAxis {
            lo: (center - half).exp().max(0.5),
            hi: (center + half).exp(),
        }
    }

    fn ticks(&self, max_n: usize, min_gap_frac: f64) -> Vec<f64> {
        log_ticks(self.lo, self.hi, max_n, min_gap_frac)
    }
}

impl Ranged for LogAxis {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        let v = value.max(self.lo * 1e-3).ln();
        let (l, h) = (self.lo.ln(), self.hi.ln());
        let frac = (v - l) / (h - l);
        let px = limit.0 as f64 + frac * (limit.1 - limit.0) as f64;
        px.round().clamp(-1e6, 1e6) as i32
    }

    fn key_points<Hint: KeyPointHint>(&self, hint: Hint) -> Vec<f64> {
        match hint.weight() {
            KeyPointWeight::Bold => self.ticks(hint.max_num_points().min(10), 0.07),
            KeyPointWeight::Any => self.ticks(hint.max_num_points().min(40), 0.015),
        }
    }

    fn range(&self) -> Range<f64> {
        self.lo..self.hi
    }
}

/// Tick positions on a log axis over `[lo, hi]`: the candidate set with the
/// most ticks that has at most `max_n` ticks, none closer than
/// `min_gap_frac` of the axis length to its neighbour.
fn log_ticks(lo: f64, hi: f64, max_n: usize, min_gap_frac: f64) -> Vec<f64> {
    if max_n == 0 || !(lo > 0.0 && hi > lo && hi.is_finite()) {
        return Vec::new();
    }
    let axis_len = (hi / lo).ln();
    let mut candidates: Vec<Vec<f64>> = Vec::new();
    // Mantissa sets per decade, every `step` decades.
    let first_dec = lo.log10().floor() as i32 - 1;
    let last_dec = hi.log10().ceil() as i32 + 1;
    let sets: [&[f64]; 4] = [
        &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0],
        &[1.0, 2.0, 5.0],
        &[1.0, 3.0],
        &[1.0],
    ];
    for set in sets {
        candidates.push(decade_ticks(lo, hi, first_dec, last_dec, set, 1));
    }
    for step in [2, 3, 5, 10, 20] {
        candidates.push(decade_ticks(lo, hi, first_dec, last_dec, &[1.0], step));
    }
    // Evenly spaced ticks for narrow ranges.
    if hi / lo < 4.0 {
        let width = hi - lo;
        let mut step = 10f64.powf((width / 50.0).log10().floor());
        while step <= width {
            for m in [1.0, 2.0, 2.5, 5.0] {
                let s = step * m;
                let start = (lo / s).ceil();
                let end = (hi / s).floor();
                if end - start > 60.0 {
                    continue;
                }
                let mut v = Vec::new();
                let mut k = start;
                while k <= end {
                    v.push(k * s);
                    k += 1.0;
                }
                candidates.push(v);
            }
            step *= 10.0;
        }
    }
    let min_gap = |v: &[f64]| {
        v.windows(2)
            .map(|w| (w[1] / w[0]).ln() / axis_len)
            .fold(f64::INFINITY, f64::min)
    };
    let ok = |v: &Vec<f64>| v.len() <= max_n && min_gap(v) >= min_gap_frac;
    candidates
        .iter()
        .filter(|v| ok(v) && v.len() >= 2)
        .max_by_key(|v| v.len())
        .or_else(|| candidates.iter().filter(|v| ok(v)).max_by_key(|v| v.len()))
        .cloned()
        .unwrap_or_default()
}

fn decade_ticks(lo: f64, hi: f64, d0: i32, d1: i32, mantissas: &[f64], step: i32) -> Vec<f64> {
    let mut out = Vec::new();
    let mut d = d0 - d0.rem_euclid(step);
    while d <= d1 {
        let base = 10f64.powi(d);
        for m in mantissas {
            let v = m * base;
            // Tolerate rounding at the ends.
            if v >= lo * (1.0 - 1e-9) && v <= hi * (1.0 + 1e-9) {
                out.push(v);
            }
        }
        d += step;
    }
    out
}

/// Category axis: values 0..n at integer positions.
#[derive(Clone, Debug)]
struct CategoryAxis {
    n: usize,
}

impl Ranged for CategoryAxis {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        let frac = (value + 0.5) / self.n.max(1) as f64;
        (limit.0 as f64 + frac * (limit.1 - limit.0) as f64).round() as i32
    }

    fn key_points<Hint: KeyPointHint>(&self, _hint: Hint) -> Vec<f64> {
        (0..self.n).map(|i| i as f64).collect()
    }

    fn range(&self) -> Range<f64> {
        -0.5..(self.n as f64 - 0.5)
    }
}

// ---------------------------------------------------------------------------
// Statistics helpers

/// Nearest-rank percentile num/den of sorted samples (None when empty).
fn percentile(sorted: &[u64], num: u64, den: u64) -> Option<u64> {
    if den == 0 {
        return None;
    }
    xlane_stats::percentile(sorted, num as f64 / den as f64)
}

fn clamp_ns(v: u64) -> f64 {
    (v as f64).max(1.0)
}

/// Indices of the order statistics a CDF is drawn from.
fn cdf_indices(n: usize) -> Vec<usize> {
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

// ---------------------------------------------------------------------------
// Fig. 5: CDF

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

// ---------------------------------------------------------------------------
// Fig. 6: percentile ladder

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

// ---------------------------------------------------------------------------
// Fig. 4: outlier time series

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_durations() {
        let cases = [
            (0.0, "0 ns"),
            (850.0, "850 ns"),
            (1000.0, "1 µs"),
            (4133.0, "4.133 µs"),
            (12_500.0, "12.5 µs"),
            (2_000_000.0, "2 ms"),
            (48_000_000_000.0, "48 s"),
            (1.8e19, "1.80e10 s"),
        ];
        for (ns, want) in cases {
            assert_eq!(axis_ns(ns), want, "{ns}");
        }
        let counts = [
            (0, "0"),
            (999, "999"),
            (1000, "1,000"),
            (1_000_000, "1,000,000"),
        ];
        for (n, want) in counts {
            assert_eq!(fmt_count(n), want);
        }
    }

    #[test]
    fn nearest_rank() {
        let v: Vec<u64> = (1..=100).collect();
        assert_eq!(percentile(&v, 1, 2), Some(50));
        assert_eq!(percentile(&v, 99, 100), Some(99));
        assert_eq!(percentile(&v, 999, 1000), Some(100));
        assert_eq!(percentile(&[], 1, 2), None);
        assert_eq!(percentile(&[7], 1, 2), Some(7));
    }

    #[test]
    fn ticks_are_readable() {
        // (lo, hi, min ticks)
        let cases = [
            (4000.0, 4300.0, 3),
            (900.0, 60_000_000.0, 4),
            (1.0, 1e12, 4),
            (3000.0, 9000.0, 3),
            (0.5, 2.0, 2),
        ];
        for (lo, hi, min) in cases {
            let axis = LogAxis::covering(lo, hi);
            let t = axis.ticks(10, 0.07);
            assert!(t.len() >= min && t.len() <= 10, "{lo}..{hi}: {t:?}");
            assert!(t.windows(2).all(|w| w[0] < w[1]), "{t:?}");
        }
    }

    #[test]
    fn cdf_indices_keep_ends_and_tail() {
        let idx = cdf_indices(1_000_000);
        assert_eq!(idx.first(), Some(&0));
        assert_eq!(idx.last(), Some(&999_999));
        assert!(idx.contains(&(999_990 - 1)));
        assert!(idx.len() < 2 * CDF_POINTS);
        assert_eq!(cdf_indices(3), vec![0, 1, 2]);
        assert!(cdf_indices(0).is_empty());
    }
}
