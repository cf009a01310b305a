//! The canonical binary form of a [`UserTable`]: what travels in ops and
//! snapshots.

use super::*;

impl UserTable {
    /// The canonical binary form (see [`UserTable::decode`]).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(MAGIC);
        out.push(VERSION);
        out.push(u8::from(self.pubsub_all));
        put_u32(&mut out, self.users.len());
        for u in self.users.values() {
            put_bytes(&mut out, &u.name);
            let flags = u8::from(u.enabled)
                | u8::from(u.nopass) << 1
                | match u.payload {
                    PayloadFlag::Unset => 0,
                    PayloadFlag::Sanitize => 4,
                    PayloadFlag::Skip => 8,
                };
            out.push(flags);
            put_u32(&mut out, u.passwords.len());
            for p in &u.passwords {
                out.extend_from_slice(p);
            }
            put_u32(&mut out, 1 + u.selectors.len());
            for s in u.all_selectors() {
                encode_selector(s, &mut out);
            }
        }
        out
    }

    /// Reads [`UserTable::encode`]'s form; never panics, never allocates
    /// beyond the input's size, and refuses any form `encode` would not
    /// produce (unknown version, a command the table does not know, names
    /// out of order, duplicates, a missing `default` user, trailing bytes).
    pub fn decode(b: &[u8]) -> Result<UserTable, AclDecodeError> {
        let mut r = Reader { b, at: 0 };
        if r.take(MAGIC.len())? != MAGIC {
            return Err(AclDecodeError::Magic);
        }
        let version = r.u8()?;
        if version != VERSION {
            return Err(AclDecodeError::Version(version));
        }
        let pubsub_all = match r.u8()? {
            0 => false,
            1 => true,
            _ => return Err(AclDecodeError::Invalid("pubsub default")),
        };
        let n = r.count(6)?;
        let mut users = BTreeMap::new();
        let mut last: Option<Vec<u8>> = None;
        for _ in 0..n {
            let name = r.bytes()?.to_vec();
            if has_spaces(&name) {
                return Err(AclDecodeError::Invalid("username"));
            }
            if last.as_ref().is_some_and(|l| *l >= name) {
                return Err(AclDecodeError::Invalid("user order"));
            }
            last = Some(name.clone());
            let flags = r.u8()?;
            let payload = match flags >> 2 {
                0 => PayloadFlag::Unset,
                1 => PayloadFlag::Sanitize,
                2 => PayloadFlag::Skip,
                _ => return Err(AclDecodeError::Invalid("user flags")),
            };
            let np = r.count(32)?;
            let mut passwords: Vec<[u8; 32]> = Vec::with_capacity(np);
            for _ in 0..np {
                let mut p = [0u8; 32];
                p.copy_from_slice(r.take(32)?);
                if passwords.contains(&p) {
                    return Err(AclDecodeError::Invalid("duplicate password"));
                }
                passwords.push(p);
            }
            let nopass = flags & 2 != 0;
            if nopass && !passwords.is_empty() {
                return Err(AclDecodeError::Invalid("nopass with passwords"));
            }
            let ns = r.count(17)?;
            if ns == 0 {
                return Err(AclDecodeError::Invalid("no root selector"));
            }
            let root = decode_selector(&mut r)?;
            let mut selectors = Vec::with_capacity(ns - 1);
            for _ in 1..ns {
                selectors.push(decode_selector(&mut r)?);
            }
            users.insert(
                name.clone(),
                User {
                    name,
                    enabled: flags & 1 != 0,
                    nopass,
                    payload,
                    passwords,
                    root,
                    selectors,
                },
            );
        }
        if r.at != b.len() {
            return Err(AclDecodeError::Trailing);
        }
        if !users.contains_key(&b"default"[..]) {
            return Err(AclDecodeError::Invalid("no default user"));
        }
        Ok(UserTable { users, pubsub_all })
    }
}

/// The leading bytes of the binary form.
const MAGIC: &[u8] = b"XACL";
/// The version of the binary form.
const VERSION: u8 = 1;

fn put_u32(out: &mut Vec<u8>, n: usize) {
    out.extend_from_slice(&u32::try_from(n).unwrap_or(u32::MAX).to_le_bytes());
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put_u32(out, b.len());
    out.extend_from_slice(b);
}

fn encode_selector(s: &Selector, out: &mut Vec<u8>) {
    let future = s.bits.get(FUTURE);
    out.push(
        u8::from(s.allkeys)
            | u8::from(s.allchannels) << 1
            | u8::from(s.allcommands) << 2
            | u8::from(future) << 3,
    );
    let u = universe();
    // The commands whose bit differs from the future bit, by name.
    let mut names: Vec<&str> = u
        .cmds
        .iter()
        .enumerate()
        .filter(|(i, _)| s.bits.get(*i) != future)
        .map(|(_, e)| e.spec.name)
        .collect();
    names.sort_unstable();
    put_u32(out, names.len());
    for n in names {
        put_bytes(out, n.as_bytes());
    }
    let mut firstargs: Vec<(&str, &Vec<Vec<u8>>)> = s
        .firstargs
        .iter()
        .map(|(id, list)| (u.cmds[*id].spec.name, list))
        .collect();
    firstargs.sort_unstable_by_key(|(n, _)| *n);
    put_u32(out, firstargs.len());
    for (n, list) in firstargs {
        put_bytes(out, n.as_bytes());
        put_u32(out, list.len());
        for a in list {
            put_bytes(out, a);
        }
    }
    put_u32(out, s.keys.len());
    for k in &s.keys {
        out.push(k.perm);
        put_bytes(out, &k.pattern);
    }
    put_u32(out, s.channels.len());
    for c in &s.channels {
        put_bytes(out, c);
    }
}

