//! Suspicion models: how long a silence has to be before a peer is suspected.
//!
//! Every detector in this crate (X-FD and both baselines) is the same
//! [`Detector`](crate::Detector) around a per-peer [`SuspicionModel`]. A model
//! turns the arrival history of one peer and the current time into a
//! **suspicion level** that never decreases while no heartbeat arrives; a
//! peer is suspected once its level is strictly above the detector's
//! threshold.
//!
//! | model | level at time `t` | threshold unit |
//! |---|---|---|
//! | [`FixedTimeout`] ([`Anchor::Arrival`]) | `t − last arrival − T` | ns (Λ) |
//! | [`FixedTimeout`] ([`Anchor::SendTime`]) | `t − last send time − T` (synchronized clocks: the latency of the next heartbeat) | ns (Λ) |
//! | [`PhiAccrual`] | `φ = −log10 P(X > t − last arrival)`, `X ~ N(μ, σ²)` of the last inter-arrival times | φ |
//!
//! Because the level only grows during a silence, the highest level a live
//! peer ever reached is the level just before each arrival, and
//! [`SuspicionModel::on_arrival`] returns exactly that. So a recorded trace is
//! replayed once per model ([`replay`]) and the accuracy at any threshold is a
//! binary search ([`ReplaySummary::accuracy`]); the smallest threshold with no
//! false suspicion is [`ReplaySummary::max_level`], exactly.

use crate::Nanos;

/// One heartbeat arrival as a model sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Arrival {
    /// Arrival time (kernel or NIC stamp), ns.
    pub rx_ns: Nanos,
    /// The sender's send time from the frame header, if known, ns.
    pub send_ns: Option<Nanos>,
}

impl Arrival {
    /// An arrival with no send time.
    pub fn at(rx_ns: Nanos) -> Self {
        Arrival {
            rx_ns,
            send_ns: None,
        }
    }
}

/// Which model a detector uses (for reports and the shared table).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ModelKind {
    /// [`FixedTimeout`] anchored at the last arrival.
    TimeoutArrival,
    /// [`FixedTimeout`] anchored at the last send time.
    TimeoutSend,
    /// [`PhiAccrual`].
    Phi,
}

impl ModelKind {
    /// Stable numeric id (stored in the shared table).
    pub fn as_u32(self) -> u32 {
        match self {
            ModelKind::TimeoutArrival => 0,
            ModelKind::TimeoutSend => 1,
            ModelKind::Phi => 2,
        }
    }

    /// The inverse of [`Self::as_u32`].
    pub fn from_u32(v: u32) -> Option<Self> {
        match v {
            0 => Some(ModelKind::TimeoutArrival),
            1 => Some(ModelKind::TimeoutSend),
            2 => Some(ModelKind::Phi),
            _ => None,
        }
    }

    /// Short name.
    pub fn name(self) -> &'static str {
        match self {
            ModelKind::TimeoutArrival => "timeout",
            ModelKind::TimeoutSend => "timeout-send",
            ModelKind::Phi => "phi",
        }
    }
}

/// The per-peer suspicion model (see the module docs).
///
/// Contract: between two arrivals, [`level`](Self::level) is non-decreasing in
/// `now`, and [`suspect_at`](Self::suspect_at) is the first instant at which it
/// is strictly above the threshold. No method allocates; all do bounded work.
pub trait SuspicionModel {
    /// Which model this is.
    fn kind(&self) -> ModelKind;
    /// Forgets the history (the peer restarted).
    fn reset(&mut self);
    /// Learns from an arrival. Returns the level reached just before it (the
    /// highest level of the silence it ends), or `None` for the first arrival
    /// after construction or [`reset`](Self::reset).
    fn on_arrival(&mut self, a: Arrival) -> Option<f64>;
    /// The level at `now`; `None` before the first arrival.
    fn level(&self, now: Nanos) -> Option<f64>;
    /// The first instant at which the level is above `threshold`; `None`
    /// before the first arrival or if it never gets there.
    fn suspect_at(&self, threshold: f64) -> Option<Nanos>;
}

