//! Fuzz target: arbitrary text as a daemon's `--config` settings file
//! (`xlane_cli::config::flags_of`), for a command with a value flag, a
//! list flag and a switch under a global flag. Bad input must give an
//! error naming the file, never a panic; what parses gives flags that
//! clap then parses or refuses, without a panic either.
#![no_main]

use clap::{Arg, ArgAction, Command};
use libfuzzer_sys::fuzz_target;

fn cmd() -> Command {
    Command::new("x")
        .arg(Arg::new("level").long("level").global(true))
        .subcommand(
            Command::new("serve")
                .arg(Arg::new("bind").long("bind"))
                .arg(Arg::new("peer").long("peer").action(ArgAction::Append))
                .arg(
                    Arg::new("port")
                        .long("port")
                        .value_parser(clap::value_parser!(u16)),
                )
                .arg(Arg::new("quiet").long("quiet").action(ArgAction::SetTrue)),
        )
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let root = cmd();
    let serve = root.find_subcommand("serve").expect("serve").clone();
    match xlane_cli::config::flags_of(text, "f.toml", &[root.clone(), serve]) {
        Ok(flags) => {
            let mut argv = vec!["x".into(), "serve".into()];
            argv.extend(flags);
            let _ = root.try_get_matches_from(argv);
        }
        Err(e) => assert!(e.starts_with("--config f.toml"), "{e}"),
    }
});
