//! `xlane-stats`: small, dependency-free statistics for trustworthy latency measurement.
//!
//! Everything here is a pure function (no I/O, no clocks, no global state). Functions return
//! `Option` when the quantity is not defined for the given input; every `None` case is
//! documented on the function. Non-finite inputs (NaN, ±∞) never panic.
//!
//! Contents and sources:
//! - [`percentile`], [`percentile_ci`], [`min_samples_for_ci`]: nearest-rank percentiles and
//!   distribution-free order-statistic confidence intervals for quantiles
//!   (J.-Y. Le Boudec, *Performance Evaluation of Computer and Communication Systems*, EPFL Press
//!   2010, §2.2 and Theorem 2.1; H. A. David & H. N. Nagaraja, *Order Statistics*, 3rd ed., §7.1).
//! - [`mean_variance`]: Welford's one-pass algorithm (Knuth, *TAOCP* vol. 2, §4.2.2).
//! - [`violation_bound`]: the tail bound of X-Lane §6.3 (Chebyshev's inequality) and
//!   [`cantelli_bound`] (the one-sided Cantelli inequality).
//! - [`anderson_darling_exponential`]: Anderson–Darling test for exponentiality with estimated
//!   mean (M. A. Stephens, "EDF Statistics for Goodness of Fit and Some Comparisons",
//!   *JASA* 69(347):730–737, 1974).
//! - [`spearman`], [`independence_lag`]: Spearman rank correlation and the Lancet-style
//!   independence check (Lancet: Kogias et al., USENIX ATC 2019).
//! - [`kpss`]: KPSS level-stationarity test (Kwiatkowski, Phillips, Schmidt & Shin,
//!   *J. Econometrics* 54:159–178, 1992).
//! - [`normal_cdf`], [`normal_quantile`]: standard normal functions (Abramowitz & Stegun
//!   26.2.11, 26.2.14), used for the large-n approximation in [`percentile_ci`].
//! - [`SplitMix64`]: the seeded generator every crate draws from.
//! - [`fmt_ns`]: durations written for people, one format for every report.
//! - [`mmc`]: M/M/c queueing formulas used as ground truth (L. Kleinrock, *Queueing Systems*
//!   vol. 1, §3.5; D. Gross & C. Harris, *Fundamentals of Queueing Theory*, §2.3).
#![warn(missing_docs)]

mod correlation;
mod goodness;
mod kpss;
pub mod mmc;
mod moments;
mod normal;
mod percentile;
mod rng;
#[cfg(test)]
mod testutil;
mod units;

pub use correlation::{independence_lag, spearman, IndependenceCheck, INDEPENDENCE_Z};
pub use goodness::{
    anderson_darling_exponential, AndersonDarling, AD_EXP_CRITICAL_STEPHENS_1974, AD_EXP_MODIFIER,
    AD_MIN_SAMPLES,
};
pub use kpss::{
    kpss, kpss_with_lags, schwert_lags, Kpss, KPSS_CRITICAL_10PCT, KPSS_CRITICAL_1PCT,
    KPSS_CRITICAL_5PCT,
};
pub use moments::{cantelli_bound, mean_variance, mean_variance_f64, violation_bound, ProbBound};
pub use normal::{normal_cdf, normal_pdf, normal_quantile};
pub use percentile::{
    min_samples_for_ci, nearest_rank, percentile, percentile_ci, percentile_ci_ranks, PercentileCi,
};
pub use rng::SplitMix64;
pub use units::fmt_ns;
