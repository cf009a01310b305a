//! A selector's rules: parsing `ACL SETUSER` words into it, describing
//! it back, and checking a command against it.

use super::*;

impl Selector {
    /// An empty selector: no commands, keys or channels; all channels when
    /// `acl-pubsub-default` is `allchannels`.
    pub(super) fn new(pubsub_all: bool) -> Selector {
        Selector {
            allkeys: false,
            allchannels: pubsub_all,
            allcommands: false,
            bits: Bits([0; WORDS]),
            firstargs: BTreeMap::new(),
            keys: Vec::new(),
            channels: Vec::new(),
        }
    }

    pub(super) fn set_bit(&mut self, id: usize, v: bool) {
        self.bits.set(id, v);
        if !v {
            self.allcommands = false;
        }
    }

    /// `ACLChangeSelectorPerm`: a command and its subcommands.
    pub(super) fn change_perm(&mut self, id: usize, v: bool) {
        self.set_bit(id, v);
        self.firstargs.remove(&id);
        for &s in &universe().cmds[id].subs {
            self.set_bit(s, v);
        }
    }

    /// `+@cat` / `-@cat`: every command of the category (a container with
    /// all its subcommands), then every subcommand of the category.
    pub(super) fn apply_category(&mut self, cat: usize, v: bool) {
        let u = universe();
        for &t in &u.top {
            if u.cmds[t].cats & (1 << cat) != 0 {
                self.change_perm(t, v);
            }
            for &s in &u.cmds[t].subs {
                if u.cmds[s].cats & (1 << cat) != 0 {
                    self.change_perm(s, v);
                }
            }
        }
    }

    /// Commands of the category allowed and denied.
    pub(super) fn count_category(&self, cat: usize) -> (u64, u64) {
        let ids = &universe().by_cat[cat];
        let on = ids.iter().filter(|&&i| self.bits.get(i)).count() as u64;
        (on, ids.len() as u64 - on)
    }

    pub(super) fn all_commands(&mut self) {
        self.bits = Bits([u64::MAX; WORDS]);
        self.allcommands = true;
        self.firstargs.clear();
    }

    pub(super) fn no_commands(&mut self) {
        self.bits = Bits([0; WORDS]);
        self.allcommands = false;
        self.firstargs.clear();
    }

    /// `ACLSetSelector`: one rule about commands, keys or channels.
    pub(super) fn apply_rule(&mut self, op: &[u8]) -> Result<(), RuleError> {
        let c = cstr(op);
        let is = |w: &str| c.eq_ignore_ascii_case(w.as_bytes());
        let first = op.first().copied().unwrap_or(0);
        if is("allkeys") || is("~*") {
            self.allkeys = true;
            self.keys.clear();
        } else if is("resetkeys") {
            self.allkeys = false;
            self.keys.clear();
        } else if is("allchannels") || is("&*") {
            self.allchannels = true;
            self.channels.clear();
        } else if is("resetchannels") {
            self.allchannels = false;
            self.channels.clear();
        } else if is("allcommands") || is("+@all") {
            self.all_commands();
        } else if is("nocommands") || is("-@all") {
            self.no_commands();
        } else if first == b'~' || first == b'%' {
            if self.allkeys {
                return Err(RuleError::KeyAfterAll);
            }
            let mut perm = 0;
            let mut at = 1;
            if first == b'%' {
                while at < op.len() {
                    let ch = op[at];
                    if ch.eq_ignore_ascii_case(&b'R') && perm & PERM_R == 0 {
                        perm |= PERM_R;
                    } else if ch.eq_ignore_ascii_case(&b'W') && perm & PERM_W == 0 {
                        perm |= PERM_W;
                    } else if ch == b'~' && perm != 0 {
                        at += 1;
                        break;
                    } else {
                        return Err(RuleError::Syntax);
                    }
                    at += 1;
                }
                if perm == 0 {
                    return Err(RuleError::Syntax);
                }
            } else {
                perm = PERM_R | PERM_W;
            }
            let pattern = &op[at..];
            if has_spaces(pattern) {
                return Err(RuleError::Syntax);
            }
            match self.keys.iter_mut().find(|k| k.pattern == pattern) {
                Some(k) => k.perm |= perm,
                None => self.keys.push(KeyPattern {
                    pattern: pattern.to_vec(),
                    perm,
                }),
            }
            self.allkeys = false;
        } else if first == b'&' {
            if self.allchannels {
                return Err(RuleError::ChannelAfterAll);
            }
            let pattern = &op[1..];
            if has_spaces(pattern) {
                return Err(RuleError::Syntax);
            }
            if !self.channels.iter().any(|p| p == pattern) {
                self.channels.push(pattern.to_vec());
            }
            self.allchannels = false;
        } else if c.first() == Some(&b'+') && c.get(1) != Some(&b'@') {
            let name = &c[1..];
            match name.iter().rposition(|&b| b == b'|') {
                None => {
                    let id = lookup(name).ok_or(RuleError::UnknownCommand)?;
                    self.change_perm(id, true);
                }
                Some(bar) => {
                    let (base, sub) = (&name[..bar], &name[bar + 1..]);
                    let id = lookup(base).ok_or(RuleError::UnknownCommand)?;
                    let u = universe();
                    if u.cmds[id].parent.is_some() {
                        return Err(RuleError::FirstArgOfSubcommand);
                    }
                    if sub.is_empty() {
                        return Err(RuleError::Syntax);
                    }
                    if !u.cmds[id].subs.is_empty() {
                        let sid = lookup(name).ok_or(RuleError::UnknownCommand)?;
                        self.change_perm(sid, true);
                    } else {
                        let list = self.firstargs.entry(id).or_default();
                        if !list.iter().any(|a| a.eq_ignore_ascii_case(sub)) {
                            list.push(sub.to_vec());
                        }
                    }
                }
            }
        } else if c.first() == Some(&b'-') && c.get(1) != Some(&b'@') {
            let id = lookup(&c[1..]).ok_or(RuleError::UnknownCommand)?;
            self.change_perm(id, false);
        } else if matches!(c.first(), Some(b'+' | b'-')) && c.get(1) == Some(&b'@') {
            let cat = category(&c[2..]).ok_or(RuleError::UnknownCommand)?;
            self.apply_category(cat, c[0] == b'+');
        } else {
            return Err(RuleError::Syntax);
        }
        Ok(())
    }

