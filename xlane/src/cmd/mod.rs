//! One module per subcommand; each has an `Args` (clap) and a `run`.

pub mod bench;
pub mod bench_apps;
pub mod bench_rpc;
pub mod bench_sven;
pub mod ctl;
pub mod doctor;
pub mod fd;
pub mod kv;
pub mod lancet;
pub mod pipe;
pub mod rpc;
pub mod run;
pub mod testbed;

/// The error type every subcommand returns to `main`.
pub type CmdResult = Result<(), Box<dyn std::error::Error>>;
