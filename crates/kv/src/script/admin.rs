//! The words of the scripting commands: what the leader makes of `EVAL`,
//! `FCALL`, `SCRIPT` and `FUNCTION` ([`eval_op`], [`script_cmd`]), how
//! every member applies the replicated changes of the script cache and the
//! libraries ([`apply`]), and the reads ([`read`]).

use super::engine;
use super::state::{decode_library_bytes, encode_library, parse_sha, sha1_hex, Scripts};
use crate::cmd::args::{eq, syntax};
use crate::op::{ScriptCode, WriteCmd};
use crate::resp::{parse_i64_strict, Reply};

/// What to do with a `SCRIPT` or `FUNCTION` command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScriptAction {
    /// Replicate this change.
    Write(WriteCmd),
    /// Answer from the store's scripts with [`read`] (after a read
    /// barrier).
    Read(Vec<Vec<u8>>),
    /// Answer now.
    Reply(Reply),
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// `NOSCRIPT`, as Redis words it.
pub const ERR_NOSCRIPT: &str = "NOSCRIPT No matching script. Please use EVAL.";

/// `SCRIPT KILL` and `FUNCTION KILL`: a script never overlaps with serving
/// other clients here (see the module docs of [`crate::script`]).
const NOTBUSY: &str = "NOTBUSY No scripts in execution right now.";

/// The op of `EVAL`, `EVALSHA`, `EVAL_RO`, `EVALSHA_RO`, `FCALL` or
/// `FCALL_RO` (`name`, lower case), or Redis's error for its words.
pub fn eval_op(name: &str, args: &[Vec<u8>], seed: u64) -> Result<WriteCmd, Reply> {
    let fcall = name.starts_with("fcall");
    let numkeys = parse_i64_strict(&args[2]).ok_or_else(|| match fcall {
        true => Reply::err("ERR Bad number of keys provided"),
        false => Reply::err("ERR value is not an integer or out of range"),
    })?;
    if numkeys < 0 {
        return Err(Reply::err("ERR Number of keys can't be negative"));
    }
    let rest = &args[3..];
    let numkeys = usize::try_from(numkeys).unwrap_or(usize::MAX);
    if numkeys > rest.len() {
        return Err(Reply::err(
            "ERR Number of keys can't be greater than number of args",
        ));
    }
    let code = match name {
        "eval" | "eval_ro" => ScriptCode::Body(args[1].clone()),
        "evalsha" | "evalsha_ro" => match parse_sha(&args[1]) {
            Some(sha) => ScriptCode::Sha(sha.to_vec()),
            None => return Err(Reply::err(ERR_NOSCRIPT)),
        },
        _ => ScriptCode::Function(args[1].clone()),
    };
    Ok(WriteCmd::Eval {
        code,
        call: crate::op::ScriptCall {
            keys: rest[..numkeys].to_vec(),
            args: rest[numkeys..].to_vec(),
            seed,
            read_only: name.ends_with("_ro"),
            ..Default::default()
        },
    })
}

fn flush_mode_ok(args: &[Vec<u8>]) -> bool {
    match args {
        [] => true,
        [m] => eq(m, "async") || eq(m, "sync"),
        _ => false,
    }
}

fn unknown_sub(cmd: &str, sub: &[u8]) -> Reply {
    Reply::err(format!(
        "ERR unknown subcommand '{}'. Try {cmd} HELP.",
        text(sub)
    ))
}

fn arity(cmd: &str, sub: &[u8]) -> Reply {
    Reply::err(format!(
        "ERR wrong number of arguments for '{}|{}' command",
        cmd.to_lowercase(),
        text(sub).to_lowercase()
    ))
}