    /// `ACLDescribeSelectorCommandRules`: `+@all` or `-@all`, the
    /// categories that fit best, then single commands and first
    /// arguments, so that applying it to an empty selector gives the same
    /// bitmap.
    pub(super) fn describe_commands(&self) -> Vec<u8> {
        let additive = !self.bits.get(FUTURE);
        let mut rules = Vec::new();
        let mut fake = Selector::new(false);
        if additive {
            rules.extend_from_slice(b"-@all ");
            fake.no_commands();
        } else {
            rules.extend_from_slice(b"+@all ");
            fake.all_commands();
        }
        let mut temp = Selector::new(false);
        temp.bits = self.bits;
        let mut applied = [false; CATEGORIES.len()];
        loop {
            let mut best = None;
            let (mut mindiff, mut maxsame) = (i32::MAX as u64, 0u64);
            for (j, done) in applied.iter().enumerate() {
                if *done {
                    continue;
                }
                let (on, off) = temp.count_category(j);
                let (diff, same) = if additive { (off, on) } else { (on, off) };
                if same > diff && (diff < mindiff || (diff == mindiff && same > maxsame)) {
                    best = Some(j);
                    mindiff = diff;
                    maxsame = same;
                }
            }
            let Some(j) = best else { break };
            fake.apply_category(j, additive);
            temp.apply_category(j, !additive);
            rules.extend_from_slice(if additive { b"+@" } else { b"-@" });
            rules.extend_from_slice(CATEGORIES[j].as_bytes());
            rules.push(b' ');
            applied[j] = true;
        }
        let u = universe();
        for &t in &u.top {
            self.describe_single(&mut fake, t, &mut rules);
        }
        rules.pop();
        rules
    }

    pub(super) fn describe_single(&self, fake: &mut Selector, id: usize, rules: &mut Vec<u8>) {
        let e = &universe().cmds[id];
        let mine = self.bits.get(id);
        if mine != fake.bits.get(id) {
            rules.push(if mine { b'+' } else { b'-' });
            rules.extend_from_slice(e.spec.name.as_bytes());
            rules.push(b' ');
            fake.change_perm(id, mine);
        }
        for &s in &e.subs {
            self.describe_single(fake, s, rules);
        }
        if !mine {
            for a in self.firstargs.get(&id).into_iter().flatten() {
                rules.push(b'+');
                rules.extend_from_slice(e.spec.name.as_bytes());
                rules.push(b'|');
                rules.extend_from_slice(a);
                rules.push(b' ');
            }
        }
    }

