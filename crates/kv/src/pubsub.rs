//! Pub/sub and keyspace notifications, as Redis has them (RESP2 forms).
//!
//! * [`glob_match`]: Redis' glob patterns (`*`, `?`, `[abc]`, `[^a-z]`,
//!   `\x`), for `PSUBSCRIBE` and `CONFIG GET`. Linear in the pattern times
//!   the subject (one backtracking point, at the last `*`), whatever the
//!   input.
//! * [`NotifyFlags`]: the value of `notify-keyspace-events` (`K`, `E`, `g`,
//!   `$`, `A`, ...), parsed and printed as Redis does.
//! * [`KeyEvent`]: one event of an applied write (`set`, `del`, `expire`,
//!   ...), queued by the [`crate::store::Store`] on every member when the
//!   write is applied, leader and followers alike.
//! * [`Registry`]: the channels and patterns each connection subscribed
//!   to; [`Registry::publish`] and [`Registry::notify`] hand each receiver
//!   its message as RESP bytes (`message` / `pmessage` arrays).
//!
//! The configuration and the subscriptions belong to one member and are
//! not replicated (as in Redis, where every replica has its own
//! `notify-keyspace-events` and its own subscribers). A member with no
//! subscriber queues no events at all.

use crate::resp::{write_bulk, write_header};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

/// The database every channel names (xlane kv has only database 0).
pub const KEYSPACE_PREFIX: &[u8] = b"__keyspace@0__:";
/// The prefix of the key-event channels.
pub const KEYEVENT_PREFIX: &[u8] = b"__keyevent@0__:";

/// Does `subject` match Redis glob `pattern`? `*` any sequence, `?` any
/// byte, `[...]` a set (`^` first negates, `a-z` ranges, `\` escapes), `\x`
/// the byte `x`; an unclosed `[` runs to the end of the pattern. With
/// `nocase`, ASCII letters match either case.
pub fn glob_match(pattern: &[u8], subject: &[u8], nocase: bool) -> bool {
    let (mut p, mut s) = (0usize, 0usize);
    // Where to resume after the last `*`: (pattern after it, subject start).
    let mut star: Option<(usize, usize)> = None;
    loop {
        if p < pattern.len() {
            if pattern[p] == b'*' {
                while p < pattern.len() && pattern[p] == b'*' {
                    p += 1;
                }
                if p == pattern.len() {
                    return true;
                }
                star = Some((p, s));
                continue;
            }
            if s < subject.len() {
                if let Some(len) = match_one(&pattern[p..], subject[s], nocase) {
                    p += len;
                    s += 1;
                    continue;
                }
            }
        } else if s == subject.len() {
            return true;
        }
        // Mismatch: let the last `*` take one more byte, if it can.
        match star {
            Some((sp, ss)) if ss < subject.len() => {
                star = Some((sp, ss + 1));
                p = sp;
                s = ss + 1;
            }
            _ => return false,
        }
    }
}

/// Matches the pattern token at the start of `pat` (not `*`, not empty)
/// against byte `c`: the token's length if it matches.
fn match_one(pat: &[u8], c: u8, nocase: bool) -> Option<usize> {
    let fold = |b: u8| if nocase { b.to_ascii_lowercase() } else { b };
    match pat[0] {
        b'?' => Some(1),
        b'[' => {
            let mut i = 1;
            let negate = pat.get(i) == Some(&b'^');
            if negate {
                i += 1;
            }
            let mut hit = false;
            while i < pat.len() && pat[i] != b']' {
                if pat[i] == b'\\' && i + 1 < pat.len() {
                    hit |= fold(pat[i + 1]) == fold(c);
                    i += 2;
                } else if i + 2 < pat.len() && pat[i + 1] == b'-' && pat[i + 2] != b']' {
                    let (mut lo, mut hi) = (fold(pat[i]), fold(pat[i + 2]));
                    if lo > hi {
                        std::mem::swap(&mut lo, &mut hi);
                    }
                    hit |= (lo..=hi).contains(&fold(c));
                    i += 3;
                } else {
                    hit |= fold(pat[i]) == fold(c);
                    i += 1;
                }
            }
            // Past the `]` (or at the end of an unclosed set).
            let len = (i + 1).min(pat.len());
            (hit != negate).then_some(len)
        }
        b'\\' if pat.len() >= 2 => (fold(pat[1]) == fold(c)).then_some(2),
        b => (fold(b) == fold(c)).then_some(1),
    }
}

