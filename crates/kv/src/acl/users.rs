//! The table of users: `ACL SETUSER`/`DELUSER`, `AUTH`, the ACL file and
//! the replies of `ACL LIST`/`GETUSER`/`USERS`.

use super::*;

impl UserTable {
    /// The table a server starts with: the `default` user (on, nopass, all
    /// commands, keys and channels), `acl-pubsub-default resetchannels`.
    pub fn new() -> UserTable {
        let mut users = BTreeMap::new();
        users.insert(b"default".to_vec(), User::default_user(false));
        UserTable {
            users,
            pubsub_all: false,
        }
    }

    /// The user `name`.
    pub fn user(&self, name: &[u8]) -> Option<&User> {
        self.users.get(name)
    }

    /// The `default` user (always there).
    pub fn default_user(&self) -> Option<&User> {
        self.users.get(&b"default"[..])
    }

    /// Every user, by name.
    pub fn users(&self) -> impl Iterator<Item = &User> {
        self.users.values()
    }

    /// `acl-pubsub-default`: `true` for `allchannels`.
    pub fn pubsub_default_all(&self) -> bool {
        self.pubsub_all
    }

    /// Sets `acl-pubsub-default` (`allchannels` when `all`): the channels
    /// of users (and selectors) created or reset from now on.
    pub fn set_pubsub_default(&mut self, all: bool) {
        self.pubsub_all = all;
    }

    /// `requirepass`: the `default` user's only password (`resetpass`
    /// then `>password`), or `nopass` for an empty one. Redis applies it
    /// when the configured value changes only: `CONFIG SET requirepass`
    /// of the value already configured leaves the user as it is (it may
    /// have been changed by `ACL SETUSER default` since).
    pub fn set_requirepass(&mut self, password: &[u8]) {
        let pubsub_all = self.pubsub_all;
        let user = self
            .users
            .entry(b"default".to_vec())
            .or_insert_with(|| User::default_user(pubsub_all));
        user.nopass = false;
        user.passwords.clear();
        if password.is_empty() {
            user.nopass = true;
        } else {
            user.passwords.push(sha256::digest(password));
        }
    }

    /// `ACL SETUSER name rules...`: every rule applies, or none.
    pub fn apply_setuser<T: AsRef<[u8]>>(
        &mut self,
        name: &[u8],
        rules: &[T],
    ) -> Result<SetUserOutcome, AclError> {
        if has_spaces(name) {
            return Err(AclError::BadUsername);
        }
        let merged = merge_selector_args(rules).map_err(|i| AclError::Unmatched {
            arg: rules[i].as_ref().to_vec(),
        })?;
        let old = self.users.get(name);
        let mut user = match old {
            Some(u) => u.clone(),
            None => User::new(name, self.pubsub_all),
        };
        for op in &merged {
            user.apply_rule(op, self.pubsub_all)
                .map_err(|error| AclError::Rule {
                    rule: op.clone(),
                    error,
                })?;
        }
        let outcome = SetUserOutcome {
            created: old.is_none(),
            recheck_subscriptions: old.is_some_and(|o| channels_revoked(&user, o)),
        };
        self.users.insert(name.to_vec(), user);
        Ok(outcome)
    }

    /// `ACL DELUSER names...`: the users deleted (the reply is their
    /// count).
    pub fn apply_deluser<T: AsRef<[u8]>>(&mut self, names: &[T]) -> Result<Vec<Vec<u8>>, AclError> {
        if names.iter().any(|n| cstr(n.as_ref()) == b"default") {
            return Err(AclError::DeleteDefault);
        }
        Ok(names
            .iter()
            .filter_map(|n| self.users.remove(n.as_ref()).map(|u| u.name))
            .collect())
    }

    /// `ACL LOAD` of an ACL file's text: the whole table replaced, or
    /// nothing changed and every problem reported (`filename` is named in
    /// the messages, as Redis names its `aclfile`).
    pub fn apply_load(&mut self, file: &[u8], filename: &str) -> Result<(), AclError> {
        *self = self.load_text(file, filename)?;
        Ok(())
    }