/// What `SCRIPT ...` or `FUNCTION ...` asks.
pub fn script_cmd(args: &[Vec<u8>]) -> ScriptAction {
    let write = |args: &[Vec<u8>]| {
        ScriptAction::Write(WriteCmd::ScriptAdmin {
            args: args.to_vec(),
        })
    };
    let reply = ScriptAction::Reply;
    let sub = &args[1];
    let n = args.len();
    if eq(&args[0], "script") {
        return match () {
            _ if eq(sub, "load") && n == 3 => write(args),
            _ if eq(sub, "flush") => match flush_mode_ok(&args[2..]) {
                true => write(args),
                false => reply(syntax()),
            },
            _ if eq(sub, "exists") && n >= 3 => ScriptAction::Read(args.to_vec()),
            _ if eq(sub, "kill") && n == 2 => reply(Reply::err(NOTBUSY)),
            _ if eq(sub, "debug") && n == 3 => reply(Reply::err(
                "ERR SCRIPT DEBUG is not served: scripts run inside replicated ops",
            )),
            _ if eq(sub, "help") && n == 2 => reply(help(&[
                "SCRIPT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                "EXISTS <sha1> [<sha1> ...]",
                "    Return information about the existence of the scripts in the script cache.",
                "FLUSH [ASYNC|SYNC]",
                "    Flush the Lua scripts cache (replicated to every member).",
                "KILL",
                "    Kill the currently executing Lua script (none ever runs while clients are served).",
                "LOAD <script>",
                "    Load a script into the scripts cache without executing it.",
                "HELP",
                "    Print this help.",
            ])),
            _ if ["load", "exists", "kill", "help", "debug"]
                .iter()
                .any(|s| eq(sub, s)) =>
            {
                reply(arity("script", sub))
            }
            _ => reply(unknown_sub("SCRIPT", sub)),
        };
    }
    match () {
        _ if eq(sub, "load") && n >= 3 => {
            if n > 4 || (n == 4 && !eq(&args[2], "replace")) {
                return reply(Reply::err(format!(
                    "ERR Unknown option given: {}",
                    text(&args[2])
                )));
            }
            write(args)
        }
        _ if eq(sub, "delete") && n == 3 => write(args),
        _ if eq(sub, "flush") && n > 3 => reply(too_many("FUNCTION", sub)),
        _ if eq(sub, "flush") => match flush_mode_ok(&args[2..]) {
            true => write(args),
            false => reply(Reply::err(
                "ERR FUNCTION FLUSH only supports SYNC|ASYNC option",
            )),
        },
        _ if eq(sub, "restore") && n > 4 => reply(too_many("FUNCTION", sub)),
        _ if eq(sub, "restore") && (n == 3 || n == 4) => {
            if n == 4
                && !["flush", "append", "replace"]
                    .iter()
                    .any(|p| eq(&args[3], p))
            {
                return reply(Reply::err("ERR Wrong restore policy given, value should be either FLUSH, APPEND or REPLACE."));
            }
            write(args)
        }
        _ if eq(sub, "list") => match list_options(&args[2..]) {
            Ok(_) => ScriptAction::Read(args.to_vec()),
            Err(r) => reply(r),
        },
        _ if (eq(sub, "dump") || eq(sub, "stats")) && n == 2 => ScriptAction::Read(args.to_vec()),
        _ if eq(sub, "kill") && n == 2 => reply(Reply::err(NOTBUSY)),
        _ if eq(sub, "help") && n == 2 => reply(help(&[
            "FUNCTION <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "LOAD [REPLACE] <FUNCTION CODE>",
            "    Create a new library with the given library name and code.",
            "DELETE <LIBRARY NAME>",
            "    Delete the given library.",
            "LIST [LIBRARYNAME PATTERN] [WITHCODE]",
            "    Return general information on all the libraries.",
            "FLUSH [ASYNC|SYNC]",
            "    Delete all the libraries.",
            "DUMP",
            "    Return a serialized payload representing the current libraries.",
            "RESTORE <PAYLOAD> [FLUSH|APPEND|REPLACE]",
            "    Restore the libraries represented by the given payload.",
            "STATS",
            "    Return information about the function engine.",
            "KILL",
            "    Kill the current running function (none ever runs while clients are served).",
            "HELP",
            "    Print this help.",
        ])),
        _ if ["load", "delete", "restore", "dump", "stats", "kill", "help"]
            .iter()
            .any(|s| eq(sub, s)) =>
        {
            reply(arity("function", sub))
        }
        _ => reply(unknown_sub("FUNCTION", sub)),
    }
}

