//! Pub/sub and keyspace notifications, as Redis has them (RESP2 forms).
//!
//! The patterns, the flags of `notify-keyspace-events` and the events
//! themselves are [`crate::notify`]'s.
//!
//! * [`Registry`]: the channels, patterns and shard channels each
//!   connection subscribed to; [`Registry::publish`], [`Registry::spublish`]
//!   and [`Registry::notify`] hand each receiver its message as RESP bytes
//!   (`message` / `pmessage` / `smessage` arrays).
//!
//! The configuration and the subscriptions belong to one member and are
//! not replicated (as in Redis, where every replica has its own
//! `notify-keyspace-events` and its own subscribers). A member with no
//! subscriber queues no events at all.

use crate::notify::{glob_match, KeyEvent, NotifyFlags, SHARD_MESSAGE};
use crate::resp::{write_bulk, write_header};
use std::collections::{BTreeMap, BTreeSet};

/// The database every channel names (xlane kv has only database 0).
pub const KEYSPACE_PREFIX: &[u8] = b"__keyspace@0__:";
/// The prefix of the key-event channels.
pub const KEYEVENT_PREFIX: &[u8] = b"__keyevent@0__:";

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

/// What a subscription names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A channel (`SUBSCRIBE`).
    Channel,
    /// A glob pattern of channels (`PSUBSCRIBE`).
    Pattern,
    /// A shard channel (`SSUBSCRIBE`): reached only by `SPUBLISH`.
    Shard,
}

impl Kind {
    /// The (un)subscription replies' first word.
    fn words(self) -> (&'static str, &'static str) {
        match self {
            Kind::Channel => ("subscribe", "unsubscribe"),
            Kind::Pattern => ("psubscribe", "punsubscribe"),
            Kind::Shard => ("ssubscribe", "sunsubscribe"),
        }
    }

    fn at(self) -> usize {
        self as usize
    }
}

/// What one connection subscribed to, per [`Kind`].
#[derive(Debug, Default)]
struct Subs([BTreeSet<Vec<u8>>; 3]);

/// The subscriptions of one member's connections.
#[derive(Debug, Default)]
pub struct Registry {
    /// Per [`Kind`], each name and its subscribers.
    index: [BTreeMap<Vec<u8>, BTreeSet<u64>>; 3],
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

    /// The channels (or shard channels) someone subscribes to, in order.
    pub fn channels(&self, kind: Kind) -> impl Iterator<Item = &[u8]> {
        self.index[kind.at()].keys().map(|c| c.as_slice())
    }

    /// How many subscriptions a message to `channel` reaches: its
    /// subscribers and every matching pattern's (`PUBLISH`'s reply).
    pub fn receivers(&self, channel: &[u8]) -> usize {
        self.subscribers(channel, Kind::Channel)
            + self.index[Kind::Pattern.at()]
                .iter()
                .filter(|(p, _)| glob_match(p, channel, false))
                .map(|(_, set)| set.len())
                .sum::<usize>()
    }

    /// How many connections subscribe to `name` as `kind`.
    pub fn subscribers(&self, name: &[u8], kind: Kind) -> usize {
        self.index[kind.at()].get(name).map_or(0, |s| s.len())
    }

    /// How many patterns someone subscribes to.
    pub fn patterns(&self) -> usize {
        self.index[Kind::Pattern.at()].len()
    }

    /// Whether connection `conn` subscribes to anything (then, in RESP2,
    /// it takes only the subscription commands, `PING` and `QUIT`).
    pub fn subscribed(&self, conn: u64) -> bool {
        self.conns.contains_key(&conn)
    }

    /// Connection `conn`'s count of `kind`'s subscriptions, as a
    /// (un)subscription reply gives it: channels plus patterns, or shard
    /// channels, as in Redis.
    fn count_for(&self, conn: u64, kind: Kind) -> usize {
        let (c, p, s) = self.counts(conn);
        match kind {
            Kind::Shard => s,
            _ => c + p,
        }
    }

    /// Channels, patterns and shard channels of connection `conn`, apart.
    pub fn counts(&self, conn: u64) -> (usize, usize, usize) {
        self.conns
            .get(&conn)
            .map_or((0, 0, 0), |s| (s.0[0].len(), s.0[1].len(), s.0[2].len()))
    }

    /// Subscribes `conn` to each of `names` as `kind`; the replies, one
    /// per name.
    pub fn subscribe(&mut self, conn: u64, names: &[Vec<u8>], kind: Kind) -> Vec<u8> {
        let mut out = Vec::new();
        for n in names {
            let subs = self.conns.entry(conn).or_default();
            if subs.0[kind.at()].insert(n.clone()) {
                self.index[kind.at()]
                    .entry(n.clone())
                    .or_default()
                    .insert(conn);
            }
            out.extend(subscription_reply(
                kind.words().0,
                Some(n),
                self.count_for(conn, kind),
            ));
        }
        out
    }

    /// Unsubscribes `conn` from `names` of `kind`, or from all of that
    /// kind when `names` is empty; the replies, one per name (one with a
    /// nil name when there was nothing to leave).
    pub fn unsubscribe(&mut self, conn: u64, names: &[Vec<u8>], kind: Kind) -> Vec<u8> {
        let word = kind.words().1;
        let names: Vec<Vec<u8>> = if names.is_empty() {
            self.conns
                .get(&conn)
                .map(|s| s.0[kind.at()].iter().cloned().collect())
                .unwrap_or_default()
        } else {
            names.to_vec()
        };
        let mut out = Vec::new();
        if names.is_empty() {
            out.extend(subscription_reply(word, None, self.count_for(conn, kind)));
        }
        for n in &names {
            self.leave(conn, n, kind);
            out.extend(subscription_reply(
                word,
                Some(n),
                self.count_for(conn, kind),
            ));
        }
        if self.counts(conn) == (0, 0, 0) {
            self.conns.remove(&conn);
        }
        out
    }

