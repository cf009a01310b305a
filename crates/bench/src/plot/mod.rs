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

mod axis;
mod backend;
mod cdf;
mod figure;
mod ladder;
mod outliers;
mod style;
#[cfg(test)]
mod tests;

pub use cdf::latency_cdf;
pub(crate) use figure::{ensure_font, write_both, Figure};
pub use figure::{OutlierPoint, PlotError, Series};
pub use ladder::percentile_ladder;
pub use outliers::outlier_timeseries;
pub(crate) use style::{axis_ns, de, draw_legend, font, palette, title_area};
pub use style::{HEIGHT, WIDTH};