/// The value of `notify-keyspace-events`: which channels (`K`, `E`) carry
/// which classes of events.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct NotifyFlags(u16);

/// A `notify-keyspace-events` value with a character that is no flag.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid event class character {0:?}: use 'Ag$lshzxeKEtmdn'")]
pub struct FlagsError(pub char);

impl NotifyFlags {
    /// Nothing (the default): no notifications.
    pub const NONE: NotifyFlags = NotifyFlags(0);
    /// `K`: keyspace channels, `__keyspace@0__:<key>`, message the event.
    pub const KEYSPACE: NotifyFlags = NotifyFlags(1 << 0);
    /// `E`: key-event channels, `__keyevent@0__:<event>`, message the key.
    pub const KEYEVENT: NotifyFlags = NotifyFlags(1 << 1);
    /// `g`: generic commands (`del`, `expire`, `persist`, ...).
    pub const GENERIC: NotifyFlags = NotifyFlags(1 << 2);
    /// `$`: string commands (`set`, `append`, `incrby`, ...).
    pub const STRING: NotifyFlags = NotifyFlags(1 << 3);
    /// `l`: list commands (xlane kv has none).
    pub const LIST: NotifyFlags = NotifyFlags(1 << 4);
    /// `s`: set commands (none here).
    pub const SET: NotifyFlags = NotifyFlags(1 << 5);
    /// `h`: hash commands (none here).
    pub const HASH: NotifyFlags = NotifyFlags(1 << 6);
    /// `z`: sorted-set commands (none here).
    pub const ZSET: NotifyFlags = NotifyFlags(1 << 7);
    /// `x`: a key removed because it expired (`expired`).
    pub const EXPIRED: NotifyFlags = NotifyFlags(1 << 8);
    /// `e`: evictions (none here: no `maxmemory`).
    pub const EVICTED: NotifyFlags = NotifyFlags(1 << 9);
    /// `t`: stream commands (none here).
    pub const STREAM: NotifyFlags = NotifyFlags(1 << 10);
    /// `d`: module events (none here).
    pub const MODULE: NotifyFlags = NotifyFlags(1 << 11);
    /// `m`: key misses (accepted; xlane kv sends none, its reads are not
    /// applied writes).
    pub const KEY_MISS: NotifyFlags = NotifyFlags(1 << 12);
    /// `n`: a key was created (`new`; not part of `A`, and not printed
    /// beside it).
    pub const NEW: NotifyFlags = NotifyFlags(1 << 13);
    /// `A`: every class but `m` and `n`.
    pub const ALL: NotifyFlags = NotifyFlags(0b1111_1111_1100);

    /// Each flag's character, in the order Redis prints them.
    const CHARS: [(u8, NotifyFlags); 12] = [
        (b'g', Self::GENERIC),
        (b'$', Self::STRING),
        (b'l', Self::LIST),
        (b's', Self::SET),
        (b'h', Self::HASH),
        (b'z', Self::ZSET),
        (b'x', Self::EXPIRED),
        (b'e', Self::EVICTED),
        (b't', Self::STREAM),
        (b'd', Self::MODULE),
        (b'n', Self::NEW),
        (b'm', Self::KEY_MISS),
    ];

