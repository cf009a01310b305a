//! A user's rules as a whole: `ACL SETUSER` words applied to its root
//! selector and its selectors, its description, and the permission check
//! of a command.

use super::*;

impl User {
    /// A new user as `ACL SETUSER` creates it: off, no password, no
    /// permissions (all channels when `pubsub_all`).
    pub(super) fn new(name: &[u8], pubsub_all: bool) -> User {
        User {
            name: name.to_vec(),
            enabled: false,
            nopass: false,
            payload: PayloadFlag::Unset,
            passwords: Vec::new(),
            root: Selector::new(pubsub_all),
            selectors: Vec::new(),
        }
    }

    /// The `default` user as a server starts with it: on, nopass, all
    /// commands, keys and channels.
    pub(super) fn default_user(pubsub_all: bool) -> User {
        let mut u = User::new(b"default", pubsub_all);
        u.root.all_commands();
        u.root.allkeys = true;
        u.root.allchannels = true;
        u.enabled = true;
        u.nopass = true;
        u
    }

    /// Its name.
    pub fn name(&self) -> &[u8] {
        &self.name
    }

    /// `on`: it can authenticate.
    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// `nopass`: any password authenticates it.
    pub fn nopass(&self) -> bool {
        self.nopass
    }

    /// Its RESTORE payload flag.
    pub fn payload_flag(&self) -> PayloadFlag {
        self.payload
    }

    /// Its passwords' SHA-256 digests, in hex, in the order added.
    pub fn password_hashes(&self) -> Vec<String> {
        self.passwords.iter().map(|p| sha256::hex(p)).collect()
    }

    pub(super) fn all_selectors(&self) -> impl Iterator<Item = &Selector> {
        std::iter::once(&self.root).chain(&self.selectors)
    }

    /// `ACLSetUser`: one rule.
    pub(super) fn apply_rule(&mut self, op: &[u8], pubsub_all: bool) -> Result<(), RuleError> {
        if op.is_empty() {
            return Ok(());
        }
        let c = cstr(op);
        let is = |w: &str| c.eq_ignore_ascii_case(w.as_bytes());
        let first = op[0];
        if is("on") {
            self.enabled = true;
        } else if is("off") {
            self.enabled = false;
        } else if is("skip-sanitize-payload") {
            self.payload = PayloadFlag::Skip;
        } else if is("sanitize-payload") {
            self.payload = PayloadFlag::Sanitize;
        } else if is("nopass") {
            self.nopass = true;
            self.passwords.clear();
        } else if is("resetpass") {
            self.nopass = false;
            self.passwords.clear();
        } else if first == b'>' || first == b'#' {
            let hash = if first == b'>' {
                sha256::digest(&op[1..])
            } else {
                parse_hash(&op[1..]).ok_or(RuleError::BadHash)?
            };
            if !self.passwords.contains(&hash) {
                self.passwords.push(hash);
            }
            self.nopass = false;
        } else if first == b'<' || first == b'!' {
            let hash = if first == b'<' {
                sha256::digest(&op[1..])
            } else {
                parse_hash(&op[1..]).ok_or(RuleError::BadHash)?
            };
            let at = self
                .passwords
                .iter()
                .position(|p| *p == hash)
                .ok_or(RuleError::NoSuchPassword)?;
            self.passwords.remove(at);
        } else if first == b'(' && op.last() == Some(&b')') {
            let body = &op[1..op.len() - 1];
            let mut sel = Selector::new(pubsub_all);
            for word in split_args(body).unwrap_or_default() {
                sel.apply_rule(&word)?;
            }
            self.selectors.push(sel);
        } else if is("clearselectors") {
            self.selectors.clear();
        } else if is("reset") {
            self.nopass = false;
            self.passwords.clear();
            self.root.allkeys = false;
            self.root.keys.clear();
            self.root.allchannels = pubsub_all;
            self.root.channels.clear();
            self.enabled = false;
            self.payload = PayloadFlag::Sanitize;
            self.selectors.clear();
            self.root.no_commands();
        } else {
            self.root.apply_rule(op)?;
        }
        Ok(())
    }