/// Where a [`FixedTimeout`] counts the silence from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Anchor {
    /// The last arrival (receiver clock only; the classic timeout).
    Arrival,
    /// The send time written by the sender (clocks synchronized, as X-Lane
    /// assumes with PTP): the level just before an arrival is that
    /// heartbeat's latency plus the sender's lateness, the paper's Fig. 7
    /// metric. Falls back to the arrival time when no send time is given.
    SendTime,
}

/// A fixed timeout: suspected once no heartbeat arrived for `T + Λ`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FixedTimeout {
    period_ns: Nanos,
    anchor: Anchor,
    last: Option<Nanos>,
}

impl FixedTimeout {
    /// A timeout for heartbeats every `period_ns`.
    pub fn new(period_ns: Nanos, anchor: Anchor) -> Self {
        FixedTimeout {
            period_ns,
            anchor,
            last: None,
        }
    }

    fn anchor_of(&self, a: Arrival) -> Nanos {
        match self.anchor {
            Anchor::Arrival => a.rx_ns,
            Anchor::SendTime => a.send_ns.unwrap_or(a.rx_ns),
        }
    }

    fn level_from(&self, last: Nanos, now: Nanos) -> f64 {
        (now as i128 - last as i128 - self.period_ns as i128) as f64
    }
}

impl SuspicionModel for FixedTimeout {
    fn kind(&self) -> ModelKind {
        match self.anchor {
            Anchor::Arrival => ModelKind::TimeoutArrival,
            Anchor::SendTime => ModelKind::TimeoutSend,
        }
    }

    fn reset(&mut self) {
        self.last = None;
    }

    fn on_arrival(&mut self, a: Arrival) -> Option<f64> {
        let before = self.last.map(|l| self.level_from(l, a.rx_ns));
        let anchor = self.anchor_of(a);
        // Never move the anchor back (a reordered or re-stamped heartbeat).
        self.last = Some(self.last.map_or(anchor, |l| l.max(anchor)));
        before
    }

    fn level(&self, now: Nanos) -> Option<f64> {
        self.last.map(|l| self.level_from(l, now))
    }

    fn suspect_at(&self, threshold: f64) -> Option<Nanos> {
        let last = self.last?;
        if !threshold.is_finite() {
            return (threshold < 0.0).then_some(0);
        }
        // First integer t with t − last − T > θ: t = last + T + ⌊θ⌋ + 1.
        let floor = threshold.floor().clamp(-1e30, 1e30) as i128;
        let t = last as i128 + self.period_ns as i128 + floor + 1;
        Some(t.clamp(0, u64::MAX as i128) as u64)
    }
}

/// Largest inter-arrival time the phi model keeps (longer gaps are clamped),
/// so its exact integer sums cannot overflow.
pub const PHI_MAX_GAP_NS: u64 = 1 << 40;

/// Parameters of a [`PhiAccrual`] model.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PhiParams {
    /// Heartbeat period T (the estimate before any inter-arrival is known).
    pub period_ns: Nanos,
    /// Inter-arrival times kept (1..=65536).
    pub window: usize,
    /// Floor of the standard deviation, ns (≥ 1).
    pub min_std_ns: f64,
}

impl PhiParams {
    /// Defaults after Hayashibara et al. and common practice: a window of 1000
    /// inter-arrivals and a standard-deviation floor of T/10.
    pub fn for_period(period_ns: Nanos) -> Self {
        PhiParams {
            period_ns,
            window: 1000,
            min_std_ns: (period_ns as f64 / 10.0).max(1.0),
        }
    }
}

