//! `MONITOR`: the connections that are sent every command the member
//! runs, one status line each, as Redis writes them:
//! `+<seconds>.<microseconds> [0 <client address>] "word" "word" ...`.
//!
//! A command is shown when it starts on this member (after access control,
//! which refuses before anything runs): the commands a `MULTI` queues show
//! as they are queued, not again at `EXEC`. As in Redis, administrative
//! commands and those the command table flags `skip_monitor` are not shown,
//! and `AUTH`'s and `HELLO ... AUTH`'s passwords are shown as
//! `(redacted)`. Each member shows its own clients' commands; a write
//! applied from the log is not shown again on the other members.

use crate::resp::Command;
use std::net::SocketAddr;

/// Queues `args` of the client on `stream` for each of `monitors` (in
/// `outbox`, sent at the end of the turn), if it is shown. Without
/// monitors it costs one comparison: it runs for every command.
pub(super) fn feed(
    monitors: &[u64],
    outbox: &mut Vec<(u64, Vec<u8>)>,
    args: &Command,
    stream: &std::net::TcpStream,
) {
    if monitors.is_empty() || !shown(args) {
        return;
    }
    let addr = stream.peer_addr().ok();
    let micros = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros());
    let l = line(args, addr, micros);
    for m in monitors {
        outbox.push((*m, l.clone()));
    }
}

/// Whether `args` is shown to monitors at all.
pub(super) fn shown(args: &Command) -> bool {
    let Some(name) = args.first() else {
        return false;
    };
    let Some(spec) = crate::cmd::table::spec(name) else {
        return false;
    };
    // A container's subcommand carries the flags (`CONFIG GET` is admin).
    let spec = args
        .get(1)
        .and_then(|sub| spec.subcommand(sub))
        .unwrap_or(spec);
    !spec.has("admin") && !spec.has("skip_monitor")
}

/// The line monitors get for `args` of the client at `addr`, at `micros`
/// since the epoch.
pub(super) fn line(args: &Command, addr: Option<SocketAddr>, micros: u128) -> Vec<u8> {
    let mut out = format!(
        "+{}.{:06} [0 {}]",
        micros / 1_000_000,
        micros % 1_000_000,
        addr.map_or_else(|| "?:0".to_string(), |a| a.to_string())
    )
    .into_bytes();
    let name = args[0].to_ascii_lowercase();
    for (i, a) in args.iter().enumerate() {
        out.push(b' ');
        if redacted(&name, args, i) {
            out.extend_from_slice(b"\"(redacted)\"");
        } else {
            quote(a, &mut out);
        }
    }
    out.extend_from_slice(b"\r\n");
    out
}

/// Whether word `i` of a command named `name` is a password.
fn redacted(name: &[u8], args: &Command, i: usize) -> bool {
    match name {
        b"auth" => i > 0,
        // HELLO [protover [AUTH username password] [SETNAME name]]
        b"hello" => (3..args.len())
            .any(|j| args[j - 1].eq_ignore_ascii_case(b"auth") && (i == j || i == j + 1)),
        _ => false,
    }
}

/// Appends `b` in double quotes, escaped as Redis's `sdscatrepr` does.
fn quote(b: &[u8], out: &mut Vec<u8>) {
    out.push(b'"');
    for &c in b {
        match c {
            b'\\' | b'"' => out.extend_from_slice(&[b'\\', c]),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            7 => out.extend_from_slice(b"\\a"),
            8 => out.extend_from_slice(b"\\b"),
            0x20..=0x7e => out.push(c),
            _ => out.extend_from_slice(format!("\\x{c:02x}").as_bytes()),
        }
    }
    out.push(b'"');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmd(words: &[&[u8]]) -> Command {
        words.iter().map(|w| w.to_vec()).collect()
    }

    #[test]
    fn lines_as_redis_writes_them() {
        let addr: SocketAddr = "127.0.0.1:5000".parse().expect("addr");
        let cases: &[(&[&[u8]], &str)] = &[
            (&[b"SET", b"k", b"v"], r#" "SET" "k" "v""#),
            (
                &[b"set", b"a\"b\\c", b"\n\r\t\x07\x08"],
                r#" "set" "a\"b\\c" "\n\r\t\a\b""#,
            ),
            (&[b"get", b"\x00\xff\x7f"], r#" "get" "\x00\xff\x7f""#),
            (
                &[b"AUTH", b"user", b"pw"],
                r#" "AUTH" "(redacted)" "(redacted)""#,
            ),
            (
                &[b"hello", b"3", b"AUTH", b"u", b"p", b"SETNAME", b"n"],
                r#" "hello" "3" "AUTH" "(redacted)" "(redacted)" "SETNAME" "n""#,
            ),
        ];
        for (words, tail) in cases {
            let got = line(&cmd(words), Some(addr), 1_700_000_000_000_042);
            let want = format!("+1700000000.000042 [0 127.0.0.1:5000]{tail}\r\n");
            assert_eq!(String::from_utf8_lossy(&got), want, "{words:?}");
        }
    }

    #[test]
    fn admin_and_skip_monitor_commands_are_not_shown() {
        let cases: &[(&[u8], bool)] = &[
            (b"get", true),
            (b"SET", true),
            (b"debug", false),
            (b"exec", true),
            (b"eval", false),
            (b"nosuchcommand", false),
        ];
        for (name, want) in cases {
            assert_eq!(
                shown(&cmd(&[name])),
                *want,
                "{}",
                String::from_utf8_lossy(name)
            );
        }
        assert!(
            !shown(&cmd(&[b"config", b"get", b"x"])),
            "CONFIG GET is admin"
        );
        assert!(shown(&cmd(&[b"client", b"getname"])));
    }
}