    fn leave(&mut self, conn: u64, name: &[u8], kind: Kind) {
        if let Some(subs) = self.conns.get_mut(&conn) {
            subs.0[kind.at()].remove(name);
        }
        let index = &mut self.index[kind.at()];
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
            for (kind, names) in [Kind::Channel, Kind::Pattern, Kind::Shard]
                .into_iter()
                .zip(subs.0)
            {
                for n in names {
                    self.leave(conn, &n, kind);
                }
            }
        }
    }

    /// Hands `message` on shard channel `channel` to its subscribers
    /// (`smessage` arrays; no pattern matches a shard channel). Returns how
    /// many were handed out.
    pub fn spublish(
        &self,
        channel: &[u8],
        message: &[u8],
        deliver: &mut dyn FnMut(u64, Vec<u8>),
    ) -> usize {
        let Some(set) = self.index[Kind::Shard.at()].get(channel) else {
            return 0;
        };
        for &conn in set {
            let mut out = Vec::new();
            encode_bulks(&[b"smessage", channel, message], &mut out);
            deliver(conn, out);
        }
        set.len()
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
        if let Some(set) = self.index[Kind::Channel.at()].get(channel) {
            for &conn in set {
                let mut out = Vec::new();
                encode_bulks(&[b"message", channel, message], &mut out);
                deliver(conn, out);
                n += 1;
            }
        }
        for (pat, set) in &self.index[Kind::Pattern.at()] {
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
        if let Some(m) = &ev.message {
            match ev.event {
                SHARD_MESSAGE => self.spublish(&ev.key, m, deliver),
                _ => self.publish(&ev.key, m, deliver),
            };
            return;
        }
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

    fn decode_all(mut b: &[u8]) -> Vec<Reply> {
        let mut out = Vec::new();
        while let Some((r, n)) = decode_reply(b).expect("valid RESP") {
            out.push(r);
            b = &b[n..];
        }
        assert!(b.is_empty());
        out
    }

    fn bulks3(kind: &str, name: &str, count: i64) -> Reply {
        Reply::Array(Some(vec![
            Reply::bulk(kind.to_string()),
            Reply::bulk(name.to_string()),
            Reply::Integer(count),
        ]))
    }

    fn bulks(v: &[&str]) -> Reply {
        Reply::Array(Some(v.iter().map(|s| Reply::bulk(*s)).collect()))
    }

    #[test]
    fn subscriptions_count_and_messages_reach_their_subscribers() {
        let mut r = Registry::new();
        let sub = decode_all(&r.subscribe(1, &[b"a".to_vec(), b"b".to_vec()], Kind::Channel));
        assert_eq!(sub.len(), 2);
        assert_eq!(
            sub[1],
            Reply::Array(Some(vec![
                Reply::bulk("subscribe"),
                Reply::bulk("b"),
                Reply::Integer(2)
            ]))
        );
        let _ = r.subscribe(2, &[b"__keyspace@0__:k*".to_vec()], Kind::Pattern);
        let mut got = Vec::new();
        let n = r.publish(b"a", b"hi", &mut |c, b| got.push((c, decode_all(&b))));
        assert_eq!(n, 1);
        assert_eq!(got, vec![(1, vec![bulks(&["message", "a", "hi"])])]);
        got.clear();
        let ev = KeyEvent {
            message: None,
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
        let un = decode_all(&r.unsubscribe(1, &[], Kind::Channel));
        assert_eq!(un.len(), 2);
        assert_eq!(r.counts(1), (0, 0, 0));
        let none = decode_all(&r.unsubscribe(1, &[], Kind::Channel));
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
        // Shard channels: counted apart, reached only by SPUBLISH (as
        // `smessage`), never by a pattern or PUBLISH.
        let _ = r.subscribe(3, &[b"a*".to_vec()], Kind::Pattern);
        let s = decode_all(&r.subscribe(3, &[b"ab".to_vec()], Kind::Shard));
        assert_eq!(s, vec![bulks3("ssubscribe", "ab", 1)]);
        assert_eq!(r.counts(3), (0, 1, 1));
        got.clear();
        assert_eq!(
            r.spublish(b"ab", b"m", &mut |c, b| got.push((c, decode_all(&b)))),
            1
        );
        assert_eq!(got, vec![(3, vec![bulks(&["smessage", "ab", "m"])])]);
        assert_eq!(r.subscribers(b"ab", Kind::Shard), 1);
        assert_eq!(r.subscribers(b"ab", Kind::Channel), 0);
        assert_eq!(r.receivers(b"ab"), 1, "the pattern only");
        let un = decode_all(&r.unsubscribe(3, &[], Kind::Shard));
        assert_eq!(un, vec![bulks3("sunsubscribe", "ab", 0)]);
        assert!(r.subscribed(3), "still on its pattern");
        let _ = r.unsubscribe(3, &[], Kind::Pattern);
        assert!(!r.subscribed(3));
        assert!(r.is_empty());
        assert_eq!(r.publish(b"a", b"x", &mut |_, _| panic!("no one left")), 0);
    }
}