/// Why phi parameters were refused.
#[derive(Clone, Copy, Debug, PartialEq, thiserror::Error)]
pub enum PhiParamsError {
    /// Window outside 1..=65536.
    #[error("phi window {0} outside 1..=65536")]
    Window(usize),
    /// Standard-deviation floor not a finite number ≥ 1 ns.
    #[error("phi min std {0} ns must be finite and ≥ 1")]
    MinStd(f64),
    /// Period 0.
    #[error("period must be > 0")]
    Period,
}

/// The phi-accrual failure detector (Hayashibara, Défago, Yared, Katayama,
/// SRDS 2004): inter-arrival times of the last `window` heartbeats give a mean
/// μ and standard deviation σ; the level is `φ(t) = −log10(1 − F(t − t_last))`
/// with `F` the normal CDF of `N(μ, max(σ, min_std)²)`. Before the first
/// inter-arrival μ = T and σ = max(T/4, min_std).
///
/// Sums are kept exactly in integers (no drift over 10⁶ heartbeats); the
/// normal tail is computed in log space, so φ stays finite for silences of
/// thousands of σ.
#[derive(Clone, Debug)]
pub struct PhiAccrual {
    params: PhiParams,
    gaps: Box<[u64]>,
    head: usize,
    len: usize,
    sum: u128,
    sumsq: u128,
    last: Option<Nanos>,
}

impl PhiAccrual {
    /// A phi model; allocates its window here (only).
    pub fn new(params: PhiParams) -> Result<Self, PhiParamsError> {
        if params.window == 0 || params.window > 65536 {
            return Err(PhiParamsError::Window(params.window));
        }
        if !(params.min_std_ns.is_finite() && params.min_std_ns >= 1.0) {
            return Err(PhiParamsError::MinStd(params.min_std_ns));
        }
        if params.period_ns == 0 {
            return Err(PhiParamsError::Period);
        }
        Ok(PhiAccrual {
            params,
            gaps: vec![0; params.window].into_boxed_slice(),
            head: 0,
            len: 0,
            sum: 0,
            sumsq: 0,
            last: None,
        })
    }

    /// The parameters.
    pub fn params(&self) -> PhiParams {
        self.params
    }

    /// Current (μ, σ) in ns, σ already floored.
    pub fn mean_std(&self) -> (f64, f64) {
        if self.len == 0 {
            let t = self.params.period_ns as f64;
            return (t, (t / 4.0).max(self.params.min_std_ns));
        }
        let n = self.len as u128;
        let mean = self.sum as f64 / n as f64;
        // n·Σx² − (Σx)² ≥ 0 exactly in integers.
        let num = (n * self.sumsq).saturating_sub(self.sum * self.sum);
        let var = num as f64 / (n as f64 * n as f64);
        (mean, var.sqrt().max(self.params.min_std_ns))
    }

    fn phi_at(&self, last: Nanos, now: Nanos) -> f64 {
        let (mean, std) = self.mean_std();
        let elapsed = now as i128 - last as i128;
        phi_of_z((elapsed as f64 - mean) / std)
    }

    fn push_gap(&mut self, gap: u64) {
        let g = gap.min(PHI_MAX_GAP_NS);
        if self.len == self.gaps.len() {
            let old = self.gaps[self.head] as u128;
            self.sum -= old;
            self.sumsq -= old * old;
        } else {
            self.len += 1;
        }
        self.gaps[self.head] = g;
        self.head = (self.head + 1) % self.gaps.len();
        self.sum += g as u128;
        self.sumsq += (g as u128) * (g as u128);
    }
}

impl SuspicionModel for PhiAccrual {
    fn kind(&self) -> ModelKind {
        ModelKind::Phi
    }

    fn reset(&mut self) {
        self.head = 0;
        self.len = 0;
        self.sum = 0;
        self.sumsq = 0;
        self.last = None;
    }

    fn on_arrival(&mut self, a: Arrival) -> Option<f64> {
        let Some(last) = self.last else {
            self.last = Some(a.rx_ns);
            return None;
        };
        let before = self.phi_at(last, a.rx_ns);
        if a.rx_ns > last {
            self.push_gap(a.rx_ns - last);
            self.last = Some(a.rx_ns);
        }
        Some(before)
    }