    /// Parses a `notify-keyspace-events` value (any order, repeats
    /// allowed, `""` for none).
    pub fn parse(v: &[u8]) -> Result<NotifyFlags, FlagsError> {
        let mut f = NotifyFlags::NONE;
        for &c in v {
            f.0 |= match c {
                b'A' => Self::ALL.0,
                b'K' => Self::KEYSPACE.0,
                b'E' => Self::KEYEVENT.0,
                _ => match Self::CHARS.iter().find(|(ch, _)| *ch == c) {
                    Some((_, flag)) => flag.0,
                    None => return Err(FlagsError(c as char)),
                },
            };
        }
        Ok(f)
    }

    /// Whether every flag of `o` is set.
    pub fn contains(self, o: NotifyFlags) -> bool {
        self.0 & o.0 == o.0
    }

    /// Both sets' flags.
    pub fn union(self, o: NotifyFlags) -> NotifyFlags {
        NotifyFlags(self.0 | o.0)
    }

    /// The event classes that reach a channel: none unless `K` or `E` is
    /// set (then an applied write queues events of these classes only).
    pub fn classes(self) -> NotifyFlags {
        if self.0 & (Self::KEYSPACE.0 | Self::KEYEVENT.0) == 0 {
            NotifyFlags::NONE
        } else {
            NotifyFlags(self.0 & !(Self::KEYSPACE.0 | Self::KEYEVENT.0))
        }
    }

    /// True when no flag is set.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }
}

impl fmt::Display for NotifyFlags {
    /// As Redis 7's `CONFIG GET` prints it: `A` for all of `A`'s classes
    /// (and then, like Redis, without `n` even when it is set), else each
    /// class; then `K`, `E`, `m`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut s = String::new();
        if self.contains(Self::ALL) {
            s.push('A');
        } else {
            for (c, flag) in Self::CHARS {
                if flag != Self::KEY_MISS && self.contains(flag) {
                    s.push(c as char);
                }
            }
        }
        if self.contains(Self::KEYSPACE) {
            s.push('K');
        }
        if self.contains(Self::KEYEVENT) {
            s.push('E');
        }
        if self.contains(Self::KEY_MISS) {
            s.push('m');
        }
        f.write_str(&s)
    }
}

/// One keyspace event of an applied write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyEvent {
    /// Its class (one flag: [`NotifyFlags::STRING`], ...).
    pub class: NotifyFlags,
    /// Its name, as Redis names it (`set`, `del`, `expire`, `incrby`, ...).
    pub event: &'static str,
    /// The key.
    pub key: Vec<u8>,
}

/// Appends a RESP2 array of bulk strings.
fn encode_bulks(parts: &[&[u8]], out: &mut Vec<u8>) {
    write_header(b'*', parts.len() as i64, out);
    for p in parts {
        write_bulk(p, out);
    }
}

/// The reply of a (un)subscription: `[kind, channel or nil, count]`.
pub fn subscription_reply(kind: &str, channel: Option<&[u8]>, count: usize) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(b"*3\r\n");
    out.extend_from_slice(format!("${}\r\n{kind}\r\n", kind.len()).as_bytes());
    match channel {
        Some(c) => {
            out.extend_from_slice(format!("${}\r\n", c.len()).as_bytes());
            out.extend_from_slice(c);
            out.extend_from_slice(b"\r\n");
        }
        None => out.extend_from_slice(b"$-1\r\n"),
    }
    out.extend_from_slice(format!(":{count}\r\n").as_bytes());
    out
}

/// `PING` on a subscribed connection (RESP2): `["pong", message or ""]`.
pub fn subscribed_pong(message: Option<&[u8]>) -> Vec<u8> {
    let mut out = Vec::new();
    encode_bulks(&[b"pong", message.unwrap_or(b"")], &mut out);
    out
}

/// What one connection subscribed to.
#[derive(Debug, Default)]
struct Subs {
    channels: BTreeSet<Vec<u8>>,
    patterns: BTreeSet<Vec<u8>>,
}

/// The subscriptions of one member's connections.
#[derive(Debug, Default)]
pub struct Registry {
    channels: BTreeMap<Vec<u8>, BTreeSet<u64>>,
    patterns: BTreeMap<Vec<u8>, BTreeSet<u64>>,
    conns: BTreeMap<u64, Subs>,
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Registry {
        Registry::default()
    }

