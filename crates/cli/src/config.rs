//! `--config FILE`: a daemon's settings from a TOML file.
//!
//! Every key is the long name of one of the command's flags, and its value
//! is what the flag would take:
//!
//! ```toml
//! # xlane kv serve --config member1.toml
//! id = 1
//! peer = ["1=10.0.0.1:7001/10.0.0.1:6379", "2=10.0.0.2:7001/10.0.0.2:6379"]
//! data = "/var/lib/xlane/kv"
//! fsync = "everysec"
//! ram-disk = false        # a switch: true gives the flag, false leaves it out
//! ```
//!
//! The file's settings are put in front of the command line's, so a flag
//! given on the command line overrides the file's (a list flag, such as
//! `--peer`, adds to the file's list instead). A key that names no flag of
//! the command, or a value of the wrong shape, is an error naming the file
//! and the key; a bad value is refused by the flag's own parser, which
//! names it (the key of the same name).

use std::ffi::OsString;

/// Replaces the file of `--config FILE` (or `--config=FILE`) in `args` by
/// the flags it sets, put right after the subcommand; `args` unchanged
/// without `--config`.
pub fn expand(args: Vec<OsString>, cmd: &clap::Command) -> Result<Vec<OsString>, String> {
    let pos = args.iter().position(|a| {
        let a = a.to_string_lossy();
        a == "--config" || a.starts_with("--config=")
    });
    let Some(pos) = pos else { return Ok(args) };
    let first = args[pos].to_string_lossy().into_owned();
    let (file, rest) = match first.strip_prefix("--config=") {
        Some(f) => (f.to_string(), pos + 1),
        None => match args.get(pos + 1) {
            Some(f) => (f.to_string_lossy().into_owned(), pos + 2),
            None => return Err("--config needs a FILE".into()),
        },
    };
    // The subcommand the file is for, and where its own flags begin.
    let mut chain = vec![cmd.clone()];
    let mut at = 1;
    for (i, a) in args.iter().enumerate().take(pos).skip(1) {
        let a = a.to_string_lossy();
        let next = chain
            .last()
            .and_then(|c| c.find_subcommand(a.as_ref()).cloned());
        if let Some(sc) = next {
            chain.push(sc);
            at = i + 1;
        }
    }
    let text = std::fs::read_to_string(&file).map_err(|e| format!("--config {file}: {e}"))?;
    let flags = flags_of(&text, &file, &chain)?;
    let mut out: Vec<OsString> = args[..at].to_vec();
    out.extend(flags);
    out.extend(args[at..pos].iter().cloned());
    out.extend(args[rest..].iter().cloned());
    Ok(out)
}

/// The flags the settings file `text` (named `file` in errors) sets for
/// the command at the end of `chain` (the command, then each subcommand
/// down to it): its own flags, then global ones above it. Errors name the
/// file and the key.
pub fn flags_of(text: &str, file: &str, chain: &[clap::Command]) -> Result<Vec<OsString>, String> {
    let table: toml::Table = toml::from_str(text).map_err(|e| format!("--config {file}: {e}"))?;
    let name = chain
        .iter()
        .map(|c| c.get_name().to_string())
        .collect::<Vec<_>>()
        .join(" ");
    let mut flags = Vec::new();
    for (key, value) in &table {
        // The subcommand's own flags first, then global ones above it.
        let arg = chain
            .iter()
            .rev()
            .flat_map(|c| c.get_arguments())
            .find(|a| a.get_long() == Some(key.as_str()))
            .ok_or_else(|| format!("--config {file}: key `{key}`: `{name}` has no --{key}"))?;
        let switch = !arg.get_action().takes_values();
        let values: Vec<&toml::Value> = match value {
            toml::Value::Array(v) => v.iter().collect(),
            v => vec![v],
        };
        for v in values {
            let s = match v {
                toml::Value::String(s) => s.clone(),
                toml::Value::Integer(i) => i.to_string(),
                toml::Value::Float(f) => f.to_string(),
                toml::Value::Boolean(b) if switch => {
                    if *b {
                        flags.push(OsString::from(format!("--{key}")));
                    }
                    continue;
                }
                toml::Value::Boolean(b) => b.to_string(),
                _ => {
                    return Err(format!(
                        "--config {file}: key `{key}`: a string, number, boolean or list of them"
                    ))
                }
            };
            if switch {
                return Err(format!(
                    "--config {file}: key `{key}`: a switch, give true or false"
                ));
            }
            flags.push(OsString::from(format!("--{key}")));
            flags.push(OsString::from(s));
        }
    }
    Ok(flags)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{Arg, ArgAction, Command};

    fn cmd() -> Command {
        Command::new("x").args_override_self(true).subcommand(
            Command::new("serve")
                .arg(Arg::new("bind").long("bind"))
                .arg(Arg::new("peer").long("peer").action(ArgAction::Append))
                .arg(Arg::new("quiet").long("quiet").action(ArgAction::SetTrue))
                .arg(Arg::new("config").long("config")),
        )
    }

    fn run(file: &str, argv: &[&str]) -> Result<Vec<String>, String> {
        static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let p = std::env::temp_dir().join(format!("xlane-config-{}-{n}.toml", std::process::id()));
        std::fs::write(&p, file).unwrap();
        let argv: Vec<OsString> = argv
            .iter()
            .map(|a| OsString::from(a.replace("FILE", &p.display().to_string())))
            .collect();
        let r = expand(argv, &cmd());
        let _ = std::fs::remove_file(&p);
        r.map(|v| {
            v.into_iter()
                .map(|s| s.to_string_lossy().into_owned())
                .filter(|s| !s.contains("xlane-config-"))
                .collect()
        })
    }

    #[test]
    fn files_become_flags_before_the_command_lines() {
        let file = "bind = \"a:1\"\npeer = [\"p1\", \"p2\"]\nquiet = true\n";
        assert_eq!(
            run(file, &["x", "serve", "--config", "FILE", "--bind", "b:2"]).unwrap(),
            [
                "x", "serve", "--bind", "a:1", "--peer", "p1", "--peer", "p2", "--quiet", "--bind",
                "b:2"
            ]
        );
        // The command line's flag wins.
        let m = cmd()
            .try_get_matches_from(
                run(file, &["x", "serve", "--config", "FILE", "--bind", "b:2"]).unwrap(),
            )
            .unwrap();
        let s = m.subcommand_matches("serve").unwrap();
        assert_eq!(s.get_one::<String>("bind").unwrap(), "b:2");
        assert_eq!(s.get_many::<String>("peer").unwrap().count(), 2);
        assert_eq!(
            run("quiet = false\n", &["x", "serve", "--config=FILE"]).unwrap(),
            ["x", "serve"]
        );
        assert_eq!(run("", &["x", "serve"]).unwrap(), ["x", "serve"]);
    }

    #[test]
    fn bad_files_name_the_key() {
        let cases: &[(&str, &str)] = &[
            ("colour = 1\n", "key `colour`: `x serve` has no --colour"),
            ("quiet = \"yes\"\n", "key `quiet`: a switch"),
            ("[bind]\nx = 1\n", "key `bind`: a string, number"),
            ("bind = ", "--config"),
        ];
        for (file, says) in cases {
            let e = run(file, &["x", "serve", "--config", "FILE"]).unwrap_err();
            assert!(e.contains(says), "{file:?}: {e}");
        }
        let e = run("", &["x", "serve", "--config"]).unwrap_err();
        assert!(e.contains("needs a FILE"), "{e}");
    }
}
