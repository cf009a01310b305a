//! What the `xlane` command and the `xlaned` daemon share at start: their
//! settings from a TOML file ([`config`], `--config FILE`) and their
//! diagnostics ([`logging`]).
#![warn(missing_docs)]

pub mod config;
pub mod logging;
