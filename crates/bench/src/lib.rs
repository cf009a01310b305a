//! Measurement for xlane: latency summaries, the report tables and their
//! JSON form.
//!
//! Percentiles are exact order statistics of the merged samples (never an
//! average of per-thread percentiles): the p-th percentile of n sorted
//! samples is the sample at rank ⌈p·n⌉ (1-based), the "nearest rank"
//! definition.

#![warn(missing_docs)]

pub mod apps_bench;
pub mod attribution;
pub mod bounds;
pub mod bounds_check;
pub mod budget;
pub mod fabric;
pub mod fd_bench;
pub mod fd_gaps;
pub mod flows;
pub mod interference;
pub mod jitter;
pub mod kv_bench;
pub mod lane_bench;
pub mod pipe_bench;
pub mod plot;
pub mod qjump;
pub mod rpc_bench;
pub mod stages;
pub mod stats;
pub mod sven_bench;
pub mod table;
pub mod te_bench;