    fn level(&self, now: Nanos) -> Option<f64> {
        self.last.map(|l| self.phi_at(l, now))
    }

    fn suspect_at(&self, threshold: f64) -> Option<Nanos> {
        let last = self.last?;
        if threshold.is_nan() || threshold == f64::INFINITY {
            return None;
        }
        if threshold < 0.0 {
            return Some(last);
        }
        let z = z_for_phi(threshold)?;
        let (mean, std) = self.mean_std();
        let e = mean + z * std;
        let t = last as f64 + e;
        if !t.is_finite() || t >= u64::MAX as f64 {
            return None;
        }
        // φ > θ from here on (to within the bisection's 1e-9 in z).
        Some(t.max(last as f64).floor() as u64 + 1)
    }
}

/// `ln P(Z > z)` for a standard normal `Z`, accurate to ~1e-12 relative for
/// every finite `z` (no underflow: for large `z` the result is about −z²/2).
pub fn ln_normal_tail(z: f64) -> f64 {
    if z.is_nan() {
        return f64::NAN;
    }
    if z < 0.0 {
        // Q(z) = 1 − Q(−z), Q(−z) ≤ 1/2.
        return (-ln_normal_tail(-z).exp()).ln_1p();
    }
    if z < 3.0 {
        // erf by its positive series: erf(x) = 2/√π · e^{−x²} · Σ 2ⁿx^{2n+1}/(2n+1)!!.
        let x = z / std::f64::consts::SQRT_2;
        let x2 = x * x;
        let mut term = x;
        let mut sum = x;
        let mut n = 0.0;
        while term > sum * 1e-17 && n < 200.0 {
            n += 1.0;
            term *= 2.0 * x2 / (2.0 * n + 1.0);
            sum += term;
        }
        let erf = 2.0 / std::f64::consts::PI.sqrt() * (-x2).exp() * sum;
        return (0.5 * (1.0 - erf)).ln();
    }
    if z == f64::INFINITY {
        return f64::NEG_INFINITY;
    }
    // Laplace's continued fraction Q(z) = φ(z)/(z + 1/(z + 2/(z + 3/(z + …)))),
    // evaluated backwards from a fixed depth (plenty for z ≥ 3).
    let mut d = z;
    let depth = if z < 6.0 { 120 } else { 40 };
    for k in (1..=depth).rev() {
        d = z + k as f64 / d;
    }
    -0.5 * z * z - 0.5 * (2.0 * std::f64::consts::PI).ln() - d.ln()
}

/// φ for a standardized silence `z`: `−log10 P(Z > z)`.
pub fn phi_of_z(z: f64) -> f64 {
    -ln_normal_tail(z) / std::f64::consts::LN_10
}

/// The `z` at which φ reaches `phi` (φ is increasing in z), by bisection to
/// 1e-9; `None` for a NaN or infinite `phi`.
pub fn z_for_phi(phi: f64) -> Option<f64> {
    if !phi.is_finite() {
        return None;
    }
    let (mut lo, mut hi) = (-40.0f64, 8.0f64);
    while phi_of_z(hi) < phi {
        lo = hi;
        hi *= 2.0;
        if hi > 1e12 {
            return None;
        }
    }
    if phi_of_z(lo) >= phi {
        return Some(lo);
    }
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if phi_of_z(mid) < phi {
            lo = mid;
        } else {
            hi = mid;
        }
        if hi - lo < 1e-9 {
            break;
        }
    }
    Some(hi)
}

/// What replaying one arrival trace through a model gave.
#[derive(Clone, Debug, PartialEq)]
pub struct ReplaySummary {
    /// Model replayed.
    pub kind: ModelKind,
    /// Arrivals replayed.
    pub arrivals: u64,
    /// The level just before every arrival but the first, ascending.
    pub levels: Vec<f64>,
}