fn decode_selector(r: &mut Reader<'_>) -> Result<Selector, AclDecodeError> {
    let flags = r.u8()?;
    if flags >> 4 != 0 {
        return Err(AclDecodeError::Invalid("selector flags"));
    }
    let future = flags & 8 != 0;
    let mut s = Selector::new(flags & 2 != 0);
    s.allkeys = flags & 1 != 0;
    s.allcommands = flags & 4 != 0;
    s.bits = Bits([if future { u64::MAX } else { 0 }; WORDS]);
    let n = r.count(4)?;
    let mut last: Option<&[u8]> = None;
    for _ in 0..n {
        let name = r.bytes()?;
        if last.is_some_and(|l| l >= name) {
            return Err(AclDecodeError::Invalid("command order"));
        }
        last = Some(name);
        let id = std::str::from_utf8(name)
            .ok()
            .and_then(id_of_name)
            .ok_or(AclDecodeError::UnknownCommand)?;
        s.bits.set(id, !future);
    }
    if s.allcommands && (!future || n != 0) {
        return Err(AclDecodeError::Invalid("allcommands without every command"));
    }
    let nf = r.count(8)?;
    let mut last: Option<&[u8]> = None;
    for _ in 0..nf {
        let name = r.bytes()?;
        if last.is_some_and(|l| l >= name) {
            return Err(AclDecodeError::Invalid("first-arg order"));
        }
        last = Some(name);
        let id = std::str::from_utf8(name)
            .ok()
            .and_then(id_of_name)
            .ok_or(AclDecodeError::UnknownCommand)?;
        let e = &universe().cmds[id];
        if e.parent.is_some() || !e.subs.is_empty() {
            return Err(AclDecodeError::Invalid("first-arg of a container"));
        }
        let count = r.count(4)?;
        if count == 0 {
            return Err(AclDecodeError::Invalid("empty first-arg list"));
        }
        let mut list: Vec<Vec<u8>> = Vec::with_capacity(count);
        for _ in 0..count {
            let a = r.bytes()?;
            if a.is_empty() || a.contains(&0) || list.iter().any(|x| x.eq_ignore_ascii_case(a)) {
                return Err(AclDecodeError::Invalid("first-arg"));
            }
            list.push(a.to_vec());
        }
        s.firstargs.insert(id, list);
    }
    let nk = r.count(5)?;
    for _ in 0..nk {
        let perm = r.u8()?;
        let pattern = r.bytes()?;
        if !(1..=3).contains(&perm)
            || has_spaces(pattern)
            || s.keys.iter().any(|k| k.pattern == pattern)
        {
            return Err(AclDecodeError::Invalid("key pattern"));
        }
        s.keys.push(KeyPattern {
            pattern: pattern.to_vec(),
            perm,
        });
    }
    let nc = r.count(4)?;
    for _ in 0..nc {
        let c = r.bytes()?;
        if has_spaces(c) || s.channels.iter().any(|x| x == c) {
            return Err(AclDecodeError::Invalid("channel pattern"));
        }
        s.channels.push(c.to_vec());
    }
    if (s.allkeys && !s.keys.is_empty()) || (s.allchannels && !s.channels.is_empty()) {
        return Err(AclDecodeError::Invalid("patterns with all"));
    }
    Ok(s)
}

/// Why [`UserTable::decode`] refused its input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AclDecodeError {
    /// Not this form.
    Magic,
    /// A version this build does not read.
    Version(u8),
    /// The input ends early.
    Truncated,
    /// Bytes after the table.
    Trailing,
    /// A command name the command table does not have.
    UnknownCommand,
    /// A value the encoder would not write.
    Invalid(&'static str),
}

impl fmt::Display for AclDecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AclDecodeError::Magic => f.write_str("not an ACL table"),
            AclDecodeError::Version(v) => write!(f, "unknown ACL table version {v}"),
            AclDecodeError::Truncated => f.write_str("truncated ACL table"),
            AclDecodeError::Trailing => f.write_str("bytes after the ACL table"),
            AclDecodeError::UnknownCommand => f.write_str("unknown command in ACL table"),
            AclDecodeError::Invalid(what) => write!(f, "invalid ACL table: {what}"),
        }
    }
}

impl std::error::Error for AclDecodeError {}

struct Reader<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], AclDecodeError> {
        let end = self.at.checked_add(n).ok_or(AclDecodeError::Truncated)?;
        let s = self.b.get(self.at..end).ok_or(AclDecodeError::Truncated)?;
        self.at = end;
        Ok(s)
    }

    fn u8(&mut self) -> Result<u8, AclDecodeError> {
        Ok(self.take(1)?[0])
    }

    fn u32(&mut self) -> Result<usize, AclDecodeError> {
        let s = self.take(4)?;
        Ok(u32::from_le_bytes([s[0], s[1], s[2], s[3]]) as usize)
    }

    /// A count of items each at least `min` bytes long: refused when the
    /// rest of the input cannot hold them.
    fn count(&mut self, min: usize) -> Result<usize, AclDecodeError> {
        let n = self.u32()?;
        if n.saturating_mul(min) > self.b.len() - self.at {
            return Err(AclDecodeError::Truncated);
        }
        Ok(n)
    }

    fn bytes(&mut self) -> Result<&'a [u8], AclDecodeError> {
        let n = self.u32()?;
        self.take(n)
    }
}