    /// `ACLDescribeSelector`: keys, channels, commands.
    pub(super) fn describe(&self) -> Vec<u8> {
        let mut out = Vec::new();
        if self.allkeys {
            out.extend_from_slice(b"~* ");
        } else {
            for k in &self.keys {
                k.describe(&mut out);
                out.push(b' ');
            }
        }
        if self.allchannels {
            out.extend_from_slice(b"&* ");
        } else {
            out.extend_from_slice(b"resetchannels ");
            for c in &self.channels {
                out.push(b'&');
                out.extend_from_slice(c);
                out.push(b' ');
            }
        }
        out.extend(self.describe_commands());
        out
    }

    /// `ACL GETUSER`'s `keys` field.
    pub(super) fn keys_field(&self) -> Vec<u8> {
        if self.allkeys {
            return b"~*".to_vec();
        }
        let mut out = Vec::new();
        for (i, k) in self.keys.iter().enumerate() {
            if i > 0 {
                out.push(b' ');
            }
            k.describe(&mut out);
        }
        out
    }

    /// `ACL GETUSER`'s `channels` field.
    pub(super) fn channels_field(&self) -> Vec<u8> {
        if self.allchannels {
            return b"&*".to_vec();
        }
        let mut out = Vec::new();
        for (i, c) in self.channels.iter().enumerate() {
            if i > 0 {
                out.push(b' ');
            }
            out.push(b'&');
            out.extend_from_slice(c);
        }
        out
    }

    pub(super) fn getuser_fields(&self) -> Vec<(Reply, Reply)> {
        vec![
            (
                Reply::bulk("commands"),
                Reply::bulk(self.describe_commands()),
            ),
            (Reply::bulk("keys"), Reply::bulk(self.keys_field())),
            (Reply::bulk("channels"), Reply::bulk(self.channels_field())),
        ]
    }

    pub(super) fn key_ok(&self, key: &[u8], need: u8) -> bool {
        self.allkeys
            || self
                .keys
                .iter()
                .any(|p| p.perm & need == need && crate::notify::glob_match(&p.pattern, key, false))
    }

    pub(super) fn channel_ok(&self, channel: &[u8], pattern: bool) -> bool {
        self.allchannels
            || self.channels.iter().any(|p| {
                if pattern {
                    cstr(p) == cstr(channel)
                } else {
                    crate::notify::glob_match(p, channel, false)
                }
            })
    }

    /// `ACLSelectorCheckCmd`: `Err((reason, argument index))`.
    pub(super) fn check(
        &self,
        id: usize,
        args: &[Vec<u8>],
        keys: &[KeyRef],
        channels: &[ChannelRef],
    ) -> Result<(), (DenyReason, usize)> {
        let e = &universe().cmds[id];
        if !self.allcommands && !e.spec.has("no_auth") && !self.bits.get(id) {
            let at = if e.parent.is_some() { 2 } else { 1 };
            let allowed = args.len() >= 2
                && self.firstargs.get(&id).is_some_and(|list| {
                    args.get(at)
                        .is_some_and(|a| list.iter().any(|f| cstr(a).eq_ignore_ascii_case(cstr(f))))
                });
            if !allowed {
                return Err((DenyReason::Command, 0));
            }
        }
        if !self.allkeys {
            for k in keys {
                let Some(key) = args.get(k.pos) else { continue };
                let need = if k.read { PERM_R } else { 0 } | if k.write { PERM_W } else { 0 };
                if !self.key_ok(key, need) {
                    return Err((DenyReason::Key, k.pos));
                }
            }
        }
        if !self.allchannels {
            for c in channels {
                let Some(ch) = args.get(c.pos) else { continue };
                if !self.channel_ok(ch, c.pattern) {
                    return Err((DenyReason::Channel, c.pos));
                }
            }
        }
        Ok(())
    }

    /// Whether the selector grants `need` on every key (`~*`, `%R~*`...).
    pub(super) fn unrestricted(&self, need: u8) -> bool {
        self.allkeys
            || self
                .keys
                .iter()
                .any(|p| p.perm & need == need && cstr(&p.pattern) == b"*")
    }
}
