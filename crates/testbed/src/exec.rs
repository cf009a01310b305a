//! Running `ip` and `tc`, one command or a batch, with errors that carry the
//! command line and its stderr.

use std::io::Write;
use std::process::{Command, Stdio};

/// A command that could not be started or exited with an error.
#[derive(Debug, Clone, thiserror::Error)]
#[error("command `{command}` failed ({status}): {stderr}")]
pub struct CommandError {
    /// The command line (for batches, followed by the batch lines).
    pub command: String,
    /// Exit status, or why it could not run.
    pub status: String,
    /// What it printed on stderr (trimmed).
    pub stderr: String,
}

/// Run `program args...` and return its stdout.
pub fn run(program: &str, args: &[&str]) -> Result<String, CommandError> {
    let command = std::iter::once(program)
        .chain(args.iter().copied())
        .collect::<Vec<_>>()
        .join(" ");
    let out = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| CommandError {
            command: command.clone(),
            status: format!("could not start: {e}"),
            stderr: String::new(),
        })?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(CommandError {
            command,
            status: out.status.to_string(),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        })
    }
}

/// Run `program [-n netns] [-force] -batch -` with `lines` on stdin.
/// With `force`, the tool keeps going after a failed line (used for
/// teardown, where some objects may already be gone).
pub fn run_batch(
    program: &str,
    netns: Option<&str>,
    lines: &[String],
    force: bool,
) -> Result<String, CommandError> {
    if lines.is_empty() {
        return Ok(String::new());
    }
    let mut args: Vec<&str> = Vec::new();
    if let Some(ns) = netns {
        args.extend(["-n", ns]);
    }
    if force {
        args.push("-force");
    }
    args.extend(["-batch", "-"]);
    let command = format!(
        "{program} {} <<EOF\n{}\nEOF",
        args.join(" "),
        lines.join("\n")
    );
    let fail = |status: String, stderr: String| CommandError {
        command: command.clone(),
        status,
        stderr,
    };
    let mut child = Command::new(program)
        .args(&args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| fail(format!("could not start: {e}"), String::new()))?;
    let mut input = lines.join("\n");
    input.push('\n');
    if let Some(mut stdin) = child.stdin.take() {
        // A write error shows up as a failed exit status below.
        let _ = stdin.write_all(input.as_bytes());
    }
    let out = child
        .wait_with_output()
        .map_err(|e| fail(format!("wait failed: {e}"), String::new()))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(fail(
            out.status.to_string(),
            String::from_utf8_lossy(&out.stderr).trim().to_string(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_name_the_command() {
        let e = run("/nonexistent/xlane-tool", &["a", "b"]).unwrap_err();
        assert_eq!(e.command, "/nonexistent/xlane-tool a b");
        assert!(e.status.contains("could not start"));
        let e = run("sh", &["-c", "echo oops >&2; exit 3"]).unwrap_err();
        assert!(e.stderr.contains("oops"), "{e}");
        assert!(e.to_string().contains("sh -c"), "{e}");
    }
}