impl ReplaySummary {
    /// The highest level a live peer reached: the smallest threshold at which
    /// this trace causes no false suspicion (exact). `None` with < 2 arrivals.
    pub fn max_level(&self) -> Option<f64> {
        self.levels.last().copied()
    }

    /// Fraction of inter-arrival intervals without a false suspicion at
    /// `threshold` (suspected iff level > threshold). 1.0 with no intervals.
    pub fn accuracy(&self, threshold: f64) -> f64 {
        if self.levels.is_empty() {
            return 1.0;
        }
        let ok = self.levels.partition_point(|&l| l <= threshold);
        ok as f64 / self.levels.len() as f64
    }

    /// Intervals with a false suspicion at `threshold`.
    pub fn mistakes(&self, threshold: f64) -> usize {
        self.levels.len() - self.levels.partition_point(|&l| l <= threshold)
    }

    /// The smallest threshold reaching `accuracy` (0..=1): the
    /// ⌈accuracy·n⌉-th smallest level. `None` with no intervals.
    pub fn threshold_for(&self, accuracy: f64) -> Option<f64> {
        let n = self.levels.len();
        if n == 0 {
            return None;
        }
        let k = (accuracy.clamp(0.0, 1.0) * n as f64).ceil() as usize;
        Some(if k == 0 {
            f64::NEG_INFINITY
        } else {
            self.levels[k.min(n) - 1]
        })
    }
}