    /// The table an ACL file describes (Redis' `ACLLoadFromFile`): lines
    /// `user <name> <rules...>`, blank lines allowed; the `default` user
    /// as a server starts with it when the file has none. This table's
    /// `acl-pubsub-default` applies to the users created.
    pub fn load_text(&self, file: &[u8], filename: &str) -> Result<UserTable, AclError> {
        let pubsub_all = self.pubsub_all;
        let mut errors = String::new();
        let mut users: BTreeMap<Vec<u8>, User> = BTreeMap::new();
        for (i, raw) in file.split(|&b| b == b'\n').enumerate() {
            let linenum = i + 1;
            let line = trim(raw, b" \t\r\n");
            if line.is_empty() {
                continue;
            }
            let argv: Vec<&[u8]> = line.split(|&b| b == b' ').collect();
            if cstr(argv[0]) != b"user" || argv.len() < 2 {
                errors.push_str(&format!(
                    "{filename}:{linenum} should start with user keyword followed by the username. "
                ));
                continue;
            }
            let name = argv[1];
            if has_spaces(name) {
                errors.push_str(&format!(
                    "'{filename}:{linenum}: username '{}' contains invalid characters. ",
                    text(name)
                ));
                continue;
            }
            if users.contains_key(name) {
                errors.push_str(&format!(
                    "WARNING: Duplicate user '{}' found on line {linenum}. ",
                    text(name)
                ));
                continue;
            }
            let mut user = User::new(name, pubsub_all);
            match merge_selector_args(&argv[2..]) {
                Err(_) => errors.push_str(&format!(
                    "{filename}:{linenum}: Unmatched parenthesis in selector definition."
                )),
                Ok(ops) => {
                    let mut syntax_error = false;
                    for op in ops {
                        let op = trim(&op, b"\t\r\n");
                        match user.apply_rule(op, pubsub_all) {
                            Ok(()) => {}
                            Err(RuleError::UnknownCommand) => errors.push_str(&format!(
                                "{filename}:{linenum}: Error in applying operation '{}': {}. ",
                                text(op),
                                RuleError::UnknownCommand.message()
                            )),
                            Err(e) if !syntax_error => {
                                errors
                                    .push_str(&format!("{filename}:{linenum}: {}. ", e.message()));
                                syntax_error = true;
                            }
                            Err(_) => {}
                        }
                    }
                }
            }
            users.insert(name.to_vec(), user);
        }
        if !errors.is_empty() {
            errors.push_str(
                "WARNING: ACL errors detected, no change to the previously active ACL rules was performed",
            );
            return Err(AclError::Load(errors));
        }
        users
            .entry(b"default".to_vec())
            .or_insert_with(|| User::default_user(pubsub_all));
        Ok(UserTable { users, pubsub_all })
    }

    /// `ACL SAVE`: the ACL file's text, a `user` line per user.
    pub fn save_text(&self) -> Vec<u8> {
        let mut out = Vec::new();
        for u in self.users.values() {
            out.extend(u.list_line());
            out.push(b'\n');
        }
        out
    }

    /// `AUTH`'s check (`ACLCheckUserCredentials`).
    pub fn authenticate(&self, name: &[u8], password: &[u8]) -> Result<(), AuthError> {
        match self.users.get(name) {
            Some(u) if u.password_ok(password) => Ok(()),
            _ => Err(AuthError),
        }
    }

    /// The `AUTH` command (`AUTH password` or `AUTH username password`).
    pub fn auth_command(&self, args: &[Vec<u8>]) -> AuthOutcome {
        if args.len() > 3 {
            return AuthOutcome::Error(Reply::err("ERR syntax error"));
        }
        let (name, password): (&[u8], &[u8]) = match args {
            [_, pass] => {
                if self.default_user().map_or(true, |d| d.nopass) {
                    return AuthOutcome::Error(Reply::err(
                        "ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?",
                    ));
                }
                (b"default", pass)
            }
            [_, name, pass] => (name, pass),
            _ => return AuthOutcome::Error(crate::cmd::args::arity_error("auth")),
        };
        match self.authenticate(name, password) {
            Ok(()) => AuthOutcome::Ok {
                user: name.to_vec(),
            },
            Err(_) => AuthOutcome::Failed {
                user: name.to_vec(),
            },
        }
    }