/// A subcommand given more words than it takes (Redis 7.0's text).
fn too_many(cmd: &str, sub: &[u8]) -> Reply {
    Reply::err(format!(
        "ERR unknown subcommand or wrong number of arguments for '{}'. Try {cmd} HELP.",
        text(sub)
    ))
}

fn help(lines: &[&str]) -> Reply {
    Reply::Array(Some(
        lines.iter().map(|l| Reply::Simple((*l).into())).collect(),
    ))
}

/// `FUNCTION LIST [LIBRARYNAME pattern] [WITHCODE]`: (pattern, withcode).
fn list_options(args: &[Vec<u8>]) -> Result<(Option<Vec<u8>>, bool), Reply> {
    let mut pattern = None;
    let mut code = false;
    let mut i = 0;
    while i < args.len() {
        if eq(&args[i], "withcode") && !code {
            code = true;
        } else if eq(&args[i], "libraryname") && pattern.is_none() {
            let p = args
                .get(i + 1)
                .ok_or_else(|| Reply::err("ERR library name argument was not given"))?;
            pattern = Some(p.clone());
            i += 1;
        } else {
            return Err(Reply::err(format!(
                "ERR Unknown argument {}",
                text(&args[i])
            )));
        }
        i += 1;
    }
    Ok((pattern, code))
}

const DUMP_MAGIC: &[u8; 6] = b"XLFN1\0";
const DUMP_CRC: crc::Crc<u32> = crc::Crc::<u32>::new(&crc::CRC_32_ISCSI);

