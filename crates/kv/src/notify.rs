//! What an applied write tells the world, and how names are matched:
//! Redis's glob patterns ([`glob_match`], for `PSUBSCRIBE`, `KEYS`, `SCAN
//! MATCH`, `CONFIG GET`, ACL patterns), the value of
//! `notify-keyspace-events` ([`NotifyFlags`], parsed and printed as Redis
//! does) and one event of an applied write ([`KeyEvent`], queued by the
//! [`crate::store::Store`] on every member as the write applies).

use std::fmt;

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

/// [`KeyEvent::event`] of a `PUBLISH`ed message.
pub const MESSAGE: &str = "message";
/// [`KeyEvent::event`] of an `SPUBLISH`ed message.
pub const SHARD_MESSAGE: &str = "smessage";

/// One keyspace event of an applied write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyEvent {
    /// Its class (one flag: [`NotifyFlags::STRING`], ...).
    pub class: NotifyFlags,
    /// Its name, as Redis names it (`set`, `del`, `expire`, `incrby`, ...).
    pub event: &'static str,
    /// The key (for a published message: its channel).
    pub key: Vec<u8>,
    /// A message `PUBLISH`ed to channel `key` (then `class` is empty and
    /// `event` is [`MESSAGE`], or [`SHARD_MESSAGE`] for `SPUBLISH` to shard
    /// channel `key`): queued in the same order as the keyspace events.
    pub message: Option<Vec<u8>>,
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
