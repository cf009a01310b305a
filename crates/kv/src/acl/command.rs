//! The `ACL` command: its words parsed, and the replies that need no
//! table.

use super::*;

/// `ACL CAT` (no category: the categories) or `ACL CAT category`: the
/// commands of the category, in the table's order.
pub fn cat_reply(category_name: Option<&[u8]>) -> Reply {
    let Some(c) = category_name else {
        return Reply::Array(Some(CATEGORIES.iter().map(|c| Reply::bulk(*c)).collect()));
    };
    let Some(j) = category(c) else {
        let shown = cstr(c);
        return Reply::err(format!(
            "ERR Unknown category '{}'",
            String::from_utf8_lossy(&shown[..shown.len().min(128)])
        ));
    };
    let u = universe();
    Reply::Array(Some(
        u.by_cat[j]
            .iter()
            .map(|&id| Reply::bulk(u.cmds[id].spec.name))
            .collect(),
    ))
}

/// `ACL GENPASS [bits]` (`bits` checked by [`AclCommand::parse`]): a hex
/// digit per 4 bits, each from one random byte's low nibble.
pub fn genpass(bits: usize, random: &[u8; GENPASS_RANDOM_BYTES]) -> Reply {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let chars = bits.div_ceil(4).min(GENPASS_RANDOM_BYTES);
    Reply::bulk(
        random[..chars]
            .iter()
            .map(|b| HEX[usize::from(b & 15)])
            .collect::<Vec<u8>>(),
    )
}

/// `ACL HELP`.
pub fn help_reply() -> Reply {
    const LINES: &[&str] = &[
        "ACL <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "CAT [<category>]",
        "    List all commands that belong to <category>, or all command categories",
        "    when no category is specified.",
        "DELUSER <username> [<username> ...]",
        "    Delete a list of users.",
        "DRYRUN <username> <command> [<arg> ...]",
        "    Returns whether the user can execute the given command without executing the command.",
        "GETUSER <username>",
        "    Get the user's details.",
        "GENPASS [<bits>]",
        "    Generate a secure 256-bit user password. The optional `bits` argument can",
        "    be used to specify a different size.",
        "LIST",
        "    Show users details in config file format.",
        "LOAD",
        "    Reload users from the ACL file.",
        "LOG [<count> | RESET]",
        "    Show the ACL log entries.",
        "SAVE",
        "    Save the current config to the ACL file.",
        "SETUSER <username> <attribute> [<attribute> ...]",
        "    Create or modify a user with the specified attributes.",
        "USERS",
        "    List all the registered usernames.",
        "WHOAMI",
        "    Return the current connection username.",
        "HELP",
        "    Prints this help.",
    ];
    Reply::Array(Some(
        LINES.iter().map(|l| Reply::Simple((*l).into())).collect(),
    ))
}

/// `ACL LOG`'s argument.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogRequest {
    /// Show up to this many entries (10 without an argument).
    Show(usize),
    /// `RESET`: empty the log.
    Reset,
}

