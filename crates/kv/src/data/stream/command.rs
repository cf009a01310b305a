//! The command layer's common ground: a key's state as commands see it,
//! a write's outcome, and the `HELP` / subcommand helpers.

use super::error::{arg, arity, ctext, StreamError};
use super::log::Stream;
use crate::resp::Reply;

/// A key as a read command finds it.
#[derive(Debug, Clone, Copy)]
pub enum Key<'a> {
    /// No such key.
    Missing,
    /// A key of another type.
    WrongType,
    /// A stream.
    Stream(&'a Stream),
}

/// A key as a write command finds it.
#[derive(Debug)]
pub enum KeyMut<'a> {
    /// A key of another type.
    WrongType,
    /// The key's slot: `None` when absent. A command that creates the
    /// stream (XADD, `XGROUP CREATE ... MKSTREAM`) fills it; the caller
    /// stores `Some` back as the key's value (an empty stream is a key,
    /// as in Redis) and leaves the key absent on `None`.
    Slot(&'a mut Option<Stream>),
}

/// A write's reply and the keyspace events Redis fires for it (in order,
/// e.g. `xadd` then `xtrim`; `xgroup-createconsumer` when a read or claim
/// creates the consumer). Every write that returns `Ok` with a non-empty
/// `events`, or that changes the stream otherwise (XACK, XREADGROUP,
/// XCLAIM), modified the key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome<R> {
    /// The reply.
    pub reply: R,
    /// Keyspace notification event names (class `t`, stream).
    pub events: Vec<&'static str>,
    /// Redis signals the key as modified (`WATCH` sees it): XADD, XDEL
    /// and XTRIM that removed entries, `XGROUP CREATE` that created the
    /// key. (Redis 7.0 does not for group and consumer changes.)
    pub touched: bool,
}

pub(super) fn outcome<R>(reply: R, events: Vec<&'static str>) -> Outcome<R> {
    Outcome {
        reply,
        events,
        touched: false,
    }
}

pub(super) fn touched<R>(reply: R, events: Vec<&'static str>, touched: bool) -> Outcome<R> {
    Outcome {
        reply,
        events,
        touched,
    }
}

pub(super) fn help_reply(lines: &[&'static str]) -> Reply {
    Reply::Array(Some(
        lines
            .iter()
            .map(|l| Reply::Simple((*l).to_string()))
            .collect(),
    ))
}

/// The lines of `XGROUP HELP`.
pub const XGROUP_HELP: [&str; 17] = [
    "XGROUP <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "CREATE <key> <groupname> <id|$> [option]",
    "    Create a new consumer group. Options are:",
    "    * MKSTREAM",
    "      Create the empty stream if it does not exist.",
    "    * ENTRIESREAD entries_read",
    "      Set the group's entries_read counter (internal use).",
    "CREATECONSUMER <key> <groupname> <consumer>",
    "    Create a new consumer in the specified group.",
    "DELCONSUMER <key> <groupname> <consumer>",
    "    Remove the specified consumer.",
    "DESTROY <key> <groupname>",
    "    Remove the specified group.",
    "SETID <key> <groupname> <id|$> [ENTRIESREAD entries_read]",
    "    Set the current group ID and entries_read counter.",
    "HELP",
    "    Prints this help.",
];

/// The lines of `XINFO HELP`.
pub const XINFO_HELP: [&str; 9] = [
    "XINFO <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "CONSUMERS <key> <groupname>",
    "    Show consumers of <groupname>.",
    "GROUPS <key>",
    "    Show the stream consumer groups.",
    "STREAM <key> [FULL [COUNT <count>]",
    "    Show information about the stream.",
    "HELP",
    "    Prints this help.",
];

/// The subcommand of a container command: its lower-case name if known,
/// with the dispatcher's errors (`xgroup`/`xinfo` arity, unknown
/// subcommand, the subcommand's arity).
pub(super) fn subcommand(
    args: &[Vec<u8>],
    cmd: &'static str,
    upper: &'static str,
    subs: &[(&'static str, i64, &'static str)],
) -> Result<&'static str, StreamError> {
    if args.len() < 2 {
        return Err(StreamError::Arity(cmd));
    }
    let sub = arg(args, 1);
    let Some(&(name, ar, full)) = subs
        .iter()
        .find(|(n, _, _)| sub.eq_ignore_ascii_case(n.as_bytes()))
    else {
        return Err(StreamError::UnknownSubcommand {
            sub: ctext(sub, 128),
            cmd: upper,
        });
    };
    arity(args, ar, full)?;
    Ok(name)
}

pub(super) fn subcommand_syntax(args: &[Vec<u8>], cmd: &'static str) -> StreamError {
    StreamError::SubcommandSyntax {
        sub: ctext(arg(args, 1), 128),
        cmd,
    }
}
