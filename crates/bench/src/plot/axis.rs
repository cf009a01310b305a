//! The axes: a logarithmic nanosecond axis with readable ticks and a category
//! axis.

use std::ops::Range;

use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint, KeyPointWeight, Ranged};

/// Logarithmic axis over nanoseconds with readable ticks (1-2-5 per
/// decade, or evenly spaced ticks when the range is narrow).
#[derive(Clone, Debug)]
pub(super) struct LogAxis {
    pub(super) lo: f64,
    pub(super) hi: f64,
}

impl LogAxis {
    /// Axis covering `[min, max]` (ns, clamped to ≥ 1) with a little room.
    pub(super) fn covering(min: f64, max: f64) -> Self {
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

    pub(super) fn ticks(&self, max_n: usize, min_gap_frac: f64) -> Vec<f64> {
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
pub(super) struct CategoryAxis {
    pub(super) n: usize,
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
