//! Pub/sub under the fault schedule of `kv_faults`: a publisher sends
//! `m0`, `m1`, … on [`CHANNEL`] to whichever member leads (a `PUBLISH` is
//! an op of the log, so every member delivers it to its own subscribers),
//! and one subscriber per member listens there, subscribing again after
//! its member is killed or cut off. [`verify`] checks what each subscriber
//! got in one subscription: every message once, in the order published,
//! and only messages a client published.

use super::{moved_to, Conn, OP_TIMEOUT};
use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use xlane_kv::resp::Reply;

/// The channel.
pub const CHANNEL: &str = "ch";

/// What the publisher saw: numbers acknowledged, and those of unknown
/// outcome.
#[derive(Debug, Default)]
pub struct Published {
    /// Acknowledged.
    pub acked: BTreeSet<u64>,
    /// No known outcome.
    pub unknown: BTreeSet<u64>,
}

/// Publishes until `stop`.
pub fn publisher(members: Vec<SocketAddr>, stop: Arc<AtomicBool>) -> Published {
    let mut p = Published::default();
    let mut target = 0;
    let mut conn: Option<Conn> = None;
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let Some(c) = conn.as_mut() else {
            conn = Conn::try_open(members[target], OP_TIMEOUT);
            if conn.is_none() {
                target = (target + 1) % members.len();
                std::thread::sleep(Duration::from_millis(20));
            }
            continue;
        };
        let m = format!("m{n}");
        match c.try_cmd(&["PUBLISH", CHANNEL, &m]) {
            Some(Reply::Integer(_)) => {
                p.acked.insert(n);
            }
            Some(Reply::Error(e)) if e.starts_with("MOVED ") => {
                if let Some(l) = moved_to(&members, &e) {
                    target = l;
                }
                conn = None;
            }
            _ => {
                p.unknown.insert(n);
                conn = None;
                target = (target + 1) % members.len();
            }
        }
        n += 1;
        std::thread::sleep(Duration::from_millis(2));
    }
    p
}

/// Listens on member `a` until `stop`: the message numbers of each
/// subscription, in the order received.
pub fn subscriber(a: SocketAddr, stop: Arc<AtomicBool>) -> Vec<Vec<u64>> {
    let mut sessions: Vec<Vec<u64>> = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        let Some(mut c) = Conn::try_open(a, OP_TIMEOUT) else {
            std::thread::sleep(Duration::from_millis(50));
            continue;
        };
        match c.try_cmd(&["SUBSCRIBE", CHANNEL]) {
            Some(Reply::Array(Some(_))) => {}
            _ => continue,
        }
        let mut got = Vec::new();
        while !stop.load(Ordering::Relaxed) {
            match c.try_read() {
                Some(Reply::Array(Some(m))) if m.len() == 3 => {
                    let Reply::Bulk(Some(body)) = &m[2] else {
                        panic!("a message {m:?}");
                    };
                    let n = std::str::from_utf8(body)
                        .ok()
                        .and_then(|s| s.strip_prefix('m'))
                        .and_then(|s| s.parse().ok())
                        .unwrap_or_else(|| panic!("a message {m:?}"));
                    got.push(n);
                }
                Some(other) => panic!("a subscriber got {other:?}"),
                // A quiet half second is a timeout, not an end: the
                // member may be cut off for a while; either way, listen
                // again on a fresh connection.
                None => break,
            }
        }
        sessions.push(got);
    }
    sessions
}

/// Checks every subscription's messages; returns a summary line.
pub fn verify(published: &Published, subscribers: &[Vec<Vec<u64>>]) -> String {
    let mut received = 0;
    let mut acked_seen = BTreeSet::new();
    for (i, sessions) in subscribers.iter().enumerate() {
        for got in sessions {
            for w in got.windows(2) {
                assert!(
                    w[0] < w[1],
                    "subscriber {i}: m{} after m{} (out of order or twice)",
                    w[1],
                    w[0]
                );
            }
            for n in got {
                assert!(
                    published.acked.contains(n) || published.unknown.contains(n),
                    "subscriber {i} got m{n}, which no client published"
                );
                if published.acked.contains(n) {
                    acked_seen.insert(*n);
                }
            }
            received += got.len();
        }
    }
    format!(
        "pub/sub: {} publishes acknowledged, {} unknown; {} messages received by {} subscribers, each once and in order; {} of the acknowledged reached a subscriber",
        published.acked.len(),
        published.unknown.len(),
        received,
        subscribers.len(),
        acked_seen.len()
    )
}
