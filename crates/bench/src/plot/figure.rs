//! The chart scaffold: the inputs (series, outlier points), the error, the
//! `Figure` trait and the writing of a figure as PNG and SVG; the percentile
//! and log-clamp helpers the figures share.

use super::backend::PngBackend;
use super::style::FONT;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::{register_font, FontStyle};

/// One configuration's latency samples.
#[derive(Debug, Clone, Copy)]
pub struct Series<'a> {
    /// Configuration name, shown in the legend.
    pub name: &'a str,
    /// Latencies in nanoseconds, sorted ascending.
    pub sorted_ns: &'a [u64],
}

/// One outlier packet for [`outlier_timeseries`](crate::plot::outlier_timeseries).
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

/// Nearest-rank percentile num/den of sorted samples (None when empty).
pub(super) fn percentile(sorted: &[u64], num: u64, den: u64) -> Option<u64> {
    if den == 0 {
        return None;
    }
    xlane_stats::percentile(sorted, num as f64 / den as f64)
}

pub(super) fn clamp_ns(v: u64) -> f64 {
    (v as f64).max(1.0)
}