    /// True when no connection subscribes to anything.
    pub fn is_empty(&self) -> bool {
        self.conns.is_empty()
    }

    /// Channels plus patterns of connection `conn` (its subscription count).
    pub fn count(&self, conn: u64) -> usize {
        self.conns
            .get(&conn)
            .map_or(0, |s| s.channels.len() + s.patterns.len())
    }

    /// Channels and patterns of connection `conn`, apart.
    pub fn counts(&self, conn: u64) -> (usize, usize) {
        self.conns
            .get(&conn)
            .map_or((0, 0), |s| (s.channels.len(), s.patterns.len()))
    }

    /// Subscribes `conn` to each of `names` (channels, or glob patterns
    /// when `pattern`); the replies, one per name.
    pub fn subscribe(&mut self, conn: u64, names: &[Vec<u8>], pattern: bool) -> Vec<u8> {
        let kind = if pattern { "psubscribe" } else { "subscribe" };
        let mut out = Vec::new();
        for n in names {
            let subs = self.conns.entry(conn).or_default();
            let (mine, index) = if pattern {
                (&mut subs.patterns, &mut self.patterns)
            } else {
                (&mut subs.channels, &mut self.channels)
            };
            if mine.insert(n.clone()) {
                index.entry(n.clone()).or_default().insert(conn);
            }
            out.extend(subscription_reply(kind, Some(n), self.count(conn)));
        }
        out
    }

    /// Unsubscribes `conn` from `names`, or from all its channels (or
    /// patterns) when `names` is empty; the replies, one per name (one
    /// with a nil name when there was nothing to leave).
    pub fn unsubscribe(&mut self, conn: u64, names: &[Vec<u8>], pattern: bool) -> Vec<u8> {
        let kind = if pattern {
            "punsubscribe"
        } else {
            "unsubscribe"
        };
        let names: Vec<Vec<u8>> = if names.is_empty() {
            self.conns
                .get(&conn)
                .map(|s| {
                    let set = if pattern { &s.patterns } else { &s.channels };
                    set.iter().cloned().collect()
                })
                .unwrap_or_default()
        } else {
            names.to_vec()
        };
        let mut out = Vec::new();
        if names.is_empty() {
            out.extend(subscription_reply(kind, None, self.count(conn)));
        }
        for n in &names {
            self.leave(conn, n, pattern);
            out.extend(subscription_reply(kind, Some(n), self.count(conn)));
        }
        if self.count(conn) == 0 {
            self.conns.remove(&conn);
        }
        out
    }

    fn leave(&mut self, conn: u64, name: &[u8], pattern: bool) {
        if let Some(subs) = self.conns.get_mut(&conn) {
            let mine = if pattern {
                &mut subs.patterns
            } else {
                &mut subs.channels
            };
            mine.remove(name);
        }
        let index = if pattern {
            &mut self.patterns
        } else {
            &mut self.channels
        };
        if let Some(set) = index.get_mut(name) {
            set.remove(&conn);
            if set.is_empty() {
                index.remove(name);
            }
        }
    }

    /// Forgets everything `conn` subscribed to (it closed).
    pub fn drop_conn(&mut self, conn: u64) {
        if let Some(subs) = self.conns.remove(&conn) {
            for c in subs.channels {
                self.leave(conn, &c, false);
            }
            for p in subs.patterns {
                self.leave(conn, &p, true);
            }
        }
    }

    /// Hands `message` on `channel` to every subscriber, as `deliver(conn,
    /// bytes)`: a `message` array per channel subscription, a `pmessage`
    /// array per matching pattern. Returns how many were handed out.
    pub fn publish(
        &self,
        channel: &[u8],
        message: &[u8],
        deliver: &mut dyn FnMut(u64, Vec<u8>),
    ) -> usize {
        let mut n = 0;
        if let Some(set) = self.channels.get(channel) {
            for &conn in set {
                let mut out = Vec::new();
                encode_bulks(&[b"message", channel, message], &mut out);
                deliver(conn, out);
                n += 1;
            }
        }
        for (pat, set) in &self.patterns {
            if glob_match(pat, channel, false) {
                for &conn in set {
                    let mut out = Vec::new();
                    encode_bulks(&[b"pmessage", pat, channel, message], &mut out);
                    deliver(conn, out);
                    n += 1;
                }
            }
        }
        n
    }