/// The `ACL` command's words, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AclCommand<'a> {
    /// `CAT [category]`.
    Cat(Option<&'a [u8]>),
    /// `DELUSER name...` (never `default`).
    DelUser(&'a [Vec<u8>]),
    /// `DRYRUN user command args...`.
    DryRun {
        /// The user.
        user: &'a [u8],
        /// The command's words.
        command: &'a [Vec<u8>],
    },
    /// `GENPASS [bits]`.
    GenPass {
        /// 1 to 4096.
        bits: usize,
    },
    /// `GETUSER name`.
    GetUser(&'a [u8]),
    /// `HELP`.
    Help,
    /// `LIST`.
    List,
    /// `LOAD`.
    Load,
    /// `LOG [count|RESET]`.
    Log(LogRequest),
    /// `SAVE`.
    Save,
    /// `SETUSER name rules...` (a valid name).
    SetUser {
        /// The user.
        name: &'a [u8],
        /// Its rules.
        rules: &'a [Vec<u8>],
    },
    /// `USERS`.
    Users,
    /// `WHOAMI`.
    WhoAmI,
}

/// What [`UserTable::read`] needs from the member answering.
#[derive(Debug, Clone, Copy)]
pub struct ReadContext<'a> {
    /// The connection's user (`ACL WHOAMI`).
    pub whoami: Option<&'a [u8]>,
    /// The member's ACL log (`ACL LOG`).
    pub log: &'a AclLog,
    /// The member's clock, ms since the epoch (`ACL LOG`'s ages).
    pub now_ms: u64,
    /// Random bytes (`ACL GENPASS`).
    pub random: &'a [u8; GENPASS_RANDOM_BYTES],
}

impl<'a> AclCommand<'a> {
    /// Parses `ACL ...` (`args[0]` is `ACL`), with Redis' errors for an
    /// unknown subcommand, a wrong number of arguments, a bad username,
    /// `DELUSER default`, a bad `GENPASS` size or `LOG` count.
    pub fn parse(args: &'a [Vec<u8>]) -> Result<AclCommand<'a>, Reply> {
        if args.len() < 2 {
            return Err(crate::cmd::args::arity_error("acl"));
        }
        let acl = table::spec(b"acl").ok_or_else(|| crate::cmd::args::unknown_command(args))?;
        let Some(sub) = acl.subcommand(&args[1]) else {
            return Err(crate::cmd::args::unknown_subcommand(args));
        };
        if !sub.arity_ok(args.len()) {
            return Err(crate::cmd::args::arity_error(sub.name));
        }
        let n = args.len();
        let syntax = || {
            let s = cstr(&args[1]);
            Reply::err(format!(
                "ERR unknown subcommand or wrong number of arguments for '{}'. Try {} HELP.",
                String::from_utf8_lossy(&s[..s.len().min(128)]),
                text(&args[0]).to_uppercase()
            ))
        };
        let long = |b: &[u8]| {
            parse_i64_strict(b)
                .ok_or_else(|| Reply::err("ERR value is not an integer or out of range"))
        };
        Ok(match sub.name {
            "acl|setuser" => {
                if has_spaces(&args[2]) {
                    return Err(AclError::BadUsername.reply());
                }
                AclCommand::SetUser {
                    name: &args[2],
                    rules: &args[3..],
                }
            }
            "acl|deluser" => {
                if args[2..].iter().any(|a| cstr(a) == b"default") {
                    return Err(AclError::DeleteDefault.reply());
                }
                AclCommand::DelUser(&args[2..])
            }
            "acl|getuser" => AclCommand::GetUser(&args[2]),
            "acl|list" => AclCommand::List,
            "acl|users" => AclCommand::Users,
            "acl|whoami" => AclCommand::WhoAmI,
            "acl|load" => AclCommand::Load,
            "acl|save" => AclCommand::Save,
            "acl|cat" if n == 2 => AclCommand::Cat(None),
            "acl|cat" if n == 3 => AclCommand::Cat(Some(&args[2])),
            "acl|genpass" if n <= 3 => {
                let bits = match args.get(2) {
                    None => 256,
                    Some(b) => long(b)?,
                };
                if !(1..=4096).contains(&bits) {
                    return Err(Reply::err(
                        "ERR ACL GENPASS argument must be the number of bits for the output password, a positive number up to 4096",
                    ));
                }
                AclCommand::GenPass {
                    bits: bits as usize,
                }
            }
            "acl|log" if n <= 3 => match args.get(2) {
                None => AclCommand::Log(LogRequest::Show(10)),
                Some(a) if cstr(a).eq_ignore_ascii_case(b"reset") => {
                    AclCommand::Log(LogRequest::Reset)
                }
                Some(a) => AclCommand::Log(LogRequest::Show(long(a)?.max(0) as usize)),
            },
            "acl|dryrun" => AclCommand::DryRun {
                user: &args[2],
                command: &args[3..],
            },
            "acl|help" => AclCommand::Help,
            _ => return Err(syntax()),
        })
    }

    /// Whether it changes the replicated table (`SETUSER`, `DELUSER`,
    /// `LOAD`): those go through the log and [`UserTable::apply`].
    pub fn is_write(&self) -> bool {
        matches!(
            self,
            AclCommand::SetUser { .. } | AclCommand::DelUser(_) | AclCommand::Load
        )
    }
}