/// Replays arrivals (in order) through `model` from a fresh state and records
/// the level before each. One pass, O(n log n) for the final sort; no
/// allocation besides the level vector.
///
/// A benchmark records one arrival trace per peer and transport, replays it
/// once per model, then asks for as many thresholds as it likes:
///
/// ```
/// use xlane_fd::{replay, Anchor, Arrival, FixedTimeout, PhiAccrual, PhiParams};
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let t = 1_000_000; // T = 1 ms
/// // Arrivals every T with up to 12 µs of jitter, one heartbeat 300 µs late.
/// let trace: Vec<Arrival> = (0..10_000u64)
///     .map(|i| Arrival::at(i * t + (i * 7919 % 13) * 1_000 + if i == 5000 { 300_000 } else { 0 }))
///     .collect();
/// let timeout = replay(&mut FixedTimeout::new(t, Anchor::Arrival), trace.iter().copied());
/// let phi = replay(&mut PhiAccrual::new(PhiParams::for_period(t))?, trace.iter().copied());
/// // The smallest Λ without a false suspicion, exactly: the late heartbeat's gap − T.
/// let lambda = timeout.max_level().ok_or("no intervals")?;
/// assert_eq!(timeout.accuracy(lambda), 1.0);
/// assert!(timeout.accuracy(lambda - 1.0) < 1.0);
/// // Accuracy against threshold, for a curve.
/// let curve: Vec<f64> = [1.0, 2.0, 4.0, 8.0, 16.0].iter().map(|&p| phi.accuracy(p)).collect();
/// assert!(curve.windows(2).all(|w| w[0] <= w[1]));
/// # Ok(()) }
/// ```
pub fn replay<M: SuspicionModel + ?Sized>(
    model: &mut M,
    arrivals: impl IntoIterator<Item = Arrival>,
) -> ReplaySummary {
    model.reset();
    let iter = arrivals.into_iter();
    let mut levels = Vec::with_capacity(iter.size_hint().0);
    let mut n = 0u64;
    for a in iter {
        n += 1;
        if let Some(l) = model.on_arrival(a) {
            levels.push(if l.is_nan() { f64::INFINITY } else { l });
        }
    }
    levels.sort_by(f64::total_cmp);
    ReplaySummary {
        kind: model.kind(),
        arrivals: n,
        levels,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reference values of Q(z) = P(Z > z) (libm's erfc), relative tolerance.
    #[test]
    fn normal_tail_table() {
        let cases: [(f64, f64); 12] = [
            (-3.0, 0.998_650_101_968_369_9),
            (-1.0, 0.841_344_746_068_542_9),
            (0.0, 0.5),
            (0.5, 0.308_537_538_725_986_9),
            (1.0, 0.158_655_253_931_457_07),
            (2.0, 0.022_750_131_948_179_22),
            (2.999, 1.354_336_533_727_106_6e-3),
            (3.0, 1.349_898_031_630_095_7e-3),
            (4.0, 3.167_124_183_311_996_5e-5),
            (5.0, 2.866_515_718_791_946e-7),
            (10.0, 7.619_853_024_160_593e-24),
            (30.0, 4.906_713_927_148_764e-198),
        ];
        for (z, q) in cases {
            let got = ln_normal_tail(z);
            let want = q.ln();
            assert!(
                ((got - want) / want).abs() < 1e-9 || (got - want).abs() < 1e-12,
                "z={z}: ln Q {got} vs {want}"
            );
        }
        // Far tail: ln Q(z) ≈ −z²/2 − ln(z√(2π)).
        let z = 1e4;
        let approx = -0.5 * z * z - (z * (2.0 * std::f64::consts::PI).sqrt()).ln();
        assert!((ln_normal_tail(z) - approx).abs() < 1e-6);
        // Continuous across the branch at 3.
        let a = ln_normal_tail(3.0 - 1e-12);
        let b = ln_normal_tail(3.0);
        assert!((a - b).abs() < 1e-9, "{a} {b}");
    }

    #[test]
    fn z_for_phi_inverts() {
        for phi in [0.1, 0.301, 1.0, 3.0, 8.0, 16.0, 100.0, 5000.0] {
            let z = z_for_phi(phi).expect("finite");
            assert!((phi_of_z(z) - phi).abs() < 1e-6 * phi.max(1.0), "{phi}");
        }
        assert_eq!(z_for_phi(f64::NAN), None);
    }

    #[test]
    fn timeout_levels_and_deadline_table() {
        // (anchor, arrivals (rx, send), threshold, expected levels, expected deadline)
        type Case = (Anchor, &'static [(u64, u64)], f64, &'static [f64], u64);
        let cases: &[Case] = &[
            (
                Anchor::Arrival,
                &[(1000, 0), (2000, 0), (3500, 0)],
                100.0,
                &[0.0, 500.0],
                3500 + 1000 + 101,
            ),
            (
                Anchor::SendTime,
                &[(1010, 1000), (2030, 2000), (3005, 3000)],
                0.0,
                // before arrival 2: 2030 − 1000 − 1000; before 3: 3005 − 2000 − 1000
                &[30.0, 5.0],
                3000 + 1000 + 1,
            ),
            (
                Anchor::Arrival,
                &[(5000, 0), (5000, 0)],
                -0.5,
                &[-1000.0],
                5000 + 1000,
            ),
        ];
        for (i, (anchor, arr, thr, levels, deadline)) in cases.iter().enumerate() {
            let mut m = FixedTimeout::new(1000, *anchor);
            let mut got = vec![];
            for &(rx, send) in arr.iter() {
                if let Some(l) = m.on_arrival(Arrival {
                    rx_ns: rx,
                    send_ns: Some(send),
                }) {
                    got.push(l);
                }
            }
            assert_eq!(&got[..], *levels, "case {i}");
            let d = m.suspect_at(*thr).expect("deadline");
            assert_eq!(d, *deadline, "case {i}");
            // The deadline is the first instant above the threshold.
            assert!(m.level(d).expect("level") > *thr, "case {i}");
            assert!(m.level(d - 1).expect("level") <= *thr, "case {i}");
        }
    }

    #[test]
    fn phi_matches_closed_form() {
        let mut m = PhiAccrual::new(PhiParams {
            period_ns: 1000,
            window: 4,
            min_std_ns: 1.0,
        })
        .expect("params");
        assert_eq!(m.suspect_at(1.0), None);
        for rx in [0u64, 1000, 2100, 2900, 4000] {
            m.on_arrival(Arrival::at(rx));
        }
        // gaps 1000, 1100, 800, 1100: mean 1000, var = (0 + 1e4 + 4e4 + 1e4)/4.
        let (mean, std) = m.mean_std();
        assert_eq!(mean, 1000.0);
        assert!((std - 15_000f64.sqrt()).abs() < 1e-9);
        // At elapsed = mean, φ = −log10(0.5).
        let l = m.level(5000).expect("level");
        assert!((l - 0.5f64.log10().abs()).abs() < 1e-12, "{l}");
        // Window of 4: a fifth gap pushes out the first (1000).
        m.on_arrival(Arrival::at(5000));
        let (mean, _) = m.mean_std();
        assert_eq!(mean, (1100.0 + 800.0 + 1100.0 + 1000.0) / 4.0);
        // Deadline consistency.
        for thr in [0.5, 1.0, 3.0, 8.0] {
            let d = m.suspect_at(thr).expect("deadline");
            assert!(m.level(d).expect("level") > thr - 1e-6, "{thr}");
            assert!(m.level(d - 2).expect("level") <= thr + 1e-6, "{thr}");
        }
    }

    #[test]
    fn phi_bootstrap_and_reset() {
        let mut m = PhiAccrual::new(PhiParams::for_period(1_000_000)).expect("params");
        assert_eq!(m.on_arrival(Arrival::at(10)), None);
        let (mean, std) = m.mean_std();
        assert_eq!((mean, std), (1e6, 2.5e5));
        m.reset();
        assert_eq!(m.level(100), None);
        assert_eq!(m.on_arrival(Arrival::at(20)), None);
    }

    #[test]
    fn phi_params_refused() {
        let ok = PhiParams::for_period(1000);
        for (p, e) in [
            (PhiParams { window: 0, ..ok }, PhiParamsError::Window(0)),
            (
                PhiParams {
                    min_std_ns: 0.5,
                    ..ok
                },
                PhiParamsError::MinStd(0.5),
            ),
            (PhiParams { period_ns: 0, ..ok }, PhiParamsError::Period),
        ] {
            assert_eq!(PhiAccrual::new(p).err(), Some(e));
        }
    }

    #[test]
    fn replay_min_perfect_threshold_is_exact() {
        // Period 1000 with one late heartbeat (gap 1700) and one early (gap 900).
        let rx = [0u64, 1000, 2000, 3700, 4600, 5600];
        let mut t = FixedTimeout::new(1000, Anchor::Arrival);
        let s = replay(&mut t, rx.iter().map(|&r| Arrival::at(r)));
        assert_eq!(s.arrivals, 6);
        assert_eq!(s.levels, vec![-100.0, 0.0, 0.0, 0.0, 700.0]);
        assert_eq!(s.max_level(), Some(700.0));
        assert_eq!(s.accuracy(700.0), 1.0);
        assert_eq!(s.accuracy(699.0), 0.8);
        assert_eq!(s.mistakes(-1000.0), 5);
        assert_eq!(s.threshold_for(0.8), Some(0.0));
        assert_eq!(s.threshold_for(1.0), Some(700.0));
        // The same trace through a live detector model: at the max level no
        // deadline is crossed before any arrival; one ns lower, one is.
        let mut m = FixedTimeout::new(1000, Anchor::Arrival);
        let mut crossed = |thr: f64| {
            m.reset();
            let mut any = false;
            for &r in &rx {
                if let Some(d) = m.suspect_at(thr) {
                    any |= d <= r;
                }
                m.on_arrival(Arrival::at(r));
            }
            any
        };
        assert!(!crossed(700.0));
        assert!(crossed(699.0));
    }
}