    /// `ACL LIST`.
    pub fn list_reply(&self) -> Reply {
        Reply::Array(Some(
            self.users
                .values()
                .map(|u| Reply::bulk(u.list_line()))
                .collect(),
        ))
    }

    /// `ACL USERS`.
    pub fn users_reply(&self) -> Reply {
        Reply::Array(Some(
            self.users.keys().map(|n| Reply::bulk(n.clone())).collect(),
        ))
    }

    /// `ACL GETUSER name`: nil for no such user.
    pub fn getuser_reply(&self, name: &[u8]) -> Reply {
        match self.users.get(name) {
            Some(u) => u.getuser_reply(),
            None => Reply::nil(),
        }
    }

    /// `ACL DRYRUN user command args...` (`args`: the command's words).
    pub fn dryrun_reply(&self, user: &[u8], args: &[Vec<u8>]) -> Reply {
        let Some(u) = self.users.get(user) else {
            return Reply::err(format!("ERR User '{}' not found", text(user)));
        };
        let not_found = || {
            let name = args.first().map(|a| text(a)).unwrap_or_default();
            Reply::err(format!("ERR Command '{name}' not found"))
        };
        let Some(spec) = resolve(args) else {
            return not_found();
        };
        if !spec.arity_ok(args.len()) {
            return crate::cmd::args::arity_error(spec.name);
        }
        match u.check_command(spec, args) {
            Ok(()) => Reply::ok(),
            Err(d) => Reply::bulk(d.dryrun_text()),
        }
    }

    /// Runs a write of the `ACL` command (`SETUSER`, `DELUSER`, `LOAD`):
    /// its reply and what changed. `file` is the ACL file's text and name
    /// for `LOAD` (the caller reads it; `None`: no ACL file configured).
    /// Another command gets `None`.
    pub fn apply(
        &mut self,
        cmd: &AclCommand<'_>,
        file: Option<(&[u8], &str)>,
    ) -> Option<(Reply, Changed)> {
        Some(match cmd {
            AclCommand::SetUser { name, rules } => match self.apply_setuser(name, rules) {
                Ok(outcome) => (
                    Reply::ok(),
                    Changed::User {
                        name: name.to_vec(),
                        outcome,
                    },
                ),
                Err(e) => (e.reply(), Changed::Nothing),
            },
            AclCommand::DelUser(names) => match self.apply_deluser(names) {
                Ok(gone) => (
                    Reply::Integer(gone.len() as i64),
                    if gone.is_empty() {
                        Changed::Nothing
                    } else {
                        Changed::Deleted(gone)
                    },
                ),
                Err(e) => (e.reply(), Changed::Nothing),
            },
            AclCommand::Load => match file {
                None => (Reply::err(ERR_NO_ACL_FILE), Changed::Nothing),
                Some((text, name)) => match self.apply_load(text, name) {
                    Ok(()) => (Reply::ok(), Changed::Reloaded),
                    Err(e) => (e.reply(), Changed::Nothing),
                },
            },
            _ => return None,
        })
    }

    /// Answers a command of `ACL` that changes nothing replicated (every
    /// one but `SETUSER`, `DELUSER`, `LOAD`, `SAVE` and `LOG RESET`, which
    /// get `None`).
    pub fn read(&self, cmd: &AclCommand<'_>, ctx: &ReadContext<'_>) -> Option<Reply> {
        Some(match cmd {
            AclCommand::Cat(c) => cat_reply(*c),
            AclCommand::DryRun { user, command } => self.dryrun_reply(user, command),
            AclCommand::GenPass { bits } => genpass(*bits, ctx.random),
            AclCommand::GetUser(name) => self.getuser_reply(name),
            AclCommand::Help => help_reply(),
            AclCommand::List => self.list_reply(),
            AclCommand::Users => self.users_reply(),
            AclCommand::WhoAmI => match ctx.whoami {
                Some(n) => Reply::bulk(n.to_vec()),
                None => Reply::nil(),
            },
            AclCommand::Log(LogRequest::Show(n)) => ctx.log.reply(*n, ctx.now_ms),
            _ => return None,
        })
    }
}