/// `FUNCTION DUMP`'s payload: magic, the libraries, a CRC-32C of both.
pub fn dump(scripts: &Scripts) -> Vec<u8> {
    let mut out = DUMP_MAGIC.to_vec();
    for lib in scripts.libraries() {
        encode_library(lib, &mut out);
    }
    let crc = DUMP_CRC.checksum(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// The libraries of a `FUNCTION DUMP` payload, or `None` for bytes that
/// are not one (wrong magic or checksum, malformed library).
pub fn undump(b: &[u8]) -> Option<Vec<super::state::Library>> {
    let body_len = b.len().checked_sub(4)?;
    let (body, crc) = b.split_at(body_len);
    if DUMP_CRC.checksum(body).to_le_bytes() != crc {
        return None;
    }
    let mut rest = body.strip_prefix(DUMP_MAGIC)?;
    let mut libs = Vec::new();
    while !rest.is_empty() {
        let (lib, r) = decode_library_bytes(rest).ok()?;
        libs.push(lib);
        rest = r;
    }
    Some(libs)
}

/// Answers `SCRIPT EXISTS`, `FUNCTION LIST|DUMP|STATS` from `scripts`.
pub fn read(scripts: &Scripts, args: &[Vec<u8>]) -> Reply {
    let sub = &args[1];
    if eq(&args[0], "script") {
        // SCRIPT EXISTS
        return Reply::Array(Some(
            args[2..]
                .iter()
                .map(|s| {
                    let found = parse_sha(s).is_some_and(|sha| scripts.body(&sha).is_some());
                    Reply::Integer(i64::from(found))
                })
                .collect(),
        ));
    }
    if eq(sub, "dump") {
        return Reply::Bulk(Some(dump(scripts)));
    }
    if eq(sub, "stats") {
        return Reply::Map(vec![
            (Reply::bulk("running_script"), Reply::nil()),
            (
                Reply::bulk("engines"),
                Reply::Map(vec![(
                    Reply::bulk("LUA"),
                    Reply::Map(vec![
                        (
                            Reply::bulk("libraries_count"),
                            Reply::Integer(scripts.libraries().count() as i64),
                        ),
                        (
                            Reply::bulk("functions_count"),
                            Reply::Integer(scripts.function_count() as i64),
                        ),
                    ]),
                )]),
            ),
        ]);
    }
    // FUNCTION LIST
    let (pattern, with_code) = match list_options(&args[2..]) {
        Ok(o) => o,
        Err(r) => return r,
    };
    let libs = scripts
        .libraries()
        .filter(|l| {
            pattern
                .as_ref()
                .map_or(true, |p| crate::notify::glob_match(p, &l.name, false))
        })
        .map(|lib| {
            let functions = lib
                .functions
                .iter()
                .map(|f| {
                    Reply::Map(vec![
                        (Reply::bulk("name"), Reply::Bulk(Some(f.name.clone()))),
                        (
                            Reply::bulk("description"),
                            Reply::Bulk(f.description.clone()),
                        ),
                        (
                            Reply::bulk("flags"),
                            Reply::Set(f.flags.names().into_iter().map(Reply::bulk).collect()),
                        ),
                    ])
                })
                .collect();
            let mut fields = vec![
                (
                    Reply::bulk("library_name"),
                    Reply::Bulk(Some(lib.name.clone())),
                ),
                (Reply::bulk("engine"), Reply::bulk("LUA")),
                (Reply::bulk("functions"), Reply::Array(Some(functions))),
            ];
            if with_code {
                fields.push((
                    Reply::bulk("library_code"),
                    Reply::Bulk(Some(lib.code.clone())),
                ));
            }
            Reply::Map(fields)
        })
        .collect();
    Reply::Array(Some(libs))
}

/// Applies a [`WriteCmd::ScriptAdmin`] op to the replicated `scripts`;
/// library code runs under `budget` instructions.
pub fn apply(scripts: &mut Scripts, args: &[Vec<u8>], budget: u64) -> Reply {
    let (Some(cmd), Some(sub)) = (args.first(), args.get(1)) else {
        return Reply::err("ERR internal: empty script op");
    };
    if eq(cmd, "script") {
        if eq(sub, "load") && args.len() == 3 {
            let body = &args[2];
            let sha = sha1_hex(body);
            if let Err(r) = engine::script_flags(body) {
                return r;
            }
            if let Err(r) = engine::check_script(&sha, body) {
                return r;
            }
            scripts.cache(sha, body);
            return Reply::Bulk(Some(sha.to_vec()));
        }
        if eq(sub, "flush") {
            scripts.flush_cache();
            engine::forget_compiled();
            return Reply::ok();
        }
        return Reply::err("ERR internal: unknown script op");
    }
    if eq(sub, "load") {
        let replace = args.len() == 4;
        let Some(code) = args.last() else {
            return syntax();
        };
        let lib = match engine::load_library(code, budget) {
            Ok(lib) => lib,
            Err(r) => return r,
        };
        if !replace && scripts.library(&lib.name).is_some() {
            return Reply::err(format!("ERR Library '{}' already exists", text(&lib.name)));
        }
        if let Some(f) = scripts.clash(&lib) {
            return Reply::err(format!("ERR Function {} already exists", text(f)));
        }
        let name = lib.name.clone();
        scripts.put_library(lib);
        return Reply::Bulk(Some(name));
    }
    if eq(sub, "delete") {
        return match scripts.remove_library(&args[2]) {
            true => Reply::ok(),
            false => Reply::err("ERR Library not found"),
        };
    }
    if eq(sub, "flush") {
        scripts.flush_libraries();
        return Reply::ok();
    }
    if eq(sub, "restore") {
        let Some(libs) = undump(&args[2]) else {
            return Reply::err("ERR payload version or checksum are wrong");
        };
        let policy = args.get(3).map(|p| text(p).to_lowercase());
        let mut next = scripts.clone();
        match policy.as_deref() {
            Some("flush") => next.flush_libraries(),
            Some("replace") => {}
            _ => {
                if let Some(l) = libs.iter().find(|l| next.library(&l.name).is_some()) {
                    return Reply::err(format!("ERR Library {} already exists", text(&l.name)));
                }
            }
        }
        for lib in libs {
            if let Some(f) = next.clash(&lib) {
                return Reply::err(format!("ERR Function {} already exists", text(f)));
            }
            next.put_library(lib);
        }
        *scripts = next;
        return Reply::ok();
    }
    Reply::err("ERR internal: unknown function op")
}