    /// What `ACL LIST` prints after `user <name> `: flags, passwords, the
    /// root selector, then each selector in parentheses.
    pub fn describe(&self) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(if self.enabled { b"on " } else { b"off " });
        if self.nopass {
            out.extend_from_slice(b"nopass ");
        }
        match self.payload {
            PayloadFlag::Skip => out.extend_from_slice(b"skip-sanitize-payload "),
            PayloadFlag::Sanitize => out.extend_from_slice(b"sanitize-payload "),
            PayloadFlag::Unset => {}
        }
        for p in &self.passwords {
            out.push(b'#');
            out.extend_from_slice(sha256::hex(p).as_bytes());
            out.push(b' ');
        }
        out.extend(self.root.describe());
        for s in &self.selectors {
            out.extend_from_slice(b" (");
            out.extend(s.describe());
            out.push(b')');
        }
        out
    }

    /// Its `ACL LIST` line.
    pub fn list_line(&self) -> Vec<u8> {
        let mut out = b"user ".to_vec();
        out.extend_from_slice(&self.name);
        out.push(b' ');
        out.extend(self.describe());
        out
    }

    /// The `ACL GETUSER` reply.
    pub fn getuser_reply(&self) -> Reply {
        let mut flags = vec![Reply::bulk(if self.enabled { "on" } else { "off" })];
        if self.nopass {
            flags.push(Reply::bulk("nopass"));
        }
        match self.payload {
            PayloadFlag::Skip => flags.push(Reply::bulk("skip-sanitize-payload")),
            PayloadFlag::Sanitize => flags.push(Reply::bulk("sanitize-payload")),
            PayloadFlag::Unset => {}
        }
        let mut fields = vec![
            (Reply::bulk("flags"), Reply::Set(flags)),
            (
                Reply::bulk("passwords"),
                Reply::Array(Some(
                    self.password_hashes()
                        .into_iter()
                        .map(Reply::bulk)
                        .collect(),
                )),
            ),
        ];
        fields.extend(self.root.getuser_fields());
        fields.push((
            Reply::bulk("selectors"),
            Reply::Array(Some(
                self.selectors
                    .iter()
                    .map(|s| Reply::Map(s.getuser_fields()))
                    .collect(),
            )),
        ));
        Reply::Map(fields)
    }

    /// Whether the password authenticates this user (on, and nopass or a
    /// matching password).
    pub fn password_ok(&self, password: &[u8]) -> bool {
        if !self.enabled {
            return false;
        }
        if self.nopass {
            return true;
        }
        let h = sha256::digest(password);
        // Every password compared in full, without an early exit.
        self.passwords.iter().fold(false, |ok, p| {
            ok | (p.iter().zip(&h).fold(0u8, |d, (a, b)| d | (a ^ b)) == 0)
        })
    }

    /// Redis' `ACLCheckAllUserCommandPerm`: may this user run `args` (the
    /// words, name first), the command `spec` (the subcommand's spec for a
    /// container, see [`resolve`]), naming `keys` ([`key_refs`]) and
    /// `channels` ([`channel_refs`])? Each selector is tried in turn; when
    /// none allows it, the reported denial is a channel over a key over the
    /// command, and the one with the highest argument index.
    pub fn check(
        &self,
        spec: &CommandSpec,
        args: &[Vec<u8>],
        keys: &[KeyRef],
        channels: &[ChannelRef],
    ) -> Result<(), Denied> {
        let Some(id) = id_of_name(spec.name) else {
            return Err(Denied {
                reason: DenyReason::Command,
                pos: 0,
                object: spec.name.as_bytes().to_vec(),
            });
        };
        let rank = |r: DenyReason| match r {
            DenyReason::Command => 1,
            DenyReason::Key => 2,
            DenyReason::Channel => 4,
        };
        let (mut reason, mut pos) = (DenyReason::Command, 0);
        for s in self.all_selectors() {
            match s.check(id, args, keys, channels) {
                Ok(()) => return Ok(()),
                Err((r, p)) => {
                    if rank(r) > rank(reason) || (r == reason && p > pos) {
                        reason = r;
                        pos = p;
                    }
                }
            }
        }
        let object = match reason {
            DenyReason::Command => spec.name.as_bytes().to_vec(),
            _ => args.get(pos).cloned().unwrap_or_default(),
        };
        Err(Denied {
            reason,
            pos,
            object,
        })
    }

    /// [`User::check`] with the keys and channels Redis finds in `args`.
    /// A user whose selector allows every command, key and channel (the
    /// `default` user as a server starts) is let through without looking
    /// at the arguments.
    pub fn check_command(&self, spec: &CommandSpec, args: &[Vec<u8>]) -> Result<(), Denied> {
        if self.allows_everything() && id_of_name(spec.name).is_some() {
            return Ok(());
        }
        self.check(spec, args, &key_refs(spec, args), &channel_refs(spec, args))
    }

    /// Whether a selector allows every command, key and channel (the
    /// `default` user as a server starts).
    pub fn allows_everything(&self) -> bool {
        self.all_selectors()
            .any(|s| s.allcommands && s.allkeys && s.allchannels)
    }

    /// `ACLUserCheckKeyPerm`: may any selector touch `key` so?
    pub fn check_key(&self, key: &[u8], read: bool, write: bool) -> bool {
        let need = if read { PERM_R } else { 0 } | if write { PERM_W } else { 0 };
        self.all_selectors().any(|s| s.key_ok(key, need))
    }

    /// `ACLUserCheckChannelPerm`: may any selector use `channel` (a
    /// pattern, matched literally, when `pattern`)? The check of live
    /// subscriptions after [`SetUserOutcome::recheck_subscriptions`].
    pub fn check_channel(&self, channel: &[u8], pattern: bool) -> bool {
        self.all_selectors().any(|s| s.channel_ok(channel, pattern))
    }

    /// `ACLUserCheckCmdWithUnrestrictedKeyAccess`: may a selector run the
    /// command and also `read`/`write` every key? (`SORT ... BY/GET`.)
    pub fn check_unrestricted(
        &self,
        spec: &CommandSpec,
        args: &[Vec<u8>],
        read: bool,
        write: bool,
    ) -> bool {
        let Some(id) = id_of_name(spec.name) else {
            return false;
        };
        let need = if read { PERM_R } else { 0 } | if write { PERM_W } else { 0 };
        let keys = key_refs(spec, args);
        let channels = channel_refs(spec, args);
        self.all_selectors()
            .any(|s| s.check(id, args, &keys, &channels).is_ok() && s.unrestricted(need))
    }
}
