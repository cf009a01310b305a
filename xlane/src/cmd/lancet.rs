//! `xlane lancet` (being written).

/// Arguments.
#[derive(clap::Args)]
pub struct Args {}

/// Run.
pub fn run(_args: Args) -> super::CmdResult {
    Err("not yet implemented".into())
}
