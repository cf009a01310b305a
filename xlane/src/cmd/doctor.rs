//! `xlane doctor`: checks every jitter source of the host (X-Lane §4.3) and
//! says how to fix it; measures the machine's floor on every core.
//!
//! Exit code 0 even with findings (it is a report); non-zero only when the
//! doctor cannot run, or when `--restore-journal` could not restore
//! everything.

use std::path::PathBuf;
use xlane_host::doctor::{self, DoctorOptions};
use xlane_host::tuning::{self, RestoreOutcome};

/// Arguments of `xlane doctor`.
#[derive(clap::Args)]
pub struct Args {
    /// Print one JSON object instead of the table.
    #[arg(long)]
    pub json: bool,
    /// The lane core to check (default: the last online CPU).
    #[arg(long)]
    pub lane_core: Option<usize>,
    /// Length of the measurement window (floor probes on every core);
    /// 0 skips it.
    #[arg(long, default_value_t = 3.0)]
    pub seconds: f64,
    /// An interface the lane uses (repeatable; default: all but lo).
    #[arg(long = "iface")]
    pub ifaces: Vec<String>,
    /// Undo the tuning listed in a journal left by a killed run, then exit.
    #[arg(long, value_name = "PATH")]
    pub restore_journal: Option<PathBuf>,
}

/// Runs `xlane doctor`.
pub fn run(args: Args) -> super::CmdResult {
    if let Some(path) = args.restore_journal {
        let report = tuning::restore_from_journal(&path)?;
        if args.json {
            println!("{}", serde_json::to_string_pretty(&report)?);
        } else {
            for e in &report.entries {
                let outcome = match &e.outcome {
                    RestoreOutcome::Restored => "restored".to_string(),
                    RestoreOutcome::Skipped(why) => format!("skipped ({why})"),
                    RestoreOutcome::Failed(why) => format!("FAILED ({why})"),
                };
                println!("{:<22} {} <- {:?}: {outcome}", e.name, e.target, e.value);
            }
            if report.journal_removed {
                println!("journal {} removed", path.display());
            }
        }
        if !report.is_clean() {
            return Err(format!(
                "some settings could not be restored; journal {} kept",
                path.display()
            )
            .into());
        }
        return Ok(());
    }
    let opts = DoctorOptions {
        lane_core: args.lane_core,
        seconds: args.seconds,
        ifaces: args.ifaces,
        ..DoctorOptions::default()
    };
    if !args.json && opts.seconds > 0.0 {
        eprintln!(
            "measuring the floor on every core for {} s ...",
            opts.seconds
        );
    }
    let report = doctor::run(&opts)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", report.to_table());
    }
    Ok(())
}