    /// Publishes one keyspace event under `flags`: on
    /// `__keyspace@0__:<key>` (message: the event) with `K`, on
    /// `__keyevent@0__:<event>` (message: the key) with `E`, if `flags`
    /// has the event's class.
    pub fn notify(&self, flags: NotifyFlags, ev: &KeyEvent, deliver: &mut dyn FnMut(u64, Vec<u8>)) {
        if !flags.classes().contains(ev.class) || ev.class.is_empty() {
            return;
        }
        if flags.contains(NotifyFlags::KEYSPACE) {
            let mut ch = KEYSPACE_PREFIX.to_vec();
            ch.extend_from_slice(&ev.key);
            self.publish(&ch, ev.event.as_bytes(), deliver);
        }
        if flags.contains(NotifyFlags::KEYEVENT) {
            let mut ch = KEYEVENT_PREFIX.to_vec();
            ch.extend_from_slice(ev.event.as_bytes());
            self.publish(&ch, &ev.key, deliver);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resp::{decode_reply, Reply};

    #[test]
    fn glob_matches_as_redis() {
        // (pattern, subject, nocase, matches)
        let table: &[(&str, &str, bool, bool)] = &[
            ("*", "", false, true),
            ("*", "anything", false, true),
            ("", "", false, true),
            ("", "a", false, false),
            ("a", "", false, false),
            ("h?llo", "hello", false, true),
            ("h?llo", "hllo", false, false),
            ("h*llo", "hllo", false, true),
            ("h*llo", "heeeello", false, true),
            ("h*llo", "hellox", false, false),
            ("h[ae]llo", "hallo", false, true),
            ("h[ae]llo", "hillo", false, false),
            ("h[^e]llo", "hallo", false, true),
            ("h[^e]llo", "hello", false, false),
            ("h[a-b]llo", "hbllo", false, true),
            ("h[b-a]llo", "hallo", false, true),
            ("h[a-b]llo", "hcllo", false, false),
            ("h\\*llo", "h*llo", false, true),
            ("h\\*llo", "hello", false, false),
            ("[\\]]", "]", false, true),
            ("a\\", "a\\", false, true),
            ("[abc", "b", false, true),
            ("[abc", "d", false, false),
            ("*a*b*c", "xaxbxc", false, true),
            ("*a*b*c", "xaxbx", false, false),
            (
                "a*a*a*a*a*a*a*b",
                "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
                false,
                false,
            ),
            (
                "__keyspace@0__:kvbench:*",
                "__keyspace@0__:kvbench:l:17",
                false,
                true,
            ),
            (
                "__keyspace@0__:kvbench:*",
                "__keyspace@0__:other",
                false,
                false,
            ),
            ("NOTIFY*", "notify-keyspace-events", true, true),
            ("NOTIFY*", "notify-keyspace-events", false, false),
            ("[A-C]x", "bx", true, true),
        ];
        for &(p, s, nocase, want) in table {
            assert_eq!(
                glob_match(p.as_bytes(), s.as_bytes(), nocase),
                want,
                "{p:?} ~ {s:?} (nocase {nocase})"
            );
        }
    }

    #[test]
    fn flags_parse_and_print_as_redis() {
        // (value set, what CONFIG GET prints, or the bad character)
        let table: &[(&str, Result<&str, char>)] = &[
            ("", Ok("")),
            ("KEA", Ok("AKE")),
            ("K$", Ok("$K")),
            ("Eg", Ok("gE")),
            ("g$lshzxetdKE", Ok("AKE")),
            // Redis 7.0.15 prints it so: `n` is set but not shown.
            ("AKEmn", Ok("AKEm")),
            ("nK", Ok("nK")),
            ("$$gK", Ok("g$K")),
            ("x", Ok("x")),
            ("Kq", Err('q')),
            ("k", Err('k')),
        ];
        for &(v, want) in table {
            let got = NotifyFlags::parse(v.as_bytes()).map(|f| f.to_string());
            assert_eq!(got, want.map(str::to_string).map_err(FlagsError), "{v:?}");
        }
    }

    #[test]
    fn only_k_or_e_turns_classes_on() {
        let f = |s: &str| NotifyFlags::parse(s.as_bytes()).expect("flags");
        assert_eq!(f("g$").classes(), NotifyFlags::NONE);
        assert_eq!(f("K$").classes(), NotifyFlags::STRING);
        assert!(f("EA").classes().contains(NotifyFlags::GENERIC));
        assert!(!f("EA").classes().contains(NotifyFlags::NEW));
    }

    fn decode_all(mut b: &[u8]) -> Vec<Reply> {
        let mut out = Vec::new();
        while let Some((r, n)) = decode_reply(b).expect("valid RESP") {
            out.push(r);
            b = &b[n..];
        }
        assert!(b.is_empty());
        out
    }

    fn bulks(v: &[&str]) -> Reply {
        Reply::Array(Some(v.iter().map(|s| Reply::bulk(*s)).collect()))
    }

    #[test]
    fn subscriptions_count_and_messages_reach_their_subscribers() {
        let mut r = Registry::new();
        let sub = decode_all(&r.subscribe(1, &[b"a".to_vec(), b"b".to_vec()], false));
        assert_eq!(sub.len(), 2);
        assert_eq!(
            sub[1],
            Reply::Array(Some(vec![
                Reply::bulk("subscribe"),
                Reply::bulk("b"),
                Reply::Integer(2)
            ]))
        );
        let _ = r.subscribe(2, &[b"__keyspace@0__:k*".to_vec()], true);
        let mut got = Vec::new();
        let n = r.publish(b"a", b"hi", &mut |c, b| got.push((c, decode_all(&b))));
        assert_eq!(n, 1);
        assert_eq!(got, vec![(1, vec![bulks(&["message", "a", "hi"])])]);
        got.clear();
        let ev = KeyEvent {
            class: NotifyFlags::STRING,
            event: "set",
            key: b"key1".to_vec(),
        };
        let flags = NotifyFlags::parse(b"K$").expect("flags");
        r.notify(flags, &ev, &mut |c, b| got.push((c, decode_all(&b))));
        assert_eq!(
            got,
            vec![(
                2,
                vec![bulks(&[
                    "pmessage",
                    "__keyspace@0__:k*",
                    "__keyspace@0__:key1",
                    "set"
                ])]
            )]
        );
        // A class not asked for, or no K/E: nothing.
        got.clear();
        r.notify(
            NotifyFlags::parse(b"Kg").expect("flags"),
            &ev,
            &mut |c, b| got.push((c, decode_all(&b))),
        );
        r.notify(
            NotifyFlags::parse(b"A").expect("flags"),
            &ev,
            &mut |c, b| got.push((c, decode_all(&b))),
        );
        assert!(got.is_empty(), "{got:?}");
        // Unsubscribe from everything: one reply per channel, count down.
        let un = decode_all(&r.unsubscribe(1, &[], false));
        assert_eq!(un.len(), 2);
        assert_eq!(r.count(1), 0);
        let none = decode_all(&r.unsubscribe(1, &[], false));
        assert_eq!(
            none,
            vec![Reply::Array(Some(vec![
                Reply::bulk("unsubscribe"),
                Reply::nil(),
                Reply::Integer(0)
            ]))]
        );
        r.drop_conn(2);
        assert!(r.is_empty());
        assert_eq!(r.publish(b"a", b"x", &mut |_, _| panic!("no one left")), 0);
    }
}
