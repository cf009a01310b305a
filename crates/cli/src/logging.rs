//! Diagnostics through `tracing`, on standard error: one line per event
//! with its time and level. `XLANE_LOG` filters them (default `info`;
//! `XLANE_LOG=warn` for warnings and errors only, `XLANE_LOG=debug` for
//! more). Reports, ready and status lines stay on standard output as JSON,
//! and a command's final error stays one plain line.

/// Install the subscriber (once, at start).
pub fn init() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("XLANE_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(filter)
        .with_target(false)
        .try_init();
}
